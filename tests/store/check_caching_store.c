/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The caching store (store.h, ld_caching_store_new()): the store contract
 * over a memory store (no caching, a ttl, forever), and over the mock store
 * what it caches, when it asks the inner store, and its status. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <event2/thread.h>

#include <ldasync/ldasync.h>
#include <ldasync/testing.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base
#define LONG_TTL 600000 /* ms: nothing expires during a test */

static ld_store *mock, *cache;

/* A caching store over a new mock store, polling every 20 ms. */
static void make(int64_t ttl)
{
    setenv("LDASYNC_CACHE_POLL_MS", "20", 1);
    mock = ld_mock_store_new(B);
    ck_assert_ptr_nonnull(mock);
    cache = ld_caching_store_new(B, mock, ttl);
    unsetenv("LDASYNC_CACHE_POLL_MS");
    ck_assert_ptr_nonnull(cache);
}

static void setup(void)
{
    ld_test_setup();
    /* no periodic check of the inner store: the tests wait for an idle
     * loop (tests/redis checks it against a real FLUSHALL) */
    setenv("LDASYNC_CACHE_CHECK_MS", "0", 1);
}

static void teardown(void)
{
    ld_store_free(cache);
    cache = mock = NULL;
    ld_test_flush();
    ld_test_teardown();
    unsetenv("LDASYNC_CACHE_CHECK_MS");
}

static int calls(enum ld_mock_op op)
{
    return ld_mock_store_calls(mock, op);
}

static json_t *F(const char *key, int version)
{
    return ld_test_feature(key, version);
}

/* Sets `key` at `version` in the mock only, as another writer would. */
static void force(const char *key, int version)
{
    json_t *item = F(key, version);
    ck_assert_int_eq(ld_mock_store_force_set(mock, ld_kind_features(), item), 0);
    json_decref(item);
}

/* The version of the feature `key` a get through the cache answers; -1
 * when it answers NULL. */
static int64_t get_version(const char *key)
{
    ld_future *f = ld_test_fulfilled(ld_store_get(cache, ld_kind_features(), key));
    json_t *item = ld_future_json(f);
    int64_t v = item ? ld_item_version(item) : -1;
    ld_future_unref(f);
    return v;
}

/* An init through the cache of features `keys` at `version`. */
static json_t *data_of(const char *const *keys, int n, int version)
{
    json_t *features = json_object();
    for (int i = 0; i < n; i++)
        json_object_set_new(features, keys[i], F(keys[i], version));
    return json_pack("{s:o, s:{}}", "features", features, "segments");
}

static void init_through(const char *const *keys, int n, int version)
{
    json_t *data = data_of(keys, n, version);
    ld_test_await_ok(ld_store_init(cache, data));
    json_decref(data);
}

/* Lets the loop run for `ms` milliseconds. */
static void sleep_loop(int ms)
{
    struct timeval tv = {0, ms * 1000};
    event_base_loopexit(B, &tv);
    event_base_dispatch(B);
}

/* What the cache's status listener heard. */
static int g_heard;
static ld_store_status g_heard_st[16];

static void heard(ld_store *st, const ld_store_status *status, void *arg)
{
    (void)st;
    (void)arg;
    ck_assert_int_lt(g_heard, 16);
    g_heard_st[g_heard++] = *status;
}

static void listen_cache(void)
{
    g_heard = 0;
    ck_assert_int_gt(ld_store_add_status_listener(cache, heard, NULL), 0);
}

static bool available(void)
{
    ld_store_status st;
    ck_assert_int_eq(ld_store_current_status(cache, &st), 0);
    return st.available;
}

/* Runs what is ready (ld_test_flush() would wait for the poll's timer). */
static void run_ready(void)
{
    for (int i = 0; i < 100; i++)
        event_base_loop(B, EVLOOP_NONBLOCK);
}

/* Runs the loop (the poll's timer among its events) until the cache
 * reports available. */
static void until_available(void)
{
    for (int i = 0; i < 10000 && !available(); i++)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert(available());
    ld_test_flush();
}

/* ---- creation ----------------------------------------------------------- */

START_TEST(test_new_bad_input_frees_inner)
{
    /* inner is freed on every NULL (LeakSanitizer would see it) */
    ck_assert_ptr_null(ld_caching_store_new(NULL, ld_memory_store_new(B), 10));
    ck_assert_ptr_null(ld_caching_store_new(B, NULL, 10));
    struct event_base *other = event_base_new();
    ck_assert_ptr_nonnull(other);
    ck_assert_ptr_null(ld_caching_store_new(B, ld_memory_store_new(other), 10));
    ld_test_flush();
    event_base_free(other);
    make(10);
    ck_assert_str_eq(ld_store_describe(cache), "caching(mock)");
    ld_store_status st = {false, true};
    ck_assert_int_eq(ld_store_current_status(cache, &st), 0);
    ck_assert(st.available && !st.needs_refresh);
}
END_TEST

/* ---- what it caches ----------------------------------------------------- */

START_TEST(test_hits_are_served_without_inner_calls)
{
    make(LONG_TTL);
    force("x", 1);
    ck_assert_int_eq(get_version("x"), 1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 1);
    force("x", 2); /* behind the cache's back: the cache still answers 1 */
    ck_assert_int_eq(get_version("x"), 1);
    ck_assert_int_eq(get_version("x"), 1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 1);
    json_t *item = NULL;
    ck_assert_int_eq(ld_store_get_now(cache, ld_kind_features(), "x", &item), 0);
    ck_assert_int_eq(ld_item_version(item), 1);
    json_decref(item);
    /* an item not cached: get_now cannot answer, and asks nobody */
    ck_assert_int_eq(ld_store_get_now(cache, ld_kind_features(), "y", &item), LD_EBUSY);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 1);
    /* kinds are apart */
    ld_future *f = ld_test_fulfilled(ld_store_get(cache, ld_kind_segments(), "x"));
    ck_assert_ptr_null(ld_future_json(f));
    ld_future_unref(f);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 2);
}
END_TEST

START_TEST(test_misses_are_remembered)
{
    make(LONG_TTL);
    ck_assert_int_eq(get_version("nope"), -1);
    ck_assert_int_eq(get_version("nope"), -1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 1);
    json_t *item = json_true();
    ck_assert_int_eq(ld_store_get_now(cache, ld_kind_features(), "nope", &item), 0);
    ck_assert_ptr_null(item);
    /* a remembered tombstone too */
    ck_assert_int_eq(ld_mock_store_force_delete(mock, ld_kind_features(), "gone", 4), 0);
    ck_assert_int_eq(get_version("gone"), -1);
    ck_assert_int_eq(get_version("gone"), -1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 2);
    /* a tombstone blocks an older upsert through the cache */
    json_t *old = F("gone", 3);
    ck_assert(!ld_test_await_bool(ld_store_upsert(cache, ld_kind_features(), old)));
    json_decref(old);
}
END_TEST

START_TEST(test_entries_expire)
{
    make(30);
    force("x", 1);
    ck_assert_int_eq(get_version("x"), 1);
    ck_assert_int_eq(get_version("nope"), -1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 2);
    sleep_loop(60); /* twice the ttl */
    force("x", 2);
    force("nope", 1);
    ck_assert_int_eq(get_version("x"), 2);
    ck_assert_int_eq(get_version("nope"), 1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 4);
    /* so do an init's data and all */
    const char *keys[] = {"a"};
    init_through(keys, 1, 1);
    ld_future *f = ld_test_fulfilled(ld_store_all(cache, ld_kind_features()));
    ld_future_unref(f);
    ck_assert_int_eq(calls(LD_MOCK_OP_ALL), 0);
    sleep_loop(60);
    ck_assert_int_eq(get_version("a"), 1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 5);
    f = ld_test_fulfilled(ld_store_all(cache, ld_kind_features()));
    ld_future_unref(f);
    ck_assert_int_eq(calls(LD_MOCK_OP_ALL), 1);
}
END_TEST

START_TEST(test_concurrent_gets_share_one_inner_get)
{
    make(LONG_TTL);
    force("x", 1);
    ld_future *f[3];
    for (int i = 0; i < 3; i++)
        f[i] = ld_store_get(cache, ld_kind_features(), "x");
    for (int i = 0; i < 3; i++) {
        ld_test_fulfilled(f[i]);
        ck_assert_int_eq(ld_item_version(ld_future_json(f[i])), 1);
        ld_future_unref(f[i]);
    }
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 1);
    /* shared misses too; concurrent alls of a kind likewise */
    ld_future *g[2] = {ld_store_get(cache, ld_kind_features(), "m"),
                       ld_store_get(cache, ld_kind_features(), "m")};
    ld_future *a[2] = {ld_store_all(cache, ld_kind_features()),
                       ld_store_all(cache, ld_kind_features())};
    for (int i = 0; i < 2; i++) {
        ck_assert_ptr_null(ld_future_json(ld_test_fulfilled(g[i])));
        ck_assert_int_eq(json_object_size(ld_future_json(ld_test_fulfilled(a[i]))), 1);
        ld_future_unref(g[i]);
        ld_future_unref(a[i]);
    }
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 2);
    ck_assert_int_eq(calls(LD_MOCK_OP_ALL), 1);
}
END_TEST

