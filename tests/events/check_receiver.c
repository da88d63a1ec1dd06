/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The local events service of the tests (check_receiver.h). */
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <zlib.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "check_receiver.h"
#include "check_util.h"

struct evr evr;

static void copy_header(struct evhttp_request *req, const char *name, char *out, size_t n)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), name);
    snprintf(out, n, "%s", v ? v : "");
}

/* The body as JSON, inflated first when `gzip`; NULL if it is not. */
static json_t *parse_body(struct evbuffer *in, bool gzip)
{
    size_t len = evbuffer_get_length(in);
    const unsigned char *p = evbuffer_pullup(in, -1);
    if (!gzip)
        return json_loadb((const char *)p, len, JSON_ALLOW_NUL, NULL);
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return NULL;
    size_t cap = len * 4 + 1024, n = 0;
    char *out = malloc(cap);
    z.next_in = (unsigned char *)p;
    z.avail_in = (uInt)len;
    int rc = Z_OK;
    while (out && rc == Z_OK) {
        if (n == cap) {
            char *more = realloc(out, cap *= 2);
            if (!more) {
                free(out);
                out = NULL;
                break;
            }
            out = more;
        }
        z.next_out = (unsigned char *)out + n;
        z.avail_out = (uInt)(cap - n);
        rc = inflate(&z, Z_NO_FLUSH);
        n = cap - z.avail_out;
    }
    inflateEnd(&z);
    json_t *j = out && rc == Z_STREAM_END ? json_loadb(out, n, JSON_ALLOW_NUL, NULL) : NULL;
    free(out);
    return j;
}

static void serve(struct evhttp_request *req, void *arg)
{
    (void)arg;
    struct evr_seen *s = &evr.seen[evr.n < EVR_MAX ? evr.n : EVR_MAX - 1];
    snprintf(s->path, sizeof s->path, "%s", evhttp_request_get_uri(req));
    copy_header(req, "Authorization", s->auth, sizeof s->auth);
    copy_header(req, "Content-Type", s->ctype, sizeof s->ctype);
    copy_header(req, "X-LaunchDarkly-Event-Schema", s->schema, sizeof s->schema);
    copy_header(req, "X-LaunchDarkly-Payload-ID", s->payload_id, sizeof s->payload_id);
    copy_header(req, "Content-Encoding", s->encoding, sizeof s->encoding);
    copy_header(req, "User-Agent", s->agent, sizeof s->agent);
    copy_header(req, "Cookie", s->cookie, sizeof s->cookie);
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    s->body_len = evbuffer_get_length(in);
    size_t keep = s->body_len < sizeof s->body ? s->body_len : sizeof s->body - 1;
    evbuffer_copyout(in, s->body, keep);
    s->body[keep] = '\0';
    json_decref(s->json);
    s->json = parse_body(in, strcmp(s->encoding, "gzip") == 0);
    int status = evr.n < evr.nstatuses ? evr.statuses[evr.n] : 202;
    evr.n++;
    if (evr.hold) {
        ck_assert_int_lt(evr.nheld, EVR_MAX);
        evr.held[evr.nheld++] = req;
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Date",
                      evr.date ? evr.date : "Tue, 01 Dec 2026 10:20:30 GMT");
    evhttp_send_reply(req, status, "Answer", NULL);
}

static void forget_bodies(void)
{
    for (int i = 0; i < EVR_MAX; i++) {
        json_decref(evr.seen[i].json);
        evr.seen[i].json = NULL;
    }
}

void evr_start(void)
{
    forget_bodies();
    memset(&evr, 0, sizeof evr);
    evr.http = evhttp_new(ld_test_base);
    evr.port = ld_test_http_listen(evr.http);
    snprintf(evr.url, sizeof evr.url, "http://127.0.0.1:%d/", evr.port);
    evhttp_set_gencb(evr.http, serve, NULL);
}

void evr_release_held(void)
{
    for (int i = 0; i < evr.nheld; i++)
        evhttp_send_reply(evr.held[i], 202, "Late", NULL);
    evr.nheld = 0;
}

void evr_stop(void)
{
    evr_release_held();
    evhttp_free(evr.http);
    evr.http = NULL;
    forget_bodies();
}

json_t *evr_events(int i)
{
    ck_assert_int_lt(i, evr.n);
    json_t *j = evr.seen[i < EVR_MAX ? i : EVR_MAX - 1].json;
    ck_assert_msg(json_is_array(j), "post %d is not a JSON array: %.200s", i, evr.seen[i].body);
    return j;
}

json_t *evr_event_of(int post, const char *kind, int i)
{
    json_t *a = evr_events(post), *e;
    size_t k;
    json_array_foreach(a, k, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "kind")) ?: "", kind) == 0 && i-- == 0)
            return e;
    }
    return NULL;
}

void evr_drain(void)
{
    for (int pass = 0; pass < 1000; pass++) {
        event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
        if (event_base_get_num_events(ld_test_base, EVENT_BASE_COUNT_ACTIVE) == 0)
            return;
    }
}

ld_events_config *evr_config(void)
{
    ld_events_config *cfg = ld_events_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(ld_events_config_set_diagnostics(cfg, false, 900000), 0);
    /* Flushes when the test says: a slow run (valgrind, ASan on a busy
     * machine) must not see the 5 s timer's payload among its own. */
    ck_assert_int_eq(ld_events_config_set_flush_interval(cfg, 3600 * 1000), 0);
    return cfg;
}

ld_client *evr_client(const char *flags, const ld_events_config *cfg, const char *uri,
                      ld_store *store, int64_t read_ms)
{
    ld_client_options *o = ld_client_options_new();
    ck_assert_ptr_nonnull(o);
    json_t *data = ld_test_data_of(flags, NULL);
    ck_assert_int_eq(ld_client_options_add_initializer(o, ld_test_initializer_of(data)), 0);
    json_decref(data);
    if (store)
        ck_assert_int_eq(ld_client_options_set_store(o, store), 0);
    ld_net_config *n = ld_net_config_new(EVR_KEY);
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(ld_net_config_set_events_uri(n, uri ? uri : evr.url), 0);
    if (read_ms)
        ck_assert_int_eq(ld_net_config_set_timeouts(n, 0, read_ms, 0), 0);
    ck_assert_int_eq(ld_client_options_set_net_config(o, n), 0);
    ld_net_config_free(n);
    ld_events_config *own = cfg ? NULL : evr_config();
    ck_assert_int_eq(ld_client_options_set_events_config(o, cfg ? cfg : own), 0);
    ld_events_config_free(own);
    ld_client *c = ld_client_new(ld_test_base, o);
    ld_client_options_free(o);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(ld_client_event_processor(c));
    ld_test_await_ok(ld_client_ready(c));
    return c;
}

void evr_client_done(ld_client *c)
{
    ld_client_free(c);
    evr_drain();
}

bool evr_flush(ld_client *c)
{
    return ld_test_await_bool(ld_client_flush(c));
}

ld_events_stats evr_stats(ld_client *c)
{
    ld_events_stats st;
    ck_assert_int_eq(ld_default_event_processor_stats(ld_client_event_processor(c), &st), 0);
    return st;
}

size_t evr_count(int post, const char *kind)
{
    /* one pass (asking evr_event_of() for each index in turn was
     * quadratic: minutes for 9,000 events under ASan) */
    json_t *a = evr_events(post), *e;
    size_t k, n = 0;
    json_array_foreach(a, k, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "kind")) ?: "", kind) == 0)
            n++;
    }
    return n;
}
