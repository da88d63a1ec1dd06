/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: futures completed on a libevent event_base.
 *
 * A future is a reference-counted, opaque value that is pending until a
 * producer completes it: fulfilled (with no value, a bool, an int64, a jansson
 * value or a pointer) or rejected (with a negative LD_E* code and a message).
 * Consumers attach callbacks; every callback runs from the event loop of the
 * future's base, never inside the call that completed the future or registered
 * the callback, in FIFO order, exactly once.
 *
 * Ownership words used below, as in jansson:
 *   - "new reference": the caller owns one reference and must release it with
 *     ld_future_unref().
 *   - "steals": the function takes over the caller's reference (or value) on
 *     every path, failure included.
 *   - "borrowed": valid while the caller holds a reference to the future.
 *
 * Thread rules. Futures of one base belong to the thread that runs the base's
 * loop (before the loop runs: the thread that sets it up). With libevent
 * threading enabled (evthread_use_pthreads() before event_base_new()), these
 * calls may also be made from any other thread, on a future the caller holds a
 * reference to: ld_future_ref, ld_future_unref, the ld_future_fulfill* family,
 * ld_future_reject, ld_future_cancel, the readers (ld_future_is_*,
 * ld_future_error, value accessors) once the future is complete, and
 * ld_future_wait (which returns LD_EBUSY while another thread runs the loop,
 * and otherwise runs the loop on the calling thread). Callbacks
 * still run on the loop thread. Every other call belongs to the loop thread.
 * "Holds a reference" is meant strictly: take one with ld_future_ref() for
 * the other thread (and release it there); a thread that only borrows a
 * reference owned by another thread is not enough, because a future whose
 * count is 1 is treated as private to the caller and is not locked.
 *
 * Lifetime rule, as with libevent's own events: before event_base_free(base),
 * release every future of the base and let the loop run the callbacks
 * ldasync has queued (run event_base_loop(base, EVLOOP_NONBLOCK) until it
 * returns 1, or ld_future_wait() on the last future). Callbacks still
 * queued when the base is freed never run, the futures they hold stay
 * allocated, and a base created later at the same address finds them.
 */
#ifndef LDASYNC_FUTURE_H
#define LDASYNC_FUTURE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include <ldasync/common.h>

LD_BEGIN_DECLS

struct event_base;

/** An opaque, reference-counted future. Create with ld_future_new(), release
 *  with ld_future_unref(). @since 0.1.0 */
typedef struct ld_future ld_future;

/** Frees a pointer value handed to ld_future_fulfill_ptr(). @since 0.1.0 */
typedef void (*ld_free_fn)(void *value);

/** A completion callback. `done` is borrowed for the duration of the call
 *  (take ld_future_ref() to keep it). @since 0.1.0 */
typedef void (*ld_future_cb)(ld_future *done, void *arg);

/** The function of ld_future_then() / ld_future_catch(). `in` is borrowed;
 *  `out` is borrowed and pending: the function must complete it, now or
 *  later (then it must take a reference with ld_future_ref()), or pass it to
 *  ld_future_forward(). @since 0.1.0 */
typedef void (*ld_then_fn)(ld_future *in, ld_future *out, void *arg);

/* ------------------------------------------------------------------------- */
/* Creating and releasing                                                    */

/** Creates a pending future on `base`.
 *  @return a new reference, or NULL if `base` is NULL or memory ran out.
 *  @since 0.1.0 */
LD_EXPORT ld_future *ld_future_new(struct event_base *base);

/** Takes one more reference. NULL-safe (returns NULL). Any thread.
 *  @return `f`. @since 0.1.0 */
LD_EXPORT ld_future *ld_future_ref(ld_future *f);

/** Releases one reference; the last one frees the future and its value
 *  (json_decref, or the ld_free_fn given with the pointer). NULL-safe. Any
 *  thread. A pending future that nobody else holds just disappears: its
 *  cancel handler is not called. A callback registered on a pending future
 *  (ld_future_on_complete, or a then, catch, forward, all or race waiting
 *  on it) holds it until it completes: a producer must complete (or
 *  cancel) what it made and gave a consumer, or both stay allocated.
 *  @since 0.1.0 */
