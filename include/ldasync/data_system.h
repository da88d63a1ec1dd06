/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/data_system.h: the data system, which runs data sources and keeps
 * a store up to date with what they deliver.
 *
 * A data system owns a list of initializers and at most one synchronizer
 * (fdv2.h). When started it tries the initializers in order until one
 * fetches a basis, applies that basis to the store, then runs the
 * synchronizer: it asks for updates one after the other and applies each.
 * With no initializer, or when every initializer fails, the synchronizer
 * alone brings the data. Everything goes through a store sink (sink.h), so
 * the data-source status is kept by the rules of sink.h:
 *   - a full change set ("xfer-full") replaces all the data with the
 *     store's init; a change set of changes ("xfer-changes") is applied with
 *     upsert and delete, in order; "none" changes nothing;
 *   - an update's state and error are reported to the sink once its change
 *     set (if any) is applied; a basis that was applied reports `valid`;
 *   - a synchronizer whose next is rejected with LD_ECLOSED has ended: the
 *     status becomes `off` (unless the data system is closing) and the data
 *     held stays; another rejection is reported as `interrupted` with an
 *     `unknown` error, and the data system asks again after a delay (1 s,
 *     doubling up to 30 s, back to 1 s after an update;
 *     ld_data_system_set_retry_delay() changes these);
 *   - an initializer whose fetch is rejected is reported as `interrupted`
 *     with an `unknown` error and the rejection's message (which leaves
 *     `initializing` as it is, but records the error), and the next one is
 *     tried; a basis that cannot be applied counts as a failed fetch. When
 *     every initializer failed and there is no synchronizer, the status
 *     becomes `off` with the last error;
 *   - a change set that cannot be applied: a store failure is reported by
 *     the sink (`interrupted`, `store_error`); data the store refuses as
 *     invalid (LD_EINVAL) is reported as `interrupted` with an
 *     `invalid_data` error. Either way the update's own state is not
 *     reported (the next update that applies reports `valid` again).
 *
 * Change listeners hear every change the data system applied to the store,
 * item by item, after the store applied it: for a full change set, the
 * difference between the data it replaced and the new data (a put for each
 * item that is new or whose JSON differs, a delete for each item that is
 * gone, with the version above the one it had (INT64_MAX stays INT64_MAX);
 * segments first, then flags,
 * each kind's puts in the change set's order, then its deletes); for
 * changes, each put and delete the store accepted, in the change set's
 * order (a put or delete the store refused as not newer is not heard).
 * This is what a streaming server needs to send `patch` and `delete`
 * events. The data replaced is read with ld_store_all() when the data
 * system starts applying the full change set (only while a change listener
 * exists): the data system is taken to be the store's only writer. A
 * delete in a full change set is stored as a tombstone and heard at its
 * own version when the store held the item.
 *
 * The loop is never held for long, also at 10,000 flags: the data of a
 * full change set is built, and changes are heard, a slice of about 1 ms
 * of work per callback of the loop; what remains in one piece is the
 * store's own init (a few milliseconds for 10,000 flags on the memory
 * store: docs/performance.md).
 * Changes the data system handed to the store before
 * ld_data_system_close() are still heard after it, once applied.
 *
 * Ownership: the data system takes the initializers and the synchronizer
 * given to ld_data_system_new() on every path (they are freed with it, or
 * at once if the call fails); the store is borrowed and must outlive the
 * data system (free the data system, let the loop run, then close and free
 * the store). JSON handed to listeners is borrowed for the call.
 *
 * Thread rules: a data system belongs to the thread that runs its base's
 * loop; every callback runs from that loop, never inside the call that
 * caused it.
 */
#ifndef LDASYNC_DATA_SYSTEM_H
#define LDASYNC_DATA_SYSTEM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include <ldasync/common.h>
#include <ldasync/fdv2.h>
#include <ldasync/future.h>
#include <ldasync/kind.h>
#include <ldasync/status.h>
#include <ldasync/store.h>

LD_BEGIN_DECLS

struct event_base;

/** A data system. Create with ld_data_system_new(), release with
 *  ld_data_system_free(). @since 0.1.0 */
typedef struct ld_data_system ld_data_system;

/** Makes a data system for `store` and starts it from the loop (not within
 *  the call). `initializers` is an array of `n` initializers (may be NULL
 *  when `n` is 0), tried in order; `synchronizer` may be NULL. The data
 *  sources are stolen on every path; the array itself is borrowed.
 *  @return NULL if `base` or `store` is NULL, an initializer in the array
 *  is NULL, or memory ran out. @since 0.1.0 */
LD_EXPORT ld_data_system *ld_data_system_new(struct event_base *base, ld_store *store,
                                             ld_initializer *const *initializers, size_t n,
                                             ld_synchronizer *synchronizer);

/** A future fulfilled (no value) once the store holds data from a data
 *  source (a basis or a full change set was applied); rejected with the
 *  last error's code and message (an update's error without data counts:
 *  LD_EPARSE for `invalid_data`, LD_ESTORE for `store_error`, else LD_EIO)
 *  when every
 *  source failed (every initializer failed and there is no synchronizer,
 *  or the synchronizer ended before bringing data: LD_ECLOSED when nothing
 *  failed before it ended; LD_ECLOSED too for a data system without any
 *  data source); rejected with LD_ECLOSED when the data system is closed
 *  first, LD_ECANCELED when it is freed first. The same future every time.
 *  @return a new reference; NULL only if `ds` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_data_system_ready(ld_data_system *ds);

/** Reads the data-source status into *out (see ld_store_sink_status() for
 *  how long out->error stays valid). @return 0; LD_EINVAL if `ds` or `out`
 *  is NULL. @since 0.1.0 */
