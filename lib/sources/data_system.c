/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the data system (data_system.h). It runs the initializers, then
 * the synchronizer, and applies what they bring through a store sink.
 *
 * One thing is in flight at a time: a fetch, a next, or the application of
 * one change set (a job: the store operations of the change set, and for a
 * full change set the store's snapshots of the data it replaces, read in
 * issue order just before the init). When a job is complete its changes
 * become a note: a queue of notes is delivered to the change listeners from
 * a timer of the loop, a slice of about a millisecond at a time, so that
 * diffing a full set of 10,000 flags against the data it replaced never
 * holds the loop for long (data_changes.c delivers them).
 *
 * Lifetime: the data system is reference counted; the owner holds one
 * reference until ld_data_system_free() and every callback pending on a
 * future or an event holds one. Free marks it freed and lets go of the
 * data sources, the sink and the ready future at once; callbacks that run
 * afterwards see the mark and only drop their reference; the last one
 * frees the memory.
 */
#include <event2/event.h>
#include <string.h>
#include <time.h>

#include <ldasync/data_system.h>
#include <ldasync/error.h>
#include <ldasync/sink.h>

#include "core/core-internal.h"
#include "sources/sources-internal.h"

#define DEFAULT_INITIAL_DELAY_MS 1000
#define DEFAULT_MAX_DELAY_MS 30000

/* A status listener, registered with the sink. */
struct ld__ds_status_listener {
    struct ld__ds_status_listener *next;
    ld_data_system *ds;
    int64_t id; /* the sink's */
    ld_data_system_status_fn fn;
    void *arg;
};

/* The application of a change set. */
struct ld__ds_job {
    ld_data_system *ds;
    ld_future *holder; /* the fetch or next that brought the change set */
    const ld_fdv2_change_set *cs;
    const ld_fdv2_update *update; /* NULL for a basis */
    uint64_t seq;
    bool full;
    bool dropped;    /* closed or freed before its data was built */
    json_t *data;    /* full: what is handed to init (NULL: no memory) */
    json_t *by[2];   /* full: its objects by kind (borrowed) */
    size_t built;    /* full: the changes added to `data` */
    size_t n, left;  /* operations, and those not complete */
    ld_future **ops; /* full: [init] or [all segments, all features, init] */
};

/* ------------------------------------------------------------------------- */
/* Lifetime                                                                  */

void ld__ds_release(ld_data_system *ds)
{
    if (--ds->refs > 0)
        return;
    ld__listeners_free(&ds->listeners);
    for (struct ld__ds_note *n = ds->notes, *next; n; n = next) {
        next = n->next;
        ld__ds_note_free(n);
    }
    if (ds->timer)
        event_free(ds->timer);
    if (ds->slicer)
        event_free(ds->slicer);
    if (ds->builder)
        event_free(ds->builder);
    ld__free(ds->last_msg);
    ld__free(ds->inits);
    ld__free(ds);
}

/* True when a callback should go no further. */
static bool stopped(const ld_data_system *ds)
{
    return ds->freed || ds->closing;
}

/* ------------------------------------------------------------------------- */
/* Status and outcome                                                        */

static void set_last_error(ld_data_system *ds, int code, const char *msg)
{
    char *copy = ld__strdup(msg ? msg : ld_strerror(code));
    ds->last_code = code;
    if (copy) { /* without memory the previous message stays: it is still an error */
        ld__free(ds->last_msg);
        ds->last_msg = copy;
    }
}

static void report(ld_data_system *ds, enum ld_data_source_state state,
                   enum ld_data_source_error_kind kind, const char *msg)
{
    ld_data_source_error_info e = {kind, 0, 0, msg};
    ld_update_sink_update_status(ds->sink, state, msg ? &e : NULL);
}

static void reject_ready(ld_data_system *ds, int code, const char *msg)
{
    if (ld_future_is_pending(ds->ready))
        ld_future_reject(ds->ready, code, "%s", msg ? msg : ld_strerror(code));
}

static void fulfill_ready(ld_data_system *ds)
{
    ds->has_data = true;
    if (ld_future_is_pending(ds->ready))
        ld_future_fulfill(ds->ready);
}

