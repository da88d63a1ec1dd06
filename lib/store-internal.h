/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: what the store front layer (store.c) offers implementations inside
 * the library. Never installed.
 */
#ifndef LDASYNC_STORE_INTERNAL_H
#define LDASYNC_STORE_INTERNAL_H

#include <ldasync/store.h>

/* Synchronous operations of an implementation that always answers at once
 * (the memory store). With them the front layer needs no future for the
 * implementation: the caller's future is one completed later
 * (future-internal.h), made by get itself and, for the writes, by the front
 * before the write. Inputs are validated as for struct ld_store_ops. */
struct ld__store_sync_ops {
    /* A new future on `base` completed later (ld__future_later_json()) with
     * the stored item or with NULL when missing or deleted; NULL without
     * memory. `len`: strlen(key). */
    ld_future *(*get)(void *impl, struct event_base *base, const ld_kind *kind, const char *key,
                      size_t len);
    /* The same for all: the object of the items without tombstones. */
    ld_future *(*all)(void *impl, struct event_base *base, const ld_kind *kind);
    /* 1 if applied, 0 if not, or a negative error code. */
    int (*upsert)(void *impl, const ld_kind *kind, const json_t *item,
                  const struct ld_item_info *info);
    int (*del)(void *impl, const ld_kind *kind, const char *key, int64_t version);
    /* Validates all_data as ld_data_validate() does and replaces the data
     * with it, all or nothing: 0, LD_EINVAL (with *why), LD_ENOMEM. */
    int (*init)(void *impl, const json_t *all_data, const char **why);
    /* Optional: a write of `key` of `kind` is coming (called while the
     * item is validated, before upsert); start loading what it will touch. */
    void (*prefetch)(void *impl, const ld_kind *kind, const char *key, size_t len);
};

/* ld_store_new() plus `sync` (borrowed, must outlive the store), used while
 * no operation of the store is waiting. */
ld_store *ld__store_new_sync(struct event_base *base, const struct ld_store_ops *ops,
                             const struct ld__store_sync_ops *sync, void *impl);

#endif /* LDASYNC_STORE_INTERNAL_H */
