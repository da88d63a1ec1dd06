/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the caching store (store.h, ld_caching_store_new()), a wrapper
 * of any store as LaunchDarkly's SDKs wrap a persistent store (Go's
 * persistent data store wrapper, Python's caching wrapper).
 *
 * What it holds:
 *   - per-item entries, kind + key -> the item, a tombstone or a remembered
 *     miss, each with its expiry, in a hash table with an LRU list: at most
 *     `cap` entries, the least recently used one goes first (an expired one
 *     goes when it is met);
 *   - per kind, `full`: the whole kind as an init gave it, kept up to date
 *     by the writes made since (key -> item or tombstone, private and
 *     mutable), with the init's expiry; while it is fresh it answers every
 *     get of the kind, a missing key included, and `all`;
 *   - per kind, `all`: the answer of the last all (immutable once handed
 *     out), with its expiry;
 *   - `inited`, once the inner store said true (or an init went through).
 *
 * Consistency: the inner store completes its futures in issue order, so
 * when the result of an inner operation comes back, every write issued
 * before it has come back too, and none issued after it: a read's result
 * may be cached as it is. A write takes effect on the cache when its result
 * comes back, so while a write of an item is under way (its entry's
 * `writing`), or of its kind (the kind's `writing`: for all), or an init
 * (`initing`), the cache may be behind what was issued: those reads then go
 * to the inner store, which orders them after the write. An entry with a
 * write under way stays (neither evicted nor flushed) until it came back. A
 * get that finds the same key's inner get under way shares it, unless a
 * write was issued since it was (`wseq`).
 *
 * Availability: see store.h. `self` is the caching store's own handle, for
 * its status; ld_store_free() tells the cache first (ld__store_on_free), as
 * the front may free the implementation only later, from the loop.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include <ldasync/error.h>
#include <ldasync/store.h>

#include "core/core-internal.h"
#include "store/store-internal.h"

#define NK 2 /* the kinds: 0 segments, 1 features */

#define DEFAULT_CAP 65536
#define DEFAULT_POLL_MS 500
#define DEFAULT_CHECK_MS 5000
#define FOREVER INT64_MAX /* the expiry of what never expires */

static const char E_NOMEM[] = "out of memory";

static int kidx(const ld_kind *kind)
{
    return kind == ld_kind_features() ? 1 : 0;
}

static const ld_kind *kind_of(int k)
{
    return k == 1 ? ld_kind_features() : ld_kind_segments();
}

/* An entry is allocated at a cache line, what a hit reads first and the key
 * right after it: a hit on a key of up to 19 bytes reads one line (the
 * fields were spread over two or three, and each line is a cache miss at
 * thousands of entries). What only the cache's upkeep reads (`struct
 * cold`) follows the key. */
struct entry {
    uint64_t hash;
    struct entry *hnext; /* the bucket's chain */
    json_t *item;        /* the item or a tombstone (a reference); NULL: missing */
    int64_t expires;     /* ns of the coarse monotonic clock; FOREVER */
    uint32_t len;
    uint32_t writing; /* its upserts and deletes under way: it stays */
    uint8_t k;
    bool has_value; /* false while only its inner get or a write is under way */
    bool deleted;   /* `item` is a tombstone (read once, when set) */
    bool used;      /* read since it last met the eviction (its second chance) */
    char key[];
};

struct cold {
    struct entry *prev, *next; /* the LRU list: least recently used first */
    ld_future *flight;         /* that inner get (a reference), or NULL */
    uint64_t flight_seq;       /* wseq when it was issued */
};

/* Where an entry's cold part is, after its key and NUL. */
static size_t cold_at(size_t len)
{
    size_t n = offsetof(struct entry, key) + len + 1;
    return (n + _Alignof(struct cold) - 1) & ~(_Alignof(struct cold) - 1);
}

static struct cold *cold(const struct entry *e)
{
    return (struct cold *)(void *)((char *)e + cold_at(e->len));
}

struct kcache {
    json_t *full; /* key -> item or tombstone: the whole kind; NULL: unknown */
    int64_t full_expires;
    json_t *all; /* the answer of all (a reference), or NULL */
    int64_t all_expires;
    unsigned writing;      /* its upserts and deletes under way */
    ld_future *all_flight; /* the inner all under way (a reference), or NULL */
    uint64_t all_flight_seq;
};

struct cache {
    ld_store *self;  /* the caching store; NULL once it is being freed */
    ld_store *inner; /* owned */
    struct event_base *base;
    int64_t ttl;   /* ms: > 0, 0 (no caching) or < 0 (forever) */
    unsigned refs; /* the store's (until freed) + one per inner operation */
    bool dead;     /* the store is being freed: nothing more is done */
    bool closed;
    /* the per-item entries */
    struct entry **buckets;
    size_t nbuckets; /* a power of two */
    size_t n, cap;
    struct entry *lru, *mru;
    struct kcache kc[NK];
    bool inited;
    uint64_t wseq;     /* writes issued */
    unsigned initing;  /* inits under way */
    unsigned unpinned; /* writes under way whose entry could not be made */
    /* availability (store.h) */
    bool inner_down;   /* the inner store says it is unavailable */
    bool failing;      /* an inner operation failed: polling */
    bool recovering;   /* the write-back is under way */
    uint64_t dirty;    /* forever: writes the inner store missed (a count); 0: none */
    uint64_t wb_dirty; /* what `dirty` was when the write-back's data was taken */
    struct event *poll_ev;
    int64_t poll_ms;
    /* forever, with a whole data set: whether the inner store still holds
     * one (FLUSHALL, a Redis restarted empty without the connection
     * noticing): asked every check_ms, written back when it does not */
    struct event *check_ev;
    int64_t check_ms;
    char *describe;
    /* what get_now lends (see lend()): items let go of while a lease may
     * read them wait for it (the memory store's reclamation) */
    struct reclaim rc;
    bool rc_live; /* rc was made and not yet finished */
};

/* ---- time, references --------------------------------------------------- */

/* The coarse clock in ns (a few ms a tick, a few ns a read: it is read on
 * every hit of a cache with a ttl). */
static int64_t now_coarse(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return ld__now_ns();
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t deadline(const struct cache *c)
{
    if (c->ttl < 0 || c->ttl > INT64_MAX / 1000000)
        return FOREVER;
    int64_t now = now_coarse(), ttl = c->ttl * 1000000;
    return ttl > INT64_MAX - now ? FOREVER : now + ttl;
}

static bool fresh(int64_t expires)
{
    return expires == FOREVER || now_coarse() < expires;
}

static json_t *jref(json_t *j)
{
    return j ? ld__json_incref(j) : NULL;
}

/* Lets go of the cache's reference to `j`, which weighs `w` (the items
 * it keeps alive: 1 for an item or a tombstone, one more than its members
 * for a kind's object of them): every reference the cache holds goes this
 * way, since a result of get_now may read what it held without a
 * reference of its own (lend()). The weight bounds what waits for such
 * results: a kind's object of thousands of items counted as one item kept
 * the objects of 256 inits or writes alive for a result held meanwhile. */
static void drop_w(struct cache *c, json_t *j, size_t w, bool members)
{
    if (!j)
        return;
    if (c->rc_live)
        ld__mem_retire(&c->rc, (struct garbage){j, NULL, 0, members}, w);
    else
        ld__json_decref(j);
}

/* drop_w() of an item or a tombstone. */
static void drop(struct cache *c, json_t *j)
{
    drop_w(c, j, 1, false);
}

/* drop_w() of a kind's object of items: its members go one by one, with
 * an acquiring decrement (a lent item's last other reference may have gone
 * on another thread; jansson's json_delete() does not acquire). */
static void drop_obj(struct cache *c, json_t *obj)
{
    drop_w(c, obj, obj ? 1 + json_object_size(obj) : 0, true);
}

static void cache_unref(struct cache *c)
{
    if (--c->refs == 0)
        ld__free(c);
}

/* ---- the per-item entries ----------------------------------------------- */

/* Both kinds' entries are in one table: the kind is the low bit. */
static uint64_t hash_of(int k, const char *key, size_t len)
{
    return ld__key_hash(key, len) ^ (uint64_t)k;
}

static inline struct entry *find(struct cache *c, int k, const char *key, size_t len)
{
    uint64_t h = hash_of(k, key, len);
    for (struct entry *e = c->buckets[h & (c->nbuckets - 1)]; e; e = e->hnext)
        if (e->hash == h && e->k == k && e->len == len && ld__key_eq(e->key, key, len))
            return e;
    return NULL;
}

static void lru_unlink(struct cache *c, struct entry *e)
{
    struct cold *x = cold(e);
    if (x->prev)
        cold(x->prev)->next = x->next;
    else
        c->lru = x->next;
    if (x->next)
        cold(x->next)->prev = x->prev;
    else
        c->mru = x->prev;
}

static void lru_append(struct cache *c, struct entry *e)
{
    struct cold *x = cold(e);
    x->next = NULL;
    x->prev = c->mru;
    if (c->mru)
        cold(c->mru)->next = e;
    else
        c->lru = e;
    c->mru = e;
}

static void touch(struct cache *c, struct entry *e)
{
    if (c->mru != e) {
        lru_unlink(c, e);
        lru_append(c, e);
    }
}

static void entry_remove(struct cache *c, struct entry *e)
{
    struct entry **link = &c->buckets[e->hash & (c->nbuckets - 1)];
    while (*link != e)
        link = &(*link)->hnext;
    *link = e->hnext;
    lru_unlink(c, e);
    c->n--;
    drop(c, e->item);
    ld_future_unref(cold(e)->flight);
    ld__aligned_free(e);
}

/* Removes every entry; with `keep_writing`, those with a write under way
 * stay, without their value. */
static void entries_clear(struct cache *c, bool keep_writing)
{
    struct entry *e = c->lru, *next;
    for (; e; e = next) {
        next = cold(e)->next;
        if (keep_writing && e->writing) {
            drop(c, e->item);
            e->item = NULL;
            e->deleted = false;
            e->has_value = false;
        } else {
            entry_remove(c, e);
        }
    }
}

/* Doubles the buckets when the entries outnumber them (up to the capacity);
 * without memory, the chains just get longer. */
static void maybe_grow(struct cache *c)
{
    if (c->n <= c->nbuckets || c->nbuckets >= c->cap)
        return;
    size_t nb = c->nbuckets * 2;
    struct entry **b = ld__calloc(nb, sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < c->nbuckets; i++) {
        struct entry *e = c->buckets[i], *next;
        for (; e; e = next) {
            next = e->hnext;
            e->hnext = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    }
    ld__free(c->buckets);
    c->buckets = b;
    c->nbuckets = nb;
}

/* The entry of kind `k` and `key`, made (without a value) if there is none,
 * the least recently used ones going while there are more than `cap`.
 * NULL without memory. */
static struct entry *find_or_add(struct cache *c, int k, const char *key, size_t len)
{
    struct entry *e = find(c, k, key, len);
    if (e)
        return e;
    if (len > UINT32_MAX || len > SIZE_MAX - sizeof(struct cold) - LD__CACHE_LINE)
        return NULL;
    size_t size = cold_at(len) + sizeof(struct cold);
    e = ld__aligned_alloc(LD__CACHE_LINE, size);
    if (!e)
        return NULL;
    memset(e, 0, size);
    e->hash = hash_of(k, key, len);
    e->k = (uint8_t)k;
    e->len = (uint32_t)len;
    memcpy(e->key, key, len);
    /* the least recently used entries go, but not those a write waits for
     * (at most one per write under way); one read since it was last met
     * here moves an entry to the back instead, once (a hit only marks its
     * entry: moving it in the list would write to two more) */
    struct entry *old = c->lru, *next;
    size_t seen = 0, n0 = c->n;
    for (; old && c->n >= c->cap && seen < 2 * n0; old = next, seen++) {
        next = cold(old)->next;
        if (old->used && seen < n0) {
            old->used = false;
            touch(c, old);
            if (!next)
                next = c->lru == old ? NULL : c->lru;
        } else if (!old->writing) {
            entry_remove(c, old);
        }
    }
    struct entry **head = &c->buckets[e->hash & (c->nbuckets - 1)];
    e->hnext = *head;
    *head = e;
    lru_append(c, e);
    c->n++;
    maybe_grow(c);
    return e;
}

static void entry_set(struct cache *c, struct entry *e, json_t *item)
{
    drop(c, e->item);
    e->item = jref(item);
    e->deleted = item && ld_item_is_deleted(item);
    e->has_value = true;
    e->expires = deadline(c);
    touch(c, e);
}

/* Drops the value of `e` (and `e`, unless its inner get or a write is
 * under way). */
static void entry_drop(struct cache *c, struct entry *e)
{
    if (cold(e)->flight || e->writing) {
        drop(c, e->item);
        e->item = NULL;
        e->deleted = false;
        e->has_value = false;
    } else {
        entry_remove(c, e);
    }
}

/* ---- the kinds ---------------------------------------------------------- */

static void all_drop(struct cache *c, struct kcache *kc)
{
    drop_obj(c, kc->all);
    kc->all = NULL;
}

static void full_drop(struct cache *c, struct kcache *kc)
{
    drop_obj(c, kc->full);
    kc->full = NULL;
    all_drop(c, kc); /* it may have been made from full */
}

static bool full_fresh(const struct kcache *kc)
{
    return kc->full && fresh(kc->full_expires);
}

/* A copy of an object of items (sharing them), without tombstones when
 * `live`; NULL without memory. */
static json_t *items_copy(const json_t *obj, bool live)
{
    json_t *copy = json_object();
    const char *key;
    size_t len;
    json_t *v;
    if (!copy)
        return NULL;
    json_object_keylen_foreach((json_t *)obj, key, len, v)
    {
        if (live && ld_item_is_deleted(v))
            continue;
        if (json_object_setn_new_nocheck(copy, key, len, ld__json_incref(v)) != 0) {
            ld__json_decref(copy);
            return NULL;
        }
    }
    return copy;
}

/* Forgets what the cache holds of the data (not `inited`). */
static void cache_flush(struct cache *c)
{
    entries_clear(c, true);
    for (int k = 0; k < NK; k++)
        full_drop(c, &c->kc[k]);
}

/* The data set `data` (valid) becomes what the cache holds. Without memory
 * for a kind, that kind is left unknown (read from the inner store). */
static void cache_replace(struct cache *c, const json_t *data)
{
    cache_flush(c);
    if (c->ttl == 0)
        return;
    for (int k = 0; k < NK; k++) {
        const json_t *items = json_object_get(data, ld_kind_namespace(kind_of(k)));
        struct kcache *kc = &c->kc[k];
        kc->full = items ? items_copy(items, false) : json_object();
        kc->full_expires = deadline(c);
    }
}

/* The version the cache knows of `key`, or -1 if it knows none; *known
 * says whether it knows for sure (a fresh `full` knows of missing keys). */
static int64_t cached_version(struct cache *c, int k, const char *key, size_t len, bool *known)
{
    struct entry *e = find(c, k, key, len);
    *known = false;
    if (e && e->has_value && fresh(e->expires)) {
        *known = true;
        return e->item ? ld_item_version(e->item) : -1;
    }
    if (full_fresh(&c->kc[k])) {
        *known = true;
        json_t *it = json_object_getn(c->kc[k].full, key, len);
        return it ? ld_item_version(it) : -1;
    }
    return -1;
}

/* An item (or tombstone) written to the inner store: the cache holds it. */
static void cache_put(struct cache *c, int k, const char *key, json_t *item)
{
    size_t len = strlen(key);
    struct kcache *kc = &c->kc[k];
    all_drop(c, kc);
    if (c->ttl == 0)
        return;
    if (kc->full && full_fresh(kc)) {
        /* the item it replaces in `full` may be lent (lend()): it goes
         * through drop(), not jansson's release of it */
        json_t *was = json_object_getn(kc->full, key, len);
        if (was)
            drop(c, ld__json_incref(was));
        if (json_object_setn_new(kc->full, key, len, ld__json_incref(item)) != 0)
            full_drop(c, kc); /* no memory */
    } else if (kc->full) {
        full_drop(c, kc); /* expired */
    }
    struct entry *e = find(c, k, key, len);
    if (!e && !kc->full)
        e = find_or_add(c, k, key, len);
    if (e)
        entry_set(c, e, item);
}

/* Forgets `key` of kind `k` (so that a read goes to the inner store). */
static void cache_forget(struct cache *c, int k, const char *key)
{
    size_t len = strlen(key);
    struct entry *e = find(c, k, key, len);
    if (e)
        entry_drop(c, e);
    full_drop(c, &c->kc[k]);
}

/* ---- answers from the cache --------------------------------------------- */

/* lookup() past a hit: `e` is find()'s answer (NULL, or not a fresh value
 * that no write is changing). */
static int lookup_rest(struct cache *c, int k, const char *key, size_t len, struct entry *e,
                       json_t **item, bool any)
{
    json_t *it;
    if (!any && e && e->writing)
        return LD_EBUSY;
    if (e && e->has_value) {
        if (fresh(e->expires)) {
            e->used = true;
            *item = e->deleted ? NULL : e->item;
            return 0;
        }
        entry_drop(c, e);
    }
    struct kcache *kc = &c->kc[k];
    if (kc->full && !full_fresh(kc))
        full_drop(c, kc);
    if (kc->full) {
        it = json_object_getn(kc->full, key, len);
        *item = it && !ld_item_is_deleted(it) ? it : NULL;
        /* kept as an entry of its own (a miss too), until the whole kind
         * expires: the next get of the key is one lookup in the cache's
         * table, not in jansson's object of the kind (several times
         * slower at thousands of items) */
        if (!any) {
            struct entry *ne = find_or_add(c, k, key, len);
            if (ne && !ne->writing && !cold(ne)->flight) {
                entry_set(c, ne, it);
                ne->expires = kc->full_expires;
            }
        }
        return 0;
    }
    return LD_EBUSY;
}

/* The cache's answer to a get: 0 with *item borrowed (NULL: missing or a
 * tombstone), or LD_EBUSY when it has none, or may be behind a write under
 * way (unless `any`: then what it holds counts). A hit is inline: a hash,
 * an entry and the clock. */
static inline int lookup(struct cache *c, int k, const char *key, size_t len, json_t **item,
                         bool any)
{
    if (c->ttl == 0 || c->dead || (!any && (c->initing || c->unpinned)))
        return LD_EBUSY;
    struct entry *e = find(c, k, key, len);
    if (e && e->has_value && !e->writing && fresh(e->expires)) {
        e->used = true;
        *item = e->deleted ? NULL : e->item;
        return 0;
    }
    return lookup_rest(c, k, key, len, e, item, any);
}

/* The cache's answer to an all, as lookup() answers a get: 0 with *all
 * borrowed; LD_ENOMEM. */
static int all_lookup(struct cache *c, int k, json_t **all, bool any)
{
    struct kcache *kc = &c->kc[k];
    if (c->ttl == 0 || c->dead || (!any && (c->initing || c->unpinned || kc->writing)))
        return LD_EBUSY;
    if (kc->all && fresh(kc->all_expires)) {
        *all = kc->all;
        return 0;
    }
    all_drop(c, kc);
    if (kc->full && !full_fresh(kc))
        full_drop(c, kc);
    if (!kc->full)
        return LD_EBUSY;
    if (!(kc->all = items_copy(kc->full, true)))
        return LD_ENOMEM;
    kc->all_expires = kc->full_expires;
    *all = kc->all;
    return 0;
}

/* ---- availability ------------------------------------------------------- */

/* A failure of the inner store's backend, not of the request. */
static bool store_error(int code)
{
    return code < 0 && code != LD_EINVAL && code != LD_ECLOSED && code != LD_ECANCELED &&
           code != LD_ENOMEM;
}

static void set_status(struct cache *c, bool available, bool needs_refresh)
{
    if (!c->dead)
        ld_store_update_status(c->self, available, needs_refresh);
}

static void poll_later(struct cache *c)
{
    struct timeval tv = {(time_t)(c->poll_ms / 1000), (suseconds_t)(c->poll_ms % 1000 * 1000)};
    if (!c->dead && !c->closed)
        evtimer_add(c->poll_ev, &tv);
}

/* An inner operation failed with `code`: a backend failure makes the cache
 * unavailable, and polls the inner store until it answers. */
static void note_result(struct cache *c, int code)
{
    if (c->dead || !store_error(code) || c->failing || c->inner_down)
        return;
    c->failing = true;
    set_status(c, false, false);
    poll_later(c);
}

static void written_back(ld_future *f, void *arg)
{
    struct cache *c = arg;
    if (!c->dead) {
        int code = ld_future_error(f);
        c->recovering = false;
        if (code == 0 && c->dirty == c->wb_dirty)
            c->dirty = 0; /* no write failed since the data was taken */
        if (c->failing || c->inner_down)
            ; /* failed again meanwhile: the next recovery writes back */
        else if (code == 0)
            set_status(c, true, false);
        else if (store_error(code))
            note_result(c, code);
        else
            set_status(c, true, true); /* no memory for it: ask for the data */
    }
    cache_unref(c);
}

/* The inner store is back. Forever: the data set the cache holds is
 * written back (when it holds one: an init's), then available; otherwise
 * available with needs_refresh, and a cache with a ttl forgets what it
 * held. */
static void recover(struct cache *c)
{
    if (c->dead || c->recovering)
        return;
    bool whole = c->kc[0].full && c->kc[1].full;
    if (c->ttl >= 0 || !whole) {
        if (c->ttl >= 0)
            cache_flush(c);
        set_status(c, true, true);
        return;
    }
    if (c->initing || c->unpinned || c->kc[0].writing || c->kc[1].writing) {
        /* writes under way reach the inner store before the write-back's
         * init, which would undo them (its data has not got them yet): the
         * next poll tries again */
        c->failing = true;
        poll_later(c);
        return;
    }
    json_t *data = json_object();
    for (int k = 0; data && k < NK; k++) {
        json_t *items = items_copy(c->kc[k].full, false);
        if (!items || json_object_set_new(data, ld_kind_namespace(kind_of(k)), items) != 0) {
            ld__json_decref(data);
            data = NULL;
        }
    }
    if (!data) {
        set_status(c, true, true);
        return;
    }
    c->recovering = true;
    c->wb_dirty = c->dirty;
    c->refs++;
    if (ld_future_on_complete(ld_store_init(c->inner, data), written_back, c) != 0) {
        c->recovering = false;
        cache_unref(c);
        set_status(c, true, true);
    }
    ld__json_decref(data);
}

static void check_later(struct cache *c);

static void checked(ld_future *f, void *arg)
{
    struct cache *c = arg;
    if (!c->dead) {
        if (ld_future_is_rejected(f))
            note_result(c, ld_future_error(f)); /* a backend failure: the poll takes over */
        else if (!ld_future_bool(f) && !c->failing && !c->inner_down)
            recover(c); /* it lost its data set: the write-back */
        check_later(c);
    }
    cache_unref(c);
}

static void check_fire(evutil_socket_t fd, short what, void *arg)
{
    struct cache *c = arg;
    (void)fd;
    (void)what;
    if (c->dead || c->closed)
        return;
    if (c->ttl >= 0 || !(c->kc[0].full && c->kc[1].full) || c->failing || c->inner_down ||
        c->recovering || c->initing) {
        check_later(c);
        return;
    }
    c->refs++;
    if (ld_future_on_complete(ld_store_initialized(c->inner), checked, c) != 0) {
        cache_unref(c);
        check_later(c);
    }
}

static void check_later(struct cache *c)
{
    struct timeval tv = {(time_t)(c->check_ms / 1000), (suseconds_t)(c->check_ms % 1000 * 1000)};
    if (!c->dead && !c->closed && c->ttl < 0 && c->check_ms > 0)
        evtimer_add(c->check_ev, &tv);
}

static void polled(ld_future *f, void *arg)
{
    struct cache *c = arg;
    if (!c->dead && c->failing) {
        if (ld_future_is_fulfilled(f) && !c->recovering) {
            c->failing = false;
            if (!c->inner_down)
                recover(c);
        } else { /* still failing, or the last write-back still under way */
            poll_later(c);
        }
    }
    cache_unref(c);
}

static void poll_fire(evutil_socket_t fd, short what, void *arg)
{
    struct cache *c = arg;
    (void)fd;
    (void)what;
    if (c->dead || c->closed || !c->failing)
        return;
    c->refs++;
    if (ld_future_on_complete(ld_store_initialized(c->inner), polled, c) != 0) {
        cache_unref(c);
        poll_later(c);
    }
}

static void inner_status(ld_store *inner, const ld_store_status *st, void *arg)
{
    struct cache *c = arg;
    (void)inner;
    if (c->dead)
        return;
    if (!st->available) {
        c->inner_down = true;
        c->failing = false;
        evtimer_del(c->poll_ev);
        set_status(c, false, false);
    } else if (c->inner_down || c->failing) { /* back (not a change of needs_refresh alone) */
        c->inner_down = false;
        c->failing = false;
        evtimer_del(c->poll_ev);
        recover(c);
    }
}

/* ---- operations under way ----------------------------------------------- */

enum op_type { OP_GET, OP_ALL, OP_INIT, OP_UPSERT, OP_DEL, OP_INITIALIZED };

struct op {
    struct cache *c;
    enum op_type type;
    int k;
    ld_future *out;    /* the front's future, owned */
    json_t *item;      /* upsert: the item; init: the data (references) */
    int64_t version;   /* upsert, del */
    ld_future *flight; /* get, all: the inner future it shares, if it is the first */
    bool pinned;       /* upsert, del: its entry counts it in `writing` */
    char key[];        /* get, upsert, del */
};

static struct op *op_new(struct cache *c, enum op_type type, int k, const char *key, ld_future *out)
{
    size_t len = key ? strlen(key) : 0;
    struct op *op = ld__malloc(sizeof(*op) + len + 1);
    if (!op) {
        ld_future_reject(out, LD_ENOMEM, E_NOMEM);
        ld_future_unref(out);
        return NULL;
    }
    op->c = c;
    op->type = type;
    op->k = k;
    op->out = out;
    op->item = NULL;
    op->version = 0;
    op->flight = NULL;
    op->pinned = false;
    memcpy(op->key, key ? key : "", len + 1);
    c->refs++;
    return op;
}

static void op_free(struct op *op)
{
    struct cache *c = op->c;
    ld__json_decref(op->item);
    ld_future_unref(op->out);
    ld_future_unref(op->flight);
    ld__free(op);
    cache_unref(c);
}

/* A write is issued: the reads it may change wait for it (lookup()). */
static void write_begin(struct cache *c, struct op *op)
{
    c->wseq++;
    if (op->type == OP_INIT) {
        c->initing++;
        return;
    }
    if (c->ttl == 0)
        return;
    c->kc[op->k].writing++;
    struct entry *e = find_or_add(c, op->k, op->key, strlen(op->key));
    if (e) {
        e->writing++;
        op->pinned = true;
    } else {
        c->unpinned++; /* every get waits */
    }
}

/* The write came back (before the cache takes what it did). */
static void write_end(struct cache *c, struct op *op)
{
    if (op->type == OP_INIT) {
        c->initing--;
        return;
    }
    if (c->ttl == 0)
        return;
    c->kc[op->k].writing--;
    if (!op->pinned) {
        c->unpinned--;
        return;
    }
    struct entry *e = find(c, op->k, op->key, strlen(op->key)); /* it stayed */
    if (--e->writing == 0 && !e->has_value && !cold(e)->flight)
        entry_remove(c, e);
}

/* Completes the op's future as the inner future `f` completed. */
static void settle_as(struct op *op, ld_future *f)
{
    int code = ld_future_error(f);
    if (code != 0)
        ld_future_reject(op->out, code, "%s", ld_future_error_message(f));
    else if (op->type == OP_GET || op->type == OP_ALL)
        ld_future_fulfill_json(op->out, jref(ld_future_json(f)));
    else if (op->type == OP_INIT)
        ld_future_fulfill(op->out);
    else
        ld_future_fulfill_bool(op->out, ld_future_bool(f));
}

/* Runs `done(f, op)` when the inner future `f` (stolen) completes; without
 * memory for it (only an inner future the inner store shares, its LD_ENOMEM
 * answer: the operation did not happen), runs it now on a future rejected
 * so. */
static void await(ld_future *f, ld_future_cb done, struct op *op)
{
    if (ld_future_on_complete(f, done, op) == 0)
        return;
    ld_future *oom = ld_future_rejected(op->c->base, LD_ENOMEM, NULL);
    if (oom) {
        done(oom, op);
        ld_future_unref(oom);
    } else { /* nothing to read from: only the counts */
        if (op->type == OP_INIT || op->type == OP_UPSERT || op->type == OP_DEL)
            write_end(op->c, op);
        ld_future_reject(op->out, LD_ENOMEM, E_NOMEM);
        op_free(op);
    }
}

/* ---- get ---------------------------------------------------------------- */

static void got(ld_future *f, void *arg)
{
    struct op *op = arg;
    struct cache *c = op->c;
    if (c->dead) {
        op_free(op);
        return;
    }
    size_t len = strlen(op->key);
    struct entry *e = find(c, op->k, op->key, len);
    if (e && op->flight && cold(e)->flight == op->flight) {
        ld_future_unref(cold(e)->flight);
        cold(e)->flight = NULL;
        if (!e->has_value && !e->writing)
            entry_remove(c, e);
    }
    int code = ld_future_error(f);
    note_result(c, code);
    json_t *it;
    if (code == 0) {
        json_t *v = ld_future_json(f);
        bool known;
        int64_t have = c->dirty ? cached_version(c, op->k, op->key, len, &known) : -1;
        /* the data the cache serves is the newest it knows: after a write
         * the inner store missed, not what it still holds */
        bool older = c->dirty && have >= 0 && (!v || ld_item_version(v) < have);
        if (c->ttl != 0 && !full_fresh(&c->kc[op->k]) && !older &&
            (e = find_or_add(c, op->k, op->key, len)) != NULL)
            entry_set(c, e, v);
        if (older && lookup(c, op->k, op->key, len, &it, true) == 0)
            ld_future_fulfill_json(op->out, jref(it));
        else
            settle_as(op, f);
    } else if (c->ttl < 0 && store_error(code) && lookup(c, op->k, op->key, len, &it, true) == 0) {
        ld_future_fulfill_json(op->out, jref(it)); /* forever: the cache serves */
    } else {
        settle_as(op, f);
    }
    op_free(op);
}

/* An answer of get_now: `it` (held by the cache) lent on a lease, as the
 * memory store lends its items (no reference taken: that touches the
 * item's count, a cache miss at thousands of items); a reference without
 * memory for the lease. Results may be released on other threads: what the
 * cache lets go of waits for their leases, and a kind's object, which may
 * hold a lent item's last reference, lets go of its members with an
 * acquiring decrement (drop_obj()). */
static void lend(struct cache *c, json_t *it, json_t **item, struct ld_lease **lease)
{
    *item = it;
    *lease = it && c->rc_live ? ld__mem_lease(&c->rc, it) : NULL;
    if (!*lease)
        *item = jref(it);
}

static int cache_get_now(void *impl, const ld_kind *kind, const char *key, size_t len,
                         json_t **item, struct ld_lease **lease)
{
    struct cache *c = impl;
    json_t *it;
    int rc = lookup(c, kidx(kind), key, len, &it, false);
    if (rc == 0)
        lend(c, it, item, lease);
    return rc;
}

/* The evaluator's read within the call (ld__store_set_lend()): the cached
 * item borrowed, no lease (the evaluator references what it keeps before
 * anything else runs). */
static int cache_lend(void *impl, const ld_kind *kind, const char *key, size_t len, json_t **item)
{
    return lookup(impl, kidx(kind), key, len, item, false);
}

static void cache_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    struct cache *c = impl;
    int k = kidx(kind);
    size_t len = strlen(key);
    json_t *it;
    if (lookup(c, k, key, len, &it, false) == 0) {
        ld_future_fulfill_json(out, jref(it));
        ld_future_unref(out);
        return;
    }
    struct op *op = op_new(c, OP_GET, k, key, out);
    if (!op)
        return;
    struct entry *e = c->ttl != 0 ? find(c, k, key, len) : NULL;
    if (e && cold(e)->flight && cold(e)->flight_seq == c->wseq) { /* share it */
        await(ld_future_ref(cold(e)->flight), got, op);
        return;
    }
    ld_future *f = ld_store_get(c->inner, kind, key);
    if (c->ttl != 0 && (e || (e = find_or_add(c, k, key, len)) != NULL)) {
        struct cold *x = cold(e);
        ld_future_unref(x->flight);
        x->flight = ld_future_ref(f);
        x->flight_seq = c->wseq;
        op->flight = ld_future_ref(f);
    }
    await(f, got, op);
}

/* ---- all ---------------------------------------------------------------- */

static void got_all(ld_future *f, void *arg)
{
    struct op *op = arg;
    struct cache *c = op->c;
    if (c->dead) {
        op_free(op);
        return;
    }
    struct kcache *kc = &c->kc[op->k];
    if (op->flight && kc->all_flight == op->flight) {
        ld_future_unref(kc->all_flight);
        kc->all_flight = NULL;
    }
    ld_future_unref(op->flight);
    op->flight = NULL;
    int code = ld_future_error(f);
    note_result(c, code);
    json_t *all;
    if (code == 0) {
        /* dirty: the inner store misses writes the cache holds */
        if (c->ttl != 0 && !c->dirty && !full_fresh(kc)) {
            all_drop(c, kc);
            kc->all = jref(ld_future_json(f));
            kc->all_expires = deadline(c);
        }
        if (c->dirty && all_lookup(c, op->k, &all, true) == 0)
            ld_future_fulfill_json(op->out, jref(all));
        else
            settle_as(op, f);
    } else if (c->ttl < 0 && store_error(code) && all_lookup(c, op->k, &all, true) == 0) {
        ld_future_fulfill_json(op->out, jref(all));
    } else {
        settle_as(op, f);
    }
    op_free(op);
}

static int cache_all_now(void *impl, const ld_kind *kind, json_t **all)
{
    struct cache *c = impl;
    json_t *a;
    int rc = all_lookup(c, kidx(kind), &a, false);
    if (rc == 0)
        *all = jref(a);
    return rc;
}

static void cache_all(void *impl, const ld_kind *kind, ld_future *out)
{
    struct cache *c = impl;
    int k = kidx(kind);
    json_t *a;
    int rc = all_lookup(c, k, &a, false);
    if (rc != LD_EBUSY) {
        if (rc == 0)
            ld_future_fulfill_json(out, jref(a));
        else
            ld_future_reject(out, rc, NULL);
        ld_future_unref(out);
        return;
    }
    struct op *op = op_new(c, OP_ALL, k, NULL, out);
    if (!op)
        return;
    struct kcache *kc = &c->kc[k];
    if (kc->all_flight && kc->all_flight_seq == c->wseq) {
        await(ld_future_ref(kc->all_flight), got_all, op);
        return;
    }
    ld_future *f = ld_store_all(c->inner, kind);
    if (c->ttl != 0) {
        ld_future_unref(kc->all_flight);
        kc->all_flight = ld_future_ref(f);
        kc->all_flight_seq = c->wseq;
        op->flight = ld_future_ref(f);
    }
    await(f, got_all, op);
}

/* ---- writes ------------------------------------------------------------- */

static void inited(ld_future *f, void *arg)
{
    struct op *op = arg;
    struct cache *c = op->c;
    if (!c->dead) {
        int code = ld_future_error(f);
        write_end(c, op);
        note_result(c, code);
        if (code == 0 || (c->ttl < 0 && store_error(code))) {
            /* forever: the cache keeps serving the data, written back later */
            cache_replace(c, op->item);
            c->dirty = code != 0 ? c->dirty + 1 : 0;
            if (c->ttl != 0)
                c->inited = true;
        }
        ld_store_status st;
        if (code == 0 && !c->failing && !c->inner_down &&
            ld_store_current_status(c->self, &st) == 0 && st.needs_refresh) {
            set_status(c, true, false); /* the data source sent its data again */
        }
    }
    settle_as(op, f);
    op_free(op);
}

static void cache_init(void *impl, const json_t *all_data, ld_future *out)
{
    struct cache *c = impl;
    struct op *op = op_new(c, OP_INIT, 0, NULL, out);
    if (!op)
        return;
    op->item = ld__json_incref((json_t *)all_data);
    write_begin(c, op);
    await(ld_store_init(c->inner, all_data), inited, op);
}

static void wrote(ld_future *f, void *arg)
{
    struct op *op = arg;
    struct cache *c = op->c;
    if (!c->dead) {
        int code = ld_future_error(f);
        write_end(c, op);
        note_result(c, code);
        bool known;
        int64_t have = cached_version(c, op->k, op->key, strlen(op->key), &known);
        bool put = false;
        if (code == 0 && ld_future_bool(f)) {
            put = true;
        } else if (code == 0) {
            /* not applied: the inner store holds a version at least as new,
             * which the next get reads; `full` stays if it has one too */
            struct entry *e = find(c, op->k, op->key, strlen(op->key));
            if (e)
                entry_drop(c, e);
            if (!known || have < op->version)
                full_drop(c, &c->kc[op->k]);
            all_drop(c, &c->kc[op->k]);
        } else if (c->ttl < 0 && store_error(code) && (!known || have < op->version)) {
            /* forever: the cache serves the newest data it knows, and
             * writes it back once the inner store is back */
            put = true;
            c->dirty++;
        }
        if (put) {
            json_t *item =
                op->item ? ld__json_incref(op->item) : ld_tombstone_new(op->key, op->version);
            if (item)
                cache_put(c, op->k, op->key, item);
            else
                cache_forget(c, op->k, op->key);
            ld__json_decref(item);
        }
    }
    settle_as(op, f);
    op_free(op);
}

static void cache_upsert(void *impl, const ld_kind *kind, const json_t *item,
                         const struct ld_item_info *info, ld_future *out)
{
    struct cache *c = impl;
    struct op *op = op_new(c, OP_UPSERT, kidx(kind), info->key, out);
    if (!op)
        return;
    op->item = ld__json_incref((json_t *)item);
    op->version = info->version;
    write_begin(c, op);
    await(ld_store_upsert(c->inner, kind, item), wrote, op);
}

static void cache_del(void *impl, const ld_kind *kind, const char *key, int64_t version,
                      ld_future *out)
{
    struct cache *c = impl;
    struct op *op = op_new(c, OP_DEL, kidx(kind), key, out);
    if (!op)
        return;
    op->version = version;
    write_begin(c, op);
    await(ld_store_delete(c->inner, kind, key, version), wrote, op);
}

/* ---- initialized, close, free, describe --------------------------------- */

static void got_initialized(ld_future *f, void *arg)
{
    struct op *op = arg;
    struct cache *c = op->c;
    if (!c->dead) {
        note_result(c, ld_future_error(f));
        if (c->ttl != 0 && ld_future_bool(f))
            c->inited = true;
    }
    settle_as(op, f);
    op_free(op);
}

static void cache_initialized(void *impl, ld_future *out)
{
    struct cache *c = impl;
    if (c->inited) {
        ld_future_fulfill_bool(out, true);
        ld_future_unref(out);
        return;
    }
    struct op *op = op_new(c, OP_INITIALIZED, 0, NULL, out);
    if (op)
        await(ld_store_initialized(c->inner), got_initialized, op);
}

static int cache_initialized_now(void *impl)
{
    struct cache *c = impl;
    return c->inited ? 1 : LD_EBUSY;
}

/* The inner store's close came back: the cache's close fulfils, also when
 * the inner store had no memory to close (the cache is closed all the same:
 * nothing reaches the inner store any more, and it is freed with it). */
static void inner_closed(ld_future *f, void *arg)
{
    ld_future *out = arg;
    int code = ld_future_error(f);
    if (code != 0 && code != LD_ENOMEM)
        ld_future_reject(out, code, "%s", ld_future_error_message(f));
    else
        ld_future_fulfill(out);
    ld_future_unref(out);
}

static void cache_close(void *impl, ld_future *out)
{
    struct cache *c = impl;
    c->closed = true;
    evtimer_del(c->poll_ev);
    evtimer_del(c->check_ev);
    if (ld_future_on_complete(ld_store_close(c->inner), inner_closed, out) != 0) {
        ld_future_fulfill(out); /* the inner store's LD_ENOMEM: see inner_closed */
        ld_future_unref(out);
    }
}

/* ld_store_free() of the caching store: from now on nothing more is done
 * (its implementation may be freed later, from the loop). */
static void cache_gone(void *arg)
{
    struct cache *c = arg;
    c->dead = true;
    c->self = NULL;
    evtimer_del(c->poll_ev);
    evtimer_del(c->check_ev);
}

/* Frees what the cache holds, and the inner store; the struct goes with
 * the last inner operation's callback (their futures are rejected from the
 * loop). */
static void cache_free(void *impl)
{
    struct cache *c = impl;
    c->dead = true;
    c->self = NULL;
    ld_store_free(c->inner);
    c->inner = NULL;
    entries_clear(c, false);
    cache_flush(c);
    for (int k = 0; k < NK; k++) {
        ld_future_unref(c->kc[k].all_flight);
        c->kc[k].all_flight = NULL;
    }
    if (c->poll_ev)
        event_free(c->poll_ev);
    c->poll_ev = NULL;
    if (c->check_ev)
        event_free(c->check_ev);
    c->check_ev = NULL;
    if (c->rc_live) { /* what leases still read stays with them */
        c->rc_live = false;
        ld__mem_reclaim_fini(&c->rc);
    }
    ld__free(c->buckets);
    c->buckets = NULL;
    ld__free(c->describe);
    c->describe = NULL;
    cache_unref(c);
}

static const char *cache_describe(void *impl)
{
    struct cache *c = impl;
    return c->describe;
}

static const struct ld_store_ops cache_ops = {
    .version = LD_STORE_OPS_VERSION,
    .get = cache_get,
    .all = cache_all,
    .init = cache_init,
    .upsert = cache_upsert,
    .del = cache_del,
    .initialized = cache_initialized,
    .close = cache_close,
    .free = cache_free,
    .describe = cache_describe,
    .get_now = cache_get_now,
    .all_now = cache_all_now,
    .initialized_now = cache_initialized_now,
};

/* A positive number of an environment variable, or `dflt`. */
static int64_t env_number(const char *name, int64_t dflt)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v)
        return dflt;
    long long n = strtoll(v, &end, 10);
    return *end == '\0' && n > 0 ? (int64_t)n : dflt;
}

