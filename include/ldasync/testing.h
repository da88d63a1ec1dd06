/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/testing.h: the testing kit (libldasync-testing): mocks of the
 * interfaces of ldasync, and the store contract as Check test cases, for
 * people who write their own store or test code that uses one.
 *
 * Not included by ldasync.h, because it needs Check's check.h. Build with
 * `pkg-config --cflags --libs ldasync-testing`.
 *
 * Each mock is an ordinary object of its interface (a mock store is an
 * ld_store *, freed with ld_store_free()), so it can be handed to the code
 * under test as is; the ld_mock_* functions below look at it or script it.
 * They recognise their own objects: given any other object (or NULL) they
 * fail with LD_EINVAL and change nothing.
 *
 * Thread rules: as for the interface mocked. A mock belongs to the thread
 * that runs its base's loop; so do the ld_mock_* calls on it. Mocks of
 * different bases may be used from different threads at the same time.
 */
#ifndef LDASYNC_TESTING_H
#define LDASYNC_TESTING_H

#include <check.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include <ldasync/ldasync.h>

LD_BEGIN_DECLS

struct event_base;

/* ------------------------------------------------------------------------- */
/* The mock store (lib/testing/mock_store.c)                                 */

/** The operations of a store, for the mock store's counters and failure
 *  injection. LD_MOCK_OP_ANY stands for all of them. @since 0.1.0 */
enum ld_mock_op {
    LD_MOCK_OP_GET = 0,
    LD_MOCK_OP_ALL = 1,
    LD_MOCK_OP_INIT = 2,
    LD_MOCK_OP_UPSERT = 3,
    LD_MOCK_OP_DELETE = 4,
    LD_MOCK_OP_INITIALIZED = 5,
    LD_MOCK_OP_ANY = 6
};

/** A store in memory that behaves as store.h says (it passes the store
 *  contract below) and also records every init it receives, can be changed
 *  directly (ld_mock_store_force_set(), ld_mock_store_force_delete()) and
 *  can be told to fail (ld_mock_store_fail_next()). It answers each
 *  operation within the call, as the memory store does; the futures
 *  complete from the loop, as store.h says. describe() is "mock".
 *  @return a new store, freed with ld_store_free(); NULL if `base` is NULL
 *  or memory ran out. @since 0.1.0 */
LD_EXPORT ld_store *ld_mock_store_new(struct event_base *base);

/** The number of inits the mock has received: every init that passed the
 *  front layer's validation and was issued before close, including those
 *  that failed by ld_mock_store_fail_next().
 *  @return the count, or LD_EINVAL if `store` is not a mock store.
 *  @since 0.1.0 */
LD_EXPORT int ld_mock_store_init_count(const ld_store *store);

/** The data of the i-th init received (0 is the first), as it was when the
 *  init was issued: later changes to the containers the caller passed do
 *  not show here (items are shared by reference, as store.h allows).
 *  @return borrowed, valid until the store is freed; NULL if `store` is not
 *  a mock store or `i` >= ld_mock_store_init_count(). @since 0.1.0 */
LD_EXPORT const json_t *ld_mock_store_init_data(const ld_store *store, size_t i);

/** How many operations `op` the mock has received (LD_MOCK_OP_ANY: of all
 *  operations). Operations the front layer rejected (bad input, closed
 *  store) never reach the mock and are not counted; those failed by
 *  ld_mock_store_fail_next() are.
 *  @return the count, or LD_EINVAL if `store` is not a mock store or `op`
 *  is not an enum ld_mock_op. @since 0.1.0 */
LD_EXPORT int ld_mock_store_calls(const ld_store *store, enum ld_mock_op op);

/** Stores `item` (borrowed: the store takes a reference; it must not be
 *  modified afterwards) under its key, now, whatever version is stored: no
 *  version check, no future, no change to initialized. A tombstone item
 *  ("deleted": true) hides the key. Operations already issued are not
 *  affected (the mock answered them within their calls).
 *  @return 0; LD_EINVAL if `store` is not a mock store, `kind` is NULL or
 *  `item` is not a valid item (ld_item_validate()); LD_ENOMEM.
 *  @since 0.1.0 */
LD_EXPORT int ld_mock_store_force_set(ld_store *store, const ld_kind *kind, const json_t *item);

