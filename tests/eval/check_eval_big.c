/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Large items compiled off the loop (eval.h): a flag or segment of more
 * values than the evaluator's bound is compiled on its worker; evaluations
 * that need it wait for that compile (one for all of them), and answer
 * what they answer when it is compiled on the loop: details, all-flags
 * states (also in slices), on a store that answers at once or later; the
 * evaluator freed, or a new version stored, while it compiles.
 *
 * The bound is 50,000 values; LDASYNC_EVAL_BIG_ITEM sets another, which
 * these tests set to 100 so that items of 200 keys are large.
 */
#include <check.h>
#include <event2/event.h>
#include <event2/thread.h>
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
#define N 200 /* values of a large item */

/* ["<prefix>0", ..., "<prefix>199"] */
static json_t *keys(const char *prefix)
{
    json_t *a = json_array();
    for (int i = 0; i < N; i++) {
        char k[32];
        snprintf(k, sizeof k, "%s%d", prefix, i);
        ck_assert_int_eq(json_array_append_new(a, json_string(k)), 0);
    }
    return a;
}

/* A flag of `version` serving true for the keys "<prefix>0".. through
 * `how`: "targets", a rule's "in" clause, or (NULL) a rule matching the
 * segment "bigseg". */
static json_t *big_flag(const char *key, int version, const char *how, const char *prefix)
{
    json_t *f = json_pack("{s:s, s:i, s:b, s:[b,b], s:i, s:{s:i}, s:s}", "key", key, "version",
                          version, "on", 1, "variations", 0, 1, "offVariation", 0, "fallthrough",
                          "variation", 0, "salt", "s");
    ck_assert_ptr_nonnull(f);
    json_t *part;
    if (how && strcmp(how, "targets") == 0)
        part = json_pack("[{s:o, s:i}]", "values", keys(prefix), "variation", 1);
    else if (how)
        part = json_pack("[{s:s, s:[{s:s, s:s, s:o}], s:i}]", "id", "r", "clauses", "attribute",
                         "key", "op", "in", "values", keys(prefix), "variation", 1);
    else
        part = json_pack("[{s:s, s:[{s:s, s:s, s:[s]}], s:i}]", "id", "r", "clauses", "attribute",
                         "", "op", "segmentMatch", "values", "bigseg", "variation", 1);
    ck_assert_ptr_nonnull(part);
    ck_assert_int_eq(
        json_object_set_new(f, how && !strcmp(how, "targets") ? "targets" : "rules", part), 0);
    return f;
}

/* Flags "t" (targets), "i" (an `in` clause), "s" (the segment "bigseg" of
 * included keys), "p" ("t" its prerequisite) and "small"; the keys are
 * "k0".."k199". */
static json_t *big_data(void)
{
    json_t *data = json_pack(
        "{s:{s:o, s:o, s:o, s:{s:s, s:i, s:b, s:[b], s:{s:i}}}, s:{s:{s:s, s:i, s:o, s:s}}}",
        "features", "t", big_flag("t", 1, "targets", "k"), "i", big_flag("i", 1, "in", "k"), "s",
        big_flag("s", 1, NULL, NULL), "small", "key", "small", "version", 1, "on", 1, "variations",
        1, "fallthrough", "variation", 0, "segments", "bigseg", "key", "bigseg", "version", 1,
        "included", keys("k"), "salt", "x");
    ck_assert_ptr_nonnull(data);
    /* "p": true when "t" serves true (a prerequisite), else false */
    json_t *p =
        json_pack("{s:s, s:i, s:b, s:[b,b], s:i, s:{s:i}, s:[{s:s, s:i}]}", "key", "p", "version",
                  1, "on", 1, "variations", 0, 1, "offVariation", 0, "fallthrough", "variation", 1,
                  "prerequisites", "key", "t", "variation", 1);
    ck_assert_int_eq(json_object_set_new(json_object_get(data, "features"), "p", p), 0);
    return data;
}

