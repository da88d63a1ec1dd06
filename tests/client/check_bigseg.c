/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* What the big segment cache's suites share (check_bigseg.h). */
#include <check.h>
#include <sys/time.h>

#include "check_bigseg.h"
#include "check_util.h"

ld_store *bsu_store;

void bsu_setup(const char *flags, const char *segments)
{
    ld_test_setup();
    json_t *data = ld_test_data_of(flags, segments);
    bsu_store = ld_test_memory_with(data);
    json_decref(data);
}

void bsu_teardown(void)
{
    ld_test_await_ok(ld_store_close(bsu_store));
    ld_store_free(bsu_store);
    bsu_store = NULL;
    ld_test_teardown();
}

ld_client *bsu_client(ld_big_segment_store *bss, int size, int64_t ttl_ms, int64_t poll_ms)
{
    ld_client_options *o = ld_client_options_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(ld_client_options_set_store(o, bsu_store), 0);
    ck_assert_int_eq(ld_client_options_set_offline(o, true), 0);
    ck_assert_int_eq(ld_client_options_set_big_segments(o, bss, 0), 0);
    ck_assert_int_eq(ld_client_options_set_big_segment_cache(o, size, ttl_ms, poll_ms), 0);
    ld_client *c = ld_client_new(ld_test_base, o);
    ld_client_options_free(o);
    ck_assert_ptr_nonnull(c);
    return c;
}

ld_context *bsu_ctx(const char *kind, const char *key)
{
    ld_context_builder *b = ld_context_builder_new(kind, key);
    ld_context *ctx = ld_context_builder_build(b, NULL);
    ld_context_builder_free(b);
    return ctx;
}

ld_context *bsu_user(const char *key)
{
    ld_context *ctx = bsu_ctx("user", key);
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

int64_t bsu_wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

void bsu_run_for(int64_t ms)
{
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000 * 1000)};
    ld_future *f = ld_future_timeout(ld_future_new(ld_test_base), &tv);
    ck_assert_ptr_nonnull(f);
    ld_test_wait(f);
    ld_future_unref(f);
}
