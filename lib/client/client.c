/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the client (client.h): a store, the data system that fills it
 * and the evaluator that reads it, behind one object.
 *
 * Typed variations are the evaluator's detail continued by ld_future_then()
 * with a conversion that needs nothing of the client, so that freeing the
 * client (which frees the evaluator, whose pending evaluations reject with
 * LD_ECANCELED and take the conversions with them) leaves nothing behind.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <openssl/crypto.h>

#include <ldasync/client.h>
#include <ldasync/error.h>
#include <ldasync/events.h>
#include <ldasync/network.h>

#include "client/client-internal.h"
#include "core/core-internal.h"
#include "eval/eval-internal.h"
#include "events/events-internal.h"
#include "model/model-internal.h"
#include "store/store-internal.h"

/* ------------------------------------------------------------------------- */
/* Options                                                                   */

struct ld_client_options {
    ld_store *store; /* borrowed; NULL: a memory store of the client's own */
    ld_initializer **inits;
    size_t n_inits;
    ld_synchronizer *sync;
    ld_big_segment_store *bss; /* borrowed */
    int64_t stale_after_ms;
    int bs_cache_size;
    int64_t bs_cache_ms, bs_poll_ms;
    bool offline;
    bool daemon;        /* no data source; events as configured */
    ld_net_config *net; /* a copy; NULL: none */
    bool polling;
    bool no_events;
    ld_events_config *events; /* a copy; NULL: the defaults */
};

ld_client_options *ld_client_options_new(void)
{
    return ld__calloc(1, sizeof(struct ld_client_options));
}

/* Frees the data sources `o` holds and forgets them. */
static void drop_sources(ld_client_options *o)
{
    for (size_t i = 0; i < o->n_inits; i++)
        ld_initializer_free(o->inits[i]);
    ld__free(o->inits);
    o->inits = NULL;
    o->n_inits = 0;
    ld_synchronizer_free(o->sync);
    o->sync = NULL;
}

void ld_client_options_free(ld_client_options *o)
{
    if (!o)
        return;
    drop_sources(o);
    ld_net_config_free(o->net);
    ld_events_config_free(o->events);
    ld__free(o);
}

int ld_client_options_set_net_config(ld_client_options *o, const ld_net_config *cfg)
{
    if (!o)
        return LD_EINVAL;
    ld_net_config *copy = NULL;
    if (cfg && !(copy = ld_net_config_copy(cfg)))
        return LD_ENOMEM;
    ld_net_config_free(o->net);
    o->net = copy;
    return 0;
}

int ld_client_options_set_events(ld_client_options *o, bool enabled)
{
    if (!o)
        return LD_EINVAL;
    o->no_events = !enabled;
    return 0;
}

int ld_client_options_set_events_config(ld_client_options *o, const ld_events_config *cfg)
{
    if (!o)
        return LD_EINVAL;
    ld_events_config *copy = NULL;
    if (cfg && !(copy = ld__events_config_copy(cfg)))
        return LD_ENOMEM;
    ld_events_config_free(o->events);
    o->events = copy;
    return 0;
}

int ld_client_options_set_polling(ld_client_options *o, bool polling)
{
    if (!o)
        return LD_EINVAL;
    o->polling = polling;
    return 0;
}

int ld_client_options_set_store(ld_client_options *o, ld_store *store)
{
    if (!o)
        return LD_EINVAL;
    o->store = store;
    return 0;
}

int ld_client_options_add_initializer(ld_client_options *o, ld_initializer *init)
{
    if (!o || !init) {
        ld_initializer_free(init);
        return LD_EINVAL;
    }
    ld_initializer **more = ld__realloc(o->inits, (o->n_inits + 1) * sizeof(*more));
    if (!more) {
        ld_initializer_free(init);
        return LD_ENOMEM;
    }
    more[o->n_inits++] = init;
    o->inits = more;
    return 0;
}

int ld_client_options_set_synchronizer(ld_client_options *o, ld_synchronizer *sync)
{
    if (!o) {
        ld_synchronizer_free(sync);
        return LD_EINVAL;
    }
    ld_synchronizer_free(o->sync);
    o->sync = sync;
    return 0;
}

