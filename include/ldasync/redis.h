/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/redis.h: stores on Redis, in the layout that LaunchDarkly's
 * server SDKs and its Relay Proxy share (libldasync-redis; pkg-config
 * ldasync-redis).
 *
 * The layout, under a prefix ("launchdarkly" unless told otherwise):
 *   {prefix}:features, {prefix}:segments   hashes: field = the item's key,
 *                                          value = the item's JSON (a
 *                                          deleted item is a tombstone,
 *                                          {"key":K,"version":V,"deleted":true};
 *                                          tombstones without "key", as
 *                                          other SDKs write them, are read
 *                                          too);
 *   {prefix}:$inited                       exists once a full data set was
 *                                          written;
 *   {prefix}:big_segments_synchronized_on  big segments: the time of the
 *   {prefix}:big_segment_include:{hash}    last synchronization (epoch ms),
 *   {prefix}:big_segment_exclude:{hash}    and each context's sets of
 *                                          segment references.
 * So an ldasync program reads what another SDK or the Relay Proxy writes,
 * and the other way round.
 *
 * A Redis store is an ld_store (store.h) like any other: its futures
 * complete from the loop of its base, in the order the operations were
 * issued. It talks to Redis through hiredis's asynchronous API on that
 * same loop (one connection, requests pipelined on it; no thread of its
 * own), and never blocks it: host names are resolved with libevent's
 * asynchronous resolver, and a large reply's items are parsed a slice per
 * loop pass. Writes are LaunchDarkly's: an init is one MULTI/EXEC
 * transaction (the namespaces deleted and rewritten, $inited set); an
 * upsert or delete reads the stored version under WATCH and writes in
 * MULTI/EXEC only when its version is newer, again when another writer
 * raced it, ten times at most (then it rejects with LD_ESTORE). An
 * operation that Redis does not answer within the command timeout rejects
 * with LD_ETIMEDOUT, and the connection is dropped and made again.
 * Later operations wait for a write that is under way (so that they see
 * it); reads issued together are pipelined.
 *
 * Availability: the store's status (ld_store_current_status() and status
 * listeners, store.h) says whether Redis answers; when it answers again
 * after it did not (or at last, when it was down at the start), the status
 * also says needs_refresh (Redis may have lost what it held, or missed
 * writes), until an init succeeds: a data system writing into the store
 * then has its data source send the whole data set again. When the connection
 * fails or drops, operations in flight reject with LD_ESTORE (or
 * LD_ETIMEDOUT), the status becomes unavailable, and the store connects
 * again after a delay that doubles from the initial reconnect delay up to
 * the maximum (with jitter), for as long as it lives; while it is not
 * connected, new operations reject at once with LD_ESTORE. Operations
 * issued while a connection is being made wait for it (the connect
 * timeout bounds that).
 *
 * A store that many evaluations read should have a cache in front of it
 * (ld_caching_store_new(), store.h), as LaunchDarkly's SDKs have.
 *
 * Memory: the library's allocation functions (alloc.h) serve everything
 * this library allocates; hiredis allocates its own buffers with malloc()
 * (the version Debian ships has no allocation hook).
 *
 * Thread rules: options may be used from any thread (one at a time); a
 * store belongs to the thread that runs its base's loop.
 */
#ifndef LDASYNC_REDIS_H
#define LDASYNC_REDIS_H

#include <stdint.h>

#include <ldasync/big_segments.h>
#include <ldasync/common.h>
#include <ldasync/store.h>

LD_BEGIN_DECLS

struct event_base;

/** Where and how to reach Redis. The defaults: redis://127.0.0.1:6379/0,
 *  no password, prefix "launchdarkly", connect timeout 2 s, command
 *  timeout 5 s, reconnect delay 100 ms doubling up to 30 s. @since 0.1.0 */
typedef struct ld_redis_options ld_redis_options;

/** @return new options with the defaults; NULL if memory ran out.
 *  @since 0.1.0 */
LD_EXPORT ld_redis_options *ld_redis_options_new(void);