/** Stores a tombstone for `key` at `version` (>= 0), now, whatever version
 *  is stored (also an older one). @return 0; LD_EINVAL if `store` is not a
 *  mock store, `kind` is NULL, `key` NULL, empty or not valid UTF-8, or
 *  `version` negative; LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_mock_store_force_delete(ld_store *store, const ld_kind *kind, const char *key,
                                         int64_t version);

/** Makes the next `n` operations `op` that reach the mock fail: their
 *  futures reject with `code` and a message naming the operation, and the
 *  store does not change. LD_MOCK_OP_ANY counts operations of every kind. An
 *  operation uses up its own count first, then the count of LD_MOCK_OP_ANY.
 *  A call replaces the count left from an earlier call for the same `op`;
 *  `n` = 0 disarms it.
 *  @return 0; LD_EINVAL if `store` is not a mock store, `op` is not an enum
 *  ld_mock_op, `n` < 0 or `code` >= 0 (use LD_ESTORE for a backend
 *  failure). @since 0.1.0 */
LD_EXPORT int ld_mock_store_fail_next(ld_store *store, enum ld_mock_op op, int n, int code);

/** Sets the status the mock reports (store.h, ld_store_status):
 *  ld_store_update_status(store, available, false), with the listeners
 *  called from the loop. Only what it reports: its operations still answer
 *  as before (make them fail with ld_mock_store_fail_next()).
 *  @return 0; LD_EINVAL if `store` is not a mock store. @since 0.1.0 */
LD_EXPORT int ld_mock_store_set_available(ld_store *store, bool available);

/* ------------------------------------------------------------------------- */
/* The mock event processor (lib/testing/mock_event_processor.c)             */

/** An event processor that records every event sent to it (by reference:
 *  the events must not be modified afterwards, as processor.h says) and
 *  delivers nothing: flush and close answer within the call (their futures
 *  complete from the loop: flush with true).
 *  @return a new processor, freed with ld_event_processor_free(); NULL if
 *  `base` is NULL or memory ran out. @since 0.1.0 */
LD_EXPORT ld_event_processor *ld_mock_event_processor_new(struct event_base *base);

/** The number of events recorded: those ld_event_processor_send_event()
 *  accepted (returned 0) since the processor was made or last cleared.
 *  Events the front layer refused (not an object, closed) are not recorded.
 *  @return the count, or LD_EINVAL if `ep` is not a mock event processor.
 *  @since 0.1.0 */
LD_EXPORT int ld_mock_event_processor_event_count(const ld_event_processor *ep);

/** The i-th event recorded (0 is the first): the object that was sent, not
 *  a copy. @return borrowed, valid until the processor is cleared or freed;
 *  NULL if `ep` is not a mock event processor or `i` >=
 *  ld_mock_event_processor_event_count(). @since 0.1.0 */
LD_EXPORT const json_t *ld_mock_event_processor_event(const ld_event_processor *ep, size_t i);

/** The number of flushes that reached the mock (issued before close).
 *  @return the count, or LD_EINVAL if `ep` is not a mock event processor.
 *  @since 0.1.0 */
LD_EXPORT int ld_mock_event_processor_flush_count(const ld_event_processor *ep);

/** 1 if the processor has been closed, 0 if not. @return that, or
 *  LD_EINVAL if `ep` is not a mock event processor. @since 0.1.0 */
LD_EXPORT int ld_mock_event_processor_closed(const ld_event_processor *ep);

/** Forgets the events recorded (releasing the mock's references to them);
 *  the flush count stays. @return 0, or LD_EINVAL if `ep` is not a mock
 *  event processor. @since 0.1.0 */
LD_EXPORT int ld_mock_event_processor_clear(ld_event_processor *ep);

/* ------------------------------------------------------------------------- */
/* The mock update processor (lib/testing/mock_update_processor.c)           */

/** How a mock update processor answers start. @since 0.1.0 */
enum ld_mock_start {
    LD_MOCK_START_READY = 0,  /* answers at once; initialized becomes true */
    LD_MOCK_START_HOLD = 1,   /* stays pending until ld_mock_update_processor_set_ready()
                                 or ld_mock_update_processor_fail() */
    LD_MOCK_START_GIVE_UP = 2 /* answers at once; initialized stays false (it gave up) */
};

/** An update processor that touches no store and answers start as `start`
 *  says (its futures complete from the loop, as processor.h says). initialized is false until a
 * start is fulfilled as ready. It closes at once (a start still pending is rejected with LD_ECLOSED
 * by the front layer, as processor.h says).
 *  @return a new processor, freed with ld_update_processor_free(); NULL if
 *  `base` is NULL, `start` is not an enum ld_mock_start or memory ran out.
 *  @since 0.1.0 */
