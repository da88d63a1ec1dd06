/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The big segment store front layer and helpers. */
#include <string.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

/* An implementation that keeps every `out` until the test completes it. */
struct script {
    struct ld_test_script sc; /* first: the shared ops take it as impl; closes counts stops */
    char hash[64];            /* the last context hash asked for */
    int64_t immediate;        /* > 0: get_metadata fulfils with it at once */
};

static void script_metadata(void *impl, ld_future *out)
{
    struct script *s = impl;
    if (s->immediate > 0) {
        ld_future_fulfill_int(out, s->immediate);
        ld_future_unref(out);
        return;
    }
    ld_test_script_keep(s, out);
}

static void script_membership(void *impl, const char *hash, ld_future *out)
{
    struct script *s = impl;
    snprintf(s->hash, sizeof(s->hash), "%s", hash);
    ld_test_script_keep(s, out);
}

static const struct ld_big_segment_store_ops script_ops = {
    .version = LD_BIG_SEGMENT_STORE_OPS_VERSION,
    .get_metadata = script_metadata,
    .get_membership = script_membership,
    .close = ld_test_script_close,
    .free = ld_test_script_free,
    .describe = ld_test_script_name,
};

static struct script impl;
static ld_big_segment_store *store;

static void setup(void)
{
    ld_test_setup();
    memset(&impl, 0, sizeof(impl));
    store = ld_big_segment_store_new(B, &script_ops, &impl);
    ck_assert_ptr_nonnull(store);
}

static void teardown(void)
{
    ld_big_segment_store_free(store);
    store = NULL;
    ld_test_teardown();
}

/* ---- membership_from_refs ------------------------------------------------ */

START_TEST(test_membership_excluded_false_included_true_include_wins)
{
    const char *inc[] = {"a.g1", "both.g1"};
    const char *exc[] = {"b.g2", "both.g1"};
    json_t *m = NULL;
    ck_assert_int_eq(ld_big_segment_membership_from_refs(inc, 2, exc, 2, &m, NULL), 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(json_object_size(m), 3);
    ck_assert(json_is_true(json_object_get(m, "a.g1")));
    ck_assert(json_is_false(json_object_get(m, "b.g2")));
    ck_assert(json_is_true(json_object_get(m, "both.g1")));
    json_decref(m);
}
END_TEST

START_TEST(test_membership_of_no_refs_is_null)
{
    json_t *m = json_object(); /* overwritten with NULL */
    json_t *keep_m = m;
    ck_assert_int_eq(ld_big_segment_membership_from_refs(NULL, 0, NULL, 0, &m, NULL), 0);
    ck_assert_ptr_null(m);
    json_decref(keep_m);
}
END_TEST

START_TEST(test_membership_of_excluded_only)
{
    const char *exc[] = {"x.g1"};
    json_t *m = NULL;
    ck_assert_int_eq(ld_big_segment_membership_from_refs(NULL, 0, exc, 1, &m, NULL), 0);
    ck_assert_int_eq(json_object_size(m), 1);
    ck_assert(json_is_false(json_object_get(m, "x.g1")));
    json_decref(m);
}
END_TEST

START_TEST(test_membership_bad_input_is_einval_naming_the_argument)
{
    const char *good[] = {"a"};
    const char *null_ref[] = {"a", NULL};
    const char *empty_ref[] = {""};
    const char *not_utf8[] = {"a", "\xff\xfe"};
    json_t *m = NULL;
    const char *why = NULL;
    ck_assert_int_eq(ld_big_segment_membership_from_refs(not_utf8, 2, NULL, 0, &m, &why),
                     LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "UTF-8"));
    ck_assert_ptr_null(m);
    ck_assert_int_eq(ld_big_segment_membership_from_refs(good, 1, NULL, 0, NULL, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "membership"));
    ck_assert_int_eq(ld_big_segment_membership_from_refs(NULL, 1, NULL, 0, &m, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "included"));
    ck_assert_int_eq(ld_big_segment_membership_from_refs(NULL, 0, NULL, 2, &m, &why), LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "excluded"));
    ck_assert_int_eq(ld_big_segment_membership_from_refs(null_ref, 2, NULL, 0, &m, &why),
                     LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "included"));
    ck_assert_ptr_null(m);
    ck_assert_int_eq(ld_big_segment_membership_from_refs(good, 1, empty_ref, 1, &m, &why),
                     LD_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "excluded"));
    ck_assert_ptr_null(m);
    /* why may be NULL */
    ck_assert_int_eq(ld_big_segment_membership_from_refs(null_ref, 2, NULL, 0, &m, NULL),
                     LD_EINVAL);
}
END_TEST

