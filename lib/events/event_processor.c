/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the default event processor (events.h).
 *
 * On the loop, an evaluation becomes a count in the summarizer and, for a
 * flag that asks for them, records (struct ld__ev_record: references to
 * the flag, its value, the default and the context; no JSON); a context
 * seen for the first time (its fully-qualified key's hash not in the LRU)
 * an index record. A flush hands the records and the summary to a batch:
 * the worker writes its JSON (payload.c) and compresses it, the loop then
 * lets go of what the records held and the sender posts the body. Batches
 * are independent of the processor once made: freeing the processor
 * leaves each to end from the loop (its worker job rejected, its post
 * cancelled) and free itself.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include <ldasync/error.h>
#include <ldasync/events.h>
#include <ldasync/version.h>

#include "core/core-internal.h"
#include "eval/eval-internal.h"
#include "events/events-internal.h"
#include "model/model-internal.h"
#include "net/net-internal.h"
#include "store/store-internal.h"

#define MAX_BATCHES 5
#define MIN_DIAG_MS 60000

/* ---- configuration ------------------------------------------------------- */

struct ld_events_config {
    int capacity;
    int64_t flush_ms;
    int keys;
    int64_t keys_ms;
    bool all_private;
    bool gzip;
    bool omit_anonymous;
    bool diagnostics;
    int64_t diag_ms;
    char **refs;
    size_t nrefs;
    ld_events_warning_fn warn;
    void *warn_arg;
};

ld_events_config *ld_events_config_new(void)
{
    ld_events_config *c = ld__calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->capacity = 10000;
    c->flush_ms = 5000;
    c->keys = 1000;
    c->keys_ms = 300000;
    c->diagnostics = true;
    c->diag_ms = 900000;
    return c;
}

void ld_events_config_free(ld_events_config *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nrefs; i++)
        ld__free(c->refs[i]);
    ld__free(c->refs);
    ld__free(c);
}

int ld_events_config_set_capacity(ld_events_config *c, int capacity)
{
    if (!c || capacity <= 0)
        return LD_EINVAL;
    c->capacity = capacity;
    return 0;
}

int ld_events_config_set_flush_interval(ld_events_config *c, int64_t ms)
{
    if (!c || ms <= 0)
        return LD_EINVAL;
    c->flush_ms = ms;
    return 0;
}

int ld_events_config_set_context_keys(ld_events_config *c, int capacity, int64_t flush_ms)
{
    if (!c || capacity <= 0 || flush_ms <= 0)
        return LD_EINVAL;
    c->keys = capacity;
    c->keys_ms = flush_ms;
    return 0;
}

int ld_events_config_set_all_attributes_private(ld_events_config *c, bool all)
{
    if (!c)
        return LD_EINVAL;
    c->all_private = all;
    return 0;
}

int ld_events_config_add_private_attribute(ld_events_config *c, const char *ref)
{
    if (!c || !ref)
        return LD_EINVAL;
    char **refs = ld__realloc(c->refs, (c->nrefs + 1) * sizeof *refs);
    if (!refs)
        return LD_ENOMEM;
    c->refs = refs;
    size_t len = strlen(ref);
    char *r = ld__malloc(len + 1);
    if (!r)
        return LD_ENOMEM;
    memcpy(r, ref, len + 1);
    c->refs[c->nrefs++] = r;
    return 0;
}

int ld_events_config_set_gzip(ld_events_config *c, bool gzip)
{
    if (!c)
        return LD_EINVAL;
    c->gzip = gzip;
    return 0;
}

int ld_events_config_set_omit_anonymous_contexts(ld_events_config *c, bool omit)
{
    if (!c)
        return LD_EINVAL;
    c->omit_anonymous = omit;
    return 0;
}

int ld_events_config_set_diagnostics(ld_events_config *c, bool enabled, int64_t interval_ms)
{
    if (!c || interval_ms < MIN_DIAG_MS)
        return LD_EINVAL;
    c->diagnostics = enabled;
    c->diag_ms = interval_ms;
    return 0;
}

int ld_events_config_set_warning_fn(ld_events_config *c, ld_events_warning_fn fn, void *arg)
{
    if (!c)
        return LD_EINVAL;
    c->warn = fn;
    c->warn_arg = arg;
    return 0;
}

ld_events_config *ld__events_config_copy(const ld_events_config *from)
{
    ld_events_config *c = ld_events_config_new();
    if (!c || !from)
        return c;
    for (size_t i = 0; i < from->nrefs; i++) {
        if (ld_events_config_add_private_attribute(c, from->refs[i]) != 0) {
            ld_events_config_free(c);
            return NULL;
        }
    }
    char **refs = c->refs;
    size_t nrefs = c->nrefs;
    *c = *from;
    c->refs = refs;
    c->nrefs = nrefs;
    return c;
}

/* ---- the LRU of context keys (by the hash of the fully-qualified key) ---- */

struct lru_node {
    uint64_t h;
    uint32_t prev, next; /* toward the most and the least recently used; UINT32_MAX: none */
};

