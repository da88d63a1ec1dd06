/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * contract_catches: the store contract must fail on stores that break it.
 *
 * A small store over jansson objects with one bug switched on per
 * registration (and one registration without bugs) runs the contract suite
 * in a runner of its own, in fork mode; this program then checks that the
 * clean store passed every test, and that each buggy one failed with the
 * message that names its bug. Run by `make check`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/testing.h>

enum bug {
    BUG_NONE,
    BUG_EQUAL_VERSION_APPLIES,
    BUG_TOMBSTONES_IN_ALL,
    BUG_GET_RETURNS_TOMBSTONES,
    BUG_INIT_MERGES,
    BUG_ALWAYS_INITIALIZED,
    BUG_UPSERT_SAYS_FALSE,
    NBUGS
};

static const struct {
    const char *name;
    const char *message; /* part of a failure message the contract must give */
} expected[NBUGS] = {
    {"clean", NULL},
    {"equal-version-applies", "equal version returned true"},
    {"tombstones-in-all", "all contains the tombstone"},
    {"get-returns-tombstones", "returned a tombstone"},
    {"init-merges", "absent from its data"},
    {"always-initialized", "a new store says it is initialized"},
    {"upsert-says-false", "upsert of a newer version returned false"},
};

struct buggy {
    json_t *data; /* namespace -> {key -> item} */
    bool inited;
    enum bug bug;
};

static json_t *items_in(struct buggy *b, const char *ns)
{
    if (!json_object_get(b->data, ns))
        json_object_set_new(b->data, ns, json_object());
    return json_object_get(b->data, ns);
}

static json_t *items_of(struct buggy *b, const ld_kind *kind)
{
    return items_in(b, ld_kind_namespace(kind));
}

static void b_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    struct buggy *b = impl;
    json_t *item = json_object_get(items_of(b, kind), key);
    if (item && ld_item_is_deleted(item) && b->bug != BUG_GET_RETURNS_TOMBSTONES)
        item = NULL;
    ld_future_fulfill_json(out, json_incref(item));
    ld_future_unref(out);
}

static void b_all(void *impl, const ld_kind *kind, ld_future *out)
{
    struct buggy *b = impl;
    json_t *all = json_object();
    const char *key;
    json_t *item;
    json_object_foreach(items_of(b, kind), key, item)
    {
        if (!ld_item_is_deleted(item) || b->bug == BUG_TOMBSTONES_IN_ALL)
            json_object_set(all, key, item);
    }
    ld_future_fulfill_json(out, all);
    ld_future_unref(out);
}

static void b_init(void *impl, const json_t *all_data, ld_future *out)
{
    struct buggy *b = impl;
    if (b->bug != BUG_INIT_MERGES)
        json_object_clear(b->data);
    const char *ns;
    size_t ns_len;
    json_t *items;
    /* namespaces with their length: "features\0x" is not "features" */
    json_object_keylen_foreach((json_t *)all_data, ns, ns_len, items)
    {
        json_t *into = json_object_getn(b->data, ns, ns_len);
        if (!into) {
            into = json_object();
            json_object_setn_new(b->data, ns, ns_len, into);
        }
        json_object_update(into, items);
    }
    b->inited = true;
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void b_write(struct buggy *b, const ld_kind *kind, const char *key, json_t *item,
                    ld_future *out)
{
    json_t *items = items_of(b, kind);
    json_t *old = json_object_get(items, key);
    bool apply =
        !old || ld_item_version(old) < ld_item_version(item) ||
        (b->bug == BUG_EQUAL_VERSION_APPLIES && ld_item_version(old) == ld_item_version(item));
    if (apply)
        json_object_set(items, key, item);
    ld_future_fulfill_bool(out, apply && b->bug != BUG_UPSERT_SAYS_FALSE);
    ld_future_unref(out);
}

static void b_upsert(void *impl, const ld_kind *kind, const json_t *item,
                     const struct ld_item_info *info, ld_future *out)
{
    b_write(impl, kind, info->key, (json_t *)item, out);
}

static void b_del(void *impl, const ld_kind *kind, const char *key, int64_t version, ld_future *out)
{
    json_t *tomb = ld_tombstone_new(key, version);
    b_write(impl, kind, key, tomb, out);
    json_decref(tomb);
}

static void b_initialized(void *impl, ld_future *out)
{
    struct buggy *b = impl;
    ld_future_fulfill_bool(out, b->inited || b->bug == BUG_ALWAYS_INITIALIZED);
    ld_future_unref(out);
}

static void b_free(void *impl)
{
    struct buggy *b = impl;
    json_decref(b->data);
    free(b);
}

static const struct ld_store_ops buggy_ops = {
    .version = LD_STORE_OPS_VERSION,
    .get = b_get,
    .all = b_all,
    .init = b_init,
    .upsert = b_upsert,
    .del = b_del,
    .initialized = b_initialized,
    .free = b_free,
};

static ld_store *new_buggy(struct event_base *base, void *arg)
{
    struct buggy *b = calloc(1, sizeof(*b));
    b->data = json_object();
    b->bug = (enum bug)(intptr_t)arg;
    return ld_store_new(base, &buggy_ops, b);
}

int main(void)
{
    static const struct ld_store_contract_factory factory = {
        .version = LD_STORE_CONTRACT_FACTORY_VERSION,
        .new_store = new_buggy,
    };
    Suite *suite = suite_create("contract_catches");
    for (intptr_t bug = 0; bug < NBUGS; bug++)
        if (ld_store_contract_add_tests(suite, expected[bug].name, &factory, (void *)bug) != 0)
            return EXIT_FAILURE;
    SRunner *runner = srunner_create(suite);
    srunner_set_fork_status(runner, CK_FORK); /* failing tests leave their futures */
    srunner_run_all(runner, CK_SILENT);

    int failures[NBUGS] = {0}, named[NBUGS] = {0};
    TestResult **results = srunner_results(runner);
    int n = srunner_ntests_run(runner);
    for (int i = 0; i < n; i++) {
        if (tr_rtype(results[i]) == CK_PASS)
            continue;
        for (int bug = 0; bug < NBUGS; bug++) {
            if (strcmp(tr_tcname(results[i]), expected[bug].name) != 0)
                continue;
            failures[bug]++;
            if (expected[bug].message && strstr(tr_msg(results[i]), expected[bug].message))
                named[bug]++;
            if (bug == BUG_NONE)
                printf("clean store failed: %s:%d: %s\n", tr_lfile(results[i]), tr_lno(results[i]),
                       tr_msg(results[i]));
        }
    }
    free(results);
    srunner_free(runner);

    int ok = n > 0 && failures[BUG_NONE] == 0;
    for (int bug = 1; bug < NBUGS; bug++) {
        printf("%-24s %2d failed tests, %d naming the bug\n", expected[bug].name, failures[bug],
               named[bug]);
        ok = ok && named[bug] > 0;
    }
    printf("%s: %d tests run, the clean store failed %d\n", ok ? "PASS" : "FAIL", n,
           failures[BUG_NONE]);
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
