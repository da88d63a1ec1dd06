/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/stream.c: /all, LaunchDarkly's streaming protocol (Server-Sent
 * Events: a put, then a patch or delete for every change, and a heartbeat
 * comment), and the fan-out of each change to every stream.
 *
 * libevent keeps reading a stream's connection to see it close; the close
 * callback ends the stream. The changes of one loop pass are sent together
 * at the next, as one piece made once: from 4 KiB on (and the put) shared
 * by every stream by reference (evbuffer_add_reference), smaller ones
 * copied. A stream that still has more than max_stream_buffer unsent
 * beyond its put when a piece comes is dropped (evhttp_connection_free);
 * otherwise it gets the piece whole, whatever its size, so a reader that
 * keeps up is never dropped for a large change, and a slow one holds at
 * most the bound, its put and one piece that other streams share. One
 * whose socket takes nothing for timeout_s is dropped by the write
 * timeout. Streams write
 * their chunks into the connection's output themselves, packed:
 * evhttp_send_reply_chunk() puts a chunk's head and tail in chains of their
 * own, and a chain is 1 KiB at least (or as large as the reference before
 * it), so that a slow reader held many times what was counted (2 MiB for
 * 64 KiB of deletes). A small event is written straight to the socket of
 * each stream whose output is empty (framed once for all of them), without
 * the write event's arm, dispatch and disarm per stream; what a socket
 * does not take goes to its output.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "serve-internal.h"

struct lds_stream {
    struct lds_stream *prev, *next;
    lds_server *srv;
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    struct evbuffer *queued; /* events that came before the put */
    ld_future *fut;          /* the data of the put, while it is fetched, then
                                while its body is assembled (assembling) */
    size_t put_len;          /* the put may be larger than max_stream_buffer (0 once sent) */
    bool started;
    bool dropping;
    bool overflow;   /* events were lost before the put: refused */
    bool chunked;    /* the answer is chunked (HTTP/1.1) */
    bool assembling; /* fut: the put's body, assembled in slices (cache.c) */
    struct lds_conn *conn;
};

static void stream_unlink(lds_server *srv, struct lds_stream *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        srv->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
    srv->st.streams--;
}

static void stream_free(struct lds_stream *s)
{
    if (s->queued)
        evbuffer_free(s->queued);
    lds_free(s);
}

static void stream_conn_closed(void *what)
{
    struct lds_stream *s = what;
    lds_server *srv = s->srv;
    s->conn = NULL;
    stream_unlink(srv, s);
    if (evhttp_request_get_connection(s->req) == NULL)
        evhttp_request_free(s->req);
    if (!s->dropping)
        lds_log(srv, LDS_LOG_INFO, "stream closed by the client (%llu open)",
                (unsigned long long)srv->st.streams);
    if (s->fut) {
        /* its callback frees it */
        s->req = NULL;
        s->srv = NULL;
        ld_future_cancel(s->fut);
        return;
    }
    stream_free(s);
}

/* The output of the connection of `s`. */
static struct evbuffer *stream_out(struct lds_stream *s)
{
    return bufferevent_get_output(evhttp_connection_get_bufferevent(s->evcon));
}

/* What was written to `s` that the socket has not taken yet. */
static size_t stream_backlog(struct lds_stream *s)
{
    return evbuffer_get_length(stream_out(s));
}

/* The changes of one loop pass, sent together at the next: a change of
 * many items (a file read again, a flag set changed in one write) is one
 * piece, shared by every stream by reference when it is large, whatever
 * its size. */
struct lds_fanout {
    struct evbuffer *changes; /* the events not sent yet */
    struct event *send;       /* sends them (a timeout of 0: at the next pass) */
    struct lds_blob **held;   /* shared pieces sent, while a stream may hold them */
    size_t n_held, cap_held;
};

/* Drops a stream: closes its connection (the close callback frees the
 * stream). `why` NULL: its reader is too slow. */
static void stream_drop_for(struct lds_stream *s, const char *why)
{
    lds_server *srv = s->srv;
    srv->st.streams_dropped++;
    if (why)
        lds_log(srv, LDS_LOG_WARN, "stream dropped: %s", why);
    else
        lds_log(srv, LDS_LOG_WARN, "stream dropped: its reader is too slow (%zu bytes unsent)",
                stream_backlog(s));
    s->dropping = true;
    evhttp_connection_free(s->evcon);
}

static void stream_drop(struct lds_stream *s)
{
    stream_drop_for(s, NULL);
}

