/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* Workers (lib/core/worker.c, compiled into this program): jobs run off the
 * loop, their outcome completes a future from the loop. */
#include <errno.h>
#include <event2/thread.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <ldasync/error.h>

#include "check_suites.h"
#include "check_util.h"
#include "core/core-internal.h"

#define B ld_test_base

static pthread_t loop_thread;

static void thread_setup(void)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0); /* before event_base_new() */
    ld_test_setup();
    loop_thread = pthread_self();
}

static void nap_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- jobs ------------------------------------------------------------------ */

static atomic_int g_runs;  /* job functions that ran */
static atomic_int g_freed; /* values freed by free_value */
static atomic_bool g_open; /* the gate blocking_job waits at */

static void free_value(void *v)
{
    atomic_fetch_add(&g_freed, 1);
    free(v);
}

/* A value: the int `arg` points at, and whether it ran off the loop. */
struct value {
    int n;
    bool off_loop;
};

static struct value *value_of(void *arg)
{
    struct value *v = malloc(sizeof(*v));
    v->n = *(int *)arg;
    v->off_loop = !pthread_equal(pthread_self(), loop_thread);
    return v;
}

static void *value_job(const struct ld__work *job, void *arg, int *code)
{
    (void)job;
    (void)code;
    atomic_fetch_add(&g_runs, 1);
    return value_of(arg);
}

static void *failing_job(const struct ld__work *job, void *arg, int *code)
{
    (void)job;
    (void)arg;
    atomic_fetch_add(&g_runs, 1);
    *code = LD_EIO;
    return NULL;
}

/* Waits at the gate, or until it is no longer wanted; then a value. */
static void *blocking_job(const struct ld__work *job, void *arg, int *code)
{
    (void)code;
    atomic_fetch_add(&g_runs, 1);
    while (!atomic_load(&g_open) && ld__job_wanted(job))
        nap_ms(1);
    return value_of(arg);
}

static void reset(void)
{
    atomic_store(&g_runs, 0);
    atomic_store(&g_freed, 0);
    atomic_store(&g_open, false);
}

/* Waits (a few seconds at most) until `n` job functions ran. */
static void wait_runs(int n)
{
    for (int i = 0; i < 5000 && atomic_load(&g_runs) < n; i++)
        nap_ms(1);
    ck_assert_int_ge(atomic_load(&g_runs), n);
}

/* ---- running -------------------------------------------------------------- */

START_TEST(test_job_runs_off_the_loop_and_fulfils_from_the_loop)
{
    reset();
    struct ld__worker *w = ld__worker_new(B);
    int seven = 7;
    ld_future *f = ld__worker_submit(w, value_job, &seven, free_value);
    ck_assert_ptr_nonnull(f);
    ck_assert(ld_future_is_pending(f)); /* never inside the call */
    ld_test_fulfilled(f);
    struct value *v = ld_future_ptr(f);
    ck_assert_int_eq(v->n, 7);
    ck_assert(v->off_loop);
    ld_future_unref(f);
    ck_assert_int_eq(atomic_load(&g_freed), 1); /* freed with the future */
    ld__worker_free(w);
}
END_TEST

START_TEST(test_job_code_rejects_its_future)
{
    reset();
    struct ld__worker *w = ld__worker_new(B);
    ld_test_expect_error(ld__worker_submit(w, failing_job, NULL, free_value), LD_EIO, NULL);
    ld__worker_free(w);
}
END_TEST

enum { MANY = 200 };

static int g_order[MANY];
static int g_n_order;
static int g_off_loop_callbacks;

static void note(ld_future *f, void *arg)
{
    (void)arg;
    g_order[g_n_order++] = ((struct value *)ld_future_ptr(f))->n;
    if (!pthread_equal(pthread_self(), loop_thread))
        g_off_loop_callbacks++;
}

