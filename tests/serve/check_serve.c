/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * check_serve.c: the HTTP server of ldasync-serve (serve/server.c), started
 * in this process on a free loopback port and driven with libevent's HTTP
 * client and with raw sockets for what that client will not send.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "../../serve/server.h"
#include "check_suites.h"
#include "check_util.h"
#include "events/check_receiver.h"

#if LD_TEST_SANITIZED
#include <sanitizer/allocator_interface.h>
#endif

#define KEY "sdk-test-key"

/* Flags: f1 and f2 and f4 are for client-side SDKs, f3 is not. */
static const char *const FLAGS =
    "{'f1': {'on': true, 'variations': [true, false], 'fallthrough': {'variation': 0},"
    "        'offVariation': 1, 'targets': [{'values': ['u1'], 'variation': 1}],"
    "        'clientSideAvailability': {'usingEnvironmentId': true}, 'salt': 's'},"
    " 'f2': {'on': true, 'variations': ['a', 'b'], 'fallthrough': {'variation': 0},"
    "        'rules': [{'id': 'r1', 'variation': 1, 'trackEvents': true, 'clauses':"
    "          [{'attribute': 'key', 'op': 'in', 'values': ['u2']}]}],"
    "        'trackEvents': true, 'clientSide': true, 'salt': 's', 'version': 7},"
    " 'f3': {'on': false, 'variations': [1, 2], 'offVariation': 0, 'salt': 's'},"
    " 'f4': {'on': true, 'variations': [10, 20], 'salt': 'x',"
    "        'fallthrough': {'rollout': {'variations': [{'variation': 0, 'weight': 50000},"
    "                                                    {'variation': 1, 'weight': 50000}]}},"
    "        'prerequisites': [{'key': 'f1', 'variation': 0}],"
    "        'clientSideAvailability': {'usingEnvironmentId': true}}}";
static const char *const SEGMENTS = "{'s1': {'included': ['u1'], 'salt': 's'}}";

struct fix {
    ld_store *store;
    ld_evaluator *ev;
    lds_server *srv;
    int port;
    struct evhttp_connection *conn;
    json_t *data;
    struct ld_test_later *later; /* when the store is one that answers later */
    char log[4096];
    int logs;
};

static int status_fn(ld_data_source_status *out, void *arg)
{
    (void)arg;
    static const ld_data_source_error_info err = {LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0,
                                                  1700000000000, "bad file"};
    out->state = LD_DATA_SOURCE_STATE_INTERRUPTED;
    out->since_ms = 1700000000000;
    out->error = &err;
    return 0;
}

static void log_fn(int level, const char *line, void *arg)
{
    struct fix *x = arg;
    x->logs++;
    snprintf(x->log + strlen(x->log), sizeof x->log - strlen(x->log), "[%s] %s\n",
             lds_log_level_name(level), line);
}

/* Starts a server on a store of `flags` (and SEGMENTS), answering later
 * when `later`; on a memory store never initialized when `flags` is NULL. */
static void start_on(struct fix *x, struct lds_server_options *o, bool later, const char *flags)
{
    signal(SIGPIPE, SIG_IGN);
    memset(x, 0, sizeof *x);
    x->data = flags ? ld_test_data_of(flags, SEGMENTS) : NULL;
    if (!flags)
        x->store = ld_memory_store_new(ld_test_base);
    else if (later)
        x->store = ld_test_later_new(x->data, &x->later);
    else
        x->store = ld_test_memory_with(x->data);
    ck_assert_ptr_nonnull(x->store);
    if (flags && later)
        ld_test_await_ok(ld_store_init(x->store, x->data));
    x->ev = ld_test_evaluator_of(x->store);
    struct lds_server_options def = {0};
    if (!o)
        o = &def;
    o->bind_address = "127.0.0.1";
    o->port = 0;
    if (!o->sdk_key)
        o->sdk_key = KEY;
    o->log = log_fn;
    o->log_arg = x;
    o->log_level = LDS_LOG_DEBUG;
    o->log_level_set = 1;
    o->status = status_fn;
    x->srv = lds_server_new(ld_test_base, x->store, x->ev, o);
    ck_assert_ptr_nonnull(x->srv);
    x->port = lds_server_port(x->srv);
    ck_assert_int_gt(x->port, 0);
}

static void start_with(struct fix *x, struct lds_server_options *o, bool later)
{
    start_on(x, o, later, FLAGS);
}

static void start(struct fix *x)
{
    start_with(x, NULL, false);
}

static void loop_once(void)
{
    event_base_loop(ld_test_base, EVLOOP_ONCE);
}

static void stop(struct fix *x)
{
    if (x->conn)
        evhttp_connection_free(x->conn);
    x->conn = NULL;
    if (x->srv) {
        ld_future *f = lds_server_close(x->srv);
        ck_assert_ptr_nonnull(f);
        ld_test_await_ok(f);
        lds_server_free(x->srv);
        x->srv = NULL;
    }
    ld_test_flush();
    ld_test_done_with(x->ev, x->store);
    json_decref(x->data);
}

/* ---- the HTTP client --------------------------------------------------------------- */

struct resp {
    bool done;
    int code;
    char *body;
    size_t len;
    char etag[64];
    char cors[64];
    char allow[64];
    char ctype[64];
};

static void copy_header(struct evhttp_request *req, const char *name, char *out, size_t n)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), name);
    snprintf(out, n, "%s", v ? v : "");
}

static void resp_cb(struct evhttp_request *req, void *arg)
{
    struct resp *r = arg;
    r->done = true;
    if (!req)
        return;
    r->code = evhttp_request_get_response_code(req);
    struct evbuffer *b = evhttp_request_get_input_buffer(req);
    r->len = evbuffer_get_length(b);
    r->body = malloc(r->len + 1);
    ck_assert_ptr_nonnull(r->body);
    evbuffer_remove(b, r->body, r->len);
    r->body[r->len] = '\0';
    copy_header(req, "ETag", r->etag, sizeof r->etag);
    copy_header(req, "Access-Control-Allow-Origin", r->cors, sizeof r->cors);
    copy_header(req, "Allow", r->allow, sizeof r->allow);
    copy_header(req, "Content-Type", r->ctype, sizeof r->ctype);
}

static struct evhttp_connection *conn_of(struct fix *x)
{
    if (!x->conn) {
        x->conn = evhttp_connection_base_new(ld_test_base, NULL, "127.0.0.1", (ev_uint16_t)x->port);
        ck_assert_ptr_nonnull(x->conn);
    }
    return x->conn;
}

/* A request whose answer lands in *r, with Host and (unless NULL) an
 * Authorization of `auth`. */
static struct evhttp_request *req_new(struct resp *r, const char *auth)
{
    memset(r, 0, sizeof *r);
    struct evhttp_request *req = evhttp_request_new(resp_cb, r);
    ck_assert_ptr_nonnull(req);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Host", "localhost");
    if (auth)
        evhttp_add_header(h, "Authorization", auth);
    return req;
}

/* Sends a request and returns at once; the answer lands in *r. */
static void http_send(struct evhttp_connection *c, enum evhttp_cmd_type m, const char *path,
                      const char *auth, const char *inm, struct resp *r)
{
    struct evhttp_request *req = req_new(r, auth);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (inm)
        evhttp_add_header(h, "If-None-Match", inm);
    ck_assert_int_eq(evhttp_make_request(c, req, m, path), 0);
}

static void wait_resp(struct resp *r)
{
    while (!r->done)
        loop_once();
}

static void http(struct fix *x, enum evhttp_cmd_type m, const char *path, const char *auth,
                 const char *inm, struct resp *r)
{
    http_send(conn_of(x), m, path, auth, inm, r);
    wait_resp(r);
}

static void get(struct fix *x, const char *path, struct resp *r)
{
    http(x, EVHTTP_REQ_GET, path, KEY, NULL, r);
}

static void resp_free(struct resp *r)
{
    free(r->body);
    r->body = NULL;
}

static json_t *body_json(const struct resp *r)
{
    json_error_t e;
    json_t *j = json_loads(r->body ? r->body : "", 0, &e);
    ck_assert_msg(j != NULL, "body is not JSON (%s): %.300s", e.text, r->body ? r->body : "");
    return j;
}

/* Asserts the JSON error answer {"error": "..."} with status `code`. */
static void expect_error(const struct resp *r, int code)
{
    ck_assert_msg(r->code == code, "status %d, expected %d: %.300s", r->code, code,
                  r->body ? r->body : "");
    json_t *j = body_json(r);
    ck_assert_msg(json_is_string(json_object_get(j, "error")), "no error: %s", r->body);
    json_decref(j);
}

/* ---- raw sockets ------------------------------------------------------------------- */

struct raw {
    struct bufferevent *bev;
    struct evbuffer *got;
    bool eof;
};

static void raw_read(struct bufferevent *bev, void *arg)
{
    struct raw *r = arg;
    evbuffer_add_buffer(r->got, bufferevent_get_input(bev));
}

static void raw_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    struct raw *r = arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        r->eof = true;
}

static void raw_open(struct raw *r, int port)
{
    memset(r, 0, sizeof *r);
    r->got = evbuffer_new();
    r->bev = bufferevent_socket_new(ld_test_base, -1, BEV_OPT_CLOSE_ON_FREE);
    ck_assert_ptr_nonnull(r->bev);
    bufferevent_setcb(r->bev, raw_read, NULL, raw_event, r);
    bufferevent_enable(r->bev, EV_READ | EV_WRITE);
    struct sockaddr_in sin = {0};
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bufferevent_socket_connect(r->bev, (struct sockaddr *)&sin, sizeof sin), 0);
}

static void raw_send(struct raw *r, const char *data, size_t len)
{
    bufferevent_write(r->bev, data, len);
}

static void raw_close(struct raw *r)
{
    if (r->bev)
        bufferevent_free(r->bev);
    r->bev = NULL;
    if (r->got)
        evbuffer_free(r->got);
    r->got = NULL;
}

static const char *raw_text(struct raw *r)
{
    evbuffer_add(r->got, "", 1);
    const char *t = (const char *)evbuffer_pullup(r->got, -1);
    evbuffer_drain(r->got, 0);
    /* drop the NUL again: it stays at the end, harmless for strstr */
    return t;
}

static bool raw_has(struct raw *r, const char *needle)
{
    size_t n = evbuffer_get_length(r->got);
    if (n == 0)
        return false;
    struct evbuffer_ptr p = evbuffer_search(r->got, needle, strlen(needle), NULL);
    return p.pos >= 0;
}

static void raw_wait_for(struct raw *r, const char *needle)
{
    while (!raw_has(r, needle) && !r->eof)
        loop_once();
    ck_assert_msg(raw_has(r, needle), "\"%s\" never came; got: %.400s", needle, raw_text(r));
}

static void raw_wait_eof(struct raw *r)
{
    while (!r->eof)
        loop_once();
}

/* The status of the first answer, or 0. */
static int raw_status(struct raw *r)
{
    const char *t = raw_text(r);
    int code = 0;
    if (sscanf(t, "HTTP/1.%*d %d", &code) != 1)
        return 0;
    return code;
}

/* Sends `req` on a new connection that the server closes, and returns the
 * status of the answer (0: none). */
static int raw_exchange(struct fix *x, const char *req, size_t len, struct raw *keep)
{
    struct raw r;
    raw_open(&r, x->port);
    raw_send(&r, req, len);
    raw_wait_eof(&r);
    int code = raw_status(&r);
    if (keep)
        *keep = r;
    else
        raw_close(&r);
    return code;
}

/* ---- polling ----------------------------------------------------------------------- */

/* The store's collection of `kind`, as a new reference. */
static json_t *store_all(struct fix *x, const ld_kind *kind)
{
    ld_future *f = ld_test_fulfilled(ld_store_all(x->store, kind));
    json_t *j = json_incref(ld_future_json(f));
    ld_future_unref(f);
    return j;
}

START_TEST(test_polling_endpoints_serve_the_store)
{
    struct fix x;
    start(&x);
    /* a deleted flag is in no answer */
    ld_test_await_bool(ld_store_delete(x.store, ld_kind_features(), "f3", 5));
    json_t *flags = store_all(&x, ld_kind_features());
    json_t *segs = store_all(&x, ld_kind_segments());
    ck_assert_ptr_null(json_object_get(flags, "f3"));

    struct resp r;
    get(&x, "/sdk/latest-all", &r);
    ck_assert_int_eq(r.code, 200);
    ck_assert_str_eq(r.ctype, "application/json");
    json_t *j = body_json(&r);
    ck_assert(json_equal(json_object_get(j, "flags"), flags));
    ck_assert(json_equal(json_object_get(j, "segments"), segs));
    ck_assert_int_eq(json_object_size(j), 2);
    json_decref(j);
    resp_free(&r);

    get(&x, "/sdk/latest-flags", &r);
    ck_assert_int_eq(r.code, 200);
    j = body_json(&r);
    ck_assert(json_equal(j, flags));
    json_decref(j);
    resp_free(&r);

    get(&x, "/sdk/latest-segments", &r);
    ck_assert_int_eq(r.code, 200);
    j = body_json(&r);
    ck_assert(json_equal(j, segs));
    json_decref(j);
    resp_free(&r);

    get(&x, "/sdk/latest-flags/f2", &r);
    ck_assert_int_eq(r.code, 200);
    j = body_json(&r);
    ck_assert(json_equal(j, json_object_get(flags, "f2")));
    json_decref(j);
    resp_free(&r);

    get(&x, "/sdk/latest-segments/s1", &r);
    ck_assert_int_eq(r.code, 200);
    j = body_json(&r);
    ck_assert(json_equal(j, json_object_get(segs, "s1")));
    json_decref(j);
    resp_free(&r);

    const char *absent[] = {"/sdk/latest-flags/nope", "/sdk/latest-flags/f3",
                            "/sdk/latest-segments/nope", "/sdk/latest-flags/s1"};
    for (size_t i = 0; i < 4; i++) {
        get(&x, absent[i], &r);
        expect_error(&r, 404);
        resp_free(&r);
    }
    /* HEAD: the status without the body */
    http(&x, EVHTTP_REQ_HEAD, "/sdk/latest-flags/f1", KEY, NULL, &r);
    ck_assert_int_eq(r.code, 200);
    ck_assert_uint_eq(r.len, 0);
    resp_free(&r);
    json_decref(flags);
    json_decref(segs);
    stop(&x);
}
END_TEST

START_TEST(test_percent_encoded_keys_are_decoded)
{
    struct fix x;
    start(&x);
    json_t *item = json_pack("{s:s,s:i,s:b,s:[bb],s:i}", "key", "a b/c", "version", 3, "on", 0,
                             "variations", 1, 0, "offVariation", 0);
    ck_assert(ld_test_await_bool(ld_store_upsert(x.store, ld_kind_features(), item)));
    struct resp r;
    get(&x, "/sdk/latest-flags/a%20b%2Fc", &r);
    ck_assert_int_eq(r.code, 200);
    json_t *j = body_json(&r);
    ck_assert(json_equal(j, item));
    json_decref(j);
    resp_free(&r);
    json_decref(item);
    stop(&x);
}
END_TEST

/* An item answered within the request's callback (get_now) follows the
 * store from one request to the next: replaced (a new ETag; the old one
 * gets the new item), deleted (404, also with its old ETag, and for a
 * HEAD), back, replaced again (its ETag then gets 200). "$valid" and a
 * key of 7,000 bytes are no items (404). */
START_TEST(test_an_item_answered_at_once_follows_the_store)
{
    struct fix x;
    start(&x);
    struct resp r;
    get(&x, "/sdk/latest-flags/f3", &r);
    ck_assert_int_eq(r.code, 200);
    char first[64];
    snprintf(first, sizeof first, "%s", r.etag);
    json_t *original = body_json(&r);
    resp_free(&r);
    json_t *v9 = ld_test_feature("f3", 9);
    ck_assert(ld_test_await_bool(ld_store_upsert(x.store, ld_kind_features(), v9)));
    http(&x, EVHTTP_REQ_GET, "/sdk/latest-flags/f3", KEY, first, &r);
    ck_assert_int_eq(r.code, 200);
    ck_assert_str_ne(r.etag, first);
    json_t *j = body_json(&r);
    ck_assert(json_equal(j, v9));
    json_decref(j);
    resp_free(&r);
    ck_assert(ld_test_await_bool(ld_store_delete(x.store, ld_kind_features(), "f3", 10)));
    http(&x, EVHTTP_REQ_GET, "/sdk/latest-flags/f3", KEY, first, &r);
    ck_assert_int_eq(r.code, 404);
    resp_free(&r);
    http(&x, EVHTTP_REQ_HEAD, "/sdk/latest-flags/f3", KEY, NULL, &r);
    ck_assert_int_eq(r.code, 404);
    resp_free(&r);
    /* the store keeps what it is given: each version its own object */
    json_t *v11 = json_deep_copy(original), *v12 = json_deep_copy(original);
    json_object_set_new(v11, "version", json_integer(11));
    json_object_set_new(v12, "version", json_integer(12));
    ck_assert(ld_test_await_bool(ld_store_upsert(x.store, ld_kind_features(), v11)));
    get(&x, "/sdk/latest-flags/f3", &r);
    ck_assert_int_eq(r.code, 200);
    char back[64];
    snprintf(back, sizeof back, "%s", r.etag);
    resp_free(&r);
    ck_assert(ld_test_await_bool(ld_store_upsert(x.store, ld_kind_features(), v12)));
    json_decref(v11);
    json_decref(v12);
    http(&x, EVHTTP_REQ_GET, "/sdk/latest-flags/f3", KEY, back, &r);
    ck_assert_int_eq(r.code, 200); /* version 12: another content */
    resp_free(&r);
    get(&x, "/sdk/latest-flags/%24valid", &r);
    ck_assert_int_eq(r.code, 404);
    resp_free(&r);
    get(&x, "/sdk/latest-segments/%24valid", &r);
    ck_assert_int_eq(r.code, 404);
    resp_free(&r);
    char *path = malloc(7100);
    ck_assert_ptr_nonnull(path);
    strcpy(path, "/sdk/latest-flags/");
    memset(path + strlen(path), 'k', 7000);
    path[18 + 7000] = '\0';
    get(&x, path, &r);
    ck_assert_int_eq(r.code, 404);
    resp_free(&r);
    free(path);
    json_decref(original);
    json_decref(v9);
    stop(&x);
}
END_TEST

