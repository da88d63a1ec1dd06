/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: futures completed later (ld__future_later_new() and the others,
 * core-internal.h): pending when their maker returns them, completed from
 * the loop in batches, without an event each. The future itself is in
 * future.c.
 */
#include <ldasync/error.h>
#include <ldasync/future.h>

#define LD_CORE_FUTURE_LAYOUT
#include "core/core-internal.h"

static void later_push(ld_future *f, bool reserved);

/* ------------------------------------------------------------------------- */
/* Completing later                                                          */

/*
 * A future completed later is pending when its maker returns it and is
 * completed from the loop, in the order such futures were given their
 * outcome, FIFO with every other callback of the base: the memory store
 * answers this way, without an event per operation. Futures given their
 * outcome one after the other, with nothing queued on the loop in between,
 * share one node of the FIFO, a batch; a batch node comes from a short list
 * of spares kept by the loop, and ld__future_later_new() makes sure one is
 * there, so that giving the outcome needs no memory.
 */
struct ld__later {
    struct ld__xnode x; /* queued on the FIFO; x.future is NULL */
    struct ld__loop *loop;
    ld_future *first, *last; /* linked by c */
    struct ld__later *next_spare;
};

#define LD_LATER_SPARES 16

/* One more spare batch for loop l. */
static int later_spare_add(struct ld__loop *l)
{
    struct ld__later *b = ld__malloc(sizeof(*b));
    if (!b)
        return LD_ENOMEM;
    b->next_spare = l->later_spare;
    l->later_spare = b;
    l->later_nspare++;
    return 0;
}

/* Makes sure that a spare batch is there for each future of
 * ld__future_later_new() not given its outcome yet, plus one for this one. */
static int later_reserve(struct ld__loop *l)
{
    if (l->later_nspare <= l->later_reserved && later_spare_add(l) != 0)
        return LD_ENOMEM;
    l->later_reserved++;
    return 0;
}

/* Completes f (a K_LATER future still in its batch) with the outcome it
 * holds, unless something (a cancellation) completed it first:
 * ld__future_settle() without what a K_LATER future never has (a cancel
 * handler, a combinator action, an upstream), the outcome left where it is.
 */
static void later_settle(ld_future *f, bool last_of_batch)
{
    unsigned w = f_lock(f);
    if (w & W_DONE) {
        f_unlock(f, w);
        return;
    }
    unsigned vtype = f->vtype;
    f->kind = K_PLAIN; /* complete: a and b are its value */
    if (UNLIKELY(vtype == V_ADOPT)) {
        ld_future *src = f->a.f;
        f->vtype = V_NONE;
        f->a.u = 0;
        f_unlock(f, w);
        ld__adopt(f, src);
        ld_future_unref(src);
        return;
    }
    struct ld__node *first = NULL, *last = NULL;
    callbacks_of(f, &first, &last);
    f->c = NULL;
    w = (w & ~(W_ADOPTING | W_LATER)) |
        (vtype == V_ERR || vtype == V_ERR_STATIC ? W_REJECTED : W_FULFILLED);
    atomic_store_explicit(&f->word, (unsigned short)w, memory_order_release);
    if (UNLIKELY(w & W_INCHAIN))
        atomic_store(&f->loop->fwd_stale, 1);
    if (!first) {
        f_unlock(f, w);
        return;
    }
    __builtin_prefetch(first->arg);
    struct ld__loop *l = f->loop;
    if (last_of_batch && !l->head && ld__tl_drain == l && remote_empty(l)) {
        /* Queued now, the callbacks would be next: they run now. */
        f_unlock(f, w);
        run_chain(first, last);
        return;
    }
    ld__enqueue(l, first, last, w & W_SHARED);
    f_unlock(f, w);
}

static void later_run(ld_future *unused, void *arg)
{
    struct ld__later *b = arg;
    struct ld__loop *l = b->loop;
    (void)unused;
    if (l->later_open == b)
        l->later_open = NULL;
    ld_future *f = b->first;
    if (l->later_nspare < l->later_reserved + LD_LATER_SPARES) {
        b->next_spare = l->later_spare;
        l->later_spare = b;
        l->later_nspare++;
    } else {
        ld__free(b);
    }
    while (f) {
        ld_future *next = f->c;
        later_settle(f, next == NULL);
        ld__future_unref(f); /* the batch's */
        f = next;
    }
}