START_TEST(test_a_get_after_a_write_does_not_share_an_earlier_get)
{
    make(LONG_TTL);
    force("y", 1);
    json_t *item = F("y", 2);
    ld_future *before = ld_store_get(cache, ld_kind_features(), "y");
    ld_future *w = ld_store_upsert(cache, ld_kind_features(), item);
    ld_future *after = ld_store_get(cache, ld_kind_features(), "y");
    ck_assert_int_eq(ld_item_version(ld_future_json(ld_test_fulfilled(before))), 1);
    ck_assert(ld_test_await_bool(w));
    ck_assert_int_eq(ld_item_version(ld_future_json(ld_test_fulfilled(after))), 2);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 2);
    ld_future_unref(before);
    ld_future_unref(after);
    json_decref(item);
    /* and the write is cached */
    ck_assert_int_eq(get_version("y"), 2);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 2);
}
END_TEST

START_TEST(test_a_write_under_way_holds_back_reads_of_its_key_only)
{
    make(LONG_TTL);
    force("x", 1);
    force("y", 1);
    ck_assert_int_eq(get_version("x"), 1);
    ck_assert_int_eq(get_version("y"), 1);
    ld_future *a = ld_test_fulfilled(ld_store_all(cache, ld_kind_segments()));
    ld_future_unref(a);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 2);
    json_t *item = F("x", 2);
    ld_future *w = ld_store_upsert(cache, ld_kind_features(), item);
    json_decref(item);
    ld_future *gy = ld_store_get(cache, ld_kind_features(), "y");
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 2); /* y: from the cache */
    a = ld_store_all(cache, ld_kind_segments());
    ck_assert_int_eq(calls(LD_MOCK_OP_ALL), 1); /* another kind: from the cache */
    ld_future *gx = ld_store_get(cache, ld_kind_features(), "x");
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 3); /* x: after the write, from the store */
    ld_future *af = ld_store_all(cache, ld_kind_features());
    ck_assert_int_eq(calls(LD_MOCK_OP_ALL), 2); /* its kind: likewise */
    ck_assert(ld_test_await_bool(w));
    ck_assert_int_eq(ld_item_version(ld_future_json(ld_test_fulfilled(gy))), 1);
    ck_assert_int_eq(ld_item_version(ld_future_json(ld_test_fulfilled(gx))), 2);
    ld_test_fulfilled(a);
    ck_assert_int_eq(ld_item_version(json_object_get(ld_future_json(ld_test_fulfilled(af)), "x")),
                     2);
    ld_future_unref(gy);
    ld_future_unref(gx);
    ld_future_unref(a);
    ld_future_unref(af);
    /* an init under way holds back every read */
    json_t *data = data_of((const char *[]){"z"}, 1, 1);
    ld_future *i = ld_store_init(cache, data);
    json_decref(data);
    ld_future *gz = ld_store_get(cache, ld_kind_features(), "y");
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 4);
    ld_test_await_ok(i);
    ck_assert_ptr_null(ld_future_json(ld_test_fulfilled(gz)));
    ld_future_unref(gz);
}
END_TEST

START_TEST(test_writes_update_the_entries)
{
    make(LONG_TTL);
    force("x", 1);
    ck_assert_int_eq(get_version("x"), 1);
    json_t *item = F("x", 2);
    ck_assert(ld_test_await_bool(ld_store_upsert(cache, ld_kind_features(), item)));
    json_decref(item);
    ck_assert_int_eq(get_version("x"), 2);
    ck_assert(ld_test_await_bool(ld_store_delete(cache, ld_kind_features(), "x", 3)));
    ck_assert_int_eq(get_version("x"), -1);
    /* a new key written through the cache is cached */
    item = F("n", 1);
    ck_assert(ld_test_await_bool(ld_store_upsert(cache, ld_kind_features(), item)));
    json_decref(item);
    ck_assert_int_eq(get_version("n"), 1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 1);
    /* not applied: the entry goes, and the next get reads the store */
    force("y", 5);
    ck_assert_int_eq(get_version("y"), 5);
    force("y", 7); /* another writer */
    item = F("y", 6);
    ck_assert(!ld_test_await_bool(ld_store_upsert(cache, ld_kind_features(), item)));
    json_decref(item);
    ck_assert_int_eq(get_version("y"), 7);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 3);
}
END_TEST

START_TEST(test_all_entries_and_their_invalidation)
{
    make(LONG_TTL);
    force("a", 1);
    force("b", 1);
    ld_future *f = ld_test_fulfilled(ld_store_all(cache, ld_kind_features()));
    json_t *first = ld_future_json(f);
    ck_assert_int_eq(json_object_size(first), 2);
    ld_future *g = ld_test_fulfilled(ld_store_all(cache, ld_kind_features()));
    ck_assert_ptr_eq(ld_future_json(g), first); /* the cached answer */
    ld_future_unref(g);
    ck_assert_int_eq(calls(LD_MOCK_OP_ALL), 1);
    json_t *all = NULL;
    /* an upsert drops it */
    json_t *item = F("c", 1);
    ck_assert(ld_test_await_bool(ld_store_upsert(cache, ld_kind_features(), item)));
    json_decref(item);
    ck_assert_int_eq(json_object_size(first), 2); /* what was handed out does not change */
    ld_future_unref(f);
    f = ld_test_fulfilled(ld_store_all(cache, ld_kind_features()));
    ck_assert_int_eq(json_object_size(ld_future_json(f)), 3);
    ld_future_unref(f);
    ck_assert_int_eq(calls(LD_MOCK_OP_ALL), 2);
    /* a delete drops it */
    ck_assert(ld_test_await_bool(ld_store_delete(cache, ld_kind_features(), "a", 2)));
    f = ld_test_fulfilled(ld_store_all(cache, ld_kind_features()));
    ck_assert_int_eq(json_object_size(ld_future_json(f)), 2);
    ck_assert_ptr_null(json_object_get(ld_future_json(f), "a"));
    ld_future_unref(f);
    ck_assert_int_eq(calls(LD_MOCK_OP_ALL), 3);
    /* an init replaces it: served from the init's data, without a call */
    const char *keys[] = {"p", "q", "r", "s"};
    init_through(keys, 4, 1);
    f = ld_test_fulfilled(ld_store_all(cache, ld_kind_features()));
    ck_assert_int_eq(json_object_size(ld_future_json(f)), 4);
    ld_future_unref(f);
    f = ld_test_fulfilled(ld_store_all(cache, ld_kind_segments()));
    ck_assert_int_eq(json_object_size(ld_future_json(f)), 0);
    ld_future_unref(f);
    ck_assert_int_eq(calls(LD_MOCK_OP_ALL), 3);
    /* and answered within the call */
    ck_assert_int_eq(ld_store_get_now(cache, ld_kind_features(), "q", &all), 0);
    ck_assert_int_eq(ld_item_version(all), 1);
    json_decref(all);
    /* after a write through the cache, from its data again */
    ck_assert(ld_test_await_bool(ld_store_delete(cache, ld_kind_features(), "p", 2)));
    f = ld_test_fulfilled(ld_store_all(cache, ld_kind_features()));
    ck_assert_int_eq(json_object_size(ld_future_json(f)), 3);
    ld_future_unref(f);
    ck_assert_int_eq(calls(LD_MOCK_OP_ALL), 3);
}
END_TEST

START_TEST(test_init_replaces_what_the_cache_holds)
{
    make(LONG_TTL);
    force("old", 1);
    ck_assert_int_eq(get_version("old"), 1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 1);
    const char *keys[] = {"a", "b"};
    init_through(keys, 2, 3);
    ck_assert_int_eq(get_version("a"), 3);
    ck_assert_int_eq(get_version("b"), 3);
    ck_assert_int_eq(get_version("old"), -1); /* not in the data: gone */
    ck_assert_int_eq(get_version("never"), -1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 1);
    /* initialized is remembered */
    ck_assert(ld_test_await_bool(ld_store_initialized(cache)));
    ck_assert_int_eq(ld_store_initialized_now(cache), 1);
    ck_assert_int_eq(calls(LD_MOCK_OP_INITIALIZED), 0);
}
END_TEST

START_TEST(test_initialized_is_remembered_once_true)
{
    make(LONG_TTL);
    ck_assert(!ld_test_await_bool(ld_store_initialized(cache)));
    ck_assert(!ld_test_await_bool(ld_store_initialized(cache)));
    ck_assert_int_eq(ld_store_initialized_now(cache), LD_EBUSY); /* asks the store */
    ck_assert_int_eq(calls(LD_MOCK_OP_INITIALIZED), 2);
    /* an init the cache did not see (another process's) */
    json_t *empty = json_object();
    ld_test_await_ok(ld_store_init(mock, empty));
    json_decref(empty);
    ck_assert(ld_test_await_bool(ld_store_initialized(cache)));
    ck_assert_int_eq(calls(LD_MOCK_OP_INITIALIZED), 3);
    ck_assert(ld_test_await_bool(ld_store_initialized(cache)));
    ck_assert_int_eq(ld_store_initialized_now(cache), 1);
    ck_assert_int_eq(calls(LD_MOCK_OP_INITIALIZED), 3);
}
END_TEST

START_TEST(test_ttl_zero_asks_the_inner_store_every_time)
{
    make(0);
    force("x", 1);
    const char *keys[] = {"a"};
    init_through(keys, 1, 1);
    ck_assert_int_eq(get_version("a"), 1);
    ck_assert_int_eq(get_version("a"), 1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 2);
    ld_future *f[2] = {ld_store_get(cache, ld_kind_features(), "a"),
                       ld_store_get(cache, ld_kind_features(), "a")};
    for (int i = 0; i < 2; i++)
        ld_future_unref(ld_test_fulfilled(f[i]));
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 4);
    for (int i = 0; i < 2; i++)
        ld_future_unref(ld_test_fulfilled(ld_store_all(cache, ld_kind_features())));
    ck_assert_int_eq(calls(LD_MOCK_OP_ALL), 2);
    json_t *item = NULL;
    ck_assert_int_eq(ld_store_get_now(cache, ld_kind_features(), "a", &item), LD_EBUSY);
    ck_assert(ld_test_await_bool(ld_store_initialized(cache)));
    ck_assert(ld_test_await_bool(ld_store_initialized(cache)));
    ck_assert_int_eq(calls(LD_MOCK_OP_INITIALIZED), 2);
}
END_TEST

