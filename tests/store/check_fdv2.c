/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* FDv2 types, the change set builder, initializers and synchronizers. */
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base
#define FEATURES ld_kind_features()
#define SEGMENTS ld_kind_segments()

static int64_t now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static json_t *item(const char *key, int version)
{
    return json_pack("{s:s, s:i}", "key", key, "version", version);
}

/* ---- names ---------------------------------------------------------------- */

START_TEST(test_intent_names_round_trip)
{
    LD_TEST_ENUM_NAMES(ld_fdv2_intent_name, enum ld_fdv2_intent, "xfer-full", "xfer-changes",
                       "none");
    ck_assert_int_eq(ld_fdv2_intent_from_name("xfer-full"), LD_FDV2_INTENT_XFER_FULL);
    ck_assert_int_eq(ld_fdv2_intent_from_name("xfer-changes"), LD_FDV2_INTENT_XFER_CHANGES);
    ck_assert_int_eq(ld_fdv2_intent_from_name("none"), LD_FDV2_INTENT_NONE);
    ck_assert_int_eq(ld_fdv2_intent_from_name("xfer-none"), LD_EINVAL);
    ck_assert_int_eq(ld_fdv2_intent_from_name(NULL), LD_EINVAL);
}
END_TEST

START_TEST(test_action_names)
{
    LD_TEST_ENUM_NAMES(ld_fdv2_action_name, enum ld_fdv2_action, "put", "delete");
}
END_TEST

START_TEST(test_kind_names_map_to_the_store_kinds)
{
    ck_assert_str_eq(ld_fdv2_kind_name(FEATURES), "flag");
    ck_assert_str_eq(ld_fdv2_kind_name(SEGMENTS), "segment");
    ck_assert_ptr_null(ld_fdv2_kind_name(NULL));
    ck_assert_ptr_eq(ld_fdv2_kind_from_name("flag"), FEATURES);
    ck_assert_ptr_eq(ld_fdv2_kind_from_name("segment"), SEGMENTS);
    ck_assert_ptr_null(ld_fdv2_kind_from_name("features"));
    ck_assert_ptr_null(ld_fdv2_kind_from_name(NULL));
}
END_TEST

/* ---- selector ------------------------------------------------------------- */

START_TEST(test_selector_accessors)
{
    ld_fdv2_selector *sel = ld_fdv2_selector_new("p:abc:300", 300);
    ck_assert_ptr_nonnull(sel);
    ck_assert_str_eq(ld_fdv2_selector_state(sel), "p:abc:300");
    ck_assert_int_eq(ld_fdv2_selector_version(sel), 300);
    ck_assert(ld_fdv2_selector_is_defined(sel));
    ld_fdv2_selector_free(sel);
    ld_fdv2_selector_free(NULL);
}
END_TEST

START_TEST(test_empty_selector_is_not_defined)
{
    ld_fdv2_selector *empty = ld_fdv2_selector_new("", 0);
    ld_fdv2_selector *no_state = ld_fdv2_selector_new("", 5);
    ld_fdv2_selector *no_version = ld_fdv2_selector_new("s", 0);
    ck_assert(!ld_fdv2_selector_is_defined(empty));
    ck_assert(!ld_fdv2_selector_is_defined(NULL));
    ck_assert(ld_fdv2_selector_is_defined(no_state));
    ck_assert(ld_fdv2_selector_is_defined(no_version));
    ck_assert_str_eq(ld_fdv2_selector_state(NULL), "");
    ck_assert_int_eq(ld_fdv2_selector_version(NULL), 0);
    ck_assert(ld_fdv2_selector_equal(empty, NULL));
    ck_assert(!ld_fdv2_selector_equal(empty, no_state));
    ck_assert(!ld_fdv2_selector_equal(no_version, empty));
    ld_fdv2_selector_free(empty);
    ld_fdv2_selector_free(no_state);
    ld_fdv2_selector_free(no_version);
}
END_TEST

START_TEST(test_selector_bad_input_is_null)
{
    ck_assert_ptr_null(ld_fdv2_selector_new(NULL, 1));
    ck_assert_ptr_null(ld_fdv2_selector_new("s", -1));
}
END_TEST

/* ---- change sets and the builder ------------------------------------------ */

START_TEST(test_no_changes_is_intent_none_with_an_empty_selector)
{
    ld_fdv2_change_set *cs = ld_fdv2_change_set_no_changes();
    ck_assert_ptr_nonnull(cs);
    ck_assert_int_eq(ld_fdv2_change_set_intent(cs), LD_FDV2_INTENT_NONE);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 0);
    ck_assert_ptr_null(ld_fdv2_change_set_get(cs, 0));
    ck_assert_ptr_nonnull(ld_fdv2_change_set_selector(cs));
    ck_assert(!ld_fdv2_selector_is_defined(ld_fdv2_change_set_selector(cs)));
    ld_fdv2_change_set_free(cs);
}
END_TEST

START_TEST(test_empty_is_a_full_transfer_without_changes)
{
    ld_fdv2_selector *sel = ld_fdv2_selector_new("p:x:7", 7);
    ld_fdv2_change_set *cs = ld_fdv2_change_set_empty(sel);
    ld_fdv2_selector_free(sel); /* the change set has its own copy */
    ck_assert_int_eq(ld_fdv2_change_set_intent(cs), LD_FDV2_INTENT_XFER_FULL);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 0);
    ck_assert_str_eq(ld_fdv2_selector_state(ld_fdv2_change_set_selector(cs)), "p:x:7");
    ck_assert_int_eq(ld_fdv2_selector_version(ld_fdv2_change_set_selector(cs)), 7);
    ld_fdv2_change_set_free(cs);
    cs = ld_fdv2_change_set_empty(NULL);
    ck_assert_int_eq(ld_fdv2_change_set_intent(cs), LD_FDV2_INTENT_XFER_FULL);
    ck_assert(!ld_fdv2_selector_is_defined(ld_fdv2_change_set_selector(cs)));
    ld_fdv2_change_set_free(cs);
}
END_TEST

