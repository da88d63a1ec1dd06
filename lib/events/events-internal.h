/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the events layer's internal header: contexts as analytics
 * events show them (context_format.c), the summary of evaluations
 * (summarizer.c) and the delivery of payloads (sender.c). Never installed.
 */
#ifndef LDASYNC_EVENTS_INTERNAL_H
#define LDASYNC_EVENTS_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ldasync/context.h>
#include <ldasync/eval.h>
#include <ldasync/future.h>
#include <ldasync/network.h>

/* ---- Contexts in events (context_format.c) --------------------------------
 *
 * A context in an event is its JSON form with private attributes redacted,
 * as LaunchDarkly's SDKs write it:
 *   {"kind": K, "key": ..., "anonymous": true (only when anonymous),
 *    "name" and custom attributes not redacted...,
 *    "_meta": {"redactedAttributes": [...]} (only if something was)}
 * and for a multi-kind context {"kind": "multi", "<kind>": {the same
 * without "kind"}, ...}, kinds in byte order. "_meta.privateAttributes" is
 * never written. "key", "kind" and "anonymous" are never redacted.
 *
 * Private are: every attribute when all attributes are private, or when the
 * context (the individual context) is anonymous and the event redacts
 * anonymous contexts (feature, custom and migration events); else those
 * that an attribute reference of the configuration or of the individual
 * context's own private attributes designates. A reference is a plain
 * attribute name ("email": that attribute, literally) or a path
 * ("/address/street": property "street" of the object attribute "address";
 * in a component "~1" is '/' and "~0" is '~'); invalid references ("", "/",
 * "//x", "/a/", '~' followed by anything but '0' or '1') designate nothing.
 * A path reaches into JSON objects only, never arrays.
 *
 * "redactedAttributes" lists what was left out, in the order the
 * attributes are written ("name" first, then the custom attributes in the
 * order they were set, each object's properties in their order, depth
 * first): for an attribute left out because all are private, its name as a
 * literal reference (as Go's SDK: "/ssn" is written "/~1ssn", other names
 * unchanged); for one a reference designates, that reference as written
 * (the configuration's first, then the context's own). Each property left
 * out is listed once, even when several references designate it.
 */

/* The configuration of the formatting: immutable once made, so any number
 * of threads may use one at once. */
struct ld__ctx_format;

/* A formatting configuration: all attributes private or not, and the `n`
 * global private attribute references `refs` (copied; invalid ones are
 * kept but designate nothing, NULL entries are skipped). `refs` may be
 * NULL when `n` is 0. NULL when memory ran out. */
struct ld__ctx_format *ld__ctx_format_new(bool all_private, const char *const *refs, size_t n);

/* Frees it (NULL-safe). */
void ld__ctx_format_free(struct ld__ctx_format *f);

/* The JSON of `ctx` (borrowed) in an event, redacted as `f` says;
 * `redact_anonymous` redacts every attribute of an anonymous individual
 * context (the feature, custom and migration events; not the identify,
 * index and debug events). The result shares nothing with `ctx`. NULL when
 * memory ran out or `f` or `ctx` is NULL. Any thread. */
json_t *ld__ctx_format(const struct ld__ctx_format *f, const ld_context *ctx,
                       bool redact_anonymous);

/* ---- The summary of evaluations (summarizer.c) -----------------------------
 *
 * The summary event LaunchDarkly's SDKs send with each flush:
 *   {"kind": "summary", "startDate": ms, "endDate": ms,
 *    "features": {"<flag key>": {"default": the first default seen,
 *      "contextKinds": [the kinds of the contexts evaluated, each once, in
 *                       byte (strcmp) order],
 *      "counters": [{"value": the first value seen, "count": n,
 *                    "variation": i (when known),
 *                    "version": v | "unknown": true}, ...]}, ...}}
 * one counter per (variation, flag version) pair, flags and counters in
 * the order they were first recorded.
 *
 * Recording takes constant time for a context of few kinds (it walks the
 * context's kinds and the flag's, both sorted, once) and allocates nothing
 * once the flag, its (variation, version) pair and the context's kinds have
 * been seen (also across flushes: a flush keeps what was seen, with counts
 * at zero, and drops the flags, pairs and kinds not recorded since the flush before). Values are
 * kept by reference, taken when a counter or a flag's default is first
 * recorded in a flush interval. Not thread-safe: one thread (the loop's)
 * at a time.
 */

