/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* Futures completed from other threads (libevent threading on). */
#include <event2/thread.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

static pthread_t loop_thread;

static void thread_setup(void)
{
    /* Must precede event_base_new(); idempotent. */
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    ld_test_setup();
    loop_thread = pthread_self();
}

/* ---- one producer --------------------------------------------------------- */

struct job {
    ld_future *f;
    int cancel;
};

static void *complete_later(void *arg)
{
    struct job *j = arg;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (j->cancel)
        ld_future_cancel(j->f);
    else
        ld_future_fulfill_int(j->f, 7);
    ld_future_unref(j->f); /* the producer's reference, released on its thread */
    return NULL;
}

/* Sets *(int *)arg to whether it runs on the loop's thread. */
static void note_on_loop(ld_future *f, void *arg)
{
    (void)f;
    *(int *)arg = pthread_equal(pthread_self(), loop_thread) != 0;
}

/* A new future that another thread completes (cancels if `cancel`, fulfils
 * with 7 otherwise), with note_on_loop(on_loop) as its callback (or, to be
 * cancelled, its cancel handler): returned once the loop ran what that
 * queued. */
static ld_future *completed_from_thread(int cancel, int *on_loop)
{
    ld_future *f = ld_future_new(B);
    struct job j = {ld_future_ref(f), cancel};
    *on_loop = -1;
    if (cancel)
        ld_future_set_cancel_handler(f, note_on_loop, on_loop);
    else
        ld_future_on_complete(ld_future_ref(f), note_on_loop, on_loop);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, complete_later, &j), 0);
    ld_test_wait(f); /* no other events: wait must block, not spin or fail */
    pthread_join(t, NULL);
    ld_test_flush();
    return f;
}

START_TEST(test_fulfil_from_thread_runs_callback_on_loop)
{
    int on_loop;
    ld_future *f = completed_from_thread(0, &on_loop);
    ck_assert_int_eq(ld_future_int(f), 7);
    ck_assert_int_eq(on_loop, 1);
    ld_future_unref(f);
}
END_TEST

START_TEST(test_cancel_from_thread_runs_handler_on_loop)
{
    int on_loop;
    ld_future *f = completed_from_thread(1, &on_loop);
    ck_assert_int_eq(ld_future_error(f), LD_ECANCELED);
    ck_assert_int_eq(on_loop, 1);
    ld_future_unref(f);
}
END_TEST

/* ---- several producers ---------------------------------------------------- */

enum { PRODUCERS = 4, PER_PRODUCER = 20000 };

struct producer {
    int id;
    ld_future **fs;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    for (int i = 0; i < PER_PRODUCER; i++) {
        ld_future_fulfill_int(p->fs[i], (int64_t)p->id * PER_PRODUCER + i);
        ld_future_unref(p->fs[i]);
    }
    return NULL;
}

static int seen[PRODUCERS * PER_PRODUCER];
static int last_of[PRODUCERS];
static int order_broken;
static int wrong_thread;
static int total_calls;

static void stress_cb(ld_future *f, void *arg)
{
    (void)arg;
    int64_t v = ld_future_int(f);
    int id = (int)(v / PER_PRODUCER), i = (int)(v % PER_PRODUCER);
    seen[v]++;
    total_calls++;
    if (i <= last_of[id])
        order_broken++;
    last_of[id] = i;
    if (!pthread_equal(pthread_self(), loop_thread))
        wrong_thread++;
}

START_TEST(test_many_producers_each_callback_once_in_order_on_loop)
{
    static ld_future *fs[PRODUCERS][PER_PRODUCER];
    struct producer ps[PRODUCERS];
    pthread_t ts[PRODUCERS];
    memset(seen, 0, sizeof(seen));
    total_calls = order_broken = wrong_thread = 0;
    for (int p = 0; p < PRODUCERS; p++) {
        last_of[p] = -1;
        ps[p].id = p;
        ps[p].fs = fs[p];
        for (int i = 0; i < PER_PRODUCER; i++) {
            ld_future *f = ld_future_new(B);
            fs[p][i] = ld_future_ref(f);
            ld_future_on_complete(f, stress_cb, NULL);
        }
    }
    for (int p = 0; p < PRODUCERS; p++)
        ck_assert_int_eq(pthread_create(&ts[p], NULL, produce, &ps[p]), 0);
    /* run the loop on this thread while the producers complete */
    while (total_calls < PRODUCERS * PER_PRODUCER)
        event_base_loop(B, EVLOOP_ONCE);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(ts[p], NULL);
    ld_test_flush();
    ck_assert_int_eq(total_calls, PRODUCERS * PER_PRODUCER);
    int not_once = 0; /* counted: a ck_assert per entry is a write(2) each */
    for (int k = 0; k < PRODUCERS * PER_PRODUCER; k++)
        not_once += seen[k] != 1;
    ck_assert_int_eq(not_once, 0);
    ck_assert_int_eq(order_broken, 0);
    ck_assert_int_eq(wrong_thread, 0);
}
END_TEST

