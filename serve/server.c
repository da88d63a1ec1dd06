/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/server.c: the HTTP server of ldasync-serve (server.h says what it
 * serves).
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
 *     method on the REPORT path (/sdk/evalx/{env}/context) is taken for
 *     REPORT; elsewhere it is 405.
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
 *     (without a Content-Length): send_blob() gives it none and says the
 *     length itself.
 *   - A client that goes away while its request waits for a future: the
 *     connection's close callback (set while the request waits, cleared
 *     when it is answered) cancels the future and marks the request dead;
 *     the future's callback then only frees the request's state. A request
 *     libevent detached from its dead connection is freed here.
 *   - Streams (chunked replies): libevent keeps reading the connection to
 *     see it close; the close callback ends the stream. A stream whose
 *     unsent output passes max_stream_buffer beyond its put is dropped
 *     (evhttp_connection_free), so a slow reader costs at most that much.
 *     Event texts are made once; those of 4 KiB or more (the put, large
 *     patches) are shared by every stream by reference
 *     (evbuffer_add_reference), smaller ones copied. Streams write their
 *     chunks into the connection's output themselves, packed:
 *     evhttp_send_reply_chunk() puts a chunk's head and tail in chains of
 *     their own, and a chain is 1 KiB at least (or as large as the
 *     reference before it), so that a slow reader held many times what
 *     was counted (2 MiB for 64 KiB of deletes). A small event is written
 *     straight to the socket of each stream whose output is empty (framed
 *     once for all of them), without the write event's arm, dispatch and
 *     disarm per stream; what a socket does not take goes to its output.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "serve-internal.h"
#include "server.h"

/* The methods evhttp 2.1 knows; any other bit is its "unknown" type. */
#define KNOWN_METHODS                                                                          \
    (EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | \
     EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH)

/* ------------------------------------------------------------------------- */
/* Small things                                                              */

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

static uint64_t fnv1a(const char *p, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
#define FNV_INIT 0xcbf29ce484222325ULL

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* An immutable, reference-counted byte string: response bodies and event
 * texts, handed to evbuffers by reference. */
struct blob {
    size_t refs;
    size_t len;
    char data[];
};

static struct blob *blob_new(size_t len)
{
    struct blob *b = lds_malloc(sizeof *b + len + 1);
    if (b) {
        b->refs = 1;
        b->len = len;
        b->data[len] = '\0';
    }
    return b;
}

static void blob_unref(struct blob *b)
{
    if (b && --b->refs == 0)
        lds_free(b);
}

static void blob_cleanup(const void *data, size_t len, void *arg)
{
    (void)data;
    (void)len;
    blob_unref(arg);
}

/* Appends `b` to `buf` by reference. @return 0 or -1. */
static int blob_add(struct evbuffer *buf, struct blob *b)
{
    b->refs++;
    if (evbuffer_add_reference(buf, b->data, b->len, blob_cleanup, b) != 0) {
        b->refs--;
        return -1;
    }
    return 0;
}

/* A blob of the concatenation of `n` parts. */
static struct blob *blob_concat(const char *const *parts, const size_t *lens, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += lens[i];
    struct blob *b = blob_new(len);
    if (!b)
        return NULL;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(b->data + at, parts[i], lens[i]);
        at += lens[i];
    }
    return b;
}

/* A blob of the compact JSON text of `j`. */
static struct blob *blob_json(const json_t *j)
{
    size_t len = json_dumpb(j, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
    if (len == 0)
        return NULL;
    struct blob *b = blob_new(len);
    if (b && json_dumpb(j, b->data, len, JSON_COMPACT | JSON_ENCODE_ANY) != len) {
        blob_unref(b);
        return NULL;
    }
    return b;
}

/* ------------------------------------------------------------------------- */
/* The server                                                                */

struct conn;
struct sreq;
struct stream;

/* A serialized collection, kept while the store answers with the same
 * snapshot objects (references held, so their addresses cannot be
 * reused). */
struct coll {
    json_t *snap[2];
    struct blob *body;
    struct blob *put; /* COLL_ALL only: the stream's put event, made on demand */
    char etag[24];
};
enum { COLL_ALL, COLL_FLAGS, COLL_SEGMENTS, N_COLL };

/* The serialized bodies of single items, by the item's JSON object (a
 * reference held, so that its address cannot be reused): a direct-mapped
 * cache, so it holds at most ICACHE_SLOTS items that the store may have
 * let go of already. */
#define ICACHE_SLOTS 1024
struct icache {
    json_t *item;
    struct blob *body;
    char etag[24];
};

struct lds_server {
    struct event_base *base;
    ld_store *store;
    ld_evaluator *ev;
    struct lds_server_options o;
    char *bind_address, *sdk_key;
    unsigned char key_hash[SHA256_DIGEST_LENGTH];
    bool need_key;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    int port;
    struct event *heartbeat;
    struct blob *beat; /* ":\n" */
    struct evbuffer *scratch;
    struct conn *conns; /* every connection */
    struct conn **map;  /* bufferevent -> connection */
    size_t map_n, map_mask;
    struct sreq *pending; /* requests waiting for a future */
    struct stream *streams;
    struct coll coll[N_COLL];
    struct icache items[ICACHE_SLOTS];
    double started;
    bool closing;
    ld_future *close_fut;
    struct event *drain;     /* while closing: waits for the answers to be sent */
    struct timeval drain_by; /* when it stops waiting */
    struct lds_server_stats st;
};

const char *lds_log_level_name(int level)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    return level >= 0 && level <= LDS_LOG_DEBUG ? names[level] : NULL;
}

int lds_log_level_parse(const char *name)
{
    for (int i = 0; name && i <= LDS_LOG_DEBUG; i++)
        if (strcmp(name, lds_log_level_name(i)) == 0)
            return i;
    if (name && strcmp(name, "warning") == 0)
        return LDS_LOG_WARN;
    return -1;
}

void lds_log_v(lds_log_fn fn, void *arg, int max_level, int level, const char *fmt, va_list ap)
{
    if (!fn || level > max_level)
        return;
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    fn(level, line, arg);
}