/* The nodes and the table grow with the keys seen (doubling, up to `cap`):
 * a large capacity costs nothing until that many contexts come. */
struct lru {
    struct lru_node *nodes;
    uint32_t *slots;    /* node index + 1; 0: empty */
    uint32_t cap, n;    /* keys at most; keys held */
    uint32_t allocated; /* nodes allocated (<= cap) */
    uint32_t mask;      /* the table's size - 1 (size >= 2 * allocated) */
    uint32_t head, tail;
};

#define LRU_FIRST 64u

/* Makes room for `nodes` nodes (<= cap), the table rebuilt twice as
 * large. @return 0, or LD_ENOMEM (nothing changes). */
static int lru_reserve(struct lru *l, uint32_t nodes)
{
    size_t size = 16;
    while (size < (size_t)nodes * 2)
        size *= 2;
    struct lru_node *nn = ld__realloc(l->nodes, (size_t)nodes * sizeof *nn);
    if (!nn)
        return LD_ENOMEM;
    l->nodes = nn;
    uint32_t *slots = ld__calloc(size, sizeof *slots);
    if (!slots)
        return LD_ENOMEM; /* the nodes grew, but allocated is unchanged */
    uint32_t mask = (uint32_t)(size - 1);
    for (uint32_t i = 0; i < l->n; i++) {
        uint32_t s = (uint32_t)nn[i].h & mask;
        while (slots[s])
            s = (s + 1) & mask;
        slots[s] = i + 1;
    }
    ld__free(l->slots);
    l->slots = slots;
    l->mask = mask;
    l->allocated = nodes;
    return 0;
}

static int lru_init(struct lru *l, int cap)
{
    memset(l, 0, sizeof *l);
    l->cap = (uint32_t)cap;
    l->head = l->tail = UINT32_MAX;
    return lru_reserve(l, l->cap < LRU_FIRST ? l->cap : LRU_FIRST);
}

static void lru_clear(struct lru *l)
{
    memset(l->slots, 0, ((size_t)l->mask + 1) * sizeof *l->slots);
    l->n = 0;
    l->head = l->tail = UINT32_MAX;
}

static void lru_unlink(struct lru *l, uint32_t i)
{
    struct lru_node *x = &l->nodes[i];
    if (x->prev != UINT32_MAX)
        l->nodes[x->prev].next = x->next;
    else
        l->head = x->next;
    if (x->next != UINT32_MAX)
        l->nodes[x->next].prev = x->prev;
    else
        l->tail = x->prev;
}

static void lru_push_front(struct lru *l, uint32_t i)
{
    struct lru_node *x = &l->nodes[i];
    x->prev = UINT32_MAX;
    x->next = l->head;
    if (l->head != UINT32_MAX)
        l->nodes[l->head].prev = i;
    l->head = i;
    if (l->tail == UINT32_MAX)
        l->tail = i;
}

/* Removes the slot `s` (linear probing: the entries after it move back). */
static void lru_slot_delete(struct lru *l, uint32_t s)
{
    for (uint32_t j = s;;) {
        j = (j + 1) & l->mask;
        if (!l->slots[j])
            break;
        uint32_t home = (uint32_t)l->nodes[l->slots[j] - 1].h & l->mask;
        /* The entry at j may move to s if its home is not within (s, j]. */
        bool inside = s <= j ? (home > s && home <= j) : (home > s || home <= j);
        if (!inside) {
            l->slots[s] = l->slots[j];
            s = j;
        }
    }
    l->slots[s] = 0;
}

/* True if `h` was there (it becomes the most recently used); else it is
 * added, the least recently used going when full. */
static bool lru_seen(struct lru *l, uint64_t h)
{
    uint32_t s = (uint32_t)h & l->mask;
    for (; l->slots[s]; s = (s + 1) & l->mask) {
        uint32_t i = l->slots[s] - 1;
        if (l->nodes[i].h == h) {
            if (l->head != i) {
                lru_unlink(l, i);
                lru_push_front(l, i);
            }
            return true;
        }
    }
    uint32_t i;
    if (l->n == l->allocated && l->allocated < l->cap) {
        uint32_t more = l->allocated > l->cap / 2 ? l->cap : l->allocated * 2;
        if (lru_reserve(l, more) == 0) { /* else: full at what it has */
            s = (uint32_t)h & l->mask;
            while (l->slots[s])
                s = (s + 1) & l->mask;
        }
    }
    if (l->n < l->allocated) {
        i = l->n++;
    } else {
        i = l->tail;
        uint32_t t = (uint32_t)l->nodes[i].h & l->mask;
        while (l->slots[t] != i + 1)
            t = (t + 1) & l->mask;
        lru_unlink(l, i);
        lru_slot_delete(l, t);
        s = (uint32_t)h & l->mask; /* the deletion may have moved entries */
        while (l->slots[s])
            s = (s + 1) & l->mask;
    }
    l->nodes[i].h = h;
    l->slots[s] = i + 1;
    lru_push_front(l, i);
    return false;
}