START_TEST(test_etag_answers_304_until_the_data_changes)
{
    struct fix x;
    start(&x);
    const char *paths[] = {"/sdk/latest-all", "/sdk/latest-flags", "/sdk/latest-flags/f1",
                           "/sdk/latest-segments", "/sdk/latest-segments/s1"};
    char etags[5][64];
    for (size_t i = 0; i < 5; i++) {
        struct resp r;
        get(&x, paths[i], &r);
        ck_assert_int_eq(r.code, 200);
        ck_assert_msg(r.etag[0] == '"', "%s: no ETag", paths[i]);
        snprintf(etags[i], sizeof etags[i], "%s", r.etag);
        resp_free(&r);
        http(&x, EVHTTP_REQ_GET, paths[i], KEY, etags[i], &r);
        ck_assert_msg(r.code == 304, "%s: %d", paths[i], r.code);
        ck_assert_uint_eq(r.len, 0);
        ck_assert_str_eq(r.etag, etags[i]);
        resp_free(&r);
        http(&x, EVHTTP_REQ_GET, paths[i], KEY, "\"0000000000000000\"", &r);
        ck_assert_int_eq(r.code, 200);
        resp_free(&r);
    }
    /* the cache served the second time: no serialization */
    struct lds_server_stats st1, st2;
    lds_server_stats(x.srv, &st1);
    struct resp r;
    get(&x, "/sdk/latest-all", &r);
    resp_free(&r);
    lds_server_stats(x.srv, &st2);
    ck_assert_uint_eq(st1.serializations, st2.serializations);

    /* f1 changes: the flag collections and f1 get new tags, segments keep theirs */
    json_t *f1 = ld_test_feature("f1", 50);
    ck_assert(ld_test_await_bool(ld_store_upsert(x.store, ld_kind_features(), f1)));
    json_decref(f1);
    for (size_t i = 0; i < 5; i++) {
        http(&x, EVHTTP_REQ_GET, paths[i], KEY, etags[i], &r);
        bool changes = strstr(paths[i], "segments") == NULL;
        ck_assert_msg(r.code == (changes ? 200 : 304), "%s: %d", paths[i], r.code);
        if (changes)
            ck_assert_str_ne(r.etag, etags[i]);
        resp_free(&r);
    }
    http(&x, EVHTTP_REQ_GET, "/sdk/latest-all", KEY, "*", &r);
    ck_assert_int_eq(r.code, 304);
    resp_free(&r);
    stop(&x);
}
END_TEST

/* If-None-Match sent in two header lines is one list (RFC 9110, 5.3): a
 * tag in the second line answers 304 too. */
START_TEST(test_if_none_match_in_two_lines_is_one_list)
{
    struct fix x;
    start(&x);
    struct resp r;
    get(&x, "/sdk/latest-flags/f1", &r);
    ck_assert_int_eq(r.code, 200);
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET /sdk/latest-flags/f1 HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY
                     "\r\nIf-None-Match: \"0000000000000000\"\r\nIf-None-Match: %s\r\n"
                     "Connection: close\r\n\r\n",
                     r.etag);
    resp_free(&r);
    ck_assert_int_eq(raw_exchange(&x, req, (size_t)n, NULL), 304);
    stop(&x);
}
END_TEST

/* Keys are compared without a digest up to 256 bytes and through SHA-256
 * beyond: each way takes the key and refuses its prefixes, extensions and
 * a change of its last byte, whichever side is the longer. */
START_TEST(test_keys_long_and_short_are_compared_exactly)
{
    static const size_t lens[] = {1, 40, 255, 256, 257, 600};
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
        size_t n = lens[k];
        char *key = malloc(n + 2), *other = malloc(n + 2);
        ck_assert_ptr_nonnull(key);
        ck_assert_ptr_nonnull(other);
        for (size_t i = 0; i < n; i++)
            key[i] = (char)('a' + (i * 7 + k) % 26);
        key[n] = '\0';
        struct lds_server_options o = {0};
        o.sdk_key = key;
        struct fix x;
        start_with(&x, &o, false);
        struct resp r;
        http(&x, EVHTTP_REQ_GET, "/sdk/latest-flags/f1", key, NULL, &r);
        ck_assert_msg(r.code == 200, "a key of %zu bytes: %d", n, r.code);
        resp_free(&r);
        for (int v = 0; v < 4; v++) {
            memcpy(other, key, n + 1);
            if (v == 0 && n > 1) /* one byte short */
                other[n - 1] = '\0';
            else if (v == 1) /* one byte more */
                memcpy(other + n, "z", 2);
            else if (v == 2) /* the last byte changed */
                other[n - 1] = other[n - 1] == 'z' ? 'y' : 'z';
            else if (n > 256) /* its first 256 bytes */
                other[256] = '\0';
            else
                continue;
            if (strcmp(other, key) == 0)
                continue;
            http(&x, EVHTTP_REQ_GET, "/sdk/latest-flags/f1", other, NULL, &r);
            ck_assert_msg(r.code == 401, "key %zu bytes, variant %d: %d", n, v, r.code);
            resp_free(&r);
        }
        stop(&x);
        free(key);
        free(other);
    }
}
END_TEST

START_TEST(test_server_side_endpoints_need_the_sdk_key)
{
    struct fix x;
    start(&x);
    const char *paths[] = {"/sdk/latest-all",         "/sdk/latest-flags",
                           "/sdk/latest-flags/f1",    "/sdk/latest-segments",
                           "/sdk/latest-segments/s1", "/all"};
    const char *bad[] = {NULL, "", "sdk-test-ke", "sdk-test-key2", "api_key wrong", "Bearer x"};
    for (size_t i = 0; i < 6; i++)
        for (size_t b = 0; b < 6; b++) {
            struct resp r;
            http(&x, EVHTTP_REQ_GET, paths[i], bad[b], NULL, &r);
            ck_assert_msg(r.code == 401, "%s with %s: %d", paths[i], bad[b] ? bad[b] : "(none)",
                          r.code);
            expect_error(&r, 401);
            resp_free(&r);
        }
    struct resp r;
    http(&x, EVHTTP_REQ_GET, "/sdk/latest-flags/f1", "api_key " KEY, NULL, &r);
    ck_assert_int_eq(r.code, 200);
    resp_free(&r);
    /* /status and client-side evaluation need none */
    http(&x, EVHTTP_REQ_GET, "/status", NULL, NULL, &r);
    ck_assert_int_eq(r.code, 200);
    resp_free(&r);
    http(&x, EVHTTP_REQ_GET, "/sdk/evalx/env/contexts/eyJrZXkiOiJ1MSJ9", NULL, NULL, &r);
    ck_assert_int_eq(r.code, 200);
    resp_free(&r);
    stop(&x);
}
END_TEST

START_TEST(test_status_reports_source_store_and_counts)
{
    struct fix x;
    start(&x);
    struct resp r;
    http(&x, EVHTTP_REQ_GET, "/status", NULL, NULL, &r);
    ck_assert_int_eq(r.code, 200);
    json_t *j = body_json(&r);
    json_t *ds = json_object_get(j, "dataSource");
    ck_assert_str_eq(json_string_value(json_object_get(ds, "state")), "interrupted");
    ck_assert_int_eq(json_integer_value(json_object_get(ds, "stateSince")), 1700000000000);
    json_t *err = json_object_get(ds, "lastError");
    ck_assert_str_eq(json_string_value(json_object_get(err, "kind")), "invalid_data");
    ck_assert_str_eq(json_string_value(json_object_get(err, "message")), "bad file");
    json_t *store = json_object_get(j, "store");
    ck_assert_str_eq(json_string_value(json_object_get(store, "description")), "memory");
    ck_assert(json_is_true(json_object_get(store, "initialized")));
    ck_assert_int_eq(json_integer_value(json_object_get(j, "flags")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "segments")), 1);
    ck_assert(json_is_integer(json_object_get(j, "uptimeMs")));
    ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "degraded");
    /* no flag data */
    ck_assert_ptr_null(strstr(r.body, "variations"));
    ck_assert_ptr_null(strstr(r.body, "\"f1\""));
    json_decref(j);
    resp_free(&r);
    stop(&x);
}
END_TEST

/* ---- hostile input ----------------------------------------------------------------- */

START_TEST(test_unknown_paths_and_methods)
{
    struct fix x;
    start(&x);
    const char *missing[] = {"/",
                             "/nope",
                             "/sdk",
                             "/sdk/latest-all/x",
                             "/sdk/latest-flags/a/b",
                             "/sdk/evalx/env",
                             "/sdk/evalx/env/contexts",
                             "/all/x",
                             "/a/b/c/d/e/f/g/h",
                             "/sdk/evalx//contexts/eyJrZXkiOiJ1MSJ9"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        struct resp r;
        get(&x, missing[i], &r);
        ck_assert_msg(r.code == 404, "%s: %d", missing[i], r.code);
        expect_error(&r, 404);
        resp_free(&r);
    }
    struct {
        enum evhttp_cmd_type m;
        const char *path;
    } wrong[] = {{EVHTTP_REQ_POST, "/sdk/latest-all"},
                 {EVHTTP_REQ_DELETE, "/sdk/latest-flags/f1"},
                 {EVHTTP_REQ_PUT, "/status"},
                 {EVHTTP_REQ_HEAD, "/all"},
                 {EVHTTP_REQ_POST, "/sdk/evalx/env/context"},
                 {EVHTTP_REQ_GET, "/sdk/evalx/env/context"},
                 {EVHTTP_REQ_POST, "/sdk/evalx/env/contexts/eyJrZXkiOiJ1MSJ9"}};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        struct resp r;
        /* a connection each: libevent's client gets lost after a HEAD */
        evhttp_connection_free(conn_of(&x));
        x.conn = NULL;
        http(&x, wrong[i].m, wrong[i].path, KEY, NULL, &r);
        ck_assert_msg(r.code == 405, "%s: %d", wrong[i].path, r.code);
        ck_assert_msg(r.allow[0] != '\0', "%s: no Allow", wrong[i].path);
        if (wrong[i].m != EVHTTP_REQ_HEAD)
            expect_error(&r, 405);
        resp_free(&r);
    }
    /* an unknown method elsewhere than the REPORT path */
    static const char foo[] = "FOO /sdk/latest-all HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                              "Authorization: " KEY "\r\n\r\n";
    ck_assert_int_eq(raw_exchange(&x, foo, sizeof foo - 1, NULL), 405);
    stop(&x);
}
END_TEST

START_TEST(test_head_answers_have_headers_but_no_body)
{
    struct fix x;
    start(&x);
    /* two HEADs (an item, a 404) then a GET, pipelined on one connection:
     * a body after a HEAD's headers would be taken for the next answer */
    static const char req[] = "HEAD /sdk/latest-flags/f1 HTTP/1.1\r\nHost: x\r\n"
                              "Authorization: " KEY "\r\n\r\n"
                              "HEAD /sdk/latest-flags/nope HTTP/1.1\r\nHost: x\r\n"
                              "Authorization: " KEY "\r\n\r\n"
                              "GET /sdk/latest-flags/f1 HTTP/1.1\r\nHost: x\r\n"
                              "Authorization: " KEY "\r\nConnection: close\r\n\r\n";
    struct raw r;
    ck_assert_int_eq(raw_exchange(&x, req, sizeof req - 1, &r), 200);
    const char *t = raw_text(&r);
    const char *second = strstr(t, "\r\n\r\n");
    ck_assert_ptr_nonnull(second);
    second += 4;
    ck_assert_msg(strncmp(second, "HTTP/1.1 404 ", 13) == 0, "after the first HEAD: %.200s",
                  second);
    const char *third = strstr(second, "\r\n\r\n");
    ck_assert_ptr_nonnull(third);
    third += 4;
    ck_assert_msg(strncmp(third, "HTTP/1.1 200 ", 13) == 0, "after the second HEAD: %.200s", third);
    /* the HEAD says how long the GET's body is */
    const char *body = strstr(third, "\r\n\r\n");
    ck_assert_ptr_nonnull(body);
    char want[64];
    snprintf(want, sizeof want, "Content-Length: %zu\r\n", strlen(body + 4));
    ck_assert_msg(strstr(t, want) && strstr(t, want) < second, "HEAD without \"%s\": %.300s", want,
                  t);
    raw_close(&r);
    stop(&x);
}
END_TEST

/* A body that evhttp does not read (it reads none for HEAD or TRACE, nor
 * for a Transfer-Encoding other than chunked) must not be taken for the
 * next request on the connection: a proxy in front, framing by the
 * headers, would have a request through that it never saw (smuggling).
 * The connection is closed after the answer (a Transfer-Encoding that is
 * not chunked: 400, RFC 9112 6.1), and the body is never answered. */
START_TEST(test_a_body_left_unread_is_not_taken_for_a_request)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.timeout_s = 2; /* a connection kept open ends at the timeout */
    start_with(&x, &o, false);
    static const char inner[] = "GET /sdk/latest-segments HTTP/1.1\r\nHost: x\r\n"
                                "Authorization: " KEY "\r\n\r\n";
    /* the request's head, and how its body (`inner`) is framed: 'l' with
     * Content-Length, 'c' chunked, 'n' not at all */
    static const struct {
        const char *head;
        char framing;
        int want;
    } cases[] = {
        {"HEAD /sdk/latest-flags/f1 HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "\r\n", 'l', 200},
        {"TRACE /status HTTP/1.1\r\nHost: x\r\n", 'l', 405},
        {"HEAD /status HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n", 'c', 200},
        {"GET /status HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n", 'n', 400},
        {"GET /status HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n", 'c', 400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char req[1024];
        size_t n = sizeof inner - 1;
        if (cases[i].framing == 'l')
            snprintf(req, sizeof req, "%sContent-Length: %zu\r\n\r\n%s", cases[i].head, n, inner);
        else if (cases[i].framing == 'c')
            snprintf(req, sizeof req, "%s\r\n%zx\r\n%s\r\n0\r\n\r\n", cases[i].head, n, inner);
        else
            snprintf(req, sizeof req, "%s\r\n%s", cases[i].head, inner);
        struct raw r;
        int code = raw_exchange(&x, req, strlen(req), &r);
        ck_assert_msg(code == cases[i].want, "request %zu: %d", i, code);
        const char *t = raw_text(&r);
        ck_assert_msg(!strstr(t + 1, "HTTP/1.1 "), "request %zu: its body was answered: %s", i, t);
        ck_assert_msg(strstr(t, "Connection: close\r\n"), "request %zu: kept open: %s", i, t);
        raw_close(&r);
    }
    stop(&x);
}
END_TEST

START_TEST(test_bad_encodings_are_400)
{
    struct fix x;
    start(&x);
    const char *bad[] = {
        "/sdk/latest-flags/%zz",
        "/sdk/latest-flags/%4",
        "/sdk/latest-flags/a%",
        "/sdk/latest-flags/a%00b",
        "/sdk/latest-all?x=%g1",
        "/sdk/evalx/env/contexts/!!!!",                            /* not base64 */
        "/sdk/evalx/env/contexts/a",                               /* a length base64 cannot have */
        "/sdk/evalx/env/contexts/bm90IGpzb24",                     /* "not json" */
        "/sdk/evalx/env/contexts/eyJraW5kIjoidXNlciJ9",            /* {"kind":"user"}: no key */
        "/sdk/evalx/env/contexts/WzEsMl0",                         /* [1,2] */
        "/sdk/evalx/env/contexts/eyJrZXkiOiJ1MSIsImtleSI6InUyIn0", /* duplicate key */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct resp r;
        get(&x, bad[i], &r);
        ck_assert_msg(r.code == 400, "%s: %d %s", bad[i], r.code, r.body);
        expect_error(&r, 400);
        resp_free(&r);
    }
    stop(&x);
}
END_TEST

START_TEST(test_keys_that_are_not_utf8_are_400)
{
    struct fix x;
    start(&x);
    /* no key can be one (a store's keys are UTF-8): the client's error,
     * not the server's */
    const char *bad[] = {"/sdk/latest-flags/%ff%fe", "/sdk/latest-flags/a%80",
                         "/sdk/latest-segments/%c0%af"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct resp r;
        get(&x, bad[i], &r);
        ck_assert_msg(r.code == 400, "%s: %d %s", bad[i], r.code, r.body);
        expect_error(&r, 400);
        resp_free(&r);
    }
    const char *absent[] = {"/sdk/latest-flags/%C3%A9", "/sdk/latest-flags/%F0%9F%98%80"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        struct resp r;
        get(&x, absent[i], &r);
        ck_assert_msg(r.code == 404, "%s: %d %s", absent[i], r.code, r.body);
        resp_free(&r);
    }
    stop(&x);
}
END_TEST

/* A client socket with a receive buffer of `rcvbuf` bytes, connected to
 * the server on `port`, that has sent `req` (a request, or what a test
 * sends). */
static int small_buffer_client(int port, int rcvbuf, const char *req)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in sin = {0};
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    size_t n = strlen(req);
    ck_assert_int_eq(write(fd, req, n), (ssize_t)n);
    return fd;
}

