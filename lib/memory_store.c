/*
 * ldasync: the in-memory store (store.h). One thread, no lock.
 *
 * Per kind, an open-addressing hash table (linear probing; entries are
 * never removed, a delete stores a tombstone) maps a key to the item and to
 * the item's version and deleted flag, so get, upsert and delete need one
 * hash of the key and no lookups inside the items. Measured against a
 * jansson object per kind, which needs a seeded hash per lookup and more
 * lookups in the old item for its version and deleted flag.
 *
 * all answers with a jansson object of the items without tombstones, built
 * on the first all and then kept in step with every write, in place while
 * the store holds the only reference to it; a write while a reader of an
 * earlier all still holds it drops it instead (that reader's object never
 * changes), and the next all builds a new one.
 */
#include <stdlib.h>
#include <string.h>

#include <ldasync/error.h>
#include <ldasync/store.h>

enum { K_SEGMENTS, K_FEATURES, NKINDS };

struct slot {
    const char *key; /* the item's own "key" string; NULL: empty slot */
    json_t *item;    /* one reference */
    uint64_t hash;
    int64_t version;
    bool deleted;
};

struct table {
    struct slot *slots;
    size_t mask; /* capacity - 1, a power of two */
    size_t used;
    json_t *snap; /* the result of all, or NULL until asked for */
};

struct memory {
    struct table t[NKINDS];
    int inited;
};

static int kind_index(const ld_kind *kind)
{
    return kind == ld_kind_features() ? K_FEATURES : K_SEGMENTS;
}

static const ld_kind *kind_at(int i)
{
    return i == K_FEATURES ? ld_kind_features() : ld_kind_segments();
}

/* FNV-1a, 64 bits: keys are short strings. */
static uint64_t hash_key(const char *key)
{
    uint64_t h = 14695981039346656037ULL;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h;
}

static struct slot *find(const struct table *t, const char *key, uint64_t hash)
{
    for (size_t i = hash & t->mask;; i = (i + 1) & t->mask) {
        struct slot *s = &t->slots[i];
        if (!s->key || (s->hash == hash && strcmp(s->key, key) == 0))
            return s;
    }
}

static int table_init(struct table *t, size_t capacity)
{
    size_t cap = 16;
    while (cap < capacity)
        cap *= 2;
    t->slots = calloc(cap, sizeof(*t->slots));
    t->mask = cap - 1;
    t->used = 0;
    t->snap = NULL;
    return t->slots ? 0 : LD_ENOMEM;
}

static void table_free(struct table *t)
{
    for (size_t i = 0; t->slots && i <= t->mask; i++)
        json_decref(t->slots[i].item);
    free(t->slots);
    json_decref(t->snap);
    t->slots = NULL;
    t->snap = NULL;
}

/* Doubles the table when it is 3/4 full. */
static int table_grow(struct table *t)
{
    if ((t->used + 1) * 4 < (t->mask + 1) * 3)
        return 0;
    struct table bigger;
    if (table_init(&bigger, (t->mask + 1) * 2) != 0)
        return LD_ENOMEM;
    for (size_t i = 0; i <= t->mask; i++)
        if (t->slots[i].key)
            *find(&bigger, t->slots[i].key, t->slots[i].hash) = t->slots[i];
    bigger.used = t->used;
    bigger.snap = t->snap;
    free(t->slots);
    *t = bigger;
    return 0;
}

/* Keeps the snapshot of all in step with a write of `item` under `key`. */
static void snap_write(struct table *t, const char *key, json_t *item, bool deleted)
{
    if (!t->snap)
        return;
    int rc = 0;
    if (t->snap->refcount == 1)
        rc = deleted ? (json_object_del(t->snap, key), 0) : json_object_set(t->snap, key, item);
    if (t->snap->refcount != 1 || rc != 0) {
        json_decref(t->snap);
        t->snap = NULL;
    }
}

/* Stores item (borrowed; meta read from it) if it is newer, by the version
 * rule of store.h. Returns 1 if applied, 0 if not, LD_ENOMEM. */
