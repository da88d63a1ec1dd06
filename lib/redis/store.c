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
 * and a large HGETALL's items are parsed, a slice per loop pass.
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
#define SLICE_BYTES (256 * 1024)

enum jkind { J_GET, J_ALL, J_INIT, J_WRITE, J_INITED };

struct job {
    struct job *prev, *next; /* every job of the store, started or not */
    struct job *wnext;       /* the jobs waiting to start */
    struct rstore *st;
    enum jkind kind;
    bool started;
    ld_future *out; /* owned */
    char *hash;     /* {prefix}:{namespace} (get, all, write) */
    char *key;      /* get, write */
    char *text;     /* write: the item's JSON */
    int64_t version;
    int tries;
    /* init: the data, its kinds in order, and their JSON written so far */
    json_t *data;
    size_t nkinds, kind_i, item_i;
    struct kbatch *batches;
    /* all: the replies taken from hiredis, parsed a slice at a time */
    redisReply **els;
    size_t nels, el_i;
    json_t *result;
};

/* One kind of an init: HSET {hash} k1 v1 k2 v2 ... */
struct kbatch {
    char *hash; /* argv[1]; its length is lens[1] (a namespace may hold a NUL) */
    const char **argv;
    size_t *lens;
    size_t argc, cap;
};

struct rstore {
    struct event_base *base;
    struct ld_redis_options o;
    struct ldr_conn *conn;
    ld_store *store;
    char *inited_key;
    struct job *jobs, *jobs_tail;      /* all */
    struct job *wait_head, *wait_tail; /* not started */
    struct job *writing;               /* the write under way, or NULL */
    struct event *slice;               /* runs the init or all that slices */
    struct job *slicing;               /* its job */
    ld_future *closing;                /* close waits for the jobs */
    bool closed;
};

static void pump(struct rstore *st);
static char *hash_of(struct rstore *st, const ld_kind *kind);

/* ---- jobs --------------------------------------------------------------- */

static void kbatch_free(struct kbatch *b)
{
    for (size_t i = 3; i < b->argc; i += 2)
        free((void *)b->argv[i]); /* jansson's json_dumps() text */
    ldr_free(b->argv);
    ldr_free(b->lens);
    ldr_free(b->hash);
}

static void job_free(struct job *j)
{
    ldr_free(j->hash);
    ldr_free(j->key);
    free(j->text);
    json_decref(j->data);
    if (j->batches) {
        for (size_t i = 0; i < j->nkinds; i++)
            kbatch_free(&j->batches[i]);
        ldr_free(j->batches);
    }
    for (size_t i = j->el_i; i < j->nels; i++)
        if (j->els[i])
            freeReplyObject(j->els[i]);
    ldr_free(j->els);
    json_decref(j->result);
    ldr_free(j);
}

static struct job *job_new(struct rstore *st, enum jkind kind, ld_future *out)
{
    struct job *j = ldr_calloc(1, sizeof(*j));
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
static void job_add(struct job *j)
{
    struct rstore *st = j->st;
    j->prev = st->jobs_tail;
    if (st->jobs_tail)
        st->jobs_tail->next = j;
    else
        st->jobs = j;
    st->jobs_tail = j;
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
    if (st->slicing == j)
        st->slicing = NULL;
    ld_future_unref(j->out);
    job_free(j);
    pump(st);
    maybe_closed(st);
}

static void job_reject(struct job *j, int code, const char *fmt, ...) LD_PRINTF(3, 4);
static void job_reject(struct job *j, int code, const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ld_future_reject(j->out, code, "%s", msg);
    job_done(j);
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
    json_error_t e;
    json_t *v = json_loadb(text, len, JSON_ALLOW_NUL, &e);
    if (!v || !json_is_object(v)) {
        json_decref(v);
        job_reject(j, LD_EPARSE, "Redis: %s of %s is not a JSON object%s%s", key, j->hash,
                   v ? "" : ": ", v ? "" : e.text);
        return NULL;
    }
    return v;
}

/* ---- get, initialized --------------------------------------------------- */

static void on_get(void *arg, redisReply *r, int err, const char *msg)
{
    struct job *j = arg;
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
    json_t *v = parse_item(j, r->str, r->len, j->key);
    if (!v)
        return;
    if (ld_item_is_deleted(v)) {
        json_decref(v);
        v = NULL;
    }
    ld_future_fulfill_json(j->out, v);
    job_done(j);
}

static void on_inited(void *arg, redisReply *r, int err, const char *msg)
{
    struct job *j = arg;
    if (failed(j, r, err, msg))
        return;
    ld_future_fulfill_bool(j->out, r->type == REDIS_REPLY_INTEGER && r->integer > 0);
    job_done(j);
}

/* ---- all ---------------------------------------------------------------- */

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
        j->st->slicing = j;
        event_active(j->st->slice, EV_TIMEOUT, 0);
        return;
    }
    json_t *res = j->result;
    j->result = NULL;
    ld_future_fulfill_json(j->out, res);
    job_done(j);
}

