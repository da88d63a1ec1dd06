/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Second round of attacks on analytics events through the public API
 * (client.h, events.h), aimed at what was reworked: the summarizer's
 * memory of the last flag and context (context kinds per interval, a
 * context freed right after its evaluation), counters per flag version
 * when the store's flag changes under it, the payload's memos (one
 * context pointer alternated with others), the evaluator's recorder
 * (prerequisites three deep, a cycle, one not found, the store's slow
 * path and its failures: each evaluation told once), debug dates at the
 * edges, experiments, the summary's dates against the events', 10,000
 * contexts through an LRU of 1,000, and frees and closes while a large
 * batch is let go of in slices.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include <ldasync/ldasync.h>
#include <ldasync/testing.h>

#include "check_receiver.h"
#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base
#define KEY EVR_KEY

#define FLAGS                                                                           \
    "{'tracked': {'on': true, 'trackEvents': true, 'variations': [true, false],"        \
    "    'fallthrough': {'variation': 0}, 'version': 7, 'salt': 's'},"                  \
    " 'plain': {'on': true, 'variations': ['a', 'b'], 'fallthrough': {'variation': 1}," \
    "    'version': 3, 'salt': 's'}}"

/* Prerequisites three deep (a -> b -> c, all tracked), a cycle (x <-> y),
 * one not found (lost), an experiment and a rule that tracks. */
#define PREREQS "{" PREREQS_BODY
#define PREREQS_BODY                                                                              \
    "'a': {'on': true, 'trackEvents': true, 'variations': ['a0', 'a1'], 'offVariation': 1,"       \
    "    'fallthrough': {'variation': 0}, 'prerequisites': [{'key': 'b', 'variation': 0}],"       \
    "    'version': 1, 'salt': 's'},"                                                             \
    " 'b': {'on': true, 'trackEvents': true, 'variations': ['b0', 'b1'], 'offVariation': 1,"      \
    "    'fallthrough': {'variation': 0}, 'prerequisites': [{'key': 'c', 'variation': 0}],"       \
    "    'version': 2, 'salt': 's'},"                                                             \
    " 'c': {'on': true, 'trackEvents': true, 'variations': ['c0', 'c1'],"                         \
    "    'fallthrough': {'variation': 0}, 'version': 3, 'salt': 's'},"                            \
    " 'x': {'on': true, 'variations': ['x0', 'x1'], 'offVariation': 1,"                           \
    "    'fallthrough': {'variation': 0}, 'prerequisites': [{'key': 'y', 'variation': 0}],"       \
    "    'version': 4, 'salt': 's'},"                                                             \
    " 'y': {'on': true, 'variations': ['y0', 'y1'], 'offVariation': 1,"                           \
    "    'fallthrough': {'variation': 0}, 'prerequisites': [{'key': 'x', 'variation': 0}],"       \
    "    'version': 5, 'salt': 's'},"                                                             \
    " 'lost': {'on': true, 'variations': ['l0', 'l1'], 'offVariation': 1,"                        \
    "    'fallthrough': {'variation': 0}, 'prerequisites': [{'key': 'nowhere', 'variation': 0}]," \
    "    'version': 6, 'salt': 's'},"                                                             \
    " 'exp': {'on': true, 'variations': ['e0', 'e1'], 'fallthrough': {'rollout': {'kind':"        \
    "    'experiment', 'variations': [{'variation': 1, 'weight': 100000}]}},"                     \
    "    'version': 8, 'salt': 's'},"                                                             \
    " 'ruled': {'on': true, 'variations': [1, 2], 'fallthrough': {'variation': 0},"               \
    "    'rules': [{'id': 'r0', 'trackEvents': true, 'variation': 1, 'clauses':"                  \
    "      [{'attribute': 'key', 'op': 'in', 'values': ['ann']}]}], 'version': 9, 'salt': 's'}}"

/* PREREQS with FLAGS' two. */
#define PREREQS_AND_FLAGS                                                               \
    "{'tracked': {'on': true, 'trackEvents': true, 'variations': [true, false],"        \
    "    'fallthrough': {'variation': 0}, 'version': 7, 'salt': 's'},"                  \
    " 'plain': {'on': true, 'variations': ['a', 'b'], 'fallthrough': {'variation': 1}," \
    "    'version': 3, 'salt': 's'}," PREREQS_BODY

static ld_context *ANN;

static void attack_up(void)
{
    ld_test_setup();
    signal(SIGPIPE, SIG_IGN);
    evr_start();
    ANN = ld_test_ctx_of("{'kind': 'user', 'key': 'ann', 'name': 'Ann'}");
}

static void attack_down(void)
{
    ld_context_unref(ANN);
    ANN = NULL;
    evr_stop();
    ld_test_teardown();
}

/* A client with `flags` (NULL: FLAGS) sending events to the local
 * service, configured by `cfg` (borrowed; NULL: evr_config()), on `store`
 * (NULL: its own). */
static ld_client *client_on(const char *flags, const ld_events_config *cfg, ld_store *store)
{
    return evr_client(flags ? flags : FLAGS, cfg, NULL, store, 0);
}

static ld_client *client_with(const char *flags, const ld_events_config *cfg)
{
    return client_on(flags, cfg, NULL);
}

/* A client of at most `cap` events. */
static ld_client *client_cap(const char *flags, int cap)
{
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_capacity(cfg, cap), 0);
    ld_client *c = client_with(flags, cfg);
    ld_events_config_free(cfg);
    return c;
}

/* A JSON evaluation (fallback: JSON null). */
static void json_eval(ld_client *c, const char *key, ld_context *ctx)
{
    ld_future *f = ld_client_json_variation(c, key, ctx, NULL);
    ld_test_wait(f);
    ck_assert(ld_future_is_fulfilled(f));
    ld_future_unref(f);
}

/* The reason kind of a detail evaluation with a string fallback. */
static enum ld_reason_kind detail_eval(ld_client *c, const char *key, ld_context *ctx)
{
    ld_future *f = ld_client_variation_detail(c, key, ctx, LD_VALUE_ANY, json_string("dflt"));
    ld_test_wait(f);
    ck_assert(ld_future_is_fulfilled(f));
    enum ld_reason_kind k = ld_detail_reason_kind(ld_future_ptr(f));
    ld_future_unref(f);
    return k;
}

/* The JSON text of `v` (sorted keys) compared with `want` (' for "). */
static void expect_json(const json_t *v, const char *want)
{
    ck_assert_ptr_nonnull(v);
    json_t *w = ld_test_j(want);
    char *got = json_dumps(v, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
    ck_assert_msg(json_equal(v, w), "got %s\nwant %s", got, want);
    free(got);
    json_decref(w);
}

/* The summary's entry for flag `key` in post `post`, or NULL. */
static json_t *summary_of(int post, const char *key)
{
    json_t *s = evr_event_of(post, "summary", 0);
    ck_assert_ptr_nonnull(s);
    return json_object_get(json_object_get(s, "features"), key);
}

/* The context kinds of flag `key` in the summary of `post`, sorted, as
 * one string ("org,user"). */
static const char *kinds_of(int post, const char *key)
{
    static char buf[256];
    json_t *f = summary_of(post, key);
    ck_assert_msg(f != NULL, "no %s in summary %d", key, post);
    json_t *k = json_object_get(f, "contextKinds");
    size_t n = json_array_size(k);
    const char *names[16];
    ck_assert_uint_le(n, 16);
    for (size_t i = 0; i < n; i++)
        names[i] = json_string_value(json_array_get(k, i));
    for (size_t i = 1; i < n; i++) /* insertion sort */
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        ck_assert_ptr_nonnull(names[i]);
        if (i)
            strcat(buf, ",");
        strcat(buf, names[i]);
    }
    return buf;
}

