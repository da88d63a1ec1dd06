/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The FDv1 streaming synchronizer (network.h) against a fake LaunchDarkly
 * stream: an evhttp server in the same process and loop that speaks the
 * protocol (GET /all, server-sent events over a chunked response), with the
 * headers the SDKs send, every event type and path, events split at every
 * byte, a big put parsed off the loop, statuses, malformed data, a server
 * that ends the stream, stalls or never answers, stop and free at every
 * point, many reconnections, a data system on top, and allocation
 * failures.
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
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include <ldasync/alloc.h>
#include <ldasync/client.h>
#include <ldasync/data_system.h>
#include <ldasync/error.h>
#include <ldasync/network.h>
#include <ldasync/store.h>

#include "check_fail_alloc.h"
#include "check_fake_stream.h"
#include "check_suites.h"
#include "check_tls.h"
#include "check_util.h"
#include "core/core-internal.h"
#include "net/net-internal.h"
#include "sources/sources-internal.h"

#define B ld_test_base

/* ---- tests ----------------------------------------------------------------- */

START_TEST(test_headers_and_url_are_those_of_the_sdks)
{
    ld_net_config *c = fake_config();
    ck_assert_int_eq(ld_net_config_set_application(c, "my-app", "1.2.3"), 0);
    ck_assert_int_eq(ld_net_config_set_wrapper(c, "my-wrapper", "9.0"), 0);
    ck_assert_int_eq(ld_net_config_set_payload_filter(c, "mobile_only"), 0);
    char instance[40];
    snprintf(instance, sizeof instance, "%s", ld_net_config_instance_id(c));
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(c);
    ld_future *f = expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2);
    ck_assert_str_eq(ld_fdv2_update_environment_id(ld_fdv2_future_update(f)), "env-1");
    ld_future_unref(f);
    ck_assert_str_eq(F.uri, "/all?filter=mobile_only");
    ck_assert_str_eq(F.auth, KEY);
    ck_assert_msg(strncmp(F.agent, "ldasync/", 8) == 0, "%s", F.agent);
    ck_assert_str_eq(F.tags, "application-id/my-app application-version/1.2.3");
    ck_assert_str_eq(F.wrapper, "my-wrapper/9.0");
    ck_assert_str_eq(F.instance, instance);
    ck_assert_uint_eq(strlen(instance), 36);
    ck_assert_int_eq(instance[14], '4'); /* a version 4 UUID */
    ck_assert_str_eq(F.accept, "text/event-stream");
    ck_assert_str_eq(F.cache, "no-cache");
    ck_assert_int_eq(F.connects, 1);
    ck_assert_str_eq(ld_synchronizer_name(s), "streaming");
    ld_synchronizer_free(s);
    settle();
}
END_TEST

