/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The library's internal allocation functions (core/core-internal.h) for
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

/* ld__malloc, ld__calloc, ld__realloc, ld__free and ld__strdup: the shim of
 * libldasync-testing, here as ordinary functions (not static inline). */
#define LD__ALLOC_SHIM
#include "testing/testing-internal.h"

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