START_TEST(test_the_per_item_cache_is_bounded)
{
    setenv("LDASYNC_CACHE_CAPACITY", "4", 1);
    make(LONG_TTL);
    unsetenv("LDASYNC_CACHE_CAPACITY");
    char key[16];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ck_assert_int_eq(get_version(key), -1);
    }
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 10);
    ck_assert_int_eq(get_version("k9"), -1); /* among the 4 kept */
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 10);
    ck_assert_int_eq(get_version("k0"), -1); /* the least recently used: gone */
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 11);
    /* k6 was the least recently used of the four (k6..k9) before k0 came */
    ck_assert_int_eq(get_version("k6"), -1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 12);
    /* writes under way keep their entries beyond the bound, until they
     * came back */
    ld_future *w[6];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "w%d", i);
        json_t *item = F(key, 1);
        w[i] = ld_store_upsert(cache, ld_kind_features(), item);
        json_decref(item);
    }
    for (int i = 0; i < 6; i++)
        ck_assert(ld_test_await_bool(w[i]));
    ck_assert_int_eq(get_version("w5"), 1); /* cached by its write */
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 12);
    ck_assert_int_eq(get_version("w0"), 1); /* evicted */
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 13);
}
END_TEST

/* ---- what get lends ------------------------------------------------------ */

/* A get answered from the cache holds a lease on what the cache holds, not
 * a reference of its own: what the cache lets go of (replaced by a write,
 * evicted, flushed by an init, or the cache freed) stays alive for the
 * results still reading it (ASan), and every reference is given back once
 * they are released (the refcount at the end). */
START_TEST(test_lent_answers_outlive_what_the_cache_lets_go_of)
{
    setenv("LDASYNC_CACHE_CAPACITY", "4", 1);
    make(LONG_TTL);
    unsetenv("LDASYNC_CACHE_CAPACITY");
    const ld_kind *k = ld_kind_features();
    json_t *a1 = F("a", 1);
    ck_assert(ld_test_await_bool(ld_store_upsert(cache, k, a1)));
    ld_future *held[4];
    for (int i = 0; i < 4; i++)
        held[i] = ld_store_get(cache, k, "a");
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 0); /* answered by the cache */
    ld_test_flush();
    /* replaced by a write */
    json_t *a2 = F("a", 2);
    ck_assert(ld_test_await_bool(ld_store_upsert(cache, k, a2)));
    json_decref(a2);
    ld_test_flush();
    ck_assert_int_eq(get_version("a"), 2);
    ck_assert_int_eq(ld_item_version(ld_future_json(held[0])), 1);
    ld_future_unref(held[0]);
    /* evicted (the capacity is 4) */
    ld_future *v2 = ld_store_get(cache, k, "a");
    char key[16];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ck_assert_int_eq(get_version(key), -1);
    }
    ld_test_flush();
    ck_assert_int_eq(ld_item_version(ld_future_json(held[1])), 1);
    ck_assert_int_eq(ld_item_version(ld_future_json(v2)), 2);
    ld_future_unref(held[1]);
    /* flushed by an init */
    const char *keys[] = {"a", "b"};
    init_through(keys, 2, 3);
    ld_test_flush();
    ck_assert_int_eq(get_version("a"), 3);
    ck_assert_int_eq(ld_item_version(ld_future_json(held[2])), 1);
    ck_assert_int_eq(ld_item_version(ld_future_json(v2)), 2);
    /* the cache freed */
    ld_future *v3 = ld_store_get(cache, k, "b");
    ld_store_free(cache);
    cache = NULL;
    ld_test_flush();
    ck_assert_int_eq(ld_item_version(ld_future_json(held[3])), 1);
    ck_assert_int_eq(ld_item_version(ld_future_json(v2)), 2);
    ck_assert_int_eq(ld_item_version(ld_future_json(v3)), 3);
    ld_future_unref(held[2]);
    ld_future_unref(v3);
    ld_future_unref(v2);
    ld_future_unref(held[3]);
    ld_test_flush();
    ck_assert_int_eq(a1->refcount, 1); /* every lease counted back */
    json_decref(a1);
}
END_TEST

/* An item the whole kind holds (after an init) is lent too: a write
 * replaces it in the kind's object and in its entry, and a result read
 * before still reads the item it was given. */
START_TEST(test_lent_answers_of_a_whole_kind_outlive_its_writes)
{
    /* over a memory store (the mock keeps every init's data) */
    cache = ld_caching_store_new(B, ld_memory_store_new(B), LONG_TTL);
    ck_assert_ptr_nonnull(cache);
    const ld_kind *k = ld_kind_features();
    const char *keys[] = {"a", "b", "c"};
    init_through(keys, 3, 1);
    ld_future *held[3];
    for (int i = 0; i < 3; i++)
        held[i] = ld_store_get(cache, k, keys[i]); /* answered by the cache */
    ld_test_flush();
    for (int v = 2; v < 6; v++)
        for (int i = 0; i < 3; i++) {
            json_t *item = F(keys[i], v);
            ck_assert(ld_test_await_bool(ld_store_upsert(cache, k, item)));
            json_decref(item);
        }
    ld_test_flush();
    ld_future *all = ld_test_fulfilled(ld_store_all(cache, k));
    ck_assert_int_eq(ld_item_version(json_object_get(ld_future_json(all), "b")), 5);
    ld_future_unref(all);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(get_version(keys[i]), 5);
        ck_assert_int_eq(ld_item_version(ld_future_json(held[i])), 1);
        ck_assert_str_eq(json_string_value(json_object_get(ld_future_json(held[i]), "key")),
                         keys[i]);
        ld_future_unref(held[i]);
    }
}
END_TEST

enum { THREAD_GETS = 5000 };

static void *read_and_release(void *arg)
{
    ld_future **gets = arg;
    long bad = 0;
    for (int i = 0; i < THREAD_GETS; i++) {
        bad += ld_item_version(ld_future_json(gets[i])) != 1;
        ld_future_unref(gets[i]);
    }
    return (void *)bad;
}

/* Results released on another thread (libevent threading on) while the
 * loop thread writes over their items and takes more leases: each reads
 * its item to the end (ASan, TSan), and every reference comes back (the
 * leak check). */
START_TEST(test_lent_answers_released_on_other_threads_while_written_over)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    make(LONG_TTL);
    const ld_kind *k = ld_kind_features();
    char key[16];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "k%d", i);
        json_t *item = F(key, 1);
        ck_assert(ld_test_await_bool(ld_store_upsert(cache, k, item)));
        json_decref(item);
    }
    ld_future **gets = malloc(THREAD_GETS * sizeof(*gets));
    ck_assert_ptr_nonnull(gets);
    for (int i = 0; i < THREAD_GETS; i++) {
        snprintf(key, sizeof key, "k%d", i % 50);
        gets[i] = ld_store_get(cache, k, key);
    }
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 0);
    ld_test_flush();
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, read_and_release, gets), 0);
    for (int v = 2; v < 30; v++) {
        for (int i = 0; i < 50; i++) {
            snprintf(key, sizeof key, "k%d", i);
            json_t *item = F(key, v);
            ld_future_unref(ld_store_upsert(cache, k, item));
            json_decref(item);
            snprintf(key, sizeof key, "k%d", i * 7 % 50);
            ld_future_unref(ld_store_get(cache, k, key));
        }
        event_base_loop(B, EVLOOP_NONBLOCK);
    }
    void *bad;
    pthread_join(t, &bad);
    free(gets);
    ck_assert_ptr_null(bad);
    ld_test_flush();
    ck_assert_int_eq(get_version("k7"), 29);
}
END_TEST

/* The items of a data set of `n` features "p0".."p<n-1>" at `version`. */
static json_t *numbered_data(const char *prefix, int n, int version)
{
    json_t *features = json_object();
    char key[64];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s%d", prefix, i);
        json_object_set_new(features, key, F(key, version));
    }
    return json_pack("{s:o, s:{}}", "features", features, "segments");
}

/* How many items of `data`'s features someone besides `data` holds. */
static int held_elsewhere(const json_t *data)
{
    int n = 0;
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(data, "features"), key, v) n += v->refcount > 1;
    return n;
}

/* A lent answer held while inits replace the whole data set again and
 * again keeps a few hundred items at most, as the memory store's (store.h),
 * not every data set the cache let go of meanwhile: a kind's object of
 * thousands of items weighs as much as its items. */
START_TEST(test_a_held_answer_does_not_keep_the_data_sets_inits_replace)
{
    cache = ld_caching_store_new(B, ld_memory_store_new(B), LONG_TTL);
    ck_assert_ptr_nonnull(cache);
    const ld_kind *k = ld_kind_features();
    json_t *first = numbered_data("p", 2000, 1);
    ld_test_await_ok(ld_store_init(cache, first));
    ld_future *held = ld_store_get(cache, k, "p7"); /* lent by the cache */
    ld_test_flush();
    for (int v = 2; v < 6; v++) {
        json_t *data = numbered_data("p", 2000, v);
        ld_test_await_ok(ld_store_init(cache, data));
        json_decref(data);
        ld_test_flush();
    }
    ck_assert_int_eq(get_version("p7"), 5);
    ck_assert_int_eq(ld_item_version(ld_future_json(held)), 1);
    int kept = held_elsewhere(first);
    ck_assert_msg(kept <= 300, "%d items of the first data set still held", kept);
    ld_future_unref(held);
    ld_store_free(cache);
    cache = NULL;
    ld_test_flush();
    ck_assert_int_eq(held_elsewhere(first), 0);
    json_decref(first);
}
END_TEST

