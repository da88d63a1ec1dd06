/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* Version 2 of struct ld_store_ops: the members that answer at once, their
 * LD_EBUSY fallback to the asynchronous members, and how the front mixes the
 * two in issue order. The "hybrid" store here answers every other call at
 * once and the others later (from the loop); check_contract.c runs the store
 * contract on it. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <ldasync/ldasync.h>

#include "check_suites.h"
#include "check_util.h"

/* ---- the hybrid store --------------------------------------------------- */

struct hybrid {
    struct event_base *base;
    json_t *data; /* namespace -> {key -> item}, tombstones included */
    bool inited;
    unsigned calls;   /* _now calls: every other one says LD_EBUSY */
    bool busy_always; /* every _now call says LD_EBUSY */
    int fail_now;     /* the next _now call answers this code (0: none) */
    int leases;       /* leases given and not released yet */
    int now_calls[6]; /* get, all, init, upsert, del, prefetch */
    /* init_now sets *why to it when it says LD_EBUSY */
    const char *busy_why;
};

enum { H_GET, H_ALL, H_INIT, H_UPSERT, H_DEL, H_PREFETCH };

static json_t *items_of(struct hybrid *h, const ld_kind *kind)
{
    const char *ns = ld_kind_namespace(kind);
    json_t *items = json_object_get(h->data, ns);
    if (!items) {
        json_object_set_new(h->data, ns, json_object());
        items = json_object_get(h->data, ns);
    }
    return items;
}

static json_t *get_item(struct hybrid *h, const ld_kind *kind, const char *key)
{
    json_t *item = json_object_get(items_of(h, kind), key);
    return item && json_is_true(json_object_get(item, "deleted")) ? NULL : item;
}

static json_t *all_items(struct hybrid *h, const ld_kind *kind)
{
    json_t *all = json_object();
    const char *key;
    json_t *item;
    json_object_foreach(items_of(h, kind), key, item)
    {
        if (!json_is_true(json_object_get(item, "deleted")))
            json_object_set(all, key, item);
    }
    return all;
}

static int put(struct hybrid *h, const ld_kind *kind, const char *key, json_t *item,
               int64_t version)
{
    json_t *old = json_object_get(items_of(h, kind), key);
    if (old && json_integer_value(json_object_get(old, "version")) >= version) {
        json_decref(item);
        return 0;
    }
    json_object_set_new(items_of(h, kind), key, item);
    return 1;
}

/* Replaces the data with the namespaces of the two kinds in all_data (an
 * exact key: "features\0x" is no kind's). */
static void load(struct hybrid *h, const json_t *all_data)
{
    const ld_kind *kinds[2] = {ld_kind_features(), ld_kind_segments()};
    json_decref(h->data);
    h->data = json_object();
    for (int i = 0; i < 2; i++) {
        const char *ns = ld_kind_namespace(kinds[i]);
        json_t *items = json_object_getn(all_data, ns, strlen(ns));
        json_object_set_new(h->data, ns, items ? json_copy(items) : json_object());
    }
    h->inited = true;
}

/* The answer of a _now call, or LD_EBUSY / an injected failure. */
static int busy(struct hybrid *h, int which)
{
    h->now_calls[which]++;
    if (h->fail_now) {
        int code = h->fail_now;
        h->fail_now = 0;
        return code;
    }
    return h->busy_always || (h->calls++ & 1) ? LD_EBUSY : 0;
}

struct lease {
    struct ld_lease l;
    json_t *item;
    struct hybrid *h;
};

static void lease_release(struct ld_lease *l)
{
    struct lease *le = (struct lease *)l;
    le->h->leases--;
    json_decref(le->item);
    free(le);
}

static int h_get_now(void *impl, const ld_kind *kind, const char *key, size_t len, json_t **item,
                     struct ld_lease **lease)
{
    struct hybrid *h = impl;
    int rc = busy(h, H_GET);
    if (rc != 0)
        return rc;
    ck_assert_uint_eq(len, strlen(key));
    json_t *found = get_item(h, kind, key);
    struct lease *le = found ? malloc(sizeof(*le)) : NULL;
    if (le) { /* borrowed item, kept alive by a lease */
        le->l.release = lease_release;
        le->item = json_incref(found);
        le->h = h;
        h->leases++;
        *lease = &le->l;
    } else { /* a new reference */
        *lease = NULL;
    }
    *item = le ? found : json_incref(found);
    return 0;
}

static int h_all_now(void *impl, const ld_kind *kind, json_t **all)
{
    struct hybrid *h = impl;
    int rc = busy(h, H_ALL);
    if (rc == 0)
        *all = all_items(h, kind);
    return rc;
}

