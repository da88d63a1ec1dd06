/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * One connection to Redis on the loop (redis-internal.h): hiredis's
 * asynchronous API through its libevent adapter, whose writes are made
 * here, one per loop pass for all of the pass's commands (add_write()).
 * Commands are pipelined; Redis answers them in order, so a queue of
 * records (one per command) pairs each reply with its caller, stamps it
 * for the command timeout (one timer, for the oldest), and fails what is
 * left when the connection ends.
 *
 * Each hiredis context has a session (struct sess) that outlives the
 * connection's interest in it: hiredis may free a context later than asked
 * (inside its own callbacks) and then calls every pending reply callback
 * with NULL, so those callbacks find the session, and the session knows
 * whether anyone still listens. The adapter's cleanup hook, the last call
 * hiredis makes for a context, frees the session.
 *
 * States: idle (waiting to connect again, or closed: sends fail at once),
 * resolving (a host name, through libevent's asynchronous resolver),
 * connecting (hiredis connecting and the handshake, AUTH and SELECT, sent
 * ahead of the callers' commands, which wait behind it), ready.
 */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <hiredis/sds.h>

#include <ldasync/error.h>

#include "redis/redis-internal.h"

struct rec {
    struct rec *next;
    ldr_reply_fn fn; /* NULL: nobody listens any more (or a handshake step) */
    void *arg;
    int64_t sent_ms;
    bool handshake;
};

struct sess {
    struct ldr_conn *c; /* NULL once the connection has let go of it */
    redisAsyncContext *ac;
    void (*adapter_cleanup)(void *privdata);
    struct event *flush; /* active while commands wait to be written: on_flush() */
    bool flush_due;
    struct rec *head, *tail;
    size_t n;
    int code; /* what the callers of records left hear */
    char msg[512];
};

enum state { S_IDLE, S_RESOLVING, S_CONNECTING, S_READY, S_CLOSED };

struct ldr_conn {
    struct event_base *base;
    const struct ld_redis_options *o; /* borrowed from the owner */
    ldr_avail_fn avail;
    void *avail_arg;
    void (*settled)(void *arg); /* a name resolution ended */
    void *settled_arg;
    enum state state;
    struct sess *s; /* connecting or ready */
    size_t handshake_left;
    int64_t started_ms, ready_ms;
    struct event *retry; /* connect again */
    struct event *timer; /* the connect timeout, then the oldest command's */
    struct evdns_base *dns;
    struct evdns_getaddrinfo_request *req;
    int64_t delay_ms;
    uint64_t rng;
    uint64_t reads;      /* read events so far (ldr_conn_read_seq()) */
    size_t read_pending; /* commands unanswered when the last read began */
    bool available;
    bool answered; /* the session had an answer (not an error) from Redis */
    char why[512]; /* why the last connection failed */
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* a few ms a tick: timeouts are longer */
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void arm(struct event *ev, int64_t ms)
{
    if (ms < 0)
        ms = 0;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    event_add(ev, &tv);
}

static void set_available(struct ldr_conn *c, bool yes)
{
    if (c->available == yes)
        return;
    c->available = yes;
    if (c->avail)
        c->avail(c->avail_arg, yes);
}

/* A name resolution ended (a connection is being made, or the resolution
 * failed): the owner may start what waited for it. Called last: it may
 * free the connection. */
static void settled(struct ldr_conn *c)
{
    if (c->settled)
        c->settled(c->settled_arg);
}

static void became_ready(struct ldr_conn *c)
{
    c->state = S_READY;
    c->ready_ms = mono_ms();
    set_available(c, true);
}

/* ---- sessions ----------------------------------------------------------- */

static struct rec *pop(struct sess *s)
{
    struct rec *r = s->head;
    if (r) {
        s->head = r->next;
        if (!s->head)
            s->tail = NULL;
        s->n--;
    }
    return r;
}

static void schedule_reconnect(struct ldr_conn *c);

/* The connection lets go of its session (ending: code and message for the
 * records left) and waits to connect again. */
static void detach(struct ldr_conn *c, int code, const char *msg)
{
    struct sess *s = c->s;
    if (!s)
        return;
    c->s = NULL;
    s->c = NULL;
    s->code = code;
    snprintf(s->msg, sizeof(s->msg), "%s", msg);
    snprintf(c->why, sizeof(c->why), "%s", msg);
    event_del(c->timer);
    if (c->state != S_CLOSED) {
        /* the delay starts over after a connection that worked: one that
         * answered, or lasted a second. A server that accepts and hangs up
         * at once (Redis at maxclients, a proxy without its backend) is
         * tried again with the delay doubling, not every initial delay. */
        if (c->state == S_READY && (c->answered || mono_ms() - c->ready_ms >= 1000))
            c->delay_ms = c->o->reconnect_ms;
        c->state = S_IDLE;
        set_available(c, false);
        schedule_reconnect(c);
    }
}

/* Ends the current session: its records fail with `code` (now, or when
 * hiredis is done with the callback it is in). */
static void fail(struct ldr_conn *c, int code, const char *fmt, ...) LD_PRINTF(3, 4);
static void fail(struct ldr_conn *c, int code, const char *fmt, ...)
{
    struct sess *s = c->s;
    if (!s)
        return;
    char where[160], msg[512];
    ldr_options_where(c->o, where, sizeof(where));
    va_list ap;
    va_start(ap, fmt);
    char text[160];
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof(msg), "Redis at %s: %s", where, text);
    detach(c, code, msg);
    redisAsyncFree(s->ac); /* the records' callbacks run (maybe later) */
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct sess *s = privdata;
    struct ldr_conn *c = s->c;
    redisReply *r = reply;
    if (!r && c) { /* hiredis is ending the connection itself */
        char msg[512];
        char where[160];
        ldr_options_where(c->o, where, sizeof(where));
        snprintf(msg, sizeof(msg), "Redis at %s: %s", where,
                 s->ac->errstr[0] ? s->ac->errstr : "connection lost");
        detach(c, LD_ESTORE, msg);
    }
    if (r && c && r->type != REDIS_REPLY_ERROR)
        c->answered = true;
    struct rec *rc = pop(s);
    if (!rc)
        return;
    if (rc->handshake) {
        if (c && r) {
            if (r->type == REDIS_REPLY_ERROR) {
                fail(c, LD_ESTORE, "%.*s", (int)r->len, r->str);
            } else if (--c->handshake_left == 0 && c->state == S_CONNECTING &&
                       (s->ac->c.flags & REDIS_CONNECTED)) {
                became_ready(c);
            }
        }
        ldr_free(rc);
        return;
    }
    ldr_reply_fn fn = rc->fn;
    void *arg = rc->arg;
    ldr_free(rc);
    if (!fn)
        return;
    if (r)
        fn(arg, r, 0, NULL);
    else
        fn(arg, NULL, s->code, s->msg);
}

/* hiredis's last call for a context: the adapter frees its events, then
 * the session goes. */
static void on_cleanup(void *privdata)
{
    redisLibeventEvents *e = privdata;
    struct sess *s = e->context->data;
    s->adapter_cleanup(privdata);
    if (s->flush)
        event_free(s->flush);
    if (s->c) /* ended by hiredis with no command in flight */
        detach(s->c, LD_ESTORE, "Redis closed the connection");
    while (s->head)
        ldr_free(pop(s));
    ldr_free(s);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    struct sess *s = ac->data;
    struct ldr_conn *c = s->c;
    if (!c)
        return;
    if (status != REDIS_OK) {
        char where[160], msg[512];
        ldr_options_where(c->o, where, sizeof(where));
        snprintf(msg, sizeof(msg), "Redis at %s: cannot connect: %s", where,
                 ac->errstr[0] ? ac->errstr : "error");
        detach(c, LD_ESTORE, msg); /* hiredis frees the context next */
        return;
    }
    if (c->handshake_left == 0)
        became_ready(c);
}

/* ---- the timer ---------------------------------------------------------- */

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ldr_conn *c = arg;
    int64_t now = mono_ms();
    if (c->state == S_RESOLVING || c->state == S_CONNECTING) {
        int64_t left = c->started_ms + c->o->connect_ms - now;
        if (left > 0) {
            arm(c->timer, left);
            return;
        }
        if (c->state == S_RESOLVING) {
            struct evdns_getaddrinfo_request *req = c->req;
            c->req = NULL;
            evdns_getaddrinfo_cancel(req); /* its callback sees the cancel */
            snprintf(c->why, sizeof(c->why), "Redis at %s:%d: name resolution timed out",
                     c->o->host, c->o->port);
            c->state = S_IDLE;
            set_available(c, false);
            schedule_reconnect(c);
            settled(c);
            return;
        }
        fail(c, LD_ETIMEDOUT, "connect timed out after %lld ms", (long long)c->o->connect_ms);
        return;
    }
    if (c->state != S_READY || !c->s || !c->s->head)
        return;
    int64_t since = c->s->head->sent_ms > c->ready_ms ? c->s->head->sent_ms : c->ready_ms;
    int64_t left = since + c->o->command_ms - now;
    if (left > 0) {
        arm(c->timer, left);
        return;
    }
    fail(c, LD_ETIMEDOUT, "no answer within %lld ms", (long long)c->o->command_ms);
}

/* ---- SIGPIPE ------------------------------------------------------------ */

/* hiredis writes with write(2): to a Redis that has gone, that raises
 * SIGPIPE, whose default action ends the process. Unless the program
 * ignores SIGPIPE already (as servers usually do), each write is made with
 * SIGPIPE blocked in this thread, and a SIGPIPE it raised is taken back. */
static void on_writable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    redisLibeventEvents *e = arg;
    sigset_t pipe, old, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, &old);
    redisAsyncHandleWrite(e->context); /* may free the context and `e` */
    /* a SIGPIPE now pending while blocked here is this write's (one that
     * the thread had blocked itself would stay for it) */
    if (!sigismember(&old, SIGPIPE) && sigpending(&pending) == 0 &&
        sigismember(&pending, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* The adapter's read event, counted (ldr_conn_read_seq()). */
static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    redisLibeventEvents *e = arg;
    struct sess *s = e->context->data;
    if (s->c) {
        s->c->reads++;
        s->c->read_pending = s->n;
    }
    redisAsyncHandleRead(e->context); /* may free the context and `e` */
}

/* ---- writing ------------------------------------------------------------ */

/* hiredis asks to write (commands were added to its buffer, or it is
 * connecting). Connected, the commands of the whole loop pass go out in
 * one write at its end (on_flush(), an event made active: no epoll_ctl to
 * watch for writability, no epoll_wait to be told of it); else, and for
 * what a write leaves, the adapter's write event. */
static void add_write(void *privdata)
{
    redisLibeventEvents *e = privdata;
    struct sess *s = e->context->data;
    if (!(e->context->c.flags & REDIS_CONNECTED)) {
        event_add(e->wev, NULL);
        return;
    }
    if (!s->flush_due) {
        s->flush_due = true;
        event_active(s->flush, EV_WRITE, 1);
    }
}

/* hiredis's output buffer written as redisBufferWrite() would, with
 * send(MSG_NOSIGNAL): no SIGPIPE (on_writable() blocks it around
 * hiredis's write(2)). */
static void on_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct sess *s = arg;
    redisContext *rc = &s->ac->c;
    redisLibeventEvents *e = s->ac->ev.data;
    s->flush_due = false;
    size_t len = sdslen(rc->obuf);
    if (len == 0 || rc->err || (rc->flags & REDIS_FREEING))
        return;
    ssize_t n = send(rc->fd, rc->obuf, len, MSG_NOSIGNAL);
    if (n == (ssize_t)len) {
        /* as hiredis does, a large buffer is given back */
        sds fresh = sdsalloc(rc->obuf) > 64 * 1024 ? sdsempty() : NULL;
        if (fresh) {
            sdsfree(rc->obuf);
            rc->obuf = fresh;
        } else {
            sdsclear(rc->obuf);
        }
        return;
    }
    if (n > 0)
        sdsrange(rc->obuf, n, -1);
    /* the rest, or the error (EAGAIN: a full socket), through hiredis when
     * the socket is writable */
    event_add(e->wev, NULL);
}

