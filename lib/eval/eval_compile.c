/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Compiling flags and segments (eval-internal.h): the JSON fields the
 * evaluator needs, read once per stored version into arrays and hash sets.
 * A field of the wrong type never fails the compile: it marks the part
 * that holds it bad, and evaluating that part is MALFORMED_FLAG, at the
 * point where LaunchDarkly's SDKs would fail.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <ldasync/error.h>

#include "core/core-internal.h"
#include "eval/eval-internal.h"

/* A compile in progress: the item's byte count and whether memory ran out. */
struct cc {
    size_t bytes;
    bool nomem;
};

static void *cc_calloc(struct cc *cc, size_t n, size_t size)
{
    if (n == 0)
        return NULL;
    void *p = ld__calloc(n, size);
    if (!p)
        cc->nomem = true;
    else
        cc->bytes += n * size;
    return p;
}

static struct ld__str str_of(const json_t *v)
{
    struct ld__str s = {NULL, 0};
    if (json_is_string(v)) {
        s.s = json_string_value(v);
        s.len = json_string_length(v);
    }
    return s;
}

static const struct ld__str USER = {"user", 4};
static const struct ld__str KEY = {"key", 3};

/* An optional integer field: 1 with *out, 0 when absent or null, -1 when
 * of another type or out of int range (a number with no fraction counts). */
static int get_int(const json_t *o, const char *name, int64_t lo, int64_t hi, int64_t *out)
{
    const json_t *v = json_object_get(o, name);
    if (!v || json_is_null(v))
        return 0;
    int64_t i;
    if (json_is_integer(v)) {
        i = json_integer_value(v);
    } else if (json_is_real(v)) {
        /* within int64_t (2^63 itself is not), then with no fraction */
        double d = json_real_value(v);
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
            return -1;
        i = (int64_t)d;
        if ((double)i != d)
            return -1;
    } else {
        return -1;
    }
    if (i < lo || i > hi)
        return -1;
    *out = i;
    return 1;
}

/* An optional boolean field: false when absent or null; `bad` set (and
 * false) when of another type: "true" or 1 is not true. */
static bool get_bool(const json_t *o, const char *name, bool *bad)
{
    const json_t *v = json_object_get(o, name);
    if (v && !json_is_boolean(v) && !json_is_null(v))
        *bad = true;
    return json_is_true(v);
}

/* An optional string field: empty ({NULL, 0}) when absent or null; `bad`
 * set when of another type. */
static struct ld__str get_str(const json_t *o, const char *name, bool *bad)
{
    const json_t *v = json_object_get(o, name);
    if (v && !json_is_string(v) && !json_is_null(v))
        *bad = true;
    return str_of(v);
}

/* An optional array field: NULL when absent or null, `bad` set when of
 * another type. */
static const json_t *get_array(const json_t *o, const char *name, bool *bad)
{
    const json_t *v = json_object_get(o, name);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_array(v))
        *bad = true;
    return json_is_array(v) ? v : NULL;
}

/* Marks the part bad if the array `a` (or NULL) holds a non-string (null
 * too): target and segment keys are strings. Returns `a`. */
static const json_t *check_strings(const json_t *a, bool *bad)
{
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!json_is_string(json_array_get(a, i))) {
            *bad = true;
            break;
        }
    return a;
}

/* ---- Attribute references ------------------------------------------------ */

/* `a` from the attribute string `attr` and the kind field `kind` (both may
 * be NULL or of any type). Without a kind, the attribute is a literal name
 * of a "user"; with one, a reference ("/a/b", ~0, ~1) or a plain name. An
 * undefined attribute is `def` when given, else bad. */
