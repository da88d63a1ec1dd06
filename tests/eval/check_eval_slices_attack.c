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

/* A big segment store that answers only when told: membership reads wait
 * in `held` (up to 8). */
struct held_bss {
    ld_future *held[8];
    int n;
};

static void held_metadata(void *impl, ld_future *out)
{
    (void)impl;
    ld_future_fulfill_int(out, LD_BIG_SEGMENT_TIME_UNKNOWN);
    ld_future_unref(out);
}

static void held_membership(void *impl, const char *hash, ld_future *out)
{
    (void)hash;
    struct held_bss *h = impl;
    ck_assert_int_lt(h->n, 8);
    h->held[h->n++] = out;
}

static void held_release(struct held_bss *h)
{
    for (int i = 0; i < h->n; i++) {
        ld_future_fulfill_json(h->held[i], NULL);
        ld_future_unref(h->held[i]);
    }
    h->n = 0;
}

static const struct ld_big_segment_store_ops held_ops = {
    .version = LD_BIG_SEGMENT_STORE_OPS_VERSION,
    .get_metadata = held_metadata,
    .get_membership = held_membership,
};

/* eval.h: a state that waits for memberships holds back the states asked
 * after it; once it is cancelled, a state asked afterwards is made without
 * waiting for the memberships the cancelled one asked for. */
START_TEST(test_a_cancelled_state_that_waits_holds_back_no_later_state)
{
    json_t *data = big_data();
    ld_store *s = ld_test_memory_with(data);
    struct held_bss h = {0};
    ld_big_segment_store *bss = ld_big_segment_store_new(B, &held_ops, &h);
    ck_assert_ptr_nonnull(bss);
    ld_context *u = ld_test_ctx_of("{'key':'u'}"), *o = ld_test_ctx_of("{'kind':'org','key':'o'}");
    ld_evaluator *ev = sliced(s, 2);
    ck_assert_int_eq(ld_evaluator_set_big_segment_store(ev, bss, 0), 0);
    ld_future *a = ld_evaluator_flags_state(ev, u, 0);
    while (h.n == 0) /* until a waits for its membership */
        event_base_loop(B, EVLOOP_ONCE);
    ld_future *b = ld_evaluator_all_flags(ev, o, 0);
    for (int i = 0; i < 20; i++)
        event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ck_assert(ld_future_is_pending(b)); /* held back by a */
    ck_assert_int_eq(ld_future_cancel(a), 0);
    ld_future *c = ld_evaluator_flags_state(ev, o, 0);
    for (int i = 0; i < 200 && (ld_future_is_pending(b) || ld_future_is_pending(c)); i++)
        event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ck_assert_msg(ld_future_is_fulfilled(b) && ld_future_is_fulfilled(c),
                  "the states asked after a cancelled one still wait for its memberships");
    ck_assert_int_eq(h.n, 1); /* a's read is still out */
    held_release(&h);
    ld_test_flush();
    ck_assert_int_eq(ld_future_error(a), LD_ECANCELED);
    ld_future_unref(a);
    ld_future_unref(b);
    ld_future_unref(c);
    ld_test_done_with(ev, s);
    ld_big_segment_store_free(bss);
    ld_test_flush();
    ld_context_unref(u);
    ld_context_unref(o);
    json_decref(data);
}
END_TEST

/* Random data: NF flags of rules on "a", segments, targets and
 * prerequisites on flags before them; `gen` changes the values. */
#define NF 150
#define NS 8
static unsigned g_seed;
static int rnd(int n)
{
    g_seed = g_seed * 1103515245u + 12345u;
    return (int)((g_seed >> 8) % (unsigned)n);
}

static json_t *random_flag(int i, int version)
{
    char key[16];
    snprintf(key, sizeof key, "f%d", i);
    json_t *rules = json_array(), *prereqs = json_array();
    for (int r = rnd(4); r > 0; r--) {
        char v[8], seg[8];
        snprintf(v, sizeof v, "v%d", rnd(5));
        snprintf(seg, sizeof seg, "s%d", rnd(NS + 1)); /* s8 does not exist */
        json_array_append_new(
            rules,
            rnd(2) ? json_pack("{s:s, s:i, s:[{s:s, s:s, s:[s], s:b}]}", "id", "r", "variation",
                               rnd(3), "clauses", "attribute", "a", "op", "in", "values", v,
                               "negate", rnd(4) == 0)
                   : json_pack("{s:s, s:i, s:[{s:s, s:s, s:[s]}]}", "id", "q", "variation", rnd(3),
                               "clauses", "attribute", "", "op", "segmentMatch", "values", seg));
    }
    if (i > 0 && rnd(3) == 0) {
        char p[16];
        snprintf(p, sizeof p, "f%d", rnd(i));
        json_array_append_new(prereqs, json_pack("{s:s, s:i}", "key", p, "variation", rnd(3)));
    }
    return json_pack("{s:s, s:i, s:b, s:[i,i,i], s:i, s:{s:i}, s:o, s:o, s:[{s:[s], s:i}], s:b, "
                     "s:b}",
                     "key", key, "version", version, "on", rnd(5) != 0, "variations", rnd(9),
                     rnd(9), rnd(9), "offVariation", rnd(3), "fallthrough", "variation", rnd(3),
                     "rules", rules, "prerequisites", prereqs, "targets", "values", "u3",
                     "variation", rnd(3), "clientSide", rnd(2), "trackEvents", rnd(2));
}

