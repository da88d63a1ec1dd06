/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The store front layer and the in-memory store: what is particular to them.
 * The store contract itself runs on the memory store in check_contract.c. */
#include <event2/thread.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

static ld_store *store;

static void store_setup(void)
{
    ld_test_setup();
    store = ld_memory_store_new(B);
    ck_assert_ptr_nonnull(store);
}

static void store_teardown(void)
{
    ld_store_free(store);
    store = NULL;
    ld_test_teardown();
}

/* Waits for f, checks it fulfilled, and returns it (still referenced). */
static ld_future *done(ld_future *f)
{
    ck_assert_ptr_nonnull(f);
    ld_test_wait(f);
    ck_assert_msg(ld_future_is_fulfilled(f), "rejected: %s", ld_future_error_message(f));
    return f;
}

static void ok(ld_future *f)
{
    ld_future_unref(done(f));
}

static bool await_bool(ld_future *f)
{
    bool v = ld_future_bool(done(f));
    ld_future_unref(f);
    return v;
}

/* The version of the feature `key` as get returns it, -1 if NULL. */
static int64_t get_version(const char *key)
{
    ld_future *f = done(ld_store_get(store, ld_kind_features(), key));
    int64_t v = ld_future_json(f) ? ld_item_version(ld_future_json(f)) : -1;
    ld_future_unref(f);
    return v;
}

static void init_foo_bar(void)
{
    json_t *data = json_pack("{s:{s:o, s:o}, s:{}}", "features", "foo", ld_test_feature("foo", 10),
                             "bar", ld_test_feature("bar", 10), "segments");
    ok(ld_store_init(store, data));
    json_decref(data);
}

static void upsert(const char *key, int version, bool applied)
{
    json_t *item = ld_test_feature(key, version);
    ck_assert_int_eq(await_bool(ld_store_upsert(store, ld_kind_features(), item)), applied);
    json_decref(item);
}

START_TEST(test_describe_is_memory)
{
    ck_assert_str_eq(ld_store_describe(store), "memory");
    ck_assert_ptr_eq(ld_store_base(store), B);
    ck_assert_ptr_null(ld_store_base(NULL));
    ck_assert_str_eq(ld_store_describe(NULL), "(null)");
}
END_TEST

/* ---- snapshots ------------------------------------------------------------- */

START_TEST(test_all_snapshot_does_not_change_under_a_reader)
{
    init_foo_bar();
    ld_future *before = done(ld_store_all(store, ld_kind_features()));
    upsert("foo", 20, true);
    ck_assert(await_bool(ld_store_delete(store, ld_kind_features(), "bar", 20)));
    json_t *old = ld_future_json(before);
    ck_assert_int_eq(json_object_size(old), 2);
    ck_assert_int_eq(ld_item_version(json_object_get(old, "foo")), 10);
    ld_future *after = done(ld_store_all(store, ld_kind_features()));
    ck_assert_int_eq(ld_item_version(json_object_get(ld_future_json(after), "foo")), 20);
    ck_assert_ptr_null(json_object_get(ld_future_json(after), "bar"));
    ld_future_unref(before);
    ld_future_unref(after);
}
END_TEST

START_TEST(test_all_is_the_same_object_while_nothing_changes)
{
    init_foo_bar();
    ld_future *a = done(ld_store_all(store, ld_kind_features()));
    ld_future *b = done(ld_store_all(store, ld_kind_features()));
    ck_assert_ptr_eq(ld_future_json(a), ld_future_json(b));
    ld_future_unref(a);
    ld_future_unref(b);
}
END_TEST

START_TEST(test_items_are_shared_not_copied)
{
    json_t *item = ld_test_feature("x", 1);
    ck_assert(await_bool(ld_store_upsert(store, ld_kind_features(), item)));
    ld_future *f = done(ld_store_get(store, ld_kind_features(), "x"));
    ck_assert_ptr_eq(ld_future_json(f), item);
    ld_future_unref(f);
    json_decref(item);
}
END_TEST

/* The memory store lets go of the items writes replace from the loop, all
 * of them at once (their cache misses overlap): not inside the write. */
START_TEST(test_replaced_items_are_released_from_the_loop)
{
    const ld_kind *k = ld_kind_features();
    json_t *v1 = ld_test_feature("x", 1), *v2 = ld_test_feature("x", 2);
    ck_assert(await_bool(ld_store_upsert(store, k, v1)));
    ld_future *f = ld_store_upsert(store, k, v2);
    ck_assert_int_eq(v1->refcount, 2);            /* still the store's too */
    ld_future_unref(ld_store_get(store, k, "x")); /* nor does a get let go */
    ck_assert_int_eq(v1->refcount, 2);
    ld_test_flush();
    ck_assert_int_eq(v1->refcount, 1);
    ck_assert(ld_future_bool(f));
    ld_future_unref(f);
    f = ld_store_delete(store, k, "x", 3); /* a tombstone replaces v2 */
    ck_assert_int_eq(v2->refcount, 2);
    ld_test_flush();
    ck_assert_int_eq(v2->refcount, 1);
    ck_assert(ld_future_bool(f));
    ld_future_unref(f);
    json_decref(v1);
    json_decref(v2);
}
END_TEST

/* An item replaced while a get's result may still read it waits for that
 * result, then goes with the next use of the store. */
START_TEST(test_replaced_items_wait_for_get_results_that_may_read_them)
{
    const ld_kind *k = ld_kind_features();
    json_t *v1 = ld_test_feature("x", 1), *v2 = ld_test_feature("x", 2);
    ck_assert(await_bool(ld_store_upsert(store, k, v1)));
    ld_future *held = done(ld_store_get(store, k, "x"));
    ck_assert(await_bool(ld_store_upsert(store, k, v2)));
    ld_test_flush();
    ck_assert_int_eq(v1->refcount, 2); /* held may read it */
    ck_assert_ptr_eq(ld_future_json(held), v1);
    ld_future_unref(held);
    ck_assert_int_eq(get_version("x"), 2); /* runs the loop */
    ld_test_flush();
    ck_assert_int_eq(v1->refcount, 1);
    json_decref(v1);
    json_decref(v2);
}
END_TEST

/* Without the loop running, no more than a few hundred replaced items wait
 * to be let go of. */
START_TEST(test_items_waiting_for_release_are_bounded)
{
    enum { N = 1000, MAX_WAITING = 256 };
    const ld_kind *k = ld_kind_features();
    static json_t *old[N];
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "flag-%d", i);
        old[i] = ld_test_feature(key, 1);
        ck_assert(await_bool(ld_store_upsert(store, k, old[i])));
    }
    for (int i = 0; i < N; i++) { /* no loop pass in between */
        snprintf(key, sizeof(key), "flag-%d", i);
        json_t *item = ld_test_feature(key, 2);
        ld_future_unref(ld_store_upsert(store, k, item));
        json_decref(item);
    }
    int waiting = 0;
    for (int i = 0; i < N; i++)
        waiting += old[i]->refcount > 1;
    ck_assert_int_gt(waiting, 0);
    ck_assert_int_le(waiting, MAX_WAITING);
    ld_test_flush();
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(old[i]->refcount, 1);
        json_decref(old[i]);
    }
}
END_TEST

/* Live bytes of jansson and of the library, counted by allocators that
 * wrap the C library's (their blocks free each other's). */
static long json_live, lib_live;

static void *json_count_malloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        json_live += (long)malloc_usable_size(p);
    return p;
}

static void json_count_free(void *p)
{
    json_live -= (long)malloc_usable_size(p);
    free(p);
}

static void *lib_count_malloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        lib_live += (long)malloc_usable_size(p);
    return p;
}

static void *lib_count_realloc(void *p, size_t n)
{
    long before = (long)malloc_usable_size(p);
    void *q = realloc(p, n);
    if (q)
        lib_live += (long)malloc_usable_size(q) - before;
    return q;
}

static void lib_count_free(void *p)
{
    lib_live -= (long)malloc_usable_size(p);
    free(p);
}