LD_EXPORT ld_update_processor *ld_mock_update_processor_new(struct event_base *base,
                                                            enum ld_mock_start start);

/** Makes the processor ready: a start held pending is fulfilled now and
 *  initialized becomes true; before start, the start to come will be ready
 *  at once (whatever the processor was made with).
 *  @return 0; LD_EINVAL if `up` is not a mock update processor; LD_EALREADY
 *  if its start has completed already; LD_ECLOSED after close.
 *  @since 0.1.0 */
LD_EXPORT int ld_mock_update_processor_set_ready(ld_update_processor *up);

/** Makes the processor fail: a start held pending is rejected now with
 *  `code` (and a message saying it was scripted), initialized stays false;
 *  before start, the start to come will be rejected at once.
 *  @return 0; LD_EINVAL if `up` is not a mock update processor or `code`
 *  >= 0; LD_EALREADY if its start has completed already; LD_ECLOSED after
 *  close. @since 0.1.0 */
LD_EXPORT int ld_mock_update_processor_fail(ld_update_processor *up, int code);

/** How many starts reached the mock: 0 or 1 (the front layer refuses a
 *  second start and any start after close). @return the count, or
 *  LD_EINVAL if `up` is not a mock update processor. @since 0.1.0 */
LD_EXPORT int ld_mock_update_processor_start_count(const ld_update_processor *up);

/** 1 if the processor has been stopped, 0 if not. @return that, or
 *  LD_EINVAL if `up` is not a mock update processor. @since 0.1.0 */
LD_EXPORT int ld_mock_update_processor_stopped(const ld_update_processor *up);

/* ------------------------------------------------------------------------- */
/* The mock big segment store (lib/testing/mock_big_segment_store.c)         */

/** What a mock big segment store's get_metadata answers. @since 0.1.0 */
enum ld_mock_big_segments_preset {
    LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE = 0, /* the time of the call, in epoch ms */
    LD_MOCK_BIG_SEGMENTS_PRESET_STALE = 1,      /* one day before the call */
    LD_MOCK_BIG_SEGMENTS_PRESET_NONE = 2,       /* LD_BIG_SEGMENT_TIME_UNKNOWN */
    LD_MOCK_BIG_SEGMENTS_PRESET_ERROR = 3       /* rejected with LD_ESTORE */
};

/** A big segment store in memory: get_metadata answers as `preset` says
 *  (the preset only concerns metadata), get_membership answers with what
 *  ld_mock_big_segment_store_set_membership() set for the context hash
 *  (NULL for any other hash) and is recorded. It answers within each call,
 *  stop too (the futures complete from the loop). describe() is "mock".
 *  @return a new store, freed with ld_big_segment_store_free(); NULL if
 *  `base` is NULL, `preset` is not an enum ld_mock_big_segments_preset or
 *  memory ran out. @since 0.1.0 */
LD_EXPORT ld_big_segment_store *
ld_mock_big_segment_store_new(struct event_base *base, enum ld_mock_big_segments_preset preset);

/** Changes the preset for the get_metadata calls to come (those issued
 *  already have completed). @return 0; LD_EINVAL if `store` is not a mock
 *  big segment store or `preset` is not an enum
 *  ld_mock_big_segments_preset. @since 0.1.0 */
LD_EXPORT int ld_mock_big_segment_store_set_preset(ld_big_segment_store *store,
                                                   enum ld_mock_big_segments_preset preset);

/** Sets the membership of the context whose hash is `context_hash`
 *  (copied): `membership` (borrowed: the store takes a reference; it must
 *  not be modified afterwards) is an object segment-ref -> bool, as
 *  ld_big_segment_membership_from_refs() makes, or NULL to forget the
 *  context (get_membership then fulfils with NULL). Replaces an earlier
 *  membership of the same hash.
 *  @return 0; LD_EINVAL if `store` is not a mock big segment store,
 *  `context_hash` is NULL or empty, or `membership` is neither NULL nor an
 *  object whose values are all booleans; LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_mock_big_segment_store_set_membership(ld_big_segment_store *store,
                                                       const char *context_hash,
                                                       json_t *membership);

/** The number of membership queries that reached the mock (the front
 *  layer refuses empty hashes and queries after stop).
 *  @return the count, or LD_EINVAL if `store` is not a mock big segment
 *  store. @since 0.1.0 */
