/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * All-flags states made in slices (eval.h): a state of more flags than one
 * slice evaluates is made over several passes of the loop, of the data as
 * it was when asked, one state after the other in the order asked; what
 * it makes is what a state made at once makes; a cancelled state stops;
 * freeing the evaluator with states in slices rejects them.
 *
 * The slices are bounded by time (eval.h); LDASYNC_EVAL_SLICE_FLAGS bounds
 * them by a number of flags too, which these tests set so that a handful
 * of flags needs several slices whatever the machine's speed.
 */
#include <check.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/error.h>
#include <ldasync/eval.h>
#include <ldasync/future.h>
#include <ldasync/kind.h>
#include <ldasync/store.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base
#define NFLAGS 10

/* NFLAGS flags "f0".."f9" of several shapes: off, targeted, a rule on
 * "country", a rollout; f3 not client-side. */
static json_t *flags_data(int version_of_last)
{
    json_t *flags = json_object();
    for (int i = 0; i < NFLAGS; i++) {
        char key[8];
        snprintf(key, sizeof key, "f%d", i);
        json_t *f =
            json_pack("{s:s, s:i, s:b, s:[s,s,s], s:i, s:{s:i}, s:[{s:[s], s:i}], s:b,"
                      " s:[{s:s, s:i, s:[{s:s, s:s, s:[s]}]}]}",
                      "key", key, "version", i == NFLAGS - 1 ? version_of_last : 1, "on", i != 1,
                      "variations", "a", "b", "c", "offVariation", 0, "fallthrough", "variation",
                      i == NFLAGS - 1 && version_of_last > 1 ? 2 : 1, "targets", "values", "u",
                      "variation", i % 3, "clientSide", i != 3, "rules", "id", "r", "variation", 2,
                      "clauses", "attribute", "country", "op", "in", "values", "fr");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(json_object_set_new(flags, key, f), 0);
    }
    json_t *data = json_pack("{s:o, s:{}}", "features", flags, "segments");
    ck_assert_ptr_nonnull(data);
    return data;
}

/* An evaluator whose slices evaluate `n` flags at most (0: no bound but
 * time). */
static ld_evaluator *evaluator_sliced(ld_store *s, int n)
{
    char text[16];
    snprintf(text, sizeof text, "%d", n);
    if (n > 0)
        ck_assert_int_eq(setenv("LDASYNC_EVAL_SLICE_FLAGS", text, 1), 0);
    ld_evaluator *ev = ld_evaluator_new(s);
    unsetenv("LDASYNC_EVAL_SLICE_FLAGS");
    ck_assert_ptr_nonnull(ev);
    return ev;
}

/* One pass of the loop. */
static void one_pass(void)
{
    event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

/* Passes of the loop until `f` completes (at most 1000). @return how many. */
static int passes_until_done(ld_future *f)
{
    int n = 0;
    while (ld_future_is_pending(f) && n < 1000) {
        one_pass();
        n++;
    }
    ck_assert(!ld_future_is_pending(f));
    return n;
}

static ld_context *user(void)
{
    return ld_test_ctx_of("{'key':'u','country':'fr'}");
}

static void expect_same_json(const json_t *got, const json_t *want)
{
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_SORT_KEYS), *w = json_dumps(want, JSON_SORT_KEYS);
        ck_abort_msg("the sliced state is %s, not %s", g, w);
    }
}

/* eval.h: a state of more flags than a slice evaluates is pending after
 * the call and after each pass but the last, and is the state made at
 * once: for each set of options, as JSON and as results. */
START_TEST(test_sliced_state_is_the_whole_state)
{
    json_t *data = flags_data(1);
    ld_store *s = ld_test_memory_with(data);
    ld_evaluator *whole = evaluator_sliced(s, 0), *sliced = evaluator_sliced(s, 3);
    ld_context *ctx = user();
    for (unsigned options = 0; options < 8; options++) {
        ld_future *w = ld_test_fulfilled(ld_evaluator_all_flags(whole, ctx, options));
        ld_future *f = ld_evaluator_all_flags(sliced, ctx, options);
        ck_assert(ld_future_is_pending(f));
        /* 10 flags, 3 a slice: one slice in the call, three in passes */
        ck_assert_int_eq(passes_until_done(f), 3);
        ck_assert(ld_future_is_fulfilled(f));
        expect_same_json(ld_future_json(f), ld_future_json(w));
        ld_future_unref(f);

        ld_future *st = ld_evaluator_flags_state(sliced, ctx, options);
        ck_assert(ld_future_is_pending(st));
        ck_assert_int_eq(passes_until_done(st), 3);
        const ld_flags_state *state = ld_future_ptr(st);
        ck_assert(ld_flags_state_valid(state));
        size_t n = ld_flags_state_count(state);
        ck_assert_uint_eq(n, options & LD_ALL_FLAGS_CLIENT_SIDE_ONLY ? NFLAGS - 1 : NFLAGS);
        for (size_t i = 0; i < n; i++) {
            const char *key = ld_flags_state_key(state, i, NULL);
            const json_t *v = json_object_get(ld_future_json(w), key);
            ck_assert_msg(v && json_equal(ld_detail_value(ld_flags_state_detail(state, i)), v),
                          "flag %s", key);
        }
        ld_future_unref(st);
        ld_future_unref(w);
    }
    ld_context_unref(ctx);
    ld_evaluator_free(whole);
    ld_test_done_with(sliced, s);
    json_decref(data);
}
END_TEST