static void lru_free(struct lru *l)
{
    ld__free(l->nodes);
    ld__free(l->slots);
}

/* ---- records ------------------------------------------------------------- */

static void record_release(struct ld__ev_record *r)
{
    switch (r->kind) {
    case LD__EV_FEATURE:
    case LD__EV_DEBUG:
        if (r->variation < 0)
            json_decref(r->value); /* the fallback's, referenced */
        json_decref(r->dflt);
        ld__line_free((void *)r->reason);
        ld__item_unref(r->hold);
        ld__item_unref(r->hold_of);
        break;
    case LD__EV_CUSTOM:
        json_decref(r->dflt);
        ld__free(r->hold); /* the key's copy */
        break;
    case LD__EV_RAW:
        json_decref(r->dflt);
        break;
    default:
        break;
    }
    ld_context_unref(r->ctx);
}

/* ---- the processor -------------------------------------------------------- */

struct batch;

struct ld__events {
    struct event_base *base;
    ld_event_processor *ep;
    ld_events_config *cfg;
    struct ld__ctx_format *fmt;
    struct ld__summarizer *sum;
    struct ld__ev_sender *sender;
    struct ld__worker *worker;
    struct lru keys;
    ld_context *last_ctx; /* the context context_seen() saw last (referenced) */
    int64_t sum_start;    /* the time of the summary's first record */
    struct ld__ev_record *recs;
    size_t n, cap;
    struct event *flush_timer, *keys_timer, *diag_timer, *warn_ev;
    struct batch *batches; /* under way, oldest first */
    int nbatches;
    ld_future **waiting; /* flushes waiting for a batch to end (five were under way) */
    size_t nwaiting, capwaiting;
    ld_future *closing; /* the close's, once every batch has ended */
    bool closed;
    bool warned;
    bool flush_again; /* a flush found five batches under way */
    ld_events_stats stats;
    /* diagnostics */
    char diag_id[37];
    char key_suffix[7];
    int64_t diag_since;
    uint64_t diag_dropped, diag_dedup, last_batch;
};

struct batch {
    struct batch *next;
    struct ld__events *e; /* NULL once the processor is freed */
    const struct ld__ctx_format *fmt;
    struct ld__ev_record *recs;
    size_t n;
    struct ld__summary *summary;
    size_t released;          /* records let go of so far (after the write) */
    struct event *release_ev; /* lets go of the next slice of them */
    bool posted;              /* the post is over (or never made) */
    bool gzip;
    bool ok;
    ld_future **outs; /* explicit flushes that wait for this batch */
    size_t nouts;
};

static const struct ld_event_processor_ops default_ops;

struct ld__events *ld__events_of(const ld_event_processor *ep)
{
    return ld__event_processor_impl(ep, &default_ops);
}

/* The time of an event, in epoch ms: the system's coarse real-time clock
 * (a few ns, to the kernel's tick). Not libevent's cached time: it is the
 * monotonic clock plus an offset synchronized every few seconds, which can
 * stray from the real time by more than a second. */
static int64_t now_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME_COARSE, &ts) != 0)
        return ld__now_ms();
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Room for one more record: false (counted as dropped, with one warning)
 * when the buffer is full or memory ran out. */
static struct ld__ev_record *record_slot(struct ld__events *e)
{
    if (e->n >= (size_t)e->cfg->capacity) {
        e->stats.dropped++;
        e->diag_dropped++;
        if (!e->warned) {
            e->warned = true;
            /* From the loop, never inside the call that dropped the event
             * (the warning function may close or free the client). */
            if (e->cfg->warn)
                event_active(e->warn_ev, EV_TIMEOUT, 0);
        }
        return NULL;
    }
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        if (cap > (size_t)e->cfg->capacity)
            cap = (size_t)e->cfg->capacity;
        struct ld__ev_record *r = ld__realloc(e->recs, cap * sizeof *r);
        if (!r) {
            e->stats.dropped++;
            e->diag_dropped++;
            return NULL;
        }
        e->recs = r;
        e->cap = cap;
    }
    struct ld__ev_record *r = &e->recs[e->n];
    memset(r, 0, sizeof *r);
    r->variation = LD__NO_VARIATION;
    r->version = LD__NO_VERSION;
    return r;
}

static void record_commit(struct ld__events *e)
{
    e->n++;
    e->stats.events++;
}

/* True if every kind of `ctx` is anonymous. */
static bool all_anonymous(const ld_context *ctx)
{
    size_t n = ld_context_kind_count(ctx);
    for (size_t i = 0; i < n; i++)
        if (!ld_context_anonymous(ctx, ld_context_kind(ctx, i)))
            return false;
    return true;
}

/* `ctx` without its anonymous kinds (a new reference; `ctx` itself, with
 * one more reference, when it has none); NULL when none remain or memory
 * ran out. */
