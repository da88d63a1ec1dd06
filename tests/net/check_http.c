/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * HTTP on the loop (lib/net/http.c) against an evhttp server in the same
 * process and loop: answers whole and streamed, statuses, headers both
 * ways, bodies, gzip, refused connections, the read timeout, cancel and
 * free at every point (inside callbacks too), many requests, descriptors
 * and memory across a thousand, and allocation failures.
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
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <ldasync/alloc.h>
#include <ldasync/error.h>

#include "check_fail_alloc.h"
#include "check_suites.h"
#include "check_tls.h"
#include "check_util.h"
#include "core/core-internal.h"
#include "net/net-internal.h"

#define B ld_test_base

/* ---- the server ---------------------------------------------------------- */

struct server {
    struct evhttp *http;
    int port;
    char url[64];
    /* what the last request brought */
    char last_path[256], last_agent[128], last_custom[128], last_method[16];
    char last_body[256];
    int requests;
    struct evhttp_request *held; /* a request left unanswered (/hold) */
    struct event *drip;          /* /stream: a chunk a pass */
    struct evhttp_request *streaming;
    int chunks_left;
};

static struct server S;

static const unsigned char GZ[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff,
                                   0xab, 0x56, 0x4a, 0xcb, 0x49, 0x4c, 0x2f, 0x56, 0xb2, 0xaa,
                                   0x56, 0x4a, 0x54, 0xb2, 0x32, 0xac, 0xad, 0x05, 0x00, 0x60,
                                   0x49, 0xd1, 0x89, 0x11, 0x00, 0x00, 0x00};

static void drip(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (!S.streaming)
        return;
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "chunk%d;", S.chunks_left);
    evhttp_send_reply_chunk(S.streaming, b);
    evbuffer_free(b);
    if (--S.chunks_left == 0) {
        evhttp_send_reply_end(S.streaming);
        S.streaming = NULL;
        return;
    }
    struct timeval tv = {0, 2000};
    event_add(S.drip, &tv);
}

static void copy_header(struct evhttp_request *req, const char *name, char *out, size_t n)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), name);
    snprintf(out, n, "%s", v ? v : "");
}

static void serve(struct evhttp_request *req, void *arg)
{
    (void)arg;
    S.requests++;
    const char *uri = evhttp_request_get_uri(req);
    snprintf(S.last_path, sizeof S.last_path, "%s", uri);
    copy_header(req, "User-Agent", S.last_agent, sizeof S.last_agent);
    copy_header(req, "X-Custom", S.last_custom, sizeof S.last_custom);
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    snprintf(S.last_method, sizeof S.last_method, "%s",
             cmd == EVHTTP_REQ_POST  ? "POST"
             : cmd == EVHTTP_REQ_GET ? "GET"
                                     : "OTHER");
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    if (n >= sizeof S.last_body)
        n = sizeof S.last_body - 1;
    evbuffer_copyout(in, S.last_body, n);
    S.last_body[n] = '\0';
    struct evkeyvalq *out_h = evhttp_request_get_output_headers(req);
    struct evbuffer *out = evbuffer_new();
    if (strncmp(uri, "/hold", 5) == 0) {
        S.held = req; /* never answered (until the test says) */
    } else if (strncmp(uri, "/stream", 7) == 0) {
        evhttp_send_reply_start(req, 200, "OK");
        S.streaming = req;
        S.chunks_left = 5;
        struct timeval tv = {0, 2000};
        event_add(S.drip, &tv);
    } else if (strncmp(uri, "/status/", 8) == 0) {
        int code = atoi(uri + 8);
        evbuffer_add_printf(out, "{\"status\":%d}", code);
        evhttp_send_reply(req, code, "X", out);
    } else if (strcmp(uri, "/gzip") == 0) {
        evhttp_add_header(out_h, "Content-Encoding", "gzip");
        evbuffer_add(out, GZ, sizeof GZ);
        evhttp_send_reply(req, 200, "OK", out);
    } else if (strncmp(uri, "/big", 4) == 0) {
        for (int i = 0; i < 100000; i++)
            evbuffer_add(out, "0123456789", 10);
        evhttp_send_reply(req, 200, "OK", out);
    } else {
        evhttp_add_header(out_h, "ETag", "\"abc\"");
        evhttp_add_header(out_h, "Content-Type", "application/json");
        evbuffer_add_printf(out, "{\"path\":\"%s\"}", uri);
        evhttp_send_reply(req, 200, "OK", out);
    }
    evbuffer_free(out);
}