START_TEST(test_change_set_accessors_of_null)
{
    ck_assert_int_eq(ld_fdv2_change_set_intent(NULL), LD_EINVAL);
    ck_assert_uint_eq(ld_fdv2_change_set_count(NULL), 0);
    ck_assert_ptr_null(ld_fdv2_change_set_get(NULL, 0));
    ck_assert(!ld_fdv2_selector_is_defined(ld_fdv2_change_set_selector(NULL)));
    ck_assert_int_eq(ld_fdv2_change_action(NULL), LD_EINVAL);
    ck_assert_ptr_null(ld_fdv2_change_kind(NULL));
    ck_assert_ptr_null(ld_fdv2_change_key(NULL));
    ck_assert_int_eq(ld_fdv2_change_version(NULL), -1);
    ck_assert_ptr_null(ld_fdv2_change_object(NULL));
    ld_fdv2_change_set_free(NULL);
}
END_TEST

static ld_fdv2_change_set_builder *b;

static void builder_setup(void)
{
    b = ld_fdv2_change_set_builder_new();
    ck_assert_ptr_nonnull(b);
}

static void builder_teardown(void)
{
    ld_fdv2_change_set_builder_free(b);
    b = NULL;
}

/* finish(sel) that must succeed. */
static ld_fdv2_change_set *finish(const ld_fdv2_selector *sel)
{
    ld_fdv2_change_set *cs = NULL;
    ck_assert_int_eq(ld_fdv2_change_set_builder_finish(b, sel, &cs), 0);
    ck_assert_ptr_nonnull(cs);
    return cs;
}

START_TEST(test_new_builder_has_no_intent_and_finish_fails)
{
    ck_assert_int_eq(ld_fdv2_change_set_builder_intent(b), LD_EINVAL);
    ck_assert_ptr_null(ld_fdv2_change_set_builder_error(b));
    ld_fdv2_change_set *cs = (ld_fdv2_change_set *)b; /* must be overwritten */
    ck_assert_int_eq(ld_fdv2_change_set_builder_finish(b, NULL, &cs), LD_EINVAL);
    ck_assert_ptr_null(cs);
    ck_assert_ptr_nonnull(strstr(ld_fdv2_change_set_builder_error(b), "intent"));
}
END_TEST

START_TEST(test_finish_without_intent_keeps_the_changes)
{
    json_t *o = item("f", 1);
    ck_assert_int_eq(ld_fdv2_change_set_builder_add_put(b, FEATURES, "f", 1, o), 0);
    ld_fdv2_change_set *cs = NULL;
    ck_assert_int_eq(ld_fdv2_change_set_builder_finish(b, NULL, &cs), LD_EINVAL);
    ck_assert_uint_eq(ld_fdv2_change_set_builder_count(b), 1);
    json_decref(o);
}
END_TEST

START_TEST(test_expect_changes_fails_without_intent)
{
    ck_assert_int_eq(ld_fdv2_change_set_builder_expect_changes(b), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(ld_fdv2_change_set_builder_error(b), "intent"));
    ck_assert_int_eq(ld_fdv2_change_set_builder_intent(b), LD_EINVAL);
}
END_TEST

START_TEST(test_expect_changes_turns_none_into_changes)
{
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_NONE), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_expect_changes(b), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_intent(b), LD_FDV2_INTENT_XFER_CHANGES);
}
END_TEST

START_TEST(test_expect_changes_leaves_full_and_changes_alone)
{
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_FULL), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_expect_changes(b), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_intent(b), LD_FDV2_INTENT_XFER_FULL);
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_CHANGES), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_expect_changes(b), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_intent(b), LD_FDV2_INTENT_XFER_CHANGES);
}
END_TEST

START_TEST(test_finish_returns_the_set_and_clears_the_changes)
{
    json_t *flag = item("f", 3);
    json_t *seg = item("s", 4);
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_CHANGES), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_add_put(b, FEATURES, "f", 3, flag), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_add_delete(b, FEATURES, "gone", 9), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_add_put(b, SEGMENTS, "s", 4, seg), 0);
    ck_assert_uint_eq(ld_fdv2_change_set_builder_count(b), 3);
    ld_fdv2_selector *sel = ld_fdv2_selector_new("p:s:10", 10);
    ld_fdv2_change_set *cs = finish(sel);
    ld_fdv2_selector_free(sel);
    ck_assert_uint_eq(ld_fdv2_change_set_builder_count(b), 0);
    ck_assert_int_eq(ld_fdv2_change_set_intent(cs), LD_FDV2_INTENT_XFER_CHANGES);
    ck_assert_int_eq(ld_fdv2_change_set_builder_intent(b), LD_FDV2_INTENT_XFER_CHANGES);
    ck_assert_str_eq(ld_fdv2_selector_state(ld_fdv2_change_set_selector(cs)), "p:s:10");
    ck_assert_int_eq(ld_fdv2_selector_version(ld_fdv2_change_set_selector(cs)), 10);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 3);

    const ld_fdv2_change *c = ld_fdv2_change_set_get(cs, 0);
    ck_assert_int_eq(ld_fdv2_change_action(c), LD_FDV2_ACTION_PUT);
    ck_assert_ptr_eq(ld_fdv2_change_kind(c), FEATURES);
    ck_assert_str_eq(ld_fdv2_change_key(c), "f");
    ck_assert_int_eq(ld_fdv2_change_version(c), 3);
    ck_assert_ptr_eq(ld_fdv2_change_object(c), flag); /* shared, not copied */
    c = ld_fdv2_change_set_get(cs, 1);
    ck_assert_int_eq(ld_fdv2_change_action(c), LD_FDV2_ACTION_DELETE);
    ck_assert_str_eq(ld_fdv2_change_key(c), "gone");
    ck_assert_int_eq(ld_fdv2_change_version(c), 9);
    ck_assert_ptr_null(ld_fdv2_change_object(c));
    c = ld_fdv2_change_set_get(cs, 2);
    ck_assert_ptr_eq(ld_fdv2_change_kind(c), SEGMENTS);
    ck_assert_ptr_null(ld_fdv2_change_set_get(cs, 3));

    /* the next set starts empty and does not share the old changes */
    ld_fdv2_change_set *next = finish(NULL);
    ck_assert_uint_eq(ld_fdv2_change_set_count(next), 0);
    ck_assert(!ld_fdv2_selector_is_defined(ld_fdv2_change_set_selector(next)));
    ld_fdv2_change_set_free(next);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 3);

    json_decref(flag);
    ck_assert_int_eq(ld_fdv2_change_object(ld_fdv2_change_set_get(cs, 0))->refcount, 1);
    ld_fdv2_change_set_free(cs);
    json_decref(seg);
}
END_TEST

