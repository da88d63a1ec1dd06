/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The client's big segment cache attacked through the public API (client.h,
 * big_segments.h): big segment stores of our own that answer at once, later,
 * never, out of order, with errors and odd codes, with huge or odd
 * memberships; free and close in every order with reads and polls pending;
 * many contexts through a small cache; odd context keys and multi-kind
 * contexts; listeners that change the listeners or free the client; a poll
 * every millisecond and a status that flips at every poll.
 *
 * The expected context hashes are computed with the library's own helper
 * (ld__big_segment_hash, compiled into the test program), only to check
 * what the store is asked.
 */
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <event2/event.h>

#include <ldasync/alloc.h>
#include <ldasync/testing.h>

#include "check_bigseg.h"
#include "check_suites.h"
#include "check_util.h"
#include "eval/eval-internal.h"

#define B ld_test_base

/* "f" serves true when the context (user) is in big segment "s1"; "g"
 * when its org is in "so"; "h" when either is. */
static const char FLAGS[] =
    "{'f': {'on': true, 'variations': [true, false], 'fallthrough': {'variation': 1},"
    "  'rules': [{'id': 'r1', 'variation': 0, 'clauses': [{'attribute': '', 'op': "
    "'segmentMatch', 'values': ['s1']}]}]},"
    " 'g': {'on': true, 'variations': [true, false], 'fallthrough': {'variation': 1},"
    "  'rules': [{'id': 'r1', 'variation': 0, 'clauses': [{'attribute': '', 'op': "
    "'segmentMatch', 'values': ['so']}]}]},"
    " 'h': {'on': true, 'variations': [true, false], 'fallthrough': {'variation': 1},"
    "  'rules': [{'id': 'r1', 'variation': 0, 'clauses': [{'attribute': '', 'op': "
    "'segmentMatch', 'values': ['s1']}]},"
    "            {'id': 'r2', 'variation': 0, 'clauses': [{'attribute': '', 'op': "
    "'segmentMatch', 'values': ['so']}]}]}}";
static const char SEGMENTS[] = "{'s1': {'unbounded': true, 'generation': 1},"
                               " 'so': {'unbounded': true, 'generation': 1,"
                               "        'unboundedContextKind': 'org'}}";

static void at_setup(void)
{
    bsu_setup(FLAGS, SEGMENTS);
}

static void hash_of(const char *key, char out[LD__BIG_SEGMENT_HASH_LEN + 1])
{
    ld__big_segment_hash(key, strlen(key), out);
}

/* ---- a store under the test's control ------------------------------------ */

struct ctl {
    /* membership reads held (hold) and their hashes */
    ld_future **outs;
    char (*hashes)[LD__BIG_SEGMENT_HASH_LEN + 1];
    size_t n, cap;
    ld_future *meta[16]; /* metadata reads held (hold_meta) */
    size_t nmeta;
    bool hold, hold_meta;
    int err;      /* memberships rejected with it (0: fulfilled) */
    int meta_err; /* metadata rejected with it (0: fulfilled) */
    bool flip;    /* metadata: fulfilled, rejected, fulfilled, ... */
    json_t *m;    /* what memberships are fulfilled with (NULL: {"s1.g1": true}) */
    json_t *by;   /* hash -> membership, when set (absent: NULL, in none) */
    json_t *seen; /* hash -> count, when set */
    int memberships, metadatas, frees;
    int64_t meta_value; /* 0: now */
    bool meta_err_once; /* meta_err for the first metadata read only */
};

static json_t *ctl_membership(struct ctl *s, const char *hash)
{
    if (s->by)
        return json_incref(json_object_get(s->by, hash));
    return s->m ? json_incref(s->m) : json_pack("{sb}", "s1.g1", 1);
}

static void ctl_answer(struct ctl *s, const char *hash, ld_future *out)
{
    if (s->err)
        ld_future_reject(out, s->err, "attack store failed");
    else
        ld_future_fulfill_json(out, ctl_membership(s, hash));
    ld_future_unref(out);
}

static void ctl_meta_answer(struct ctl *s, ld_future *out)
{
    bool fail = s->flip ? s->metadatas % 2 == 0 : s->meta_err != 0;
    if (s->meta_err_once && s->metadatas > 1)
        fail = false;
    if (fail)
        ld_future_reject(out, s->meta_err ? s->meta_err : LD_ESTORE, "metadata failed");
    else
        ld_future_fulfill_int(out, s->meta_value ? s->meta_value : bsu_wall_ms());
    ld_future_unref(out);
}

static void ctl_metadata(void *impl, ld_future *out)
{
    struct ctl *s = impl;
    s->metadatas++;
    if (s->hold_meta) {
        ck_assert_uint_lt(s->nmeta, 16);
        s->meta[s->nmeta++] = out;
        return;
    }
    ctl_meta_answer(s, out);
}

static void ctl_get_membership(void *impl, const char *hash, ld_future *out)
{
    struct ctl *s = impl;
    s->memberships++;
    if (s->seen) {
        json_t *n = json_object_get(s->seen, hash);
        json_object_set_new(s->seen, hash, json_integer(n ? json_integer_value(n) + 1 : 1));
    }
    if (!s->hold) {
        ctl_answer(s, hash, out);
        return;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->outs = realloc(s->outs, s->cap * sizeof *s->outs);
        s->hashes = realloc(s->hashes, s->cap * sizeof *s->hashes);
        ck_assert(s->outs && s->hashes);
    }
    s->outs[s->n] = out;
    snprintf(s->hashes[s->n], sizeof s->hashes[0], "%s", hash);
    s->n++;
}

/* Answers the membership reads held, oldest first or newest first. */
static void ctl_release(struct ctl *s, bool reverse)
{
    size_t n = s->n;
    s->n = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = reverse ? n - 1 - k : k;
        ctl_answer(s, s->hashes[i], s->outs[i]);
    }
}

static void ctl_release_meta(struct ctl *s)
{
    size_t n = s->nmeta;
    s->nmeta = 0;
    for (size_t i = 0; i < n; i++)
        ctl_meta_answer(s, s->meta[i]);
}

static void ctl_free(void *impl)
{
    struct ctl *s = impl;
    s->frees++;
    for (size_t i = 0; i < s->n; i++)
        ld_future_unref(s->outs[i]); /* cancelled, or never to be answered */
    for (size_t i = 0; i < s->nmeta; i++)
        ld_future_unref(s->meta[i]);
    s->n = s->nmeta = 0;
    free(s->outs);
    free(s->hashes);
    s->outs = NULL;
    s->hashes = NULL;
    s->cap = 0;
}

