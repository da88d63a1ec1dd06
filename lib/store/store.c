/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the store front layer (store.h). It validates input, handles the
 * closed and freed states, and completes the futures it returns in the order
 * the operations were issued, so that implementations need none of that.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include <ldasync/error.h>
#include <ldasync/store.h>

#include "core/core-internal.h"
#include "model/model-internal.h"
#include "store/store-internal.h"

/* The view is a member of the store: ld_store_read_only() gives its
 * address, and the view's functions find the store from it. */
struct ld_read_only_store {
    char unused;
};

struct ld_store {
    struct ld__component c; /* first: the skeleton (front-internal.h) */
    ld_read_only_store view;
    /* A copy: a version 1 struct has no version 2 members to read. */
    struct ld_store_ops ops;
    bool init_validates;        /* its init validates what init_now leaves to it */
    ld_store_status status;     /* the current one */
    uint64_t status_seq;        /* the changes made */
    struct status_hub *hub;     /* its listeners, made by the first one */
    void (*on_free)(void *arg); /* ld__store_on_free() */
    void *on_free_arg;
    ld__store_lend_fn lend; /* ld__store_set_lend() */
};

/* The size of struct ld_store_ops at version 1. */
#define OPS_V1_SIZE offsetof(struct ld_store_ops, get_now)

/* True if `ops` can serve every operation: through the asynchronous member
 * or its _now twin. */
static bool ops_complete(const struct ld_store_ops *o)
{
    return o->initialized && (o->get || o->get_now) && (o->all || o->all_now) &&
           (o->init || o->init_now) && (o->upsert || o->upsert_now) && (o->del || o->del_now);
}

ld_store *ld_store_new(struct event_base *base, const struct ld_store_ops *ops, void *impl)
{
    struct ld_store_ops copy = {0};
    if (!base || !ops || (ops->version != 1 && ops->version != LD_STORE_OPS_VERSION))
        return NULL;
    memcpy(&copy, ops, ops->version == 1 ? OPS_V1_SIZE : sizeof(copy));
    if (!ops_complete(&copy))
        return NULL;
    ld_store *s = ld__component_new(sizeof(*s), base, impl, "store is closed");
    if (s) {
        s->ops = copy;
        s->status.available = true;
    }
    return s;
}

/* The start and the end of an operation that goes through the front's queue
 * (see front-internal.h). */
static ld_future *begin(ld_store *s, const char *bad, struct ld__front_op *op)
{
    return ld__front_begin(&s->c.front, bad, op);
}

static ld_future *finish(ld_store *s, struct ld__front_op *op)
{
    return ld__front_finish(&s->c.front, op);
}

static struct event_base *base_of(const ld_store *s)
{
    return ld__front_base(&s->c.front);
}

static ld_future *oom(ld_store *s)
{
    return ld__front_oom(&s->c.front);
}

#if defined(__GNUC__)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define NOINLINE __attribute__((noinline))
#else
#define LIKELY(x) (x)
#define NOINLINE
#endif

static const char E_KIND[] = "kind must not be NULL";
static const char E_KEY[] = "key must be a non-empty string";
static const char E_KEY_UTF8[] = "key must be valid UTF-8";
static const char E_KEY_RESERVED[] = "key must not be \"$valid\" or \"$flagsState\"";
static const char E_BUSY[] = "the store answered LD_EBUSY and has no asynchronous operation";

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

/* True when an operation with a _now member (`has_now`) is answered within
 * the call: it is valid, the store is open and nothing issued before it
 * waits, so that its result, completed later, keeps issue order. */
static bool now(const ld_store *s, bool has_now, const char *bad)
{
    return has_now && !bad && !ld__front_closed(&s->c.front) && ld__front_idle(&s->c.front);
}

/* Completes `f`, made by ld__future_later_new() before a write (a write that
 * happened is never answered with LD_ENOMEM), with the write's answer `rc`
 * (1: applied, 0: not, or an error; `why` for LD_EINVAL). `has_value`:
 * fulfilled with the bool, else with no value. LD_EBUSY is not an answer:
 * `f` is then dropped and NULL returned. */
static ld_future *answer(ld_future *f, int rc, bool has_value, const char *why)
{
    if (rc == LD_EBUSY) {
        ld__later_fulfill(f, false, false); /* nobody will read it */
        ld_future_unref(f);
        return NULL;
    }
    if (rc < 0)
        ld__later_reject_static(f, rc, rc == LD_EINVAL ? why : NULL);
    else
        ld__later_fulfill(f, has_value, has_value && rc != 0);
    return f;
}