/* The count of the counter of `key` in post `post` whose version is
 * `version` (-1: unknown) and variation `variation` (-1: none); 0 if none. */
static int64_t counter_of(int post, const char *key, int64_t version, int variation)
{
    json_t *f = summary_of(post, key);
    if (!f)
        return 0;
    json_t *cs = json_object_get(f, "counters");
    size_t i;
    json_t *c;
    int64_t found = 0;
    int matches = 0;
    json_array_foreach(cs, i, c)
    {
        json_t *ver = json_object_get(c, "version");
        json_t *var = json_object_get(c, "variation");
        bool v_ok = version < 0 ? ver == NULL && json_is_true(json_object_get(c, "unknown"))
                                : json_integer_value(ver) == version && ver;
        bool x_ok = variation < 0 ? var == NULL : var && json_integer_value(var) == variation;
        if (v_ok && x_ok) {
            found = json_integer_value(json_object_get(c, "count"));
            matches++;
        }
    }
    ck_assert_int_le(matches, 1); /* one counter per (version, variation) */
    return found;
}

static int64_t int_of(const json_t *e, const char *name)
{
    json_t *v = json_object_get(e, name);
    ck_assert_msg(json_is_integer(v), "no integer %s", name);
    return json_integer_value(v);
}

/* ------------------------------------------------------------------------- */
/* The summarizer's memory of the last flag and context                      */

START_TEST(test_context_kinds_are_exactly_those_of_each_interval)
{
    ld_client *c = client_with(NULL, NULL);
    ld_context *u = ld_test_ctx_of("{'kind': 'user', 'key': 'u'}");
    ld_context *o = ld_test_ctx_of("{'kind': 'org', 'key': 'o'}");
    ld_context *m = ld_test_ctx_of("{'kind': 'multi', 'user': {'key': 'u'}, 'org': {'key': 'o'},"
                                   " 'device': {'key': 'd'}}");
    /* 0: user */
    json_eval(c, "plain", u);
    ck_assert(evr_flush(c));
    /* 1: org only (the flag saw user before) */
    json_eval(c, "plain", o);
    ck_assert(evr_flush(c));
    /* 2: the same context as the last of the interval before, and nothing else */
    json_eval(c, "plain", o);
    ck_assert(evr_flush(c));
    /* 3: another flag with the last context first, then this one with user */
    json_eval(c, "tracked", o);
    json_eval(c, "plain", u);
    ck_assert(evr_flush(c));
    /* 4: the multi-kind context, then the flags alternated */
    json_eval(c, "plain", m);
    json_eval(c, "tracked", u);
    json_eval(c, "plain", m);
    ck_assert(evr_flush(c));
    /* 5: user for one flag only; the other flag with the context last seen
     * in interval 4 (and in the summarizer's memory until now) */
    json_eval(c, "tracked", m);
    json_eval(c, "plain", u);
    json_eval(c, "tracked", m);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 6);
    ck_assert_str_eq(kinds_of(0, "plain"), "user");
    ck_assert_str_eq(kinds_of(1, "plain"), "org");
    ck_assert_str_eq(kinds_of(2, "plain"), "org");
    ck_assert_str_eq(kinds_of(3, "tracked"), "org");
    ck_assert_str_eq(kinds_of(3, "plain"), "user");
    ck_assert_str_eq(kinds_of(4, "plain"), "device,org,user");
    ck_assert_str_eq(kinds_of(4, "tracked"), "user");
    ck_assert_str_eq(kinds_of(5, "tracked"), "device,org,user");
    ck_assert_str_eq(kinds_of(5, "plain"), "user");
    ck_assert_ptr_null(summary_of(2, "tracked")); /* not evaluated then */
    ld_context_unref(u);
    ld_context_unref(o);
    ld_context_unref(m);
    evr_client_done(c);
}
END_TEST

START_TEST(test_a_context_freed_right_after_its_evaluation_is_not_taken_for_the_next)
{
    ld_client *c = client_with(NULL, NULL);
    /* Each context is made, evaluated and let go of at once: the next one
     * may come at the same address; each must be told apart (its own kind
     * in the summary, its own index event). */
    const char *kinds[] = {"user", "org", "user", "device", "org", "user"};
    for (int i = 0; i < 6; i++) {
        char text[128];
        snprintf(text, sizeof text, "{'kind': '%s', 'key': 'k%d'}", kinds[i], i);
        ld_context *x = ld_test_ctx_of(text);
        json_eval(c, "tracked", x);
        ld_context_unref(x);
        if (i % 2 == 1)
            ck_assert(evr_flush(c));
    }
    ck_assert_int_eq(evr.n, 3);
    ck_assert_str_eq(kinds_of(0, "tracked"), "org,user");
    ck_assert_str_eq(kinds_of(1, "tracked"), "device,user");
    ck_assert_str_eq(kinds_of(2, "tracked"), "org,user");
    for (int p = 0; p < 3; p++) {
        ck_assert_int_eq(evr_count(p, "index"), 2);
        ck_assert_int_eq(evr_count(p, "feature"), 2);
        for (int i = 0; i < 2; i++) {
            char want[16];
            snprintf(want, sizeof want, "k%d", p * 2 + i);
            json_t *ix = json_object_get(evr_event_of(p, "index", i), "context");
            json_t *fe = json_object_get(evr_event_of(p, "feature", i), "context");
            ck_assert_str_eq(json_string_value(json_object_get(ix, "key")), want);
            ck_assert_str_eq(json_string_value(json_object_get(fe, "key")), want);
            ck_assert_str_eq(json_string_value(json_object_get(fe, "kind")), kinds[p * 2 + i]);
        }
    }
    evr_client_done(c);
}
END_TEST

/* The later store's flag `key` set to version `version` (serving
 * variation `var`), or removed (version < 0). */
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

START_TEST(test_counters_per_version_when_the_flag_changes_within_an_interval)
{
    json_t *data = ld_test_data_of(FLAGS, NULL);
    struct ld_test_later *l;
    ld_store *store = ld_test_later_new(data, &l);
    json_decref(data);
    ld_client *c = client_on(NULL, NULL, store);
    /* Versions up, down (an older one after a newer: each its own
     * counters), deleted (unknown), back: what counts must follow. */
    struct {
        int version, var;
    } steps[] = {{5, 0}, {5, 0}, {6, 1}, {5, 0}, {6, 1}, {6, 2}, {-1, 0}, {9, 0}, {5, 0}, {-1, 0}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        later_set(l, "moving", steps[i].version, steps[i].var);
        json_eval(c, "moving", ANN);
    }
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 1);
    ck_assert_int_eq(counter_of(0, "moving", 5, 0), 4);
    ck_assert_int_eq(counter_of(0, "moving", 6, 1), 2);
    ck_assert_int_eq(counter_of(0, "moving", 6, 2), 1);
    ck_assert_int_eq(counter_of(0, "moving", 9, 0), 1);
    ck_assert_int_eq(counter_of(0, "moving", -1, -1), 2);
    ck_assert_uint_eq(json_array_size(json_object_get(summary_of(0, "moving"), "counters")), 5);
    /* The next interval starts afresh, the older version first. */
    later_set(l, "moving", 5, 0);
    json_eval(c, "moving", ANN);
    later_set(l, "moving", 9, 0);
    json_eval(c, "moving", ANN);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 2);
    ck_assert_int_eq(counter_of(1, "moving", 5, 0), 1);
    ck_assert_int_eq(counter_of(1, "moving", 9, 0), 1);
    ck_assert_uint_eq(json_array_size(json_object_get(summary_of(1, "moving"), "counters")), 2);
    evr_client_done(c);
    ld_store_free(store);
    evr_drain();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* The payload's memos                                                       */