static const struct ld_big_segment_store_ops ctl_ops = {
    .version = LD_BIG_SEGMENT_STORE_OPS_VERSION,
    .get_metadata = ctl_metadata,
    .get_membership = ctl_get_membership,
    .free = ctl_free,
};

static ld_big_segment_store *ctl_store(struct ctl *s)
{
    ld_big_segment_store *bss = ld_big_segment_store_new(B, &ctl_ops, s);
    ck_assert_ptr_nonnull(bss);
    return bss;
}

/* Frees the store and lets the loop run ops->free. */
static void ctl_done(struct ctl *s, ld_big_segment_store *bss)
{
    ld_big_segment_store_free(bss);
    for (int i = 0; i < 200 && s->frees == 0; i++)
        bsu_run_for(1);
    ck_assert_int_eq(s->frees, 1);
    json_decref(s->m);
    json_decref(s->by);
    json_decref(s->seen);
    s->m = s->by = s->seen = NULL;
}

static void await_n(struct ctl *s, size_t n)
{
    for (int i = 0; i < 5000 && s->n < n; i++)
        bsu_run_for(1);
    ck_assert_uint_eq(s->n, n);
}

static bool eval_f(ld_client *c, const char *flag, const char *key)
{
    ld_context *ctx = bsu_user(key);
    bool v = ld_test_await_bool(ld_client_bool_variation(c, flag, ctx, false));
    ld_context_unref(ctx);
    return v;
}

static ld_future *detail_of(ld_client *c, const char *flag, ld_context *ctx)
{
    return ld_client_variation_detail(c, flag, ctx, LD_VALUE_BOOL, json_false());
}

/* ---- free and close in every order ---------------------------------------- */

START_TEST(test_free_and_close_right_after_new)
{
    for (int hold = 0; hold < 2; hold++) {
        struct ctl s = {.hold_meta = hold};
        ld_big_segment_store *bss = ctl_store(&s);
        ld_client *c = bsu_client(bss, 0, 0, 1);
        ld_client_free(c); /* the first poll was just issued */
        c = bsu_client(bss, 0, 0, 1);
        ld_future *closed = ld_client_close(c);
        ld_client_free(c);
        ld_test_await_ok(closed);
        c = bsu_client(bss, 0, 0, 1);
        ld_test_await_ok(ld_client_close(c));
        ld_test_await_ok(ld_client_close(c)); /* twice */
        bsu_run_for(5); /* the poll issued before close ends as usual, if answered */
        ld_big_segment_store_status st;
        int rc = ld_client_big_segment_store_status(c, &st);
        ck_assert_int_eq(rc, (hold ? LD_EBUSY : 0));
        ld_client_free(c);
        bsu_run_for(10); /* nothing polls after close or free */
        int polls = s.metadatas;
        bsu_run_for(20);
        ck_assert_int_eq(s.metadatas, polls);
        ctl_done(&s, bss);
    }
}
END_TEST

START_TEST(test_close_then_reads_complete_as_usual)
{
    struct ctl s = {.hold = true};
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *c = bsu_client(bss, 0, 0, 1);
    ld_context *u = bsu_user("u1");
    ld_future *f = ld_client_bool_variation(c, "f", u, false);
    await_n(&s, 1);
    ld_future *closed = ld_client_close(c);
    ld_future *late = ld_client_bool_variation(c, "f", u, false);
    ld_test_expect_error(late, LD_ECLOSED, NULL);
    ck_assert(ld_future_is_pending(f));
    ctl_release(&s, false);
    ck_assert(ld_test_await_bool(f)); /* issued before close: as usual */
    ld_test_await_ok(closed);
    ld_client_free(c);
    ld_context_unref(u);
    ctl_done(&s, bss);
}
END_TEST

struct cb_free {
    ld_client *c;
    int calls;
};

static void free_in_cb(ld_future *f, void *arg)
{
    struct cb_free *x = arg;
    (void)f;
    x->calls++;
    ld_client_free(x->c);
    x->c = NULL;
}

/* One evaluation completes (its context's read answered) and its callback
 * frees the client while 50 other reads and the poll are pending. */
START_TEST(test_free_inside_an_evaluation_callback_with_reads_pending)
{
    struct ctl s = {.hold = true, .hold_meta = true};
    ld_big_segment_store *bss = ctl_store(&s);
    struct cb_free x = {.c = bsu_client(bss, 0, 0, 1)};
    ld_future *f[51];
    ld_context *ctx[51];
    for (int i = 0; i < 51; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        ctx[i] = bsu_user(key);
        f[i] = ld_client_bool_variation(x.c, "f", ctx[i], false);
    }
    await_n(&s, 51);
    ck_assert_uint_eq(s.nmeta, 1);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f[0]), free_in_cb, &x), 0);
    /* the poll and the first read are answered: the first evaluation ends */
    ctl_release_meta(&s);
    ld_future *first = s.outs[0];
    s.outs[0] = s.outs[--s.n];
    memcpy(s.hashes[0], s.hashes[s.n], sizeof s.hashes[0]);
    ctl_answer(&s, "x", first);
    ld_test_wait(f[0]);
    ck_assert(ld_future_is_fulfilled(f[0]) && ld_future_bool(f[0]));
    ck_assert_int_eq(x.calls, 1);
    for (int i = 1; i < 51; i++)
        ld_test_expect_error(f[i], LD_ECANCELED, NULL);
    ld_future_unref(f[0]);
    ctl_release(&s, true); /* answered after the client went */
    bsu_run_for(5);
    for (int i = 0; i < 51; i++)
        ld_context_unref(ctx[i]);
    ctl_done(&s, bss);
}
END_TEST

struct lfree {
    ld_client *c;
    int calls;
    bool close_instead;
};

static void free_in_listener(ld_client *c, const ld_big_segment_store_status *st, void *arg)
{
    struct lfree *x = arg;
    (void)st;
    ck_assert_ptr_eq(c, x->c);
    x->calls++;
    if (x->close_instead) {
        ld_future_unref(ld_client_close(c));
        return;
    }
    ld_client_free(c);
    x->c = NULL;
}

