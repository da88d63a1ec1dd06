/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync-test-service: the REST service that LaunchDarkly's SDK test
 * harness (sdk-test-harness) drives, as every LaunchDarkly SDK ships one.
 * The harness creates clients with a configuration (POST /), sends them
 * commands (POST /clients/N: evaluate, evaluateAll, identifyEvent,
 * customEvent, flushEvents, secureModeHash, contextBuild, contextConvert,
 * getBigSegmentStoreStatus), and deletes them (DELETE /clients/N);
 * GET / says what this SDK can do, DELETE / stops the service. The
 * harness plays LaunchDarkly's streaming, polling and events services, and checks
 * what each client asks of them and what it answers.
 *
 * Everything runs on one libevent loop, the service's HTTP server and the
 * clients alike, as it would in a server built on ldasync. The program uses
 * the public API only.
 *
 *   ldasync-test-service [--port N] [--host ADDR] [--verbose]
 *
 * --port 0 takes a free port. The service logs
 * "listening on http://ADDR:PORT/" to stderr once it listens.
 *
 * Not installed: `make` builds it; contract-tests/README.md says how to run
 * the harness against it.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <jansson.h>
#include <ldasync/ldasync.h>

#include "test-service.h"

/* What the harness may run against this SDK. Events: the identify, custom
 * and flush commands, gzip when "enableGzip" asks for it, anonymous
 * contexts omitted or redacted, contexts inline in every event. */
static const char *const capabilities[] = {
    "server-side",
    "server-side-polling",
    "strongly-typed",
    "context-type",
    "user-type",
    "all-flags-with-reasons",
    "all-flags-client-side-only",
    "all-flags-details-only-for-tracked-flags",
    "secure-mode-hash",
    "tags",
    "wrapper",
    "service-endpoints",
    "filtering",
    "filtering-strict",
    "polling-gzip",
    "tls:verify-peer",
    "tls:skip-verify-peer",
    "tls:custom-ca",
    "big-segments",
    "event-gzip",
    "optional-event-gzip",
    "omit-anonymous-contexts",
    "anonymous-redaction",
    "inline-context-all",
};

/* The harness waits 5 s for a client when it does not say otherwise. */
#define DEFAULT_START_WAIT_MS 5000
/* A request body larger than this is refused (the harness sends small ones). */
#define MAX_BODY (16 * 1024 * 1024)
/* And headers larger than this (evhttp buffers them whole otherwise). */
#define MAX_HEADERS (64 * 1024)

struct svc;

/* A client the harness made. */
struct tclient {
    struct tclient *prev, *next;
    struct svc *svc;
    uint64_t id;
    ld_client *client;
    ld_big_segment_store *bss; /* the harness's callback store, or NULL */
    ld_future *bs_first;       /* with bss: fulfilled with the first status (bs_code()) */
    char *tag;
};

/* A request that waits for a future: answered from the future's callback.
 * libevent keeps a request whose connection went away until it is
 * answered, so answering late is always safe. */
enum pending_kind { P_CREATE, P_EVAL, P_ALL, P_BS_STATUS, P_FLUSH, P_CLOSE };

struct pending {
    struct pending *prev, *next;
    struct svc *svc;
    struct evhttp_request *req; /* NULL once answered at shutdown */
    ld_future *fut;             /* our reference, to cancel it at shutdown */
    enum pending_kind kind;
    /* P_CREATE, P_CLOSE (NULL once freed at shutdown) */
    struct tclient *tc;
    bool init_can_fail;
    /* P_EVAL */
    bool detail;
    ld_value_type type;
};

struct svc {
    struct event_base *base;
    struct evhttp *http;
    struct tclient *clients;
    struct pending *pending;
    uint64_t next_id;
    bool verbose;
    bool stopping;
};

LD_PRINTF(2, 3) static void vlog(const struct svc *svc, const char *fmt, ...)
{
    if (!svc->verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ------------------------------------------------------------------------- */
/* Answers                                                                   */

static void reply_text(struct evhttp_request *req, int code, const char *fmt, ...) LD_PRINTF(3, 4);

static void reply_text(struct evhttp_request *req, int code, const char *fmt, ...)
{
    struct evbuffer *b = evbuffer_new();
    if (b && fmt) {
        va_list ap;
        va_start(ap, fmt);
        evbuffer_add_vprintf(b, fmt, ap);
        va_end(ap);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "text/plain; charset=utf-8");
    }
    evhttp_send_reply(req, code, code < 300 ? "OK" : code < 500 ? "Bad Request" : "Error", b);
    if (b)
        evbuffer_free(b);
}

/* Answers 200 with `v` (stolen; NULL: out of memory, a 500). */
static void reply_json(struct evhttp_request *req, json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    if (!s) {
        reply_text(req, 500, "out of memory");
        return;
    }
    struct evbuffer *b = evbuffer_new();
    if (!b || evbuffer_add(b, s, strlen(s)) != 0) {
        free(s);
        if (b)
            evbuffer_free(b);
        reply_text(req, 500, "out of memory");
        return;
    }
    free(s);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* ------------------------------------------------------------------------- */
/* Reading the harness's JSON. Each getter treats null as absent, as the
 * service specification says, and fails (returns -1, with `*why`) on a
 * value of another type, which the service answers with 400. */

/* The member `name` of `o` when it is of the type `is` checks: 0 with *v
 * (NULL when absent or null); -1 with `*why` for another type. */
static int get_typed(const json_t *o, const char *name, int (*is)(const json_t *), json_t **v,
                     const char **why)
{
    *v = json_object_get(o, name);
    if (!*v || json_is_null(*v)) {
        *v = NULL;
        return 0;
    }
    if (!is(*v)) {
        *why = name;
        return -1;
    }
    return 0;
}

static int is_object(const json_t *v)
{
    return json_is_object(v);
}

static int is_string(const json_t *v)
{
    return json_is_string(v);
}

static int is_boolean(const json_t *v)
{
    return json_is_boolean(v);
}

static int get_obj(const json_t *o, const char *name, json_t **out, const char **why)
{
    return get_typed(o, name, is_object, out, why);
}

static int get_str(const json_t *o, const char *name, const char **out, const char **why)
{
    json_t *v;
    int rc = get_typed(o, name, is_string, &v, why);
    *out = v ? json_string_value(v) : NULL;
    return rc;
}

/* A string that is also absent when empty (the harness's URIs). */
static int get_nonempty_str(const json_t *o, const char *name, const char **out, const char **why)
{
    if (get_str(o, name, out, why) != 0)
        return -1;
    if (*out && !**out)
        *out = NULL;
    return 0;
}

static int get_bool(const json_t *o, const char *name, bool *out, const char **why)
{
    json_t *v;
    int rc = get_typed(o, name, is_boolean, &v, why);
    *out = json_is_true(v);
    return rc;
}

/* A number of milliseconds (the harness sends integers); absent: -1. */
static int get_ms(const json_t *o, const char *name, int64_t *out, const char **why)
{
    json_t *v = json_object_get(o, name);
    *out = -1;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v)) {
        *why = name;
        return -1;
    }
    double d = json_number_value(v);
    if (!isfinite(d) || d < 0 || d > 1e15) {
        *why = name;
        return -1;
    }
    *out = (int64_t)d;
    return 0;
}

