/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The mocks of the interfaces around the store (lib/testing/mock_*.c, other
 * than the mock store): what they answer, what they record, how they
 * refuse what is not theirs, ordering and closing. */
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <ldasync/testing.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

/* ---- helpers -------------------------------------------------------------- */

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* An event processor that is no mock, to hand the accessors. */
static int plain_send(void *impl, json_t *event)
{
    (void)impl;
    (void)event;
    return 0;
}

static void plain_flush(void *impl, ld_future *out)
{
    (void)impl;
    ld_future_fulfill_bool(out, true);
    ld_future_unref(out);
}

static const struct ld_event_processor_ops plain_ops = {
    .version = LD_EVENT_PROCESSOR_OPS_VERSION,
    .send_event = plain_send,
    .flush = plain_flush,
};

/* ---- event processor ------------------------------------------------------ */

START_TEST(test_ep_new)
{
    ck_assert_ptr_null(ld_mock_event_processor_new(NULL));
    ld_event_processor *ep = ld_mock_event_processor_new(B);
    ck_assert_ptr_nonnull(ep);
    ck_assert_int_eq(ld_mock_event_processor_event_count(ep), 0);
    ck_assert_ptr_null(ld_mock_event_processor_event(ep, 0));
    ck_assert_int_eq(ld_mock_event_processor_flush_count(ep), 0);
    ck_assert_int_eq(ld_mock_event_processor_closed(ep), 0);
    ld_event_processor_free(ep);
}
END_TEST

START_TEST(test_ep_records_events_by_reference_in_order)
{
    ld_event_processor *ep = ld_mock_event_processor_new(B);
    json_t *e1 = json_pack("{s:s}", "kind", "feature");
    json_t *e2 = json_pack("{s:s}", "kind", "identify");
    ck_assert_int_eq(ld_event_processor_send_event(ep, e1), 0);
    ck_assert_int_eq(ld_event_processor_send_event(ep, e2), 0);
    ck_assert_int_eq(ld_event_processor_send_event(ep, e1), 0);
    json_decref(e1); /* the mock keeps its own references */
    json_decref(e2);
    ck_assert_int_eq(ld_mock_event_processor_event_count(ep), 3);
    ck_assert_ptr_eq(ld_mock_event_processor_event(ep, 0), e1);
    ck_assert_ptr_eq(ld_mock_event_processor_event(ep, 1), e2);
    ck_assert_ptr_eq(ld_mock_event_processor_event(ep, 2), e1);
    ck_assert_str_eq(
        json_string_value(json_object_get(ld_mock_event_processor_event(ep, 1), "kind")),
        "identify");
    ck_assert_ptr_null(ld_mock_event_processor_event(ep, 3));
    ld_event_processor_free(ep);
}
END_TEST

START_TEST(test_ep_refused_events_are_not_recorded)
{
    ld_event_processor *ep = ld_mock_event_processor_new(B);
    json_t *notobj = json_string("x");
    json_t *ev = json_object();
    ck_assert_int_eq(ld_event_processor_send_event(ep, notobj), LD_EINVAL);
    ck_assert_int_eq(ld_event_processor_send_event(ep, NULL), LD_EINVAL);
    ld_test_await_ok(ld_event_processor_close(ep));
    ck_assert_int_eq(ld_event_processor_send_event(ep, ev), LD_ECLOSED);
    ck_assert_int_eq(ld_mock_event_processor_event_count(ep), 0);
    json_decref(notobj);
    json_decref(ev);
    ld_event_processor_free(ep);
}
END_TEST

START_TEST(test_ep_flush_fulfils_true_and_is_counted)
{
    ld_event_processor *ep = ld_mock_event_processor_new(B);
    ld_future *f1 = ld_event_processor_flush(ep);
    ld_future *f2 = ld_event_processor_flush(ep);
    ld_test_watch(f1, 1);
    ld_test_watch(f2, 2);
    ck_assert_int_eq(ld_mock_event_processor_flush_count(ep), 2);
    ld_test_done(f1);
    ld_test_done(f2);
    ld_test_flush();
    ck_assert(ld_future_is_fulfilled(f1) && ld_future_bool(f1));
    ck_assert(ld_future_is_fulfilled(f2) && ld_future_bool(f2));
    ck_assert_int_eq(ld_test_n_order, 2);
    ck_assert_int_eq(ld_test_order[0], 1);
    ck_assert_int_eq(ld_test_order[1], 2);
    ld_future_unref(f1);
    ld_future_unref(f2);
    ld_event_processor_free(ep);
}
END_TEST

START_TEST(test_ep_close_then_flush_is_refused_and_not_counted)
{
    ld_event_processor *ep = ld_mock_event_processor_new(B);
    ld_test_await_ok(ld_event_processor_flush(ep));
    ld_test_await_ok(ld_event_processor_close(ep));
    ck_assert_int_eq(ld_mock_event_processor_closed(ep), 1);
    ld_test_expect_error(ld_event_processor_flush(ep), LD_ECLOSED, NULL);
    ld_test_await_ok(ld_event_processor_close(ep)); /* twice fulfils again */
    ck_assert_int_eq(ld_mock_event_processor_closed(ep), 1);
    ck_assert_int_eq(ld_mock_event_processor_flush_count(ep), 1);
    ld_event_processor_free(ep);
}
END_TEST

START_TEST(test_ep_clear_forgets_events_keeps_flush_count)
{
    ld_event_processor *ep = ld_mock_event_processor_new(B);
    json_t *e1 = json_object();
    json_t *e2 = json_object();
    ck_assert_int_eq(ld_event_processor_send_event(ep, e1), 0);
    ld_test_await_ok(ld_event_processor_flush(ep));
    ck_assert_int_eq(e1->refcount, 2);
    ck_assert_int_eq(ld_mock_event_processor_clear(ep), 0);
    ck_assert_int_eq(e1->refcount, 1); /* released */
    ck_assert_int_eq(ld_mock_event_processor_event_count(ep), 0);
    ck_assert_ptr_null(ld_mock_event_processor_event(ep, 0));
    ck_assert_int_eq(ld_mock_event_processor_flush_count(ep), 1);
    ck_assert_int_eq(ld_event_processor_send_event(ep, e2), 0);
    ck_assert_ptr_eq(ld_mock_event_processor_event(ep, 0), e2);
    json_decref(e1);
    json_decref(e2);
    ld_event_processor_free(ep);
}
END_TEST

START_TEST(test_ep_refuses_foreign_objects)
{
    ld_event_processor *plain = ld_event_processor_new(B, &plain_ops, NULL);
    ld_update_processor *other = ld_mock_update_processor_new(B, LD_MOCK_START_READY);
    ld_event_processor *not_ep = (ld_event_processor *)(void *)other;
    ld_event_processor *objs[] = {NULL, plain, not_ep};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(ld_mock_event_processor_event_count(objs[i]), LD_EINVAL);
        ck_assert_ptr_null(ld_mock_event_processor_event(objs[i], 0));
        ck_assert_int_eq(ld_mock_event_processor_flush_count(objs[i]), LD_EINVAL);
        ck_assert_int_eq(ld_mock_event_processor_closed(objs[i]), LD_EINVAL);
        ck_assert_int_eq(ld_mock_event_processor_clear(objs[i]), LD_EINVAL);
    }
    ld_event_processor_free(plain);
    ld_update_processor_free(other);
}
END_TEST

