/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The Redis feature store (ld_redis_store_new(), redis.h): LaunchDarkly's
 * layout, on one pipelined connection (conn.c).
 *
 * Every operation is a job. Jobs start in the order they were issued: reads
 * start at once (they are pipelined, and Redis answers in order), a write
 * starts when it reaches the head and holds every later job back until it
 * is done, so that what is issued after a write sees it and two writes'
 * WATCH never mix on the connection. A large init writes its items' JSON,
 * and a large HGETALL's items are parsed, a slice per loop pass; of many
 * gets answered in one read, half are parsed at once and the rest from the
 * next pass (parse_now()), before any later answer completes its job.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include <ldasync/error.h>
#include <ldasync/future.h>
#include <ldasync/kind.h>

#include "redis/redis-internal.h"

/* Upserts retried at most this often when another writer races them (as
 * LaunchDarkly's Python SDK does). */
#define MAX_TRIES 10
/* Bytes of items' JSON written or parsed per loop pass. */
#define SLICE_BYTES (64 * 1024)
/* Gets' items parsed per loop pass when many are answered together: half
 * of the gets in flight, at least MIN_GET_SLICE, and from the second pass
 * on up to GET_SLICE_BYTES (a read from Redis is 16 KiB at most); see
 * parse_now(). */
#define MIN_GET_SLICE 4
#define GET_SLICE_BYTES (16 * 1024)

enum jkind { J_GET, J_ALL, J_INIT, J_WRITE, J_INITED };

struct job {
    struct job *prev, *next; /* every job of the store, started or not */
    struct job *wnext;       /* the jobs waiting to start */
    struct job *snext;       /* the jobs waiting for their next slice */
    bool queued;             /* in that queue */
    struct job *pnext;       /* the gets whose item waits to be parsed */
    struct rstore *st;
    enum jkind kind;
    ld_future *out;   /* owned */
    const char *hash; /* {prefix}:{namespace} (get, all, write): the store's */
    char *key;        /* write: its own; get: key_in */
    char *text;       /* write: the item's JSON; get: its reply's, to parse (hiredis's) */
    size_t text_len;
    int64_t version;
    int tries;
    /* init: the data (held), walked a slice per loop pass: the namespace
     * and the item under way */
    json_t *data;
    void *ns_iter, *item_iter;
    bool validating; /* init: its items are checked first, a slice per pass */
    char *ns_hash;   /* {prefix}:{the namespace under way} */
    size_t ns_hash_len;
    /* all: the replies taken from hiredis, parsed a slice at a time */
    redisReply **els;
    size_t nels, el_i;
    json_t *result;
    int kind_i;        /* all: 0 features, 1 segments */
    uint64_t all_hash; /* all: the reply's bytes */
    char key_in[];     /* get: its key, in the job's block */
};

struct rstore {
    struct event_base *base;
    struct ld_redis_options o;
    struct ldr_conn *conn;
    ld_store *store;
    char *inited_key;
    char *hashes[2];                   /* {prefix}:features, {prefix}:segments */
    struct job *jobs, *jobs_tail;      /* all */
    struct job *wait_head, *wait_tail; /* not started */
    struct job *writing;               /* the write under way, or NULL */
    struct event *slice;               /* a timer due at once: the next slice */
    struct event *kick;                /* a timer due at once: pump() */
    /* the jobs waiting for their next slice, first come first served, one
     * slice a pass: an all's answer may come while another all's or an
     * init's is sliced (reads are pipelined, a write starts at the head) */
    struct job *slicing, *slicing_tail;
    struct event *parse;                 /* a timer due at once: parse_gets() */
    struct job *parse_head, *parse_tail; /* gets answered, to parse */
    size_t parse_n;                      /* their number */
    uint64_t read_seq;                   /* the read of parse_now()'s count */
    size_t read_left;                    /* gets it may parse at once still */
    ld_future *closing;                  /* close waits for the jobs */
    bool closed;
    bool lost;    /* it was unavailable since the last init: needs_refresh */
    bool pumping; /* inside pump() */
    /* per kind (as hashes[]), the last all's reply: a hash of its bytes,
     * and the result it was parsed into (held), handed out again while
     * Redis answers the same bytes: a store read again and again (the
     * store synchronizer of daemon mode) parses, and frees, nothing */
    struct {
        uint64_t hash;
        size_t n;
        json_t *result;
    } last_all[2];
    /* results the store held last that nobody else holds, let go of a
     * slice per loop pass (`reap`): freeing 10,000 flags in one pass held
     * the loop for 15-30 ms */
    struct dying *dying;
    struct event *reap;
};

struct dying {
    struct dying *next;
    json_t *obj; /* the only reference */
};

static void pump(struct rstore *st);

static const char *hash_for(const struct rstore *st, const ld_kind *kind)
{
    return st->hashes[kind == ld_kind_segments()];
}

/* ---- jobs --------------------------------------------------------------- */

/* Frees what json_dumps() returned: jansson allocates it with the
 * functions json_set_alloc_funcs() set, not always malloc(). */
static void dumps_free(char *text)
{
    json_free_t free_fn = NULL;
    if (!text)
        return;
    json_get_alloc_funcs(NULL, &free_fn);
    if (free_fn)
        free_fn(text);
    else
        free(text);
}

static void job_free(struct job *j)
{
    if (j->key != j->key_in)
        ldr_free(j->key);
    if (j->kind == J_GET)
        free(j->text); /* hiredis's reply string (malloc()) */
    else
        dumps_free(j->text);
    json_decref(j->data);
    ldr_free(j->ns_hash);
    for (size_t i = j->el_i; i < j->nels; i++)
        if (j->els[i])
            freeReplyObject(j->els[i]);
    ldr_free(j->els);
    json_decref(j->result);
    ldr_free(j);
}

