/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The FDv1 polling initializer and synchronizer (network.h) against a fake
 * LaunchDarkly polling service (an evhttp server in the test's loop that
 * answers GET /sdk/latest-all with ETags and gzip): headers, the filter,
 * 304s, statuses, malformed bodies, a big body parsed off the loop, the
 * interval, stop and free at every point, and allocation failures.
 */
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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
#include "check_suites.h"
#include "check_util.h"
#include "core/core-internal.h"
#include "net/net-internal.h"
#include "sources/sources-internal.h"

#define B ld_test_base
#define KEY "sdk-poll-key"

#define ALL1                                                                                   \
    "{\"flags\":{\"f1\":{\"key\":\"f1\",\"version\":3}},\"segments\":{\"s1\":{\"key\":\"s1\"," \
    "\"version\":2}}}"

/* {"flags":{"gz":{"key":"gz","version":4}},"segments":{}}, gzipped */
static const unsigned char GZ[] = {
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xab, 0x56, 0x4a, 0xcb,
    0x49, 0x4c, 0x2f, 0x56, 0xb2, 0xaa, 0x56, 0x4a, 0xaf, 0x02, 0x91, 0xd9, 0xa9, 0x95,
    0x4a, 0x56, 0x20, 0xb6, 0x8e, 0x52, 0x59, 0x6a, 0x51, 0x71, 0x66, 0x7e, 0x9e, 0x92,
    0x95, 0x49, 0x6d, 0xad, 0x8e, 0x52, 0x71, 0x6a, 0x7a, 0x6e, 0x6a, 0x5e, 0x09, 0x48,
    0x69, 0x6d, 0x2d, 0x00, 0x0c, 0xfa, 0x8a, 0x53, 0x37, 0x00, 0x00, 0x00};

struct fake {
    struct evhttp *http;
    char url[64];
    int polls;
    char uri[512], auth[256], inm[128], ctype[64], encoding[64];
    int status;          /* 200 */
    const char *body;    /* ALL1 */
    const char *etag;    /* NULL: none */
    bool gzip;           /* answer GZ */
    int bad, bad_status; /* the first `bad` polls get bad_status */
};

static struct fake F;

static void copy_header(struct evhttp_request *req, const char *name, char *out, size_t n)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), name);
    snprintf(out, n, "%s", v ? v : "");
}

