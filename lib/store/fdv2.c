/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: FDv2 types, the change set builder, and the initializer and
 * synchronizer front layers (fdv2.h).
 */
#include <stdlib.h>
#include <string.h>

#include <ldasync/error.h>
#include <ldasync/fdv2.h>

#include "core/core-internal.h"
#include "store/store-internal.h"

/* ---- names ---------------------------------------------------------------- */

static const char *const INTENT_NAMES[] = {"xfer-full", "xfer-changes", "none"};
static const char *const ACTION_NAMES[] = {"put", "delete"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
/* Enum values arrive as ints from C callers: compare unsigned to reject
 * negatives too. */
#define IN_ENUM(v, names) ((unsigned)(v) < COUNT(names))

const char *ld_fdv2_intent_name(enum ld_fdv2_intent intent)
{
    return IN_ENUM(intent, INTENT_NAMES) ? INTENT_NAMES[intent] : NULL;
}

int ld_fdv2_intent_from_name(const char *name)
{
    for (size_t i = 0; name && i < COUNT(INTENT_NAMES); i++)
        if (strcmp(name, INTENT_NAMES[i]) == 0)
            return (int)i;
    return LD_EINVAL;
}

const char *ld_fdv2_action_name(enum ld_fdv2_action action)
{
    return IN_ENUM(action, ACTION_NAMES) ? ACTION_NAMES[action] : NULL;
}

const char *ld_fdv2_kind_name(const ld_kind *kind)
{
    if (kind && kind == ld_kind_features())
        return "flag";
    if (kind && kind == ld_kind_segments())
        return "segment";
    return NULL;
}

const ld_kind *ld_fdv2_kind_from_name(const char *name)
{
    if (name && strcmp(name, "flag") == 0)
        return ld_kind_features();
    if (name && strcmp(name, "segment") == 0)
        return ld_kind_segments();
    return NULL;
}

/* ---- selector ------------------------------------------------------------- */

struct ld_fdv2_selector {
    char *state; /* EMPTY_STATE or malloc'd */
    int64_t version;
};

static char EMPTY_STATE[] = "";
static const ld_fdv2_selector EMPTY_SELECTOR = {EMPTY_STATE, 0};

/* Fills *dst with a copy of `src` (NULL: empty). 0 or LD_ENOMEM. */
static int selector_copy(ld_fdv2_selector *dst, const ld_fdv2_selector *src)
{
    if (!src)
        src = &EMPTY_SELECTOR;
    dst->version = src->version;
    dst->state = src->state[0] ? ld__strdup(src->state) : EMPTY_STATE;
    return dst->state ? 0 : LD_ENOMEM;
}

static void selector_clear(ld_fdv2_selector *sel)
{
    if (sel->state != EMPTY_STATE)
        ld__free(sel->state);
}

ld_fdv2_selector *ld_fdv2_selector_new(const char *state, int64_t version)
{
    if (!state || version < 0)
        return NULL;
    ld_fdv2_selector *sel = ld__malloc(sizeof(*sel));
    ld_fdv2_selector src = {(char *)state, version};
    if (sel && selector_copy(sel, &src) != 0) {
        ld__free(sel);
        sel = NULL;
    }
    return sel;
}

void ld_fdv2_selector_free(ld_fdv2_selector *sel)
{
    if (!sel)
        return;
    selector_clear(sel);
    ld__free(sel);
}

const char *ld_fdv2_selector_state(const ld_fdv2_selector *sel)
{
    return sel ? sel->state : EMPTY_STATE;
}

int64_t ld_fdv2_selector_version(const ld_fdv2_selector *sel)
{
    return sel ? sel->version : 0;
}

bool ld_fdv2_selector_is_defined(const ld_fdv2_selector *sel)
{
    return sel && (sel->state[0] || sel->version != 0);
}

bool ld_fdv2_selector_equal(const ld_fdv2_selector *a, const ld_fdv2_selector *b)
{
    return ld_fdv2_selector_version(a) == ld_fdv2_selector_version(b) &&
           strcmp(ld_fdv2_selector_state(a), ld_fdv2_selector_state(b)) == 0;
}

/* ---- change, change set ------------------------------------------------- */

struct ld_fdv2_change {
    enum ld_fdv2_action action;
    const ld_kind *kind;
    char *key;
    int64_t version;
    json_t *object; /* NULL for a delete */
};

struct ld_fdv2_change_set {
    enum ld_fdv2_intent intent;
    size_t n;
    ld_fdv2_change *changes;
    ld_fdv2_selector selector;
};

static void changes_free(ld_fdv2_change *changes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ld__free(changes[i].key);
        ld__json_decref(changes[i].object); /* a file source's worker shares them */
    }
    ld__free(changes);
}