static char *big(size_t n, char c)
{
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

START_TEST(test_oversized_requests_are_refused)
{
    struct fix x;
    start(&x); /* limits: URI 8192, headers 16384, body 65536 */
    char *req = malloc(1 << 20);
    ck_assert_ptr_nonnull(req);
    struct raw r;

    /* a request target above the limit: 414 (JSON) */
    char *path = big(10000, 'a');
    int n = snprintf(req, 1 << 20, "GET /sdk/latest-flags/%s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    ck_assert_int_eq(raw_exchange(&x, req, (size_t)n, &r), 414);
    ck_assert_ptr_nonnull(strstr(raw_text(&r), "{\"error\":"));
    raw_close(&r);

    /* header lines above the limit: 431 (JSON) */
    char *val = big(20000, 'h');
    n = snprintf(req, 1 << 20, "GET /status HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", val);
    ck_assert_int_eq(raw_exchange(&x, req, (size_t)n, &r), 431);
    ck_assert_ptr_nonnull(strstr(raw_text(&r), "{\"error\":"));
    raw_close(&r);

    /* a body above the limit: 413 (JSON) */
    char *body = big(100000, ' ');
    n = snprintf(req, 1 << 20,
                 "REPORT /sdk/evalx/env/context HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 "application/json\r\nContent-Length: %zu\r\n\r\n%s",
                 strlen(body), body);
    ck_assert_int_eq(raw_exchange(&x, req, (size_t)n, &r), 413);
    ck_assert_ptr_nonnull(strstr(raw_text(&r), "{\"error\":"));
    raw_close(&r);

    /* beyond 4 times the limits libevent refuses by itself (its own 400 or
     * 413 page) and closes */
    free(val);
    val = big(200000, 'h');
    n = snprintf(req, 1 << 20, "GET /status HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", val);
    int code = raw_exchange(&x, req, (size_t)n, NULL);
    ck_assert_msg(code == 400 || code == 413, "%d", code);
    n = snprintf(req, 1 << 20,
                 "REPORT /sdk/evalx/env/context HTTP/1.1\r\nHost: x\r\nContent-Length: "
                 "999999999\r\n\r\n");
    ck_assert_int_eq(raw_exchange(&x, req, (size_t)n, NULL), 413);
    /* an endless request line is cut off too */
    free(path);
    path = big(300000, 'a');
    n = snprintf(req, 1 << 20, "GET /%s", path);
    code = raw_exchange(&x, req, (size_t)n, NULL);
    ck_assert_msg(code == 400 || code == 413, "%d", code);

    /* still serving */
    struct resp ok;
    get(&x, "/sdk/latest-flags/f1", &ok);
    ck_assert_int_eq(ok.code, 200);
    resp_free(&ok);
    free(path);
    free(val);
    free(body);
    free(req);
    stop(&x);
}
END_TEST

START_TEST(test_garbage_closes_the_connection)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.timeout_s = 1; /* what never ends a line waits for the timeout */
    start_with(&x, &o, false);
    static const char *const garbage[] = {
        "\x00\x01\x02\x03\r\n\r\n",
        "GET\r\n\r\n",
        "GET / HTTP/9.9\r\n\r\n",
        "GET /status HTTP/1.1\r\nno colon here\r\n\r\n",
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", /* TLS hello */
        "GET /status HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        "GET /status HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    };
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        size_t len = i == 0 ? 8 : i == 4 ? 11 : strlen(garbage[i]);
        struct raw r;
        int code = raw_exchange(&x, garbage[i], len, &r);
        ck_assert_msg(code == 0 || (code >= 400 && code < 500), "garbage %zu: %d", i, code);
        ck_assert(r.eof);
        raw_close(&r);
    }
    struct resp r;
    get(&x, "/status", &r);
    ck_assert_int_eq(r.code, 200);
    resp_free(&r);
    stop(&x);
}
END_TEST

static void raw_sends(struct raw *r, const char *text)
{
    raw_send(r, text, strlen(text));
}

/* Sends `line` on `r` every 200 ms until the server closes the connection
 * or `ms` pass. @return the milliseconds it took the server. */
static long dribble(struct raw *r, const char *line, long ms)
{
    struct timeval t0, t;
    gettimeofday(&t0, NULL);
    long took = 0;
    while (!r->eof && took < ms) {
        raw_sends(r, line);
        struct timeval tick = {0, 200000};
        event_base_loopexit(ld_test_base, &tick);
        event_base_dispatch(ld_test_base);
        gettimeofday(&t, NULL);
        took = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_usec - t0.tv_usec) / 1000;
    }
    return took;
}

START_TEST(test_a_request_sent_slowly_is_cut_at_the_timeout)
{
    /* slowloris: a byte now and then restarts libevent's read timeout;
     * a connection that never completes a request must not be held */
    struct fix x;
    struct lds_server_options o = {0};
    o.timeout_s = 1;
    start_with(&x, &o, false);
    struct raw r;
    raw_open(&r, x.port);
    raw_sends(&r, "GET /status HTTP/1.1\r\nHost: x\r\n");
    long took = dribble(&r, "X-A: b\r\n", 3000);
    ck_assert_msg(r.eof, "the connection was still open after %ld ms", took);
    ck_assert_int_eq(raw_status(&r), 0); /* no answer: closed */
    raw_close(&r);
    /* the same for the second request of a keep-alive connection, and for
     * a REPORT's body */
    raw_open(&r, x.port);
    raw_sends(&r, "GET /status HTTP/1.1\r\nHost: x\r\n\r\nGET /status HTTP/1.1\r\n");
    raw_wait_for(&r, "\"uptimeMs\"");
    took = dribble(&r, "X-A: b\r\n", 3000);
    ck_assert_msg(r.eof, "the keep-alive connection was still open after %ld ms", took);
    raw_close(&r);
    raw_open(&r, x.port);
    static const char rep[] = "REPORT /sdk/evalx/env/context HTTP/1.1\r\nHost: x\r\n"
                              "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{";
    raw_send(&r, rep, sizeof rep - 1);
    took = dribble(&r, " ", 3000);
    ck_assert_msg(r.eof, "the REPORT was still open after %ld ms", took);
    raw_close(&r);
    /* a request that comes whole, late, on an idle keep-alive connection
     * is answered */
    raw_open(&r, x.port);
    raw_sends(&r, "GET /status HTTP/1.1\r\nHost: x\r\n\r\n");
    raw_wait_for(&r, "\"uptimeMs\"");
    evbuffer_drain(r.got, evbuffer_get_length(r.got));
    struct timeval idle = {0, 700000};
    event_base_loopexit(ld_test_base, &idle);
    event_base_dispatch(ld_test_base);
    raw_sends(&r, "GET /status HTTP/1.1\r\nHost: x\r\n\r\n");
    raw_wait_for(&r, "\"uptimeMs\"");
    raw_close(&r);
    stop(&x);
}
END_TEST

static long ms_since(const struct timeval *t0)
{
    struct timeval t;
    gettimeofday(&t, NULL);
    return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_usec - t0->tv_usec) / 1000;
}

/* The time a request has to come runs from the previous answer: a
 * connection answered 0.6 s after it opened stays open past the first
 * second (the timer armed at the start is moved on when it fires), and is
 * closed a timeout after that answer. */
START_TEST(test_the_deadline_runs_from_the_last_answer)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.timeout_s = 1;
    start_with(&x, &o, false);
    struct raw r;
    raw_open(&r, x.port);
    raw_sends(&r, "GET /status HTTP/1.1\r\nHost: x\r\n\r\n");
    raw_wait_for(&r, "\"uptimeMs\"");
    evbuffer_drain(r.got, evbuffer_get_length(r.got));
    struct timeval idle = {0, 600000};
    event_base_loopexit(ld_test_base, &idle);
    event_base_dispatch(ld_test_base);
    ck_assert(!r.eof);
    raw_sends(&r, "GET /status HTTP/1.1\r\nHost: x\r\n\r\n");
    raw_wait_for(&r, "\"uptimeMs\"");
    struct timeval answered;
    gettimeofday(&answered, NULL);
    while (!r.eof && ms_since(&answered) < 10000)
        loop_once();
    long ms = ms_since(&answered);
    ck_assert_msg(r.eof, "still open %ld ms after the last answer", ms);
    ck_assert_msg(ms >= 900, "closed %ld ms after the last answer (timeout 1 s)", ms);
    raw_close(&r);
    stop(&x);
}
END_TEST

/* A socket with a small receive buffer that asked for the huge flag. */
static int slow_reader_of_huge(struct fix *x, size_t n)
{
    char *filler = big(n, 'z');
    json_t *item = json_pack("{s:s,s:i,s:b,s:[bb],s:i,s:s}", "key", "huge", "version", 1, "on", 0,
                             "variations", 1, 0, "offVariation", 0, "filler", filler);
    free(filler);
    ck_assert(ld_test_await_bool(ld_store_upsert(x->store, ld_kind_features(), item)));
    json_decref(item);
    static const char req[] = "GET /sdk/latest-flags/huge HTTP/1.1\r\nHost: x\r\n"
                              "Authorization: " KEY "\r\nConnection: close\r\n\r\n";
    int fd = small_buffer_client(x->port, 64 * 1024, req);
    evutil_make_socket_nonblocking(fd);
    return fd;
}

/* Runs the loop for about `ms` milliseconds. */
static void run_for_ms(int ms)
{
    struct timeval tick = {0, ms * 1000};
    event_base_loopexit(ld_test_base, &tick);
    event_base_dispatch(ld_test_base);
}

/* Reads `fd` (non-blocking) to its end, running the loop for `tick_ms`
 * after each read, and adds what it read to *got. @return how long that
 * took, in milliseconds; fails the test after `limit_s` seconds. */
static long read_to_end(int fd, int tick_ms, int limit_s, size_t *got)
{
    static char chunk[64 * 1024];
    struct timeval t0, t;
    gettimeofday(&t0, NULL);
    t = t0;
    for (;;) {
        ssize_t k = read(fd, chunk, sizeof chunk);
        if (k == 0 || (k < 0 && errno != EAGAIN))
            break;
        if (k > 0)
            *got += (size_t)k;
        run_for_ms(tick_ms);
        gettimeofday(&t, NULL);
        ck_assert_int_lt(t.tv_sec - t0.tv_sec, limit_s);
    }
    return (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_usec - t0.tv_usec) / 1000;
}

START_TEST(test_a_large_answer_read_slowly_is_not_cut_at_the_timeout)
{
    /* the deadline of the next request starts when an answer is written,
     * not when it is handed to libevent: a reader taking longer than the
     * timeout to read a large answer, but reading, gets all of it */
    struct fix x;
    struct lds_server_options o = {0};
    o.timeout_s = 1;
    start_with(&x, &o, false);
    size_t n = 24u << 20;
    /* a reader of at most 64 KiB every 10 ms: over 3 s for all of it */
    int fd = slow_reader_of_huge(&x, n);
    size_t got = 0;
    long ms = read_to_end(fd, 10, 60, &got);
    close(fd);
    ck_assert_msg(got > n, "%zu bytes of over %zu in %ld ms; log: %s", got, n, ms, x.log);
    ck_assert_msg(ms > 1500, "read in %ld ms: not slowly enough to test", ms);
    stop(&x);
}
END_TEST

/* A flag "mid" whose answer is `n` bytes of filler and a little more. */
static void upsert_filler_flag(struct fix *x, const char *key, size_t n)
{
    char *filler = big(n, 'y');
    json_t *item = json_pack("{s:s,s:i,s:b,s:[bb],s:i,s:s}", "key", key, "version", 1, "on", 0,
                             "variations", 1, 0, "offVariation", 0, "filler", filler);
    free(filler);
    ck_assert(ld_test_await_bool(ld_store_upsert(x->store, ld_kind_features(), item)));
    json_decref(item);
}

/* `n` pipelined requests for latest-flags/{key}, in one string. */
static char *pipelined(const char *key, int n)
{
    char one[256];
    int len = snprintf(
        one, sizeof one,
        "GET /sdk/latest-flags/%s HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "\r\n\r\n", key);
    char *all = malloc((size_t)len * (size_t)n + 1);
    ck_assert_ptr_nonnull(all);
    for (int i = 0; i < n; i++)
        memcpy(all + (size_t)i * (size_t)len, one, (size_t)len);
    all[(size_t)len * (size_t)n] = '\0';
    return all;
}

/* Small answers (under LDS_SMALL_ANSWER) keep the connection's read and
 * write timeouts: a client that pipelines many and reads none of them is
 * still dropped, about a timeout after the socket stopped taking them. */
START_TEST(test_a_client_that_reads_no_small_answers_is_dropped)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.timeout_s = 1;
    start_with(&x, &o, false);
    upsert_filler_flag(&x, "mid", 12 * 1024);
    char *reqs = pipelined("mid", 1000); /* over 12 MB of answers */
    int fd = small_buffer_client(x.port, 4096, reqs);
    free(reqs);
    struct lds_server_stats st;
    struct timeval t0;
    gettimeofday(&t0, NULL);
    do {
        run_for_ms(50);
        lds_server_stats(x.srv, &st);
    } while (st.connections > 0 && ms_since(&t0) < 15000);
    ck_assert_msg(st.connections == 0, "still open after %ld ms (%llu answered); log: %s",
                  ms_since(&t0), (unsigned long long)st.requests, x.log);
    ck_assert_msg(st.requests < 1000, "all %llu answered: nothing was held up",
                  (unsigned long long)st.requests);
    close(fd);
    stop(&x);
}
END_TEST

/* One keep-alive connection, read slowly: a large answer (written with the
 * write timeout alone), small ones, a large one again, all pipelined; the
 * reader takes longer than the timeout but reads, and gets every answer. */
START_TEST(test_large_and_small_answers_on_one_connection_read_slowly)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.timeout_s = 1;
    start_with(&x, &o, false);
    upsert_filler_flag(&x, "large", 3u << 20);
    upsert_filler_flag(&x, "small", 1000);
    const char *order[] = {"large", "small", "small", "large", "small"};
    char reqs[2048] = "";
    for (size_t i = 0; i < 5; i++)
        snprintf(reqs + strlen(reqs), sizeof reqs - strlen(reqs),
                 "GET /sdk/latest-flags/%s HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "%s\r\n\r\n",
                 order[i], i == 4 ? "\r\nConnection: close" : "");
    int fd = small_buffer_client(x.port, 64 * 1024, reqs);
    evutil_make_socket_nonblocking(fd);
    size_t got = 0;
    /* at most 64 KiB every 20 ms: over 3 MB/s, 2 s for the two large ones */
    long ms = read_to_end(fd, 20, 60, &got);
    close(fd);
    ck_assert_msg(got > 2 * (3u << 20) + 3 * 1000, "%zu bytes in %ld ms; log: %s", got, ms, x.log);
    ck_assert_msg(ms > 1500, "read in %ld ms: not slowly enough to test", ms);
    struct lds_server_stats st;
    lds_server_stats(x.srv, &st);
    ck_assert_uint_eq(st.requests, 5);
    stop(&x);
}
END_TEST

/* An item asked for while a large init loads (the memory store answers it
 * after the init, in issue order: get_now says LD_EBUSY) is the init's:
 * the request waits for it, and the answer is the new item, with the new
 * ETag; the old one is gone. A HEAD and a 304 answer wait the same way. */
START_TEST(test_an_item_asked_for_during_a_large_init_is_the_init_s)
{
    struct fix x;
    start(&x);
    struct resp r;
    get(&x, "/sdk/latest-flags/f1", &r);
    ck_assert_int_eq(r.code, 200);
    char old_etag[64];
    snprintf(old_etag, sizeof old_etag, "%s", r.etag);
    resp_free(&r);
    json_t *flags = json_object();
    for (int i = 0; i < 3000; i++) {
        char key[16];
        snprintf(key, sizeof key, "f%d", i);
        json_object_set_new(flags, key, json_pack("{s:s, s:i}", "key", key, "version", 42));
    }
    json_t *data = json_pack("{s:o, s:{}}", "features", flags, "segments");
    ld_future *init = ld_store_init(x.store, data);
    json_decref(data);
    json_t *item = json_true();
    ck_assert_int_eq(ld_store_get_now(x.store, ld_kind_features(), "f1", &item), LD_EBUSY);
    http(&x, EVHTTP_REQ_GET, "/sdk/latest-flags/f1", KEY, old_etag, &r);
    ck_assert(ld_future_is_fulfilled(init)); /* the answer came after the init */
    ck_assert_int_eq(r.code, 200);
    ck_assert_str_ne(r.etag, old_etag);
    json_t *j = body_json(&r);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "version")), 42);
    json_decref(j);
    resp_free(&r);
    get(&x, "/sdk/latest-flags/f2999", &r);
    ck_assert_int_eq(r.code, 200);
    resp_free(&r);
    get(&x, "/sdk/latest-segments/s1", &r); /* gone with the init */
    ck_assert_int_eq(r.code, 404);
    resp_free(&r);
    ld_future_unref(init);
    stop(&x);
}
END_TEST

/* With a store that answers later (no get_now), item requests pipelined on
 * one connection are answered in order, each with its own answer: 200,
 * 404, 400 (a key not valid UTF-8), 304, HEAD. */
