/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * check_serve_e2e.c: ldasync-serve end to end, through the program's own
 * wiring (serve/app.c: memory store, data system with the file initializer
 * and synchronizer, evaluator, server): data files in a mkdtemp directory,
 * watched with inotify as in production, the app on a free loopback port,
 * driven with libevent's HTTP client.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/thread.h>

#include "../../serve/app.h"
#include "check_suites.h"
#include "check_util.h"
#include "events/check_receiver.h"

#define KEY "sdk-e2e-key"
#define B ld_test_base

/* ---- the fixture: a directory, a data file, the app ------------------------------- */

struct e2e {
    char dir[64];
    char path[512];
    const char *paths[1];
    lds_app *app;
    int port;
    struct evhttp_connection *conn;
    char log[16384];
};

static struct e2e g; /* one test at a time */

static void e2e_setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    ck_assert_int_eq(evthread_use_pthreads(), 0); /* before event_base_new(), as main.c */
    ld_test_setup();
    memset(&g, 0, sizeof g);
    strcpy(g.dir, "/tmp/ldasync-e2e-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g.dir));
    snprintf(g.path, sizeof g.path, "%s/flags.json", g.dir);
    g.paths[0] = g.path;
}

static void e2e_teardown(void)
{
    ld_test_teardown();
    DIR *d = opendir(g.dir);
    if (d) {
        struct dirent *e;
        char p[600];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", g.dir, e->d_name);
                unlink(p);
            }
        }
        closedir(d);
    }
    rmdir(g.dir);
}

/* Writes `text` (' for ") to the data file as editors do: a temporary file
 * renamed into place. */
static void write_data(const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/.flags.json.tmp", g.dir);
    FILE *f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    for (const char *p = text; *p; p++)
        fputc(*p == '\'' ? '"' : *p, f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(rename(tmp, g.path), 0);
}

static void log_fn(int level, const char *line, void *arg)
{
    (void)arg;
    size_t n = strlen(g.log);
    if (n + 1 < sizeof g.log)
        snprintf(g.log + n, sizeof g.log - n, "[%s] %s\n", lds_log_level_name(level), line);
}

static void app_start(void)
{
    struct lds_app_options o = {0};
    o.paths = g.paths;
    o.n_paths = 1;
    o.server.bind_address = "127.0.0.1";
    o.server.port = 0;
    o.server.sdk_key = KEY;
    o.server.log = log_fn;
    o.server.log_level = LDS_LOG_INFO;
    o.server.log_level_set = 1;
    g.app = lds_app_new(B, &o);
    ck_assert_ptr_nonnull(g.app);
    g.port = lds_app_port(g.app);
    ck_assert_int_gt(g.port, 0);
}

static void app_ready(void)
{
    ld_test_await_ok(ld_data_system_ready(lds_app_data_system(g.app)));
}

/* What SIGTERM does, then the frees of main.c. */
static void app_stop(void)
{
    if (g.conn)
        evhttp_connection_free(g.conn);
    g.conn = NULL;
    ld_future *f = lds_app_close(g.app);
    ck_assert_ptr_nonnull(f);
    ld_test_await_ok(f);
    ck_assert_ptr_nonnull(strstr(g.log, "[info] stopped"));
    lds_app_free(g.app);
    g.app = NULL;
    ld_test_flush();
}

static void loop_once(void)
{
    event_base_loop(B, EVLOOP_ONCE);
}

/* ---- the HTTP client ---------------------------------------------------------------- */

struct resp {
    bool done;
    int code;
    char *body;
};

static void resp_cb(struct evhttp_request *req, void *arg)
{
    struct resp *r = arg;
    r->done = true;
    if (!req)
        return;
    r->code = evhttp_request_get_response_code(req);
    struct evbuffer *b = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(b);
    r->body = malloc(len + 1);
    ck_assert_ptr_nonnull(r->body);
    evbuffer_remove(b, r->body, len);
    r->body[len] = '\0';
}

static void send_req(enum evhttp_cmd_type m, const char *path, const char *body, struct resp *r);

static void get(const char *path, struct resp *r)
{
    send_req(EVHTTP_REQ_GET, path, NULL, r);
}

/* `m` of `path` (with `body`, if not NULL) with the SDK key; waits. */
static void send_req(enum evhttp_cmd_type m, const char *path, const char *body, struct resp *r)
{
    if (!g.conn) {
        g.conn = evhttp_connection_base_new(B, NULL, "127.0.0.1", (ev_uint16_t)g.port);
        ck_assert_ptr_nonnull(g.conn);
    }
    memset(r, 0, sizeof *r);
    struct evhttp_request *req = evhttp_request_new(resp_cb, r);
    ck_assert_ptr_nonnull(req);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host", "localhost");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Authorization", KEY);
    if (body)
        evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
    ck_assert_int_eq(evhttp_make_request(g.conn, req, m, path), 0);
    while (!r->done)
        loop_once();
}

static json_t *body_json(const struct resp *r)
{
    json_error_t e;
    json_t *j = json_loads(r->body ? r->body : "", 0, &e);
    ck_assert_msg(j != NULL, "body is not JSON (%s): %.300s", e.text, r->body ? r->body : "");
    return j;
}

/* GET `path`, asserting `code`; the body as JSON. */
static json_t *get_json(const char *path, int code)
{
    struct resp r;
    get(path, &r);
    ck_assert_msg(r.code == code, "%s: %d, expected %d: %.300s", path, r.code, code,
                  r.body ? r.body : "");
    json_t *j = body_json(&r);
    free(r.body);
    return j;
}

/* Asks for `path` every 10 ms until the JSON answer has `member` (a path
 * "a.b" of object members, NULL: the whole) equal to `want` (' for "). */
static json_t *poll_for(const char *path, const char *member, const char *want)
{
    json_t *w = ld_test_j(want);
    for (int i = 0; i < 1000; i++) {
        json_t *j = get_json(path, 200);
        json_t *m = j;
        char buf[128];
        snprintf(buf, sizeof buf, "%s", member ? member : "");
        for (char *s = member ? strtok(buf, ".") : NULL; s && m; s = strtok(NULL, "."))
            m = json_object_get(m, s);
        if (m && json_equal(m, w)) {
            json_decref(w);
            return j;
        }
        json_decref(j);
        struct timeval tv = {0, 10000};
        event_base_loopexit(B, &tv);
        event_base_dispatch(B);
    }
    json_t *last = get_json(path, 200);
    ck_abort_msg("%s: %s never became %s: %s\nlog:\n%s", path, member ? member : "the answer", want,
                 json_dumps(last, JSON_COMPACT), g.log);
    return NULL;
}

/* The evalx path of a context given as JSON text (' for "). */
static char *evalx_path(const char *ctx_text)
{
    json_t *cj = ld_test_j(ctx_text);
    char *text = json_dumps(cj, JSON_COMPACT);
    json_decref(cj);
    char *enc = ld_test_b64url(text);
    char *path = malloc(strlen(enc) + 64);
    ck_assert_ptr_nonnull(path);
    sprintf(path, "/sdk/evalx/env/contexts/%s", enc);
    free(enc);
    free(text);
    return path;
}