START_TEST(test_many_jobs_complete_in_order_on_the_loop)
{
    reset();
    g_n_order = g_off_loop_callbacks = 0;
    struct ld__worker *w = ld__worker_new(B);
    static int ns[MANY];
    ld_future *last = NULL;
    for (int i = 0; i < MANY; i++) {
        ns[i] = i;
        ld_future *f = ld__worker_submit(w, value_job, &ns[i], free_value);
        ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f), note, NULL), 0);
        ld_future_unref(last);
        last = f;
    }
    ld_test_fulfilled(last);
    ld_future_unref(last);
    ld_test_flush();
    ck_assert_int_eq(g_n_order, MANY);
    for (int i = 0; i < MANY; i++)
        ck_assert_int_eq(g_order[i], i);
    ck_assert_int_eq(g_off_loop_callbacks, 0);
    ld__worker_free(w);
    ck_assert_int_eq(atomic_load(&g_freed), MANY);
}
END_TEST

/* ---- cancelling ------------------------------------------------------------ */

START_TEST(test_cancelled_queued_job_never_runs)
{
    reset();
    struct ld__worker *w = ld__worker_new(B);
    int one = 1, two = 2;
    ld_future *a = ld__worker_submit(w, blocking_job, &one, free_value);
    ld_future *b = ld__worker_submit(w, value_job, &two, free_value);
    wait_runs(1); /* a runs, b waits behind it */
    ck_assert_int_eq(ld_future_cancel(b), 0);
    atomic_store(&g_open, true);
    ld_test_fulfilled(a);
    ld_test_expect_error(b, LD_ECANCELED, NULL);
    ld_test_flush();
    ck_assert_int_eq(atomic_load(&g_runs), 1);
    ld_future_unref(a);
    ld__worker_free(w);
}
END_TEST

START_TEST(test_cancelled_running_job_is_told_and_its_value_dropped)
{
    reset();
    struct ld__worker *w = ld__worker_new(B);
    int one = 1;
    ld_future *a = ld__worker_submit(w, blocking_job, &one, free_value);
    wait_runs(1);
    ck_assert_int_eq(ld_future_cancel(a), 0);
    ld_test_flush(); /* the cancel handler: the job is no longer wanted */
    ld_test_expect_error(a, LD_ECANCELED, NULL);
    ld__worker_free(w); /* joins: the job noticed and returned */
    ld_test_flush();
    ck_assert_int_eq(atomic_load(&g_freed), 1); /* its value, dropped off the loop */
}
END_TEST

/* ---- stopping and freeing -------------------------------------------------- */

START_TEST(test_free_with_jobs_pending_cancels_them)
{
    reset();
    struct ld__worker *w = ld__worker_new(B);
    int ns[4] = {0, 1, 2, 3};
    ld_future *fs[4];
    fs[0] = ld__worker_submit(w, blocking_job, &ns[0], free_value);
    for (int i = 1; i < 4; i++)
        fs[i] = ld__worker_submit(w, value_job, &ns[i], free_value);
    wait_runs(1);
    ld__worker_free(w); /* the gate never opens: the running job is told */
    for (int i = 0; i < 4; i++)
        ld_test_expect_error(fs[i], LD_ECANCELED, NULL);
    ld_test_flush();
    ck_assert_int_eq(atomic_load(&g_runs), 1);
}
END_TEST

static struct ld__worker *g_w;

static void free_worker(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    ld__worker_free(g_w);
    g_w = NULL;
}

START_TEST(test_free_from_inside_a_completion_callback)
{
    reset();
    g_w = ld__worker_new(B);
    int one = 1, two = 2, three = 3;
    ld_future *a = ld__worker_submit(g_w, value_job, &one, free_value);
    ld_future *b = ld__worker_submit(g_w, blocking_job, &two, free_value);
    ld_future *c = ld__worker_submit(g_w, value_job, &three, free_value);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(a), free_worker, NULL), 0);
    ld_test_fulfilled(a);
    ld_test_flush();
    ck_assert_ptr_null(g_w);
    ld_test_expect_error(b, LD_ECANCELED, NULL);
    ld_test_expect_error(c, LD_ECANCELED, NULL);
    ld_future_unref(a);
    ld_test_flush();
    ck_assert_int_le(atomic_load(&g_runs), 2); /* c never ran */
}
END_TEST

