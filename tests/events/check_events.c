/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Analytics events from a client (lib/events/event_processor.c through
 * client.h and events.h) to a local events service: the payloads compared
 * field by field with LaunchDarkly's formats (index, feature, debug,
 * identify, custom, summary), what a flag asks for (trackEvents, a rule's
 * and the fallthrough's, experiments, debugEventsUntilDate against both
 * clocks), prerequisites, the context-key LRU, redaction, the capacity and
 * its warning, the retry, 401, gzip, close and free orders.
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include <ldasync/alloc.h>
#include <ldasync/ldasync.h>
#include <ldasync/testing.h>

#include "check_fail_alloc.h"
#include "check_receiver.h"
#include "check_suites.h"
#include "check_util.h"
#include "net/net-internal.h"

#define B ld_test_base
#define KEY EVR_KEY

#define FLAGS                                                                                    \
    "{'tracked': {'on': true, 'trackEvents': true, 'variations': [true, false],"                 \
    "    'fallthrough': {'variation': 0}, 'version': 7, 'salt': 's'},"                           \
    " 'plain': {'on': true, 'variations': ['a', 'b'], 'fallthrough': {'variation': 1},"          \
    "    'version': 3, 'salt': 's'},"                                                            \
    " 'ruled': {'on': true, 'variations': [1, 2], 'fallthrough': {'variation': 0},"              \
    "    'rules': [{'id': 'r0', 'trackEvents': true, 'variation': 1, 'clauses':"                 \
    "      [{'attribute': 'key', 'op': 'in', 'values': ['ann']}]}], 'version': 2, 'salt': 's'}," \
    " 'fall': {'on': true, 'variations': [1, 2], 'fallthrough': {'variation': 0},"               \
    "    'trackEventsFallthrough': true, 'version': 4, 'salt': 's'},"                            \
    " 'parent': {'on': true, 'variations': ['x', 'y'], 'fallthrough': {'variation': 0},"         \
    "    'offVariation': 1, 'prerequisites': [{'key': 'tracked', 'variation': 0},"               \
    "      {'key': 'plain', 'variation': 1}], 'version': 5, 'salt': 's'}}"

static ld_context *ANN, *ANON;

static void events_up(void)
{
    ld_test_setup();
    signal(SIGPIPE, SIG_IGN);
    evr_start();
    ANN = ld_test_ctx_of("{'kind': 'user', 'key': 'ann', 'name': 'Ann', 'email': 'a@x',"
                         " 'address': {'street': 'Main', 'city': 'Oslo'}}");
    ANON = ld_test_ctx_of("{'kind': 'user', 'key': 'anon1', 'anonymous': true, 'name': 'Z'}");
}

static void events_down(void)
{
    ld_context_unref(ANN);
    ld_context_unref(ANON);
    ANN = ANON = NULL;
    evr_stop();
    ld_test_teardown();
}

/* A client with the flags of `flags` (NULL: FLAGS) sending events to the
 * local service, configured by `cfg` (borrowed; NULL: the defaults). */
static ld_client *client_with(const char *flags, const ld_events_config *cfg)
{
    return evr_client(flags ? flags : FLAGS, cfg, NULL, NULL, 0);
}

static bool bool_eval(ld_client *c, const char *key, ld_context *ctx)
{
    return ld_test_await_bool(ld_client_bool_variation(c, key, ctx, false));
}

static void detail_eval(ld_client *c, const char *key, ld_context *ctx, json_t *fallback)
{
    ld_future *f = ld_client_variation_detail(c, key, ctx, LD_VALUE_ANY, fallback);
    ld_test_await_ok(f);
}

static void json_eval(ld_client *c, const char *key, ld_context *ctx, json_t *fallback)
{
    ld_future *f = ld_client_json_variation(c, key, ctx, fallback);
    ld_test_wait(f);
    ck_assert(ld_future_is_fulfilled(f));
    ld_future_unref(f);
}

/* `e` without its creationDate, which is checked to be within the test's
 * minute, compared with the JSON text `want` (' for "). */
static void expect_event(json_t *e, const char *want)
{
    ck_assert_ptr_nonnull(e);
    json_t *copy = json_deep_copy(e);
    json_t *when = json_object_get(copy, "creationDate");
    if (when) {
        int64_t ms = json_integer_value(when);
        int64_t now = (int64_t)time(NULL) * 1000;
        ck_assert_msg(ms > now - 60000 && ms <= now + 1000, "creationDate %lld", (long long)ms);
        json_object_del(copy, "creationDate");
    }
    json_t *w = ld_test_j(want);
    char *got = json_dumps(copy, JSON_SORT_KEYS | JSON_COMPACT);
    char *exp = json_dumps(w, JSON_SORT_KEYS | JSON_COMPACT);
    ck_assert_msg(json_equal(copy, w), "got %s\nwant %s", got, exp);
    free(got);
    free(exp);
    json_decref(w);
    json_decref(copy);
}

/* The summary of post `post`, its dates checked and removed. */
static void expect_summary(int post, const char *features)
{
    json_t *s = evr_event_of(post, "summary", 0);
    ck_assert_ptr_nonnull(s);
    json_t *a = evr_events(post);
    ck_assert_ptr_eq(json_array_get(a, json_array_size(a) - 1), s); /* the summary goes last */
    json_t *copy = json_deep_copy(s);
    int64_t start = json_integer_value(json_object_get(copy, "startDate"));
    int64_t end = json_integer_value(json_object_get(copy, "endDate"));
    ck_assert_int_gt(start, 0);
    ck_assert_int_ge(end, start);
    json_object_del(copy, "startDate");
    json_object_del(copy, "endDate");
    json_t *w = json_pack("{s:s,s:o}", "kind", "summary", "features", ld_test_j(features));
    char *got = json_dumps(copy, JSON_SORT_KEYS | JSON_COMPACT);
    ck_assert_msg(json_equal(copy, w), "summary %s", got);
    free(got);
    json_decref(w);
    json_decref(copy);
}