/* ---- streams: GET /all read with evhttp's chunked callback ------------------------ */

struct stream {
    struct evhttp_connection *conn;
    struct evbuffer *got; /* the events' text, de-chunked */
    bool done;
    int code;
};

static void stream_chunk(struct evhttp_request *req, void *arg)
{
    struct stream *s = arg;
    s->code = evhttp_request_get_response_code(req);
    evbuffer_add_buffer(s->got, evhttp_request_get_input_buffer(req));
}

static void stream_done(struct evhttp_request *req, void *arg)
{
    struct stream *s = arg;
    s->done = true;
    if (req) {
        s->code = evhttp_request_get_response_code(req);
        evbuffer_add_buffer(s->got, evhttp_request_get_input_buffer(req));
    }
}

static void stream_open(struct stream *s)
{
    memset(s, 0, sizeof *s);
    s->got = evbuffer_new();
    ck_assert_ptr_nonnull(s->got);
    s->conn = evhttp_connection_base_new(B, NULL, "127.0.0.1", (ev_uint16_t)g.port);
    ck_assert_ptr_nonnull(s->conn);
    struct evhttp_request *req = evhttp_request_new(stream_done, s);
    ck_assert_ptr_nonnull(req);
    evhttp_request_set_chunked_cb(req, stream_chunk);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Host", "localhost");
    evhttp_add_header(h, "Accept", "text/event-stream");
    evhttp_add_header(h, "Authorization", KEY);
    ck_assert_int_eq(evhttp_make_request(s->conn, req, EVHTTP_REQ_GET, "/all"), 0);
}

static void stream_close(struct stream *s)
{
    if (s->conn)
        evhttp_connection_free(s->conn);
    s->conn = NULL;
    if (s->got)
        evbuffer_free(s->got);
    s->got = NULL;
}

/* Takes the next event (skipping comment lines) from what came, waiting for
 * it: its name into `name`, its data parsed. */
static json_t *stream_next(struct stream *s, char *name, size_t n)
{
    for (;;) {
        struct evbuffer_ptr end = evbuffer_search(s->got, "\n\n", 2, NULL);
        if (end.pos >= 0) {
            size_t len = (size_t)end.pos + 2;
            char *text = malloc(len + 1);
            ck_assert_ptr_nonnull(text);
            evbuffer_remove(s->got, text, len);
            text[len] = '\0';
            name[0] = '\0';
            json_t *data = NULL;
            for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
                if (strncmp(line, "event: ", 7) == 0)
                    snprintf(name, n, "%s", line + 7);
                else if (strncmp(line, "data: ", 6) == 0) {
                    json_error_t e;
                    data = json_loads(line + 6, 0, &e);
                    ck_assert_msg(data != NULL, "event data is not JSON: %s", line + 6);
                }
            }
            free(text);
            if (name[0]) {
                ck_assert_ptr_nonnull(data);
                return data;
            }
            json_decref(data); /* a comment (heartbeat) */
            continue;
        }
        ck_assert_msg(!s->done, "the stream ended (status %d)", s->code);
        loop_once();
    }
}

/* Waits for the next event, which must be `want`; returns its data. */
static json_t *stream_expect(struct stream *s, const char *want)
{
    char name[32];
    json_t *data = stream_next(s, name, sizeof name);
    ck_assert_msg(strcmp(name, want) == 0, "event %s, expected %s: %s", name, want,
                  json_dumps(data, JSON_COMPACT));
    return data;
}

/* The store's collection of `kind`, as a new reference. */
static json_t *store_all(const ld_kind *kind)
{
    ld_future *f = ld_test_fulfilled(ld_store_all(lds_app_store(g.app), kind));
    json_t *j = json_incref(ld_future_json(f));
    ld_future_unref(f);
    return j;
}

/* ---- tests -------------------------------------------------------------------------- */

static const char *const DATA1 =
    "{'flags': {"
    "  'f1': {'key': 'f1', 'version': 3, 'on': true, 'variations': [true, false],"
    "         'fallthrough': {'variation': 0}, 'offVariation': 1, 'salt': 's'},"
    "  'f2': {'key': 'f2', 'version': 5, 'on': false, 'variations': ['a', 'b'],"
    "         'offVariation': 0, 'fallthrough': {'variation': 1}, 'salt': 's'}},"
    " 'segments': {'s1': {'key': 's1', 'version': 2, 'included': ['u1'], 'salt': 's'}}}";

