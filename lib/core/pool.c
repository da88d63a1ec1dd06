/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the memory of futures: per-thread free lists over 512-future
 * slabs. The fast path (future_mem(), future_mem_free()) is inline in
 * core-internal.h; here are the rare paths: a thread's first use, refilling
 * an empty list, giving back a long one, a thread's exit.
 *
 * A future is 64 bytes, one cache line; from a slab it has no malloc header
 * and its neighbours are futures. Measured (see future.c), a batched round
 * trip took 16.6 ns with the pool and 26.5 ns with malloc per future
 * (LDASYNC_NO_POOL=1). Each thread keeps up to LD_POOL_KEEP free futures
 * without a lock; beyond that, and when the thread exits, they go to a
 * shared list (one mutex) that empty lists refill from before a new slab
 * is made.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LD_CORE_FUTURE_LAYOUT
#include "core/core-internal.h"

#define LD_POOL_SLAB 512 /* futures per slab (32 KiB) */

#if defined(__SANITIZE_ADDRESS__)
#define LD_POOL_DEFAULT 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LD_POOL_DEFAULT 0
#endif
#endif
#ifndef LD_POOL_DEFAULT
#define LD_POOL_DEFAULT 1
#endif

TLS struct ld__pool ld__tl_pool;
atomic_int ld__pool_on = -1; /* -1 until pool_init_once() ran */
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static ld_future *g_pool_free;
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_pool_key;

/* Thread exit: hand the thread's free futures to everyone. */
static void pool_thread_exit(void *arg)
{
    struct ld__pool *p = arg;
    ld_future *f = p->free;
    if (!f)
        return;
    ld_future *last = f;
    while (pool_link(last))
        last = pool_link(last);
    pthread_mutex_lock(&g_pool_mu);
    pool_set_link(last, g_pool_free);
    g_pool_free = p->free;
    pthread_mutex_unlock(&g_pool_mu);
    p->free = NULL;
    p->n = 0;
}

static void pool_init_once(void)
{
    const char *env = getenv("LDASYNC_NO_POOL");
    pthread_key_create(&g_pool_key, pool_thread_exit);
    atomic_store(&ld__pool_on, LD_POOL_DEFAULT && !(env && *env && strcmp(env, "0") != 0));
}

COLD int ld__pool_init(void)
{
    pthread_once(&g_pool_once, pool_init_once);
    return atomic_load(&ld__pool_on);
}

COLD void ld__pool_register(struct ld__pool *p)
{
    p->registered = 1;
    pthread_setspecific(g_pool_key, p);
}

COLD ld_future *ld__pool_refill(struct ld__pool *p)
{
    if (!p->registered)
        ld__pool_register(p);
    pthread_mutex_lock(&g_pool_mu);
    ld_future *got = g_pool_free;
    size_t n = 0;
    if (got) {
        ld_future *last = got;
        while (++n < LD_POOL_KEEP / 2 && pool_link(last))
            last = pool_link(last);
        g_pool_free = pool_link(last);
        pool_set_link(last, NULL);
    }
    pthread_mutex_unlock(&g_pool_mu);
    if (!got) {
        /* Slabs are never returned to malloc: a server's peak number of
         * futures stays available for reuse (see README, memory). */
        /* Aligned, so that each future is exactly one cache line. */
        ld_future *slab = ld__aligned_alloc(LD__CACHE_LINE, LD_POOL_SLAB * sizeof(ld_future));
        if (!slab)
            return NULL;
        for (size_t i = 1; i < LD_POOL_SLAB; i++)
            pool_set_link(&slab[i], i + 1 < LD_POOL_SLAB ? &slab[i + 1] : NULL);
        p->free = &slab[1];
        p->n = LD_POOL_SLAB - 1;
        return &slab[0];
    }
    p->free = pool_link(got);
    p->n = n - 1;
    return got;
}

COLD void ld__pool_give_back(struct ld__pool *p)
{
    ld_future *first = p->free, *last = first;
    for (size_t i = 1; i < LD_POOL_KEEP / 2; i++)
        last = pool_link(last);
    p->free = pool_link(last);
    p->n -= LD_POOL_KEEP / 2;
    pthread_mutex_lock(&g_pool_mu);
    pool_set_link(last, g_pool_free);
    g_pool_free = first;
    pthread_mutex_unlock(&g_pool_mu);
}
