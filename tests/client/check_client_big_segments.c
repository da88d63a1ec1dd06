/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The client's big segment cache and status (client.h): memberships kept
 * per context with a time to live and a size, one read shared by the
 * evaluations that want it at once, the store's status polled, listeners,
 * and close and free with reads pending. The scenarios of LaunchDarkly's
 * SDK test harness for big segments are here too, on the mock store.
 */
#include <limits.h>
#include <string.h>
#include <sys/time.h>

#include <event2/event.h>

#include <ldasync/testing.h>

#include "check_bigseg.h"
#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

/* "f" serves true when the context is in big segment "s1" (generation 1),
 * or else in "s2" (generation 2). */
static const char FLAGS[] =
    "{'f': {'on': true, 'variations': [true, false], 'fallthrough': {'variation': 1},"
    "  'rules': [{'id': 'r1', 'variation': 0, 'clauses': [{'attribute': '', 'op': "
    "'segmentMatch', 'values': ['s1']}]},"
    "            {'id': 'r2', 'variation': 0, 'clauses': [{'attribute': '', 'op': "
    "'segmentMatch', 'values': ['s2']}]}]}}";
static const char SEGMENTS[] = "{'s1': {'unbounded': true, 'generation': 1},"
                               " 's2': {'unbounded': true, 'generation': 2}}";

static void bs_setup(void)
{
    bsu_setup(FLAGS, SEGMENTS);
}

/* base64(SHA-256(key)) of the contexts "user1", "user2", "user3" (as
 * LaunchDarkly's test harness has them) */
static const char H1[] = "CgQblGLKpKMbrDVn4Lbm/ZEAeH2yq0M9lvbReMq/zpA=";
static const char H2[] = "YCXRj+SKvUUWhSjxioLiZd2Y1CGnCEqgn2GzQXA5AaM=";
static const char H3[] = "WGD68CtrxiIrpaylI1YPDjZMzYtnvuSG/ov3wB1JLMs=";

/* Membership {ref: included} for one context hash of the mock. */
static void member(ld_big_segment_store *bss, const char *hash, const char *ref, bool included)
{
    json_t *m = json_pack("{sb}", ref, included);
    ck_assert_int_eq(ld_mock_big_segment_store_set_membership(bss, hash, m), 0);
    json_decref(m);
}

/* Evaluates "f" for context `key`: its value. */
static bool eval_f(ld_client *c, const char *key)
{
    ld_context *ctx = bsu_user(key);
    bool v = ld_test_await_bool(ld_client_bool_variation(c, "f", ctx, false));
    ld_context_unref(ctx);
    return v;
}

/* Evaluates "f" for context `key`: its big segments status. */
static int eval_status(ld_client *c, const char *key)
{
    ld_context *ctx = bsu_user(key);
    ld_future *f =
        ld_test_fulfilled(ld_client_variation_detail(c, "f", ctx, LD_VALUE_BOOL, json_false()));
    int st = ld_detail_big_segments_status(ld_future_ptr(f));
    ld_future_unref(f);
    ld_context_unref(ctx);
    return st;
}

static void query_is(ld_big_segment_store *bss, size_t i, const char *hash)
{
    ck_assert_str_eq(ld_mock_big_segment_store_membership_query(bss, i), hash);
}

/* The status once the first poll ended. */
static ld_big_segment_store_status status_of(ld_client *c)
{
    ld_big_segment_store_status st;
    for (int i = 0; i < 1000 && ld_client_big_segment_store_status(c, &st) == LD_EBUSY; i++)
        bsu_run_for(1);
    ck_assert_int_eq(ld_client_big_segment_store_status(c, &st), 0);
    return st;
}

/* ---- a big segment store that holds its reads until told --------------- */

struct held {
    ld_future *outs[64];
    size_t n;
    int memberships, metadatas; /* reads that reached it */
    bool hold_metadata;
};

static void held_metadata(void *impl, ld_future *out)
{
    struct held *h = impl;
    h->metadatas++;
    if (h->hold_metadata && h->n < 64) {
        h->outs[h->n++] = out;
        return;
    }
    ld_future_fulfill_int(out, bsu_wall_ms());
    ld_future_unref(out);
}

