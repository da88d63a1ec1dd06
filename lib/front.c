/*
 * ldasync: the shared front layer of the components around the store
 * (front-internal.h): issue-order completion, closing and aborting.
 */
#include <stdlib.h>

#include <ldasync/error.h>

#include "alloc-internal.h"
#include "front-internal.h"

int ld__front_init(struct ld__front *fr, struct event_base *base, const char *closed_msg)
{
    struct ld__queue *q = ld__calloc(1, sizeof(*q));
    if (!q)
        return LD_ENOMEM;
    q->base = base;
    q->refs = 1;
    fr->base = base;
    fr->queue = q;
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
    struct ld__pending *p = q->head;
    q->head = p->next;
    if (!q->head)
        q->tail = NULL;
    return p;
}

static void user_done(ld_future *user, void *arg)
{
    struct ld__queue *q = arg;
    (void)user;
    q->inflight--;
    queue_unref(q);
}

/* Makes the caller's future of `p` adopt `from` (stolen) and frees `p`.
 * Adoption completes from the loop, in the order of the hand-overs; until
 * the caller's future is complete it counts as in flight, so that a later
 * operation is not handed back ahead of it (ld__front_finish). */
static void hand_over(struct ld__queue *q, struct ld__pending *p, ld_future *from)
{
    q->inflight++;
    q->refs++;
    if (ld_future_on_complete(ld_future_ref(p->user), user_done, q) != 0) {
        q->inflight--; /* LD_ENOMEM: order is kept as well as memory allows */
        q->refs--;
    }
    if (!from || ld_future_forward(p->user, from) != 0)
        ld_future_reject(p->user, LD_ENOMEM, NULL);
    ld_future_unref(p->user);
    ld__free(p);
}

/* Hands over the queued operations whose implementation is done, oldest
 * first, stopping at the first one still running. */
static void flush(struct ld__queue *q)
{
    while (q->head && !ld_future_is_pending(q->head->impl)) {
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

ld_future *ld__front_rejected(struct ld__front *fr, int code, const char *why)
{
    return ld_future_rejected(fr->base, code, "%s", why);
}

ld_future *ld__front_begin(struct ld__front *fr, const char *bad, ld_future **impl)
{
    if (fr->closed)
        return ld__front_rejected(fr, LD_ECLOSED, fr->closed_msg);
    if (bad)
        return ld__front_rejected(fr, LD_EINVAL, bad);
    *impl = ld_future_new(fr->base);
    return *impl ? NULL : ld__front_rejected(fr, LD_ENOMEM, "out of memory");
}

ld_future *ld__front_finish(struct ld__front *fr, ld_future *impl)
{
    struct ld__queue *q = fr->queue;
    if (ld__front_idle(fr) && !ld_future_is_pending(impl))
        return impl;
    struct ld__pending *p = ld__malloc(sizeof(*p));
    ld_future *user = ld_future_new(fr->base);
    if (!p || !user) {
        ld__free(p);
        ld_future_unref(user);
        ld_future_unref(impl); /* the implementation completes its own reference */
        return ld__front_rejected(fr, LD_ENOMEM, "out of memory");
    }
    p->next = NULL;
    p->impl = impl;
    p->user = ld_future_ref(user);
    if (q->tail)
        q->tail->next = p;
    else
        q->head = p;
    q->tail = p;
    q->refs++;
    if (ld_future_on_complete(ld_future_ref(impl), impl_done, q) != 0)
        q->refs--; /* LD_ENOMEM: flushed by the next completion instead */
    return user;
}

/* ld__front_abort(), returning how many implementation futures it
 * cancelled. */
static size_t abort_pending(struct ld__front *fr, int code, const char *why)
{
    struct ld__queue *q = fr->queue;
    size_t cancelled = 0;
    flush(q);
    while (q->head) {
        struct ld__pending *p = pop(q);
        if (ld_future_cancel(p->impl) == 0) /* tells the implementation, if it listens */
            cancelled++;
        ld_future_unref(p->impl);
        /* through the loop too, so that the results handed over before
         * complete first */
        hand_over(q, p, ld_future_rejected(q->base, code, "%s", why));
    }
    return cancelled;
}

void ld__front_abort(struct ld__front *fr, int code, const char *why)
{
    abort_pending(fr, code, why);
}

ld_future *ld__front_close(struct ld__front *fr, bool abort,
                           void (*close_op)(void *impl, ld_future *out), void *impl)
{
    ld_future *out = ld_future_new(fr->base);
    if (!out)
        return ld__front_rejected(fr, LD_ENOMEM, "out of memory");
    bool was_closed = fr->closed;
    fr->closed = true;
    if (abort)
        ld__front_abort(fr, LD_ECLOSED, fr->closed_msg);
    if (was_closed || !close_op)
        ld_future_fulfill(out);
    else
        close_op(impl, ld_future_ref(out));
    return ld__front_finish(fr, out);
}

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

/* Calls free_fn(impl) from the loop, after the callbacks queued so far (a
 * FIFO), or at once if memory ran out. */
static void free_after_queued(struct event_base *base, void (*free_fn)(void *impl), void *impl)
{
    struct deferred_free *d = ld__malloc(sizeof(*d));
    ld_future *f = d ? ld_future_new(base) : NULL;
    if (!f || ld_future_fulfill(f) != 0) {
        ld_future_unref(f);
        ld__free(d);
        free_fn(impl);
        return;
    }
    d->free_fn = free_fn;
    d->impl = impl;
    if (ld_future_on_complete(f, run_deferred_free, d) != 0) {
        ld__free(d);
        free_fn(impl);
    }
}

void ld__front_release(struct ld__front *fr, void (*free_fn)(void *impl), void *impl)
{
    struct ld__queue *q = fr->queue;
    size_t cancelled = 0;
    if (q) {
        fr->closed = true;
        cancelled = abort_pending(fr, LD_ECANCELED, "operation canceled: the component was freed");
        q->released = true;
        fr->queue = NULL;
        queue_unref(q);
    }
    if (!free_fn)
        return;
    if (cancelled)
        free_after_queued(fr->base, free_fn, impl); /* after their cancel handlers */
    else
        free_fn(impl);
}