/* `extra` bytes after the job: a get's key (key_in). */
static struct job *job_new(struct rstore *st, enum jkind kind, ld_future *out, size_t extra)
{
    struct job *j = extra <= SIZE_MAX - sizeof(*j) ? ldr_calloc(1, sizeof(*j) + extra) : NULL;
    if (!j) {
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        return NULL;
    }
    j->st = st;
    j->kind = kind;
    j->out = out;
    return j;
}

/* Files the job and starts what may start. */
static void job_file(struct job *j);

static void job_add(struct job *j)
{
    struct rstore *st = j->st;
    job_file(j);
    if (st->wait_tail)
        st->wait_tail->wnext = j;
    else
        st->wait_head = j;
    st->wait_tail = j;
    pump(st);
}

static void maybe_closed(struct rstore *st)
{
    if (!st->closing || st->jobs)
        return;
    ldr_conn_free(st->conn);
    st->conn = NULL;
    ld_future *f = st->closing;
    st->closing = NULL;
    ld_future_fulfill(f);
    ld_future_unref(f);
}

/* Unfiles a job whose future is complete, and starts what it held back. */
static void job_done(struct job *j)
{
    struct rstore *st = j->st;
    if (j->prev)
        j->prev->next = j->next;
    else
        st->jobs = j->next;
    if (j->next)
        j->next->prev = j->prev;
    else
        st->jobs_tail = j->prev;
    if (st->writing == j)
        st->writing = NULL;
    if (j->queued) {
        struct job **link = &st->slicing, *prev = NULL;
        while (*link != j) {
            prev = *link;
            link = &(*link)->snext;
        }
        *link = j->snext;
        if (st->slicing_tail == j)
            st->slicing_tail = prev;
        j->queued = false;
    }
    ld_future_unref(j->out);
    job_free(j);
    pump(st);
    maybe_closed(st);
}

static void job_reject(struct job *j, int code, const char *fmt, ...) LD_PRINTF(3, 4);
static void job_reject(struct job *j, int code, const char *fmt, ...)
{
    char msg[300];
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
    }
    ld_future_reject(j->out, code, "%s", fmt ? msg : ld_strerror(code));
    job_done(j);
}

/* The next slice of the job, from the next pass of the loop (a timer due
 * at once: a callback activated from a callback would run in this pass). */
static void slice_later(struct job *j)
{
    static const struct timeval now = {0, 0};
    struct rstore *st = j->st;
    if (!j->queued) {
        j->queued = true;
        j->snext = NULL;
        if (st->slicing_tail)
            st->slicing_tail->snext = j;
        else
            st->slicing = j;
        st->slicing_tail = j;
    }
    event_add(st->slice, &now);
}

/* A reply that is not an answer: the connection's error, or Redis's. */
static bool failed(struct job *j, redisReply *r, int err, const char *msg)
{
    if (!r) {
        job_reject(j, err, "%s", msg);
        return true;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        job_reject(j, LD_ESTORE, "Redis: %.*s", (int)r->len, r->str);
        return true;
    }
    return false;
}

static int send_cmd(struct job *j, int argc, const char **argv, const size_t *lens, ldr_reply_fn fn)
{
    const char *why;
    int rc = ldr_conn_send(j->st->conn, argc, argv, lens, fn, fn ? j : NULL, &why);
    if (rc != 0)
        job_reject(j, rc, "%s", why ? why : "out of memory");
    return rc;
}

/* Parses an item's JSON read from Redis (the field `key` of `hash`);
 * NULL with the job rejected when it is not an object. */
static json_t *parse_item(struct job *j, const char *text, size_t len, const char *key)
{
    json_t *v = json_loadb(text, len, JSON_ALLOW_NUL, NULL);
    if (v && json_is_object(v))
        return v;
    /* not an object: parsed again for jansson's error (asked for on every
     * parse, it costs even when there is none) */
    json_decref(v);
    json_error_t e;
    memset(&e, 0, sizeof(e)); /* not every failure of jansson's fills it in */
    v = json_loadb(text, len, JSON_ALLOW_NUL, &e);
    if (!v && json_error_code(&e) == json_error_out_of_memory) {
        job_reject(j, LD_ENOMEM, NULL);
        return NULL;
    }
    if (!v || !json_is_object(v)) {
        json_decref(v);
        job_reject(j, LD_EPARSE, "Redis: %s of %s is not a JSON object%s%s", key, j->hash,
                   v ? "" : ": ", v ? "" : e.text);
        return NULL;
    }
    return v;
}

/* ---- get, initialized --------------------------------------------------- */

/* Completes a get with the item Redis answered. */
static void get_item(struct job *j, const char *text, size_t len)
{
    json_t *v = parse_item(j, text, len, j->key);
    if (!v)
        return;
    if (ld_item_is_deleted(v)) {
        json_decref(v);
        v = NULL;
    }
    ld_future_fulfill_json(j->out, v);
    job_done(j);
}

/* Parses the items of the gets answered and not parsed yet, in the order
 * of their answers: `all` of them (before any other answer completes its
 * job: jobs complete in the order Redis answers them), or a slice (from
 * the timer, which is then set again for the rest): half of the gets
 * waiting for their answer or their parse (see parse_now()), up to
 * GET_SLICE_BYTES. */