/* ---- update processor ----------------------------------------------------- */

START_TEST(test_up_new_bad_input)
{
    ck_assert_ptr_null(ld_mock_update_processor_new(NULL, LD_MOCK_START_READY));
    ck_assert_ptr_null(ld_mock_update_processor_new(B, (enum ld_mock_start)3));
    ck_assert_ptr_null(ld_mock_update_processor_new(B, (enum ld_mock_start) - 1));
}
END_TEST

START_TEST(test_up_ready_at_once_by_default)
{
    ld_update_processor *up = ld_mock_update_processor_new(B, LD_MOCK_START_READY);
    ck_assert(!ld_update_processor_initialized(up));
    ck_assert_int_eq(ld_mock_update_processor_start_count(up), 0);
    ld_future *f = ld_update_processor_start(up);
    ck_assert(ld_future_is_pending(f));             /* completed from the loop */
    ck_assert(ld_update_processor_initialized(up)); /* ready at once */
    ck_assert_int_eq(ld_mock_update_processor_start_count(up), 1);
    ld_test_await_ok(f);
    ck_assert_int_eq(ld_mock_update_processor_set_ready(up), LD_EALREADY);
    ck_assert_int_eq(ld_mock_update_processor_fail(up, LD_EIO), LD_EALREADY);
    ld_update_processor_free(up);
}
END_TEST

START_TEST(test_up_give_up_fulfils_not_initialized)
{
    ld_update_processor *up = ld_mock_update_processor_new(B, LD_MOCK_START_GIVE_UP);
    ld_test_await_ok(ld_update_processor_start(up));
    ck_assert(!ld_update_processor_initialized(up));
    ck_assert_int_eq(ld_mock_update_processor_start_count(up), 1);
    ld_update_processor_free(up);
}
END_TEST

START_TEST(test_up_hold_waits_for_set_ready)
{
    ld_update_processor *up = ld_mock_update_processor_new(B, LD_MOCK_START_HOLD);
    ld_future *f = ld_update_processor_start(up);
    ld_test_flush();
    ck_assert(ld_future_is_pending(f));
    ck_assert(!ld_update_processor_initialized(up));
    ck_assert_int_eq(ld_mock_update_processor_set_ready(up), 0);
    ck_assert(ld_update_processor_initialized(up));
    ld_test_await_ok(f);
    ck_assert_int_eq(ld_mock_update_processor_set_ready(up), LD_EALREADY);
    ld_update_processor_free(up);
}
END_TEST

START_TEST(test_up_hold_then_fail_rejects_with_the_code)
{
    ld_update_processor *up = ld_mock_update_processor_new(B, LD_MOCK_START_HOLD);
    ld_future *f = ld_update_processor_start(up);
    ck_assert_int_eq(ld_mock_update_processor_fail(up, LD_EIO), 0);
    ld_test_expect_error(f, LD_EIO, NULL);
    ck_assert(!ld_update_processor_initialized(up));
    ck_assert_int_eq(ld_mock_update_processor_fail(up, LD_EIO), LD_EALREADY);
    ld_update_processor_free(up);
}
END_TEST

START_TEST(test_up_scripted_before_start)
{
    ld_update_processor *failing = ld_mock_update_processor_new(B, LD_MOCK_START_READY);
    ck_assert_int_eq(ld_mock_update_processor_fail(failing, LD_ETIMEDOUT), 0);
    ld_future *f = ld_update_processor_start(failing);
    ld_test_expect_error(f, LD_ETIMEDOUT, NULL); /* at the loop's first pass */
    ck_assert(!ld_update_processor_initialized(failing));

    ld_update_processor *held = ld_mock_update_processor_new(B, LD_MOCK_START_HOLD);
    ck_assert_int_eq(ld_mock_update_processor_set_ready(held), 0);
    f = ld_update_processor_start(held);
    ld_test_await_ok(f); /* ready before start: the start needs no more */
    ck_assert(ld_update_processor_initialized(held));
    ld_update_processor_free(failing);
    ld_update_processor_free(held);
}
END_TEST

START_TEST(test_up_second_start_is_refused_and_not_counted)
{
    ld_update_processor *up = ld_mock_update_processor_new(B, LD_MOCK_START_READY);
    ld_test_await_ok(ld_update_processor_start(up));
    ld_test_expect_error(ld_update_processor_start(up), LD_EINVAL, NULL);
    ck_assert_int_eq(ld_mock_update_processor_start_count(up), 1);
    ld_update_processor_free(up);
}
END_TEST

START_TEST(test_up_close_rejects_a_held_start)
{
    ld_update_processor *up = ld_mock_update_processor_new(B, LD_MOCK_START_HOLD);
    ld_future *f = ld_update_processor_start(up);
    ld_future *c = ld_update_processor_stop(up);
    ld_test_watch(f, 1);
    ld_test_watch(c, 2);
    ld_test_expect_error(f, LD_ECLOSED, NULL);
    ld_test_await_ok(c);
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 2);
    ck_assert_int_eq(ld_test_order[0], 1); /* the start before the close */
    ck_assert_int_eq(ld_mock_update_processor_stopped(up), 1);
    ck_assert_int_eq(ld_mock_update_processor_set_ready(up), LD_ECLOSED);
    ck_assert_int_eq(ld_mock_update_processor_fail(up, LD_EIO), LD_ECLOSED);
    ck_assert(!ld_update_processor_initialized(up));
    ld_test_expect_error(ld_update_processor_start(up), LD_ECLOSED, NULL);
    ld_update_processor_free(up);
}
END_TEST

START_TEST(test_up_close_after_ready)
{
    ld_update_processor *up = ld_mock_update_processor_new(B, LD_MOCK_START_READY);
    ck_assert_int_eq(ld_mock_update_processor_stopped(up), 0);
    ld_test_await_ok(ld_update_processor_start(up));
    ld_test_await_ok(ld_update_processor_stop(up));
    ck_assert_int_eq(ld_mock_update_processor_stopped(up), 1);
    ck_assert(!ld_update_processor_initialized(up));
    ld_update_processor_free(up);
}
END_TEST

START_TEST(test_up_free_cancels_a_held_start)
{
    ld_update_processor *up = ld_mock_update_processor_new(B, LD_MOCK_START_HOLD);
    ld_future *f = ld_update_processor_start(up);
    ld_update_processor_free(up);
    ld_test_expect_error(f, LD_ECANCELED, NULL);
}
END_TEST

START_TEST(test_up_bad_input)
{
    ld_update_processor *up = ld_mock_update_processor_new(B, LD_MOCK_START_HOLD);
    ck_assert_int_eq(ld_mock_update_processor_fail(up, 0), LD_EINVAL);
    ck_assert_int_eq(ld_mock_update_processor_fail(up, 1), LD_EINVAL);
    ld_event_processor *other = ld_mock_event_processor_new(B);
    ld_update_processor *not_up = (ld_update_processor *)(void *)other;
    ld_update_processor *objs[] = {NULL, not_up};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(ld_mock_update_processor_set_ready(objs[i]), LD_EINVAL);
        ck_assert_int_eq(ld_mock_update_processor_fail(objs[i], LD_EIO), LD_EINVAL);
        ck_assert_int_eq(ld_mock_update_processor_start_count(objs[i]), LD_EINVAL);
        ck_assert_int_eq(ld_mock_update_processor_stopped(objs[i]), LD_EINVAL);
    }
    /* nothing changed: the start is still held */
    ld_future *f = ld_update_processor_start(up);
    ld_test_flush();
    ck_assert(ld_future_is_pending(f));
    ld_future_unref(f);
    ld_event_processor_free(other);
    ld_update_processor_free(up);
}
END_TEST

