/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/body.c: reading a REPORT's body. evhttp 2.1 reads no body for a
 * method it does not know, so it is read here, from the connection's
 * input, framed by its Content-Length (within max_body), with the
 * bufferevent's callbacks borrowed while it is still arriving.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "serve-internal.h"

/* A request whose body is still arriving. */
struct lds_bodyw {
    lds_server *srv;
    struct lds_conn *conn;
    struct evhttp_request *req;
    size_t need;
    const struct lds_route *rt;
    lds_body_fn fn;
    int arg;
    bufferevent_data_cb rd, wr;
    bufferevent_event_cb evcb;
    void *cbarg;
};

/* Gives the connection's callbacks back to libevent. */
static void bodyw_restore(struct lds_bodyw *w)
{
    struct bufferevent *bev = w->conn->bev;
    bufferevent_setcb(bev, w->rd, w->wr, w->evcb, w->cbarg);
    bufferevent_disable(bev, EV_READ);
}

/* The body is there: hand it over, and take it out of the connection's
 * input (before libevent reads the next request from it). */
static void body_ready(lds_server *srv, struct evhttp_request *req, struct bufferevent *bev,
                       size_t need, const struct lds_route *rt, lds_body_fn fn, int arg)
{
    struct evbuffer *in = bufferevent_get_input(bev);
    const char *text = need ? (const char *)evbuffer_pullup(in, (ev_ssize_t)need) : "";
    fn(srv, req, rt, text ? text : "", text ? need : 0, arg);
    evbuffer_drain(in, need);
}

static void bodyw_read(struct bufferevent *bev, void *arg)
{
    struct lds_bodyw *w = arg;
    if (evbuffer_get_length(bufferevent_get_input(bev)) < w->need)
        return;
    bodyw_restore(w);
    lds_conn_carry(w->conn, NULL, NULL);
    lds_conn_request_came(w->conn);
    body_ready(w->srv, w->req, bev, w->need, w->rt, w->fn, w->arg);
    lds_free(w);
}

static void bodyw_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what;
    struct lds_bodyw *w = arg;
    lds_log(w->srv, LDS_LOG_DEBUG, "client went away (or timed out) while sending a body");
    evhttp_connection_free(w->conn->evcon); /* bodyw_conn_closed() frees w */
}

/* The connection closes while the body is read (its deadline passed, or
 * bodyw_event()): libevent's callbacks back before it frees the
 * bufferevent. */
static void bodyw_conn_closed(void *what)
{
    struct lds_bodyw *w = what;
    bodyw_restore(w);
    lds_free(w); /* its request is attached: libevent frees it */
}

void lds_read_body(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                   int flags, lds_body_fn fn, int arg)
{
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *cl = evhttp_find_header(h, "Content-Length");
    if (!cl) {
        if (evhttp_find_header(h, "Transfer-Encoding"))
            lds_send_error(srv, req, 411, "a REPORT needs a Content-Length", flags);
        else
            fn(srv, req, rt, "", 0, arg);
        return;
    }
    char *end;
    errno = 0;
    unsigned long long need = strtoull(cl, &end, 10);
    if (cl[0] < '0' || cl[0] > '9' || *end || errno) {
        lds_send_error(srv, req, 400, "bad Content-Length", flags);
        return;
    }
    for (struct evkeyval *kv = h->tqh_first; kv; kv = kv->next.tqe_next)
        if (evutil_ascii_strcasecmp(kv->key, "Content-Length") == 0 && strcmp(kv->value, cl) != 0) {
            /* which one frames the body is ambiguous */
            lds_send_error(srv, req, 400, "two different Content-Lengths", flags);
            return;
        }
    if (need > srv->o.max_body) {
        lds_send_error(srv, req, 413, "request body too large", flags);
        return;
    }
    struct lds_conn *c = lds_conn_of(srv, req);
    if (!c) {
        lds_send_error(srv, req, 503, "connection not tracked", flags);
        return;
    }
    struct bufferevent *bev = c->bev;
    if (evbuffer_get_length(bufferevent_get_input(bev)) >= need) {
        body_ready(srv, req, bev, (size_t)need, rt, fn, arg);
        return;
    }
    struct lds_bodyw *w = lds_calloc(1, sizeof *w);
    if (!w) {
        lds_send_error(srv, req, 500, "out of memory", flags);
        return;
    }
    w->srv = srv;
    w->conn = c;
    w->req = req;
    w->need = (size_t)need;
    w->rt = rt;
    w->fn = fn;
    w->arg = arg;
    bufferevent_getcb(bev, &w->rd, &w->wr, &w->evcb, &w->cbarg);
    lds_conn_carry(c, bodyw_conn_closed, w);
    bufferevent_setcb(bev, bodyw_read, NULL, bodyw_event, w);
    bufferevent_enable(bev, EV_READ);
    lds_conn_expect_request(c); /* the body has its time too */
}