static void on_all(void *arg, redisReply *r, int err, const char *msg)
{
    struct job *j = arg;
    if (failed(j, r, err, msg))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2) {
        job_reject(j, LD_ESTORE, "Redis: HGETALL answered a reply of type %d", r->type);
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
    ld_future_fulfill(j->out);
    job_done(j);
}

/* MULTI; DEL every namespace known or given; HSET per kind; SET $inited;
 * EXEC, sent in one go. */
static void init_send(struct job *j)
{
    struct rstore *st = j->st;
    if (send_cmd(j, 1, (const char *[]){"MULTI"}, NULL, NULL) != 0)
        return;
    const char *why;
    int rc = 0;
    char *known[2] = {hash_of(st, ld_kind_segments()), hash_of(st, ld_kind_features())};
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = known[i] ? ldr_conn_send(st->conn, 2, (const char *[]){"DEL", known[i]}, NULL, NULL,
                                      NULL, &why)
                      : LD_ENOMEM;
    for (size_t k = 0; k < j->nkinds && rc == 0; k++) {
        struct kbatch *b = &j->batches[k];
        bool is_known = false;
        for (int i = 0; i < 2; i++)
            is_known |=
                strlen(known[i]) == b->lens[1] && memcmp(known[i], b->hash, b->lens[1]) == 0;
        if (!is_known)
            rc = ldr_conn_send(st->conn, 2, (const char *[]){"DEL", b->hash},
                               (const size_t[]){3, b->lens[1]}, NULL, NULL, &why);
        if (rc == 0 && b->argc > 2)
            rc = ldr_conn_send(st->conn, (int)b->argc, b->argv, b->lens, NULL, NULL, &why);
    }
    ldr_free(known[0]);
    ldr_free(known[1]);
    if (rc == 0)
        rc = ldr_conn_send(st->conn, 3, (const char *[]){"SET", st->inited_key, ""}, NULL, NULL,
                           NULL, &why);
    if (rc == 0)
        rc = ldr_conn_send(st->conn, 1, (const char *[]){"EXEC"}, NULL, on_init_exec, j, &why);
    if (rc != 0) {
        ldr_conn_reset(st->conn, "a transaction could not be sent whole");
        job_reject(j, LD_ESTORE, "Redis: the init could not be sent");
    }
}

static int batch_push(struct kbatch *b, const char *s, size_t len)
{
    if (b->argc == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        const char **argv = ldr_realloc(b->argv, cap * sizeof(*argv));
        if (!argv)
            return LD_ENOMEM;
        b->argv = argv;
        size_t *lens = ldr_realloc(b->lens, cap * sizeof(*lens));
        if (!lens)
            return LD_ENOMEM;
        b->lens = lens;
        b->cap = cap;
    }
    b->argv[b->argc] = s;
    b->lens[b->argc] = len;
    b->argc++;
    return 0;
}

/* Writes the items' JSON (j->data: ld_data_sort()'s array), a slice per
 * loop pass; then sends. */
static void init_slice(struct job *j)
{
    size_t bytes = 0;
    while (j->kind_i < j->nkinds && bytes < SLICE_BYTES) {
        struct kbatch *b = &j->batches[j->kind_i];
        json_t *items = json_object_get(json_array_get(j->data, j->kind_i), "items");
        while (j->item_i < json_array_size(items) && bytes < SLICE_BYTES) {
            json_t *item = json_array_get(items, j->item_i);
            json_t *key = json_object_get(item, "key");
            char *text = json_dumps(item, JSON_COMPACT | JSON_ENCODE_ANY);
            if (!text || batch_push(b, json_string_value(key), json_string_length(key)) != 0) {
                free(text);
                job_reject(j, LD_ENOMEM, NULL);
                return;
            }
            size_t len = strlen(text);
            if (batch_push(b, text, len) != 0) {
                b->argc--; /* the key; the text is freed here */
                free(text);
                job_reject(j, LD_ENOMEM, NULL);
                return;
            }
            bytes += len + 64;
            j->item_i++;
        }
        if (j->item_i < json_array_size(items))
            break;
        j->kind_i++;
        j->item_i = 0;
    }
    if (j->kind_i < j->nkinds) {
        j->st->slicing = j;
        event_active(j->st->slice, EV_TIMEOUT, 0);
        return;
    }
    init_send(j);
}