START_TEST(test_free_inside_a_status_listener_with_reads_pending)
{
    struct ctl s = {.hold = true, .hold_meta = true};
    ld_big_segment_store *bss = ctl_store(&s);
    struct lfree x = {.c = bsu_client(bss, 0, 0, 1)};
    struct lfree y = {0};
    ck_assert_int_gt(ld_client_add_big_segment_status_listener(x.c, free_in_listener, &x), 0);
    ck_assert_int_gt(ld_client_add_big_segment_status_listener(x.c, free_in_listener, &y), 0);
    ld_context *u = bsu_user("u1");
    ld_future *f = ld_client_bool_variation(x.c, "f", u, false);
    await_n(&s, 1);
    ctl_release_meta(&s); /* the first poll ends: the listener frees the client */
    for (int i = 0; i < 100 && x.calls == 0; i++)
        bsu_run_for(1);
    ck_assert_int_eq(x.calls, 1);
    ck_assert_int_eq(y.calls, 0); /* the client had gone */
    ld_test_expect_error(f, LD_ECANCELED, NULL);
    ctl_release(&s, false);
    bsu_run_for(5);
    ld_context_unref(u);
    ctl_done(&s, bss);
}
END_TEST

/* A listener that closes the client: the listeners after it are not called
 * (client.h: never called once the client is closed). */
START_TEST(test_close_inside_a_status_listener_silences_the_others)
{
    struct ctl s = {0};
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *c = bsu_client(bss, 0, 0, 1);
    struct lfree x = {.c = c, .close_instead = true}, y = {.c = c, .close_instead = true};
    ck_assert_int_gt(ld_client_add_big_segment_status_listener(c, free_in_listener, &x), 0);
    ck_assert_int_gt(ld_client_add_big_segment_status_listener(c, free_in_listener, &y), 0);
    for (int i = 0; i < 100 && x.calls == 0; i++)
        bsu_run_for(1);
    bsu_run_for(10);
    ck_assert_int_eq(x.calls, 1);
    ck_assert_int_eq(y.calls, 0);
    ld_client_free(c);
    ctl_done(&s, bss);
}
END_TEST

/* The big segment store is freed right after the client, before the loop
 * ran anything, with memberships and the poll pending. */
START_TEST(test_store_freed_right_after_the_client)
{
    for (int order = 0; order < 2; order++) {
        struct ctl s = {.hold = true, .hold_meta = true};
        ld_big_segment_store *bss = ctl_store(&s);
        ld_client *c = bsu_client(bss, 0, 0, 1);
        ld_context *u1 = bsu_user("u1"), *u2 = bsu_user("u2");
        ld_future *f[3] = {ld_client_bool_variation(c, "f", u1, false),
                           ld_client_bool_variation(c, "f", u2, false),
                           ld_client_bool_variation(c, "f", u1, false)};
        await_n(&s, 2);
        if (order == 1)
            ld_future_unref(ld_client_close(c));
        ld_client_free(c);
        ld_big_segment_store_free(bss);
        for (int i = 0; i < 3; i++)
            ld_test_expect_error(f[i], LD_ECANCELED, NULL);
        for (int i = 0; i < 100 && s.frees == 0; i++)
            bsu_run_for(1);
        ck_assert_int_eq(s.frees, 1);
        ld_context_unref(u1);
        ld_context_unref(u2);
    }
}
END_TEST

/* A store that never answers anything: evaluations complete once the client
 * is freed. */
START_TEST(test_a_store_that_never_answers)
{
    struct ctl s = {.hold = true, .hold_meta = true};
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *c = bsu_client(bss, 0, 0, 1);
    enum { N = 20 };
    ld_future *f[N];
    ld_context *u = bsu_user("u1"), *v = bsu_user("u2");
    for (int i = 0; i < N; i++)
        f[i] = i % 2 ? ld_client_bool_variation(c, "f", u, false) : ld_client_all_flags(c, v, 0);
    bsu_run_for(50);
    for (int i = 0; i < N; i++)
        ck_assert(ld_future_is_pending(f[i]));
    ld_big_segment_store_status st;
    ck_assert_int_eq(ld_client_big_segment_store_status(c, &st), LD_EBUSY);
    ck_assert_int_eq(s.metadatas, 1); /* one poll, still under way */
    ld_client_free(c);
    for (int i = 0; i < N; i++)
        ld_test_expect_error(f[i], LD_ECANCELED, NULL);
    bsu_run_for(10);
    ld_context_unref(u);
    ld_context_unref(v);
    ctl_done(&s, bss);
}
END_TEST

/* Reads answered after the client and its cache are gone, in every way. */
START_TEST(test_a_store_answering_after_the_client_is_gone)
{
    for (int way = 0; way < 3; way++) {
        struct ctl s = {.hold = true, .hold_meta = true};
        ld_big_segment_store *bss = ctl_store(&s);
        ld_client *c = bsu_client(bss, 0, 0, 1);
        ld_future *f[10];
        ld_context *ctx[10];
        for (int i = 0; i < 10; i++) {
            char key[16];
            snprintf(key, sizeof key, "k%d", i);
            ctx[i] = bsu_user(key);
            f[i] = ld_client_bool_variation(c, "f", ctx[i], false);
        }
        await_n(&s, 10);
        ld_client_free(c);
        for (int i = 0; i < 10; i++)
            ld_test_expect_error(f[i], LD_ECANCELED, NULL);
        bsu_run_for(5); /* the cache is gone */
        s.err = way == 1 ? LD_ESTORE : 0;
        s.meta_err = way == 2 ? LD_ETIMEDOUT : 0;
        ctl_release(&s, way == 2);
        ctl_release_meta(&s);
        bsu_run_for(5);
        for (int i = 0; i < 10; i++)
            ld_context_unref(ctx[i]);
        ctl_done(&s, bss);
    }
}
END_TEST

/* Two clients on one big segment store, both with reads held: freeing one
 * (its reads are cancelled on the shared store) leaves the other's reads
 * to complete with their own answers. */
