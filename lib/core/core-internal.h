/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the core's internal header (never installed). What the layers
 * above use of the core: the allocation functions, futures completed later,
 * leases. Then, for the files that implement futures only (future*.c,
 * loop.c and pool.c, which define LD_CORE_FUTURE_LAYOUT before including
 * this header), the layout of futures and of the per-base dispatcher.
 */
#ifndef LDASYNC_CORE_INTERNAL_H
#define LDASYNC_CORE_INTERNAL_H

#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <ldasync/alloc.h>
#include <ldasync/future.h>

/* ---- Allocation ----------------------------------------------------------
 * The library's allocation functions (alloc.h's hooks behind them). Every
 * allocation of libldasync goes through these. */

/* Like malloc/calloc/realloc/free/strdup, through the hooks. A size of 0
 * allocates one byte (never NULL for 0). ld__calloc checks n * size for
 * overflow. ld__realloc(NULL, n) is ld__malloc(n). ld__free(NULL) is a
 * no-op. */
/* The monotonic clock in nanoseconds: what bounds the work of a slice of
 * the loop (the data system, the memory store's large init, the
 * evaluator's all-flags states). */
static inline int64_t ld__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void *ld__malloc(size_t size);
void *ld__calloc(size_t n, size_t size);
void *ld__realloc(void *ptr, size_t size);
void ld__free(void *ptr);
char *ld__strdup(const char *s);

/* A formatted string (vsnprintf), or NULL when memory ran out. */
LD_PRINTF(1, 0) char *ld__vasprintf(const char *fmt, va_list ap);

/* The cache line the library lays out for: what ld__aligned_alloc()
 * aligns hot arrays to, what _Alignas keeps writers of different threads
 * apart by, and the size of the structs that must fill exactly one (a
 * future, a slot of the memory store; static_assert'ed). 64 bytes on x86-64
 * and most arm64 cores. */
#define LD__CACHE_LINE 64

/* `size` bytes aligned to `align` (a power of two, at most 4096), through
 * the hooks (over-allocating); freed only with ld__aligned_free. */
void *ld__aligned_alloc(size_t align, size_t size);
void ld__aligned_free(void *ptr);

/* ---- A table from pointers to pointers -------------------------------------
 * Open addressing with linear probing, kept at most half full (ptrtab.c).
 * Keys are addresses (not NULL); zero-initialised means empty; one thread
 * at a time. */
struct ld__ptrtab_entry {
    const void *key;
    void *value;
};

struct ld__ptrtab {
    struct ld__ptrtab_entry *tab;
    size_t cap; /* 0 or a power of two */
    size_t n;
};

/* The value of `key`, or NULL when the table has none. */
void *ld__ptrtab_get(const struct ld__ptrtab *t, const void *key);

/* Sets the value of `key`. 0, or LD_ENOMEM (the table as it was). */
int ld__ptrtab_put(struct ld__ptrtab *t, const void *key, void *value);

/* Empties the table and gives its memory back. */
void ld__ptrtab_clear(struct ld__ptrtab *t);

/* ---- jansson's reference counts -------------------------------------------
 * jansson has no call that reads a value's reference count, and its
 * json_incref() and json_decref() read the count plainly before counting
 * atomically: a data race once values are released on other threads. The
 * library reads and counts json_t references across threads through these,
 * the one place that touches jansson's struct. Not for jansson's static
 * values (true, false, null: a count of (size_t)-1), except
 * ld__json_refs(), which reads theirs too. */

/* The count of `j` (not NULL); acquire: what the holders of the
 * references dropped did before dropping them is done. */
static inline size_t ld__json_refs(const json_t *j)
{
    return __atomic_load_n(&((json_t *)j)->refcount, __ATOMIC_ACQUIRE);
}

/* True for jansson's true, false and null, which are never freed (their
 * count is (size_t)-1 and never changes, so a relaxed read will do). */
static inline bool ld__json_immortal(const json_t *v)
{
    return __atomic_load_n(&((json_t *)v)->refcount, __ATOMIC_RELAXED) == (size_t)-1;
}

/* json_incref() of an object or array (NULL-safe), atomically. */
static inline json_t *ld__json_incref(json_t *j)
{
    if (j)
        __atomic_fetch_add(&j->refcount, 1, __ATOMIC_RELAXED);
    return j;
}

