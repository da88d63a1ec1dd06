/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The store synchronizer (ld_store_synchronizer_new(), data_system.h): a
 * data system keeps a memory store equal to another store it reads every
 * interval (here a memory store, and the mock store for failures; the Redis
 * store in tests/redis).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <ldasync/testing.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

static ld_store *SRC, *DST;

static void ss_setup(void)
{
    ld_test_setup();
    SRC = ld_memory_store_new(B);
    DST = ld_memory_store_new(B);
}

static void ss_teardown(void)
{
    ld_test_flush();
    ld_store_free(SRC);
    ld_store_free(DST);
    ld_test_teardown();
}

static void run_ms(int ms)
{
    struct timeval tv = {0, ms * 1000};
    event_base_loopexit(B, &tv);
    event_base_dispatch(B);
}

static int64_t version_in(ld_store *s, const char *key)
{
    ld_future *f = ld_test_fulfilled(ld_store_get(s, ld_kind_features(), key));
    int64_t v = ld_future_json(f) ? ld_item_version(ld_future_json(f)) : -1;
    ld_future_unref(f);
    return v;
}

static void upsert(ld_store *s, const char *key, int version)
{
    json_t *item = ld_test_feature(key, version);
    ld_test_await_ok(ld_store_upsert(s, ld_kind_features(), item));
    json_decref(item);
}

static int changes;
static void on_change(ld_data_system *ds, const ld_kind *kind, const char *key, int64_t version,
                      const json_t *item, void *arg)
{
    (void)ds;
    (void)kind;
    (void)key;
    (void)version;
    (void)item;
    (void)arg;
    changes++;
}

START_TEST(test_bad_input)
{
    ck_assert_ptr_null(ld_store_synchronizer_new(NULL, SRC, 10));
    ck_assert_ptr_null(ld_store_synchronizer_new(B, NULL, 10));
    ck_assert_ptr_null(ld_store_synchronizer_new(B, SRC, 0));
    ck_assert_ptr_null(ld_store_synchronizer_new(B, SRC, -1));
    ld_synchronizer *s = ld_store_synchronizer_new(B, SRC, 10);
    ck_assert_str_eq(ld_synchronizer_name(s), "store");
    ld_synchronizer_free(s);
}
END_TEST

START_TEST(test_follows_the_store)
{
    json_t *data = ld_test_data_of("{'a': {'version': 1}, 'b': {'version': 2}}", NULL);
    ld_test_await_ok(ld_store_init(SRC, data));
    json_decref(data);
    ld_data_system *ds = ld_data_system_new(B, DST, NULL, 0, ld_store_synchronizer_new(B, SRC, 10));
    ld_test_await_ok(ld_data_system_ready(ds));
    ck_assert_int_eq(version_in(DST, "a"), 1);
    ck_assert_int_eq(version_in(DST, "b"), 2);
    ck_assert(ld_test_await_bool(ld_store_initialized(DST)));
    ck_assert_int_gt(ld_data_system_add_change_listener(ds, on_change, NULL), 0);
    changes = 0;
    /* nothing changes: no update, no change heard */
    run_ms(60);
    ck_assert_int_eq(changes, 0);
    /* a new version and a new flag: both reach the memory store */
    upsert(SRC, "a", 5);
    upsert(SRC, "c", 1);
    for (int i = 0; i < 100 && version_in(DST, "c") != 1; i++)
        run_ms(5);
    ck_assert_int_eq(version_in(DST, "a"), 5);
    ck_assert_int_eq(version_in(DST, "c"), 1);
    ck_assert_int_eq(changes, 2);
    /* deleted in the source: gone here too */
    ld_test_await_ok(ld_store_delete(SRC, ld_kind_features(), "b", 9));
    for (int i = 0; i < 100 && version_in(DST, "b") != -1; i++)
        run_ms(5);
    ck_assert_int_eq(version_in(DST, "b"), -1);
    ld_data_system_free(ds);
    ld_test_flush();
}
END_TEST