/* ------------------------------------------------------------------------- */
/* Applying change sets                                                      */

static void run_initializers(ld_data_system *ds);
static void request_next(ld_data_system *ds);
static void sources_done(ld_data_system *ds);

/* The item of a put as the store must get it: with the change's key and
 * version (a shallow copy when the object says otherwise). New reference. */
static json_t *item_of(const ld_fdv2_change *c)
{
    json_t *obj = ld_fdv2_change_object(c);
    const char *key = ld_fdv2_change_key(c);
    int64_t version = ld_fdv2_change_version(c);
    const char *k = json_string_value(json_object_get(obj, "key"));
    json_t *v = json_object_get(obj, "version");
    if (k && strcmp(k, key) == 0 && json_is_integer(v) && json_integer_value(v) == version)
        return json_incref(obj);
    json_t *copy = json_copy(obj);
    if (copy && (json_object_set_new(copy, "key", json_string(key)) != 0 ||
                 json_object_set_new(copy, "version", json_integer(version)) != 0)) {
        json_decref(copy);
        return NULL;
    }
    return copy;
}

static json_t *tombstone_of(const ld_fdv2_change *c)
{
    return json_pack("{s:s,s:I,s:b}", "key", ld_fdv2_change_key(c), "version",
                     (json_int_t)ld_fdv2_change_version(c), "deleted", 1);
}

/* Adds change `c` of a full change set to `by` (the objects of the data by
 * kind): a put's item, or a delete's tombstone. @return 0 or LD_ENOMEM. */
static int add_to_data(json_t *const by[2], const ld_fdv2_change *c)
{
    json_t *item = ld_fdv2_change_action(c) == LD_FDV2_ACTION_PUT ? item_of(c) : tombstone_of(c);
    json_t *into =
        by[ld_fdv2_change_kind(c) == ld_kind_segments() ? LD__DS_SEGMENTS : LD__DS_FEATURES];
    return item && json_object_set_new(into, ld_fdv2_change_key(c), item) == 0 ? 0 : LD_ENOMEM;
}

/* The empty data of a full change set, {"features": {}, "segments": {}},
 * with its objects by kind in by[] (borrowed), or NULL. */
static json_t *empty_data(json_t *by[2])
{
    json_t *data = json_object();
    by[LD__DS_SEGMENTS] = json_object();
    by[LD__DS_FEATURES] = json_object();
    int rc = !data || !by[0] || !by[1];
    rc |= json_object_set_new(data, ld_kind_namespace(ld__ds_kind_of(LD__DS_FEATURES)),
                              by[LD__DS_FEATURES]);
    rc |= json_object_set_new(data, ld_kind_namespace(ld__ds_kind_of(LD__DS_SEGMENTS)),
                              by[LD__DS_SEGMENTS]);
    if (rc) {
        json_decref(data);
        return NULL;
    }
    return data;
}

static void job_free(struct ld__ds_job *j)
{
    for (size_t i = 0; i < j->n; i++)
        ld_future_unref(j->ops[i]);
    ld__free(j->ops);
    ld_future_unref(j->holder);
    json_decref(j->data);
    ld__free(j);
}

/* The note of a complete job (NULL when there is nothing to hear or no
 * memory: then the changes go unheard). Takes what it keeps from `j`. */
static struct ld__ds_note *note_of(struct ld__ds_job *j)
{
    struct ld__ds_note *n = ld__calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->seq = j->seq;
    if (j->full) {
        n->diff = true;
        if (j->n == 3) {
            for (int k = 0; k < 2; k++)
                if (ld_future_is_fulfilled(j->ops[k]))
                    n->old[k] = json_incref(ld_future_json(j->ops[k]));
        }
        n->data = j->data;
        j->data = NULL;
        return n;
    }
    n->applied = ld__calloc(j->n ? j->n : 1, 1);
    if (!n->applied) {
        ld__free(n);
        return NULL;
    }
    bool any = false;
    for (size_t i = 0; i < j->n; i++)
        any |= n->applied[i] = ld_future_is_fulfilled(j->ops[i]) && ld_future_bool(j->ops[i]);
    if (!any) {
        ld__ds_note_free(n);
        return NULL;
    }
    n->holder = j->holder;
    j->holder = NULL;
    n->cs = j->cs;
    return n;
}