static void compile_attr(struct cc *cc, struct ld__attr *a, const json_t *kind, const json_t *attr,
                         const struct ld__str *def)
{
    memset(a, 0, sizeof *a);
    struct ld__str k = str_of(kind);
    bool is_ref = k.len > 0;
    a->kind = is_ref ? k : USER;
    if (kind && !json_is_null(kind) && !json_is_string(kind))
        a->bad = true;
    struct ld__str s = str_of(attr);
    if (attr && !json_is_null(attr) && !json_is_string(attr)) {
        a->bad = true;
        return;
    }
    if (s.len == 0) {
        if (def)
            a->first = *def;
        else
            a->bad = true;
        return;
    }
    if (!is_ref || s.s[0] != '/') {
        a->first = s;
        a->is_kind = s.len == 4 && memcmp(s.s, "kind", 4) == 0;
        return;
    }
    /* A path: count the components, then unescape them into one buffer. */
    size_t n = 1;
    for (size_t i = 1; i < s.len; i++)
        n += s.s[i] == '/';
    if (n > 255) {
        a->bad = true;
        return;
    }
    a->buf = cc_calloc(cc, s.len, 1);
    if (n > 1)
        a->more = cc_calloc(cc, n - 1, sizeof *a->more);
    if (!a->buf || (n > 1 && !a->more))
        return;
    char *o = a->buf;
    size_t c = 0;
    const char *p = s.s + 1, *end = s.s + s.len;
    while (c < n) {
        const char *q = memchr(p, '/', (size_t)(end - p));
        if (!q)
            q = end;
        if (q == p) {
            a->bad = true; /* an empty component */
            return;
        }
        char *start = o;
        for (const char *r = p; r < q; r++) {
            if (*r != '~') {
                *o++ = *r;
            } else if (r + 1 < q && (r[1] == '0' || r[1] == '1')) {
                *o++ = r[1] == '0' ? '~' : '/';
                r++;
            } else {
                a->bad = true;
                return;
            }
        }
        struct ld__str comp = {start, (size_t)(o - start)};
        if (c == 0)
            a->first = comp;
        else
            a->more[c - 1] = comp;
        c++;
        p = q + 1;
    }
    a->nmore = (uint8_t)(n - 1);
    if (a->first.len == 5 && memcmp(a->first.s, "_meta", 5) == 0)
        a->bad = true;
    a->is_kind = n == 1 && a->first.len == 4 && memcmp(a->first.s, "kind", 4) == 0;
}

static void free_attr(struct ld__attr *a)
{
    ld__free(a->more);
    ld__free(a->buf);
}

/* ---- Clauses ------------------------------------------------------------- */

static void compile_clause(struct cc *cc, struct ld__clause *c, const json_t *j)
{
    if (!json_is_object(j)) {
        c->bad = true;
        return;
    }
    struct ld__str op = get_str(j, "op", &c->bad);
    c->op = op.s ? ld__op_parse(op.s, op.len) : LD__OP_UNKNOWN;
    c->negate = get_bool(j, "negate", &c->bad);
    const json_t *values = json_object_get(j, "values");
    if (values && !json_is_null(values) && !json_is_array(values))
        c->bad = true;
    if (c->op == LD__OP_SEGMENT_MATCH) {
        size_t n = json_array_size(values), k = 0;
        c->segments = cc_calloc(cc, n, sizeof *c->segments);
        for (size_t i = 0; c->segments && i < n; i++) {
            struct ld__str s = str_of(json_array_get(values, i));
            if (s.len)
                c->segments[k++] = s;
        }
        c->nsegments = k;
        return;
    }
    compile_attr(cc, &c->attr, json_object_get(j, "contextKind"), json_object_get(j, "attribute"),
                 NULL);
    if (c->attr.bad)
        c->bad = true;
    if (c->attr.is_kind && c->op == LD__OP_IN && json_is_array(values))
        c->kinds = values;
    if (ld__clause_values_compile(c->op, json_is_array(values) ? values : NULL, &c->values) != 0)
        cc->nomem = true;
    else
        cc->bytes += ld__clause_values_bytes(c->values);
}

