/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/sink.h: the update sink a data source pushes data and status into,
 * and the sink that forwards to a store and keeps the data-source status.
 *
 * A data source (streaming, polling, a file) does not write to a store
 * directly: it hands full data sets, single items and deletions to an
 * ld_update_sink, and reports how it is doing with
 * ld_update_sink_update_status(). ld_store_sink_new() makes the sink the SDK
 * uses: it forwards the data to an ld_store and keeps the data-source status
 * that applications read and listen to (the status types are in status.h).
 *
 * The status rules (those of LaunchDarkly's SDKs, made exact):
 *   - A new sink is `initializing` since its creation, with no error.
 *   - Reporting `interrupted` while `initializing` keeps `initializing`: a
 *     source that never worked cannot be interrupted.
 *   - A report that names the current state and gives no error changes
 *     nothing and is not broadcast. Otherwise the status changes and is
 *     broadcast: when the state changes, or when an error is given (also an
 *     error equal to the last one, also with the state unchanged).
 *   - `since` is the time of the last change of state; it is kept when a
 *     report leaves the state as it is (e.g. a new error while interrupted).
 *   - `error` is the last error reported; a report without an error keeps it
 *     (a source that recovers to `valid` still shows what went wrong last).
 *   - A store failure (the store rejects an operation with any code but
 *     LD_EINVAL) reports `interrupted` with a `store_error` whose message is
 *     the store's; the operation's future is rejected like the store's, so
 *     the caller learns of it too. LD_EINVAL means the data given was bad,
 *     not that the store failed: the status stays as it is.
 *   - A successful init does not make the status `valid`: as in the Python
 *     SDK's DataSourceUpdateSinkImpl, the data source reports `valid` itself
 *     (it alone knows whether what it received is complete), and it reports
 *     `valid` again after a store failure once a write has succeeded.
 *   - `off` is reported by a source that has stopped for good; the sink does
 *     not treat it specially (a later report may change it).
 *
 * Thread rules: a sink belongs to the thread that runs its base's loop.
 */
#ifndef LDASYNC_SINK_H
#define LDASYNC_SINK_H

#include <jansson.h>
#include <stdint.h>

#include <ldasync/common.h>
#include <ldasync/future.h>
#include <ldasync/kind.h>
#include <ldasync/status.h>
#include <ldasync/store.h>

LD_BEGIN_DECLS

struct event_base;

/* ------------------------------------------------------------------------- */
/* The update sink interface                                                 */

/** An opaque update sink. Create with ld_store_sink_new() or
 *  ld_update_sink_new(); release with ld_update_sink_free(). @since 0.1.0 */
typedef struct ld_update_sink ld_update_sink;

/** Hands a full data set, {"features": {...}, "segments": {...}} (borrowed),
 *  to the sink. A store sink passes it to ld_store_init(), which validates
 *  it. @return a new reference, fulfilled with no value; rejected with
 *  LD_EINVAL (NULL `all_data`, or as the store rejects it) or the store's
 *  error. NULL only if `sink` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_update_sink_init(ld_update_sink *sink, const json_t *all_data);

/** Hands one item (borrowed) of `kind` to the sink. A store sink passes it to
 *  ld_store_upsert(). @return a new reference, fulfilled with a bool: true if
 *  the item was applied, false if what is stored is as new or newer;
 *  rejected with LD_EINVAL (NULL `kind` or `item`, or as the store rejects
 *  it) or the store's error. NULL only if `sink` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_update_sink_upsert(ld_update_sink *sink, const ld_kind *kind,
                                           const json_t *item);

/** Hands the deletion of `key` (borrowed) at `version` to the sink. A store
 *  sink passes it to ld_store_delete(). @return a new reference, fulfilled
 *  with a bool: true if applied; rejected with LD_EINVAL (NULL `kind` or
 *  `key`, or as the store rejects it: empty key, "$valid" or
 *  "$flagsState", negative version) or the
 *  store's error. NULL only if `sink` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_update_sink_delete(ld_update_sink *sink, const ld_kind *kind,
                                           const char *key, int64_t version);

/** Reports the data source's state and, optionally, an error, given by the
 *  rules of status.h (borrowed and copied; time_ms 0 means "now"). A store
 *  sink applies the rules at the top of this file. Never calls a listener
 *  from inside this call.
 *  @return 0; LD_EINVAL if `sink` is NULL, `state` is no ld_data_source_state, or
 *  `error` is not valid by the rules of status.h (nothing changes then);
 *  LD_ENOMEM (nothing changes either). @since 0.1.0 */
LD_EXPORT int ld_update_sink_update_status(ld_update_sink *sink, enum ld_data_source_state state,
                                           const ld_data_source_error_info *error);

/** Frees the sink and its implementation (ops->free). Operations already
 *  handed on complete as they would have (a store sink does not cancel what
 *  it gave the store), but change no status and call no listener any more;
 *  broadcasts still queued are dropped. Safe from inside a listener of the
 *  sink and from inside a callback of its futures. NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_update_sink_free(ld_update_sink *sink);

/* ------------------------------------------------------------------------- */
/* For implementers                                                          */

/** The version of struct ld_update_sink_ops this header describes.
 *  @since 0.1.0 */
#define LD_UPDATE_SINK_OPS_VERSION 1

/** What an implementation provides. init, upsert and del receive `out`, a
 *  pending future they own (one reference): they must complete it (now or
 *  later, from the loop) and release it, with the results described above.
 *  Pointers given are never NULL (the front layer rejects NULL with
 *  LD_EINVAL) and borrowed; items are not validated further (a store does
 *  that; other implementations may use ld_item_parse() and
 *  ld_data_validate()). update_status gets a valid state and, if not NULL, a
 *  valid error (borrowed for the call) whose time is set and whose message
 *  is not NULL; it returns 0 or a negative LD_E* code.
 *  `free` may be NULL. @since 0.1.0 */
struct ld_update_sink_ops {
    int version; /* LD_UPDATE_SINK_OPS_VERSION */
    void (*init)(void *impl, const json_t *all_data, ld_future *out);
    void (*upsert)(void *impl, const ld_kind *kind, const json_t *item, ld_future *out);
    void (*del)(void *impl, const ld_kind *kind, const char *key, int64_t version, ld_future *out);
    int (*update_status)(void *impl, enum ld_data_source_state state,
                         const ld_data_source_error_info *error);
    void (*free)(void *impl);
};

/** Makes a sink from an implementation. `ops` is borrowed and must outlive
 *  the sink (usually a static const struct); `impl` is handed to every
 *  operation and to ops->free. @return a new sink; NULL if `base` or `ops`
 *  is NULL, ops->version is not one this library knows, a required operation
 *  (all but free) is missing, or memory ran out (ops->free(impl) is not
 *  called then). @since 0.1.0 */
LD_EXPORT ld_update_sink *ld_update_sink_new(struct event_base *base,
                                             const struct ld_update_sink_ops *ops, void *impl);

/* ------------------------------------------------------------------------- */
/* The store sink                                                            */

/** A sink that forwards init, upsert and delete to `store` (on the store's
 *  base) and keeps the data-source status by the rules at the top of this
 *  file. The store is borrowed: it must outlive the sink and every operation
 *  issued through it (free the sink, let the loop run, then free the
 *  store); the sink never closes or frees it. @return a new sink; NULL if
 *  `store` is NULL or memory ran out. @since 0.1.0 */
LD_EXPORT ld_update_sink *ld_store_sink_new(ld_store *store);

/** Reads the current status of a store sink into *out. out->error, if not
 *  NULL, and its message are borrowed: valid until the status next changes
 *  (a call of ld_update_sink_update_status(), or a store failure seen from
 *  the loop) or the sink is freed. @return 0; LD_EINVAL if `sink` or `out`
 *  is NULL or `sink` is not a store sink. @since 0.1.0 */
LD_EXPORT int ld_store_sink_status(const ld_update_sink *sink, ld_data_source_status *out);

/** A status listener. `status` and everything it points to are borrowed for
 *  the duration of the call. `sink` is the sink it listens to: the listener
 *  may remove itself or other listeners, add listeners (they hear later
 *  broadcasts only), report a status (heard later, never re-entrantly) or
 *  free the sink (no listener is called after that). @since 0.1.0 */
typedef void (*ld_data_source_status_fn)(ld_update_sink *sink, const ld_data_source_status *status,
                                         void *arg);

/** Adds a listener to a store sink. Every broadcast made after this call
 *  (and before the listener is removed) calls `fn(sink, status, arg)` exactly
 *  once, from the loop, never inside the call that made the broadcast, with
 *  the status as it was when the broadcast was made. Broadcasts reach
 *  listeners in the order they were made, and each broadcast reaches the
 *  listeners in the order they were added.
 *  @return the listener's id (> 0, never reused by this sink); LD_EINVAL if
 *  `sink` or `fn` is NULL or `sink` is not a store sink; LD_ENOMEM.
 *  @since 0.1.0 */
LD_EXPORT int64_t ld_store_sink_add_listener(ld_update_sink *sink, ld_data_source_status_fn fn,
                                             void *arg);

/** Removes a listener: it is not called again, also not for broadcasts
 *  already queued. Safe from inside any listener. @return 0; LD_EINVAL if
 *  `sink` is NULL or not a store sink, or `id` is not a listener of it
 *  (e.g. already removed). @since 0.1.0 */
LD_EXPORT int ld_store_sink_remove_listener(ld_update_sink *sink, int64_t id);

LD_END_DECLS

#endif /* LDASYNC_SINK_H */