/* ---- big segment store ---------------------------------------------------- */

static ld_big_segment_store *bss;

static void bss_setup(void)
{
    ld_test_setup();
    bss = ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    ck_assert_ptr_nonnull(bss);
}

static void bss_teardown(void)
{
    ld_big_segment_store_free(bss);
    bss = NULL;
    ld_test_teardown();
}

/* The metadata time, failing the test if it was rejected. */
static int64_t metadata(void)
{
    ld_future *f = ld_test_done(ld_big_segment_store_get_metadata(bss));
    ck_assert_msg(ld_future_is_fulfilled(f), "rejected: %s", ld_future_error_message(f));
    int64_t t = ld_future_int(f);
    ld_future_unref(f);
    return t;
}

/* The membership of `hash`: a new reference, or NULL. */
static json_t *membership(const char *hash)
{
    ld_future *f = ld_test_done(ld_big_segment_store_get_membership(bss, hash));
    ck_assert_msg(ld_future_is_fulfilled(f), "rejected: %s", ld_future_error_message(f));
    json_t *m = json_incref(ld_future_json(f));
    ld_future_unref(f);
    return m;
}

START_TEST(test_bss_new)
{
    ck_assert_ptr_null(ld_mock_big_segment_store_new(NULL, LD_MOCK_BIG_SEGMENTS_PRESET_NONE));
    ck_assert_ptr_null(ld_mock_big_segment_store_new(B, (enum ld_mock_big_segments_preset)4));
    ck_assert_str_eq(ld_big_segment_store_describe(bss), "mock");
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 0);
    ck_assert_int_eq(ld_mock_big_segment_store_metadata_query_count(bss), 0);
    ck_assert_ptr_null(ld_mock_big_segment_store_membership_query(bss, 0));
}
END_TEST

START_TEST(test_bss_presets)
{
    ck_assert_int_eq(
        ld_mock_big_segment_store_set_preset(bss, (enum ld_mock_big_segments_preset)_i), 0);
    int64_t before = wall_ms();
    ld_future *f = ld_test_done(ld_big_segment_store_get_metadata(bss));
    int64_t after = wall_ms();
    int64_t t = ld_future_is_fulfilled(f) ? ld_future_int(f) : 0;
    switch (_i) {
    case LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE:
        ck_assert(ld_future_is_fulfilled(f));
        ck_assert(t >= before && t <= after);
        ck_assert(!ld_big_segment_is_stale(t, after, 120000));
        break;
    case LD_MOCK_BIG_SEGMENTS_PRESET_STALE:
        ck_assert(ld_future_is_fulfilled(f));
        ck_assert(t >= before - 86400000 && t <= after - 86400000);
        ck_assert(ld_big_segment_is_stale(t, after, 120000));
        break;
    case LD_MOCK_BIG_SEGMENTS_PRESET_NONE:
        ck_assert(ld_future_is_fulfilled(f));
        ck_assert(t == LD_BIG_SEGMENT_TIME_UNKNOWN);
        break;
    default:
        ck_assert_int_eq(ld_future_error(f), LD_ESTORE);
        break;
    }
    ld_future_unref(f);
    ck_assert_int_eq(ld_mock_big_segment_store_metadata_query_count(bss), 1);
    /* the preset is about metadata only */
    json_t *m = membership("h");
    ck_assert_ptr_null(m);
}
END_TEST

START_TEST(test_bss_preset_changes_later_calls)
{
    ck_assert_int_gt(metadata(), 0);
    ck_assert_int_eq(ld_mock_big_segment_store_set_preset(bss, LD_MOCK_BIG_SEGMENTS_PRESET_ERROR),
                     0);
    ld_test_expect_error(ld_big_segment_store_get_metadata(bss), LD_ESTORE, NULL);
    ck_assert_int_eq(ld_mock_big_segment_store_set_preset(bss, LD_MOCK_BIG_SEGMENTS_PRESET_NONE),
                     0);
    ck_assert_int_eq(metadata(), LD_BIG_SEGMENT_TIME_UNKNOWN);
    ck_assert_int_eq(ld_mock_big_segment_store_metadata_query_count(bss), 3);
    ck_assert_int_eq(ld_mock_big_segment_store_set_preset(bss, (enum ld_mock_big_segments_preset)4),
                     LD_EINVAL);
    ck_assert_int_eq(metadata(), LD_BIG_SEGMENT_TIME_UNKNOWN); /* unchanged */
}
END_TEST

START_TEST(test_bss_membership_set_replace_forget)
{
    const char *inc[] = {"seg1.g1"};
    const char *exc[] = {"seg2.g2"};
    json_t *m1, *m2;
    ck_assert_int_eq(ld_big_segment_membership_from_refs(inc, 1, exc, 1, &m1, NULL), 0);
    ck_assert_int_eq(ld_big_segment_membership_from_refs(exc, 1, NULL, 0, &m2, NULL), 0);
    ck_assert_int_eq(ld_mock_big_segment_store_set_membership(bss, "hash1", m1), 0);
    json_t *got = membership("hash1");
    ck_assert_ptr_eq(got, m1); /* shared, not copied */
    json_decref(got);
    ck_assert_ptr_null(membership("hash2"));
    ck_assert_int_eq(ld_mock_big_segment_store_set_membership(bss, "hash1", m2), 0);
    got = membership("hash1");
    ck_assert_ptr_eq(got, m2);
    ck_assert(json_is_true(json_object_get(got, "seg2.g2")));
    json_decref(got);
    ck_assert_int_eq(ld_mock_big_segment_store_set_membership(bss, "hash1", NULL), 0);
    ck_assert_ptr_null(membership("hash1"));
    ck_assert_int_eq(ld_mock_big_segment_store_set_membership(bss, "never-set", NULL), 0);
    json_decref(m1);
    json_decref(m2);
}
END_TEST

START_TEST(test_bss_membership_queries_are_recorded_in_order)
{
    const char *hashes[] = {"a", "b", "a"};
    ld_future *fs[3];
    for (int i = 0; i < 3; i++)
        fs[i] = ld_big_segment_store_get_membership(bss, hashes[i]);
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_str_eq(ld_mock_big_segment_store_membership_query(bss, (size_t)i), hashes[i]);
        ld_test_await_ok(fs[i]);
    }
    ck_assert_ptr_null(ld_mock_big_segment_store_membership_query(bss, 3));
    ck_assert_int_eq(ld_mock_big_segment_store_metadata_query_count(bss), 0);
}
END_TEST

