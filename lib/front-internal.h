/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the part every component's front layer shares (big segment store,
 * initializer, synchronizer, processors). Never installed.
 *
 * A front hands each operation's implementation a pending future and gives
 * the caller a future that completes in issue order, whatever order the
 * implementation completes in; it rejects operations once closed, and at
 * free completes what is still pending. The store (lib/store.c) and every
 * component around it use it.
 */
#ifndef LDASYNC_FRONT_INTERNAL_H
#define LDASYNC_FRONT_INTERNAL_H

#include <stdbool.h>

#include <ldasync/future.h>

/* An operation whose result waits for the implementation or for the
 * operations issued before it. */
struct ld__pending {
    struct ld__pending *next;
    ld_future *impl; /* completed by the implementation */
    ld_future *user; /* what the caller got */
};

struct ld__queue {
    struct event_base *base;
    bool released;               /* the front let go of it */
    unsigned refs;               /* the front's (until released) + one per pending callback */
    unsigned inflight;           /* handed over, not complete yet (see hand_over) */
    unsigned cancels;            /* cancellations whose cancel handlers may not have run */
    bool cancels_lost;           /* one such count could not be tracked (no memory) */
    void (*free_fn)(void *impl); /* set at release while cancels > 0 */
    void *free_impl;
    struct ld__pending *head, *tail;
};

struct ld__front {
    struct event_base *base;
    struct ld__queue *queue; /* outlives the front while callbacks hold it */
    ld_future *oom;          /* rejected LD_ENOMEM, for when nothing else can be made */
    const char *closed_msg;  /* static: "synchronizer is closed", ... */
    bool closed;
};

/* One operation between ld__front_begin() and ld__front_finish(). */
struct ld__op {
    ld_future *impl;       /* pending; the implementation completes it */
    struct ld__pending *p; /* made in advance: finishing never allocates */
};

/* Sets up `fr` on `base`. @return 0 or LD_ENOMEM. */
int ld__front_init(struct ld__front *fr, struct event_base *base, const char *closed_msg);

/*
 * The start of an operation. Returns the caller's future when the front
 * answers it itself: LD_ECLOSED once closed, LD_EINVAL with the static
 * message `bad` when `bad` is not NULL (both complete after the operations
 * issued before, in issue order), LD_ENOMEM when memory ran out (at once: the
 * operation was not issued). Otherwise returns NULL with `op` ready: hand
 * the implementation ld_future_ref(op->impl), then call ld__front_finish().
 * Never NULL for an answer.
 */
ld_future *ld__front_begin(struct ld__front *fr, const char *bad, struct ld__op *op);

/* The caller's future for `op` (whose implementation future it steals); no
 * allocation. A complete implementation future with nothing queued or in
 * flight before it is returned as it is: one future per operation.
 * Otherwise the caller's future adopts it (ld_future_forward) once
 * everything before it has been handed over; adoption goes through the loop
 * in hand-over order, so callbacks run in issue order. */
ld_future *ld__front_finish(struct ld__front *fr, struct ld__op *op);

/* True when no operation waits or is in flight: a result completed at once
 * may be handed back as it is. */
static inline bool ld__front_idle(const struct ld__front *fr)
{
    return !fr->queue->head && !fr->queue->inflight;
}

/* A reference to the front's future rejected with LD_ENOMEM. */
ld_future *ld__front_oom(struct ld__front *fr);

/* Closes `fr` and returns the caller's future for the close: with `abort`,
 * what is pending is first rejected with LD_ECLOSED; then, the first time
 * only, `close_op(impl, out)` (if not NULL) closes the implementation;
 * otherwise the future is fulfilled at once. When memory runs out, nothing
 * changes and the future is rejected with LD_ENOMEM. */
ld_future *ld__front_close(struct ld__front *fr, bool abort,
                           void (*close_op)(void *impl, ld_future *out), void *impl);

/* Closes `fr`, aborts what waits with LD_ECANCELED and lets go of the queue
 * (freed once its last callback ran); then frees the implementation with
 * free_fn(impl) (if free_fn is not NULL): at once, or, when implementation
 * futures were cancelled (now, or by an earlier close) and their cancel
 * handlers may not have run yet, from the loop after them (the
 * implementation may have given them `impl`). Safe from inside a callback
 * of one of the front's own futures. */
void ld__front_release(struct ld__front *fr, void (*free_fn)(void *impl), void *impl);

#endif /* LDASYNC_FRONT_INTERNAL_H */
