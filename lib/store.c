/*
 * ldasync: the store front layer (store.h). It validates input, handles the
 * closed and freed states, and completes the futures it returns in the order
 * the operations were issued, so that implementations need none of that.
 */
#include <stdlib.h>

#include <ldasync/error.h>
#include <ldasync/store.h>

#include "store-internal.h"

/* An operation whose result waits for the implementation or for the
 * operations issued before it. */
struct pending {
    struct pending *next;
    ld_future *impl; /* completed by the implementation */
    ld_future *user; /* what the caller got */
};

struct ld_store {
    struct event_base *base;
    const struct ld_store_ops *ops;
    const struct ld__store_sync_ops *sync; /* or NULL */
    ld_future *answer[2];                  /* with sync: fulfilled false, true */
    void *impl;
    int closed;
    int freed;
    unsigned refs; /* the owner's (until ld_store_free) + one per pending callback */
    struct pending *head, *tail;
};

ld_store *ld__store_new_sync(struct event_base *base, const struct ld_store_ops *ops,
                             const struct ld__store_sync_ops *sync, void *impl)
{
    if (!base || !ops || ops->version != LD_STORE_OPS_VERSION || !ops->get || !ops->all ||
        !ops->init || !ops->upsert || !ops->del || !ops->initialized)
        return NULL;
    ld_store *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->base = base;
    s->ops = ops;
    s->impl = impl;
    s->refs = 1;
    if (sync) {
        for (int i = 0; i < 2; i++) {
            s->answer[i] = ld_future_new(base);
            if (!s->answer[i] || ld_future_fulfill_bool(s->answer[i], i) != 0) {
                ld_future_unref(s->answer[0]);
                ld_future_unref(s->answer[1]);
                free(s);
                return NULL;
            }
        }
        s->sync = sync;
    }
    return s;
}

ld_store *ld_store_new(struct event_base *base, const struct ld_store_ops *ops, void *impl)
{
    return ld__store_new_sync(base, ops, NULL, impl);
}

static void store_release(ld_store *s)
{
    if (--s->refs == 0)
        free(s);
}

/* Completes the queued operations whose implementation is done, oldest
 * first, stopping at the first one still running. */
static void flush(ld_store *s)
{
    struct pending *p;
    while ((p = s->head) != NULL && !ld_future_is_pending(p->impl)) {
        s->head = p->next;
        if (!s->head)
            s->tail = NULL;
        ld_future_forward(p->user, p->impl); /* user adopts impl's outcome */
        ld_future_unref(p->user);
        free(p);
    }
}

static void impl_done(ld_future *impl, void *arg)
{
    ld_store *s = arg;
    (void)impl;
    if (!s->freed)
        flush(s);
    store_release(s);
}

/* Returns the caller's future for an operation whose implementation future
 * is `impl` (the implementation has been called). With nothing queued and
 * `impl` complete already, `impl` itself is the answer: one future, no copy.
 * Otherwise the operation waits in the queue. */
static ld_future *finish(ld_store *s, ld_future *impl)
{
    if (!s->head && !ld_future_is_pending(impl))
        return impl;
    struct pending *p = malloc(sizeof(*p));
    ld_future *user = ld_future_new(s->base);
    if (!p || !user) {
        free(p);
        ld_future_unref(user);
        ld_future_unref(impl); /* the implementation completes its own reference */
        return ld_future_rejected(s->base, LD_ENOMEM, NULL);
    }
    p->next = NULL;
    p->impl = impl;
    p->user = ld_future_ref(user);
    if (s->tail)
        s->tail->next = p;
    else
        s->head = p;
    s->tail = p;
    s->refs++;
    if (ld_future_on_complete(ld_future_ref(impl), impl_done, s) != 0)
        s->refs--; /* LD_ENOMEM: flushed by the next completion instead */
    return user;
}

static ld_future *rejected(ld_store *s, int code, const char *why)
{
    return ld_future_rejected(s->base, code, "%s", why);
}

static const char E_KIND[] = "kind must not be NULL";
static const char E_KEY[] = "key must be a non-empty string";

/* The start of every operation: returns the future to give back at once
 * (a closed store, bad input as named by `bad`, no memory), or NULL with
 * *impl a new pending future for the implementation. */
static ld_future *begin(ld_store *s, const char *bad, ld_future **impl)
{
    if (s->closed)
        return rejected(s, LD_ECLOSED, "store is closed");
    if (bad)
        return rejected(s, LD_EINVAL, bad);
    *impl = ld_future_new(s->base);
    return *impl ? NULL : rejected(s, LD_ENOMEM, "out of memory");
}

static const char *check_key(const ld_kind *kind, const char *key)
{
    return !kind ? E_KIND : !key || !*key ? E_KEY : NULL;
}

