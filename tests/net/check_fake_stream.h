/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * A fake LaunchDarkly stream for the network suites (check_streaming.c,
 * check_network_attack.c): an evhttp server on the test's loop that speaks
 * the protocol (GET /all, server-sent events over a chunked response) and
 * records the request's headers, with knobs for statuses, content types,
 * held and ended responses; and the client-side helpers the suites share.
 * F is reset by fake_up() (a checked fixture), freed by fake_down().
 */
#ifndef LDASYNC_CHECK_FAKE_STREAM_H
#define LDASYNC_CHECK_FAKE_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/http.h>

#include <ldasync/fdv2.h>
#include <ldasync/network.h>

#define KEY "sdk-0123456789abcdef"

#define PUT1                                                                                       \
    "event: put\ndata: {\"path\":\"/\",\"data\":{\"flags\":{\"f1\":{\"key\":\"f1\",\"version\":3," \
    "\"on\":true}},\"segments\":{\"s1\":{\"key\":\"s1\",\"version\":2}}}}\n\n"

struct fake {
    struct evhttp *http;
    int port;
    char url[64];
    int connects; /* requests to /all */
    char uri[512], auth[256], agent[128], tags[256], wrapper[128], instance[64], accept[64],
        cache[64];
    int status;          /* the answer's status (200) */
    const char *ctype;   /* its Content-Type ("text/event-stream") */
    bool hold;           /* take the request and never answer */
    bool end_at_once;    /* end the response after `initial` */
    const char *initial; /* sent as the stream starts */
    struct evhttp_request *live;
    struct evhttp_request *held;
    /* the first `bad` connections get these instead (0 / NULL: as above) */
    int bad, bad_status;
    const char *bad_initial, *bad_ctype;
    const char *big_header;
};

extern struct fake F;

/* The server's request callback (for another evhttp, e.g. over TLS). */
void fake_serve(struct evhttp_request *req, void *arg);
/* Bytes on the open stream; a string; the stream ended cleanly. */
void fake_send(const char *bytes, size_t n);
void fake_sends(const char *s);
void fake_end(void);
/* The fixture: the test's loop (ld_test_setup()) and the server; its end. */
void fake_up(void);
void fake_down(void);

/* A configuration for the fake (KEY, its URL, reconnections within 50 ms). */
ld_net_config *fake_config(void);
/* A streaming synchronizer of `c` (freed). */
ld_synchronizer *stream_new(ld_net_config *c);
/* Runs the loop until *flag >= want (asserted). */
void run_until(const int *flag, int want);
/* Runs the loop for about `ms` ms. */
void run_ms(int ms);
/* Runs what is ready (the fake keeps events added: no ld_test_flush()). */
void settle(void);
/* The next update's future, done (release it). */
ld_future *next_done(ld_synchronizer *s);
/* The next update, which must have `state`. */
ld_future *expect_update(ld_synchronizer *s, enum ld_data_source_state state);
/* The next update, an error of `kind` and `status` whose message holds
 * `in_msg` (NULL: any). */
void expect_error(ld_synchronizer *s, enum ld_data_source_state state,
                  enum ld_data_source_error_kind kind, int status, const char *in_msg);
/* The next update, valid, with a change set of `intent` and `n` changes. */
ld_future *expect_changes(ld_synchronizer *s, enum ld_fdv2_intent intent, size_t n);
/* Change `i` of a valid update's change set. */
const ld_fdv2_change *change_of(ld_future *f, size_t i);

#endif