START_TEST(test_pipelined_items_from_a_store_that_answers_later)
{
    struct fix x;
    start_with(&x, NULL, true);
    struct resp r;
    get(&x, "/sdk/latest-flags/f2", &r);
    ck_assert_int_eq(r.code, 200);
    char etag[64], reqs[2048];
    snprintf(etag, sizeof etag, "%s", r.etag);
    resp_free(&r);
    snprintf(reqs, sizeof reqs,
             "GET /sdk/latest-flags/f2 HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "\r\n\r\n"
             "GET /sdk/latest-flags/none HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "\r\n\r\n"
             "GET /sdk/latest-segments/%%ff HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "\r\n\r\n"
             "GET /sdk/latest-flags/f2 HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY
             "\r\nIf-None-Match: %s\r\n\r\n"
             "HEAD /sdk/latest-segments/s1 HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY
             "\r\nConnection: close\r\n\r\n",
             etag);
    struct raw w;
    raw_open(&w, x.port);
    raw_sends(&w, reqs);
    raw_wait_eof(&w);
    const char *t = raw_text(&w);
    static const char *const want[] = {"HTTP/1.1 200", "HTTP/1.1 404", "HTTP/1.1 400",
                                       "HTTP/1.1 304", "HTTP/1.1 200"};
    const char *at = t;
    for (int i = 0; i < 5; i++) {
        at = strstr(at, want[i]);
        ck_assert_msg(at != NULL, "answer %d (%s) missing or out of order: %s", i, want[i], t);
        at++;
    }
    ck_assert_ptr_null(strstr(at, "HTTP/1.1 "));
    ck_assert_ptr_nonnull(strstr(t, "\"key\":\"f2\""));
    ck_assert_ptr_nonnull(strstr(t, "no such flag"));
    ck_assert_ptr_nonnull(strstr(t, "valid UTF-8"));
    ck_assert_ptr_null(strstr(t, "\"included\"")); /* the HEAD's body is not sent */
    raw_close(&w);
    stop(&x);
}
END_TEST

/* Many keep-alive connections, each answered several times 0.3 s apart
 * (their deadline timers armed once, moved on as they fire), one
 * dribbling a request: the answered ones stay open past the first
 * timeout, the dribbler is cut; then the server is freed with the timers
 * pending, and the loop runs past when they were due (ASan). */
START_TEST(test_deadlines_of_many_connections_then_free_with_timers_pending)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.timeout_s = 1;
    start_with(&x, &o, false);
    enum { N = 40 };
    static struct raw r[N];
    struct raw slow;
    raw_open(&slow, x.port);
    raw_sends(&slow, "GET /sdk/latest-flags/f1 HTTP/1.1\r\n");
    for (int i = 0; i < N; i++)
        raw_open(&r[i], x.port);
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < N; i++) {
            evbuffer_drain(r[i].got, evbuffer_get_length(r[i].got));
            raw_sends(&r[i], "GET /sdk/latest-flags/f1 HTTP/1.1\r\nHost: x\r\n"
                             "Authorization: " KEY "\r\n\r\n");
        }
        for (int i = 0; i < N; i++)
            raw_wait_for(&r[i], "\"key\":\"f1\"");
        if (!slow.eof)
            raw_sends(&slow, "X: y\r\n");
        run_for_ms(300);
    }
    /* 1.5 s and more after they opened */
    for (int i = 0; i < N; i++)
        ck_assert_msg(!r[i].eof, "connection %d cut while answered every 0.3 s", i);
    ck_assert_msg(slow.eof, "the dribbled request was not cut; log: %s", x.log);
    struct lds_server_stats st;
    lds_server_stats(x.srv, &st);
    ck_assert_uint_eq(st.connections, N);
    lds_server_free(x.srv);
    x.srv = NULL;
    run_for_ms(1200);
    for (int i = 0; i < N; i++) {
        raw_wait_eof(&r[i]);
        raw_close(&r[i]);
    }
    raw_close(&slow);
    stop(&x);
}
END_TEST

/* A REPORT's body has a timeout of its own from when its headers came: a
 * request whose headers took 0.6 s and whose body took 0.6 s more (over
 * the 1 s timeout in all) is answered, although the deadline's timer,
 * armed when the connection opened, fires in between (it is moved on). */
START_TEST(test_a_report_body_has_its_own_time_after_slow_headers)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.timeout_s = 1;
    start_with(&x, &o, false);
    struct raw r;
    raw_open(&r, x.port);
    raw_sends(&r, "REPORT /sdk/evalx/env/context HTTP/1.1\r\nHost: x\r\n");
    static const char *const lines[] = {"Content-Type: application/json\r\n", "X-A: b\r\n",
                                        "Content-Length: 12\r\n\r\n"};
    static const char *const body[] = {"{\"key\":", "\"u1", "\"}"};
    for (int i = 0; i < 3; i++) {
        run_for_ms(200);
        ck_assert_msg(!r.eof, "cut while its headers came; log: %s", x.log);
        raw_sends(&r, lines[i]);
    }
    for (int i = 0; i < 3; i++) {
        run_for_ms(200);
        ck_assert_msg(!r.eof, "cut while its body came (part %d); log: %s", i, x.log);
        raw_sends(&r, body[i]);
    }
    raw_wait_for(&r, "}}");
    ck_assert_int_eq(raw_status(&r), 200);
    raw_close(&r);
    stop(&x);
}
END_TEST

START_TEST(test_close_waits_for_answers_being_sent)
{
    /* an answer still being written when the server closes is sent whole
     * before the close is done (SIGTERM in ldasync-serve): its reader gets
     * all of it */
    struct fix x;
    start(&x);
    size_t n = 4u << 20;
    int fd = slow_reader_of_huge(&x, n);
    static char chunk[64 * 1024];
    size_t got = 0;
    while (got == 0) { /* the answer is on its way */
        ssize_t k = read(fd, chunk, sizeof chunk);
        if (k > 0)
            got += (size_t)k;
        run_for_ms(1);
    }
    ld_future *closed = lds_server_close(x.srv);
    ck_assert_ptr_nonnull(closed);
    run_for_ms(20);
    ck_assert_msg(ld_future_is_pending(closed), "closed with the answer unsent; log: %s", x.log);
    read_to_end(fd, 1, 30, &got);
    close(fd);
    ck_assert_msg(got > n, "%zu bytes of over %zu; log: %s", got, n, x.log);
    for (int i = 0; i < 2000 && ld_future_is_pending(closed); i++)
        run_for_ms(1);
    ck_assert_msg(ld_future_is_fulfilled(closed), "log: %s", x.log);
    ck_assert_ptr_null(strstr(x.log, "left unsent"));
    ld_future_unref(closed);
    stop(&x);
}
END_TEST

START_TEST(test_close_waits_at_most_the_timeout_for_a_reader_that_reads_nothing)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.timeout_s = 1;
    start_with(&x, &o, false);
    int fd = slow_reader_of_huge(&x, 4u << 20);
    run_for_ms(50); /* the answer is written, the reader's buffers full */
    struct timeval t0, t;
    gettimeofday(&t0, NULL);
    t = t0;
    ld_future *closed = lds_server_close(x.srv);
    ck_assert_ptr_nonnull(closed);
    while (ld_future_is_pending(closed)) {
        run_for_ms(10);
        gettimeofday(&t, NULL);
        ck_assert_int_lt(t.tv_sec - t0.tv_sec, 10);
    }
    long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_usec - t0.tv_usec) / 1000;
    ck_assert_msg(ms >= 900, "closed after %ld ms, not the 1 s timeout; log: %s", ms, x.log);
    ck_assert_msg(strstr(x.log, "[warn] closing: ") && strstr(x.log, "bytes left unsent"),
                  "log: %s", x.log);
    ld_future_unref(closed);
    close(fd);
    stop(&x);
}
END_TEST

START_TEST(test_free_while_the_close_waits_for_answers_to_be_sent)
{
    /* freed while its close waits for a reader that reads nothing: the
     * close's future is fulfilled, its timer goes with the server */
    struct fix x;
    start(&x);
    int fd = slow_reader_of_huge(&x, 4u << 20);
    run_for_ms(50);
    ld_future *closed = lds_server_close(x.srv);
    ck_assert_ptr_nonnull(closed);
    run_for_ms(30);
    ck_assert_msg(ld_future_is_pending(closed), "log: %s", x.log);
    lds_server_free(x.srv);
    x.srv = NULL;
    ck_assert(ld_future_is_fulfilled(closed));
    ld_future_unref(closed);
    run_for_ms(30); /* the drain's timer would have fired by now */
    close(fd);
    stop(&x);
}
END_TEST

START_TEST(test_connections_beyond_the_limit_get_503)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.max_connections = 2;
    start_with(&x, &o, false);
    struct raw a, b, c;
    static const char req[] = "GET /status HTTP/1.1\r\nHost: x\r\n\r\n";
    raw_open(&a, x.port);
    raw_send(&a, req, sizeof req - 1);
    raw_wait_for(&a, "\"uptimeMs\"");
    raw_open(&b, x.port);
    raw_send(&b, req, sizeof req - 1);
    raw_wait_for(&b, "\"uptimeMs\"");
    /* the third is refused: closed at once, unanswered (or 503 if its
     * request came first) */
    raw_open(&c, x.port);
    raw_send(&c, req, sizeof req - 1);
    raw_wait_eof(&c);
    int code = raw_status(&c);
    ck_assert_msg(code == 0 || code == 503, "%d", code);
    raw_close(&c);
    /* once one goes, a new one is served */
    raw_close(&a);
    struct lds_server_stats st;
    do {
        loop_once();
        lds_server_stats(x.srv, &st);
    } while (st.connections > 1);
    raw_open(&c, x.port);
    raw_send(&c, req, sizeof req - 1);
    raw_wait_for(&c, "\"uptimeMs\"");
    raw_close(&c);
    raw_close(&b);
    stop(&x);
}
END_TEST

/* ---- streaming --------------------------------------------------------------------- */

static void stream_open(struct fix *x, struct raw *r)
{
    static const char req[] = "GET /all HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                              "Authorization: " KEY "\r\n\r\n";
    raw_open(r, x->port);
    raw_send(r, req, sizeof req - 1);
}

/* Runs the loop until the server has `n` streams open (started or not). */
static void wait_for_streams(struct fix *x, uint64_t n)
{
    struct lds_server_stats st;
    do {
        loop_once();
        lds_server_stats(x->srv, &st);
    } while (st.streams < n);
}

START_TEST(test_stream_sends_put_then_patch_and_delete)
{
    struct fix x;
    start(&x);
    struct raw r;
    stream_open(&x, &r);
    raw_wait_for(&r, "event: put\ndata: {\"path\":\"/\",\"data\":{\"flags\":{");
    ck_assert_ptr_nonnull(strstr(raw_text(&r), "text/event-stream"));
    ck_assert_ptr_nonnull(strstr(raw_text(&r), "\"segments\":{\"s1\":{"));
    /* the put holds the store's data */
    const char *t = strstr(raw_text(&r), "data: ");
    const char *end = strstr(t, "\n\n");
    json_error_t e;
    json_t *put = json_loadb(t + 6, (size_t)(end - t - 6), 0, &e);
    ck_assert_ptr_nonnull(put);
    json_t *flags = store_all(&x, ld_kind_features());
    ck_assert(json_equal(json_object_get(json_object_get(put, "data"), "flags"), flags));
    json_decref(flags);
    json_decref(put);

    json_t *f1 = ld_test_feature("f1", 2);
    lds_server_changed(x.srv, ld_kind_features(), "f1", 2, f1);
    raw_wait_for(&r, "event: patch\ndata: {\"path\":\"/flags/f1\",\"data\":{\"key\":\"f1\","
                     "\"version\":2,");
    json_decref(f1);
    lds_server_changed(x.srv, ld_kind_features(), "f2", 9, NULL);
    raw_wait_for(&r, "event: delete\ndata: {\"path\":\"/flags/f2\",\"version\":9}\n\n");
    json_t *s1 = json_pack("{s:s,s:i}", "key", "s1", "version", 4);
    lds_server_changed(x.srv, ld_kind_segments(), "s1", 4, s1);
    raw_wait_for(&r, "event: patch\ndata: {\"path\":\"/segments/s1\",\"data\":{\"key\":\"s1\"");
    json_decref(s1);
    lds_server_changed(x.srv, ld_kind_segments(), "s1", 5, NULL);
    raw_wait_for(&r, "event: delete\ndata: {\"path\":\"/segments/s1\",\"version\":5}");
    struct lds_server_stats st;
    lds_server_stats(x.srv, &st);
    ck_assert_uint_eq(st.streams, 1);
    /* the client goes: the stream is let go of */
    raw_close(&r);
    do {
        loop_once();
        lds_server_stats(x.srv, &st);
    } while (st.streams > 0);
    stop(&x);
}
END_TEST

START_TEST(test_stream_gets_changes_made_before_its_put_after_it)
{
    struct fix x;
    start_with(&x, NULL, true); /* a store that answers later */
    x.later->hold = true;
    struct raw r;
    stream_open(&x, &r);
    wait_for_streams(&x, 1);
    lds_server_changed(x.srv, ld_kind_features(), "gone", 3, NULL);
    ld_test_later_release(x.later);
    raw_wait_for(&r, "event: delete\ndata: {\"path\":\"/flags/gone\",\"version\":3}");
    const char *t = raw_text(&r);
    ck_assert(strstr(t, "event: put") < strstr(t, "event: delete"));
    x.later->hold = false;
    raw_close(&r);
    stop(&x);
}
END_TEST

START_TEST(test_stream_losing_changes_before_its_put_is_refused)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.max_stream_buffer = 4096;
    start_with(&x, &o, true);
    x.later->hold = true;
    struct raw r;
    stream_open(&x, &r);
    wait_for_streams(&x, 1);
    char key[32];
    /* far more than 4 KiB of events, in two changes: the second comes to
     * a queue already past the bound (a single change is queued whole,
     * whatever its size) */
    for (int i = 0; i < 400; i++) {
        snprintf(key, sizeof key, "k%d", i);
        lds_server_changed(x.srv, ld_kind_features(), key, 2, NULL);
        if (i == 199)
            for (int k = 0; k < 4; k++)
                event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
    }
    ld_test_later_release(x.later);
    x.later->hold = false;
    raw_wait_eof(&r);
    ck_assert_int_eq(raw_status(&r), 503);
    ck_assert_ptr_null(strstr(raw_text(&r), "event: put"));
    raw_close(&r);
    stop(&x);
}
END_TEST

START_TEST(test_stream_heartbeats)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.heartbeat_ms = 20;
    start_with(&x, &o, false);
    struct raw r;
    stream_open(&x, &r);
    raw_wait_for(&r, "event: put");
    raw_wait_for(&r, "\r\n:\n\r\n");
    raw_close(&r);
    stop(&x);
}
END_TEST

START_TEST(test_stream_outlives_the_request_timeout)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.heartbeat_ms = 60000; /* no writes that would restart a read timeout */
    o.timeout_s = 1;        /* for reading requests: not for streams */
    start_with(&x, &o, false);
    struct raw r;
    stream_open(&x, &r);
    raw_wait_for(&r, "event: put");
    struct timeval t0, t;
    gettimeofday(&t0, NULL);
    do {
        struct timeval tick = {0, 100000};
        event_base_loopexit(ld_test_base, &tick);
        event_base_dispatch(ld_test_base);
        gettimeofday(&t, NULL);
    } while (!r.eof && (t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_usec - t0.tv_usec) < 2500000);
    ck_assert_msg(!r.eof, "the stream was closed");
    struct lds_server_stats st;
    lds_server_stats(x.srv, &st);
    ck_assert_uint_eq(st.streams, 1);
    lds_server_changed(x.srv, ld_kind_features(), "late", 2, NULL);
    raw_wait_for(&r, "/flags/late");
    raw_close(&r);
    stop(&x);
}
END_TEST

START_TEST(test_stream_put_larger_than_the_stream_bound_is_sent)
{
    /* the bound is on what a reader leaves unsent beyond its put: data
     * larger than the bound is still streamed (every stream was dropped at
     * once, as a slow reader) */
    struct fix x;
    struct lds_server_options o = {0};
    o.max_stream_buffer = 256; /* the fixture's put is larger */
    start_with(&x, &o, false);
    struct raw r;
    stream_open(&x, &r);
    raw_wait_for(&r, "event: put");
    ck_assert_int_gt((int)evbuffer_get_length(r.got), 256);
    raw_wait_for(&r, "\"s1\"");
    lds_server_changed(x.srv, ld_kind_features(), "late", 2, NULL);
    raw_wait_for(&r, "/flags/late");
    struct lds_server_stats st;
    lds_server_stats(x.srv, &st);
    ck_assert_uint_eq(st.streams_dropped, 0);
    ck_assert_uint_eq(st.streams, 1);
    raw_close(&r);
    stop(&x);
}
END_TEST

START_TEST(test_slow_stream_reader_is_dropped)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.max_stream_buffer = 256 * 1024;
    start_with(&x, &o, false);
    /* a client that never reads, with a small receive buffer */
    static const char req[] = "GET /all HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "\r\n\r\n";
    int fd = small_buffer_client(x.port, 4096, req);
    /* and one that reads */
    struct raw good;
    stream_open(&x, &good);
    wait_for_streams(&x, 2);
    struct lds_server_stats st;
    lds_server_stats(x.srv, &st);
    raw_wait_for(&good, "event: put");
    char *filler = big(32 * 1024, 'z');
    json_t *item = json_pack("{s:s,s:i,s:s}", "key", "big", "version", 1, "filler", filler);
    for (int i = 0; i < 400 && st.streams_dropped == 0; i++) {
        lds_server_changed(x.srv, ld_kind_features(), "big", i + 1, item);
        for (int k = 0; k < 4; k++)
            event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
        lds_server_stats(x.srv, &st);
        evbuffer_drain(good.got, evbuffer_get_length(good.got));
    }
    ck_assert_uint_eq(st.streams_dropped, 1);
    ck_assert_uint_eq(st.streams, 1);
    ck_assert_ptr_nonnull(strstr(x.log, "stream dropped"));
    /* the reader is still served */
    lds_server_changed(x.srv, ld_kind_features(), "after", 1, NULL);
    raw_wait_for(&good, "/flags/after");
    json_decref(item);
    free(filler);
    close(fd);
    raw_close(&good);
    stop(&x);
}
END_TEST