static json_t *random_segment(int i, int version)
{
    char key[8], u[8];
    snprintf(key, sizeof key, "s%d", i);
    snprintf(u, sizeof u, "u%d", rnd(6));
    return json_pack("{s:s, s:i, s:[s], s:[{s:[{s:s, s:s, s:[s]}]}]}", "key", key, "version",
                     version, "included", u, "rules", "clauses", "attribute", "a", "op", "in",
                     "values", rnd(2) ? "v1" : "v2");
}

static json_t *random_data(int version)
{
    json_t *flags = json_object(), *segs = json_object();
    for (int i = 0; i < NF; i++) {
        char key[16];
        snprintf(key, sizeof key, "f%d", i);
        json_object_set_new(flags, key, random_flag(i, version));
    }
    for (int i = 0; i < NS; i++) {
        char key[8];
        snprintf(key, sizeof key, "s%d", i);
        json_object_set_new(segs, key, random_segment(i, version));
    }
    return json_pack("{s:o, s:o}", "features", flags, "segments", segs);
}

/* One change to the store: an upsert of a flag or a segment (a new
 * version), a delete of one, or (rarely) a whole new data set. */
static void churn(ld_store *s, int *version)
{
    ++*version;
    int what = rnd(10);
    if (what == 0) {
        json_t *d = random_data(*version);
        ld_test_await_ok(ld_store_init(s, d));
        json_decref(d);
    } else if (what < 5) {
        json_t *f = random_flag(rnd(NF), *version);
        ld_test_await_ok(ld_store_upsert(s, ld_kind_features(), f));
        json_decref(f);
    } else if (what < 7) {
        json_t *g = random_segment(rnd(NS), *version);
        ld_test_await_ok(ld_store_upsert(s, ld_kind_segments(), g));
        json_decref(g);
    } else {
        char key[16];
        bool seg = what == 7;
        snprintf(key, sizeof key, seg ? "s%d" : "f%d", rnd(seg ? NS : NF));
        ld_test_await_ok(
            ld_store_delete(s, seg ? ld_kind_segments() : ld_kind_features(), key, *version));
    }
}

/* Compares results state `st` flag by flag with JSON state `js`. */
static void expect_results_like_json(const ld_flags_state *st, const json_t *js)
{
    const json_t *meta = json_object_get(js, "$flagsState");
    ck_assert_uint_eq(ld_flags_state_count(st), json_object_size(meta));
    for (size_t i = 0; i < ld_flags_state_count(st); i++) {
        const char *key = ld_flags_state_key(st, i, NULL);
        const json_t *m = json_object_get(meta, key);
        ck_assert_msg(m != NULL, "%s not in the JSON state", key);
        const ld_detail *d = ld_flags_state_detail(st, i);
        if (ld_flags_state_fields(st, i) & LD_FLAG_STATE_VERSION)
            ck_assert_int_eq(ld_flags_state_version(st, i),
                             json_integer_value(json_object_get(m, "version")));
        else
            ck_assert_ptr_null(json_object_get(m, "version"));
        json_t *v = json_object_get(m, "variation");
        ck_assert_int_eq(ld_detail_variation_index(d), v ? (int)json_integer_value(v) : -1);
        json_t *dv = ld_detail_value(d);
        json_t *jv = json_object_get(js, key);
        ck_assert_msg(dv ? json_equal(dv, jv) : json_is_null(jv), "%s: values differ", key);
    }
}

/* eval.h: a state made in slices, with the data changing between every
 * slice (upserts, deletes, a whole new data set), is the state of the data
 * when asked, as one made at once; its results are its JSON, flag by flag. */
