/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * lib/net/http.c: HTTP requests on the loop: libcurl's multi interface,
 * its sockets and timer as libevent events (net-internal.h says what it
 * promises).
 *
 * libcurl refuses to be called back into from its own callbacks (the
 * write and header callbacks run inside curl_multi_socket_action()), and
 * the users' callbacks run from there: what they ask for meanwhile is put
 * off. A new request is added, and a cancelled one removed, once the
 * dispatch that runs them is over (h->in_curl); the client itself is freed
 * when the last of its frames on the stack is left (h->frames). Every
 * such put-off operation runs from settle().
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <event2/event.h>

#include <ldasync/error.h>

#include "core/core-internal.h"
#include "net/net-internal.h"

struct ld__http_req {
    struct ld__http *h;
    struct ld__http_req *prev, *next; /* h->reqs */
    CURL *easy;
    struct curl_slist *headers;
    struct ld__http_callbacks cb;
    void *arg;
    struct event *idle; /* the read timeout */
    /* the response's headers so far (of its latest status line) */
    struct ld__http_header *rh;
    size_t rn, rcap;
    bool added;     /* in the multi handle */
    bool responded; /* on_response was called (or there is none) */
    bool dead;      /* cancelled, stopped or over: no more callbacks */
    bool nomem;     /* a header could not be kept */
    /* a lent body's owner, told once libcurl is done with it (or NULL) */
    void (*body_release)(void *owner);
    void *body_owner;
    char errbuf[CURL_ERROR_SIZE];
};

struct sock {
    struct event *ev;
    struct sock *prev, *next; /* h->socks */
};

struct ld__http {
    struct event_base *base;
    CURLM *multi;
    struct event *timer; /* curl's timeout */
    struct event *later; /* the put-off operations (zero timeout) */
    struct ld__http_options o;
    char *ca_file, *proxy, *user_agent;
    struct ld__http_req *reqs;
    struct sock *socks; /* the events of curl's sockets */
    bool in_curl;       /* inside curl_multi_socket_action() */
    int frames;         /* our functions on the stack that use `h` */
    bool dying;         /* ld__http_free() came while frames > 0 */
    bool deferred;      /* a request to add or remove waits for settle() */
};

/* ---- libcurl's global state, through the allocator hook ----------------- */

bool ld__http_spare_curl;

/* Whether the tests asked that libcurl's allocations not fail. */
static bool spared(void)
{
    return __atomic_load_n(&ld__http_spare_curl, __ATOMIC_RELAXED);
}

static void *curl_malloc_fn(size_t n)
{
    return spared() ? malloc(n) : ld__malloc(n);
}

static void curl_free_fn(void *p)
{
    ld__free(p);
}

static void *curl_realloc_fn(void *p, size_t n)
{
    return spared() ? realloc(p, n) : ld__realloc(p, n);
}

static char *curl_strdup_fn(const char *s)
{
    return spared() ? strdup(s) : ld__strdup(s);
}

static void *curl_calloc_fn(size_t n, size_t size)
{
    return spared() ? calloc(n, size) : ld__calloc(n, size);
}

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static bool g_curl_ok;

static void curl_init_once(void)
{
    g_curl_ok = curl_global_init_mem(CURL_GLOBAL_DEFAULT, curl_malloc_fn, curl_free_fn,
                                     curl_realloc_fn, curl_strdup_fn, curl_calloc_fn) == CURLE_OK;
}

bool ld__http_global_init(void)
{
    pthread_once(&g_curl_once, curl_init_once);
    return g_curl_ok;
}

/* ---- requests ------------------------------------------------------------ */

static void headers_clear(struct ld__http_req *r)
{
    for (size_t i = 0; i < r->rn; i++)
        ld__free((char *)r->rh[i].name); /* name and value are one block */
    r->rn = 0;
}