static void server_up(void)
{
    ld_test_setup();
    /* a client that gives up a TLS handshake leaves the other side writing
     * to a closed socket (OpenSSL writes with write(2)) */
    signal(SIGPIPE, SIG_IGN);
    memset(&S, 0, sizeof S);
    S.http = evhttp_new(B);
    ck_assert_ptr_nonnull(S.http);
    evhttp_set_allowed_methods(S.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD);
    S.port = ld_test_http_listen(S.http);
    snprintf(S.url, sizeof S.url, "http://127.0.0.1:%d", S.port);
    evhttp_set_gencb(S.http, serve, NULL);
    S.drip = evtimer_new(B, drip, NULL);
}

static void server_down(void)
{
    if (S.drip)
        event_free(S.drip);
    evhttp_free(S.http); /* its requests (held ones too) go with it */
    S.http = NULL;
    ld_test_teardown();
}

/* ---- the client's side ----------------------------------------------------- */

struct got {
    long status;
    int responses, bodies, dones;
    int code;
    char message[256];
    char etag[64];
    char body[4096];
    size_t body_len, total;
    /* what a callback does to the client or the request */
    enum {
        NONE,
        CANCEL_IN_BODY,
        STOP_IN_BODY,
        STOP_IN_RESPONSE,
        CANCEL_IN_RESPONSE,
        FREE_IN_BODY,
        FREE_IN_DONE,
        NEW_IN_DONE
    } act;
    struct ld__http *h;
    struct ld__http_req *r;
    struct got *next_got; /* NEW_IN_DONE: the new request's */
};

static int on_response(void *arg, long status, const struct ld__http_header *hs, size_t n)
{
    struct got *g = arg;
    g->status = status;
    g->responses++;
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(hs[i].name, "ETag") == 0)
            snprintf(g->etag, sizeof g->etag, "%s", hs[i].value);
    if (g->act == STOP_IN_RESPONSE)
        return 1;
    if (g->act == CANCEL_IN_RESPONSE)
        ld__http_cancel(g->r);
    return 0;
}

static int on_body(void *arg, const char *p, size_t n)
{
    struct got *g = arg;
    g->bodies++;
    g->total += n;
    size_t room = sizeof g->body - 1 - g->body_len;
    size_t k = n < room ? n : room;
    memcpy(g->body + g->body_len, p, k);
    g->body_len += k;
    g->body[g->body_len] = '\0';
    if (g->act == STOP_IN_BODY)
        return 1;
    if (g->act == CANCEL_IN_BODY)
        ld__http_cancel(g->r);
    if (g->act == FREE_IN_BODY) {
        ld__http_free(g->h);
        g->h = NULL;
    }
    return 0;
}

static const struct ld__http_callbacks CB;

static void on_done(void *arg, int code, const char *message)
{
    struct got *g = arg;
    g->dones++;
    g->code = code;
    snprintf(g->message, sizeof g->message, "%s", message ? message : "");
    if (g->act == FREE_IN_DONE) {
        ld__http_free(g->h);
        g->h = NULL;
    }
    if (g->act == NEW_IN_DONE) {
        char url[128];
        snprintf(url, sizeof url, "%s/second", S.url);
        g->next_got->r = ld__http_request(g->h, "GET", url, NULL, NULL, 0, &CB, g->next_got);
        ck_assert_ptr_nonnull(g->next_got->r);
    }
}

static const struct ld__http_callbacks CB = {on_response, on_body, on_done};

static void run_until(const int *flag, int want)
{
    for (int i = 0; i < 100000 && *flag < want; i++)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert_int_ge(*flag, want);
}

static struct ld__http_req *get(struct ld__http *h, const char *path, struct got *g)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", S.url, path);
    g->h = h;
    g->r = ld__http_request(h, "GET", url, NULL, NULL, 0, &CB, g);
    ck_assert_ptr_nonnull(g->r);
    return g->r;
}

