/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Attacks on the Redis store's init that validates its data itself, a
 * slice per loop pass (ld_store_set_init_validates()), and on the caching
 * store over it, through the public API only. Each test names what must
 * hold.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "check_redis.h"

static struct event_base *base;

static void setup(void)
{
    rt_flushall();
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
}

static void teardown(void)
{
    event_base_free(base);
    base = NULL;
}

#define F() ld_kind_features()

static long long hlen(const struct redisd *d, const char *hash)
{
    redisReply *r = redisd_cmd(d, "HLEN %s", hash);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* ld_store_init() of a JSON text (the data let go of at once: the store
 * holds what it needs). */
static ld_future *init_text(ld_store *s, const char *text)
{
    json_t *d = rt_j(text);
    ld_future *f = ld_store_init(s, d);
    json_decref(d);
    return f;
}

/* {"features": {flag-00000..}} of n valid flags. */
static json_t *flags_data(int n)
{
    json_t *flags = json_object();
    for (int i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof(key), "flag-%06d", i);
        json_object_set_new(flags, key, json_pack("{s:s,s:i}", "key", key, "version", i + 1));
    }
    return json_pack("{s:o,s:{}}", "features", flags, "segments");
}

/* The store's init of `d` says what ld_data_validate() says, word for
 * word, and writes nothing. */
