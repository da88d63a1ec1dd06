/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The payload of a flush (events-internal.h): the records' events written
 * as one compact JSON array, then gzip-compressed (zlib) when asked.
 *
 * The text goes into one growable buffer. What is JSON already (flag
 * values, defaults, custom data, raw events, the summary) is written by
 * json_dump_callback(), which only reads it: the loop thread may be taking
 * and dropping references to the very same values meanwhile, so nothing
 * here ever counts a reference to them or puts them into a container.
 * Strings (keys) go through a temporary jansson string, so that jansson
 * escapes them; the JSON made here (contexts, reasons) is made and freed
 * here.
 */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <zlib.h>

#include <ldasync/error.h>
#include <ldasync/eval.h>

#include "core/core-internal.h"
#include "events/events-internal.h"

/* ---- the text ------------------------------------------------------------- */

/* Text written before, to write again: what `key` (a context, with or
 * without anonymous redaction; a key's bytes) became, at p[off, off+len). */
struct memo {
    const void *key;
    size_t off, len;
};

struct buf {
    char *p;
    size_t len, cap;
    bool oom; /* sticky: once an append failed, every later one fails */
    /* Events in a row often share their context (a request's evaluations)
     * and their flag key: each is formatted once, then copied. */
    struct memo ctx[2], key;
    size_t key_len; /* the bytes of key.key */
};

/* Room for `n` more bytes; false when memory ran out, then or before.
 * Sticky because jansson (2.14) ignores its callback's failure while
 * writing an object's key and goes on: the text would lack bytes, not
 * fail. */
static bool reserve(struct buf *b, size_t n)
{
    if (b->oom)
        return false;
    if (n > b->cap - b->len) {
        b->oom = true;
        if (n > SIZE_MAX / 2 - b->len)
            return false;
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n)
            cap *= 2;
        char *p = ld__realloc(b->p, cap);
        if (!p)
            return false;
        b->oom = false;
        b->p = p;
        b->cap = cap;
    }
    return true;
}

/* Appends `n` bytes (not from the buffer itself). */
static bool put(struct buf *b, const char *s, size_t n)
{
    if (!reserve(b, n))
        return false;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return true;
}

#define PUT_LIT(b, lit) put((b), (lit), sizeof(lit) - 1)

/* Writes again what `m` points to in the buffer itself. */
static bool put_again(struct buf *b, const struct memo *m)
{
    if (!reserve(b, m->len))
        return false;
    memcpy(b->p + b->len, b->p + m->off, m->len); /* an offset: the buffer may have moved */
    b->len += m->len;
    return true;
}

static bool put_i64(struct buf *b, int64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%" PRId64, v);
    return put(b, tmp, (size_t)n);
}

static int dump_cb(const char *s, size_t n, void *data)
{
    return put(data, s, n) ? 0 : -1;
}

/* `v` (NULL: null) as compact JSON; only reads `v`. False when memory ran
 * out (or jansson could not write `v`: a string of invalid UTF-8). */
static bool put_json(struct buf *b, const json_t *v)
{
    if (!v)
        return PUT_LIT(b, "null");
    return json_dump_callback(v, dump_cb, b, JSON_COMPACT | JSON_ENCODE_ANY) == 0 && !b->oom;
}

/* Puts `v`, a value made here, and releases it (NULL: memory ran out). */
static bool put_own(struct buf *b, json_t *v)
{
    if (!v)
        return false;
    bool ok = put_json(b, v);
    json_decref(v);
    return ok;
}

/* The JSON string of `len` bytes at `s` (UTF-8), escaped by jansson. */
static bool put_str(struct buf *b, const char *s, size_t len)
{
    return put_own(b, json_stringn_nocheck(s ? s : "", s ? len : 0));
}

/* A flag's or event's key: the text of the one before when it is the same
 * bytes (the same pointer and length: a flag's own key). */
static bool put_key(struct buf *b, const char *s, size_t len)
{
    if (s && b->key.key == s && b->key.len > 0 && b->key_len == len)
        return put_again(b, &b->key);
    size_t off = b->len;
    if (!put_str(b, s, len))
        return false;
    b->key = (struct memo){s, off, b->len - off};
    b->key_len = len;
    return true;
}

/* ---- the events ----------------------------------------------------------- */

/* {"kind":K,"creationDate":ms */
static bool put_head(struct buf *b, const char *kind, int64_t ms)
{
    return PUT_LIT(b, "{\"kind\":\"") && put(b, kind, strlen(kind)) &&
           PUT_LIT(b, "\",\"creationDate\":") && put_i64(b, ms);
}

/* ,"context":CTX, formatted once for the events in a row that share it. */
static bool put_ctx(struct buf *b, const struct ld__ctx_format *fmt, const ld_context *ctx,
                    bool redact_anonymous)
{
    struct memo *m = &b->ctx[redact_anonymous];
    if (!PUT_LIT(b, ",\"context\":"))
        return false;
    if (m->key == ctx && m->len > 0)
        return put_again(b, m);
    size_t off = b->len;
    if (!put_own(b, ld__ctx_format(fmt, ctx, redact_anonymous)))
        return false;
    *m = (struct memo){ctx, off, b->len - off};
    return true;
}