static void held_membership(void *impl, const char *hash, ld_future *out)
{
    struct held *h = impl;
    (void)hash;
    h->memberships++;
    ck_assert_uint_lt(h->n, 64);
    h->outs[h->n++] = out;
}

/* Answers every read held: memberships with {"s1.g1": true}. */
static void held_release(struct held *h, int err)
{
    for (size_t i = 0; i < h->n; i++) {
        if (err)
            ld_future_reject(h->outs[i], err, "held read failed");
        else
            ld_future_fulfill_json(h->outs[i], json_pack("{sb}", "s1.g1", 1));
        ld_future_unref(h->outs[i]);
    }
    h->n = 0;
}

static void held_free(void *impl)
{
    struct held *h = impl;
    for (size_t i = 0; i < h->n; i++)
        ld_future_unref(h->outs[i]); /* cancelled already, or never to be answered */
    h->n = 0;
}

static const struct ld_big_segment_store_ops held_ops = {
    .version = LD_BIG_SEGMENT_STORE_OPS_VERSION,
    .get_metadata = held_metadata,
    .get_membership = held_membership,
    .free = held_free,
};

/* ---- bad input ----------------------------------------------------------- */

static void never_called(ld_client *c, const ld_big_segment_store_status *st, void *arg)
{
    (void)c;
    (void)st;
    (void)arg;
    ck_abort_msg("a listener was called");
}

START_TEST(test_bad_input_is_refused)
{
    ck_assert_int_eq(ld_client_options_set_big_segment_cache(NULL, 1, 1, 1), LD_EINVAL);
    ld_big_segment_store_status st;
    ck_assert_int_eq(ld_client_big_segment_store_status(NULL, &st), LD_EINVAL);
    ck_assert_int_eq(ld_client_add_big_segment_status_listener(NULL, never_called, NULL),
                     LD_EINVAL);
    ck_assert_int_eq(ld_client_remove_big_segment_status_listener(NULL, 1), LD_EINVAL);
    ld_client *c = bsu_client(NULL, 0, 0, 0);
    ck_assert_int_eq(ld_client_big_segment_store_status(c, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_client_add_big_segment_status_listener(c, NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_client_remove_big_segment_status_listener(c, 1), LD_EINVAL);
    int64_t id = ld_client_add_big_segment_status_listener(c, never_called, NULL);
    ck_assert_int_gt(id, 0);
    ck_assert_int_eq(ld_client_remove_big_segment_status_listener(c, id), 0);
    ck_assert_int_eq(ld_client_remove_big_segment_status_listener(c, id), LD_EINVAL);
    ld_client_free(c);
}
END_TEST

START_TEST(test_without_a_store_the_status_is_unavailable_and_not_stale)
{
    ld_client *c = bsu_client(NULL, 0, 0, 0);
    ck_assert_int_gt(ld_client_add_big_segment_status_listener(c, never_called, NULL), 0);
    ld_big_segment_store_status st = {.available = true, .stale = true};
    ck_assert_int_eq(ld_client_big_segment_store_status(c, &st), 0);
    ck_assert(!st.available && !st.stale);
    ck_assert_int_eq(eval_status(c, "user1"), LD_BIG_SEGMENTS_STATUS_NOT_CONFIGURED);
    ld_client_free(c);
}
END_TEST

START_TEST(test_extreme_settings_keep_working)
{
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    member(bss, H1, "s1.g1", true);
    ld_client *c = bsu_client(bss, INT_MAX, INT64_MAX, INT64_MAX);
    ck_assert(eval_f(c, "user1"));
    ck_assert(eval_f(c, "user1"));
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 1);
    ld_big_segment_store_status st = status_of(c);
    ck_assert(st.available && !st.stale);
    ld_client_free(c);
    c = bsu_client(bss, -5, -1, INT64_MIN); /* the defaults */
    ck_assert(eval_f(c, "user1"));
    ck_assert(eval_f(c, "user1"));
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 2);
    ld_client_free(c);
    ld_big_segment_store_free(bss);
}
END_TEST

/* ---- memberships --------------------------------------------------------- */