START_TEST(test_one_context_pointer_alternated_with_others_keeps_each_its_own_text)
{
    ld_client *c = client_with(NULL, NULL);
    ld_context *anon = ld_test_ctx_of("{'kind': 'user', 'key': 'z', 'anonymous': true,"
                                      " 'name': 'Zed'}");
    ld_context *bob = ld_test_ctx_of("{'kind': 'user', 'key': 'bob', 'name': 'Bob'}");
    ld_context *seq[] = {anon, ANN, anon, bob, anon, anon, ANN, bob, bob, anon};
    size_t n = sizeof seq / sizeof seq[0];
    for (size_t i = 0; i < n; i++) {
        json_eval(c, (i % 3 == 2) ? "plain" : "tracked", seq[i]);
        ck_assert_int_eq(ld_client_track(c, i % 2 ? "odd" : "even", seq[i], NULL), 0);
    }
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 1);
    /* index events: each context's first appearance, not redacted */
    ck_assert_int_eq(evr_count(0, "index"), 3);
    expect_json(json_object_get(evr_event_of(0, "index", 0), "context"),
                "{'kind': 'user', 'key': 'z', 'anonymous': true, 'name': 'Zed'}");
    /* walk every event: each carries its own context, redacted as its kind asks */
    json_t *a = evr_events(0);
    size_t i, fi = 0, ci = 0;
    json_t *e;
    size_t fseq[16], nf = 0;
    for (size_t k = 0; k < n; k++)
        if (k % 3 != 2)
            fseq[nf++] = k;
    json_array_foreach(a, i, e)
    {
        const char *kind = json_string_value(json_object_get(e, "kind"));
        ld_context *want;
        if (strcmp(kind, "feature") == 0)
            want = seq[fseq[fi++]];
        else if (strcmp(kind, "custom") == 0)
            want = seq[ci++];
        else
            continue;
        json_t *ctx = json_object_get(e, "context");
        const char *key = json_string_value(json_object_get(ctx, "key"));
        ck_assert_ptr_nonnull(key);
        if (want == anon) {
            ck_assert_str_eq(key, "z");
            expect_json(ctx, "{'kind': 'user', 'key': 'z', 'anonymous': true,"
                             " '_meta': {'redactedAttributes': ['name']}}");
        } else if (want == ANN) {
            expect_json(ctx, "{'kind': 'user', 'key': 'ann', 'name': 'Ann'}");
        } else {
            expect_json(ctx, "{'kind': 'user', 'key': 'bob', 'name': 'Bob'}");
        }
        if (strcmp(kind, "custom") == 0)
            ck_assert_str_eq(json_string_value(json_object_get(e, "key")),
                             (ci - 1) % 2 ? "odd" : "even");
        else
            ck_assert_str_eq(json_string_value(json_object_get(e, "key")), "tracked");
    }
    ck_assert_uint_eq(fi, nf);
    ck_assert_uint_eq(ci, n);
    ld_context_unref(anon);
    ld_context_unref(bob);
    evr_client_done(c);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* The recorder: prerequisites, the store's slow path                        */

/* Checks post `post` for one evaluation of "a" (three deep): c's event
 * (prereqOf b), b's (prereqOf a), then a's, reasons only `with_reason`. */
static void expect_three_deep(int post, bool with_reason)
{
    ck_assert_int_eq(evr_count(post, "feature"), 3);
    const char *keys[] = {"c", "b", "a"}, *of[] = {"b", "a", NULL};
    for (int i = 0; i < 3; i++) {
        json_t *e = evr_event_of(post, "feature", i);
        ck_assert_str_eq(json_string_value(json_object_get(e, "key")), keys[i]);
        json_t *p = json_object_get(e, "prereqOf");
        if (of[i])
            ck_assert_str_eq(json_string_value(p), of[i]);
        else
            ck_assert_ptr_null(p);
        if (with_reason)
            expect_json(json_object_get(e, "reason"), "{'kind': 'FALLTHROUGH'}");
        else
            ck_assert_ptr_null(json_object_get(e, "reason"));
        /* a prerequisite's default is null; the flag's the caller's */
        json_t *d = json_object_get(e, "default");
        ck_assert_ptr_nonnull(d);
        if (of[i])
            ck_assert(json_is_null(d));
    }
    ck_assert_int_eq(counter_of(post, "a", 1, 0), 1);
    ck_assert_int_eq(counter_of(post, "b", 2, 0), 1);
    ck_assert_int_eq(counter_of(post, "c", 3, 0), 1);
}

START_TEST(test_prerequisites_three_deep_typed_and_detail)
{
    ld_client *c = client_with(PREREQS, NULL);
    json_eval(c, "a", ANN);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(detail_eval(c, "a", ANN), LD_REASON_FALLTHROUGH);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 2);
    expect_three_deep(0, false);
    expect_three_deep(1, true);
    evr_client_done(c);
}
END_TEST

START_TEST(test_a_prerequisite_cycle_and_one_not_found)
{
    ld_client *c = client_with(PREREQS, NULL);
    ck_assert_int_eq(detail_eval(c, "x", ANN), LD_REASON_ERROR);
    ck_assert_int_eq(detail_eval(c, "lost", ANN), LD_REASON_PREREQUISITE_FAILED);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 1);
    /* the malformed flag: the fallback, its version, no variation */
    json_t *x = summary_of(0, "x");
    ck_assert_ptr_nonnull(x);
    ck_assert_int_eq(counter_of(0, "x", 4, -1), 1);
    expect_json(json_object_get(x, "default"), "'dflt'");
    /* "lost" is off its prerequisite: its off variation */
    ck_assert_int_eq(counter_of(0, "lost", 6, 1), 1);
    /* a prerequisite not found is not evaluated: LaunchDarkly's SDKs send
     * nothing of it */
    ck_assert_ptr_null(summary_of(0, "nowhere"));
    /* nothing tracked: no feature events */
    ck_assert_int_eq(evr_count(0, "feature"), 0);
    evr_client_done(c);
}
END_TEST

