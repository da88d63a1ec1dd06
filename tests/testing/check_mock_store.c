/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The mock store's own features (lib/testing/mock_store.c); its store
 * semantics are checked by the contract suite (check_contract.c). */
#include <string.h>

#include <ldasync/testing.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base
#define F ld_kind_features()
#define SEG ld_kind_segments()

static ld_store *mock;

static void mock_setup(void)
{
    ld_test_setup();
    mock = ld_mock_store_new(B);
    ck_assert_ptr_nonnull(mock);
}

static void mock_teardown(void)
{
    ld_store_free(mock);
    mock = NULL;
    ld_test_teardown();
}

static json_t *item(const char *key, int version)
{
    json_t *it = json_pack("{s:s, s:i, s:b}", "key", key, "version", version, "on", 1);
    ck_assert_ptr_nonnull(it);
    return it;
}

/* The version get returns for (kind, key), -1 for NULL. */
static int64_t version_of(const ld_kind *kind, const char *key)
{
    ld_future *f = ld_test_done(ld_store_get(mock, kind, key));
    ck_assert(ld_future_is_fulfilled(f));
    int64_t v = ld_future_json(f) ? ld_item_version(ld_future_json(f)) : -1;
    ld_future_unref(f);
    return v;
}

static size_t all_size(const ld_kind *kind)
{
    ld_future *f = ld_test_done(ld_store_all(mock, kind));
    ck_assert(ld_future_is_fulfilled(f));
    size_t n = json_object_size(ld_future_json(f));
    ld_future_unref(f);
    return n;
}

static void init_foo10(void)
{
    json_t *data = json_pack("{s:{s:o}}", "features", "foo", item("foo", 10));
    ld_test_await_ok(ld_store_init(mock, data));
    json_decref(data);
}

/* ---- basics --------------------------------------------------------------- */

START_TEST(test_new_and_describe)
{
    ck_assert_ptr_null(ld_mock_store_new(NULL));
    ck_assert_str_eq(ld_store_describe(mock), "mock");
    ck_assert_int_eq(ld_mock_store_init_count(mock), 0);
    ck_assert_ptr_null(ld_mock_store_init_data(mock, 0));
    for (int op = LD_MOCK_OP_GET; op <= LD_MOCK_OP_ANY; op++)
        ck_assert_int_eq(ld_mock_store_calls(mock, (enum ld_mock_op)op), 0);
}
END_TEST

START_TEST(test_two_mocks_are_independent)
{
    ld_store *other = ld_mock_store_new(B);
    ck_assert_ptr_nonnull(other);
    init_foo10();
    ck_assert_int_eq(ld_mock_store_init_count(mock), 1);
    ck_assert_int_eq(ld_mock_store_init_count(other), 0);
    ck_assert_int_eq(ld_mock_store_fail_next(other, LD_MOCK_OP_ANY, 1, LD_ESTORE), 0);
    ck_assert_int_eq(version_of(F, "foo"), 10); /* mock is not armed */
    ld_test_expect_error(ld_store_initialized(other), LD_ESTORE, NULL);
    ld_store_free(other);
    ck_assert_int_eq(ld_mock_store_init_count(mock), 1);
}
END_TEST

/* ---- recorded inits -------------------------------------------------------- */

START_TEST(test_every_init_is_recorded_in_order)
{
    json_t *first = json_pack("{s:{s:o}}", "features", "a", item("a", 1));
    json_t *second = json_pack("{s:{}, s:{s:o}}", "features", "segments", "s", item("s", 2));
    ld_future *f1 = ld_store_init(mock, first);
    ld_future *f2 = ld_store_init(mock, second);
    ck_assert_int_eq(ld_mock_store_init_count(mock), 2); /* recorded when issued */
    ld_test_await_ok(f1);
    ld_test_await_ok(f2);
    ck_assert(json_equal(ld_mock_store_init_data(mock, 0), first));
    ck_assert(json_equal(ld_mock_store_init_data(mock, 1), second));
    ck_assert_ptr_null(ld_mock_store_init_data(mock, 2));
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_INIT), 2);
    json_decref(first);
    json_decref(second);
}
END_TEST