#define ANN_JSON                                                                           \
    "{'kind': 'user', 'key': 'ann', 'name': 'Ann', 'email': 'a@x', 'address': {'street': " \
    "'Main', 'city': 'Oslo'}}"

START_TEST(test_tracked_flag_sends_index_feature_and_summary_in_that_order)
{
    ld_client *c = client_with(NULL, NULL);
    ck_assert(bool_eval(c, "tracked", ANN));
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 1);
    ck_assert_str_eq(evr.seen[0].path, "/bulk");
    ck_assert_str_eq(evr.seen[0].auth, KEY);
    ck_assert_str_eq(evr.seen[0].schema, "4");
    ck_assert_int_eq(strlen(evr.seen[0].payload_id), 36);
    json_t *a = evr_events(0);
    ck_assert_int_eq(json_array_size(a), 3);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(a, 0), "kind")), "index");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(a, 1), "kind")), "feature");
    expect_event(json_array_get(a, 0), "{'kind': 'index', 'context': " ANN_JSON "}");
    expect_event(json_array_get(a, 1),
                 "{'kind': 'feature', 'key': 'tracked', 'version': 7, 'value': true,"
                 " 'variation': 0, 'default': false, 'context': " ANN_JSON "}");
    expect_summary(0, "{'tracked': {'default': false, 'contextKinds': ['user'],"
                      " 'counters': [{'value': true, 'variation': 0, 'version': 7,"
                      " 'count': 1}]}}");
    evr_client_done(c);
}
END_TEST

START_TEST(test_untracked_flag_is_only_counted_and_a_known_context_has_no_new_index)
{
    ld_client *c = client_with(NULL, NULL);
    json_eval(c, "plain", ANN, json_string("dflt"));
    json_eval(c, "plain", ANN, json_string("dflt"));
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "feature"), 0);
    ck_assert_int_eq(evr_count(0, "index"), 1);
    expect_summary(0, "{'plain': {'default': 'dflt', 'contextKinds': ['user'],"
                      " 'counters': [{'value': 'b', 'variation': 1, 'version': 3,"
                      " 'count': 2}]}}");
    /* The next interval: the context is still known (the LRU outlives a
     * flush), so only the summary, counted afresh. */
    json_eval(c, "plain", ANN, json_string("other"));
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 2);
    ck_assert_int_eq(json_array_size(evr_events(1)), 1);
    expect_summary(1, "{'plain': {'default': 'other', 'contextKinds': ['user'],"
                      " 'counters': [{'value': 'b', 'variation': 1, 'version': 3,"
                      " 'count': 1}]}}");
    ld_events_stats st;
    ck_assert_int_eq(ld_default_event_processor_stats(ld_client_event_processor(c), &st), 0);
    ck_assert_int_eq(st.deduplicated, 2);
    ck_assert_int_eq(st.payloads_sent, 2);
    evr_client_done(c);
}
END_TEST

START_TEST(test_unknown_flag_is_counted_as_unknown_with_the_default)
{
    ld_client *c = client_with(NULL, NULL);
    ck_assert(!bool_eval(c, "nope", ANN));
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "feature"), 0);
    expect_summary(0, "{'nope': {'default': false, 'contextKinds': ['user'],"
                      " 'counters': [{'value': false, 'unknown': true, 'count': 1}]}}");
    evr_client_done(c);
}
END_TEST

START_TEST(test_reason_is_sent_for_detail_calls_and_experiments_only)
{
    ld_client *c = client_with(NULL, NULL);
    ck_assert(bool_eval(c, "tracked", ANN));      /* no reason */
    detail_eval(c, "tracked", ANN, json_false()); /* reason: asked for */
    json_eval(c, "ruled", ANN, json_integer(0));  /* reason: the rule tracks */
    json_eval(c, "fall", ANN, json_integer(0));   /* reason: the fallthrough tracks */
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "feature"), 4);
    ck_assert_ptr_null(json_object_get(evr_event_of(0, "feature", 0), "reason"));
    expect_event(evr_event_of(0, "feature", 1),
                 "{'kind': 'feature', 'key': 'tracked', 'version': 7, 'value': true,"
                 " 'variation': 0, 'default': false, 'reason': {'kind': 'FALLTHROUGH'},"
                 " 'context': " ANN_JSON "}");
    expect_event(evr_event_of(0, "feature", 2),
                 "{'kind': 'feature', 'key': 'ruled', 'version': 2, 'value': 2,"
                 " 'variation': 1, 'default': 0, 'reason': {'kind': 'RULE_MATCH',"
                 " 'ruleIndex': 0, 'ruleId': 'r0'}, 'context': " ANN_JSON "}");
    expect_event(evr_event_of(0, "feature", 3),
                 "{'kind': 'feature', 'key': 'fall', 'version': 4, 'value': 1,"
                 " 'variation': 0, 'default': 0, 'reason': {'kind': 'FALLTHROUGH'},"
                 " 'context': " ANN_JSON "}");
    /* "ruled" for another context falls through, which it does not track. */
    ld_context *bob = ld_test_ctx_of("{'kind': 'user', 'key': 'bob'}");
    json_eval(c, "ruled", bob, json_integer(0));
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(1, "feature"), 0);
    ld_context_unref(bob);
    evr_client_done(c);
}
END_TEST