static ld_context *without_anonymous(ld_context *ctx)
{
    size_t n = ld_context_kind_count(ctx), anon = 0;
    for (size_t i = 0; i < n; i++)
        anon += ld_context_anonymous(ctx, ld_context_kind(ctx, i));
    if (anon == 0)
        return ld_context_ref(ctx);
    if (anon == n)
        return NULL;
    json_t *j = ld_context_to_json(ctx);
    if (!j)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *k = ld_context_kind(ctx, i);
        if (ld_context_anonymous(ctx, k))
            json_object_del(j, k);
    }
    ld_context *out = ld_context_from_json(j, NULL);
    json_decref(j);
    return out;
}

/* An index event for `ctx` unless its key was seen (or anonymous contexts
 * are left out of them). */
/* Whether `ctx`'s key was in the LRU (it is now, the most recent). The
 * context seen last is remembered (referenced, so that its address is not
 * another's): evaluations of many flags for one context look its key up
 * once. */
static __attribute__((noinline)) bool context_lookup(struct ld__events *e, const ld_context *ctx)
{
    const char *fq = ld_context_fully_qualified_key(ctx);
    bool seen = lru_seen(&e->keys, ld__hash_bytes(fq, strlen(fq)));
    ld_context_unref(e->last_ctx);
    e->last_ctx = ld_context_ref((ld_context *)ctx);
    return seen;
}

/* Inlined: the context seen last (the LRU's most recent already) costs no
 * call; another is looked up by context_lookup(). */
static inline __attribute__((always_inline)) bool context_seen(struct ld__events *e,
                                                               const ld_context *ctx, bool count)
{
    bool seen = ctx == e->last_ctx || context_lookup(e, ctx);
    if (seen && count) { /* an index event not made */
        e->stats.deduplicated++;
        e->diag_dedup++;
    }
    return seen;
}

/* The index event of `ctx`, whose key the LRU did not have. */
static void index_record(struct ld__events *e, const ld_context *ctx, int64_t now)
{
    ld_context *c = (ld_context *)ctx;
    if (e->cfg->omit_anonymous) {
        c = without_anonymous(c);
        if (!c)
            return;
    } else {
        ld_context_ref(c);
    }
    struct ld__ev_record *r = record_slot(e);
    if (!r) {
        ld_context_unref(c);
        return;
    }
    r->kind = LD__EV_INDEX;
    r->creation_ms = now;
    r->ctx = c;
    record_commit(e);
}

/* A feature or debug record of evaluation `ev`. */
static void feature_record(struct ld__events *e, const struct ld__eval_rec *ev, uint8_t kind,
                           bool reason, int64_t now)
{
    const ld_detail *d = ev->d;
    ld_detail *why = NULL;
    if (reason) {
        why = ld__line_alloc();
        if (!why) {
            e->stats.dropped++;
            return;
        }
        *why = *d;
        why->flag = NULL;
        why->value = NULL;
    }
    struct ld__ev_record *r = record_slot(e);
    if (!r) {
        ld__line_free(why);
        return;
    }
    r->kind = kind;
    r->creation_ms = now;
    /* The flag's own key: `ev->key` is the caller's, gone after the call. */
    r->key = ev->flag->h.key.s;
    r->key_len = ev->flag->h.key.len;
    r->hold = ld__item_ref((struct ld__item *)&ev->flag->h);
    r->version = ev->flag->h.version;
    r->variation = d->index;
    r->value = d->index >= 0 ? d->value : json_incref((json_t *)ev->fallback);
    r->dflt = json_incref((json_t *)ev->fallback);
    r->reason = why;
    r->ctx = ld_context_ref((ld_context *)ev->ctx);
    if (ev->prereq_of) {
        r->hold_of = ld__item_ref((struct ld__item *)&ev->prereq_of->h);
        r->prereq_of = ev->prereq_of->h.key.s;
        r->prereq_of_len = ev->prereq_of->h.key.len;
    }
    record_commit(e);
}

void ld__events_record_eval(void *arg, const struct ld__eval_rec *ev)
{
    struct ld__events *e = arg;
    if (e->closed)
        return;
    /* The clock is read when something needs it: the summary's start (the
     * first record of an interval; its end is the flush's time), an
     * event's creationDate. */
    int64_t now = 0;
    if (ld__summarizer_empty(e->sum))
        e->sum_start = now = now_ms();
    const struct ld__flag *f = ev->flag;
    const ld_detail *d = ev->d;
    json_t *value = d->index >= 0 ? d->value : (json_t *)ev->fallback;
    ld__summarizer_record(e->sum, ev->key, ev->key_len, f ? f->h.version : LD__NO_VERSION, d->index,
                          value, (json_t *)ev->fallback, ev->ctx, e->sum_start);
    if (!(e->cfg->omit_anonymous && all_anonymous(ev->ctx)) && !context_seen(e, ev->ctx, true))
        index_record(e, ev->ctx, now ? now : (now = now_ms()));
    if (!f || !(f->track_events || f->has_debug || f->track_fallthrough || d->in_experiment ||
                d->kind == LD_REASON_RULE_MATCH))
        return;
    if (!now)
        now = now_ms();
    bool experiment = ld__tracks_reason(f, d);
    if (f->track_events || experiment)
        feature_record(e, ev, LD__EV_FEATURE, ev->with_reason || experiment, now);
    if (f->has_debug) {
        /* This machine's clock to the millisecond, not the coarse one
         * (behind by up to a tick): debug events end at the date. */
        int64_t server = ld__ev_sender_server_time(e->sender);
        if (f->debug_until > ld__now_ms() && f->debug_until > server)
            feature_record(e, ev, LD__EV_DEBUG, ev->with_reason || experiment, now);
    }
}

