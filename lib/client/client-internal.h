/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the client's internal parts (lib/client).
 */
#ifndef LDASYNC_CLIENT_INTERNAL_H
#define LDASYNC_CLIENT_INTERNAL_H

#include <ldasync/client.h>

/* ---- the big segment cache (big_segment_cache.c)
 *
 * What the client puts between its evaluator and the big segment store the
 * options gave it, as LaunchDarkly's SDKs' big segment store wrapper: a
 * store of its own (the evaluator reads it) that answers memberships from
 * an LRU with a time to live, shares one read among the evaluations that
 * want the same context at once, and answers metadata from the last poll
 * of the store. Loop thread only. */

struct ld__bsc;

struct ld__bsc_config {
    int size;               /* contexts kept at most (> 0) */
    int64_t ttl_ms;         /* how long a membership is kept (> 0) */
    int64_t poll_ms;        /* between the end of a metadata read and the next (> 0) */
    int64_t stale_after_ms; /* metadata this old is stale (> 0) */
};

/* Called when the first poll ends and when a later one changes the status. */
typedef void (*ld__bsc_status_fn)(void *arg, const ld_big_segment_store_status *status);

/* A cache in front of `inner` (borrowed: it must outlive the cache); the
 * first poll is issued now. @return NULL when memory ran out. */
struct ld__bsc *ld__bsc_new(struct event_base *base, ld_big_segment_store *inner,
                            const struct ld__bsc_config *cfg, ld__bsc_status_fn fn, void *arg);

/* The store the evaluator reads (owned by the cache). */
ld_big_segment_store *ld__bsc_store(struct ld__bsc *c);

/* 0 with *out; LD_EBUSY before the first poll ended. */
int ld__bsc_status(const struct ld__bsc *c, ld_big_segment_store_status *out);

/* Polling stops and the status function is no longer called (close). */
void ld__bsc_stop(struct ld__bsc *c);

/* Frees the cache and its store: reads still pending reject with
 * LD_ECANCELED, and the inner store's pending reads are cancelled.
 * NULL-safe. */
void ld__bsc_free(struct ld__bsc *c);

#endif /* LDASYNC_CLIENT_INTERNAL_H */
