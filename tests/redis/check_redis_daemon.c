/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Daemon mode: a client with a Redis store and no data source evaluates
 * what another process writes into Redis (raw commands here, as the Relay
 * Proxy or another SDK would).
 */
#include <string.h>

#include <event2/event.h>

#include "check_redis.h"

static struct event_base *base;

static void setup(void)
{
    rt_flushall();
    base = event_base_new();
}

static void teardown(void)
{
    event_base_free(base);
}

static void raw(const char *cmd)
{
    redisReply *r = redisd_cmd(&rt_server, cmd);
    ck_assert_msg(r && r->type != REDIS_REPLY_ERROR, "%s failed", cmd);
    freeReplyObject(r);
}

static void hset_flag(int version, int serve)
{
    redisReply *r =
        redisd_cmd(&rt_server,
                   "HSET launchdarkly:features f {\"key\":\"f\",\"version\":%d,\"on\":true,"
                   "\"variations\":[true,false],\"fallthrough\":{\"variation\":%d},\"salt\":\"s\"}",
                   version, serve);
    ck_assert(r && r->type == REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

static ld_context *user(const char *key)
{
    json_t *cj = json_pack("{s:s,s:s}", "kind", "user", "key", key);
    ld_context *ctx = ld_context_from_json(cj, NULL);
    json_decref(cj);
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

/* The detail of "f" for `ctx`: its value (true/false) and reason kind. */
static bool eval_f(ld_client *c, ld_context *ctx, int *kind)
{
    ld_future *f = rt_wait(ld_client_variation_detail(c, "f", ctx, LD_VALUE_BOOL, json_false()));
    ck_assert_msg(ld_future_is_fulfilled(f), "%s", ld_future_error_message(f));
    const ld_detail *d = ld_future_ptr(f);
    bool v = json_is_true(ld_detail_value(d));
    if (kind)
        *kind = ld_detail_reason_kind(d);
    ld_future_unref(f);
    return v;
}

START_TEST(test_daemon_mode_reads_what_others_write)
{
    hset_flag(1, 0);
    raw("SET launchdarkly:$inited \"\"");
    ld_store *s = rt_store(base, NULL);
    ld_client_options *o = ld_client_options_new();
    ck_assert_int_eq(ld_client_options_set_daemon_mode(o, true), 0);
    ck_assert_int_eq(ld_client_options_set_daemon_mode(NULL, true), LD_EINVAL);
    ld_client_options_set_store(o, s);
    ld_client *c = ld_client_new(base, o);
    ld_client_options_free(o);
    rt_ok(ld_client_ready(c));
    ld_data_source_status st;
    ck_assert_int_eq(ld_client_data_source_status(c, &st), 0);
    ck_assert_int_eq(st.state, LD_DATA_SOURCE_STATE_VALID);
    ck_assert(rt_bool(ld_store_initialized(s)));
    ld_context *ctx = user("u1");
    ck_assert(eval_f(c, ctx, NULL));
    /* another process changes the flag: the next evaluation sees it */
    hset_flag(2, 1);
    ck_assert(!eval_f(c, ctx, NULL));
    /* and deletes it */
    raw("HDEL launchdarkly:features f");
    int kind = -1;
    ck_assert(!eval_f(c, ctx, &kind));
    ck_assert_int_eq(kind, LD_REASON_ERROR);
    ld_context_unref(ctx);
    ld_client_free(c);
    rt_run_for(base, 10);
    ld_store_free(s);
    rt_run_for(base, 10);
}
END_TEST

Suite *rt_suite_daemon(void)
{
    Suite *s = suite_create("redis_daemon");
    TCase *tc = tcase_create("daemon");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_daemon_mode_reads_what_others_write);
    suite_add_tcase(s, tc);
    return s;
}
