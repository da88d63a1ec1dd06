/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/network.h: the data sources that connect to LaunchDarkly (or to
 * a relay such as ldasync-serve): the streaming synchronizer, the polling
 * initializer and synchronizer, and the settings they share
 * (ld_net_config).
 *
 * They speak LaunchDarkly's first data-source protocol ("FDv1"):
 *   - streaming: GET {stream URI}/all, a stream of server-sent events:
 *     `put` replaces all the data, `patch` puts one flag or segment,
 *     `delete` deletes one (a tombstone at the version given); comments are
 *     heartbeats. Other events are ignored.
 *   - polling: GET {base URI}/sdk/latest-all, the whole data set, asked
 *     again every poll interval (30 s at least) with the ETag of the last
 *     answer (a 304 changes nothing).
 * Each request carries the headers LaunchDarkly's SDKs send: the SDK key as
 * Authorization, a User-Agent of ours ("ldasync/VERSION"),
 * X-LaunchDarkly-Instance-Id (a random UUID per configuration), and, when
 * set, X-LaunchDarkly-Tags and X-LaunchDarkly-Wrapper. A payload filter
 * adds `?filter=KEY`. Bodies may come gzipped.
 *
 * What the sources yield (fdv2.h): a put or a poll is a full change set
 * with state `valid`; a patch or delete a change set of one change with
 * state `valid`; a failure an update without data:
 *   - an HTTP status of 400, 408, 429 or any other outside 4xx (5xx...):
 *     `interrupted` with an `error_response` error and the status; the
 *     stream reconnects, polling asks again at its next interval;
 *   - any other 4xx (401 and 403: the SDK key is refused): `off` with an
 *     `error_response` error, and the source ends (later nexts reject with
 *     LD_ECLOSED): it never retries;
 *   - a connection failure, a read timeout (no byte, not even a heartbeat,
 *     for the stream read timeout, 5 minutes by default), the server ending
 *     the stream: `interrupted`, `network_error`; the stream reconnects;
 *   - data that is not what the protocol says (malformed JSON, a put
 *     without data, an item that is not an object, a version that is not an
 *     integer, a response that is not an event stream): `interrupted`,
 *     `invalid_data`; the stream reconnects, polling tries at its next
 *     interval.
 * The stream reconnects after a delay that doubles from the initial
 * reconnect delay (1 s) up to 30 s, less a random part of up to half,
 * and starts again from the initial delay once a connection stayed up for
 * a minute (as LaunchDarkly's SDKs); the count never overflows, however
 * long it runs. A `retry` field in the stream is ignored, as LaunchDarkly's
 * Python SDK does (its servers send none).
 *
 * The loop is never held for long: a put or a poll body above 64 KiB (10,000
 * flags are megabytes) is parsed on a thread of the source's own (started
 * at the first such body, joined when the source is freed); smaller ones on
 * the loop. That thread needs libevent threading: call
 * evthread_use_pthreads() before event_base_new(), as ldasync-serve does.
 * Without it the big body is parsed from a loop callback of its own, which
 * holds the loop for that long (~25 ms for 10,000 flags).
 * A source with updates that nobody takes keeps at most 4,096 of
 * them; past that the stream restarts (its next put brings everything).
 * An event or a body is at most 256 MiB.
 *
 * HTTP is libcurl's, driven by the loop (no thread of libcurl's but its
 * name resolver's). TLS verifies the server against the system's CAs by
 * default. The program must ignore SIGPIPE (signal(SIGPIPE, SIG_IGN)), as
 * servers do: a connection the peer closed would otherwise kill it.
 *
 * Ownership: the configuration is copied by every source made from it, so
 * it may be changed or freed afterwards. Sources are freed by their
 * owner (a data system or client options take them, fdv2.h).
 *
 * Thread rules: a configuration belongs to one thread at a time; sources,
 * as fdv2.h says, to the thread that runs their base's loop.
 */
#ifndef LDASYNC_NETWORK_H
#define LDASYNC_NETWORK_H

#include <stdbool.h>
#include <stdint.h>

#include <ldasync/common.h>
#include <ldasync/fdv2.h>

LD_BEGIN_DECLS

struct event_base;

