/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Attacks on analytics events through the public API (client.h,
 * events.h): close and free orders, an events service that is dead, holds
 * every post or refuses every payload, the capacity under a flood of
 * tracks, huge custom data, contexts with many kinds and odd keys, 10,000
 * flags in one summary, a 1 ms flush interval, context-key LRUs of 1 and
 * of INT_MAX keys, odd private attribute references, omit-anonymous with a
 * multi-kind context anonymous in every kind.
 */
#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include <ldasync/ldasync.h>
#include <ldasync/testing.h>

#include "check_receiver.h"
#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base
#define KEY EVR_KEY

#define FLAGS                                                                           \
    "{'tracked': {'on': true, 'trackEvents': true, 'variations': [true, false],"        \
    "    'fallthrough': {'variation': 0}, 'version': 7, 'salt': 's'},"                  \
    " 'plain': {'on': true, 'variations': ['a', 'b'], 'fallthrough': {'variation': 1}," \
    "    'version': 3, 'salt': 's'}}"

static ld_context *ANN;
/* The read timeout of the next clients (0: the default). */
static int64_t read_ms;

static void attack_up(void)
{
    ld_test_setup();
    read_ms = 0;
    signal(SIGPIPE, SIG_IGN);
    evr_start();
    ANN = ld_test_ctx_of("{'kind': 'user', 'key': 'ann', 'name': 'Ann'}");
}

static void attack_down(void)
{
    ld_context_unref(ANN);
    ANN = NULL;
    evr_stop();
    ld_test_teardown();
}

/* A client with `flags` (NULL: FLAGS) sending events to `uri` (NULL: the
 * local service), configured by `cfg` (borrowed; NULL: evr_config()). */
static ld_client *client_to(const char *flags, const ld_events_config *cfg, const char *uri)
{
    return evr_client(flags ? flags : FLAGS, cfg, uri, NULL, read_ms);
}

static ld_client *client_with(const char *flags, const ld_events_config *cfg)
{
    return client_to(flags, cfg, NULL);
}

static void json_eval(ld_client *c, const char *key, ld_context *ctx)
{
    ld_future *f = ld_client_json_variation(c, key, ctx, NULL);
    ld_test_wait(f);
    ck_assert(ld_future_is_fulfilled(f));
    ld_future_unref(f);
}

/* Lets the loop run for `ms` milliseconds. */
static void run_for(int ms)
{
    ld_future *later = ld_future_new(B);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    ld_future *t = ld_future_timeout(later, &tv); /* steals `later` */
    ld_test_wait(t);
    ld_future_unref(t);
}

/* ------------------------------------------------------------------------- */
/* Close and free orders                                                     */

static ld_future *closed_in_warning;
static ld_client *warn_client;
static void close_client_on_warning(const char *message, void *arg)
{
    (void)message;
    (void)arg;
    if (!closed_in_warning)
        closed_in_warning = ld_client_close(warn_client);
}

START_TEST(test_close_inside_the_warning_function)
{
    closed_in_warning = NULL;
    ld_events_config *cfg = evr_config();
    /* 3: ANN's index event, then two custom events */
    ck_assert_int_eq(ld_events_config_set_capacity(cfg, 3), 0);
    ck_assert_int_eq(ld_events_config_set_warning_fn(cfg, close_client_on_warning, NULL), 0);
    ld_client *c = warn_client = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ck_assert_int_eq(ld_client_track(c, "a", ANN, NULL), 0);
    ck_assert_int_eq(ld_client_track(c, "b", ANN, NULL), 0);
    ck_assert_int_eq(ld_client_track(c, "c", ANN, NULL), LD_EBUSY); /* warns: closes */
    ck_assert_ptr_null(closed_in_warning); /* from the loop, not inside the call */
    evr_drain();
    ck_assert_ptr_nonnull(closed_in_warning);
    ck_assert_int_eq(ld_client_track(c, "d", ANN, NULL), LD_ECLOSED);
    ld_test_await_ok(closed_in_warning);
    closed_in_warning = NULL;
    ck_assert_int_eq(evr.n, 1);
    ck_assert_int_eq(evr_count(0, "custom"), 2); /* what was held was sent */
    evr_client_done(c);
}
END_TEST

static ld_future *closed_in_cb;
static void close_client_cb(ld_future *f, void *arg)
{
    (void)f;
    closed_in_cb = ld_client_close(arg);
}

START_TEST(test_close_inside_a_flush_callback_sends_what_came_after)
{
    closed_in_cb = NULL;
    ld_client *c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(c, "a", ANN, NULL), 0);
    ld_future *f = ld_client_flush(c);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f), close_client_cb, c), 0);
    ck_assert_int_eq(ld_client_track(c, "b", ANN, NULL), 0); /* the next payload */
    ck_assert(ld_test_await_bool(f));
    while (!closed_in_cb)
        event_base_loop(B, EVLOOP_ONCE);
    ld_test_await_ok(closed_in_cb);
    closed_in_cb = NULL;
    ck_assert_int_eq(evr.n, 2);
    ck_assert_int_eq(evr_count(0, "custom") + evr_count(1, "custom"), 2);
    evr_client_done(c);
}
END_TEST