LD_EXPORT int ld_data_system_status(const ld_data_system *ds, ld_data_source_status *out);

/** A status listener: as ld_data_source_status_fn of sink.h, with the data system.
 *  It may remove itself or other listeners, add listeners, close or free
 *  the data system (no listener is called after a free). @since 0.1.0 */
typedef void (*ld_data_system_status_fn)(ld_data_system *ds, const ld_data_source_status *status,
                                         void *arg);

/** Adds a status listener, with the rules of ld_store_sink_add_listener().
 *  @return its id (> 0); LD_EINVAL if `ds` or `fn` is NULL; LD_ENOMEM.
 *  @since 0.1.0 */
LD_EXPORT int64_t ld_data_system_add_status_listener(ld_data_system *ds,
                                                     ld_data_system_status_fn fn, void *arg);

/** Removes a status listener; safe from inside any listener. @return 0;
 *  LD_EINVAL if `ds` is NULL or `id` is not a listener of it.
 *  @since 0.1.0 */
LD_EXPORT int ld_data_system_remove_status_listener(ld_data_system *ds, int64_t id);

/** A change listener: `kind` is ld_kind_features() or ld_kind_segments();
 *  `item` is the item's JSON for a put (borrowed for the call) or NULL for
 *  a delete; `version` is the item's version, or the deletion's.
 *  It may remove itself or other listeners, add listeners (they hear later
 *  changes only), close or free the data system (no listener is called
 *  after a free). @since 0.1.0 */
typedef void (*ld_data_system_change_fn)(ld_data_system *ds, const ld_kind *kind, const char *key,
                                         int64_t version, const json_t *item, void *arg);

/** Adds a change listener: every change of the change sets the data
 *  system starts applying after this call is heard once, from the loop
 *  (never inside a call of the API), in the order the changes were
 *  applied, and each change reaches the listeners in the order they were
 *  added.
 *  @return its id (> 0, never reused); LD_EINVAL if `ds` or `fn` is NULL;
 *  LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int64_t ld_data_system_add_change_listener(ld_data_system *ds,
                                                     ld_data_system_change_fn fn, void *arg);

/** Removes a change listener: it is not called again, also not for changes
 *  already queued. Safe from inside any listener. @return 0; LD_EINVAL if
 *  `ds` is NULL or `id` is not a listener of it. @since 0.1.0 */
LD_EXPORT int ld_data_system_remove_change_listener(ld_data_system *ds, int64_t id);

/** Sets the delay before the synchronizer is asked again after a next was
 *  rejected: `initial_ms` first, doubling after each further rejection up
 *  to `max_ms`, back to `initial_ms` after an update (defaults: 1000 and
 *  30000, as LaunchDarkly's SDKs). Applies from the next rejection on;
 *  tests use it to make the retries quick. @return 0; LD_EINVAL if `ds` is
 *  NULL, `initial_ms` < 0 or `max_ms` < `initial_ms`. @since 0.1.0 */
LD_EXPORT int ld_data_system_set_retry_delay(ld_data_system *ds, int64_t initial_ms,
                                             int64_t max_ms);

/** The store the data system keeps up to date (borrowed), or NULL for
 *  NULL. @since 0.1.0 */
LD_EXPORT ld_store *ld_data_system_store(const ld_data_system *ds);

/** Closes the data system: stops its data sources (their pending results
 *  are dropped), rejects a pending ready future with LD_ECLOSED, and sets
 *  the status `off`. The store is left as it is (not closed).
 *  @return a new reference, fulfilled (no value) once every data source
 *  has stopped; closing twice fulfils again. NULL only if `ds` is NULL.
 *  @since 0.1.0 */
LD_EXPORT ld_future *ld_data_system_close(ld_data_system *ds);

/** Frees the data system and its data sources (stopping them first if
 *  needed): pending futures it returned reject with LD_ECANCELED (from the
 *  loop), changes not heard yet are dropped, no listener is called any
 *  more. Safe from inside any of its listeners and from inside callbacks of
 *  its futures, also after ld_data_system_close(). As with free(), the
 *  data system must not be used (nor freed again) afterwards. NULL-safe.
 *  @since 0.1.0 */
LD_EXPORT void ld_data_system_free(ld_data_system *ds);

/** A synchronizer that reads another store, for daemon mode with the
 *  data in memory: a client or server evaluates from a memory store that
 *  this keeps equal to a shared persistent store (Redis, redis.h) that
 *  another process writes. Every `interval_ms` (> 0; the first read at
 *  once, from the loop) it reads the store's flags and segments and, when
 *  their keys or versions differ from those of its last update, yields a
 *  full transfer of them (state `valid`); a store not initialized yet
 *  yields nothing; a failed read yields one `interrupted` update (error
 *  kind store_error, the store's message) until a read succeeds again.
 *  Reading a large store costs what ld_store_all() costs it twice (a Redis
 *  store parses a slice per loop pass). `store` is borrowed: it must
 *  outlive the synchronizer. Its name is "store". Loop thread of `base`.
 *  @return a new synchronizer; NULL if `base` or `store` is NULL,
 *  interval_ms <= 0, or memory ran out. @since 0.1.0 */
LD_EXPORT ld_synchronizer *ld_store_synchronizer_new(struct event_base *base, ld_store *store,
                                                     int64_t interval_ms);

LD_END_DECLS

#endif /* LDASYNC_DATA_SYSTEM_H */
