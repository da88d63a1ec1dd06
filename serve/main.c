/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync-serve: serves LaunchDarkly flag data files to LaunchDarkly SDKs.
 *
 * The files (--data, LaunchDarkly's flag data file format) are read by the
 * file data source into an in-memory store through the data system, and
 * watched: every change reaches the store, and the streams as patch and
 * delete events. serve/server.c answers the requests.
 *
 *   memory store <- data system (file synchronizer)
 *                        | change listener -> lds_server_changed()
 *                        | status          -> /status
 *   evaluator (on the store) -> evalx
 *
 * That wiring, and the shutdown below, are in serve/app.c (the end-to-end
 * tests run the same); this file parses the options, logs, and handles the
 * signals.
 *
 * SIGINT or SIGTERM: the server closes (streams ended, waiting requests
 * answered, answers being written sent: at most 10 s for clients that do
 * not read), then the data system, then the store; everything is freed.
 * A second signal stops at once (still freeing everything).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <ldasync/ldasync.h>
#include <ldasync/redis.h>

#include "app.h"

struct app {
    struct event_base *base;
    lds_app *app;
    struct event *sigint, *sigterm;
    int log_level;
    int signals;
    int exit_code;
};

static void log_line(int level, const char *line, void *arg)
{
    (void)arg;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03dZ %-5s %s\n", when, (int)(tv.tv_usec / 1000), lds_log_level_name(level),
            line);
}

LD_PRINTF(3, 4) static void logf_(struct app *app, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lds_log_v(log_line, app, app->log_level, level, fmt, ap);
    va_end(ap);
}

