/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* ld_redis_options: defaults, setters and the URL forms (redis.h). */
#include <string.h>

#include <ldasync/error.h>

#include "check_redis.h"

START_TEST(test_null_and_free)
{
    ld_redis_options_free(NULL);
    ck_assert_int_eq(ld_redis_options_set_url(NULL, "redis://x"), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_password(NULL, "x"), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_database(NULL, 1), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_prefix(NULL, "p"), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_timeouts(NULL, 1, 1), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_reconnect(NULL, 1, 1), LD_EINVAL);
    ck_assert_ptr_null(ld_redis_store_new(NULL, NULL));
}
END_TEST

START_TEST(test_urls_accepted)
{
    static const char *const ok[] = {
        "redis://localhost",
        "redis://localhost:6380",
        "redis://127.0.0.1:6379/3",
        "redis://[::1]:6379/0",
        "redis://[::1]",
        "redis://:secret@host.example:7000/2",
        "redis://:p%40ss@host/",
        "unix:/tmp/redis.sock",
        "unix:///tmp/redis.sock",
        "unix:/tmp/redis.sock?db=4",
        "redis+unix:///var/run/redis/redis.sock",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ld_redis_options *o = ld_redis_options_new();
        ck_assert_msg(ld_redis_options_set_url(o, ok[i]) == 0, "refused %s", ok[i]);
        ld_redis_options_free(o);
    }
}
END_TEST

START_TEST(test_urls_refused)
{
    static const char *const bad[] = {
        "",
        "localhost:6379",
        "http://localhost",
        "rediss://localhost", /* TLS */
        "redis://",
        "redis://:6379",
        "redis://host:0",
        "redis://host:65536",
        "redis://host:12x",
        "redis://host/x",
        "redis://host/-1",
        "redis://user:pw@host", /* ACL users */
        "redis://host?x=1",
        "redis://[::1",
        "redis://[::1]x",
        "redis://:bad%zzescape@host",
        "redis://:nul%00@host",
        "unix:relative/path",
        "unix:",
        "unix:/",
        "unix:/tmp/s?db=x",
        "unix:/tmp/s?other=1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_redis_options *o = ld_redis_options_new();
        ck_assert_msg(ld_redis_options_set_url(o, bad[i]) == LD_EINVAL, "accepted \"%s\"", bad[i]);
        ld_redis_options_free(o);
    }
}
END_TEST

START_TEST(test_setters_bad_values)
{
    ld_redis_options *o = ld_redis_options_new();
    ck_assert_int_eq(ld_redis_options_set_url(o, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_database(o, -1), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_prefix(o, ""), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_prefix(o, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_timeouts(o, 0, 1), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_timeouts(o, 1, -5), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, 0, 10), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, 100, 99), LD_EINVAL);
    ck_assert_int_eq(ld_redis_options_set_password(o, NULL), 0);
    ck_assert_int_eq(ld_redis_options_set_password(o, ""), 0);
    ck_assert_int_eq(ld_redis_options_set_password(o, "pw"), 0);
    ck_assert_int_eq(ld_redis_options_set_timeouts(o, 1, 1), 0);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, 5, 5), 0);
    ld_redis_options_free(o);
}
END_TEST

Suite *rt_suite_options(void)
{
    Suite *s = suite_create("redis_options");
    TCase *tc = tcase_create("options");
    tcase_add_test(tc, test_null_and_free);
    tcase_add_test(tc, test_urls_accepted);
    tcase_add_test(tc, test_urls_refused);
    tcase_add_test(tc, test_setters_bad_values);
    suite_add_tcase(s, tc);
    return s;
}
