/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: futures that take their outcome from others: ld_future_forward()
 * (with its cycle check) and the combinators ld_future_all(),
 * ld_future_race() and ld_future_timeout(). then and catch are in future.c.
 */
#include <event2/event.h>
#include <string.h>

#include <ldasync/error.h>
#include <ldasync/future.h>

#define LD_CORE_FUTURE_LAYOUT
#include "core/core-internal.h"

/* The longest timeout given to libevent: 100 years, or 2^28 s (8.5 years)
 * where time_t has 32 bits; longer ones are cut to it (see
 * ld_future_timeout). */
#define LD_TIMEOUT_MAX_SEC (sizeof(time_t) > 4 ? (time_t)3155760000 : (time_t)0x10000000)

/* ------------------------------------------------------------------------- */
/* forward                                                                   */

/*
 * Forward's cycle check. Each pending future waits on at most one other
 * through a then, catch, forward or timeout link (its upstream), so the
 * futures form trees whose roots wait on nothing; `out` of a forward is
 * such a root, and the new link closes a cycle exactly when the root of
 * `from`'s tree is `out`. Walking up link by link made building a chain
 * quadratic, so the walk leaves shortcuts behind, as union-find's path
 * compression does: a per-loop table maps a future to a farther future
 * on its way up. Links only appear at roots (forward) or at new leaves
 * (then, catch, timeout), so a shortcut stays true until a future on its
 * way completes: every future a shortcut passes gets W_INCHAIN,
 * ld__future_settle() then sets fwd_stale, and the table is emptied before
 * its next use (or at the end of the drain pass). Until the callbacks of
 * such a completion have run, the futures on the way are still held by
 * their registrations, so no shortcut ever leads to freed memory. The table
 * is core-internal.h's ld__ptrtab.
 */
COLD void ld__fwd_clear(struct ld__loop *l)
{
    atomic_store(&l->fwd_stale, 0);
    ld__ptrtab_clear(&l->fwd);
}

static ld_future *fwd_get(const struct ld__loop *l, const ld_future *f)
{
    return ld__ptrtab_get(&l->fwd, f);
}

/* Sets f's shortcut; without memory the shortcut is simply not kept. */
COLD static void fwd_put(struct ld__loop *l, ld_future *f, ld_future *up)
{
    ld__ptrtab_put(&l->fwd, f, up);
}

/* The future f is waiting on through a single link, if any. `mark`: f is
 * on a path that will get a shortcut; flag it (under its lock, so that a
 * completion either comes first, and there is no upstream, or sees the
 * flag). */
static ld_future *upstream_of(ld_future *f, int mark)
{
    unsigned w = f_lock(f);
    ld_future *up = NULL;
    if (!(w & W_DONE)) {
        if (f->kind == K_THEN || f->kind == K_CATCH || f->kind == K_FORWARD)
            up = f->c;
        else if (f->kind == K_TIMEOUT && f->c)
            up = ((struct comb *)f->c)->in[0];
        if (mark)
            w |= W_INCHAIN;
    }
    f_unlock(f, w);
    return up;
}

/* True if `from` is `target` or waits on it through then, catch, forward
 * or timeout links. `target` waits on nothing (it is pending and plain),
 * so it can only be the end of the way up. Amortised constant time a
 * link: the way up is walked once, then shortcut to its end. */
COLD static int waits_on(ld_future *from, ld_future *target)
{
    struct ld__loop *l = from->loop;
    if (atomic_load(&l->fwd_stale))
        ld__fwd_clear(l);
    ld_future *cur = from, *next;
    while (cur != target) {
        if (!(next = fwd_get(l, cur)) && !(next = upstream_of(cur, 1)))
            break;
        cur = next;
    }
    ld_future *end = cur;
    if (end == target)
        upstream_of(target, 1); /* the end of shortcuts: flag it too */
    /* Compress: everything on the way now leads straight to its end. */
    for (cur = from; cur != end; cur = next) {
        if (!(next = fwd_get(l, cur)) && !(next = upstream_of(cur, 0)))
            break; /* completed meanwhile (another thread): stale anyway */
        if (next != end)
            fwd_put(l, cur, end);
    }
    return end == target;
}