static void put_small(int key, int version)
{
    char name[16];
    snprintf(name, sizeof(name), "flag-%d", key);
    json_t *item = json_pack("{s:s, s:i}", "key", name, "version", version);
    ld_future_unref(ld_store_upsert(store, ld_kind_features(), item));
    json_decref(item);
}

static ld_future *get_small(int key)
{
    char name[16];
    snprintf(name, sizeof(name), "flag-%d", key);
    return ld_store_get(store, ld_kind_features(), name);
}

/* A held get result reads the item it got. */
static void assert_reads(ld_future *f, int key, int version)
{
    char name[16];
    snprintf(name, sizeof(name), "flag-%d", key);
    ck_assert_ptr_nonnull(ld_future_json(f));
    ck_assert_str_eq(ld_item_key(ld_future_json(f)), name);
    ck_assert_int_eq(ld_item_version(ld_future_json(f)), version);
}

/* 200,000 upserts over 1,000 keys, each followed by a get released at once
 * (an evaluation), with the loop run after every 1,000 as a server would,
 * while `nheld` get results are held: one for the whole run, or 16 of which
 * one is replaced by a new one every 1,000 writes. Returns the live bytes
 * of jansson after the first 1,000 writes and after the run, and the
 * growth of the library's. */
static void writes_with_held_gets(int nheld, long *json_first, long *json_end, long *lib_growth)
{
    enum { KEYS = 1000, ROUNDS = 200, HELD_MAX = 16 };
    ld_future *held[HELD_MAX];
    int held_key[HELD_MAX], held_version[HELD_MAX];
    json_live = lib_live = 0;
    json_set_alloc_funcs(json_count_malloc, json_count_free);
    ck_assert_int_eq(ld_set_alloc_funcs(lib_count_malloc, lib_count_realloc, lib_count_free), 0);
    for (int i = 0; i < KEYS; i++)
        put_small(i, 1);
    for (int h = 0; h < nheld; h++) {
        held_key[h] = h * 61 % KEYS;
        held_version[h] = 1;
        held[h] = done(get_small(held_key[h]));
    }
    ld_test_flush();
    *json_first = json_live;
    long lib_first = lib_live;
    for (int version = 2; version < ROUNDS + 2; version++) {
        /* the library's baseline: after one round, when the futures that
         * wait for the loop between its passes (1,000 here) have their
         * slabs, which are kept for reuse */
        if (version == 3)
            lib_first = lib_live;
        for (int i = 0; i < KEYS; i++) {
            put_small(i, version);
            ld_future_unref(get_small(i * 7 % KEYS));
        }
        if (nheld > 1) { /* the oldest held result goes, a new one comes */
            int h = version % nheld;
            assert_reads(held[h], held_key[h], held_version[h]);
            ld_future_unref(held[h]);
            held_key[h] = version * 37 % KEYS;
            held_version[h] = version;
            held[h] = done(get_small(held_key[h]));
        }
        event_base_loop(B, EVLOOP_NONBLOCK);
    }
    ld_test_flush();
    *json_end = json_live;
    *lib_growth = lib_live - lib_first;
    for (int h = 0; h < nheld; h++) {
        assert_reads(held[h], held_key[h], held_version[h]);
        ld_future_unref(held[h]);
    }
    ld_test_flush();
    json_set_alloc_funcs(malloc, free);
    ck_assert_int_eq(ld_set_alloc_funcs(NULL, NULL, NULL), 0);
}

/* A get result held while writes go on keeps the item it got, not every
 * item replaced after it: what the store keeps stays within a small factor
 * of its data, however many writes (before, 200 times its data here). The
 * get results held, one loop index each: one for the whole run (a held get
 * result keeps its item, not every later write), or 16 rotating (rotating
 * held get results keep memory flat). */
static const int held_gets[] = {1, 16};

START_TEST(test_held_get_results_keep_their_items_not_every_later_write)
{
    long first, end, lib;
    writes_with_held_gets(held_gets[_i], &first, &end, &lib);
    ck_assert_msg(end <= 2 * first,
                  "jansson (%d held): %ld bytes after the first 1,000 writes, %ld after 200,000",
                  held_gets[_i], first, end);
    ck_assert_msg(lib <= 64 * 1024, "the library grew by %ld bytes (%d held)", lib, held_gets[_i]);
}
END_TEST

START_TEST(test_many_keys_grow_the_table)
{
    enum { N = 5000 };
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        if (i % 3 == 0) {
            ck_assert(await_bool(ld_store_delete(store, ld_kind_features(), key, 1)));
        } else {
            json_t *item = ld_test_feature(key, 1);
            ck_assert(await_bool(ld_store_upsert(store, ld_kind_features(), item)));
            json_decref(item);
        }
    }
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        ck_assert_int_eq(get_version(key), i % 3 == 0 ? -1 : 1);
    }
    ld_future *all = done(ld_store_all(store, ld_kind_features()));
    ck_assert_int_eq(json_object_size(ld_future_json(all)), N - (N + 2) / 3);
    ld_future_unref(all);
}
END_TEST

/* ---- the front layer with a scripted implementation ----------------------- */

static int seq[16], nseq;

static void note_order(ld_future *f, void *arg)
{
    (void)f;
    seq[nseq++] = (int)(intptr_t)arg;
}

/* A store whose operations complete only when the test says so, in any
 * order: it shows that the front layer orders results. */
struct slow {
    ld_future *outs[8];
    int n;
    int freed;
};

static void slow_keep(void *impl, ld_future *out)
{
    struct slow *s = impl;
    s->outs[s->n++] = out;
}

static void slow_get(void *impl, const ld_kind *k, const char *key, ld_future *out)
{
    (void)k;
    (void)key;
    slow_keep(impl, out);
}

static void slow_all(void *impl, const ld_kind *k, ld_future *out)
{
    (void)k;
    slow_keep(impl, out);
}

static void slow_init(void *impl, const json_t *d, ld_future *out)
{
    (void)d;
    slow_keep(impl, out);
}

static void slow_upsert(void *impl, const ld_kind *k, const json_t *item,
                        const struct ld_item_info *info, ld_future *out)
{
    (void)k;
    (void)item;
    (void)info;
    slow_keep(impl, out);
}

static void slow_del(void *impl, const ld_kind *k, const char *key, int64_t v, ld_future *out)
{
    (void)k;
    (void)key;
    (void)v;
    slow_keep(impl, out);
}

static void slow_free(void *impl)
{
    struct slow *s = impl;
    for (int i = 0; i < s->n; i++)
        ld_future_unref(s->outs[i]);
    s->n = 0;
    s->freed = 1;
}

static const struct ld_store_ops slow_ops = {
    .version = LD_STORE_OPS_VERSION,
    .get = slow_get,
    .all = slow_all,
    .init = slow_init,
    .upsert = slow_upsert,
    .del = slow_del,
    .initialized = slow_keep,
    .free = slow_free,
};

/* ld_store_set_init_validates(): the front hands invalid data to the
 * implementation's init, which answers for it; without it, the front
 * rejects it within ld_store_init() and the implementation hears nothing.
 * NULL is refused. */
START_TEST(test_an_implementation_may_validate_its_init)
{
    ck_assert_int_eq(ld_store_set_init_validates(NULL), LD_EINVAL);
    json_t *bad = json_pack("{s:{s:{s:s,s:i}}}", "features", "a", "key", "b", "version", 1);
    struct slow plain = {0}, own = {0};
    ld_store *p = ld_store_new(B, &slow_ops, &plain);
    ld_future *f = ld_store_init(p, bad);
    ck_assert_int_eq(plain.n, 0);
    ld_test_wait(f);
    ck_assert_int_eq(ld_future_error(f), LD_EINVAL);
    ld_future_unref(f);
    ld_store *o = ld_store_new(B, &slow_ops, &own);
    ck_assert_int_eq(ld_store_set_init_validates(o), 0);
    f = ld_store_init(o, bad);
    ck_assert_int_eq(own.n, 1); /* the implementation has it */
    ck_assert(ld_future_is_pending(f));
    ld_future_reject(own.outs[0], LD_EINVAL, "%s", "item \"key\" differs");
    ld_test_wait(f);
    ck_assert_int_eq(ld_future_error(f), LD_EINVAL);
    ck_assert_str_eq(ld_future_error_message(f), "item \"key\" differs");
    ld_future_unref(f);
    json_decref(bad);
    ld_store_free(p);
    ld_store_free(o);
}
END_TEST

