/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Third round of attacks on analytics events through the public API
 * (client.h, events.h), aimed at two reworks: a flush hands the
 * summarizer's table to the worker (which writes it, resets it, and the
 * loop gives it back for the interval after next: two tables alternate,
 * more while batches pile up), and a payload's body is lent to libcurl
 * (a post counted by the sender and by its request; retries, 401, close
 * and free while a post is out or waits for its retry, a receiver that
 * reads slowly or hangs up mid-body, the relay's forwarder).
 */
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>

#include <ldasync/ldasync.h>
#include <ldasync/testing.h>

#include "check_fail_alloc.h"
#include "check_receiver.h"
#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

/* 'always' in every interval, 'even' and 'odd' in every other one, 'third'
 * in every third: with two tables alternating, a flag is in one table
 * only, or in both, or moves between them. String values (held by
 * reference, not jansson's immortal true and false). */
#define FLAGS                                                                                   \
    "{'always': {'on': true, 'variations': ['a0', 'a1'], 'fallthrough': {'variation': 0},"      \
    "    'version': 1, 'salt': 's'},"                                                           \
    " 'even': {'on': true, 'variations': ['e0', 'e1'], 'fallthrough': {'variation': 1},"        \
    "    'version': 2, 'salt': 's'},"                                                           \
    " 'odd': {'on': true, 'variations': [{'o': 0}, {'o': 1}], 'fallthrough': {'variation': 0}," \
    "    'version': 3, 'salt': 's'},"                                                           \
    " 'third': {'on': true, 'trackEvents': true, 'variations': ['t0', 't1'],"                   \
    "    'fallthrough': {'variation': 1}, 'version': 4, 'salt': 's'}}"

static ld_context *USER, *ORG, *MULTI;

static void attack_up(void)
{
    /* libevent threading on (before the base is made): the processor's
     * worker writes each batch on its thread, as in a program that turned
     * it on, while the loop goes on recording */
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    ld_test_setup();
    signal(SIGPIPE, SIG_IGN);
    evr_start();
    USER = ld_test_ctx_of("{'kind': 'user', 'key': 'u'}");
    ORG = ld_test_ctx_of("{'kind': 'org', 'key': 'o'}");
    MULTI = ld_test_ctx_of("{'kind': 'multi', 'user': {'key': 'u'}, 'org': {'key': 'o'},"
                           " 'device': {'key': 'd'}}");
}

static void attack_down(void)
{
    ld_context_unref(USER);
    ld_context_unref(ORG);
    ld_context_unref(MULTI);
    USER = ORG = MULTI = NULL;
    evr_stop();
    ld_test_teardown();
}

static bool valgrind(void)
{
    return getenv("LDASYNC_VALGRIND") != NULL;
}

/* An evaluation with a JSON fallback (stolen), awaited. */
static void eval_with(ld_client *c, const char *key, ld_context *ctx, json_t *fallback)
{
    ld_future *f = ld_client_json_variation(c, key, ctx, fallback);
    ld_test_wait(f);
    ck_assert(ld_future_is_fulfilled(f));
    ld_future_unref(f);
}

/* The summary of post `post` (the last slot for those beyond EVR_MAX). */
static json_t *features_of(int post)
{
    json_t *s = evr_event_of(post, "summary", 0);
    ck_assert_msg(s != NULL, "post %d has no summary", post);
    return json_object_get(s, "features");
}

/* The count of flag `key` in the summary of `post`, all counters added
 * (0 when the flag is not there). */
static int64_t total_of(int post, const char *key)
{
    json_t *s = evr_event_of(post, "summary", 0);
    json_t *f = s ? json_object_get(json_object_get(s, "features"), key) : NULL;
    json_t *c;
    size_t i;
    int64_t n = 0;
    json_array_foreach(json_object_get(f, "counters"), i, c)
    {
        n += json_integer_value(json_object_get(c, "count"));
    }
    return n;
}

/* The context kinds of flag `key` in the summary of `post`, sorted, as
 * one string ("device,org,user"). */
static const char *kinds_of(int post, const char *key)
{
    static char buf[128];
    json_t *k = json_object_get(json_object_get(features_of(post), key), "contextKinds");
    const char *names[8];
    size_t n = json_array_size(k);
    ck_assert_uint_le(n, 8);
    for (size_t i = 0; i < n; i++) {
        names[i] = json_string_value(json_array_get(k, i));
        ck_assert_ptr_nonnull(names[i]);
    }
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i)
            strcat(buf, ",");
        strcat(buf, names[i]);
    }
    return buf;
}

/* ------------------------------------------------------------------------- */
/* Two tables alternating                                                    */