/* Lets go of `r` (out of the multi handle already). */
static void req_free(struct ld__http_req *r)
{
    struct ld__http *h = r->h;
    if (r->prev)
        r->prev->next = r->next;
    else if (h->reqs == r)
        h->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    if (r->easy)
        curl_easy_cleanup(r->easy);
    if (r->body_release) /* libcurl is done with the body */
        r->body_release(r->body_owner);
    curl_slist_free_all(r->headers);
    if (r->idle)
        event_free(r->idle);
    headers_clear(r);
    ld__free(r->rh);
    ld__free(r);
}

/* Takes `r` out of the multi handle and frees it (not inside curl). */
static void req_end(struct ld__http_req *r)
{
    if (r->added) {
        curl_multi_remove_handle(r->h->multi, r->easy);
        r->added = false;
    }
    req_free(r);
}

static void settle(struct ld__http *h);

static void arm_later(struct ld__http *h)
{
    static const struct timeval zero = {0, 0};
    h->deferred = true;
    if (h->later)
        event_add(h->later, &zero);
}

/* The read timeout starts again (a byte came, or the request started). */
static void idle_restart(struct ld__http_req *r)
{
    if (r->idle && r->h->o.read_timeout_ms > 0) {
        long ms = r->h->o.read_timeout_ms;
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        event_add(r->idle, &tv);
    }
}

/* Tells the request's user it is over, once. */
static void req_done(struct ld__http_req *r, int code, const char *message)
{
    if (r->dead)
        return;
    r->dead = true;
    r->cb.on_done(r->arg, code, message);
}

/* on_response, if it has not come: @return false when the user stopped. */
static bool respond(struct ld__http_req *r)
{
    if (r->responded)
        return true;
    r->responded = true;
    long status = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    if (r->cb.on_response && r->cb.on_response(r->arg, status, r->rh, r->rn) != 0) {
        r->dead = true;
        return false;
    }
    return true;
}

static size_t on_curl_body(char *p, size_t size, size_t n, void *arg)
{
    struct ld__http_req *r = arg;
    size_t len = size * n;
    if (r->dead || r->h->dying)
        return 0; /* curl ends the transfer */
    idle_restart(r);
    if (!respond(r))
        return 0;
    if (len > 0 && r->cb.on_body && r->cb.on_body(r->arg, p, len) != 0) {
        r->dead = true;
        return 0;
    }
    return r->dead || r->h->dying ? 0 : len;
}

static size_t on_curl_header(char *p, size_t size, size_t n, void *arg)
{
    struct ld__http_req *r = arg;
    size_t len = size * n;
    if (r->dead || r->h->dying)
        return 0;
    idle_restart(r);
    while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r'))
        len--;
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        headers_clear(r); /* a new response (after a 1xx or a proxy's CONNECT) */
        return size * n;
    }
    const char *colon = memchr(p, ':', len);
    if (!colon)
        return size * n; /* the empty line, or a folded line nobody reads */
    size_t nl = (size_t)(colon - p);
    const char *v = colon + 1;
    size_t vl = len - nl - 1;
    while (vl > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        vl--;
    }
    while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        vl--;
    if (r->rn == r->rcap) {
        size_t cap = r->rcap ? r->rcap * 2 : 16;
        struct ld__http_header *grown = ld__realloc(r->rh, cap * sizeof *grown);
        if (!grown) {
            r->nomem = true;
            return 0;
        }
        r->rh = grown;
        r->rcap = cap;
    }
    char *block = ld__malloc(nl + vl + 2);
    if (!block) {
        r->nomem = true;
        return 0;
    }
    memcpy(block, p, nl);
    block[nl] = '\0';
    memcpy(block + nl + 1, v, vl);
    block[nl + 1 + vl] = '\0';
    r->rh[r->rn++] = (struct ld__http_header){block, block + nl + 1};
    return size * n;
}

static void on_idle(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ld__http_req *r = arg;
    struct ld__http *h = r->h;
    h->frames++;
    req_done(r, LD_ETIMEDOUT, "no data within the read timeout");
    if (!h->dying) /* (a timer never runs inside curl) */
        req_end(r);
    h->frames--;
    settle(h);
}

