/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * lib/sources/polling.c: the FDv1 polling initializer and synchronizer
 * (network.h).
 *
 * Both are built on a poller: one GET of {base}/sdk/latest-all at a time,
 * its body gathered (at most LD__FDV1_MAX bytes), then parsed into a full
 * change set (on the poller's worker when it is big). The synchronizer
 * sends the ETag of the last answer it parsed as If-None-Match; a 304 is
 * "nothing changed".
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include <ldasync/error.h>

#include "core/core-internal.h"
#include "net/net-internal.h"
#include "sources/sources-internal.h"

/* What a poll ended with. */
struct outcome {
    int code;                            /* 0: data or not modified */
    bool not_modified;                   /* a 304 */
    enum ld_data_source_error_kind kind; /* code != 0 */
    long status;                         /* code != 0: the HTTP status, or 0 */
    const char *msg;                     /* code != 0 */
    ld_fdv2_change_set *cs;              /* code 0, not 304: taken by the owner */
};

struct poller;
typedef void (*poll_done_fn)(struct poller *p, struct outcome *o);

/* A big body parsed on the worker: it lives until its future's callback
 * (the job reads it until it returns). */
struct job {
    struct job *next; /* in the poller's orphans */
    struct poller *p;
    char *data;
    size_t len;
    bool dead; /* the poll was dropped: the result goes nowhere */
};

struct poller {
    struct event_base *base;
    ld_net_config *cfg;
    char *url;
    char **headers;
    struct ld__http *http;
    struct ld__worker *worker;
    struct ld__http_req *req;
    struct job *job;     /* the parse running, if any */
    struct job *orphans; /* parses nobody listens to: freed after the worker */
    unsigned refs;       /* the owner's, and the parse's */
    bool use_etag;
    char *etag, *new_etag; /* the last answer parsed's; the answer coming's */
    char *env_id;
    long status;
    char *body;
    size_t len, cap;
    poll_done_fn done;
    void *owner;
};

static void poller_unref(struct poller *p)
{
    if (--p->refs == 0)
        ld__free(p);
}

static void body_drop(struct poller *p)
{
    ld__free(p->body);
    p->body = NULL;
    p->len = p->cap = 0;
}

static void finish(struct poller *p, struct outcome *o)
{
    p->req = NULL;
    body_drop(p);
    p->done(p, o);
}

static void finish_error(struct poller *p, int code, enum ld_data_source_error_kind kind,
                         long status, const char *msg)
{
    struct outcome o = {code, false, kind, status, msg, NULL};
    finish(p, &o);
}

/* The parse's result (taken: its change set goes on). */
static void parsed_result(struct poller *p, struct ld__fdv1_result *r)
{
    if (r->code) {
        finish_error(p, r->code,
                     r->code == LD_ENOMEM ? LD_DATA_SOURCE_ERROR_KIND_UNKNOWN
                                          : LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA,
                     0, r->msg);
        return;
    }
    ld__free(p->etag); /* the data is taken: its ETag is the one to send */
    p->etag = p->new_etag;
    p->new_etag = NULL;
    struct outcome o = {0, false, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, NULL, r->cs};
    r->cs = NULL;
    finish(p, &o);
}

static void *parse_job(const struct ld__work *w, void *arg, int *code)
{
    (void)w;
    struct job *j = arg;
    struct ld__fdv1_result *r = ld__malloc(sizeof(*r));
    if (!r) {
        *code = LD_ENOMEM;
        return NULL;
    }
    ld__fdv1_parse(LD__FDV1_ALL, j->data, j->len, r);
    return r;
}

static void job_free(struct job *j)
{
    ld__free(j->data);
    ld__free(j);
}

static void parsed(ld_future *f, void *arg)
{
    struct job *j = arg;
    struct poller *p = j->p;
    if (!j->dead) {
        p->job = NULL;
        struct ld__fdv1_result *r = ld_future_ptr(f);
        if (r)
            parsed_result(p, r);
        else
            finish_error(p, LD_ENOMEM, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, "out of memory");
    }
    job_free(j);
    poller_unref(p);
}

/* The whole body came with a 200: parse it. */
static void body_came(struct poller *p)
{
    if (p->len < LD__FDV1_BIG) {
        struct ld__fdv1_result r;
        ld__fdv1_parse(LD__FDV1_ALL, p->body ? p->body : "", p->len, &r);
        parsed_result(p, &r);
        ld_fdv2_change_set_free(r.cs);
        return;
    }
    struct job *j = ld__calloc(1, sizeof(*j));
    if (j) { /* all set before the job can run, on the worker's thread */
        j->p = p;
        j->data = p->body;
        j->len = p->len;
    }
    ld_future *f = j ? ld__worker_submit(p->worker, parse_job, j, ld__fdv1_result_free) : NULL;
    if (!f) {
        ld__free(j); /* not its data: the body is still ours, finish drops it */
        finish_error(p, LD_ENOMEM, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, "out of memory");
        return;
    }
    p->body = NULL; /* the job's now */
    p->len = p->cap = 0;
    if (ld_future_on_complete(f, parsed, j) != 0) {
        /* the job may run with `j`: it is freed after the worker */
        j->next = p->orphans;
        p->orphans = j;
        finish_error(p, LD_ENOMEM, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, "out of memory");
        return;
    }
    p->refs++;
    p->job = j;
}

static int on_response(void *arg, long status, const struct ld__http_header *hs, size_t n)
{
    struct poller *p = arg;
    p->status = status;
    ld__free(p->new_etag);
    p->new_etag = NULL;
    for (size_t i = 0; i < n; i++) {
        if (strcasecmp(hs[i].name, "ETag") == 0) {
            ld__free(p->new_etag);
            p->new_etag = ld__strdup(hs[i].value);
        } else if (strcasecmp(hs[i].name, "X-LD-EnvID") == 0) {
            ld__free(p->env_id);
            p->env_id = ld__strdup(hs[i].value);
        }
    }
    if (status == 200 || (status == 304 && p->use_etag && p->etag))
        return 0;
    char msg[96];
    ld__fdv1_status_message(status, msg, sizeof(msg));
    finish_error(p, LD_EIO, LD_DATA_SOURCE_ERROR_KIND_RESPONSE, status, msg);
    return 1;
}

static int on_body(void *arg, const char *bytes, size_t n)
{
    struct poller *p = arg;
    if (n > LD__FDV1_MAX - p->len) {
        finish_error(p, LD_EPARSE, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0,
                     "the answer is over 256 MiB");
        return 1;
    }
    if (p->len + n + 1 > p->cap) {
        size_t cap = p->cap ? p->cap : 16384;
        while (cap < p->len + n + 1)
            cap *= 2;
        if (cap > LD__FDV1_MAX + 1) /* a body of the most taken: not twice that */
            cap = LD__FDV1_MAX + 1;
        char *b = ld__realloc(p->body, cap);
        if (!b) {
            finish_error(p, LD_ENOMEM, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, "out of memory");
            return 1;
        }
        p->body = b;
        p->cap = cap;
    }
    memcpy(p->body + p->len, bytes, n);
    p->len += n;
    p->body[p->len] = '\0';
    return 0;
}

static void on_done(void *arg, int code, const char *message)
{
    struct poller *p = arg;
    p->req = NULL;
    if (code == LD_ENOMEM) {
        finish_error(p, LD_ENOMEM, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, "out of memory");
    } else if (code) {
        finish_error(p, LD_EIO, LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0,
                     message && *message ? message : "the request failed");
    } else if (p->status == 304) {
        struct outcome o = {0, true, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, NULL, NULL};
        finish(p, &o);
    } else {
        body_came(p);
    }
}

static const struct ld__http_callbacks CALLBACKS = {on_response, on_body, on_done};

/* Starts a poll, unless one runs. */
static void poll_start(struct poller *p)
{
    if (p->req || p->job)
        return;
    char line[600];
    const char *extra[2] = {NULL, NULL};
    if (p->use_etag && p->etag && strlen(p->etag) < 500) {
        snprintf(line, sizeof(line), "If-None-Match: %s", p->etag);
        extra[0] = line;
    }
    char **hs = extra[0] ? ld__net_headers(p->cfg, extra) : p->headers;
    p->status = 0;
    p->req = hs ? ld__http_request(p->http, "GET", p->url, (const char *const *)hs, NULL, 0,
                                   &CALLBACKS, p)
                : NULL;
    if (hs != p->headers)
        ld__free(hs);
    if (!p->req)
        finish_error(p, LD_ENOMEM, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, "out of memory");
}

/* Drops the poll running, if any: no outcome comes. */
static void poll_cancel(struct poller *p)
{
    if (p->req) {
        ld__http_cancel(p->req);
        p->req = NULL;
    }
    if (p->job) {
        p->job->dead = true;
        p->job = NULL;
    }
    body_drop(p);
}

static struct poller *poller_new(struct event_base *base, const ld_net_config *cfg, bool use_etag,
                                 poll_done_fn done, void *owner)
{
    struct poller *p = ld__calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->refs = 1;
    p->base = base;
    p->use_etag = use_etag;
    p->done = done;
    p->owner = owner;
    p->cfg = ld_net_config_copy(cfg);
    if (p->cfg) {
        static const char *const json[] = {"Content-Type: application/json", NULL};
        struct ld__http_options o;
        ld__net_http_options(p->cfg, false, &o);
        p->url = ld__net_url(p->cfg, p->cfg->base_uri, "/sdk/latest-all");
        p->headers = ld__net_headers(p->cfg, json);
        p->http = ld__http_new(base, &o);
    }
    p->worker = ld__worker_new(base);
    return p;
}

static bool poller_ok(const struct poller *p)
{
    return p->cfg && p->url && p->headers && p->http && p->worker;
}

/* Stops the poller for good (its owner goes). */
static void poller_free(struct poller *p)
{
    if (!p)
        return;
    poll_cancel(p);
    ld__worker_free(p->worker); /* joins: a parse running has returned */
    while (p->orphans) {
        struct job *j = p->orphans;
        p->orphans = j->next;
        job_free(j);
    }
    ld__http_free(p->http);
    ld__free(p->url);
    ld__free(p->headers);
    ld__free(p->etag);
    ld__free(p->new_etag);
    ld__free(p->env_id);
    ld_net_config_free(p->cfg);
    p->worker = NULL;
    p->http = NULL;
    p->url = p->etag = p->new_etag = p->env_id = NULL;
    p->headers = NULL;
    p->cfg = NULL;
    poller_unref(p);
}

/* ------------------------------------------------------------------------- */
/* The initializer                                                           */

struct pinit {
    struct poller *p;
    struct ld__src_waiters waiters;
    bool stopped;
};

static void init_done(struct poller *p, struct outcome *o)
{
    struct pinit *in = p->owner;
    ld_future *out = ld__src_waiters_pop(&in->waiters);
    if (out && ld_future_is_pending(out)) {
        if (o->code) {
            ld_future_reject(out, o->code, "%s", o->msg);
        } else {
            ld_fdv2_basis *b = ld_fdv2_basis_new(o->cs, true, p->env_id);
            o->cs = NULL; /* stolen */
            if (b)
                ld_fdv2_fulfill_basis(out, b);
            else
                ld_future_reject(out, LD_ENOMEM, NULL);
        }
    }
    ld_fdv2_change_set_free(o->cs);
    o->cs = NULL;
    ld_future_unref(out);
    if (in->waiters.head)
        poll_start(p);
}

static const char *polling_name(void *impl)
{
    (void)impl;
    return "polling";
}

static void pi_fetch(void *impl, ld_future *out)
{
    struct pinit *in = impl;
    if (ld__src_waiters_push(&in->waiters, out))
        poll_start(in->p);
}

static void pi_halt(struct pinit *in)
{
    in->stopped = true;
    poll_cancel(in->p);
    ld__src_waiters_settle(&in->waiters, 0, NULL); /* the front rejects them */
}

static void pi_stop(void *impl, ld_future *out)
{
    pi_halt(impl);
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void pi_free(void *impl)
{
    struct pinit *in = impl;
    pi_halt(in);
    poller_free(in->p);
    ld__free(in);
}

static const struct ld_initializer_ops INIT_OPS = {
    LD_INITIALIZER_OPS_VERSION, polling_name, pi_fetch, pi_stop, pi_free,
};

ld_initializer *ld_polling_initializer_new(struct event_base *base, const ld_net_config *cfg)
{
    if (!base || !cfg)
        return NULL;
    struct pinit *in = ld__calloc(1, sizeof(*in));
    if (!in)
        return NULL;
    in->p = poller_new(base, cfg, false, init_done, in);
    ld_initializer *init =
        in->p && poller_ok(in->p) ? ld_initializer_new(base, &INIT_OPS, in) : NULL;
    if (!init) {
        poller_free(in->p);
        ld__free(in);
    }
    return init;
}

/* ------------------------------------------------------------------------- */
/* The synchronizer                                                          */

#define KEEP_MAX 16 /* updates without data kept for nobody */

struct qupdate {
    struct qupdate *next;
    ld_fdv2_update *u;
};

struct psync {
    struct poller *p;
    struct event *timer;
    struct ld__src_waiters waiters;
    struct qupdate *qhead, *qtail;
    size_t queued;
    bool started, ended, stopped;
};

static void q_drop_head(struct psync *y)
{
    struct qupdate *q = y->qhead;
    y->qhead = q->next;
    if (!y->qhead)
        y->qtail = NULL;
    y->queued--;
    ld_fdv2_update_free(q->u);
    ld__free(q);
}

static void ps_pump(struct psync *y)
{
    while (y->waiters.head && y->qhead) {
        ld_future *out = ld__src_waiters_pop(&y->waiters);
        if (ld_future_is_pending(out)) {
            ld_fdv2_fulfill_update(out, y->qhead->u);
            y->qhead->u = NULL;
            q_drop_head(y);
        }
        ld_future_unref(out);
    }
    if (y->ended && !y->qhead)
        ld__src_waiters_settle(&y->waiters, LD_ECLOSED, "polling was turned off");
}

/* Queues `u` (taken; NULL: nothing, memory ran out). A full data set makes
 * what waits before it useless: it goes; updates without data are kept up
 * to KEEP_MAX. */
static void ps_queue(struct psync *y, ld_fdv2_update *u)
{
    if (!u)
        return;
    if (ld_fdv2_update_change_set(u))
        while (y->qhead)
            q_drop_head(y);
    else if (y->queued >= KEEP_MAX)
        q_drop_head(y);
    struct qupdate *q = ld__malloc(sizeof(*q));
    if (!q) {
        ld_fdv2_update_free(u);
        return;
    }
    q->next = NULL;
    q->u = u;
    if (y->qtail)
        y->qtail->next = q;
    else
        y->qhead = q;
    y->qtail = q;
    y->queued++;
    ps_pump(y);
}

static void ps_arm(struct psync *y)
{
    int64_t ms = y->p->cfg->poll_ms;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    if (event_add(y->timer, &tv) != 0) { /* no timer: poll now rather than never */
        static const struct timeval zero = {0, 0};
        event_add(y->timer, &zero);
    }
}

static void sync_done(struct poller *p, struct outcome *o)
{
    struct psync *y = p->owner;
    if (y->stopped)
        return;
    if (o->code == 0) {
        ps_queue(y, ld_fdv2_update_new(LD_DATA_SOURCE_STATE_VALID, o->cs, NULL, p->env_id));
        o->cs = NULL; /* stolen */
    } else {
        ld_data_source_error_info e = {o->kind, (int)o->status, 0, o->msg};
        bool off = o->status && !ld__fdv1_recoverable(o->status);
        ps_queue(
            y, ld_fdv2_update_new(off ? LD_DATA_SOURCE_STATE_OFF : LD_DATA_SOURCE_STATE_INTERRUPTED,
                                  NULL, &e, p->env_id));
        if (off) {
            y->ended = true;
            ps_pump(y);
            return;
        }
    }
    ps_arm(y);
}

static void ps_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct psync *y = arg;
    if (!y->stopped && !y->ended)
        poll_start(y->p);
}

static void ps_next(void *impl, ld_future *out)
{
    struct psync *y = impl;
    if (!ld__src_waiters_push(&y->waiters, out))
        return;
    if (!y->started) {
        y->started = true;
        poll_start(y->p); /* the first poll at once */
    }
    ps_pump(y);
}

static void ps_halt(struct psync *y)
{
    if (y->stopped)
        return;
    y->stopped = true;
    if (y->p)
        poll_cancel(y->p);
    event_del(y->timer);
    while (y->qhead)
        q_drop_head(y);
    ld__src_waiters_settle(&y->waiters, 0, NULL); /* the front rejects them */
}

static void ps_stop(void *impl, ld_future *out)
{
    ps_halt(impl);
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void ps_free(void *impl)
{
    struct psync *y = impl;
    if (y->timer)
        ps_halt(y);
    poller_free(y->p);
    if (y->timer)
        event_free(y->timer);
    ld__free(y);
}

/* ld_synchronizer_refresh(): the ETag forgotten, so that the next poll
 * is answered in full, not with 304. */
static void ps_refresh(void *impl)
{
    struct psync *y = impl;
    if (!y->p)
        return;
    ld__free(y->p->etag);
    y->p->etag = NULL;
}

static const struct ld_synchronizer_ops SYNC_OPS = {
    LD_SYNCHRONIZER_OPS_VERSION, polling_name, ps_next, ps_stop, ps_free, ps_refresh,
};

ld_synchronizer *ld_polling_synchronizer_new(struct event_base *base, const ld_net_config *cfg)
{
    if (!base || !cfg)
        return NULL;
    struct psync *y = ld__calloc(1, sizeof(*y));
    if (!y)
        return NULL;
    y->p = poller_new(base, cfg, true, sync_done, y);
    y->timer = evtimer_new(base, ps_timer, y);
    ld_synchronizer *sync =
        y->p && poller_ok(y->p) && y->timer ? ld_synchronizer_new(base, &SYNC_OPS, y) : NULL;
    if (!sync)
        ps_free(y);
    return sync;
}