START_TEST(test_finish_makes_a_full_intent_changes_afterwards)
{
    json_t *o = item("f", 1);
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_FULL), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_add_put(b, FEATURES, "f", 1, o), 0);
    ld_fdv2_change_set *full = finish(NULL);
    ck_assert_int_eq(ld_fdv2_change_set_intent(full), LD_FDV2_INTENT_XFER_FULL);
    ck_assert_uint_eq(ld_fdv2_change_set_count(full), 1);
    ck_assert_int_eq(ld_fdv2_change_set_builder_intent(b), LD_FDV2_INTENT_XFER_CHANGES);
    ld_fdv2_change_set *after = finish(NULL);
    ck_assert_int_eq(ld_fdv2_change_set_intent(after), LD_FDV2_INTENT_XFER_CHANGES);
    ld_fdv2_change_set_free(full);
    ld_fdv2_change_set_free(after);
    json_decref(o);
}
END_TEST

START_TEST(test_finish_keeps_intent_none)
{
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_NONE), 0);
    ld_fdv2_change_set *cs = finish(NULL);
    ck_assert_int_eq(ld_fdv2_change_set_intent(cs), LD_FDV2_INTENT_NONE);
    ck_assert_int_eq(ld_fdv2_change_set_builder_intent(b), LD_FDV2_INTENT_NONE);
    ld_fdv2_change_set_free(cs);
}
END_TEST

START_TEST(test_start_drops_the_changes_and_sets_the_intent)
{
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_CHANGES), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_add_delete(b, SEGMENTS, "s", 1), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_FULL), 0);
    ck_assert_uint_eq(ld_fdv2_change_set_builder_count(b), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_intent(b), LD_FDV2_INTENT_XFER_FULL);
}
END_TEST

START_TEST(test_reset_drops_the_changes_and_keeps_the_intent)
{
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_FULL), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_add_delete(b, SEGMENTS, "s", 1), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_reset(b), 0);
    ck_assert_uint_eq(ld_fdv2_change_set_builder_count(b), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_intent(b), LD_FDV2_INTENT_XFER_FULL);
    ck_assert_int_eq(ld_fdv2_change_set_builder_reset(NULL), LD_EINVAL);
}
END_TEST

START_TEST(test_many_changes_keep_their_order)
{
    char key[16];
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_FULL), 0);
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        ck_assert_int_eq(ld_fdv2_change_set_builder_add_delete(b, FEATURES, key, i), 0);
    }
    ld_fdv2_change_set *cs = finish(NULL);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 1000);
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        ck_assert_str_eq(ld_fdv2_change_key(ld_fdv2_change_set_get(cs, (size_t)i)), key);
        ck_assert_int_eq(ld_fdv2_change_version(ld_fdv2_change_set_get(cs, (size_t)i)), i);
    }
    ld_fdv2_change_set_free(cs);
}
END_TEST

START_TEST(test_builder_bad_input_is_einval_naming_the_argument_and_changes_nothing)
{
    json_t *o = item("f", 1);
    json_t *arr = json_array();
    const ld_kind *bogus = (const ld_kind *)"not a kind";
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_CHANGES), 0);
    struct {
        int rc;
        const char *field;
    } cases[] = {
        {ld_fdv2_change_set_builder_add_put(b, NULL, "f", 1, o), "kind"},
        {ld_fdv2_change_set_builder_add_put(b, bogus, "f", 1, o), "kind"},
        {ld_fdv2_change_set_builder_add_put(b, FEATURES, NULL, 1, o), "key"},
        {ld_fdv2_change_set_builder_add_put(b, FEATURES, "", 1, o), "key"},
        {ld_fdv2_change_set_builder_add_put(b, FEATURES, "f", -1, o), "version"},
        {ld_fdv2_change_set_builder_add_put(b, FEATURES, "f", 1, NULL), "object"},
        {ld_fdv2_change_set_builder_add_put(b, FEATURES, "f", 1, arr), "object"},
        {ld_fdv2_change_set_builder_add_delete(b, NULL, "f", 1), "kind"},
        {ld_fdv2_change_set_builder_add_delete(b, SEGMENTS, NULL, 1), "key"},
        {ld_fdv2_change_set_builder_add_delete(b, SEGMENTS, "s", -5), "version"},
        {ld_fdv2_change_set_builder_start(b, (enum ld_fdv2_intent)3), "intent"},
        {ld_fdv2_change_set_builder_start(b, (enum ld_fdv2_intent) - 1), "intent"},
        {ld_fdv2_change_set_builder_finish(b, NULL, NULL), "out"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_int_eq(cases[i].rc, LD_EINVAL);
    }
    /* Each call records its own message: check them one by one again. */
    ld_fdv2_change_set_builder_add_put(b, NULL, "f", 1, o);
    ck_assert_ptr_nonnull(strstr(ld_fdv2_change_set_builder_error(b), "kind"));
    ld_fdv2_change_set_builder_add_put(b, FEATURES, "", 1, o);
    ck_assert_ptr_nonnull(strstr(ld_fdv2_change_set_builder_error(b), "key"));
    ld_fdv2_change_set_builder_add_delete(b, FEATURES, "f", -1);
    ck_assert_ptr_nonnull(strstr(ld_fdv2_change_set_builder_error(b), "version"));
    ld_fdv2_change_set_builder_add_put(b, FEATURES, "f", 1, arr);
    ck_assert_ptr_nonnull(strstr(ld_fdv2_change_set_builder_error(b), "object"));
    ld_fdv2_change_set_builder_start(b, (enum ld_fdv2_intent)7);
    ck_assert_ptr_nonnull(strstr(ld_fdv2_change_set_builder_error(b), "intent"));
    ld_fdv2_change_set_builder_finish(b, NULL, NULL);
    ck_assert_ptr_nonnull(strstr(ld_fdv2_change_set_builder_error(b), "out"));

    ck_assert_uint_eq(ld_fdv2_change_set_builder_count(b), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_intent(b), LD_FDV2_INTENT_XFER_CHANGES);
    ck_assert_int_eq(o->refcount, 1);
    /* NULL builder */
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(NULL, LD_FDV2_INTENT_XFER_FULL), LD_EINVAL);
    ck_assert_int_eq(ld_fdv2_change_set_builder_expect_changes(NULL), LD_EINVAL);
    ck_assert_int_eq(ld_fdv2_change_set_builder_add_put(NULL, FEATURES, "f", 1, o), LD_EINVAL);
    ck_assert_int_eq(ld_fdv2_change_set_builder_add_delete(NULL, FEATURES, "f", 1), LD_EINVAL);
    ld_fdv2_change_set *cs = (ld_fdv2_change_set *)b;
    ck_assert_int_eq(ld_fdv2_change_set_builder_finish(NULL, NULL, &cs), LD_EINVAL);
    ck_assert_ptr_null(cs);
    ck_assert_int_eq(ld_fdv2_change_set_builder_intent(NULL), LD_EINVAL);
    ck_assert_uint_eq(ld_fdv2_change_set_builder_count(NULL), 0);
    ck_assert_ptr_null(ld_fdv2_change_set_builder_error(NULL));
    ld_fdv2_change_set_builder_free(NULL);
    json_decref(o);
    json_decref(arr);
}
END_TEST