START_TEST(test_double_close_then_flush_track_identify_refused)
{
    ld_client *c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(c, "a", ANN, NULL), 0);
    ld_future *c1 = ld_client_close(c);
    ld_future *c2 = ld_client_close(c);
    ck_assert_ptr_nonnull(c1);
    ck_assert_ptr_nonnull(c2);
    ld_test_expect_error(ld_client_flush(c), LD_ECLOSED, NULL);
    ck_assert_int_eq(ld_client_track(c, "b", ANN, NULL), LD_ECLOSED);
    ck_assert_int_eq(ld_client_identify(c, ANN), LD_ECLOSED);
    ld_test_await_ok(c1);
    ld_test_await_ok(c2);
    ck_assert_int_eq(evr.n, 1); /* once, not once per close */
    ck_assert_int_eq(evr_count(0, "custom"), 1);
    evr_client_done(c);
}
END_TEST

START_TEST(test_free_right_after_track_flush_and_close)
{
    ld_client *c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(c, "a", ANN, NULL), 0);
    evr_client_done(c);
    c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(c, "a", ANN, NULL), 0);
    ld_future *f = ld_client_flush(c);
    ld_future *cl = ld_client_close(c);
    ld_client_free(c);
    ld_test_wait(f);
    ld_test_wait(cl);
    ck_assert(!ld_future_is_pending(f));
    ck_assert(!ld_future_is_pending(cl));
    ld_future_unref(f);
    ld_future_unref(cl);
    evr_drain();
}
END_TEST

START_TEST(test_free_while_a_flush_waits_for_room_with_five_posts_held)
{
    evr.hold = true;
    ld_client *c = client_with(NULL, NULL);
    ld_future *f[7];
    for (int i = 0; i < 7; i++) {
        ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), 0);
        f[i] = ld_client_flush(c);
    }
    while (evr.n < 5)
        event_base_loop(B, EVLOOP_ONCE);
    evr_drain();
    ck_assert_int_eq(evr_stats(c).in_flight, 5);
    ck_assert(ld_future_is_pending(f[5]));
    ck_assert(ld_future_is_pending(f[6]));
    ld_client_free(c);
    for (int i = 0; i < 7; i++) {
        ld_test_wait(f[i]);
        ck_assert_msg(!ld_future_is_pending(f[i]), "flush %d still pending", i);
        ld_future_unref(f[i]);
    }
    evr.hold = false;
    evr_release_held();
    evr_drain();
    ck_assert_int_eq(evr.n, 5); /* nothing posted after the free */
}
END_TEST

/* ------------------------------------------------------------------------- */
/* A bad events service                                                      */

START_TEST(test_dead_service_drops_the_payload_after_the_retry)
{
    /* Port 1 of the loopback: nobody listens there. */
    ld_client *c = client_to(NULL, NULL, "http://127.0.0.1:1/");
    ck_assert_int_eq(ld_client_track(c, "a", ANN, NULL), 0);
    ck_assert(!evr_flush(c));
    ld_events_stats st = evr_stats(c);
    ck_assert_int_eq(st.payloads_dropped, 1);
    ck_assert_int_eq(st.payloads_sent, 0);
    ck_assert_int_eq(st.in_flight, 0);
    ck_assert_int_eq(st.buffered, 0);
    ck_assert(!st.stopped);
    ck_assert_int_eq(ld_client_track(c, "b", ANN, NULL), 0);
    ld_test_await_ok(ld_client_close(c)); /* close gives up too, and completes */
    evr_client_done(c);
}
END_TEST

START_TEST(test_413_every_time_is_dropped_without_a_retry_and_sending_goes_on)
{
    for (int i = 0; i < EVR_MAX; i++)
        evr.statuses[i] = 413;
    evr.nstatuses = EVR_MAX;
    ld_client *c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(c, "a", ANN, NULL), 0);
    ck_assert(!evr_flush(c));
    ck_assert_int_eq(evr.n, 1); /* 413 is not recoverable: no retry */
    ck_assert_int_eq(ld_client_track(c, "b", ANN, NULL), 0);
    ck_assert(!evr_flush(c));
    ck_assert_int_eq(evr.n, 2); /* not stopped either */
    ld_events_stats st = evr_stats(c);
    ck_assert_int_eq(st.payloads_dropped, 2);
    ck_assert(!st.stopped);
    evr_client_done(c);
}
END_TEST

