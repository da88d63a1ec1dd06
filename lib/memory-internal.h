/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the memory store's reclamation (memory_reclaim.c) as the
 * store's tables (memory_store.c) use it; see memory_reclaim.c for the
 * design. Private to those two files; never installed. What the get path
 * runs on every call is static inline here, as it was in one file.
 */
#ifndef LDASYNC_MEMORY_INTERNAL_H
#define LDASYNC_MEMORY_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "lease-internal.h"

struct event;
struct event_base;
struct slot; /* a slot of the store's tables (memory_store.c) */

/* What the store lets go of later: an item a write replaced, or a whole
 * table an init replaced (slots only; the snapshot is reference-counted). */
struct garbage {
    json_t *item;
    struct slot *slots;
    size_t mask;
};

/* A list of garbage; `w`, its weight: one per item, a table's capacity. */
struct bin {
    struct garbage *v;
    size_t n, cap, w;
};

/* A generation (see memory_reclaim.c): the leases of gets taken while it
 * was current, and the items they read, GEN_ITEMS at most. */
#define GEN_ITEMS 32

struct gen {
    struct ld_lease lease;    /* first: the future releases &gen->lease */
    _Atomic size_t refs;      /* the store's while it keeps the gen, one per lease */
    bool shared;              /* made with libevent threading on: atomic counts */
    uint32_t n;               /* items noted (since the gen last had no lease out) */
    uint32_t nref;            /* items[0..nref) are referenced by the gen: sealed */
    struct bin bin;           /* replaced while current, which a lease may still read */
    json_t *items[GEN_ITEMS]; /* the items of the leases taken on it */
};

/* Generations older than the current one whose leases may read garbage,
 * oldest first: v[head..n). */
struct gens {
    struct gen **v;
    size_t head, n, cap;
    size_t limit; /* compacted when that many */
};

/* The store's reclamation state. */
struct reclaim {
    struct gen *cur;
    struct gens old;
    struct gen *spares[8]; /* generations kept for reuse */
    int nspares;
    size_t kept; /* the weight of the garbage of cur and old */
    /* empty garbage arrays kept for reuse: growing one is a large
     * allocation, slow in a fragmented heap (glibc consolidates first) */
    struct bin arrays[4];
    int narrays;
    /* what no lease can read, waiting for the loop (`flush`, made active
     * when it is not empty) to let go of it all at once */
    struct bin loose;
    struct event *flush;
    bool flush_active;
};

/* A reclaimer with its first generation and its event on `base`: 0 or
 * LD_ENOMEM (then nothing to free). */
int ld__mem_reclaim_init(struct reclaim *r, struct event_base *base);
/* Lets go of everything once the store's tables are retired; generations
 * with leases out are sealed and left to their leases. */
void ld__mem_reclaim_fini(struct reclaim *r);

/* Lets go of `what` (an item or a table's slots, owned by the store, of
 * weight `w`): while a lease may read it, with the current generation;
 * else a table at once and an item from the loop. */
void ld__mem_retire(struct reclaim *r, struct garbage what, size_t w);

/* The generation a new lease goes to when the current one cannot take it:
 * it keeps garbage, or has noted GEN_ITEMS items, or threading came on
 * since it was made (its count is not atomic). The current one still
 * does when it has no lease out and no garbage an older lease may read;
 * else a new one. NULL without memory. */
struct gen *ld__mem_gen_turn(struct reclaim *r);

/* Frees a table's slots and the items and keys they hold (memory_store.c). */
void ld__mem_slots_free(struct slot *slots, size_t mask);

/* jansson's json_incref and json_decref for items (objects, never
 * jansson's static values) without their plain read of the count, a data
 * race once references go on other threads: a sealed generation lets go
 * of its items on the thread that releases its last lease. */
static inline json_t *item_ref(json_t *item)
{
    if (item)
        __atomic_fetch_add(&item->refcount, 1, __ATOMIC_RELAXED);
    return item;
}

static inline void item_unref(json_t *item)
{
    if (item && __atomic_sub_fetch(&item->refcount, 1, __ATOMIC_ACQ_REL) == 0)
        json_delete(item);
}

static inline void gen_add(struct gen *g)
{
    if (g->shared) {
        atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    } else {
        size_t n = atomic_load_explicit(&g->refs, memory_order_relaxed);
        atomic_store_explicit(&g->refs, n + 1, memory_order_relaxed);
    }
}

/* A lease on the current generation for a get of `item` (stored in a
 * table), which the generation notes; NULL without memory (then the
 * caller references the item instead). */
static inline struct ld_lease *ld__mem_lease(struct reclaim *r, json_t *item)
{
    struct gen *g = r->cur;
    if (g->n == GEN_ITEMS || g->bin.n || (!g->shared && ld__future_threads()))
        g = ld__mem_gen_turn(r);
    if (!g) /* no memory for a new generation */
        return NULL;
    g->items[g->n++] = item;
    gen_add(g);
    return &g->lease;
}

#endif /* LDASYNC_MEMORY_INTERNAL_H */
