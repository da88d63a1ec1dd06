/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/serve-internal.h: what the files of ldasync-serve share (internal,
 * not installed). The program's own names begin with lds_: ld_ is the
 * library's public prefix and ld__ its internal one, which the program does
 * not use (it is linked against libldasync like any user of it).
 *
 * The server is an HTTP shell and endpoint files:
 *
 *   the shell   server.c (routing, life), conn.c (connections, limits on
 *               them), body.c (reading a body evhttp does not read),
 *               answer.c (answers, If-None-Match), wait.c (requests waiting
 *               for futures), log.c, blob.c, cache.c (serialized
 *               collections and items, with their ETags), alloc.c
 *   endpoints   polling.c (/sdk/latest-*), stream.c (/all and the fan-out
 *               of changes), evalx.c (/sdk/evalx/...), status.c (/status)
 *
 * and the program around it: app.c (its wiring: app.h) and main.c (its
 * options and signals).
 *
 * routes.c holds the one route table: each endpoint family's begin function
 * answers a request (or starts what will), and its finish function answers
 * it once the future it waits for completes (lds_wait_for()).
 */
#ifndef LDASYNC_SERVE_SERVE_INTERNAL_H
#define LDASYNC_SERVE_SERVE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include <event2/http.h>
#include <event2/util.h>
#include <openssl/sha.h>

#include <ldasync/ldasync.h>

#include "server.h"

struct bufferevent;
struct evbuffer;
struct event;
struct lds_conn;
struct lds_waiting;
struct lds_stream;

/* ------------------------------------------------------------------------- */
/* Memory (alloc.c): through the library's allocation functions
 * (ld_get_alloc_funcs), so that ld_set_alloc_funcs() governs the program's
 * memory too, and a test that makes allocations fail reaches it. */

/* malloc(size); a size of 0 allocates 1 byte. */
void *lds_malloc(size_t size);
/* calloc(n, size); NULL when n * size overflows. */
void *lds_calloc(size_t n, size_t size);
/* free(ptr); NULL-safe. */
void lds_free(void *ptr);

/* ------------------------------------------------------------------------- */
/* Blobs (blob.c)                                                            */

/* An immutable, reference-counted byte string: response bodies and event
 * texts, handed to evbuffers by reference. */
struct lds_blob {
    size_t refs;
    size_t len;
    char data[];
};

/* A blob of `len` bytes (and a NUL after them) to fill; NULL without memory. */
struct lds_blob *lds_blob_new(size_t len);
void lds_blob_unref(struct lds_blob *b);
/* Appends `b` to `buf` by reference. @return 0 or -1. */
int lds_blob_add(struct evbuffer *buf, struct lds_blob *b);
/* A blob of the concatenation of `n` parts. */
struct lds_blob *lds_blob_concat(const char *const *parts, const size_t *lens, size_t n);
/* A blob of the compact JSON text of `j`. */
struct lds_blob *lds_blob_json(const json_t *j);

/* ------------------------------------------------------------------------- */
/* Serialized collections and items (cache.c)                                */

/* A serialized collection, kept while the store answers with the same
 * snapshot objects (references held, so their addresses cannot be
 * reused). */
struct lds_coll {
    json_t *snap[2];
    struct lds_blob *body;
    struct lds_blob *put; /* LDS_COLL_ALL only: the stream's put event, made on demand */
    char etag[24];
};
enum { LDS_COLL_ALL, LDS_COLL_FLAGS, LDS_COLL_SEGMENTS, LDS_N_COLL };

/* The serialized bodies of single items, by the item's JSON object (a
 * reference held, so that its address cannot be reused): a direct-mapped
 * cache, so it holds at most LDS_ICACHE_SLOTS items that the store may have
 * let go of already. */
#define LDS_ICACHE_SLOTS 1024
struct lds_icache {
    json_t *item;
    struct lds_blob *body;
    char etag[24];
};

/* The body of collection `which` (LDS_COLL_*) of the snapshots `a` (and
 * `b` for LDS_COLL_ALL), borrowed from the cache, or assembled now if that
 * takes a slice of the loop at most. Otherwise it is assembled in later
 * passes: NULL then, and *wait a new future that fulfils once
 * srv->coll[which] holds the body of these snapshots or newer ones
 * (rejected if memory ran out). NULL and *wait NULL: out of memory. */