/* ---- staleness, status names ---------------------------------------------- */

START_TEST(test_is_stale)
{
    ck_assert(ld_big_segment_is_stale(LD_BIG_SEGMENT_TIME_UNKNOWN, 1000, 120000));
    ck_assert(ld_big_segment_is_stale(-5, 1000, 120000));
    ck_assert(!ld_big_segment_is_stale(1000, 1000, 120000));
    ck_assert(!ld_big_segment_is_stale(1000, 120999, 120000));
    ck_assert(ld_big_segment_is_stale(1000, 121000, 120000)); /* at least as old: stale */
    ck_assert(!ld_big_segment_is_stale(5000, 1000, 120000));  /* from the future */
    ck_assert(ld_big_segment_is_stale(0, INT64_MAX, 120000));
}
END_TEST

START_TEST(test_status_names)
{
    LD_TEST_ENUM_NAMES(ld_big_segments_status_name, enum ld_big_segments_status, "HEALTHY", "STALE",
                       "NOT_CONFIGURED", "STORE_ERROR");
}
END_TEST

/* ---- the front layer -------------------------------------------------------- */

START_TEST(test_metadata_time_and_unknown)
{
    ld_future *a = ld_big_segment_store_get_metadata(store);
    ld_future *b = ld_big_segment_store_get_metadata(store);
    ck_assert_int_eq(impl.sc.n, 2);
    ld_future_fulfill_int(impl.sc.outs[0], 1700000000000);
    ld_future_fulfill_int(impl.sc.outs[1], LD_BIG_SEGMENT_TIME_UNKNOWN);
    ld_test_wait(b);
    ck_assert(ld_future_is_fulfilled(a));
    ck_assert_int_eq(ld_future_int(a), 1700000000000);
    ck_assert_int_eq(ld_future_int(b), LD_BIG_SEGMENT_TIME_UNKNOWN);
    ld_future_unref(a);
    ld_future_unref(b);
}
END_TEST

START_TEST(test_membership_result_and_null)
{
    ld_future *a = ld_big_segment_store_get_membership(store, "hash-a");
    ck_assert_str_eq(impl.hash, "hash-a");
    ld_future *b = ld_big_segment_store_get_membership(store, "hash-b");
    ck_assert_str_eq(impl.hash, "hash-b");
    const char *inc[] = {"s.g1"};
    json_t *m;
    ck_assert_int_eq(ld_big_segment_membership_from_refs(inc, 1, NULL, 0, &m, NULL), 0);
    ld_future_fulfill_json(impl.sc.outs[0], m);
    ld_future_fulfill_json(impl.sc.outs[1], NULL);
    ld_test_wait(b);
    ck_assert(json_is_true(json_object_get(ld_future_json(a), "s.g1")));
    ck_assert(ld_future_is_fulfilled(b));
    ck_assert_ptr_null(ld_future_json(b));
    ld_future_unref(a);
    ld_future_unref(b);
}
END_TEST

START_TEST(test_bad_input_is_einval_and_the_implementation_is_not_called)
{
    ck_assert_ptr_null(ld_big_segment_store_get_metadata(NULL));
    ck_assert_ptr_null(ld_big_segment_store_get_membership(NULL, "h"));
    ck_assert_ptr_null(ld_big_segment_store_close(NULL));
    ld_big_segment_store_free(NULL);
    ld_test_expect_error(ld_big_segment_store_get_membership(store, NULL), LD_EINVAL,
                         "context_hash");
    ld_test_expect_error(ld_big_segment_store_get_membership(store, ""), LD_EINVAL, "context_hash");
    ck_assert_int_eq(impl.sc.n, 0);
}
END_TEST