static void serve(struct evhttp_request *req, void *arg)
{
    (void)arg;
    snprintf(F.uri, sizeof F.uri, "%s", evhttp_request_get_uri(req));
    copy_header(req, "Authorization", F.auth, sizeof F.auth);
    copy_header(req, "If-None-Match", F.inm, sizeof F.inm);
    copy_header(req, "Content-Type", F.ctype, sizeof F.ctype);
    copy_header(req, "Accept-Encoding", F.encoding, sizeof F.encoding);
    if (strncmp(F.uri, "/sdk/latest-all", 15) != 0) {
        evhttp_send_error(req, 404, NULL);
        return;
    }
    F.polls++;
    int status = F.polls <= F.bad ? F.bad_status : F.status;
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    if (status != 200) {
        evhttp_send_reply(req, status, "Nope", NULL);
        return;
    }
    evhttp_add_header(out, "X-LD-EnvID", "env-poll");
    if (F.etag) {
        evhttp_add_header(out, "ETag", F.etag);
        if (strcmp(F.inm, F.etag) == 0) {
            evhttp_send_reply(req, 304, "Not Modified", NULL);
            return;
        }
    }
    evhttp_add_header(out, "Content-Type", "application/json");
    struct evbuffer *b = evbuffer_new();
    if (F.gzip) {
        evhttp_add_header(out, "Content-Encoding", "gzip");
        evbuffer_add(b, GZ, sizeof GZ);
    } else {
        evbuffer_add(b, F.body, strlen(F.body));
    }
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

static void fake_up(void)
{
    ld_test_setup();
    signal(SIGPIPE, SIG_IGN);
    memset(&F, 0, sizeof F);
    F.status = 200;
    F.body = ALL1;
    F.http = evhttp_new(B);
    ck_assert_ptr_nonnull(F.http);
    snprintf(F.url, sizeof F.url, "http://127.0.0.1:%d", ld_test_http_listen(F.http));
    evhttp_set_gencb(F.http, serve, NULL);
}

static void fake_down(void)
{
    evhttp_free(F.http);
    F.http = NULL;
    ld_test_teardown();
}

static ld_net_config *config(int64_t interval_ms)
{
    ld_net_config *c = ld_net_config_new(KEY);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(ld_net_config_set_base_uri(c, F.url), 0);
    ld__net_config_poll_interval_unclamped(c, interval_ms);
    return c;
}

static void settle(void)
{
    for (int i = 0; i < 20; i++)
        event_base_loop(B, EVLOOP_NONBLOCK);
}

static void run_ms(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_base_loopexit(B, &tv);
    event_base_dispatch(B);
}

static ld_synchronizer *sync_new(ld_net_config *c)
{
    ld_synchronizer *s = ld_polling_synchronizer_new(B, c);
    ck_assert_ptr_nonnull(s);
    ld_net_config_free(c);
    return s;
}

static ld_initializer *init_new(ld_net_config *c)
{
    ld_initializer *in = ld_polling_initializer_new(B, c);
    ck_assert_ptr_nonnull(in);
    ld_net_config_free(c);
    return in;
}

static ld_future *expect_update(ld_synchronizer *s, enum ld_data_source_state state)
{
    ld_future *f = ld_test_done(ld_synchronizer_next(s));
    ck_assert_msg(ld_future_is_fulfilled(f), "rejected: %s", ld_future_error_message(f));
    const ld_fdv2_update *u = ld_fdv2_future_update(f);
    ck_assert_ptr_nonnull(u);
    ck_assert_int_eq(ld_fdv2_update_state(u), state);
    return f;
}

/* A valid update with `n` items in a full set (n < 0: no data, a 304). */
static void expect_data(ld_synchronizer *s, int n)
{
    ld_future *f = expect_update(s, LD_DATA_SOURCE_STATE_VALID);
    const ld_fdv2_update *u = ld_fdv2_future_update(f);
    const ld_fdv2_change_set *cs = ld_fdv2_update_change_set(u);
    if (n < 0) {
        ck_assert_ptr_null(cs);
    } else {
        ck_assert_ptr_nonnull(cs);
        ck_assert_int_eq(ld_fdv2_change_set_intent(cs), LD_FDV2_INTENT_XFER_FULL);
        ck_assert_uint_eq(ld_fdv2_change_set_count(cs), (size_t)n);
        ck_assert_str_eq(ld_fdv2_update_environment_id(u), "env-poll");
    }
    ck_assert_ptr_null(ld_fdv2_update_error(u));
    ld_future_unref(f);
}

static void expect_error(ld_synchronizer *s, enum ld_data_source_state state,
                         enum ld_data_source_error_kind kind, int status)
{
    ld_future *f = expect_update(s, state);
    const ld_data_source_error_info *e = ld_fdv2_update_error(ld_fdv2_future_update(f));
    ck_assert_ptr_nonnull(e);
    ck_assert_msg(e->kind == kind, "kind %d, want %d: %s", e->kind, kind, e->message);
    ck_assert_int_eq(e->status_code, status);
    ld_future_unref(f);
}

/* ---- the initializer -------------------------------------------------------- */

START_TEST(test_the_initializer_fetches_all_the_data_with_the_sdk_s_headers)
{
    ld_net_config *c = config(30000);
    ck_assert_int_eq(ld_net_config_set_payload_filter(c, "srv"), 0);
    ld_initializer *in = ld_polling_initializer_new(B, c);
    ld_net_config_free(c);
    ck_assert_ptr_nonnull(in);
    ck_assert_str_eq(ld_initializer_name(in), "polling");
    ld_future *f = ld_test_fulfilled(ld_initializer_fetch(in));
    const ld_fdv2_basis *b = ld_fdv2_future_basis(f);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(ld_fdv2_change_set_count(ld_fdv2_basis_change_set(b)), 2);
    ck_assert_str_eq(ld_fdv2_basis_environment_id(b), "env-poll");
    ck_assert(ld_fdv2_basis_persist(b));
    ld_future_unref(f);
    ck_assert_str_eq(F.uri, "/sdk/latest-all?filter=srv");
    ck_assert_str_eq(F.auth, KEY);
    ck_assert_str_eq(F.ctype, "application/json");
    ck_assert_msg(strstr(F.encoding, "gzip"), "Accept-Encoding: %s", F.encoding);
    /* two fetches at once: each gets its own basis */
    ld_future *a = ld_initializer_fetch(in), *d = ld_initializer_fetch(in);
    ld_test_await_ok(a);
    ld_test_await_ok(d);
    ck_assert_int_eq(F.polls, 3);
    ld_initializer_free(in);
    settle();
}
END_TEST

START_TEST(test_the_initializer_reports_statuses_and_bad_bodies)
{
    ld_initializer *in = init_new(config(30000));
    ck_assert_ptr_nonnull(in);
    F.status = 503;
    ld_test_expect_error(ld_initializer_fetch(in), LD_EIO, "HTTP error 503");
    F.status = 401;
    ld_test_expect_error(ld_initializer_fetch(in), LD_EIO, "invalid SDK key");
    F.status = 200;
    F.body = "{\"flags\":";
    ld_test_expect_error(ld_initializer_fetch(in), LD_EPARSE, "malformed JSON");
    F.body = "{\"flags\":{\"a\":[]}}";
    ld_test_expect_error(ld_initializer_fetch(in), LD_EPARSE, "not a JSON object");
    ld_initializer_free(in);
    settle();
    /* nobody listening */
    ld_net_config *c = config(30000);
    ck_assert_int_eq(ld_net_config_set_base_uri(c, "http://127.0.0.1:1"), 0);
    in = ld_polling_initializer_new(B, c);
    ld_net_config_free(c);
    ld_test_expect_error(ld_initializer_fetch(in), LD_EIO, NULL);
    ld_initializer_free(in);
    settle();
}
END_TEST

START_TEST(test_the_initializer_stops_and_frees_mid_fetch)
{
    for (int round = 0; round < 3; round++) {
        ld_initializer *in = init_new(config(30000));
        ld_future *f = ld_initializer_fetch(in);
        for (int i = 0; i < round * 2; i++)
            event_base_loop(B, EVLOOP_ONCE);
        if (round == 1) {
            ld_test_await_ok(ld_initializer_stop(in));
            ck_assert(!ld_future_is_pending(f));
        }
        ld_initializer_free(in);
        ld_test_wait(f);
        ck_assert(!ld_future_is_fulfilled(f) || round == 2);
        ld_future_unref(f);
        settle();
    }
    ck_assert_ptr_null(ld_polling_initializer_new(NULL, NULL));
    ck_assert_ptr_null(ld_polling_initializer_new(B, NULL));
    ck_assert_ptr_null(ld_polling_synchronizer_new(NULL, NULL));
    ck_assert_ptr_null(ld_polling_synchronizer_new(B, NULL));
}
END_TEST

/* ---- the synchronizer ---------------------------------------------------- */

START_TEST(test_polls_at_the_interval_with_the_etag)
{
    F.etag = "\"v1\"";
    ld_synchronizer *s = sync_new(config(50));
    ck_assert_str_eq(ld_synchronizer_name(s), "polling");
    expect_data(s, 2);
    ck_assert_str_eq(F.inm, "");
    expect_data(s, -1); /* 304 */
    ck_assert_str_eq(F.inm, "\"v1\"");
    F.etag = "\"v2\"";
    F.body = "{\"flags\":{},\"segments\":{\"s1\":{\"key\":\"s1\",\"version\":3}}}";
    expect_data(s, 1);
    ck_assert_str_eq(F.inm, "\"v1\"");
    expect_data(s, -1);
    ck_assert_str_eq(F.inm, "\"v2\"");
    ck_assert_int_eq(F.polls, 4);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

START_TEST(test_a_gzipped_answer_is_read)
{
    F.gzip = true;
    ld_synchronizer *s = sync_new(config(30000));
    ld_future *f = expect_update(s, LD_DATA_SOURCE_STATE_VALID);
    const ld_fdv2_change_set *cs = ld_fdv2_update_change_set(ld_fdv2_future_update(f));
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 1);
    ck_assert_str_eq(ld_fdv2_change_key(ld_fdv2_change_set_get(cs, 0)), "gz");
    ck_assert_int_eq(ld_fdv2_change_version(ld_fdv2_change_set_get(cs, 0)), 4);
    ld_future_unref(f);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

START_TEST(test_recoverable_statuses_poll_again_others_turn_it_off)
{
    static const int again[] = {400, 408, 429, 500, 503};
    for (size_t i = 0; i < sizeof again / sizeof again[0]; i++) {
        F.polls = 0;
        F.bad = 1;
        F.bad_status = again[i];
        ld_synchronizer *s = sync_new(config(20));
        expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_RESPONSE,
                     again[i]);
        expect_data(s, 2);
        ld_synchronizer_free(s);
        settle();
    }
    static const int off[] = {401, 403, 404};
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
        F.polls = 0;
        F.bad = 100;
        F.bad_status = off[i];
        ld_synchronizer *s = sync_new(config(20));
        expect_error(s, LD_DATA_SOURCE_STATE_OFF, LD_DATA_SOURCE_ERROR_KIND_RESPONSE, off[i]);
        ld_test_expect_error(ld_synchronizer_next(s), LD_ECLOSED, NULL);
        run_ms(60);
        ck_assert_int_eq(F.polls, 1);
        ld_synchronizer_free(s);
        settle();
    }
}
END_TEST

