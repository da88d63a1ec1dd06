/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The evaluator (eval.h): LaunchDarkly's flag evaluation over compiled
 * flags and segments (eval_compile.c).
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
 * Compiled items are cached by the address of their stored JSON, which the
 * cache references, so an address is never reused while it is in the
 * cache. An entry whose JSON only the cache still references (the store
 * replaced or deleted the item, or answered with a copy) is dropped when
 * the table is next resized, or once the evaluation reading at once that
 * resized it (and may be walking that item) is over.
 */
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include <ldasync/big_segments.h>
#include <ldasync/error.h>
#include <ldasync/eval.h>
#include <ldasync/kind.h>

#include "core/core-internal.h"
#include "eval/eval-internal.h"
#include "model/model-internal.h"
#include "store/store-internal.h"

/* Prerequisite chains and segment nesting deeper than this are
 * MALFORMED_FLAG (they are cycles in all real data). */
#define MAX_DEPTH 64

/* Flags and segments one evaluation may visit: nesting that names the same
 * item twice per level (two rules nesting one segment, a prerequisite listed
 * twice) doubles the walk at each level, 2^64 visits within MAX_DEPTH; past
 * this many the evaluation is MALFORMED_FLAG rather than a loop that hangs. */
#define MAX_VISITS 100000

#define STALE_AFTER_DEFAULT 120000

/* ---- The cache of compiled items ----------------------------------------- */

/* The flags of the last flags snapshot an all-flags state was made of, in
 * its order: a store that answers all with the same snapshot while nothing
 * changed (the memory store) is then walked without a lookup per flag. */
struct plan_entry {
    const char *key; /* the snapshot's */
    size_t len;
    struct ld__flag *f; /* referenced */
};

struct plan {
    json_t *snapshot; /* referenced, or NULL */
    struct plan_entry *e;
    size_t n;
};

static void plan_free(struct plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        ld__item_unref(&p->e[i].f->h);
    ld__free(p->e);
    json_decref(p->snapshot);
    memset(p, 0, sizeof *p);
}

struct centry {
    const json_t *json;
    struct ld__item *item;
};

/* The $flagsState entries without a reason, one per distinct content
 * (variation, version when given, trackEvents, debugEventsUntilDate) and
 * shared by every flag with that content: the entries of 10,000 flags are
 * then a few hot objects, not 10,000 cold ones that each state references
 * when made and again when released (they were 40% of a state's time). */
struct mentry {
    int64_t version;
    int64_t debug;
    int index;
    bool with_version;
    bool with_debug;
    bool track;
    json_t *obj; /* referenced; NULL: a free slot */
};

struct metas {
    struct mentry *t;
    size_t mask; /* capacity - 1; capacity a power of two, or 0 */
    size_t n;
};

struct cache {
    struct centry *t;
    size_t mask; /* capacity - 1; capacity a power of two, or 0 */
    size_t n;
    size_t bytes; /* of the items */
    size_t nflags, nsegments;
    struct plan plan; /* dropped with the stale entries */
    struct metas metas;
    bool deferred; /* a grow within an evaluation kept the stale entries */
};

static size_t hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return (size_t)x;
}

/* The entry of `json` compiled as `type`: the store may hold the same JSON
 * as a flag and as a segment (it shares what it is given), so both key it. */
static struct ld__item *cache_find(const struct cache *c, enum ld__item_type type,
                                   const json_t *json)
{
    if (!c->t)
        return NULL;
    for (size_t i = hash_ptr(json) & c->mask;; i = (i + 1) & c->mask) {
        if (c->t[i].json == json && c->t[i].item && c->t[i].item->type == type)
            return c->t[i].item;
        if (!c->t[i].json)
            return NULL;
    }
}

/* The slot of the entry of `json` compiled as the other kind than `it`,
 * or NULL. */
static struct centry *cache_twin(const struct cache *c, const struct ld__item *it)
{
    enum ld__item_type other = it->type == LD__FLAG ? LD__SEGMENT : LD__FLAG;
    for (size_t i = hash_ptr(it->json) & c->mask;; i = (i + 1) & c->mask) {
        if (c->t[i].json == it->json && c->t[i].item && c->t[i].item->type == other)
            return &c->t[i];
        if (!c->t[i].json)
            return NULL;
    }
}

static void cache_put(struct cache *c, struct ld__item *it)
{
    size_t i = hash_ptr(it->json) & c->mask;
    while (c->t[i].json)
        i = (i + 1) & c->mask;
    c->t[i].json = it->json;
    c->t[i].item = it;
    c->n++;
    c->bytes += it->bytes;
    if (it->type == LD__FLAG)
        c->nflags++;
    else
        c->nsegments++;
}

/* True when only the cache still holds the item's JSON (once, or twice
 * when it compiled it as both kinds). */
static bool cache_stale(const struct cache *c, const struct ld__item *it)
{
    size_t held = cache_twin(c, it) ? 2 : 1;
    return __atomic_load_n(&it->json->refcount, __ATOMIC_ACQUIRE) == held;
}

/* Makes room for one more entry: drops the stale entries (unless `keep`:
 * an evaluation reading at once may be walking one, when the store lets go
 * of what it read, or answered with a copy) and resizes to four times what
 * is left (at least 64). @return 0 or LD_ENOMEM. */
static int cache_grow(struct cache *c, bool keep)
{
    if (c->plan.snapshot && __atomic_load_n(&c->plan.snapshot->refcount, __ATOMIC_ACQUIRE) == 1)
        plan_free(&c->plan); /* the store let go of that snapshot */
    c->deferred = keep;
    size_t live = 0;
    for (size_t i = 0; c->t && i <= c->mask; i++)
        live += c->t[i].json && (keep || !cache_stale(c, c->t[i].item));
    size_t cap = 64;
    while (cap < 4 * (live + 1))
        cap *= 2;
    struct centry *t = ld__calloc(cap, sizeof *t);
    if (!t)
        return LD_ENOMEM;
    struct cache old = *c;
    c->t = t;
    c->mask = cap - 1;
    c->n = c->bytes = c->nflags = c->nsegments = 0;
    for (size_t i = 0; old.t && i <= old.mask; i++) {
        struct ld__item *it = old.t[i].item;
        if (!it)
            continue;
        if (!keep && cache_stale(&old, it)) {
            struct centry *twin = cache_twin(&old, it);
            if (twin) { /* stale as well: drop both before either changes the count */
                ld__item_unref(twin->item);
                twin->item = NULL;
            }
            ld__item_unref(it);
        } else {
            cache_put(c, it);
        }
    }
    ld__free(old.t);
    return 0;
}

/* The compiled form of `json` (a stored flag or segment, borrowed), from
 * the cache or compiled now; `keep`: see cache_grow(). @return it (borrowed
 * from the cache), or NULL when memory ran out. */
static struct ld__item *cache_get_keep(struct cache *c, enum ld__item_type type, json_t *json,
                                       bool keep)
{
    struct ld__item *it = cache_find(c, type, json);
    if (it)
        return it;
    if ((c->n + 1) * 2 > (c->t ? c->mask + 1 : 0) && cache_grow(c, keep) != 0)
        return NULL;
    if (ld__item_compile(type, json, &it) != 0)
        return NULL;
    cache_put(c, it);
    return it;
}

static struct ld__item *cache_get(struct cache *c, enum ld__item_type type, json_t *json)
{
    return cache_get_keep(c, type, json, false);
}

static void cache_free(struct cache *c)
{
    plan_free(&c->plan);
    for (size_t i = 0; c->metas.t && i <= c->metas.mask; i++)
        json_decref(c->metas.t[i].obj);
    ld__free(c->metas.t);
    for (size_t i = 0; c->t && i <= c->mask; i++)
        ld__item_unref(c->t[i].item);
    ld__free(c->t);
    memset(c, 0, sizeof *c);
}

