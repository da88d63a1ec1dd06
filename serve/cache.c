/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/cache.c: the serialized bodies of the store's collections and
 * items, with their ETags (server.h says how they are kept), for the
 * polling answers and the streams' put.
 */
#include <stdint.h>
#include <stdio.h>

#include "serve-internal.h"

static uint64_t fnv1a(const char *p, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
#define FNV_INIT 0xcbf29ce484222325ULL

static void make_etag(char out[24], const char *p, size_t n)
{
    snprintf(out, 24, "\"%016llx\"", (unsigned long long)fnv1a(p, n, FNV_INIT));
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

/* The body of collection `which` of the snapshots `a` (and `b` for
 * LDS_COLL_ALL), borrowed from the cache. NULL when memory ran out. */
struct lds_coll *lds_coll_get(lds_server *srv, int which, json_t *a, json_t *b)
{
    struct lds_coll *c = &srv->coll[which];
    if (c->body && c->snap[0] == a && c->snap[1] == b)
        return c;
    coll_clear(c);
    srv->st.serializations++;
    struct lds_blob *body;
    if (which == LDS_COLL_ALL) {
        struct lds_blob *fa = lds_blob_json(a), *sb = lds_blob_json(b);
        const char *parts[] = {"{\"flags\":", fa ? fa->data : "",
                               ",\"segments\":", sb ? sb->data : "", "}"};
        size_t lens[] = {9, fa ? fa->len : 0, 12, sb ? sb->len : 0, 1};
        body = fa && sb ? lds_blob_concat(parts, lens, 5) : NULL;
        lds_blob_unref(fa);
        lds_blob_unref(sb);
    } else {
        body = lds_blob_json(a);
    }
    if (!body)
        return NULL;
    c->body = body;
    c->snap[0] = json_incref(a);
    c->snap[1] = json_incref(b);
    make_etag(c->etag, body->data, body->len);
    return c;
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
}
