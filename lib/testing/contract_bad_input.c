/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the store contract's cases of bad input (contract.c
 * has the harness).
 */
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/testing.h>

#define LD_TESTING_CONTRACT
#include "testing-internal.h"

/* ---- bad input ------------------------------------------------------------ */

START_TEST(null_store_gives_null)
{
    begin(_i);
    json_t *item = make_feature("foo", 1);
    json_t *data = json_object();
    ck_assert_ptr_null(ld_store_get(NULL, F, "foo"));
    ck_assert_ptr_null(ld_store_all(NULL, F));
    ck_assert_ptr_null(ld_store_init(NULL, data));
    ck_assert_ptr_null(ld_store_upsert(NULL, F, item));
    ck_assert_ptr_null(ld_store_delete(NULL, F, "foo", 1));
    ck_assert_ptr_null(ld_store_initialized(NULL));
    ck_assert_ptr_null(ld_store_close(NULL));
    ld_store_free(NULL);
    json_decref(item);
    json_decref(data);
}
END_TEST

START_TEST(bad_kind_or_key_is_einval_and_changes_nothing)
{
    begin(_i);
    init_foo_bar();
    EXPECT_ERROR(read_get(NULL, "foo"), LD_EINVAL, "kind");
    EXPECT_ERROR(read_get(F, NULL), LD_EINVAL, "key");
    EXPECT_ERROR(read_get(F, ""), LD_EINVAL, "key");
    EXPECT_ERROR(read_all(NULL), LD_EINVAL, "kind");
    EXPECT_ERROR(ld_store_delete(S, NULL, "foo", 11), LD_EINVAL, "kind");
    EXPECT_ERROR(ld_store_delete(S, F, NULL, 11), LD_EINVAL, "key");
    EXPECT_ERROR(ld_store_delete(S, F, "", 11), LD_EINVAL, "key");
    EXPECT_ERROR(ld_store_delete(S, F, "foo", -1), LD_EINVAL, "version");
    json_t *item = make_feature("foo", 11);
    EXPECT_ERROR(ld_store_upsert(S, NULL, item), LD_EINVAL, "kind");
    json_decref(item);
    expect_foo_bar_unchanged();
}
END_TEST

/* An item of `kind` whose key is `key`, taken as it is (it may be invalid
 * UTF-8, as jansson's *_nocheck functions allow). */
static json_t *make_raw_key_item(const ld_kind *kind, const char *key, int64_t version)
{
    json_t *item = make_item(kind, "placeholder", version);
    ck_assert_int_eq(json_object_set_new(item, "key", json_string_nocheck(key)), 0);
    return item;
}

START_TEST(non_utf8_keys_are_einval_and_change_nothing)
{
    begin(_i);
    init_foo_bar();
    const char *bad[] = {
        "caf\xe9", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "long-ascii-prefix-\xe2\x82",
        "foo\xff"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char what[64];
        snprintf(what, sizeof(what), "get of bad key %zu", i);
        expect_error(ld_store_get(S, F, bad[i]), what, LD_EINVAL, "UTF-8");
        snprintf(what, sizeof(what), "delete of bad key %zu", i);
        expect_error(ld_store_delete(S, F, bad[i], 11), what, LD_EINVAL, "UTF-8");
        json_t *item = make_raw_key_item(F, bad[i], 11);
        snprintf(what, sizeof(what), "upsert of bad key %zu", i);
        expect_error(ld_store_upsert(S, F, item), what, LD_EINVAL, "UTF-8");
        /* init: filed under its own key; a good item filed under a bad key */
        json_t *data =
            json_pack("{s:{}, s:{s:o}}", "features", "segments", "s", make_segment("s", 1));
        json_object_set_new_nocheck(json_object_get(data, "features"), bad[i], item);
        snprintf(what, sizeof(what), "init with bad item key %zu", i);
        expect_error(ld_store_init(S, data), what, LD_EINVAL, "UTF-8");
        json_decref(data);
        data = json_pack("{s:{}}", "features");
        json_object_set_new_nocheck(json_object_get(data, "features"), bad[i],
                                    make_feature("foo", 12));
        snprintf(what, sizeof(what), "init with bad data key %zu", i);
        expect_error(ld_store_init(S, data), what, LD_EINVAL, "UTF-8");
        json_decref(data);
    }
    expect_foo_bar_unchanged();
    /* what is valid UTF-8 is a key like any other */
    const char *good[] = {"\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf\xee\x80\x80"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        ck_assert_msg(upsert(F, good[i], 1), "upsert of good key %zu failed", i);
        ck_assert_int_eq(version_of(F, good[i]), 1);
        ck_assert_msg(delete_at(F, good[i], 2), "delete of good key %zu failed", i);
        ck_assert_int_eq(version_of(F, good[i]), -1);
    }
}
END_TEST

/* "$valid" and "$flagsState", which no item may have (kind.h), are refused
 * by every write; a get of them finds nothing. */
