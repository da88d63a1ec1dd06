/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: cancelling futures (ld_future_cancel(), cancel handlers), and
 * telling whether anybody still wants a future's outcome.
 */
#include <ldasync/error.h>
#include <ldasync/future.h>

#define LD_CORE_FUTURE_LAYOUT
#include "core/core-internal.h"

/* ------------------------------------------------------------------------- */
/* Cancelling                                                                */

/* References that do not mean "somebody wants the outcome" (see
 * ld__future_unwanted()): a derived future's hold on itself until its inputs
 * are done (ld__then_step's or ld__forward_step's argument, a combinator's
 * hold), the producer's own
 * reference, which a future with a cancel handler is taken to have, and
 * the registrations of consumers that no longer want it. */

/* How many of f's references a registration on it (a pending callback node)
 * stands for, if the consumer that made it no longer wants f's outcome: a
 * then, catch or forward result that is complete (cancelled, or rejected by
 * a timeout) holds f only through the node; a combinator whose result is
 * complete holds it through the node and its input slot. 0: the node is
 * somebody's live interest in f (a consumer still pending, an
 * ld_future_on_complete callback, a waiter). Called with f locked (or
 * private): the node stays registered, so its consumer stays allocated. */
static unsigned dead_claim(const struct ld__node *n)
{
    if (n->fn == ld__then_step || n->fn == ld__forward_step)
        return f_state(n->arg) ? 1 : 0;
    if (n->fn == ld__comb_input_done)
        return f_state(((const struct comb *)n->arg)->out) ? 2 : 0;
    return 0;
}

/* True if nobody wants f's outcome: f is pending and every reference to it
 * is one of `extra` (the caller's own), its references to itself (a
 * derived future's hold, the producer's reference of a future with a
 * cancel handler) or the claim of a consumer that was cancelled or
 * completed without it (dead_claim). A cancelled consumer's registration stays on
 * f until f completes, so it is counted here rather than released.
 * Stops at the first live callback: the cost is the number of dead
 * registrations before it. */
COLD int ld__future_unwanted(ld_future *f, unsigned extra)
{
    unsigned w = f_lock(f);
    int unwanted = 0;
    if (!(w & W_DONE)) {
        unsigned n =
            extra + (f->kind != K_PLAIN) + ((f->kind == K_PLAIN || f->kind == K_FORWARD) && f->a.x);
        unwanted = 1;
        if (f->n0.fn) {
            const struct ld__node *cur = &f->n0;
            for (;;) {
                unsigned d = dead_claim(cur);
                if (!d) {
                    unwanted = 0;
                    break;
                }
                n += d;
                if (!(cur = node_next(cur)))
                    break;
            }
        }
        unwanted = unwanted && atomic_load(&f->refs) == n;
    }
    f_unlock(f, w);
    return unwanted;
}

static int cancel_one(ld_future *f, ld_future **upstream)
{
    struct ld__settle_req r = {.state = W_REJECTED,
                               .vtype = V_ERR_STATIC,
                               .a.i = LD_ECANCELED,
                               .b.cmsg = ld_strerror(LD_ECANCELED),
                               .adopting_ok = 1,
                               .cancel = 1};
    int rc = ld__future_settle(f, &r);
    *upstream = r.upstream;
    return rc;
}

int ld_future_cancel(ld_future *f)
{
    if (!f)
        return LD_EINVAL;
    ld_future *up;
    int rc = cancel_one(f, &up);
    /* Walk up a chain of then/catch/forward links without recursion. The
     * cancelled link's registration is a dead claim on `up`; our reference
     * is the one extra. */
    while (up) {
        ld_future *next = NULL;
        if (ld__future_unwanted(up, 1))
            cancel_one(up, &next);
        ld_future_unref(up);
        up = next;
    }
    return rc;
}

int ld_future_set_cancel_handler(ld_future *f, ld_future_cb cb, void *arg)
{
    if (!f || !cb)
        return LD_EINVAL;
    struct ld__xnode *x = ld__xnode_new(f, cb, arg);
    if (!x)
        return LD_ENOMEM;
    unsigned w = f_lock(f);
    int rc = 0;
    if (w & W_DONE)
        rc = LD_EALREADY;
    else if (f->kind != K_PLAIN)
        rc = LD_EINVAL;
    if (rc != 0) {
        f_unlock(f, w);
        ld__free(x);
        return rc;
    }
    struct ld__xnode *old = f->a.x;
    f->a.x = x;
    f_unlock(f, w);
    ld__free(old);
    return 0;
}
