/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The summary of evaluations (events-internal.h): counters per flag,
 * variation and flag version, as LaunchDarkly's SDKs send them in the
 * summary event.
 *
 * Flags are in an array, in the order first recorded, found by key through
 * an open-addressing table of their indices. A flag's counters are in an
 * array too; those of one version of the flag (the newest recorded) are
 * also found by variation index in `by_var`, so that a record is a hash, a
 * probe and an index; its context kinds are kept in the order of a
 * context's (strcmp), so that one walk of both finds a context's.
 *
 * All of that is a table. A flush takes the table of the interval that
 * ended whole, and recording goes on in a second one: the table the flush
 * before took, which the worker reset after writing it and the loop gave
 * back. What an interval counted stays in its table for the next use (with
 * counts at zero), so that recording allocates only on the first sight of
 * a flag, a pair or a kind in each table; a flag, pair or kind not recorded
 * in a whole interval is dropped.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <ldasync/context.h>
#include <ldasync/error.h>

#include "core/core-internal.h"
#include "events/events-internal.h"
#include "model/model-internal.h"

/* Variation indices below this are found by index; others (which only a
 * flag with that many variations gives) by a scan of the counters. */
enum { MAPPED_VARIATIONS = 1024 };

struct counter {
    int64_t version; /* LD__NO_VERSION: the flag was unknown */
    int variation;   /* LD__NO_VARIATION: none */
    uint64_t count;  /* in this interval */
    json_t *value;   /* the first value of the interval (held), or NULL */
};

struct kind {
    char *name;
    size_t len;
    bool seen;  /* in this interval */
    bool fresh; /* added by the record under way */
};

struct flag {
    char *key;
    size_t len;
    uint64_t hash;
    bool active; /* recorded in this interval */
    json_t *def; /* the first default of the interval (held), or NULL */
    struct counter *counters;
    size_t nc, capc;
    int64_t map_version; /* the version whose counters by_var finds */
    uint32_t *by_var;    /* [variation + 1]: index + 1 in counters, 0: none */
    size_t nvar;
    struct kind *kinds;
    size_t nk, capk;
    uint64_t kinds_gen; /* == the summarizer's ctx_gen: its context's kinds are seen */
};

/* The flags of an interval and what finds them. */
struct table {
    struct flag *flags;
    size_t n, cap;
    uint32_t *slots; /* index + 1 in flags, 0: empty; mask + 1 of them */
    size_t mask;
    bool any; /* something recorded in this interval */
    int64_t start, end;
};

/* A flush's summary is the table of the interval that ended, handed over
 * whole (a flush on the loop copies nothing); the summarizer goes on with
 * a second table, the one the flush before handed over, reset by the
 * worker once written and given back. */
struct ld__summary {
    struct table t;
    bool reset; /* ld__summary_reset() made it ready for another interval */
    /* The values the reset took out of the table, released on the loop
     * (ld__summarizer_reuse(), ld__summary_free()): the reset runs on the
     * worker, and the loop counts references to the same values with
     * jansson's json_incref() and json_decref(), which read the count
     * plainly (and let go with release order only). */
    json_t **drops;
    size_t ndrops;
};

struct ld__summarizer {
    struct table t;
    struct ld__summary *spare; /* a table given back, reset (or NULL) */
    /* Evaluations in a row are often of one flag, or for one context: */
    size_t last;          /* the flag recorded last (index + 1; 0: none) */
    ld_context *last_ctx; /* the context recorded last (referenced) */
    uint64_t ctx_gen;     /* changes with last_ctx and with each interval */
};

/* ---- values held by reference ------------------------------------------- */

/* Takes a reference to `v` (NULL: JSON null), atomically: values come from
 * flags and callers that other threads may release. */
static json_t *hold(json_t *v)
{
    if (!v)
        return json_null();
    if (!ld__json_immortal(v))
        ld__json_incref(v);
    return v;
}

static void release(json_t *v)
{
    if (v && !ld__json_immortal(v))
        ld__json_decref(v);
}

/* Where a reset puts the values it takes out of a table: NULL releases
 * them at once (on the loop); else `v` has room for every value held. */