START_TEST(test_stream_gets_put_then_patch_and_delete_when_the_file_changes)
{
    write_data(DATA1);
    app_start();
    app_ready();
    struct stream s;
    stream_open(&s);
    json_t *put = stream_expect(&s, "put");
    ck_assert_int_eq(s.code, 200);
    ck_assert_str_eq(json_string_value(json_object_get(put, "path")), "/");
    json_t *data = json_object_get(put, "data");
    json_t *flags = json_object_get(data, "flags");
    json_t *file = ld_test_j(DATA1);
    /* the file's data, as it is in the store */
    json_t *stored = store_all(ld_kind_features());
    ck_assert(json_equal(flags, stored));
    json_decref(stored);
    ck_assert_int_eq(json_object_size(flags), 2);
    const char *key;
    json_t *fl;
    json_object_foreach(json_object_get(file, "flags"), key, fl)
    {
        json_t *got = json_object_get(flags, key);
        ck_assert_msg(got != NULL, "%s not in the put", key);
        json_t *v;
        const char *member;
        json_object_foreach(fl, member, v)
        {
            ck_assert_msg(json_equal(json_object_get(got, member), v), "%s.%s", key, member);
        }
    }
    ck_assert(json_equal(json_object_get(json_object_get(data, "segments"), "s1"),
                         json_object_get(json_object_get(file, "segments"), "s1")));
    json_decref(put);

    /* f1 changes (its version in the file stays 3): a patch of f1 alone,
     * with a version above 3 */
    write_data("{'flags': {"
               "  'f1': {'key': 'f1', 'version': 3, 'on': true, 'variations': [true, false],"
               "         'fallthrough': {'variation': 1}, 'offVariation': 1, 'salt': 's'},"
               "  'f2': {'key': 'f2', 'version': 5, 'on': false, 'variations': ['a', 'b'],"
               "         'offVariation': 0, 'fallthrough': {'variation': 1}, 'salt': 's'}},"
               " 'segments': {'s1': {'key': 's1', 'version': 2, 'included': ['u1'],"
               "              'salt': 's'}}}");
    json_t *patch = stream_expect(&s, "patch");
    ck_assert_str_eq(json_string_value(json_object_get(patch, "path")), "/flags/f1");
    json_t *f1 = json_object_get(patch, "data");
    ck_assert_str_eq(json_string_value(json_object_get(f1, "key")), "f1");
    ck_assert_int_gt(json_integer_value(json_object_get(f1, "version")), 3);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(f1, "fallthrough"), "variation")), 1);
    int64_t f1_version = json_integer_value(json_object_get(f1, "version"));
    json_decref(patch);

    /* f2 leaves the file: a delete with a version above 5 */
    write_data("{'flags': {"
               "  'f1': {'key': 'f1', 'version': 3, 'on': true, 'variations': [true, false],"
               "         'fallthrough': {'variation': 1}, 'offVariation': 1, 'salt': 's'}},"
               " 'segments': {'s1': {'key': 's1', 'version': 2, 'included': ['u1'],"
               "              'salt': 's'}}}");
    json_t *del = stream_expect(&s, "delete");
    ck_assert_str_eq(json_string_value(json_object_get(del, "path")), "/flags/f2");
    int64_t deleted_at = json_integer_value(json_object_get(del, "version"));
    ck_assert_int_gt(deleted_at, 5);
    json_decref(del);
    /* a segment changes */
    write_data("{'flags': {"
               "  'f1': {'key': 'f1', 'version': 3, 'on': true, 'variations': [true, false],"
               "         'fallthrough': {'variation': 1}, 'offVariation': 1, 'salt': 's'}},"
               " 'segments': {'s1': {'key': 's1', 'version': 2, 'included': ['u1', 'u2'],"
               "              'salt': 's'}}}");
    patch = stream_expect(&s, "patch");
    ck_assert_str_eq(json_string_value(json_object_get(patch, "path")), "/segments/s1");
    ck_assert_int_gt(json_integer_value(json_object_get(json_object_get(patch, "data"), "version")),
                     2);
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(patch, "data"), "included")),
                     2);
    json_decref(patch);
    /* nothing else was sent: f1 and s1 did not change */
    for (int i = 0; i < 20; i++)
        event_base_loop(B, EVLOOP_NONBLOCK);
    ck_assert_msg(evbuffer_search(s.got, "event:", 6, NULL).pos < 0, "more events came");
    /* polling agrees */
    json_t *j = get_json("/sdk/latest-flags/f1", 200);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "version")), f1_version);
    json_decref(j);
    j = get_json("/sdk/latest-flags/f2", 404);
    json_decref(j);
    /* f2 comes back, as it was in the file (version 5): above its deletion,
     * or SDKs would ignore it */
    write_data(DATA1);
    char name[32];
    for (int i = 0; i < 3; i++) { /* f1 and s1 go back too */
        json_t *ev = stream_next(&s, name, sizeof name);
        ck_assert_str_eq(name, "patch");
        const char *p = json_string_value(json_object_get(ev, "path"));
        if (strcmp(p, "/flags/f2") == 0)
            ck_assert_int_gt(
                json_integer_value(json_object_get(json_object_get(ev, "data"), "version")),
                deleted_at);
        json_decref(ev);
    }
    j = get_json("/sdk/latest-flags/f2", 200);
    ck_assert_int_gt(json_integer_value(json_object_get(j, "version")), deleted_at);
    json_decref(j);
    json_decref(file);
    stream_close(&s);
    app_stop();
}
END_TEST

START_TEST(test_file_changed_right_after_start_is_served_with_a_higher_version)
{
    write_data(DATA1);
    app_start();
    app_ready();
    struct stream s;
    stream_open(&s);
    /* changed at once, its version left as it is */
    write_data("{'flags': {'f1': {'key': 'f1', 'version': 3, 'on': false,"
               " 'variations': [true, false], 'offVariation': 1}}}");
    json_t *put = stream_expect(&s, "put");
    json_t *f1 = json_object_get(json_object_get(json_object_get(put, "data"), "flags"), "f1");
    bool old_put = json_is_true(json_object_get(f1, "on"));
    json_decref(put);
    json_t *j = poll_for("/sdk/latest-flags/f1", "on", "false");
    /* above the version the first data had, or SDKs that hold it ignore
     * the change */
    ck_assert_int_gt(json_integer_value(json_object_get(j, "version")), 3);
    if (old_put) {
        json_t *patch = NULL;
        char name[32];
        do { /* (f2 and s1 are deleted) */
            json_decref(patch);
            patch = stream_next(&s, name, sizeof name);
        } while (strcmp(json_string_value(json_object_get(patch, "path")), "/flags/f1") != 0);
        ck_assert_str_eq(name, "patch");
        ck_assert_int_gt(
            json_integer_value(json_object_get(json_object_get(patch, "data"), "version")), 3);
        json_decref(patch);
    }
    json_decref(j);
    stream_close(&s);
    app_stop();
}
END_TEST

START_TEST(test_broken_file_interrupts_and_last_good_data_is_served)
{
    write_data(DATA1);
    app_start();
    app_ready();
    json_t *good = get_json("/sdk/latest-all", 200);
    json_t *st = poll_for("/status", "dataSource.state", "'valid'");
    json_decref(st);
    struct stream s;
    stream_open(&s);
    json_decref(stream_expect(&s, "put"));

    /* invalid JSON over it */
    write_data("{'flags': {'f1': {'key': 'f1', ");
    st = poll_for("/status", "dataSource.state", "'interrupted'");
    json_t *err = json_object_get(json_object_get(st, "dataSource"), "lastError");
    ck_assert_str_eq(json_string_value(json_object_get(err, "kind")), "invalid_data");
    const char *msg = json_string_value(json_object_get(err, "message"));
    ck_assert_ptr_nonnull(msg);
    ck_assert_msg(strstr(msg, g.path) != NULL, "the message does not name the file: %s", msg);
    ck_assert_str_eq(json_string_value(json_object_get(st, "status")), "degraded");
    json_decref(st);
    ck_assert_ptr_nonnull(strstr(g.log, "[warn] data source interrupted: invalid_data: "));
    /* the last good data is still served */
    json_t *now = get_json("/sdk/latest-all", 200);
    ck_assert(json_equal(now, good));
    json_decref(now);
    json_t *f1 = get_json("/sdk/latest-flags/f1", 200);
    ck_assert_int_eq(json_integer_value(json_object_get(f1, "version")), 3);
    json_decref(f1);

    /* fixed: valid again, and the new data is served */
    write_data(
        "{'flags': {'f9': {'on': true, 'variations': [1], 'fallthrough': {'variation': 0}}}}");
    st = poll_for("/status", "dataSource.state", "'valid'");
    ck_assert_str_eq(json_string_value(json_object_get(st, "status")), "healthy");
    ck_assert_int_eq(json_integer_value(json_object_get(st, "flags")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(st, "segments")), 0);
    json_decref(st);
    json_t *all = get_json("/sdk/latest-all", 200);
    json_t *want = ld_test_j("{'flags': {'f9': {'key': 'f9', 'version': 1, 'on': true,"
                             " 'variations': [1], 'fallthrough': {'variation': 0}}},"
                             " 'segments': {}}");
    ck_assert_msg(json_equal(all, want), "%s", json_dumps(all, JSON_COMPACT));
    json_decref(want);
    json_decref(all);
    json_t *f = get_json("/sdk/latest-flags/f1", 404);
    json_decref(f);
    json_decref(good);
    /* the stream heard nothing of the broken file, then the changes:
     * segments first, then flags, puts before deletes (data_system.h) */
    static const char *const events[][2] = {{"delete", "/segments/s1"},
                                            {"patch", "/flags/f9"},
                                            {"delete", "/flags/f1 /flags/f2"},
                                            {"delete", "/flags/f1 /flags/f2"}};
    char prev[64] = "";
    for (size_t i = 0; i < 4; i++) {
        char name[32];
        json_t *ev = stream_next(&s, name, sizeof name);
        ck_assert_str_eq(name, events[i][0]);
        const char *p = json_string_value(json_object_get(ev, "path"));
        ck_assert_msg(strstr(events[i][1], p) && strcmp(p, prev), "event %zu: %s", i, p);
        snprintf(prev, sizeof prev, "%s", p);
        json_decref(ev);
    }
    stream_close(&s);
    app_stop();
}
END_TEST