static int put(struct table *t, json_t *item, const struct ld_item_info *m)
{
    uint64_t hash = hash_key(m->key);
    struct slot *s = find(t, m->key, hash);
    if (s->key && s->version >= m->version)
        return 0;
    if (!s->key) {
        if (table_grow(t) != 0)
            return LD_ENOMEM;
        s = find(t, m->key, hash);
        t->used++;
    }
    json_t *old = s->item;
    *s = (struct slot){m->key, json_incref(item), hash, m->version, m->deleted};
    snap_write(t, m->key, item, m->deleted);
    json_decref(old); /* after: old may own the key string the snapshot used */
    return 1;
}

static void mem_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    struct memory *mem = impl;
    const struct slot *s = find(&mem->t[kind_index(kind)], key, hash_key(key));
    ld_future_fulfill_json(out, s->key && !s->deleted ? json_incref(s->item) : NULL);
    ld_future_unref(out);
}

static json_t *snapshot_of(const struct table *t)
{
    json_t *snap = json_object();
    for (size_t i = 0; snap && i <= t->mask; i++) {
        const struct slot *s = &t->slots[i];
        if (s->key && !s->deleted && json_object_set(snap, s->key, s->item) != 0) {
            json_decref(snap);
            return NULL;
        }
    }
    return snap;
}

static void mem_all(void *impl, const ld_kind *kind, ld_future *out)
{
    struct table *t = &((struct memory *)impl)->t[kind_index(kind)];
    if (!t->snap)
        t->snap = snapshot_of(t);
    if (t->snap)
        ld_future_fulfill_json(out, json_incref(t->snap));
    else
        ld_future_reject(out, LD_ENOMEM, NULL);
    ld_future_unref(out);
}

static void complete_write(ld_future *out, int rc)
{
    if (rc < 0)
        ld_future_reject(out, rc, NULL);
    else
        ld_future_fulfill_bool(out, rc == 1);
    ld_future_unref(out);
}

static void mem_upsert(void *impl, const ld_kind *kind, const json_t *item,
                       const struct ld_item_info *info, ld_future *out)
{
    struct memory *mem = impl;
    complete_write(out, put(&mem->t[kind_index(kind)], (json_t *)item, info));
}

static void mem_del(void *impl, const ld_kind *kind, const char *key, int64_t version,
                    ld_future *out)
{
    struct memory *mem = impl;
    json_t *tomb = ld_tombstone_new(key, version);
    int rc = LD_ENOMEM;
    if (tomb) {
        struct ld_item_info m = {ld_item_key(tomb), version, true};
        rc = put(&mem->t[kind_index(kind)], tomb, &m);
    }
    complete_write(out, rc);
    json_decref(tomb);
}

/* A table of the items of one collection of the data set. */
static int table_from(struct table *t, const json_t *coll)
{
    if (table_init(t, json_object_size(coll) * 2) != 0)
        return LD_ENOMEM;
    const char *key;
    json_t *item;
    json_object_foreach((json_t *)coll, key, item)
    {
        struct ld_item_info m;
        int rc = ld_item_parse(item, &m, NULL);
        if (rc == 0)
            rc = put(t, item, &m) < 0 ? LD_ENOMEM : 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void mem_init(void *impl, const json_t *all_data, ld_future *out)
{
    struct memory *mem = impl;
    struct table fresh[NKINDS] = {{0}};
    int rc = 0;
    for (int i = 0; i < NKINDS && rc == 0; i++)
        rc = table_from(&fresh[i], json_object_get(all_data, ld_kind_namespace(kind_at(i))));
    /* all or nothing: swap only once everything is built */
    for (int i = 0; i < NKINDS; i++) {
        if (rc == 0) {
            table_free(&mem->t[i]);
            mem->t[i] = fresh[i];
        } else {
            table_free(&fresh[i]);
        }
    }
    if (rc == 0) {
        mem->inited = 1;
        ld_future_fulfill(out);
    } else {
        ld_future_reject(out, rc, NULL);
    }
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
        table_free(&mem->t[i]);
    free(mem);
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

ld_store *ld_memory_store_new(struct event_base *base)
{
    if (!base)
        return NULL;
    struct memory *mem = calloc(1, sizeof(*mem));
    if (!mem)
        return NULL;
    int ok = 1;
    for (int i = 0; i < NKINDS; i++)
        ok = table_init(&mem->t[i], 16) == 0 && ok;
    ld_store *s = ok ? ld_store_new(base, &memory_ops, mem) : NULL;
    if (!s)
        mem_free(mem);
    return s;
}