struct drops {
    json_t **v;
    size_t n;
};

static void drop(struct drops *d, json_t *v)
{
    if (!v || ld__json_immortal(v))
        return;
    if (d)
        d->v[d->n++] = v;
    else
        release(v);
}

/* ---- growing arrays ------------------------------------------------------- */

/* Makes room for `need` elements of `size` bytes in *p (capacity *cap),
 * doubling. 0 or -1 (nothing changed). */
static int reserve(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4;
    while (n < need)
        n *= 2;
    if (n > SIZE_MAX / size)
        return -1;
    void *q = ld__realloc(*p, n * size);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* ---- flags by key ----------------------------------------------------------- */

static uint64_t hash_key(const char *s, size_t len)
{
    return ld__key_hash(s, len);
}

/* The slot of the flag `key` (`len` bytes, hash `h`), or the empty slot
 * where it would go. */
static size_t probe(const struct table *t, const char *key, size_t len, uint64_t h)
{
    size_t i = (size_t)h & t->mask;
    for (;; i = (i + 1) & t->mask) {
        uint32_t x = t->slots[i];
        if (!x)
            return i;
        const struct flag *f = &t->flags[x - 1];
        if (f->hash == h && f->len == len && ld__key_eq(f->key, key, len))
            return i;
    }
}

/* Puts every flag in a table of `size` slots (a power of two). */
static void rehash(struct table *t, uint32_t *slots, size_t size)
{
    memset(slots, 0, size * sizeof *slots);
    t->slots = slots;
    t->mask = size - 1;
    for (size_t k = 0; k < t->n; k++) {
        const struct flag *f = &t->flags[k];
        t->slots[probe(t, f->key, f->len, f->hash)] = (uint32_t)(k + 1);
    }
}

/* The flag `key`, added (inactive, with nothing counted) if new; NULL when
 * memory ran out (nothing changed). */
static struct flag *flag_get(struct ld__summarizer *s, const char *key, size_t len)
{
    struct table *t = &s->t;
    if (s->last) {
        struct flag *f = &t->flags[s->last - 1];
        if (f->len == len && ld__key_eq(f->key, key, len))
            return f;
    }
    uint64_t h = hash_key(key, len);
    size_t i = probe(t, key, len, h);
    if (t->slots[i]) {
        s->last = t->slots[i];
        return &t->flags[t->slots[i] - 1];
    }
    if (t->n >= UINT32_MAX - 1)
        return NULL;
    /* at most half full */
    if ((t->n + 1) * 2 > t->mask + 1) {
        size_t size = (t->mask + 1) * 2;
        uint32_t *slots = ld__malloc(size * sizeof *slots);
        if (!slots)
            return NULL;
        ld__free(t->slots);
        rehash(t, slots, size);
        i = probe(t, key, len, h);
    }
    if (reserve((void **)&t->flags, &t->cap, t->n + 1, sizeof *t->flags) != 0)
        return NULL;
    char *copy = ld__malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, key, len);
    copy[len] = '\0';
    struct flag *f = &t->flags[t->n];
    memset(f, 0, sizeof *f);
    f->key = copy;
    f->len = len;
    f->hash = h;
    f->map_version = INT64_MIN;
    t->slots[i] = (uint32_t)(++t->n);
    s->last = t->n;
    return f;
}

static void flag_clear(struct flag *f, struct drops *d)
{
    ld__free(f->key);
    drop(d, f->def);
    for (size_t i = 0; i < f->nc; i++)
        drop(d, f->counters[i].value);
    ld__free(f->counters);
    ld__free(f->by_var);
    for (size_t i = 0; i < f->nk; i++)
        ld__free(f->kinds[i].name);
    ld__free(f->kinds);
}

/* ---- counters ----------------------------------------------------------------- */

/* Makes by_var find the counters of `version` (which is newer). */
static void remap(struct flag *f, int64_t version)
{
    f->map_version = version;
    if (f->nvar)
        memset(f->by_var, 0, f->nvar * sizeof *f->by_var);
    for (size_t i = 0; i < f->nc; i++) {
        const struct counter *c = &f->counters[i];
        /* as size_t before the + 1: a variation may be INT_MAX */
        size_t slot = (size_t)c->variation + 1; /* -1 (none): 0 */
        if (c->version == version && slot < f->nvar)
            f->by_var[slot] = (uint32_t)(i + 1);
    }
}