/* The code of the first failure among the job's writes (0: none), with its
 * message in *msg. */
static int job_error(const struct ld__ds_job *j, const char **msg)
{
    for (size_t i = j->full && j->n > 0 ? j->n - 1 : 0; i < j->n; i++) {
        if (!j->ops[i]) { /* not even a rejection could be made */
            *msg = ld_strerror(LD_ENOMEM);
            return LD_ENOMEM;
        }
        if (ld_future_is_rejected(j->ops[i])) {
            *msg = ld_future_error_message(j->ops[i]);
            return ld_future_error(j->ops[i]);
        }
    }
    *msg = NULL;
    return 0;
}

/* Every operation of `j` is complete: hears of its changes, reports, and
 * goes on. */
static void job_done(struct ld__ds_job *j)
{
    ld_data_system *ds = j->ds;
    if (ds->freed || j->dropped) {
        job_free(j);
        ld__ds_release(ds);
        return;
    }
    const char *msg;
    int code = job_error(j, &msg);
    bool failed = code != 0;
    /* applied: heard even when closing; a full set is heard when the data
     * it replaced was read (listeners were there when it was issued) */
    if (!failed && ds->listeners.live > 0 && (!j->full || j->n == 3)) {
        struct ld__ds_note *n = note_of(j);
        if (n)
            ld__ds_queue_note(ds, n);
    }
    if (ds->closing) {
        job_free(j);
        ld__ds_release(ds);
        return;
    }
    if (failed) {
        set_last_error(ds, code, msg);
        /* a store failure was reported by the sink; bad data is ours to report */
        if (code == LD_EINVAL)
            report(ds, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA,
                   ds->last_msg);
    }
    if (!j->update) { /* a basis */
        if (failed) {
            job_free(j);
            run_initializers(ds);
        } else {
            report(ds, LD_DATA_SOURCE_STATE_VALID, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, NULL);
            fulfill_ready(ds);
            job_free(j);
            sources_done(ds);
        }
    } else {
        if (!failed) {
            ld_update_sink_update_status(ds->sink, ld_fdv2_update_state(j->update),
                                         ld_fdv2_update_error(j->update));
            if (j->full)
                fulfill_ready(ds);
        } else {
            ld__file_synchronizer_lost(ds->sync); /* a full set next, not changes */
            ld__store_synchronizer_lost(ds->sync);
        }
        job_free(j);
        request_next(ds);
    }
    ld__ds_release(ds);
}

static void op_done(ld_future *f, void *arg)
{
    struct ld__ds_job *j = arg;
    (void)f;
    if (--j->left == 0)
        job_done(j);
}

/* Hands the job's operation `f` (a new reference, maybe NULL) to the job. */
static void add_op(struct ld__ds_job *j, ld_future *f)
{
    if (!f)
        f = ld_future_rejected(j->ds->base, LD_ENOMEM, NULL);
    j->ops[j->n++] = f;
    j->left++;
    if (!f || ld_future_on_complete(ld_future_ref(f), op_done, j) != 0)
        j->left--; /* read as it is when the job is done */
}

/* Issues the store operations of a full change set whose data is built
 * (NULL: no memory), and lets the job wait for them. */
static void issue_full(struct ld__ds_job *j)
{
    ld_data_system *ds = j->ds;
    add_op(j, j->data ? ld_update_sink_init(ds->sink, j->data) : NULL);
    if (--j->left == 0)
        job_done(j);
}

/* Builds the data of a full change set, a slice of the loop's time at a
 * time (jansson needs about half a microsecond an item), then issues it. */
static void build(struct ld__ds_job *j)
{
    ld_data_system *ds = j->ds;
    size_t count = ld_fdv2_change_set_count(j->cs);
    int64_t deadline = ld__now_ns() + LD__DS_SLICE_NS;
    while (j->data && j->built < count) {
        if (add_to_data(j->by, ld_fdv2_change_set_get(j->cs, j->built++)) != 0) {
            json_decref(j->data);
            j->data = NULL;
            break;
        }
        static const struct timeval zero = {0, 0};
        if (j->built % LD__DS_CLOCK_EVERY == 0 && j->built < count && ld__now_ns() >= deadline &&
            event_add(ds->builder, &zero) == 0) {
            ds->building = j; /* goes on from the loop */
            return;
        }
    }
    issue_full(j);
}

