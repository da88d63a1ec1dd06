/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The event processor and update processor front layers. */
#include <string.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

/* A scripted implementation of both processors. */
struct script {
    struct ld_test_script sc; /* first: the shared ops take it as impl */
    json_t *events;           /* array of the events sent */
    int send_rc;              /* what send_event returns */
    bool initialized;
};

static int script_send(void *impl, json_t *event)
{
    struct script *s = impl;
    if (s->send_rc == 0)
        json_array_append(s->events, event);
    return s->send_rc;
}

static bool script_initialized(void *impl)
{
    return ((struct script *)impl)->initialized;
}

static const struct ld_event_processor_ops ep_ops = {
    .version = LD_EVENT_PROCESSOR_OPS_VERSION,
    .send_event = script_send,
    .flush = ld_test_script_keep,
    .close = ld_test_script_close,
    .free = ld_test_script_free,
};

static const struct ld_update_processor_ops up_ops = {
    .version = LD_UPDATE_PROCESSOR_OPS_VERSION,
    .start = ld_test_script_keep,
    .initialized = script_initialized,
    .stop = ld_test_script_close,
    .free = ld_test_script_free,
};

static struct script impl;
static ld_event_processor *ep;
static ld_update_processor *up;

static void setup(void)
{
    ld_test_setup();
    memset(&impl, 0, sizeof(impl));
    impl.events = json_array();
    ep = ld_event_processor_new(B, &ep_ops, &impl);
    ck_assert_ptr_nonnull(ep);
    up = NULL;
}

static void teardown(void)
{
    ld_event_processor_free(ep);
    ld_update_processor_free(up);
    ep = NULL;
    up = NULL;
    json_decref(impl.events);
    ld_test_teardown();
}

/* ---- event processor -------------------------------------------------------- */

START_TEST(test_send_event_reaches_the_implementation)
{
    json_t *e = json_pack("{s:s}", "kind", "feature");
    ck_assert_int_eq(ld_event_processor_send_event(ep, e), 0);
    ck_assert_int_eq(json_array_size(impl.events), 1);
    ck_assert_ptr_eq(json_array_get(impl.events, 0), e);
    impl.send_rc = LD_EBUSY; /* the implementation's error comes back */
    ck_assert_int_eq(ld_event_processor_send_event(ep, e), LD_EBUSY);
    json_decref(e);
}
END_TEST