START_TEST(test_503_every_time_is_retried_once_per_payload)
{
    for (int i = 0; i < EVR_MAX; i++)
        evr.statuses[i] = 503;
    evr.nstatuses = EVR_MAX;
    ld_client *c = client_with(NULL, NULL);
    for (int p = 0; p < 3; p++) {
        ck_assert_int_eq(ld_client_track(c, "a", ANN, NULL), 0);
        ck_assert(!evr_flush(c));
        ck_assert_int_eq(evr.n, 2 * (p + 1));
        ck_assert_str_eq(evr.seen[2 * p].payload_id, evr.seen[2 * p + 1].payload_id);
    }
    ld_events_stats st = evr_stats(c);
    ck_assert_int_eq(st.payloads_dropped, 3);
    ck_assert_int_eq(st.payloads_sent, 0);
    ck_assert_int_eq(st.in_flight, 0);
    evr_client_done(c);
}
END_TEST

START_TEST(test_capacity_holds_under_100000_tracks_and_flushes_with_a_held_service)
{
    evr.hold = true;
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_capacity(cfg, 100), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    int ok = 0, busy = 0;
    ld_future *last = NULL;
    for (int i = 0; i < 100000; i++) {
        int rc = ld_client_track(c, "flood", ANN, NULL);
        ck_assert(rc == 0 || rc == LD_EBUSY);
        rc == 0 ? ok++ : busy++;
        if (i % 1000 == 999) {
            /* a flush every 1,000: five posts held, the rest must wait,
             * and what waits must stay within the capacity */
            ld_future_unref(last);
            last = ld_client_flush(c);
            evr_drain();
            ld_events_stats st = evr_stats(c);
            ck_assert_int_le(st.in_flight, 5);
            ck_assert_int_le(st.buffered, 100);
        }
    }
    ld_events_stats st = evr_stats(c);
    ck_assert_int_le(st.buffered, 100);
    ck_assert_int_le(st.in_flight, 5);
    ck_assert_int_eq(st.dropped, (uint64_t)busy);
    /* every event accepted is buffered, in flight, or waiting to be posted;
     * at most 5 posts held + 1 waiting, each of at most 100 events */
    ck_assert_int_le(ok, 6 * 100 + 1 /* index */);
    ck_assert_int_ge(st.events, (uint64_t)ok);
    ck_assert_int_le(st.events, (uint64_t)ok + 1);
    ck_assert_int_eq(st.payloads_sent, 0);
    ld_future_unref(last);
    evr.hold = false;
    evr_release_held();
    evr_client_done(c);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* What the payload carries                                                  */

START_TEST(test_huge_custom_data_and_key_go_whole_plain_and_gzip)
{
    size_t len = 4u << 20; /* 4 MiB */
    char *big = malloc(len + 1);
    ck_assert_ptr_nonnull(big);
    for (size_t i = 0; i < len; i++)
        big[i] = (char)('a' + i % 26);
    big[len] = '\0';
    for (int gz = 0; gz < 2; gz++) {
        ld_events_config *cfg = evr_config();
        ck_assert_int_eq(ld_events_config_set_gzip(cfg, gz), 0);
        ld_client *c = client_with(NULL, cfg);
        ld_events_config_free(cfg);
        json_t *data = json_pack("{s:s,s:[i,i]}", "blob", big, "n", 1, 2);
        ck_assert_ptr_nonnull(data);
        ck_assert_int_eq(ld_client_track(c, "huge", ANN, data), 0);
        json_decref(data);
        big[1 << 20] = '\0'; /* a 1 MiB key */
        ck_assert_int_eq(ld_client_track(c, big, ANN, NULL), 0);
        big[1 << 20] = (char)('a' + (1 << 20) % 26);
        ck_assert(evr_flush(c));
        json_t *e = evr_event_of(gz, "custom", 0);
        ck_assert_ptr_nonnull(e);
        json_t *got = json_object_get(json_object_get(e, "data"), "blob");
        ck_assert_int_eq(json_string_length(got), len);
        ck_assert(memcmp(json_string_value(got), big, len) == 0);
        json_t *k = json_object_get(evr_event_of(gz, "custom", 1), "key");
        ck_assert_int_eq(json_string_length(k), 1 << 20);
        ck_assert(memcmp(json_string_value(k), big, 1 << 20) == 0);
        evr_client_done(c);
    }
    free(big);
}
END_TEST

START_TEST(test_stats_add_up_after_a_mixed_run)
{
    evr.statuses[0] = 202;
    evr.statuses[1] = 413; /* the second payload is refused */
    evr.nstatuses = 2;
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_capacity(cfg, 5), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    for (int i = 0; i < 8; i++) /* index + 4 taken, 4 dropped */
        ld_client_track(c, "a", ANN, NULL);
    json_eval(c, "plain", ANN); /* deduplicated */
    ck_assert(evr_flush(c));
    ck_assert_int_eq(ld_client_track(c, "b", ANN, NULL), 0);
    ck_assert(!evr_flush(c));
    ld_events_stats st = evr_stats(c);
    ck_assert_int_eq(st.events, 6);
    ck_assert_int_eq(st.dropped, 4);
    ck_assert_int_eq(st.deduplicated, 9); /* the 7 tracks after the first, the evaluation, "b" */
    ck_assert_int_eq(st.payloads_sent, 1);
    ck_assert_int_eq(st.payloads_dropped, 1);
    ck_assert_int_eq(st.buffered, 0);
    ck_assert_int_eq(st.in_flight, 0);
    ck_assert(!st.stopped);
    evr_client_done(c);
}
END_TEST

START_TEST(test_contexts_with_odd_keys_and_many_kinds_are_told_apart)
{
    ld_client *c = client_with(NULL, NULL);
    /* Fully-qualified keys that collide unless ':' and '%' are escaped. */
    ld_context *x = ld_test_ctx_of("{'kind': 'multi', 'a': {'key': 'x:b:y'}, 'c': {'key': 'z'}}");
    ld_context *y = ld_test_ctx_of("{'kind': 'multi', 'a': {'key': 'x'}, 'b': {'key': 'y'},"
                                   " 'c': {'key': 'z'}}");
    ld_context *p = ld_test_ctx_of("{'kind': 'multi', 'a': {'key': 'x%3Ab'}, 'c': {'key': 'z'}}");
    ld_context *q = ld_test_ctx_of("{'kind': 'multi', 'a': {'key': 'x:b'}, 'c': {'key': 'z'}}");
    ld_context *u =
        ld_test_ctx_of("{'kind': 'user', 'key': '\\\"q\\\" \\u00e9\\u4e2d\\ud83d\\ude00 %:'}");
    ld_context *all[] = {x, y, p, q, u};
    for (int i = 0; i < 5; i++)
        json_eval(c, "plain", all[i]);
    /* many kinds */
    char buf[8192];
    int off = snprintf(buf, sizeof buf, "{'kind': 'multi'");
    for (int k = 0; k < 40; k++)
        off += snprintf(buf + off, sizeof buf - off, ", 'k%02d': {'key': 'key\\\"%d'}", k, k);
    snprintf(buf + off, sizeof buf - off, "}");
    ld_context *many = ld_test_ctx_of(buf);
    json_eval(c, "plain", many);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "index"), 6); /* none taken for another */
    json_t *uj = json_object_get(evr_event_of(0, "index", 4), "context");
    ck_assert_str_eq(json_string_value(json_object_get(uj, "key")),
                     "\"q\" \xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80 %:");
    json_t *mj = json_object_get(evr_event_of(0, "index", 5), "context");
    ck_assert_int_eq(json_object_size(mj), 41);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(mj, "k07"), "key")),
                     "key\"7");
    json_t *kinds = json_object_get(
        json_object_get(json_object_get(evr_event_of(0, "summary", 0), "features"), "plain"),
        "contextKinds");
    ck_assert_int_eq(json_array_size(kinds), 44); /* a b c user k00..k39 */
    /* the same again: all known */
    for (int i = 0; i < 5; i++)
        json_eval(c, "plain", all[i]);
    json_eval(c, "plain", many);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(1, "index"), 0);
    for (int i = 0; i < 5; i++)
        ld_context_unref(all[i]);
    ld_context_unref(many);
    evr_client_done(c);
}
END_TEST