static int h_init_now(void *impl, const json_t *all_data, const char **why)
{
    struct hybrid *h = impl;
    int rc = busy(h, H_INIT);
    if (rc == LD_EBUSY && h->busy_why)
        *why = h->busy_why; /* allowed: *why means something only with LD_EINVAL */
    if (rc != 0)
        return rc;
    if (ld_data_validate(all_data, why) != 0)
        return LD_EINVAL;
    load(h, all_data);
    return 0;
}

static int h_upsert_now(void *impl, const ld_kind *kind, const json_t *item,
                        const struct ld_item_info *info)
{
    struct hybrid *h = impl;
    int rc = busy(h, H_UPSERT);
    return rc ? rc : put(h, kind, info->key, json_incref((json_t *)item), info->version);
}

static int h_del_now(void *impl, const ld_kind *kind, const char *key, int64_t version)
{
    struct hybrid *h = impl;
    int rc = busy(h, H_DEL);
    return rc ? rc : put(h, kind, key, ld_tombstone_new(key, version), version);
}

static void h_prefetch(void *impl, const ld_kind *kind, const char *key, size_t len)
{
    struct hybrid *h = impl;
    (void)kind;
    ck_assert_uint_eq(len, strlen(key));
    h->now_calls[H_PREFETCH]++;
}

/* The asynchronous members apply the operation at once and complete `out`
 * on a later loop pass: the front must keep the results in issue order. */
struct later {
    ld_future *out;
    json_t *v;
    int kind; /* 0: json, 1: bool, 2: none */
    bool b;
};

static void later_cb(evutil_socket_t fd, short what, void *arg)
{
    struct later *l = arg;
    (void)fd;
    (void)what;
    if (l->kind == 0)
        ld_future_fulfill_json(l->out, l->v);
    else if (l->kind == 1)
        ld_future_fulfill_bool(l->out, l->b);
    else
        ld_future_fulfill(l->out);
    ld_future_unref(l->out);
    free(l);
}

static void complete_later(struct hybrid *h, ld_future *out, int kind, json_t *v, bool b)
{
    struct later *l = malloc(sizeof(*l));
    static const struct timeval zero = {0, 0};
    ck_assert_ptr_nonnull(l);
    *l = (struct later){out, v, kind, b};
    ck_assert_int_eq(event_base_once(h->base, -1, EV_TIMEOUT, later_cb, l, &zero), 0);
}

static void h_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    struct hybrid *h = impl;
    complete_later(h, out, 0, json_incref(get_item(h, kind, key)), false);
}

static void h_all(void *impl, const ld_kind *kind, ld_future *out)
{
    struct hybrid *h = impl;
    complete_later(h, out, 0, all_items(h, kind), false);
}

static void h_init(void *impl, const json_t *all_data, ld_future *out)
{
    struct hybrid *h = impl;
    load(h, all_data);
    complete_later(h, out, 2, NULL, false);
}

static void h_upsert(void *impl, const ld_kind *kind, const json_t *item,
                     const struct ld_item_info *info, ld_future *out)
{
    struct hybrid *h = impl;
    int rc = put(h, kind, info->key, json_incref((json_t *)item), info->version);
    complete_later(h, out, 1, NULL, rc == 1);
}

static void h_del(void *impl, const ld_kind *kind, const char *key, int64_t version, ld_future *out)
{
    struct hybrid *h = impl;
    int rc = put(h, kind, key, ld_tombstone_new(key, version), version);
    complete_later(h, out, 1, NULL, rc == 1);
}

static void h_initialized(void *impl, ld_future *out)
{
    struct hybrid *h = impl;
    ld_future_fulfill_bool(out, h->inited);
    ld_future_unref(out);
}

static void h_free(void *impl)
{
    struct hybrid *h = impl;
    ck_assert_int_eq(h->leases, 0); /* every lease comes back before free */
    json_decref(h->data);
    free(h);
}

static const char *h_describe(void *impl)
{
    (void)impl;
    return "hybrid";
}

static const struct ld_store_ops hybrid_ops = {
    .version = LD_STORE_OPS_VERSION,
    .get = h_get,
    .all = h_all,
    .init = h_init,
    .upsert = h_upsert,
    .del = h_del,
    .initialized = h_initialized,
    .free = h_free,
    .describe = h_describe,
    .get_now = h_get_now,
    .all_now = h_all_now,
    .init_now = h_init_now,
    .upsert_now = h_upsert_now,
    .del_now = h_del_now,
    .prefetch = h_prefetch,
};

static ld_store *hybrid_new(struct event_base *base, const struct ld_store_ops *ops,
                            struct hybrid **out)
{
    struct hybrid *h = calloc(1, sizeof(*h));
    ck_assert_ptr_nonnull(h);
    h->base = base;
    h->data = json_object();
    ld_store *s = ld_store_new(base, ops, h);
    ck_assert_ptr_nonnull(s);
    if (out)
        *out = h;
    return s;
}