/* The request's body as JSON (a new reference), or NULL with `*why`. */
static json_t *read_body(struct evhttp_request *req, const char **why)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    if (n > MAX_BODY) {
        *why = "the body is too large";
        return NULL;
    }
    const char *p = n ? (const char *)evbuffer_pullup(in, -1) : "";
    json_error_t err;
    json_t *j = json_loadb(p, n, 0, &err);
    if (!j)
        *why = "the body is not JSON";
    else if (!json_is_object(j)) {
        json_decref(j);
        j = NULL;
        *why = "the body is not a JSON object";
    }
    return j;
}

/* The context of a command: "context", or the old-style "user". NULL with
 * `*why` when neither is there or it is not a valid context. */
static ld_context *command_context(const json_t *params, const char **why)
{
    json_t *j = json_object_get(params, "context");
    if (!j || json_is_null(j))
        j = json_object_get(params, "user");
    if (!j || json_is_null(j)) {
        *why = "no context";
        return NULL;
    }
    return ld_context_from_json(j, why);
}

/* ------------------------------------------------------------------------- */
/* Pending requests                                                          */

static struct pending *pending_new(struct svc *svc, struct evhttp_request *req,
                                   enum pending_kind kind)
{
    struct pending *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->svc = svc;
    p->req = req;
    p->kind = kind;
    p->next = svc->pending;
    if (p->next)
        p->next->prev = p;
    svc->pending = p;
    return p;
}

static void pending_free(struct pending *p)
{
    struct svc *svc = p->svc;
    if (p->prev)
        p->prev->next = p->next;
    else
        svc->pending = p->next;
    if (p->next)
        p->next->prev = p->prev;
    ld_future_unref(p->fut);
    free(p);
}

/* Waits for `f` (stolen): cb(f, p) answers. -1: out of memory (`p` is
 * still the caller's). */