static void parse_gets(struct rstore *st, bool all)
{
    if (!st->parse_head)
        return;
    size_t n = (st->parse_n + ldr_conn_in_flight(st->conn)) / 2, bytes = 0;
    if (n < MIN_GET_SLICE)
        n = MIN_GET_SLICE;
    while (st->parse_head && (all || (n > 0 && bytes < GET_SLICE_BYTES))) {
        struct job *j = st->parse_head;
        st->parse_head = j->pnext;
        if (!st->parse_head)
            st->parse_tail = NULL;
        st->parse_n--;
        j->pnext = NULL;
        char *text = j->text;
        size_t len = j->text_len;
        j->text = NULL;
        bytes += len;
        n--;
        get_item(j, text, len);
        free(text); /* hiredis's (malloc()) */
    }
    if (st->parse_head) {
        static const struct timeval now = {0, 0};
        event_add(st->parse, &now);
    }
}

static void on_parse(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    parse_gets(arg, false);
}

/* Whether a get's item is parsed as its answer comes. Many gets in flight
 * are answered together (Redis answers what it read at once), and their
 * parse is most of what they cost: parsed at once, the commands of the
 * callers' next gets would wait for the last parse of the read while
 * Redis has nothing to do, and then the parses would wait for Redis. So
 * half of the gets in flight when the read began (at least MIN_GET_SLICE)
 * are parsed now, and the rest from the next pass on (parse_gets()), after
 * the first half's callers' commands have been written. */
static bool parse_now(struct rstore *st)
{
    if (st->parse_head)
        return false;
    uint64_t seq = ldr_conn_read_seq(st->conn);
    if (seq != st->read_seq) {
        st->read_seq = seq;
        st->read_left = ldr_conn_read_pending(st->conn) / 2;
        if (st->read_left < MIN_GET_SLICE)
            st->read_left = MIN_GET_SLICE;
    }
    if (st->read_left == 0)
        return false;
    st->read_left--;
    return true;
}

static void on_get(void *arg, redisReply *r, int err, const char *msg)
{
    struct job *j = arg;
    struct rstore *st = j->st;
    if (r && r->type == REDIS_REPLY_STRING && !parse_now(st)) {
        /* parsed from a later pass: the string taken from hiredis (which
         * frees the reply, and a NULL str, when this returns) */
        j->text = r->str;
        j->text_len = r->len;
        r->str = NULL;
        if (st->parse_tail)
            st->parse_tail->pnext = j;
        else
            st->parse_head = j;
        st->parse_tail = j;
        st->parse_n++;
        if (!event_pending(st->parse, EV_TIMEOUT, NULL)) {
            static const struct timeval now = {0, 0};
            event_add(st->parse, &now);
        }
        return;
    }
    parse_gets(st, true);
    if (failed(j, r, err, msg))
        return;
    if (r->type == REDIS_REPLY_NIL) {
        ld_future_fulfill_json(j->out, NULL);
        job_done(j);
        return;
    }
    if (r->type != REDIS_REPLY_STRING) {
        job_reject(j, LD_ESTORE, "Redis: HGET answered a reply of type %d", r->type);
        return;
    }
    get_item(j, r->str, r->len);
}

static void on_inited(void *arg, redisReply *r, int err, const char *msg)
{
    struct job *j = arg;
    parse_gets(j->st, true);
    if (failed(j, r, err, msg))
        return;
    ld_future_fulfill_bool(j->out, r->type == REDIS_REPLY_INTEGER && r->integer > 0);
    job_done(j);
}

/* ---- all ---------------------------------------------------------------- */

/* References to an all's result (an object: never one of jansson's
 * immortal values), which its futures share: once libevent threading is
 * on, a future may be released on another thread while the store takes or
 * drops a reference on the loop thread. jansson's json_incref() and
 * json_decref() read the count plainly first, and its decrement that frees
 * does not acquire (what the other thread read may not be seen as done). */
static json_t *shared_ref(json_t *obj)
{
    if (obj)
        __atomic_fetch_add(&obj->refcount, 1, __ATOMIC_RELAXED);
    return obj;
}

static void shared_unref(json_t *obj)
{
    if (obj && __atomic_sub_fetch(&obj->refcount, 1, __ATOMIC_ACQ_REL) == 0)
        json_delete(obj);
}

/* Members of an object of items let go of per loop pass. */
#define REAP_SLICE 1024

/* A request glibc serves from its large bins: it merges the small blocks
 * just freed (its fast bins) now, a slice's worth, not 10,000 items' worth
 * at the next large free or request. */
#define LARGE_REQUEST 2048

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rstore *st = arg;
    struct dying *d = st->dying;
    void *it = json_object_iter(d->obj);
    for (int n = 0; it && n < REAP_SLICE; n++) {
        size_t len = json_object_iter_key_len(it);
        const char *key = json_object_iter_key(it);
        it = json_object_iter_next(d->obj, it); /* before its member goes */
        json_object_deln(d->obj, key, len);
    }
    if (!it) {
        st->dying = d->next;
        shared_unref(d->obj);
        ldr_free(d);
    }
    ldr_free(ldr_malloc(LARGE_REQUEST));
    if (st->dying)
        event_add(st->reap, &(struct timeval){0, 0});
}

/* Lets go of the store's reference to `obj` (an all's result): at once
 * unless it is the last one to an object of more than a slice of members;
 * then over the next loop passes (at once without memory for that). */