START_TEST(test_flags_in_every_other_interval_count_exactly_for_many_flushes)
{
    ld_client *c = evr_client(FLAGS, NULL, NULL, NULL, 0);
    int rounds = valgrind() ? 12 : 40;
    for (int r = 0; r < rounds; r++) {
        /* always: r + 1 times, the default the round's number (the first
         * default of the interval is the one written) */
        for (int k = 0; k <= r; k++)
            eval_with(c, "always", k % 2 ? USER : ORG, json_integer(r * 100 + k));
        if (r % 2 == 0) {
            eval_with(c, "even", r % 4 == 0 ? ORG : USER, json_string("de"));
            eval_with(c, "even", r % 4 == 0 ? ORG : USER, NULL);
        } else {
            eval_with(c, "odd", MULTI, json_integer(-r));
        }
        if (r % 3 == 0)
            eval_with(c, "third", r % 2 ? MULTI : USER, NULL);
        /* a flag not found, its key the round's parity */
        eval_with(c, r % 2 ? "lost-odd" : "lost-even", USER, json_integer(r));
        ck_assert(evr_flush(c));
        int p = evr.n - 1;
        ck_assert_int_eq(p, r);
        json_t *fs = features_of(p);
        size_t want_flags = 2 + 1 + (r % 3 == 0);
        ck_assert_msg(json_object_size(fs) == want_flags, "round %d: %zu flags", r,
                      json_object_size(fs));
        ck_assert_int_eq(total_of(p, "always"), r + 1);
        json_t *al = json_object_get(fs, "always");
        ck_assert_int_eq(json_integer_value(json_object_get(al, "default")), r * 100);
        ck_assert_uint_eq(json_array_size(json_object_get(al, "counters")), 1);
        ck_assert_str_eq(kinds_of(p, "always"), r == 0 ? "org" : "org,user");
        if (r % 2 == 0) {
            ck_assert_int_eq(total_of(p, "even"), 2);
            ck_assert_str_eq(kinds_of(p, "even"), r % 4 == 0 ? "org" : "user");
            ck_assert_str_eq(
                json_string_value(json_object_get(json_object_get(fs, "even"), "default")), "de");
            ck_assert_ptr_null(json_object_get(fs, "odd"));
            ck_assert_int_eq(total_of(p, "lost-even"), 1);
            ck_assert_ptr_null(json_object_get(fs, "lost-odd"));
        } else {
            ck_assert_int_eq(total_of(p, "odd"), 1);
            ck_assert_str_eq(kinds_of(p, "odd"), "device,org,user");
            ck_assert_int_eq(
                json_integer_value(json_object_get(json_object_get(fs, "odd"), "default")), -r);
            ck_assert_ptr_null(json_object_get(fs, "even"));
            ck_assert_int_eq(total_of(p, "lost-odd"), 1);
            ck_assert_ptr_null(json_object_get(fs, "lost-even"));
        }
        if (r % 3 == 0) {
            ck_assert_int_eq(total_of(p, "third"), 1);
            ck_assert_str_eq(kinds_of(p, "third"), r % 2 ? "device,org,user" : "user");
        } else {
            ck_assert_ptr_null(json_object_get(fs, "third"));
        }
        if (evr.n == EVR_MAX - 1) {
            /* the service keeps EVR_MAX posts: start over */
            ld_client_free(c);
            evr_drain();
            evr_stop();
            evr_start();
            c = evr_client(FLAGS, NULL, NULL, NULL, 0);
            r = -1;
            rounds -= EVR_MAX - 1;
        }
    }
    evr_client_done(c);
}
END_TEST

/* The later store's flag `key` at `version` serving variation `var`, or
 * removed (version < 0). */
static void later_set(struct ld_test_later *l, const char *key, int version, int var)
{
    json_t *features = json_object_get(l->data, "features");
    if (version < 0) {
        json_object_del(features, key);
        return;
    }
    char text[256];
    snprintf(text, sizeof text,
             "{'key': '%s', 'on': true, 'variations': ['v0', 'v1', 'v2'],"
             " 'fallthrough': {'variation': %d}, 'version': %d, 'salt': 's'}",
             key, var, version);
    json_object_set_new(features, key, ld_test_j(text));
}

/* Versions up and down across intervals that alternate the tables (each
 * table keeps the counters and the version it maps from two intervals
 * before): every summary has exactly the counters of its interval. */
START_TEST(test_versions_up_and_down_across_alternating_tables)
{
    json_t *data = ld_test_data_of(FLAGS, NULL);
    struct ld_test_later *l;
    ld_store *store = ld_test_later_new(data, &l);
    json_decref(data);
    ld_client *c = evr_client(FLAGS, NULL, NULL, store, 0);
    /* per interval, the (version, variation) of each evaluation; -1: gone */
    static const int steps[][6][2] = {
        {{1, 0}, {1, 0}, {2, 1}, {0, 0}, {0, 0}, {0, 0}},
        {{2, 1}, {3, 2}, {0, 0}, {0, 0}, {0, 0}, {0, 0}},
        {{1, 0}, {3, 2}, {-1, 0}, {0, 0}, {0, 0}, {0, 0}},
        {{3, 2}, {2, 1}, {1, 0}, {5, 0}, {0, 0}, {0, 0}},
        {{-1, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}},
        {{5, 1}, {5, 0}, {4, 2}, {5, 1}, {1, 0}, {0, 0}},
        {{1, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}},
        {{2, 1}, {1, 0}, {2, 1}, {3, 2}, {-1, 0}, {2, 1}},
    };
    int n = (int)(sizeof steps / sizeof steps[0]);
    for (int r = 0; r < n; r++) {
        int want[8][3] = {{0}}, unknown = 0, evals = 0;
        for (int k = 0; k < 6 && steps[r][k][0] != 0; k++, evals++) {
            later_set(l, "moving", steps[r][k][0], steps[r][k][1]);
            eval_with(c, "moving", USER, NULL);
            if (steps[r][k][0] < 0)
                unknown++;
            else
                want[steps[r][k][0]][steps[r][k][1]]++;
        }
        ck_assert(evr_flush(c));
        json_t *f = json_object_get(features_of(r), "moving");
        ck_assert_ptr_nonnull(f);
        json_t *cs = json_object_get(f, "counters"), *ct;
        size_t i;
        int seen = 0;
        json_array_foreach(cs, i, ct)
        {
            json_int_t count = json_integer_value(json_object_get(ct, "count"));
            ck_assert_int_gt(count, 0);
            seen += (int)count;
            if (json_is_true(json_object_get(ct, "unknown"))) {
                ck_assert_int_eq(count, unknown);
                continue;
            }
            json_int_t v = json_integer_value(json_object_get(ct, "version"));
            json_int_t x = json_integer_value(json_object_get(ct, "variation"));
            ck_assert_msg(v > 0 && v < 8 && x >= 0 && x < 3 && want[v][x] == count,
                          "interval %d: version %lld variation %lld count %lld", r, (long long)v,
                          (long long)x, (long long)count);
            want[v][x] = -1; /* once */
        }
        ck_assert_int_eq(seen, evals);
    }
    evr_client_done(c);
    ld_store_free(store);
    evr_drain();
}
END_TEST