START_TEST(test_flag_values_are_served_as_launchdarkly_flags)
{
    write_data("{'flagValues': {'greeting': 'hello', 'limit': 3, 'cfg': {'a': [1, 2]}},"
               " 'flags': {'f1': {'on': false, 'variations': [0], 'offVariation': 0}}}");
    app_start();
    app_ready();
    /* as LaunchDarkly's file data sources build them */
    json_t *got = get_json("/sdk/latest-flags/greeting", 200);
    json_t *want = ld_test_j("{'key': 'greeting', 'version': 1, 'on': true,"
                             " 'fallthrough': {'variation': 0}, 'variations': ['hello']}");
    ck_assert_msg(json_equal(got, want), "%s", json_dumps(got, JSON_COMPACT));
    json_decref(want);
    json_decref(got);
    got = get_json("/sdk/latest-flags", 200);
    ck_assert_int_eq(json_object_size(got), 4);
    want = ld_test_j("[{'a': [1, 2]}]");
    ck_assert(json_equal(json_object_get(json_object_get(got, "cfg"), "variations"), want));
    json_decref(want);
    json_decref(got);
    /* and they evaluate as such: to their value, for anyone */
    ld_context *ctx = ld_test_ctx_of("{'key': 'anyone'}");
    ld_future *f = ld_test_fulfilled(ld_evaluator_all_flags(lds_app_evaluator(g.app), ctx, 0));
    json_t *state = ld_future_json(f);
    ck_assert_str_eq(json_string_value(json_object_get(state, "greeting")), "hello");
    ck_assert_int_eq(json_integer_value(json_object_get(state, "limit")), 3);
    ld_future_unref(f);
    ld_context_unref(ctx);
    app_stop();
}
END_TEST

