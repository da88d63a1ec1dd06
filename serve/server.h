/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/server.h: the HTTP server of ldasync-serve (internal, not installed).
 *
 * An evhttp server that serves the data of an ld_store over LaunchDarkly's
 * protocols, so that LaunchDarkly SDKs can use it as their data source, and
 * evaluates flags for client-side SDKs with an ld_evaluator:
 *
 *   GET /sdk/latest-all              {"flags": {..}, "segments": {..}}     (SDK key)
 *   GET /sdk/latest-flags            {key: flag, ...}                      (SDK key)
 *   GET /sdk/latest-flags/{key}      the flag, 404 when absent             (SDK key)
 *   GET /sdk/latest-segments         {key: segment, ...}                   (SDK key)
 *   GET /sdk/latest-segments/{key}   the segment, 404 when absent          (SDK key)
 *   GET /all                         Server-Sent Events: put, patch, delete (SDK key)
 *   GET /sdk/evalx/{env}/contexts/{base64url context}   client-side evaluation
 *   REPORT /sdk/evalx/{env}/context  the same, the context as the JSON body
 *   OPTIONS on the evalx paths       CORS preflight
 *   ({env}: any, or one of the client_side_ids option's: else 404)
 *   GET /status                      data-source status, counts, uptime (no key)
 *   POST /bulk, /diagnostic          events of server-side SDKs (SDK key), and
 *   POST /mobile, /mobile/events, /mobile/events/bulk, /mobile/events/diagnostic,
 *        /events/bulk/{env}, /events/diagnostic/{env}   those of mobile and
 *                                    JavaScript SDKs: forwarded upstream by the
 *                                    options' event forwarder (202; 503 when it
 *                                    is full; 404 without one)
 *
 * Polling answers carry an ETag: a 64-bit FNV-1a hash of the body, so it is
 * right whatever the store does; the serialized bodies of the three
 * collections are kept while the store answers `all` with the same snapshot
 * objects (the memory store does while nothing changed), so an unchanged
 * collection is neither serialized nor hashed again. If-None-Match with that
 * ETag (or "*") answers 304.
 *
 * The server does not know the data system: the program tells it of every
 * change applied to the store with lds_server_changed(), which streams send
 * as `patch` and `delete` events, and hands it a status function for
 * /status.
 *
 * Everything runs on the loop of `base`; nothing blocks: each request is a
 * chain of store or evaluator futures.
 */
#ifndef LDASYNC_SERVE_SERVER_H
#define LDASYNC_SERVE_SERVER_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <ldasync/ldasync.h>

struct event_base;

/* Log levels: a message is logged when its level is <= the option's. */
enum lds_log_level { LDS_LOG_ERROR = 0, LDS_LOG_WARN = 1, LDS_LOG_INFO = 2, LDS_LOG_DEBUG = 3 };

/* "error", "warn", "info", "debug"; NULL for another value. */
const char *lds_log_level_name(int level);
/* The level named `name` (as above), or -1. */
int lds_log_level_parse(const char *name);

/* Receives one log line (no newline), of `level`. */
typedef void (*lds_log_fn)(int level, const char *line, void *arg);

/* Formats a line (at most 1023 bytes) and hands it to `fn` when `fn` is set
 * and `level` <= `max_level`. */
LD_PRINTF(5, 0)
void lds_log_v(lds_log_fn fn, void *arg, int max_level, int level, const char *fmt, va_list ap);

/* Fills *out with the data-source status (as ld_data_system_status());
 * returns 0, or a negative code when there is none. */
typedef int (*lds_status_fn)(ld_data_source_status *out, void *arg);

/* Options; zero (or NULL) means the default given. Strings are copied. */
struct lds_server_options {
    const char *bind_address; /* "127.0.0.1" */
    int port;                 /* 0: an ephemeral port (lds_server_port() tells it) */
    const char *sdk_key;      /* NULL or "": server-side endpoints need no key */
    int max_connections;      /* 10240; connections beyond are closed (503 first for a
                                 request read with the connection) */
    size_t max_uri;           /* 8192 bytes: longer request targets get 414 */
    size_t max_headers;       /* 16384 bytes of header lines: beyond, 431 */
    size_t max_body;          /* 65536 bytes: larger bodies get 413 */
    size_t max_stream_buffer; /* 1 MiB: a stream with more than this unsent beyond
                                 its put (which may be larger) when a change
                                 comes is dropped; a change is sent whole to
                                 the others, whatever its size */
    int heartbeat_ms;         /* 60000: a ":" comment line on every stream */
    int timeout_s;            /* 60: a whole request (within it of the connection's
                                 start or of the previous answer: else the
                                 connection is closed), writing a response */
    int log_level;            /* LDS_LOG_INFO unless log_level_set */
    int log_level_set;        /* nonzero: log_level is meant (ERROR is 0) */
    lds_log_fn log;           /* NULL: no logging */
    void *log_arg;
    /* the client-side IDs whose evalx requests are answered (the {env} of
     * /sdk/evalx/{env}/...: 404 for any other); none (NULL or 0): any
     * environment is answered, as one */
    const char *const *client_side_ids;
    size_t n_client_side_ids;
    lds_status_fn status; /* NULL: /status says the state is unknown */
    void *status_arg;
    int loop_probe_ms;          /* 0: no probe; else the loop probe's period (lds_server_probe()) */
    ld_event_forwarder *events; /* borrowed (free the server first); NULL: the
                                   event paths answer 404 */
    size_t max_event_body;      /* 4 MiB: a larger body posted to an event path gets 413 */
    ld_store *persistent;       /* borrowed: a shared store (Redis) whose availability
                                   /status reports; NULL: none */
};

