/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Delivery of event payloads (lib/events/sender.c) to a local events
 * service (an evhttp server in the test's loop): the paths and headers of
 * analytics and diagnostic posts, the body as given, the Date kept, one
 * retry with the same payload ID after a recoverable status or a network
 * error, 413 dropping one payload, 401 and 403 stopping all sending, and
 * free with posts under way or waiting to retry.
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
#include <event2/listener.h>

#include <ldasync/alloc.h>
#include <ldasync/error.h>
#include <ldasync/events.h>
#include <ldasync/network.h>

#include "check_fail_alloc.h"
#include "check_receiver.h"
#include "check_suites.h"
#include "check_util.h"
#include "core/core-internal.h"
#include "events/events-internal.h"
#include "net/net-internal.h"

#define B ld_test_base
#define KEY "sdk-events-key"
static void events_up(void)
{
    ld_test_setup();
    signal(SIGPIPE, SIG_IGN);
    evr_start();
}

static void events_down(void)
{
    evr_stop();
    ld_test_teardown();
}

/* A sender to the local service (or to `url`), retrying after 20 ms. */
static struct ld__ev_sender *sender_to(const char *url)
{
    ld_net_config *c = ld_net_config_new(KEY);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(ld_net_config_set_events_uri(c, url ? url : evr.url), 0);
    struct ld__ev_sender *s = ld__ev_sender_new(B, c, 20);
    ld_net_config_free(c);
    ck_assert_ptr_nonnull(s);
    return s;
}

static char *copy(const char *s)
{
    char *c = ld__strdup(s);
    ck_assert_ptr_nonnull(c);
    return c;
}

/* Posts `body` and waits: the bool it was fulfilled with. */
static bool post_wait(struct ld__ev_sender *s, enum ld__ev_payload kind, const char *body,
                      bool gzip)
{
    return ld_test_await_bool(ld__ev_sender_post(s, kind, copy(body), strlen(body), gzip));
}

START_TEST(test_analytics_post_has_the_sdks_headers_and_the_body)
{
    struct ld__ev_sender *s = sender_to(NULL);
    ck_assert_int_eq(ld__ev_sender_server_time(s), 0);
    ck_assert(post_wait(s, LD__EV_ANALYTICS, "[{\"kind\":\"identify\"}]", false));
    ck_assert_int_eq(evr.n, 1);
    struct evr_seen *e = &evr.seen[0];
    ck_assert_str_eq(e->path, "/bulk");
    ck_assert_str_eq(e->auth, KEY);
    ck_assert_str_eq(e->ctype, "application/json");
    ck_assert_str_eq(e->schema, "4");
    ck_assert_uint_eq(strlen(e->payload_id), 36);
    ck_assert_str_eq(e->encoding, "");
    ck_assert_str_eq(e->body, "[{\"kind\":\"identify\"}]");
    ck_assert(strncmp(e->agent, "ldasync/", 8) == 0);
    /* Tue, 01 Dec 2026 10:20:30 GMT */
    ck_assert_int_eq(ld__ev_sender_server_time(s), INT64_C(1796120430) * 1000);
    ck_assert_uint_eq(ld__ev_sender_pending(s), 0);
    /* each payload its own ID */
    ck_assert(post_wait(s, LD__EV_ANALYTICS, "[]", false));
    ck_assert_str_ne(evr.seen[1].payload_id, evr.seen[0].payload_id);
    ck_assert(!ld__ev_sender_stopped(s));
    ld__ev_sender_free(s);
}
END_TEST

START_TEST(test_diagnostic_post_has_no_schema_nor_payload_id)
{
    struct ld__ev_sender *s = sender_to(NULL);
    ck_assert(post_wait(s, LD__EV_DIAGNOSTIC, "{\"kind\":\"diagnostic\"}", true));
    ck_assert_str_eq(evr.seen[0].path, "/diagnostic");
    ck_assert_str_eq(evr.seen[0].schema, "");
    ck_assert_str_eq(evr.seen[0].payload_id, "");
    ck_assert_str_eq(evr.seen[0].encoding, "gzip");
    ck_assert_str_eq(evr.seen[0].body, "{\"kind\":\"diagnostic\"}");
    ld__ev_sender_free(s);
}
END_TEST

START_TEST(test_a_recoverable_status_is_retried_once_with_the_same_payload_id)
{
    static const int recoverable[] = {400, 408, 429, 500, 503};
    for (size_t i = 0; i < sizeof recoverable / sizeof recoverable[0]; i++) {
        evr.n = 0;
        evr.nstatuses = 1;
        evr.statuses[0] = recoverable[i];
        struct ld__ev_sender *s = sender_to(NULL);
        ck_assert(post_wait(s, LD__EV_ANALYTICS, "[1]", false));
        ck_assert_int_eq(evr.n, 2);
        ck_assert_str_eq(evr.seen[1].payload_id, evr.seen[0].payload_id);
        ck_assert_str_eq(evr.seen[1].body, "[1]");
        /* twice: dropped, and sending goes on */
        evr.n = 0;
        evr.nstatuses = 2;
        evr.statuses[1] = recoverable[i];
        ck_assert(!post_wait(s, LD__EV_ANALYTICS, "[2]", false));
        ck_assert_int_eq(evr.n, 2);
        ck_assert(!ld__ev_sender_stopped(s));
        ck_assert(post_wait(s, LD__EV_ANALYTICS, "[3]", false));
        ld__ev_sender_free(s);
    }
}
END_TEST

START_TEST(test_401_and_403_stop_all_sending_413_drops_one_payload)
{
    static const int stopping[] = {401, 403, 404, 405};
    for (size_t i = 0; i < sizeof stopping / sizeof stopping[0]; i++) {
        evr.n = 0;
        evr.nstatuses = 1;
        evr.statuses[0] = stopping[i];
        struct ld__ev_sender *s = sender_to(NULL);
        ck_assert(!post_wait(s, LD__EV_ANALYTICS, "[1]", false));
        ck_assert_int_eq(evr.n, 1); /* no retry */
        ck_assert(ld__ev_sender_stopped(s));
        ck_assert(!post_wait(s, LD__EV_DIAGNOSTIC, "{}", false));
        ck_assert_int_eq(evr.n, 1); /* nothing more is sent */
        ld__ev_sender_free(s);
    }
    evr.n = 0;
    evr.statuses[0] = 413;
    struct ld__ev_sender *s = sender_to(NULL);
    ck_assert(!post_wait(s, LD__EV_ANALYTICS, "[1]", false));
    ck_assert_int_eq(evr.n, 1);
    ck_assert(!ld__ev_sender_stopped(s));
    ck_assert(post_wait(s, LD__EV_ANALYTICS, "[2]", false));
    ld__ev_sender_free(s);
}
END_TEST

START_TEST(test_a_diagnostic_401_stops_nothing)
{
    evr.nstatuses = 1;
    evr.statuses[0] = 401;
    struct ld__ev_sender *s = sender_to(NULL);
    ck_assert(!post_wait(s, LD__EV_DIAGNOSTIC, "{}", false));
    ck_assert(!ld__ev_sender_stopped(s));
    ck_assert(post_wait(s, LD__EV_ANALYTICS, "[]", false));
    ld__ev_sender_free(s);
}
END_TEST

static bool relay_wait(struct ld__ev_sender *s, const char *path, const char *const *lines,
                       const char *body)
{
    return ld_test_await_bool(
        ld__ev_sender_send(s, LD__EV_RELAY, path, lines, copy(body), strlen(body)));
}

START_TEST(test_a_relays_post_passes_the_sdks_lines_and_stops_nothing)
{
    struct ld__ev_sender *s = sender_to(NULL);
    const char *lines[] = {"Content-Type: application/json",  "X-LaunchDarkly-Event-Schema: 4",
                           "X-LaunchDarkly-Payload-ID: 0f0e", "Content-Encoding: gzip",
                           "User-Agent: NodeJSClient/9.13.7", NULL};
    ck_assert(relay_wait(s, "/bulk", lines, "[{}]"));
    struct evr_seen *e = &evr.seen[0];
    ck_assert_str_eq(e->path, "/bulk");
    ck_assert_str_eq(e->auth, KEY);
    ck_assert_str_eq(e->schema, "4");
    ck_assert_str_eq(e->payload_id, "0f0e");
    ck_assert_str_eq(e->encoding, "gzip");
    ck_assert_str_eq(e->agent, "NodeJSClient/9.13.7");
    ck_assert_str_eq(e->body, "[{}]");
    /* the SDK's Authorization passed on (a mobile key), ours then absent */
    const char *mobile[] = {"Authorization: mob-123", NULL};
    ck_assert(relay_wait(s, "/mobile", mobile, "[]"));
    ck_assert_str_eq(evr.seen[1].path, "/mobile");
    ck_assert_str_eq(evr.seen[1].auth, "mob-123");
    ck_assert_str_eq(evr.seen[1].agent, "");
    /* a 401 of a relayed post stops nothing; relayed posts go on once
     * analytics stopped */
    evr.nstatuses = 4;
    evr.statuses[2] = 401;
    ck_assert(!relay_wait(s, "/mobile", mobile, "[]"));
    ck_assert(!ld__ev_sender_stopped(s));
    evr.statuses[3] = 401;
    ck_assert(!post_wait(s, LD__EV_ANALYTICS, "[]", false));
    ck_assert(ld__ev_sender_stopped(s));
    ck_assert(relay_wait(s, "/events/bulk/env-1", NULL, "[]"));
    ck_assert_str_eq(evr.seen[4].path, "/events/bulk/env-1");
    ck_assert_ptr_null(ld__ev_sender_send(s, LD__EV_RELAY, NULL, NULL, copy("x"), 1));
    ld__ev_sender_free(s);
}
END_TEST

static int g_accepts;

static void accept_and_close(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *a,
                             int len, void *arg)
{
    (void)l, (void)a, (void)len, (void)arg;
    g_accepts++;
    evutil_closesocket(fd);
}

START_TEST(test_a_network_error_is_retried_once)
{
    /* a service that closes every connection at once */
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct evconnlistener *l = evconnlistener_new_bind(
        B, accept_and_close, NULL, LEV_OPT_CLOSE_ON_FREE, -1, (struct sockaddr *)&sin, sizeof sin);
    ck_assert_ptr_nonnull(l);
    socklen_t len = sizeof sin;
    ck_assert_int_eq(getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&sin, &len), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(sin.sin_port));
    g_accepts = 0;
    struct ld__ev_sender *s = sender_to(url);
    ck_assert(!post_wait(s, LD__EV_ANALYTICS, "[1]", false));
    ck_assert_int_eq(g_accepts, 2);
    ck_assert(!ld__ev_sender_stopped(s));
    ld__ev_sender_free(s);
    evconnlistener_free(l);
}
END_TEST

