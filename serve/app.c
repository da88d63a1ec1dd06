/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/app.c: the wiring of ldasync-serve (see app.h): the store, the data
 * system on the data files, the evaluator and the server, and the ordered
 * shutdown.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include <event2/event.h>
#include <ldasync/redis.h>

#include "app.h"
#include "serve-internal.h"

struct lds_app {
    struct event_base *base;
    ld_store *store;
    ld_store *redis; /* daemon mode: the Redis store read into `store`; else NULL */
    ld_data_system *ds;
    ld_evaluator *ev;
    lds_server *srv;
    ld_event_forwarder *events; /* relaying: the events SDKs post go upstream */
    lds_log_fn log;
    void *log_arg;
    int log_level;
    int64_t error_logged_ms; /* the last error logged (its time and kind) */
    enum ld_data_source_error_kind error_logged_kind;
    /* the shutdown's steps (held to cancel them when freed first) */
    ld_future *closing[4];
};

LD_PRINTF(3, 4) static void app_log(struct lds_app *app, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lds_log_v(app->log, app->log_arg, app->log_level, level, fmt, ap);
    va_end(ap);
}

static void on_change(ld_data_system *ds, const ld_kind *kind, const char *key, int64_t version,
                      const json_t *item, void *arg)
{
    (void)ds;
    struct lds_app *app = arg;
    if (app->srv)
        lds_server_changed(app->srv, kind, key, version, item);
}

/* A `matches` clause stopped by a limit (once per flag or segment version). */
static void on_limit(const ld_kind *kind, const char *key, int64_t version, void *arg)
{
    app_log(arg, LDS_LOG_WARN,
            "%s %.200s version %lld: a regular expression stopped at its limit (no match)",
            kind == ld_kind_segments() ? "segment" : "flag", key, (long long)version);
}

/* A status change: the state, with the error when it is one not logged
 * yet (the status keeps its last error after the state is valid again, so
 * that a later `off` does not bring an error already over back). */
static void on_status(ld_data_system *ds, const ld_data_source_status *st, void *arg)
{
    (void)ds;
    struct lds_app *app = arg;
    const char *state = ld_data_source_state_name(st->state);
    bool new_error = st->error && (st->error->time_ms != app->error_logged_ms ||
                                   st->error->kind != app->error_logged_kind);
    if (st->error) {
        app->error_logged_ms = st->error->time_ms;
        app->error_logged_kind = st->error->kind;
    }
    if (new_error && st->state != LD_DATA_SOURCE_STATE_VALID)
        app_log(app, LDS_LOG_WARN, "data source %s: %s: %s", state ? state : "?",
                ld_data_source_error_kind_name(st->error->kind), st->error->message);
    else
        app_log(app, LDS_LOG_INFO, "data source %s", state ? state : "?");
}

static int status_of(ld_data_source_status *out, void *arg)
{
    struct lds_app *app = arg;
    return app->ds ? ld_data_system_status(app->ds, out) : LD_EINVAL;
}

/* Runs while the app lives: lds_app_free() frees the data system (which
 * rejects this future) and runs the loop before it frees the app. */
static void on_ready(ld_future *f, void *arg)
{
    struct lds_app *app = arg;
    if (ld_future_is_fulfilled(f)) {
        app_log(app, LDS_LOG_INFO, "flag data loaded");
        lds_server_warm(app->srv);
    } else if (ld_future_error(f) != LD_ECLOSED && ld_future_error(f) != LD_ECANCELED)
        app_log(app, LDS_LOG_ERROR, "no flag data: %s (serving an empty store)",
                ld_future_error_message(f));
}