static int pending_wait(struct pending *p, ld_future *f, ld_future_cb cb)
{
    if (!f)
        return -1;
    p->fut = ld_future_ref(f);
    if (ld_future_on_complete(f, cb, p) != 0) {
        ld_future_unref(p->fut);
        p->fut = NULL;
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Clients                                                                   */

/* A big segment store status as one int, for a future. */
static int64_t bs_code(const ld_big_segment_store_status *st)
{
    return (st->available ? 1 : 0) | (st->stale ? 2 : 0);
}

static void on_big_segment_status(ld_client *client, const ld_big_segment_store_status *st,
                                  void *arg)
{
    struct tclient *tc = arg;
    (void)client;
    if (ld_future_is_pending(tc->bs_first))
        ld_future_fulfill_int(tc->bs_first, bs_code(st));
}

/* tc->bs_first, fulfilled by a listener when the first status is known. */
static int listen_big_segments(struct tclient *tc)
{
    tc->bs_first = ld_future_new(tc->svc->base);
    if (!tc->bs_first ||
        ld_client_add_big_segment_status_listener(tc->client, on_big_segment_status, tc) < 0)
        return -1;
    return 0;
}

/* Takes `tc` out of the service's list (if it is there). */
static void tclient_unlink(struct tclient *tc)
{
    struct svc *svc = tc->svc;
    if (tc->prev)
        tc->prev->next = tc->next;
    else if (svc->clients == tc)
        svc->clients = tc->next;
    if (tc->next)
        tc->next->prev = tc->prev;
    tc->prev = tc->next = NULL;
}

static void tclient_free(struct tclient *tc)
{
    tclient_unlink(tc);
    ld_client_free(tc->client);
    if (tc->bs_first) /* a getBigSegmentStoreStatus waiting for it answers */
        ld_future_reject(tc->bs_first, LD_ECANCELED, "the client was deleted");
    ld_future_unref(tc->bs_first);
    /* Its operations still pending are cancelled (big_segments.h). */
    ld_big_segment_store_free(tc->bss);
    free(tc->tag);
    free(tc);
}

static void tclient_link(struct tclient *tc)
{
    struct svc *svc = tc->svc;
    tc->prev = NULL;
    tc->next = svc->clients;
    if (tc->next)
        tc->next->prev = tc;
    svc->clients = tc;
}

static struct tclient *tclient_find(struct svc *svc, const char *path)
{
    /* "/clients/N" */
    const char *prefix = "/clients/";
    size_t n = strlen(prefix);
    if (strncmp(path, prefix, n) != 0)
        return NULL;
    const char *digits = path + n;
    if (*digits < '1' || *digits > '9')
        return NULL;
    char *end;
    errno = 0;
    unsigned long long id = strtoull(digits, &end, 10);
    if (errno || *end)
        return NULL;
    for (struct tclient *tc = svc->clients; tc; tc = tc->next)
        if (tc->id == id)
            return tc;
    return NULL;
}

/* Sets the application tags as LaunchDarkly's SDKs do: a value that is not
 * valid (too long, a byte outside [A-Za-z0-9._-]) is left out, the other
 * still sent. */
static int set_tags(ld_net_config *cfg, const char *id, const char *version)
{
    if (id && ld_net_config_set_application(cfg, id, NULL) != 0)
        id = NULL;
    if (version && ld_net_config_set_application(cfg, NULL, version) != 0)
        version = NULL;
    int rc = ld_net_config_set_application(cfg, id, version);
    return rc == LD_EINVAL ? 0 : rc;
}

/* "bigSegments": the harness's callback store (stored in `*bss`, which the
 * options borrow) and its settings. */
static int apply_big_segments(struct event_base *base, const json_t *bs, ld_client_options *opts,
                              ld_big_segment_store **bss, const char **why)
{
    const char *uri;
    int64_t size, ttl, poll, stale;
    json_t *v = json_object_get(bs, "userCacheSize");
    if (v && !json_is_null(v) && !json_is_integer(v)) {
        *why = "bigSegments.userCacheSize";
        return -1;
    }
    size = json_is_integer(v) ? json_integer_value(v) : 0; /* <= 0: the default */
    if (get_str(bs, "callbackUri", &uri, why) || get_ms(bs, "userCacheTimeMs", &ttl, why) ||
        get_ms(bs, "statusPollIntervalMs", &poll, why) || get_ms(bs, "staleAfterMs", &stale, why))
        return -1;
    if (!uri || !(*bss = ts_callback_store_new(base, uri))) {
        *why = "bigSegments.callbackUri";
        return -1;
    }
    if (ld_client_options_set_big_segment_cache(opts, size > INT_MAX ? INT_MAX : (int)size, ttl,
                                                poll) != 0 ||
        ld_client_options_set_big_segments(opts, *bss, stale) != 0) {
        *why = "bigSegments";
        return -1;
    }
    return 0;
}

/* "events" (present: events on): the event processor's settings. An
 * attribute reference the SDK refuses is left out, as LaunchDarkly's SDKs
 * log and ignore it. */
static int apply_events(const json_t *ev, ld_client_options *opts, const char **why)
{
    int64_t capacity, flush_ms;
    bool diagnostics, all_private, gzip, omit_anonymous;
    json_t *privates = json_object_get(ev, "globalPrivateAttributes");
    if (json_is_null(privates))
        privates = NULL;
    if (privates && !json_is_array(privates)) {
        *why = "events.globalPrivateAttributes";
        return -1;
    }
    if (get_ms(ev, "capacity", &capacity, why) || get_ms(ev, "flushIntervalMs", &flush_ms, why) ||
        get_bool(ev, "enableDiagnostics", &diagnostics, why) ||
        get_bool(ev, "allAttributesPrivate", &all_private, why) ||
        get_bool(ev, "enableGzip", &gzip, why) ||
        get_bool(ev, "omitAnonymousContexts", &omit_anonymous, why))
        return -1;
    ld_events_config *ec = ld_events_config_new();
    if (!ec) {
        *why = "out of memory";
        return -1;
    }
    const char *bad = NULL;
    size_t i;
    json_t *ref;
    json_array_foreach(privates, i, ref)
    {
        if (!json_is_string(ref)) {
            bad = "events.globalPrivateAttributes";
            break;
        }
        if (ld_events_config_add_private_attribute(ec, json_string_value(ref)) == LD_ENOMEM) {
            bad = "out of memory";
            break;
        }
    }
    /* A capacity or an interval of 0 means the SDK's default. */
    if (!bad && capacity > 0 &&
        ld_events_config_set_capacity(ec, capacity > INT_MAX ? INT_MAX : (int)capacity) != 0)
        bad = "events.capacity";
    if (!bad && flush_ms > 0 && ld_events_config_set_flush_interval(ec, flush_ms) != 0)
        bad = "events.flushIntervalMs";
    if (!bad && (ld_events_config_set_diagnostics(ec, diagnostics, 900000) != 0 ||
                 ld_events_config_set_all_attributes_private(ec, all_private) != 0 ||
                 ld_events_config_set_gzip(ec, gzip) != 0 ||
                 ld_events_config_set_omit_anonymous_contexts(ec, omit_anonymous) != 0))
        bad = "events";
    if (!bad && (ld_client_options_set_events_config(opts, ec) != 0 ||
                 ld_client_options_set_events(opts, true) != 0))
        bad = "out of memory";
    ld_events_config_free(ec);
    if (bad) {
        *why = bad;
        return -1;
    }
    return 0;
}

/* Applies the harness's "configuration" to `cfg` and `opts` (and makes
 * the big segment store, `*bss`). -1 with `*why` (a 400) for a field of
 * the wrong type or a value the SDK refuses. */
static int apply_config(struct event_base *base, const json_t *conf, ld_net_config *cfg,
                        ld_client_options *opts, ld_big_segment_store **bss, const char **why)
{
    json_t *endpoints, *streaming, *polling, *tags, *tls, *wrapper, *bigseg, *events;
    if (get_obj(conf, "serviceEndpoints", &endpoints, why) ||
        get_obj(conf, "streaming", &streaming, why) || get_obj(conf, "polling", &polling, why) ||
        get_obj(conf, "tags", &tags, why) || get_obj(conf, "tls", &tls, why) ||
        get_obj(conf, "wrapper", &wrapper, why) || get_obj(conf, "bigSegments", &bigseg, why) ||
        get_obj(conf, "events", &events, why))
        return -1;
    /* Accepted and not used (yet): persistentDataStore, persistence,
     * hooks, clientSide. Their type is still checked. */
    static const char *const ignored[] = {"persistentDataStore", "persistence", "hooks",
                                          "clientSide"};
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++) {
        json_t *unused;
        if (get_obj(conf, ignored[i], &unused, why))
            return -1;
    }

    const char *stream_uri = NULL, *base_uri = NULL, *events_uri = NULL;
    if (endpoints && (get_nonempty_str(endpoints, "streaming", &stream_uri, why) ||
                      get_nonempty_str(endpoints, "polling", &base_uri, why) ||
                      get_nonempty_str(endpoints, "events", &events_uri, why)))
        return -1;

    /* Streaming unless only "polling" is given. */
    bool use_polling = polling && !streaming;
    const char *filter = NULL;
    if (streaming) {
        const char *uri;
        int64_t delay;
        if (get_nonempty_str(streaming, "baseUri", &uri, why) ||
            get_ms(streaming, "initialRetryDelayMs", &delay, why))
            return -1;
        if (uri)
            stream_uri = uri;
        if (!use_polling && get_str(streaming, "filter", &filter, why))
            return -1;
        if (delay >= 0 && ld_net_config_set_reconnect_delay(cfg, delay) != 0) {
            *why = "streaming.initialRetryDelayMs";
            return -1;
        }
    }
    if (polling) {
        const char *uri, *pfilter;
        int64_t interval;
        if (get_nonempty_str(polling, "baseUri", &uri, why) ||
            get_ms(polling, "pollIntervalMs", &interval, why) ||
            get_str(polling, "filter", &pfilter, why))
            return -1;
        if (uri)
            base_uri = uri;
        if (use_polling)
            filter = pfilter;
        if (interval > 0 && ld_net_config_set_poll_interval(cfg, interval) != 0) {
            *why = "polling.pollIntervalMs";
            return -1;
        }
    }
    if (events) {
        const char *uri;
        if (get_nonempty_str(events, "baseUri", &uri, why))
            return -1;
        if (uri)
            events_uri = uri;
    }
    if (ld_net_config_set_stream_uri(cfg, stream_uri) != 0) {
        *why = "the streaming URI";
        return -1;
    }
    if (ld_net_config_set_base_uri(cfg, base_uri) != 0) {
        *why = "the polling URI";
        return -1;
    }
    if (ld_net_config_set_events_uri(cfg, events_uri) != 0) {
        *why = "the events URI";
        return -1;
    }
    /* A filter key that is not valid is not sent, as LaunchDarkly's SDKs
     * log and ignore it ("filtering-strict"). */
    if (filter && *filter)
        (void)ld_net_config_set_payload_filter(cfg, filter);

    if (tags) {
        const char *id, *version;
        if (get_str(tags, "applicationId", &id, why) ||
            get_str(tags, "applicationVersion", &version, why))
            return -1;
        if (set_tags(cfg, id, version) != 0) {
            *why = "out of memory";
            return -1;
        }
    }
    if (wrapper) {
        const char *name, *version;
        if (get_str(wrapper, "name", &name, why) || get_str(wrapper, "version", &version, why))
            return -1;
        if (name && *name &&
            ld_net_config_set_wrapper(cfg, name, version && *version ? version : NULL) != 0) {
            *why = "wrapper";
            return -1;
        }
    }
    if (tls) {
        bool skip;
        const char *ca;
        if (get_bool(tls, "skipVerifyPeer", &skip, why) ||
            get_nonempty_str(tls, "customCAFile", &ca, why))
            return -1;
        if (ld_net_config_set_verify_peer(cfg, !skip) != 0 ||
            (ca && ld_net_config_set_ca_file(cfg, ca) != 0)) {
            *why = "tls";
            return -1;
        }
    }
    if (bigseg && apply_big_segments(base, bigseg, opts, bss, why) != 0)
        return -1;
    /* Events only when "events" is there. */
    if (events ? apply_events(events, opts, why) != 0
               : ld_client_options_set_events(opts, false) != 0) {
        if (!events)
            *why = "events";
        return -1;
    }
    if (ld_client_options_set_net_config(opts, cfg) != 0 ||
        ld_client_options_set_polling(opts, use_polling) != 0) {
        *why = "out of memory";
        return -1;
    }
    return 0;
}

static void on_client_ready(ld_future *done, void *arg)
{
    struct pending *p = arg;
    struct tclient *tc = p->tc;
    struct svc *svc = p->svc;
    struct evhttp_request *req = p->req;
    bool ok = ld_future_is_fulfilled(done);
    if (!req) {
        /* Answered at shutdown, which freed the client. */
    } else if (ok || p->init_can_fail) {
        if (!ok)
            vlog(svc, "client %" PRIu64 " (%s): not initialized, allowed: %s", tc->id, tc->tag,
                 ld_future_error_message(done));
        char where[64];
        snprintf(where, sizeof where, "/clients/%" PRIu64, tc->id);
        tclient_link(tc);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Location", where);
        reply_text(req, 201, NULL);
        vlog(svc, "client %" PRIu64 " (%s): created", tc->id, tc->tag);
    } else {
        reply_text(req, 500, "the client did not initialize: %s", ld_future_error_message(done));
        vlog(svc, "client %" PRIu64 " (%s): failed: %s", tc->id, tc->tag,
             ld_future_error_message(done));
        tclient_free(tc);
    }
    pending_free(p);
}

/* POST /: makes a client and answers once it is ready (or could not be). */
static void create_client(struct svc *svc, struct evhttp_request *req, json_t *body)
{
    const char *why = NULL;
    json_t *conf;
    const char *tag, *key;
    int64_t wait_ms;
    bool init_can_fail;
    if (get_str(body, "tag", &tag, &why) || get_obj(body, "configuration", &conf, &why)) {
        reply_text(req, 400, "\"%s\" has the wrong type", why);
        return;
    }
    if (!conf) {
        reply_text(req, 400, "no \"configuration\"");
        return;
    }
    if (get_str(conf, "credential", &key, &why) ||
        get_ms(conf, "startWaitTimeMs", &wait_ms, &why) ||
        get_bool(conf, "initCanFail", &init_can_fail, &why)) {
        reply_text(req, 400, "\"%s\" has the wrong type", why);
        return;
    }
    if (!key) {
        reply_text(req, 400, "no \"credential\"");
        return;
    }
    if (wait_ms <= 0)
        wait_ms = DEFAULT_START_WAIT_MS;
    ld_net_config *cfg = ld_net_config_new(key);
    if (!cfg) {
        reply_text(req, 400, "the SDK refused the credential");
        return;
    }
    ld_client_options *opts = ld_client_options_new();
    if (!opts) {
        ld_net_config_free(cfg);
        reply_text(req, 500, "out of memory");
        return;
    }
    ld_big_segment_store *bss = NULL;
    int rc = apply_config(svc->base, conf, cfg, opts, &bss, &why);
    ld_net_config_free(cfg);
    if (rc != 0) {
        ld_client_options_free(opts);
        ld_big_segment_store_free(bss);
        reply_text(req, 400, "configuration: %s", why);
        return;
    }
    struct tclient *tc = calloc(1, sizeof *tc);
    struct pending *p = tc ? pending_new(svc, req, P_CREATE) : NULL;
    if (tc) {
        tc->svc = svc;
        tc->id = ++svc->next_id;
        tc->tag = strdup(tag ? tag : "");
        tc->client = ld_client_new(svc->base, opts);
        tc->bss = bss;
        if (bss && tc->client && listen_big_segments(tc) != 0) {
            ld_client_free(tc->client);
            tc->client = NULL;
        }
    } else {
        ld_big_segment_store_free(bss);
    }
    ld_client_options_free(opts);
    if (!p || !tc->tag || !tc->client) {
        if (p)
            pending_free(p);
        if (tc)
            tclient_free(tc);
        reply_text(req, 500, "out of memory");
        return;
    }
    p->tc = tc;
    p->init_can_fail = init_can_fail;
    struct timeval after = {(time_t)(wait_ms / 1000), (suseconds_t)(wait_ms % 1000) * 1000};
    if (pending_wait(p, ld_future_timeout(ld_client_ready(tc->client), &after), on_client_ready) !=
        0) {
        pending_free(p);
        tclient_free(tc);
        reply_text(req, 500, "out of memory");
    }
}

/* ------------------------------------------------------------------------- */
/* Commands                                                                  */

/* A number as the int variations serve it: an integer as it is, a real
 * truncated toward zero and saturated at INT64_MIN and INT64_MAX. */
static json_t *int_value(json_t *v)
{
    if (!json_is_real(v))
        return json_incref(v);
    double d = trunc(json_real_value(v));
    if (d >= 9223372036854775807.0)
        return json_integer(INT64_MAX);
    if (d <= -9223372036854775808.0)
        return json_integer(INT64_MIN);
    return json_integer((json_int_t)d);
}

static int64_t to_int64(json_t *v)
{
    json_t *i = int_value(v);
    int64_t n = json_integer_value(i);
    json_decref(i);
    return n;
}

static void on_evaluated(ld_future *done, void *arg)
{
    struct pending *p = arg;
    struct evhttp_request *req = p->req;
    if (!req) {
        pending_free(p);
        return;
    }
    if (ld_future_is_rejected(done)) {
        reply_text(req, 500, "the evaluation failed: %s", ld_future_error_message(done));
        pending_free(p);
        return;
    }
    json_t *out = json_object();
    json_t *value = NULL;
    if (p->kind == P_ALL) {
        json_object_set(out, "state", ld_future_json(done));
    } else if (p->detail) {
        const ld_detail *d = ld_future_ptr(done);
        value = ld_detail_value(d) ? json_incref(ld_detail_value(d)) : json_null();
        if (p->type == LD_VALUE_INT) {
            json_t *t = int_value(value);
            json_decref(value);
            value = t;
        }
        json_object_set_new(out, "value", value);
        if (ld_detail_variation_index(d) >= 0)
            json_object_set_new(out, "variationIndex", json_integer(ld_detail_variation_index(d)));
        json_object_set_new(out, "reason", ld_detail_reason_to_json(d));
    } else {
        switch (p->type) {
        case LD_VALUE_BOOL:
            value = json_boolean(ld_future_bool(done));
            break;
        case LD_VALUE_INT:
            value = json_integer(ld_future_int(done));
            break;
        default:
            value = ld_future_json(done) ? json_incref(ld_future_json(done)) : json_null();
            break;
        }
        json_object_set_new(out, "value", value);
    }
    reply_json(req, out);
    pending_free(p);
}

/* A context that is not valid: LaunchDarkly's SDKs serve the default with
 * the USER_NOT_SPECIFIED error. */
static void answer_invalid_context(struct evhttp_request *req, json_t *fallback, bool detail)
{
    json_t *out = json_object();
    json_object_set(out, "value", fallback ? fallback : json_null());
    if (detail)
        json_object_set_new(
            out, "reason",
            json_pack("{s:s,s:s}", "kind", "ERROR", "errorKind", "USER_NOT_SPECIFIED"));
    reply_json(req, out);
}

static int value_type(const char *name, ld_value_type *out)
{
    static const struct {
        const char *name;
        ld_value_type type;
    } types[] = {{"bool", LD_VALUE_BOOL},
                 {"int", LD_VALUE_INT},
                 {"double", LD_VALUE_DOUBLE},
                 {"string", LD_VALUE_STRING},
                 {"any", LD_VALUE_ANY}};
    if (!name) {
        *out = LD_VALUE_ANY;
        return 0;
    }
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strcmp(name, types[i].name) == 0) {
            *out = types[i].type;
            return 0;
        }
    return -1;
}