START_TEST(test_random_data_changing_between_slices)
{
    g_seed = 12345;
    int version = 1;
    json_t *data = random_data(version);
    ld_store *s = ld_test_memory_with(data);
    ld_evaluator *whole = ld_evaluator_new(s), *sl = sliced(s, 3);
    ld_evaluator *sl2 = sliced(s, 1);
    for (int round = 0; round < 30; round++) {
        char text[64];
        snprintf(text, sizeof text, "{'key':'u%d','a':'v%d'}", rnd(6), rnd(5));
        ld_context *ctx = ld_test_ctx_of(text);
        unsigned options = (unsigned)rnd(8);
        ld_future *w = ld_evaluator_all_flags(whole, ctx, options);
        ld_test_wait(w);
        ck_assert(ld_future_is_fulfilled(w));
        ld_future *a = ld_evaluator_all_flags(sl, ctx, options);
        ld_future *b = ld_evaluator_flags_state(sl2, ctx, options);
        ld_future *c = ld_evaluator_flags_state(sl, ctx, options);
        int passes = 0;
        while ((ld_future_is_pending(a) || ld_future_is_pending(b) || ld_future_is_pending(c)) &&
               passes < 1000) {
            churn(s, &version);
            passes++;
        }
        ck_assert(ld_future_is_fulfilled(a));
        ck_assert(ld_future_is_fulfilled(b));
        ck_assert(ld_future_is_fulfilled(c));
        if (!json_equal(ld_future_json(a), ld_future_json(w))) {
            char *g = json_dumps(ld_future_json(a), JSON_SORT_KEYS | JSON_COMPACT);
            char *x = json_dumps(ld_future_json(w), JSON_SORT_KEYS | JSON_COMPACT);
            ck_abort_msg("round %d: sliced %s\n whole %s", round, g, x);
        }
        expect_results_like_json(ld_future_ptr(b), ld_future_json(w));
        expect_results_like_json(ld_future_ptr(c), ld_future_json(w));
        ld_future_unref(a);
        ld_future_unref(b);
        ld_future_unref(c);
        ld_future_unref(w);
        ld_context_unref(ctx);
    }
    ld_evaluator_free(sl);
    ld_evaluator_free(sl2);
    ld_test_done_with(whole, s);
    json_decref(data);
}
END_TEST

/* 1,000 states queued at once, every other one cancelled while queued:
 * the others complete in the order asked and are whole; what the
 * evaluator holds afterwards is what one state leaves (its compiled
 * flags). */
START_TEST(test_a_thousand_states_queued)
{
    g_seed = 777;
    json_t *data = random_data(1);
    ld_store *s = ld_test_memory_with(data);
    ld_evaluator *ev = sliced(s, 16), *whole = ld_evaluator_new(s);
    ld_context *ctx = ld_test_ctx_of("{'key':'u1','a':'v1'}");
    ld_future *w = ld_evaluator_flags_state(whole, ctx, 0);
    ld_test_wait(w);
    enum { N = 1000 };
    static ld_future *f[N];
    static char tag[N];
    for (int i = 0; i < N; i++)
        f[i] = ld_evaluator_flags_state(ev, ctx, 0);
    g_norder = 0;
    memset(g_order, 0, sizeof g_order);
    for (int i = 0; i < N; i++) {
        if (i % 2)
            ck_assert_int_eq(ld_future_cancel(f[i]), 0);
        else if (i < 60) /* the first ones' order */
            tag[i] = (char)('A' + i / 2), ld_future_on_complete(ld_future_ref(f[i]), note, &tag[i]);
    }
    ld_test_flush();
    ck_assert_str_eq(g_order, "ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^");
    for (int i = 0; i < N; i++) {
        if (i % 2) {
            ck_assert(ld_future_is_rejected(f[i]));
            ck_assert_int_eq(ld_future_error(f[i]), LD_ECANCELED);
        } else {
            ck_assert(ld_future_is_fulfilled(f[i]));
            ck_assert_uint_eq(ld_flags_state_count(ld_future_ptr(f[i])),
                              ld_flags_state_count(ld_future_ptr(w)));
        }
        ld_future_unref(f[i]);
    }
    struct ld_evaluator_stats a, b;
    ck_assert_int_eq(ld_evaluator_stats(ev, &a), 0);
    ck_assert_int_eq(ld_evaluator_stats(whole, &b), 0);
    ck_assert_uint_eq(a.flags, b.flags);
    ld_future_unref(w);
    ld_context_unref(ctx);
    ld_evaluator_free(whole);
    ld_test_done_with(ev, s);
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
    tcase_add_test(tc, test_a_cancelled_state_that_waits_holds_back_no_later_state);
    tcase_add_test(tc, test_random_data_changing_between_slices);
    tcase_add_test(tc, test_a_thousand_states_queued);
    suite_add_tcase(s, tc);
    return s;
}
