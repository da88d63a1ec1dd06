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
 *  injection. LD_MOCK_ANY stands for all of them. @since 0.1.0 */
enum ld_mock_op {
    LD_MOCK_GET,
    LD_MOCK_ALL,
    LD_MOCK_INIT,
    LD_MOCK_UPSERT,
    LD_MOCK_DELETE,
    LD_MOCK_INITIALIZED,
    LD_MOCK_ANY
};

/** A store in memory that behaves as store.h says (it passes the store
 *  contract below) and also records every init it receives, can be changed
 *  directly (ld_mock_store_force_set(), ld_mock_store_force_delete()) and
 *  can be told to fail (ld_mock_store_fail_next()). Its operations complete
 *  at once, as the memory store's do. describe() is "mock".
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

/** How many operations `op` the mock has received (LD_MOCK_ANY: of all
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
 *  affected (they have completed: the mock answers at once).
 *  @return 0; LD_EINVAL if `store` is not a mock store, `kind` is NULL or
 *  `item` is not a valid item (ld_item_validate()); LD_ENOMEM.
 *  @since 0.1.0 */
LD_EXPORT int ld_mock_store_force_set(ld_store *store, const ld_kind *kind, const json_t *item);

/** Stores a tombstone for `key` at `version` (>= 0), now, whatever version
 *  is stored (also an older one). @return 0; LD_EINVAL if `store` is not a
 *  mock store, `kind` is NULL, `key` NULL or empty, or `version` negative;
 *  LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_mock_store_force_delete(ld_store *store, const ld_kind *kind, const char *key,
                                         int64_t version);

/** Makes the next `n` operations `op` that reach the mock fail: their
 *  futures reject with `code` and a message naming the operation, and the
 *  store does not change. LD_MOCK_ANY counts operations of every kind. An
 *  operation uses up its own count first, then the count of LD_MOCK_ANY.
 *  A call replaces the count left from an earlier call for the same `op`;
 *  `n` = 0 disarms it.
 *  @return 0; LD_EINVAL if `store` is not a mock store, `op` is not an enum
 *  ld_mock_op, `n` < 0 or `code` >= 0 (use LD_ESTORE for a backend
 *  failure). @since 0.1.0 */
LD_EXPORT int ld_mock_store_fail_next(ld_store *store, enum ld_mock_op op, int n, int code);

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