/* The same for the answers of all: each a kind's object of thousands of
 * items, dropped by every write of the kind while a lent answer is held. */
START_TEST(test_a_held_answer_does_not_keep_the_alls_writes_replace)
{
    cache = ld_caching_store_new(B, ld_memory_store_new(B), LONG_TTL);
    ck_assert_ptr_nonnull(cache);
    const ld_kind *k = ld_kind_features();
    json_t *first = numbered_data("p", 2000, 1);
    ld_test_await_ok(ld_store_init(cache, first));
    ld_future *held = ld_store_get(cache, k, "p7"); /* lent by the cache */
    ld_test_flush();
    json_t *snap[8];
    for (int v = 0; v < 8; v++) {
        /* an all (made from the kind's object: it references every item),
         * then a write of another key, which drops it */
        ld_future *a = ld_test_fulfilled(ld_store_all(cache, k));
        snap[v] = json_incref(ld_future_json(a));
        ld_future_unref(a);
        char key[16];
        snprintf(key, sizeof key, "w%d", v);
        json_t *item = F(key, 1);
        ck_assert(ld_test_await_bool(ld_store_upsert(cache, k, item)));
        json_decref(item);
        ld_test_flush();
    }
    /* the test's own references to the answers are all they have left */
    int kept = 0;
    for (int v = 0; v < 8; v++) {
        kept += snap[v]->refcount > 1;
        json_decref(snap[v]);
    }
    ck_assert_msg(kept <= 1, "%d answers of all still held by the cache", kept);
    ck_assert_int_eq(ld_item_version(ld_future_json(held)), 1);
    ld_future_unref(held);
    json_decref(first);
}
END_TEST

/* Keys of every length across the entry's cache lines (1 to 200 bytes),
 * keys of UTF-8 (2, 3 and 4 byte sequences), and a key of 1 MB: each is
 * cached by its write and answered by the cache (no inner get) with its
 * own item; results lent before a write read the item they were given;
 * every reference comes back. */
START_TEST(test_keys_of_any_length_and_utf8_are_cached_and_lent)
{
    make(LONG_TTL);
    const ld_kind *k = ld_kind_features();
    enum { NSHORT = 200, NKEYS = NSHORT + 5 };
    char *keys[NKEYS];
    for (int i = 0; i < NSHORT; i++) {
        keys[i] = malloc((size_t)i + 2);
        ck_assert_ptr_nonnull(keys[i]);
        for (int j = 0; j <= i; j++)
            keys[i][j] = (char)('a' + (i + j) % 26);
        keys[i][i + 1] = '\0';
    }
    keys[NSHORT] = strdup("\xc3\xa9");                                 /* é */
    keys[NSHORT + 1] = strdup("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"); /* 日本語 */
    keys[NSHORT + 2] = strdup("\xf0\x9f\x9a\x80x");                    /* 🚀x */
    keys[NSHORT + 3] = strdup("a\xc3\xa9"); /* shares its first byte with "a" */
    keys[NSHORT + 4] = malloc(1 << 20);
    ck_assert_ptr_nonnull(keys[NSHORT + 4]);
    memset(keys[NSHORT + 4], 'm', (1 << 20) - 1);
    keys[NSHORT + 4][(1 << 20) - 1] = '\0';
    json_t *v1[NKEYS];
    for (int i = 0; i < NKEYS; i++) {
        v1[i] = F(keys[i], 1);
        ck_assert(ld_test_await_bool(ld_store_upsert(cache, k, v1[i])));
    }
    ld_future *held[NKEYS];
    for (int i = 0; i < NKEYS; i++) {
        json_t *item = NULL;
        ck_assert_int_eq(ld_store_get_now(cache, k, keys[i], &item), 0);
        ck_assert_ptr_eq(item, v1[i]);
        json_decref(item);
        held[i] = ld_store_get(cache, k, keys[i]);
    }
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 0);
    ld_test_flush();
    for (int i = 0; i < NKEYS; i++) {
        json_t *item = F(keys[i], 2);
        ck_assert(ld_test_await_bool(ld_store_upsert(cache, k, item)));
        json_decref(item);
    }
    ld_test_flush();
    for (int i = 0; i < NKEYS; i++) {
        json_t *got = ld_future_json(held[i]);
        ck_assert_ptr_eq(got, v1[i]);
        ck_assert_int_eq(ld_item_version(got), 1);
        ck_assert_str_eq(json_string_value(json_object_get(got, "key")), keys[i]);
        ld_future_unref(held[i]);
        json_t *item = NULL;
        ck_assert_int_eq(ld_store_get_now(cache, k, keys[i], &item), 0);
        ck_assert_int_eq(ld_item_version(item), 2);
        ck_assert_str_eq(json_string_value(json_object_get(item, "key")), keys[i]);
        json_decref(item);
    }
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 0);
    /* a key a character short of a cached one, and one longer: misses */
    ck_assert_int_eq(get_version("\xe6\x97\xa5\xe6\x9c\xac"), -1);
    ck_assert_int_eq(get_version("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e!"), -1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 2);
    ld_store_free(cache);
    cache = NULL;
    ld_test_flush();
    for (int i = 0; i < NKEYS; i++) {
        ck_assert_int_eq(v1[i]->refcount, 1); /* every lease counted back */
        json_decref(v1[i]);
        free(keys[i]);
    }
}
END_TEST

/* 100,000 distinct keys through a cache of 1,000 entries, one result in
 * 100 held: each answer is the item of its key (misses read the inner
 * store), what eviction let go of stays alive for the results held, and
 * every reference comes back. */
START_TEST(test_many_keys_through_a_small_cache_with_results_held)
{
    setenv("LDASYNC_CACHE_CAPACITY", "1000", 1);
    make(LONG_TTL);
    unsetenv("LDASYNC_CACHE_CAPACITY");
    const ld_kind *k = ld_kind_features();
    enum { NKEYS = 100000 };
    char key[32];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        json_t *item = F(key, i % 7 + 1);
        ck_assert_int_eq(ld_mock_store_force_set(mock, k, item), 0);
        json_decref(item);
    }
    ld_future **held = calloc(NKEYS / 100, sizeof(*held));
    ck_assert_ptr_nonnull(held);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < NKEYS; i++) {
            snprintf(key, sizeof key, "key-%d", i);
            ld_future *f = ld_store_get(cache, k, key);
            if (round == 0 && i % 100 == 0)
                held[i / 100] = ld_future_ref(f);
            if (i % 1000 == 999)
                ld_test_flush();
            ld_future_unref(f);
        }
        ld_test_flush();
        /* the same keys again, within the capacity: answered by the cache */
        int before = calls(LD_MOCK_OP_GET);
        for (int i = NKEYS - 500; i < NKEYS; i++) {
            snprintf(key, sizeof key, "key-%d", i);
            json_t *item = NULL;
            ck_assert_int_eq(ld_store_get_now(cache, k, key, &item), 0);
            ck_assert_str_eq(json_string_value(json_object_get(item, "key")), key);
            json_decref(item);
        }
        ck_assert_int_eq(calls(LD_MOCK_OP_GET), before);
    }
    ld_store_free(cache);
    cache = NULL;
    ld_test_flush();
    for (int i = 0; i < NKEYS / 100; i++) {
        snprintf(key, sizeof key, "key-%d", i * 100);
        json_t *got = ld_future_json(held[i]);
        ck_assert_ptr_nonnull(got);
        ck_assert_str_eq(json_string_value(json_object_get(got, "key")), key);
        ck_assert_int_eq(ld_item_version(got), i * 100 % 7 + 1);
        ld_future_unref(held[i]);
    }
    free(held);
}
END_TEST

/* Batches of completed gets handed to a releasing thread. */
enum { BATCH = 500, NBATCH = 40, HKEYS = 64 };

struct batch {
    ld_future *f[BATCH];
    int key[BATCH]; /* the key index each get asked for */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct batch *q[NBATCH];
    int put, taken;
} hand = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0};

static void *release_batches(void *arg)
{
    long bad = 0;
    char key[16];
    (void)arg;
    for (int b = 0; b < NBATCH; b++) {
        pthread_mutex_lock(&hand.mu);
        while (hand.put == b)
            pthread_cond_wait(&hand.cv, &hand.mu);
        struct batch *x = hand.q[b];
        pthread_mutex_unlock(&hand.mu);
        for (int i = 0; i < BATCH; i++) {
            json_t *item = ld_future_json(x->f[i]);
            snprintf(key, sizeof key, "h%d", x->key[i]);
            /* misses are possible (a key deleted), a wrong item is not */
            if (ld_future_is_fulfilled(x->f[i]) && item)
                bad += strcmp(json_string_value(json_object_get(item, "key")), key) != 0 ||
                       ld_item_version(item) < 1;
            else if (!ld_future_is_fulfilled(x->f[i]))
                bad++;
            ld_future_unref(x->f[i]);
        }
        free(x);
    }
    return (void *)bad;
}

static void hand_over(struct batch *x)
{
    pthread_mutex_lock(&hand.mu);
    hand.q[hand.put++] = x;
    pthread_cond_signal(&hand.cv);
    pthread_mutex_unlock(&hand.mu);
}