static struct ld__http_req *get_or_null(struct ld__http *h, struct got *g)
{
    char url[128];
    snprintf(url, sizeof url, "%s/chaos", S.url);
    g->h = h;
    g->r = ld__http_request(h, "GET", url, NULL, NULL, 0, &CB, g);
    return g->r;
}

/* Runs the loop for about `ms` milliseconds. */
static void run_ms(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_base_loopexit(B, &tv);
    event_base_dispatch(B);
}

/* ---- tests ----------------------------------------------------------------- */

START_TEST(test_a_get_with_headers_both_ways)
{
    struct ld__http_options o = {.user_agent = "ldasync-test/1"};
    struct ld__http *h = ld__http_new(B, &o);
    ck_assert_ptr_nonnull(h);
    struct got g = {0};
    char url[128];
    snprintf(url, sizeof url, "%s/sdk/latest-all?filter=x", S.url);
    const char *headers[] = {"X-Custom: yes", "Authorization: sdk-key", NULL};
    g.r = ld__http_request(h, "GET", url, headers, NULL, 0, &CB, &g);
    ck_assert_ptr_nonnull(g.r);
    ck_assert_uint_eq(ld__http_active(h), 1);
    run_until(&g.dones, 1);
    ck_assert_int_eq(g.code, 0);
    ck_assert_int_eq(g.status, 200);
    ck_assert_int_eq(g.responses, 1);
    ck_assert_str_eq(g.etag, "\"abc\"");
    ck_assert_str_eq(g.body, "{\"path\":\"/sdk/latest-all?filter=x\"}");
    ck_assert_str_eq(S.last_agent, "ldasync-test/1");
    ck_assert_str_eq(S.last_custom, "yes");
    ck_assert_uint_eq(ld__http_active(h), 0);
    ld__http_free(h);
}
END_TEST

START_TEST(test_a_post_body_and_statuses)
{
    struct ld__http *h = ld__http_new(B, NULL);
    struct got g = {0};
    char url[128];
    snprintf(url, sizeof url, "%s/bulk", S.url);
    static const char body[] = "[{\"kind\":\"identify\"}]";
    const char *headers[] = {"Content-Type: application/json", NULL};
    g.r = ld__http_request(h, "POST", url, headers, body, sizeof body - 1, &CB, &g);
    run_until(&g.dones, 1);
    ck_assert_str_eq(S.last_method, "POST");
    ck_assert_str_eq(S.last_body, body);
    static const int codes[] = {304, 400, 401, 404, 429, 500, 503};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        struct got s = {0};
        char path[32];
        snprintf(path, sizeof path, "/status/%d", codes[i]);
        get(h, path, &s);
        run_until(&s.dones, 1);
        /* a status is an answer, not a failure of the request */
        ck_assert_int_eq(s.code, 0);
        ck_assert_int_eq(s.status, codes[i]);
        ck_assert_int_eq(s.responses, 1);
        if (codes[i] != 304) {
            char want[32];
            snprintf(want, sizeof want, "{\"status\":%d}", codes[i]);
            ck_assert_str_eq(s.body, want);
        }
    }
    ld__http_free(h);
}
END_TEST

/* A streamed body comes as it is sent, not at its end. */
START_TEST(test_a_streamed_body_comes_in_pieces)
{
    struct ld__http *h = ld__http_new(B, NULL);
    struct got g = {0};
    get(h, "/stream", &g);
    run_until(&g.bodies, 1);
    ck_assert_int_eq(g.dones, 0); /* the first piece came before the end */
    run_until(&g.dones, 1);
    ck_assert_int_eq(g.code, 0);
    ck_assert_str_eq(g.body, "chunk5;chunk4;chunk3;chunk2;chunk1;");
    ck_assert_int_ge(g.bodies, 2);
    ld__http_free(h);
}
END_TEST

START_TEST(test_gzip_is_decoded)
{
    struct ld__http *h = ld__http_new(B, NULL);
    struct got g = {0}, big = {0};
    get(h, "/gzip", &g);
    get(h, "/big", &big);
    run_until(&g.dones, 1);
    run_until(&big.dones, 1);
    ck_assert_int_eq(g.code, 0);
    ck_assert_str_eq(g.body, "{\"flags\":{\"a\":1}}");
    ck_assert_uint_eq(big.total, 1000000);
    ld__http_free(h);
}
END_TEST

