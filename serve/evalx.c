/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/evalx.c: client-side evaluation, as LaunchDarkly's service and
 * ld-relay answer it: GET /sdk/evalx/{env}/contexts/{base64url context}
 * and REPORT /sdk/evalx/{env}/context (the context as the JSON body), both
 * with ?withReasons=true, both decoded by evaluate(), and answered with
 * CORS headers.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/util.h>
#include <openssl/evp.h>

#include "serve-internal.h"

/* evaluate()'s `arg`: the answer's flags, and this bit when reasons are
 * asked for. */
#define WITH_REASONS 0x100

/* ------------------------------------------------------------------------- */
/* The answer: LaunchDarkly's client-side evaluation result (as ld-relay's
 * evalx and LaunchDarkly's service answer it), written straight from the
 * evaluator's all-flags results (ld_evaluator_flags_state()):
 * {"<flag>": {"value": v, "variation": n | null, "version": flag version,
 * "trackEvents": true (when), "trackReason": true (when), "reason": {...}
 * (when asked for or tracked), "prerequisites": [keys] (when the flag's
 * evaluation entered any), "debugEventsUntilDate": ms (when)}, ...}, the
 * text jansson writes for that tree (JSON_COMPACT). */

/* A body being written into `out`, by way of `buf`: it is made of many
 * small pieces. `failed` once a piece could not be written. */
struct body {
    struct evbuffer *out;
    bool failed;
    size_t n;
    char buf[4096];
};

static void put_flush(struct body *b)
{
    if (b->n && evbuffer_add(b->out, b->buf, b->n) != 0)
        b->failed = true;
    b->n = 0;
}

static void put(struct body *b, const char *s, size_t len)
{
    if (len > sizeof b->buf - b->n) {
        put_flush(b);
        if (len > sizeof b->buf) {
            b->failed |= evbuffer_add(b->out, s, len) != 0;
            return;
        }
    }
    memcpy(b->buf + b->n, s, len);
    b->n += len;
}

/* Writes the string literal `lit`. */
#define PUT(b, lit) put(b, lit, sizeof lit - 1)

static void put_int(struct body *b, int64_t v)
{
    char text[24];
    put(b, text, (size_t)snprintf(text, sizeof text, "%" PRId64, v));
}

/* jansson's dump callback, `arg` the body. */
static int put_dumped(const char *s, size_t len, void *arg)
{
    put(arg, s, len);
    return 0;
}

/* Writes `j` as jansson does. */
static void put_by_jansson(struct body *b, const json_t *j)
{
    if (json_dump_callback(j, put_dumped, b, JSON_COMPACT | JSON_ENCODE_ANY) != 0)
        b->failed = true;
}

/* True when jansson writes `s` as it is between quotes: printable ASCII
 * but '"' and '\\'. Other strings go through jansson, which escapes them
 * and refuses those that are not UTF-8. */
static bool plain(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
            return false;
    }
    return true;
}

static void put_quoted(struct body *b, const char *s, size_t len)
{
    PUT(b, "\"");
    put(b, s, len);
    PUT(b, "\"");
}

/* Writes `len` bytes at `s` as a JSON string. */
static void put_string(struct body *b, const char *s, size_t len)
{
    if (plain(s, len)) {
        put_quoted(b, s, len);
        return;
    }
    json_t *j = json_stringn_nocheck(s, len);
    if (j)
        put_by_jansson(b, j);
    else
        b->failed = true;
    json_decref(j);
}

/* Writes a constant name (NUL-terminated, NULL: memory ran out). */
static void put_name(struct body *b, const char *s)
{
    if (s)
        put_string(b, s, strlen(s));
    else
        b->failed = true;
}

/* Writes `j` (NULL: JSON null) as jansson does: the usual values here,
 * the others (objects, arrays, reals, strings to escape) by jansson. */
static void put_json(struct body *b, const json_t *j)
{
    switch (j ? json_typeof(j) : JSON_NULL) {
    case JSON_NULL:
        PUT(b, "null");
        return;
    case JSON_TRUE:
        PUT(b, "true");
        return;
    case JSON_FALSE:
        PUT(b, "false");
        return;
    case JSON_INTEGER:
        put_int(b, json_integer_value(j));
        return;
    case JSON_STRING:
        if (plain(json_string_value(j), json_string_length(j))) {
            put_quoted(b, json_string_value(j), json_string_length(j));
            return;
        }
        break;
    default:
        break;
    }
    put_by_jansson(b, j);
}