START_TEST(test_results_complete_in_issue_order_when_the_implementation_does_not)
{
    ld_test_n_order = 0;
    ld_future *fs[3] = {
        ld_big_segment_store_get_metadata(store),
        ld_big_segment_store_get_membership(store, "h"),
        ld_big_segment_store_get_metadata(store),
    };
    for (intptr_t i = 0; i < 3; i++)
        ld_future_on_complete(ld_future_ref(fs[i]), ld_test_note_order, (void *)i);
    ld_future_fulfill_int(impl.sc.outs[2], 3);
    ld_future_fulfill_json(impl.sc.outs[1], NULL);
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 0); /* the first one holds the others back */
    ck_assert(ld_future_is_pending(fs[2]));
    ld_future_reject(impl.sc.outs[0], LD_ESTORE, "backend down");
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ld_test_order[i], i);
    ck_assert_int_eq(ld_future_error(fs[0]), LD_ESTORE);
    ck_assert_str_eq(ld_future_error_message(fs[0]), "backend down");
    ck_assert_int_eq(ld_future_int(fs[2]), 3);
    for (int i = 0; i < 3; i++)
        ld_future_unref(fs[i]);
}
END_TEST

START_TEST(test_results_never_complete_inside_the_call)
{
    ld_test_n_order = 0;
    ld_future *f = ld_big_segment_store_get_metadata(store);
    ld_future_fulfill_int(impl.sc.outs[0], 1);
    ld_future_on_complete(ld_future_ref(f), ld_test_note_order, (void *)0);
    ck_assert_int_eq(ld_test_n_order, 0);
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 1);
    ld_future_unref(f);
}
END_TEST

/* Issues get_metadata from inside the loop, after the front has handed an
 * earlier result over but before that result's callbacks ran. */
static void issue_immediate(ld_future *f, void *arg)
{
    (void)f;
    impl.immediate = 5;
    ld_future *g = ld_big_segment_store_get_metadata(store);
    ld_future_on_complete(g, ld_test_note_order, arg);
}

START_TEST(test_a_result_completed_at_once_waits_for_one_handed_over_before)
{
    ld_test_n_order = 0;
    ld_future *first = ld_big_segment_store_get_metadata(store);
    ld_future_on_complete(ld_future_ref(first), ld_test_note_order, (void *)0);
    ld_future_fulfill_int(impl.sc.outs[0], 1); /* the front hears of it from the loop */
    ld_future_on_complete(ld_future_fulfilled_json(B, NULL), issue_immediate, (void *)1);
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 2);
    ck_assert_int_eq(ld_test_order[0], 0);
    ck_assert_int_eq(ld_test_order[1], 1);
    ld_future_unref(first);
}
END_TEST

START_TEST(test_stop_is_graceful_then_operations_are_eclosed)
{
    ld_future *before = ld_big_segment_store_get_metadata(store);
    ld_future *stop = ld_big_segment_store_close(store);
    ck_assert_int_eq(impl.sc.closes, 1);
    ck_assert(ld_future_is_pending(stop)); /* behind `before` */
    ld_future *late[3] = {ld_big_segment_store_get_metadata(store),
                          ld_big_segment_store_get_membership(store, "h"),
                          /* bad input after stop: closed wins, as for stores */
                          ld_big_segment_store_get_membership(store, NULL)};
    ld_test_flush();
    for (int i = 0; i < 3; i++) /* in issue order: after `before` and the stop */
        ck_assert(ld_future_is_pending(late[i]));
    ld_future_fulfill_int(impl.sc.outs[0], 42);
    ld_test_expect_error(late[0], LD_ECLOSED, "closed");
    ld_test_expect_error(late[1], LD_ECLOSED, NULL);
    ld_test_expect_error(late[2], LD_ECLOSED, NULL);
    ck_assert(!ld_future_is_pending(stop));
    ck_assert_int_eq(ld_future_int(before), 42);
    ck_assert(ld_future_is_fulfilled(stop));
    ld_future_unref(before);
    ld_future_unref(stop);
    stop = ld_big_segment_store_close(store); /* again: fulfils, no second ops->stop */
    ld_test_wait(stop);
    ck_assert(ld_future_is_fulfilled(stop));
    ck_assert_int_eq(impl.sc.closes, 1);
    ld_future_unref(stop);
}
END_TEST

