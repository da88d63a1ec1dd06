/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * A local events service for the tests (check_receiver.c): an evhttp
 * server on ld_test_base that records what is posted to it and answers
 * each post with the next status the test gives (202 once they run out),
 * with a Date header ("Tue, 01 Dec 2026 10:20:30 GMT"), or holds the
 * requests unanswered.
 */
#ifndef LDASYNC_CHECK_RECEIVER_H
#define LDASYNC_CHECK_RECEIVER_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/http.h>
#include <jansson.h>

#define EVR_MAX 16

/* One post as it came (the headers' values, "" when absent). */
struct evr_seen {
    char path[128], auth[128], ctype[64], schema[16], payload_id[64], encoding[32], agent[64];
    char cookie[64];
    char body[8192]; /* its first bytes, NUL-terminated */
    size_t body_len; /* all of it */
    json_t *json;    /* all of it parsed (gunzipped first for Content-Encoding: gzip), or NULL */
};

struct evr {
    struct evhttp *http;
    char url[64]; /* "http://127.0.0.1:PORT/" */
    int port;
    int statuses[EVR_MAX]; /* the answer to the i-th post */
    int nstatuses;
    struct evr_seen seen[EVR_MAX]; /* the posts (the last slot takes those beyond) */
    int n;                         /* posts seen */
    bool hold;                     /* keep the requests unanswered */
    const char *date;              /* the Date answered (NULL: the one above) */
    struct evhttp_request *held[EVR_MAX];
    int nheld;
};

extern struct evr evr;

/* Starts the service (evr zeroed first). */
void evr_start(void);
/* Answers the requests held (202). */
void evr_release_held(void);
/* The events of post `i` (borrowed): its JSON array (the test fails if
 * it is not one). */
json_t *evr_events(int i);
/* The event `i` of post `post` whose "kind" is `kind` (`i` counts those
 * only), or NULL. */
json_t *evr_event_of(int post, const char *kind, int i);
/* Answers what is held, and stops the service. */
void evr_stop(void);

/* ---- clients that send to it (the events suites' shared helpers) ---- */

#include <ldasync/ldasync.h>

#define EVR_KEY "sdk-events-key"

/* Runs what ld_test_base has ready (the service's listener stays). */
void evr_drain(void);
/* LaunchDarkly's defaults, but no diagnostics and a flush only when the
 * test asks (an hour's interval): a new configuration. */
ld_events_config *evr_config(void);
/* A client on ld_test_base, ready, with the flags of `flags` (the text of
 * ld_test_data_of()), sending events with the SDK key EVR_KEY to `uri`
 * (NULL: the service), configured by `cfg` (borrowed; NULL: evr_config()),
 * on `store` (NULL: its own), with HTTP read timeout `read_ms` (0: the
 * default). */
ld_client *evr_client(const char *flags, const ld_events_config *cfg, const char *uri,
                      ld_store *store, int64_t read_ms);
/* Frees it and runs what the loop has ready. */
void evr_client_done(ld_client *c);
/* ld_client_flush(), awaited: its bool. */
bool evr_flush(ld_client *c);
/* The client's event processor's counts. */
ld_events_stats evr_stats(ld_client *c);
/* The events of post `post` whose "kind" is `kind`. */
size_t evr_count(int post, const char *kind);

#endif /* LDASYNC_CHECK_RECEIVER_H */
