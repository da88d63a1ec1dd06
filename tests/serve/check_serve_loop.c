/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * check_serve_loop.c: ldasync-serve at 10,000 flags (each with targets,
 * rules and a rollout: about 8 MB of JSON) keeps its loop: a collection
 * body is assembled in slices, other requests are answered in between, and
 * the body is byte for byte what jansson writes for the store's snapshot;
 * evalx answers are evaluated and written in slices too. Also the loop
 * probe.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "../../serve/server.h"
#include "check_suites.h"
#include "check_util.h"

enum { N_FLAGS = 10000 };

/* A flag of the shape (bench/gen-flags.py writes the same). */
static json_t *make_flag(const char *key, int i, int version)
{
    char email[64], rule_a[32], rule_b[32], salt[32];
    snprintf(email, sizeof email, "@beta-%d.example.com", i);
    snprintf(rule_a, sizeof rule_a, "rule-%d-a", i);
    snprintf(rule_b, sizeof rule_b, "rule-%d-b", i);
    snprintf(salt, sizeof salt, "salt-%d", i);
    json_t *targets = json_array();
    for (int k = 0; k < 5; k++)
        json_array_append_new(targets, json_sprintf("user-%d", i + k));
    json_t *f = json_pack(
        "{s:s, s:i, s:b, s:[s,s,s], s:i,"
        " s:{s:{s:[{s:i,s:i},{s:i,s:i},{s:i,s:i}], s:s}},"
        " s:[{s:o, s:i}], s:[],"
        " s:[{s:s, s:i, s:b, s:[{s:s, s:s, s:s, s:[s], s:b}]},"
        "    {s:s, s:b, s:{s:[{s:i,s:i},{s:i,s:i}]},"
        "     s:[{s:s, s:s, s:s, s:[s,s,s], s:b}]}],"
        " s:[], s:s, s:b, s:b, s:{s:b, s:b}}",
        "key", key, "version", version, "on", 1, "variations", "off", "on", "beta", "offVariation",
        0, "fallthrough", "rollout", "variations", "variation", 0, "weight", 50000, "variation", 1,
        "weight", 30000, "variation", 2, "weight", 20000, "bucketBy", "key", "targets", "values",
        targets, "variation", 1, "contextTargets", "rules", "id", rule_a, "variation", 2,
        "trackEvents", 0, "clauses", "contextKind", "user", "attribute", "email", "op", "endsWith",
        "values", email, "negate", 0, "id", rule_b, "trackEvents", 0, "rollout", "variations",
        "variation", 1, "weight", 60000, "variation", 2, "weight", 40000, "clauses", "contextKind",
        "user", "attribute", "country", "op", "in", "values", "fr", "de", "nl", "negate", 0,
        "prerequisites", "salt", salt, "trackEvents", 0, "clientSide", 1, "clientSideAvailability",
        "usingEnvironmentId", 1, "usingMobileKey", 1);
    ck_assert_ptr_nonnull(f);
    return f;
}

static json_t *big_data;

/* {"features": 10,000 flags and a few keys to escape, "segments": {...}},
 * made once per process. */
static const json_t *big(void)
{
    if (big_data)
        return big_data;
    json_t *features = json_object();
    char key[32];
    /* under valgrind, everything 30 times slower is sliced all the same */
    int n = getenv("LDASYNC_VALGRIND") ? N_FLAGS / 10 : N_FLAGS;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "flag-%05d", i);
        json_object_set_new(features, key, make_flag(key, i, 1));
    }
    static const char *const odd[] = {"quote\"and\\back", "caf\xc3\xa9", "tab\tnl\n", "/slash"};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++)
        json_object_set_new(features, odd[i], make_flag(odd[i], (int)i, 3));
    big_data = json_pack("{s:o, s:{s:{s:s, s:i, s:[s], s:s}}}", "features", features, "segments",
                         "s1", "key", "s1", "version", 1, "included", "u1", "salt", "s");
    ck_assert_ptr_nonnull(big_data);
    return big_data;
}

struct fix {
    ld_store *store;
    ld_evaluator *ev;
    lds_server *srv;
    int port;
    char log[8192];
};

static void log_fn(int level, const char *line, void *arg)
{
    struct fix *x = arg;
    (void)level;
    size_t at = strlen(x->log);
    snprintf(x->log + at, sizeof x->log - at, "%s\n", line);
}