START_TEST(test_two_clients_on_one_store_one_freed)
{
    struct ctl s = {.hold = true, .by = json_object()};
    char h[LD__BIG_SEGMENT_HASH_LEN + 1];
    hash_of("b1", h);
    json_object_set_new(s.by, h, json_pack("{sb}", "s1.g1", 1));
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *a = bsu_client(bss, 0, 0, 1), *b = bsu_client(bss, 0, 0, 1);
    ld_context *a1 = bsu_user("a1"), *b1 = bsu_user("b1"), *b2 = bsu_user("b2");
    ld_future *fa = ld_client_bool_variation(a, "f", a1, false);
    ld_future *fb1 = ld_client_bool_variation(b, "f", b1, false);
    ld_future *fb2 = ld_client_bool_variation(b, "f", b2, false);
    ld_future *fa2 = ld_client_bool_variation(a, "f", b1, false);
    await_n(&s, 4);
    ld_client_free(a);
    ld_test_expect_error(fa, LD_ECANCELED, NULL);
    ld_test_expect_error(fa2, LD_ECANCELED, NULL);
    ctl_release(&s, true);
    ck_assert(ld_test_await_bool(fb1));
    ck_assert(!ld_test_await_bool(fb2));
    s.hold = false;
    ck_assert(ld_test_await_bool(ld_client_bool_variation(b, "f", b1, false))); /* kept */
    ck_assert_int_eq(s.memberships, 4);
    ld_client_free(b);
    ld_context_unref(a1);
    ld_context_unref(b1);
    ld_context_unref(b2);
    ctl_done(&s, bss);
}
END_TEST

/* A cache of one context kept 1 ms, 7 contexts evaluated 300 at a time,
 * reads answered in reverse: each evaluation gets its context's answer. */
START_TEST(test_a_cache_of_one_thrashed)
{
    struct ctl s = {.hold = true, .by = json_object()};
    for (int k = 0; k < 7; k += 2) {
        char key[8], h[LD__BIG_SEGMENT_HASH_LEN + 1];
        snprintf(key, sizeof key, "t%d", k);
        hash_of(key, h);
        json_object_set_new(s.by, h, json_pack("{sb}", "s1.g1", 1));
    }
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *c = bsu_client(bss, 1, 1, 1);
    ld_context *ctx[7];
    for (int k = 0; k < 7; k++) {
        char key[8];
        snprintf(key, sizeof key, "t%d", k);
        ctx[k] = bsu_user(key);
    }
    for (int round = 0; round < 5; round++) {
        ld_future *f[300];
        for (int i = 0; i < 300; i++)
            f[i] = ld_client_bool_variation(c, "f", ctx[(i * 5 + round) % 7], false);
        for (int i = 0; i < 20 && s.n < 7; i++)
            bsu_run_for(1);
        bsu_run_for(2);
        ck_assert_uint_le(s.n, 7); /* one read per context at a time */
        ctl_release(&s, true);
        for (int i = 0; i < 300; i++) {
            int k = (i * 5 + round) % 7;
            ld_test_wait(f[i]);
            ck_assert_msg(ld_future_is_fulfilled(f[i]) && ld_future_bool(f[i]) == (k % 2 == 0),
                          "round %d evaluation %d (t%d)", round, i, k);
            ld_future_unref(f[i]);
        }
        bsu_run_for(3); /* everything kept expires */
    }
    ld_client_free(c);
    for (int k = 0; k < 7; k++)
        ld_context_unref(ctx[k]);
    ctl_done(&s, bss);
}
END_TEST

/* Evaluations started from inside a status listener, which then frees the
 * client: they are rejected with LD_ECANCELED. */
static ld_future *in_listener[4];
static ld_context *in_listener_ctx;

static void eval_then_free(ld_client *c, const ld_big_segment_store_status *st, void *arg)
{
    (void)st;
    (void)arg;
    for (int i = 0; i < 4; i++)
        in_listener[i] = i % 2 ? ld_client_bool_variation(c, "f", in_listener_ctx, false)
                               : ld_client_all_flags(c, in_listener_ctx, 0);
    ld_client_free(c);
}

START_TEST(test_evaluations_from_a_listener_that_frees_the_client)
{
    struct ctl s = {.hold = true};
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *c = bsu_client(bss, 0, 0, 1);
    in_listener_ctx = bsu_user("l1");
    memset(in_listener, 0, sizeof in_listener);
    ck_assert_int_gt(ld_client_add_big_segment_status_listener(c, eval_then_free, NULL), 0);
    for (int i = 0; i < 200 && !in_listener[3]; i++)
        bsu_run_for(1);
    for (int i = 0; i < 4; i++) {
        ck_assert_ptr_nonnull(in_listener[i]);
        ld_test_expect_error(in_listener[i], LD_ECANCELED, NULL);
    }
    ctl_release(&s, false);
    bsu_run_for(5);
    ld_context_unref(in_listener_ctx);
    ctl_done(&s, bss);
}
END_TEST

/* ---- many contexts --------------------------------------------------------- */

static long json_live, lib_live;

static void *json_count_malloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        json_live += (long)malloc_usable_size(p);
    return p;
}

static void json_count_free(void *p)
{
    if (p)
        json_live -= (long)malloc_usable_size(p);
    free(p);
}

static void *lib_count_malloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        lib_live += (long)malloc_usable_size(p);
    return p;
}

static void *lib_count_realloc(void *p, size_t n)
{
    long before = (long)malloc_usable_size(p);
    void *q = realloc(p, n);
    if (q)
        lib_live += (long)malloc_usable_size(q) - before;
    return q;
}

static void lib_count_free(void *p)
{
    lib_live -= (long)malloc_usable_size(p);
    free(p);
}

/* Evaluates "f" for contexts key-from .. key-to-1, `batch` at a time. */
static void eval_range(ld_client *c, int from, int to, int batch)
{
    ld_future **f = calloc((size_t)batch, sizeof *f);
    ck_assert_ptr_nonnull(f);
    for (int i = from; i < to; i += batch) {
        int n = to - i < batch ? to - i : batch;
        for (int k = 0; k < n; k++) {
            char key[24];
            snprintf(key, sizeof key, "key-%d", i + k);
            ld_context *ctx = bsu_user(key);
            f[k] = ld_client_bool_variation(c, "f", ctx, false);
            ld_context_unref(ctx);
        }
        for (int k = 0; k < n; k++) {
            ld_test_wait(f[k]);
            if (!ld_future_is_fulfilled(f[k]) || !ld_future_bool(f[k]))
                ck_abort_msg("context key-%d: not in the big segment", i + k);
            ld_future_unref(f[k]);
        }
    }
    free(f);
}

