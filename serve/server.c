/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/server.c: the HTTP server of ldasync-serve (server.h says what it
 * serves): a request's limits, its route (routes.c), and the server's life.
 * serve-internal.h says where the rest is.
 *
 * libevent 2.1's evhttp, and what this file does about its gaps:
 *   - Connections: evhttp has no limit and no hook when one closes. Every
 *     connection's socket bufferevent is made here (evhttp_set_bevcb), with
 *     a reference of ours and a record of the connection; a loop callback
 *     right after the accept learns the evhttp connection around it and
 *     takes its close callback. Connections beyond max_connections
 *     are accepted and closed as soon as libevent hands them over (a
 *     request already read by then is answered 503 with "Connection:
 *     close" first).
 *   - Limits: evhttp answers 413 with an HTML page of its own for anything
 *     above its header or body limit, whatever the part, and closes. So its
 *     limits are set to 4 times ours, and requests between ours and its get
 *     the right status with a JSON body here: 414 (request target), 431
 *     (header lines), 413 (body). Above 4 times, libevent's 413 page it is:
 *     bounded memory either way.
 *   - REPORT: evhttp 2.1 has no constant for it and hands every method it
 *     does not know to the callback as one unknown type (after
 *     evhttp_set_allowed_methods(0xffff)), without its name. An unknown
 *     method is taken for REPORT on a route that takes REPORT
 *     (/sdk/evalx/{env}/context); elsewhere it is 405.
 *   - Slow requests: evhttp's read timeout restarts at every byte, so a
 *     client that sends a byte now and then (slowloris) holds its
 *     connection for ever. Each connection has a deadline of its own: a
 *     request must come whole (a REPORT's body included) within timeout_s
 *     of the connection's start or of the previous answer.
 *   - Answers that take long to read: evhttp keeps its read timeout while
 *     it writes an answer (it reads only to see the connection close), so
 *     an answer that takes a client longer than that to read was cut. While
 *     an answer is written only the write timeout (no progress) holds; both
 *     are back once it is written (evhttp_request_set_on_complete_cb).
 *   - HEAD: evhttp 2.1 sends the body it is given after a HEAD's headers
 *     (without a Content-Length): lds_send_blob() gives it none and says the
 *     length itself.
 *   - A client that goes away while its request waits for a future, and
 *     streams (chunked replies): wait.c and stream.c say.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "serve-internal.h"

/* The longest a close waits for answers to be sent. */
#define DRAIN_MAX_S 10

static char *sdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = lds_malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

int64_t lds_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double lds_mono_s(void)
{
    return (double)lds_now_ns() / 1e9;
}

/* ------------------------------------------------------------------------- */
/* Parsing requests                                                          */

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes `n` bytes of `s` into `out` (room for n + 1). @return
 * the length, or -1 for a bad escape or an encoded NUL. */
static long pct_decode(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            out[o++] = s[i];
            continue;
        }
        if (i + 2 >= n)
            return -1;
        int a = hexval((unsigned char)s[i + 1]), b = hexval((unsigned char)s[i + 2]);
        if (a < 0 || b < 0 || (a == 0 && b == 0))
            return -1;
        out[o++] = (char)(a * 16 + b);
        i += 2;
    }
    out[o] = '\0';
    return (long)o;
}

/* True when every '%' in `s` starts a valid escape. */
static bool pct_valid(const char *s)
{
    for (; *s; s++)
        if (*s == '%') {
            if (hexval((unsigned char)s[1]) < 0 || hexval((unsigned char)s[2]) < 0)
                return false;
            s += 2;
        }
    return true;
}

static bool authorized(lds_server *srv, struct evhttp_request *req)
{
    if (!srv->need_key)
        return true;
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    if (!h)
        return false;
    if (strncmp(h, "api_key ", 8) == 0)
        h += 8;
    while (*h == ' ')
        h++;
    size_t n = strlen(h);
    while (n > 0 && h[n - 1] == ' ')
        n--;
    /* Constant time for the key: what is compared depends on the presented
     * value's length only, never on the key's bytes or length. (A SHA-256
     * of every request's key was 3-4% of a latest-flags request.) */
    if (n > sizeof srv->key_pad) {
        unsigned char got[SHA256_DIGEST_LENGTH];
        SHA256((const unsigned char *)h, n, got);
        return CRYPTO_memcmp(got, srv->key_hash, sizeof got) == 0;
    }
    int diff = CRYPTO_memcmp(h, srv->key_pad, n);
    diff |= n != srv->key_len;
    return diff == 0;
}