START_TEST(test_the_store_s_slow_path_records_each_evaluation_once)
{
    json_t *data = ld_test_data_of(PREREQS, NULL);
    struct ld_test_later *l;
    ld_store *store = ld_test_later_new(data, &l);
    json_decref(data);
    ld_client *c = client_on(PREREQS, NULL, store);
    /* Each read of a prerequisite is a round trip: the walk stops twice
     * before it completes, and is told of once. */
    int before = l->batches;
    json_eval(c, "a", ANN);
    ck_assert_int_ge(l->batches - before, 1);
    ck_assert_int_eq(detail_eval(c, "a", ANN), LD_REASON_FALLTHROUGH);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 1);
    ck_assert_int_eq(evr_count(0, "feature"), 6);
    ck_assert_int_eq(counter_of(0, "a", 1, 0), 2);
    ck_assert_int_eq(counter_of(0, "b", 2, 0), 2);
    ck_assert_int_eq(counter_of(0, "c", 3, 0), 2);
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_null(json_object_get(evr_event_of(0, "feature", i), "reason"));
    for (int i = 3; i < 6; i++)
        ck_assert_ptr_nonnull(json_object_get(evr_event_of(0, "feature", i), "reason"));
    /* Many at once, all waiting on the store together. */
    ld_future *f[20];
    for (int i = 0; i < 20; i++)
        f[i] = ld_client_json_variation(c, i % 2 ? "a" : "x", ANN, NULL);
    for (int i = 0; i < 20; i++)
        ld_test_await_ok(f[i]);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(counter_of(1, "a", 1, 0), 10);
    ck_assert_int_eq(counter_of(1, "b", 2, 0), 10);
    ck_assert_int_eq(counter_of(1, "c", 3, 0), 10);
    ck_assert_int_eq(counter_of(1, "x", 4, -1), 10);
    ck_assert_int_eq(evr_count(1, "feature"), 30);
    /* The flag's own read fails: counted once, unknown, with the fallback. */
    l->fail_key = "tracked";
    ld_future *g = ld_client_bool_variation(c, "tracked", ANN, true);
    ck_assert(ld_test_await_bool(g));
    /* A prerequisite's read fails: the flag asked for counted once. */
    l->fail_key = "c";
    json_eval(c, "a", ANN);
    l->fail_key = NULL;
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 3);
    ck_assert_int_eq(counter_of(2, "tracked", -1, -1), 1);
    expect_json(json_object_get(summary_of(2, "tracked"), "default"), "true");
    json_t *a = summary_of(2, "a");
    ck_assert_ptr_nonnull(a);
    int64_t total = 0;
    size_t i;
    json_t *ct;
    json_array_foreach(json_object_get(a, "counters"), i, ct) total += int_of(ct, "count");
    ck_assert_int_eq(total, 1);
    ck_assert_int_le(evr_count(2, "feature"), 3);
    evr_client_done(c);
    ld_store_free(store);
    evr_drain();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Debug dates and experiments                                               */

static char *dbg_flags(int64_t until)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{'dbg': {'on': true, 'variations': [true, false], 'fallthrough': {'variation': 0},"
             " 'debugEventsUntilDate': %lld, 'version': 1, 'salt': 's'}}",
             (long long)until);
    return buf;
}

START_TEST(test_debug_dates_now_past_and_far_future)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    struct {
        int64_t until;
        size_t debug;
    } cases[] = {
        {now - 20, 0}, {1, 0}, {now + 60000, 1}, {INT64_C(253402300799999), 1}, {INT64_MAX, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int before = evr.n;
        ld_client *c = client_with(dbg_flags(cases[k].until), NULL);
        json_eval(c, "dbg", ANN);
        ck_assert(evr_flush(c));
        ck_assert_int_eq(evr.n, before + 1);
        ck_assert_msg(evr_count(before, "debug") == cases[k].debug, "until %lld: %zu debug",
                      (long long)cases[k].until, evr_count(before, "debug"));
        ck_assert_int_eq(evr_count(before, "feature"), 0);
        ck_assert_int_eq(counter_of(before, "dbg", 1, 0), 1);
        evr_client_done(c);
    }
}
END_TEST

START_TEST(test_experiment_rollout_and_a_tracking_rule_carry_the_reason)
{
    ld_client *c = client_with(PREREQS, NULL);
    ld_context *bob = ld_test_ctx_of("{'kind': 'user', 'key': 'bob'}");
    json_eval(c, "exp", ANN);   /* typed: the experiment's reason anyway */
    json_eval(c, "ruled", ANN); /* the rule tracks */
    json_eval(c, "ruled", bob); /* falls through: not tracked */
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "feature"), 2);
    json_t *e = evr_event_of(0, "feature", 0);
    ck_assert_str_eq(json_string_value(json_object_get(e, "key")), "exp");
    expect_json(json_object_get(e, "reason"), "{'kind': 'FALLTHROUGH', 'inExperiment': true}");
    ck_assert_int_eq(int_of(e, "variation"), 1);
    e = evr_event_of(0, "feature", 1);
    expect_json(json_object_get(e, "reason"),
                "{'kind': 'RULE_MATCH', 'ruleIndex': 0, 'ruleId': 'r0'}");
    ck_assert_int_eq(counter_of(0, "ruled", 9, 1), 1);
    ck_assert_int_eq(counter_of(0, "ruled", 9, 0), 1);
    ld_context_unref(bob);
    evr_client_done(c);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Dates, the LRU                                                            */

START_TEST(test_summary_dates_bound_every_event_across_intervals)
{
    ld_client *c = client_with(NULL, NULL);
    int64_t prev_end = 0;
    for (int p = 0; p < 4; p++) {
        for (int i = 0; i < 5; i++) {
            json_eval(c, "tracked", ANN);
            ck_assert_int_eq(ld_client_track(c, "t", ANN, NULL), 0);
            struct timespec d = {0, 3 * 1000000};
            nanosleep(&d, NULL);
        }
        /* some time between the last record and the flush */
        struct timespec d = {0, 30 * 1000000};
        nanosleep(&d, NULL);
        ck_assert(evr_flush(c));
        json_t *s = evr_event_of(p, "summary", 0);
        ck_assert_ptr_nonnull(s);
        int64_t start = int_of(s, "startDate"), end = int_of(s, "endDate");
        ck_assert_int_ge(start, prev_end);
        ck_assert_int_ge(end, start + 30); /* the flush's time, not the last record's */
        size_t i;
        json_t *e;
        json_array_foreach(evr_events(p), i, e)
        {
            if (e == s)
                continue;
            int64_t t = int_of(e, "creationDate");
            ck_assert_int_ge(t, start);
            ck_assert_int_le(t, end);
        }
        prev_end = end;
    }
    evr_client_done(c);
}
END_TEST

START_TEST(test_10000_contexts_through_an_lru_of_1000)
{
    enum { N = 10000, CAP = 1000 };
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_capacity(cfg, 3 * N), 0);
    ck_assert_int_eq(ld_events_config_set_context_keys(cfg, CAP, 3600 * 1000), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ld_context **x = malloc(N * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int i = 0; i < N; i++) {
        char text[64];
        snprintf(text, sizeof text, "{'kind': 'user', 'key': 'c%d'}", i);
        x[i] = ld_test_ctx_of(text);
        json_eval(c, "plain", x[i]);
    }
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "index"), N);
    ck_assert_int_eq(counter_of(0, "plain", 3, 1), N);
    /* the last CAP again: all known */
    uint64_t dedup = evr_stats(c).deduplicated;
    for (int i = N - CAP; i < N; i++)
        json_eval(c, "plain", x[i]);
    /* the first ten again: forgotten long ago */
    for (int i = 0; i < 10; i++)
        json_eval(c, "plain", x[i]);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 2);
    ck_assert_uint_eq(evr_stats(c).deduplicated - dedup, CAP);
    ck_assert_int_eq(evr_count(1, "index"), 10);
    for (int i = 0; i < 10; i++) {
        char want[16];
        snprintf(want, sizeof want, "c%d", i);
        json_t *ctx = json_object_get(evr_event_of(1, "index", i), "context");
        ck_assert_str_eq(json_string_value(json_object_get(ctx, "key")), want);
    }
    ck_assert_int_eq(counter_of(1, "plain", 3, 1), CAP + 10);
    for (int i = 0; i < N; i++)
        ld_context_unref(x[i]);
    free(x);
    evr_client_done(c);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* A large batch let go of in slices: free, close, flushes in callbacks      */

/* A client holding `n` custom events (and an index event). */
static ld_client *client_holding(int n)
{
    ld_client *c = client_cap(NULL, 3 * n);
    json_t *data = ld_test_j("{'n': [1, 2, 3]}");
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(ld_client_track(c, "many", ANN, data), 0);
    json_decref(data);
    return c;
}

