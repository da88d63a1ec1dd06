/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the memory store's large init, over several passes of the loop
 * (memory_store.c loads a small one within the call). It reads the data
 * set a slice at a time into new tables (store-internal.h), swaps them in
 * after the last slice, and then lets go of the data set a slice per pass.
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <event2/event.h>

#include <ldasync/error.h>
#include <ldasync/store.h>

#include "core/core-internal.h"
#include "model/model-internal.h"
#include "store/store-internal.h"

/* An init of more items than a slice (LDASYNC_STORE_INIT_SLICE, 2048 by
 * default) clears the new tables and then validates and loads items into
 * them over several passes of the loop, each pass for about PASS_NS and
 * `slice` items at most, and swaps them in after the last one, as one init
 * in one pass does: readers see the old data or the new, never a mix, and
 * the store is initialized only once the whole set is in. Meanwhile every operation
 * waits for it (the _now members say LD_EBUSY, and the asynchronous ones
 * queue what they are given, struct deferred), and runs in issue order once
 * it is over. */
struct load {
    json_t *data; /* referenced */
    ld_future *out;
    struct table fresh[NKINDS];
    void *ns;               /* the namespace being read, an iterator of data */
    void *at;               /* the next item in it, or NULL */
    const ld_kind *kind;    /* of that namespace, or NULL: validated, not kept */
    struct event *ev;       /* the next slice */
    size_t cleared[NKINDS]; /* slots of the new tables cleared so far */
    bool snap_made[NKINDS]; /* the new table's snapshot of all was begun */
};

/* The time a pass of the loop spends on a large init, about: a pass stops
 * at the first check after it. A count alone did not bound a pass: the
 * same 2048 items took from 1.5 ms to over 6 ms (the first slices, whose
 * items are cold in the cache, and more on a loaded machine). */
#define PASS_NS 1000000
/* Items (or pairs let go of) between two looks at the clock. */
#define CHECK_EVERY 32
/* Slots cleared between two looks at the clock (64 KiB). */
#define CLEAR_CHUNK 1024

/* The shape ld__data_walk checks before the items: 0, or LD_EINVAL with
 * *why. */
static int data_shape(const json_t *all_data, const char **why)
{
    const char *ns;
    json_t *coll;
    if (!json_is_object(all_data)) {
        *why = "all_data must be a JSON object of namespaces";
        return LD_EINVAL;
    }
    json_object_foreach((json_t *)all_data, ns, coll)
    {
        if (!json_is_object(coll)) {
            *why = "all_data: each namespace must map to an object of items";
            return LD_EINVAL;
        }
    }
    return 0;
}

size_t ld__mem_data_items(const json_t *all_data)
{
    size_t n = 0;
    const char *ns;
    json_t *coll;
    json_object_foreach((json_t *)all_data, ns, coll) n += json_object_size(coll);
    return n;
}

/* Moves the load to the next item: across namespaces, skipping empty
 * ones. */
static void load_settle(struct load *l)
{
    while (!l->at && l->ns) {
        l->ns = json_object_iter_next(l->data, l->ns);
        if (l->ns) {
            l->kind = ld_kind_by_namespace(json_object_iter_key(l->ns));
            l->at = json_object_iter(json_object_iter_value(l->ns));
        }
    }
}

/* Validates and loads one item (as ld__data_walk does): 0, LD_EINVAL with
 * *why, LD_ENOMEM. */
static int load_item(struct load *l, const char **why)
{
    const char *key = json_object_iter_key(l->at);
    size_t key_len = json_object_iter_key_len(l->at);
    json_t *item = json_object_iter_value(l->at);
    l->at = json_object_iter_next(json_object_iter_value(l->ns), l->at);
    struct ld_item_info info;
    int rc = ld_item_parse(item, &info, why);
    if (rc == 0 && (strlen(info.key) != key_len || memcmp(info.key, key, key_len) != 0)) {
        *why = ld__utf8_valid(key, key_len) ? "item \"key\" differs from the key it is filed under"
                                            : "the key an item is filed under must be valid UTF-8";
        rc = LD_EINVAL;
    }
    if (rc == 0 && l->kind) {
        /* The new table's snapshot of all is made as its items come
         * (snap_write() adds each): made at the first all after the swap,
         * that of 10,000 items held the loop for several milliseconds.
         * Without memory there is none, and the first all makes it. */
        int i = kind_index(l->kind);
        if (!l->snap_made[i]) {
            l->snap_made[i] = true;
            l->fresh[i].sn.snap = json_object();
        }
        rc = ld__mem_put_fresh(l->fresh, l->kind, item, &info);
    }
    return rc;
}

static void load_free(struct load *l)
{
    for (int i = 0; i < NKINDS; i++) {
        if (l->cleared[i] > l->fresh[i].mask)
            ld__mem_table_free(&l->fresh[i]);
        else
            ld__aligned_free(l->fresh[i].slots); /* nothing in it yet */
    }
    if (l->ev)
        event_free(l->ev);
    json_decref(l->data);
    ld__free(l);
}

/* Lets go of a slice of the loaded data set, which only the store holds:
 * the pairs of its namespaces (the items are the tables' too), then it;
 * `slice` pairs at most, for about PASS_NS. */
