/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/client.h: the client, the object a server holds. It puts the
 * parts of ldasync together as LaunchDarkly's server SDKs do: a store, a
 * data system that keeps it up to date from data sources (data_system.h),
 * and an evaluator that answers from it (eval.h), with typed variations,
 * details, the all-flags state and the data-source status.
 *
 * Options are an opaque object with setters (as sqlite's and libuv's
 * configuration is), not a struct: settings can be added in later versions
 * without changing the layout programs were compiled against, each setter
 * validates its argument where the mistake is made, and the options own
 * the data sources handed to them, so that they are freed exactly once
 * whether or not a client is ever made.
 *
 * Evaluations answer from whatever the store holds: before the data system
 * is ready (ld_client_ready()) a flag the store does not hold yet is
 * FLAG_NOT_FOUND and serves the fallback. Offline, the client runs no data
 * source at all: evaluations use what the store holds (e.g. a store that
 * another process fills), and ready is fulfilled at once.
 *
 * Every future returned completes from the loop, never inside the call.
 * Typed variations fulfil with the value in the future's own types: a
 * bool (ld_future_bool), an int64 (ld_future_int), or JSON (ld_future_json:
 * a number, a string or any value, borrowed from the store: do not modify
 * it). An evaluation error is not a rejection: the fallback is served, as
 * eval.h says; a value of another type than asked for serves the fallback
 * (WRONG_TYPE in the detail).
 *
 * Connected to LaunchDarkly: give the options a network configuration
 * (ld_client_options_set_net_config(), network.h) and the client streams
 * its data from LaunchDarkly (or polls it). The program must ignore
 * SIGPIPE, as network.h says.
 *
 * Analytics events are not sent yet (a later version adds an event
 * processor to the options).
 *
 * Thread rules: a client belongs to the thread that runs its base's loop,
 * as its store, data sources and evaluator do.
 */
#ifndef LDASYNC_CLIENT_H
#define LDASYNC_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include <ldasync/big_segments.h>
#include <ldasync/common.h>
#include <ldasync/context.h>
#include <ldasync/data_system.h>
#include <ldasync/eval.h>
#include <ldasync/events.h>
#include <ldasync/fdv2.h>
#include <ldasync/future.h>
#include <ldasync/network.h>
#include <ldasync/status.h>
#include <ldasync/store.h>

LD_BEGIN_DECLS

struct event_base;

/* ------------------------------------------------------------------------- */
/* Options                                                                   */

/** The options of a client. Create with ld_client_options_new(), release
 *  with ld_client_options_free(). @since 0.1.0 */
typedef struct ld_client_options ld_client_options;

/** @return new options with the defaults: a memory store made (and freed)
 *  by the client, no data source, no big segment store, online; NULL if
 *  memory ran out. @since 0.1.0 */
LD_EXPORT ld_client_options *ld_client_options_new(void);

/** Frees the options and the data sources they still hold (those not
 *  taken by ld_client_new()). NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_client_options_free(ld_client_options *opts);

/** The store the client keeps up to date and evaluates from (borrowed: it
 *  must outlive every client made with it; free the client, let the loop
 *  run, then close and free the store). NULL: the default, a memory store
 *  of the client's own. @return 0; LD_EINVAL if `opts` is NULL.
 *  @since 0.1.0 */
LD_EXPORT int ld_client_options_set_store(ld_client_options *opts, ld_store *store);

/** Appends an initializer to those tried in order (data_system.h). Steals
 *  `init` on every path. @return 0; LD_EINVAL if `opts` or `init` is NULL
 *  (`init` is freed); LD_ENOMEM (`init` is freed). @since 0.1.0 */
LD_EXPORT int ld_client_options_add_initializer(ld_client_options *opts, ld_initializer *init);

/** Sets the synchronizer (data_system.h); steals `sync` on every path and
 *  frees one set before. NULL removes it. @return 0; LD_EINVAL if `opts`
 *  is NULL (`sync` is freed). @since 0.1.0 */