/* The finished transfers: their users are told, and they go. */
static void check_done(struct ld__http *h)
{
    CURLMsg *msg;
    int left;
    while (!h->dying && (msg = curl_multi_info_read(h->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURLcode res = msg->data.result;
        struct ld__http_req *r = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        if (!r)
            continue;
        curl_multi_remove_handle(h->multi, r->easy);
        r->added = false;
        if (r->idle)
            event_del(r->idle);
        if (res == CURLE_OK) {
            if (respond(r))
                req_done(r, 0, NULL);
        } else if (r->nomem || res == CURLE_OUT_OF_MEMORY) {
            req_done(r, LD_ENOMEM, "out of memory");
        } else if (res == CURLE_OPERATION_TIMEDOUT) {
            req_done(r, LD_ETIMEDOUT, r->errbuf[0] ? r->errbuf : curl_easy_strerror(res));
        } else {
            req_done(r, LD_EIO, r->errbuf[0] ? r->errbuf : curl_easy_strerror(res));
        }
        if (!h->dying)
            req_free(r);
    }
}

/* curl_multi_socket_action() failed (out of memory, mostly): it does not
 * say which transfer it left without a socket or timer to wait on, and
 * such a transfer would wait for ever. Every request still out ends with
 * LD_ENOMEM (LD_EIO for another failure); users retry as after any
 * failure. */
static void lost(struct ld__http *h, CURLMcode rc)
{
    for (struct ld__http_req *r = h->reqs; r && !h->dying; r = r->next)
        if (r->added && !r->dead)
            req_done(r, rc == CURLM_OUT_OF_MEMORY ? LD_ENOMEM : LD_EIO, curl_multi_strerror(rc));
    arm_later(h); /* settle() takes them out */
}

/* Runs curl on `fd` (or its timeout) and what follows. */
static void drive(struct ld__http *h, curl_socket_t fd, int action)
{
    int running;
    h->frames++;
    h->in_curl = true;
    CURLMcode rc = curl_multi_socket_action(h->multi, fd, action, &running);
    h->in_curl = false;
    check_done(h);
    if (rc != CURLM_OK && !h->dying)
        lost(h, rc);
    h->frames--;
    settle(h);
}

static void on_socket_event(evutil_socket_t fd, short what, void *arg)
{
    int action = (what & EV_READ ? CURL_CSELECT_IN : 0) | (what & EV_WRITE ? CURL_CSELECT_OUT : 0);
    drive(arg, fd, action);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    drive(arg, CURL_SOCKET_TIMEOUT, 0);
}

static void sock_free(struct ld__http *h, struct sock *sk)
{
    if (sk->prev)
        sk->prev->next = sk->next;
    else
        h->socks = sk->next;
    if (sk->next)
        sk->next->prev = sk->prev;
    event_free(sk->ev);
    ld__free(sk);
}

/* A socket of `easy` could not be watched: its request ends with LD_ENOMEM
 * once the dispatch is over (curl would wait for it for ever). The socket
 * callback still says 0: libcurl 7.88, told -1, goes on with the socket
 * half set up and crashes later (a test of check_streaming.c did). */
static int sock_failed(struct ld__http *h, CURL *easy)
{
    struct ld__http_req *r = NULL;
    if (easy && curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&r) == CURLE_OK && r) {
        r->nomem = true;
        arm_later(h);
    }
    return 0;
}

static int curl_socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    struct ld__http *h = userp;
    struct sock *sk = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (sk) {
            sock_free(h, sk);
            curl_multi_assign(h->multi, s, NULL);
        }
        return 0;
    }
    short events =
        EV_PERSIST | (what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0);
    if (!sk) {
        sk = ld__calloc(1, sizeof *sk);
        if (!sk || !(sk->ev = event_new(h->base, s, events, on_socket_event, h))) {
            ld__free(sk);
            return sock_failed(h, easy);
        }
        sk->next = h->socks;
        if (sk->next)
            sk->next->prev = sk;
        h->socks = sk;
        curl_multi_assign(h->multi, s, sk);
    } else {
        event_del(sk->ev);
        event_assign(sk->ev, h->base, s, events, on_socket_event, h);
    }
    return event_add(sk->ev, NULL) == 0 ? 0 : sock_failed(h, easy);
}