/** Frees them (NULL-safe). Stores made with them keep copies.
 *  @since 0.1.0 */
LD_EXPORT void ld_redis_options_free(ld_redis_options *opts);

/** Sets where Redis is, as a URL:
 *    redis://[[user]:password@]host[:port][/database]   (TCP; host a name,
 *                                                        an IPv4 address,
 *                                                        or [IPv6])
 *    unix:PATH  or  unix://PATH  or  redis+unix://PATH   (a unix socket,
 *                                                        PATH absolute)
 *  A unix socket URL may end in ?db=N (the database). A password in the
 *  URL (percent-decoded) replaces one set before; a user name is not
 *  supported (Redis 6 ACL users): LD_EINVAL. rediss:// (TLS) is not
 *  supported: LD_EINVAL. @return 0; LD_EINVAL for a NULL argument or a
 *  URL it does not accept (nothing changed); LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_redis_options_set_url(ld_redis_options *opts, const char *url);

/** The password sent with AUTH after connecting; NULL or "" for none
 *  (copied). @return 0; LD_EINVAL for NULL options; LD_ENOMEM.
 *  @since 0.1.0 */
LD_EXPORT int ld_redis_options_set_password(ld_redis_options *opts, const char *password);

/** The database selected after connecting (>= 0; 0 by default).
 *  @return 0; LD_EINVAL. @since 0.1.0 */
LD_EXPORT int ld_redis_options_set_database(ld_redis_options *opts, int database);

/** The prefix of every key (copied; not empty, no NUL; "launchdarkly" by
 *  default). @return 0; LD_EINVAL for NULL or ""; LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_redis_options_set_prefix(ld_redis_options *opts, const char *prefix);

/** Milliseconds to connect (name resolution included) and for Redis to
 *  answer a command (both > 0; more than a year counts as a year).
 *  @return 0; LD_EINVAL. @since 0.1.0 */
LD_EXPORT int ld_redis_options_set_timeouts(ld_redis_options *opts, int64_t connect_ms,
                                            int64_t command_ms);

/** The delay before connecting again after a failure (> 0), doubled after
 *  each failure up to `max_ms` (>= initial_ms); more than a year counts as
 *  a year. @return 0; LD_EINVAL. @since 0.1.0 */
LD_EXPORT int ld_redis_options_set_reconnect(ld_redis_options *opts, int64_t initial_ms,
                                             int64_t max_ms);

/** A store on Redis (see above), on `base`'s loop, with a copy of `opts`
 *  (NULL: the defaults). It starts connecting at once. ld_store_describe()
 *  says "redis". Free it with ld_store_free() before event_base_free() of
 *  `base`; closing it (ld_store_close()) lets the operations under way
 *  finish, then disconnects.
 *  @return a new store; NULL if `base` is NULL or memory ran out.
 *  @since 0.1.0 */
LD_EXPORT ld_store *ld_redis_store_new(struct event_base *base, const ld_redis_options *opts);

/** A big segment store (big_segments.h) on Redis, on `base`'s loop, with a
 *  copy of `opts` (NULL: the defaults): read only, what LaunchDarkly's Relay
 *  Proxy keeps there. Its metadata is {prefix}:big_segments_synchronized_on
 *  (missing: LD_BIG_SEGMENT_TIME_UNKNOWN; not a decimal number of
 *  milliseconds: LD_EPARSE); a context's membership is the members of
 *  {prefix}:big_segment_include:{hash} (true) and
 *  {prefix}:big_segment_exclude:{hash} (false; include wins), NULL when both
 *  are empty. Connection, timeouts and reconnection as for the store.
 *  Give it to a client with ld_client_options_set_big_segments(), which
 *  caches memberships and polls the metadata. ld_big_segment_store_describe()
 *  says "redis".
 *  @return a new store; NULL if `base` is NULL or memory ran out.
 *  @since 0.1.0 */
LD_EXPORT ld_big_segment_store *ld_redis_big_segment_store_new(struct event_base *base,
                                                               const ld_redis_options *opts);

LD_END_DECLS

#endif /* LDASYNC_REDIS_H */