START_TEST(test_free_with_posts_under_way_or_waiting_to_retry)
{
    struct ld__ev_sender *s = sender_to(NULL);
    evr.hold = true;
    ld_future *f1 = ld__ev_sender_post(s, LD__EV_ANALYTICS, copy("[1]"), 3, false);
    for (int i = 0; i < 2000 && evr.n < 1; i++)
        event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ck_assert_int_eq(evr.n, 1);
    ck_assert_uint_eq(ld__ev_sender_pending(s), 1);
    ld__ev_sender_free(s);
    ld_test_expect_error(f1, LD_ECANCELED, NULL);

    /* waiting for its retry */
    evr.hold = false;
    evr.n = 0;
    evr.nstatuses = 1;
    evr.statuses[0] = 503;
    s = sender_to(NULL);
    ld_future *f2 = ld__ev_sender_post(s, LD__EV_ANALYTICS, copy("[2]"), 3, false);
    for (int i = 0; i < 2000 && evr.n < 1; i++)
        event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ck_assert_int_eq(evr.n, 1);
    ld__ev_sender_free(s);
    ld_test_expect_error(f2, LD_ECANCELED, NULL);
}
END_TEST

static void free_sender_cb(ld_future *f, void *arg)
{
    (void)f;
    ld__ev_sender_free(arg);
}

