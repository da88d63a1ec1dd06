/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Large items, compiled off the loop (eval-internal.h): a flag or segment
 * of more than ld__cache.big values (whose compile would hold the loop for
 * long: docs/performance.md) is compiled on the evaluator's worker
 * (core-internal.h, "Workers": its own thread when libevent threading is
 * on, else a loop callback), made at the first such item and freed with
 * the evaluator. Evaluations that need the item meanwhile wait for the
 * compile's future, one compile for all of them; its first callback puts
 * the item into the cache, then theirs go on.
 *
 * What the worker's thread touches: the item's JSON, read only (the store
 * never modifies an item; the loop holds the reference to it, taken before
 * and dropped after), the compile's own memory, and the references of
 * values inside the item that `in` clauses keep, counted atomically
 * (ld__json_incref()). Nothing of the evaluator's.
 */
#include <stdlib.h>

#include <ldasync/error.h>

#include "core/core-internal.h"
#include "eval/eval-internal.h"

#define BIG_DEFAULT 50000

size_t ld__compile_big(void)
{
    const char *env = getenv("LDASYNC_EVAL_BIG_ITEM");
    char *end;
    unsigned long long n = env ? strtoull(env, &end, 10) : 0;
    return env && *env && !*end && n > 0 && n <= SIZE_MAX ? (size_t)n : BIG_DEFAULT;
}

/* On the worker: the item, into c->item; c itself as the job's value. */
static void *compile_run(const struct ld__work *work, void *arg, int *code)
{
    struct ld__compile *c = arg;
    ld__compile_work = work;
    *code = ld__item_compile_off((enum ld__item_type)c->type, c->json, &c->item);
    ld__compile_work = NULL;
    return *code == 0 ? c : NULL;
}

static void compile_unlink(struct ld__compile *c)
{
    if (!c->cache)
        return;
    for (struct ld__compile **p = &c->cache->compiles; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    c->cache->ncompiling--;
    c->cache = NULL;
}

/* On the loop, the compile's first callback: the item goes into the cache
 * (it takes the reference to its JSON), before the waiting evaluations
 * look for it there. */
static void compile_done(ld_future *f, void *arg)
{
    struct ld__compile *c = arg;
    struct ld__cache *cache = c->cache;
    struct ld__item *it = c->item;
    compile_unlink(c);
    if (it && ld_future_is_fulfilled(f) && cache) {
        it->json = c->json;
        c->json = NULL;
        if (ld__cache_put(cache, it) == 0)
            cache->ncompiled++;
    } else {
        ld__item_unref(it);
    }
    json_decref(c->json);
    ld_future_unref(c->out);
    ld__free(c);
}

struct ld__compile *ld__compile_start(struct ld__cache *c, enum ld__item_type type, json_t *json)
{
    if (!c->worker && !(c->worker = ld__worker_new(c->base)))
        return NULL;
    struct ld__compile *k = ld__calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->type = (uint8_t)type;
    k->json = json_incref(json); /* before the worker reads it */
    k->out = ld__worker_submit(c->worker, compile_run, k, NULL);
    if (!k->out) {
        json_decref(k->json);
        ld__free(k);
        return NULL;
    }
    if (ld_future_on_complete(ld_future_ref(k->out), compile_done, k) != 0) {
        /* The job may be running on `k`: it is told it is no longer
         * wanted, and `k` waits among the orphans for the worker's end. */
        ld_future_cancel(k->out);
        ld_future_unref(k->out);
        k->out = NULL;
        k->next = c->orphans;
        c->orphans = k;
        return NULL;
    }
    k->cache = c;
    k->next = c->compiles;
    c->compiles = k;
    c->ncompiling++;
    return k;
}

void ld__compile_free_all(struct ld__cache *c)
{
    while (c->compiles)
        compile_unlink(c->compiles);
    ld__worker_free(c->worker); /* a compile under way gives up; joined */
    c->worker = NULL;
    while (c->orphans) {
        struct ld__compile *k = c->orphans;
        c->orphans = k->next;
        ld__item_unref(k->item);
        json_decref(k->json);
        ld__free(k);
    }
}