/* Operations the front answers itself (bad input, closed) complete after
 * the operations issued before them, as every other result does. */
START_TEST(test_front_rejections_complete_in_issue_order)
{
    struct slow impl = {0};
    ld_store *s = ld_store_new(B, &slow_ops, &impl);
    nseq = 0;
    ld_future_on_complete(ld_store_initialized(s), note_order, (void *)0);
    ld_future_on_complete(ld_store_get(s, ld_kind_features(), ""), note_order, (void *)1);
    ld_future_on_complete(ld_store_upsert(s, ld_kind_features(), NULL), note_order, (void *)2);
    ld_future_on_complete(ld_store_get(s, ld_kind_features(), "x"), note_order, (void *)3);
    ld_future_on_complete(ld_store_delete(s, NULL, "x", 1), note_order, (void *)4);
    ld_future *close = ld_store_close(s);
    ld_future_on_complete(close, note_order, (void *)5);
    ld_future_on_complete(ld_store_get(s, ld_kind_features(), "x"), note_order, (void *)6);
    ck_assert_int_eq(impl.n, 2);
    ld_test_flush();
    ck_assert_int_eq(nseq, 0); /* everything waits for the first */
    ld_future_fulfill_json(impl.outs[1], NULL);
    ld_future_fulfill_bool(impl.outs[0], true);
    ld_test_flush();
    ck_assert_int_eq(nseq, 7);
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(seq[i], i);
    ld_store_free(s);
}
END_TEST

START_TEST(test_out_of_order_implementation_results_are_reordered)
{
    struct slow impl = {0};
    ld_store *s = ld_store_new(B, &slow_ops, &impl);
    ck_assert_str_eq(ld_store_describe(s), "unknown");
    nseq = 0;
    ld_future *a = ld_store_initialized(s);
    ld_future *b = ld_store_get(s, ld_kind_segments(), "x");
    ld_future_on_complete(ld_future_ref(a), note_order, (void *)0);
    ld_future_on_complete(ld_future_ref(b), note_order, (void *)1);
    ld_future_fulfill_json(impl.outs[1], NULL); /* the second finishes first */
    ld_test_flush();
    ck_assert_int_eq(nseq, 0);
    ck_assert(ld_future_is_pending(b));
    ld_future_reject(impl.outs[0], LD_ESTORE, "backend down");
    ld_test_flush();
    ck_assert_int_eq(nseq, 2);
    ck_assert_int_eq(seq[0], 0);
    ck_assert_int_eq(seq[1], 1);
    ck_assert_int_eq(ld_future_error(a), LD_ESTORE);
    ck_assert_str_eq(ld_future_error_message(a), "backend down");
    ld_future_unref(a);
    ld_future_unref(b);
    ld_store_free(s);
    ck_assert(impl.freed);
}
END_TEST

static void quick_get(void *impl, const ld_kind *k, const char *key, ld_future *out)
{
    (void)impl;
    (void)k;
    (void)key;
    ld_future_fulfill_json(out, NULL);
    ld_future_unref(out);
}

static ld_store *race_store;

static void issue_quick_get(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    ld_future_on_complete(ld_store_get(race_store, ld_kind_features(), "x"), note_order, (void *)1);
}

/* The implementation completes the first operation; in the same pass of
 * the loop, before the caller's future of the first has completed, a
 * second operation completes at once: it must still come second. */
START_TEST(test_result_completed_at_once_does_not_overtake_a_handed_over_one)
{
    struct slow impl = {0};
    struct ld_store_ops ops = slow_ops;
    ops.get = quick_get;
    race_store = ld_store_new(B, &ops, &impl);
    nseq = 0;
    ld_future_on_complete(ld_store_initialized(race_store), note_order, (void *)0);
    ck_assert_int_eq(impl.n, 1);
    /* runs right after the store's own callback on the implementation's future */
    ld_future_on_complete(ld_future_ref(impl.outs[0]), issue_quick_get, NULL);
    ld_future_fulfill_bool(impl.outs[0], true);
    ld_test_flush();
    ck_assert_int_eq(nseq, 2);
    ck_assert_int_eq(seq[0], 0);
    ck_assert_int_eq(seq[1], 1);
    ld_store_free(race_store);
}
END_TEST

/* An allocator that fails once `oom_armed` is set. */
static bool oom_armed;

static void *oom_malloc(size_t n)
{
    return oom_armed ? NULL : malloc(n);
}

static void *oom_realloc(void *p, size_t n)
{
    return oom_armed ? NULL : realloc(p, n);
}

static void noop_cb(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
}

/* Results handed over in one pass while memory has run out keep their
 * order: the first joins a batch of results completed later, something
 * else is queued behind that batch, and the next finds no memory for a
 * batch of its own; it must still complete after the first (store.h: only
 * an LD_ENOMEM rejection may overtake). */
START_TEST(test_results_handed_over_without_memory_keep_issue_order)
{
    struct slow impl = {0};
    ld_store *s = ld_store_new(B, &slow_ops, &impl);
    ld_store *mem = ld_memory_store_new(B);
    ld_future *first = ld_store_get(s, ld_kind_features(), "a");
    ld_future *cancelled = ld_store_get(s, ld_kind_features(), "b");
    ld_future *third = ld_store_get(s, ld_kind_features(), "c");
    ck_assert_int_eq(impl.n, 3);
    nseq = 0;
    ld_future_on_complete(ld_future_ref(first), note_order, (void *)0);
    ld_future_on_complete(ld_future_ref(third), note_order, (void *)2);
    /* its hand-over queues a callback at once: what follows cannot join
     * the batch that the first joins */
    ck_assert_int_eq(ld_future_cancel(cancelled), 0);
    ld_future_fulfill_json(impl.outs[1], NULL);
    ld_future_fulfill_json(impl.outs[2], NULL);
    ld_test_flush();                            /* both wait for the first */
    ld_future_fulfill_json(impl.outs[0], NULL); /* the hand-over comes next */
    /* Batches queued behind it, none spare: the last one is open. */
    ld_future *gets[24];
    for (int i = 0; i < 24; i++) {
        ld_future *done = ld_future_new(B);
        ld_future_fulfill(done);
        ck_assert_int_eq(ld_future_on_complete(done, noop_cb, NULL), 0);
        gets[i] = ld_store_get(mem, ld_kind_features(), "x");
    }
    ck_assert_int_eq(ld_set_alloc_funcs(oom_malloc, oom_realloc, free), 0);
    oom_armed = true;
    ld_test_flush();
    oom_armed = false;
    ck_assert_int_eq(ld_set_alloc_funcs(NULL, NULL, NULL), 0);
    ck_assert(ld_future_is_fulfilled(first));
    ck_assert(ld_future_is_fulfilled(third));
    ck_assert_int_eq(nseq, 2);
    ck_assert_int_eq(seq[0], 0);
    ck_assert_int_eq(seq[1], 2);
    for (int i = 0; i < 24; i++)
        ld_future_unref(gets[i]);
    ld_future_unref(first);
    ld_future_unref(cancelled);
    ld_future_unref(third);
    ld_store_free(mem);
    ld_store_free(s);
}
END_TEST

START_TEST(test_free_cancels_pending_operations)
{
    struct slow impl = {0};
    ld_store *s = ld_store_new(B, &slow_ops, &impl);
    ld_future *f = ld_store_get(s, ld_kind_features(), "x");
    ld_store_free(s);
    ld_test_wait(f);
    ck_assert_int_eq(ld_future_error(f), LD_ECANCELED);
    ld_future_unref(f);
}
END_TEST