START_TEST(test_no_connection_before_the_first_next)
{
    ld_synchronizer *s = stream_new(fake_config());
    run_ms(50);
    ck_assert_int_eq(F.connects, 0);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

START_TEST(test_put_patch_delete_of_both_kinds)
{
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(fake_config());
    ld_future *f = expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2);
    bool saw_flag = false, saw_seg = false;
    for (size_t i = 0; i < 2; i++) {
        const ld_fdv2_change *c = change_of(f, i);
        if (ld_fdv2_change_kind(c) == ld_kind_features()) {
            ck_assert_str_eq(ld_fdv2_change_key(c), "f1");
            ck_assert_int_eq(ld_fdv2_change_version(c), 3);
            ck_assert(json_is_true(json_object_get(ld_fdv2_change_object(c), "on")));
            saw_flag = true;
        } else {
            ck_assert_str_eq(ld_fdv2_change_key(c), "s1");
            ck_assert_int_eq(ld_fdv2_change_version(c), 2);
            saw_seg = true;
        }
    }
    ck_assert(saw_flag && saw_seg);
    ld_future_unref(f);

    fake_sends(
        ": a heartbeat\n\n"
        "event: patch\ndata: {\"path\":\"/flags/f2\",\"data\":{\"key\":\"f2\",\"version\":7}}\n\n"
        "event: patch\ndata: "
        "{\"data\":{\"key\":\"s2\",\"version\":1},\"path\":\"/segments/s2\"}\n\n"
        "event: patch\ndata: {\"path\":\"/other/x\",\"data\":{\"key\":\"x\"}}\n\n"
        "event: something-new\ndata: {}\n\n"
        "event: delete\ndata: {\"path\":\"/flags/f1\",\"version\":4}\n\n"
        "event: delete\ndata: {\"path\":\"/segments/s1\",\"version\":9}\n\n");
    f = expect_changes(s, LD_FDV2_INTENT_XFER_CHANGES, 1);
    ck_assert_int_eq(ld_fdv2_change_action(change_of(f, 0)), LD_FDV2_ACTION_PUT);
    ck_assert_ptr_eq(ld_fdv2_change_kind(change_of(f, 0)), ld_kind_features());
    ck_assert_str_eq(ld_fdv2_change_key(change_of(f, 0)), "f2");
    ck_assert_int_eq(ld_fdv2_change_version(change_of(f, 0)), 7);
    ld_future_unref(f);
    f = expect_changes(s, LD_FDV2_INTENT_XFER_CHANGES, 1);
    ck_assert_ptr_eq(ld_fdv2_change_kind(change_of(f, 0)), ld_kind_segments());
    ck_assert_str_eq(ld_fdv2_change_key(change_of(f, 0)), "s2");
    ld_future_unref(f);
    f = expect_changes(s, LD_FDV2_INTENT_XFER_CHANGES, 1);
    ck_assert_int_eq(ld_fdv2_change_action(change_of(f, 0)), LD_FDV2_ACTION_DELETE);
    ck_assert_ptr_eq(ld_fdv2_change_kind(change_of(f, 0)), ld_kind_features());
    ck_assert_str_eq(ld_fdv2_change_key(change_of(f, 0)), "f1");
    ck_assert_int_eq(ld_fdv2_change_version(change_of(f, 0)), 4);
    ld_future_unref(f);
    f = expect_changes(s, LD_FDV2_INTENT_XFER_CHANGES, 1);
    ck_assert_ptr_eq(ld_fdv2_change_kind(change_of(f, 0)), ld_kind_segments());
    ck_assert_int_eq(ld_fdv2_change_version(change_of(f, 0)), 9);
    ld_future_unref(f);
    ck_assert_int_eq(F.connects, 1);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

/* A patch event split in two at every byte, CR LF line ends: each arrives
 * whole, in order, on one connection. */
START_TEST(test_events_split_at_every_byte)
{
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(fake_config());
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    char ev[256];
    int n0 = snprintf(ev, sizeof ev,
                      "event: patch\r\ndata: {\"path\":\"/flags/f1\",\"data\":{\"key\":\"f1\","
                      "\"version\":%d}}\r\n\r\n",
                      1000);
    for (int cut = 1; cut < n0; cut++) {
        int n = snprintf(ev, sizeof ev,
                         "event: patch\r\ndata: {\"path\":\"/flags/f1\",\"data\":{\"key\":\"f1\","
                         "\"version\":%d}}\r\n\r\n",
                         1000 + cut);
        ck_assert_int_eq(n, n0);
        fake_send(ev, (size_t)cut);
        for (int i = 0; i < 4; i++)
            event_base_loop(B, EVLOOP_NONBLOCK);
        fake_send(ev + cut, (size_t)(n - cut));
        ld_future *f = expect_changes(s, LD_FDV2_INTENT_XFER_CHANGES, 1);
        ck_assert_int_eq(ld_fdv2_change_version(change_of(f, 0)), 1000 + cut);
        ld_future_unref(f);
    }
    ck_assert_int_eq(F.connects, 1);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

/* A put of 10,000 flags (megabytes: parsed on the worker) with a patch right
 * behind it in the same chunk: the put comes first, whole, then the patch. */
START_TEST(test_a_big_put_then_a_patch_keep_their_order)
{
    size_t cap = 4 << 20, n = 0;
    char *put = malloc(cap);
    n += (size_t)snprintf(put + n, cap - n,
                          "event: put\ndata: {\"path\":\"/\",\"data\":{\"flags\":{");
    for (int i = 0; i < 10000; i++)
        n += (size_t)snprintf(put + n, cap - n,
                              "%s\"flag-%d\":{\"key\":\"flag-%d\",\"version\":%d,\"on\":true,"
                              "\"variations\":[true,false],\"fallthrough\":{\"variation\":0}}",
                              i ? "," : "", i, i, i + 1);
    n += (size_t)snprintf(put + n, cap - n,
                          "},\"segments\":{}}}\n\nevent: patch\ndata: {\"path\":\"/flags/flag-5\","
                          "\"data\":{\"key\":\"flag-5\",\"version\":100}}\n\n");
    ck_assert_uint_gt(n, LD__FDV1_BIG);
    F.initial = put;
    ld_synchronizer *s = stream_new(fake_config());
    ld_future *f = expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 10000);
    ld_future_unref(f);
    f = expect_changes(s, LD_FDV2_INTENT_XFER_CHANGES, 1);
    ck_assert_str_eq(ld_fdv2_change_key(change_of(f, 0)), "flag-5");
    ck_assert_int_eq(ld_fdv2_change_version(change_of(f, 0)), 100);
    ld_future_unref(f);
    ld_synchronizer_free(s);
    settle();
    free(put);
}
END_TEST

/* A big put that is malformed: invalid data after the worker's parse, the
 * patch behind it dropped, and a new connection. */
START_TEST(test_a_big_malformed_put_restarts_the_stream)
{
    size_t cap = 200000, n = 0;
    char *put = malloc(cap);
    n += (size_t)snprintf(put + n, cap - n,
                          "event: put\ndata: {\"path\":\"/\",\"data\":{\"flags\":{");
    for (int i = 0; i < 5000; i++)
        n += (size_t)snprintf(put + n, cap - n, "\"f%d\":{\"version\":1},", i);
    n += (size_t)snprintf(put + n, cap - n,
                          "}}}\n\nevent: patch\ndata: {\"path\":\"/flags/x\",\"data\":{}}\n\n");
    ck_assert_uint_gt(n, LD__FDV1_BIG);
    F.bad = 1;
    F.bad_initial = put;
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(fake_config());
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0,
                 "malformed JSON");
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    ck_assert_int_eq(F.connects, 2);
    ld_synchronizer_free(s);
    settle();
    free(put);
}
END_TEST

START_TEST(test_recoverable_statuses_retry)
{
    static const int codes[] = {400, 408, 429, 500, 503};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        F.bad = 2;
        F.bad_status = codes[i];
        F.connects = 0;
        F.initial = PUT1;
        ld_synchronizer *s = stream_new(fake_config());
        expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_RESPONSE,
                     codes[i], "will retry");
        expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_RESPONSE,
                     codes[i], NULL);
        ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
        ck_assert_int_eq(F.connects, 3);
        ld_synchronizer_free(s);
        settle();
    }
}
END_TEST

START_TEST(test_unrecoverable_statuses_turn_it_off)
{
    static const int codes[] = {401, 403, 404, 405};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        F.status = codes[i];
        F.connects = 0;
        ld_synchronizer *s = stream_new(fake_config());
        expect_error(s, LD_DATA_SOURCE_STATE_OFF, LD_DATA_SOURCE_ERROR_KIND_RESPONSE, codes[i],
                     codes[i] <= 403 ? "invalid SDK key" : "giving up");
        ld_test_expect_error(ld_synchronizer_next(s), LD_ECLOSED, NULL);
        ld_test_expect_error(ld_synchronizer_next(s), LD_ECLOSED, NULL);
        run_ms(30);
        ck_assert_int_eq(F.connects, 1);
        ld_synchronizer_free(s);
        settle();
    }
}
END_TEST

