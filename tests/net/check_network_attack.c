/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The FDv1 streaming synchronizer under attack from a hostile upstream:
 * an endless event, a flood of patches nobody takes, redirects, a 200
 * without Content-Type, versions beyond int64, NUL bytes, duplicate keys,
 * a put of 10,000 flags with bad ones, large headers, a stream closed
 * mid-chunk, and frees at awkward points. The fake stream is
 * check_streaming.c's (an evhttp server in the test's loop).
 */
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <ldasync/alloc.h>
#include <ldasync/client.h>
#include <ldasync/data_system.h>
#include <ldasync/error.h>
#include <ldasync/network.h>
#include <ldasync/store.h>

#include "check_fail_alloc.h"
#include "check_fake_stream.h"
#include "check_suites.h"
#include "check_util.h"
#include "core/core-internal.h"
#include "net/net-internal.h"

#define B ld_test_base

/* ---- tests ----------------------------------------------------------------- */

/* An event that never ends (no blank line, no newline), megabytes long:
 * the stream goes on taking it, and when the server ends the stream it is a
 * network error; nothing is delivered from the half event. */
START_TEST(test_an_endless_event_then_the_end_of_the_stream)
{
    F.initial = "event: put\ndata: {\"path\":\"/\",\"data\":";
    ld_synchronizer *s = stream_new(fake_config());
    ld_future *f = ld_synchronizer_next(s);
    run_until(&F.connects, 1);
    settle();
    static char chunk[65536];
    memset(chunk, ' ', sizeof chunk);
    for (int i = 0; i < 64; i++) { /* 4 MiB */
        fake_send(chunk, sizeof chunk);
        settle();
    }
    ck_assert(ld_future_is_pending(f));
    F.initial = PUT1;
    fake_end();
    f = ld_test_done(f);
    ck_assert(ld_future_is_fulfilled(f));
    const ld_data_source_error_info *e = ld_fdv2_update_error(ld_fdv2_future_update(f));
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->kind, LD_DATA_SOURCE_ERROR_KIND_NETWORK);
    ld_future_unref(f);
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    ld_synchronizer_free(s);
    settle();
}
END_TEST

/* A flood of patches (in one chunk and one per loop pass) that nobody
 * takes: at most 4,096 kept, the stream restarts, the next put comes. */
START_TEST(test_a_flood_of_patches_nobody_takes)
{
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(fake_config());
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    size_t cap = 10000 * 96;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    size_t n = 0;
    for (int i = 0; i < 10000; i++)
        n += (size_t)snprintf(buf + n, cap - n,
                              "event: patch\ndata: {\"path\":\"/flags/f%d\",\"data\":"
                              "{\"key\":\"f%d\",\"version\":%d}}\n\n",
                              i % 50, i % 50, i + 10);
    fake_send(buf, n);
    free(buf);
    run_until(&F.connects, 2);
    settle();
    /* The queue restarted: what comes first is not older than the new put. */
    int got = 0;
    for (;;) {
        ld_future *f = expect_update(s, LD_DATA_SOURCE_STATE_VALID);
        const ld_fdv2_change_set *cs = ld_fdv2_update_change_set(ld_fdv2_future_update(f));
        ck_assert_ptr_nonnull(cs);
        got++;
        bool full = ld_fdv2_change_set_intent(cs) == LD_FDV2_INTENT_XFER_FULL;
        ld_future_unref(f);
        if (full)
            break;
        ck_assert_int_le(got, 4096);
    }
    ld_synchronizer_free(s);
    settle();
}
END_TEST

/* 3xx: libcurl follows no redirect; the status is outside 4xx: retried. */
START_TEST(test_redirects_and_204_are_retried)
{
    static const int statuses[] = {301, 302, 307, 204};
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        F.connects = 0;
        F.bad = 1;
        F.bad_status = statuses[i];
        F.initial = PUT1;
        ld_synchronizer *s = stream_new(fake_config());
        expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_RESPONSE,
                     statuses[i], "will retry");
        ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
        ld_synchronizer_free(s);
        settle();
    }
}
END_TEST

START_TEST(test_a_200_without_content_type_is_invalid_data)
{
    evhttp_set_default_content_type(F.http, NULL);
    F.bad = 1;
    F.bad_ctype = "";
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(fake_config());
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0,
                 "event stream");
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    ld_synchronizer_free(s);
    settle();
}
END_TEST

/* Events a hostile server may send: each is invalid data and restarts the
 * stream, whose next put is taken. */