LD_EXPORT int ld_mock_big_segment_store_membership_query_count(const ld_big_segment_store *store);

/** The context hash of the i-th membership query (0 is the first).
 *  @return borrowed, valid until the store is freed; NULL if `store` is not
 *  a mock big segment store or `i` >= the count. @since 0.1.0 */
LD_EXPORT const char *ld_mock_big_segment_store_membership_query(const ld_big_segment_store *store,
                                                                 size_t i);

/** The number of get_metadata calls that reached the mock (failed ones
 *  included). @return the count, or LD_EINVAL if `store` is not a mock big
 *  segment store. @since 0.1.0 */
LD_EXPORT int ld_mock_big_segment_store_metadata_query_count(const ld_big_segment_store *store);

/* ------------------------------------------------------------------------- */
/* The mock synchronizer (lib/testing/mock_synchronizer.c)                   */

/** A synchronizer that yields a script: the updates, errors and end pushed
 *  with the functions below, in the order pushed, one per next. A next
 *  that finds the script empty waits (pending) until something is pushed;
 *  several waiting nexts take the pushes in request order. Once the end is
 *  reached, that next and every later one reject with LD_ECLOSED. It stops
 *  at once (the front layer rejects waiting nexts with
 *  LD_ECLOSED); what is left of the script is dropped when it is freed.
 *  @param name the name ld_synchronizer_name() gives (copied); NULL: "mock".
 *  @return a new synchronizer, freed with ld_synchronizer_free(); NULL if
 *  `base` is NULL or memory ran out. @since 0.1.0 */
LD_EXPORT ld_synchronizer *ld_mock_synchronizer_new(struct event_base *base, const char *name);

/** Appends `update` to the script (steals it on every path: each update is
 *  yielded once, and freed with the future of the next that yields it).
 *  @return 0; LD_EINVAL if `sync` is not a mock synchronizer or `update` is
 *  NULL; LD_ECLOSED after ld_mock_synchronizer_end() or stop; LD_ENOMEM.
 *  @since 0.1.0 */
LD_EXPORT int ld_mock_synchronizer_push_update(ld_synchronizer *sync, ld_fdv2_update *update);

/** Appends an error to the script: the next that takes it rejects with
 *  `code`; the iteration goes on afterwards, except for LD_ECLOSED, which
 *  is the same as ld_mock_synchronizer_end().
 *  @return 0; LD_EINVAL if `sync` is not a mock synchronizer or `code` >=
 *  0; LD_ECLOSED after the end or stop; LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_mock_synchronizer_push_error(ld_synchronizer *sync, int code);

/** Appends the end to the script: the next that reaches it and all later
 *  ones reject with LD_ECLOSED; nothing can be pushed afterwards.
 *  @return 0; LD_EINVAL if `sync` is not a mock synchronizer; LD_ECLOSED
 *  if the end was pushed already or after stop; LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_mock_synchronizer_end(ld_synchronizer *sync);

/** How many nexts reached the mock (issued before stop), whatever they
 *  got. @return the count, or LD_EINVAL if `sync` is not a mock
 *  synchronizer. @since 0.1.0 */
LD_EXPORT int ld_mock_synchronizer_next_count(const ld_synchronizer *sync);

/** 1 if the synchronizer has been stopped, 0 if not. @return that, or
 *  LD_EINVAL if `sync` is not a mock synchronizer. @since 0.1.0 */
LD_EXPORT int ld_mock_synchronizer_stopped(const ld_synchronizer *sync);

/* ------------------------------------------------------------------------- */
/* The mock initializer (lib/testing/mock_initializer.c)                     */

/** An initializer whose fetch answers what was set last with
 *  ld_mock_initializer_set_basis() or ld_mock_initializer_set_error(). A
 *  fetch issued before either was called waits (pending) until one is;
 *  then all waiting fetches complete, in request order. Every fetch gets a
 *  basis of its own: a copy of the one set (same intent, changes in order,
 *  selector, persist flag and environment ID; the items are shared by
 *  reference). It closes at once (the front layer rejects waiting
 *  fetches with LD_ECLOSED).
 *  @param name the name ld_initializer_name() gives (copied); NULL: "mock".
 *  @return a new initializer, freed with ld_initializer_free(); NULL if
 *  `base` is NULL or memory ran out. @since 0.1.0 */
