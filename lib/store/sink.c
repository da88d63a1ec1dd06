/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: update sinks (sink.h). The front layer checks what every sink
 * needs checked; the store sink forwards to a store and keeps the
 * data-source status.
 *
 * The status is an immutable, reference-counted snapshot: the sink holds the
 * current one, and each broadcast holds the one it announces, so a listener
 * sees the status as it was when the broadcast was made. A broadcast is a
 * future fulfilled with its snapshot; the future's callback calls the
 * listeners from the loop, in FIFO order with every other callback of the
 * base.
 */
#include <stdlib.h>
#include <string.h>

#include <ldasync/error.h>
#include <ldasync/sink.h>

#include "core/core-internal.h"
#include "store/store-internal.h"

/* ------------------------------------------------------------------------- */
/* The front layer                                                           */

struct ld_update_sink {
    struct event_base *base;
    const struct ld_update_sink_ops *ops;
    void *impl;
    ld_future *oom; /* rejected LD_ENOMEM, for when nothing else can be made */
};

ld_update_sink *ld_update_sink_new(struct event_base *base, const struct ld_update_sink_ops *ops,
                                   void *impl)
{
    if (!base || !ops || ops->version != LD_UPDATE_SINK_OPS_VERSION || !ops->init || !ops->upsert ||
        !ops->del || !ops->update_status)
        return NULL;
    ld_update_sink *s = ld__malloc(sizeof(*s));
    if (!s)
        return NULL;
    s->oom = ld__future_rejected_static(base, LD_ENOMEM, "out of memory");
    if (!s->oom) {
        ld__free(s);
        return NULL;
    }
    s->base = base;
    s->ops = ops;
    s->impl = impl;
    return s;
}

void ld_update_sink_free(ld_update_sink *s)
{
    if (!s)
        return;
    if (s->ops->free)
        s->ops->free(s->impl);
    ld_future_unref(s->oom);
    ld__free(s);
}

/* The start of init, upsert and delete: returns the future to give back at
 * once (bad input as named by the static message `bad`, no memory), or NULL
 * with *out a new pending future for the implementation. */
static ld_future *begin(ld_update_sink *s, const char *bad, ld_future **out)
{
    ld_future *r;
    if (bad)
        r = ld__future_rejected_static(s->base, LD_EINVAL, bad);
    else if ((*out = ld_future_new(s->base)) != NULL)
        return NULL;
    else
        r = NULL;
    return r ? r : ld_future_ref(s->oom);
}

ld_future *ld_update_sink_init(ld_update_sink *s, const json_t *all_data)
{
    ld_future *out, *r;
    if (!s)
        return NULL;
    if ((r = begin(s, all_data ? NULL : "all_data must not be NULL", &out)) != NULL)
        return r;
    s->ops->init(s->impl, all_data, ld_future_ref(out));
    return out;
}

ld_future *ld_update_sink_upsert(ld_update_sink *s, const ld_kind *kind, const json_t *item)
{
    ld_future *out, *r;
    if (!s)
        return NULL;
    const char *bad = !kind ? "kind must not be NULL" : !item ? "item must not be NULL" : NULL;
    if ((r = begin(s, bad, &out)) != NULL)
        return r;
    s->ops->upsert(s->impl, kind, item, ld_future_ref(out));
    return out;
}

ld_future *ld_update_sink_delete(ld_update_sink *s, const ld_kind *kind, const char *key,
                                 int64_t version)
{
    ld_future *out, *r;
    if (!s)
        return NULL;
    const char *bad = !kind ? "kind must not be NULL" : !key ? "key must not be NULL" : NULL;
    if ((r = begin(s, bad, &out)) != NULL)
        return r;
    s->ops->del(s->impl, kind, key, version, ld_future_ref(out));
    return out;
}

int ld_update_sink_update_status(ld_update_sink *s, enum ld_data_source_state state,
                                 const ld_data_source_error_info *error)
{
    ld_data_source_error_info e;
    if (!s || !ld_data_source_state_name(state) || (error && !ld__ds_error_info_prepare(error, &e)))
        return LD_EINVAL;
    return s->ops->update_status(s->impl, state, error ? &e : NULL);
}

/* ------------------------------------------------------------------------- */
/* Status snapshots                                                          */

struct snapshot {
    unsigned refs;
    uint64_t seq; /* the number of the broadcast that made it; 0: the first status */
    ld_data_source_status status;
    ld_data_source_error_info error; /* status.error points here when there is one */
    char message[];
};

