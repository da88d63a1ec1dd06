/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the in-memory store (store.h). One thread, no lock.
 *
 * Per kind, an open-addressing hash table (linear probing; entries are
 * never removed, a delete leaves a tombstone) maps a key to the item and
 * its version. A slot is one cache line holding the key itself (longer keys
 * are copied to the heap), so a lookup touches one line of the table and no
 * string elsewhere; a tombstone keeps no JSON, so a delete allocates
 * nothing. get, upsert and delete hash the key once and read no field of
 * any stored item. Every operation answers within the call (the version 2
 * members of struct ld_store_ops, store.h): the front layer makes no
 * future for the implementation, and each caller's future completes from
 * the loop; init validates and loads in one pass over the data, or, for a
 * large data set, over several passes of the loop (memory_load.c), while
 * the other operations wait (struct deferred).
 *
 * all answers with a jansson object of the live items, built on the first
 * all and then kept in step with every write: in place while the store
 * holds the only reference to it, else on the previous result once its
 * reader let go of it (brought up to date by the keys written since), else
 * on a shallow copy; a reader's object never changes (struct snaps).
 *
 * What the store lets go of later (an item a write replaced while the
 * future of a get may still read it, a table an init replaced) and when is
 * memory_reclaim.c's job (store-internal.h); a large init is
 * memory_load.c's (the layout both use is in store-internal.h).
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include <ldasync/error.h>
#include <ldasync/store.h>

#include "core/core-internal.h"
#include "model/model-internal.h"
#include "store/store-internal.h"

/* ------------------------------------------------------------------------- */
/* Keys                                                                      */

