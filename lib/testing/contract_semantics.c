/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the store contract's cases of semantics: the 17 of
 * the Python SDK's async store suite and more of store.h's (contract.c has
 * the harness).
 */
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/testing.h>

#define LD_TESTING_CONTRACT
#include "testing-internal.h"

/* ---- the 17 cases of the Python SDK's async store suite ------------------ */

START_TEST(not_initialized_before_init)
{
    begin(_i);
    ck_assert_msg(!BOOL(ld_store_initialized(S)), "a new store says it is initialized");
}
END_TEST

START_TEST(initialized)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(BOOL(ld_store_initialized(S)), "not initialized after init");
}
END_TEST

START_TEST(get_existing_feature)
{
    begin(_i);
    init_foo_bar();
    ld_future *f = FULFILLED(read_get(F, "foo"));
    json_t *expected = make_feature("foo", 10);
    ck_assert_msg(json_equal(ld_future_json(f), expected),
                  "get(\"foo\") is not the item given to init");
    json_decref(expected);
    ld_future_unref(f);
}
END_TEST

START_TEST(get_nonexisting_feature)
{
    begin(_i);
    init_foo_bar();
    ck_assert_int_eq(version_of(F, "biz"), -1);
}
END_TEST

START_TEST(get_all_versions)
{
    begin(_i);
    init_foo_bar();
    ck_assert_int_eq(all_size(F), 2);
    ck_assert_int_eq(all_version(F, "foo"), 10);
    ck_assert_int_eq(all_version(F, "bar"), 10);
}
END_TEST

START_TEST(upsert_with_newer_version)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(upsert(F, "foo", 11), "upsert of a newer version returned false");
    ck_assert_int_eq(version_of(F, "foo"), 11);
}
END_TEST

START_TEST(upsert_with_older_version)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(!upsert(F, "foo", 9), "upsert of an older version returned true");
    ck_assert_int_eq(version_of(F, "foo"), 10);
}
END_TEST

START_TEST(upsert_with_new_feature)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(upsert(F, "biz", 1), "upsert of a new key returned false");
    ck_assert_int_eq(version_of(F, "biz"), 1);
    ck_assert_int_eq(all_size(F), 3);
}
END_TEST

START_TEST(delete_with_newer_version)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(delete_at(F, "foo", 11), "delete at a newer version returned false");
    ck_assert_int_eq(version_of(F, "foo"), -1);
}
END_TEST

START_TEST(delete_unknown_feature)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(delete_at(F, "biz", 11), "delete of an unknown key returned false");
    ck_assert_int_eq(version_of(F, "biz"), -1);
    ck_assert_msg(!upsert(F, "biz", 10), "the tombstone of an unknown key did not block v10");
    ck_assert_msg(upsert(F, "biz", 12), "upsert after the tombstone's version returned false");
}
END_TEST

START_TEST(delete_with_older_version)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(!delete_at(F, "foo", 9), "delete at an older version returned true");
    ck_assert_int_eq(version_of(F, "foo"), 10);
}
END_TEST

START_TEST(upsert_older_version_after_delete)
{
    begin(_i);
    init_foo_bar();
    ck_assert(delete_at(F, "foo", 11));
    ck_assert_msg(!upsert(F, "foo", 9), "an older upsert came back over a tombstone");
    ck_assert_int_eq(version_of(F, "foo"), -1);
}
END_TEST

START_TEST(deleted_item_not_in_all)
{
    begin(_i);
    init_foo_bar();
    ck_assert(delete_at(F, "foo", 11));
    ck_assert_int_eq(all_version(F, "foo"), -1);
    ck_assert_int_eq(all_size(F), 1);
}
END_TEST