static bool mapped(const struct flag *f, int64_t version, int variation)
{
    return version == f->map_version && variation < MAPPED_VARIATIONS;
}

/* The counter of (variation, version), added (at zero) if new; NULL when
 * memory ran out (nothing changed). */
static struct counter *counter_get(struct flag *f, int64_t version, int variation)
{
    if (version > f->map_version)
        remap(f, version);
    if (mapped(f, version, variation) && (size_t)(variation + 1) < f->nvar) {
        uint32_t x = f->by_var[variation + 1];
        if (x)
            return &f->counters[x - 1];
    } else if (!mapped(f, version, variation)) {
        for (size_t i = 0; i < f->nc; i++)
            if (f->counters[i].version == version && f->counters[i].variation == variation)
                return &f->counters[i];
    }
    /* first sight */
    if (f->nc >= UINT32_MAX - 1 ||
        reserve((void **)&f->counters, &f->capc, f->nc + 1, sizeof *f->counters) != 0)
        return NULL;
    if (mapped(f, version, variation)) {
        size_t need = (size_t)variation + 2, old = f->nvar;
        if (need > old) {
            uint32_t *m = ld__realloc(f->by_var, need * sizeof *m);
            if (!m)
                return NULL;
            memset(m + old, 0, (need - old) * sizeof *m);
            f->by_var = m;
            f->nvar = need;
        }
        f->by_var[variation + 1] = (uint32_t)(f->nc + 1);
    }
    struct counter *c = &f->counters[f->nc++];
    c->version = version;
    c->variation = variation;
    c->count = 0;
    c->value = NULL;
    return c;
}

/* The kind of the individual context `i` of `ctx`. */
static const char *kind_of(const ld_context *ctx, size_t i)
{
    return json_string_value(ld__context_part(ctx, i)->kind);
}

/* Adds each kind of `ctx` not yet in f->kinds (unseen, marked fresh).
 * Both lists are in strcmp order, so that one walk of each does it. 0, or
 * -1 when memory ran out (the fresh ones stay: kinds_drop_fresh()). */
static int kinds_add(struct flag *f, const ld_context *ctx)
{
    size_t n = ctx->n, j = 0;
    for (size_t k = 0; k < n; k++) {
        const char *name = kind_of(ctx, k);
        int cmp = 1;
        while (j < f->nk && (cmp = strcmp(f->kinds[j].name, name)) < 0)
            j++;
        if (j < f->nk && cmp == 0) {
            j++;
            continue;
        }
        /* first sight */
        if (reserve((void **)&f->kinds, &f->capk, f->nk + 1, sizeof *f->kinds) != 0)
            return -1;
        size_t len = strlen(name);
        char *copy = ld__malloc(len + 1);
        if (!copy)
            return -1;
        memcpy(copy, name, len + 1);
        memmove(&f->kinds[j + 1], &f->kinds[j], (f->nk - j) * sizeof *f->kinds);
        f->kinds[j++] = (struct kind){copy, len, false, true};
        f->nk++;
    }
    return 0;
}

/* Takes back the kinds kinds_add() added in a record that failed. */
static void kinds_drop_fresh(struct flag *f)
{
    size_t kept = 0;
    for (size_t i = 0; i < f->nk; i++) {
        if (f->kinds[i].fresh)
            ld__free(f->kinds[i].name);
        else
            f->kinds[kept++] = f->kinds[i];
    }
    f->nk = kept;
}

/* Marks the kinds of `ctx` seen (all in f->kinds), in one walk of each. */
static void kinds_see(struct flag *f, const ld_context *ctx)
{
    size_t n = ctx->n, j = 0;
    for (size_t k = 0; k < n; k++) {
        const char *name = kind_of(ctx, k);
        while (j < f->nk && strcmp(f->kinds[j].name, name) < 0)
            j++;
        if (j < f->nk) { /* there: kinds_add() saw to it */
            f->kinds[j].seen = true;
            f->kinds[j].fresh = false;
            j++;
        }
    }
}