int ld_fdv2_change_action(const ld_fdv2_change *c)
{
    return c ? (int)c->action : LD_EINVAL;
}

const ld_kind *ld_fdv2_change_kind(const ld_fdv2_change *c)
{
    return c ? c->kind : NULL;
}

const char *ld_fdv2_change_key(const ld_fdv2_change *c)
{
    return c ? c->key : NULL;
}

int64_t ld_fdv2_change_version(const ld_fdv2_change *c)
{
    return c ? c->version : -1;
}

json_t *ld_fdv2_change_object(const ld_fdv2_change *c)
{
    return c ? c->object : NULL;
}

/* A change set taking over `changes` (on success only). */
static ld_fdv2_change_set *change_set_new(enum ld_fdv2_intent intent, ld_fdv2_change *changes,
                                          size_t n, const ld_fdv2_selector *sel)
{
    ld_fdv2_change_set *cs = ld__malloc(sizeof(*cs));
    if (!cs)
        return NULL;
    if (selector_copy(&cs->selector, sel) != 0) {
        ld__free(cs);
        return NULL;
    }
    cs->intent = intent;
    cs->changes = changes;
    cs->n = n;
    return cs;
}

ld_fdv2_change_set *ld_fdv2_change_set_no_changes(void)
{
    return change_set_new(LD_FDV2_INTENT_NONE, NULL, 0, NULL);
}

ld_fdv2_change_set *ld_fdv2_change_set_empty(const ld_fdv2_selector *sel)
{
    return change_set_new(LD_FDV2_INTENT_XFER_FULL, NULL, 0, sel);
}

void ld_fdv2_change_set_free(ld_fdv2_change_set *cs)
{
    if (!cs)
        return;
    changes_free(cs->changes, cs->n);
    selector_clear(&cs->selector);
    ld__free(cs);
}

int ld_fdv2_change_set_intent(const ld_fdv2_change_set *cs)
{
    return cs ? (int)cs->intent : LD_EINVAL;
}

size_t ld_fdv2_change_set_count(const ld_fdv2_change_set *cs)
{
    return cs ? cs->n : 0;
}

const ld_fdv2_change *ld_fdv2_change_set_get(const ld_fdv2_change_set *cs, size_t i)
{
    return cs && i < cs->n ? &cs->changes[i] : NULL;
}

const ld_fdv2_selector *ld_fdv2_change_set_selector(const ld_fdv2_change_set *cs)
{
    return cs ? &cs->selector : &EMPTY_SELECTOR;
}

/* ---- builder ---------------------------------------------------------------- */

#define NO_INTENT (-1)

struct ld_fdv2_change_set_builder {
    int intent; /* enum ld_fdv2_intent or NO_INTENT */
    size_t n, cap;
    ld_fdv2_change *changes;
    const char *error;
};

ld_fdv2_change_set_builder *ld_fdv2_change_set_builder_new(void)
{
    ld_fdv2_change_set_builder *b = ld__calloc(1, sizeof(*b));
    if (b)
        b->intent = NO_INTENT;
    return b;
}

static void drop_changes(ld_fdv2_change_set_builder *b)
{
    changes_free(b->changes, b->n);
    b->changes = NULL;
    b->n = b->cap = 0;
}

void ld_fdv2_change_set_builder_free(ld_fdv2_change_set_builder *b)
{
    if (!b)
        return;
    drop_changes(b);
    ld__free(b);
}

/* Records why a call failed; returns `code`. */
static int fail(ld_fdv2_change_set_builder *b, int code, const char *why)
{
    if (b)
        b->error = why;
    return code;
}

static const char E_NO_INTENT[] = "the builder has no intent: start() it first";