static void usage(FILE *to)
{
    fputs("Usage: ldasync-serve --data FILE [--data FILE ...] [OPTION...]\n"
          "       ldasync-serve --sdk-key KEY [--stream-uri URI | --polling] [OPTION...]\n"
          "       ldasync-serve --redis URL [--daemon-mode] [OPTION...]\n"
          "Serves LaunchDarkly flag data files, or relays LaunchDarkly's data (without\n"
          "--data), to LaunchDarkly SDKs: server-side polling\n"
          "(/sdk/latest-all, /sdk/latest-flags[/KEY], /sdk/latest-segments[/KEY]),\n"
          "streaming (/all), client-side evaluation (/sdk/evalx/ENV/contexts/CONTEXT and\n"
          "REPORT /sdk/evalx/ENV/context) and /status. The files are watched: changes are\n"
          "served at once and streamed as patch and delete events.\n"
          "\n"
          "  --data FILE            a flag data file (JSON: \"flags\", \"flagValues\",\n"
          "                         \"segments\"); repeatable, the files merge\n"
          "  --port N               the TCP port (default 8030; 0: any free port)\n"
          "  --bind ADDRESS         the address to listen on (default 127.0.0.1)\n"
          "  --sdk-key KEY          the SDK key server-side requests must send in\n"
          "                         Authorization (default: $LDASYNC_SDK_KEY; none: no key\n"
          "                         is asked for); relaying, also the key sent upstream\n"
          "Relaying (no --data): the data comes from LaunchDarkly, or from another\n"
          "ldasync-serve, by streaming (default) or polling:\n"
          "  --stream-uri URI       the upstream's streaming URI (default\n"
          "                         " LD_DEFAULT_STREAM_URI ")\n"
          "  --base-uri URI         the upstream's polling URI (default\n"
          "                         " LD_DEFAULT_BASE_URI ")\n"
          "  --polling              poll the upstream (every 30 s) instead of streaming\n"
          "  --ca-file FILE         the CAs (PEM) that the upstream's certificate must\n"
          "                         come from (default: the system's)\n"
          "  --proxy URL            an HTTP proxy to the upstream (default: as $https_proxy\n"
          "                         says; \"\": none)\n"
          "  --events-uri URI       where the events SDKs post here (/bulk, /diagnostic,\n"
          "                         /mobile..., /events/bulk/ENV) are forwarded (default\n"
          "                         " LD_DEFAULT_EVENTS_URI ")\n"
          "Redis (LaunchDarkly's persistent store layout, shared with its SDKs and\n"
          "Relay Proxy):\n"
          "  --redis URL            with --data or relaying: also write the data into\n"
          "                         Redis, and serve it from there through a cache;\n"
          "                         alone (no --data, no --sdk-key to relay), or with\n"
          "                         --daemon-mode: serve what Redis holds (daemon mode),\n"
          "                         read every --poll-interval. URL:\n"
          "                         redis://[:PASSWORD@]HOST[:PORT][/DB] or unix:PATH\n"
          "  --redis-prefix P       the prefix of the keys (default launchdarkly)\n"
          "  --cache-ttl SECONDS    how long the cache keeps what it read (default -1:\n"
          "                         forever: it serves while Redis is away and writes\n"
          "                         the whole data set back when Redis returns empty;\n"
          "                         0: no cache)\n"
          "  --daemon-mode          serve what Redis holds, also with --sdk-key\n"
          "Serving:\n"
          "  --client-side-id ID    the client-side ID (environment) whose evalx requests\n"
          "                         are answered; repeatable; others get 404 (default:\n"
          "                         any ID is answered, all as one environment)\n"
          "  --max-connections N    connections served at once (default 10240)\n"
          "  --heartbeat SECONDS    a comment on every stream this often (default 60)\n"
          "  --poll-interval MS     how often to look at the files where they cannot be\n"
          "                         watched, or at Redis in daemon mode (default 1000)\n"
          "  --log-level LEVEL      error, warn, info (default) or debug (one line per\n"
          "                         request)\n"
          "  --loop-probe MS        measure how long the loop is held, with a timer due\n"
          "                         every MS milliseconds; /status reports it as \"loop\"\n"
          "                         (default: off)\n"
          "  --help                 this text\n"
          "  --version              the version\n",
          to);
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* The shutdown is done (or was cancelled by a second signal). */
static void app_closed(ld_future *f, void *arg)
{
    (void)f;
    struct app *app = arg;
    event_base_loopexit(app->base, NULL);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    struct app *app = arg;
    if (app->signals++ > 0) {
        logf_(app, LDS_LOG_WARN, "signal %d again: stopping now", (int)sig);
        event_base_loopbreak(app->base);
        return;
    }
    logf_(app, LDS_LOG_INFO, "signal %d: shutting down", (int)sig);
    ld_future_on_complete(lds_app_close(app->app), app_closed, app);
}

/* Runs what is queued (future.h's lifetime rule) without blocking. */
static void drain(struct event_base *base)
{
    for (int i = 0; i < 1000; i++)
        if (event_base_loop(base, EVLOOP_NONBLOCK) == 1)
            break;
}

int main(int argc, char **argv)
{
    enum {
        O_DATA = 1,
        O_PORT,
        O_BIND,
        O_KEY,
        O_CLIENT_ID,
        O_MAXCONN,
        O_HEARTBEAT,
        O_POLL,
        O_LOG,
        O_PROBE,
        O_STREAM_URI,
        O_BASE_URI,
        O_POLLING,
        O_CA_FILE,
        O_PROXY,
        O_EVENTS_URI,
        O_REDIS,
        O_REDIS_PREFIX,
        O_CACHE_TTL,
        O_DAEMON,
        O_HELP,
        O_VERSION
    };
    static const struct option opts[] = {{"data", required_argument, NULL, O_DATA},
                                         {"port", required_argument, NULL, O_PORT},
                                         {"bind", required_argument, NULL, O_BIND},
                                         {"sdk-key", required_argument, NULL, O_KEY},
                                         {"client-side-id", required_argument, NULL, O_CLIENT_ID},
                                         {"max-connections", required_argument, NULL, O_MAXCONN},
                                         {"heartbeat", required_argument, NULL, O_HEARTBEAT},
                                         {"poll-interval", required_argument, NULL, O_POLL},
                                         {"log-level", required_argument, NULL, O_LOG},
                                         {"loop-probe", required_argument, NULL, O_PROBE},
                                         {"stream-uri", required_argument, NULL, O_STREAM_URI},
                                         {"base-uri", required_argument, NULL, O_BASE_URI},
                                         {"polling", no_argument, NULL, O_POLLING},
                                         {"ca-file", required_argument, NULL, O_CA_FILE},
                                         {"proxy", required_argument, NULL, O_PROXY},
                                         {"events-uri", required_argument, NULL, O_EVENTS_URI},
                                         {"redis", required_argument, NULL, O_REDIS},
                                         {"redis-prefix", required_argument, NULL, O_REDIS_PREFIX},
                                         {"cache-ttl", required_argument, NULL, O_CACHE_TTL},
                                         {"daemon-mode", no_argument, NULL, O_DAEMON},
                                         {"help", no_argument, NULL, O_HELP},
                                         {"version", no_argument, NULL, O_VERSION},
                                         {NULL, 0, NULL, 0}};
    struct app app = {0};
    app.log_level = LDS_LOG_INFO;
    const char **paths = calloc((size_t)argc, sizeof *paths);
    size_t n_paths = 0;
    const char **ids = calloc((size_t)argc, sizeof *ids);
    size_t n_ids = 0;
    long port = 8030, maxconn = 0, heartbeat = 60, poll_ms = 1000, probe_ms = 0;
    const char *bind = "127.0.0.1";
    const char *key = getenv("LDASYNC_SDK_KEY");
    const char *stream_uri = NULL, *base_uri = NULL, *ca_file = NULL, *proxy = NULL;
    const char *events_uri = NULL;
    int polling = 0, upstream_opts = 0, daemon = 0;
    const char *redis = NULL, *redis_prefix = NULL;
    long cache_ttl = -1;
    int cache_ttl_set = 0;
    if (!paths || !ids) {
        free(paths);
        free(ids);
        return 1;
    }
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_DATA:
            paths[n_paths++] = optarg;
            break;
        case O_PORT:
            if (parse_int(optarg, 0, 65535, &port) != 0) {
                fprintf(stderr, "ldasync-serve: --port: not a port: %s\n", optarg);
                goto bad_usage;
            }
            break;
        case O_BIND:
            bind = optarg;
            break;
        case O_KEY:
            key = optarg;
            break;
        case O_CLIENT_ID:
            if (!optarg[0]) {
                fprintf(stderr, "ldasync-serve: --client-side-id: empty\n");
                goto bad_usage;
            }
            ids[n_ids++] = optarg;
            break;
        case O_MAXCONN:
            if (parse_int(optarg, 1, 1000000, &maxconn) != 0) {
                fprintf(stderr, "ldasync-serve: --max-connections: 1 to 1000000: %s\n", optarg);
                goto bad_usage;
            }
            break;
        case O_HEARTBEAT:
            if (parse_int(optarg, 1, 86400, &heartbeat) != 0) {
                fprintf(stderr, "ldasync-serve: --heartbeat: 1 to 86400 seconds: %s\n", optarg);
                goto bad_usage;
            }
            break;
        case O_POLL:
            if (parse_int(optarg, 1, 86400000, &poll_ms) != 0) {
                fprintf(stderr, "ldasync-serve: --poll-interval: 1 to 86400000 ms: %s\n", optarg);
                goto bad_usage;
            }
            break;
        case O_PROBE:
            if (parse_int(optarg, 1, 1000, &probe_ms) != 0) {
                fprintf(stderr, "ldasync-serve: --loop-probe: 1 to 1000 ms: %s\n", optarg);
                goto bad_usage;
            }
            break;
        case O_STREAM_URI:
            stream_uri = optarg;
            upstream_opts++;
            break;
        case O_BASE_URI:
            base_uri = optarg;
            upstream_opts++;
            break;
        case O_POLLING:
            polling = 1;
            upstream_opts++;
            break;
        case O_CA_FILE:
            ca_file = optarg;
            upstream_opts++;
            break;
        case O_PROXY:
            proxy = optarg;
            upstream_opts++;
            break;
        case O_EVENTS_URI:
            events_uri = optarg;
            upstream_opts++;
            break;
        case O_REDIS: {
            ld_redis_options *ro = ld_redis_options_new();
            int rc = ro ? ld_redis_options_set_url(ro, optarg) : LD_ENOMEM;
            ld_redis_options_free(ro);
            if (rc != 0) {
                fprintf(
                    stderr,
                    "ldasync-serve: --redis: not a Redis URL (redis://[:PASSWORD@]HOST[:PORT][/DB] "
                    "or unix:PATH): %s\n",
                    optarg);
                goto bad_usage;
            }
            redis = optarg;
            break;
        }
        case O_REDIS_PREFIX:
            if (!optarg[0]) {
                fprintf(stderr, "ldasync-serve: --redis-prefix: empty\n");
                goto bad_usage;
            }
            redis_prefix = optarg;
            break;
        case O_CACHE_TTL:
            if (parse_int(optarg, -1, 31536000, &cache_ttl) != 0) {
                fprintf(stderr,
                        "ldasync-serve: --cache-ttl: -1 (forever), 0 (no cache) or up to "
                        "31536000 seconds: %s\n",
                        optarg);
                goto bad_usage;
            }
            cache_ttl_set = 1;
            break;
        case O_DAEMON:
            daemon = 1;
            break;
        case O_LOG:
            app.log_level = lds_log_level_parse(optarg);
            if (app.log_level < 0) {
                fprintf(stderr, "ldasync-serve: --log-level: error, warn, info or debug: %s\n",
                        optarg);
                goto bad_usage;
            }
            break;
        case O_HELP:
            usage(stdout);
            free(paths);
            free(ids);
            return 0;
        case O_VERSION:
            printf("ldasync-serve (ldasync) %s\n", ld_version_string());
            free(paths);
            free(ids);
            return 0;
        default:
            usage(stderr);
            goto bad_usage;
        }
    }
    if ((redis_prefix || cache_ttl_set || daemon) && !redis) {
        fprintf(stderr,
                "ldasync-serve: --redis-prefix, --cache-ttl and --daemon-mode need --redis\n");
        goto bad_usage;
    }
    /* daemon mode: serve what Redis holds (no files, no upstream) */
    if (redis && n_paths == 0 && upstream_opts == 0 && (!key || !key[0]))
        daemon = 1;
    if (daemon && (n_paths > 0 || upstream_opts > 0)) {
        fprintf(stderr, "ldasync-serve: --daemon-mode serves what Redis holds: no --data, no "
                        "upstream options\n");
        goto bad_usage;
    }
    if (optind < argc || (n_paths == 0 && !daemon && (!key || !key[0]))) {
        fprintf(stderr,
                optind < argc ? "ldasync-serve: unexpected argument: %s\n"
                              : "ldasync-serve: no --data file, and no --sdk-key to relay%s\n",
                optind < argc ? argv[optind] : "");
        usage(stderr);
        goto bad_usage;
    }
    if (n_paths > 0 && upstream_opts > 0) {
        fprintf(stderr, "ldasync-serve: --data serves files: the upstream's options "
                        "(--stream-uri, --base-uri, --polling, --ca-file, --proxy, "
                        "--events-uri) are for relaying, without --data\n");
        goto bad_usage;
    }
    ld_net_config *upstream = NULL;
    if (n_paths == 0 && !daemon) {
        upstream = ld_net_config_new(key);
        const char *bad = !upstream                                                 ? "--sdk-key"
                          : ld_net_config_set_stream_uri(upstream, stream_uri) != 0 ? "--stream-uri"
                          : ld_net_config_set_base_uri(upstream, base_uri) != 0     ? "--base-uri"
                          : ld_net_config_set_ca_file(upstream, ca_file) != 0       ? "--ca-file"
                          : ld_net_config_set_proxy(upstream, proxy) != 0           ? "--proxy"
                          : ld_net_config_set_events_uri(upstream, events_uri) != 0 ? "--events-uri"
                                                                                    : NULL;
        if (bad) {
            fprintf(stderr, "ldasync-serve: %s: not valid%s\n", bad,
                    upstream ? "" : " (an SDK key is [A-Za-z0-9._-], at most 8192 bytes)");
            ld_net_config_free(upstream);
            goto bad_usage;
        }
        ld_net_config_set_wrapper(upstream, "ldasync-serve", ld_version_string());
    }

    signal(SIGPIPE, SIG_IGN);
    /* one file descriptor per connection: take what the hard limit allows */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    /* and never accept more connections than there are descriptors (an
     * accept failing with EMFILE is retried by libevent at once, forever):
     * keep 64 for the files, the listener and libevent */
    long max_fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                       ? (long)rl.rlim_cur - 64
                       : 1000000;
    if (max_fds < 1)
        max_fds = 1;
    long want = maxconn ? maxconn : 10240;
    if (want > max_fds) {
        logf_(&app, LDS_LOG_WARN, "--max-connections %ld: only %ld file descriptors: serving %ld",
              want, max_fds + 64, max_fds);
        maxconn = max_fds;
    }
    /* threads: the file data source parses on a worker thread */
    if (evthread_use_pthreads() != 0)
        logf_(&app, LDS_LOG_WARN, "no libevent threading: files are parsed on the loop");
    /* the loop probe needs timers to the microsecond: libevent's default
     * clock on Linux is the coarse one (a few milliseconds a tick) */
    struct event_config *cfg = event_config_new();
    if (cfg && probe_ms > 0)
        event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    /* epoll: the changes of a pass in one epoll_ctl per descriptor. evhttp
     * turns reading off and writing on for each answer, and the reverse
     * once it is written: four epoll_ctl calls a request, two with this
     * (latest-flags/{key}: +20-25% requests per second). Safe here: the
     * server never dup()s a descriptor it watches, the one case in which
     * libevent's change list misbehaves. */
    if (cfg)
        event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    app.base = cfg ? event_base_new_with_config(cfg) : NULL;
    if (cfg)
        event_config_free(cfg);
    struct lds_app_options o = {0};
    o.paths = paths;
    o.n_paths = n_paths;
    o.poll_ms = poll_ms;
    o.upstream = upstream;
    o.polling = polling;
    o.redis_url = redis;
    o.redis_prefix = redis_prefix;
    o.cache_ttl_ms = cache_ttl < 0 ? LD_CACHE_FOREVER : (int64_t)cache_ttl * 1000;
    o.daemon = daemon;
    o.server.bind_address = bind;
    o.server.port = (int)port;
    o.server.sdk_key = key;
    o.server.client_side_ids = ids;
    o.server.n_client_side_ids = n_ids;
    o.server.max_connections = (int)maxconn;
    o.server.heartbeat_ms = (int)heartbeat * 1000;
    o.server.loop_probe_ms = (int)probe_ms;
    o.server.log_level = app.log_level;
    o.server.log_level_set = 1;
    o.server.log = log_line;
    o.server.log_arg = &app;
    app.app = lds_app_new(app.base, &o);
    if (!app.app) {
        app.exit_code = 1;
        goto out;
    }
    for (size_t i = 0; i < n_paths; i++)
        logf_(&app, LDS_LOG_INFO, "data file: %s", paths[i]);
    if (redis && daemon)
        logf_(&app, LDS_LOG_INFO,
              "daemon mode: serving what Redis holds (%s, prefix %s), read every %ld ms", redis,
              redis_prefix ? redis_prefix : "launchdarkly", poll_ms);
    else if (redis)
        logf_(&app, LDS_LOG_INFO, "writing the data into Redis (%s, prefix %s), cache %s", redis,
              redis_prefix ? redis_prefix : "launchdarkly",
              cache_ttl < 0    ? "forever"
              : cache_ttl == 0 ? "off"
                               : "on");
    if (upstream) {
        logf_(&app, LDS_LOG_INFO, "relaying %s by %s",
              polling ? ld_net_config_base_uri(upstream) : ld_net_config_stream_uri(upstream),
              polling ? "polling" : "streaming");
        logf_(&app, LDS_LOG_INFO, "forwarding events to %s", ld_net_config_events_uri(upstream));
    }
    for (size_t i = 0; i < n_ids; i++)
        logf_(&app, LDS_LOG_INFO, "client-side ID: %s", ids[i]);
    if (!key || !key[0])
        logf_(&app, LDS_LOG_WARN,
              "no SDK key (--sdk-key or LDASYNC_SDK_KEY): server-side "
              "endpoints answer anyone");
    /* (the key itself stays out of the log) */
    logf_(&app, LDS_LOG_INFO, "try: curl%s http://%s:%d/sdk/latest-all",
          key && key[0] ? " -H \"Authorization: $LDASYNC_SDK_KEY\"" : "", bind,
          lds_app_port(app.app));
    app.sigint = evsignal_new(app.base, SIGINT, on_signal, &app);
    app.sigterm = evsignal_new(app.base, SIGTERM, on_signal, &app);
    if (!app.sigint || !app.sigterm || event_add(app.sigint, NULL) != 0 ||
        event_add(app.sigterm, NULL) != 0) {
        logf_(&app, LDS_LOG_ERROR, "cannot catch signals");
        app.exit_code = 1;
        goto out;
    }
    event_base_dispatch(app.base);

out:
    if (app.sigint)
        event_free(app.sigint);
    if (app.sigterm)
        event_free(app.sigterm);
    lds_app_free(app.app);
    app.app = NULL;
    if (app.base) {
        drain(app.base);
        event_base_free(app.base);
    }
    ld_net_config_free(upstream);
    libevent_global_shutdown();
    free(paths);
    free(ids);
    return app.exit_code;

bad_usage: /* a bad option or value: said on stderr */
    free(paths);
    free(ids);
    return 2;
}