/* A flag version or variation index that is not known. */
#define LD__NO_VERSION (-1)
#define LD__NO_VARIATION (-1)

struct ld__summarizer;

/* An empty summarizer, or NULL when memory ran out. */
struct ld__summarizer *ld__summarizer_new(void);

/* Frees it and releases the values it holds (NULL-safe). */
void ld__summarizer_free(struct ld__summarizer *s);

/* One evaluation, as LaunchDarkly's SDKs count it: of the flag `key`
 * (`len` bytes), at `version` (LD__NO_VERSION for a flag not found: its
 * counter says "unknown"), giving `variation` (LD__NO_VARIATION when the
 * default was served) and `value` (borrowed; NULL is JSON null), the
 * caller's default being `default_value` (borrowed; NULL is JSON null), for
 * `ctx` (borrowed: its kinds are counted; NULL counts none), at `now_ms`
 * (milliseconds since the epoch, for startDate and endDate).
 * Returns 0, LD_EINVAL (NULL `s` or `key`), or LD_ENOMEM (only on the
 * first sight of a flag, pair or kind; then nothing was counted). */
int ld__summarizer_record(struct ld__summarizer *s, const char *key, size_t len, int64_t version,
                          int variation, json_t *value, json_t *default_value,
                          const ld_context *ctx, int64_t now_ms);

/* The flags, counters and kinds it holds (for tests: what it keeps is
 * bounded by what the last interval recorded). */
size_t ld__summarizer_held(const struct ld__summarizer *s);

/* True if nothing was recorded since the last flush (or NULL `s`). */
bool ld__summarizer_empty(const struct ld__summarizer *s);

/* What a flush sends of the summary: the summarizer's table of the
 * interval that ended, handed over whole (nothing is copied on the loop);
 * written as text by any thread, then reset for another interval
 * (ld__summary_reset(), any thread) and given back to the summarizer
 * (ld__summarizer_reuse(), loop), which records the interval after the
 * next into it. */
struct ld__summary;

/* The summary of what was recorded since the last flush (*out; NULL when
 * nothing was), and a new interval begins in a second table: the one given
 * back last, or a new one. Constant time on the loop. Returns 0;
 * LD_EINVAL; LD_ENOMEM (only when no table was given back), with nothing
 * changed. */
int ld__summarizer_take(struct ld__summarizer *s, struct ld__summary **out);

/* Makes `sum` ready for another interval: counts at zero, what its
 * interval did not record dropped (what it did stays, so that recording it
 * again allocates nothing). It counts no reference: the values it held are
 * released on the loop, by ld__summarizer_reuse() or ld__summary_free()
 * (the loop counts references to them with jansson's functions, which are
 * not safe against another thread's count). Without memory for their list
 * it does nothing (the summary is then freed when given back). Any one
 * thread, once nothing reads it; NULL-safe; once only (a second call does
 * nothing). */
void ld__summary_reset(struct ld__summary *sum);

/* Releases the values the reset of `sum` took out, and gives `sum` back to
 * `s` for its next interval when it was reset and `s` has none; otherwise
 * (NULL `s`, not reset, one already given back) frees it. NULL-safe. Loop
 * thread. */
void ld__summarizer_reuse(struct ld__summarizer *s, struct ld__summary *sum);

/* Writes the summary event's JSON text (compact) through put(text, n, arg)
 * (0: go on; else it stops), as ld__summarizer_flush() documents it. Reads
 * only: any thread. Returns 0; LD_EINVAL; LD_ENOMEM when put failed or a
 * string could not be made. */
typedef int (*ld__summary_put_fn)(const char *text, size_t n, void *arg);
int ld__summary_dump(const struct ld__summary *sum, ld__summary_put_fn put, void *arg);

/* Makes the summary's endDate `end_ms` when that is later (a recorder that
 * passes the interval's first time to every record ends it at the flush).
 * NULL-safe. */
void ld__summary_end_at(struct ld__summary *sum, int64_t end_ms);

/* Frees it and releases its values (NULL-safe). Loop thread. */
void ld__summary_free(struct ld__summary *sum);