static bool sigpipe_ignored(void)
{
    struct sigaction sa;
    return sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}

/* ---- connecting --------------------------------------------------------- */

static int push(struct sess *s, ldr_reply_fn fn, void *arg, bool handshake)
{
    struct rec *r = ldr_malloc(sizeof(*r));
    if (!r)
        return LD_ENOMEM;
    r->next = NULL;
    r->fn = fn;
    r->arg = arg;
    r->sent_ms = mono_ms();
    r->handshake = handshake;
    if (s->tail)
        s->tail->next = r;
    else
        s->head = r;
    s->tail = r;
    s->n++;
    return 0;
}

/* Undoes the last push() (hiredis refused the command). */
static void unpush(struct sess *s)
{
    struct rec *prev = NULL, *r = s->head;
    while (r && r->next) {
        prev = r;
        r = r->next;
    }
    if (!r)
        return;
    if (prev)
        prev->next = NULL;
    else
        s->head = NULL;
    s->tail = prev;
    s->n--;
    ldr_free(r);
}

static int handshake_cmd(struct ldr_conn *c, int argc, const char **argv)
{
    struct sess *s = c->s;
    if (push(s, NULL, NULL, true) != 0)
        return -1;
    if (redisAsyncCommandArgv(s->ac, on_reply, s, argc, argv, NULL) != REDIS_OK) {
        unpush(s);
        return -1;
    }
    c->handshake_left++;
    return 0;
}

