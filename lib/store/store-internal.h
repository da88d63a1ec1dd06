/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the store layer's internal header: the front every component
 * shares, what the evaluator reads of a store without a future, the data-
 * source status types, and the memory store's reclamation and tables.
 * Never installed.
 */
#ifndef LDASYNC_STORE_INTERNAL_H
#define LDASYNC_STORE_INTERNAL_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <ldasync/big_segments.h>
#include <ldasync/future.h>
#include <ldasync/kind.h>
#include <ldasync/status.h>
#include <ldasync/store.h>

#include "core/core-internal.h"
#include "model/model-internal.h"

/*
 * The part every component's front layer shares (big segment store,
 * initializer, synchronizer, processors).
 *
 * A front hands each operation's implementation a pending future and gives
 * the caller a future that completes in issue order, whatever order the
 * implementation completes in; it rejects operations once closed, and at
 * free completes what is still pending. The store (lib/store/store.c) and every
 * component around it use it.
 */

/* What the inline ld__front_idle() reads of a front's queue, which is
 * otherwise private to front.c (whose struct starts with this). */
struct ld__queue_state {
    const void *head;  /* the oldest operation still waiting, or NULL */
    unsigned inflight; /* handed over, not complete yet */
};

struct ld__pending; /* an operation whose result waits (front.c) */
struct ld__queue;   /* the waiting operations (front.c) */

/* Embedded in a component (see struct ld__component); its fields are the
 * front's: read them through the functions below. */
struct ld__front {
    struct event_base *base;
    struct ld__queue *queue; /* outlives the front while callbacks hold it */
    ld_future *oom;          /* rejected LD_ENOMEM, for when nothing else can be made */
    const char *closed_msg;  /* static: "synchronizer is closed", ... */
    bool closed;
};

/* One operation between ld__front_begin() and ld__front_finish(). */
struct ld__front_op {
    ld_future *impl;       /* pending; the implementation completes it */
    struct ld__pending *p; /* made in advance: finishing never allocates */
};

/* Sets up `fr` on `base`. @return 0 or LD_ENOMEM. */
int ld__front_init(struct ld__front *fr, struct event_base *base, const char *closed_msg);

/*
 * The start of an operation. Returns the caller's future when the front
 * answers it itself: LD_ECLOSED once closed, LD_EINVAL with the static
 * message `bad` when `bad` is not NULL (both complete after the operations
 * issued before, in issue order), LD_ENOMEM when memory ran out (at once: the
 * operation was not issued). Otherwise returns NULL with `op` ready: hand
 * the implementation ld_future_ref(op->impl), then call ld__front_finish().
 * Never NULL for an answer.
 */
ld_future *ld__front_begin(struct ld__front *fr, const char *bad, struct ld__front_op *op);

/* The caller's future for `op` (whose implementation future it steals); no
 * allocation. When the implementation future is complete and nothing is
 * queued or in flight before it, the caller's future takes its outcome
 * from the loop (completed later). Otherwise the caller's future adopts it
 * (ld_future_forward) once everything before it has been handed over;
 * adoption goes through the loop in hand-over order, so callbacks run in
 * issue order. */
ld_future *ld__front_finish(struct ld__front *fr, struct ld__front_op *op);

/* True when no operation waits or is in flight: a result completed at once
 * may be handed back as it is. */
static inline bool ld__front_idle(const struct ld__front *fr)
{
    const struct ld__queue_state *q = (const struct ld__queue_state *)(const void *)fr->queue;
    return !q->head && !q->inflight;
}

/* True once the front was closed (or released). */
static inline bool ld__front_closed(const struct ld__front *fr)
{
    return fr->closed;
}

/* The base the front's futures complete on. */
static inline struct event_base *ld__front_base(const struct ld__front *fr)
{
    return fr->base;
}

/* A reference to the front's future rejected with LD_ENOMEM. */
ld_future *ld__front_oom(struct ld__front *fr);

/* Closes `fr` and returns the caller's future for the close: with `abort`,
 * what is pending is first rejected with LD_ECLOSED; then, the first time
 * only, `close_op(impl, out)` (if not NULL) closes the implementation;
 * otherwise the future is fulfilled at once. When memory runs out, nothing
 * changes and the future is rejected with LD_ENOMEM. */
ld_future *ld__front_close(struct ld__front *fr, bool abort,
                           void (*close_op)(void *impl, ld_future *out), void *impl);

