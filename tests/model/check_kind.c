/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* Kinds, item validation, tombstones and ld_data_sort, one rule per test. */
#include <pthread.h>
#include <string.h>

#include "check_suites.h"
#include "check_util.h"

static json_t *flag(const char *key, int version, const char *const *prereqs)
{
    json_t *p = json_array();
    for (size_t i = 0; prereqs && prereqs[i]; i++)
        json_array_append_new(p, json_pack("{s:s, s:i}", "key", prereqs[i], "variation", 0));
    return json_pack("{s:s, s:i, s:b, s:o}", "key", key, "version", version, "on", 1,
                     "prerequisites", p);
}

static json_t *segment(const char *key)
{
    return json_pack("{s:s, s:i}", "key", key, "version", 1);
}

/* The keys of the "items" array of entry i of a sorted data set, joined by
 * spaces, into buf. */
static const char *keys_of(const json_t *sorted, size_t i, char *buf, size_t len)
{
    const json_t *items = json_object_get(json_array_get(sorted, i), "items");
    buf[0] = '\0';
    for (size_t k = 0; k < json_array_size(items); k++) {
        if (k)
            strncat(buf, " ", len - strlen(buf) - 1);
        strncat(buf, ld_item_key(json_array_get(items, k)), len - strlen(buf) - 1);
    }
    return buf;
}

static const char *ns_of(const json_t *sorted, size_t i)
{
    return json_string_value(json_object_get(json_array_get(sorted, i), "namespace"));
}

/* ---- kinds -------------------------------------------------------------- */

START_TEST(test_kinds_have_namespace_and_priority)
{
    ck_assert_str_eq(ld_kind_namespace(ld_kind_features()), "features");
    ck_assert_str_eq(ld_kind_namespace(ld_kind_segments()), "segments");
    ck_assert_int_eq(ld_kind_priority(ld_kind_features()), 1);
    ck_assert_int_eq(ld_kind_priority(ld_kind_segments()), 0);
    ck_assert_ptr_eq(ld_kind_by_namespace("features"), ld_kind_features());
    ck_assert_ptr_eq(ld_kind_by_namespace("segments"), ld_kind_segments());
    ck_assert_ptr_null(ld_kind_by_namespace("flags"));
    ck_assert_ptr_null(ld_kind_by_namespace(NULL));
    ck_assert_ptr_null(ld_kind_namespace(NULL));
    ck_assert_int_eq(ld_kind_priority(NULL), -1);
}
END_TEST

/* ---- items ---------------------------------------------------------------- */