static void init_start(struct job *j)
{
    /* the kinds in the order a persistent store writes them (segments
     * first), each with its HSET's first two arguments */
    json_t *sorted = ld_data_sort(j->data);
    json_decref(j->data);
    j->data = sorted;
    size_t n = json_array_size(sorted);
    j->batches = sorted ? ldr_calloc(n ? n : 1, sizeof(*j->batches)) : NULL;
    if (!j->batches) {
        job_reject(j, LD_ENOMEM, NULL);
        return;
    }
    j->nkinds = n;
    const size_t plen = strlen(j->st->o.prefix);
    for (size_t i = 0; i < n; i++) {
        json_t *ns = json_object_get(json_array_get(sorted, i), "namespace");
        size_t nslen = json_string_length(ns);
        struct kbatch *b = &j->batches[i];
        b->hash = ldr_malloc(plen + nslen + 2);
        if (!b->hash || batch_push(b, "HSET", 4) != 0 ||
            batch_push(b, b->hash, plen + 1 + nslen) != 0) {
            job_reject(j, LD_ENOMEM, NULL);
            return;
        }
        memcpy(b->hash, j->st->o.prefix, plen);
        b->hash[plen] = ':';
        memcpy(b->hash + plen + 1, json_string_value(ns), nslen);
        b->hash[plen + 1 + nslen] = '\0';
    }
    init_slice(j);
}

static void on_slice(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rstore *st = arg;
    struct job *j = st->slicing;
    st->slicing = NULL;
    if (!j)
        return;
    if (j->kind == J_INIT)
        init_slice(j);
    else
        all_slice(j);
}

/* ---- starting jobs ------------------------------------------------------ */

static void job_start(struct job *j)
{
    struct rstore *st = j->st;
    j->started = true;
    if (!ldr_conn_usable(st->conn)) {
        const char *why;
        /* ask for the reason: the connection says why it cannot send */
        ldr_conn_send(st->conn, 0, NULL, NULL, NULL, NULL, &why);
        job_reject(j, LD_ESTORE, "%s", why ? why : "not connected to Redis");
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
        st->writing = j;
        init_start(j);
        break;
    }
}

static void pump(struct rstore *st)
{
    while (!st->writing && st->wait_head) {
        struct job *j = st->wait_head;
        st->wait_head = j->wnext;
        if (!st->wait_head)
            st->wait_tail = NULL;
        j->wnext = NULL;
        job_start(j); /* may complete j, and pump() again from job_done() */
    }
}

/* ---- the store's operations --------------------------------------------- */

static char *hash_of(struct rstore *st, const ld_kind *kind)
{
    const char *ns = ld_kind_namespace(kind);
    size_t n = strlen(st->o.prefix) + strlen(ns) + 2;
    char *h = ldr_malloc(n);
    if (h)
        snprintf(h, n, "%s:%s", st->o.prefix, ns);
    return h;
}

static void r_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    struct job *j = job_new(impl, J_GET, out);
    if (!j)
        return;
    j->hash = hash_of(impl, kind);
    j->key = ldr_strdup(key);
    if (!j->hash || !j->key) {
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        job_free(j);
        return;
    }
    job_add(j);
}

static void r_all(void *impl, const ld_kind *kind, ld_future *out)
{
    struct job *j = job_new(impl, J_ALL, out);
    if (!j)
        return;
    j->hash = hash_of(impl, kind);
    if (!j->hash) {
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        job_free(j);
        return;
    }
    job_add(j);
}

static void r_init(void *impl, const json_t *all_data, ld_future *out)
{
    struct job *j = job_new(impl, J_INIT, out);
    if (!j)
        return;
    j->data = json_incref((json_t *)all_data);
    job_add(j);
}

static void write_job(struct rstore *st, const ld_kind *kind, const char *key, json_t *item,
                      int64_t version, ld_future *out)
{
    struct job *j = job_new(st, J_WRITE, out);
    if (!j)
        return;
    j->hash = hash_of(st, kind);
    j->key = ldr_strdup(key);
    j->text = item ? json_dumps(item, JSON_COMPACT) : NULL;
    j->version = version;
    if (!j->hash || !j->key || !j->text) {
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
    struct job *j = job_new(impl, J_INITED, out);
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
    ldr_free(st->inited_key);
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

static void on_avail(void *arg, bool available)
{
    struct rstore *st = arg;
    if (st->store)
        ld_store_update_status(st->store, available, false);
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
    size_t n = strlen(st->o.prefix) + sizeof(":$inited");
    st->inited_key = ldr_malloc(n);
    st->slice = event_new(base, -1, 0, on_slice, st);
    if (!st->inited_key || !st->slice) {
        r_free(st);
        return NULL;
    }
    snprintf(st->inited_key, n, "%s:$inited", st->o.prefix);
    ld_store *store = ld_store_new(base, &ops, st);
    if (!store) {
        r_free(st);
        return NULL;
    }
    st->store = store;
    st->conn = ldr_conn_new(base, &st->o, on_avail, st);
    if (!st->conn) {
        ld_store_free(store); /* frees st */
        return NULL;
    }
    return store;
}
