/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: internal layout of futures and of the per-base dispatcher.
 * Never installed.
 */
#ifndef LDASYNC_FUTURE_INTERNAL_H
#define LDASYNC_FUTURE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ldasync/future.h>

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

/* True once libevent threading is on: futures made from then on may be
 * released on any thread (they are made W_SHARED). */
bool ld__future_threads(void);

/* A future rejected with `code` and `msg`, a string that lives as long as
 * the process (NULL: ld_strerror(code)); no allocation but the future.
 * NULL only if memory ran out. */
ld_future *ld__future_rejected_static(struct event_base *base, int code, const char *msg);

/*
 * A lease: what keeps a borrowed JSON value alive for a future made by
 * ld__future_later_json(). The future calls release(lease) once, when it
 * is freed (from whichever thread drops its last reference); a future that
 * adopts its value (forward, then, catch, ...) takes a jansson reference of
 * its own.
 */
struct ld__lease {
    void (*release)(struct ld__lease *lease);
};

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
 */
ld_future *ld__future_later_new(struct event_base *base);
void ld__later_fulfill(ld_future *f, bool has_value, bool v);
void ld__later_reject_static(ld_future *f, int code, const char *msg);

/* A future completed later, fulfilled with `v` (stolen; with `lease`, v is
 * borrowed and `lease`, stolen, keeps it alive instead); without memory,
 * NULL, and `lease` (or, without a lease, `v`) released. */
ld_future *ld__future_later_json(struct event_base *base, json_t *v, struct ld__lease *lease);
/* ld__future_later_new() and ld__later_reject_static() in one call. */
ld_future *ld__future_later_rejected(struct event_base *base, int code, const char *msg);

/* Turns `f`, a pending future of ld_future_new() (K_PLAIN) whose producer
 * is the caller, into one completed later with the outcome of `src`
 * (complete, stolen). Its callbacks stay; a cancel handler someone set on
 * it is dropped. It may need memory: when there is none (and only then), f
 * completes at once. */
void ld__later_adopt_into(ld_future *f, ld_future *src);

/* The free function given with the pointer value of `f` (ld_future_ptr),
 * also when `f` adopted the value from another future; NULL when `f` holds
 * no pointer or was given none. Lets a module tell its own pointer values
 * (made with a static free function) from others without reading them. */
ld_free_fn ld__future_ptr_free_fn(const ld_future *f);

#endif /* LDASYNC_FUTURE_INTERNAL_H */