/* Evaluations counted across batches that pile up on a service that holds
 * every post: each evaluation in exactly one summary, whatever the order
 * the batches are written, given back and posted in. */
START_TEST(test_every_evaluation_is_counted_once_while_batches_pile_up)
{
    evr.hold = true;
    ld_client *c = evr_client(FLAGS, NULL, NULL, NULL, 0);
    enum { ROUNDS = 9 };
    ld_future *fl[ROUNDS];
    int64_t always = 0, even = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k <= r; k++, always++)
            eval_with(c, "always", k % 2 ? MULTI : USER, NULL);
        if (r % 2 == 0) {
            eval_with(c, "even", ORG, NULL);
            even++;
        }
        fl[r] = ld_client_flush(c);
    }
    /* five batches at most: the later flushes wait, then go as one */
    ck_assert_int_le(evr_stats(c).in_flight, 5);
    for (int i = 0; i < 100000 && evr.nheld < 5; i++)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert_int_eq(evr.nheld, 5);
    /* more evaluations while they are held */
    for (int k = 0; k < 7; k++, always++)
        eval_with(c, "always", ORG, NULL);
    for (int i = 0; i < 100000; i++) {
        bool pending = false;
        for (int r = 0; r < ROUNDS; r++)
            pending = pending || ld_future_is_pending(fl[r]);
        if (!pending)
            break;
        evr_release_held();
        event_base_loop(B, EVLOOP_ONCE);
    }
    for (int r = 0; r < ROUNDS; r++) {
        ck_assert(ld_test_await_bool(fl[r]));
    }
    evr.hold = false;
    ck_assert(evr_flush(c)); /* the last 7 */
    ck_assert_int_le(evr.n, EVR_MAX - 1);
    int64_t got_always = 0, got_even = 0;
    for (int p = 0; p < evr.n; p++) {
        got_always += total_of(p, "always");
        got_even += total_of(p, "even");
    }
    ck_assert_int_eq(got_always, always);
    ck_assert_int_eq(got_even, even);
    ld_events_stats st = evr_stats(c);
    ck_assert_int_eq(st.in_flight, 0);
    ck_assert_int_eq(st.payloads_dropped, 0);
    ck_assert_int_eq(st.payloads_sent, (uint64_t)evr.n);
    evr_client_done(c);
}
END_TEST

/* Flushes made from a flush's completion, evaluations in between that are
 * not awaited: each evaluation is counted once, in some summary. */
struct relay {
    ld_client *c;
    int left, done;
    int64_t asked;
    ld_future *evals[64];
    int nevals;
};

static void reflush(ld_future *f, void *arg)
{
    struct relay *rl = arg;
    (void)f;
    rl->done++;
    if (rl->left-- <= 0)
        return;
    for (int k = 0; k < 3; k++) {
        ck_assert_int_lt(rl->nevals, 64);
        rl->evals[rl->nevals++] =
            ld_client_json_variation(rl->c, rl->left % 2 ? "odd" : "always", USER, NULL);
        rl->asked++;
    }
    ld_future *g = ld_client_flush(rl->c);
    ck_assert_int_eq(ld_future_on_complete(g, reflush, rl), 0);
    /* and a second flush at once, the summary just handed over */
    ld_future_unref(ld_client_flush(rl->c));
}

START_TEST(test_flushes_from_completions_with_evaluations_in_between_count_each_once)
{
    ld_client *c = evr_client(FLAGS, NULL, NULL, NULL, 0);
    struct relay rl = {c, 6, 0, 0, {0}, 0};
    eval_with(c, "always", USER, NULL);
    rl.asked = 1;
    ld_future *f = ld_client_flush(c);
    ck_assert_int_eq(ld_future_on_complete(f, reflush, &rl), 0);
    for (int i = 0; i < 200000 && rl.done < 7; i++)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert_int_eq(rl.done, 7);
    for (int i = 0; i < rl.nevals; i++) {
        ld_test_wait(rl.evals[i]);
        ld_future_unref(rl.evals[i]);
    }
    ck_assert(evr_flush(c));
    evr_drain();
    ck_assert_int_le(evr.n, EVR_MAX - 1);
    int64_t got = 0;
    for (int p = 0; p < evr.n; p++)
        got += total_of(p, "always") + total_of(p, "odd");
    ck_assert_int_eq(got, rl.asked);
    evr_client_done(c);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Free and close while a summary is out                                     */

/* The text of `n` string flags f0..f(n-1). */
static char *many_flags(int n)
{
    size_t cap = (size_t)n * 128 + 16, off = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    text[off++] = '{';
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(text + off, cap - off,
                                "%s'f%d': {'on': true, 'variations': ['x%d', 'y'],"
                                " 'fallthrough': {'variation': 0}, 'version': %d, 'salt': 's'}",
                                i ? ", " : "", i, i, i + 1);
    text[off++] = '}';
    text[off] = '\0';
    return text;
}

/* Evaluates flags f0..f(n-1) for `ctx`, a string fallback each. */
static void eval_many(ld_client *c, int n, ld_context *ctx)
{
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "f%d", i);
        ld_future *f = ld_client_string_variation(c, key, ctx, "fb");
        ld_test_wait(f);
        ld_future_unref(f);
    }
}

