/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * lib/net/net-internal.h: the library's outbound network parts, private to
 * it: HTTP requests on the loop (http.c, libcurl's multi interface driven
 * by libevent) and the parser of server-sent events (sse.c) that
 * LaunchDarkly's streams speak.
 */
#ifndef LD_NET_INTERNAL_H
#define LD_NET_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ldasync/fdv2.h>
#include <ldasync/network.h>

struct event_base;

/* ---- Server-sent events (sse.c) -------------------------------------------
 *
 * A parser of the event stream format of the WHATWG HTML standard
 * ("Server-sent events", the event stream interpretation), fed the bytes
 * of a response body as they come, split anywhere:
 *   - a line ends at CR LF, LF or CR (a CR LF split between two feeds is
 *     one line end); one U+FEFF byte order mark at the start is dropped;
 *   - a line starting with ':' is a comment; otherwise the text before the
 *     first ':' is the field name and the rest its value, without one
 *     leading space; a line without ':' is a field of that name with an
 *     empty value;
 *   - "data" appends its value and a LF to the event's data; "event" sets
 *     its type; "id" sets the last event ID (kept across events; ignored
 *     when the value holds a NUL); "retry" of ASCII digits only gives the
 *     reconnection time in ms; other fields are ignored;
 *   - an empty line dispatches the event: none when its data is empty;
 *     otherwise the data without its last LF, the type ("message" when none
 *     was given) and the last event ID; then data and type start over.
 *     An event not ended by an empty line when the body ends is dropped.
 * Bytes are not decoded: the values are the stream's bytes (UTF-8 as the
 * format says; JSON parsing validates them later). Not thread-safe: one
 * parser per stream, used from one thread.
 */

struct ld__sse;

/* One event, valid during the call that receives it. `data` is
 * NUL-terminated (a NUL inside the stream stays: data_len counts it). */
struct ld__sse_event {
    const char *type;
    size_t type_len;
    const char *data;
    size_t data_len;
    const char *id; /* the last event ID, "" when none */
    size_t id_len;
};

/* An event came. @return 0 to go on; anything else stops the feed, which
 * returns it (the parser must then be reset or freed before it is fed
 * again). It must not free the parser. */
typedef int (*ld__sse_event_fn)(void *arg, const struct ld__sse_event *ev);
/* A valid "retry" field: the reconnection time the server asks for, in ms
 * (at most UINT32_MAX: longer values are that). */
typedef void (*ld__sse_retry_fn)(void *arg, uint32_t ms);

/* A parser whose events (data, type and ID together) may hold at most
 * `max_event` bytes (more: ld__sse_feed() says LD_EPARSE). `on_retry` may be
 * NULL. @return NULL without memory or without `on_event`. */
struct ld__sse *ld__sse_new(size_t max_event, ld__sse_event_fn on_event, ld__sse_retry_fn on_retry,
                            void *arg);
/* NULL-safe. Not from inside its callbacks. */
void ld__sse_free(struct ld__sse *p);
/* Parses `n` bytes of the body. @return 0; the callback's value that
 * stopped it; LD_ENOMEM; LD_EPARSE when an event exceeds max_event. After
 * anything but 0, reset the parser before feeding it again. */
int ld__sse_feed(struct ld__sse *p, const char *bytes, size_t n);
/* A new body (a new connection): the event being read and the line are
 * dropped, a byte order mark is looked for again; the last event ID stays
 * (a client sends it back as Last-Event-ID). */
void ld__sse_reset(struct ld__sse *p);
/* Inside on_event only: the event's data (NUL-terminated, `*len` bytes)
 * becomes the caller's, to free with ld__free(); the parser makes a new
 * buffer for the next event. NULL when memory ran out (the data stays the
 * parser's then). */
char *ld__sse_take_data(struct ld__sse *p, size_t *len);
/* The last event ID (NUL-terminated), "" when none was given. */
const char *ld__sse_last_id(const struct ld__sse *p, size_t *len);