static void cmd_evaluate(struct tclient *tc, struct evhttp_request *req, json_t *params)
{
    const char *why = NULL, *key, *type_name;
    bool detail;
    if (!params) {
        reply_text(req, 400, "no \"evaluate\"");
        return;
    }
    if (get_str(params, "flagKey", &key, &why) || get_str(params, "valueType", &type_name, &why) ||
        get_bool(params, "detail", &detail, &why)) {
        reply_text(req, 400, "evaluate: \"%s\" has the wrong type", why);
        return;
    }
    ld_value_type type;
    if (!key || value_type(type_name, &type) != 0) {
        reply_text(req, 400, "evaluate: no \"flagKey\", or an unknown \"valueType\"");
        return;
    }
    json_t *fallback = json_object_get(params, "defaultValue");
    if (json_is_null(fallback))
        fallback = NULL;
    ld_context *ctx = command_context(params, &why);
    if (!ctx) {
        answer_invalid_context(req, fallback, detail);
        return;
    }
    ld_future *f;
    if (detail) {
        f = ld_client_variation_detail(tc->client, key, ctx, type, json_incref(fallback));
    } else {
        switch (type) {
        case LD_VALUE_BOOL:
            f = ld_client_bool_variation(tc->client, key, ctx, json_is_true(fallback));
            break;
        case LD_VALUE_INT:
            f = ld_client_int_variation(tc->client, key, ctx, to_int64(fallback));
            break;
        case LD_VALUE_DOUBLE:
            f = ld_client_number_variation(tc->client, key, ctx,
                                           fallback ? json_number_value(fallback) : 0);
            break;
        case LD_VALUE_STRING:
            f = ld_client_string_variation(tc->client, key, ctx, json_string_value(fallback));
            break;
        default:
            f = ld_client_json_variation(tc->client, key, ctx, json_incref(fallback));
            break;
        }
    }
    ld_context_unref(ctx);
    struct pending *p = pending_new(tc->svc, req, P_EVAL);
    if (p) {
        p->detail = detail;
        p->type = type;
    }
    if (!p || pending_wait(p, f, on_evaluated) != 0) {
        if (p)
            pending_free(p);
        else
            ld_future_unref(f);
        reply_text(req, 500, "out of memory");
    }
}

