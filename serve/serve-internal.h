/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/serve-internal.h: what the files of ldasync-serve share (internal,
 * not installed). The program's own names begin with lds_: ld_ is the
 * library's public prefix and ld__ its internal one, which the program does
 * not use (it is linked against libldasync like any user of it).
 */
#ifndef LDASYNC_SERVE_SERVE_INTERNAL_H
#define LDASYNC_SERVE_SERVE_INTERNAL_H

#include <stddef.h>

/* ------------------------------------------------------------------------- */
/* Memory (alloc.c): through the library's allocation functions
 * (ld_get_alloc_funcs), so that ld_set_alloc_funcs() governs the program's
 * memory too, and a test that makes allocations fail reaches it. */

/* malloc(size); a size of 0 allocates 1 byte. */
void *lds_malloc(size_t size);
/* calloc(n, size); NULL when n * size overflows. */
void *lds_calloc(size_t n, size_t size);
/* free(ptr); NULL-safe. */
void lds_free(void *ptr);

#endif /* LDASYNC_SERVE_SERVE_INTERNAL_H */