LD_EXPORT int ld_client_options_set_synchronizer(ld_client_options *opts, ld_synchronizer *sync);

/** The big segment store evaluations consult (borrowed: it must outlive
 *  the client), and after how long its data is stale (`stale_after_ms`
 *  <= 0: LaunchDarkly's default, 120000), as
 *  ld_evaluator_set_big_segment_store(). The client reads it through a
 *  cache of memberships and polls its metadata
 *  (ld_client_options_set_big_segment_cache()). NULL: none (big segments
 *  report NOT_CONFIGURED). @return 0; LD_EINVAL if `opts` is NULL.
 *  @since 0.1.0 */
LD_EXPORT int ld_client_options_set_big_segments(ld_client_options *opts, ld_big_segment_store *bss,
                                                 int64_t stale_after_ms);

/** How the client caches big segment memberships and polls the big
 *  segment store's status, as LaunchDarkly's SDKs do. Each context's
 *  membership is read once and kept for `cache_ms` (<= 0: 5000), for at
 *  most `cache_size` contexts (<= 0: 1000; the least recently used goes
 *  first); concurrent evaluations for one context share one read, and a
 *  membership kept is used at once, also while other contexts' reads are
 *  under way. The store's metadata is read when the client is made and
 *  every `poll_ms` (<= 0: 5000) after the last read ended; evaluations
 *  take its staleness from the last read instead of asking the store
 *  (after a read that failed, whatever its code, they report STORE_ERROR
 *  until the next one).
 *  Only used with ld_client_options_set_big_segments().
 *  @return 0; LD_EINVAL if `opts` is NULL. @since 0.1.0 */
LD_EXPORT int ld_client_options_set_big_segment_cache(ld_client_options *opts, int cache_size,
                                                      int64_t cache_ms, int64_t poll_ms);

/** Offline: no data source runs (the initializers and synchronizer given
 *  are freed by ld_client_new()), evaluations use what the store holds,
 *  ready is fulfilled at once and the status is `valid`.
 *  @return 0; LD_EINVAL if `opts` is NULL. @since 0.1.0 */
LD_EXPORT int ld_client_options_set_offline(ld_client_options *opts, bool offline);

/** Daemon mode (LaunchDarkly's "daemon mode", the Node SDK's useLdd, the
 *  Go SDK's external updates only): the store is a shared persistent
 *  store that another process keeps up to date (the Relay Proxy,
 *  ldasync-serve --redis, another SDK), so the client runs no data source
 *  (those given are freed by ld_client_new()) and evaluates what the store
 *  holds when it evaluates: give it the store with
 *  ld_client_options_set_store(), usually a Redis store (redis.h) behind a
 *  cache (ld_caching_store_new()). Unlike offline, analytics events are
 *  sent as configured. Ready is fulfilled at once and the data source
 *  status is `valid`; whether the store holds a data set yet,
 *  ld_store_initialized() says. @return 0; LD_EINVAL if `opts` is NULL.
 *  @since 0.1.0 */
LD_EXPORT int ld_client_options_set_daemon_mode(ld_client_options *opts, bool daemon);

/** How the client reaches LaunchDarkly (network.h): the SDK key, the
 *  service URIs, tags, wrapper, payload filter, HTTP and TLS settings.
 *  `cfg` is copied (NULL removes it). With it, and no data source given
 *  (no initializer, no synchronizer) and not offline, the client streams
 *  from LaunchDarkly (ld_streaming_synchronizer_new()), or polls with
 *  ld_client_options_set_polling(); data sources given win (files, say).
 *  It also gives ld_client_secure_mode_hash() its SDK key. @return 0;
 *  LD_EINVAL if `opts` is NULL; LD_ENOMEM (nothing changes).
 *  @since 0.1.0 */
LD_EXPORT int ld_client_options_set_net_config(ld_client_options *opts, const ld_net_config *cfg);

/** Analytics events (events.h) on or off. They are on by default when the
 *  client has a network configuration and is not offline: the client then
 *  has a default event processor sending to the configuration's events
 *  URI, and every evaluation (the typed variations and
 *  ld_client_variation_detail(); not the all-flags states) is counted in
 *  its summary, with the feature and debug events the flag asks for.
 *  @return 0; LD_EINVAL if `opts` is NULL. @since 0.1.0 */
