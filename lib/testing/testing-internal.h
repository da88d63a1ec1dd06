/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * testing-internal.h: what the parts of libldasync-testing share. Never
 * installed.
 */
#ifndef LDASYNC_TESTING_INTERNAL_H
#define LDASYNC_TESTING_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include <ldasync/alloc.h>
#include <ldasync/future.h>

/*
 * Allocation through the hooks of alloc.h, as in libldasync (whose own
 * wrappers are not exported): the same names, so code reads the same in both
 * libraries, and ld_set_alloc_funcs() governs every copy. Written once for
 * two users: libldasync-testing gets them static inline; the test program
 * gets them as ordinary functions for the library files compiled into it,
 * from tests/internal_alloc.c, which defines LD__ALLOC_SHIM empty before it
 * includes this header.
 */
#ifndef LD__ALLOC_SHIM
#define LD__ALLOC_SHIM static inline
#endif

LD__ALLOC_SHIM void *ld__malloc(size_t size)
{
    ld_malloc_fn m;
    ld_get_alloc_funcs(&m, NULL, NULL);
    return m(size ? size : 1);
}

LD__ALLOC_SHIM void *ld__calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = ld__malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

LD__ALLOC_SHIM void *ld__realloc(void *ptr, size_t size)
{
    ld_realloc_fn r;
    if (!ptr)
        return ld__malloc(size);
    ld_get_alloc_funcs(NULL, &r, NULL);
    return r(ptr, size ? size : 1);
}

LD__ALLOC_SHIM void ld__free(void *ptr)
{
    ld_dealloc_fn f;
    if (!ptr)
        return;
    ld_get_alloc_funcs(NULL, NULL, &f);
    f(ptr);
}

LD__ALLOC_SHIM char *ld__strdup(const char *s)
{
    size_t len = strlen(s) + 1;
    char *copy = ld__malloc(len);
    if (copy)
        memcpy(copy, s, len);
    return copy;
}

/*
 * The skeleton of a mock. A mock is an ordinary object of its interface (an
 * ld_store *, ...) made with the interface's _new from the mock's ops table
 * and a struct of the mock's own, which begins with a struct ld__mock. The
 * registry (a short list under a lock: tests hold a handful of mocks at a
 * time) maps the object back to that struct, so that the ld_mock_* functions
 * take the object itself and can tell a mock of theirs from anything else.
 * A mock's `type` is the address of its ops table, so objects of different
 * mocks never match. A constructor reads:
 *
 *     struct mock *m = ld__mock_alloc(base, sizeof(*m), &mock_ops, release);
 *     if (!m)
 *         return NULL;
 *     ...set the fields of m...
 *     return ld__mock_finish(m, fields_ok ? ld_x_new(base, &mock_ops, m) : NULL);
 *
 * with `.free = ld__mock_free` in mock_ops; the ld_mock_* functions find the
 * mock with ld__mock_find(object, &mock_ops).
 */
struct ld__mock {
    struct ld__mock *next; /* in the registry */
    const void *object;    /* the interface's object, once registered */
    const void *type;      /* the mock's ops table */
    void (*release)(void *mock);
};

/* A zeroed mock struct of `size` bytes (a struct that begins with a struct
 * ld__mock) of `type`; `release` (or NULL) frees what its fields hold, when
 * the mock is freed. NULL if `base` is NULL or memory ran out. */
void *ld__mock_alloc(const struct event_base *base, size_t size, const void *type,
                     void (*release)(void *mock));

/* Ends a constructor: registers `object`, the interface's object made around
 * `mock` (which now owns the mock), and returns it; if `object` is NULL
 * (making it or filling the mock's fields failed) frees the mock and returns
 * NULL. Registering cannot fail. It drops any entry left for an earlier
 * object at the same address: the front layer may free an object before it
 * calls its mock's free (from the loop, when operations were cancelled). */
void *ld__mock_finish(void *mock, void *object);

/* The ops' free of every mock: unregisters it (if its entry is still there),
 * calls its release and frees it. */
void ld__mock_free(void *mock);

/* The mock of `type` registered for `object`, or NULL. Any thread. */
void *ld__mock_find(const void *object, const void *type);

/* The describe() of the mocks that have one: "mock". */
const char *ld__mock_describe(void *mock);

/*
 * A FIFO whose links are in the things queued (structs that begin with a
 * struct ld__fifo_node), so that queueing cannot fail. Zero-initialised means
 * empty.
 */
struct ld__fifo_node {
    struct ld__fifo_node *next;
};
struct ld__fifo {
    struct ld__fifo_node *head, *tail;
};

/* Appends `node`. */
void ld__fifo_push(struct ld__fifo *q, struct ld__fifo_node *node);