static void cmd_evaluate_all(struct tclient *tc, struct evhttp_request *req, json_t *params)
{
    const char *why = NULL;
    bool reasons = false, client_side = false, tracked = false;
    if (params && (get_bool(params, "withReasons", &reasons, &why) ||
                   get_bool(params, "clientSideOnly", &client_side, &why) ||
                   get_bool(params, "detailsOnlyForTrackedFlags", &tracked, &why))) {
        reply_text(req, 400, "evaluateAll: \"%s\" has the wrong type", why);
        return;
    }
    ld_context *ctx = params ? command_context(params, &why) : NULL;
    if (!ctx) {
        /* As LaunchDarkly's SDKs answer for a context that is not valid. */
        reply_json(req, json_pack("{s:{s:{},s:b}}", "state", "$flagsState", "$valid", 0));
        return;
    }
    unsigned options = (reasons ? LD_ALL_FLAGS_WITH_REASONS : 0) |
                       (client_side ? LD_ALL_FLAGS_CLIENT_SIDE_ONLY : 0) |
                       (tracked ? LD_ALL_FLAGS_DETAILS_ONLY_FOR_TRACKED_FLAGS : 0);
    ld_future *f = ld_client_all_flags(tc->client, ctx, options);
    ld_context_unref(ctx);
    struct pending *p = pending_new(tc->svc, req, P_ALL);
    if (!p || pending_wait(p, f, on_evaluated) != 0) {
        if (p)
            pending_free(p);
        else
            ld_future_unref(f);
        reply_text(req, 500, "out of memory");
    }
}