START_TEST(test_recorded_init_keeps_its_data_and_shares_items)
{
    json_t *foo = item("foo", 1);
    json_t *data = json_pack("{s:{s:O}}", "features", "foo", foo);
    ld_test_await_ok(ld_store_init(mock, data));
    /* the caller reuses its containers; the record does not change */
    json_object_clear(json_object_get(data, "features"));
    json_object_set_new(data, "segments", json_object());
    const json_t *rec = ld_mock_store_init_data(mock, 0);
    ck_assert_int_eq(json_object_size(rec), 1);
    ck_assert_ptr_eq(json_object_get(json_object_get(rec, "features"), "foo"), foo);
    /* nor do later writes to the store */
    json_t *newer = item("foo", 2);
    ck_assert(ld_test_await_bool(ld_store_upsert(mock, F, newer)));
    ck_assert_ptr_eq(json_object_get(json_object_get(rec, "features"), "foo"), foo);
    ck_assert_int_eq(version_of(F, "foo"), 2);
    json_decref(newer);
    json_decref(data);
    json_decref(foo);
}
END_TEST

START_TEST(test_inits_rejected_before_the_mock_are_not_recorded)
{
    json_t *bad = json_pack("{s:[]}", "features");
    ld_test_expect_error(ld_store_init(mock, bad), LD_EINVAL, NULL);
    json_t *good = json_object();
    ld_test_await_ok(ld_store_close(mock));
    ld_test_expect_error(ld_store_init(mock, good), LD_ECLOSED, NULL);
    ck_assert_int_eq(ld_mock_store_init_count(mock), 0);
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_ANY), 0);
    json_decref(bad);
    json_decref(good);
}
END_TEST

/* ---- force_set / force_delete --------------------------------------------- */

START_TEST(test_force_set_ignores_versions_and_is_immediate)
{
    init_foo10();
    json_t *older = item("foo", 3);
    ck_assert_int_eq(ld_mock_store_force_set(mock, F, older), 0);
    /* synchronous: a get issued now sees it */
    ld_future *f = ld_store_get(mock, F, "foo");
    ld_test_wait(f);
    ck_assert(ld_future_is_fulfilled(f));
    ck_assert_ptr_eq(ld_future_json(f), older);
    ld_future_unref(f);
    /* and the version rule now starts from it */
    json_t *v4 = item("foo", 4);
    ck_assert(ld_test_await_bool(ld_store_upsert(mock, F, v4)));
    ck_assert_int_eq(version_of(F, "foo"), 4);
    /* a new key, another kind, no change to initialized or counters */
    json_t *s = item("s", 0);
    ck_assert_int_eq(ld_mock_store_force_set(mock, SEG, s), 0);
    ck_assert_int_eq(version_of(SEG, "s"), 0);
    ck_assert_int_eq(version_of(F, "s"), -1);
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_UPSERT), 1);
    json_decref(older);
    json_decref(v4);
    json_decref(s);
}
END_TEST

START_TEST(test_force_set_does_not_initialize)
{
    json_t *it = item("foo", 1);
    ck_assert_int_eq(ld_mock_store_force_set(mock, F, it), 0);
    ck_assert(!ld_test_await_bool(ld_store_initialized(mock)));
    ck_assert_int_eq(all_size(F), 1);
    json_decref(it);
}
END_TEST

START_TEST(test_force_set_of_a_tombstone_hides_the_key)
{
    init_foo10();
    json_t *tomb = ld_tombstone_new("foo", 2);
    ck_assert_int_eq(ld_mock_store_force_set(mock, F, tomb), 0);
    ck_assert_int_eq(version_of(F, "foo"), -1);
    ck_assert_int_eq(all_size(F), 0);
    json_decref(tomb);
}
END_TEST