START_TEST(test_bss_refused_queries_are_not_recorded)
{
    ld_test_expect_error(ld_big_segment_store_get_membership(bss, ""), LD_EINVAL, NULL);
    ld_test_expect_error(ld_big_segment_store_get_membership(bss, NULL), LD_EINVAL, NULL);
    ld_test_await_ok(ld_big_segment_store_close(bss));
    ld_test_expect_error(ld_big_segment_store_get_membership(bss, "a"), LD_ECLOSED, NULL);
    ld_test_expect_error(ld_big_segment_store_get_metadata(bss), LD_ECLOSED, NULL);
    ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(bss), 0);
    ck_assert_int_eq(ld_mock_big_segment_store_metadata_query_count(bss), 0);
}
END_TEST

START_TEST(test_bss_set_membership_bad_input)
{
    json_t *good = json_pack("{s:b}", "s.g1", 1);
    json_t *not_obj = json_true();
    json_t *not_bool = json_pack("{s:b, s:i}", "s.g1", 1, "s.g2", 1);
    ck_assert_int_eq(ld_mock_big_segment_store_set_membership(bss, "h", good), 0);
    ck_assert_int_eq(ld_mock_big_segment_store_set_membership(bss, NULL, good), LD_EINVAL);
    ck_assert_int_eq(ld_mock_big_segment_store_set_membership(bss, "", good), LD_EINVAL);
    ck_assert_int_eq(ld_mock_big_segment_store_set_membership(bss, "h", not_obj), LD_EINVAL);
    ck_assert_int_eq(ld_mock_big_segment_store_set_membership(bss, "h", not_bool), LD_EINVAL);
    json_t *got = membership("h"); /* unchanged */
    ck_assert_ptr_eq(got, good);
    json_decref(got);
    json_decref(good);
    json_decref(not_obj);
    json_decref(not_bool);
}
END_TEST

START_TEST(test_bss_refuses_foreign_objects)
{
    ld_synchronizer *other = ld_mock_synchronizer_new(B, NULL);
    ld_big_segment_store *not_bss = (ld_big_segment_store *)(void *)other;
    ld_big_segment_store *objs[] = {NULL, not_bss};
    json_t *m = json_object();
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(
            ld_mock_big_segment_store_set_preset(objs[i], LD_MOCK_BIG_SEGMENTS_PRESET_NONE),
            LD_EINVAL);
        ck_assert_int_eq(ld_mock_big_segment_store_set_membership(objs[i], "h", m), LD_EINVAL);
        ck_assert_int_eq(ld_mock_big_segment_store_membership_query_count(objs[i]), LD_EINVAL);
        ck_assert_ptr_null(ld_mock_big_segment_store_membership_query(objs[i], 0));
        ck_assert_int_eq(ld_mock_big_segment_store_metadata_query_count(objs[i]), LD_EINVAL);
    }
    ck_assert_int_eq(m->refcount, 1);
    json_decref(m);
    ld_synchronizer_free(other);
}
END_TEST

/* ---- synchronizer --------------------------------------------------------- */

static ld_fdv2_update *update(enum ld_data_source_state state)
{
    ld_fdv2_update *u = ld_fdv2_update_new(state, ld_fdv2_change_set_no_changes(), NULL, "env");
    ck_assert_ptr_nonnull(u);
    return u;
}

/* Waits for `f` (stolen), checks it yields `u`. */
static void await_update(ld_future *f, const ld_fdv2_update *u)
{
    ld_test_done(f);
    ck_assert_msg(ld_future_is_fulfilled(f), "rejected: %s", ld_future_error_message(f));
    ck_assert_ptr_eq(ld_fdv2_future_update(f), u);
    ld_future_unref(f);
}

START_TEST(test_sync_new_and_name)
{
    ck_assert_ptr_null(ld_mock_synchronizer_new(NULL, "x"));
    ld_synchronizer *s = ld_mock_synchronizer_new(B, NULL);
    char name[] = "streaming";
    ld_synchronizer *named = ld_mock_synchronizer_new(B, name);
    name[0] = 'S'; /* copied */
    ck_assert_str_eq(ld_synchronizer_name(s), "mock");
    ck_assert_str_eq(ld_synchronizer_name(named), "streaming");
    ck_assert_int_eq(ld_mock_synchronizer_next_count(s), 0);
    ck_assert_int_eq(ld_mock_synchronizer_stopped(s), 0);
    ld_synchronizer_free(s);
    ld_synchronizer_free(named);
}
END_TEST

START_TEST(test_sync_yields_the_script_in_order)
{
    ld_synchronizer *s = ld_mock_synchronizer_new(B, NULL);
    ld_fdv2_update *u1 = update(LD_DATA_SOURCE_STATE_VALID);
    ld_fdv2_update *u2 = update(LD_DATA_SOURCE_STATE_INTERRUPTED);
    ck_assert_int_eq(ld_mock_synchronizer_push_update(s, u1), 0);
    ck_assert_int_eq(ld_mock_synchronizer_push_error(s, LD_EIO), 0);
    ck_assert_int_eq(ld_mock_synchronizer_push_update(s, u2), 0);
    await_update(ld_synchronizer_next(s), u1);
    ld_test_expect_error(ld_synchronizer_next(s), LD_EIO, NULL);
    ld_future *f = ld_synchronizer_next(s);
    ld_test_done(f);
    ck_assert_int_eq(ld_fdv2_update_state(ld_fdv2_future_update(f)),
                     LD_DATA_SOURCE_STATE_INTERRUPTED);
    await_update(f, u2);
    ck_assert_int_eq(ld_mock_synchronizer_next_count(s), 3);
    ld_synchronizer_free(s);
}
END_TEST

START_TEST(test_sync_next_waits_for_a_push)
{
    ld_synchronizer *s = ld_mock_synchronizer_new(B, NULL);
    ld_future *fs[3];
    for (int i = 0; i < 3; i++) {
        fs[i] = ld_synchronizer_next(s);
        ld_test_watch(fs[i], i);
    }
    ld_test_flush();
    for (int i = 0; i < 3; i++)
        ck_assert(ld_future_is_pending(fs[i]));
    ck_assert_int_eq(ld_mock_synchronizer_next_count(s), 3);
    ld_fdv2_update *u0 = update(LD_DATA_SOURCE_STATE_VALID);
    ld_fdv2_update *u2 = update(LD_DATA_SOURCE_STATE_VALID);
    ck_assert_int_eq(ld_mock_synchronizer_push_update(s, u0), 0);
    ck_assert_int_eq(ld_mock_synchronizer_push_error(s, LD_EPARSE), 0);
    ld_test_flush();
    ck_assert(ld_future_is_pending(fs[2]));
    ck_assert_int_eq(ld_mock_synchronizer_push_update(s, u2), 0);
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ld_test_order[i], i);
    await_update(fs[0], u0);
    ld_test_expect_error(fs[1], LD_EPARSE, NULL);
    await_update(fs[2], u2);
    ld_synchronizer_free(s);
}
END_TEST