/* Whether `s` still has more unsent than its put and max_stream_buffer:
 * its reader has fallen behind by more than the bound, and is dropped
 * before it gets more. What comes next is sent whole, whatever its size:
 * a reader that keeps up gets any change (its large events are shared by
 * every stream, not copied), and a slow one holds at most the bound, its
 * put and one change (or it is dropped by the write timeout first, when
 * its socket takes nothing for timeout_s). */
static bool backlog_over(struct lds_stream *s, size_t backlog)
{
    /* once what is unsent is within the bound, what is left of the put is
     * too: the put's allowance is spent (kept, it let a reader that took
     * its put and stopped hold the put's size again in copies of its own) */
    if (backlog <= s->srv->o.max_stream_buffer)
        s->put_len = 0;
    return backlog > s->srv->o.max_stream_buffer + s->put_len;
}

/* Events from this size on are added to streams by reference (shared);
 * smaller ones are copied. */
#define SHARE_MIN 4096

/* Appends event `b` to `buf` (a stream's output or queue). A reference
 * costs a libevent chain of 1 KiB, and what evbuffer_add() appends after
 * one a chain as large as the referenced data: small events are copied,
 * packed into the chains there, and a reference is followed by a chain
 * of its own for what comes next. So what a slow reader holds is about
 * what stream_backlog() counts. */
static int sse_add(struct evbuffer *buf, struct lds_blob *b)
{
    if (b->len < SHARE_MIN)
        return evbuffer_add(buf, b->data, b->len);
    if (lds_blob_add(buf, b) != 0)
        return -1;
    evbuffer_expand(buf, 64); /* else a larger chain, later */
    return 0;
}

/* Writes `n` bytes of a started stream (`b`, or else all of `from`) as one
 * chunk of its answer, into the connection's output, which libevent
 * writes as it does for evhttp_send_reply_chunk() (whose head and tail of
 * a chunk are chains of their own around what it is given). @return 0, or
 * -1 when memory ran out (the chunk may be cut: drop the stream). */
static int stream_write(struct lds_stream *s, struct lds_blob *b, struct evbuffer *from, size_t n)
{
    struct evbuffer *out = stream_out(s);
    if (s->chunked && evbuffer_add_printf(out, "%zx\r\n", n) < 0)
        return -1;
    if (b ? sse_add(out, b) != 0 : evbuffer_add_buffer(out, from) != 0)
        return -1;
    return s->chunked ? evbuffer_add(out, "\r\n", 2) : 0;
}

/* An event as it goes on the wire, made once for every stream: its chunk
 * head and tail around it (`chunked`), or the event alone. */
struct frame {
    const char *data[2];
    size_t len[2];
    char buf[SHARE_MIN + 32];
};

/* Frames small event `b` (NULL for one of SHARE_MIN bytes or more, which
 * goes by reference). */
static const struct frame *frame_make(struct frame *f, const struct lds_blob *b)
{
    if (b->len >= SHARE_MIN)
        return NULL;
    int h = snprintf(f->buf, sizeof f->buf, "%zx\r\n", b->len);
    memcpy(f->buf + h, b->data, b->len);
    memcpy(f->buf + h + b->len, "\r\n", 2);
    f->data[1] = f->buf;
    f->len[1] = (size_t)h + b->len + 2;
    f->data[0] = b->data;
    f->len[0] = b->len;
    return f;
}

/* Writes framed event `f` to a started stream: straight to its socket when
 * nothing waits in its output (`backlog` 0). Through the output, libevent
 * would arm the write event, wait for the loop to say the socket takes
 * data, write, and disarm: two epoll_ctl() calls and a dispatch per stream
 * and event, most of the time of a change sent to many streams
 * (docs/performance.md). What the
 * socket does not take goes to the output, and libevent writes it (a
 * socket error too: libevent meets it on its write, and the connection
 * closes). @return 0, or -1 when memory ran out (the event may be cut:
 * drop the stream). */
static int stream_write_framed(struct lds_stream *s, const struct frame *f, size_t backlog)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(s->evcon);
    const char *data = f->data[s->chunked];
    size_t len = f->len[s->chunked], sent = 0;
    evutil_socket_t fd = bufferevent_getfd(bev);
    if (backlog == 0 && fd >= 0) {
        ssize_t k;
        do
            k = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (k < 0 && errno == EINTR);
        if (k == (ssize_t)len)
            return 0;
        sent = k > 0 ? (size_t)k : 0;
    }
    return evbuffer_add(bufferevent_get_output(bev), data + sent, len - sent);
}