/* Writes `text` (' for ") to `name` in the directory, in place. */
static void write_named(const char *name, const char *text)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", g.dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    for (const char *c = text; *c; c++)
        fputc(*c == '\'' ? '"' : *c, f);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_config_map_style_symlink_swap_is_seen)
{
    /* as Kubernetes mounts a ConfigMap: flags.json -> ..data/flags.json,
     * ..data -> ..v1, and an update swaps ..data for ..v2 by a rename */
    char p[600], q[600];
    snprintf(p, sizeof p, "%s/..v1", g.dir);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    write_named("..v1/flags.json", DATA1);
    ck_assert_int_eq(symlink("..v1", (snprintf(q, sizeof q, "%s/..data", g.dir), q)), 0);
    ck_assert_int_eq(symlink("..data/flags.json", g.path), 0);
    app_start();
    app_ready();
    json_t *j = get_json("/sdk/latest-flags/f1", 200);
    ck_assert(json_is_true(json_object_get(j, "on")));
    json_decref(j);
    snprintf(p, sizeof p, "%s/..v2", g.dir);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    write_named("..v2/flags.json", "{'flags': {'f1': {'key': 'f1', 'version': 3, 'on': false,"
                                   " 'variations': [true, false], 'offVariation': 1}}}");
    snprintf(p, sizeof p, "%s/..data_tmp", g.dir);
    ck_assert_int_eq(symlink("..v2", p), 0);
    ck_assert_int_eq(rename(p, q), 0);
    /* the old version goes, as the kubelet removes it */
    snprintf(p, sizeof p, "%s/..v1/flags.json", g.dir);
    ck_assert_int_eq(unlink(p), 0);
    snprintf(p, sizeof p, "%s/..v1", g.dir);
    ck_assert_int_eq(rmdir(p), 0);
    j = poll_for("/sdk/latest-flags/f1", "on", "false");
    ck_assert_int_gt(json_integer_value(json_object_get(j, "version")), 3);
    json_decref(j);
    j = get_json("/sdk/latest-flags/f2", 404);
    json_decref(j);
    app_stop();
    snprintf(p, sizeof p, "%s/..v2/flags.json", g.dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/..v2", g.dir);
    rmdir(p);
}
END_TEST

START_TEST(test_several_files_merge_and_a_key_defined_twice_interrupts)
{
    write_data(
        "{'flags': {'f1': {'on': true, 'variations': [1], 'fallthrough': {'variation': 0}}}}");
    write_named("more.json", "{'flagValues': {'f2': 'two'}, 'segments': {'s1': {}}}");
    char more[600];
    snprintf(more, sizeof more, "%s/more.json", g.dir);
    const char *paths[] = {g.path, more};
    struct lds_app_options o = {0};
    o.paths = paths;
    o.n_paths = 2;
    o.server.bind_address = "127.0.0.1";
    o.server.sdk_key = KEY;
    o.server.log = log_fn;
    g.app = lds_app_new(B, &o);
    ck_assert_ptr_nonnull(g.app);
    g.port = lds_app_port(g.app);
    app_ready();
    json_t *all = get_json("/sdk/latest-all", 200);
    ck_assert_int_eq(json_object_size(json_object_get(all, "flags")), 2);
    ck_assert_ptr_nonnull(json_object_get(json_object_get(all, "segments"), "s1"));
    json_decref(all);
    /* f1 in the second file too */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/.more.tmp", g.dir);
    write_named(".more.tmp", "{'flagValues': {'f2': 'two', 'f1': 3}}");
    ck_assert_int_eq(rename(tmp, more), 0);
    json_t *st = poll_for("/status", "dataSource.state", "'interrupted'");
    const char *msg = json_string_value(json_object_get(
        json_object_get(json_object_get(st, "dataSource"), "lastError"), "message"));
    ck_assert_msg(msg && strstr(msg, "defined twice") && strstr(msg, more), "%s", msg);
    json_decref(st);
    json_t *f2 = get_json("/sdk/latest-flags/f2", 200);
    json_decref(f2);
    app_stop();
}
END_TEST

START_TEST(test_burst_of_rewrites_streams_increasing_versions_and_ends_at_the_last)
{
    write_data(DATA1);
    app_start();
    app_ready();
    struct stream s;
    stream_open(&s);
    json_decref(stream_expect(&s, "put"));
    /* 20 rewrites 5 ms apart (within the quiet time), the file's version
     * never raised */
    char text[512];
    for (int i = 1; i <= 20; i++) {
        snprintf(text, sizeof text,
                 "{'flags': {'f1': {'key': 'f1', 'version': 3, 'on': true,"
                 " 'variations': [%d, 0], 'fallthrough': {'variation': 0}}}}",
                 i);
        write_data(text);
        struct timeval tv = {0, 5000};
        event_base_loopexit(B, &tv);
        event_base_dispatch(B);
    }
    json_t *j = poll_for("/sdk/latest-flags/f1", "variations", "[20, 0]");
    int64_t final = json_integer_value(json_object_get(j, "version"));
    json_decref(j);
    /* every patch of f1 is above the one before; the last is the file's */
    int64_t last = 3;
    json_t *vars = NULL;
    while (last < final) {
        char name[32];
        json_t *ev = stream_next(&s, name, sizeof name);
        if (strcmp(json_string_value(json_object_get(ev, "path")), "/flags/f1") == 0) {
            ck_assert_str_eq(name, "patch");
            int64_t v = json_integer_value(json_object_get(json_object_get(ev, "data"), "version"));
            ck_assert_int_gt(v, last);
            last = v;
            json_decref(vars);
            vars = json_incref(json_object_get(json_object_get(ev, "data"), "variations"));
        }
        json_decref(ev);
    }
    ck_assert_int_eq(last, final);
    json_t *want = ld_test_j("[20, 0]");
    ck_assert(json_equal(vars, want));
    json_decref(want);
    json_decref(vars);
    stream_close(&s);
    app_stop();
}
END_TEST

/* Client-side flags with targets, rules, a segment, a rollout and a
 * prerequisite; c3 is not for client-side SDKs. */
static const char *const EVAL_DATA =
    "{'flags': {"
    "  'c1': {'on': true, 'variations': ['off', 'on', 'vip'], 'offVariation': 0,"
    "         'fallthrough': {'variation': 1}, 'salt': 'c1',"
    "         'targets': [{'values': ['u1', 'u9'], 'variation': 2}],"
    "         'rules': [{'id': 'r-org', 'variation': 0, 'clauses': [{'contextKind': 'org',"
    "                    'attribute': 'key', 'op': 'in', 'values': ['acme']}]},"
    "                   {'id': 'r-seg', 'variation': 2, 'trackEvents': true, 'clauses':"
    "                    [{'attribute': '', 'op': 'segmentMatch', 'values': ['beta']}]}],"
    "         'clientSideAvailability': {'usingEnvironmentId': true}},"
    "  'c2': {'on': true, 'variations': [10, 20], 'salt': 'c2', 'version': 4,"
    "         'fallthrough': {'rollout': {'variations': [{'variation': 0, 'weight': 40000},"
    "                                                     {'variation': 1, 'weight': 60000}]}},"
    "         'prerequisites': [{'key': 'c1', 'variation': 1}], 'offVariation': 0,"
    "         'clientSideAvailability': {'usingEnvironmentId': true}},"
    "  'c3': {'on': true, 'variations': [1, 2], 'fallthrough': {'variation': 1}},"
    "  'c4': {'on': true, 'variations': ['x', 'y'], 'salt': 'c4', 'trackEvents': true,"
    "         'fallthrough': {'variation': 0},"
    "         'rules': [{'id': 'r-email', 'variation': 1, 'clauses': [{'attribute': 'email',"
    "                    'op': 'endsWith', 'values': ['@example.com']}]}],"
    "         'clientSideAvailability': {'usingEnvironmentId': true}}},"
    " 'segments': {'beta': {'included': ['u2'], 'salt': 'b',"
    "   'rules': [{'clauses': [{'attribute': 'name', 'op': 'startsWith', 'values': ['Be']}]}]}}}";

static const char *const EVAL_CONTEXTS[] = {
    "{'key': 'u1'}",
    "{'key': 'u2'}",
    "{'kind': 'user', 'key': 'u3', 'name': 'Bea', 'email': 'b@example.com'}",
    "{'kind': 'multi', 'user': {'key': 'u4'}, 'org': {'key': 'acme'}}",
    "{'kind': 'org', 'key': 'other'}",
    "{'key': 'u5'}",
    "{'key': 'u6'}",
};

/* Asserts that the evalx answer `got` holds, for each flag, the value, the
 * variation and the version of the evaluator's all-flags state for
 * `ctx_text` (client-side flags only). */
static void expect_evaluators_results(const char *ctx_text, const json_t *got)
{
    ld_context *ctx = ld_test_ctx_of(ctx_text);
    ld_future *f = ld_test_fulfilled(
        ld_evaluator_all_flags(lds_app_evaluator(g.app), ctx, LD_ALL_FLAGS_CLIENT_SIDE_ONLY));
    json_t *state = ld_future_json(f);
    json_t *meta = json_object_get(state, "$flagsState");
    ck_assert_int_eq(json_object_size(got), json_object_size(meta));
    ck_assert_int_eq(json_object_size(got), 3); /* c1, c2, c4 */
    const char *key;
    json_t *m;
    json_object_foreach(meta, key, m)
    {
        json_t *one = json_object_get(got, key);
        ck_assert_msg(one != NULL, "%s: %s missing", ctx_text, key);
        ck_assert_msg(json_equal(json_object_get(one, "value"), json_object_get(state, key)),
                      "%s: %s: value", ctx_text, key);
        json_t *var = json_object_get(m, "variation");
        ck_assert_msg(json_equal(json_object_get(one, "variation"), var ? var : json_null()),
                      "%s: %s: variation", ctx_text, key);
        ck_assert(json_equal(json_object_get(one, "version"), json_object_get(m, "version")));
    }
    ld_future_unref(f);
    ld_context_unref(ctx);
}

START_TEST(test_evalx_answers_what_the_evaluator_says)
{
    write_data(EVAL_DATA);
    app_start();
    app_ready();
    size_t n = sizeof EVAL_CONTEXTS / sizeof EVAL_CONTEXTS[0];
    for (size_t i = 0; i < n; i++) {
        char *path = evalx_path(EVAL_CONTEXTS[i]);
        json_t *got = get_json(path, 200);
        expect_evaluators_results(EVAL_CONTEXTS[i], got);
        json_decref(got);
        free(path);
    }
    /* spelled out: targets, the segment rule, the multi-kind rule */
    struct {
        const char *ctx, *flag, *want;
    } cases[] = {
        {"{'key': 'u1'}", "c1", "'vip'"},
        {"{'key': 'u2'}", "c1", "'vip'"},
        {"{'key': 'u3', 'name': 'Bea'}", "c1", "'vip'"},
        {"{'kind': 'multi', 'user': {'key': 'u4'}, 'org': {'key': 'acme'}}", "c1", "'off'"},
        {"{'key': 'u5'}", "c1", "'on'"},
        {"{'key': 'u3', 'email': 'b@example.com'}", "c4", "'y'"},
        {"{'key': 'u1'}", "c2", "10"}, /* the prerequisite fails: off */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *path = evalx_path(cases[i].ctx);
        json_t *got = get_json(path, 200);
        json_t *want = ld_test_j(cases[i].want);
        ck_assert_msg(
            json_equal(json_object_get(json_object_get(got, cases[i].flag), "value"), want),
            "%s: %s: %s", cases[i].ctx, cases[i].flag, json_dumps(got, JSON_COMPACT));
        json_decref(want);
        json_decref(got);
        free(path);
    }
    app_stop();
}
END_TEST

/* A `matches` rule that a limit stops: evalx answers (the rule does not
 * match) and the server logs a warning with the flag's key and version,
 * once for that version however often it is evaluated. */
START_TEST(test_regex_stopped_by_its_limit_is_logged_once_per_version)
{
    write_data("{'flags': {'rx': {'key': 'rx', 'version': 3, 'on': true, 'clientSide': true,"
               " 'variations': [false, true], 'fallthrough': {'variation': 0},"
               " 'rules': [{'id': 'r', 'variation': 1, 'clauses': [{'attribute': 'name',"
               " 'op': 'matches', 'values': ['^(([a-z])+.)+[A-Z]([a-z])+$']}]}]}}}");
    app_start();
    app_ready();
    enum { LEN = 2000 };
    char ctx[LEN + 64];
    int at = snprintf(ctx, 64, "{'key': 'u', 'name': '");
    for (int i = 0; i < LEN; i++)
        ctx[at + i] = (char)('a' + i % 26);
    snprintf(ctx + at + LEN, 64, "'}");
    char *path = evalx_path(ctx);
    for (int i = 0; i < 3; i++) {
        json_t *got = get_json(path, 200);
        ck_assert(json_is_false(json_object_get(json_object_get(got, "rx"), "value")));
        json_decref(got);
    }
    free(path);
    const char *line = "[warn] flag rx version 3: a regular expression stopped at its limit";
    const char *first = strstr(g.log, line);
    ck_assert_msg(first, "%s", g.log);
    ck_assert_ptr_null(strstr(first + 1, line));
    app_stop();
}
END_TEST

/* ---- 10,000 requests, 64 in flight on keep-alive connections ---------------------- */

#define LOAD_CONNS 64
#define LOAD_REQUESTS 10000
#define LOAD_PATHS 6

struct load {
    struct evhttp_connection *c[LOAD_CONNS];
    char *paths[LOAD_PATHS];
    json_t *want[LOAD_PATHS];
    int issued, answered, ok;
    char first_bad[512];
};

static struct load *the_load;

static void load_next(struct load *l, int i);

static void load_done(struct evhttp_request *req, void *arg)
{
    struct load *l = the_load;
    intptr_t v = (intptr_t)arg;
    int conn = (int)(v % LOAD_CONNS), which = (int)(v / LOAD_CONNS);
    l->answered++;
    int code = req ? evhttp_request_get_response_code(req) : 0;
    bool good = false;
    if (code == 200) {
        struct evbuffer *b = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(b);
        json_error_t e;
        json_t *j = json_loadb((const char *)evbuffer_pullup(b, -1), len, 0, &e);
        good = j && json_equal(j, l->want[which]);
        json_decref(j);
    }
    if (good)
        l->ok++;
    else if (!l->first_bad[0])
        snprintf(l->first_bad, sizeof l->first_bad, "%s: %d", l->paths[which], code);
    load_next(l, conn);
}

static void load_next(struct load *l, int i)
{
    if (l->issued >= LOAD_REQUESTS)
        return;
    int which = l->issued % LOAD_PATHS;
    l->issued++;
    struct evhttp_request *req =
        evhttp_request_new(load_done, (void *)(intptr_t)(which * LOAD_CONNS + i));
    ck_assert_ptr_nonnull(req);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host", "localhost");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Authorization", KEY);
    ck_assert_int_eq(evhttp_make_request(l->c[i], req, EVHTTP_REQ_GET, l->paths[which]), 0);
}

