/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/body.c: reading a REPORT's body. evhttp 2.1 reads no body for a
 * method it does not know, so it is read here, from the connection's
 * input, framed by its Content-Length or chunked (Transfer-Encoding:
 * chunked, as browsers' fetch() may send it), within max_body, with the
 * bufferevent's callbacks borrowed while it is still arriving. Once the
 * body is taken whole, the connection may be kept for the next request
 * (conn->body_taken).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "serve-internal.h"

/* Where the reading of a chunked body has got to: the end of the chunks
 * found whole so far and their data's length, so that what arrives next
 * is read from there (read from the start at every arrival, a body of
 * tiny chunks cost the loop time growing with all of it, per arrival). */
struct chunk_pos {
    size_t at, data;
};

/* A request whose body is still arriving. */
struct lds_bodyw {
    lds_server *srv;
    struct lds_conn *conn;
    struct evhttp_request *req;
    size_t need;
    bool chunked; /* framed by chunks, not by `need` */
    struct chunk_pos pos;
    int flags;
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
static void body_ready(lds_server *srv, struct evhttp_request *req, struct lds_conn *c, size_t need,
                       const struct lds_route *rt, lds_body_fn fn, int arg)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    const char *text = need ? (const char *)evbuffer_pullup(in, (ev_ssize_t)need) : "";
    c->body_taken = true;
    fn(srv, req, rt, text ? text : "", text ? need : 0, arg);
    evbuffer_drain(in, need);
}

/* The longest chunk-size line (extensions included) and trailer part taken. */
#define CHUNK_LINE_MAX 1024
#define TRAILERS_MAX 8192

/* The line at `p` in `in`, without its CRLF, into `line` (CHUNK_LINE_MAX + 1
 * bytes; cut there). @return its length with the CRLF, 0 when it has not
 * come whole, -1 when it is too long. */
static long line_at(struct evbuffer *in, struct evbuffer_ptr *p, char *line)
{
    size_t eol;
    struct evbuffer_ptr e = evbuffer_search_eol(in, p, &eol, EVBUFFER_EOL_CRLF_STRICT);
    size_t left = evbuffer_get_length(in) - (size_t)p->pos;
    if (e.pos < 0)
        return left > CHUNK_LINE_MAX ? -1 : 0;
    size_t n = (size_t)(e.pos - p->pos);
    if (n > CHUNK_LINE_MAX)
        return -1;
    evbuffer_copyout_from(in, p, line, n);
    line[n] = '\0';
    return (long)(n + eol);
}

/* Reads the chunked body at the start of `in` (RFC 9112 7.1) from `pos`
 * (when not NULL: updated past each whole chunk), its data into `out`
 * when not NULL (then from the start). @return 1 when it is whole (*raw:
 * its bytes with the framing and trailers; *len: its data's), 0 when more
 * must come, -1 when it is malformed, -2 when its data pass `max`. */
static int chunked_read(lds_server *srv, struct evbuffer *in, size_t max, char *out, size_t *raw,
                        size_t *len, struct chunk_pos *pos)
{
    char line[CHUNK_LINE_MAX + 1];
    struct evbuffer_ptr p;
    struct chunk_pos from = {0, 0};
    if (pos && !out)
        from = *pos;
    evbuffer_ptr_set(in, &p, from.at, EVBUFFER_PTR_SET);
    size_t total = evbuffer_get_length(in), data = from.data;
    for (;;) {
        long k = line_at(in, &p, line);
        if (k <= 0)
            return (int)k;
        srv->st.chunk_lines++;
        char *end;
        errno = 0;
        unsigned long long size = strtoull(line, &end, 16);
        if (!isxdigit((unsigned char)line[0]) || line[1] == 'x' || line[1] == 'X' || errno ||
            (*end && *end != ';'))
            return -1;
        if (size > max - data)
            return -2;
        size_t at = (size_t)p.pos + (size_t)k;
        if (size == 0) { /* the last chunk: trailers (ignored), then an empty line */
            for (size_t start = at;;) {
                evbuffer_ptr_set(in, &p, at, EVBUFFER_PTR_SET);
                k = line_at(in, &p, line);
                if (k <= 0)
                    return (int)k;
                at += (size_t)k;
                if (k == 2)
                    break;
                if (at - start > TRAILERS_MAX)
                    return -1;
            }
            *raw = at;
            *len = data;
            return 1;
        }
        if (total - at < size + 2)
            return 0;
        char crlf[2];
        evbuffer_ptr_set(in, &p, at + size, EVBUFFER_PTR_SET);
        evbuffer_copyout_from(in, &p, crlf, 2);
        if (crlf[0] != '\r' || crlf[1] != '\n')
            return -1;
        if (out) {
            evbuffer_ptr_set(in, &p, at, EVBUFFER_PTR_SET);
            evbuffer_copyout_from(in, &p, out + data, size);
        }
        data += size;
        evbuffer_ptr_set(in, &p, at + size + 2, EVBUFFER_PTR_SET);
        if (pos && !out)
            *pos = (struct chunk_pos){at + size + 2, data};
    }
}

/* Hands a chunked body over once it has come whole. @return true when the
 * request is done with (answered, or handed over), false when more must
 * come. */
static bool chunked_ready(lds_server *srv, struct evhttp_request *req, struct lds_conn *c,
                          int flags, const struct lds_route *rt, lds_body_fn fn, int arg,
                          struct chunk_pos *pos)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t raw, len;
    int rc = chunked_read(srv, in, srv->o.max_body, NULL, &raw, &len, pos);
    if (rc == 0 && evbuffer_get_length(in) > 8 * srv->o.max_body + 65536)
        rc = -2; /* tiny chunks: the framing alone passes any body's */
    if (rc == 0)
        return false;
    if (rc < 0) {
        lds_send_error(srv, req, rc == -1 ? 400 : 413,
                       rc == -1 ? "malformed chunked body" : "request body too large", flags);
        return true;
    }
    char *text = lds_malloc(len + 1);
    if (!text) {
        lds_send_error(srv, req, 500, "out of memory", flags);
        return true;
    }
    chunked_read(srv, in, srv->o.max_body, text, &raw, &len, NULL);
    text[len] = '\0';
    evbuffer_drain(in, raw);
    c->body_taken = true;
    fn(srv, req, rt, text, len, arg);
    lds_free(text);
    return true;
}