START_TEST(test_waits_for_an_initialized_store)
{
    ld_data_system *ds = ld_data_system_new(B, DST, NULL, 0, ld_store_synchronizer_new(B, SRC, 10));
    ld_future *ready = ld_data_system_ready(ds);
    run_ms(50);
    ck_assert(ld_future_is_pending(ready));
    json_t *data = ld_test_data_of("{'a': {'version': 3}}", NULL);
    ld_test_await_ok(ld_store_init(SRC, data));
    json_decref(data);
    ld_test_await_ok(ready);
    ck_assert_int_eq(version_in(DST, "a"), 3);
    ld_data_system_free(ds);
    ld_test_flush();
}
END_TEST

START_TEST(test_store_failure_interrupts_then_recovers)
{
    ld_store *mock = ld_mock_store_new(B);
    json_t *data = ld_test_data_of("{'a': {'version': 1}}", NULL);
    ld_test_await_ok(ld_store_init(mock, data));
    json_decref(data);
    ld_data_system *ds =
        ld_data_system_new(B, DST, NULL, 0, ld_store_synchronizer_new(B, mock, 10));
    ld_test_await_ok(ld_data_system_ready(ds));
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_ALL, 4, LD_ESTORE), 0);
    ld_data_source_status st;
    bool interrupted = false;
    for (int i = 0; i < 100 && !interrupted; i++) {
        run_ms(5);
        ck_assert_int_eq(ld_data_system_status(ds, &st), 0);
        interrupted = st.state == LD_DATA_SOURCE_STATE_INTERRUPTED;
    }
    ck_assert_msg(interrupted, "never interrupted");
    ck_assert_ptr_nonnull(st.error);
    ck_assert_int_eq(st.error->kind, LD_DATA_SOURCE_ERROR_KIND_STORE);
    bool valid = false;
    for (int i = 0; i < 200 && !valid; i++) {
        run_ms(5);
        ck_assert_int_eq(ld_data_system_status(ds, &st), 0);
        valid = st.state == LD_DATA_SOURCE_STATE_VALID;
    }
    ck_assert_msg(valid, "never valid again");
    ld_data_system_free(ds);
    ld_test_flush();
    ld_store_free(mock);
}
END_TEST

START_TEST(test_free_with_a_read_in_flight)
{
    /* the mock answers from the loop: free right after the first read
     * started, and while a next waits */
    for (int round = 0; round < 3; round++) {
        ld_synchronizer *s = ld_store_synchronizer_new(B, SRC, 1);
        ld_future *n = ld_synchronizer_next(s);
        if (round > 0)
            event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        if (round == 2) {
            ld_future *stop = ld_synchronizer_stop(s);
            ld_test_await_ok(stop);
        }
        ld_synchronizer_free(s);
        ld_test_wait(n);
        ck_assert(ld_future_is_rejected(n));
        ld_future_unref(n);
        ld_test_flush();
    }
}
END_TEST

/* ---- ld_synchronizer_refresh() ----------------------------------------------- */

static void v1_next(void *impl, ld_future *out)
{
    (void)impl;
    ld_future_reject(out, LD_ECLOSED, NULL);
    ld_future_unref(out);
}

/* A synchronizer of ops version 1 (no refresh) is still made, and a
 * refresh of it does nothing; a store synchronizer's refresh makes its
 * next read an update although nothing changed. */