/* Lent results released on another thread while the loop thread replaces
 * their items, evicts them (a capacity of 16 for 64 keys), deletes them,
 * flushes them with inits, and at last frees the cache with results still
 * held over there: each reads its own item to the end (ASan, TSan), and
 * every reference comes back (the leak check). */
START_TEST(test_lent_answers_released_on_another_thread_while_evicted_inited_and_freed)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    setenv("LDASYNC_CACHE_CAPACITY", "16", 1);
    /* over a memory store: the mock lets go of its items inside jansson,
     * whose reference counts ThreadSanitizer does not see */
    cache = ld_caching_store_new(B, ld_memory_store_new(B), LONG_TTL);
    unsetenv("LDASYNC_CACHE_CAPACITY");
    ck_assert_ptr_nonnull(cache);
    hand.put = hand.taken = 0;
    const ld_kind *k = ld_kind_features();
    char key[16];
    int version = 1;
    for (int i = 0; i < HKEYS; i++) {
        snprintf(key, sizeof key, "h%d", i);
        json_t *item = F(key, version);
        ck_assert(ld_test_await_bool(ld_store_upsert(cache, k, item)));
        json_decref(item);
    }
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, release_batches, NULL), 0);
    for (int b = 0; b < NBATCH; b++) {
        struct batch *x = malloc(sizeof *x);
        ck_assert_ptr_nonnull(x);
        for (int i = 0; i < BATCH; i++) {
            x->key[i] = (i * 7 + b) % HKEYS;
            snprintf(key, sizeof key, "h%d", x->key[i]);
            x->f[i] = ld_store_get(cache, k, key);
            if (i % 50 == 0) {
                /* a write over a key the batch reads, and one delete */
                version++;
                json_t *item = F(key, version);
                ld_future_unref(ld_store_upsert(cache, k, item));
                json_decref(item);
                snprintf(key, sizeof key, "h%d", (i + b) % HKEYS);
                ld_future_unref(ld_store_delete(cache, k, key, ++version));
                event_base_loop(B, EVLOOP_NONBLOCK);
            }
        }
        if (b % 8 == 7) { /* an init of every key, as a data source's */
            json_t *features = json_object();
            version++;
            for (int i = 0; i < HKEYS; i++) {
                snprintf(key, sizeof key, "h%d", i);
                json_object_set_new(features, key, F(key, version));
            }
            json_t *data = json_pack("{s:o, s:{}}", "features", features, "segments");
            ld_future_unref(ld_store_init(cache, data));
            json_decref(data);
        }
        /* complete the batch (its results from the loop), then hand it */
        ld_test_fulfilled(ld_future_ref(x->f[BATCH - 1]));
        ld_future_unref(x->f[BATCH - 1]);
        hand_over(x);
        if (b == NBATCH - 2) { /* the cache freed while the thread reads */
            ld_store_free(cache);
            cache = NULL;
            cache = ld_caching_store_new(B, ld_memory_store_new(B), LONG_TTL);
            ck_assert_ptr_nonnull(cache);
            for (int i = 0; i < HKEYS; i++) {
                snprintf(key, sizeof key, "h%d", i);
                json_t *item = F(key, 1);
                ld_future_unref(ld_store_upsert(cache, k, item));
                json_decref(item);
            }
        }
    }
    void *bad;
    pthread_join(t, &bad);
    ck_assert_ptr_null(bad);
    ld_test_flush();
}
END_TEST

/* The releasing thread of the next test: reads the lent item, releases
 * its result (the last count of its sealed generation, which lets go of
 * the item's reference there), then says so without synchronizing: a
 * relaxed flag, so that only the library's own atomics can order what it
 * did before what the loop thread does next. It exits only once told
 * (relaxed too): its exit hands its pool of futures over under a mutex,
 * which would order everything. */
static struct {
    ld_future *f;
    _Atomic int released, done;
} sealed_hand;

static void *release_sealed(void *arg)
{
    (void)arg;
    json_t *item = ld_future_json(sealed_hand.f);
    long bad = !item || ld_item_version(item) != 1 ||
               strcmp(json_string_value(json_object_get(item, "key")), "a") != 0;
    ld_future_unref(sealed_hand.f);
    atomic_store_explicit(&sealed_hand.released, 1, memory_order_relaxed);
    while (!atomic_load_explicit(&sealed_hand.done, memory_order_relaxed))
        sched_yield();
    return (void *)bad;
}

/* An item lent from the cache's object of a whole kind, on a generation
 * sealed (by an all's object let go of: KEPT_MAX) and then left to its
 * last lease: that lease is released on another thread, which so lets go
 * of the generation's references to the item, and then the cache lets go
 * of the kind's object, the item's last holder, on the loop thread. The
 * item must be freed after what the other thread did with it: jansson's
 * json_delete() of the object drops its members with a decrement that
 * releases but does not acquire (and that ThreadSanitizer cannot see), so
 * the cache drops an object's members itself, with an acquiring one.
 * Without that, ThreadSanitizer reports the loop thread's free of the item
 * racing with the other thread's reads and release, every run (the test
 * fails under ThreadSanitizer only; elsewhere it checks that the other
 * thread read its own item intact, and the leak check that every
 * reference came back). */
START_TEST(test_sealed_lease_released_on_another_thread_then_the_kinds_object_freed)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    setenv("LDASYNC_CACHE_CAPACITY", "1", 1);
    ld_store *inner = ld_memory_store_new(B);
    cache = ld_caching_store_new(B, inner, LONG_TTL);
    unsetenv("LDASYNC_CACHE_CAPACITY");
    ck_assert_ptr_nonnull(cache);
    const ld_kind *k = ld_kind_features();
    char key[16];
    /* a kind of 301 items: an all's object of it weighs more than
     * KEPT_MAX */
    json_t *features = json_object();
    json_object_set_new(features, "a", F("a", 1));
    for (int i = 0; i < 300; i++) {
        snprintf(key, sizeof key, "p%d", i);
        json_object_set_new(features, key, F(key, 1));
    }
    json_t *data = json_pack("{s:o, s:{}}", "features", features, "segments");
    ld_test_await_ok(ld_store_init(cache, data));
    json_decref(data);
    ld_test_flush();
    /* "a" lent from the kind's object on the current generation G */
    sealed_hand.f = ld_test_fulfilled(ld_store_get(cache, k, "a"));
    atomic_store(&sealed_hand.released, 0);
    atomic_store(&sealed_hand.done, 0);
    /* an all's object let go of while G pins: G seals (references "a");
     * the write's entry evicts the one of "a" (a capacity of 1) */
    ld_future_unref(ld_test_fulfilled(ld_store_all(cache, k)));
    json_t *item = F("p0", 2);
    ck_assert(ld_test_await_bool(ld_store_upsert(cache, k, item)));
    json_decref(item);
    /* "a" lent on G again (which pins again) */
    ld_future *again = ld_test_fulfilled(ld_store_get(cache, k, "a"));
    ck_assert_ptr_eq(ld_future_json(again), ld_future_json(sealed_hand.f));
    ld_test_flush();
    /* the inner store lets go of its "a" */
    item = F("a", 2);
    ck_assert(ld_test_await_bool(ld_store_upsert(inner, k, item)));
    json_decref(item);
    ld_test_flush();
    /* G keeps garbage (the entry of "a", evicted), so the next lease
     * begins a new generation and G waits among the older ones; then
     * another all's object seals every generation and the store leaves G
     * to its leases */
    item = F("p2", 2);
    ck_assert(ld_test_await_bool(ld_store_upsert(cache, k, item)));
    json_decref(item);
    ld_future *other = ld_test_fulfilled(ld_store_get(cache, k, "p3"));
    ld_future_unref(ld_test_fulfilled(ld_store_all(cache, k)));
    item = F("p0", 3);
    ck_assert(ld_test_await_bool(ld_store_upsert(cache, k, item)));
    json_decref(item);
    ld_future_unref(again);
    ld_future_unref(other);
    ld_test_flush();
    /* now the kind's object and G's references hold "a"; G's last lease
     * released over there, unsynchronized */
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, release_sealed, NULL), 0);
    while (!atomic_load_explicit(&sealed_hand.released, memory_order_relaxed))
        sched_yield();
    /* the kind's object, the last holder of "a", let go of on the loop */
    json_t *empty = json_pack("{s:{}, s:{}}", "features", "segments");
    ld_test_await_ok(ld_store_init(cache, empty));
    json_decref(empty);
    ld_test_flush();
    atomic_store_explicit(&sealed_hand.done, 1, memory_order_relaxed);
    void *bad;
    pthread_join(t, &bad);
    ck_assert_ptr_null(bad);
}
END_TEST

static void free_cache_cb(ld_future *f, void *arg);

/* LD_CACHE_FOREVER over a failing inner store: lent answers are taken
 * from what the failed writes cached, then the cache is freed from a
 * callback of one of its futures while the inner store's reads and writes
 * are still under way: every future completes, the lent answers still read
 * their items, and every reference comes back. */