/* ---- The evaluator ------------------------------------------------------- */

struct job;

struct ld_evaluator {
    ld_store *store;
    struct event_base *base;
    ld_big_segment_store *bss;
    int64_t stale_after;
    struct cache cache;
    struct job *jobs; /* waiting for the store */
};

/* ---- Details ------------------------------------------------------------- */

struct ld_detail {
    struct ld__item *flag; /* referenced, or NULL */
    json_t *value; /* a variation, borrowed from flag; the fallback, owned, when index < 0 */
    struct ld__str rule_id, prereq; /* borrowed from flag */
    int index;
    int rule;
    uint8_t kind;  /* enum ld_reason_kind */
    uint8_t error; /* enum ld_eval_error */
    int8_t big;    /* enum ld_big_segments_status, or -1 */
    bool in_experiment;
    /* The flag's first nprereqs prerequisites were evaluated (found in the
     * store and entered, whatever their result): the all-flags state lists
     * their keys. Saturates at UINT16_MAX. */
    uint16_t nprereqs;
};

_Static_assert(sizeof(struct ld_detail) <= LD__LINE_SIZE, "a detail is one line");
_Static_assert(LD_REASON_OFF == 0 && LD_REASON_FALLTHROUGH == 1, "eval_compile.c's simple_kind");

static void detail_free(void *p)
{
    ld_detail *d = p;
    if (d->index < 0)
        json_decref(d->value);
    ld__item_unref(d->flag);
    ld__line_free(d);
}

/* ---- One evaluation ------------------------------------------------------ */

/* What a step answers besides 0 (and 1 for a match). */
#define E_FAIL (-100) /* an evaluation error, in es->error (none: the store) */
#define E_NEED (-101) /* something is not at hand: the resolver noted what */

struct resolver {
    /* 0 with *out (NULL when absent or deleted); E_NEED; E_FAIL (with
     * es->error set). */
    int (*item)(void *arg, enum ld__item_type type, const struct ld__str *key,
                const struct ld__item **out);
    /* 0 with *m (borrowed; NULL when the context is in no big segment)
     * and *status; E_NEED. `key` is the context key. */
    int (*membership)(void *arg, const json_t *key, const json_t **m, int *status);
};

struct es {
    const ld_context *ctx;
    const struct resolver *rv;
    void *arg;
    const struct ld__item *flags[MAX_DEPTH];
    const struct ld__item *segments[MAX_DEPTH];
    int nflags, nsegments;
    long visits;        /* flags and segments entered, up to MAX_VISITS */
    int big;            /* the worst big segments status met, or -1 */
    int error;          /* enum ld_eval_error after E_FAIL */
    size_t top_prereqs; /* prerequisites of the evaluated flag entered */
};

struct res {
    int index;
    int rule;
    struct ld__str rule_id, prereq;
    uint8_t kind;
    bool in_experiment;
};

static int fail(struct es *es, enum ld_eval_error e)
{
    es->error = (int)e;
    return E_FAIL;
}

static bool str_eq(const struct ld__str *a, const struct ld__str *b)
{
    return a->len == b->len && memcmp(a->s, b->s, a->len) == 0;
}

/* Big segments statuses by how much of a problem they are. */
static int big_rank(int status)
{
    switch (status) {
    case LD_BIG_SEGMENTS_STATUS_HEALTHY:
        return 0;
    case LD_BIG_SEGMENTS_STATUS_STALE:
        return 1;
    case LD_BIG_SEGMENTS_STATUS_STORE_ERROR:
        return 2;
    default:
        return 3; /* NOT_CONFIGURED */
    }
}

static void big_merge(struct es *es, int status)
{
    if (es->big < 0 || big_rank(status) > big_rank(es->big))
        es->big = status;
}

/* The value of attribute `a` of the individual context `part`, or NULL. */
static const json_t *attr_value(const ld_context *ctx, int part, const struct ld__attr *a)
{
    const json_t *v = ld__context_part_attr(ctx, (size_t)part, a->first.s, a->first.len);
    for (size_t i = 0; v && i < a->nmore; i++)
        v = json_is_object(v) ? json_object_getn(v, a->more[i].s, a->more[i].len) : NULL;
    return v;
}

static int segment_contains(struct es *es, const struct ld__segment *s);

