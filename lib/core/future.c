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
 * The files: this one is the future itself (creating, completing, completing
 * later, callbacks, then/catch/forward, the combinators, cancelling,
 * waiting); loop.c the dispatcher (registry, FIFOs, drain); pool.c the
 * memory of futures. future-layout.h holds their shared layout and the
 * small functions the hot paths inline across them.
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

/* The longest timeout given to libevent: 100 years, or 2^28 s (8.5 years)
 * where time_t has 32 bits; longer ones are cut to it (see
 * ld_future_timeout). */
#define LD_TIMEOUT_MAX_SEC (sizeof(time_t) > 4 ? (time_t)3155760000 : (time_t)0x10000000)

/* word bits */
#define W_LOCK 0x1u
#define W_FULFILLED 0x2u
#define W_REJECTED 0x4u
#define W_DONE (W_FULFILLED | W_REJECTED)
#define W_ADOPTING 0x8u /* pending, but its outcome comes from other futures */
#define W_SHARED 0x10u  /* made while libevent threading was on: use atomics */
#define W_INCHAIN 0x20u /* forward's cycle check has a shortcut over it */
#define W_LATER 0x40u   /* K_LATER and pending: its outcome may wait in a batch */

/* value types */
enum {
    V_NONE,
    V_BOOL,
    V_INT,
    V_JSON,
    V_JSON_LEASED,
    V_PTR,
    V_PTRREF,
    V_ERR,
    V_ERR_STATIC,
    V_ADOPT /* only while K_LATER: a = a complete future whose outcome to take */
};

/* kinds */
enum { K_PLAIN, K_THEN, K_CATCH, K_FORWARD, K_TIMEOUT, K_ALL, K_RACE, K_LATER };

/* K_LATER: made by ld__future_later_new(); once given its outcome, it waits
 * in a batch of the loop (see "Completing later") with a, b and vtype holding
 * the outcome (V_ERR and V_ERR_STATIC: a rejection) and c the next future of
 * the batch. */

#define IS_COMB(k) ((k) == K_TIMEOUT || (k) == K_ALL || (k) == K_RACE)

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

static struct ld__xnode *xnode_new(ld_future *f, ld_future_cb fn, void *arg)
{
    struct ld__xnode *x = ld__malloc(sizeof(*x));
    if (!x)
        return NULL;
    x->n.fn = fn;
    x->n.arg = arg;
    link_put(&x->n, 1);
    x->future = f;
    x->tail = x;
    x->flags = LD__XN_HEAP;
    return x;
}

/* ------------------------------------------------------------------------- */
/* Locking a future                                                          */

/* Locks f, or only reads its word when no other thread can touch it: f is
 * not shared, or the caller holds its one reference. Returns the word, with
 * W_LOCK if it took the lock. */
static inline unsigned f_lock(ld_future *f)
{
    unsigned short w = atomic_load_explicit(&f->word, memory_order_relaxed);
    if (!(w & W_SHARED)) /* W_SHARED never changes */
        return w;
    if (atomic_load_explicit(&f->refs, memory_order_acquire) == 1)
        /* Read again: the holder of a reference dropped since the first
         * read may have completed f. */
        return atomic_load_explicit(&f->word, memory_order_acquire);
    for (;;) {
        if (!(w & W_LOCK)) {
            if (atomic_compare_exchange_weak_explicit(&f->word, &w, (unsigned short)(w | W_LOCK),
                                                      memory_order_acquire, memory_order_relaxed))
                return w | W_LOCK;
        } else {
            sched_yield();
            w = atomic_load_explicit(&f->word, memory_order_relaxed);
        }
    }
}

static inline void f_unlock(ld_future *f, unsigned w)
{
    atomic_store_explicit(&f->word, (unsigned short)(w & ~W_LOCK), memory_order_release);
}

static inline unsigned f_state(const ld_future *f)
{
    return atomic_load_explicit(&((ld_future *)f)->word, memory_order_acquire) & W_DONE;
}

/* ------------------------------------------------------------------------- */
/* Creating and releasing                                                    */

static ld_future *future_create(struct ld__loop *l, unsigned kind, unsigned word)
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
    return l ? future_create(l, K_PLAIN, 0) : NULL;
}

static inline int f_shared(const ld_future *f)
{
    return atomic_load_explicit(&((ld_future *)f)->word, memory_order_relaxed) & W_SHARED;
}