START_TEST(test_malformed_events_restart_the_stream)
{
    static const char *const bad[] = {
        "event: put\ndata: {\"path\":\"/\",\"data\":{\"flags\":\n\n",
        "event: put\ndata: {\"path\":\"/\"}\n\n",
        "event: put\ndata: {\"data\":{\"flags\":[]}}\n\n",
        "event: put\ndata: {\"data\":{\"flags\":{\"a\":3}}}\n\n",
        "event: put\ndata: {\"data\":{\"flags\":{\"a\":{\"version\":\"7\"}}}}\n\n",
        "event: patch\ndata: {\"path\":\"/flags/a\"}\n\n",
        "event: patch\ndata: {\"data\":{}}\n\n",
        "event: patch\ndata: {\"path\":\"/flags/\",\"data\":{}}\n\n",
        "event: delete\ndata: {\"path\":\"/flags/a\"}\n\n",
        "event: delete\ndata: {\"path\":\"/flags/a\",\"version\":-1}\n\n",
        "event: delete\ndata: [1]\n\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        F.connects = 0;
        F.bad = 1;
        F.bad_initial = bad[i];
        F.initial = PUT1;
        ld_synchronizer *s = stream_new(fake_config());
        expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0,
                     NULL);
        ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
        ck_assert_int_eq(F.connects, 2);
        ld_synchronizer_free(s);
        settle();
    }
}
END_TEST

START_TEST(test_not_an_event_stream_is_invalid_data)
{
    F.bad = 1;
    F.bad_ctype = "application/json";
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(fake_config());
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0,
                 "text/event-stream");
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    ld_synchronizer_free(s);
    settle();
}
END_TEST

START_TEST(test_a_stream_the_server_ends_reconnects)
{
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(fake_config());
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    fake_sends("event: patch\ndata: {\"path\":\"/flags/f1\",\"data\":{\"version\":5}}\n\n"
               "event: patch\ndata: {\"path\":\"/flags/f1\",\"data\":{\"ver");
    fake_end();
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_CHANGES, 1));
    /* the event cut by the end is dropped */
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0,
                 "ended the stream");
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    ck_assert_int_eq(F.connects, 2);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

/* ld_synchronizer_refresh(): a new connection, whose put is the whole
 * data set again (the store lost what it held). */
START_TEST(test_refresh_reconnects_for_a_new_put)
{
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(fake_config());
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    ck_assert_int_eq(F.connects, 1);
    ck_assert_int_eq(ld_synchronizer_refresh(s), 0);
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    ck_assert_int_eq(F.connects, 2);
    ck_assert_int_eq(ld_synchronizer_refresh(NULL), LD_EINVAL);
    /* stopped: nothing more */
    ld_future *stop = ld_synchronizer_stop(s);
    ld_test_await_ok(stop);
    ck_assert_int_eq(ld_synchronizer_refresh(s), 0);
    settle();
    ck_assert_int_eq(F.connects, 2);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

START_TEST(test_a_stalled_stream_times_out_and_reconnects)
{
    ld_net_config *c = fake_config();
    ck_assert_int_eq(ld_net_config_set_timeouts(c, 0, 0, 150), 0);
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(c);
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    /* heartbeats keep it alive past the timeout */
    for (int i = 0; i < 4; i++) {
        run_ms(60);
        fake_sends(":\n");
    }
    ck_assert_int_eq(F.connects, 1);
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0, NULL);
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    ck_assert_int_eq(F.connects, 2);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

START_TEST(test_a_server_that_never_answers_times_out)
{
    ld_net_config *c = fake_config();
    ck_assert_int_eq(ld_net_config_set_timeouts(c, 0, 0, 100), 0);
    F.hold = true;
    ld_synchronizer *s = stream_new(c);
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0, NULL);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

START_TEST(test_a_refused_connection_is_a_network_error)
{
    ld_net_config *c = fake_config();
    ck_assert_int_eq(ld_net_config_set_stream_uri(c, "http://127.0.0.1:1"), 0);
    ld_synchronizer *s = stream_new(c);
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0, NULL);
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0, NULL);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

START_TEST(test_a_missing_ca_file_fails_each_connection)
{
    ld_net_config *c = fake_config();
    char url[80];
    snprintf(url, sizeof url, "https://127.0.0.1:%d", F.port);
    ck_assert_int_eq(ld_net_config_set_stream_uri(c, url), 0);
    ck_assert_int_eq(ld_net_config_set_ca_file(c, "/nonexistent/ca.pem"), 0);
    ld_synchronizer *s = stream_new(c);
    expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0, NULL);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

/* Updates nobody takes are kept, up to a bound; then the stream restarts. */
START_TEST(test_updates_queue_until_taken)
{
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(fake_config());
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    for (int i = 0; i < 50; i++) {
        char ev[128];
        snprintf(ev, sizeof ev,
                 "event: patch\ndata: {\"path\":\"/flags/f1\",\"data\":{\"version\":%d}}\n\n",
                 10 + i);
        fake_sends(ev);
    }
    run_ms(50);
    for (int i = 0; i < 50; i++) {
        ld_future *f = expect_changes(s, LD_FDV2_INTENT_XFER_CHANGES, 1);
        ck_assert_int_eq(ld_fdv2_change_version(change_of(f, 0)), 10 + i);
        ld_future_unref(f);
    }
    ld_synchronizer_free(s);
    settle();
}
END_TEST