START_TEST(test_prerequisites_send_their_own_events_first_with_prereq_of)
{
    ld_client *c = client_with(NULL, NULL);
    json_eval(c, "parent", ANN, json_string("d"));
    ck_assert(evr_flush(c));
    json_t *a = evr_events(0);
    /* index, then the tracked prerequisite's feature event; "plain" is not
     * tracked and "parent" neither. */
    ck_assert_int_eq(evr_count(0, "feature"), 1);
    expect_event(evr_event_of(0, "feature", 0),
                 "{'kind': 'feature', 'key': 'tracked', 'version': 7, 'value': true,"
                 " 'variation': 0, 'default': null, 'prereqOf': 'parent',"
                 " 'context': " ANN_JSON "}");
    ck_assert_int_eq(json_array_size(a), 3);
    expect_summary(0, "{'tracked': {'default': null, 'contextKinds': ['user'],"
                      " 'counters': [{'value': true, 'variation': 0, 'version': 7, 'count': 1}]},"
                      " 'plain': {'default': null, 'contextKinds': ['user'],"
                      " 'counters': [{'value': 'b', 'variation': 1, 'version': 3, 'count': 1}]},"
                      " 'parent': {'default': 'd', 'contextKinds': ['user'],"
                      " 'counters': [{'value': 'x', 'variation': 0, 'version': 5, 'count': 1}]}}");
    evr_client_done(c);
}
END_TEST

/* A flag "dbg" whose debugEventsUntilDate is `until`. */
static char *debug_flags(int64_t until)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{'dbg': {'on': true, 'variations': [true, false], 'fallthrough': {'variation': 0},"
             " 'debugEventsUntilDate': %lld, 'version': 1, 'salt': 's'}}",
             (long long)until);
    return buf;
}

START_TEST(test_debug_events_while_the_date_is_ahead_of_both_clocks)
{
    int64_t now = (int64_t)time(NULL) * 1000;
    ld_client *c = client_with(debug_flags(now + 3600 * 1000), NULL);
    ck_assert(bool_eval(c, "dbg", ANON));
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "feature"), 0);
    /* A debug event shows the anonymous context as it is. */
    expect_event(evr_event_of(0, "debug", 0),
                 "{'kind': 'debug', 'key': 'dbg', 'version': 1, 'value': true, 'variation': 0,"
                 " 'default': false, 'context': {'kind': 'user', 'key': 'anon1',"
                 " 'anonymous': true, 'name': 'Z'}}");
    evr_client_done(c);

    /* A date already past: none. */
    c = client_with(debug_flags(now - 1000), NULL);
    ck_assert(bool_eval(c, "dbg", ANN));
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(1, "debug"), 0);
    evr_client_done(c);

    /* Ahead of our clock but behind the events service's (its Date, two
     * hours ahead): none once the service's time is known. */
    char date[64];
    time_t later = time(NULL) + 7200;
    struct tm tm;
    gmtime_r(&later, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    evr.date = date;
    c = client_with(debug_flags(now + 3600 * 1000), NULL);
    ck_assert(bool_eval(c, "dbg", ANN));
    ck_assert(evr_flush(c)); /* the Date is learnt here: this one has the event */
    ck_assert_int_eq(evr_count(2, "debug"), 1);
    ck_assert(bool_eval(c, "dbg", ANN));
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(3, "debug"), 0);
    evr.date = NULL;
    evr_client_done(c);
}
END_TEST

START_TEST(test_anonymous_contexts_are_redacted_in_feature_events_not_index)
{
    ld_client *c = client_with(NULL, NULL);
    ck_assert(bool_eval(c, "tracked", ANON));
    ck_assert(evr_flush(c));
    expect_event(evr_event_of(0, "index", 0), "{'kind': 'index', 'context': {'kind': 'user',"
                                              " 'key': 'anon1', 'anonymous': true, 'name': 'Z'}}");
    expect_event(evr_event_of(0, "feature", 0),
                 "{'kind': 'feature', 'key': 'tracked', 'version': 7, 'value': true,"
                 " 'variation': 0, 'default': false, 'context': {'kind': 'user',"
                 " 'key': 'anon1', 'anonymous': true,"
                 " '_meta': {'redactedAttributes': ['name']}}}");
    evr_client_done(c);
}
END_TEST

START_TEST(test_private_attributes_of_the_configuration_are_redacted)
{
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_add_private_attribute(cfg, "email"), 0);
    ck_assert_int_eq(ld_events_config_add_private_attribute(cfg, "/address/street"), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ck_assert_int_eq(ld_client_identify(c, ANN), 0);
    ck_assert(evr_flush(c));
    expect_event(evr_event_of(0, "identify", 0),
                 "{'kind': 'identify', 'context': {'kind': 'user', 'key': 'ann', 'name': 'Ann',"
                 " 'address': {'city': 'Oslo'}, '_meta': {'redactedAttributes':"
                 " ['email', '/address/street']}}}");
    evr_client_done(c);

    cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_all_attributes_private(cfg, true), 0);
    c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ck_assert_int_eq(ld_client_identify(c, ANN), 0);
    ck_assert(evr_flush(c));
    json_t *ctx = json_object_get(evr_event_of(1, "identify", 0), "context");
    ck_assert_int_eq(json_object_size(ctx), 3); /* kind, key, _meta */
    ck_assert_str_eq(json_string_value(json_object_get(ctx, "key")), "ann");
    evr_client_done(c);
}
END_TEST

START_TEST(test_identify_and_custom_events)
{
    ld_client *c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_identify(c, ANN), 0);
    json_t *data = ld_test_j("{'cart': [1, 2]}");
    ck_assert_int_eq(ld_client_track(c, "viewed", ANN, data), 0);
    ck_assert_int_eq(ld_client_track_metric(c, "spent", ANN, NULL, 9.5), 0);
    ck_assert_int_eq(ld_client_track(c, "plain-\"q\"\n", ANN, NULL), 0);
    json_decref(data);
    ck_assert(evr_flush(c));
    json_t *a = evr_events(0);
    /* identify notes the context: no index event follows. */
    ck_assert_int_eq(evr_count(0, "index"), 0);
    ck_assert_int_eq(json_array_size(a), 4); /* no summary: nothing evaluated */
    expect_event(json_array_get(a, 0), "{'kind': 'identify', 'context': " ANN_JSON "}");
    expect_event(json_array_get(a, 1), "{'kind': 'custom', 'key': 'viewed', 'data': {'cart':"
                                       " [1, 2]}, 'context': " ANN_JSON "}");
    expect_event(json_array_get(a, 2), "{'kind': 'custom', 'key': 'spent', 'metricValue': 9.5,"
                                       " 'context': " ANN_JSON "}");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(a, 3), "key")),
                     "plain-\"q\"\n");
    evr_client_done(c);
}
END_TEST