ld_future *ld_future_ref(ld_future *f)
{
    if (!f)
        return NULL;
    /* Like f_lock(): with one reference, the caller's, nobody else can
     * touch the count. */
    unsigned n = atomic_load_explicit(&f->refs, memory_order_relaxed);
    if (n == 1 || !f_shared(f))
        atomic_store_explicit(&f->refs, n + 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
    return f;
}

static void comb_release(void *state);
static int unwanted(ld_future *f, unsigned extra);
static void later_drop(ld_future *f);
static void later_push(ld_future *f, bool reserved);
static int adopt(ld_future *out, ld_future *src);

/* Releases what a future's value holds (a, b and vtype as for a complete
 * future, or the outcome a K_LATER future waits to be given). */
static inline void value_release(ld_future *f)
{
    switch (f->vtype) {
    case V_JSON:
        json_decref(f->a.j);
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
        comb_release(f->c);
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

struct settle_req {
    unsigned state; /* W_FULFILLED or W_REJECTED */
    unsigned vtype;
    union ld__slot a, b;
    int adopting_ok;     /* may complete a future that is adopting */
    int cancel;          /* run the cancel handler / combinator action */
    ld_future *upstream; /* out: referenced input to consider cancelling */
};

static void comb_queue_action(ld_future *f, struct ld__node **first, struct ld__node **last);

/* The chain of f's callbacks (f locked, pending), or NULL. */
static inline void callbacks_of(ld_future *f, struct ld__node **first, struct ld__node **last)
{
    if (f->n0.fn) {
        struct ld__xnode *x = (struct ld__xnode *)link_get(&f->n0);
        *first = &f->n0;
        *last = x ? &x->tail->n : &f->n0;
    }
}

/* The place a future becomes complete (later_settle() is the other, for
 * K_LATER futures). Returns 0 or LD_EALREADY; the
 * value in the request is the caller's to free on LD_EALREADY. */
static int settle(ld_future *f, struct settle_req *r)
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
        link_put(&handler->n, 1);
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
    struct settle_req r = {.state = W_FULFILLED, .vtype = vtype, .a = a};
    return settle(f, &r);
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
        struct settle_req r = {.state = W_FULFILLED, .vtype = V_PTR, .a.p = v, .b.free = free_fn};
        rc = settle(f, &r);
    }
    if (rc != 0 && free_fn)
        free_fn(v);
    return rc;
}

/* Rejects with a message that lives for the whole process. */
static int reject_static(ld_future *f, int code, const char *cmsg, int adopting_ok)
{
    struct settle_req r = {.state = W_REJECTED,
                           .vtype = V_ERR_STATIC,
                           .a.i = code,
                           .b.cmsg = cmsg,
                           .adopting_ok = adopting_ok};
    return settle(f, &r);
}

/* Rejects with a message we own (msg may be NULL: the static strerror). */
static int reject_msg(ld_future *f, int code, char *msg, int adopting_ok)
{
    struct settle_req r = {.state = W_REJECTED, .a.i = code, .adopting_ok = adopting_ok};
    if (msg) {
        r.vtype = V_ERR;
        r.b.msg = msg;
    } else {
        r.vtype = V_ERR_STATIC;
        r.b.cmsg = ld_strerror(code);
    }
    int rc = settle(f, &r);
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
    int rc = reject_msg(f, code, msg, 0);
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
    ld_future *f = l ? future_create(l, K_PLAIN, W_FULFILLED) : NULL;
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

/* The outcome a K_LATER future holds, released: it will not be used. */
static void later_drop(ld_future *f)
{
    value_release(f);
    f->vtype = V_NONE;
}

/* Completes f (a K_LATER future still in its batch) with the outcome it
 * holds, unless something (a cancellation) completed it first: settle()
 * without what a K_LATER future never has (a cancel handler, a combinator
 * action, an upstream), the outcome left where it is. */
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
        adopt(f, src);
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
        ld_future_unref(f); /* the batch's */
        f = next;
    }
}