/* Connects to an address (numeric) or the socket. */
static void connect_to(struct ldr_conn *c, const char *ip)
{
    struct sess *s = ldr_calloc(1, sizeof(*s));
    if (!s) {
        snprintf(c->why, sizeof(c->why), "out of memory");
        schedule_reconnect(c);
        return;
    }
    redisAsyncContext *ac =
        c->o->path ? redisAsyncConnectUnix(c->o->path) : redisAsyncConnect(ip, c->o->port);
    if (!ac || ac->err) {
        char where[160];
        ldr_options_where(c->o, where, sizeof(where));
        snprintf(c->why, sizeof(c->why), "Redis at %s: cannot connect: %s", where,
                 ac && ac->errstr[0] ? ac->errstr : "out of memory");
        if (ac)
            redisAsyncFree(ac);
        ldr_free(s);
        c->state = S_IDLE;
        set_available(c, false);
        schedule_reconnect(c);
        return;
    }
    s->c = c;
    s->ac = ac;
    ac->data = s;
    redisLibeventAttach(ac, c->base);
    redisLibeventEvents *e = ac->ev.data;
    /* a persistent read event: the adapter's is re-added after every
     * reply, two epoll_ctl calls each time */
    event_del(e->rev);
    event_assign(e->rev, c->base, ac->c.fd, EV_READ | EV_PERSIST, on_readable, e);
    event_add(e->rev, NULL);
    if (!sigpipe_ignored()) {
        event_del(e->wev);
        event_assign(e->wev, c->base, ac->c.fd, EV_WRITE, on_writable, e);
        event_add(e->wev, NULL);
    }
    s->adapter_cleanup = ac->ev.cleanup;
    ac->ev.cleanup = on_cleanup;
    s->flush = event_new(c->base, -1, 0, on_flush, s);
    if (s->flush)
        ac->ev.addWrite = add_write; /* else hiredis writes from the write event */
    redisAsyncSetConnectCallback(ac, on_connect);
    c->s = s;
    c->state = S_CONNECTING;
    c->handshake_left = 0;
    c->answered = false;
    char db[24];
    snprintf(db, sizeof(db), "%d", c->o->database);
    if ((c->o->password && handshake_cmd(c, 2, (const char *[]){"AUTH", c->o->password}) != 0) ||
        (c->o->database && handshake_cmd(c, 2, (const char *[]){"SELECT", db}) != 0)) {
        fail(c, LD_ENOMEM, "out of memory");
        return;
    }
    if (!event_pending(c->timer, EV_TIMEOUT, NULL))
        arm(c->timer, c->started_ms + c->o->connect_ms - mono_ms());
}