static void free_clauses(struct ld__clause *cs, size_t n)
{
    for (size_t i = 0; cs && i < n; i++) {
        ld__clause_values_free(cs[i].values);
        ld__free(cs[i].segments);
        free_attr(&cs[i].attr);
    }
    ld__free(cs);
}

/* The clauses of a rule; a non-array `clauses` makes the rule bad; an
 * absent one is a rule without clauses (which matches). */
static struct ld__clause *compile_clauses(struct cc *cc, const json_t *rule, size_t *n, bool *bad)
{
    const json_t *a = get_array(rule, "clauses", bad);
    *n = json_array_size(a);
    struct ld__clause *cs = cc_calloc(cc, *n, sizeof *cs);
    for (size_t i = 0; cs && i < *n; i++)
        compile_clause(cc, &cs[i], json_array_get(a, i));
    if (!cs)
        *n = 0;
    return cs;
}

/* ---- Variations and rollouts --------------------------------------------- */

static void compile_vor(struct cc *cc, struct ld__vor *v, const json_t *j)
{
    memset(v, 0, sizeof *v);
    v->variation = LD__VOR_MALFORMED;
    if (!json_is_object(j))
        return;
    int64_t i;
    int got = get_int(j, "variation", INT_MIN, INT_MAX, &i);
    if (got > 0) {
        v->variation = i >= 0 ? (int)i : LD__VOR_MALFORMED;
        return;
    }
    if (got < 0)
        return;
    const json_t *ro = json_object_get(j, "rollout");
    if (!json_is_object(ro))
        return;
    const json_t *wv = json_object_get(ro, "variations");
    size_t n = json_is_array(wv) ? json_array_size(wv) : 0;
    if (n == 0 || n > (SIZE_MAX - sizeof(struct ld__rollout)) / sizeof(struct ld__weighted))
        return;
    struct ld__rollout *r = cc_calloc(cc, 1, sizeof *r + n * sizeof r->w[0]);
    if (!r)
        return;
    v->rollout = r;
    r->n = n;
    for (size_t k = 0; k < n; k++) {
        const json_t *e = json_array_get(wv, k);
        int64_t var = -1, w = 0;
        if (!json_is_object(e) || get_int(e, "variation", 0, INT_MAX, &var) <= 0 ||
            get_int(e, "weight", INT_MIN, INT_MAX, &w) < 0)
            return; /* stays malformed */
        r->w[k].variation = (int)var;
        r->w[k].weight = (int)w;
        bool bad = false;
        r->w[k].untracked = get_bool(e, "untracked", &bad);
        if (bad)
            return;
    }
    bool bad = false;
    struct ld__str kind = get_str(ro, "kind", &bad);
    r->experiment = kind.len == 10 && memcmp(kind.s, "experiment", 10) == 0;
    int seed = get_int(ro, "seed", INT64_MIN, INT64_MAX, &r->seed);
    r->has_seed = seed > 0;
    if (bad || seed < 0)
        return;
    compile_attr(cc, &r->by, json_object_get(ro, "contextKind"),
                 r->experiment ? NULL : json_object_get(ro, "bucketBy"), &KEY);
    v->variation = LD__VOR_ROLLOUT;
}

static void free_vor(struct ld__vor *v)
{
    if (v->rollout) {
        free_attr(&v->rollout->by);
        ld__free(v->rollout);
    }
}

/* ---- Targets ------------------------------------------------------------- */

/* A target entry {"contextKind", "values", "variation"}; `values`, when
 * not NULL, replaces the entry's own. */
static void compile_target(struct cc *cc, struct ld__target *t, const json_t *j, bool with_kind,
                           const json_t *values, bool *bad)
{
    t->kind = USER;
    t->variation = -1;
    if (!json_is_object(j)) {
        *bad = true;
        return;
    }
    if (with_kind) {
        struct ld__str k = get_str(j, "contextKind", bad);
        if (k.len)
            t->kind = k;
    }
    int64_t v;
    if (get_int(j, "variation", 0, INT_MAX, &v) > 0)
        t->variation = (int)v;
    if (!values)
        values = get_array(j, "values", bad);
    check_strings(values, bad);
    if (ld__clause_values_compile(LD__OP_IN, values, &t->keys) != 0)
        cc->nomem = true;
    else
        cc->bytes += ld__clause_values_bytes(t->keys);
}

