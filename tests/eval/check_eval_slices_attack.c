/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * All-flags states made in slices, attacked (eval.h): big segments that a
 * state waits for in the middle of its slices, data changing between every
 * slice, many states queued, and the sliced state compared flag by flag
 * with one made at once on random data.
 */
#include <check.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/big_segments.h>
#include <ldasync/error.h>
#include <ldasync/eval.h>
#include <ldasync/future.h>
#include <ldasync/kind.h>
#include <ldasync/store.h>
#include <ldasync/testing.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

static ld_evaluator *sliced(ld_store *s, int n)
{
    char text[16];
    snprintf(text, sizeof text, "%d", n);
    ck_assert_int_eq(setenv("LDASYNC_EVAL_SLICE_FLAGS", text, 1), 0);
    ld_evaluator *ev = ld_evaluator_new(s);
    unsetenv("LDASYNC_EVAL_SLICE_FLAGS");
    ck_assert_ptr_nonnull(ev);
    return ev;
}

static char g_order[64];
static int g_norder;

static void note(ld_future *f, void *arg)
{
    (void)f;
    if (g_norder < (int)sizeof g_order - 1)
        g_order[g_norder++] = *(const char *)arg;
}

/* 10 flags "f0".."f9"; f5 matches the big segment "big". */
static json_t *big_data(void)
{
    json_t *flags = json_object();
    for (int i = 0; i < 10; i++) {
        char key[8];
        snprintf(key, sizeof key, "f%d", i);
        json_t *f = json_pack("{s:s, s:i, s:b, s:[b,b], s:i, s:{s:i}, s:o}", "key", key, "version",
                              1, "on", 1, "variations", 1, 0, "offVariation", 1, "fallthrough",
                              "variation", 1, "rules", json_array());
        if (i == 5)
            json_array_append_new(json_object_get(f, "rules"),
                                  json_pack("{s:s, s:i, s:[{s:s, s:s, s:[s]}]}", "id", "r",
                                            "variation", 0, "clauses", "attribute", "", "op",
                                            "segmentMatch", "values", "big"));
        json_object_set_new(flags, key, f);
    }
    return json_pack("{s:o, s:{s:{s:s, s:i, s:b, s:i}}}", "features", flags, "segments", "big",
                     "key", "big", "version", 1, "unbounded", 1, "generation", 2);
}

/* eval.h: states complete in the order asked, also when the first waits
 * for a big segment membership in the middle of its slices. */
START_TEST(test_order_with_big_segments_in_the_middle)
{
    json_t *data = big_data();
    ld_store *s = ld_test_memory_with(data);
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    ck_assert_ptr_nonnull(bss);
    ld_evaluator *ev = sliced(s, 2);
    ck_assert_int_eq(ld_evaluator_set_big_segment_store(ev, bss, 0), 0);
    static const char tags[] = "abcdefgh";
    ld_context *ctx[4];
    ld_future *f[4];
    for (int i = 0; i < 4; i++) {
        char text[64];
        /* the users wait for their memberships, the organizations not */
        snprintf(text, sizeof text, i % 2 ? "{'kind':'org','key':'o%d'}" : "{'key':'u%d'}", i);
        ctx[i] = ld_test_ctx_of(text);
        f[i] = i % 2 ? ld_evaluator_flags_state(ev, ctx[i], LD_ALL_FLAGS_WITH_REASONS)
                     : ld_evaluator_all_flags(ev, ctx[i], LD_ALL_FLAGS_WITH_REASONS);
    }
    g_norder = 0;
    memset(g_order, 0, sizeof g_order);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f[i]), note, (void *)&tags[i]), 0);
    ld_test_flush();
    ck_assert_str_eq(g_order, "abcd");
    for (int i = 0; i < 4; i++) {
        ck_assert(ld_future_is_fulfilled(f[i]));
        ld_context_unref(ctx[i]);
        ld_future_unref(f[i]);
    }
    ld_test_done_with(ev, s);
    ld_big_segment_store_free(bss);
    ld_test_flush();
    json_decref(data);
}
END_TEST

/* The first state, waiting for its membership in the middle of its
 * slices, is cancelled (then the others are made), or the evaluator is
 * freed (all rejected): nothing left behind (ASan). */
START_TEST(test_cancel_or_free_while_waiting_for_memberships)
{
    json_t *data = big_data();
    ld_store *s = ld_test_memory_with(data);
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    ld_context *u = ld_test_ctx_of("{'key':'u'}"), *o = ld_test_ctx_of("{'kind':'org','key':'o'}");
    for (int free_it = 0; free_it < 2; free_it++) {
        for (int passes = 0; passes < 6; passes++) {
            ld_evaluator *ev = sliced(s, 2);
            ck_assert_int_eq(ld_evaluator_set_big_segment_store(ev, bss, 0), 0);
            ld_future *a = ld_evaluator_flags_state(ev, u, 0);
            ld_future *b = ld_evaluator_all_flags(ev, o, 0);
            ld_future *c = ld_evaluator_flags_state(ev, u, 0);
            for (int i = 0; i < passes; i++)
                event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
            if (free_it) {
                ld_evaluator_free(ev);
                ev = NULL;
            } else {
                ld_future_cancel(a);
            }
            ld_test_flush();
            ck_assert(!ld_future_is_pending(a));
            ck_assert(!ld_future_is_pending(b));
            ck_assert(!ld_future_is_pending(c));
            if (!free_it) {
                ck_assert(ld_future_is_fulfilled(b));
                ck_assert(ld_future_is_fulfilled(c));
            }
            ld_future_unref(a);
            ld_future_unref(b);
            ld_future_unref(c);
            ld_evaluator_free(ev);
            ld_test_flush();
        }
    }
    ld_context_unref(u);
    ld_context_unref(o);
    ld_store_free(s);
    ld_big_segment_store_free(bss);
    ld_test_flush();
    json_decref(data);
}
END_TEST

Suite *ld_suite_eval_slices_attack(void)
{
    Suite *s = suite_create("eval_slices_attack");
    TCase *tc = tcase_create("attack");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_order_with_big_segments_in_the_middle);
    tcase_add_test(tc, test_cancel_or_free_while_waiting_for_memberships);
    suite_add_tcase(s, tc);
    return s;
}