int ld__events_identify(struct ld__events *e, ld_context *ctx)
{
    if (e->closed)
        return LD_ECLOSED;
    int64_t now = now_ms();
    context_seen(e, ctx, false); /* no index event follows */
    ld_context *c = e->cfg->omit_anonymous ? without_anonymous(ctx) : ld_context_ref(ctx);
    if (!c)
        return 0; /* anonymous only: nothing to send */
    struct ld__ev_record *r = record_slot(e);
    if (!r) {
        ld_context_unref(c);
        return LD_EBUSY;
    }
    r->kind = LD__EV_IDENTIFY;
    r->creation_ms = now;
    r->ctx = c;
    record_commit(e);
    return 0;
}

int ld__events_custom(struct ld__events *e, const char *key, ld_context *ctx, json_t *data,
                      bool has_metric, double metric)
{
    if (e->closed)
        return LD_ECLOSED;
    int64_t now = now_ms();
    if (!(e->cfg->omit_anonymous && all_anonymous(ctx)))
        if (!context_seen(e, ctx, true))
            index_record(e, ctx, now);
    size_t len = strlen(key);
    char *k = ld__malloc(len + 1);
    if (!k)
        return LD_ENOMEM;
    memcpy(k, key, len + 1);
    struct ld__ev_record *r = record_slot(e);
    if (!r) {
        ld__free(k);
        return LD_EBUSY;
    }
    r->kind = LD__EV_CUSTOM;
    r->creation_ms = now;
    r->key = k;
    r->key_len = len;
    r->hold = k;
    r->dflt = json_incref(data);
    r->ctx = ld_context_ref(ctx);
    r->has_metric = has_metric;
    r->metric = metric;
    record_commit(e);
    return 0;
}

static int ep_send_event(void *impl, json_t *event)
{
    struct ld__events *e = impl;
    struct ld__ev_record *r = record_slot(e);
    if (!r)
        return LD_EBUSY;
    r->kind = LD__EV_RAW;
    r->dflt = json_incref(event);
    record_commit(e);
    return 0;
}

/* ---- batches ------------------------------------------------------------- */

static void batch_free(struct batch *b)
{
    for (size_t i = b->released; i < b->n; i++)
        record_release(&b->recs[i]);
    ld__free(b->recs);
    if (b->release_ev)
        event_free(b->release_ev);
    ld__summary_free(b->summary);
    for (size_t i = 0; i < b->nouts; i++) {
        ld_future_fulfill_bool(b->outs[i], b->ok);
        ld_future_unref(b->outs[i]);
    }
    ld__free(b->outs);
    ld__free(b);
}

struct body {
    char *s;
    size_t len;
};

static void body_free(void *p)
{
    struct body *b = p;
    if (b)
        ld__free(b->s);
    ld__free(b);
}

static void *write_job(const struct ld__work *job, void *arg, int *code)
{
    (void)job;
    struct batch *b = arg;
    struct body *out = ld__malloc(sizeof *out);
    if (!out) {
        ld__summary_reset(b->summary);
        return NULL;
    }
    int rc = ld__payload_write(b->fmt, b->recs, b->n, b->summary, b->gzip, &out->s, &out->len);
    /* the summary's table is made ready for the interval after next here,
     * off the loop (10,000 flags' counters); its values are released on the
     * loop when it is given back (written()) */
    ld__summary_reset(b->summary);
    if (rc != 0) {
        ld__free(out);
        *code = rc;
        return NULL;
    }
    return out;
}

static void maybe_closed(struct ld__events *e);
static void flush_now(struct ld__events *e, ld_future *out);

/* The batch is over: it leaves the processor's list, and a flush that
 * waited for room runs. */
static void batch_end(struct batch *b, bool ok)
{
    b->ok = ok;
    struct ld__events *e = b->e;
    if (e) {
        for (struct batch **p = &e->batches; *p; p = &(*p)->next) {
            if (*p == b) {
                *p = b->next;
                break;
            }
        }
        e->nbatches--;
        if (ok)
            e->stats.payloads_sent++;
        else
            e->stats.payloads_dropped++;
    }
    batch_free(b);
    if (e && (e->flush_again || e->nwaiting)) {
        e->flush_again = false;
        flush_now(e, NULL);
    }
    if (e)
        maybe_closed(e);
}

/* Records let go of in one pass of the loop, at most (what 200,000
 * feature events held is let go of in slices: no pass holds the loop). */
#define RELEASE_SLICE 4096

/* The batch ends once its post is over and its records let go of. */
static void maybe_end(struct batch *b)
{
    if (b->posted && b->released == b->n)
        batch_end(b, b->ok);
}