START_TEST(test_an_overfull_queue_restarts_the_stream)
{
    F.initial = PUT1;
    ld_synchronizer *s = stream_new(fake_config());
    ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
    static char big[5000 * 80];
    size_t n = 0;
    for (int i = 0; i < 5000; i++)
        n += (size_t)snprintf(big + n, sizeof big - n,
                              "event: delete\ndata: {\"path\":\"/flags/f1\",\"version\":%d}\n\n",
                              i + 10);
    fake_send(big, n);
    F.initial = PUT1;
    run_until(&F.connects, 2);
    ld_future *f = next_done(s);
    /* what was queued went: the new put is all there is */
    ck_assert(ld_future_is_fulfilled(f));
    const ld_fdv2_change_set *cs = ld_fdv2_update_change_set(ld_fdv2_future_update(f));
    ck_assert_ptr_nonnull(cs);
    ck_assert_int_eq(ld_fdv2_change_set_intent(cs), LD_FDV2_INTENT_XFER_FULL);
    ld_future_unref(f);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

/* A server that ends every stream after its put: 10,000 reconnections
 * (1,000 under valgrind, LDASYNC_VALGRIND) leave no descriptor, no request
 * and no memory behind. */
START_TEST(test_many_reconnections_leak_nothing)
{
    F.initial = PUT1;
    F.end_at_once = true;
    ld_net_config *c = fake_config();
    ck_assert_int_eq(ld_net_config_set_reconnect_delay(c, 0), 0);
    c->reconnect_max_ms = 1; /* delays of 0-1 ms (they would grow to 30 s) */
    ld_synchronizer *s = stream_new(c);
    /* 10,000 take ~25 s of waiting for the reconnections' timers: the
     * sanitizer and valgrind builds do 1,000 */
    int fds = -1, n = getenv("LDASYNC_VALGRIND") || LD_TEST_SANITIZED ? 1000 : 10000;
    long rss = 0;
    int puts = 0;
    while (puts < n) {
        ld_future *f = ld_synchronizer_next(s);
        ld_test_wait(f);
        ck_assert(ld_future_is_fulfilled(f));
        const ld_fdv2_update *u = ld_fdv2_future_update(f);
        const ld_fdv2_change_set *cs = ld_fdv2_update_change_set(u);
        if (cs) {
            ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 2);
            puts++;
        } else {
            ck_assert_int_eq(ld_fdv2_update_state(u), LD_DATA_SOURCE_STATE_INTERRUPTED);
            ck_assert_int_eq(ld_fdv2_update_error(u)->kind, LD_DATA_SOURCE_ERROR_KIND_NETWORK);
        }
        ld_future_unref(f);
        if (puts == 100 && fds < 0) {
            fds = ld_test_count_fds();
            rss = ld_test_rss_kb();
        }
    }
    int after = ld_test_count_fds();
    ck_assert_msg(after <= fds + 4, "descriptors %d -> %d", fds, after);
    /* a leak of even 100 bytes a connection would be ~1 MB here */
    ck_assert_msg(getenv("LDASYNC_VALGRIND") || LD_TEST_SANITIZED || ld_test_rss_kb() - rss < 2048,
                  "resident memory %ld kB -> %ld kB", rss, ld_test_rss_kb());
    ck_assert_int_ge(F.connects, n);
    ld_synchronizer_free(s);
    settle();
}
END_TEST

/* ---- stop and free at every point ------------------------------------------ */

START_TEST(test_stop_while_connecting_and_free)
{
    F.hold = true;
    ld_synchronizer *s = stream_new(fake_config());
    ld_future *n = ld_synchronizer_next(s);
    run_until(&F.connects, 1);
    ld_test_await_ok(ld_synchronizer_stop(s));
    ck_assert(ld_future_is_rejected(n));
    ck_assert_int_eq(ld_future_error(n), LD_ECLOSED);
    ld_future_unref(n);
    ld_test_expect_error(ld_synchronizer_next(s), LD_ECLOSED, NULL);
    ld_test_await_ok(ld_synchronizer_stop(s));
    ld_synchronizer_free(s);
    settle();
}
END_TEST

START_TEST(test_free_while_connecting)
{
    F.hold = true;
    ld_synchronizer *s = stream_new(fake_config());
    ld_future *n = ld_synchronizer_next(s);
    run_until(&F.connects, 1);
    ld_synchronizer_free(s);
    ld_test_wait(n);
    ck_assert_int_eq(ld_future_error(n), LD_ECANCELED);
    ld_future_unref(n);
    settle();
}
END_TEST

/* Freed while a big put is parsed on the worker, and stopped then. */
START_TEST(test_free_and_stop_during_a_big_put_s_parse)
{
    size_t cap = 4 << 20, n = 0;
    char *put = malloc(cap);
    n += (size_t)snprintf(put + n, cap - n, "event: put\ndata: {\"data\":{\"flags\":{");
    for (int i = 0; i < 20000; i++)
        n += (size_t)snprintf(put + n, cap - n, "%s\"f%d\":{\"key\":\"f%d\",\"version\":1}",
                              i ? "," : "", i, i);
    n += (size_t)snprintf(put + n, cap - n, "}}}\n\n");
    F.initial = put;
    for (int round = 0; round < 6; round++) {
        F.connects = 0;
        ld_synchronizer *s = stream_new(fake_config());
        ld_future *nx = ld_synchronizer_next(s);
        run_until(&F.connects, 1);
        for (int i = 0; i < round * 3; i++)
            event_base_loop(B, EVLOOP_ONCE);
        if (round % 2) {
            ld_test_await_ok(ld_synchronizer_stop(s));
            ck_assert(!ld_future_is_pending(nx));
        }
        ld_synchronizer_free(s);
        ld_test_wait(nx);
        ld_future_unref(nx);
        settle();
    }
    free(put);
}
END_TEST

static void free_in_callback(ld_future *f, void *arg)
{
    (void)f;
    ld_synchronizer_free(arg);
}

START_TEST(test_free_from_inside_a_next_s_callback)
{
    F.initial = PUT1 "event: patch\ndata: {\"path\":\"/flags/f1\",\"data\":{\"version\":5}}\n\n";
    ld_synchronizer *s = stream_new(fake_config());
    ld_future *a = ld_synchronizer_next(s);
    ld_future *b = ld_synchronizer_next(s);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(a), free_in_callback, s), 0);
    ld_test_wait(a);
    ck_assert(ld_future_is_fulfilled(a));
    ld_test_wait(b);
    ck_assert(!ld_future_is_pending(b));
    ld_future_unref(a);
    ld_future_unref(b);
    settle();
}
END_TEST

/* ---- a data system on top -------------------------------------------------- */

START_TEST(test_a_data_system_is_fed_by_the_stream)
{
    F.initial = PUT1;
    ld_store *st = ld_memory_store_new(B);
    ld_data_system *ds = ld_data_system_new(B, st, NULL, 0, stream_new(fake_config()));
    ck_assert_ptr_nonnull(ds);
    ld_test_await_ok(ld_data_system_ready(ds));
    ld_future *g = ld_test_fulfilled(ld_store_get(st, ld_kind_features(), "f1"));
    ck_assert_ptr_nonnull(ld_future_json(g));
    ld_future_unref(g);
    fake_sends(
        "event: patch\ndata: {\"path\":\"/flags/f9\",\"data\":{\"key\":\"f9\",\"version\":1}}\n\n");
    for (int i = 0; i < 1000; i++) {
        g = ld_test_fulfilled(ld_store_get(st, ld_kind_features(), "f9"));
        bool there = ld_future_json(g) != NULL;
        ld_future_unref(g);
        if (there)
            break;
        event_base_loop(B, EVLOOP_ONCE);
        ck_assert_int_lt(i, 999);
    }
    ld_data_source_status status;
    ck_assert_int_eq(ld_data_system_status(ds, &status), 0);
    ck_assert_int_eq(status.state, LD_DATA_SOURCE_STATE_VALID);
    ld_data_system_free(ds);
    settle();
    ld_test_await_ok(ld_store_close(st));
    ld_store_free(st);
}
END_TEST