START_TEST(test_10000_flags_in_one_summary)
{
    enum { N = 10000 };
    size_t cap = (size_t)N * 128 + 16;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    size_t off = 0;
    text[off++] = '{';
    for (int i = 0; i < N; i++)
        off += (size_t)snprintf(text + off, cap - off,
                                "%s'f%d': {'on': true, 'variations': [%d, -1],"
                                " 'fallthrough': {'variation': 0}, 'version': %d, 'salt': 's'}",
                                i ? ", " : "", i, i, i + 1);
    text[off++] = '}';
    text[off] = '\0';
    ld_client *c = client_with(text, NULL);
    free(text);
    for (int i = 0; i < N; i++) {
        char key[16];
        snprintf(key, sizeof key, "f%d", i);
        ld_future *f = ld_test_fulfilled(ld_client_int_variation(c, key, ANN, -2));
        ck_assert_int_eq(ld_future_int(f), i);
        ld_future_unref(f);
    }
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 1);
    json_t *features = json_object_get(evr_event_of(0, "summary", 0), "features");
    ck_assert_int_eq(json_object_size(features), N);
    for (int i = 0; i < N; i += 997) {
        char key[16];
        snprintf(key, sizeof key, "f%d", i);
        json_t *want =
            json_pack("{s:i,s:[s],s:[{s:i,s:i,s:i,s:i}]}", "default", -2, "contextKinds", "user",
                      "counters", "value", i, "variation", 0, "version", i + 1, "count", 1);
        ck_assert_msg(json_equal(json_object_get(features, key), want), "%s", key);
        json_decref(want);
    }
    ck_assert_int_eq(evr_count(0, "index"), 1);
    evr_client_done(c);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Timers and the LRU                                                        */

static int ticks;
static void tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    ticks++;
}