/* The next slice from the next pass of the loop: a timer due at once (an
 * event made active from a callback runs in the same pass, so all the
 * slices ran in one). Without a timer, the rest at once. */
static void release_later(struct batch *b)
{
    static const struct timeval now = {0, 0};
    if (event_add(b->release_ev, &now) != 0) {
        while (b->released < b->n)
            record_release(&b->recs[b->released++]);
        maybe_end(b);
    }
}

static void release_some(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct batch *b = arg;
    size_t end = b->n - b->released > RELEASE_SLICE ? b->released + RELEASE_SLICE : b->n;
    for (; b->released < end; b->released++)
        record_release(&b->recs[b->released]);
    if (b->released < b->n)
        release_later(b);
    else
        maybe_end(b);
}

static void posted(ld_future *f, void *arg)
{
    struct batch *b = arg;
    b->ok = ld_future_is_fulfilled(f) && ld_future_bool(f);
    b->posted = true;
    maybe_end(b);
}

static void written(ld_future *f, void *arg)
{
    struct batch *b = arg;
    /* the summary's table, reset by the worker, goes back to the summarizer;
     * the values it held are released here, on the loop */
    ld__summarizer_reuse(b->e ? b->e->sum : NULL, b->summary);
    b->summary = NULL;
    struct body *body = ld_future_is_fulfilled(f) ? ld_future_ptr(f) : NULL;
    ld_future *post = NULL;
    if (body && b->e) {
        char *s = body->s;
        body->s = NULL;
        post = ld__ev_sender_post(b->e->sender, LD__EV_ANALYTICS, s, body->len, b->gzip);
    }
    if (!post || ld_future_on_complete(post, posted, b) != 0) { /* steals it */
        b->ok = false;
        b->posted = true;
    }
    /* What the records held is let go of on the loop, now that the worker
     * is done with them, while the payload is posted: from the next pass
     * (this one let go of the summary's values). */
    if (b->n)
        release_later(b);
    else
        maybe_end(b);
}

/* Adds `out` (a reference taken) to what waits for batch `b`. */
static int batch_wait(struct batch *b, ld_future *out)
{
    ld_future **o = ld__realloc(b->outs, (b->nouts + 1) * sizeof *o);
    if (!o)
        return LD_ENOMEM;
    b->outs = o;
    o[b->nouts++] = out;
    return 0;
}

/* Makes a batch of the buffer and the summary and starts it; `out`
 * (owned, may be NULL) is fulfilled when it ends. */
static void flush_now(struct ld__events *e, ld_future *out)
{
    /* Flushes that waited for room go with this one. */
    bool empty = e->n == 0 && ld__summarizer_empty(e->sum);
    if (empty) {
        if (out) {
            /* Nothing new: it waits for what is under way, if anything. */
            struct batch *last = e->batches;
            while (last && last->next)
                last = last->next;
            if (!last || batch_wait(last, out) != 0) {
                ld_future_fulfill_bool(out, true);
                ld_future_unref(out);
            }
        }
        for (size_t i = 0; i < e->nwaiting; i++) {
            ld_future_fulfill_bool(e->waiting[i], true);
            ld_future_unref(e->waiting[i]);
        }
        e->nwaiting = 0;
        return;
    }
    if (e->nbatches >= MAX_BATCHES) {
        e->flush_again = true;
        if (out) {
            ld_future **w = e->nwaiting == e->capwaiting
                                ? ld__realloc(e->waiting, (e->capwaiting * 2 + 4) * sizeof *w)
                                : e->waiting;
            if (!w) {
                ld_future_fulfill_bool(out, false);
                ld_future_unref(out);
                return;
            }
            if (w != e->waiting) {
                e->waiting = w;
                e->capwaiting = e->capwaiting * 2 + 4;
            }
            e->waiting[e->nwaiting++] = out;
        }
        return;
    }
    struct batch *b = ld__calloc(1, sizeof *b);
    struct ld__summary *summary = NULL;
    if (!b || ld__summarizer_take(e->sum, &summary) != 0) {
        ld__free(b);
        if (out) {
            ld_future_fulfill_bool(out, false);
            ld_future_unref(out);
        }
        return;
    }
    ld__summary_end_at(summary, now_ms()); /* records give the interval's start only */
    b->e = e;
    b->fmt = e->fmt; /* the worker is joined before it is freed */
    b->recs = e->recs;
    b->n = e->n;
    b->summary = summary;
    b->gzip = e->cfg->gzip;
    e->last_batch = e->n;
    e->recs = NULL;
    e->n = e->cap = 0;
    e->warned = false;
    if (out && batch_wait(b, out) != 0) {
        ld_future_fulfill_bool(out, false);
        ld_future_unref(out);
    }
    for (size_t i = 0; i < e->nwaiting; i++) {
        if (batch_wait(b, e->waiting[i]) != 0) {
            ld_future_fulfill_bool(e->waiting[i], false);
            ld_future_unref(e->waiting[i]);
        }
    }
    e->nwaiting = 0;
    b->next = NULL;
    struct batch **p = &e->batches;
    while (*p)
        p = &(*p)->next;
    *p = b;
    e->nbatches++;
    b->release_ev = event_new(e->base, -1, 0, release_some, b);
    ld_future *work = b->release_ev ? ld__worker_submit(e->worker, write_job, b, body_free) : NULL;
    if (!work || ld_future_on_complete(work, written, b) != 0) /* steals it */
        batch_end(b, false);
}

