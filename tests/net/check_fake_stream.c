/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The fake LaunchDarkly stream of the network suites (check_fake_stream.h).
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

#include <ldasync/error.h>

#include "check_fake_stream.h"
#include "check_util.h"
#include "net/net-internal.h"

#define B ld_test_base

/* ---- the fake LaunchDarkly stream -------------------------------------- */

struct fake F;

static void copy_header(struct evhttp_request *req, const char *name, char *out, size_t n)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), name);
    snprintf(out, n, "%s", v ? v : "");
}

/* The client closed the connection of an unfinished request (`arg`: the
 * slot that holds it): libevent has detached the request, which is ours to
 * free then. */
static void live_closed(struct evhttp_connection *c, void *arg)
{
    (void)c;
    struct evhttp_request **slot = arg;
    if (*slot && evhttp_request_get_connection(*slot) == NULL)
        evhttp_request_free(*slot);
    *slot = NULL;
}

void fake_serve(struct evhttp_request *req, void *arg)
{
    (void)arg;
    snprintf(F.uri, sizeof F.uri, "%s", evhttp_request_get_uri(req));
    copy_header(req, "Authorization", F.auth, sizeof F.auth);
    copy_header(req, "User-Agent", F.agent, sizeof F.agent);
    copy_header(req, "X-LaunchDarkly-Tags", F.tags, sizeof F.tags);
    copy_header(req, "X-LaunchDarkly-Wrapper", F.wrapper, sizeof F.wrapper);
    copy_header(req, "X-LaunchDarkly-Instance-Id", F.instance, sizeof F.instance);
    copy_header(req, "Accept", F.accept, sizeof F.accept);
    copy_header(req, "Cache-Control", F.cache, sizeof F.cache);
    if (strncmp(F.uri, "/all", 4) != 0) {
        evhttp_send_error(req, 404, NULL);
        return;
    }
    F.connects++;
    if (F.hold) {
        F.held = req;
        evhttp_connection_set_closecb(evhttp_request_get_connection(req), live_closed, &F.held);
        return;
    }
    bool bad = F.connects <= F.bad;
    int status = bad && F.bad_status ? F.bad_status : F.status;
    const char *initial = bad && F.bad_initial ? F.bad_initial : F.initial;
    const char *ctype = bad && F.bad_ctype ? F.bad_ctype : F.ctype;
    if (status != 200) {
        evhttp_send_reply(req, status, "Nope", NULL);
        return;
    }
    if (*ctype) /* "": none */
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
    if (F.big_header)
        evhttp_add_header(evhttp_request_get_output_headers(req), "X-Big", F.big_header);
    evhttp_add_header(evhttp_request_get_output_headers(req), "X-LD-EnvID", "env-1");
    evhttp_send_reply_start(req, 200, "OK");
    if (initial) {
        struct evbuffer *b = evbuffer_new();
        evbuffer_add(b, initial, strlen(initial));
        evhttp_send_reply_chunk(req, b);
        evbuffer_free(b);
    }
    if (F.end_at_once) {
        evhttp_send_reply_end(req);
        return;
    }
    if (F.live) { /* two connections at once: the older one ends (else it leaks) */
        evhttp_connection_set_closecb(evhttp_request_get_connection(F.live), NULL, NULL);
        evhttp_send_reply_end(F.live);
    }
    F.live = req;
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), live_closed, &F.live);
}

/* Sends bytes on the open stream. */
void fake_send(const char *bytes, size_t n)
{
    ck_assert_ptr_nonnull(F.live);
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, bytes, n);
    evhttp_send_reply_chunk(F.live, b);
    evbuffer_free(b);
}

void fake_sends(const char *s)
{
    fake_send(s, strlen(s));
}

/* Ends the open stream cleanly. */
void fake_end(void)
{
    ck_assert_ptr_nonnull(F.live);
    evhttp_connection_set_closecb(evhttp_request_get_connection(F.live), NULL, NULL);
    evhttp_send_reply_end(F.live);
    F.live = NULL;
}