ld_future *ld__future_later_new(struct event_base *base)
{
    struct ld__loop *l = base ? loop_for(base) : NULL;
    if (!l || later_reserve(l) != 0)
        return NULL;
    ld_future *f = future_create(l, K_LATER, W_ADOPTING | W_LATER);
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
        f = future_create(l, K_LATER, W_ADOPTING | W_LATER);
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
        f = future_create(l, K_LATER, W_ADOPTING | W_LATER);
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
    ld_future_ref(f); /* the batch's */
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
    link_put(&b->x.n, 1);
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

/* Completes `out` the way `src` (complete) did. */
static int adopt(ld_future *out, ld_future *src)
{
    struct settle_req r = {.state = f_state(src), .vtype = src->vtype, .adopting_ok = 1};
    if (r.state == W_REJECTED) {
        if (src->vtype == V_ERR_STATIC)
            return reject_static(out, (int)src->a.i, src->b.cmsg, 1);
        char *copy = ld__strdup(src->b.cmsg);
        if (!copy)
            return reject_msg(out, (int)src->a.i, NULL, 1);
        return reject_msg(out, (int)src->a.i, copy, 1);
    }
    r.a = src->a;
    switch (src->vtype) {
    case V_JSON_LEASED: /* out takes a reference of its own */
        r.vtype = V_JSON;
        json_incref(src->a.j);
        break;
    case V_JSON:
        json_incref(src->a.j);
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
    int rc = settle(out, &r);
    if (rc != 0) {
        if (r.vtype == V_JSON)
            json_decref(r.a.j);
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
static int add_cb(ld_future *f, ld_future_cb fn, void *arg)
{
    struct ld__xnode *x = NULL;
    if (f->n0.fn) { /* n0 only changes on the loop thread: no race here */
        x = xnode_new(f, fn, arg);
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
    return add_cb(f, cb, arg);
}

/* ------------------------------------------------------------------------- */
/* then, catch, forward                                                      */

static void then_step(ld_future *in, void *arg)
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
        adopt(out, in);
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
    ld_future *out = future_create(in->loop, kind, W_ADOPTING);
    if (!out) {
        ld_future_unref(in);
        return NULL;
    }
    out->a.then = fn;
    out->b.p = arg;
    out->c = in;
    atomic_init(&out->refs, 2); /* the caller's, and then_step's */
    if (add_cb(in, then_step, out) != 0) {
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

struct comb {
    atomic_uint refs; /* 1 for the result future, 1 while active > 0 */
    unsigned kind;
    size_t n;
    size_t active;    /* registrations and timer still to come; loop thread */
    size_t remaining; /* all: inputs still to fulfil */
    ld_future *out;   /* held while active > 0 */
    struct event *timer;
    int timer_armed;
    struct ld__xnode action; /* queued when the result is cancelled */
    ld_future *in[];         /* held until the state is freed */
};

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
 * way completes: every future a shortcut passes gets W_INCHAIN, settle()
 * then sets fwd_stale, and the table is emptied before its next use (or
 * at the end of the drain pass). Until the callbacks of such a completion
 * have run, the futures on the way are still held by their registrations,
 * so no shortcut ever leads to freed memory.
 */
struct ld__fwd_entry {
    ld_future *key;
    ld_future *up;
};

static size_t fwd_slot(const struct ld__loop *l, const ld_future *f)
{
    uintptr_t h = (uintptr_t)f >> 4;
    h *= (uintptr_t)0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 16) & (l->fwd_cap - 1);
}

COLD void ld__fwd_clear(struct ld__loop *l)
{
    atomic_store(&l->fwd_stale, 0);
    ld__free(l->fwd_tab);
    l->fwd_tab = NULL;
    l->fwd_cap = 0;
    l->fwd_n = 0;
}

static ld_future *fwd_get(const struct ld__loop *l, const ld_future *f)
{
    if (!l->fwd_n)
        return NULL;
    for (size_t i = fwd_slot(l, f);; i = (i + 1) & (l->fwd_cap - 1)) {
        if (l->fwd_tab[i].key == f)
            return l->fwd_tab[i].up;
        if (!l->fwd_tab[i].key)
            return NULL;
    }
}

/* Sets f's shortcut; without memory the shortcut is simply not kept. */
COLD static void fwd_put(struct ld__loop *l, ld_future *f, ld_future *up)
{
    if ((l->fwd_n + 1) * 2 > l->fwd_cap) {
        size_t cap = l->fwd_cap ? l->fwd_cap * 2 : 64;
        struct ld__fwd_entry *tab = ld__calloc(cap, sizeof(*tab));
        if (!tab)
            return;
        struct ld__fwd_entry *old = l->fwd_tab;
        size_t old_cap = l->fwd_cap;
        l->fwd_tab = tab;
        l->fwd_cap = cap;
        for (size_t j = 0; j < old_cap; j++) {
            if (!old[j].key)
                continue;
            size_t i = fwd_slot(l, old[j].key);
            while (tab[i].key)
                i = (i + 1) & (cap - 1);
            tab[i] = old[j];
        }
        ld__free(old);
    }
    size_t i = fwd_slot(l, f);
    while (l->fwd_tab[i].key && l->fwd_tab[i].key != f)
        i = (i + 1) & (l->fwd_cap - 1);
    if (!l->fwd_tab[i].key)
        l->fwd_n++;
    l->fwd_tab[i].key = f;
    l->fwd_tab[i].up = up;
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

static void forward_step(ld_future *from, void *arg)
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
        adopt(out, from);
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
        int rc = reject_msg(out, LD_EINVAL, ld__strdup("ld_future_forward: cycle"), 0);
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
    if (add_cb(from, forward_step, out) != 0) {
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

static void comb_release(void *state)
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
    comb_release(s);
    ld_future_unref(out);
}

/* Cancels input i if it is pending and nobody wants it any more: the result
 * is complete (the callers see to it), so this state's slot and
 * registration are a dead claim, like those of other consumers that are
 * complete. */
static void comb_cancel_input(struct comb *s, size_t i)
{
    ld_future *f = s->in[i];
    if (ld_future_is_pending(f) && unwanted(f, 0))
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

static void comb_action(ld_future *out, void *arg)
{
    struct comb *s = arg;
    (void)out;
    comb_cancel_inputs(s);
    comb_disarm(s);
}

static void comb_queue_action(ld_future *f, struct ld__node **first, struct ld__node **last)
{
    struct comb *s = f->c;
    s->action.n.fn = comb_action;
    s->action.n.arg = s;
    link_put(&s->action.n, 1);
    s->action.future = ld_future_ref(f);
    s->action.tail = &s->action;
    s->action.flags = 0;
    if (*last)
        node_set_next(*last, &s->action.n);
    else
        *first = &s->action.n;
    *last = &s->action.n;
}

static void comb_input_done(ld_future *in, void *arg)
{
    struct comb *s = arg;
    ld_future *out = s->out;
    switch (s->kind) {
    case K_ALL:
        if (ld_future_is_rejected(in)) {
            if (adopt(out, in) == 0)
                comb_cancel_inputs(s);
        } else if (--s->remaining == 0) {
            struct settle_req r = {.state = W_FULFILLED, .adopting_ok = 1};
            settle(out, &r);
        }
        break;
    case K_RACE:
        if (adopt(out, in) == 0)
            comb_cancel_inputs(s);
        break;
    default: /* K_TIMEOUT */
        adopt(out, in);
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
    if (reject_msg(s->out, LD_ETIMEDOUT, NULL, 1) == 0)
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
    ld_future *out = s ? future_create(l, kind, W_ADOPTING) : NULL;
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
        if (add_cb(ld_future_ref(s->in[i]), comb_input_done, s) != 0) {
            s->active--;
            reject_msg(out, LD_ENOMEM, NULL, 1);
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
        struct settle_req r = {.state = W_FULFILLED, .adopting_ok = 1};
        settle(out, &r);
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
        reject_msg(out, LD_ENOMEM, NULL, 1);
        comb_done_one(s); /* nothing registered: drops the start hold */
        return out;
    }
    s->timer_armed = 1;
    s->active++;
    comb_start(out);
    return out;
}

/* ------------------------------------------------------------------------- */
/* Cancelling                                                                */

/* References that do not mean "somebody wants the outcome" (see unwanted()):
 * a derived future's hold on itself until its inputs are done (then_step's
 * or forward_step's argument, a combinator's hold), the producer's own
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
    if (n->fn == then_step || n->fn == forward_step)
        return f_state(n->arg) ? 1 : 0;
    if (n->fn == comb_input_done)
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
COLD static int unwanted(ld_future *f, unsigned extra)
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
    struct settle_req r = {.state = W_REJECTED,
                           .vtype = V_ERR_STATIC,
                           .a.i = LD_ECANCELED,
                           .b.cmsg = ld_strerror(LD_ECANCELED),
                           .adopting_ok = 1,
                           .cancel = 1};
    int rc = settle(f, &r);
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
        if (unwanted(up, 1))
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
    struct ld__xnode *x = xnode_new(f, cb, arg);
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
    int rc = add_cb(ld_future_ref(f), wake_cb, NULL);
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

/* ---- Lines of the futures' memory for other modules (future-internal.h) -- */

void *ld__line_alloc(void)
{
    return future_mem();
}

void ld__line_free(void *p)
{
    if (p)
        future_mem_free(p);
}