static void ep_flush(void *impl, ld_future *out)
{
    flush_now(impl, out);
}

static void on_flush_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    flush_now(arg, NULL);
}

static void on_warn(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ld__events *e = arg;
    e->cfg->warn("Exceeded event queue capacity. Increase capacity to avoid dropping events.",
                 e->cfg->warn_arg);
}

static void on_keys_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ld__events *e = arg;
    lru_clear(&e->keys);
    ld_context_unref(e->last_ctx);
    e->last_ctx = NULL;
}

static void maybe_closed(struct ld__events *e)
{
    if (e->closing && !e->batches && !e->nwaiting && !e->flush_again) {
        ld_future *c = e->closing;
        e->closing = NULL;
        ld_future_fulfill(c);
        ld_future_unref(c);
    }
}

static void ep_close(void *impl, ld_future *out)
{
    struct ld__events *e = impl;
    if (e->closed) {
        ld_future_fulfill(out);
        ld_future_unref(out);
        return;
    }
    event_del(e->flush_timer);
    event_del(e->keys_timer);
    if (e->diag_timer)
        event_del(e->diag_timer);
    e->closing = out;
    flush_now(e, NULL);
    e->closed = true;
    maybe_closed(e);
}

static void ep_free(void *impl)
{
    struct ld__events *e = impl;
    for (struct batch *b = e->batches; b; b = b->next)
        b->e = NULL;
    for (size_t i = 0; i < e->nwaiting; i++) {
        ld_future_reject(e->waiting[i], LD_ECANCELED, "the event processor was freed");
        ld_future_unref(e->waiting[i]);
    }
    ld__free(e->waiting);
    if (e->closing) {
        ld_future_reject(e->closing, LD_ECANCELED, "the event processor was freed");
        ld_future_unref(e->closing);
    }
    /* The worker first: its thread is joined, so no record is read after. */
    ld__worker_free(e->worker);
    ld__ev_sender_free(e->sender);
    for (size_t i = 0; i < e->n; i++)
        record_release(&e->recs[i]);
    ld__free(e->recs);
    if (e->flush_timer)
        event_free(e->flush_timer);
    if (e->keys_timer)
        event_free(e->keys_timer);
    if (e->diag_timer)
        event_free(e->diag_timer);
    if (e->warn_ev)
        event_free(e->warn_ev);
    lru_free(&e->keys);
    ld_context_unref(e->last_ctx);
    ld__summarizer_free(e->sum);
    ld__ctx_format_free(e->fmt);
    ld_events_config_free(e->cfg);
    ld__free(e);
}

/* ---- diagnostics ----------------------------------------------------------- */

/* The milliseconds between periodic diagnostic events: the configured
 * interval, or LDASYNC_EVENTS_DIAG_MS (a test's knob, any value > 0). */
static int64_t diag_interval(const struct ld__events *e)
{
    const char *env = getenv("LDASYNC_EVENTS_DIAG_MS");
    char *end;
    long long ms = env ? strtoll(env, &end, 10) : 0;
    return env && *env && !*end && ms > 0 ? (int64_t)ms : e->cfg->diag_ms;
}

static json_t *diag_id(const struct ld__events *e)
{
    return json_pack("{s:s,s:s}", "diagnosticId", e->diag_id, "sdkKeySuffix", e->key_suffix);
}

/* Posts a diagnostic event (taken); nothing when it could not be made. */
static void diag_post(struct ld__events *e, json_t *ev)
{
    /* written straight into the library's block (json_dumps() would
     * allocate with jansson's functions, which a program may have set) */
    size_t len = ev ? json_dumpb(ev, NULL, 0, JSON_COMPACT) : 0;
    char *body = len ? ld__malloc(len + 1) : NULL;
    if (body && json_dumpb(ev, body, len, JSON_COMPACT) != len) {
        ld__free(body);
        body = NULL;
    }
    json_decref(ev);
    if (!body)
        return;
    body[len] = '\0';
    ld_future *f = ld__ev_sender_post(e->sender, LD__EV_DIAGNOSTIC, body, len, false);
    ld_future_unref(f); /* its outcome changes nothing */
}

