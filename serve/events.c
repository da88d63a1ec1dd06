/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/events.c: the events SDKs post, forwarded to the upstream events
 * service by the options' ld_event_forwarder (events.h), as LaunchDarkly's
 * Relay Proxy forwards them: answered 202 once queued, 400 for an empty
 * body, 503 when the forwarder holds as much as it may, and 404 when the
 * server forwards no events. Server-side payloads go upstream with the
 * forwarder's SDK key; mobile ones with the SDK's own Authorization (a
 * mobile key, which this server does not check); JavaScript ones under
 * their environment's ID, as they came.
 */
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "serve-internal.h"

/* The upstream path of each route's arg (routes.c). */
static const char *upstream_path(int arg, char *const *seg, char *buf, size_t n)
{
    switch (arg) {
    case LDS_E_BULK:
        return "/bulk";
    case LDS_E_DIAGNOSTIC:
        return "/diagnostic";
    case LDS_E_MOBILE:
        return "/mobile";
    case LDS_E_MOBILE_DIAGNOSTIC:
        return "/mobile/events/diagnostic";
    case LDS_E_JS_BULK:
    case LDS_E_JS_DIAGNOSTIC:
        snprintf(buf, n, "/events/%s/%s", arg == LDS_E_JS_BULK ? "bulk" : "diagnostic", seg[2]);
        return buf;
    }
    return NULL;
}

void lds_events_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                      char *const *seg, const char *query)
{
    (void)query;
    int cors = rt->flags & LDS_R_CORS ? LDS_F_CORS : 0;
    if (!srv->o.events) {
        lds_send_error(srv, req, 404, "this server forwards no events", cors);
        return;
    }
    bool mobile = rt->arg == LDS_E_MOBILE || rt->arg == LDS_E_MOBILE_DIAGNOSTIC;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    if (mobile && !evhttp_find_header(in, "Authorization")) {
        lds_send_error(srv, req, 401, "no mobile key", cors);
        return;
    }
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(body);
    if (len == 0) {
        lds_send_error(srv, req, 400, "no events in the body", cors);
        return;
    }
    /* The SDK's header lines, as "Name: value"; the forwarder keeps those
     * that describe the payload. Its Authorization is passed only for a
     * mobile key: a server-side SDK's is this server's key, and the
     * forwarder sends its own. */
    size_t nlines = 0, bytes = 0;
    for (struct evkeyval *kv = in->tqh_first; kv; kv = kv->next.tqe_next) {
        nlines++;
        bytes += strlen(kv->key) + strlen(kv->value) + 3;
    }
    char **lines = lds_malloc((nlines + 1) * sizeof *lines + bytes);
    const unsigned char *data = evbuffer_pullup(body, -1);
    if (!lines || !data) {
        lds_free(lines);
        lds_send_error(srv, req, 503, "out of memory", cors);
        return;
    }
    char *at = (char *)(lines + nlines + 1);
    size_t k = 0;
    for (struct evkeyval *kv = in->tqh_first; kv; kv = kv->next.tqe_next) {
        if (!mobile && evutil_ascii_strcasecmp(kv->key, "Authorization") == 0)
            continue;
        size_t room = strlen(kv->key) + strlen(kv->value) + 3;
        snprintf(at, room, "%s: %s", kv->key, kv->value);
        lines[k++] = at;
        at += room;
    }
    lines[k] = NULL;
    char path[300];
    const char *up = upstream_path(rt->arg, seg, path, sizeof path);
    int rc = ld_event_forwarder_post(srv->o.events, up, (const char *const *)lines, data, len);
    lds_free(lines);
    if (rc == 0) {
        lds_send_blob(srv, req, 202, NULL, NULL, cors);
    } else if (rc == LD_EINVAL) {
        lds_send_error(srv, req, 400, "the path cannot be forwarded", cors);
    } else {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        lds_send_error(srv, req, 503,
                       rc == LD_EBUSY ? "the events queue is full" : "events are not forwarded now",
                       cors);
    }
}