START_TEST(test_force_delete_ignores_versions)
{
    init_foo10();
    ck_assert_int_eq(ld_mock_store_force_delete(mock, F, "foo", 5), 0);
    ck_assert_int_eq(version_of(F, "foo"), -1);
    ck_assert_int_eq(all_size(F), 0);
    /* the tombstone is at 5: an upsert at 6 applies, at 5 does not */
    json_t *v5 = item("foo", 5), *v6 = item("foo", 6);
    ck_assert(!ld_test_await_bool(ld_store_upsert(mock, F, v5)));
    ck_assert(ld_test_await_bool(ld_store_upsert(mock, F, v6)));
    ck_assert_int_eq(ld_mock_store_force_delete(mock, SEG, "never-there", 0), 0);
    ck_assert_int_eq(version_of(SEG, "never-there"), -1);
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_DELETE), 0);
    json_decref(v5);
    json_decref(v6);
}
END_TEST

START_TEST(test_force_bad_input)
{
    ld_store *memory = ld_memory_store_new(B);
    json_t *good = item("foo", 1);
    json_t *bad_version = json_pack("{s:s, s:i}", "key", "foo", "version", -1);
    json_t *no_key = json_pack("{s:i}", "version", 1);
    ck_assert_int_eq(ld_mock_store_force_set(NULL, F, good), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_set(memory, F, good), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_set(mock, NULL, good), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_set(mock, F, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_set(mock, F, bad_version), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_set(mock, F, no_key), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_delete(NULL, F, "foo", 1), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_delete(memory, F, "foo", 1), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_delete(mock, NULL, "foo", 1), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_delete(mock, F, NULL, 1), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_delete(mock, F, "", 1), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_delete(mock, F, "foo", -1), LD_EINVAL);
    ck_assert_int_eq(all_size(F), 0);
    ld_store_free(memory);
    json_decref(good);
    json_decref(bad_version);
    json_decref(no_key);
}
END_TEST

/* Keys that are not valid UTF-8 are bad input, not a lack of memory. */
START_TEST(test_force_refuses_non_utf8_keys_as_einval)
{
    json_t *raw = item("foo", 1);
    ck_assert_int_eq(json_object_set_new(raw, "key", json_string_nocheck("caf\xe9")), 0);
    ck_assert_int_eq(ld_mock_store_force_set(mock, F, raw), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_delete(mock, F, "caf\xe9", 1), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_delete(mock, F, "\xed\xa0\x80", 1), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_force_delete(mock, F, "caf\xc3\xa9", 1), 0);
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_ANY), 0);
    json_decref(raw);
}
END_TEST

/* The front layer refuses them before the mock: nothing reaches it, and
 * no "out of memory" either. */
START_TEST(test_non_utf8_keys_never_reach_the_mock)
{
    json_t *raw = item("foo", 1);
    ck_assert_int_eq(json_object_set_new(raw, "key", json_string_nocheck("caf\xe9")), 0);
    ld_future *fs[] = {ld_store_get(mock, F, "caf\xe9"), ld_store_delete(mock, F, "caf\xe9", 3),
                       ld_store_upsert(mock, F, raw)};
    for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++) {
        ld_test_wait(fs[i]);
        ck_assert_int_eq(ld_future_error(fs[i]), LD_EINVAL);
        ck_assert_ptr_nonnull(strstr(ld_future_error_message(fs[i]), "UTF-8"));
        ld_future_unref(fs[i]);
    }
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_ANY), 0);
    json_decref(raw);
}
END_TEST

/* An init's record keeps a namespace with a NUL whole, apart from
 * "features". */
START_TEST(test_init_record_keeps_a_namespace_with_nul_apart)
{
    json_t *data = json_pack("{s:{s:o}}", "features", "foo", item("foo", 1));
    ck_assert_int_eq(
        json_object_setn_new(data, "features\0x", 10, json_pack("{s:o}", "x", item("x", 1))), 0);
    ld_future *f = ld_store_init(mock, data);
    ld_test_wait(f);
    ck_assert(ld_future_is_fulfilled(f));
    ld_future_unref(f);
    const json_t *rec = ld_mock_store_init_data(mock, 0);
    ck_assert_int_eq(json_object_size(rec), 2);
    ck_assert_int_eq(json_object_size(json_object_get(rec, "features")), 1);
    ck_assert_int_eq(json_object_size(json_object_getn(rec, "features\0x", 10)), 1);
    ck_assert_int_eq(all_size(F), 1);
    json_decref(data);
}
END_TEST