/* An evaluator whose bound is 100 values (`big`), or the default. */
static ld_evaluator *evaluator(ld_store *s, bool big)
{
    if (big)
        ck_assert_int_eq(setenv("LDASYNC_EVAL_BIG_ITEM", "100", 1), 0);
    ld_evaluator *ev = ld_evaluator_new(s);
    unsetenv("LDASYNC_EVAL_BIG_ITEM");
    ck_assert_ptr_nonnull(ev);
    return ev;
}

static struct ld_evaluator_stats stats(const ld_evaluator *ev)
{
    struct ld_evaluator_stats st;
    ck_assert_int_eq(ld_evaluator_stats(ev, &st), 0);
    return st;
}

/* The detail of `flag` for context key `key`, as JSON (a new reference). */
static json_t *detail_json(ld_future *f)
{
    ld_test_fulfilled(f);
    json_t *j = ld_detail_to_json(ld_future_ptr(f));
    ck_assert_ptr_nonnull(j);
    ld_future_unref(f);
    return j;
}

static void expect_same(json_t *got, json_t *want)
{
    char *g = json_dumps(got, JSON_SORT_KEYS), *w = json_dumps(want, JSON_SORT_KEYS);
    ck_assert_msg(json_equal(got, want), "%s, not %s", g, w);
    free(g);
    free(w);
    json_decref(got);
    json_decref(want);
}

static ld_future *detail(ld_evaluator *ev, const char *flag, ld_context *ctx)
{
    return ld_evaluator_detail(ev, flag, ctx, LD_VALUE_BOOL, json_false());
}

/* eval.h: a detail of each large item waits for its compile (which is
 * under way when the call returns) and is the detail of an evaluator that
 * compiles it on the loop; the item is then held, not compiled again. */
START_TEST(test_large_items_wait_for_their_compile)
{
    json_t *data = big_data();
    ld_store *s = ld_test_memory_with(data);
    ld_evaluator *ev = evaluator(s, true), *plain = evaluator(s, false);
    const char *flags[] = {"p", "t", "i", "s", "small"};
    const char *ctxs[] = {"{'key':'k150'}", "{'key':'nobody'}"};
    size_t off_loop = 0;
    for (int c = 0; c < 2; c++) {
        ld_context *ctx = ld_test_ctx_of(ctxs[c]);
        for (int i = 0; i < 5; i++) {
            ld_future *f = detail(ev, flags[i], ctx);
            bool large = c == 0 && i < 4 && i != 1; /* "p" waits for "t" */
            ck_assert_uint_eq(stats(ev).compiling, large ? 1 : 0);
            json_t *got = detail_json(f);
            off_loop += large; /* "s" is small: its segment is large */
            ck_assert_uint_eq(stats(ev).compiling, 0);
            ck_assert_uint_eq(stats(ev).compiled_off_loop, off_loop);
            expect_same(got, detail_json(detail(plain, flags[i], ctx)));
        }
        ld_context_unref(ctx);
    }
    ck_assert_uint_eq(stats(ev).flags, 5);
    ck_assert_uint_eq(stats(ev).segments, 1);
    ck_assert_uint_eq(stats(plain).compiled_off_loop, 0);
    ld_evaluator_free(plain);
    ld_test_done_with(ev, s);
    json_decref(data);
}
END_TEST

/* eval.h: evaluations that need an item being compiled share that compile. */
START_TEST(test_evaluations_share_one_compile)
{
    json_t *data = big_data();
    ld_store *s = ld_test_memory_with(data);
    ld_evaluator *ev = evaluator(s, true);
    ld_context *in = ld_test_ctx_of("{'key':'k7'}"), *out = ld_test_ctx_of("{'key':'x'}");
    ld_future *a = detail(ev, "t", in), *b = detail(ev, "t", out), *c = detail(ev, "t", in);
    ck_assert_uint_eq(stats(ev).compiling, 1);
    ck_assert(json_is_true(ld_detail_value(ld_future_ptr(ld_test_fulfilled(a)))));
    ck_assert(json_is_false(ld_detail_value(ld_future_ptr(ld_test_fulfilled(b)))));
    ck_assert(json_is_true(ld_detail_value(ld_future_ptr(ld_test_fulfilled(c)))));
    ck_assert_uint_eq(stats(ev).compiled_off_loop, 1);
    ld_future_unref(a);
    ld_future_unref(b);
    ld_future_unref(c);
    ld_context_unref(in);
    ld_context_unref(out);
    ld_test_done_with(ev, s);
    json_decref(data);
}
END_TEST