START_TEST(test_ten_thousand_requests_with_64_in_flight_all_answered)
{
    write_data(EVAL_DATA);
    app_start();
    app_ready();
    struct load *l = calloc(1, sizeof *l);
    ck_assert_ptr_nonnull(l);
    the_load = l;
    static const char *const flags[] = {"c1", "c2", "c3"};
    json_t *stored = store_all(ld_kind_features());
    for (int i = 0; i < 3; i++) {
        l->paths[i] = malloc(64);
        ck_assert_ptr_nonnull(l->paths[i]);
        snprintf(l->paths[i], 64, "/sdk/latest-flags/%s", flags[i]);
        l->want[i] = json_incref(json_object_get(stored, flags[i]));
        ck_assert_ptr_nonnull(l->want[i]);
    }
    json_decref(stored);
    for (int i = 3; i < LOAD_PATHS; i++) {
        l->paths[i] = evalx_path(EVAL_CONTEXTS[i - 3]);
        l->want[i] = get_json(l->paths[i], 200);
        expect_evaluators_results(EVAL_CONTEXTS[i - 3], l->want[i]);
    }
    for (int i = 0; i < LOAD_CONNS; i++) {
        l->c[i] = evhttp_connection_base_new(B, NULL, "127.0.0.1", (ev_uint16_t)g.port);
        ck_assert_ptr_nonnull(l->c[i]);
        load_next(l, i);
    }
    while (l->answered < LOAD_REQUESTS)
        loop_once();
    ck_assert_msg(l->ok == LOAD_REQUESTS, "%d of %d right; first wrong: %s", l->ok, LOAD_REQUESTS,
                  l->first_bad);
    struct lds_server_stats st;
    lds_server_stats(lds_app_server(g.app), &st);
    ck_assert_uint_ge(st.requests, LOAD_REQUESTS);
    ck_assert_uint_eq(st.pending, 0);
    /* keep-alive: the requests shared the connections */
    ck_assert_uint_le(st.connections, LOAD_CONNS + 1);
    for (int i = 0; i < LOAD_CONNS; i++)
        evhttp_connection_free(l->c[i]);
    for (int i = 0; i < LOAD_PATHS; i++) {
        free(l->paths[i]);
        json_decref(l->want[i]);
    }
    free(l);
    the_load = NULL;
    app_stop();
}
END_TEST

/* ---- shutdown with streams open and requests in flight ---------------------------- */

#define N_STREAMS 100
#define N_INFLIGHT 40

struct flight {
    int answered, ok, unavailable, failed;
};

static void flight_done(struct evhttp_request *req, void *arg)
{
    struct flight *fl = arg;
    fl->answered++;
    int code = req ? evhttp_request_get_response_code(req) : 0;
    if (code == 200)
        fl->ok++;
    else if (code == 503)
        fl->unavailable++;
    else
        fl->failed++;
}

