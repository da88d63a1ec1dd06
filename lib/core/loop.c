/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the per-base dispatcher (struct ld__loop, core-internal.h): the
 * registry of loops, the FIFO of callback nodes each loop runs (a local one
 * for the loop thread, a lock-free one other threads push onto) and the
 * drain that runs it from libevent. See future.c for the design and its
 * measurements; loop_for()'s fast path and running a node are inline in
 * core-internal.h.
 */
#include <event2/event.h>
#include <pthread.h>
#include <string.h>

#define LD_CORE_FUTURE_LAYOUT
#include "core/core-internal.h"

#define LD_DRAIN_BUDGET 1024 /* callbacks per loop pass before polling */

/*
 * Why a dispatcher lives as long as the process: libevent 2.1 offers no hook
 * that runs when a base is freed, and counting live futures per base to free
 * it with the last one costs two atomic operations per future (~12 ns here,
 * more than half the round-trip budget). So a dispatcher is created for each
 * base address on first use and kept; its events are plain memory that
 * libevent only references while they are active or added, which is never
 * the case once the user has released a base's futures and freed the base.
 * A new base at the same address reuses the dispatcher. The cost is one small
 * struct per distinct base address, reachable until exit.
 */
static pthread_mutex_t g_loop_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ld__loop *g_loops;
static void *g_loops_block; /* the start of g_loops's allocation */
TLS struct event_base *ld__tl_cache_base;
TLS struct ld__loop *ld__tl_cache_loop;
TLS struct ld__loop *ld__tl_drain;

static void drain_cb(evutil_socket_t fd, short what, void *arg);

static struct event *loop_event(struct event_base *base, struct ld__loop *l)
{
    struct event *ev = ld__calloc(1, event_get_struct_event_size());
    if (!ev)
        return NULL;
    if (event_assign(ev, base, -1, 0, drain_cb, l) != 0) {
        ld__free(ev);
        return NULL;
    }
    /* Priority 0 is valid on every base, also one created later at this
     * address with fewer priorities; callbacks are continuations of events
     * that already ran, so running them first keeps latency low. */
    event_priority_set(ev, 0);
    return ev;
}

/* Aligned by hand rather than with ld__aligned_alloc(), so that the registry
 * can keep the start of each allocation (*block): a dispatcher stays until
 * exit, and memcheck reports a block that only an interior pointer reaches
 * as "possibly lost". Cold, like the other rare paths added since: kept
 * out of the hot code, whose alignment the round-trip benchmarks feel. */
COLD static struct ld__loop *loop_create(struct event_base *base, void **block)
{
    unsigned char *raw = ld__malloc(sizeof(struct ld__loop) + LD__CACHE_LINE - 1);
    if (!raw)
        return NULL;
    uintptr_t line = LD__CACHE_LINE - 1;
    struct ld__loop *l = (struct ld__loop *)(((uintptr_t)raw + line) & ~line);
    *block = raw;
    memset(l, 0, sizeof(*l));
    l->base = base;
    l->rhead = &l->stub;
    atomic_init(&l->rtail, &l->stub);
    l->ev_run = loop_event(base, l);
    l->ev_yield = loop_event(base, l);
    if (!l->ev_run || !l->ev_yield) {
        ld__free(l->ev_run);
        ld__free(l->ev_yield);
        ld__free(raw);
        return NULL;
    }
    return l;
}

struct ld__loop *ld__loop_find(struct event_base *base)
{
    pthread_mutex_lock(&g_loop_mu);
    struct ld__loop *l = g_loops;
    while (l && l->base != base)
        l = l->next;
    if (!l) {
        void *block;
        l = loop_create(base, &block);
        if (l) {
            l->next = g_loops;
            l->next_block = g_loops_block;
            g_loops = l;
            g_loops_block = block;
        }
    }
    pthread_mutex_unlock(&g_loop_mu);
    if (l) {
        ld__tl_cache_base = base;
        ld__tl_cache_loop = l;
    }
    return l;
}

/* Appends the chain first..last (linked) to the producer end of the remote
 * FIFO. Any thread. */