/* Nobody listens: LD_EIO with curl's words. */
START_TEST(test_a_refused_connection_is_eio)
{
    struct ld__http *h = ld__http_new(B, NULL);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    socklen_t len = sizeof sin;
    getsockname(fd, (struct sockaddr *)&sin, &len);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", ntohs(sin.sin_port));
    struct got g = {0};
    g.r = ld__http_request(h, "GET", url, NULL, NULL, 0, &CB, &g); /* bound, not listening */
    run_until(&g.dones, 1);
    close(fd);
    ck_assert_int_eq(g.code, LD_EIO);
    ck_assert_int_eq(g.responses, 0);
    ck_assert_msg(g.message[0] != '\0', "no message");
    ld__http_free(h);
}
END_TEST

/* A server that takes the request and says nothing: the read timeout. */
START_TEST(test_the_read_timeout)
{
    struct ld__http_options o = {.read_timeout_ms = 150};
    struct ld__http *h = ld__http_new(B, &o);
    struct got g = {0};
    get(h, "/hold", &g);
    run_until(&g.dones, 1);
    ck_assert_int_eq(g.code, LD_ETIMEDOUT);
    ck_assert_int_eq(g.responses, 0);
    ck_assert_uint_eq(ld__http_active(h), 0);
    /* a stream that keeps sending is not cut: pieces every 2 ms */
    struct got s = {0};
    get(h, "/stream", &s);
    run_until(&s.dones, 1);
    ck_assert_int_eq(s.code, 0);
    ld__http_free(h);
}
END_TEST

/* Cancelled while the server holds it, from its callbacks, or stopped by
 * them: no callback after, and the client goes on. */
START_TEST(test_cancel_and_stop_at_every_point)
{
    struct ld__http *h = ld__http_new(B, NULL);
    struct got held = {0};
    get(h, "/hold", &held);
    run_until(&S.requests, 1);
    ld__http_cancel(held.r);
    ck_assert_uint_eq(ld__http_active(h), 0);
    static const int acts[] = {CANCEL_IN_BODY, STOP_IN_BODY, STOP_IN_RESPONSE, CANCEL_IN_RESPONSE};
    for (size_t i = 0; i < 4; i++) {
        struct got g = {0};
        g.act = acts[i];
        get(h, "/stream", &g);
        run_until(&g.responses, 1);
        run_ms(40); /* the rest of the stream would have come by now */
        ck_assert_int_eq(g.dones, 0);
        ck_assert_int_le(g.bodies, 1);
        ck_assert_uint_eq(ld__http_active(h), 0);
    }
    /* and a request right after a cancel */
    struct got a = {0}, b = {0};
    get(h, "/one", &a);
    ld__http_cancel(a.r);
    get(h, "/two", &b);
    run_until(&b.dones, 1);
    ck_assert_int_eq(b.code, 0);
    ck_assert_int_eq(a.responses + a.dones, 0);
    ld__http_cancel(NULL);
    ld__http_free(h);
}
END_TEST

/* The client freed with requests out, inside a body callback, inside
 * on_done; a request started inside on_done. */
START_TEST(test_free_at_every_point)
{
    struct ld__http *h = ld__http_new(B, NULL);
    struct got a = {0}, b = {0};
    get(h, "/hold", &a);
    get(h, "/stream", &b);
    run_until(&S.requests, 2);
    ld__http_free(h); /* both out: no callback */
    run_ms(30);
    ck_assert_int_eq(a.dones + b.dones, 0);

    h = ld__http_new(B, NULL);
    struct got c = {0}, d = {0};
    c.act = FREE_IN_BODY;
    get(h, "/stream", &c);
    get(h, "/hold", &d);
    run_until(&c.bodies, 1);
    run_ms(30);
    ck_assert_ptr_null(c.h); /* freed inside */
    ck_assert_int_eq(c.bodies, 1);
    ck_assert_int_eq(c.dones + d.dones, 0);

    h = ld__http_new(B, NULL);
    struct got e = {0}, f = {0};
    e.act = FREE_IN_DONE;
    get(h, "/one", &e);
    get(h, "/hold", &f);
    run_until(&e.dones, 1);
    run_ms(20);
    ck_assert_int_eq(f.dones, 0);

    h = ld__http_new(B, NULL);
    struct got g = {0}, next = {0};
    g.act = NEW_IN_DONE;
    g.next_got = &next;
    get(h, "/first", &g);
    run_until(&next.dones, 1);
    ck_assert_int_eq(next.code, 0);
    ck_assert_str_eq(next.body, "{\"path\":\"/second\"}");
    ld__http_free(h);
    ld__http_free(NULL);
}
END_TEST

