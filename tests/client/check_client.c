/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The client (client.h), with the mock data sources of the testing kit. */
#include <float.h>
#include <math.h>
#include <string.h>

#include <ldasync/testing.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

/* Flags of every type; "big" matches a big segment. */
static const char FLAGS[] =
    "{'b': {'on': true, 'variations': [false, true], 'fallthrough': {'variation': 1}},"
    " 'i': {'on': true, 'variations': [3, 4], 'fallthrough': {'variation': 0}},"
    " 'r': {'on': true, 'variations': [2.5], 'fallthrough': {'variation': 0}},"
    " 'neg': {'on': true, 'variations': [-2.7], 'fallthrough': {'variation': 0}},"
    " 'huge': {'on': true, 'variations': [1e300], 'fallthrough': {'variation': 0}},"
    " 's': {'on': true, 'variations': ['hello'], 'fallthrough': {'variation': 0}},"
    " 'j': {'on': true, 'variations': [{'a': [1]}], 'fallthrough': {'variation': 0}},"
    " 'nul': {'on': true, 'variations': [null], 'fallthrough': {'variation': 0}},"
    " 'big': {'on': true, 'variations': ['in', 'out'], 'fallthrough': {'variation': 1},"
    "   'rules': [{'id': 'r', 'variation': 0, 'clauses': [{'attribute': '', 'op': "
    "'segmentMatch', 'values': ['bs']}]}]}}";
static const char SEGMENTS[] = "{'bs': {'unbounded': true, 'generation': 1}}";

static ld_context *CTX;

static void client_setup(void)
{
    ld_test_setup();
    CTX = ld_test_ctx_of("{'kind': 'user', 'key': 'u'}");
}

static void client_teardown(void)
{
    ld_context_unref(CTX);
    CTX = NULL;
    ld_test_teardown();
}

/* A mock initializer whose basis is FLAGS and SEGMENTS. */
static ld_initializer *flags_initializer(void)
{
    json_t *data = ld_test_data_of(FLAGS, SEGMENTS);
    ld_initializer *in = ld_test_initializer_of(data);
    json_decref(data);
    return in;
}

/* A client whose data comes from flags_initializer() (and `sync`). */
static ld_client *ready_client(ld_synchronizer *sync)
{
    ld_client_options *o = ld_client_options_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(ld_client_options_add_initializer(o, flags_initializer()), 0);
    if (sync)
        ck_assert_int_eq(ld_client_options_set_synchronizer(o, sync), 0);
    ld_client *c = ld_client_new(B, o);
    ld_client_options_free(o);
    ck_assert_ptr_nonnull(c);
    ld_test_await_ok(ld_client_ready(c));
    return c;
}

static bool bool_of(ld_future *f)
{
    return ld_test_await_bool(f);
}

static int64_t int_of(ld_future *f)
{
    int64_t v = ld_future_int(ld_test_fulfilled(f));
    ld_future_unref(f);
    return v;
}

/* The JSON a future was fulfilled with, as compact text ("null" for NULL). */
static char g_text[256];

static const char *json_of(ld_future *f)
{
    json_t *v = ld_future_json(ld_test_fulfilled(f));
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    snprintf(g_text, sizeof g_text, "%s", s ? s : "null");
    free(s);
    ld_future_unref(f);
    return g_text;
}

/* The detail's reason as compact JSON. */
static const char *reason_of(ld_future *f)
{
    json_t *r = ld_detail_reason_to_json(ld_future_ptr(ld_test_fulfilled(f)));
    char *s = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
    snprintf(g_text, sizeof g_text, "%s", s);
    free(s);
    json_decref(r);
    ld_future_unref(f);
    return g_text;
}

static int g_calls;
static ld_client *g_seen;
static enum ld_data_source_state g_state;

static void on_status(ld_client *c, const ld_data_source_status *st, void *arg)
{
    (void)arg;
    g_calls++;
    g_seen = c;
    g_state = st->state;
}

/* ---- options ------------------------------------------------------------------ */