START_TEST(test_free_or_close_at_every_pass_of_a_flush_with_a_large_summary_out)
{
    int n = valgrind() ? 300 : 1000;
    char *text = many_flags(n);
    for (int k = 0; k < 10; k++) {
        evr.hold = k % 2 == 1;
        ld_client *c = evr_client(text, NULL, NULL, NULL, 0);
        /* two intervals, so that the second flush takes the other table */
        eval_many(c, n, k % 3 ? MULTI : USER);
        ld_future *f1 = ld_client_flush(c);
        eval_many(c, n / 2, ORG);
        ld_future *f2 = ld_client_flush(c);
        for (int pass = 0; pass < k; pass++)
            event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        if (k % 4 == 3) {
            /* a third interval recorded into whatever table is there now */
            eval_many(c, 10, USER);
            ld_future_unref(ld_client_close(c));
        }
        ld_client_free(c);
        ld_test_wait(f1);
        ld_test_wait(f2);
        ck_assert(!ld_future_is_pending(f1) && !ld_future_is_pending(f2));
        ld_future_unref(f1);
        ld_future_unref(f2);
        evr_release_held();
        evr_drain();
    }
    free(text);
}
END_TEST

/* 10,000 flags (1,000 under valgrind) over four intervals that alternate
 * the tables: all of them, the even ones for another kind, all for three
 * kinds, the odd ones: each summary has exactly its flags, counts and
 * kinds. */
START_TEST(test_10000_flags_over_alternating_tables_with_changing_kinds)
{
    int n = valgrind() ? 1000 : 10000;
    char *text = many_flags(n);
    ld_client *c = evr_client(text, NULL, NULL, NULL, 0);
    free(text);
    ld_context *ctxs[4] = {USER, ORG, MULTI, USER};
    const char *kinds[4] = {"user", "org", "device,org,user", "user"};
    for (int r = 0; r < 4; r++) {
        for (int i = r % 2; i < n; i += r % 2 ? 2 : 1) {
            char key[16];
            snprintf(key, sizeof key, "f%d", r == 1 ? i - 1 : i);
            ld_future *f = ld_client_string_variation(c, key, ctxs[r], "fb");
            ld_test_wait(f);
            ld_future_unref(f);
        }
        ck_assert(evr_flush(c));
        json_t *fs = features_of(r);
        int want = r % 2 ? n / 2 : n;
        ck_assert_int_eq(json_object_size(fs), want);
        for (int i = 0; i < n; i += 7) {
            char key[16];
            snprintf(key, sizeof key, "f%d", i);
            bool in = r == 0 || r == 2 || (r == 1 && i % 2 == 0) || (r == 3 && i % 2 == 1);
            json_t *f = json_object_get(fs, key);
            ck_assert_msg((f != NULL) == in, "round %d: %s", r, key);
            if (!in)
                continue;
            ck_assert_int_eq(total_of(r, key), 1);
            ck_assert_str_eq(kinds_of(r, key), kinds[r]);
            json_t *c0 = json_array_get(json_object_get(f, "counters"), 0);
            ck_assert_int_eq(json_integer_value(json_object_get(c0, "version")), i + 1);
            char want_v[16];
            snprintf(want_v, sizeof want_v, "x%d", i);
            ck_assert_str_eq(json_string_value(json_object_get(c0, "value")), want_v);
        }
    }
    evr_client_done(c);
}
END_TEST

/* The client freed from the completion of one flush while the next one's
 * batch is written or posted. */
static void free_client(ld_future *f, void *arg)
{
    (void)f;
    ld_client **c = arg;
    ld_client_free(*c);
    *c = NULL;
}

START_TEST(test_free_inside_a_flush_completion_while_the_next_batch_is_out)
{
    int n = valgrind() ? 200 : 1000;
    char *text = many_flags(n);
    for (int k = 0; k < 4; k++) {
        ld_client *c = evr_client(text, NULL, NULL, NULL, 0);
        eval_many(c, n, USER);
        ld_future *f1 = ld_client_flush(c);
        eval_many(c, n / (k + 1), k % 2 ? MULTI : ORG);
        ld_future *f2 = ld_client_flush(c);
        ld_future *f3 = k >= 2 ? ld_client_close(c) : NULL;
        ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f1), free_client, &c), 0);
        ld_test_wait(f1);
        for (int i = 0; i < 100000 && c; i++)
            event_base_loop(B, EVLOOP_ONCE);
        ck_assert_ptr_null(c);
        ld_test_wait(f2);
        ck_assert(!ld_future_is_pending(f2));
        ld_future_unref(f1);
        ld_future_unref(f2);
        if (f3) {
            ld_test_wait(f3);
            ld_future_unref(f3);
        }
        evr_drain();
    }
    free(text);
}
END_TEST

/* Each allocation of a flush (the table taken, the batch, the worker's
 * write and reset, the post and its lent body, libcurl's) fails in turn,
 * with the worker on its thread and a table given back before: the flush
 * settles, nothing leaks (ASan, valgrind), and the next interval is
 * counted exactly. */