/* One pass over the request's header lines: @return their size; *te_bad:
 * whether Transfer-Encoding is anything but one "chunked" (evhttp frames
 * by Content-Length otherwise: a body of unknown length, RFC 9112 6.1). */
static size_t headers_scan(struct evhttp_request *req, bool *te_bad)
{
    size_t n = 0;
    int n_te = 0;
    *te_bad = false;
    struct evkeyvalq *q = evhttp_request_get_input_headers(req);
    for (struct evkeyval *h = q->tqh_first; h; h = h->next.tqe_next) {
        n += strlen(h->key) + strlen(h->value) + 4;
        if (evutil_ascii_strcasecmp(h->key, "Transfer-Encoding") == 0)
            *te_bad |= ++n_te > 1 || evutil_ascii_strcasecmp(h->value, "chunked") != 0;
    }
    return n;
}

/* Splits the path into at most 6 decoded segments (in `buf`). @return their
 * number, -1 for a bad escape, -2 for too many. */
static int split_path(const char *path, char *buf, char **seg)
{
    int n = 0;
    const char *p = path;
    if (*p == '/')
        p++;
    char *o = buf;
    while (*p || n == 0) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (n == 6)
            return -2;
        long dl = pct_decode(p, len, o);
        if (dl < 0)
            return -1;
        seg[n++] = o;
        o += dl + 1;
        if (!end)
            break;
        p = end + 1;
    }
    return n;
}

/* ------------------------------------------------------------------------- */
/* Routing                                                                   */

void lds_not_found(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                   char *const *seg, const char *query)
{
    (void)seg;
    (void)query;
    lds_send_error(srv, req, 404, "not found", rt->flags & LDS_R_CORS ? LDS_F_CORS : 0);
}

static bool route_matches(const struct lds_route *rt, char *const *seg, int n)
{
    int want = rt->n < 0 ? -rt->n : rt->n;
    if (rt->n < 0 ? n < want : n != want)
        return false;
    for (int i = 0; i < want; i++) {
        const char *p = rt->path[i];
        if (p[0] == '*' && p[1] == '\0')
            continue;
        if (p[0] == '+' && p[1] == '\0' ? seg[i][0] == '\0' : strcmp(p, seg[i]) != 0)
            return false;
    }
    return true;
}

/* Whether client-side ID `env` is served: any is, without the option. */
static bool env_served(const lds_server *srv, const char *env)
{
    for (size_t i = 0; i < srv->o.n_client_side_ids; i++)
        if (strcmp(srv->client_ids[i], env) == 0)
            return true;
    return srv->o.n_client_side_ids == 0;
}

/* Answers the request of path segments `seg` (`n` of them) through the
 * first route of lds_routes that takes it: 404 when none does; else 405
 * for a method it does not take, 200 for its CORS preflight, 401 without
 * the SDK key it needs, and its begin function otherwise. */
static void route(lds_server *srv, struct evhttp_request *req, char *const *seg, int n,
                  const char *query)
{
    const struct lds_route *rt = lds_routes;
    while (rt->begin && !route_matches(rt, seg, n))
        rt++;
    if (!rt->begin) {
        lds_send_error(srv, req, 404, "not found", 0);
        return;
    }
    int cors = rt->flags & LDS_R_CORS ? LDS_F_CORS : 0;
    if ((rt->flags & LDS_R_ENV) && !env_served(srv, seg[2])) {
        lds_send_error(srv, req, 404, "unknown client-side ID", cors);
        return;
    }
    unsigned cmd = (unsigned)evhttp_request_get_command(req);
    if ((cmd & LDS_KNOWN_METHODS) == 0) /* evhttp cannot name REPORT: see the top */
        cmd = LDS_M_REPORT;
    if (cmd == EVHTTP_REQ_OPTIONS && (rt->flags & LDS_R_PREFLIGHT))
        lds_send_blob(srv, req, 200, NULL, NULL, LDS_F_CORS);
    else if (!(rt->methods & cmd))
        lds_method_not_allowed(srv, req, rt->allow, cors);
    else if ((rt->flags & LDS_R_KEY) && !authorized(srv, req))
        lds_send_error(srv, req, 401, "invalid SDK key", cors);
    else
        rt->begin(srv, req, rt, seg, query);
}

/* The limits of a request (evhttp's are 4 times as large: see the top).
 * @return false when it passes one (then it is answered). */