START_TEST(test_a_1ms_flush_interval_starves_nothing_and_posts_only_what_is_held)
{
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_flush_interval(cfg, 1), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ticks = 0;
    struct event *ev = event_new(B, -1, EV_PERSIST, tick, NULL);
    struct timeval tv = {0, 10000};
    event_add(ev, &tv);
    run_for(300);
    ck_assert_int_ge(ticks, 10); /* our 10 ms timer still runs */
    ck_assert_int_eq(evr.n, 0);  /* nothing held: nothing posted */
    ck_assert_int_eq(ld_client_track(c, "a", ANN, NULL), 0);
    while (evr.n < 1)
        event_base_loop(B, EVLOOP_ONCE);
    run_for(100);
    ck_assert_int_eq(evr.n, 1);
    ck_assert_int_eq(evr_count(0, "custom"), 1);
    event_free(ev);
    evr_client_done(c);
}
END_TEST

START_TEST(test_context_key_lru_of_one_and_of_int_max)
{
    ld_context *a = ld_test_ctx_of("{'key': 'a'}");
    ld_context *b = ld_test_ctx_of("{'key': 'b'}");
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_context_keys(cfg, 1, 3600000), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ld_context *order[] = {a, a, b, a, a, b};
    for (int i = 0; i < 6; i++)
        json_eval(c, "plain", order[i]);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "index"), 4); /* a b a b */
    ck_assert_int_eq(evr_stats(c).deduplicated, 2);
    evr_client_done(c);

    /* INT_MAX keys: no INT_MAX-sized allocation up front; and an interval
     * of INT64_MAX ms: never forgotten (the timer must not overflow). */
    struct {
        int keys;
        int64_t ms;
    } cases[] = {{INT_MAX, 3600000}, {1000, INT64_MAX}};
    for (int k = 0; k < 2; k++) {
        cfg = evr_config();
        ck_assert_int_eq(ld_events_config_set_context_keys(cfg, cases[k].keys, cases[k].ms), 0);
        c = client_with(NULL, cfg);
        ld_events_config_free(cfg);
        for (int i = 0; i < 6; i++)
            json_eval(c, "plain", order[i]);
        ck_assert(evr_flush(c));
        ck_assert_msg(evr_count(k + 1, "index") == 2, "case %d: %zu index events", k,
                      evr_count(k + 1, "index"));
        ck_assert_int_eq(evr_stats(c).deduplicated, 4);
        evr_client_done(c);
    }
    ld_context_unref(a);
    ld_context_unref(b);
}
END_TEST

START_TEST(test_context_key_lru_keeps_its_order_while_it_grows)
{
    enum { CAP = 300 };
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_context_keys(cfg, CAP, 3600000), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ld_context *x[CAP + 1];
    for (int i = 0; i <= CAP; i++) {
        char text[64];
        snprintf(text, sizeof text, "{'key': 'c%d'}", i);
        x[i] = ld_test_ctx_of(text);
    }
    for (int i = 0; i < CAP; i++) /* the LRU grows past its first size */
        json_eval(c, "plain", x[i]);
    for (int i = 0; i < CAP; i++) /* all known still */
        json_eval(c, "plain", x[i]);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "index"), CAP);
    ck_assert_int_eq(evr_stats(c).deduplicated, CAP);
    json_eval(c, "plain", x[CAP]); /* full: c0, the least recent, goes */
    json_eval(c, "plain", x[1]);   /* known */
    json_eval(c, "plain", x[0]);   /* new again: c2 goes */
    json_eval(c, "plain", x[2]);   /* new again */
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(1, "index"), 3);
    const char *want[] = {"c300", "c0", "c2"};
    for (int i = 0; i < 3; i++) {
        json_t *ctx = json_object_get(evr_event_of(1, "index", i), "context");
        ck_assert_str_eq(json_string_value(json_object_get(ctx, "key")), want[i]);
    }
    for (int i = 0; i <= CAP; i++)
        ld_context_unref(x[i]);
    evr_client_done(c);
}
END_TEST