int ld_fdv2_change_set_builder_start(ld_fdv2_change_set_builder *b, enum ld_fdv2_intent intent)
{
    if (!b)
        return LD_EINVAL;
    if (!IN_ENUM(intent, INTENT_NAMES))
        return fail(b, LD_EINVAL, "intent must be a value of enum ld_fdv2_intent");
    drop_changes(b);
    b->intent = (int)intent;
    return 0;
}

int ld_fdv2_change_set_builder_expect_changes(ld_fdv2_change_set_builder *b)
{
    if (!b)
        return LD_EINVAL;
    if (b->intent == NO_INTENT)
        return fail(b, LD_EINVAL, E_NO_INTENT);
    if (b->intent == LD_FDV2_INTENT_NONE)
        b->intent = LD_FDV2_INTENT_XFER_CHANGES;
    return 0;
}

int ld_fdv2_change_set_builder_reset(ld_fdv2_change_set_builder *b)
{
    if (!b)
        return LD_EINVAL;
    drop_changes(b);
    return 0;
}

static int add(ld_fdv2_change_set_builder *b, enum ld_fdv2_action action, const ld_kind *kind,
               const char *key, int64_t version, json_t *object)
{
    if (!b)
        return LD_EINVAL;
    if (!ld_fdv2_kind_name(kind))
        return fail(b, LD_EINVAL, "kind must be ld_kind_features() or ld_kind_segments()");
    if (!key || !*key)
        return fail(b, LD_EINVAL, "key must be a non-empty string");
    if (version < 0)
        return fail(b, LD_EINVAL, "version must be >= 0");
    if (action == LD_FDV2_ACTION_PUT && !json_is_object(object))
        return fail(b, LD_EINVAL, "object must be a JSON object");
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 8;
        ld_fdv2_change *grown = ld__realloc(b->changes, cap * sizeof(*grown));
        if (!grown)
            return LD_ENOMEM;
        b->changes = grown;
        b->cap = cap;
    }
    char *k = ld__strdup(key);
    if (!k)
        return LD_ENOMEM;
    b->changes[b->n++] = (ld_fdv2_change){action, kind, k, version, ld__json_incref(object)};
    return 0;
}

int ld_fdv2_change_set_builder_add_put(ld_fdv2_change_set_builder *b, const ld_kind *kind,
                                       const char *key, int64_t version, json_t *object)
{
    return add(b, LD_FDV2_ACTION_PUT, kind, key, version, object);
}

int ld_fdv2_change_set_builder_add_delete(ld_fdv2_change_set_builder *b, const ld_kind *kind,
                                          const char *key, int64_t version)
{
    return add(b, LD_FDV2_ACTION_DELETE, kind, key, version, NULL);
}

int ld_fdv2_change_set_builder_finish(ld_fdv2_change_set_builder *b, const ld_fdv2_selector *sel,
                                      ld_fdv2_change_set **out)
{
    if (out)
        *out = NULL;
    if (!b)
        return LD_EINVAL;
    if (!out)
        return fail(b, LD_EINVAL, "out must not be NULL");
    if (b->intent == NO_INTENT)
        return fail(b, LD_EINVAL, E_NO_INTENT);
    ld_fdv2_change_set *cs = change_set_new((enum ld_fdv2_intent)b->intent, b->changes, b->n, sel);
    if (!cs)
        return LD_ENOMEM;
    b->changes = NULL; /* moved into cs */
    b->n = b->cap = 0;
    /* After a full transfer, what follows is changes to it, until the
     * server sends a new intent. */
    if (b->intent == LD_FDV2_INTENT_XFER_FULL)
        b->intent = LD_FDV2_INTENT_XFER_CHANGES;
    *out = cs;
    return 0;
}

int ld_fdv2_change_set_builder_intent(const ld_fdv2_change_set_builder *b)
{
    return b && b->intent != NO_INTENT ? b->intent : LD_EINVAL;
}

size_t ld_fdv2_change_set_builder_count(const ld_fdv2_change_set_builder *b)
{
    return b ? b->n : 0;
}

const char *ld_fdv2_change_set_builder_error(const ld_fdv2_change_set_builder *b)
{
    return b ? b->error : NULL;
}

/* ---- basis, update ----------------------------------------------------------- */

/* The first field of a basis or update, so that the future readers can tell
 * them from other pointer values. */
