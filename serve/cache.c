/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/cache.c: the serialized bodies of the store's collections and
 * items, with their ETags (server.h says how they are kept), for the
 * polling answers and the streams' put.
 *
 * A collection body is assembled from the texts of its items ("key":{...}),
 * each made once per item (texts.c's table below, by key: the same object,
 * or an equal one, keeps its text), so a change to one flag of 10,000
 * serializes one flag. The assembling is sliced: a few milliseconds of the
 * loop at a time (BUDGET_NS), the rest in later passes (a zero timeout, so
 * the loop reads and answers other connections between the slices), and
 * the requests that wait for it are answered once it is done.
 */
#include <event2/event.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "serve-internal.h"

#define BUDGET_NS LDS_SLICE_NS
/* Items between looks at the clock; bytes copied per look. */
#define ITEMS_PER_LOOK 32
#define BYTES_PER_LOOK (256 * 1024)

static uint64_t fnv1a(const char *p, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
#define FNV_INIT 0xcbf29ce484222325ULL

static void etag_of_hash(char out[24], uint64_t h)
{
    snprintf(out, 24, "\"%016llx\"", (unsigned long long)h);
}

static void make_etag(char out[24], const char *p, size_t n)
{
    etag_of_hash(out, fnv1a(p, n, FNV_INIT));
}

/* ------------------------------------------------------------------------- */
/* The texts of items, by kind and key                                        */

/* One item's text in a collection: "key":{...}, as jansson writes the
 * pair. `item`: the object it was made from (a reference held). */
struct text {
    char *key; /* NULL: an empty slot */
    size_t key_len;
    uint64_t hash;
    json_t *item;
    struct lds_blob *blob;
    uint64_t text_hash; /* fnv1a of the blob's text */
    unsigned gen;       /* the last assembling that used it */
};

/* A text in a body being assembled: a reference, and its hash. */
struct part {
    struct lds_blob *blob;
    uint64_t hash;
};

struct texts {
    struct text *t;
    size_t mask, used;
};

/* What cache.c keeps beyond struct lds_coll: the texts of flags and
 * segments, and the assembling under way of each collection. */
struct build {
    bool on;
    json_t *snap[2];
    int k;      /* the snapshot being gathered (0, 1), or 2: copying */
    void *iter; /* where in snap[k] */
    struct part *parts;
    size_t n, cap, split; /* parts gathered; those of snap[0] */
    size_t len;           /* the body's length */
    struct lds_blob *body;
    size_t at_part, at; /* copying: the next part, the next byte of body */
    uint64_t hash;
    ld_future *done; /* fulfilled once srv->coll[which] holds the body */
    struct event *ev;
    lds_server *srv;
    int which;
};

struct lds_cache_state {
    struct texts texts[2]; /* flags, segments */
    struct build b[LDS_N_COLL];
    unsigned gen;
};

static void text_clear(struct text *x)
{
    lds_free(x->key);
    json_decref(x->item);
    lds_blob_unref(x->blob);
    memset(x, 0, sizeof *x);
}

static void texts_free(struct texts *ts)
{
    for (size_t i = 0; ts->t && i <= ts->mask; i++)
        text_clear(&ts->t[i]);
    lds_free(ts->t);
    memset(ts, 0, sizeof *ts);
}

static struct text *texts_slot(struct texts *ts, const char *key, size_t len, uint64_t h)
{
    for (size_t i = h & ts->mask;; i = (i + 1) & ts->mask) {
        struct text *x = &ts->t[i];
        if (!x->key || (x->hash == h && x->key_len == len && memcmp(x->key, key, len) == 0))
            return x;
    }
}

/* Makes room for one more text (the table stays at most half full). */
static int texts_grow(struct texts *ts)
{
    if (ts->t && (ts->used + 1) * 2 <= ts->mask + 1)
        return 0;
    size_t cap = ts->t ? (ts->mask + 1) * 2 : 1024;
    struct texts n = {lds_calloc(cap, sizeof(struct text)), cap - 1, ts->used};
    if (!n.t)
        return -1;
    for (size_t i = 0; ts->t && i <= ts->mask; i++)
        if (ts->t[i].key)
            *texts_slot(&n, ts->t[i].key, ts->t[i].key_len, ts->t[i].hash) = ts->t[i];
    lds_free(ts->t);
    *ts = n;
    return 0;
}

/* The text "key":{...} of `item`, kept under `key`. */
static struct lds_blob *text_make(const char *key, size_t len, json_t *item)
{
    json_t *k = json_stringn_nocheck(key, len);
    struct lds_blob *kb = k ? lds_blob_json(k) : NULL;
    struct lds_blob *ib = kb ? lds_blob_json(item) : NULL;
    json_decref(k);
    struct lds_blob *b = NULL;
    if (ib) {
        const char *parts[] = {kb->data, ":", ib->data};
        size_t lens[] = {kb->len, 1, ib->len};
        b = lds_blob_concat(parts, lens, 3);
    }
    lds_blob_unref(kb);
    lds_blob_unref(ib);
    return b;
}

/* The text of `item` under `key` in `ts`, made if the one kept is not of
 * the same object or an equal one (borrowed); NULL without memory. */
static struct text *text_get(struct texts *ts, unsigned gen, const char *key, size_t len,
                             json_t *item)
{
    if (texts_grow(ts) != 0)
        return NULL;
    uint64_t h = fnv1a(key, len, FNV_INIT);
    struct text *x = texts_slot(ts, key, len, h);
    if (x->key && x->item != item && !json_equal(x->item, item)) {
        lds_blob_unref(x->blob);
        x->blob = NULL;
    }
    if (!x->key || !x->blob) {
        struct lds_blob *b = text_make(key, len, item);
        char *k = x->key ? x->key : lds_malloc(len + 1);
        if (!b || !k) {
            lds_blob_unref(b);
            if (!x->key)
                lds_free(k);
            return NULL;
        }
        if (!x->key) {
            memcpy(k, key, len);
            k[len] = '\0';
            x->key = k;
            x->key_len = len;
            x->hash = h;
            ts->used++;
        }
        x->blob = b;
        x->text_hash = fnv1a(b->data, b->len, FNV_INIT);
    }
    if (x->item != item) {
        json_decref(x->item);
        x->item = json_incref(item);
    }
    x->gen = gen;
    return x;
}

/* Lets go of the texts no assembling since `gen` used: items gone from
 * the store. */
static void texts_sweep(struct texts *ts, unsigned gen)
{
    if (!ts->t)
        return;
    struct texts n = {lds_calloc(ts->mask + 1, sizeof(struct text)), ts->mask, 0};
    if (!n.t)
        return; /* kept: swept another time */
    for (size_t i = 0; i <= ts->mask; i++) {
        struct text *x = &ts->t[i];
        if (!x->key)
            continue;
        if ((int)(x->gen - gen) < 0) {
            text_clear(x);
            continue;
        }
        *texts_slot(&n, x->key, x->key_len, x->hash) = *x;
        n.used++;
    }
    lds_free(ts->t);
    *ts = n;
}

/* ------------------------------------------------------------------------- */
/* Assembling a collection                                                    */

static struct lds_cache_state *state_of(lds_server *srv)
{
    if (!srv->cache) {
        srv->cache = lds_calloc(1, sizeof *srv->cache);
        for (int i = 0; srv->cache && i < LDS_N_COLL; i++) {
            srv->cache->b[i].srv = srv;
            srv->cache->b[i].which = i;
        }
    }
    return srv->cache;
}

static void build_reset(struct build *b)
{
    json_decref(b->snap[0]);
    json_decref(b->snap[1]);
    b->snap[0] = b->snap[1] = NULL;
    for (size_t i = 0; i < b->n; i++)
        lds_blob_unref(b->parts[i].blob);
    lds_free(b->parts);
    b->parts = NULL;
    b->n = b->cap = b->split = b->len = b->at_part = b->at = 0;
    lds_blob_unref(b->body);
    b->body = NULL;
    b->on = false;
}

static void coll_clear(struct lds_coll *c)
{
    json_decref(c->snap[0]);
    json_decref(c->snap[1]);
    c->snap[0] = c->snap[1] = NULL;
    lds_blob_unref(c->body);
    lds_blob_unref(c->put);
    c->body = c->put = NULL;
}

/* The fixed text of collection `which` around its parts: before, between
 * the flags and the segments (LDS_COLL_ALL), after. */
static const char *frame(int which, int at)
{
    static const char *const all[] = {"{\"flags\":{", "},\"segments\":{", "}}"};
    static const char *const one[] = {"{", "", "}"};
    return which == LDS_COLL_ALL ? all[at] : one[at];
}

/* The parts of the items of snapshot b->k, until `until` (ns) or until
 * `*left` items are taken (a test's knob: otherwise SIZE_MAX). */
static int gather(struct lds_cache_state *cs, int which, struct build *b, int64_t until,
                  size_t *left)
{
    struct texts *ts = &cs->texts[which == LDS_COLL_SEGMENTS || b->k == 1];
    for (unsigned looks = 0; b->iter; looks++, --*left) {
        if ((looks % ITEMS_PER_LOOK == 0 && looks && lds_now_ns() > until) || *left == 0)
            return 0;
        size_t len;
        const char *key = json_object_iter_key(b->iter);
        len = json_object_iter_key_len(b->iter);
        struct text *t = text_get(ts, cs->gen, key, len, json_object_iter_value(b->iter));
        if (!t)
            return -1;
        if (b->n == b->cap) {
            size_t cap = b->cap ? b->cap * 2 : 1024;
            struct part *p = lds_malloc(cap * sizeof *p);
            if (!p)
                return -1;
            if (b->n)
                memcpy(p, b->parts, b->n * sizeof *p);
            lds_free(b->parts);
            b->parts = p;
            b->cap = cap;
        }
        t->blob->refs++;
        b->parts[b->n++] = (struct part){t->blob, t->text_hash};
        b->len += t->blob->len;
        b->iter = json_object_iter_next(b->snap[b->k], b->iter);
    }
    return 1;
}

static void put_bytes(struct build *b, const char *p, size_t n)
{
    memcpy(b->body->data + b->at, p, n);
    b->hash = fnv1a(p, n, b->hash);
    b->at += n;
}

static void put_frame(struct build *b, int which, int at)
{
    const char *f = frame(which, at);
    put_bytes(b, f, strlen(f));
}

/* Copies the parts into the body, with their commas and frame, until
 * `until` (ns) or until `*left` parts are copied. */
static int copy(int which, struct build *b, int64_t until, size_t *left)
{
    if (!b->body) {
        size_t commas = (b->split ? b->split - 1 : 0) + (b->n - b->split ? b->n - b->split - 1 : 0);
        size_t len = b->len + commas;
        for (int i = 0; i < 3; i++)
            len += strlen(frame(which, i));
        if (!(b->body = lds_blob_new(len)))
            return -1;
        b->hash = FNV_INIT;
        put_frame(b, which, 0);
    }
    size_t bytes = 0;
    for (; b->at_part < b->n; b->at_part++, --*left) {
        if (bytes > BYTES_PER_LOOK) {
            if (lds_now_ns() > until)
                return 0;
            bytes = 0;
        }
        if (*left == 0)
            return 0;
        size_t i = b->at_part;
        if (i == b->split && which == LDS_COLL_ALL)
            put_frame(b, which, 1);
        else if (i > 0)
            put_bytes(b, ",", 1);
        /* the ETag: a hash of the frame's bytes and of the texts' hashes
         * (not of every byte again: 10 MB would take 10-20 ms) */
        memcpy(b->body->data + b->at, b->parts[i].blob->data, b->parts[i].blob->len);
        b->at += b->parts[i].blob->len;
        b->hash = (b->hash ^ b->parts[i].hash) * 0x100000001b3ULL;
        bytes += b->parts[i].blob->len;
    }
    if (b->n == b->split && which == LDS_COLL_ALL)
        put_frame(b, which, 1);
    put_frame(b, which, 2);
    return 1;
}

/* The body is made: it becomes the collection's, and the requests that
 * wait for it are answered. */
static void build_finish(lds_server *srv, int which, struct build *b)
{
    struct lds_coll *c = &srv->coll[which];
    coll_clear(c);
    c->body = b->body;
    b->body = NULL;
    c->snap[0] = b->snap[0];
    c->snap[1] = b->snap[1];
    b->snap[0] = b->snap[1] = NULL;
    etag_of_hash(c->etag, b->hash);
    build_reset(b);
    ld_future *done = b->done;
    b->done = NULL;
    if (done) {
        ld_future_fulfill(done);
        ld_future_unref(done);
    }
}

static void build_later(struct build *b);

static void build_fail(struct build *b)
{
    build_reset(b);
    ld_future *done = b->done;
    b->done = NULL;
    if (done) {
        ld_future_reject(done, LD_ENOMEM, "out of memory");
        ld_future_unref(done);
    }
}

/* One slice of the assembling of `which`, until `until` (ns; INT64_MAX: to
 * its end). @return 1 done, 0 not yet, -1 out of memory (abandoned). */
static int build_step(lds_server *srv, int which, int64_t until)
{
    struct lds_cache_state *cs = srv->cache;
    struct build *b = &cs->b[which];
    size_t left = srv->slice_items;
    int rc = 1;
    while (rc == 1 && b->k < 2) {
        rc = gather(cs, which, b, until, &left);
        if (rc == 1 && ++b->k == 1) {
            b->split = b->n;
            b->iter = b->snap[1] ? json_object_iter(b->snap[1]) : NULL;
        }
    }
    if (rc == 1)
        rc = copy(which, b, until, &left);
    if (rc == 1) {
        srv->st.serializations++;
        build_finish(srv, which, b);
        /* the texts of items gone: every few hundred assemblings */
        if (++cs->gen % 256 == 0) {
            texts_sweep(&cs->texts[0], cs->gen - 255);
            texts_sweep(&cs->texts[1], cs->gen - 255);
        }
    } else if (rc < 0) {
        build_fail(b);
    }
    return rc;
}

static void build_slice(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct build *b = arg;
    if (b->on && build_step(b->srv, b->which, lds_now_ns() + BUDGET_NS) == 0)
        build_later(b);
}

/* Schedules the next slice for a later pass of the loop (a zero timeout:
 * the loop looks at its sockets first). */
static void build_later(struct build *b)
{
    static const struct timeval zero = {0, 0};
    if (!b->ev)
        b->ev = evtimer_new(b->srv->base, build_slice, b);
    if (!b->ev || evtimer_add(b->ev, &zero) != 0)
        build_fail(b);
}

/* Starts assembling `which` from `a` and `s` (borrowed), unless it is
 * being assembled from them already. What was being assembled from other
 * (older) snapshots is dropped: the requests waiting for it get the newer
 * body (the texts of its items stay made). */
static void build_start(struct build *b, json_t *a, json_t *s)
{
    if (b->on && b->snap[0] == a && b->snap[1] == s)
        return;
    build_reset(b);
    b->on = true;
    b->snap[0] = json_incref(a);
    b->snap[1] = json_incref(s);
    b->k = 0;
    b->iter = a ? json_object_iter(a) : NULL;
}

static struct lds_coll *cached(lds_server *srv, int which, json_t *a, json_t *b)
{
    struct lds_coll *c = &srv->coll[which];
    return c->body && c->snap[0] == a && c->snap[1] == b ? c : NULL;
}

static void pass_on(ld_future *in, ld_future *out, void *arg)
{
    (void)in;
    (void)arg;
    ld_future_fulfill(out);
}

struct lds_coll *lds_coll_begin(lds_server *srv, int which, json_t *a, json_t *b, ld_future **wait)
{
    *wait = NULL;
    struct lds_coll *c = cached(srv, which, a, b);
    struct lds_cache_state *cs = c ? NULL : state_of(srv);
    if (c || !cs)
        return c;
    struct build *bd = &cs->b[which];
    build_start(bd, a, b);
    int rc = build_step(srv, which, lds_now_ns() + BUDGET_NS);
    if (rc != 0)
        return rc == 1 ? &srv->coll[which] : NULL;
    if (!bd->done && !(bd->done = ld_future_new(srv->base))) {
        build_fail(bd);
        return NULL;
    }
    if (!bd->ev || !evtimer_pending(bd->ev, NULL))
        build_later(bd);
    /* a future of its own for each request: one that goes away cancels
     * its own, not the others' */
    *wait = bd->on ? ld_future_then(ld_future_ref(bd->done), pass_on, NULL) : NULL;
    return NULL;
}

static void icache_clear(struct lds_icache *ic)
{
    json_decref(ic->item);
    lds_blob_unref(ic->body);
    ic->item = NULL;
    ic->body = NULL;
}

/* The cache entry of `item`, made if needed; NULL when memory ran out. */
struct lds_icache *lds_icache_get(lds_server *srv, json_t *item)
{
    uintptr_t v = (uintptr_t)item;
    v ^= v >> 17;
    v *= 0x9e3779b97f4a7c15ULL;
    struct lds_icache *ic = &srv->items[(v >> 32) % LDS_ICACHE_SLOTS];
    if (ic->item == item)
        return ic;
    icache_clear(ic);
    struct lds_blob *b = lds_blob_json(item);
    if (!b)
        return NULL;
    ic->item = json_incref(item);
    ic->body = b;
    make_etag(ic->etag, b->data, b->len);
    return ic;
}

/* The stream's put event of the LDS_COLL_ALL cache entry. */
struct lds_blob *lds_coll_put(struct lds_coll *c)
{
    if (!c->put) {
        static const char head[] = "event: put\ndata: {\"path\":\"/\",\"data\":";
        static const char tail[] = "}\n\n";
        const char *parts[] = {head, c->body->data, tail};
        size_t lens[] = {sizeof head - 1, c->body->len, sizeof tail - 1};
        c->put = lds_blob_concat(parts, lens, 3);
    }
    return c->put;
}

ld_future *lds_fetch_all(lds_server *srv)
{
    ld_future *fs[2] = {ld_store_all(srv->store, ld_kind_features()),
                        ld_store_all(srv->store, ld_kind_segments())};
    return ld_future_all(srv->base, fs, 2);
}

void lds_cache_clear(lds_server *srv)
{
    for (int i = 0; i < LDS_N_COLL; i++)
        coll_clear(&srv->coll[i]);
    for (int i = 0; i < LDS_ICACHE_SLOTS; i++)
        icache_clear(&srv->items[i]);
    struct lds_cache_state *cs = srv->cache;
    if (!cs)
        return;
    for (int i = 0; i < LDS_N_COLL; i++) {
        struct build *b = &cs->b[i];
        if (b->ev)
            event_free(b->ev);
        b->ev = NULL;
        if (b->done)
            ld_future_cancel(b->done);
        ld_future_unref(b->done);
        b->done = NULL;
        build_reset(b);
    }
    texts_free(&cs->texts[0]);
    texts_free(&cs->texts[1]);
    lds_free(cs);
    srv->cache = NULL;
}