START_TEST(test_evaluations_pending_on_the_store_when_the_client_closes)
{
    enum { N = 50 };
    ld_store *store = ld_mock_store_new(B);
    ck_assert_ptr_nonnull(store);
    ld_client_options *o = ld_client_options_new();
    json_t *data = ld_test_data_of(FLAGS, NULL);
    ck_assert_int_eq(ld_client_options_add_initializer(o, ld_test_initializer_of(data)), 0);
    json_decref(data);
    ck_assert_int_eq(ld_client_options_set_store(o, store), 0);
    ld_net_config *n = ld_net_config_new(KEY);
    ck_assert_int_eq(ld_net_config_set_events_uri(n, evr.url), 0);
    ck_assert_int_eq(ld_client_options_set_net_config(o, n), 0);
    ld_net_config_free(n);
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_client_options_set_events_config(o, cfg), 0);
    ld_events_config_free(cfg);
    ld_client *c = ld_client_new(B, o);
    ld_client_options_free(o);
    ck_assert_ptr_nonnull(c);
    ld_test_await_ok(ld_client_ready(c));
    ld_future *f[N];
    for (int i = 0; i < N; i++)
        f[i] = ld_client_bool_variation(c, "tracked", ANN, false);
    int pending = 0;
    for (int i = 0; i < N; i++)
        pending += ld_future_is_pending(f[i]);
    ck_assert_int_eq(pending, N); /* the mock store answers from the loop */
    ld_future *closed = ld_client_close(c);
    for (int i = 0; i < N; i++) {
        ld_future *g = ld_test_fulfilled(f[i]); /* issued before: complete as usual */
        ck_assert(ld_future_bool(g));
        ld_future_unref(g);
    }
    ld_test_await_ok(closed);
    int posted = evr.n;
    run_for(50);
    ck_assert_int_eq(evr.n, posted); /* nothing after close */
    ld_events_stats st = evr_stats(c);
    ck_assert_msg(st.buffered == 0, "%llu events held forever after close (%d pending at close)",
                  (unsigned long long)st.buffered, pending);
    ck_assert_int_eq(st.in_flight, 0);
    evr_client_done(c);
    ld_store_free(store);
    evr_drain();
}
END_TEST

START_TEST(test_data_with_nul_and_odd_strings_round_trips_gzip_and_plain)
{
    for (int gz = 0; gz < 2; gz++) {
        ld_events_config *cfg = evr_config();
        ck_assert_int_eq(ld_events_config_set_gzip(cfg, gz), 0);
        ld_client *c = client_with(NULL, cfg);
        ld_events_config_free(cfg);
        json_t *data = json_object();
        json_object_set_new(data, "nul", json_stringn("a\0b", 3));
        json_object_set_new(data, "ctl", json_string("\x01\x1f\x7f\"\\/\u2028"));
        json_object_set_new(data, "k\"ey\n", json_real(1e300));
        json_object_set_new(data, "neg", json_integer(INT64_MIN));
        ck_assert_int_eq(ld_client_track_metric(c, "odd", ANN, data, -0.0), 0);
        ck_assert(evr_flush(c));
        json_t *got = json_object_get(evr_event_of(gz, "custom", 0), "data");
        char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
        ck_assert_msg(json_equal(got, data), "gzip %d: %s", gz, g);
        free(g);
        json_decref(data);
        evr_client_done(c);
    }
}
END_TEST

START_TEST(test_capacity_1_keeps_one_event_and_the_summary)
{
    int warned = 0;
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_capacity(cfg, 1), 0);
    ck_assert_int_eq(ld_events_config_set_warning_fn(cfg, NULL, &warned), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ck_assert_int_eq(ld_client_identify(c, ANN), 0);
    ck_assert_int_eq(ld_client_track(c, "a", ANN, NULL), LD_EBUSY);
    for (int i = 0; i < 100; i++)
        json_eval(c, "tracked", ANN); /* feature events dropped, counted */
    ld_events_stats st = evr_stats(c);
    ck_assert_int_eq(st.buffered, 1);
    ck_assert_int_eq(st.dropped, 101);
    ck_assert(evr_flush(c));
    ck_assert_int_eq(json_array_size(evr_events(0)), 2); /* identify, summary */
    json_t *ctr = json_array_get(
        json_object_get(
            json_object_get(json_object_get(evr_event_of(0, "summary", 0), "features"), "tracked"),
            "counters"),
        0);
    ck_assert_int_eq(json_integer_value(json_object_get(ctr, "count")), 100);
    ck_assert_int_eq(ld_client_track(c, "b", ANN, NULL), 0); /* room again */
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(1, "custom"), 1);
    evr_client_done(c);
}
END_TEST

START_TEST(test_flushes_with_nothing_held_post_nothing)
{
    ld_client *c = client_with(NULL, NULL);
    for (int i = 0; i < 50; i++)
        ck_assert(evr_flush(c));
    ck_assert_int_eq(evr.n, 0);
    ld_test_await_ok(ld_client_close(c));
    ck_assert_int_eq(evr.n, 0);
    evr_client_done(c);
}
END_TEST

START_TEST(test_close_with_a_service_that_never_answers_gives_up_after_the_read_timeout)
{
    evr.hold = true;
    read_ms = 200;
    ld_client *c = client_with(NULL, NULL);
    ck_assert_int_eq(ld_client_track(c, "a", ANN, NULL), 0);
    time_t t0 = time(NULL);
    ld_future *closed = ld_client_close(c);
    ld_test_await_ok(closed); /* the post, a second, the retry: both time out */
    ck_assert_int_le(time(NULL) - t0, 5);
    ck_assert_int_eq(evr.n, 2);
    ld_events_stats st = evr_stats(c);
    ck_assert_int_eq(st.payloads_dropped, 1);
    ck_assert_int_eq(st.in_flight, 0);
    evr.hold = false;
    evr_release_held();
    evr_client_done(c);
}
END_TEST

