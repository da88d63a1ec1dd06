/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * All flags (eval.h): every flag of the store evaluated for one context,
 * as LaunchDarkly's all-flags state. Each flag's result (struct
 * ld__flag_result: its detail and $flagsState fields) is made once, then
 * either written as JSON (ld_evaluator_all_flags()) or kept in an
 * ld_flags_state (ld_evaluator_flags_state(); eval_state.c reads it).
 */
#include <string.h>

#include <ldasync/error.h>
#include <ldasync/eval.h>
#include <ldasync/kind.h>

#include "core/core-internal.h"
#include "eval/eval-internal.h"
#include "store/store-internal.h"

static int set_new(json_t *o, const char *k, json_t *v)
{
    return json_object_set_new(o, k, v);
}

static size_t mentry_hash(const struct ld__mentry *e)
{
    uint64_t x = (uint64_t)e->version * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)e->debug ^
                 ((uint64_t)(unsigned)e->index << 3 | (uint64_t)e->with_version << 2 |
                  (uint64_t)e->with_debug << 1 | e->track);
    return ld__hash_ptr((const void *)(uintptr_t)x);
}

static bool mentry_same(const struct ld__mentry *a, const struct ld__mentry *b)
{
    return a->version == b->version && a->debug == b->debug && a->index == b->index &&
           a->with_version == b->with_version && a->with_debug == b->with_debug &&
           a->track == b->track;
}

static void metas_put(struct ld__metas *m, const struct ld__mentry *e)
{
    size_t i = mentry_hash(e) & m->mask;
    while (m->t[i].obj)
        i = (i + 1) & m->mask;
    m->t[i] = *e;
    m->n++;
}

/* Makes room for one more entry: drops the entries that only the table
 * holds (no flag and no state uses them), then resizes to four times what
 * is left (at least 64). @return 0 or LD_ENOMEM. */
static int metas_grow(struct ld__metas *m)
{
    size_t live = 0;
    for (size_t i = 0; m->t && i <= m->mask; i++)
        live += m->t[i].obj && ld__json_refs(m->t[i].obj) > 1;
    size_t cap = 64;
    while (cap < 4 * (live + 1))
        cap *= 2;
    struct ld__mentry *t = ld__calloc(cap, sizeof *t);
    if (!t)
        return LD_ENOMEM;
    struct ld__metas old = *m;
    m->t = t;
    m->mask = cap - 1;
    m->n = 0;
    for (size_t i = 0; old.t && i <= old.mask; i++) {
        if (!old.t[i].obj)
            continue;
        if (ld__json_refs(old.t[i].obj) > 1)
            metas_put(m, &old.t[i]);
        else
            json_decref(old.t[i].obj);
    }
    ld__free(old.t);
    return 0;
}

/* The shared entry with content `e`, found or made. @return a new
 * reference, or NULL when memory ran out. */
static json_t *metas_get(struct ld__metas *m, struct ld__mentry *e)
{
    for (size_t i = m->t ? mentry_hash(e) & m->mask : 0; m->t; i = (i + 1) & m->mask) {
        if (!m->t[i].obj)
            break;
        if (mentry_same(&m->t[i], e))
            return json_incref(m->t[i].obj);
    }
    if ((m->n + 1) * 2 > (m->t ? m->mask + 1 : 0) && metas_grow(m) != 0)
        return NULL;
    json_t *o = json_object();
    int rc = o ? set_new(o, "variation", json_integer(e->index)) : -1;
    if (e->with_version)
        rc |= set_new(o, "version", json_integer(e->version));
    if (e->track)
        rc |= set_new(o, "trackEvents", json_true());
    if (e->with_debug)
        rc |= set_new(o, "debugEventsUntilDate", json_integer(e->debug));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    e->obj = o;
    metas_put(m, e);
    return json_incref(o);
}

/* The $flagsState entry of `f` when it serves variation `index` with no
 * reason: {"variation", "version" (with details), "trackEvents",
 * "debugEventsUntilDate"}, shared (see struct ld__mentry) and remembered by
 * the flag per variation. @return a new reference, or NULL when memory
 * ran out. */
static json_t *shared_meta(ld_evaluator *ev, struct ld__flag *f, int index, bool details)
{
    if (!f->meta) {
        size_t size = 2 * f->nvars * sizeof *f->meta;
        f->meta = ld__calloc(2 * f->nvars, sizeof *f->meta);
        if (!f->meta)
            return NULL;
        f->h.bytes += size;
        ev->cache.bytes += size;
    }
    json_t **slot = &f->meta[(size_t)details * f->nvars + (size_t)index];
    if (!*slot) {
        struct ld__mentry e = {details ? f->h.version : 0,
                               f->has_debug ? f->debug_until : 0,
                               index,
                               details,
                               f->has_debug,
                               f->track_events,
                               NULL};
        *slot = metas_get(&ev->cache.metas, &e);
        if (!*slot)
            return NULL;
    }
    return json_incref(*slot);
}

