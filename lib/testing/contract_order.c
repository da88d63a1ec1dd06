/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the store contract's cases of ordering, re-entrancy,
 * close and free, and of when results complete (contract.c has the
 * harness).
 */
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/testing.h>

#define LD_TESTING_CONTRACT
#include "testing-internal.h"

/* Callbacks record, tests check. */
static int order[32], norder;

static void count_cb(ld_future *f, void *arg)
{
    (void)f;
    (*(int *)arg)++;
}

static void note_order(ld_future *f, void *arg)
{
    (void)f;
    if (norder < 32)
        order[norder] = (int)(intptr_t)arg;
    norder++;
}

/* ---- ordering and re-entrancy --------------------------------------------- */

START_TEST(results_complete_in_issue_order)
{
    begin(_i);
    json_t *foo11 = make_feature("foo", 11);
    json_t *data = json_pack("{s:{s:o}}", "features", "bar", make_feature("bar", 3));
    ld_future *fs[] = {
        ld_store_initialized(S),          /* 0: false */
        ld_store_init(S, data),           /* 1 */
        ld_store_upsert(S, F, foo11),     /* 2: true */
        read_get(F, "foo"),               /* 3: v11 */
        ld_store_upsert(S, F, foo11),     /* 4: false, equal */
        ld_store_delete(S, F, "foo", 12), /* 5: true */
        read_get(F, "foo"),               /* 6: NULL */
        read_all(F),                      /* 7: {bar} */
        ld_store_initialized(S),          /* 8: true */
    };
    enum { N = sizeof(fs) / sizeof(fs[0]) };
    norder = 0;
    for (intptr_t i = 0; i < N; i++) {
        ck_assert_msg(fs[i] != NULL, "operation %d returned NULL", (int)i);
        ck_assert_int_eq(ld_future_on_complete(ld_future_ref(fs[i]), note_order, (void *)i), 0);
    }
    ck_assert_msg(norder == 0, "a callback ran before the loop did");
    for (int i = 0; i < N; i++)
        fulfilled(fs[i], "an operation of the sequence");
    loop_until_idle();
    ck_assert_int_eq(norder, N);
    for (int i = 0; i < N; i++)
        ck_assert_msg(order[i] == i, "completion %d was operation %d", i, order[i]);
    ck_assert(!ld_future_bool(fs[0]));
    ck_assert(ld_future_bool(fs[2]));
    ck_assert_int_eq(ld_item_version(ld_future_json(fs[3])), 11);
    ck_assert(!ld_future_bool(fs[4]));
    ck_assert(ld_future_bool(fs[5]));
    ck_assert_ptr_null(ld_future_json(fs[6]));
    ck_assert_int_eq(json_object_size(ld_future_json(fs[7])), 1);
    ck_assert(ld_future_bool(fs[8]));
    for (int i = 0; i < N; i++)
        ld_future_unref(fs[i]);
    json_decref(foo11);
    json_decref(data);
}
END_TEST

/* Issued from inside a callback: the next operation's result. */
static struct nested {
    ld_future *inner;
    int inner_calls;
    int inner_calls_at_return; /* inner_calls when the outer callback returned */
} nested;

static void count_inner(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    nested.inner_calls++;
}

static void issue_from_callback(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    nested.inner = read_get(F, "foo");
    if (nested.inner)
        ld_future_on_complete(ld_future_ref(nested.inner), count_inner, NULL);
    nested.inner_calls_at_return = nested.inner_calls;
}

START_TEST(callbacks_never_run_inside_the_call)
{
    begin(_i);
    init_foo_bar();
    json_t *item = make_feature("foo", 11);
    json_t *data = json_pack("{s:{s:o}}", "features", "foo", make_feature("foo", 10));
    int calls = 0;
    ld_future *fs[] = {
        read_get(F, "foo"),          read_all(F),
        ld_store_upsert(S, F, item), ld_store_delete(S, F, "foo", 12),
        ld_store_initialized(S),     ld_store_init(S, data),
        read_get(NULL, "foo"), /* rejected by the front */
    };
    enum { N = sizeof(fs) / sizeof(fs[0]) };
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(ld_future_on_complete(ld_future_ref(fs[i]), count_cb, &calls), 0);
        ck_assert_msg(calls == 0, "callback %d ran inside on_complete", i);
    }
    for (int i = 0; i < N; i++)
        await(fs[i], "an operation");
    loop_until_idle();
    ck_assert_int_eq(calls, N);

    memset(&nested, 0, sizeof(nested));
    ld_future *outer = ld_store_initialized(S);
    ld_future_on_complete(ld_future_ref(outer), issue_from_callback, NULL);
    await(outer, "initialized");
    loop_until_idle();
    ck_assert_msg(nested.inner != NULL, "get issued from a callback returned NULL");
    ck_assert_msg(nested.inner_calls_at_return == 0,
                  "a callback ran inside the call that issued its operation");
    await(nested.inner, "get issued from a callback");
    loop_until_idle();
    ck_assert_int_eq(nested.inner_calls, 1);
    ck_assert_int_eq(ld_item_version(ld_future_json(nested.inner)), 10);
    ld_future_unref(nested.inner);
    ld_future_unref(outer);
    for (int i = 0; i < N; i++)
        ld_future_unref(fs[i]);
    json_decref(item);
    json_decref(data);
}
END_TEST