static void free_store_inside(ld_future *f, void *arg)
{
    (void)f;
    ld_store_free(arg);
}

START_TEST(test_free_from_inside_own_callback_is_safe)
{
    struct slow impl = {0};
    ld_store *s = ld_store_new(B, &slow_ops, &impl);
    ld_future *first = ld_store_initialized(s);
    ld_future *second = ld_store_initialized(s);
    ld_future_on_complete(ld_future_ref(first), free_store_inside, s);
    ld_future_fulfill_bool(impl.outs[0], true);
    ld_test_flush(); /* first's callback frees the store; second is cancelled */
    ck_assert(ld_future_bool(first));
    ck_assert_int_eq(ld_future_error(second), LD_ECANCELED);
    ld_future_unref(first);
    ld_future_unref(second);
}
END_TEST

/* Each operation of the memory store gets a future of its own, pending
 * when returned (nobody but the store can complete it) and completed from
 * the loop. */
START_TEST(test_write_results_are_futures_of_their_own)
{
    int calls_true = 0, calls_false = 0;
    json_t *item = ld_test_feature("foo", 1);
    ld_future *a = ld_store_upsert(store, ld_kind_features(), item);
    ld_future *b = ld_store_upsert(store, ld_kind_features(), item); /* equal: false */
    ld_future *c = ld_store_delete(store, ld_kind_features(), "foo", 2);
    json_decref(item);
    ck_assert(a != b && b != c && a != c);
    ck_assert(ld_future_is_pending(a) && ld_future_is_pending(b) && ld_future_is_pending(c));
    /* the store's to complete, not the caller's */
    ck_assert_int_eq(ld_future_fulfill_bool(a, false), LD_EALREADY);
    ck_assert_int_eq(ld_future_reject(b, LD_EIO, NULL), LD_EALREADY);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(a), ld_test_count_cb, &calls_true), 0);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(c), ld_test_count_cb, &calls_true), 0);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(b), ld_test_count_cb, &calls_false), 0);
    ld_test_flush();
    ck_assert_int_eq(calls_true, 2);
    ck_assert_int_eq(calls_false, 1);
    ck_assert(ld_future_bool(a) && !ld_future_bool(b) && ld_future_bool(c));
    ld_future_unref(a);
    ld_future_unref(b);
    ld_future_unref(c);
}
END_TEST

/* A result cancelled while it waits for the loop stays cancelled, and what
 * it held (a get's item) is let go of. */
START_TEST(test_a_result_cancelled_before_the_loop_ran_stays_cancelled)
{
    json_t *item = ld_test_feature("foo", 1);
    ld_future_unref(ld_store_upsert(store, ld_kind_features(), item));
    json_decref(item);
    ld_future *g = ld_store_get(store, ld_kind_features(), "foo");
    ld_future *w = ld_store_delete(store, ld_kind_features(), "foo", 5);
    ld_future *x = ld_store_get(store, ld_kind_features(), "foo"); /* after the delete */
    ld_future *y = ld_store_initialized(store);
    ck_assert_int_eq(ld_future_cancel(g), 0);
    ck_assert_int_eq(ld_future_cancel(w), 0);
    ld_test_flush();
    ck_assert_int_eq(ld_future_error(g), LD_ECANCELED);
    ck_assert_int_eq(ld_future_error(w), LD_ECANCELED); /* the delete happened all the same */
    /* the results issued after them still complete */
    ck_assert(ld_future_is_fulfilled(x) && !ld_future_json(x));
    ck_assert(ld_future_is_fulfilled(y));
    ld_future_unref(x);
    ld_future_unref(y);
    ld_future *after = ld_store_get(store, ld_kind_features(), "foo");
    ld_test_wait(after);
    ck_assert_ptr_null(ld_future_json(after));
    ld_future_unref(after);
    ld_future_unref(g);
    ld_future_unref(w);
}
END_TEST

START_TEST(test_write_results_outlive_the_store)
{
    json_t *item = ld_test_feature("foo", 1);
    ld_future *a = ld_store_upsert(store, ld_kind_features(), item);
    ld_future *b = ld_store_delete(store, ld_kind_features(), "foo", 1);
    ld_future *g = ld_store_get(store, ld_kind_features(), "foo");
    json_decref(item);
    ld_store_free(store);
    store = NULL;
    ld_test_flush();
    ck_assert(ld_future_bool(a));
    ck_assert(!ld_future_bool(b));
    ck_assert_int_eq(ld_item_version(ld_future_json(g)), 1); /* the item lives on */
    ld_future_unref(a);
    ld_future_unref(b);
    ld_future_unref(g);
}
END_TEST

/* Tombstones keep their key without JSON: every transition between live
 * items and tombstones, by upsert of a deleted item and by delete. */
START_TEST(test_tombstones_from_upsert_and_delete_alternate_with_items)
{
    const ld_kind *k = ld_kind_features();
    upsert("foo", 1, true);
    ld_future_unref(done(ld_store_all(store, k))); /* a snapshot, kept in step in place */
    ck_assert(await_bool(ld_store_delete(store, k, "foo", 2)));  /* live -> tombstone */
    ck_assert(await_bool(ld_store_delete(store, k, "foo", 3)));  /* tombstone -> tombstone */
    ck_assert(!await_bool(ld_store_delete(store, k, "foo", 3))); /* equal */
    upsert("foo", 3, false);                                     /* the tombstone blocks */
    upsert("foo", 4, true);                                      /* tombstone -> live */
    ck_assert_int_eq(get_version("foo"), 4);
    json_t *tomb = ld_tombstone_new("foo", 5);
    ck_assert(await_bool(ld_store_upsert(store, k, tomb))); /* live -> tombstone by upsert */
    ck_assert_int_eq(get_version("foo"), -1);
    tomb = (json_decref(tomb), ld_tombstone_new("bar", 7));
    ck_assert(await_bool(ld_store_upsert(store, k, tomb))); /* unknown key -> tombstone */
    json_decref(tomb);
    upsert("bar", 7, false);
    ck_assert(await_bool(ld_store_delete(store, k, "baz", 0))); /* unknown key, version 0 */
    upsert("baz", 0, false);
    upsert("baz", 1, true);
    ld_future *f = done(ld_store_all(store, k));
    ck_assert_int_eq(json_object_size(ld_future_json(f)), 1);
    ck_assert_int_eq(ld_item_version(json_object_get(ld_future_json(f), "baz")), 1);
    ld_future_unref(f);
}
END_TEST

/* A get's item stays valid while its future lives, whatever the store does
 * meanwhile: replaced, deleted, replaced by init, store freed. The items
 * are made here and released at once, so the store holds the only other
 * reference (valgrind and ASan see any early free). */
START_TEST(test_get_results_outlive_writes_init_and_free)
{
    const ld_kind *k = ld_kind_features();
    upsert("a", 1, true);
    upsert("b", 1, true);
    upsert("c", 1, true);
    ld_future *a1 = done(ld_store_get(store, k, "a"));
    ld_future *b1 = done(ld_store_get(store, k, "b"));
    upsert("a", 2, true);                                     /* replaced */
    ck_assert(await_bool(ld_store_delete(store, k, "b", 2))); /* deleted */
    ld_future *a2 = done(ld_store_get(store, k, "a"));        /* a new generation */
    ld_future *c1 = done(ld_store_get(store, k, "c"));
    init_foo_bar(); /* c replaced by init */
    upsert("foo", 11, true);
    ld_future *foo = done(ld_store_get(store, k, "foo"));
    ld_store_free(store); /* foo's table goes */
    store = NULL;
    ld_test_flush();
    ck_assert_int_eq(ld_item_version(ld_future_json(a1)), 1);
    ck_assert_str_eq(ld_item_key(ld_future_json(b1)), "b");
    ck_assert_int_eq(ld_item_version(ld_future_json(a2)), 2);
    ck_assert_str_eq(ld_item_key(ld_future_json(c1)), "c");
    ck_assert_int_eq(ld_item_version(ld_future_json(foo)), 11);
    /* released in an order unlike the generations' */
    ld_future_unref(a2);
    ld_future_unref(foo);
    ld_future_unref(a1);
    ld_future_unref(c1);
    ld_future_unref(b1);
}
END_TEST