START_TEST(test_hostile_json_is_invalid_data)
{
    static const char *const events[] = {
        /* beyond int64 */
        "event: patch\ndata: {\"path\":\"/flags/a\",\"data\":{\"key\":\"a\","
        "\"version\":99999999999999999999}}\n\n",
        "event: delete\ndata: {\"path\":\"/flags/a\",\"version\":18446744073709551616}\n\n",
        "event: patch\ndata: {\"path\":\"/flags/a\",\"data\":{\"key\":\"a\",\"version\":-1}}\n\n",
        "event: patch\ndata: {\"path\":\"/flags/a\",\"data\":{\"key\":\"a\",\"version\":1.5}}\n\n",
        "event: patch\ndata: "
        "{\"path\":\"/flags/a\",\"data\":{\"key\":\"a\",\"version\":1e400}}\n\n",
        /* duplicate keys */
        "event: put\ndata: {\"path\":\"/\",\"data\":{\"flags\":{\"a\":{\"version\":1},"
        "\"a\":{\"version\":2}}}}\n\n",
        /* \u0000 in a key */
        "event: patch\ndata: {\"path\":\"/flags/a\\u0000b\",\"data\":{\"version\":1}}\n\n",
        /* invalid UTF-8 */
        "event: patch\ndata: {\"path\":\"/flags/a\xff\xfe\",\"data\":{\"version\":1}}\n\n",
        "event: patch\ndata: {\"path\":\"/flags/\xc0\xaf\",\"data\":{\"version\":1}}\n\n",
        /* a lone surrogate */
        "event: patch\ndata: {\"path\":\"/flags/\\ud800\",\"data\":{\"version\":1}}\n\n",
        /* nesting deep enough to hurt a recursive parser */
        NULL, /* filled below */
    };
    static char deep[40100];
    size_t n = (size_t)snprintf(deep, sizeof deep, "event: put\ndata: ");
    for (int i = 0; i < 20000; i++)
        deep[n++] = '[';
    memcpy(deep + n, "\n\n", 3);
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
        const char *ev = events[i] ? events[i] : deep;
        F.connects = 0;
        F.initial = PUT1;
        ld_synchronizer *s = stream_new(fake_config());
        ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
        fake_sends(ev);
        ld_future *f = expect_update(s, LD_DATA_SOURCE_STATE_INTERRUPTED);
        const ld_data_source_error_info *e = ld_fdv2_update_error(ld_fdv2_future_update(f));
        ck_assert_ptr_nonnull(e);
        ck_assert_msg(e->kind == LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, "event %zu: kind %d (%s)",
                      i, e->kind, e->message);
        ld_future_unref(f);
        ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
        ld_synchronizer_free(s);
        settle();
    }
}
END_TEST

/* A raw NUL byte inside an event's data. */
START_TEST(test_a_nul_byte_in_the_data_is_invalid_data)
{
    static const char ev[] = "event: patch\ndata: {\"path\":\"/flags/a\0b\",\"data\":{}}\n\n";
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(fake_config());
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    fake_send(ev, sizeof ev - 1);
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0,
                 NULL);
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    ld_synchronizer_free(s);
    settle();
}
END_TEST

/* The longest loop pass, measured by a timer that fires every ms. */
struct probe {
    struct event *ev;
    int64_t last_us, max_us;
};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void probe_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct probe *p = arg;
    int64_t t = now_us();
    if (p->last_us && t - p->last_us > p->max_us)
        p->max_us = t - p->last_us;
    p->last_us = t;
}

/* Runs the loop until `f` is done, one pass at a time, keeping the longest
 * pass (a pass waits at most 1 ms: the probe's timer). */
static ld_future *measured_done(ld_future *f, int64_t *max_us)
{
    for (int i = 0; i < 2000000 && ld_future_is_pending(f); i++) {
        int64_t t0 = now_us();
        event_base_loop(B, EVLOOP_ONCE);
        int64_t d = now_us() - t0;
        if (d > *max_us)
            *max_us = d;
    }
    ck_assert(!ld_future_is_pending(f));
    return f;
}

static char *put_of(int n, int bad_every, size_t *len)
{
    size_t cap = (size_t)n * 200 + 256;
    char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    size_t k = (size_t)snprintf(b, cap, "event: put\ndata: {\"path\":\"/\",\"data\":{\"flags\":{");
    for (int i = 0; i < n; i++) {
        bool bad = bad_every && i % bad_every == bad_every - 1;
        k += (size_t)snprintf(b + k, cap - k,
                              "%s\"flag-%05d\":{\"key\":\"flag-%05d\",\"version\":%s,\"on\":true,"
                              "\"variations\":[true,false],\"fallthrough\":{\"variation\":0}}",
                              i ? "," : "", i, i, bad ? "\"x\"" : "7");
    }
    k += (size_t)snprintf(b + k, cap - k, "},\"segments\":{}}}\n\n");
    *len = k;
    return b;
}