struct lds_coll *lds_coll_begin(lds_server *srv, int which, json_t *a, json_t *b, ld_future **wait);
/* The stream's put event of the LDS_COLL_ALL cache entry (borrowed). */
struct lds_blob *lds_coll_put(struct lds_coll *c);
/* The cache entry of `item`, made if needed; NULL when memory ran out. */
struct lds_icache *lds_icache_get(lds_server *srv, json_t *item);
/* Lets go of every cached body. */
void lds_cache_clear(lds_server *srv);
/* The flags and the segments: ld_future_all() of the two ld_store_all(). */
ld_future *lds_fetch_all(lds_server *srv);

/* ------------------------------------------------------------------------- */
/* The server                                                                */

/* A presented SDK key of up to this many bytes is compared with the key
 * byte by byte (in a time that depends on its own length only); a longer
 * one through SHA-256 digests. */
#define LDS_KEY_PAD 256
/* An answer up to this size is written with the connection's timeouts as
 * they are (the socket takes it at once); a larger one with only the write
 * timeout, so that a slow reader's progress keeps the connection. */
#define LDS_SMALL_ANSWER 16384

struct lds_server {
    struct event_base *base;
    ld_store *store;
    ld_evaluator *ev;
    struct lds_server_options o;
    char *bind_address, *sdk_key;
    char **client_ids;                            /* the copies of o.client_side_ids */
    unsigned char key_hash[SHA256_DIGEST_LENGTH]; /* for a presented key over LDS_KEY_PAD */
    size_t key_len;
    char key_pad[LDS_KEY_PAD]; /* the key's first bytes, then zeros */
    bool need_key;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    int port;
    struct event *heartbeat;
    struct lds_blob *beat; /* ":\n" */
    struct evbuffer *scratch;
    struct lds_conn *conns; /* every connection */
    struct lds_conn **map;  /* bufferevent -> connection */
    size_t map_n, map_mask;
    struct lds_waiting *pending; /* requests waiting for a future */
    struct lds_stream *streams;
    struct lds_fanout *fanout; /* stream.c: the changes of a loop pass, the events held */
    struct lds_coll coll[LDS_N_COLL];
    struct lds_icache items[LDS_ICACHE_SLOTS];
    struct lds_cache_state *cache; /* cache.c's texts of items and assemblings */
    /* evalx.c: bodies being written in slices, first to last, and the
     * zero timeout that writes the next slice */
    struct lds_evalx_writer *wq_head, *wq_tail;
    struct event *wq_ev;
    size_t slice_flags;      /* flags an evalx slice writes at most (a test's knob) */
    size_t slice_items;      /* items a collection slice takes at most (a test's knob) */
    struct lds_probe *probe; /* probe.c: the loop probe, or NULL */
    struct lds_warm *warm;   /* warm.c: lds_server_warm()'s work, or NULL */
    double started;
    bool closing;
    ld_future *close_fut;
    struct event *drain;     /* while closing: waits for the answers to be sent */
    struct timeval drain_by; /* when it stops waiting */
    struct lds_server_stats st;
};

/* The monotonic clock, in seconds. */
double lds_mono_s(void);

/* The monotonic clock, in nanoseconds. */
int64_t lds_now_ns(void);

/* The time a slice of work made in slices (an assembling of a collection,
 * an evalx body) may take: well under the 10 ms a pass of the loop may
 * take. */
#define LDS_SLICE_NS 1000000

/* Starts the loop probe (probe.c) when `period_ms` > 0. @return 0, or -1
 * when memory ran out. */
int lds_probe_start(lds_server *srv, int period_ms);
/* Stops the probe's timer (a closed server's loop owes it nothing); its
 * counts stay. */
void lds_probe_stop(lds_server *srv);
void lds_probe_free(lds_server *srv);

/* Lets go of lds_server_warm()'s work (warm.c), cancelled. */
void lds_warm_forget(lds_server *srv);

/* Frees the evalx bodies still being written (the server is freed). */
void lds_evalx_writers_free(lds_server *srv);

/* The close is done once no request waits and what was written has been
 * sent (or the drain time is up): fulfils the close future then. */
void lds_finish_close(lds_server *srv);

/* Logs a line through the options' log function (log.c). */
LD_PRINTF(3, 4)
void lds_log(const lds_server *srv, int level, const char *fmt, ...);

/* ------------------------------------------------------------------------- */
/* Connections (conn.c)                                                      */

/* Told that a connection closes (libevent frees it now): `what` is what
 * the connection carried. */
typedef void (*lds_conn_close_fn)(void *what);

