/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the store front layer (store.h). It validates input, handles the
 * closed and freed states, and completes the futures it returns in the order
 * the operations were issued, so that implementations need none of that.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <ldasync/error.h>
#include <ldasync/store.h>

#include "alloc-internal.h"
#include "front-internal.h"
#include "future-internal.h"
#include "kind-internal.h"
#include "store-internal.h"

/* The view is a member of the store: ld_store_read_only() gives its
 * address, and the view's functions find the store from it. */
struct ld_read_only_store {
    char unused;
};

struct ld_store {
    struct ld__component c; /* first: the skeleton (front-internal.h) */
    ld_read_only_store view;
    const struct ld_store_ops *ops;
    const struct ld__store_sync_ops *sync; /* or NULL */
};

ld_store *ld__store_new_sync(struct event_base *base, const struct ld_store_ops *ops,
                             const struct ld__store_sync_ops *sync, void *impl)
{
    if (!base || !ops || ops->version != LD_STORE_OPS_VERSION || !ops->get || !ops->all ||
        !ops->init || !ops->upsert || !ops->del || !ops->initialized)
        return NULL;
    ld_store *s = ld__component_new(sizeof(*s), base, impl, "store is closed");
    if (s) {
        s->ops = ops;
        s->sync = sync;
    }
    return s;
}

ld_store *ld_store_new(struct event_base *base, const struct ld_store_ops *ops, void *impl)
{
    return ld__store_new_sync(base, ops, NULL, impl);
}

/* The start and the end of every operation that goes through the
 * implementation's struct ld_store_ops (see front-internal.h). */
static ld_future *begin(ld_store *s, const char *bad, struct ld__op *op)
{
    return ld__front_begin(&s->c.front, bad, op);
}

static ld_future *finish(ld_store *s, struct ld__op *op)
{
    return ld__front_finish(&s->c.front, op);
}

static const char E_KIND[] = "kind must not be NULL";
static const char E_KEY[] = "key must be a non-empty string";
static const char E_KEY_UTF8[] = "key must be valid UTF-8";

/* NULL if kind and key are valid (with the key's length in *len), or why
 * not. */
static const char *check_key(const ld_kind *kind, const char *key, size_t *len)
{
    if (!kind)
        return E_KIND;
    if (!key || !*key)
        return E_KEY;
    *len = strlen(key);
    return ld__utf8_valid(key, *len) ? NULL : E_KEY_UTF8;
}

/* True when the implementation can answer `s`'s next operation at once:
 * it has synchronous operations, nothing is waiting before this one, and
 * the operation is valid on an open store. */
static bool now(const ld_store *s, const char *bad)
{
    return s->sync && !bad && !ld__front_closed(&s->c.front) && ld__front_idle(&s->c.front);
}

/* The caller's future `f` for a synchronous write, made before the write
 * (a write that happened is never answered with LD_ENOMEM), completed from
 * the loop with the write's answer `rc` (1: applied, 0: not, or an error). */
static ld_future *answer(ld_future *f, int rc)
{
    if (rc < 0)
        ld__later_reject_static(f, rc, NULL);
    else
        ld__later_fulfill(f, true, rc != 0);
    return f;
}

ld_future *ld_store_get(ld_store *s, const ld_kind *kind, const char *key)
{
    struct ld__op op;
    ld_future *r;
    if (!s)
        return NULL;
    size_t len;
    const char *bad = check_key(kind, key, &len);
    if (now(s, bad)) {
        r = s->sync->get(s->c.impl, ld__front_base(&s->c.front), kind, key, len);
        return r ? r : ld__front_oom(&s->c.front);
    }
    if ((r = begin(s, bad, &op)) != NULL)
        return r;
    s->ops->get(s->c.impl, kind, key, ld_future_ref(op.impl));
    return finish(s, &op);
}

ld_future *ld_store_all(ld_store *s, const ld_kind *kind)
{
    struct ld__op op;
    ld_future *r;
    if (!s)
        return NULL;
    const char *bad = kind ? NULL : E_KIND;
    if (now(s, bad)) {
        r = s->sync->all(s->c.impl, ld__front_base(&s->c.front), kind);
        return r ? r : ld__front_oom(&s->c.front);
    }
    if ((r = begin(s, bad, &op)) != NULL)
        return r;
    s->ops->all(s->c.impl, kind, ld_future_ref(op.impl));
    return finish(s, &op);
}