static void reply_big_segment_status(struct evhttp_request *req, int64_t code)
{
    reply_json(
        req, json_pack("{s:b,s:b}", "available", (int)(code & 1), "stale", (int)((code & 2) != 0)));
}

static void on_big_segment_status_known(ld_future *done, void *arg)
{
    struct pending *p = arg;
    if (p->req) {
        if (ld_future_is_fulfilled(done))
            reply_big_segment_status(p->req, ld_future_int(done));
        else
            reply_text(p->req, 500, "getBigSegmentStoreStatus: %s", ld_future_error_message(done));
    }
    pending_free(p);
}

/* The harness's getBigSegmentStoreStatus: {"available", "stale"}; before
 * the first poll of the store ended, once it has (10 s at most). */
static void cmd_big_segment_status(struct tclient *tc, struct evhttp_request *req)
{
    ld_big_segment_store_status st;
    int rc = ld_client_big_segment_store_status(tc->client, &st);
    if (rc == 0) {
        reply_big_segment_status(req, bs_code(&st));
        return;
    }
    if (rc != LD_EBUSY || !tc->bs_first) {
        reply_text(req, 500, "getBigSegmentStoreStatus: %s", ld_strerror(rc));
        return;
    }
    struct timeval after = {10, 0};
    struct pending *p = pending_new(tc->svc, req, P_BS_STATUS);
    if (!p || pending_wait(p, ld_future_timeout(ld_future_ref(tc->bs_first), &after),
                           on_big_segment_status_known) != 0) {
        if (p)
            pending_free(p);
        reply_text(req, 500, "out of memory");
    }
}

static void cmd_secure_mode_hash(struct tclient *tc, struct evhttp_request *req, json_t *params)
{
    const char *why = "no \"secureModeHash\"";
    ld_context *ctx = params ? command_context(params, &why) : NULL;
    if (!ctx) {
        reply_text(req, 400, "secureModeHash: %s", why);
        return;
    }
    char hash[65];
    int rc = ld_client_secure_mode_hash(tc->client, ctx, hash);
    ld_context_unref(ctx);
    if (rc != 0) {
        reply_text(req, 500, "secureModeHash: %s", ld_strerror(rc));
        return;
    }
    reply_json(req, json_pack("{s:s}", "result", hash));
}

/* One kind of a contextBuild: the builder's calls for its fields. */
static ld_context *build_single(const json_t *s, const char **why)
{
    const char *kind, *key, *name;
    bool anonymous;
    json_t *custom;
    json_t *private = json_object_get(s, "private");
    if (!json_is_object(s) || get_str(s, "kind", &kind, why) || get_str(s, "key", &key, why) ||
        get_str(s, "name", &name, why) || get_bool(s, "anonymous", &anonymous, why) ||
        get_obj(s, "custom", &custom, why) ||
        (private && !json_is_null(private) && !json_is_array(private))) {
        *why = "the parameters are not an object of the expected types";
        return NULL;
    }
    ld_context_builder *b = ld_context_builder_new(kind, key ? key : "");
    if (!b) {
        *why = "out of memory";
        return NULL;
    }
    if (name)
        ld_context_builder_set(b, "name", json_string(name));
    ld_context_builder_anonymous(b, anonymous);
    size_t i;
    json_t *v;
    json_array_foreach(private, i, v) if (json_is_string(v))
        ld_context_builder_private(b, json_string_value(v));
    const char *attr;
    json_object_foreach(custom, attr, v) ld_context_builder_set(b, attr, json_incref(v));
    ld_context *ctx = ld_context_builder_build(b, why);
    ld_context_builder_free(b);
    return ctx;
}

/* Answers {"output": the context's JSON as a string} or {"error": why}. */
static void answer_context(struct evhttp_request *req, ld_context *ctx, const char *why)
{
    if (!ctx) {
        reply_json(req, json_pack("{s:s}", "error", why ? why : "not a valid context"));
        return;
    }
    json_t *j = ld_context_to_json(ctx);
    ld_context_unref(ctx);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!s) {
        reply_text(req, 500, "out of memory");
        return;
    }
    reply_json(req, json_pack("{s:s}", "output", s));
    free(s);
}

static void cmd_context_build(struct evhttp_request *req, json_t *params)
{
    const char *why = NULL;
    if (!params) {
        reply_text(req, 400, "no \"contextBuild\"");
        return;
    }
    json_t *multi = json_object_get(params, "multi");
    json_t *single = json_object_get(params, "single");
    if (multi && !json_is_null(multi)) {
        if (!json_is_array(multi)) {
            reply_text(req, 400, "contextBuild: \"multi\" is not an array");
            return;
        }
        size_t n = json_array_size(multi), built = 0;
        ld_context **parts = calloc(n ? n : 1, sizeof *parts);
        if (!parts) {
            reply_text(req, 500, "out of memory");
            return;
        }
        for (; built < n; built++)
            if (!(parts[built] = build_single(json_array_get(multi, built), &why)))
                break;
        ld_context *ctx =
            built == n ? ld_context_multi((const ld_context *const *)parts, n, &why) : NULL;
        for (size_t i = 0; i < built; i++)
            ld_context_unref(parts[i]);
        free(parts);
        answer_context(req, ctx, why);
        return;
    }
    if (!single || json_is_null(single)) {
        reply_text(req, 400, "contextBuild: neither \"single\" nor \"multi\"");
        return;
    }
    ld_context *ctx = build_single(single, &why);
    answer_context(req, ctx, why);
}

static void cmd_context_convert(struct evhttp_request *req, json_t *params)
{
    const char *why = NULL, *input;
    if (!params || get_str(params, "input", &input, &why) || !input) {
        reply_text(req, 400, "contextConvert: no \"input\" string");
        return;
    }
    json_error_t err;
    json_t *j = json_loads(input, JSON_DECODE_ANY, &err);
    if (!j) {
        reply_json(req, json_pack("{s:s}", "error", "the input is not JSON"));
        return;
    }
    ld_context *ctx = ld_context_from_json(j, &why);
    json_decref(j);
    answer_context(req, ctx, why);
}

/* identifyEvent: an identify event for the context. A context that is not
 * valid sends nothing, as LaunchDarkly's SDKs log and drop it. */