enum { LATE_GETS = 100000 };

static void *release_gets(void *arg)
{
    ld_future **gets = arg;
    for (int i = 0; i < LATE_GETS; i++)
        ld_future_unref(gets[i]);
    return NULL;
}

/* libevent threading turned on after the store was made (and after a get
 * whose result is still held): get results made from then on may be
 * released on any thread, also while the loop thread makes and releases
 * others; their leases are then counted atomically. A lost count lets go
 * of replaced items too early (ASan) or never (the last check, and ASan's
 * leak check). A forked test starts with threading off; with CK_FORK=no an
 * earlier suite may have turned it on already. */
START_TEST(test_get_results_released_on_other_threads_once_threading_is_on)
{
    const ld_kind *k = ld_kind_features();
    json_t *a1 = ld_test_feature("a", 1);
    ck_assert(await_bool(ld_store_upsert(store, k, a1)));
    upsert("b", 1, true);
    ld_future *before = done(ld_store_get(store, k, "a")); /* threading may be off */
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    ld_future **gets = malloc(LATE_GETS * sizeof(*gets));
    ck_assert_ptr_nonnull(gets);
    for (int i = 0; i < LATE_GETS; i++)
        gets[i] = ld_store_get(store, k, "b");
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, release_gets, gets), 0);
    for (int i = 0; i < LATE_GETS; i++)
        ld_future_unref(ld_store_get(store, k, "a"));
    pthread_join(t, NULL);
    free(gets);
    upsert("a", 2, true); /* replaces the item `before` holds */
    ck_assert_int_eq(ld_item_version(ld_future_json(before)), 1);
    ld_future_unref(before);
    ck_assert_int_eq(get_version("a"), 2);
    ld_test_flush();
    ck_assert_int_eq(a1->refcount, 1); /* every lease counted back */
    json_decref(a1);
}
END_TEST

/* Once libevent threading is on, a result released before the loop ran
 * lets go of what it holds at once, as without threading: an all snapshot
 * released so is the store's alone again (a write may go into it instead
 * of copying 10,000 pairs: ~2 ms a write in the bench before). */
START_TEST(test_a_result_released_before_the_loop_lets_go_at_once_with_threading_on)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    upsert("a", 1, true);
    ld_future *first = done(ld_store_all(store, ld_kind_features()));
    json_t *snap = ld_future_json(first);
    size_t held = snap->refcount;                               /* the store's and first's */
    ld_future *again = ld_store_all(store, ld_kind_features()); /* the same snapshot */
    ck_assert(ld_future_is_pending(again));
    ck_assert_uint_eq(snap->refcount, held + 1);
    ld_future_unref(again); /* before the loop ran */
    ck_assert_uint_eq(snap->refcount, held);
    ld_future_unref(first);
    ld_test_flush();
}
END_TEST

enum { SEALED_GETS = 20000 };

static void *read_and_release(void *arg)
{
    ld_future **gets = arg;
    long bad = 0;
    for (int i = 0; i < SEALED_GETS; i++) {
        bad += ld_item_version(ld_future_json(gets[i])) != 1;
        ld_future_unref(gets[i]);
    }
    return (void *)bad;
}

/* Get results read and released on another thread while the loop thread
 * writes over their items: the writes seal the generations of the results
 * (each takes references on its items, then goes with its last result, on
 * that thread). Each result reads its item to the end (ASan, TSan), and
 * every reference is given back (the leak check). */
START_TEST(test_get_results_released_on_other_threads_while_writes_seal_them)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    for (int i = 0; i < 100; i++)
        put_small(i, 1);
    ld_future **gets = malloc(SEALED_GETS * sizeof(*gets));
    ck_assert_ptr_nonnull(gets);
    for (int i = 0; i < SEALED_GETS; i++)
        gets[i] = get_small(i % 100);
    ld_test_flush(); /* the results complete from the loop */
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, read_and_release, gets), 0);
    for (int version = 2; version < 60; version++) {
        for (int i = 0; i < 100; i++) {
            put_small(i, version);
            ld_future_unref(get_small(i * 7 % 100));
        }
        event_base_loop(B, EVLOOP_NONBLOCK);
    }
    void *bad;
    pthread_join(t, &bad);
    free(gets);
    ck_assert_ptr_null(bad);
    ld_test_flush();
}
END_TEST

static void copy_item(ld_future *in, ld_future *out, void *arg)
{
    (void)arg;
    ld_future_fulfill_json(out, json_incref(ld_future_json(in)));
}

/* A future that adopts a get's value (forward, then, catch, timeout) keeps
 * the item alive on its own, after the get's future is gone. */
START_TEST(test_values_adopted_from_a_get_outlive_it)
{
    const ld_kind *k = ld_kind_features();
    upsert("a", 1, true);
    ld_future *caught = ld_future_catch(ld_store_get(store, k, "a"), copy_item, NULL);
    ld_future *then = ld_future_then(ld_store_get(store, k, "a"), copy_item, NULL);
    ld_future *fwd = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(fwd, ld_store_get(store, k, "a")), 0);
    ld_test_flush();
    upsert("a", 2, true);
    ld_store_free(store);
    store = NULL;
    ld_test_flush();
    ck_assert_int_eq(ld_item_version(ld_future_json(caught)), 1);
    ck_assert_int_eq(ld_item_version(ld_future_json(then)), 1);
    ck_assert_int_eq(ld_item_version(ld_future_json(fwd)), 1);
    ld_future_unref(caught);
    ld_future_unref(then);
    ld_future_unref(fwd);
}
END_TEST

static int fail_countdown = -1; /* the allocation that fails when it reaches 0 */

static void *failing_malloc(size_t n)
{
    if (fail_countdown >= 0 && fail_countdown-- == 0)
        return NULL;
    return malloc(n);
}

/* When memory runs out while the snapshot of all is copied for a reader,
 * the next all is still complete (a partial copy must not be kept). */
START_TEST(test_all_stays_complete_when_a_snapshot_copy_runs_out_of_memory)
{
    const ld_kind *k = ld_kind_features();
    char key[16];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "f%d", i);
        upsert(key, 1, true);
    }
    size_t live = 40;
    for (int when = 0; when < 60; when++) {
        ld_future *held = done(ld_store_all(store, k)); /* the next write copies */
        snprintf(key, sizeof(key), "new%d", when);
        json_t *item = ld_test_feature(key, 1);
        json_set_alloc_funcs(failing_malloc, free);
        fail_countdown = when;
        ld_future *u = ld_store_upsert(store, k, item);
        fail_countdown = -1;
        json_set_alloc_funcs(malloc, free);
        json_decref(item);
        ld_test_wait(u);
        int applied = ld_future_is_fulfilled(u) && ld_future_bool(u);
        ld_future_unref(u);
        live += applied;
        ld_future *all = done(ld_store_all(store, k));
        ck_assert_uint_eq(json_object_size(ld_future_json(all)), live);
        ld_future *g = done(ld_store_get(store, k, key));
        ck_assert_int_eq(ld_future_json(g) != NULL, applied);
        ck_assert_int_eq(json_object_get(ld_future_json(all), key) != NULL, applied);
        ld_future_unref(g);
        ld_future_unref(all);
        ld_future_unref(held);
    }
    /* every item the store holds is in all */
    ld_future *all = done(ld_store_all(store, k));
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "f%d", i);
        ck_assert_ptr_nonnull(json_object_get(ld_future_json(all), key));
    }
    ld_future_unref(all);
}
END_TEST

