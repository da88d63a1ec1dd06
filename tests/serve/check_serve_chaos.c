/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * check_serve_chaos.c: the HTTP server of ldasync-serve when memory runs
 * out. A server is started, and a set of requests (every endpoint, a stream
 * that gets a change) is served with the Nth allocation failing, through
 * ldasync's allocator and jansson's, N = 1, 2, ... until a run in which
 * nothing failed. Every run must end with each request answered (200, or
 * 500 / 503 for what could not be made) or its connection closed, never a
 * request left waiting, a crash or a leak (ASan, valgrind); and the same
 * server then answers a request normally: running out of memory costs the
 * requests it hit, not the server.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "../../serve/server.h"
#include "check_fail_alloc.h"
#include "check_suites.h"
#include "check_util.h"

/* ---- a client: one request, Connection: close, read to the end ----------- */

struct client {
    struct bufferevent *bev;
    const char *request;
    bool stream; /* /all: done once a patch arrived (or the end) */
    bool done;
    bool put_seen;
    int code; /* the status line's code; 0: closed without one */
    struct evbuffer *in;
};

static void client_end(struct client *c)
{
    if (c->bev)
        bufferevent_free(c->bev);
    c->bev = NULL;
    c->done = true;
}

static void parse_code(struct client *c)
{
    size_t len = evbuffer_get_length(c->in);
    char head[16] = {0};
    if (!c->code && len >= 12) {
        evbuffer_copyout(c->in, head, 12);
        if (memcmp(head, "HTTP/1.1 ", 9) == 0 || memcmp(head, "HTTP/1.0 ", 9) == 0)
            c->code = atoi(head + 9);
    }
}

static void client_read(struct bufferevent *bev, void *arg)
{
    struct client *c = arg;
    evbuffer_add_buffer(c->in, bufferevent_get_input(bev));
    parse_code(c);
    if (c->stream && c->code == 200) {
        struct evbuffer_ptr p = evbuffer_search(c->in, "event: put", 10, NULL);
        c->put_seen = p.pos >= 0;
        p = evbuffer_search(c->in, "event: patch", 12, NULL);
        if (p.pos >= 0)
            client_end(c);
    }
}

static void client_event(struct bufferevent *bev, short what, void *arg)
{
    struct client *c = arg;
    if (what & BEV_EVENT_CONNECTED) {
        bufferevent_write(bev, c->request, strlen(c->request));
        return;
    }
    evbuffer_add_buffer(c->in, bufferevent_get_input(bev));
    parse_code(c);
    client_end(c);
}

static void client_start(struct client *c, int port, const char *request, bool stream)
{
    memset(c, 0, sizeof *c);
    c->request = request;
    c->stream = stream;
    c->in = evbuffer_new();
    c->bev = bufferevent_socket_new(ld_test_base, -1, BEV_OPT_CLOSE_ON_FREE);
    ck_assert_ptr_nonnull(c->in);
    ck_assert_ptr_nonnull(c->bev);
    bufferevent_setcb(c->bev, client_read, NULL, client_event, c);
    bufferevent_enable(c->bev, EV_READ);
    struct sockaddr_in sin = {0};
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bufferevent_socket_connect(c->bev, (struct sockaddr *)&sin, sizeof sin), 0);
}

static void client_free(struct client *c)
{
    client_end(c);
    evbuffer_free(c->in);
}

#define CLOSE "Host: 127.0.0.1\r\nAuthorization: k\r\nConnection: close\r\n"