static int curl_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    struct ld__http *h = userp;
    if (timeout_ms < 0)
        return event_del(h->timer) == 0 ? 0 : -1;
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    return event_add(h->timer, &tv) == 0 ? 0 : -1;
}

/* ---- the client ---------------------------------------------------------- */

static void real_free(struct ld__http *h)
{
    while (h->reqs) {
        struct ld__http_req *r = h->reqs;
        r->dead = true;
        req_end(r);
    }
    if (h->multi)
        curl_multi_cleanup(h->multi); /* it may say CURL_POLL_REMOVE of its sockets */
    while (h->socks)
        sock_free(h, h->socks);
    if (h->timer)
        event_free(h->timer);
    if (h->later)
        event_free(h->later);
    ld__free(h->ca_file);
    ld__free(h->proxy);
    ld__free(h->user_agent);
    ld__free(h);
}

/* The operations put off while curl or a callback ran. */
static void settle(struct ld__http *h)
{
    if (h->frames > 0 || h->in_curl)
        return;
    if (h->dying) {
        real_free(h);
        return;
    }
    if (!h->deferred)
        return;
    h->deferred = false;
    h->frames++;
    for (struct ld__http_req *r = h->reqs, *next; r; r = next) {
        next = r->next;
        if (r->nomem && !r->dead && r->added)
            req_done(r, LD_ENOMEM, "out of memory"); /* (sock_failed) */
        if (r->dead) {
            req_end(r);
        } else if (!r->added) {
            if (curl_multi_add_handle(h->multi, r->easy) == CURLM_OK) {
                r->added = true;
                idle_restart(r);
            } else {
                req_done(r, LD_ENOMEM, "out of memory");
                req_free(r);
            }
        }
    }
    h->frames--;
    if (h->dying)
        real_free(h);
}

static void on_later(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    settle(arg);
}

static char *dup_or_null(const char *s, bool *ok)
{
    if (!s)
        return NULL;
    char *d = ld__strdup(s);
    *ok &= d != NULL;
    return d;
}

struct ld__http *ld__http_new(struct event_base *base, const struct ld__http_options *options)
{
    if (!base)
        return NULL;
    pthread_once(&g_curl_once, curl_init_once);
    if (!g_curl_ok)
        return NULL;
    struct ld__http *h = ld__calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->base = base;
    if (options)
        h->o = *options;
    bool ok = true;
    h->o.ca_file = h->ca_file = dup_or_null(h->o.ca_file, &ok);
    h->o.proxy = h->proxy = dup_or_null(h->o.proxy, &ok);
    h->o.user_agent = h->user_agent = dup_or_null(h->o.user_agent, &ok);
    if (h->o.connect_timeout_ms <= 0)
        h->o.connect_timeout_ms = 10000;
    h->timer = evtimer_new(base, on_timer, h);
    h->later = evtimer_new(base, on_later, h);
    h->multi = curl_multi_init();
    if (!ok || !h->timer || !h->later || !h->multi ||
        curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, curl_socket_cb) != CURLM_OK ||
        curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h) != CURLM_OK ||
        curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, curl_timer_cb) != CURLM_OK ||
        curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h) != CURLM_OK) {
        real_free(h);
        return NULL;
    }
    return h;
}

void ld__http_free(struct ld__http *h)
{
    if (!h || h->dying)
        return;
    h->dying = true;
    for (struct ld__http_req *r = h->reqs; r; r = r->next)
        r->dead = true;
    settle(h);
}

size_t ld__http_active(const struct ld__http *h)
{
    size_t n = 0;
    for (const struct ld__http_req *r = h ? h->reqs : NULL; r; r = r->next)
        n += !r->dead;
    return n;
}