/* ---- basis and update ------------------------------------------------------- */

START_TEST(test_basis_accessors)
{
    ld_fdv2_change_set *cs = ld_fdv2_change_set_no_changes();
    ld_fdv2_basis *basis = ld_fdv2_basis_new(cs, true, "env-1");
    ck_assert_ptr_nonnull(basis);
    ck_assert_ptr_eq(ld_fdv2_basis_change_set(basis), cs);
    ck_assert(ld_fdv2_basis_persist(basis));
    ck_assert_str_eq(ld_fdv2_basis_environment_id(basis), "env-1");
    ld_fdv2_basis_free(basis);

    basis = ld_fdv2_basis_new(ld_fdv2_change_set_empty(NULL), false, NULL);
    ck_assert(!ld_fdv2_basis_persist(basis));
    ck_assert_ptr_null(ld_fdv2_basis_environment_id(basis));
    ld_fdv2_basis_free(basis);

    ck_assert_ptr_null(ld_fdv2_basis_new(NULL, true, "env"));
    ck_assert_ptr_null(ld_fdv2_basis_change_set(NULL));
    ck_assert(!ld_fdv2_basis_persist(NULL));
    ck_assert_ptr_null(ld_fdv2_basis_environment_id(NULL));
    ld_fdv2_basis_free(NULL);
}
END_TEST

START_TEST(test_update_accessors)
{
    char message[] = "HTTP 503";
    ld_data_source_error_info err = {LD_DATA_SOURCE_ERROR_KIND_RESPONSE, 503, 1700000000000,
                                     message};
    ld_fdv2_change_set *cs = ld_fdv2_change_set_no_changes();
    ld_fdv2_update *u = ld_fdv2_update_new(LD_DATA_SOURCE_STATE_INTERRUPTED, cs, &err, "env-2");
    ck_assert_ptr_nonnull(u);
    message[0] = 'X'; /* the update has its own copy */
    ck_assert_int_eq(ld_fdv2_update_state(u), LD_DATA_SOURCE_STATE_INTERRUPTED);
    ck_assert_ptr_eq(ld_fdv2_update_change_set(u), cs);
    const ld_data_source_error_info *e = ld_fdv2_update_error(u);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->kind, LD_DATA_SOURCE_ERROR_KIND_RESPONSE);
    ck_assert_int_eq(e->status_code, 503);
    ck_assert_int_eq(e->time_ms, 1700000000000);
    ck_assert_str_eq(e->message, "HTTP 503");
    ck_assert_str_eq(ld_fdv2_update_environment_id(u), "env-2");
    ld_fdv2_update_free(u);

    u = ld_fdv2_update_new(LD_DATA_SOURCE_STATE_VALID, NULL, NULL, NULL);
    ck_assert_int_eq(ld_fdv2_update_state(u), LD_DATA_SOURCE_STATE_VALID);
    ck_assert_ptr_null(ld_fdv2_update_change_set(u));
    ck_assert_ptr_null(ld_fdv2_update_error(u));
    ck_assert_ptr_null(ld_fdv2_update_environment_id(u));
    ld_fdv2_update_free(u);

    /* the rules of status.h: a NULL message reads as "", time 0 is now */
    err.message = NULL;
    err.status_code = 0;
    err.time_ms = 0;
    int64_t before = now_ms();
    u = ld_fdv2_update_new(LD_DATA_SOURCE_STATE_OFF, NULL, &err, NULL);
    ck_assert_str_eq(ld_fdv2_update_error(u)->message, "");
    ck_assert_int_ge(ld_fdv2_update_error(u)->time_ms, before);
    ck_assert_int_le(ld_fdv2_update_error(u)->time_ms, now_ms());
    ck_assert_int_eq(err.time_ms, 0); /* the caller's error is not written to */
    ld_fdv2_update_free(u);

    ck_assert_int_eq(ld_fdv2_update_state(NULL), LD_EINVAL);
    ck_assert_ptr_null(ld_fdv2_update_change_set(NULL));
    ck_assert_ptr_null(ld_fdv2_update_error(NULL));
    ck_assert_ptr_null(ld_fdv2_update_environment_id(NULL));
    ld_fdv2_update_free(NULL);
}
END_TEST