static int match_segments(struct es *es, const struct ld__clause *c)
{
    for (size_t i = 0; i < c->nsegments; i++) {
        const struct ld__item *it;
        int rc = es->rv->item(es->arg, LD__SEGMENT, &c->segments[i], &it);
        if (rc < 0)
            return rc;
        if (!it)
            continue;
        rc = segment_contains(es, (const struct ld__segment *)it);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* 1 when the clause matches, 0 when not, or E_FAIL / E_NEED. */
static int match_clause(struct es *es, const struct ld__clause *c)
{
    if (c->bad)
        return fail(es, LD_EVAL_ERROR_MALFORMED_FLAG);
    bool m = false;
    if (c->op == LD__OP_SEGMENT_MATCH) {
        int rc = match_segments(es, c);
        if (rc < 0)
            return rc;
        m = rc > 0;
    } else if (c->attr.is_kind) {
        size_t n = ld_context_kind_count(es->ctx);
        for (size_t i = 0; i < n && !m; i++)
            m = ld__clause_values_match(c->values, ld__context_part_kind(es->ctx, i));
    } else {
        int part = ld__context_find(es->ctx, c->attr.kind.s, c->attr.kind.len);
        if (part < 0)
            return 0;
        const json_t *v = attr_value(es->ctx, part, &c->attr);
        if (!v || json_is_null(v))
            return 0;
        if (json_is_array(v)) {
            size_t n = json_array_size(v);
            for (size_t i = 0; i < n && !m; i++) {
                const json_t *e = json_array_get(v, i);
                m = !json_is_null(e) && ld__clause_values_match(c->values, e);
            }
        } else {
            m = ld__clause_values_match(c->values, v);
        }
    }
    return m != c->negate;
}

static int match_clauses(struct es *es, const struct ld__clause *cs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc = match_clause(es, &cs[i]);
        if (rc <= 0)
            return rc;
    }
    return 1;
}

/* The bucket of the context for `by` under key/salt (and seed); *had is
 * false when the context lacks the kind. E_FAIL for a bad reference. */
static int bucket_of(struct es *es, const struct ld__attr *by, const struct ld__str *key,
                     const struct ld__str *salt, bool has_seed, int64_t seed, double *bucket,
                     bool *had)
{
    *bucket = 0;
    *had = false;
    if (by->bad)
        return fail(es, LD_EVAL_ERROR_MALFORMED_FLAG);
    int part = ld__context_find(es->ctx, by->kind.s, by->kind.len);
    if (part < 0)
        return 0;
    *had = true;
    const json_t *v = attr_value(es->ctx, part, by);
    char buf[LD__BUCKET_BUF];
    const char *text;
    size_t len;
    if (v && ld__bucket_text(v, buf, &text, &len))
        *bucket = ld__bucket(key->s, key->len, salt->s, salt->len, has_seed, seed, text, len);
    return 0;
}

/* The variation index a variation-or-rollout gives (range not checked). */
static int vor_index(struct es *es, const struct ld__flag *f, const struct ld__vor *v, int *index,
                     bool *in_experiment)
{
    *in_experiment = false;
    if (v->variation >= 0) {
        *index = v->variation;
        return 0;
    }
    if (v->variation == LD__VOR_MALFORMED)
        return fail(es, LD_EVAL_ERROR_MALFORMED_FLAG);
    const struct ld__rollout *ro = v->rollout;
    double b;
    bool had;
    int rc = bucket_of(es, &ro->by, &f->h.key, &f->salt, ro->has_seed, ro->seed, &b, &had);
    if (rc < 0)
        return rc;
    double sum = 0;
    for (size_t i = 0; i < ro->n; i++) {
        sum += ro->w[i].weight / 100000.0;
        if (b < sum) {
            *index = ro->w[i].variation;
            *in_experiment = ro->experiment && !ro->w[i].untracked && had;
            return 0;
        }
    }
    const struct ld__weighted *last = &ro->w[ro->n - 1];
    *index = last->variation;
    *in_experiment = ro->experiment && !last->untracked;
    return 0;
}

static int serve(struct es *es, const struct ld__flag *f, int index, struct res *r)
{
    if (index < 0 || (size_t)index >= f->nvars)
        return fail(es, LD_EVAL_ERROR_MALFORMED_FLAG);
    r->index = index;
    return 0;
}

static int off_result(struct es *es, const struct ld__flag *f, struct res *r)
{
    if (f->off == -1) {
        r->index = -1;
        return 0;
    }
    return serve(es, f, f->off, r);
}

/* True when the key part of the individual context of target `t` is in it. */
static bool target_match(const struct es *es, const struct ld__target *t)
{
    int part = ld__context_find(es->ctx, t->kind.s, t->kind.len);
    return part >= 0 &&
           ld__clause_values_match(t->keys, ld__context_part_key(es->ctx, (size_t)part));
}

static bool on_stack(const struct ld__item *const *stack, int n, const struct ld__str *key)
{
    for (int i = 0; i < n; i++)
        if (str_eq(&stack[i]->key, key))
            return true;
    return false;
}

static int eval_flag(struct es *es, const struct ld__flag *f, struct res *r);

/* The prerequisites: 1 when all are met, 0 (r set to PREREQUISITE_FAILED)
 * when one is not, or an error. */
static int prerequisites(struct es *es, const struct ld__flag *f, struct res *r)
{
    for (size_t i = 0; i < f->nprereqs; i++) {
        const struct ld__prereq *p = &f->prereqs[i];
        if (on_stack(es->flags, es->nflags, &p->key))
            return fail(es, LD_EVAL_ERROR_MALFORMED_FLAG); /* a cycle */
        const struct ld__item *it;
        int rc = es->rv->item(es->arg, LD__FLAG, &p->key, &it);
        if (rc < 0)
            return rc;
        bool met = false;
        if (it) {
            const struct ld__flag *pf = (const struct ld__flag *)it;
            struct res pr;
            rc = eval_flag(es, pf, &pr);
            if (es->nflags == 1 && rc != E_NEED) /* a prerequisite of the flag asked for */
                es->top_prereqs++;
            if (rc < 0)
                return rc;
            met = pf->on && pr.index >= 0 && pr.index == p->variation;
        }
        if (!met) {
            r->kind = LD_REASON_PREREQUISITE_FAILED;
            r->prereq = p->key;
            return 0;
        }
    }
    return 1;
}

static int eval_flag(struct es *es, const struct ld__flag *f, struct res *r)
{
    memset(r, 0, sizeof *r);
    r->index = -1;
    r->rule = -1;
    if (f->h.bad || es->nflags >= MAX_DEPTH || ++es->visits > MAX_VISITS)
        return fail(es, LD_EVAL_ERROR_MALFORMED_FLAG);
    if (!f->on) {
        r->kind = LD_REASON_OFF;
        return off_result(es, f, r);
    }
    es->flags[es->nflags++] = &f->h;
    int rc = prerequisites(es, f, r);
    es->nflags--;
    if (rc <= 0)
        return rc < 0 ? rc : off_result(es, f, r);
    for (size_t i = 0; i < f->ntargets; i++) {
        if (target_match(es, &f->targets[i])) {
            r->kind = LD_REASON_TARGET_MATCH;
            return serve(es, f, f->targets[i].variation, r);
        }
    }
    for (size_t i = 0; i < f->nrules; i++) {
        const struct ld__rule *ru = &f->rules[i];
        if (ru->bad)
            return fail(es, LD_EVAL_ERROR_MALFORMED_FLAG);
        rc = match_clauses(es, ru->clauses, ru->nclauses);
        if (rc < 0)
            return rc;
        if (rc) {
            int index;
            rc = vor_index(es, f, &ru->vor, &index, &r->in_experiment);
            if (rc < 0)
                return rc;
            r->kind = LD_REASON_RULE_MATCH;
            r->rule = (int)i;
            r->rule_id = ru->id;
            return serve(es, f, index, r);
        }
    }
    int index;
    rc = vor_index(es, f, &f->fallthrough, &index, &r->in_experiment);
    if (rc < 0)
        return rc;
    r->kind = LD_REASON_FALLTHROUGH;
    return serve(es, f, index, r);
}

static bool key_in(const struct es *es, const struct ld__clause_values *keys)
{
    if (!keys)
        return false;
    int part = ld__context_find(es->ctx, "user", 4);
    return part >= 0 && ld__clause_values_match(keys, ld__context_part_key(es->ctx, (size_t)part));
}

static bool any_target(const struct es *es, const struct ld__target *ts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (target_match(es, &ts[i]))
            return true;
    return false;
}

static int segment_rules(struct es *es, const struct ld__segment *s)
{
    for (size_t i = 0; i < s->nrules; i++) {
        const struct ld__segment_rule *ru = &s->rules[i];
        if (ru->bad)
            return fail(es, LD_EVAL_ERROR_MALFORMED_FLAG);
        int rc = match_clauses(es, ru->clauses, ru->nclauses);
        if (rc < 0)
            return rc;
        if (!rc)
            continue;
        if (!ru->has_weight)
            return 1;
        double b;
        bool had;
        rc = bucket_of(es, &ru->by, &s->h.key, &s->salt, false, 0, &b, &had);
        if (rc < 0)
            return rc;
        if (had && b < ru->weight / 100000.0)
            return 1;
    }
    return 0;
}

/* A big segment: the membership of the context's key, else the rules. */
static int big_segment(struct es *es, const struct ld__segment *s)
{
    if (!s->has_generation) {
        big_merge(es, LD_BIG_SEGMENTS_STATUS_NOT_CONFIGURED);
        return 0;
    }
    int part = ld__context_find(es->ctx, s->unbounded_kind.s, s->unbounded_kind.len);
    if (part < 0)
        return 0;
    const json_t *m;
    int status;
    int rc = es->rv->membership(es->arg, ld__context_part_key(es->ctx, (size_t)part), &m, &status);
    if (rc < 0)
        return rc;
    big_merge(es, status);
    if (m) {
        char small[256];
        size_t need = s->h.key.len + 24;
        char *ref = need <= sizeof small ? small : ld__malloc(need);
        if (!ref)
            return fail(es, LD_EVAL_ERROR_EXCEPTION);
        int n = snprintf(ref, need, "%.*s.g%lld", (int)s->h.key.len, s->h.key.s,
                         (long long)s->generation);
        const json_t *v = n > 0 ? json_object_getn(m, ref, (size_t)n) : NULL;
        if (ref != small)
            ld__free(ref);
        if (json_is_boolean(v))
            return json_is_true(v);
    }
    return segment_rules(es, s);
}

static int segment_contains(struct es *es, const struct ld__segment *s)
{
    if (s->h.bad || es->nsegments >= MAX_DEPTH || ++es->visits > MAX_VISITS ||
        on_stack(es->segments, es->nsegments, &s->h.key))
        return fail(es, LD_EVAL_ERROR_MALFORMED_FLAG);
    es->segments[es->nsegments++] = &s->h;
    int rc;
    if (s->unbounded)
        rc = big_segment(es, s);
    else if (key_in(es, s->included) || any_target(es, s->included_ctx, s->nincluded_ctx))
        rc = 1;
    else if (key_in(es, s->excluded) || any_target(es, s->excluded_ctx, s->nexcluded_ctx))
        rc = 0;
    else
        rc = segment_rules(es, s);
    es->nsegments--;
    return rc;
}

static bool of_type(const json_t *v, ld_value_type type)
{
    switch (type) {
    case LD_VALUE_BOOL:
        return json_is_boolean(v);
    case LD_VALUE_INT:
    case LD_VALUE_DOUBLE:
        return json_is_number(v);
    case LD_VALUE_STRING:
        return json_is_string(v);
    default:
        return true;
    }
}

/* Evaluates `f` (NULL: not found) into `d`, whose value and strings it
 * borrows from `f` (value NULL: the fallback is served). @return 0 or
 * E_NEED (d is then undefined). */
static int evaluate_into(const ld_context *ctx, const struct resolver *rv, void *arg,
                         const struct ld__item *f, ld_value_type type, const json_t *fallback,
                         ld_detail *d)
{
    struct es es;
    es.ctx = ctx;
    es.rv = rv;
    es.arg = arg;
    es.nflags = es.nsegments = 0;
    es.visits = 0;
    es.big = -1;
    es.error = LD_EVAL_ERROR_NONE;
    es.top_prereqs = 0;
    struct res r;
    int rc;
    if (!f || f->deleted) {
        rc = fail(&es, LD_EVAL_ERROR_FLAG_NOT_FOUND);
    } else if (((const struct ld__flag *)f)->simple) { /* known when compiled */
        const struct ld__flag *fl = (const struct ld__flag *)f;
        memset(&r, 0, sizeof r);
        r.kind = fl->simple_kind;
        r.index = fl->simple_index;
        r.rule = -1;
        rc = 0;
    } else {
        rc = eval_flag(&es, (const struct ld__flag *)f, &r);
        if (rc == E_NEED)
            return E_NEED;
    }
    memset(d, 0, sizeof *d);
    d->big = (int8_t)es.big;
    d->index = -1;
    d->rule = -1;
    d->nprereqs = (uint16_t)(es.top_prereqs < UINT16_MAX ? es.top_prereqs : UINT16_MAX);
    if (rc != 0) {
        d->kind = LD_REASON_ERROR;
        d->error = es.error != LD_EVAL_ERROR_NONE ? (uint8_t)es.error : LD_EVAL_ERROR_EXCEPTION;
        return 0;
    }
    d->kind = r.kind;
    d->rule = r.rule;
    d->rule_id = r.rule_id;
    d->prereq = r.prereq;
    d->in_experiment = r.in_experiment;
    if (r.index >= 0) {
        json_t *v = ((const struct ld__flag *)f)->vars[r.index];
        if (fallback && !json_is_null(fallback) && !of_type(v, type)) {
            memset(d, 0, sizeof *d);
            d->big = (int8_t)es.big;
            d->index = d->rule = -1;
            d->kind = LD_REASON_ERROR;
            d->error = LD_EVAL_ERROR_WRONG_TYPE;
            return 0;
        }
        d->index = r.index;
        d->value = v;
    }
    return 0;
}

/* True for jansson's true, false and null, which are never freed (their
 * count is (size_t)-1 and never changes). */
static bool immortal(const json_t *v)
{
    return __atomic_load_n(&v->refcount, __ATOMIC_RELAXED) == (size_t)-1;
}

/* A detail of its own for `tmp`, which borrows from `f`: it references the
 * flag when it needs anything of it (a value other than true, false or
 * null; a rule id or prerequisite key), and takes `fallback` (stolen) when
 * no variation is served. It never references a value of the flag with
 * jansson's count: a detail may be released on another thread while the
 * loop thread counts references to the same value, and jansson's inline
 * counting is not free of data races. NULL when memory ran out. */
static ld_detail *detail_new(const ld_detail *tmp, const struct ld__item *f, json_t *fallback)
{
    ld_detail *d = ld__line_alloc();
    if (!d) {
        json_decref(fallback);
        return NULL;
    }
    *d = *tmp;
    if (d->rule_id.s || d->prereq.s || (d->index >= 0 && !immortal(d->value)))
        d->flag = ld__item_ref((struct ld__item *)f);
    if (d->index >= 0)
        json_decref(fallback);
    else
        d->value = fallback;
    return d;
}

/* evaluate_into() and detail_new(): 0 with *out (NULL when memory ran
 * out; fallback stolen), or E_NEED (fallback not taken). */
static int evaluate(const ld_context *ctx, const struct resolver *rv, void *arg,
                    const struct ld__item *f, ld_value_type type, json_t *fallback, ld_detail **out)
{
    ld_detail tmp;
    *out = NULL;
    if (evaluate_into(ctx, rv, arg, f, type, fallback, &tmp) == E_NEED)
        return E_NEED;
    *out = detail_new(&tmp, f, fallback);
    return 0;
}

/* ---- Reading at once ----------------------------------------------------- */

static const ld_kind *kind_of(enum ld__item_type type)
{
    return type == LD__FLAG ? ld_kind_features() : ld_kind_segments();
}

/* False for a key no store can hold: empty, with a NUL inside (JSON allows
 * "p\u0000x"; the store's get takes a C string, which would ask for "p"),
 * or not valid UTF-8 (a store rejects it with LD_EINVAL). Such a flag,
 * prerequisite or segment is absent, on every store. */
static bool key_ok(const struct ld__str *key)
{
    return key->len > 0 && !memchr(key->s, '\0', key->len) && ld__utf8_valid(key->s, key->len);
}

/* Reads an item at once for ld_evaluator_detail(): the flag asked for, or
 * (`walk`) an item its evaluation reads, which must not let go of the items
 * read before it (borrowed from the cache, which holds the only reference
 * to a JSON item that the store answered with a copy of, or let go of). */
static int now_read(ld_evaluator *ev, enum ld__item_type type, const struct ld__str *key,
                    const struct ld__item **out, bool walk)
{
    *out = NULL;
    if (!key_ok(key))
        return 0;
    json_t *json;
    struct ld_lease *lease;
    int rc = ld__store_get_now(ev->store, kind_of(type), key->s, key->len, &json, &lease);
    if (rc == LD_EBUSY || rc == LD_ENOMEM)
        return E_NEED; /* the job path asks again, and reports LD_ENOMEM */
    if (rc < 0)
        return E_FAIL; /* es->error: the caller's evaluate() reports EXCEPTION */
    if (!json)
        return 0;
    struct ld__item *it = cache_get_keep(&ev->cache, type, json, walk);
    if (lease)
        lease->release(lease);
    else
        json_decref(json);
    if (!it)
        return E_NEED; /* out of memory: the job path reports it */
    *out = it->deleted ? NULL : it;
    return 0;
}

/* The resolver of ld_evaluator_detail() on a store that answers at once. */
static int now_item(void *arg, enum ld__item_type type, const struct ld__str *key,
                    const struct ld__item **out)
{
    return now_read(arg, type, key, out, true);
}

static int now_membership(void *arg, const json_t *key, const json_t **m, int *status)
{
    ld_evaluator *ev = arg;
    (void)key;
    *m = NULL;
    *status = LD_BIG_SEGMENTS_STATUS_NOT_CONFIGURED;
    return ev->bss ? E_NEED : 0;
}

static const struct resolver NOW = {now_item, now_membership};

/* ---- Jobs: evaluations that wait for the store --------------------------- */

enum { S_WANTED, S_ASKED, S_DONE };

struct slot {
    struct job *job;
    struct slot *next;
    char *key;
    size_t len;
    struct ld__item *item; /* referenced; NULL when absent */
    int error;             /* the store's, or 0 */
    uint8_t type;
    uint8_t state;
};

struct mslot {
    struct job *job;
    struct mslot *next;
    json_t *key;        /* the context key, referenced */
    json_t *membership; /* referenced, or NULL */
    int status;
    uint8_t state;
};

struct job {
    struct job *prev, *next;
    ld_evaluator *ev; /* NULL once the evaluator is freed */
    ld_store *store;
    ld_future *out;
    ld_context *ctx;
    json_t *fallback;
    char *key;
    size_t len;
    struct slot *slots;
    struct mslot *mslots;
    json_t *flags, *segments; /* all flags: the snapshots */
    int64_t metadata;
    int metadata_error;
    int outstanding;
    int store_error;    /* a store read failed: EXCEPTION */
    bool uninitialized; /* all flags: the store was never initialized */
    unsigned options;
    uint8_t type;
    uint8_t metadata_state;
    bool all;
    bool nomem;
};

static void job_step(struct job *j);

static void job_free(struct job *j)
{
    for (struct slot *s = j->slots, *n; s; s = n) {
        n = s->next;
        ld__item_unref(s->item);
        ld__free(s->key);
        ld__free(s);
    }
    for (struct mslot *s = j->mslots, *n; s; s = n) {
        n = s->next;
        json_decref(s->key);
        json_decref(s->membership);
        ld__free(s);
    }
    json_decref(j->flags);
    json_decref(j->segments);
    json_decref(j->fallback);
    ld_context_unref(j->ctx);
    ld__free(j->key);
    ld_future_unref(j->out);
    ld__free(j);
}

static void job_unlink(struct job *j)
{
    if (!j->ev)
        return;
    if (j->prev)
        j->prev->next = j->next;
    else
        j->ev->jobs = j->next;
    if (j->next)
        j->next->prev = j->prev;
    j->prev = j->next = NULL;
    j->ev = NULL;
}

/* Ends the job: `d` (or `all`) fulfils its future, or `code` rejects it. */
static void job_end(struct job *j, ld_detail *d, json_t *all, int code)
{
    job_unlink(j);
    if (d)
        ld_future_fulfill_ptr(j->out, d, detail_free);
    else if (all)
        ld_future_fulfill_json(j->out, all);
    else
        ld_future_reject(j->out, code, NULL);
    if (j->outstanding == 0)
        job_free(j);
    else
        j->ev = NULL; /* freed by the last callback */
}

static struct slot *find_slot(struct job *j, enum ld__item_type type, const char *key, size_t len)
{
    for (struct slot *s = j->slots; s; s = s->next)
        if (s->type == type && s->len == len && memcmp(s->key, key, len) == 0)
            return s;
    return NULL;
}

static struct slot *want(struct job *j, enum ld__item_type type, const char *key, size_t len)
{
    struct slot *s = find_slot(j, type, key, len);
    if (s || !key_ok(&(struct ld__str){key, len}))
        return s;
    s = ld__calloc(1, sizeof *s);
    char *k = ld__malloc(len + 1);
    if (!s || !k) {
        ld__free(s);
        ld__free(k);
        j->nomem = true;
        return NULL;
    }
    memcpy(k, key, len);
    k[len] = '\0';
    s->job = j;
    s->key = k;
    s->len = len;
    s->type = (uint8_t)type;
    s->state = S_WANTED;
    s->next = j->slots;
    j->slots = s;
    return s;
}

static void want_ref(void *arg, enum ld__item_type type, const struct ld__str *key)
{
    want(arg, type, key->s, key->len);
}

/* True when the job is over (the evaluator went away): the callback that
 * found it so frees it once it was the last. */
static bool job_gone(struct job *j)
{
    j->outstanding--;
    if (j->ev)
        return false;
    if (j->outstanding == 0)
        job_free(j);
    return true;
}

static int job_membership(void *arg, const json_t *key, const json_t **m, int *status);

/* A big segment that came back: its membership read goes with the next
 * level's reads rather than after the walk that needs it. */
static void want_membership(struct job *j, const struct ld__item *it)
{
    const struct ld__segment *s = (const struct ld__segment *)it;
    if (it->type != LD__SEGMENT || !s->unbounded || !s->has_generation || !j->ev->bss)
        return;
    int part = ld__context_find(j->ctx, s->unbounded_kind.s, s->unbounded_kind.len);
    const json_t *m;
    int status;
    if (part >= 0)
        (void)job_membership(j, ld__context_part_key(j->ctx, (size_t)part), &m, &status);
}

static void item_done(ld_future *f, void *arg)
{
    struct slot *s = arg;
    struct job *j = s->job;
    if (job_gone(j))
        return;
    s->state = S_DONE;
    if (ld_future_is_fulfilled(f)) {
        json_t *json = ld_future_json(f);
        if (json) {
            struct ld__item *it = cache_get(&j->ev->cache, (enum ld__item_type)s->type, json);
            if (!it) {
                j->nomem = true;
            } else if (!it->deleted) {
                s->item = ld__item_ref(it);
                ld__item_references(it, want_ref, j); /* read them ahead */
                want_membership(j, it);
            }
        }
    } else if (ld_future_error(f) == LD_ENOMEM) {
        j->nomem = true; /* not the store's failure: say LD_ENOMEM */
    } else {
        s->error = ld_future_error(f);
        j->store_error = s->error;
    }
    if (j->outstanding == 0)
        job_step(j);
}

static void all_done(ld_future *f, void *arg)
{
    struct job *j = arg;
    if (job_gone(j))
        return;
    if (ld_future_is_fulfilled(f)) {
        json_t *o = ld_future_json(f);
        json_t **into = j->flags ? &j->segments : &j->flags;
        /* The flags' future was issued first and completes first (store
         * futures complete in issue order). */
        *into = json_incref(o ? o : json_object());
        if (!*into)
            j->nomem = true;
    } else if (ld_future_error(f) == LD_ENOMEM) {
        j->nomem = true;
    } else {
        j->store_error = ld_future_error(f);
    }
    if (j->outstanding == 0)
        job_step(j);
}

static void initialized_done(ld_future *f, void *arg)
{
    struct job *j = arg;
    if (job_gone(j))
        return;
    if (ld_future_is_fulfilled(f))
        j->uninitialized = !ld_future_bool(f);
    else if (ld_future_error(f) == LD_ENOMEM)
        j->nomem = true;
    else
        j->store_error = ld_future_error(f);
    if (j->outstanding == 0)
        job_step(j);
}

static void membership_done(ld_future *f, void *arg)
{
    struct mslot *s = arg;
    struct job *j = s->job;
    if (job_gone(j))
        return;
    s->state = S_DONE;
    if (ld_future_is_fulfilled(f))
        s->membership = json_incref(ld_future_json(f));
    else if (ld_future_error(f) == LD_ENOMEM)
        j->nomem = true;
    else
        s->status = LD_BIG_SEGMENTS_STATUS_STORE_ERROR;
    if (j->outstanding == 0)
        job_step(j);
}

static void metadata_done(ld_future *f, void *arg)
{
    struct job *j = arg;
    if (job_gone(j))
        return;
    j->metadata_state = S_DONE;
    if (ld_future_is_fulfilled(f))
        j->metadata = ld_future_int(f);
    else if (ld_future_error(f) == LD_ENOMEM)
        j->nomem = true;
    else
        j->metadata_error = ld_future_error(f);
    if (j->outstanding == 0)
        job_step(j);
}

static int64_t now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* The status of a membership that came back. */
static int membership_status(const struct job *j, const struct mslot *s)
{
    if (s->status == LD_BIG_SEGMENTS_STATUS_STORE_ERROR || j->metadata_error)
        return LD_BIG_SEGMENTS_STATUS_STORE_ERROR;
    if (ld_big_segment_is_stale(j->metadata, now_ms(), j->ev->stale_after))
        return LD_BIG_SEGMENTS_STATUS_STALE;
    return LD_BIG_SEGMENTS_STATUS_HEALTHY;
}

static int job_item(void *arg, enum ld__item_type type, const struct ld__str *key,
                    const struct ld__item **out)
{
    struct job *j = arg;
    *out = NULL;
    if (!key_ok(key))
        return 0;
    if (j->all) {
        json_t *o = type == LD__FLAG ? j->flags : j->segments;
        json_t *json = json_object_getn(o, key->s, key->len);
        if (!json)
            return 0;
        struct ld__item *it = j->ev ? cache_get(&j->ev->cache, type, json) : NULL;
        if (!it) {
            j->nomem = true;
            return E_NEED;
        }
        *out = it->deleted ? NULL : it;
        return 0;
    }
    struct slot *s = find_slot(j, type, key->s, key->len);
    if (s && s->state == S_DONE) {
        if (s->error)
            return E_FAIL;
        *out = s->item;
        return 0;
    }
    if (j->store_error)
        return E_FAIL; /* the store failed (or went away): ask it nothing more */
    if (!s)
        want(j, type, key->s, key->len);
    return E_NEED;
}

static int job_membership(void *arg, const json_t *key, const json_t **m, int *status)
{
    struct job *j = arg;
    *m = NULL;
    *status = LD_BIG_SEGMENTS_STATUS_NOT_CONFIGURED;
    if (!j->ev->bss)
        return 0;
    for (struct mslot *s = j->mslots; s; s = s->next) {
        if (json_equal(s->key, key)) {
            if (s->state != S_DONE)
                return E_NEED;
            *m = s->membership;
            *status = membership_status(j, s);
            return 0;
        }
    }
    struct mslot *s = ld__calloc(1, sizeof *s);
    if (!s) {
        j->nomem = true;
        return E_NEED;
    }
    s->job = j;
    s->key = json_incref((json_t *)key);
    s->state = S_WANTED;
    s->next = j->mslots;
    j->mslots = s;
    return E_NEED;
}

static const struct resolver JOB = {job_item, job_membership};

/* Issues what the job wants. @return how many reads it issued. */
static int job_issue(struct job *j)
{
    int issued = 0;
    for (struct slot *s = j->slots; s; s = s->next) {
        if (s->state != S_WANTED)
            continue;
        if (j->store_error) { /* ask a failed store nothing more */
            s->state = S_DONE;
            s->error = j->store_error;
            continue;
        }
        s->state = S_ASKED;
        ld_future *f = ld_store_get(j->store, kind_of((enum ld__item_type)s->type), s->key);
        j->outstanding++;
        if (ld_future_on_complete(f, item_done, s) != 0) {
            j->outstanding--;
            s->state = S_DONE;
            s->error = LD_ENOMEM;
            j->nomem = true;
        } else {
            issued++;
        }
    }
    bool any = false;
    for (struct mslot *s = j->mslots; s; s = s->next) {
        if (s->state != S_WANTED)
            continue;
        any = true;
        s->state = S_ASKED;
        char hash[LD__BIG_SEGMENT_HASH_LEN + 1];
        ld__big_segment_hash(json_string_value(s->key), json_string_length(s->key), hash);
        ld_future *f = ld_big_segment_store_get_membership(j->ev->bss, hash);
        j->outstanding++;
        if (ld_future_on_complete(f, membership_done, s) != 0) {
            j->outstanding--;
            s->state = S_DONE;
            s->status = LD_BIG_SEGMENTS_STATUS_STORE_ERROR;
            j->nomem = true;
        } else {
            issued++;
        }
    }
    if (any && j->metadata_state == S_WANTED) {
        j->metadata_state = S_ASKED;
        j->outstanding++;
        if (ld_future_on_complete(ld_big_segment_store_get_metadata(j->ev->bss), metadata_done,
                                  j) != 0) {
            j->outstanding--;
            j->metadata_state = S_DONE;
            j->metadata_error = LD_ENOMEM;
            j->nomem = true;
        } else {
            issued++;
        }
    }
    return issued;
}

static json_t *all_flags_state(struct job *j, int *rc);

/* Runs the evaluation over what came back, or asks for more. */
static void job_step(struct job *j)
{
    if (!j->ev) {
        job_end(j, NULL, NULL, LD_ECANCELED);
        return;
    }
    if (j->nomem) {
        job_end(j, NULL, NULL, LD_ENOMEM);
        return;
    }
    if (job_issue(j) > 0)
        return;
    if (j->nomem) {
        job_end(j, NULL, NULL, LD_ENOMEM);
        return;
    }
    if (j->all) {
        int rc;
        json_t *state = all_flags_state(j, &rc);
        if (rc == E_NEED && !j->nomem && job_issue(j) > 0)
            return;
        if (!state)
            job_end(j, NULL, NULL, LD_ENOMEM);
        else
            job_end(j, NULL, state, 0);
        return;
    }
    const struct ld__item *f = NULL;
    struct ld__str key = {j->key, j->len};
    int rc = job_item(j, LD__FLAG, &key, &f);
    ld_detail *d = NULL;
    if (rc == E_FAIL) {
        /* The flag could not be read. */
        d = ld__line_alloc();
        if (d) {
            memset(d, 0, sizeof *d);
            d->index = d->rule = d->big = -1;
            d->kind = LD_REASON_ERROR;
            d->error = LD_EVAL_ERROR_EXCEPTION;
            d->value = j->fallback;
            j->fallback = NULL;
        }
    } else if (rc == 0) {
        json_t *fb = json_incref(j->fallback);
        rc = evaluate(j->ctx, &JOB, j, f, (ld_value_type)j->type, fb, &d);
        if (rc == E_NEED) {
            json_decref(fb);
            if (!j->nomem && job_issue(j) > 0)
                return;
            j->nomem = true; /* nothing more to ask for: only memory can say E_NEED */
        }
    }
    if (!d) {
        job_end(j, NULL, NULL, LD_ENOMEM);
        return;
    }
    job_end(j, d, NULL, 0);
}

static struct job *job_new(ld_evaluator *ev, ld_context *ctx)
{
    struct job *j = ld__calloc(1, sizeof *j);
    ld_future *out = ld_future_new(ev->base);
    if (!j || !out) {
        ld__free(j);
        ld_future_unref(out);
        return NULL;
    }
    j->ev = ev;
    j->store = ev->store;
    j->out = out;
    j->ctx = ld_context_ref(ctx);
    j->metadata_state = S_WANTED;
    j->next = ev->jobs;
    if (ev->jobs)
        ev->jobs->prev = j;
    ev->jobs = j;
    return j;
}

/* Starts the job; returns the caller's reference to its future. */
static ld_future *job_start(struct job *j)
{
    ld_future *r = ld_future_ref(j->out);
    job_step(j);
    return r;
}

/* ---- The public functions ------------------------------------------------ */

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
        struct job *j = ev->jobs;
        job_unlink(j);
        ld_future_reject(j->out, LD_ECANCELED, "the evaluator was freed");
        if (j->outstanding == 0)
            job_free(j);
    }
    cache_free(&ev->cache);
    ld__free(ev);
}