START_TEST(test_a_malformed_body_is_invalid_data_and_polled_again)
{
    F.body = "{\"flags\":{\"a\":{\"version\":-1}}}";
    ld_synchronizer *s = sync_new(config(20));
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0);
    F.body = ALL1;
    expect_data(s, 2);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

/* 10,000 flags (megabytes, parsed on the worker). */
START_TEST(test_a_big_body_is_parsed_off_the_loop)
{
    size_t cap = 4 << 20, n = 0;
    char *body = malloc(cap);
    n += (size_t)snprintf(body + n, cap - n, "{\"flags\":{");
    for (int i = 0; i < 10000; i++)
        n += (size_t)snprintf(body + n, cap - n,
                              "%s\"flag-%d\":{\"key\":\"flag-%d\",\"version\":%d,\"on\":true,"
                              "\"variations\":[true,false]}",
                              i ? "," : "", i, i, i + 1);
    snprintf(body + n, cap - n, "},\"segments\":{}}");
    F.body = body;
    ld_synchronizer *s = sync_new(config(30000));
    expect_data(s, 10000);
    ld_synchronizer_free(s);
    settle();
    /* freed while it is parsed */
    for (int round = 0; round < 4; round++) {
        F.polls = 0;
        s = sync_new(config(30000));
        ld_future *f = ld_synchronizer_next(s);
        while (F.polls == 0)
            event_base_loop(B, EVLOOP_ONCE);
        for (int i = 0; i < round * 3; i++)
            event_base_loop(B, EVLOOP_ONCE);
        ld_synchronizer_free(s);
        ld_test_wait(f);
        ld_future_unref(f);
        settle();
    }
    free(body);
}
END_TEST