static bool put_feature(struct buf *b, const struct ld__ctx_format *fmt,
                        const struct ld__ev_record *r)
{
    bool feature = r->kind == LD__EV_FEATURE;
    if (!put_head(b, feature ? "feature" : "debug", r->creation_ms) || !PUT_LIT(b, ",\"key\":") ||
        !put_key(b, r->key, r->key_len))
        return false;
    if (r->version != LD__NO_VERSION && !(PUT_LIT(b, ",\"version\":") && put_i64(b, r->version)))
        return false;
    if (!put_ctx(b, fmt, r->ctx, feature) || !PUT_LIT(b, ",\"value\":") || !put_json(b, r->value))
        return false;
    if (r->variation != LD__NO_VARIATION &&
        !(PUT_LIT(b, ",\"variation\":") && put_i64(b, r->variation)))
        return false;
    if (!PUT_LIT(b, ",\"default\":") || !put_json(b, r->dflt))
        return false;
    if (r->reason &&
        !(PUT_LIT(b, ",\"reason\":") && put_own(b, ld_detail_reason_to_json(r->reason))))
        return false;
    if (r->prereq_of &&
        !(PUT_LIT(b, ",\"prereqOf\":") && put_str(b, r->prereq_of, r->prereq_of_len)))
        return false;
    return PUT_LIT(b, "}");
}

static bool put_custom(struct buf *b, const struct ld__ctx_format *fmt,
                       const struct ld__ev_record *r)
{
    if (!put_head(b, "custom", r->creation_ms) || !PUT_LIT(b, ",\"key\":") ||
        !put_str(b, r->key, r->key_len) || !put_ctx(b, fmt, r->ctx, true))
        return false;
    if (r->dflt && !(PUT_LIT(b, ",\"data\":") && put_json(b, r->dflt)))
        return false;
    /* A metric that is not a number JSON can write (NaN, infinities) is
     * left out, as the event without a metric. */
    if (r->has_metric && isfinite(r->metric) &&
        !(PUT_LIT(b, ",\"metricValue\":") && put_own(b, json_real(r->metric))))
        return false;
    return PUT_LIT(b, "}");
}

static bool put_record(struct buf *b, const struct ld__ctx_format *fmt,
                       const struct ld__ev_record *r)
{
    switch (r->kind) {
    case LD__EV_FEATURE:
    case LD__EV_DEBUG:
        return put_feature(b, fmt, r);
    case LD__EV_INDEX:
    case LD__EV_IDENTIFY:
        return put_head(b, r->kind == LD__EV_INDEX ? "index" : "identify", r->creation_ms) &&
               put_ctx(b, fmt, r->ctx, false) && PUT_LIT(b, "}");
    case LD__EV_CUSTOM:
        return put_custom(b, fmt, r);
    default: /* LD__EV_RAW */
        return put_json(b, r->dflt);
    }
}

int ld__payload_write(const struct ld__ctx_format *fmt, const struct ld__ev_record *recs, size_t n,
                      const struct ld__summary *summary, bool gzip, char **body, size_t *len)
{
    if (!body || !len || (n && !recs) || !fmt)
        return LD_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (recs[i].kind > LD__EV_RAW || (recs[i].kind != LD__EV_RAW && !recs[i].ctx))
            return LD_EINVAL;
    *body = NULL;
    *len = 0;
    struct buf b = {0};
    bool ok = PUT_LIT(&b, "[");
    for (size_t i = 0; ok && i < n; i++)
        ok = (i == 0 || PUT_LIT(&b, ",")) && put_record(&b, fmt, &recs[i]);
    if (ok && summary)
        ok = (n == 0 || PUT_LIT(&b, ",")) && ld__summary_dump(summary, dump_cb, &b) == 0 && !b.oom;
    ok = ok && PUT_LIT(&b, "]");
    if (!ok) {
        ld__free(b.p);
        return LD_ENOMEM;
    }
    if (gzip) {
        int rc = ld__gzip(b.p, b.len, body, len);
        ld__free(b.p);
        return rc;
    }
    *body = b.p;
    *len = b.len;
    return 0;
}

/* ---- gzip ----------------------------------------------------------------- */

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    if (size && items > SIZE_MAX / size)
        return Z_NULL;
    return ld__malloc((size_t)items * size);
}

static void z_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    ld__free(p);
}

int ld__gzip(const void *in, size_t len, char **out, size_t *out_len)
{
    if (!out || !out_len || (len && !in))
        return LD_EINVAL;
    *out = NULL;
    *out_len = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    zs.zalloc = z_alloc;
    zs.zfree = z_free;
    /* windowBits 15 + 16: the gzip wrapper (RFC 1952) */
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK)
        return LD_ENOMEM;
    /* deflateBound() is enough for one deflate(Z_FINISH) (the wrapper
     * counted); the loop grows the buffer anyway, and feeds inputs larger
     * than zlib's uInt in pieces. */
    size_t cap = len <= ULONG_MAX ? (size_t)deflateBound(&zs, (uLong)len) : len + len / 8 + 64;
    char *buf = ld__malloc(cap);
    const unsigned char *src = in;
    size_t left = len, done = 0;
    int rc = Z_OK;
    while (buf) {
        if (zs.avail_in == 0 && left) {
            zs.next_in = (Bytef *)(uintptr_t)src;
            zs.avail_in = left > UINT_MAX ? UINT_MAX : (uInt)left;
            src += zs.avail_in;
            left -= zs.avail_in;
        }
        if (done == cap) {
            char *p = cap <= SIZE_MAX / 2 ? ld__realloc(buf, cap * 2) : NULL;
            if (!p)
                break;
            buf = p;
            cap *= 2;
        }
        size_t room = cap - done;
        zs.next_out = (Bytef *)buf + done;
        zs.avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
        uInt before = zs.avail_out;
        rc = deflate(&zs, left ? Z_NO_FLUSH : Z_FINISH);
        done += before - zs.avail_out;
        if (rc == Z_STREAM_END)
            break;
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            break;
    }
    deflateEnd(&zs);
    if (!buf || rc != Z_STREAM_END) {
        ld__free(buf);
        return LD_ENOMEM;
    }
    *out = buf;
    *out_len = done;
    return 0;
}
