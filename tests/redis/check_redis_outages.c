/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The Redis store, alone and behind the caching store, when Redis goes
 * away: its status and listeners, the cache serving while Redis is
 * stopped (SIGSTOP), the whole data set written back when Redis comes
 * back empty (restarted, or FLUSHALL under it), and memory that does not
 * grow over rounds of 100,000 pipelined gets.
 */
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
}

static void teardown(void)
{
    event_base_free(base);
}

static json_t *data_of(int nflags)
{
    json_t *flags = json_object();
    for (int i = 0; i < nflags; i++) {
        char key[32];
        snprintf(key, sizeof(key), "f%04d", i);
        json_object_set_new(flags, key,
                            json_pack("{s:s,s:i,s:b}", "key", key, "version", 1, "on", 1));
    }
    return json_pack("{s:o,s:{s:{s:s,s:i}}}", "features", flags, "segments", "s", "key", "s",
                     "version", 1);
}

static long long integer_reply(const struct redisd *d, const char *cmd)
{
    redisReply *r = redisd_cmd(d, cmd);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return v;
}

/* Runs the loop until `cond` holds, 10 s at most. */
static bool until(bool (*cond)(void *), void *arg)
{
    for (int i = 0; i < 1000; i++) {
        if (cond(arg))
            return true;
        rt_run_for(base, 10);
    }
    return cond(arg);
}

struct seen {
    int changes;
    bool last;
};

static void on_status(ld_store *s, const ld_store_status *st, void *arg)
{
    (void)s;
    struct seen *sn = arg;
    sn->changes++;
    sn->last = st->available;
}

static bool is_available(void *arg)
{
    ld_store_status st;
    return ld_store_current_status(arg, &st) == 0 && st.available;
}

static bool is_unavailable(void *arg)
{
    return !is_available(arg);
}

START_TEST(test_status_follows_redis)
{
    struct redisd d;
    ck_assert_int_eq(redisd_start(&d, NULL), 0);
    ld_store *s = rt_store_on(base, &d, 300, 100);
    struct seen sn = {0, true};
    ck_assert_int_gt(ld_store_add_status_listener(s, on_status, &sn), 0);
    ck_assert(!rt_bool(ld_store_initialized(s)));
    ck_assert(is_available(s));
    redisd_pause(&d);
    rt_error(ld_store_get(s, ld_kind_features(), "x"), LD_ETIMEDOUT, NULL);
    ck_assert(until(is_unavailable, s));
    rt_run_for(base, 5); /* listeners run from the loop */
    ck_assert_int_ge(sn.changes, 1);
    ck_assert(!sn.last);
    redisd_resume(&d);
    ck_assert_msg(until(is_available, s), "never available again");
    rt_run_for(base, 5);
    ck_assert(sn.last);
    ck_assert(!rt_bool(ld_store_initialized(s)));
    ld_store_free(s);
    rt_run_for(base, 5);
    redisd_destroy(&d);
}
END_TEST

START_TEST(test_cache_serves_while_redis_is_stopped)
{
    struct redisd d;
    ck_assert_int_eq(redisd_start(&d, NULL), 0);
    ld_store *c = ld_caching_store_new(base, rt_store_on(base, &d, 300, 100), LD_CACHE_FOREVER);
    json_t *data = data_of(1000);
    rt_ok(ld_store_init(c, data));
    json_decref(data);
    redisd_pause(&d);
    /* every flag answered within the call, from the cache */
    for (int i = 0; i < 1000; i++) {
        char key[32];
        snprintf(key, sizeof(key), "f%04d", i);
        json_t *item = NULL;
        ck_assert_int_eq(ld_store_get_now(c, ld_kind_features(), key, &item), 0);
        ck_assert_ptr_nonnull(item);
        json_decref(item);
    }
    json_t *all = rt_json(ld_store_all(c, ld_kind_features()));
    ck_assert_int_eq(json_object_size(all), 1000);
    json_decref(all);
    /* a write while Redis is stopped: kept, reported, written back later */
    json_t *item = json_pack("{s:s,s:i,s:b}", "key", "f0001", "version", 7, "on", 0);
    ld_future *w = ld_store_upsert(c, ld_kind_features(), item);
    json_decref(item);
    rt_wait(w);
    ck_assert(ld_future_is_rejected(w));
    ld_future_unref(w);
    ck_assert(until(is_unavailable, c));
    json_t *got = rt_json(ld_store_get(c, ld_kind_features(), "f0001"));
    ck_assert_int_eq(json_integer_value(json_object_get(got, "version")), 7);
    json_decref(got);
    redisd_resume(&d);
    ck_assert_msg(until(is_available, c), "the cache never said Redis was back");
    redisReply *r = redisd_cmd(&d, "HGET launchdarkly:features f0001");
    ck_assert(r && r->type == REDIS_REPLY_STRING);
    ck_assert_ptr_nonnull(strstr(r->str, "\"version\":7"));
    freeReplyObject(r);
    ld_store_free(c);
    rt_run_for(base, 5);
    redisd_destroy(&d);
}
END_TEST