START_TEST(upsert_equal_version_not_applied)
{
    begin(_i);
    init_foo_bar();
    json_t *item = make_feature("foo", 10);
    json_object_set_new(item, "on", json_false());
    ck_assert_msg(!BOOL(ld_store_upsert(S, F, item)), "upsert of an equal version returned true");
    ld_future *f = FULFILLED(read_get(F, "foo"));
    ck_assert_msg(json_is_true(json_object_get(ld_future_json(f), "on")),
                  "upsert of an equal version replaced the item");
    ld_future_unref(f);
    json_decref(item);
}
END_TEST

START_TEST(delete_equal_version_not_applied)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(!delete_at(F, "foo", 10), "delete at an equal version returned true");
    ck_assert_int_eq(version_of(F, "foo"), 10);
}
END_TEST

START_TEST(init_replaces_existing_data)
{
    begin(_i);
    init_foo_bar();
    ck_assert(upsert(F, "biz", 1));
    ck_assert(upsert(SEG, "s", 1));
    init_with(json_pack("{s:{s:o}}", "features", "new", make_feature("new", 1)));
    ck_assert_msg(version_of(F, "foo") == -1, "init kept \"foo\", absent from its data");
    ck_assert_msg(version_of(F, "biz") == -1, "init kept \"biz\", absent from its data");
    ck_assert_int_eq(version_of(F, "new"), 1);
    ck_assert_int_eq(all_size(F), 1);
    ck_assert_msg(all_size(SEG) == 0, "a kind absent from init's data kept its items");
    ck_assert_int_eq(version_of(SEG, "s"), -1);
}
END_TEST

START_TEST(describe_names_the_implementation)
{
    begin(_i);
    const char *d = ld_store_describe(S);
    ck_assert_msg(d && *d, "describe() is empty");
    ck_assert_str_eq(ld_store_describe(NULL), "(null)");
}
END_TEST

/* ---- more of store.h's semantics ----------------------------------------- */

START_TEST(writes_do_not_initialize)
{
    begin(_i);
    ck_assert(upsert(F, "foo", 1));
    ck_assert(delete_at(F, "bar", 1));
    ck_assert_msg(!BOOL(ld_store_initialized(S)), "upsert or delete made the store initialized");
}
END_TEST

START_TEST(init_with_empty_data_initializes)
{
    begin(_i);
    ck_assert(upsert(F, "foo", 1));
    init_with(json_object());
    ck_assert(BOOL(ld_store_initialized(S)));
    ck_assert_int_eq(all_size(F), 0);
    ck_assert_int_eq(all_size(SEG), 0);
}
END_TEST

START_TEST(kinds_are_kept_apart)
{
    begin(_i);
    init_with(json_pack("{s:{s:o}, s:{s:o}}", "features", "k", make_feature("k", 1), "segments",
                        "k", make_segment("k", 5)));
    ck_assert_int_eq(version_of(F, "k"), 1);
    ck_assert_int_eq(version_of(SEG, "k"), 5);
    ck_assert_msg(upsert(F, "k", 2), "the segment's version blocked the flag's upsert");
    ck_assert(delete_at(SEG, "k", 6));
    ck_assert_int_eq(version_of(F, "k"), 2);
    ck_assert_int_eq(version_of(SEG, "k"), -1);
    ck_assert_int_eq(all_size(F), 1);
    ck_assert_int_eq(all_size(SEG), 0);
}
END_TEST

START_TEST(items_come_back_equal)
{
    begin(_i);
    json_t *seg = make_segment("s", 3);
    json_object_set_new(seg, "nested", json_pack("{s:[i,f,s,n], s:{}}", "a", 1, 2.5, "x", "o"));
    ck_assert(BOOL(ld_store_upsert(S, SEG, seg)));
    ld_future *g = FULFILLED(read_get(SEG, "s"));
    ck_assert_msg(json_equal(ld_future_json(g), seg), "get returned a different item");
    ld_future *a = FULFILLED(read_all(SEG));
    ck_assert_msg(json_equal(json_object_get(ld_future_json(a), "s"), seg),
                  "all returned a different item");
    ld_future_unref(g);
    ld_future_unref(a);
    json_decref(seg);
}
END_TEST