/* ---- races between completion, cancel and registration ------------------- */

struct racer {
    ld_future **fs;
    int n;
    int cancel;
};

static void *race_complete(void *arg)
{
    struct racer *r = arg;
    for (int i = 0; i < r->n; i++) {
        if (r->cancel)
            ld_future_cancel(r->fs[i]);
        else
            ld_future_fulfill(r->fs[i]);
        ld_future_unref(r->fs[i]); /* this thread's own reference */
    }
    return NULL;
}

START_TEST(test_fulfil_and_cancel_race_settles_once)
{
    enum { N = 20000 };
    static ld_future *fs[N];
    int calls = 0;
    for (int i = 0; i < N; i++) {
        fs[i] = ld_future_new(B);
        ld_future_ref(fs[i]); /* one reference for each racing thread */
        ld_future_ref(fs[i]);
    }
    struct racer a = {fs, N, 0}, c = {fs, N, 1};
    pthread_t ta, tc;
    pthread_create(&ta, NULL, race_complete, &a);
    pthread_create(&tc, NULL, race_complete, &c);
    /* registration on the loop thread races with both */
    for (int i = 0; i < N; i++)
        ld_future_on_complete(ld_future_ref(fs[i]), ld_test_count_cb, &calls);
    pthread_join(ta, NULL);
    pthread_join(tc, NULL);
    ld_test_flush();
    ck_assert_int_eq(calls, N);
    for (int i = 0; i < N; i++) {
        ck_assert(!ld_future_is_pending(fs[i]));
        ld_future_unref(fs[i]);
    }
}
END_TEST

START_TEST(test_wait_wakes_when_thread_completes_future_without_callbacks)
{
    ld_future *f = ld_future_new(B);
    struct job j = {ld_future_ref(f), 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, complete_later, &j), 0);
    ld_test_wait(f); /* the guard timer would fail the test after 60 s */
    ck_assert_int_eq(ld_future_int(f), 7);
    pthread_join(t, NULL);
    ld_test_flush();
    ld_future_unref(f);
}
END_TEST

/* ---- callbacks of one future keep their order across threads ------------- */

enum { ORDERED = 20000 };
static int first_seen[ORDERED];
static int order_errors;

static void first_cb(ld_future *f, void *arg)
{
    (void)f;
    first_seen[(intptr_t)arg] = 1;
}

static void second_cb(ld_future *f, void *arg)
{
    (void)f;
    if (!first_seen[(intptr_t)arg])
        order_errors++;
}

START_TEST(test_callback_added_during_remote_completion_runs_after_earlier_ones)
{
    static ld_future *fs[ORDERED];
    order_errors = 0;
    for (intptr_t i = 0; i < ORDERED; i++) {
        first_seen[i] = 0;
        fs[i] = ld_future_new(B);
        ld_future_on_complete(ld_future_ref(fs[i]), first_cb, (void *)i);
        ld_future_ref(fs[i]); /* the completing thread's reference */
    }
    struct racer a = {fs, ORDERED, 0};
    pthread_t t;
    pthread_create(&t, NULL, race_complete, &a);
    for (intptr_t i = 0; i < ORDERED; i++) /* races with the completions */
        ld_future_on_complete(ld_future_ref(fs[i]), second_cb, (void *)i);
    pthread_join(t, NULL);
    ld_test_flush();
    ck_assert_int_eq(order_errors, 0);
    for (int i = 0; i < ORDERED; i++) {
        ck_assert(first_seen[i]);
        ld_future_unref(fs[i]);
    }
}
END_TEST

