/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The Redis big segment store (ld_redis_big_segment_store_new(), redis.h):
 * what LaunchDarkly's Relay Proxy synchronizes into Redis, read as its SDKs
 * read it. The metadata is GET {prefix}:big_segments_synchronized_on; a
 * membership is SMEMBERS of {prefix}:big_segment_include:{hash} and of
 * {prefix}:big_segment_exclude:{hash}, pipelined. Read only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include <ldasync/error.h>
#include <ldasync/future.h>

#include "redis/redis-internal.h"

struct bop {
    struct bop *prev, *next;
    struct rbss *bs;
    ld_future *out; /* owned */
    bool membership;
    char *hash;   /* waiting for a name resolution: the context's (membership) */
    bool waiting; /* issued while the host name was resolved: not sent yet */
    int replies;  /* replies still to come */
    int code;     /* the first failure */
    char msg[300];
    /* the members read: include, then exclude (copied from the replies) */
    char **refs[2];
    size_t n[2];
};

struct rbss {
    struct ld_redis_options o;
    struct ldr_conn *conn;
    char *synced_key;
    struct bop *ops;
    struct event *kick; /* a timer due at once: send the waiting ops */
};

static void bop_free(struct bop *op)
{
    for (int i = 0; i < 2; i++) {
        for (size_t k = 0; k < op->n[i]; k++)
            ldr_free(op->refs[i][k]);
        ldr_free(op->refs[i]);
    }
    ldr_free(op->hash);
    ldr_free(op);
}

static struct bop *bop_new(struct rbss *bs, ld_future *out, bool membership)
{
    struct bop *op = ldr_calloc(1, sizeof(*op));
    if (!op) {
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        return NULL;
    }
    op->bs = bs;
    op->out = out;
    op->membership = membership;
    op->next = bs->ops;
    if (bs->ops)
        bs->ops->prev = op;
    bs->ops = op;
    return op;
}

static void bop_done(struct bop *op)
{
    struct rbss *bs = op->bs;
    if (op->prev)
        op->prev->next = op->next;
    else
        bs->ops = op->next;
    if (op->next)
        op->next->prev = op->prev;
    ld_future_unref(op->out);
    bop_free(op);
}

static void bop_fail(struct bop *op, int code, const char *msg)
{
    if (!op->code) {
        op->code = code;
        snprintf(op->msg, sizeof(op->msg), "%s", msg);
    }
}

/* Sends a command; a failure to send counts as its reply. */
static void bop_send(struct bop *op, int argc, const char **argv, ldr_reply_fn fn)
{
    const char *why;
    op->replies++;
    int rc = ldr_conn_send(op->bs->conn, argc, argv, NULL, fn, op, &why);
    if (rc != 0) {
        op->replies--;
        bop_fail(op, rc, why ? why : "out of memory");
    }
}

/* ---- metadata ----------------------------------------------------------- */

static void on_synced(void *arg, redisReply *r, int err, const char *msg)
{
    struct bop *op = arg;
    if (!r) {
        ld_future_reject(op->out, err, "%s", msg);
    } else if (r->type == REDIS_REPLY_ERROR) {
        ld_future_reject(op->out, LD_ESTORE, "Redis: %.*s", (int)r->len, r->str);
    } else if (r->type == REDIS_REPLY_NIL) {
        ld_future_fulfill_int(op->out, LD_BIG_SEGMENT_TIME_UNKNOWN);
    } else {
        /* digits only, all of the value (no sign, no blank, no NUL),
         * and no more than a long long holds */
        char *end = NULL;
        errno = 0;
        long long v =
            r->type == REDIS_REPLY_STRING && r->len && r->str[0] >= '0' && r->str[0] <= '9'
                ? strtoll(r->str, &end, 10)
                : -1;
        if (!end || end != r->str + r->len || errno == ERANGE || v < 0)
            ld_future_reject(op->out, LD_EPARSE, "Redis: %s is not a time in milliseconds",
                             op->bs->synced_key);
        else
            ld_future_fulfill_int(op->out, (int64_t)v);
    }
    bop_done(op);
}

static void metadata_start(struct bop *op)
{
    struct rbss *bs = op->bs;
    bop_send(op, 2, (const char *[]){"GET", bs->synced_key}, on_synced);
    if (op->replies == 0) {
        ld_future_reject(op->out, op->code, "%s", op->msg);
        bop_done(op);
    }
}

static void b_get_metadata(void *impl, ld_future *out)
{
    struct rbss *bs = impl;
    struct bop *op = bop_new(bs, out, false);
    if (!op)
        return;
    if (ldr_conn_resolving(bs->conn)) {
        op->waiting = true; /* sent when the resolution ends */
        return;
    }
    metadata_start(op);
}

/* ---- membership --------------------------------------------------------- */

static void membership_end(struct bop *op)
{
    if (op->code) {
        ld_future_reject(op->out, op->code, "%s", op->msg);
        bop_done(op);
        return;
    }
    json_t *m = NULL;
    const char *why = NULL;
    int rc =
        ld_big_segment_membership_from_refs((const char *const *)op->refs[0], op->n[0],
                                            (const char *const *)op->refs[1], op->n[1], &m, &why);
    if (rc == 0)
        ld_future_fulfill_json(op->out, m);
    else
        ld_future_reject(op->out, rc == LD_EINVAL ? LD_EPARSE : rc, "Redis: %s",
                         why ? why : "a segment reference is empty");
    bop_done(op);
}