/* Closes `fr`, aborts what waits with LD_ECANCELED and lets go of the queue
 * (freed once its last callback ran); then frees the implementation with
 * free_fn(impl) (if free_fn is not NULL): at once, or, when implementation
 * futures were cancelled (now, or by an earlier close) and their cancel
 * handlers may not have run yet, from the loop after them (the
 * implementation may have given them `impl`). Safe from inside a callback
 * of one of the front's own futures. */
void ld__front_release(struct ld__front *fr, void (*free_fn)(void *impl), void *impl);

/*
 * The skeleton of a component (store, big segment store, initializer,
 * synchronizer, event and update processors): its front and its
 * implementation. A component's struct starts with it, followed by its
 * typed ops; the functions below do what every component does the same
 * way, so that a component is its ops' validation and one line per
 * operation. They take NULL for a NULL component.
 */
struct ld__component {
    struct ld__front front;
    void *impl;
};

/* A zeroed component of `size` bytes (its struct starts with struct
 * ld__component) on `base`, for `impl`; the caller then sets its ops.
 * NULL if memory ran out. */
void *ld__component_new(size_t size, struct event_base *base, void *impl, const char *closed_msg);

/* An operation whose only input is its implementation future: op(impl,
 * out) through the front (`bad`: see ld__front_begin). NULL for a NULL
 * component. */
ld_future *ld__component_call(struct ld__component *c, const char *bad,
                              void (*op)(void *impl, ld_future *out));

/* ld__front_close() of the component; NULL for a NULL component. */
ld_future *ld__component_close(struct ld__component *c, bool abort,
                               void (*close_op)(void *impl, ld_future *out));

/* ld__front_release() with free_fn, then frees the component. NULL-safe. */
void ld__component_free(struct ld__component *c, void (*free_fn)(void *impl));

/* What `fn(impl)` says (a name, a description), "unknown" when fn is NULL
 * or says NULL, "(null)" for a NULL component. */
const char *ld__component_text(const struct ld__component *c, const char *(*fn)(void *impl));

/*
 * What the evaluator reads of a store without a future.
 */

/* Marks the store's init, after init_now said LD_EBUSY, as validating the
 * data itself (as init_now does), so that the front does not walk it first
 * on the loop (the memory store's large init does it in slices). */
void ld__store_init_validates(ld_store *s);

/* Makes ld_store_free(s) call fn(arg) first, before anything else: for an
 * implementation of the library's own (the caching store) whose free may
 * come later, from the loop (ld__front_release), and which must stop using
 * `s` (its status) at once. One per store. */
void ld__store_on_free(ld_store *s, void (*fn)(void *arg), void *arg);

/* A big segment store's answer within the call, which an implementation
 * of the library's own may lend (the client's cache does): 0 with *m (the
 * context's membership, borrowed: valid until the loop runs again; NULL
 * when it is in no big segment) and *status (an enum
 * ld_big_segments_status, from what the store knows of its metadata and
 * `stale_after_ms`); LD_EBUSY when it cannot answer at once. It must not
 * free memberships it answered before within the same loop callback. */
typedef int (*ld__bss_now_fn)(void *impl, const char *hash, int64_t stale_after_ms,
                              const json_t **m, int *status);

/* Gives `s` its answer within the call. */
void ld__big_segment_store_set_now(ld_big_segment_store *s, ld__bss_now_fn fn);

/* The store's answer within the call, when it has one and is open, also
 * while reads are under way (a kept membership does not wait for another
 * context's read); otherwise LD_EBUSY. Loop thread. */
int ld__big_segment_store_now(ld_big_segment_store *s, const char *hash, int64_t stale_after_ms,
                              const json_t **m, int *status);

/* The store's get_now for a valid kind and a non-empty valid UTF-8 key of
 * `len` bytes, when it can answer within the call and keep issue order (it
 * has one, is open and nothing waits); otherwise LD_EBUSY, as get_now may
 * also say. Loop thread. */
int ld__store_get_now(ld_store *s, const ld_kind *kind, const char *key, size_t len, json_t **item,
                      struct ld_lease **lease);

/* An implementation's get within the call that lends the item: 0 with
 * *item (NULL: none) referenced by neither a lease nor a count, valid until
 * the store is next written or the loop runs again; LD_EBUSY as get_now.
 * Only what the store's own tables hold can be lent. */
typedef int (*ld__store_lend_fn)(void *impl, const ld_kind *kind, const char *key, size_t len,
                                 json_t **item);

/* Gives `s` (an implementation of the library's own: the memory store,
 * the caching store) a get that lends, for ld__store_get_now_lent(). */
