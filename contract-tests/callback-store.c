/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * contract-tests/callback-store.c: the big segment store the test harness
 * asks for ("bigSegments.callbackUri"): every operation is a POST to the
 * harness's callback service, made with libevent's HTTP client on the
 * loop, as an ld_big_segment_store implementation (big_segments.h):
 *   get_metadata:   POST {uri}/getMetadata -> {"lastUpToDate": ms}
 *   get_membership: POST {uri}/getMembership {"contextHash": h}
 *                   -> {"values": {ref: true | false | null}} (null or
 *                   absent "values": no membership at all)
 * A transport failure, a status other than 2xx, a body that is not what
 * the service says or no answer within OP_TIMEOUT_S rejects with LD_ESTORE.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <ldasync/ldasync.h>

#include "test-service.h"

/* An operation not answered by then is rejected: the requests share one
 * connection, one at a time, so a callback service that never answers (or
 * answers a byte at a time) would otherwise hold every evaluation after. */
#define OP_TIMEOUT_S 5

struct cb_store;

/* One request in flight: the harness answers it, or the store is freed. */
struct cb_op {
    struct cb_op *prev, *next;
    struct cb_store *st;
    ld_future *out; /* the front's future, ours to complete */
    struct evhttp_request *req;
    struct event *deadline;
    bool membership;
};

struct cb_store {
    struct event_base *base;
    struct evhttp_connection *conn;
    char *host; /* the Host header */
    char *path; /* the callback URI's path, without a trailing '/' */
    struct cb_op *ops;
};

static void op_unlink(struct cb_op *op)
{
    struct cb_store *st = op->st;
    if (op->prev)
        op->prev->next = op->next;
    else
        st->ops = op->next;
    if (op->next)
        op->next->prev = op->prev;
}

static void op_free(struct cb_op *op)
{
    op_unlink(op);
    if (op->deadline)
        event_free(op->deadline);
    ld_future_unref(op->out);
    free(op);
}

/* No answer in time: the request is cancelled (its callback does not
 * run; the connection goes on with the next one). */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct cb_op *op = arg;
    evhttp_cancel_request(op->req);
    ld_future_reject(op->out, LD_ESTORE, "the callback service did not answer within %d s",
                     OP_TIMEOUT_S);
    op_free(op);
}

/* The answer's body as JSON (a new reference), or NULL. */
static json_t *answer_json(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    if (n == 0)
        return NULL;
    json_error_t err;
    return json_loadb((const char *)evbuffer_pullup(in, -1), n, 0, &err);
}

/* {"values": {...}} to what get_membership fulfils with: refs mapped to
 * true or false (null and other values are "no value"), or NULL. */
static int membership_of(json_t *body, json_t **out)
{
    *out = NULL;
    if (!json_is_object(body))
        return -1;
    json_t *values = json_object_get(body, "values");
    if (!values || json_is_null(values))
        return 0;
    if (!json_is_object(values))
        return -1;
    json_t *m = json_object();
    if (!m)
        return -1;
    const char *ref;
    json_t *v;
    json_object_foreach(values, ref, v)
    {
        if (json_is_boolean(v) && json_object_set(m, ref, v) != 0) {
            json_decref(m);
            return -1;
        }
    }
    *out = m;
    return 0;
}

static void on_answer(struct evhttp_request *req, void *arg)
{
    struct cb_op *op = arg;
    int code = req ? evhttp_request_get_response_code(req) : 0;
    if (code < 200 || code > 299) {
        ld_future_reject(op->out, LD_ESTORE, "the callback service answered %d", code);
    } else {
        json_t *body = answer_json(req);
        if (op->membership) {
            json_t *m;
            if (membership_of(body, &m) != 0)
                ld_future_reject(op->out, LD_ESTORE, "getMembership: not the expected body");
            else
                ld_future_fulfill_json(op->out, m); /* steals m */
        } else {
            json_t *t = json_object_get(body, "lastUpToDate");
            if (json_is_number(t) && json_number_value(t) >= 0)
                ld_future_fulfill_int(op->out, (int64_t)json_number_value(t));
            else if (json_is_object(body))
                ld_future_fulfill_int(op->out, LD_BIG_SEGMENT_TIME_UNKNOWN);
            else
                ld_future_reject(op->out, LD_ESTORE, "getMetadata: not the expected body");
        }
        json_decref(body);
    }
    /* libevent frees the request once this returns. */
    op_free(op);
}

