/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: a list of listeners (store-internal.h), as the sink's status
 * listeners and the data system's change listeners use it.
 */
#include <ldasync/error.h>

#include "store/store-internal.h"

int64_t ld__listeners_add(struct ld__listeners *ls, ld__listener_fn fn, void *arg, uint64_t after)
{
    struct ld__listener *l = ld__malloc(sizeof(*l));
    if (!l)
        return LD_ENOMEM;
    l->next = NULL;
    l->id = ++ls->last_id;
    l->after = after;
    l->fn = fn;
    l->arg = arg;
    if (ls->tail)
        ls->tail->next = l;
    else
        ls->head = l;
    ls->tail = l;
    ls->live++;
    return l->id;
}

int ld__listeners_remove(struct ld__listeners *ls, int64_t id, bool sweep)
{
    for (struct ld__listener *l = ls->head; l; l = l->next) {
        if (l->id == id && l->fn) {
            l->fn = NULL;
            ls->live--;
            if (sweep)
                ld__listeners_sweep(ls);
            return 0;
        }
    }
    return LD_EINVAL;
}

void ld__listeners_sweep(struct ld__listeners *ls)
{
    struct ld__listener **link = &ls->head, *l;
    ls->tail = NULL;
    while ((l = *link) != NULL) {
        if (l->fn) {
            ls->tail = l;
            link = &l->next;
        } else {
            *link = l->next;
            ld__free(l);
        }
    }
}

void ld__listeners_free(struct ld__listeners *ls)
{
    struct ld__listener *l = ls->head;
    while (l) {
        struct ld__listener *next = l->next;
        ld__free(l);
        l = next;
    }
    *ls = (struct ld__listeners){0};
}