static void assert_invalid(json_t *item, const char *key, const char *field)
{
    const char *why = NULL;
    ck_assert_int_eq(ld_item_validate(item, key, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(why);
    ck_assert_msg(strstr(why, field) != NULL, "\"%s\" does not name %s", why, field);
    ck_assert_int_eq(ld_item_validate(item, key, NULL), LD_EINVAL);
    json_decref(item);
}

START_TEST(test_valid_items_pass)
{
    json_t *f = flag("f", 3, NULL);
    ck_assert_int_eq(ld_item_validate(f, NULL, NULL), 0);
    ck_assert_int_eq(ld_item_validate(f, "f", NULL), 0);
    json_t *t = ld_tombstone_new("gone", 0);
    ck_assert_int_eq(ld_item_validate(t, "gone", NULL), 0);
    json_decref(f);
    json_decref(t);
}
END_TEST

START_TEST(test_invalid_items_name_the_field)
{
    const char *why = NULL;
    ck_assert_int_eq(ld_item_validate(NULL, NULL, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "object"));
    assert_invalid(json_array(), NULL, "object");
    assert_invalid(json_string("x"), NULL, "object");
    assert_invalid(json_pack("{s:i}", "version", 1), NULL, "\"key\"");
    assert_invalid(json_pack("{s:i, s:i}", "key", 5, "version", 1), NULL, "\"key\"");
    assert_invalid(json_pack("{s:s, s:i}", "key", "", "version", 1), NULL, "\"key\"");
    assert_invalid(json_pack("{s:s#, s:i}", "key", "a\0b", 3, "version", 1), NULL, "\"key\"");
    assert_invalid(json_pack("{s:s}", "key", "k"), NULL, "\"version\"");
    assert_invalid(json_pack("{s:s, s:s}", "key", "k", "version", "1"), NULL, "\"version\"");
    assert_invalid(json_pack("{s:s, s:f}", "key", "k", "version", 1.5), NULL, "\"version\"");
    assert_invalid(json_pack("{s:s, s:i}", "key", "k", "version", -1), NULL, "\"version\"");
    assert_invalid(json_pack("{s:s, s:i, s:i}", "key", "k", "version", 1, "deleted", 1), NULL,
                   "\"deleted\"");
    assert_invalid(json_pack("{s:s, s:i, s:n}", "key", "k", "version", 1, "deleted"), NULL,
                   "\"deleted\"");
    assert_invalid(json_pack("{s:s, s:i}", "key", "k", "version", 1), "other", "filed under");
}
END_TEST

START_TEST(test_item_accessors)
{
    json_t *t = ld_tombstone_new("k", 7);
    ck_assert_str_eq(ld_item_key(t), "k");
    ck_assert_int_eq(ld_item_version(t), 7);
    ck_assert(ld_item_is_deleted(t));
    json_t *f = flag("f", 2, NULL);
    ck_assert(!ld_item_is_deleted(f));
    ck_assert_ptr_null(ld_item_key(NULL));
    ck_assert_int_eq(ld_item_version(NULL), -1);
    ck_assert(!ld_item_is_deleted(NULL));
    json_decref(t);
    json_decref(f);
}
END_TEST

START_TEST(test_item_parse_reads_key_version_deleted)
{
    struct ld_item_info info;
    json_t *t = ld_tombstone_new("t", 4);
    ck_assert_int_eq(ld_item_parse(t, &info, NULL), 0);
    ck_assert_str_eq(info.key, "t");
    ck_assert_int_eq(info.version, 4);
    ck_assert(info.deleted);
    json_t *f = flag("f", 9, NULL);
    ck_assert_int_eq(ld_item_parse(f, &info, NULL), 0);
    ck_assert_ptr_eq(info.key, ld_item_key(f)); /* borrowed from the item */
    ck_assert_int_eq(info.version, 9);
    ck_assert(!info.deleted);
    ck_assert_int_eq(ld_item_parse(f, NULL, NULL), 0);
    const char *why = NULL;
    json_t *bad = json_pack("{s:s}", "key", "k");
    ck_assert_int_eq(ld_item_parse(bad, &info, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "\"version\""));
    ck_assert_int_eq(ld_item_parse(NULL, &info, &why), LD_EINVAL);
    json_decref(bad);
    json_decref(f);
    json_decref(t);
}
END_TEST

START_TEST(test_tombstone_has_key_version_and_deleted)
{
    json_t *t = ld_tombstone_new("flag-a", 12);
    json_t *want = json_pack("{s:s, s:i, s:b}", "key", "flag-a", "version", 12, "deleted", 1);
    ck_assert(json_equal(t, want));
    ck_assert_ptr_null(ld_tombstone_new(NULL, 1));
    ck_assert_ptr_null(ld_tombstone_new("", 1));
    ck_assert_ptr_null(ld_tombstone_new("k", -1));
    json_decref(t);
    json_decref(want);
}
END_TEST

/* ---- data sets ---------------------------------------------------------- */

/* "$valid" and "$flagsState" are the all-flags state's own keys: no item
 * may take them, whatever its kind; keys that only look like them may. */
START_TEST(test_keys_of_the_all_flags_state_are_refused)
{
    static const char *const reserved[] = {"$valid", "$flagsState"};
    static const char *const fine[] = {"$valid2", "$flagsstate", "$inited", "valid", "$", "$vali"};
    const char *why = NULL;
    for (size_t i = 0; i < 2; i++) {
        assert_invalid(json_pack("{s:s, s:i}", "key", reserved[i], "version", 1), NULL, "\"key\"");
        json_t *item = json_pack("{s:s, s:i}", "key", reserved[i], "version", 1);
        struct ld_item_info info;
        ck_assert_int_eq(ld_item_parse(item, &info, &why), LD_EINVAL);
        ck_assert_ptr_nonnull(strstr(why, reserved[i]));
        for (int ns = 0; ns < 2; ns++) {
            json_t *data = json_pack("{s:{s:O}}", ns ? "segments" : "features", reserved[i], item);
            ck_assert_int_eq(ld_data_validate(data, &why), LD_EINVAL);
            json_decref(data);
        }
        json_decref(item);
        ck_assert_ptr_null(ld_tombstone_new(reserved[i], 2));
    }
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        json_t *item = json_pack("{s:s, s:i}", "key", fine[i], "version", 1);
        ck_assert_int_eq(ld_item_validate(item, fine[i], NULL), 0);
        json_decref(item);
    }
}
END_TEST

START_TEST(test_data_validate)
{
    const char *why = NULL;
    json_t *good = json_pack("{s:{s:o}, s:{}}", "features", "a", flag("a", 1, NULL), "segments");
    ck_assert_int_eq(ld_data_validate(good, &why), 0);
    ck_assert_int_eq(ld_data_validate(NULL, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "all_data"));
    json_t *bad = json_pack("{s:[]}", "features");
    ck_assert_int_eq(ld_data_validate(bad, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "namespace"));
    json_decref(bad);
    bad = json_pack("{s:{s:o}}", "features", "b", flag("a", 1, NULL));
    ck_assert_int_eq(ld_data_validate(bad, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "filed under"));
    json_decref(bad);
    /* an object key with a NUL inside is not the item's key */
    bad = json_pack("{s:{}}", "features");
    json_object_setn_new(json_object_get(bad, "features"), "a\0x", 3, flag("a", 1, NULL));
    ck_assert_int_eq(ld_data_validate(bad, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "filed under"));
    json_decref(bad);
    bad = json_pack("{s:{s:{s:s}}}", "segments", "s", "key", "s");
    ck_assert_int_eq(ld_data_validate(bad, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "\"version\""));
    ck_assert_ptr_null(ld_data_sort(bad));
    json_decref(bad);
    json_decref(good);
}
END_TEST

START_TEST(test_sort_puts_segments_before_features)
{
    json_t *data = json_pack("{s:{s:o}, s:{s:o}}", "features", "f", flag("f", 1, NULL), "segments",
                             "s", segment("s"));
    json_t *sorted = ld_data_sort(data);
    ck_assert_int_eq(json_array_size(sorted), 2);
    ck_assert_str_eq(ns_of(sorted, 0), "segments");
    ck_assert_str_eq(ns_of(sorted, 1), "features");
    json_decref(sorted);
    json_decref(data);
}
END_TEST

/* Sorts `data` (released) and asserts the keys of the first namespace of
 * the result and of the second, or that there is no second if `second` is
 * NULL. */
static void expect_sorted(json_t *data, const char *first, const char *second)
{
    char buf[128];
    json_t *sorted = ld_data_sort(data);
    ck_assert_int_eq(json_array_size(sorted), second ? 2 : 1);
    ck_assert_str_eq(keys_of(sorted, 0, buf, sizeof(buf)), first);
    if (second)
        ck_assert_str_eq(keys_of(sorted, 1, buf, sizeof(buf)), second);
    json_decref(sorted);
    json_decref(data);
}

START_TEST(test_sort_puts_prerequisites_first)
{
    const char *c_needs[] = {"b", NULL}, *b_needs[] = {"a", NULL};
    const char *d_needs[] = {"c", "a", NULL};
    json_t *data =
        json_pack("{s:{s:o, s:o, s:o, s:o}}", "features", "d", flag("d", 1, d_needs), "c",
                  flag("c", 1, c_needs), "a", flag("a", 1, NULL), "b", flag("b", 1, b_needs));
    expect_sorted(data, "a b c d", NULL);
}
END_TEST

START_TEST(test_sort_keeps_independent_items_in_input_order)
{
    json_t *data = json_pack("{s:{s:o, s:o, s:o}, s:{s:o, s:o}}", "features", "z",
                             flag("z", 1, NULL), "m", flag("m", 1, NULL), "a", flag("a", 1, NULL),
                             "segments", "s2", segment("s2"), "s1", segment("s1"));
    expect_sorted(data, "s2 s1", "z m a");
}
END_TEST

START_TEST(test_sort_terminates_on_cycles_with_each_item_once)
{
    const char *a_needs[] = {"b", NULL}, *b_needs[] = {"c", NULL}, *c_needs[] = {"a", NULL};
    const char *self[] = {"s", NULL};
    json_t *data =
        json_pack("{s:{s:o, s:o, s:o, s:o}}", "features", "a", flag("a", 1, a_needs), "b",
                  flag("b", 1, b_needs), "c", flag("c", 1, c_needs), "s", flag("s", 1, self));
    /* a is reached first, then b and c; c's prerequisite a is already on the
     * way, so the cycle ends there */
    expect_sorted(data, "c b a s", NULL);
}
END_TEST

START_TEST(test_sort_skips_missing_prerequisites)
{
    const char *needs[] = {"missing", "b", NULL};
    json_t *data =
        json_pack("{s:{s:o, s:o}}", "features", "a", flag("a", 1, needs), "b", flag("b", 1, NULL));
    expect_sorted(data, "b a", NULL);
}
END_TEST

START_TEST(test_sort_shares_items_and_keeps_unknown_namespaces_last)
{
    json_t *f = flag("f", 1, NULL);
    json_t *data = json_pack("{s:{s:O}, s:{s:o}, s:{}}", "features", "f", f, "extra", "x",
                             segment("x"), "segments");
    json_t *sorted = ld_data_sort(data);
    ck_assert_int_eq(json_array_size(sorted), 3);
    ck_assert_str_eq(ns_of(sorted, 0), "segments");
    ck_assert_str_eq(ns_of(sorted, 1), "features");
    ck_assert_str_eq(ns_of(sorted, 2), "extra");
    json_t *items = json_object_get(json_array_get(sorted, 1), "items");
    ck_assert_ptr_eq(json_array_get(items, 0), f);
    json_decref(sorted);
    json_decref(data);
    json_decref(f);
}
END_TEST

START_TEST(test_sort_of_empty_data_is_empty)
{
    json_t *data = json_object();
    json_t *sorted = ld_data_sort(data);
    ck_assert(json_is_array(sorted));
    ck_assert_int_eq(json_array_size(sorted), 0);
    json_decref(sorted);
    json_decref(data);
}
END_TEST

static void *sort_on_this_thread(void *data)
{
    return ld_data_sort(data);
}

/* A chain of 20,000 prerequisites sorted on a thread whose stack is 256 KiB:
 * a sort that recursed once per link would need several times that. */
START_TEST(test_sort_long_prerequisite_chain_uses_constant_stack)
{
    enum { N = 20000 };
    json_t *features = json_object();
    char key[32], prev[32];
    for (int i = 0; i < N; i++) { /* f0 needs f1, f1 needs f2, ... */
        snprintf(key, sizeof(key), "f%d", i);
        snprintf(prev, sizeof(prev), "f%d", i + 1);
        const char *needs[] = {prev, NULL};
        json_object_set_new(features, key, flag(key, 1, i + 1 < N ? needs : NULL));
    }
    json_t *data = json_pack("{s:o}", "features", features);
    pthread_attr_t attr;
    pthread_t t;
    void *out = NULL;
    ck_assert_int_eq(pthread_attr_init(&attr), 0);
    ck_assert_int_eq(pthread_attr_setstacksize(&attr, 256 * 1024), 0);
    ck_assert_int_eq(pthread_create(&t, &attr, sort_on_this_thread, data), 0);
    ck_assert_int_eq(pthread_join(t, &out), 0);
    pthread_attr_destroy(&attr);
    json_t *sorted = out;
    ck_assert_ptr_nonnull(sorted);
    json_t *items = json_object_get(json_array_get(sorted, 0), "items");
    ck_assert_int_eq(json_array_size(items), N);
    ck_assert_str_eq(ld_item_key(json_array_get(items, 0)), "f19999");
    ck_assert_str_eq(ld_item_key(json_array_get(items, N - 1)), "f0");
    json_decref(sorted);
    json_decref(data);
}
END_TEST

/* ---- keys must be valid UTF-8 -------------------------------------------- */

/* An item whose key is the `len` bytes at `key`, taken as they are. */
static json_t *raw_key_item(const char *key, size_t len)
{
    json_t *item = json_pack("{s:i}", "version", 1);
    ck_assert_int_eq(json_object_set_new(item, "key", json_stringn_nocheck(key, len)), 0);
    return item;
}

static const struct {
    const char *s;
    size_t len;
} bad_utf8[] = {
#define B8(lit)              \
    {                        \
        lit, sizeof(lit) - 1 \
    }
    B8("caf\xe9"),                         /* Latin-1 */
    B8("\x80"),                            /* a lone continuation byte */
    B8("\xc0\xaf"),                        /* overlong '/' */
    B8("\xc1\xbf"),                        /* overlong */
    B8("\xe0\x80\xaf"),                    /* overlong, 3 bytes */
    B8("\xe0\x9f\xbf"),                    /* overlong, 3 bytes */
    B8("\xf0\x8f\xbf\xbf"),                /* overlong, 4 bytes */
    B8("\xed\xa0\x80"),                    /* surrogate U+D800 */
    B8("\xed\xbf\xbf"),                    /* surrogate U+DFFF */
    B8("\xf4\x90\x80\x80"),                /* U+110000 */
    B8("\xf5\x80\x80\x80"),                /* beyond */
    B8("\xff"),                            /* never in UTF-8 */
    B8("\xe2\x82"),                        /* cut short */
    B8("a\xe2\x82"),                       /* cut short at the end */
    B8("\xe2\x28\xa1"),                    /* a bad continuation */
    B8("\xf0\x9f\x98"),                    /* 4-byte form cut short */
    B8("abcdefghijklmnop\xe9"),            /* past the 8-byte ASCII blocks */
    B8("abcdefg\xe9hijklmnop"),            /* inside an 8-byte block */
    B8("abcdefgh\xc3\xa9ijklmnop\xe9xyz"), /* after a good character */
    B8("ab\xe9\x64\x65"),                  /* 4..7 bytes: the first 4 */
    B8("abcd\xe9\x66"),                    /* 4..7 bytes: the last 4 */
    B8("abcdefghij\xe9"),                  /* in the last, overlapping block */
    B8("abcdefghijklmn\xc3"),              /* cut short in the overlapping block */
#undef B8
};

static const char *const good_utf8[] = {
    "\xc3\xa9",                         /* U+00E9 */
    "\xc2\x80",                         /* the first 2-byte one */
    "\xe0\xa0\x80",                     /* the first 3-byte one */
    "\xed\x9f\xbf",                     /* U+D7FF, just below the surrogates */
    "\xee\x80\x80",                     /* U+E000, just above them */
    "\xef\xbf\xbf",                     /* U+FFFF */
    "\xf0\x90\x80\x80",                 /* U+10000 */
    "\xf0\x9f\x98\x80",                 /* an emoji */
    "\xf4\x8f\xbf\xbf",                 /* U+10FFFF, the last */
    "flag-\xe2\x82\xac-and-more-ascii", /* ASCII blocks around a character */
    "abcdefghijklmnopqrstuvwxyz0123456789",
    "ab\xc3\xa9",        /* 4..7 bytes */
    "abcde\xe2\x82\xac", /* 4..7 bytes, the character in the last 4 */
    "abcdefghi\xc3\xa9", /* in the last, overlapping block */
};

START_TEST(test_tombstone_new_is_null_for_non_utf8_keys)
{
    for (size_t i = 0; i < sizeof(bad_utf8) / sizeof(bad_utf8[0]); i++)
        ck_assert_msg(ld_tombstone_new(bad_utf8[i].s, 3) == NULL, "bad key %zu accepted", i);
    for (size_t i = 0; i < sizeof(good_utf8) / sizeof(good_utf8[0]); i++) {
        json_t *t = ld_tombstone_new(good_utf8[i], 3);
        ck_assert_msg(t != NULL, "good key %zu refused", i);
        ck_assert_str_eq(ld_item_key(t), good_utf8[i]);
        json_decref(t);
    }
}
END_TEST

START_TEST(test_item_keys_must_be_valid_utf8)
{
    const char *why = NULL;
    for (size_t i = 0; i < sizeof(bad_utf8) / sizeof(bad_utf8[0]); i++) {
        json_t *item = raw_key_item(bad_utf8[i].s, bad_utf8[i].len);
        why = NULL;
        ck_assert_msg(ld_item_parse(item, NULL, &why) == LD_EINVAL, "bad key %zu accepted", i);
        ck_assert_msg(why && strstr(why, "\"key\"") && strstr(why, "UTF-8"), "bad key %zu: %s", i,
                      why ? why : "(null)");
        ck_assert_int_eq(ld_item_validate(item, NULL, NULL), LD_EINVAL);
        json_decref(item);
    }
    for (size_t i = 0; i < sizeof(good_utf8) / sizeof(good_utf8[0]); i++) {
        json_t *item = raw_key_item(good_utf8[i], strlen(good_utf8[i]));
        struct ld_item_info info;
        ck_assert_msg(ld_item_parse(item, &info, &why) == 0, "good key %zu refused", i);
        ck_assert_str_eq(info.key, good_utf8[i]);
        ck_assert_int_eq(ld_item_validate(item, good_utf8[i], NULL), 0);
        json_decref(item);
    }
}
END_TEST

START_TEST(test_data_keys_must_be_valid_utf8)
{
    const char *why = NULL;
    for (size_t i = 0; i < sizeof(bad_utf8) / sizeof(bad_utf8[0]); i++) {
        /* filed under its own (bad) key */
        json_t *data = json_pack("{s:{}}", "segments");
        json_object_setn_new_nocheck(json_object_get(data, "segments"), bad_utf8[i].s,
                                     bad_utf8[i].len, raw_key_item(bad_utf8[i].s, bad_utf8[i].len));
        why = NULL;
        ck_assert_int_eq(ld_data_validate(data, &why), LD_EINVAL);
        ck_assert_msg(why && strstr(why, "key") && strstr(why, "UTF-8"), "data %zu: %s", i,
                      why ? why : "(null)");
        ck_assert_ptr_null(ld_data_sort(data));
        json_decref(data);
        /* a good item filed under a bad key */
        data = json_pack("{s:{}}", "features");
        json_object_setn_new_nocheck(json_object_get(data, "features"), bad_utf8[i].s,
                                     bad_utf8[i].len, flag("a", 1, NULL));
        why = NULL;
        ck_assert_int_eq(ld_data_validate(data, &why), LD_EINVAL);
        ck_assert_msg(why && strstr(why, "key") && strstr(why, "UTF-8"), "data %zu: %s", i,
                      why ? why : "(null)");
        json_decref(data);
    }
}
END_TEST

/* ---- namespaces are compared with their length ---------------------------- */

/* {"features": {"f": f}, "features\0x": {"x": x}} (the second made with
 * json_object_setn: one key of 10 bytes), or only the second. */
static json_t *data_with_nul_namespace(bool with_features)
{
    json_t *data = json_object();
    if (with_features)
        json_object_set_new(data, "features", json_pack("{s:o}", "f", flag("f", 1, NULL)));
    ck_assert_int_eq(
        json_object_setn_new(data, "features\0x", 10, json_pack("{s:o}", "x", flag("x", 1, NULL))),
        0);
    return data;
}

START_TEST(test_namespace_with_nul_is_not_features)
{
    const char *why = NULL;
    json_t *data = data_with_nul_namespace(true);
    ck_assert_int_eq(ld_data_validate(data, &why), 0);
    /* its items are validated as those of any unknown namespace */
    json_t *bad = data_with_nul_namespace(false);
    json_object_set_new(json_object_getn(bad, "features\0x", 10), "y",
                        json_pack("{s:s}", "key", "y"));
    ck_assert_int_eq(ld_data_validate(bad, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "\"version\""));
    json_decref(bad);
    for (int with_features = 1; with_features >= 0; with_features--) {
        json_t *d = with_features ? json_incref(data) : data_with_nul_namespace(false);
        json_t *sorted = ld_data_sort(d);
        char buf[64];
        size_t n = (size_t)with_features + 1;
        ck_assert_int_eq(json_array_size(sorted), n);
        if (with_features) {
            ck_assert_str_eq(ns_of(sorted, 0), "features");
            ck_assert_str_eq(keys_of(sorted, 0, buf, sizeof(buf)), "f");
        }
        /* last, as unknown namespaces are, with its whole name */
        const json_t *ns = json_object_get(json_array_get(sorted, n - 1), "namespace");
        ck_assert_int_eq(json_string_length(ns), 10);
        ck_assert_mem_eq(json_string_value(ns), "features\0x", 10);
        ck_assert_str_eq(keys_of(sorted, n - 1, buf, sizeof(buf)), "x");
        json_decref(sorted);
        json_decref(d);
    }
    json_decref(data);
}
END_TEST

START_TEST(test_item_keys_with_nul_in_data_must_match_by_length)
{
    const char *why = NULL;
    /* filed under "f\0x", key "f" */
    json_t *data = json_pack("{s:{}}", "features");
    json_object_setn_new(json_object_get(data, "features"), "f\0x", 3, flag("f", 1, NULL));
    ck_assert_int_eq(ld_data_validate(data, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "filed under"));
    json_decref(data);
    /* filed under "f\0x", key "f\0x" */
    data = json_pack("{s:{}}", "segments");
    json_t *item = json_pack("{s:s#, s:i}", "key", "f\0x", (int)3, "version", 1);
    json_object_setn_new(json_object_get(data, "segments"), "f\0x", 3, item);
    ck_assert_int_eq(ld_data_validate(data, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "NUL"));
    json_decref(data);
    /* filed under "f", key "f\0x" */
    data = json_pack("{s:{s:{s:s#, s:i}}}", "features", "f", "key", "f\0x", (int)3, "version", 1);
    ck_assert_int_eq(ld_data_validate(data, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "NUL"));
    json_decref(data);
}
END_TEST

/* A prerequisite key with a NUL names no flag ("a\0x" is not "a"): it is
 * skipped as a missing one is. */
START_TEST(test_sort_skips_a_prerequisite_key_with_nul)
{
    json_t *b = flag("b", 1, NULL);
    json_array_append_new(json_object_get(b, "prerequisites"),
                          json_pack("{s:s#, s:i}", "key", "a\0x", (int)3, "variation", 0));
    json_t *data = json_pack("{s:{s:o, s:o}}", "features", "b", b, "a", flag("a", 1, NULL));
    expect_sorted(data, "b a", NULL);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

Suite *ld_suite_kind(void)
{
    Suite *s = suite_create("kind");
    TCase *tc = tcase_create("kinds");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_kinds_have_namespace_and_priority);
    tcase_add_test(tc, test_valid_items_pass);
    tcase_add_test(tc, test_invalid_items_name_the_field);
    tcase_add_test(tc, test_item_accessors);
    tcase_add_test(tc, test_item_parse_reads_key_version_deleted);
    tcase_add_test(tc, test_tombstone_has_key_version_and_deleted);
    tcase_add_test(tc, test_keys_of_the_all_flags_state_are_refused);
    tcase_add_test(tc, test_data_validate);
    tcase_add_test(tc, test_sort_puts_segments_before_features);
    tcase_add_test(tc, test_sort_puts_prerequisites_first);
    tcase_add_test(tc, test_sort_keeps_independent_items_in_input_order);
    tcase_add_test(tc, test_sort_terminates_on_cycles_with_each_item_once);
    tcase_add_test(tc, test_sort_skips_missing_prerequisites);
    tcase_add_test(tc, test_sort_shares_items_and_keeps_unknown_namespaces_last);
    tcase_add_test(tc, test_sort_of_empty_data_is_empty);
    tcase_add_test(tc, test_sort_long_prerequisite_chain_uses_constant_stack);
    tcase_add_test(tc, test_tombstone_new_is_null_for_non_utf8_keys);
    tcase_add_test(tc, test_item_keys_must_be_valid_utf8);
    tcase_add_test(tc, test_data_keys_must_be_valid_utf8);
    tcase_add_test(tc, test_namespace_with_nul_is_not_features);
    tcase_add_test(tc, test_item_keys_with_nul_in_data_must_match_by_length);
    tcase_add_test(tc, test_sort_skips_a_prerequisite_key_with_nul);
    suite_add_tcase(s, tc);
    return s;
}
