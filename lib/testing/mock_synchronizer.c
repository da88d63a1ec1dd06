/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the mock synchronizer (testing.h). Two queues meet
 * here: the script (what the test pushed, not yielded yet) and the nexts
 * waiting for it. Whenever one grows, pump() pairs them off, oldest first.
 */
#include <stdlib.h>
#include <string.h>

#include <ldasync/testing.h>

#include "testing-internal.h"

enum item_kind { ITEM_UPDATE, ITEM_ERROR, ITEM_END };

struct item {
    struct ld__fifo_node node; /* in the script */
    enum item_kind kind;
    ld_fdv2_update *update; /* ITEM_UPDATE */
    int code;               /* ITEM_ERROR */
};

struct mock {
    struct ld__mock head;
    char *name;
    struct ld__fifo script;
    struct ld__waiters waiting;
    bool end_pushed;  /* nothing more may be pushed */
    bool end_reached; /* every next rejects with LD_ECLOSED */
    bool stopped;
    int nexts;
};

static const struct ld_synchronizer_ops mock_ops;

static struct mock *mock_of(const ld_synchronizer *sync)
{
    return ld__mock_find(sync, &mock_ops);
}

static const char *mock_name(void *impl)
{
    const struct mock *m = impl;
    return m->name;
}

static void reject_ended(ld_future *out)
{
    ld_future_reject(out, LD_ECLOSED, "mock synchronizer: the script has ended");
}

/* Completes `out` (stolen) with `it` (freed). */
static void yield(struct mock *m, ld_future *out, struct item *it)
{
    switch (it->kind) {
    case ITEM_UPDATE:
        ld_fdv2_fulfill_update(out, it->update);
        break;
    case ITEM_ERROR:
        ld_future_reject(out, it->code, "mock synchronizer: scripted error");
        break;
    case ITEM_END:
        m->end_reached = true;
        reject_ended(out);
        break;
    }
    ld_future_unref(out);
    ld__free(it);
}

static struct item *pop_item(struct mock *m)
{
    return (struct item *)ld__fifo_pop(&m->script);
}

/* Answers the waiting nexts, oldest first, while there is something to
 * answer them with. A waiting next the front layer has cancelled takes
 * nothing from the script. */
static void pump(struct mock *m)
{
    while (m->waiting.q.head && (m->script.head || m->end_reached)) {
        ld_future *out = ld__waiters_pop(&m->waiting);
        if (!ld_future_is_pending(out)) {
            ld_future_unref(out);
        } else if (m->end_reached) {
            reject_ended(out);
            ld_future_unref(out);
        } else {
            yield(m, out, pop_item(m));
        }
    }
}

static void mock_next(void *impl, ld_future *out)
{
    struct mock *m = impl;
    m->nexts++;
    if (ld__waiters_push(&m->waiting, out) != 0) {
        ld_future_reject(out, LD_ENOMEM, "mock synchronizer: out of memory");
        ld_future_unref(out);
        return;
    }
    pump(m);
}

static void mock_stop(void *impl, ld_future *out)
{
    struct mock *m = impl;
    m->stopped = true;
    ld__waiters_drop(&m->waiting); /* the front layer has rejected them already */
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void release(void *impl)
{
    struct mock *m = impl;
    ld__waiters_drop(&m->waiting);
    struct item *it;
    while ((it = pop_item(m)) != NULL) {
        ld_fdv2_update_free(it->update);
        ld__free(it);
    }
    ld__free(m->name);
}

static const struct ld_synchronizer_ops mock_ops = {
    .version = LD_SYNCHRONIZER_OPS_VERSION,
    .name = mock_name,
    .next = mock_next,
    .stop = mock_stop,
    .free = ld__mock_free,
};

ld_synchronizer *ld_mock_synchronizer_new(struct event_base *base, const char *name)
{
    struct mock *m = ld__mock_alloc(base, sizeof(*m), &mock_ops, release);
    if (!m)
        return NULL;
    m->name = ld__strdup(name ? name : "mock");
    return ld__mock_finish(m, m->name ? ld_synchronizer_new(base, &mock_ops, m) : NULL);
}

/* Appends an item to the script of `sync` and answers who waits. Steals
 * `update` on every path. */
static int push(ld_synchronizer *sync, enum item_kind kind, ld_fdv2_update *update, int code)
{
    struct mock *m = mock_of(sync);
    int rc = 0;
    struct item *it = NULL;
    if (!m || (kind == ITEM_UPDATE && !update))
        rc = LD_EINVAL;
    else if (m->end_pushed || m->stopped)
        rc = LD_ECLOSED;
    else if (!(it = ld__malloc(sizeof(*it))))
        rc = LD_ENOMEM;
    if (rc != 0) {
        ld_fdv2_update_free(update);
        return rc;
    }
    it->kind = kind;
    it->update = update;
    it->code = code;
    ld__fifo_push(&m->script, &it->node);
    m->end_pushed = kind == ITEM_END;
    pump(m);
    return 0;
}

int ld_mock_synchronizer_push_update(ld_synchronizer *sync, ld_fdv2_update *update)
{
    return push(sync, ITEM_UPDATE, update, 0);
}

int ld_mock_synchronizer_push_error(ld_synchronizer *sync, int code)
{
    if (code >= 0)
        return LD_EINVAL;
    return push(sync, code == LD_ECLOSED ? ITEM_END : ITEM_ERROR, NULL, code);
}

int ld_mock_synchronizer_end(ld_synchronizer *sync)
{
    return push(sync, ITEM_END, NULL, 0);
}

int ld_mock_synchronizer_next_count(const ld_synchronizer *sync)
{
    const struct mock *m = mock_of(sync);
    return m ? m->nexts : LD_EINVAL;
}

int ld_mock_synchronizer_stopped(const ld_synchronizer *sync)
{
    const struct mock *m = mock_of(sync);
    return m ? m->stopped : LD_EINVAL;
}