static void bodyw_read(struct bufferevent *bev, void *arg)
{
    struct lds_bodyw *w = arg;
    if (!w->chunked && evbuffer_get_length(bufferevent_get_input(bev)) < w->need)
        return;
    if (w->chunked) {
        struct evbuffer *in = bufferevent_get_input(bev);
        size_t raw, len;
        int rc = chunked_read(w->srv, in, w->srv->o.max_body, NULL, &raw, &len, &w->pos);
        if (rc == 0 && evbuffer_get_length(in) <= 8 * w->srv->o.max_body + 65536)
            return;
    }
    bodyw_restore(w);
    lds_conn_carry(w->conn, NULL, NULL);
    lds_conn_request_came(w->conn);
    if (w->chunked)
        chunked_ready(w->srv, w->req, w->conn, w->flags, w->rt, w->fn, w->arg, &w->pos);
    else
        body_ready(w->srv, w->req, w->conn, w->need, w->rt, w->fn, w->arg);
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
    /* (any Transfer-Encoding but one "chunked" got 400 already) */
    bool chunked = evhttp_find_header(h, "Transfer-Encoding") != NULL;
    if (chunked && cl) { /* which one frames the body is ambiguous */
        lds_send_error(srv, req, 400, "both Content-Length and Transfer-Encoding", flags);
        return;
    }
    if (!cl && !chunked) {
        fn(srv, req, rt, "", 0, arg);
        return;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long need = chunked ? 0 : strtoull(cl, &end, 10);
    if (!chunked && (cl[0] < '0' || cl[0] > '9' || *end || errno)) {
        lds_send_error(srv, req, 400, "bad Content-Length", flags);
        return;
    }
    for (struct evkeyval *kv = h->tqh_first; kv && cl; kv = kv->next.tqe_next)
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
    struct chunk_pos pos = {0, 0};
    if (chunked ? chunked_ready(srv, req, c, flags, rt, fn, arg, &pos)
                : evbuffer_get_length(bufferevent_get_input(bev)) >= need) {
        if (!chunked)
            body_ready(srv, req, c, (size_t)need, rt, fn, arg);
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
    w->chunked = chunked;
    w->pos = pos;
    w->flags = flags;
    w->rt = rt;
    w->fn = fn;
    w->arg = arg;
    bufferevent_getcb(bev, &w->rd, &w->wr, &w->evcb, &w->cbarg);
    lds_conn_carry(c, bodyw_conn_closed, w);
    bufferevent_setcb(bev, bodyw_read, NULL, bodyw_event, w);
    bufferevent_enable(bev, EV_READ);
    lds_conn_expect_request(c); /* the body has its time too */
}