START_TEST(test_free_while_a_large_batch_is_let_go_of_in_slices)
{
    /* The client freed after k passes of the loop from its flush: before
     * the write, during it, while the records are let go of, while the post
     * is held. Nothing leaks (ASan), the flush settles. */
    evr.hold = true;
    for (int k = 0; k < 8; k++) {
        ld_client *c = client_holding(10000);
        ld_future *f = ld_client_flush(c);
        for (int pass = 0; pass < k; pass++)
            event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        ld_client_free(c);
        ld_test_wait(f);
        ck_assert(!ld_future_is_pending(f));
        ld_future_unref(f);
        evr_drain();
    }
    evr_release_held();
    evr_drain();
}
END_TEST

START_TEST(test_close_while_a_large_batch_is_let_go_of_in_slices)
{
    for (int k = 0; k < 6; k++) {
        int before = evr.n;
        ld_client *c = client_holding(9000);
        ld_future *f = ld_client_flush(c);
        for (int pass = 0; pass < k; pass++)
            event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        ck_assert_int_eq(ld_client_track(c, "after", ANN, NULL), 0);
        ld_future *cl = ld_client_close(c);
        ld_test_await_ok(cl);
        ck_assert(ld_test_await_bool(f));
        ck_assert_int_eq(evr.n, before + 2);
        /* two batches under way at once: either may be posted first */
        int big = evr_count(before, "custom") == 9000 ? before : before + 1;
        ck_assert_int_eq(evr_count(big, "custom"), 9000);
        ck_assert_int_eq(evr_count(big == before ? before + 1 : before, "custom"), 1);
        ld_events_stats st = evr_stats(c);
        ck_assert_int_eq(st.in_flight, 0);
        ck_assert_int_eq(st.buffered, 0);
        ck_assert_int_eq(st.payloads_sent, 2);
        evr_client_done(c);
    }
}
END_TEST

struct chain {
    ld_client *c;
    int left, done;
    bool all_true;
};

static void chain_cb(ld_future *f, void *arg)
{
    struct chain *ch = arg;
    ch->done++;
    ch->all_true = ch->all_true && ld_future_is_fulfilled(f) && ld_future_bool(f);
    if (ch->left-- <= 0)
        return;
    ck_assert_int_eq(ld_client_track(ch->c, "again", ANN, NULL), 0);
    ld_future *g = ld_client_flush(ch->c);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(ld_future_on_complete(g, chain_cb, ch), 0);
}

START_TEST(test_flush_called_inside_its_callback_ten_times)
{
    ld_client *c = client_with(NULL, NULL);
    struct chain ch = {c, 10, 0, true};
    ck_assert_int_eq(ld_client_track(c, "first", ANN, NULL), 0);
    ld_future *f = ld_client_flush(c);
    ck_assert_int_eq(ld_future_on_complete(f, chain_cb, &ch), 0);
    for (int i = 0; i < 100000 && ch.done < 11; i++)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert_int_eq(ch.done, 11);
    ck_assert(ch.all_true);
    ck_assert_int_eq(evr.n, 11);
    ck_assert_int_eq(evr_count(0, "index"), 1);
    for (int p = 1; p < 11; p++) {
        ck_assert_uint_eq(json_array_size(evr_events(p)), 1);
        ck_assert_str_eq(json_string_value(json_object_get(evr_event_of(p, "custom", 0), "key")),
                         "again");
    }
    evr_client_done(c);
}
END_TEST

START_TEST(test_flush_with_a_slow_service_then_free)
{
    evr.hold = true;
    ld_client *c = client_with(NULL, NULL);
    ld_future *f[3];
    for (int i = 0; i < 3; i++) {
        json_eval(c, "tracked", ANN);
        f[i] = ld_client_flush(c);
    }
    while (evr.nheld < 3)
        event_base_loop(B, EVLOOP_ONCE);
    for (int i = 0; i < 3; i++)
        ck_assert(ld_future_is_pending(f[i]));
    ck_assert_int_eq(evr_stats(c).in_flight, 3);
    ld_client_free(c);
    for (int i = 0; i < 3; i++) {
        ld_test_wait(f[i]);
        ck_assert(!ld_future_is_pending(f[i]));
        ld_future_unref(f[i]);
    }
    evr_release_held();
    evr_drain();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* More of the summary: defaults, values, variations past the mapped ones    */

START_TEST(test_first_default_and_first_value_of_each_interval)
{
    ld_client *c = client_with(PREREQS, NULL);
    /* "c" first as a prerequisite (default null), then asked for */
    json_eval(c, "b", ANN);
    ld_future *f = ld_client_json_variation(c, "c", ANN, json_string("dd"));
    ld_test_await_ok(f);
    /* an unknown flag: its first fallback is the counter's value and the
     * default */
    for (int i = 1; i <= 3; i++) {
        f = ld_client_json_variation(c, "nope", ANN, json_integer(i));
        ld_test_await_ok(f);
    }
    ck_assert(evr_flush(c));
    expect_json(json_object_get(summary_of(0, "c"), "default"), "null");
    ck_assert_int_eq(counter_of(0, "c", 3, 0), 2);
    json_t *nope = summary_of(0, "nope");
    expect_json(json_object_get(nope, "default"), "1");
    expect_json(json_object_get(json_array_get(json_object_get(nope, "counters"), 0), "value"),
                "1");
    ck_assert_int_eq(counter_of(0, "nope", -1, -1), 3);
    /* the next interval: asked for first, then as a prerequisite */
    f = ld_client_json_variation(c, "c", ANN, json_string("dd"));
    ld_test_await_ok(f);
    json_eval(c, "b", ANN);
    f = ld_client_json_variation(c, "nope", ANN, json_integer(7));
    ld_test_await_ok(f);
    ck_assert(evr_flush(c));
    expect_json(json_object_get(summary_of(1, "c"), "default"), "'dd'");
    expect_json(json_object_get(summary_of(1, "nope"), "default"), "7");
    expect_json(json_object_get(
                    json_array_get(json_object_get(summary_of(1, "nope"), "counters"), 0), "value"),
                "7");
    evr_client_done(c);
}
END_TEST

/* The later store's flag `key`: version `version`, `nvar` variations
 * (variation i is i), serving `var`. */
static void later_set_wide(struct ld_test_later *l, const char *key, int version, int nvar, int var)
{
    json_t *vars = json_array();
    for (int i = 0; i < nvar; i++)
        json_array_append_new(vars, json_integer(i));
    json_t *f = json_pack("{s:s,s:b,s:o,s:{s:i},s:i,s:s}", "key", key, "on", 1, "variations", vars,
                          "fallthrough", "variation", var, "version", version, "salt", "s");
    ck_assert_ptr_nonnull(f);
    json_object_set_new(json_object_get(l->data, "features"), key, f);
}

START_TEST(test_variations_past_1024_and_versions_mixed)
{
    json_t *data = ld_test_data_of(FLAGS, NULL);
    struct ld_test_later *l;
    ld_store *store = ld_test_later_new(data, &l);
    json_decref(data);
    ld_client *c = client_on(NULL, NULL, store);
    struct {
        int version, var;
    } steps[] = {{1, 1500}, {1, 3},    {1, 1500}, {2, 1023}, {2, 1024}, {1, 1500},
                 {2, 1024}, {2, 1023}, {3, 0},    {2, 1023}, {3, 1999}, {1, 3}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        later_set_wide(l, "wide", steps[i].version, 2000, steps[i].var);
        ld_future *f = ld_client_int_variation(c, "wide", ANN, -1);
        ld_test_wait(f);
        ck_assert(ld_future_is_fulfilled(f));
        ck_assert_int_eq(ld_future_int(f), steps[i].var);
        ld_future_unref(f);
    }
    ck_assert(evr_flush(c));
    ck_assert_int_eq(counter_of(0, "wide", 1, 1500), 3);
    ck_assert_int_eq(counter_of(0, "wide", 1, 3), 2);
    ck_assert_int_eq(counter_of(0, "wide", 2, 1023), 3);
    ck_assert_int_eq(counter_of(0, "wide", 2, 1024), 2);
    ck_assert_int_eq(counter_of(0, "wide", 3, 0), 1);
    ck_assert_int_eq(counter_of(0, "wide", 3, 1999), 1);
    ck_assert_uint_eq(json_array_size(json_object_get(summary_of(0, "wide"), "counters")), 6);
    evr_client_done(c);
    ld_store_free(store);
    evr_drain();
}
END_TEST

START_TEST(test_an_experiment_as_a_prerequisite_carries_its_reason_in_a_typed_call)
{
    ld_client *c = client_with(
        "{'exp': {'on': true, 'variations': ['e0', 'e1'], 'fallthrough': {'rollout': {'kind':"
        "    'experiment', 'variations': [{'variation': 1, 'weight': 100000}]}},"
        "    'version': 8, 'salt': 's'},"
        " 'p': {'on': true, 'variations': ['p0', 'p1'], 'offVariation': 0,"
        "    'fallthrough': {'variation': 1}, 'prerequisites': [{'key': 'exp', 'variation': 1}],"
        "    'version': 2, 'salt': 's'}}",
        NULL);
    json_eval(c, "p", ANN);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "feature"), 1);
    json_t *e = evr_event_of(0, "feature", 0);
    ck_assert_str_eq(json_string_value(json_object_get(e, "key")), "exp");
    ck_assert_str_eq(json_string_value(json_object_get(e, "prereqOf")), "p");
    expect_json(json_object_get(e, "reason"), "{'kind': 'FALLTHROUGH', 'inExperiment': true}");
    ck_assert_int_eq(counter_of(0, "p", 2, 1), 1);
    ck_assert_int_eq(counter_of(0, "exp", 8, 1), 1);
    evr_client_done(c);
}
END_TEST