START_TEST(test_one_read_serves_several_segments_of_one_evaluation)
{
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    json_t *m = json_pack("{sbsb}", "s1.g1", 0, "s2.g2", 1);
    ld_mock_big_segment_store_set_membership(bss, H1, m);
    json_decref(m);
    ld_client *c = bsu_client(bss, 0, 0, 0);
    ck_assert(eval_f(c, "user1"));
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 1);
    query_is(bss, 0, H1);
    ld_client_free(c);
    ld_big_segment_store_free(bss);
}
END_TEST

START_TEST(test_membership_is_kept_across_evaluations_per_context)
{
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    member(bss, H1, "s1.g1", true);
    member(bss, H2, "s1.g1", true);
    ld_client *c = bsu_client(bss, 0, 0, 0);
    ck_assert(eval_f(c, "user1"));
    member(bss, H1, "s1.g1", false); /* not read again: the cache answers */
    member(bss, H2, "s1.g1", false);
    ck_assert(eval_f(c, "user1"));
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 1);
    ck_assert(!eval_f(c, "user2")); /* its own read */
    ck_assert(eval_f(c, "user1"));
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 2);
    query_is(bss, 0, H1);
    query_is(bss, 1, H2);
    ld_client_free(c);
    ld_big_segment_store_free(bss);
}
END_TEST

START_TEST(test_membership_is_read_again_after_the_cache_time)
{
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    member(bss, H1, "s1.g1", true);
    ld_client *c = bsu_client(bss, 0, 10, 0);
    ck_assert(eval_f(c, "user1"));
    member(bss, H1, "s1.g1", false);
    bsu_run_for(30);
    ck_assert(!eval_f(c, "user1"));
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 2);
    query_is(bss, 1, H1);
    ld_client_free(c);
    ld_big_segment_store_free(bss);
}
END_TEST

START_TEST(test_the_least_recently_used_context_goes_first)
{
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    member(bss, H1, "s1.g1", true);
    member(bss, H2, "s2.g2", true);
    ld_client *c = bsu_client(bss, 2, 0, 0);
    ck_assert(eval_f(c, "user1"));
    ck_assert(eval_f(c, "user2"));
    ck_assert(eval_f(c, "user2"));
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 2);
    ck_assert(!eval_f(c, "user3")); /* user1 goes */
    ck_assert(eval_f(c, "user2"));  /* still kept */
    ck_assert(eval_f(c, "user1"));  /* read again; user3 goes */
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 4);
    query_is(bss, 0, H1);
    query_is(bss, 1, H2);
    query_is(bss, 2, H3);
    query_is(bss, 3, H1);
    ld_client_free(c);
    ld_big_segment_store_free(bss);
}
END_TEST

START_TEST(test_concurrent_evaluations_of_one_context_share_one_read)
{
    struct held h = {0};
    ld_big_segment_store *bss = ld_big_segment_store_new(B, &held_ops, &h);
    ld_client *c = bsu_client(bss, 0, 0, 0);
    ld_context *u1 = bsu_user("user1"), *u2 = bsu_user("user2");
    ld_future *f[4] = {
        ld_client_bool_variation(c, "f", u1, false), ld_client_bool_variation(c, "f", u1, false),
        ld_client_bool_variation(c, "f", u2, false), ld_client_bool_variation(c, "f", u1, false)};
    for (int i = 0; i < 50 && h.memberships < 2; i++)
        bsu_run_for(1);
    bsu_run_for(5);
    ck_assert_int_eq(h.memberships, 2); /* user1 once, user2 once */
    for (int i = 0; i < 4; i++)
        ck_assert(ld_future_is_pending(f[i]));
    held_release(&h, 0);
    for (int i = 0; i < 4; i++)
        ck_assert(ld_test_await_bool(f[i]));
    ck_assert(eval_f(c, "user1")); /* and kept */
    ck_assert_int_eq(h.memberships, 2);
    ld_context_unref(u1);
    ld_context_unref(u2);
    ld_client_free(c);
    ld_big_segment_store_free(bss);
}
END_TEST