START_TEST(test_sync_end_rejects_every_later_next)
{
    ld_synchronizer *s = ld_mock_synchronizer_new(B, NULL);
    ld_fdv2_update *u = update(LD_DATA_SOURCE_STATE_VALID);
    ck_assert_int_eq(ld_mock_synchronizer_push_update(s, u), 0);
    ck_assert_int_eq(ld_mock_synchronizer_end(s), 0);
    await_update(ld_synchronizer_next(s), u);
    ld_test_expect_error(ld_synchronizer_next(s), LD_ECLOSED, NULL);
    ld_test_expect_error(ld_synchronizer_next(s), LD_ECLOSED, NULL);
    ck_assert_int_eq(ld_mock_synchronizer_push_update(s, update(LD_DATA_SOURCE_STATE_VALID)),
                     LD_ECLOSED);
    ck_assert_int_eq(ld_mock_synchronizer_push_error(s, LD_EIO), LD_ECLOSED);
    ck_assert_int_eq(ld_mock_synchronizer_end(s), LD_ECLOSED);
    ck_assert_int_eq(ld_mock_synchronizer_next_count(s), 3);
    ck_assert_int_eq(ld_mock_synchronizer_stopped(s), 0); /* ended, not stopped */
    ld_synchronizer_free(s);
}
END_TEST

START_TEST(test_sync_end_answers_every_waiting_next)
{
    ld_synchronizer *s = ld_mock_synchronizer_new(B, NULL);
    ld_future *f1 = ld_synchronizer_next(s);
    ld_future *f2 = ld_synchronizer_next(s);
    /* pushing an LD_ECLOSED error is the end */
    ck_assert_int_eq(ld_mock_synchronizer_push_error(s, LD_ECLOSED), 0);
    ld_test_expect_error(f1, LD_ECLOSED, NULL);
    ld_test_expect_error(f2, LD_ECLOSED, NULL);
    ck_assert_int_eq(ld_mock_synchronizer_end(s), LD_ECLOSED);
    ld_synchronizer_free(s);
}
END_TEST

START_TEST(test_sync_stop_rejects_waiting_nexts)
{
    ld_synchronizer *s = ld_mock_synchronizer_new(B, NULL);
    ld_fdv2_update *u = update(LD_DATA_SOURCE_STATE_VALID);
    ld_future *f1 = ld_synchronizer_next(s);
    ld_future *f2 = ld_synchronizer_next(s);
    ck_assert_int_eq(ld_mock_synchronizer_push_update(s, u), 0);
    ld_future *stop = ld_synchronizer_stop(s);
    ld_test_watch(f2, 2);
    ld_test_watch(stop, 3);
    ck_assert_int_eq(ld_mock_synchronizer_stopped(s), 1);
    await_update(f1, u);
    ld_test_expect_error(f2, LD_ECLOSED, NULL);
    ld_test_await_ok(stop);
    ld_test_flush();
    ck_assert_int_eq(ld_test_order[0], 2); /* the next before the stop */
    ld_test_expect_error(ld_synchronizer_next(s), LD_ECLOSED, NULL);
    ck_assert_int_eq(ld_mock_synchronizer_next_count(s), 2);
    ck_assert_int_eq(ld_mock_synchronizer_push_update(s, update(LD_DATA_SOURCE_STATE_VALID)),
                     LD_ECLOSED);
    ck_assert_int_eq(ld_mock_synchronizer_push_error(s, LD_EIO), LD_ECLOSED);
    ck_assert_int_eq(ld_mock_synchronizer_end(s), LD_ECLOSED);
    ld_test_await_ok(ld_synchronizer_stop(s));
    ld_synchronizer_free(s);
}
END_TEST

START_TEST(test_sync_free_cancels_waiting_and_drops_the_script)
{
    ld_synchronizer *s = ld_mock_synchronizer_new(B, NULL);
    ld_future *f = ld_synchronizer_next(s);
    ld_synchronizer *t = ld_mock_synchronizer_new(B, NULL);
    ck_assert_int_eq(ld_mock_synchronizer_push_update(t, update(LD_DATA_SOURCE_STATE_VALID)), 0);
    ck_assert_int_eq(ld_mock_synchronizer_push_error(t, LD_EIO), 0);
    ck_assert_int_eq(ld_mock_synchronizer_end(t), 0);
    ld_synchronizer_free(s);
    ld_synchronizer_free(t); /* its script is freed: valgrind checks */
    ld_test_expect_error(f, LD_ECANCELED, NULL);
}
END_TEST

START_TEST(test_sync_bad_input)
{
    ld_synchronizer *s = ld_mock_synchronizer_new(B, NULL);
    ck_assert_int_eq(ld_mock_synchronizer_push_update(s, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_mock_synchronizer_push_error(s, 0), LD_EINVAL);
    ck_assert_int_eq(ld_mock_synchronizer_push_error(s, 1), LD_EINVAL);
    ld_initializer *other = ld_mock_initializer_new(B, NULL);
    ld_synchronizer *not_sync = (ld_synchronizer *)(void *)other;
    ld_synchronizer *objs[] = {NULL, not_sync};
    for (int i = 0; i < 2; i++) {
        /* the update is stolen on this path too (valgrind checks) */
        ck_assert_int_eq(
            ld_mock_synchronizer_push_update(objs[i], update(LD_DATA_SOURCE_STATE_VALID)),
            LD_EINVAL);
        ck_assert_int_eq(ld_mock_synchronizer_push_error(objs[i], LD_EIO), LD_EINVAL);
        ck_assert_int_eq(ld_mock_synchronizer_end(objs[i]), LD_EINVAL);
        ck_assert_int_eq(ld_mock_synchronizer_next_count(objs[i]), LD_EINVAL);
        ck_assert_int_eq(ld_mock_synchronizer_stopped(objs[i]), LD_EINVAL);
    }
    /* nothing was scripted: a next waits */
    ld_future *f = ld_synchronizer_next(s);
    ld_test_flush();
    ck_assert(ld_future_is_pending(f));
    ld_future_unref(f);
    ld_initializer_free(other);
    ld_synchronizer_free(s);
}
END_TEST

/* ---- initializer ---------------------------------------------------------- */

static json_t *flag;

/* A full basis: a put of `flag` as foo v10, a delete of segment s1 v3,
 * selector ("p:1", 7), persist, environment "env-1". */
static ld_fdv2_basis *basis(void)
{
    ld_fdv2_change_set_builder *b = ld_fdv2_change_set_builder_new();
    ld_fdv2_selector *sel = ld_fdv2_selector_new("p:1", 7);
    ld_fdv2_change_set *cs = NULL;
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_FULL), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_add_put(b, ld_kind_features(), "foo", 10, flag), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_add_delete(b, ld_kind_segments(), "s1", 3), 0);
    ck_assert_int_eq(ld_fdv2_change_set_builder_finish(b, sel, &cs), 0);
    ld_fdv2_change_set_builder_free(b);
    ld_fdv2_selector_free(sel);
    ld_fdv2_basis *basis = ld_fdv2_basis_new(cs, true, "env-1");
    ck_assert_ptr_nonnull(basis);
    return basis;
}