static void free_targets(struct ld__target *ts, size_t n)
{
    for (size_t i = 0; ts && i < n; i++)
        ld__clause_values_free(ts[i].keys);
    ld__free(ts);
}

static bool is_user(const struct ld__str *k)
{
    return k->len == 4 && memcmp(k->s, "user", 4) == 0;
}

/* The flag's targets in the order they are tried: `contextTargets` when it
 * has entries (a user-kind entry without values stands for the first
 * `targets` entry of the same variation, which is where LaunchDarkly keeps
 * user keys), else `targets`. */
static void compile_targets(struct cc *cc, struct ld__flag *f, const json_t *j)
{
    bool bad = false;
    const json_t *old = get_array(j, "targets", &bad);
    const json_t *ctx = get_array(j, "contextTargets", &bad);
    bool use_ctx = json_array_size(ctx) > 0;
    const json_t *list = use_ctx ? ctx : old;
    size_t n = json_array_size(list);
    f->targets = cc_calloc(cc, n, sizeof *f->targets);
    f->ntargets = f->targets ? n : 0;
    for (size_t i = 0; i < f->ntargets; i++) {
        const json_t *e = json_array_get(list, i);
        const json_t *values = NULL;
        if (use_ctx && json_is_object(e) && json_array_size(json_object_get(e, "values")) == 0) {
            struct ld__str k = str_of(json_object_get(e, "contextKind"));
            int64_t v;
            if ((k.len == 0 || is_user(&k)) && get_int(e, "variation", 0, INT_MAX, &v) > 0) {
                for (size_t o = 0; o < json_array_size(old); o++) {
                    const json_t *oe = json_array_get(old, o);
                    int64_t ov;
                    if (get_int(oe, "variation", 0, INT_MAX, &ov) > 0 && ov == v) {
                        values = json_object_get(oe, "values");
                        values = json_is_array(values) ? values : NULL;
                        break;
                    }
                }
            }
        }
        compile_target(cc, &f->targets[i], e, use_ctx, values, &bad);
    }
    if (bad)
        f->h.bad = true;
}

/* ---- Flags --------------------------------------------------------------- */