/* ---- waiting while another thread runs the loop -------------------------- */

struct waiter {
    ld_future *f;
    atomic_int rc;
    atomic_int done;
};

static void *wait_from_thread(void *arg)
{
    struct waiter *w = arg;
    struct timespec ts = {0, 20 * 1000 * 1000}; /* let the loop start */
    nanosleep(&ts, NULL);
    atomic_store(&w->rc, ld_future_wait(w->f));
    atomic_store(&w->done, 1);
    return NULL;
}

static void stop_when_done(evutil_socket_t fd, short what, void *arg)
{
    struct waiter *w = arg;
    (void)fd;
    (void)what;
    if (atomic_load(&w->done))
        event_base_loopbreak(B);
}

START_TEST(test_wait_while_loop_runs_on_other_thread_is_ebusy)
{
    struct waiter w = {.f = ld_future_new(B)};
    atomic_init(&w.rc, 1);
    atomic_init(&w.done, 0);
    struct event *tick = event_new(B, -1, EV_PERSIST, stop_when_done, &w);
    struct timeval ms = {0, 1000};
    event_add(tick, &ms);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, wait_from_thread, &w), 0);
    event_base_loop(B, 0); /* runs until the waiter has returned */
    pthread_join(t, NULL);
    ck_assert_int_eq(atomic_load(&w.rc), LD_EBUSY);
    ck_assert(ld_future_is_pending(w.f));
    event_free(tick);
    ld_future_unref(w.f);
}
END_TEST

/* ---- store results released on other threads ------------------------- */

enum { LEASES = 2000 };

struct readers {
    ld_future *fs[LEASES];
    atomic_int ready; /* how many of fs are set */
    long versions;    /* sum of the versions read */
};

static void *read_and_release(void *arg)
{
    struct readers *r = arg;
    for (int i = 0; i < LEASES; i++) {
        while (atomic_load(&r->ready) <= i)
            sched_yield();
        r->versions += ld_item_version(ld_future_json(r->fs[i]));
        ld_future_unref(r->fs[i]);
    }
    return NULL;
}

/* The memory store's get results hold a lease on a generation of the store
 * instead of a reference on the item; a thread that releases them while the
 * loop thread keeps writing (retiring items) and reading (starting new
 * generations) must free each item once, after its last reader. */
START_TEST(test_store_get_results_released_on_another_thread)
{
    ld_store *st = ld_memory_store_new(B);
    struct readers *r = calloc(1, sizeof(*r));
    ck_assert_ptr_nonnull(r);
    atomic_init(&r->ready, 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, read_and_release, r), 0);
    long expect = 0;
    for (int i = 0; i < LEASES; i++) {
        json_t *item = json_pack("{s:s, s:i}", "key", "a", "version", i + 1);
        ld_future_unref(ld_store_upsert(st, ld_kind_features(), item));
        json_decref(item); /* the store holds the only reference */
        r->fs[i] = ld_store_get(st, ld_kind_features(), "a");
        ld_test_wait(r->fs[i]); /* completed from the loop */
        ck_assert(ld_future_is_fulfilled(r->fs[i]));
        expect += i + 1;
        atomic_store(&r->ready, i + 1);
    }
    pthread_join(t, NULL);
    ck_assert_int_eq(r->versions, expect);
    ld_store_free(st);
    free(r);
}
END_TEST

Suite *ld_suite_future_thread(void)
{
    Suite *s = suite_create("future_thread");
    TCase *tc = tcase_create("threads");
    tcase_add_checked_fixture(tc, thread_setup, ld_test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_fulfil_from_thread_runs_callback_on_loop);
    tcase_add_test(tc, test_cancel_from_thread_runs_handler_on_loop);
    tcase_add_test(tc, test_many_producers_each_callback_once_in_order_on_loop);
    tcase_add_test(tc, test_fulfil_and_cancel_race_settles_once);
    tcase_add_test(tc, test_wait_while_loop_runs_on_other_thread_is_ebusy);
    tcase_add_test(tc, test_wait_wakes_when_thread_completes_future_without_callbacks);
    tcase_add_test(tc, test_callback_added_during_remote_completion_runs_after_earlier_ones);
    tcase_add_test(tc, test_store_get_results_released_on_another_thread);
    suite_add_tcase(s, tc);
    return s;
}
