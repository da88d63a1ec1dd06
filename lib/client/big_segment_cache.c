/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the client's big segment cache (client-internal.h).
 *
 * A big segment store of its own (ld_big_segment_store_new() with the ops
 * below) in front of the one the options gave:
 *   - memberships by context hash in an LRU of at most cfg.size entries,
 *     each kept cfg.ttl_ms (monotonic clock); a miss asks the inner store,
 *     and the misses for one hash while that read is under way wait for it
 *     (a `query`); failures are passed on and not kept;
 *   - metadata from the last poll: the inner store's metadata is read when
 *     the cache is made and cfg.poll_ms after each read ended; reads asked
 *     before the first poll ended wait for it.
 *
 * Lifetime: the outer store owns the cache (ops->free). The inner reads
 * under way each hold the cache (`outstanding`); ops->free cancels them and
 * the cache goes with the last of their callbacks.
 */
#include <string.h>

#include <event2/event.h>

#include <ldasync/error.h>

#include "client/client-internal.h"
#include "core/core-internal.h"
#include "store/store-internal.h"

/* What the two tables chain: a key, its hash, and what holds them. */
struct node {
    struct node *hnext;
    uint32_t h;
    const char *key; /* the holder's */
    void *owner;
};

struct bsc_table {
    struct node **b;
    size_t nb, n; /* buckets (a power of two, or 0) and nodes */
};

/* A membership kept. */
struct entry {
    struct node node;
    struct entry *newer, *older; /* the LRU list */
    json_t *m;                   /* NULL: in no big segment */
    int64_t expires;             /* monotonic ms */
    char key[];
};

/* Futures of the outer store waiting for one answer. */
struct waiters {
    ld_future **v;
    size_t n, cap;
};

/* A membership read under way on the inner store. */
struct query {
    struct ld__bsc *c;
    ld_future *inner; /* our reference, to cancel it */
    struct waiters outs;
    struct node node;
    char key[];
};

struct ld__bsc {
    ld_big_segment_store *inner; /* borrowed */
    ld_big_segment_store *outer; /* owns this */
    struct ld__bsc_config cfg;
    ld__bsc_status_fn fn; /* NULL once stopped */
    void *arg;
    struct bsc_table entries, queries;
    struct entry *newest, *oldest;
    /* the poll */
    struct event *timer;
    ld_future *poll; /* our reference while a read is under way */
    struct waiters meta_outs;
    bool known, ok, stopped, gone;
    int64_t metadata;
    int err;
    char *errmsg; /* NULL: ld_strerror(err) */
    ld_big_segment_store_status status;
    int outstanding; /* inner callbacks still to run */
};

#define ENTRY_OF(n) ((struct entry *)(n)->owner)
#define QUERY_OF(n) ((struct query *)(n)->owner)

static int64_t mono_ms(void)
{
    return ld__now_ns() / 1000000;
}

/* ---- the tables ---------------------------------------------------------- */

static uint32_t key_hash(const char *s, size_t len)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

static struct node *table_find(const struct bsc_table *t, const char *key, uint32_t h)
{
    if (!t->nb)
        return NULL;
    for (struct node *n = t->b[h & (t->nb - 1)]; n; n = n->hnext)
        if (n->h == h && strcmp(n->key, key) == 0)
            return n;
    return NULL;
}

/* @return 0; LD_ENOMEM (nothing changed). */
static int table_add(struct bsc_table *t, struct node *n)
{
    if (t->n + 1 > t->nb) { /* at most one node per bucket on average */
        size_t nb = t->nb ? t->nb * 2 : 16;
        struct node **b = ld__calloc(nb, sizeof *b);
        if (!b)
            return LD_ENOMEM;
        for (size_t i = 0; i < t->nb; i++) {
            for (struct node *m = t->b[i], *next; m; m = next) {
                next = m->hnext;
                m->hnext = b[m->h & (nb - 1)];
                b[m->h & (nb - 1)] = m;
            }
        }
        ld__free(t->b);
        t->b = b;
        t->nb = nb;
    }
    struct node **head = &t->b[n->h & (t->nb - 1)];
    n->hnext = *head;
    *head = n;
    t->n++;
    return 0;
}

static void table_remove(struct bsc_table *t, struct node *n)
{
    for (struct node **p = &t->b[n->h & (t->nb - 1)]; *p; p = &(*p)->hnext) {
        if (*p == n) {
            *p = n->hnext;
            t->n--;
            return;
        }
    }
}

