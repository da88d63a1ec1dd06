/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/conn.c: the server's record of each connection (server.c's top
 * says why evhttp needs one): made with the connection's bufferevent,
 * found by it, with the deadline of the request being read, and told of
 * the connection's close.
 */
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "serve-internal.h"

static void conn_link(struct lds_conn **list, struct lds_conn *c)
{
    c->prev = NULL;
    c->next = *list;
    if (*list)
        (*list)->prev = c;
    *list = c;
}

static void conn_unlink(struct lds_conn **list, struct lds_conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        *list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* The map bufferevent -> connection: open addressing, linear probing. */
static size_t map_hash(const void *p, size_t mask)
{
    uintptr_t v = (uintptr_t)p;
    v ^= v >> 17;
    v *= 0x9e3779b97f4a7c15ULL;
    return (size_t)(v >> 20) & mask;
}

static int map_put(lds_server *srv, struct lds_conn *c)
{
    if ((srv->map_n + 1) * 2 > srv->map_mask + 1 || !srv->map) {
        size_t cap = srv->map ? (srv->map_mask + 1) * 2 : 64;
        struct lds_conn **t = lds_calloc(cap, sizeof *t);
        if (!t)
            return -1;
        for (size_t i = 0; srv->map && i <= srv->map_mask; i++)
            if (srv->map[i]) {
                size_t j = map_hash(srv->map[i]->bev, cap - 1);
                while (t[j])
                    j = (j + 1) & (cap - 1);
                t[j] = srv->map[i];
            }
        lds_free(srv->map);
        srv->map = t;
        srv->map_mask = cap - 1;
    }
    size_t j = map_hash(c->bev, srv->map_mask);
    while (srv->map[j])
        j = (j + 1) & srv->map_mask;
    srv->map[j] = c;
    srv->map_n++;
    return 0;
}

static struct lds_conn *map_get(lds_server *srv, const struct bufferevent *bev)
{
    if (!srv->map)
        return NULL;
    for (size_t j = map_hash(bev, srv->map_mask); srv->map[j]; j = (j + 1) & srv->map_mask)
        if (srv->map[j]->bev == bev)
            return srv->map[j];
    return NULL;
}

static void map_del(lds_server *srv, struct lds_conn *c)
{
    size_t mask = srv->map_mask, j = map_hash(c->bev, mask);
    while (srv->map[j] != c) {
        if (!srv->map[j])
            return;
        j = (j + 1) & mask;
    }
    srv->map[j] = NULL;
    srv->map_n--;
    /* backward shift: move up the entries the hole would hide */
    for (size_t k = (j + 1) & mask; srv->map[k]; k = (k + 1) & mask) {
        size_t home = map_hash(srv->map[k]->bev, mask);
        bool between = j <= k ? (home > j && home <= k) : (home > j || home <= k);
        if (!between) {
            srv->map[j] = srv->map[k];
            srv->map[k] = NULL;
            j = k;
        }
    }
}

/* Lets go of a connection's record. */
static void conn_forget(struct lds_conn *c)
{
    lds_server *srv = c->srv;
    if (srv) {
        conn_unlink(&srv->conns, c);
        map_del(srv, c);
        srv->st.connections--;
    }
    c->srv = NULL;
    if (c->deadline)
        event_free(c->deadline);
    c->deadline = NULL;
    if (!c->once)
        lds_free(c);
}

/* A request must come whole within timeout_s of the connection's start or
 * of the previous answer: libevent's read timeout restarts at every byte,
 * so a client sending one now and then (slowloris) would hold the
 * connection, and what it sent, for ever. */
static void conn_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct lds_conn *c = arg;
    c->armed = false;
    if (!c->srv || !c->evcon || !c->expecting)
        return;
    /* the timer runs from when it was armed: a later expect_request moved
     * the deadline on (to the millisecond, rounded up) */
    int64_t left = c->expect_at + (int64_t)c->srv->o.timeout_s * 1000000000 - lds_now_ns();
    if (left > 0) {
        int64_t ms = (left + 999999) / 1000000;
        struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000)};
        c->armed = evtimer_add(c->deadline, &tv) == 0;
        if (c->armed)
            return;
    }
    lds_log(c->srv, LDS_LOG_DEBUG, "connection closed: no whole request within %d s",
            c->srv->o.timeout_s);
    evhttp_connection_free(c->evcon); /* conn_closed forgets c */
}

void lds_conn_carry(struct lds_conn *c, lds_conn_close_fn on_close, void *what)
{
    c->on_close = on_close;
    c->carried = what;
}

/* Starts (or restarts) the time a request has to come whole. The timer is
 * armed once and moved on only when it fires (two changes of a timer per
 * request were ~1% of the time of a latest-flags/{key}). */