static void on_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
    struct ldr_conn *c = arg;
    if (result == EVUTIL_EAI_CANCEL) {
        if (res)
            evutil_freeaddrinfo(res);
        return; /* timed out or freed: whoever cancelled has dealt with it */
    }
    c->req = NULL;
    if (result != 0 || !res) {
        snprintf(c->why, sizeof(c->why), "Redis at %s:%d: cannot resolve the name: %s", c->o->host,
                 c->o->port, evutil_gai_strerror(result));
        if (res)
            evutil_freeaddrinfo(res);
        c->state = S_IDLE;
        event_del(c->timer);
        set_available(c, false);
        schedule_reconnect(c);
        settled(c);
        return;
    }
    char ip[64];
    struct sockaddr_storage ss;
    memcpy(&ss, res->ai_addr, res->ai_addrlen < sizeof(ss) ? (size_t)res->ai_addrlen : sizeof(ss));
    const void *a = res->ai_family == AF_INET6
                        ? (const void *)&((const struct sockaddr_in6 *)(const void *)&ss)->sin6_addr
                        : (const void *)&((const struct sockaddr_in *)(const void *)&ss)->sin_addr;
    evutil_inet_ntop(res->ai_family, a, ip, sizeof(ip));
    evutil_freeaddrinfo(res);
    connect_to(c, ip);
    settled(c);
}