struct lds_conn {
    struct lds_conn *prev, *next;
    lds_server *srv; /* NULL once the server is freed */
    struct bufferevent *bev;
    struct evhttp_connection *evcon; /* once set up */
    /* what it carries (a request waiting for a future, a stream, a body
     * being read), told of the close */
    lds_conn_close_fn on_close;
    void *carried;
    struct event *deadline; /* for the request being read */
    int64_t expect_at;      /* since when a request is expected (lds_now_ns) */
    bool expecting;         /* a request is expected: the deadline applies */
    bool armed;             /* the deadline's timer is pending */
    bool over;              /* beyond max_connections */
    bool setup;
    bool once;       /* conn_setup_later() is still to run: it frees `c` */
    bool body_taken; /* the request's body was read whole (body.c): it may stay open */
    bool write_only; /* an answer is written with the write timeout alone */
};

/* evhttp's bufferevent callback (evhttp_set_bevcb), `arg` the server: makes
 * the bufferevent of each connection evhttp accepts, and its record. */
struct bufferevent *lds_conn_make_bev(struct event_base *base, void *arg);
/* The record of the connection of `req`, set up; NULL if there is none. */
struct lds_conn *lds_conn_of(lds_server *srv, struct evhttp_request *req);
/* The record of the connection of `req`, if it has one (not set up). */
struct lds_conn *lds_conn_find(lds_server *srv, struct evhttp_request *req);
/* `c` carries `what` now, whose `on_close` it calls if it closes first;
 * NULL and NULL: nothing. */
void lds_conn_carry(struct lds_conn *c, lds_conn_close_fn on_close, void *what);
/* Starts (or restarts) the time a request has to come whole. */
void lds_conn_expect_request(struct lds_conn *c);
/* A request came whole (or the connection now streams). */
void lds_conn_request_came(struct lds_conn *c);
/* Bytes written to connections that the socket has not taken yet. */
size_t lds_conns_unsent(const lds_server *srv);
/* The server is freed: the connections libevent has not finished freeing
 * must not reach it. */
void lds_conns_forget(lds_server *srv);

/* ------------------------------------------------------------------------- */
/* Answers (answer.c)                                                        */

/* Answer flags: CORS headers; "Connection: close". */
enum { LDS_F_CORS = 1, LDS_F_CLOSE = 2 };

/* Sends `body` (may be NULL) with status `code`, and `etag` when not NULL. */
void lds_send_blob(lds_server *srv, struct evhttp_request *req, int code, struct lds_blob *body,
                   const char *etag, int flags);
/* Sends the JSON body written in `body` (emptied: srv->scratch, say) with
 * status `code`. */
void lds_send_buffer(lds_server *srv, struct evhttp_request *req, int code, struct evbuffer *body,
                     int flags);
/* Sends {"error": msg} (the status's reason when `msg` is NULL). */
void lds_send_error(lds_server *srv, struct evhttp_request *req, int code, const char *msg,
                    int flags);
/* Sends `body` with `etag`, or 304 when the request's If-None-Match names it. */
void lds_send_cacheable(lds_server *srv, struct evhttp_request *req, struct lds_blob *body,
                        const char *etag);
/* 405, with `allow` as the Allow header. */
void lds_method_not_allowed(lds_server *srv, struct evhttp_request *req, const char *allow,
                            int flags);
/* Counts an answer, and logs it at debug level. */
void lds_log_answer(lds_server *srv, struct evhttp_request *req, int code, size_t len);

/* ------------------------------------------------------------------------- */
/* Routes (routes.c) and requests waiting for futures (wait.c)               */

struct lds_route;

/* Answers `req` on route `rt` (method and SDK key checked); `seg`: the
 * path's decoded segments; `query`: the query or NULL. */
typedef void (*lds_begin_fn)(lds_server *srv, struct evhttp_request *req,
                             const struct lds_route *rt, char *const *seg, const char *query);
/* Answers `req` with the result of future `f` (borrowed), which it waited
 * for with lds_wait_for(rt, flags). Not called for a future cancelled by
 * the server's close (the shell answers 503). */
typedef void (*lds_finish_fn)(lds_server *srv, struct evhttp_request *req,
                              const struct lds_route *rt, ld_future *f, int flags);

/* The methods of a route: evhttp's bits, and REPORT, which evhttp 2.1 cannot
 * name (it hands every method it does not know over as one unknown type:
 * taken for REPORT where a route takes REPORT). */
#define LDS_M_REPORT (1u << 16)
/* The methods evhttp 2.1 knows; any other bit is its "unknown" type. */
#define LDS_KNOWN_METHODS                                                                      \
    (EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | \
     EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH)
#define LDS_M_ANY 0xffffffffu

/* Route flags: answers carry CORS headers; OPTIONS is the CORS preflight
 * (200); the SDK key is required (401); the third segment is a client-side
 * ID, one of the client_side_ids option's when it gives any (404). */