static void same_as_validate(ld_store *s, json_t *d)
{
    const char *why = NULL;
    ck_assert_int_eq(ld_data_validate(d, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(why);
    ld_future *f = rt_wait(ld_store_init(s, d));
    ck_assert(ld_future_is_rejected(f));
    ck_assert_int_eq(ld_future_error(f), LD_EINVAL);
    ck_assert_str_eq(ld_future_error_message(f), why);
    ld_future_unref(f);
    json_decref(d);
}

/* Invalid data in every position: the first item, the last item of a
 * namespace, after empty namespaces, a namespace that is not an object
 * after valid ones (known or unknown): the same reason as
 * ld_data_validate(), nothing written, the data before kept. */
START_TEST(test_invalid_in_every_position)
{
    ld_store *s = rt_store(base, NULL);
    json_t *old = rt_j("{\"features\":{\"kept\":{\"key\":\"kept\",\"version\":7}}}");
    rt_ok(ld_store_init(s, old));
    json_decref(old);
    static const char *const bad[] = {
        "{\"features\":{\"a\":{\"key\":\"a\",\"version\":-1},\"b\":{\"key\":\"b\",\"version\":1}}}",
        "{\"features\":{\"a\":{\"key\":\"a\",\"version\":1},\"b\":{\"key\":\"x\",\"version\":1}}}",
        "{\"features\":{},\"segments\":{},\"zz\":{\"q\":{\"version\":1}}}",
        "{\"features\":{},\"segments\":5}",
        "{\"features\":{\"a\":{\"key\":\"a\",\"version\":1}},\"segments\":{},\"other\":[]}",
        ("{\"features\":{\"a\":{\"key\":\"a\",\"version\":1}},\"segments\":{},\"other\":{}, "
         "\"more\":null}"),
        "{\"unknown\":{\"a\":{\"key\":\"a\",\"version\":1}},\"x\":{\"b\":7}}",
        "{\"features\":{\"a\":\"not an object\"}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        same_as_validate(s, rt_j(bad[i]));
    /* the last of 3,000 (three slices in) */
    json_t *d = flags_data(3000);
    json_object_set_new(json_object_get(json_object_get(d, "features"), "flag-002999"), "key",
                        json_string("nope"));
    same_as_validate(s, d);
    ck_assert_int_eq(hlen(&rt_server, "launchdarkly:features"), 1);
    json_t *kept = rt_json(ld_store_get(s, F(), "kept"));
    ck_assert_int_eq(ld_item_version(kept), 7);
    json_decref(kept);
    ld_store_free(s);
}
END_TEST

/* A key with a NUL byte: the reason is ld_data_validate()'s (the item's
 * own fault first; a key that is not UTF-8), not always "differs". */
START_TEST(test_nul_key_reason_as_validate)
{
    ld_store *s = rt_store(base, NULL);
    /* an item without "key", filed under "a\0b": its missing key is the
     * reason ld_data_validate() gives */
    json_t *d = json_pack("{s:{}}", "features");
    json_object_setn_new(json_object_get(d, "features"), "a\0b", 3,
                         json_pack("{s:i}", "version", 1));
    same_as_validate(s, d);
    /* filed under "a\0\xff" (not UTF-8) */
    d = json_pack("{s:{}}", "features");
    json_object_setn_new_nocheck(json_object_get(d, "features"), "a\0\xff", 3,
                                 json_pack("{s:s,s:i}", "key", "a", "version", 1));
    same_as_validate(s, d);
    ld_store_free(s);
}
END_TEST

/* A huge key (1 MiB) that is valid: written and read back. */
START_TEST(test_huge_key)
{
    ld_store *s = rt_store(base, NULL);
    size_t n = 1 << 20;
    char *key = malloc(n + 1);
    memset(key, 'k', n);
    key[n] = '\0';
    json_t *d = json_pack("{s:{s:{s:s,s:i}}}", "features", key, "key", key, "version", 3);
    rt_ok(ld_store_init(s, d));
    json_decref(d);
    json_t *it = rt_json(ld_store_get(s, F(), key));
    ck_assert_ptr_nonnull(it);
    ck_assert_int_eq(ld_item_version(it), 3);
    json_decref(it);
    free(key);
    ld_store_free(s);
}
END_TEST

/* Freed while an init is still validating: the init and the operations
 * that wait behind it complete LD_ECANCELED; nothing leaks (ASan). */
START_TEST(test_free_while_validating)
{
    ld_store *s = rt_store(base, NULL);
    rt_ok(init_text(s, ("{}")));
    json_t *d = flags_data(5000);
    ld_future *init = ld_store_init(s, d);
    json_decref(d); /* the store holds it */
    ld_future *get = ld_store_get(s, F(), "flag-000001");
    json_t *item = rt_j("{\"key\":\"u\",\"version\":1}");
    ld_future *up = ld_store_upsert(s, F(), item);
    json_decref(item);
    rt_run_for(base, 0); /* a pass or so: still validating */
    ck_assert(ld_future_is_pending(init));
    ld_store_free(s);
    rt_run_for(base, 10);
    ck_assert(!ld_future_is_pending(init));
    ck_assert(!ld_future_is_pending(get));
    ck_assert(!ld_future_is_pending(up));
    ck_assert_int_eq(ld_future_error(init), LD_ECANCELED);
    ck_assert_int_eq(ld_future_error(get), LD_ECANCELED);
    ld_future_unref(init);
    ld_future_unref(get);
    ld_future_unref(up);
}
END_TEST

/* Closed while an init validates: close waits for it; the init completes
 * (written, valid data) and close's future after it. */
START_TEST(test_close_while_validating)
{
    ld_store *s = rt_store(base, NULL);
    json_t *d = flags_data(5000);
    ld_future *init = ld_store_init(s, d);
    json_decref(d);
    ld_future *cl = ld_store_close(s);
    rt_ok(init);
    rt_ok(cl);
    ck_assert_int_eq(hlen(&rt_server, "launchdarkly:features"), 5000);
    ld_store_free(s);
}
END_TEST

/* Two inits back to back, the first invalid (deep in), reads and writes
 * between and after: the first rejected, the reads between see the old
 * data, the second's data after. */
START_TEST(test_invalid_then_valid_back_to_back)
{
    ld_store *s = rt_store(base, NULL);
    rt_ok(init_text(s, ("{\"features\":{\"old\":{\"key\":\"old\",\"version\":1}}}")));
    json_t *bad = flags_data(4000);
    json_object_set_new(json_object_get(json_object_get(bad, "features"), "flag-003500"), "version",
                        json_string("x"));
    json_t *good = flags_data(2000);
    ld_future *i1 = ld_store_init(s, bad);
    ld_future *g1 = ld_store_get(s, F(), "old");
    ld_future *a1 = ld_store_all(s, F());
    ld_future *i2 = ld_store_init(s, good);
    ld_future *g2 = ld_store_get(s, F(), "old");
    ld_future *g3 = ld_store_get(s, F(), "flag-001999");
    json_decref(bad);
    json_decref(good);
    rt_error(i1, LD_EINVAL, NULL);
    json_t *v = rt_json(g1);
    ck_assert_ptr_nonnull(v);
    json_decref(v);
    v = rt_json(a1);
    ck_assert_int_eq(json_object_size(v), 1);
    json_decref(v);
    rt_ok(i2);
    ck_assert_ptr_null(rt_json(g2));
    v = rt_json(g3);
    ck_assert_int_eq(ld_item_version(v), 2000);
    json_decref(v);
    ld_store_free(s);
}
END_TEST

/* Redis killed while a valid init validates: LD_ESTORE, no crash; after
 * a restart, an init goes through. */
START_TEST(test_killed_while_validating)
{
    struct redisd d;
    ck_assert_int_eq(redisd_start(&d, NULL), 0);
    ld_store *s = rt_store_on(base, &d, 200, 200);
    rt_ok(init_text(s, ("{}")));
    json_t *data = flags_data(8000);
    ld_future *init = ld_store_init(s, data);
    ld_future *get = ld_store_get(s, F(), "flag-000000");
    redisd_kill(&d);
    rt_error(init, LD_ESTORE, NULL);
    rt_wait(get);
    ck_assert(ld_future_is_rejected(get));
    ld_future_unref(get);
    ck_assert_int_eq(redisd_restart(&d), 0);
    ck_assert(rt_answers_again(base, s, false));
    rt_ok(ld_store_init(s, data));
    json_decref(data);
    ck_assert_int_eq(hlen(&d, "launchdarkly:features"), 8000);
    ld_store_free(s);
    redisd_destroy(&d);
}
END_TEST

/* 200,000 items: checked 1,024 per pass of the loop, then written a
 * slice per pass: the loop runs a pass at a time (EVLOOP_ONCE) at least
 * 200,000 / 1,024 times before the init completes; all are written. */
START_TEST(test_200k_items_bounded_passes)
{
    int n = getenv("LDASYNC_VALGRIND") ? 20000 : 200000;
    ld_store *s = rt_store(base, NULL);
    json_t *d = flags_data(n);
    ld_future *init = ld_store_init(s, d);
    json_decref(d);
    int passes = 0;
    while (ld_future_is_pending(init)) {
        event_base_loop(base, EVLOOP_ONCE);
        passes++;
    }
    ck_assert_int_ge(passes, n / 1024);
    rt_ok(init);
    ck_assert_int_eq(hlen(&rt_server, "launchdarkly:features"), n);
    ld_store_free(s);
}
END_TEST

/* The caller changes the data after ld_store_init() returned (adds to a
 * namespace under way, which the store holds): no crash; the init
 * completes. */
START_TEST(test_data_grown_after_init_returns)
{
    ld_store *s = rt_store(base, NULL);
    json_t *d = flags_data(3000);
    ld_future *init = ld_store_init(s, d);
    json_t *flags = json_object_get(d, "features");
    for (int i = 0; i < 3000; i++) {
        char key[32];
        snprintf(key, sizeof(key), "late-%05d", i);
        json_object_set_new(flags, key, json_pack("{s:s,s:i}", "key", key, "version", 1));
    }
    json_decref(d);
    rt_ok(init);
    ck_assert_int_ge(hlen(&rt_server, "launchdarkly:features"), 3000);
    ld_store_free(s);
}
END_TEST

/* A caching store (forever) over Redis that is down, given invalid
 * data: LD_EINVAL, and the cache keeps the data before (it must not
 * serve the invalid data). */
START_TEST(test_cache_forever_invalid_while_down)
{
    struct redisd d;
    ck_assert_int_eq(redisd_start(&d, NULL), 0);
    ld_store *r = rt_store_on(base, &d, 200, 200);
    ld_store *c = ld_caching_store_new(base, r, -1);
    ck_assert_ptr_nonnull(c);
    rt_ok(init_text(c, ("{\"features\":{\"a\":{\"key\":\"a\",\"version\":1}}}")));
    redisd_kill(&d);
    rt_run_for(base, 50);
    json_t *bad = rt_j("{\"features\":{\"a\":{\"key\":\"a\",\"version\":2},"
                       "\"b\":{\"key\":\"WRONG\",\"version\":1}}}");
    rt_error(ld_store_init(c, bad), LD_EINVAL, NULL);
    json_decref(bad);
    json_t *a = rt_json(ld_store_get(c, F(), "a"));
    ck_assert_int_eq(ld_item_version(a), 1);
    json_decref(a);
    /* a valid init while down: kept (forever), served */
    rt_error(init_text(c, ("{\"features\":{\"a\":{\"key\":\"a\",\"version\":3}}}")), LD_ESTORE,
             NULL);
    a = rt_json(ld_store_get(c, F(), "a"));
    ck_assert_int_eq(ld_item_version(a), 3);
    json_decref(a);
    ld_store_free(c);
    redisd_destroy(&d);
}
END_TEST

/* Caching store ttls at their limits over Redis: 0 (reads go to Redis),
 * 1 ms and INT64_MAX ms (no overflow: a hit after a write in Redis
 * behind its back still answers the cached item). */
START_TEST(test_cache_ttl_limits)
{
    static const int64_t ttls[] = {0, 1, INT64_MAX, INT64_MAX / 1000000, INT64_MAX / 1000000 + 1,
                                   -1};
    for (size_t i = 0; i < sizeof(ttls) / sizeof(ttls[0]); i++) {
        rt_flushall();
        ld_store *c = ld_caching_store_new(base, rt_store(base, NULL), ttls[i]);
        ck_assert_ptr_nonnull(c);
        rt_ok(init_text(c, ("{\"features\":{\"a\":{\"key\":\"a\",\"version\":1}}}")));
        json_t *a = rt_json(ld_store_get(c, F(), "a"));
        ck_assert_int_eq(ld_item_version(a), 1);
        json_decref(a);
        /* behind the cache's back */
        redisReply *rr = redisd_cmd(&rt_server, "HSET launchdarkly:features a %s",
                                    "{\"key\":\"a\",\"version\":9}");
        freeReplyObject(rr);
        if (ttls[i] == 1)
            rt_run_for(base, 30); /* well past 1 ms and a coarse tick */
        a = rt_json(ld_store_get(c, F(), "a"));
        int64_t want = ttls[i] == 0 || ttls[i] == 1 ? 9 : 1;
        ck_assert_msg(ld_item_version(a) == want, "ttl %lld: version %lld, want %lld",
                      (long long)ttls[i], (long long)ld_item_version(a), (long long)want);
        json_decref(a);
        ld_store_free(c);
    }
}
END_TEST

Suite *rt_suite_attack2(void)
{
    Suite *s = suite_create("redis_attack2");
    TCase *tc = tcase_create("init_validates");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_invalid_in_every_position);
    tcase_add_test(tc, test_nul_key_reason_as_validate);
    tcase_add_test(tc, test_huge_key);
    tcase_add_test(tc, test_free_while_validating);
    tcase_add_test(tc, test_close_while_validating);
    tcase_add_test(tc, test_invalid_then_valid_back_to_back);
    tcase_add_test(tc, test_killed_while_validating);
    tcase_add_test(tc, test_200k_items_bounded_passes);
    tcase_add_test(tc, test_data_grown_after_init_returns);
    tcase_add_test(tc, test_cache_forever_invalid_while_down);
    tcase_add_test(tc, test_cache_ttl_limits);
    suite_add_tcase(s, tc);
    return s;
}
