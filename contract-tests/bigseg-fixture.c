/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * bigseg-fixture: the test harness's big segment callback service, for
 * contract-tests/smoke.sh: what the harness answers ldasync-test-service's
 * callback store (callback-store.c), and what the smoke test reads back.
 *
 *   POST /getMetadata    {"lastUpToDate": now - age}, or 500 when "error"
 *   POST /getMembership  {"values": memberships[contextHash] or null};
 *                        the hash is recorded
 *   GET  /queries        {"membership": [hashes in order], "metadata": n}
 *   POST /control        {"status": "healthy" | "stale" | "error" | "hang",
 *                         "memberships": {hash: {ref: bool | null} | null}}
 *                        (each optional) changes what it answers; "hang":
 *                        getMetadata, getMembership and any other path (a
 *                        stream's GET /all) are never answered, as a peer
 *                        that accepts and says nothing
 *   DELETE /             stops it
 *
 * The path before the last segment is ignored, so any callback URI prefix
 * works. It logs "listening on http://127.0.0.1:PORT/" to stderr.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>

struct fixture {
    struct event_base *base;
    json_t *memberships; /* hash -> object or null */
    json_t *queries;     /* the hashes asked for */
    long metadata_queries;
    const char *status; /* "healthy", "stale", "error", "hang" */
};

static void reply(struct evhttp_request *req, int code, json_t *body)
{
    struct evbuffer *b = evbuffer_new();
    char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (b && s)
        evbuffer_add(b, s, strlen(s));
    free(s);
    json_decref(body);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, code, code == 200 ? "OK" : "Error", b);
    if (b)
        evbuffer_free(b);
}

static json_t *body_of(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    json_error_t err;
    return n ? json_loadb((const char *)evbuffer_pullup(in, -1), n, 0, &err) : NULL;
}

static double now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct fixture *fx = arg;
    const char *uri = evhttp_request_get_uri(req);
    const char *last = strrchr(uri, '/');
    last = last ? last + 1 : uri;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    bool known = strcmp(last, "queries") == 0 || strcmp(last, "control") == 0;
    if (cmd == EVHTTP_REQ_DELETE) {
        reply(req, 200, NULL);
        event_base_loopexit(fx->base, NULL);
    } else if (!known && strcmp(fx->status, "hang") == 0) {
        /* never answered: evhttp_free() frees it at the end */
    } else if (strcmp(last, "getMetadata") == 0) {
        fx->metadata_queries++;
        if (strcmp(fx->status, "error") == 0)
            reply(req, 500, NULL);
        else {
            /* stale: a day old */
            double t = now_ms() - (strcmp(fx->status, "stale") == 0 ? 86400000.0 : 0);
            reply(req, 200, json_pack("{s:f}", "lastUpToDate", t));
        }
    } else if (strcmp(last, "getMembership") == 0) {
        json_t *body = body_of(req);
        const char *hash = json_string_value(json_object_get(body, "contextHash"));
        if (!hash) {
            reply(req, 400, NULL);
        } else {
            json_array_append_new(fx->queries, json_string(hash));
            json_t *m = json_object_get(fx->memberships, hash);
            reply(req, 200, json_pack("{s:O?}", "values", m));
        }
        json_decref(body);
    } else if (strcmp(last, "queries") == 0) {
        reply(req, 200,
              json_pack("{s:O,s:i}", "membership", fx->queries, "metadata",
                        (int)fx->metadata_queries));
    } else if (strcmp(last, "control") == 0) {
        json_t *body = body_of(req);
        const char *status = json_string_value(json_object_get(body, "status"));
        if (status && strcmp(status, "healthy") == 0)
            fx->status = "healthy";
        else if (status && strcmp(status, "stale") == 0)
            fx->status = "stale";
        else if (status && strcmp(status, "error") == 0)
            fx->status = "error";
        else if (status && strcmp(status, "hang") == 0)
            fx->status = "hang";
        json_t *m = json_object_get(body, "memberships");
        if (json_is_object(m))
            json_object_update(fx->memberships, m);
        json_decref(body);
        reply(req, 200, NULL);
    } else {
        reply(req, 404, NULL);
    }
}

int main(void)
{
    struct fixture fx = {0};
    fx.status = "healthy";
    fx.memberships = json_object();
    fx.queries = json_array();
    fx.base = event_base_new();
    struct evhttp *http = fx.base ? evhttp_new(fx.base) : NULL;
    struct evhttp_bound_socket *bound =
        http ? evhttp_bind_socket_with_handle(http, "127.0.0.1", 0) : NULL;
    if (!bound) {
        fprintf(stderr, "bigseg-fixture: cannot listen\n");
        return 1;
    }
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE);
    evhttp_set_gencb(http, on_request, &fx);
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    getsockname(evhttp_bound_socket_get_fd(bound), (struct sockaddr *)&sin, &len);
    fprintf(stderr, "bigseg-fixture: listening on http://127.0.0.1:%d/\n", ntohs(sin.sin_port));
    event_base_dispatch(fx.base);
    evhttp_free(http);
    event_base_free(fx.base);
    json_decref(fx.memberships);
    json_decref(fx.queries);
    return 0;
}