START_TEST(test_forever_failing_freed_from_a_callback_with_lent_answers_held)
{
    make(LD_CACHE_FOREVER);
    const ld_kind *k = ld_kind_features();
    const char *keys[] = {"a", "b", "c"};
    init_through(keys, 3, 1);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_ANY, 1000, LD_ESTORE), 0);
    json_t *a2 = F("a", 2);
    ld_test_expect_error(ld_store_upsert(cache, k, a2), LD_ESTORE, NULL);
    ld_test_expect_error(ld_store_delete(cache, k, "b", 2), LD_ESTORE, NULL);
    ld_future *held_a = ld_store_get(cache, k, "a"); /* lent: the failed write's item */
    ld_future *held_c = ld_store_get(cache, k, "c");
    ld_future *held_b = ld_store_get(cache, k, "b"); /* the tombstone: NULL */
    run_ready(); /* (the poll's timer keeps the loop from being idle) */
    ck_assert_ptr_eq(ld_future_json(held_a), a2);
    ck_assert_int_eq(ld_item_version(ld_future_json(held_c)), 1);
    ck_assert_ptr_null(ld_future_json(held_b));
    /* under way at the inner store when the cache goes: a read of a key it
     * does not know, an all (the kind is known: answered), writes, an
     * initialized */
    ld_future *ops[6];
    json_t *a3 = F("a", 3), *d1 = F("d", 1);
    ops[0] = ld_store_get(cache, k, "zzz");
    ops[1] = ld_store_upsert(cache, k, a3);
    ops[2] = ld_store_get(cache, k, "a");
    ops[3] = ld_store_upsert(cache, k, d1);
    ops[4] = ld_store_all(cache, k);
    ops[5] = ld_store_delete(cache, k, "c", 9);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(ops[0]), free_cache_cb, NULL), 0);
    ld_test_flush();
    ck_assert_ptr_null(cache);
    for (int i = 0; i < 6; i++) {
        ck_assert(!ld_future_is_pending(ops[i]));
        ld_future_unref(ops[i]);
    }
    ck_assert_ptr_eq(ld_future_json(held_a), a2);
    ck_assert_str_eq(json_string_value(json_object_get(ld_future_json(held_c), "key")), "c");
    ld_future_unref(held_a);
    ld_future_unref(held_b);
    ld_future_unref(held_c);
    ld_test_flush();
    ck_assert_int_eq(a2->refcount, 1);
    ck_assert_int_eq(a3->refcount, 1);
    ck_assert_int_eq(d1->refcount, 1);
    json_decref(a2);
    json_decref(a3);
    json_decref(d1);
}
END_TEST

/* A flag of daemon mode's test: it serves "<key>/<version>", and requires
 * the flag `prereq` (NULL: none) to serve its first variation. */
static json_t *dflag(const char *key, int version, const char *prereq)
{
    char val[64];
    snprintf(val, sizeof val, "%s/%d", key, version);
    json_t *f = json_pack("{s:s, s:i, s:b, s:[s,s], s:i, s:{s:i}, s:[], s:[], s:[], s:[], s:s}",
                          "key", key, "version", version, "on", 1, "variations", val, "off",
                          "offVariation", 1, "fallthrough", "variation", 0, "prerequisites",
                          "targets", "contextTargets", "rules", "salt", "abc");
    ck_assert_ptr_nonnull(f);
    if (prereq)
        json_array_append_new(json_object_get(f, "prerequisites"),
                              json_pack("{s:s, s:i}", "key", prereq, "variation", 0));
    return f;
}

struct details {
    ld_future **f;
    int n;
};

static void *read_details(void *arg)
{
    struct details *d = arg;
    long bad = 0;
    for (int i = 0; i < d->n; i++) {
        const ld_detail *det = ld_future_ptr(d->f[i]);
        const char *v = json_string_value(ld_detail_value(det));
        char want[16];
        snprintf(want, sizeof want, "d%d/", i % 40);
        bad += !v || (strncmp(v, want, strlen(want)) != 0 && strcmp(v, "off") != 0);
        ld_future_unref(d->f[i]);
    }
    return (void *)bad;
}

/* Daemon mode over the cache (a capacity of 8 for 40 flags, each the
 * prerequisite of the one before): evaluations read the flags within the
 * call, lent by the cache, while it evicts them; details taken between
 * writes and inits are released on another thread after the cache let go
 * of what they read: each reads its own flag's value (ASan, TSan). */
START_TEST(test_daemon_mode_evaluations_over_an_evicting_cache)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    setenv("LDASYNC_CACHE_CAPACITY", "8", 1);
    cache = ld_caching_store_new(B, ld_memory_store_new(B), LONG_TTL);
    unsetenv("LDASYNC_CACHE_CAPACITY");
    ck_assert_ptr_nonnull(cache);
    enum { NF = 40, NEVAL = 3000 };
    char key[16], next[16];
    int version = 1;
    json_t *features = json_object();
    for (int i = 0; i < NF; i++) {
        snprintf(key, sizeof key, "d%d", i);
        snprintf(next, sizeof next, "d%d", i + 1);
        json_object_set_new(features, key, dflag(key, version, i + 1 < NF ? next : NULL));
    }
    json_t *data = json_pack("{s:o, s:{}}", "features", features, "segments");
    ld_test_await_ok(ld_store_init(cache, data));
    json_decref(data);
    ld_client_options *o = ld_client_options_new();
    ck_assert_int_eq(ld_client_options_set_daemon_mode(o, true), 0);
    ld_client_options_set_store(o, cache);
    ld_client *client = ld_client_new(B, o);
    ld_client_options_free(o);
    ck_assert_ptr_nonnull(client);
    ld_test_await_ok(ld_client_ready(client));
    json_t *cj = json_pack("{s:s,s:s}", "kind", "user", "key", "u1");
    ld_context *ctx = ld_context_from_json(cj, NULL);
    json_decref(cj);
    ck_assert_ptr_nonnull(ctx);
    json_t *dflt = json_string("default");
    struct details d = {malloc(NEVAL * sizeof(ld_future *)), NEVAL};
    ck_assert_ptr_nonnull(d.f);
    for (int i = 0; i < NEVAL; i++) {
        snprintf(key, sizeof key, "d%d", i % NF);
        d.f[i] = ld_client_variation_detail(client, key, ctx, LD_VALUE_STRING, json_incref(dflt));
        if (i % 100 == 99) { /* a write over flags being read */
            int w = i / 100 % NF;
            snprintf(key, sizeof key, "d%d", w);
            snprintf(next, sizeof next, "d%d", w + 1);
            json_t *item = dflag(key, ++version, w + 1 < NF ? next : NULL);
            ld_future_unref(ld_store_upsert(cache, ld_kind_features(), item));
            json_decref(item);
            event_base_loop(B, EVLOOP_NONBLOCK);
        }
    }
    for (int i = 0; i < NEVAL; i++) {
        ck_assert_int_eq(ld_future_wait(d.f[i]), 0);
        ck_assert_msg(ld_future_is_fulfilled(d.f[i]), "%s", ld_future_error_message(d.f[i]));
    }
    /* an init replaces every flag, then the details go on another thread */
    features = json_object();
    version++;
    for (int i = 0; i < NF; i++) {
        snprintf(key, sizeof key, "d%d", i);
        json_object_set_new(features, key, dflag(key, version, NULL));
    }
    data = json_pack("{s:o, s:{}}", "features", features, "segments");
    ld_test_await_ok(ld_store_init(cache, data));
    json_decref(data);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, read_details, &d), 0);
    for (int i = 0; i < 200; i++) { /* the loop evicts and evaluates meanwhile */
        snprintf(key, sizeof key, "d%d", i % NF);
        ld_future_unref(
            ld_client_variation_detail(client, key, ctx, LD_VALUE_STRING, json_incref(dflt)));
        event_base_loop(B, EVLOOP_NONBLOCK);
    }
    void *bad;
    pthread_join(t, &bad);
    free(d.f);
    ck_assert_ptr_null(bad);
    json_decref(dflt);
    ld_context_unref(ctx);
    ld_client_free(client);
    ld_test_flush();
}
END_TEST

/* ---- status ------------------------------------------------------------- */

START_TEST(test_a_failure_makes_it_unavailable_until_the_poll_answers)
{
    make(LONG_TTL);
    force("x", 1);
    ck_assert_int_eq(get_version("x"), 1); /* cached */
    listen_cache();
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 3, LD_ESTORE), 0);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_INITIALIZED, 2, LD_ESTORE), 0);
    ld_future *f[3] = {ld_store_get(cache, ld_kind_features(), "a"),
                       ld_store_get(cache, ld_kind_features(), "b"),
                       ld_store_get(cache, ld_kind_features(), "c")};
    for (int i = 0; i < 3; i++)
        ld_test_expect_error(f[i], LD_ESTORE, "injected");
    ck_assert(!available()); /* by the time the result came */
    run_ready();
    ck_assert_int_eq(g_heard, 1); /* once for the change, not per failure */
    ck_assert(!g_heard_st[0].available);
    until_available();
    ck_assert_int_ge(calls(LD_MOCK_OP_INITIALIZED), 3); /* two polls failed */
    ck_assert_int_eq(g_heard, 2);
    ck_assert(g_heard_st[1].available);
    ck_assert(g_heard_st[1].needs_refresh); /* a ttl: the data source sends again */
    /* and what it held is forgotten */
    force("x", 2);
    ck_assert_int_eq(get_version("x"), 2);
}
END_TEST

START_TEST(test_a_ttl_cache_reads_expired_entries_from_the_failing_store)
{
    make(30);
    force("x", 1);
    ck_assert_int_eq(get_version("x"), 1);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 100, LD_ESTORE), 0);
    sleep_loop(60); /* twice the ttl */
    ld_test_expect_error(ld_store_get(cache, ld_kind_features(), "x"), LD_ESTORE, NULL);
    ck_assert(!available());
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 2);
}
END_TEST

START_TEST(test_request_errors_keep_it_available)
{
    make(LONG_TTL);
    listen_cache();
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 1, LD_EINVAL), 0);
    ld_test_expect_error(ld_store_get(cache, ld_kind_features(), "a"), LD_EINVAL, NULL);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 1, LD_ENOMEM), 0);
    ld_test_expect_error(ld_store_get(cache, ld_kind_features(), "a"), LD_ENOMEM, NULL);
    ld_test_flush();
    ck_assert(available());
    ck_assert_int_eq(g_heard, 0);
}
END_TEST