START_TEST(reserved_keys_are_einval_and_change_nothing)
{
    begin(_i);
    init_foo_bar();
    const char *reserved[] = {"$valid", "$flagsState"};
    const ld_kind *kinds[] = {F, ld_kind_segments()};
    for (size_t i = 0; i < 2; i++) {
        for (size_t k = 0; k < 2; k++) {
            char what[64];
            snprintf(what, sizeof(what), "delete of %s (kind %zu)", reserved[i], k);
            expect_error(ld_store_delete(S, kinds[k], reserved[i], 11), what, LD_EINVAL, "key");
            json_t *item = make_item(kinds[k], reserved[i], 11);
            snprintf(what, sizeof(what), "upsert of %s (kind %zu)", reserved[i], k);
            expect_error(ld_store_upsert(S, kinds[k], item), what, LD_EINVAL, "key");
            json_t *data = json_pack("{s:{}, s:{}}", "features", "segments");
            json_object_set_new(json_object_get(data, ld_kind_namespace(kinds[k])), reserved[i],
                                item);
            snprintf(what, sizeof(what), "init with %s (kind %zu)", reserved[i], k);
            expect_error(ld_store_init(S, data), what, LD_EINVAL, "key");
            json_decref(data);
            ck_assert_int_eq(version_of(kinds[k], reserved[i]), -1);
        }
    }
    expect_foo_bar_unchanged();
}
END_TEST

START_TEST(bad_items_are_einval_naming_the_field_and_change_nothing)
{
    begin(_i);
    init_foo_bar();
    struct {
        json_t *item;
        const char *field;
    } bad[] = {
        {NULL, "object"},
        {json_array(), "object"},
        {json_string("foo"), "object"},
        {json_pack("{s:i}", "version", 11), "key"},
        {json_pack("{s:s, s:i}", "key", "", "version", 11), "key"},
        {json_pack("{s:i, s:i}", "key", 3, "version", 11), "key"},
        {json_pack("{s:s#, s:i}", "key", "fo\0o", (int)4, "version", 11), "key"},
        {json_pack("{s:s}", "key", "foo"), "version"},
        {json_pack("{s:s, s:s}", "key", "foo", "version", "11"), "version"},
        {json_pack("{s:s, s:f}", "key", "foo", "version", 11.5), "version"},
        {json_pack("{s:s, s:i}", "key", "foo", "version", -11), "version"},
        {json_pack("{s:s, s:n}", "key", "foo", "version"), "version"},
        {json_pack("{s:s, s:i, s:s}", "key", "foo", "version", 11, "deleted", "yes"), "deleted"},
        {json_pack("{s:s, s:i, s:i}", "key", "foo", "version", 11, "deleted", 1), "deleted"},
        {json_pack("{s:s, s:i, s:n}", "key", "foo", "version", 11, "deleted"), "deleted"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(i == 0 || bad[i].item, "cannot build bad item %zu", i);
        char what[64];
        snprintf(what, sizeof(what), "upsert of bad item %zu", i);
        expect_error(ld_store_upsert(S, F, bad[i].item), what, LD_EINVAL, bad[i].field);
        json_decref(bad[i].item);
    }
    expect_foo_bar_unchanged();
}
END_TEST

START_TEST(bad_init_is_einval_and_all_or_nothing)
{
    begin(_i);
    init_foo_bar();
    struct {
        json_t *data;
        const char *field;
    } bad[] = {
        {NULL, "all_data"},
        {json_array(), "all_data"},
        {json_pack("{s:[]}", "features"), "namespace"},
        {json_pack("{s:{}, s:i}", "features", "segments", 1), "namespace"},
        /* a good item first, then a bad one: nothing is applied */
        {json_pack("{s:{s:o, s:[]}}", "features", "new", make_feature("new", 1), "bad"), "object"},
        {json_pack("{s:{s:o, s:o}}", "features", "new", make_feature("new", 1), "other",
                   make_feature("x", 1)),
         "filed under"},
        {json_pack("{s:{s:o}, s:{s:{s:s, s:s}}}", "features", "new", make_feature("new", 1),
                   "segments", "s", "key", "s", "version", "1"),
         "version"},
        {json_pack("{s:{s:o}, s:{s:{s:s, s:i, s:i}}}", "features", "new", make_feature("new", 1),
                   "segments", "s", "key", "s", "version", 1, "deleted", 0),
         "deleted"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(i == 0 || bad[i].data, "cannot build bad data set %zu", i);
        char what[64];
        snprintf(what, sizeof(what), "init with bad data set %zu", i);
        expect_error(ld_store_init(S, bad[i].data), what, LD_EINVAL, bad[i].field);
        json_decref(bad[i].data);
    }
    ck_assert_int_eq(version_of(F, "new"), -1);
    expect_foo_bar_unchanged();
}
END_TEST

START_TEST(bad_init_leaves_a_new_store_uninitialized)
{
    begin(_i);
    json_t *bad = json_pack("{s:{s:o}}", "features", "other", make_feature("x", 1));
    EXPECT_ERROR(ld_store_init(S, bad), LD_EINVAL, "filed under");
    json_decref(bad);
    ck_assert_msg(!BOOL(ld_store_initialized(S)), "a rejected init initialized the store");
    ck_assert_int_eq(all_size(F), 0);
}
END_TEST

/* Adds this file's cases, in order, as loop tests over [loop, loop + 1). */
void ld__contract_add_bad_input(TCase *tc, int loop)
{
    const TTest *tests[] = {
        null_store_gives_null,
        bad_kind_or_key_is_einval_and_changes_nothing,
        non_utf8_keys_are_einval_and_change_nothing,
        reserved_keys_are_einval_and_change_nothing,
        bad_items_are_einval_naming_the_field_and_change_nothing,
        bad_init_is_einval_and_all_or_nothing,
        bad_init_leaves_a_new_store_uninitialized,
    };
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
        tcase_add_loop_test(tc, tests[i], loop, loop + 1);
}