ld_future *ld__future_later_new(struct event_base *base)
{
    struct ld__loop *l = base ? loop_for(base) : NULL;
    if (!l || later_reserve(l) != 0)
        return NULL;
    ld_future *f = ld__future_create(l, K_LATER, W_ADOPTING | W_LATER);
    if (!f)
        l->later_reserved--;
    return f;
}

ld_future *ld__future_later_json(struct event_base *base, json_t *v, struct ld_lease *lease)
{
    /* ld__future_later_new() and later_fulfill_json() in one: the spare
     * batch is there or made before the future, and used at once. */
    struct ld__loop *l = base ? loop_for(base) : NULL;
    ld_future *f = NULL;
    if (l && (l->later_nspare > l->later_reserved || later_spare_add(l) == 0))
        f = ld__future_create(l, K_LATER, W_ADOPTING | W_LATER);
    if (!f) {
        if (lease)
            lease->release(lease);
        else
            json_decref(v);
        return NULL;
    }
    f->vtype = lease ? V_JSON_LEASED : V_JSON;
    f->a.j = v;
    f->b.p = lease;
    later_push(f, false);
    return f;
}

ld_future *ld__future_later_ptr(struct event_base *base, void *v, ld_free_fn free_fn)
{
    struct ld__loop *l = base ? loop_for(base) : NULL;
    ld_future *f = NULL;
    if (l && (l->later_nspare > l->later_reserved || later_spare_add(l) == 0))
        f = ld__future_create(l, K_LATER, W_ADOPTING | W_LATER);
    if (!f) {
        if (free_fn)
            free_fn(v);
        return NULL;
    }
    f->vtype = V_PTR;
    f->a.p = v;
    f->b.free = free_fn;
    later_push(f, false);
    return f;
}

ld_future *ld__future_later_rejected(struct event_base *base, int code, const char *msg)
{
    ld_future *f = ld__future_later_new(base);
    if (f)
        ld__later_reject_static(f, code, msg);
    return f;
}

void ld__later_adopt_into(ld_future *f, ld_future *src)
{
    unsigned w = f_lock(f);
    if (w & W_DONE) { /* cancelled by its holder meanwhile */
        f_unlock(f, w);
        ld_future_unref(src);
        return;
    }
    struct ld__xnode *handler = f->kind == K_PLAIN ? f->a.x : NULL;
    f->kind = K_LATER;
    f->vtype = V_ADOPT; /* under the lock: later_drop_shared() may read it */
    f->a.f = src;
    f_unlock(f, w | W_ADOPTING | W_LATER);
    ld__free(handler);    /* set by a holder who is not its producer: never runs */
    later_push(f, false); /* no reservation: may allocate a batch */
}

/* Queues f, given its outcome, behind what is queued on its loop.
 * `reserved`: f comes from ld__future_later_new(), which made sure of a
 * spare batch. */
static void later_push(ld_future *f, bool reserved)
{
    struct ld__loop *l = f->loop;
    struct ld__later *b = l->later_open;
    if (reserved)
        l->later_reserved--;
    f_ref(f); /* the batch's */
    f->c = NULL;
    if (b && l->tail == &b->x.n && remote_empty(l)) {
        b->last->c = f;
        b->last = f;
        return;
    }
    b = l->later_spare;
    if (!b && !(b = ld__malloc(sizeof(*b)))) {
        /* Only without a reservation, and out of memory. Completed at once,
         * f's callbacks would run before those of the futures waiting in
         * the batches queued: f joins the newest of them instead (ahead of
         * what was queued behind it, not of a future completed later). */
        b = l->later_open;
        if (b) {
            b->last->c = f;
            b->last = f;
            return;
        }
        later_settle(f, false); /* nothing completed later waits */
        ld_future_unref(f);
        return;
    }
    if (b == l->later_spare) {
        l->later_spare = b->next_spare;
        l->later_nspare--;
    }
    b->x.n.fn = later_run;
    b->x.n.arg = b;
    link_put(&b->x.n, LD__LINK_XNODE);
    b->x.future = NULL;
    b->x.tail = &b->x;
    b->x.flags = 0;
    b->loop = l;
    b->first = b->last = f;
    l->later_open = b;
    ld__enqueue(l, &b->x.n, &b->x.n, 0);
}

void ld__later_fulfill(ld_future *f, bool has_value, bool v)
{
    f->vtype = has_value ? V_BOOL : V_NONE;
    f->a.u = v;
    later_push(f, true);
}

void ld__later_reject_static(ld_future *f, int code, const char *msg)
{
    f->vtype = V_ERR_STATIC;
    f->a.i = code;
    f->b.cmsg = msg ? msg : ld_strerror(code);
    later_push(f, true);
}