/* Sends `b` on a started stream; drops the stream if its backlog is past
 * the bound. `f`: `b` framed (frame_make()), or NULL. */
static bool stream_send(struct lds_stream *s, struct lds_blob *b, const struct frame *f)
{
    size_t backlog = stream_backlog(s);
    if (backlog_over(s, backlog)) {
        stream_drop(s); /* frees s */
        return false;
    }
    if (f ? stream_write_framed(s, f, backlog) != 0 : stream_write(s, b, NULL, b->len) != 0) {
        /* an event lost would leave the client's data wrong: it reconnects */
        stream_drop_for(s, "out of memory for an event");
        return false;
    }
    return true;
}

static void stream_put_done(ld_future *f, void *arg)
{
    struct lds_stream *s = arg;
    lds_server *srv = s->srv;
    ld_future_unref(s->fut);
    s->fut = NULL;
    if (!srv) { /* its connection went away */
        stream_free(s);
        return;
    }
    struct lds_coll *c = NULL;
    if (ld_future_is_fulfilled(f) && s->assembling) {
        /* the body of these snapshots or of newer ones: the events queued
         * meanwhile may repeat what the newer put has, which SDKs ignore
         * (an item's version is not newer than their own) */
        c = srv->coll[LDS_COLL_ALL].body ? &srv->coll[LDS_COLL_ALL] : NULL;
    } else if (ld_future_is_fulfilled(f)) {
        /* a large body is assembled in slices: the stream waits for it */
        ld_future *wait;
        c = lds_coll_begin(srv, LDS_COLL_ALL, ld_future_json(ld_future_all_get(f, 0)),
                           ld_future_json(ld_future_all_get(f, 1)), &wait);
        if (!c && wait) {
            s->assembling = true;
            s->fut = ld_future_ref(wait);
            if (ld_future_on_complete(wait, stream_put_done, s) == 0)
                return;
            ld_future_unref(s->fut);
            s->fut = NULL;
        }
    }
    struct lds_blob *put = c ? lds_coll_put(c) : NULL;
    if (!put || s->overflow) {
        stream_unlink(srv, s);
        lds_conn_carry(s->conn, NULL, NULL);
        if (put)
            lds_send_error(srv, s->req, 503, "too many changes while connecting: try again",
                           LDS_F_CLOSE);
        else if (ld_future_error(f) == LD_ECANCELED || srv->closing)
            lds_send_error(srv, s->req, 503, "server closing", LDS_F_CLOSE);
        else
            lds_send_error(srv, s->req, 500,
                           ld_future_is_rejected(f) ? ld_future_error_message(f) : "out of memory",
                           LDS_F_CLOSE);
        stream_free(s);
        return;
    }
    struct evkeyvalq *h = evhttp_request_get_output_headers(s->req);
    evhttp_add_header(h, "Content-Type", "text/event-stream; charset=utf-8");
    evhttp_add_header(h, "Cache-Control", "no-cache, no-store");
    evhttp_add_header(h, "X-Accel-Buffering", "no");
    evhttp_add_header(h, "Connection", "close");
    evhttp_send_reply_start(s->req, 200, "OK");
    s->chunked = evhttp_find_header(h, "Transfer-Encoding") != NULL;
    /* A stream lives as long as its client wants: no read timeout (libevent
     * reads only to see the connection close, and keeps at most 64 KiB of
     * whatever the client sends), but a write timeout: a client that reads
     * nothing at all for timeout_s is dropped. (evhttp's own "no timeout",
     * evhttp_connection_set_timeout(-1), is 50 s each way.) */
    struct bufferevent *bev = s->conn->bev;
    event_base_update_cache_time(srv->base); /* the put may have taken a while */
    struct timeval wtv = {srv->o.timeout_s, 0};
    bufferevent_set_timeouts(bev, NULL, &wtv);
    bufferevent_setwatermark(bev, EV_READ, 0, 64 * 1024);
    /* events are written as they come, one send() each: without this, the
     * kernel holds the ones after the first until the client acknowledges
     * it (Nagle), a round trip or a delayed ack later on a real network */
    int one = 1;
    evutil_socket_t fd = bufferevent_getfd(bev);
    if (fd >= 0)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    s->started = true;
    lds_log_answer(srv, s->req, 200, put->len);
    lds_log(srv, LDS_LOG_INFO, "stream opened (%llu open)", (unsigned long long)srv->st.streams);
    if (!stream_send(s, put, NULL))
        return;
    /* the put's allowance starts once it is written: set before, the
     * put's own send (nothing unsent yet) spent it at once */
    s->put_len = put->len;
    if (s->queued && evbuffer_get_length(s->queued) > 0) {
        /* the events that came meanwhile, after the put */
        size_t n = evbuffer_get_length(s->queued);
        if (stream_write(s, NULL, s->queued, n) != 0)
            stream_drop_for(s, "out of memory for an event");
    }
}