static void start_with(struct fix *x, const json_t *data, int probe_ms)
{
    signal(SIGPIPE, SIG_IGN);
    memset(x, 0, sizeof *x);
    x->store = ld_test_memory_with(data);
    ck_assert_ptr_nonnull(x->store);
    x->ev = ld_test_evaluator_of(x->store);
    struct lds_server_options o = {0};
    o.bind_address = "127.0.0.1";
    o.log = log_fn;
    o.log_arg = x;
    o.log_level = LDS_LOG_DEBUG;
    o.log_level_set = 1;
    o.loop_probe_ms = probe_ms;
    x->srv = lds_server_new(ld_test_base, x->store, x->ev, &o);
    ck_assert_ptr_nonnull(x->srv);
    x->port = lds_server_port(x->srv);
}

/* At 10,000 flags, with collection bodies assembled 500 items per slice
 * (besides their ~1 ms): at least 40 passes of the loop for a body, which
 * the tests that see another request answered meanwhile need. By time
 * alone, a fast machine assembles the body of a warm cache in a pass or
 * two, fewer than a request's connect, read and answer take. */
static void start(struct fix *x)
{
    ck_assert_int_eq(setenv("LDASYNC_SERVE_SLICE_ITEMS", "500", 1), 0);
    start_with(x, big(), 0);
}

static void stop(struct fix *x)
{
    unsetenv("LDASYNC_SERVE_SLICE_ITEMS");
    ld_future *f = lds_server_close(x->srv);
    ld_test_await_ok(f);
    lds_server_free(x->srv);
    ld_test_flush();
    ld_test_done_with(x->ev, x->store);
}

struct resp {
    bool done;
    int code;
    char *body;
    size_t len;
    char etag[64];
};

static void resp_cb(struct evhttp_request *req, void *arg)
{
    struct resp *r = arg;
    r->done = true;
    if (!req)
        return;
    r->code = evhttp_request_get_response_code(req);
    struct evbuffer *b = evhttp_request_get_input_buffer(req);
    r->len = evbuffer_get_length(b);
    r->body = malloc(r->len + 1);
    ck_assert_ptr_nonnull(r->body);
    evbuffer_remove(b, r->body, r->len);
    r->body[r->len] = '\0';
    const char *e = evhttp_find_header(evhttp_request_get_input_headers(req), "ETag");
    snprintf(r->etag, sizeof r->etag, "%s", e ? e : "");
}

/* Sends GET `path` on a connection of its own (freed by *conn's owner). */
static void send_get(struct fix *x, struct evhttp_connection **conn, const char *path,
                     struct resp *r)
{
    memset(r, 0, sizeof *r);
    *conn = evhttp_connection_base_new(ld_test_base, NULL, "127.0.0.1", (ev_uint16_t)x->port);
    ck_assert_ptr_nonnull(*conn);
    struct evhttp_request *req = evhttp_request_new(resp_cb, r);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host", "localhost");
    ck_assert_int_eq(evhttp_make_request(*conn, req, EVHTTP_REQ_GET, path), 0);
}

static void wait_for(struct resp *r)
{
    while (!r->done)
        event_base_loop(ld_test_base, EVLOOP_ONCE);
}

static void get(struct fix *x, const char *path, struct resp *r)
{
    struct evhttp_connection *c;
    send_get(x, &c, path, r);
    wait_for(r);
    evhttp_connection_free(c);
    ck_assert_int_eq(r->code, 200);
}

