/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The library's internal allocation functions (lib/core/alloc-internal.h) for
 * library files compiled into the test program (lib/eval/eval_ops.c: see
 * Makefile.am). libldasync exports only ld_* names, so the test program
 * cannot call its ld__* functions; a file compiled into the program gets
 * these instead. They allocate through the functions libldasync uses
 * (ld_get_alloc_funcs), so ld_set_alloc_funcs() governs both, and a test
 * that makes allocations fail reaches the compiled-in file too.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/core-internal.h"

void *ld__malloc(size_t size)
{
    ld_malloc_fn fn;
    ld_get_alloc_funcs(&fn, NULL, NULL);
    return fn(size ? size : 1);
}

void *ld__calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = ld__malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void *ld__realloc(void *ptr, size_t size)
{
    if (!ptr)
        return ld__malloc(size);
    ld_realloc_fn fn;
    ld_get_alloc_funcs(NULL, &fn, NULL);
    return fn(ptr, size ? size : 1);
}

void ld__free(void *ptr)
{
    if (!ptr)
        return;
    ld_dealloc_fn fn;
    ld_get_alloc_funcs(NULL, NULL, &fn);
    fn(ptr);
}

/* Whether libevent threading is on, as the library's futures tell it (for
 * lib/core/worker.c, which runs its jobs on a thread only then). */
#ifdef HAVE_EVTHREAD_GET_LOCK_CALLBACKS
#include <event2/thread.h>
struct evthread_lock_callbacks *evthread_get_lock_callbacks(void);
bool ld__future_threads(void)
{
    const struct evthread_lock_callbacks *cb = evthread_get_lock_callbacks();
    return cb && cb->alloc;
}
#else
bool ld__future_threads(void)
{
    return true;
}
#endif

/* A formatted string, or NULL when memory ran out (as lib/core/alloc.c). */
char *ld__vasprintf(const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    char *msg = len >= 0 ? ld__malloc((size_t)len + 1) : NULL;
    if (msg)
        vsnprintf(msg, (size_t)len + 1, fmt, again);
    va_end(again);
    return msg;
}