START_TEST(test_updates_nobody_takes_are_bounded)
{
    F.bad = 1000;
    F.bad_status = 500;
    ld_synchronizer *s = sync_new(config(1));
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_RESPONSE, 500);
    while (F.polls < 60)
        event_base_loop(B, EVLOOP_ONCE);
    F.bad = 0;
    int before = F.polls;
    while (F.polls < before + 2)
        event_base_loop(B, EVLOOP_ONCE);
    /* the full set dropped what waited before it */
    expect_data(s, 2);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

START_TEST(test_stop_and_free_mid_poll_and_from_a_callback)
{
    F.etag = "\"e\"";
    ld_synchronizer *s = sync_new(config(30000));
    ld_future *f = ld_synchronizer_next(s);
    ld_test_await_ok(ld_synchronizer_stop(s));
    ck_assert_int_eq(ld_future_error(f), LD_ECLOSED);
    ld_future_unref(f);
    ld_test_expect_error(ld_synchronizer_next(s), LD_ECLOSED, NULL);
    ld_synchronizer_free(s);
    settle();

    s = sync_new(config(30000));
    f = ld_synchronizer_next(s);
    ld_test_wait(f);
    ld_future_unref(f);
    f = ld_synchronizer_next(s); /* waits 30 s */
    ld_synchronizer_free(s);
    ld_test_wait(f);
    ck_assert_int_eq(ld_future_error(f), LD_ECANCELED);
    ld_future_unref(f);
    settle();
}
END_TEST

START_TEST(test_a_data_system_polls)
{
    ld_store *st = ld_memory_store_new(B);
    ld_initializer *in = init_new(config(30000));
    ld_data_system *ds = ld_data_system_new(B, st, &in, 1, sync_new(config(30)));
    ck_assert_ptr_nonnull(ds);
    ld_test_await_ok(ld_data_system_ready(ds));
    ld_future *g = ld_test_fulfilled(ld_store_get(st, ld_kind_features(), "f1"));
    ck_assert_ptr_nonnull(ld_future_json(g));
    ld_future_unref(g);
    F.body = "{\"flags\":{\"f2\":{\"key\":\"f2\",\"version\":1}}}";
    for (int i = 0; i < 100000; i++) {
        g = ld_test_fulfilled(ld_store_get(st, ld_kind_features(), "f2"));
        bool there = ld_future_json(g) != NULL;
        ld_future_unref(g);
        if (there)
            break;
        event_base_loop(B, EVLOOP_ONCE);
    }
    g = ld_test_fulfilled(ld_store_get(st, ld_kind_features(), "f1"));
    ck_assert_ptr_null(ld_future_json(g)); /* a full set replaces */
    ld_future_unref(g);
    ld_data_system_free(ds);
    settle();
    ld_test_await_ok(ld_store_close(st));
    ld_store_free(st);
}
END_TEST