START_TEST(test_track_and_identify_refuse_bad_input)
{
    ld_client *c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(NULL, "k", ANN, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_client_track(c, NULL, ANN, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_client_track(c, "", ANN, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_client_track(c, "\xff", ANN, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_client_track(c, "k", NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_client_track_metric(c, "k", ANN, NULL, NAN), LD_EINVAL);
    ck_assert_int_eq(ld_client_track_metric(c, "k", ANN, NULL, INFINITY), LD_EINVAL);
    ck_assert_int_eq(ld_client_identify(NULL, ANN), LD_EINVAL);
    ck_assert_int_eq(ld_client_identify(c, NULL), LD_EINVAL);
    ck_assert_ptr_null(ld_client_flush(NULL));
    ck_assert(evr_flush(c)); /* nothing was queued */
    ck_assert_int_eq(evr.n, 0);
    ld_test_await_ok(ld_client_close(c));
    ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), LD_ECLOSED);
    ck_assert_int_eq(ld_client_identify(c, ANN), LD_ECLOSED);
    ld_test_expect_error(ld_client_flush(c), LD_ECLOSED, NULL);
    evr_client_done(c);
}
END_TEST

START_TEST(test_events_off_send_nothing)
{
    ld_client_options *o = ld_client_options_new();
    json_t *data = ld_test_data_of(FLAGS, NULL);
    ck_assert_int_eq(ld_client_options_add_initializer(o, ld_test_initializer_of(data)), 0);
    json_decref(data);
    ld_net_config *n = ld_net_config_new(KEY);
    ck_assert_int_eq(ld_net_config_set_events_uri(n, evr.url), 0);
    ck_assert_int_eq(ld_client_options_set_net_config(o, n), 0);
    ld_net_config_free(n);
    ck_assert_int_eq(ld_client_options_set_events(NULL, false), LD_EINVAL);
    ck_assert_int_eq(ld_client_options_set_events_config(NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_client_options_set_events(o, false), 0);
    ld_client *c = ld_client_new(B, o);
    ld_client_options_free(o);
    ld_test_await_ok(ld_client_ready(c));
    ck_assert_ptr_null(ld_client_event_processor(c));
    ck_assert(bool_eval(c, "tracked", ANN));
    ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), 0);
    ck_assert_int_eq(ld_client_identify(c, ANN), 0);
    ck_assert(evr_flush(c));
    ld_test_await_ok(ld_client_close(c));
    ck_assert_int_eq(evr.n, 0);
    evr_client_done(c);
}
END_TEST

static int warnings;
static void on_warning(const char *message, void *arg)
{
    ck_assert_ptr_eq(arg, &warnings);
    ck_assert_ptr_nonnull(strstr(message, "capacity"));
    warnings++;
}

START_TEST(test_capacity_drops_with_one_warning_until_a_flush)
{
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_capacity(cfg, 3), 0);
    ck_assert_int_eq(ld_events_config_set_warning_fn(cfg, on_warning, &warnings), 0);
    warnings = 0;
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ck_assert_int_eq(ld_client_identify(c, ANN), 0);
    ck_assert_int_eq(ld_client_track(c, "a", ANN, NULL), 0);
    ck_assert_int_eq(ld_client_track(c, "b", ANN, NULL), 0);
    ck_assert_int_eq(ld_client_track(c, "c", ANN, NULL), LD_EBUSY);
    ck_assert_int_eq(ld_client_track(c, "d", ANN, NULL), LD_EBUSY);
    ck_assert(bool_eval(c, "tracked", ANN)); /* its feature event is dropped; */
    evr_drain();                             /* the warning comes from the loop */
    ck_assert_int_eq(warnings, 1);
    ld_events_stats st;
    ck_assert_int_eq(ld_default_event_processor_stats(ld_client_event_processor(c), &st), 0);
    ck_assert_int_eq(st.dropped, 3);
    ck_assert_int_eq(st.buffered, 3);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(json_array_size(evr_events(0)), 4); /* the summary still counted it */
    expect_summary(0, "{'tracked': {'default': false, 'contextKinds': ['user'],"
                      " 'counters': [{'value': true, 'variation': 0, 'version': 7,"
                      " 'count': 1}]}}");
    /* Room again; full again: one more warning. */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ld_client_track(c, "e", ANN, NULL), 0);
    ck_assert_int_eq(ld_client_track(c, "f", ANN, NULL), LD_EBUSY);
    ck_assert_int_eq(warnings, 1); /* not inside the call */
    evr_drain();
    ck_assert_int_eq(warnings, 2);
    evr_client_done(c);
}
END_TEST

START_TEST(test_a_500_is_retried_once_then_delivered)
{
    evr.statuses[0] = 500;
    evr.nstatuses = 1;
    ld_client *c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), 0);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 2);
    ck_assert_str_eq(evr.seen[0].payload_id, evr.seen[1].payload_id);
    ck_assert_str_eq(evr.seen[0].body, evr.seen[1].body);
    evr_client_done(c);
}
END_TEST

START_TEST(test_401_stops_all_sending)
{
    evr.statuses[0] = 401;
    evr.nstatuses = 1;
    ld_client *c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), 0);
    ck_assert(!evr_flush(c));
    ck_assert_int_eq(evr.n, 1);
    ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), 0);
    ck_assert(!evr_flush(c));
    ck_assert_int_eq(evr.n, 1); /* not even tried */
    ld_events_stats st;
    ck_assert_int_eq(ld_default_event_processor_stats(ld_client_event_processor(c), &st), 0);
    ck_assert(st.stopped);
    ck_assert_int_eq(st.payloads_dropped, 2);
    evr_client_done(c);
}
END_TEST