struct count_arg {
    const struct redisd *d;
    long long want;
};

static bool holds_all(void *arg)
{
    struct count_arg *a = arg;
    return integer_reply(a->d, "HLEN launchdarkly:features") == a->want &&
           integer_reply(a->d, "EXISTS launchdarkly:$inited") == 1;
}

START_TEST(test_restarted_empty_is_written_back)
{
    struct redisd d;
    ck_assert_int_eq(redisd_start(&d, NULL), 0);
    ld_store *c = ld_caching_store_new(base, rt_store_on(base, &d, 300, 200), LD_CACHE_FOREVER);
    json_t *data = data_of(500);
    rt_ok(ld_store_init(c, data));
    json_decref(data);
    redisd_kill(&d);
    ck_assert(until(is_unavailable, c)); /* the connection dropped */
    ck_assert_int_eq(redisd_restart(&d), 0);
    struct count_arg a = {&d, 500};
    ck_assert_msg(until(holds_all, &a), "the data set was not written back");
    ck_assert(until(is_available, c));
    ld_store_free(c);
    rt_run_for(base, 5);
    redisd_destroy(&d);
}
END_TEST

START_TEST(test_flushall_is_written_back)
{
    setenv("LDASYNC_CACHE_CHECK_MS", "30", 1);
    ld_store *c = ld_caching_store_new(base, rt_store(base, NULL), LD_CACHE_FOREVER);
    unsetenv("LDASYNC_CACHE_CHECK_MS");
    json_t *data = data_of(300);
    rt_ok(ld_store_init(c, data));
    json_decref(data);
    freeReplyObject(redisd_cmd(&rt_server, "FLUSHALL"));
    struct count_arg a = {&rt_server, 300};
    ck_assert_msg(until(holds_all, &a), "the data set was not written back after FLUSHALL");
    ld_store_free(c);
    rt_run_for(base, 5);
}
END_TEST

/* ---- memory over rounds of pipelined gets -------------------------------- */

/* Blocks of the library's allocator made less blocks freed, since the
 * count began (blocks made before it may be freed through it too: the
 * hooks are malloc's, so they can free each other's blocks). */
static long g_live;

static void *count_malloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        __atomic_add_fetch(&g_live, 1, __ATOMIC_RELAXED);
    return p;
}

static void *count_realloc(void *q, size_t n)
{
    return realloc(q, n);
}

static void count_free(void *q)
{
    __atomic_sub_fetch(&g_live, 1, __ATOMIC_RELAXED);
    free(q);
}

static void drop(ld_future *f, void *arg)
{
    (void)f;
    (*(long *)arg)++;
}

START_TEST(test_pipelined_gets_do_not_grow)
{
    ck_assert_int_eq(ld_set_alloc_funcs(count_malloc, count_realloc, count_free), 0);
    ld_store *s = rt_store(base, NULL);
    json_t *data = data_of(100);
    rt_ok(ld_store_init(s, data));
    json_decref(data);
    long after[4];
    int rounds = 4;
    long n = getenv("LDASYNC_VALGRIND") ? 20000 : 100000;
    for (int round = 0; round < rounds; round++) {
        long done = 0;
        for (long i = 0; i < n; i++) {
            char key[32];
            snprintf(key, sizeof(key), "f%04ld", i % 100);
            ck_assert_int_eq(
                ld_future_on_complete(ld_store_get(s, ld_kind_features(), key), drop, &done), 0);
        }
        while (done < n)
            event_base_loop(base, EVLOOP_ONCE);
        rt_run_for(base, 5);
        after[round] = __atomic_load_n(&g_live, __ATOMIC_RELAXED);
    }
    /* what is held after a round does not depend on how many rounds ran:
     * the first one warms up (the futures' pool, the queues' chunks), and
     * the others stay within a few blocks of the second */
    ck_assert_msg(after[3] <= after[1] + 16 && after[2] <= after[1] + 16,
                  "blocks held after each round: %ld, %ld, %ld, %ld", after[0], after[1], after[2],
                  after[3]);
    ld_store_free(s);
    rt_run_for(base, 5);
    ld_set_alloc_funcs(NULL, NULL, NULL);
}
END_TEST