/* ---- close and free ----------------------------------------------------- */

START_TEST(operations_after_close_are_eclosed)
{
    begin(_i);
    init_foo_bar();
    ld_future *before = read_get(F, "foo");
    OK(ld_store_close(S));
    ld_future_unref(fulfilled(before, "get issued before close"));
    json_t *item = make_feature("foo", 11);
    json_t *data = json_object();
    EXPECT_ERROR(read_get(F, "foo"), LD_ECLOSED, NULL);
    EXPECT_ERROR(read_all(F), LD_ECLOSED, NULL);
    EXPECT_ERROR(ld_store_init(S, data), LD_ECLOSED, NULL);
    EXPECT_ERROR(ld_store_upsert(S, F, item), LD_ECLOSED, NULL);
    EXPECT_ERROR(ld_store_delete(S, F, "foo", 12), LD_ECLOSED, NULL);
    EXPECT_ERROR(ld_store_initialized(S), LD_ECLOSED, NULL);
    OK(ld_store_close(S)); /* closing again fulfils */
    json_decref(item);
    json_decref(data);
}
END_TEST

START_TEST(operations_issued_before_close_complete)
{
    begin(_i);
    init_foo_bar();
    json_t *item = make_feature("foo", 11);
    ld_future *up = ld_store_upsert(S, F, item);
    ld_future *get = read_get(F, "foo");
    ld_future *closed = ld_store_close(S);
    ck_assert_msg(BOOL(up), "upsert issued before close was not applied");
    ld_future_unref(fulfilled(closed, "close"));
    ck_assert_int_eq(ld_item_version(ld_future_json(fulfilled(get, "get before close"))), 11);
    ld_future_unref(get);
    json_decref(item);
}
END_TEST

/* Each future of the store completes exactly once: fulfilled, or rejected
 * with LD_ECANCELED if the store had not answered when it was freed. */
static void expect_done_or_canceled(ld_future **fs, int n, const int *calls)
{
    for (int i = 0; i < n; i++) {
        await(fs[i], "an operation in flight at free");
        ck_assert_msg(ld_future_is_fulfilled(fs[i]) || ld_future_error(fs[i]) == LD_ECANCELED,
                      "operation %d in flight at free: %s", i, ld_err_name(ld_future_error(fs[i])));
        ck_assert_msg(calls[i] == 1, "the callback of operation %d ran %d times", i, calls[i]);
        ld_future_unref(fs[i]);
    }
}

START_TEST(free_completes_operations_in_flight)
{
    begin(_i);
    json_t *item = make_feature("foo", 1);
    json_t *data = json_object();
    ld_future *fs[] = {ld_store_init(S, data),
                       ld_store_upsert(S, F, item),
                       read_get(F, "foo"),
                       read_all(F),
                       ld_store_delete(S, F, "foo", 2),
                       ld_store_initialized(S)};
    enum { N = sizeof(fs) / sizeof(fs[0]) };
    int calls[N] = {0};
    for (int i = 0; i < N; i++)
        ld_future_on_complete(ld_future_ref(fs[i]), count_cb, &calls[i]);
    ld_store_free(S);
    S = NULL;
    loop_until_idle();
    expect_done_or_canceled(fs, N, calls);
    json_decref(item);
    json_decref(data);
}
END_TEST

static void free_store_inside(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    ld_store_free(S);
    S = NULL;
}

START_TEST(free_from_inside_a_callback_of_the_store)
{
    begin(_i);
    ld_future *fs[] = {ld_store_initialized(S), read_get(F, "foo"), ld_store_initialized(S)};
    int calls[3] = {0};
    ck_assert_ptr_nonnull(fs[0]);
    ld_future_on_complete(ld_future_ref(fs[0]), free_store_inside, NULL);
    for (int i = 0; i < 3; i++)
        ld_future_on_complete(ld_future_ref(fs[i]), count_cb, &calls[i]);
    await(fs[0], "initialized");
    loop_until_idle();
    ck_assert_msg(S == NULL, "the callback that frees the store did not run");
    expect_done_or_canceled(fs, 3, calls);
}
END_TEST

/* ---- registration ---------------------------------------------------------- */

/* Every result is pending when the call returns and completes from the
 * loop (its state, not only its callbacks), each operation with a future of
 * its own. */