/* Two objects hold the same keys, each with the same item (pointer). */
static void assert_same_items(const json_t *got, const json_t *want)
{
    ck_assert_uint_eq(json_object_size(got), json_object_size(want));
    const char *key;
    json_t *item;
    json_object_foreach((json_t *)want, key, item)
    {
        if (json_object_get(got, key) != item) /* no ck_assert per key: each is a write(2) */
            ck_abort_msg("key %s", key);
    }
}

/* Random writes while readers hold and release snapshots of all: every
 * all matches the data, and no held snapshot ever changes (the store
 * writes into a snapshot only once nobody else holds it, brings an earlier
 * one up to date by replaying the keys written since, or copies). */
START_TEST(test_all_snapshots_stay_exact_under_random_writes_and_readers)
{
    const ld_kind *k = ld_kind_features();
    enum { KEYS = 200, HOLDERS = 3, STEPS = 3000 };
    json_t *model = json_object();
    ld_future *held[HOLDERS] = {0};
    json_t *held_model[HOLDERS] = {0};
    int64_t version = 1;
    unsigned rnd = 12345;
    char key[16];
    for (int step = 0; step < STEPS; step++) {
        rnd = rnd * 1103515245u + 12345u;
        unsigned r = (rnd >> 8) % 100;
        snprintf(key, sizeof(key), "k%u", (rnd >> 16) % KEYS);
        if (r < 55) {
            json_t *item = ld_test_feature(key, (int)++version);
            ck_assert(await_bool(ld_store_upsert(store, k, item)));
            json_object_set(model, key, item);
            json_decref(item);
        } else if (r < 75) {
            ck_assert(await_bool(ld_store_delete(store, k, key, ++version)));
            json_object_del(model, key);
        } else {
            ld_future *f = done(ld_store_all(store, k));
            assert_same_items(ld_future_json(f), model);
            int h = (int)((rnd >> 4) % (HOLDERS + 1));
            if (h == HOLDERS) { /* released at once */
                ld_future_unref(f);
                continue;
            }
            ld_future_unref(held[h]);
            json_decref(held_model[h]);
            held[h] = f;
            held_model[h] = json_copy(model);
        }
        for (int h = 0; h < HOLDERS; h++)
            if (held[h] && step % 97 == 0)
                assert_same_items(ld_future_json(held[h]), held_model[h]);
    }
    for (int h = 0; h < HOLDERS; h++) {
        if (held[h])
            assert_same_items(ld_future_json(held[h]), held_model[h]);
        ld_future_unref(held[h]);
        json_decref(held_model[h]);
    }
    json_decref(model);
}
END_TEST

/* A released snapshot that fell far behind (more writes than an eighth of
 * the items since) is not brought up to date but dropped; all stays exact. */
START_TEST(test_all_stays_exact_when_an_earlier_snapshot_falls_far_behind)
{
    const ld_kind *k = ld_kind_features();
    json_t *model = json_object();
    char key[16];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        json_t *item = ld_test_feature(key, 1);
        ck_assert(await_bool(ld_store_upsert(store, k, item)));
        json_object_set_new(model, key, item);
    }
    for (int round = 0; round < 3; round++) {
        ld_future *a = done(ld_store_all(store, k)); /* held across a write */
        json_t *a_model = json_copy(model);
        for (int i = 0; i < 200; i++) { /* far more than 100 / 8 */
            snprintf(key, sizeof(key), "k%d", (i * 7 + round) % 100);
            json_t *item = ld_test_feature(key, 2 + round * 200 + i);
            ck_assert(await_bool(ld_store_upsert(store, k, item)));
            json_object_set_new(model, key, item);
            if (i == 0)
                ld_future_unref(a); /* released after the first write */
        }
        ld_future *b = done(ld_store_all(store, k));
        assert_same_items(ld_future_json(b), model);
        ld_future_unref(b);
        json_decref(a_model);
    }
    json_decref(model);
}
END_TEST

START_TEST(test_store_new_bad_input)
{
    struct slow impl = {0};
    struct ld_store_ops wrong = slow_ops;
    ck_assert_ptr_null(ld_store_new(NULL, &slow_ops, &impl));
    ck_assert_ptr_null(ld_store_new(B, NULL, &impl));
    wrong.version = 99;
    ck_assert_ptr_null(ld_store_new(B, &wrong, &impl));
    wrong = slow_ops;
    wrong.get = NULL;
    ck_assert_ptr_null(ld_store_new(B, &wrong, &impl));
    ck_assert_ptr_null(ld_memory_store_new(NULL));
}
END_TEST

/* ---- a large init, over several passes of the loop ------------------------- */

/* A memory store whose init loads `slice` items per pass of the loop. */
static ld_store *sliced_store(const char *slice)
{
    setenv("LDASYNC_STORE_INIT_SLICE", slice, 1);
    ld_store *st = ld_memory_store_new(B);
    unsetenv("LDASYNC_STORE_INIT_SLICE");
    ck_assert_ptr_nonnull(st);
    return st;
}

/* {"features": {n flags prefix-0 ... of `version`}, "segments": {}}; `bad`:
 * the item at that index has no version (-1: none). */
static json_t *many_flags(const char *prefix, int n, int version, int bad)
{
    json_t *features = json_object();
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s-%d", prefix, i);
        json_t *f = ld_test_feature(key, version);
        if (i == bad)
            json_object_del(f, "version");
        json_object_set_new(features, key, f);
    }
    return json_pack("{s:o, s:{}}", "features", features, "segments");
}

/* Runs single passes of the loop until `f` completes: how many. */
static int passes_until(ld_future *f)
{
    int n = 0;
    while (ld_future_is_pending(f) && n < 100000) {
        event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        n++;
    }
    return n;
}

START_TEST(test_a_large_init_is_loaded_over_several_loop_passes)
{
    ld_store *st = sliced_store("100");
    json_t *data = many_flags("a", 1000, 1, -1);
    ld_future *f = ld_store_init(st, data);
    json_decref(data); /* the store keeps what it needs */
    ck_assert_int_eq(ld_store_initialized_now(st), LD_EBUSY);
    ld_future *init = ld_store_initialized(st);
    int n = passes_until(f);
    ck_assert_msg(n >= 10, "1,000 items at 100 a pass took %d passes", n);
    ck_assert_msg(ld_future_is_fulfilled(f), "%s", ld_future_error_message(f));
    ld_future_unref(f);
    ck_assert(ld_test_await_bool(init)); /* asked after the init: answered after it */
    ck_assert_int_eq(ld_store_initialized_now(st), 1);
    ld_store_free(st);
}
END_TEST

/* Readers see the old data or the new, never a mix; what is issued during
 * the load comes after it, in issue order. */
START_TEST(test_operations_during_a_large_init_see_the_old_or_the_new_data)
{
    ld_store *st = sliced_store("100");
    json_t *small = many_flags("a", 50, 1, -1); /* within a slice: at once */
    ld_test_await_ok(ld_store_init(st, small));
    json_decref(small);
    ld_future *before = ld_store_get(st, ld_kind_features(), "a-0");
    json_t *data = many_flags("b", 1000, 1, -1);
    ld_future *f = ld_store_init(st, data);
    json_decref(data);
    ld_future *old = ld_store_get(st, ld_kind_features(), "a-0");
    ld_future *fresh = ld_store_get(st, ld_kind_features(), "b-999");
    ld_future *all = ld_store_all(st, ld_kind_features());
    json_t *item = ld_test_feature("b-1", 2);
    ld_future *up = ld_store_upsert(st, ld_kind_features(), item);
    json_decref(item);
    ld_future *del = ld_store_delete(st, ld_kind_features(), "b-2", 2);
    ld_future *stale = ld_store_delete(st, ld_kind_features(), "b-3", 1);
    event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ck_assert(ld_future_is_pending(f));
    ck_assert(ld_future_is_pending(fresh)); /* waits for the init */
    ck_assert_int_gt(passes_until(f), 5);
    ck_assert(ld_future_is_fulfilled(f));
    ld_test_flush();
    ck_assert_ptr_nonnull(ld_future_json(ld_test_fulfilled(before)));
    ck_assert_ptr_null(ld_future_json(ld_test_fulfilled(old)));
    ck_assert_ptr_nonnull(ld_future_json(ld_test_fulfilled(fresh)));
    ck_assert_int_eq(json_object_size(ld_future_json(ld_test_fulfilled(all))), 1000);
    ck_assert(ld_test_await_bool(up));
    ck_assert(ld_test_await_bool(del));
    ck_assert(!ld_test_await_bool(stale));
    ld_future *got = ld_test_fulfilled(ld_store_get(st, ld_kind_features(), "b-1"));
    ck_assert_int_eq(ld_item_version(ld_future_json(got)), 2);
    ld_future_unref(got);
    ld_future_unref(before);
    ld_future_unref(old);
    ld_future_unref(fresh);
    ld_future_unref(all);
    ld_future_unref(f);
    ld_store_free(st);
}
END_TEST