START_TEST(test_each_allocation_of_a_flush_fails_in_turn)
{
    /* under valgrind, every ninth */
    int most = 2000, step = valgrind() ? 9 : 1;
    bool hit = true;
    for (int n = 1; n <= most && hit; n += step) {
        evr_stop();
        evr_start();
        ld_client *c = evr_client(FLAGS, NULL, NULL, NULL, 0);
        eval_with(c, "always", USER, NULL);
        ck_assert(evr_flush(c)); /* its table comes back: the spare */
        eval_with(c, "odd", MULTI, json_integer(1));
        eval_with(c, "third", ORG, json_string("d"));
        CHAOS_BEGIN(n);
        ld_future *f = ld_client_flush(c);
        ld_test_wait(f);
        hit = chaos_end(n);
        ld_future_unref(f);
        evr_drain();
        int before = evr.n;
        eval_with(c, "even", USER, NULL);
        ck_assert(evr_flush(c));
        ck_assert_int_gt(evr.n, before);
        ck_assert_int_eq(total_of(evr.n - 1, "even"), 1);
        ck_assert_int_le(total_of(evr.n - 1, "odd"), 1);
        evr_client_done(c);
    }
    ck_assert_msg(!hit, "more than %d allocations in a flush", most);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* The lent body: retries, 401, close and free while a post is out          */

START_TEST(test_free_while_the_post_waits_for_its_retry)
{
    for (int k = 0; k < 3; k++) {
        evr_stop();
        evr_start();
        evr.statuses[0] = 500;
        evr.nstatuses = 1;
        ld_client *c = evr_client(FLAGS, NULL, NULL, NULL, 0);
        eval_with(c, "odd", MULTI, json_string("x"));
        json_t *data = json_string("payload");
        ck_assert_int_eq(ld_client_track(c, "big", USER, data), 0);
        json_decref(data);
        ld_future *f = ld_client_flush(c);
        for (int i = 0; i < 100000 && evr.n < 1; i++)
            event_base_loop(B, EVLOOP_ONCE);
        ck_assert_int_eq(evr.n, 1);
        /* the 500 is answered; the post now waits for its retry (1 s) */
        for (int pass = 0; pass < 2 * k; pass++)
            event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        ck_assert(ld_future_is_pending(f));
        ld_client_free(c);
        ld_test_wait(f);
        ck_assert(!ld_future_is_pending(f));
        ld_future_unref(f);
        evr_drain();
        ck_assert_int_eq(evr.n, 1);
    }
}
END_TEST

START_TEST(test_close_while_the_post_waits_for_its_retry_sends_the_same_bytes_again)
{
    evr.statuses[0] = 500;
    evr.nstatuses = 1;
    ld_client *c = evr_client(FLAGS, NULL, NULL, NULL, 0);
    eval_with(c, "always", USER, NULL);
    ld_future *f = ld_client_flush(c);
    for (int i = 0; i < 100000 && evr.n < 1; i++)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert_int_eq(evr.n, 1);
    eval_with(c, "even", ORG, NULL); /* the close's own payload */
    ld_future *cl = ld_client_close(c);
    ld_test_await_ok(cl);
    ck_assert(ld_test_await_bool(f));
    ck_assert_int_eq(evr.n, 3);
    /* the retry is post 1 or 2, the close's payload the other */
    int retry = strcmp(evr.seen[1].payload_id, evr.seen[0].payload_id) == 0 ? 1 : 2;
    ck_assert_str_eq(evr.seen[retry].payload_id, evr.seen[0].payload_id);
    ck_assert_uint_eq(evr.seen[retry].body_len, evr.seen[0].body_len);
    ck_assert_str_eq(evr.seen[retry].body, evr.seen[0].body);
    ck_assert_int_eq(total_of(retry, "always"), 1);
    ck_assert_int_eq(total_of(3 - retry, "even"), 1);
    evr_client_done(c);
}
END_TEST

/* Live blocks of the library's allocator (its hooks wrap malloc's). */
static long g_live;

static void *live_malloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        __atomic_add_fetch(&g_live, 1, __ATOMIC_RELAXED);
    return p;
}

static void *live_realloc(void *p, size_t n)
{
    return realloc(p, n);
}

static void live_free(void *p)
{
    __atomic_sub_fetch(&g_live, 1, __ATOMIC_RELAXED);
    free(p);
}

/* Many flush cycles of `n` flags each, the kinds alternating (the two
 * tables each see their own): the library's live blocks do not grow with
 * them (a table, a batch or a post kept per flush would be hundreds). Each
 * flush's outcome is `sent`. */
static void bounded_cycles(ld_client *c, int n, bool sent)
{
    ck_assert_int_eq(ld_set_alloc_funcs(live_malloc, live_realloc, live_free), 0);
    long at[3] = {0};
    int rounds = valgrind() ? 12 : 30;
    for (int r = 0; r < rounds; r++) {
        eval_many(c, n, r % 2 ? MULTI : ORG);
        ck_assert_int_eq(ld_client_track(c, "t", USER, NULL), 0);
        ck_assert(evr_flush(c) == sent);
        evr_drain();
        if (r == 4)
            at[0] = __atomic_load_n(&g_live, __ATOMIC_RELAXED);
        if (r == rounds / 2 + 1)
            at[1] = __atomic_load_n(&g_live, __ATOMIC_RELAXED);
        if (r == rounds - 1)
            at[2] = __atomic_load_n(&g_live, __ATOMIC_RELAXED);
    }
    ld_set_alloc_funcs(NULL, NULL, NULL);
    ck_assert_msg(at[1] - at[0] < 64 && at[2] - at[1] < 64, "live blocks %ld, %ld, %ld", at[0],
                  at[1], at[2]);
    ld_events_stats st = evr_stats(c);
    ck_assert_int_eq(st.in_flight, 0);
    ck_assert_int_eq(st.buffered, 0);
}

START_TEST(test_after_401_flushes_drop_at_once_and_memory_stays_bounded)
{
    evr.statuses[0] = 401;
    evr.nstatuses = 1;
    int n = valgrind() ? 100 : 400;
    char *text = many_flags(n);
    ld_client *c = evr_client(text, NULL, NULL, NULL, 0);
    free(text);
    eval_many(c, n, USER);
    ck_assert(!evr_flush(c));
    ck_assert_int_eq(evr.n, 1);
    ck_assert(evr_stats(c).stopped);
    bounded_cycles(c, n, false);
    ck_assert_int_eq(evr.n, 1); /* nothing posted after the 401 */
    ck_assert_int_eq(evr_stats(c).payloads_sent, 0);
    evr_client_done(c);
}
END_TEST