static void post(struct cb_store *st, const char *what, json_t *body, bool membership,
                 ld_future *out)
{
    struct cb_op *op = calloc(1, sizeof *op);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    size_t plen = strlen(st->path) + strlen(what) + 2;
    char *path = malloc(plen);
    struct evhttp_request *req = op ? evhttp_request_new(on_answer, op) : NULL;
    struct event *deadline = op ? evtimer_new(st->base, on_deadline, op) : NULL;
    const struct timeval after = {OP_TIMEOUT_S, 0};
    if (!op || !path || !req || !deadline || (body && !text)) {
        if (req)
            evhttp_request_free(req);
        if (deadline)
            event_free(deadline);
        free(op);
        free(path);
        free(text);
        ld_future_reject(out, LD_ENOMEM, "out of memory");
        ld_future_unref(out);
        return;
    }
    snprintf(path, plen, "%s/%s", st->path, what);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Host", st->host);
    evhttp_add_header(h, "Content-Type", "application/json");
    if (text)
        evbuffer_add(evhttp_request_get_output_buffer(req), text, strlen(text));
    free(text);
    op->st = st;
    op->out = out;
    op->req = req;
    op->deadline = deadline;
    op->membership = membership;
    op->next = st->ops;
    if (op->next)
        op->next->prev = op;
    st->ops = op;
    /* On failure libevent has freed the request, without calling
     * on_answer: complete here. */
    if (evhttp_make_request(st->conn, req, EVHTTP_REQ_POST, path) != 0) {
        ld_future_reject(out, LD_ESTORE, "cannot reach the callback service");
        op_free(op);
    } else if (evtimer_add(deadline, &after) != 0) {
        evhttp_cancel_request(req);
        ld_future_reject(out, LD_ESTORE, "cannot time the callback service");
        op_free(op);
    }
    free(path);
}

static void cb_get_metadata(void *impl, ld_future *out)
{
    post(impl, "getMetadata", NULL, false, out);
}

static void cb_get_membership(void *impl, const char *context_hash, ld_future *out)
{
    json_t *body = json_pack("{s:s}", "contextHash", context_hash);
    post(impl, "getMembership", body, true, out);
    json_decref(body);
}

static void cb_free(void *impl)
{
    struct cb_store *st = impl;
    /* Frees the requests in flight without calling on_answer: their
     * futures were cancelled before this runs (big_segments.h). */
    evhttp_connection_free(st->conn);
    while (st->ops)
        op_free(st->ops);
    free(st->host);
    free(st->path);
    free(st);
}

static const char *cb_describe(void *impl)
{
    (void)impl;
    return "test harness callback";
}

static const struct ld_big_segment_store_ops cb_ops = {
    .version = LD_BIG_SEGMENT_STORE_OPS_VERSION,
    .get_metadata = cb_get_metadata,
    .get_membership = cb_get_membership,
    .free = cb_free,
    .describe = cb_describe,
};

ld_big_segment_store *ts_callback_store_new(struct event_base *base, const char *uri)
{
    struct evhttp_uri *u = evhttp_uri_parse(uri);
    const char *scheme = u ? evhttp_uri_get_scheme(u) : NULL;
    const char *host = u ? evhttp_uri_get_host(u) : NULL;
    if (!u || !scheme || strcmp(scheme, "http") != 0 || !host || !*host) {
        if (u)
            evhttp_uri_free(u);
        return NULL;
    }
    int port = evhttp_uri_get_port(u);
    if (port < 0)
        port = 80;
    const char *path = evhttp_uri_get_path(u);
    struct cb_store *st = calloc(1, sizeof *st);
    if (st) {
        st->base = base;
        size_t hlen = strlen(host) + 8;
        st->host = malloc(hlen);
        if (st->host)
            snprintf(st->host, hlen, "%s:%d", host, port);
        st->path = strdup(path ? path : "");
        st->conn = evhttp_connection_base_new(base, NULL, host, (ev_uint16_t)port);
        if (st->conn)
            evhttp_connection_set_timeout(st->conn, 10);
    }
    evhttp_uri_free(u);
    if (!st || !st->host || !st->path || !st->conn) {
        if (st && st->conn)
            evhttp_connection_free(st->conn);
        if (st) {
            free(st->host);
            free(st->path);
        }
        free(st);
        return NULL;
    }
    size_t n = strlen(st->path);
    while (n > 0 && st->path[n - 1] == '/')
        st->path[--n] = '\0';
    ld_big_segment_store *bss = ld_big_segment_store_new(base, &cb_ops, st);
    if (!bss)
        cb_free(st);
    return bss;
}