START_TEST(upsert_of_a_tombstone_deletes)
{
    begin(_i);
    init_foo_bar();
    json_t *tomb = json_pack("{s:s, s:i, s:b}", "key", "foo", "version", 11, "deleted", 1);
    ck_assert_msg(BOOL(ld_store_upsert(S, F, tomb)), "upsert of a newer tombstone returned false");
    ck_assert_int_eq(version_of(F, "foo"), -1);
    ck_assert_int_eq(all_version(F, "foo"), -1);
    ck_assert_msg(!upsert(F, "foo", 10), "an upserted tombstone did not block an older upsert");
    ck_assert(upsert(F, "foo", 12));
    json_decref(tomb);
}
END_TEST

START_TEST(tombstones_in_init_data_block_older_upserts)
{
    begin(_i);
    init_with(json_pack("{s:{s:o, s:{s:s, s:i, s:b}}}", "features", "foo", make_feature("foo", 1),
                        "gone", "key", "gone", "version", 7, "deleted", 1));
    ck_assert_int_eq(version_of(F, "gone"), -1);
    ck_assert_int_eq(all_size(F), 1);
    ck_assert_msg(!upsert(F, "gone", 7), "a tombstone from init did not block an equal upsert");
    ck_assert(upsert(F, "gone", 8));
    ck_assert_int_eq(version_of(F, "gone"), 8);
}
END_TEST

START_TEST(delete_then_newer_upsert_restores)
{
    begin(_i);
    init_foo_bar();
    ck_assert(delete_at(F, "foo", 11));
    ck_assert(upsert(F, "foo", 12));
    ck_assert_int_eq(version_of(F, "foo"), 12);
    ck_assert_int_eq(all_version(F, "foo"), 12);
}
END_TEST

START_TEST(version_zero_and_large_versions)
{
    begin(_i);
    const int64_t big = (int64_t)1 << 52;
    ck_assert_msg(upsert(F, "zero", 0), "upsert of a new key at version 0 returned false");
    ck_assert_int_eq(version_of(F, "zero"), 0);
    ck_assert_msg(delete_at(F, "unknown", 0), "delete of an unknown key at 0 returned false");
    ck_assert(!upsert(F, "unknown", 0));
    ck_assert(upsert(F, "big", big));
    ck_assert(!upsert(F, "big", big - 1));
    ck_assert(upsert(F, "big", big + 1));
    ck_assert_int_eq(version_of(F, "big"), big + 1);
}
END_TEST

START_TEST(keys_are_opaque_strings)
{
    begin(_i);
    char long_key[1001];
    memset(long_key, 'k', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    const char *keys[] = {"a:b", "features", "$inited", "with space", "sl/ash", "\xc3\xa9t\xc3\xa9",
                          "*",   "a\"quote", long_key};
    size_t n = sizeof(keys) / sizeof(keys[0]);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(upsert(F, keys[i], (int64_t)i + 1), "upsert of key %zu failed", i);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(version_of(F, keys[i]), (int64_t)i + 1);
        ck_assert_int_eq(all_version(F, keys[i]), (int64_t)i + 1);
    }
    ck_assert_int_eq(all_size(F), n);
    ck_assert_int_eq(version_of(F, "a"), -1);
    ck_assert_int_eq(version_of(SEG, "a:b"), -1);
}
END_TEST