START_TEST(test_a_client_set_to_poll_polls)
{
    ld_client_options *o = ld_client_options_new();
    ld_net_config *c = config(30000);
    ck_assert_int_eq(ld_client_options_set_net_config(o, c), 0);
    ck_assert_int_eq(ld_client_options_set_events(o, false), 0); /* no events service here */
    ck_assert_int_eq(ld_client_options_set_polling(o, true), 0);
    ld_net_config_free(c);
    ld_client *cl = ld_client_new(B, o);
    ld_client_options_free(o);
    ld_test_await_ok(ld_client_ready(cl));
    ck_assert_int_eq(F.polls, 1);
    ld_future *g = ld_test_fulfilled(ld_store_get(ld_client_store(cl), ld_kind_features(), "f1"));
    ck_assert_ptr_nonnull(ld_future_json(g));
    ld_future_unref(g);
    ld_client_free(cl);
    settle();
}
END_TEST

START_TEST(test_allocation_failures)
{
    F.etag = "\"e\"";
    ld_net_config *c = config(1);
    __atomic_store_n(&ld__http_spare_curl, true, __ATOMIC_RELAXED);
    for (long n = 1;; n++) {
        CHAOS_BEGIN(n);
        ld_synchronizer *s = ld_polling_synchronizer_new(B, c);
        ld_initializer *in = ld_polling_initializer_new(B, c);
        int valid = 0;
        for (int i = 0; s && i < 6 && valid < 2; i++) {
            ld_future *f = ld_synchronizer_next(s);
            for (int k = 0; k < 20000 && ld_future_is_pending(f); k++)
                event_base_loop(B, EVLOOP_ONCE);
            ck_assert(!ld_future_is_pending(f));
            const ld_fdv2_update *u = ld_fdv2_future_update(f);
            if (u && ld_fdv2_update_state(u) == LD_DATA_SOURCE_STATE_VALID)
                valid++;
            ld_future_unref(f);
        }
        bool fetched = false;
        if (in) {
            ld_future *f = ld_initializer_fetch(in);
            ld_test_wait(f);
            fetched = ld_future_is_fulfilled(f);
            ld_future_unref(f);
        }
        bool failed = chaos_end(n);
        ld_synchronizer_free(s);
        ld_initializer_free(in);
        run_ms(1);
        if (!failed) {
            ck_assert_int_eq(valid, 2);
            ck_assert(fetched);
            break;
        }
    }
    __atomic_store_n(&g_fail_at, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&ld__http_spare_curl, false, __ATOMIC_RELAXED);
    ld_net_config_free(c);
}
END_TEST

Suite *ld_suite_polling(void)
{
    Suite *s = suite_create("polling");
    TCase *tc = tcase_create("fdv1");
    tcase_add_checked_fixture(tc, fake_up, fake_down);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_the_initializer_fetches_all_the_data_with_the_sdk_s_headers);
    tcase_add_test(tc, test_the_initializer_reports_statuses_and_bad_bodies);
    tcase_add_test(tc, test_the_initializer_stops_and_frees_mid_fetch);
    tcase_add_test(tc, test_polls_at_the_interval_with_the_etag);
    tcase_add_test(tc, test_a_gzipped_answer_is_read);
    tcase_add_test(tc, test_recoverable_statuses_poll_again_others_turn_it_off);
    tcase_add_test(tc, test_a_malformed_body_is_invalid_data_and_polled_again);
    tcase_add_test(tc, test_a_big_body_is_parsed_off_the_loop);
    tcase_add_test(tc, test_updates_nobody_takes_are_bounded);
    tcase_add_test(tc, test_stop_and_free_mid_poll_and_from_a_callback);
    tcase_add_test(tc, test_a_data_system_polls);
    tcase_add_test(tc, test_a_client_set_to_poll_polls);
    tcase_add_test(tc, test_allocation_failures);
    suite_add_tcase(s, tc);
    return s;
}
