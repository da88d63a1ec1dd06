/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * What the suites of the client's big segment cache share
 * (check_client_big_segments.c, check_client_big_segments_attack.c):
 * a memory store of their flags, an offline client on it reading a big
 * segment store through the cache, contexts, and the loop run for a time.
 */
#ifndef LDASYNC_CHECK_BIGSEG_H
#define LDASYNC_CHECK_BIGSEG_H

#include <stdint.h>

#include <ldasync/ldasync.h>

/* The store of the test running (bsu_setup() to bsu_teardown()). */
extern ld_store *bsu_store;

/* ld_test_setup(), then bsu_store: a memory store of `flags` and
 * `segments` (ld_test_data_of()'s quoting). */
void bsu_setup(const char *flags, const char *segments);
/* bsu_store closed and freed, then ld_test_teardown(). */
void bsu_teardown(void);

/* An offline client on bsu_store reading `bss` with the cache settings
 * given (0: the defaults). */
ld_client *bsu_client(ld_big_segment_store *bss, int size, int64_t ttl_ms, int64_t poll_ms);

/* A context of `kind` and `key` (NULL if the builder refuses it). */
ld_context *bsu_ctx(const char *kind, const char *key);
/* A user context (asserted). */
ld_context *bsu_user(const char *key);

/* The wall clock, in ms since the epoch. */
int64_t bsu_wall_ms(void);
/* Lets the loop run for `ms`. */
void bsu_run_for(int64_t ms);

#endif /* LDASYNC_CHECK_BIGSEG_H */
