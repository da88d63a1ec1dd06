/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Reconnection delays (lib/net/backoff.c) on a clock the test keeps:
 * doubling from the initial delay up to the maximum, jitter within half,
 * the reset after a good connection, and no overflow however many
 * attempts fail.
 */
#include <check.h>
#include <stdint.h>

#include "check_suites.h"
#include "net/net-internal.h"

/* Each delay of a run of failures is within [base/2, base] of the rule. */
START_TEST(test_doubling_up_to_the_maximum_with_jitter)
{
    struct ld__backoff b;
    ld__backoff_init(&b, 1000, 30000, 60000, 42);
    static const int64_t base[] = {1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000};
    int64_t now = 0;
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) {
        int64_t d = ld__backoff_next(&b, now);
        ck_assert_msg(d >= base[i] / 2 && d <= base[i], "attempt %zu: %lld, base %lld", i,
                      (long long)d, (long long)base[i]);
        now += d;
    }
}
END_TEST

/* The random part covers its range: over many first attempts, both ends
 * are approached and the mean is near 3/4 of the base. */
START_TEST(test_the_jitter_spreads)
{
    struct ld__backoff b;
    ld__backoff_init(&b, 1000, 30000, 60000, 7);
    int64_t lo = INT64_MAX, hi = 0, sum = 0;
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        ld__backoff_good(&b, 0);
        int64_t d = ld__backoff_next(&b, 60000); /* a good minute: the first attempt again */
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
        sum += d;
    }
    ck_assert_int_le(lo, 510);
    ck_assert_int_ge(hi, 990);
    ck_assert_int_ge(sum / n, 700);
    ck_assert_int_le(sum / n, 800);
}
END_TEST

/* A connection good for 60 s makes the next attempt the first; one good
 * for less does not; good() again while connected keeps the first time. */
START_TEST(test_the_reset_after_a_good_minute)
{
    struct ld__backoff b;
    ld__backoff_init(&b, 1000, 30000, 60000, 1);
    for (int i = 0; i < 5; i++)
        ld__backoff_next(&b, 0); /* base 16,000 next */
    ld__backoff_good(&b, 100000);
    ld__backoff_good(&b, 150000); /* still the connection of 100,000 */
    int64_t d = ld__backoff_next(&b, 159999);
    ck_assert_int_ge(d, 8000); /* 59.999 s: no reset */
    ld__backoff_good(&b, 200000);
    d = ld__backoff_next(&b, 260000);
    ck_assert_int_le(d, 1000); /* 60 s: the first attempt again */
    d = ld__backoff_next(&b, 261000);
    ck_assert_int_ge(d, 1000); /* then the second */
    ck_assert_int_le(d, 2000);
    /* a failure without good(): no reset however late */
    d = ld__backoff_next(&b, 10000000);
    ck_assert_int_ge(d, 2000);
}
END_TEST

/* A million failures in a row, and extreme settings: every delay within
 * [max/2, max], never negative, nothing overflows. */
START_TEST(test_no_overflow_however_long)
{
    struct ld__backoff b;
    ld__backoff_init(&b, 1000, 30000, 60000, 3);
    int64_t now = 0;
    for (long i = 0; i < 1000000; i++) {
        int64_t d = ld__backoff_next(&b, now);
        if (i >= 5 && (d < 15000 || d > 30000))
            ck_abort_msg("attempt %ld: %lld", i, (long long)d);
        now += d;
    }
    ck_assert_uint_le(b.attempts, 6);
    ld__backoff_init(&b, INT64_MAX / 3, INT64_MAX, 1, 0);
    for (int i = 0; i < 200; i++) {
        int64_t d = ld__backoff_next(&b, 0);
        ck_assert_int_ge(d, INT64_MAX / 2 / 3);
    }
    ld__backoff_init(&b, 0, -5, 0, 0); /* the defaults: 1 s, max 1 s, reset 60 s */
    ck_assert_int_eq(b.initial_ms, 1000);
    ck_assert_int_eq(b.max_ms, 1000);
    ck_assert_int_eq(b.reset_ms, 60000);
    for (int i = 0; i < 100; i++) {
        int64_t d = ld__backoff_next(&b, i);
        ck_assert_int_ge(d, 500);
        ck_assert_int_le(d, 1000);
    }
    ld__backoff_init(&b, 1, 1, 1, 9); /* 1 ms: no jitter to take */
    ck_assert_int_eq(ld__backoff_next(&b, 0), 1);
}
END_TEST

Suite *ld_suite_backoff(void)
{
    Suite *s = suite_create("backoff");
    TCase *tc = tcase_create("rule");
    tcase_add_test(tc, test_doubling_up_to_the_maximum_with_jitter);
    tcase_add_test(tc, test_the_jitter_spreads);
    tcase_add_test(tc, test_the_reset_after_a_good_minute);
    tcase_add_test(tc, test_no_overflow_however_long);
    suite_add_tcase(s, tc);
    return s;
}