#define TAG_BASIS 0x6c644256u  /* "ldBV" */
#define TAG_UPDATE 0x6c645556u /* "ldUV" */

struct ld_fdv2_basis {
    uint32_t tag;
    bool persist;
    ld_fdv2_change_set *change_set;
    char *environment_id;
};

struct ld_fdv2_update {
    uint32_t tag;
    enum ld_data_source_state state;
    ld_fdv2_change_set *change_set;
    bool has_error;
    ld_data_source_error_info error; /* message malloc'd when has_error, else NULL */
    char *environment_id;
};

/* Copies an optional string: 0, or LD_ENOMEM. */
static int copy_opt(char **dst, const char *src)
{
    *dst = src ? ld__strdup(src) : NULL;
    return src && !*dst ? LD_ENOMEM : 0;
}

ld_fdv2_basis *ld_fdv2_basis_new(ld_fdv2_change_set *change_set, bool persist,
                                 const char *environment_id)
{
    ld_fdv2_basis *b = change_set ? ld__malloc(sizeof(*b)) : NULL;
    if (b && copy_opt(&b->environment_id, environment_id) != 0) {
        ld__free(b);
        b = NULL;
    }
    if (!b) {
        ld_fdv2_change_set_free(change_set);
        return NULL;
    }
    b->tag = TAG_BASIS;
    b->persist = persist;
    b->change_set = change_set;
    return b;
}

void ld_fdv2_basis_free(ld_fdv2_basis *b)
{
    if (!b)
        return;
    ld_fdv2_change_set_free(b->change_set);
    ld__free(b->environment_id);
    b->tag = 0;
    ld__free(b);
}

const ld_fdv2_change_set *ld_fdv2_basis_change_set(const ld_fdv2_basis *b)
{
    return b ? b->change_set : NULL;
}

bool ld_fdv2_basis_persist(const ld_fdv2_basis *b)
{
    return b && b->persist;
}

const char *ld_fdv2_basis_environment_id(const ld_fdv2_basis *b)
{
    return b ? b->environment_id : NULL;
}

ld_fdv2_update *ld_fdv2_update_new(enum ld_data_source_state state, ld_fdv2_change_set *change_set,
                                   const ld_data_source_error_info *error,
                                   const char *environment_id)
{
    ld_data_source_error_info e;
    ld_fdv2_update *u = NULL;
    if (ld_data_source_state_name(state) && (!error || ld__ds_error_info_prepare(error, &e)))
        u = ld__calloc(1, sizeof(*u));
    if (u && error) {
        char *message;
        u->has_error = true;
        u->error = e;
        u->error.message = NULL;
        if (copy_opt(&message, e.message) != 0)
            goto fail;
        u->error.message = message;
    }
    if (u && copy_opt(&u->environment_id, environment_id) != 0)
        goto fail;
    if (!u) {
        ld_fdv2_change_set_free(change_set);
        return NULL;
    }
    u->tag = TAG_UPDATE;
    u->state = state;
    u->change_set = change_set;
    return u;
fail:
    ld__free((char *)u->error.message);
    ld__free(u);
    ld_fdv2_change_set_free(change_set);
    return NULL;
}

void ld_fdv2_update_free(ld_fdv2_update *u)
{
    if (!u)
        return;
    ld_fdv2_change_set_free(u->change_set);
    ld__free((char *)u->error.message);
    ld__free(u->environment_id);
    u->tag = 0;
    ld__free(u);
}

int ld_fdv2_update_state(const ld_fdv2_update *u)
{
    return u ? (int)u->state : LD_EINVAL;
}

const ld_fdv2_change_set *ld_fdv2_update_change_set(const ld_fdv2_update *u)
{
    return u ? u->change_set : NULL;
}

const ld_data_source_error_info *ld_fdv2_update_error(const ld_fdv2_update *u)
{
    return u && u->has_error ? &u->error : NULL;
}

const char *ld_fdv2_update_environment_id(const ld_fdv2_update *u)
{
    return u ? u->environment_id : NULL;
}

/* ---- in futures --------------------------------------------------------------- */

static void basis_free_fn(void *p)
{
    ld_fdv2_basis_free(p);
}

static void update_free_fn(void *p)
{
    ld_fdv2_update_free(p);
}