START_TEST(test_a_failed_read_is_a_store_error_and_is_not_kept)
{
    struct held h = {0};
    ld_big_segment_store *bss = ld_big_segment_store_new(B, &held_ops, &h);
    ld_client *c = bsu_client(bss, 0, 0, 0);
    for (int round = 0; round < 2; round++) {
        ld_context *u1 = bsu_user("user1");
        ld_future *f = ld_client_variation_detail(c, "f", u1, LD_VALUE_BOOL, json_false());
        ld_context_unref(u1);
        for (int i = 0; i < 100 && h.n == 0; i++)
            bsu_run_for(1);
        ck_assert_uint_eq(h.n, 1);
        held_release(&h, LD_ESTORE);
        ld_test_fulfilled(f);
        ck_assert_int_eq(ld_detail_big_segments_status(ld_future_ptr(f)),
                         LD_BIG_SEGMENTS_STATUS_STORE_ERROR);
        ck_assert(json_is_false(ld_detail_value(ld_future_ptr(f))));
        ld_future_unref(f);
    }
    ck_assert_int_eq(h.memberships, 2);
    ld_client_free(c);
    ld_big_segment_store_free(bss);
}
END_TEST

/* ---- the status ---------------------------------------------------------- */

START_TEST(test_status_follows_the_metadata)
{
    static const struct {
        enum ld_mock_big_segments_preset preset;
        bool available, stale;
        int eval;
    } cases[] = {
        {LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE, true, false, LD_BIG_SEGMENTS_STATUS_HEALTHY},
        {LD_MOCK_BIG_SEGMENTS_PRESET_STALE, true, true, LD_BIG_SEGMENTS_STATUS_STALE},
        {LD_MOCK_BIG_SEGMENTS_PRESET_NONE, true, true, LD_BIG_SEGMENTS_STATUS_STALE},
        {LD_MOCK_BIG_SEGMENTS_PRESET_ERROR, false, false, LD_BIG_SEGMENTS_STATUS_STORE_ERROR},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ld_big_segment_store *bss = ld_mock_big_segment_store_new(B, cases[i].preset);
        ld_client *c = bsu_client(bss, 0, 0, 0);
        ld_big_segment_store_status st;
        ck_assert_int_eq(ld_client_big_segment_store_status(c, &st), LD_EBUSY);
        st = status_of(c);
        ck_assert_msg(st.available == cases[i].available && st.stale == cases[i].stale,
                      "case %zu: available %d stale %d", i, st.available, st.stale);
        ck_assert_int_eq(eval_status(c, "user1"), cases[i].eval);
        ck_assert_int_eq(ld_mock_big_segment_store_metadata_query_count(bss), 1);
        ld_client_free(c);
        ld_big_segment_store_free(bss);
    }
}
END_TEST

START_TEST(test_evaluations_before_the_first_poll_wait_for_it)
{
    struct held h = {.hold_metadata = true};
    ld_big_segment_store *bss = ld_big_segment_store_new(B, &held_ops, &h);
    ld_client *c = bsu_client(bss, 0, 0, 0);
    ld_context *u1 = bsu_user("user1");
    ld_future *f = ld_client_variation_detail(c, "f", u1, LD_VALUE_BOOL, json_false());
    ld_context_unref(u1);
    for (int i = 0; i < 100 && h.n < 2; i++)
        bsu_run_for(1);
    ck_assert_uint_eq(h.n, 2); /* the poll and the membership */
    ck_assert_int_eq(h.metadatas, 1);
    ck_assert(ld_future_is_pending(f));
    h.hold_metadata = false;
    ld_future_fulfill_int(h.outs[0], bsu_wall_ms());
    ld_future_unref(h.outs[0]);
    h.outs[0] = h.outs[1];
    h.n = 1;
    held_release(&h, 0);
    ld_test_fulfilled(f);
    ck_assert_int_eq(ld_detail_big_segments_status(ld_future_ptr(f)),
                     LD_BIG_SEGMENTS_STATUS_HEALTHY);
    ck_assert(json_is_true(ld_detail_value(ld_future_ptr(f))));
    ld_future_unref(f);
    ck_assert_int_eq(h.metadatas, 1); /* the evaluation asked no more */
    ld_client_free(c);
    ld_big_segment_store_free(bss);
}
END_TEST