START_TEST(test_memory_stays_bounded_over_many_flushes_sent)
{
    int n = valgrind() ? 100 : 400;
    char *text = many_flags(n);
    ld_client *c = evr_client(text, NULL, NULL, NULL, 0);
    free(text);
    bounded_cycles(c, n, true);
    ck_assert_int_eq(evr.n, valgrind() ? 12 : 30);
    ck_assert_int_eq(total_of(evr.n - 1, "f0"), 1);
    ck_assert_int_eq(evr_stats(c).payloads_sent, (uint64_t)evr.n);
    evr_client_done(c);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* A receiver that reads slowly, or hangs up mid-body                        */

struct raw {
    struct evconnlistener *l;
    int port;
    size_t cut; /* hang up once this many bytes came (0: never read) */
    int accepted;
    struct bufferevent *conns[8];
    size_t got[8];
    int n;
};

static struct raw RAW;

static void raw_read(struct bufferevent *bev, void *arg)
{
    int i = (int)(intptr_t)arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    RAW.got[i] += evbuffer_get_length(in);
    evbuffer_drain(in, evbuffer_get_length(in));
    if (RAW.got[i] >= RAW.cut) {
        bufferevent_free(bev); /* closes: the rest of the body is refused */
        RAW.conns[i] = NULL;
    }
}

static void raw_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                       void *arg)
{
    (void)l, (void)sa, (void)len, (void)arg;
    RAW.accepted++;
    if (RAW.n >= 8) {
        evutil_closesocket(fd);
        return;
    }
    int i = RAW.n++;
    struct bufferevent *bev = bufferevent_socket_new(B, fd, BEV_OPT_CLOSE_ON_FREE);
    ck_assert_ptr_nonnull(bev);
    RAW.conns[i] = bev;
    if (RAW.cut) {
        bufferevent_setcb(bev, raw_read, NULL, NULL, (void *)(intptr_t)i);
        bufferevent_enable(bev, EV_READ);
    } else {
        /* a small receive buffer, never read: the sender's side fills */
        int sz = 4096;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        bufferevent_disable(bev, EV_READ);
    }
}

static void raw_start(size_t cut)
{
    memset(&RAW, 0, sizeof RAW);
    RAW.cut = cut;
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(0x7f000001);
    RAW.l = evconnlistener_new_bind(B, raw_accept, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                                    16, (struct sockaddr *)&sin, sizeof sin);
    ck_assert_ptr_nonnull(RAW.l);
    socklen_t sl = sizeof sin;
    ck_assert_int_eq(getsockname(evconnlistener_get_fd(RAW.l), (struct sockaddr *)&sin, &sl), 0);
    RAW.port = ntohs(sin.sin_port);
}

static void raw_stop(void)
{
    for (int i = 0; i < RAW.n; i++)
        if (RAW.conns[i])
            bufferevent_free(RAW.conns[i]);
    evconnlistener_free(RAW.l);
    memset(&RAW, 0, sizeof RAW);
}

/* Custom events of about `bytes` in all (large data, not compressed). */
static void track_big(ld_client *c, size_t bytes)
{
    size_t chunk = 64 * 1024;
    char *s = malloc(chunk + 1);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < chunk; i++)
        s[i] = (char)('a' + i % 26);
    s[chunk] = '\0';
    json_t *data = json_string(s);
    free(s);
    for (size_t have = 0; have < bytes; have += chunk)
        ck_assert_int_eq(ld_client_track(c, "big", USER, data), 0);
    json_decref(data);
}

/* A client sending to the raw receiver with a payload of about `bytes`. */
static ld_client *client_of_raw(size_t bytes)
{
    char uri[64];
    snprintf(uri, sizeof uri, "http://127.0.0.1:%d", RAW.port);
    ld_client *c = evr_client(FLAGS, NULL, uri, NULL, 0);
    track_big(c, bytes);
    eval_with(c, "odd", MULTI, json_string("fb"));
    return c;
}

START_TEST(test_a_receiver_that_hangs_up_mid_body_drops_the_payload_after_the_retry)
{
    raw_start(64 * 1024);
    ld_client *c = client_of_raw(800 * 1024);
    ld_future *f = ld_client_flush(c);
    ck_assert(!ld_test_await_bool(f)); /* the retry was cut off too */
    ck_assert_int_eq(RAW.accepted, 2);
    ld_events_stats st = evr_stats(c);
    ck_assert_int_eq(st.payloads_dropped, 1);
    ck_assert(!st.stopped);
    /* what comes next still goes out (to the same receiver, cut again) */
    eval_with(c, "always", USER, NULL);
    track_big(c, 800 * 1024);
    ck_assert(!evr_flush(c));
    ck_assert_int_eq(RAW.accepted, 4);
    evr_client_done(c);
    raw_stop();
}
END_TEST

START_TEST(test_free_or_close_while_a_receiver_never_reads_the_body)
{
    for (int k = 0; k < 4; k++) {
        raw_start(0);
        ld_client *c = client_of_raw(4 * 1024 * 1024);
        ld_future *f = ld_client_flush(c);
        for (int i = 0; i < 100000 && RAW.accepted < 1; i++)
            event_base_loop(B, EVLOOP_ONCE);
        ck_assert_int_eq(RAW.accepted, 1);
        /* libcurl is writing the lent body into a full socket */
        for (int pass = 0; pass < k * 3; pass++)
            event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        ck_assert(ld_future_is_pending(f));
        if (k % 2)
            ld_future_unref(ld_client_close(c));
        ld_client_free(c);
        ld_test_wait(f);
        ck_assert(!ld_future_is_pending(f));
        ld_future_unref(f);
        evr_drain();
        raw_stop();
        evr_drain();
    }
}
END_TEST

