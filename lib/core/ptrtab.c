/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: a table from pointers to pointers (core-internal.h), the
 * library's one open-addressing table keyed by address; first written for
 * ld_future_forward()'s cycle check (future_comb.c).
 */
#include <ldasync/error.h>

#include "core/core-internal.h"

static size_t slot_of(const struct ld__ptrtab *t, const void *key)
{
    uintptr_t h = (uintptr_t)key >> 4;
    h *= (uintptr_t)0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 16) & (t->cap - 1);
}

void ld__ptrtab_clear(struct ld__ptrtab *t)
{
    ld__free(t->tab);
    t->tab = NULL;
    t->cap = 0;
    t->n = 0;
}

void *ld__ptrtab_get(const struct ld__ptrtab *t, const void *key)
{
    if (!t->n)
        return NULL;
    for (size_t i = slot_of(t, key);; i = (i + 1) & (t->cap - 1)) {
        if (t->tab[i].key == key)
            return t->tab[i].value;
        if (!t->tab[i].key)
            return NULL;
    }
}

int ld__ptrtab_put(struct ld__ptrtab *t, const void *key, void *value)
{
    if ((t->n + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        struct ld__ptrtab_entry *tab = ld__calloc(cap, sizeof(*tab));
        if (!tab)
            return LD_ENOMEM;
        struct ld__ptrtab_entry *old = t->tab;
        size_t old_cap = t->cap;
        t->tab = tab;
        t->cap = cap;
        for (size_t j = 0; j < old_cap; j++) {
            if (!old[j].key)
                continue;
            size_t i = slot_of(t, old[j].key);
            while (tab[i].key)
                i = (i + 1) & (cap - 1);
            tab[i] = old[j];
        }
        ld__free(old);
    }
    size_t i = slot_of(t, key);
    while (t->tab[i].key && t->tab[i].key != key)
        i = (i + 1) & (t->cap - 1);
    if (!t->tab[i].key)
        t->n++;
    t->tab[i].key = key;
    t->tab[i].value = value;
    return 0;
}