START_TEST(test_free_from_a_posts_callback_with_another_pending)
{
    struct ld__ev_sender *s = sender_to(NULL);
    ld_future *f1 = ld__ev_sender_post(s, LD__EV_ANALYTICS, copy("[1]"), 3, false);
    evr.nstatuses = 1;
    evr.statuses[0] = 500; /* the other waits for its retry when the sender goes */
    ld_future *f2 = ld__ev_sender_post(s, LD__EV_ANALYTICS, copy("[2]"), 3, false);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f1), free_sender_cb, s), 0);
    ld_test_wait(f1);
    ck_assert(ld_future_is_fulfilled(f1));
    ld_future_unref(f1);
    ld_test_wait(f2);
    ck_assert(ld_future_is_rejected(f2) || ld_future_bool(f2));
    ld_future_unref(f2);
    for (int i = 0; i < 100; i++) /* the callback ran: nothing of the sender is left */
        event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    /* a NULL sender */
    char *body = copy("[]");
    ck_assert_ptr_null(ld__ev_sender_post(NULL, LD__EV_ANALYTICS, body, 2, false));
    ck_assert_ptr_null(ld__ev_sender_new(NULL, NULL, 0));
    ld__ev_sender_free(NULL);
}
END_TEST

START_TEST(test_allocation_failures)
{
    ld_net_config *c = ld_net_config_new(KEY);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(ld_net_config_set_events_uri(c, evr.url), 0);
    __atomic_store_n(&ld__http_spare_curl, true, __ATOMIC_RELAXED);
    for (long n = 1;; n++) {
        evr.n = 0;
        evr.nstatuses = 1;
        evr.statuses[0] = 500; /* the first post is retried */
        char *b1 = copy("[1]"), *b2 = copy("{}");
        CHAOS_BEGIN(n);
        struct ld__ev_sender *s = ld__ev_sender_new(B, c, 1);
        ld_future *f1 = s ? ld__ev_sender_post(s, LD__EV_ANALYTICS, b1, 3, false) : NULL;
        ld_future *f2 = s ? ld__ev_sender_post(s, LD__EV_DIAGNOSTIC, b2, 2, true) : NULL;
        if (!s) {
            free(b1);
            free(b2);
        }
        bool ok = s != NULL;
        ld_future *fs[] = {f1, f2};
        for (int i = 0; i < 2 && s; i++) {
            ck_assert_ptr_nonnull(fs[i]);
            for (int k = 0; k < 20000 && ld_future_is_pending(fs[i]); k++)
                event_base_loop(B, EVLOOP_ONCE);
            ck_assert(!ld_future_is_pending(fs[i]));
            if (ld_future_is_rejected(fs[i]))
                ck_assert_int_eq(ld_future_error(fs[i]), LD_ENOMEM);
            ok = ok && ld_future_is_fulfilled(fs[i]) && ld_future_bool(fs[i]);
            ld_future_unref(fs[i]);
        }
        bool failed = chaos_end(n);
        ld__ev_sender_free(s);
        if (!failed) {
            ck_assert(ok);
            ck_assert_int_eq(evr.n, 3);
            break;
        }
    }
    __atomic_store_n(&ld__http_spare_curl, false, __ATOMIC_RELAXED);
    ld_net_config_free(c);
}
END_TEST