START_TEST(test_many_contexts_through_a_cache_of_1000)
{
    /* 100,000; 30,000 where each costs much more (valgrind, sanitizers) */
    int n = getenv("LDASYNC_VALGRIND") || LD_TEST_SANITIZED ? 30000 : 100000;
    struct ctl s = {0};
    ld_big_segment_store *bss = ctl_store(&s);
    json_live = lib_live = 0;
    json_set_alloc_funcs(json_count_malloc, json_count_free);
    ck_assert_int_eq(ld_set_alloc_funcs(lib_count_malloc, lib_count_realloc, lib_count_free), 0);
    ld_client *c = bsu_client(bss, 1000, 600000, 0);
    long rss0 = ld_test_rss_kb();
    int64_t t0 = bsu_wall_ms();
    eval_range(c, 0, 10000, 500);
    bsu_run_for(5);
    long json10k = json_live, lib10k = lib_live, rss10k = ld_test_rss_kb();
    eval_range(c, 10000, n, 500);
    bsu_run_for(5);
    long json100k = json_live, lib100k = lib_live, rss100k = ld_test_rss_kb();
    int64_t t1 = bsu_wall_ms();
    ck_assert_int_eq(s.memberships, n);
    /* the last 1,000 are kept, the others were dropped */
    eval_range(c, n - 1000, n, 500);
    ck_assert_int_eq(s.memberships, n);
    eval_range(c, n - 1001, n - 1000, 1);
    ck_assert_int_eq(s.memberships, n + 1);
    eval_range(c, 0, 1000, 500);
    ck_assert_int_eq(s.memberships, n + 1001);
    printf("bs attack: %d contexts through a cache of 1,000: %lld ms; live bytes of "
           "the library %ld after 10,000, %ld after %d; jansson %ld, %ld; RSS %ld kB "
           "at start, %ld kB after 10,000, %ld kB after %d\n",
           n, (long long)(t1 - t0), lib10k, lib100k, n, json10k, json100k, rss0, rss10k, rss100k,
           n);
    ld_client_free(c);
    ld_test_flush();
    json_set_alloc_funcs(malloc, free);
    ck_assert_int_eq(ld_set_alloc_funcs(NULL, NULL, NULL), 0);
    /* bounded: what the contexts after the first 10,000 left behind is within 64 KB */
    ck_assert_int_lt(lib100k - lib10k, 65536);
    ck_assert_int_lt(json100k - json10k, 65536);
    ctl_done(&s, bss);
}
END_TEST

/* 1,000 contexts evaluated at once while the store holds every read, then
 * answered newest first: each evaluation gets its own context's answer. */
START_TEST(test_1000_concurrent_contexts_answered_in_reverse)
{
    enum { N = 1000 };
    struct ctl s = {.hold = true, .by = json_object()};
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *c = bsu_client(bss, 0, 0, 0);
    ld_future *f[N];
    for (int i = 0; i < N; i++) {
        char key[16], h[LD__BIG_SEGMENT_HASH_LEN + 1];
        snprintf(key, sizeof key, "c%d", i);
        hash_of(key, h);
        if (i % 3 == 0) /* included */
            json_object_set_new(s.by, h, json_pack("{sb}", "s1.g1", 1));
        else if (i % 3 == 1) /* excluded */
            json_object_set_new(s.by, h, json_pack("{sb}", "s1.g1", 0));
        ld_context *ctx = bsu_user(key);
        f[i] = ld_client_bool_variation(c, "f", ctx, false);
        ld_context_unref(ctx);
    }
    await_n(&s, N);
    bsu_run_for(5);
    for (int i = 0; i < N; i++)
        ck_assert(ld_future_is_pending(f[i]));
    int64_t t0 = bsu_wall_ms();
    ctl_release(&s, true);
    for (int i = 0; i < N; i++) {
        ld_test_wait(f[i]);
        ck_assert_msg(ld_future_is_fulfilled(f[i]) && ld_future_bool(f[i]) == (i % 3 == 0),
                      "context c%d", i);
        ld_future_unref(f[i]);
    }
    printf("bs attack: 1,000 held reads answered in reverse: all done in %lld ms\n",
           (long long)(bsu_wall_ms() - t0));
    ck_assert_int_eq(s.memberships, N);
    ck_assert(eval_f(c, "f", "c999")); /* kept */
    ck_assert(!eval_f(c, "f", "c998"));
    ck_assert_int_eq(s.memberships, N);
    ld_client_free(c);
    ctl_done(&s, bss);
}
END_TEST

/* A context whose read the store never answers does not hold the
 * evaluations of a context whose membership the cache keeps. */
START_TEST(test_a_hung_read_does_not_hold_a_kept_context)
{
    struct ctl s = {0};
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *c = bsu_client(bss, 0, 0, 0);
    ck_assert(eval_f(c, "f", "kept")); /* read and kept */
    s.hold = true;
    ld_context *hung = bsu_user("hung"), *kept = bsu_user("kept");
    ld_future *fh = ld_client_bool_variation(c, "f", hung, false);
    await_n(&s, 1);
    ld_future *fk = ld_client_bool_variation(c, "f", kept, false);
    ld_future *fa = ld_client_all_flags(c, kept, 0);
    bsu_run_for(50);
    bool done = !ld_future_is_pending(fk), all_done = !ld_future_is_pending(fa);
    ctl_release(&s, false);
    ld_test_wait(fh);
    ld_test_wait(fk);
    ld_test_await_ok(fa);
    ck_assert(ld_future_bool(fk));
    ld_future_unref(fh);
    ld_future_unref(fk);
    ck_assert_int_eq(s.memberships, 2);
    ld_client_free(c);
    ld_context_unref(hung);
    ld_context_unref(kept);
    ctl_done(&s, bss);
    ck_assert_msg(done, "the kept context waited for another context's read");
    ck_assert_msg(all_done, "the kept context's all-flags state waited for another's read");
}
END_TEST

/* ---- odd memberships and odd answers --------------------------------------- */

START_TEST(test_a_membership_of_10000_refs)
{
    struct ctl s = {.m = json_object()};
    for (int i = 0; i < 10000; i++) {
        char ref[32];
        snprintf(ref, sizeof ref, "seg-%d.g%d", i, i % 7);
        json_object_set_new(s.m, ref, json_boolean(i % 2));
    }
    json_object_set_new(s.m, "s1.g1", json_true());
    ck_assert_uint_eq(json_object_size(s.m), 10001);
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *c = bsu_client(bss, 0, 0, 0);
    int64_t t0 = bsu_wall_ms();
    for (int i = 0; i < 1000; i++)
        ck_assert(eval_f(c, "f", "big"));
    printf("bs attack: 1,000 evaluations against a membership of 10,001 refs: %lld ms\n",
           (long long)(bsu_wall_ms() - t0));
    ck_assert_int_eq(s.memberships, 1);
    json_object_set_new(s.m, "s1.g1", json_false()); /* a new object would be read next */
    ld_client_free(c);
    ctl_done(&s, bss);
}
END_TEST