START_TEST(test_free_with_evaluations_waiting_on_the_store)
{
    json_t *data = ld_test_data_of(PREREQS, NULL);
    struct ld_test_later *l;
    ld_store *store = ld_test_later_new(data, &l);
    json_decref(data);
    ld_client *c = client_on(PREREQS, NULL, store);
    l->hold = true;
    ld_future *f[20];
    for (int i = 0; i < 20; i++)
        f[i] = ld_client_json_variation(c, i % 2 ? "a" : "tracked", ANN, NULL);
    evr_drain();
    ld_client_free(c);
    for (int i = 0; i < 20; i++) {
        ld_test_wait(f[i]);
        ck_assert(ld_future_is_rejected(f[i]));
        ck_assert_int_eq(ld_future_error(f[i]), LD_ECANCELED);
        ld_future_unref(f[i]);
    }
    l->hold = false;
    ld_test_later_release(l);
    evr_drain();
    ld_store_free(store);
    evr_drain();
    ck_assert_int_eq(evr.n, 0);
}
END_TEST

START_TEST(test_close_with_evaluations_waiting_on_a_prerequisite_read)
{
    json_t *data = ld_test_data_of(PREREQS, NULL);
    struct ld_test_later *l;
    ld_store *store = ld_test_later_new(data, &l);
    json_decref(data);
    ld_client *c = client_on(PREREQS, NULL, store);
    ld_future *f[6];
    for (int i = 0; i < 6; i++)
        f[i] = ld_client_json_variation(c, "a", ANN, NULL);
    /* one pass: the flags read, the walks stopped on "b" */
    event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ld_future *cl = ld_client_close(c);
    for (int i = 0; i < 6; i++)
        ld_test_await_ok(f[i]);
    ld_test_await_ok(cl);
    /* whatever was recorded before the close was sent, each once */
    int64_t a = 0, b = 0, cc = 0;
    for (int p = 0; p < evr.n; p++) {
        a += counter_of(p, "a", 1, 0);
        b += counter_of(p, "b", 2, 0);
        cc += counter_of(p, "c", 3, 0);
    }
    ck_assert_int_le(a, 6);
    ck_assert_int_eq(a, b);
    ck_assert_int_eq(b, cc);
    ld_events_stats st = evr_stats(c);
    ck_assert_int_eq(st.buffered, 0);
    ck_assert_int_eq(st.in_flight, 0);
    evr_client_done(c);
    ld_store_free(store);
    evr_drain();
}
END_TEST

/* The client freed after k passes of the loop from its flush, the batch
 * being 12,000 feature events with reasons (each holding its flag, its
 * context and a reason): all let go of once the loop runs, though the
 * client's store went first. */
START_TEST(test_free_while_feature_events_holding_flags_are_let_go_of)
{
    evr.hold = true;
    ld_context *x[4];
    for (int i = 0; i < 4; i++) {
        char text[64];
        snprintf(text, sizeof text, "{'kind': 'user', 'key': 'f%d', 'anonymous': %s}", i,
                 i % 2 ? "true" : "false");
        x[i] = ld_test_ctx_of(text);
    }
    for (int k = 0; k < 6; k++) {
        ld_client *c = client_cap(PREREQS, 40000);
        ld_future *f[64];
        for (int i = 0; i < 3000; i += 64) {
            int m = 3000 - i < 64 ? 3000 - i : 64;
            for (int j = 0; j < m; j++)
                f[j] = ld_client_variation_detail(c, "a", x[(i + j) % 4], LD_VALUE_ANY, NULL);
            for (int j = 0; j < m; j++)
                ld_test_await_ok(f[j]);
        }
        ck_assert_uint_ge(evr_stats(c).buffered, 9000);
        ld_future *fl = ld_client_flush(c);
        for (int pass = 0; pass < k * 2; pass++)
            event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        ld_client_free(c);
        ld_test_wait(fl);
        ck_assert(!ld_future_is_pending(fl));
        ld_future_unref(fl);
        evr_drain();
    }
    for (int i = 0; i < 4; i++)
        ld_context_unref(x[i]);
    evr_release_held();
    evr_drain();
}
END_TEST

START_TEST(test_all_flags_states_are_not_counted)
{
    ld_client *c = client_with(PREREQS, NULL);
    ld_future *f = ld_client_all_flags(c, ANN, 0);
    ld_test_await_ok(f);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 0); /* nothing recorded: nothing to post */
    ld_events_stats st = evr_stats(c);
    ck_assert_int_eq(st.events, 0);
    evr_client_done(c);
}
END_TEST

/* A random run checked against a model of the summary: flags of
 * prerequisites, rules, unknown flags; contexts of one, two and three
 * kinds, made again at times (a new pointer for the same context); tracks
 * and identifies between; flushes at random points. Each interval's
 * contextKinds and counters must be exactly the model's. */
enum { FZ_FLAGS = 6, FZ_CTXS = 6 };
static const char *const fz_flag[FZ_FLAGS] = {"plain", "tracked", "nope", "a", "ruled", "b"};
/* kinds: bit 0 device, 1 org, 2 user */
static const char *const fz_ctx[FZ_CTXS] = {
    "{'kind': 'user', 'key': 'ann'}",
    "{'kind': 'org', 'key': 'o1'}",
    "{'kind': 'multi', 'user': {'key': 'ann'}, 'org': {'key': 'o1'}}",
    "{'kind': 'multi', 'device': {'key': 'd1'}, 'org': {'key': 'o2'}}",
    "{'kind': 'device', 'key': 'd1'}",
    "{'kind': 'multi', 'device': {'key': 'd9'}, 'org': {'key': 'o9'}, 'user': {'key': 'u9'}}",
};
static const int fz_kinds[FZ_CTXS] = {4, 2, 6, 3, 1, 7};
static const bool fz_ann[FZ_CTXS] = {true, false, true, false, false, false};