/* eval.h: all-flags states wait for the large flags and segments they
 * reach, whole or in slices (LDASYNC_EVAL_SLICE_FLAGS=1), as JSON and as
 * results, and are the states of an evaluator that compiles on the loop. */
START_TEST(test_states_wait_for_large_items)
{
    json_t *data = big_data();
    ld_store *s = ld_test_memory_with(data);
    ld_evaluator *plain = evaluator(s, false);
    ld_context *ctx = ld_test_ctx_of("{'key':'k3'}");
    ld_future *wf =
        ld_test_fulfilled(ld_evaluator_all_flags(plain, ctx, LD_ALL_FLAGS_WITH_REASONS));
    json_t *want = json_incref(ld_future_json(wf));
    ld_future_unref(wf);
    for (int sliced = 0; sliced < 2; sliced++) {
        for (int as_state = 0; as_state < 2; as_state++) {
            if (sliced)
                ck_assert_int_eq(setenv("LDASYNC_EVAL_SLICE_FLAGS", "1", 1), 0);
            ld_evaluator *ev = evaluator(s, true);
            unsetenv("LDASYNC_EVAL_SLICE_FLAGS");
            /* two at once: the second waits behind the first, or for the
             * same compiles */
            ld_future *f[2];
            for (int k = 0; k < 2; k++)
                f[k] = as_state ? ld_evaluator_flags_state(ev, ctx, LD_ALL_FLAGS_WITH_REASONS)
                                : ld_evaluator_all_flags(ev, ctx, LD_ALL_FLAGS_WITH_REASONS);
            for (int k = 0; k < 2; k++) {
                ld_test_fulfilled(f[k]);
                if (as_state) {
                    const ld_flags_state *st = ld_future_ptr(f[k]);
                    ck_assert_uint_eq(ld_flags_state_count(st), 5);
                    for (size_t i = 0; i < 5; i++) {
                        const char *key = ld_flags_state_key(st, i, NULL);
                        json_t *d = ld_detail_to_json(ld_flags_state_detail(st, i));
                        json_t *w = json_object_get(json_object_get(want, "$flagsState"), key);
                        ck_assert(
                            json_equal(json_object_get(d, "value"), json_object_get(want, key)));
                        ck_assert(
                            json_equal(json_object_get(d, "reason"), json_object_get(w, "reason")));
                        json_decref(d);
                    }
                } else {
                    expect_same(json_incref(ld_future_json(f[k])), json_incref(want));
                }
                ld_future_unref(f[k]);
            }
            ck_assert_uint_eq(stats(ev).compiled_off_loop, 3); /* t, i and bigseg */
            ld_evaluator_free(ev);
            ld_test_flush();
        }
    }
    json_decref(want);
    ld_context_unref(ctx);
    ld_test_done_with(plain, s);
    json_decref(data);
}
END_TEST

/* eval.h: on a store that answers later, a detail and a state wait for
 * the compiles of what came back. */
START_TEST(test_store_answering_later)
{
    json_t *data = big_data();
    ld_store *mem = ld_test_memory_with(data);
    ld_evaluator *plain = evaluator(mem, false);
    ld_store *s = ld_test_later_new(data, NULL);
    ld_evaluator *ev = evaluator(s, true);
    ld_context *ctx = ld_test_ctx_of("{'key':'k199'}");
    const char *flags[] = {"p", "t", "i", "s", "small"};
    for (int i = 0; i < 5; i++)
        expect_same(detail_json(detail(ev, flags[i], ctx)),
                    detail_json(detail(plain, flags[i], ctx)));
    ld_evaluator_free(ev);
    ev = evaluator(s, true); /* nothing compiled yet */
    ld_future *f = ld_test_fulfilled(ld_evaluator_all_flags(ev, ctx, 0));
    ld_future *w = ld_test_fulfilled(ld_evaluator_all_flags(plain, ctx, 0));
    expect_same(json_incref(ld_future_json(f)), json_incref(ld_future_json(w)));
    ld_future_unref(f);
    ld_future_unref(w);
    ld_context_unref(ctx);
    ld_evaluator_free(plain);
    ld_test_done_with(ev, s);
    ld_store_free(mem);
    ld_test_flush();
    json_decref(data);
}
END_TEST