LD_EXPORT int ld_client_options_set_events(ld_client_options *opts, bool enabled);

/** How the client's event processor behaves (events.h); `cfg` is copied
 *  (NULL: LaunchDarkly's defaults). @return 0; LD_EINVAL if `opts` is
 *  NULL; LD_ENOMEM (nothing changes). @since 0.1.0 */
LD_EXPORT int ld_client_options_set_events_config(ld_client_options *opts,
                                                  const ld_events_config *cfg);

/** Polls LaunchDarkly (ld_polling_synchronizer_new()) instead of
 *  streaming, when the client makes its own data source from the network
 *  configuration. @return 0; LD_EINVAL if `opts` is NULL. @since 0.1.0 */
LD_EXPORT int ld_client_options_set_polling(ld_client_options *opts, bool polling);

/* ------------------------------------------------------------------------- */
/* The client                                                                */

/** A client. Create with ld_client_new(), release with ld_client_free().
 *  @since 0.1.0 */
typedef struct ld_client ld_client;

/** Makes a client on `base` with `opts` (borrowed; NULL: the defaults) and
 *  starts its data system from the loop. The data sources move from `opts`
 *  into the client on every path (freed at once when the call fails or the
 *  client is offline); `opts` keeps its other settings and may be used for
 *  other clients or freed. @return a new client; NULL if `base` is NULL or
 *  memory ran out. @since 0.1.0 */
LD_EXPORT ld_client *ld_client_new(struct event_base *base, ld_client_options *opts);

/** A future fulfilled (no value) once the store holds data from a data
 *  source, rejected when every source failed, as ld_data_system_ready()
 *  (offline: fulfilled). The same future every time. @return a new
 *  reference; NULL only if `client` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_client_ready(ld_client *client);

/* Evaluations. Each borrows `key` and `ctx` (referenced while pending) and
 * returns a new reference to a future: fulfilled as said below; rejected
 * with LD_EINVAL if `key` or `ctx` is NULL, LD_ECLOSED once the client is
 * closed, LD_ECANCELED if the client is freed first, LD_ENOMEM. NULL only
 * if `client` is NULL. */

/** Evaluates a boolean flag: fulfilled with a bool (ld_future_bool()), the
 *  flag's or `fallback`. @since 0.1.0 */
LD_EXPORT ld_future *ld_client_bool_variation(ld_client *client, const char *key, ld_context *ctx,
                                              bool fallback);

/** Evaluates a number flag as an integer: fulfilled with an int64
 *  (ld_future_int()); a value with a fraction is truncated toward zero, as
 *  LaunchDarkly's SDKs do (and one out of the int64 range is clamped).
 *  @since 0.1.0 */
LD_EXPORT ld_future *ld_client_int_variation(ld_client *client, const char *key, ld_context *ctx,
                                             int64_t fallback);

/** Evaluates a number flag: fulfilled with a JSON number (ld_future_json();
 *  read it with json_number_value()), the flag's or `fallback`. A NaN or
 *  infinite `fallback` (JSON has neither) is rejected with LD_EINVAL.
 *  @since 0.1.0 */
LD_EXPORT ld_future *ld_client_number_variation(ld_client *client, const char *key, ld_context *ctx,
                                                double fallback);

/** Evaluates a string flag: fulfilled with a JSON string (ld_future_json();
 *  read it with json_string_value()), the flag's or `fallback` (copied).
 *  A NULL `fallback` turns the type check off (eval.h): a flag serving
 *  another type then gives a future fulfilled with NULL. A `fallback` that
 *  is not valid UTF-8 is rejected with LD_EINVAL. @since 0.1.0 */
LD_EXPORT ld_future *ld_client_string_variation(ld_client *client, const char *key, ld_context *ctx,
                                                const char *fallback);

