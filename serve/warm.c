/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/warm.c: lds_server_warm(): what the first requests after a load
 * would make, made ahead in the loop's slices: the body of
 * /sdk/latest-all (and so every item's text, which the other collections
 * and the streams' put are made of) and every flag compiled by the
 * evaluator (an all-flags state of a context nobody asked for, let go
 * of). Requests that come meanwhile join that work, as they would join
 * each other's.
 */
#include <ldasync/context.h>

#include "serve-internal.h"

struct lds_warm {
    lds_server *srv; /* NULL once the server let go of it */
    ld_future *fetch, *body, *state;
    int callbacks; /* still to run: the last one frees it */
};

static void warm_release(struct lds_warm *w)
{
    ld_future_unref(w->fetch);
    ld_future_unref(w->body);
    ld_future_unref(w->state);
    lds_free(w);
}

/* Registers `cb` on `*slot` (a reference of the warming's own); a
 * failure lets go of it (only slower first requests). */
static void warm_on(struct lds_warm *w, ld_future **slot, ld_future_cb cb)
{
    if (*slot && ld_future_on_complete(ld_future_ref(*slot), cb, w) == 0) {
        w->callbacks++;
        return;
    }
    ld_future_unref(*slot);
    *slot = NULL;
}

/* Each step's callback: the last one frees the warming. */
static void warm_step_done(ld_future *f, void *arg)
{
    (void)f;
    struct lds_warm *w = arg;
    if (--w->callbacks > 0)
        return;
    if (w->srv)
        w->srv->warm = NULL;
    warm_release(w);
}

static void warm_fetched(ld_future *f, void *arg)
{
    struct lds_warm *w = arg;
    lds_server *srv = w->srv;
    if (srv && ld_future_is_fulfilled(f)) {
        ld_future *wait = NULL;
        (void)lds_coll_begin(srv, LDS_COLL_ALL, ld_future_json(ld_future_all_get(f, 0)),
                             ld_future_json(ld_future_all_get(f, 1)), &wait);
        w->body = wait;
        warm_on(w, &w->body, warm_step_done);
    }
    warm_step_done(f, w);
}

void lds_server_warm(lds_server *srv)
{
    if (!srv || srv->closing)
        return;
    lds_warm_forget(srv);
    struct lds_warm *w = lds_calloc(1, sizeof *w);
    if (!w)
        return; /* only slower first requests */
    w->srv = srv;
    srv->warm = w;
    ld_context_builder *b = ld_context_builder_new("user", "ldasync-serve-warm");
    ld_context *ctx = b ? ld_context_builder_build(b, NULL) : NULL;
    ld_context_builder_free(b);
    if (ctx) {
        w->state = ld_evaluator_flags_state(srv->ev, ctx, LD_ALL_FLAGS_CLIENT_SIDE_ONLY);
        ld_context_unref(ctx);
        warm_on(w, &w->state, warm_step_done);
    }
    w->fetch = lds_fetch_all(srv);
    warm_on(w, &w->fetch, warm_fetched);
    if (w->callbacks == 0) {
        srv->warm = NULL;
        warm_release(w);
    }
}

void lds_warm_forget(lds_server *srv)
{
    struct lds_warm *w = srv->warm;
    if (!w)
        return;
    srv->warm = NULL;
    w->srv = NULL;
    /* the callbacks still to come free it */
    if (w->fetch)
        ld_future_cancel(w->fetch);
    if (w->body)
        ld_future_cancel(w->body);
    if (w->state)
        ld_future_cancel(w->state);
}