/* True when the implementation can answer `s`'s next operation at once:
 * it has synchronous operations, nothing is waiting before this one, and
 * the operation is valid on an open store. */
static bool now(const ld_store *s, const char *bad)
{
    return s->sync && !s->head && !s->closed && !bad;
}

/* The caller's future for the result of a synchronous write. */
static ld_future *answer(ld_store *s, int rc)
{
    if (rc < 0)
        return ld_future_rejected(s->base, rc, NULL);
    return ld_future_ref(s->answer[rc != 0]);
}

ld_future *ld_store_get(ld_store *s, const ld_kind *kind, const char *key)
{
    ld_future *impl, *r;
    if (!s)
        return NULL;
    const char *bad = check_key(kind, key);
    if (now(s, bad)) {
        r = ld_future_fulfilled_json(s->base, json_incref(s->sync->get(s->impl, kind, key)));
        return r ? r : rejected(s, LD_ENOMEM, "out of memory");
    }
    if ((r = begin(s, bad, &impl)) != NULL)
        return r;
    s->ops->get(s->impl, kind, key, ld_future_ref(impl));
    return finish(s, impl);
}

ld_future *ld_store_all(ld_store *s, const ld_kind *kind)
{
    ld_future *impl, *r;
    if (!s)
        return NULL;
    if ((r = begin(s, kind ? NULL : E_KIND, &impl)) != NULL)
        return r;
    s->ops->all(s->impl, kind, ld_future_ref(impl));
    return finish(s, impl);
}

ld_future *ld_store_init(ld_store *s, const json_t *all_data)
{
    ld_future *impl, *r;
    const char *bad = NULL;
    if (!s)
        return NULL;
    ld_data_validate(all_data, &bad);
    if ((r = begin(s, bad, &impl)) != NULL)
        return r;
    s->ops->init(s->impl, all_data, ld_future_ref(impl));
    return finish(s, impl);
}

ld_future *ld_store_upsert(ld_store *s, const ld_kind *kind, const json_t *item)
{
    ld_future *impl, *r;
    const char *bad = NULL;
    struct ld_item_info info;
    if (!s)
        return NULL;
    if (!kind)
        bad = E_KIND;
    else
        ld_item_parse(item, &info, &bad);
    if (now(s, bad))
        return answer(s, s->sync->upsert(s->impl, kind, item, &info));
    if ((r = begin(s, bad, &impl)) != NULL)
        return r;
    s->ops->upsert(s->impl, kind, item, &info, ld_future_ref(impl));
    return finish(s, impl);
}

ld_future *ld_store_delete(ld_store *s, const ld_kind *kind, const char *key, int64_t version)
{
    ld_future *impl, *r;
    if (!s)
        return NULL;
    const char *bad = check_key(kind, key);
    if (!bad && version < 0)
        bad = "version must be >= 0";
    if (now(s, bad))
        return answer(s, s->sync->del(s->impl, kind, key, version));
    if ((r = begin(s, bad, &impl)) != NULL)
        return r;
    s->ops->del(s->impl, kind, key, version, ld_future_ref(impl));
    return finish(s, impl);
}

ld_future *ld_store_initialized(ld_store *s)
{
    ld_future *impl, *r;
    if (!s)
        return NULL;
    if ((r = begin(s, NULL, &impl)) != NULL)
        return r;
    s->ops->initialized(s->impl, ld_future_ref(impl));
    return finish(s, impl);
}

ld_future *ld_store_close(ld_store *s)
{
    if (!s)
        return NULL;
    ld_future *impl = ld_future_new(s->base);
    if (!impl)
        return rejected(s, LD_ENOMEM, "out of memory");
    if (s->closed || !s->ops->close) {
        s->closed = 1;
        ld_future_fulfill(impl);
    } else {
        s->closed = 1;
        s->ops->close(s->impl, ld_future_ref(impl));
    }
    return finish(s, impl);
}

void ld_store_free(ld_store *s)
{
    if (!s || s->freed)
        return;
    s->freed = 1;
    s->closed = 1;
    struct pending *p = s->head;
    s->head = s->tail = NULL;
    while (p) {
        struct pending *next = p->next;
        ld_future_cancel(p->user);
        ld_future_cancel(p->impl); /* tells the implementation, if it listens */
        ld_future_unref(p->impl);
        ld_future_unref(p->user);
        free(p);
        p = next;
    }
    if (s->ops->free)
        s->ops->free(s->impl);
    ld_future_unref(s->answer[0]);
    ld_future_unref(s->answer[1]);
    store_release(s);
}

const char *ld_store_describe(const ld_store *s)
{
    if (!s)
        return "(null)";
    const char *d = s->ops->describe ? s->ops->describe(s->impl) : NULL;
    return d ? d : "unknown";
}

struct event_base *ld_store_base(const ld_store *s)
{
    return s ? s->base : NULL;
}