/* Memberships that are not objects, and metadata that is not an integer or
 * is out of range: evaluations complete with the fallthrough. */
START_TEST(test_odd_membership_values_serve_the_rules)
{
    json_t *odd[] = {json_string("s1.g1"),
                     json_pack("[s]", "s1.g1"),
                     json_true(),
                     json_integer(1),
                     json_pack("{si}", "s1.g1", 1),
                     json_pack("{sn}", "s1.g1"),
                     json_pack("{ss}", "s1.g1", "true"),
                     json_object(),
                     json_null()};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        struct ctl s = {.m = odd[i]};
        ld_big_segment_store *bss = ctl_store(&s);
        ld_client *c = bsu_client(bss, 0, 0, 0);
        ck_assert_msg(!eval_f(c, "f", "odd"), "membership %zu", i);
        ck_assert_msg(!eval_f(c, "f", "odd"), "membership %zu (kept)", i);
        ck_assert_int_eq(s.memberships, 1);
        ld_client_free(c);
        ctl_done(&s, bss);
    }
    static const int64_t times[] = {INT64_MAX, INT64_MIN, -2, 1};
    static const bool stale[] = {false, true, true, true};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        struct ctl s = {.meta_value = times[i]};
        ld_big_segment_store *bss = ctl_store(&s);
        ld_client *c = bsu_client(bss, 0, 0, 0);
        ck_assert(eval_f(c, "f", "odd"));
        ld_big_segment_store_status st;
        ck_assert_int_eq(ld_client_big_segment_store_status(c, &st), 0);
        ck_assert_msg(st.available && st.stale == stale[i], "time %lld", (long long)times[i]);
        ld_client_free(c);
        ctl_done(&s, bss);
    }
}
END_TEST

/* Stores that reject with odd codes: every evaluation completes, as a store
 * error (the fallthrough), and nothing failed is kept. */
START_TEST(test_rejections_with_odd_codes)
{
    static const int codes[] = {LD_ESTORE,    LD_ECANCELED, LD_ECLOSED, LD_EINVAL,
                                LD_ETIMEDOUT, -1,           -9999,      INT_MIN};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        struct ctl s = {.err = codes[i], .meta_err = codes[i]};
        ld_big_segment_store *bss = ctl_store(&s);
        ld_client *c = bsu_client(bss, 0, 0, 0);
        ld_context *u = bsu_user("u");
        for (int round = 0; round < 2; round++) {
            ld_future *f = ld_test_done(detail_of(c, "f", u));
            ck_assert_msg(ld_future_is_fulfilled(f), "code %d: rejected with %d", codes[i],
                          ld_future_error(f));
            ck_assert_int_eq(ld_detail_big_segments_status(ld_future_ptr(f)),
                             LD_BIG_SEGMENTS_STATUS_STORE_ERROR);
            ck_assert(json_is_false(ld_detail_value(ld_future_ptr(f))));
            ld_future_unref(f);
        }
        ck_assert_int_eq(s.memberships, 2);
        ld_big_segment_store_status st;
        ck_assert_int_eq(ld_client_big_segment_store_status(c, &st), 0);
        ck_assert(!st.available && !st.stale);
        ld_context_unref(u);
        ld_client_free(c);
        ctl_done(&s, bss);
    }
}
END_TEST

/* One poll that ran out of memory: the status says the store is
 * unavailable until the next poll, and evaluations meanwhile report a store
 * error; they are not rejected with LD_ENOMEM for as long as the poll
 * interval (their own reads did not run out of memory). */
START_TEST(test_a_poll_out_of_memory_is_not_replayed_as_out_of_memory)
{
    struct ctl s = {.meta_err = LD_ENOMEM, .meta_err_once = true};
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *c = bsu_client(bss, 0, 0, 60000);
    ld_big_segment_store_status st;
    for (int i = 0; i < 100 && ld_client_big_segment_store_status(c, &st) == LD_EBUSY; i++)
        bsu_run_for(1);
    ck_assert_int_eq(ld_client_big_segment_store_status(c, &st), 0);
    ck_assert(!st.available);
    for (int i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof key, "m%d", i);
        ld_context *u = bsu_user(key);
        ld_future *f = ld_test_done(detail_of(c, "f", u));
        ck_assert_msg(ld_future_is_fulfilled(f), "evaluation %d rejected with %d", i,
                      ld_future_error(f));
        ck_assert_int_eq(ld_detail_big_segments_status(ld_future_ptr(f)),
                         LD_BIG_SEGMENTS_STATUS_STORE_ERROR);
        ld_future_unref(f);
        ld_context_unref(u);
    }
    ck_assert_int_eq(s.metadatas, 1);
    ld_client_free(c);
    ctl_done(&s, bss);
}
END_TEST

/* ---- odd keys and multi-kind contexts -------------------------------------- */

START_TEST(test_odd_context_keys)
{
    struct ctl s = {.seen = json_object()};
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *c = bsu_client(bss, 0, 0, 0);
    char *big = malloc(100 * 1024 + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'k', 100 * 1024);
    big[100 * 1024] = '\0';
    char *big2 = strdup(big);
    big2[100 * 1024 - 1] = 'j'; /* differs in its last byte */
    const char *keys[] = {"",       big,
                          big2,     "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
                          " ",      "\x01\x02\x7f",
                          "a/b+c=", "CgQblGLKpKMbrDVn4Lbm/ZEAeH2yq0M9lvbReMq/zpA=",
                          "%s%n",   "\t\r\n"};
    size_t n_keys = sizeof keys / sizeof keys[0];
    int built = 0;
    for (size_t i = 0; i < n_keys; i++) {
        ld_context *ctx = bsu_ctx("user", keys[i]);
        if (!ctx) {
            printf("bs attack: the builder refuses key %zu (%zu bytes)\n", i, strlen(keys[i]));
            continue;
        }
        built++;
        for (int round = 0; round < 2; round++) {
            ld_future *f = ld_test_fulfilled(detail_of(c, "f", ctx));
            ck_assert_msg(json_is_true(ld_detail_value(ld_future_ptr(f))), "key %zu", i);
            ck_assert_int_eq(ld_detail_big_segments_status(ld_future_ptr(f)),
                             LD_BIG_SEGMENTS_STATUS_HEALTHY);
            ld_future_unref(f);
        }
        char h[LD__BIG_SEGMENT_HASH_LEN + 1];
        hash_of(keys[i], h);
        json_t *count = json_object_get(s.seen, h);
        ck_assert_msg(count && json_integer_value(count) == 1, "key %zu: its hash read once", i);
        ld_context_unref(ctx);
    }
    ck_assert_int_eq(s.memberships, built);
    ck_assert_int_ge(built, n_keys - 1); /* at most the empty key is refused */
    printf("bs attack: %d of %zu odd keys built and evaluated\n", built, n_keys);
    free(big);
    free(big2);
    ld_client_free(c);
    ctl_done(&s, bss);
}
END_TEST