/* The keys of the first `n` prerequisites of `f`, those its evaluation
 * entered, in order, as LaunchDarkly's SDKs list them in the state (each
 * was found in the store, so it is valid UTF-8). @return a new array, or
 * NULL when memory ran out. */
static json_t *prerequisite_keys(const struct ld__flag *f, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n && i < f->nprereqs; i++) {
        if (json_array_append_new(a, json_stringn(f->prereqs[i].key.s, f->prereqs[i].key.len))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* Evaluates flag `f`, filed under `key` (`klen` bytes) in the snapshot,
 * into `r`, with the $flagsState fields the job's options give it.
 * @return 0 or LD__E_NEED. */
static int flag_result(struct ld__job *j, struct ld__flag *f, const char *key, size_t klen,
                       struct ld__flag_result *r)
{
    ld_detail *d = &r->d;
    if (ld__evaluate_into(j->ctx, &ld__job_resolver, j, &f->h, LD_VALUE_ANY, NULL, d, NULL) ==
        LD__E_NEED)
        return LD__E_NEED;
    bool track_reason = ld__tracks_reason(f, d);
    bool details = !(j->options & LD_ALL_FLAGS_DETAILS_ONLY_FOR_TRACKED_FLAGS) || f->track_events ||
                   track_reason || f->has_debug;
    bool reason = (details && (j->options & LD_ALL_FLAGS_WITH_REASONS)) || track_reason;
    r->f = f;
    r->key = key;
    r->len = klen;
    r->fields = (details ? LD_FLAG_STATE_VERSION : 0u) | (reason ? LD_FLAG_STATE_REASON : 0u) |
                (f->track_events || track_reason ? LD_FLAG_STATE_TRACK_EVENTS : 0u) |
                (track_reason ? LD_FLAG_STATE_TRACK_REASON : 0u) |
                (f->has_debug ? LD_FLAG_STATE_DEBUG_EVENTS_UNTIL : 0u);
    return 0;
}

/* Where result_json() writes: the state's values and its $flagsState. */
struct json_out {
    ld_evaluator *ev;
    json_t *st, *meta;
};

/* Adds flag result `r` to the state (its value) and $flagsState (its
 * entry) under the key the store filed it under, which a store
 * implementation may answer with an item whose own "key" is missing or
 * not a string. @return 0 or LD_ENOMEM. */
static int result_json(void *arg, const struct ld__flag_result *r)
{
    struct json_out *out = arg;
    struct ld__flag *f = r->f;
    const ld_detail *d = &r->d;
    bool details = r->fields & LD_FLAG_STATE_VERSION;
    json_t *m;
    int e = 0;
    if (!(r->fields & LD_FLAG_STATE_REASON) && d->index >= 0 && d->nprereqs == 0) {
        m = shared_meta(out->ev, f, d->index, details);
        e = m ? 0 : -1;
    } else {
        m = json_object();
        e = m ? 0 : -1;
        if (m && d->index >= 0)
            e |= set_new(m, "variation", json_integer(d->index));
        if (m && details)
            e |= set_new(m, "version", json_integer(f->h.version));
        if (m && (r->fields & LD_FLAG_STATE_REASON)) {
            json_t *reason = ld_detail_reason_to_json(d);
            e |= reason ? set_new(m, "reason", reason) : -1;
        }
        if (m && (r->fields & LD_FLAG_STATE_TRACK_EVENTS))
            e |= set_new(m, "trackEvents", json_true());
        if (m && (r->fields & LD_FLAG_STATE_TRACK_REASON))
            e |= set_new(m, "trackReason", json_true());
        if (m && (r->fields & LD_FLAG_STATE_DEBUG_EVENTS_UNTIL))
            e |= set_new(m, "debugEventsUntilDate", json_integer(f->debug_until));
        if (m && d->nprereqs > 0)
            e |= set_new(m, "prerequisites", prerequisite_keys(f, d->nprereqs));
    }
    if (e) {
        json_decref(m);
        return LD_ENOMEM;
    }
    e |= json_object_setn_new_nocheck(out->meta, r->key, r->len, m);
    e |= json_object_setn_nocheck(out->st, r->key, r->len, d->value ? d->value : json_null());
    return e ? LD_ENOMEM : 0;
}

static json_t *invalid_state(void)
{
    json_t *o = json_object();
    if (o && (set_new(o, "$flagsState", json_object()) || set_new(o, "$valid", json_false()))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Makes `ev`'s plan that of `flags` (a snapshot): its keys, in its order,
 * each flag compiled when a state first reaches it. @return 0 or
 * LD_ENOMEM (the plan is then empty). */
static int plan_make(ld_evaluator *ev, json_t *flags)
{
    ld__plan_free(&ev->cache.plan);
    size_t n = json_object_size(flags);
    struct ld__plan_entry *e = n ? ld__calloc(n, sizeof *e) : NULL;
    if (n && !e)
        return LD_ENOMEM;
    size_t k = 0;
    const char *key;
    size_t klen;
    json_t *v;
    json_object_keylen_foreach(flags, key, klen, v)
    {
        e[k].key = key;
        e[k].len = klen;
        e[k].json = v;
        k++;
    }
    ev->cache.plan.snapshot = json_incref(flags);
    ev->cache.plan.e = e;
    ev->cache.plan.n = k;
    return 0;
}

/* The compiled flag of plan entry `e`, compiled now if it was not. @return
 * it, NULL for a deleted item (skipped), or NULL with *rc LD_ENOMEM, or
 * LD__E_NEED (compiled off the loop: job `j` waits for it). */
static struct ld__flag *plan_flag(struct ld__job *j, struct ld__plan_entry *e, int *rc)
{
    if (e->f || e->skip)
        return e->f;
    struct ld__compile *c;
    struct ld__item *it = ld__cache_get(&j->ev->cache, LD__FLAG, e->json, &c);
    if (!it) {
        *rc = c && ld__job_wait(j, c, LD__FLAG, e->json, NULL) == 0 ? LD__E_NEED : LD_ENOMEM;
        return NULL;
    }
    if (it->deleted) {
        e->skip = true;
        return NULL;
    }
    e->f = (struct ld__flag *)ld__item_ref(it);
    return e->f;
}

/* Evaluates the flags of the job's flags snapshot (through the
 * evaluator's plan, in its order) from the job's next one on, calling
 * fn(arg, result) for each, until the evaluator's slice is over.
 * @return 0 (all done); LD__E_YIELD (the slice is over: j->at is where to
 * go on); LD__E_NEED (memberships to read; j->at is the flag that needs
 * them); LD_ENOMEM, or what fn returned. */
static int each_result(struct ld__job *j, int (*fn)(void *arg, const struct ld__flag_result *r),
                       void *arg)
{
    ld_evaluator *ev = j->ev;
    /* Another state's snapshot may have taken the plan between two slices:
     * the same snapshot makes the same plan again (its order is the
     * object's, which does not change), so j->at still points right. */
    if (ev->cache.plan.snapshot != j->flags && plan_make(ev, j->flags) != 0)
        return LD_ENOMEM;
    struct ld__plan *p = &ev->cache.plan;
    /* The clock is read every 32 flags evaluated, and after each flag
     * compiled (a compile costs as much as dozens of evaluations). */
    unsigned cost = 0;
    for (size_t done = 0; j->at < p->n; j->at++, done++) {
        if (done > 0 &&
            (done >= ev->slice_flags || (cost >= 32 && (cost = 0, ld__now_ns() >= ev->slice_end))))
            return LD__E_YIELD;
        /* The flags are cold at 10,000: ask for the ones ahead. */
        if (j->at + 8 < p->n)
            __builtin_prefetch(p->e[j->at + 8].f);
        int rc = 0;
        cost += p->e[j->at].f ? 1 : 32;
        struct ld__flag *f = plan_flag(j, &p->e[j->at], &rc);
        if (rc != 0)
            return rc;
        if (!f || ((j->options & LD_ALL_FLAGS_CLIENT_SIDE_ONLY) && !f->client_side))
            continue;
        struct ld__flag_result r;
        rc = flag_result(j, f, p->e[j->at].key, p->e[j->at].len, &r);
        if (rc == 0)
            rc = fn(arg, &r);
        if (rc != 0)
            return rc;
    }
    return 0;
}

json_t *ld__all_flags_state(struct ld__job *j, int *rc)
{
    *rc = 0;
    if (j->store_error || j->uninitialized)
        return invalid_state();
    if (!j->st) {
        j->st = json_object();
        j->meta = json_object();
        if (!j->st || !j->meta)
            goto fail;
    }
    struct json_out out = {j->ev, j->st, j->meta};
    *rc = each_result(j, result_json, &out);
    if (*rc == LD__E_YIELD || *rc == LD__E_NEED)
        return NULL; /* the job keeps what it made */
    if (*rc != 0)
        goto fail;
    json_t *st = j->st, *meta = j->meta;
    j->st = j->meta = NULL;
    if (json_object_set_new(st, "$flagsState", meta) != 0 ||
        json_object_set_new(st, "$valid", json_true()) != 0) {
        json_decref(st);
        goto fail;
    }
    return st;
fail:
    json_decref(j->st);
    json_decref(j->meta);
    j->st = j->meta = NULL;
    if (*rc == 0)
        *rc = LD_ENOMEM;
    if (*rc == LD_ENOMEM)
        j->nomem = true;
    return NULL;
}

/* Appends `r` to the state `arg`, referencing its flag. @return 0 or
 * LD_ENOMEM. */
static int result_add(void *arg, const struct ld__flag_result *r)
{
    struct ld_flags_state *st = arg;
    if (st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 64;
        struct ld__flag_result *t =
            cap <= SIZE_MAX / sizeof *t ? ld__realloc(st->r, cap * sizeof *t) : NULL;
        if (!t)
            return LD_ENOMEM;
        st->r = t;
        st->cap = cap;
    }
    st->r[st->n] = *r;
    ld__item_ref(&r->f->h);
    st->n++;
    return 0;
}

struct ld_flags_state *ld__all_flags_results(struct ld__job *j, int *rc)
{
    *rc = 0;
    struct ld_flags_state *st = j->partial;
    if (!st) {
        st = ld__calloc(1, sizeof *st);
        if (!st) {
            *rc = LD_ENOMEM;
            j->nomem = true;
            return NULL;
        }
        if (j->store_error || j->uninitialized)
            return st;
        st->valid = true;
        st->flags = json_incref(j->flags);
        j->partial = st;
    }
    *rc = each_result(j, result_add, st);
    if (*rc == LD__E_YIELD || *rc == LD__E_NEED)
        return NULL; /* the job keeps what it made */
    j->partial = NULL;
    if (*rc == 0)
        return st;
    ld__flags_state_free(st);
    if (*rc == LD_ENOMEM)
        j->nomem = true;
    return NULL;
}

/* ld_evaluator_all_flags() (JSON) or ld_evaluator_flags_state() (`state`). */
static ld_future *all_flags(ld_evaluator *ev, ld_context *ctx, unsigned options, bool state)
{
    if (!ev)
        return NULL;
    if (!ctx || (options & ~7u))
        return ld__future_rejected_static(
            ev->base, LD_EINVAL, !ctx ? "ctx must not be NULL" : "options has unknown bits");
    struct ld__job *j = ld__job_new(ev, ctx);
    if (!j)
        return ld__future_rejected_static(ev->base, LD_ENOMEM, NULL);
    j->all = true;
    j->state = state;
    j->options = options;
    json_t *flags = NULL, *segments = NULL;
    int init = ld__store_initialized_now(ev->store);
    j->uninitialized = init == 0;
    if (init >= 0 && ld__store_all_now(ev->store, ld_kind_features(), &flags) == 0 &&
        ld__store_all_now(ev->store, ld_kind_segments(), &segments) == 0) {
        j->flags = flags;
        j->segments = segments;
        int rc = 0;
        struct ld_flags_state *st = NULL;
        json_t *json = NULL;
        if (!ev->qhead) {
            ev->slice_end = ld__now_ns() + LD__EVAL_SLICE_NS;
            if (state)
                st = ld__all_flags_results(j, &rc);
            else
                json = ld__all_flags_state(j, &rc);
        } else {
            rc = LD__E_YIELD; /* states are made one after the other */
        }
        if (st || json) {
            /* made within the call: completed from the loop, in issue order */
            ld__job_unlink(j);
            ld__job_free(j);
            ld_future *r = st ? ld__future_later_ptr(ev->base, st, ld__flags_state_free)
                              : ld__future_later_json(ev->base, json, NULL);
            return r ? r : ld__future_rejected_static(ev->base, LD_ENOMEM, NULL);
        }
        if (rc == LD__E_YIELD && ld__job_queue(j, false) == 0)
            return ld_future_ref(j->out);
        if (rc != LD__E_NEED) { /* (a wait for a compile says LD__E_NEED) */
            ld__job_unlink(j);
            ld__job_free(j);
            return ld__future_rejected_static(ev->base, LD_ENOMEM, NULL);
        }
        j->nomem = false;
        /* a compile off the loop waited for, or memberships to read */
        return j->outstanding > 0 ? ld_future_ref(j->out) : ld__job_start(j);
    }
    json_decref(flags);
    return ld__job_read_all(j, init);
}

ld_future *ld_evaluator_all_flags(ld_evaluator *ev, ld_context *ctx, unsigned options)
{
    return all_flags(ev, ctx, options, false);
}

ld_future *ld_evaluator_flags_state(ld_evaluator *ev, ld_context *ctx, unsigned options)
{
    return all_flags(ev, ctx, options, true);
}