/* The requests of a run; the last one is the stream. */
static const char *const REQUESTS[] = {
    "GET /sdk/latest-all HTTP/1.1\r\n" CLOSE "\r\n",
    "GET /sdk/latest-flags HTTP/1.1\r\n" CLOSE "\r\n",
    "GET /sdk/latest-flags/f1 HTTP/1.1\r\n" CLOSE "\r\n",
    "GET /sdk/latest-segments/s1 HTTP/1.1\r\n" CLOSE "\r\n",
    "GET /sdk/latest-flags/missing HTTP/1.1\r\n" CLOSE "\r\n",
    "GET /status HTTP/1.1\r\n" CLOSE "\r\n",
    /* {"kind":"user","key":"u2"} */
    "GET /sdk/evalx/env/contexts/eyJraW5kIjoidXNlciIsImtleSI6InUyIn0?withReasons=true "
    "HTTP/1.1\r\n" CLOSE "\r\n",
    "REPORT /sdk/evalx/env/context HTTP/1.1\r\n" CLOSE "Content-Type: application/json\r\n"
    "Content-Length: 26\r\n\r\n{\"kind\":\"user\",\"key\":\"u1\"}",
    "GET /all HTTP/1.1\r\n" CLOSE "\r\n",
};
#define N_REQ (sizeof REQUESTS / sizeof REQUESTS[0])

static const char *const FLAGS =
    "{'f1': {'on': true, 'variations': [true, false], 'fallthrough': {'variation': 0},"
    "        'offVariation': 1, 'targets': [{'values': ['u1'], 'variation': 1}],"
    "        'clientSideAvailability': {'usingEnvironmentId': true}, 'salt': 's'},"
    " 'f2': {'on': true, 'variations': ['a', 'b'], 'fallthrough': {'variation': 0},"
    "        'rules': [{'id': 'r1', 'variation': 1, 'trackEvents': true, 'clauses':"
    "          [{'op': 'segmentMatch', 'values': ['s1']}]}],"
    "        'clientSide': true, 'salt': 's', 'version': 7},"
    " 'f3': {'on': true, 'variations': [{'a': [1, 2.5]}], 'fallthrough': {'variation': 0},"
    "        'clientSide': true, 'salt': 's'}}";
static const char *const SEGMENTS = "{'s1': {'included': ['u1'], 'salt': 's'}}";

/* Runs the loop until every client is done; fails after 20 s. */
static void serve_until_done(struct client *cs, size_t n, lds_server *srv, const json_t *change)
{
    struct timeval start, now;
    gettimeofday(&start, NULL);
    bool changed = false;
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < n; i++)
            all = all && cs[i].done;
        if (all)
            return;
        /* the change, once the stream has its put (or is done) */
        struct client *st = &cs[n - 1];
        if (!changed && (st->put_seen || st->done)) {
            lds_server_changed(srv, ld_kind_features(), "f1", 2, change);
            changed = true;
        }
        event_base_loop(ld_test_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        gettimeofday(&now, NULL);
        if (now.tv_sec - start.tv_sec > 20) {
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(cs[i].done, "N=%ld: request %zu never answered: %s", g_fail_at, i,
                              REQUESTS[i]);
        }
    }
}

/* An evalx answer of 200 has its whole body (f3's value is written by
 * jansson, which allocates): never one cut where memory ran out. */
static void expect_whole_evalx(struct client *c)
{
    struct evbuffer_ptr end = evbuffer_search(c->in, "\r\n\r\n", 4, NULL);
    ck_assert_int_ge(end.pos, 0);
    size_t at = (size_t)end.pos + 4, len = evbuffer_get_length(c->in) - at;
    const char *body = (const char *)evbuffer_pullup(c->in, -1) + at;
    json_t *j = json_loadb(body, len, 0, NULL);
    ck_assert_msg(json_object_get(j, "f1") && json_object_get(j, "f2") && json_object_get(j, "f3"),
                  "N=%ld: %.*s", g_fail_at, (int)len, body);
    json_decref(j);
}