/* The read timeout ends a post whose body the receiver never reads (libcurl
 * still writing it): the retry lends the same body to a new request, which
 * times out too; then the payload is dropped. */
START_TEST(test_a_read_timeout_mid_body_retries_with_the_same_lent_body)
{
    raw_start(0);
    char uri[64];
    snprintf(uri, sizeof uri, "http://127.0.0.1:%d", RAW.port);
    ld_client *c = evr_client(FLAGS, NULL, uri, NULL, 200);
    track_big(c, 4 * 1024 * 1024);
    eval_with(c, "odd", MULTI, json_string("fb"));
    ck_assert(!ld_test_await_bool(ld_client_flush(c)));
    ck_assert_int_eq(RAW.accepted, 2);
    ld_events_stats st = evr_stats(c);
    ck_assert_int_eq(st.payloads_dropped, 1);
    ck_assert(!st.stopped);
    /* and freed while the next post's body is half written */
    track_big(c, 4 * 1024 * 1024);
    ld_future *f = ld_client_flush(c);
    for (int i = 0; i < 100000 && RAW.accepted < 3; i++)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert_int_eq(RAW.accepted, 3);
    ld_client_free(c);
    ld_test_wait(f);
    ld_future_unref(f);
    evr_drain();
    raw_stop();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Random runs                                                               */

struct rnd {
    ld_client *c; /* NULL once freed */
    unsigned seed;
    ld_future *pending[256];
    int n;
    int callbacks;
};

static unsigned rnd_next(struct rnd *r)
{
    r->seed = r->seed * 1103515245u + 12345u;
    return (r->seed >> 16) & 0x7fff;
}

static void rnd_keep(struct rnd *r, ld_future *f)
{
    ck_assert_ptr_nonnull(f);
    if (r->n < 256)
        r->pending[r->n++] = f;
    else
        ld_future_unref(f);
}

/* A flush's completion: another flush, an evaluation, or nothing, on the
 * client if it is still there. */
static void rnd_flushed(ld_future *f, void *arg)
{
    struct rnd *r = arg;
    (void)f;
    r->callbacks++;
    if (!r->c)
        return;
    switch (rnd_next(r) % 3) {
    case 0:
        rnd_keep(r, ld_client_flush(r->c));
        break;
    case 1:
        rnd_keep(r, ld_client_json_variation(r->c, "odd", MULTI, NULL));
        break;
    default:
        break;
    }
}

/* Random evaluations, tracks, identifies, flushes (some continued from
 * their completions), closes and frees, against a service that answers
 * 202, 500, 413 or holds, with the worker on its thread: every future
 * settles; nothing leaks or races (ASan, TSan, valgrind). */
START_TEST(test_random_runs_of_the_public_calls)
{
    static const char *const keys[] = {"always", "even", "odd", "third", "lost"};
    ld_context *ctxs[3] = {USER, ORG, MULTI};
    int runs = valgrind() ? 6 : 40;
    for (int run = 0; run < runs; run++) {
        evr_stop();
        evr_start();
        struct rnd r = {NULL, (unsigned)run * 7919u + 1u, {0}, 0, 0};
        static const int answers[] = {202, 500, 413, 202, 202};
        evr.nstatuses = (int)(rnd_next(&r) % 4);
        for (int i = 0; i < evr.nstatuses; i++)
            evr.statuses[i] = answers[rnd_next(&r) % 5];
        evr.hold = rnd_next(&r) % 4 == 0;
        r.c = evr_client(FLAGS, NULL, NULL, NULL, 0);
        bool closed = false;
        for (int step = 0; step < 60 && r.c; step++) {
            unsigned op = rnd_next(&r) % 12;
            ld_context *ctx = ctxs[rnd_next(&r) % 3];
            if (op < 4) {
                rnd_keep(&r, ld_client_json_variation(r.c, keys[rnd_next(&r) % 5], ctx,
                                                      json_integer(step)));
            } else if (op == 4) {
                int rc = ld_client_track(r.c, "t", ctx, NULL);
                ck_assert(rc == 0 || (closed && rc == LD_ECLOSED) || rc == LD_EBUSY);
            } else if (op == 5) {
                int rc = ld_client_identify(r.c, ctx);
                ck_assert(rc == 0 || (closed && rc == LD_ECLOSED) || rc == LD_EBUSY);
            } else if (op == 6) {
                rnd_keep(&r, ld_client_flush(r.c));
            } else if (op == 7) {
                ld_future *f = ld_client_flush(r.c);
                ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f), rnd_flushed, &r), 0);
                rnd_keep(&r, f);
            } else if (op == 8 || op == 9) {
                int passes = (int)(rnd_next(&r) % 5);
                for (int p = 0; p < passes; p++)
                    event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
                if (rnd_next(&r) % 3 == 0)
                    evr_release_held();
            } else if (op == 10 && !closed && rnd_next(&r) % 3 == 0) {
                rnd_keep(&r, ld_client_close(r.c));
                closed = true;
            } else if (op == 11 && rnd_next(&r) % 8 == 0) {
                ld_client_free(r.c);
                r.c = NULL;
            }
        }
        if (r.c && rnd_next(&r) % 2) {
            evr.hold = false;
            evr_release_held();
            ld_future *cl = ld_client_close(r.c);
            ld_test_wait(cl);
            ck_assert(ld_future_is_fulfilled(cl));
            ld_future_unref(cl);
        }
        if (r.c) {
            ld_client_free(r.c);
            r.c = NULL;
        }
        evr.hold = false;
        evr_release_held();
        /* every future settles (the callbacks' too: the list only grows
         * from them while the client is there) */
        for (int i = 0; i < r.n; i++) {
            ld_test_wait(r.pending[i]);
            ck_assert(!ld_future_is_pending(r.pending[i]));
            ld_future_unref(r.pending[i]);
        }
        evr_drain();
    }
}
END_TEST