lds_app *lds_app_new(struct event_base *base, const struct lds_app_options *options)
{
    if (!options)
        return NULL;
    struct lds_app *app = lds_calloc(1, sizeof *app);
    if (!app)
        return NULL;
    app->base = base;
    app->log = options->server.log;
    app->log_arg = options->server.log_arg;
    app->log_level = options->server.log_level_set ? options->server.log_level : LDS_LOG_INFO;
    bool daemon = options->daemon && options->redis_url;
    if (!base || (!daemon && !options->upstream && (!options->paths || options->n_paths == 0))) {
        app_log(app, LDS_LOG_ERROR, "cannot start (out of memory?)"); /* as main.c says it */
        lds_free(app);
        return NULL;
    }
    ld_store *redis = NULL;
    if (options->redis_url) {
        ld_redis_options *ro = ld_redis_options_new();
        if (!ro || ld_redis_options_set_url(ro, options->redis_url) != 0 ||
            (options->redis_prefix &&
             ld_redis_options_set_prefix(ro, options->redis_prefix) != 0)) {
            app_log(app, LDS_LOG_ERROR, "cannot start: bad Redis options (%s)", options->redis_url);
            ld_redis_options_free(ro);
            lds_free(app);
            return NULL;
        }
        redis = ld_redis_store_new(base, ro);
        ld_redis_options_free(ro);
        if (!redis)
            goto fail;
    }
    if (daemon) {
        /* what Redis holds, read into memory every poll_ms and served from there */
        app->redis = redis;
        app->store = ld_memory_store_new(base);
    } else if (redis) {
        /* written into Redis as the Relay Proxy does, served through the cache */
        app->store = options->cache_ttl_ms != 0
                         ? ld_caching_store_new(base, redis, options->cache_ttl_ms)
                         : redis;
    } else {
        app->store = ld_memory_store_new(base);
    }
    /* The synchronizer alone: its first update is the files as they are,
     * and it keeps the versions of everything it yields monotonic. A file
     * initializer before it would read the files once more, and a file
     * edited between that read and the synchronizer's first one would
     * reach the store, and the streams, at the file's version, which is
     * not above the one the initializer gave (SDKs ignore such a patch). */
    ld_synchronizer *sync = NULL;
    if (app->store && daemon)
        sync = ld_store_synchronizer_new(base, app->redis,
                                         options->poll_ms > 0 ? options->poll_ms : 1000);
    else if (app->store && options->upstream)
        sync = options->polling ? ld_polling_synchronizer_new(base, options->upstream)
                                : ld_streaming_synchronizer_new(base, options->upstream);
    else if (app->store)
        sync = ld_file_synchronizer_new(base, options->paths, options->n_paths, options->poll_ms);
    if (!sync)
        goto fail;
    app->ds = ld_data_system_new(base, app->store, NULL, 0, sync);
    app->ev = ld_evaluator_new(app->store);
    if (!app->ds || !app->ev || ld_evaluator_set_limit_fn(app->ev, on_limit, app) != 0 ||
        ld_data_system_add_change_listener(app->ds, on_change, app) <= 0 ||
        ld_data_system_add_status_listener(app->ds, on_status, app) <= 0)
        goto fail;
    if (options->upstream && !(app->events = ld_event_forwarder_new(base, options->upstream, 0)))
        goto fail;
    struct lds_server_options o = options->server;
    o.status = status_of;
    o.status_arg = app;
    o.persistent = redis ? (daemon ? app->redis : app->store) : NULL;
    o.events = app->events;
    app->srv = lds_server_new(base, app->store, app->ev, &o);
    if (!app->srv) {
        lds_app_free(app); /* the server logged why */
        return NULL;
    }
    if (ld_future_on_complete(ld_data_system_ready(app->ds), on_ready, app) != 0)
        goto fail;
    return app;
fail:
    app_log(app, LDS_LOG_ERROR, "cannot start (out of memory?)");
    lds_app_free(app);
    return NULL;
}

int lds_app_port(const lds_app *app)
{
    return app && app->srv ? lds_server_port(app->srv) : 0;
}

ld_store *lds_app_store(const lds_app *app)
{
    return app ? app->store : NULL;
}

ld_data_system *lds_app_data_system(const lds_app *app)
{
    return app ? app->ds : NULL;
}

ld_evaluator *lds_app_evaluator(const lds_app *app)
{
    return app ? app->ev : NULL;
}

lds_server *lds_app_server(const lds_app *app)
{
    return app ? app->srv : NULL;
}