enum { LDS_R_CORS = 1, LDS_R_PREFLIGHT = 2, LDS_R_KEY = 4, LDS_R_ENV = 8 };

struct lds_route {
    const char *path[6]; /* the segments; "+" any non-empty one, "*" any */
    int n;               /* the number of segments; -k: k or more */
    unsigned methods;    /* EVHTTP_REQ_* and LDS_M_REPORT: others get 405 */
    const char *allow;   /* the Allow header of that 405 */
    int flags;           /* LDS_R_* */
    lds_begin_fn begin;
    lds_finish_fn finish; /* NULL when the route waits for no future */
    int arg;              /* the endpoint's own (which collection or item) */
};

/* The route table, ended by an entry with no begin function. */
extern const struct lds_route lds_routes[];

/* Makes `f` (stolen) answer `req` through rt->finish when it completes (500
 * when `f` is NULL). */
void lds_wait_for(lds_server *srv, struct evhttp_request *req, ld_future *f,
                  const struct lds_route *rt, int flags);
/* Answers a rejected future `f`: 500 with its message. */
void lds_send_rejected(lds_server *srv, struct evhttp_request *req, ld_future *f, int flags);
/* The server closes: every waiting request's future is cancelled (their
 * callbacks answer 503). */
void lds_waiting_cancel_all(lds_server *srv);
/* The server is freed: the callbacks of the waiting requests only free
 * them. */
void lds_waiting_forget_all(lds_server *srv);

/* Reads the body of `req` (body.c), which evhttp 2.1 does not read for a
 * method it does not know (REPORT), framed by Content-Length or chunked:
 * `fn` gets it whole, now or once it has come (with `rt` and `arg`; `text`
 * is NUL-terminated only when empty or chunked), and the connection may
 * stay open after the answer; or the request is answered with an error
 * (400, 413, 500, 503) and `flags`. */
typedef void (*lds_body_fn)(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                            const char *text, size_t len, int arg);
void lds_read_body(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                   int flags, lds_body_fn fn, int arg);

/* ------------------------------------------------------------------------- */
/* Endpoints                                                                 */

/* polling.c: /sdk/latest-all, -flags, -segments (rt->arg: LDS_P_*; the
 * collections are their cache's). */
enum {
    LDS_P_ALL = LDS_COLL_ALL,
    LDS_P_FLAGS = LDS_COLL_FLAGS,
    LDS_P_SEGMENTS = LDS_COLL_SEGMENTS,
    LDS_P_FLAG,
    LDS_P_SEGMENT
};
void lds_polling_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                       char *const *seg, const char *query);
void lds_polling_finish(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                        ld_future *f, int flags);

/* stream.c: /all. */
void lds_stream_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                      char *const *seg, const char *query);
/* The heartbeat event's callback (`arg` the server). */
void lds_stream_heartbeat(evutil_socket_t fd, short what, void *arg);
/* The server closes: every stream ends (one still waiting for its put gets
 * 503). */
void lds_streams_end(lds_server *srv);
/* The server is freed: lets go of the streams still listed, and of the
 * changes not sent. */
void lds_streams_forget(lds_server *srv);
/* Makes what the fan-out of changes needs. @return 0, or -1 without memory. */
int lds_streams_init(lds_server *srv);
/* Bytes of shared events that some stream has not sent yet (each counted
 * once). */
size_t lds_streams_held(const lds_server *srv);

/* evalx.c: /sdk/evalx/{env}/contexts/{context} (GET) and .../context
 * (REPORT). */
void lds_evalx_get_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                         char *const *seg, const char *query);
void lds_evalx_report_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                            char *const *seg, const char *query);
void lds_evalx_finish(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                      ld_future *f, int flags);

/* status.c: /status. */
void lds_status_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                      char *const *seg, const char *query);
void lds_status_finish(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                       ld_future *f, int flags);

/* events.c: the events SDKs post, forwarded (route arg: which path). */
enum {
    LDS_E_BULK,
    LDS_E_DIAGNOSTIC,
    LDS_E_MOBILE,
    LDS_E_MOBILE_DIAGNOSTIC,
    LDS_E_JS_BULK,
    LDS_E_JS_DIAGNOSTIC
};
void lds_events_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                      char *const *seg, const char *query);

/* server.c: 404 (with CORS headers on a route with LDS_R_CORS). */
void lds_not_found(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                   char *const *seg, const char *query);

#endif /* LDASYNC_SERVE_SERVE_INTERNAL_H */