START_TEST(test_gzip_payloads)
{
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_gzip(cfg, true), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ck_assert(bool_eval(c, "tracked", ANN));
    ck_assert(evr_flush(c));
    ck_assert_str_eq(evr.seen[0].encoding, "gzip");
    ck_assert_int_eq(evr_count(0, "feature"), 1); /* it inflated to the payload */
    ck_assert_int_eq(evr.seen[0].body[0], 0x1f);
    evr_client_done(c);
}
END_TEST

START_TEST(test_close_sends_what_is_held)
{
    ld_client *c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), 0);
    ld_future *closed = ld_client_close(c);
    ld_test_await_ok(closed);
    ck_assert_int_eq(evr.n, 1);
    ck_assert_int_eq(evr_count(0, "custom"), 1);
    /* An evaluation issued after close is refused, and records nothing. */
    ld_test_expect_error(ld_client_bool_variation(c, "tracked", ANN, false), LD_ECLOSED, NULL);
    ld_test_await_ok(ld_client_close(c)); /* twice */
    evr_client_done(c);
    ck_assert_int_eq(evr.n, 1);
}
END_TEST

START_TEST(test_context_key_lru_evicts_the_least_recent_and_forgets_on_its_interval)
{
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_context_keys(cfg, 2, 3600000), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ld_context *x[3] = {ld_test_ctx_of("{'key': 'a'}"), ld_test_ctx_of("{'key': 'b'}"),
                        ld_test_ctx_of("{'key': 'c'}")};
    /* a b a c b: "a" is recent when "c" comes, so "b" goes; "b" again is new. */
    int order[] = {0, 1, 0, 2, 1};
    for (int i = 0; i < 5; i++)
        json_eval(c, "plain", x[order[i]], NULL);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "index"), 4);
    const char *want[] = {"a", "b", "c", "b"};
    for (int i = 0; i < 4; i++) {
        json_t *ctx = json_object_get(evr_event_of(0, "index", i), "context");
        ck_assert_str_eq(json_string_value(json_object_get(ctx, "key")), want[i]);
    }
    evr_client_done(c);

    cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_context_keys(cfg, 10, 30), 0);
    c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    json_eval(c, "plain", x[0], NULL);
    ld_future *later = ld_future_new(B);
    struct timeval tv = {0, 80000};
    ld_future *t = ld_future_timeout(later, &tv); /* steals `later` */
    ld_test_wait(t);
    ld_future_unref(t);
    json_eval(c, "plain", x[0], NULL);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(1, "index"), 2); /* forgotten in between */
    evr_client_done(c);
    for (int i = 0; i < 3; i++)
        ld_context_unref(x[i]);
}
END_TEST

START_TEST(test_omit_anonymous_contexts)
{
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_omit_anonymous_contexts(cfg, true), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ck_assert_int_eq(ld_client_identify(c, ANON), 0); /* nothing to send */
    ld_context *multi = ld_test_ctx_of("{'kind': 'multi', 'user': {'key': 'anon1',"
                                       " 'anonymous': true}, 'org': {'key': 'o1', 'name': 'O'}}");
    ck_assert_int_eq(ld_client_identify(c, multi), 0);
    ck_assert(bool_eval(c, "tracked", ANON)); /* no index event */
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "identify"), 1);
    ck_assert_int_eq(evr_count(0, "index"), 0);
    expect_event(evr_event_of(0, "identify", 0),
                 "{'kind': 'identify', 'context': {'kind': 'org', 'key': 'o1', 'name': 'O'}}");
    ck_assert_int_eq(evr_count(0, "feature"), 1); /* feature events stay, redacted */
    ld_context_unref(multi);
    evr_client_done(c);
}
END_TEST

START_TEST(test_default_processor_on_its_own)
{
    ld_net_config *n = ld_net_config_new(KEY);
    ck_assert_int_eq(ld_net_config_set_events_uri(n, evr.url), 0);
    ck_assert_ptr_null(ld_default_event_processor_new(NULL, n, NULL));
    ck_assert_ptr_null(ld_default_event_processor_new(B, NULL, NULL));
    ld_event_processor *ep = ld_default_event_processor_new(B, n, NULL);
    ld_net_config_free(n);
    ck_assert_ptr_nonnull(ep);
    json_t *e = ld_test_j("{'kind': 'custom', 'key': 'raw', 'creationDate': 5,"
                          " 'context': {'kind': 'user', 'key': 'u'}}");
    ck_assert_int_eq(ld_event_processor_send_event(ep, e), 0);
    json_decref(e);
    ck_assert(ld_test_await_bool(ld_event_processor_flush(ep)));
    while (evr.n < 2)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert_int_eq(evr.n, 2);
    /* diagnostic-init (diagnostics are on by default), and the payload. */
    int d = strcmp(evr.seen[0].path, "/diagnostic") == 0 ? 0 : 1;
    ck_assert_str_eq(evr.seen[d].path, "/diagnostic");
    ck_assert_str_eq(evr.seen[d].schema, "");
    ck_assert_str_eq(evr.seen[d].payload_id, "");
    json_t *init = evr.seen[d].json;
    ck_assert_str_eq(json_string_value(json_object_get(init, "kind")), "diagnostic-init");
    json_t *id = json_object_get(init, "id");
    ck_assert_str_eq(json_string_value(json_object_get(id, "sdkKeySuffix")), "ts-key");
    ck_assert_int_eq(strlen(json_string_value(json_object_get(id, "diagnosticId"))), 36);
    json_t *conf = json_object_get(init, "configuration");
    ck_assert(json_is_true(json_object_get(conf, "customEventsURI")));
    ck_assert(json_is_false(json_object_get(conf, "customStreamURI")));
    ck_assert_int_eq(json_integer_value(json_object_get(conf, "eventsCapacity")), 10000);
    ck_assert_int_eq(json_integer_value(json_object_get(conf, "eventsFlushIntervalMillis")), 5000);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(init, "sdk"), "name")),
                     "ldasync");
    ck_assert_str_eq(evr.seen[1 - d].path, "/bulk");
    json_t *want = ld_test_j("[{'kind': 'custom', 'key': 'raw', 'creationDate': 5,"
                             " 'context': {'kind': 'user', 'key': 'u'}}]");
    ck_assert(json_equal(evr_events(1 - d), want));
    json_decref(want);
    ld_events_stats st;
    ck_assert_int_eq(ld_default_event_processor_stats(ep, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_default_event_processor_stats(NULL, &st), LD_EINVAL);
    ld_event_processor *mock = ld_mock_event_processor_new(B);
    ck_assert_int_eq(ld_default_event_processor_stats(mock, &st), LD_EINVAL);
    ld_event_processor_free(mock);
    ck_assert_int_eq(ld_default_event_processor_stats(ep, &st), 0);
    ck_assert_int_eq(st.events, 1);
    ld_test_await_ok(ld_event_processor_close(ep));
    ld_event_processor_free(ep);
    evr_drain();
}
END_TEST