ld_future *ld_store_init(ld_store *s, const json_t *all_data)
{
    struct ld__op op;
    ld_future *r;
    const char *bad = NULL;
    if (!s)
        return NULL;
    if (now(s, NULL)) { /* validation and loading in one pass */
        /* first: an init that happened must be told */
        if (!(r = ld__future_later_new(ld__front_base(&s->c.front))))
            return ld__front_oom(&s->c.front);
        int rc = s->sync->init(s->c.impl, all_data, &bad);
        if (rc == 0)
            ld__later_fulfill(r, false, false);
        else
            ld__later_reject_static(r, rc, rc == LD_EINVAL ? bad : NULL);
        return r;
    }
    ld_data_validate(all_data, &bad);
    if ((r = begin(s, bad, &op)) != NULL)
        return r;
    s->ops->init(s->c.impl, all_data, ld_future_ref(op.impl));
    return finish(s, &op);
}

struct hint {
    ld_store *s;
    const ld_kind *kind;
};

/* Lets the implementation start loading what the write will touch while
 * the front layer still validates the item. */
static void hint(void *arg, const char *key, size_t len)
{
    struct hint *h = arg;
    h->s->sync->prefetch(h->s->c.impl, h->kind, key, len);
}

ld_future *ld_store_upsert(ld_store *s, const ld_kind *kind, const json_t *item)
{
    struct ld__op op;
    ld_future *r;
    const char *bad = NULL;
    struct ld_item_info info;
    if (!s)
        return NULL;
    if (!kind) {
        bad = E_KIND;
    } else if (now(s, NULL) && s->sync->prefetch) {
        struct hint h = {s, kind};
        ld__item_parse_hinted(item, &info, &bad, hint, &h);
    } else {
        ld_item_parse(item, &info, &bad);
    }
    if (now(s, bad)) {
        if (!(r = ld__future_later_new(ld__front_base(&s->c.front))))
            return ld__front_oom(&s->c.front);
        return answer(r, s->sync->upsert(s->c.impl, kind, item, &info));
    }
    if ((r = begin(s, bad, &op)) != NULL)
        return r;
    s->ops->upsert(s->c.impl, kind, item, &info, ld_future_ref(op.impl));
    return finish(s, &op);
}

ld_future *ld_store_delete(ld_store *s, const ld_kind *kind, const char *key, int64_t version)
{
    struct ld__op op;
    ld_future *r;
    if (!s)
        return NULL;
    size_t len;
    const char *bad = check_key(kind, key, &len);
    if (!bad && version < 0)
        bad = "version must be >= 0";
    if (now(s, bad)) {
        if (!(r = ld__future_later_new(ld__front_base(&s->c.front))))
            return ld__front_oom(&s->c.front);
        return answer(r, s->sync->del(s->c.impl, kind, key, version));
    }
    if ((r = begin(s, bad, &op)) != NULL)
        return r;
    s->ops->del(s->c.impl, kind, key, version, ld_future_ref(op.impl));
    return finish(s, &op);
}

ld_future *ld_store_initialized(ld_store *s)
{
    return s ? ld__component_call(&s->c, NULL, s->ops->initialized) : NULL;
}

ld_future *ld_store_close(ld_store *s)
{
    return s ? ld__component_close(&s->c, false, s->ops->close) : NULL;
}

void ld_store_free(ld_store *s)
{
    if (s) /* pending operations: LD_ECANCELED */
        ld__component_free(&s->c, s->ops->free);
}

const char *ld_store_describe(const ld_store *s)
{
    return s ? ld__component_text(&s->c, s->ops->describe) : "(null)";
}

struct event_base *ld_store_base(const ld_store *s)
{
    return s ? ld__front_base(&s->c.front) : NULL;
}

/* ---- the read-only view ------------------------------------------------ */

static ld_store *store_of(const ld_read_only_store *view)
{
    return (ld_store *)(void *)((char *)(uintptr_t)view - offsetof(ld_store, view));
}

ld_read_only_store *ld_store_read_only(ld_store *s)
{
    return s ? &s->view : NULL;
}

ld_future *ld_read_only_store_get(ld_read_only_store *view, const ld_kind *kind, const char *key)
{
    return view ? ld_store_get(store_of(view), kind, key) : NULL;
}

ld_future *ld_read_only_store_all(ld_read_only_store *view, const ld_kind *kind)
{
    return view ? ld_store_all(store_of(view), kind) : NULL;
}

struct event_base *ld_read_only_store_base(const ld_read_only_store *view)
{
    return view ? ld_store_base(store_of(view)) : NULL;
}

const char *ld_read_only_store_describe(const ld_read_only_store *view)
{
    return view ? ld_store_describe(store_of(view)) : "(null)";
}
