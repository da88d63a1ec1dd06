/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: FIFOs, and the FIFO of waiting futures
 * (testing-internal.h).
 */
#include <stdlib.h>

#include <ldasync/error.h>

#include "testing-internal.h"

void ld__fifo_push(struct ld__fifo *q, struct ld__fifo_node *node)
{
    node->next = NULL;
    if (q->tail)
        q->tail->next = node;
    else
        q->head = node;
    q->tail = node;
}

struct ld__fifo_node *ld__fifo_pop(struct ld__fifo *q)
{
    struct ld__fifo_node *node = q->head;
    if (!node)
        return NULL;
    q->head = node->next;
    if (!q->head)
        q->tail = NULL;
    return node;
}

struct waiter {
    struct ld__fifo_node node;
    ld_future *out;
};

int ld__waiters_push(struct ld__waiters *q, ld_future *out)
{
    struct waiter *w = ld__malloc(sizeof(*w));
    if (!w)
        return LD_ENOMEM;
    w->out = out;
    ld__fifo_push(&q->q, &w->node);
    return 0;
}

ld_future *ld__waiters_pop(struct ld__waiters *q)
{
    struct waiter *w = (struct waiter *)ld__fifo_pop(&q->q);
    if (!w)
        return NULL;
    ld_future *out = w->out;
    ld__free(w);
    return out;
}

void ld__waiters_drop(struct ld__waiters *q)
{
    ld_future *out;
    while ((out = ld__waiters_pop(q)) != NULL)
        ld_future_unref(out);
}