static void let_go(struct rstore *st, json_t *obj)
{
    struct dying *d = NULL;
    if (!obj || __atomic_load_n(&obj->refcount, __ATOMIC_ACQUIRE) != 1 ||
        json_object_size(obj) <= REAP_SLICE || !(d = ldr_malloc(sizeof(*d)))) {
        shared_unref(obj);
        return;
    }
    d->obj = obj;
    d->next = NULL;
    struct dying **tail = &st->dying;
    while (*tail)
        tail = &(*tail)->next;
    *tail = d;
    if (d == st->dying)
        event_add(st->reap, &(struct timeval){0, 0});
}

/* True if `s` (`n` bytes) is valid UTF-8 without a NUL: a key an item can
 * have (jansson's rule for object keys, and no NUL, which would end the
 * key early and let the field shadow another item). */
static bool key_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned c = *p++;
        if (c == 0)
            return false;
        if (c < 0x80)
            continue;
        int more;
        unsigned v;
        if (c >= 0xC2 && c <= 0xDF) {
            more = 1;
            v = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            more = 2;
            v = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            more = 3;
            v = c & 0x07;
        } else {
            return false;
        }
        if (end - p < more)
            return false;
        for (int i = 0; i < more; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return false;
            v = (v << 6) | (p[i] & 0x3F);
        }
        p += more;
        if ((more == 2 && v < 0x800) || (more == 3 && (v < 0x10000 || v > 0x10FFFF)) ||
            (v >= 0xD800 && v <= 0xDFFF))
            return false; /* overlong, too large, a surrogate */
    }
    return true;
}

static void all_slice(struct job *j)
{
    size_t bytes = 0;
    while (j->el_i + 1 < j->nels && bytes < SLICE_BYTES) {
        redisReply *k = j->els[j->el_i], *v = j->els[j->el_i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) {
            job_reject(j, LD_ESTORE, "Redis: HGETALL answered an element of another type");
            return;
        }
        bytes += v->len + 64;
        if (!key_valid(k->str, k->len)) {
            job_reject(j, LD_EPARSE, "Redis: a field of %s is not a key (not UTF-8, or a NUL)",
                       j->hash);
            return;
        }
        char *key = ldr_strndup(k->str, k->len);
        if (!key) {
            job_reject(j, LD_ENOMEM, NULL);
            return;
        }
        json_t *item = parse_item(j, v->str, v->len, key);
        if (!item) {
            ldr_free(key);
            return;
        }
        int rc = 0;
        if (!ld_item_is_deleted(item))
            rc = json_object_set_new(j->result, key, item);
        else
            json_decref(item);
        ldr_free(key);
        freeReplyObject(k);
        freeReplyObject(v);
        j->els[j->el_i] = j->els[j->el_i + 1] = NULL;
        j->el_i += 2;
        if (rc != 0) {
            job_reject(j, LD_ENOMEM, NULL);
            return;
        }
    }
    if (j->el_i + 1 < j->nels) {
        slice_later(j);
        return;
    }
    json_t *res = j->result;
    j->result = NULL;
    struct rstore *st = j->st;
    let_go(st, st->last_all[j->kind_i].result);
    st->last_all[j->kind_i].result = shared_ref(res);
    st->last_all[j->kind_i].hash = j->all_hash;
    st->last_all[j->kind_i].n = j->nels;
    ld_future_fulfill_json(j->out, res);
    job_done(j);
}

/* A 64-bit hash of `len` bytes after `h` (and their length), 8 at a time. */
static uint64_t bytes_hash(uint64_t h, const char *s, size_t len)
{
    const uint64_t m = UINT64_C(0x9e3779b97f4a7c15);
    h = (h ^ len) * m;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * m;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, len - i);
    h = (h ^ w) * m;
    return h ^ (h >> 32);
}

static void on_all(void *arg, redisReply *r, int err, const char *msg)
{
    struct job *j = arg;
    parse_gets(j->st, true);
    if (failed(j, r, err, msg))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2) {
        job_reject(j, LD_ESTORE, "Redis: HGETALL answered a reply of type %d", r->type);
        return;
    }
    /* the same bytes as the last time: the same result (immutable) */
    uint64_t h = UINT64_C(0xcbf29ce484222325) ^ r->elements;
    for (size_t i = 0; i < r->elements; i++)
        h = bytes_hash(h, r->element[i]->str, r->element[i]->str ? r->element[i]->len : 0);
    j->all_hash = h;
    j->kind_i = j->hash == j->st->hashes[1];
    if (j->st->last_all[j->kind_i].result && j->st->last_all[j->kind_i].hash == h &&
        j->st->last_all[j->kind_i].n == r->elements) {
        ld_future_fulfill_json(j->out, shared_ref(j->st->last_all[j->kind_i].result));
        job_done(j);
        return;
    }
    j->result = json_object();
    j->els = r->elements ? ldr_malloc(r->elements * sizeof(*j->els)) : NULL;
    if (!j->result || (r->elements && !j->els)) {
        job_reject(j, LD_ENOMEM, NULL);
        return;
    }
    /* taken from hiredis, which frees the reply (not these) when this
     * returns: parsed a slice at a time */
    for (size_t i = 0; i < r->elements; i++) {
        j->els[i] = r->element[i];
        r->element[i] = NULL;
    }
    j->nels = r->elements;
    all_slice(j);
}

/* ---- upsert, delete ----------------------------------------------------- */

static void write_start(struct job *j);

