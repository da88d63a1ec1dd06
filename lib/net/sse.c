/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * lib/net/sse.c: the server-sent events parser (net-internal.h has its
 * rules). Bytes are taken a run at a time: memchr finds the end of the
 * line, and a data value is appended to the event's data straight from
 * the input (a put of 10,000 flags is one line of megabytes).
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <ldasync/error.h>

#include "core/core-internal.h"
#include "net/net-internal.h"

struct buf {
    char *p;
    size_t len, cap;
};

/* Where the value of the line being read goes. */
enum target {
    T_NONE,  /* a comment or a field nobody reads */
    T_DATA,  /* straight into the event's data */
    T_EVENT, /* into `val`, the event's type at the line's end */
    T_ID,    /* into `val`, the last event ID at the line's end */
    T_RETRY  /* into `val`, the reconnection time at the line's end */
};

#define FIELD_MAX 8 /* the longest field name read ("retry"); longer: none */

struct ld__sse {
    ld__sse_event_fn on_event;
    ld__sse_retry_fn on_retry;
    void *arg;
    size_t max_event;
    struct buf data, type, id, val;
    /* the line being read */
    char field[FIELD_MAX];
    size_t field_len;   /* bytes of the field name (more than FIELD_MAX: none) */
    bool in_value;      /* its ':' came: the bytes are the value */
    bool skip_space;    /* the value's first byte is still to come */
    bool line_started;  /* it has a byte */
    enum target target; /* once in_value */
    bool val_nul;       /* the value of an "id" holds a NUL */
    bool after_cr;      /* the last line ended with a CR: a LF next is its end too */
    unsigned bom;       /* bytes of the byte order mark seen at the start (3: done) */
    bool in_event;      /* inside on_event (ld__sse_take_data) */
};

static const char BOM[3] = {'\xEF', '\xBB', '\xBF'};

/* Room for `n` more bytes and a NUL in `b`. */
static int buf_room(struct buf *b, size_t n)
{
    if (b->cap - b->len > n)
        return 0;
    size_t want = b->len + n + 1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < want)
        cap = cap > SIZE_MAX / 2 ? want : cap * 2;
    char *p = ld__realloc(b->p, cap);
    if (!p)
        return LD_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int buf_add(struct buf *b, const char *s, size_t n)
{
    if (n == 0)
        return 0;
    int rc = buf_room(b, n);
    if (rc == 0) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
    }
    return rc;
}

/* Replaces `to`'s bytes with `from`'s (its buffer is swapped in). */
static void buf_move(struct buf *to, struct buf *from)
{
    struct buf t = *to;
    *to = *from;
    *from = t;
    from->len = 0;
}

static void buf_free(struct buf *b)
{
    ld__free(b->p);
    *b = (struct buf){0};
}

struct ld__sse *ld__sse_new(size_t max_event, ld__sse_event_fn on_event, ld__sse_retry_fn on_retry,
                            void *arg)
{
    if (!on_event)
        return NULL;
    struct ld__sse *p = ld__calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->on_event = on_event;
    p->on_retry = on_retry;
    p->arg = arg;
    p->max_event = max_event;
    return p;
}

void ld__sse_free(struct ld__sse *p)
{
    if (!p)
        return;
    buf_free(&p->data);
    buf_free(&p->type);
    buf_free(&p->id);
    buf_free(&p->val);
    ld__free(p);
}

static void line_reset(struct ld__sse *p)
{
    p->field_len = 0;
    p->in_value = p->skip_space = p->line_started = p->val_nul = false;
    p->target = T_NONE;
    p->val.len = 0;
}

void ld__sse_reset(struct ld__sse *p)
{
    if (!p)
        return;
    line_reset(p);
    p->data.len = p->type.len = 0;
    p->after_cr = false;
    p->bom = 0;
}

const char *ld__sse_last_id(const struct ld__sse *p, size_t *len)
{
    if (len)
        *len = p && p->id.p ? p->id.len : 0;
    return p && p->id.p ? p->id.p : "";
}

char *ld__sse_take_data(struct ld__sse *p, size_t *len)
{
    if (!p || !p->in_event || !p->data.p)
        return NULL;
    char *d = p->data.p;
    if (len)
        *len = p->data.len;
    p->data = (struct buf){0};
    return d;
}

/* What the event holds, the line's value included, against max_event. */
static bool too_big(const struct ld__sse *p, size_t more)
{
    size_t held = p->data.len + p->type.len + p->id.len + p->val.len;
    return held > p->max_event || more > p->max_event - held;
}

/* The empty line: the event goes out, if it has data. */
static int dispatch(struct ld__sse *p)
{
    if (p->data.len == 0) {
        p->type.len = 0;
        return 0;
    }
    p->data.len--; /* its last LF */
    p->data.p[p->data.len] = '\0';
    struct ld__sse_event ev = {
        .type = p->type.len ? p->type.p : "message",
        .type_len = p->type.len ? p->type.len : 7,
        .data = p->data.p,
        .data_len = p->data.len,
    };
    if (p->type.len)
        p->type.p[p->type.len] = '\0';
    ev.id = ld__sse_last_id(p, &ev.id_len);
    p->in_event = true;
    int rc = p->on_event(p->arg, &ev);
    p->in_event = false;
    p->data.len = p->type.len = 0;
    return rc;
}