/* The summary event of what was recorded since the last flush, as JSON
 * (ld__summary_dump()'s text parsed: for tests), then the counts reset (a
 * new interval begins). *out receives a new object, or
 * NULL when nothing was recorded. Returns 0; LD_EINVAL (NULL argument);
 * LD_ENOMEM, with nothing reset (the next flush has it all). */
int ld__summarizer_flush(struct ld__summarizer *s, json_t **out);

/* ---- payloads (payload.c) --------------------------------------------------
 *
 * The loop keeps what each analytics event needs as a record (no JSON is
 * made while evaluating); a flush hands the records to the processor's
 * worker, which writes the payload's JSON text (and compresses it). The
 * writer only reads what a record points to: the loop keeps it all alive
 * (and releases it) around the write.
 */

enum ld__ev_kind {
    LD__EV_FEATURE,  /* {"kind":"feature", ...}: context anonymous-redacted */
    LD__EV_DEBUG,    /* the same with "kind":"debug"; context not anonymous-redacted */
    LD__EV_INDEX,    /* {"kind":"index","creationDate","context"} */
    LD__EV_IDENTIFY, /* {"kind":"identify","creationDate","context"} */
    LD__EV_CUSTOM,   /* {"kind":"custom","creationDate","key","context","data"?,"metricValue"?} */
    LD__EV_RAW       /* `data`, written as it is (ld_event_processor_send_event()) */
};

struct ld__ev_record {
    uint8_t kind;    /* enum ld__ev_kind */
    bool has_metric; /* custom: write "metricValue" */
    int variation;   /* feature, debug: LD__NO_VARIATION: not written */
    int64_t creation_ms;
    int64_t version; /* feature, debug: LD__NO_VERSION: not written */
    const char *key; /* feature, debug: the flag's key; custom: the event's */
    size_t key_len;
    const char *prereq_of; /* feature, debug: "prereqOf" (NULL: not written) */
    size_t prereq_of_len;
    json_t *value;           /* feature, debug: "value" (NULL: null) */
    json_t *dflt;            /* feature, debug: "default" (NULL: null); custom: "data"
                                (NULL: not written); raw: the event */
    const ld_detail *reason; /* feature, debug: "reason" (NULL: not written) */
    ld_context *ctx;         /* all but raw */
    double metric;
    void *hold, *hold_of; /* the loop's: what keeps the pointers above alive */
};

/* Writes the payload of `n` records and then `summary` (NULL: none) as a
 * JSON array, compact, in that order, each context formatted by `fmt`
 * (ld__ctx_format(); redacting anonymous contexts for feature and custom
 * events); gzip-compressed when `gzip`. Reads only: any thread, with the
 * records' values read by no one that changes them (other threads may
 * count references to them meanwhile: the writer never does). A custom
 * event's metric that is not finite is left out. @return 0 with *body
 * (ld__malloc()ed, the caller's) and *len; LD_EINVAL (NULL `fmt`, `body`
 * or `len`, NULL `recs` with `n` > 0, a record of no known kind, or one
 * but raw without a context); LD_ENOMEM (also for a string jansson cannot
 * write: invalid UTF-8). */
int ld__payload_write(const struct ld__ctx_format *fmt, const struct ld__ev_record *recs, size_t n,
                      const struct ld__summary *summary, bool gzip, char **body, size_t *len);

/* `in` (`len` bytes) gzip-compressed (zlib; RFC 1952) into *out
 * (ld__malloc()ed) and *out_len; zlib allocates through ld__malloc().
 * @return 0; LD_EINVAL (NULL `out` or `out_len`, NULL `in` with `len` > 0);
 * LD_ENOMEM. Any thread. */
int ld__gzip(const void *in, size_t len, char **out, size_t *out_len);

struct event_base;

/* ---- delivery (sender.c) --------------------------------------------------
 *
 * Posts payloads to LaunchDarkly's events service as its SDKs do: analytics
 * to {events}/bulk with X-LaunchDarkly-Event-Schema: 4 and a payload ID
 * (a UUID, the same on the retry), diagnostics to {events}/diagnostic
 * without them; the headers of every request to LaunchDarkly and
 * Content-Type: application/json; Content-Encoding: gzip for a body the
 * caller compressed. A network error or a recoverable status (400, 408,
 * 429, 5xx) is retried once after `retry_ms`; a 413 drops that payload
 * only; any other status of an analytics post stops all sending (401 and
 * 403 above all): later posts are dropped at once (a diagnostic post's
 * does not, as LaunchDarkly's SDKs do). The Date header of each 2xx answer
 * is kept: the server's time, for the debug events' cutoff. A relay's
 * post (what an SDK posted to ldasync-serve) carries only Authorization
 * (ours, unless the SDK's is passed) and the lines given, is sent also
 * once analytics stopped, and stops nothing. Loop thread only.
 */