START_TEST(many_items)
{
    begin(_i);
    enum { NF = 500, NS = 100 };
    json_t *features = json_object(), *segments = json_object();
    char key[32];
    for (int i = 0; i < NF; i++) {
        snprintf(key, sizeof(key), "flag-%d", i);
        json_object_set_new(features, key, make_feature(key, i));
    }
    for (int i = 0; i < NS; i++) {
        snprintf(key, sizeof(key), "segment-%d", i);
        json_object_set_new(segments, key, make_segment(key, i));
    }
    init_with(json_pack("{s:o, s:o}", "features", features, "segments", segments));
    ck_assert_int_eq(all_size(F), NF);
    ck_assert_int_eq(all_size(SEG), NS);
    for (int i = 0; i < NF; i += 7) {
        snprintf(key, sizeof(key), "flag-%d", i);
        ck_assert_int_eq(version_of(F, key), i);
    }
    for (int i = 0; i < NF; i += 2) {
        snprintf(key, sizeof(key), "flag-%d", i);
        ck_assert(delete_at(F, key, i + 1));
    }
    ck_assert_int_eq(all_size(F), NF / 2);
}
END_TEST

START_TEST(init_accepts_unknown_namespaces)
{
    begin(_i);
    init_with(json_pack("{s:{s:o}, s:{s:{s:s, s:i}}}", "features", "foo", make_feature("foo", 1),
                        "other", "x", "key", "x", "version", 1));
    ck_assert_int_eq(version_of(F, "foo"), 1);
    ck_assert_int_eq(all_size(F), 1);
    ck_assert_int_eq(all_size(SEG), 0);
}
END_TEST

START_TEST(init_ignores_a_namespace_with_nul_like_unknown_ones)
{
    begin(_i);
    /* "features\0x" (10 bytes) is no kind's namespace, first or after
     * "features" */
    for (int features_first = 0; features_first < 2; features_first++) {
        json_t *data = json_object();
        json_t *foo = json_pack("{s:o}", "foo", make_feature("foo", 1));
        json_t *x = json_pack("{s:o}", "x", make_feature("x", 1));
        ck_assert_ptr_nonnull(data);
        if (features_first)
            json_object_set_new(data, "features", foo);
        ck_assert_int_eq(json_object_setn_new(data, "features\0x", 10, x), 0);
        if (!features_first)
            json_object_set_new(data, "features", foo);
        init_with(data);
        ck_assert_int_eq(version_of(F, "foo"), 1);
        ck_assert_int_eq(version_of(F, "x"), -1);
        ck_assert_int_eq(all_size(F), 1);
        ck_assert_int_eq(all_size(SEG), 0);
    }
    json_t *data = json_object();
    ck_assert_int_eq(
        json_object_setn_new(data, "segments\0", 9, json_pack("{s:o}", "s", make_segment("s", 1))),
        0);
    init_with(data);
    ck_assert_int_eq(version_of(SEG, "s"), -1);
    ck_assert_int_eq(all_size(F), 0);
    ck_assert_int_eq(all_size(SEG), 0);
}
END_TEST

/* Adds this file's cases, in order, as loop tests over [loop, loop + 1). */
void ld__contract_add_semantics(TCase *tc, int loop)
{
    const TTest *tests[] = {
        not_initialized_before_init,
        initialized,
        get_existing_feature,
        get_nonexisting_feature,
        get_all_versions,
        upsert_with_newer_version,
        upsert_with_older_version,
        upsert_with_new_feature,
        delete_with_newer_version,
        delete_unknown_feature,
        delete_with_older_version,
        upsert_older_version_after_delete,
        deleted_item_not_in_all,
        upsert_equal_version_not_applied,
        delete_equal_version_not_applied,
        init_replaces_existing_data,
        describe_names_the_implementation,
        writes_do_not_initialize,
        init_with_empty_data_initializes,
        kinds_are_kept_apart,
        items_come_back_equal,
        upsert_of_a_tombstone_deletes,
        tombstones_in_init_data_block_older_upserts,
        delete_then_newer_upsert_restores,
        version_zero_and_large_versions,
        keys_are_opaque_strings,
        many_items,
        init_accepts_unknown_namespaces,
        init_ignores_a_namespace_with_nul_like_unknown_ones,
    };
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
        tcase_add_loop_test(tc, tests[i], loop, loop + 1);
}