/* Gives up a job whose data is being built (closed or freed meanwhile):
 * it ends once the snapshots it asked for are complete. */
static void drop(struct ld__ds_job *j)
{
    j->dropped = true;
    if (--j->left == 0)
        job_done(j);
}

static void build_more(evutil_socket_t fd, short what, void *arg)
{
    ld_data_system *ds = arg;
    struct ld__ds_job *j = ds->building;
    (void)fd;
    (void)what;
    ds->building = NULL;
    if (ds->closing)
        drop(j);
    else
        build(j);
}

/* Applies the change set `cs` that `holder` (stolen) brought: a basis
 * (`update` NULL) or an update. */
static void apply(ld_data_system *ds, ld_future *holder, const ld_fdv2_change_set *cs,
                  const ld_fdv2_update *update)
{
    struct ld__ds_job *j = ld__calloc(1, sizeof(*j));
    int intent = ld_fdv2_change_set_intent(cs);
    size_t count = ld_fdv2_change_set_count(cs);
    size_t max = intent == LD_FDV2_INTENT_XFER_FULL ? 3 : count;
    if (j)
        j->ops = ld__calloc(max ? max : 1, sizeof(*j->ops));
    if (!j || !j->ops) {
        ld__free(j);
        ld_future_unref(holder);
        set_last_error(ds, LD_ENOMEM, NULL);
        if (update) {
            ld__file_synchronizer_lost(ds->sync);
            ld__store_synchronizer_lost(ds->sync);
            request_next(ds); /* the update is lost; the next one may fit */
        } else {
            run_initializers(ds);
        }
        return;
    }
    j->ds = ds;
    j->holder = holder;
    j->cs = cs;
    j->update = update;
    j->full = intent == LD_FDV2_INTENT_XFER_FULL;
    j->seq = ++ds->seq;
    j->left = 1; /* until every operation is issued */
    ds->refs++;
    if (j->full) {
        static const struct timeval zero = {0, 0};
        j->data = empty_data(j->by);
        if (ds->listeners.live > 0) { /* the data it replaces, for the diff */
            add_op(j, ld_store_all(ds->store, ld_kind_segments()));
            add_op(j, ld_store_all(ds->store, ld_kind_features()));
        }
        /* building waits for the next turn of the loop: reading the
         * snapshots may have taken a while (the memory store builds a new
         * snapshot of all its items after writes) */
        if (event_add(ds->builder, &zero) == 0)
            ds->building = j;
        else
            build(j);
        return;
    }
    if (intent == LD_FDV2_INTENT_XFER_CHANGES) {
        for (size_t i = 0; i < count; i++) {
            const ld_fdv2_change *c = ld_fdv2_change_set_get(cs, i);
            if (ld_fdv2_change_action(c) == LD_FDV2_ACTION_PUT) {
                json_t *item = item_of(c);
                add_op(j,
                       item ? ld_update_sink_upsert(ds->sink, ld_fdv2_change_kind(c), item) : NULL);
                json_decref(item);
            } else {
                add_op(j, ld_update_sink_delete(ds->sink, ld_fdv2_change_kind(c),
                                                ld_fdv2_change_key(c), ld_fdv2_change_version(c)));
            }
        }
    }
    if (--j->left == 0)
        job_done(j);
}

/* ------------------------------------------------------------------------- */
/* The initializers                                                          */

static void fetched(ld_future *f, void *arg)
{
    ld_data_system *ds = arg;
    if (!stopped(ds)) {
        const ld_fdv2_basis *basis = ld_fdv2_future_basis(f);
        if (basis) {
            apply(ds, ld_future_ref(f), ld_fdv2_basis_change_set(basis), NULL);
        } else {
            const char *msg = ld_future_is_rejected(f) ? ld_future_error_message(f)
                                                       : "the initializer gave no basis";
            set_last_error(ds, ld_future_is_rejected(f) ? ld_future_error(f) : LD_EINVAL, msg);
            report(ds, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN,
                   ds->last_msg);
            run_initializers(ds);
        }
    }
    ld__ds_release(ds);
}