START_TEST(test_a_large_init_with_a_bad_item_changes_nothing)
{
    ld_store *st = sliced_store("100");
    json_t *data = many_flags("b", 1000, 1, 700);
    ld_future *f = ld_store_init(st, data);
    json_decref(data);
    ld_future *init = ld_store_initialized(st);
    ck_assert_int_gt(passes_until(f), 5);
    ld_test_expect_error(f, LD_EINVAL, "version");
    ck_assert(!ld_test_await_bool(init));
    ld_future *got = ld_test_fulfilled(ld_store_get(st, ld_kind_features(), "b-1"));
    ck_assert_ptr_null(ld_future_json(got));
    ld_future_unref(got);
    ld_store_free(st);
}
END_TEST

/* Freed while it loads, with operations waiting: each completes once. */
START_TEST(test_a_store_freed_during_a_large_init_cancels_what_waits)
{
    ld_store *st = sliced_store("100");
    json_t *data = many_flags("b", 1000, 1, -1);
    ld_future *f = ld_store_init(st, data);
    json_decref(data);
    ld_future *g = ld_store_get(st, ld_kind_features(), "b-1");
    event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ld_store_free(st);
    ld_test_flush();
    ck_assert(!ld_future_is_pending(f));
    ck_assert(!ld_future_is_pending(g));
    ld_future_unref(f);
    ld_future_unref(g);
}
END_TEST

/* ---- the status (store.h), on the memory store ------------------------ */

/* What a status listener heard, in order, and what it does at its first
 * call. */
struct heard {
    ld_store *store;
    int n;
    ld_store_status st[8];
    int64_t remove_id; /* a listener to remove at the first call, or 0 */
    bool free_store;   /* free the store at the first call */
    int64_t add;       /* a listener added at the first call (its id) */
};

static struct heard g_added; /* what the listener added by one heard */

static void listen_status(ld_store *st, const ld_store_status *status, void *arg)
{
    struct heard *h = arg;
    ck_assert_ptr_eq(st, h->store);
    ck_assert_int_lt(h->n, 8);
    h->st[h->n++] = *status;
    if (h->n > 1)
        return;
    if (h->remove_id)
        ck_assert_int_eq(ld_store_remove_status_listener(st, h->remove_id), 0);
    if (h->add < 0)
        h->add = ld_store_add_status_listener(st, listen_status, &g_added);
    if (h->free_store) {
        ld_store_free(st);
        store = NULL;
    }
}

START_TEST(test_status_starts_available_and_stays_so)
{
    ld_store_status st = {false, true};
    ck_assert_int_eq(ld_store_current_status(store, &st), 0);
    ck_assert(st.available);
    ck_assert(!st.needs_refresh);
    /* the memory store never changes it, whatever it does */
    struct heard h = {.store = store};
    ck_assert_int_gt(ld_store_add_status_listener(store, listen_status, &h), 0);
    json_t *item = ld_test_feature("f", 1);
    json_t *empty = json_object();
    ld_test_await_ok(ld_store_init(store, empty));
    ck_assert(ld_test_await_bool(ld_store_upsert(store, ld_kind_features(), item)));
    ld_test_await_ok(ld_store_close(store));
    json_decref(empty);
    json_decref(item);
    ld_test_flush();
    ck_assert_int_eq(h.n, 0);
    ck_assert_int_eq(ld_store_current_status(store, &st), 0);
    ck_assert(st.available);
    ck_assert(!st.needs_refresh);
}
END_TEST