LD_EXPORT ld_initializer *ld_mock_initializer_new(struct event_base *base, const char *name);

/** Sets the basis that fetches fulfil with (a copy each), replacing an
 *  earlier basis or error, and completes the fetches waiting. Steals
 *  `basis` on every path. @return 0; LD_EINVAL if `init` is not a mock
 *  initializer or `basis` is NULL; LD_ECLOSED after close. A waiting fetch
 *  whose copy cannot be made rejects with LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_mock_initializer_set_basis(ld_initializer *init, ld_fdv2_basis *basis);

/** Makes fetches reject with `code` (and a message saying it was scripted),
 *  replacing an earlier basis or error, and completes the fetches waiting.
 *  @return 0; LD_EINVAL if `init` is not a mock initializer or `code` >= 0;
 *  LD_ECLOSED after close. @since 0.1.0 */
LD_EXPORT int ld_mock_initializer_set_error(ld_initializer *init, int code);

/** How many fetches reached the mock (issued before close), whatever they
 *  got. @return the count, or LD_EINVAL if `init` is not a mock
 *  initializer. @since 0.1.0 */
LD_EXPORT int ld_mock_initializer_fetch_count(const ld_initializer *init);

/** 1 if the initializer has been stopped, 0 if not. @return that, or
 *  LD_EINVAL if `init` is not a mock initializer. @since 0.1.0 */
LD_EXPORT int ld_mock_initializer_stopped(const ld_initializer *init);

/* ------------------------------------------------------------------------- */
/* The store contract as Check tests (lib/testing/contract.c)                */

/** The version of struct ld_store_contract_factory this header describes.
 *  @since 0.1.0 */
#define LD_STORE_CONTRACT_FACTORY_VERSION 1

/** How the contract tests get a store. Every test runs on a new event_base
 *  of its own, in this order:
 *    setup(base, arg)       optional; prepare outside resources (e.g.
 *                           connect, empty a Redis prefix): 0 on success,
 *                           anything else fails the test;
 *    new_store(base, arg)   required; a new store on `base`, empty and not
 *                           initialized (NULL fails the test);
 *    ... the test ...
 *    ld_store_free(store)   by the suite; the loop then runs what is queued;
 *    teardown(base, arg)    optional, whenever setup succeeded; may still
 *                           use the loop; afterwards the base must have no
 *                           events left (that is checked) and is freed.
 *  In Check's fork mode each test runs in a child process, so setup and
 *  new_store run there and state they keep in `arg` does not reach the
 *  parent. @since 0.1.0 */
struct ld_store_contract_factory {
    int version; /* LD_STORE_CONTRACT_FACTORY_VERSION */
    int (*setup)(struct event_base *base, void *arg);
    ld_store *(*new_store)(struct event_base *base, void *arg);
    void (*teardown)(struct event_base *base, void *arg);
};

/** Adds the whole store contract to `suite` as one test case named `name`
 *  (select it with CK_RUN_CASE=name): the semantics of store.h (the 17
 *  cases of LaunchDarkly's Python SDK suite and more: bool results, kinds
 *  kept apart, tombstones, opaque keys, init all or nothing), every bad
 *  input (LD_EINVAL naming the field, store unchanged), completion in issue
 *  order, no callback inside the call that issued it, close (LD_ECLOSED
 *  afterwards) and free with operations in flight (each completes exactly
 *  once, LD_ECANCELED if it had not). Each test fails with a message saying
 *  what the store did wrong.
 *
 *  May be called several times, for several stores, in one suite or many.
 *  The factory is copied; `name` is copied; `arg` is handed to the
 *  factory's functions and must stay valid while the tests run. Tests use
 *  Check's default timeout (CK_DEFAULT_TIMEOUT, CK_TIMEOUT_MULTIPLIER) and
 *  also fail after 60 s without an answer in CK_FORK=no mode.
 *  Not thread-safe: register from one thread, before running the suite.
 *  @return 0; LD_EINVAL if `suite`, `name` or `factory` is NULL, `name` is
 *  empty, factory->version is not one this library knows or new_store is
 *  NULL; LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_store_contract_add_tests(Suite *suite, const char *name,
                                          const struct ld_store_contract_factory *factory,
                                          void *arg);

LD_END_DECLS

#endif /* LDASYNC_TESTING_H */