/* 64 at once, then a thousand one after the other on a new client each
 * hundred: every one answered, no descriptor left behind. */
START_TEST(test_many_requests)
{
    struct ld__http *h = ld__http_new(B, NULL);
    static struct got gs[64];
    memset(gs, 0, sizeof gs);
    for (int i = 0; i < 64; i++)
        get(h, i % 2 ? "/big" : "/x", &gs[i]);
    for (int i = 0; i < 64; i++)
        run_until(&gs[i].dones, 1);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(gs[i].code, 0);
    ld__http_free(h);
    run_ms(10);
    int fds = ld_test_count_fds();
    for (int round = 0; round < 10; round++) {
        h = ld__http_new(B, NULL);
        for (int i = 0; i < 100; i++) {
            struct got g = {0};
            get(h, "/x", &g);
            run_until(&g.dones, 1);
            if (g.code != 0)
                ck_abort_msg("request %d of round %d: %d %s", i, round, g.code, g.message);
        }
        ld__http_free(h);
    }
    run_ms(10);
    ck_assert_int_eq(ld_test_count_fds(), fds);
}
END_TEST

/* A body lent to a request: sent as it is when the request runs (not
 * copied when it is made), and let go of once, when libcurl is done with
 * it: after the answer, after a cancel (outside and inside a callback),
 * after the client is freed with it out; refused without bytes or a
 * release (then not let go of: still the caller's). */
struct lent {
    int releases;
    char bytes[64];
};

static void lent_release(void *owner)
{
    ((struct lent *)owner)->releases++;
}

static struct ld__http_req *post_lent(struct ld__http *h, const char *path, struct got *g,
                                      struct lent *l)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", S.url, path);
    struct ld__http_body body = {l->bytes, strlen(l->bytes), lent_release, l};
    g->h = h;
    g->r = ld__http_request_lent(h, "POST", url, NULL, &body, &CB, g);
    return g->r;
}

