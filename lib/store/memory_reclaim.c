/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the memory store's reclamation: what the store lets go of later,
 * and when (store-internal.h for what memory_store.c uses of it).
 *
 * Items handed out by get are not referenced one by one (that touches every
 * item's reference count, a cache miss of its own, atomically): the future
 * holds a lease on the store's current generation instead, and the
 * generation notes the item (GEN_ITEMS at most: then the next get while a
 * lease is out begins a new generation). A write that replaces an item
 * while a lease may read it keeps the item in the current generation's
 * garbage; that garbage is let go of once no lease on that generation or
 * an older one reads without a reference (epoch-style reclamation): older
 * generations with leases out wait in the store's list (`old`).
 *
 * What waits is bounded: once the garbage of all generations weighs
 * KEPT_MAX, every generation with leases out is sealed (it takes a jansson
 * reference on each item it noted, at most GEN_ITEMS, so its leases no
 * longer need the garbage) and all the garbage goes. A sealed generation
 * the store no longer needs is left to its leases: the last one lets go of
 * its references and of it, on whichever thread releases it. So a result
 * held for ever keeps at most GEN_ITEMS items (and its generation), not
 * every item written after it.
 *
 * An item a generation noted but does not reference stays alive while the
 * generation has leases out: garbage is let go of only when no lease that
 * may read it is out, and a generation whose leases are all gone forgets
 * its notes before any garbage goes without it.
 *
 * Once libevent threading is on, futures may be released on any thread,
 * and the counts of generations made from then on are atomic; before, a
 * plain count does (the loop thread is the only one). Only the store's
 * thread takes leases, notes items, seals and looks at counts: a count
 * seen at 1 (the store's own) stays so.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <event2/event.h>

#include <ldasync/error.h>

#include "core/core-internal.h"
#include "store/store-internal.h"

/* ------------------------------------------------------------------------- */
/* Garbage and bins                                                          */

/* Lets go of an object whose members are items a lease may read. jansson's
 * json_delete() lets go of an object's members with its json_decref(),
 * whose decrement releases but does not acquire: a member whose other
 * references went on other threads (a sealed generation's, by its last
 * lease, or a result's) would be freed here without what those threads
 * did with it being ordered before (and ThreadSanitizer, which cannot see
 * jansson's counts, reported the free racing with their reads). So when
 * nobody else holds the object, each member goes first by itself, with
 * the acquiring decrement of item_unref(). */
static void obj_unref(json_t *obj)
{
    if (obj && ld__json_refs(obj) == 1) {
        for (void *it = json_object_iter(obj); it; it = json_object_iter_next(obj, it)) {
            json_t *v = json_object_iter_value(it);
            if (!v || ld__json_immortal(v))
                continue;
            item_ref(v); /* jansson's decrement below does not free it */
            json_object_iter_set_new(obj, it, json_null());
            item_unref(v);
        }
    }
    item_unref(obj);
}

static void garbage_free(const struct garbage *g, size_t n)
{
    /* the reference counts first, all at once: their cache misses overlap
     * instead of one locked decrement waiting for each */
    for (size_t i = 0; i < n; i++)
        if (g[i].item)
            __builtin_prefetch(g[i].item, 1);
    for (size_t i = 0; i < n; i++) {
        if (g[i].members)
            obj_unref(g[i].item);
        else
            item_unref(g[i].item);
        if (g[i].slots)
            ld__mem_slots_free(g[i].slots, g[i].mask);
    }
}

/* Makes room in b for `k` more: false without memory. */
static bool bin_reserve(struct bin *b, size_t k)
{
    if (b->cap - b->n >= k)
        return true;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap - b->n < k)
        cap *= 2;
    struct garbage *bigger = ld__realloc(b->v, cap * sizeof(*bigger));
    if (!bigger)
        return false;
    b->v = bigger;
    b->cap = cap;
    return true;
}

/* Adds `what` to b: false without memory. */
static bool bin_add(struct bin *b, struct garbage what)
{
    if (!bin_reserve(b, 1))
        return false;
    b->v[b->n++] = what;
    return true;
}

/* A large table let go of over several passes of the loop. */
struct dying {
    struct dying *next;
    struct slot *slots;
    size_t mask;
    size_t at; /* the first slot not yet let go of */
};

/* Slots let go of per pass of the loop: tables up to that many go at
 * once. */
#define DYING_SLICE 1024

/* A request glibc serves from its large bins (1 KiB and over). */
#define LARGE_REQUEST 2048

static void dying_step(evutil_socket_t fd, short what, void *arg)
{
    struct reclaim *r = arg;
    (void)fd;
    (void)what;
    struct dying *d = r->dying;
    if (ld__mem_slots_free_some(d->slots, d->mask, &d->at, DYING_SLICE)) {
        r->dying = d->next;
        ld__free(d);
    }
    /* glibc keeps the small blocks just freed in its fast bins and merges
     * them all at the next large request or free (the table's own, at the
     * end: 300 ms for 100,000 flags); a large request now merges this
     * slice's only */
    ld__free(ld__malloc(LARGE_REQUEST));
    if (r->dying && event_add(r->dying_ev, &(struct timeval){0, 0}) != 0) {
        while ((d = r->dying)) { /* cannot wait for the loop: at once */
            r->dying = d->next;
            ld__mem_slots_free_some(d->slots, d->mask, &d->at, SIZE_MAX);
            ld__free(d);
        }
    }
}

/* Lets go of `g` (no lease can read it): a large table over several passes
 * of the loop (at once without memory for that), anything else now. */
static void garbage_free_later(struct reclaim *r, const struct garbage *g)
{
    struct dying *d = NULL;
    if (!g->slots || g->mask < DYING_SLICE || !(d = ld__calloc(1, sizeof *d))) {
        garbage_free(g, 1);
        return;
    }
    d->slots = g->slots;
    d->mask = g->mask;
    struct dying **tail = &r->dying;
    while (*tail)
        tail = &(*tail)->next;
    *tail = d;
    if (d == r->dying && event_add(r->dying_ev, &(struct timeval){0, 0}) != 0)
        dying_step(-1, 0, r); /* frees a slice, then all of it */
}

/* Lets go of the loose bin (kept for reuse). */
static void loose_empty(struct reclaim *r)
{
    struct bin *b = &r->loose;
    size_t n = b->n;
    b->n = 0;
    b->w = 0;
    for (size_t i = 0; i < n; i++)
        if (b->v[i].slots)
            garbage_free_later(r, &b->v[i]);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) /* the items together (garbage_free) */
        if (!b->v[i].slots)
            b->v[k++] = b->v[i];
    garbage_free(b->v, k);
}