/* The server's end of the loopback connection whose client end is `fd`. */
static int server_end_of(int fd);

/* Whether `r` got `a` and then `b`. */
static bool has_after(struct raw *r, const char *a, const char *b)
{
    struct evbuffer_ptr p = evbuffer_search(r->got, a, strlen(a), NULL);
    return p.pos >= 0 && evbuffer_search(r->got, b, strlen(b), &p).pos >= 0;
}

/* A change larger than the bound (ten flags of 128 KiB in one loop pass)
 * goes whole to every stream whose reader keeps up: the bound is on what a
 * reader leaves unsent from before a change, not on the size of one change
 * (every stream was dropped: a reconnection storm of puts). A reader that
 * never reads is dropped, and what the streams hold stays bounded: the
 * events of a change are made once and shared. */
START_TEST(test_stream_large_change_keeps_readers_and_drops_non_readers)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.heartbeat_ms = 600000;
    start_with(&x, &o, false);
    static const char req[] = "GET /all HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "\r\n\r\n";
    int fd = small_buffer_client(x.port, 4096, req); /* never reads */
    enum { READERS = 3, N_FLAGS = 10, ROUNDS = 5 };
    struct raw good[READERS];
    for (int i = 0; i < READERS; i++)
        stream_open(&x, &good[i]);
    wait_for_streams(&x, READERS + 1);
    for (int i = 0; i < READERS; i++)
        raw_wait_for(&good[i], "\"s1\"");
    run_for_ms(20); /* the non-reader's put is sent */
    int small = 4096;
    ck_assert_int_eq(setsockopt(server_end_of(fd), SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    char *filler = big(128 * 1024, 'z');
    size_t change = 0, most = 0;
    struct lds_server_stats st;
    for (int round = 1; round <= ROUNDS; round++) {
        char key[32], want[64];
        for (int k = 0; k < N_FLAGS; k++) {
            snprintf(key, sizeof key, "big%d", k);
            json_t *item =
                json_pack("{s:s,s:i,s:s}", "key", key, "version", round, "filler", filler);
            lds_server_changed(x.srv, ld_kind_features(), key, round, item);
            json_decref(item);
        }
        change = N_FLAGS * (128 * 1024 + 64);
        snprintf(want, sizeof want, "{\"key\":\"big%d\",\"version\":%d,", N_FLAGS - 1, round);
        for (int i = 0; i < READERS; i++) {
            while (!has_after(&good[i], want, "\"}}\n\n")) {
                ck_assert_msg(!good[i].eof, "reader %d lost its stream in round %d", i, round);
                loop_once();
                lds_server_stats(x.srv, &st);
                if (st.stream_event_bytes > most)
                    most = st.stream_event_bytes;
            }
            snprintf(want, sizeof want, "{\"key\":\"big0\",\"version\":%d,", round);
            ck_assert(raw_has(&good[i], want));
            evbuffer_drain(good[i].got, evbuffer_get_length(good[i].got));
            snprintf(want, sizeof want, "{\"key\":\"big%d\",\"version\":%d,", N_FLAGS - 1, round);
        }
    }
    lds_server_stats(x.srv, &st);
    ck_assert_uint_eq(st.streams_dropped, 1);
    ck_assert_uint_eq(st.streams, READERS);
    ck_assert_ptr_nonnull(strstr(x.log, "stream dropped"));
    /* what was held: the events of a change and of the one before it (held
     * by the non-reader until the next change dropped it), not one copy per
     * stream */
    ck_assert_msg(most <= 2 * change + o.max_stream_buffer + (1 << 20), "%zu bytes held", most);
    /* and once every reader has its events, nothing */
    for (int i = 0; i < 1000 && st.stream_event_bytes > 0; i++) {
        loop_once();
        lds_server_stats(x.srv, &st);
    }
    ck_assert_uint_eq(st.stream_event_bytes, 0);
    free(filler);
    close(fd);
    for (int i = 0; i < READERS; i++)
        raw_close(&good[i]);
    stop(&x);
}
END_TEST

/* Heap in use, in bytes (the sanitizer's count in sanitized builds). */
static size_t heap_in_use(void)
{
#if LD_TEST_SANITIZED
    return __sanitizer_get_current_allocated_bytes();
#else
    return mallinfo2().uordblks;
#endif
}

/* What a slow reader's stream holds unsent is bounded in memory, not only
 * in the bytes counted: small events (a delete, a heartbeat) cost about
 * their size, not a libevent chain of 1 KiB or more each. Before, 64 KiB
 * of 60-byte deletes held 2 MiB. */
START_TEST(test_slow_stream_reader_holds_about_the_bound_in_memory)
{
    if (getenv("LDASYNC_VALGRIND"))
        return; /* valgrind's heap is not the one measured */
    struct fix x;
    struct lds_server_options o = {0};
    o.max_stream_buffer = 64 * 1024;
    start_with(&x, &o, false);
    static const char req[] = "GET /all HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "\r\n\r\n";
    int fd = small_buffer_client(x.port, 4096, req);
    wait_for_streams(&x, 1);
    struct lds_server_stats st;
    lds_server_stats(x.srv, &st);
    for (int k = 0; k < 20; k++)
        event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
    size_t base = heap_in_use(), most = 0;
    for (int i = 0; i < 200000 && st.streams_dropped == 0; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        lds_server_changed(x.srv, ld_kind_features(), key, i + 1, NULL);
        if (i % 64 == 0) {
            event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
            size_t now = heap_in_use();
            if (now > base && now - base > most)
                most = now - base;
        }
        lds_server_stats(x.srv, &st);
    }
    ck_assert_uint_eq(st.streams_dropped, 1);
    ck_assert_msg(most < 4 * o.max_stream_buffer, "%zu bytes held for a bound of %zu", most,
                  o.max_stream_buffer);
    close(fd);
    stop(&x);
}
END_TEST

/* The put's allowance is for the put: once a stream has sent it, what a
 * reader that stopped reading holds is bounded by max_stream_buffer alone
 * (it kept the put's size on top for good, so with a large put every slow
 * reader could hold that much again of copies of its own). */
START_TEST(test_slow_stream_reader_after_its_put_holds_only_the_bound)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.max_stream_buffer = 8 * 1024;
    start_with(&x, &o, false);
    enum { PUT = 256 * 1024 };
    char *filler = big(PUT, 'y');
    memcpy(filler + PUT - 4, "YEND", 4);
    json_t *item = json_pack("{s:s,s:i,s:b,s:[b,b],s:i,s:s}", "key", "huge", "version", 1, "on", 0,
                             "variations", 1, 0, "offVariation", 0, "filler", filler);
    free(filler);
    ld_test_await_ok(ld_store_upsert(x.store, ld_kind_features(), item));
    lds_server_changed(x.srv, ld_kind_features(), "huge", 1, item); /* no stream yet */
    json_decref(item);
    struct raw r;
    stream_open(&x, &r);
    for (;;) { /* the put, read (and let go of) as it comes */
        if (evbuffer_search(r.got, "YEND", 4, NULL).pos >= 0)
            break;
        size_t n = evbuffer_get_length(r.got);
        evbuffer_drain(r.got, n > 3 ? n - 3 : 0);
        ck_assert(!r.eof);
        loop_once();
    }
    for (int k = 0; k < 20; k++)
        event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
    bufferevent_disable(r.bev, EV_READ); /* the reader has its put, then stops */
    struct lds_server_stats st;
    lds_server_stats(x.srv, &st);
    for (int i = 0; i < 400000 && st.streams_dropped == 0; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        x.log[0] = '\0'; /* (the drop's line is the last one) */
        lds_server_changed(x.srv, ld_kind_features(), key, i + 1, NULL);
        event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
        lds_server_stats(x.srv, &st);
    }
    ck_assert_uint_eq(st.streams_dropped, 1);
    const char *m = strstr(x.log, "too slow (");
    ck_assert_ptr_nonnull(m);
    size_t unsent = strtoull(m + strlen("too slow ("), NULL, 10);
    ck_assert_msg(unsent <= o.max_stream_buffer + 1024,
                  "dropped at %zu bytes unsent for a bound of %zu", unsent, o.max_stream_buffer);
    raw_close(&r);
    stop(&x);
}
END_TEST

/* The server's end of the loopback connection whose client end is `fd`
 * (the server runs in this process). */
static int server_end_of(int fd)
{
    struct sockaddr_in me, peer;
    socklen_t n = sizeof me;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&me, &n), 0);
    for (int s = 3; s < 65536; s++) {
        n = sizeof peer;
        if (s != fd && getpeername(s, (struct sockaddr *)&peer, &n) == 0 && n == sizeof peer &&
            peer.sin_port == me.sin_port && peer.sin_addr.s_addr == me.sin_addr.s_addr)
            return s;
    }
    ck_abort_msg("the server's end of the connection is not in this process");
    return -1;
}

/* The body of the chunked answer in `t` (`n` bytes, head included),
 * decoded: fails the test on a chunk that is not well formed or cut. */
static char *dechunk(const char *t, size_t n, size_t *len)
{
    const char *p = strstr(t, "\r\n\r\n"), *end = t + n;
    ck_assert_ptr_nonnull(p);
    p += 4;
    char *body = malloc(n);
    ck_assert_ptr_nonnull(body);
    *len = 0;
    while (p < end) {
        char *q;
        unsigned long size = strtoul(p, &q, 16);
        ck_assert_msg(q > p && q + 2 <= end && memcmp(q, "\r\n", 2) == 0, "bad chunk head at %zu",
                      (size_t)(p - t));
        q += 2;
        ck_assert_msg(size > 0 && (size_t)(end - q) >= size + 2 && memcmp(q + size, "\r\n", 2) == 0,
                      "chunk of %lu bytes cut or without its tail at %zu", size, (size_t)(q - t));
        memcpy(body + *len, q, size);
        *len += size;
        p = q + size + 2;
    }
    return body;
}

/* Events go straight to a stream's socket while it takes them and to the
 * connection's output once it does not: a reader that falls behind (its
 * socket and the server's end full) and then catches up gets every event
 * whole and in order, each chunk well formed. */