LD_EXPORT void ld_future_unref(ld_future *f);

/** The base the future completes on, or NULL for NULL. @since 0.1.0 */
LD_EXPORT struct event_base *ld_future_base(const ld_future *f);

/* ------------------------------------------------------------------------- */
/* Completing (the producer side)                                            */
/* Each returns 0, LD_EINVAL for a NULL future, or LD_EALREADY when the future
 * is already complete (or already adopting another one through
 * ld_future_forward()). A value offered to a call that fails is freed: these
 * functions steal their value on every path. Any thread (see thread rules). */

/** Fulfils `f` with no value. @since 0.1.0 */
LD_EXPORT int ld_future_fulfill(ld_future *f);
/** Fulfils `f` with a bool. @since 0.1.0 */
LD_EXPORT int ld_future_fulfill_bool(ld_future *f, bool v);
/** Fulfils `f` with an int64. @since 0.1.0 */
LD_EXPORT int ld_future_fulfill_int(ld_future *f, int64_t v);
/** Fulfils `f` with a JSON value; steals `v` (NULL is allowed and reads back
 *  as NULL: "no item"). @since 0.1.0 */
LD_EXPORT int ld_future_fulfill_json(ld_future *f, json_t *v);
/** Fulfils `f` with a pointer; steals it: `free_fn(v)` runs when the last
 *  reference to the future drops (or at once if the call fails). `free_fn`
 *  may be NULL for a pointer the future does not own. @since 0.1.0 */
LD_EXPORT int ld_future_fulfill_ptr(ld_future *f, void *v, ld_free_fn free_fn);
/** Rejects `f` with `code` (negative; LD_E* or your own) and a printf-style
 *  message (`fmt` may be NULL: the message is then ld_strerror(code)).
 *  @return 0, LD_EINVAL (NULL future, or `code` >= 0: `f` is unchanged),
 *  LD_EALREADY, LD_ENOMEM (`f` is then rejected with the bare strerror
 *  message). @since 0.1.0 */
LD_EXPORT int ld_future_reject(ld_future *f, int code, const char *fmt, ...) LD_PRINTF(3, 4);
/** Makes `out` adopt the outcome of `from` (Promises/A+ resolution): when
 *  `from` completes, `out` completes the same way (JSON values are shared by
 *  reference, pointer values stay owned by `from`, which `out` then keeps
 *  alive). Steals `from`; `out` is borrowed. Loop thread only.
 *  @return 0; LD_EINVAL if either is NULL, if they belong to different bases,
 *  or if `from` is `out` or waits on `out` through a chain of then, catch,
 *  timeout or forward links (`out` is then rejected with LD_EINVAL);
 *  LD_EALREADY if `out` is complete or already adopting; LD_ENOMEM.
 *  The check keeps shortcuts along the chains: building a chain of any
 *  length costs about constant time per link on average. Cycles through
 *  ld_future_all()/ld_future_race() are not detected (such futures never
 *  complete).
 *  @since 0.1.0 */
LD_EXPORT int ld_future_forward(ld_future *out, ld_future *from);

/** A future already fulfilled with `v` (steals `v`). NULL if `base` is NULL
 *  or memory ran out (`v` is then released). @since 0.1.0 */
LD_EXPORT ld_future *ld_future_fulfilled_json(struct event_base *base, json_t *v);
/** A future already rejected with `code` (negative) and a message. NULL if
 *  `base` is NULL, `code` >= 0 or memory ran out. @since 0.1.0 */
LD_EXPORT ld_future *ld_future_rejected(struct event_base *base, int code, const char *fmt, ...)
    LD_PRINTF(3, 4);

/* ------------------------------------------------------------------------- */
/* Reading. Results are borrowed: valid while you hold a reference.          */
/* All accept NULL (false / NULL / 0, and ld_future_error(NULL) is LD_EINVAL). */