static void on_exec(void *arg, redisReply *r, int err, const char *msg)
{
    struct job *j = arg;
    parse_gets(j->st, true);
    if (failed(j, r, err, msg))
        return;
    if (r->type == REDIS_REPLY_NIL) { /* another writer changed the hash */
        if (++j->tries >= MAX_TRIES) {
            job_reject(j, LD_ESTORE,
                       "Redis: %s of %s was written by others %d times while this write "
                       "tried; giving up",
                       j->key, j->hash, MAX_TRIES);
            return;
        }
        write_start(j);
        return;
    }
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
        if (r->element[i]->type == REDIS_REPLY_ERROR) {
            job_reject(j, LD_ESTORE, "Redis: %.*s", (int)r->element[i]->len, r->element[i]->str);
            return;
        }
    ld_future_fulfill_bool(j->out, true);
    job_done(j);
}

static void on_old(void *arg, redisReply *r, int err, const char *msg)
{
    struct job *j = arg;
    parse_gets(j->st, true);
    if (r && r->type == REDIS_REPLY_ERROR) {
        /* the WATCH stays on the connection unless taken back: a later
         * init's EXEC would be aborted by another client's change */
        const char *why;
        ldr_conn_send(j->st->conn, 1, (const char *[]){"UNWATCH"}, NULL, NULL, NULL, &why);
    }
    if (failed(j, r, err, msg))
        return;
    int64_t old = -1;
    if (r->type == REDIS_REPLY_STRING) {
        json_t *v = json_loadb(r->str, r->len, JSON_ALLOW_NUL, NULL);
        json_t *ver = json_object_get(v, "version");
        /* an item that is not one counts as absent: the write replaces it */
        if (json_is_integer(ver))
            old = json_integer_value(ver);
        json_decref(v);
    }
    if (old >= j->version) {
        if (send_cmd(j, 1, (const char *[]){"UNWATCH"}, NULL, NULL) != 0)
            return;
        ld_future_fulfill_bool(j->out, false);
        job_done(j);
        return;
    }
    const char *argv[] = {"HSET", j->hash, j->key, j->text};
    if (send_cmd(j, 1, (const char *[]){"MULTI"}, NULL, NULL) != 0)
        return;
    const char *why;
    /* MULTI is sent: the rest must follow, or the connection starts over */
    if (ldr_conn_send(j->st->conn, 4, argv, NULL, NULL, NULL, &why) != 0 ||
        ldr_conn_send(j->st->conn, 1, (const char *[]){"EXEC"}, NULL, on_exec, j, &why) != 0) {
        ldr_conn_reset(j->st->conn, "a transaction could not be sent whole");
        job_reject(j, LD_ESTORE, "Redis: the write of %s could not be sent", j->key);
    }
}

static void write_start(struct job *j)
{
    if (send_cmd(j, 2, (const char *[]){"WATCH", j->hash}, NULL, NULL) != 0)
        return;
    send_cmd(j, 3, (const char *[]){"HGET", j->hash, j->key}, NULL, on_old);
}

/* ---- init --------------------------------------------------------------- */

static void on_init_exec(void *arg, redisReply *r, int err, const char *msg)
{
    struct job *j = arg;
    parse_gets(j->st, true);
    if (failed(j, r, err, msg))
        return;
    if (r->type != REDIS_REPLY_ARRAY) {
        job_reject(j, LD_ESTORE, "Redis: the init's transaction was not run");
        return;
    }
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]->type == REDIS_REPLY_ERROR) {
            job_reject(j, LD_ESTORE, "Redis: %.*s", (int)r->element[i]->len, r->element[i]->str);
            return;
        }
    if (j->st->lost) { /* the whole data set is there again */
        j->st->lost = false;
        ld_store_status now;
        if (ld_store_current_status(j->st->store, &now) == 0 && now.available)
            ld_store_update_status(j->st->store, true, false);
    }
    ld_future_fulfill(j->out);
    job_done(j);
}

/* An init is one transaction: MULTI and the DEL of every namespace known
 * or given are sent when it starts, then an HSET of a slice of items per
 * loop pass (the items' JSON written then), then SET $inited and EXEC.
 * The write barrier keeps every other command off the connection
 * meanwhile. A command that cannot be sent drops the connection (the
 * transaction must not stay open) and rejects the init. */
static bool init_send(struct job *j, int argc, const char **argv, const size_t *lens,
                      ldr_reply_fn fn)
{
    const char *why;
    if (ldr_conn_send(j->st->conn, argc, argv, lens, fn, fn ? j : NULL, &why) == 0)
        return true;
    ldr_conn_reset(j->st->conn, "a transaction could not be sent whole");
    job_reject(j, LD_ESTORE, "Redis: the init could not be sent (%s)", why ? why : "out of memory");
    return false;
}

/* The namespace the iterator is at: its hash name in j->ns_hash. */
static bool init_namespace(struct job *j)
{
    const char *ns = json_object_iter_key(j->ns_iter);
    size_t nslen = json_object_iter_key_len(j->ns_iter), plen = strlen(j->st->o.prefix);
    ldr_free(j->ns_hash);
    j->ns_hash = ldr_malloc(plen + nslen + 2);
    if (!j->ns_hash)
        return false;
    memcpy(j->ns_hash, j->st->o.prefix, plen);
    j->ns_hash[plen] = ':';
    memcpy(j->ns_hash + plen + 1, ns, nslen);
    j->ns_hash[plen + 1 + nslen] = '\0';
    j->ns_hash_len = plen + 1 + nslen;
    j->item_iter = json_object_iter(json_object_iter_value(j->ns_iter));
    return true;
}

/* Items an init checks per loop pass before it writes anything. */
#define VALIDATE_SLICE 1024

static void init_start(struct job *j);