/* Starts a stream: its put is sent once the data is read. */
void lds_stream_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                      char *const *seg, const char *query)
{
    (void)rt;
    (void)seg;
    (void)query;
    struct lds_conn *c = lds_conn_of(srv, req);
    if (!c) {
        lds_send_error(srv, req, 503, "connection not tracked", 0);
        return;
    }
    struct lds_stream *s = lds_calloc(1, sizeof *s);
    ld_future *f = s ? lds_fetch_all(srv) : NULL;
    if (!f) {
        lds_free(s);
        lds_send_error(srv, req, 500, "out of memory", 0);
        return;
    }
    s->srv = srv;
    s->req = req;
    s->evcon = evhttp_request_get_connection(req);
    s->fut = ld_future_ref(f);
    if (ld_future_on_complete(f, stream_put_done, s) != 0) {
        ld_future_unref(s->fut);
        lds_free(s);
        lds_send_error(srv, req, 500, "out of memory", 0);
        return;
    }
    s->next = srv->streams;
    if (s->next)
        s->next->prev = s;
    srv->streams = s;
    srv->st.streams++;
    s->conn = c;
    lds_conn_carry(c, stream_conn_closed, s);
}

/* Sends `b` to every started stream, and queues it for the others. */
static void broadcast(lds_server *srv, struct lds_blob *b)
{
    struct frame frame;
    const struct frame *f = frame_make(&frame, b);
    struct lds_stream *next;
    for (struct lds_stream *s = srv->streams; s; s = next) {
        next = s->next;
        if (s->started) {
            stream_send(s, b, f);
        } else {
            /* a change lost would go unseen: with more than the bound
             * queued already (or without memory) the stream is refused
             * once its put is ready */
            if (!s->queued)
                s->queued = evbuffer_new();
            size_t had = s->queued ? evbuffer_get_length(s->queued) : 0;
            if (s->queued && had <= srv->o.max_stream_buffer)
                sse_add(s->queued, b);
            if (!s->queued || evbuffer_get_length(s->queued) != had + b->len)
                s->overflow = true;
        }
    }
}

/* A change could not be made into an event: no stream may go on without
 * it, so the started ones are dropped (their clients reconnect and get a
 * new put) and the others refused once their put is ready. */
static void lose_change(lds_server *srv, const char *key)
{
    lds_log(srv, LDS_LOG_ERROR, "out of memory: change of %s not sent: streams dropped", key);
    struct evbuffer *changes = srv->fanout->changes;
    evbuffer_drain(changes, evbuffer_get_length(changes)); /* those streams are gone */
    struct lds_stream *next;
    for (struct lds_stream *s = srv->streams; s; s = next) {
        next = s->next;
        if (s->started)
            stream_drop_for(s, "out of memory for an event");
        else
            s->overflow = true;
    }
}

/* Lets go of the shared pieces no stream holds any more, and keeps `b`
 * (a reference taken) while a stream holds it: for lds_streams_held(). */
static void hold(struct lds_fanout *fan, struct lds_blob *b)
{
    size_t k = 0;
    for (size_t i = 0; i < fan->n_held; i++) {
        if (fan->held[i]->refs > 1)
            fan->held[k++] = fan->held[i];
        else
            lds_blob_unref(fan->held[i]);
    }
    fan->n_held = k;
    if (!b || b->len < SHARE_MIN || b->refs < 2)
        return;
    if (fan->n_held == fan->cap_held) {
        size_t cap = fan->cap_held ? 2 * fan->cap_held : 16;
        struct lds_blob **h = lds_calloc(cap, sizeof *h);
        if (!h)
            return; /* only the count misses it */
        if (fan->n_held)
            memcpy(h, fan->held, fan->n_held * sizeof *h);
        lds_free(fan->held);
        fan->held = h;
        fan->cap_held = cap;
    }
    b->refs++;
    fan->held[fan->n_held++] = b;
}

size_t lds_streams_held(const lds_server *srv)
{
    const struct lds_fanout *fan = srv->fanout;
    size_t n = 0;
    for (size_t i = 0; fan && i < fan->n_held; i++)
        if (fan->held[i]->refs > 1)
            n += fan->held[i]->len;
    return n;
}

