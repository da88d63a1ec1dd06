/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/store.h: the asynchronous feature store interface.
 *
 * A store holds versioned items (see kind.h) by kind and key. Every operation
 * returns a new reference to a future that completes from the event loop of
 * the store's base; futures of one store complete in the order the
 * operations were issued, whatever the implementation does, also those
 * the front layer answers itself. Bad input is rejected with LD_EINVAL and
 * a message naming the field, before the implementation sees it, and
 * leaves the store unchanged. Keys must be valid UTF-8 (kind.h): get and
 * delete of such a key, an upsert of an item whose "key" is not, and an
 * init with an item or the key it is filed under that is not, reject with
 * LD_EINVAL ("key must be valid UTF-8" and the like), whatever the
 * implementation.
 *
 * Out of memory: an operation that cannot allocate what it needs is
 * rejected with LD_ENOMEM before the implementation hears of it, and leaves
 * the store unchanged. Such a rejection (and only it) may complete ahead of
 * operations issued before it: keeping the order would need the memory
 * that ran out. Functions documented "NULL only if `store` is NULL" keep
 * that promise when memory runs out.
 *
 * Semantics (those of LaunchDarkly's SDK stores, made exact):
 *   - get: fulfils with the item (borrowed JSON, valid while you hold the
 *     future) or with NULL when the key is missing or deleted.
 *   - all: fulfils with an object key -> item without tombstones; the object
 *     is shared and must not be modified.
 *   - upsert, delete: applied only when the stored version is strictly lower
 *     than the new one (equal versions are not applied, a tombstone blocks
 *     older upserts); fulfil with true when applied, false when not. Deleting
 *     an unknown key stores a tombstone.
 *   - init: replaces all data atomically (namespaces absent from the data
 *     become empty) and makes the store initialized.
 *   - initialized: fulfils with false until the first successful init.
 *   - close: graceful; later operations reject with LD_ECLOSED.
 *
 * Items given to a store (init, upsert) are borrowed: the store takes its own
 * references, so they must not be modified afterwards.
 * Each operation gets a future of its own, pending when the call returns
 * (also when the implementation answered at once, and for the front's own
 * LD_EINVAL and LD_ECLOSED answers); its state changes from the loop, so
 * that waiting for one result (ld_future_wait) returns after the callbacks
 * of the results issued before it. Only the store completes it: the caller
 * may cancel it (the operation still happens) but not fulfil or reject it
 * (LD_EALREADY). The one exception is an LD_ENOMEM answer, which may be a
 * complete future shared by the store's operations. Until the loop has run,
 * each result waits for it (64 bytes, also one released at once; what it
 * holds is let go of when it is released, or, once libevent threading is
 * on, when the loop has run): a program that issues millions of operations
 * without letting the loop run holds that much. Freeing the
 * store rejects with LD_ECANCELED the results still queued behind an
 * operation its implementation has not answered (the front's own LD_EINVAL
 * and LD_ECLOSED answers among them); results already answered complete as
 * answered.
 *
 * Thread rules: a store belongs to the thread that runs its base's loop.
 */
#ifndef LDASYNC_STORE_H
#define LDASYNC_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include <ldasync/common.h>
#include <ldasync/future.h>
#include <ldasync/kind.h>

LD_BEGIN_DECLS

struct event_base;

/** An opaque store. Create with an implementation's constructor (e.g.
 *  ld_memory_store_new()) or ld_store_new(); release with ld_store_free().
 *  @since 0.1.0 */
typedef struct ld_store ld_store;

/** Looks up one item. @return a new reference: fulfilled with the item or
 *  NULL (always NULL for "$valid" and "$flagsState": no write can store an
 *  item or tombstone under those keys, kind.h); rejected with LD_EINVAL (NULL store or kind; key
 * NULL, empty or not valid UTF-8), LD_ECLOSED, or the implementation's error. NULL only if `store`
 * is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_store_get(ld_store *store, const ld_kind *kind, const char *key);

/** ld_store_get() answered within the call, without a future, when the
 *  store can: nothing it was asked before still waits for an answer (the
 *  answer must not overtake them), and its implementation answers at once
 *  (the memory store always does, except while a large init loads: see
 *  `get_now` in struct ld_store_ops). For a caller that answers a request
 *  from the item at once, as a server does, and asks ld_store_get() only
 *  when this says LD_EBUSY. Loop thread of the store's base, as every
 *  operation.
 *  @param item set to a new reference to the item (the caller decrefs it),
 *         or to NULL for a missing or deleted item and on every error.
 *  @return 0 with *item set; LD_EBUSY when the store cannot answer within
 *  the call (ask ld_store_get() instead); LD_EINVAL for a NULL store, kind
 *  or item, or a key NULL, empty or not valid UTF-8; LD_ECLOSED once the
 *  store is closed; another negative code: the implementation's error
 *  (LD_ENOMEM, LD_ESTORE, ...). @since 0.1.0 */
LD_EXPORT int ld_store_get_now(ld_store *store, const ld_kind *kind, const char *key,
                               json_t **item);

/** All items of a kind, without tombstones. @return a new reference,
 *  fulfilled with a JSON object (borrowed, immutable); errors as for get.
 *  @since 0.1.0 */
LD_EXPORT ld_future *ld_store_all(ld_store *store, const ld_kind *kind);

/** Replaces all data with `all_data`, {"features": {...}, "segments": {...}}
 *  (borrowed), after validating all of it (ld_data_validate()); nothing
 *  changes if any of it is invalid. A store that validates or loads it
 *  over several passes of the loop (the memory store's big inits, the
 *  Redis store's) holds a reference to it until the future completes: do
 *  not modify `all_data` or the objects in it until then (jansson's
 *  references do not guard against changes; removing or replacing a
 *  namespace or an item meanwhile is a use after free). @return a new
 *  reference, fulfilled with no value. @since 0.1.0 */
LD_EXPORT ld_future *ld_store_init(ld_store *store, const json_t *all_data);

/** Stores `item` (borrowed, validated) if its version is newer. @return a new
 *  reference, fulfilled with a bool: true if applied. @since 0.1.0 */
LD_EXPORT ld_future *ld_store_upsert(ld_store *store, const ld_kind *kind, const json_t *item);

/** Stores a tombstone for `key` (non-empty, valid UTF-8, and neither
 *  "$valid" nor "$flagsState", which no item may have: kind.h) at `version`
 *  (>= 0) if that is newer. @return a new reference, fulfilled with a
 *  bool: true if applied; rejected with LD_EINVAL for such a key ("key must
 *  not be ..."), else errors as for get. @since 0.1.0 */
LD_EXPORT ld_future *ld_store_delete(ld_store *store, const ld_kind *kind, const char *key,
                                     int64_t version);

/** @return a new reference, fulfilled with a bool: true once an init has
 *  succeeded. @since 0.1.0 */
LD_EXPORT ld_future *ld_store_initialized(ld_store *store);

/** ld_store_initialized() answered within the call, without a future, when
 *  the store can: nothing it was asked before still waits for an answer
 *  (the answer must not overtake them), and its implementation answers at
 *  once (the memory store always does; see `initialized_now` in struct
 *  ld_store_ops; an implementation without it is asked through
 *  `initialized`, which then costs a future, and answers if it completes
 *  that within the call). Takes and returns no reference. Loop thread of
 *  the store's base, as every operation.
 *  @return 1 once an init has succeeded, 0 before; LD_EBUSY when the store
 *  cannot answer within the call (ask ld_store_initialized() instead);
 *  LD_EINVAL for a NULL store; LD_ECLOSED once the store is closed;
 *  another negative code: the implementation's error (LD_ENOMEM, LD_ESTORE,
 *  ...). @since 0.1.0 */
LD_EXPORT int ld_store_initialized_now(ld_store *store);

/** Closes the store gracefully (as every `_close` of ldasync; a `_stop`
 *  aborts): operations issued before complete as usual,
 *  later ones reject with LD_ECLOSED. Closing twice fulfils again.
 *  @return a new reference, fulfilled when the implementation has closed.
 *  @since 0.1.0 */
LD_EXPORT ld_future *ld_store_close(ld_store *store);

/** Frees the store: operations still pending reject with LD_ECANCELED (from
 *  the loop), and the implementation is freed: at once, or, when operations
 *  were pending, from the loop after their cancel handlers (which may use
 *  the implementation). Its status listeners go with it: calls not made
 *  yet are dropped. Call it before event_base_free() of the store's
 *  base, as for libevent's own events. Safe from inside a callback of one
 *  of the store's own futures, and from inside a status listener.
 *  NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_store_free(ld_store *store);

/** The base whose loop completes the store's futures, or NULL for a NULL
 *  store. Any thread. @since 0.1.0 */
LD_EXPORT struct event_base *ld_store_base(const ld_store *store);

/** A short name of the implementation ("memory", "redis", ...); never NULL
 *  ("(null)" for a NULL store). @since 0.1.0 */
LD_EXPORT const char *ld_store_describe(const ld_store *store);

/* ------------------------------------------------------------------------- */
/* The status (availability)                                                 */

/** Whether a store can be used now, as every store reports it (the front
 *  layer keeps it for every implementation). A store starts available,
 *  without needs_refresh; an implementation changes it with
 *  ld_store_update_status() (the memory store never does: it is always
 *  available). @since 0.1.0 */
typedef struct ld_store_status {
    /** false while the store's backend fails (a database that cannot be
     *  reached): operations may reject with LD_ESTORE meanwhile. */
    bool available;
    /** true when the store came back but may have lost writes made while it
     *  was away (a cache that let go of what it held, a database that
     *  restarted empty): a data source should send its whole data set again
     *  (an init). Only meaningful with `available`. */
    bool needs_refresh;
} ld_store_status;

/** A status listener: called from the loop of the store's base, once per
 *  change, with the status of that change (borrowed, valid during the call).
 *  It may add and remove listeners (itself included) and free the store.
 *  @since 0.1.0 */
typedef void (*ld_store_status_fn)(ld_store *store, const ld_store_status *status, void *arg);

/** The store's current status: that of the last change, also when its
 *  listeners have not heard of it yet. @return 0 with *out set; LD_EINVAL
 *  if `store` or `out` is NULL. Loop thread of the store's base.
 *  @since 0.1.0 */
LD_EXPORT int ld_store_current_status(const ld_store *store, ld_store_status *out);

/** Adds a listener of the store's status changes: `fn(store, status, arg)`
 *  is called from the loop for every change made after this call (never
 *  for the current status, never within the call that made the change),
 *  once per change, listeners in the order they were added. When memory
 *  runs out while a change is made, the listeners may hear fewer changes,
 *  never an old status last. Freeing the store drops the calls not made
 *  yet, and the listeners. Loop thread of the store's base.
 *  @return the listener's id (> 0), for ld_store_remove_status_listener();
 *  LD_EINVAL if `store` or `fn` is NULL; LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int64_t ld_store_add_status_listener(ld_store *store, ld_store_status_fn fn, void *arg);

/** Removes a listener: it is not called again, also when changes are
 *  already queued for it, and also from inside a listener's call (its own
 *  or another's). Loop thread of the store's base. @return 0; LD_EINVAL if
 *  `store` is NULL or has no listener with that id (removed already).
 *  @since 0.1.0 */
LD_EXPORT int ld_store_remove_status_listener(ld_store *store, int64_t id);

/* ------------------------------------------------------------------------- */
/* The read-only view                                                        */

/** The read path of a store: get and all only. Evaluators and other code
 *  that must not write take one of these, so that what they can do shows in
 *  their signature. A view belongs to its store: it is valid while the
 *  store lives and is not freed on its own. @since 0.1.0 */
typedef struct ld_read_only_store ld_read_only_store;

/** The read-only view of `store` (any implementation), or NULL for a NULL
 *  store. The same view every time; no allocation. Any thread.
 *  @since 0.1.0 */
LD_EXPORT ld_read_only_store *ld_store_read_only(ld_store *store);

/** ld_store_get() through the view: the same future, in issue order with
 *  every other operation of the store (writes included). NULL only if
 *  `view` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_read_only_store_get(ld_read_only_store *view, const ld_kind *kind,
                                            const char *key);

/** ld_store_all() through the view, as ld_read_only_store_get() is.
 *  @since 0.1.0 */
LD_EXPORT ld_future *ld_read_only_store_all(ld_read_only_store *view, const ld_kind *kind);

/** The base of the view's store, or NULL for a NULL view. Any thread.
 *  @since 0.1.0 */
LD_EXPORT struct event_base *ld_read_only_store_base(const ld_read_only_store *view);

/** The store's describe(); "(null)" for a NULL view. @since 0.1.0 */
LD_EXPORT const char *ld_read_only_store_describe(const ld_read_only_store *view);

/* ------------------------------------------------------------------------- */
/* For implementers                                                          */

/** The version of struct ld_store_ops this header describes: 2, which adds
 *  the members that answer at once. A version 1 struct (without them) is
 *  still accepted. @since 0.1.0 */
#define LD_STORE_OPS_VERSION 2

/** What an implementation provides.
 *
 *  The asynchronous members receive `out`, a pending future they own (one
 *  reference): each must complete it (now or later, from any callback of
 *  the loop) and release it. Inputs are validated already: items are valid,
 *  keys non-empty valid UTF-8, kinds known; upsert also gets the item's
 *  key, version and deleted flag, read once by the front layer. Results:
 *    get: fulfil_json with a new reference to the stored item, or with NULL
 *         when it is missing or a tombstone;
 *    all: fulfil_json with an object of the items without tombstones;
 *    init, close: fulfil; upsert, del, initialized: fulfil_bool;
 *    any: reject with LD_ESTORE (or another code) on a backend failure.
 *  The front layer orders completions, so an implementation may complete
 *  out of order.
 *
 *  Version 2 adds the members that answer within the call, for a store
 *  that can (one in memory; a cache that holds the item). The front layer
 *  calls one instead of its asynchronous twin and completes the caller's
 *  future from the loop with the answer, in issue order, without a future
 *  for the implementation (which is what makes the memory store's get cost
 *  tens of nanoseconds). The front also calls a _now member while earlier
 *  operations of the store still wait for their asynchronous answers (their
 *  results are then handed back in issue order): a store whose
 *  asynchronous writes take effect later must answer consistently with the
 *  writes issued before, or say LD_EBUSY. Inputs are validated as above,
 *  except for init_now. Each returns (nothing else):
 *    get_now:    0, with *item the stored item or NULL (missing, tombstone)
 *                and either *lease NULL (then *item is a new reference,
 *                which the result takes) or a lease that keeps the
 *                borrowed *item alive (struct ld_lease, future.h);
 *    all_now:    0, with *all a new reference to the object of the items
 *                without tombstones, which nobody modifies afterwards;
 *    upsert_now, del_now: 1 when applied, 0 when not;
 *    initialized_now: 1 once an init has succeeded, 0 before (it serves
 *                ld_store_initialized_now() only; `initialized` stays
 *                required);
 *    init_now:   0; `all_data` is not validated for it: it validates it as
 *                ld_data_validate() does (it may call it), and for invalid
 *                data answers LD_EINVAL with *why set (a static string)
 *                and changes nothing;
 *    any:        LD_EBUSY when it cannot answer now: the front calls the
 *                asynchronous twin instead; another negative code rejects
 *                the operation with it (LD_ENOMEM, LD_ESTORE, ...), and the
 *                store must then be as it was.
 *  An asynchronous member whose _now twin never answers LD_EBUSY may be
 *  NULL (get, all, init, upsert, del); when LD_EBUSY comes for an operation
 *  without one, the operation is rejected with LD_EBUSY. `prefetch`, if
 *  given, hears of the key of an upsert while the front layer validates the
 *  item (before upsert_now; never once the store is closed): it may start
 *  loading what the write will touch.
 *
 *  `initialized` is required; `close`, `free`, `describe` and the version 2
 *  members may be NULL. @since 0.1.0 */
struct ld_store_ops {
    int version; /* LD_STORE_OPS_VERSION (or 1) */
    void (*get)(void *impl, const ld_kind *kind, const char *key, ld_future *out);
    void (*all)(void *impl, const ld_kind *kind, ld_future *out);
    void (*init)(void *impl, const json_t *all_data, ld_future *out);
    void (*upsert)(void *impl, const ld_kind *kind, const json_t *item,
                   const struct ld_item_info *info, ld_future *out);
    void (*del)(void *impl, const ld_kind *kind, const char *key, int64_t version, ld_future *out);
    void (*initialized)(void *impl, ld_future *out);
    void (*close)(void *impl, ld_future *out);
    void (*free)(void *impl);
    const char *(*describe)(void *impl);
    /* Version 2: answering at once. `len` is strlen(key). */
    int (*get_now)(void *impl, const ld_kind *kind, const char *key, size_t len, json_t **item,
                   struct ld_lease **lease);
    int (*all_now)(void *impl, const ld_kind *kind, json_t **all);
    int (*init_now)(void *impl, const json_t *all_data, const char **why);
    int (*upsert_now)(void *impl, const ld_kind *kind, const json_t *item,
                      const struct ld_item_info *info);
    int (*del_now)(void *impl, const ld_kind *kind, const char *key, int64_t version);
    void (*prefetch)(void *impl, const ld_kind *kind, const char *key, size_t len);
    int (*initialized_now)(void *impl);
};

/** For implementers: sets the store's status (see ld_store_status). A
 *  status equal to the current one changes nothing; another becomes the
 *  current one at once, and the listeners hear of it later, from the loop
 *  (ld_store_add_status_listener()). Usable at any time before the store is
 *  freed, also once it is closed. Loop thread of the store's base.
 *  @return 0; LD_EINVAL if `store` is NULL. @since 0.1.0 */
LD_EXPORT int ld_store_update_status(ld_store *store, bool available, bool needs_refresh);

/** For implementers: says that the implementation's asynchronous `init`
 *  validates `all_data` itself, as ld_data_validate() does (for invalid data
 *  it rejects its future with LD_EINVAL, the reason as the message, and
 *  changes nothing), so that ld_store_init() does not walk every item
 *  within the call (at 10,000 items, milliseconds of the loop in one pass):
 *  the implementation may validate a slice of the items per loop pass. Call
 *  it right after ld_store_new(), before any operation. Loop thread of the
 *  store's base. @return 0; LD_EINVAL if `store` is NULL. @since 0.1.0 */
LD_EXPORT int ld_store_set_init_validates(ld_store *store);

/** Makes a store from an implementation. `ops` is borrowed and must outlive
 *  the store (usually a static const struct); `impl` is handed to every
 *  operation and to ops->free. @return a new store; NULL if `base` or `ops`
 *  is NULL, ops->version is not one this library knows (1 or 2), an
 *  operation is missing (`initialized`, or both an asynchronous member
 *  and its _now twin), or memory ran out (ops->free(impl) is not called then).
 *  @since 0.1.0 */
LD_EXPORT ld_store *ld_store_new(struct event_base *base, const struct ld_store_ops *ops,
                                 void *impl);

/* ------------------------------------------------------------------------- */
/* The in-memory store                                                       */

/** A store in memory, for the loop thread of `base`: no lock; get, upsert and
 *  delete are O(1) (hash tables) and take effect within the call (their
 *  futures complete from the loop, without an event each: consecutive
 *  results share one entry of the loop's queue); all returns an immutable snapshot
 *  that shares the item references, the same object again while nothing
 *  changed; init is atomic. An init of more items than LDASYNC_STORE_INIT_SLICE
 *  (an environment variable read when the store is made; 2048 by default)
 *  validates and loads that many per pass of the loop, so that the loop is
 *  never held long, and swaps the whole set in after the last one:
 *  operations issued meanwhile wait for it (they see the new data set, or
 *  the old one if it was invalid), as does ld_store_initialized(), and
 *  ld_store_initialized_now() says LD_EBUSY. The items of a replaced
 *  table of more than 1024 slots are let go of 1024 slots per pass of the
 *  loop, once no get's result may read them. Tombstones keep only key and
 *  version. A get's
 *  item stays valid while its future lives, also after the store is freed.
 *  The store lets go of the items writes replace from the loop, all that
 *  wait at once (at most 256 wait while the loop does not run); an item
 *  that a get's future taken before the write may still read waits until
 *  all such futures are released and the store is used again (or freed),
 *  but a few hundred at most: past that, the get futures still held keep
 *  their own items by reference instead (at most 32 items per future held,
 *  let go of when they are released, on the thread that releases them) and
 *  the rest goes. So however long a get's future is held, what the store
 *  keeps beyond its data does not grow with the writes made meanwhile.
 *  Free the store before its base, and then let the loop run once more
 *  (future.h's lifetime rule): results released before the loop ran still
 *  wait in its queue.
 *  describe() is "memory".
 *  @return a new store, or NULL if `base` is NULL or memory ran out.
 *  @since 0.1.0 */
LD_EXPORT ld_store *ld_memory_store_new(struct event_base *base);

/* ------------------------------------------------------------------------- */
/* The caching store                                                         */

/** The ttl of ld_caching_store_new() for a cache whose entries never
 *  expire. @since 0.1.0 */
#define LD_CACHE_FOREVER (-1)

/** A store that caches what another store (`inner`, a database's, as a
 *  Redis store) holds, as LaunchDarkly's SDKs wrap a persistent store.
 *
 *  Every write goes through to `inner`; what the cache holds changes when
 *  `inner` has answered. Reads are answered from the cache while it holds a
 *  fresh answer (within the call: get_now and all_now, so that
 *  ld_store_get_now() and the evaluator need no future), else by `inner`,
 *  whose answer is cached; gets of one key (alls of one kind) issued while
 *  the same read of `inner` is under way share it, unless a write was
 *  issued since. What it caches:
 *    - per item (kind and key): the item, a tombstone, or a miss (so a key
 *      that is asked for again and again and missing is read once per ttl),
 *      at most LDASYNC_CACHE_CAPACITY entries (an environment variable read
 *      when the cache is made; 65536 by default): beyond that, the least
 *      recently used entry goes (one read since it was last passed over
 *      keeps it once more: the second chance, so that a hit writes no
 *      list; an expired entry goes when it is met);
 *    - per kind, the answer of all, and the whole kind as the last init gave
 *      it, kept up to date by the writes since (it answers every get of the
 *      kind, a missing key included, until it expires);
 *    - initialized, once true.
 *  Writes: an init that succeeds replaces what the cache holds with its
 *  data; an upsert or delete that was applied is cached; one that was not
 *  drops the item's entry (the next get reads `inner`); each drops the
 *  kind's all answer. While an upsert or delete is under way, gets of its
 *  key and alls of its kind go to `inner` (while an init is, every read),
 *  which orders them after it: a result never misses a write issued before
 *  it; other reads are answered from the cache as usual. An entry a write
 *  waits for stays until the write came back (beyond the bound, by one per
 *  write under way).
 *
 *  `ttl_ms` > 0: an entry expires that long after it was cached. 0: nothing
 *  is cached, every operation goes to `inner`. LD_CACHE_FOREVER (any
 *  negative value): nothing expires, and the cache keeps serving while
 *  `inner` fails: reads it can answer (also the reads that went to `inner`
 *  and failed) are answered from it; an init that fails with a backend
 *  error (not LD_EINVAL, LD_ECLOSED, LD_ECANCELED or LD_ENOMEM) still
 *  replaces what it holds, and an upsert or delete that fails so is cached
 *  when it is newer than what the cache holds; their futures reject with
 *  the error, and the data is written back when `inner` is back (below).
 *
 *  Status (ld_store_status): the cache reports unavailable while `inner`
 *  reports it is (its status listeners), and from an operation of `inner`
 *  that fails with a backend error on: then it asks ld_store_initialized()
 *  of `inner` every 500 ms (LDASYNC_CACHE_POLL_MS, an environment variable
 *  read when the cache is made, for tests) until it answers. When `inner`
 *  is back: with LD_CACHE_FOREVER, if the cache holds a whole data set (an
 *  init's, with the writes since), it writes it back (one init of `inner`)
 *  and reports available with needs_refresh false (if that init fails with a
 *  backend error, it polls again); without a whole data set (no init came
 *  through the cache) it reports available with needs_refresh true; with a
 *  ttl (or 0), it forgets what it held and reports available with
 *  needs_refresh true: the data source should send its data again; an
 *  init through the cache that succeeds afterwards makes it available with
 *  needs_refresh false. A cache with LD_CACHE_FOREVER that holds a whole
 *  data set also asks ld_store_initialized() of `inner` every 5 s while
 *  `inner` is available (LDASYNC_CACHE_CHECK_MS, an environment variable
 *  read when the cache is made; "0": never), and writes the data set back
 *  when `inner` says it holds none: a Redis emptied by FLUSHALL, or
 *  restarted empty without the connection noticing.
 *
 *  Results answered from the cache lend the cached item, as the memory
 *  store's gets do (a lease, no reference counted on the item per read):
 *  what the cache lets go of meanwhile (replaced, evicted, expired, the
 *  cache freed) stays alive until the results that read it are released,
 *  on whichever thread releases them.
 *
 *  Takes `inner` (also when it returns NULL: `inner` is then freed): closing
 *  the cache closes it, freeing the cache frees it (operations of `inner`
 *  still under way complete as cancelled, and are let go of). `inner` must
 *  be used only through the cache afterwards, and belong to `base`.
 *  describe() is "caching(" + the inner store's describe() + ")". Loop
 *  thread of `base`, as every store (the cache has no lock).
 *  @return a new store; NULL if `base` or `inner` is NULL, `inner` belongs
 *  to another base, or memory ran out. @since 0.1.0 */
LD_EXPORT ld_store *ld_caching_store_new(struct event_base *base, ld_store *inner, int64_t ttl_ms);

LD_END_DECLS

#endif /* LDASYNC_STORE_H */