static void on_members(struct bop *op, int which, redisReply *r, int err, const char *msg)
{
    if (!r) {
        bop_fail(op, err, msg);
    } else if (r->type == REDIS_REPLY_ERROR) {
        char text[300];
        snprintf(text, sizeof(text), "Redis: %.*s", (int)r->len, r->str);
        bop_fail(op, LD_ESTORE, text);
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements && !op->code) {
        op->refs[which] = ldr_calloc(r->elements, sizeof(char *));
        if (!op->refs[which]) {
            bop_fail(op, LD_ENOMEM, "out of memory");
        } else {
            for (size_t i = 0; i < r->elements; i++) {
                redisReply *e = r->element[i];
                if (e->type != REDIS_REPLY_STRING)
                    continue;
                char *ref = ldr_strndup(e->str, e->len);
                if (!ref) {
                    bop_fail(op, LD_ENOMEM, "out of memory");
                    break;
                }
                op->refs[which][op->n[which]++] = ref;
            }
        }
    }
    if (--op->replies == 0)
        membership_end(op);
}

static void on_include(void *arg, redisReply *r, int err, const char *msg)
{
    on_members(arg, 0, r, err, msg);
}

static void on_exclude(void *arg, redisReply *r, int err, const char *msg)
{
    on_members(arg, 1, r, err, msg);
}

static void membership_start(struct bop *op, const char *hash)
{
    struct rbss *bs = op->bs;
    size_t n = strlen(bs->o.prefix) + strlen(hash) + sizeof(":big_segment_include:");
    char *inc = ldr_malloc(n), *exc = ldr_malloc(n);
    if (!inc || !exc) {
        bop_fail(op, LD_ENOMEM, "out of memory");
    } else {
        snprintf(inc, n, "%s:big_segment_include:%s", bs->o.prefix, hash);
        snprintf(exc, n, "%s:big_segment_exclude:%s", bs->o.prefix, hash);
        bop_send(op, 2, (const char *[]){"SMEMBERS", inc}, on_include);
        if (!op->code)
            bop_send(op, 2, (const char *[]){"SMEMBERS", exc}, on_exclude);
    }
    ldr_free(inc);
    ldr_free(exc);
    if (op->replies == 0)
        membership_end(op);
}

static void b_get_membership(void *impl, const char *hash, ld_future *out)
{
    struct rbss *bs = impl;
    struct bop *op = bop_new(bs, out, true);
    if (!op)
        return;
    if (ldr_conn_resolving(bs->conn)) { /* sent when the resolution ends */
        op->hash = ldr_strdup(hash);
        if (!op->hash) {
            ld_future_reject(op->out, LD_ENOMEM, NULL);
            bop_done(op);
            return;
        }
        op->waiting = true;
        return;
    }
    membership_start(op, hash);
}

/* The name resolution ended: the operations that waited are sent (or
 * fail, when it failed), from the loop. */
static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rbss *bs = arg;
    for (;;) {
        struct bop *op = bs->ops;
        while (op && !op->waiting)
            op = op->next;
        if (!op)
            return;
        op->waiting = false;
        if (op->membership)
            membership_start(op, op->hash); /* may complete op */
        else
            metadata_start(op);
    }
}

static void on_settled(void *arg)
{
    static const struct timeval now = {0, 0};
    struct rbss *bs = arg;
    event_add(bs->kick, &now);
}

/* ---- the store ---------------------------------------------------------- */

static void b_close(void *impl, ld_future *out)
{
    (void)impl; /* operations still in flight finish; the front rejects later ones */
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void b_free(void *impl)
{
    struct rbss *bs = impl;
    ldr_conn_free(bs->conn); /* no reply reaches an operation from now on */
    while (bs->ops) {
        struct bop *op = bs->ops;
        ld_future_reject(op->out, LD_ECANCELED, NULL);
        bop_done(op);
    }
    if (bs->kick)
        event_free(bs->kick);
    ldr_free(bs->synced_key);
    ldr_options_clear(&bs->o);
    ldr_free(bs);
}

static const char *b_describe(void *impl)
{
    (void)impl;
    return "redis";
}

static const struct ld_big_segment_store_ops bops = {
    .version = LD_BIG_SEGMENT_STORE_OPS_VERSION,
    .get_metadata = b_get_metadata,
    .get_membership = b_get_membership,
    .close = b_close,
    .free = b_free,
    .describe = b_describe,
};

ld_big_segment_store *ld_redis_big_segment_store_new(struct event_base *base,
                                                     const ld_redis_options *opts)
{
    if (!base)
        return NULL;
    struct rbss *bs = ldr_calloc(1, sizeof(*bs));
    if (!bs)
        return NULL;
    if (ldr_options_copy(&bs->o, opts) != 0) {
        ldr_free(bs);
        return NULL;
    }
    size_t n = strlen(bs->o.prefix) + sizeof(":big_segments_synchronized_on");
    bs->synced_key = ldr_malloc(n);
    bs->kick = evtimer_new(base, on_kick, bs);
    if (!bs->synced_key || !bs->kick) {
        b_free(bs);
        return NULL;
    }
    snprintf(bs->synced_key, n, "%s:big_segments_synchronized_on", bs->o.prefix);
    bs->conn = ldr_conn_new(base, &bs->o, NULL, NULL);
    if (!bs->conn) {
        b_free(bs);
        return NULL;
    }
    ldr_conn_on_settled(bs->conn, on_settled, bs);
    ld_big_segment_store *s = ld_big_segment_store_new(base, &bops, bs);
    if (!s)
        b_free(bs);
    return s;
}