/* ---- HTTP on the loop (http.c) --------------------------------------------
 *
 * One struct ld__http per event_base: a libcurl multi handle whose sockets
 * and timer are libevent events of that base (curl_multi_socket_action), so
 * requests run on the loop's thread, between its other events. libcurl's
 * allocations go through the library's allocator hook
 * (curl_global_init_mem(), made by the first ld__http_new() of the process;
 * a program that initialised libcurl before keeps its own functions). Name
 * resolution is libcurl's: Debian builds it with its threaded resolver, so
 * each connection's lookup runs on a short-lived thread of libcurl's (seen
 * for an IP address too), which allocates through the hook as well.
 * Loop thread only. A request's callbacks come from the loop; none comes
 * after ld__http_cancel() of it or ld__http_free(). libcurl runs with
 * CURLOPT_NOSIGNAL: the program must ignore SIGPIPE (as servers do), since
 * OpenSSL writes to a socket the peer closed with write(2).
 */

struct ld__http;
struct ld__http_req;

struct ld__http_options {
    const char *ca_file;     /* PEM file of the CAs to trust; NULL: the system's */
    bool insecure;           /* no verification of the peer's certificate or name */
    const char *proxy;       /* "http://host:port"; NULL: libcurl's environment
                                (http_proxy, https_proxy, no_proxy); "": none */
    long connect_timeout_ms; /* <= 0: 10 s */
    long read_timeout_ms;    /* no byte for this long ends a request; <= 0: never */
    const char *user_agent;  /* NULL: none of libcurl's */
};

struct ld__http_header {
    const char *name, *value; /* NUL-terminated, without the line end */
};

struct ld__http_callbacks {
    /* The response's status and headers (those of the final response: a
     * proxy's answer to CONNECT and 1xx are not passed on), before its
     * first body byte. @return 0 to go on, anything else to stop (then
     * on_done does not come). May be NULL. */
    int (*on_response)(void *arg, long status, const struct ld__http_header *headers, size_t n);
    /* Body bytes as they come (decompressed when the server used gzip).
     * @return 0 to go on, anything else to stop (then on_done does not
     * come). May be NULL. */
    int (*on_body)(void *arg, const char *bytes, size_t n);
    /* The request is over: `code` 0 when the whole body came; LD_ETIMEDOUT
     * (connect or read timeout); LD_EIO (connection, TLS or protocol
     * failure; `message` says which); LD_ENOMEM. The request is freed after
     * the call. Required. */
    void (*on_done)(void *arg, int code, const char *message);
};

/* @return NULL without memory, without `base`, or when libcurl could not
 * be initialised. `options` is copied (NULL: the defaults). */
struct ld__http *ld__http_new(struct event_base *base, const struct ld__http_options *options);
/* Cancels every request (no callback comes) and frees the client. From
 * anywhere on the loop's thread, also inside a request's callback (the
 * rest of that dispatch is then cut short). NULL-safe. */
void ld__http_free(struct ld__http *h);
/* Starts `method` ("GET", "POST", ...) of `url` with the header lines
 * `headers` ("Name: value", NULL-terminated array; copied) and `body`
 * (`body_len` bytes, copied; NULL: none). Accepts gzip and deflate
 * responses. @return the request, NULL without memory or for a NULL
 * argument (no callback then). */
struct ld__http_req *ld__http_request(struct ld__http *h, const char *method, const char *url,
                                      const char *const *headers, const char *body, size_t body_len,
                                      const struct ld__http_callbacks *cb, void *arg);
/* A body lent to a request (ld__http_request_lent()) instead of copied:
 * `bytes` (`len` of them) stay valid and unchanged until the request calls
 * release(owner), which it does once, when libcurl is done with them: after
 * the request is over, canceled, or its client freed (on the loop's
 * thread, outside any request's callback). */
struct ld__http_body {
    const char *bytes;
    size_t len;
    void (*release)(void *owner);
    void *owner;
};

/* ld__http_request() with a body that is lent, not copied (a payload of
 * megabytes is not copied on the loop). @return the request; NULL as
 * ld__http_request() says, or for a NULL `body`, bytes or release: the
 * body is then still the caller's (release is not called). */
struct ld__http_req *ld__http_request_lent(struct ld__http *h, const char *method, const char *url,
                                           const char *const *headers,
                                           const struct ld__http_body *body,
                                           const struct ld__http_callbacks *cb, void *arg);