START_TEST(test_stream_events_written_now_or_queued_arrive_whole_and_in_order)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.max_stream_buffer = 1 << 20;
    o.heartbeat_ms = 600000;
    start_with(&x, &o, false);
    static const char req[] = "GET /all HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "\r\n\r\n";
    int fd = small_buffer_client(x.port, 4096, req);
    evutil_make_socket_nonblocking(fd);
    wait_for_streams(&x, 1);
    run_for_ms(20); /* the put is sent */
    int small = 4096;
    ck_assert_int_eq(setsockopt(server_end_of(fd), SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    /* about 120 KiB: far more than the two sockets hold. The reader takes
     * a little now and then, so that events also come while the socket
     * has room again but the output still holds older ones. */
    enum { N = 2000 };
    struct evbuffer *got = evbuffer_new();
    char tail[64], chunk[16384];
    for (int i = 1; i <= N; i++) {
        lds_server_changed(x.srv, ld_kind_features(), "k", i, NULL);
        if (i % 50 == 0) {
            ssize_t k = read(fd, chunk, 2048);
            if (k > 0)
                evbuffer_add(got, chunk, (size_t)k);
        }
        if (i % 100 == 0)
            event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
    }
    snprintf(tail, sizeof tail, "\"version\":%d}\n\n\r\n", N);
    struct timeval t0, t;
    gettimeofday(&t0, NULL);
    for (;;) {
        ssize_t k = read(fd, chunk, sizeof chunk);
        if (k > 0)
            evbuffer_add(got, chunk, (size_t)k);
        else
            ck_assert_msg(k < 0 && errno == EAGAIN, "the stream ended");
        size_t n = evbuffer_get_length(got);
        if (n >= strlen(tail) &&
            memcmp(evbuffer_pullup(got, -1) + n - strlen(tail), tail, strlen(tail)) == 0)
            break;
        event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
        gettimeofday(&t, NULL);
        ck_assert_int_lt(t.tv_sec - t0.tv_sec, 60);
    }
    struct lds_server_stats st;
    lds_server_stats(x.srv, &st);
    ck_assert_uint_eq(st.streams_dropped, 0);
    evbuffer_add(got, "", 1);
    size_t n = evbuffer_get_length(got) - 1, len;
    char *body = dechunk((const char *)evbuffer_pullup(got, -1), n, &len);
    ck_assert_msg(len > 12 && memcmp(body, "event: put\n", 11) == 0, "%.60s", body);
    char *after_put = strstr(body, "\n\n");
    ck_assert_ptr_nonnull(after_put);
    after_put += 2;
    struct evbuffer *want = evbuffer_new();
    for (int i = 1; i <= N; i++)
        evbuffer_add_printf(want, "event: delete\ndata: {\"path\":\"/flags/k\",\"version\":%d}\n\n",
                            i);
    size_t wlen = evbuffer_get_length(want);
    ck_assert_uint_eq((size_t)(body + len - after_put), wlen);
    ck_assert(memcmp(after_put, evbuffer_pullup(want, -1), wlen) == 0);
    evbuffer_free(want);
    free(body);
    evbuffer_free(got);
    close(fd);
    stop(&x);
}
END_TEST

/* A stream's socket sends each event at once (TCP_NODELAY): with Nagle's
 * algorithm, the events after the first would wait for the client's
 * acknowledgement, a round trip (or a delayed ack) on a real network. */
START_TEST(test_stream_socket_sends_events_without_delay)
{
    struct fix x;
    start(&x);
    static const char req[] = "GET /all HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "\r\n\r\n";
    int fd = small_buffer_client(x.port, 64 * 1024, req);
    wait_for_streams(&x, 1);
    run_for_ms(20); /* the put is ready: the stream starts */
    int on = 0;
    socklen_t n = sizeof on;
    ck_assert_int_eq(getsockopt(server_end_of(fd), IPPROTO_TCP, TCP_NODELAY, &on, &n), 0);
    ck_assert_int_ne(on, 0);
    close(fd);
    stop(&x);
}
END_TEST

/* An HTTP/1.0 client's stream is not chunked: its events come as they are. */
START_TEST(test_stream_to_an_http_1_0_client_is_not_chunked)
{
    struct fix x;
    start(&x);
    static const char req[] = "GET /all HTTP/1.0\r\nAuthorization: " KEY "\r\n\r\n";
    struct raw r;
    raw_open(&r, x.port);
    raw_send(&r, req, sizeof req - 1);
    raw_wait_for(&r, "event: put");
    raw_wait_for(&r, "}}}\n\n");
    lds_server_changed(x.srv, ld_kind_features(), "k", 7, NULL);
    lds_server_changed(x.srv, ld_kind_features(), "j", 8, NULL);
    raw_wait_for(&r, "\"version\":8}\n\n");
    const char *t = raw_text(&r);
    ck_assert_msg(strncmp(t, "HTTP/1.0 200", 12) == 0 || strncmp(t, "HTTP/1.1 200", 12) == 0,
                  "%.40s", t);
    ck_assert_ptr_null(strstr(t, "Transfer-Encoding"));
    ck_assert_ptr_nonnull(strstr(t, "\r\n\r\nevent: put\ndata: {"));
    ck_assert_ptr_nonnull(strstr(t, "}}}\n\nevent: delete\ndata: {\"path\":\"/flags/k\","
                                    "\"version\":7}\n\nevent: delete\ndata: {\"path\":"
                                    "\"/flags/j\",\"version\":8}\n\n"));
    raw_close(&r);
    stop(&x);
}
END_TEST

/* ---- client-side evaluation -------------------------------------------------------- */

/* Asserts that `got` (an evalx answer) is the evaluator's all-flags state for
 * `ctx_text` in LaunchDarkly's client-side shape. */
static void expect_evalx(struct fix *x, const char *ctx_text, bool reasons, json_t *got)
{
    ld_context *ctx = ld_test_ctx_of(ctx_text);
    ld_future *f = ld_test_fulfilled(ld_evaluator_all_flags(
        x->ev, ctx, LD_ALL_FLAGS_CLIENT_SIDE_ONLY | (reasons ? LD_ALL_FLAGS_WITH_REASONS : 0)));
    json_t *state = ld_future_json(f);
    json_t *meta = json_object_get(state, "$flagsState");
    ck_assert_int_eq(json_object_size(got), json_object_size(meta));
    ck_assert_ptr_null(json_object_get(got, "f3")); /* not for client-side SDKs */
    const char *key;
    json_t *m;
    json_object_foreach(meta, key, m)
    {
        json_t *g = json_object_get(got, key);
        ck_assert_msg(g != NULL, "%s missing", key);
        ck_assert_msg(json_equal(json_object_get(g, "value"), json_object_get(state, key)),
                      "%s: value", key);
        json_t *var = json_object_get(m, "variation");
        ck_assert(json_equal(json_object_get(g, "variation"), var ? var : json_null()));
        ck_assert(json_equal(json_object_get(g, "version"), json_object_get(m, "version")));
        ck_assert(json_is_integer(json_object_get(g, "version")));
        json_t *reason = json_object_get(m, "reason");
        if (reasons)
            ck_assert_ptr_nonnull(reason);
        ck_assert(reason ? json_equal(json_object_get(g, "reason"), reason)
                         : json_object_get(g, "reason") == NULL);
        json_t *te = json_object_get(m, "trackEvents");
        ck_assert(te ? json_is_true(json_object_get(g, "trackEvents"))
                     : json_object_get(g, "trackEvents") == NULL);
    }
    ld_future_unref(f);
    ld_context_unref(ctx);
}

START_TEST(test_evalx_answers_the_evaluators_results)
{
    struct fix x;
    start(&x);
    const char *ctxs[] = {"{'key': 'u1'}", "{'kind': 'user', 'key': 'u2', 'name': 'Ü'}",
                          "{'kind': 'multi', 'user': {'key': 'u3'}, 'org': {'key': 'o'}}"};
    for (size_t i = 0; i < 3; i++)
        for (int reasons = 0; reasons < 2; reasons++) {
            json_t *cj = ld_test_j(ctxs[i]);
            char *text = json_dumps(cj, JSON_COMPACT);
            json_decref(cj);
            char *enc = ld_test_b64url(text);
            char path[512];
            snprintf(path, sizeof path, "/sdk/evalx/my-env/contexts/%s%s", enc,
                     reasons ? "?withReasons=true" : "");
            struct resp r;
            http(&x, EVHTTP_REQ_GET, path, NULL, NULL, &r);
            ck_assert_msg(r.code == 200, "%s: %d %s", path, r.code, r.body);
            ck_assert_str_eq(r.cors, "*");
            json_t *got = body_json(&r);
            expect_evalx(&x, ctxs[i], reasons, got);
            json_decref(got);
            resp_free(&r);

            /* the same with REPORT */
            char req[2048];
            int n = snprintf(req, sizeof req,
                             "REPORT /sdk/evalx/my-env/context%s HTTP/1.1\r\nHost: x\r\n"
                             "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                             "Connection: close\r\n\r\n%s",
                             reasons ? "?withReasons=true" : "", strlen(text), text);
            struct raw raw;
            ck_assert_int_eq(raw_exchange(&x, req, (size_t)n, &raw), 200);
            const char *t = raw_text(&raw);
            ck_assert_ptr_nonnull(strstr(t, "Access-Control-Allow-Origin: *"));
            const char *b = strstr(t, "\r\n\r\n");
            ck_assert_ptr_nonnull(b);
            json_error_t e;
            got = json_loads(b + 4, 0, &e);
            ck_assert_msg(got != NULL, "REPORT body: %s", b + 4);
            expect_evalx(&x, ctxs[i], reasons, got);
            json_decref(got);
            raw_close(&raw);
            free(enc);
            free(text);
        }
    /* the shape, spelled out: u2 matches f2's tracked rule */
    struct resp r;
    char *enc = ld_test_b64url("{\"key\":\"u2\"}");
    char path[256];
    snprintf(path, sizeof path, "/sdk/evalx/e/contexts/%s", enc);
    http(&x, EVHTTP_REQ_GET, path, NULL, NULL, &r);
    json_t *got = body_json(&r);
    json_t *want = ld_test_j("{'value': 'b', 'variation': 1, 'version': 7, 'trackEvents': true,"
                             " 'trackReason': true, 'reason': {'kind': 'RULE_MATCH',"
                             " 'ruleIndex': 0, 'ruleId': 'r1'}}");
    ck_assert_msg(json_equal(json_object_get(got, "f2"), want), "%s", r.body);
    json_decref(want);
    json_decref(got);
    resp_free(&r);
    free(enc);
    stop(&x);
}
END_TEST

/* Flags of every kind an evalx answer shows, for the contexts u1 and u2:
 * off (with and without an off variation), fallthrough (tracked: a
 * reason), a rule match (u1), a target match (u2), a prerequisite met (u1)
 * and failed (u2), a rule with no id (u2), an error, trackEvents and
 * debugEventsUntilDate (with prerequisites), an experiment, a flag for
 * server-side SDKs only, values of every JSON type and keys and strings to
 * escape. */
static const char *const XFLAGS =
    "{'off': {'on': false, 'variations': ['x', 'y'], 'offVariation': 1, 'clientSide': true,"
    "         'salt': 's', 'version': 3},"
    " 'off-none': {'on': false, 'variations': [1], 'clientSide': true, 'salt': 's'},"
    " 'fall': {'on': true, 'variations': [{'a': [1, 2.5, 'q\\\"\\\\/\\n\\u00dc'], 'b': null}, []],"
    "          'fallthrough': {'variation': 0}, 'trackEventsFallthrough': true,"
    "          'clientSide': true, 'salt': 's'},"
    " 'rule': {'on': true, 'variations': [false, true], 'fallthrough': {'variation': 0},"
    "          'rules': [{'id': 'r-1', 'variation': 1, 'clauses':"
    "            [{'attribute': 'key', 'op': 'in', 'values': ['u1']}]},"
    "            {'variation': 0, 'clauses':"
    "              [{'attribute': 'key', 'op': 'in', 'values': ['u2']}]}],"
    "          'clientSide': true, 'salt': 's', 'version': 12},"
    " 'target': {'on': true, 'variations': ['t', 'f'], 'fallthrough': {'variation': 1},"
    "            'targets': [{'values': ['u2'], 'variation': 0}], 'salt': 's',"
    "            'clientSideAvailability': {'usingEnvironmentId': true}},"
    " 'pre': {'on': true, 'variations': [1, 2], 'offVariation': 1, 'fallthrough': {'variation': 0},"
    "         'prerequisites': [{'key': 'rule', 'variation': 1}], 'clientSide': true, 'salt': 's'},"
    " 'err': {'on': true, 'variations': [1], 'fallthrough': {'variation': 5}, 'clientSide': true,"
    "         'salt': 's'},"
    " 'debug': {'on': true, 'variations': [0.1, 1e300, -7], 'fallthrough': {'variation': 1},"
    "           'trackEvents': true, 'debugEventsUntilDate': 2000000000000, 'clientSide': true,"
    "           'salt': 's'},"
    " 'pre-debug': {'on': true, 'variations': ['p', 'q'], 'fallthrough': {'variation': 0},"
    "               'prerequisites': [{'key': 'off', 'variation': 1}], 'trackEvents': true,"
    "               'debugEventsUntilDate': 1, 'clientSide': true, 'salt': 's'},"
    " 'server': {'on': true, 'variations': [true], 'fallthrough': {'variation': 0}, 'salt': 's'},"
    " 'exp': {'on': true, 'variations': ['A', 'B'], 'salt': 's', 'clientSide': true,"
    "         'fallthrough': {'rollout': {'kind': 'experiment', 'variations':"
    "           [{'variation': 1, 'weight': 100000}]}}},"
    " 'k\\u00e9y \\\"/': {'on': true, 'variations': ['\\u00dc\\u0001', 3],"
    "                    'fallthrough': {'variation': 0}, 'clientSide': true, 'salt': 's'}}";

/* The evalx body of `ctx_text` as ldasync-serve made it until it wrote it
 * from the evaluator's results: ld_evaluator_all_flags()'s JSON converted
 * into a second tree, then serialized. The body must be this, byte for
 * byte. @return a new string (free()). */
static char *evalx_by_tree(struct fix *x, const char *ctx_text, bool reasons)
{
    ld_context *ctx = ld_test_ctx_of(ctx_text);
    ld_future *f = ld_test_fulfilled(ld_evaluator_all_flags(
        x->ev, ctx, LD_ALL_FLAGS_CLIENT_SIDE_ONLY | (reasons ? LD_ALL_FLAGS_WITH_REASONS : 0)));
    json_t *state = ld_future_json(f);
    json_t *out = json_object();
    const char *key;
    json_t *m;
    json_object_foreach(json_object_get(state, "$flagsState"), key, m)
    {
        json_t *value = json_object_get(state, key);
        json_t *o = json_object();
        json_object_set(o, "value", value ? value : json_null());
        json_t *var = json_object_get(m, "variation");
        json_object_set(o, "variation", var ? var : json_null());
        static const char *const copy[] = {"version", "trackEvents",   "trackReason",
                                           "reason",  "prerequisites", "debugEventsUntilDate"};
        for (size_t i = 0; i < sizeof copy / sizeof copy[0]; i++) {
            json_t *v = json_object_get(m, copy[i]);
            if (v)
                json_object_set(o, copy[i], v);
        }
        json_object_set_new(out, key, o);
    }
    char *text = json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY);
    ck_assert_ptr_nonnull(text);
    json_decref(out);
    ld_future_unref(f);
    ld_context_unref(ctx);
    return text;
}

/* GETs the evalx answer for `ctx_text` (JSON): its body, 200 asserted. */
static char *evalx_get(struct fix *x, const char *ctx_text, bool reasons)
{
    json_t *cj = ld_test_j(ctx_text);
    char *text = json_dumps(cj, JSON_COMPACT);
    json_decref(cj);
    char *enc = ld_test_b64url(text);
    char path[512];
    snprintf(path, sizeof path, "/sdk/evalx/e/contexts/%s%s", enc,
             reasons ? "?withReasons=true" : "");
    struct resp r;
    http(x, EVHTTP_REQ_GET, path, NULL, NULL, &r);
    ck_assert_msg(r.code == 200, "%s: %d %s", path, r.code, r.body);
    ck_assert_str_eq(r.ctype, "application/json");
    ck_assert_uint_eq(strlen(r.body), r.len);
    free(enc);
    free(text);
    return r.body;
}

START_TEST(test_evalx_body_is_the_all_flags_json_converted)
{
    struct fix x;
    start_on(&x, NULL, false, XFLAGS);
    const char *ctxs[] = {"{'key': 'u1'}", "{'kind': 'user', 'key': 'u2', 'name': 'Ü'}",
                          "{'kind': 'multi', 'user': {'key': 'u3'}, 'org': {'key': 'o'}}"};
    for (size_t i = 0; i < sizeof ctxs / sizeof ctxs[0]; i++)
        for (int reasons = 0; reasons < 2; reasons++) {
            char *want = evalx_by_tree(&x, ctxs[i], reasons);
            char *got = evalx_get(&x, ctxs[i], reasons);
            ck_assert_msg(strcmp(got, want) == 0, "%s%s:\n got  %s\n want %s", ctxs[i],
                          reasons ? " (reasons)" : "", got, want);
            free(got);
            free(want);
        }
    stop(&x);
}
END_TEST

/* Asserts that the evalx body `body` has the member `want` (written with '
 * for ", as ld_test_j() takes JSON), exactly: from a '{' or ',' to a ','
 * or '}'. */
static void expect_member(const char *body, const char *want)
{
    char text[512];
    size_t n = strlen(want);
    ck_assert_uint_lt(n, sizeof text);
    for (size_t i = 0; i <= n; i++)
        text[i] = want[i] == '\'' ? '"' : want[i];
    const char *at = strstr(body, text);
    ck_assert_msg(at && (at[-1] == '{' || at[-1] == ',') && (at[n] == ',' || at[n] == '}'),
                  "%s\nnot in %s", text, body);
}

START_TEST(test_evalx_body_text)
{
    struct fix x;
    start_on(&x, NULL, false, XFLAGS);
    /* u1: a rule match, a prerequisite met; every flag but the server's */
    static const char *const u1[] = {
        "'off':{'value':'y','variation':1,'version':3}",
        "'off-none':{'value':null,'variation':null,'version':1}",
        "'rule':{'value':true,'variation':1,'version':12}",
        "'target':{'value':'f','variation':1,'version':1}",
        "'pre':{'value':1,'variation':0,'version':1,'prerequisites':['rule']}",
        "'err':{'value':null,'variation':null,'version':1}",
        "'debug':{'value':1.0000000000000001e300,'variation':1,'version':1,'trackEvents':true,"
        "'debugEventsUntilDate':2000000000000}",
        "'pre-debug':{'value':null,'variation':null,'version':1,'trackEvents':true,"
        "'prerequisites':['off'],'debugEventsUntilDate':1}",
        "'exp':{'value':'B','variation':1,'version':1,'trackEvents':true,'trackReason':true,"
        "'reason':{'kind':'FALLTHROUGH','inExperiment':true}}",
        "'fall':{'value':{'a':[1,2.5,'q\\'\\\\/\\nÜ'],'b':null},'variation':0,'version':1,"
        "'trackEvents':true,'trackReason':true,'reason':{'kind':'FALLTHROUGH'}}",
        "'kéy \\'/':{'value':'Ü\\u0001','variation':0,'version':1}"};
    char *got = evalx_get(&x, "{'key': 'u1'}", false);
    for (size_t i = 0; i < sizeof u1 / sizeof u1[0]; i++)
        expect_member(got, u1[i]);
    ck_assert_ptr_null(strstr(got, "\"server\""));
    json_t *j = ld_test_j(got);
    ck_assert_uint_eq(json_object_size(j), sizeof u1 / sizeof u1[0]);
    json_decref(j);
    free(got);
    /* with reasons */
    static const char *const u1r[] = {
        "'off':{'value':'y','variation':1,'version':3,'reason':{'kind':'OFF'}}",
        "'rule':{'value':true,'variation':1,'version':12,"
        "'reason':{'kind':'RULE_MATCH','ruleIndex':0,'ruleId':'r-1'}}",
        "'err':{'value':null,'variation':null,'version':1,"
        "'reason':{'kind':'ERROR','errorKind':'MALFORMED_FLAG'}}"};
    got = evalx_get(&x, "{'key': 'u1'}", true);
    for (size_t i = 0; i < sizeof u1r / sizeof u1r[0]; i++)
        expect_member(got, u1r[i]);
    free(got);
    /* u2: a target match, a rule with no id, prerequisites failed */
    static const char *const u2r[] = {
        "'target':{'value':'t','variation':0,'version':1,'reason':{'kind':'TARGET_MATCH'}}",
        "'rule':{'value':false,'variation':0,'version':12,"
        "'reason':{'kind':'RULE_MATCH','ruleIndex':1}}",
        "'pre':{'value':2,'variation':1,'version':1,"
        "'reason':{'kind':'PREREQUISITE_FAILED','prerequisiteKey':'rule'},'prerequisites':['rule']"
        "}",
        "'pre-debug':{'value':null,'variation':null,'version':1,'trackEvents':true,"
        "'reason':{'kind':'PREREQUISITE_FAILED','prerequisiteKey':'off'},'prerequisites':['off'],"
        "'debugEventsUntilDate':1}",
        "'debug':{'value':1.0000000000000001e300,'variation':1,'version':1,'trackEvents':true,"
        "'reason':{'kind':'FALLTHROUGH'},'debugEventsUntilDate':2000000000000}"};
    got = evalx_get(&x, "{'key': 'u2'}", true);
    for (size_t i = 0; i < sizeof u2r / sizeof u2r[0]; i++)
        expect_member(got, u2r[i]);
    free(got);
    stop(&x);
}
END_TEST

START_TEST(test_evalx_head_has_the_length_of_the_body)
{
    struct fix x;
    start_on(&x, NULL, false, XFLAGS);
    /* a HEAD then a GET, pipelined: no body after the HEAD's headers */
    char *enc = ld_test_b64url("{\"key\":\"u1\"}");
    char req[1024];
    int n =
        snprintf(req, sizeof req,
                 "HEAD /sdk/evalx/e/contexts/%s HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET /sdk/evalx/e/contexts/%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                 enc, enc);
    free(enc);
    struct raw r;
    ck_assert_int_eq(raw_exchange(&x, req, (size_t)n, &r), 200);
    const char *t = raw_text(&r);
    const char *second = strstr(t, "\r\n\r\n");
    ck_assert_ptr_nonnull(second);
    second += 4;
    ck_assert_msg(strncmp(second, "HTTP/1.1 200 ", 13) == 0, "after the HEAD: %.200s", second);
    const char *body = strstr(second, "\r\n\r\n");
    ck_assert_ptr_nonnull(body);
    char want[64];
    snprintf(want, sizeof want, "Content-Length: %zu\r\n", strlen(body + 4));
    ck_assert_msg(strstr(t, want) && strstr(t, want) < second, "HEAD without \"%s\": %.300s", want,
                  t);
    ck_assert_ptr_nonnull(strstr(body, "\"rule\":{\"value\":true,"));
    raw_close(&r);
    stop(&x);
}
END_TEST

/* With client-side IDs given, evalx answers for those only (404, with CORS
 * headers, for another {env}, as LaunchDarkly's Relay Proxy does); without
 * them, for any. */
START_TEST(test_evalx_answers_only_the_client_side_ids_given)
{
    static const char *const ids[] = {"env-a", "env-b"};
    for (int with = 0; with < 2; with++) {
        struct fix x;
        struct lds_server_options o = {0};
        if (with) {
            o.client_side_ids = ids;
            o.n_client_side_ids = 2;
        }
        start_with(&x, &o, false);
        static const char *const envs[] = {"env-a", "env-b", "env-c", "env-a%20"};
        for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
            int want = !with || i < 2 ? 200 : 404;
            char path[128];
            snprintf(path, sizeof path, "/sdk/evalx/%s/contexts/eyJrZXkiOiJ1MSJ9", envs[i]);
            struct resp r;
            get(&x, path, &r);
            ck_assert_msg(r.code == want, "GET %s: %d", path, r.code);
            ck_assert_str_eq(r.cors, "*");
            resp_free(&r);
            char req[512];
            snprintf(req, sizeof req,
                     "REPORT /sdk/evalx/%s/context HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     "application/json\r\nContent-Length: 12\r\nConnection: close\r\n\r\n"
                     "{\"key\":\"u1\"}",
                     envs[i]);
            ck_assert_int_eq(raw_exchange(&x, req, strlen(req), NULL), want);
        }
        /* an empty ID is refused */
        static const char *const empty[] = {"env-a", ""};
        struct lds_server_options bad = {0};
        bad.client_side_ids = empty;
        bad.n_client_side_ids = 2;
        ck_assert_ptr_null(lds_server_new(ld_test_base, x.store, x.ev, &bad));
        stop(&x);
    }
}
END_TEST

START_TEST(test_evalx_before_the_store_is_initialized_is_503)
{
    struct fix x;
    start_on(&x, NULL, false, NULL);
    for (int reasons = 0; reasons < 2; reasons++) {
        struct resp r;
        http(&x, EVHTTP_REQ_GET,
             reasons ? "/sdk/evalx/e/contexts/eyJrZXkiOiJ1MSJ9?withReasons=true"
                     : "/sdk/evalx/e/contexts/eyJrZXkiOiJ1MSJ9",
             NULL, NULL, &r);
        expect_error(&r, 503);
        ck_assert_str_eq(r.cors, "*");
        ck_assert_ptr_nonnull(strstr(r.body, "service not initialized"));
        resp_free(&r);
    }
    stop(&x);
}
END_TEST