/* ---- failure injection ------------------------------------------------------ */

/* Issues operation `op` on the mock (foo v10 stored) and returns its future. */
static ld_future *issue(enum ld_mock_op op)
{
    json_t *data = json_pack("{s:{s:o}}", "features", "other", item("other", 1));
    json_t *newer = item("foo", 11);
    ld_future *f = NULL;
    switch (op) {
    case LD_MOCK_OP_GET:
        f = ld_store_get(mock, F, "foo");
        break;
    case LD_MOCK_OP_ALL:
        f = ld_store_all(mock, F);
        break;
    case LD_MOCK_OP_INIT:
        f = ld_store_init(mock, data);
        break;
    case LD_MOCK_OP_UPSERT:
        f = ld_store_upsert(mock, F, newer);
        break;
    case LD_MOCK_OP_DELETE:
        f = ld_store_delete(mock, F, "foo", 12);
        break;
    case LD_MOCK_OP_INITIALIZED:
    case LD_MOCK_OP_ANY:
        f = ld_store_initialized(mock);
        break;
    }
    json_decref(data); /* the store took the references it keeps */
    json_decref(newer);
    return f;
}

/* Loop test over the six operations: the armed one fails once, changes
 * nothing, and then works again; the other operations are not affected. */
START_TEST(test_fail_next_fails_that_operation_once)
{
    enum ld_mock_op op = (enum ld_mock_op)_i;
    init_foo10();
    ck_assert_int_eq(ld_mock_store_fail_next(mock, op, 1, LD_ESTORE), 0);
    const enum ld_mock_op reads[] = {LD_MOCK_OP_GET, LD_MOCK_OP_ALL, LD_MOCK_OP_INITIALIZED};
    for (int i = 0; i < 3; i++)
        if (reads[i] != op)
            ld_test_await_ok(issue(reads[i])); /* not armed */
    ld_future *f = ld_test_done(issue(op));
    ck_assert_int_eq(ld_future_error(f), LD_ESTORE);
    ck_assert_msg(strstr(ld_future_error_message(f), "injected"), "message: %s",
                  ld_future_error_message(f));
    ld_future_unref(f);
    /* nothing changed */
    ck_assert_int_eq(version_of(F, "foo"), 10);
    ck_assert_int_eq(version_of(F, "other"), -1);
    ck_assert(ld_test_await_bool(ld_store_initialized(mock)));
    /* used up: the next one works */
    f = ld_test_done(issue(op));
    ck_assert_msg(ld_future_is_fulfilled(f), "second call rejected: %s",
                  ld_future_error_message(f));
    ld_future_unref(f);
}
END_TEST

START_TEST(test_failed_init_leaves_a_new_store_uninitialized)
{
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_INIT, 1, LD_ESTORE), 0);
    ld_test_expect_error(issue(LD_MOCK_OP_INIT), LD_ESTORE, NULL);
    ck_assert(!ld_test_await_bool(ld_store_initialized(mock)));
    ck_assert_int_eq(all_size(F), 0);
    ck_assert_int_eq(ld_mock_store_init_count(mock), 1); /* received, so recorded */
}
END_TEST

START_TEST(test_fail_next_counts_n_and_uses_the_code)
{
    init_foo10();
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 3, LD_EIO), 0);
    for (int i = 0; i < 3; i++)
        ld_test_expect_error(ld_store_get(mock, F, "foo"), LD_EIO, NULL);
    ck_assert_int_eq(version_of(F, "foo"), 10);
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_GET), 4);
}
END_TEST

START_TEST(test_fail_next_any_counts_every_operation)
{
    init_foo10();
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_ANY, 2, LD_ESTORE), 0);
    ld_test_expect_error(ld_store_all(mock, F), LD_ESTORE, NULL);
    ld_test_expect_error(issue(LD_MOCK_OP_UPSERT), LD_ESTORE, NULL);
    ck_assert_int_eq(version_of(F, "foo"), 10);
}
END_TEST