static enum target target_of(const struct ld__sse *p)
{
    if (p->field_len > FIELD_MAX)
        return T_NONE;
    static const struct {
        const char *name;
        size_t len;
        enum target t;
    } fields[] = {
        {"data", 4, T_DATA}, {"event", 5, T_EVENT}, {"id", 2, T_ID}, {"retry", 5, T_RETRY}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (p->field_len == fields[i].len && memcmp(p->field, fields[i].name, fields[i].len) == 0)
            return fields[i].t;
    return T_NONE;
}

/* The line ends (it had a byte): its field takes effect. */
static int line_end(struct ld__sse *p)
{
    if (!p->in_value) /* a field without ':': its value is empty */
        p->target = p->field_len == 0 ? T_NONE : target_of(p);
    int rc = 0;
    switch (p->target) {
    case T_DATA:
        rc = too_big(p, 1) ? LD_EPARSE : buf_add(&p->data, "\n", 1);
        break;
    case T_EVENT:
        buf_move(&p->type, &p->val);
        break;
    case T_ID:
        if (!p->val_nul) {
            /* an empty ID is an ID ("" again), and must read as "" */
            rc = buf_room(&p->val, 0);
            if (rc == 0) {
                buf_move(&p->id, &p->val);
                p->id.p[p->id.len] = '\0';
            }
        }
        break;
    case T_RETRY:
        if (p->val.len > 0 && p->on_retry) {
            uint64_t ms = 0;
            size_t i = 0;
            for (; i < p->val.len && p->val.p[i] >= '0' && p->val.p[i] <= '9'; i++)
                ms = ms > UINT32_MAX ? ms : ms * 10 + (uint64_t)(p->val.p[i] - '0');
            if (i == p->val.len)
                p->on_retry(p->arg, ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms);
        }
        break;
    case T_NONE:
        break;
    }
    line_reset(p);
    return rc;
}

/* `n` bytes of the line being read, none of them CR or LF. */
static int line_bytes(struct ld__sse *p, const char *s, size_t n)
{
    if (n == 0)
        return 0;
    p->line_started = true;
    if (!p->in_value) {
        const char *colon = memchr(s, ':', n);
        size_t k = colon ? (size_t)(colon - s) : n;
        if (p->field_len < FIELD_MAX)
            memcpy(p->field + p->field_len, s,
                   k < FIELD_MAX - p->field_len ? k : FIELD_MAX - p->field_len);
        p->field_len =
            k > FIELD_MAX || p->field_len + k > FIELD_MAX ? FIELD_MAX + 1 : p->field_len + k;
        if (!colon)
            return 0;
        /* a line that starts with ':' is a comment: its field is empty */
        p->target = p->field_len == 0 ? T_NONE : target_of(p);
        p->in_value = p->skip_space = true;
        s += k + 1;
        n -= k + 1;
    }
    if (n > 0 && p->skip_space) {
        p->skip_space = false;
        if (*s == ' ') {
            s++;
            n--;
        }
    }
    if (n == 0 || p->target == T_NONE)
        return 0;
    if (too_big(p, n))
        return LD_EPARSE;
    if (p->target == T_ID && memchr(s, '\0', n))
        p->val_nul = true;
    return buf_add(p->target == T_DATA ? &p->data : &p->val, s, n);
}

/* The bytes after the byte order mark's place. */
static int feed_lines(struct ld__sse *p, const char *s, size_t n)
{
    while (n > 0) {
        if (p->after_cr) {
            p->after_cr = false;
            if (*s == '\n') {
                s++;
                n--;
                continue;
            }
        }
        const char *lf = memchr(s, '\n', n);
        size_t lim = lf ? (size_t)(lf - s) : n;
        const char *cr = memchr(s, '\r', lim);
        size_t k = cr ? (size_t)(cr - s) : lim;
        int rc = line_bytes(p, s, k);
        if (rc != 0)
            return rc;
        if (k == n)
            return 0; /* the line goes on in the next feed */
        p->after_cr = s[k] == '\r';
        s += k + 1;
        n -= k + 1;
        rc = p->line_started ? line_end(p) : dispatch(p);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int ld__sse_feed(struct ld__sse *p, const char *s, size_t n)
{
    if (!p || (!s && n))
        return LD_EINVAL;
    while (p->bom < 3 && n > 0) {
        if (*s != BOM[p->bom]) {
            /* not a byte order mark: what was taken for one is text */
            unsigned seen = p->bom;
            p->bom = 3;
            int rc = feed_lines(p, BOM, seen);
            if (rc != 0)
                return rc;
            break;
        }
        p->bom++;
        s++;
        n--;
    }
    return feed_lines(p, s, n);
}