START_TEST(test_a_short_poll_interval_polls_often_a_long_one_once)
{
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    ld_client *c = bsu_client(bss, 0, 0, 10);
    for (int i = 0; i < 500 && ld_mock_big_segment_store_metadata_query_count(bss) < 3; i++)
        bsu_run_for(2);
    ck_assert_int_ge(ld_mock_big_segment_store_metadata_query_count(bss), 3);
    ld_client_free(c);
    ld_big_segment_store_free(bss);

    bss = ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    c = bsu_client(bss, 0, 0, 10000);
    ld_big_segment_store_status st = status_of(c);
    ck_assert(st.available && !st.stale);
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof key, "user-%d", i);
        ck_assert_int_eq(eval_status(c, key), LD_BIG_SEGMENTS_STATUS_HEALTHY);
    }
    bsu_run_for(50);
    ck_assert_int_eq(ld_mock_big_segment_store_metadata_query_count(bss), 1);
    ld_client_free(c);
    ld_big_segment_store_free(bss);
}
END_TEST

struct heard {
    ld_big_segment_store_status st[16];
    int n;
    ld_client *free_me;
    int64_t remove_me;
};

static void hear(ld_client *c, const ld_big_segment_store_status *st, void *arg)
{
    struct heard *h = arg;
    ck_assert_int_lt(h->n, 16);
    h->st[h->n++] = *st;
    if (h->remove_me > 0) {
        ck_assert_int_eq(ld_client_remove_big_segment_status_listener(c, h->remove_me), 0);
        h->remove_me = 0;
    }
    if (h->free_me) {
        ld_client_free(h->free_me);
        h->free_me = NULL;
    }
}

static void await_heard(struct heard *h, int n)
{
    for (int i = 0; i < 1000 && h->n < n; i++)
        bsu_run_for(1);
    ck_assert_int_eq(h->n, n);
}

START_TEST(test_listeners_hear_each_change_of_the_status)
{
    static const struct {
        enum ld_mock_big_segments_preset from, to;
    } changes[] = {
        {LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE, LD_MOCK_BIG_SEGMENTS_PRESET_ERROR},
        {LD_MOCK_BIG_SEGMENTS_PRESET_ERROR, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE},
        {LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE, LD_MOCK_BIG_SEGMENTS_PRESET_STALE},
        {LD_MOCK_BIG_SEGMENTS_PRESET_STALE, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE},
    };
    for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
        ld_big_segment_store *bss = ld_mock_big_segment_store_new(B, changes[i].from);
        ld_client *c = bsu_client(bss, 0, 0, 10);
        struct heard h = {0};
        ck_assert_int_gt(ld_client_add_big_segment_status_listener(c, hear, &h), 0);
        await_heard(&h, 1);
        bool was = changes[i].from != LD_MOCK_BIG_SEGMENTS_PRESET_ERROR;
        ck_assert(h.st[0].available == was);
        bsu_run_for(40); /* polls that change nothing say nothing */
        ck_assert_int_eq(h.n, 1);
        ld_mock_big_segment_store_set_preset(bss, changes[i].to);
        await_heard(&h, 2);
        ld_big_segment_store_status now = status_of(c);
        ck_assert(now.available == h.st[1].available && now.stale == h.st[1].stale);
        ck_assert(now.available == (changes[i].to != LD_MOCK_BIG_SEGMENTS_PRESET_ERROR));
        ck_assert(now.stale == (changes[i].to == LD_MOCK_BIG_SEGMENTS_PRESET_STALE));
        ld_client_free(c);
        ld_big_segment_store_free(bss);
    }
}
END_TEST

START_TEST(test_listeners_may_remove_listeners_and_free_the_client)
{
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    ld_client *c = bsu_client(bss, 0, 0, 10);
    struct heard a = {0}, b = {0}, d = {0};
    int64_t ia = ld_client_add_big_segment_status_listener(c, hear, &a);
    int64_t ib = ld_client_add_big_segment_status_listener(c, hear, &b);
    ck_assert_int_gt(ld_client_add_big_segment_status_listener(c, hear, &d), ib);
    a.remove_me = ib; /* the first removes the second before it is called */
    await_heard(&a, 1);
    ck_assert_int_eq(b.n, 0);
    ck_assert_int_eq(d.n, 1);
    ck_assert_int_eq(ld_client_remove_big_segment_status_listener(c, ib), LD_EINVAL);
    ck_assert_int_eq(ld_client_remove_big_segment_status_listener(c, ia), 0);
    d.free_me = c; /* the last frees the client on the next change */
    ld_mock_big_segment_store_set_preset(bss, LD_MOCK_BIG_SEGMENTS_PRESET_ERROR);
    await_heard(&d, 2);
    ck_assert_ptr_null(d.free_me);
    bsu_run_for(30); /* nothing polls any more */
    int polls = ld_mock_big_segment_store_metadata_query_count(bss);
    bsu_run_for(30);
    ck_assert_int_eq(ld_mock_big_segment_store_metadata_query_count(bss), polls);
    ld_big_segment_store_free(bss);
}
END_TEST