START_TEST(test_own_count_is_used_before_any)
{
    init_foo10();
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_ANY, 1, LD_ESTORE), 0);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 1, LD_EIO), 0);
    ld_test_expect_error(ld_store_get(mock, F, "foo"), LD_EIO, NULL);
    ld_test_expect_error(ld_store_get(mock, F, "foo"), LD_ESTORE, NULL);
    ck_assert_int_eq(version_of(F, "foo"), 10);
}
END_TEST

START_TEST(test_fail_next_replaces_and_zero_disarms)
{
    init_foo10();
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 5, LD_ESTORE), 0);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 1, LD_EIO), 0);
    ld_test_expect_error(ld_store_get(mock, F, "foo"), LD_EIO, NULL);
    ck_assert_int_eq(version_of(F, "foo"), 10);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 2, LD_ESTORE), 0);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 0, LD_ESTORE), 0);
    ck_assert_int_eq(version_of(F, "foo"), 10);
}
END_TEST

START_TEST(test_injected_failures_keep_issue_order)
{
    init_foo10();
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_UPSERT, 1, LD_ESTORE), 0);
    ld_test_n_order = 0;
    ld_future *fs[] = {ld_store_get(mock, F, "foo"), issue(LD_MOCK_OP_UPSERT),
                       ld_store_get(mock, F, "foo"), issue(LD_MOCK_OP_UPSERT)};
    for (intptr_t i = 0; i < 4; i++)
        ld_future_on_complete(ld_future_ref(fs[i]), ld_test_note_order, (void *)i);
    ck_assert_int_eq(ld_test_n_order, 0);
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ld_test_order[i], i);
    ck_assert_int_eq(ld_future_error(fs[1]), LD_ESTORE);
    ck_assert_int_eq(ld_item_version(ld_future_json(fs[2])), 10);
    ck_assert(ld_future_bool(fs[3]));
    for (int i = 0; i < 4; i++)
        ld_future_unref(fs[i]);
}
END_TEST

START_TEST(test_fail_next_bad_input)
{
    ld_store *memory = ld_memory_store_new(B);
    ck_assert_int_eq(ld_mock_store_fail_next(NULL, LD_MOCK_OP_GET, 1, LD_ESTORE), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_fail_next(memory, LD_MOCK_OP_GET, 1, LD_ESTORE), LD_EINVAL);
    ck_assert_int_eq(
        ld_mock_store_fail_next(mock, (enum ld_mock_op)(LD_MOCK_OP_ANY + 1), 1, LD_ESTORE),
        LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, (enum ld_mock_op) - 1, 1, LD_ESTORE), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, -1, LD_ESTORE), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 1, 0), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_fail_next(mock, LD_MOCK_OP_GET, 1, 5), LD_EINVAL);
    ck_assert(!ld_test_await_bool(ld_store_initialized(mock))); /* nothing was armed */
    ck_assert_int_eq(version_of(F, "foo"), -1);
    ld_store_free(memory);
}
END_TEST

/* ---- counters and accessors --------------------------------------------------- */

START_TEST(test_calls_count_what_reached_the_mock)
{
    init_foo10();
    ld_test_await_ok(issue(LD_MOCK_OP_GET));
    ld_test_await_ok(issue(LD_MOCK_OP_GET));
    ld_test_await_ok(issue(LD_MOCK_OP_ALL));
    ld_test_await_ok(issue(LD_MOCK_OP_UPSERT));
    ld_test_await_ok(issue(LD_MOCK_OP_DELETE));
    ld_test_await_ok(issue(LD_MOCK_OP_INITIALIZED));
    ld_test_expect_error(ld_store_get(mock, F, ""), LD_EINVAL, NULL); /* not counted */
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_GET), 2);
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_ALL), 1);
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_INIT), 1);
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_UPSERT), 1);
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_DELETE), 1);
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_INITIALIZED), 1);
    ck_assert_int_eq(ld_mock_store_calls(mock, LD_MOCK_OP_ANY), 7);
}
END_TEST