int ld_client_options_set_big_segments(ld_client_options *o, ld_big_segment_store *bss,
                                       int64_t stale_after_ms)
{
    if (!o)
        return LD_EINVAL;
    o->bss = bss;
    o->stale_after_ms = stale_after_ms;
    return 0;
}

int ld_client_options_set_big_segment_cache(ld_client_options *o, int cache_size, int64_t cache_ms,
                                            int64_t poll_ms)
{
    if (!o)
        return LD_EINVAL;
    o->bs_cache_size = cache_size;
    o->bs_cache_ms = cache_ms;
    o->bs_poll_ms = poll_ms;
    return 0;
}

int ld_client_options_set_offline(ld_client_options *o, bool offline)
{
    if (!o)
        return LD_EINVAL;
    o->offline = offline;
    return 0;
}

int ld_client_options_set_daemon_mode(ld_client_options *o, bool daemon)
{
    if (!o)
        return LD_EINVAL;
    o->daemon = daemon;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The client                                                                */

/* LaunchDarkly's defaults for big segments. */
#define BS_CACHE_SIZE 1000
#define BS_CACHE_MS 5000
#define BS_POLL_MS 5000
#define BS_STALE_AFTER_MS 120000

/* A big segment status listener (fn NULL: removed while they were called). */
struct bs_listener {
    struct bs_listener *next;
    int64_t id;
    ld_client_big_segment_status_fn fn;
    void *arg;
};

/* A status listener of the client, registered with the data system. */
struct status_listener {
    struct status_listener *next;
    ld_client *client;
    int64_t id;    /* the client's */
    int64_t ds_id; /* the data system's; 0 offline */
    ld_client_status_fn fn;
    void *arg;
};

struct ld_client {
    struct event_base *base;
    ld_store *store;
    bool own_store;
    bool closed;
    ld_data_system *ds; /* NULL offline */
    ld_evaluator *ev;
    ld_future *ready;
    int64_t created_ms;
    int64_t last_id;
    struct status_listener *listeners;
    struct ld__bsc *bsc; /* NULL without a big segment store */
    struct bs_listener *bs_listeners;
    bool *bs_freed;         /* set while the listeners are called: the client was freed */
    char *sdk_key;          /* the network configuration's, for the secure mode hash */
    ld_event_processor *ep; /* NULL: events are off */
    struct ld__events *events;
    struct ld__recorder rec_plain, rec_detail; /* NULL functions when events are off */
};

/* The cache's poll changed the status: the listeners hear of it, in the
 * order they were added (those added meanwhile wait for the next change;
 * once one closed the client, the others hear nothing). */
static void bs_status_changed(void *arg, const ld_big_segment_store_status *status)
{
    ld_client *c = arg;
    bool freed = false;
    int64_t last = c->last_id;
    c->bs_freed = &freed;
    for (struct bs_listener *l = c->bs_listeners; l && l->id <= last && !c->closed; l = l->next) {
        if (!l->fn)
            continue;
        l->fn(c, status, l->arg);
        if (freed)
            return;
    }
    c->bs_freed = NULL;
    for (struct bs_listener **link = &c->bs_listeners; *link;) {
        struct bs_listener *l = *link;
        if (l->fn) {
            link = &l->next;
        } else {
            *link = l->next;
            ld__free(l);
        }
    }
}

ld_client *ld_client_new(struct event_base *base, ld_client_options *opts)
{
    ld_client_options defaults = {0};
    ld_client_options *o = opts ? opts : &defaults;
    /* the data sources move out of the options on every path */
    ld_client_options sources = {.inits = o->inits, .n_inits = o->n_inits, .sync = o->sync};
    o->inits = NULL;
    o->n_inits = 0;
    o->sync = NULL;
    ld_client *c = base ? ld__calloc(1, sizeof(*c)) : NULL;
    bool no_source = o->offline || o->daemon;
    if (!c || no_source)
        drop_sources(&sources); /* nobody will run them */
    if (!c)
        return NULL;
    c->base = base;
    c->created_ms = ld__now_ms();
    c->store = o->store;
    if (!c->store) {
        c->store = ld_memory_store_new(base);
        c->own_store = true;
    }
    if (o->net && !(c->sdk_key = ld__strdup(ld_net_config_sdk_key(o->net))))
        goto fail;
    c->ev = c->store ? ld_evaluator_new(c->store) : NULL;
    if (!c->ev)
        goto fail;
    if (o->bss) {
        struct ld__bsc_config cfg = {
            .size = o->bs_cache_size > 0 ? o->bs_cache_size : BS_CACHE_SIZE,
            .ttl_ms = o->bs_cache_ms > 0 ? o->bs_cache_ms : BS_CACHE_MS,
            .poll_ms = o->bs_poll_ms > 0 ? o->bs_poll_ms : BS_POLL_MS,
            .stale_after_ms = o->stale_after_ms > 0 ? o->stale_after_ms : BS_STALE_AFTER_MS};
        c->bsc = ld__bsc_new(base, o->bss, &cfg, bs_status_changed, c);
        if (!c->bsc || ld_evaluator_set_big_segment_store(c->ev, ld__bsc_store(c->bsc),
                                                          cfg.stale_after_ms) != 0)
            goto fail;
    }
    if (o->net && !o->offline && !o->no_events) {
        c->ep = ld_default_event_processor_new(base, o->net, o->events);
        if (!c->ep)
            goto fail;
        c->events = ld__events_of(c->ep);
        c->rec_plain = (struct ld__recorder){ld__events_record_eval, c->events, false};
        c->rec_detail = (struct ld__recorder){ld__events_record_eval, c->events, true};
    }
    if (no_source) {
        c->ready = ld_future_new(base);
        if (!c->ready)
            goto fail;
        ld_future_fulfill(c->ready);
    } else {
        if (o->net && !sources.n_inits && !sources.sync) {
            /* LaunchDarkly's data sources: streaming, or polling */
            sources.sync = o->polling ? ld_polling_synchronizer_new(base, o->net)
                                      : ld_streaming_synchronizer_new(base, o->net);
            if (!sources.sync)
                goto fail;
        }
        c->ds = ld_data_system_new(base, c->store, sources.inits, sources.n_inits, sources.sync);
        sources.n_inits = 0; /* the data system took them, on every path */
        sources.sync = NULL;
        c->ready = ld_data_system_ready(c->ds);
        if (!c->ready)
            goto fail;
    }
    drop_sources(&sources); /* the array */
    return c;
fail:
    drop_sources(&sources);
    ld_client_free(c);
    return NULL;
}

ld_future *ld_client_ready(ld_client *c)
{
    return c ? ld_future_ref(c->ready) : NULL;
}

/* ------------------------------------------------------------------------- */
/* Evaluations                                                               */

/* What a typed variation fulfils with. */
enum conversion { TO_BOOL, TO_INT, TO_JSON_NUMBER, TO_JSON_STRING, TO_JSON };

static const enum conversion conversions[] = {TO_BOOL, TO_INT, TO_JSON_NUMBER, TO_JSON_STRING,
                                              TO_JSON};

static int64_t to_int64(const json_t *v)
{
    if (json_is_integer(v))
        return json_integer_value(v);
    double d = json_number_value(v);
    if (isnan(d))
        return 0;
    if (d >= 9223372036854775807.0)
        return INT64_MAX;
    if (d <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)d; /* toward zero */
}

static void convert(ld_future *in, ld_future *out, void *arg)
{
    const enum conversion *to = arg;
    json_t *v = ld_detail_value(ld_future_ptr(in));
    switch (*to) {
    case TO_BOOL:
        ld_future_fulfill_bool(out, json_is_true(v));
        break;
    case TO_INT:
        ld_future_fulfill_int(out, to_int64(v));
        break;
    case TO_JSON_NUMBER:
        ld_future_fulfill_json(out, json_incref(json_is_number(v) ? v : NULL));
        break;
    case TO_JSON_STRING:
        ld_future_fulfill_json(out, json_incref(json_is_string(v) ? v : NULL));
        break;
    case TO_JSON:
        ld_future_fulfill_json(out, json_incref(v));
        break;
    }
}

/* An evaluation, told to `rec` (analytics events) when events are on. */
static ld_future *evaluate(ld_client *c, const char *key, ld_context *ctx, ld_value_type type,
                           json_t *fallback, const struct ld__recorder *rec)
{
    if (c->closed) {
        json_decref(fallback);
        ld_future *f = ld_future_rejected(c->base, LD_ECLOSED, "the client is closed");
        return f ? f : ld_future_rejected(c->base, LD_ENOMEM, NULL);
    }
    return ld__evaluator_detail_rec(c->ev, key, ctx, type, fallback, rec->fn ? rec : NULL);
}

ld_future *ld_client_variation_detail(ld_client *c, const char *key, ld_context *ctx,
                                      ld_value_type type, json_t *fallback)
{
    if (!c) {
        json_decref(fallback);
        return NULL;
    }
    return evaluate(c, key, ctx, type, fallback, &c->rec_detail);
}

/* A typed variation: the detail converted by `to`. */
static ld_future *typed(ld_client *c, const char *key, ld_context *ctx, ld_value_type type,
                        json_t *fallback, enum conversion to)
{
    ld_future *detail = evaluate(c, key, ctx, type, fallback, &c->rec_plain);
    if (!detail)
        return NULL;
    ld_future *out = ld_future_then(detail, convert, (void *)&conversions[to]);
    return out ? out : ld_future_rejected(c->base, LD_ENOMEM, NULL);
}

/* A future rejected with `err` (LD_ENOMEM if even that fails). */
static ld_future *refused(ld_client *c, int err, const char *why)
{
    ld_future *f =
        why ? ld_future_rejected(c->base, err, "%s", why) : ld_future_rejected(c->base, err, NULL);
    return f ? f : ld_future_rejected(c->base, LD_ENOMEM, NULL);
}

ld_future *ld_client_bool_variation(ld_client *c, const char *key, ld_context *ctx, bool fallback)
{
    return c ? typed(c, key, ctx, LD_VALUE_BOOL, json_boolean(fallback), TO_BOOL) : NULL;
}

/* The typed variations below make their fallback's JSON here: a NULL
 * fallback would turn the evaluator's type check off, so one that cannot be
 * made refuses the call rather than reaching it. */

ld_future *ld_client_int_variation(ld_client *c, const char *key, ld_context *ctx, int64_t fallback)
{
    if (!c)
        return NULL;
    json_t *fb = json_integer(fallback);
    return fb ? typed(c, key, ctx, LD_VALUE_INT, fb, TO_INT) : refused(c, LD_ENOMEM, NULL);
}

ld_future *ld_client_number_variation(ld_client *c, const char *key, ld_context *ctx,
                                      double fallback)
{
    if (!c)
        return NULL;
    if (!isfinite(fallback)) /* JSON has no NaN or infinity to serve it as */
        return refused(c, LD_EINVAL, "the fallback must be a finite number");
    json_t *fb = json_real(fallback);
    return fb ? typed(c, key, ctx, LD_VALUE_DOUBLE, fb, TO_JSON_NUMBER)
              : refused(c, LD_ENOMEM, NULL);
}

ld_future *ld_client_string_variation(ld_client *c, const char *key, ld_context *ctx,
                                      const char *fallback)
{
    if (!c)
        return NULL;
    if (!fallback)
        return typed(c, key, ctx, LD_VALUE_STRING, NULL, TO_JSON_STRING);
    if (!ld__utf8_valid(fallback, strlen(fallback)))
        return refused(c, LD_EINVAL, "the fallback must be valid UTF-8");
    json_t *fb = json_string(fallback);
    return fb ? typed(c, key, ctx, LD_VALUE_STRING, fb, TO_JSON_STRING)
              : refused(c, LD_ENOMEM, NULL);
}

ld_future *ld_client_json_variation(ld_client *c, const char *key, ld_context *ctx,
                                    json_t *fallback)
{
    if (!c) {
        json_decref(fallback);
        return NULL;
    }
    return typed(c, key, ctx, LD_VALUE_ANY, fallback, TO_JSON);
}

ld_future *ld_client_all_flags(ld_client *c, ld_context *ctx, unsigned options)
{
    if (!c)
        return NULL;
    if (c->closed) {
        ld_future *f = ld_future_rejected(c->base, LD_ECLOSED, "the client is closed");
        return f ? f : ld_future_rejected(c->base, LD_ENOMEM, NULL);
    }
    return ld_evaluator_all_flags(c->ev, ctx, options);
}

/* ------------------------------------------------------------------------- */
/* Status                                                                    */

int ld_client_data_source_status(const ld_client *c, ld_data_source_status *out)
{
    if (!c || !out)
        return LD_EINVAL;
    if (c->ds)
        return ld_data_system_status(c->ds, out);
    out->state = LD_DATA_SOURCE_STATE_VALID;
    out->since_ms = c->created_ms;
    out->error = NULL;
    return 0;
}

static void status_trampoline(ld_data_system *ds, const ld_data_source_status *status, void *arg)
{
    struct status_listener *l = arg;
    (void)ds;
    l->fn(l->client, status, l->arg);
}

int64_t ld_client_add_status_listener(ld_client *c, ld_client_status_fn fn, void *arg)
{
    if (!c || !fn)
        return LD_EINVAL;
    struct status_listener *l = ld__calloc(1, sizeof(*l));
    if (!l)
        return LD_ENOMEM;
    l->client = c;
    l->fn = fn;
    l->arg = arg;
    if (c->ds) {
        l->ds_id = ld_data_system_add_status_listener(c->ds, status_trampoline, l);
        if (l->ds_id < 0) {
            int64_t rc = l->ds_id;
            ld__free(l);
            return rc;
        }
    }
    l->id = ++c->last_id;
    l->next = c->listeners;
    c->listeners = l;
    return l->id;
}

int ld_client_remove_status_listener(ld_client *c, int64_t id)
{
    if (!c)
        return LD_EINVAL;
    for (struct status_listener **link = &c->listeners; *link; link = &(*link)->next) {
        struct status_listener *l = *link;
        if (l->id == id) {
            if (c->ds)
                ld_data_system_remove_status_listener(c->ds, l->ds_id);
            *link = l->next;
            ld__free(l);
            return 0;
        }
    }
    return LD_EINVAL;
}

/* ------------------------------------------------------------------------- */
/* Big segment store status                                                  */

int ld_client_big_segment_store_status(const ld_client *c, ld_big_segment_store_status *out)
{
    if (!c || !out)
        return LD_EINVAL;
    if (!c->bsc) {
        out->available = out->stale = false;
        return 0;
    }
    return ld__bsc_status(c->bsc, out);
}

int64_t ld_client_add_big_segment_status_listener(ld_client *c, ld_client_big_segment_status_fn fn,
                                                  void *arg)
{
    if (!c || !fn)
        return LD_EINVAL;
    struct bs_listener *l = ld__calloc(1, sizeof(*l));
    if (!l)
        return LD_ENOMEM;
    l->fn = fn;
    l->arg = arg;
    l->id = ++c->last_id;
    struct bs_listener **link = &c->bs_listeners;
    while (*link)
        link = &(*link)->next;
    *link = l;
    return l->id;
}

int ld_client_remove_big_segment_status_listener(ld_client *c, int64_t id)
{
    if (!c)
        return LD_EINVAL;
    for (struct bs_listener **link = &c->bs_listeners; *link; link = &(*link)->next) {
        struct bs_listener *l = *link;
        if (l->id != id || !l->fn)
            continue;
        if (c->bs_freed) { /* they are being called: swept afterwards */
            l->fn = NULL;
        } else {
            *link = l->next;
            ld__free(l);
        }
        return 0;
    }
    return LD_EINVAL;
}

/* ------------------------------------------------------------------------- */
/* The parts, closing and freeing                                            */

ld_store *ld_client_store(const ld_client *c)
{
    return c ? c->store : NULL;
}

ld_evaluator *ld_client_evaluator(const ld_client *c)
{
    return c ? c->ev : NULL;
}

ld_data_system *ld_client_data_system(const ld_client *c)
{
    return c ? c->ds : NULL;
}

ld_future *ld_client_close(ld_client *c)
{
    if (!c)
        return NULL;
    c->closed = true;
    if (c->bsc)
        ld__bsc_stop(c->bsc);
    /* The data system and the event processor (which sends what it holds)
     * close together; the close is over when both are. */
    ld_future *fs[2];
    size_t n = 0;
    if (c->ds)
        fs[n++] = ld_data_system_close(c->ds);
    if (c->ep)
        fs[n++] = ld_event_processor_close(c->ep);
    for (size_t i = 0; i < n; i++) {
        if (!fs[i]) { /* out of memory: the other is let go of */
            for (size_t k = 0; k < n; k++)
                ld_future_unref(fs[k]);
            return ld_future_rejected(c->base, LD_ENOMEM, NULL);
        }
    }
    ld_future *all = ld_future_all(c->base, fs, n); /* steals them; fulfils with no value */
    return all ? all : ld_future_rejected(c->base, LD_ENOMEM, NULL);
}

ld_future *ld_client_flush(ld_client *c)
{
    if (!c)
        return NULL;
    if (c->closed)
        return refused(c, LD_ECLOSED, "the client is closed");
    if (!c->ep) {
        ld_future *f = ld_future_new(c->base);
        if (!f)
            return ld_future_rejected(c->base, LD_ENOMEM, NULL);
        ld_future_fulfill_bool(f, true);
        return f;
    }
    return ld_event_processor_flush(c->ep);
}

/* The checks of track and identify: 0 to go on (events on), 1 for
 * nothing to do (events off), or the error. */
static int event_check(const ld_client *c, const ld_context *ctx)
{
    if (!c || !ctx)
        return LD_EINVAL;
    if (c->closed)
        return LD_ECLOSED;
    return c->events ? 0 : 1;
}

static int track(ld_client *c, const char *key, ld_context *ctx, json_t *data, bool has_metric,
                 double metric)
{
    int rc = event_check(c, ctx);
    if (rc == 0 && (!key || !*key || !ld__utf8_valid(key, strlen(key))))
        rc = LD_EINVAL;
    if (rc == 0 && has_metric && !isfinite(metric))
        rc = LD_EINVAL;
    if (rc != 0)
        return rc < 0 ? rc : 0;
    return ld__events_custom(c->events, key, ctx, data, has_metric, metric);
}

int ld_client_track(ld_client *c, const char *key, ld_context *ctx, json_t *data)
{
    return track(c, key, ctx, data, false, 0);
}

int ld_client_track_metric(ld_client *c, const char *key, ld_context *ctx, json_t *data,
                           double metric)
{
    return track(c, key, ctx, data, true, metric);
}

int ld_client_identify(ld_client *c, ld_context *ctx)
{
    int rc = event_check(c, ctx);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    return ld__events_identify(c->events, ctx);
}

ld_event_processor *ld_client_event_processor(const ld_client *c)
{
    return c ? c->ep : NULL;
}

void ld_client_free(ld_client *c)
{
    if (!c)
        return;
    for (struct status_listener *l = c->listeners, *next; l; l = next) {
        next = l->next;
        ld__free(l);
    }
    for (struct bs_listener *l = c->bs_listeners, *next; l; l = next) {
        next = l->next;
        ld__free(l);
    }
    if (c->bs_freed)
        *c->bs_freed = true;
    ld_future_unref(c->ready);
    ld_evaluator_free(c->ev);
    ld_event_processor_free(c->ep); /* after the evaluator, which records into it */
    ld__bsc_free(c->bsc);           /* after the evaluator, which reads it */
    ld_data_system_free(c->ds);
    if (c->own_store)
        ld_store_free(c->store);
    if (c->sdk_key) /* a secret: not left in freed memory */
        OPENSSL_cleanse(c->sdk_key, strlen(c->sdk_key));
    ld__free(c->sdk_key);
    ld__free(c);
}

int ld_client_secure_mode_hash(const ld_client *c, const ld_context *ctx, char out[65])
{
    if (!c || !c->sdk_key)
        return LD_EINVAL;
    return ld_secure_mode_hash(c->sdk_key, ctx, out);
}
