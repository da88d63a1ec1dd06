/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * installcheck-threads.c: an outside program, built by `make installcheck` (and
 * so by `make distcheck`) against the installed ldasync, as docs/design.md and
 * README tell a threaded program to build:
 *     cc installcheck-threads.c `pkg-config --cflags --libs ldasync libevent_pthreads` -pthread
 * Another thread fulfils a future; its callback runs on the loop thread; the
 * loop is drained before event_base_free().
 */
#include <pthread.h>
#include <stdio.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <ldasync/ldasync.h>

static pthread_t loop_thread;
static int ran_on_loop;

static void *producer(void *arg)
{
    ld_future *f = arg; /* this thread's own reference */
    ld_future_fulfill_int(f, 42);
    ld_future_unref(f);
    return NULL;
}

static void done(ld_future *f, void *arg)
{
    (void)arg;
    ran_on_loop = pthread_equal(pthread_self(), loop_thread) && ld_future_int(f) == 42;
}

int main(void)
{
    if (evthread_use_pthreads() != 0) /* before event_base_new() */
        return 1;
    loop_thread = pthread_self();
    struct event_base *base = event_base_new();
    ld_future *f = base ? ld_future_new(base) : NULL;
    if (f == NULL)
        return 1;
    ld_future_on_complete(ld_future_ref(f), done, NULL);

    pthread_t t;
    if (pthread_create(&t, NULL, producer, ld_future_ref(f)) != 0)
        return 1;
    int rc = ld_future_wait(f); /* blocks in the loop until the thread completes f */
    pthread_join(t, NULL);
    ld_future_unref(f);

    /* Tear-down: run what ldasync still has queued, then free the base. */
    while (event_base_loop(base, EVLOOP_NONBLOCK) == 0)
        ;
    event_base_free(base);

    int ok = rc == 0 && ran_on_loop;
    printf("ldasync %s with libevent threading: %s\n", ld_version_string(), ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
