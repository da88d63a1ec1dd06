/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The evaluator's cache of compiled items (eval-internal.h).
 *
 * Compiled items are cached by the address of their stored JSON, which the
 * cache references, so an address is never reused while it is in the
 * cache. An entry whose JSON only the cache still references (the store
 * replaced or deleted the item, or answered with a copy) is dropped when
 * the table is next resized, or once the evaluation reading at once that
 * resized it (and may be walking that item) is over.
 */
#include <string.h>

#include <ldasync/error.h>

#include "core/core-internal.h"
#include "eval/eval-internal.h"

void ld__plan_free(struct ld__plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->e[i].f)
            ld__item_unref(&p->e[i].f->h);
    ld__free(p->e);
    json_decref(p->snapshot);
    memset(p, 0, sizeof *p);
}

/* The slot of the entry of `json` compiled as the other kind than `it`,
 * or NULL. */
static struct ld__centry *cache_twin(const struct ld__cache *c, const struct ld__item *it)
{
    enum ld__item_type other = it->type == LD__FLAG ? LD__SEGMENT : LD__FLAG;
    for (size_t i = ld__hash_ptr(it->json) & c->mask;; i = (i + 1) & c->mask) {
        if (c->t[i].json == it->json && c->t[i].item && c->t[i].item->type == other)
            return &c->t[i];
        if (!c->t[i].json)
            return NULL;
    }
}

static void cache_put(struct ld__cache *c, struct ld__item *it)
{
    size_t i = ld__hash_ptr(it->json) & c->mask;
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
static bool cache_stale(const struct ld__cache *c, const struct ld__item *it)
{
    size_t held = cache_twin(c, it) ? 2 : 1;
    return ld__json_refs(it->json) == held;
}

/* Makes room for one more entry: a table of four times the entries (at
 * least 64) that keeps them all, reading no item (the counts stay). The
 * stale entries are dropped by cache_sweep(), a few slots at a time: a
 * grow that read each entry's item and JSON (cold at 10,000 items) held
 * the loop for milliseconds. `keep` is for ld__cache_add(). @return 0 or
 * LD_ENOMEM. */
int ld__cache_grow(struct ld__cache *c, bool keep)
{
    (void)keep;
    if (c->plan.snapshot && ld__json_refs(c->plan.snapshot) == 1)
        ld__plan_free(&c->plan); /* the store let go of that snapshot */
    size_t cap = 64;
    while (cap < 4 * (c->n + 1))
        cap *= 2;
    struct ld__centry *t = ld__calloc(cap, sizeof *t);
    if (!t)
        return LD_ENOMEM;
    for (size_t i = 0; c->t && i <= c->mask; i++) {
        if (!c->t[i].json)
            continue;
        size_t k = ld__hash_ptr(c->t[i].json) & (cap - 1);
        while (t[k].json)
            k = (k + 1) & (cap - 1);
        t[k] = c->t[i];
    }
    ld__free(c->t);
    c->t = t;
    c->mask = cap - 1;
    c->sweep_at = 0;
    return 0;
}

/* Removes the entry in slot `i`, moving the entries after it that would
 * no longer be found back (linear probing). */
static void cache_remove(struct ld__cache *c, size_t i)
{
    struct ld__item *it = c->t[i].item;
    c->n--;
    c->bytes -= it->bytes;
    if (it->type == LD__FLAG)
        c->nflags--;
    else
        c->nsegments--;
    for (size_t j = i;;) {
        c->t[i].json = NULL;
        c->t[i].item = NULL;
        for (;;) {
            j = (j + 1) & c->mask;
            if (!c->t[j].json)
                goto done;
            size_t home = ld__hash_ptr(c->t[j].json) & c->mask;
            /* the entry at j stays if its home is cyclically in (i, j] */
            if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
                continue;
            break;
        }
        c->t[i] = c->t[j];
        i = j;
    }
done:
    ld__item_unref(it);
}

/* Looks at `slots` slots from where the last sweep stopped, and drops the
 * stale entries there (their JSON only the cache holds: the store replaced
 * or deleted the item, or answered with a copy). Never within an
 * evaluation that reads at once: it may be walking a stale item. */
static void cache_sweep(struct ld__cache *c, size_t slots)
{
    for (size_t k = 0; c->t && k < slots && c->n > 0; k++) {
        size_t i = c->sweep_at & c->mask;
        if (c->t[i].json && cache_stale(c, c->t[i].item))
            cache_remove(c, i); /* slot i holds what came after: look again */
        else
            c->sweep_at = (i + 1) & c->mask;
    }
}

/* The compiled form of `json` (a stored flag or segment, borrowed), from
 * compiled now (ld__cache_get_keep() looked in the cache first); `keep`: see ld__cache_grow().
 * @return it (borrowed from the cache), or NULL when memory ran out. */
struct ld__item *ld__cache_add(struct ld__cache *c, enum ld__item_type type, json_t *json,
                               bool keep, struct ld__compile **wait)
{
    struct ld__item *it;
    *wait = NULL;
    for (struct ld__compile *k = c->compiles; k; k = k->next) {
        if (k->json == json && k->type == type) {
            *wait = k; /* under way: shared */
            return NULL;
        }
    }
    if (ld__item_values(type, json) > c->big) {
        *wait = ld__compile_start(c, type, json);
        return NULL;
    }
    if ((c->n + 1) * 2 > (c->t ? c->mask + 1 : 0) && ld__cache_grow(c, keep) != 0)
        return NULL;
    if (ld__item_compile(type, json, &it) != 0)
        return NULL;
    cache_put(c, it);
    if (!keep)
        cache_sweep(c, LD__CACHE_SWEEP);
    return it;
}

int ld__cache_put(struct ld__cache *c, struct ld__item *it)
{
    if ((c->n + 1) * 2 > (c->t ? c->mask + 1 : 0) && ld__cache_grow(c, false) != 0) {
        ld__item_unref(it);
        return LD_ENOMEM;
    }
    cache_put(c, it);
    cache_sweep(c, LD__CACHE_SWEEP);
    return 0;
}

void ld__cache_free(struct ld__cache *c)
{
    ld__compile_free_all(c);
    ld__plan_free(&c->plan);
    for (size_t i = 0; c->metas.t && i <= c->metas.mask; i++)
        json_decref(c->metas.t[i].obj);
    ld__free(c->metas.t);
    for (size_t i = 0; c->t && i <= c->mask; i++)
        ld__item_unref(c->t[i].item);
    ld__free(c->t);
    memset(c, 0, sizeof *c);
}