struct fz_model {
    int kinds[FZ_FLAGS + 2]; /* per summary key below */
    int64_t count[FZ_FLAGS + 2][2];
};
/* summary keys: the flags, then "c" (a prerequisite of b) */
static const char *const fz_key[FZ_FLAGS + 1] = {"plain", "tracked", "nope", "a",
                                                 "ruled", "b",       "c"};
static const int fz_version[FZ_FLAGS + 1] = {3, 7, -1, 1, 9, 2, 3};

static void fz_count(struct fz_model *m, int k, int var, int kinds)
{
    m->kinds[k] |= kinds;
    m->count[k][var]++;
}

static void fz_check(int post, const struct fz_model *m)
{
    for (int k = 0; k < FZ_FLAGS + 1; k++) {
        if (!m->kinds[k]) {
            ck_assert_msg(summary_of(post, fz_key[k]) == NULL, "post %d: %s not evaluated", post,
                          fz_key[k]);
            continue;
        }
        char want[64] = "";
        const char *names[3] = {"device", "org", "user"};
        for (int b = 0; b < 3; b++)
            if (m->kinds[k] & (1 << b)) {
                if (*want)
                    strcat(want, ",");
                strcat(want, names[b]);
            }
        ck_assert_msg(strcmp(kinds_of(post, fz_key[k]), want) == 0, "post %d %s: kinds %s, want %s",
                      post, fz_key[k], kinds_of(post, fz_key[k]), want);
        size_t ncounters = 0;
        for (int v = 0; v < 2; v++) {
            if (!m->count[k][v])
                continue;
            ncounters++;
            int var = fz_version[k] < 0 ? -1 : v;
            ck_assert_msg(counter_of(post, fz_key[k], fz_version[k], var) == m->count[k][v],
                          "post %d %s var %d: %lld, want %lld", post, fz_key[k], var,
                          (long long)counter_of(post, fz_key[k], fz_version[k], var),
                          (long long)m->count[k][v]);
        }
        ck_assert_uint_eq(json_array_size(json_object_get(summary_of(post, fz_key[k]), "counters")),
                          ncounters);
    }
}

START_TEST(test_random_runs_match_a_model_of_the_summary)
{
    unsigned seed = 12345;
    for (int run = 0; run < 3; run++) {
        ld_client *c = client_with(PREREQS_AND_FLAGS, NULL);
        ld_context *x[FZ_CTXS];
        for (int i = 0; i < FZ_CTXS; i++)
            x[i] = ld_test_ctx_of(fz_ctx[i]);
        int posts = 0;
        while (posts < 5) {
            struct fz_model m;
            memset(&m, 0, sizeof m);
            int ops = 1 + rand_r(&seed) % 200;
            for (int op = 0; op < ops; op++) {
                int r = rand_r(&seed) % 100;
                int ci = rand_r(&seed) % FZ_CTXS;
                if (r < 5) { /* the same context made again */
                    ld_context_unref(x[ci]);
                    x[ci] = ld_test_ctx_of(fz_ctx[ci]);
                    continue;
                }
                if (r < 10) {
                    ck_assert_int_eq(ld_client_track(c, "t", x[ci], NULL), 0);
                    continue;
                }
                if (r < 13) {
                    ck_assert_int_eq(ld_client_identify(c, x[ci]), 0);
                    continue;
                }
                int fi = rand_r(&seed) % FZ_FLAGS;
                json_eval(c, fz_flag[fi], x[ci]);
                int kinds = fz_kinds[ci];
                switch (fi) {
                case 0: /* plain: b */
                    fz_count(&m, 0, 1, kinds);
                    break;
                case 1: /* tracked: true */
                    fz_count(&m, 1, 0, kinds);
                    break;
                case 2: /* unknown */
                    fz_count(&m, 2, 0, kinds);
                    break;
                case 3: /* a: b, c first */
                    fz_count(&m, 6, 0, kinds);
                    fz_count(&m, 5, 0, kinds);
                    fz_count(&m, 3, 0, kinds);
                    break;
                case 4: /* ruled: the rule for ann */
                    fz_count(&m, 4, fz_ann[ci] ? 1 : 0, kinds);
                    break;
                default: /* b: c first */
                    fz_count(&m, 6, 0, kinds);
                    fz_count(&m, 5, 0, kinds);
                    break;
                }
            }
            int before = evr.n;
            ck_assert(evr_flush(c));
            bool any = false;
            for (int k = 0; k < FZ_FLAGS + 1; k++)
                any = any || m.kinds[k];
            if (!any)
                continue;
            ck_assert_int_eq(evr.n, before + 1);
            fz_check(before, &m);
            posts++;
        }
        for (int i = 0; i < FZ_CTXS; i++)
            ld_context_unref(x[i]);
        evr_client_done(c);
        evr_stop();
        evr_start();
    }
}
END_TEST

/* A typed call of the wrong type: LaunchDarkly's SDKs count the flag's
 * version with no variation and the fallback as value, and its
 * prerequisites were evaluated all the same. */
START_TEST(test_wrong_type_counts_the_fallback_with_the_version_and_no_variation)
{
    ld_client *c = client_with(PREREQS_AND_FLAGS, NULL);
    ld_future *f = ld_client_int_variation(c, "tracked", ANN, 5);
    ld_test_wait(f);
    ck_assert(ld_future_is_fulfilled(f));
    ck_assert_int_eq(ld_future_int(f), 5);
    ld_future_unref(f);
    f = ld_client_bool_variation(c, "a", ANN, true);
    ck_assert(ld_test_await_bool(f));
    ck_assert(evr_flush(c));
    ck_assert_int_eq(counter_of(0, "tracked", 7, -1), 1);
    json_t *t = summary_of(0, "tracked");
    expect_json(json_object_get(json_array_get(json_object_get(t, "counters"), 0), "value"), "5");
    expect_json(json_object_get(t, "default"), "5");
    ck_assert_int_eq(counter_of(0, "a", 1, -1), 1);
    ck_assert_int_eq(counter_of(0, "b", 2, 0), 1);
    ck_assert_int_eq(counter_of(0, "c", 3, 0), 1);
    /* the feature events: tracked's with the fallback, no variation */
    json_t *e = evr_event_of(0, "feature", 0);
    ck_assert_str_eq(json_string_value(json_object_get(e, "key")), "tracked");
    expect_json(json_object_get(e, "value"), "5");
    ck_assert_ptr_null(json_object_get(e, "variation"));
    ck_assert_int_eq(int_of(e, "version"), 7);
    evr_client_done(c);
}
END_TEST

/* A flag deleted in the store (a tombstone) counts as unknown, and a
 * deleted prerequisite is not evaluated: no event of it. */
START_TEST(test_deleted_flags_and_prerequisites_count_as_not_found)
{
    json_t *data = ld_test_data_of(PREREQS_AND_FLAGS, NULL);
    struct ld_test_later *l;
    ld_store *store = ld_test_later_new(data, &l);
    json_decref(data);
    ld_client *c = client_on(PREREQS_AND_FLAGS, NULL, store);
    json_t *features = json_object_get(l->data, "features");
    json_object_set_new(features, "tracked",
                        ld_test_j("{'key': 'tracked', 'version': 8, 'deleted': true}"));
    json_object_set_new(features, "c", ld_test_j("{'key': 'c', 'version': 4, 'deleted': true}"));
    ld_future *f = ld_client_bool_variation(c, "tracked", ANN, true);
    ck_assert(ld_test_await_bool(f));
    ck_assert_int_eq(detail_eval(c, "b", ANN), LD_REASON_PREREQUISITE_FAILED);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(counter_of(0, "tracked", -1, -1), 1);
    ck_assert_uint_eq(json_array_size(json_object_get(summary_of(0, "tracked"), "counters")), 1);
    ck_assert_int_eq(counter_of(0, "b", 2, 1), 1);
    ck_assert_ptr_null(summary_of(0, "c"));
    /* b is tracked: its event, with its reason; none of c */
    ck_assert_int_eq(evr_count(0, "feature"), 1);
    expect_json(json_object_get(evr_event_of(0, "feature", 0), "reason"),
                "{'kind': 'PREREQUISITE_FAILED', 'prerequisiteKey': 'c'}");
    evr_client_done(c);
    ld_store_free(store);
    evr_drain();
}
END_TEST