/* json_decref() of an object or array (NULL-safe), atomically. */
static inline void ld__json_decref(json_t *j)
{
    if (j && __atomic_sub_fetch(&j->refcount, 1, __ATOMIC_ACQ_REL) == 0)
        json_delete(j);
}

/* ---- Leases ------------------------------------------------------------- */

/*
 * A lease (struct ld_lease, future.h): what keeps a borrowed value alive
 * while a future holds it. The future does not own the value (it takes no
 * reference of its own); its lender hands it a lease instead, and the
 * future calls release(lease) once, when it is freed (from whichever thread
 * drops its last reference). The lender decides what a lease stands for
 * (the memory store: one count of a generation of its items). A future that
 * adopts the value (forward, then, catch, ...) takes a jansson reference of
 * its own. Any store may lend this way through get_now (store.h).
 */

/* True once libevent threading is on: futures made from then on may be
 * released on any thread, so a lease may be released on any thread. */
bool ld__future_threads(void);

/* A future completed later (see below), fulfilled with `v`
 * (stolen; with `lease`, v is borrowed and `lease`, stolen, keeps it alive
 * instead); without memory, NULL, and `lease` (or, without a lease, `v`)
 * released. */
ld_future *ld__future_later_json(struct event_base *base, json_t *v, struct ld_lease *lease);

/* ---- Futures, for the other modules --------------------------------------- */

/* A future rejected with `code` and `msg`, a string that lives as long as
 * the process (NULL: ld_strerror(code)); no allocation but the future.
 * NULL only if memory ran out. */
ld_future *ld__future_rejected_static(struct event_base *base, int code, const char *msg);

/*
 * Completing later: a future that is pending when returned and completes
 * from the loop of its base, after what is queued there, in the order the
 * futures were given their outcomes (FIFO with all callbacks of the base),
 * without an event of its own. Loop thread only.
 *
 * ld__future_later_new() makes such a future (NULL only if memory ran out);
 * nobody but its maker can complete it (ld_future_fulfill() and the like
 * give LD_EALREADY), though it may be cancelled. Its maker then calls
 * exactly one of the ld__later_* functions, which need no memory and
 * borrow the maker's reference:
 *   fulfill: no value (has_value false) or the bool v;
 *   reject_static: `msg` lives as long as the process (NULL: strerror).
 * ld__future_later_json() (above) makes one given its value at
 * once.
 */
ld_future *ld__future_later_new(struct event_base *base);
void ld__later_fulfill(ld_future *f, bool has_value, bool v);
void ld__later_reject_static(ld_future *f, int code, const char *msg);

/* ld__future_later_new() and ld__later_reject_static() in one call. */
ld_future *ld__future_later_rejected(struct event_base *base, int code, const char *msg);

/* A future completed later, fulfilled with the pointer `v` and its free
 * function (as ld_future_fulfill_ptr()); without memory, NULL, and
 * free_fn(v) called. */
ld_future *ld__future_later_ptr(struct event_base *base, void *v, ld_free_fn free_fn);

/* A block of LD__LINE_SIZE bytes, aligned to it, from the futures' memory
 * (their per-thread free lists: cheaper than malloc for small objects made
 * and released as often as futures, such as the evaluator's details), or
 * NULL when memory ran out; ld__line_free() (NULL-safe) gives it back, on
 * any thread. */
#define LD__LINE_SIZE 64
void *ld__line_alloc(void);
void ld__line_free(void *p);

/* Turns `f`, a pending future of ld_future_new() (K_PLAIN) whose producer
 * is the caller, into one completed later with the outcome of `src`
 * (complete, stolen). Its callbacks stay; a cancel handler someone set on
 * it is dropped. It may need memory: when there is none (and only then), f
 * joins the newest batch still queued, so that it completes after the
 * futures completed later before it (its callbacks may then run before
 * callbacks queued after that batch), or, with no batch queued, completes
 * at once. */
void ld__later_adopt_into(ld_future *f, ld_future *src);

/* The free function given with the pointer value of `f` (ld_future_ptr),
 * also when `f` adopted the value from another future; NULL when `f` holds
 * no pointer or was given none. Lets a module tell its own pointer values
 * (made with a static free function) from others without reading them. */
ld_free_fn ld__future_ptr_free_fn(const ld_future *f);

