/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: a FIFO of waiting futures (testing-internal.h).
 */
#include <stdlib.h>

#include <ldasync/error.h>

#include "testing-internal.h"

struct ld__waiter {
    struct ld__waiter *next;
    ld_future *out;
};

int ld__waiters_push(struct ld__waiters *q, ld_future *out)
{
    struct ld__waiter *w = ld__malloc(sizeof(*w));
    if (!w)
        return LD_ENOMEM;
    w->next = NULL;
    w->out = out;
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    return 0;
}

ld_future *ld__waiters_pop(struct ld__waiters *q)
{
    struct ld__waiter *w = q->head;
    if (!w)
        return NULL;
    ld_future *out = w->out;
    q->head = w->next;
    if (!q->head)
        q->tail = NULL;
    ld__free(w);
    return out;
}

void ld__waiters_drop(struct ld__waiters *q)
{
    ld_future *out;
    while ((out = ld__waiters_pop(q)) != NULL)
        ld_future_unref(out);
}