void ld__store_set_lend(ld_store *s, ld__store_lend_fn fn);

/* ld__store_get_now(), lent when the implementation lends (*lent true:
 * *lease NULL and no reference taken; the item is valid until the store is
 * next written or the loop runs again): for a reader done with the item
 * within the call (the evaluator, which references what it keeps), which
 * so takes no lease on a generation. Loop thread. */
int ld__store_get_now_lent(ld_store *s, const ld_kind *kind, const char *key, size_t len,
                           json_t **item, struct ld_lease **lease, bool *lent);

/* The same for all_now. */
int ld__store_all_now(ld_store *s, const ld_kind *kind, json_t **all);

/* The store's `initialized` when its implementation answers within the
 * call (initialized_now, or `initialized` completing its future at once)
 * and nothing of the store waits: 1 or 0; otherwise LD_EBUSY (also once
 * closed); LD_ENOMEM; or the implementation's error.
 * ld_store_initialized_now() is the public twin. */
int ld__store_initialized_now(ld_store *s);

/*
 * What the users of the data-source status types (sink.c, fdv2.c)
 * share.
 */

/* The current time in ms since the Unix epoch. */
int64_t ld__now_ms(void);

/* Checks `in` by the rules of status.h and, if it is valid, sets *out to it
 * with a time of 0 replaced by now and a NULL message by "" (the message is
 * still borrowed, from `in` or static). @return true if `in` is valid. */
bool ld__ds_error_info_prepare(const ld_data_source_error_info *in, ld_data_source_error_info *out);

/*
 * A list of listeners (listeners.c): the sink's status listeners and the
 * data system's change listeners; meant for every list of ldasync's that
 * calls its listeners in the order they were added, each one only with what
 * happened after it was added, and lets them be removed from inside a call. Zero-initialised means
 * empty. The owner calls the listeners itself (walking head..next, skipping those with fn NULL, and
 * those whose `after` is not below the number of what it announces), casting fn back to its own
 * type; a listener removed during the calls is only marked (fn NULL) and unlinked by the sweep
 * afterwards.
 */
typedef void (*ld__listener_fn)(void); /* any function type, cast back to call */

struct ld__listener {
    struct ld__listener *next;
    int64_t id;
    uint64_t after;     /* hears what is numbered above this */
    ld__listener_fn fn; /* NULL once removed */
    void *arg;
};

struct ld__listeners {
    struct ld__listener *head, *tail;
    int64_t last_id;
    size_t live; /* listeners not removed */
};

/* Appends a listener that hears what is numbered above `after`. @return its
 * id (> 0) or LD_ENOMEM. */
int64_t ld__listeners_add(struct ld__listeners *ls, ld__listener_fn fn, void *arg, uint64_t after);

/* Marks the listener `id` removed, and unlinks it at once when `sweep` (no
 * call of the list is in progress). @return 0, or LD_EINVAL if no listener
 * of the list has that id. */
int ld__listeners_remove(struct ld__listeners *ls, int64_t id, bool sweep);

/* Unlinks the listeners marked removed; never while they are being called. */
void ld__listeners_sweep(struct ld__listeners *ls);

/* Frees every listener; the list is empty after. */
void ld__listeners_free(struct ld__listeners *ls);

/*
 * The memory store's reclamation (memory_reclaim.c) as the
 * store's tables (memory_store.c) use it; see memory_reclaim.c for the
 * design. Private to those two files; never installed. What the get path
 * runs on every call is static inline here, as it was in one file.
 */

struct event;
struct event_base;
struct slot; /* a slot of the store's tables (memory_store.c) */

/* What the store lets go of later: an item a write replaced, or a whole
 * table an init replaced (slots only; the snapshot is reference-counted),
 * or, `members` set, an object whose members are items a lease may read
 * (the caching store's object of a kind, or of an all): see
 * memory_reclaim.c, obj_unref(). */
struct garbage {
    json_t *item;
    struct slot *slots;
    size_t mask;
    bool members;
};

/* A list of garbage; `w`, its weight: one per item, a table's capacity. */
struct bin {
    struct garbage *v;
    size_t n, cap, w;
};

/* A generation (see memory_reclaim.c): the leases of gets taken while it
 * was current, and the items they read, GEN_ITEMS at most. */
#define GEN_ITEMS 32

