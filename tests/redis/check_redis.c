/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * check_redis: libldasync-redis against a real redis-server, which main()
 * starts on a unix socket in a temporary directory (redisd.h) and stops at
 * the end. Without a redis-server the program exits 77 (automake's SKIP).
 * Each test empties the server first. Check's environment variables apply
 * (CK_RUN_SUITE, CK_RUN_CASE, CK_FORK=no, ...).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <ldasync/ldasync.h>
#include <ldasync/redis.h>
#include <ldasync/testing.h>

#include "check_redis.h"

struct redisd rt_server;

/* ---- helpers ------------------------------------------------------------ */

void rt_flushall(void)
{
    redisReply *r = redisd_cmd(&rt_server, "FLUSHALL");
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "FLUSHALL failed");
    freeReplyObject(r);
}

ld_redis_options *rt_options(const char *prefix)
{
    ld_redis_options *o = ld_redis_options_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(ld_redis_options_set_url(o, rt_server.url), 0);
    if (prefix)
        ck_assert_int_eq(ld_redis_options_set_prefix(o, prefix), 0);
    return o;
}

ld_store *rt_store(struct event_base *base, const char *prefix)
{
    ld_redis_options *o = rt_options(prefix);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    return s;
}

ld_future *rt_wait(ld_future *f)
{
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ld_future_wait(f), 0);
    return f;
}

void rt_ok(ld_future *f)
{
    rt_wait(f);
    ck_assert_msg(ld_future_is_fulfilled(f), "rejected: %s", ld_future_error_message(f));
    ld_future_unref(f);
}

bool rt_bool(ld_future *f)
{
    rt_wait(f);
    ck_assert_msg(ld_future_is_fulfilled(f), "rejected: %s", ld_future_error_message(f));
    bool v = ld_future_bool(f);
    ld_future_unref(f);
    return v;
}

json_t *rt_json(ld_future *f)
{
    rt_wait(f);
    ck_assert_msg(ld_future_is_fulfilled(f), "rejected: %s", ld_future_error_message(f));
    json_t *v = json_incref(ld_future_json(f));
    ld_future_unref(f);
    return v;
}

void rt_error(ld_future *f, int code, const char *in_message)
{
    rt_wait(f);
    ck_assert_msg(ld_future_is_rejected(f), "fulfilled, expected %s", ld_err_name(code));
    ck_assert_msg(ld_future_error(f) == code, "rejected with %s (%s), expected %s",
                  ld_err_name(ld_future_error(f)), ld_future_error_message(f), ld_err_name(code));
    if (in_message)
        ck_assert_msg(strstr(ld_future_error_message(f), in_message), "message \"%s\" lacks \"%s\"",
                      ld_future_error_message(f), in_message);
    ld_future_unref(f);
}

json_t *rt_j(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    ck_assert_msg(v != NULL, "bad JSON in a test: %s", e.text);
    return v;
}

ld_store *rt_store_on(struct event_base *base, const struct redisd *d, int64_t connect_ms,
                      int64_t command_ms)
{
    ld_redis_options *o = ld_redis_options_new();
    ck_assert_int_eq(ld_redis_options_set_url(o, d->url), 0);
    if (connect_ms > 0)
        ck_assert_int_eq(ld_redis_options_set_timeouts(o, connect_ms, command_ms), 0);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, 20, 40), 0);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    return s;
}

bool rt_answers_again(struct event_base *base, ld_store *s, bool want_initialized)
{
    for (int i = 0; i < 1000; i++) {
        rt_run_for(base, 10);
        ld_future *f = rt_wait(ld_store_initialized(s));
        bool ok = ld_future_is_fulfilled(f) && ld_future_bool(f) == want_initialized;
        ld_future_unref(f);
        if (ok)
            return true;
    }
    return false;
}

/* Runs the loop for `ms` milliseconds. */
void rt_run_for(struct event_base *base, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
}

/* ---- main --------------------------------------------------------------- */

/* clang-format off */
static Suite *(*const suites[])(void) = {
    rt_suite_options, rt_suite_store, rt_suite_big_segments, rt_suite_daemon, rt_suite_chaos,
    rt_suite_outages, rt_suite_attack, rt_suite_attack2,
};
/* clang-format on */

int main(void)
{
    if (!redisd_program()) {
        printf("SKIP: no redis-server (Debian: apt-get install redis-server)\n");
        return 77;
    }
    if (redisd_start(&rt_server, NULL) != 0) {
        redisd_destroy(&rt_server);
        return EXIT_FAILURE;
    }
    SRunner *runner = srunner_create(NULL);
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        srunner_add_suite(runner, suites[i]());
    srunner_run_all(runner, CK_ENV);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    redisd_destroy(&rt_server);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