/* A put of 10,000 flags with a few bad ones is refused whole; the good put
 * of 10,000 then 1,000 patches pass, and no loop pass is long (the figure
 * is printed, not asserted). */
START_TEST(test_ten_thousand_flags_then_a_thousand_patches)
{
    size_t badlen, goodlen;
    char *bad = put_of(10000, 3333, &badlen);
    char *good = put_of(10000, 0, &goodlen);
    F.initial = NULL;
    ld_synchronizer *s = stream_new(fake_config());
    ld_future *f = ld_synchronizer_next(s);
    run_until(&F.connects, 1);
    settle();
    struct probe p = {0};
    p.ev = event_new(B, -1, EV_PERSIST, probe_cb, &p);
    struct timeval ms = {0, 1000};
    event_add(p.ev, &ms);
    int64_t pass_us = 0;
    fake_send(bad, badlen);
    f = measured_done(f, &pass_us);
    const ld_data_source_error_info *e = ld_fdv2_update_error(ld_fdv2_future_update(f));
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->kind, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA);
    ck_assert_msg(strstr(e->message, "flag-03332"), "%s", e->message);
    ld_future_unref(f);
    fprintf(stderr, "network_attack: bad put: longest pass %.2f ms\n", (double)pass_us / 1000.0);
    run_until(&F.connects, 2);
    settle();
    /* The good put comes 16 KB per loop pass, so that the fake's own write
     * (1.3 MB at once over loopback costs tens of ms in this loop) is not
     * counted against the library. */
    pass_us = 0;
    f = ld_synchronizer_next(s);
    for (size_t off = 0; off < goodlen; off += 16384) {
        fake_send(good + off, goodlen - off < 16384 ? goodlen - off : 16384);
        int64_t t0 = now_us();
        event_base_loop(B, EVLOOP_NONBLOCK);
        if (now_us() - t0 > pass_us)
            pass_us = now_us() - t0;
    }
    f = measured_done(f, &pass_us);
    ck_assert_uint_eq(ld_fdv2_change_set_count(ld_fdv2_update_change_set(ld_fdv2_future_update(f))),
                      10000);
    ld_future_unref(f);
    fprintf(stderr, "network_attack: good put: longest pass %.2f ms\n", (double)pass_us / 1000.0);
    char *patches = malloc(1000 * 120);
    size_t n = 0;
    for (int i = 0; i < 1000; i++)
        n += (size_t)snprintf(patches + n, 1000 * 120 - n,
                              "event: patch\ndata: {\"path\":\"/flags/flag-%05d\",\"data\":"
                              "{\"key\":\"flag-%05d\",\"version\":%d}}\n\n",
                              i, i, 100 + i);
    pass_us = 0; /* the patches' own passes */
    fake_send(patches, n);
    for (int i = 0; i < 1000; i++) {
        f = measured_done(ld_synchronizer_next(s), &pass_us);
        const ld_fdv2_update *u = ld_fdv2_future_update(f);
        ck_assert_ptr_nonnull(u);
        ck_assert_int_eq(ld_fdv2_update_state(u), LD_DATA_SOURCE_STATE_VALID);
        ld_future_unref(f);
    }
    event_free(p.ev);
    fprintf(
        stderr,
        "network_attack: 1,000 patches: longest pass %.2f ms (timer gaps, all phases: %.2f ms)\n",
        (double)pass_us / 1000.0, (double)p.max_us / 1000.0);
    free(patches);
    free(bad);
    free(good);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

/* Headers of 16 KB and 100 KB on the 200. */
START_TEST(test_large_headers)
{
    static char big[100001];
    size_t sizes[] = {16000, 100000};
    for (int k = 0; k < 2; k++) {
        memset(big, 'h', sizes[k]);
        big[sizes[k]] = '\0';
        F.big_header = big;
        F.initial = PUT1;
        ld_synchronizer *s = stream_new(fake_config());
        ld_future *f = next_done(s);
        ck_assert(ld_future_is_fulfilled(f));
        ld_future_unref(f);
        ld_synchronizer_free(s);
        settle();
    }
}
END_TEST

/* Freed while it waits to reconnect; two streams on one loop; many
 * create/free cycles leave no descriptor behind. */
