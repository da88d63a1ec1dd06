/*
 * ldasync: the layout of futures and of the per-base dispatcher, private to
 * the files that implement them (future.c, loop.c, pool.c). Never
 * installed; other modules use future-internal.h.
 */
#ifndef LDASYNC_FUTURE_LAYOUT_H
#define LDASYNC_FUTURE_LAYOUT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ldasync/future.h>

#include "future-internal.h"

struct event;
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

struct ld__xnode {
    struct ld__node n;
    ld_future *future;      /* the future passed to fn */
    struct ld__xnode *tail; /* first extra callback of a future: the last one */
    unsigned flags;         /* LD__XN_* */
};

#define LD__XN_HEAP 1u /* free() after it ran */

/*
 * One per event_base address, created on first use and kept for the life of
 * the process (see the comment above loop_for() in future.c for why).
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
    _Alignas(64) struct ld__node *head;
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
    struct ld__fwd_entry *fwd_tab;
    size_t fwd_cap; /* 0 or a power of two */
    size_t fwd_n;
    atomic_int fwd_stale;
    /* The producers' line (other threads): an intrusive MPSC FIFO
     * (Vyukov's) whose producers exchange rtail; the stub node keeps it from
     * ever being empty. */
    _Alignas(64) _Atomic(struct ld__node *) rtail;
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

#endif /* LDASYNC_FUTURE_LAYOUT_H */