void fake_up(void)
{
    ld_test_setup();
    signal(SIGPIPE, SIG_IGN);
    memset(&F, 0, sizeof F);
    F.status = 200;
    F.ctype = "text/event-stream; charset=utf-8";
    F.http = evhttp_new(B);
    ck_assert_ptr_nonnull(F.http);
    F.port = ld_test_http_listen(F.http);
    snprintf(F.url, sizeof F.url, "http://127.0.0.1:%d", F.port);
    evhttp_set_gencb(F.http, fake_serve, NULL);
}

void fake_down(void)
{
    if (F.live) { /* evhttp_free() leaks a reply in progress */
        evhttp_connection_set_closecb(evhttp_request_get_connection(F.live), NULL, NULL);
        evhttp_send_reply_end(F.live);
    }
    if (F.held)
        evhttp_connection_set_closecb(evhttp_request_get_connection(F.held), NULL, NULL);
    evhttp_free(F.http);
    F.http = NULL;
    ld_test_teardown();
}

/* ---- the client's side ------------------------------------------------- */

ld_net_config *fake_config(void)
{
    ld_net_config *c = ld_net_config_new(KEY);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(ld_net_config_set_stream_uri(c, F.url), 0);
    ck_assert_int_eq(ld_net_config_set_reconnect_delay(c, 1), 0);
    c->reconnect_max_ms = 50; /* quick tests; the rule is backoff.c's, tested there */
    return c;
}

ld_synchronizer *stream_new(ld_net_config *c)
{
    ld_synchronizer *s = ld_streaming_synchronizer_new(B, c);
    ck_assert_ptr_nonnull(s);
    ld_net_config_free(c);
    return s;
}

void run_until(const int *flag, int want)
{
    for (int i = 0; i < 200000 && *flag < want; i++)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert_int_ge(*flag, want);
}

void run_ms(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_base_loopexit(B, &tv);
    event_base_dispatch(B);
}

/* Runs what is ready (the fake server keeps events added: no
 * ld_test_flush()). */
void settle(void)
{
    for (int i = 0; i < 20; i++)
        event_base_loop(B, EVLOOP_NONBLOCK);
}

/* The next update (the future, done; release it). */
ld_future *next_done(ld_synchronizer *s)
{
    return ld_test_done(ld_synchronizer_next(s));
}

/* The next update, which must be one; asserts its state. */
ld_future *expect_update(ld_synchronizer *s, enum ld_data_source_state state)
{
    ld_future *f = next_done(s);
    ck_assert_msg(ld_future_is_fulfilled(f), "rejected: %s", ld_future_error_message(f));
    const ld_fdv2_update *u = ld_fdv2_future_update(f);
    ck_assert_ptr_nonnull(u);
    ck_assert_int_eq(ld_fdv2_update_state(u), state);
    return f;
}

/* An error update: its kind and status, and a piece of its message. */
void expect_error(ld_synchronizer *s, enum ld_data_source_state state,
                  enum ld_data_source_error_kind kind, int status, const char *in_msg)
{
    ld_future *f = expect_update(s, state);
    const ld_fdv2_update *u = ld_fdv2_future_update(f);
    ck_assert_ptr_null(ld_fdv2_update_change_set(u));
    const ld_data_source_error_info *e = ld_fdv2_update_error(u);
    ck_assert_ptr_nonnull(e);
    ck_assert_msg(e->kind == kind, "kind %d, want %d (%s)", e->kind, kind, e->message);
    ck_assert_int_eq(e->status_code, status);
    ck_assert_int_gt(e->time_ms, 0);
    if (in_msg)
        ck_assert_msg(strstr(e->message, in_msg), "\"%s\" not in \"%s\"", in_msg, e->message);
    ld_future_unref(f);
}

/* The change set of a valid update: its intent and count. */
ld_future *expect_changes(ld_synchronizer *s, enum ld_fdv2_intent intent, size_t n)
{
    ld_future *f = expect_update(s, LD_DATA_SOURCE_STATE_VALID);
    const ld_fdv2_change_set *cs = ld_fdv2_update_change_set(ld_fdv2_future_update(f));
    ck_assert_ptr_nonnull(cs);
    ck_assert_int_eq(ld_fdv2_change_set_intent(cs), intent);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), n);
    return f;
}

const ld_fdv2_change *change_of(ld_future *f, size_t i)
{
    return ld_fdv2_change_set_get(ld_fdv2_update_change_set(ld_fdv2_future_update(f)), i);
}
