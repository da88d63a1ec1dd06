/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * One evaluation (eval-internal.h): LaunchDarkly's flag evaluation over
 * compiled flags and segments (eval_compile.c), walked through a resolver
 * that finds an item by key, and the detail it makes.
 */
#include <string.h>

#include <ldasync/big_segments.h>
#include <ldasync/eval.h>

#include "core/core-internal.h"
#include "eval/eval-internal.h"
#include "model/model-internal.h"

/* Prerequisite chains and segment nesting deeper than this are
 * MALFORMED_FLAG (they are cycles in all real data). */
#define MAX_DEPTH 64

/* Flags and segments one evaluation may visit: nesting that names the same
 * item twice per level (two rules nesting one segment, a prerequisite listed
 * twice) doubles the walk at each level, 2^64 visits within MAX_DEPTH; past
 * this many the evaluation is MALFORMED_FLAG rather than a loop that hangs. */
#define MAX_VISITS 100000

struct es {
    const ld_context *ctx;
    const struct ld__resolver *rv;
    void *arg;
    const struct ld__item *flags[MAX_DEPTH];
    const struct ld__item *segments[MAX_DEPTH];
    int nflags, nsegments;
    long visits;                 /* flags and segments entered, up to MAX_VISITS */
    int big;                     /* the worst big segments status met, or -1 */
    int error;                   /* enum ld_eval_error after LD__E_FAIL */
    size_t top_prereqs;          /* prerequisites of the evaluated flag entered */
    const struct ld__item *flag; /* the flag whose rules run (of a prerequisite, inside one) */
    struct ld__prereq_log *log;  /* NULL: prerequisites not logged */
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
    return LD__E_FAIL;
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

/* Whether a kind of `ctx` is one of the strings of `values` (an `in`
 * clause on "kind"): each value looked up, for a context of many kinds. */
static bool kind_in(const ld_context *ctx, const json_t *values)
{
    size_t n = json_array_size(values);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(values, i);
        if (json_is_string(v) &&
            ld__context_find(ctx, json_string_value(v), json_string_length(v)) >= 0)
            return true;
    }
    return false;
}

/* Tells the resolver when `c` has just been stopped by a limit: the item
 * evaluated is the innermost segment, or else the innermost flag. */
static void note_stop(struct es *es, const struct ld__clause *c, bool was)
{
    if (was || !ld__clause_values_stopped(c->values) || !es->rv->stopped)
        return;
    if (es->nsegments > 0)
        es->rv->stopped(es->arg, es->segments[es->nsegments - 1]);
    else if (es->flag)
        es->rv->stopped(es->arg, es->flag);
}