static void remote_push(struct ld__loop *l, struct ld__node *first, struct ld__node *last)
{
    node_set_next(last, NULL);
    struct ld__node *prev = atomic_exchange(&l->rtail, last);
    /* release: whoever sees this link sees the chain's contents */
    atomic_store_explicit(&prev->link, (uintptr_t)first | (link_get(prev) & LD__LINK_XNODE),
                          memory_order_release);
}

static inline struct ld__node *next_acquire(struct ld__node *n)
{
    return (struct ld__node *)(atomic_load_explicit(&n->link, memory_order_acquire) &
                               ~LD__LINK_XNODE);
}

/* Pops the oldest remote node, or NULL when there is none or a producer is
 * between its exchange and its link (that node comes in a later pass).
 * Draining thread only. A node is handed out only once its successor is
 * linked, so no producer writes to it afterwards. */
static struct ld__node *remote_pop(struct ld__loop *l)
{
    struct ld__node *head = l->rhead, *next = next_acquire(head);
    if (head == &l->stub) {
        if (!next)
            return NULL;
        l->rhead = head = next;
        next = next_acquire(head);
    }
    if (!next) {
        if (head != atomic_load(&l->rtail))
            return NULL; /* a push is half done */
        link_put(&l->stub, 0);
        remote_push(l, &l->stub, &l->stub);
        next = next_acquire(head);
        if (!next)
            return NULL;
    }
    l->rhead = next;
    __builtin_prefetch(next);
    return head;
}

/* Appends the chain first..last to the local FIFO. Loop thread only. */
static void local_append(struct ld__loop *l, struct ld__node *first, struct ld__node *last)
{
    node_set_next(last, NULL);
    if (l->tail)
        node_set_next(l->tail, first);
    else
        l->head = first;
    l->tail = last;
}

/* Moves what other threads queued to the end of the local FIFO, so that a
 * local append keeps completion order. */
static void take_remote(struct ld__loop *l)
{
    struct ld__node *n;
    while ((n = remote_pop(l)) != NULL)
        local_append(l, n, n);
}

static void drain_cb(evutil_socket_t fd, short what, void *arg)
{
    struct ld__loop *l = arg;
    struct ld__loop *outer = ld__tl_drain;
    (void)fd;
    (void)what;
    ld__tl_drain = l;
    for (unsigned budget = LD_DRAIN_BUDGET; budget > 0; budget--) {
        struct ld__node *n = l->head;
        if (n) {
            l->head = node_next(n);
            if (!l->head)
                l->tail = NULL;
        } else if ((n = remote_pop(l)) == NULL) {
            break;
        }
        run_node(n);
    }
    ld__tl_drain = outer;
    if (UNLIKELY(atomic_load_explicit(&l->fwd_stale, memory_order_relaxed)))
        ld__fwd_clear(l); /* give the memory back once the chains settle */
    if (l->head || !remote_empty(l)) {
        static const struct timeval now = {0, 0};
        event_add(l->ev_yield, &now);
        return;
    }
    atomic_store(&l->scheduled, 0);
    /* A push that saw scheduled == 1 just before the store above relies on
     * this second look. */
    if (!remote_empty(l) && !atomic_exchange(&l->scheduled, 1))
        event_active(l->ev_run, 0, 0);
}

void ld__enqueue(struct ld__loop *l, struct ld__node *first, struct ld__node *last, unsigned shared)
{
    int local = ld__tl_drain == l || !shared;
    if (local && !remote_empty(l)) {
        take_remote(l);
        /* A push from another thread still half done: queue behind it. */
        local = remote_empty(l);
    }
    if (local) {
        local_append(l, first, last);
        if (ld__tl_drain != l && !atomic_load_explicit(&l->scheduled, memory_order_relaxed)) {
            atomic_store_explicit(&l->scheduled, 1, memory_order_relaxed);
            event_active(l->ev_run, 0, 0);
        }
        return;
    }
    remote_push(l, first, last);
    if (!atomic_load(&l->scheduled) && !atomic_exchange(&l->scheduled, 1))
        event_active(l->ev_run, 0, 0);
}