/* ---- the event forwarder (events.h) -------------------------------------- */

static ld_event_forwarder *forwarder_to(const char *url, int64_t max)
{
    ld_net_config *c = ld_net_config_new(KEY);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(ld_net_config_set_events_uri(c, url ? url : evr.url), 0);
    ld_event_forwarder *fw = ld_event_forwarder_new(B, c, max);
    ld_net_config_free(c);
    ck_assert_ptr_nonnull(fw);
    return fw;
}

static void run_until_seen(int n)
{
    for (int i = 0; i < 5000 && evr.n < n; i++)
        event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ck_assert_int_eq(evr.n, n);
}

static ld_event_forwarder_stats stats_of(const ld_event_forwarder *fw)
{
    ld_event_forwarder_stats st;
    ck_assert_int_eq(ld_event_forwarder_stats_get(fw, &st), 0);
    return st;
}

START_TEST(test_forwarder_refuses_bad_input)
{
    ld_net_config *c = ld_net_config_new(KEY);
    ck_assert_ptr_null(ld_event_forwarder_new(NULL, c, 0));
    ck_assert_ptr_null(ld_event_forwarder_new(B, NULL, 0));
    ld_net_config_free(c);
    ck_assert_int_eq(ld_event_forwarder_post(NULL, "/bulk", NULL, "[]", 2), LD_EINVAL);
    ck_assert_int_eq(ld_event_forwarder_stats_get(NULL, NULL), LD_EINVAL);
    ck_assert_ptr_null(ld_event_forwarder_close(NULL));
    ld_event_forwarder_free(NULL);
    ld_event_forwarder *fw = forwarder_to(NULL, 0);
    ck_assert_int_eq(ld_event_forwarder_post(fw, NULL, NULL, "[]", 2), LD_EINVAL);
    ck_assert_int_eq(ld_event_forwarder_post(fw, "bulk", NULL, "[]", 2), LD_EINVAL);
    ck_assert_int_eq(ld_event_forwarder_post(fw, "/bulk", NULL, NULL, 2), LD_EINVAL);
    ck_assert_int_eq(ld_event_forwarder_post(fw, "/bulk", NULL, "[]", 0), LD_EINVAL);
    ck_assert_int_eq(ld_event_forwarder_stats_get(fw, NULL), LD_EINVAL);
    ld_event_forwarder_stats st = stats_of(fw);
    ck_assert(st.forwarded == 0 && st.dropped == 0 && st.refused == 0 && st.queued == 0);
    ld_event_forwarder_free(fw);
}
END_TEST

