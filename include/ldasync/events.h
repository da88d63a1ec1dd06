/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/events.h: analytics events.
 *
 * The default event processor (an ld_event_processor, processor.h): what
 * LaunchDarkly's server SDKs do with the evaluations, identify and custom
 * events of an application, as they do it. A client (client.h) makes one
 * from its network configuration unless events are turned off; one can
 * also be made here, to send events of one's own making. It keeps:
 *   - a summary of every evaluation (per flag: the default, the context
 *     kinds, a counter per variation and flag version), sent with each
 *     payload, recorded in constant time without allocating in steady
 *     state;
 *   - a "feature" event for each evaluation of a flag that asks for them
 *     (trackEvents, a rule's or the fallthrough's trackEvents, an
 *     experiment: these carry the reason), and a "debug" event while the
 *     flag's debugEventsUntilDate is later than both this machine's clock
 *     and the events service's (the Date of its last answer), each with
 *     the prerequisites' own events first ("prereqOf");
 *   - an "index" event the first time a context is seen (its
 *     fully-qualified key, in an LRU of context keys cleared every
 *     context-keys interval);
 *   - "identify" and "custom" events;
 *   - contexts redacted as configured (all attributes private, private
 *     attribute references, each context's own private attributes; the
 *     attributes of an anonymous context in feature and custom events).
 * Events wait in a buffer of `capacity` events; past it they are dropped
 * and counted, and the warning function, if any, hears of it once until
 * a flush makes room. Every flush interval (and on ld_event_processor_flush()
 * and close) the buffer and the summary become one payload: its JSON is
 * written and compressed (gzip, when configured) off the loop, on a
 * thread of the processor's own, then POSTed to {events URI}/bulk, five
 * at most at once (a flush while five are under way waits for the next),
 * retried once a second later after a network error or a recoverable
 * status; after 401 or 403 nothing more is sent. Diagnostic events
 * (diagnostic-init when it starts, then "diagnostic" every diagnostic
 * interval) go to {events URI}/diagnostic.
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
 * Thread rules: a processor and a forwarder belong to the thread that
 * runs their base's loop.
 */
#ifndef LDASYNC_EVENTS_H
#define LDASYNC_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ldasync/common.h>
#include <ldasync/future.h>
#include <ldasync/network.h>
#include <ldasync/processor.h>

LD_BEGIN_DECLS

struct event_base;

/* ------------------------------------------------------------------------- */
/* The default event processor                                               */

/** How a default event processor behaves; made with
 *  ld_events_config_new() (LaunchDarkly's defaults), changed with the
 *  setters (each returns 0, or LD_EINVAL for a NULL `cfg` or a value out
 *  of range, leaving it unchanged), freed with ld_events_config_free().
 *  What is given to a processor or a client is copied. Not thread-safe.
 *  @since 0.1.0 */
typedef struct ld_events_config ld_events_config;

/** A configuration with LaunchDarkly's defaults: capacity 10,000 events,
 *  a flush every 5 s, 1,000 context keys cleared every 5 min, no private
 *  attributes, no gzip, diagnostics every 15 min, anonymous contexts kept.
 *  NULL if memory ran out. @since 0.1.0 */
LD_EXPORT ld_events_config *ld_events_config_new(void);

/** Frees it (NULL-safe). @since 0.1.0 */
LD_EXPORT void ld_events_config_free(ld_events_config *cfg);

/** Events held at most between flushes (> 0); the summary is not
 *  counted. @since 0.1.0 */
LD_EXPORT int ld_events_config_set_capacity(ld_events_config *cfg, int capacity);

/** Milliseconds between flushes (> 0). @since 0.1.0 */
LD_EXPORT int ld_events_config_set_flush_interval(ld_events_config *cfg, int64_t ms);

/** The LRU of context keys that says which contexts had their index
 *  event: `capacity` keys (> 0), forgotten every `flush_ms` (> 0).
 *  @since 0.1.0 */
LD_EXPORT int ld_events_config_set_context_keys(ld_events_config *cfg, int capacity,
                                                int64_t flush_ms);

/** Every attribute of every context private (left out of events; only
 *  "kind", "key" and "anonymous" remain). @since 0.1.0 */
LD_EXPORT int ld_events_config_set_all_attributes_private(ld_events_config *cfg, bool all);

/** Adds an attribute reference (copied) that is private in every context:
 *  a name ("email") or a path ("/address/street"). LD_EINVAL also for a
 *  NULL `ref`; LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_events_config_add_private_attribute(ld_events_config *cfg, const char *ref);

/** Payloads sent gzip-compressed (Content-Encoding: gzip). @since 0.1.0 */
LD_EXPORT int ld_events_config_set_gzip(ld_events_config *cfg, bool gzip);

/** Leaves anonymous contexts out of identify and index events (an
 *  identify event of anonymous contexts only is not sent; a multi-kind
 *  context loses its anonymous kinds). @since 0.1.0 */
LD_EXPORT int ld_events_config_set_omit_anonymous_contexts(ld_events_config *cfg, bool omit);

/** Diagnostic events on or off, and the milliseconds between periodic
 *  ones (>= 60,000; LaunchDarkly's minimum). @since 0.1.0 */
LD_EXPORT int ld_events_config_set_diagnostics(ld_events_config *cfg, bool enabled,
                                               int64_t interval_ms);

/** What hears the processor's warnings (the buffer is full: events are
 *  being dropped). Called from the loop (never inside the call that
 *  dropped an event: it may close or free the processor or its client)
 *  with a message borrowed for the call. @since 0.1.0 */
typedef void (*ld_events_warning_fn)(const char *message, void *arg);

/** Sets the warning function (NULL: none, the default). @since 0.1.0 */
LD_EXPORT int ld_events_config_set_warning_fn(ld_events_config *cfg, ld_events_warning_fn fn,
                                              void *arg);

/** Makes a default event processor sending to the events service of `net`
 *  (copied: its events URI, SDK key, TLS and proxy settings), configured
 *  by `cfg` (copied; NULL: the defaults). Its flush timer and diagnostics
 *  start now. ld_event_processor_send_event() takes an event already in
 *  LaunchDarkly's output form ("kind", "creationDate", ...): it is sent as
 *  it is, counting against the capacity (LD_EBUSY when full).
 *  @return NULL if `base` or `net` is NULL, or memory ran out (or its
 *  HTTP client could not be made). Free with ld_event_processor_free().
 *  @since 0.1.0 */
LD_EXPORT ld_event_processor *ld_default_event_processor_new(struct event_base *base,
                                                             const ld_net_config *net,
                                                             const ld_events_config *cfg);

/** What a default event processor did. @since 0.1.0 */
typedef struct ld_events_stats {
    uint64_t events;           /* events (not counting summaries) put in the buffer */
    uint64_t dropped;          /* events dropped: the buffer was full */
    uint64_t deduplicated;     /* index events not made: the context key was known */
    uint64_t payloads_sent;    /* payloads the events service took */
    uint64_t payloads_dropped; /* payloads given up (after the retry, or refused) */
    uint64_t buffered;         /* events waiting for the next flush */
    uint64_t in_flight;        /* payloads being written or posted now */
    bool stopped;              /* a 401 or 403 ended all sending */
} ld_events_stats;

/** Reads the counts of `ep`. @return 0; LD_EINVAL if `ep` or `out` is
 *  NULL or `ep` is not a default event processor. Loop thread.
 *  @since 0.1.0 */
LD_EXPORT int ld_default_event_processor_stats(const ld_event_processor *ep, ld_events_stats *out);

/* ------------------------------------------------------------------------- */
/* The event forwarder                                                       */

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