/** The default URIs, LaunchDarkly's. @since 0.1.0 */
#define LD_DEFAULT_STREAM_URI "https://stream.launchdarkly.com"
#define LD_DEFAULT_BASE_URI "https://sdk.launchdarkly.com"
#define LD_DEFAULT_EVENTS_URI "https://events.launchdarkly.com"

/** How data sources reach LaunchDarkly. Create with ld_net_config_new(),
 *  release with ld_net_config_free(). @since 0.1.0 */
typedef struct ld_net_config ld_net_config;

/** A configuration for the SDK key `sdk_key` (copied), with the defaults:
 *  LaunchDarkly's URIs, no filter, tags or wrapper, TLS verified against
 *  the system's CAs, the proxy of the environment (as libcurl reads
 *  `http_proxy`, `https_proxy` and `no_proxy`), a connect timeout of 10 s,
 *  a read timeout of 15 s for polls and 5 min for the stream, an initial
 *  reconnect delay of 1 s and a poll interval of 30 s.
 *  @return NULL if `sdk_key` is NULL, empty, longer than 8,192 bytes or
 *  holds a byte outside [A-Za-z0-9._-] (LaunchDarkly's keys never do), or
 *  if memory ran out. @since 0.1.0 */
LD_EXPORT ld_net_config *ld_net_config_new(const char *sdk_key);

/** A copy of `cfg` (its instance ID included). @return NULL if `cfg` is
 *  NULL or memory ran out. @since 0.1.0 */
LD_EXPORT ld_net_config *ld_net_config_copy(const ld_net_config *cfg);

/** Frees the configuration. NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_net_config_free(ld_net_config *cfg);

/* Setters. Each copies its strings and returns 0, or LD_EINVAL (nothing
 * changes) for a NULL `cfg` or the bad values named; LD_ENOMEM (nothing
 * changes). */

/** The streaming service's URI (NULL: LD_DEFAULT_STREAM_URI), "http://" or
 *  "https://" and a host, optionally a port and a path; trailing '/' are
 *  dropped. LD_EINVAL: another scheme, no host, a space or control byte,
 *  or a URI libcurl does not take (a port out of range, an IPv6 address
 *  without its closing bracket, ...). @since 0.1.0 */
LD_EXPORT int ld_net_config_set_stream_uri(ld_net_config *cfg, const char *uri);

/** The polling service's URI (NULL: LD_DEFAULT_BASE_URI), as
 *  ld_net_config_set_stream_uri(). @since 0.1.0 */
LD_EXPORT int ld_net_config_set_base_uri(ld_net_config *cfg, const char *uri);

/** The events service's URI (NULL: LD_DEFAULT_EVENTS_URI), as
 *  ld_net_config_set_stream_uri(). @since 0.1.0 */
LD_EXPORT int ld_net_config_set_events_uri(ld_net_config *cfg, const char *uri);

/** The payload filter's key (NULL: none). LD_EINVAL: empty, or a byte
 *  outside [A-Za-z0-9._-]. @since 0.1.0 */
LD_EXPORT int ld_net_config_set_payload_filter(ld_net_config *cfg, const char *key);

/** The application's ID and version sent as X-LaunchDarkly-Tags (each NULL:
 *  none). LD_EINVAL: a value that is empty, longer than 64 bytes, or holds
 *  a byte outside [A-Za-z0-9._-]. @since 0.1.0 */
LD_EXPORT int ld_net_config_set_application(ld_net_config *cfg, const char *id,
                                            const char *version);

/** The wrapper's name and version sent as X-LaunchDarkly-Wrapper ("name"
 *  or "name/version"); a NULL name removes it. LD_EINVAL: a version without
 *  a name, a value that is empty or holds a control byte or a '/' in
 *  the name. @since 0.1.0 */
LD_EXPORT int ld_net_config_set_wrapper(ld_net_config *cfg, const char *name, const char *version);

/** A PEM file of the CAs to trust instead of the system's (NULL: the
 *  system's). Read when a source connects: a file that cannot be read
 *  makes each connection fail. @since 0.1.0 */
LD_EXPORT int ld_net_config_set_ca_file(ld_net_config *cfg, const char *path);

/** Whether the server's certificate and name are verified (true, the
 *  default). Turning it off is for tests: anyone on the path can then pose
 *  as LaunchDarkly. The library has no log of its own: a program that
 *  turns it off should warn (ldasync-serve does). @since 0.1.0 */