START_TEST(test_forwarder_passes_the_payload_and_its_lines_unchanged)
{
    ld_event_forwarder *fw = forwarder_to(NULL, 0);
    static const unsigned char gz[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x0a, 0xff, 0x00, 0x01};
    const char *h[] = {"Content-Type: application/json",
                       "content-encoding: gzip",
                       "X-LaunchDarkly-Event-Schema: 4",
                       "X-LaunchDarkly-Payload-ID: 5d1c",
                       "User-Agent: NodeJSClient/9.13.7",
                       "Cookie: secret",
                       "Host: relay.example",
                       NULL};
    ck_assert_int_eq(ld_event_forwarder_post(fw, "/bulk", h, gz, sizeof gz), 0);
    const char *m[] = {"Authorization: mob-key-1", NULL};
    ck_assert_int_eq(ld_event_forwarder_post(fw, "/mobile", m, "[1]", 3), 0);
    ld_test_await_ok(ld_event_forwarder_close(fw));
    ck_assert_int_eq(evr.n, 2);
    struct evr_seen *b = evr.seen[0].path[1] == 'b' ? &evr.seen[0] : &evr.seen[1];
    struct evr_seen *mo = b == &evr.seen[0] ? &evr.seen[1] : &evr.seen[0];
    ck_assert_str_eq(b->path, "/bulk");
    ck_assert_str_eq(b->auth, KEY);
    ck_assert_str_eq(b->encoding, "gzip");
    ck_assert_str_eq(b->schema, "4");
    ck_assert_str_eq(b->payload_id, "5d1c");
    ck_assert_str_eq(b->agent, "NodeJSClient/9.13.7");
    ck_assert_str_eq(b->cookie, "");
    ck_assert_uint_eq(b->body_len, sizeof gz);
    ck_assert(memcmp(b->body, gz, sizeof gz) == 0);
    ck_assert_str_eq(mo->path, "/mobile");
    ck_assert_str_eq(mo->auth, "mob-key-1");
    ld_event_forwarder_stats st = stats_of(fw);
    ck_assert(st.forwarded == 2 && st.dropped == 0 && st.queued == 0 && st.bytes == 0);
    ck_assert_int_eq(ld_event_forwarder_post(fw, "/bulk", NULL, "[]", 2), LD_ECLOSED);
    ld_test_await_ok(ld_event_forwarder_close(fw)); /* again */
    ld_event_forwarder_free(fw);
}
END_TEST