ld_store *ld_caching_store_new(struct event_base *base, ld_store *inner, int64_t ttl_ms)
{
    if (!base || !inner || ld_store_base(inner) != base) {
        ld_store_free(inner);
        return NULL;
    }
    struct cache *c = ld__calloc(1, sizeof(*c));
    if (!c) {
        ld_store_free(inner);
        return NULL;
    }
    c->inner = inner;
    c->base = base;
    c->ttl = ttl_ms < 0 ? -1 : ttl_ms;
    c->refs = 1;
    c->cap = (size_t)env_number("LDASYNC_CACHE_CAPACITY", DEFAULT_CAP);
    c->poll_ms = env_number("LDASYNC_CACHE_POLL_MS", DEFAULT_POLL_MS);
    c->nbuckets = 64;
    c->buckets = ld__calloc(c->nbuckets, sizeof(*c->buckets));
    c->poll_ev = evtimer_new(base, poll_fire, c);
    /* "0" turns the check off (for tests that wait for an idle loop) */
    const char *check = getenv("LDASYNC_CACHE_CHECK_MS");
    c->check_ms = check && strcmp(check, "0") == 0
                      ? 0
                      : env_number("LDASYNC_CACHE_CHECK_MS", DEFAULT_CHECK_MS);
    c->check_ev = evtimer_new(base, check_fire, c);
    c->rc_live = ld__mem_reclaim_init(&c->rc, base) == 0;
    const char *inner_name = ld_store_describe(inner);
    size_t dlen = strlen(inner_name) + sizeof("caching()");
    c->describe = ld__malloc(dlen);
    if (c->describe)
        snprintf(c->describe, dlen, "caching(%s)", inner_name);
    if (c->buckets && c->poll_ev && c->check_ev && c->describe && c->rc_live)
        c->self = ld_store_new(base, &cache_ops, c);
    if (!c->self) {
        cache_free(c); /* frees inner */
        return NULL;
    }
    ld__store_on_free(c->self, cache_gone, c);
    ld__store_set_lend(c->self, cache_lend);
    if (ld_store_add_status_listener(inner, inner_status, c) < 0) {
        ld_store_free(c->self);
        return NULL;
    }
    ld_store_status st;
    if (ld_store_current_status(inner, &st) == 0 && !st.available) {
        c->inner_down = true;
        ld_store_update_status(c->self, false, false);
    }
    check_later(c);
    return c->self;
}
