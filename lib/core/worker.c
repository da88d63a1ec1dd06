/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: workers, which run jobs off the loop (core-internal.h,
 * "Workers").
 *
 * A job has two futures: `out`, the caller's, and `done`, the runner's
 * signal. The runner (the worker's thread, or a loop callback when
 * threading is off) calls the job's function, writes the outcome into the
 * job and fulfils `done`; job_done() then runs on the loop and completes
 * `out` with that outcome. So the job's memory, and `out`, are only touched
 * on the loop once the runner is done with them, and the caller's callbacks
 * on `out` run from the loop like those of every future. A cancel handler
 * on `out` tells the runner that the job is no longer wanted.
 *
 * The thread touches nothing but the queue (under the mutex), the jobs it
 * runs and the descriptors it is handed to close.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include <ldasync/error.h>

#include "core/core-internal.h"

#define CLOSING_MAX 4 /* descriptors waiting for the thread to close them */

struct ld__work {
    struct ld__work *next;
    struct ld__worker *w; /* valid while the job runs */
    ld__job_fn fn;
    void *arg;
    ld_free_fn free_fn;
    ld_future *done; /* the runner's reference, released by the runner */
    ld_future *out;  /* the job's reference, completed by job_done() */
    void *value;     /* the outcome, written by the runner before `done` */
    int code;
    atomic_bool cancelled;
    bool on_loop;
    unsigned refs; /* loop thread: job_done's, the cancel handler's */
};

struct ld__worker {
    struct event_base *base;
    atomic_bool quit; /* set on the loop, read by the thread and the jobs */
    /* the thread */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started;                 /* loop thread */
    struct ld__work *head, *tail; /* under mu */
    int closing[CLOSING_MAX];     /* under mu: descriptors the thread closes */
    size_t nclosing;
    /* jobs run on the loop (threading off) */
    struct event *run_ev;
    struct ld__work *lhead, *ltail;
};

bool ld__job_wanted(const struct ld__work *job)
{
    return !atomic_load_explicit(&job->cancelled, memory_order_relaxed) &&
           !atomic_load_explicit(&job->w->quit, memory_order_relaxed);
}

bool ld__job_on_loop(const struct ld__work *job)
{
    return job->on_loop;
}

static void job_unref(struct ld__work *job)
{
    if (--job->refs == 0)
        ld__free(job);
}

/* The runner's last word on `job`, which may be freed as soon as it is
 * said. */
static void job_finish(struct ld__work *job, void *value, int code)
{
    ld_future *done = job->done;
    job->value = value;
    job->code = code;
    ld_future_fulfill(done);
    ld_future_unref(done);
}

/* Runs `job` on the runner (the thread, or the loop). */
static void job_run(struct ld__work *job)
{
    int code = 0;
    void *v = ld__job_wanted(job) ? job->fn(job, job->arg, &code) : NULL;
    if (v && !ld__job_wanted(job)) { /* dropped here, not on the loop */
        if (job->free_fn)
            job->free_fn(v);
        v = NULL;
    }
    if (!v)
        code = !ld__job_wanted(job) ? LD_ECANCELED : code ? code : LD_ENOMEM;
    job_finish(job, v, code);
}

/* On the loop, once the runner is done: the outcome goes to `out`. */
static void job_done(ld_future *done, void *arg)
{
    struct ld__work *job = arg;
    (void)done;
    int rc = job->value ? ld_future_fulfill_ptr(job->out, job->value, job->free_fn)
                        : ld_future_reject(job->out, job->code, NULL);
    job->value = NULL;
    if (rc == 0 && job->refs > 1) /* completed by us: the cancel handler never runs */
        job->refs--;
    ld_future_unref(job->out);
    job->out = NULL;
    job_unref(job);
}

static void job_cancelled(ld_future *out, void *arg)
{
    struct ld__work *job = arg;
    (void)out;
    atomic_store(&job->cancelled, true);
    job_unref(job);
}

/* The jobs of `list`, which never ran: rejected with LD_ECANCELED. */
static void cancel_jobs(struct ld__work *list)
{
    while (list) {
        struct ld__work *next = list->next;
        job_finish(list, NULL, LD_ECANCELED);
        list = next;
    }
}

static void *thread_main(void *arg)
{
    struct ld__worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->head && !w->nclosing && !atomic_load(&w->quit))
            pthread_cond_wait(&w->cv, &w->mu);
        int fds[CLOSING_MAX];
        size_t nfds = w->nclosing;
        memcpy(fds, w->closing, nfds * sizeof(int));
        w->nclosing = 0;
        bool quit = atomic_load(&w->quit);
        struct ld__work *job = quit ? NULL : w->head;
        if (job) {
            w->head = job->next;
            if (!w->head)
                w->tail = NULL;
        }
        pthread_mutex_unlock(&w->mu);
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
        if (quit)
            return NULL; /* what is still queued is the loop's, at stop */
        if (job)
            job_run(job);
    }
}