ld_store *ld_test_hybrid_store_new(struct event_base *base)
{
    return hybrid_new(base, &hybrid_ops, NULL);
}

/* ---- tests --------------------------------------------------------------- */

#define B ld_test_base

static json_t *flag(const char *key, int version)
{
    return json_pack("{s:s, s:i, s:b}", "key", key, "version", version, "on", 1);
}

/* An upsert of flag(key, version), which the store borrows. */
static ld_future *upsert_flag(ld_store *s, const char *key, int version)
{
    json_t *item = flag(key, version);
    ld_future *f = ld_store_upsert(s, ld_kind_features(), item);
    json_decref(item);
    return f;
}

START_TEST(test_new_checks_the_version_and_each_operation_pair)
{
    struct hybrid *h = calloc(1, sizeof(*h));
    struct ld_store_ops ops = hybrid_ops;
    ops.version = LD_STORE_OPS_VERSION + 1;
    ck_assert_ptr_null(ld_store_new(B, &ops, h));
    ops.version = 0;
    ck_assert_ptr_null(ld_store_new(B, &ops, h));
    ops = hybrid_ops;
    ops.get = NULL; /* get_now stands for it */
    ld_store_free(ld_store_new(B, &ops, calloc(1, sizeof(struct hybrid))));
    ops.get_now = NULL; /* neither: refused */
    ck_assert_ptr_null(ld_store_new(B, &ops, h));
    ops = hybrid_ops;
    ops.del = NULL;
    ops.del_now = NULL;
    ck_assert_ptr_null(ld_store_new(B, &ops, h));
    ops = hybrid_ops;
    ops.initialized = NULL; /* no _now twin: always required */
    ck_assert_ptr_null(ld_store_new(B, &ops, h));
    free(h);
}
END_TEST

/* A version 1 struct ends before the version 2 members: the front never
 * reads them, whatever follows the struct in memory. The struct is
 * allocated with exactly the version 1 size, so that ASan and valgrind
 * catch a read past it; the version 2 members of a full struct with
 * version 1 are not called either. */
START_TEST(test_a_version_1_struct_is_never_read_past_its_end)
{
    struct hybrid *h;
    const size_t v1_size = offsetof(struct ld_store_ops, get_now);
    const int v1 = 1;
    struct ld_store_ops *ops = malloc(v1_size);
    ck_assert_ptr_nonnull(ops);
    memcpy(ops, &hybrid_ops, v1_size);
    memcpy(ops, &v1, sizeof(v1)); /* the version, the first member */
    ld_store *s = hybrid_new(B, ops, &h);
    struct ld_store_ops full = hybrid_ops;
    full.version = 1; /* the _now members are set, but not part of a v1 struct */
    struct hybrid *h2;
    ld_store *s2 = hybrid_new(B, &full, &h2);
    ld_test_await_ok(ld_store_get(s2, ld_kind_features(), "a"));
    ck_assert_int_eq(h2->now_calls[H_GET], 0);
    ld_store_free(s2);
    ld_future *w = upsert_flag(s, "a", 1);
    ld_future *g = ld_store_get(s, ld_kind_features(), "a");
    ld_future *a = ld_store_all(s, ld_kind_features());
    ld_test_wait(a);
    ck_assert(ld_future_bool(w));
    ck_assert_ptr_nonnull(ld_future_json(g));
    ck_assert_int_eq(json_object_size(ld_future_json(a)), 1);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(h->now_calls[i], 0);
    ld_future_unref(w);
    ld_future_unref(g);
    ld_future_unref(a);
    ld_store_free(s);
    free(ops);
}
END_TEST

/* Results answered at once, later (LD_EBUSY, then the asynchronous member)
 * and at once while an earlier one waits complete in issue order, each with
 * its own answer. */
