/*
 * ldasync: the in-memory store (store.h). One thread, no lock. Per kind, a
 * live jansson object key -> item without tombstones answers get (one hash
 * lookup) and is itself the result of all, handed out by reference; a second
 * object holds the tombstones. A write changes the live object in place while
 * the store holds the only reference to it, and copies it first (copy on
 * write) while a reader of an earlier all still holds it, so that reader's
 * object never changes. With no reader holding one, all costs a reference
 * count.
 */
#include <stdlib.h>

#include <ldasync/error.h>
#include <ldasync/store.h>

enum { K_SEGMENTS, K_FEATURES, NKINDS };

struct memory {
    json_t *live[NKINDS]; /* key -> item, no tombstones */
    json_t *tomb[NKINDS]; /* key -> tombstone */
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

static void mem_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    struct memory *m = impl;
    ld_future_fulfill_json(out, json_incref(json_object_get(m->live[kind_index(kind)], key)));
    ld_future_unref(out);
}

static void mem_all(void *impl, const ld_kind *kind, ld_future *out)
{
    struct memory *m = impl;
    ld_future_fulfill_json(out, json_incref(m->live[kind_index(kind)]));
    ld_future_unref(out);
}

/* Makes live[i] ours alone before a write: copies it (shallow: the items are
 * shared) if a reader still holds it. */
static int own_live(struct memory *m, int i)
{
    if (m->live[i]->refcount == 1)
        return 0;
    json_t *copy = json_copy(m->live[i]);
    if (!copy)
        return LD_ENOMEM;
    json_decref(m->live[i]);
    m->live[i] = copy;
    return 0;
}

/* Stores item (borrowed) if newer, by the version rule of store.h.
 * Returns 1 if applied, 0 if not, LD_ENOMEM. */
static int apply(struct memory *m, int i, const char *key, json_t *item)
{
    json_t *old = json_object_get(m->live[i], key);
    if (!old)
        old = json_object_get(m->tomb[i], key);
    if (old && ld_item_version(old) >= ld_item_version(item))
        return 0;
    if (own_live(m, i) != 0)
        return LD_ENOMEM;
    int deleted = ld_item_is_deleted(item);
    json_t *into = deleted ? m->tomb[i] : m->live[i], *from = deleted ? m->live[i] : m->tomb[i];
    if (json_object_set(into, key, item) != 0)
        return LD_ENOMEM;
    json_object_del(from, key); /* -1 when absent: nothing to do */
    return 1;
}

static void complete_write(ld_future *out, int rc)
{
    if (rc < 0)
        ld_future_reject(out, rc, NULL);
    else
        ld_future_fulfill_bool(out, rc == 1);
    ld_future_unref(out);
}

static void mem_upsert(void *impl, const ld_kind *kind, const json_t *item, ld_future *out)
{
    struct memory *m = impl;
    complete_write(out, apply(m, kind_index(kind), ld_item_key(item), (json_t *)item));
}

static void mem_del(void *impl, const ld_kind *kind, const char *key, int64_t version,
                    ld_future *out)
{
    struct memory *m = impl;
    json_t *tomb = ld_tombstone_new(key, version);
    complete_write(out, tomb ? apply(m, kind_index(kind), key, tomb) : LD_ENOMEM);
    json_decref(tomb);
}

/* Splits a collection of the data set into live items and tombstones. */
static int split(const json_t *coll, json_t *live, json_t *tomb)
{
    const char *key;
    json_t *item;
    json_object_foreach((json_t *)coll, key, item)
    {
        if (json_object_set(ld_item_is_deleted(item) ? tomb : live, key, item) != 0)
            return LD_ENOMEM;
    }
    return 0;
}

static void mem_init(void *impl, const json_t *all_data, ld_future *out)
{
    struct memory *m = impl;
    json_t *live[NKINDS], *tomb[NKINDS];
    int rc = 0;
    for (int i = 0; i < NKINDS; i++) {
        live[i] = json_object();
        tomb[i] = json_object();
        if (!live[i] || !tomb[i])
            rc = LD_ENOMEM;
        const json_t *coll = json_object_get(all_data, ld_kind_namespace(kind_at(i)));
        if (rc == 0 && coll)
            rc = split(coll, live[i], tomb[i]);
    }
    /* all or nothing: swap only once everything is built */
    for (int i = 0; i < NKINDS; i++) {
        json_t *drop_live = rc == 0 ? m->live[i] : live[i];
        json_t *drop_tomb = rc == 0 ? m->tomb[i] : tomb[i];
        if (rc == 0) {
            m->live[i] = live[i];
            m->tomb[i] = tomb[i];
        }
        json_decref(drop_live);
        json_decref(drop_tomb);
    }
    if (rc == 0) {
        m->inited = 1;
        ld_future_fulfill(out);
    } else {
        ld_future_reject(out, rc, NULL);
    }
    ld_future_unref(out);
}

static void mem_initialized(void *impl, ld_future *out)
{
    struct memory *m = impl;
    ld_future_fulfill_bool(out, m->inited);
    ld_future_unref(out);
}

static void mem_free(void *impl)
{
    struct memory *m = impl;
    for (int i = 0; i < NKINDS; i++) {
        json_decref(m->live[i]);
        json_decref(m->tomb[i]);
    }
    free(m);
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
    struct memory *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    int ok = 1;
    for (int i = 0; i < NKINDS; i++) {
        m->live[i] = json_object();
        m->tomb[i] = json_object();
        ok = ok && m->live[i] && m->tomb[i];
    }
    ld_store *s = ok ? ld_store_new(base, &memory_ops, m) : NULL;
    if (!s)
        mem_free(m);
    return s;
}