int ld_evaluator_stats(const ld_evaluator *ev, struct ld_evaluator_stats *out)
{
    if (!ev || !out)
        return LD_EINVAL;
    out->flags = ev->cache.nflags;
    out->segments = ev->cache.nsegments;
    out->bytes = ev->cache.bytes +
                 (ev->cache.t ? (ev->cache.mask + 1) * sizeof(struct centry) : 0) +
                 ev->cache.plan.n * sizeof(struct plan_entry) +
                 (ev->cache.metas.t ? (ev->cache.metas.mask + 1) * sizeof(struct mentry) : 0);
    return 0;
}

ld_future *ld_evaluator_detail(ld_evaluator *ev, const char *flag_key, ld_context *ctx,
                               ld_value_type type, json_t *fallback)
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
        rc = evaluate(ctx, &NOW, ev, f, type, fallback, &d);
    if (ev->cache.deferred) /* the walk is over: drop what it kept */
        (void)cache_grow(&ev->cache, false);
    if (rc == 0) {
        ld_future *r = d ? ld__future_later_ptr(ev->base, d, detail_free) : NULL;
        return r ? r : ld__future_rejected_static(ev->base, LD_ENOMEM, NULL);
    }
    struct job *j = job_new(ev, ctx);
    char *k = j ? ld__malloc(len + 1) : NULL;
    if (!k) {
        if (j) {
            job_unlink(j);
            job_free(j);
        }
        json_decref(fallback);
        return ld__future_rejected_static(ev->base, LD_ENOMEM, NULL);
    }
    memcpy(k, flag_key, len + 1);
    j->key = k;
    j->len = len;
    j->type = (uint8_t)type;
    j->fallback = fallback;
    want(j, LD__FLAG, k, len);
    return job_start(j);
}

