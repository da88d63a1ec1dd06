/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the mock store (testing.h).
 *
 * Its own implementation of struct ld_store_ops, not a wrapper of the memory
 * store: force_set and force_delete must write without the version rule, and
 * the memory store's tables are private to libldasync. The data is one
 * jansson object per namespace, key -> item (tombstones included): simple
 * enough to be obviously right, which is what a mock is for, and a second,
 * independent implementation for the contract suite to run against.
 */
#include <stdlib.h>

#include <ldasync/testing.h>

#include "testing-internal.h"

#define NOPS LD_MOCK_OP_ANY /* the operations; LD_MOCK_OP_ANY indexes the shared count */

struct mock {
    struct ld__mock head;
    json_t *data; /* namespace -> {key -> item} */
    bool inited;
    json_t *inits; /* array of the data of each init received */
    int calls[NOPS];
    int fail_left[NOPS + 1];
    int fail_code[NOPS + 1];
};

/* A new reference to `v`: an item's counted atomically, as the file source's
 * worker counts the items it yielded and keeps (json_incref() reads the count
 * plainly). core-internal.h's ld__json_incref(), which this library, built on
 * the public API only, cannot include. */
static json_t *ref(json_t *v)
{
    if (!json_is_object(v))
        return json_incref(v);
    __atomic_fetch_add(&v->refcount, 1, __ATOMIC_RELAXED);
    return v;
}

static const char *const op_names[NOPS] = {"get", "all", "init", "upsert", "delete", "initialized"};

static const struct ld_store_ops mock_ops;

static struct mock *mock_of(const ld_store *store)
{
    return ld__mock_find(store, &mock_ops);
}

/* The items of `kind`, an object made on first use; NULL if out of memory. */
static json_t *items_of(struct mock *m, const ld_kind *kind)
{
    const char *ns = ld_kind_namespace(kind);
    json_t *items = json_object_get(m->data, ns);
    if (!items && json_object_set_new(m->data, ns, json_object()) == 0)
        items = json_object_get(m->data, ns);
    return items;
}

/* Counts the call; if a failure is armed for it, rejects `out` with it,
 * releases `out` and returns true. */
static bool counted_or_failed(struct mock *m, enum ld_mock_op op, ld_future *out)
{
    m->calls[op]++;
    enum ld_mock_op armed = m->fail_left[op] > 0 ? op : LD_MOCK_OP_ANY;
    if (m->fail_left[armed] == 0)
        return false;
    m->fail_left[armed]--;
    ld_future_reject(out, m->fail_code[armed], "mock store: injected failure of %s", op_names[op]);
    ld_future_unref(out);
    return true;
}

static void complete_json(ld_future *out, json_t *v, bool out_of_memory)
{
    if (out_of_memory)
        ld_future_reject(out, LD_ENOMEM, NULL);
    else
        ld_future_fulfill_json(out, v);
    ld_future_unref(out);
}

static void mock_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    struct mock *m = impl;
    if (counted_or_failed(m, LD_MOCK_OP_GET, out))
        return;
    json_t *item = json_object_get(json_object_get(m->data, ld_kind_namespace(kind)), key);
    complete_json(out, item && !ld_item_is_deleted(item) ? ref(item) : NULL, false);
}

static void mock_all(void *impl, const ld_kind *kind, ld_future *out)
{
    struct mock *m = impl;
    if (counted_or_failed(m, LD_MOCK_OP_ALL, out))
        return;
    json_t *live = json_object();
    const char *key;
    json_t *item;
    bool failed = !live;
    json_object_foreach(json_object_get(m->data, ld_kind_namespace(kind)), key, item)
    {
        if (!failed && !ld_item_is_deleted(item))
            failed = json_object_set_new(live, key, ref(item)) != 0;
    }
    if (failed) {
        json_decref(live);
        live = NULL;
    }
    complete_json(out, live, failed);
}

/* A copy of an object whose members are shared or, with `depth` 1, copies
 * of them made the same way; NULL if memory ran out (json_copy may leave
 * members out then, without saying so). Keys are copied with their length:
 * a namespace "features\0x" is not "features". */
static json_t *copy_object(const json_t *obj, int depth)
{
    json_t *copy = json_object();
    const char *key;
    size_t len;
    json_t *v;
    if (!copy)
        return NULL;
    json_object_keylen_foreach((json_t *)obj, key, len, v)
    {
        json_t *member = depth ? copy_object(v, depth - 1) : ref(v);
        if (json_object_setn_new_nocheck(copy, key, len, member) != 0) { /* steals member */
            json_decref(copy);
            return NULL;
        }
    }
    return copy;
}

/* A copy of the containers of a data set, sharing the items. */
static json_t *copy_data(const json_t *all_data)
{
    return copy_object(all_data, 1);
}

static void mock_init(void *impl, const json_t *all_data, ld_future *out)
{
    struct mock *m = impl;
    json_t *record = copy_data(all_data);
    bool recorded = record && json_array_append_new(m->inits, record) == 0;
    if (counted_or_failed(m, LD_MOCK_OP_INIT, out))
        return;
    json_t *fresh = recorded ? copy_data(all_data) : NULL; /* the record must not change */
    if (!fresh) {
        complete_json(out, NULL, true);
        return;
    }
    json_decref(m->data);
    m->data = fresh;
    m->inited = true;
    ld_future_fulfill(out);
    ld_future_unref(out);
}