/* The easy handle of `r`, set up. @return false without memory. */
static bool easy_setup(struct ld__http_req *r, const char *method, const char *url,
                       const char *const *headers, const char *body, size_t body_len, bool lent)
{
    const struct ld__http_options *o = &r->h->o;
    CURL *e = r->easy;
    for (size_t i = 0; headers && headers[i]; i++) {
        struct curl_slist *l = curl_slist_append(r->headers, headers[i]);
        if (!l)
            return false;
        r->headers = l;
    }
    bool ok = curl_easy_setopt(e, CURLOPT_URL, url) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)r) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_curl_body) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_WRITEDATA, r) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_curl_header) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_HEADERDATA, r) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "gzip, deflate") == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK;
    if (ok && strcmp(method, "GET") != 0) {
        if (strcmp(method, "HEAD") == 0)
            ok = curl_easy_setopt(e, CURLOPT_NOBODY, 1L) == CURLE_OK;
        else
            ok = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method) == CURLE_OK;
    }
    if (ok && body)
        ok = curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len) == CURLE_OK &&
             curl_easy_setopt(e, lent ? CURLOPT_POSTFIELDS : CURLOPT_COPYPOSTFIELDS, body) ==
                 CURLE_OK;
    if (ok && o->ca_file)
        ok = curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file) == CURLE_OK;
    if (ok && o->insecure)
        ok = curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L) == CURLE_OK;
    if (ok && o->proxy)
        ok = curl_easy_setopt(e, CURLOPT_PROXY, o->proxy) == CURLE_OK;
    if (ok && o->user_agent)
        ok = curl_easy_setopt(e, CURLOPT_USERAGENT, o->user_agent) == CURLE_OK;
    return ok;
}

static struct ld__http_req *request(struct ld__http *h, const char *method, const char *url,
                                    const char *const *headers, const char *body, size_t body_len,
                                    const struct ld__http_body *lent,
                                    const struct ld__http_callbacks *cb, void *arg)
{
    if (!h || h->dying || !method || !url || !cb || !cb->on_done)
        return NULL;
    struct ld__http_req *r = ld__calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->h = h;
    r->cb = *cb;
    r->arg = arg;
    r->next = h->reqs;
    if (r->next)
        r->next->prev = r;
    h->reqs = r;
    r->easy = curl_easy_init();
    if (h->o.read_timeout_ms > 0)
        r->idle = evtimer_new(h->base, on_idle, r);
    if (!r->easy || (h->o.read_timeout_ms > 0 && !r->idle) ||
        !easy_setup(r, method, url, headers, body, body_len, lent != NULL)) {
        req_free(r);
        return NULL;
    }
    if (!h->in_curl && h->frames == 0) {
        if (curl_multi_add_handle(h->multi, r->easy) != CURLM_OK) {
            req_free(r); /* a lent body is still the caller's */
            return NULL;
        }
        r->added = true;
        idle_restart(r);
    } else {
        arm_later(h); /* added once the dispatch is over */
    }
    if (lent) {
        r->body_release = lent->release;
        r->body_owner = lent->owner;
    }
    return r;
}

struct ld__http_req *ld__http_request(struct ld__http *h, const char *method, const char *url,
                                      const char *const *headers, const char *body, size_t body_len,
                                      const struct ld__http_callbacks *cb, void *arg)
{
    return request(h, method, url, headers, body, body_len, NULL, cb, arg);
}

struct ld__http_req *ld__http_request_lent(struct ld__http *h, const char *method, const char *url,
                                           const char *const *headers,
                                           const struct ld__http_body *body,
                                           const struct ld__http_callbacks *cb, void *arg)
{
    if (!body || !body->bytes || !body->release)
        return NULL;
    return request(h, method, url, headers, body->bytes, body->len, body, cb, arg);
}

void ld__http_cancel(struct ld__http_req *r)
{
    if (!r || r->dead)
        return;
    r->dead = true;
    struct ld__http *h = r->h;
    if (h->in_curl || h->frames > 0)
        arm_later(h); /* removed once the dispatch is over */
    else
        req_end(r);
}