void lds_stream_heartbeat(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    lds_server *srv = arg;
    broadcast(srv, srv->beat);
    hold(srv->fanout, NULL);
}

/* Sends the changes of the last loop pass to every stream, as one piece
 * (`arg` the server). */
static void send_changes(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    lds_server *srv = arg;
    struct lds_fanout *fan = srv->fanout;
    event_del(fan->send);
    size_t n = evbuffer_get_length(fan->changes);
    if (n == 0) {
        hold(fan, NULL);
        return;
    }
    struct lds_blob *b = lds_blob_new(n);
    if (!b) {
        lose_change(srv, "a change");
        return;
    }
    evbuffer_remove(fan->changes, b->data, n);
    broadcast(srv, b);
    hold(fan, b);
    lds_blob_unref(b);
}

int lds_streams_init(lds_server *srv)
{
    struct lds_fanout *fan = lds_calloc(1, sizeof *fan);
    if (!fan)
        return -1;
    srv->fanout = fan;
    fan->changes = evbuffer_new();
    fan->send = evtimer_new(srv->base, send_changes, srv);
    return fan->changes && fan->send ? 0 : -1;
}

void lds_server_changed(lds_server *srv, const ld_kind *kind, const char *key, int64_t version,
                        const json_t *item)
{
    if (!srv || !kind || !key || srv->closing)
        return;
    if (!srv->streams)
        return;
    const char *prefix = kind == ld_kind_segments() ? "/segments/" : "/flags/";
    size_t plen = strlen(prefix), klen = strlen(key);
    char *path = lds_malloc(plen + klen + 1);
    if (!path) {
        lose_change(srv, key);
        return;
    }
    memcpy(path, prefix, plen);
    memcpy(path + plen, key, klen + 1);
    json_t *j = item ? json_pack("{s:s,s:O}", "path", path, "data", item)
                     : json_pack("{s:s,s:I}", "path", path, "version", (json_int_t)version);
    lds_free(path);
    struct lds_blob *data = j ? lds_blob_json(j) : NULL;
    json_decref(j);
    if (!data) {
        lose_change(srv, key);
        return;
    }
    const char *head = item ? "event: patch\ndata: " : "event: delete\ndata: ";
    struct lds_fanout *fan = srv->fanout;
    size_t had = evbuffer_get_length(fan->changes);
    static const struct timeval now = {0, 0};
    bool ok = evbuffer_add(fan->changes, head, strlen(head)) == 0 &&
              evbuffer_add(fan->changes, data->data, data->len) == 0 &&
              evbuffer_add(fan->changes, "\n\n", 2) == 0;
    lds_blob_unref(data);
    if (!ok) {
        lose_change(srv, key);
        return;
    }
    lds_log(srv, LDS_LOG_DEBUG, "%s %s%s v%lld to %llu streams", item ? "patch" : "delete", prefix,
            key, (long long)version, (unsigned long long)srv->st.streams);
    /* without memory for the timer, sent now, alone */
    if (had == 0 && event_add(fan->send, &now) != 0)
        send_changes(-1, 0, srv);
}

void lds_streams_end(lds_server *srv)
{
    send_changes(-1, 0, srv); /* the changes of this pass first */
    while (srv->streams) {
        struct lds_stream *s = srv->streams;
        stream_unlink(srv, s);
        lds_conn_carry(s->conn, NULL, NULL);
        s->conn = NULL;
        if (s->fut) { /* its callback only frees it */
            struct evhttp_request *req = s->req;
            s->srv = NULL;
            s->req = NULL;
            ld_future_cancel(s->fut);
            lds_send_error(srv, req, 503, "server closing", LDS_F_CLOSE);
        } else {
            evhttp_send_reply_end(s->req);
            stream_free(s);
        }
    }
}

void lds_streams_forget(lds_server *srv)
{
    struct lds_fanout *fan = srv->fanout;
    if (fan) {
        if (fan->send)
            event_free(fan->send);
        if (fan->changes)
            evbuffer_free(fan->changes);
        for (size_t i = 0; i < fan->n_held; i++)
            lds_blob_unref(fan->held[i]);
        lds_free(fan->held);
        lds_free(fan);
        srv->fanout = NULL;
    }
    while (srv->streams) {
        struct lds_stream *s = srv->streams;
        stream_unlink(srv, s);
        if (s->fut) {
            s->srv = NULL;
            ld_future_cancel(s->fut);
        } else {
            stream_free(s);
        }
    }
}