START_TEST(test_multi_kind_contexts_share_or_differ_in_key)
{
    struct ctl s = {.seen = json_object(), .by = json_object()};
    char hu[LD__BIG_SEGMENT_HASH_LEN + 1], hv[LD__BIG_SEGMENT_HASH_LEN + 1];
    hash_of("same", hu);
    hash_of("other", hv);
    json_object_set_new(s.by, hu, json_pack("{sb}", "so.g1", 1)); /* "same" is in "so" */
    json_object_set_new(s.by, hv, json_pack("{sb}", "s1.g1", 1)); /* "other" is in "s1" */
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *c = bsu_client(bss, 0, 0, 0);
    ld_context *u = bsu_ctx("user", "same"), *o = bsu_ctx("org", "same"),
               *u2 = bsu_ctx("user", "other");
    const ld_context *p1[] = {u, o}, *p2[] = {u2, o};
    ld_context *shared = ld_context_multi(p1, 2, NULL), *differ = ld_context_multi(p2, 2, NULL);
    ck_assert(shared && differ);
    /* shared key: one read serves both kinds */
    ck_assert(!ld_test_await_bool(ld_client_bool_variation(c, "f", shared, false)));
    ck_assert(ld_test_await_bool(ld_client_bool_variation(c, "g", shared, false)));
    ck_assert(ld_test_await_bool(ld_client_bool_variation(c, "h", shared, false)));
    ck_assert_int_eq(s.memberships, 1);
    /* different keys: each kind's own */
    ck_assert(ld_test_await_bool(ld_client_bool_variation(c, "f", differ, false)));
    ck_assert(ld_test_await_bool(ld_client_bool_variation(c, "g", differ, false)));
    ck_assert(ld_test_await_bool(ld_client_bool_variation(c, "h", differ, false)));
    ck_assert_int_eq(s.memberships, 2);
    ck_assert_int_eq(json_integer_value(json_object_get(s.seen, hu)), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(s.seen, hv)), 1);
    /* an org alone: only "so" can match; "f" needs a user */
    ck_assert(ld_test_await_bool(ld_client_bool_variation(c, "g", o, false)));
    ck_assert(!ld_test_await_bool(ld_client_bool_variation(c, "f", o, false)));
    ck_assert_int_eq(s.memberships, 2);
    ld_context_unref(u);
    ld_context_unref(o);
    ld_context_unref(u2);
    ld_context_unref(shared);
    ld_context_unref(differ);
    ld_client_free(c);
    ctl_done(&s, bss);
}
END_TEST

/* ---- listeners ------------------------------------------------------------- */

struct lis {
    ld_client *c;
    int calls;
    int64_t self, other;
    bool remove_self, remove_other, add, free_client;
    struct lis *added; /* what `add` registers */
    int64_t added_id;
};

static void lis_fn(ld_client *c, const ld_big_segment_store_status *st, void *arg)
{
    struct lis *l = arg;
    (void)st;
    l->calls++;
    if (l->add && !l->added_id) {
        l->added_id = ld_client_add_big_segment_status_listener(c, lis_fn, l->added);
        ck_assert_int_gt(l->added_id, 0);
    }
    if (l->remove_self && l->self) {
        ck_assert_int_eq(ld_client_remove_big_segment_status_listener(c, l->self), 0);
        ck_assert_int_eq(ld_client_remove_big_segment_status_listener(c, l->self), LD_EINVAL);
        l->self = 0;
    }
    if (l->remove_other && l->other) {
        ck_assert_int_eq(ld_client_remove_big_segment_status_listener(c, l->other), 0);
        l->other = 0;
    }
    if (l->free_client) {
        l->free_client = false;
        ld_client_free(c);
    }
}

/* Answers the next poll (the status flips) and waits for it to be heard. */
static void next_round(struct ctl *s)
{
    for (int i = 0; i < 500 && s->nmeta == 0; i++)
        bsu_run_for(1);
    ck_assert_uint_eq(s->nmeta, 1);
    ctl_release_meta(s);
    bsu_run_for(5);
}

START_TEST(test_listeners_that_add_remove_and_free)
{
    struct ctl s = {.flip = true, .hold_meta = true};
    ld_big_segment_store *bss = ctl_store(&s);
    ld_client *c = bsu_client(bss, 0, 0, 1);
    struct lis added = {0};
    struct lis a = {.add = true, .added = &added, .remove_self = true};
    struct lis b = {.remove_other = true};
    struct lis d = {0}, e = {0};
    a.self = ld_client_add_big_segment_status_listener(c, lis_fn, &a);
    b.self = ld_client_add_big_segment_status_listener(c, lis_fn, &b);
    d.self = ld_client_add_big_segment_status_listener(c, lis_fn, &d);
    e.self = ld_client_add_big_segment_status_listener(c, lis_fn, &e);
    b.other = d.self; /* b removes d before d is called */
    next_round(&s);
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(b.calls, 1);
    ck_assert_int_eq(d.calls, 0);
    ck_assert_int_eq(e.calls, 1);
    ck_assert_int_eq(added.calls, 0); /* added during the round: from the next one */
    next_round(&s);
    ck_assert_int_eq(added.calls, 1);
    ck_assert_int_eq(a.calls, 1); /* removed itself */
    ck_assert_int_eq(b.calls, 2);
    ck_assert_int_eq(d.calls, 0);
    ck_assert_int_eq(e.calls, 2);
    ck_assert_int_eq(ld_client_remove_big_segment_status_listener(c, d.self), LD_EINVAL);
    /* the newest frees the client on the next change; e is before it */
    added.free_client = true;
    next_round(&s);
    ck_assert(!added.free_client);
    ck_assert_int_eq(added.calls, 2);
    ck_assert_int_eq(e.calls, 3);
    int polls = s.metadatas;
    bsu_run_for(20);
    ck_assert_int_eq(s.metadatas, polls);
    ctl_done(&s, bss);
}
END_TEST

