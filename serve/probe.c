/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/probe.c: the loop probe (lds_server_options.loop_probe_ms): how
 * long the loop was held. A timer due every loop_probe_ms measures, each
 * time it runs,
 *   - how late it ran (wall time): a pass of the loop that takes longer
 *     than the period delays it by about as much (or the machine ran
 *     something else);
 *   - the loop thread's CPU time since it last ran: the work of the passes
 *     in between, which the period keeps to about one pass when the loop
 *     is busy.
 * Both go into histograms of fixed bounds that /status reports ("loop"),
 * counted since the start: a bench reads them before and after a run.
 */
#include <time.h>

#include <event2/event.h>

#include "serve-internal.h"

const int lds_probe_bounds_ms[LDS_PROBE_BUCKETS - 1] = {1, 2, 3, 5, 7, 10, 15, 20, 50, 100};

struct lds_probe {
    lds_server *srv;
    struct event *ev;
    int64_t period_ns;
    int64_t due_ns; /* when the timer was due (monotonic) */
    int64_t cpu_ns; /* the thread's CPU time then */
    struct lds_probe_stats st;
};

static int64_t cpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void count(uint64_t *hist, int64_t *max, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    if (ns > *max)
        *max = ns;
    int b = 0;
    while (b < LDS_PROBE_BUCKETS - 1 && ns >= (int64_t)lds_probe_bounds_ms[b] * 1000000)
        b++;
    hist[b]++;
}

static void probe_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct lds_probe *p = arg;
    int64_t now = lds_now_ns(), cpu = cpu_now_ns();
    count(p->st.late, &p->st.late_max_ns, now - p->due_ns);
    count(p->st.cpu, &p->st.cpu_max_ns, cpu - p->cpu_ns);
    p->st.ticks++;
    p->due_ns = now + p->period_ns;
    p->cpu_ns = cpu;
}

int lds_probe_start(lds_server *srv, int period_ms)
{
    if (period_ms <= 0)
        return 0;
    struct lds_probe *p = lds_calloc(1, sizeof *p);
    if (!p)
        return -1;
    p->srv = srv;
    p->period_ns = (int64_t)period_ms * 1000000;
    p->ev = event_new(srv->base, -1, EV_PERSIST, probe_tick, p);
    struct timeval tv = {period_ms / 1000, (period_ms % 1000) * 1000};
    if (!p->ev || event_add(p->ev, &tv) != 0) {
        if (p->ev)
            event_free(p->ev);
        lds_free(p);
        return -1;
    }
    p->due_ns = lds_now_ns() + p->period_ns;
    p->cpu_ns = cpu_now_ns();
    srv->probe = p;
    return 0;
}

const struct lds_probe_stats *lds_server_probe(const lds_server *srv)
{
    return srv && srv->probe ? &srv->probe->st : NULL;
}

void lds_probe_stop(lds_server *srv)
{
    if (srv->probe)
        event_del(srv->probe->ev);
}

void lds_probe_free(lds_server *srv)
{
    struct lds_probe *p = srv->probe;
    if (!p)
        return;
    event_free(p->ev);
    lds_free(p);
    srv->probe = NULL;
}