static char g_order[16];
static int g_norder;

static void note(ld_future *f, void *arg)
{
    (void)f;
    if (g_norder < (int)sizeof g_order - 1)
        g_order[g_norder++] = *(const char *)arg;
}

/* eval.h: states are made one after the other, in the order asked; an
 * evaluation of one flag asked meanwhile is not held behind them. */
START_TEST(test_sliced_states_complete_in_the_order_asked)
{
    json_t *data = flags_data(1);
    ld_store *s = ld_test_memory_with(data);
    ld_evaluator *ev = evaluator_sliced(s, 4);
    ld_context *ctx = user();
    static const char tags[] = "abcd";
    ld_future *f[4];
    f[0] = ld_evaluator_all_flags(ev, ctx, 0);
    f[1] = ld_evaluator_flags_state(ev, ctx, LD_ALL_FLAGS_WITH_REASONS);
    f[2] = ld_evaluator_detail(ev, "f2", ctx, LD_VALUE_ANY, NULL);
    f[3] = ld_evaluator_all_flags(ev, ctx, LD_ALL_FLAGS_CLIENT_SIDE_ONLY);
    g_norder = 0;
    memset(g_order, 0, sizeof g_order);
    for (int i = 0; i < 4; i++) {
        ck_assert(ld_future_is_pending(f[i]));
        ck_assert_int_eq(ld_future_on_complete(f[i], note, (void *)&tags[i]), 0);
    }
    ld_test_flush();
    ck_assert_str_eq(g_order, "cabd");
    ld_context_unref(ctx);
    ld_test_done_with(ev, s);
    json_decref(data);
}
END_TEST

/* eval.h: a state is of the data as it was when asked, however many
 * passes it takes; one asked after a change has the change. */
START_TEST(test_sliced_state_is_of_the_data_when_asked)
{
    json_t *data = flags_data(1);
    ld_store *s = ld_test_memory_with(data);
    ld_evaluator *ev = evaluator_sliced(s, 2);
    ld_context *ctx = ld_test_ctx_of("{'key':'other'}");
    ld_future *before = ld_evaluator_all_flags(ev, ctx, 0);
    one_pass();
    ck_assert(ld_future_is_pending(before));
    json_t *next = flags_data(2);
    json_t *f9 = json_object_get(json_object_get(next, "features"), "f9");
    ld_test_await_ok(ld_store_upsert(s, ld_kind_features(), f9));
    ld_future *after = ld_evaluator_all_flags(ev, ctx, 0);
    ld_test_wait(before);
    ld_test_wait(after);
    ck_assert_str_eq(json_string_value(json_object_get(ld_future_json(before), "f9")), "b");
    ck_assert_str_eq(json_string_value(json_object_get(ld_future_json(after), "f9")), "c");
    json_t *meta = json_object_get(ld_future_json(after), "$flagsState");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(meta, "f9"), "variation")),
                     2);
    ld_future_unref(before);
    ld_future_unref(after);
    json_decref(next);
    ld_context_unref(ctx);
    ld_test_done_with(ev, s);
    json_decref(data);
}
END_TEST

/* eval.h: a state cancelled while it is made in slices runs no more of
 * them (each flag is compiled when a state first reaches it: the
 * evaluator compiled only the flags reached). */
