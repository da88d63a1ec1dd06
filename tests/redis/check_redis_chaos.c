/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The chaos test of libldasync-redis: each public path run again and again
 * with its N-th allocation failing (N = 1, 2, ... until a run in which none
 * failed; jansson's allocations too in a second round), against the real
 * redis-server. Whatever fails, every future completes (fulfilled, or
 * rejected with LD_ENOMEM, or with LD_ESTORE when a transaction could not
 * be sent whole), nothing leaks (ASan, valgrind) and nothing crashes.
 * hiredis's own allocations do not go through the hooks.
 */
#include <jansson.h>
#include <string.h>

#include <event2/event.h>

#include "check_fail_alloc.h"
#include "check_redis.h"

static struct event_base *base;

static void flush_loop(void)
{
    for (int i = 0; i < 1000 && event_base_loop(base, EVLOOP_NONBLOCK) == 0; i++)
        ;
}

/* Waits for `f`, then checks it is fulfilled or failed as allowed. */
static void outcome(ld_future *f, const char *what)
{
    if (!f)
        return;
    ck_assert_int_eq(ld_future_wait(f), 0);
    if (ld_future_is_rejected(f)) {
        int e = ld_future_error(f);
        /* jansson 2.14 reports some of its own allocation failures while
         * parsing as malformed input: with its allocations failing too
         * (g_json), a parse may say LD_EPARSE */
        ck_assert_msg(e == LD_ENOMEM || e == LD_ESTORE || e == LD_ECLOSED ||
                          (g_json && e == LD_EPARSE),
                      "%s rejected with %s (%s), N=%ld", what, ld_err_name(e),
                      ld_future_error_message(f), g_fail_at);
    }
    ld_future_unref(f);
}

/* Options for the test's server; NULL when memory ran out. */
static ld_redis_options *server_options(void)
{
    ld_redis_options *o = ld_redis_options_new();
    if (o && ld_redis_options_set_url(o, rt_server.url) != 0) {
        ld_redis_options_free(o);
        o = NULL;
    }
    return o;
}

/* A Redis store on the test's server; NULL when memory ran out. */
static ld_store *chaos_store(void)
{
    ld_redis_options *o = server_options();
    ld_store *s = o ? ld_redis_store_new(base, o) : NULL;
    ld_redis_options_free(o);
    return s;
}

static void act_options(void)
{
    ld_redis_options *o = ld_redis_options_new();
    if (!o)
        return;
    int rc = ld_redis_options_set_url(o, "redis://:pass%40word@localhost:6380/2");
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    rc = ld_redis_options_set_url(o, "unix:/tmp/x.sock?db=1");
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    rc = ld_redis_options_set_prefix(o, "p");
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    rc = ld_redis_options_set_password(o, "pw");
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    ld_redis_options_free(o);
}

static void act_store(void)
{
    ld_store *s = chaos_store();
    if (!s)
        return;
    json_t *data = json_pack("{s:{s:{s:s,s:i},s:{s:s,s:i}},s:{s:{s:s,s:i}}}", "features", "a",
                             "key", "a", "version", 1, "b", "key", "b", "version", 2, "segments",
                             "s", "key", "s", "version", 1);
    if (data) {
        outcome(ld_store_init(s, data), "init");
        json_decref(data);
    }
    outcome(ld_store_get(s, ld_kind_features(), "a"), "get");
    outcome(ld_store_all(s, ld_kind_features()), "all");
    json_t *item = json_pack("{s:s,s:i}", "key", "a", "version", 5);
    if (item) {
        outcome(ld_store_upsert(s, ld_kind_features(), item), "upsert");
        json_decref(item);
    }
    outcome(ld_store_delete(s, ld_kind_features(), "b", 9), "delete");
    outcome(ld_store_initialized(s), "initialized");
    /* some in flight at the close and the free */
    ld_future *g = ld_store_get(s, ld_kind_segments(), "s");
    outcome(ld_store_close(s), "close");
    outcome(g, "get before close");
    ld_future *late = ld_store_get(s, ld_kind_features(), "a");
    ld_store_free(s);
    if (late) {
        ck_assert_int_eq(ld_future_wait(late), 0);
        ld_future_unref(late);
    }
    flush_loop();
}

static void act_store_free_in_flight(void)
{
    ld_store *s = chaos_store();
    if (!s)
        return;
    ld_future *fs[4] = {ld_store_get(s, ld_kind_features(), "a"),
                        ld_store_all(s, ld_kind_segments()), ld_store_initialized(s), NULL};
    json_t *item = json_pack("{s:s,s:i}", "key", "z", "version", 1);
    if (item) {
        fs[3] = ld_store_upsert(s, ld_kind_features(), item);
        json_decref(item);
    }
    event_base_loop(base, EVLOOP_NONBLOCK | EVLOOP_ONCE);
    ld_store_free(s);
    for (int i = 0; i < 4; i++) {
        if (fs[i]) {
            ck_assert_int_eq(ld_future_wait(fs[i]), 0);
            ld_future_unref(fs[i]);
        }
    }
    flush_loop();
}

static void act_big_segments(void)
{
    ld_redis_options *o = server_options();
    ld_big_segment_store *s = o ? ld_redis_big_segment_store_new(base, o) : NULL;
    ld_redis_options_free(o);
    if (!s)
        return;
    ld_future *m = ld_big_segment_store_get_membership(s, "aGFzaA==");
    ld_future *t = ld_big_segment_store_get_metadata(s);
    outcome(m, "membership");
    outcome(t, "metadata");
    ld_future *late = ld_big_segment_store_get_membership(s, "aGFzaA==");
    ld_big_segment_store_free(s);
    if (late) {
        ck_assert_int_eq(ld_future_wait(late), 0);
        ld_future_unref(late);
    }
    flush_loop();
}

static void run_path(void (*act)(void), const char *name)
{
    for (int json = 0; json < 2; json++) {
        g_json = json;
        bool done = false;
        for (long n = 1; n < 100000 && !done; n++) {
            base = event_base_new();
            json_set_alloc_funcs(chaos_json_malloc, free);
            CHAOS_BEGIN(n);
            act();
            done = !chaos_end(n);
            json_set_alloc_funcs(malloc, free);
            flush_loop();
            event_base_free(base);
        }
        ck_assert_msg(done, "%s never ran without a failure", name);
    }
}

START_TEST(test_chaos_options)
{
    run_path(act_options, "options");
}
END_TEST

START_TEST(test_chaos_store)
{
    rt_flushall();
    run_path(act_store, "store");
}
END_TEST

START_TEST(test_chaos_store_free_in_flight)
{
    run_path(act_store_free_in_flight, "store freed in flight");
}
END_TEST

START_TEST(test_chaos_big_segments)
{
    redisReply *r = redisd_cmd(&rt_server, "SADD launchdarkly:big_segment_include:aGFzaA== x.g1");
    freeReplyObject(r);
    run_path(act_big_segments, "big segments");
}
END_TEST

Suite *rt_suite_chaos(void)
{
    Suite *s = suite_create("redis_chaos");
    TCase *tc = tcase_create("chaos");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_chaos_options);
    tcase_add_test(tc, test_chaos_store);
    tcase_add_test(tc, test_chaos_store_free_in_flight);
    tcase_add_test(tc, test_chaos_big_segments);
    suite_add_tcase(s, tc);
    return s;
}