START_TEST(test_periodic_diagnostics_count_what_happened_since_the_last)
{
    setenv("LDASYNC_EVENTS_DIAG_MS", "1000", 1);
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_diagnostics(cfg, true, 60000), 0);
    ck_assert_int_eq(ld_events_config_set_capacity(cfg, 2), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    unsetenv("LDASYNC_EVENTS_DIAG_MS");
    json_eval(c, "plain", ANN, NULL); /* index */
    json_eval(c, "plain", ANN, NULL); /* deduplicated, as the two tracks */
    ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), 0);
    ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), LD_EBUSY); /* dropped */
    ck_assert(evr_flush(c));
    int periodic = -1;
    while (periodic < 0) {
        event_base_loop(B, EVLOOP_ONCE);
        for (int i = 0; i < evr.n && i < EVR_MAX; i++)
            if (evr.seen[i].json &&
                strcmp(json_string_value(json_object_get(evr.seen[i].json, "kind")) ?: "",
                       "diagnostic") == 0)
                periodic = i;
    }
    json_t *p = evr.seen[periodic].json;
    ck_assert_str_eq(evr.seen[periodic].path, "/diagnostic");
    ck_assert_int_eq(json_integer_value(json_object_get(p, "droppedEvents")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "deduplicatedUsers")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "eventsInLastBatch")), 2);
    ck_assert(json_is_array(json_object_get(p, "streamInits")));
    ck_assert_int_gt(json_integer_value(json_object_get(p, "dataSinceDate")), 0);
    evr_client_done(c);
}
END_TEST

START_TEST(test_config_setters_refuse_bad_values)
{
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_capacity(NULL, 1), LD_EINVAL);
    ck_assert_int_eq(ld_events_config_set_capacity(cfg, 0), LD_EINVAL);
    ck_assert_int_eq(ld_events_config_set_capacity(cfg, -1), LD_EINVAL);
    ck_assert_int_eq(ld_events_config_set_flush_interval(cfg, 0), LD_EINVAL);
    ck_assert_int_eq(ld_events_config_set_context_keys(cfg, 0, 1), LD_EINVAL);
    ck_assert_int_eq(ld_events_config_set_context_keys(cfg, 1, 0), LD_EINVAL);
    ck_assert_int_eq(ld_events_config_add_private_attribute(cfg, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_events_config_add_private_attribute(NULL, "x"), LD_EINVAL);
    ck_assert_int_eq(ld_events_config_set_diagnostics(cfg, true, 59999), LD_EINVAL);
    ck_assert_int_eq(ld_events_config_set_diagnostics(cfg, false, 60000), 0);
    ck_assert_int_eq(ld_events_config_set_gzip(NULL, true), LD_EINVAL);
    ck_assert_int_eq(ld_events_config_set_all_attributes_private(NULL, true), LD_EINVAL);
    ck_assert_int_eq(ld_events_config_set_omit_anonymous_contexts(NULL, true), LD_EINVAL);
    ck_assert_int_eq(ld_events_config_set_warning_fn(NULL, NULL, NULL), LD_EINVAL);
    ld_events_config_free(cfg);
    ld_events_config_free(NULL);
}
END_TEST

START_TEST(test_a_flush_while_five_are_under_way_waits_for_room)
{
    evr.hold = true;
    ld_client *c = client_with(NULL, NULL);
    ld_future *f[6];
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), 0);
        f[i] = ld_client_flush(c);
    }
    while (evr.n < 5)
        event_base_loop(B, EVLOOP_ONCE);
    evr_drain();
    ck_assert_int_eq(evr.n, 5);
    ld_events_stats st;
    ck_assert_int_eq(ld_default_event_processor_stats(ld_client_event_processor(c), &st), 0);
    ck_assert_int_eq(st.in_flight, 5);
    ck_assert_int_eq(st.buffered, 1);
    ck_assert(ld_future_is_pending(f[5]));
    evr.hold = false;
    evr_release_held();
    for (int i = 0; i < 6; i++)
        ck_assert(ld_test_await_bool(f[i]));
    ck_assert_int_eq(evr.n, 6);
    evr_client_done(c);
}
END_TEST

static void free_client_cb(ld_future *f, void *arg)
{
    (void)f;
    ld_client_free(arg);
}

START_TEST(test_free_with_posts_under_way_and_from_a_flush_callback)
{
    /* Posts held: freeing the client abandons them; the flush rejects. */
    evr.hold = true;
    ld_client *c = client_with(NULL, NULL);
    ck_assert(bool_eval(c, "tracked", ANN));
    ld_future *f = ld_client_flush(c);
    while (evr.n < 1)
        event_base_loop(B, EVLOOP_ONCE);
    ld_client_free(c);
    ld_test_wait(f);
    ck_assert(!ld_future_is_pending(f));
    ld_future_unref(f);
    evr.hold = false;
    evr_release_held();
    evr_drain();

    /* Freed from its own flush's callback. */
    c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), 0);
    f = ld_client_flush(c);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f), free_client_cb, c), 0);
    ld_test_wait(f);
    ld_future_unref(f);
    evr_drain();

    /* Freed right after close, and right after a flush (the worker's job
     * not yet run). */
    c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), 0);
    ld_future *cl = ld_client_close(c);
    ld_client_free(c);
    ld_test_wait(cl);
    ld_future_unref(cl);
    c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), 0);
    f = ld_client_flush(c);
    ld_client_free(c);
    ld_test_wait(f);
    ld_future_unref(f);
    evr_drain();
}
END_TEST