/* Whether `host` needs resolving (not an address, not "localhost"). */
static bool is_name(const char *host)
{
    unsigned char buf[16];
    return evutil_inet_pton(AF_INET, host, buf) != 1 && evutil_inet_pton(AF_INET6, host, buf) != 1;
}

static void start(struct ldr_conn *c)
{
    c->started_ms = mono_ms();
    if (c->o->path) {
        connect_to(c, NULL);
        return;
    }
    if (strcmp(c->o->host, "localhost") == 0) {
        connect_to(c, "127.0.0.1");
        return;
    }
    if (!is_name(c->o->host)) {
        connect_to(c, c->o->host);
        return;
    }
    if (!c->dns) {
        c->dns = evdns_base_new(c->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                             EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        if (c->dns)
            evdns_base_load_hosts(c->dns, NULL);
    }
    if (!c->dns) {
        snprintf(c->why, sizeof(c->why), "Redis at %s:%d: no name resolver", c->o->host,
                 c->o->port);
        schedule_reconnect(c);
        return;
    }
    struct evutil_addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
    char port[8];
    snprintf(port, sizeof(port), "%d", c->o->port);
    c->state = S_RESOLVING;
    arm(c->timer, c->o->connect_ms);
    /* may answer within the call (the hosts file): on_resolved() then ran */
    struct evdns_getaddrinfo_request *req =
        evdns_getaddrinfo(c->dns, c->o->host, port, &hints, on_resolved, c);
    if (c->state == S_RESOLVING)
        c->req = req;
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ldr_conn *c = arg;
    if (c->state == S_IDLE)
        start(c);
}

static uint64_t next_rand(struct ldr_conn *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return c->rng;
}

static void schedule_reconnect(struct ldr_conn *c)
{
    if (c->state == S_CLOSED)
        return;
    c->state = S_IDLE;
    int64_t d = c->delay_ms;
    /* between half the delay and all of it, so that many processes that
     * lost one Redis do not come back at the same moment */
    int64_t wait = d / 2 + (int64_t)(next_rand(c) % (uint64_t)(d / 2 + 1));
    c->delay_ms = d * 2 > c->o->reconnect_max_ms ? c->o->reconnect_max_ms : d * 2;
    arm(c->retry, wait);
}

/* ---- the interface ------------------------------------------------------ */

struct ldr_conn *ldr_conn_new(struct event_base *base, const struct ld_redis_options *o,
                              ldr_avail_fn avail, void *arg)
{
    struct ldr_conn *c = ldr_calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->base = base;
    c->o = o;
    c->avail = avail;
    c->avail_arg = arg;
    c->available = true; /* as a store starts; a failure says otherwise */
    c->delay_ms = o->reconnect_ms;
    c->rng = (uint64_t)(uintptr_t)c ^ ((uint64_t)mono_ms() << 20) ^ UINT64_C(0x9e3779b97f4a7c15);
    c->retry = evtimer_new(base, on_retry, c);
    c->timer = evtimer_new(base, on_timer, c);
    if (!c->retry || !c->timer) {
        ldr_conn_free(c);
        return NULL;
    }
    start(c);
    return c;
}

const char *ldr_conn_why(const struct ldr_conn *c)
{
    return c->state == S_RESOLVING ? "Redis: still resolving its host name"
           : c->why[0]             ? c->why
                                   : "not connected to Redis";
}

int ldr_conn_send(struct ldr_conn *c, int argc, const char **argv, const size_t *lens,
                  ldr_reply_fn fn, void *arg, const char **why)
{
    *why = NULL;
    if (!ldr_conn_usable(c)) {
        *why = ldr_conn_why(c);
        return LD_ESTORE;
    }
    struct sess *s = c->s;
    bool was_empty = !s->head;
    /* formatted by hiredis in one block (redisAsyncCommandArgv() builds an
     * sds string: three allocations and a printf-like pass per argument) */
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0 || !cmd)
        return LD_ENOMEM;
    if (push(s, fn, arg, false) != 0) {
        redisFreeCommand(cmd);
        return LD_ENOMEM;
    }
    int rc = redisAsyncFormattedCommand(s->ac, on_reply, s, cmd, (size_t)len);
    redisFreeCommand(cmd);
    if (rc != REDIS_OK) {
        unpush(s);
        *why = "Redis connection is closing";
        return LD_ESTORE;
    }
    if (was_empty && c->state == S_READY && !event_pending(c->timer, EV_TIMEOUT, NULL))
        arm(c->timer, c->o->command_ms);
    return 0;
}