LD_PRINTF(3, 4) static void slog(const lds_server *srv, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lds_log_v(srv->o.log, srv->o.log_arg, srv->o.log_level, level, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------- */
/* Connections                                                               */

struct conn {
    struct conn *prev, *next;
    lds_server *srv; /* NULL once the server is freed */
    struct bufferevent *bev;
    struct evhttp_connection *evcon; /* once set up */
    struct sreq *sreq;               /* the request waiting for a future */
    struct stream *stream;           /* the stream it carries */
    struct bodyw *bodyw;             /* a REPORT waiting for its body */
    struct event *deadline;          /* for the request being read */
    bool over;                       /* beyond max_connections */
    bool setup;
    bool once; /* conn_setup_later() is still to run: it frees `c` */
};

static void conn_link(struct conn **list, struct conn *c)
{
    c->prev = NULL;
    c->next = *list;
    if (*list)
        (*list)->prev = c;
    *list = c;
}

static void conn_unlink(struct conn **list, struct conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        *list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* The map bufferevent -> connection: open addressing, linear probing. */
static size_t map_hash(const void *p, size_t mask)
{
    uintptr_t v = (uintptr_t)p;
    v ^= v >> 17;
    v *= 0x9e3779b97f4a7c15ULL;
    return (size_t)(v >> 20) & mask;
}

static int map_put(lds_server *srv, struct conn *c)
{
    if ((srv->map_n + 1) * 2 > srv->map_mask + 1 || !srv->map) {
        size_t cap = srv->map ? (srv->map_mask + 1) * 2 : 64;
        struct conn **t = lds_calloc(cap, sizeof *t);
        if (!t)
            return -1;
        for (size_t i = 0; srv->map && i <= srv->map_mask; i++)
            if (srv->map[i]) {
                size_t j = map_hash(srv->map[i]->bev, cap - 1);
                while (t[j])
                    j = (j + 1) & (cap - 1);
                t[j] = srv->map[i];
            }
        lds_free(srv->map);
        srv->map = t;
        srv->map_mask = cap - 1;
    }
    size_t j = map_hash(c->bev, srv->map_mask);
    while (srv->map[j])
        j = (j + 1) & srv->map_mask;
    srv->map[j] = c;
    srv->map_n++;
    return 0;
}

static struct conn *map_get(lds_server *srv, const struct bufferevent *bev)
{
    if (!srv->map)
        return NULL;
    for (size_t j = map_hash(bev, srv->map_mask); srv->map[j]; j = (j + 1) & srv->map_mask)
        if (srv->map[j]->bev == bev)
            return srv->map[j];
    return NULL;
}

static void map_del(lds_server *srv, struct conn *c)
{
    size_t mask = srv->map_mask, j = map_hash(c->bev, mask);
    while (srv->map[j] != c) {
        if (!srv->map[j])
            return;
        j = (j + 1) & mask;
    }
    srv->map[j] = NULL;
    srv->map_n--;
    /* backward shift: move up the entries the hole would hide */
    for (size_t k = (j + 1) & mask; srv->map[k]; k = (k + 1) & mask) {
        size_t home = map_hash(srv->map[k]->bev, mask);
        bool between = j <= k ? (home > j && home <= k) : (home > j || home <= k);
        if (!between) {
            srv->map[j] = srv->map[k];
            srv->map[k] = NULL;
            j = k;
        }
    }
}

static void sreq_conn_closed(struct sreq *r);
static void stream_conn_closed(struct stream *s);
static void bodyw_conn_closed(struct bodyw *w);
static void bodyw_restore(struct bodyw *w);

/* Lets go of a connection's record. */
static void conn_forget(struct conn *c)
{
    lds_server *srv = c->srv;
    if (srv) {
        conn_unlink(&srv->conns, c);
        map_del(srv, c);
        srv->st.connections--;
    }
    c->srv = NULL;
    if (c->deadline)
        event_free(c->deadline);
    c->deadline = NULL;
    if (!c->once)
        lds_free(c);
}

/* A request must come whole within timeout_s of the connection's start or
 * of the previous answer: libevent's read timeout restarts at every byte,
 * so a client sending one now and then (slowloris) would hold the
 * connection, and what it sent, for ever. */
static void conn_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    if (!c->srv || !c->evcon)
        return;
    slog(c->srv, LDS_LOG_DEBUG, "connection closed: no whole request within %d s",
         c->srv->o.timeout_s);
    if (c->bodyw) { /* libevent's callbacks back first, as bodyw_event() does */
        struct bodyw *w = c->bodyw;
        bodyw_restore(w);
        c->bodyw = w; /* conn_closed() frees it */
    }
    evhttp_connection_free(c->evcon); /* conn_closed forgets c */
}

/* Starts (or restarts) the time a request has to come whole. */
static void conn_expect_request(struct conn *c)
{
    if (!c || !c->srv || !c->evcon)
        return;
    if (!c->deadline)
        c->deadline = evtimer_new(c->srv->base, conn_deadline, c);
    struct timeval tv = {c->srv->o.timeout_s, 0};
    if (c->deadline)
        evtimer_add(c->deadline, &tv);
}

/* A request came whole (or the connection now streams). */
static void conn_request_came(struct conn *c)
{
    if (c && c->deadline)
        evtimer_del(c->deadline);
}

/* libevent lets the connection go (its close callback). */
static void conn_closed(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct conn *c = arg;
    if (c->sreq)
        sreq_conn_closed(c->sreq);
    if (c->stream)
        stream_conn_closed(c->stream);
    if (c->bodyw)
        bodyw_conn_closed(c->bodyw);
    conn_forget(c);
}

/* Learns the connection libevent made around c->bev (the argument of the
 * bufferevent's callbacks) and takes its close callback. @return false if
 * libevent has let it go already (bufferevent_free() clears the
 * callbacks): then `c` is freed. The reference taken in make_bev() is
 * dropped either way. */
static bool conn_setup(struct conn *c)
{
    struct bufferevent *bev = c->bev;
    void *cbarg = NULL;
    bufferevent_getcb(bev, NULL, NULL, NULL, &cbarg);
    c->setup = true;
    if (!cbarg) {
        conn_forget(c);
        bufferevent_decref(bev);
        return false;
    }
    c->evcon = cbarg;
    evhttp_connection_set_closecb(c->evcon, conn_closed, c);
    bufferevent_decref(bev);
    conn_expect_request(c);
    return true;
}

/* From the loop, right after the accept. */
static void conn_setup_later(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    c->once = false;
    if (!c->srv) { /* forgotten, or the server is gone */
        struct bufferevent *bev = c->setup ? NULL : c->bev;
        lds_free(c);
        if (bev)
            bufferevent_decref(bev);
        return;
    }
    if (c->setup)
        return;
    if (conn_setup(c) && c->over) {
        lds_server *srv = c->srv;
        slog(srv, LDS_LOG_WARN, "connection refused: %d open already", srv->o.max_connections);
        evhttp_connection_free(c->evcon); /* conn_closed forgets c */
    }
}

/* Makes the bufferevent of each connection evhttp accepts (with a
 * reference of ours, so that it outlives libevent's until conn_setup()). */
static struct bufferevent *make_bev(struct event_base *base, void *arg)
{
    lds_server *srv = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    struct conn *c = bev ? lds_calloc(1, sizeof *c) : NULL;
    if (!c)
        return bev; /* served without our accounting (handle() answers 503) */
    c->srv = srv;
    c->bev = bev;
    c->over = srv->st.connections >= (uint64_t)srv->o.max_connections;
    static const struct timeval zero = {0, 0};
    if (map_put(srv, c) != 0) {
        lds_free(c);
        return bev;
    }
    bufferevent_incref(bev);
    c->once = true;
    if (event_base_once(base, -1, EV_TIMEOUT, conn_setup_later, c, &zero) != 0) {
        bufferevent_decref(bev);
        map_del(srv, c);
        lds_free(c);
        return bev;
    }
    conn_link(&srv->conns, c);
    srv->st.connections++;
    return bev;
}

/* The record of the connection of `req`, set up; NULL if there is none. */
static struct conn *conn_of(lds_server *srv, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct conn *c = evcon ? map_get(srv, evhttp_connection_get_bufferevent(evcon)) : NULL;
    if (c && !c->setup && !conn_setup(c))
        return NULL;
    return c;
}

/* ------------------------------------------------------------------------- */
/* Answers                                                                   */

enum { F_CORS = 1, F_CLOSE = 2 };

static const char *reason_of(int code)
{
    switch (code) {
    case 200:
        return "OK";
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
    evhttp_add_header(h, "Access-Control-Allow-Methods", "GET, REPORT, OPTIONS");
    evhttp_add_header(h, "Access-Control-Allow-Headers",
                      "Content-Type, Content-Length, Accept-Encoding, X-LaunchDarkly-User-Agent, "
                      "X-LaunchDarkly-Payload-ID, X-LaunchDarkly-Wrapper, "
                      "X-LaunchDarkly-Event-Schema, X-LaunchDarkly-Tags");
    evhttp_add_header(h, "Access-Control-Max-Age", "300");
}

static void log_answer(lds_server *srv, struct evhttp_request *req, int code, size_t len)
{
    srv->st.requests++;
    if (srv->o.log_level < LDS_LOG_DEBUG || !srv->o.log)
        return;
    const char *uri = evhttp_request_get_uri(req);
    slog(srv, LDS_LOG_DEBUG, "%d %.200s (%zu bytes)", code, uri ? uri : "?", len);
}

/* The record of the connection of `req`, if it has one (not set up). */
static struct conn *conn_find(lds_server *srv, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    return evcon ? map_get(srv, evhttp_connection_get_bufferevent(evcon)) : NULL;
}

/* An answer is written (the connection is still there): reading again,
 * with the read timeout back, and the deadline of the next request. */
static void answer_written(struct evhttp_request *req, void *arg)
{
    lds_server *srv = arg;
    struct conn *c = conn_find(srv, req);
    if (c && c->setup) {
        struct timeval tv = {srv->o.timeout_s, 0};
        bufferevent_set_timeouts(c->bev, &tv, &tv);
    }
    conn_expect_request(c);
}

/* True when the request may have a body that evhttp left unread on the
 * connection: it reads none for a method it does not know (REPORT's is
 * read here, but what follows it is not looked at), nor for HEAD or
 * TRACE. What follows must not be taken for the next request. */
static bool body_unread(struct evhttp_request *req)
{
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (((unsigned)cmd & KNOWN_METHODS) == 0)
        return true;
    if (cmd != EVHTTP_REQ_HEAD && cmd != EVHTTP_REQ_TRACE)
        return false;
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *cl = evhttp_find_header(h, "Content-Length");
    return evhttp_find_header(h, "Transfer-Encoding") || (cl && strcmp(cl, "0") != 0);
}

/* Sends `body` (may be NULL) with status `code`. */
static void send_blob(lds_server *srv, struct evhttp_request *req, int code, struct blob *body,
                      const char *etag, int flags)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (body)
        evhttp_add_header(h, "Content-Type", "application/json");
    if (etag)
        evhttp_add_header(h, "ETag", etag);
    if (flags & F_CORS)
        add_cors(h);
    /* a body left unread would be taken for the next request: close */
    if ((flags & F_CLOSE) || srv->closing || body_unread(req))
        evhttp_add_header(h, "Connection", "close");
    struct evbuffer *out = NULL;
    if (body && evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        /* evhttp 2.1 sends a HEAD's body when given one (and no
         * Content-Length): a keep-alive client would take the body for
         * the next answer. The length, and no body. */
        char len[24];
        snprintf(len, sizeof len, "%zu", body->len);
        evhttp_add_header(h, "Content-Length", len);
    } else if (body) {
        out = srv->scratch;
        evbuffer_drain(out, evbuffer_get_length(out));
        if (blob_add(out, body) != 0)
            out = NULL;
    }
    log_answer(srv, req, code, body ? body->len : 0);
    /* the next request on this connection has its time from when this
     * answer is written (however long a reader takes to read it) */
    evhttp_request_set_on_complete_cb(req, answer_written, srv);
    /* while it is written, libevent reads only to see the connection
     * close, and its read timeout would cut an answer that takes longer
     * than that to read: only the write timeout (no progress) then */
    struct conn *c = conn_find(srv, req);
    if (c && c->setup) {
        /* from now, not from when this pass of the loop began (making a
         * large body may have taken a while) */
        event_base_update_cache_time(srv->base);
        struct timeval wtv = {srv->o.timeout_s, 0};
        bufferevent_set_timeouts(c->bev, NULL, &wtv);
    }
    evhttp_send_reply(req, code, reason_of(code), out);
    if (out)
        evbuffer_drain(out, evbuffer_get_length(out));
}

static void send_error(lds_server *srv, struct evhttp_request *req, int code, const char *msg,
                       int flags)
{
    json_t *j = json_pack("{s:s}", "error", msg ? msg : reason_of(code));
    struct blob *b = j ? blob_json(j) : NULL;
    json_decref(j);
    if (code >= 500)
        slog(srv, LDS_LOG_WARN, "%d %.200s: %s", code, evhttp_request_get_uri(req), msg ? msg : "");
    send_blob(srv, req, code, b, NULL, flags);
    blob_unref(b);
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

static void send_cacheable(lds_server *srv, struct evhttp_request *req, struct blob *body,
                           const char *etag)
{
    if (etag_matches(req, etag))
        send_blob(srv, req, 304, NULL, etag, 0);
    else
        send_blob(srv, req, 200, body, etag, 0);
}

static void make_etag(char out[24], const char *p, size_t n)
{
    snprintf(out, 24, "\"%016llx\"", (unsigned long long)fnv1a(p, n, FNV_INIT));
}

/* ------------------------------------------------------------------------- */
/* Requests waiting for futures                                              */

enum route { R_ALL, R_FLAGS, R_SEGMENTS, R_FLAG, R_SEGMENT, R_EVALX, R_STATUS, R_STREAM };

struct sreq {
    struct sreq *prev, *next;
    lds_server *srv;
    struct evhttp_request *req;
    ld_future *fut; /* our reference */
    enum route route;
    bool dead; /* its connection went away, or the server was freed */
    int flags;
    struct conn *conn;
};

static void sreq_unlink(lds_server *srv, struct sreq *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        srv->pending = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    srv->st.pending--;
}

static void finish_close(lds_server *srv);

/* The longest a close waits for answers to be sent. */
#define DRAIN_MAX_S 10

/* The connection of a waiting request closed (libevent frees it now, or
 * detached the request from it first: then it is ours to free). */
static void sreq_conn_closed(struct sreq *r)
{
    lds_server *srv = r->srv;
    r->dead = true;
    r->conn->sreq = NULL;
    r->conn = NULL;
    sreq_unlink(srv, r);
    if (evhttp_request_get_connection(r->req) == NULL)
        evhttp_request_free(r->req);
    r->req = NULL;
    slog(srv, LDS_LOG_DEBUG, "client went away while its request waited");
    ld_future_cancel(r->fut);
    if (srv->closing)
        finish_close(srv);
}

static void sreq_done(ld_future *f, void *arg);

/* Makes `f` (stolen) answer `req` through `route` when it completes. */
static void wait_for(lds_server *srv, struct evhttp_request *req, ld_future *f, enum route route,
                     int flags)
{
    struct conn *c = conn_of(srv, req);
    if (!f || !c) {
        ld_future_unref(f);
        send_error(srv, req, f ? 503 : 500, f ? "connection not tracked" : "out of memory", flags);
        return;
    }
    struct sreq *r = lds_calloc(1, sizeof *r);
    if (!r) {
        ld_future_unref(f);
        send_error(srv, req, 500, "out of memory", flags);
        return;
    }
    r->srv = srv;
    r->req = req;
    r->route = route;
    r->flags = flags;
    r->fut = ld_future_ref(f);
    if (ld_future_on_complete(f, sreq_done, r) != 0) {
        ld_future_unref(r->fut);
        lds_free(r);
        send_error(srv, req, 500, "out of memory", flags);
        return;
    }
    r->next = srv->pending;
    if (r->next)
        r->next->prev = r;
    srv->pending = r;
    srv->st.pending++;
    r->conn = c;
    c->sreq = r;
}

/* ------------------------------------------------------------------------- */
/* Collections                                                               */

static void coll_clear(struct coll *c)
{
    json_decref(c->snap[0]);
    json_decref(c->snap[1]);
    c->snap[0] = c->snap[1] = NULL;
    blob_unref(c->body);
    blob_unref(c->put);
    c->body = c->put = NULL;
}

/* The body of collection `which` of the snapshots `a` (and `b` for
 * COLL_ALL), borrowed from the cache. NULL when memory ran out. */
static struct coll *coll_get(lds_server *srv, int which, json_t *a, json_t *b)
{
    struct coll *c = &srv->coll[which];
    if (c->body && c->snap[0] == a && c->snap[1] == b)
        return c;
    coll_clear(c);
    srv->st.serializations++;
    struct blob *body;
    if (which == COLL_ALL) {
        struct blob *fa = blob_json(a), *sb = blob_json(b);
        const char *parts[] = {"{\"flags\":", fa ? fa->data : "",
                               ",\"segments\":", sb ? sb->data : "", "}"};
        size_t lens[] = {9, fa ? fa->len : 0, 12, sb ? sb->len : 0, 1};
        body = fa && sb ? blob_concat(parts, lens, 5) : NULL;
        blob_unref(fa);
        blob_unref(sb);
    } else {
        body = blob_json(a);
    }
    if (!body)
        return NULL;
    c->body = body;
    c->snap[0] = json_incref(a);
    c->snap[1] = json_incref(b);
    make_etag(c->etag, body->data, body->len);
    return c;
}

static void icache_clear(struct icache *ic)
{
    json_decref(ic->item);
    blob_unref(ic->body);
    ic->item = NULL;
    ic->body = NULL;
}

/* The cache entry of `item`, made if needed; NULL when memory ran out. */
static struct icache *icache_get(lds_server *srv, json_t *item)
{
    uintptr_t v = (uintptr_t)item;
    v ^= v >> 17;
    v *= 0x9e3779b97f4a7c15ULL;
    struct icache *ic = &srv->items[(v >> 32) % ICACHE_SLOTS];
    if (ic->item == item)
        return ic;
    icache_clear(ic);
    struct blob *b = blob_json(item);
    if (!b)
        return NULL;
    ic->item = json_incref(item);
    ic->body = b;
    make_etag(ic->etag, b->data, b->len);
    return ic;
}

/* The stream's put event of the COLL_ALL cache entry. */
static struct blob *coll_put(struct coll *c)
{
    if (!c->put) {
        static const char head[] = "event: put\ndata: {\"path\":\"/\",\"data\":";
        static const char tail[] = "}\n\n";
        const char *parts[] = {head, c->body->data, tail};
        size_t lens[] = {sizeof head - 1, c->body->len, sizeof tail - 1};
        c->put = blob_concat(parts, lens, 3);
    }
    return c->put;
}

static ld_future *fetch_all(lds_server *srv)
{
    ld_future *fs[2] = {ld_store_all(srv->store, ld_kind_features()),
                        ld_store_all(srv->store, ld_kind_segments())};
    return ld_future_all(srv->base, fs, 2);
}

/* ------------------------------------------------------------------------- */
/* Streams                                                                   */

struct stream {
    struct stream *prev, *next;
    lds_server *srv;
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    struct evbuffer *queued; /* events that came before the put */
    ld_future *fut;          /* the data of the put, while it is fetched */
    size_t put_len;          /* the put may be larger than max_stream_buffer */
    bool started;
    bool dropping;
    bool overflow; /* events were lost before the put: refused */
    bool chunked;  /* the answer is chunked (HTTP/1.1) */
    struct conn *conn;
};

static void stream_unlink(lds_server *srv, struct stream *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        srv->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
    srv->st.streams--;
}

static void stream_free(struct stream *s)
{
    if (s->queued)
        evbuffer_free(s->queued);
    lds_free(s);
}

static void stream_conn_closed(struct stream *s)
{
    lds_server *srv = s->srv;
    s->conn->stream = NULL;
    s->conn = NULL;
    stream_unlink(srv, s);
    if (evhttp_request_get_connection(s->req) == NULL)
        evhttp_request_free(s->req);
    if (!s->dropping)
        slog(srv, LDS_LOG_INFO, "stream closed by the client (%llu open)",
             (unsigned long long)srv->st.streams);
    if (s->fut) {
        /* its callback frees it */
        s->req = NULL;
        s->srv = NULL;
        ld_future_cancel(s->fut);
        return;
    }
    stream_free(s);
}

/* The output of the connection of `s`. */
static struct evbuffer *stream_out(struct stream *s)
{
    return bufferevent_get_output(evhttp_connection_get_bufferevent(s->evcon));
}

/* What was written to `s` that the socket has not taken yet. */
static size_t stream_backlog(struct stream *s)
{
    return evbuffer_get_length(stream_out(s));
}

/* Drops a stream: closes its connection (the close callback frees the
 * stream). `why` NULL: its reader is too slow. */
static void stream_drop_for(struct stream *s, const char *why)
{
    lds_server *srv = s->srv;
    srv->st.streams_dropped++;
    if (why)
        slog(srv, LDS_LOG_WARN, "stream dropped: %s", why);
    else
        slog(srv, LDS_LOG_WARN, "stream dropped: its reader is too slow (%zu bytes unsent)",
             stream_backlog(s));
    s->dropping = true;
    evhttp_connection_free(s->evcon);
}

static void stream_drop(struct stream *s)
{
    stream_drop_for(s, NULL);
}

/* Whether `n` more bytes would leave more unsent on `s` than its put and
 * max_stream_buffer (blobs are shared: the bound is what a slow reader
 * holds on to, beyond the put every stream has). */
static bool backlog_over(struct stream *s, size_t backlog, size_t n)
{
    return backlog + n > s->srv->o.max_stream_buffer + s->put_len;
}

static bool stream_over(struct stream *s, size_t n)
{
    return backlog_over(s, stream_backlog(s), n);
}

/* Events from this size on are added to streams by reference (shared);
 * smaller ones are copied. */
#define SHARE_MIN 4096

/* Appends event `b` to `buf` (a stream's output or queue). A reference
 * costs a libevent chain of 1 KiB, and what evbuffer_add() appends after
 * one a chain as large as the referenced data: small events are copied,
 * packed into the chains there, and a reference is followed by a chain
 * of its own for what comes next. So what a slow reader holds is about
 * what stream_backlog() counts. */
static int sse_add(struct evbuffer *buf, struct blob *b)
{
    if (b->len < SHARE_MIN)
        return evbuffer_add(buf, b->data, b->len);
    if (blob_add(buf, b) != 0)
        return -1;
    evbuffer_expand(buf, 64); /* else a larger chain, later */
    return 0;
}

/* Writes `n` bytes of a started stream (`b`, or else all of `from`) as one
 * chunk of its answer, into the connection's output, which libevent
 * writes as it does for evhttp_send_reply_chunk() (whose head and tail of
 * a chunk are chains of their own around what it is given). @return 0, or
 * -1 when memory ran out (the chunk may be cut: drop the stream). */
static int stream_write(struct stream *s, struct blob *b, struct evbuffer *from, size_t n)
{
    struct evbuffer *out = stream_out(s);
    if (s->chunked && evbuffer_add_printf(out, "%zx\r\n", n) < 0)
        return -1;
    if (b ? sse_add(out, b) != 0 : evbuffer_add_buffer(out, from) != 0)
        return -1;
    return s->chunked ? evbuffer_add(out, "\r\n", 2) : 0;
}

/* An event as it goes on the wire, made once for every stream: its chunk
 * head and tail around it (`chunked`), or the event alone. */
struct frame {
    const char *data[2];
    size_t len[2];
    char buf[SHARE_MIN + 32];
};

/* Frames small event `b` (NULL for one of SHARE_MIN bytes or more, which
 * goes by reference). */
static const struct frame *frame_make(struct frame *f, const struct blob *b)
{
    if (b->len >= SHARE_MIN)
        return NULL;
    int h = snprintf(f->buf, sizeof f->buf, "%zx\r\n", b->len);
    memcpy(f->buf + h, b->data, b->len);
    memcpy(f->buf + h + b->len, "\r\n", 2);
    f->data[1] = f->buf;
    f->len[1] = (size_t)h + b->len + 2;
    f->data[0] = b->data;
    f->len[0] = b->len;
    return f;
}

/* Writes framed event `f` to a started stream: straight to its socket when
 * nothing waits in its output (`backlog` 0). Through the output, libevent
 * would arm the write event, wait for the loop to say the socket takes
 * data, write, and disarm: two epoll_ctl() calls and a dispatch per stream
 * and event, most of the time of a change sent to 10,000 streams. What the
 * socket does not take goes to the output, and libevent writes it (a
 * socket error too: libevent meets it on its write, and the connection
 * closes). @return 0, or -1 when memory ran out (the event may be cut:
 * drop the stream). */
static int stream_write_framed(struct stream *s, const struct frame *f, size_t backlog)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(s->evcon);
    const char *data = f->data[s->chunked];
    size_t len = f->len[s->chunked], sent = 0;
    evutil_socket_t fd = bufferevent_getfd(bev);
    if (backlog == 0 && fd >= 0) {
        ssize_t k;
        do
            k = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (k < 0 && errno == EINTR);
        if (k == (ssize_t)len)
            return 0;
        sent = k > 0 ? (size_t)k : 0;
    }
    return evbuffer_add(bufferevent_get_output(bev), data + sent, len - sent);
}

/* Sends `b` on a started stream; drops the stream if its backlog would pass
 * the bound. `f`: `b` framed (frame_make()), or NULL. */
static bool stream_send(struct stream *s, struct blob *b, const struct frame *f)
{
    size_t backlog = stream_backlog(s);
    if (backlog_over(s, backlog, b->len)) {
        stream_drop(s); /* frees s */
        return false;
    }
    if (f ? stream_write_framed(s, f, backlog) != 0 : stream_write(s, b, NULL, b->len) != 0) {
        /* an event lost would leave the client's data wrong: it reconnects */
        stream_drop_for(s, "out of memory for an event");
        return false;
    }
    return true;
}

static void stream_put_done(ld_future *f, void *arg)
{
    struct stream *s = arg;
    lds_server *srv = s->srv;
    ld_future_unref(s->fut);
    s->fut = NULL;
    if (!srv) { /* its connection went away */
        stream_free(s);
        return;
    }
    struct coll *c = NULL;
    if (ld_future_is_fulfilled(f))
        c = coll_get(srv, COLL_ALL, ld_future_json(ld_future_all_get(f, 0)),
                     ld_future_json(ld_future_all_get(f, 1)));
    struct blob *put = c ? coll_put(c) : NULL;
    if (!put || s->overflow) {
        stream_unlink(srv, s);
        s->conn->stream = NULL;
        if (put)
            send_error(srv, s->req, 503, "too many changes while connecting: try again", F_CLOSE);
        else if (ld_future_error(f) == LD_ECANCELED || srv->closing)
            send_error(srv, s->req, 503, "server closing", F_CLOSE);
        else
            send_error(srv, s->req, 500,
                       ld_future_is_rejected(f) ? ld_future_error_message(f) : "out of memory",
                       F_CLOSE);
        stream_free(s);
        return;
    }
    struct evkeyvalq *h = evhttp_request_get_output_headers(s->req);
    evhttp_add_header(h, "Content-Type", "text/event-stream; charset=utf-8");
    evhttp_add_header(h, "Cache-Control", "no-cache, no-store");
    evhttp_add_header(h, "X-Accel-Buffering", "no");
    evhttp_add_header(h, "Connection", "close");
    evhttp_send_reply_start(s->req, 200, "OK");
    s->chunked = evhttp_find_header(h, "Transfer-Encoding") != NULL;
    /* A stream lives as long as its client wants: no read timeout (libevent
     * reads only to see the connection close, and keeps at most 64 KiB of
     * whatever the client sends), but a write timeout: a client that reads
     * nothing at all for timeout_s is dropped. (evhttp's own "no timeout",
     * evhttp_connection_set_timeout(-1), is 50 s each way.) */
    struct bufferevent *bev = s->conn->bev;
    event_base_update_cache_time(srv->base); /* the put may have taken a while */
    struct timeval wtv = {srv->o.timeout_s, 0};
    bufferevent_set_timeouts(bev, NULL, &wtv);
    bufferevent_setwatermark(bev, EV_READ, 0, 64 * 1024);
    /* events are written as they come, one send() each: without this, the
     * kernel holds the ones after the first until the client acknowledges
     * it (Nagle), a round trip or a delayed ack later on a real network */
    int one = 1;
    evutil_socket_t fd = bufferevent_getfd(bev);
    if (fd >= 0)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    s->started = true;
    s->put_len = put->len;
    log_answer(srv, s->req, 200, put->len);
    slog(srv, LDS_LOG_INFO, "stream opened (%llu open)", (unsigned long long)srv->st.streams);
    if (!stream_send(s, put, NULL))
        return;
    if (s->queued && evbuffer_get_length(s->queued) > 0) {
        /* the events that came meanwhile, after the put */
        size_t n = evbuffer_get_length(s->queued);
        if (stream_over(s, n) || stream_write(s, NULL, s->queued, n) != 0)
            stream_drop(s);
    }
}

/* Starts a stream: its put is sent once the data is read. */
static void stream_start(lds_server *srv, struct evhttp_request *req)
{
    struct conn *c = conn_of(srv, req);
    if (!c) {
        send_error(srv, req, 503, "connection not tracked", 0);
        return;
    }
    struct stream *s = lds_calloc(1, sizeof *s);
    ld_future *f = s ? fetch_all(srv) : NULL;
    if (!f) {
        lds_free(s);
        send_error(srv, req, 500, "out of memory", 0);
        return;
    }
    s->srv = srv;
    s->req = req;
    s->evcon = evhttp_request_get_connection(req);
    s->fut = ld_future_ref(f);
    if (ld_future_on_complete(f, stream_put_done, s) != 0) {
        ld_future_unref(s->fut);
        lds_free(s);
        send_error(srv, req, 500, "out of memory", 0);
        return;
    }
    s->next = srv->streams;
    if (s->next)
        s->next->prev = s;
    srv->streams = s;
    srv->st.streams++;
    s->conn = c;
    c->stream = s;
}

/* Sends `b` to every started stream, and queues it for the others. */
static void broadcast(lds_server *srv, struct blob *b)
{
    struct frame frame;
    const struct frame *f = frame_make(&frame, b);
    struct stream *next;
    for (struct stream *s = srv->streams; s; s = next) {
        next = s->next;
        if (s->started) {
            stream_send(s, b, f);
        } else {
            /* a change lost would go unseen: past the bound (or without
             * memory) the stream is refused once its put is ready */
            if (!s->queued)
                s->queued = evbuffer_new();
            size_t had = s->queued ? evbuffer_get_length(s->queued) : 0;
            if (s->queued && had + b->len <= srv->o.max_stream_buffer)
                sse_add(s->queued, b);
            if (!s->queued || evbuffer_get_length(s->queued) != had + b->len)
                s->overflow = true;
        }
    }
}

static void heartbeat(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    lds_server *srv = arg;
    broadcast(srv, srv->beat);
}

/* A change could not be made into an event: no stream may go on without
 * it, so the started ones are dropped (their clients reconnect and get a
 * new put) and the others refused once their put is ready. */
static void lose_change(lds_server *srv, const char *key)
{
    slog(srv, LDS_LOG_ERROR, "out of memory: change of %s not sent: streams dropped", key);
    struct stream *next;
    for (struct stream *s = srv->streams; s; s = next) {
        next = s->next;
        if (s->started)
            stream_drop_for(s, "out of memory for an event");
        else
            s->overflow = true;
    }
}

void lds_server_changed(lds_server *srv, const ld_kind *kind, const char *key, int64_t version,
                        const json_t *item)
{
    if (!srv || !kind || !key || srv->closing)
        return;
    if (!srv->streams)
        return;
    const char *prefix = kind == ld_kind_segments() ? "/segments/" : "/flags/";
    size_t plen = strlen(prefix), klen = strlen(key);
    char *path = lds_malloc(plen + klen + 1);
    if (!path) {
        lose_change(srv, key);
        return;
    }
    memcpy(path, prefix, plen);
    memcpy(path + plen, key, klen + 1);
    json_t *j = item ? json_pack("{s:s,s:O}", "path", path, "data", item)
                     : json_pack("{s:s,s:I}", "path", path, "version", (json_int_t)version);
    lds_free(path);
    struct blob *data = j ? blob_json(j) : NULL;
    json_decref(j);
    if (!data) {
        lose_change(srv, key);
        return;
    }
    const char *head = item ? "event: patch\ndata: " : "event: delete\ndata: ";
    const char *parts[] = {head, data->data, "\n\n"};
    size_t lens[] = {strlen(head), data->len, 2};
    struct blob *ev = blob_concat(parts, lens, 3);
    blob_unref(data);
    if (!ev) {
        lose_change(srv, key);
        return;
    }
    slog(srv, LDS_LOG_DEBUG, "%s %s%s v%lld to %llu streams", item ? "patch" : "delete", prefix,
         key, (long long)version, (unsigned long long)srv->st.streams);
    broadcast(srv, ev);
    blob_unref(ev);
}

/* ------------------------------------------------------------------------- */
/* evalx                                                                     */

/* LaunchDarkly's client-side evaluation result (as ld-relay's evalx and
 * LaunchDarkly's service answer it), from the evaluator's all-flags state:
 * {"<flag>": {"value": v, "variation": n | null, "version": flag version,
 * "trackEvents": true (when), "trackReason": true (when), "reason": {...}
 * (when asked for or tracked), "debugEventsUntilDate": ms (when),
 * "prerequisites": [keys] (when the flag's evaluation entered any)}, ...}. */
static json_t *evalx_of_state(const json_t *state)
{
    json_t *meta = json_object_get(state, "$flagsState");
    json_t *out = json_object();
    if (!out || !json_is_object(meta))
        return out;
    const char *key;
    json_t *m;
    json_object_foreach(meta, key, m)
    {
        json_t *value = json_object_get(state, key);
        json_t *o = json_object();
        int rc = o ? 0 : -1;
        rc |= json_object_set(o, "value", value ? value : json_null());
        json_t *var = json_object_get(m, "variation");
        rc |= json_object_set(o, "variation", var ? var : json_null());
        static const char *const copy[] = {"version", "trackEvents",   "trackReason",
                                           "reason",  "prerequisites", "debugEventsUntilDate"};
        for (size_t i = 0; i < sizeof copy / sizeof copy[0]; i++) {
            json_t *v = json_object_get(m, copy[i]);
            if (v)
                rc |= json_object_set(o, copy[i], v);
        }
        rc |= json_object_set_new(out, key, o);
        if (rc) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* ------------------------------------------------------------------------- */
/* Answering when the future completes                                      */

static void answer_status(lds_server *srv, struct sreq *r, ld_future *f)
{
    json_t *j = json_object();
    json_t *ds = json_object();
    ld_ds_status st;
    bool have = srv->o.status && srv->o.status(&st, srv->o.status_arg) == 0;
    const char *state = have ? ld_ds_state_name(st.state) : NULL;
    json_object_set_new(ds, "state", json_string(state ? state : "unknown"));
    if (have) {
        json_object_set_new(ds, "stateSince", json_integer(st.since_ms));
        if (st.error) {
            const char *kind = ld_ds_error_kind_name(st.error->kind);
            json_object_set_new(ds, "lastError",
                                json_pack("{s:s,s:i,s:s,s:I}", "kind", kind ? kind : "unknown",
                                          "statusCode", st.error->status_code, "message",
                                          st.error->message ? st.error->message : "", "time",
                                          (json_int_t)st.error->time_ms));
        }
    }
    bool ok = ld_future_is_fulfilled(f);
    json_t *flags = ok ? ld_future_json(ld_future_all_get(f, 0)) : NULL;
    json_t *segs = ok ? ld_future_json(ld_future_all_get(f, 1)) : NULL;
    bool inited = ok && ld_future_bool(ld_future_all_get(f, 2));
    json_object_set_new(j, "status",
                        json_string(!ok                                       ? "unhealthy"
                                    : !inited                                 ? "initializing"
                                    : (have && st.state != LD_DS_STATE_VALID) ? "degraded"
                                                                              : "healthy"));
    json_object_set_new(j, "dataSource", ds);
    json_object_set_new(j, "store",
                        json_pack("{s:s,s:b}", "description", ld_store_describe(srv->store),
                                  "initialized", inited));
    if (!ok)
        json_object_set_new(j, "storeError", json_string(ld_future_error_message(f)));
    json_object_set_new(j, "flags", json_integer((json_int_t)json_object_size(flags)));
    json_object_set_new(j, "segments", json_integer((json_int_t)json_object_size(segs)));
    json_object_set_new(j, "uptimeMs",
                        json_integer((json_int_t)((mono_s() - srv->started) * 1000)));
    json_object_set_new(j, "connections", json_integer((json_int_t)srv->st.connections));
    json_object_set_new(j, "streams", json_integer((json_int_t)srv->st.streams));
    json_object_set_new(j, "requests", json_integer((json_int_t)srv->st.requests));
    json_object_set_new(j, "version", json_string(ld_version_string()));
    struct blob *b = blob_json(j);
    json_decref(j);
    if (!b) {
        send_error(srv, r->req, 500, "out of memory", 0);
        return;
    }
    send_blob(srv, r->req, 200, b, NULL, 0);
    blob_unref(b);
}

static void sreq_done(ld_future *f, void *arg)
{
    struct sreq *r = arg;
    ld_future_unref(r->fut);
    if (r->dead) {
        lds_free(r);
        return;
    }
    lds_server *srv = r->srv;
    sreq_unlink(srv, r);
    struct evhttp_request *req = r->req;
    if (r->conn)
        r->conn->sreq = NULL;
    if (ld_future_error(f) == LD_ECANCELED && srv->closing) {
        send_error(srv, req, 503, "server closing", r->flags | F_CLOSE);
    } else if (r->route == R_STATUS) {
        answer_status(srv, r, f);
    } else if (ld_future_is_rejected(f)) {
        /* The store refuses a key no item can have (not valid UTF-8):
         * the client's error. */
        bool bad_key =
            ld_future_error(f) == LD_EINVAL && (r->route == R_FLAG || r->route == R_SEGMENT);
        send_error(srv, req, bad_key ? 400 : 500, ld_future_error_message(f), r->flags);
    } else {
        switch (r->route) {
        case R_ALL:
        case R_FLAGS:
        case R_SEGMENTS: {
            json_t *a, *b = NULL;
            int which = r->route == R_ALL     ? COLL_ALL
                        : r->route == R_FLAGS ? COLL_FLAGS
                                              : COLL_SEGMENTS;
            if (which == COLL_ALL) {
                a = ld_future_json(ld_future_all_get(f, 0));
                b = ld_future_json(ld_future_all_get(f, 1));
            } else {
                a = ld_future_json(f);
            }
            struct coll *c = coll_get(srv, which, a, b);
            if (c)
                send_cacheable(srv, req, c->body, c->etag);
            else
                send_error(srv, req, 500, "out of memory", 0);
            break;
        }
        case R_FLAG:
        case R_SEGMENT: {
            json_t *item = ld_future_json(f);
            if (!item) {
                send_error(srv, req, 404, r->route == R_FLAG ? "no such flag" : "no such segment",
                           0);
                break;
            }
            struct icache *ic = icache_get(srv, item);
            if (!ic) {
                send_error(srv, req, 500, "out of memory", 0);
                break;
            }
            send_cacheable(srv, req, ic->body, ic->etag);
            break;
        }
        case R_EVALX: {
            json_t *state = ld_future_json(f);
            if (!json_is_true(json_object_get(state, "$valid"))) {
                send_error(srv, req, 503, "service not initialized", F_CORS);
                break;
            }
            json_t *x = evalx_of_state(state);
            struct blob *b = x ? blob_json(x) : NULL;
            json_decref(x);
            if (b)
                send_blob(srv, req, 200, b, NULL, F_CORS);
            else
                send_error(srv, req, 500, "out of memory", F_CORS);
            blob_unref(b);
            break;
        }
        default:
            send_error(srv, req, 500, "internal error", 0);
        }
    }
    lds_free(r);
    if (srv->closing)
        finish_close(srv);
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

/* Decodes base64url (or base64; padding optional) with OpenSSL's decoder
 * (after mapping the URL-safe alphabet onto the standard one and padding).
 * @return a new buffer (NUL-terminated, length in *len), or NULL if `s` is
 * not base64 or memory ran out (*len then 0 or 1). */
static char *b64_decode(const char *s, size_t n, size_t *len)
{
    while (n > 0 && s[n - 1] == '=')
        n--;
    *len = 0;
    if (n % 4 == 1 || n > INT_MAX / 2)
        return NULL;
    size_t padded = (n + 3) / 4 * 4;
    unsigned char *in = lds_malloc(padded + 1);
    unsigned char *out = lds_malloc(padded / 4 * 3 + 1);
    if (!in || !out) {
        lds_free(in);
        lds_free(out);
        *len = 1;
        return NULL;
    }
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c == '=') /* OpenSSL would skip spaces at the ends */
            rc = -1;
        in[i] = c == '-' ? '+' : c == '_' ? '/' : c;
    }
    memset(in + n, '=', padded - n);
    if (rc == 0)
        rc = EVP_DecodeBlock(out, in, (int)padded);
    lds_free(in);
    if (rc < 0) {
        lds_free(out);
        return NULL;
    }
    *len = (size_t)rc - (padded - n); /* each '=' added decoded as a 0 */
    out[*len] = '\0';
    return (char *)out;
}

static bool query_flag(const char *query, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = query; p && *p;) {
        const char *end = strchr(p, '&');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == nl + 5 && strncmp(p, name, nl) == 0 && strncmp(p + nl, "=true", 5) == 0)
            return true;
        p = end ? end + 1 : NULL;
    }
    return false;
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
    unsigned char got[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)h, n, got);
    return CRYPTO_memcmp(got, srv->key_hash, sizeof got) == 0;
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

static void method_not_allowed(lds_server *srv, struct evhttp_request *req, const char *allow,
                               int flags)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    send_error(srv, req, 405, "method not allowed", flags);
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

/* Answers a request whose context was not made: `j` is the parsed JSON
 * (NULL when json_loadb() failed with `jerr`), `why` what
 * ld_context_from_json() said. Memory running out is 500, not the client's
 * mistake. */
static void send_context_error(lds_server *srv, struct evhttp_request *req, const json_t *j,
                               const json_error_t *jerr, const char *why, int flags)
{
    if (!j ? json_error_code(jerr) == json_error_out_of_memory
           : why && strcmp(why, "out of memory") == 0)
        send_error(srv, req, 500, "out of memory", flags);
    else if (!j)
        send_error(srv, req, 400, "the context is not valid JSON", flags);
    else
        send_error(srv, req, 400, why ? why : "invalid context", flags);
}

/* Evaluates for the context in `text` (a REPORT's body). */
static void report_eval(lds_server *srv, struct evhttp_request *req, const char *text, size_t len,
                        bool reasons)
{
    json_error_t jerr = {0}; /* jansson leaves it as it is when its first allocation fails */
    const char *why = NULL;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    ld_context *ctx = j ? ld_context_from_json(j, &why) : NULL;
    if (srv->closing)
        send_error(srv, req, 503, "server closing", F_CORS | F_CLOSE);
    else if (!ctx)
        send_context_error(srv, req, j, &jerr, why, F_CORS | F_CLOSE);
    else
        wait_for(srv, req,
                 ld_evaluator_all_flags(srv->ev, ctx,
                                        LD_ALL_FLAGS_CLIENT_SIDE_ONLY |
                                            (reasons ? LD_ALL_FLAGS_WITH_REASONS : 0)),
                 R_EVALX, F_CORS | F_CLOSE);
    ld_context_unref(ctx);
    json_decref(j);
}

/* A REPORT whose body is still arriving: evhttp 2.1 reads no body for a
 * method it does not know, so it is read here, from the connection's
 * input, with the bufferevent's callbacks borrowed meanwhile. */
struct bodyw {
    lds_server *srv;
    struct conn *conn;
    struct evhttp_request *req;
    size_t need;
    bool reasons;
    bufferevent_data_cb rd, wr;
    bufferevent_event_cb evcb;
    void *cbarg;
};

static void bodyw_restore(struct bodyw *w)
{
    struct bufferevent *bev = w->conn->bev;
    bufferevent_setcb(bev, w->rd, w->wr, w->evcb, w->cbarg);
    bufferevent_disable(bev, EV_READ);
    w->conn->bodyw = NULL;
}

/* The body is there: evaluate, and take it out of the connection's input
 * (before libevent reads the next request from it). */
static void report_body(lds_server *srv, struct evhttp_request *req, struct bufferevent *bev,
                        size_t need, bool reasons)
{
    struct evbuffer *in = bufferevent_get_input(bev);
    const char *text = need ? (const char *)evbuffer_pullup(in, (ev_ssize_t)need) : "";
    report_eval(srv, req, text ? text : "", text ? need : 0, reasons);
    evbuffer_drain(in, need);
}

static void bodyw_read(struct bufferevent *bev, void *arg)
{
    struct bodyw *w = arg;
    if (evbuffer_get_length(bufferevent_get_input(bev)) < w->need)
        return;
    bodyw_restore(w);
    conn_request_came(w->conn);
    report_body(w->srv, w->req, bev, w->need, w->reasons);
    lds_free(w);
}

static void bodyw_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what;
    struct bodyw *w = arg;
    bodyw_restore(w);
    w->conn->bodyw = w; /* conn_closed() frees it */
    slog(w->srv, LDS_LOG_DEBUG, "client went away (or timed out) while sending a body");
    evhttp_connection_free(w->conn->evcon);
}

