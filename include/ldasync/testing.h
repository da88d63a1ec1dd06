/*
 * ldasync/testing.h: the testing kit (libldasync-testing): mocks of the
 * interfaces of ldasync, for people who write their own store or test code
 * that uses one.
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

/** A store in memory that behaves as store.h says and also records every
 *  init it receives, can be changed directly (ld_mock_store_force_set(),
 *  ld_mock_store_force_delete()) and can be told to fail
 *  (ld_mock_store_fail_next()). Its operations complete
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

LD_END_DECLS

#endif /* LDASYNC_TESTING_H */