static bool within_limits(lds_server *srv, struct evhttp_request *req)
{
    if (srv->closing) {
        lds_send_error(srv, req, 503, "server closing", LDS_F_CLOSE);
        return false;
    }
    struct lds_conn *conn = lds_conn_of(srv, req);
    if (!conn || conn->over) {
        lds_send_error(srv, req, 503, "too many connections", LDS_F_CLOSE);
        return false;
    }
    lds_conn_request_came(conn);
    conn->body_taken = false;
    const char *uri = evhttp_request_get_uri(req);
    if (strlen(uri) > srv->o.max_uri) {
        lds_send_error(srv, req, 414, "request target too long", LDS_F_CLOSE);
        return false;
    }
    bool te_bad;
    if (headers_scan(req, &te_bad) > srv->o.max_headers) {
        lds_send_error(srv, req, 431, "request header fields too large", LDS_F_CLOSE);
        return false;
    }
    if (te_bad) { /* 400, and close */
        lds_send_error(srv, req, 400, "unsupported Transfer-Encoding", LDS_F_CLOSE);
        return false;
    }
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t limit = srv->o.events && evhttp_request_get_command(req) == EVHTTP_REQ_POST
                       ? srv->o.max_event_body
                       : srv->o.max_body;
    if (evbuffer_get_length(body) > limit) {
        lds_send_error(srv, req, 413, "request body too large", LDS_F_CLOSE);
        return false;
    }
    return true;
}

static void handle(struct evhttp_request *req, void *arg)
{
    lds_server *srv = arg;
    if (!within_limits(srv, req))
        return;
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    const char *query = u ? evhttp_uri_get_query(u) : NULL;
    if (!path || path[0] != '/') {
        lds_send_error(srv, req, 400, "bad request target", 0);
        return;
    }
    if (query && !pct_valid(query)) {
        lds_send_error(srv, req, 400, "invalid percent-encoding in the query", 0);
        return;
    }
    size_t plen = strlen(path);
    char stackbuf[512];
    char *buf = plen + 8 <= sizeof stackbuf ? stackbuf : lds_malloc(plen + 8);
    if (!buf) {
        lds_send_error(srv, req, 500, "out of memory", 0);
        return;
    }
    char *seg[6];
    int n = split_path(path, buf, seg);
    if (n == -1)
        lds_send_error(srv, req, 400, "invalid percent-encoding in the path", 0);
    else if (n == -2)
        lds_send_error(srv, req, 404, "not found", 0);
    else
        route(srv, req, seg, n, query);
    if (buf != stackbuf)
        lds_free(buf);
}

/* ------------------------------------------------------------------------- */
/* Life                                                                      */

/* Copies the client-side IDs of the options. @return false without memory
 * (then those copied are freed with the server). */
static bool copy_ids(lds_server *srv)
{
    size_t n = srv->o.n_client_side_ids;
    if (n == 0)
        return true;
    srv->client_ids = lds_calloc(n, sizeof *srv->client_ids);
    if (!srv->client_ids) {
        srv->o.n_client_side_ids = 0;
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < n; i++)
        ok &= (srv->client_ids[i] = sdup(srv->o.client_side_ids[i])) != NULL;
    srv->o.client_side_ids = (const char *const *)srv->client_ids;
    return ok;
}

/* A slice's bound in items, besides its time: none (SIZE_MAX) unless the
 * environment variable `name` (a test's knob) says a number. Two knobs:
 * LDASYNC_EVAL_SLICE_FLAGS, the flags a slice of an evalx body writes at
 * most (the evaluator reads it too), and LDASYNC_SERVE_SLICE_ITEMS, the
 * items a slice of a collection body (latest-all, a stream's put) takes. */
static size_t slice_knob(const char *name)
{
    const char *env = getenv(name);
    char *end;
    unsigned long long n = env ? strtoull(env, &end, 10) : 0;
    return env && *env && !*end && n > 0 && n <= SIZE_MAX ? (size_t)n : SIZE_MAX;
}