START_TEST(test_a_refused_key_rejects_ready_with_the_status)
{
    F.status = 401;
    ld_store *st = ld_memory_store_new(B);
    ld_data_system *ds = ld_data_system_new(B, st, NULL, 0, stream_new(fake_config()));
    ld_test_expect_error(ld_data_system_ready(ds), LD_EIO, "401");
    ld_data_source_status status;
    settle();
    ck_assert_int_eq(ld_data_system_status(ds, &status), 0);
    ck_assert_int_eq(status.state, LD_DATA_SOURCE_STATE_OFF);
    ck_assert_ptr_nonnull(status.error);
    ck_assert_int_eq(status.error->status_code, 401);
    ld_data_system_free(ds);
    settle();
    ld_test_await_ok(ld_store_close(st));
    ld_store_free(st);
}
END_TEST

/* ---- TLS ------------------------------------------------------------------- */

/* The same fake stream over HTTPS, its certificate made at test time: our
 * CA file is accepted; the system's CAs, another CA and a name the
 * certificate does not have are refused (network errors, and the stream
 * keeps trying); verification off takes it. */
START_TEST(test_tls_custom_ca_refusal_and_verification_off)
{
    if (getenv("LDASYNC_VALGRIND"))
        return; /* TLS handshakes take seconds each there; the other builds run it */
    struct ld_test_tls t;
    ld_test_tls_make(&t);
    struct evhttp *https = evhttp_new(B);
    int port = ld_test_http_listen(https);
    evhttp_set_bevcb(https, ld_test_tls_bev, t.ctx);
    evhttp_set_gencb(https, fake_serve, NULL);
    F.initial = PUT1;
    char localhost[80], by_ip[80];
    snprintf(localhost, sizeof localhost, "https://localhost:%d", port);
    snprintf(by_ip, sizeof by_ip, "https://127.0.0.1:%d", port);
    struct {
        const char *uri, *ca;
        bool verify, ok;
    } cases[] = {
        {localhost, t.ca_file, true, true},
        {localhost, NULL, true, false},
        {localhost, t.other_file, true, false},
        {by_ip, t.ca_file, true, false},
        {by_ip, NULL, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        F.connects = 0;
        ld_net_config *c = fake_config();
        ck_assert_int_eq(ld_net_config_set_stream_uri(c, cases[i].uri), 0);
        ck_assert_int_eq(ld_net_config_set_ca_file(c, cases[i].ca), 0);
        ck_assert_int_eq(ld_net_config_set_verify_peer(c, cases[i].verify), 0);
        /* a TLS handshake under valgrind takes seconds: the 10 s connect
         * timeout would fail it over and over */
        ck_assert_int_eq(ld_net_config_set_timeouts(c, 300000, 0, 0), 0);
        ld_synchronizer *s = stream_new(c);
        if (cases[i].ok) {
            ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
            ck_assert_int_eq(F.connects, 1);
        } else {
            expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0,
                         NULL);
            ck_assert_int_eq(F.connects, 0); /* refused before any request */
        }
        ld_synchronizer_free(s);
        settle();
    }
    evhttp_free(https);
    ld_test_tls_free(&t);
}
END_TEST

/* ---- a CONNECT proxy ----------------------------------------------------------
 * An HTTP proxy as the CONNECT method makes one (RFC 9110 9.3.6): it reads
 * one request head; for "CONNECT host:port" it connects to 127.0.0.1:port,
 * answers 200 and relays bytes both ways until either side closes. Modes:
 * tunnel, refuse (403), hold (never answers). */

enum proxy_mode { TUNNEL, REFUSE, HOLD };

struct proxy {
    struct evconnlistener *lis;
    int port;
    enum proxy_mode mode;
    int connects;     /* CONNECT requests seen */
    char target[128]; /* the last one's host:port */
};

static struct proxy P;

struct pconn {
    struct bufferevent *client, *up;
};

static void pconn_free(struct pconn *c)
{
    if (c->client)
        bufferevent_free(c->client);
    if (c->up)
        bufferevent_free(c->up);
    free(c);
}

static void relay(struct bufferevent *from, void *arg)
{
    struct pconn *c = arg;
    struct bufferevent *to = from == c->client ? c->up : c->client;
    evbuffer_add_buffer(bufferevent_get_output(to), bufferevent_get_input(from));
}