/* Removes the oldest node and returns it, or NULL if the queue is empty. */
struct ld__fifo_node *ld__fifo_pop(struct ld__fifo *q);

/*
 * A FIFO of futures that wait for something scripted (a synchronizer's
 * nexts, an initializer's fetches). Zero-initialised means empty. The queue
 * owns one reference to each future in it.
 */
struct ld__waiters {
    struct ld__fifo q;
};

/* Appends `out` (stolen on success). 0 or LD_ENOMEM (`out` untouched). */
int ld__waiters_push(struct ld__waiters *q, ld_future *out);

/* Removes the oldest future and returns it (the caller gets the queue's
 * reference), or NULL if the queue is empty. */
ld_future *ld__waiters_pop(struct ld__waiters *q);

/* Releases every future in the queue and empties it. */
void ld__waiters_drop(struct ld__waiters *q);

#ifdef LD_TESTING_CONTRACT
/* ---- The store contract (contract*.c) -------------------------------------
 * contract.c: the harness and the registration; contract_semantics.c,
 * contract_bad_input.c and contract_order.c: the cases. Below, what the
 * cases share: the running test, the helpers they are written with. */

#include <event2/event.h>
#include <stdbool.h>

#include <ldasync/testing.h>

/* The running test (contract.c): its base, its store, and whether its reads
 * go through the read-only view; B, S and V in the cases. */
extern struct event_base *ld__contract_base;
extern ld_store *ld__contract_store;
extern bool ld__contract_view;
#define B ld__contract_base
#define S ld__contract_store
#define V ld__contract_view

/* Starts the test of loop index i: the base, the guard timer, the store of
 * its registration (contract.c); begin(_i) in the cases. */
void ld__contract_begin(int i);
#define begin ld__contract_begin

/* Add the cases of one file, in order, as loop tests over [loop, loop + 1). */
void ld__contract_add_semantics(TCase *tc, int loop);
void ld__contract_add_bad_input(TCase *tc, int loop);
void ld__contract_add_order(TCase *tc, int loop);

/* Runs the loop until nothing is active. */
static inline void loop_until_idle(void)
{
    for (int pass = 0; pass < 100000; pass++) {
        event_base_loop(B, EVLOOP_NONBLOCK);
        if (event_base_get_num_events(B, EVENT_BASE_COUNT_ACTIVE) == 0)
            return;
    }
    ck_abort_msg("the loop did not become idle");
}

#define F ld_kind_features()
#define SEG ld_kind_segments()

/* The read path: the store's own functions or, for the view's run of the
 * contract, the read-only view's. */
static inline ld_future *read_get(const ld_kind *kind, const char *key)
{
    return V ? ld_read_only_store_get(ld_store_read_only(S), kind, key)
             : ld_store_get(S, kind, key);
}

static inline ld_future *read_all(const ld_kind *kind)
{
    return V ? ld_read_only_store_all(ld_store_read_only(S), kind) : ld_store_all(S, kind);
}

/* The flag fixture (docs/design.md, "The testing kit"). New reference. */
static inline json_t *make_feature(const char *key, int64_t version)
{
    json_t *f = json_pack("{s:s, s:I, s:b, s:[b,b], s:n, s:{}, s:[], s:[], s:[], s:[], s:s}", "key",
                          key, "version", (json_int_t)version, "on", 1, "variations", 1, 0,
                          "offVariation", "fallthrough", "prerequisites", "targets",
                          "contextTargets", "rules", "salt", "abc");
    ck_assert_ptr_nonnull(f);
    return f;
}

static inline json_t *make_segment(const char *key, int64_t version)
{
    json_t *s = json_pack("{s:s, s:I, s:[], s:[], s:s}", "key", key, "version", (json_int_t)version,
                          "included", "excluded", "salt", "xyz");
    ck_assert_ptr_nonnull(s);
    return s;
}

static inline json_t *make_item(const ld_kind *kind, const char *key, int64_t version)
{
    return kind == SEG ? make_segment(key, version) : make_feature(key, version);
}

/* Waits for f (issued by the operation `what`) and returns it, still held. */
static inline ld_future *await(ld_future *f, const char *what)
{
    ck_assert_msg(f != NULL, "%s returned NULL", what);
    int rc = ld_future_wait(f);
    ck_assert_msg(rc == 0, "waiting for %s: %s", what, ld_err_name(rc));
    ck_assert_msg(!ld_future_is_pending(f), "%s still pending after the wait", what);
    return f;
}

