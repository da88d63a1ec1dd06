/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the event forwarder (events.h), on the events sender
 * (sender.c): payloads wait in a FIFO, bounded in bytes, and at most
 * MAX_FLYING of them are posted at once. A payload posted is an `item`
 * until its post is over; the forwarder's free leaves the items under way
 * to the callbacks of their posts (`fw` NULL), which the sender's free
 * completes.
 */
#include <string.h>
#include <strings.h>

#include <ldasync/error.h>
#include <ldasync/events.h>

#include "core/core-internal.h"
#include "events/events-internal.h"

#define MAX_FLYING 5
#define OVERHEAD 1024
#define DEFAULT_MAX (16 * 1024 * 1024)

/* The SDK's header lines passed on (events.h). */
static const char *const PASSED[] = {
    "Authorization",
    "Content-Type",
    "Content-Encoding",
    "User-Agent",
    "X-LaunchDarkly-User-Agent",
    "X-LaunchDarkly-Event-Schema",
    "X-LaunchDarkly-Payload-ID",
    "X-LaunchDarkly-Tags",
    "X-LaunchDarkly-Wrapper",
};

struct item {
    struct item *next;
    ld_event_forwarder *fw; /* NULL once the forwarder is freed */
    char *path;
    char **lines; /* one allocation, NULL-terminated */
    char *body;   /* until handed to the sender */
    size_t len;
    int64_t cost;
};

struct ld_event_forwarder {
    struct event_base *base;
    struct ld__ev_sender *s;
    int64_t max;
    struct item *head, *tail; /* waiting */
    struct item *flying;      /* being posted */
    int nflying;
    ld_event_forwarder_stats st;
    bool closed;
    ld_future **closers; /* close futures waiting for the end */
    size_t nclosers;
};

static void item_free(struct item *it)
{
    ld__free(it->path);
    ld__free(it->lines);
    ld__free(it->body);
    ld__free(it);
}

static bool passed(const char *line)
{
    for (size_t i = 0; i < sizeof PASSED / sizeof PASSED[0]; i++) {
        size_t n = strlen(PASSED[i]);
        if (strncasecmp(line, PASSED[i], n) == 0 && line[n] == ':')
            return true;
    }
    return false;
}

/* The lines of `headers` that are passed on, copied in one allocation. */
static char **lines_of(const char *const *headers)
{
    size_t n = 0, bytes = 0;
    for (size_t i = 0; headers && headers[i]; i++) {
        if (passed(headers[i])) {
            n++;
            bytes += strlen(headers[i]) + 1;
        }
    }
    char **v = ld__malloc((n + 1) * sizeof *v + bytes);
    if (!v)
        return NULL;
    char *at = (char *)(v + n + 1);
    size_t k = 0;
    for (size_t i = 0; headers && headers[i]; i++) {
        if (!passed(headers[i]))
            continue;
        size_t len = strlen(headers[i]) + 1;
        memcpy(at, headers[i], len);
        v[k++] = at;
        at += len;
    }
    v[k] = NULL;
    return v;
}

ld_event_forwarder *ld_event_forwarder_new(struct event_base *base, const ld_net_config *cfg,
                                           int64_t max_bytes)
{
    if (!base || !cfg)
        return NULL;
    ld_event_forwarder *fw = ld__calloc(1, sizeof *fw);
    if (!fw)
        return NULL;
    fw->base = base;
    fw->max = max_bytes > 0 ? max_bytes : DEFAULT_MAX;
    fw->s = ld__ev_sender_new(base, cfg, 0);
    if (!fw->s) {
        ld__free(fw);
        return NULL;
    }
    return fw;
}

/* Closed, and nothing is left: the close futures are fulfilled. */
static void maybe_closed(ld_event_forwarder *fw)
{
    if (!fw->closed || fw->head || fw->nflying)
        return;
    for (size_t i = 0; i < fw->nclosers; i++) {
        ld_future_fulfill(fw->closers[i]);
        ld_future_unref(fw->closers[i]);
    }
    ld__free(fw->closers);
    fw->closers = NULL;
    fw->nclosers = 0;
}

static void pump(ld_event_forwarder *fw);