static void closed_cb(ld_future *f, void *arg)
{
    (void)f;
    *(bool *)arg = true;
}

START_TEST(test_close_with_100_streams_and_requests_in_flight_then_free)
{
    write_data(EVAL_DATA);
    app_start();
    app_ready();
    struct stream *s = calloc(N_STREAMS, sizeof *s);
    ck_assert_ptr_nonnull(s);
    for (int i = 0; i < N_STREAMS; i++)
        stream_open(&s[i]);
    for (int i = 0; i < N_STREAMS; i++)
        json_decref(stream_expect(&s[i], "put"));
    struct lds_server_stats st;
    lds_server_stats(lds_app_server(g.app), &st);
    ck_assert_uint_eq(st.streams, N_STREAMS);
    /* requests on 8 connections, sent but not answered yet */
    struct evhttp_connection *c[8];
    struct flight fl = {0};
    char *evalx = evalx_path(EVAL_CONTEXTS[2]);
    for (int i = 0; i < 8; i++) {
        c[i] = evhttp_connection_base_new(B, NULL, "127.0.0.1", (ev_uint16_t)g.port);
        ck_assert_ptr_nonnull(c[i]);
    }
    for (int i = 0; i < N_INFLIGHT; i++) {
        struct evhttp_request *req = evhttp_request_new(flight_done, &fl);
        ck_assert_ptr_nonnull(req);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Host", "localhost");
        evhttp_add_header(evhttp_request_get_output_headers(req), "Authorization", KEY);
        ck_assert_int_eq(
            evhttp_make_request(c[i % 8], req, EVHTTP_REQ_GET, i % 2 ? evalx : "/sdk/latest-all"),
            0);
    }
    /* let some of them reach the server */
    for (int i = 0; i < 3; i++)
        event_base_loop(B, EVLOOP_NONBLOCK);
    /* a change on its way when the close comes */
    write_data("{'flags': {'c1': {'on': false, 'variations': [0], 'offVariation': 0}}}");

    bool closed = false;
    ld_future *f = lds_app_close(g.app);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f), closed_cb, &closed), 0);
    /* closing twice: the same shutdown */
    ld_future *again = lds_app_close(g.app);
    ck_assert_ptr_eq(again, f);
    ld_future_unref(again);
    ld_test_await_ok(f);
    ck_assert_ptr_nonnull(strstr(g.log, "[info] stopped"));
    /* every stream was ended, every request answered (or its connection
     * closed) */
    for (int i = 0; i < N_STREAMS; i++)
        while (!s[i].done)
            loop_once();
    while (fl.answered < N_INFLIGHT)
        loop_once();
    ck_assert_int_eq(fl.ok + fl.unavailable + fl.failed, N_INFLIGHT);
    lds_server_stats(lds_app_server(g.app), &st);
    ck_assert_uint_eq(st.streams, 0);
    ck_assert_uint_eq(st.pending, 0);
    /* the store is closed */
    ld_test_expect_error(ld_store_get(lds_app_store(g.app), ld_kind_features(), "c1"), LD_ECLOSED,
                         NULL);
    lds_app_free(g.app);
    g.app = NULL;
    ck_assert(closed);
    for (int i = 0; i < 8; i++)
        evhttp_connection_free(c[i]);
    for (int i = 0; i < N_STREAMS; i++)
        stream_close(&s[i]);
    free(s);
    free(evalx);
    ld_test_flush();
}
END_TEST

START_TEST(test_free_while_closing_cancels_the_close)
{
    write_data(DATA1);
    app_start();
    app_ready();
    struct stream s;
    stream_open(&s);
    json_decref(stream_expect(&s, "put"));
    /* the second signal: free at once, the close still running */
    ld_future *f = lds_app_close(g.app);
    ck_assert_ptr_nonnull(f);
    lds_app_free(g.app);
    g.app = NULL;
    ld_test_wait(f);
    ck_assert(ld_future_is_rejected(f));
    ck_assert_int_eq(ld_future_error(f), LD_ECANCELED);
    ld_future_unref(f);
    ck_assert_ptr_null(strstr(g.log, "stopped"));
    stream_close(&s);
    ld_test_flush();
}
END_TEST

START_TEST(test_missing_data_file_at_start_then_created)
{
    /* no file yet: the data source keeps initializing (sink.h: an
     * interruption before the first data leaves `initializing`), with the
     * error recorded, and the store stays empty and uninitialized */
    app_start();
    json_t *st = poll_for("/status", "dataSource.lastError.kind", "'invalid_data'");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "dataSource"), "state")),
                     "initializing");
    ck_assert_str_eq(json_string_value(json_object_get(st, "status")), "initializing");
    ck_assert(json_is_false(json_object_get(json_object_get(st, "store"), "initialized")));
    json_t *err = json_object_get(json_object_get(st, "dataSource"), "lastError");
    const char *msg = json_string_value(json_object_get(err, "message"));
    ck_assert_ptr_nonnull(msg);
    ck_assert_msg(strstr(msg, g.path) && strstr(msg, strerror(ENOENT)), "%s", msg);
    ck_assert_str_eq(json_string_value(json_object_get(err, "kind")), "invalid_data");
    ck_assert_int_eq(json_integer_value(json_object_get(st, "flags")), 0);
    json_decref(st);
    ck_assert_msg(strstr(g.log, "[warn] data source initializing: invalid_data: ") != NULL, "%s",
                  g.log);
    ck_assert_ptr_null(strstr(g.log, "flag data loaded"));
    /* an empty store: no flag is served (the server answers an empty
     * collection, or 503 while the store is not initialized) */
    json_t *j = get_json("/sdk/latest-flags/f1", 404);
    json_decref(j);
    struct resp r;
    get("/sdk/latest-flags", &r);
    ck_assert_msg(r.code == 200 || r.code == 503, "%d", r.code);
    if (r.code == 200) {
        j = body_json(&r);
        ck_assert_int_eq(json_object_size(j), 0);
        json_decref(j);
    }
    free(r.body);
    /* a stream connected while there is no data */
    struct stream s;
    stream_open(&s);
    for (int i = 0; i < 20; i++)
        event_base_loop(B, EVLOOP_NONBLOCK);
    /* the file comes: its data is served */
    write_data(DATA1);
    st = poll_for("/status", "dataSource.state", "'valid'");
    ck_assert_int_eq(json_integer_value(json_object_get(st, "flags")), 2);
    json_decref(st);
    app_ready();
    ck_assert_ptr_nonnull(strstr(g.log, "[info] flag data loaded"));
    j = get_json("/sdk/latest-flags/f1", 200);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "version")), 3);
    json_decref(j);
    /* the stream has all of it, in its put or in patches after it */
    char name[32];
    json_t *put = stream_next(&s, name, sizeof name);
    ck_assert_str_eq(name, "put");
    json_t *flags = json_object_get(json_object_get(put, "data"), "flags");
    json_t *segs = json_object_get(json_object_get(put, "data"), "segments");
    json_t *have = json_pack("{s:O,s:O}", "flags", flags ? flags : json_object(), "segments",
                             segs ? segs : json_object());
    json_decref(put);
    while (evbuffer_search(s.got, "\n\n", 2, NULL).pos >= 0) {
        json_t *ev = stream_next(&s, name, sizeof name);
        ck_assert_str_eq(name, "patch");
        const char *p = json_string_value(json_object_get(ev, "path"));
        json_t *item = json_object_get(ev, "data");
        json_object_set(json_object_get(have, strncmp(p, "/flags/", 7) == 0 ? "flags" : "segments"),
                        json_string_value(json_object_get(item, "key")), item);
        json_decref(ev);
    }
    json_t *all = get_json("/sdk/latest-all", 200);
    ck_assert_msg(json_equal(have, all), "the stream has %s", json_dumps(have, JSON_COMPACT));
    json_decref(all);
    json_decref(have);
    stream_close(&s);
    app_stop();
    /* the error that is over is not logged again when the source stops */
    ck_assert_msg(strstr(g.log, "[info] data source off\n") != NULL, "%s", g.log);
    ck_assert_msg(strstr(g.log, "data source off: ") == NULL, "%s", g.log);
}
END_TEST