/* The namespace under way is an object of items: its first item, or the
 * next namespace's. @return false (the job rejected) when it is not. */
static bool validate_namespace(struct job *j)
{
    for (; j->ns_iter; j->ns_iter = json_object_iter_next(j->data, j->ns_iter)) {
        json_t *coll = json_object_iter_value(j->ns_iter);
        if (!json_is_object(coll)) {
            job_reject(j, LD_EINVAL, "%s",
                       "all_data: each namespace must map to an object of items");
            return false;
        }
        if ((j->item_iter = json_object_iter(coll)) != NULL)
            return true;
    }
    return true;
}

/* The data is valid: the transaction starts, if the connection can take
 * it. */
static void validated(struct job *j)
{
    j->validating = false;
    if (!ldr_conn_usable(j->st->conn)) {
        job_reject(j, LD_ESTORE, "%s", ldr_conn_why(j->st->conn));
        return;
    }
    init_start(j);
}

/* An item filed under a key with a NUL byte (ld_item_validate() takes a C
 * string): ld_data_validate() of it alone, for its reason word for word
 * (the item's own fault first, then the key's). */
static int key_with_nul(const char *key, size_t len, json_t *item, const char **why)
{
    json_t *coll = json_object(), *one = json_object();
    int rc = coll && one && json_object_setn_nocheck(coll, key, len, item) == 0 &&
                     json_object_set(one, "x", coll) == 0
                 ? ld_data_validate(one, why)
                 : LD_ENOMEM;
    json_decref(coll);
    json_decref(one);
    return rc != 0 ? rc : (*why = "invalid item", LD_EINVAL); /* never valid */
}

/* Checks the next VALIDATE_SLICE items as ld_data_validate() does (the
 * front leaves it to the store: ld_store_set_init_validates()); after the
 * last, the transaction starts. Invalid data: rejected, nothing sent. */
static void validate_slice(struct job *j)
{
    for (int n = 0; j->ns_iter && n < VALIDATE_SLICE; n++) {
        const char *key = json_object_iter_key(j->item_iter), *why = NULL;
        json_t *item = json_object_iter_value(j->item_iter);
        size_t klen = json_object_iter_key_len(j->item_iter);
        int rc = strlen(key) != klen ? key_with_nul(key, klen, item, &why)
                                     : ld_item_validate(item, key, &why);
        if (rc == LD_ENOMEM) { /* key_with_nul() could not tell */
            job_reject(j, LD_ENOMEM, NULL);
            return;
        }
        if (rc != 0) {
            job_reject(j, LD_EINVAL, "%s", why ? why : "invalid item");
            return;
        }
        j->item_iter = json_object_iter_next(json_object_iter_value(j->ns_iter), j->item_iter);
        if (!j->item_iter) {
            j->ns_iter = json_object_iter_next(j->data, j->ns_iter);
            if (!validate_namespace(j))
                return;
        }
    }
    if (j->ns_iter)
        slice_later(j);
    else
        validated(j);
}

static void init_slice(struct job *j)
{
    /* one HSET of up to SLICE_BYTES of JSON: argv of pairs after the name */
    size_t cap = 64, argc = 2, bytes = 0;
    const char **argv = ldr_malloc(cap * sizeof(*argv));
    size_t *lens = ldr_malloc(cap * sizeof(*lens));
    bool ok = argv && lens;
    if (ok) {
        argv[0] = "HSET";
        lens[0] = 4;
        argv[1] = j->ns_hash;
        lens[1] = j->ns_hash_len;
    }
    while (ok && j->item_iter && bytes < SLICE_BYTES) {
        if (argc + 2 > cap) {
            cap *= 2;
            const char **a = ldr_realloc(argv, cap * sizeof(*argv));
            if (a)
                argv = a;
            size_t *l = a ? ldr_realloc(lens, cap * sizeof(*lens)) : NULL;
            if (l)
                lens = l;
            if (!a || !l) {
                ok = false;
                break;
            }
        }
        char *text = json_dumps(json_object_iter_value(j->item_iter), JSON_COMPACT);
        if (!text) {
            ok = false;
            break;
        }
        argv[argc] = json_object_iter_key(j->item_iter);
        lens[argc] = json_object_iter_key_len(j->item_iter);
        argv[argc + 1] = text;
        lens[argc + 1] = strlen(text);
        bytes += lens[argc + 1] + lens[argc] + 32;
        argc += 2;
        j->item_iter = json_object_iter_next(json_object_iter_value(j->ns_iter), j->item_iter);
    }
    bool sent = ok && (argc == 2 || init_send(j, (int)argc, argv, lens, NULL));
    for (size_t i = 3; argv && i < argc; i += 2)
        dumps_free((char *)argv[i]); /* json_dumps()'s */
    ldr_free(argv);
    ldr_free(lens);
    if (!ok) {
        ldr_conn_reset(j->st->conn, "out of memory in a transaction");
        job_reject(j, LD_ENOMEM, NULL);
        return;
    }
    if (!sent)
        return;          /* rejected */
    if (!j->item_iter) { /* the namespace is written: the next one */
        j->ns_iter = json_object_iter_next(j->data, j->ns_iter);
        if (j->ns_iter && !init_namespace(j)) {
            ldr_conn_reset(j->st->conn, "out of memory in a transaction");
            job_reject(j, LD_ENOMEM, NULL);
            return;
        }
    }
    if (j->ns_iter) {
        slice_later(j);
        return;
    }
    if (init_send(j, 3, (const char *[]){"SET", j->st->inited_key, ""}, NULL, NULL))
        init_send(j, 1, (const char *[]){"EXEC"}, NULL, on_init_exec);
}