void lds_conn_expect_request(struct lds_conn *c)
{
    if (!c || !c->srv || !c->evcon)
        return;
    c->expecting = true;
    c->expect_at = lds_now_ns();
    if (!c->deadline)
        c->deadline = evtimer_new(c->srv->base, conn_deadline, c);
    if (c->deadline && !c->armed) {
        struct timeval tv = {c->srv->o.timeout_s, 0};
        c->armed = evtimer_add(c->deadline, &tv) == 0;
    }
}

/* A request came whole (or the connection now streams). */
void lds_conn_request_came(struct lds_conn *c)
{
    if (c)
        c->expecting = false;
}

/* libevent lets the connection go (its close callback). */
static void conn_closed(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct lds_conn *c = arg;
    lds_conn_close_fn on_close = c->on_close;
    void *what = c->carried;
    lds_conn_carry(c, NULL, NULL);
    if (on_close)
        on_close(what);
    conn_forget(c);
}

/* Learns the connection libevent made around c->bev (the argument of the
 * bufferevent's callbacks) and takes its close callback. @return false if
 * libevent has let it go already (bufferevent_free() clears the
 * callbacks): then `c` is freed. The reference taken in lds_conn_make_bev() is
 * dropped either way. */
static bool conn_setup(struct lds_conn *c)
{
    struct bufferevent *bev = c->bev;
    void *cbarg = NULL;
    bufferevent_getcb(bev, NULL, NULL, NULL, &cbarg);
    c->setup = true;
    if (!cbarg) {
        conn_forget(c);
        bufferevent_decref(bev);
        return false;
    }
    c->evcon = cbarg;
    evhttp_connection_set_closecb(c->evcon, conn_closed, c);
    bufferevent_decref(bev);
    lds_conn_expect_request(c);
    return true;
}

/* From the loop, right after the accept. */
static void conn_setup_later(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct lds_conn *c = arg;
    c->once = false;
    if (!c->srv) { /* forgotten, or the server is gone */
        struct bufferevent *bev = c->setup ? NULL : c->bev;
        lds_free(c);
        if (bev)
            bufferevent_decref(bev);
        return;
    }
    if (c->setup)
        return;
    if (conn_setup(c) && c->over) {
        lds_server *srv = c->srv;
        lds_log(srv, LDS_LOG_WARN, "connection refused: %d open already", srv->o.max_connections);
        evhttp_connection_free(c->evcon); /* conn_closed forgets c */
    }
}

/* Makes the bufferevent of each connection evhttp accepts (with a
 * reference of ours, so that it outlives libevent's until conn_setup()). */
struct bufferevent *lds_conn_make_bev(struct event_base *base, void *arg)
{
    lds_server *srv = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    struct lds_conn *c = bev ? lds_calloc(1, sizeof *c) : NULL;
    if (!c)
        return bev; /* served without our accounting (handle() answers 503) */
    c->srv = srv;
    c->bev = bev;
    c->over = srv->st.connections >= (uint64_t)srv->o.max_connections;
    static const struct timeval zero = {0, 0};
    if (map_put(srv, c) != 0) {
        lds_free(c);
        return bev;
    }
    bufferevent_incref(bev);
    c->once = true;
    if (event_base_once(base, -1, EV_TIMEOUT, conn_setup_later, c, &zero) != 0) {
        bufferevent_decref(bev);
        map_del(srv, c);
        lds_free(c);
        return bev;
    }
    conn_link(&srv->conns, c);
    srv->st.connections++;
    return bev;
}

/* The record of the connection of `req`, set up; NULL if there is none. */
struct lds_conn *lds_conn_of(lds_server *srv, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct lds_conn *c = evcon ? map_get(srv, evhttp_connection_get_bufferevent(evcon)) : NULL;
    if (c && !c->setup && !conn_setup(c))
        return NULL;
    return c;
}

/* The record of the connection of `req`, if it has one (not set up). */
struct lds_conn *lds_conn_find(lds_server *srv, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    return evcon ? map_get(srv, evhttp_connection_get_bufferevent(evcon)) : NULL;
}

/* Bytes written to connections that the socket has not taken yet. */
size_t lds_conns_unsent(const lds_server *srv)
{
    size_t n = 0;
    for (const struct lds_conn *c = srv->conns; c; c = c->next)
        n += evbuffer_get_length(bufferevent_get_output(c->bev));
    return n;
}

void lds_conns_forget(lds_server *srv)
{
    while (srv->conns) { /* those not set up yet: conn_setup_later frees them */
        struct lds_conn *c = srv->conns;
        conn_unlink(&srv->conns, c);
        c->srv = NULL;
        if (c->deadline)
            event_free(c->deadline);
        c->deadline = NULL;
    }
    lds_free(srv->map);
}