/* ---- Workers --------------------------------------------------------------
 * "Run this job off the loop and complete this future with its result"
 * (worker.c). A worker runs its jobs one at a time, in the order given, on
 * a thread of its own (started at the first job, reused, joined by
 * ld__worker_free()); a job's outcome completes the job's future from the
 * loop of the worker's base (callbacks from the loop, FIFO, as every
 * future). When libevent threading is off (ld__future_threads() false), or
 * no thread can be started, a job runs on the loop instead, from a loop
 * callback (one job per pass), never inside the call that gave it. A worker
 * belongs to the loop thread; only the job functions run elsewhere.
 */
struct ld__worker;
struct ld__work; /* a worker's job (not the evaluator's struct ld__job) */

/* A job's function, run once (on the worker's thread, or on the loop):
 * returns the job's value, which fulfils the job's future (as
 * ld_future_fulfill_ptr() with the free function given to
 * ld__worker_submit()), or NULL with *code set to the code to reject it
 * with (left 0: LD_ENOMEM). A long job should look at ld__job_wanted() now
 * and then and return NULL once it is false. */
typedef void *(*ld__job_fn)(const struct ld__work *job, void *arg, int *code);

/* A new worker for `base`, without a thread yet; NULL if memory ran out. */
struct ld__worker *ld__worker_new(struct event_base *base);

/* Queues the job fn(job, arg). @return its future (a new reference),
 * pending until the job is over, then completed from the loop: fulfilled
 * with fn's value (freed with `free_fn`, which may be NULL), or rejected
 * with fn's code, or with LD_ECANCELED when the job was no longer wanted
 * before or while it ran (its future cancelled, the worker stopped or
 * freed; a value made meanwhile is freed off the loop). Cancelling the
 * future cancels the job: not started, it never runs; running, it is told
 * by ld__job_wanted(). NULL only if memory ran out (fn never runs). `arg`
 * is borrowed: it must outlive the job's run, which freeing the worker
 * (it joins the thread) before `arg` ensures. */
ld_future *ld__worker_submit(struct ld__worker *w, ld__job_fn fn, void *arg, ld_free_fn free_fn);

/* Whether the job is still wanted: false once its future is cancelled or
 * its worker stopped. For its function, on the thread that runs it. */
bool ld__job_wanted(const struct ld__work *job);

/* True when the job runs on the loop (threading off): it must not sleep. */
bool ld__job_on_loop(const struct ld__work *job);

/* Closes `fd` off the loop, on the worker's thread, which free joins, so
 * that no descriptor outlives the worker (an inotify close waits for the
 * kernel). On the loop, now, when there is no thread (or it has stopped,
 * or its short list is full). Loop thread. */
void ld__worker_close_later(struct ld__worker *w, int fd);

/* Stops the worker: the running job is no longer wanted, the jobs queued
 * and those submitted from now on are rejected with LD_ECANCELED (from the
 * loop), and the thread ends. Loop thread. */
void ld__worker_stop(struct ld__worker *w);

/* Stops the worker, waits for its thread to end (the running job, if any,
 * returns), and frees it. The futures of its jobs still complete from the
 * loop, with LD_ECANCELED when their job never ran. Safe from inside a
 * callback of a job's future. NULL-safe. Loop thread. */
void ld__worker_free(struct ld__worker *w);

#ifdef LD_CORE_FUTURE_LAYOUT

/* ---- The layout of futures ------------------------------------------------
 *
 * The layout of futures and of the per-base dispatcher, private to the files
 * that implement them: future*.c (the future itself; see "Futures across
 * their files" below), loop.c (the per-base dispatcher) and pool.c (the
 * memory of futures).
 *
 * Also here, as static inline, the small functions of one of those files
 * that the hot paths of another inline (the pool's fast path, the loop
 * lookup's thread cache, running a queued node): splitting the files must
 * not turn them into calls. They keep short names (no linkage, and only
 * these files see them); the thread-local variables they read have
 * hidden external linkage (ld__tl_*), as do the functions the files call
 * in one another (ld__*).
 */

#include <sched.h>

#if defined(__GNUC__)
#define TLS __thread __attribute__((tls_model("initial-exec")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define COLD __attribute__((noinline, cold))
#define NOINLINE __attribute__((noinline))
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
/* Declarations of what one file of futures defines for the others: a
 * direct reference, without the GOT. */