START_TEST(test_update_bad_input_is_null_and_frees_the_change_set)
{
    ld_data_source_error_info err = {LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0, 0, "x"};
    /* each call steals a change set; valgrind and ASan see any leak */
    ck_assert_ptr_null(ld_fdv2_update_new((enum ld_data_source_state)4,
                                          ld_fdv2_change_set_no_changes(), NULL, NULL));
    ck_assert_ptr_null(ld_fdv2_update_new((enum ld_data_source_state) - 1,
                                          ld_fdv2_change_set_no_changes(), NULL, NULL));
    err.kind = (enum ld_data_source_error_kind)5;
    ck_assert_ptr_null(
        ld_fdv2_update_new(LD_DATA_SOURCE_STATE_OFF, ld_fdv2_change_set_no_changes(), &err, NULL));
    err.kind = LD_DATA_SOURCE_ERROR_KIND_UNKNOWN;
    err.status_code = 42;
    ck_assert_ptr_null(
        ld_fdv2_update_new(LD_DATA_SOURCE_STATE_OFF, ld_fdv2_change_set_no_changes(), &err, NULL));
    err.status_code = 1000;
    ck_assert_ptr_null(ld_fdv2_update_new(LD_DATA_SOURCE_STATE_OFF, NULL, &err, NULL));
    err.status_code = 404;
    err.time_ms = -1;
    ck_assert_ptr_null(ld_fdv2_update_new(LD_DATA_SOURCE_STATE_OFF, NULL, &err, NULL));
}
END_TEST

START_TEST(test_bases_and_updates_in_futures)
{
    ld_future *fb = ld_future_new(B);
    ld_future *fu = ld_future_new(B);
    ld_fdv2_basis *basis = ld_fdv2_basis_new(ld_fdv2_change_set_no_changes(), false, NULL);
    ld_fdv2_update *u = ld_fdv2_update_new(LD_DATA_SOURCE_STATE_VALID, NULL, NULL, NULL);
    ck_assert_int_eq(ld_fdv2_fulfill_basis(fb, basis), 0);
    ck_assert_int_eq(ld_fdv2_fulfill_update(fu, u), 0);
    ck_assert_ptr_eq(ld_fdv2_future_basis(fb), basis);
    ck_assert_ptr_eq(ld_fdv2_future_update(fu), u);
    ck_assert_ptr_null(ld_fdv2_future_update(fb)); /* the tag tells them apart */
    ck_assert_ptr_null(ld_fdv2_future_basis(fu));
    /* completing again frees the value offered (steals on every path) */
    ck_assert_int_eq(
        ld_fdv2_fulfill_update(fu, ld_fdv2_update_new(LD_DATA_SOURCE_STATE_OFF, NULL, NULL, NULL)),
        LD_EALREADY);
    ck_assert_int_eq(ld_fdv2_fulfill_basis(fb, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_fdv2_fulfill_update(fb, NULL), LD_EINVAL);
    ck_assert_ptr_null(ld_fdv2_future_basis(NULL));
    ld_future *json = ld_future_fulfilled_json(B, json_true());
    ck_assert_ptr_null(ld_fdv2_future_update(json));
    ld_future_unref(json);
    ld_future_unref(fb); /* frees the basis */
    ld_future_unref(fu);
}
END_TEST

/* A future holding some other pointer: the accessors must not read it (a
 * 2-byte block would be read past its end; 16 is no address at all). */
START_TEST(test_future_basis_and_update_are_null_for_foreign_pointers)
{
    char *small = malloc(2);
    ck_assert_ptr_nonnull(small);
    small[0] = 'x';
    small[1] = 0;
    ld_future *fs[2] = {ld_future_new(B), ld_future_new(B)};
    ck_assert_int_eq(ld_future_fulfill_ptr(fs[0], small, free), 0);
    ck_assert_int_eq(ld_future_fulfill_ptr(fs[1], (void *)16, NULL), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_ptr_null(ld_fdv2_future_basis(fs[i]));
        ck_assert_ptr_null(ld_fdv2_future_update(fs[i]));
        ld_future *adopted = ld_future_new(B);
        ck_assert_int_eq(ld_future_forward(adopted, ld_future_ref(fs[i])), 0);
        ld_test_flush();
        ck_assert(ld_future_is_fulfilled(adopted));
        ck_assert_ptr_null(ld_fdv2_future_basis(adopted));
        ck_assert_ptr_null(ld_fdv2_future_update(adopted));
        ld_future_unref(adopted);
        ld_future_unref(fs[i]);
    }
    /* a future that adopted a basis or an update still reads it */
    ld_future *fb = ld_future_new(B), *fu = ld_future_new(B);
    ld_fdv2_basis *basis = ld_fdv2_basis_new(ld_fdv2_change_set_no_changes(), false, NULL);
    ld_fdv2_update *u = ld_fdv2_update_new(LD_DATA_SOURCE_STATE_VALID, NULL, NULL, NULL);
    ck_assert_int_eq(ld_fdv2_fulfill_basis(fb, basis), 0);
    ck_assert_int_eq(ld_fdv2_fulfill_update(fu, u), 0);
    ld_future *ab = ld_future_new(B), *au = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(ab, ld_future_ref(fb)), 0);
    ck_assert_int_eq(ld_future_forward(au, ld_future_ref(fu)), 0);
    ld_test_flush();
    ck_assert_ptr_eq(ld_fdv2_future_basis(ab), basis);
    ck_assert_ptr_eq(ld_fdv2_future_update(au), u);
    ck_assert_ptr_null(ld_fdv2_future_update(ab));
    ck_assert_ptr_null(ld_fdv2_future_basis(au));
    ld_future_unref(fb);
    ld_future_unref(fu);
    ld_future_unref(ab);
    ld_future_unref(au);
}
END_TEST

/* ---- a scripted data source: keeps every `out` until the test completes it */