/* A future of the client under allocation failures: settled, and if
 * rejected then with LD_ENOMEM. */
static void settle_outcome(ld_future *f)
{
    ck_assert_ptr_nonnull(f);
    for (int k = 0; k < 20000 && ld_future_is_pending(f); k++)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert(!ld_future_is_pending(f));
    if (ld_future_is_rejected(f))
        ck_assert_int_eq(ld_future_error(f), LD_ENOMEM);
    ld_future_unref(f);
}

START_TEST(test_allocation_failures_in_turn)
{
    json_t *data = ld_test_data_of(FLAGS, NULL);
    ld_net_config *n = ld_net_config_new(KEY);
    ck_assert_int_eq(ld_net_config_set_events_uri(n, evr.url), 0);
    ld_events_config *cfg = ld_events_config_new(); /* diagnostics on */
    ck_assert_int_eq(ld_events_config_set_flush_interval(cfg, 3600 * 1000), 0);
    ck_assert_int_eq(ld_events_config_set_gzip(cfg, true), 0);
    ck_assert_int_eq(ld_events_config_add_private_attribute(cfg, "/address/street"), 0);
    __atomic_store_n(&ld__http_spare_curl, true, __ATOMIC_RELAXED);
    for (long i = 1;; i++) {
        evr.n = 0;
        ld_client_options *o = ld_client_options_new();
        ck_assert_int_eq(ld_client_options_add_initializer(o, ld_test_initializer_of(data)), 0);
        ck_assert_int_eq(ld_client_options_set_net_config(o, n), 0);
        ck_assert_int_eq(ld_client_options_set_events_config(o, cfg), 0);
        json_t *fb = json_string("d");
        CHAOS_BEGIN(i);
        ld_client *c = ld_client_new(B, o);
        int rc[3] = {0, 0, 0};
        if (c) {
            settle_outcome(ld_client_ready(c));
            settle_outcome(ld_client_bool_variation(c, "tracked", ANN, false));
            settle_outcome(ld_client_json_variation(c, "parent", ANN, json_incref(fb)));
            settle_outcome(ld_client_variation_detail(c, "ruled", ANN, LD_VALUE_ANY, NULL));
            rc[0] = ld_client_identify(c, ANON);
            rc[1] = ld_client_track(c, "t", ANN, fb);
            rc[2] = ld_client_track_metric(c, "m", ANN, NULL, 1.5);
            for (int k = 0; k < 3; k++)
                ck_assert_msg(rc[k] == 0 || rc[k] == LD_ENOMEM || rc[k] == LD_EBUSY,
                              "rc %d (N=%ld)", rc[k], i);
            settle_outcome(ld_client_flush(c));
            settle_outcome(ld_client_close(c));
        }
        bool failed = chaos_end(i);
        ld_client_free(c);
        evr_drain();
        json_decref(fb);
        ld_client_options_free(o);
        if (!failed) {
            ck_assert_ptr_nonnull(c);
            /* diagnostic-init and one payload: index, two feature events
             * (tracked; the rule of ruled), the prerequisite's, identify,
             * two custom, the summary. */
            int bulk = strcmp(evr.seen[0].path, "/bulk") == 0 ? 0 : 1;
            ck_assert_int_eq(evr.n, 2);
            ck_assert_int_eq(evr_count(bulk, "feature"), 3);
            ck_assert_int_eq(evr_count(bulk, "custom"), 2);
            ck_assert_int_eq(evr_count(bulk, "identify"), 1);
            ck_assert_int_eq(evr_count(bulk, "summary"), 1);
            break;
        }
    }
    __atomic_store_n(&ld__http_spare_curl, false, __ATOMIC_RELAXED);
    ld_events_config_free(cfg);
    ld_net_config_free(n);
    json_decref(data);
}
END_TEST

/* A client (capacity 20,000) holding 10,000 custom events "many". */
static ld_client *client_tracking_many(void)
{
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_capacity(cfg, 20000), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    json_t *data = ld_test_j("{'n': 1}");
    for (int i = 0; i < 10000; i++)
        ck_assert_int_eq(ld_client_track(c, "many", ANN, data), 0);
    json_decref(data);
    return c;
}

/* A payload of more records than the loop lets go of in one pass: all
 * sent, each let go of (ASan and valgrind see a leak otherwise), the
 * flush answered once the last is. */
START_TEST(test_a_large_payload_is_let_go_of_in_slices)
{
    ld_client *c = client_tracking_many();
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 1);
    ck_assert_int_eq(json_array_size(evr_events(0)), 10001); /* index and 10,000 */
    ck_assert_int_eq(evr_count(0, "custom"), 10000);
    ld_events_stats st;
    ck_assert_int_eq(ld_default_event_processor_stats(ld_client_event_processor(c), &st), 0);
    ck_assert_int_eq(st.in_flight, 0);
    evr_client_done(c);
}
END_TEST

/* Blocks freed through the library's allocator (its hooks are malloc's). */
static long g_frees;

static void *cnt_malloc(size_t n)
{
    return malloc(n);
}

static void *cnt_realloc(void *p, size_t n)
{
    return realloc(p, n);
}

static void cnt_free(void *p)
{
    if (p)
        __atomic_add_fetch(&g_frees, 1, __ATOMIC_RELAXED);
    free(p);
}

