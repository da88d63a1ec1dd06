/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/polling.c: LaunchDarkly's polling endpoints, /sdk/latest-all,
 * /sdk/latest-flags[/{key}] and /sdk/latest-segments[/{key}], answered
 * from the serialized bodies of cache.c, with their ETags.
 */
#include "serve-internal.h"

static bool is_item(const struct lds_route *rt)
{
    return rt->arg == LDS_P_FLAG || rt->arg == LDS_P_SEGMENT;
}

static void answer_item(lds_server *srv, struct evhttp_request *req, bool flag, json_t *item);

/* An item's route: answered within the request's callback when the store
 * answers at once (the memory store does), else once its get completes. */
static void answer_item_now(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                            const ld_kind *kind, const char *key)
{
    json_t *item;
    if (ld_store_get_now(srv->store, kind, key, &item) == 0) {
        answer_item(srv, req, rt->arg == LDS_P_FLAG, item);
        json_decref(item);
    } else {
        lds_wait_for(srv, req, ld_store_get(srv->store, kind, key), rt, 0);
    }
}

void lds_polling_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                       char *const *seg, const char *query)
{
    (void)query;
    bool flags = rt->arg == LDS_P_FLAGS || rt->arg == LDS_P_FLAG;
    if (rt->arg == LDS_P_ALL)
        lds_wait_for(srv, req, lds_fetch_all(srv), rt, 0);
    else if (!is_item(rt))
        lds_wait_for(srv, req,
                     ld_store_all(srv->store, flags ? ld_kind_features() : ld_kind_segments()), rt,
                     0);
    else if (seg[2][0] == '\0')
        lds_send_error(srv, req, 404, "not found", 0);
    else
        answer_item_now(srv, req, rt, flags ? ld_kind_features() : ld_kind_segments(), seg[2]);
}

/* A collection assembled in several passes of the loop is ready (or
 * memory ran out): the route answers with srv->coll[rt->arg]. */
static void collection_ready(lds_server *srv, struct evhttp_request *req,
                             const struct lds_route *rt, ld_future *f, int flags)
{
    struct lds_coll *c = &srv->coll[rt->arg];
    if (ld_future_is_rejected(f) || !c->body)
        lds_send_error(srv, req, 500, "out of memory", flags);
    else
        lds_send_cacheable(srv, req, c->body, c->etag);
}

static const struct lds_route ready_routes[LDS_N_COLL] = {
    {.finish = collection_ready, .arg = LDS_COLL_ALL},
    {.finish = collection_ready, .arg = LDS_COLL_FLAGS},
    {.finish = collection_ready, .arg = LDS_COLL_SEGMENTS},
};

static void answer_collection(lds_server *srv, struct evhttp_request *req, int which, ld_future *f)
{
    json_t *a, *b = NULL;
    if (which == LDS_COLL_ALL) {
        a = ld_future_json(ld_future_all_get(f, 0));
        b = ld_future_json(ld_future_all_get(f, 1));
    } else {
        a = ld_future_json(f);
    }
    ld_future *wait;
    struct lds_coll *c = lds_coll_begin(srv, which, a, b, &wait);
    if (c)
        lds_send_cacheable(srv, req, c->body, c->etag);
    else if (wait)
        lds_wait_for(srv, req, wait, &ready_routes[which], 0);
    else
        lds_send_error(srv, req, 500, "out of memory", 0);
}

static void answer_item(lds_server *srv, struct evhttp_request *req, bool flag, json_t *item)
{
    if (!item) {
        lds_send_error(srv, req, 404, flag ? "no such flag" : "no such segment", 0);
        return;
    }
    struct lds_icache *ic = lds_icache_get(srv, item);
    if (!ic) {
        lds_send_error(srv, req, 500, "out of memory", 0);
        return;
    }
    lds_send_cacheable(srv, req, ic->body, ic->etag);
}

void lds_polling_finish(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                        ld_future *f, int flags)
{
    if (ld_future_is_rejected(f)) {
        /* The store refuses a key no item can have (not valid UTF-8):
         * the client's error. */
        bool bad_key = ld_future_error(f) == LD_EINVAL && is_item(rt);
        lds_send_error(srv, req, bad_key ? 400 : 500, ld_future_error_message(f), flags);
    } else if (is_item(rt)) {
        answer_item(srv, req, rt->arg == LDS_P_FLAG, ld_future_json(f));
    } else {
        answer_collection(srv, req, rt->arg, f);
    }
}