static void pconn_event(struct bufferevent *bev, short what, void *arg)
{
    struct pconn *c = arg;
    if (bev == c->up && (what & BEV_EVENT_CONNECTED)) {
        evbuffer_add_printf(bufferevent_get_output(c->client),
                            "HTTP/1.1 200 Connection established\r\n\r\n");
        bufferevent_setcb(c->client, relay, NULL, pconn_event, c);
        bufferevent_setcb(c->up, relay, NULL, pconn_event, c);
        bufferevent_enable(c->up, EV_READ | EV_WRITE);
        relay(c->client, c); /* bytes that came with the head */
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        pconn_free(c);
}

static void closed_after_write(struct bufferevent *bev, void *arg)
{
    (void)bev;
    pconn_free(arg);
}

static void read_head(struct bufferevent *bev, void *arg)
{
    struct pconn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
    if (end.pos < 0)
        return;
    size_t n = (size_t)end.pos + 4;
    char *head = malloc(n + 1);
    evbuffer_remove(in, head, n);
    head[n] = '\0';
    int port = 0;
    if (sscanf(head, "CONNECT %127s HTTP/1.1", P.target) == 1) {
        P.connects++;
        const char *colon = strrchr(P.target, ':');
        port = colon ? atoi(colon + 1) : 0;
    }
    free(head);
    if (P.mode == HOLD)
        return;
    if (P.mode == REFUSE || port == 0) {
        evbuffer_add_printf(bufferevent_get_output(bev),
                            "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
        bufferevent_setcb(bev, NULL, closed_after_write, pconn_event, c);
        return;
    }
    struct sockaddr_in sin = {0};
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(0x7f000001);
    c->up = bufferevent_socket_new(B, -1, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(c->up, NULL, NULL, pconn_event, c);
    bufferevent_setcb(bev, NULL, NULL, pconn_event, c); /* no reading until connected */
    if (bufferevent_socket_connect(c->up, (struct sockaddr *)&sin, sizeof sin) != 0)
        pconn_free(c);
}

static void proxy_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                         void *arg)
{
    (void)l;
    (void)sa;
    (void)len;
    (void)arg;
    struct pconn *c = calloc(1, sizeof *c);
    c->client = bufferevent_socket_new(B, fd, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(c->client, read_head, NULL, pconn_event, c);
    bufferevent_enable(c->client, EV_READ | EV_WRITE);
}

static void proxy_up(void)
{
    memset(&P, 0, sizeof P);
    struct sockaddr_in sin = {0};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(0x7f000001);
    P.lis =
        evconnlistener_new_bind(B, proxy_accept, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                                -1, (struct sockaddr *)&sin, sizeof sin);
    ck_assert_ptr_nonnull(P.lis);
    socklen_t len = sizeof sin;
    ck_assert_int_eq(getsockname(evconnlistener_get_fd(P.lis), (struct sockaddr *)&sin, &len), 0);
    P.port = ntohs(sin.sin_port);
}

/* The fake stream over HTTPS, reached through the proxy: given as an
 * option, or by https_proxy (ignored when the option is ""); a proxy that
 * refuses, or that is not there, is a network error; a proxy that never
 * answers is left by a source freed meanwhile. */
START_TEST(test_through_a_connect_proxy)
{
    if (getenv("LDASYNC_VALGRIND"))
        return; /* as the test above */
    struct ld_test_tls t;
    ld_test_tls_make(&t);
    struct evhttp *https = evhttp_new(B);
    int port = ld_test_http_listen(https);
    evhttp_set_bevcb(https, ld_test_tls_bev, t.ctx);
    evhttp_set_gencb(https, fake_serve, NULL);
    proxy_up();
    F.initial = PUT1;
    char uri[80], proxy[80], want[80];
    snprintf(uri, sizeof uri, "https://localhost:%d", port);
    snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d", P.port);
    snprintf(want, sizeof want, "localhost:%d", port);
    for (int how = 0; how < 6; how++) {
        /* 0: the option; 1: https_proxy; 2: https_proxy, but the option "";
         * 3: a refusing proxy; 4: no proxy there; 5: a proxy that holds */
        F.connects = 0;
        P.connects = 0;
        P.mode = how == 3 ? REFUSE : how == 5 ? HOLD : TUNNEL;
        if (how == 1 || how == 2)
            setenv("https_proxy", proxy, 1);
        ld_net_config *c = fake_config();
        ck_assert_int_eq(ld_net_config_set_stream_uri(c, uri), 0);
        ck_assert_int_eq(ld_net_config_set_ca_file(c, t.ca_file), 0);
        ck_assert_int_eq(ld_net_config_set_timeouts(c, 300000, 0, 0), 0);
        if (how == 0 || how >= 3)
            ck_assert_int_eq(ld_net_config_set_proxy(c, how == 4 ? "http://127.0.0.1:1" : proxy),
                             0);
        if (how == 2)
            ck_assert_int_eq(ld_net_config_set_proxy(c, ""), 0);
        ld_synchronizer *s = stream_new(c);
        if (how <= 2) {
            ld_future_unref(expect_changes(s, LD_FDV2_INTENT_XFER_FULL, 2));
            ck_assert_int_eq(P.connects, how == 2 ? 0 : 1);
            if (how < 2)
                ck_assert_str_eq(P.target, want);
        } else if (how < 5) {
            expect_error(s, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0,
                         NULL);
            ck_assert_int_eq(F.connects, 0);
        } else {
            ld_future *n = ld_synchronizer_next(s);
            for (int i = 0; i < 100000 && P.connects == 0; i++)
                event_base_loop(B, EVLOOP_ONCE);
            ck_assert_int_eq(P.connects, 1); /* inside the CONNECT */
            ld_synchronizer_free(s);
            s = NULL;
            ld_test_wait(n);
            ck_assert_int_eq(ld_future_error(n), LD_ECANCELED);
            ld_future_unref(n);
        }
        unsetenv("https_proxy");
        ld_synchronizer_free(s);
        settle();
    }
    evconnlistener_free(P.lis);
    evhttp_free(https);
    ld_test_tls_free(&t);
}
END_TEST

/* ---- a client on top --------------------------------------------------------- */

#define PUT_BOOL                                                                  \
    "event: put\ndata: {\"data\":{\"flags\":{\"b\":{\"key\":\"b\",\"version\":1," \
    "\"on\":true,\"variations\":[false,true],\"fallthrough\":{\"variation\":1},"  \
    "\"offVariation\":0}},\"segments\":{}}}\n\n"

START_TEST(test_a_client_with_a_net_config_streams)
{
    F.initial = PUT_BOOL;
    ld_client_options *o = ld_client_options_new();
    ld_net_config *c = fake_config();
    ck_assert_int_eq(ld_client_options_set_net_config(o, c), 0);
    ck_assert_int_eq(ld_client_options_set_events(o, false), 0); /* no events service here */
    ld_net_config_free(c);
    ld_client *cl = ld_client_new(B, o);
    ld_client_options_free(o);
    ck_assert_ptr_nonnull(cl);
    ld_test_await_ok(ld_client_ready(cl));
    ld_context *ctx = ld_test_ctx_of("{\"kind\":\"user\",\"key\":\"Message\"}");
    ck_assert(ld_test_await_bool(ld_client_bool_variation(cl, "b", ctx, false)));
    /* a patch turns it off; the next evaluation sees it */
    fake_sends("event: patch\ndata: {\"path\":\"/flags/b\",\"data\":{\"key\":\"b\","
               "\"version\":2,\"on\":false,\"variations\":[false,true],\"offVariation\":0}}\n\n");
    bool v = true;
    for (int i = 0; i < 100000 && v; i++) {
        event_base_loop(B, EVLOOP_ONCE);
        v = ld_test_await_bool(ld_client_bool_variation(cl, "b", ctx, true));
    }
    ck_assert(!v);
    /* the secure mode hash uses the configuration's SDK key */
    char h[65], want[65];
    ck_assert_int_eq(ld_client_secure_mode_hash(cl, ctx, h), 0);
    ck_assert_int_eq(ld_secure_mode_hash(KEY, ctx, want), 0);
    ck_assert_str_eq(h, want);
    ck_assert_int_eq(ld_client_secure_mode_hash(cl, NULL, h), LD_EINVAL);
    ck_assert_int_eq(ld_client_secure_mode_hash(NULL, ctx, h), LD_EINVAL);
    ld_client_free(cl);
    /* without a network configuration there is no SDK key */
    cl = ld_client_new(B, NULL);
    ck_assert_int_eq(ld_client_secure_mode_hash(cl, ctx, h), LD_EINVAL);
    ld_client_free(cl);
    ld_context_unref(ctx);
    ck_assert_int_eq(ld_client_options_set_net_config(NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_client_options_set_polling(NULL, true), LD_EINVAL);
    settle();
}
END_TEST

START_TEST(test_a_client_whose_key_is_refused_is_not_ready)
{
    F.status = 401;
    ld_client_options *o = ld_client_options_new();
    ld_net_config *c = fake_config();
    ck_assert_int_eq(ld_client_options_set_net_config(o, c), 0);
    ck_assert_int_eq(ld_client_options_set_net_config(o, NULL), 0); /* removed */
    ck_assert_int_eq(ld_client_options_set_net_config(o, c), 0);
    ld_net_config_free(c);
    ld_client *cl = ld_client_new(B, o);
    ld_client_options_free(o);
    ld_test_expect_error(ld_client_ready(cl), LD_EIO, "401");
    ld_data_source_status st;
    ck_assert_int_eq(ld_client_data_source_status(cl, &st), 0);
    ck_assert_int_eq(st.state, LD_DATA_SOURCE_STATE_OFF);
    ld_client_free(cl);
    settle();
}
END_TEST

/* ---- the configuration ----------------------------------------------------- */

START_TEST(test_config_refuses_bad_values)
{
    ck_assert_ptr_null(ld_net_config_new(NULL));
    ck_assert_ptr_null(ld_net_config_new(""));
    ck_assert_ptr_null(ld_net_config_new("sdk key"));
    ck_assert_ptr_null(ld_net_config_new("sdk\nkey"));
    char *longkey = malloc(8194);
    memset(longkey, 'a', 8193);
    longkey[8193] = '\0';
    ck_assert_ptr_null(ld_net_config_new(longkey));
    longkey[8192] = '\0';
    ld_net_config *c = ld_net_config_new(longkey);
    ck_assert_ptr_nonnull(c);
    ld_net_config_free(c);
    free(longkey);

    c = ld_net_config_new(KEY);
    ck_assert_str_eq(ld_net_config_stream_uri(c), LD_DEFAULT_STREAM_URI);
    ck_assert_str_eq(ld_net_config_base_uri(c), LD_DEFAULT_BASE_URI);
    ck_assert_str_eq(ld_net_config_events_uri(c), LD_DEFAULT_EVENTS_URI);
    ck_assert_int_eq(ld_net_config_set_stream_uri(c, "ftp://x"), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_stream_uri(c, "http://"), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_stream_uri(c, "https:///x"), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_stream_uri(c, "http://a b"), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_stream_uri(c, "http://127.0.0.1:99999"), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_stream_uri(c, "http://[::1"), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_events_uri(c, "http://[::1]:8030/x"), 0);
    ck_assert_str_eq(ld_net_config_stream_uri(c), LD_DEFAULT_STREAM_URI); /* unchanged */
    ck_assert_int_eq(ld_net_config_set_base_uri(c, "http://relay:8030/ld//"), 0);
    ck_assert_str_eq(ld_net_config_base_uri(c), "http://relay:8030/ld");
    ck_assert_int_eq(ld_net_config_set_base_uri(c, NULL), 0);
    ck_assert_str_eq(ld_net_config_base_uri(c), LD_DEFAULT_BASE_URI);
    ck_assert_int_eq(ld_net_config_set_events_uri(c, "https://e.example"), 0);
    ck_assert_str_eq(ld_net_config_events_uri(c), "https://e.example");
    ck_assert_int_eq(ld_net_config_set_payload_filter(c, ""), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_payload_filter(c, "a&b"), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_payload_filter(c, NULL), 0);
    ck_assert_int_eq(ld_net_config_set_application(c, "", NULL), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_application(c, "a b", NULL), LD_EINVAL);
    char v65[66];
    memset(v65, 'v', 65);
    v65[65] = '\0';
    ck_assert_int_eq(ld_net_config_set_application(c, "app", v65), LD_EINVAL);
    v65[64] = '\0';
    ck_assert_int_eq(ld_net_config_set_application(c, "app", v65), 0);
    ck_assert_int_eq(ld_net_config_set_wrapper(c, NULL, "1.0"), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_wrapper(c, "a/b", NULL), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_wrapper(c, "w\r\nX: y", NULL), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_wrapper(c, "w", "1\n"), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_ca_file(c, ""), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_proxy(c, "http://p :1"), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_proxy(c, ""), 0);
    ck_assert_int_eq(ld_net_config_set_timeouts(c, 86400001, 0, 0), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_timeouts(c, 0, 0, 0), 0);
    ck_assert_int_eq(ld_net_config_set_reconnect_delay(c, -1), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_poll_interval(c, 0), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_poll_interval(c, 1000), 0);
    ck_assert_int_eq(c->poll_ms, 30000);
    ck_assert(ld_net_config_verify_peer(c));
    ck_assert_int_eq(ld_net_config_set_verify_peer(c, false), 0);
    ck_assert(!ld_net_config_verify_peer(c));

    ld_net_config *d = ld_net_config_copy(c);
    ck_assert_ptr_nonnull(d);
    ck_assert_str_eq(ld_net_config_instance_id(d), ld_net_config_instance_id(c));
    ck_assert_str_eq(ld_net_config_sdk_key(d), KEY);
    ck_assert_ptr_ne(ld_net_config_sdk_key(d), ld_net_config_sdk_key(c));
    ld_net_config_free(d);
    ld_net_config *e = ld_net_config_new(KEY);
    ck_assert_str_ne(ld_net_config_instance_id(e), ld_net_config_instance_id(c));
    ld_net_config_free(e);
    ld_net_config_free(c);

    /* NULL everywhere */
    ck_assert_ptr_null(ld_net_config_copy(NULL));
    ld_net_config_free(NULL);
    ck_assert_int_eq(ld_net_config_set_stream_uri(NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_base_uri(NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_events_uri(NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_payload_filter(NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_application(NULL, NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_wrapper(NULL, NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_ca_file(NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_verify_peer(NULL, true), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_proxy(NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_timeouts(NULL, 0, 0, 0), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_reconnect_delay(NULL, 0), LD_EINVAL);
    ck_assert_int_eq(ld_net_config_set_poll_interval(NULL, 30000), LD_EINVAL);
    ck_assert_ptr_null(ld_net_config_sdk_key(NULL));
    ck_assert_ptr_null(ld_net_config_stream_uri(NULL));
    ck_assert_ptr_null(ld_net_config_base_uri(NULL));
    ck_assert_ptr_null(ld_net_config_events_uri(NULL));
    ck_assert_ptr_null(ld_net_config_instance_id(NULL));
    ck_assert(ld_net_config_verify_peer(NULL));
    ck_assert_ptr_null(ld_streaming_synchronizer_new(NULL, NULL));
    ck_assert_ptr_null(ld_streaming_synchronizer_new(B, NULL));
}
END_TEST

/* ---- allocation failures --------------------------------------------------- */

/* Every allocation of the library's failing in turn (libcurl's are spared:
 * libcurl 7.88 crashes when one of a transfer's fails, dividing by zero in
 * a hash, see net-internal.h) while a stream is made, connects, takes a put, a patch and a delete:
 * NULL, or errors reported as updates, or the data; never a crash or a
 * leak (ASan). */
START_TEST(test_allocation_failures)
{
    F.initial = PUT1 "event: patch\ndata: {\"path\":\"/flags/f1\",\"data\":{\"version\":5}}\n\n"
                     "event: delete\ndata: {\"path\":\"/flags/f1\",\"version\":6}\n\n";
    ld_net_config *c = fake_config();
    __atomic_store_n(&ld__http_spare_curl, true, __ATOMIC_RELAXED);
    for (long n = 1;; n++) {
        CHAOS_BEGIN(n);
        ld_synchronizer *s = ld_streaming_synchronizer_new(B, c);
        int valid = 0;
        for (int i = 0; s && i < 6 && valid < 3; i++) {
            ld_future *f = ld_synchronizer_next(s);
            for (int k = 0; k < 20000 && ld_future_is_pending(f); k++)
                event_base_loop(B, EVLOOP_ONCE);
            ck_assert(!ld_future_is_pending(f));
            const ld_fdv2_update *u = ld_fdv2_future_update(f);
            if (u && ld_fdv2_update_state(u) == LD_DATA_SOURCE_STATE_VALID)
                valid++;
            ld_future_unref(f);
        }
        bool failed = chaos_end(n);
        ld_synchronizer_free(s);
        run_ms(1);
        if (!failed) {
            ck_assert_int_eq(valid, 3);
            break;
        }
    }
    __atomic_store_n(&g_fail_at, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&ld__http_spare_curl, false, __ATOMIC_RELAXED);
    ld_net_config_free(c);
}
END_TEST

Suite *ld_suite_streaming(void)
{
    Suite *s = suite_create("streaming");
    TCase *tc = tcase_create("fdv1");
    tcase_add_checked_fixture(tc, fake_up, fake_down);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_headers_and_url_are_those_of_the_sdks);
    tcase_add_test(tc, test_no_connection_before_the_first_next);
    tcase_add_test(tc, test_put_patch_delete_of_both_kinds);
    tcase_add_test(tc, test_events_split_at_every_byte);
    tcase_add_test(tc, test_a_big_put_then_a_patch_keep_their_order);
    tcase_add_test(tc, test_a_big_malformed_put_restarts_the_stream);
    tcase_add_test(tc, test_recoverable_statuses_retry);
    tcase_add_test(tc, test_unrecoverable_statuses_turn_it_off);
    tcase_add_test(tc, test_malformed_events_restart_the_stream);
    tcase_add_test(tc, test_not_an_event_stream_is_invalid_data);
    tcase_add_test(tc, test_a_stream_the_server_ends_reconnects);
    tcase_add_test(tc, test_refresh_reconnects_for_a_new_put);
    tcase_add_test(tc, test_a_stalled_stream_times_out_and_reconnects);
    tcase_add_test(tc, test_a_server_that_never_answers_times_out);
    tcase_add_test(tc, test_a_refused_connection_is_a_network_error);
    tcase_add_test(tc, test_a_missing_ca_file_fails_each_connection);
    tcase_add_test(tc, test_updates_queue_until_taken);
    tcase_add_test(tc, test_an_overfull_queue_restarts_the_stream);
    tcase_add_test(tc, test_many_reconnections_leak_nothing);
    tcase_add_test(tc, test_stop_while_connecting_and_free);
    tcase_add_test(tc, test_free_while_connecting);
    tcase_add_test(tc, test_free_and_stop_during_a_big_put_s_parse);
    tcase_add_test(tc, test_free_from_inside_a_next_s_callback);
    tcase_add_test(tc, test_a_data_system_is_fed_by_the_stream);
    tcase_add_test(tc, test_a_refused_key_rejects_ready_with_the_status);
    tcase_add_test(tc, test_tls_custom_ca_refusal_and_verification_off);
    tcase_add_test(tc, test_through_a_connect_proxy);
    tcase_add_test(tc, test_a_client_with_a_net_config_streams);
    tcase_add_test(tc, test_a_client_whose_key_is_refused_is_not_ready);
    tcase_add_test(tc, test_config_refuses_bad_values);
    tcase_add_test(tc, test_allocation_failures);
    suite_add_tcase(s, tc);
    return s;
}
