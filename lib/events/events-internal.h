/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the analytics events' internal parts (lib/events).
 */
#ifndef LDASYNC_EVENTS_INTERNAL_H
#define LDASYNC_EVENTS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ldasync/future.h>
#include <ldasync/network.h>

struct event_base;

/* ---- delivery (sender.c) --------------------------------------------------
 *
 * Posts payloads to LaunchDarkly's events service as its SDKs do: analytics
 * to {events}/bulk with X-LaunchDarkly-Event-Schema: 4 and a payload ID
 * (a UUID, the same on the retry), diagnostics to {events}/diagnostic
 * without them; the headers of every request to LaunchDarkly and
 * Content-Type: application/json; Content-Encoding: gzip for a body the
 * caller compressed. A network error or a recoverable status (400, 408,
 * 429, 5xx) is retried once after `retry_ms`; a 413 drops that payload
 * only; any other status of an analytics post stops all sending (401 and
 * 403 above all): later posts are dropped at once (a diagnostic post's
 * does not, as LaunchDarkly's SDKs do). The Date header of each 2xx answer
 * is kept: the server's time, for the debug events' cutoff. A relay's
 * post (what an SDK posted to ldasync-serve) carries only Authorization
 * (ours, unless the SDK's is passed) and the lines given, is sent also
 * once analytics stopped, and stops nothing. Loop thread only.
 */

struct ld__ev_sender;

enum ld__ev_payload { LD__EV_ANALYTICS, LD__EV_DIAGNOSTIC, LD__EV_RELAY };

/* A sender for `cfg` (what it needs is copied); `retry_ms` <= 0: 1000.
 * @return NULL without memory, or when libcurl could not be set up. */
struct ld__ev_sender *ld__ev_sender_new(struct event_base *base, const ld_net_config *cfg,
                                        int64_t retry_ms);

/* Posts `body` (`len` bytes, taken: freed with ld__free() by the sender on
 * every path), gzip-compressed by the caller when `gzip`, to /bulk
 * (LD__EV_ANALYTICS) or /diagnostic (LD__EV_DIAGNOSTIC). @return a new
 * reference, fulfilled with a bool: true once the service took it (2xx),
 * false when it was dropped (after the retry, a 413, or sending stopped);
 * rejected with LD_ENOMEM, or LD_ECANCELED when the sender is freed first.
 * NULL only for a NULL sender. */
ld_future *ld__ev_sender_post(struct ld__ev_sender *s, enum ld__ev_payload kind, char *body,
                              size_t len, bool gzip);

/* Posts `body` (taken, as above) to {events}`path` with the header lines
 * `lines` (NULL-terminated; copied) after those of every request to
 * LaunchDarkly, or for LD__EV_RELAY instead of them (see above). The
 * future is as ld__ev_sender_post()'s; NULL for a NULL sender or path. */
ld_future *ld__ev_sender_send(struct ld__ev_sender *s, enum ld__ev_payload kind, const char *path,
                              const char *const *lines, char *body, size_t len);

/* True once a status turned sending off. */
bool ld__ev_sender_stopped(const struct ld__ev_sender *s);

/* The Date of the last 2xx answer, in epoch ms; 0 before any. */
int64_t ld__ev_sender_server_time(const struct ld__ev_sender *s);

/* Posts not over yet (for tests and close). */
size_t ld__ev_sender_pending(const struct ld__ev_sender *s);

/* Frees the sender: posts under way are abandoned and their futures
 * rejected with LD_ECANCELED (from the loop). NULL-safe. */
void ld__ev_sender_free(struct ld__ev_sender *s);

#endif /* LDASYNC_EVENTS_INTERNAL_H */