/* Fetches from the next initializer, or goes on to the synchronizer. */
static void run_initializers(ld_data_system *ds)
{
    if (ds->next_init >= ds->n_inits) {
        sources_done(ds);
        return;
    }
    ld_future *f = ld_initializer_fetch(ds->inits[ds->next_init++]);
    ds->refs++;
    if (ld_future_on_complete(f, fetched, ds) != 0) {
        ds->refs--;
        set_last_error(ds, LD_ENOMEM, NULL);
        run_initializers(ds);
    }
}

/* The initializers are behind us (one brought data, or all failed). */
static void sources_done(ld_data_system *ds)
{
    if (ds->sync) {
        request_next(ds);
        return;
    }
    if (!ds->has_data) {
        if (!ds->last_msg && ds->last_code == 0)
            set_last_error(ds, LD_ECLOSED, "the data system has no data source");
        reject_ready(ds, ds->last_code ? ds->last_code : LD_ENOMEM, ds->last_msg);
        report(ds, LD_DATA_SOURCE_STATE_OFF, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, ds->last_msg);
    }
}

/* ------------------------------------------------------------------------- */
/* The synchronizer                                                          */

static void got_update(ld_future *f, void *arg)
{
    ld_data_system *ds = arg;
    if (stopped(ds)) {
        ld__ds_release(ds);
        return;
    }
    const ld_fdv2_update *u = ld_fdv2_future_update(f);
    int code = ld_future_error(f);
    if (u) {
        ds->delay_ms = ds->initial_delay_ms;
        const ld_fdv2_change_set *cs = ld_fdv2_update_change_set(u);
        if (cs) {
            apply(ds, ld_future_ref(f), cs, u);
        } else {
            const ld_data_source_error_info *e = ld_fdv2_update_error(u);
            if (e) /* what ready says if the synchronizer ends before data came */
                set_last_error(ds,
                               e->kind == LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA ? LD_EPARSE
                               : e->kind == LD_DATA_SOURCE_ERROR_KIND_STORE      ? LD_ESTORE
                                                                                 : LD_EIO,
                               e->message);
            ld_update_sink_update_status(ds->sink, ld_fdv2_update_state(u), e);
            request_next(ds);
        }
    } else if (code == LD_ECLOSED) { /* the synchronizer has ended */
        if (!ds->has_data) {
            if (ds->last_code == 0)
                set_last_error(ds, LD_ECLOSED, "the synchronizer ended before bringing data");
            reject_ready(ds, ds->last_code ? ds->last_code : LD_ECLOSED, ds->last_msg);
        }
        report(ds, LD_DATA_SOURCE_STATE_OFF, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, NULL);
    } else {
        if (code == 0) /* fulfilled with something that is no update */
            code = LD_EINVAL;
        set_last_error(ds, code,
                       code == LD_EINVAL && !ld_future_is_rejected(f)
                           ? "the synchronizer gave no update"
                           : ld_future_error_message(f));
        report(ds, LD_DATA_SOURCE_STATE_INTERRUPTED, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN,
               ds->last_msg);
        struct timeval tv = {(time_t)(ds->delay_ms / 1000),
                             (suseconds_t)(ds->delay_ms % 1000) * 1000};
        ds->delay_ms = ds->delay_ms * 2 > ds->max_delay_ms ? ds->max_delay_ms : ds->delay_ms * 2;
        if (event_add(ds->timer, &tv) == 0)
            ds->refs++;
        else
            request_next(ds);
    }
    ld__ds_release(ds);
}

static void request_next(ld_data_system *ds)
{
    ld_future *f = ld_synchronizer_next(ds->sync);
    ds->refs++;
    if (ld_future_on_complete(f, got_update, ds) != 0) {
        /* no memory: try again after the delay */
        struct timeval tv = {(time_t)(ds->delay_ms / 1000),
                             (suseconds_t)(ds->delay_ms % 1000) * 1000};
        if (event_add(ds->timer, &tv) != 0)
            ds->refs--;
    }
}