/** True while not complete (also while adopting another future). @since 0.1.0 */
LD_EXPORT bool ld_future_is_pending(const ld_future *f);
/** True once fulfilled. @since 0.1.0 */
LD_EXPORT bool ld_future_is_fulfilled(const ld_future *f);
/** True once rejected (cancellation and timeout included). @since 0.1.0 */
LD_EXPORT bool ld_future_is_rejected(const ld_future *f);
/** The JSON value of a future fulfilled with one (borrowed), else NULL.
 *  @since 0.1.0 */
LD_EXPORT json_t *ld_future_json(const ld_future *f);
/** The bool of a future fulfilled with a bool, else false. @since 0.1.0 */
LD_EXPORT bool ld_future_bool(const ld_future *f);
/** The integer of a future fulfilled with an int, else 0. @since 0.1.0 */
LD_EXPORT int64_t ld_future_int(const ld_future *f);
/** The pointer of a future fulfilled with one (borrowed), else NULL.
 *  @since 0.1.0 */
LD_EXPORT void *ld_future_ptr(const ld_future *f);
/** The rejection code: 0 unless rejected; LD_EINVAL for NULL. @since 0.1.0 */
LD_EXPORT int ld_future_error(const ld_future *f);
/** The rejection message (borrowed, never NULL once rejected), else NULL.
 *  @since 0.1.0 */
LD_EXPORT const char *ld_future_error_message(const ld_future *f);

/* ------------------------------------------------------------------------- */
/* Continuing. These steal the futures passed in, on every path, and belong  */
/* to the loop thread. A call that fails never calls the function it got.    */

/** Runs `cb(f, arg)` from the loop once `f` is complete (also when it already
 *  is: never from inside this call). Callbacks of one future run in
 *  registration order. Steals `f`; the reference is dropped after `cb` ran.
 *  @return 0, LD_EINVAL (NULL `f` or `cb`), LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_future_on_complete(ld_future *f, ld_future_cb cb, void *arg);

/** Returns `out`, pending until `in` completes. If `in` fulfils,
 *  `fn(in, out, arg)` runs (from the loop) and completes `out`; if `in` is
 *  rejected, `out` is rejected with the same code and message and `fn` is not
 *  called. Cancelling `out` while it waits cancels `in` when nobody else
 *  holds `in`. Steals `in`.
 *  @return a new reference; NULL if `in` or `fn` is NULL or memory ran out.
 *  @since 0.1.0 */
LD_EXPORT ld_future *ld_future_then(ld_future *in, ld_then_fn fn, void *arg);

/** The mirror image of ld_future_then(): `fn` runs when `in` is rejected
 *  (cancellation included); when `in` fulfils, `out` fulfils with the same
 *  value. @since 0.1.0 */
LD_EXPORT ld_future *ld_future_catch(ld_future *in, ld_then_fn fn, void *arg);

/** A future that fulfils (with no value) when all `n` inputs have fulfilled,
 *  or is rejected like the first input that is rejected, which also cancels
 *  the pending inputs that nobody else holds. With n == 0 it is fulfilled at
 *  once. Steals every fs[i]; `fs` itself is borrowed. Inputs stay readable
 *  with ld_future_all_get() for as long as the result lives.
 *  @return a new reference; NULL if `base` is NULL, `fs` is NULL with n > 0,
 *  any input is NULL or on another base, or memory ran out. @since 0.1.0 */
LD_EXPORT ld_future *ld_future_all(struct event_base *base, ld_future **fs, size_t n);

/** Input `i` of a future made by ld_future_all() (borrowed), or NULL if `all`
 *  is not such a future or `i` is out of range. @since 0.1.0 */
LD_EXPORT ld_future *ld_future_all_get(const ld_future *all, size_t i);

/** A future that completes like the first of the `n` inputs to complete, and
 *  cancels the others that nobody else holds (if several are complete
 *  already, the first of them in `fs` wins). Steals every fs[i].
 *  @return a new reference; NULL if `base` is NULL, n == 0, `fs` is NULL,
 *  any input is NULL or on another base, or memory ran out. @since 0.1.0 */
