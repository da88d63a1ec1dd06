/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the data system's change listeners (data_system.h), and the
 * delivery of the notes of applied change sets to them, a slice of about a
 * millisecond of the loop at a time (data_system.c applies the change sets
 * and queues their notes).
 */
#include <event2/event.h>
#include <string.h>
#include <time.h>

#include <ldasync/data_system.h>
#include <ldasync/error.h>

#include "core/core-internal.h"
#include "sources/sources-internal.h"

void ld__ds_note_free(struct ld__ds_note *n)
{
    ld_future_unref(n->holder);
    ld__free(n->applied);
    json_decref(n->old[0]);
    json_decref(n->old[1]);
    json_decref(n->data);
    ld__free(n);
}

/* ------------------------------------------------------------------------- */
/* Change listeners and the delivery of notes                                */

/* The change function of listener `l` (stored as an ld__listener_fn). */
static ld_data_system_change_fn change_fn(const struct ld__listener *l)
{
    return (ld_data_system_change_fn)l->fn;
}

/* Calls the listeners that hear note `seq` with one change. */
static void emit(ld_data_system *ds, uint64_t seq, const ld_kind *kind, const char *key,
                 int64_t version, const json_t *item)
{
    for (struct ld__listener *l = ds->listeners.head; l && !ds->freed; l = l->next)
        if (l->fn && l->after < seq)
            change_fn(l)(ds, kind, key, version, item, l->arg);
}

const ld_kind *ld__ds_kind_of(int k)
{
    return k == LD__DS_SEGMENTS ? ld_kind_segments() : ld_kind_features();
}

static int64_t version_of(const json_t *item)
{
    return json_integer_value(json_object_get(item, "version"));
}

static bool is_tombstone(const json_t *item)
{
    return json_is_true(json_object_get(item, "deleted"));
}

/* One step of a diff: one item looked at. @return false when done. */
static bool diff_step(ld_data_system *ds, struct ld__ds_note *n)
{
    while (n->kind < 2) {
        const char *ns = ld_kind_namespace(ld__ds_kind_of(n->kind));
        json_t *fresh = json_object_get(n->data, ns);
        json_t *old = n->old[n->kind];
        json_t *from = n->deletes ? old : fresh;
        if (!n->iter)
            n->iter = json_object_iter(from);
        else
            n->iter = json_object_iter_next(from, n->iter);
        if (!n->iter) {
            if (n->deletes)
                n->kind++;
            n->deletes = !n->deletes;
            continue;
        }
        const char *key = json_object_iter_key(n->iter);
        json_t *item = json_object_iter_value(n->iter);
        if (n->deletes) {
            json_t *now = json_object_get(fresh, key);
            int64_t v = version_of(item);
            if (!now) /* above the item's version, which may be the greatest */
                emit(ds, n->seq, ld__ds_kind_of(n->kind), key, v < INT64_MAX ? v + 1 : v, NULL);
        } else {
            json_t *was = json_object_get(old, key);
            if (is_tombstone(item)) {
                if (was)
                    emit(ds, n->seq, ld__ds_kind_of(n->kind), key, version_of(item), NULL);
            } else if (!was || (was != item &&
                                (version_of(was) != version_of(item) || !json_equal(was, item)))) {
                emit(ds, n->seq, ld__ds_kind_of(n->kind), key, version_of(item), item);
            }
        }
        return true;
    }
    return false;
}

/* One step of a change set's note. @return false when done. */
static bool changes_step(ld_data_system *ds, struct ld__ds_note *n)
{
    size_t count = ld_fdv2_change_set_count(n->cs);
    while (n->i < count && !n->applied[n->i])
        n->i++;
    if (n->i >= count)
        return false;
    const ld_fdv2_change *c = ld_fdv2_change_set_get(n->cs, n->i++);
    json_t *item = ld_fdv2_change_object(c); /* NULL for a delete */
    emit(ds, n->seq, ld_fdv2_change_kind(c), ld_fdv2_change_key(c), ld_fdv2_change_version(c),
         item);
    return true;
}

static void schedule_slice(ld_data_system *ds)
{
    static const struct timeval zero = {0, 0};
    if (!ds->slicing && ds->notes && !ds->freed && event_add(ds->slicer, &zero) == 0) {
        ds->slicing = true;
        ds->refs++;
    }
}

void ld__ds_slice(evutil_socket_t fd, short what, void *arg)
{
    ld_data_system *ds = arg;
    (void)fd;
    (void)what;
    ds->slicing = false;
    ds->delivering++;
    int64_t deadline = ld__now_ns() + LD__DS_SLICE_NS;
    unsigned steps = 0;
    while (ds->notes && !ds->freed) {
        struct ld__ds_note *n = ds->notes;
        bool more = n->diff ? diff_step(ds, n) : changes_step(ds, n);
        if (ds->freed)
            break;
        if (!more) {
            ds->notes = n->next;
            if (!ds->notes)
                ds->notes_tail = NULL;
            ld__ds_note_free(n);
        }
        if (++steps % LD__DS_CLOCK_EVERY == 0 && ld__now_ns() >= deadline)
            break;
    }
    if (--ds->delivering == 0 && !ds->freed)
        ld__listeners_sweep(&ds->listeners);
    schedule_slice(ds);
    ld__ds_release(ds);
}

void ld__ds_queue_note(ld_data_system *ds, struct ld__ds_note *n)
{
    n->next = NULL;
    if (ds->notes_tail)
        ds->notes_tail->next = n;
    else
        ds->notes = n;
    ds->notes_tail = n;
    schedule_slice(ds);
}

/* ------------------------------------------------------------------------- */
/* The change listeners' API                                                 */

int64_t ld_data_system_add_change_listener(ld_data_system *ds, ld_data_system_change_fn fn,
                                           void *arg)
{
    if (!ds || !fn)
        return LD_EINVAL;
    return ld__listeners_add(&ds->listeners, (ld__listener_fn)fn, arg, ds->seq);
}

int ld_data_system_remove_change_listener(ld_data_system *ds, int64_t id)
{
    if (!ds)
        return LD_EINVAL;
    return ld__listeners_remove(&ds->listeners, id, ds->delivering == 0);
}