void ld__forward_step(ld_future *from, void *arg)
{
    ld_future *out = arg;
    unsigned w = f_lock(out);
    int mine = !(w & W_DONE) && out->kind == K_FORWARD && out->c == from;
    if (mine) {
        out->kind = K_PLAIN;
        out->c = NULL;
    }
    f_unlock(out, w);
    if (mine)
        ld__adopt(out, from);
    ld_future_unref(out);
}

int ld_future_forward(ld_future *out, ld_future *from)
{
    if (!out || !from) {
        ld_future_unref(from);
        return LD_EINVAL;
    }
    if (out->loop != from->loop) {
        ld_future_unref(from);
        return LD_EINVAL;
    }
    if (waits_on(from, out)) {
        /* reject before releasing `from`: it may be out's last reference */
        int rc = ld__reject_msg(out, LD_EINVAL, ld__strdup("ld_future_forward: cycle"), 0);
        ld_future_unref(from);
        return rc == LD_EALREADY ? LD_EALREADY : LD_EINVAL;
    }
    unsigned w = f_lock(out);
    if ((w & (W_DONE | W_ADOPTING)) || out->kind != K_PLAIN) {
        f_unlock(out, w);
        ld_future_unref(from);
        return LD_EALREADY;
    }
    out->kind = K_FORWARD;
    out->c = from;
    f_unlock(out, w | W_ADOPTING);
    ld_future_ref(out);
    if (ld__add_cb(from, ld__forward_step, out) != 0) {
        w = f_lock(out);
        if (!(w & W_DONE)) {
            out->kind = K_PLAIN;
            out->c = NULL;
            w &= ~W_ADOPTING;
        }
        f_unlock(out, w);
        ld_future_unref(out);
        return LD_ENOMEM;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Combinators: all, race, timeout                                           */

void ld__comb_release(void *state)
{
    struct comb *s = state;
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < s->n; i++)
        ld_future_unref(s->in[i]);
    if (s->timer)
        event_free(s->timer);
    ld__free(s);
}

static void comb_done_one(struct comb *s)
{
    if (--s->active > 0)
        return;
    ld_future *out = s->out;
    s->out = NULL;
    ld__comb_release(s);
    ld_future_unref(out);
}

/* Cancels input i if it is pending and nobody wants it any more: the result
 * is complete (the callers see to it), so this state's slot and
 * registration are a dead claim, like those of other consumers that are
 * complete. */
static void comb_cancel_input(struct comb *s, size_t i)
{
    ld_future *f = s->in[i];
    if (ld_future_is_pending(f) && ld__future_unwanted(f, 0))
        ld_future_cancel(f);
}

static void comb_cancel_inputs(struct comb *s)
{
    for (size_t i = 0; i < s->n; i++)
        comb_cancel_input(s, i);
}

static void comb_disarm(struct comb *s)
{
    if (s->timer_armed) {
        event_del(s->timer);
        s->timer_armed = 0;
        comb_done_one(s);
    }
}

void ld__comb_action(ld_future *out, void *arg)
{
    struct comb *s = arg;
    (void)out;
    comb_cancel_inputs(s);
    comb_disarm(s);
}

void ld__comb_input_done(ld_future *in, void *arg)
{
    struct comb *s = arg;
    ld_future *out = s->out;
    switch (s->kind) {
    case K_ALL:
        if (ld_future_is_rejected(in)) {
            if (ld__adopt(out, in) == 0)
                comb_cancel_inputs(s);
        } else if (--s->remaining == 0) {
            struct ld__settle_req r = {.state = W_FULFILLED, .adopting_ok = 1};
            ld__future_settle(out, &r);
        }
        break;
    case K_RACE:
        if (ld__adopt(out, in) == 0)
            comb_cancel_inputs(s);
        break;
    default: /* K_TIMEOUT */
        ld__adopt(out, in);
        comb_disarm(s);
        break;
    }
    comb_done_one(s);
}

static void comb_timer(evutil_socket_t fd, short what, void *arg)
{
    struct comb *s = arg;
    (void)fd;
    (void)what;
    s->timer_armed = 0;
    if (ld__reject_msg(s->out, LD_ETIMEDOUT, NULL, 1) == 0)
        comb_cancel_input(s, 0);
    comb_done_one(s);
}

static void unref_all(ld_future **fs, size_t n)
{
    if (fs)
        for (size_t i = 0; i < n; i++)
            ld_future_unref(fs[i]);
}

static ld_future *comb_new(struct event_base *base, unsigned kind, ld_future **fs, size_t n)
{
    struct ld__loop *l = base ? loop_for(base) : NULL;
    int ok = l && (fs || n == 0);
    for (size_t i = 0; ok && i < n; i++)
        ok = fs[i] && fs[i]->loop == l;
    struct comb *s = ok ? ld__calloc(1, sizeof(*s) + n * sizeof(ld_future *)) : NULL;
    ld_future *out = s ? ld__future_create(l, kind, W_ADOPTING) : NULL;
    if (!out) {
        ld__free(s);
        unref_all(fs, n);
        return NULL;
    }
    atomic_init(&s->refs, 2);
    s->kind = kind;
    s->n = n;
    s->remaining = n;
    s->active = 1; /* held while registering */
    s->out = ld_future_ref(out);
    if (n)
        memcpy(s->in, fs, n * sizeof(ld_future *));
    out->c = s;
    return out;
}

/* Registers on every input; then drops the hold taken in comb_new. */
static void comb_start(ld_future *out)
{
    struct comb *s = out->c;
    for (size_t i = 0; i < s->n; i++) {
        s->active++;
        if (ld__add_cb(ld_future_ref(s->in[i]), ld__comb_input_done, s) != 0) {
            s->active--;
            ld__reject_msg(out, LD_ENOMEM, NULL, 1);
            break;
        }
    }
    comb_done_one(s);
}

ld_future *ld_future_all(struct event_base *base, ld_future **fs, size_t n)
{
    ld_future *out = comb_new(base, K_ALL, fs, n);
    if (!out)
        return NULL;
    if (n == 0) {
        struct ld__settle_req r = {.state = W_FULFILLED, .adopting_ok = 1};
        ld__future_settle(out, &r);
    }
    comb_start(out);
    return out;
}

ld_future *ld_future_all_get(const ld_future *all, size_t i)
{
    if (!all || all->kind != K_ALL || !all->c)
        return NULL;
    const struct comb *s = all->c;
    return i < s->n ? s->in[i] : NULL;
}

ld_future *ld_future_race(struct event_base *base, ld_future **fs, size_t n)
{
    if (n == 0)
        return NULL;
    ld_future *out = comb_new(base, K_RACE, fs, n);
    if (out)
        comb_start(out);
    return out;
}

ld_future *ld_future_timeout(ld_future *f, const struct timeval *after)
{
    if (!f)
        return NULL;
    if (!after || after->tv_sec < 0 || after->tv_usec < 0 || after->tv_usec >= 1000000) {
        ld_future_unref(f);
        return NULL;
    }
    /* libevent adds a relative timeout to the current time (the monotonic
     * clock) without checking for overflow: {LONG_MAX, 0}, a natural
     * "never", wraps to a time in the past and fires at once. Cap it; a
     * timeout this long never fires in practice. */
    struct timeval tv = *after;
    if (tv.tv_sec > LD_TIMEOUT_MAX_SEC) {
        tv.tv_sec = LD_TIMEOUT_MAX_SEC;
        tv.tv_usec = 0;
    }
    ld_future *out = comb_new(f->loop->base, K_TIMEOUT, &f, 1);
    if (!out)
        return NULL;
    struct comb *s = out->c;
    s->timer = event_new(f->loop->base, -1, 0, comb_timer, s);
    if (!s->timer || event_add(s->timer, &tv) != 0) {
        ld__reject_msg(out, LD_ENOMEM, NULL, 1);
        comb_done_one(s); /* nothing registered: drops the start hold */
        return out;
    }
    s->timer_armed = 1;
    s->active++;
    comb_start(out);
    return out;
}