/* Checks that `got` is what basis() makes. */
static void assert_the_basis(const ld_fdv2_basis *got)
{
    ck_assert_ptr_nonnull(got);
    const ld_fdv2_change_set *cs = ld_fdv2_basis_change_set(got);
    ck_assert_int_eq(ld_fdv2_change_set_intent(cs), LD_FDV2_INTENT_XFER_FULL);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 2);
    const ld_fdv2_change *put = ld_fdv2_change_set_get(cs, 0);
    const ld_fdv2_change *del = ld_fdv2_change_set_get(cs, 1);
    ck_assert_int_eq(ld_fdv2_change_action(put), LD_FDV2_ACTION_PUT);
    ck_assert_ptr_eq(ld_fdv2_change_kind(put), ld_kind_features());
    ck_assert_str_eq(ld_fdv2_change_key(put), "foo");
    ck_assert_int_eq(ld_fdv2_change_version(put), 10);
    ck_assert_ptr_eq(ld_fdv2_change_object(put), flag); /* shared */
    ck_assert_int_eq(ld_fdv2_change_action(del), LD_FDV2_ACTION_DELETE);
    ck_assert_ptr_eq(ld_fdv2_change_kind(del), ld_kind_segments());
    ck_assert_str_eq(ld_fdv2_change_key(del), "s1");
    ck_assert_int_eq(ld_fdv2_change_version(del), 3);
    const ld_fdv2_selector *sel = ld_fdv2_change_set_selector(cs);
    ck_assert_str_eq(ld_fdv2_selector_state(sel), "p:1");
    ck_assert_int_eq(ld_fdv2_selector_version(sel), 7);
    ck_assert(ld_fdv2_basis_persist(got));
    ck_assert_str_eq(ld_fdv2_basis_environment_id(got), "env-1");
}

static void init_setup(void)
{
    ld_test_setup();
    flag = json_pack("{s:s, s:i}", "key", "foo", "version", 10);
    ck_assert_ptr_nonnull(flag);
}

static void init_teardown(void)
{
    ld_test_teardown();
    json_decref(flag);
    flag = NULL;
}

START_TEST(test_init_new_and_name)
{
    ck_assert_ptr_null(ld_mock_initializer_new(NULL, NULL));
    ld_initializer *i = ld_mock_initializer_new(B, NULL);
    ld_initializer *named = ld_mock_initializer_new(B, "polling");
    ck_assert_str_eq(ld_initializer_name(i), "mock");
    ck_assert_str_eq(ld_initializer_name(named), "polling");
    ck_assert_int_eq(ld_mock_initializer_fetch_count(i), 0);
    ck_assert_int_eq(ld_mock_initializer_stopped(i), 0);
    ld_initializer_free(i);
    ld_initializer_free(named);
}
END_TEST

START_TEST(test_init_fetch_gets_a_copy_of_the_basis)
{
    ld_initializer *i = ld_mock_initializer_new(B, NULL);
    ld_fdv2_basis *set = basis();
    ck_assert_int_eq(ld_mock_initializer_set_basis(i, set), 0);
    ld_future *f1 = ld_test_done(ld_initializer_fetch(i));
    ld_future *f2 = ld_test_done(ld_initializer_fetch(i));
    ck_assert(ld_future_is_fulfilled(f1) && ld_future_is_fulfilled(f2));
    const ld_fdv2_basis *b1 = ld_fdv2_future_basis(f1);
    const ld_fdv2_basis *b2 = ld_fdv2_future_basis(f2);
    ck_assert_ptr_ne(b1, set);
    ck_assert_ptr_ne(b1, b2); /* one each, both alive at once */
    assert_the_basis(b1);
    assert_the_basis(b2);
    ld_future_unref(f1);
    assert_the_basis(b2);
    ld_future_unref(f2);
    ck_assert_int_eq(ld_mock_initializer_fetch_count(i), 2);
    ld_initializer_free(i);
}
END_TEST

START_TEST(test_init_copies_a_no_changes_basis)
{
    ld_initializer *i = ld_mock_initializer_new(B, NULL);
    ld_fdv2_basis *set = ld_fdv2_basis_new(ld_fdv2_change_set_no_changes(), false, NULL);
    ck_assert_int_eq(ld_mock_initializer_set_basis(i, set), 0);
    ld_future *f = ld_test_done(ld_initializer_fetch(i));
    const ld_fdv2_basis *got = ld_fdv2_future_basis(f);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(ld_fdv2_change_set_intent(ld_fdv2_basis_change_set(got)), LD_FDV2_INTENT_NONE);
    ck_assert_uint_eq(ld_fdv2_change_set_count(ld_fdv2_basis_change_set(got)), 0);
    ck_assert(
        !ld_fdv2_selector_is_defined(ld_fdv2_change_set_selector(ld_fdv2_basis_change_set(got))));
    ck_assert(!ld_fdv2_basis_persist(got));
    ck_assert_ptr_null(ld_fdv2_basis_environment_id(got));
    ld_future_unref(f);
    ld_initializer_free(i);
}
END_TEST

START_TEST(test_init_fetches_wait_until_set_in_order)
{
    ld_initializer *i = ld_mock_initializer_new(B, NULL);
    ld_future *f1 = ld_initializer_fetch(i);
    ld_future *f2 = ld_initializer_fetch(i);
    ld_test_watch(f1, 1);
    ld_test_watch(f2, 2);
    ld_test_flush();
    ck_assert(ld_future_is_pending(f1) && ld_future_is_pending(f2));
    ck_assert_int_eq(ld_mock_initializer_fetch_count(i), 2);
    ck_assert_int_eq(ld_mock_initializer_set_basis(i, basis()), 0);
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 2);
    ck_assert_int_eq(ld_test_order[0], 1);
    ck_assert_int_eq(ld_test_order[1], 2);
    assert_the_basis(ld_fdv2_future_basis(f1));
    assert_the_basis(ld_fdv2_future_basis(f2));
    ld_future_unref(f1);
    ld_future_unref(f2);
    ld_initializer_free(i);
}
END_TEST

START_TEST(test_init_set_error_then_set_basis_replace)
{
    ld_initializer *i = ld_mock_initializer_new(B, NULL);
    ld_future *waiting = ld_initializer_fetch(i);
    ck_assert_int_eq(ld_mock_initializer_set_error(i, LD_EIO), 0);
    ld_test_expect_error(waiting, LD_EIO, NULL);
    ld_test_expect_error(ld_initializer_fetch(i), LD_EIO, NULL);
    ck_assert_int_eq(ld_mock_initializer_set_basis(i, basis()), 0);
    ld_future *f = ld_test_done(ld_initializer_fetch(i));
    assert_the_basis(ld_fdv2_future_basis(f));
    ld_future_unref(f);
    ck_assert_int_eq(ld_mock_initializer_set_error(i, LD_EPARSE), 0); /* frees the basis */
    ld_test_expect_error(ld_initializer_fetch(i), LD_EPARSE, NULL);
    ck_assert_int_eq(ld_mock_initializer_fetch_count(i), 4);
    ld_initializer_free(i);
}
END_TEST

START_TEST(test_init_close_rejects_waiting_fetches)
{
    ld_initializer *i = ld_mock_initializer_new(B, NULL);
    ld_future *f = ld_initializer_fetch(i);
    ld_future *c = ld_initializer_stop(i);
    ld_test_watch(f, 1);
    ld_test_watch(c, 2);
    ck_assert_int_eq(ld_mock_initializer_stopped(i), 1);
    ld_test_expect_error(f, LD_ECLOSED, NULL);
    ld_test_await_ok(c);
    ld_test_flush();
    ck_assert_int_eq(ld_test_order[0], 1);
    ck_assert_int_eq(ld_mock_initializer_set_basis(i, basis()), LD_ECLOSED); /* freed */
    ck_assert_int_eq(ld_mock_initializer_set_error(i, LD_EIO), LD_ECLOSED);
    ld_test_expect_error(ld_initializer_fetch(i), LD_ECLOSED, NULL);
    ck_assert_int_eq(ld_mock_initializer_fetch_count(i), 1);
    ld_initializer_free(i);
}
END_TEST