/* The timer: the start, then each retry of the synchronizer. */
static void timer_fired(evutil_socket_t fd, short what, void *arg)
{
    ld_data_system *ds = arg;
    (void)fd;
    (void)what;
    if (!stopped(ds)) {
        if (!ds->started) {
            ds->started = true;
            run_initializers(ds);
        } else {
            request_next(ds);
        }
    }
    ld__ds_release(ds);
}

/* ------------------------------------------------------------------------- */
/* The API                                                                   */

static void free_sources(ld_initializer *const *inits, size_t n, ld_synchronizer *sync)
{
    for (size_t i = 0; i < n; i++)
        ld_initializer_free(inits ? inits[i] : NULL);
    ld_synchronizer_free(sync);
}

/* The store says it lost data (a cache whose database came back without
 * it, and a ttl): the synchronizer sends everything again. */
static void on_store_status(ld_store *store, const ld_store_status *st, void *arg)
{
    (void)store;
    ld_data_system *ds = arg;
    if (!ds->freed && !ds->closing && st->available && st->needs_refresh && ds->sync)
        ld_synchronizer_refresh(ds->sync);
}

ld_data_system *ld_data_system_new(struct event_base *base, ld_store *store,
                                   ld_initializer *const *initializers, size_t n,
                                   ld_synchronizer *synchronizer)
{
    bool bad = !base || !store || (n > 0 && !initializers);
    for (size_t i = 0; !bad && i < n; i++)
        bad = initializers[i] == NULL;
    ld_data_system *ds = bad ? NULL : ld__calloc(1, sizeof(*ds));
    if (!ds)
        goto fail;
    ds->base = base;
    ds->store = store;
    ds->refs = 1;
    ds->initial_delay_ms = ds->delay_ms = DEFAULT_INITIAL_DELAY_MS;
    ds->max_delay_ms = DEFAULT_MAX_DELAY_MS;
    ds->inits = ld__calloc(n ? n : 1, sizeof(*ds->inits));
    ds->sink = ld_store_sink_new(store);
    ds->ready = ld_future_new(base);
    ds->timer = event_new(base, -1, 0, timer_fired, ds);
    ds->slicer = event_new(base, -1, 0, ld__ds_slice, ds);
    ds->builder = event_new(base, -1, 0, build_more, ds);
    static const struct timeval zero = {0, 0};
    if (!ds->inits || !ds->sink || !ds->ready || !ds->timer || !ds->slicer || !ds->builder ||
        event_add(ds->timer, &zero) != 0) {
        ld_update_sink_free(ds->sink);
        ld_future_unref(ds->ready);
        ld__ds_release(ds);
        goto fail;
    }
    ds->refs++; /* the start */
    if (n)
        memcpy(ds->inits, initializers, n * sizeof(*ds->inits));
    ds->n_inits = n;
    ds->sync = synchronizer;
    /* without memory for it, a store that loses data is not refilled
     * until the data source sends everything of itself */
    ds->store_listener = ld_store_add_status_listener(store, on_store_status, ds);
    return ds;
fail:
    free_sources(initializers, n, synchronizer);
    return NULL;
}

int ld_data_system_set_retry_delay(ld_data_system *ds, int64_t initial_ms, int64_t max_ms)
{
    if (!ds || initial_ms < 0 || max_ms < initial_ms)
        return LD_EINVAL;
    ds->initial_delay_ms = ds->delay_ms = initial_ms;
    ds->max_delay_ms = max_ms;
    return 0;
}

ld_future *ld_data_system_ready(ld_data_system *ds)
{
    return ds ? ld_future_ref(ds->ready) : NULL;
}

int ld_data_system_status(const ld_data_system *ds, ld_data_source_status *out)
{
    if (!ds || !out)
        return LD_EINVAL;
    return ld_store_sink_status(ds->sink, out);
}

ld_store *ld_data_system_store(const ld_data_system *ds)
{
    return ds ? ds->store : NULL;
}

static void status_trampoline(ld_update_sink *sink, const ld_data_source_status *status, void *arg)
{
    struct ld__ds_status_listener *l = arg;
    (void)sink;
    l->fn(l->ds, status, l->arg);
}