/* ---- Details ------------------------------------------------------------- */

json_t *ld_detail_value(const ld_detail *d)
{
    return d ? d->value : NULL;
}

int ld_detail_variation_index(const ld_detail *d)
{
    return d ? d->index : -1;
}

enum ld_reason_kind ld_detail_reason_kind(const ld_detail *d)
{
    return d ? (enum ld_reason_kind)d->kind : LD_REASON_ERROR;
}

enum ld_eval_error ld_detail_error(const ld_detail *d)
{
    return d ? (enum ld_eval_error)d->error : LD_EVAL_ERROR_NONE;
}

int ld_detail_rule_index(const ld_detail *d)
{
    return d && d->kind == LD_REASON_RULE_MATCH ? d->rule : -1;
}

const char *ld_detail_rule_id(const ld_detail *d)
{
    return d && d->kind == LD_REASON_RULE_MATCH ? d->rule_id.s : NULL;
}

const char *ld_detail_prerequisite_key(const ld_detail *d)
{
    return d && d->kind == LD_REASON_PREREQUISITE_FAILED ? d->prereq.s : NULL;
}

bool ld_detail_in_experiment(const ld_detail *d)
{
    return d && d->in_experiment;
}

int ld_detail_big_segments_status(const ld_detail *d)
{
    return d ? d->big : -1;
}