typedef struct lds_server lds_server;

/* Starts a server on `base` that reads `store` and evaluates with
 * `evaluator` (both borrowed: free the server first). Binds and listens
 * within the call. @return the server, or NULL (with a line logged) if an
 * argument is NULL, the address cannot be bound or memory ran out. */
lds_server *lds_server_new(struct event_base *base, ld_store *store, ld_evaluator *evaluator,
                           const struct lds_server_options *options);

/* The bound port (in host order). */
int lds_server_port(const lds_server *srv);

/* A change applied to the store: `item` is the item (borrowed) for a put,
 * NULL for a delete at `version`. Streams get a `patch` or `delete` event,
 * sent with the other changes of this pass of the loop at the next pass
 * (one piece for all streams); a stream still waiting for its `put` gets
 * it after the put. */
void lds_server_changed(lds_server *srv, const ld_kind *kind, const char *key, int64_t version,
                        const json_t *item);

/* Statistics, for tests and /status. */
struct lds_server_stats {
    uint64_t requests;           /* requests answered (streams included) */
    uint64_t connections;        /* open connections */
    uint64_t streams;            /* open streams */
    uint64_t streams_dropped;    /* slow readers dropped */
    uint64_t stream_event_bytes; /* events shared by the streams that some stream has
                                    not sent yet, each counted once (puts aside) */
    uint64_t pending;            /* requests waiting for their futures */
    uint64_t serializations;     /* collection bodies serialized (cache misses) */
    uint64_t chunk_lines;        /* chunk-size lines of chunked REPORT bodies read */
    uint64_t evalx_writing;      /* evalx bodies being written in slices */
};
void lds_server_stats(const lds_server *srv, struct lds_server_stats *out);

/* Makes ahead, in slices of the loop, what the first requests after a
 * load would otherwise wait for: the body of /sdk/latest-all (every
 * item's text, of which the other collections and the streams' put are
 * made) and every flag compiled by the evaluator. Requests that come
 * meanwhile join that work. Call it once the store has data (ldasync-serve
 * does when its files are loaded); again later to start over; closing or
 * freeing the server stops it. NULL-safe. */
void lds_server_warm(lds_server *srv);

/* The loop probe (loop_probe_ms): a timer due every loop_probe_ms tells
 * how late it ran and how much CPU time the loop's thread spent since it
 * last ran, each counted in a histogram: the buckets end at
 * lds_probe_bounds_ms (below 1 ms, below 2, ...), the last has the rest.
 * Counted since the server started, until it is closed (the timer then
 * stops); /status reports them as "loop". */
#define LDS_PROBE_BUCKETS 11
extern const int lds_probe_bounds_ms[LDS_PROBE_BUCKETS - 1];
struct lds_probe_stats {
    uint64_t ticks;
    uint64_t late[LDS_PROBE_BUCKETS]; /* how late the timer ran */
    uint64_t cpu[LDS_PROBE_BUCKETS];  /* CPU time of the loop's thread between two runs */
    int64_t late_max_ns, cpu_max_ns;
};
/* The probe's counts, or NULL when there is no probe. */
const struct lds_probe_stats *lds_server_probe(const lds_server *srv);

/* Closes the server: stops listening, ends every stream, and answers the
 * requests still waiting for their futures with 503 (their futures
 * cancelled). Later requests on open connections get 503. @return a new
 * reference, fulfilled from the loop once that is done and what was
 * written to the connections has been sent (waiting at most timeout_s, and
 * at most 10 s, for clients that do not read: then a warning says how much
 * was left); NULL if `srv` is NULL. Closing twice fulfils again. */
ld_future *lds_server_close(lds_server *srv);

/* Frees the server: closes every connection (also one whose future is
 * pending: that future is cancelled and its result ignored). Safe right
 * after lds_server_close(), with its future pending. NULL-safe. Let the
 * loop run afterwards (future.h's lifetime rule) before freeing the base. */
void lds_server_free(lds_server *srv);

#endif /* LDASYNC_SERVE_SERVER_H */