START_TEST(test_free_cancels_pending_operations)
{
    ld_test_cancels = 0;
    ld_future *f = ld_big_segment_store_get_membership(store, "h");
    ld_future *g = ld_big_segment_store_get_metadata(store);
    ck_assert_int_eq(ld_future_set_cancel_handler(impl.sc.outs[0], ld_test_count_cancel, NULL), 0);
    ld_big_segment_store_free(store);
    store = NULL;
    ld_test_wait(f);
    ld_test_flush(); /* the implementation is freed after the cancel handlers */
    ck_assert_int_eq(impl.sc.freed, 1);
    ld_test_wait(g);
    ck_assert_int_eq(ld_future_error(f), LD_ECANCELED);
    ck_assert_int_eq(ld_future_error(g), LD_ECANCELED);
    ld_test_flush();
    ck_assert_int_eq(ld_test_cancels, 1); /* the implementation heard of it */
    ld_future_unref(f);
    ld_future_unref(g);
}
END_TEST

START_TEST(test_describe)
{
    ck_assert_str_eq(ld_big_segment_store_describe(store), "script");
    ck_assert_str_eq(ld_big_segment_store_describe(NULL), "(null)");
    struct ld_big_segment_store_ops ops = script_ops;
    ops.describe = NULL;
    ops.free = NULL;
    ops.close = NULL;
    struct script other = {0};
    ld_big_segment_store *s = ld_big_segment_store_new(B, &ops, &other);
    ck_assert_str_eq(ld_big_segment_store_describe(s), "unknown");
    ld_future *stop = ld_big_segment_store_close(s); /* no ops->stop: fulfils */
    ld_test_wait(stop);
    ck_assert(ld_future_is_fulfilled(stop));
    ld_future_unref(stop);
    ld_big_segment_store_free(s);
    ck_assert_int_eq(other.sc.freed, 0);
}
END_TEST

START_TEST(test_new_bad_input)
{
    struct ld_big_segment_store_ops wrong;
    ck_assert_ptr_null(ld_big_segment_store_new(NULL, &script_ops, &impl));
    ck_assert_ptr_null(ld_big_segment_store_new(B, NULL, &impl));
    LD_TEST_REFUSES(wrong, script_ops, version, 2, ld_big_segment_store_new(B, &wrong, &impl));
    LD_TEST_REFUSES(wrong, script_ops, get_metadata, NULL,
                    ld_big_segment_store_new(B, &wrong, &impl));
    LD_TEST_REFUSES(wrong, script_ops, get_membership, NULL,
                    ld_big_segment_store_new(B, &wrong, &impl));
    ck_assert_int_eq(impl.sc.freed, 0);
}
END_TEST

Suite *ld_suite_big_segments(void)
{
    Suite *s = suite_create("big_segments");
    TCase *tc = tcase_create("helpers");
    tcase_add_test(tc, test_membership_excluded_false_included_true_include_wins);
    tcase_add_test(tc, test_membership_of_no_refs_is_null);
    tcase_add_test(tc, test_membership_of_excluded_only);
    tcase_add_test(tc, test_membership_bad_input_is_einval_naming_the_argument);
    tcase_add_test(tc, test_is_stale);
    tcase_add_test(tc, test_status_names);
    suite_add_tcase(s, tc);

    tc = tcase_create("front");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_metadata_time_and_unknown);
    tcase_add_test(tc, test_membership_result_and_null);
    tcase_add_test(tc, test_bad_input_is_einval_and_the_implementation_is_not_called);
    tcase_add_test(tc, test_results_complete_in_issue_order_when_the_implementation_does_not);
    tcase_add_test(tc, test_results_never_complete_inside_the_call);
    tcase_add_test(tc, test_a_result_completed_at_once_waits_for_one_handed_over_before);
    tcase_add_test(tc, test_stop_is_graceful_then_operations_are_eclosed);
    tcase_add_test(tc, test_free_cancels_pending_operations);
    tcase_add_test(tc, test_describe);
    tcase_add_test(tc, test_new_bad_input);
    suite_add_tcase(s, tc);
    return s;
}