#define LD__HIDDEN __attribute__((visibility("hidden")))
#else
#define TLS _Thread_local
#define LIKELY(x) (x)
#define COLD
#define NOINLINE
#define ALWAYS_INLINE inline
#define UNLIKELY(x) (x)
#define LD__HIDDEN
#endif

struct event;
struct event_base;
struct ld__later;

/*
 * A callback waiting on a future, or queued on a loop. The first callback of
 * a future lives inside the future (ld_future.n0); the others, cancel handlers
 * and combinator actions are ld__xnode. The low bit of `link` says which of
 * the two this node is (1: an ld__xnode); the rest is the next node.
 */
struct ld__node {
    ld_future_cb fn; /* NULL: the embedded node is free */
    void *arg;
    _Atomic uintptr_t link; /* atomic: other threads link queued nodes */
};

/* The low bit of ld__node.link: the node is an ld__xnode. */
#define LD__LINK_XNODE ((uintptr_t)1)

struct ld__xnode {
    struct ld__node n;
    ld_future *future;      /* the future passed to fn */
    struct ld__xnode *tail; /* first extra callback of a future: the last one */
    unsigned flags;         /* LD__XN_* */
};

#define LD__XN_HEAP 1u /* free() after it ran */

/*
 * One per event_base address, created on first use and kept for the life of
 * the process (see the comment above the registry in loop.c for why).
 */
struct ld__loop {
    /* Set once. */
    struct event_base *base;
    struct event *ev_run;   /* made active to run the queue in this pass */
    struct event *ev_yield; /* a zero timeout: run the rest after a poll */
    struct ld__loop *next;  /* registry */
    void *next_block;       /* the start of next's allocation (see loop_create) */
    /* The draining thread's line: the local FIFO and the consumer end of the
     * remote one. */
    _Alignas(LD__CACHE_LINE) struct ld__node *head;
    struct ld__node *tail;
    struct ld__node *rhead;
    /* Completing later (future.c): the batch at the tail of the local
     * FIFO, if it is still open, and spare batches. */
    struct ld__later *later_open;
    struct ld__later *later_spare;
    unsigned later_nspare;
    unsigned later_reserved; /* spares promised to futures to come */
    /* ld_future_forward's cycle check (loop thread): shortcuts up the
     * chains of futures waiting on one another, an open-addressing table
     * from a future to one of the futures it waits on. `fwd_stale` (any
     * thread) says a future on one of those chains completed: the table is
     * emptied before it is used again. */
    struct ld__ptrtab fwd;
    atomic_int fwd_stale;
    /* The producers' line (other threads): an intrusive MPSC FIFO
     * (Vyukov's) whose producers exchange rtail; the stub node keeps it from
     * ever being empty. */
    _Alignas(LD__CACHE_LINE) _Atomic(struct ld__node *) rtail;
    atomic_int scheduled; /* 1 while ev_run/ev_yield is armed or draining */
    struct ld__node stub;
};

/*
 * The future: 64 bytes, a cache line. `a`, `b` and `c` hold, depending on
 * the state and kind:
 *   fulfilled: a = value, b = free_fn (ptr) or owner future (borrowed ptr)
 *   rejected:  a = code, b = message
 *   pending plain: a = cancel handler node
 *   pending then/catch: a = fn, b = arg, c = upstream future
 *   pending forward: c = upstream future
 *   all, race, timeout (any state): c = combinator state
 */
union ld__slot {
    uintptr_t u;
    int64_t i;
    void *p;
    json_t *j;
    char *msg;
    const char *cmsg;
    ld_then_fn then;
    ld_free_fn free;
    ld_future *f;
    struct ld__xnode *x;
};

struct ld_future {
    struct ld__loop *loop;
    atomic_uint refs;
    atomic_ushort word; /* W_* bits in future.c: lock, state, adopting */
    uint8_t vtype;      /* V_*; written before the state is published */
    uint8_t kind;       /* K_*; under the lock */
    struct ld__node n0;
    union ld__slot a;
    union ld__slot b;
    void *c;
};
/* One line exactly, so that the futures of a slab (pool.c) never share or
 * straddle lines; with 4-byte pointers it is smaller. */
_Static_assert(sizeof(struct ld_future) == LD__CACHE_LINE || sizeof(void *) < 8,
               "a future is one cache line");