static void diag_init(struct ld__events *e, const ld_net_config *net, int64_t now)
{
    const ld_events_config *c = e->cfg;
    json_t *conf = json_pack(
        "{s:b,s:b,s:b,s:i,s:I,s:I,s:I,s:b,s:b,s:b,s:b,s:i,s:I,s:I,s:s}", "customBaseURI",
        strcmp(ld_net_config_base_uri(net), LD_DEFAULT_BASE_URI) != 0, "customEventsURI",
        strcmp(ld_net_config_events_uri(net), LD_DEFAULT_EVENTS_URI) != 0, "customStreamURI",
        strcmp(ld_net_config_stream_uri(net), LD_DEFAULT_STREAM_URI) != 0, "eventsCapacity",
        c->capacity, "connectTimeoutMillis", (json_int_t)net->connect_ms, "socketTimeoutMillis",
        (json_int_t)net->read_ms, "eventsFlushIntervalMillis", (json_int_t)c->flush_ms,
        "usingProxy", net->proxy_set && net->proxy && *net->proxy, "streamingDisabled", false,
        "usingRelayDaemon", false, "allAttributesPrivate", c->all_private, "userKeysCapacity",
        c->keys, "userKeysFlushIntervalMillis", (json_int_t)c->keys_ms,
        "diagnosticRecordingIntervalMillis", (json_int_t)diag_interval(e), "dataStoreType",
        "memory");
    json_t *ev = json_pack("{s:s,s:I,s:o,s:o,s:{s:s,s:s},s:{s:s,s:s}}", "kind", "diagnostic-init",
                           "creationDate", (json_int_t)now, "id", diag_id(e), "configuration", conf,
                           "sdk", "name", "ldasync", "version", ld_version_string(), "platform",
                           "name", "C", "osName", "Linux");
    diag_post(e, ev);
}

static void on_diag_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ld__events *e = arg;
    int64_t now = now_ms();
    json_t *ev = json_pack("{s:s,s:I,s:o,s:I,s:I,s:I,s:I,s:[]}", "kind", "diagnostic",
                           "creationDate", (json_int_t)now, "id", diag_id(e), "dataSinceDate",
                           (json_int_t)e->diag_since, "droppedEvents", (json_int_t)e->diag_dropped,
                           "deduplicatedUsers", (json_int_t)e->diag_dedup, "eventsInLastBatch",
                           (json_int_t)e->last_batch, "streamInits");
    if (!ev)
        return; /* the counts go on to the next one */
    e->diag_since = now;
    e->diag_dropped = e->diag_dedup = 0;
    diag_post(e, ev);
}

static const struct ld_event_processor_ops default_ops = {
    LD_EVENT_PROCESSOR_OPS_VERSION, ep_send_event, ep_flush, ep_close, ep_free,
};

static int add_timer(struct ld__events *e, struct event **ev, event_callback_fn fn, int64_t ms)
{
    *ev = event_new(e->base, -1, EV_PERSIST, fn, e);
    if (!*ev)
        return LD_ENOMEM;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    return event_add(*ev, &tv) == 0 ? 0 : LD_ENOMEM;
}

ld_event_processor *ld_default_event_processor_new(struct event_base *base,
                                                   const ld_net_config *net,
                                                   const ld_events_config *cfg)
{
    if (!base || !net)
        return NULL;
    struct ld__events *e = ld__calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->base = base;
    e->cfg = ld__events_config_copy(cfg);
    if (!e->cfg)
        goto fail;
    e->fmt =
        ld__ctx_format_new(e->cfg->all_private, (const char *const *)e->cfg->refs, e->cfg->nrefs);
    e->sum = ld__summarizer_new();
    e->sender = ld__ev_sender_new(base, net, 0);
    e->worker = ld__worker_new(base);
    if (!e->fmt || !e->sum || !e->sender || !e->worker || lru_init(&e->keys, e->cfg->keys) != 0)
        goto fail;
    e->warn_ev = event_new(base, -1, 0, on_warn, e);
    if (!e->warn_ev)
        goto fail;
    if (add_timer(e, &e->flush_timer, on_flush_timer, e->cfg->flush_ms) != 0 ||
        add_timer(e, &e->keys_timer, on_keys_timer, e->cfg->keys_ms) != 0)
        goto fail;
    if (e->cfg->diagnostics && add_timer(e, &e->diag_timer, on_diag_timer, diag_interval(e)) != 0)
        goto fail;
    e->ep = ld_event_processor_new(base, &default_ops, e);
    if (!e->ep)
        goto fail;
    if (e->cfg->diagnostics) {
        const char *key = ld_net_config_sdk_key(net);
        size_t len = key ? strlen(key) : 0;
        snprintf(e->key_suffix, sizeof e->key_suffix, "%s",
                 key ? key + (len > 6 ? len - 6 : 0) : "");
        ld__uuid4(e->diag_id);
        e->diag_since = now_ms();
        diag_init(e, net, e->diag_since);
    }
    return e->ep;
fail:
    ep_free(e);
    return NULL;
}

int ld_default_event_processor_stats(const ld_event_processor *ep, ld_events_stats *out)
{
    struct ld__events *e = ep ? ld__events_of(ep) : NULL;
    if (!e || !out)
        return LD_EINVAL;
    *out = e->stats;
    out->buffered = e->n;
    out->in_flight = (uint64_t)e->nbatches;
    out->stopped = ld__ev_sender_stopped(e->sender);
    return 0;
}