enum result { RES_JSON, RES_BOOL, RES_NONE };

/* Completes `out` (the implementation future of a queued operation) with a
 * _now member's answer `rc`: `v` (stolen) for RES_JSON, rc as a bool for
 * RES_BOOL; `why` for LD_EINVAL. */
static void settle_now(ld_future *out, int rc, enum result res, json_t *v, const char *why)
{
    if (rc < 0)
        ld_future_reject(out, rc, "%s", rc == LD_EINVAL && why ? why : ld_strerror(rc));
    else if (res == RES_JSON)
        ld_future_fulfill_json(out, v);
    else if (res == RES_BOOL)
        ld_future_fulfill_bool(out, rc != 0);
    else
        ld_future_fulfill(out);
}

/* The value of a get_now answer as a new reference. */
static json_t *owned(json_t *item, struct ld_lease *lease)
{
    if (lease) {
        /* atomically: the leased item may be referenced on other threads
         * (jansson's json_incref reads the count plainly first) */
        if (item && !ld__json_immortal(item))
            ld__json_incref(item);
        lease->release(lease);
    }
    return item;
}

/* A get through the front's queue: `asked`, get_now said LD_EBUSY already. */
static NOINLINE ld_future *get_queued(ld_store *s, const ld_kind *kind, const char *key, size_t len,
                                      const char *bad, bool asked)
{
    struct ld__front_op op;
    ld_future *r;
    json_t *item = NULL;
    struct ld_lease *lease = NULL;
    if ((r = begin(s, bad, &op)) != NULL)
        return r;
    int rc = s->ops.get_now && !asked ? s->ops.get_now(s->c.impl, kind, key, len, &item, &lease)
                                      : LD_EBUSY;
    if (rc != LD_EBUSY)
        settle_now(op.impl, rc, RES_JSON, rc == 0 ? owned(item, lease) : NULL, NULL);
    else if (s->ops.get)
        s->ops.get(s->c.impl, kind, key, ld_future_ref(op.impl));
    else
        ld_future_reject(op.impl, LD_EBUSY, E_BUSY);
    return finish(s, &op);
}

ld_future *ld_store_get(ld_store *s, const ld_kind *kind, const char *key)
{
    if (!s)
        return NULL;
    size_t len = 0;
    const char *bad = check_key(kind, key, &len);
    bool asked = now(s, s->ops.get_now, bad);
    if (LIKELY(asked)) {
        json_t *item;
        struct ld_lease *lease;
        int rc = s->ops.get_now(s->c.impl, kind, key, len, &item, &lease);
        ld_future *r = NULL;
        if (LIKELY(rc == 0))
            r = ld__future_later_json(base_of(s), item, lease);
        else if (rc != LD_EBUSY)
            r = ld__future_later_rejected(base_of(s), rc, NULL);
        if (rc != LD_EBUSY)
            return r ? r : oom(s);
    }
    return get_queued(s, kind, key, len, bad, asked);
}

int ld_store_get_now(ld_store *s, const ld_kind *kind, const char *key, json_t **item)
{
    if (item)
        *item = NULL;
    size_t len = 0;
    if (!s || !item || check_key(kind, key, &len))
        return LD_EINVAL;
    if (ld__front_closed(&s->c.front))
        return LD_ECLOSED;
    json_t *v;
    struct ld_lease *lease;
    int rc = ld__store_get_now(s, kind, key, len, &v, &lease);
    if (rc == 0)
        *item = owned(v, lease);
    return rc;
}

ld_future *ld_store_all(ld_store *s, const ld_kind *kind)
{
    struct ld__front_op op;
    ld_future *r;
    json_t *all = NULL;
    int rc;
    if (!s)
        return NULL;
    const char *bad = kind ? NULL : E_KIND;
    bool asked = now(s, s->ops.all_now, bad);
    if (asked) {
        rc = s->ops.all_now(s->c.impl, kind, &all);
        if (rc == 0) {
            r = ld__future_later_json(base_of(s), all, NULL);
            return r ? r : oom(s);
        }
        if (rc != LD_EBUSY) {
            r = ld__future_later_rejected(base_of(s), rc, NULL);
            return r ? r : oom(s);
        }
    }
    if ((r = begin(s, bad, &op)) != NULL)
        return r;
    rc = s->ops.all_now && !asked ? s->ops.all_now(s->c.impl, kind, &all) : LD_EBUSY;
    if (rc != LD_EBUSY)
        settle_now(op.impl, rc, RES_JSON, rc == 0 ? all : NULL, NULL);
    else if (s->ops.all)
        s->ops.all(s->c.impl, kind, ld_future_ref(op.impl));
    else
        ld_future_reject(op.impl, LD_EBUSY, E_BUSY);
    return finish(s, &op);
}