/* Lets go of everything in b (kept for reuse). */
static void bin_empty(struct bin *b)
{
    size_t n = b->n;
    b->n = 0;
    b->w = 0;
    garbage_free(b->v, n);
}

/* ------------------------------------------------------------------------- */
/* Generations                                                               */

/* Drops one count of g: true if that was the last. */
static bool gen_drop(struct gen *g)
{
    if (g->shared)
        return atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1;
    size_t n = atomic_load_explicit(&g->refs, memory_order_relaxed);
    atomic_store_explicit(&g->refs, n - 1, memory_order_relaxed);
    return n == 1;
}

/* Lets go of the references of a generation nobody counts any more. */
static void gen_unref_items(struct gen *g)
{
    for (uint32_t i = 0; i < g->nref; i++)
        item_unref(g->items[i]);
    g->n = g->nref = 0;
}

static void gen_free(struct gen *g)
{
    gen_unref_items(g);
    bin_empty(&g->bin); /* empty: the store moved its garbage */
    ld__free(g->bin.v);
    ld__free(g);
}

/* A lease's release, from any thread: the last count of a generation is a
 * lease's only once the store left the generation to its leases, sealed
 * and without garbage. */
static void gen_release(struct ld_lease *lease)
{
    struct gen *g = (struct gen *)lease;
    if (gen_drop(g))
        gen_free(g);
}

static struct gen *gen_new(void)
{
    struct gen *g = ld__calloc(1, sizeof(*g));
    if (g) {
        g->lease.release = gen_release;
        atomic_init(&g->refs, 1);
        g->shared = ld__future_threads();
    }
    return g;
}

static bool gen_leased(struct gen *g)
{
    return atomic_load_explicit(&g->refs, memory_order_acquire) > 1;
}

/* True if a lease on g may read an item without a reference of g's. */
static bool gen_pins(struct gen *g)
{
    return g->nref < g->n && gen_leased(g);
}

/* References the items g noted (alive: in a table or kept as garbage while
 * g pins), so that its leases need nothing else. */
static void gen_seal(struct gen *g)
{
    for (uint32_t i = g->nref; i < g->n; i++)
        __builtin_prefetch(g->items[i], 1);
    for (uint32_t i = g->nref; i < g->n; i++)
        item_ref(g->items[i]);
    g->nref = g->n;
}

/* g has no lease out: forgets its items (those not referenced may be
 * freed from now on). */
static void gen_reset(struct gen *g)
{
    gen_unref_items(g);
}

/* A generation to make current: one kept for reuse, or a new one. NULL
 * without memory. */
static struct gen *gen_take(struct reclaim *r)
{
    if (!r->nspares)
        return gen_new();
    struct gen *g = r->spares[--r->nspares];
    atomic_store_explicit(&g->refs, 1, memory_order_relaxed);
    g->shared = ld__future_threads();
    return g;
}

