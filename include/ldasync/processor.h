/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/processor.h: the event processor and update processor interfaces.
 *
 * They exist so that an SDK's client can be written, and tested with mocks,
 * against a contract: the event processor takes analytics events and
 * delivers them; the update processor (a data source of the first data
 * system) fills a store and says when it is ready.
 *
 * Both follow the pattern of store.h: an ops struct with its version first,
 * a _new(base, ops, impl) constructor, front functions that validate input
 * (LD_EINVAL naming the argument), return futures completing from the loop
 * in issue order (rejections by the front included), and reject with
 * LD_ECLOSED once closed (the event processor's close drains: what was
 * issued before completes) or stopped (the update processor's stop aborts:
 * a pending start is rejected). Out of memory is handled as store.h says.
 *
 * Thread rules: a processor belongs to the thread that runs its base's loop.
 */
#ifndef LDASYNC_PROCESSOR_H
#define LDASYNC_PROCESSOR_H

#include <jansson.h>
#include <stdbool.h>

#include <ldasync/common.h>
#include <ldasync/future.h>

LD_BEGIN_DECLS

struct event_base;

/* ------------------------------------------------------------------------- */
/* Event processor                                                           */

/** An opaque event processor. Create with ld_event_processor_new(), release
 *  with ld_event_processor_free(). @since 0.1.0 */
typedef struct ld_event_processor ld_event_processor;

/** Queues an analytics event (borrowed: the implementation takes its own
 *  reference if it keeps it, so it must not be modified afterwards).
 *  Synchronous: never blocks on I/O. @return 0; LD_EINVAL (NULL processor,
 *  `event` not a JSON object); LD_ECLOSED after close; or the
 *  implementation's error (e.g. LD_ENOMEM, or LD_EBUSY when its queue is
 *  full and the event was dropped). @since 0.1.0 */
LD_EXPORT int ld_event_processor_send_event(ld_event_processor *ep, json_t *event);

/** Delivers the events queued so far. @return a new reference, fulfilled
 *  with a bool: true if they were all delivered, false if some were dropped;
 *  rejected with LD_ECLOSED after close or with the implementation's error.
 *  NULL only if `ep` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_event_processor_flush(ld_event_processor *ep);

/** Closes the processor gracefully (as every `_close` of ldasync; a `_stop`
 *  aborts): flushes issued before complete as usual
 *  (the implementation delivers what it holds), later calls reject with
 *  LD_ECLOSED. Closing twice fulfils again. @return a new reference,
 *  fulfilled (no value) when the implementation has closed. NULL only if
 *  `ep` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_event_processor_close(ld_event_processor *ep);

/** Frees the processor: pending futures reject with LD_ECANCELED, and ops->free
 *  runs: at once, or, when operations were pending, from the loop after
 *  their cancel handlers (which may use the implementation). Safe from
 *  inside a callback of one of its own futures. NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_event_processor_free(ld_event_processor *ep);

/** The version of struct ld_event_processor_ops this header describes.
 *  @since 0.1.0 */
#define LD_EVENT_PROCESSOR_OPS_VERSION 1

/** What an event processor implementation provides. `send_event` gets a
 *  valid event object (borrowed: json_incref() it to keep it) and returns 0
 *  or a negative code. `flush` and `close` receive `out`, a pending future
 *  they own (one reference), to complete and release: flush with
 *  ld_future_fulfill_bool(), close with ld_future_fulfill(). `send_event`
 *  and `flush` are required; `close` and `free` may be NULL. @since 0.1.0 */
struct ld_event_processor_ops {
    int version; /* LD_EVENT_PROCESSOR_OPS_VERSION */
    int (*send_event)(void *impl, json_t *event);
    void (*flush)(void *impl, ld_future *out);
    void (*close)(void *impl, ld_future *out);
    void (*free)(void *impl);
};

/** Makes an event processor from an implementation; `ops` is borrowed and
 *  must outlive it. @return NULL if `base` or `ops` is NULL, the version is
 *  unknown, a required operation is missing, or memory ran out (ops->free
 *  is not called then). @since 0.1.0 */
LD_EXPORT ld_event_processor *ld_event_processor_new(struct event_base *base,
                                                     const struct ld_event_processor_ops *ops,
                                                     void *impl);

/* ------------------------------------------------------------------------- */
/* Update processor                                                          */

/** An opaque update processor. Create with ld_update_processor_new(),
 *  release with ld_update_processor_free(). @since 0.1.0 */
typedef struct ld_update_processor ld_update_processor;

/** Starts it (once). @return a new reference, fulfilled (no value) when it
 *  is ready: it has initialized the store, or has given up (then
 *  ld_update_processor_initialized() is false; an implementation may
 *  instead reject with the reason). Rejected with LD_EINVAL ("already
 *  started") on a second call, with LD_ECLOSED after stop (also when stop
 *  comes while it is pending). NULL only if `up` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_update_processor_start(ld_update_processor *up);

/** True once the processor has initialized its store; false before, after
 *  stop, and for NULL. @since 0.1.0 */
LD_EXPORT bool ld_update_processor_initialized(const ld_update_processor *up);

/** Stops the processor, aborting (as every `_stop` of ldasync; a `_close`
 *  drains): a pending start rejects with LD_ECLOSED (from the loop, before
 *  the stop's future), later calls too. Stopping twice fulfils again, after
 *  the first stop (which the second does not abort).
 *  @return a new reference, fulfilled (no value) when the implementation
 *  has stopped (ops->stop). NULL only if `up` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_update_processor_stop(ld_update_processor *up);

/** Frees the processor: a pending start rejects with LD_ECANCELED, and ops->free
 *  runs: at once, or, when operations were pending, from the loop after
 *  their cancel handlers (which may use the implementation). Safe from
 *  inside a callback of one of its own futures. NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_update_processor_free(ld_update_processor *up);

/** The version of struct ld_update_processor_ops this header describes.
 *  @since 0.1.0 */
#define LD_UPDATE_PROCESSOR_OPS_VERSION 1

/** What an update processor implementation provides. `start` and `stop`
 *  receive `out`, a pending future they own (one reference), to complete and
 *  release with ld_future_fulfill() (start: when ready) or a rejection.
 *  start's `out` is cancelled if the processor is stopped or freed first.
 *  `initialized` answers at once. `start` and `initialized` are required;
 *  `stop` and `free` may be NULL. @since 0.1.0 */
struct ld_update_processor_ops {
    int version; /* LD_UPDATE_PROCESSOR_OPS_VERSION */
    void (*start)(void *impl, ld_future *out);
    bool (*initialized)(void *impl);
    void (*stop)(void *impl, ld_future *out);
    void (*free)(void *impl);
};

/** Makes an update processor from an implementation; `ops` is borrowed and
 *  must outlive it. @return NULL if `base` or `ops` is NULL, the version is
 *  unknown, a required operation is missing, or memory ran out (ops->free
 *  is not called then). @since 0.1.0 */
LD_EXPORT ld_update_processor *ld_update_processor_new(struct event_base *base,
                                                       const struct ld_update_processor_ops *ops,
                                                       void *impl);

LD_END_DECLS

#endif /* LDASYNC_PROCESSOR_H */