START_TEST(test_answers_at_once_and_later_complete_in_issue_order)
{
    struct hybrid *h;
    ld_store *s = hybrid_new(B, &hybrid_ops, &h);
    ld_future *f[8];
    f[0] = upsert_flag(s, "a", 1);                         /* now */
    f[1] = upsert_flag(s, "b", 1);                         /* busy: later */
    f[2] = ld_store_get(s, ld_kind_features(), "a");       /* now, queued */
    f[3] = ld_store_get(s, ld_kind_features(), "b");       /* busy: later */
    f[4] = ld_store_delete(s, ld_kind_features(), "a", 2); /* now, queued */
    f[5] = ld_store_all(s, ld_kind_features());            /* busy: later */
    f[6] = ld_store_get(s, ld_kind_features(), "a");       /* now: deleted */
    f[7] = upsert_flag(s, "b", 1);                         /* busy: not applied */
    for (int i = 0; i < 8; i++) {
        ck_assert(ld_future_is_pending(f[i]));
        ld_test_watch(f[i], i);
    }
    ld_test_wait(f[7]);
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(ld_test_order[i], i);
    ck_assert(ld_future_bool(f[0]));
    ck_assert(ld_future_bool(f[1]));
    ck_assert_str_eq(json_string_value(json_object_get(ld_future_json(f[2]), "key")), "a");
    ck_assert_str_eq(json_string_value(json_object_get(ld_future_json(f[3]), "key")), "b");
    ck_assert(ld_future_bool(f[4]));
    ck_assert_int_eq(json_object_size(ld_future_json(f[5])), 1);
    ck_assert_ptr_null(ld_future_json(f[6]));
    ck_assert(!ld_future_bool(f[7]));
    ck_assert_int_eq(h->now_calls[H_GET], 3);
    ck_assert_int_eq(h->now_calls[H_PREFETCH], 3); /* once per valid upsert */
    for (int i = 0; i < 8; i++)
        ld_future_unref(f[i]);
    ld_test_flush();
    ck_assert_int_eq(h->leases, 0); /* released with the results */
    ld_store_free(s);
}
END_TEST

/* A get answered at once with a lease: the result reads the borrowed item
 * and releases the lease once, when it is freed; a future that adopts the
 * item holds a reference of its own. */
START_TEST(test_a_lease_is_released_once_with_its_result)
{
    struct hybrid *h;
    ld_store *s = hybrid_new(B, &hybrid_ops, &h);
    h->busy_always = true;
    ld_test_await_ok(upsert_flag(s, "a", 1));
    ld_test_flush(); /* the front is idle again */
    h->busy_always = false;
    h->calls = 0; /* the next _now call answers */
    ld_future *g = ld_store_get(s, ld_kind_features(), "a");
    ck_assert_int_eq(h->leases, 1);
    ld_future *out = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(out, ld_future_ref(g)), 0);
    ld_test_wait(out);
    ck_assert_ptr_eq(ld_future_json(out), ld_future_json(g));
    ld_future_unref(g);
    ld_test_flush();
    ck_assert_int_eq(h->leases, 0);
    ck_assert_str_eq(json_string_value(json_object_get(ld_future_json(out), "key")), "a");
    ld_future_unref(out);
    ld_store_free(s);
}
END_TEST

/* A _now member's error rejects the operation with it, answered at once or
 * queued behind an operation that waits. */
START_TEST(test_a_now_error_rejects_the_operation)
{
    struct hybrid *h;
    ld_store *s = hybrid_new(B, &hybrid_ops, &h);
    h->fail_now = LD_ESTORE;
    ld_test_expect_error(ld_store_get(s, ld_kind_features(), "a"), LD_ESTORE, NULL);
    h->calls = 1; /* the next call waits (LD_EBUSY), the one after answers */
    ld_future *first = ld_store_all(s, ld_kind_features());
    h->fail_now = LD_ESTORE;
    ld_future *second = ld_store_delete(s, ld_kind_features(), "a", 1);
    ld_test_watch(first, 0);
    ld_test_watch(second, 1);
    ld_test_expect_error(second, LD_ESTORE, NULL);
    ck_assert(ld_future_is_fulfilled(first));
    ck_assert_int_eq(ld_test_order[0], 0);
    ld_future_unref(first);
    h->calls = 0;
    h->fail_now = LD_ENOMEM;
    ld_test_expect_error(upsert_flag(s, "a", 1), LD_ENOMEM, NULL);
    ld_store_free(s);
}
END_TEST

/* init_now validates: its LD_EINVAL message reaches the caller; after
 * LD_EBUSY the front validates for the asynchronous init. */
START_TEST(test_init_now_validates_and_busy_init_is_validated_by_the_front)
{
    struct hybrid *h;
    ld_store *s = hybrid_new(B, &hybrid_ops, &h);
    json_t *bad = json_pack("{s:{s:{s:i}}}", "features", "a", "version", 1); /* no key */
    ld_test_expect_error(ld_store_init(s, bad), LD_EINVAL, "key");
    ck_assert_int_eq(h->now_calls[H_INIT], 1);
    ck_assert(!h->inited);
    ld_test_expect_error(ld_store_init(s, bad), LD_EINVAL, "key"); /* LD_EBUSY: the front */
    ck_assert_int_eq(h->now_calls[H_INIT], 2);
    ck_assert(!h->inited);
    json_decref(bad);
    json_t *good = json_pack("{s:{s:{s:s, s:i}}}", "features", "a", "key", "a", "version", 1);
    ld_test_await_ok(ld_store_init(s, good)); /* at once */
    ld_test_await_ok(ld_store_init(s, good)); /* LD_EBUSY: the asynchronous init */
    ck_assert(h->inited);
    json_decref(good);
    ld_store_free(s);
}
END_TEST

