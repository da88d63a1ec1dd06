/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * lib/sources/src_waiters.c: the futures a data source's callers wait on, in
 * the order they asked (sources-internal.h).
 */
#include <ldasync/error.h>

#include "core/core-internal.h"
#include "sources/sources-internal.h"

struct ld__src_waiter {
    struct ld__src_waiter *next;
    ld_future *out;
};

bool ld__src_waiters_push(struct ld__src_waiters *q, ld_future *out)
{
    struct ld__src_waiter *w = ld__malloc(sizeof(*w));
    if (!w) {
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        return false;
    }
    w->next = NULL;
    w->out = out;
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    return true;
}

ld_future *ld__src_waiters_pop(struct ld__src_waiters *q)
{
    struct ld__src_waiter *w = q->head;
    if (!w)
        return NULL;
    q->head = w->next;
    if (!q->head)
        q->tail = NULL;
    ld_future *out = w->out;
    ld__free(w);
    return out;
}

void ld__src_waiters_settle(struct ld__src_waiters *q, int code, const char *msg)
{
    ld_future *out;
    while ((out = ld__src_waiters_pop(q)) != NULL) {
        if (code && ld_future_is_pending(out))
            ld_future_reject(out, code, "%s", msg ? msg : ld_strerror(code));
        ld_future_unref(out);
    }
}