static struct ld_test_script impl;
static ld_initializer *init;
static ld_synchronizer *sync;

static void source_setup(void)
{
    ld_test_setup();
    memset(&impl, 0, sizeof(impl));
    init = NULL;
    sync = NULL;
}

static void source_teardown(void)
{
    ld_initializer_free(init);
    ld_synchronizer_free(sync);
    init = NULL;
    sync = NULL;
    ld_test_teardown();
}

static ld_fdv2_basis *basis_with_env(const char *env)
{
    return ld_fdv2_basis_new(ld_fdv2_change_set_no_changes(), true, env);
}

static ld_fdv2_update *update_of(enum ld_data_source_state state)
{
    return ld_fdv2_update_new(state, NULL, NULL, NULL);
}

START_TEST(test_initializer_fetches_a_basis)
{
    init = ld_initializer_new(B, &ld_test_script_initializer_ops, &impl);
    ck_assert_str_eq(ld_initializer_name(init), "script");
    ld_future *f = ld_initializer_fetch(init);
    ck_assert_int_eq(impl.n, 1);
    ck_assert(ld_future_is_pending(f));
    ck_assert_int_eq(ld_fdv2_fulfill_basis(impl.outs[0], basis_with_env("env")), 0);
    ld_test_wait(f);
    ck_assert_str_eq(ld_fdv2_basis_environment_id(ld_fdv2_future_basis(f)), "env");
    ck_assert(ld_fdv2_basis_persist(ld_fdv2_future_basis(f)));
    ld_future_unref(f);
}
END_TEST

START_TEST(test_initializer_fetches_complete_in_issue_order)
{
    ld_test_n_order = 0;
    init = ld_initializer_new(B, &ld_test_script_initializer_ops, &impl);
    ld_future *a = ld_initializer_fetch(init);
    ld_future *b2 = ld_initializer_fetch(init);
    ld_future_on_complete(ld_future_ref(a), ld_test_note_order, (void *)0);
    ld_future_on_complete(ld_future_ref(b2), ld_test_note_order, (void *)1);
    ld_fdv2_fulfill_basis(impl.outs[1], basis_with_env("second"));
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 0);
    ld_future_reject(impl.outs[0], LD_EIO, "connection refused");
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 2);
    ck_assert_int_eq(ld_test_order[0], 0);
    ck_assert_int_eq(ld_test_order[1], 1);
    ck_assert_int_eq(ld_future_error(a), LD_EIO);
    ck_assert_str_eq(ld_fdv2_basis_environment_id(ld_fdv2_future_basis(b2)), "second");
    ld_future_unref(a);
    ld_future_unref(b2);
}
END_TEST

START_TEST(test_initializer_close_rejects_pending_and_later_fetches)
{
    ld_test_cancels = 0;
    init = ld_initializer_new(B, &ld_test_script_initializer_ops, &impl);
    ld_future *pending = ld_initializer_fetch(init);
    ld_future_set_cancel_handler(impl.outs[0], ld_test_count_cancel, NULL);
    ld_future *close = ld_initializer_stop(init);
    ck_assert_int_eq(impl.closes, 1);
    ld_test_wait(close);
    ld_test_wait(pending);
    ld_test_flush(); /* cancel handlers run from the loop */
    ck_assert(ld_future_is_fulfilled(close));
    ck_assert_int_eq(ld_future_error(pending), LD_ECLOSED);
    ck_assert_int_eq(ld_test_cancels, 1);
    ld_test_expect_error(ld_initializer_fetch(init), LD_ECLOSED, "stopped");
    ld_future_unref(close);
    close = ld_initializer_stop(init);
    ld_test_wait(close);
    ck_assert(ld_future_is_fulfilled(close));
    ck_assert_int_eq(impl.closes, 1);
    ld_future_unref(close);
    ld_future_unref(pending);
}
END_TEST

/* A next after stop completes after the stop and what was pending before
 * it, not ahead of them (A S B, not B A S). */
START_TEST(test_synchronizer_next_after_stop_completes_in_issue_order)
{
    ld_test_n_order = 0;
    sync = ld_synchronizer_new(B, &ld_test_script_synchronizer_ops, &impl);
    ld_future_on_complete(ld_synchronizer_next(sync), ld_test_note_order, (void *)0);
    ld_future_on_complete(ld_synchronizer_stop(sync), ld_test_note_order, (void *)1);
    ld_future_on_complete(ld_synchronizer_next(sync), ld_test_note_order, (void *)2);
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ld_test_order[i], i);
}
END_TEST

START_TEST(test_initializer_new_bad_input_and_defaults)
{
    struct ld_initializer_ops ops;
    ck_assert_ptr_null(ld_initializer_new(NULL, &ld_test_script_initializer_ops, &impl));
    ck_assert_ptr_null(ld_initializer_new(B, NULL, &impl));
    LD_TEST_REFUSES(ops, ld_test_script_initializer_ops, version, 0,
                    ld_initializer_new(B, &ops, &impl));
    LD_TEST_REFUSES(ops, ld_test_script_initializer_ops, fetch, NULL,
                    ld_initializer_new(B, &ops, &impl));
    ck_assert_ptr_null(ld_initializer_fetch(NULL));
    ck_assert_ptr_null(ld_initializer_stop(NULL));
    ck_assert_str_eq(ld_initializer_name(NULL), "(null)");
    ld_initializer_free(NULL);
    ops = ld_test_script_initializer_ops;
    ops.name = NULL;
    ops.stop = NULL;
    ops.free = NULL;
    init = ld_initializer_new(B, &ops, &impl);
    ck_assert_str_eq(ld_initializer_name(init), "unknown");
    ld_future *close = ld_initializer_stop(init);
    ld_test_wait(close);
    ck_assert(ld_future_is_fulfilled(close));
    ld_future_unref(close);
    ld_initializer_free(init); /* before `ops` goes out of scope */
    init = NULL;
    ck_assert_int_eq(impl.freed, 0);
}
END_TEST