static void compile_flag(struct cc *cc, struct ld__flag *f, const json_t *j)
{
    bool bad = false;
    f->on = get_bool(j, "on", &bad);
    f->salt = get_str(j, "salt", &bad);
    if (!f->salt.s)
        f->salt = (struct ld__str){"", 0};
    f->track_events = get_bool(j, "trackEvents", &bad);
    f->track_fallthrough = get_bool(j, "trackEventsFallthrough", &bad);
    const json_t *csa = json_object_get(j, "clientSideAvailability");
    if (csa && !json_is_object(csa) && !json_is_null(csa))
        bad = true;
    bool old_cs = get_bool(j, "clientSide", &bad);
    f->client_side = json_is_object(csa) ? get_bool(csa, "usingEnvironmentId", &bad) : old_cs;
    int debug = get_int(j, "debugEventsUntilDate", INT64_MIN, INT64_MAX, &f->debug_until);
    f->has_debug = debug > 0;
    if (debug < 0)
        bad = true;

    const json_t *vars = get_array(j, "variations", &bad);
    f->nvars = json_array_size(vars);
    f->vars = cc_calloc(cc, f->nvars, sizeof *f->vars);
    for (size_t i = 0; f->vars && i < f->nvars; i++)
        f->vars[i] = json_array_get(vars, i);
    if (!f->vars)
        f->nvars = 0;

    int64_t off;
    int r = get_int(j, "offVariation", INT_MIN, INT_MAX, &off);
    f->off = r == 0 ? -1 : r < 0 || off < 0 ? LD__VOR_MALFORMED : (int)off;
    compile_vor(cc, &f->fallthrough, json_object_get(j, "fallthrough"));
    compile_targets(cc, f, j);

    const json_t *rules = get_array(j, "rules", &bad);
    f->nrules = json_array_size(rules);
    f->rules = cc_calloc(cc, f->nrules, sizeof *f->rules);
    for (size_t i = 0; f->rules && i < f->nrules; i++) {
        struct ld__rule *ru = &f->rules[i];
        const json_t *rj = json_array_get(rules, i);
        if (!json_is_object(rj)) {
            ru->bad = true;
            ru->vor.variation = LD__VOR_MALFORMED;
            continue;
        }
        ru->id = get_str(rj, "id", &ru->bad);
        ru->track_events = get_bool(rj, "trackEvents", &ru->bad);
        ru->clauses = compile_clauses(cc, rj, &ru->nclauses, &ru->bad);
        compile_vor(cc, &ru->vor, rj);
    }
    if (!f->rules)
        f->nrules = 0;

    const json_t *pre = get_array(j, "prerequisites", &bad);
    size_t n = json_array_size(pre);
    f->prereqs = cc_calloc(cc, n, sizeof *f->prereqs);
    for (size_t i = 0; f->prereqs && i < n; i++) {
        const json_t *p = json_array_get(pre, i);
        int64_t v;
        f->prereqs[i].key = get_str(p, "key", &bad);
        int got = get_int(p, "variation", 0, INT_MAX, &v);
        f->prereqs[i].variation = got > 0 ? (int)v : -1;
        if (!f->prereqs[i].key.len || got < 0)
            bad = true;
    }
    f->nprereqs = f->prereqs ? n : 0;
    if (bad)
        f->h.bad = true;
    /* What eval.c's eval_flag() would answer, when it reads nothing else
     * (the kinds are enum ld_reason_kind's: 0 OFF, 1 FALLTHROUGH). */
    if (f->h.bad) {
        f->simple = false;
    } else if (!f->on) {
        f->simple = f->off == -1 || (f->off >= 0 && (size_t)f->off < f->nvars);
        f->simple_kind = 0;
        f->simple_index = f->off;
    } else {
        int v = f->fallthrough.variation;
        f->simple = f->nprereqs == 0 && f->ntargets == 0 && f->nrules == 0 && v >= 0 &&
                    (size_t)v < f->nvars;
        f->simple_kind = 1;
        f->simple_index = v;
    }
}

static void free_flag(struct ld__flag *f)
{
    for (size_t i = 0; f->meta && i < 2 * f->nvars; i++)
        json_decref(f->meta[i]);
    ld__free(f->meta);
    ld__free(f->vars);
    free_vor(&f->fallthrough);
    free_targets(f->targets, f->ntargets);
    for (size_t i = 0; f->rules && i < f->nrules; i++) {
        free_clauses(f->rules[i].clauses, f->rules[i].nclauses);
        free_vor(&f->rules[i].vor);
    }
    ld__free(f->rules);
    ld__free(f->prereqs);
}

/* ---- Segments ------------------------------------------------------------ */

static struct ld__clause_values *compile_keys(struct cc *cc, const json_t *j, const char *name,
                                              bool *bad)
{
    const json_t *a = check_strings(get_array(j, name, bad), bad);
    if (!json_array_size(a))
        return NULL;
    struct ld__clause_values *cv = NULL;
    if (ld__clause_values_compile(LD__OP_IN, a, &cv) != 0)
        cc->nomem = true;
    else
        cc->bytes += ld__clause_values_bytes(cv);
    return cv;
}

static struct ld__target *compile_ctx_keys(struct cc *cc, const json_t *j, const char *name,
                                           size_t *n, bool *bad)
{
    const json_t *a = get_array(j, name, bad);
    *n = json_array_size(a);
    struct ld__target *ts = cc_calloc(cc, *n, sizeof *ts);
    for (size_t i = 0; ts && i < *n; i++)
        compile_target(cc, &ts[i], json_array_get(a, i), true, NULL, bad);
    if (!ts)
        *n = 0;
    return ts;
}

