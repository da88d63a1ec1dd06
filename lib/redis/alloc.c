/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-redis's allocation: through the functions libldasync is set to
 * use (ld_set_alloc_funcs(), alloc.h), so that a program's allocator and
 * the chaos tests reach this library too.
 */
#include <stdint.h>
#include <string.h>

#include <ldasync/alloc.h>

#include "redis/redis-internal.h"

void *ldr_malloc(size_t size)
{
    ld_malloc_fn fn;
    ld_get_alloc_funcs(&fn, NULL, NULL);
    return fn(size ? size : 1);
}

void *ldr_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = ldr_malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void *ldr_realloc(void *p, size_t size)
{
    if (!p)
        return ldr_malloc(size);
    ld_realloc_fn fn;
    ld_get_alloc_funcs(NULL, &fn, NULL);
    return fn(p, size ? size : 1);
}

void ldr_free(void *p)
{
    if (!p)
        return;
    ld_dealloc_fn fn;
    ld_get_alloc_funcs(NULL, NULL, &fn);
    fn(p);
}

char *ldr_strndup(const char *s, size_t n)
{
    char *d = ldr_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

char *ldr_strdup(const char *s)
{
    return ldr_strndup(s, strlen(s));
}