LD_EXPORT int ld_net_config_set_verify_peer(ld_net_config *cfg, bool verify);

/** The proxy, "http://host:port" (NULL: the environment's, as libcurl
 *  reads it; "": none, whatever the environment says). LD_EINVAL: a value
 *  with a space or a control byte. @since 0.1.0 */
LD_EXPORT int ld_net_config_set_proxy(ld_net_config *cfg, const char *url);

/** Timeouts in ms: to connect (TLS included), to read a poll's answer (no
 *  byte for that long ends it), and the stream's read timeout; each <= 0
 *  leaves that one as it is. LD_EINVAL: a value above 24 hours.
 *  @since 0.1.0 */
LD_EXPORT int ld_net_config_set_timeouts(ld_net_config *cfg, int64_t connect_ms, int64_t read_ms,
                                         int64_t stream_read_ms);

/** The stream's first reconnect delay in ms (default 1000; doubling up to
 *  30 s, or up to this delay when it is longer). LD_EINVAL: < 0 or above
 *  one hour. @since 0.1.0 */
LD_EXPORT int ld_net_config_set_reconnect_delay(ld_net_config *cfg, int64_t initial_ms);

/** The poll interval in ms: below 30000 it is 30000, as in LaunchDarkly's
 *  SDKs. LD_EINVAL: <= 0 or above 24 hours. @since 0.1.0 */
LD_EXPORT int ld_net_config_set_poll_interval(ld_net_config *cfg, int64_t ms);

/* Getters: borrowed strings, valid until the setter is called again or
 * the configuration is freed; NULL for a NULL `cfg`. */

/** The SDK key. @since 0.1.0 */
LD_EXPORT const char *ld_net_config_sdk_key(const ld_net_config *cfg);
/** The streaming URI, without trailing '/'. @since 0.1.0 */
LD_EXPORT const char *ld_net_config_stream_uri(const ld_net_config *cfg);
/** The polling URI, without trailing '/'. @since 0.1.0 */
LD_EXPORT const char *ld_net_config_base_uri(const ld_net_config *cfg);
/** The events URI, without trailing '/'. @since 0.1.0 */
LD_EXPORT const char *ld_net_config_events_uri(const ld_net_config *cfg);
/** The instance ID sent as X-LaunchDarkly-Instance-Id: a random UUID made
 *  by ld_net_config_new(). @since 0.1.0 */
LD_EXPORT const char *ld_net_config_instance_id(const ld_net_config *cfg);
/** Whether peers are verified (true for NULL). @since 0.1.0 */
LD_EXPORT bool ld_net_config_verify_peer(const ld_net_config *cfg);

/* ------------------------------------------------------------------------- */
/* Sources                                                                   */

/** The streaming synchronizer (name "streaming"): connects at its first
 *  next, and yields an update per event and per failure, as said above.
 *  `cfg` is copied. @return NULL if `base` or `cfg` is NULL or memory ran
 *  out. @since 0.1.0 */
LD_EXPORT ld_synchronizer *ld_streaming_synchronizer_new(struct event_base *base,
                                                         const ld_net_config *cfg);

/** The polling initializer (name "polling"): each fetch is one GET of
 *  {base URI}/sdk/latest-all; fulfilled with a basis of all the data,
 *  rejected with LD_EIO (a failure, an HTTP status: the message says which)
 *  or LD_EPARSE (a body that is not the data). `cfg` is copied.
 *  @return NULL if `base` or `cfg` is NULL or memory ran out.
 *  @since 0.1.0 */
LD_EXPORT ld_initializer *ld_polling_initializer_new(struct event_base *base,
                                                     const ld_net_config *cfg);

/** The polling synchronizer (name "polling"): polls at once, then every
 *  poll interval after the previous answer; each answer is an update (a
 *  304 an update with state `valid` and no data). `cfg` is copied.
 *  @return NULL if `base` or `cfg` is NULL or memory ran out.
 *  @since 0.1.0 */
LD_EXPORT ld_synchronizer *ld_polling_synchronizer_new(struct event_base *base,
                                                       const ld_net_config *cfg);

LD_END_DECLS

#endif /* LDASYNC_NETWORK_H */