/* ---- polling ------------------------------------------------------------- */

struct pass_timer {
    struct event *ev;
    int64_t last_us, max_gap_us;
    int ticks;
};

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
    struct pass_timer *t = arg;
    (void)fd;
    (void)what;
    int64_t now = mono_us();
    if (t->last_us && now - t->last_us > t->max_gap_us)
        t->max_gap_us = now - t->last_us;
    t->last_us = now;
    t->ticks++;
}

static void flips_heard(ld_client *c, const ld_big_segment_store_status *st, void *arg)
{
    int *n = arg;
    (void)c;
    (void)st;
    (*n)++;
}

/* A poll every millisecond for 2 seconds, with evaluations going on: the
 * loop is never held for long, and nothing grows. With `flip`, the status
 * changes at every poll, and the listener hears each change. */
static void poll_every_ms(bool flip)
{
    struct ctl s = {.flip = flip};
    ld_big_segment_store *bss = ctl_store(&s);
    lib_live = 0;
    ck_assert_int_eq(ld_set_alloc_funcs(lib_count_malloc, lib_count_realloc, lib_count_free), 0);
    ld_client *c = bsu_client(bss, 10, 1, 1);
    int heard = 0;
    ck_assert_int_gt(ld_client_add_big_segment_status_listener(c, flips_heard, &heard), 0);
    struct pass_timer t = {0};
    t.ev = event_new(B, -1, EV_PERSIST, tick, &t);
    struct timeval one = {0, 1000};
    event_add(t.ev, &one);
    bsu_run_for(200);
    long lib_start = lib_live, rss_start = ld_test_rss_kb();
    int polls_start = s.metadatas;
    int64_t end = bsu_wall_ms() + 2000;
    int evals = 0;
    while (bsu_wall_ms() < end) {
        char key[16];
        snprintf(key, sizeof key, "p%d", evals++ % 50);
        ld_context *ctx = bsu_user(key);
        ld_future *f = ld_client_bool_variation(c, "f", ctx, false);
        ld_context_unref(ctx);
        ld_test_wait(f);
        ck_assert(ld_future_is_fulfilled(f));
        ld_future_unref(f);
        if (evals % 64 == 0)
            bsu_run_for(1);
    }
    bsu_run_for(5);
    long lib_end = lib_live, rss_end = ld_test_rss_kb();
    int polls = s.metadatas - polls_start;
    event_free(t.ev);
    ld_client_free(c);
    ld_test_flush();
    ck_assert_int_eq(ld_set_alloc_funcs(NULL, NULL, NULL), 0);
    printf("bs attack: poll 1 ms for 2 s%s: %d polls, %d listener calls, %d evaluations, "
           "longest loop pass %lld us (%d ticks); library live bytes %ld -> %ld, RSS %ld -> "
           "%ld kB\n",
           flip ? " (flipping)" : "", polls, heard, evals, (long long)t.max_gap_us, t.ticks,
           lib_start, lib_end, rss_start, rss_end);
    ck_assert_int_gt(polls, 100);
    ck_assert_int_lt(t.max_gap_us, 200000);
    ck_assert_int_lt(lib_end - lib_start, 16384);
    if (flip)
        ck_assert_int_ge(heard, polls - 1); /* each poll changed the status */
    else
        ck_assert_int_eq(heard, 1);
    ctl_done(&s, bss);
}

START_TEST(test_a_poll_every_millisecond_for_two_seconds)
{
    poll_every_ms(false);
}
END_TEST

START_TEST(test_a_status_that_flips_at_every_poll)
{
    poll_every_ms(true);
}
END_TEST

Suite *ld_suite_client_big_segments_attack(void)
{
    Suite *s = suite_create("client_big_segments_attack");
    TCase *tc = tcase_create("free_close");
    tcase_add_checked_fixture(tc, at_setup, bsu_teardown);
    tcase_add_test(tc, test_free_and_close_right_after_new);
    tcase_add_test(tc, test_close_then_reads_complete_as_usual);
    tcase_add_test(tc, test_free_inside_an_evaluation_callback_with_reads_pending);
    tcase_add_test(tc, test_free_inside_a_status_listener_with_reads_pending);
    tcase_add_test(tc, test_close_inside_a_status_listener_silences_the_others);
    tcase_add_test(tc, test_store_freed_right_after_the_client);
    tcase_add_test(tc, test_a_store_that_never_answers);
    tcase_add_test(tc, test_a_store_answering_after_the_client_is_gone);
    tcase_add_test(tc, test_two_clients_on_one_store_one_freed);
    tcase_add_test(tc, test_evaluations_from_a_listener_that_frees_the_client);
    suite_add_tcase(s, tc);

    tc = tcase_create("volume");
    tcase_add_checked_fixture(tc, at_setup, bsu_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_many_contexts_through_a_cache_of_1000);
    tcase_add_test(tc, test_1000_concurrent_contexts_answered_in_reverse);
    tcase_add_test(tc, test_a_hung_read_does_not_hold_a_kept_context);
    tcase_add_test(tc, test_a_membership_of_10000_refs);
    tcase_add_test(tc, test_a_cache_of_one_thrashed);
    suite_add_tcase(s, tc);

    tc = tcase_create("odd");
    tcase_add_checked_fixture(tc, at_setup, bsu_teardown);
    tcase_add_test(tc, test_odd_membership_values_serve_the_rules);
    tcase_add_test(tc, test_rejections_with_odd_codes);
    tcase_add_test(tc, test_a_poll_out_of_memory_is_not_replayed_as_out_of_memory);
    tcase_add_test(tc, test_odd_context_keys);
    tcase_add_test(tc, test_multi_kind_contexts_share_or_differ_in_key);
    suite_add_tcase(s, tc);

    tc = tcase_create("listeners_polls");
    tcase_add_checked_fixture(tc, at_setup, bsu_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_listeners_that_add_remove_and_free);
    tcase_add_test(tc, test_a_poll_every_millisecond_for_two_seconds);
    tcase_add_test(tc, test_a_status_that_flips_at_every_poll);
    suite_add_tcase(s, tc);
    return s;
}
