/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/alloc.c: the program's allocation functions, on top of the
 * library's public ld_get_alloc_funcs() (serve-internal.h). Its own copy of
 * the shim of lib/testing/testing-internal.h: a program includes public
 * headers only, and three functions do not earn the library new public API.
 */
#include <stdint.h>
#include <string.h>

#include <ldasync/alloc.h>

#include "serve-internal.h"

void *lds_malloc(size_t size)
{
    ld_malloc_fn fn;
    ld_get_alloc_funcs(&fn, NULL, NULL);
    return fn(size ? size : 1);
}

void *lds_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = lds_malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void lds_free(void *ptr)
{
    if (!ptr)
        return;
    ld_dealloc_fn fn;
    ld_get_alloc_funcs(NULL, NULL, &fn);
    fn(ptr);
}
