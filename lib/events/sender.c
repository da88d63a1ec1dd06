/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: delivery of analytics and diagnostic payloads (events-internal.h),
 * over the library's HTTP client on the loop (lib/net/http.c).
 *
 * A post owns its body and header lines until it is over; a retry waits on
 * a timer of its own and sends the same bytes and payload ID again. The
 * body is lent to the HTTP request, not copied (a payload may be
 * megabytes): a post that is over stays allocated, body and all, until the
 * request that holds it lets it go.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <event2/event.h>

#include <ldasync/error.h>

#include "core/core-internal.h"
#include "events/events-internal.h"
#include "net/net-internal.h"
#include "sources/sources-internal.h"

#define RETRY_MS_DEFAULT 1000

struct post {
    struct post *prev, *next;
    struct ld__ev_sender *s;
    ld_future *out;
    char *body;
    size_t len;
    char **headers;
    char *url;
    bool may_stop; /* an unrecoverable status stops the sender */
    struct ld__http_req *req;
    struct event *timer; /* the retry's */
    long status;
    int64_t date_ms;
    bool retried;
    unsigned refs; /* the sender's, until it is over, and its request's */
};

struct ld__ev_sender {
    struct event_base *base;
    struct ld__http *http;
    ld_net_config *cfg; /* a copy */
    char *auth;         /* "Authorization: KEY" */
    int64_t retry_ms;
    bool stopped;
    int64_t server_time;
    struct post *posts;
    size_t n;
};

static char *url_of(const char *root, const char *path)
{
    size_t n = strlen(root), m = strlen(path);
    while (n > 0 && root[n - 1] == '/')
        n--;
    char *u = ld__malloc(n + m + 1);
    if (u) {
        memcpy(u, root, n);
        memcpy(u + n, path, m + 1);
    }
    return u;
}

struct ld__ev_sender *ld__ev_sender_new(struct event_base *base, const ld_net_config *cfg,
                                        int64_t retry_ms)
{
    if (!base || !cfg)
        return NULL;
    struct ld__ev_sender *s = ld__calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->base = base;
    s->retry_ms = retry_ms > 0 ? retry_ms : RETRY_MS_DEFAULT;
    s->cfg = ld_net_config_copy(cfg);
    if (s->cfg) {
        struct ld__http_options o;
        ld__net_http_options(s->cfg, false, &o);
        s->http = ld__http_new(base, &o);
        size_t n = strlen(s->cfg->sdk_key) + sizeof "Authorization: ";
        if ((s->auth = ld__malloc(n)) != NULL)
            snprintf(s->auth, n, "Authorization: %s", s->cfg->sdk_key);
    }
    if (!s->cfg || !s->http || !s->auth) {
        ld__ev_sender_free(s);
        return NULL;
    }
    return s;
}

bool ld__ev_sender_stopped(const struct ld__ev_sender *s)
{
    return s->stopped;
}

int64_t ld__ev_sender_server_time(const struct ld__ev_sender *s)
{
    return s->server_time;
}

size_t ld__ev_sender_pending(const struct ld__ev_sender *s)
{
    return s->n;
}

/* Drops a reference to `p`: the last frees it and its body. */
static void post_unref(void *arg)
{
    struct post *p = arg;
    if (--p->refs > 0)
        return;
    ld__free(p->body);
    ld__free(p);
}

/* Unlinks `p` and lets it go, its future first completed: fulfilled with
 * `ok`, or rejected with `err` when it is not 0. */
static void post_end(struct post *p, bool ok, int err)
{
    struct ld__ev_sender *s = p->s;
    if (p->prev)
        p->prev->next = p->next;
    else
        s->posts = p->next;
    if (p->next)
        p->next->prev = p->prev;
    s->n--;
    if (err)
        ld_future_reject(p->out, err, NULL);
    else
        ld_future_fulfill_bool(p->out, ok);
    ld_future_unref(p->out);
    if (p->req)
        ld__http_cancel(p->req);
    if (p->timer)
        event_free(p->timer);
    ld__free(p->headers);
    ld__free(p->url);
    post_unref(p);
}

static int on_response(void *arg, long status, const struct ld__http_header *hs, size_t n)
{
    struct post *p = arg;
    p->status = status;
    p->date_ms = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcasecmp(hs[i].name, "Date") == 0) {
            time_t t = curl_getdate(hs[i].value, NULL);
            p->date_ms = t > 0 ? (int64_t)t * 1000 : 0;
        }
    }
    return 0;
}

static int on_body(void *arg, const char *bytes, size_t n)
{
    (void)arg, (void)bytes, (void)n;
    return 0; /* the answer's body says nothing the SDKs read */
}

static void attempt(struct post *p);

static void retry_now(evutil_socket_t fd, short what, void *arg)
{
    struct post *p = arg;
    (void)fd, (void)what;
    if (p->s->stopped)
        post_end(p, false, 0);
    else
        attempt(p);
}