START_TEST(test_send_event_bad_input_is_einval)
{
    json_t *arr = json_array();
    ck_assert_int_eq(ld_event_processor_send_event(NULL, arr), LD_EINVAL);
    ck_assert_int_eq(ld_event_processor_send_event(ep, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_event_processor_send_event(ep, arr), LD_EINVAL);
    ck_assert_int_eq(json_array_size(impl.events), 0);
    json_decref(arr);
}
END_TEST

START_TEST(test_flushes_complete_in_issue_order)
{
    ld_future *a = ld_event_processor_flush(ep);
    ld_future *b = ld_event_processor_flush(ep);
    ld_future_fulfill_bool(impl.sc.outs[1], false);
    ld_test_flush();
    ck_assert(ld_future_is_pending(a));
    ck_assert(ld_future_is_pending(b));
    ld_future_fulfill_bool(impl.sc.outs[0], true);
    ld_test_wait(b);
    ck_assert(ld_future_is_fulfilled(a));
    ck_assert(ld_future_bool(a));
    ck_assert(!ld_future_bool(b));
    ld_future_unref(a);
    ld_future_unref(b);
}
END_TEST

START_TEST(test_event_processor_close_is_graceful_then_eclosed)
{
    json_t *e = json_object();
    ld_future *flush = ld_event_processor_flush(ep);
    ld_future *close = ld_event_processor_close(ep);
    ck_assert_int_eq(impl.sc.closes, 1);
    ck_assert_int_eq(ld_event_processor_send_event(ep, e), LD_ECLOSED);
    ld_future *late = ld_event_processor_flush(ep);
    ld_test_flush();
    ck_assert(ld_future_is_pending(late)); /* in issue order: after flush and close */
    ld_future_fulfill_bool(impl.sc.outs[0], true);
    ld_test_expect_error(late, LD_ECLOSED, "closed");
    ck_assert(!ld_future_is_pending(close));
    ck_assert(ld_future_bool(flush)); /* issued before close: completed as usual */
    ld_future_unref(close);
    close = ld_event_processor_close(ep);
    ld_test_wait(close);
    ck_assert(ld_future_is_fulfilled(close));
    ck_assert_int_eq(impl.sc.closes, 1);
    ld_future_unref(close);
    ld_future_unref(flush);
    json_decref(e);
}
END_TEST

START_TEST(test_event_processor_new_bad_input)
{
    struct ld_event_processor_ops ops;
    ck_assert_ptr_null(ld_event_processor_new(NULL, &ep_ops, &impl));
    ck_assert_ptr_null(ld_event_processor_new(B, NULL, &impl));
    LD_TEST_REFUSES(ops, ep_ops, version, 9, ld_event_processor_new(B, &ops, &impl));
    LD_TEST_REFUSES(ops, ep_ops, send_event, NULL, ld_event_processor_new(B, &ops, &impl));
    LD_TEST_REFUSES(ops, ep_ops, flush, NULL, ld_event_processor_new(B, &ops, &impl));
    ck_assert_ptr_null(ld_event_processor_flush(NULL));
    ck_assert_ptr_null(ld_event_processor_close(NULL));
    ld_event_processor_free(NULL);
}
END_TEST

/* ---- update processor ------------------------------------------------------- */

START_TEST(test_start_is_ready_when_the_implementation_says_so)
{
    up = ld_update_processor_new(B, &up_ops, &impl);
    ck_assert(!ld_update_processor_initialized(up));
    ld_future *ready = ld_update_processor_start(up);
    ck_assert_int_eq(impl.sc.n, 1);
    ld_test_flush();
    ck_assert(ld_future_is_pending(ready));
    impl.initialized = true;
    ld_future_fulfill(impl.sc.outs[0]);
    ld_test_wait(ready);
    ck_assert(ld_future_is_fulfilled(ready));
    ck_assert(ld_update_processor_initialized(up));
    ld_future_unref(ready);
}
END_TEST

START_TEST(test_start_twice_is_einval)
{
    up = ld_update_processor_new(B, &up_ops, &impl);
    ld_future *ready = ld_update_processor_start(up);
    ld_future *again = ld_update_processor_start(up);
    ck_assert_int_eq(impl.sc.n, 1);
    ld_test_flush();
    ck_assert(ld_future_is_pending(again)); /* in issue order: after the first start */
    ld_future_fulfill(impl.sc.outs[0]);
    ld_test_expect_error(again, LD_EINVAL, "already started");
    ck_assert(ld_future_is_fulfilled(ready));
    ld_future_unref(ready);
}
END_TEST

START_TEST(test_update_processor_stop_rejects_a_pending_start)
{
    up = ld_update_processor_new(B, &up_ops, &impl);
    impl.initialized = true;
    ld_future *ready = ld_update_processor_start(up);
    ld_future *close = ld_update_processor_stop(up);
    ck_assert_int_eq(impl.sc.closes, 1);
    ld_test_wait(close);
    ck_assert_int_eq(ld_future_error(ready), LD_ECLOSED);
    ck_assert(!ld_update_processor_initialized(up)); /* closed */
    ld_future_unref(close);
    ld_future_unref(ready);
    close = ld_update_processor_stop(up);
    ld_test_wait(close);
    ck_assert(ld_future_is_fulfilled(close));
    ck_assert_int_eq(impl.sc.closes, 1);
    ld_future_unref(close);
}
END_TEST

START_TEST(test_update_processor_start_after_stop_is_eclosed)
{
    up = ld_update_processor_new(B, &up_ops, &impl);
    ld_future_unref(ld_update_processor_stop(up));
    ld_test_expect_error(ld_update_processor_start(up), LD_ECLOSED, "stopped");
    ck_assert_int_eq(impl.sc.n, 0);
}
END_TEST

START_TEST(test_update_processor_new_bad_input)
{
    struct ld_update_processor_ops ops;
    ck_assert_ptr_null(ld_update_processor_new(NULL, &up_ops, &impl));
    ck_assert_ptr_null(ld_update_processor_new(B, NULL, &impl));
    LD_TEST_REFUSES(ops, up_ops, version, 0, ld_update_processor_new(B, &ops, &impl));
    LD_TEST_REFUSES(ops, up_ops, start, NULL, ld_update_processor_new(B, &ops, &impl));
    LD_TEST_REFUSES(ops, up_ops, initialized, NULL, ld_update_processor_new(B, &ops, &impl));
    ck_assert_ptr_null(ld_update_processor_start(NULL));
    ck_assert_ptr_null(ld_update_processor_stop(NULL));
    ck_assert(!ld_update_processor_initialized(NULL));
    ld_update_processor_free(NULL);
}
END_TEST

Suite *ld_suite_processor(void)
{
    Suite *s = suite_create("processor");
    TCase *tc = tcase_create("event");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_send_event_reaches_the_implementation);
    tcase_add_test(tc, test_send_event_bad_input_is_einval);
    tcase_add_test(tc, test_flushes_complete_in_issue_order);
    tcase_add_test(tc, test_event_processor_close_is_graceful_then_eclosed);
    tcase_add_test(tc, test_event_processor_new_bad_input);
    suite_add_tcase(s, tc);

    tc = tcase_create("update");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_start_is_ready_when_the_implementation_says_so);
    tcase_add_test(tc, test_start_twice_is_einval);
    tcase_add_test(tc, test_update_processor_stop_rejects_a_pending_start);
    tcase_add_test(tc, test_update_processor_start_after_stop_is_eclosed);
    tcase_add_test(tc, test_update_processor_new_bad_input);
    suite_add_tcase(s, tc);
    return s;
}