/* An item's post is over: counted, and the next one goes. */
static void item_done(ld_future *f, void *arg)
{
    struct item *it = arg;
    ld_event_forwarder *fw = it->fw;
    if (fw) {
        for (struct item **p = &fw->flying; *p; p = &(*p)->next) {
            if (*p == it) {
                *p = it->next;
                break;
            }
        }
        fw->nflying--;
        fw->st.queued--;
        fw->st.bytes -= (uint64_t)it->cost;
        if (ld_future_is_fulfilled(f) && ld_future_bool(f))
            fw->st.forwarded++;
        else
            fw->st.dropped++;
    }
    item_free(it);
    if (fw) {
        pump(fw);
        maybe_closed(fw);
    }
}

static void pump(ld_event_forwarder *fw)
{
    while (fw->head && fw->nflying < MAX_FLYING) {
        struct item *it = fw->head;
        fw->head = it->next;
        if (!fw->head)
            fw->tail = NULL;
        it->next = fw->flying;
        fw->flying = it;
        fw->nflying++;
        ld_future *f = ld__ev_sender_send(fw->s, LD__EV_RELAY, it->path,
                                          (const char *const *)it->lines, it->body, it->len);
        it->body = NULL; /* the sender's now */
        if (ld_future_on_complete(f, item_done, it) != 0) {
            /* not heard of again (LD_ENOMEM): counted as dropped now */
            it->fw = NULL;
            fw->flying = it->next;
            fw->nflying--;
            fw->st.queued--;
            fw->st.bytes -= (uint64_t)it->cost;
            fw->st.dropped++;
            item_free(it);
        }
    }
}

int ld_event_forwarder_post(ld_event_forwarder *fw, const char *path, const char *const *headers,
                            const void *body, size_t len)
{
    if (!fw || !path || path[0] != '/' || !body || len == 0)
        return LD_EINVAL;
    if (fw->closed)
        return LD_ECLOSED;
    int64_t cost = len > (size_t)(INT64_MAX - OVERHEAD) ? INT64_MAX : (int64_t)len + OVERHEAD;
    if (cost > fw->max - (int64_t)fw->st.bytes) {
        fw->st.refused++;
        return LD_EBUSY;
    }
    struct item *it = ld__calloc(1, sizeof *it);
    if (!it)
        return LD_ENOMEM;
    it->fw = fw;
    it->path = ld__strdup(path);
    it->lines = lines_of(headers);
    it->body = ld__malloc(len);
    it->len = len;
    it->cost = cost;
    if (!it->path || !it->lines || !it->body) {
        item_free(it);
        return LD_ENOMEM;
    }
    memcpy(it->body, body, len);
    if (fw->tail)
        fw->tail->next = it;
    else
        fw->head = it;
    fw->tail = it;
    fw->st.queued++;
    fw->st.bytes += (uint64_t)cost;
    pump(fw);
    return 0;
}

int ld_event_forwarder_stats_get(const ld_event_forwarder *fw, ld_event_forwarder_stats *out)
{
    if (!fw || !out)
        return LD_EINVAL;
    *out = fw->st;
    return 0;
}

ld_future *ld_event_forwarder_close(ld_event_forwarder *fw)
{
    if (!fw)
        return NULL;
    fw->closed = true;
    ld_future *f = ld_future_new(fw->base);
    if (!f)
        return ld_future_rejected(fw->base, LD_ENOMEM, NULL);
    if (!fw->head && !fw->nflying) {
        ld_future_fulfill(f);
        return f;
    }
    ld_future **more = ld__realloc(fw->closers, (fw->nclosers + 1) * sizeof *more);
    if (!more) {
        ld_future_reject(f, LD_ENOMEM, NULL);
        return f;
    }
    fw->closers = more;
    fw->closers[fw->nclosers++] = ld_future_ref(f);
    return f;
}

void ld_event_forwarder_free(ld_event_forwarder *fw)
{
    if (!fw)
        return;
    for (struct item *it = fw->flying; it; it = it->next)
        it->fw = NULL; /* their callbacks free them */
    while (fw->head) {
        struct item *it = fw->head;
        fw->head = it->next;
        item_free(it);
    }
    ld__ev_sender_free(fw->s); /* the posts under way are rejected: item_done */
    for (size_t i = 0; i < fw->nclosers; i++) {
        ld_future_reject(fw->closers[i], LD_ECANCELED, "the event forwarder was freed");
        ld_future_unref(fw->closers[i]);
    }
    ld__free(fw->closers);
    ld__free(fw);
}
