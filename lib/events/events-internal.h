/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the events layer's internal header: contexts as analytics
 * events show them (context_format.c) and the summary of evaluations
 * (summarizer.c). PROTOCOLS.md section 4 has the formats. Never installed.
 */
#ifndef LDASYNC_EVENTS_INTERNAL_H
#define LDASYNC_EVENTS_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ldasync/context.h>

/* ---- Contexts in events (context_format.c) --------------------------------
 *
 * A context in an event is its JSON form with private attributes redacted,
 * as LaunchDarkly's SDKs write it (PROTOCOLS.md 4.5):
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
 * The summary event LaunchDarkly's SDKs send with each flush (PROTOCOLS.md
 * 4.4):
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
 * at zero, and drops only the flags not recorded since the flush before). Values are
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

/* True if nothing was recorded since the last flush (or NULL `s`). */
bool ld__summarizer_empty(const struct ld__summarizer *s);

/* The summary event of what was recorded since the last flush, then the
 * counts reset (a new interval begins). *out receives a new object, or
 * NULL when nothing was recorded. Returns 0; LD_EINVAL (NULL argument);
 * LD_ENOMEM, with nothing reset (the next flush has it all). */
int ld__summarizer_flush(struct ld__summarizer *s, json_t **out);

#endif /* LDASYNC_EVENTS_INTERNAL_H */