/** Evaluates a flag of any type: fulfilled with its JSON value
 *  (ld_future_json(); NULL for JSON null), or `fallback` (stolen on every
 *  path; NULL for JSON null). @since 0.1.0 */
LD_EXPORT ld_future *ld_client_json_variation(ld_client *client, const char *key, ld_context *ctx,
                                              json_t *fallback);

/** Evaluates with the reason: fulfilled with an ld_detail
 *  (ld_future_ptr()), exactly as ld_evaluator_detail(); steals `fallback`.
 *  @since 0.1.0 */
LD_EXPORT ld_future *ld_client_variation_detail(ld_client *client, const char *key, ld_context *ctx,
                                                ld_value_type type, json_t *fallback);

/** The all-flags state of `ctx`, as ld_evaluator_all_flags() (`options`:
 *  its LD_ALL_FLAGS_* bits). @since 0.1.0 */
LD_EXPORT ld_future *ld_client_all_flags(ld_client *client, ld_context *ctx, unsigned options);

/* ------------------------------------------------------------------------- */
/* Data-source status                                                        */

/** Reads the data-source status, as ld_data_system_status() (offline:
 *  `valid` since the client was made, no error). @return 0; LD_EINVAL if
 *  `client` or `out` is NULL. @since 0.1.0 */
LD_EXPORT int ld_client_data_source_status(const ld_client *client, ld_data_source_status *out);

/** A status listener, as ld_data_system_status_fn with the client: it may
 *  remove listeners, add listeners, close or free the client.
 *  @since 0.1.0 */
typedef void (*ld_client_status_fn)(ld_client *client, const ld_data_source_status *status,
                                    void *arg);

/** Adds a status listener, with the rules of
 *  ld_data_system_add_status_listener() (offline: never called).
 *  @return its id (> 0, never reused); LD_EINVAL if `client` or `fn` is
 *  NULL; LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int64_t ld_client_add_status_listener(ld_client *client, ld_client_status_fn fn,
                                                void *arg);

/** Removes a status listener; safe from inside any listener. @return 0;
 *  LD_EINVAL if `client` is NULL or `id` is not a listener of it.
 *  @since 0.1.0 */
LD_EXPORT int ld_client_remove_status_listener(ld_client *client, int64_t id);

/* ------------------------------------------------------------------------- */
/* Big segment store status                                                  */

/** The status of the client's big segment store, from its last metadata
 *  read. @since 0.1.0 */
typedef struct ld_big_segment_store_status {
    bool available; /* the last read succeeded */
    bool stale;     /* it did, but the data is stale (its time is unknown or
                       older than the options' stale_after_ms) */
} ld_big_segment_store_status;

/** Reads the big segment store's status. A client without a big segment
 *  store reports it unavailable and not stale. @return 0 with `*out`;
 *  LD_EINVAL if `client` or `out` is NULL; LD_EBUSY until the first
 *  metadata read has ended (the status listeners then hear of it).
 *  @since 0.1.0 */
LD_EXPORT int ld_client_big_segment_store_status(const ld_client *client,
                                                 ld_big_segment_store_status *out);

/** A big segment status listener: called from the loop when the first
 *  metadata read ends and whenever a later one changes the status. It may
 *  remove listeners, add listeners, close or free the client.
 *  @since 0.1.0 */
typedef void (*ld_client_big_segment_status_fn)(ld_client *client,
                                                const ld_big_segment_store_status *status,
                                                void *arg);

/** Adds a big segment status listener (never called without a big segment
 *  store, nor once the client is closed). @return its id (> 0, never
 *  reused); LD_EINVAL if `client` or `fn` is NULL; LD_ENOMEM.
 *  @since 0.1.0 */
LD_EXPORT int64_t ld_client_add_big_segment_status_listener(ld_client *client,
                                                            ld_client_big_segment_status_fn fn,
                                                            void *arg);

/** Removes a big segment status listener; safe from inside any listener.
 *  @return 0; LD_EINVAL if `client` is NULL or `id` is not one of its big
 *  segment status listeners. @since 0.1.0 */
