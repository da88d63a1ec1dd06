/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/answer.c: answers (status, JSON body, ETag, CORS headers, closing
 * or not), with the timeouts of a connection while an answer is written.
 */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "serve-internal.h"

static const char *reason_of(int code)
{
    switch (code) {
    case 200:
        return "OK";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 411:
        return "Length Required";
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "Error";
    }
}

static void add_cors(struct evkeyvalq *h)
{
    evhttp_add_header(h, "Access-Control-Allow-Origin", "*");
    evhttp_add_header(h, "Access-Control-Allow-Methods", "GET, POST, REPORT, OPTIONS");
    evhttp_add_header(h, "Access-Control-Allow-Headers",
                      "Content-Type, Content-Length, Accept-Encoding, X-LaunchDarkly-User-Agent, "
                      "X-LaunchDarkly-Payload-ID, X-LaunchDarkly-Wrapper, "
                      "X-LaunchDarkly-Event-Schema, X-LaunchDarkly-Tags");
    evhttp_add_header(h, "Access-Control-Max-Age", "300");
}

void lds_log_answer(lds_server *srv, struct evhttp_request *req, int code, size_t len)
{
    srv->st.requests++;
    if (srv->o.log_level < LDS_LOG_DEBUG || !srv->o.log)
        return;
    const char *uri = evhttp_request_get_uri(req);
    lds_log(srv, LDS_LOG_DEBUG, "%d %.200s (%zu bytes)", code, uri ? uri : "?", len);
}

/* An answer is written (the connection is still there): reading again,
 * with the read timeout back, and the deadline of the next request. */
static void answer_written(struct evhttp_request *req, void *arg)
{
    lds_server *srv = arg;
    struct lds_conn *c = lds_conn_find(srv, req);
    if (c && c->setup && c->write_only) {
        struct timeval tv = {srv->o.timeout_s, 0};
        bufferevent_set_timeouts(c->bev, &tv, &tv);
        c->write_only = false;
    }
    lds_conn_expect_request(c);
}

/* True when the request may have a body that evhttp left unread on the
 * connection: it reads none for a method it does not know (REPORT's is
 * read by body.c: unread unless it was taken whole), nor for HEAD or
 * TRACE. What follows must not be taken for the next request. */
static bool body_unread(lds_server *srv, struct evhttp_request *req)
{
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (((unsigned)cmd & LDS_KNOWN_METHODS) == 0) {
        struct lds_conn *c = lds_conn_find(srv, req);
        return !c || !c->body_taken;
    }
    if (cmd != EVHTTP_REQ_HEAD && cmd != EVHTTP_REQ_TRACE)
        return false;
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *cl = evhttp_find_header(h, "Content-Length");
    return evhttp_find_header(h, "Transfer-Encoding") || (cl && strcmp(cl, "0") != 0);
}

static bool is_head(struct evhttp_request *req)
{
    return evhttp_request_get_command(req) == EVHTTP_REQ_HEAD;
}

/* Sends status `code`, with a JSON body of `len` bytes in `out` when `body`
 * (`out` NULL for a HEAD, or when the body could not be put there). */
