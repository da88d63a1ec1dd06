/*
 * ldasync: the in-memory store (store.h). One thread, no lock.
 *
 * Per kind, an open-addressing hash table (linear probing; entries are
 * never removed, a delete leaves a tombstone) maps a key to the item and
 * its version. A slot is one cache line holding the key itself (longer keys
 * are copied to the heap), so a lookup touches one line of the table and no
 * string elsewhere; a tombstone keeps no JSON, so a delete allocates
 * nothing. get, upsert and delete hash the key once and read no field of
 * any stored item. The library's front layer calls these
 * operations synchronously (store-internal.h): no future for the
 * implementation, and writes answer with the store's two shared bool
 * futures; init validates and loads in one pass over the data.
 *
 * all answers with a jansson object of the live items, built on the first
 * all and then kept in step with every write: in place while the store
 * holds the only reference to it, else on the previous result once its
 * reader let go of it (brought up to date by the keys written since), else
 * on a shallow copy; a reader's object never changes (struct snaps).
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include <ldasync/error.h>
#include <ldasync/store.h>

#include "alloc-internal.h"
#include "lease-internal.h"
#include "kind-internal.h"
#include "store-internal.h"

enum { K_SEGMENTS, K_FEATURES, NKINDS };

/* Keys shorter than this live in their slot. */
#define INLINE_KEY 36

struct slot {
    uint64_t hash;
    json_t *item; /* one reference; NULL for a tombstone */
    int64_t version;
    uint32_t len;         /* key length; 0: empty slot */
    char key[INLINE_KEY]; /* the key and its NUL, or a malloc'd copy's address */
};
_Static_assert(sizeof(struct slot) == 64, "a slot is one cache line");

/* The results of all for one table. `snap` is kept in step with every
 * write: in place while the store holds the only reference. When a reader
 * still holds it, the write goes to `spare` instead, the snapshot handed
 * out before it, once its reader has let go of it: `spare` is brought up to
 * date by replaying the keys written since it was current (`log`), so a
 * reader holding a snapshot costs O(writes), not a copy of every pair. Only
 * without a free spare (two readers, or a long log) is snap copied. */
struct snaps {
    json_t *snap;  /* the result of all, or NULL until asked for */
    json_t *spare; /* an earlier result, behind by the keys in log, or NULL */
    char *log;     /* keys written since spare was snap, each with its NUL */
    size_t log_len, log_cap, log_n;
};

struct table {
    struct slot *slots;
    size_t mask; /* capacity - 1, a power of two */
    size_t used;
    struct snaps sn;
};

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

/*
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
#define GEN_ITEMS 32

struct gen {
    struct ld__lease lease;   /* first: the future releases &gen->lease */
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

struct memory {
    struct table t[NKINDS];
    int inited;
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
    /* the key the last prefetch hashed (see mem_prefetch) */
    const char *hint_key;
    size_t hint_len;
    uint64_t hint_hash;
};

static void table_free(struct table *t);

/* Forgets the spare and its log. */
static void spare_drop(struct snaps *sn)
{
    json_decref(sn->spare);
    sn->spare = NULL;
    sn->log_len = sn->log_n = 0;
}

static void snaps_drop(struct snaps *sn)
{
    spare_drop(sn);
    json_decref(sn->snap);
    sn->snap = NULL;
    ld__free(sn->log);
    sn->log = NULL;
    sn->log_cap = 0;
}

/* jansson's json_incref and json_decref for items (objects, never
 * jansson's static values) without their plain read of the count, a data
 * race once references go on other threads: a sealed generation lets go
 * of its items on the thread that releases its last lease. */
static json_t *item_ref(json_t *item)
{
    if (item)
        __atomic_fetch_add(&item->refcount, 1, __ATOMIC_RELAXED);
    return item;
}

static void item_unref(json_t *item)
{
    if (item && __atomic_sub_fetch(&item->refcount, 1, __ATOMIC_ACQ_REL) == 0)
        json_delete(item);
}