struct gen {
    struct ld_lease lease;    /* first: the future releases &gen->lease */
    _Atomic size_t refs;      /* the store's while it keeps the gen, one per lease */
    bool shared;              /* made with libevent threading on: atomic counts */
    uint32_t n;               /* items noted (since the gen last had no lease out) */
    uint32_t nref;            /* items[0..nref) are referenced by the gen: sealed */
    struct bin bin;           /* replaced while current, which a lease may still read */
    json_t *items[GEN_ITEMS]; /* the items of the leases taken on it */
};

/* Generations older than the current one whose leases may read garbage,
 * oldest first: v[head..n). */
struct gens {
    struct gen **v;
    size_t head, n, cap;
    size_t limit; /* compacted when that many */
};

/* The store's reclamation state. */
struct reclaim {
    struct gen *cur;
    struct gens old;
    struct gen *spares[8]; /* generations kept for reuse */
    int nspares;
    size_t kept; /* the weight of the garbage of cur and old */
    /* empty garbage arrays kept for reuse: growing one is a large
     * allocation, slow in a fragmented heap (glibc consolidates first) */
    struct bin arrays[4];
    int narrays;
    /* what no lease can read, waiting for the loop (`flush`, made active
     * when it is not empty) to let go of it all at once */
    struct bin loose;
    struct event *flush;
    bool flush_active;
    /* large tables no lease can read, let go of a slice per loop pass
     * (`dying_ev`): freeing the items of 100,000 flags at once held the
     * loop for hundreds of milliseconds */
    struct dying *dying;
    struct event *dying_ev;
};

/* A reclaimer with its first generation and its event on `base`: 0 or
 * LD_ENOMEM (then nothing to free). */
int ld__mem_reclaim_init(struct reclaim *r, struct event_base *base);
/* Lets go of everything once the store's tables are retired; generations
 * with leases out are sealed and left to their leases. */
void ld__mem_reclaim_fini(struct reclaim *r);

/* Lets go of `what` (an item or a table's slots, owned by the store, of
 * weight `w`): while a lease may read it, with the current generation;
 * else a table at once and an item from the loop. */
void ld__mem_retire(struct reclaim *r, struct garbage what, size_t w);

/* The generation a new lease goes to when the current one cannot take it:
 * it keeps garbage, or has noted GEN_ITEMS items, or threading came on
 * since it was made (its count is not atomic). The current one still
 * does when it has no lease out and no garbage an older lease may read;
 * else a new one. NULL without memory. */
struct gen *ld__mem_gen_turn(struct reclaim *r);

/* Frees a table's slots and the items and keys they hold (memory_store.c). */
void ld__mem_slots_free(struct slot *slots, size_t mask);

/* Lets go of at most `n` slots of the table (its capacity mask + 1) from
 * *at on, advancing *at, and of the table itself after the last one.
 * @return true once the table is gone. */
bool ld__mem_slots_free_some(struct slot *slots, size_t mask, size_t *at, size_t n);

/* jansson's json_incref and json_decref for items (objects, never
 * jansson's static values) without their plain read of the count, a data
 * race once references go on other threads: a sealed generation lets go
 * of its items on the thread that releases its last lease. */
static inline json_t *item_ref(json_t *item)
{
    return ld__json_incref(item);
}

static inline void item_unref(json_t *item)
{
    ld__json_decref(item);
}

static inline void gen_add(struct gen *g)
{
    if (g->shared) {
        atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    } else {
        size_t n = atomic_load_explicit(&g->refs, memory_order_relaxed);
        atomic_store_explicit(&g->refs, n + 1, memory_order_relaxed);
    }
}

/* A lease on the current generation for a get of `item` (stored in a
 * table), which the generation notes; NULL without memory (then the
 * caller references the item instead). */
static inline struct ld_lease *ld__mem_lease(struct reclaim *r, json_t *item)
{
    struct gen *g = r->cur;
    if (g->n == GEN_ITEMS || g->bin.n || (!g->shared && ld__future_threads()))
        g = ld__mem_gen_turn(r);
    if (!g) /* no memory for a new generation */
        return NULL;
    g->items[g->n++] = item;
    gen_add(g);
    return &g->lease;
}

/*
 * The memory store's tables and state, as memory_store.c (the tables and
 * the operations) and memory_load.c (a large init over several passes of
 * the loop) share them. Private to those two files.
 */

enum { K_SEGMENTS, K_FEATURES, NKINDS };

/* Keys shorter than this live in their slot: what of the slot is left for
 * the key and its NUL (36 bytes with 64-bit pointers, 40 with 32-bit ones;
 * version before item, so that no padding comes between them). */
#define INLINE_KEY (LD__CACHE_LINE - 2 * sizeof(int64_t) - sizeof(json_t *) - sizeof(uint32_t))