LD_EXPORT int ld_client_remove_big_segment_status_listener(ld_client *client, int64_t id);

/* ------------------------------------------------------------------------- */
/* The parts, for servers (borrowed: valid while the client lives)           */

/** The store (the options' or the client's own). NULL for NULL.
 *  @since 0.1.0 */
LD_EXPORT ld_store *ld_client_store(const ld_client *client);

/** The evaluator. NULL for NULL. @since 0.1.0 */
LD_EXPORT ld_evaluator *ld_client_evaluator(const ld_client *client);

/** The data system (add change listeners to it to stream changes), or NULL
 *  when offline and for NULL. @since 0.1.0 */
LD_EXPORT ld_data_system *ld_client_data_system(const ld_client *client);

/** LaunchDarkly's secure mode hash of `ctx` with the client's SDK key (the
 *  network configuration's), for client-side SDKs: ld_secure_mode_hash()
 *  (context.h) writes it to `out`. @return 0; LD_EINVAL if `client`,
 *  `ctx` or `out` is NULL or the client has no SDK key. Any thread that
 *  may use the client. @since 0.1.0 */
LD_EXPORT int ld_client_secure_mode_hash(const ld_client *client, const ld_context *ctx,
                                         char out[65]);

/* ------------------------------------------------------------------------- */
/* Analytics events                                                          */

/** Sends a custom event `key` (copied; valid UTF-8, not empty) for `ctx`
 *  (referenced until sent), with `data` (borrowed: referenced until sent,
 *  so it must not be modified afterwards; NULL: none). Does nothing when
 *  events are off. @return 0; LD_EINVAL (NULL client or context, a bad
 *  key); LD_ECLOSED after close; LD_EBUSY (the event buffer is full: the
 *  event was dropped); LD_ENOMEM. Loop thread. @since 0.1.0 */
LD_EXPORT int ld_client_track(ld_client *client, const char *key, ld_context *ctx, json_t *data);

/** ld_client_track() with a metric value (finite, else LD_EINVAL), for
 *  LaunchDarkly's numeric metrics. @since 0.1.0 */
LD_EXPORT int ld_client_track_metric(ld_client *client, const char *key, ld_context *ctx,
                                     json_t *data, double metric);

/** Sends an identify event for `ctx`, so that LaunchDarkly knows the
 *  context and its attributes. Does nothing when events are off.
 *  @return as ld_client_track()'s. @since 0.1.0 */
LD_EXPORT int ld_client_identify(ld_client *client, ld_context *ctx);

/** Sends what the event processor holds now, without waiting for the
 *  flush interval. @return a new reference, fulfilled with a bool: true if
 *  the events service took it all (or there was nothing to send, or events
 *  are off), false if some was dropped; rejected with LD_ECLOSED after
 *  close. NULL only if `client` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_client_flush(ld_client *client);

/** The client's event processor (borrowed; for
 *  ld_default_event_processor_stats()), NULL when events are off.
 *  @since 0.1.0 */
LD_EXPORT ld_event_processor *ld_client_event_processor(const ld_client *client);

/* ------------------------------------------------------------------------- */
/* Closing                                                                   */

/** Closes the client: its data system closes (data_system.h), its event
 *  processor sends what it holds and closes, the big
 *  segment store is no longer polled (its last status stays readable, and
 *  its status listeners are not called again); evaluations
 *  issued before complete as usual, later ones reject with LD_ECLOSED. The
 *  store is left as it is. @return a new reference, fulfilled once the
 *  data sources have stopped and the last events were sent (or given
 *  up); closing twice fulfils again. NULL only if
 *  `client` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_client_close(ld_client *client);

/** Frees the client: evaluations still pending reject with LD_ECANCELED
 *  (from the loop), the data system and its sources are freed, and so is
 *  the client's own store (not one given in the options). Safe from inside
 *  the client's listeners and the callbacks of its futures. Free the client
 *  before its base, then let the loop run (future.h's lifetime rule).
 *  NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_client_free(ld_client *client);

LD_END_DECLS

#endif /* LDASYNC_CLIENT_H */