/* jansson's compact text of `j` (freed by the caller). */
static char *dump(const json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* The body the server answered before collections were assembled from
 * pieces, for the store's snapshots now: "all" (latest-all), "flags" or
 * "segments". */
static char *expected(struct fix *x, const char *which)
{
    ld_future *ff = ld_store_all(x->store, ld_kind_features());
    ld_future *fs = ld_store_all(x->store, ld_kind_segments());
    ld_test_await_ok(ld_future_ref(ff));
    ld_test_await_ok(ld_future_ref(fs));
    char *f = dump(ld_future_json(ff)), *s = dump(ld_future_json(fs)), *out;
    if (strcmp(which, "all") == 0) {
        size_t n = strlen(f) + strlen(s) + 32;
        out = malloc(n);
        ck_assert_ptr_nonnull(out);
        snprintf(out, n, "{\"flags\":%s,\"segments\":%s}", f, s);
    } else {
        out = strdup(which[0] == 'f' ? f : s);
    }
    free(f);
    free(s);
    ld_future_unref(ff);
    ld_future_unref(fs);
    return out;
}

/* Asserts the body of `path`; @return its ETag (freed by the caller). */
static char *expect_body(struct fix *x, const char *path, const char *which)
{
    struct resp r;
    get(x, path, &r);
    char *want = expected(x, which);
    ck_assert_uint_eq(r.len, strlen(want));
    ck_assert_msg(memcmp(r.body, want, r.len) == 0, "%s: the body differs", path);
    ck_assert_uint_eq(strlen(r.etag), 18);
    free(want);
    free(r.body);
    return strdup(r.etag);
}

/* The order in which the server answered: the position of `path`'s line
 * in its log (at debug level, a line per answer). */
static long answered_at(const struct fix *x, const char *path)
{
    char pat[128];
    snprintf(pat, sizeof pat, "200 %s ", path);
    const char *p = strstr(x->log, pat);
    ck_assert_msg(p != NULL, "no answer to %s in the log:\n%.2000s", path, x->log);
    return p - x->log;
}

/* ThreadSanitizer slows the loop as valgrind does (see below). */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

/* Asks for `path` and, once the server has it (it waits for the store),
 * for /status on another connection: /status is answered while the body
 * is assembled, before it. Under valgrind (LDASYNC_VALGRIND) and
 * ThreadSanitizer only that both are answered: the slices are timed (~2 ms
 * each), and the tool's slowdown of the loop around them decides which
 * answer comes first (TSan on a busy CI machine answered the body first,
 * and the log in the message was too long for Check, which aborted). */
static void expect_status_first(struct fix *x, const char *path)
{
    struct lds_server_stats st;
    struct evhttp_connection *c1, *c2;
    struct resp big_r, status_r;
    x->log[0] = '\0';
    send_get(x, &c1, path, &big_r);
    do {
        event_base_loop(ld_test_base, EVLOOP_ONCE);
        lds_server_stats(x->srv, &st);
    } while (st.pending == 0 && !big_r.done);
    send_get(x, &c2, "/status", &status_r);
    wait_for(&status_r);
    wait_for(&big_r);
    ck_assert_int_eq(status_r.code, 200);
    ck_assert_int_eq(big_r.code, 200);
    /* (a Check message is at most 4 KiB: the log is cut short in it) */
    if (!getenv("LDASYNC_VALGRIND") && !UNDER_TSAN)
        ck_assert_msg(answered_at(x, "/status") < answered_at(x, path),
                      "%s was answered before /status:\n%.2000s", path, x->log);
    evhttp_connection_free(c1);
    evhttp_connection_free(c2);
    free(big_r.body);
    free(status_r.body);
}

START_TEST(test_a_large_collection_is_assembled_while_others_are_answered)
{
    struct fix x;
    start(&x);
    expect_status_first(&x, "/sdk/latest-all");
    expect_status_first(&x, "/sdk/latest-flags");
    stop(&x);
}
END_TEST

START_TEST(test_assembled_bodies_are_jansson_s_text)
{
    struct fix x;
    start(&x);
    char *all0 = expect_body(&x, "/sdk/latest-all", "all");
    char *flags0 = expect_body(&x, "/sdk/latest-flags", "flags");
    free(expect_body(&x, "/sdk/latest-segments", "segments"));
    /* one flag changed, one deleted, one added: the others' texts are kept */
    json_t *f = make_flag("flag-00042", 42, 2);
    ld_test_await_ok(ld_store_upsert(x.store, ld_kind_features(), f));
    json_decref(f);
    ld_test_await_ok(ld_store_delete(x.store, ld_kind_features(), "flag-00007", 5));
    f = make_flag("new-flag", 1, 1);
    ld_test_await_ok(ld_store_upsert(x.store, ld_kind_features(), f));
    json_decref(f);
    char *all1 = expect_body(&x, "/sdk/latest-all", "all");
    char *flags1 = expect_body(&x, "/sdk/latest-flags", "flags");
    ck_assert_str_ne(all0, all1);
    ck_assert_str_ne(flags0, flags1);
    ck_assert_str_ne(all1, flags1);
    /* a whole new set of equal objects (a file read again): the first
     * bodies again, with their ETags */
    ld_test_await_ok(ld_store_init(x.store, big()));
    char *flags2 = expect_body(&x, "/sdk/latest-flags", "flags");
    char *all2 = expect_body(&x, "/sdk/latest-all", "all");
    ck_assert_str_eq(all0, all2);
    ck_assert_str_eq(flags0, flags2);
    free(all0);
    free(all1);
    free(all2);
    free(flags0);
    free(flags1);
    free(flags2);
    stop(&x);
}
END_TEST

/* Two requests wait for one assembling; the first goes away: the other
 * is answered. */
START_TEST(test_a_waiting_request_that_goes_away_leaves_the_others)
{
    struct fix x;
    start(&x);
    struct lds_server_stats st;
    struct evhttp_connection *c1, *c2;
    struct resp r1, r2;
    send_get(&x, &c1, "/sdk/latest-all", &r1);
    send_get(&x, &c2, "/sdk/latest-all", &r2);
    do {
        event_base_loop(ld_test_base, EVLOOP_ONCE);
        lds_server_stats(x.srv, &st);
    } while (st.pending < 2 && !r2.done);
    evhttp_connection_free(c1);
    wait_for(&r2);
    ck_assert_int_eq(r2.code, 200);
    ck_assert_uint_gt(r2.len, getenv("LDASYNC_VALGRIND") ? 800000 : 8000000);
    evhttp_connection_free(c2);
    free(r2.body);
    stop(&x);
}
END_TEST

/* {"kind":"user","key":"u@x","email":"a@beta-7.example.com","country":"fr"} */
#define EVALX_CTX                                                                                  \
    "/sdk/evalx/env/contexts/"                                                                     \
    "eyJraW5kIjoidXNlciIsImtleSI6InVAeCIsImVtYWlsIjoiYUBiZXRhLTcuZXhhbXBsZS5jb20iLCJjb3VudHJ5Ijoi" \
    "ZnIifQ"

/* Asserts that `body` is the evalx answer for the store's flags: each
 * flag's value and variation as ld_evaluator_all_flags() says, and no
 * other key. */
static void expect_evalx(struct fix *x, const struct resp *r)
{
    ck_assert_int_eq(r->code, 200);
    json_t *got = json_loadb(r->body, r->len, 0, NULL);
    ck_assert_msg(got != NULL, "the evalx body is not JSON");
    ld_context *ctx =
        ld_test_ctx_of("{'kind':'user','key':'u@x','email':'a@beta-7.example.com','country':'fr'}");
    ld_future *f =
        ld_test_fulfilled(ld_evaluator_all_flags(x->ev, ctx, LD_ALL_FLAGS_CLIENT_SIDE_ONLY));
    json_t *want = ld_future_json(f), *meta = json_object_get(want, "$flagsState");
    ck_assert_uint_eq(json_object_size(got), json_object_size(want) - 2);
    const char *key;
    json_t *v;
    json_object_foreach(got, key, v)
    {
        json_t *m = json_object_get(meta, key);
        if (!json_equal(json_object_get(v, "value"), json_object_get(want, key)) ||
            !json_equal(json_object_get(v, "variation"), json_object_get(m, "variation")))
            ck_abort_msg("evalx: flag %s differs", key);
    }
    ld_future_unref(f);
    ld_context_unref(ctx);
    json_decref(got);
}

/* A stream's put at 10,000 flags is assembled in slices too: /status is
 * answered before the stream starts, and the put is the store's data. */
static void chunk_cb(struct evhttp_request *req, void *arg)
{
    evbuffer_add_buffer(arg, evhttp_request_get_input_buffer(req));
}

static void stream_done_cb(struct evhttp_request *req, void *arg)
{
    (void)req;
    (void)arg;
}

START_TEST(test_a_stream_s_put_is_assembled_while_others_are_answered)
{
    struct fix x;
    start(&x);
    for (int round = 0; round < 2; round++) {
        if (round == 1) { /* a change: the put is assembled again */
            json_t *f = make_flag("flag-00042", 42, 2);
            ld_test_await_ok(ld_store_upsert(x.store, ld_kind_features(), f));
            json_decref(f);
        }
        x.log[0] = '\0';
        char *all = expected(&x, "all");
        struct evbuffer *got = evbuffer_new();
        ck_assert_ptr_nonnull(got);
        struct evhttp_connection *c1 =
            evhttp_connection_base_new(ld_test_base, NULL, "127.0.0.1", (ev_uint16_t)x.port);
        struct evhttp_request *req = evhttp_request_new(stream_done_cb, got);
        ck_assert_ptr_nonnull(req);
        evhttp_request_set_chunked_cb(req, chunk_cb);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Host", "localhost");
        ck_assert_int_eq(evhttp_make_request(c1, req, EVHTTP_REQ_GET, "/all"), 0);
        struct lds_server_stats st;
        do {
            event_base_loop(ld_test_base, EVLOOP_ONCE);
            lds_server_stats(x.srv, &st);
        } while (st.streams == 0);
        struct evhttp_connection *c2;
        struct resp status_r;
        send_get(&x, &c2, "/status", &status_r);
        wait_for(&status_r);
        ck_assert_int_eq(status_r.code, 200);
        static const char head[] = "event: put\ndata: {\"path\":\"/\",\"data\":";
        size_t want = strlen(head) + strlen(all) + 3;
        while (evbuffer_get_length(got) < want)
            event_base_loop(ld_test_base, EVLOOP_ONCE);
        if (!getenv("LDASYNC_VALGRIND"))
            ck_assert_msg(answered_at(&x, "/status") < answered_at(&x, "/all"),
                          "/all was answered before /status:\n%s", x.log);
        const char *put = (const char *)evbuffer_pullup(got, -1);
        ck_assert_msg(memcmp(put, head, strlen(head)) == 0 &&
                          memcmp(put + strlen(head), all, strlen(all)) == 0 &&
                          memcmp(put + strlen(head) + strlen(all), "}\n\n", 3) == 0,
                      "the put is not the store's data");
        evhttp_connection_free(c1);
        evhttp_connection_free(c2);
        evbuffer_free(got);
        free(status_r.body);
        free(all);
        do {
            event_base_loop(ld_test_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
            lds_server_stats(x.srv, &st);
        } while (st.streams > 0 || st.connections > 0);
    }
    stop(&x);
}
END_TEST

/* Applies the stream's events in `text` (a put, then patches and deletes)
 * to `flags`, as an SDK does (an item's version must be newer). @return
 * whether the text held a whole put. */
static bool apply_stream(const char *text, json_t *flags)
{
    bool put = false;
    for (const char *at = text; (at = strstr(at, "event: ")) != NULL;) {
        const char *data = strstr(at, "\ndata: "), *end = data ? strstr(data, "\n\n") : NULL;
        if (!end)
            break;
        json_error_t err;
        json_t *d = json_loadb(data + 7, (size_t)(end - data - 7), 0, &err);
        ck_assert_msg(d != NULL, "a bad event: %s", err.text);
        const char *path = json_string_value(json_object_get(d, "path"));
        if (strncmp(at, "event: put", 10) == 0) {
            json_object_clear(flags);
            json_object_update(flags, json_object_get(json_object_get(d, "data"), "flags"));
            put = true;
        } else if (put && path && strncmp(path, "/flags/", 7) == 0) {
            json_t *old = json_object_get(flags, path + 7);
            json_t *item = json_object_get(d, "data");
            json_int_t v = item ? json_integer_value(json_object_get(item, "version"))
                                : json_integer_value(json_object_get(d, "version"));
            if (!old || json_integer_value(json_object_get(old, "version")) < v) {
                if (item)
                    json_object_set(flags, path + 7, item);
                else
                    json_object_set_new(flags, path + 7,
                                        json_pack("{s:I, s:b}", "version", v, "deleted", 1));
            }
        }
        json_decref(d);
        at = end;
    }
    return put;
}

/* A stream opened while changes come, before, during and after its put
 * is assembled and sent (a change every 8 passes, fewer than the bound
 * queued): it is not dropped, and once applied, its events make the
 * store's flags. */
START_TEST(test_a_stream_opened_while_changes_come_ends_like_the_store)
{
    struct fix x;
    start(&x);
    struct evbuffer *got = evbuffer_new();
    struct evhttp_connection *c1 =
        evhttp_connection_base_new(ld_test_base, NULL, "127.0.0.1", (ev_uint16_t)x.port);
    struct evhttp_request *req = evhttp_request_new(stream_done_cb, got);
    evhttp_request_set_chunked_cb(req, chunk_cb);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host", "localhost");
    ck_assert_int_eq(evhttp_make_request(c1, req, EVHTTP_REQ_GET, "/all"), 0);
    json_t *flags = json_object();
    int version = 10, changes = 0;
    /* a change at each pass, until the put came and a few after */
    for (int after = 0, pass = 0; after < 20 && changes < 300; pass++) {
        event_base_loop(ld_test_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        if (pass % 8 != 0)
            continue; /* a change every 8 passes: fewer than the bound queued */
        char key[32];
        snprintf(key, sizeof key, "flag-%05d", (changes * 37) % 50);
        /* as the app does: the store (the memory store applies it within
         * the call), then the server; one pass of the loop each */
        if (changes % 3 == 2) {
            ld_future_unref(ld_store_delete(x.store, ld_kind_features(), key, version));
            lds_server_changed(x.srv, ld_kind_features(), key, version++, NULL);
        } else {
            json_t *f = make_flag(key, changes, version);
            ld_future_unref(ld_store_upsert(x.store, ld_kind_features(), f));
            lds_server_changed(x.srv, ld_kind_features(), key, version++, f);
            json_decref(f);
        }
        changes++;
        event_base_loop(ld_test_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        if (evbuffer_search(got, "\n\n", 2, NULL).pos >= 0)
            after++; /* the put came */
    }
    /* the rest of the put, and the last events */
    for (int i = 0; i < 1000000 && evbuffer_search(got, "\n\n", 2, NULL).pos < 0; i++)
        event_base_loop(ld_test_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    for (int i = 0; i < 200; i++)
        event_base_loop(ld_test_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    evbuffer_add(got, "", 1);
    ck_assert_msg(apply_stream((const char *)evbuffer_pullup(got, -1), flags),
                  "no put after %d changes: %.200s\n%s", changes,
                  (const char *)evbuffer_pullup(got, -1), x.log);
    ld_future *ff = ld_store_all(x.store, ld_kind_features());
    ld_test_await_ok(ld_future_ref(ff));
    /* the store lists no deleted flag: neither may the stream */
    const char *k;
    json_t *v, *tmp;
    json_object_foreach_safe(flags, tmp, k, v) if (json_is_true(json_object_get(v, "deleted")))
        json_object_del(flags, k);
    ck_assert_msg(json_equal(flags, ld_future_json(ff)),
                  "after %d changes, the stream's flags (%zu) are not the store's (%zu)", changes,
                  json_object_size(flags), json_object_size(ld_future_json(ff)));
    ld_future_unref(ff);
    json_decref(flags);
    evhttp_connection_free(c1);
    evbuffer_free(got);
    stop(&x);
}
END_TEST

/* At 10,000 flags an evalx answer takes more than a slice to evaluate and
 * to write: /status is answered meanwhile, and the body is whole. */
START_TEST(test_evalx_is_made_while_others_are_answered)
{
    struct fix x;
    start(&x);
    expect_status_first(&x, EVALX_CTX);
    struct resp r;
    get(&x, EVALX_CTX, &r);
    expect_evalx(&x, &r);
    free(r.body);
    stop(&x);
}
END_TEST

/* server.h: lds_server_warm() makes the latest-all body and compiles
 * every flag ahead: the first latest-all is then answered from the cache,
 * and the first evalx compiles nothing. Closing or freeing the server
 * while it warms stops it (ASan, valgrind: nothing left behind). */
START_TEST(test_warm_makes_the_first_answers_ahead)
{
    struct fix x;
    start(&x);
    lds_server_warm(x.srv);
    struct lds_server_stats st;
    struct ld_evaluator_stats es;
    size_t n = json_object_size(json_object_get(big(), "features"));
    do {
        event_base_loop(ld_test_base, EVLOOP_ONCE);
        lds_server_stats(x.srv, &st);
        ck_assert_int_eq(ld_evaluator_stats(x.ev, &es), 0);
    } while (st.serializations < 1 || es.flags < n);
    ck_assert_uint_eq(st.serializations, 1);
    free(expect_body(&x, "/sdk/latest-all", "all"));
    lds_server_stats(x.srv, &st);
    ck_assert_uint_eq(st.serializations, 1);
    stop(&x);
    for (int how = 0; how < 3; how++) {
        start(&x);
        lds_server_warm(x.srv);
        if (how == 1)
            lds_server_warm(x.srv); /* again: the first is let go of */
        for (int i = 0; i < how * 3; i++)
            event_base_loop(ld_test_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        if (how == 2) {
            lds_server_free(x.srv); /* freed while it warms */
            ld_test_flush();
            ld_test_done_with(x.ev, x.store);
        } else {
            stop(&x); /* closed while it warms */
        }
    }
    lds_server_warm(NULL);
}
END_TEST

static json_t *small_data;

/* 50 flags of the same shape. */
static const json_t *small(void)
{
    if (small_data)
        return small_data;
    json_t *features = json_object();
    char key[32];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "flag-%05d", i);
        json_object_set_new(features, key, make_flag(key, i, 1));
    }
    small_data = json_pack("{s:o, s:{}}", "features", features, "segments");
    ck_assert_ptr_nonnull(small_data);
    return small_data;
}

/* A server whose states and bodies are made 3 flags a slice. */
static void start_sliced(struct fix *x)
{
    ck_assert_int_eq(setenv("LDASYNC_EVAL_SLICE_FLAGS", "3", 1), 0);
    start_with(x, small(), 0);
    unsetenv("LDASYNC_EVAL_SLICE_FLAGS");
}

/* Runs the loop until the server has `n` requests waiting, `w` of them
 * for bodies being written. */
static void until_pending(struct fix *x, uint64_t n, uint64_t w)
{
    struct lds_server_stats st;
    do {
        event_base_loop(ld_test_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        lds_server_stats(x->srv, &st);
    } while (st.pending < n || st.evalx_writing < w);
}

/* Three evalx bodies in slices at once: each is whole and right. */
START_TEST(test_evalx_bodies_in_slices_are_whole)
{
    struct fix x;
    start_sliced(&x);
    struct evhttp_connection *c[3];
    struct resp r[3];
    for (int i = 0; i < 3; i++)
        send_get(&x, &c[i], i == 1 ? EVALX_CTX "?withReasons=true" : EVALX_CTX, &r[i]);
    for (int i = 0; i < 3; i++) {
        wait_for(&r[i]);
        expect_evalx(&x, &r[i]);
        ck_assert(i != 1 || strstr(r[i].body, "\"reason\":{\"kind\":") != NULL);
        evhttp_connection_free(c[i]);
        free(r[i].body);
    }
    stop(&x);
}
END_TEST

/* A client that goes away while its body is written in slices: the
 * others are answered, and nothing waits any more. */
START_TEST(test_evalx_client_gone_while_its_body_is_written)
{
    for (uint64_t writing = 0; writing < 4; writing++) {
        struct fix x;
        start_sliced(&x);
        struct evhttp_connection *c1, *c2;
        struct resp r1, r2;
        send_get(&x, &c1, EVALX_CTX, &r1);
        send_get(&x, &c2, EVALX_CTX, &r2);
        /* gone while its state is evaluated, or while its body is written;
         * 2, 3: right after the last slice of the bodies (its answer sent
         * or not yet), with no pass of the loop in between or one */
        until_pending(&x, 2 - (writing > 0), writing > 0);
        if (writing >= 2) {
            struct lds_server_stats st;
            do {
                event_base_loop(ld_test_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
                lds_server_stats(x.srv, &st);
            } while (st.evalx_writing > 0);
            if (writing == 3)
                event_base_loop(ld_test_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        }
        evhttp_connection_free(c1);
        wait_for(&r2);
        expect_evalx(&x, &r2);
        evhttp_connection_free(c2);
        free(r2.body);
        free(r1.body); /* answered before it went away (2, 3), or NULL */
        struct lds_server_stats st;
        for (int i = 0; i < 1000; i++) {
            lds_server_stats(x.srv, &st);
            if (st.pending == 0 && st.connections == 0)
                break;
            event_base_loop(ld_test_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        }
        ck_assert_uint_eq(st.pending, 0);
        ck_assert_uint_eq(st.connections, 0);
        ck_assert_uint_eq(st.evalx_writing, 0);
        stop(&x);
    }
}
END_TEST

/* Closed, then freed, with evalx bodies being written: the waiting
 * requests get 503; nothing is left behind (ASan, valgrind). */
START_TEST(test_close_and_free_while_evalx_bodies_are_written)
{
    for (int free_at_once = 0; free_at_once < 2; free_at_once++) {
        struct fix x;
        start_sliced(&x);
        struct evhttp_connection *c1, *c2;
        struct resp r1, r2;
        send_get(&x, &c1, EVALX_CTX, &r1);
        send_get(&x, &c2, EVALX_CTX, &r2);
        until_pending(&x, 1, 1);
        ld_future *closed = lds_server_close(x.srv);
        if (free_at_once) {
            /* freed before the loop sends anything */
            lds_server_free(x.srv);
            ld_future_unref(closed);
            ld_test_flush();
            evhttp_connection_free(c1);
            evhttp_connection_free(c2);
        } else {
            wait_for(&r1);
            wait_for(&r2);
            ck_assert_int_eq(r1.code, 503);
            ck_assert_int_eq(r2.code, 503);
            ld_test_await_ok(closed);
            lds_server_free(x.srv);
            evhttp_connection_free(c1);
            evhttp_connection_free(c2);
        }
        free(r1.body);
        free(r2.body);
        ld_test_flush();
        ld_test_done_with(x.ev, x.store);
    }
}
END_TEST

static void nothing_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* server.h: with loop_probe_ms, the probe counts (lds_server_probe(),
 * /status "loop"); without, there is none. Closing the server stops it. */
START_TEST(test_loop_probe)
{
    struct fix x;
    start_with(&x, small(), 0);
    ck_assert_ptr_null(lds_server_probe(x.srv));
    struct resp r;
    get(&x, "/status", &r);
    ck_assert_ptr_null(strstr(r.body, "\"loop\""));
    free(r.body);
    stop(&x);
    start_with(&x, small(), 1);
    const struct lds_probe_stats *ps = lds_server_probe(x.srv);
    ck_assert_ptr_nonnull(ps);
    while (ps->ticks < 5)
        event_base_loop(ld_test_base, EVLOOP_ONCE);
    uint64_t late = 0, cpu = 0;
    for (int i = 0; i < LDS_PROBE_BUCKETS; i++) {
        late += ps->late[i];
        cpu += ps->cpu[i];
    }
    ck_assert_uint_eq(late, ps->ticks);
    ck_assert_uint_eq(cpu, ps->ticks);
    get(&x, "/status", &r);
    json_t *j = json_loadb(r.body, r.len, 0, NULL);
    json_t *loop = json_object_get(j, "loop");
    ck_assert_int_eq(json_integer_value(json_object_get(loop, "periodMs")), 1);
    ck_assert_int_ge(json_integer_value(json_object_get(loop, "ticks")), 5);
    ck_assert_uint_eq(json_array_size(json_object_get(loop, "late")), LDS_PROBE_BUCKETS);
    ck_assert_uint_eq(json_array_size(json_object_get(loop, "boundsMs")), LDS_PROBE_BUCKETS - 1);
    json_decref(j);
    free(r.body);
    /* closed, the server's probe stops: no timer runs on for it */
    ld_test_await_ok(lds_server_close(x.srv));
    uint64_t ticks = ps->ticks;
    struct event *later = evtimer_new(ld_test_base, nothing_cb, NULL);
    ck_assert_ptr_nonnull(later);
    struct timeval ms20 = {0, 20000};
    ck_assert_int_eq(evtimer_add(later, &ms20), 0);
    while (evtimer_pending(later, NULL))
        event_base_loop(ld_test_base, EVLOOP_ONCE);
    event_free(later);
    ck_assert_uint_eq(ps->ticks, ticks);
    stop(&x);
}
END_TEST

static void free_big(void)
{
    json_decref(big_data);
    big_data = NULL;
    json_decref(small_data);
    small_data = NULL;
}

Suite *ld_suite_serve_loop(void)
{
    Suite *s = suite_create("serve_loop");
    TCase *tc = tcase_create("10k");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, NULL, free_big);
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_a_large_collection_is_assembled_while_others_are_answered);
    tcase_add_test(tc, test_assembled_bodies_are_jansson_s_text);
    tcase_add_test(tc, test_a_waiting_request_that_goes_away_leaves_the_others);
    tcase_add_test(tc, test_evalx_is_made_while_others_are_answered);
    tcase_add_test(tc, test_a_stream_s_put_is_assembled_while_others_are_answered);
    tcase_add_test(tc, test_a_stream_opened_while_changes_come_ends_like_the_store);
    tcase_add_test(tc, test_warm_makes_the_first_answers_ahead);
    suite_add_tcase(s, tc);
    tc = tcase_create("slices");
    tcase_add_unchecked_fixture(tc, NULL, free_big);
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_evalx_bodies_in_slices_are_whole);
    tcase_add_test(tc, test_evalx_client_gone_while_its_body_is_written);
    tcase_add_test(tc, test_close_and_free_while_evalx_bodies_are_written);
    tcase_add_test(tc, test_loop_probe);
    suite_add_tcase(s, tc);
    return s;
}