static void compile_segment(struct cc *cc, struct ld__segment *s, const json_t *j)
{
    bool bad = false;
    s->salt = get_str(j, "salt", &bad);
    if (!s->salt.s)
        s->salt = (struct ld__str){"", 0};
    s->unbounded = get_bool(j, "unbounded", &bad);
    s->unbounded_kind = get_str(j, "unboundedContextKind", &bad);
    if (!s->unbounded_kind.len)
        s->unbounded_kind = USER;
    int gen = get_int(j, "generation", INT64_MIN, INT64_MAX, &s->generation);
    s->has_generation = gen > 0;
    if (gen < 0)
        bad = true;
    if (s->unbounded && s->has_generation) { /* the membership's name for it */
        size_t need = s->h.key.len + 24;
        char *ref = cc_calloc(cc, need, 1);
        int n = ref ? snprintf(ref, need, "%.*s.g%lld", (int)s->h.key.len,
                               s->h.key.s ? s->h.key.s : "", (long long)s->generation)
                    : 0;
        s->ref = (struct ld__str){ref, n > 0 ? (size_t)n : 0};
    }
    s->included = compile_keys(cc, j, "included", &bad);
    s->excluded = compile_keys(cc, j, "excluded", &bad);
    s->included_ctx = compile_ctx_keys(cc, j, "includedContexts", &s->nincluded_ctx, &bad);
    s->excluded_ctx = compile_ctx_keys(cc, j, "excludedContexts", &s->nexcluded_ctx, &bad);
    const json_t *rules = get_array(j, "rules", &bad);
    s->nrules = json_array_size(rules);
    s->rules = cc_calloc(cc, s->nrules, sizeof *s->rules);
    for (size_t i = 0; s->rules && i < s->nrules; i++) {
        struct ld__segment_rule *ru = &s->rules[i];
        const json_t *rj = json_array_get(rules, i);
        if (!json_is_object(rj)) {
            ru->bad = true;
            continue;
        }
        ru->clauses = compile_clauses(cc, rj, &ru->nclauses, &ru->bad);
        int64_t w;
        int r = get_int(rj, "weight", INT_MIN, INT_MAX, &w);
        ru->has_weight = r > 0;
        ru->weight = r > 0 ? (int)w : 0;
        if (r < 0)
            ru->bad = true;
        compile_attr(cc, &ru->by, json_object_get(rj, "rolloutContextKind"),
                     json_object_get(rj, "bucketBy"), &KEY);
    }
    if (!s->rules)
        s->nrules = 0;
    if (bad)
        s->h.bad = true;
}

static void free_segment(struct ld__segment *s)
{
    ld__clause_values_free(s->included);
    ld__clause_values_free(s->excluded);
    free_targets(s->included_ctx, s->nincluded_ctx);
    free_targets(s->excluded_ctx, s->nexcluded_ctx);
    for (size_t i = 0; s->rules && i < s->nrules; i++) {
        free_clauses(s->rules[i].clauses, s->rules[i].nclauses);
        free_attr(&s->rules[i].by);
    }
    ld__free((char *)s->ref.s);
    ld__free(s->rules);
}

/* ---- Items --------------------------------------------------------------- */

static void item_free(struct ld__item *it)
{
    if (it->type == LD__FLAG)
        free_flag((struct ld__flag *)it);
    else
        free_segment((struct ld__segment *)it);
    ld__json_decref(it->json); /* (NULL until the loop set it, off the loop) */
    ld__free(it);
}

void ld__item_unref(struct ld__item *it)
{
    if (it && atomic_fetch_sub_explicit(&it->refs, 1, memory_order_acq_rel) == 1)
        item_free(it);
}