START_TEST(test_options_refuse_null_and_steal_the_data_sources)
{
    /* the sources are freed on every path (ASan and valgrind check it) */
    ck_assert_int_eq(ld_client_options_add_initializer(NULL, ld_mock_initializer_new(B, NULL)),
                     LD_EINVAL);
    ck_assert_int_eq(ld_client_options_set_synchronizer(NULL, ld_mock_synchronizer_new(B, NULL)),
                     LD_EINVAL);
    ck_assert_int_eq(ld_client_options_set_store(NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_client_options_set_big_segments(NULL, NULL, 0), LD_EINVAL);
    ck_assert_int_eq(ld_client_options_set_offline(NULL, true), LD_EINVAL);
    ld_client_options_free(NULL);
    ld_client_options *o = ld_client_options_new();
    ck_assert_int_eq(ld_client_options_add_initializer(o, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_client_options_add_initializer(o, ld_mock_initializer_new(B, NULL)), 0);
    ck_assert_int_eq(ld_client_options_set_synchronizer(o, ld_mock_synchronizer_new(B, NULL)), 0);
    /* a second one replaces (and frees) the first */
    ck_assert_int_eq(ld_client_options_set_synchronizer(o, ld_mock_synchronizer_new(B, NULL)), 0);
    ld_client_options_free(o); /* frees what it holds */
    /* a failed ld_client_new frees them too */
    o = ld_client_options_new();
    ld_client_options_add_initializer(o, ld_mock_initializer_new(B, NULL));
    ld_client_options_set_synchronizer(o, ld_mock_synchronizer_new(B, NULL));
    ck_assert_ptr_null(ld_client_new(NULL, o));
    ld_client_options_free(o);
}
END_TEST

START_TEST(test_null_client_gives_null_and_einval)
{
    ck_assert_ptr_null(ld_client_ready(NULL));
    ck_assert_ptr_null(ld_client_bool_variation(NULL, "b", CTX, false));
    ck_assert_ptr_null(ld_client_int_variation(NULL, "i", CTX, 0));
    ck_assert_ptr_null(ld_client_number_variation(NULL, "r", CTX, 0));
    ck_assert_ptr_null(ld_client_string_variation(NULL, "s", CTX, "x"));
    ck_assert_ptr_null(ld_client_json_variation(NULL, "j", CTX, json_object()));
    ck_assert_ptr_null(ld_client_variation_detail(NULL, "j", CTX, LD_VALUE_ANY, json_object()));
    ck_assert_ptr_null(ld_client_all_flags(NULL, CTX, 0));
    ck_assert_ptr_null(ld_client_close(NULL));
    ck_assert_ptr_null(ld_client_store(NULL));
    ck_assert_ptr_null(ld_client_evaluator(NULL));
    ck_assert_ptr_null(ld_client_data_system(NULL));
    ld_data_source_status st;
    ck_assert_int_eq(ld_client_data_source_status(NULL, &st), LD_EINVAL);
    ck_assert_int_eq(ld_client_add_status_listener(NULL, NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_client_remove_status_listener(NULL, 1), LD_EINVAL);
    ld_client_free(NULL);
}
END_TEST

/* ---- ready and variations ------------------------------------------------------ */

START_TEST(test_ready_once_a_mock_initializer_brought_the_data)
{
    ld_client_options *o = ld_client_options_new();
    ld_initializer *in = flags_initializer();
    ld_client_options_add_initializer(o, in);
    ld_client *c = ld_client_new(B, o);
    ld_client_options_free(o); /* the client has the initializer */
    ck_assert_ptr_nonnull(c);
    ld_future *ready = ld_client_ready(c);
    ck_assert(ld_future_is_pending(ready));
    ld_test_await_ok(ready);
    ck_assert_int_eq(ld_mock_initializer_fetch_count(in), 1);
    ld_data_source_status st;
    ck_assert_int_eq(ld_client_data_source_status(c, &st), 0);
    ck_assert_int_eq(st.state, LD_DATA_SOURCE_STATE_VALID);
    ck_assert_int_eq(ld_client_data_source_status(c, NULL), LD_EINVAL);
    /* the parts */
    ck_assert_str_eq(ld_store_describe(ld_client_store(c)), "memory"); /* its own */
    ck_assert_ptr_nonnull(ld_client_evaluator(c));
    ck_assert_ptr_eq(ld_data_system_store(ld_client_data_system(c)), ld_client_store(c));
    ld_client_free(c);
}
END_TEST

START_TEST(test_typed_variations_serve_the_flag_values)
{
    ld_client *c = ready_client(NULL);
    ck_assert(bool_of(ld_client_bool_variation(c, "b", CTX, false)));
    ck_assert_int_eq(int_of(ld_client_int_variation(c, "i", CTX, 0)), 3);
    ck_assert_int_eq(int_of(ld_client_int_variation(c, "r", CTX, 0)), 2);
    ck_assert_str_eq(json_of(ld_client_number_variation(c, "r", CTX, 0)), "2.5");
    ck_assert_str_eq(json_of(ld_client_number_variation(c, "i", CTX, 0)), "3");
    ck_assert_str_eq(json_of(ld_client_string_variation(c, "s", CTX, "x")), "\"hello\"");
    ck_assert_str_eq(json_of(ld_client_json_variation(c, "j", CTX, NULL)), "{\"a\":[1]}");
    ck_assert_str_eq(json_of(ld_client_json_variation(c, "nul", CTX, json_true())), "null");
    ld_client_free(c);
}
END_TEST

START_TEST(test_int_variation_truncates_toward_zero_and_clamps)
{
    ld_client *c = ready_client(NULL);
    ck_assert_int_eq(int_of(ld_client_int_variation(c, "neg", CTX, 0)), -2);
    ck_assert_int_eq(int_of(ld_client_int_variation(c, "huge", CTX, 0)), INT64_MAX);
    ld_client_free(c);
}
END_TEST

START_TEST(test_variations_of_the_wrong_type_serve_the_fallback)
{
    ld_client *c = ready_client(NULL);
    ck_assert(bool_of(ld_client_bool_variation(c, "s", CTX, true)));
    ck_assert(!bool_of(ld_client_bool_variation(c, "i", CTX, false)));
    ck_assert_int_eq(int_of(ld_client_int_variation(c, "b", CTX, 42)), 42);
    ck_assert_int_eq(int_of(ld_client_int_variation(c, "s", CTX, -1)), -1);
    ck_assert_str_eq(json_of(ld_client_number_variation(c, "s", CTX, 1.5)), "1.5");
    ck_assert_str_eq(json_of(ld_client_string_variation(c, "i", CTX, "fb")), "\"fb\"");
    ck_assert_str_eq(json_of(ld_client_string_variation(c, "j", CTX, "fb")), "\"fb\"");
    /* without a fallback the check is off: not a string, no value */
    ck_assert_str_eq(json_of(ld_client_string_variation(c, "i", CTX, NULL)), "null");
    /* the reason says so */
    ck_assert_str_eq(
        reason_of(ld_client_variation_detail(c, "s", CTX, LD_VALUE_BOOL, json_false())),
        "{\"errorKind\":\"WRONG_TYPE\",\"kind\":\"ERROR\"}");
    ck_assert_str_eq(
        reason_of(ld_client_variation_detail(c, "b", CTX, LD_VALUE_BOOL, json_false())),
        "{\"kind\":\"FALLTHROUGH\"}");
    ld_client_free(c);
}
END_TEST

/* A fallback JSON cannot hold (NaN, infinities, a string that is not
 * UTF-8) is refused: made into JSON it would be NULL, which is no fallback
 * and turns the type check off. */
START_TEST(test_fallbacks_json_cannot_hold_are_refused)
{
    ld_client *c = ready_client(NULL);
    const double bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_test_expect_error(ld_client_number_variation(c, "r", CTX, bad[i]), LD_EINVAL, "finite");
        ld_test_expect_error(ld_client_number_variation(c, "s", CTX, bad[i]), LD_EINVAL, "finite");
        ld_test_expect_error(ld_client_number_variation(c, "missing", CTX, bad[i]), LD_EINVAL,
                             "finite");
    }
    ld_test_expect_error(ld_client_string_variation(c, "s", CTX, "\xff"), LD_EINVAL, "UTF-8");
    ld_test_expect_error(ld_client_string_variation(c, "i", CTX, "a\xc3"), LD_EINVAL, "UTF-8");
    /* the largest finite numbers and valid UTF-8 still serve */
    ck_assert_str_eq(json_of(ld_client_number_variation(c, "s", CTX, DBL_MAX)),
                     "1.7976931348623157e308");
    ck_assert_str_eq(json_of(ld_client_number_variation(c, "s", CTX, -0.0)), "-0.0");
    ck_assert_str_eq(json_of(ld_client_string_variation(c, "i", CTX, "\xc3\xa9")), "\"\xc3\xa9\"");
    /* and a string flag asked for as a number is still WRONG_TYPE */
    ck_assert_str_eq(
        reason_of(ld_client_variation_detail(c, "s", CTX, LD_VALUE_DOUBLE, json_real(1))),
        "{\"errorKind\":\"WRONG_TYPE\",\"kind\":\"ERROR\"}");
    ld_client_free(c);
}
END_TEST

START_TEST(test_missing_flag_serves_the_fallback)
{
    ld_client *c = ready_client(NULL);
    ck_assert(bool_of(ld_client_bool_variation(c, "nope", CTX, true)));
    ck_assert_int_eq(int_of(ld_client_int_variation(c, "nope", CTX, 7)), 7);
    ck_assert_str_eq(
        reason_of(ld_client_variation_detail(c, "nope", CTX, LD_VALUE_ANY, json_integer(1))),
        "{\"errorKind\":\"FLAG_NOT_FOUND\",\"kind\":\"ERROR\"}");
    /* a programming error rejects */
    ld_test_expect_error(ld_client_bool_variation(c, NULL, CTX, true), LD_EINVAL, NULL);
    ld_test_expect_error(ld_client_string_variation(c, "s", NULL, "x"), LD_EINVAL, NULL);
    ld_client_free(c);
}
END_TEST

START_TEST(test_detail_and_all_flags_are_the_evaluators)
{
    ld_client *c = ready_client(NULL);
    ld_evaluator *ev = ld_client_evaluator(c);
    ld_future *mine =
        ld_test_fulfilled(ld_client_variation_detail(c, "i", CTX, LD_VALUE_INT, NULL));
    ld_future *its = ld_test_fulfilled(ld_evaluator_detail(ev, "i", CTX, LD_VALUE_INT, NULL));
    json_t *a = ld_detail_to_json(ld_future_ptr(mine)), *b = ld_detail_to_json(ld_future_ptr(its));
    ck_assert(json_equal(a, b));
    json_decref(a);
    json_decref(b);
    ld_future_unref(mine);
    ld_future_unref(its);
    mine = ld_test_fulfilled(ld_client_all_flags(c, CTX, LD_ALL_FLAGS_WITH_REASONS));
    its = ld_test_fulfilled(ld_evaluator_all_flags(ev, CTX, LD_ALL_FLAGS_WITH_REASONS));
    ck_assert(json_equal(ld_future_json(mine), ld_future_json(its)));
    ck_assert(json_is_true(json_object_get(ld_future_json(mine), "$valid")));
    ck_assert(json_is_true(json_object_get(ld_future_json(mine), "b")));
    ld_future_unref(mine);
    ld_future_unref(its);
    ld_client_free(c);
}
END_TEST

START_TEST(test_big_segment_store_option_reaches_the_evaluator)
{
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    ld_client_options *o = ld_client_options_new();
    ld_client_options_add_initializer(o, flags_initializer());
    ld_client_options_set_big_segments(o, bss, 0);
    ld_client *c = ld_client_new(B, o);
    ld_client_options_free(o);
    ld_test_await_ok(ld_client_ready(c));
    ld_future *f = ld_test_fulfilled(ld_client_variation_detail(c, "big", CTX, LD_VALUE_ANY, NULL));
    ck_assert_int_eq(ld_detail_big_segments_status(ld_future_ptr(f)),
                     LD_BIG_SEGMENTS_STATUS_HEALTHY);
    ld_future_unref(f);
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 1);
    ld_client_free(c);
    ld_test_flush();
    ld_big_segment_store_free(bss);
    /* without one: NOT_CONFIGURED */
    c = ready_client(NULL);
    f = ld_test_fulfilled(ld_client_variation_detail(c, "big", CTX, LD_VALUE_ANY, NULL));
    ck_assert_int_eq(ld_detail_big_segments_status(ld_future_ptr(f)),
                     LD_BIG_SEGMENTS_STATUS_NOT_CONFIGURED);
    ld_future_unref(f);
    ld_client_free(c);
}
END_TEST

START_TEST(test_every_source_failing_rejects_ready)
{
    ld_client_options *o = ld_client_options_new();
    ld_initializer *in = ld_mock_initializer_new(B, NULL);
    ld_mock_initializer_set_error(in, LD_EIO);
    ld_client_options_add_initializer(o, in);
    ld_client *c = ld_client_new(B, o);
    ld_client_options_free(o);
    ld_test_expect_error(ld_client_ready(c), LD_EIO, NULL);
    /* evaluations still answer, from an empty store */
    ck_assert(bool_of(ld_client_bool_variation(c, "b", CTX, true)));
    ld_client_free(c);
    /* no data source, online: nothing will bring data */
    c = ld_client_new(B, NULL);
    ck_assert_ptr_nonnull(c);
    ld_test_expect_error(ld_client_ready(c), LD_ECLOSED, NULL);
    ld_client_free(c);
}
END_TEST

/* ---- offline ------------------------------------------------------------------- */

START_TEST(test_offline_evaluates_what_the_store_holds_and_is_ready_at_once)
{
    json_t *data = ld_test_data_of(FLAGS, SEGMENTS);
    ld_store *s = ld_test_memory_with(data);
    json_decref(data);
    ld_client_options *o = ld_client_options_new();
    ld_client_options_set_store(o, s);
    ld_client_options_set_offline(o, true);
    ld_client_options_add_initializer(o, ld_mock_initializer_new(B, NULL)); /* freed: offline */
    ld_client_options_set_synchronizer(o, ld_mock_synchronizer_new(B, NULL));
    ld_client *c = ld_client_new(B, o);
    ld_client_options_free(o);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_null(ld_client_data_system(c));
    ck_assert_ptr_eq(ld_client_store(c), s);
    ld_future *ready = ld_client_ready(c);
    ck_assert(ld_future_is_fulfilled(ready));
    ld_future_unref(ready);
    ld_data_source_status st;
    ck_assert_int_eq(ld_client_data_source_status(c, &st), 0);
    ck_assert_int_eq(st.state, LD_DATA_SOURCE_STATE_VALID);
    ck_assert_ptr_null(st.error);
    g_calls = 0;
    int64_t id = ld_client_add_status_listener(c, on_status, NULL);
    ck_assert_int_gt(id, 0); /* never called */
    ck_assert_str_eq(json_of(ld_client_string_variation(c, "s", CTX, "x")), "\"hello\"");
    ck_assert(bool_of(ld_client_bool_variation(c, "b", CTX, false)));
    ld_test_await_ok(ld_client_close(c));
    ck_assert_int_eq(g_calls, 0);
    ck_assert_int_eq(ld_client_remove_status_listener(c, id), 0);
    ld_client_free(c);
    ld_test_flush();
    /* the store is the caller's: still there */
    ck_assert(ld_test_await_bool(ld_store_initialized(s)));
    ld_store_free(s);
}
END_TEST

/* ---- status listeners ------------------------------------------------------------ */

START_TEST(test_status_listeners_hear_the_data_system)
{
    ld_synchronizer *sync = ld_mock_synchronizer_new(B, NULL);
    ld_client_options *o = ld_client_options_new();
    ld_client_options_add_initializer(o, flags_initializer());
    ld_client_options_set_synchronizer(o, sync);
    ld_client *c = ld_client_new(B, o);
    ld_client_options_free(o);
    ck_assert_int_eq(ld_client_add_status_listener(c, NULL, NULL), LD_EINVAL);
    g_calls = 0;
    int64_t id = ld_client_add_status_listener(c, on_status, NULL);
    ck_assert_int_gt(id, 0);
    ld_test_await_ok(ld_client_ready(c));
    ld_test_flush();
    ck_assert_int_eq(g_calls, 1);
    ck_assert_ptr_eq(g_seen, c);
    ck_assert_int_eq(g_state, LD_DATA_SOURCE_STATE_VALID);
    ck_assert_int_eq(ld_client_remove_status_listener(c, id), 0);
    ck_assert_int_eq(ld_client_remove_status_listener(c, id), LD_EINVAL);
    ld_mock_synchronizer_push_error(sync, LD_EIO);
    for (int i = 0; i < 50; i++) /* not a flush: the retry's timer waits */
        event_base_loop(B, EVLOOP_NONBLOCK);
    ld_data_source_status st;
    ld_client_data_source_status(c, &st);
    ck_assert_int_eq(st.state, LD_DATA_SOURCE_STATE_INTERRUPTED);
    ck_assert_int_eq(g_calls, 1);
    ld_client_free(c);
}
END_TEST

static void free_in_status(ld_client *c, const ld_data_source_status *st, void *arg)
{
    (void)st;
    (*(int *)arg)++;
    ld_client_free(c);
}

START_TEST(test_free_inside_a_status_listener)
{
    ld_client_options *o = ld_client_options_new();
    ld_client_options_add_initializer(o, flags_initializer());
    ld_client *c = ld_client_new(B, o);
    ld_client_options_free(o);
    int calls = 0;
    ld_client_add_status_listener(c, free_in_status, &calls);
    ld_client_add_status_listener(c, free_in_status, &calls);
    ld_test_flush();
    ck_assert_int_eq(calls, 1);
}
END_TEST

/* ---- close and free --------------------------------------------------------------- */

START_TEST(test_close_stops_the_sources_and_rejects_later_evaluations)
{
    ld_synchronizer *sync = ld_mock_synchronizer_new(B, NULL);
    ld_client *c = ready_client(sync);
    ld_future *before = ld_client_bool_variation(c, "b", CTX, false);
    ld_future *closed = ld_client_close(c);
    ld_test_expect_error(ld_client_bool_variation(c, "b", CTX, false), LD_ECLOSED, NULL);
    ld_test_expect_error(ld_client_variation_detail(c, "b", CTX, LD_VALUE_ANY, json_true()),
                         LD_ECLOSED, NULL);
    ld_test_expect_error(ld_client_all_flags(c, CTX, 0), LD_ECLOSED, NULL);
    ck_assert(bool_of(before)); /* issued before: answered */
    ld_test_await_ok(closed);
    ck_assert_int_eq(ld_mock_synchronizer_stopped(sync), 1);
    ld_data_source_status st;
    ld_client_data_source_status(c, &st);
    ck_assert_int_eq(st.state, LD_DATA_SOURCE_STATE_OFF);
    ld_test_await_ok(ld_client_close(c)); /* twice */
    ld_client_free(c);
}
END_TEST

START_TEST(test_free_with_evaluations_pending_cancels_them)
{
    /* a store that answers later, held: the evaluations wait */
    json_t *data = ld_test_data_of(FLAGS, SEGMENTS);
    struct ld_test_later *later;
    ld_store *s = ld_test_later_new(data, &later);
    json_decref(data);
    ld_client_options *o = ld_client_options_new();
    ld_client_options_set_store(o, s);
    ld_client_options_set_offline(o, true);
    ld_client *c = ld_client_new(B, o);
    ld_client_options_free(o);
    later->hold = true;
    ld_future *fs[] = {ld_client_bool_variation(c, "b", CTX, false),
                       ld_client_int_variation(c, "i", CTX, 0),
                       ld_client_number_variation(c, "r", CTX, 0),
                       ld_client_string_variation(c, "s", CTX, "x"),
                       ld_client_json_variation(c, "j", CTX, NULL),
                       ld_client_variation_detail(c, "b", CTX, LD_VALUE_ANY, NULL),
                       ld_client_all_flags(c, CTX, 0)};
    enum { N = sizeof fs / sizeof fs[0] };
    ld_test_flush();
    for (int i = 0; i < N; i++)
        ck_assert_msg(ld_future_is_pending(fs[i]), "future %d is not pending", i);
    ld_client_free(c);
    for (int i = 0; i < N; i++)
        ld_test_expect_error(fs[i], LD_ECANCELED, NULL);
    ld_test_later_release(later);
    ld_test_flush();
    ld_store_free(s);
}
END_TEST

START_TEST(test_close_with_evaluations_pending_completes_them)
{
    json_t *data = ld_test_data_of(FLAGS, SEGMENTS);
    struct ld_test_later *later;
    ld_store *s = ld_test_later_new(data, &later);
    json_decref(data);
    ld_client_options *o = ld_client_options_new();
    ld_client_options_set_store(o, s);
    ld_client_options_set_offline(o, true);
    ld_client *c = ld_client_new(B, o);
    ld_client_options_free(o);
    later->hold = true;
    ld_future *f = ld_client_string_variation(c, "s", CTX, "x");
    ld_test_flush();
    ld_future *closed = ld_client_close(c);
    ld_test_later_release(later);
    ck_assert_str_eq(json_of(f), "\"hello\"");
    ld_test_await_ok(closed);
    ld_client_free(c);
    ld_test_flush();
    ld_store_free(s);
}
END_TEST

static void free_in_callback(ld_future *f, void *arg)
{
    (void)f;
    ld_client_free(arg);
}

START_TEST(test_free_inside_callbacks_of_its_futures)
{
    ld_client *c = ready_client(ld_mock_synchronizer_new(B, NULL));
    ld_future *other = ld_client_int_variation(c, "i", CTX, 0);
    ck_assert_int_eq(
        ld_future_on_complete(ld_client_bool_variation(c, "b", CTX, false), free_in_callback, c),
        0);
    ld_test_flush();
    ck_assert_int_eq(int_of(other), 3); /* completed before the free */
    /* inside the ready callback, with the initializer still to answer */
    ld_client_options *o = ld_client_options_new();
    ld_client_options_add_initializer(o, flags_initializer());
    c = ld_client_new(B, o);
    ld_client_options_free(o);
    ck_assert_int_eq(ld_future_on_complete(ld_client_ready(c), free_in_callback, c), 0);
    ld_test_flush();
}
END_TEST

START_TEST(test_free_right_after_new)
{
    ld_client_options *o = ld_client_options_new();
    ld_client_options_add_initializer(o, flags_initializer());
    ld_client_options_set_synchronizer(o, ld_mock_synchronizer_new(B, NULL));
    ld_client *c = ld_client_new(B, o);
    ld_future *ready = ld_client_ready(c);
    ld_client_free(c);
    ld_test_expect_error(ready, LD_ECANCELED, NULL);
    /* the options are used again: they hold no data source any more */
    c = ld_client_new(B, o);
    ld_client_options_free(o);
    ld_test_expect_error(ld_client_ready(c), LD_ECLOSED, "no data source");
    ld_client_free(c);
}
END_TEST

Suite *ld_suite_client(void)
{
    Suite *s = suite_create("client");
    TCase *tc = tcase_create("options");
    tcase_add_checked_fixture(tc, client_setup, client_teardown);
    tcase_add_test(tc, test_options_refuse_null_and_steal_the_data_sources);
    tcase_add_test(tc, test_null_client_gives_null_and_einval);
    suite_add_tcase(s, tc);

    tc = tcase_create("variations");
    tcase_add_checked_fixture(tc, client_setup, client_teardown);
    tcase_add_test(tc, test_ready_once_a_mock_initializer_brought_the_data);
    tcase_add_test(tc, test_typed_variations_serve_the_flag_values);
    tcase_add_test(tc, test_int_variation_truncates_toward_zero_and_clamps);
    tcase_add_test(tc, test_variations_of_the_wrong_type_serve_the_fallback);
    tcase_add_test(tc, test_fallbacks_json_cannot_hold_are_refused);
    tcase_add_test(tc, test_missing_flag_serves_the_fallback);
    tcase_add_test(tc, test_detail_and_all_flags_are_the_evaluators);
    tcase_add_test(tc, test_big_segment_store_option_reaches_the_evaluator);
    tcase_add_test(tc, test_every_source_failing_rejects_ready);
    suite_add_tcase(s, tc);

    tc = tcase_create("offline");
    tcase_add_checked_fixture(tc, client_setup, client_teardown);
    tcase_add_test(tc, test_offline_evaluates_what_the_store_holds_and_is_ready_at_once);
    suite_add_tcase(s, tc);

    tc = tcase_create("status");
    tcase_add_checked_fixture(tc, client_setup, client_teardown);
    tcase_add_test(tc, test_status_listeners_hear_the_data_system);
    tcase_add_test(tc, test_free_inside_a_status_listener);
    suite_add_tcase(s, tc);

    tc = tcase_create("close_free");
    tcase_add_checked_fixture(tc, client_setup, client_teardown);
    tcase_add_test(tc, test_close_stops_the_sources_and_rejects_later_evaluations);
    tcase_add_test(tc, test_free_with_evaluations_pending_cancels_them);
    tcase_add_test(tc, test_close_with_evaluations_pending_completes_them);
    tcase_add_test(tc, test_free_inside_callbacks_of_its_futures);
    tcase_add_test(tc, test_free_right_after_new);
    suite_add_tcase(s, tc);
    return s;
}
