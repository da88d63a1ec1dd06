/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/wait.c: requests waiting for futures. A client that goes away
 * while its request waits: the connection's close callback (set while the
 * request waits, cleared when it is answered) cancels the future and marks
 * the request dead; the future's callback then only frees the request's
 * state. A request libevent detached from its dead connection is freed
 * here.
 */
#include <event2/http.h>

#include "serve-internal.h"

struct lds_waiting {
    struct lds_waiting *prev, *next;
    lds_server *srv;
    struct evhttp_request *req;
    ld_future *fut;                /* our reference */
    const struct lds_route *route; /* its finish answers */
    bool dead;                     /* its connection went away, or the server was freed */
    int flags;
    struct lds_conn *conn;
};

static void waiting_unlink(lds_server *srv, struct lds_waiting *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        srv->pending = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    srv->st.pending--;
}

/* The connection of a waiting request closed (libevent frees it now, or
 * detached the request from it first: then it is ours to free). */
static void waiting_conn_closed(void *what)
{
    struct lds_waiting *r = what;
    lds_server *srv = r->srv;
    r->dead = true;
    r->conn = NULL;
    waiting_unlink(srv, r);
    if (evhttp_request_get_connection(r->req) == NULL)
        evhttp_request_free(r->req);
    r->req = NULL;
    lds_log(srv, LDS_LOG_DEBUG, "client went away while its request waited");
    ld_future_cancel(r->fut);
    if (srv->closing)
        lds_finish_close(srv);
}

static void waiting_done(ld_future *f, void *arg);

/* Makes `f` (stolen) answer `req` through rt->finish when it completes. */
void lds_wait_for(lds_server *srv, struct evhttp_request *req, ld_future *f,
                  const struct lds_route *rt, int flags)
{
    struct lds_conn *c = lds_conn_of(srv, req);
    if (!f || !c) {
        ld_future_unref(f);
        lds_send_error(srv, req, f ? 503 : 500, f ? "connection not tracked" : "out of memory",
                       flags);
        return;
    }
    struct lds_waiting *r = lds_calloc(1, sizeof *r);
    if (!r) {
        ld_future_unref(f);
        lds_send_error(srv, req, 500, "out of memory", flags);
        return;
    }
    r->srv = srv;
    r->req = req;
    r->route = rt;
    r->flags = flags;
    r->fut = ld_future_ref(f);
    if (ld_future_on_complete(f, waiting_done, r) != 0) {
        ld_future_unref(r->fut);
        lds_free(r);
        lds_send_error(srv, req, 500, "out of memory", flags);
        return;
    }
    r->next = srv->pending;
    if (r->next)
        r->next->prev = r;
    srv->pending = r;
    srv->st.pending++;
    r->conn = c;
    lds_conn_carry(c, waiting_conn_closed, r);
}

static void waiting_done(ld_future *f, void *arg)
{
    struct lds_waiting *r = arg;
    ld_future_unref(r->fut);
    if (r->dead) {
        lds_free(r);
        return;
    }
    lds_server *srv = r->srv;
    waiting_unlink(srv, r);
    struct evhttp_request *req = r->req;
    if (r->conn)
        lds_conn_carry(r->conn, NULL, NULL);
    if (ld_future_error(f) == LD_ECANCELED && srv->closing)
        lds_send_error(srv, req, 503, "server closing", r->flags | LDS_F_CLOSE);
    else
        r->route->finish(srv, req, r->route, f, r->flags);
    lds_free(r);
    if (srv->closing)
        lds_finish_close(srv);
}

void lds_waiting_cancel_all(lds_server *srv)
{
    for (struct lds_waiting *r = srv->pending; r; r = r->next)
        ld_future_cancel(r->fut);
}

void lds_waiting_forget_all(lds_server *srv)
{
    while (srv->pending) {
        struct lds_waiting *r = srv->pending;
        waiting_unlink(srv, r);
        r->dead = true;
        ld_future_cancel(r->fut);
    }
}