const char *ld_reason_kind_name(enum ld_reason_kind kind)
{
    static const char *const names[] = {"OFF",        "FALLTHROUGH",         "TARGET_MATCH",
                                        "RULE_MATCH", "PREREQUISITE_FAILED", "ERROR"};
    return (unsigned)kind < sizeof names / sizeof *names ? names[kind] : "UNKNOWN";
}

const char *ld_eval_error_name(enum ld_eval_error error)
{
    static const char *const names[] = {"NONE",           "FLAG_NOT_FOUND",
                                        "MALFORMED_FLAG", "USER_NOT_SPECIFIED",
                                        "WRONG_TYPE",     "EXCEPTION"};
    return (unsigned)error < sizeof names / sizeof *names ? names[error] : "UNKNOWN";
}

static int set_new(json_t *o, const char *k, json_t *v)
{
    return json_object_set_new(o, k, v);
}

/* The reason object of a detail's parts. */
static json_t *reason_json(uint8_t kind, uint8_t error, int rule, const struct ld__str *rule_id,
                           const struct ld__str *prereq, bool in_experiment, int big)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    int rc = set_new(o, "kind", json_string(ld_reason_kind_name((enum ld_reason_kind)kind)));
    /* The strings are the stored item's as they are: valid UTF-8 unless a C
     * caller made them with json_stringn_nocheck(), which json_stringn()
     * would refuse (as if memory ran out). */
    if (kind == LD_REASON_RULE_MATCH) {
        rc |= set_new(o, "ruleIndex", json_integer(rule));
        if (rule_id->s)
            rc |= set_new(o, "ruleId", json_stringn_nocheck(rule_id->s, rule_id->len));
    } else if (kind == LD_REASON_PREREQUISITE_FAILED) {
        rc |= set_new(o, "prerequisiteKey", json_stringn_nocheck(prereq->s, prereq->len));
    } else if (kind == LD_REASON_ERROR) {
        rc |= set_new(o, "errorKind", json_string(ld_eval_error_name((enum ld_eval_error)error)));
    }
    if (in_experiment)
        rc |= set_new(o, "inExperiment", json_true());
    if (big >= 0)
        rc |= set_new(o, "bigSegmentsStatus",
                      json_string(ld_big_segments_status_name((enum ld_big_segments_status)big)));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *ld_detail_reason_to_json(const ld_detail *d)
{
    if (!d)
        return NULL;
    return reason_json(d->kind, d->error, d->rule, &d->rule_id, &d->prereq, d->in_experiment,
                       d->big);
}