lds_server *lds_server_new(struct event_base *base, ld_store *store, ld_evaluator *evaluator,
                           const struct lds_server_options *options)
{
    static const struct lds_server_options none;
    const struct lds_server_options *o = options ? options : &none;
    if (!base || !store || !evaluator) {
        if (o->log)
            o->log(LDS_LOG_ERROR, "server: no base, store or evaluator", o->log_arg);
        return NULL;
    }
    lds_server *srv = lds_calloc(1, sizeof *srv);
    if (!srv)
        return NULL;
    srv->base = base;
    srv->store = store;
    srv->ev = evaluator;
    srv->o = *o;
    if (!o->log_level_set)
        srv->o.log_level = LDS_LOG_INFO;
    if (!srv->o.bind_address)
        srv->o.bind_address = "127.0.0.1";
    if (srv->o.max_connections <= 0)
        srv->o.max_connections = 10240;
    if (!srv->o.max_uri)
        srv->o.max_uri = 8192;
    if (!srv->o.max_headers)
        srv->o.max_headers = 16384;
    if (!srv->o.max_body)
        srv->o.max_body = 65536;
    if (!srv->o.max_event_body)
        srv->o.max_event_body = 4 << 20;
    if (!srv->o.max_stream_buffer)
        srv->o.max_stream_buffer = 1 << 20;
    if (srv->o.heartbeat_ms <= 0)
        srv->o.heartbeat_ms = 60000;
    if (srv->o.timeout_s <= 0)
        srv->o.timeout_s = 60;
    srv->bind_address = sdup(srv->o.bind_address);
    srv->o.bind_address = srv->bind_address;
    if (o->sdk_key && o->sdk_key[0]) {
        srv->sdk_key = sdup(o->sdk_key);
        srv->need_key = true;
        srv->key_len = strlen(o->sdk_key);
        SHA256((const unsigned char *)o->sdk_key, srv->key_len, srv->key_hash);
        memcpy(srv->key_pad, o->sdk_key,
               srv->key_len < sizeof srv->key_pad ? srv->key_len : sizeof srv->key_pad);
    }
    srv->o.sdk_key = srv->sdk_key;
    if (!o->client_side_ids)
        srv->o.n_client_side_ids = 0;
    for (size_t i = 0; i < srv->o.n_client_side_ids; i++)
        if (!o->client_side_ids[i] || !o->client_side_ids[i][0]) {
            lds_log(srv, LDS_LOG_ERROR, "server: an empty client-side ID");
            srv->o.n_client_side_ids = 0;
            lds_server_free(srv);
            return NULL;
        }
    bool ids_ok = copy_ids(srv);
    srv->started = lds_mono_s();
    srv->slice_flags = slice_knob("LDASYNC_EVAL_SLICE_FLAGS");
    srv->slice_items = slice_knob("LDASYNC_SERVE_SLICE_ITEMS");
    srv->http = evhttp_new(base);
    srv->scratch = evbuffer_new();
    srv->heartbeat = event_new(base, -1, EV_PERSIST, lds_stream_heartbeat, srv);
    srv->beat = lds_blob_new(2);
    if (srv->beat)
        memcpy(srv->beat->data, ":\n", 2);
    if (!ids_ok || !srv->beat || !srv->bind_address ||
        (o->sdk_key && o->sdk_key[0] && !srv->sdk_key) || !srv->http || !srv->scratch ||
        !srv->heartbeat || lds_streams_init(srv) != 0 ||
        lds_probe_start(srv, srv->o.loop_probe_ms) != 0) {
        lds_log(srv, LDS_LOG_ERROR, "server: out of memory");
        lds_server_free(srv);
        return NULL;
    }
    evhttp_set_allowed_methods(srv->http, 0xffff);
    evhttp_set_gencb(srv->http, handle, srv);
    evhttp_set_bevcb(srv->http, lds_conn_make_bev, srv);
    evhttp_set_max_headers_size(srv->http, (ev_ssize_t)(4 * (srv->o.max_uri + srv->o.max_headers)));
    size_t most = srv->o.events && srv->o.max_event_body > srv->o.max_body ? srv->o.max_event_body
                                                                           : srv->o.max_body;
    evhttp_set_max_body_size(srv->http, (ev_ssize_t)(4 * most));
    evhttp_set_timeout(srv->http, srv->o.timeout_s);
    srv->sock =
        evhttp_bind_socket_with_handle(srv->http, srv->o.bind_address, (ev_uint16_t)srv->o.port);
    if (!srv->sock) {
        lds_log(srv, LDS_LOG_ERROR, "cannot listen on %s port %d: %s", srv->o.bind_address,
                srv->o.port, strerror(errno));
        lds_server_free(srv);
        return NULL;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    evutil_socket_t fd = evhttp_bound_socket_get_fd(srv->sock);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            srv->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            srv->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    struct timeval hb = {srv->o.heartbeat_ms / 1000, (srv->o.heartbeat_ms % 1000) * 1000};
    event_add(srv->heartbeat, &hb);
    lds_log(srv, LDS_LOG_INFO, "listening on http://%s:%d/ (store: %s; SDK key %s)",
            srv->o.bind_address, srv->port, ld_store_describe(store),
            srv->need_key ? "required" : "NOT required");
    return srv;
}

int lds_server_port(const lds_server *srv)
{
    return srv ? srv->port : 0;
}

void lds_server_stats(const lds_server *srv, struct lds_server_stats *out)
{
    if (srv && out) {
        *out = srv->st;
        out->stream_event_bytes = lds_streams_held(srv);
    }
}

static void drain_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    lds_finish_close(arg);
}