START_TEST(test_synchronizer_yields_updates_in_order)
{
    ld_test_n_order = 0;
    sync = ld_synchronizer_new(B, &ld_test_script_synchronizer_ops, &impl);
    ck_assert_str_eq(ld_synchronizer_name(sync), "script");
    ld_future *fs[3];
    for (intptr_t i = 0; i < 3; i++) {
        fs[i] = ld_synchronizer_next(sync);
        ld_future_on_complete(ld_future_ref(fs[i]), ld_test_note_order, (void *)i);
    }
    ck_assert_int_eq(impl.n, 3);
    ld_fdv2_fulfill_update(impl.outs[2], update_of(LD_DATA_SOURCE_STATE_OFF));
    ld_fdv2_fulfill_update(impl.outs[1], update_of(LD_DATA_SOURCE_STATE_INTERRUPTED));
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 0);
    ld_fdv2_fulfill_update(impl.outs[0], update_of(LD_DATA_SOURCE_STATE_VALID));
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ld_test_order[i], i);
    ck_assert_int_eq(ld_fdv2_update_state(ld_fdv2_future_update(fs[0])),
                     LD_DATA_SOURCE_STATE_VALID);
    ck_assert_int_eq(ld_fdv2_update_state(ld_fdv2_future_update(fs[1])),
                     LD_DATA_SOURCE_STATE_INTERRUPTED);
    ck_assert_int_eq(ld_fdv2_update_state(ld_fdv2_future_update(fs[2])), LD_DATA_SOURCE_STATE_OFF);
    for (int i = 0; i < 3; i++)
        ld_future_unref(fs[i]);
}
END_TEST

START_TEST(test_synchronizer_stop_ends_the_iteration_with_eclosed)
{
    ld_test_cancels = 0;
    ld_test_n_order = 0;
    sync = ld_synchronizer_new(B, &ld_test_script_synchronizer_ops, &impl);
    ld_future *first = ld_synchronizer_next(sync);
    ld_fdv2_fulfill_update(impl.outs[0], update_of(LD_DATA_SOURCE_STATE_VALID));
    ld_test_wait(first);
    ck_assert_int_eq(ld_fdv2_update_state(ld_fdv2_future_update(first)),
                     LD_DATA_SOURCE_STATE_VALID);
    ld_future_unref(first);

    ld_future *pending = ld_synchronizer_next(sync);
    ld_future_set_cancel_handler(impl.outs[1], ld_test_count_cancel, NULL);
    ld_future_on_complete(ld_future_ref(pending), ld_test_note_order, (void *)0);
    ld_future *stop = ld_synchronizer_stop(sync);
    ld_future_on_complete(ld_future_ref(stop), ld_test_note_order, (void *)1);
    ck_assert_int_eq(ld_test_n_order, 0); /* never inside the call */
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 2);
    ck_assert_int_eq(ld_test_order[0], 0); /* the pending next ends before stop completes */
    ck_assert_int_eq(ld_test_order[1], 1);
    ck_assert_int_eq(ld_future_error(pending), LD_ECLOSED);
    ck_assert_ptr_nonnull(strstr(ld_future_error_message(pending), "stopped"));
    ck_assert(ld_future_is_fulfilled(stop));
    ck_assert_int_eq(ld_test_cancels, 1);
    ck_assert_int_eq(impl.closes, 1);
    /* the implementation completing late changes nothing */
    ck_assert_int_eq(ld_fdv2_fulfill_update(impl.outs[1], update_of(LD_DATA_SOURCE_STATE_VALID)),
                     LD_EALREADY);
    ld_test_expect_error(ld_synchronizer_next(sync), LD_ECLOSED, "stopped");
    ld_test_expect_error(ld_synchronizer_next(sync), LD_ECLOSED, NULL);
    ck_assert_int_eq(impl.n, 2); /* the implementation was not asked again */
    ld_future_unref(pending);
    ld_future_unref(stop);
}
END_TEST

START_TEST(test_synchronizer_stop_delivers_updates_that_are_ready)
{
    sync = ld_synchronizer_new(B, &ld_test_script_synchronizer_ops, &impl);
    ld_future *a = ld_synchronizer_next(sync);
    ld_future *b2 = ld_synchronizer_next(sync);
    ld_future *c = ld_synchronizer_next(sync);
    ld_fdv2_fulfill_update(impl.outs[0], update_of(LD_DATA_SOURCE_STATE_VALID));
    ld_fdv2_fulfill_update(impl.outs[2], update_of(LD_DATA_SOURCE_STATE_VALID));
    ld_test_n_order = 0;
    ld_future_on_complete(ld_future_ref(a), ld_test_note_order, (void *)0);
    ld_future_on_complete(ld_future_ref(b2), ld_test_note_order, (void *)1);
    ld_future_on_complete(ld_future_ref(c), ld_test_note_order, (void *)2);
    ld_future *stop = ld_synchronizer_stop(sync); /* before the loop ran */
    ld_future_on_complete(ld_future_ref(stop), ld_test_note_order, (void *)3);
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ld_test_order[i], i); /* issue order, stop last */
    ck_assert(ld_future_is_fulfilled(stop));
    ck_assert(ld_future_is_fulfilled(a));
    ck_assert_int_eq(ld_future_error(b2), LD_ECLOSED);
    ck_assert_int_eq(ld_future_error(c), LD_ECLOSED); /* ready, but behind b2 */
    ld_future_unref(a);
    ld_future_unref(b2);
    ld_future_unref(c);
    ld_future_unref(stop);
}
END_TEST

/* A loop that consumes updates until the iteration ends. */
struct consumer {
    int updates;
    int end_code;
};

static void consume(ld_future *f, void *arg)
{
    struct consumer *c = arg;
    if (ld_future_is_rejected(f)) {
        c->end_code = ld_future_error(f);
        return;
    }
    c->updates++;
    if (c->updates == 2)
        ld_future_unref(ld_synchronizer_stop(sync));
    ld_future_on_complete(ld_synchronizer_next(sync), consume, c);
}