/* ---- tables ------------------------------------------------------------------ */

/* An empty table: 0, or -1 when memory ran out. */
static int table_init(struct table *t)
{
    memset(t, 0, sizeof *t);
    t->mask = 15;
    t->slots = ld__calloc(t->mask + 1, sizeof *t->slots);
    return t->slots ? 0 : -1;
}

static void table_fini(struct table *t)
{
    for (size_t i = 0; i < t->n; i++)
        flag_clear(&t->flags[i], NULL);
    ld__free(t->flags);
    ld__free(t->slots);
}

static size_t table_held(const struct table *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += 1 + t->flags[i].nc + t->flags[i].nk;
    return n;
}

static void reset(struct table *t, struct drops *d);

/* ---- the interface ------------------------------------------------------------ */

struct ld__summarizer *ld__summarizer_new(void)
{
    struct ld__summarizer *s = ld__calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->ctx_gen = 1;
    if (table_init(&s->t) != 0) {
        ld__free(s);
        return NULL;
    }
    return s;
}

void ld__summarizer_free(struct ld__summarizer *s)
{
    if (!s)
        return;
    table_fini(&s->t);
    ld__summary_free(s->spare);
    ld_context_unref(s->last_ctx);
    ld__free(s);
}

int ld__summarizer_record(struct ld__summarizer *s, const char *key, size_t len, int64_t version,
                          int variation, json_t *value, json_t *default_value,
                          const ld_context *ctx, int64_t now_ms)
{
    if (!s || !key)
        return LD_EINVAL;
    if (version < 0)
        version = LD__NO_VERSION;
    if (variation < 0)
        variation = LD__NO_VARIATION;
    /* everything that may allocate first: on failure nothing is counted */
    struct flag *f = flag_get(s, key, len);
    if (!f)
        return LD_ENOMEM;
    size_t nc = f->nc;
    struct counter *c = counter_get(f, version, variation);
    if (!c)
        return LD_ENOMEM;
    if (ctx && ctx != s->last_ctx) { /* a new context: its kinds are looked at again */
        ld_context_unref(s->last_ctx);
        s->last_ctx = ld_context_ref((ld_context *)ctx);
        s->ctx_gen++;
    }
    bool kinds = ctx && f->kinds_gen != s->ctx_gen;
    if (kinds && kinds_add(f, ctx) != 0) {
        /* take back what this record added: the order of counters and
         * kinds is the order of the records that counted */
        kinds_drop_fresh(f);
        if (f->nc > nc) {
            f->nc = nc;
            if (mapped(f, version, variation) && (size_t)(variation + 1) < f->nvar &&
                f->by_var[variation + 1] == nc + 1)
                f->by_var[variation + 1] = 0;
        }
        return LD_ENOMEM;
    }
    if (c->count++ == 0) {
        json_t *old = c->value;
        c->value = hold(value);
        release(old);
    }
    if (!f->active) {
        json_t *old = f->def;
        f->def = hold(default_value);
        release(old);
        f->active = true;
    }
    if (kinds) {
        kinds_see(f, ctx);
        f->kinds_gen = s->ctx_gen;
    }
    struct table *t = &s->t;
    if (!t->any || now_ms < t->start)
        t->start = now_ms;
    if (!t->any || now_ms > t->end)
        t->end = now_ms;
    t->any = true;
    return 0;
}

size_t ld__summarizer_held(const struct ld__summarizer *s)
{
    if (!s)
        return 0;
    return table_held(&s->t) + (s->spare ? table_held(&s->spare->t) : 0);
}

bool ld__summarizer_empty(const struct ld__summarizer *s)
{
    return !s || !s->t.any;
}

/* ---- a flush's summary: the table handed over --------------------------------- */

/* A new interval: the summarizer's context and flag seen last are
 * looked at again. */
static void next_interval(struct ld__summarizer *s)
{
    s->last = 0;
    s->ctx_gen++; /* the kinds seen are forgotten */
}