/* Keeps the array of the empty bin b for reuse (or frees it). */
static void array_give(struct reclaim *r, struct bin *b)
{
    if (b->v && r->narrays < (int)(sizeof(r->arrays) / sizeof(r->arrays[0])))
        r->arrays[r->narrays++] = *b;
    else
        ld__free(b->v);
    *b = (struct bin){0};
}

/* Gives the bin b, without an array, one kept for reuse if there is one. */
static void array_take(struct reclaim *r, struct bin *b)
{
    if (!b->v && r->narrays)
        *b = r->arrays[--r->narrays];
}

/* Drops the store's count of g, which pins nothing and keeps no garbage
 * (its array is kept for reuse): g goes now (kept for reuse) without
 * leases, else with its last lease. */
static void gen_put(struct reclaim *r, struct gen *g)
{
    array_give(r, &g->bin);
    if (!gen_drop(g))
        return;
    gen_unref_items(g);
    if (r->nspares < (int)(sizeof(r->spares) / sizeof(r->spares[0])))
        r->spares[r->nspares++] = g;
    else
        gen_free(g);
}

/* ------------------------------------------------------------------------- */
/* Letting go                                                                */

/* Replaced items no lease can read wait for the loop to be let go of
 * together, but never more than this many. */
#define LOOSE_MAX 256

/* The weight of garbage that waits for leases, at most. */
#define KEPT_MAX 256

/* How many older generations wait before their list is compacted (at
 * least; then twice as many as remain). */
#define OLD_MIN 64

static void flush_soon(struct reclaim *r)
{
    if (!r->flush_active) {
        r->flush_active = true;
        event_active(r->flush, EV_TIMEOUT, 0);
    }
}

/* After additions to the loose bin: lets go of it at once past LOOSE_MAX,
 * else asks the loop to. */
static void loose_settle(struct reclaim *r)
{
    if (r->loose.n >= LOOSE_MAX)
        loose_empty(r);
    else if (r->loose.n)
        flush_soon(r);
}

/* Moves `what`, which no lease can read, to the loose bin (or lets go of
 * it at once without memory to note it). */
static void loose_add(struct reclaim *r, struct garbage what)
{
    if (!bin_add(&r->loose, what))
        garbage_free(&what, 1);
}

/* The garbage of a generation (cur or old) that no lease can read any
 * more moves to the loose bin (the caller settles it). */
static void bin_unload(struct reclaim *r, struct bin *b)
{
    r->kept -= b->w;
    b->w = 0;
    if (r->loose.n == 0) { /* swap: no copy */
        struct bin tmp = r->loose;
        r->loose = *b;
        *b = tmp;
        return;
    }
    for (size_t i = 0; i < b->n; i++)
        loose_add(r, b->v[i]);
    b->n = 0;
}

static bool old_empty(const struct reclaim *r)
{
    return r->old.head == r->old.n;
}

/* Appends g to the older generations: false without memory. */
static bool old_push(struct reclaim *r, struct gen *g)
{
    struct gens *o = &r->old;
    if (o->n == o->cap && o->head) {
        memmove(o->v, o->v + o->head, (o->n - o->head) * sizeof(*o->v));
        o->n -= o->head;
        o->head = 0;
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;
        struct gen **bigger = ld__realloc(o->v, cap * sizeof(*bigger));
        if (!bigger)
            return false;
        o->v = bigger;
        o->cap = cap;
    }
    o->v[o->n++] = g;
    return true;
}

/* Lets go of the oldest generations while they pin nothing, and of their
 * garbage: no older lease can read it. */
static void old_pop(struct reclaim *r)
{
    struct gens *o = &r->old;
    bool unloaded = false;
    while (o->head < o->n && !gen_pins(o->v[o->head])) {
        struct gen *g = o->v[o->head++];
        unloaded |= g->bin.n > 0;
        bin_unload(r, &g->bin);
        gen_put(r, g);
    }
    if (o->head == o->n)
        o->head = o->n = 0;
    if (unloaded)
        loose_settle(r);
}

/* Forgets the older generations that pin nothing and keep no garbage an
 * older lease may read (the oldest ones lose their garbage as in old_pop);
 * the list is compacted again when twice as long. */
static void old_compact(struct reclaim *r)
{
    struct gens *o = &r->old;
    bool pinned = false; /* by a generation kept so far */
    size_t j = 0;
    for (size_t i = o->head; i < o->n; i++) {
        struct gen *g = o->v[i];
        if (!gen_pins(g) && (!pinned || !g->bin.n)) {
            bin_unload(r, &g->bin);
            gen_put(r, g);
            continue;
        }
        pinned = true;
        o->v[j++] = g;
    }
    o->head = 0;
    o->n = j;
    o->limit = j * 2 > OLD_MIN ? j * 2 : OLD_MIN;
    loose_settle(r);
}

