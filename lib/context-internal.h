/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: what the evaluator reads of a context, without copies or
 * reference counts. Never installed. `ctx` is never NULL here; `i` is below
 * ld_context_kind_count(). Every json_t is borrowed from the context.
 */
#ifndef LDASYNC_CONTEXT_INTERNAL_H
#define LDASYNC_CONTEXT_INTERNAL_H

#include <stddef.h>

#include <ldasync/context.h>

/* The index of the individual context of kind `kind` (`len` bytes), or -1. */
int ld__context_find(const ld_context *ctx, const char *kind, size_t len);

/* Its kind and key (strings). */
json_t *ld__context_part_kind(const ld_context *ctx, size_t i);
json_t *ld__context_part_key(const ld_context *ctx, size_t i);

/* Its top-level attribute `name` (`len` bytes, unescaped): "kind", "key",
 * "anonymous" (always a bool), or another; NULL when absent. */
json_t *ld__context_part_attr(const ld_context *ctx, size_t i, const char *name, size_t len);

#endif /* LDASYNC_CONTEXT_INTERNAL_H */