START_TEST(test_forwarder_holds_at_most_its_bound_and_five_posts_at_once)
{
    evr.hold = true;
    ld_event_forwarder *fw = forwarder_to(NULL, 16 * 1024);
    char body[1000];
    memset(body, 'x', sizeof body);
    /* each counts 2024 bytes: 8 fit in 16 KiB */
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(ld_event_forwarder_post(fw, "/bulk", NULL, body, sizeof body), 0);
    ck_assert_int_eq(ld_event_forwarder_post(fw, "/bulk", NULL, body, sizeof body), LD_EBUSY);
    run_until_seen(5);
    for (int i = 0; i < 50; i++)
        event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ck_assert_int_eq(evr.n, 5); /* five at once */
    ld_event_forwarder_stats st = stats_of(fw);
    ck_assert(st.queued == 8 && st.refused == 1 && st.bytes == 8 * 2024);
    evr.hold = false;
    evr_release_held();
    ld_future *closed = ld_event_forwarder_close(fw);
    ld_test_await_ok(closed);
    ck_assert_int_eq(evr.n, 8);
    st = stats_of(fw);
    ck_assert(st.forwarded == 8 && st.queued == 0 && st.bytes == 0);
    ld_event_forwarder_free(fw);
}
END_TEST

START_TEST(test_forwarder_memory_stays_bounded_with_a_service_that_never_answers)
{
    evr.hold = true;
    ld_event_forwarder *fw = forwarder_to(NULL, 1024 * 1024);
    char body[4096];
    memset(body, 'y', sizeof body);
    long before = 0;
    int refused = 0;
    for (int i = 0; i < 20000; i++) {
        if (i == 1000)
            before = ld_test_rss_kb();
        int rc = ld_event_forwarder_post(fw, "/bulk", NULL, body, sizeof body);
        ck_assert(rc == 0 || rc == LD_EBUSY);
        refused += rc == LD_EBUSY;
        if (i % 100 == 0)
            event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    }
    long after = ld_test_rss_kb();
    ld_event_forwarder_stats st = stats_of(fw);
    ck_assert_uint_le(st.bytes, 1024 * 1024);
    ck_assert_int_gt(refused, 19000);
    ck_assert_uint_eq(st.refused, (uint64_t)refused);
    /* the bound is the forwarder's; RSS also counts what sanitizers and
     * valgrind keep, so it is checked in plain builds */
    if (before > 0 && after > 0 && !LD_TEST_SANITIZED && !getenv("LDASYNC_VALGRIND"))
        ck_assert_msg(after - before < 4096, "RSS grew by %ld kB", after - before);
    /* freed with posts waiting and under way, a close pending */
    ld_future *closed = ld_event_forwarder_close(fw);
    ld_event_forwarder_free(fw);
    ld_test_expect_error(closed, LD_ECANCELED, NULL);
}
END_TEST

START_TEST(test_forwarder_drops_what_the_service_refuses)
{
    evr.nstatuses = 2;
    evr.statuses[0] = 401; /* not retried: dropped */
    evr.statuses[1] = 503; /* retried after a second: taken */
    ld_event_forwarder *fw = forwarder_to(NULL, 0);
    ck_assert_int_eq(ld_event_forwarder_post(fw, "/bulk", NULL, "[1]", 3), 0);
    run_until_seen(1);
    ck_assert_int_eq(ld_event_forwarder_post(fw, "/bulk", NULL, "[2]", 3), 0);
    ld_test_await_ok(ld_event_forwarder_close(fw));
    ck_assert_int_eq(evr.n, 3);
    ld_event_forwarder_stats st = stats_of(fw);
    ck_assert_msg(st.forwarded == 1 && st.dropped == 1, "forwarded %llu dropped %llu",
                  (unsigned long long)st.forwarded, (unsigned long long)st.dropped);
    ld_event_forwarder_free(fw);
}
END_TEST