int ld_fdv2_fulfill_basis(ld_future *out, ld_fdv2_basis *basis)
{
    if (!basis)
        return LD_EINVAL;
    return ld_future_fulfill_ptr(out, basis, basis_free_fn);
}

int ld_fdv2_fulfill_update(ld_future *out, ld_fdv2_update *update)
{
    if (!update)
        return LD_EINVAL;
    return ld_future_fulfill_ptr(out, update, update_free_fn);
}

/* A future's pointer is ours when it comes with our free function: only
 * then is it read (any other pointer may be anything, even no address). */
const ld_fdv2_basis *ld_fdv2_future_basis(const ld_future *f)
{
    if (ld__future_ptr_free_fn(f) != basis_free_fn)
        return NULL;
    const ld_fdv2_basis *b = ld_future_ptr(f);
    return b && b->tag == TAG_BASIS ? b : NULL;
}

const ld_fdv2_update *ld_fdv2_future_update(const ld_future *f)
{
    if (ld__future_ptr_free_fn(f) != update_free_fn)
        return NULL;
    const ld_fdv2_update *u = ld_future_ptr(f);
    return u && u->tag == TAG_UPDATE ? u : NULL;
}

/* ---- initializer -------------------------------------------------------------- */

struct ld_initializer {
    struct ld__component c; /* first: the skeleton (front-internal.h) */
    const struct ld_initializer_ops *ops;
};

ld_initializer *ld_initializer_new(struct event_base *base, const struct ld_initializer_ops *ops,
                                   void *impl)
{
    if (!base || !ops || ops->version != LD_INITIALIZER_OPS_VERSION || !ops->fetch)
        return NULL;
    ld_initializer *in = ld__component_new(sizeof(*in), base, impl, "initializer is stopped");
    if (in)
        in->ops = ops;
    return in;
}

const char *ld_initializer_name(const ld_initializer *in)
{
    return in ? ld__component_text(&in->c, in->ops->name) : "(null)";
}

ld_future *ld_initializer_fetch(ld_initializer *in)
{
    return in ? ld__component_call(&in->c, NULL, in->ops->fetch) : NULL;
}

ld_future *ld_initializer_stop(ld_initializer *in)
{
    return in ? ld__component_close(&in->c, true, in->ops->stop) : NULL;
}

void ld_initializer_free(ld_initializer *in)
{
    if (in)
        ld__component_free(&in->c, in->ops->free);
}

/* ---- synchronizer ------------------------------------------------------------- */

struct ld_synchronizer {
    struct ld__component c; /* first: the skeleton (front-internal.h) */
    const struct ld_synchronizer_ops *ops;
};

void *ld__synchronizer_impl(const ld_synchronizer *sync, const struct ld_synchronizer_ops *ops)
{
    return sync && sync->ops == ops ? sync->c.impl : NULL;
}

ld_synchronizer *ld_synchronizer_new(struct event_base *base, const struct ld_synchronizer_ops *ops,
                                     void *impl)
{
    if (!base || !ops || ops->version < 1 || ops->version > LD_SYNCHRONIZER_OPS_VERSION ||
        !ops->next)
        return NULL;
    ld_synchronizer *s = ld__component_new(sizeof(*s), base, impl, "synchronizer is stopped");
    if (s)
        s->ops = ops;
    return s;
}

const char *ld_synchronizer_name(const ld_synchronizer *s)
{
    return s ? ld__component_text(&s->c, s->ops->name) : "(null)";
}

ld_future *ld_synchronizer_next(ld_synchronizer *s)
{
    return s ? ld__component_call(&s->c, NULL, s->ops->next) : NULL;
}

ld_future *ld_synchronizer_stop(ld_synchronizer *s)
{
    return s ? ld__component_close(&s->c, true, s->ops->stop) : NULL;
}

int ld_synchronizer_refresh(ld_synchronizer *s)
{
    if (!s)
        return LD_EINVAL;
    if (s->ops->version >= 2 && s->ops->refresh && !ld__front_closed(&s->c.front))
        s->ops->refresh(s->c.impl);
    return 0;
}

void ld_synchronizer_free(ld_synchronizer *s)
{
    if (s)
        ld__component_free(&s->c, s->ops->free);
}