/* eval.h: the evaluator freed while large items compile: the evaluations
 * waiting are rejected with LD_ECANCELED, nothing leaks (valgrind, ASan). */
START_TEST(test_free_while_compiling)
{
    json_t *data = big_data();
    ld_store *s = ld_test_memory_with(data);
    ld_context *ctx = ld_test_ctx_of("{'key':'k1'}");
    for (int sliced = 0; sliced < 2; sliced++) {
        if (sliced)
            ck_assert_int_eq(setenv("LDASYNC_EVAL_SLICE_FLAGS", "1", 1), 0);
        ld_evaluator *ev = evaluator(s, true);
        unsetenv("LDASYNC_EVAL_SLICE_FLAGS");
        ld_future *f[3] = {detail(ev, "t", ctx), ld_evaluator_all_flags(ev, ctx, 0),
                           ld_evaluator_flags_state(ev, ctx, 0)};
        ck_assert_uint_ge(stats(ev).compiling, 1);
        ld_evaluator_free(ev);
        for (int k = 0; k < 3; k++) {
            ld_test_done(f[k]);
            ck_assert_int_eq(ld_future_error(f[k]), LD_ECANCELED);
            ld_future_unref(f[k]);
        }
        ld_test_flush();
    }
    ld_context_unref(ctx);
    ld_store_free(s);
    ld_test_flush();
    json_decref(data);
}
END_TEST

/* eval.h: a new version stored while the old one compiles: the evaluation
 * issued before answers from the old version, the one issued after from
 * the new one. */
START_TEST(test_new_version_while_compiling)
{
    json_t *data = big_data();
    ld_store *s = ld_test_memory_with(data);
    ld_evaluator *ev = evaluator(s, true);
    ld_context *ctx = ld_test_ctx_of("{'key':'k5'}");
    ld_future *before = detail(ev, "t", ctx);
    json_t *v2 = big_flag("t", 2, "targets", "other"); /* k5 no longer targeted */
    ld_future *up = ld_store_upsert(s, ld_kind_features(), v2);
    json_decref(v2);
    ld_future *after = detail(ev, "t", ctx);
    ck_assert_uint_ge(stats(ev).compiling, 1);
    ck_assert(ld_test_await_bool(up));
    ck_assert(json_is_true(ld_detail_value(ld_future_ptr(ld_test_fulfilled(before)))));
    ck_assert(json_is_false(ld_detail_value(ld_future_ptr(ld_test_fulfilled(after)))));
    ld_future_unref(before);
    ld_future_unref(after);
    /* the old version, which no evaluation needs any more, is let go of */
    ld_future_unref(ld_test_fulfilled(detail(ev, "small", ctx)));
    ld_context_unref(ctx);
    ld_test_done_with(ev, s);
    json_decref(data);
}
END_TEST

/* The same tests with libevent threading on: the worker compiles on a
 * thread of its own (without threading, from a loop callback). */
static void threads_setup(void)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0); /* before event_base_new() */
    ld_test_setup();
}

static TCase *tests(const char *name, SFun setup)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, ld_test_teardown);
    tcase_add_test(tc, test_large_items_wait_for_their_compile);
    tcase_add_test(tc, test_evaluations_share_one_compile);
    tcase_add_test(tc, test_states_wait_for_large_items);
    tcase_add_test(tc, test_store_answering_later);
    tcase_add_test(tc, test_free_while_compiling);
    tcase_add_test(tc, test_new_version_while_compiling);
    return tc;
}

Suite *ld_suite_eval_big(void)
{
    Suite *s = suite_create("eval_big");
    suite_add_tcase(s, tests("on_loop", ld_test_setup));
    suite_add_tcase(s, tests("thread", threads_setup));
    return s;
}