START_TEST(test_a_lent_body)
{
    struct ld__http *h = ld__http_new(B, NULL);
    struct lent a = {0, "[{\"kind\":\"custom\"}]"};
    struct got ga = {0};
    ck_assert_ptr_nonnull(post_lent(h, "/bulk", &ga, &a));
    memcpy(a.bytes + 10, "CUSTOM", 6); /* lent, not copied: this is what goes */
    ck_assert_int_eq(a.releases, 0);
    run_until(&ga.dones, 1);
    ck_assert_int_eq(ga.code, 0);
    ck_assert_str_eq(S.last_body, "[{\"kind\":\"CUSTOM\"}]");
    run_ms(5);
    ck_assert_int_eq(a.releases, 1);

    /* canceled while out (outside any callback): let go of at once */
    struct lent b = {0, "held"};
    struct got gb = {0};
    ck_assert_ptr_nonnull(post_lent(h, "/hold", &gb, &b));
    run_until(&S.requests, S.requests + 1);
    ld__http_cancel(gb.r);
    ck_assert_int_eq(b.releases, 1);

    /* canceled inside its own callback: once the dispatch is over */
    struct lent c = {0, "streamed"};
    struct got gc = {0};
    gc.act = CANCEL_IN_RESPONSE;
    ck_assert_ptr_nonnull(post_lent(h, "/stream", &gc, &c));
    run_until(&gc.responses, 1);
    run_ms(20);
    ck_assert_int_eq(c.releases, 1);
    ck_assert_int_eq(gc.dones, 0);

    /* bad arguments: refused, the body not let go of */
    struct lent d = {0, "x"};
    struct ld__http_body no_bytes = {NULL, 1, lent_release, &d};
    struct ld__http_body no_release = {d.bytes, 1, NULL, &d};
    ck_assert_ptr_null(ld__http_request_lent(h, "POST", S.url, NULL, NULL, &CB, &gb));
    ck_assert_ptr_null(ld__http_request_lent(h, "POST", S.url, NULL, &no_bytes, &CB, &gb));
    ck_assert_ptr_null(ld__http_request_lent(h, "POST", S.url, NULL, &no_release, &CB, &gb));
    struct ld__http_body ok = {d.bytes, 1, lent_release, &d};
    ck_assert_ptr_null(ld__http_request_lent(NULL, "POST", S.url, NULL, &ok, &CB, &gb));
    ck_assert_ptr_null(ld__http_request_lent(h, "POST", S.url, NULL, &ok, NULL, &gb));
    ck_assert_int_eq(d.releases, 0);

    /* the client freed with two out, and inside on_done */
    struct lent e = {0, "e"}, f = {0, "f"};
    struct got ge = {0}, gf = {0};
    ck_assert_ptr_nonnull(post_lent(h, "/hold", &ge, &e));
    ck_assert_ptr_nonnull(post_lent(h, "/hold", &gf, &f));
    run_ms(10);
    ld__http_free(h);
    run_ms(10);
    ck_assert_int_eq(e.releases, 1);
    ck_assert_int_eq(f.releases, 1);
    h = ld__http_new(B, NULL);
    struct lent g = {0, "g"};
    struct got gg = {0};
    gg.act = FREE_IN_DONE;
    ck_assert_ptr_nonnull(post_lent(h, "/one", &gg, &g));
    run_until(&gg.dones, 1);
    run_ms(10);
    ck_assert_int_eq(g.releases, 1);
}
END_TEST

START_TEST(test_bad_arguments)
{
    ck_assert_ptr_null(ld__http_new(NULL, NULL));
    struct ld__http *h = ld__http_new(B, NULL);
    struct got g = {0};
    ck_assert_ptr_null(ld__http_request(NULL, "GET", "http://x/", NULL, NULL, 0, &CB, &g));
    ck_assert_ptr_null(ld__http_request(h, NULL, "http://x/", NULL, NULL, 0, &CB, &g));
    ck_assert_ptr_null(ld__http_request(h, "GET", NULL, NULL, NULL, 0, &CB, &g));
    ck_assert_ptr_null(ld__http_request(h, "GET", "http://x/", NULL, NULL, 0, NULL, &g));
    struct ld__http_callbacks no_done = {on_response, on_body, NULL};
    ck_assert_ptr_null(ld__http_request(h, "GET", "http://x/", NULL, NULL, 0, &no_done, &g));
    /* a scheme other than http and https: refused when it runs */
    g.r = ld__http_request(h, "GET", "file:///etc/passwd", NULL, NULL, 0, &CB, &g);
    ck_assert_ptr_nonnull(g.r);
    run_until(&g.dones, 1);
    ck_assert_int_eq(g.code, LD_EIO);
    ck_assert_uint_eq(ld__http_active(NULL), 0);
    ld__http_free(h);
}
END_TEST

/* Every allocation failing in turn (the library's and libcurl's, through
 * the hook) while a client makes a request: NULL, or on_done with an
 * error, or the answer; never a crash or a leak (ASan). */
START_TEST(test_allocation_failures)
{
    /* the counters are read on libcurl's resolver thread too: atomically */
    for (long n = 1;; n++) {
        struct got g = {0};
        CHAOS_BEGIN(n);
        struct ld__http *h = ld__http_new(B, NULL);
        struct ld__http_req *r = h ? get_or_null(h, &g) : NULL;
        if (r)
            run_until(&g.dones, 1);
        bool failed = chaos_end(n);
        if (!failed) {
            ck_assert_int_eq(g.code, 0);
            ck_assert_str_eq(g.body, "{\"path\":\"/chaos\"}");
            ld__http_free(h);
            break;
        }
        if (r && g.code == 0)
            ck_assert_msg(g.status == 200, "N=%ld: %ld", n, g.status);
        else if (r)
            ck_assert_msg(g.code == LD_ENOMEM || g.code == LD_EIO, "N=%ld: %d %s", n, g.code,
                          g.message);
        ld__http_free(h);
        run_ms(1);
    }
    __atomic_store_n(&g_fail_at, 0, __ATOMIC_RELAXED);
}
END_TEST