int ld__item_compile(enum ld__item_type type, json_t *json, struct ld__item **out)
{
    int rc = ld__item_compile_off(type, json, out);
    if (rc == 0)
        (*out)->json = json_incref(json);
    return rc == 0 ? 0 : LD_ENOMEM;
}

int ld__item_compile_off(enum ld__item_type type, const json_t *json, struct ld__item **out)
{
    *out = NULL;
    size_t size = type == LD__FLAG ? sizeof(struct ld__flag) : sizeof(struct ld__segment);
    struct ld__item *it = ld__calloc(1, size);
    if (!it)
        return LD_ENOMEM;
    struct cc cc = {.bytes = size, .nomem = false};
    atomic_init(&it->refs, 1);
    it->type = (uint8_t)type;
    it->key = str_of(json_object_get(json, "key"));
    int64_t v = 0;
    (void)get_int(json, "version", INT64_MIN, INT64_MAX, &v);
    it->version = v;
    it->deleted = json_is_true(json_object_get(json, "deleted")); /* a boolean (kind.c) */
    if (type == LD__FLAG)
        compile_flag(&cc, (struct ld__flag *)it, json);
    else
        compile_segment(&cc, (struct ld__segment *)it, json);
    if (cc.nomem) {
        item_free(it); /* it->json is still NULL */
        return ld__compile_work && !ld__job_wanted(ld__compile_work) ? LD_ECANCELED : LD_ENOMEM;
    }
    it->bytes = cc.bytes;
    *out = it;
    return 0;
}

/* The entries of the arrays `name` of the objects in array `a`. */
static size_t inner_values(const json_t *a, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(a); i++)
        n += json_array_size(json_object_get(json_array_get(a, i), name));
    return n;
}

/* The rules of `j`, their clauses and the clauses' values. */
static size_t rule_values(const json_t *j)
{
    const json_t *rules = json_object_get(j, "rules");
    size_t n = json_array_size(rules);
    for (size_t i = 0; i < json_array_size(rules); i++) {
        const json_t *cs = json_object_get(json_array_get(rules, i), "clauses");
        n += json_array_size(cs) + inner_values(cs, "values");
    }
    return n;
}

static size_t targets_values(const json_t *j, const char *name)
{
    const json_t *a = json_object_get(j, name);
    return json_array_size(a) + inner_values(a, "values");
}

size_t ld__item_values(enum ld__item_type type, const json_t *json)
{
    if (type == LD__FLAG)
        return targets_values(json, "targets") + targets_values(json, "contextTargets") +
               rule_values(json) + json_array_size(json_object_get(json, "prerequisites")) +
               json_array_size(json_object_get(json, "variations"));
    return json_array_size(json_object_get(json, "included")) +
           json_array_size(json_object_get(json, "excluded")) +
           targets_values(json, "includedContexts") + targets_values(json, "excludedContexts") +
           rule_values(json);
}

static void refs_of_clauses(const struct ld__clause *cs, size_t n,
                            void (*fn)(void *, enum ld__item_type, const struct ld__str *),
                            void *arg)
{
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < cs[i].nsegments; k++)
            fn(arg, LD__SEGMENT, &cs[i].segments[k]);
}

void ld__item_references(const struct ld__item *it,
                         void (*fn)(void *arg, enum ld__item_type type, const struct ld__str *key),
                         void *arg)
{
    if (it->type == LD__FLAG) {
        const struct ld__flag *f = (const struct ld__flag *)it;
        for (size_t i = 0; i < f->nprereqs; i++)
            fn(arg, LD__FLAG, &f->prereqs[i].key);
        for (size_t i = 0; i < f->nrules; i++)
            refs_of_clauses(f->rules[i].clauses, f->rules[i].nclauses, fn, arg);
    } else {
        const struct ld__segment *s = (const struct ld__segment *)it;
        for (size_t i = 0; i < s->nrules; i++)
            refs_of_clauses(s->rules[i].clauses, s->rules[i].nclauses, fn, arg);
    }
}