static void garbage_free(const struct garbage *g, size_t n)
{
    /* the reference counts first, all at once: their cache misses overlap
     * instead of one locked decrement waiting for each */
    for (size_t i = 0; i < n; i++)
        if (g[i].item)
            __builtin_prefetch(g[i].item, 1);
    for (size_t i = 0; i < n; i++) {
        struct table t = {.slots = g[i].slots, .mask = g[i].mask};
        item_unref(g[i].item);
        if (t.slots)
            table_free(&t);
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

/* Lets go of everything in b (kept for reuse). */
static void bin_empty(struct bin *b)
{
    size_t n = b->n;
    b->n = 0;
    b->w = 0;
    garbage_free(b->v, n);
}

/* Drops one count of g: true if that was the last. */
static bool gen_drop(struct gen *g)
{
    if (g->shared)
        return atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1;
    size_t n = atomic_load_explicit(&g->refs, memory_order_relaxed);
    atomic_store_explicit(&g->refs, n - 1, memory_order_relaxed);
    return n == 1;
}

static void gen_add(struct gen *g)
{
    if (g->shared) {
        atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    } else {
        size_t n = atomic_load_explicit(&g->refs, memory_order_relaxed);
        atomic_store_explicit(&g->refs, n + 1, memory_order_relaxed);
    }
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
static void gen_release(struct ld__lease *lease)
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
static struct gen *gen_take(struct memory *mem)
{
    if (!mem->nspares)
        return gen_new();
    struct gen *g = mem->spares[--mem->nspares];
    atomic_store_explicit(&g->refs, 1, memory_order_relaxed);
    g->shared = ld__future_threads();
    return g;
}

/* Keeps the array of the empty bin b for reuse (or frees it). */
static void array_give(struct memory *mem, struct bin *b)
{
    if (b->v && mem->narrays < (int)(sizeof(mem->arrays) / sizeof(mem->arrays[0])))
        mem->arrays[mem->narrays++] = *b;
    else
        ld__free(b->v);
    *b = (struct bin){0};
}

/* Gives the bin b, without an array, one kept for reuse if there is one. */
static void array_take(struct memory *mem, struct bin *b)
{
    if (!b->v && mem->narrays)
        *b = mem->arrays[--mem->narrays];
}

/* Drops the store's count of g, which pins nothing and keeps no garbage
 * (its array is kept for reuse): g goes now (kept for reuse) without
 * leases, else with its last lease. */
static void gen_put(struct memory *mem, struct gen *g)
{
    array_give(mem, &g->bin);
    if (!gen_drop(g))
        return;
    gen_unref_items(g);
    if (mem->nspares < (int)(sizeof(mem->spares) / sizeof(mem->spares[0])))
        mem->spares[mem->nspares++] = g;
    else
        gen_free(g);
}

/* Replaced items no lease can read wait for the loop to be let go of
 * together, but never more than this many. */
#define LOOSE_MAX 256

/* The weight of garbage that waits for leases, at most. */
#define KEPT_MAX 256

/* How many older generations wait before their list is compacted (at
 * least; then twice as many as remain). */
#define OLD_MIN 64

static void flush_soon(struct memory *mem)
{
    if (!mem->flush_active) {
        mem->flush_active = true;
        event_active(mem->flush, EV_TIMEOUT, 0);
    }
}

/* After additions to the loose bin: lets go of it at once past LOOSE_MAX,
 * else asks the loop to. */
static void loose_settle(struct memory *mem)
{
    if (mem->loose.n >= LOOSE_MAX)
        bin_empty(&mem->loose);
    else if (mem->loose.n)
        flush_soon(mem);
}

/* Moves `what`, which no lease can read, to the loose bin (or lets go of
 * it at once without memory to note it). */
static void loose_add(struct memory *mem, struct garbage what)
{
    if (!bin_add(&mem->loose, what))
        garbage_free(&what, 1);
}

/* The garbage of a generation (cur or old) that no lease can read any
 * more moves to the loose bin (the caller settles it). */
static void bin_unload(struct memory *mem, struct bin *b)
{
    mem->kept -= b->w;
    b->w = 0;
    if (mem->loose.n == 0) { /* swap: no copy */
        struct bin tmp = mem->loose;
        mem->loose = *b;
        *b = tmp;
        return;
    }
    for (size_t i = 0; i < b->n; i++)
        loose_add(mem, b->v[i]);
    b->n = 0;
}

static bool old_empty(const struct memory *mem)
{
    return mem->old.head == mem->old.n;
}

/* Appends g to the older generations: false without memory. */
static bool old_push(struct memory *mem, struct gen *g)
{
    struct gens *o = &mem->old;
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
static void old_pop(struct memory *mem)
{
    struct gens *o = &mem->old;
    bool unloaded = false;
    while (o->head < o->n && !gen_pins(o->v[o->head])) {
        struct gen *g = o->v[o->head++];
        unloaded |= g->bin.n > 0;
        bin_unload(mem, &g->bin);
        gen_put(mem, g);
    }
    if (o->head == o->n)
        o->head = o->n = 0;
    if (unloaded)
        loose_settle(mem);
}

/* Forgets the older generations that pin nothing and keep no garbage an
 * older lease may read (the oldest ones lose their garbage as in old_pop);
 * the list is compacted again when twice as long. */
static void old_compact(struct memory *mem)
{
    struct gens *o = &mem->old;
    bool pinned = false; /* by a generation kept so far */
    size_t j = 0;
    for (size_t i = o->head; i < o->n; i++) {
        struct gen *g = o->v[i];
        if (!gen_pins(g) && (!pinned || !g->bin.n)) {
            bin_unload(mem, &g->bin);
            gen_put(mem, g);
            continue;
        }
        pinned = true;
        o->v[j++] = g;
    }
    o->head = 0;
    o->n = j;
    o->limit = j * 2 > OLD_MIN ? j * 2 : OLD_MIN;
    loose_settle(mem);
}

/* Seals every generation with leases out, so that no garbage waits for
 * any of them: all of it moves to the loose bin (the caller settles it). */
static void seal_all(struct memory *mem)
{
    struct gens *o = &mem->old;
    struct gen *c = mem->cur;
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
        bin_unload(mem, &o->v[i]->bin);
        gen_put(mem, o->v[i]);
    }
    o->head = o->n = 0;
    bin_unload(mem, &c->bin);
}

/* Nothing older than the current generation waits and no lease on it reads
 * without a reference: its garbage goes to the loose bin (the caller
 * settles it). */
static void cur_unload(struct memory *mem)
{
    struct gen *g = mem->cur;
    if (g->nref < g->n) /* no lease out (else g would pin) */
        gen_reset(g);
    if (g->bin.n)
        bin_unload(mem, &g->bin);
}

/* Lets go of `what` (an item or a table's slots, owned by the store, of
 * weight `w`): while a lease may read it, with the current generation;
 * else a table at once and an item from the loop (loose_add). */
static void retire(struct memory *mem, struct garbage what, size_t w)
{
    struct gen *g = mem->cur;
    if (!old_empty(mem))
        old_pop(mem);
    if (!old_empty(mem) || gen_pins(g)) {
        array_take(mem, &g->bin);
        if (bin_add(&g->bin, what)) {
            g->bin.w += w;
            mem->kept += w;
            if (mem->kept >= KEPT_MAX) {
                seal_all(mem);
                loose_settle(mem);
            }
            return;
        }
        seal_all(mem); /* no memory to keep it: then no lease needs it */
    }
    cur_unload(mem);
    if (what.slots)
        garbage_free(&what, 1);
    else
        loose_add(mem, what);
    loose_settle(mem);
}

/* From the loop: lets go of what no lease can read any more. */
static void on_flush(evutil_socket_t fd, short what, void *arg)
{
    struct memory *mem = arg;
    (void)fd;
    (void)what;
    if (!old_empty(mem))
        old_pop(mem);
    if (old_empty(mem) && !gen_pins(mem->cur))
        cur_unload(mem);
    mem->flush_active = false;
    bin_empty(&mem->loose);
}

/* Retires a whole table (its snapshot is reference-counted: dropped now). */
static void table_retire(struct memory *mem, struct table *t)
{
    snaps_drop(&t->sn);
    if (t->slots)
        retire(mem, (struct garbage){NULL, t->slots, t->mask}, t->mask + 1);
    t->slots = NULL;
}

/* The generation a new lease goes to when the current one cannot take it:
 * it keeps garbage, or has noted GEN_ITEMS items, or threading came on
 * since it was made (its count is not atomic). The current one still
 * does when it has no lease out and no garbage an older lease may read;
 * else a new one. NULL without memory. */
static struct gen *gen_turn(struct memory *mem)
{
    struct gen *g = mem->cur;
    if (!old_empty(mem))
        old_pop(mem);
    if (!gen_leased(g)) {
        gen_reset(g);
        g->shared = g->shared || ld__future_threads(); /* no lease counted yet */
        if (old_empty(mem) && g->bin.n) {
            bin_unload(mem, &g->bin);
            loose_settle(mem);
        }
        if (!g->bin.n)
            return g;
    }
    if (mem->old.n - mem->old.head >= mem->old.limit)
        old_compact(mem);
    struct gen *next = gen_take(mem);
    if (!next)
        return NULL;
    if (!old_push(mem, g)) {
        gen_put(mem, next);
        return NULL;
    }
    mem->cur = next;
    return next;
}

static int kind_index(const ld_kind *kind)
{
    return kind == ld_kind_features() ? K_FEATURES : K_SEGMENTS;
}

static const ld_kind *kind_at(int i)
{
    return i == K_FEATURES ? ld_kind_features() : ld_kind_segments();
}

/* A 64-bit hash of the key's `len` bytes, read eight (or four) at a time,
 * the last word overlapping the one before (keys are short strings; a
 * byte-wise FNV-1a spent a multiply per byte). Not keyed: keys come from
 * the application's own data source. */
static inline uint64_t mix(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 29);
}

static uint64_t hash_key(const char *key, size_t len)
{
    uint64_t h = len, w;
    if (len >= 8) {
        const char *p = key;
        for (size_t n = len; n > 8; n -= 8, p += 8) {
            memcpy(&w, p, 8);
            h = mix(h, w);
        }
        memcpy(&w, key + len - 8, 8);
        h = mix(h, w);
    } else if (len >= 4) {
        uint32_t a, b;
        memcpy(&a, key, 4);
        memcpy(&b, key + len - 4, 4);
        h = mix(h, (uint64_t)a << 32 | b);
    } else if (len > 0) {
        const unsigned char *p = (const unsigned char *)key;
        h = mix(h, (uint64_t)p[0] << 16 | (uint64_t)p[len / 2] << 8 | p[len - 1]);
    }
    h *= 0xd6e8feb86659fd93ULL;
    return h ^ (h >> 32);
}

static const char *slot_key(const struct slot *s)
{
    if (s->len < INLINE_KEY)
        return s->key;
    const char *heap;
    memcpy(&heap, s->key, sizeof(heap));
    return heap;
}

/* Gives an empty slot its key. Returns 0 or LD_ENOMEM. */
static int slot_set_key(struct slot *s, const char *key, size_t len, uint64_t hash)
{
    if (len < INLINE_KEY) {
        memcpy(s->key, key, len + 1);
    } else {
        char *heap = ld__malloc(len + 1);
        if (!heap)
            return LD_ENOMEM;
        memcpy(heap, key, len + 1);
        memcpy(s->key, &heap, sizeof(heap));
    }
    s->hash = hash;
    s->len = (uint32_t)len;
    return 0;
}

/* a[0..len) == b[0..len): keys of 8 to 16 bytes (the usual flag key) by
 * two overlapping words, without a call. */
static inline bool key_eq(const char *a, const char *b, size_t len)
{
    if (len < 8 || len > 16)
        return memcmp(a, b, len) == 0;
    uint64_t a0, a1, b0, b1;
    memcpy(&a0, a, 8);
    memcpy(&b0, b, 8);
    memcpy(&a1, a + len - 8, 8);
    memcpy(&b1, b + len - 8, 8);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

static struct slot *find(const struct table *t, const char *key, size_t len, uint64_t hash)
{
    for (size_t i = hash & t->mask;; i = (i + 1) & t->mask) {
        struct slot *s = &t->slots[i];
        if (!s->len || (s->hash == hash && s->len == len && key_eq(slot_key(s), key, len)))
            return s;
    }
}

/* A table for `n` items at most 3/4 full. */
static int table_init(struct table *t, size_t n)
{
    size_t cap = 16;
    while (cap * 3 < n * 4 + 4)
        cap *= 2;
    t->slots = ld__aligned_alloc(64, cap * sizeof(*t->slots));
    t->mask = cap - 1;
    t->used = 0;
    t->sn = (struct snaps){0};
    if (!t->slots)
        return LD_ENOMEM;
    memset(t->slots, 0, cap * sizeof(*t->slots));
    return 0;
}

static void slot_clear(struct slot *s)
{
    item_unref(s->item);
    if (s->len >= INLINE_KEY)
        ld__free((char *)slot_key(s));
}

static void table_free(struct table *t)
{
    for (size_t i = 0; t->slots && i <= t->mask; i++)
        if (t->slots[i].len)
            slot_clear(&t->slots[i]);
    ld__aligned_free(t->slots);
    snaps_drop(&t->sn);
    t->slots = NULL;
}

/* Doubles the table when it is 3/4 full. */
static int table_grow(struct table *t)
{
    if ((t->used + 1) * 4 < (t->mask + 1) * 3)
        return 0;
    struct table bigger;
    if (table_init(&bigger, t->mask + 1) != 0) /* twice the capacity */
        return LD_ENOMEM;
    for (size_t i = 0; i <= t->mask; i++) {
        const struct slot *s = &t->slots[i];
        if (s->len)
            *find(&bigger, slot_key(s), s->len, s->hash) = *s;
    }
    bigger.used = t->used;
    bigger.sn = t->sn;
    ld__aligned_free(t->slots);
    *t = bigger;
    return 0;
}

/* Notes that `key` changed since spare was current; a spare that fell far
 * behind (or no memory for the note) is dropped: copying is cheaper then. */
static void spare_log(struct snaps *sn, const char *key, size_t len)
{
    if (!sn->spare)
        return;
    if (sn->log_n >= 64 && sn->log_n * 8 >= json_object_size(sn->snap)) {
        spare_drop(sn);
        return;
    }
    if (sn->log_len + len + 1 > sn->log_cap) {
        size_t cap = (sn->log_cap ? sn->log_cap * 2 : 256) + len + 1;
        char *bigger = ld__realloc(sn->log, cap);
        if (!bigger) {
            spare_drop(sn);
            return;
        }
        sn->log = bigger;
        sn->log_cap = cap;
    }
    memcpy(sn->log + sn->log_len, key, len + 1);
    sn->log_len += len + 1;
    sn->log_n++;
}

/* Brings spare up to date with the table (which has the newest write
 * already): 0, or -1 if jansson ran out of memory (spare is then wrong). */
static int spare_replay(struct table *t)
{
    struct snaps *sn = &t->sn;
    for (size_t off = 0; off < sn->log_len;) {
        const char *key = sn->log + off;
        size_t len = strlen(key);
        off += len + 1;
        const struct slot *s = find(t, key, len, hash_key(key, len));
        if (s->len && s->item) {
            if (json_object_setn_nocheck(sn->spare, key, len, s->item) != 0)
                return -1;
        } else {
            json_object_deln(sn->spare, key, len);
        }
    }
    return 0;
}

/* A shallow copy of snap, or NULL (jansson's copy skips the pairs it had no
 * memory for: a short copy is no copy). */
static json_t *snap_copy(const json_t *snap)
{
    json_t *copy = json_copy((json_t *)snap);
    if (copy && json_object_size(copy) != json_object_size(snap)) {
        json_decref(copy);
        copy = NULL;
    }
    return copy;
}

/* True if the store holds the only reference to `json`. Readers may drop
 * theirs on other threads (jansson counts atomically), hence the atomic
 * load; acquire: what they did before dropping it is done. */
static bool sole(json_t *json)
{
    return __atomic_load_n(&json->refcount, __ATOMIC_ACQUIRE) == 1;
}

/* Keeps the snapshots of all in step with a write under `key` of `item`
 * (NULL: a tombstone); see struct snaps. Without memory, the snapshots are
 * dropped and the next all builds one from the table. */
static void snap_write(struct table *t, const char *key, size_t len, json_t *item)
{
    struct snaps *sn = &t->sn;
    if (!sn->snap)
        return;
    if (!sole(sn->snap)) { /* a reader holds snap */
        json_t *next;
        if (sn->spare && sole(sn->spare) && spare_replay(t) == 0) {
            next = sn->spare;
        } else {
            json_decref(sn->spare);
            next = snap_copy(sn->snap);
        }
        sn->spare = sn->snap; /* ours: a spare once its reader lets go */
        sn->snap = next;
        sn->log_len = sn->log_n = 0;
        if (!next) {
            snaps_drop(sn);
            return;
        }
    }
    int rc = item ? json_object_setn_nocheck(sn->snap, key, len, item)
                  : (json_object_deln(sn->snap, key, len), 0);
    if (rc != 0) {
        snaps_drop(sn);
        return;
    }
    spare_log(sn, key, len);
}

/* Stores `item` (borrowed; NULL or info->deleted: a tombstone) under
 * info->key if info->version is newer than what is stored, by the version
 * rule of store.h (`len` and `hash` are the key's). Returns 1 if applied (*old_out: the item
 * replaced, or NULL, for the caller to let go of), 0 if not, LD_ENOMEM, or LD_EINVAL for a key of 4
 * GiB or more. */
static int put(struct table *t, json_t *item, const struct ld_item_info *info, size_t len,
               uint64_t hash, json_t **old_out)
{
    if (len >= UINT32_MAX)
        return LD_EINVAL; /* a slot holds 32 bits of length */
    struct slot *s = find(t, info->key, len, hash);
    if (s->len && s->version >= info->version)
        return 0;
    if (!s->len) {
        if (table_grow(t) != 0)
            return LD_ENOMEM;
        s = find(t, info->key, len, hash);
        if (slot_set_key(s, info->key, len, hash) != 0)
            return LD_ENOMEM;
        t->used++;
    }
    json_t *old = s->item;
    s->item = info->deleted ? NULL : json_incref(item);
    s->version = info->version;
    snap_write(t, slot_key(s), len, s->item);
    *old_out = old;
    return 1;
}

/* The live item under `key`, or NULL. */
static json_t *lookup(struct memory *mem, const ld_kind *kind, const char *key, size_t len)
{
    if (len >= UINT32_MAX)
        return NULL;
    return find(&mem->t[kind_index(kind)], key, len, hash_key(key, len))->item;
}

static ld_future *mem_get_now(void *impl, struct event_base *base, const ld_kind *kind,
                              const char *key, size_t len)
{
    struct memory *mem = impl;
    json_t *item = lookup(mem, kind, key, len);
    if (!item)
        return ld__future_later_json(base, NULL, NULL);
    struct gen *g = mem->cur;
    if (g->n == GEN_ITEMS || g->bin.n || (!g->shared && ld__future_threads()))
        g = gen_turn(mem);
    if (!g) /* no memory for a new generation */
        return ld__future_later_json(base, item_ref(item), NULL);
    g->items[g->n++] = item;
    gen_add(g);
    return ld__future_later_json(base, item, &g->lease);
}

static void mem_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    ld_future_fulfill_json(out, item_ref(lookup(impl, kind, key, strlen(key))));
    ld_future_unref(out);
}

static json_t *snapshot_of(const struct table *t)
{
    json_t *snap = json_object();
    for (size_t i = 0; snap && i <= t->mask; i++) {
        const struct slot *s = &t->slots[i];
        if (s->item && json_object_setn_nocheck(snap, slot_key(s), s->len, s->item) != 0) {
            json_decref(snap);
            return NULL;
        }
    }
    return snap;
}

static void mem_all(void *impl, const ld_kind *kind, ld_future *out)
{
    struct table *t = &((struct memory *)impl)->t[kind_index(kind)];
    if (!t->sn.snap)
        t->sn.snap = snapshot_of(t);
    if (t->sn.snap)
        ld_future_fulfill_json(out, json_incref(t->sn.snap));
    else
        ld_future_reject(out, LD_ENOMEM, NULL);
    ld_future_unref(out);
}

static ld_future *mem_all_now(void *impl, struct event_base *base, const ld_kind *kind)
{
    struct table *t = &((struct memory *)impl)->t[kind_index(kind)];
    if (!t->sn.snap)
        t->sn.snap = snapshot_of(t);
    return t->sn.snap ? ld__future_later_json(base, json_incref(t->sn.snap), NULL) : NULL;
}

static void complete_write(ld_future *out, int rc)
{
    if (rc < 0)
        ld_future_reject(out, rc, NULL);
    else
        ld_future_fulfill_bool(out, rc == 1);
    ld_future_unref(out);
}

/* Writes `item` (NULL: a tombstone) and lets go of what it replaced. */
static int store_item(struct memory *mem, const ld_kind *kind, const json_t *item,
                      const struct ld_item_info *info, size_t len, uint64_t hash)
{
    json_t *old = NULL;
    int rc = put(&mem->t[kind_index(kind)], (json_t *)item, info, len, hash, &old);
    if (old)
        retire(mem, (struct garbage){old, NULL, 0}, 1);
    return rc;
}

static int store_hashing(struct memory *mem, const ld_kind *kind, const json_t *item,
                         const struct ld_item_info *info)
{
    size_t len = strlen(info->key);
    return store_item(mem, kind, item, info, len, hash_key(info->key, len));
}

/* The synchronous upsert: the front layer has just called mem_prefetch()
 * with this item's key (same call, same string), so its hash is known. */
static int mem_upsert_now(void *impl, const ld_kind *kind, const json_t *item,
                          const struct ld_item_info *info)
{
    struct memory *mem = impl;
    const char *hinted = mem->hint_key;
    mem->hint_key = NULL;
    if (hinted != info->key)
        return store_hashing(mem, kind, item, info);
    return store_item(mem, kind, item, info, mem->hint_len, mem->hint_hash);
}

static void mem_upsert(void *impl, const ld_kind *kind, const json_t *item,
                       const struct ld_item_info *info, ld_future *out)
{
    complete_write(out, store_hashing(impl, kind, item, info));
}

static int mem_del_now(void *impl, const ld_kind *kind, const char *key, int64_t version)
{
    struct ld_item_info info = {key, version, true};
    return store_hashing(impl, kind, NULL, &info);
}

static void mem_del(void *impl, const ld_kind *kind, const char *key, int64_t version,
                    ld_future *out)
{
    complete_write(out, mem_del_now(impl, kind, key, version));
}

static int visit_put(void *arg, const ld_kind *kind, json_t *item, const struct ld_item_info *info)
{
    struct table *fresh = arg;
    json_t *old = NULL; /* none: a new table, and keys of an object are unique */
    size_t len = strlen(info->key);
    int rc = put(&fresh[kind_index(kind)], item, info, len, hash_key(info->key, len), &old) < 0
                 ? LD_ENOMEM
                 : 0;
    json_decref(old);
    return rc;
}

/* Validates and loads `all_data` in one pass (each item read once) into new
 * tables, and swaps them in only if all of it was valid: 0, LD_EINVAL (*why
 * says why), LD_ENOMEM. */
static int mem_init_now(void *impl, const json_t *all_data, const char **why)
{
    struct memory *mem = impl;
    struct table fresh[NKINDS] = {{0}};
    int rc = 0;
    for (int i = 0; i < NKINDS && rc == 0; i++) {
        const json_t *coll = json_object_get(all_data, ld_kind_namespace(kind_at(i)));
        rc = table_init(&fresh[i], json_object_size(coll));
    }
    if (rc == 0)
        rc = ld__data_walk(all_data, visit_put, fresh, why);
    for (int i = 0; i < NKINDS; i++) {
        if (rc == 0) {
            table_retire(mem, &mem->t[i]);
            mem->t[i] = fresh[i];
        } else {
            table_free(&fresh[i]);
        }
    }
    if (rc == 0)
        mem->inited = 1;
    return rc;
}

static void mem_init(void *impl, const json_t *all_data, ld_future *out)
{
    int rc = mem_init_now(impl, all_data, NULL);
    if (rc == 0)
        ld_future_fulfill(out);
    else
        ld_future_reject(out, rc, NULL);
    ld_future_unref(out);
}

static void mem_initialized(void *impl, ld_future *out)
{
    ld_future_fulfill_bool(out, ((struct memory *)impl)->inited);
    ld_future_unref(out);
}

static void mem_free(void *impl)
{
    struct memory *mem = impl;
    for (int i = 0; i < NKINDS; i++)
        table_retire(mem, &mem->t[i]);
    seal_all(mem); /* leases out keep their own items from now on */
    bin_empty(&mem->loose);
    ld__free(mem->loose.v);
    ld__free(mem->old.v);
    while (mem->narrays)
        ld__free(mem->arrays[--mem->narrays].v);
    if (mem->flush)
        event_free(mem->flush);
    while (mem->nspares)
        gen_free(mem->spares[--mem->nspares]);
    gen_release(&mem->cur->lease); /* or with its last lease */
    ld__free(mem);
}

static const char *mem_describe(void *impl)
{
    (void)impl;
    return "memory";
}

static const struct ld_store_ops memory_ops = {
    .version = LD_STORE_OPS_VERSION,
    .get = mem_get,
    .all = mem_all,
    .init = mem_init,
    .upsert = mem_upsert,
    .del = mem_del,
    .initialized = mem_initialized,
    .close = NULL, /* nothing to release before free */
    .free = mem_free,
    .describe = mem_describe,
};

/* Hashes the key (kept for mem_upsert_now) and prefetches its home slot. */
static void mem_prefetch(void *impl, const ld_kind *kind, const char *key, size_t len)
{
    struct memory *mem = impl;
    struct table *t = &mem->t[kind_index(kind)];
    mem->hint_key = NULL;
    if (len >= UINT32_MAX)
        return;
    mem->hint_key = key;
    mem->hint_len = len;
    mem->hint_hash = hash_key(key, len);
    __builtin_prefetch(&t->slots[mem->hint_hash & t->mask], 1);
}

static const struct ld__store_sync_ops memory_sync_ops = {
    .prefetch = mem_prefetch,
    .get = mem_get_now,
    .all = mem_all_now,
    .init = mem_init_now,
    .upsert = mem_upsert_now,
    .del = mem_del_now,
};

ld_store *ld_memory_store_new(struct event_base *base)
{
    if (!base)
        return NULL;
    struct memory *mem = ld__calloc(1, sizeof(*mem));
    if (!mem)
        return NULL;
    mem->cur = gen_new();
    mem->old.limit = OLD_MIN;
    if (!mem->cur) {
        ld__free(mem);
        return NULL;
    }
    mem->flush = event_new(base, -1, 0, on_flush, mem);
    int ok = mem->flush != NULL;
    for (int i = 0; i < NKINDS; i++)
        ok = table_init(&mem->t[i], 0) == 0 && ok;
    ld_store *s = ok ? ld__store_new_sync(base, &memory_ops, &memory_sync_ops, mem) : NULL;
    if (!s)
        mem_free(mem); /* the front layer did not take it */
    return s;
}
