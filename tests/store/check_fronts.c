/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* What the front layer of every interface does, tested once for all of
 * them on scripted implementations (check_util.h): freeing with operations
 * pending, close (or stop) then free, freeing from a callback. The rest of
 * each front is tested in its own suite. Each test loops over the
 * interfaces (_i is an enum ld_test_iface). */
#include <string.h>

#include "check_suites.h"
#include "check_util.h"

static struct ld_test_script impl;
static void *obj;
static int freed_when_cancelled;

static void setup(void)
{
    ld_test_setup();
    memset(&impl, 0, sizeof(impl));
    obj = NULL;
    freed_when_cancelled = -1;
}

static void teardown(void)
{
    ld_test_teardown();
}

/* Makes the object of the running test and issues `n` operations. */
static void make_with_ops(enum ld_test_iface i, ld_future **ops, int n)
{
    obj = ld_test_script_new(i, &impl);
    for (int k = 0; k < n; k++)
        ops[k] = ld_test_iface_op(i, obj);
    ck_assert_int_eq(impl.n, n);
}

static void note_freed(ld_future *f, void *arg)
{
    (void)f;
    freed_when_cancelled = ((struct ld_test_script *)arg)->freed;
}

START_TEST(test_free_cancels_pending)
{
    enum ld_test_iface i = (enum ld_test_iface)_i;
    ld_future *f;
    make_with_ops(i, &f, 1);
    ck_assert_int_eq(ld_future_set_cancel_handler(impl.outs[0], ld_test_count_cancel, NULL), 0);
    ld_test_iface_free(i, obj);
    ld_test_wait(f);
    ld_test_flush(); /* the implementation is freed after the cancel handlers */
    ck_assert_int_eq(impl.freed, 1);
    ck_assert_int_eq(ld_future_error(f), LD_ECANCELED);
    ck_assert_int_eq(ld_test_cancels, 1); /* the implementation heard of it */
    ld_future_unref(f);
}
END_TEST

/* An implementation that listens for cancellation with its own state as the
 * handler's argument (as the headers suggest) is freed only after the
 * handler ran: freeing with an operation pending must not leave the handler
 * with freed memory. */
START_TEST(test_free_runs_cancel_handlers_before_freeing_the_implementation)
{
    enum ld_test_iface i = (enum ld_test_iface)_i;
    ld_future *f;
    make_with_ops(i, &f, 1);
    ck_assert_int_eq(ld_future_set_cancel_handler(impl.outs[0], note_freed, &impl), 0);
    ld_test_iface_free(i, obj);
    ld_test_wait(f);
    ld_test_flush();
    ck_assert_int_eq(freed_when_cancelled, 0); /* the handler ran first */
    ck_assert_int_eq(impl.freed, 1);
    ck_assert_int_eq(ld_future_error(f), LD_ECANCELED);
    ld_future_unref(f);
}
END_TEST

/* Closing (or stopping) then freeing at once: the cancel handlers that the
 * close or the free queued still run before the implementation is freed.
 * A close that aborts rejects the pending operation with LD_ECLOSED; one
 * that drains (the store's, the event processor's, the big segment
 * store's stop) leaves
 * it to the free, which cancels it. */
START_TEST(test_close_then_free_runs_cancel_handlers_before_freeing)
{
    enum ld_test_iface i = (enum ld_test_iface)_i;
    bool drains =
        i == LD_TEST_STORE || i == LD_TEST_EVENT_PROCESSOR || i == LD_TEST_BIG_SEGMENT_STORE;
    ld_future *f;
    make_with_ops(i, &f, 1);
    ck_assert_int_eq(ld_future_set_cancel_handler(impl.outs[0], note_freed, &impl), 0);
    ld_future *close = ld_test_iface_close(i, obj);
    ck_assert_int_eq(impl.closes, 1);
    ld_test_iface_free(i, obj);
    ck_assert_int_eq(impl.freed, 0); /* not inside the call: a handler is queued */
    ld_test_flush();
    ck_assert_int_eq(freed_when_cancelled, 0);
    ck_assert_int_eq(impl.freed, 1);
    ck_assert_int_eq(ld_future_error(f), drains ? LD_ECANCELED : LD_ECLOSED);
    ld_future_unref(f);
    ld_future_unref(close);
}
END_TEST

static void free_inside(ld_future *f, void *arg)
{
    (void)f;
    ld_test_iface_free((enum ld_test_iface)(intptr_t)arg, obj);
    obj = NULL;
}

/* Freeing the object from the callback of its first operation: the next
 * one (the update processor has one start only) is cancelled. */
