/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: what the evaluator reads of a store without a future. Never
 * installed.
 */
#ifndef LDASYNC_STORE_INTERNAL_H
#define LDASYNC_STORE_INTERNAL_H

#include <stddef.h>

#include <ldasync/store.h>

/* The store's get_now for a valid kind and a non-empty valid UTF-8 key of
 * `len` bytes, when it can answer within the call and keep issue order (it
 * has one, is open and nothing waits); otherwise LD_EBUSY, as get_now may
 * also say. Loop thread. */
int ld__store_get_now(ld_store *s, const ld_kind *kind, const char *key, size_t len, json_t **item,
                      struct ld_lease **lease);

/* The same for all_now. */
int ld__store_all_now(ld_store *s, const ld_kind *kind, json_t **all);

/* The store's `initialized` when its implementation answers within the
 * call (as the memory store does) and nothing of the store waits: 1 or 0;
 * otherwise LD_EBUSY; LD_ENOMEM; or the implementation's error. */
int ld__store_initialized_now(ld_store *s);

#endif /* LDASYNC_STORE_INTERNAL_H */