ld_future *ld_store_init(ld_store *s, const json_t *all_data)
{
    struct ld__front_op op;
    ld_future *r;
    const char *bad = NULL;
    int rc;
    if (!s)
        return NULL;
    bool asked = now(s, s->ops.init_now, NULL);
    if (asked) { /* init_now validates and loads in one pass */
        if (!(r = ld__future_later_new(base_of(s))))
            return oom(s);
        rc = s->ops.init_now(s->c.impl, all_data, &bad);
        if ((r = answer(r, rc, false, bad)) != NULL)
            return r;
        bad = NULL; /* LD_EBUSY: whatever init_now left in *why means nothing */
    }
    if ((!s->ops.init_now || asked) && !s->init_validates) /* asked: LD_EBUSY */
        ld_data_validate(all_data, &bad);
    if ((r = begin(s, bad, &op)) != NULL)
        return r;
    rc = s->ops.init_now && !asked ? s->ops.init_now(s->c.impl, all_data, &bad) : LD_EBUSY;
    if (rc == LD_EBUSY && !asked && s->ops.init_now && !s->init_validates) {
        bad = NULL;
        ld_data_validate(all_data, &bad);
    }
    if (rc != LD_EBUSY)
        settle_now(op.impl, rc, RES_NONE, NULL, bad);
    else if (bad)
        ld_future_reject(op.impl, LD_EINVAL, "%s", bad);
    else if (s->ops.init)
        s->ops.init(s->c.impl, all_data, ld_future_ref(op.impl));
    else
        ld_future_reject(op.impl, LD_EBUSY, E_BUSY);
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
    h->s->ops.prefetch(h->s->c.impl, h->kind, key, len);
}

ld_future *ld_store_upsert(ld_store *s, const ld_kind *kind, const json_t *item)
{
    struct ld__front_op op;
    ld_future *r;
    const char *bad = NULL;
    struct ld_item_info info;
    int rc;
    if (!s)
        return NULL;
    if (!kind) {
        bad = E_KIND;
    } else if (s->ops.prefetch && !ld__front_closed(&s->c.front)) {
        /* closed: the implementation hears of nothing more */
        struct hint h = {s, kind};
        ld__item_parse_hinted(item, &info, &bad, hint, &h);
    } else {
        ld_item_parse(item, &info, &bad);
    }
    bool asked = now(s, s->ops.upsert_now, bad);
    if (asked) {
        if (!(r = ld__future_later_new(base_of(s))))
            return oom(s);
        if ((r = answer(r, s->ops.upsert_now(s->c.impl, kind, item, &info), true, NULL)) != NULL)
            return r;
    }
    if ((r = begin(s, bad, &op)) != NULL)
        return r;
    rc = s->ops.upsert_now && !asked ? s->ops.upsert_now(s->c.impl, kind, item, &info) : LD_EBUSY;
    if (rc != LD_EBUSY)
        settle_now(op.impl, rc, RES_BOOL, NULL, NULL);
    else if (s->ops.upsert)
        s->ops.upsert(s->c.impl, kind, item, &info, ld_future_ref(op.impl));
    else
        ld_future_reject(op.impl, LD_EBUSY, E_BUSY);
    return finish(s, &op);
}