static void on_done(void *arg, int code, const char *message)
{
    struct post *p = arg;
    struct ld__ev_sender *s = p->s;
    (void)message;
    p->req = NULL; /* freed after this call */
    long st = code == 0 ? p->status : 0;
    if (st >= 200 && st <= 299) {
        if (p->date_ms > 0)
            s->server_time = p->date_ms;
        post_end(p, true, 0);
        return;
    }
    if (st == 413) { /* too large: that payload only */
        post_end(p, false, 0);
        return;
    }
    if (st != 0 && !ld__fdv1_recoverable(st)) {
        if (p->may_stop)
            s->stopped = true; /* 401, 403 and the like: no more events */
        post_end(p, false, 0);
        return;
    }
    if (p->retried || code == LD_ENOMEM) {
        post_end(p, false, 0);
        return;
    }
    p->retried = true;
    struct timeval tv = {(time_t)(s->retry_ms / 1000), (suseconds_t)(s->retry_ms % 1000 * 1000)};
    if (!p->timer)
        p->timer = evtimer_new(s->base, retry_now, p);
    if (!p->timer || evtimer_add(p->timer, &tv) != 0)
        post_end(p, false, 0);
}

static const struct ld__http_callbacks CALLBACKS = {on_response, on_body, on_done};

static void attempt(struct post *p)
{
    p->status = 0;
    struct ld__http_body body = {p->body ? p->body : "", p->len, post_unref, p};
    p->refs++;
    p->req = ld__http_request_lent(p->s->http, "POST", p->url, (const char *const *)p->headers,
                                   &body, &CALLBACKS, p);
    if (!p->req) {
        p->refs--; /* still ours */
        post_end(p, false, LD_ENOMEM);
    }
}

/* Header lines for the relay: Authorization (ours unless `lines` has
 * one), then `lines`; one allocation, NULL-terminated. */
static char **relay_headers(const struct ld__ev_sender *s, const char *const *lines)
{
    size_t n = 0, bytes = 0;
    bool auth = false;
    for (; lines && lines[n]; n++) {
        bytes += strlen(lines[n]) + 1;
        auth = auth || strncasecmp(lines[n], "Authorization:", 14) == 0;
    }
    if (!auth)
        bytes += strlen(s->auth) + 1;
    char **h = ld__malloc((n + 2) * sizeof *h + bytes);
    if (!h)
        return NULL;
    char *at = (char *)(h + n + 2);
    size_t k = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *line = i < n ? lines[i] : auth ? NULL : s->auth;
        if (!line)
            break;
        size_t len = strlen(line) + 1;
        memcpy(at, line, len);
        h[k++] = at;
        at += len;
    }
    h[k] = NULL;
    return h;
}

ld_future *ld__ev_sender_send(struct ld__ev_sender *s, enum ld__ev_payload kind, const char *path,
                              const char *const *lines, char *body, size_t len)
{
    bool relay = kind == LD__EV_RELAY;
    if (!s || !path) {
        ld__free(body);
        return NULL;
    }
    ld_future *out = ld_future_new(s->base);
    bool stopped = s->stopped && !relay;
    struct post *p = out && !stopped ? ld__calloc(1, sizeof *p) : NULL;
    if (!p) {
        ld__free(body);
        if (!out)
            return ld_future_rejected(s->base, LD_ENOMEM, NULL);
        if (stopped)
            ld_future_fulfill_bool(out, false);
        else
            ld_future_reject(out, LD_ENOMEM, NULL);
        return out;
    }
    p->s = s;
    p->refs = 1;
    p->out = ld_future_ref(out);
    p->body = body;
    p->len = len;
    p->url = url_of(s->cfg->events_uri, path);
    p->headers = relay ? relay_headers(s, lines) : ld__net_headers(s->cfg, lines);
    p->may_stop = kind == LD__EV_ANALYTICS;
    p->next = s->posts;
    if (p->next)
        p->next->prev = p;
    s->posts = p;
    s->n++;
    if (!p->headers || !p->url)
        post_end(p, false, LD_ENOMEM);
    else
        attempt(p);
    return out;
}

ld_future *ld__ev_sender_post(struct ld__ev_sender *s, enum ld__ev_payload kind, char *body,
                              size_t len, bool gzip)
{
    char id[37], id_line[64];
    const char *extra[5] = {"Content-Type: application/json"};
    size_t n = 1;
    if (kind == LD__EV_ANALYTICS) {
        ld__uuid4(id);
        snprintf(id_line, sizeof id_line, "X-LaunchDarkly-Payload-ID: %s", id);
        extra[n++] = "X-LaunchDarkly-Event-Schema: 4";
        extra[n++] = id_line;
    }
    if (gzip)
        extra[n++] = "Content-Encoding: gzip";
    extra[n] = NULL;
    if (!s) {
        ld__free(body);
        return NULL;
    }
    return ld__ev_sender_send(s, kind, kind == LD__EV_ANALYTICS ? "/bulk" : "/diagnostic", extra,
                              body, len);
}

void ld__ev_sender_free(struct ld__ev_sender *s)
{
    if (!s)
        return;
    while (s->posts)
        post_end(s->posts, false, LD_ECANCELED);
    ld__http_free(s->http);
    ld_net_config_free(s->cfg);
    ld__free(s->auth);
    ld__free(s);
}
