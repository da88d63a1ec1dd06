/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: a synchronizer that reads another store (data_system.h,
 * ld_store_synchronizer_new()): daemon mode with the data in memory. Every
 * interval it reads the store's flags and segments (two ld_store_all()
 * calls); when the keys and versions read differ from the last update's
 * (an order-independent fingerprint of them), the next update is a full
 * transfer of what it read. A store that is not initialized yet gives no
 * update; a read that fails gives one `interrupted` update (store_error)
 * per failure streak.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>

#include <ldasync/data_system.h>
#include <ldasync/error.h>
#include <ldasync/fdv2.h>

#include "core/core-internal.h"
#include "sources/sources-internal.h"
#include "store/store-internal.h"

struct ssync {
    struct event_base *base;
    ld_store *store; /* borrowed */
    int64_t interval_ms;
    struct event *timer;
    struct ssync **reading; /* the read under way: its callback's way back
                               here, set to NULL when this is freed first */
    ld_future *next;        /* the next asked for and not answered, or NULL */
    ld_fdv2_update *ready;  /* an update made before a next asked for it */
    uint64_t fingerprint;
    bool have_fingerprint;
    bool failing; /* the last read failed (one update per streak) */
    bool stopped;
};

static void arm(struct ssync *s, int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    event_add(s->timer, &tv);
}

/* Hands `u` to the next asked for, or keeps it (replacing one kept: the
 * newest data set is the one that counts). */
static void offer(struct ssync *s, ld_fdv2_update *u)
{
    if (s->next) {
        ld_future *out = s->next;
        s->next = NULL;
        ld_fdv2_fulfill_update(out, u);
        ld_future_unref(out);
        return;
    }
    ld_fdv2_update_free(s->ready);
    s->ready = u;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

static uint64_t fingerprint_of(const json_t *flags, const json_t *segments)
{
    uint64_t sum = 0;
    const json_t *kinds[2] = {flags, segments};
    for (int k = 0; k < 2; k++) {
        const char *key;
        json_t *item;
        json_object_foreach((json_t *)kinds[k], key, item)
        {
            uint64_t h = UINT64_C(1469598103934665603) ^ (uint64_t)k;
            for (const unsigned char *p = (const unsigned char *)key; *p; p++)
                h = (h ^ *p) * UINT64_C(1099511628211);
            sum += mix(h ^ mix((uint64_t)ld_item_version(item)));
        }
        sum += mix((uint64_t)json_object_size(kinds[k]) + (uint64_t)k * 0x9e3779b97f4a7c15u);
    }
    return sum;
}

static ld_fdv2_change_set *full_transfer(const json_t *flags, const json_t *segments)
{
    ld_fdv2_change_set_builder *b = ld_fdv2_change_set_builder_new();
    if (!b || ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_FULL) != 0) {
        ld_fdv2_change_set_builder_free(b);
        return NULL;
    }
    const json_t *kinds[2] = {segments, flags};
    const ld_kind *kk[2] = {ld_kind_segments(), ld_kind_features()};
    for (int k = 0; k < 2; k++) {
        const char *key;
        json_t *item;
        json_object_foreach((json_t *)kinds[k], key, item)
        {
            if (ld_fdv2_change_set_builder_add_put(b, kk[k], key, ld_item_version(item), item) !=
                0) {
                ld_fdv2_change_set_builder_free(b);
                return NULL;
            }
        }
    }
    ld_fdv2_change_set *cs = NULL;
    ld_fdv2_change_set_builder_finish(b, NULL, &cs);
    ld_fdv2_change_set_builder_free(b);
    return cs;
}

static void read_failed(struct ssync *s, const char *why)
{
    if (s->failing)
        return;
    s->failing = true;
    ld_data_source_error_info e = {.kind = LD_DATA_SOURCE_ERROR_KIND_STORE, .message = why};
    ld_fdv2_update *u = ld_fdv2_update_new(LD_DATA_SOURCE_STATE_INTERRUPTED, NULL, &e, NULL);
    if (u)
        offer(s, u);
}