START_TEST(test_cancelled_sliced_state_stops)
{
    json_t *data = flags_data(1);
    ld_store *s = ld_test_memory_with(data);
    ld_evaluator *ev = evaluator_sliced(s, 1);
    ld_context *ctx = user();
    ld_future *f = ld_evaluator_flags_state(ev, ctx, 0);
    one_pass();
    ck_assert(ld_future_is_pending(f));
    ck_assert_int_eq(ld_future_cancel(f), 0);
    ld_test_flush();
    struct ld_evaluator_stats st;
    ck_assert_int_eq(ld_evaluator_stats(ev, &st), 0);
    ck_assert_uint_le(st.flags, 3);
    ck_assert_uint_ge(st.flags, 1);
    /* the next state is made whole */
    ld_future *g = ld_test_fulfilled(ld_evaluator_flags_state(ev, ctx, 0));
    ck_assert_uint_eq(ld_flags_state_count(ld_future_ptr(g)), NFLAGS);
    ck_assert_int_eq(ld_evaluator_stats(ev, &st), 0);
    ck_assert_uint_eq(st.flags, NFLAGS);
    ld_future_unref(g);
    ld_future_unref(f);
    ld_context_unref(ctx);
    ld_test_done_with(ev, s);
    json_decref(data);
}
END_TEST

/* eval.h: freeing the evaluator rejects the states still in slices (the
 * one being made and those after it) with LD_ECANCELED. */
START_TEST(test_free_with_states_in_slices)
{
    json_t *data = flags_data(1);
    ld_store *s = ld_test_memory_with(data);
    ld_context *ctx = user();
    for (int passes = 0; passes < 3; passes++) {
        ld_evaluator *ev = evaluator_sliced(s, 2);
        ld_future *a = ld_evaluator_all_flags(ev, ctx, 0);
        ld_future *b = ld_evaluator_flags_state(ev, ctx, 0);
        for (int i = 0; i < passes; i++)
            one_pass();
        ld_evaluator_free(ev);
        ld_test_expect_error(a, LD_ECANCELED, NULL);
        ld_test_expect_error(b, LD_ECANCELED, NULL);
    }
    ld_context_unref(ctx);
    ld_test_flush();
    ld_store_free(s);
    ld_test_flush();
    json_decref(data);
}
END_TEST

static ld_evaluator *g_ev;

static void free_evaluator(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    ld_evaluator_free(g_ev);
    g_ev = NULL;
}

/* Freed from the callback of the first state, with the second in slices
 * and a third waiting: both rejected, nothing left behind (ASan). */
START_TEST(test_free_from_a_state_callback)
{
    json_t *data = flags_data(1);
    ld_store *s = ld_test_memory_with(data);
    ld_context *ctx = user();
    g_ev = evaluator_sliced(s, 3);
    ld_future *a = ld_evaluator_all_flags(g_ev, ctx, 0);
    ld_future *b = ld_evaluator_all_flags(g_ev, ctx, 0);
    ld_future *c = ld_evaluator_flags_state(g_ev, ctx, 0);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(a), free_evaluator, NULL), 0);
    ld_test_wait(a);
    ck_assert(ld_future_is_fulfilled(a));
    ld_test_expect_error(b, LD_ECANCELED, NULL);
    ld_test_expect_error(c, LD_ECANCELED, NULL);
    ck_assert_ptr_null(g_ev);
    ld_future_unref(a);
    ld_context_unref(ctx);
    ld_test_flush();
    ld_store_free(s);
    ld_test_flush();
    json_decref(data);
}
END_TEST

/* A store that was never initialized, or that answers later, under
 * slices: the invalid state at once; the whole state once read. */
START_TEST(test_sliced_state_on_an_uninitialized_store)
{
    ld_store *s = ld_memory_store_new(B);
    ck_assert_ptr_nonnull(s);
    ld_evaluator *ev = evaluator_sliced(s, 1);
    ld_context *ctx = user();
    ld_future *f = ld_test_fulfilled(ld_evaluator_all_flags(ev, ctx, 0));
    ck_assert(json_is_false(json_object_get(ld_future_json(f), "$valid")));
    ld_future_unref(f);
    ld_context_unref(ctx);
    ld_test_done_with(ev, s);
}
END_TEST

Suite *ld_suite_eval_slices(void)
{
    Suite *s = suite_create("eval_slices");
    TCase *tc = tcase_create("slices");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_sliced_state_is_the_whole_state);
    tcase_add_test(tc, test_sliced_states_complete_in_the_order_asked);
    tcase_add_test(tc, test_sliced_state_is_of_the_data_when_asked);
    tcase_add_test(tc, test_cancelled_sliced_state_stops);
    tcase_add_test(tc, test_free_with_states_in_slices);
    tcase_add_test(tc, test_free_from_a_state_callback);
    tcase_add_test(tc, test_sliced_state_on_an_uninitialized_store);
    suite_add_tcase(s, tc);
    return s;
}
