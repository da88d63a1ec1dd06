/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * fuzz/sse.c: the server-sent events parser (lib/net/sse.c, internal: it
 * has no public API) against a model of the WHATWG rules written here
 * plainly, line by line over the whole input.
 *
 * Input: 4 bytes that seed the sizes of the pieces the body is fed in (1
 * to 64 bytes each, or the whole body when the seed's low byte is 0), 1
 * byte that picks the bound on an event's size (0-127: 1 MiB; otherwise
 * 1 to 128 bytes), then the body. The parser's events, retries and result
 * must be the model's; any difference aborts.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/error.h>

#include "net/net-internal.h"

/* What a parser (or the model) said: a log of records. */
struct log {
    unsigned char *p;
    size_t len, cap;
};

static void log_add(struct log *l, const void *s, size_t n)
{
    if (l->len + n > l->cap) {
        size_t cap = l->cap ? l->cap : 256;
        while (cap < l->len + n)
            cap *= 2;
        l->p = realloc(l->p, cap);
        if (!l->p)
            abort();
        l->cap = cap;
    }
    memcpy(l->p + l->len, s, n);
    l->len += n;
}

static void log_bytes(struct log *l, char tag, const char *s, size_t n)
{
    log_add(l, &tag, 1);
    log_add(l, &n, sizeof n);
    log_add(l, s, n);
}

static void log_event(struct log *l, const char *type, size_t tl, const char *data, size_t dl,
                      const char *id, size_t il)
{
    log_bytes(l, 'T', type, tl);
    log_bytes(l, 'D', data, dl);
    log_bytes(l, 'I', id, il);
}

static void log_retry(struct log *l, uint32_t ms)
{
    log_add(l, "R", 1);
    log_add(l, &ms, sizeof ms);
}

/* ---- the model -------------------------------------------------------- */

struct model {
    struct log *log;
    size_t max;
    char *data, *type, *id;
    size_t dl, tl, il;
};

static void set(char **to, size_t *tl, const char *s, size_t n)
{
    free(*to);
    *to = malloc(n + 1);
    if (!*to)
        abort();
    memcpy(*to, s, n);
    *tl = n;
}

/* One whole line (without its end). @return 0 or LD_EPARSE. */
static int model_line(struct model *m, const char *s, size_t n)
{
    if (n == 0) { /* dispatch */
        if (m->dl > 0)
            log_event(m->log, m->tl ? m->type : "message", m->tl ? m->tl : 7, m->data, m->dl - 1,
                      m->il ? m->id : "", m->il);
        m->dl = m->tl = 0;
        return 0;
    }
    if (s[0] == ':')
        return 0;
    const char *colon = memchr(s, ':', n);
    size_t fl = colon ? (size_t)(colon - s) : n;
    const char *v = colon ? colon + 1 : s + n;
    size_t vl = colon ? n - fl - 1 : 0;
    if (vl > 0 && v[0] == ' ') {
        v++;
        vl--;
    }
    size_t held = m->dl + m->tl + m->il;
    if (fl == 4 && memcmp(s, "data", 4) == 0) {
        if (held + vl > m->max || held + vl + 1 > m->max)
            return LD_EPARSE;
        m->data = realloc(m->data, m->dl + vl + 1);
        if (!m->data)
            abort();
        memcpy(m->data + m->dl, v, vl);
        m->dl += vl;
        m->data[m->dl++] = '\n';
    } else if (fl == 5 && memcmp(s, "event", 5) == 0) {
        if (held + vl > m->max)
            return LD_EPARSE;
        set(&m->type, &m->tl, v, vl);
    } else if (fl == 2 && memcmp(s, "id", 2) == 0) {
        if (held + vl > m->max)
            return LD_EPARSE;
        if (!memchr(v, '\0', vl))
            set(&m->id, &m->il, v, vl);
    } else if (fl == 5 && memcmp(s, "retry", 5) == 0) {
        if (held + vl > m->max)
            return LD_EPARSE;
        uint64_t ms = 0;
        size_t i = 0;
        for (; i < vl && v[i] >= '0' && v[i] <= '9'; i++)
            if (ms <= UINT32_MAX)
                ms = ms * 10 + (uint64_t)(v[i] - '0');
        if (vl > 0 && i == vl)
            log_retry(m->log, ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms);
    }
    return 0;
}

/* The line the body ends in, without its end: no effect, but the parser
 * counts its value against the bound as it comes. */
static int model_partial(const struct model *m, const char *s, size_t n)
{
    const char *colon = n > 0 && s[0] != ':' ? memchr(s, ':', n) : NULL;
    if (!colon)
        return 0;
    size_t fl = (size_t)(colon - s), vl = n - fl - 1;
    if (vl > 0 && colon[1] == ' ')
        vl--;
    bool known = (fl == 4 && memcmp(s, "data", 4) == 0) || (fl == 2 && memcmp(s, "id", 2) == 0) ||
                 (fl == 5 && (memcmp(s, "event", 5) == 0 || memcmp(s, "retry", 5) == 0));
    return known && m->dl + m->tl + m->il + vl > m->max ? LD_EPARSE : 0;
}

static int model_run(struct log *log, size_t max, const char *s, size_t n)
{
    struct model m = {.log = log, .max = max};
    if (n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
        s += 3;
        n -= 3;
    }
    int rc = 0;
    size_t start = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (s[i] != '\r' && s[i] != '\n')
            continue;
        rc = model_line(&m, s + start, i - start);
        if (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n')
            i++;
        start = i + 1;
    }
    if (rc == 0 && start < n)
        rc = model_partial(&m, s + start, n - start);
    free(m.data);
    free(m.type);
    free(m.id);
    return rc;
}

/* ---- the parser ------------------------------------------------------- */

static int on_event(void *arg, const struct ld__sse_event *ev)
{
    if (ev->data[ev->data_len] != '\0')
        abort();
    log_event(arg, ev->type, ev->type_len, ev->data, ev->data_len, ev->id, ev->id_len);
    return 0;
}

static void on_retry(void *arg, uint32_t ms)
{
    log_retry(arg, ms);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    if (size < 5)
        return 0;
    uint32_t seed =
        (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
    size_t max = in[4] < 128 ? (size_t)1 << 20 : (size_t)(in[4] - 127);
    const char *body = (const char *)in + 5;
    size_t n = size - 5;

    struct log want = {0}, got = {0};
    int want_rc = model_run(&want, max, body, n);

    struct ld__sse *p = ld__sse_new(max, on_event, on_retry, &got);
    if (!p)
        abort();
    int rc = 0;
    bool whole = (seed & 0xff) == 0;
    uint32_t x = seed | 1;
    for (size_t at = 0; at < n && rc == 0;) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        size_t k = whole ? n : 1 + x % 64;
        if (k > n - at)
            k = n - at;
        rc = ld__sse_feed(p, body + at, k);
        at += k;
    }
    ld__sse_free(p);
    if (rc != want_rc || got.len != want.len || (got.len && memcmp(got.p, want.p, got.len) != 0)) {
        fprintf(stderr, "sse: parser %d (%zu log bytes), model %d (%zu log bytes)\n", rc, got.len,
                want_rc, want.len);
        abort();
    }
    free(want.p);
    free(got.p);
    return 0;
}