/* Writes the reason of `d`: the text of ld_detail_reason_to_json(d). */
static void put_reason(struct body *b, const ld_detail *d)
{
    enum ld_reason_kind kind = ld_detail_reason_kind(d);
    PUT(b, "{\"kind\":");
    put_name(b, ld_reason_kind_name(kind));
    if (kind == LD_REASON_RULE_MATCH) {
        PUT(b, ",\"ruleIndex\":");
        put_int(b, ld_detail_rule_index(d));
        if (ld_detail_rule_id(d)) {
            PUT(b, ",\"ruleId\":");
            put_name(b, ld_detail_rule_id(d));
        }
    } else if (kind == LD_REASON_PREREQUISITE_FAILED) {
        PUT(b, ",\"prerequisiteKey\":");
        put_name(b, ld_detail_prerequisite_key(d));
    } else if (kind == LD_REASON_ERROR) {
        PUT(b, ",\"errorKind\":");
        put_name(b, ld_eval_error_name(ld_detail_error(d)));
    }
    if (ld_detail_in_experiment(d))
        PUT(b, ",\"inExperiment\":true");
    int big = ld_detail_big_segments_status(d);
    if (big >= 0) {
        PUT(b, ",\"bigSegmentsStatus\":");
        put_name(b, ld_big_segments_status_name((enum ld_big_segments_status)big));
    }
    PUT(b, "}");
}

static void put_prerequisites(struct body *b, const ld_flags_state *s, size_t i)
{
    size_t n = ld_flags_state_prerequisite_count(s, i);
    for (size_t k = 0; k < n; k++) {
        if (k == 0)
            PUT(b, ",\"prerequisites\":[");
        else
            PUT(b, ",");
        size_t len;
        const char *key = ld_flags_state_prerequisite(s, i, k, &len);
        put_string(b, key, len);
    }
    if (n > 0)
        PUT(b, "]");
}

/* Writes flag `i` of `s`: its key, and its object. */
static void put_flag(struct body *b, const ld_flags_state *s, size_t i)
{
    size_t len;
    const char *key = ld_flags_state_key(s, i, &len);
    const ld_detail *d = ld_flags_state_detail(s, i);
    unsigned fields = ld_flags_state_fields(s, i);
    put_string(b, key, len);
    PUT(b, ":{\"value\":");
    put_json(b, ld_detail_value(d));
    PUT(b, ",\"variation\":");
    if (ld_detail_variation_index(d) >= 0)
        put_int(b, ld_detail_variation_index(d));
    else
        PUT(b, "null");
    if (fields & LD_FLAG_STATE_VERSION) {
        PUT(b, ",\"version\":");
        put_int(b, ld_flags_state_version(s, i));
    }
    if (fields & LD_FLAG_STATE_TRACK_EVENTS)
        PUT(b, ",\"trackEvents\":true");
    if (fields & LD_FLAG_STATE_TRACK_REASON)
        PUT(b, ",\"trackReason\":true");
    if (fields & LD_FLAG_STATE_REASON) {
        PUT(b, ",\"reason\":");
        put_reason(b, d);
    }
    put_prerequisites(b, s, i);
    if (fields & LD_FLAG_STATE_DEBUG_EVENTS_UNTIL) {
        PUT(b, ",\"debugEventsUntilDate\":");
        put_int(b, ld_flags_state_debug_events_until(s, i));
    }
    PUT(b, "}");
}

/* Writes the evalx body of `s` into `out` from flag *at on, until
 * `until` (ns; looked at every few dozen flags), `most` flags at most.
 * @return 1 when it wrote the end, 0 when the slice was over first (*at:
 * where to go on), -1 when memory ran out (`out` then holds a part of it). */
static int put_body(struct evbuffer *out, const ld_flags_state *s, size_t *at, int64_t until,
                    size_t most)
{
    struct body b;
    b.out = out;
    b.failed = false;
    b.n = 0;
    size_t n = ld_flags_state_count(s);
    if (*at == 0)
        PUT(&b, "{");
    size_t i = *at;
    for (size_t done = 0; i < n && !b.failed; i++, done++) {
        if (done > 0 && (done >= most || (done % 64 == 0 && lds_now_ns() >= until)))
            break;
        if (i > 0)
            PUT(&b, ",");
        put_flag(&b, s, i);
    }
    *at = i;
    if (i == n)
        PUT(&b, "}");
    put_flush(&b);
    return b.failed ? -1 : i == n ? 1 : 0;
}

