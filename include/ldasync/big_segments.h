/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/big_segments.h: the asynchronous big segment store interface.
 *
 * A big segment store answers two questions for the evaluator: when the data
 * it holds was last known to be up to date (get_metadata), and which big
 * segments a context is included in or excluded from (get_membership, by the
 * context's hash: base64 of the SHA-256 of its key).
 *
 * Every operation returns a new reference to a future that completes from
 * the event loop of the store's base; futures of one store complete in the
 * order the operations were issued, whatever the implementation does (and
 * the front's own rejections too). Bad input is rejected with LD_EINVAL and
 * a message naming the field, before the implementation sees it. After
 * close, operations reject with LD_ECLOSED. Out of memory is handled as
 * store.h says.
 *
 * Results:
 *   - get_metadata: fulfilled with an int64 (ld_future_int()): the last
 *     up-to-date time in milliseconds since the Unix epoch (>= 0), or
 *     LD_BIG_SEGMENT_TIME_UNKNOWN (-1) when the store does not know it.
 *   - get_membership: fulfilled with a JSON object segment-ref -> bool
 *     (ld_future_json(), borrowed, must not be modified), or with NULL when
 *     the context is in no big segment at all. true means included, false
 *     excluded; a ref absent from the object means neither.
 *
 * Thread rules: a store belongs to the thread that runs its base's loop. The
 * pure functions (membership_from_refs, is_stale, status_name) are any-thread.
 */
#ifndef LDASYNC_BIG_SEGMENTS_H
#define LDASYNC_BIG_SEGMENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ldasync/common.h>
#include <ldasync/future.h>

LD_BEGIN_DECLS

struct event_base;

/** The metadata time of a store that does not know when it was last up to
 *  date (any negative value read back means the same). @since 0.1.0 */
#define LD_BIG_SEGMENT_TIME_UNKNOWN INT64_C(-1)

/** An opaque big segment store. Create with ld_big_segment_store_new() (or
 *  an implementation's constructor); release with
 *  ld_big_segment_store_free(). @since 0.1.0 */
typedef struct ld_big_segment_store ld_big_segment_store;

/** Reads the store's metadata. @return a new reference, fulfilled with the
 *  last up-to-date time in epoch ms or LD_BIG_SEGMENT_TIME_UNKNOWN; rejected
 *  with LD_ECLOSED after close, or with the implementation's error (e.g.
 *  LD_ESTORE). NULL only if `store` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_big_segment_store_get_metadata(ld_big_segment_store *store);

/** Reads the membership of the context whose hash is `context_hash`
 *  (borrowed; the implementation gets it for the duration of the call).
 *  @return a new reference, fulfilled with a JSON object segment-ref -> bool
 *  (borrowed, immutable) or NULL; rejected with LD_EINVAL ("context_hash":
 *  NULL or empty), LD_ECLOSED, or the implementation's error. NULL only if
 *  `store` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_big_segment_store_get_membership(ld_big_segment_store *store,
                                                         const char *context_hash);

/** Closes the store gracefully (as every `_close` of ldasync; a `_stop`
 *  aborts): operations issued before complete as usual, later ones reject
 *  with LD_ECLOSED. Closing twice fulfils again.
 *  @return a new reference, fulfilled (no value) when the implementation
 *  has closed (ops->close). NULL only if `store` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_big_segment_store_close(ld_big_segment_store *store);

/** Frees the store: operations still pending reject with LD_ECANCELED (from
 *  the loop), their implementation futures are cancelled, and ops->free
 *  runs. Safe from inside a callback of one of the store's own futures.
 *  When operations were pending, ops->free runs from the loop after their
 *  cancel handlers (which may use the implementation). NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_big_segment_store_free(ld_big_segment_store *store);

/** A short name of the implementation ("redis", "mock", ...); never NULL:
 *  "unknown" without ops->describe, "(null)" for NULL. @since 0.1.0 */
LD_EXPORT const char *ld_big_segment_store_describe(const ld_big_segment_store *store);

/* ------------------------------------------------------------------------- */
/* For implementers                                                          */

/** The version of struct ld_big_segment_store_ops this header describes.
 *  @since 0.1.0 */
#define LD_BIG_SEGMENT_STORE_OPS_VERSION 1

/** What an implementation provides. Each operation receives `out`, a pending
 *  future it owns (one reference): it must complete it (now or later, from
 *  the loop thread) and release it. Inputs are validated already. Results:
 *    get_metadata:   ld_future_fulfill_int() with the time in epoch ms (>= 0)
 *                    or LD_BIG_SEGMENT_TIME_UNKNOWN;
 *    get_membership: ld_future_fulfill_json() with a new reference to an
 *                    object segment-ref -> bool that is not modified
 *                    afterwards (ld_big_segment_membership_from_refs() makes
 *                    one), or with NULL;
 *    close:          ld_future_fulfill();
 *    any:            reject with LD_ESTORE (or another code) on a failure.
 *  `out` may be cancelled (ld_future_set_cancel_handler() to hear of it) when
 *  the store is freed. The front layer orders completions, so an
 *  implementation may complete out of order. `close`, `free` and `describe`
 *  may be NULL. @since 0.1.0 */
struct ld_big_segment_store_ops {
    int version; /* LD_BIG_SEGMENT_STORE_OPS_VERSION */
    void (*get_metadata)(void *impl, ld_future *out);
    void (*get_membership)(void *impl, const char *context_hash, ld_future *out);
    void (*close)(void *impl, ld_future *out);
    void (*free)(void *impl);
    const char *(*describe)(void *impl);
};

/** Makes a big segment store from an implementation. `ops` is borrowed and
 *  must outlive the store (usually a static const struct); `impl` is handed
 *  to every operation and to ops->free. @return a new store; NULL if `base`
 *  or `ops` is NULL, ops->version is not one this library knows,
 *  get_metadata or get_membership is missing, or memory ran out
 *  (ops->free(impl) is not called then). @since 0.1.0 */
LD_EXPORT ld_big_segment_store *ld_big_segment_store_new(struct event_base *base,
                                                         const struct ld_big_segment_store_ops *ops,
                                                         void *impl);

/* ------------------------------------------------------------------------- */
/* Helpers                                                                   */

/** Builds a membership object from the refs a context is included in and
 *  excluded from (both arrays borrowed): every excluded ref maps to false,
 *  then every included ref to true, so a ref in both lists is included.
 *  @param membership receives a new reference to the object, or NULL when
 *  both lists are empty (the context is in no big segment).
 *  @return 0; LD_EINVAL if `membership` is NULL, an array is NULL with a
 *  count > 0, or a ref is NULL or empty (`*why`, if `why` is not NULL, is set
 *  to a static message naming the argument; *membership is set to NULL);
 *  LD_ENOMEM. Any thread. @since 0.1.0 */
LD_EXPORT int ld_big_segment_membership_from_refs(const char *const *included, size_t n_included,
                                                  const char *const *excluded, size_t n_excluded,
                                                  json_t **membership, const char **why);

/** True if metadata time `last_up_to_date_ms` is stale at `now_ms`: unknown
 *  (negative), or at least `stale_after_ms` old (the rule of LaunchDarkly's
 *  SDKs, whose default is 120000 ms). Any thread. @since 0.1.0 */
LD_EXPORT bool ld_big_segment_is_stale(int64_t last_up_to_date_ms, int64_t now_ms,
                                       int64_t stale_after_ms);

/** The big segments status an evaluation reports. @since 0.1.0 */
enum ld_big_segments_status {
    LD_BIG_SEGMENTS_STATUS_HEALTHY = 0,        /* the store answered and is up to date */
    LD_BIG_SEGMENTS_STATUS_STALE = 1,          /* it answered, but its data may be old */
    LD_BIG_SEGMENTS_STATUS_NOT_CONFIGURED = 2, /* a big segment was needed, no store */
    LD_BIG_SEGMENTS_STATUS_STORE_ERROR = 3     /* the store failed */
};

/** The status's name as LaunchDarkly's evaluation reasons spell it:
 *  "HEALTHY", "STALE", "NOT_CONFIGURED", "STORE_ERROR"; NULL for a value not
 *  in the enum. Any thread. @since 0.1.0 */
LD_EXPORT const char *ld_big_segments_status_name(enum ld_big_segments_status status);

LD_END_DECLS

#endif /* LDASYNC_BIG_SEGMENTS_H */