/* ---- waiters ------------------------------------------------------------- */

/* Takes `out` (the reference ops hand over). @return 0; LD_ENOMEM. */
static int waiters_add(struct waiters *w, ld_future *out)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 2;
        ld_future **v = ld__realloc(w->v, cap * sizeof *v);
        if (!v)
            return LD_ENOMEM;
        w->v = v;
        w->cap = cap;
    }
    w->v[w->n++] = out;
    return 0;
}

/* Releases the waiters (their futures were cancelled, or answered). */
static void waiters_clear(struct waiters *w)
{
    for (size_t i = 0; i < w->n; i++)
        ld_future_unref(w->v[i]);
    ld__free(w->v);
    w->v = NULL;
    w->n = w->cap = 0;
}

static void refuse(ld_future *out, int err)
{
    ld_future_reject(out, err, NULL);
    ld_future_unref(out);
}

/* ---- the LRU ------------------------------------------------------------- */

static void lru_unlink(struct ld__bsc *c, struct entry *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        c->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        c->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push(struct ld__bsc *c, struct entry *e)
{
    e->older = c->newest;
    e->newer = NULL;
    if (c->newest)
        c->newest->newer = e;
    c->newest = e;
    if (!c->oldest)
        c->oldest = e;
}

static void entry_drop(struct ld__bsc *c, struct entry *e)
{
    table_remove(&c->entries, &e->node);
    lru_unlink(c, e);
    json_decref(e->m);
    ld__free(e);
}

/* The entry of `hash` (its hash `h`) when it is fresh, made the most
 * recently used; else NULL (an expired one stays until entry_keep()
 * replaces it or the LRU drops it). */
static struct entry *entry_fresh(struct ld__bsc *c, const char *hash, uint32_t h)
{
    struct node *n = table_find(&c->entries, hash, h);
    struct entry *e = n ? ENTRY_OF(n) : NULL;
    if (!e || mono_ms() >= e->expires)
        return NULL;
    lru_unlink(c, e);
    lru_push(c, e);
    return e;
}

/* Keeps `m` for `key`, in place of an expired entry of it; memory running
 * out only means it is not kept. */
static void entry_keep(struct ld__bsc *c, const char *key, uint32_t h, json_t *m)
{
    struct node *old = table_find(&c->entries, key, h);
    if (old)
        entry_drop(c, ENTRY_OF(old));
    size_t len = strlen(key);
    struct entry *e = ld__malloc(sizeof *e + len + 1);
    if (!e)
        return;
    memcpy(e->key, key, len + 1);
    e->node.key = e->key;
    e->node.owner = e;
    e->node.h = h;
    if (table_add(&c->entries, &e->node) != 0) {
        ld__free(e);
        return;
    }
    e->m = json_incref(m);
    int64_t now = mono_ms();
    e->expires = c->cfg.ttl_ms > INT64_MAX - now ? INT64_MAX : now + c->cfg.ttl_ms;
    lru_push(c, e);
    while (c->entries.n > (size_t)c->cfg.size)
        entry_drop(c, c->oldest);
}

/* ---- memberships --------------------------------------------------------- */

static void query_free(struct query *q)
{
    waiters_clear(&q->outs);
    ld_future_unref(q->inner);
    ld__free(q);
}

static void maybe_free(struct ld__bsc *c)
{
    if (!c->gone || c->outstanding > 0)
        return;
    ld__free(c->entries.b);
    ld__free(c->queries.b);
    ld__free(c->errmsg);
    ld__free(c);
}

static void query_done(ld_future *f, void *arg)
{
    struct query *q = arg;
    struct ld__bsc *c = q->c;
    c->outstanding--;
    if (c->gone) { /* its waiters were released with the cache */
        query_free(q);
        maybe_free(c);
        return;
    }
    table_remove(&c->queries, &q->node);
    if (ld_future_is_fulfilled(f)) {
        json_t *m = ld_future_json(f);
        for (size_t i = 0; i < q->outs.n; i++)
            ld_future_fulfill_json(q->outs.v[i], json_incref(m));
        entry_keep(c, q->node.key, q->node.h, m);
    } else {
        for (size_t i = 0; i < q->outs.n; i++)
            ld_future_reject(q->outs.v[i], ld_future_error(f), "%s", ld_future_error_message(f));
    }
    query_free(q);
}

static void bsc_get_membership(void *impl, const char *hash, ld_future *out)
{
    struct ld__bsc *c = impl;
    size_t len = strlen(hash);
    uint32_t h = key_hash(hash, len);
    struct entry *e = entry_fresh(c, hash, h);
    if (e) {
        ld_future_fulfill_json(out, json_incref(e->m));
        ld_future_unref(out);
        return;
    }
    struct node *n = table_find(&c->queries, hash, h);
    if (n) {
        if (waiters_add(&QUERY_OF(n)->outs, out) != 0)
            refuse(out, LD_ENOMEM);
        return;
    }
    struct query *q = ld__calloc(1, sizeof *q + len + 1);
    if (q) {
        q->c = c;
        q->node.h = h;
        memcpy(q->key, hash, len + 1);
        q->node.key = q->key;
        q->node.owner = q;
    }
    if (!q || table_add(&c->queries, &q->node) != 0) {
        ld__free(q);
        refuse(out, LD_ENOMEM);
        return;
    }
    if (waiters_add(&q->outs, out) != 0) {
        table_remove(&c->queries, &q->node);
        ld__free(q);
        refuse(out, LD_ENOMEM);
        return;
    }
    ld_future *f = ld_big_segment_store_get_membership(c->inner, hash);
    q->inner = ld_future_ref(f);
    c->outstanding++;
    if (ld_future_on_complete(f, query_done, q) != 0) {
        c->outstanding--;
        table_remove(&c->queries, &q->node);
        ld_future_cancel(q->inner);
        for (size_t i = 0; i < q->outs.n; i++)
            ld_future_reject(q->outs.v[i], LD_ENOMEM, NULL);
        query_free(q);
    }
}

/* The answer within the call (store-internal.h): a membership kept and
 * fresh, once the first poll ended. Nothing is dropped here (the caller
 * may hold memberships answered before). */
static int bsc_now(void *impl, const char *hash, int64_t stale_after_ms, const json_t **m,
                   int *status)
{
    struct ld__bsc *c = impl;
    struct entry *e = c->known ? entry_fresh(c, hash, key_hash(hash, strlen(hash))) : NULL;
    if (!e)
        return LD_EBUSY;
    *m = e->m;
    if (!c->ok)
        *status = LD_BIG_SEGMENTS_STATUS_STORE_ERROR;
    else if (ld_big_segment_is_stale(c->metadata, ld__now_ms(), stale_after_ms))
        *status = LD_BIG_SEGMENTS_STATUS_STALE;
    else
        *status = LD_BIG_SEGMENTS_STATUS_HEALTHY;
    return 0;
}

/* ---- the poll ------------------------------------------------------------ */

static void answer_metadata(struct ld__bsc *c, ld_future *out)
{
    if (c->ok)
        ld_future_fulfill_int(out, c->metadata);
    else if (c->errmsg)
        ld_future_reject(out, c->err, "%s", c->errmsg);
    else
        ld_future_reject(out, c->err, NULL);
}

static void bsc_get_metadata(void *impl, ld_future *out)
{
    struct ld__bsc *c = impl;
    if (c->known) {
        answer_metadata(c, out);
        ld_future_unref(out);
    } else if (waiters_add(&c->meta_outs, out) != 0) {
        refuse(out, LD_ENOMEM);
    }
}

static void poll_done(ld_future *f, void *arg);

/* @return 0; LD_ENOMEM (no read is under way). */
static int poll_start(struct ld__bsc *c)
{
    ld_future *f = ld_big_segment_store_get_metadata(c->inner);
    c->poll = ld_future_ref(f);
    c->outstanding++;
    if (ld_future_on_complete(f, poll_done, c) != 0) {
        c->outstanding--;
        ld_future_cancel(c->poll);
        ld_future_unref(c->poll);
        c->poll = NULL;
        return LD_ENOMEM;
    }
    return 0;
}

/* A poll ended: the status, the waiting reads, the next poll, and last
 * (it may free everything) the status function. */
static void poll_ended(struct ld__bsc *c, bool ok, int64_t metadata, int err, const char *msg)
{
    bool had = c->known;
    c->known = true;
    c->ok = ok;
    c->metadata = metadata;
    /* Answered to the reads until the next poll as the store's failure:
     * one read that ran out of memory does not fail every evaluation with
     * LD_ENOMEM for as long as the poll interval. */
    c->err = err == LD_ENOMEM ? LD_ESTORE : err;
    ld__free(c->errmsg);
    if (!msg && err == LD_ENOMEM)
        msg = "the big segment store's metadata read ran out of memory";
    c->errmsg = msg ? ld__strdup(msg) : NULL;
    for (size_t i = 0; i < c->meta_outs.n; i++)
        answer_metadata(c, c->meta_outs.v[i]);
    waiters_clear(&c->meta_outs);
    ld_big_segment_store_status st = {
        .available = ok,
        .stale = ok && ld_big_segment_is_stale(metadata, ld__now_ms(), c->cfg.stale_after_ms)};
    bool changed = !had || st.available != c->status.available || st.stale != c->status.stale;
    c->status = st;
    if (!c->stopped) {
        struct timeval tv = {.tv_sec = (time_t)(c->cfg.poll_ms / 1000),
                             .tv_usec = (suseconds_t)(c->cfg.poll_ms % 1000 * 1000)};
        evtimer_add(c->timer, &tv);
    }
    if (changed && c->fn)
        c->fn(c->arg, &st);
}

static void poll_done(ld_future *f, void *arg)
{
    struct ld__bsc *c = arg;
    c->outstanding--;
    ld_future_unref(c->poll);
    c->poll = NULL;
    if (c->gone) {
        maybe_free(c);
        return;
    }
    if (ld_future_is_fulfilled(f))
        poll_ended(c, true, ld_future_int(f), 0, NULL);
    else
        poll_ended(c, false, 0, ld_future_error(f), ld_future_error_message(f));
}

static void poll_timer(evutil_socket_t fd, short what, void *arg)
{
    struct ld__bsc *c = arg;
    (void)fd;
    (void)what;
    if (!c->stopped && !c->poll && poll_start(c) != 0)
        poll_ended(c, false, 0, LD_ENOMEM, NULL);
}

/* ---- the store's ops and the cache's life -------------------------------- */

/* The outer store is freed: what waits is released (the front rejected it
 * already), the inner reads under way are cancelled, and the cache goes
 * with the last of their callbacks. */
static void bsc_free(void *impl)
{
    struct ld__bsc *c = impl;
    c->gone = true;
    waiters_clear(&c->meta_outs);
    for (size_t i = 0; i < c->queries.nb; i++) {
        for (struct node *n = c->queries.b[i]; n; n = n->hnext) {
            struct query *q = QUERY_OF(n);
            waiters_clear(&q->outs);
            ld_future_cancel(q->inner);
        }
    }
    if (c->poll)
        ld_future_cancel(c->poll);
    while (c->oldest)
        entry_drop(c, c->oldest);
    maybe_free(c);
}

static const char *bsc_describe(void *impl)
{
    (void)impl;
    return "cache";
}

static const struct ld_big_segment_store_ops bsc_ops = {
    .version = LD_BIG_SEGMENT_STORE_OPS_VERSION,
    .get_metadata = bsc_get_metadata,
    .get_membership = bsc_get_membership,
    .free = bsc_free,
    .describe = bsc_describe,
};

struct ld__bsc *ld__bsc_new(struct event_base *base, ld_big_segment_store *inner,
                            const struct ld__bsc_config *cfg, ld__bsc_status_fn fn, void *arg)
{
    struct ld__bsc *c = ld__calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->inner = inner;
    c->cfg = *cfg;
    c->fn = fn;
    c->arg = arg;
    c->timer = evtimer_new(base, poll_timer, c);
    if (!c->timer) {
        ld__free(c);
        return NULL;
    }
    c->outer = ld_big_segment_store_new(base, &bsc_ops, c);
    if (!c->outer) {
        event_free(c->timer);
        ld__free(c);
        return NULL;
    }
    ld__big_segment_store_set_now(c->outer, bsc_now);
    if (poll_start(c) != 0) {
        ld__bsc_free(c);
        return NULL;
    }
    return c;
}

ld_big_segment_store *ld__bsc_store(struct ld__bsc *c)
{
    return c->outer;
}

int ld__bsc_status(const struct ld__bsc *c, ld_big_segment_store_status *out)
{
    if (!c->known)
        return LD_EBUSY;
    *out = c->status;
    return 0;
}

void ld__bsc_stop(struct ld__bsc *c)
{
    c->stopped = true;
    c->fn = NULL;
    evtimer_del(c->timer);
}

void ld__bsc_free(struct ld__bsc *c)
{
    if (!c)
        return;
    ld__bsc_stop(c);
    event_free(c->timer);
    c->timer = NULL;
    ld_big_segment_store_free(c->outer); /* bsc_free(), now or from the loop */
}
