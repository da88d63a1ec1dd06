/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: futures completed on a libevent event_base.
 *
 * Dispatch design. Measured with bench/ldasync-bench on the 2-core CI kind of
 * machine, batched round trips (new, complete, one callback run by the loop),
 * medians of 7 runs: this design 16.6 ns; an event embedded in each future
 * 81.7 ns (alt.event_per_future; and ~190 bytes a future); event_base_once()
 * per callback 103.5 ns (alt.event_once); this design with malloc per future
 * instead of the free lists (LDASYNC_NO_POOL=1) 26.5 ns and 80 bytes a
 * pending future instead of 64. Hence:
 *
 *  - One dispatcher (struct ld__loop) per base: two events of its own and an
 *    intrusive FIFO of callback nodes. Completing a future splices its
 *    callback nodes onto the FIFO; one event_active() wakes the loop for a
 *    whole batch.
 *  - The first callback of a future is embedded in it, so a round trip
 *    (new, complete, one callback) allocates only the future, and futures come
 *    from a per-thread free list carved from 512-future slabs (64 bytes each,
 *    no malloc header).
 *  - Futures made while libevent threading is off belong to one thread and
 *    use plain loads and stores throughout (see shared_bit()). Shared
 *    futures append to the FIFO directly only inside a drain, on the
 *    draining thread; from anywhere else nodes go onto a lock-free
 *    multi-producer FIFO (Vyukov's, loop.c) that the drain pops from. A
 *    direct append first moves what is on that FIFO, so FIFO order holds
 *    across threads.
 *  - A shared future has a one-bit spinlock for completion against
 *    registration. One whose only reference is the caller's cannot be
 *    touched by anyone else, so then the lock is skipped.
 *  - A drain pass runs at most LD_DRAIN_BUDGET callbacks; the rest run after
 *    the loop has polled (a zero timeout, which libevent fires after the
 *    poll), so futures never starve I/O.
 *
 * The files: this one is the future itself (creating, completing, reading,
 * callbacks, then and catch, waiting); future_later.c completing later;
 * future_comb.c forward and the combinators (all, race, timeout);
 * future_cancel.c cancelling; loop.c the dispatcher
 * (registry, FIFOs, drain); pool.c the memory of futures. core-internal.h
 * holds their shared layout and the small functions the hot paths inline
 * across them.
 */
#include <event2/event.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/error.h>
#include <ldasync/future.h>

#define LD_CORE_FUTURE_LAYOUT
#include "core/core-internal.h"

/* ------------------------------------------------------------------------- */
/* Threads                                                                   */

/*
 * Futures may cross threads only when libevent threading is on (the base then
 * has a lock and can be woken from another thread). A future made while it is
 * off is used by one thread only, so its reference count, lock bit and queue
 * need no atomic read-modify-write: about 3 of them (~6-8 ns each here) per
 * then link and round trip otherwise. Threading, once on, stays on.
 * libevent 2.1 has no public query for it; evthread_get_lock_callbacks() is
 * exported by libevent_core (2.1 and 2.2) and configure checks for it.
 * Without it every future is treated as shared.
 */
#ifdef HAVE_EVTHREAD_GET_LOCK_CALLBACKS
#include <event2/thread.h>
struct evthread_lock_callbacks *evthread_get_lock_callbacks(void);
#endif

static atomic_int g_threads;
#ifdef HAVE_EVTHREAD_GET_LOCK_CALLBACKS
/* libevent's lock table: a static struct, so its address is stable. */
static const struct evthread_lock_callbacks *_Atomic g_lock_fns;
#endif

static inline unsigned shared_bit(void)
{
    if (LIKELY(atomic_load_explicit(&g_threads, memory_order_relaxed)))
        return W_SHARED;
#ifdef HAVE_EVTHREAD_GET_LOCK_CALLBACKS
    const struct evthread_lock_callbacks *cb =
        atomic_load_explicit(&g_lock_fns, memory_order_relaxed);
    if (UNLIKELY(!cb)) {
        cb = evthread_get_lock_callbacks();
        atomic_store_explicit(&g_lock_fns, cb, memory_order_relaxed);
    }
    if (!cb || !cb->alloc)
        return 0;
#endif
    atomic_store_explicit(&g_threads, 1, memory_order_relaxed);
    return W_SHARED;
}

bool ld__future_threads(void)
{
    return shared_bit() != 0;
}

/* ------------------------------------------------------------------------- */
/* Nodes                                                                     */

struct ld__xnode *ld__xnode_new(ld_future *f, ld_future_cb fn, void *arg)
{
    struct ld__xnode *x = ld__malloc(sizeof(*x));
    if (!x)
        return NULL;
    x->n.fn = fn;
    x->n.arg = arg;
    link_put(&x->n, LD__LINK_XNODE);
    x->future = f;
    x->tail = x;
    x->flags = LD__XN_HEAP;
    return x;
}

/* ------------------------------------------------------------------------- */
/* Creating and releasing                                                    */

ld_future *ld__future_create(struct ld__loop *l, unsigned kind, unsigned word)
{
    ld_future *f = future_mem();
    if (!f)
        return NULL;
    f->loop = l;
    atomic_init(&f->refs, 1);
    atomic_init(&f->word, (unsigned short)(word | shared_bit()));
    f->vtype = V_NONE;
    f->kind = (uint8_t)kind;
    f->n0.fn = NULL;
    f->n0.arg = NULL;
    link_put(&f->n0, 0);
    f->a.u = 0;
    f->b.u = 0;
    f->c = NULL;
    return f;
}

ld_future *ld_future_new(struct event_base *base)
{
    if (!base)
        return NULL;
    struct ld__loop *l = loop_for(base);
    return l ? ld__future_create(l, K_PLAIN, 0) : NULL;
}

ld_future *ld_future_ref(ld_future *f)
{
    if (!f)
        return NULL;
    f_ref(f);
    return f;
}

/* A future's JSON value may be released on another thread while the loop
 * thread references the same value (a store's item, answered by reference):
 * its count changes atomically (jansson's json_incref() and json_decref()
 * read it plainly first, and the decrement that frees does not acquire);
 * jansson's values that are never freed (refcount -1) are left alone. */
static inline void json_ref_shared(json_t *j)
{
    if (j && !ld__json_immortal(j))
        ld__json_incref(j);
}

static inline void json_unref_shared(json_t *j)
{
    if (j && !ld__json_immortal(j))
        ld__json_decref(j);
}

/* Releases what a future's value holds (a, b and vtype as for a complete
 * future, or the outcome a K_LATER future waits to be given). */
static inline void value_release(ld_future *f)
{
    switch (f->vtype) {
    case V_JSON:
        json_unref_shared(f->a.j);
        break;
    case V_JSON_LEASED:
        ((struct ld_lease *)f->b.p)->release(f->b.p);
        break;
    case V_PTR:
        if (f->b.free)
            f->b.free(f->a.p);
        break;
    case V_PTRREF:
        ld_future_unref(f->b.f);
        break;
    case V_ERR:
        ld__free(f->b.msg);
        break;
    case V_ADOPT:
        ld_future_unref(f->a.f);
        break;
    default:
        break;
    }
}

/* The outcome a K_LATER future holds, released: it will not be used. */
static void later_drop(ld_future *f)
{
    value_release(f);
    f->vtype = V_NONE;
}

/* Out of line: future_destroy(), inlined in ld_future_unref(), stays small. */
static NOINLINE void destroy_one(ld_future *f)
{
    unsigned w = atomic_load_explicit(&f->word, memory_order_acquire);
    if (w & W_DONE) {
        value_release(f);
    } else if ((f->kind == K_PLAIN || f->kind == K_FORWARD) && f->a.x) {
        ld__free(f->a.x); /* a cancel handler that will never run */
    } else if (f->kind == K_LATER) {
        later_drop(f); /* made, never given its outcome */
    }
    if (IS_COMB(f->kind) && f->c)
        ld__comb_release(f->c);
    future_mem_free(f);
}

/* Futures whose last reference dropped while another one was being
 * destroyed on this thread (its inputs, the owner of its pointer value):
 * destroyed after it, in a loop, so deep nesting uses constant stack. */
static TLS ld_future *tl_doomed;
static TLS int tl_destroying;

static void future_destroy(ld_future *f)
{
    if (tl_destroying) {
        f->n0.arg = tl_doomed; /* n0 is unused: no callback holds f */
        tl_doomed = f;
        return;
    }
    tl_destroying = 1;
    for (;;) {
        destroy_one(f);
        f = tl_doomed;
        if (!f)
            break;
        tl_doomed = f->n0.arg;
    }
    tl_destroying = 0;
}

/* The shared twin of the K_LATER case of ld__future_unref(): the caller
 * holds one of f's two references, about to drop it, and the other may be
 * its batch's. Under f's lock, so that neither later_settle() on the loop
 * thread nor another holder races with it. */
COLD static void later_drop_shared(ld_future *f)
{
    unsigned w = f_lock(f);
    if ((w & W_LATER) && atomic_load_explicit(&f->refs, memory_order_relaxed) == 2)
        later_drop(f); /* the other reference is the batch's: nobody reads it */
    f_unlock(f, w);
}

void ld__future_unref(ld_future *f)
{
    unsigned n = atomic_load_explicit(&f->refs, memory_order_acquire);
    if (n == 1) {
        future_destroy(f);
    } else if (!f_shared(f)) {
        /* A result completed later that only its batch holds now: nobody
         * will read its outcome, so what it holds goes at once (a store's
         * snapshot, say, that the store could otherwise write into). */
        if (UNLIKELY(f->kind == K_LATER) && n == 2)
            later_drop(f);
        atomic_store_explicit(&f->refs, n - 1, memory_order_relaxed);
    } else {
        if (UNLIKELY(n == 2) &&
            UNLIKELY(atomic_load_explicit(&f->word, memory_order_relaxed) & W_LATER))
            later_drop_shared(f);
        if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
            future_destroy(f);
    }
}

void ld_future_unref(ld_future *f)
{
    if (f)
        ld__future_unref(f);
}

struct event_base *ld_future_base(const ld_future *f)
{
    return f ? f->loop->base : NULL;
}

/* ------------------------------------------------------------------------- */
/* Completing                                                                */

/* The place a future becomes complete (later_settle() is the other, for
 * K_LATER futures). Returns 0 or LD_EALREADY; the
 * value in the request is the caller's to free on LD_EALREADY. */
int ld__future_settle(ld_future *f, struct ld__settle_req *r)
{
    unsigned w = f_lock(f);
    if ((w & W_DONE) || ((w & W_ADOPTING) && !r->adopting_ok)) {
        f_unlock(f, w);
        return LD_EALREADY;
    }
    unsigned kind = f->kind;
    struct ld__xnode *handler = NULL;
    if (kind == K_PLAIN || kind == K_FORWARD)
        handler = f->a.x;
    else if (UNLIKELY(kind == K_LATER)) /* cancelled while its outcome waits */
        later_drop(f);
    if (r->cancel && (kind == K_THEN || kind == K_CATCH || kind == K_FORWARD) && f->c)
        r->upstream = ld_future_ref(f->c);

    struct ld__node *first = NULL, *last = NULL;
    callbacks_of(f, &first, &last);
    f->a = r->a;
    f->b = r->b;
    if (!IS_COMB(kind) && kind != K_LATER) /* K_LATER: c links its batch */
        f->c = NULL;
    f->vtype = (uint8_t)r->vtype;
    /* Publish the outcome but keep the lock until the callbacks are queued:
     * one registered meanwhile (add_cb, on the loop thread) must queue
     * behind them, and the cancel handler before them. */
    w = (w & ~(W_ADOPTING | W_LATER)) | r->state;
    atomic_store_explicit(&f->word, (unsigned short)w, memory_order_release);
    if (UNLIKELY(w & W_INCHAIN)) /* before the callbacks can free anything */
        atomic_store(&f->loop->fwd_stale, 1);

    /* What the producer asked to run on cancellation runs before the
     * callbacks; it holds its own reference to f. */
    struct ld__node *pre_first = NULL, *pre_last = NULL;
    if (r->cancel && handler) {
        link_put(&handler->n, LD__LINK_XNODE);
        pre_first = pre_last = &handler->n;
        ld_future_ref(f);
    } else if (handler) {
        ld__free(handler);
    }
    if (r->cancel && IS_COMB(kind) && f->c)
        comb_queue_action(f, &pre_first, &pre_last);
    if (pre_first) {
        if (first)
            node_set_next(pre_last, first);
        else
            last = pre_last;
        first = pre_first;
    }
    if (first) {
        /* A callback's argument is usually the next thing it touches (for a
         * then link, the next future of the chain): start loading it. */
        __builtin_prefetch(first->arg);
        ld__enqueue(f->loop, first, last, w & W_SHARED);
    }
    f_unlock(f, w);
    return 0;
}

static int settle_simple(ld_future *f, unsigned vtype, union ld__slot a)
{
    struct ld__settle_req r = {.state = W_FULFILLED, .vtype = vtype, .a = a};
    return ld__future_settle(f, &r);
}

int ld_future_fulfill(ld_future *f)
{
    if (!f)
        return LD_EINVAL;
    return settle_simple(f, V_NONE, (union ld__slot){0});
}

int ld_future_fulfill_bool(ld_future *f, bool v)
{
    if (!f)
        return LD_EINVAL;
    return settle_simple(f, V_BOOL, (union ld__slot){.u = v ? 1 : 0});
}

int ld_future_fulfill_int(ld_future *f, int64_t v)
{
    if (!f)
        return LD_EINVAL;
    return settle_simple(f, V_INT, (union ld__slot){.i = v});
}

int ld_future_fulfill_json(ld_future *f, json_t *v)
{
    int rc = f ? settle_simple(f, V_JSON, (union ld__slot){.j = v}) : LD_EINVAL;
    if (rc != 0)
        json_decref(v);
    return rc;
}

int ld_future_fulfill_ptr(ld_future *f, void *v, ld_free_fn free_fn)
{
    int rc = LD_EINVAL;
    if (f) {
        struct ld__settle_req r = {
            .state = W_FULFILLED, .vtype = V_PTR, .a.p = v, .b.free = free_fn};
        rc = ld__future_settle(f, &r);
    }
    if (rc != 0 && free_fn)
        free_fn(v);
    return rc;
}

/* Rejects with a message that lives for the whole process. */
static int reject_static(ld_future *f, int code, const char *cmsg, int adopting_ok)
{
    struct ld__settle_req r = {.state = W_REJECTED,
                               .vtype = V_ERR_STATIC,
                               .a.i = code,
                               .b.cmsg = cmsg,
                               .adopting_ok = adopting_ok};
    return ld__future_settle(f, &r);
}

/* Rejects with a message we own (msg may be NULL: the static strerror). */
int ld__reject_msg(ld_future *f, int code, char *msg, int adopting_ok)
{
    struct ld__settle_req r = {.state = W_REJECTED, .a.i = code, .adopting_ok = adopting_ok};
    if (msg) {
        r.vtype = V_ERR;
        r.b.msg = msg;
    } else {
        r.vtype = V_ERR_STATIC;
        r.b.cmsg = ld_strerror(code);
    }
    int rc = ld__future_settle(f, &r);
    if (rc != 0)
        ld__free(msg);
    return rc;
}

LD_PRINTF(2, 0) static char *format_msg(int *nomem, const char *fmt, va_list ap)
{
    char *msg = NULL;
    *nomem = 0;
    if (!fmt)
        return NULL;
    if (!(msg = ld__vasprintf(fmt, ap))) {
        *nomem = 1;
        return NULL;
    }
    return msg;
}

LD_PRINTF(3, 0) static int vreject(ld_future *f, int code, const char *fmt, va_list ap)
{
    int nomem;
    char *msg = format_msg(&nomem, fmt, ap);
    int rc = ld__reject_msg(f, code, msg, 0);
    return rc == 0 && nomem ? LD_ENOMEM : rc;
}

int ld_future_reject(ld_future *f, int code, const char *fmt, ...)
{
    if (!f || code >= 0)
        return LD_EINVAL;
    va_list ap;
    va_start(ap, fmt);
    int rc = vreject(f, code, fmt, ap);
    va_end(ap);
    return rc;
}

ld_future *ld_future_fulfilled_json(struct event_base *base, json_t *v)
{
    /* Made complete: nobody else can see it yet, so no settle (no lock, no
     * callbacks to queue). */
    struct ld__loop *l = base ? loop_for(base) : NULL;
    ld_future *f = l ? ld__future_create(l, K_PLAIN, W_FULFILLED) : NULL;
    if (!f) {
        json_decref(v);
        return NULL;
    }
    f->vtype = V_JSON;
    f->a.j = v;
    return f;
}

ld_future *ld_future_rejected(struct event_base *base, int code, const char *fmt, ...)
{
    if (code >= 0)
        return NULL;
    ld_future *f = ld_future_new(base);
    if (!f)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    vreject(f, code, fmt, ap); /* LD_ENOMEM still leaves f rejected */
    va_end(ap);
    return f;
}

ld_future *ld__future_rejected_static(struct event_base *base, int code, const char *msg)
{
    ld_future *f = ld_future_new(base);
    if (f)
        reject_static(f, code, msg ? msg : ld_strerror(code), 0);
    return f;
}

/* Completes `out` the way `src` (complete) did. */
int ld__adopt(ld_future *out, ld_future *src)
{
    struct ld__settle_req r = {.state = f_state(src), .vtype = src->vtype, .adopting_ok = 1};
    if (r.state == W_REJECTED) {
        if (src->vtype == V_ERR_STATIC)
            return reject_static(out, (int)src->a.i, src->b.cmsg, 1);
        char *copy = ld__strdup(src->b.cmsg);
        if (!copy)
            return ld__reject_msg(out, (int)src->a.i, NULL, 1);
        return ld__reject_msg(out, (int)src->a.i, copy, 1);
    }
    r.a = src->a;
    switch (src->vtype) {
    case V_JSON_LEASED: /* out takes a reference of its own */
        r.vtype = V_JSON;
        json_ref_shared(src->a.j);
        break;
    case V_JSON:
        json_ref_shared(src->a.j);
        break;
    case V_PTR: /* the value stays owned by src, which out keeps alive */
        r.vtype = V_PTRREF;
        r.b.f = ld_future_ref(src);
        break;
    case V_PTRREF:
        r.b.f = ld_future_ref(src->b.f);
        break;
    default:
        r.vtype = src->vtype == V_BOOL || src->vtype == V_INT ? src->vtype : V_NONE;
        break;
    }
    int rc = ld__future_settle(out, &r);
    if (rc != 0) {
        if (r.vtype == V_JSON)
            json_unref_shared(r.a.j);
        else if (r.vtype == V_PTRREF)
            ld_future_unref(r.b.f);
    }
    return rc;
}

/* ------------------------------------------------------------------------- */
/* Reading                                                                   */

bool ld_future_is_pending(const ld_future *f)
{
    return f && f_state(f) == 0;
}

bool ld_future_is_fulfilled(const ld_future *f)
{
    return f && f_state(f) == W_FULFILLED;
}

bool ld_future_is_rejected(const ld_future *f)
{
    return f && f_state(f) == W_REJECTED;
}

static inline int fulfilled_with(const ld_future *f, unsigned vtype)
{
    return f && f_state(f) == W_FULFILLED && f->vtype == vtype;
}

json_t *ld_future_json(const ld_future *f)
{
    return fulfilled_with(f, V_JSON) || fulfilled_with(f, V_JSON_LEASED) ? f->a.j : NULL;
}

bool ld_future_bool(const ld_future *f)
{
    return fulfilled_with(f, V_BOOL) ? f->a.u != 0 : false;
}

int64_t ld_future_int(const ld_future *f)
{
    return fulfilled_with(f, V_INT) ? f->a.i : 0;
}

void *ld_future_ptr(const ld_future *f)
{
    return fulfilled_with(f, V_PTR) || fulfilled_with(f, V_PTRREF) ? f->a.p : NULL;
}

int ld_future_error(const ld_future *f)
{
    if (!f)
        return LD_EINVAL;
    return f_state(f) == W_REJECTED ? (int)f->a.i : 0;
}

const char *ld_future_error_message(const ld_future *f)
{
    return f && f_state(f) == W_REJECTED ? f->b.cmsg : NULL;
}

/* ------------------------------------------------------------------------- */
/* Callbacks                                                                 */

/* Adds fn(f, arg) to f's callbacks; steals the caller's reference to f,
 * which the node holds until fn has run. */
int ld__add_cb(ld_future *f, ld_future_cb fn, void *arg)
{
    struct ld__xnode *x = NULL;
    if (f->n0.fn) { /* n0 only changes on the loop thread: no race here */
        x = ld__xnode_new(f, fn, arg);
        if (!x) {
            ld_future_unref(f);
            return LD_ENOMEM;
        }
    }
    unsigned w = f_lock(f);
    if (!(w & W_DONE)) {
        if (!x) {
            f->n0.fn = fn;
            f->n0.arg = arg;
            link_put(&f->n0, 0);
        } else if (!link_get(&f->n0)) {
            link_put(&f->n0, (uintptr_t)x);
        } else {
            struct ld__xnode *head = (struct ld__xnode *)link_get(&f->n0);
            node_set_next(&head->tail->n, &x->n);
            head->tail = x;
        }
        f_unlock(f, w);
        return 0;
    }
    f_unlock(f, w);
    struct ld__node *n = &f->n0;
    if (x) {
        n = &x->n;
    } else {
        n->fn = fn;
        n->arg = arg;
        link_put(n, 0);
    }
    ld__enqueue(f->loop, n, n, w & W_SHARED);
    return 0;
}

int ld_future_on_complete(ld_future *f, ld_future_cb cb, void *arg)
{
    if (!f)
        return LD_EINVAL;
    if (!cb) {
        ld_future_unref(f);
        return LD_EINVAL;
    }
    return ld__add_cb(f, cb, arg);
}

/* ------------------------------------------------------------------------- */
/* then, catch                                                              */

void ld__then_step(ld_future *in, void *arg)
{
    ld_future *out = arg;
    unsigned w = f_lock(out);
    unsigned kind = out->kind;
    if ((w & W_DONE) || (kind != K_THEN && kind != K_CATCH) || out->c != in) {
        f_unlock(out, w);
        ld_future_unref(out);
        return;
    }
    ld_then_fn fn = out->a.then;
    void *uarg = out->b.p;
    out->kind = K_PLAIN;
    out->a.u = 0;
    out->b.u = 0;
    out->c = NULL;
    f_unlock(out, w & ~W_ADOPTING);
    if ((kind == K_THEN) == ld_future_is_fulfilled(in))
        fn(in, out, uarg);
    else
        ld__adopt(out, in);
    ld_future_unref(out);
}

static ld_future *derive(ld_future *in, ld_then_fn fn, void *arg, unsigned kind)
{
    if (!in)
        return NULL;
    if (!fn) {
        ld_future_unref(in);
        return NULL;
    }
    ld_future *out = ld__future_create(in->loop, kind, W_ADOPTING);
    if (!out) {
        ld_future_unref(in);
        return NULL;
    }
    out->a.then = fn;
    out->b.p = arg;
    out->c = in;
    atomic_init(&out->refs, 2); /* the caller's, and ld__then_step's */
    if (ld__add_cb(in, ld__then_step, out) != 0) {
        future_destroy(out);
        return NULL;
    }
    return out;
}

ld_future *ld_future_then(ld_future *in, ld_then_fn fn, void *arg)
{
    return derive(in, fn, arg, K_THEN);
}

ld_future *ld_future_catch(ld_future *in, ld_then_fn fn, void *arg)
{
    return derive(in, fn, arg, K_CATCH);
}

/* ------------------------------------------------------------------------- */
/* Waiting                                                                   */

static void keepalive_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static void wake_cb(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
}

int ld_future_wait(ld_future *f)
{
    if (!f)
        return LD_EINVAL;
    if (!ld_future_is_pending(f))
        return 0;
    struct ld__loop *l = f->loop;
    /* Inside one of our callbacks we know it; inside another callback of the
     * base, or while another thread runs its loop, event_base_loop() refuses
     * (-1, after logging a warning through libevent's log callback).
     * event_base_get_running_event() would tell, but libevent 2.1.12 crashes
     * in it when called outside any callback without threading. */
    if (ld__tl_drain == l)
        return LD_EBUSY;
    /* One pass that cannot block tells whether this thread may run the loop
     * at all (-1: inside one of its callbacks, or another thread runs it). */
    if (event_base_loop(l->base, EVLOOP_NONBLOCK) < 0)
        return LD_EBUSY;
    if (!ld_future_is_pending(f))
        return 0;
    /* Completing a future without callbacks queues nothing, so nothing
     * would wake the loop: give f a callback that does nothing. */
    int rc = ld__add_cb(ld_future_ref(f), wake_cb, NULL);
    if (rc != 0)
        return rc;
    struct event *keep = NULL;
    while (ld_future_is_pending(f)) {
        int r = event_base_loop(l->base, EVLOOP_ONCE);
        if (r < 0) {
            rc = LD_EBUSY;
            break;
        }
        if (r == 1 && !keep && ld_future_is_pending(f)) {
            /* No events: only another thread can complete f. Block in the
             * loop (it wakes on event_active) instead of spinning. */
            static const struct timeval hour = {3600, 0};
            keep = event_new(l->base, -1, EV_PERSIST, keepalive_cb, NULL);
            if (!keep || event_add(keep, &hour) != 0) {
                rc = LD_ENOMEM;
                break;
            }
        }
    }
    if (keep)
        event_free(keep);
    return rc;
}

ld_free_fn ld__future_ptr_free_fn(const ld_future *f)
{
    if (fulfilled_with(f, V_PTRREF))
        f = f->b.f; /* the owner: fulfilled with V_PTR */
    return fulfilled_with(f, V_PTR) ? f->b.free : NULL;
}

/* ---- Lines of the futures' memory for other modules (core-internal.h) ---- */

void *ld__line_alloc(void)
{
    return future_mem();
}

void ld__line_free(void *p)
{
    if (p)
        future_mem_free(p);
}