START_TEST(test_every_allocation_failing_in_turn_costs_requests_not_the_server)
{
    signal(SIGPIPE, SIG_IGN);
    json_t *data = ld_test_data_of(FLAGS, SEGMENTS);
    json_t *change = ld_test_j("{'key': 'f1', 'version': 2, 'on': false, 'variations': [true],"
                               " 'offVariation': 0, 'salt': 's'}");
    long runs = 0, refused = 0, not_made = 0;
    /* twice: as it is, then with states and evalx bodies made in slices
     * of 2 flags and lds_server_warm() at the start */
    for (int sliced = 0; sliced < 2; sliced++)
        for (g_fail_at = 1;; g_fail_at++) {
            ld_store *store = ld_test_memory_with(data);
            if (sliced)
                setenv("LDASYNC_EVAL_SLICE_FLAGS", "2", 1);
            ld_evaluator *ev = ld_test_evaluator_of(store);
            struct lds_server_options o = {0};
            o.bind_address = "127.0.0.1";
            o.sdk_key = "k";
            g_calls = 0;
            ck_assert_int_eq(ld_set_alloc_funcs(chaos_malloc, chaos_realloc, free), 0);
            json_set_alloc_funcs(chaos_malloc, free);
            g_counting = true;
            lds_server *srv = lds_server_new(ld_test_base, store, ev, &o);
            unsetenv("LDASYNC_EVAL_SLICE_FLAGS");
            struct client cs[N_REQ];
            if (srv && sliced)
                lds_server_warm(srv);
            if (srv) {
                int port = lds_server_port(srv);
                for (size_t i = 0; i < N_REQ; i++)
                    client_start(&cs[i], port, REQUESTS[i], i == N_REQ - 1);
                serve_until_done(cs, N_REQ, srv, change);
            }
            g_counting = false;
            json_set_alloc_funcs(malloc, free);
            ld_set_alloc_funcs(NULL, NULL, NULL);
            bool failed = g_calls >= g_fail_at;
            runs++;
            if (!srv) {
                ck_assert_msg(failed, "N=%ld: no server, and no allocation failed", g_fail_at);
                not_made++;
            } else {
                for (size_t i = 0; i < N_REQ; i++) {
                    int code = cs[i].code;
                    int want = i == 4 ? 404 : 200;
                    char text[1024] = {0};
                    evbuffer_copyout(cs[i].in, text, sizeof text - 1);
                    /* jansson reports memory running out while it parses as
                     * a syntax error (or none): its 400 is all the server can
                     * say then */
                    bool json_400 = code == 400 && (i == 6 || i == 7) &&
                                    strstr(text, "{\"error\":\"the context is not valid JSON\"}");
                    ck_assert_msg(code == want || code == 0 || code == 500 || code == 503 ||
                                      json_400,
                                  "N=%ld: request %zu answered %d: %s", g_fail_at, i, code, text);
                    if (!failed)
                        ck_assert_msg(code == want,
                                      "N=%ld: request %zu answered %d, nothing failed", g_fail_at,
                                      i, code);
                    if (code == 200 && (i == 6 || i == 7))
                        expect_whole_evalx(&cs[i]);
                    refused += code != want;
                    client_free(&cs[i]);
                }
                /* the same server, memory back: it serves */
                struct client after;
                client_start(&after, lds_server_port(srv), REQUESTS[2], false);
                serve_until_done(&after, 1, srv, change);
                ck_assert_msg(after.code == 200, "N=%ld: after the failure: %d", g_fail_at,
                              after.code);
                ck_assert_ptr_nonnull(evbuffer_search(after.in, "\"key\":\"f1\"", 10, NULL).pos >= 0
                                          ? (void *)1
                                          : NULL);
                client_free(&after);
                ld_test_await_ok(lds_server_close(srv));
                lds_server_free(srv);
            }
            ld_test_flush();
            ld_test_done_with(ev, store);
            if (!failed)
                break;
            ck_assert_msg(g_fail_at < 100000, "more than 100000 allocations in one run");
        }
    ck_assert_int_gt(runs, 10); /* the server does allocate */
    ck_assert_int_gt(not_made, 0);
    ck_assert_int_gt(refused, 0);
    json_decref(change);
    json_decref(data);
}
END_TEST

Suite *ld_suite_serve_chaos(void)
{
    Suite *s = suite_create("serve_chaos");
    TCase *tc = tcase_create("allocation_failures");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_every_allocation_failing_in_turn_costs_requests_not_the_server);
    suite_add_tcase(s, tc);
    return s;
}