struct slot {
    uint64_t hash;
    int64_t version;
    json_t *item;         /* one reference; NULL for a tombstone */
    uint32_t len;         /* key length; 0: empty slot */
    char key[INLINE_KEY]; /* the key and its NUL, or a malloc'd copy's address */
};
_Static_assert(sizeof(struct slot) == LD__CACHE_LINE, "a slot is one cache line");

/* The results of all for one table. `snap` is kept in step with every
 * write: in place while the store holds the only reference. When a reader
 * still holds it, the write goes to `spare` instead, the snapshot handed
 * out before it, once its reader has let go of it: `spare` is brought up to
 * date by replaying the keys written since it was current (`log`), so a
 * reader holding a snapshot costs O(writes), not a copy of every pair. Only
 * without a free spare (two readers, or a long log) is snap copied. */
struct snaps {
    json_t *snap;  /* the result of all, or NULL until asked for */
    json_t *spare; /* an earlier result, behind by the keys in log, or NULL */
    char *log;     /* keys written since spare was snap, each with its NUL */
    size_t log_len, log_cap, log_n;
};

struct table {
    struct slot *slots;
    size_t mask; /* capacity - 1, a power of two */
    size_t used;
    struct snaps sn;
};

struct load;     /* memory_load.c */
struct deferred; /* memory_store.c */

struct memory {
    struct table t[NKINDS];
    int inited;
    struct reclaim rc; /* what the store lets go of later */
    struct event_base *base;
    size_t slice;         /* items per loop pass of a large init at most */
    struct load *load;    /* an init in progress, or NULL */
    struct deferred *dq;  /* operations issued during it, oldest first */
    struct deferred *dqt; /* the newest */
    json_t *drop;         /* a loaded data set let go of a slice per pass */
    struct event *drop_ev;
    /* the key the last prefetch hashed (see mem_prefetch) */
    const char *hint_key;
    size_t hint_len;
    uint64_t hint_hash;
};

static inline int kind_index(const ld_kind *kind)
{
    return kind == &ld__kind_features ? K_FEATURES : K_SEGMENTS;
}

static inline const ld_kind *kind_at(int i)
{
    return i == K_FEATURES ? &ld__kind_features : &ld__kind_segments;
}

/* True if the store holds the only reference to `json`. Readers may drop
 * theirs on other threads (jansson counts atomically), hence the atomic
 * load; acquire: what they did before dropping it is done. */
static inline bool sole(json_t *json)
{
    return ld__json_refs(json) == 1;
}

/* What memory_load.c uses of memory_store.c. */

/* A table for `n` items at most 3/4 full, its slots not yet cleared: 0 or
 * LD_ENOMEM. */
int ld__mem_table_alloc(struct table *t, size_t n);

/* Frees a table that is not in use (its slots, items and keys). */
void ld__mem_table_free(struct table *t);

/* Puts `item` (borrowed) of `kind` under info->key into `fresh` (new
 * tables, one per kind): 0 or LD_ENOMEM. */
int ld__mem_put_fresh(struct table *fresh, const ld_kind *kind, json_t *item,
                      const struct ld_item_info *info);

/* The end of an init: the new tables replace the old ones. */
void ld__mem_swap_in(struct memory *mem, struct table *fresh);

/* Runs what waited for the load, in issue order, until an init starts
 * loading again. */
void ld__mem_replay(struct memory *mem);

/* What memory_store.c uses of memory_load.c. */

/* How many items `all_data` holds (0 when it is no object of objects: the
 * one-pass init says why). */
size_t ld__mem_data_items(const json_t *all_data);

/* Starts loading `all_data` (referenced) for `out` (owned) over several
 * passes of the loop; `out` completes once the new tables are in (or the
 * data was invalid, or memory ran out), then what waited is replayed. */
void ld__mem_load_start(struct memory *mem, json_t *all_data, ld_future *out);

/* The store is freed: an init in progress is rejected with LD_ECANCELED,
 * and the loaded data set still being let go of goes at once. */
void ld__mem_load_fini(struct memory *mem);

/* The implementation of `sync` if it was made with `ops`, else NULL (so
 * that the data system can tell a synchronizer of its own kind that a
 * change set was lost). */
struct ld_synchronizer;
struct ld_synchronizer_ops;
void *ld__synchronizer_impl(const struct ld_synchronizer *sync,
                            const struct ld_synchronizer_ops *ops);

#endif /* LDASYNC_STORE_INTERNAL_H */