json_t *ld_detail_to_json(const ld_detail *d)
{
    if (!d)
        return NULL;
    json_t *o = json_object();
    json_t *reason = ld_detail_reason_to_json(d);
    if (!o || !reason)
        goto fail;
    /* A copy of a value of the flag: the detail may be read on another
     * thread than the one counting references to that value. */
    json_t *v = !d->value                            ? json_null()
                : d->index < 0 || immortal(d->value) ? json_incref(d->value)
                                                     : json_deep_copy(d->value);
    int rc = json_object_set_new(o, "value", v);
    if (d->index >= 0)
        rc |= set_new(o, "variationIndex", json_integer(d->index));
    rc |= set_new(o, "reason", reason);
    reason = NULL;
    if (rc)
        goto fail;
    return o;
fail:
    json_decref(o);
    json_decref(reason);
    return NULL;
}

/* ---- All flags ----------------------------------------------------------- */

static size_t mentry_hash(const struct mentry *e)
{
    uint64_t x = (uint64_t)e->version * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)e->debug ^
                 ((uint64_t)(unsigned)e->index << 3 | (uint64_t)e->with_version << 2 |
                  (uint64_t)e->with_debug << 1 | e->track);
    return hash_ptr((const void *)(uintptr_t)x);
}

static bool mentry_same(const struct mentry *a, const struct mentry *b)
{
    return a->version == b->version && a->debug == b->debug && a->index == b->index &&
           a->with_version == b->with_version && a->with_debug == b->with_debug &&
           a->track == b->track;
}

static void metas_put(struct metas *m, const struct mentry *e)
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
static int metas_grow(struct metas *m)
{
    size_t live = 0;
    for (size_t i = 0; m->t && i <= m->mask; i++)
        live += m->t[i].obj && __atomic_load_n(&m->t[i].obj->refcount, __ATOMIC_ACQUIRE) > 1;
    size_t cap = 64;
    while (cap < 4 * (live + 1))
        cap *= 2;
    struct mentry *t = ld__calloc(cap, sizeof *t);
    if (!t)
        return LD_ENOMEM;
    struct metas old = *m;
    m->t = t;
    m->mask = cap - 1;
    m->n = 0;
    for (size_t i = 0; old.t && i <= old.mask; i++) {
        if (!old.t[i].obj)
            continue;
        if (__atomic_load_n(&old.t[i].obj->refcount, __ATOMIC_ACQUIRE) > 1)
            metas_put(m, &old.t[i]);
        else
            json_decref(old.t[i].obj);
    }
    ld__free(old.t);
    return 0;
}

/* The shared entry with content `e`, found or made. @return a new
 * reference, or NULL when memory ran out. */