/* What init_now leaves in *why when it says LD_EBUSY is not a reason to
 * reject: valid data goes to the asynchronous init, answered at once or
 * queued behind an operation that waits. */
START_TEST(test_busy_init_now_with_why_set_still_inits_valid_data)
{
    struct hybrid *h;
    ld_store *s = hybrid_new(B, &hybrid_ops, &h);
    h->busy_always = true;
    h->busy_why = "init_now was busy";
    json_t *good = json_pack("{s:{s:{s:s, s:i}}}", "features", "a", "key", "a", "version", 1);
    ld_test_await_ok(ld_store_init(s, good)); /* at once: LD_EBUSY */
    ck_assert(h->inited);
    h->inited = false;
    ld_future *first = ld_store_all(s, ld_kind_features()); /* waits for the loop */
    ld_test_await_ok(ld_store_init(s, good));               /* queued: LD_EBUSY */
    ck_assert(h->inited);
    ck_assert_int_eq(h->now_calls[H_INIT], 2);
    ld_future_unref(first);
    json_decref(good);
    ld_store_free(s);
}
END_TEST

/* Once the store is closed its implementation hears of nothing more: an
 * upsert is rejected with LD_ECLOSED without a prefetch of its key (an
 * implementation may have let go of its backend in close). */
START_TEST(test_no_prefetch_after_close)
{
    struct hybrid *h;
    ld_store *s = hybrid_new(B, &hybrid_ops, &h);
    ld_test_await_ok(upsert_flag(s, "a", 1));
    ck_assert_int_eq(h->now_calls[H_PREFETCH], 1);
    ld_test_await_ok(ld_store_close(s));
    ld_test_expect_error(upsert_flag(s, "b", 1), LD_ECLOSED, NULL);
    ck_assert_int_eq(h->now_calls[H_PREFETCH], 1);
    ld_store_free(s);
}
END_TEST

/* Without an asynchronous twin, LD_EBUSY rejects the operation with
 * LD_EBUSY: at once, and behind an operation that waits. */
START_TEST(test_busy_without_an_asynchronous_twin_is_ebusy)
{
    struct hybrid *h;
    struct ld_store_ops ops = hybrid_ops;
    ops.get = NULL;
    ops.all = NULL;
    ops.init = NULL;
    ops.upsert = NULL;
    ops.del = NULL;
    ld_store *s = hybrid_new(B, &ops, &h);
    h->busy_always = true;
    ld_test_expect_error(ld_store_get(s, ld_kind_features(), "a"), LD_EBUSY, "asynchronous");
    ld_test_expect_error(ld_store_all(s, ld_kind_features()), LD_EBUSY, NULL);
    ld_test_expect_error(upsert_flag(s, "a", 1), LD_EBUSY, NULL);
    ld_test_expect_error(ld_store_delete(s, ld_kind_features(), "a", 1), LD_EBUSY, NULL);
    json_t *good = json_pack("{s:{}}", "features");
    ld_test_expect_error(ld_store_init(s, good), LD_EBUSY, NULL);
    json_decref(good);
    ld_store_free(s);
}
END_TEST

/* ---- ld_store_initialized_now ----------------------------------------- */

START_TEST(test_initialized_now_answers_within_the_call)
{
    ld_store *s = ld_memory_store_new(B);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(ld_store_initialized_now(s), 0);
    json_t *data = json_pack("{s:{}, s:{}}", "features", "segments");
    ld_future *f = ld_store_init(s, data);
    json_decref(data);
    /* The init took effect within its call; only its answer waits. */
    ck_assert_int_eq(ld_store_initialized_now(s), 1);
    ld_test_await_ok(f);
    ck_assert_int_eq(ld_store_initialized_now(s), 1);
    ld_store_free(s);
}
END_TEST

START_TEST(test_initialized_now_bad_input_and_closed)
{
    ck_assert_int_eq(ld_store_initialized_now(NULL), LD_EINVAL);
    ld_store *s = ld_memory_store_new(B);
    ld_test_await_ok(ld_store_close(s));
    ck_assert_int_eq(ld_store_initialized_now(s), LD_ECLOSED);
    ld_store_free(s);
}
END_TEST

/* The hybrid store's initialized_now: the injected failure, LD_EBUSY when
 * busy_always, else its state. */
