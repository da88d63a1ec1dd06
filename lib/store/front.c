/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the shared front layer of the components around the store
 * (front-internal.h): issue-order completion, closing and aborting.
 *
 * Allocation: an operation allocates everything it may need (its
 * implementation future, a queue entry and the caller's future) before the
 * implementation hears of it, so that running out of memory rejects an
 * operation that never happened, never one that did.
 */
#include <stdint.h>

#include <ldasync/error.h>

#include "core/core-internal.h"
#include "store/store-internal.h"

static const char E_NOMEM[] = "out of memory";

/* An operation whose result waits for the implementation or for the
 * operations issued before it. */
struct ld__pending {
    struct ld__pending *next;
    ld_future *impl; /* completed by the implementation */
    ld_future *user; /* what the caller got */
};

struct ld__queue {
    /* First: what ld__front_idle() reads. `head` is the oldest pending. */
    struct ld__queue_state st;
    struct ld__pending *tail;
    struct event_base *base;
    bool released;               /* the front let go of it */
    unsigned refs;               /* the front's (until released) + one per pending callback */
    unsigned cancels;            /* cancellations whose cancel handlers may not have run */
    bool cancels_lost;           /* one such count could not be tracked (no memory) */
    void (*free_fn)(void *impl); /* set at release while cancels > 0 */
    void *free_impl;
};

static inline struct ld__pending *head_of(const struct ld__queue *q)
{
    return (struct ld__pending *)(uintptr_t)q->st.head;
}

int ld__front_init(struct ld__front *fr, struct event_base *base, const char *closed_msg)
{
    struct ld__queue *q = ld__calloc(1, sizeof(*q));
    ld_future *oom = q ? ld__future_rejected_static(base, LD_ENOMEM, E_NOMEM) : NULL;
    if (!oom) {
        ld__free(q);
        return LD_ENOMEM;
    }
    q->base = base;
    q->refs = 1;
    fr->base = base;
    fr->queue = q;
    fr->oom = oom;
    fr->closed_msg = closed_msg;
    fr->closed = false;
    return 0;
}

static void queue_unref(struct ld__queue *q)
{
    if (--q->refs == 0)
        ld__free(q);
}

static struct ld__pending *pop(struct ld__queue *q)
{
    struct ld__pending *p = head_of(q);
    q->st.head = p->next;
    if (!p->next)
        q->tail = NULL;
    return p;
}

static void user_done(ld_future *user, void *arg)
{
    struct ld__queue *q = arg;
    (void)user;
    q->st.inflight--;
    queue_unref(q);
}

/* Makes the caller's future of `p` adopt `from` (stolen) and frees
 * `p`. Adoption completes from the loop, in the order of the hand-overs;
 * until the caller's future is complete it counts as in flight, so that a
 * later operation is not handed back ahead of it (ld__front_finish). */
static void hand_over(struct ld__queue *q, struct ld__pending *p, ld_future *from)
{
    q->st.inflight++;
    q->refs++;
    /* Usually the caller's future has no callback yet and this one takes
     * its embedded node (no allocation); without memory, only the order of
     * later results is at stake. */
    if (ld_future_on_complete(ld_future_ref(p->user), user_done, q) != 0) {
        q->st.inflight--;
        q->refs--;
    }
    if (!ld_future_is_pending(from))
        ld__later_adopt_into(p->user, from); /* the state changes from the loop too */
    else if (ld_future_forward(p->user, from) != 0)
        ld_future_reject(p->user, LD_ENOMEM, NULL);
    ld_future_unref(p->user);
    ld__free(p);
}

/* Hands over the queued operations whose implementation is done, oldest
 * first, stopping at the first one still running. */
static void flush(struct ld__queue *q)
{
    while (head_of(q) && !ld_future_is_pending(head_of(q)->impl)) {
        struct ld__pending *p = pop(q);
        hand_over(q, p, p->impl);
    }
}

static void impl_done(ld_future *impl, void *arg)
{
    struct ld__queue *q = arg;
    (void)impl;
    if (!q->released)
        flush(q);
    queue_unref(q);
}

ld_future *ld__front_oom(struct ld__front *fr)
{
    return ld_future_ref(fr->oom);
}

/* A queue entry with the caller's future, or NULL if memory ran out. */
static struct ld__pending *pending_new(struct ld__front *fr)
{
    struct ld__pending *p = ld__malloc(sizeof(*p));
    if (p && !(p->user = ld_future_new(fr->base))) {
        ld__free(p);
        p = NULL;
    }
    return p;
}

static void pending_drop(struct ld__pending *p)
{
    if (p) {
        ld_future_unref(p->user);
        ld__free(p);
    }
}

ld_future *ld__front_begin(struct ld__front *fr, const char *bad, struct ld__front_op *op)
{
    op->impl = NULL;
    if (fr->closed || bad) {
        /* answered by the front, from the loop, after what was issued
         * before: completed later, behind what the loop has queued, or
         * queued (complete) behind the operations still waiting, whose
         * hand-over completes it later in its turn */
        int code = fr->closed ? LD_ECLOSED : LD_EINVAL;
        const char *why = fr->closed ? fr->closed_msg : bad;
        if (ld__front_idle(fr)) {
            op->impl = ld__future_later_rejected(fr->base, code, why);
            return op->impl ? op->impl : ld__front_oom(fr);
        }
        op->p = pending_new(fr);
        op->impl = op->p ? ld__future_rejected_static(fr->base, code, why) : NULL;
        if (op->impl)
            return ld__front_finish(fr, op);
    } else if ((op->p = pending_new(fr)) != NULL && (op->impl = ld_future_new(fr->base)) != NULL) {
        return NULL;
    }
    ld_future_unref(op->impl);
    pending_drop(op->p);
    return ld__front_oom(fr);
}

ld_future *ld__front_finish(struct ld__front *fr, struct ld__front_op *op)
{
    struct ld__queue *q = fr->queue;
    struct ld__pending *p = op->p;
    ld_future *impl = op->impl;
    ld_future *user = p->user;
    if (ld__front_idle(fr) && !ld_future_is_pending(impl)) {
        /* answered at once: the caller's future completes from the loop */
        ld__free(p);
        ld__later_adopt_into(user, impl);
        return user;
    }
    p->next = NULL;
    p->impl = impl;
    p->user = ld_future_ref(user);
    if (q->tail)
        q->tail->next = p;
    else
        q->st.head = p;
    q->tail = p;
    /* Also when `impl` is complete: something in flight before it may not
     * flush the queue again. */
    q->refs++;
    if (ld_future_on_complete(ld_future_ref(impl), impl_done, q) != 0)
        q->refs--; /* LD_ENOMEM: flushed by the next completion instead */
    return user;
}

static void cancels_ran(ld_future *f, void *arg)
{
    struct ld__queue *q = arg;
    (void)f;
    if (--q->cancels == 0 && q->free_fn) /* the component was freed meanwhile */
        q->free_fn(q->free_impl);
    queue_unref(q);
}

/* Hands over the results that are ready (in order), then rejects every
 * operation still waiting with `code` and `why` and cancels its
 * implementation future (which tells the implementation, if it listens).
 * Returns how many implementation futures it cancelled. */
static size_t abort_pending(struct ld__front *fr, int code, const char *why)
{
    struct ld__queue *q = fr->queue;
    size_t cancelled = 0;
    flush(q);
    while (head_of(q)) {
        struct ld__pending *p = pop(q);
        if (ld_future_cancel(p->impl) == 0)
            cancelled++;
        ld_future_unref(p->impl);
        /* through the loop too, so that the results handed over before
         * complete first */
        ld_future *why_f = ld__future_rejected_static(q->base, code, why);
        hand_over(q, p, why_f ? why_f : ld__front_oom(fr));
    }
    if (cancelled) {
        /* Callbacks run in FIFO order: this one runs after the cancel
         * handlers just queued. */
        q->cancels++;
        q->refs++;
        if (ld_future_on_complete(ld__front_oom(fr), cancels_ran, q) != 0) {
            q->cancels--;
            q->refs--;
            q->cancels_lost = true;
        }
    }
    return cancelled;
}

ld_future *ld__front_close(struct ld__front *fr, bool abort,
                           void (*close_op)(void *impl, ld_future *out), void *impl)
{
    struct ld__front_op op = {ld_future_new(fr->base), pending_new(fr)};
    if (!op.impl || !op.p) {
        ld_future_unref(op.impl);
        pending_drop(op.p);
        return ld__front_oom(fr);
    }
    bool was_closed = fr->closed;
    fr->closed = true;
    /* Once closed, what is queued is the earlier close (or stop), which
     * must still complete when the implementation has closed, and the
     * front's own LD_ECLOSED answers: nothing to abort. */
    if (abort && !was_closed)
        abort_pending(fr, LD_ECLOSED, fr->closed_msg);
    if (was_closed || !close_op)
        ld_future_fulfill(op.impl);
    else
        close_op(impl, ld_future_ref(op.impl));
    return ld__front_finish(fr, &op);
}

/* Calls free_fn(impl) from the loop after the callbacks queued so far (a
 * FIFO), or at once if memory ran out. */
struct deferred_free {
    void (*free_fn)(void *impl);
    void *impl;
};

static void run_deferred_free(ld_future *f, void *arg)
{
    struct deferred_free *d = arg;
    (void)f;
    d->free_fn(d->impl);
    ld__free(d);
}

static void free_after_queued(struct ld__front *fr, void (*free_fn)(void *impl), void *impl)
{
    struct deferred_free *d = ld__malloc(sizeof(*d));
    if (d) {
        d->free_fn = free_fn;
        d->impl = impl;
        if (ld_future_on_complete(ld__front_oom(fr), run_deferred_free, d) == 0)
            return;
        ld__free(d);
    }
    free_fn(impl);
}

void ld__front_release(struct ld__front *fr, void (*free_fn)(void *impl), void *impl)
{
    struct ld__queue *q = fr->queue;
    if (q) {
        fr->closed = true;
        abort_pending(fr, LD_ECANCELED, "operation canceled: the component was freed");
        q->released = true;
        fr->queue = NULL;
        if (free_fn && q->cancels) {
            /* after the cancel handlers, which may use `impl` (cancels_ran) */
            q->free_fn = free_fn;
            q->free_impl = impl;
            free_fn = NULL;
        } else if (free_fn && q->cancels_lost) {
            free_after_queued(fr, free_fn, impl);
            free_fn = NULL;
        }
        queue_unref(q);
    }
    if (free_fn)
        free_fn(impl);
    ld_future_unref(fr->oom);
    fr->oom = NULL;
}

/* ---- the component skeleton ---------------------------------------------- */

void *ld__component_new(size_t size, struct event_base *base, void *impl, const char *closed_msg)
{
    struct ld__component *c = ld__calloc(1, size);
    if (!c)
        return NULL;
    if (ld__front_init(&c->front, base, closed_msg) != 0) {
        ld__free(c);
        return NULL;
    }
    c->impl = impl;
    return c;
}

ld_future *ld__component_call(struct ld__component *c, const char *bad,
                              void (*op)(void *impl, ld_future *out))
{
    struct ld__front_op o;
    ld_future *r;
    if (!c)
        return NULL;
    if ((r = ld__front_begin(&c->front, bad, &o)) != NULL)
        return r;
    op(c->impl, ld_future_ref(o.impl));
    return ld__front_finish(&c->front, &o);
}

ld_future *ld__component_close(struct ld__component *c, bool abort,
                               void (*close_op)(void *impl, ld_future *out))
{
    return c ? ld__front_close(&c->front, abort, close_op, c->impl) : NULL;
}

void ld__component_free(struct ld__component *c, void (*free_fn)(void *impl))
{
    if (!c)
        return;
    ld__front_release(&c->front, free_fn, c->impl);
    ld__free(c);
}

const char *ld__component_text(const struct ld__component *c, const char *(*fn)(void *impl))
{
    if (!c)
        return "(null)";
    const char *text = fn ? fn(c->impl) : NULL;
    return text ? text : "unknown";
}