static void drop_step(evutil_socket_t fd, short what, void *arg)
{
    struct memory *mem = arg;
    (void)fd;
    (void)what;
    int64_t end = ld__now_ns() + PASS_NS;
    size_t n = 0;
    bool more = false; /* stopped before the end */
    const char *ns;
    json_t *coll;
    json_object_foreach(mem->drop, ns, coll)
    {
        for (void *it; !more && sole(coll) && (it = json_object_iter(coll));) {
            json_object_deln(coll, json_object_iter_key(it), json_object_iter_key_len(it));
            n++;
            more = n >= mem->slice || (n % CHECK_EVERY == 0 && ld__now_ns() >= end);
        }
    }
    if (!more || event_add(mem->drop_ev, &(struct timeval){0, 0}) != 0) {
        json_decref(mem->drop);
        mem->drop = NULL;
    }
}

/* Ends the load with `rc` (0: the new tables go in). */
static void load_end(struct memory *mem, int rc, const char *why)
{
    struct load *l = mem->load;
    mem->load = NULL;
    if (rc == 0) {
        ld__mem_swap_in(mem, l->fresh);
        memset(l->fresh, 0, sizeof l->fresh);
        ld_future_fulfill(l->out);
    } else {
        ld_future_reject(l->out, rc, "%s", rc == LD_EINVAL && why ? why : ld_strerror(rc));
        for (int i = 0; i < NKINDS; i++) {
            struct table *t = &l->fresh[i];
            if (l->cleared[i] > t->mask) { /* it may hold items: a slice per pass */
                ld__mem_retire(&mem->rc, (struct garbage){NULL, t->slots, t->mask, false},
                               t->mask + 1);
                t->slots = NULL;
            }
        }
    }
    ld_future_unref(l->out);
    if (rc == 0 && !mem->drop && sole(l->data) &&
        (mem->drop_ev || (mem->drop_ev = event_new(mem->base, -1, 0, drop_step, mem))) &&
        event_add(mem->drop_ev, &(struct timeval){0, 0}) == 0) {
        mem->drop = l->data; /* its 100,000 pairs took 80 ms to free at once */
        l->data = NULL;
    }
    load_free(l);
    ld__mem_replay(mem);
}

/* Clears slots of the new tables, which are written to only once all are
 * (clearing 16 MB of fresh pages at once held the loop for tens of
 * milliseconds), CLEAR_CHUNK at a time until `end` (at least one chunk).
 * @return true once all are clear. */
static bool load_clear(struct load *l, int64_t end)
{
    for (int i = 0; i < NKINDS; i++) {
        size_t cap = l->fresh[i].mask + 1;
        while (l->cleared[i] < cap) {
            size_t done = l->cleared[i], k = cap - done < CLEAR_CHUNK ? cap - done : CLEAR_CHUNK;
            memset(&l->fresh[i].slots[done], 0, k * sizeof(struct slot));
            l->cleared[i] += k;
            if (ld__now_ns() >= end)
                return i == NKINDS - 1 && l->cleared[i] == cap;
        }
    }
    return true;
}

static void load_step(evutil_socket_t fd, short what, void *arg)
{
    struct memory *mem = arg;
    struct load *l = mem->load;
    (void)fd;
    (void)what;
    const char *why = NULL;
    int rc = 0;
    int64_t end = ld__now_ns() + PASS_NS;
    bool clear = load_clear(l, end); /* then items, in the same pass if time is left */
    for (size_t n = 0; clear && rc == 0 && l->at && n < mem->slice;) {
        rc = load_item(l, &why);
        load_settle(l);
        if (++n % CHECK_EVERY == 0 && ld__now_ns() >= end)
            break;
    }
    if (rc == 0 && (!clear || l->at) && event_add(l->ev, &(struct timeval){0, 0}) != 0)
        rc = LD_ENOMEM;
    if (rc != 0 || (clear && !l->at))
        load_end(mem, rc, why);
}

/* Its first slice runs in the next pass of the loop. */
void ld__mem_load_start(struct memory *mem, json_t *all_data, ld_future *out)
{
    struct load *l = ld__calloc(1, sizeof *l);
    const char *why = NULL;
    int rc = l ? 0 : LD_ENOMEM;
    if (rc == 0) {
        l->data = all_data;
        l->out = out;
        rc = data_shape(all_data, &why);
    }
    for (int i = 0; i < NKINDS && rc == 0; i++) {
        const json_t *coll = json_object_get(all_data, ld_kind_namespace(kind_at(i)));
        rc = ld__mem_table_alloc(&l->fresh[i], json_object_size(coll));
    }
    if (rc == 0 && !(l->ev = event_new(mem->base, -1, 0, load_step, mem)))
        rc = LD_ENOMEM;
    if (rc != 0) {
        ld_future_reject(out, rc, "%s", rc == LD_EINVAL && why ? why : ld_strerror(rc));
        ld_future_unref(out);
        if (l)
            load_free(l);
        else
            json_decref(all_data);
        return;
    }
    l->ns = json_object_iter(all_data);
    if (l->ns) {
        l->kind = ld_kind_by_namespace(json_object_iter_key(l->ns));
        l->at = json_object_iter(json_object_iter_value(l->ns));
    }
    load_settle(l);
    mem->load = l;
    if (event_add(l->ev, &(struct timeval){0, 0}) != 0) {
        mem->load = NULL;
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        load_free(l);
    }
}

void ld__mem_load_fini(struct memory *mem)
{
    if (mem->load) {
        ld_future_reject(mem->load->out, LD_ECANCELED, NULL);
        ld_future_unref(mem->load->out);
        load_free(mem->load);
        mem->load = NULL;
    }
    json_decref(mem->drop);
    mem->drop = NULL;
    if (mem->drop_ev)
        event_free(mem->drop_ev);
    mem->drop_ev = NULL;
}