static void on_read(ld_future *f, void *arg)
{
    struct ssync **back = arg, *s = *back;
    ld__free(back);
    if (!s || s->stopped) {
        if (s)
            s->reading = NULL;
        return;
    }
    s->reading = NULL;
    ld_future *parts[3] = {ld_future_all_get(f, 0), ld_future_all_get(f, 1),
                           ld_future_all_get(f, 2)};
    if (!ld_future_is_fulfilled(f)) {
        ld_future *bad = parts[0] && ld_future_is_rejected(parts[0])   ? parts[0]
                         : parts[1] && ld_future_is_rejected(parts[1]) ? parts[1]
                                                                       : parts[2];
        read_failed(s, bad && ld_future_is_rejected(bad) ? ld_future_error_message(bad)
                                                         : ld_future_error_message(f));
    } else if (ld_future_bool(parts[2])) { /* initialized: else nothing to say yet */
        const json_t *flags = ld_future_json(parts[0]), *segments = ld_future_json(parts[1]);
        uint64_t fp = fingerprint_of(flags, segments);
        if (s->failing || !s->have_fingerprint || fp != s->fingerprint) {
            ld_fdv2_change_set *cs = full_transfer(flags, segments);
            ld_fdv2_update *u =
                cs ? ld_fdv2_update_new(LD_DATA_SOURCE_STATE_VALID, cs, NULL, NULL) : NULL;
            if (u) {
                s->fingerprint = fp;
                s->have_fingerprint = true;
                s->failing = false;
                offer(s, u);
            } /* out of memory: the next read tries again */
        }
    }
    arm(s, s->interval_ms);
}

static void start_read(struct ssync *s)
{
    if (s->reading || s->stopped)
        return;
    ld_future *fs[3] = {ld_store_all(s->store, ld_kind_features()),
                        ld_store_all(s->store, ld_kind_segments()), ld_store_initialized(s->store)};
    ld_future *all = ld_future_all(s->base, fs, 3);
    struct ssync **back = all ? ld__malloc(sizeof(*back)) : NULL;
    if (!back)
        ld_future_unref(all);
    else
        *back = s;
    if (!back || ld_future_on_complete(all, on_read, back) != 0) { /* it took `all` */
        ld__free(back);
        arm(s, s->interval_ms); /* out of memory: later */
        return;
    }
    s->reading = back;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    start_read(arg);
}

static void s_next(void *impl, ld_future *out)
{
    struct ssync *s = impl;
    if (s->ready) {
        ld_fdv2_update *u = s->ready;
        s->ready = NULL;
        ld_fdv2_fulfill_update(out, u);
        ld_future_unref(out);
        return;
    }
    ld_future_unref(s->next); /* the front layer asks one at a time */
    s->next = out;
}

static void s_stop(void *impl, ld_future *out)
{
    struct ssync *s = impl;
    s->stopped = true;
    event_del(s->timer);
    if (s->next) {
        ld_future_reject(s->next, LD_ECLOSED, NULL);
        ld_future_unref(s->next);
        s->next = NULL;
    }
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void s_free(void *impl)
{
    struct ssync *s = impl;
    if (s->next) {
        ld_future_reject(s->next, LD_ECANCELED, NULL);
        ld_future_unref(s->next);
    }
    if (s->reading)
        *s->reading = NULL; /* the read's callback finds nobody */
    ld_fdv2_update_free(s->ready);
    if (s->timer)
        event_free(s->timer);
    ld__free(s);
}

static const char *s_name(void *impl)
{
    (void)impl;
    return "store";
}

/* ld_synchronizer_refresh(): what it reads next is yielded, changed or
 * not. */
static void s_refresh(void *impl)
{
    struct ssync *s = impl;
    s->have_fingerprint = false;
}

static const struct ld_synchronizer_ops sops = {
    .version = LD_SYNCHRONIZER_OPS_VERSION,
    .name = s_name,
    .next = s_next,
    .stop = s_stop,
    .free = s_free,
    .refresh = s_refresh,
};

void ld__store_synchronizer_lost(ld_synchronizer *sync)
{
    struct ssync *s = ld__synchronizer_impl(sync, &sops);
    if (s)
        s->have_fingerprint = false;
}

ld_synchronizer *ld_store_synchronizer_new(struct event_base *base, ld_store *store,
                                           int64_t interval_ms)
{
    if (!base || !store || interval_ms <= 0)
        return NULL;
    struct ssync *s = ld__calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->base = base;
    s->store = store;
    s->interval_ms = interval_ms;
    s->timer = evtimer_new(base, on_timer, s);
    ld_synchronizer *sync = s->timer ? ld_synchronizer_new(base, &sops, s) : NULL;
    if (!sync) {
        if (s->timer)
            event_free(s->timer);
        ld__free(s);
        return NULL;
    }
    arm(s, 0); /* the first read, from the loop */
    return sync;
}