/* 1 when the clause matches, 0 when not, or LD__E_FAIL / LD__E_NEED. */
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
    } else if (c->kinds && json_array_size(c->kinds) < ld_context_kind_count(es->ctx)) {
        m = kind_in(es->ctx, c->kinds);
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
        bool was = ld__clause_values_stopped(c->values);
        if (json_is_array(v)) {
            size_t n = json_array_size(v);
            for (size_t i = 0; i < n && !m; i++) {
                const json_t *e = json_array_get(v, i);
                m = !json_is_null(e) && ld__clause_values_match(c->values, e);
            }
        } else {
            m = ld__clause_values_match(c->values, v);
        }
        note_stop(es, c, was);
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
 * false when the context lacks the kind. LD__E_FAIL for a bad reference. */
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

/* Appends prerequisite `pf` of `of`, evaluated to `r`, to `log`. */
static void log_prereq(struct ld__prereq_log *log, const struct ld__flag *pf,
                       const struct ld__flag *of, const struct res *r)
{
    if (log->n == log->cap) {
        size_t cap = log->cap * 2;
        struct ld__prereq_ent *e =
            log->e == log->inl ? ld__malloc(cap * sizeof *e) : ld__realloc(log->e, cap * sizeof *e);
        if (!e)
            return; /* out of memory: this one is not told */
        if (log->e == log->inl)
            memcpy(e, log->inl, sizeof log->inl);
        log->e = e;
        log->cap = cap;
    }
    struct ld__prereq_ent *x = &log->e[log->n++];
    x->flag = pf;
    x->of = of;
    x->index = r->index;
    x->rule = r->rule;
    x->rule_id = r->rule_id;
    x->prereq = r->prereq;
    x->kind = r->kind;
    x->in_experiment = r->in_experiment;
}

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
            if (es->nflags == 1 && rc != LD__E_NEED) /* a prerequisite of the flag asked for */
                es->top_prereqs++;
            if (rc < 0)
                return rc;
            if (es->log)
                log_prereq(es->log, pf, f, &pr);
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

static int eval_flag_in(struct es *es, const struct ld__flag *f, struct res *r)
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

static int eval_flag(struct es *es, const struct ld__flag *f, struct res *r)
{
    const struct ld__item *outer = es->flag;
    es->flag = &f->h;
    int rc = eval_flag_in(es, f, r);
    es->flag = outer;
    return rc;
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
        const json_t *v = s->ref.s ? json_object_getn(m, s->ref.s, s->ref.len) : NULL;
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

static inline __attribute__((always_inline)) bool of_type(const json_t *v, ld_value_type type)
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
 * LD__E_NEED (d is then undefined). */
int ld__evaluate_into(const ld_context *ctx, const struct ld__resolver *rv, void *arg,
                      const struct ld__item *f, ld_value_type type, const json_t *fallback,
                      ld_detail *d, struct ld__prereq_log *log)
{
    if (f && !f->deleted && ((const struct ld__flag *)f)->simple) { /* known when compiled */
        const struct ld__flag *fl = (const struct ld__flag *)f;
        memset(d, 0, sizeof *d);
        d->big = -1;
        d->rule = -1;
        d->kind = fl->simple_kind;
        d->index = -1;
        if (fl->simple_index < 0)
            return 0;
        json_t *v = fl->vars[fl->simple_index];
        if (fallback && !json_is_null(fallback) && !of_type(v, type)) {
            d->kind = LD_REASON_ERROR;
            d->error = LD_EVAL_ERROR_WRONG_TYPE;
            return 0;
        }
        d->index = fl->simple_index;
        d->value = v;
        return 0;
    }
    struct es es;
    es.ctx = ctx;
    es.rv = rv;
    es.arg = arg;
    es.nflags = es.nsegments = 0;
    es.visits = 0;
    es.big = -1;
    es.error = LD_EVAL_ERROR_NONE;
    es.top_prereqs = 0;
    es.flag = NULL;
    es.log = log;
    struct res r;
    int rc;
    if (!f || f->deleted) {
        rc = fail(&es, LD_EVAL_ERROR_FLAG_NOT_FOUND);
    } else {
        rc = eval_flag(&es, (const struct ld__flag *)f, &r);
        if (rc == LD__E_NEED)
            return LD__E_NEED;
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

/* Makes `d` (evaluated by ld__evaluate_into(), borrowing from `f`) a
 * detail of its own: it references the flag when it needs anything of it
 * (a value other than true, false or null; a rule id or prerequisite key),
 * and takes `fallback` (stolen) when no variation is served. It never
 * references a value of the flag with jansson's count: a detail may be
 * released on another thread while the loop thread counts references to
 * the same value, and jansson's inline counting is not free of data
 * races. */
static void detail_own(ld_detail *d, const struct ld__item *f, json_t *fallback)
{
    if (d->rule_id.s || d->prereq.s || (d->index >= 0 && !ld__json_immortal(d->value)))
        d->flag = ld__item_ref((struct ld__item *)f);
    if (d->index >= 0)
        json_decref(fallback);
    else
        d->value = fallback;
}

/* Tells `rec` of the prerequisites `log` holds, then of `d` (the result of
 * `f`, NULL when not found, under `key`). */
static void record(const struct ld__recorder *rec, const struct ld__prereq_log *log,
                   const ld_context *ctx, const struct ld__item *f, const ld_detail *d,
                   json_t *fallback, const char *key, size_t len)
{
    struct ld__eval_rec r = {NULL, 0, ctx, NULL, NULL, NULL, NULL, rec->with_reason};
    for (size_t i = 0; i < log->n; i++) {
        const struct ld__prereq_ent *x = &log->e[i];
        ld_detail pd;
        memset(&pd, 0, sizeof pd);
        pd.index = x->index;
        pd.rule = x->rule;
        pd.rule_id = x->rule_id;
        pd.prereq = x->prereq;
        pd.kind = x->kind;
        pd.in_experiment = x->in_experiment;
        pd.big = -1;
        pd.value = x->index >= 0 ? x->flag->vars[x->index] : NULL;
        r.key = x->flag->h.key.s;
        r.key_len = x->flag->h.key.len;
        r.flag = x->flag;
        r.d = &pd;
        r.prereq_of = x->of;
        rec->fn(rec->arg, &r);
    }
    r.key = key;
    r.key_len = len;
    r.flag = f && !f->deleted ? (const struct ld__flag *)f : NULL;
    r.d = d;
    r.fallback = fallback;
    r.prereq_of = NULL;
    rec->fn(rec->arg, &r);
}

/* ld__evaluate() and ld__evaluate_rec() (`rec` NULL: told to no one). The
 * detail is evaluated into the line it is handed out in, not copied there;
 * without memory for that line, into one on the stack, which the recorder
 * reads all the same. */
static int evaluate_own(const ld_context *ctx, const struct ld__resolver *rv, void *arg,
                        const struct ld__item *f, ld_value_type type, json_t *fallback,
                        ld_detail **out, const struct ld__recorder *rec, const char *key,
                        size_t len)
{
    ld_detail tmp;
    ld_detail *d = ld__line_alloc();
    ld_detail *into = d ? d : &tmp;
    struct ld__prereq_log log;
    *out = NULL;
    log.e = log.inl;
    log.n = 0;
    log.cap = sizeof log.inl / sizeof log.inl[0];
    int rc = ld__evaluate_into(ctx, rv, arg, f, type, fallback, into, rec ? &log : NULL);
    if (rc == LD__E_NEED) {
        ld__line_free(d);
    } else {
        if (rec)
            record(rec, &log, ctx, f, into, fallback, key, len);
        if (d)
            detail_own(d, f, fallback);
        else
            json_decref(fallback);
        *out = d;
    }
    if (log.e != log.inl)
        ld__free(log.e);
    return rc == LD__E_NEED ? LD__E_NEED : 0;
}

int ld__evaluate(const ld_context *ctx, const struct ld__resolver *rv, void *arg,
                 const struct ld__item *f, ld_value_type type, json_t *fallback, ld_detail **out)
{
    return evaluate_own(ctx, rv, arg, f, type, fallback, out, NULL, NULL, 0);
}

int ld__evaluate_rec(const ld_context *ctx, const struct ld__resolver *rv, void *arg,
                     const struct ld__item *f, ld_value_type type, json_t *fallback,
                     ld_detail **out, const struct ld__recorder *rec, const char *key, size_t len)
{
    return evaluate_own(ctx, rv, arg, f, type, fallback, out, rec, key, len);
}

void ld__record_one(const struct ld__recorder *rec, const char *key, size_t len,
                    const ld_context *ctx, const ld_detail *d, const json_t *fallback)
{
    struct ld__eval_rec r = {key, len, ctx, NULL, d, fallback, NULL, rec->with_reason};
    rec->fn(rec->arg, &r);
}