static void bodyw_conn_closed(struct bodyw *w)
{
    w->conn->bodyw = NULL;
    lds_free(w); /* its request is attached: libevent frees it */
}

/* True when Content-Type value `ct` is of media type `type`: compared
 * case-insensitively (RFC 9110, 8.3.1), parameters aside. */
static bool media_type_is(const char *ct, const char *type)
{
    size_t n = strlen(type);
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (evutil_ascii_strncasecmp(ct, type, n) != 0)
        return false;
    for (ct += n; *ct == ' ' || *ct == '\t';)
        ct++;
    return *ct == '\0' || *ct == ';';
}

static void report(lds_server *srv, struct evhttp_request *req, bool reasons)
{
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *ct = evhttp_find_header(h, "Content-Type");
    const char *cl = evhttp_find_header(h, "Content-Length");
    if (ct && !media_type_is(ct, "application/json")) {
        send_error(srv, req, 415, "Content-Type must be application/json", F_CORS | F_CLOSE);
        return;
    }
    if (!cl) {
        if (evhttp_find_header(h, "Transfer-Encoding"))
            send_error(srv, req, 411, "a REPORT needs a Content-Length", F_CORS | F_CLOSE);
        else
            report_eval(srv, req, "", 0, reasons);
        return;
    }
    char *end;
    errno = 0;
    unsigned long long need = strtoull(cl, &end, 10);
    if (cl[0] < '0' || cl[0] > '9' || *end || errno) {
        send_error(srv, req, 400, "bad Content-Length", F_CORS | F_CLOSE);
        return;
    }
    for (struct evkeyval *kv = h->tqh_first; kv; kv = kv->next.tqe_next)
        if (evutil_ascii_strcasecmp(kv->key, "Content-Length") == 0 && strcmp(kv->value, cl) != 0) {
            /* which one frames the body is ambiguous */
            send_error(srv, req, 400, "two different Content-Lengths", F_CORS | F_CLOSE);
            return;
        }
    if (need > srv->o.max_body) {
        send_error(srv, req, 413, "request body too large", F_CORS | F_CLOSE);
        return;
    }
    struct conn *c = conn_of(srv, req);
    if (!c) {
        send_error(srv, req, 503, "connection not tracked", F_CORS | F_CLOSE);
        return;
    }
    struct bufferevent *bev = c->bev;
    if (evbuffer_get_length(bufferevent_get_input(bev)) >= need) {
        report_body(srv, req, bev, (size_t)need, reasons);
        return;
    }
    struct bodyw *w = lds_calloc(1, sizeof *w);
    if (!w) {
        send_error(srv, req, 500, "out of memory", F_CORS | F_CLOSE);
        return;
    }
    w->srv = srv;
    w->conn = c;
    w->req = req;
    w->need = (size_t)need;
    w->reasons = reasons;
    bufferevent_getcb(bev, &w->rd, &w->wr, &w->evcb, &w->cbarg);
    c->bodyw = w;
    bufferevent_setcb(bev, bodyw_read, NULL, bodyw_event, w);
    bufferevent_enable(bev, EV_READ);
    conn_expect_request(c); /* the body has its time too */
}