LD_EXPORT ld_future *ld_future_race(struct event_base *base, ld_future **fs, size_t n);

/** A future that adopts `f`'s outcome if `f` completes within `after`, and
 *  otherwise is rejected with LD_ETIMEDOUT, cancelling `f` when nobody else
 *  holds it. Steals `f`; `after` is copied. A timeout longer than 100 years
 *  (8.5 years where time_t has 32 bits), up to {LONG_MAX, 999999}, is cut
 *  to that: use it for "never".
 *  @return a new reference; NULL (`f` is released) if `f` or `after` is
 *  NULL, `after->tv_sec` is negative, `after->tv_usec` is outside
 *  [0, 999999], or memory ran out. @since 0.1.0 */
LD_EXPORT ld_future *ld_future_timeout(ld_future *f, const struct timeval *after);

/* ------------------------------------------------------------------------- */
/* Cancelling and waiting                                                    */

/** Rejects a pending `f` with LD_ECANCELED. Its cancel handler (if any) runs
 *  from the loop, before its callbacks. If `f` came from then, catch, forward,
 *  timeout, all or race, the pending inputs that nobody else holds are
 *  cancelled too (iteratively: long chains use constant stack). A consumer
 *  (then, catch, forward, timeout, all or race result) that is already
 *  complete, by cancellation, timeout or otherwise, does not hold its
 *  inputs in this sense: an input shared by several consumers is cancelled
 *  when the last of them is, unless a reference or an
 *  ld_future_on_complete() callback of yours still holds it. Borrows `f`.
 *  Any thread (see thread rules).
 *  @return 0, LD_EINVAL (NULL), LD_EALREADY (already complete). @since 0.1.0 */
LD_EXPORT int ld_future_cancel(ld_future *f);

/** Sets the producer's cancel handler of a pending `f`: `cb(f, arg)` runs
 *  from the loop if `f` is cancelled (not when it completes otherwise, and
 *  not if it is released while pending). A later call replaces it. Borrows
 *  `f`. Loop thread only.
 *  A future with a cancel handler is taken to have one reference held by its
 *  producer (to complete it later, or release it in the handler): when
 *  cancellation propagates from a then, catch, forward, timeout, all or race
 *  result, that reference does not count as "somebody else holds it".
 *  @return 0, LD_EINVAL (NULL `f` or `cb`, or `f` is a then, catch, timeout,
 *  all, race or forward result still waiting on its inputs), LD_EALREADY
 *  (already complete), LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_future_set_cancel_handler(ld_future *f, ld_future_cb cb, void *arg);

/** Runs the loop of `f`'s base (event_base_loop with EVLOOP_ONCE, repeatedly)
 *  until `f` is complete. Borrows `f`.
 *  @return 0 once complete (read the outcome from `f`); LD_EINVAL for NULL;
 *  LD_EBUSY when called from inside a callback of the same base, or while
 *  another thread runs that loop (instead of deadlocking); LD_ENOMEM.
 *  If nothing can complete `f` (no events, no other thread), it blocks
 *  forever: combine with ld_future_timeout(). @since 0.1.0 */
LD_EXPORT int ld_future_wait(ld_future *f);

/* ------------------------------------------------------------------------- */
/* Lending a value to a future                                               */

/** What keeps a value a future holds without a reference of its own alive
 *  for as long as the future holds it: a store's get_now answer (store.h),
 *  so that the result needs no jansson reference (which would touch the
 *  item's memory on every get). The lender embeds it in a structure of its
 *  own; the future calls release(lease) exactly once, when it is freed: on
 *  whichever thread drops its last reference once libevent threading is on.
 *  A future that adopts the value (then, forward, ...) takes a jansson
 *  reference of its own. @since 0.1.0 */
struct ld_lease {
    void (*release)(struct ld_lease *lease);
};

LD_END_DECLS

#endif /* LDASYNC_FUTURE_H */
