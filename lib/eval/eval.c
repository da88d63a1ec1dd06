/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The evaluator (eval.h): its making and freeing, and evaluations that
 * read the store at once.
 *
 * One evaluation walks the compiled items through a resolver that finds an
 * item by key. On a store that answers at once, the resolver asks the store
 * within the call, so the whole evaluation runs inside ld_evaluator_detail()
 * and its future is completed later from the loop. When something cannot
 * be answered at once (a store without get_now or with operations queued, a
 * big segment's membership), the evaluation becomes a job: it requests the
 * items it knows it needs together (the flag; then the prerequisites and
 * segments that the items read so far refer to; and so on: one round trip
 * per level), then runs the same walk over what came back, and requests
 * again whatever that walk still missed.
 *
 * The evaluator's parts: eval_cache.c (compiled items by their JSON),
 * eval_walk.c (one evaluation), eval_job.c (evaluations that wait for the
 * store), eval_detail.c (details and their JSON), eval_all.c (all flags);
 * eval_compile.c compiles, eval_ops.c matches clause operators (eval_hash.c
 * hashes the values of their `in` sets).
 */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include <ldasync/big_segments.h>
#include <ldasync/error.h>
#include <ldasync/eval.h>

#include "core/core-internal.h"
#include "eval/eval-internal.h"
#include "store/store-internal.h"

#define STALE_AFTER_DEFAULT 120000

/* Reads an item at once for ld_evaluator_detail(): the flag asked for, or
 * (`walk`) an item its evaluation reads, which must not let go of the items
 * read before it (borrowed from the cache, which holds the only reference
 * to a JSON item that the store answered with a copy of, or let go of). */
static int now_read(ld_evaluator *ev, enum ld__item_type type, const struct ld__str *key,
                    const struct ld__item **out, bool walk)
{
    *out = NULL;
    /* The flag asked for has no NUL (its length is its strlen()): only the
     * keys a walk reads (JSON strings) are looked at for one. */
    if (walk ? !ld__key_ok(key) : !(key->len > 0 && ld__utf8_valid(key->s, key->len)))
        return 0;
    json_t *json;
    struct ld_lease *lease;
    bool lent;
    int rc = ld__store_get_now_lent(ev->store, ld__item_kind(type), key->s, key->len, &json, &lease,
                                    &lent);
    if (rc == LD_EBUSY || rc == LD_ENOMEM)
        return LD__E_NEED; /* the job path asks again, and reports LD_ENOMEM */
    if (rc < 0)
        return LD__E_FAIL; /* es->error: the caller's ld__evaluate() reports EXCEPTION */
    if (!json)
        return 0;
    struct ld__compile *wait;
    /* The cache references the JSON of what it keeps, and a compile on the
     * worker its own: a lent item needs nothing after this. */
    struct ld__item *it = ld__cache_get_keep(&ev->cache, type, json, walk, &wait);
    if (!lent) {
        if (lease)
            lease->release(lease);
        else
            json_decref(json);
    }
    if (!it)
        return LD__E_NEED; /* compiled off the loop: the job path waits for it; out of
                              memory: the job path reports it */
    *out = it->deleted ? NULL : it;
    return 0;
}

/* The resolver of ld_evaluator_detail() on a store that answers at once. */
static int now_item(void *arg, enum ld__item_type type, const struct ld__str *key,
                    const struct ld__item **out)
{
    return now_read(arg, type, key, out, true);
}

int ld__membership_now(ld_evaluator *ev, const json_t *key, const json_t **m, int *status)
{
    char hash[LD__BIG_SEGMENT_HASH_LEN + 1];
    ld__big_segment_hash(json_string_value(key), json_string_length(key), hash);
    if (ld__big_segment_store_now(ev->bss, hash, ev->stale_after, m, status) == 0)
        return 0;
    *m = NULL;
    *status = LD_BIG_SEGMENTS_STATUS_NOT_CONFIGURED;
    return LD__E_NEED;
}

/* A membership the big segment store has at hand (the client's cache),
 * else the job path reads it. */
static int now_membership(void *arg, const json_t *key, const json_t **m, int *status)
{
    ld_evaluator *ev = arg;
    *m = NULL;
    *status = LD_BIG_SEGMENTS_STATUS_NOT_CONFIGURED;
    return ev->bss ? ld__membership_now(ev, key, m, status) : 0;
}

static void now_stopped(void *arg, const struct ld__item *it)
{
    ld__evaluator_stopped(arg, it);
}

static const struct ld__resolver NOW = {now_item, now_membership, now_stopped};

/* The most flags a slice of an all-flags state evaluates: no bound but its
 * time, unless LDASYNC_EVAL_SLICE_FLAGS (a test's knob) says a number. */
static size_t slice_flags(void)
{
    const char *env = getenv("LDASYNC_EVAL_SLICE_FLAGS");
    char *end;
    unsigned long long n = env ? strtoull(env, &end, 10) : 0;
    return env && *env && !*end && n > 0 && n <= SIZE_MAX ? (size_t)n : SIZE_MAX;
}

ld_evaluator *ld_evaluator_new(ld_store *store)
{
    if (!store)
        return NULL;
    ld_evaluator *ev = ld__calloc(1, sizeof *ev);
    if (!ev)
        return NULL;
    ev->store = store;
    ev->base = ld_store_base(store);
    ev->stale_after = STALE_AFTER_DEFAULT;
    ev->slice_flags = slice_flags();
    ev->cache.base = ev->base;
    ev->cache.big = ld__compile_big();
    return ev;
}

int ld_evaluator_set_big_segment_store(ld_evaluator *ev, ld_big_segment_store *bss,
                                       int64_t stale_after_ms)
{
    if (!ev)
        return LD_EINVAL;
    ev->bss = bss;
    ev->stale_after = stale_after_ms > 0 ? stale_after_ms : STALE_AFTER_DEFAULT;
    return 0;
}

void ld_evaluator_free(ld_evaluator *ev)
{
    if (!ev)
        return;
    while (ev->jobs) {
        struct ld__job *j = ev->jobs;
        ld__job_unlink(j);
        ld_future_reject(j->out, LD_ECANCELED, "the evaluator was freed");
        if (j->outstanding == 0)
            ld__job_free(j);
    }
    ev->qhead = ev->qtail = NULL; /* the queued jobs were among them */
    if (ev->resume)
        event_free(ev->resume);
    ld__cache_free(&ev->cache);
    ld__free(ev);
}

int ld_evaluator_set_limit_fn(ld_evaluator *ev, ld_evaluator_limit_fn fn, void *arg)
{
    if (!ev)
        return LD_EINVAL;
    ev->limit_fn = fn;
    ev->limit_arg = arg;
    return 0;
}

void ld__evaluator_stopped(ld_evaluator *ev, const struct ld__item *it)
{
    if (ev->limit_fn)
        ev->limit_fn(ld__item_kind((enum ld__item_type)it->type), it->key.s, it->version,
                     ev->limit_arg);
}

int ld_evaluator_stats(const ld_evaluator *ev, struct ld_evaluator_stats *out)
{
    if (!ev || !out)
        return LD_EINVAL;
    out->flags = ev->cache.nflags;
    out->segments = ev->cache.nsegments;
    out->bytes = ev->cache.bytes +
                 (ev->cache.t ? (ev->cache.mask + 1) * sizeof(struct ld__centry) : 0) +
                 ev->cache.plan.n * sizeof(struct ld__plan_entry) +
                 (ev->cache.metas.t ? (ev->cache.metas.mask + 1) * sizeof(struct ld__mentry) : 0);
    out->compiling = ev->cache.ncompiling;
    out->compiled_off_loop = ev->cache.ncompiled;
    return 0;
}

/* ld_evaluator_detail(), told to `rec` (NULL: to no one); inlined in both
 * callers, so that the evaluator's own path pays nothing for the
 * recorder. */
static inline __attribute__((always_inline)) ld_future *
detail(ld_evaluator *ev, const char *flag_key, ld_context *ctx, ld_value_type type,
       json_t *fallback, const struct ld__recorder *rec)
{
    if (!ev) {
        json_decref(fallback);
        return NULL;
    }
    if (!flag_key || !ctx || (unsigned)type > LD_VALUE_STRING) {
        json_decref(fallback);
        return ld__future_rejected_static(ev->base, LD_EINVAL,
                                          !flag_key ? "flag_key must not be NULL"
                                          : !ctx    ? "ctx must not be NULL"
                                                    : "type is not an ld_value_type");
    }
    size_t len = strlen(flag_key);
    struct ld__str key = {flag_key, len};
    const struct ld__item *f = NULL;
    int rc = len ? now_read(ev, LD__FLAG, &key, &f, false) : 0;
    ld_detail *d = NULL;
    if (rc == 0)
        rc = rec ? ld__evaluate_rec(ctx, &NOW, ev, f, type, fallback, &d, rec, flag_key, len)
                 : ld__evaluate(ctx, &NOW, ev, f, type, fallback, &d);
    if (rc == 0) {
        ld_future *r = d ? ld__future_later_ptr(ev->base, d, ld__detail_free) : NULL;
        return r ? r : ld__future_rejected_static(ev->base, LD_ENOMEM, NULL);
    }
    struct ld__job *j = ld__job_new(ev, ctx);
    char *k = j ? ld__malloc(len + 1) : NULL;
    if (!k) {
        if (j) {
            ld__job_unlink(j);
            ld__job_free(j);
        }
        json_decref(fallback);
        return ld__future_rejected_static(ev->base, LD_ENOMEM, NULL);
    }
    memcpy(k, flag_key, len + 1);
    j->key = k;
    j->len = len;
    j->type = (uint8_t)type;
    j->fallback = fallback;
    j->rec = rec;
    ld__job_want(j, LD__FLAG, k, len);
    return ld__job_start(j);
}

ld_future *ld_evaluator_detail(ld_evaluator *ev, const char *flag_key, ld_context *ctx,
                               ld_value_type type, json_t *fallback)
{
    return detail(ev, flag_key, ctx, type, fallback, NULL);
}

ld_future *ld__evaluator_detail_rec(ld_evaluator *ev, const char *flag_key, ld_context *ctx,
                                    ld_value_type type, json_t *fallback,
                                    const struct ld__recorder *rec)
{
    return detail(ev, flag_key, ctx, type, fallback, rec);
}
