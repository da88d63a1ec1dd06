/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The failing allocator of the chaos tests (check_chaos.c,
 * check_serve_chaos.c): between ON and OFF (g_counting), the g_fail_at-th
 * allocation fails (0: none does); g_calls counts them. Install
 * chaos_malloc and chaos_realloc with ld_set_alloc_funcs(), and
 * chaos_json_malloc with json_set_alloc_funcs() to count (and fail)
 * jansson's allocations too when g_json is set.
 *
 * Definitions, not declarations: each test program that includes it has
 * its own counters (static), so that the suites of check_ldasync and
 * check_chaos never share a count.
 */
#ifndef LDASYNC_CHECK_FAIL_ALLOC_H
#define LDASYNC_CHECK_FAIL_ALLOC_H

#include <stdbool.h>
#include <stdlib.h>

#include <check.h>
#include <ldasync/alloc.h>

static long g_fail_at; /* 0: nothing fails */
static long g_calls;
static bool g_json; /* jansson's allocations count (and fail) too */
static bool g_counting;

/* Atomic: libcurl allocates through the hooks on its resolver's thread too
 * (lib/net/http.c). */
static inline bool fail_now(void)
{
    return __atomic_load_n(&g_counting, __ATOMIC_RELAXED) &&
           __atomic_load_n(&g_fail_at, __ATOMIC_RELAXED) &&
           __atomic_add_fetch(&g_calls, 1, __ATOMIC_RELAXED) ==
               __atomic_load_n(&g_fail_at, __ATOMIC_RELAXED);
}

static inline void *chaos_malloc(size_t n)
{
    return fail_now() ? NULL : malloc(n);
}

static inline void *chaos_realloc(void *p, size_t n)
{
    return fail_now() ? NULL : realloc(p, n);
}

static inline void *chaos_json_malloc(size_t n)
{
    return g_json && fail_now() ? NULL : malloc(n);
}

/* A run with the library's `n`-th allocation failing: the hooks installed
 * (freeing with free(3)) and the count started. Needs <ldasync/alloc.h>. */
#define CHAOS_BEGIN(n)                                                              \
    do {                                                                            \
        __atomic_store_n(&g_fail_at, (n), __ATOMIC_RELAXED);                        \
        ck_assert_int_eq(ld_set_alloc_funcs(chaos_malloc, chaos_realloc, free), 0); \
        __atomic_store_n(&g_calls, 0, __ATOMIC_RELAXED);                            \
        __atomic_store_n(&g_counting, true, __ATOMIC_RELAXED);                      \
    } while (0)

/* Ends the run (the default allocator back): whether the `n`-th allocation
 * came (and failed); false means the run went through without failing. */
static inline bool chaos_end(long n)
{
    __atomic_store_n(&g_counting, false, __ATOMIC_RELAXED);
    ld_set_alloc_funcs(NULL, NULL, NULL);
    return __atomic_load_n(&g_calls, __ATOMIC_RELAXED) >= n;
}

#endif /* LDASYNC_CHECK_FAIL_ALLOC_H */
