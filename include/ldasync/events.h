/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/events.h: analytics events.
 *
 * The event forwarder: what a relay (ldasync-serve) does with the events
 * that SDKs post to it, as LaunchDarkly's Relay Proxy does: each payload is
 * posted, unchanged, to the events service of a network configuration
 * (network.h: its events URI, SDK key, TLS and proxy settings), a few at a
 * time, retried once after a second on a network error or a recoverable
 * status (400, 408, 429, 5xx), and dropped otherwise. What waits is
 * bounded in bytes: a payload that would go beyond is refused at once
 * (LD_EBUSY), so that a slow or dead events service costs a bounded amount
 * of memory, never more.
 *
 * Thread rules: a forwarder belongs to the thread that runs its base's
 * loop.
 */
#ifndef LDASYNC_EVENTS_H
#define LDASYNC_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include <ldasync/common.h>
#include <ldasync/future.h>
#include <ldasync/network.h>

LD_BEGIN_DECLS

struct event_base;

/** An opaque event forwarder. Create with ld_event_forwarder_new(),
 *  release with ld_event_forwarder_free(). @since 0.1.0 */
typedef struct ld_event_forwarder ld_event_forwarder;

/** Makes a forwarder to the events service of `cfg` (copied), holding at
 *  most `max_bytes` of payloads at once (<= 0: 16 MiB; each payload also
 *  counts 1 KiB for what it costs besides its body).
 *  @return a new forwarder; NULL if `base` or `cfg` is NULL, or memory ran
 *  out. @since 0.1.0 */
LD_EXPORT ld_event_forwarder *ld_event_forwarder_new(struct event_base *base,
                                                     const ld_net_config *cfg, int64_t max_bytes);

/** Forwards a payload an SDK posted: POST {events}`path` (a path starting
 *  with '/': "/bulk", "/diagnostic", "/mobile", "/events/bulk/ENV", ...)
 *  with `body` (`len` bytes, copied) and, of the SDK's header lines
 *  (`headers`: "Name: value" strings, NULL-terminated; may be NULL), those
 *  that describe the payload: Authorization (for a credential of the SDK's
 *  own, as a mobile key; without it the configuration's SDK key is sent),
 *  Content-Type, Content-Encoding, User-Agent, X-LaunchDarkly-User-Agent,
 *  X-LaunchDarkly-Event-Schema, X-LaunchDarkly-Payload-ID,
 *  X-LaunchDarkly-Tags, X-LaunchDarkly-Wrapper. Other lines are left out.
 *  @return 0 once it is queued; LD_EINVAL (NULL forwarder, `path` not a
 *  path, `body` NULL with `len` > 0, `len` 0); LD_EBUSY (it would hold more
 *  than its bound: answer the SDK 503); LD_ECLOSED after close; LD_ENOMEM.
 *  @since 0.1.0 */
LD_EXPORT int ld_event_forwarder_post(ld_event_forwarder *fwd, const char *path,
                                      const char *const *headers, const void *body, size_t len);

/** What a forwarder did. @since 0.1.0 */
typedef struct ld_event_forwarder_stats {
    uint64_t forwarded; /* payloads the events service took (2xx) */
    uint64_t dropped;   /* payloads given up (after the retry, or refused by it) */
    uint64_t refused;   /* payloads ld_event_forwarder_post() refused with LD_EBUSY */
    uint64_t queued;    /* payloads waiting or being posted now */
    uint64_t bytes;     /* what they count against the bound */
} ld_event_forwarder_stats;

/** Reads the forwarder's counts. @return 0; LD_EINVAL if `fwd` or `out`
 *  is NULL. @since 0.1.0 */
LD_EXPORT int ld_event_forwarder_stats_get(const ld_event_forwarder *fwd,
                                           ld_event_forwarder_stats *out);

/** Closes the forwarder gracefully: later posts are refused with
 *  LD_ECLOSED; what it holds is still posted. @return a new reference,
 *  fulfilled (no value) once nothing is left to post; closing twice
 *  fulfils again. NULL only if `fwd` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_event_forwarder_close(ld_event_forwarder *fwd);

/** Frees the forwarder: what it holds is dropped, posts under way are
 *  abandoned, and a close still pending is rejected with LD_ECANCELED
 *  (from the loop). NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_event_forwarder_free(ld_event_forwarder *fwd);

LD_END_DECLS

#endif /* LDASYNC_EVENTS_H */
