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
#include <stddef.h>

#include <ldasync/future.h>

/* What the inline ld__front_idle() reads of a front's queue, which is
 * otherwise private to front.c (whose struct starts with this). */
struct ld__queue_state {
    const void *head;  /* the oldest operation still waiting, or NULL */
    unsigned inflight; /* handed over, not complete yet */
};

struct ld__pending; /* an operation whose result waits (front.c) */
struct ld__queue;   /* the waiting operations (front.c) */

/* Embedded in a component (see struct ld__component); its fields are the
 * front's: read them through the functions below. */
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
 * allocation. When the implementation future is complete and nothing is
 * queued or in flight before it, the caller's future takes its outcome
 * from the loop (completed later). Otherwise the caller's future adopts it
 * (ld_future_forward) once everything before it has been handed over;
 * adoption goes through the loop in hand-over order, so callbacks run in
 * issue order. */
ld_future *ld__front_finish(struct ld__front *fr, struct ld__op *op);

/* True when no operation waits or is in flight: a result completed at once
 * may be handed back as it is. */
static inline bool ld__front_idle(const struct ld__front *fr)
{
    const struct ld__queue_state *q = (const struct ld__queue_state *)(const void *)fr->queue;
    return !q->head && !q->inflight;
}

/* True once the front was closed (or released). */
static inline bool ld__front_closed(const struct ld__front *fr)
{
    return fr->closed;
}

/* The base the front's futures complete on. */
static inline struct event_base *ld__front_base(const struct ld__front *fr)
{
    return fr->base;
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

/*
 * The skeleton of a component (store, big segment store, initializer,
 * synchronizer, event and update processors): its front and its
 * implementation. A component's struct starts with it, followed by its
 * typed ops; the functions below do what every component does the same
 * way, so that a component is its ops' validation and one line per
 * operation. They take NULL for a NULL component.
 */
struct ld__component {
    struct ld__front front;
    void *impl;
};

/* A zeroed component of `size` bytes (its struct starts with struct
 * ld__component) on `base`, for `impl`; the caller then sets its ops.
 * NULL if memory ran out. */
void *ld__component_new(size_t size, struct event_base *base, void *impl, const char *closed_msg);

/* An operation whose only input is its implementation future: op(impl,
 * out) through the front (`bad`: see ld__front_begin). NULL for a NULL
 * component. */
ld_future *ld__component_call(struct ld__component *c, const char *bad,
                              void (*op)(void *impl, ld_future *out));

/* ld__front_close() of the component; NULL for a NULL component. */
ld_future *ld__component_close(struct ld__component *c, bool abort,
                               void (*close_op)(void *impl, ld_future *out));

/* ld__front_release() with free_fn, then frees the component. NULL-safe. */
void ld__component_free(struct ld__component *c, void (*free_fn)(void *impl));

/* What `fn(impl)` says (a name, a description), "unknown" when fn is NULL
 * or says NULL, "(null)" for a NULL component. */
const char *ld__component_text(const struct ld__component *c, const char *(*fn)(void *impl));

#endif /* LDASYNC_FRONT_INTERNAL_H */
