/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The memory store's large init (lib/store/memory_load.c), beyond what
 * check_store.c checks: the order in which what waited for it is answered,
 * an init issued while one loads, and a data set the caller still holds.
 * No timing is asserted: a pass is bounded by time and by
 * LDASYNC_STORE_INIT_SLICE, and only the count is checked here.
 */
#include <stdio.h>
#include <stdlib.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

/* A memory store whose init loads `slice` items per pass of the loop at
 * most. */
static ld_store *sliced(const char *slice)
{
    setenv("LDASYNC_STORE_INIT_SLICE", slice, 1);
    ld_store *st = ld_memory_store_new(B);
    unsetenv("LDASYNC_STORE_INIT_SLICE");
    ck_assert_ptr_nonnull(st);
    return st;
}

/* {"features": {n flags prefix-0 ... of `version`}, "segments": {s1}}. */
static json_t *flags(const char *prefix, int n, int version)
{
    json_t *features = json_object();
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s-%d", prefix, i);
        json_object_set_new(features, key, ld_test_feature(key, version));
    }
    return json_pack("{s:o, s:{s:{s:s, s:i}}}", "features", features, "segments", "s1", "key", "s1",
                     "version", 1);
}

/* The order callbacks ran in. */
static int order[16];
static int norder;

static void note(ld_future *f, void *arg)
{
    (void)f;
    if (norder < 16)
        order[norder++] = (int)(intptr_t)arg;
}

static ld_future *noted(ld_future *f, int i)
{
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f), note, (void *)(intptr_t)i), 0);
    return f;
}

static int passes_until(ld_future *f)
{
    int n = 0;
    while (ld_future_is_pending(f) && n < 100000) {
        event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        n++;
    }
    return n;
}

/* Everything issued during a large init, a second large init among it,
 * completes in issue order, each seeing the writes issued before it. */
START_TEST(test_what_waits_for_a_large_init_is_answered_in_issue_order)
{
    ld_store *st = sliced("64");
    norder = 0;
    json_t *a = flags("a", 500, 1), *b = flags("b", 300, 1);
    json_t *item = ld_test_feature("a-1", 2);
    ld_future *f[10];
    f[0] = noted(ld_store_init(st, a), 0);
    f[1] = noted(ld_store_get(st, ld_kind_features(), "a-1"), 1);
    f[2] = noted(ld_store_upsert(st, ld_kind_features(), item), 2);
    f[3] = noted(ld_store_get(st, ld_kind_features(), "a-1"), 3);
    f[4] = noted(ld_store_delete(st, ld_kind_features(), "a-2", 5), 4);
    f[5] = noted(ld_store_init(st, b), 5); /* the second large init */
    f[6] = noted(ld_store_get(st, ld_kind_features(), "a-1"), 6);
    f[7] = noted(ld_store_all(st, ld_kind_features()), 7);
    f[8] = noted(ld_store_initialized(st), 8);
    f[9] = noted(ld_store_get(st, ld_kind_segments(), "s1"), 9);
    json_decref(a);
    json_decref(b);
    json_decref(item);
    ck_assert_int_eq(ld_store_initialized_now(st), LD_EBUSY);
    ck_assert_int_gt(passes_until(f[9]), 500 / 64);
    ld_test_flush();
    ck_assert_int_eq(norder, 10);
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(order[i], i);
        ck_assert_msg(ld_future_is_fulfilled(f[i]), "%d: %s", i, ld_future_error_message(f[i]));
    }
    ck_assert_int_eq(ld_item_version(ld_future_json(f[1])), 1);
    ck_assert_int_eq(ld_item_version(ld_future_json(f[3])), 2);
    ck_assert(ld_future_bool(f[4]));
    ck_assert_ptr_null(ld_future_json(f[6])); /* the second init replaced it */
    ck_assert_int_eq(json_object_size(ld_future_json(f[7])), 300);
    ck_assert(ld_future_bool(f[8]));
    ck_assert_ptr_nonnull(ld_future_json(f[9]));
    for (int i = 0; i < 10; i++)
        ld_future_unref(f[i]);
    ld_store_free(st);
}
END_TEST

/* The caller keeps the data set: the store lets go of its reference only,
 * and the data is unchanged. */
START_TEST(test_a_large_init_leaves_a_data_set_the_caller_holds_as_it_was)
{
    ld_store *st = sliced("50");
    json_t *data = flags("c", 400, 1);
    json_t *copy = json_deep_copy(data);
    ld_test_await_ok(ld_store_init(st, data));
    for (int i = 0; i < 50; i++)
        event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ck_assert(json_equal(data, copy));
    json_decref(copy);
    json_decref(data);
    ld_future *all = ld_test_fulfilled(ld_store_all(st, ld_kind_features()));
    ck_assert_int_eq(json_object_size(ld_future_json(all)), 400);
    ld_future_unref(all);
    ld_store_free(st);
}
END_TEST

/* Freed while the data set of a finished init is still being let go of,
 * and while a failed one's tables are: nothing leaks (ASan, valgrind). */
START_TEST(test_a_store_freed_while_it_lets_go_of_a_large_init)
{
    ld_store *st = sliced("40");
    json_t *data = flags("d", 400, 1);
    ld_test_await_ok(ld_store_init(st, data)); /* the store holds the only reference */
    json_decref(data);
    json_t *bad = flags("e", 400, 1);
    json_object_del(json_object_get(json_object_get(bad, "features"), "e-399"), "version");
    ld_test_expect_error(ld_store_init(st, bad), LD_EINVAL, "version");
    json_decref(bad);
    ld_future *got = ld_test_fulfilled(ld_store_get(st, ld_kind_features(), "d-7"));
    ck_assert_ptr_nonnull(ld_future_json(got));
    ld_future_unref(got);
    event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ld_store_free(st);
}
END_TEST

/* Namespaces other than the store's kinds are validated and not kept;
 * empty ones are skipped. */
START_TEST(test_a_large_init_skips_other_and_empty_namespaces)
{
    ld_store *st = sliced("10");
    json_t *data = flags("f", 100, 1);
    json_object_set_new(data, "other", json_pack("{s:{s:s, s:i}}", "o", "key", "o", "version", 1));
    json_object_set_new(data, "empty", json_object());
    ld_test_await_ok(ld_store_init(st, data));
    json_object_set_new(json_object_get(data, "other"), "bad", json_pack("{s:s}", "key", "bad"));
    ld_test_expect_error(ld_store_init(st, data), LD_EINVAL, "version");
    json_decref(data);
    ld_future *all = ld_test_fulfilled(ld_store_all(st, ld_kind_features()));
    ck_assert_int_eq(json_object_size(ld_future_json(all)), 100);
    ld_future_unref(all);
    ld_store_free(st);
}
END_TEST

Suite *ld_suite_memory_load(void)
{
    Suite *s = suite_create("memory_load");
    TCase *tc = tcase_create("large_init");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_what_waits_for_a_large_init_is_answered_in_issue_order);
    tcase_add_test(tc, test_a_large_init_leaves_a_data_set_the_caller_holds_as_it_was);
    tcase_add_test(tc, test_a_store_freed_while_it_lets_go_of_a_large_init);
    tcase_add_test(tc, test_a_large_init_skips_other_and_empty_namespaces);
    suite_add_tcase(s, tc);
    return s;
}