START_TEST(test_forever_serves_while_failing_and_writes_back)
{
    make(LD_CACHE_FOREVER);
    const char *keys[] = {"a", "b", "c"};
    init_through(keys, 3, 1);
    listen_cache();
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_ANY, 100, LD_ESTORE), 0);
    json_t *item = F("a", 2);
    ld_test_expect_error(ld_store_upsert(cache, ld_kind_features(), item), LD_ESTORE, NULL);
    json_decref(item);
    ld_test_expect_error(ld_store_delete(cache, ld_kind_features(), "b", 2), LD_ESTORE, NULL);
    ck_assert(!available());
    /* the cache serves the newest data it knows */
    ck_assert_int_eq(get_version("a"), 2);
    ck_assert_int_eq(get_version("b"), -1);
    ck_assert_int_eq(get_version("c"), 1);
    ld_future *f = ld_test_fulfilled(ld_store_all(cache, ld_kind_features()));
    ck_assert_int_eq(json_object_size(ld_future_json(f)), 2);
    ld_future_unref(f);
    /* an older write that fails is not cached */
    item = F("c", 0);
    ld_test_expect_error(ld_store_upsert(cache, ld_kind_features(), item), LD_ESTORE, NULL);
    json_decref(item);
    ck_assert_int_eq(get_version("c"), 1);
    ck_assert_int_eq(ld_mock_store_init_count(mock), 1);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_ANY, 0, LD_ESTORE), 0); /* back */
    until_available();
    ck_assert_int_eq(g_heard, 2);
    ck_assert(!g_heard_st[0].available);
    ck_assert(g_heard_st[1].available && !g_heard_st[1].needs_refresh);
    /* one init wrote the cache's data back */
    ck_assert_int_eq(ld_mock_store_init_count(mock), 2);
    const json_t *back = json_object_get(ld_mock_store_init_data(mock, 1), "features");
    ck_assert_int_eq(json_object_size(back), 3);
    ck_assert_int_eq(ld_item_version(json_object_get(back, "a")), 2);
    ck_assert(ld_item_is_deleted(json_object_get(back, "b")));
    ck_assert_int_eq(ld_item_version(json_object_get(back, "b")), 2);
    ck_assert_int_eq(ld_item_version(json_object_get(back, "c")), 1);
    ck_assert_ptr_nonnull(json_object_get(ld_mock_store_init_data(mock, 1), "segments"));
}
END_TEST

START_TEST(test_forever_keeps_a_failed_init)
{
    make(LD_CACHE_FOREVER);
    listen_cache();
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_INIT, 1, LD_ESTORE), 0);
    json_t *data = data_of((const char *[]){"a", "b"}, 2, 4);
    ld_test_expect_error(ld_store_init(cache, data), LD_ESTORE, NULL);
    ck_assert(!available());
    ck_assert_int_eq(get_version("a"), 4);
    ck_assert_int_eq(get_version("zz"), -1);
    ck_assert_int_eq(calls(LD_MOCK_OP_GET), 0);
    until_available();
    ck_assert(g_heard_st[g_heard - 1].available && !g_heard_st[g_heard - 1].needs_refresh);
    ck_assert_int_eq(ld_mock_store_init_count(mock), 2);
    ck_assert(json_equal(ld_mock_store_init_data(mock, 1), data));
    json_decref(data);
    ck_assert(ld_test_await_bool(ld_store_initialized(mock)));
}
END_TEST

START_TEST(test_forever_without_an_init_asks_for_the_data)
{
    make(LD_CACHE_FOREVER);
    force("x", 1);
    ck_assert_int_eq(get_version("x"), 1);
    listen_cache();
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 1, LD_ESTORE), 0);
    ld_test_expect_error(ld_store_get(cache, ld_kind_features(), "y"), LD_ESTORE, NULL);
    ck_assert_int_eq(get_version("x"), 1); /* cached: no call, whatever the store */
    until_available();
    ck_assert_int_eq(g_heard, 2);
    ck_assert(g_heard_st[1].available && g_heard_st[1].needs_refresh);
    ck_assert_int_eq(ld_mock_store_init_count(mock), 0); /* nothing whole to write back */
}
END_TEST

START_TEST(test_it_mirrors_the_inner_status)
{
    make(LONG_TTL);
    listen_cache();
    force("x", 1);
    ck_assert_int_eq(get_version("x"), 1);
    ck_assert_int_eq(ld_mock_store_set_available(mock, false), 0);
    ld_test_flush();
    ck_assert(!available());
    ck_assert_int_eq(g_heard, 1);
    ck_assert_int_eq(ld_mock_store_set_available(mock, true), 0);
    ld_test_flush();
    ck_assert(available());
    ck_assert_int_eq(g_heard, 2);
    ck_assert(g_heard_st[1].available && g_heard_st[1].needs_refresh);
    force("x", 2);
    ck_assert_int_eq(get_version("x"), 2); /* flushed */
    /* the data source sends its data again: needs_refresh is over */
    const char *keys[] = {"a"};
    init_through(keys, 1, 1);
    ld_test_flush();
    ck_assert_int_eq(g_heard, 3);
    ck_assert(g_heard_st[2].available && !g_heard_st[2].needs_refresh);
}
END_TEST

START_TEST(test_forever_writes_back_when_the_inner_store_is_back)
{
    make(LD_CACHE_FOREVER);
    const char *keys[] = {"a"};
    init_through(keys, 1, 1);
    listen_cache();
    ck_assert_int_eq(ld_mock_store_set_available(mock, false), 0);
    ld_test_flush();
    ck_assert(!available());
    ck_assert_int_eq(ld_mock_store_set_available(mock, true), 0);
    ld_test_flush();
    ck_assert(available());
    ck_assert_int_eq(g_heard, 2);
    ck_assert(!g_heard_st[1].needs_refresh);
    ck_assert_int_eq(ld_mock_store_init_count(mock), 2);
}
END_TEST

START_TEST(test_a_cache_made_over_an_unavailable_store_is_unavailable)
{
    mock = ld_mock_store_new(B);
    ck_assert_int_eq(ld_mock_store_set_available(mock, false), 0);
    cache = ld_caching_store_new(B, mock, LONG_TTL);
    ck_assert_ptr_nonnull(cache);
    ck_assert(!available());
    listen_cache();
    ck_assert_int_eq(ld_mock_store_set_available(mock, true), 0);
    ld_test_flush();
    ck_assert(available());
    ck_assert_int_eq(g_heard, 1);
}
END_TEST

/* ---- lifetime ----------------------------------------------------------- */

static ld_future *g_ops[8];
static int g_nops;

static void issue_everything(void)
{
    json_t *item = F("x", 3);
    json_t *data = data_of((const char *[]){"a"}, 1, 1);
    g_nops = 0;
    g_ops[g_nops++] = ld_store_get(cache, ld_kind_features(), "x");
    g_ops[g_nops++] = ld_store_get(cache, ld_kind_features(), "x"); /* shares */
    g_ops[g_nops++] = ld_store_all(cache, ld_kind_features());
    g_ops[g_nops++] = ld_store_upsert(cache, ld_kind_features(), item);
    g_ops[g_nops++] = ld_store_delete(cache, ld_kind_features(), "y", 1);
    g_ops[g_nops++] = ld_store_init(cache, data);
    g_ops[g_nops++] = ld_store_initialized(cache);
    json_decref(item);
    json_decref(data);
}

static void release_everything(void)
{
    for (int i = 0; i < g_nops; i++) {
        ck_assert(!ld_future_is_pending(g_ops[i]));
        ld_future_unref(g_ops[i]);
    }
    g_nops = 0;
}

START_TEST(test_free_with_inner_operations_pending)
{
    for (int ttl = -1; ttl <= 1; ttl++) {
        make(ttl == 1 ? LONG_TTL : ttl);
        issue_everything();
        ld_store_free(cache);
        cache = NULL;
        ld_test_flush();
        for (int i = 0; i < g_nops; i++)
            ck_assert_int_eq(ld_future_error(g_ops[i]), LD_ECANCELED);
        release_everything();
    }
}
END_TEST

START_TEST(test_close_with_inner_operations_pending)
{
    make(LONG_TTL);
    issue_everything();
    ld_future *c = ld_store_close(cache);
    ld_test_await_ok(c);
    for (int i = 0; i < g_nops; i++)
        ck_assert_msg(ld_future_is_fulfilled(g_ops[i]), "op %d: %s", i,
                      ld_future_error_message(g_ops[i]));
    release_everything();
    ld_test_expect_error(ld_store_get(cache, ld_kind_features(), "x"), LD_ECLOSED, NULL);
    ld_test_await_ok(ld_store_close(cache)); /* twice */
}
END_TEST

static void free_cache_cb(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    ld_store_free(cache);
    cache = NULL;
}

START_TEST(test_free_from_a_callback_of_its_future)
{
    make(LONG_TTL);
    issue_everything();
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(g_ops[0]), free_cache_cb, NULL), 0);
    ld_test_flush();
    ck_assert_ptr_null(cache);
    ck_assert(ld_future_is_fulfilled(g_ops[0]));
    release_everything();
}
END_TEST

static void free_in_listener(ld_store *st, const ld_store_status *status, void *arg)
{
    (void)status;
    (void)arg;
    ck_assert_ptr_eq(st, cache);
    ld_store_free(st);
    cache = NULL;
}