START_TEST(test_accessors_bad_input)
{
    ld_store *memory = ld_memory_store_new(B);
    ck_assert_int_eq(ld_mock_store_init_count(NULL), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_init_count(memory), LD_EINVAL);
    ck_assert_ptr_null(ld_mock_store_init_data(NULL, 0));
    ck_assert_ptr_null(ld_mock_store_init_data(memory, 0));
    ck_assert_int_eq(ld_mock_store_calls(NULL, LD_MOCK_OP_ANY), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_calls(memory, LD_MOCK_OP_ANY), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_calls(mock, (enum ld_mock_op)(LD_MOCK_OP_ANY + 1)), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_calls(mock, (enum ld_mock_op) - 1), LD_EINVAL);
    ld_store_free(memory);
}
END_TEST

static int g_status_calls;
static ld_store_status g_status_last;

static void on_status(ld_store *st, const ld_store_status *status, void *arg)
{
    (void)st;
    (void)arg;
    g_status_calls++;
    g_status_last = *status;
}

START_TEST(test_set_available_changes_the_reported_status)
{
    g_status_calls = 0;
    ck_assert_int_gt(ld_store_add_status_listener(mock, on_status, NULL), 0);
    ck_assert_int_eq(ld_mock_store_set_available(mock, false), 0);
    ld_store_status st;
    ck_assert_int_eq(ld_store_current_status(mock, &st), 0);
    ck_assert(!st.available);
    ck_assert_int_eq(g_status_calls, 0);                                /* from the loop */
    ck_assert(ld_test_await_bool(ld_store_initialized(mock)) == false); /* still answers */
    ld_test_flush();
    ck_assert_int_eq(g_status_calls, 1);
    ck_assert(!g_status_last.available);
    ck_assert_int_eq(ld_mock_store_set_available(mock, true), 0);
    ld_test_flush();
    ck_assert_int_eq(g_status_calls, 2);
    ck_assert(g_status_last.available && !g_status_last.needs_refresh);
    ld_store *mem = ld_memory_store_new(B);
    ck_assert_int_eq(ld_mock_store_set_available(mem, false), LD_EINVAL);
    ck_assert_int_eq(ld_mock_store_set_available(NULL, false), LD_EINVAL);
    ld_store_free(mem);
}
END_TEST

Suite *ld_suite_mock_store(void)
{
    Suite *s = suite_create("mock_store");
    TCase *tc = tcase_create("mock_store");
    tcase_add_checked_fixture(tc, mock_setup, mock_teardown);
    tcase_add_test(tc, test_new_and_describe);
    tcase_add_test(tc, test_two_mocks_are_independent);
    tcase_add_test(tc, test_every_init_is_recorded_in_order);
    tcase_add_test(tc, test_recorded_init_keeps_its_data_and_shares_items);
    tcase_add_test(tc, test_inits_rejected_before_the_mock_are_not_recorded);
    tcase_add_test(tc, test_force_set_ignores_versions_and_is_immediate);
    tcase_add_test(tc, test_force_set_does_not_initialize);
    tcase_add_test(tc, test_force_set_of_a_tombstone_hides_the_key);
    tcase_add_test(tc, test_force_delete_ignores_versions);
    tcase_add_test(tc, test_force_bad_input);
    tcase_add_test(tc, test_force_refuses_non_utf8_keys_as_einval);
    tcase_add_test(tc, test_non_utf8_keys_never_reach_the_mock);
    tcase_add_test(tc, test_init_record_keeps_a_namespace_with_nul_apart);
    tcase_add_loop_test(tc, test_fail_next_fails_that_operation_once, LD_MOCK_OP_GET,
                        LD_MOCK_OP_ANY);
    tcase_add_test(tc, test_failed_init_leaves_a_new_store_uninitialized);
    tcase_add_test(tc, test_fail_next_counts_n_and_uses_the_code);
    tcase_add_test(tc, test_fail_next_any_counts_every_operation);
    tcase_add_test(tc, test_own_count_is_used_before_any);
    tcase_add_test(tc, test_fail_next_replaces_and_zero_disarms);
    tcase_add_test(tc, test_injected_failures_keep_issue_order);
    tcase_add_test(tc, test_fail_next_bad_input);
    tcase_add_test(tc, test_calls_count_what_reached_the_mock);
    tcase_add_test(tc, test_accessors_bad_input);
    tcase_add_test(tc, test_set_available_changes_the_reported_status);
    suite_add_tcase(s, tc);
    return s;
}