ld_future *ld_store_delete(ld_store *s, const ld_kind *kind, const char *key, int64_t version)
{
    struct ld__front_op op;
    ld_future *r;
    int rc;
    if (!s)
        return NULL;
    size_t len = 0;
    const char *bad = check_key(kind, key, &len);
    if (!bad && ld__key_reserved(key, len)) /* no item has it (kind.h): no tombstone either */
        bad = E_KEY_RESERVED;
    if (!bad && version < 0)
        bad = "version must be >= 0";
    bool asked = now(s, s->ops.del_now, bad);
    if (asked) {
        if (!(r = ld__future_later_new(base_of(s))))
            return oom(s);
        if ((r = answer(r, s->ops.del_now(s->c.impl, kind, key, version), true, NULL)) != NULL)
            return r;
    }
    if ((r = begin(s, bad, &op)) != NULL)
        return r;
    rc = s->ops.del_now && !asked ? s->ops.del_now(s->c.impl, kind, key, version) : LD_EBUSY;
    if (rc != LD_EBUSY)
        settle_now(op.impl, rc, RES_BOOL, NULL, NULL);
    else if (s->ops.del)
        s->ops.del(s->c.impl, kind, key, version, ld_future_ref(op.impl));
    else
        ld_future_reject(op.impl, LD_EBUSY, E_BUSY);
    return finish(s, &op);
}

ld_future *ld_store_initialized(ld_store *s)
{
    return s ? ld__component_call(&s->c, NULL, s->ops.initialized) : NULL;
}

ld_future *ld_store_close(ld_store *s)
{
    return s ? ld__component_close(&s->c, false, s->ops.close) : NULL;
}

static void hub_detach(struct status_hub *h);

void ld_store_free(ld_store *s)
{
    if (!s)
        return;
    if (s->on_free)
        s->on_free(s->on_free_arg);
    hub_detach(s->hub); /* the listeners' calls not made yet are dropped */
    s->hub = NULL;
    ld__component_free(&s->c, s->ops.free); /* pending operations: LD_ECANCELED */
}