static int h_initialized_now(void *impl)
{
    struct hybrid *h = impl;
    if (h->fail_now) {
        int code = h->fail_now;
        h->fail_now = 0;
        return code;
    }
    return h->busy_always ? LD_EBUSY : h->inited;
}

START_TEST(test_initialized_now_is_ebusy_while_an_operation_waits)
{
    struct hybrid *h;
    struct ld_store_ops ops = hybrid_ops;
    ops.initialized_now = h_initialized_now;
    ld_store *s = hybrid_new(B, &ops, &h);
    h->busy_always = true; /* the get goes to the asynchronous twin */
    ld_future *g = ld_store_get(s, ld_kind_features(), "a");
    h->busy_always = false;
    ck_assert(ld_future_is_pending(g));
    ck_assert_int_eq(ld_store_initialized_now(s), LD_EBUSY);
    ld_future_unref(ld_test_fulfilled(g));
    ck_assert_int_eq(ld_store_initialized_now(s), 0);
    ld_store_free(s);
}
END_TEST

START_TEST(test_initialized_now_gives_the_implementation_s_answer)
{
    struct hybrid *h;
    struct ld_store_ops ops = hybrid_ops;
    ops.initialized_now = h_initialized_now;
    ld_store *s = hybrid_new(B, &ops, &h);
    ck_assert_int_eq(ld_store_initialized_now(s), 0);
    h->inited = true;
    ck_assert_int_eq(ld_store_initialized_now(s), 1);
    h->busy_always = true;
    ck_assert_int_eq(ld_store_initialized_now(s), LD_EBUSY);
    h->busy_always = false;
    h->fail_now = LD_ESTORE;
    ck_assert_int_eq(ld_store_initialized_now(s), LD_ESTORE);
    ck_assert_int_eq(ld_store_initialized_now(s), 1);
    ld_store_free(s);
}
END_TEST

/* Without initialized_now (a version 1 struct, or a version 2 one that
 * leaves it NULL), `initialized` answers when it completes within the
 * call. */
START_TEST(test_initialized_now_without_the_member_asks_initialized)
{
    struct hybrid *h;
    ld_store *s = hybrid_new(B, &hybrid_ops, &h);
    ck_assert_int_eq(ld_store_initialized_now(s), 0);
    h->inited = true;
    ck_assert_int_eq(ld_store_initialized_now(s), 1);
    ld_store_free(s);
}
END_TEST

/* ---- ld_store_get_now --------------------------------------------------- */

START_TEST(test_get_now_answers_within_the_call)
{
    ld_store *s = ld_memory_store_new(B);
    ck_assert_ptr_nonnull(s);
    json_t *item = json_true();
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "a", &item), 0);
    ck_assert_ptr_null(item); /* missing */
    ld_future *u = upsert_flag(s, "a", 3);
    /* the upsert took effect within its call; only its answer waits */
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "a", &item), 0);
    ck_assert_ptr_nonnull(item);
    ck_assert_int_eq(json_integer_value(json_object_get(item, "version")), 3);
    ld_test_await_ok(u);
    /* a new reference: it outlives the item's replacement and deletion */
    ld_test_await_ok(upsert_flag(s, "a", 4));
    ld_test_await_ok(ld_store_delete(s, ld_kind_features(), "a", 5));
    ck_assert_int_eq(json_integer_value(json_object_get(item, "version")), 3);
    ck_assert_int_eq(json_object_get(item, "key") != NULL, 1);
    json_decref(item);
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "a", &item), 0);
    ck_assert_ptr_null(item); /* a tombstone */
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_segments(), "a", &item), 0);
    ck_assert_ptr_null(item);
    ld_store_free(s);
}
END_TEST

START_TEST(test_get_now_bad_input_and_closed)
{
    ld_store *s = ld_memory_store_new(B);
    json_t *item = json_true();
    ck_assert_int_eq(ld_store_get_now(NULL, ld_kind_features(), "a", &item), LD_EINVAL);
    ck_assert_ptr_null(item);
    ck_assert_int_eq(ld_store_get_now(s, NULL, "a", &item), LD_EINVAL);
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), NULL, &item), LD_EINVAL);
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "", &item), LD_EINVAL);
    item = json_true();
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "\xff", &item), LD_EINVAL);
    ck_assert_ptr_null(item);
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "a", NULL), LD_EINVAL);
    ld_test_await_ok(ld_store_close(s));
    item = json_true();
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "a", &item), LD_ECLOSED);
    ck_assert_ptr_null(item);
    ld_store_free(s);
}
END_TEST