START_TEST(results_are_pending_when_returned)
{
    begin(_i);
    init_foo_bar();
    json_t *item = make_feature("foo", 11);
    json_t *data = json_pack("{s:{s:o}}", "features", "foo", make_feature("foo", 12));
    ld_future *fs[] = {
        read_get(F, "foo"),
        read_all(F),
        ld_store_upsert(S, F, item),
        ld_store_upsert(S, F, item),
        ld_store_delete(S, F, "bar", 11),
        ld_store_delete(S, F, "x", 1),
        ld_store_initialized(S),
        ld_store_init(S, data),
        read_get(F, ""), /* bad input */
        ld_store_close(S),
        read_get(F, "foo"), /* closed */
    };
    enum { N = sizeof(fs) / sizeof(fs[0]) };
    json_decref(item);
    json_decref(data);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(fs[i] != NULL, "operation %d returned NULL", i);
        ck_assert_msg(ld_future_is_pending(fs[i]), "operation %d was complete when returned", i);
        for (int j = 0; j < i; j++)
            ck_assert_msg(fs[i] != fs[j], "operations %d and %d share a future", j, i);
    }
    for (int i = 0; i < N; i++)
        ld_future_unref(await(fs[i], "an operation"));
}
END_TEST

static int waited_seen;

static void note_seen(ld_future *f, void *arg)
{
    (void)f;
    waited_seen |= (int)(intptr_t)arg;
}

/* Waiting for the third of three operations returns after the callbacks of
 * the first two have run: they completed first. */
START_TEST(waiting_for_the_third_runs_the_first_two_first)
{
    begin(_i);
    init_foo_bar();
    waited_seen = 0;
    json_t *item = make_feature("bar", 11);
    ck_assert_int_eq(ld_future_on_complete(read_get(F, "foo"), note_seen, (void *)1), 0);
    ck_assert_int_eq(ld_future_on_complete(ld_store_upsert(S, F, item), note_seen, (void *)2), 0);
    json_decref(item);
    ld_future *third = read_all(F);
    ck_assert_msg(ld_future_is_pending(third), "the third operation was complete when returned");
    ld_future_unref(await(third, "the third operation"));
    ck_assert_msg(waited_seen == 3, "the callbacks of the first two had not all run (%d)",
                  waited_seen);
}
END_TEST

START_TEST(read_only_view_is_the_store_s)
{
    begin(_i);
    ld_read_only_store *view = ld_store_read_only(S);
    ck_assert_msg(view != NULL, "ld_store_read_only returned NULL");
    ck_assert_msg(ld_store_read_only(S) == view, "a second view differs from the first");
    ck_assert_msg(ld_read_only_store_base(view) == B, "the view's base is not the store's");
    ck_assert_str_eq(ld_read_only_store_describe(view), ld_store_describe(S));
    ck_assert_ptr_null(ld_store_read_only(NULL));
    ck_assert_ptr_null(ld_read_only_store_get(NULL, F, "foo"));
    ck_assert_ptr_null(ld_read_only_store_all(NULL, F));
    ck_assert_ptr_null(ld_read_only_store_base(NULL));
    ck_assert_str_eq(ld_read_only_store_describe(NULL), "(null)");
    EXPECT_ERROR(ld_read_only_store_get(view, F, ""), LD_EINVAL, "key");
    EXPECT_ERROR(ld_read_only_store_all(view, NULL), LD_EINVAL, "kind");
    /* a write issued before a read through the view is seen by it */
    init_foo_bar();
    ld_future *w = ld_store_upsert(S, F, NULL); /* bad: answered by the front */
    json_t *item = make_feature("foo", 11);
    ld_future *u = ld_store_upsert(S, F, item);
    ld_future *g = ld_read_only_store_get(view, F, "foo");
    json_decref(item);
    ld_future_unref(await(w, "upsert of NULL"));
    ck_assert_msg(BOOL(u), "upsert foo v11 not applied");
    ld_future *got = fulfilled(g, "get through the view");
    ck_assert_int_eq(ld_item_version(ld_future_json(got)), 11);
    ld_future_unref(got);
}
END_TEST

/* Adds this file's cases, in order, as loop tests over [loop, loop + 1). */
void ld__contract_add_order(TCase *tc, int loop)
{
    const TTest *tests[] = {
        results_complete_in_issue_order,
        callbacks_never_run_inside_the_call,
        operations_after_close_are_eclosed,
        operations_issued_before_close_complete,
        free_completes_operations_in_flight,
        free_from_inside_a_callback_of_the_store,
        read_only_view_is_the_store_s,
        results_are_pending_when_returned,
        waiting_for_the_third_runs_the_first_two_first,
    };
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
        tcase_add_loop_test(tc, tests[i], loop, loop + 1);
}