static void handle(struct evhttp_request *req, void *arg)
{
    lds_server *srv = arg;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    bool unknown = ((unsigned)cmd & KNOWN_METHODS) == 0;
    bool get = cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD;
    bool options = cmd == EVHTTP_REQ_OPTIONS;

    if (srv->closing) {
        send_error(srv, req, 503, "server closing", F_CLOSE);
        return;
    }
    struct conn *conn = conn_of(srv, req);
    if (!conn || conn->over) {
        send_error(srv, req, 503, "too many connections", F_CLOSE);
        return;
    }
    conn_request_came(conn);
    const char *uri = evhttp_request_get_uri(req);
    if (strlen(uri) > srv->o.max_uri) {
        send_error(srv, req, 414, "request target too long", F_CLOSE);
        return;
    }
    bool te_bad;
    if (headers_scan(req, &te_bad) > srv->o.max_headers) {
        send_error(srv, req, 431, "request header fields too large", F_CLOSE);
        return;
    }
    if (te_bad) { /* 400, and close */
        send_error(srv, req, 400, "unsupported Transfer-Encoding", F_CLOSE);
        return;
    }
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    if (evbuffer_get_length(body) > srv->o.max_body) {
        send_error(srv, req, 413, "request body too large", F_CLOSE);
        return;
    }
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    const char *query = u ? evhttp_uri_get_query(u) : NULL;
    if (!path || path[0] != '/') {
        send_error(srv, req, 400, "bad request target", 0);
        return;
    }
    if (query && !pct_valid(query)) {
        send_error(srv, req, 400, "invalid percent-encoding in the query", 0);
        return;
    }
    size_t plen = strlen(path);
    char stackbuf[512];
    char *buf = plen + 8 <= sizeof stackbuf ? stackbuf : lds_malloc(plen + 8);
    if (!buf) {
        send_error(srv, req, 500, "out of memory", 0);
        return;
    }
    char *seg[6];
    int n = split_path(path, buf, seg);

#define IS(i, s) (strcmp(seg[i], s) == 0)
    bool evalx = n >= 3 && IS(0, "sdk") && IS(1, "evalx");
    int cors = evalx ? F_CORS : 0;
    if (n == -1) {
        send_error(srv, req, 400, "invalid percent-encoding in the path", 0);
    } else if (n == -2) {
        send_error(srv, req, 404, "not found", 0);
    } else if (n == 1 && IS(0, "status")) {
        if (!get)
            method_not_allowed(srv, req, "GET, HEAD", 0);
        else {
            ld_future *fs[3] = {ld_store_all(srv->store, ld_kind_features()),
                                ld_store_all(srv->store, ld_kind_segments()),
                                ld_store_initialized(srv->store)};
            wait_for(srv, req, ld_future_all(srv->base, fs, 3), R_STATUS, 0);
        }
    } else if (n == 1 && IS(0, "all")) {
        if (cmd != EVHTTP_REQ_GET)
            method_not_allowed(srv, req, "GET", 0);
        else if (!authorized(srv, req))
            send_error(srv, req, 401, "invalid SDK key", 0);
        else
            stream_start(srv, req);
    } else if ((n == 2 || n == 3) && IS(0, "sdk") &&
               (IS(1, "latest-all") || IS(1, "latest-flags") || IS(1, "latest-segments"))) {
        bool all = IS(1, "latest-all"), flags = IS(1, "latest-flags");
        if (all && n == 3)
            send_error(srv, req, 404, "not found", 0);
        else if (!get)
            method_not_allowed(srv, req, "GET, HEAD", 0);
        else if (!authorized(srv, req))
            send_error(srv, req, 401, "invalid SDK key", 0);
        else if (all)
            wait_for(srv, req, fetch_all(srv), R_ALL, 0);
        else if (n == 2)
            wait_for(srv, req,
                     ld_store_all(srv->store, flags ? ld_kind_features() : ld_kind_segments()),
                     flags ? R_FLAGS : R_SEGMENTS, 0);
        else if (seg[2][0] == '\0')
            send_error(srv, req, 404, "not found", 0);
        else
            wait_for(
                srv, req,
                ld_store_get(srv->store, flags ? ld_kind_features() : ld_kind_segments(), seg[2]),
                flags ? R_FLAG : R_SEGMENT, 0);
    } else if (evalx && n == 5 && IS(3, "contexts") && seg[2][0]) {
        if (options)
            send_blob(srv, req, 200, NULL, NULL, F_CORS);
        else if (!get)
            method_not_allowed(srv, req, "GET, HEAD, OPTIONS", F_CORS);
        else {
            size_t len;
            char *text = b64_decode(seg[4], strlen(seg[4]), &len);
            json_error_t jerr = {0};
            json_t *j = text ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
            const char *why = NULL;
            ld_context *ctx = j ? ld_context_from_json(j, &why) : NULL;
            if (!text)
                send_error(srv, req, len ? 500 : 400,
                           len ? "out of memory" : "the context is not valid base64url", F_CORS);
            else if (!ctx)
                send_context_error(srv, req, j, &jerr, why, F_CORS);
            else
                wait_for(
                    srv, req,
                    ld_evaluator_all_flags(
                        srv->ev, ctx,
                        LD_ALL_FLAGS_CLIENT_SIDE_ONLY |
                            (query_flag(query, "withReasons") ? LD_ALL_FLAGS_WITH_REASONS : 0)),
                    R_EVALX, F_CORS);
            ld_context_unref(ctx);
            json_decref(j);
            lds_free(text);
        }
    } else if (evalx && n == 4 && IS(3, "context") && seg[2][0]) {
        if (options)
            send_blob(srv, req, 200, NULL, NULL, F_CORS);
        else if (!unknown) /* evhttp cannot name REPORT: see the top */
            method_not_allowed(srv, req, "REPORT, OPTIONS", F_CORS);
        else
            report(srv, req, query_flag(query, "withReasons"));
    } else {
        send_error(srv, req, 404, "not found", cors);
    }
#undef IS
    if (buf != stackbuf)
        lds_free(buf);
}