/* An implementation that has an update ready every time. */
static void always_valid(void *impl_arg, ld_future *out)
{
    (void)impl_arg;
    ld_fdv2_fulfill_update(out, update_of(LD_DATA_SOURCE_STATE_VALID));
    ld_future_unref(out);
}

START_TEST(test_synchronizer_as_an_async_iterator)
{
    static const struct ld_synchronizer_ops ops = {
        .version = LD_SYNCHRONIZER_OPS_VERSION,
        .next = always_valid,
    };
    struct consumer c = {0, 0};
    sync = ld_synchronizer_new(B, &ops, NULL);
    ck_assert_str_eq(ld_synchronizer_name(sync), "unknown");
    ld_future_on_complete(ld_synchronizer_next(sync), consume, &c);
    ld_test_flush();
    ck_assert_int_eq(c.updates, 2);
    ck_assert_int_eq(c.end_code, LD_ECLOSED);
}
END_TEST

START_TEST(test_synchronizer_implementation_may_end_the_iteration)
{
    sync = ld_synchronizer_new(B, &ld_test_script_synchronizer_ops, &impl);
    ld_future *f = ld_synchronizer_next(sync);
    ld_future_reject(impl.outs[0], LD_ECLOSED, "stream ended");
    ld_test_wait(f);
    ck_assert_int_eq(ld_future_error(f), LD_ECLOSED);
    ck_assert_str_eq(ld_future_error_message(f), "stream ended");
    ld_future_unref(f);
}
END_TEST

START_TEST(test_synchronizer_new_bad_input)
{
    struct ld_synchronizer_ops ops;
    ck_assert_ptr_null(ld_synchronizer_new(NULL, &ld_test_script_synchronizer_ops, &impl));
    ck_assert_ptr_null(ld_synchronizer_new(B, NULL, &impl));
    LD_TEST_REFUSES(ops, ld_test_script_synchronizer_ops, version, 3,
                    ld_synchronizer_new(B, &ops, &impl));
    LD_TEST_REFUSES(ops, ld_test_script_synchronizer_ops, version, 0,
                    ld_synchronizer_new(B, &ops, &impl));
    LD_TEST_REFUSES(ops, ld_test_script_synchronizer_ops, next, NULL,
                    ld_synchronizer_new(B, &ops, &impl));
    ck_assert_ptr_null(ld_synchronizer_next(NULL));
    ck_assert_ptr_null(ld_synchronizer_stop(NULL));
    ck_assert_str_eq(ld_synchronizer_name(NULL), "(null)");
    ld_synchronizer_free(NULL);
    ck_assert_int_eq(impl.freed, 0);
}
END_TEST

Suite *ld_suite_fdv2(void)
{
    Suite *s = suite_create("fdv2");
    TCase *tc = tcase_create("types");
    tcase_add_test(tc, test_intent_names_round_trip);
    tcase_add_test(tc, test_action_names);
    tcase_add_test(tc, test_kind_names_map_to_the_store_kinds);
    tcase_add_test(tc, test_selector_accessors);
    tcase_add_test(tc, test_empty_selector_is_not_defined);
    tcase_add_test(tc, test_selector_bad_input_is_null);
    tcase_add_test(tc, test_no_changes_is_intent_none_with_an_empty_selector);
    tcase_add_test(tc, test_empty_is_a_full_transfer_without_changes);
    tcase_add_test(tc, test_change_set_accessors_of_null);
    tcase_add_test(tc, test_basis_accessors);
    tcase_add_test(tc, test_update_accessors);
    tcase_add_test(tc, test_update_bad_input_is_null_and_frees_the_change_set);
    suite_add_tcase(s, tc);

    tc = tcase_create("builder");
    tcase_add_checked_fixture(tc, builder_setup, builder_teardown);
    tcase_add_test(tc, test_new_builder_has_no_intent_and_finish_fails);
    tcase_add_test(tc, test_finish_without_intent_keeps_the_changes);
    tcase_add_test(tc, test_expect_changes_fails_without_intent);
    tcase_add_test(tc, test_expect_changes_turns_none_into_changes);
    tcase_add_test(tc, test_expect_changes_leaves_full_and_changes_alone);
    tcase_add_test(tc, test_finish_returns_the_set_and_clears_the_changes);
    tcase_add_test(tc, test_finish_makes_a_full_intent_changes_afterwards);
    tcase_add_test(tc, test_finish_keeps_intent_none);
    tcase_add_test(tc, test_start_drops_the_changes_and_sets_the_intent);
    tcase_add_test(tc, test_reset_drops_the_changes_and_keeps_the_intent);
    tcase_add_test(tc, test_many_changes_keep_their_order);
    tcase_add_test(tc, test_builder_bad_input_is_einval_naming_the_argument_and_changes_nothing);
    suite_add_tcase(s, tc);

    tc = tcase_create("sources");
    tcase_add_checked_fixture(tc, source_setup, source_teardown);
    tcase_add_test(tc, test_bases_and_updates_in_futures);
    tcase_add_test(tc, test_future_basis_and_update_are_null_for_foreign_pointers);
    tcase_add_test(tc, test_initializer_fetches_a_basis);
    tcase_add_test(tc, test_initializer_fetches_complete_in_issue_order);
    tcase_add_test(tc, test_initializer_close_rejects_pending_and_later_fetches);
    tcase_add_test(tc, test_synchronizer_next_after_stop_completes_in_issue_order);
    tcase_add_test(tc, test_initializer_new_bad_input_and_defaults);
    tcase_add_test(tc, test_synchronizer_yields_updates_in_order);
    tcase_add_test(tc, test_synchronizer_stop_ends_the_iteration_with_eclosed);
    tcase_add_test(tc, test_synchronizer_stop_delivers_updates_that_are_ready);
    tcase_add_test(tc, test_synchronizer_as_an_async_iterator);
    tcase_add_test(tc, test_synchronizer_implementation_may_end_the_iteration);
    tcase_add_test(tc, test_synchronizer_new_bad_input);
    suite_add_tcase(s, tc);
    return s;
}