START_TEST(test_close_while_a_flush_waits_for_room_sends_all_once_released)
{
    evr.hold = true;
    ld_client *c = client_with(NULL, NULL);
    ld_future *f[6];
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(ld_client_track(c, "k", ANN, NULL), 0);
        f[i] = ld_client_flush(c);
    }
    ck_assert_int_eq(ld_client_track(c, "last", ANN, NULL), 0);
    while (evr.n < 5)
        event_base_loop(B, EVLOOP_ONCE);
    ld_future *closed = ld_client_close(c);
    evr_drain();
    ck_assert(ld_future_is_pending(closed));
    evr.hold = false;
    evr_release_held();
    ld_test_await_ok(closed);
    for (int i = 0; i < 6; i++) {
        ck_assert(!ld_future_is_pending(f[i]));
        ck_assert_msg(ld_test_await_bool(f[i]), "flush %d", i);
    }
    size_t customs = 0;
    for (int i = 0; i < evr.n && i < EVR_MAX; i++)
        customs += evr_count(i, "custom");
    ck_assert_int_eq(customs, 7); /* each once, the last one too */
    evr_client_done(c);
}
END_TEST

/* A warning function that frees the client: it is called from the loop,
 * never inside the call that dropped the event (which would go on reading
 * the client), whether an evaluation, a track or an identify dropped it. */
static ld_client *free_me;
static void free_on_warning(const char *message, void *arg)
{
    (void)message;
    (void)arg;
    ld_client *c = free_me;
    free_me = NULL;
    ld_client_free(c);
}