/* Stops a request: no callback of it comes after this. From anywhere on
 * the loop's thread, its own callbacks included. NULL-safe. */
void ld__http_cancel(struct ld__http_req *r);
/* For tests whose allocator fails in turn but frees with free(3): while
 * set (atomically), libcurl allocates with malloc(3) & co. and never fails
 * (libcurl 7.88 itself crashes, dividing by zero in a hash, when one
 * allocation of a connection fails; check_http.c fails libcurl's
 * allocations on the paths where it copes). */
extern bool ld__http_spare_curl;
/* Initialises libcurl with the allocator hook (once per process; the first
 * ld__http_new() does it too). @return whether libcurl is usable. The
 * test program, which holds a copy of this file beside the library's, calls
 * it first: libcurl's hooks are then the copy's, whose
 * ld__http_spare_curl the tests set. */
bool ld__http_global_init(void);
/* Requests started and not over yet (for tests). */
size_t ld__http_active(const struct ld__http *h);

/* ---- Reconnection delays (backoff.c) ---------------------------------------
 *
 * The delays between attempts to reconnect a stream, as LaunchDarkly's SDKs
 * compute them: attempt n (from 0 since the last reset) waits
 * base_n = min(initial * 2^n, max), less a random part of up to half of it
 * (so between base_n / 2 and base_n); a connection that stayed good for
 * `reset_ms` makes the next attempt the first again. However many attempts
 * there are, nothing overflows: the doubling stops at `max`. Times are in
 * milliseconds on the caller's clock (the tests give their own).
 */
struct ld__backoff {
    int64_t initial_ms, max_ms, reset_ms;
    int64_t good_since_ms; /* -1: not connected */
    uint32_t attempts;     /* since the last reset (stops growing at max) */
    uint64_t rng;          /* xorshift state, never 0 */
};

/* `initial_ms` <= 0: 1000; `max_ms` < initial: initial; `reset_ms` <= 0:
 * 60000. `seed`: the random part's (any value). */
void ld__backoff_init(struct ld__backoff *b, int64_t initial_ms, int64_t max_ms, int64_t reset_ms,
                      uint64_t seed);
/* The connection is good from `now_ms` on (its response came); later calls
 * before the next failure keep the first time. */
void ld__backoff_good(struct ld__backoff *b, int64_t now_ms);
/* The connection failed at `now_ms`: @return how long to wait before the
 * next attempt, which it counts. */
int64_t ld__backoff_next(struct ld__backoff *b, int64_t now_ms);

/* ---- The data sources' configuration (net_config.c) ------------------------
 * ld_net_config of network.h, read by the sources made from it.
 */
struct ld_net_config {
    char *sdk_key, *stream_uri, *base_uri, *events_uri, *filter;
    char *app_id, *app_version, *wrapper_name, *wrapper_version;
    char *ca_file, *proxy;
    bool proxy_set; /* proxy given (NULL: the environment's) */
    bool verify;
    int64_t connect_ms, read_ms, stream_read_ms, reconnect_ms, poll_ms;
    int64_t reconnect_max_ms; /* 30000; tests make it shorter */
    char instance_id[37];
};

/* A random (version 4) UUID, lower-case hex with dashes, NUL-terminated. */
void ld__uuid4(char out[37]);

/* For tests: a poll interval below the 30 s minimum. */
void ld__net_config_poll_interval_unclamped(ld_net_config *cfg, int64_t ms);
/* `root` + `path` + "?filter=KEY" when a filter is set; NULL without
 * memory. Free with ld__free(). */
char *ld__net_url(const ld_net_config *c, const char *root, const char *path);
/* The header lines every request to LaunchDarkly carries, then `extra`
 * (NULL-terminated; may be NULL), as one NULL-terminated array in one
 * allocation (free with ld__free()); NULL without memory. */
char **ld__net_headers(const ld_net_config *c, const char *const *extra);
/* The HTTP options of `c` (borrowing its strings): a stream's read timeout
 * when `stream`, else a poll's. */
void ld__net_http_options(const ld_net_config *c, bool stream, struct ld__http_options *o);

#endif