/* A membership kept answers with the status of the last poll: an
 * evaluation served from the cache reports what the store's status is now. */
START_TEST(test_kept_memberships_report_the_status_of_the_last_poll)
{
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    member(bss, H1, "s1.g1", true);
    ld_client *c = bsu_client(bss, 0, 0, 10);
    struct heard h = {0};
    ld_client_add_big_segment_status_listener(c, hear, &h);
    ck_assert_int_eq(eval_status(c, "user1"), LD_BIG_SEGMENTS_STATUS_HEALTHY);
    await_heard(&h, 1);
    static const struct {
        enum ld_mock_big_segments_preset preset;
        int status;
    } steps[] = {{LD_MOCK_BIG_SEGMENTS_PRESET_ERROR, LD_BIG_SEGMENTS_STATUS_STORE_ERROR},
                 {LD_MOCK_BIG_SEGMENTS_PRESET_STALE, LD_BIG_SEGMENTS_STATUS_STALE},
                 {LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE, LD_BIG_SEGMENTS_STATUS_HEALTHY}};
    for (int i = 0; i < 3; i++) {
        ld_mock_big_segment_store_set_preset(bss, steps[i].preset);
        await_heard(&h, i + 2);
        ck_assert_int_eq(eval_status(c, "user1"), steps[i].status);
        ck_assert(eval_f(c, "user1"));
    }
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 1);
    ld_client_free(c);
    ld_big_segment_store_free(bss);
}
END_TEST

/* ---- close and free ------------------------------------------------------ */

START_TEST(test_close_stops_polling_and_the_listeners)
{
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    ld_client *c = bsu_client(bss, 0, 0, 5);
    struct heard h = {0};
    ld_client_add_big_segment_status_listener(c, hear, &h);
    await_heard(&h, 1);
    ld_test_await_ok(ld_client_close(c));
    ld_mock_big_segment_store_set_preset(bss, LD_MOCK_BIG_SEGMENTS_PRESET_ERROR);
    bsu_run_for(20);
    int polls = ld_mock_big_segment_store_metadata_query_count(bss);
    bsu_run_for(30);
    ck_assert_int_eq(ld_mock_big_segment_store_metadata_query_count(bss), polls);
    ck_assert_int_eq(h.n, 1);
    ld_big_segment_store_status st = status_of(c); /* the last one read */
    ck_assert(st.available);
    ld_client_free(c);
    ld_big_segment_store_free(bss);
}
END_TEST

START_TEST(test_free_with_reads_pending_cancels_the_evaluations)
{
    struct held h = {.hold_metadata = true};
    ld_big_segment_store *bss = ld_big_segment_store_new(B, &held_ops, &h);
    ld_client *c = bsu_client(bss, 0, 0, 0);
    ld_context *u1 = bsu_user("user1"), *u2 = bsu_user("user2");
    ld_future *f[3] = {ld_client_bool_variation(c, "f", u1, false),
                       ld_client_bool_variation(c, "f", u1, false),
                       ld_client_variation_detail(c, "f", u2, LD_VALUE_BOOL, NULL)};
    for (int i = 0; i < 100 && h.n < 3; i++)
        bsu_run_for(1);
    ck_assert_uint_eq(h.n, 3); /* the poll and two memberships */
    ld_client_free(c);
    for (int i = 0; i < 3; i++)
        ld_test_expect_error(f[i], LD_ECANCELED, NULL);
    bsu_run_for(5);
    /* the store answers after the client went: nobody is left to hear it */
    ck_assert_uint_eq(h.n, 3);
    held_release(&h, 0);
    bsu_run_for(5);
    ld_context_unref(u1);
    ld_context_unref(u2);
    ld_big_segment_store_free(bss);
}
END_TEST