/* Stores `item` under `key` if `force` or its version is newer: 1 if stored,
 * 0 if not, LD_ENOMEM. */
static int put(struct mock *m, const ld_kind *kind, const char *key, json_t *item, bool force)
{
    json_t *items = items_of(m, kind);
    if (!items)
        return LD_ENOMEM;
    json_t *old = json_object_get(items, key);
    if (!force && old && ld_item_version(old) >= ld_item_version(item))
        return 0;
    return json_object_set_new(items, key, ref(item)) == 0 ? 1 : LD_ENOMEM;
}

static void complete_write(ld_future *out, int rc)
{
    if (rc < 0)
        ld_future_reject(out, rc, NULL);
    else
        ld_future_fulfill_bool(out, rc == 1);
    ld_future_unref(out);
}

static void mock_upsert(void *impl, const ld_kind *kind, const json_t *item,
                        const struct ld_item_info *info, ld_future *out)
{
    struct mock *m = impl;
    if (!counted_or_failed(m, LD_MOCK_OP_UPSERT, out))
        complete_write(out, put(m, kind, info->key, (json_t *)item, false));
}

static int tombstone_put(struct mock *m, const ld_kind *kind, const char *key, int64_t version,
                         bool force)
{
    json_t *tomb = ld_tombstone_new(key, version);
    if (!tomb) {
        /* NULL for a key that is not valid UTF-8, or without memory: jansson
         * tells them apart (it refuses such a string too) */
        json_t *probe = json_string(key);
        json_decref(probe);
        return probe ? LD_ENOMEM : LD_EINVAL;
    }
    int rc = put(m, kind, key, tomb, force);
    json_decref(tomb);
    return rc;
}

static void mock_del(void *impl, const ld_kind *kind, const char *key, int64_t version,
                     ld_future *out)
{
    struct mock *m = impl;
    if (!counted_or_failed(m, LD_MOCK_OP_DELETE, out))
        complete_write(out, tombstone_put(m, kind, key, version, false));
}

static void mock_initialized(void *impl, ld_future *out)
{
    struct mock *m = impl;
    if (counted_or_failed(m, LD_MOCK_OP_INITIALIZED, out))
        return;
    ld_future_fulfill_bool(out, m->inited);
    ld_future_unref(out);
}

static void release(void *impl)
{
    struct mock *m = impl;
    json_decref(m->data);
    json_decref(m->inits);
}

static const struct ld_store_ops mock_ops = {
    .version = LD_STORE_OPS_VERSION,
    .get = mock_get,
    .all = mock_all,
    .init = mock_init,
    .upsert = mock_upsert,
    .del = mock_del,
    .initialized = mock_initialized,
    .close = NULL,
    .free = ld__mock_free,
    .describe = ld__mock_describe,
};

ld_store *ld_mock_store_new(struct event_base *base)
{
    struct mock *m = ld__mock_alloc(base, sizeof(*m), &mock_ops, release);
    if (!m)
        return NULL;
    m->data = json_object();
    m->inits = json_array();
    return ld__mock_finish(m, m->data && m->inits ? ld_store_new(base, &mock_ops, m) : NULL);
}

int ld_mock_store_init_count(const ld_store *store)
{
    const struct mock *m = mock_of(store);
    return m ? (int)json_array_size(m->inits) : LD_EINVAL;
}

const json_t *ld_mock_store_init_data(const ld_store *store, size_t i)
{
    const struct mock *m = mock_of(store);
    return m ? json_array_get(m->inits, i) : NULL;
}

int ld_mock_store_calls(const ld_store *store, enum ld_mock_op op)
{
    const struct mock *m = mock_of(store);
    if (!m || (unsigned)op > LD_MOCK_OP_ANY)
        return LD_EINVAL;
    if (op != LD_MOCK_OP_ANY)
        return m->calls[op];
    int total = 0;
    for (int i = 0; i < NOPS; i++)
        total += m->calls[i];
    return total;
}

int ld_mock_store_force_set(ld_store *store, const ld_kind *kind, const json_t *item)
{
    struct mock *m = mock_of(store);
    struct ld_item_info info;
    if (!m || !kind || ld_item_parse(item, &info, NULL) != 0)
        return LD_EINVAL;
    int rc = put(m, kind, info.key, (json_t *)item, true);
    return rc < 0 ? rc : 0;
}

int ld_mock_store_force_delete(ld_store *store, const ld_kind *kind, const char *key,
                               int64_t version)
{
    struct mock *m = mock_of(store);
    if (!m || !kind || !key || !*key || version < 0)
        return LD_EINVAL;
    int rc = tombstone_put(m, kind, key, version, true);
    return rc < 0 ? rc : 0;
}

int ld_mock_store_fail_next(ld_store *store, enum ld_mock_op op, int n, int code)
{
    struct mock *m = mock_of(store);
    if (!m || (unsigned)op > LD_MOCK_OP_ANY || n < 0 || code >= 0)
        return LD_EINVAL;
    m->fail_left[op] = n;
    m->fail_code[op] = code;
    return 0;
}

int ld_mock_store_set_available(ld_store *store, bool available)
{
    if (!mock_of(store))
        return LD_EINVAL;
    return ld_store_update_status(store, available, false);
}
