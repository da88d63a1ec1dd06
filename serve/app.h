/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/app.h: the wiring of ldasync-serve (internal, not installed), used by
 * serve/main.c and by the end-to-end tests, so that both run the same thing:
 *
 *   memory store <- data system (the file synchronizer on the data files,
 *                   which also brings the first data: no initializer; or,
 *                   relaying, the streaming or polling synchronizer)
 *                        | change listener -> lds_server_changed()
 *                        | status          -> /status (ld_data_system_status)
 *   evaluator (on the store) -> evalx
 *   relaying, an event forwarder -> the events SDKs post, sent upstream
 *
 * Log lines (through the server options' log function, at or below their
 * level): each data-source status change ("data source STATE", or "data
 * source STATE: ERROR-KIND: MESSAGE" as a warning when the state is not
 * valid and the error is one not logged yet), "flag data loaded" once
 * the data system is ready, "no flag data: MESSAGE (serving an empty store)"
 * as an error when every source failed, and "stopped" when a close is done.
 * A data file that is missing (or broken) at start is not fatal: the store
 * stays empty and uninitialized, the data source stays `initializing` with
 * the file's error as its last error (/status shows both; sink.h: an
 * interruption before the first data does not leave `initializing`), the
 * ready future stays pending (the synchronizer keeps watching), and the
 * file's data is served as soon as it appears.
 *
 * Everything runs on the loop of `base`, which must have libevent threading
 * on (evthread_use_pthreads() before event_base_new()) for the files to be
 * parsed off the loop (file_source.h).
 */
#ifndef LDASYNC_SERVE_APP_H
#define LDASYNC_SERVE_APP_H

#include <stddef.h>
#include <stdint.h>

#include "server.h"

struct event_base;

struct lds_app_options {
    const char *const *paths; /* the data files (copied) */
    size_t n_paths;           /* at least 1, unless `upstream` is set or `daemon` */
    /* A relay: no files; the data comes from LaunchDarkly (or another
     * relay) as `upstream` says (copied), by streaming, or by polling. */
    const ld_net_config *upstream;
    int polling;
    int64_t poll_ms; /* the synchronizer's polling interval (0: 1000) */
    /* Redis (redis.h): with files or an upstream, the data is written into
     * Redis as LaunchDarkly's Relay Proxy writes it and served from there
     * through a cache of `cache_ttl_ms` (0: none; < 0: forever); in daemon
     * mode (`daemon`: no files, no upstream) what Redis holds is read
     * every poll_ms into memory and served from there. */
    const char *redis_url;    /* NULL: no Redis */
    const char *redis_prefix; /* NULL: "launchdarkly" */
    int64_t cache_ttl_ms;
    int daemon;
    /* The server's options (strings copied); `status` and `status_arg` are
     * the app's own (ignored here). The log function and level serve the
     * app's lines too. */
    struct lds_server_options server;
};

typedef struct lds_app lds_app;

/* Makes the store, the data system on the data files, the evaluator and the
 * server (listening when this returns), and starts loading the files.
 * @return the app, or NULL (with a line logged) when memory ran out, an
 * argument is NULL or the server cannot listen. */
lds_app *lds_app_new(struct event_base *base, const struct lds_app_options *options);

/* The server's bound port. */
int lds_app_port(const lds_app *app);

/* The parts, borrowed (for tests): the store, the data system, the
 * evaluator, the server. */
ld_store *lds_app_store(const lds_app *app);
ld_data_system *lds_app_data_system(const lds_app *app);
ld_evaluator *lds_app_evaluator(const lds_app *app);
lds_server *lds_app_server(const lds_app *app);

/* The orderly shutdown (what SIGINT or SIGTERM do): the server closes
 * (streams ended, waiting requests answered), then the event forwarder
 * (what it holds gets 5 s to go upstream), the data system, and the store,
 * one after the other whatever each one's outcome, and "stopped" is
 * logged. @return a new reference, fulfilled once all that is done (the
 * same future if called again); NULL if `app` is NULL or memory ran out. */
ld_future *lds_app_close(lds_app *app);

/* Frees everything: the server, the event forwarder, the data system, the
 * evaluator and the store, closed or not (a close still running is cancelled: its future is
 * rejected with LD_ECANCELED). Runs the loop without blocking between the
 * steps (future.h's lifetime rule), so call it from outside the loop's
 * callbacks; let the loop run once more before freeing the base.
 * NULL-safe. */
void lds_app_free(lds_app *app);

#endif /* LDASYNC_SERVE_APP_H */