/* What the records of a flushed batch held is let go of RELEASE_SLICE
 * records a pass, over several passes of the loop (each custom event's key
 * is a block of its own): the slices ran in one pass while the next one
 * was an event made active from the callback before. */
START_TEST(test_a_large_batch_is_let_go_of_over_several_passes)
{
    ld_client *c = client_tracking_many();
    ck_assert_int_eq(ld_set_alloc_funcs(cnt_malloc, cnt_realloc, cnt_free), 0);
    ld_future *f = ld_client_flush(c);
    long most = 0, total = 0;
    for (int i = 0; i < 1000000 && ld_future_is_pending(f); i++) {
        long before = __atomic_load_n(&g_frees, __ATOMIC_RELAXED);
        event_base_loop(B, EVLOOP_ONCE);
        long n = __atomic_load_n(&g_frees, __ATOMIC_RELAXED) - before;
        most = n > most ? n : most;
        total += n;
    }
    ld_set_alloc_funcs(NULL, NULL, NULL);
    ck_assert(ld_test_await_bool(f));
    ck_assert_msg(total >= 10000 && most < 9000, "%ld blocks freed in one pass, %ld in all", most,
                  total);
    evr_client_done(c);
}
END_TEST

/* The configuration and a processor on its own, every allocation failing
 * in turn: each call succeeds or says LD_ENOMEM (a NULL), and the last run
 * delivers the event. */
START_TEST(test_processor_on_its_own_allocation_failures)
{
    ld_net_config *n = ld_net_config_new(KEY);
    ck_assert_int_eq(ld_net_config_set_events_uri(n, evr.url), 0);
    json_t *ev = ld_test_j("{'kind': 'custom', 'key': 'raw', 'creationDate': 5}");
    __atomic_store_n(&ld__http_spare_curl, true, __ATOMIC_RELAXED);
    for (long i = 1;; i++) {
        evr.n = 0;
        CHAOS_BEGIN(i);
        ld_events_config *cfg = ld_events_config_new();
        int rc[2] = {0, 0};
        if (cfg) {
            rc[0] = ld_events_config_add_private_attribute(cfg, "/a/b");
            rc[1] = ld_events_config_add_private_attribute(cfg, "email");
            for (int k = 0; k < 2; k++)
                ck_assert(rc[k] == 0 || rc[k] == LD_ENOMEM);
        }
        ld_event_processor *ep = cfg ? ld_default_event_processor_new(B, n, cfg) : NULL;
        bool sent = false;
        if (ep) {
            int r = ld_event_processor_send_event(ep, ev);
            ck_assert(r == 0 || r == LD_ENOMEM || r == LD_EBUSY);
            ld_future *f = ld_event_processor_flush(ep);
            settle_outcome(ld_future_ref(f));
            sent = ld_future_is_fulfilled(f) && ld_future_bool(f) && r == 0;
            ld_future_unref(f);
            ld_events_stats st;
            ck_assert_int_eq(ld_default_event_processor_stats(ep, &st), 0);
            settle_outcome(ld_event_processor_close(ep));
        }
        bool failed = chaos_end(i);
        ld_event_processor_free(ep);
        ld_events_config_free(cfg);
        evr_drain();
        if (!failed) {
            ck_assert(sent);
            ck_assert_int_eq(rc[0] | rc[1], 0);
            break;
        }
    }
    __atomic_store_n(&ld__http_spare_curl, false, __ATOMIC_RELAXED);
    json_decref(ev);
    ld_net_config_free(n);
}
END_TEST

Suite *ld_suite_client_events(void)
{
    Suite *s = suite_create("client_events");
    TCase *tc = tcase_create("events");
    tcase_add_checked_fixture(tc, events_up, events_down);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_tracked_flag_sends_index_feature_and_summary_in_that_order);
    tcase_add_test(tc, test_untracked_flag_is_only_counted_and_a_known_context_has_no_new_index);
    tcase_add_test(tc, test_unknown_flag_is_counted_as_unknown_with_the_default);
    tcase_add_test(tc, test_reason_is_sent_for_detail_calls_and_experiments_only);
    tcase_add_test(tc, test_prerequisites_send_their_own_events_first_with_prereq_of);
    tcase_add_test(tc, test_debug_events_while_the_date_is_ahead_of_both_clocks);
    tcase_add_test(tc, test_anonymous_contexts_are_redacted_in_feature_events_not_index);
    tcase_add_test(tc, test_private_attributes_of_the_configuration_are_redacted);
    tcase_add_test(tc, test_identify_and_custom_events);
    tcase_add_test(tc, test_track_and_identify_refuse_bad_input);
    tcase_add_test(tc, test_events_off_send_nothing);
    tcase_add_test(tc, test_capacity_drops_with_one_warning_until_a_flush);
    tcase_add_test(tc, test_a_500_is_retried_once_then_delivered);
    tcase_add_test(tc, test_401_stops_all_sending);
    tcase_add_test(tc, test_gzip_payloads);
    tcase_add_test(tc, test_close_sends_what_is_held);
    tcase_add_test(tc, test_context_key_lru_evicts_the_least_recent_and_forgets_on_its_interval);
    tcase_add_test(tc, test_omit_anonymous_contexts);
    tcase_add_test(tc, test_default_processor_on_its_own);
    tcase_add_test(tc, test_periodic_diagnostics_count_what_happened_since_the_last);
    tcase_add_test(tc, test_config_setters_refuse_bad_values);
    tcase_add_test(tc, test_a_flush_while_five_are_under_way_waits_for_room);
    tcase_add_test(tc, test_free_with_posts_under_way_and_from_a_flush_callback);
    tcase_add_test(tc, test_a_large_payload_is_let_go_of_in_slices);
    tcase_add_test(tc, test_a_large_batch_is_let_go_of_over_several_passes);
    tcase_add_test(tc, test_allocation_failures_in_turn);
    tcase_add_test(tc, test_processor_on_its_own_allocation_failures);
    suite_add_tcase(s, tc);
    return s;
}