START_TEST(test_free_from_inside_own_callback_is_safe)
{
    enum ld_test_iface i = (enum ld_test_iface)_i;
    int n = i == LD_TEST_UPDATE_PROCESSOR ? 1 : 2;
    ld_future *f[2] = {NULL, NULL};
    make_with_ops(i, f, n);
    ld_future_on_complete(ld_future_ref(f[0]), free_inside, (void *)(intptr_t)i);
    ld_test_script_answer(i, impl.outs[0]);
    impl.outs[0] = impl.outs[1]; /* what the free releases */
    impl.n--;
    ld_test_flush();
    ck_assert_ptr_null(obj);
    ck_assert(ld_future_is_fulfilled(f[0]));
    if (f[1])
        ck_assert_int_eq(ld_future_error(f[1]), LD_ECANCELED);
    ck_assert_int_eq(impl.freed, 1);
    ld_future_unref(f[0]);
    ld_future_unref(f[1]);
}
END_TEST

/* The object of interface `i` on the scripted implementation, except that
 * the implementation keeps its close (or stop) future, as it keeps the
 * others, to answer it later. */
static void *new_with_kept_close(enum ld_test_iface i)
{
    static struct ld_store_ops st;
    static struct ld_event_processor_ops ep;
    static struct ld_update_processor_ops up;
    static struct ld_big_segment_store_ops bs;
    static struct ld_synchronizer_ops sy;
    static struct ld_initializer_ops in;
    switch (i) {
    case LD_TEST_STORE:
        st = ld_test_script_store_ops;
        st.close = ld_test_script_keep;
        return ld_store_new(ld_test_base, &st, &impl);
    case LD_TEST_EVENT_PROCESSOR:
        ep = ld_test_script_event_processor_ops;
        ep.close = ld_test_script_keep;
        return ld_event_processor_new(ld_test_base, &ep, &impl);
    case LD_TEST_UPDATE_PROCESSOR:
        up = ld_test_script_update_processor_ops;
        up.stop = ld_test_script_keep;
        return ld_update_processor_new(ld_test_base, &up, &impl);
    case LD_TEST_BIG_SEGMENT_STORE:
        bs = ld_test_script_big_segment_store_ops;
        bs.close = ld_test_script_keep;
        return ld_big_segment_store_new(ld_test_base, &bs, &impl);
    case LD_TEST_SYNCHRONIZER:
        sy = ld_test_script_synchronizer_ops;
        sy.stop = ld_test_script_keep;
        return ld_synchronizer_new(ld_test_base, &sy, &impl);
    default:
        in = ld_test_script_initializer_ops;
        in.stop = ld_test_script_keep;
        return ld_initializer_new(ld_test_base, &in, &impl);
    }
}

/* Closing (or stopping) again while the implementation has not closed yet:
 * the first close still completes when the implementation has closed, its
 * implementation future is not cancelled (a second stop does not abort the
 * first), and the second close completes after it. */
START_TEST(test_second_close_leaves_the_first_to_the_implementation)
{
    enum ld_test_iface i = (enum ld_test_iface)_i;
    obj = new_with_kept_close(i);
    ck_assert_ptr_nonnull(obj);
    ld_future *first = ld_test_iface_close(i, obj);
    ld_future *second = ld_test_iface_close(i, obj);
    ck_assert_int_eq(impl.n, 1); /* the implementation hears of it once */
    ld_test_watch(first, 0);
    ld_test_watch(second, 1);
    ld_test_flush();
    ck_assert(ld_future_is_pending(impl.outs[0]));
    ck_assert(ld_future_is_pending(first));
    ck_assert(ld_future_is_pending(second));
    ck_assert_int_eq(ld_future_fulfill(impl.outs[0]), 0);
    ld_future_unref(impl.outs[0]);
    impl.n = 0;
    ld_test_flush();
    ck_assert(ld_future_is_fulfilled(first));
    ck_assert(ld_future_is_fulfilled(second));
    ck_assert_int_eq(ld_test_n_order, 2);
    ck_assert_int_eq(ld_test_order[0], 0);
    ck_assert_int_eq(ld_test_order[1], 1);
    ld_future_unref(first);
    ld_future_unref(second);
    ld_test_iface_free(i, obj);
}
END_TEST

Suite *ld_suite_fronts(void)
{
    Suite *s = suite_create("fronts");
    TCase *tc = tcase_create("free_and_close");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_free_cancels_pending, LD_TEST_STORE, LD_TEST_N_IFACES);
    tcase_add_loop_test(tc, test_free_runs_cancel_handlers_before_freeing_the_implementation,
                        LD_TEST_STORE, LD_TEST_N_IFACES);
    tcase_add_loop_test(tc, test_close_then_free_runs_cancel_handlers_before_freeing, LD_TEST_STORE,
                        LD_TEST_N_IFACES);
    tcase_add_loop_test(tc, test_free_from_inside_own_callback_is_safe, LD_TEST_STORE,
                        LD_TEST_N_IFACES);
    tcase_add_loop_test(tc, test_second_close_leaves_the_first_to_the_implementation, LD_TEST_STORE,
                        LD_TEST_N_IFACES);
    suite_add_tcase(s, tc);
    return s;
}