START_TEST(test_status_bad_input)
{
    ld_store_status st;
    ck_assert_int_eq(ld_store_current_status(NULL, &st), LD_EINVAL);
    ck_assert_int_eq(ld_store_current_status(store, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_store_add_status_listener(NULL, listen_status, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_store_add_status_listener(store, NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_store_remove_status_listener(NULL, 1), LD_EINVAL);
    ck_assert_int_eq(ld_store_remove_status_listener(store, 1), LD_EINVAL); /* none yet */
    ck_assert_int_eq(ld_store_update_status(NULL, false, false), LD_EINVAL);
    int64_t id = ld_store_add_status_listener(store, listen_status, NULL);
    ck_assert_int_gt(id, 0);
    ck_assert_int_eq(ld_store_remove_status_listener(store, id + 1), LD_EINVAL);
    ck_assert_int_eq(ld_store_remove_status_listener(store, id), 0);
    ck_assert_int_eq(ld_store_remove_status_listener(store, id), LD_EINVAL); /* twice */
}
END_TEST

START_TEST(test_status_changes_reach_listeners_from_the_loop_once_each)
{
    struct heard a = {.store = store}, b = {.store = store};
    ck_assert_int_gt(ld_store_add_status_listener(store, listen_status, &a), 0);
    ck_assert_int_gt(ld_store_add_status_listener(store, listen_status, &b), 0);
    ck_assert_int_eq(ld_store_update_status(store, true, false), 0); /* no change */
    ck_assert_int_eq(ld_store_update_status(store, false, false), 0);
    ld_store_status st;
    ck_assert_int_eq(ld_store_current_status(store, &st), 0);
    ck_assert(!st.available);                                         /* at once */
    ck_assert_int_eq(ld_store_update_status(store, false, false), 0); /* no change */
    ck_assert_int_eq(ld_store_update_status(store, true, true), 0);
    ck_assert_int_eq(a.n, 0); /* never within the call */
    ld_test_flush();
    ck_assert_int_eq(a.n, 2);
    ck_assert_int_eq(b.n, 2);
    ck_assert(!a.st[0].available && !a.st[0].needs_refresh);
    ck_assert(a.st[1].available && a.st[1].needs_refresh);
    ck_assert(!b.st[0].available && b.st[1].available && b.st[1].needs_refresh);
    ck_assert_int_eq(ld_store_current_status(store, &st), 0);
    ck_assert(st.available && st.needs_refresh);
    /* a listener added after a change does not hear it */
    struct heard c = {.store = store};
    ck_assert_int_eq(ld_store_update_status(store, true, false), 0);
    ck_assert_int_gt(ld_store_add_status_listener(store, listen_status, &c), 0);
    ld_test_flush();
    ck_assert_int_eq(a.n, 3);
    ck_assert_int_eq(c.n, 0);
    ld_test_flush();
    ck_assert_int_eq(a.n, 3); /* once */
}
END_TEST

/* The order of the listeners' calls: each notes its number. */
static int g_status_order[8], g_status_n;

static void note_status(ld_store *st, const ld_store_status *status, void *arg)
{
    (void)st;
    (void)status;
    if (g_status_n < 8)
        g_status_order[g_status_n++] = (int)(intptr_t)arg;
}

START_TEST(test_status_listeners_are_called_in_registration_order)
{
    g_status_n = 0;
    for (intptr_t i = 1; i <= 3; i++)
        ck_assert_int_gt(ld_store_add_status_listener(store, note_status, (void *)i), 0);
    ck_assert_int_eq(ld_store_update_status(store, false, false), 0);
    ck_assert_int_eq(ld_store_update_status(store, true, false), 0);
    ld_test_flush();
    ck_assert_int_eq(g_status_n, 6);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(g_status_order[i], i % 3 + 1);
}
END_TEST

START_TEST(test_status_listeners_removed_inside_a_call_hear_no_more)
{
    /* a removes b (added after it) at its first call; c removes itself */
    struct heard a = {.store = store}, b = {.store = store}, c = {.store = store};
    ck_assert_int_gt(ld_store_add_status_listener(store, listen_status, &a), 0);
    a.remove_id = ld_store_add_status_listener(store, listen_status, &b);
    ck_assert_int_gt(a.remove_id, 0);
    c.remove_id = ld_store_add_status_listener(store, listen_status, &c);
    ck_assert_int_gt(c.remove_id, 0);
    ck_assert_int_eq(ld_store_update_status(store, false, false), 0);
    ck_assert_int_eq(ld_store_update_status(store, true, false), 0); /* queued already */
    ld_test_flush();
    ck_assert_int_eq(a.n, 2);
    ck_assert_int_eq(b.n, 0);
    ck_assert_int_eq(c.n, 1);
    /* and later changes */
    ck_assert_int_eq(ld_store_update_status(store, false, false), 0);
    ld_test_flush();
    ck_assert_int_eq(a.n, 3);
    ck_assert_int_eq(b.n, 0);
    ck_assert_int_eq(c.n, 1);
    ck_assert_int_eq(ld_store_remove_status_listener(store, a.remove_id), LD_EINVAL); /* gone */
}
END_TEST

START_TEST(test_status_listener_added_inside_a_call_hears_later_changes)
{
    struct heard a = {.store = store, .add = -1};
    g_added = (struct heard){.store = store};
    ck_assert_int_gt(ld_store_add_status_listener(store, listen_status, &a), 0);
    ck_assert_int_eq(ld_store_update_status(store, false, false), 0);
    ck_assert_int_eq(ld_store_update_status(store, true, true), 0);
    ld_test_flush();
    ck_assert_int_gt(a.add, 0);
    ck_assert_int_eq(a.n, 2);
    ck_assert_int_eq(g_added.n, 0); /* both were made before it was added */
    ck_assert_int_eq(ld_store_update_status(store, true, false), 0);
    ld_test_flush();
    ck_assert_int_eq(a.n, 3);
    ck_assert_int_eq(g_added.n, 1);
    ck_assert(g_added.st[0].available && !g_added.st[0].needs_refresh);
}
END_TEST

START_TEST(test_status_listener_may_free_the_store)
{
    struct heard a = {.store = store, .free_store = true}, b = {.store = store};
    ck_assert_int_gt(ld_store_add_status_listener(store, listen_status, &a), 0);
    ck_assert_int_gt(ld_store_add_status_listener(store, listen_status, &b), 0);
    ck_assert_int_eq(ld_store_update_status(store, false, false), 0);
    ck_assert_int_eq(ld_store_update_status(store, true, false), 0);
    ld_test_flush();
    ck_assert_ptr_null(store); /* freed by a */
    ck_assert_int_eq(a.n, 1);
    ck_assert_int_eq(b.n, 0); /* what was left is dropped */
}
END_TEST

START_TEST(test_status_free_drops_pending_listener_calls)
{
    struct heard a = {.store = store};
    ck_assert_int_gt(ld_store_add_status_listener(store, listen_status, &a), 0);
    ck_assert_int_eq(ld_store_update_status(store, false, false), 0);
    ld_store_free(store);
    store = NULL;
    ld_test_flush();
    ck_assert_int_eq(a.n, 0);
}
END_TEST

START_TEST(test_status_many_changes_before_the_loop_are_all_heard)
{
    struct heard a = {.store = store};
    ck_assert_int_gt(ld_store_add_status_listener(store, listen_status, &a), 0);
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(ld_store_update_status(store, i % 2 == 1, false), 0);
    ld_test_flush();
    ck_assert_int_eq(a.n, 7);
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(a.st[i].available, i % 2 == 1);
}
END_TEST

Suite *ld_suite_store(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("memory");
    tcase_add_checked_fixture(tc, store_setup, store_teardown);
    tcase_add_test(tc, test_describe_is_memory);
    tcase_add_test(tc, test_all_snapshot_does_not_change_under_a_reader);
    tcase_add_test(tc, test_all_is_the_same_object_while_nothing_changes);
    tcase_add_test(tc, test_items_are_shared_not_copied);
    tcase_add_test(tc, test_many_keys_grow_the_table);
    tcase_add_test(tc, test_replaced_items_are_released_from_the_loop);
    tcase_add_test(tc, test_items_waiting_for_release_are_bounded);
    tcase_add_test(tc, test_replaced_items_wait_for_get_results_that_may_read_them);
    tcase_add_loop_test(tc, test_held_get_results_keep_their_items_not_every_later_write, 0,
                        (int)(sizeof(held_gets) / sizeof(held_gets[0])));
    tcase_add_test(tc, test_write_results_are_futures_of_their_own);
    tcase_add_test(tc, test_a_result_cancelled_before_the_loop_ran_stays_cancelled);
    tcase_add_test(tc, test_write_results_outlive_the_store);
    tcase_add_test(tc, test_tombstones_from_upsert_and_delete_alternate_with_items);
    tcase_add_test(tc, test_get_results_outlive_writes_init_and_free);
    tcase_add_test(tc, test_get_results_released_on_other_threads_once_threading_is_on);
    tcase_add_test(tc, test_a_result_released_before_the_loop_lets_go_at_once_with_threading_on);
    tcase_add_test(tc, test_get_results_released_on_other_threads_while_writes_seal_them);
    tcase_add_test(tc, test_values_adopted_from_a_get_outlive_it);
    tcase_add_test(tc, test_all_stays_complete_when_a_snapshot_copy_runs_out_of_memory);
    tcase_add_test(tc, test_all_snapshots_stay_exact_under_random_writes_and_readers);
    tcase_add_test(tc, test_all_stays_exact_when_an_earlier_snapshot_falls_far_behind);
    tcase_add_test(tc, test_a_large_init_is_loaded_over_several_loop_passes);
    tcase_add_test(tc, test_operations_during_a_large_init_see_the_old_or_the_new_data);
    tcase_add_test(tc, test_a_large_init_with_a_bad_item_changes_nothing);
    tcase_add_test(tc, test_a_store_freed_during_a_large_init_cancels_what_waits);
    suite_add_tcase(s, tc);

    tc = tcase_create("front");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_out_of_order_implementation_results_are_reordered);
    tcase_add_test(tc, test_front_rejections_complete_in_issue_order);
    tcase_add_test(tc, test_an_implementation_may_validate_its_init);
    tcase_add_test(tc, test_result_completed_at_once_does_not_overtake_a_handed_over_one);
    tcase_add_test(tc, test_results_handed_over_without_memory_keep_issue_order);
    tcase_add_test(tc, test_free_cancels_pending_operations);
    tcase_add_test(tc, test_free_from_inside_own_callback_is_safe);
    tcase_add_test(tc, test_store_new_bad_input);
    suite_add_tcase(s, tc);

    tc = tcase_create("status");
    tcase_add_checked_fixture(tc, store_setup, store_teardown);
    tcase_add_test(tc, test_status_starts_available_and_stays_so);
    tcase_add_test(tc, test_status_bad_input);
    tcase_add_test(tc, test_status_changes_reach_listeners_from_the_loop_once_each);
    tcase_add_test(tc, test_status_listeners_are_called_in_registration_order);
    tcase_add_test(tc, test_status_listeners_removed_inside_a_call_hear_no_more);
    tcase_add_test(tc, test_status_listener_added_inside_a_call_hears_later_changes);
    tcase_add_test(tc, test_status_listener_may_free_the_store);
    tcase_add_test(tc, test_status_free_drops_pending_listener_calls);
    tcase_add_test(tc, test_status_many_changes_before_the_loop_are_all_heard);
    suite_add_tcase(s, tc);
    return s;
}