START_TEST(test_report_with_two_different_content_lengths_is_400)
{
    /* which one frames the body is ambiguous (RFC 9110, 8.6): refused */
    struct fix x;
    start(&x);
    static const char two[] = "REPORT /sdk/evalx/env/context HTTP/1.1\r\nHost: x\r\n"
                              "Content-Type: application/json\r\nContent-Length: 12\r\n"
                              "Content-Length: 40\r\n\r\n{\"key\":\"u1\"}";
    ck_assert_int_eq(raw_exchange(&x, two, sizeof two - 1, NULL), 400);
    /* the same length twice is one length */
    static const char same[] = "REPORT /sdk/evalx/env/context HTTP/1.1\r\nHost: x\r\n"
                               "Content-Type: application/json\r\nContent-Length: 12\r\n"
                               "Content-Length: 12\r\nConnection: close\r\n\r\n"
                               "{\"key\":\"u1\"}";
    ck_assert_int_eq(raw_exchange(&x, same, sizeof same - 1, NULL), 200);
    stop(&x);
}
END_TEST

/* The evalx answer in `t` (a whole HTTP answer, first of `t`), parsed. */
static json_t *answer_json(const char *t)
{
    const char *b = strstr(t, "\r\n\r\n");
    ck_assert_ptr_nonnull(b);
    json_error_t e;
    json_t *j = json_loadb(b + 4, strlen(b + 4), JSON_DISABLE_EOF_CHECK, &e);
    ck_assert_msg(j != NULL, "%s", t);
    return j;
}

/* A REPORT's body may come chunked (Transfer-Encoding: chunked, as a
 * browser's fetch() may send it): read within the body limit, like one
 * framed by Content-Length (it was 411). */
START_TEST(test_report_with_a_chunked_body_is_read)
{
    struct fix x;
    struct lds_server_options o = {0};
    o.max_body = 1000;
    start_with(&x, &o, false);
    static const char head[] = "REPORT /sdk/evalx/env/context HTTP/1.1\r\nHost: x\r\n"
                               "Content-Type: application/json\r\nConnection: close\r\n";
    static const char cl[] = "Content-Length: 12\r\n\r\n{\"key\":\"u1\"}";
    static const char ch[] = "Transfer-Encoding: chunked\r\n\r\n"
                             "5\r\n{\"key\r\n7;ext=1\r\n\":\"u1\"}\r\n0\r\nX-Trailer: t\r\n\r\n";
    char req[4096];
    struct raw r;
    snprintf(req, sizeof req, "%s%s", head, cl);
    ck_assert_int_eq(raw_exchange(&x, req, strlen(req), &r), 200);
    json_t *want = answer_json(raw_text(&r));
    raw_close(&r);
    snprintf(req, sizeof req, "%s%s", head, ch);
    ck_assert_int_eq(raw_exchange(&x, req, strlen(req), &r), 200);
    json_t *got = answer_json(raw_text(&r));
    raw_close(&r);
    ck_assert(json_equal(want, got));
    json_decref(got);
    /* the same, coming a piece at a time */
    raw_open(&r, x.port);
    raw_send(&r, head, sizeof head - 1);
    for (const char *p = ch; *p; p += 7) {
        raw_send(&r, p, strlen(p) < 7 ? strlen(p) : 7);
        for (int k = 0; k < 3; k++)
            event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
    }
    raw_wait_eof(&r);
    ck_assert_int_eq(raw_status(&r), 200);
    got = answer_json(raw_text(&r));
    ck_assert(json_equal(want, got));
    json_decref(got);
    raw_close(&r);
    json_decref(want);
    /* more data than the body limit, in chunks: 413 */
    char *pad = big(600, ' ');
    snprintf(req, sizeof req,
             "%sTransfer-Encoding: chunked\r\n\r\n258\r\n%s\r\n258\r\n%s\r\n0\r\n\r\n", head, pad,
             pad);
    ck_assert_int_eq(raw_exchange(&x, req, strlen(req), NULL), 413);
    free(pad);
    /* malformed framing: 400 */
    static const char *const bad[] = {
        "zz\r\n{}\r\n0\r\n\r\n",  /* not a size */
        "0x2\r\n{}\r\n0\r\n\r\n", /* not one either */
        "2\r\n{}XX0\r\n\r\n",     /* no CRLF after the data */
        "-2\r\n{}\r\n0\r\n\r\n",  /* no sign */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(req, sizeof req, "%sTransfer-Encoding: chunked\r\n\r\n%s", head, bad[i]);
        ck_assert_msg(raw_exchange(&x, req, strlen(req), NULL) == 400, "case %zu", i);
    }
    /* both framings at once: ambiguous, 400 */
    snprintf(req, sizeof req,
             "%sContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
             "2\r\n{}\r\n0\r\n\r\n",
             head);
    ck_assert_int_eq(raw_exchange(&x, req, strlen(req), NULL), 400);
    stop(&x);
}
END_TEST

/* A chunked body coming a chunk at a time is read once, not again from
 * its start at every arrival: each chunk's size line is read a bounded
 * number of times (it was read at every arrival, so a client sending tiny
 * chunks one by one cost the loop time growing with all it had sent). */
START_TEST(test_report_chunked_body_is_read_once_as_it_comes)
{
    struct fix x;
    start(&x);
    enum { N = 2000 };
    static const char head[] = "REPORT /sdk/evalx/env/context HTTP/1.1\r\nHost: x\r\n"
                               "Content-Type: application/json\r\nConnection: close\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n"
                               "c\r\n{\"key\":\"u1\"}\r\n";
    struct lds_server_stats st0, st1;
    lds_server_stats(x.srv, &st0);
    struct raw r;
    raw_open(&r, x.port);
    raw_send(&r, head, sizeof head - 1);
    for (int k = 0; k < 5; k++)
        event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
    for (int i = 0; i < N; i++) {
        raw_send(&r, "1\r\n \r\n", 6);
        for (int k = 0; k < 3; k++)
            event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
    }
    raw_send(&r, "0\r\n\r\n", 5);
    raw_wait_eof(&r);
    ck_assert_int_eq(raw_status(&r), 200);
    raw_close(&r);
    lds_server_stats(x.srv, &st1);
    uint64_t lines = st1.chunk_lines - st0.chunk_lines;
    ck_assert_msg(lines <= 3 * (N + 2), "%llu chunk lines read for %d chunks",
                  (unsigned long long)lines, N + 2);
    stop(&x);
}
END_TEST

/* A REPORT whose body was read whole keeps its connection when the
 * request allows it (JS SDKs send REPORT with keep-alive): every REPORT
 * answered "Connection: close". The next request on it is answered, also
 * when it came with the body (pipelined). */
START_TEST(test_report_keeps_the_connection)
{
    struct fix x;
    start(&x);
    static const char rep_cl[] = "REPORT /sdk/evalx/env/context HTTP/1.1\r\nHost: x\r\n"
                                 "Content-Type: application/json\r\nContent-Length: 12\r\n\r\n"
                                 "{\"key\":\"u1\"}";
    static const char rep_ch[] = "REPORT /sdk/evalx/env/context HTTP/1.1\r\nHost: x\r\n"
                                 "Content-Type: application/json\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n"
                                 "c\r\n{\"key\":\"u1\"}\r\n0\r\n\r\n";
    static const char status[] = "GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    const char *const reps[] = {rep_cl, rep_ch};
    for (int i = 0; i < 2; i++) {
        struct raw r;
        raw_open(&r, x.port);
        raw_sends(&r, reps[i]);
        raw_wait_for(&r, "\r\n\r\n{");
        raw_wait_for(&r, "}}");
        ck_assert_msg(!strstr(raw_text(&r), "Connection: close"), "%s", raw_text(&r));
        ck_assert_int_eq(raw_status(&r), 200);
        ck_assert(!r.eof);
        evbuffer_drain(r.got, evbuffer_get_length(r.got));
        raw_sends(&r, reps[i]);
        raw_sends(&r, status);
        raw_wait_eof(&r);
        const char *t = raw_text(&r);
        ck_assert_msg(strncmp(t, "HTTP/1.1 200", 12) == 0, "%s", t);
        const char *second = strstr(t + 1, "HTTP/1.1 200");
        ck_assert_msg(second && strstr(second, "\"uptimeMs\""), "%s", t);
        raw_close(&r);
    }
    /* one the server refuses before taking its body still closes */
    static const char big_one[] = "REPORT /sdk/evalx/env/context HTTP/1.1\r\nHost: x\r\n"
                                  "Content-Type: application/json\r\nContent-Length: 99999\r\n"
                                  "\r\n{";
    struct raw r;
    ck_assert_int_eq(raw_exchange(&x, big_one, sizeof big_one - 1, &r), 413);
    ck_assert_ptr_nonnull(strstr(raw_text(&r), "Connection: close"));
    raw_close(&r);
    stop(&x);
}
END_TEST

/* Content-Type is a media type, whose type and subtype are compared
 * case-insensitively, with parameters after ';' (RFC 9110, 8.3.1):
 * "Application/JSON" is JSON, "application/jsonp" is not. */
START_TEST(test_report_content_type_is_a_media_type)
{
    struct fix x;
    start(&x);
    static const struct {
        const char *type;
        int want;
    } cases[] = {
        {"Application/JSON", 200},
        {"application/json ; charset=utf-8", 200},
        {"application/json;charset=UTF-8", 200},
        {"application/jsonp", 415},
        {"application/json-patch+json", 415},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char req[512];
        int n = snprintf(req, sizeof req,
                         "REPORT /sdk/evalx/e/context HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n"
                         "Content-Length: 12\r\nConnection: close\r\n\r\n{\"key\":\"u1\"}",
                         cases[i].type);
        int code = raw_exchange(&x, req, (size_t)n, NULL);
        ck_assert_msg(code == cases[i].want, "%s: %d", cases[i].type, code);
    }
    stop(&x);
}
END_TEST

START_TEST(test_evalx_cors_and_preflight)
{
    struct fix x;
    start(&x);
    const char *paths[] = {"/sdk/evalx/e/context", "/sdk/evalx/e/contexts/eyJrZXkiOiJ1MSJ9"};
    for (size_t i = 0; i < 2; i++) {
        struct raw r;
        char req[512];
        int n = snprintf(req, sizeof req,
                         "OPTIONS %s HTTP/1.1\r\nHost: x\r\nOrigin: http://example.com\r\n"
                         "Access-Control-Request-Method: REPORT\r\nConnection: close\r\n\r\n",
                         paths[i]);
        ck_assert_int_eq(raw_exchange(&x, req, (size_t)n, &r), 200);
        const char *t = raw_text(&r);
        ck_assert_ptr_nonnull(strstr(t, "Access-Control-Allow-Origin: *"));
        ck_assert_ptr_nonnull(
            strstr(t, "Access-Control-Allow-Methods: GET, POST, REPORT, OPTIONS"));
        ck_assert_ptr_nonnull(strstr(t, "Access-Control-Allow-Headers: Content-Type"));
        raw_close(&r);
    }
    /* errors carry CORS headers too */
    struct resp r;
    http(&x, EVHTTP_REQ_GET, "/sdk/evalx/e/contexts/!!", NULL, NULL, &r);
    expect_error(&r, 400);
    ck_assert_str_eq(r.cors, "*");
    resp_free(&r);
    /* REPORT with another content type, or a body that is no context */
    static const char xml[] = "REPORT /sdk/evalx/e/context HTTP/1.1\r\nHost: x\r\nContent-Type: "
                              "text/xml\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    ck_assert_int_eq(raw_exchange(&x, xml, sizeof xml - 1, NULL), 415);
    static const char bad[] = "REPORT /sdk/evalx/e/context HTTP/1.1\r\nHost: x\r\nContent-Type: "
                              "application/json\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
                              "{\"a\":";
    ck_assert_int_eq(raw_exchange(&x, bad, sizeof bad - 1, NULL), 400);
    static const char nokey[] = "REPORT /sdk/evalx/e/context HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                "application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
                                "{}";
    ck_assert_int_eq(raw_exchange(&x, nokey, sizeof nokey - 1, NULL), 400);
    stop(&x);
}
END_TEST

/* A context with an integer beyond int64 (valid JSON, a double in
 * LaunchDarkly's SDKs) is evaluated, in a REPORT body and in base64; it
 * was a 400 ("too big integer"). */
START_TEST(test_evalx_context_with_an_integer_beyond_int64)
{
    struct fix x;
    start(&x);
    static const char rep[] = "REPORT /sdk/evalx/e/context HTTP/1.1\r\nHost: x\r\nContent-Type: "
                              "application/json\r\nContent-Length: 37\r\nConnection: close\r\n\r\n"
                              "{\"key\":\"u1\",\"n\":10000000000000000000}";
    ck_assert_int_eq(raw_exchange(&x, rep, sizeof rep - 1, NULL), 200);
    struct resp r;
    char *enc = ld_test_b64url("{\"key\":\"u1\",\"n\":-10000000000000000000}");
    char path[256];
    snprintf(path, sizeof path, "/sdk/evalx/e/contexts/%s", enc);
    http(&x, EVHTTP_REQ_GET, path, NULL, NULL, &r);
    ck_assert_msg(r.code == 200, "%d: %s", r.code, r.body ? r.body : "");
    resp_free(&r);
    free(enc);
    stop(&x);
}
END_TEST

/* ---- load and lifetime ------------------------------------------------------------- */

#define N_CONNS 32
#define N_REQUESTS 2000

struct loader {
    struct fix *x;
    struct evhttp_connection *c[N_CONNS];
    struct resp r[N_CONNS];
    int issued, answered, ok;
};

static void loader_next(struct loader *l, int i);

static struct loader *the_loader;

static void loader_done(struct evhttp_request *req, void *arg)
{
    int i = (int)(intptr_t)arg;
    struct loader *l = the_loader;
    l->answered++;
    if (req && evhttp_request_get_response_code(req) == 200)
        l->ok++;
    loader_next(l, i);
}

static void loader_next(struct loader *l, int i)
{
    if (l->issued >= N_REQUESTS)
        return;
    static const char *const paths[] = {"/sdk/latest-flags/f1", "/sdk/latest-all",
                                        "/sdk/evalx/e/contexts/eyJrZXkiOiJ1MSJ9", "/status",
                                        "/sdk/latest-segments/s1"};
    struct evhttp_request *req = evhttp_request_new(loader_done, (void *)(intptr_t)i);
    ck_assert_ptr_nonnull(req);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Authorization", KEY);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host", "x");
    const char *path = paths[l->issued % 5];
    l->issued++;
    ck_assert_int_eq(evhttp_make_request(l->c[i], req, EVHTTP_REQ_GET, path), 0);
}

START_TEST(test_many_requests_all_answered)
{
    struct fix x;
    start(&x);
    struct loader l = {.x = &x};
    the_loader = &l;
    for (int i = 0; i < N_CONNS; i++) {
        l.c[i] = evhttp_connection_base_new(ld_test_base, NULL, "127.0.0.1", (ev_uint16_t)x.port);
        ck_assert_ptr_nonnull(l.c[i]);
        loader_next(&l, i);
    }
    while (l.answered < N_REQUESTS)
        loop_once();
    ck_assert_int_eq(l.ok, N_REQUESTS);
    struct lds_server_stats st;
    lds_server_stats(x.srv, &st);
    ck_assert_uint_ge(st.requests, N_REQUESTS);
    ck_assert_uint_eq(st.pending, 0);
    ck_assert_uint_le(st.connections, N_CONNS);
    for (int i = 0; i < N_CONNS; i++)
        evhttp_connection_free(l.c[i]);
    the_loader = NULL;
    stop(&x);
}
END_TEST

START_TEST(test_close_with_streams_and_requests_pending)
{
    struct fix x;
    start_with(&x, NULL, true);
    /* one stream running */
    struct raw s1;
    stream_open(&x, &s1);
    raw_wait_for(&s1, "event: put");
    /* then the store holds its answers: a stream waiting for its put and
     * requests waiting for their futures */
    x.later->hold = true;
    struct raw s2;
    stream_open(&x, &s2);
    struct resp r[3];
    struct evhttp_connection *c[3];
    const char *paths[] = {"/sdk/latest-all", "/sdk/latest-flags/f1", "/status"};
    for (int i = 0; i < 3; i++) {
        c[i] = evhttp_connection_base_new(ld_test_base, NULL, "127.0.0.1", (ev_uint16_t)x.port);
        http_send(c[i], EVHTTP_REQ_GET, paths[i], KEY, NULL, &r[i]);
    }
    /* a client that gives up while its request waits */
    struct raw gone;
    static const char req[] =
        "GET /sdk/latest-all HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "\r\n\r\n";
    raw_open(&gone, x.port);
    raw_send(&gone, req, sizeof req - 1);
    struct lds_server_stats st;
    do {
        loop_once();
        lds_server_stats(x.srv, &st);
    } while (st.pending < 4 || st.streams < 2);
    raw_close(&gone);
    for (int i = 0; i < 20; i++)
        event_base_loop(ld_test_base, EVLOOP_NONBLOCK);

    ld_future *closed = lds_server_close(x.srv);
    ck_assert_ptr_nonnull(closed);
    ld_test_await_ok(closed);
    for (int i = 0; i < 3; i++) {
        wait_resp(&r[i]);
        ck_assert_msg(r[i].code == 503, "%s: %d", paths[i], r[i].code);
        resp_free(&r[i]);
        evhttp_connection_free(c[i]);
    }
    raw_wait_eof(&s1);
    raw_wait_eof(&s2);
    ck_assert_int_eq(raw_status(&s2), 503);
    raw_close(&s1);
    raw_close(&s2);
    /* closed: nothing listens */
    struct raw late;
    raw_open(&late, x.port);
    raw_wait_eof(&late);
    raw_close(&late);
    lds_server_free(x.srv);
    x.srv = NULL;
    ld_test_later_release(x.later);
    x.later->hold = false;
    stop(&x);
}
END_TEST

