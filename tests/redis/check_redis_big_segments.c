/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The Redis big segment store against sets written by raw commands, as
 * LaunchDarkly's Relay Proxy writes them; and through a client.
 */
#include <string.h>

#include <event2/event.h>

#include "check_redis.h"

/* base64(SHA-256("alice")) */
static const char ALICE[] = "K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA=";

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

static ld_big_segment_store *bss_new(const char *prefix)
{
    ld_redis_options *o = rt_options(prefix);
    ld_big_segment_store *s = ld_redis_big_segment_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void raw(const char *cmd)
{
    redisReply *r = redisd_cmd(&rt_server, cmd);
    ck_assert_msg(r && r->type != REDIS_REPLY_ERROR, "%s failed", cmd);
    freeReplyObject(r);
}

START_TEST(test_metadata)
{
    ld_big_segment_store *s = bss_new(NULL);
    ld_future *f = rt_wait(ld_big_segment_store_get_metadata(s));
    ck_assert(ld_future_is_fulfilled(f));
    ck_assert_int_eq(ld_future_int(f), LD_BIG_SEGMENT_TIME_UNKNOWN);
    ld_future_unref(f);
    raw("SET launchdarkly:big_segments_synchronized_on 1700000000123");
    f = rt_wait(ld_big_segment_store_get_metadata(s));
    ck_assert_int_eq(ld_future_int(f), INT64_C(1700000000123));
    ld_future_unref(f);
    raw("SET launchdarkly:big_segments_synchronized_on yesterday");
    rt_error(ld_big_segment_store_get_metadata(s), LD_EPARSE, "synchronized_on");
    raw("SET launchdarkly:big_segments_synchronized_on -5");
    rt_error(ld_big_segment_store_get_metadata(s), LD_EPARSE, NULL);
    ck_assert_str_eq(ld_big_segment_store_describe(s), "redis");
    ld_big_segment_store_free(s);
}
END_TEST

START_TEST(test_membership)
{
    ld_big_segment_store *s = bss_new("bs");
    /* nothing: NULL */
    ck_assert_ptr_null(rt_json(ld_big_segment_store_get_membership(s, ALICE)));
    raw("SADD bs:big_segment_include:K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA= a.g1 both.g2");
    raw("SADD bs:big_segment_exclude:K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA= b.g1 both.g2");
    json_t *m = rt_json(ld_big_segment_store_get_membership(s, ALICE));
    ck_assert_int_eq(json_object_size(m), 3);
    ck_assert(json_is_true(json_object_get(m, "a.g1")));
    ck_assert(json_is_false(json_object_get(m, "b.g1")));
    ck_assert(json_is_true(json_object_get(m, "both.g2"))); /* include wins */
    json_decref(m);
    /* the other prefix holds nothing */
    ld_big_segment_store *other = bss_new(NULL);
    ck_assert_ptr_null(rt_json(ld_big_segment_store_get_membership(other, ALICE)));
    ld_big_segment_store_free(other);
    /* a wrong type under the key */
    raw("DEL bs:big_segment_include:K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA=");
    raw("SET bs:big_segment_include:K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA= x");
    rt_error(ld_big_segment_store_get_membership(s, ALICE), LD_ESTORE, "WRONGTYPE");
    ld_big_segment_store_free(s);
}
END_TEST

START_TEST(test_free_in_flight_and_no_server)
{
    ld_big_segment_store *s = bss_new(NULL);
    ld_future *fs[50];
    for (int i = 0; i < 50; i++)
        fs[i] = i % 2 ? ld_big_segment_store_get_membership(s, ALICE)
                      : ld_big_segment_store_get_metadata(s);
    ld_big_segment_store_free(s);
    for (int i = 0; i < 50; i++)
        rt_error(fs[i], LD_ECANCELED, NULL);
    /* a socket nobody listens on */
    ld_redis_options *o = ld_redis_options_new();
    ld_redis_options_set_url(o, "unix:/nonexistent/redis.sock");
    s = ld_redis_big_segment_store_new(base, o);
    ld_redis_options_free(o);
    rt_error(ld_big_segment_store_get_membership(s, ALICE), LD_ESTORE, "Redis");
    rt_error(ld_big_segment_store_get_metadata(s), LD_ESTORE, "Redis");
    ld_big_segment_store_free(s);
    rt_run_for(base, 10);
}
END_TEST

/* A flag that serves true to the members of big segment "big" (generation
 * 3), evaluated by a client that reads memberships from Redis. */
START_TEST(test_client_evaluates_from_redis)
{
    raw("SET launchdarkly:big_segments_synchronized_on 99999999999999");
    raw("SADD launchdarkly:big_segment_include:K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA= "
        "big.g3");
    ld_store *mem = ld_memory_store_new(base);
    json_t *data = rt_j(
        "{\"features\":{\"f\":{\"key\":\"f\",\"version\":1,\"on\":true,\"variations\":[true,false],"
        "\"fallthrough\":{\"variation\":1},\"rules\":[{\"id\":\"r\",\"variation\":0,\"clauses\":"
        "[{\"attribute\":\"\",\"op\":\"segmentMatch\",\"values\":[\"big\"]}]}]}},"
        "\"segments\":{\"big\":{\"key\":\"big\",\"version\":1,\"unbounded\":true,\"generation\":3}}"
        "}");
    rt_ok(ld_store_init(mem, data));
    json_decref(data);
    ld_big_segment_store *bss = bss_new(NULL);
    ld_client_options *co = ld_client_options_new();
    ld_client_options_set_store(co, mem);
    ld_client_options_set_offline(co, true);
    ld_client_options_set_big_segments(co, bss, 0);
    ld_client *c = ld_client_new(base, co);
    ld_client_options_free(co);
    rt_ok(ld_client_ready(c));
    const char *keys[] = {"alice", "bob"};
    for (int i = 0; i < 2; i++) {
        json_t *cj = json_pack("{s:s,s:s}", "kind", "user", "key", keys[i]);
        ld_context *ctx = ld_context_from_json(cj, NULL);
        json_decref(cj);
        ld_future *f =
            rt_wait(ld_client_variation_detail(c, "f", ctx, LD_VALUE_BOOL, json_false()));
        ck_assert_msg(ld_future_is_fulfilled(f), "%s", ld_future_error_message(f));
        const ld_detail *d = ld_future_ptr(f);
        ck_assert_int_eq(json_is_true(ld_detail_value(d)), i == 0);
        ck_assert_int_eq(ld_detail_big_segments_status(d), LD_BIG_SEGMENTS_STATUS_HEALTHY);
        ld_future_unref(f);
        ld_context_unref(ctx);
    }
    ld_client_free(c);
    rt_run_for(base, 10);
    ld_big_segment_store_free(bss);
    ld_store_free(mem);
    rt_run_for(base, 10);
}
END_TEST

Suite *rt_suite_big_segments(void)
{
    Suite *s = suite_create("redis_big_segments");
    TCase *tc = tcase_create("big_segments");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_metadata);
    tcase_add_test(tc, test_membership);
    tcase_add_test(tc, test_free_in_flight_and_no_server);
    tcase_add_test(tc, test_client_evaluates_from_redis);
    suite_add_tcase(s, tc);
    return s;
}