START_TEST(test_free_inside_the_warning_function_from_an_evaluation)
{
    for (int how = 0; how < 3; how++) {
        ld_events_config *cfg = evr_config();
        ck_assert_int_eq(ld_events_config_set_capacity(cfg, 1), 0);
        ck_assert_int_eq(ld_events_config_set_warning_fn(cfg, free_on_warning, NULL), 0);
        ld_client *c = free_me = client_with(NULL, cfg);
        ld_events_config_free(cfg);
        /* full; then the feature event, the custom event or the identify
         * event is dropped and warns */
        if (how == 0) {
            ld_future *f = ld_client_bool_variation(c, "tracked", ANN, false);
            ld_test_wait(f);
            ck_assert(!ld_future_is_pending(f));
            ld_future_unref(f);
        } else {
            /* a track's index event fills it; an identify makes none */
            if (how == 2)
                ck_assert_int_eq(ld_client_identify(c, ANN), 0);
            ck_assert_int_eq(how == 1 ? ld_client_track(c, "b", ANN, NULL)
                                      : ld_client_identify(c, ANN),
                             LD_EBUSY);
            ck_assert_ptr_nonnull(free_me); /* still there after the call */
        }
        evr_drain();
        ck_assert_ptr_null(free_me);
    }
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Redaction                                                                 */

START_TEST(test_odd_private_attribute_references)
{
    ld_events_config *cfg = evr_config();
    int r1 = ld_events_config_add_private_attribute(cfg, "");
    int r2 = ld_events_config_add_private_attribute(cfg, "/");
    ck_assert(r1 == 0 || r1 == LD_EINVAL);
    ck_assert(r2 == 0 || r2 == LD_EINVAL);
    ck_assert_int_eq(ld_events_config_add_private_attribute(cfg, "~2"), 0);    /* a name */
    ck_assert_int_eq(ld_events_config_add_private_attribute(cfg, "/a~1b"), 0); /* "a/b" */
    ck_assert_int_eq(ld_events_config_add_private_attribute(cfg, "/~2"), 0);   /* invalid escape */
    ck_assert_int_eq(ld_events_config_add_private_attribute(cfg, "/x/"), 0);   /* empty part */
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ld_context *ctx = ld_test_ctx_of("{'kind': 'user', 'key': 'k', 'name': 'n', '~2': 1,"
                                     " 'a/b': 2, 'x': {'': 3, 'y': 4}}");
    ck_assert_int_eq(ld_client_identify(c, ctx), 0);
    ck_assert(evr_flush(c));
    json_t *got = json_object_get(evr_event_of(0, "identify", 0), "context");
    json_t *want = ld_test_j("{'kind': 'user', 'key': 'k', 'name': 'n', 'x': {'': 3, 'y': 4},"
                             " '_meta': {'redactedAttributes': ['~2', '/a~1b']}}");
    char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
    ck_assert_msg(json_equal(got, want), "got %s", g);
    free(g);
    json_decref(want);
    ld_context_unref(ctx);
    evr_client_done(c);
}
END_TEST

START_TEST(test_a_context_s_own_odd_private_attributes)
{
    ld_client *c = client_with(NULL, NULL);
    const char *why = NULL;
    json_t *j = ld_test_j("{'kind': 'user', 'key': 'k', '~2': 1, 'a': {'b': 2, 'c': 3},"
                          " '_meta': {'privateAttributes': ['/', '~2', '/a/b', '/a/b/c', '/zz']}}");
    ld_context *ctx = ld_context_from_json(j, &why);
    json_decref(j);
    ck_assert_msg(ctx != NULL, "refused: %s", why ? why : "?");
    ck_assert_int_eq(ld_client_identify(c, ctx), 0);
    ck_assert(evr_flush(c));
    json_t *got = json_object_get(evr_event_of(0, "identify", 0), "context");
    json_t *want = ld_test_j("{'kind': 'user', 'key': 'k', 'a': {'c': 3},"
                             " '_meta': {'redactedAttributes': ['~2', '/a/b']}}");
    char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
    ck_assert_msg(json_equal(got, want), "got %s", g);
    free(g);
    json_decref(want);
    ld_context_unref(ctx);
    evr_client_done(c);
}
END_TEST

START_TEST(test_omit_anonymous_with_a_multi_context_anonymous_in_every_kind)
{
    ld_events_config *cfg = evr_config();
    ck_assert_int_eq(ld_events_config_set_omit_anonymous_contexts(cfg, true), 0);
    ld_client *c = client_with(NULL, cfg);
    ld_events_config_free(cfg);
    ld_context *multi = ld_test_ctx_of("{'kind': 'multi', 'user': {'key': 'u', 'anonymous': true},"
                                       " 'org': {'key': 'o', 'anonymous': true, 'name': 'O'}}");
    ck_assert_int_eq(ld_client_identify(c, multi), 0); /* nothing to send */
    json_eval(c, "tracked", multi);                    /* no index event */
    ck_assert(evr_flush(c));
    ck_assert_int_eq(evr_count(0, "identify"), 0);
    ck_assert_int_eq(evr_count(0, "index"), 0);
    ck_assert_int_eq(evr_count(0, "feature"), 1);
    json_t *fc = json_object_get(evr_event_of(0, "feature", 0), "context");
    ck_assert_ptr_null(json_object_get(json_object_get(fc, "org"), "name")); /* redacted */
    ck_assert_int_eq(evr_stats(c).buffered, 0);
    ld_context_unref(multi);
    evr_client_done(c);
}
END_TEST

Suite *ld_suite_client_events_attack(void)
{
    Suite *s = suite_create("client_events_attack");
    TCase *tc = tcase_create("attack");
    tcase_add_checked_fixture(tc, attack_up, attack_down);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_close_inside_the_warning_function);
    tcase_add_test(tc, test_close_inside_a_flush_callback_sends_what_came_after);
    tcase_add_test(tc, test_double_close_then_flush_track_identify_refused);
    tcase_add_test(tc, test_free_right_after_track_flush_and_close);
    tcase_add_test(tc, test_free_while_a_flush_waits_for_room_with_five_posts_held);
    tcase_add_test(tc, test_dead_service_drops_the_payload_after_the_retry);
    tcase_add_test(tc, test_413_every_time_is_dropped_without_a_retry_and_sending_goes_on);
    tcase_add_test(tc, test_503_every_time_is_retried_once_per_payload);
    tcase_add_test(tc, test_capacity_holds_under_100000_tracks_and_flushes_with_a_held_service);
    tcase_add_test(tc, test_huge_custom_data_and_key_go_whole_plain_and_gzip);
    tcase_add_test(tc, test_stats_add_up_after_a_mixed_run);
    tcase_add_test(tc, test_contexts_with_odd_keys_and_many_kinds_are_told_apart);
    tcase_add_test(tc, test_10000_flags_in_one_summary);
    tcase_add_test(tc, test_a_1ms_flush_interval_starves_nothing_and_posts_only_what_is_held);
    tcase_add_test(tc, test_context_key_lru_of_one_and_of_int_max);
    tcase_add_test(tc, test_context_key_lru_keeps_its_order_while_it_grows);
    tcase_add_test(tc, test_evaluations_pending_on_the_store_when_the_client_closes);
    tcase_add_test(tc, test_data_with_nul_and_odd_strings_round_trips_gzip_and_plain);
    tcase_add_test(tc, test_capacity_1_keeps_one_event_and_the_summary);
    tcase_add_test(tc, test_flushes_with_nothing_held_post_nothing);
    tcase_add_test(tc,
                   test_close_with_a_service_that_never_answers_gives_up_after_the_read_timeout);
    tcase_add_test(tc, test_close_while_a_flush_waits_for_room_sends_all_once_released);
    tcase_add_test(tc, test_odd_private_attribute_references);
    tcase_add_test(tc, test_a_context_s_own_odd_private_attributes);
    tcase_add_test(tc, test_omit_anonymous_with_a_multi_context_anonymous_in_every_kind);
    tcase_add_test(tc, test_free_inside_the_warning_function_from_an_evaluation);
    suite_add_tcase(s, tc);
    return s;
}