START_TEST(test_free_right_after_close_with_work_pending)
{
    struct fix x;
    start_with(&x, NULL, true);
    struct raw s1;
    stream_open(&x, &s1);
    raw_wait_for(&s1, "event: put");
    x.later->hold = true;
    struct raw s2;
    stream_open(&x, &s2);
    struct resp r;
    struct evhttp_connection *c =
        evhttp_connection_base_new(ld_test_base, NULL, "127.0.0.1", (ev_uint16_t)x.port);
    http_send(c, EVHTTP_REQ_GET, "/sdk/latest-flags/f1", KEY, NULL, &r);
    struct lds_server_stats st;
    do {
        loop_once();
        lds_server_stats(x.srv, &st);
    } while (st.pending < 1 || st.streams < 2);
    ld_future *closed = lds_server_close(x.srv);
    lds_server_free(x.srv); /* before the loop ran */
    x.srv = NULL;
    ld_test_await_ok(closed);
    ld_test_later_release(x.later);
    x.later->hold = false;
    wait_resp(&r);
    raw_wait_eof(&s1);
    raw_wait_eof(&s2);
    resp_free(&r);
    evhttp_connection_free(c);
    raw_close(&s1);
    raw_close(&s2);
    stop(&x);
}
END_TEST

START_TEST(test_free_with_requests_pending_and_no_close)
{
    struct fix x;
    start_with(&x, NULL, true);
    x.later->hold = true;
    struct raw a, s;
    static const char req[] =
        "GET /sdk/latest-all HTTP/1.1\r\nHost: x\r\nAuthorization: " KEY "\r\n\r\n";
    raw_open(&a, x.port);
    raw_send(&a, req, sizeof req - 1);
    stream_open(&x, &s);
    struct lds_server_stats st;
    do {
        loop_once();
        lds_server_stats(x.srv, &st);
    } while (st.pending < 1 || st.streams < 1);
    lds_server_free(x.srv);
    x.srv = NULL;
    raw_wait_eof(&a);
    raw_wait_eof(&s);
    ld_test_later_release(x.later);
    x.later->hold = false;
    ld_test_flush();
    raw_close(&a);
    raw_close(&s);
    stop(&x);
}
END_TEST

START_TEST(test_bind_failure_is_reported)
{
    struct fix x;
    start(&x);
    struct lds_server_options o = {0};
    o.port = x.port; /* taken */
    o.log = log_fn;
    o.log_arg = &x;
    lds_server *two = lds_server_new(ld_test_base, x.store, x.ev, &o);
    ck_assert_ptr_null(two);
    ck_assert_ptr_nonnull(strstr(x.log, "cannot listen"));
    ck_assert_ptr_null(lds_server_new(ld_test_base, NULL, x.ev, &o));
    stop(&x);
}
END_TEST

/* ---- events, forwarded (serve/events.c) ------------------------------------------ */

/* POSTs `body` to `path` with Authorization `auth` (NULL: none) and the
 * header lines `lines` ("Name", "value" pairs, NULL-ended); waits. */
static void post(struct fix *x, const char *path, const char *auth, const char *const *lines,
                 const char *body, size_t len, struct resp *r)
{
    struct evhttp_request *req = req_new(r, auth);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    for (size_t i = 0; lines && lines[i]; i += 2)
        evhttp_add_header(h, lines[i], lines[i + 1]);
    evbuffer_add(evhttp_request_get_output_buffer(req), body, len);
    ck_assert_int_eq(evhttp_make_request(conn_of(x), req, EVHTTP_REQ_POST, path), 0);
    wait_resp(r);
}

/* A server forwarding events to the local events service (check_receiver.h),
 * holding at most `max` bytes of them. */
static ld_event_forwarder *start_forwarding(struct fix *x, int64_t max)
{
    evr_start();
    ld_net_config *c = ld_net_config_new("sdk-upstream-key");
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(ld_net_config_set_events_uri(c, evr.url), 0);
    ld_event_forwarder *fw = ld_event_forwarder_new(ld_test_base, c, max);
    ld_net_config_free(c);
    ck_assert_ptr_nonnull(fw);
    struct lds_server_options o = {0};
    o.events = fw;
    o.max_event_body = 200000;
    start_with(x, &o, false);
    return fw;
}

/* The server first (it borrows the forwarder), then the forwarder and the
 * events service, whose connections would keep the loop busy. */
static void stop_forwarding(struct fix *x, ld_event_forwarder *fw)
{
    ld_future *f = lds_server_close(x->srv);
    ld_test_await_ok(f);
    lds_server_free(x->srv);
    x->srv = NULL;
    ld_test_await_ok(ld_event_forwarder_close(fw));
    ld_event_forwarder_free(fw);
    evr_stop();
    stop(x);
}

START_TEST(test_without_a_forwarder_event_paths_are_404)
{
    struct fix x;
    start(&x);
    struct resp r;
    const char *paths[] = {"/bulk", "/diagnostic", "/mobile", "/events/bulk/env"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        post(&x, paths[i], KEY, NULL, "[]", 2, &r);
        expect_error(&r, 404);
        resp_free(&r);
    }
    /* GET on an event path: 405 */
    http(&x, EVHTTP_REQ_GET, "/bulk", KEY, NULL, &r);
    ck_assert_int_eq(r.code, 405);
    ck_assert_str_eq(r.allow, "POST");
    resp_free(&r);
    stop(&x);
}
END_TEST

START_TEST(test_server_side_events_go_upstream_with_the_upstream_key)
{
    struct fix x;
    ld_event_forwarder *fw = start_forwarding(&x, 0);
    struct resp r;
    const char *lines[] = {"Content-Type",
                           "application/json",
                           "X-LaunchDarkly-Event-Schema",
                           "4",
                           "X-LaunchDarkly-Payload-ID",
                           "p-1",
                           "User-Agent",
                           "NodeJSClient/9",
                           "Cookie",
                           "c=1",
                           NULL};
    post(&x, "/bulk", KEY, lines, "[{\"kind\":\"identify\"}]", 21, &r);
    ck_assert_int_eq(r.code, 202);
    resp_free(&r);
    post(&x, "/bulk", "sdk-wrong", lines, "[]", 2, &r);
    expect_error(&r, 401);
    resp_free(&r);
    post(&x, "/diagnostic", KEY, NULL, "{}", 2, &r);
    ck_assert_int_eq(r.code, 202);
    resp_free(&r);
    post(&x, "/bulk", KEY, NULL, "", 0, &r);
    expect_error(&r, 400);
    resp_free(&r);
    for (int i = 0; i < 5000 && evr.n < 2; i++)
        loop_once();
    ck_assert_int_eq(evr.n, 2);
    struct evr_seen *b = strcmp(evr.seen[0].path, "/bulk") == 0 ? &evr.seen[0] : &evr.seen[1];
    struct evr_seen *d = b == &evr.seen[0] ? &evr.seen[1] : &evr.seen[0];
    ck_assert_str_eq(b->path, "/bulk");
    ck_assert_str_eq(b->auth, "sdk-upstream-key");
    ck_assert_str_eq(b->schema, "4");
    ck_assert_str_eq(b->payload_id, "p-1");
    ck_assert_str_eq(b->agent, "NodeJSClient/9");
    ck_assert_str_eq(b->cookie, "");
    ck_assert_str_eq(b->body, "[{\"kind\":\"identify\"}]");
    ck_assert_str_eq(d->path, "/diagnostic");
    ck_assert_str_eq(d->body, "{}");
    /* /status counts them */
    http(&x, EVHTTP_REQ_GET, "/status", NULL, NULL, &r);
    json_t *j = body_json(&r);
    json_t *ev = json_object_get(j, "events");
    ck_assert_int_eq(json_integer_value(json_object_get(ev, "forwarded")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(ev, "queued")), 0);
    json_decref(j);
    resp_free(&r);
    stop_forwarding(&x, fw);
}
END_TEST

START_TEST(test_mobile_and_javascript_events_go_upstream_as_they_came)
{
    struct fix x;
    ld_event_forwarder *fw = start_forwarding(&x, 0);
    struct resp r;
    const char *mobile[] = {"/mobile", "/mobile/events", "/mobile/events/bulk"};
    for (size_t i = 0; i < 3; i++) {
        post(&x, mobile[i], "api_key mob-1", NULL, "[1]", 3, &r);
        ck_assert_int_eq(r.code, 202);
        resp_free(&r);
    }
    post(&x, "/mobile/events/diagnostic", "api_key mob-1", NULL, "{}", 2, &r);
    ck_assert_int_eq(r.code, 202);
    resp_free(&r);
    post(&x, "/mobile", NULL, NULL, "[1]", 3, &r);
    expect_error(&r, 401);
    resp_free(&r);
    post(&x, "/events/bulk/env-7", NULL, NULL, "[2]", 3, &r);
    ck_assert_int_eq(r.code, 202);
    ck_assert_str_eq(r.cors, "*");
    resp_free(&r);
    post(&x, "/events/diagnostic/env-7", NULL, NULL, "{}", 2, &r);
    ck_assert_int_eq(r.code, 202);
    resp_free(&r);
    http(&x, EVHTTP_REQ_OPTIONS, "/events/bulk/env-7", NULL, NULL, &r);
    ck_assert_int_eq(r.code, 200);
    ck_assert_str_eq(r.cors, "*");
    resp_free(&r);
    for (int i = 0; i < 5000 && evr.n < 6; i++)
        loop_once();
    ck_assert_int_eq(evr.n, 6);
    int mobiles = 0, js = 0, diag = 0;
    for (int i = 0; i < 6; i++) {
        struct evr_seen *e = &evr.seen[i];
        if (strcmp(e->path, "/mobile") == 0) {
            mobiles++;
            ck_assert_str_eq(e->auth, "api_key mob-1");
            ck_assert_str_eq(e->body, "[1]");
        } else if (strcmp(e->path, "/mobile/events/diagnostic") == 0) {
            diag++;
            ck_assert_str_eq(e->auth, "api_key mob-1");
        } else if (strcmp(e->path, "/events/bulk/env-7") == 0) {
            js++;
            ck_assert_str_eq(e->body, "[2]");
        } else {
            ck_assert_str_eq(e->path, "/events/diagnostic/env-7");
            diag++;
        }
    }
    ck_assert_int_eq(mobiles, 3);
    ck_assert_int_eq(js, 1);
    ck_assert_int_eq(diag, 2);
    stop_forwarding(&x, fw);
}
END_TEST

START_TEST(test_a_full_forwarder_answers_503_and_large_bodies_pass)
{
    struct fix x;
    ld_event_forwarder *fw = start_forwarding(&x, 200 * 1024);
    evr.hold = true;
    static char big[150000];
    memset(big, 'e', sizeof big);
    struct resp r;
    /* over the server's body limit for requests (64 KiB), within the events' */
    post(&x, "/bulk", KEY, NULL, big, sizeof big, &r);
    ck_assert_int_eq(r.code, 202);
    resp_free(&r);
    /* the forwarder holds 150 KiB of 200: the next big one does not fit */
    post(&x, "/bulk", KEY, NULL, big, sizeof big, &r);
    expect_error(&r, 503);
    resp_free(&r);
    /* beyond max_event_body: 413 */
    static char huge[210000];
    memset(huge, 'h', sizeof huge);
    post(&x, "/bulk", KEY, NULL, huge, sizeof huge, &r);
    ck_assert_int_eq(r.code, 413);
    resp_free(&r);
    ld_event_forwarder_stats st;
    ck_assert_int_eq(ld_event_forwarder_stats_get(fw, &st), 0);
    ck_assert_uint_eq(st.refused, 1);
    ck_assert_uint_eq(st.queued, 1);
    evr.hold = false;
    evr_release_held();
    stop_forwarding(&x, fw);
}
END_TEST

Suite *ld_suite_serve(void)
{
    Suite *s = suite_create("serve");
    TCase *tc = tcase_create("polling");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_polling_endpoints_serve_the_store);
    tcase_add_test(tc, test_percent_encoded_keys_are_decoded);
    tcase_add_test(tc, test_an_item_answered_at_once_follows_the_store);
    tcase_add_test(tc, test_etag_answers_304_until_the_data_changes);
    tcase_add_test(tc, test_if_none_match_in_two_lines_is_one_list);
    tcase_add_test(tc, test_server_side_endpoints_need_the_sdk_key);
    tcase_add_test(tc, test_keys_long_and_short_are_compared_exactly);
    tcase_add_test(tc, test_status_reports_source_store_and_counts);
    suite_add_tcase(s, tc);
    tc = tcase_create("hostile");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_unknown_paths_and_methods);
    tcase_add_test(tc, test_bad_encodings_are_400);
    tcase_add_test(tc, test_head_answers_have_headers_but_no_body);
    tcase_add_test(tc, test_a_body_left_unread_is_not_taken_for_a_request);
    tcase_add_test(tc, test_keys_that_are_not_utf8_are_400);
    tcase_add_test(tc, test_oversized_requests_are_refused);
    tcase_add_test(tc, test_garbage_closes_the_connection);
    tcase_add_test(tc, test_connections_beyond_the_limit_get_503);
    tcase_add_test(tc, test_a_request_sent_slowly_is_cut_at_the_timeout);
    tcase_add_test(tc, test_the_deadline_runs_from_the_last_answer);
    tcase_add_test(tc, test_a_large_answer_read_slowly_is_not_cut_at_the_timeout);
    tcase_add_test(tc, test_a_client_that_reads_no_small_answers_is_dropped);
    tcase_add_test(tc, test_large_and_small_answers_on_one_connection_read_slowly);
    tcase_add_test(tc, test_an_item_asked_for_during_a_large_init_is_the_init_s);
    tcase_add_test(tc, test_pipelined_items_from_a_store_that_answers_later);
    tcase_add_test(tc, test_deadlines_of_many_connections_then_free_with_timers_pending);
    tcase_add_test(tc, test_a_report_body_has_its_own_time_after_slow_headers);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    tc = tcase_create("streaming");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_stream_sends_put_then_patch_and_delete);
    tcase_add_test(tc, test_stream_gets_changes_made_before_its_put_after_it);
    tcase_add_test(tc, test_stream_losing_changes_before_its_put_is_refused);
    tcase_add_test(tc, test_stream_heartbeats);
    tcase_add_test(tc, test_stream_outlives_the_request_timeout);
    tcase_add_test(tc, test_slow_stream_reader_is_dropped);
    tcase_add_test(tc, test_stream_large_change_keeps_readers_and_drops_non_readers);
    tcase_add_test(tc, test_slow_stream_reader_holds_about_the_bound_in_memory);
    tcase_add_test(tc, test_slow_stream_reader_after_its_put_holds_only_the_bound);
    tcase_add_test(tc, test_stream_events_written_now_or_queued_arrive_whole_and_in_order);
    tcase_add_test(tc, test_stream_to_an_http_1_0_client_is_not_chunked);
    tcase_add_test(tc, test_stream_socket_sends_events_without_delay);
    tcase_add_test(tc, test_stream_put_larger_than_the_stream_bound_is_sent);
    tcase_set_timeout(tc, 30); /* a put of 256 KiB read under the sanitizers */
    suite_add_tcase(s, tc);
    tc = tcase_create("evalx");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_evalx_answers_the_evaluators_results);
    tcase_add_test(tc, test_evalx_body_is_the_all_flags_json_converted);
    tcase_add_test(tc, test_evalx_body_text);
    tcase_add_test(tc, test_evalx_head_has_the_length_of_the_body);
    tcase_add_test(tc, test_evalx_before_the_store_is_initialized_is_503);
    tcase_add_test(tc, test_evalx_answers_only_the_client_side_ids_given);
    tcase_add_test(tc, test_evalx_cors_and_preflight);
    tcase_add_test(tc, test_evalx_context_with_an_integer_beyond_int64);
    tcase_add_test(tc, test_report_content_type_is_a_media_type);
    tcase_add_test(tc, test_report_with_two_different_content_lengths_is_400);
    tcase_add_test(tc, test_report_with_a_chunked_body_is_read);
    tcase_add_test(tc, test_report_keeps_the_connection);
    tcase_add_test(tc, test_report_chunked_body_is_read_once_as_it_comes);
    suite_add_tcase(s, tc);
    tc = tcase_create("events");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_without_a_forwarder_event_paths_are_404);
    tcase_add_test(tc, test_server_side_events_go_upstream_with_the_upstream_key);
    tcase_add_test(tc, test_mobile_and_javascript_events_go_upstream_as_they_came);
    tcase_add_test(tc, test_a_full_forwarder_answers_503_and_large_bodies_pass);
    suite_add_tcase(s, tc);
    tc = tcase_create("lifetime");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_many_requests_all_answered);
    tcase_add_test(tc, test_close_with_streams_and_requests_pending);
    tcase_add_test(tc, test_close_waits_for_answers_being_sent);
    tcase_add_test(tc, test_close_waits_at_most_the_timeout_for_a_reader_that_reads_nothing);
    tcase_add_test(tc, test_free_while_the_close_waits_for_answers_to_be_sent);
    tcase_add_test(tc, test_free_right_after_close_with_work_pending);
    tcase_add_test(tc, test_free_with_requests_pending_and_no_close);
    tcase_add_test(tc, test_bind_failure_is_reported);
    suite_add_tcase(s, tc);
    return s;
}