int ld__summarizer_take(struct ld__summarizer *s, struct ld__summary **out)
{
    if (!s || !out)
        return LD_EINVAL;
    *out = NULL;
    if (!s->t.any) {
        reset(&s->t, NULL);
        next_interval(s);
        return 0;
    }
    struct ld__summary *sum = s->spare;
    if (!sum) {
        sum = ld__calloc(1, sizeof *sum);
        if (!sum || table_init(&sum->t) != 0) {
            ld__free(sum);
            return LD_ENOMEM;
        }
    }
    s->spare = NULL;
    struct table t = s->t;
    s->t = sum->t;
    sum->t = t;
    sum->reset = false;
    next_interval(s);
    *out = sum;
    return 0;
}

void ld__summary_reset(struct ld__summary *sum)
{
    if (!sum || sum->reset)
        return;
    /* No reference is counted here (any thread): the values go to the
     * loop, which releases them when the table comes back. */
    size_t n = 0;
    for (size_t i = 0; i < sum->t.n; i++) {
        const struct flag *f = &sum->t.flags[i];
        n += f->def && !ld__json_immortal(f->def);
        for (size_t k = 0; k < f->nc; k++)
            n += f->counters[k].value && !ld__json_immortal(f->counters[k].value);
    }
    struct drops d = {n ? ld__malloc(n * sizeof *d.v) : NULL, 0};
    if (n && !d.v)
        return; /* not reset: the loop frees it whole (ld__summarizer_reuse()) */
    reset(&sum->t, &d);
    sum->drops = d.v;
    sum->ndrops = d.n;
    sum->reset = true;
}

/* Releases the values a reset took out of `sum` (loop thread). */
static void let_go(struct ld__summary *sum)
{
    for (size_t i = 0; i < sum->ndrops; i++)
        release(sum->drops[i]);
    ld__free(sum->drops);
    sum->drops = NULL;
    sum->ndrops = 0;
}

void ld__summarizer_reuse(struct ld__summarizer *s, struct ld__summary *sum)
{
    if (!sum)
        return;
    let_go(sum);
    if (!s || !sum->reset || s->spare) {
        ld__summary_free(sum);
        return;
    }
    s->spare = sum;
}

void ld__summary_end_at(struct ld__summary *sum, int64_t end_ms)
{
    if (sum && end_ms > sum->t.end)
        sum->t.end = end_ms;
}

void ld__summary_free(struct ld__summary *sum)
{
    if (!sum)
        return;
    let_go(sum);
    table_fini(&sum->t);
    ld__free(sum);
}

/* ---- its text ---------------------------------------------------------------- */

#define W(lit) (put(lit, sizeof(lit) - 1, arg) == 0)

static bool w_int(int64_t v, ld__summary_put_fn put, void *arg)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%" PRId64, v);
    return put(tmp, (size_t)n, arg) == 0;
}

static bool w_json(const json_t *v, ld__summary_put_fn put, void *arg)
{
    return json_dump_callback(v ? v : json_null(), put, arg, JSON_COMPACT | JSON_ENCODE_ANY) == 0;
}

/* A string, escaped by jansson. */
static bool w_str(const char *s, size_t len, ld__summary_put_fn put, void *arg)
{
    json_t *j = json_stringn_nocheck(s, len);
    bool ok = j && w_json(j, put, arg);
    json_decref(j);
    return ok;
}