/* ------------------------------------------------------------------------- */
/* Bodies written in slices                                                  */

/* A body of many flags takes milliseconds to write (at 10,000 flags, half
 * a megabyte): what one slice did not write is written in later passes of
 * the loop, a slice each, one body after the other. Its request waits for
 * `done` (lds_wait_for()), which a client that goes away cancels (the
 * writer then stops at its next slice), and which is fulfilled with the
 * writer once the body is whole. */
struct lds_evalx_writer {
    struct lds_evalx_writer *next;
    ld_future *state; /* the flags state's, referenced */
    ld_future *done;  /* referenced while queued */
    struct evbuffer *body;
    size_t at;
};

static void writer_free(void *p)
{
    struct lds_evalx_writer *w = p;
    if (!w)
        return;
    ld_future_unref(w->state);
    ld_future_unref(w->done);
    if (w->body)
        evbuffer_free(w->body);
    lds_free(w);
}

static struct lds_evalx_writer *writer_pop(lds_server *srv)
{
    struct lds_evalx_writer *w = srv->wq_head;
    srv->wq_head = w->next;
    if (!srv->wq_head)
        srv->wq_tail = NULL;
    w->next = NULL;
    srv->st.evalx_writing--;
    return w;
}

/* Ends writer `w` (popped): its request gets the body, or a 500. */
static void writer_end(struct lds_evalx_writer *w, int rc)
{
    ld_future *done = w->done;
    w->done = NULL;
    if (rc == 1) {
        ld_future_fulfill_ptr(done, w, writer_free);
    } else {
        ld_future_reject(done, LD_ENOMEM, "out of memory");
        writer_free(w);
    }
    ld_future_unref(done);
}

static void writers_run(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    lds_server *srv = arg;
    int64_t until = lds_now_ns() + LDS_SLICE_NS;
    while (srv->wq_head) {
        struct lds_evalx_writer *w = srv->wq_head;
        if (!ld_future_is_pending(w->done)) { /* its client went away */
            writer_free(writer_pop(srv));
            continue;
        }
        int rc = put_body(w->body, ld_future_ptr(w->state), &w->at, until, srv->slice_flags);
        if (rc == 0)
            break;
        writer_end(writer_pop(srv), rc);
        if (lds_now_ns() >= until)
            break;
    }
    if (srv->wq_head && event_add(srv->wq_ev, &(struct timeval){0, 0}) != 0)
        while (srv->wq_head)
            writer_end(writer_pop(srv), -1);
}

void lds_evalx_writers_free(lds_server *srv)
{
    while (srv->wq_head)
        writer_free(writer_pop(srv));
    if (srv->wq_ev)
        event_free(srv->wq_ev);
    srv->wq_ev = NULL;
}

/* The body of a writer's request is whole. */
static void writer_finish(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                          ld_future *f, int flags)
{
    (void)rt;
    if (ld_future_is_rejected(f)) {
        lds_send_rejected(srv, req, f, flags);
        return;
    }
    struct lds_evalx_writer *w = ld_future_ptr(f);
    lds_send_buffer(srv, req, 200, w->body, flags);
}

static const struct lds_route writer_route = {.finish = writer_finish};

/* Queues the rest of `state`'s body, of which `part` (drained) holds the
 * flags before `at`, for `req` to wait for. @return 0, or -1 when memory
 * ran out. */