static json_t *metas_get(struct metas *m, struct mentry *e)
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
 * "debugEventsUntilDate"}, shared (see struct mentry) and remembered by
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
        struct mentry e = {details ? f->h.version : 0,
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

/* Adds flag `f`'s result to the state `st` (its values) and `meta`
 * ($flagsState) under `key` (`klen` bytes): the key the store filed it
 * under, which a store implementation may answer with an item whose own
 * "key" is missing or not a string. @return 0, E_NEED or LD_ENOMEM. */
static int add_flag(struct job *j, struct ld__flag *f, const char *key, size_t klen, json_t *st,
                    json_t *meta)
{
    ld_detail d;
    if (evaluate_into(j->ctx, &JOB, j, &f->h, LD_VALUE_ANY, NULL, &d) == E_NEED)
        return E_NEED;
    bool track_reason = d.in_experiment ||
                        (d.kind == LD_REASON_RULE_MATCH && d.rule >= 0 &&
                         (size_t)d.rule < f->nrules && f->rules[d.rule].track_events) ||
                        (d.kind == LD_REASON_FALLTHROUGH && f->track_fallthrough);
    bool details = !(j->options & LD_ALL_FLAGS_DETAILS_ONLY_FOR_TRACKED_FLAGS) || f->track_events ||
                   track_reason || f->has_debug;
    bool reason = (details && (j->options & LD_ALL_FLAGS_WITH_REASONS)) || track_reason;
    json_t *m;
    int e = 0;
    if (!reason && d.index >= 0 && d.nprereqs == 0) {
        m = shared_meta(j->ev, f, d.index, details);
        e = m ? 0 : -1;
    } else {
        m = json_object();
        e = m ? 0 : -1;
        if (m && d.index >= 0)
            e |= set_new(m, "variation", json_integer(d.index));
        if (m && details)
            e |= set_new(m, "version", json_integer(f->h.version));
        if (m && reason) {
            json_t *r = ld_detail_reason_to_json(&d);
            e |= r ? set_new(m, "reason", r) : -1;
        }
        if (m && (f->track_events || track_reason))
            e |= set_new(m, "trackEvents", json_true());
        if (m && track_reason)
            e |= set_new(m, "trackReason", json_true());
        if (m && f->has_debug)
            e |= set_new(m, "debugEventsUntilDate", json_integer(f->debug_until));
        if (m && d.nprereqs > 0)
            e |= set_new(m, "prerequisites", prerequisite_keys(f, d.nprereqs));
    }
    if (e) {
        json_decref(m);
        return LD_ENOMEM;
    }
    e |= json_object_setn_new_nocheck(meta, key, klen, m);
    e |= json_object_setn_nocheck(st, key, klen, d.value ? d.value : json_null());
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

/* Makes `ev`'s plan that of `flags` (a snapshot). @return 0 or LD_ENOMEM
 * (the plan is then empty). */
static int plan_make(ld_evaluator *ev, json_t *flags)
{
    plan_free(&ev->cache.plan);
    size_t n = json_object_size(flags);
    struct plan_entry *e = n ? ld__calloc(n, sizeof *e) : NULL;
    if (n && !e)
        return LD_ENOMEM;
    size_t k = 0;
    const char *key;
    size_t klen;
    json_t *v;
    json_object_keylen_foreach(flags, key, klen, v)
    {
        struct ld__item *it = cache_get(&ev->cache, LD__FLAG, v);
        if (!it) {
            ev->cache.plan.e = e;
            ev->cache.plan.n = k;
            plan_free(&ev->cache.plan);
            return LD_ENOMEM;
        }
        if (it->deleted)
            continue;
        e[k].key = key;
        e[k].len = klen;
        e[k].f = (struct ld__flag *)ld__item_ref(it);
        k++;
    }
    ev->cache.plan.snapshot = json_incref(flags);
    ev->cache.plan.e = e;
    ev->cache.plan.n = k;
    return 0;
}

/* The all-flags state of the job's snapshots; NULL when memory ran out or
 * *rc is E_NEED (memberships to read). */
static json_t *all_flags_state(struct job *j, int *rc)
{
    *rc = 0;
    if (j->store_error || j->uninitialized)
        return invalid_state();
    json_t *st = json_object(), *meta = json_object();
    if (!st || !meta)
        goto fail;
    if (j->ev->cache.plan.snapshot != j->flags && plan_make(j->ev, j->flags) != 0)
        goto fail;
    const struct plan *p = &j->ev->cache.plan;
    for (size_t i = 0; i < p->n; i++) {
        /* The flags are cold at 10,000: ask for the ones ahead. */
        if (i + 8 < p->n)
            __builtin_prefetch(p->e[i + 8].f);
        struct ld__flag *f = p->e[i].f;
        if ((j->options & LD_ALL_FLAGS_CLIENT_SIDE_ONLY) && !f->client_side)
            continue;
        *rc = add_flag(j, f, p->e[i].key, p->e[i].len, st, meta);
        if (*rc != 0)
            goto fail;
    }
    if (json_object_set_new(st, "$flagsState", meta) != 0) {
        meta = NULL;
        goto fail;
    }
    meta = NULL;
    if (json_object_set_new(st, "$valid", json_true()) != 0)
        goto fail;
    return st;
fail:
    json_decref(st);
    json_decref(meta);
    if (*rc == 0)
        *rc = LD_ENOMEM;
    if (*rc == LD_ENOMEM)
        j->nomem = true;
    return NULL;
}

ld_future *ld_evaluator_all_flags(ld_evaluator *ev, ld_context *ctx, unsigned options)
{
    if (!ev)
        return NULL;
    if (!ctx || (options & ~7u))
        return ld__future_rejected_static(
            ev->base, LD_EINVAL, !ctx ? "ctx must not be NULL" : "options has unknown bits");
    struct job *j = job_new(ev, ctx);
    if (!j)
        return ld__future_rejected_static(ev->base, LD_ENOMEM, NULL);
    j->all = true;
    j->options = options;
    json_t *flags = NULL, *segments = NULL;
    int init = ld__store_initialized_now(ev->store);
    j->uninitialized = init == 0;
    if (init >= 0 && ld__store_all_now(ev->store, ld_kind_features(), &flags) == 0 &&
        ld__store_all_now(ev->store, ld_kind_segments(), &segments) == 0) {
        j->flags = flags;
        j->segments = segments;
        int rc;
        json_t *state = all_flags_state(j, &rc);
        if (state) {
            job_unlink(j);
            job_free(j);
            ld_future *r = ld__future_later_json(ev->base, state, NULL);
            return r ? r : ld__future_rejected_static(ev->base, LD_ENOMEM, NULL);
        }
        if (rc != E_NEED) {
            job_unlink(j);
            job_free(j);
            return ld__future_rejected_static(ev->base, LD_ENOMEM, NULL);
        }
        j->nomem = false;
        return job_start(j); /* memberships to read */
    }
    json_decref(flags);
    /* Ask whether it is initialized (unless it said already) and for both
     * snapshots; the flags come back before the segments. */
    int e0 = 0;
    j->uninitialized = false;
    if (init < 0) {
        j->outstanding++;
        e0 = ld_future_on_complete(ld_store_initialized(ev->store), initialized_done, j);
        j->outstanding -= e0 != 0;
    } else {
        j->uninitialized = init == 0;
    }
    ld_future *ff = ld_store_all(ev->store, ld_kind_features());
    ld_future *fs = ld_store_all(ev->store, ld_kind_segments());
    j->outstanding += 2;
    int e1 = ld_future_on_complete(ff, all_done, j);
    int e2 = ld_future_on_complete(fs, all_done, j);
    j->outstanding -= (e1 != 0) + (e2 != 0);
    ld_future *r = ld_future_ref(j->out);
    if (e0 || e1 || e2) {
        j->nomem = true;
        if (j->outstanding == 0)
            job_step(j);
    }
    return r;
}