START_TEST(test_get_now_is_ebusy_while_an_operation_waits)
{
    struct hybrid *h;
    ld_store *s = hybrid_new(B, &hybrid_ops, &h);
    ld_test_await_ok(upsert_flag(s, "a", 1));
    h->busy_always = true; /* the get goes to the asynchronous twin */
    ld_future *g = ld_store_get(s, ld_kind_features(), "a");
    h->busy_always = false;
    ck_assert(ld_future_is_pending(g));
    json_t *item = json_true();
    int calls = h->now_calls[H_GET];
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "a", &item), LD_EBUSY);
    ck_assert_ptr_null(item);
    ck_assert_int_eq(h->now_calls[H_GET], calls); /* not asked: it must not overtake */
    ld_future_unref(ld_test_fulfilled(g));
    int rc;
    do /* the hybrid answers every other call at once */
        rc = ld_store_get_now(s, ld_kind_features(), "a", &item);
    while (rc == LD_EBUSY);
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_nonnull(item);
    json_decref(item);
    ld_store_free(s);
}
END_TEST

/* The memory store loads an init of more than 2048 items in slices; until
 * the init is in, a get would overtake it. */
START_TEST(test_get_now_is_ebusy_while_a_large_init_loads)
{
    ld_store *s = ld_memory_store_new(B);
    json_t *flags = json_object();
    for (int i = 0; i < 3000; i++) {
        char key[16];
        snprintf(key, sizeof key, "f%d", i);
        json_object_set_new(flags, key, json_pack("{s:s, s:i}", "key", key, "version", 1));
    }
    json_t *data = json_pack("{s:o, s:{}}", "features", flags, "segments");
    ld_future *init = ld_store_init(s, data);
    json_decref(data);
    json_t *item = json_true();
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "f7", &item), LD_EBUSY);
    ck_assert_ptr_null(item);
    ld_test_await_ok(init);
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "f7", &item), 0);
    ck_assert_ptr_nonnull(item);
    json_decref(item);
    ld_store_free(s);
}
END_TEST

/* The implementation's answer: LD_EBUSY and errors as they come; an item
 * under a lease comes as a new reference, the lease released at once. */
START_TEST(test_get_now_gives_the_implementation_s_answer)
{
    struct hybrid *h;
    ld_store *s = hybrid_new(B, &hybrid_ops, &h);
    ld_test_await_ok(upsert_flag(s, "a", 7));
    h->busy_always = true;
    json_t *item = json_true();
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "a", &item), LD_EBUSY);
    ck_assert_ptr_null(item);
    h->busy_always = false;
    h->fail_now = LD_ESTORE;
    item = json_true();
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "a", &item), LD_ESTORE);
    ck_assert_ptr_null(item);
    int rc;
    do { /* the hybrid answers every other call at once */
        rc = ld_store_get_now(s, ld_kind_features(), "a", &item);
    } while (rc == LD_EBUSY);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(h->leases, 0); /* the lease was released within the call */
    ck_assert_int_eq(json_integer_value(json_object_get(item, "version")), 7);
    json_decref(item);
    ld_store_free(s);
}
END_TEST

/* A store without get_now (version 1 of struct ld_store_ops) never answers
 * within the call. */
START_TEST(test_get_now_without_the_member_is_ebusy)
{
    struct hybrid *h;
    struct ld_store_ops ops = hybrid_ops;
    ops.version = 1;
    ld_store *s = hybrid_new(B, &ops, &h);
    json_t *item = json_true();
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "a", &item), LD_EBUSY);
    ck_assert_ptr_null(item);
    ck_assert_int_eq(h->now_calls[H_GET], 0);
    ld_store_free(s);
}
END_TEST

/* {"features": {f0..f(n-1) at `version`}, "segments": {}} */
static json_t *many_flags(int n, int version)
{
    json_t *flags = json_object();
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "f%d", i);
        json_object_set_new(flags, key, json_pack("{s:s, s:i}", "key", key, "version", version));
    }
    return json_pack("{s:o, s:{}}", "features", flags, "segments");
}

/* Items taken with get_now are the caller's: a large init that replaces
 * every item (its old table let go of slot by slot, over passes of the
 * loop), a delete and freeing the store leave them whole (ASan). A get
 * issued during the init waits for it, and get_now answers again once it
 * is in, with the new data. */