static void run_loop_jobs(evutil_socket_t fd, short what, void *arg)
{
    struct ld__worker *w = arg;
    (void)fd;
    (void)what;
    struct ld__work *job = w->lhead;
    if (!job)
        return;
    w->lhead = job->next;
    if (!w->lhead)
        w->ltail = NULL;
    else
        event_active(w->run_ev, EV_TIMEOUT, 0); /* one job per pass of the loop */
    if (!ld_future_is_pending(job->out))        /* cancelled; its handler comes later */
        atomic_store(&job->cancelled, true);
    job_run(job);
}

/* Hands `job` to the thread: false when there is none. */
static bool queue_on_thread(struct ld__worker *w, struct ld__work *job)
{
    if (!ld__future_threads())
        return false;
    if (!w->started)
        w->started = pthread_create(&w->thread, NULL, thread_main, w) == 0;
    if (!w->started)
        return false;
    pthread_mutex_lock(&w->mu);
    if (w->tail)
        w->tail->next = job;
    else
        w->head = job;
    w->tail = job;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return true;
}

static void queue_on_loop(struct ld__worker *w, struct ld__work *job)
{
    job->on_loop = true;
    if (!w->run_ev) {
        w->run_ev = ld__calloc(1, event_get_struct_event_size());
        if (w->run_ev && event_assign(w->run_ev, w->base, -1, 0, run_loop_jobs, w) != 0) {
            ld__free(w->run_ev);
            w->run_ev = NULL;
        }
    }
    if (!w->run_ev) {
        job_finish(job, NULL, LD_ENOMEM);
        return;
    }
    if (w->ltail)
        w->ltail->next = job;
    else
        w->lhead = job;
    w->ltail = job;
    event_active(w->run_ev, EV_TIMEOUT, 0);
}

ld_future *ld__worker_submit(struct ld__worker *w, ld__job_fn fn, void *arg, ld_free_fn free_fn)
{
    struct ld__work *job = ld__calloc(1, sizeof(*job));
    ld_future *out = job ? ld_future_new(w->base) : NULL;
    ld_future *done = out ? ld_future_new(w->base) : NULL;
    if (!done || ld_future_on_complete(ld_future_ref(done), job_done, job) != 0) {
        ld_future_unref(done);
        ld_future_unref(out);
        ld__free(job);
        return NULL;
    }
    /* from here on job_done runs once `done` completes */
    job->refs = 1;
    job->w = w;
    job->fn = fn;
    job->arg = arg;
    job->free_fn = free_fn;
    job->done = done; /* the runner's reference */
    job->out = out;   /* the job's */
    atomic_init(&job->cancelled, false);
    if (ld_future_set_cancel_handler(out, job_cancelled, job) == 0)
        job->refs++;
    if (atomic_load(&w->quit))
        job_finish(job, NULL, LD_ECANCELED);
    else if (!queue_on_thread(w, job))
        queue_on_loop(w, job);
    return ld_future_ref(out);
}

struct ld__worker *ld__worker_new(struct event_base *base)
{
    struct ld__worker *w = ld__calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->base = base;
    atomic_init(&w->quit, false);
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        ld__free(w);
        return NULL;
    }
    if (pthread_cond_init(&w->cv, NULL) != 0) {
        pthread_mutex_destroy(&w->mu);
        ld__free(w);
        return NULL;
    }
    return w;
}

void ld__worker_close_later(struct ld__worker *w, int fd)
{
    bool handed = false;
    if (w->started && !atomic_load(&w->quit)) {
        pthread_mutex_lock(&w->mu);
        if (w->nclosing < CLOSING_MAX) {
            w->closing[w->nclosing++] = fd;
            pthread_cond_signal(&w->cv);
            handed = true;
        }
        pthread_mutex_unlock(&w->mu);
    }
    if (!handed)
        close(fd);
}

void ld__worker_stop(struct ld__worker *w)
{
    atomic_store(&w->quit, true);
    pthread_mutex_lock(&w->mu);
    struct ld__work *queued = w->head;
    w->head = w->tail = NULL;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    cancel_jobs(queued);
    queued = w->lhead;
    w->lhead = w->ltail = NULL;
    cancel_jobs(queued);
}

void ld__worker_free(struct ld__worker *w)
{
    if (!w)
        return;
    ld__worker_stop(w);
    if (w->started)
        pthread_join(w->thread, NULL);
    for (size_t i = 0; i < w->nclosing; i++) /* the thread has ended: no lock */
        close(w->closing[i]);
    if (w->run_ev) {
        event_del(w->run_ev);
        ld__free(w->run_ev);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    ld__free(w);
}