int ld__summary_dump(const struct ld__summary *sum, ld__summary_put_fn put, void *arg)
{
    if (!sum || !put)
        return LD_EINVAL;
    const struct table *t = &sum->t;
    bool ok = W("{\"kind\":\"summary\",\"startDate\":") && w_int(t->start, put, arg) &&
              W(",\"endDate\":") && w_int(t->end, put, arg) && W(",\"features\":{");
    bool first = true;
    for (size_t i = 0; ok && i < t->n; i++) {
        const struct flag *f = &t->flags[i];
        if (!f->active)
            continue;
        ok = (first || W(",")) && w_str(f->key, f->len, put, arg) && W(":{\"default\":") &&
             w_json(f->def, put, arg) && W(",\"contextKinds\":[");
        first = false;
        bool k1 = true;
        for (size_t k = 0; ok && k < f->nk; k++) {
            if (!f->kinds[k].seen)
                continue;
            ok = (k1 || W(",")) && w_str(f->kinds[k].name, f->kinds[k].len, put, arg);
            k1 = false;
        }
        ok = ok && W("],\"counters\":[");
        bool c1 = true;
        for (size_t k = 0; ok && k < f->nc; k++) {
            const struct counter *c = &f->counters[k];
            if (!c->count)
                continue;
            ok = (c1 || W(",")) && W("{\"value\":") && w_json(c->value, put, arg) &&
                 W(",\"count\":") && w_int((int64_t)c->count, put, arg);
            c1 = false;
            if (ok && c->variation != LD__NO_VARIATION)
                ok = W(",\"variation\":") && w_int(c->variation, put, arg);
            if (ok)
                ok = c->version != LD__NO_VERSION
                         ? W(",\"version\":") && w_int(c->version, put, arg)
                         : W(",\"unknown\":true");
            ok = ok && W("}");
        }
        ok = ok && W("]}");
    }
    ok = ok && W("}}");
    return ok ? 0 : LD_ENOMEM;
}

#undef W

/* A new interval: counts at zero, values released (or put in `d`), the
 * flags of the interval that ends kept (what they have seen stays), the
 * others dropped. */
static void reset(struct table *t, struct drops *d)
{
    size_t kept = 0;
    for (size_t i = 0; i < t->n; i++) {
        struct flag *f = &t->flags[i];
        if (!f->active) {
            flag_clear(f, d);
            continue;
        }
        f->active = false;
        drop(d, f->def);
        f->def = NULL;
        /* What the interval counted stays (at zero) for the next; a counter
         * or kind it did not see goes, so that a flag evaluated in every
         * interval while its versions change keeps a bounded list. */
        size_t kc = 0;
        for (size_t k = 0; k < f->nc; k++) {
            struct counter c = f->counters[k];
            drop(d, c.value);
            if (!c.count)
                continue;
            c.count = 0;
            c.value = NULL;
            f->counters[kc++] = c;
        }
        if (kc != f->nc) {
            f->nc = kc;
            remap(f, f->map_version);
        }
        size_t kk = 0;
        for (size_t k = 0; k < f->nk; k++) {
            if (!f->kinds[k].seen) {
                ld__free(f->kinds[k].name);
                continue;
            }
            f->kinds[k].seen = false;
            f->kinds[kk++] = f->kinds[k];
        }
        f->nk = kk;
        t->flags[kept++] = *f;
    }
    if (kept != t->n) {
        t->n = kept;
        rehash(t, t->slots, t->mask + 1);
    }
    t->any = false;
}

/* Appends to a growing text (ld__summarizer_flush()'s). */
struct text {
    char *p;
    size_t len, cap;
};

static int text_put(const char *s, size_t n, void *arg)
{
    struct text *t = arg;
    if (n > t->cap - t->len) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        while (cap - t->len < n)
            cap *= 2;
        char *p = ld__realloc(t->p, cap);
        if (!p)
            return -1;
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    return 0;
}

int ld__summarizer_flush(struct ld__summarizer *s, json_t **out)
{
    if (!s || !out)
        return LD_EINVAL;
    *out = NULL;
    struct ld__summary *sum;
    int rc = ld__summarizer_take(s, &sum);
    if (rc != 0 || !sum)
        return rc;
    struct text t = {0};
    rc = ld__summary_dump(sum, text_put, &t);
    if (rc == 0 && !(*out = json_loadb(t.p, t.len, JSON_ALLOW_NUL, NULL)))
        rc = LD_ENOMEM;
    ld__free(t.p);
    if (rc != 0) {
        /* the summarizer changes only once all went well: the interval's
         * table comes back, the one it took becomes the spare again (it
         * recorded nothing) */
        struct table back = sum->t;
        sum->t = s->t;
        s->t = back;
        sum->reset = true;
        s->spare = sum;
        return rc;
    }
    ld__summary_reset(sum);
    ld__summarizer_reuse(s, sum);
    return 0;
}