struct ld__ev_sender;

enum ld__ev_payload { LD__EV_ANALYTICS, LD__EV_DIAGNOSTIC, LD__EV_RELAY };

/* A sender for `cfg` (what it needs is copied); `retry_ms` <= 0: 1000.
 * @return NULL without memory, or when libcurl could not be set up. */
struct ld__ev_sender *ld__ev_sender_new(struct event_base *base, const ld_net_config *cfg,
                                        int64_t retry_ms);

/* Posts `body` (`len` bytes, taken: freed with ld__free() by the sender on
 * every path), gzip-compressed by the caller when `gzip`, to /bulk
 * (LD__EV_ANALYTICS) or /diagnostic (LD__EV_DIAGNOSTIC). @return a new
 * reference, fulfilled with a bool: true once the service took it (2xx),
 * false when it was dropped (after the retry, a 413, or sending stopped);
 * rejected with LD_ENOMEM, or LD_ECANCELED when the sender is freed first.
 * NULL only for a NULL sender. */
ld_future *ld__ev_sender_post(struct ld__ev_sender *s, enum ld__ev_payload kind, char *body,
                              size_t len, bool gzip);

/* Posts `body` (taken, as above) to {events}`path` with the header lines
 * `lines` (NULL-terminated; copied) after those of every request to
 * LaunchDarkly, or for LD__EV_RELAY instead of them (see above). The
 * future is as ld__ev_sender_post()'s; NULL for a NULL sender or path. */
ld_future *ld__ev_sender_send(struct ld__ev_sender *s, enum ld__ev_payload kind, const char *path,
                              const char *const *lines, char *body, size_t len);

/* True once a status turned sending off. */
bool ld__ev_sender_stopped(const struct ld__ev_sender *s);

/* The Date of the last 2xx answer, in epoch ms; 0 before any. */
int64_t ld__ev_sender_server_time(const struct ld__ev_sender *s);

/* Posts not over yet (for tests and close). */
size_t ld__ev_sender_pending(const struct ld__ev_sender *s);

/* Frees the sender: posts under way are abandoned and their futures
 * rejected with LD_ECANCELED (from the loop). NULL-safe. */
void ld__ev_sender_free(struct ld__ev_sender *s);

/* ---- the default event processor (event_processor.c) ---------------------- */

struct ld__events;
struct ld__eval_rec;
typedef struct ld_event_processor ld_event_processor;
typedef struct ld_events_config ld_events_config;

/* The implementation of `ep` when its ops are `ops`, else NULL
 * (processor.c). */
void *ld__event_processor_impl(const ld_event_processor *ep, const void *ops);

/* The default processor behind `ep`, or NULL when it is another. */
struct ld__events *ld__events_of(const ld_event_processor *ep);

/* A copy of `cfg` (NULL: the defaults), or NULL without memory. */
ld_events_config *ld__events_config_copy(const ld_events_config *cfg);

/* An evaluation (a struct ld__recorder's function; `arg` is the struct
 * ld__events): counted in the summary, with an index event for a new
 * context and the feature and debug events the flag asks for. Nothing
 * once closed. Loop thread. */
void ld__events_record_eval(void *arg, const struct ld__eval_rec *r);

/* An identify event of `ctx` (borrowed). @return 0; LD_EBUSY (the buffer
 * is full: dropped); LD_ECLOSED. */
int ld__events_identify(struct ld__events *e, ld_context *ctx);

/* A custom event `key` (copied) of `ctx` with `data` (borrowed; NULL:
 * none) and a metric value when `has_metric`. @return 0; LD_EBUSY;
 * LD_ECLOSED; LD_ENOMEM. */
int ld__events_custom(struct ld__events *e, const char *key, ld_context *ctx, json_t *data,
                      bool has_metric, double metric);

#endif /* LDASYNC_EVENTS_INTERNAL_H */