static void cmd_identify_event(struct tclient *tc, struct evhttp_request *req, json_t *params)
{
    const char *why = "no \"identifyEvent\"";
    ld_context *ctx = params ? command_context(params, &why) : NULL;
    if (!ctx) {
        vlog(tc->svc, "client %" PRIu64 ": identifyEvent: nothing sent: %s", tc->id, why);
        reply_text(req, 202, NULL);
        return;
    }
    int rc = ld_client_identify(tc->client, ctx);
    ld_context_unref(ctx);
    if (rc != 0 && rc != LD_EBUSY) {
        reply_text(req, 500, "identifyEvent: %s", ld_strerror(rc));
        return;
    }
    reply_text(req, 202, NULL);
}

/* customEvent: ld_client_track(), or ld_client_track_metric() with a
 * "metricValue". "data": none when absent, or null with "omitNullData". */
static void cmd_custom_event(struct tclient *tc, struct evhttp_request *req, json_t *params)
{
    const char *why = NULL, *key;
    bool omit_null;
    if (!params) {
        reply_text(req, 400, "no \"customEvent\"");
        return;
    }
    json_t *metric = json_object_get(params, "metricValue");
    if (json_is_null(metric))
        metric = NULL;
    if (get_str(params, "eventKey", &key, &why) ||
        get_bool(params, "omitNullData", &omit_null, &why) || (metric && !json_is_number(metric))) {
        reply_text(req, 400, "customEvent: \"%s\" has the wrong type", why ? why : "metricValue");
        return;
    }
    if (!key) {
        reply_text(req, 400, "customEvent: no \"eventKey\"");
        return;
    }
    json_t *data = json_object_get(params, "data");
    if (json_is_null(data) && omit_null)
        data = NULL;
    ld_context *ctx = command_context(params, &why);
    if (!ctx) {
        vlog(tc->svc, "client %" PRIu64 ": customEvent: nothing sent: %s", tc->id, why);
        reply_text(req, 202, NULL);
        return;
    }
    int rc = metric ? ld_client_track_metric(tc->client, key, ctx, data, json_number_value(metric))
                    : ld_client_track(tc->client, key, ctx, data);
    ld_context_unref(ctx);
    if (rc == LD_EINVAL) {
        reply_text(req, 400, "customEvent: the SDK refused the event key");
        return;
    }
    if (rc != 0 && rc != LD_EBUSY) {
        reply_text(req, 500, "customEvent: %s", ld_strerror(rc));
        return;
    }
    reply_text(req, 202, NULL);
}

static void on_flushed(ld_future *done, void *arg)
{
    struct pending *p = arg;
    if (p->req) {
        if (ld_future_is_fulfilled(done))
            reply_text(p->req, 202, NULL);
        else
            reply_text(p->req, 500, "flushEvents: %s", ld_future_error_message(done));
    }
    pending_free(p);
}

/* flushEvents: answered once the flush is done (sent, or given up). */
static void cmd_flush_events(struct tclient *tc, struct evhttp_request *req)
{
    struct pending *p = pending_new(tc->svc, req, P_FLUSH);
    if (!p || pending_wait(p, ld_client_flush(tc->client), on_flushed) != 0) {
        if (p)
            pending_free(p);
        reply_text(req, 500, "out of memory");
    }
}

/* POST /clients/N */
static void client_command(struct svc *svc, struct tclient *tc, struct evhttp_request *req,
                           json_t *body)
{
    const char *why = NULL, *command;
    if (get_str(body, "command", &command, &why) || !command) {
        reply_text(req, 400, "no \"command\" string");
        return;
    }
    vlog(svc, "client %" PRIu64 ": %s", tc->id, command);
    json_t *params = json_object_get(body, command);
    if (params && json_is_null(params))
        params = NULL;
    if (params && !json_is_object(params)) {
        reply_text(req, 400, "\"%s\" is not an object", command);
        return;
    }
    if (strcmp(command, "evaluate") == 0)
        cmd_evaluate(tc, req, params);
    else if (strcmp(command, "evaluateAll") == 0)
        cmd_evaluate_all(tc, req, params);
    else if (strcmp(command, "getBigSegmentStoreStatus") == 0)
        cmd_big_segment_status(tc, req);
    else if (strcmp(command, "identifyEvent") == 0)
        cmd_identify_event(tc, req, params);
    else if (strcmp(command, "customEvent") == 0)
        cmd_custom_event(tc, req, params);
    else if (strcmp(command, "flushEvents") == 0)
        cmd_flush_events(tc, req);
    else if (strcmp(command, "secureModeHash") == 0)
        cmd_secure_mode_hash(tc, req, params);
    else if (strcmp(command, "contextBuild") == 0)
        cmd_context_build(req, params);
    else if (strcmp(command, "contextConvert") == 0)
        cmd_context_convert(req, params);
    else
        reply_text(req, 400, "unknown command \"%s\"", command);
}

static void on_closed(ld_future *done, void *arg)
{
    struct pending *p = arg;
    if (p->tc) {
        vlog(p->svc, "client %" PRIu64 " (%s): deleted%s", p->tc->id, p->tc->tag,
             ld_future_is_fulfilled(done) ? "" : " (its close did not end in time)");
        tclient_free(p->tc);
    }
    if (p->req)
        reply_text(p->req, 204, NULL);
    pending_free(p);
}

/* DELETE /clients/N: closes the client (its event processor sends what it
 * holds), frees it and answers once that is done, 5 s at most; meanwhile
 * the client is no longer found. */
static void delete_client(struct svc *svc, struct tclient *tc, struct evhttp_request *req)
{
    tclient_unlink(tc);
    struct timeval after = {5, 0};
    struct pending *p = pending_new(svc, req, P_CLOSE);
    if (p)
        p->tc = tc;
    if (!p ||
        pending_wait(p, ld_future_timeout(ld_client_close(tc->client), &after), on_closed) != 0) {
        if (p)
            pending_free(p);
        tclient_free(tc);
        reply_text(req, 204, NULL);
    }
}

/* ------------------------------------------------------------------------- */
/* The service                                                               */

static void answer_status(struct evhttp_request *req)
{
    json_t *caps = json_array();
    for (size_t i = 0; i < sizeof capabilities / sizeof *capabilities; i++)
        json_array_append_new(caps, json_string(capabilities[i]));
    reply_json(req, json_pack("{s:s,s:s,s:o}", "name", "ldasync", "clientVersion",
                              ld_version_string(), "capabilities", caps));
}