/* ---- shutdown: server, data system, store, one after the other ---------------------- */

/* A step goes on whatever the outcome of the one before. */
static void go_on_anyway(ld_future *in, ld_future *out, void *arg)
{
    (void)in;
    (void)arg;
    ld_future_fulfill(out);
}

static ld_future *settled(ld_future *f)
{
    return ld_future_catch(f, go_on_anyway, NULL);
}

/* `out` completes when `step` does (at once if it could not be made). */
static void then_after(ld_future *out, ld_future *step)
{
    step = settled(step);
    if (!step || ld_future_forward(out, step) != 0)
        ld_future_fulfill(out);
}

/* What the forwarder holds gets 5 s to go upstream. */
static void close_events(ld_future *in, ld_future *out, void *arg)
{
    (void)in;
    struct lds_app *app = arg;
    if (!app->events) {
        ld_future_fulfill(out);
        return;
    }
    struct timeval five = {5, 0};
    then_after(out, ld_future_timeout(ld_event_forwarder_close(app->events), &five));
}

static void close_ds(ld_future *in, ld_future *out, void *arg)
{
    (void)in;
    struct lds_app *app = arg;
    then_after(out, ld_data_system_close(app->ds));
}

static void close_store(ld_future *in, ld_future *out, void *arg)
{
    (void)in;
    struct lds_app *app = arg;
    ld_future *fs[2] = {settled(ld_store_close(app->store)),
                        app->redis ? settled(ld_store_close(app->redis)) : NULL};
    then_after(out, ld_future_all(app->base, fs, app->redis ? 2 : 1));
}

static void closed(ld_future *in, ld_future *out, void *arg)
{
    (void)in;
    struct lds_app *app = arg;
    app_log(app, LDS_LOG_INFO, "stopped");
    ld_future_fulfill(out);
}

ld_future *lds_app_close(lds_app *app)
{
    if (!app)
        return NULL;
    if (!app->closing[3]) {
        ld_future *e = ld_future_then(settled(lds_server_close(app->srv)), close_events, app);
        ld_future *a = ld_future_then(e ? ld_future_ref(e) : NULL, close_ds, app);
        ld_future *b = ld_future_then(a ? ld_future_ref(a) : NULL, close_store, app);
        ld_future *c = ld_future_then(b ? ld_future_ref(b) : NULL, closed, app);
        if (!c) {
            ld_future *steps[] = {e, a, b};
            for (int i = 0; i < 3; i++) {
                if (steps[i])
                    ld_future_cancel(steps[i]);
                ld_future_unref(steps[i]);
            }
            return NULL;
        }
        app->closing[0] = e;
        app->closing[1] = a;
        app->closing[2] = b;
        app->closing[3] = c;
    }
    return ld_future_ref(app->closing[3]);
}

/* Runs what is queued (future.h's lifetime rule) without blocking. */
static void drain(struct event_base *base)
{
    for (int i = 0; i < 1000; i++)
        if (event_base_loop(base, EVLOOP_NONBLOCK) == 1)
            break;
}

void lds_app_free(lds_app *app)
{
    if (!app)
        return;
    /* a close still running stops here: its steps must not run on a freed
     * app (a step that is complete is left as it is) */
    for (int i = 0; i < 4; i++) {
        if (app->closing[i]) {
            ld_future_cancel(app->closing[i]);
            ld_future_unref(app->closing[i]);
            app->closing[i] = NULL;
        }
    }
    lds_server_free(app->srv);
    app->srv = NULL;
    ld_event_forwarder_free(app->events); /* after the server, which borrows it */
    app->events = NULL;
    ld_data_system_free(app->ds);
    app->ds = NULL;
    ld_evaluator_free(app->ev);
    app->ev = NULL;
    if (app->base)
        drain(app->base);
    ld_store_free(app->store);
    app->store = NULL;
    ld_store_free(app->redis); /* after the data system, whose synchronizer reads it */
    app->redis = NULL;
    if (app->base)
        drain(app->base);
    lds_free(app);
}