static void init_start(struct job *j)
{
    struct rstore *st = j->st;
    if (!init_send(j, 1, (const char *[]){"MULTI"}, NULL, NULL))
        return;
    /* namespaces absent from the data become empty: DEL the known ones and
     * those given */
    for (int i = 0; i < 2; i++)
        if (!init_send(j, 2, (const char *[]){"DEL", st->hashes[i]}, NULL, NULL))
            return;
    for (j->ns_iter = json_object_iter(j->data); j->ns_iter;
         j->ns_iter = json_object_iter_next(j->data, j->ns_iter)) {
        if (!init_namespace(j)) {
            ldr_conn_reset(st->conn, "out of memory in a transaction");
            job_reject(j, LD_ENOMEM, NULL);
            return;
        }
        if (strcmp(j->ns_hash, st->hashes[0]) == 0 || strcmp(j->ns_hash, st->hashes[1]) == 0)
            continue;
        if (!init_send(j, 2, (const char *[]){"DEL", j->ns_hash},
                       (const size_t[]){3, j->ns_hash_len}, NULL))
            return;
    }
    j->ns_iter = json_object_iter(j->data);
    if (j->ns_iter && !init_namespace(j)) {
        ldr_conn_reset(st->conn, "out of memory in a transaction");
        job_reject(j, LD_ENOMEM, NULL);
        return;
    }
    slice_later(j); /* the items from the next pass on */
}

static void on_slice(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    static const struct timeval now = {0, 0};
    struct rstore *st = arg;
    struct job *j = st->slicing;
    if (!j)
        return;
    st->slicing = j->snext;
    if (!st->slicing)
        st->slicing_tail = NULL;
    j->queued = false;
    j->snext = NULL;
    if (j->kind == J_INIT && j->validating)
        validate_slice(j); /* may queue it again, reject it, or start it */
    else if (j->kind == J_INIT)
        init_slice(j); /* may queue it again, or complete it */
    else
        all_slice(j);
    if (st->slicing)
        event_add(st->slice, &now);
}

/* ---- starting jobs ------------------------------------------------------ */

static void job_start(struct job *j)
{
    struct rstore *st = j->st;
    /* an init checks its data first: invalid data is LD_EINVAL whatever
     * the connection's state (validate_slice() looks at it after) */
    if (j->kind != J_INIT && !ldr_conn_usable(st->conn)) {
        job_reject(j, LD_ESTORE, "%s", ldr_conn_why(st->conn));
        return;
    }
    switch (j->kind) {
    case J_GET:
        send_cmd(j, 3, (const char *[]){"HGET", j->hash, j->key}, NULL, on_get);
        break;
    case J_ALL:
        send_cmd(j, 2, (const char *[]){"HGETALL", j->hash}, NULL, on_all);
        break;
    case J_INITED:
        send_cmd(j, 2, (const char *[]){"EXISTS", st->inited_key}, NULL, on_inited);
        break;
    case J_WRITE:
        st->writing = j;
        write_start(j);
        break;
    case J_INIT:
        /* later jobs wait while its items are checked, then written */
        st->writing = j;
        j->validating = true;
        j->ns_iter = json_object_iter(j->data);
        if (validate_namespace(j)) {
            if (j->ns_iter)
                slice_later(j);
            else
                validated(j); /* no item */
        }
        break;
    }
}

static void pump(struct rstore *st)
{
    /* a job that completes within job_start() (not connected: it rejects
     * at once) pumps again from job_done(): that call leaves the rest to
     * this loop, or the jobs waiting behind a write that failed would each
     * nest a call (tens of thousands of them overflow the stack) */
    if (st->pumping)
        return;
    st->pumping = true;
    /* while the host name is being resolved, the jobs wait: kicked when
     * it ends (connecting then, or failed: they reject) */
    while (!st->writing && st->wait_head && !(st->conn && ldr_conn_resolving(st->conn))) {
        struct job *j = st->wait_head;
        st->wait_head = j->wnext;
        if (!st->wait_head)
            st->wait_tail = NULL;
        j->wnext = NULL;
        job_start(j); /* may complete j */
    }
    st->pumping = false;
}

/* ---- the store's operations --------------------------------------------- */

/* Files a job in the list of all, without queueing it (it starts now). */
static void job_file(struct job *j)
{
    struct rstore *st = j->st;
    j->prev = st->jobs_tail;
    if (st->jobs_tail)
        st->jobs_tail->next = j;
    else
        st->jobs = j;
    st->jobs_tail = j;
}

static void r_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    struct rstore *st = impl;
    size_t len = strlen(key);
    struct job *j = job_new(st, J_GET, out, len + 1);
    if (!j)
        return;
    j->hash = hash_for(st, kind);
    j->key = memcpy(j->key_in, key, len + 1);
    job_add(j);
}

static void r_all(void *impl, const ld_kind *kind, ld_future *out)
{
    struct job *j = job_new(impl, J_ALL, out, 0);
    if (!j)
        return;
    j->hash = hash_for(impl, kind);
    job_add(j);
}

static void r_init(void *impl, const json_t *all_data, ld_future *out)
{
    if (!json_is_object(all_data)) { /* the rest is checked a slice per pass */
        ld_future_reject(out, LD_EINVAL, "%s", "all_data must be a JSON object of namespaces");
        ld_future_unref(out);
        return;
    }
    struct job *j = job_new(impl, J_INIT, out, 0);
    if (!j)
        return;
    j->data = json_incref((json_t *)all_data);
    job_add(j);
}