static void on_stop_answered(struct evhttp_request *req, void *arg)
{
    (void)req;
    struct svc *svc = arg;
    event_base_loopexit(svc->base, NULL);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct svc *svc = arg;
    const char *uri = evhttp_request_get_uri(req);
    struct evhttp_uri *parsed = evhttp_uri_parse(uri);
    const char *path = parsed ? evhttp_uri_get_path(parsed) : NULL;
    if (!path || !*path)
        path = "/";
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);

    if (svc->stopping) {
        reply_text(req, 503, "stopping");
    } else if (strcmp(path, "/") == 0) {
        if (cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD) {
            answer_status(req);
        } else if (cmd == EVHTTP_REQ_DELETE) {
            vlog(svc, "stopping (DELETE /)");
            svc->stopping = true;
            /* The loop ends once the answer is written (or after a
             * second, if the harness went away). */
            evhttp_request_set_on_complete_cb(req, on_stop_answered, svc);
            reply_text(req, 204, NULL);
            const struct timeval grace = {1, 0};
            event_base_loopexit(svc->base, &grace);
        } else if (cmd == EVHTTP_REQ_POST) {
            const char *why = NULL;
            json_t *body = read_body(req, &why);
            if (!body)
                reply_text(req, 400, "%s", why);
            else
                create_client(svc, req, body);
            json_decref(body);
        } else {
            reply_text(req, 405, "GET, POST or DELETE");
        }
    } else {
        struct tclient *tc = tclient_find(svc, path);
        if (!tc) {
            reply_text(req, 404, "no such client: %s", path);
        } else if (cmd == EVHTTP_REQ_DELETE) {
            delete_client(svc, tc, req);
        } else if (cmd == EVHTTP_REQ_POST) {
            const char *why = NULL;
            json_t *body = read_body(req, &why);
            if (!body)
                reply_text(req, 400, "%s", why);
            else
                client_command(svc, tc, req, body);
            json_decref(body);
        } else {
            reply_text(req, 405, "POST or DELETE");
        }
    }
    if (parsed)
        evhttp_uri_free(parsed);
}

static void usage(FILE *to)
{
    fputs("Usage: ldasync-test-service [--port N] [--host ADDR] [--verbose]\n"
          "The REST service of LaunchDarkly's SDK test harness, for ldasync.\n"
          "  --port N     the port to listen on (default 8000; 0: a free one)\n"
          "  --host ADDR  the address to listen on (default 127.0.0.1)\n"
          "  --verbose    log each client and command to stderr\n",
          to);
}

/* accept() failed, out of descriptors most likely (EMFILE): libevent would
 * try again at once, and log it, for as long as they lack (a busy loop and
 * megabytes of log a second). The listener pauses 100 ms instead. */
static struct event *accept_pause;

static void on_accept_error(struct evconnlistener *listener, void *arg)
{
    (void)arg;
    const struct timeval pause = {0, 100 * 1000};
    if (evconnlistener_disable(listener) == 0)
        event_add(accept_pause, &pause);
}

static void on_accept_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    evconnlistener_enable(arg);
}

static void on_signal(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct svc *svc = arg;
    svc->stopping = true;
    event_base_loopexit(svc->base, NULL);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"port", required_argument, NULL, 'p'},
                                             {"host", required_argument, NULL, 'H'},
                                             {"verbose", no_argument, NULL, 'v'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    struct svc svc = {0};
    long port = 8000;
    const char *host = "127.0.0.1";
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'p': {
            char *end;
            errno = 0;
            port = strtol(optarg, &end, 10);
            if (errno || *end || !*optarg || port < 0 || port > 65535) {
                fprintf(stderr, "ldasync-test-service: --port: not a port: %s\n", optarg);
                return 2;
            }
            break;
        }
        case 'H':
            host = optarg;
            break;
        case 'v':
            svc.verbose = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ldasync-test-service: unexpected argument: %s\n", argv[optind]);
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    /* Big puts are parsed on the sources' threads (network.h). */
    evthread_use_pthreads();
    svc.base = event_base_new();
    svc.http = svc.base ? evhttp_new(svc.base) : NULL;
    if (!svc.http) {
        fprintf(stderr, "ldasync-test-service: out of memory\n");
        return 1;
    }
    evhttp_set_allowed_methods(svc.http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                             EVHTTP_REQ_DELETE);
    evhttp_set_gencb(svc.http, on_request, &svc);
    /* evhttp refuses (413) what is larger as it comes, before buffering it. */
    evhttp_set_max_body_size(svc.http, MAX_BODY);
    evhttp_set_max_headers_size(svc.http, MAX_HEADERS);
    struct evhttp_bound_socket *bound =
        evhttp_bind_socket_with_handle(svc.http, host, (ev_uint16_t)port);
    if (!bound) {
        fprintf(stderr, "ldasync-test-service: cannot listen on %s port %ld: %s\n", host, port,
                strerror(errno));
        evhttp_free(svc.http);
        event_base_free(svc.base);
        return 1;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(evhttp_bound_socket_get_fd(bound), (struct sockaddr *)&ss, &len) == 0)
        port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    struct evconnlistener *listener = evhttp_bound_socket_get_listener(bound);
    accept_pause = evtimer_new(svc.base, on_accept_resume, listener);
    if (accept_pause)
        evconnlistener_set_error_cb(listener, on_accept_error);
    struct event *sigint = evsignal_new(svc.base, SIGINT, on_signal, &svc);
    struct event *sigterm = evsignal_new(svc.base, SIGTERM, on_signal, &svc);
    if (sigint)
        event_add(sigint, NULL);
    if (sigterm)
        event_add(sigterm, NULL);
    fprintf(stderr, "ldasync-test-service %s: listening on http://%s:%ld/\n", ld_version_string(),
            host, port);

    event_base_dispatch(svc.base);

    /* Stop: answer what still waits (the requests must be answered before
     * evhttp_free frees them), free the clients, then let their futures
     * complete from the loop, which also writes the answers (evhttp_free
     * drops what is not written yet). */
    for (struct pending *p = svc.pending; p; p = p->next) {
        reply_text(p->req, 503, "the service is stopping");
        p->req = NULL;
        if (p->kind == P_CREATE || p->kind == P_CLOSE) {
            tclient_free(p->tc);
            if (p->kind == P_CLOSE)
                p->tc = NULL;
        }
        ld_future_cancel(p->fut);
    }
    while (svc.clients)
        tclient_free(svc.clients);
    for (int i = 0; i < 1000 && svc.pending; i++)
        event_base_loop(svc.base, EVLOOP_NONBLOCK);
    if (sigint)
        event_free(sigint);
    if (sigterm)
        event_free(sigterm);
    if (accept_pause)
        event_free(accept_pause);
    /* Callbacks of the futures that completed last: one more pass. */
    event_base_loop(svc.base, EVLOOP_NONBLOCK);
    evhttp_free(svc.http);
    event_base_free(svc.base);
    fprintf(stderr, "ldasync-test-service: stopped\n");
    return 0;
}