/* Waits for f and checks that it fulfilled. */
static inline ld_future *fulfilled(ld_future *f, const char *what)
{
    await(f, what);
    ck_assert_msg(ld_future_is_fulfilled(f), "%s rejected: %s (%s)", what,
                  ld_err_name(ld_future_error(f)), ld_future_error_message(f));
    return f;
}

#define FULFILLED(call) fulfilled((call), #call)

static inline void done_ok(ld_future *f, const char *what)
{
    ld_future_unref(fulfilled(f, what));
}

#define OK(call) done_ok((call), #call)

static inline bool done_bool(ld_future *f, const char *what)
{
    bool v = ld_future_bool(fulfilled(f, what));
    ld_future_unref(f);
    return v;
}

#define BOOL(call) done_bool((call), #call)

/* The version of the item that get returns, -1 for NULL. */
static inline int64_t version_of(const ld_kind *kind, const char *key)
{
    ld_future *f = fulfilled(read_get(kind, key), "get");
    json_t *item = ld_future_json(f);
    int64_t v = -1;
    if (item) {
        ck_assert_msg(json_is_object(item), "get(\"%s\") is not an object", key);
        ck_assert_msg(!ld_item_is_deleted(item), "get(\"%s\") returned a tombstone", key);
        v = ld_item_version(item);
        ck_assert_msg(v >= 0, "get(\"%s\") returned an item without a valid version", key);
    }
    ld_future_unref(f);
    return v;
}

/* The number of items that all returns for `kind`, after checking that it
 * is an object of valid items, none a tombstone. */
static inline size_t all_size(const ld_kind *kind)
{
    ld_future *f = fulfilled(read_all(kind), "all");
    json_t *all = ld_future_json(f);
    ck_assert_msg(json_is_object(all), "all did not fulfil with an object");
    const char *key;
    json_t *item;
    json_object_foreach(all, key, item)
    {
        ck_assert_msg(ld_item_validate(item, key, NULL) == 0, "all[\"%s\"] is not a valid item",
                      key);
        ck_assert_msg(!ld_item_is_deleted(item), "all contains the tombstone of \"%s\"", key);
    }
    size_t n = json_object_size(all);
    ld_future_unref(f);
    return n;
}

/* The version of all[key] for `kind`, -1 if absent. */
static inline int64_t all_version(const ld_kind *kind, const char *key)
{
    ld_future *f = fulfilled(read_all(kind), "all");
    json_t *item = json_object_get(ld_future_json(f), key);
    int64_t v = item ? ld_item_version(item) : -1;
    ld_future_unref(f);
    return v;
}

static inline void init_with(json_t *data)
{
    OK(ld_store_init(S, data));
    json_decref(data);
}

/* The "inited store" (docs/design.md, "The testing kit"): foo v10 and bar v10. */
static inline void init_foo_bar(void)
{
    init_with(json_pack("{s:{s:o, s:o}, s:{}}", "features", "foo", make_feature("foo", 10), "bar",
                        make_feature("bar", 10), "segments"));
}

static inline bool upsert(const ld_kind *kind, const char *key, int64_t version)
{
    json_t *item = make_item(kind, key, version);
    bool applied = BOOL(ld_store_upsert(S, kind, item));
    json_decref(item);
    return applied;
}

static inline bool delete_at(const ld_kind *kind, const char *key, int64_t version)
{
    return BOOL(ld_store_delete(S, kind, key, version));
}

static inline void expect_error(ld_future *f, const char *what, int code, const char *in_message)
{
    await(f, what);
    ck_assert_msg(ld_future_is_rejected(f), "%s fulfilled; expected %s", what, ld_err_name(code));
    ck_assert_msg(ld_future_error(f) == code, "%s rejected with %s; expected %s", what,
                  ld_err_name(ld_future_error(f)), ld_err_name(code));
    const char *msg = ld_future_error_message(f);
    if (in_message)
        ck_assert_msg(msg && strstr(msg, in_message), "%s: message \"%s\" does not name \"%s\"",
                      what, msg ? msg : "(null)", in_message);
    ld_future_unref(f);
}

#define EXPECT_ERROR(call, code, in_message) expect_error((call), #call, (code), (in_message))

/* foo and bar are still at v10, nothing else is there, and initialized. */
static inline void expect_foo_bar_unchanged(void)
{
    ck_assert_int_eq(version_of(F, "foo"), 10);
    ck_assert_int_eq(version_of(F, "bar"), 10);
    ck_assert_int_eq(all_size(F), 2);
    ck_assert_int_eq(all_size(SEG), 0);
    ck_assert_msg(BOOL(ld_store_initialized(S)), "the store is no longer initialized");
}

#endif /* LD_TESTING_CONTRACT */

#endif /* LDASYNC_TESTING_INTERNAL_H */