int64_t ld_data_system_add_status_listener(ld_data_system *ds, ld_data_system_status_fn fn,
                                           void *arg)
{
    if (!ds || !fn)
        return LD_EINVAL;
    struct ld__ds_status_listener *l = ld__malloc(sizeof(*l));
    if (!l)
        return LD_ENOMEM;
    l->ds = ds;
    l->fn = fn;
    l->arg = arg;
    l->id = ld_store_sink_add_listener(ds->sink, status_trampoline, l);
    if (l->id < 0) {
        int64_t rc = l->id;
        ld__free(l);
        return rc;
    }
    l->next = ds->status_listeners;
    ds->status_listeners = l;
    return l->id;
}

int ld_data_system_remove_status_listener(ld_data_system *ds, int64_t id)
{
    if (!ds)
        return LD_EINVAL;
    for (struct ld__ds_status_listener **link = &ds->status_listeners; *link;
         link = &(*link)->next) {
        struct ld__ds_status_listener *l = *link;
        if (l->id == id) {
            ld_store_sink_remove_listener(ds->sink, id);
            *link = l->next;
            ld__free(l);
            return 0;
        }
    }
    return LD_EINVAL;
}

ld_future *ld_data_system_close(ld_data_system *ds)
{
    if (!ds)
        return NULL;
    bool first = !ds->closing;
    ds->closing = true;
    if (first) {
        if (event_pending(ds->timer, EV_TIMEOUT, NULL)) {
            event_del(ds->timer);
            ld__ds_release(ds);
        }
        reject_ready(ds, LD_ECLOSED, "the data system was closed");
        report(ds, LD_DATA_SOURCE_STATE_OFF, LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, NULL);
    }
    size_t n = ds->n_inits + (ds->sync ? 1 : 0);
    ld_future *stack[8];
    ld_future **stops = n <= 8 ? stack : ld__calloc(n, sizeof(*stops));
    if (!stops)
        return ld_future_rejected(ds->base, LD_ENOMEM, NULL);
    size_t k = 0;
    for (size_t i = 0; i < ds->n_inits; i++)
        stops[k++] = ld_initializer_stop(ds->inits[i]);
    if (ds->sync)
        stops[k++] = ld_synchronizer_stop(ds->sync);
    ld_future *all = ld_future_all(ds->base, stops, n);
    if (stops != stack)
        ld__free(stops);
    return all ? all : ld_future_rejected(ds->base, LD_ENOMEM, NULL);
}

void ld_data_system_free(ld_data_system *ds)
{
    if (!ds)
        return;
    ds->freed = true;
    if (ds->store_listener > 0)
        ld_store_remove_status_listener(ds->store, ds->store_listener);
    ds->store_listener = 0;
    if (event_pending(ds->timer, EV_TIMEOUT, NULL)) {
        event_del(ds->timer);
        ds->refs--; /* never the last: the owner's is still held */
    }
    if (ds->slicing) {
        event_del(ds->slicer);
        ds->slicing = false;
        ds->refs--;
    }
    if (ds->building) {
        event_del(ds->builder);
        struct ld__ds_job *j = ds->building;
        ds->building = NULL;
        drop(j);
    }
    for (size_t i = 0; i < ds->n_inits; i++) {
        if (!ds->closing)
            ld_future_unref(ld_initializer_stop(ds->inits[i]));
        ld_initializer_free(ds->inits[i]);
    }
    if (ds->sync) {
        if (!ds->closing)
            ld_future_unref(ld_synchronizer_stop(ds->sync));
        ld_synchronizer_free(ds->sync);
    }
    ds->n_inits = 0;
    ds->sync = NULL;
    for (struct ld__ds_status_listener *l = ds->status_listeners, *next; l; l = next) {
        next = l->next;
        ld__free(l);
    }
    ds->status_listeners = NULL;
    ld_update_sink_free(ds->sink);
    ds->sink = NULL;
    reject_ready(ds, LD_ECANCELED, "the data system was freed");
    ld_future_unref(ds->ready);
    ds->ready = NULL;
    ld__ds_release(ds);
}