static int writer_queue(lds_server *srv, struct evhttp_request *req, ld_future *state,
                        struct evbuffer *part, size_t at, int flags)
{
    struct lds_evalx_writer *w = lds_calloc(1, sizeof *w);
    if (!w)
        return -1;
    w->body = evbuffer_new();
    w->done = ld_future_new(srv->base);
    if (!srv->wq_ev)
        srv->wq_ev = evtimer_new(srv->base, writers_run, srv);
    if (!w->body || !w->done || !srv->wq_ev || evbuffer_add_buffer(w->body, part) != 0 ||
        (!srv->wq_head && event_add(srv->wq_ev, &(struct timeval){0, 0}) != 0)) {
        writer_free(w);
        return -1;
    }
    w->state = ld_future_ref(state);
    w->at = at;
    if (srv->wq_tail)
        srv->wq_tail->next = w;
    else
        srv->wq_head = w;
    srv->wq_tail = w;
    srv->st.evalx_writing++;
    lds_wait_for(srv, req, ld_future_ref(w->done), &writer_route, flags);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The request                                                               */

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

/* Answers a request whose context was not made: `j` is the parsed JSON
 * (NULL when json_loadb() failed with `jerr`), `why` what
 * ld_context_from_json() said. Memory running out is 500, not the client's
 * mistake. */
static void send_context_error(lds_server *srv, struct evhttp_request *req, const json_t *j,
                               const json_error_t *jerr, const char *why, int flags)
{
    if (!j ? json_error_code(jerr) == json_error_out_of_memory
           : why && strcmp(why, "out of memory") == 0)
        lds_send_error(srv, req, 500, "out of memory", flags);
    else if (!j)
        lds_send_error(srv, req, 400, "the context is not valid JSON", flags);
    else
        lds_send_error(srv, req, 400, why ? why : "invalid context", flags);
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

static int reasons_asked(const char *query)
{
    return query_flag(query, "withReasons") ? WITH_REASONS : 0;
}

/* Evaluates for the context whose JSON is `text`: a REPORT's body, or a
 * GET's path segment decoded. */
static void evaluate(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                     const char *text, size_t len, int arg)
{
    int flags = arg & ~WITH_REASONS;
    json_error_t jerr = {0}; /* jansson leaves it as it is when its first allocation fails */
    const char *why = NULL;
    json_t *j = ld_json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    ld_context *ctx = j ? ld_context_from_json(j, &why) : NULL;
    if (!ctx)
        send_context_error(srv, req, j, &jerr, why, flags);
    else
        lds_wait_for(
            srv, req,
            ld_evaluator_flags_state(srv->ev, ctx,
                                     LD_ALL_FLAGS_CLIENT_SIDE_ONLY |
                                         (arg & WITH_REASONS ? LD_ALL_FLAGS_WITH_REASONS : 0)),
            rt, flags);
    ld_context_unref(ctx);
    json_decref(j);
}

void lds_evalx_get_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                         char *const *seg, const char *query)
{
    size_t len;
    char *text = b64_decode(seg[4], strlen(seg[4]), &len);
    if (!text)
        lds_send_error(srv, req, len ? 500 : 400,
                       len ? "out of memory" : "the context is not valid base64url", LDS_F_CORS);
    else
        evaluate(srv, req, rt, text, len, LDS_F_CORS | reasons_asked(query));
    lds_free(text);
}

/* A REPORT's body came (lds_read_body()). */
static void report_body(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                        const char *text, size_t len, int arg)
{
    if (srv->closing)
        lds_send_error(srv, req, 503, "server closing", LDS_F_CORS | LDS_F_CLOSE);
    else
        evaluate(srv, req, rt, text, len, arg);
}

void lds_evalx_report_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                            char *const *seg, const char *query)
{
    (void)seg;
    const char *ct = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    if (ct && !media_type_is(ct, "application/json")) {
        lds_send_error(srv, req, 415, "Content-Type must be application/json",
                       LDS_F_CORS | LDS_F_CLOSE);
        return;
    }
    /* the answer keeps the connection once the body was taken whole */
    lds_read_body(srv, req, rt, LDS_F_CORS | LDS_F_CLOSE, report_body,
                  LDS_F_CORS | reasons_asked(query));
}

void lds_evalx_finish(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                      ld_future *f, int flags)
{
    (void)rt;
    if (ld_future_is_rejected(f)) {
        lds_send_rejected(srv, req, f, flags);
        return;
    }
    /* the state shares the store's JSON: read here, on the loop's thread,
     * where its future is released too */
    const ld_flags_state *state = ld_future_ptr(f);
    if (!ld_flags_state_valid(state)) {
        lds_send_error(srv, req, 503, "service not initialized", LDS_F_CORS);
        return;
    }
    struct evbuffer *out = srv->scratch;
    evbuffer_drain(out, evbuffer_get_length(out));
    size_t at = 0;
    /* behind the bodies being written, or a first slice now */
    int rc =
        srv->wq_head ? 0 : put_body(out, state, &at, lds_now_ns() + LDS_SLICE_NS, srv->slice_flags);
    if (rc == 0)
        rc = writer_queue(srv, req, f, out, at, LDS_F_CORS) == 0 ? 2 : -1;
    if (rc == 1) {
        lds_send_buffer(srv, req, 200, out, LDS_F_CORS);
    } else if (rc < 0) {
        /* never a cut body */
        evbuffer_drain(out, evbuffer_get_length(out));
        lds_send_error(srv, req, 500, "out of memory", LDS_F_CORS);
    }
}