/* Blocks freed, counted by the hook as count_free() does. */
static long g_freed;

static void count_free_too(void *q)
{
    __atomic_add_fetch(&g_freed, 1, __ATOMIC_RELAXED);
    count_free(q);
}

/* The result of an all replaced by the next one's (Redis answered other
 * bytes), which nobody else holds, is let go of over several passes of
 * the loop, not in the pass of the next answer: freeing 10,000 flags at
 * once held the loop for 15-30 ms. Every block comes back in the end. */
START_TEST(test_a_replaced_all_is_let_go_of_over_several_passes)
{
    ck_assert_int_eq(ld_set_alloc_funcs(count_malloc, count_realloc, count_free_too), 0);
    json_set_alloc_funcs(count_malloc, count_free_too); /* the items are jansson's */
    ld_store *s = rt_store(base, NULL);
    json_t *data = data_of(5000);
    rt_ok(ld_store_init(s, data));
    json_decref(data);
    json_decref(rt_json(ld_store_all(s, ld_kind_features()))); /* held by the store alone */
    rt_run_for(base, 5);
    json_t *f = json_pack("{s:s,s:i,s:b}", "key", "f0001", "version", 2, "on", 0);
    ck_assert(rt_bool(ld_store_upsert(s, ld_kind_features(), f)));
    json_decref(f);
    long live = __atomic_load_n(&g_live, __ATOMIC_RELAXED);
    ld_future *all = ld_store_all(s, ld_kind_features());
    long most = 0, total = 0, passes = 0;
    for (int i = 0, idle = 0; i < 100000 && (ld_future_is_pending(all) || idle < 50); i++) {
        long before = __atomic_load_n(&g_freed, __ATOMIC_RELAXED);
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        long n = __atomic_load_n(&g_freed, __ATOMIC_RELAXED) - before;
        most = n > most ? n : most;
        total += n;
        passes += n > 0;
        idle = n ? 0 : idle + 1;
    }
    ck_assert(ld_future_is_fulfilled(all));
    ck_assert_int_eq(json_object_size(ld_future_json(all)), 5000);
    ck_assert_int_eq(ld_item_version(json_object_get(ld_future_json(all), "f0001")), 2);
    /* an item of data_of() is 7 blocks of jansson's (its object, table,
     * three members, two values): the first result's 5,000 items went
     * (35,000 blocks and more), none of them in one pass */
    ck_assert_msg(total > 35000 && most < 15000, "%ld blocks freed in one pass, %ld in %ld passes",
                  most, total, passes);
    ld_future_unref(all);
    rt_run_for(base, 5);
    /* the second result is the store's now, as the first one's was */
    long now = __atomic_load_n(&g_live, __ATOMIC_RELAXED);
    ck_assert_msg(now <= live + 16, "%ld blocks held, %ld before", now, live);
    ld_store_free(s);
    rt_run_for(base, 5);
    json_set_alloc_funcs(malloc, free);
    ld_set_alloc_funcs(NULL, NULL, NULL);
}
END_TEST

Suite *rt_suite_outages(void)
{
    Suite *s = suite_create("redis_outages");
    TCase *tc = tcase_create("outages");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_status_follows_redis);
    tcase_add_test(tc, test_cache_serves_while_redis_is_stopped);
    tcase_add_test(tc, test_restarted_empty_is_written_back);
    tcase_add_test(tc, test_flushall_is_written_back);
    tcase_add_test(tc, test_pipelined_gets_do_not_grow);
    tcase_add_test(tc, test_a_replaced_all_is_let_go_of_over_several_passes);
    suite_add_tcase(s, tc);
    return s;
}