START_TEST(test_free_during_backoff_two_streams_and_cycles)
{
    F.bad = 1000000;
    F.bad_status = 503;
    ld_net_config *c = fake_config();
    ck_assert_int_eq(ld_net_config_set_reconnect_delay(c, 500), 0);
    ld_synchronizer *s = stream_new(c);
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_RESPONSE, 503,
                 NULL);
    ld_future *pending = ld_synchronizer_next(s);
    ld_synchronizer_free(s); /* its timer is set */
    run_ms(20);
    ld_future_unref(pending);
    F.bad = 0;
    F.initial = PUT1;
    ld_synchronizer *a = stream_new(fake_config());
    ld_synchronizer *b = stream_new(fake_config());
    ld_future *fa = ld_synchronizer_next(a), *fb = ld_synchronizer_next(b);
    fa = ld_test_done(fa);
    fb = ld_test_done(fb);
    ck_assert(ld_future_is_fulfilled(fa) && ld_future_is_fulfilled(fb));
    ld_future_unref(fa);
    ld_future_unref(fb);
    ld_synchronizer_free(a);
    ld_synchronizer_free(b);
    settle();
    int fds = ld_test_count_fds();
    for (int i = 0; i < 200; i++) {
        ld_synchronizer *x = stream_new(fake_config());
        ld_future_unref(next_done(x));
        ld_synchronizer_free(x);
        settle();
    }
    run_ms(20);
    ck_assert_int_le(ld_test_count_fds(), fds + 2);
}
END_TEST

static ld_client *client_of(void)
{
    ld_client_options *o = ld_client_options_new();
    ld_net_config *c = fake_config();
    ck_assert_int_eq(ld_client_options_set_net_config(o, c), 0);
    ck_assert_int_eq(ld_client_options_set_events(o, false), 0); /* no events service here */
    ld_net_config_free(c);
    ld_client *cl = ld_client_new(B, o);
    ld_client_options_free(o);
    ck_assert_ptr_nonnull(cl);
    return cl;
}

static int freed_in_cb;

static void free_on_ready(ld_future *f, void *arg)
{
    (void)f;
    ld_client_free(arg);
    freed_in_cb++;
}

static void free_on_status(ld_client *cl, const ld_data_source_status *st, void *arg)
{
    (void)st;
    (void)arg;
    ld_client_free(cl);
    freed_in_cb++;
}

/* A client freed inside its ready callback, inside a status listener
 * (interrupted by a 503), while a put of 10,000 flags is parsed on the
 * worker; many clients made and freed leave no descriptor behind. */
START_TEST(test_clients_freed_at_awkward_points)
{
    F.initial = PUT1;
    freed_in_cb = 0;
    ld_client *cl = client_of();
    ld_future *r = ld_client_ready(cl);
    ck_assert_int_eq(ld_future_on_complete(r, free_on_ready, cl), 0);
    run_until(&freed_in_cb, 1);
    settle();

    F.connects = 0;
    F.bad = 1000000;
    F.bad_status = 503;
    cl = client_of();
    ck_assert_int_gt(ld_client_add_status_listener(cl, free_on_status, NULL), 0);
    ld_future *r2 = ld_client_ready(cl);
    run_until(&freed_in_cb, 2);
    run_ms(20);
    ck_assert_int_eq(freed_in_cb, 2);
    ld_future_unref(r2);
    F.bad = 0;

    size_t len;
    char *big = put_of(10000, 0, &len);
    F.initial = big;
    F.connects = 0;
    cl = client_of();
    ld_future *r3 = ld_client_ready(cl);
    run_until(&F.connects, 1);
    for (int i = 0; i < 3; i++)
        event_base_loop(B, EVLOOP_ONCE);
    ld_client_free(cl);
    run_ms(20);
    ld_future_unref(r3);
    F.initial = PUT1;
    free(big);

    int fds = ld_test_count_fds();
    for (int i = 0; i < 100; i++) {
        cl = client_of();
        ld_test_await_ok(ld_client_ready(cl));
        ld_client_free(cl);
        settle();
    }
    run_ms(20);
    ck_assert_int_le(ld_test_count_fds(), fds + 2);
}
END_TEST

Suite *ld_suite_network_attack(void)
{
    Suite *s = suite_create("network_attack");
    TCase *tc = tcase_create("hostile");
    tcase_add_checked_fixture(tc, fake_up, fake_down);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_an_endless_event_then_the_end_of_the_stream);
    tcase_add_test(tc, test_a_flood_of_patches_nobody_takes);
    tcase_add_test(tc, test_redirects_and_204_are_retried);
    tcase_add_test(tc, test_a_200_without_content_type_is_invalid_data);
    tcase_add_test(tc, test_hostile_json_is_invalid_data);
    tcase_add_test(tc, test_a_nul_byte_in_the_data_is_invalid_data);
    tcase_add_test(tc, test_ten_thousand_flags_then_a_thousand_patches);
    tcase_add_test(tc, test_large_headers);
    tcase_add_test(tc, test_free_during_backoff_two_streams_and_cycles);
    tcase_add_test(tc, test_clients_freed_at_awkward_points);
    suite_add_tcase(s, tc);
    return s;
}