static inline __attribute__((always_inline)) uint64_t hash_key(const char *key, size_t len)
{
    return ld__key_hash(key, len);
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

/* The slot of `key`, or the empty slot where it would go; inlined in the
 * reads (lookup()), a call elsewhere. */
static inline __attribute__((always_inline)) struct slot *
find_inline(const struct table *t, const char *key, size_t len, uint64_t hash)
{
    for (size_t i = hash & t->mask;; i = (i + 1) & t->mask) {
        struct slot *s = &t->slots[i];
        if (!s->len || (s->hash == hash && s->len == len && ld__key_eq(slot_key(s), key, len)))
            return s;
    }
}

static struct slot *find(const struct table *t, const char *key, size_t len, uint64_t hash)
{
    return find_inline(t, key, len, hash);
}

/* ------------------------------------------------------------------------- */
/* Snapshots of all (struct snaps)                                           */

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

/* ------------------------------------------------------------------------- */
/* Tables                                                                    */

int ld__mem_table_alloc(struct table *t, size_t n)
{
    size_t cap = 16;
    while (cap * 3 < n * 4 + 4)
        cap *= 2;
    t->slots = ld__aligned_alloc(LD__CACHE_LINE, cap * sizeof(*t->slots));
    t->mask = cap - 1;
    t->used = 0;
    t->sn = (struct snaps){0};
    return t->slots ? 0 : LD_ENOMEM;
}

static int table_init(struct table *t, size_t n)
{
    int rc = ld__mem_table_alloc(t, n);
    if (rc == 0)
        memset(t->slots, 0, (t->mask + 1) * sizeof(*t->slots));
    return rc;
}

static void slot_clear(struct slot *s)
{
    item_unref(s->item);
    if (s->len >= INLINE_KEY)
        ld__free((char *)slot_key(s));
}

void ld__mem_table_free(struct table *t)
{
    for (size_t i = 0; t->slots && i <= t->mask; i++)
        if (t->slots[i].len)
            slot_clear(&t->slots[i]);
    ld__aligned_free(t->slots);
    snaps_drop(&t->sn);
    t->slots = NULL;
}

bool ld__mem_slots_free_some(struct slot *slots, size_t mask, size_t *at, size_t n)
{
    size_t end = mask + 1 - *at < n ? mask + 1 : *at + n;
    for (size_t i = *at; i < end; i++)
        if (slots[i].len)
            slot_clear(&slots[i]);
    *at = end;
    if (end <= mask)
        return false;
    ld__aligned_free(slots);
    return true;
}

void ld__mem_slots_free(struct slot *slots, size_t mask)
{
    struct table t = {.slots = slots, .mask = mask};
    ld__mem_table_free(&t);
}

/* Retires a whole table (its snapshot is reference-counted: dropped now). */
static void table_retire(struct memory *mem, struct table *t)
{
    snaps_drop(&t->sn);
    if (t->slots)
        ld__mem_retire(&mem->rc, (struct garbage){NULL, t->slots, t->mask, false}, t->mask + 1);
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

/* ------------------------------------------------------------------------- */
/* Operations: struct ld_store_ops, all answered at once (version 2)         */

/* The live item under `key`, or NULL. */
static json_t *lookup(struct memory *mem, const ld_kind *kind, const char *key, size_t len)
{
    if (len >= UINT32_MAX)
        return NULL;
    return find_inline(&mem->t[kind_index(kind)], key, len, hash_key(key, len))->item;
}

/* A get: the item borrowed under a lease on its generation (a jansson
 * reference only when no generation could note it). */
static int mem_get_now(void *impl, const ld_kind *kind, const char *key, size_t len, json_t **item,
                       struct ld_lease **lease)
{
    struct memory *mem = impl;
    if (mem->load)
        return LD_EBUSY;
    json_t *found = lookup(mem, kind, key, len);
    *item = found;
    *lease = NULL;
    if (found && !(*lease = ld__mem_lease(&mem->rc, found)))
        *item = item_ref(found);
    return 0;
}

/* A get that lends the item (ld__store_set_lend()): for the evaluator,
 * which reads it within the call, no lease noted in a generation. */
static int mem_lend(void *impl, const ld_kind *kind, const char *key, size_t len, json_t **item)
{
    struct memory *mem = impl;
    if (mem->load)
        return LD_EBUSY;
    *item = lookup(mem, kind, key, len);
    return 0;
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

/* All: the kind's snapshot, made when first asked for after a change. */
static int mem_all_now(void *impl, const ld_kind *kind, json_t **all)
{
    if (((struct memory *)impl)->load)
        return LD_EBUSY;
    struct table *t = &((struct memory *)impl)->t[kind_index(kind)];
    if (!t->sn.snap)
        t->sn.snap = snapshot_of(t);
    *all = json_incref(t->sn.snap);
    return *all ? 0 : LD_ENOMEM;
}

/* Writes `item` (NULL: a tombstone) and lets go of what it replaced. */
static int store_item(struct memory *mem, const ld_kind *kind, const json_t *item,
                      const struct ld_item_info *info, size_t len, uint64_t hash)
{
    json_t *old = NULL;
    int rc = put(&mem->t[kind_index(kind)], (json_t *)item, info, len, hash, &old);
    if (old)
        ld__mem_retire(&mem->rc, (struct garbage){old, NULL, 0, false}, 1);
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
    if (mem->load)
        return LD_EBUSY;
    if (hinted != info->key)
        return store_hashing(mem, kind, item, info);
    return store_item(mem, kind, item, info, mem->hint_len, mem->hint_hash);
}

static int mem_del_now(void *impl, const ld_kind *kind, const char *key, int64_t version)
{
    if (((struct memory *)impl)->load)
        return LD_EBUSY;
    struct ld_item_info info = {key, version, true};
    return store_hashing(impl, kind, NULL, &info);
}

int ld__mem_put_fresh(struct table *fresh, const ld_kind *kind, json_t *item,
                      const struct ld_item_info *info)
{
    json_t *old = NULL; /* none: a new table, and keys of an object are unique */
    size_t len = strlen(info->key);
    int rc = put(&fresh[kind_index(kind)], item, info, len, hash_key(info->key, len), &old) < 0
                 ? LD_ENOMEM
                 : 0;
    json_decref(old);
    return rc;
}

static int visit_put(void *arg, const ld_kind *kind, json_t *item, const struct ld_item_info *info)
{
    return ld__mem_put_fresh(arg, kind, item, info);
}

/* ------------------------------------------------------------------------- */
/* Operations issued while a large init loads (memory_load.c)                */

enum dop { D_GET, D_ALL, D_UPSERT, D_DEL, D_INITIALIZED, D_INIT };

/* An operation issued while an init loads: what it was given (copied or
 * referenced) and its future. */
struct deferred {
    struct deferred *next;
    enum dop op;
    const ld_kind *kind;
    json_t *json; /* upsert: the item; init: the data; referenced */
    char *key;    /* get, del: a copy */
    struct ld_item_info info;
    ld_future *out;
};

void ld__mem_swap_in(struct memory *mem, struct table *fresh)
{
    for (int i = 0; i < NKINDS; i++) {
        table_retire(mem, &mem->t[i]);
        mem->t[i] = fresh[i];
    }
    mem->inited = 1;
}

/* Runs one operation that waited (or `d` given now, when no init loads)
 * and completes its future. */
static void run_deferred(struct memory *mem, struct deferred *d)
{
    json_t *item = NULL;
    struct ld_lease *lease = NULL;
    int rc = 0;
    switch (d->op) {
    case D_GET:
        rc = mem_get_now(mem, d->kind, d->key, strlen(d->key), &item, &lease);
        if (lease) {
            json_incref(item);
            lease->release(lease);
        }
        ld_future_fulfill_json(d->out, item);
        break;
    case D_ALL:
        if ((rc = mem_all_now(mem, d->kind, &item)) == 0)
            ld_future_fulfill_json(d->out, item);
        else
            ld_future_reject(d->out, rc, NULL);
        break;
    case D_UPSERT:
    case D_DEL:
        rc = store_item(mem, d->kind, d->op == D_UPSERT ? d->json : NULL, &d->info,
                        strlen(d->info.key), hash_key(d->info.key, strlen(d->info.key)));
        if (rc < 0)
            ld_future_reject(d->out, rc, NULL);
        else
            ld_future_fulfill_bool(d->out, rc != 0);
        break;
    case D_INITIALIZED:
        ld_future_fulfill_bool(d->out, mem->inited);
        break;
    case D_INIT:
        ld__mem_load_start(mem, d->json, d->out); /* takes both */
        d->json = NULL;
        d->out = NULL;
        break;
    }
    ld_future_unref(d->out);
    json_decref(d->json);
    ld__free(d->key);
    ld__free(d);
}

void ld__mem_replay(struct memory *mem)
{
    while (mem->dq && !mem->load) {
        struct deferred *d = mem->dq;
        mem->dq = d->next;
        if (!mem->dq)
            mem->dqt = NULL;
        run_deferred(mem, d);
    }
}

/* An asynchronous operation: run now, or queued behind the load. `json`
 * is referenced and `key` copied here; without memory, `out` is rejected
 * (the operation did not happen). */
static void defer(struct memory *mem, enum dop op, const ld_kind *kind, const json_t *json,
                  const char *key, const struct ld_item_info *info, ld_future *out)
{
    struct deferred *d = ld__calloc(1, sizeof *d);
    char *k = key ? ld__malloc(strlen(key) + 1) : NULL;
    if (!d || (key && !k)) {
        ld__free(d);
        ld__free(k);
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        return;
    }
    d->op = op;
    d->kind = kind;
    d->json = json_incref((json_t *)json);
    d->key = k ? strcpy(k, key) : NULL;
    if (info)
        d->info = *info;
    if (op == D_DEL)
        d->info.key = d->key;
    d->out = out;
    if (!mem->load) {
        run_deferred(mem, d);
        return;
    }
    if (mem->dqt)
        mem->dqt->next = d;
    else
        mem->dq = d;
    mem->dqt = d;
}

static void mem_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    defer(impl, D_GET, kind, NULL, key, NULL, out);
}

static void mem_all(void *impl, const ld_kind *kind, ld_future *out)
{
    defer(impl, D_ALL, kind, NULL, NULL, NULL, out);
}

static void mem_init(void *impl, const json_t *all_data, ld_future *out)
{
    defer(impl, D_INIT, NULL, all_data, NULL, NULL, out);
}

static void mem_upsert(void *impl, const ld_kind *kind, const json_t *item,
                       const struct ld_item_info *info, ld_future *out)
{
    defer(impl, D_UPSERT, kind, item, NULL, info, out); /* info->key points into item */
}

static void mem_del(void *impl, const ld_kind *kind, const char *key, int64_t version,
                    ld_future *out)
{
    struct ld_item_info info = {NULL, version, true};
    defer(impl, D_DEL, kind, NULL, key, &info, out);
}

/* Validates and loads `all_data` in one pass (each item read once) into new
 * tables, and swaps them in only if all of it was valid: 0, LD_EINVAL (*why
 * says why), LD_ENOMEM. A data set of more items than a slice is loaded by
 * mem_init, over several passes of the loop: LD_EBUSY. */
static int mem_init_now(void *impl, const json_t *all_data, const char **why)
{
    struct memory *mem = impl;
    if (mem->load || ld__mem_data_items(all_data) > mem->slice)
        return LD_EBUSY;
    struct table fresh[NKINDS] = {{0}};
    int rc = 0;
    for (int i = 0; i < NKINDS && rc == 0; i++) {
        const json_t *coll = json_object_get(all_data, ld_kind_namespace(kind_at(i)));
        rc = table_init(&fresh[i], json_object_size(coll));
    }
    if (rc == 0)
        rc = ld__data_walk(all_data, visit_put, fresh, why);
    if (rc == 0)
        ld__mem_swap_in(mem, fresh);
    else
        for (int i = 0; i < NKINDS; i++)
            ld__mem_table_free(&fresh[i]);
    return rc;
}

static void mem_initialized(void *impl, ld_future *out)
{
    defer(impl, D_INITIALIZED, NULL, NULL, NULL, NULL, out);
}

static int mem_initialized_now(void *impl)
{
    struct memory *mem = impl;
    return mem->load ? LD_EBUSY : mem->inited ? 1 : 0;
}

static void mem_free(void *impl)
{
    struct memory *mem = impl;
    ld__mem_load_fini(mem);
    while (mem->dq) { /* cancelled, in issue order */
        struct deferred *d = mem->dq;
        mem->dq = d->next;
        ld_future_reject(d->out, LD_ECANCELED, NULL);
        ld_future_unref(d->out);
        json_decref(d->json);
        ld__free(d->key);
        ld__free(d);
    }
    mem->dqt = NULL;
    for (int i = 0; i < NKINDS; i++)
        table_retire(mem, &mem->t[i]);
    ld__mem_reclaim_fini(&mem->rc);
    ld__free(mem);
}

static const char *mem_describe(void *impl)
{
    (void)impl;
    return "memory";
}

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

/* Every operation answers at once, but while a large init loads: then the
 * asynchronous members queue what comes (struct load). */
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
    .get_now = mem_get_now,
    .all_now = mem_all_now,
    .init_now = mem_init_now,
    .upsert_now = mem_upsert_now,
    .del_now = mem_del_now,
    .prefetch = mem_prefetch,
    .initialized_now = mem_initialized_now,
};

/* ------------------------------------------------------------------------- */
/* Making a store                                                            */

/* Items per loop pass of a large init at most (an init of more items is a
 * large one): LDASYNC_STORE_INIT_SLICE (at least 1), else 2048. A knob for
 * the tests and the benchmark, not for applications (docs/design.md). */
static size_t init_slice(void)
{
    const char *env = getenv("LDASYNC_STORE_INIT_SLICE");
    long n = env ? strtol(env, NULL, 10) : 0;
    return n > 0 ? (size_t)n : 2048;
}

ld_store *ld_memory_store_new(struct event_base *base)
{
    if (!base)
        return NULL;
    struct memory *mem = ld__calloc(1, sizeof(*mem));
    if (!mem)
        return NULL;
    if (ld__mem_reclaim_init(&mem->rc, base) != 0) {
        ld__free(mem);
        return NULL;
    }
    mem->base = base;
    mem->slice = init_slice();
    int ok = 1;
    for (int i = 0; i < NKINDS; i++)
        ok = table_init(&mem->t[i], 0) == 0 && ok;
    ld_store *s = ok ? ld_store_new(base, &memory_ops, mem) : NULL;
    if (!s)
        mem_free(mem); /* the front layer did not take it */
    else {
        ld__store_init_validates(s); /* load_item validates what init_now leaves */
        ld__store_set_lend(s, mem_lend);
    }
    return s;
}