/* ------------------------------------------------------------------------- */
/* Nodes                                                                     */

static inline uintptr_t link_get(const struct ld__node *n)
{
    return atomic_load_explicit(&((struct ld__node *)n)->link, memory_order_relaxed);
}

static inline void link_put(struct ld__node *n, uintptr_t v)
{
    atomic_store_explicit(&n->link, v, memory_order_relaxed);
}

static inline struct ld__node *node_next(const struct ld__node *n)
{
    return (struct ld__node *)(link_get(n) & ~LD__LINK_XNODE);
}

static inline void node_set_next(struct ld__node *n, struct ld__node *next)
{
    link_put(n, (uintptr_t)next | (link_get(n) & LD__LINK_XNODE));
}

static inline int node_is_x(const struct ld__node *n)
{
    return (int)(link_get(n) & LD__LINK_XNODE);
}

static inline ld_future *node_future(struct ld__node *n)
{
    if (node_is_x(n))
        return ((struct ld__xnode *)n)->future;
    return (ld_future *)(void *)((char *)n - offsetof(struct ld_future, n0));
}

/* ------------------------------------------------------------------------- */
/* The state of a future                                                     */

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

static inline int f_shared(const ld_future *f)
{
    return atomic_load_explicit(&((ld_future *)f)->word, memory_order_relaxed) & W_SHARED;
}

/* ld_future_ref() of a future that is not NULL, for the other files of
 * futures to inline (ld__future_unref() is its twin). */