/* ------------------------------------------------------------------------- */
/* Life                                                                      */

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
        SHA256((const unsigned char *)o->sdk_key, strlen(o->sdk_key), srv->key_hash);
    }
    srv->o.sdk_key = srv->sdk_key;
    srv->started = mono_s();
    srv->http = evhttp_new(base);
    srv->scratch = evbuffer_new();
    srv->heartbeat = event_new(base, -1, EV_PERSIST, heartbeat, srv);
    srv->beat = blob_new(2);
    if (srv->beat)
        memcpy(srv->beat->data, ":\n", 2);
    if (!srv->beat || !srv->bind_address || (o->sdk_key && o->sdk_key[0] && !srv->sdk_key) ||
        !srv->http || !srv->scratch || !srv->heartbeat) {
        slog(srv, LDS_LOG_ERROR, "server: out of memory");
        lds_server_free(srv);
        return NULL;
    }
    evhttp_set_allowed_methods(srv->http, 0xffff);
    evhttp_set_gencb(srv->http, handle, srv);
    evhttp_set_bevcb(srv->http, make_bev, srv);
    evhttp_set_max_headers_size(srv->http, (ev_ssize_t)(4 * (srv->o.max_uri + srv->o.max_headers)));
    evhttp_set_max_body_size(srv->http, (ev_ssize_t)(4 * srv->o.max_body));
    evhttp_set_timeout(srv->http, srv->o.timeout_s);
    srv->sock =
        evhttp_bind_socket_with_handle(srv->http, srv->o.bind_address, (ev_uint16_t)srv->o.port);
    if (!srv->sock) {
        slog(srv, LDS_LOG_ERROR, "cannot listen on %s port %d: %s", srv->o.bind_address,
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
    slog(srv, LDS_LOG_INFO, "listening on http://%s:%d/ (store: %s; SDK key %s)",
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
    if (srv && out)
        *out = srv->st;
}

/* Bytes written to connections that the socket has not taken yet. */
static size_t unsent(const lds_server *srv)
{
    size_t n = 0;
    for (const struct conn *c = srv->conns; c; c = c->next)
        n += evbuffer_get_length(bufferevent_get_output(c->bev));
    return n;
}

static void drain_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    finish_close(arg);
}

/* The close is done once no request waits for its future and what was
 * written has been sent (the socket took it, or its connection closed), or
 * the drain time is up: a client that reads nothing does not hold the
 * shutdown longer than that. */
static void finish_close(lds_server *srv)
{
    if (srv->pending || !srv->close_fut || !ld_future_is_pending(srv->close_fut))
        return;
    struct timeval now;
    size_t left = unsent(srv);
    if (left > 0 && srv->drain && event_base_gettimeofday_cached(srv->base, &now) == 0 &&
        timercmp(&now, &srv->drain_by, <)) {
        static const struct timeval tick = {0, 10000};
        event_add(srv->drain, &tick);
        return;
    }
    if (left > 0)
        slog(srv, LDS_LOG_WARN, "closing: %zu bytes left unsent", left);
    ld_future_fulfill(srv->close_fut);
    slog(srv, LDS_LOG_INFO, "server closed");
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
        slog(srv, LDS_LOG_INFO, "closing: %llu streams, %llu requests waiting",
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
        while (srv->streams) {
            struct stream *s = srv->streams;
            stream_unlink(srv, s);
            s->conn->stream = NULL;
            s->conn = NULL;
            if (s->fut) { /* its callback only frees it */
                struct evhttp_request *req = s->req;
                s->srv = NULL;
                s->req = NULL;
                ld_future_cancel(s->fut);
                send_error(srv, req, 503, "server closing", F_CLOSE);
            } else {
                evhttp_send_reply_end(s->req);
                stream_free(s);
            }
        }
        /* the waiting requests: their callbacks answer 503 */
        for (struct sreq *r = srv->pending; r; r = r->next)
            ld_future_cancel(r->fut);
    }
    finish_close(srv);
    return ld_future_ref(srv->close_fut);
}

void lds_server_free(lds_server *srv)
{
    if (!srv)
        return;
    if (srv->http)
        evhttp_free(srv->http); /* close callbacks run: streams and waiting requests let go */
    /* requests still listed (none should be): their callbacks only free them */
    while (srv->pending) {
        struct sreq *r = srv->pending;
        sreq_unlink(srv, r);
        r->dead = true;
        ld_future_cancel(r->fut);
    }
    while (srv->streams) {
        struct stream *s = srv->streams;
        stream_unlink(srv, s);
        if (s->fut) {
            s->srv = NULL;
            ld_future_cancel(s->fut);
        } else {
            stream_free(s);
        }
    }
    /* connections libevent has not finished freeing must not reach us */
    while (srv->conns) { /* those not set up yet: conn_setup_later frees them */
        struct conn *c = srv->conns;
        conn_unlink(&srv->conns, c);
        c->srv = NULL;
        if (c->deadline)
            event_free(c->deadline);
        c->deadline = NULL;
    }
    lds_free(srv->map);
    if (srv->heartbeat)
        event_free(srv->heartbeat);
    if (srv->drain)
        event_free(srv->drain);
    if (srv->scratch)
        evbuffer_free(srv->scratch);
    blob_unref(srv->beat);
    for (int i = 0; i < N_COLL; i++)
        coll_clear(&srv->coll[i]);
    for (int i = 0; i < ICACHE_SLOTS; i++)
        icache_clear(&srv->items[i]);
    if (srv->close_fut) {
        if (ld_future_is_pending(srv->close_fut))
            ld_future_fulfill(srv->close_fut);
        ld_future_unref(srv->close_fut);
    }
    lds_free(srv->bind_address);
    lds_free(srv->sdk_key);
    lds_free(srv);
}