static struct snapshot *snapshot_new(uint64_t seq, enum ld_data_source_state state,
                                     int64_t since_ms, const ld_data_source_error_info *error)
{
    const char *msg = error && error->message ? error->message : "";
    size_t len = error ? strlen(msg) + 1 : 0;
    struct snapshot *p = ld__malloc(sizeof(*p) + len);
    if (!p)
        return NULL;
    p->refs = 1;
    p->seq = seq;
    p->status.state = state;
    p->status.since_ms = since_ms;
    p->status.error = NULL;
    if (error) {
        memcpy(p->message, msg, len);
        p->error = *error;
        p->error.message = p->message;
        p->status.error = &p->error;
    }
    return p;
}

static void snapshot_unref(void *p)
{
    struct snapshot *snap = p;
    if (snap && --snap->refs == 0)
        ld__free(snap);
}

/* ------------------------------------------------------------------------- */
/* The store sink                                                            */

struct store_sink {
    ld_store *store; /* borrowed */
    struct event_base *base;
    ld_update_sink *handle; /* NULL once freed */
    unsigned refs;          /* the owner's (until freed) + one per callback pending */
    unsigned delivering;    /* listener calls in progress */
    struct snapshot *current;
    uint64_t seq;                   /* broadcasts made */
    struct ld__listeners listeners; /* each hears the broadcasts numbered above its `after` */
};

static void store_sink_release(struct store_sink *ss)
{
    if (--ss->refs > 0)
        return;
    ld__listeners_free(&ss->listeners);
    snapshot_unref(ss->current);
    ld__free(ss);
}

static void deliver(ld_future *f, void *arg)
{
    struct store_sink *ss = arg;
    const struct snapshot *snap = ld_future_ptr(f);
    ss->delivering++;
    for (struct ld__listener *l = ss->listeners.head; l && ss->handle; l = l->next)
        if (l->fn && l->after < snap->seq)
            ((ld_data_source_status_fn)l->fn)(ss->handle, &snap->status, l->arg);
    if (--ss->delivering == 0 && ss->handle)
        ld__listeners_sweep(&ss->listeners);
    store_sink_release(ss);
}

/* Queues the call of the listeners with `snap`; nothing when none listens. */
static int broadcast(struct store_sink *ss, struct snapshot *snap)
{
    if (ss->listeners.live == 0)
        return 0;
    ld_future *f = ld_future_new(ss->base);
    if (!f)
        return LD_ENOMEM;
    snap->refs++;
    ld_future_fulfill_ptr(f, snap, snapshot_unref);
    ss->refs++;
    int rc = ld_future_on_complete(f, deliver, ss); /* steals f, and snap with it */
    if (rc != 0)
        ss->refs--;
    return rc;
}

/* The rules of sink.h: what `state` and `error` (validated, may be NULL)
 * make of the current status. */
static int store_sink_update_status(void *impl, enum ld_data_source_state state,
                                    const ld_data_source_error_info *error)
{
    struct store_sink *ss = impl;
    const ld_data_source_status *old = &ss->current->status;
    if (state == LD_DATA_SOURCE_STATE_INTERRUPTED &&
        old->state == LD_DATA_SOURCE_STATE_INITIALIZING)
        state = LD_DATA_SOURCE_STATE_INITIALIZING;
    if (state == old->state && !error)
        return 0;
    int64_t since = state == old->state ? old->since_ms : ld__now_ms();
    struct snapshot *next = snapshot_new(ss->seq + 1, state, since, error ? error : old->error);
    if (!next)
        return LD_ENOMEM;
    int rc = broadcast(ss, next);
    if (rc != 0) {
        snapshot_unref(next);
        return rc;
    }
    ss->seq++;
    snapshot_unref(ss->current);
    ss->current = next;
    return 0;
}

/* An operation of the sink handed to the store: made before the store
 * hears of it, so that nothing needs memory once the store has acted. */
struct watch {
    struct store_sink *ss;
    ld_future *out; /* the sink's future for the operation */
};

static struct watch *watch_new(struct store_sink *ss, ld_future *out)
{
    struct watch *w = ld__malloc(sizeof(*w));
    if (!w) {
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        return NULL;
    }
    ss->refs++;
    w->ss = ss;
    w->out = out;
    return w;
}

/* Looks at the store's outcome (a store failure makes the status
 * interrupted, and queues its broadcast), then completes the sink's future
 * the same way, so that the status has changed by the time it completes. */