START_TEST(test_init_free_cancels_waiting_fetches)
{
    ld_initializer *i = ld_mock_initializer_new(B, NULL);
    ld_future *f = ld_initializer_fetch(i);
    ld_initializer *j = ld_mock_initializer_new(B, NULL);
    ck_assert_int_eq(ld_mock_initializer_set_basis(j, basis()), 0);
    ld_initializer_free(i);
    ld_initializer_free(j); /* frees its basis: valgrind checks */
    ld_test_expect_error(f, LD_ECANCELED, NULL);
}
END_TEST

START_TEST(test_init_bad_input)
{
    ld_initializer *i = ld_mock_initializer_new(B, NULL);
    ck_assert_int_eq(ld_mock_initializer_set_basis(i, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_mock_initializer_set_error(i, 0), LD_EINVAL);
    ck_assert_int_eq(ld_mock_initializer_set_error(i, 2), LD_EINVAL);
    ld_synchronizer *other = ld_mock_synchronizer_new(B, NULL);
    ld_initializer *not_init = (ld_initializer *)(void *)other;
    ld_initializer *objs[] = {NULL, not_init};
    for (int k = 0; k < 2; k++) {
        /* the basis is stolen on this path too (valgrind checks) */
        ck_assert_int_eq(ld_mock_initializer_set_basis(objs[k], basis()), LD_EINVAL);
        ck_assert_int_eq(ld_mock_initializer_set_error(objs[k], LD_EIO), LD_EINVAL);
        ck_assert_int_eq(ld_mock_initializer_fetch_count(objs[k]), LD_EINVAL);
        ck_assert_int_eq(ld_mock_initializer_stopped(objs[k]), LD_EINVAL);
    }
    /* nothing was set: a fetch waits */
    ld_future *f = ld_initializer_fetch(i);
    ld_test_flush();
    ck_assert(ld_future_is_pending(f));
    ld_future_unref(f);
    ld_synchronizer_free(other);
    ld_initializer_free(i);
}
END_TEST

/* ---- a new mock at a freed mock's address --------------------------------- */

/*
 * An allocator that hands the block of a chosen object, when that object is
 * freed, to the next allocation of the same size: a new component object
 * then lands at the address of the one just freed, as malloc may do. It
 * wraps the C library's functions, so blocks cross the switch either way.
 */
static struct {
    void *p;
    size_t size;
} recent[256];
static size_t n_recent;
static const void *reuse_target; /* the object whose block to hand on */
static size_t reuse_size;
static void *reuse_held;
static int reuse_count;
static size_t reuse_skip; /* allocations of that size to let by first */

static void *reuse_malloc(size_t size)
{
    if (reuse_held && size == reuse_size && reuse_skip > 0) {
        reuse_skip--;
    } else if (reuse_held && size == reuse_size) {
        void *p = reuse_held;
        reuse_held = NULL;
        reuse_count++;
        return p;
    }
    void *p = malloc(size);
    recent[n_recent % 256].p = p;
    recent[n_recent % 256].size = size;
    n_recent++;
    return p;
}

static void *reuse_realloc(void *p, size_t size)
{
    return realloc(p, size);
}

static void reuse_free(void *p)
{
    if (p == reuse_target && !reuse_held) {
        reuse_held = p;
        reuse_target = NULL;
        return;
    }
    free(p);
}

/* From now on, the block of `obj` (allocated while the hooks were on, by
 * the allocations from `made_from` on) is kept when freed and handed to the
 * allocation of its size that made it the first time, counted the same way
 * (the same constructor allocates in the same ld_test_order). */
static void reuse_arm(const void *obj, size_t made_from)
{
    reuse_size = 0;
    size_t at = 0;
    for (size_t i = n_recent; i-- > 0 && i + 256 >= n_recent;) {
        if (recent[i % 256].p == obj) {
            reuse_size = recent[i % 256].size;
            at = i;
            break;
        }
    }
    ck_assert_uint_gt(reuse_size, 0);
    reuse_skip = 0;
    for (size_t i = made_from; i < at; i++)
        reuse_skip += recent[i % 256].size == reuse_size;
    reuse_target = obj;
}

/* One mock per interface: made, then (`pend`) an operation left pending,
 * so that the front layer frees the mock from the loop (the store's, event
 * processor's and big segment store's operations all complete at once);
 * `check` asserts that the ld_mock_* functions reach the mock of `obj`. */
struct reuse_case {
    enum ld_test_iface iface;
    bool pend;
    void (*check)(void *obj);
};

static void *mock_new(enum ld_test_iface i)
{
    switch (i) {
    case LD_TEST_STORE:
        return ld_mock_store_new(B);
    case LD_TEST_EVENT_PROCESSOR:
        return ld_mock_event_processor_new(B);
    case LD_TEST_UPDATE_PROCESSOR:
        return ld_mock_update_processor_new(B, LD_MOCK_START_HOLD);
    case LD_TEST_BIG_SEGMENT_STORE:
        return ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    case LD_TEST_SYNCHRONIZER:
        return ld_mock_synchronizer_new(B, NULL);
    default:
        return ld_mock_initializer_new(B, NULL);
    }
}

static void st_check(void *o)
{
    json_t *item = json_pack("{s:s, s:i}", "key", "k", "version", 1);
    ck_assert_int_eq(ld_mock_store_force_set(o, ld_kind_features(), item), 0);
    ld_future *f = ld_test_done(ld_store_get(o, ld_kind_features(), "k"));
    ck_assert_ptr_eq(ld_future_json(f), item);
    ld_future_unref(f);
    json_decref(item);
    ck_assert_int_eq(ld_mock_store_calls(o, LD_MOCK_OP_GET), 1);
}

static void ep_check(void *o)
{
    json_t *e = json_pack("{s:s}", "kind", "custom");
    ck_assert_int_eq(ld_event_processor_send_event(o, e), 0);
    json_decref(e); /* the mock keeps its own reference */
    ck_assert_int_eq(ld_mock_event_processor_event_count(o), 1);
    ld_test_await_ok(ld_event_processor_flush(o));
    ck_assert_int_eq(ld_mock_event_processor_flush_count(o), 1);
}

static void up_check(void *o)
{
    ld_future *f = ld_update_processor_start(o);
    ck_assert_int_eq(ld_mock_update_processor_set_ready(o), 0);
    ld_test_await_ok(f);
    ck_assert_int_eq(ld_mock_update_processor_start_count(o), 1);
}

static void bss_check(void *o)
{
    ck_assert_int_eq(ld_mock_big_segment_store_set_preset(o, LD_MOCK_BIG_SEGMENTS_PRESET_NONE), 0);
    ld_future *f = ld_test_done(ld_big_segment_store_get_metadata(o));
    ck_assert_int_eq(ld_future_int(f), LD_BIG_SEGMENT_TIME_UNKNOWN);
    ld_future_unref(f);
    ck_assert_int_eq(ld_mock_big_segment_store_metadata_query_count(o), 1);
}

static void sync_check(void *o)
{
    ld_future *f = ld_synchronizer_next(o);
    ld_fdv2_update *u = update(LD_DATA_SOURCE_STATE_VALID);
    ck_assert_int_eq(ld_mock_synchronizer_push_update(o, u), 0);
    await_update(f, u);
    ck_assert_int_eq(ld_mock_synchronizer_next_count(o), 1);
}

static void init_check(void *o)
{
    ld_future *f = ld_initializer_fetch(o);
    ck_assert_int_eq(ld_mock_initializer_set_basis(o, basis()), 0);
    ld_test_done(f);
    ck_assert_msg(ld_future_is_fulfilled(f), "rejected: %s", ld_future_error_message(f));
    ck_assert_ptr_nonnull(ld_fdv2_future_basis(f));
    ld_future_unref(f);
    ck_assert_int_eq(ld_mock_initializer_fetch_count(o), 1);
}

static const struct reuse_case reuse_cases[] = {
    {LD_TEST_STORE, false, st_check},           {LD_TEST_EVENT_PROCESSOR, false, ep_check},
    {LD_TEST_UPDATE_PROCESSOR, true, up_check}, {LD_TEST_BIG_SEGMENT_STORE, false, bss_check},
    {LD_TEST_SYNCHRONIZER, true, sync_check},   {LD_TEST_INITIALIZER, true, init_check},
};

static void reuse_setup(void)
{
    init_setup();
    n_recent = 0;
    reuse_target = NULL;
    reuse_held = NULL;
    reuse_count = 0;
    ck_assert_int_eq(ld_set_alloc_funcs(reuse_malloc, reuse_realloc, reuse_free), 0);
}

static void reuse_teardown(void)
{
    init_teardown();
    ck_assert_int_eq(ld_set_alloc_funcs(NULL, NULL, NULL), 0);
    free(reuse_held);
    reuse_held = NULL;
}

START_TEST(test_mock_at_a_freed_mocks_address_is_reachable_after_the_old_one_goes)
{
    const struct reuse_case *c = &reuse_cases[_i];
    size_t made_from = n_recent;
    void *old = mock_new(c->iface);
    ck_assert_ptr_nonnull(old);
    ld_future *pending = c->pend ? ld_test_iface_op(c->iface, old) : NULL;
    reuse_arm(old, made_from);
    ld_test_iface_free(c->iface, old); /* with an operation pending, the mock goes from the loop */
    void *obj = mock_new(c->iface);
    ck_assert_ptr_nonnull(obj);
    ck_assert_msg(obj == old && reuse_count == 1, "%s: the new object is not at the old address",
                  ld_test_iface_name(c->iface));
    if (pending)
        ld_test_expect_error(pending, LD_ECANCELED, NULL);
    ld_test_flush(); /* the old mock is freed by now */
    c->check(obj);
    ld_test_iface_free(c->iface, obj);
}
END_TEST

/* ---- suite ---------------------------------------------------------------- */

Suite *ld_suite_mock_ifaces(void)
{
    Suite *s = suite_create("mock_interfaces");

    TCase *tc = tcase_create("event_processor");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_ep_new);
    tcase_add_test(tc, test_ep_records_events_by_reference_in_order);
    tcase_add_test(tc, test_ep_refused_events_are_not_recorded);
    tcase_add_test(tc, test_ep_flush_fulfils_true_and_is_counted);
    tcase_add_test(tc, test_ep_close_then_flush_is_refused_and_not_counted);
    tcase_add_test(tc, test_ep_clear_forgets_events_keeps_flush_count);
    tcase_add_test(tc, test_ep_refuses_foreign_objects);
    suite_add_tcase(s, tc);

    tc = tcase_create("update_processor");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_up_new_bad_input);
    tcase_add_test(tc, test_up_ready_at_once_by_default);
    tcase_add_test(tc, test_up_give_up_fulfils_not_initialized);
    tcase_add_test(tc, test_up_hold_waits_for_set_ready);
    tcase_add_test(tc, test_up_hold_then_fail_rejects_with_the_code);
    tcase_add_test(tc, test_up_scripted_before_start);
    tcase_add_test(tc, test_up_second_start_is_refused_and_not_counted);
    tcase_add_test(tc, test_up_close_rejects_a_held_start);
    tcase_add_test(tc, test_up_close_after_ready);
    tcase_add_test(tc, test_up_free_cancels_a_held_start);
    tcase_add_test(tc, test_up_bad_input);
    suite_add_tcase(s, tc);

    tc = tcase_create("big_segment_store");
    tcase_add_checked_fixture(tc, bss_setup, bss_teardown);
    tcase_add_test(tc, test_bss_new);
    tcase_add_loop_test(tc, test_bss_presets, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE,
                        LD_MOCK_BIG_SEGMENTS_PRESET_ERROR + 1);
    tcase_add_test(tc, test_bss_preset_changes_later_calls);
    tcase_add_test(tc, test_bss_membership_set_replace_forget);
    tcase_add_test(tc, test_bss_membership_queries_are_recorded_in_order);
    tcase_add_test(tc, test_bss_refused_queries_are_not_recorded);
    tcase_add_test(tc, test_bss_set_membership_bad_input);
    tcase_add_test(tc, test_bss_refuses_foreign_objects);
    suite_add_tcase(s, tc);

    tc = tcase_create("synchronizer");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_sync_new_and_name);
    tcase_add_test(tc, test_sync_yields_the_script_in_order);
    tcase_add_test(tc, test_sync_next_waits_for_a_push);
    tcase_add_test(tc, test_sync_end_rejects_every_later_next);
    tcase_add_test(tc, test_sync_end_answers_every_waiting_next);
    tcase_add_test(tc, test_sync_stop_rejects_waiting_nexts);
    tcase_add_test(tc, test_sync_free_cancels_waiting_and_drops_the_script);
    tcase_add_test(tc, test_sync_bad_input);
    suite_add_tcase(s, tc);

    tc = tcase_create("initializer");
    tcase_add_checked_fixture(tc, init_setup, init_teardown);
    tcase_add_test(tc, test_init_new_and_name);
    tcase_add_test(tc, test_init_fetch_gets_a_copy_of_the_basis);
    tcase_add_test(tc, test_init_copies_a_no_changes_basis);
    tcase_add_test(tc, test_init_fetches_wait_until_set_in_order);
    tcase_add_test(tc, test_init_set_error_then_set_basis_replace);
    tcase_add_test(tc, test_init_close_rejects_waiting_fetches);
    tcase_add_test(tc, test_init_free_cancels_waiting_fetches);
    tcase_add_test(tc, test_init_bad_input);
    suite_add_tcase(s, tc);

    tc = tcase_create("address_reuse");
    tcase_add_checked_fixture(tc, reuse_setup, reuse_teardown);
    tcase_add_loop_test(tc, test_mock_at_a_freed_mocks_address_is_reachable_after_the_old_one_goes,
                        0, (int)(sizeof(reuse_cases) / sizeof(reuse_cases[0])));
    suite_add_tcase(s, tc);
    return s;
}