static inline void f_ref(ld_future *f)
{
    /* Like f_lock(): with one reference, the caller's, nobody else can
     * touch the count. */
    unsigned n = atomic_load_explicit(&f->refs, memory_order_relaxed);
    if (n == 1 || !f_shared(f))
        atomic_store_explicit(&f->refs, n + 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

/* ------------------------------------------------------------------------- */
/* Future memory (pool.c): its fast path                                     */

#define LD_POOL_KEEP 4096 /* per-thread free futures before giving back */

/* A thread's free futures, linked through their first word. */
struct ld__pool {
    ld_future *free;
    size_t n;
    int registered; /* with the thread-exit hook */
};

extern TLS struct ld__pool ld__tl_pool LD__HIDDEN;
extern atomic_int ld__pool_on LD__HIDDEN; /* -1 until ld__pool_init() ran */

/* The first call: reads LDASYNC_NO_POOL; 1 if the pool is on. */
COLD int ld__pool_init(void) LD__HIDDEN;
/* p is empty: a future from the shared list or a new slab, or NULL. */
COLD ld_future *ld__pool_refill(struct ld__pool *p) LD__HIDDEN;
/* Hands p's free futures to the shared list when its thread exits. */
COLD void ld__pool_register(struct ld__pool *p) LD__HIDDEN;
/* p holds more than LD_POOL_KEEP: half of them go to the shared list. */
COLD void ld__pool_give_back(struct ld__pool *p) LD__HIDDEN;

static inline ld_future *pool_link(ld_future *f)
{
    return *(ld_future **)f;
}

static inline void pool_set_link(ld_future *f, ld_future *next)
{
    *(ld_future **)f = next;
}

static inline int pool_enabled(void)
{
    int on = atomic_load_explicit(&ld__pool_on, memory_order_relaxed);
    if (UNLIKELY(on < 0))
        on = ld__pool_init();
    return on;
}

/* Memory for one future, or NULL. */
static inline ld_future *future_mem(void)
{
    if (!pool_enabled())
        return ld__malloc(sizeof(ld_future));
    struct ld__pool *p = &ld__tl_pool;
    ld_future *f = p->free;
    if (LIKELY(f != NULL)) {
        p->free = pool_link(f);
        p->n--;
        return f;
    }
    return ld__pool_refill(p);
}

static inline void future_mem_free(ld_future *f)
{
    if (!atomic_load_explicit(&ld__pool_on, memory_order_relaxed)) {
        ld__free(f);
        return;
    }
    struct ld__pool *p = &ld__tl_pool;
    if (UNLIKELY(!p->registered))
        ld__pool_register(p);
    pool_set_link(f, p->free);
    p->free = f;
    if (UNLIKELY(++p->n > LD_POOL_KEEP))
        ld__pool_give_back(p);
}

/* ------------------------------------------------------------------------- */
/* The dispatcher (loop.c): what the future's hot paths inline               */

/* The last base this thread looked up and its loop. */
extern TLS struct event_base *ld__tl_cache_base LD__HIDDEN;
extern TLS struct ld__loop *ld__tl_cache_loop LD__HIDDEN;
/* The loop draining on this thread, or NULL. */
extern TLS struct ld__loop *ld__tl_drain LD__HIDDEN;

/* The registry's lookup (and creation) behind loop_for(). NULL only if
 * memory ran out. */
struct ld__loop *ld__loop_find(struct event_base *base) LD__HIDDEN;

/* Queues the chain first..last (linked by node_next) behind everything that
 * became ready before it. `shared`: the future may be used by other threads,
 * so this may not be the loop thread. */
void ld__enqueue(struct ld__loop *l, struct ld__node *first, struct ld__node *last,
                 unsigned shared) LD__HIDDEN;

/* ld_future_unref() of a future that is not NULL, for the other files of
 * futures: a direct call, where the exported function goes through the PLT. */
void ld__future_unref(ld_future *f) LD__HIDDEN;

/* Forgets l's forward cycle-check table (future.c) once a future on one of
 * its chains completed; from the drain. */
COLD void ld__fwd_clear(struct ld__loop *l) LD__HIDDEN;

/* The dispatcher of `base`, created on first use; NULL without memory. */
static inline struct ld__loop *loop_for(struct event_base *base)
{
    if (LIKELY(ld__tl_cache_base == base))
        return ld__tl_cache_loop;
    return ld__loop_find(base);
}

static inline int remote_empty(struct ld__loop *l)
{
    return l->rhead == &l->stub && atomic_load(&l->rtail) == &l->stub;
}

static ALWAYS_INLINE void run_node(struct ld__node *n)
{
    ld_future_cb fn = n->fn;
    void *arg = n->arg;
    ld_future *f;
    if (node_is_x(n)) {
        struct ld__xnode *x = (struct ld__xnode *)n;
        f = x->future;
        if (x->flags & LD__XN_HEAP)
            ld__free(x);
    } else {
        f = node_future(n);
        n->fn = NULL; /* the embedded node is free for a later callback */
        link_put(n, 0);
    }
    fn(f, arg);
    if (f) /* NULL: a batch of futures completed later (future.c) */
        ld__future_unref(f);
}

/* Runs the callbacks first..last (linked, not queued) as the drain would
 * have run them had they been queued with nothing ahead of them. */
static inline void run_chain(struct ld__node *first, struct ld__node *last)
{
    struct ld__node *n = first, *next;
    do {
        next = n == last ? NULL : node_next(n);
        run_node(n);
    } while ((n = next) != NULL);
}

/* ------------------------------------------------------------------------- */
/* Futures across their files                                                */

/* What the files of futures (future.c: the future, completing it, its
 * callbacks, then and catch, waiting; future_later.c: completing later;
 * future_comb.c: forward, all, race, timeout; future_cancel.c: cancelling)
 * define for one another. */

/* The state of all, race and timeout: c of such a future. */
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

/* An outcome for ld__future_settle(). */
struct ld__settle_req {
    unsigned state; /* W_FULFILLED or W_REJECTED */
    unsigned vtype;
    union ld__slot a, b;
    int adopting_ok;     /* may complete a future that is adopting */
    int cancel;          /* run the cancel handler / combinator action */
    ld_future *upstream; /* out: referenced input to consider cancelling */
};

/* The chain of f's callbacks (f locked, pending), or NULL. */
static inline void callbacks_of(ld_future *f, struct ld__node **first, struct ld__node **last)
{
    if (f->n0.fn) {
        struct ld__xnode *x = (struct ld__xnode *)link_get(&f->n0);
        *first = &f->n0;
        *last = x ? &x->tail->n : &f->n0;
    }
}

/* A new future of `kind` on l, its word `word` (plus W_SHARED when
 * libevent threading is on), one reference; NULL without memory. */
ld_future *ld__future_create(struct ld__loop *l, unsigned kind, unsigned word) LD__HIDDEN;
/* A callback node for f, freed after it ran (LD__XN_HEAP); NULL without
 * memory. */
struct ld__xnode *ld__xnode_new(ld_future *f, ld_future_cb fn, void *arg) LD__HIDDEN;
/* The place a future becomes complete (future.c); 0 or LD_EALREADY. */
int ld__future_settle(ld_future *f, struct ld__settle_req *r) LD__HIDDEN;
/* Rejects f with `code` and `msg` (stolen; NULL: the static strerror). */
int ld__reject_msg(ld_future *f, int code, char *msg, int adopting_ok) LD__HIDDEN;
/* Completes `out` the way `src` (complete) did. */
int ld__adopt(ld_future *out, ld_future *src) LD__HIDDEN;
/* Adds fn(f, arg) to f's callbacks, stealing the caller's reference. */
int ld__add_cb(ld_future *f, ld_future_cb fn, void *arg) LD__HIDDEN;
/* The callbacks by which a then/catch result, a forward's `out` and a
 * combinator wait on their inputs (cancelling tells them apart). */
void ld__then_step(ld_future *in, void *arg) LD__HIDDEN;
void ld__forward_step(ld_future *from, void *arg) LD__HIDDEN;
void ld__comb_input_done(ld_future *in, void *arg) LD__HIDDEN;
/* Drops a reference to a combinator's state (c of the future). */
void ld__comb_release(void *state) LD__HIDDEN;
/* What runs when a combinator's result is cancelled (future_comb.c). */
void ld__comb_action(ld_future *out, void *arg) LD__HIDDEN;
/* Appends the cancel action of combinator f to the chain *first..*last
 * (ld__future_settle()'s, which inlines it). */
static inline void comb_queue_action(ld_future *f, struct ld__node **first, struct ld__node **last)
{
    struct comb *s = f->c;
    s->action.n.fn = ld__comb_action;
    s->action.n.arg = s;
    link_put(&s->action.n, LD__LINK_XNODE);
    s->action.future = ld_future_ref(f);
    s->action.tail = &s->action;
    s->action.flags = 0;
    if (*last)
        node_set_next(*last, &s->action.n);
    else
        *first = &s->action.n;
    *last = &s->action.n;
}
/* True if nobody but `extra` of the caller's references wants f's outcome. */
COLD int ld__future_unwanted(ld_future *f, unsigned extra) LD__HIDDEN;

#endif /* LD_CORE_FUTURE_LAYOUT */

/* ---- keys of tables ---------------------------------------------------- */

/* A 64-bit hash of the key's `len` bytes, read eight (or four) at a time,
 * the last word overlapping the one before (keys are short strings; a
 * byte-wise FNV-1a spent a multiply per byte). Not keyed: keys come from
 * the application's own data source. The tables of keys (the memory
 * store's, the caching store's, the summarizer's). */
static inline uint64_t ld__key_mix(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 29);
}

static inline __attribute__((always_inline)) uint64_t ld__key_hash(const char *key, size_t len)
{
    uint64_t h = len, w;
    if (len >= 8) {
        const char *p = key;
        for (size_t n = len; n > 8; n -= 8, p += 8) {
            memcpy(&w, p, 8);
            h = ld__key_mix(h, w);
        }
        memcpy(&w, key + len - 8, 8);
        h = ld__key_mix(h, w);
    } else if (len >= 4) {
        uint32_t a, b;
        memcpy(&a, key, 4);
        memcpy(&b, key + len - 4, 4);
        h = ld__key_mix(h, (uint64_t)a << 32 | b);
    } else if (len > 0) {
        const unsigned char *p = (const unsigned char *)key;
        h = ld__key_mix(h, (uint64_t)p[0] << 16 | (uint64_t)p[len / 2] << 8 | p[len - 1]);
    }
    h *= 0xd6e8feb86659fd93ULL;
    return h ^ (h >> 32);
}

/* a[0..len) == b[0..len): keys of 8 to 16 bytes (the usual flag key) by
 * two overlapping words, without a call. */
static inline bool ld__key_eq(const char *a, const char *b, size_t len)
{
    if (len < 8 || len > 16)
        return memcmp(a, b, len) == 0;
    uint64_t a0, a1, b0, b1;
    memcpy(&a0, a, 8);
    memcpy(&b0, b, 8);
    memcpy(&a1, a + len - 8, 8);
    memcpy(&b1, b + len - 8, 8);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

#endif /* LDASYNC_CORE_INTERNAL_H */