static void watched(ld_future *from, void *arg)
{
    struct watch *w = arg;
    struct store_sink *ss = w->ss;
    int code = ld_future_error(from);
    if (ss->handle && code != 0 && code != LD_EINVAL) {
        ld_data_source_error_info e = {LD_DATA_SOURCE_ERROR_KIND_STORE, 0, ld__now_ms(),
                                       ld_future_error_message(from)};
        store_sink_update_status(ss, LD_DATA_SOURCE_STATE_INTERRUPTED,
                                 &e); /* LD_ENOMEM: nothing to do */
    }
    /* `from` is complete: this adopts its outcome without a callback */
    if (ld_future_forward(w->out, ld_future_ref(from)) != 0)
        ld_future_reject(w->out, LD_ENOMEM, NULL);
    ld_future_unref(w->out);
    ld__free(w);
    store_sink_release(ss);
}

/* Watches the store's future `from` (stolen) for `w`. A complete one is
 * looked at now; a pending one from the store's front has no callback yet,
 * so registering ours needs no memory. */
static void watch(struct watch *w, ld_future *from)
{
    if (!ld_future_is_pending(from)) {
        watched(from, w);
        ld_future_unref(from);
    } else if (ld_future_on_complete(from, watched, w) != 0) {
        struct store_sink *ss = w->ss;
        ld_future_reject(w->out, LD_ENOMEM, NULL); /* cannot happen with our stores */
        ld_future_unref(w->out);
        ld__free(w);
        store_sink_release(ss);
    }
}

static void store_sink_init(void *impl, const json_t *all_data, ld_future *out)
{
    struct store_sink *ss = impl;
    struct watch *w = watch_new(ss, out);
    if (w)
        watch(w, ld_store_init(ss->store, all_data));
}

static void store_sink_upsert(void *impl, const ld_kind *kind, const json_t *item, ld_future *out)
{
    struct store_sink *ss = impl;
    struct watch *w = watch_new(ss, out);
    if (w)
        watch(w, ld_store_upsert(ss->store, kind, item));
}

static void store_sink_del(void *impl, const ld_kind *kind, const char *key, int64_t version,
                           ld_future *out)
{
    struct store_sink *ss = impl;
    struct watch *w = watch_new(ss, out);
    if (w)
        watch(w, ld_store_delete(ss->store, kind, key, version));
}

static void store_sink_free(void *impl)
{
    struct store_sink *ss = impl;
    ss->handle = NULL; /* callbacks still queued see it and do nothing */
    store_sink_release(ss);
}

static const struct ld_update_sink_ops store_sink_ops = {
    .version = LD_UPDATE_SINK_OPS_VERSION,
    .init = store_sink_init,
    .upsert = store_sink_upsert,
    .del = store_sink_del,
    .update_status = store_sink_update_status,
    .free = store_sink_free,
};

ld_update_sink *ld_store_sink_new(ld_store *store)
{
    if (!store)
        return NULL;
    struct store_sink *ss = ld__calloc(1, sizeof(*ss));
    if (!ss)
        return NULL;
    ss->store = store;
    ss->base = ld_store_base(store);
    ss->refs = 1;
    ss->current = snapshot_new(0, LD_DATA_SOURCE_STATE_INITIALIZING, ld__now_ms(), NULL);
    ss->handle = ss->current ? ld_update_sink_new(ss->base, &store_sink_ops, ss) : NULL;
    if (!ss->handle) {
        snapshot_unref(ss->current);
        ld__free(ss);
        return NULL;
    }
    return ss->handle;
}

static struct store_sink *store_sink_of(const ld_update_sink *s)
{
    return s && s->ops == &store_sink_ops ? s->impl : NULL;
}

int ld_store_sink_status(const ld_update_sink *s, ld_data_source_status *out)
{
    struct store_sink *ss = store_sink_of(s);
    if (!ss || !out)
        return LD_EINVAL;
    *out = ss->current->status;
    return 0;
}

int64_t ld_store_sink_add_listener(ld_update_sink *s, ld_data_source_status_fn fn, void *arg)
{
    struct store_sink *ss = store_sink_of(s);
    if (!ss || !fn)
        return LD_EINVAL;
    return ld__listeners_add(&ss->listeners, (ld__listener_fn)fn, arg, ss->seq);
}

int ld_store_sink_remove_listener(ld_update_sink *s, int64_t id)
{
    struct store_sink *ss = store_sink_of(s);
    if (!ss)
        return LD_EINVAL;
    return ld__listeners_remove(&ss->listeners, id, ss->delivering == 0);
}