START_TEST(test_jobs_after_stop_are_cancelled_without_running)
{
    reset();
    struct ld__worker *w = ld__worker_new(B);
    int one = 1;
    ld_test_await_ok(ld__worker_submit(w, value_job, &one, free_value));
    ld__worker_stop(w);
    ld_test_expect_error(ld__worker_submit(w, value_job, &one, free_value), LD_ECANCELED, NULL);
    ck_assert_int_eq(atomic_load(&g_runs), 1);
    ld__worker_free(w);
}
END_TEST

START_TEST(test_close_later_closes_on_the_thread_before_free_returns)
{
    reset();
    struct ld__worker *w = ld__worker_new(B);
    int one = 1;
    ld_test_await_ok(ld__worker_submit(w, value_job, &one, free_value)); /* a thread */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    ld__worker_close_later(w, fds[0]);
    ld__worker_free(w);
    ck_assert_int_eq(fcntl(fds[0], F_GETFD), -1);
    ck_assert_int_eq(errno, EBADF);
    close(fds[1]);
}
END_TEST

START_TEST(test_free_without_jobs_and_null)
{
    ld__worker_free(ld__worker_new(B));
    ld__worker_free(NULL);
}
END_TEST

/* ---- memory ----------------------------------------------------------------- */

static long g_calls, g_fail_at;

/* Allocation g_fail_at of the loop's thread fails (the worker's thread
 * allocates as usual: its outcome is what is checked). */
static bool fails_now(void)
{
    return pthread_equal(pthread_self(), loop_thread) && ++g_calls == g_fail_at;
}

static void *failing_malloc(size_t n)
{
    return fails_now() ? NULL : malloc(n);
}

static void *failing_realloc(void *p, size_t n)
{
    return fails_now() ? NULL : realloc(p, n);
}

/* Allocation N failing, N = 1, 2, ...: a worker is made or not, a submit
 * gives a future or NULL (and then its job never runs), a future given
 * completes, and nothing leaks (ASan, valgrind). */
START_TEST(test_allocation_failures_are_handled)
{
    int seven = 7;
    for (g_fail_at = 1;; g_fail_at++) {
        reset();
        g_calls = 0;
        ck_assert_int_eq(ld_set_alloc_funcs(failing_malloc, failing_realloc, free), 0);
        struct ld__worker *w = ld__worker_new(B);
        ld_future *f = w ? ld__worker_submit(w, value_job, &seven, free_value) : NULL;
        ld_set_alloc_funcs(NULL, NULL, NULL);
        bool failed = g_calls >= g_fail_at;
        if (f) {
            ld_test_done(f);
            ck_assert(ld_future_is_fulfilled(f) || ld_future_error(f) == LD_ENOMEM);
            ld_future_unref(f);
        } else {
            ck_assert(failed);
            ck_assert_int_eq(atomic_load(&g_runs), 0);
        }
        ld__worker_free(w);
        ld_test_flush();
        if (!failed)
            break;
    }
    ck_assert_int_gt(g_fail_at, 2);
}
END_TEST

Suite *ld_suite_worker(void)
{
    Suite *s = suite_create("worker");
    TCase *tc = tcase_create("worker");
    tcase_add_checked_fixture(tc, thread_setup, ld_test_teardown);
    tcase_add_test(tc, test_job_runs_off_the_loop_and_fulfils_from_the_loop);
    tcase_add_test(tc, test_job_code_rejects_its_future);
    tcase_add_test(tc, test_many_jobs_complete_in_order_on_the_loop);
    tcase_add_test(tc, test_cancelled_queued_job_never_runs);
    tcase_add_test(tc, test_cancelled_running_job_is_told_and_its_value_dropped);
    tcase_add_test(tc, test_free_with_jobs_pending_cancels_them);
    tcase_add_test(tc, test_free_from_inside_a_completion_callback);
    tcase_add_test(tc, test_jobs_after_stop_are_cancelled_without_running);
    tcase_add_test(tc, test_close_later_closes_on_the_thread_before_free_returns);
    tcase_add_test(tc, test_free_without_jobs_and_null);
    tcase_add_test(tc, test_allocation_failures_are_handled);
    suite_add_tcase(s, tc);
    return s;
}