/* The close is done once no request waits for its future and what was
 * written has been sent (the socket took it, or its connection closed), or
 * the drain time is up: a client that reads nothing does not hold the
 * shutdown longer than that. */
void lds_finish_close(lds_server *srv)
{
    if (srv->pending || !srv->close_fut || !ld_future_is_pending(srv->close_fut))
        return;
    struct timeval now;
    size_t left = lds_conns_unsent(srv);
    if (left > 0 && srv->drain && event_base_gettimeofday_cached(srv->base, &now) == 0 &&
        timercmp(&now, &srv->drain_by, <)) {
        static const struct timeval tick = {0, 10000};
        event_add(srv->drain, &tick);
        return;
    }
    if (left > 0)
        lds_log(srv, LDS_LOG_WARN, "closing: %zu bytes left unsent", left);
    ld_future_fulfill(srv->close_fut);
    lds_log(srv, LDS_LOG_INFO, "server closed");
}

ld_future *lds_server_close(lds_server *srv)
{
    if (!srv)
        return NULL;
    if (!srv->close_fut)
        srv->close_fut = ld_future_new(srv->base);
    if (!srv->close_fut)
        return ld_future_rejected(srv->base, LD_ENOMEM, "out of memory");
    if (!srv->closing) {
        srv->closing = true;
        lds_log(srv, LDS_LOG_INFO, "closing: %llu streams, %llu requests waiting",
                (unsigned long long)srv->st.streams, (unsigned long long)srv->st.pending);
        /* without memory for the timer, the close does not wait for the
         * answers to be sent */
        srv->drain = evtimer_new(srv->base, drain_check, srv);
        struct timeval now,
            most = {srv->o.timeout_s < DRAIN_MAX_S ? srv->o.timeout_s : DRAIN_MAX_S, 0};
        event_base_gettimeofday_cached(srv->base, &now);
        timeradd(&now, &most, &srv->drain_by);
        if (srv->sock) {
            evhttp_del_accept_socket(srv->http, srv->sock);
            srv->sock = NULL;
        }
        event_del(srv->heartbeat);
        lds_probe_stop(srv);
        lds_streams_end(srv);
        lds_warm_forget(srv);
        /* the waiting requests: their callbacks answer 503 */
        lds_waiting_cancel_all(srv);
    }
    lds_finish_close(srv);
    return ld_future_ref(srv->close_fut);
}

void lds_server_free(lds_server *srv)
{
    if (!srv)
        return;
    if (srv->http)
        evhttp_free(srv->http); /* close callbacks run: streams and waiting requests let go */
    /* requests still listed (none should be): their callbacks only free them */
    lds_waiting_forget_all(srv);
    lds_streams_forget(srv);
    lds_evalx_writers_free(srv);
    lds_probe_free(srv);
    lds_warm_forget(srv);
    /* connections libevent has not finished freeing must not reach us */
    lds_conns_forget(srv);
    if (srv->heartbeat)
        event_free(srv->heartbeat);
    if (srv->drain)
        event_free(srv->drain);
    if (srv->scratch)
        evbuffer_free(srv->scratch);
    lds_blob_unref(srv->beat);
    lds_cache_clear(srv);
    if (srv->close_fut) {
        if (ld_future_is_pending(srv->close_fut))
            ld_future_fulfill(srv->close_fut);
        ld_future_unref(srv->close_fut);
    }
    lds_free(srv->bind_address);
    lds_free(srv->sdk_key);
    for (size_t i = 0; srv->client_ids && i < srv->o.n_client_side_ids; i++)
        lds_free(srv->client_ids[i]);
    lds_free(srv->client_ids);
    lds_free(srv);
}