/* ------------------------------------------------------------------------- */
/* The relay's forwarder                                                      */

START_TEST(test_forwarder_retries_and_frees_with_lent_bodies_out)
{
    ld_net_config *n = ld_net_config_new(EVR_KEY);
    ck_assert_int_eq(ld_net_config_set_events_uri(n, evr.url), 0);
    for (int k = 0; k < 3; k++) {
        evr_stop();
        evr_start();
        ck_assert_int_eq(ld_net_config_set_events_uri(n, evr.url), 0);
        evr.statuses[0] = 503;
        evr.statuses[1] = 202;
        evr.nstatuses = 2;
        evr.hold = k == 2;
        ld_event_forwarder *fw = ld_event_forwarder_new(B, n, 0);
        ck_assert_ptr_nonnull(fw);
        const char *h[] = {"Content-Type: application/json", "Authorization: sdk-other", NULL};
        size_t len = 300 * 1024;
        char *body = malloc(len);
        ck_assert_ptr_nonnull(body);
        memset(body, ' ', len);
        body[0] = '[';
        body[len - 1] = ']';
        for (int i = 0; i < 7; i++) {
            const char *path = i % 2 ? "/bulk" : "/diagnostic";
            ck_assert_int_eq(ld_event_forwarder_post(fw, path, h, body, len), 0);
        }
        /* the forwarder copied the body: the caller's may change at once */
        memset(body, 'x', len);
        free(body);
        for (int i = 0; i < 100000 && evr.n < (k == 0 ? 1 : 5); i++)
            event_base_loop(B, EVLOOP_ONCE);
        if (k == 0) {
            ld_future *cl = ld_event_forwarder_close(fw);
            ld_test_await_ok(cl);
            ld_event_forwarder_stats st;
            ck_assert_int_eq(ld_event_forwarder_stats_get(fw, &st), 0);
            ck_assert_int_eq(st.forwarded, 7);
            ck_assert_int_eq(evr.n, 8); /* the 503 once retried */
            ck_assert_uint_eq(evr.seen[1].body_len, len);
            ck_assert_str_eq(evr.seen[1].auth, "sdk-other");
        }
        ld_event_forwarder_free(fw);
        evr_drain();
    }
    ld_net_config_free(n);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Values shared with the caller                                             */

/* The caller keeps a reference to its fallback, and counts references to
 * it on the loop (jansson's json_incref and json_decref) while a flush is
 * written: the library may count them on its loop only, atomically or not
 * (jansson reads the count plainly first). Under TSan a count on the
 * worker (the summary's values let go of there) is a data race. */
START_TEST(test_a_fallback_the_caller_keeps_is_not_counted_off_the_loop)
{
    ld_client *c = evr_client(FLAGS, NULL, NULL, NULL, 0);
    json_t *fb = json_pack("{s:s}", "mine", "still");
    ck_assert_ptr_nonnull(fb);
    for (int round = 0; round < 6; round++) {
        eval_with(c, "lost", USER, json_incref(fb));
        eval_with(c, "always", USER, json_incref(fb));
        ld_future *f = ld_client_flush(c);
        while (ld_future_is_pending(f)) {
            json_t *again = json_incref(fb);
            json_decref(again);
            event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        }
        ck_assert(ld_test_await_bool(f));
        ck_assert_int_eq(total_of(evr.n - 1, "lost"), 1);
    }
    ck_assert_int_eq(evr.n, 6);
    evr_client_done(c);
    ck_assert_int_eq(fb->refcount, 1);
    json_decref(fb);
}
END_TEST

Suite *ld_suite_client_events_attack3(void)
{
    Suite *s = suite_create("client_events_attack3");
    TCase *tc = tcase_create("attack3");
    tcase_add_checked_fixture(tc, attack_up, attack_down);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_flags_in_every_other_interval_count_exactly_for_many_flushes);
    tcase_add_test(tc, test_versions_up_and_down_across_alternating_tables);
    tcase_add_test(tc, test_every_evaluation_is_counted_once_while_batches_pile_up);
    tcase_add_test(tc, test_flushes_from_completions_with_evaluations_in_between_count_each_once);
    tcase_add_test(tc, test_free_or_close_at_every_pass_of_a_flush_with_a_large_summary_out);
    tcase_add_test(tc, test_10000_flags_over_alternating_tables_with_changing_kinds);
    tcase_add_test(tc, test_free_inside_a_flush_completion_while_the_next_batch_is_out);
    tcase_add_test(tc, test_each_allocation_of_a_flush_fails_in_turn);
    tcase_add_test(tc, test_free_while_the_post_waits_for_its_retry);
    tcase_add_test(tc, test_close_while_the_post_waits_for_its_retry_sends_the_same_bytes_again);
    tcase_add_test(tc, test_after_401_flushes_drop_at_once_and_memory_stays_bounded);
    tcase_add_test(tc, test_memory_stays_bounded_over_many_flushes_sent);
    tcase_add_test(tc, test_a_receiver_that_hangs_up_mid_body_drops_the_payload_after_the_retry);
    tcase_add_test(tc, test_free_or_close_while_a_receiver_never_reads_the_body);
    tcase_add_test(tc, test_a_read_timeout_mid_body_retries_with_the_same_lent_body);
    tcase_add_test(tc, test_random_runs_of_the_public_calls);
    tcase_add_test(tc, test_forwarder_retries_and_frees_with_lent_bodies_out);
    tcase_add_test(tc, test_a_fallback_the_caller_keeps_is_not_counted_off_the_loop);
    suite_add_tcase(s, tc);
    return s;
}