static void send_answer(lds_server *srv, struct evhttp_request *req, int code, bool body,
                        size_t len, struct evbuffer *out, const char *etag, int flags)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (body)
        evhttp_add_header(h, "Content-Type", "application/json");
    if (etag)
        evhttp_add_header(h, "ETag", etag);
    if (flags & LDS_F_CORS)
        add_cors(h);
    /* a body left unread would be taken for the next request: close */
    if ((flags & LDS_F_CLOSE) || srv->closing || body_unread(srv, req))
        evhttp_add_header(h, "Connection", "close");
    if (body && is_head(req)) {
        /* evhttp 2.1 sends a HEAD's body when given one (and no
         * Content-Length): a keep-alive client would take the body for
         * the next answer. The length, and no body. */
        char text[24];
        snprintf(text, sizeof text, "%zu", len);
        evhttp_add_header(h, "Content-Length", text);
    }
    lds_log_answer(srv, req, code, body ? len : 0);
    /* the next request on this connection has its time from when this
     * answer is written (however long a reader takes to read it) */
    evhttp_request_set_on_complete_cb(req, answer_written, srv);
    /* while it is written, libevent reads only to see the connection
     * close, and its read timeout would cut an answer that takes longer
     * than that to read: only the write timeout (no progress) then. Not
     * for a small answer, which the socket takes at once (two changes of
     * the timeouts were ~2% of the time of a latest-flags/{key}). */
    struct lds_conn *c = out && len > LDS_SMALL_ANSWER ? lds_conn_find(srv, req) : NULL;
    if (c && c->setup) {
        c->write_only = true;
        /* from now, not from when this pass of the loop began (making a
         * large body may have taken a while) */
        event_base_update_cache_time(srv->base);
        struct timeval wtv = {srv->o.timeout_s, 0};
        bufferevent_set_timeouts(c->bev, NULL, &wtv);
    }
    evhttp_send_reply(req, code, reason_of(code), out);
}

void lds_send_blob(lds_server *srv, struct evhttp_request *req, int code, struct lds_blob *body,
                   const char *etag, int flags)
{
    struct evbuffer *out = NULL;
    if (body && !is_head(req)) {
        out = srv->scratch;
        evbuffer_drain(out, evbuffer_get_length(out));
        if (lds_blob_add(out, body) != 0)
            out = NULL;
    }
    send_answer(srv, req, code, body != NULL, body ? body->len : 0, out, etag, flags);
    if (out)
        evbuffer_drain(out, evbuffer_get_length(out));
}

void lds_send_buffer(lds_server *srv, struct evhttp_request *req, int code, struct evbuffer *body,
                     int flags)
{
    size_t len = evbuffer_get_length(body);
    send_answer(srv, req, code, true, len, is_head(req) ? NULL : body, NULL, flags);
    evbuffer_drain(body, evbuffer_get_length(body));
}

void lds_send_error(lds_server *srv, struct evhttp_request *req, int code, const char *msg,
                    int flags)
{
    json_t *j = json_pack("{s:s}", "error", msg ? msg : reason_of(code));
    struct lds_blob *b = j ? lds_blob_json(j) : NULL;
    json_decref(j);
    if (code >= 500)
        lds_log(srv, LDS_LOG_WARN, "%d %.200s: %s", code, evhttp_request_get_uri(req),
                msg ? msg : "");
    lds_send_blob(srv, req, code, b, NULL, flags);
    lds_blob_unref(b);
}

/* True when the request's If-None-Match names `etag` (quoted) or is "*".
 * The field may come in several lines: one list (RFC 9110, 5.3). */
static bool etag_matches(struct evhttp_request *req, const char *etag)
{
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    for (struct evkeyval *kv = h->tqh_first; kv; kv = kv->next.tqe_next) {
        if (evutil_ascii_strcasecmp(kv->key, "If-None-Match") != 0)
            continue;
        const char *inm = kv->value;
        while (*inm == ' ')
            inm++;
        if (strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL)
            return true;
    }
    return false;
}

void lds_send_cacheable(lds_server *srv, struct evhttp_request *req, struct lds_blob *body,
                        const char *etag)
{
    if (etag_matches(req, etag))
        lds_send_blob(srv, req, 304, NULL, etag, 0);
    else
        lds_send_blob(srv, req, 200, body, etag, 0);
}

void lds_method_not_allowed(lds_server *srv, struct evhttp_request *req, const char *allow,
                            int flags)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    lds_send_error(srv, req, 405, "method not allowed", flags);
}

void lds_send_rejected(lds_server *srv, struct evhttp_request *req, ld_future *f, int flags)
{
    lds_send_error(srv, req, 500, ld_future_error_message(f), flags);
}