const char *ld_store_describe(const ld_store *s)
{
    return s ? ld__component_text(&s->c, s->ops.describe) : "(null)";
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

void ld__store_on_free(ld_store *s, void (*fn)(void *arg), void *arg)
{
    s->on_free = fn;
    s->on_free_arg = arg;
}

void ld__store_init_validates(ld_store *s)
{
    s->init_validates = true;
}

int ld_store_set_init_validates(ld_store *store)
{
    if (!store)
        return LD_EINVAL;
    ld__store_init_validates(store);
    return 0;
}

/* ---- For the evaluator (store-internal.h) --------------------------------- */

int ld__store_get_now(ld_store *s, const ld_kind *kind, const char *key, size_t len, json_t **item,
                      struct ld_lease **lease)
{
    if (!now(s, s->ops.get_now, NULL))
        return LD_EBUSY;
    return s->ops.get_now(s->c.impl, kind, key, len, item, lease);
}

void ld__store_set_lend(ld_store *s, ld__store_lend_fn fn)
{
    s->lend = fn;
}

int ld__store_get_now_lent(ld_store *s, const ld_kind *kind, const char *key, size_t len,
                           json_t **item, struct ld_lease **lease, bool *lent)
{
    if (!now(s, s->ops.get_now, NULL))
        return LD_EBUSY;
    *lent = s->lend != NULL;
    if (s->lend) {
        *lease = NULL;
        return s->lend(s->c.impl, kind, key, len, item);
    }
    return s->ops.get_now(s->c.impl, kind, key, len, item, lease);
}

int ld__store_all_now(ld_store *s, const ld_kind *kind, json_t **all)
{
    if (!now(s, s->ops.all_now, NULL))
        return LD_EBUSY;
    return s->ops.all_now(s->c.impl, kind, all);
}

int ld__store_initialized_now(ld_store *s)
{
    if (!now(s, true, NULL))
        return LD_EBUSY;
    if (s->ops.initialized_now)
        return s->ops.initialized_now(s->c.impl);
    ld_future *f = ld_future_new(base_of(s));
    if (!f)
        return LD_ENOMEM;
    s->ops.initialized(s->c.impl, ld_future_ref(f));
    int rc = ld_future_is_pending(f)     ? LD_EBUSY /* it answers later: nobody reads it */
             : ld_future_is_fulfilled(f) ? ld_future_bool(f)
                                         : ld_future_error(f);
    ld_future_unref(f);
    return rc;
}

int ld_store_initialized_now(ld_store *store)
{
    if (!store)
        return LD_EINVAL;
    if (ld__front_closed(&store->c.front))
        return LD_ECLOSED;
    return ld__store_initialized_now(store);
}

/* ---- the status (store.h) ------------------------------------------------ */

/* A change of the status, numbered (the store's status_seq after it). */
struct status_change {
    uint64_t seq;
    ld_store_status status;
};

/* The listeners of a store's status and the changes they have not heard
 * of yet, which `ev` (made active by a change) delivers from the loop. It
 * outlives the store while it delivers: a listener may free the store. */
struct status_hub {
    ld_store *store;         /* NULL once the store is freed */
    struct event *ev;        /* no descriptor: made active by a change */
    struct status_change *q; /* changes not delivered yet, oldest first */
    size_t n, cap;           /* cap >= 4 */
    unsigned delivering;     /* calls of deliver() in progress */
    struct ld__listeners ls; /* each hears the changes numbered above its `after` */
};

static void hub_free(struct status_hub *h)
{
    event_free(h->ev);
    ld__listeners_free(&h->ls);
    ld__free(h->q);
    ld__free(h);
}

static void hub_detach(struct status_hub *h)
{
    if (!h)
        return;
    h->store = NULL;
    if (h->delivering == 0)
        hub_free(h);
    else
        event_del(h->ev); /* deliver() frees it when its calls return */
}

/* Calls the listeners with the changes queued when it starts, in order;
 * those a listener makes meanwhile come in the next pass of the loop. */
static void deliver(evutil_socket_t fd, short what, void *arg)
{
    struct status_hub *h = arg;
    (void)fd;
    (void)what;
    size_t end = h->n, i;
    h->delivering++;
    for (i = 0; i < end && h->store; i++) {
        struct status_change ch = h->q[i]; /* a listener may grow h->q */
        for (struct ld__listener *l = h->ls.head; l && h->store; l = l->next)
            if (l->fn && l->after < ch.seq)
                ((ld_store_status_fn)l->fn)(h->store, &ch.status, l->arg);
    }
    if (--h->delivering > 0)
        return;
    if (!h->store) { /* freed by a listener */
        hub_free(h);
        return;
    }
    memmove(h->q, h->q + end, (h->n - end) * sizeof(*h->q));
    h->n -= end;
    ld__listeners_sweep(&h->ls);
    if (h->n)
        event_active(h->ev, EV_TIMEOUT, 0);
}

static struct status_hub *hub_new(ld_store *s)
{
    struct status_hub *h = ld__calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->store = s;
    h->cap = 4;
    h->q = ld__malloc(h->cap * sizeof(*h->q));
    h->ev = h->q ? event_new(base_of(s), -1, 0, deliver, h) : NULL;
    if (!h->ev) {
        ld__free(h->q);
        ld__free(h);
        return NULL;
    }
    return h;
}

/* Queues the call of the listeners with change number `seq`. Without
 * memory for it, it replaces the last change queued (there is one: the
 * queue holds 4 before it grows), so the listeners still hear the current
 * status last. */
static void hub_queue(struct status_hub *h, uint64_t seq, ld_store_status st)
{
    if (h->n == h->cap) {
        struct status_change *q = ld__realloc(h->q, 2 * h->cap * sizeof(*q));
        if (!q) {
            h->q[h->n - 1] = (struct status_change){seq, st};
            return; /* made active by the first of them */
        }
        h->q = q;
        h->cap *= 2;
    }
    h->q[h->n++] = (struct status_change){seq, st};
    event_active(h->ev, EV_TIMEOUT, 0);
}

int ld_store_current_status(const ld_store *s, ld_store_status *out)
{
    if (!s || !out)
        return LD_EINVAL;
    *out = s->status;
    return 0;
}

int64_t ld_store_add_status_listener(ld_store *s, ld_store_status_fn fn, void *arg)
{
    if (!s || !fn)
        return LD_EINVAL;
    if (!s->hub && !(s->hub = hub_new(s)))
        return LD_ENOMEM;
    return ld__listeners_add(&s->hub->ls, (ld__listener_fn)fn, arg, s->status_seq);
}

int ld_store_remove_status_listener(ld_store *s, int64_t id)
{
    if (!s || !s->hub)
        return LD_EINVAL;
    return ld__listeners_remove(&s->hub->ls, id, s->hub->delivering == 0);
}

int ld_store_update_status(ld_store *s, bool available, bool needs_refresh)
{
    if (!s)
        return LD_EINVAL;
    if (s->status.available == available && s->status.needs_refresh == needs_refresh)
        return 0;
    s->status.available = available;
    s->status.needs_refresh = needs_refresh;
    s->status_seq++;
    if (s->hub && s->hub->ls.live)
        hub_queue(s->hub, s->status_seq, s->status);
    return 0;
}