START_TEST(test_app_that_cannot_listen_is_not_made_and_leaks_nothing)
{
    write_data(DATA1);
    app_start();
    struct lds_app_options o = {0};
    o.paths = g.paths;
    o.n_paths = 1;
    o.server.bind_address = "127.0.0.1";
    o.server.port = g.port; /* taken */
    o.server.log = log_fn;
    ck_assert_ptr_null(lds_app_new(B, &o));
    ck_assert_msg(strstr(g.log, "cannot listen") != NULL, "%s", g.log);
    ck_assert_ptr_null(lds_app_new(NULL, &o));
    ck_assert_ptr_null(lds_app_new(B, NULL));
    o.n_paths = 0;
    ck_assert_ptr_null(lds_app_new(B, &o));
    ck_assert_ptr_null(lds_app_close(NULL));
    lds_app_free(NULL);
    /* the first one still serves */
    app_ready();
    json_t *j = get_json("/sdk/latest-flags/f1", 200);
    json_decref(j);
    app_stop();
}
END_TEST

/* ldasync-serve relaying another: what the files give the first reaches
 * the relay, by streaming (a change of the file too) and by polling; the
 * events SDKs post to the relay reach its events URI. */
START_TEST(test_a_relay_serves_what_its_upstream_serves)
{
    write_data("{'flags':{'f1':{'key':'f1','version':1,'on':true}}}");
    app_start();
    app_ready();
    int up_port = g.port;
    char uri[64];
    snprintf(uri, sizeof uri, "http://127.0.0.1:%d", up_port);
    for (int polling = 0; polling < 2; polling++) {
        ld_net_config *c = ld_net_config_new(KEY);
        ck_assert_int_eq(ld_net_config_set_stream_uri(c, uri), 0);
        ck_assert_int_eq(ld_net_config_set_base_uri(c, uri), 0);
        evr_start();
        ck_assert_int_eq(ld_net_config_set_events_uri(c, evr.url), 0);
        struct lds_app_options o = {0};
        o.upstream = c;
        o.polling = polling;
        o.server.bind_address = "127.0.0.1";
        o.server.sdk_key = KEY;
        o.server.log = log_fn;
        o.server.log_level = LDS_LOG_INFO;
        o.server.log_level_set = 1;
        lds_app *relay = lds_app_new(B, &o);
        ld_net_config_free(c);
        ck_assert_ptr_nonnull(relay);
        ld_test_await_ok(ld_data_system_ready(lds_app_data_system(relay)));
        if (g.conn)
            evhttp_connection_free(g.conn);
        g.conn = NULL;
        g.port = lds_app_port(relay);
        json_t *j = get_json("/sdk/latest-flags/f1", 200);
        /* polling comes after the change streamed */
        ck_assert(json_is_true(json_object_get(j, "on")) == !polling);
        json_decref(j);
        struct resp r;
        send_req(EVHTTP_REQ_POST, "/bulk", "[{\"kind\":\"custom\"}]", &r);
        ck_assert_int_eq(r.code, 202);
        free(r.body);
        for (int i = 0; i < 5000 && evr.n < 1; i++)
            loop_once();
        ck_assert_int_eq(evr.n, 1);
        ck_assert_str_eq(evr.seen[0].path, "/bulk");
        ck_assert_str_eq(evr.seen[0].auth, KEY);
        ck_assert_str_eq(evr.seen[0].body, "[{\"kind\":\"custom\"}]");
        j = get_json("/status", 200);
        ck_assert_int_eq(
            json_integer_value(json_object_get(json_object_get(j, "events"), "forwarded")), 1);
        json_decref(j);
        if (!polling) {
            write_data("{'flags':{'f1':{'key':'f1','version':1,'on':false}}}");
            j = poll_for("/sdk/latest-flags/f1", "on", "false");
            ck_assert_int_eq(json_integer_value(json_object_get(j, "version")), 2);
            json_decref(j);
        }
        evhttp_connection_free(g.conn);
        g.conn = NULL;
        g.port = up_port;
        ld_test_await_ok(lds_app_close(relay));
        lds_app_free(relay);
        evr_stop();
    }
    app_stop();
}
END_TEST

Suite *ld_suite_serve_e2e(void)
{
    Suite *s = suite_create("serve_e2e");
    TCase *tc = tcase_create("files");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_stream_gets_put_then_patch_and_delete_when_the_file_changes);
    tcase_add_test(tc, test_a_relay_serves_what_its_upstream_serves);
    tcase_add_test(tc, test_file_changed_right_after_start_is_served_with_a_higher_version);
    tcase_add_test(tc, test_broken_file_interrupts_and_last_good_data_is_served);
    tcase_add_test(tc, test_flag_values_are_served_as_launchdarkly_flags);
    tcase_add_test(tc, test_missing_data_file_at_start_then_created);
    tcase_add_test(tc, test_config_map_style_symlink_swap_is_seen);
    tcase_add_test(tc, test_burst_of_rewrites_streams_increasing_versions_and_ends_at_the_last);
    tcase_add_test(tc, test_several_files_merge_and_a_key_defined_twice_interrupts);
    suite_add_tcase(s, tc);
    tc = tcase_create("evalx");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_evalx_answers_what_the_evaluator_says);
    tcase_add_test(tc, test_regex_stopped_by_its_limit_is_logged_once_per_version);
    suite_add_tcase(s, tc);
    tc = tcase_create("load");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ten_thousand_requests_with_64_in_flight_all_answered);
    tcase_add_test(tc, test_close_with_100_streams_and_requests_in_flight_then_free);
    tcase_add_test(tc, test_free_while_closing_cancels_the_close);
    tcase_add_test(tc, test_app_that_cannot_listen_is_not_made_and_leaks_nothing);
    suite_add_tcase(s, tc);
    return s;
}
