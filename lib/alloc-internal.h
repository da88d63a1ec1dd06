/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the library's allocation functions (alloc.h's hooks behind them).
 * Never installed. Every allocation of libldasync goes through these.
 */
#ifndef LDASYNC_ALLOC_INTERNAL_H
#define LDASYNC_ALLOC_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include <ldasync/alloc.h>

/* Like malloc/calloc/realloc/free/strdup, through the hooks. A size of 0
 * allocates one byte (never NULL for 0). ld__calloc checks n * size for
 * overflow. ld__realloc(NULL, n) is ld__malloc(n). ld__free(NULL) is a
 * no-op. */
void *ld__malloc(size_t size);
void *ld__calloc(size_t n, size_t size);
void *ld__realloc(void *ptr, size_t size);
void ld__free(void *ptr);
char *ld__strdup(const char *s);

/* A formatted string (vsnprintf), or NULL when memory ran out. */
LD_PRINTF(1, 0) char *ld__vasprintf(const char *fmt, va_list ap);

/* The cache line the library lays out for: what ld__aligned_alloc()
 * aligns hot arrays to, what _Alignas keeps writers of different threads
 * apart by, and the size of the structs that must fill exactly one (a
 * future, a slot of the memory store; static_assert'ed). 64 bytes on x86-64
 * and most arm64 cores. */
#define LD__CACHE_LINE 64

/* `size` bytes aligned to `align` (a power of two, at most 4096), through
 * the hooks (over-allocating); freed only with ld__aligned_free. */
void *ld__aligned_alloc(size_t align, size_t size);
void ld__aligned_free(void *ptr);

#endif /* LDASYNC_ALLOC_INTERNAL_H */