START_TEST(test_refresh_of_each_version)
{
    static const struct ld_synchronizer_ops v1 = {1, NULL, v1_next, NULL, NULL, NULL};
    ld_synchronizer *old = ld_synchronizer_new(B, &v1, NULL);
    ck_assert_ptr_nonnull(old);
    ck_assert_int_eq(ld_synchronizer_refresh(old), 0);
    ld_synchronizer_free(old);
    static const struct ld_synchronizer_ops v3 = {3, NULL, v1_next, NULL, NULL, NULL};
    ck_assert_ptr_null(ld_synchronizer_new(B, &v3, NULL));

    json_t *data = ld_test_data_of("{'a': {'version': 1}}", NULL);
    ld_test_await_ok(ld_store_init(SRC, data));
    json_decref(data);
    ld_synchronizer *s = ld_store_synchronizer_new(B, SRC, 5);
    ld_test_await_ok(ld_synchronizer_next(s)); /* the first read */
    ld_future *n = ld_synchronizer_next(s);
    run_ms(40);
    ck_assert(ld_future_is_pending(n)); /* nothing changed: no update */
    ck_assert_int_eq(ld_synchronizer_refresh(s), 0);
    ld_test_wait(n);
    ck_assert(ld_future_is_fulfilled(n));
    ck_assert_ptr_nonnull(ld_fdv2_update_change_set(ld_fdv2_future_update(n)));
    ld_future_unref(n);
    ld_synchronizer_free(s);
    ld_test_flush();
}
END_TEST

/* ---- a store that lost data ----------------------------------------------- */

/* A data system reading a flag file into a caching store (with a ttl) over
 * the mock: when the mock fails and comes back, the cache says it lost
 * what it held (needs_refresh), and the data system has the file read
 * again: a second init reaches the mock, and the cache is whole again. */
START_TEST(test_needs_refresh_sends_everything_again)
{
    char path[] = "/tmp/ldasync-refresh-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "{\"flags\": {\"a\": {\"key\": \"a\", \"version\": 3, \"on\": true}}}";
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    setenv("LDASYNC_CACHE_POLL_MS", "10", 1);
    setenv("LDASYNC_CACHE_CHECK_MS", "0", 1);
    ld_store *mock = ld_mock_store_new(B);
    ld_store *cache = ld_caching_store_new(B, mock, 600000);
    unsetenv("LDASYNC_CACHE_POLL_MS");
    unsetenv("LDASYNC_CACHE_CHECK_MS");
    const char *paths[] = {path};
    ld_data_system *ds =
        ld_data_system_new(B, cache, NULL, 0, ld_file_synchronizer_new(B, paths, 1, 1000));
    ld_test_await_ok(ld_data_system_ready(ds));
    ck_assert_int_eq(ld_mock_store_init_count(mock), 1);
    /* the mock fails a write: the cache is unavailable, then polls it back */
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_UPSERT, 1, LD_ESTORE), 0);
    json_t *item = ld_test_feature("b", 1);
    ld_future *w = ld_store_upsert(cache, ld_kind_features(), item);
    json_decref(item);
    ld_test_wait(w);
    ck_assert(ld_future_is_rejected(w));
    ld_future_unref(w);
    /* back: needs_refresh, and the data system reads the file again */
    for (int i = 0; i < 400 && ld_mock_store_init_count(mock) < 2; i++)
        run_ms(5);
    ck_assert_int_eq(ld_mock_store_init_count(mock), 2);
    ld_store_status st = {false, true};
    for (int i = 0; i < 100 && !(st.available && !st.needs_refresh); i++) {
        run_ms(5);
        ck_assert_int_eq(ld_store_current_status(cache, &st), 0);
    }
    ck_assert(st.available);
    ck_assert(!st.needs_refresh);
    ck_assert_int_eq(version_in(cache, "a"), 3);
    ld_data_system_free(ds);
    ld_test_flush();
    ld_store_free(cache);
    unlink(path);
}
END_TEST

Suite *ld_suite_store_source(void)
{
    Suite *s = suite_create("store_source");
    TCase *tc = tcase_create("store_source");
    tcase_add_checked_fixture(tc, ss_setup, ss_teardown);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_follows_the_store);
    tcase_add_test(tc, test_waits_for_an_initialized_store);
    tcase_add_test(tc, test_store_failure_interrupts_then_recovers);
    tcase_add_test(tc, test_free_with_a_read_in_flight);
    tcase_add_test(tc, test_needs_refresh_sends_everything_again);
    tcase_add_test(tc, test_refresh_of_each_version);
    suite_add_tcase(s, tc);
    return s;
}