static void write_job(struct rstore *st, const ld_kind *kind, const char *key, json_t *item,
                      int64_t version, ld_future *out)
{
    struct job *j = job_new(st, J_WRITE, out, 0);
    if (!j)
        return;
    j->hash = hash_for(st, kind);
    j->key = ldr_strdup(key);
    j->text = item ? json_dumps(item, JSON_COMPACT) : NULL;
    j->version = version;
    if (!j->key || !j->text) {
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        job_free(j);
        return;
    }
    job_add(j);
}

static void r_upsert(void *impl, const ld_kind *kind, const json_t *item,
                     const struct ld_item_info *info, ld_future *out)
{
    write_job(impl, kind, info->key, (json_t *)item, info->version, out);
}

static void r_del(void *impl, const ld_kind *kind, const char *key, int64_t version, ld_future *out)
{
    json_t *t = ld_tombstone_new(key, version);
    if (!t) {
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        return;
    }
    write_job(impl, kind, key, t, version, out);
    json_decref(t);
}

static void r_initialized(void *impl, ld_future *out)
{
    struct job *j = job_new(impl, J_INITED, out, 0);
    if (j)
        job_add(j);
}

static void r_close(void *impl, ld_future *out)
{
    struct rstore *st = impl;
    if (st->closed || st->closing) { /* closing twice fulfils again */
        ld_future_fulfill(out);
        ld_future_unref(out);
        return;
    }
    st->closed = true;
    st->closing = out;
    maybe_closed(st);
}

static void r_free(void *impl)
{
    struct rstore *st = impl;
    /* the connection first: no reply reaches a job from now on */
    ldr_conn_free(st->conn);
    st->conn = NULL;
    while (st->jobs) {
        struct job *j = st->jobs;
        st->jobs = j->next;
        ld_future_reject(j->out, LD_ECANCELED, NULL);
        ld_future_unref(j->out);
        job_free(j);
    }
    if (st->closing) {
        ld_future_reject(st->closing, LD_ECANCELED, NULL);
        ld_future_unref(st->closing);
    }
    if (st->slice)
        event_free(st->slice);
    if (st->kick)
        event_free(st->kick);
    if (st->parse)
        event_free(st->parse);
    ldr_free(st->inited_key);
    ldr_free(st->hashes[0]);
    ldr_free(st->hashes[1]);
    for (int k = 0; k < 2; k++)
        shared_unref(st->last_all[k].result);
    for (struct dying *d; (d = st->dying);) { /* the store is freed: at once */
        st->dying = d->next;
        shared_unref(d->obj);
        ldr_free(d);
    }
    if (st->reap)
        event_free(st->reap);
    ldr_options_clear(&st->o);
    ldr_free(st);
}

static const char *r_describe(void *impl)
{
    (void)impl;
    return "redis";
}

static const struct ld_store_ops ops = {
    .version = 1,
    .get = r_get,
    .all = r_all,
    .init = r_init,
    .upsert = r_upsert,
    .del = r_del,
    .initialized = r_initialized,
    .close = r_close,
    .free = r_free,
    .describe = r_describe,
};

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pump(arg);
}

/* A name resolution ended: the jobs that waited start from the next pass
 * (not from inside the resolver's callback, where freeing the connection
 * would free the resolver). */
static void on_settled(void *arg)
{
    static const struct timeval now = {0, 0};
    struct rstore *st = arg;
    event_add(st->kick, &now);
}

/* Unavailable, then available again: Redis may have lost what it held
 * (restarted empty, or it was never written: it was down when the data
 * came), so the status asks for the whole data set again
 * (needs_refresh) until an init succeeds. */
static void on_avail(void *arg, bool available)
{
    struct rstore *st = arg;
    if (!available)
        st->lost = true;
    if (st->store)
        ld_store_update_status(st->store, available, available && st->lost);
}

ld_store *ld_redis_store_new(struct event_base *base, const ld_redis_options *opts)
{
    if (!base)
        return NULL;
    struct rstore *st = ldr_calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    st->base = base;
    if (ldr_options_copy(&st->o, opts) != 0) {
        ldr_free(st);
        return NULL;
    }
    size_t n = strlen(st->o.prefix) + sizeof(":features");
    st->inited_key = ldr_malloc(n);
    st->hashes[0] = ldr_malloc(n);
    st->hashes[1] = ldr_malloc(n);
    st->slice = evtimer_new(base, on_slice, st);
    st->kick = evtimer_new(base, on_kick, st);
    st->reap = evtimer_new(base, on_reap, st);
    st->parse = evtimer_new(base, on_parse, st);
    if (!st->inited_key || !st->hashes[0] || !st->hashes[1] || !st->slice || !st->kick ||
        !st->reap || !st->parse) {
        r_free(st);
        return NULL;
    }
    snprintf(st->inited_key, n, "%s:$inited", st->o.prefix);
    snprintf(st->hashes[0], n, "%s:features", st->o.prefix);
    snprintf(st->hashes[1], n, "%s:segments", st->o.prefix);
    ld_store *store = ld_store_new(base, &ops, st);
    if (!store) {
        r_free(st);
        return NULL;
    }
    st->store = store;
    ld_store_set_init_validates(store); /* validate_slice() */
    st->conn = ldr_conn_new(base, &st->o, on_avail, st);
    if (!st->conn) {
        ld_store_free(store); /* frees st */
        return NULL;
    }
    ldr_conn_on_settled(st->conn, on_settled, st);
    return store;
}