/* A walk that stops for a prerequisite, then for a segment, then
 * completes: the prerequisite's event and counts once, the flag's once,
 * for each of many evaluations waiting together. */
START_TEST(test_a_walk_stopped_by_a_prerequisite_then_a_segment_records_once)
{
    const char *flags =
        "{'c': {'on': true, 'trackEvents': true, 'variations': ['c0', 'c1'],"
        "    'fallthrough': {'variation': 0}, 'version': 3, 'salt': 's'},"
        " 'sp': {'on': true, 'trackEvents': true, 'variations': ['s0', 's1'], 'offVariation': 1,"
        "    'fallthrough': {'variation': 0}, 'prerequisites': [{'key': 'c', 'variation': 0}],"
        "    'rules': [{'id': 'r0', 'variation': 1, 'clauses': [{'attribute': 'key', 'op':"
        "      'segmentMatch', 'values': ['seg1']}]}], 'version': 4, 'salt': 's'}}";
    json_t *data = ld_test_data_of(flags, "{'seg1': {'included': ['ann'], 'salt': 's'}}");
    struct ld_test_later *l;
    ld_store *store = ld_test_later_new(data, &l);
    json_decref(data);
    ld_client *c = client_on(flags, NULL, store);
    /* the initializer's data has the segment too */
    json_object_set_new(json_object_get(l->data, "segments"), "seg1",
                        ld_test_j("{'key': 'seg1', 'included': ['ann'], 'salt': 's',"
                                  " 'version': 1}"));
    ld_context *bob = ld_test_ctx_of("{'kind': 'user', 'key': 'bob'}");
    ld_future *f[10];
    for (int i = 0; i < 10; i++)
        f[i] = ld_client_json_variation(c, "sp", i % 2 ? ANN : bob, NULL);
    for (int i = 0; i < 10; i++)
        ld_test_await_ok(f[i]);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(counter_of(0, "c", 3, 0), 10);
    ck_assert_int_eq(counter_of(0, "sp", 4, 1), 5); /* ann: in the segment */
    ck_assert_int_eq(counter_of(0, "sp", 4, 0), 5);
    ck_assert_int_eq(evr_count(0, "feature"), 20);
    ck_assert_int_eq(evr_count(0, "index"), 2);
    for (int i = 0; i < 20; i++) {
        json_t *e = evr_event_of(0, "feature", i);
        const char *key = json_string_value(json_object_get(e, "key"));
        /* each evaluation: c (prereqOf sp), then sp */
        ck_assert_str_eq(key, i % 2 ? "sp" : "c");
    }
    ld_context_unref(bob);
    evr_client_done(c);
    ld_store_free(store);
    evr_drain();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Found in this round                                                       */

/* The events' clock is CLOCK_REALTIME_COARSE, which lags the real time by
 * up to a kernel tick (4 ms here): a flag whose debugEventsUntilDate had
 * just passed (by 1 ms) still got debug events, though events.h promises
 * them only while the date "is later than both this machine's clock and
 * the events service's". */
START_TEST(test_debug_events_end_at_the_date_to_the_millisecond)
{
    json_t *data = ld_test_data_of(FLAGS, NULL);
    struct ld_test_later *l;
    ld_store *store = ld_test_later_new(data, &l);
    json_decref(data);
    ld_client *c = client_on(NULL, NULL, store);
    int debug = 0;
    for (int i = 0; i < 50; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        char text[256];
        snprintf(text, sizeof text,
                 "{'key': 'dbg', 'on': true, 'variations': [true, false],"
                 " 'fallthrough': {'variation': 0}, 'debugEventsUntilDate': %lld,"
                 " 'version': %d, 'salt': 's'}",
                 (long long)(now - 1), i + 1);
        json_object_set_new(json_object_get(l->data, "features"), "dbg", ld_test_j(text));
        json_eval(c, "dbg", ANN);
    }
    ck_assert(evr_flush(c));
    debug = (int)evr_count(0, "debug");
    ck_assert_msg(debug == 0, "%d debug events of 50 for a date already past", debug);
    evr_client_done(c);
    ld_store_free(store);
    evr_drain();
}
END_TEST

Suite *ld_suite_client_events_attack2(void)
{
    Suite *s = suite_create("client_events_attack2");
    TCase *tc = tcase_create("attack2");
    tcase_add_checked_fixture(tc, attack_up, attack_down);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_context_kinds_are_exactly_those_of_each_interval);
    tcase_add_test(tc, test_a_context_freed_right_after_its_evaluation_is_not_taken_for_the_next);
    tcase_add_test(tc, test_counters_per_version_when_the_flag_changes_within_an_interval);
    tcase_add_test(tc, test_one_context_pointer_alternated_with_others_keeps_each_its_own_text);
    tcase_add_test(tc, test_prerequisites_three_deep_typed_and_detail);
    tcase_add_test(tc, test_a_prerequisite_cycle_and_one_not_found);
    tcase_add_test(tc, test_the_store_s_slow_path_records_each_evaluation_once);
    tcase_add_test(tc, test_debug_dates_now_past_and_far_future);
    tcase_add_test(tc, test_experiment_rollout_and_a_tracking_rule_carry_the_reason);
    tcase_add_test(tc, test_summary_dates_bound_every_event_across_intervals);
    tcase_add_test(tc, test_10000_contexts_through_an_lru_of_1000);
    tcase_add_test(tc, test_free_while_a_large_batch_is_let_go_of_in_slices);
    tcase_add_test(tc, test_close_while_a_large_batch_is_let_go_of_in_slices);
    tcase_add_test(tc, test_flush_called_inside_its_callback_ten_times);
    tcase_add_test(tc, test_flush_with_a_slow_service_then_free);
    tcase_add_test(tc, test_first_default_and_first_value_of_each_interval);
    tcase_add_test(tc, test_variations_past_1024_and_versions_mixed);
    tcase_add_test(tc, test_an_experiment_as_a_prerequisite_carries_its_reason_in_a_typed_call);
    tcase_add_test(tc, test_free_with_evaluations_waiting_on_the_store);
    tcase_add_test(tc, test_close_with_evaluations_waiting_on_a_prerequisite_read);
    tcase_add_test(tc, test_free_while_feature_events_holding_flags_are_let_go_of);
    tcase_add_test(tc, test_all_flags_states_are_not_counted);
    tcase_add_test(tc, test_random_runs_match_a_model_of_the_summary);
    tcase_add_test(tc, test_wrong_type_counts_the_fallback_with_the_version_and_no_variation);
    tcase_add_test(tc, test_deleted_flags_and_prerequisites_count_as_not_found);
    tcase_add_test(tc, test_debug_events_end_at_the_date_to_the_millisecond);
    tcase_add_test(tc, test_a_walk_stopped_by_a_prerequisite_then_a_segment_records_once);
    suite_add_tcase(s, tc);
    return s;
}
