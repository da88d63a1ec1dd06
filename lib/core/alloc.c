/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the allocation hooks (alloc.h) and the library's wrappers around
 * them (alloc-internal.h).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/error.h>

#include "core/core-internal.h"

/* Set before the library is used (alloc.h); relaxed atomics only so that a
 * thread reading them is well defined, not to make changing them while in
 * use safe. */
static _Atomic(ld_malloc_fn) g_malloc = malloc;
static _Atomic(ld_realloc_fn) g_realloc = realloc;
static _Atomic(ld_dealloc_fn) g_free = free;

int ld_set_alloc_funcs(ld_malloc_fn malloc_fn, ld_realloc_fn realloc_fn, ld_dealloc_fn free_fn)
{
    if (!malloc_fn && !realloc_fn && !free_fn) {
        malloc_fn = malloc;
        realloc_fn = realloc;
        free_fn = free;
    } else if (!malloc_fn || !realloc_fn || !free_fn) {
        return LD_EINVAL;
    }
    atomic_store_explicit(&g_malloc, malloc_fn, memory_order_relaxed);
    atomic_store_explicit(&g_realloc, realloc_fn, memory_order_relaxed);
    atomic_store_explicit(&g_free, free_fn, memory_order_relaxed);
    return 0;
}

void ld_get_alloc_funcs(ld_malloc_fn *malloc_fn, ld_realloc_fn *realloc_fn, ld_dealloc_fn *free_fn)
{
    if (malloc_fn)
        *malloc_fn = atomic_load_explicit(&g_malloc, memory_order_relaxed);
    if (realloc_fn)
        *realloc_fn = atomic_load_explicit(&g_realloc, memory_order_relaxed);
    if (free_fn)
        *free_fn = atomic_load_explicit(&g_free, memory_order_relaxed);
}

void *ld__malloc(size_t size)
{
    return atomic_load_explicit(&g_malloc, memory_order_relaxed)(size ? size : 1);
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
    return atomic_load_explicit(&g_realloc, memory_order_relaxed)(ptr, size ? size : 1);
}

void ld__free(void *ptr)
{
    if (ptr)
        atomic_load_explicit(&g_free, memory_order_relaxed)(ptr);
}

char *ld__strdup(const char *s)
{
    size_t len = strlen(s) + 1;
    char *copy = ld__malloc(len);
    if (copy)
        memcpy(copy, s, len);
    return copy;
}

char *ld__vasprintf(const char *fmt, va_list ap)
{
    char small[256];
    va_list again;
    va_copy(again, ap);
    int len = vsnprintf(small, sizeof(small), fmt, ap);
    char *msg = NULL;
    if (len >= 0 && (msg = ld__malloc((size_t)len + 1)) != NULL) {
        if ((size_t)len < sizeof(small))
            memcpy(msg, small, (size_t)len + 1);
        else
            vsnprintf(msg, (size_t)len + 1, fmt, again);
    }
    va_end(again);
    return msg;
}

/* `off`, the distance from the hook's block to the aligned pointer, is kept
 * in the two bytes just below the aligned pointer. */
void *ld__aligned_alloc(size_t align, size_t size)
{
    if (size > SIZE_MAX - align - sizeof(uint16_t))
        return NULL;
    unsigned char *raw = ld__malloc(size + align + sizeof(uint16_t));
    if (!raw)
        return NULL;
    uintptr_t start = (uintptr_t)(raw + sizeof(uint16_t));
    uintptr_t aligned = (start + align - 1) & ~(uintptr_t)(align - 1);
    uint16_t off = (uint16_t)(aligned - (uintptr_t)raw);
    memcpy((unsigned char *)aligned - sizeof(off), &off, sizeof(off));
    return (void *)aligned;
}

void ld__aligned_free(void *ptr)
{
    if (!ptr)
        return;
    uint16_t off;
    memcpy(&off, (unsigned char *)ptr - sizeof(off), sizeof(off));
    ld__free((unsigned char *)ptr - off);
}