START_TEST(test_forwarder_allocation_failures)
{
    ld_net_config *c = ld_net_config_new(KEY);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(ld_net_config_set_events_uri(c, evr.url), 0);
    const char *h[] = {"Content-Type: application/json", "X-LaunchDarkly-Event-Schema: 4", NULL};
    __atomic_store_n(&ld__http_spare_curl, true, __ATOMIC_RELAXED);
    for (long n = 1;; n++) {
        evr.n = 0;
        CHAOS_BEGIN(n);
        ld_event_forwarder *fw = ld_event_forwarder_new(B, c, 0);
        int queued = 0;
        for (int i = 0; fw && i < 3; i++) {
            int rc = ld_event_forwarder_post(fw, i == 2 ? "/mobile" : "/bulk", h, "[]", 2);
            ck_assert(rc == 0 || rc == LD_ENOMEM);
            queued += rc == 0;
        }
        ld_future *closed = fw ? ld_event_forwarder_close(fw) : NULL;
        if (closed) {
            for (int k = 0; k < 20000 && ld_future_is_pending(closed); k++)
                event_base_loop(B, EVLOOP_ONCE);
            ck_assert(!ld_future_is_pending(closed));
            if (ld_future_is_rejected(closed))
                ck_assert_int_eq(ld_future_error(closed), LD_ENOMEM);
            ld_future_unref(closed);
        }
        ld_event_forwarder_stats st = {0};
        if (fw)
            ld_event_forwarder_stats_get(fw, &st);
        bool failed = chaos_end(n);
        ld_event_forwarder_free(fw);
        if (!failed) {
            ck_assert_int_eq(queued, 3);
            ck_assert_uint_eq(st.forwarded, 3);
            ck_assert_int_eq(evr.n, 3);
            break;
        }
        ck_assert_uint_eq(st.forwarded + st.dropped + st.queued, (uint64_t)queued);
    }
    __atomic_store_n(&ld__http_spare_curl, false, __ATOMIC_RELAXED);
    ld_net_config_free(c);
}
END_TEST

Suite *ld_suite_event_forwarder(void)
{
    Suite *s = suite_create("event_forwarder");
    TCase *tc = tcase_create("forwarding");
    tcase_add_checked_fixture(tc, events_up, events_down);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_forwarder_refuses_bad_input);
    tcase_add_test(tc, test_forwarder_passes_the_payload_and_its_lines_unchanged);
    tcase_add_test(tc, test_forwarder_holds_at_most_its_bound_and_five_posts_at_once);
    tcase_add_test(tc, test_forwarder_memory_stays_bounded_with_a_service_that_never_answers);
    tcase_add_test(tc, test_forwarder_drops_what_the_service_refuses);
    tcase_add_test(tc, test_forwarder_allocation_failures);
    suite_add_tcase(s, tc);
    return s;
}

Suite *ld_suite_event_sender(void)
{
    Suite *s = suite_create("event_sender");
    TCase *tc = tcase_create("delivery");
    tcase_add_checked_fixture(tc, events_up, events_down);
    tcase_add_test(tc, test_analytics_post_has_the_sdks_headers_and_the_body);
    tcase_add_test(tc, test_diagnostic_post_has_no_schema_nor_payload_id);
    tcase_add_test(tc, test_a_recoverable_status_is_retried_once_with_the_same_payload_id);
    tcase_add_test(tc, test_401_and_403_stop_all_sending_413_drops_one_payload);
    tcase_add_test(tc, test_a_network_error_is_retried_once);
    tcase_add_test(tc, test_a_diagnostic_401_stops_nothing);
    tcase_add_test(tc, test_a_relays_post_passes_the_sdks_lines_and_stops_nothing);
    suite_add_tcase(s, tc);

    tc = tcase_create("free");
    tcase_add_checked_fixture(tc, events_up, events_down);
    tcase_add_test(tc, test_free_with_posts_under_way_or_waiting_to_retry);
    tcase_add_test(tc, test_free_from_a_posts_callback_with_another_pending);
    tcase_add_test(tc, test_allocation_failures);
    suite_add_tcase(s, tc);
    return s;
}