START_TEST(test_free_from_inside_a_status_listener)
{
    make(LD_CACHE_FOREVER);
    ck_assert_int_gt(ld_store_add_status_listener(cache, free_in_listener, NULL), 0);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 1, LD_ESTORE), 0);
    ld_future *f = ld_store_get(cache, ld_kind_features(), "x");
    ld_future *g = ld_store_get(cache, ld_kind_features(), "y"); /* in flight when freed */
    ld_test_flush();
    ck_assert_ptr_null(cache);
    ck_assert_int_eq(ld_future_error(f), LD_ESTORE);
    ck_assert(!ld_future_is_pending(g));
    ld_future_unref(f);
    ld_future_unref(g);
    sleep_loop(50); /* the poll's timer went with it */
}
END_TEST

/* Runs the loop until the script store has been handed `n` operations. */
static void until_handed(const struct ld_test_script *sc, int n)
{
    for (int i = 0; i < 10000 && sc->n < n; i++)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert_int_eq(sc->n, n);
}

/* Over a store that answers only when the test says (check_util.h's
 * script): freed while the write-back's init is under way. */
START_TEST(test_free_while_writing_back)
{
    static struct ld_test_script sc;
    memset(&sc, 0, sizeof sc);
    setenv("LDASYNC_CACHE_POLL_MS", "5", 1);
    cache =
        ld_caching_store_new(B, ld_store_new(B, &ld_test_script_store_ops, &sc), LD_CACHE_FOREVER);
    unsetenv("LDASYNC_CACHE_POLL_MS");
    ck_assert_ptr_nonnull(cache);
    ck_assert_str_eq(ld_store_describe(cache), "caching(script)");
    json_t *data = data_of((const char *[]){"a"}, 1, 1);
    ld_future *f = ld_store_init(cache, data);
    until_handed(&sc, 1);
    ck_assert_int_eq(ld_future_fulfill(sc.outs[0]), 0);
    ld_test_await_ok(f);
    f = ld_store_delete(cache, ld_kind_features(), "a", 2);
    until_handed(&sc, 2);
    ck_assert_int_eq(ld_future_reject(sc.outs[1], LD_ESTORE, "down"), 0);
    ld_test_expect_error(f, LD_ESTORE, "down");
    ck_assert(!available());
    until_handed(&sc, 3); /* the poll's initialized */
    ck_assert_int_eq(ld_future_fulfill_bool(sc.outs[2], true), 0);
    until_handed(&sc, 4);                             /* the write-back */
    ck_assert(!available());                          /* not before it came back */
    f = ld_store_get(cache, ld_kind_features(), "a"); /* from the cache */
    ck_assert_ptr_null(ld_future_json(ld_test_fulfilled(f)));
    ld_future_unref(f);
    ld_store_free(cache);
    cache = NULL;
    ld_test_flush();
    ck_assert_int_eq(sc.freed, 1);
    json_decref(data);
}
END_TEST

/* A write under way when the store comes back reaches it before the
 * write-back's init would, whose data has not got it yet: the write-back
 * waits for it. */
START_TEST(test_write_back_waits_for_writes_under_way)
{
    static struct ld_test_script sc;
    memset(&sc, 0, sizeof sc);
    setenv("LDASYNC_CACHE_POLL_MS", "5", 1);
    cache =
        ld_caching_store_new(B, ld_store_new(B, &ld_test_script_store_ops, &sc), LD_CACHE_FOREVER);
    unsetenv("LDASYNC_CACHE_POLL_MS");
    ck_assert_ptr_nonnull(cache);
    json_t *data = data_of((const char *[]){"a"}, 1, 1);
    ld_future *f = ld_store_init(cache, data);
    json_decref(data);
    until_handed(&sc, 1);
    ck_assert_int_eq(ld_future_fulfill(sc.outs[0]), 0);
    ld_test_await_ok(f);
    f = ld_store_delete(cache, ld_kind_features(), "a", 2);
    until_handed(&sc, 2);
    ck_assert_int_eq(ld_future_reject(sc.outs[1], LD_ESTORE, "down"), 0);
    ld_test_expect_error(f, LD_ESTORE, "down");
    until_handed(&sc, 3); /* the poll's initialized */
    json_t *item = F("b", 1);
    ld_future *w = ld_store_upsert(cache, ld_kind_features(), item); /* under way */
    json_decref(item);
    until_handed(&sc, 4);
    ck_assert_int_eq(ld_future_fulfill_bool(sc.outs[2], true), 0);
    until_handed(&sc, 5); /* not the write-back: the next poll */
    ck_assert(!available());
    ck_assert_int_eq(ld_future_fulfill_bool(sc.outs[3], true), 0); /* the upsert */
    ck_assert(ld_test_await_bool(w));
    ck_assert_int_eq(ld_future_fulfill_bool(sc.outs[4], true), 0);
    until_handed(&sc, 6); /* the write-back, after the upsert */
    ck_assert(!available());
    ck_assert_int_eq(ld_future_fulfill(sc.outs[5]), 0);
    until_available();
    ld_store_status st;
    ck_assert_int_eq(ld_store_current_status(cache, &st), 0);
    ck_assert(!st.needs_refresh);
}
END_TEST

/* ---- the contract ------------------------------------------------------- */

static ld_store *new_cached_memory(struct event_base *base, void *arg)
{
    return ld_caching_store_new(base, ld_memory_store_new(base), *(const int64_t *)arg);
}

static const struct ld_store_contract_factory cached_factory = {
    .version = LD_STORE_CONTRACT_FACTORY_VERSION,
    .new_store = new_cached_memory,
};

static const int64_t ttl_none = 0, ttl_finite = LONG_TTL, ttl_forever = LD_CACHE_FOREVER;

Suite *ld_suite_caching_store(void)
{
    Suite *s = suite_create("caching_store");
    TCase *tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_new_bad_input_frees_inner);
    tcase_add_test(tc, test_hits_are_served_without_inner_calls);
    tcase_add_test(tc, test_misses_are_remembered);
    tcase_add_test(tc, test_entries_expire);
    tcase_add_test(tc, test_concurrent_gets_share_one_inner_get);
    tcase_add_test(tc, test_a_get_after_a_write_does_not_share_an_earlier_get);
    tcase_add_test(tc, test_a_write_under_way_holds_back_reads_of_its_key_only);
    tcase_add_test(tc, test_writes_update_the_entries);
    tcase_add_test(tc, test_all_entries_and_their_invalidation);
    tcase_add_test(tc, test_init_replaces_what_the_cache_holds);
    tcase_add_test(tc, test_initialized_is_remembered_once_true);
    tcase_add_test(tc, test_ttl_zero_asks_the_inner_store_every_time);
    tcase_add_test(tc, test_the_per_item_cache_is_bounded);
    tcase_add_test(tc, test_lent_answers_outlive_what_the_cache_lets_go_of);
    tcase_add_test(tc, test_lent_answers_of_a_whole_kind_outlive_its_writes);
    tcase_add_test(tc, test_lent_answers_released_on_other_threads_while_written_over);
    suite_add_tcase(s, tc);

    tc = tcase_create("lend");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120); /* 100,000 keys; threads (TSan) */
    tcase_add_test(tc, test_a_held_answer_does_not_keep_the_data_sets_inits_replace);
    tcase_add_test(tc, test_a_held_answer_does_not_keep_the_alls_writes_replace);
    tcase_add_test(tc, test_keys_of_any_length_and_utf8_are_cached_and_lent);
    tcase_add_test(tc, test_many_keys_through_a_small_cache_with_results_held);
    tcase_add_test(tc, test_lent_answers_released_on_another_thread_while_evicted_inited_and_freed);
    tcase_add_test(tc, test_sealed_lease_released_on_another_thread_then_the_kinds_object_freed);
    tcase_add_test(tc, test_daemon_mode_evaluations_over_an_evicting_cache);
    suite_add_tcase(s, tc);

    tc = tcase_create("status");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_a_failure_makes_it_unavailable_until_the_poll_answers);
    tcase_add_test(tc, test_request_errors_keep_it_available);
    tcase_add_test(tc, test_a_ttl_cache_reads_expired_entries_from_the_failing_store);
    tcase_add_test(tc, test_forever_serves_while_failing_and_writes_back);
    tcase_add_test(tc, test_forever_keeps_a_failed_init);
    tcase_add_test(tc, test_forever_without_an_init_asks_for_the_data);
    tcase_add_test(tc, test_it_mirrors_the_inner_status);
    tcase_add_test(tc, test_forever_writes_back_when_the_inner_store_is_back);
    tcase_add_test(tc, test_a_cache_made_over_an_unavailable_store_is_unavailable);
    suite_add_tcase(s, tc);

    tc = tcase_create("lifetime");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_free_with_inner_operations_pending);
    tcase_add_test(tc, test_close_with_inner_operations_pending);
    tcase_add_test(tc, test_free_from_a_callback_of_its_future);
    tcase_add_test(tc, test_free_from_inside_a_status_listener);
    tcase_add_test(tc, test_free_while_writing_back);
    tcase_add_test(tc, test_forever_failing_freed_from_a_callback_with_lent_answers_held);
    tcase_add_test(tc, test_write_back_waits_for_writes_under_way);
    suite_add_tcase(s, tc);

    ld_store_contract_add_tests(s, "contract_ttl_0", &cached_factory, (void *)&ttl_none);
    ld_store_contract_add_tests(s, "contract_ttl", &cached_factory, (void *)&ttl_finite);
    ld_store_contract_add_tests(s, "contract_forever", &cached_factory, (void *)&ttl_forever);
    return s;
}
