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
    bool released;     /* the front let go of it */
    unsigned refs;     /* the front's (until released) + one per pending callback */
    unsigned inflight; /* handed over, not complete yet (see hand_over) */
    struct ld__pending *head, *tail;
};

struct ld__front {
    struct event_base *base;
    struct ld__queue *queue; /* outlives the front while callbacks hold it */
    const char *closed_msg;  /* static: "synchronizer is closed", ... */
    bool closed;
};

/* Sets up `fr` on `base`. @return 0 or LD_ENOMEM. */
int ld__front_init(struct ld__front *fr, struct event_base *base, const char *closed_msg);

/* The start of an operation: returns the future to give back at once (a
 * closed front: LD_ECLOSED; `bad` not NULL: LD_EINVAL with `bad` as the
 * message; no memory), or NULL with *impl a new pending future to hand the
 * implementation (with one more reference for it) and then to
 * ld__front_finish(). */
ld_future *ld__front_begin(struct ld__front *fr, const char *bad, ld_future **impl);

/* The caller's future for an operation whose implementation future is `impl`
 * (steals it). A complete `impl` with nothing queued or in flight before it
 * is returned as it is: one future per operation. Otherwise the caller's
 * future adopts `impl` (ld_future_forward) once everything before it has
 * been handed over; adoption goes through the loop in hand-over order, so
 * callbacks run in issue order. */
ld_future *ld__front_finish(struct ld__front *fr, ld_future *impl);

/* True when no operation waits or is in flight: a result completed at once
 * may be handed back as it is. */
static inline bool ld__front_idle(const struct ld__front *fr)
{
    return !fr->queue->head && !fr->queue->inflight;
}

/* A future rejected with `code` and the static message `why`. */
ld_future *ld__front_rejected(struct ld__front *fr, int code, const char *why);

/* Hands over the results that are ready (in order), then rejects every
 * operation still waiting with `code` and `why` and cancels its
 * implementation future (which tells the implementation, if it listens). */
void ld__front_abort(struct ld__front *fr, int code, const char *why);

/* Closes `fr` and returns the caller's future for the close: with `abort`,
 * what is pending is first rejected with LD_ECLOSED (ld__front_abort);
 * then, the first time only, `close_op(impl, out)` (if not NULL) closes the
 * implementation; otherwise the future is fulfilled at once. */
ld_future *ld__front_close(struct ld__front *fr, bool abort,
                           void (*close_op)(void *impl, ld_future *out), void *impl);

/* Closes `fr`, aborts what waits with LD_ECANCELED and lets go of the queue
 * (freed once its last callback ran); then frees the implementation with
 * free_fn(impl) (if free_fn is not NULL): at once, or, when implementation
 * futures were cancelled, from the loop after their cancel handlers (which
 * the implementation may have given `impl`). Safe from inside a callback of
 * one of the front's own futures. */
void ld__front_release(struct ld__front *fr, void (*free_fn)(void *impl), void *impl);

#endif /* LDASYNC_FRONT_INTERNAL_H */