/* Seals every generation with leases out, so that no garbage waits for
 * any of them: all of it moves to the loose bin (the caller settles it). */
static void seal_all(struct reclaim *r)
{
    struct gens *o = &r->old;
    struct gen *c = r->cur;
    /* sealed before any garbage moves: a generation's items may be in a
     * later one's garbage */
    for (size_t i = o->head; i < o->n; i++)
        if (gen_leased(o->v[i]))
            gen_seal(o->v[i]);
    if (gen_leased(c))
        gen_seal(c);
    else
        gen_reset(c);
    for (size_t i = o->head; i < o->n; i++) {
        bin_unload(r, &o->v[i]->bin);
        gen_put(r, o->v[i]);
    }
    o->head = o->n = 0;
    bin_unload(r, &c->bin);
}

/* Nothing older than the current generation waits and no lease on it reads
 * without a reference: its garbage goes to the loose bin (the caller
 * settles it). */
static void cur_unload(struct reclaim *r)
{
    struct gen *g = r->cur;
    if (g->nref < g->n) /* no lease out (else g would pin) */
        gen_reset(g);
    if (g->bin.n)
        bin_unload(r, &g->bin);
}

void ld__mem_retire(struct reclaim *r, struct garbage what, size_t w)
{
    struct gen *g = r->cur;
    if (!old_empty(r))
        old_pop(r);
    if (!old_empty(r) || gen_pins(g)) {
        array_take(r, &g->bin);
        if (bin_add(&g->bin, what)) {
            g->bin.w += w;
            r->kept += w;
            if (r->kept >= KEPT_MAX) {
                seal_all(r);
                loose_settle(r);
            }
            return;
        }
        seal_all(r); /* no memory to keep it: then no lease needs it */
    }
    cur_unload(r);
    if (what.slots)
        garbage_free_later(r, &what);
    else
        loose_add(r, what);
    loose_settle(r);
}

/* From the loop: lets go of what no lease can read any more. */
static void on_flush(evutil_socket_t fd, short what, void *arg)
{
    struct reclaim *r = arg;
    (void)fd;
    (void)what;
    if (!old_empty(r))
        old_pop(r);
    if (old_empty(r) && !gen_pins(r->cur))
        cur_unload(r);
    r->flush_active = false;
    loose_empty(r);
}

struct gen *ld__mem_gen_turn(struct reclaim *r)
{
    struct gen *g = r->cur;
    if (!old_empty(r))
        old_pop(r);
    if (!gen_leased(g)) {
        gen_reset(g);
        g->shared = g->shared || ld__future_threads(); /* no lease counted yet */
        if (old_empty(r) && g->bin.n) {
            bin_unload(r, &g->bin);
            loose_settle(r);
        }
        if (!g->bin.n)
            return g;
    }
    if (r->old.n - r->old.head >= r->old.limit)
        old_compact(r);
    struct gen *next = gen_take(r);
    if (!next)
        return NULL;
    if (!old_push(r, g)) {
        gen_put(r, next);
        return NULL;
    }
    r->cur = next;
    return next;
}

/* ------------------------------------------------------------------------- */
/* Making and freeing                                                        */

int ld__mem_reclaim_init(struct reclaim *r, struct event_base *base)
{
    *r = (struct reclaim){0};
    r->old.limit = OLD_MIN;
    r->cur = gen_new();
    if (r->cur)
        r->flush = event_new(base, -1, 0, on_flush, r);
    if (r->flush)
        r->dying_ev = event_new(base, -1, 0, dying_step, r);
    if (!r->dying_ev) {
        if (r->flush)
            event_free(r->flush);
        ld__free(r->cur);
        return LD_ENOMEM;
    }
    return 0;
}

void ld__mem_reclaim_fini(struct reclaim *r)
{
    seal_all(r); /* leases out keep their own items from now on */
    bin_empty(&r->loose);
    for (struct dying *d; (d = r->dying);) { /* the store is freed: all at once */
        r->dying = d->next;
        ld__mem_slots_free_some(d->slots, d->mask, &d->at, SIZE_MAX);
        ld__free(d);
    }
    event_free(r->dying_ev);
    ld__free(r->loose.v);
    ld__free(r->old.v);
    while (r->narrays)
        ld__free(r->arrays[--r->narrays].v);
    event_free(r->flush);
    while (r->nspares)
        gen_free(r->spares[--r->nspares]);
    gen_release(&r->cur->lease); /* or with its last lease */
}