void ldr_conn_reset(struct ldr_conn *c, const char *why)
{
    fail(c, LD_ESTORE, "%s", why);
}

void ldr_conn_on_settled(struct ldr_conn *c, void (*fn)(void *arg), void *arg)
{
    c->settled = fn;
    c->settled_arg = arg;
}

bool ldr_conn_resolving(const struct ldr_conn *c)
{
    return c->state == S_RESOLVING;
}

bool ldr_conn_usable(const struct ldr_conn *c)
{
    return c->s && (c->state == S_CONNECTING || c->state == S_READY);
}

uint64_t ldr_conn_read_seq(const struct ldr_conn *c)
{
    return c->reads;
}

size_t ldr_conn_read_pending(const struct ldr_conn *c)
{
    return c->read_pending;
}

size_t ldr_conn_in_flight(const struct ldr_conn *c)
{
    return c->s ? c->s->n : 0;
}

void ldr_conn_free(struct ldr_conn *c)
{
    if (!c)
        return;
    c->state = S_CLOSED;
    if (c->req) {
        struct evdns_getaddrinfo_request *req = c->req;
        c->req = NULL;
        evdns_getaddrinfo_cancel(req);
    }
    struct sess *s = c->s;
    if (s) {
        c->s = NULL;
        s->c = NULL;
        for (struct rec *r = s->head; r; r = r->next)
            r->fn = NULL;
        redisAsyncFree(s->ac);
    }
    if (c->retry)
        event_free(c->retry);
    if (c->timer)
        event_free(c->timer);
    if (c->dns)
        evdns_base_free(c->dns, 0);
    ldr_free(c);
}
