/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * lib/sources/streaming.c: the FDv1 streaming synchronizer (network.h).
 *
 * One connection at a time: GET {stream}/all, its body fed to the SSE
 * parser, each put, patch and delete turned into an update. Updates wait in
 * a queue, in the order of their events, until a next takes them; a big
 * put is parsed on the source's worker while later events queue behind it.
 * A failure queues an update without data and, unless it ends the source,
 * a reconnection after the backoff's delay.
 */

#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/event.h>

#include <ldasync/error.h>

#include "core/core-internal.h"
#include "net/net-internal.h"
#include "sources/sources-internal.h"

#define QUEUE_MAX 4096

/* An update on its way: ready (u set), or parsed on the worker (parse). */
struct entry {
    struct entry *next;
    ld_fdv2_update *u;
    ld_future *parse; /* the worker's job, while its callback is to come (the
                         callback holds the reference) */
    char *data;       /* the job's input, kept while it runs */
    size_t len;
    uint64_t gen; /* the connection it came from */
    struct stream *s;
    bool dead; /* dropped while its parse runs: freed by the parse's callback */
};

struct stream {
    struct event_base *base;
    ld_net_config *cfg;
    char *url;
    char **headers; /* the base headers and the SSE ones */
    struct ld__http *http;
    struct ld__http_req *req;
    struct ld__sse *sse;
    struct ld__worker *worker;
    struct ld__backoff backoff;
    struct event *timer; /* the reconnection */
    uint64_t gen;        /* connections made */
    unsigned refs;       /* the owner's, and one per parse on the worker */
    bool started, ended, stopped;
    char *env_id;
    struct entry *head, *tail;
    size_t queued;
    struct ld__src_waiters waiters; /* the nexts not answered yet */
    struct entry *orphans;          /* parses nobody listens to: freed after the worker */
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Frees `e` (unlinked), or, while its parse runs, leaves it to the
 * parse's callback. */
static void entry_free(struct entry *e)
{
    if (e->parse) {
        e->dead = true;
        return;
    }
    ld_fdv2_update_free(e->u);
    ld__free(e->data);
    ld__free(e);
}

static void drop_entries(struct stream *s)
{
    while (s->head) {
        struct entry *e = s->head;
        s->head = e->next;
        entry_free(e);
    }
    s->tail = NULL;
    s->queued = 0;
}

/* Hands ready updates to waiting nexts, in order; after the end, the
 * waiters left get LD_ECLOSED. */
static void pump(struct stream *s)
{
    while (s->waiters.head && s->head && s->head->u) {
        ld_future *out = ld__src_waiters_pop(&s->waiters);
        if (ld_future_is_pending(out)) {
            struct entry *e = s->head;
            ld_fdv2_fulfill_update(out, e->u);
            e->u = NULL;
            s->head = e->next;
            if (!s->head)
                s->tail = NULL;
            s->queued--;
            entry_free(e);
        }
        ld_future_unref(out);
    }
    if (s->ended && !s->head)
        ld__src_waiters_settle(&s->waiters, LD_ECLOSED, "the stream was turned off");
}

static void connect_now(struct stream *s);
static void restart(struct stream *s, int64_t delay_ms);

/* Queues an entry (taken); false when the queue was full (the entry is
 * dropped, and so is the queue: the stream restarts for a new put). */
static bool enqueue(struct stream *s, struct entry *e)
{
    if (s->queued >= QUEUE_MAX) {
        entry_free(e);
        drop_entries(s);
        restart(s, 0);
        return false;
    }
    e->next = NULL;
    if (s->tail)
        s->tail->next = e;
    else
        s->head = e;
    s->tail = e;
    s->queued++;
    return true;
}

static struct entry *entry_new(struct stream *s)
{
    struct entry *e = ld__calloc(1, sizeof(*e));
    if (e) {
        e->gen = s->gen;
        e->s = s;
    }
    return e;
}

/* Queues an update without data. Without memory it is lost: the status
 * it told is then missing, nothing else. */
static void queue_status(struct stream *s, enum ld_data_source_state state,
                         enum ld_data_source_error_kind kind, long status, const char *msg)
{
    ld_data_source_error_info e = {kind, (int)status, 0, msg};
    struct entry *en = entry_new(s);
    if (!en)
        return;
    en->u = ld_fdv2_update_new(state, NULL, &e, s->env_id);
    if (!en->u) {
        ld__free(en);
        return;
    }
    if (enqueue(s, en))
        pump(s);
}

/* Ends the connection, if any (no callback of it comes after). */
static void disconnect(struct stream *s)
{
    if (s->req) {
        ld__http_cancel(s->req);
        s->req = NULL;
    }
}

/* Reconnects after `delay_ms` (0: from the loop, at once). */
static void restart(struct stream *s, int64_t delay_ms)
{
    disconnect(s);
    if (s->stopped || s->ended)
        return;
    struct timeval tv = {(time_t)(delay_ms / 1000), (suseconds_t)(delay_ms % 1000) * 1000};
    if (event_add(s->timer, &tv) != 0)
        connect_now(s); /* no timer: try at once rather than never */
}

/* The connection failed: report it, then reconnect after the backoff's
 * delay, or end for good after an unrecoverable status. */
static void failed(struct stream *s, enum ld_data_source_error_kind kind, long status,
                   const char *msg)
{
    disconnect(s);
    if (s->stopped || s->ended)
        return;
    if (status && !ld__fdv1_recoverable(status)) {
        s->ended = true;
        queue_status(s, LD_DATA_SOURCE_STATE_OFF, kind, status, msg);
        pump(s);
        return;
    }
    queue_status(s, LD_DATA_SOURCE_STATE_INTERRUPTED, kind, status, msg);
    restart(s, ld__backoff_next(&s->backoff, mono_ms()));
}

/* ------------------------------------------------------------------------- */
/* Events                                                                    */

/* A parse went wrong: what came after it on that connection goes (`e` is
 * unlinked and freed), the failure is reported, and the stream reconnects
 * if that connection is still the one. */
static void bad_data(struct stream *s, struct entry *e, int code, const char *msg)
{
    uint64_t gen = e->gen;
    struct entry **link = &s->head;
    struct entry *prev = NULL;
    while (*link && *link != e) {
        prev = *link;
        link = &(*link)->next;
    }
    while (*link) {
        struct entry *x = *link;
        if (x->gen == gen) {
            *link = x->next;
            s->queued--;
            entry_free(x);
        } else {
            prev = x;
            link = &x->next;
        }
    }
    s->tail = prev;
    if (gen != s->gen) /* that connection is gone already */
        queue_status(s, LD_DATA_SOURCE_STATE_INTERRUPTED,
                     code == LD_ENOMEM ? LD_DATA_SOURCE_ERROR_KIND_UNKNOWN
                                       : LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA,
                     0, msg);
    else
        failed(s,
               code == LD_ENOMEM ? LD_DATA_SOURCE_ERROR_KIND_UNKNOWN
                                 : LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA,
               0, msg);
}

static void stream_unref(struct stream *s);

/* A big put, on the worker. The entry lives until its future's callback
 * (never cancelled: the job reads the entry's data until it returns). */
static void *parse_job(const struct ld__work *job, void *arg, int *code)
{
    (void)job;
    struct entry *e = arg;
    struct ld__fdv1_result *r = ld__malloc(sizeof(*r));
    if (!r) {
        *code = LD_ENOMEM;
        return NULL;
    }
    ld__fdv1_parse(LD__FDV1_PUT, e->data, e->len, r);
    return r;
}

static void parsed(ld_future *f, void *arg)
{
    struct entry *e = arg;
    struct stream *s = e->s;
    e->parse = NULL; /* f, whose reference the callback holds */
    ld__free(e->data);
    e->data = NULL;
    if (e->dead) {
        entry_free(e);
    } else {
        struct ld__fdv1_result *r = ld_future_ptr(f);
        if (r && r->code == 0) {
            e->u = ld_fdv2_update_new(LD_DATA_SOURCE_STATE_VALID, r->cs, NULL, s->env_id);
            r->cs = NULL; /* stolen */
            if (!e->u)
                bad_data(s, e, LD_ENOMEM, "out of memory");
        } else if (r) {
            bad_data(s, e, r->code, r->msg);
        } else {
            bad_data(s, e, LD_ENOMEM, "out of memory");
        }
        pump(s);
    }
    stream_unref(s);
}

static int on_event(void *arg, const struct ld__sse_event *ev);

/* ------------------------------------------------------------------------- */
/* HTTP                                                                      */

static int on_response(void *arg, long status, const struct ld__http_header *hs, size_t n)
{
    struct stream *s = arg;
    if (status != 200) {
        char msg[96];
        ld__fdv1_status_message(status, msg, sizeof(msg));
        s->req = NULL; /* stopped by our answer */
        failed(s, LD_DATA_SOURCE_ERROR_KIND_RESPONSE, status, msg);
        return 1;
    }
    const char *type = NULL;
    ld__free(s->env_id);
    s->env_id = NULL;
    for (size_t i = 0; i < n; i++) {
        if (strcasecmp(hs[i].name, "Content-Type") == 0)
            type = hs[i].value;
        else if (strcasecmp(hs[i].name, "X-LD-EnvID") == 0)
            s->env_id = ld__strdup(hs[i].value);
    }
    if (!type || strncasecmp(type, "text/event-stream", 17) != 0) {
        s->req = NULL;
        failed(s, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0,
               "the response is not an event stream (Content-Type is not text/event-stream)");
        return 1;
    }
    ld__backoff_good(&s->backoff, mono_ms());
    return 0;
}

static int on_body(void *arg, const char *bytes, size_t n)
{
    struct stream *s = arg;
    uint64_t gen = s->gen;
    int code = ld__sse_feed(s->sse, bytes, n);
    if (code == 0)
        return 0;
    if (gen == s->gen && s->req) { /* the parser failed, not our handler */
        s->req = NULL;
        if (code == LD_EPARSE)
            failed(s, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0, "an event is over 256 MiB");
        else
            failed(s, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, "out of memory");
    }
    return 1;
}

static void on_done(void *arg, int code, const char *message)
{
    struct stream *s = arg;
    s->req = NULL;
    if (code == 0)
        failed(s, LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0, "the server ended the stream");
    else if (code == LD_ETIMEDOUT)
        failed(s, LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0,
               message && *message ? message : "timed out");
    else if (code == LD_ENOMEM)
        failed(s, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, "out of memory");
    else
        failed(s, LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0,
               message && *message ? message : "the connection failed");
}

static const struct ld__http_callbacks CALLBACKS = {on_response, on_body, on_done};

static void connect_now(struct stream *s)
{
    if (s->stopped || s->ended || s->req)
        return;
    s->gen++;
    ld__sse_reset(s->sse);
    s->req = ld__http_request(s->http, "GET", s->url, (const char *const *)s->headers, NULL, 0,
                              &CALLBACKS, s);
    if (!s->req)
        failed(s, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, "out of memory");
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    connect_now(arg);
}

/* ------------------------------------------------------------------------- */
/* Events                                                                    */

static int on_event(void *arg, const struct ld__sse_event *ev)
{
    struct stream *s = arg;
    enum ld__fdv1_what what;
    if (ev->type_len == 3 && memcmp(ev->type, "put", 3) == 0)
        what = LD__FDV1_PUT;
    else if (ev->type_len == 5 && memcmp(ev->type, "patch", 5) == 0)
        what = LD__FDV1_PATCH;
    else if (ev->type_len == 6 && memcmp(ev->type, "delete", 6) == 0)
        what = LD__FDV1_DELETE;
    else
        return 0; /* other events are ignored, as LaunchDarkly's SDKs do */
    struct entry *e = entry_new(s);
    if (!e) {
        failed(s, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, "out of memory");
        return 1;
    }
    if (what == LD__FDV1_PUT && ev->data_len >= LD__FDV1_BIG) {
        e->data = ld__sse_take_data(s->sse, &e->len);
        if (e->data)
            e->parse = ld__worker_submit(s->worker, parse_job, e, ld__fdv1_result_free);
        if (!e->parse || ld_future_on_complete(e->parse, parsed, e) != 0) {
            if (e->parse) {      /* the job may run: the entry must outlive it */
                e->parse = NULL; /* dropped by on_complete */
                e->next = s->orphans;
                s->orphans = e;
            } else {
                ld__free(e->data);
                ld__free(e);
            }
            failed(s, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, "out of memory");
            return 1;
        }
        s->refs++;
        return enqueue(s, e) ? 0 : 1;
    }
    struct ld__fdv1_result r;
    int code = ld__fdv1_parse(what, ev->data, ev->data_len, &r);
    if (code) {
        ld__free(e);
        failed(s,
               code == LD_ENOMEM ? LD_DATA_SOURCE_ERROR_KIND_UNKNOWN
                                 : LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA,
               0, r.msg);
        return 1;
    }
    if (!r.cs) { /* a path of neither kind: ignored */
        ld__free(e);
        return 0;
    }
    e->u = ld_fdv2_update_new(LD_DATA_SOURCE_STATE_VALID, r.cs, NULL, s->env_id);
    if (!e->u) {
        ld__free(e);
        failed(s, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, "out of memory");
        return 1;
    }
    if (!enqueue(s, e))
        return 1;
    pump(s);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The synchronizer                                                          */

static const char *st_name(void *impl)
{
    (void)impl;
    return "streaming";
}

static void st_next(void *impl, ld_future *out)
{
    struct stream *s = impl;
    if (!ld__src_waiters_push(&s->waiters, out))
        return;
    if (!s->started) {
        s->started = true;
        connect_now(s);
    }
    pump(s);
}

static void halt(struct stream *s)
{
    if (s->stopped)
        return;
    s->stopped = true;
    disconnect(s);
    if (s->timer)
        event_del(s->timer);
    drop_entries(s);
    ld__src_waiters_settle(&s->waiters, 0, NULL); /* the front rejects them */
    if (s->worker)
        ld__worker_stop(s->worker);
}

static void st_stop(void *impl, ld_future *out)
{
    halt(impl);
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void stream_unref(struct stream *s)
{
    if (--s->refs == 0)
        ld__free(s);
}

static void stream_destroy(struct stream *s)
{
    halt(s);
    ld__worker_free(s->worker); /* joins: a parse running has returned */
    s->worker = NULL;
    while (s->orphans) {
        struct entry *e = s->orphans;
        s->orphans = e->next;
        ld__free(e->data);
        ld__free(e);
    }
    ld__http_free(s->http);
    s->http = NULL;
    if (s->timer)
        event_free(s->timer);
    s->timer = NULL;
    ld__sse_free(s->sse);
    s->sse = NULL;
    ld__free(s->url);
    ld__free(s->headers);
    ld__free(s->env_id);
    ld_net_config_free(s->cfg);
    s->url = NULL;
    s->headers = NULL;
    s->env_id = NULL;
    s->cfg = NULL;
    stream_unref(s);
}

static void st_free(void *impl)
{
    stream_destroy(impl);
}

/* ld_synchronizer_refresh(): a new connection, whose put is the whole
 * data set. */
static void st_refresh(void *impl)
{
    struct stream *s = impl;
    if (s->started && !s->stopped && !s->ended)
        restart(s, 0);
}

static const struct ld_synchronizer_ops OPS = {
    LD_SYNCHRONIZER_OPS_VERSION, st_name, st_next, st_stop, st_free, st_refresh,
};

ld_synchronizer *ld_streaming_synchronizer_new(struct event_base *base, const ld_net_config *cfg)
{
    if (!base || !cfg)
        return NULL;
    struct stream *s = ld__calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->refs = 1;
    s->base = base;
    s->cfg = ld_net_config_copy(cfg);
    static const char *const sse_headers[] = {"Accept: text/event-stream",
                                              "Cache-Control: no-cache", NULL};
    struct ld__http_options o;
    if (s->cfg) {
        ld__net_http_options(s->cfg, true, &o);
        s->url = ld__net_url(s->cfg, s->cfg->stream_uri, "/all");
        s->headers = ld__net_headers(s->cfg, sse_headers);
        s->http = ld__http_new(base, &o);
    }
    s->sse = ld__sse_new(LD__FDV1_MAX, on_event, NULL, s);
    s->worker = ld__worker_new(base);
    s->timer = evtimer_new(base, timer_cb, s);
    ld_synchronizer *sync = NULL;
    if (s->cfg && s->url && s->headers && s->http && s->sse && s->worker && s->timer)
        sync = ld_synchronizer_new(base, &OPS, s);
    if (!sync) {
        stream_destroy(s);
        return NULL;
    }
    int64_t initial = s->cfg->reconnect_ms > 0 ? s->cfg->reconnect_ms : 1;
    uint64_t seed = (uint64_t)(uintptr_t)s ^ (uint64_t)mono_ms() * 0x9e3779b97f4a7c15ULL;
    int64_t max = s->cfg->reconnect_max_ms;
    ld__backoff_init(&s->backoff, initial, initial > max ? initial : max, 60000, seed);
    return sync;
}