START_TEST(test_get_now_items_outlive_a_large_init_and_the_store)
{
    ld_store *s = ld_memory_store_new(B);
    json_t *data = many_flags(3000, 1);
    ld_test_await_ok(ld_store_init(s, data));
    json_decref(data);
    json_t *held[3] = {NULL, NULL, NULL};
    const char *keys[3] = {"f0", "f1500", "f2999"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), keys[i], &held[i]), 0);
        ck_assert_ptr_nonnull(held[i]);
    }
    data = many_flags(5000, 2);
    ld_future *init = ld_store_init(s, data);
    json_decref(data);
    ld_future *g = ld_store_get(s, ld_kind_features(), "f0");
    json_t *item = json_true();
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "f0", &item), LD_EBUSY);
    ck_assert_ptr_null(item);
    ld_test_await_ok(init);
    ld_test_await_ok(ld_store_delete(s, ld_kind_features(), "f1500", 9));
    ld_future *done = ld_test_fulfilled(g);
    ck_assert_int_eq(json_integer_value(json_object_get(ld_future_json(done), "version")), 2);
    ld_future_unref(done);
    ck_assert_int_eq(ld_store_get_now(s, ld_kind_features(), "f4999", &item), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(item, "version")), 2);
    json_decref(item);
    for (int k = 0; k < 20; k++) /* the old table's slots are let go of */
        event_base_loop(B, EVLOOP_NONBLOCK);
    ld_store_free(s);
    event_base_loop(B, EVLOOP_NONBLOCK);
    for (int i = 0; i < 3; i++) {
        ck_assert_str_eq(json_string_value(json_object_get(held[i], "key")), keys[i]);
        ck_assert_int_eq(json_integer_value(json_object_get(held[i], "version")), 1);
        json_decref(held[i]);
    }
}
END_TEST

struct in_cb {
    ld_store *s;
    int rc;
    json_t *item;
    int calls;
};

static void get_now_in_cb(ld_future *f, void *arg)
{
    struct in_cb *c = arg;
    (void)f;
    c->calls++;
    c->rc = ld_store_get_now(c->s, ld_kind_features(), "a", &c->item);
}

/* From the callback of an operation's future: the write answered before
 * is seen; after close (even from a callback) LD_ECLOSED. */
START_TEST(test_get_now_from_a_callback_and_after_close)
{
    ld_store *s = ld_memory_store_new(B);
    struct in_cb c = {s, 99, NULL, 0};
    ld_future *u = upsert_flag(s, "a", 3);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(u), get_now_in_cb, &c), 0);
    ld_test_await_ok(u);
    ck_assert_int_eq(c.calls, 1);
    ck_assert_int_eq(c.rc, 0);
    ck_assert_int_eq(json_integer_value(json_object_get(c.item, "version")), 3);
    json_decref(c.item);
    c.item = NULL;
    u = upsert_flag(s, "a", 4);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(u), get_now_in_cb, &c), 0);
    ld_future *closed = ld_store_close(s);
    ld_test_await_ok(u);
    ck_assert_int_eq(c.calls, 2);
    ck_assert_int_eq(c.rc, LD_ECLOSED);
    ck_assert_ptr_null(c.item);
    ld_test_await_ok(closed);
    ld_store_free(s);
}
END_TEST

Suite *ld_suite_store_now(void)
{
    Suite *s = suite_create("store_now");
    TCase *tc = tcase_create("ops_v2");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_new_checks_the_version_and_each_operation_pair);
    tcase_add_test(tc, test_a_version_1_struct_is_never_read_past_its_end);
    tcase_add_test(tc, test_answers_at_once_and_later_complete_in_issue_order);
    tcase_add_test(tc, test_a_lease_is_released_once_with_its_result);
    tcase_add_test(tc, test_a_now_error_rejects_the_operation);
    tcase_add_test(tc, test_init_now_validates_and_busy_init_is_validated_by_the_front);
    tcase_add_test(tc, test_busy_without_an_asynchronous_twin_is_ebusy);
    tcase_add_test(tc, test_busy_init_now_with_why_set_still_inits_valid_data);
    tcase_add_test(tc, test_no_prefetch_after_close);
    tcase_add_test(tc, test_initialized_now_answers_within_the_call);
    tcase_add_test(tc, test_initialized_now_bad_input_and_closed);
    tcase_add_test(tc, test_initialized_now_is_ebusy_while_an_operation_waits);
    tcase_add_test(tc, test_initialized_now_gives_the_implementation_s_answer);
    tcase_add_test(tc, test_initialized_now_without_the_member_asks_initialized);
    tcase_add_test(tc, test_get_now_answers_within_the_call);
    tcase_add_test(tc, test_get_now_bad_input_and_closed);
    tcase_add_test(tc, test_get_now_is_ebusy_while_an_operation_waits);
    tcase_add_test(tc, test_get_now_is_ebusy_while_a_large_init_loads);
    tcase_add_test(tc, test_get_now_gives_the_implementation_s_answer);
    tcase_add_test(tc, test_get_now_without_the_member_is_ebusy);
    tcase_add_test(tc, test_get_now_items_outlive_a_large_init_and_the_store);
    tcase_add_test(tc, test_get_now_from_a_callback_and_after_close);
    suite_add_tcase(s, tc);
    return s;
}
