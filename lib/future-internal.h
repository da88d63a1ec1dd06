/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: what other modules of the library use of futures. Never
 * installed. The layout of futures and of the per-base dispatcher is private
 * to the files that implement them (future-layout.h).
 */
#ifndef LDASYNC_FUTURE_INTERNAL_H
#define LDASYNC_FUTURE_INTERNAL_H

#include <stdbool.h>

#include <ldasync/future.h>

#include "lease-internal.h"

/* A future rejected with `code` and `msg`, a string that lives as long as
 * the process (NULL: ld_strerror(code)); no allocation but the future.
 * NULL only if memory ran out. */
ld_future *ld__future_rejected_static(struct event_base *base, int code, const char *msg);

/*
 * Completing later: a future that is pending when returned and completes
 * from the loop of its base, after what is queued there, in the order the
 * futures were given their outcomes (FIFO with all callbacks of the base),
 * without an event of its own. Loop thread only.
 *
 * ld__future_later_new() makes such a future (NULL only if memory ran out);
 * nobody but its maker can complete it (ld_future_fulfill() and the like
 * give LD_EALREADY), though it may be cancelled. Its maker then calls
 * exactly one of the ld__later_* functions, which need no memory and
 * borrow the maker's reference:
 *   fulfill: no value (has_value false) or the bool v;
 *   reject_static: `msg` lives as long as the process (NULL: strerror).
 * ld__future_later_json() (lease-internal.h) makes one given its value at
 * once.
 */
ld_future *ld__future_later_new(struct event_base *base);
void ld__later_fulfill(ld_future *f, bool has_value, bool v);
void ld__later_reject_static(ld_future *f, int code, const char *msg);

/* ld__future_later_new() and ld__later_reject_static() in one call. */
ld_future *ld__future_later_rejected(struct event_base *base, int code, const char *msg);

/* A future completed later, fulfilled with the pointer `v` and its free
 * function (as ld_future_fulfill_ptr()); without memory, NULL, and
 * free_fn(v) called. */
ld_future *ld__future_later_ptr(struct event_base *base, void *v, ld_free_fn free_fn);

/* A block of LD__LINE_SIZE bytes, aligned to it, from the futures' memory
 * (their per-thread free lists: cheaper than malloc for small objects made
 * and released as often as futures, such as the evaluator's details), or
 * NULL when memory ran out; ld__line_free() (NULL-safe) gives it back, on
 * any thread. */
#define LD__LINE_SIZE 64
void *ld__line_alloc(void);
void ld__line_free(void *p);

/* Turns `f`, a pending future of ld_future_new() (K_PLAIN) whose producer
 * is the caller, into one completed later with the outcome of `src`
 * (complete, stolen). Its callbacks stay; a cancel handler someone set on
 * it is dropped. It may need memory: when there is none (and only then), f
 * joins the newest batch still queued, so that it completes after the
 * futures completed later before it (its callbacks may then run before
 * callbacks queued after that batch), or, with no batch queued, completes
 * at once. */
void ld__later_adopt_into(ld_future *f, ld_future *src);

/* The free function given with the pointer value of `f` (ld_future_ptr),
 * also when `f` adopted the value from another future; NULL when `f` holds
 * no pointer or was given none. Lets a module tell its own pointer values
 * (made with a static free function) from others without reading them. */
ld_free_fn ld__future_ptr_free_fn(const ld_future *f);

#endif /* LDASYNC_FUTURE_INTERNAL_H */