/* ---- TLS: a CA and a server certificate made at test time ------------------- */

struct tls {
    struct ld_test_tls t;
    struct evhttp *http;
    int port;
};

static struct tls T;

static void tls_up(void)
{
    server_up(); /* the plain server too (S), for the proxy's and others' use */
    memset(&T, 0, sizeof T);
    ld_test_tls_make(&T.t);
    T.http = evhttp_new(B);
    T.port = ld_test_http_listen(T.http);
    evhttp_set_bevcb(T.http, ld_test_tls_bev, T.t.ctx);
    evhttp_set_gencb(T.http, serve, NULL);
}

static void tls_down(void)
{
    evhttp_free(T.http);
    ld_test_tls_free(&T.t);
    server_down();
}

/* One GET of https://HOST:port/tls with `o`: the result's code. */
static int tls_get(const struct ld__http_options *o, const char *host, struct got *g)
{
    struct ld__http *h = ld__http_new(B, o);
    ck_assert_ptr_nonnull(h);
    char url[128];
    snprintf(url, sizeof url, "https://%s:%d/tls", host, T.port);
    memset(g, 0, sizeof *g);
    g->h = h;
    g->r = ld__http_request(h, "GET", url, NULL, NULL, 0, &CB, g);
    ck_assert_ptr_nonnull(g->r);
    run_until(&g->dones, 1);
    ld__http_free(h);
    return g->code;
}

/* The server's certificate is checked against the CA file given: ours is
 * accepted; the system's CAs and another CA refuse it; a name it does not
 * have (127.0.0.1) is refused; verification off takes either. */
START_TEST(test_tls_verifies_the_peer)
{
    struct got g;
    struct ld__http_options o = {.ca_file = T.t.ca_file};
    ck_assert_int_eq(tls_get(&o, "localhost", &g), 0);
    ck_assert_int_eq(g.status, 200);
    ck_assert_str_eq(g.body, "{\"path\":\"/tls\"}");
    struct ld__http_options sys = {0};
    ck_assert_int_eq(tls_get(&sys, "localhost", &g), LD_EIO);
    ck_assert_int_eq(g.responses, 0);
    struct ld__http_options other = {.ca_file = T.t.other_file};
    ck_assert_int_eq(tls_get(&other, "localhost", &g), LD_EIO);
    ck_assert_int_eq(tls_get(&o, "127.0.0.1", &g), LD_EIO); /* not its name */
    struct ld__http_options off = {.insecure = true};
    ck_assert_int_eq(tls_get(&off, "127.0.0.1", &g), 0);
    ck_assert_int_eq(g.status, 200);
    struct ld__http_options missing = {.ca_file = "/nonexistent/ca.pem"};
    ck_assert_int_eq(tls_get(&missing, "localhost", &g), LD_EIO);
}
END_TEST

Suite *ld_suite_http(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("loopback");
    tcase_add_checked_fixture(tc, server_up, server_down);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_a_get_with_headers_both_ways);
    tcase_add_test(tc, test_a_post_body_and_statuses);
    tcase_add_test(tc, test_a_streamed_body_comes_in_pieces);
    tcase_add_test(tc, test_gzip_is_decoded);
    tcase_add_test(tc, test_a_refused_connection_is_eio);
    tcase_add_test(tc, test_the_read_timeout);
    tcase_add_test(tc, test_cancel_and_stop_at_every_point);
    tcase_add_test(tc, test_free_at_every_point);
    tcase_add_test(tc, test_many_requests);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_a_lent_body);
    tcase_add_test(tc, test_allocation_failures);
    suite_add_tcase(s, tc);
    tc = tcase_create("tls");
    tcase_add_checked_fixture(tc, tls_up, tls_down);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_tls_verifies_the_peer);
    suite_add_tcase(s, tc);
    return s;
}