struct free_in_cb {
    ld_client *c;
    int calls;
};

static void free_client_cb(ld_future *f, void *arg)
{
    struct free_in_cb *x = arg;
    (void)f;
    x->calls++;
    ld_client_free(x->c); /* the second call frees NULL */
    x->c = NULL;
}

START_TEST(test_free_from_an_evaluations_callback_and_right_after_close)
{
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    member(bss, H1, "s1.g1", true);
    struct free_in_cb x = {.c = bsu_client(bss, 0, 0, 1)};
    ld_context *u1 = bsu_user("user1");
    ld_future *f1 = ld_client_bool_variation(x.c, "f", u1, false);
    ld_future *f2 = ld_client_bool_variation(x.c, "f", u1, false);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f1), free_client_cb, &x), 0);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f2), free_client_cb, &x), 0);
    ld_test_wait(f1);
    ld_test_wait(f2);
    ck_assert(ld_future_is_fulfilled(f1) && ld_future_bool(f1));
    ck_assert(ld_future_is_rejected(f2) || ld_future_bool(f2));
    ld_future_unref(f1);
    ld_future_unref(f2);
    bsu_run_for(5);
    ck_assert_int_eq(x.calls, 2);

    ld_client *c = bsu_client(bss, 0, 0, 1);
    ld_future *f = ld_client_bool_variation(c, "f", u1, false);
    ld_future *closed = ld_client_close(c);
    ld_client_free(c);
    ld_test_expect_error(f, LD_ECANCELED, NULL);
    ld_test_done(closed);
    ld_future_unref(closed);
    ld_context_unref(u1);
    bsu_run_for(5);
    ld_big_segment_store_free(bss);
}
END_TEST

Suite *ld_suite_client_big_segments(void)
{
    Suite *s = suite_create("client_big_segments");
    TCase *tc = tcase_create("input");
    tcase_add_checked_fixture(tc, bs_setup, bsu_teardown);
    tcase_add_test(tc, test_bad_input_is_refused);
    tcase_add_test(tc, test_without_a_store_the_status_is_unavailable_and_not_stale);
    tcase_add_test(tc, test_extreme_settings_keep_working);
    suite_add_tcase(s, tc);

    tc = tcase_create("memberships");
    tcase_add_checked_fixture(tc, bs_setup, bsu_teardown);
    tcase_add_test(tc, test_one_read_serves_several_segments_of_one_evaluation);
    tcase_add_test(tc, test_membership_is_kept_across_evaluations_per_context);
    tcase_add_test(tc, test_membership_is_read_again_after_the_cache_time);
    tcase_add_test(tc, test_the_least_recently_used_context_goes_first);
    tcase_add_test(tc, test_concurrent_evaluations_of_one_context_share_one_read);
    tcase_add_test(tc, test_a_failed_read_is_a_store_error_and_is_not_kept);
    suite_add_tcase(s, tc);

    tc = tcase_create("status");
    tcase_add_checked_fixture(tc, bs_setup, bsu_teardown);
    tcase_add_test(tc, test_status_follows_the_metadata);
    tcase_add_test(tc, test_evaluations_before_the_first_poll_wait_for_it);
    tcase_add_test(tc, test_a_short_poll_interval_polls_often_a_long_one_once);
    tcase_add_test(tc, test_listeners_hear_each_change_of_the_status);
    tcase_add_test(tc, test_listeners_may_remove_listeners_and_free_the_client);
    tcase_add_test(tc, test_kept_memberships_report_the_status_of_the_last_poll);
    suite_add_tcase(s, tc);

    tc = tcase_create("close_free");
    tcase_add_checked_fixture(tc, bs_setup, bsu_teardown);
    tcase_add_test(tc, test_close_stops_polling_and_the_listeners);
    tcase_add_test(tc, test_free_with_reads_pending_cancels_the_evaluations);
    tcase_add_test(tc, test_free_from_an_evaluations_callback_and_right_after_close);
    suite_add_tcase(s, tc);
    return s;
}
