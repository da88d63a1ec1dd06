/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * fuzz/store_ops.c: libFuzzer target for stores (include/ldasync/store.h).
 *
 * The input is decoded into a sequence of store operations (get and all,
 * also through the read-only view; upsert, delete, init, initialized, close,
 * free and make a new store, run the loop, release held results, bad input
 * of many kinds, and failure injection) over two kinds and eight keys (one longer than 40 bytes),
 * with small versions and a few huge ones. The sequence runs three times: on the memory store
 * (ld_memory_store_new), on the mock store of the testing kit (ld_mock_store_new), where the
 * failure injection ops arm ld_mock_store_fail_next(), and on a store of this file's own made with
 * ld_store_new() that answers from an inner memory store only when the input
 * says, in any order (the front layer must restore issue order). Each run is
 * compared with a model written here
 * from store.h and testing.h: plain arrays, the version rule, tombstones,
 * initialized, closed, bad input (LD_EINVAL, store unchanged), injected
 * failures (the code injected, store unchanged). Any difference calls
 * abort().
 *
 * The expected result of each operation is computed when it is issued;
 * results are checked in issue order once the loop has run (after waiting for
 * the last one, every earlier one must be complete: issue order). Some get
 * and all results are kept for a while after they were checked and checked
 * again later: they must still read what they read at first, across later
 * writes, inits and even the store's free. The target keeps no reference to
 * the items it gives the store (the model holds deep copies), so an item
 * the store lets go of too early is a use after free for ASan.
 *
 * Uses the public API only (and the testing kit's, for the mock store).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>
#include <ldasync/ldasync.h>
#include <ldasync/testing.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t g_line; /* the operation being checked, for messages */

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "fuzz/store_ops.c:%d: check failed (%s store, op %zu): %s\n", \
                    __LINE__, STORE_NAMES[g_store], g_line, #cond);                       \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

/* The stores a sequence runs on: the memory store, the mock store, and a
 * store of this file's own (ld_store_new()) that keeps every operation
 * pending until the input (or a flush) says to complete it, in any order,
 * from a memory store inside: the front layer's queue, which restores issue
 * order, is used only by such stores. */
enum { S_MEMORY, S_MOCK, S_DEFERRED };
static const char *const STORE_NAMES[] = {"memory", "mock", "deferred"};
static int g_store; /* the store the current run uses */
#define g_mock (g_store == S_MOCK)
static struct event_base *g_base;

#define NKINDS 2
#define NKEYS 8
static const char *const KEYS[NKEYS] = {
    "a",
    "b",
    "flag-x",
    "seg.1",
    "k\xc3\xa9y",
    "with space",
    "a-long-key-of-more-than-forty-bytes-0123456789-abcdefghij",
    "z",
};

static const ld_kind *kind_of(int k)
{
    return k == 0 ? ld_kind_features() : ld_kind_segments();
}

/* ---- the model ------------------------------------------------------------ */

struct slot {
    bool present; /* an item or a tombstone is stored */
    bool deleted;
    int64_t version;
    json_t *item; /* a deep copy of the live item (NULL for a tombstone) */
};

#define NOPS 7 /* enum ld_mock_op, LD_MOCK_OP_ANY included */

struct model {
    struct slot s[NKINDS][NKEYS];
    bool initialized;
    bool closed;
    int fail_left[NOPS];
    int fail_code[NOPS];
    int calls[NOPS];      /* LD_MOCK_OP_ANY unused: the sum */
    int inits;            /* inits that reached the mock */
    unsigned gen[NKINDS]; /* changes of each kind's data (applied writes, inits) */
};

static void model_clear_data(struct model *m)
{
    for (int k = 0; k < NKINDS; k++)
        for (int i = 0; i < NKEYS; i++) {
            json_decref(m->s[k][i].item);
            m->s[k][i] = (struct slot){0};
        }
}

static void model_reset(struct model *m)
{
    model_clear_data(m);
    memset(m, 0, sizeof(*m));
}

static int key_index(const char *key)
{
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(key, KEYS[i]) == 0)
            return i;
    return -1;
}

/* The version rule: applied if nothing is stored or the stored version is
 * strictly lower. */
static bool model_write(struct model *m, int k, int i, int64_t version, bool deleted,
                        const json_t *item)
{
    struct slot *s = &m->s[k][i];
    if (s->present && s->version >= version)
        return false;
    json_decref(s->item);
    s->present = true;
    s->deleted = deleted;
    s->version = version;
    s->item = deleted ? NULL : json_deep_copy(item);
    CHECK(deleted || s->item);
    m->gen[k]++;
    return true;
}

/* For an operation that passed validation on an open store: does the mock
 * fail it? (Counts it, as the mock does.) Returns the code, or 0. */
static int model_reaches(struct model *m, enum ld_mock_op op)
{
    if (!g_mock)
        return 0;
    m->calls[op]++;
    int armed = m->fail_left[op] > 0 ? (int)op : (int)LD_MOCK_OP_ANY;
    if (m->fail_left[armed] == 0)
        return 0;
    m->fail_left[armed]--;
    return m->fail_code[armed];
}

static json_t *model_all(const struct model *m, int k)
{
    json_t *o = json_object();
    CHECK(o);
    for (int i = 0; i < NKEYS; i++) {
        const struct slot *s = &m->s[k][i];
        if (s->present && !s->deleted)
            CHECK(json_object_set(o, KEYS[i], s->item) == 0);
    }
    return o;
}

/* ---- the deferred store ---------------------------------------------------- */

/* An implementation of struct ld_store_ops that answers every operation
 * from an inner memory store, but only when told: each operation is
 * applied to the inner store at once (so the model applies it at issue
 * too) and its `out` waits in a list until deferred_complete() forwards the
 * inner result to it, in any order. */
struct deferred_op {
    ld_future *inner; /* the inner store's answer */
    ld_future *out;   /* the front layer's future, ours to complete */
};

#define MAXDEFER 1024

struct deferred {
    ld_store *inner;
    struct deferred_op ops[MAXDEFER];
    size_t n;
};

/* Completes the i-th waiting operation (out adopts the inner result). */
static void deferred_complete(struct deferred *d, size_t i)
{
    struct deferred_op op = d->ops[i];
    memmove(&d->ops[i], &d->ops[i + 1], (d->n - i - 1) * sizeof(d->ops[0]));
    d->n--;
    /* Steals op.inner; LD_EALREADY if the front layer cancelled `out`. */
    (void)ld_future_forward(op.out, op.inner);
    ld_future_unref(op.out);
}

static void deferred_push(struct deferred *d, ld_future *inner, ld_future *out)
{
    if (d->n == MAXDEFER)
        deferred_complete(d, 0);
    d->ops[d->n++] = (struct deferred_op){inner, out};
}

static void d_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    struct deferred *d = impl;
    deferred_push(d, ld_store_get(d->inner, kind, key), out);
}

static void d_all(void *impl, const ld_kind *kind, ld_future *out)
{
    struct deferred *d = impl;
    deferred_push(d, ld_store_all(d->inner, kind), out);
}

static void d_init(void *impl, const json_t *all_data, ld_future *out)
{
    struct deferred *d = impl;
    deferred_push(d, ld_store_init(d->inner, all_data), out);
}

static void d_upsert(void *impl, const ld_kind *kind, const json_t *item,
                     const struct ld_item_info *info, ld_future *out)
{
    struct deferred *d = impl;
    (void)info;
    deferred_push(d, ld_store_upsert(d->inner, kind, item), out);
}

static void d_del(void *impl, const ld_kind *kind, const char *key, int64_t version, ld_future *out)
{
    struct deferred *d = impl;
    deferred_push(d, ld_store_delete(d->inner, kind, key, version), out);
}

static void d_initialized(void *impl, ld_future *out)
{
    struct deferred *d = impl;
    deferred_push(d, ld_store_initialized(d->inner), out);
}

static void d_free(void *impl)
{
    struct deferred *d = impl;
    for (size_t i = 0; i < d->n; i++) {
        ld_future_unref(d->ops[i].inner);
        ld_future_unref(d->ops[i].out);
    }
    ld_store_free(d->inner);
    free(d);
}

static const char *d_describe(void *impl)
{
    (void)impl;
    return "deferred";
}

static const struct ld_store_ops deferred_ops = {
    .version = LD_STORE_OPS_VERSION,
    .get = d_get,
    .all = d_all,
    .init = d_init,
    .upsert = d_upsert,
    .del = d_del,
    .initialized = d_initialized,
    .close = NULL,
    .free = d_free,
    .describe = d_describe,
};

/* A deferred store; *impl is set to its implementation (valid until the
 * store is freed). */
static ld_store *deferred_new(struct event_base *base, struct deferred **impl)
{
    struct deferred *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->inner = ld_memory_store_new(base);
    ld_store *s = d->inner ? ld_store_new(base, &deferred_ops, d) : NULL;
    if (!s) {
        ld_store_free(d->inner);
        free(d);
        return NULL;
    }
    *impl = d;
    return s;
}

/* ---- expected results ----------------------------------------------------- */

enum expect { X_ERR, X_VOID, X_BOOL, X_ITEM, X_ALL };

struct pending {
    ld_future *f;
    enum expect x;
    int err;     /* X_ERR */
    bool b;      /* X_BOOL */
    json_t *j;   /* X_ITEM (NULL: no item), X_ALL: what it must read */
    bool hold;   /* keep it after the check */
    size_t line; /* the operation's number in the sequence */
    int kind;    /* X_ALL: the kind, and its model's gen when issued */
    unsigned gen;
};

#define MAXPEND 512
#define MAXHELD 12

struct run {
    struct event_base *base;
    ld_store *store;
    struct model m;
    struct pending pend[MAXPEND];
    size_t npend;
    struct pending held[MAXHELD];
    size_t nheld, held_next;
    size_t line;
    /* The memory store's all: "the same object again while nothing
     * changed". The last snapshot of each kind (compared, never read). */
    const json_t *snap[NKINDS];
    unsigned snap_gen[NKINDS];
    bool drop;                 /* release the next operation's future at once, unread */
    struct deferred *deferred; /* S_DEFERRED: the implementation */
};

static void pending_release(struct pending *p)
{
    ld_future_unref(p->f);
    json_decref(p->j);
    memset(p, 0, sizeof(*p));
}

/* What a complete future must read. */
static void check_result(const struct pending *p)
{
    const ld_future *f = p->f;
    g_line = p->line;
    CHECK(!ld_future_is_pending(f));
    if (p->x == X_ERR) {
        CHECK(ld_future_is_rejected(f));
        CHECK(ld_future_error(f) == p->err);
        CHECK(ld_future_error_message(f) != NULL);
        return;
    }
    if (!ld_future_is_fulfilled(f))
        fprintf(stderr, "rejected: %s (%s)\n", ld_err_name(ld_future_error(f)),
                ld_future_error_message(f));
    CHECK(ld_future_is_fulfilled(f));
    switch (p->x) {
    case X_VOID:
        break;
    case X_BOOL:
        CHECK(ld_future_bool(f) == p->b);
        break;
    case X_ITEM:
        if (p->j == NULL)
            CHECK(ld_future_json(f) == NULL);
        else
            CHECK(json_equal(ld_future_json(f), p->j));
        break;
    case X_ALL:
        CHECK(json_is_object(ld_future_json(f)));
        CHECK(json_equal(ld_future_json(f), p->j));
        break;
    case X_ERR:
        break;
    }
}

static void check_held(struct run *r)
{
    for (size_t i = 0; i < r->nheld; i++)
        check_result(&r->held[i]);
}

static void hold(struct run *r, struct pending *p)
{
    if (r->nheld < MAXHELD) {
        r->held[r->nheld++] = *p;
    } else {
        pending_release(&r->held[r->held_next]);
        r->held[r->held_next] = *p;
        r->held_next = (r->held_next + 1) % MAXHELD;
    }
    memset(p, 0, sizeof(*p));
}

/* Runs the loop until every operation issued has completed, and checks
 * them in issue order. */
static void flush(struct run *r)
{
    /* The deferred store: answer what waits, newest first. */
    while (g_store == S_DEFERRED && r->deferred->n > 0)
        deferred_complete(r->deferred, r->deferred->n - 1);
    if (r->npend > 0) {
        CHECK(ld_future_wait(r->pend[r->npend - 1].f) == 0);
        /* Futures of one store complete in issue order: the last one is
         * complete, so all are. */
        for (size_t i = 0; i < r->npend; i++) {
            g_line = r->pend[i].line;
            CHECK(!ld_future_is_pending(r->pend[i].f));
        }
    }
    for (size_t i = 0; i < r->npend; i++) {
        check_result(&r->pend[i]);
        struct pending *p = &r->pend[i];
        if (g_store == S_MEMORY && p->x == X_ALL) {
            const json_t *got = ld_future_json(p->f);
            if (r->snap[p->kind] && r->snap_gen[p->kind] == p->gen)
                CHECK(got == r->snap[p->kind]);
            r->snap[p->kind] = got;
            r->snap_gen[p->kind] = p->gen;
        }
        if (r->pend[i].hold && (r->pend[i].x == X_ITEM || r->pend[i].x == X_ALL))
            hold(r, &r->pend[i]);
        else
            pending_release(&r->pend[i]);
    }
    r->npend = 0;
    /* Let the store's own loop work run (letting go of replaced items). */
    for (int i = 0; i < 4; i++)
        event_base_loop(r->base, EVLOOP_NONBLOCK);
    check_held(r);
}

static void issue(struct run *r, ld_future *f, enum expect x, int err, bool b, json_t *j, bool keep)
{
    g_line = r->line;
    CHECK(f != NULL);
    if (r->drop) {
        /* Nobody waits for it: the write still happened (the memory store
         * writes within the call, the mock answers at once), and the
         * store must cope with a future released while maybe pending. */
        r->drop = false;
        ld_future_unref(f);
        json_decref(j);
        return;
    }
    if (r->npend == MAXPEND)
        flush(r);
    r->pend[r->npend++] =
        (struct pending){.f = f, .x = x, .err = err, .b = b, .j = j, .hold = keep, .line = r->line};
}

/* ---- reading the input ---------------------------------------------------- */

struct input {
    const uint8_t *p;
    size_t n;
};

static uint8_t u8(struct input *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static int64_t version_of(uint8_t b)
{
    switch (b & 15) {
    case 15:
        return INT64_MAX;
    case 14:
        return (int64_t)1 << 40;
    default:
        return b & 15;
    }
}

/* A valid item for key i from the input: "key", "version", maybe "deleted",
 * maybe a "payload" (so that items of the same key and version differ). */
static json_t *make_item(struct input *in, int i, int64_t *version, bool *deleted)
{
    uint8_t f = u8(in);
    *version = version_of(u8(in));
    *deleted = (f & 3) == 3;
    json_t *it = json_pack("{s:s, s:I}", "key", KEYS[i], "version", (json_int_t)*version);
    CHECK(it);
    if (f & 2)
        CHECK(json_object_set_new(it, "deleted", json_boolean(*deleted)) == 0);
    if (f & 4)
        CHECK(json_object_set_new(it, "payload", json_integer(f >> 3)) == 0);
    if (f & 8) {
        json_t *pre = json_pack("[{s:s}]", "key", KEYS[(f >> 4) & 7]);
        CHECK(pre && json_object_set_new(it, "prerequisites", pre) == 0);
    }
    return it;
}

/* ---- the operations ------------------------------------------------------- */

static bool open_store(const struct run *r)
{
    return !r->m.closed;
}

/* The store's read-only view: the same one every time, with the store's
 * base and name; reads through it are the store's reads, in issue order. */
static ld_read_only_store *view(struct run *r)
{
    ld_read_only_store *v = ld_store_read_only(r->store);
    g_line = r->line;
    CHECK(v != NULL);
    CHECK(v == ld_store_read_only(r->store));
    CHECK(ld_read_only_store_base(v) == r->base);
    CHECK(strcmp(ld_read_only_store_describe(v), ld_store_describe(r->store)) == 0);
    return v;
}

static void op_get(struct run *r, struct input *in, uint8_t op)
{
    int k = u8(in) & 1, i = u8(in) & 7;
    ld_future *f = op & 0x40 ? ld_read_only_store_get(view(r), kind_of(k), KEYS[i])
                             : ld_store_get(r->store, kind_of(k), KEYS[i]);
    int rc;
    if (!open_store(r)) {
        issue(r, f, X_ERR, LD_ECLOSED, false, NULL, false);
    } else if ((rc = model_reaches(&r->m, LD_MOCK_OP_GET)) != 0) {
        issue(r, f, X_ERR, rc, false, NULL, false);
    } else {
        const struct slot *s = &r->m.s[k][i];
        json_t *want = s->present && !s->deleted ? json_deep_copy(s->item) : NULL;
        issue(r, f, X_ITEM, 0, false, want, op & 0x80);
    }
}

static void op_all(struct run *r, struct input *in, uint8_t op)
{
    int k = u8(in) & 1;
    ld_future *f = op & 0x40 ? ld_read_only_store_all(view(r), kind_of(k))
                             : ld_store_all(r->store, kind_of(k));
    int rc;
    if (!open_store(r))
        issue(r, f, X_ERR, LD_ECLOSED, false, NULL, false);
    else if ((rc = model_reaches(&r->m, LD_MOCK_OP_ALL)) != 0)
        issue(r, f, X_ERR, rc, false, NULL, false);
    else {
        issue(r, f, X_ALL, 0, false, model_all(&r->m, k), op & 0x80);
        r->pend[r->npend - 1].kind = k;
        r->pend[r->npend - 1].gen = r->m.gen[k];
    }
}

static void op_upsert(struct run *r, struct input *in)
{
    int k = u8(in) & 1, i = u8(in) & 7;
    int64_t version;
    bool deleted;
    json_t *item = make_item(in, i, &version, &deleted);
    ld_future *f = ld_store_upsert(r->store, kind_of(k), item);
    int rc;
    if (!open_store(r))
        issue(r, f, X_ERR, LD_ECLOSED, false, NULL, false);
    else if ((rc = model_reaches(&r->m, LD_MOCK_OP_UPSERT)) != 0)
        issue(r, f, X_ERR, rc, false, NULL, false);
    else
        issue(r, f, X_BOOL, 0, model_write(&r->m, k, i, version, deleted, item), NULL, false);
    json_decref(item); /* borrowed by the store: it keeps its own reference */
}

static void op_delete(struct run *r, struct input *in)
{
    int k = u8(in) & 1, i = u8(in) & 7;
    int64_t version = version_of(u8(in));
    ld_future *f = ld_store_delete(r->store, kind_of(k), KEYS[i], version);
    int rc;
    if (!open_store(r))
        issue(r, f, X_ERR, LD_ECLOSED, false, NULL, false);
    else if ((rc = model_reaches(&r->m, LD_MOCK_OP_DELETE)) != 0)
        issue(r, f, X_ERR, rc, false, NULL, false);
    else
        issue(r, f, X_BOOL, 0, model_write(&r->m, k, i, version, true, NULL), NULL, false);
}

/* A valid data set from the input: for each kind a few items, filed under
 * their own keys; sometimes a namespace of no known kind too. */
static json_t *make_data(struct input *in)
{
    uint8_t f = u8(in);
    json_t *all = json_object();
    CHECK(all);
    for (int k = 0; k < NKINDS; k++) {
        if (f & (1 << k))
            continue; /* namespace absent: becomes empty */
        json_t *coll = json_object();
        CHECK(coll);
        int n = u8(in) & 3;
        for (int j = 0; j < n; j++) {
            int i = u8(in) & 7;
            int64_t v;
            bool d;
            CHECK(json_object_set_new(coll, KEYS[i], make_item(in, i, &v, &d)) == 0);
        }
        CHECK(json_object_set_new(all, ld_kind_namespace(kind_of(k)), coll) == 0);
    }
    if (f & 4) {
        json_t *other = json_pack("{s:{s:s, s:i}}", "o", "key", "o", "version", 1);
        CHECK(other && json_object_set_new(all, "other", other) == 0);
    }
    return all;
}

static void model_init(struct model *m, const json_t *all)
{
    model_clear_data(m);
    for (int k = 0; k < NKINDS; k++)
        m->gen[k]++;
    for (int k = 0; k < NKINDS; k++) {
        const json_t *coll = json_object_get(all, ld_kind_namespace(kind_of(k)));
        const char *key;
        json_t *item;
        json_object_foreach((json_t *)coll, key, item)
        {
            int i = key_index(key);
            CHECK(i >= 0);
            struct ld_item_info info;
            CHECK(ld_item_parse(item, &info, NULL) == 0);
            CHECK(model_write(m, k, i, info.version, info.deleted, item));
        }
    }
    m->initialized = true;
}

static void op_init(struct run *r, struct input *in)
{
    json_t *all = make_data(in);
    ld_future *f = ld_store_init(r->store, all);
    int rc;
    if (!open_store(r)) {
        issue(r, f, X_ERR, LD_ECLOSED, false, NULL, false);
    } else {
        if (g_mock)
            r->m.inits++;
        if ((rc = model_reaches(&r->m, LD_MOCK_OP_INIT)) != 0) {
            issue(r, f, X_ERR, rc, false, NULL, false);
        } else {
            model_init(&r->m, all);
            issue(r, f, X_VOID, 0, false, NULL, false);
        }
    }
    json_decref(all);
}

static void op_initialized(struct run *r)
{
    ld_future *f = ld_store_initialized(r->store);
    int rc;
    if (!open_store(r))
        issue(r, f, X_ERR, LD_ECLOSED, false, NULL, false);
    else if ((rc = model_reaches(&r->m, LD_MOCK_OP_INITIALIZED)) != 0)
        issue(r, f, X_ERR, rc, false, NULL, false);
    else
        issue(r, f, X_BOOL, 0, r->m.initialized, NULL, false);
}

static void op_close(struct run *r)
{
    ld_future *f = ld_store_close(r->store);
    r->m.closed = true;
    issue(r, f, X_VOID, 0, false, NULL, false); /* closing twice fulfils again */
}

/* An item that is not valid, from the input. */
static json_t *make_bad_item(uint8_t b)
{
    switch (b % 10) {
    case 0:
        return json_pack("[s, i]", "a", 1); /* not an object */
    case 1:
        return json_string("a");
    case 2:
        return json_pack("{s:s}", "key", "a"); /* no version */
    case 3:
        return json_pack("{s:s, s:i}", "key", "a", "version", -1);
    case 4:
        return json_pack("{s:s, s:s}", "key", "a", "version", "1");
    case 5:
        return json_pack("{s:s, s:f}", "key", "a", "version", 1.0);
    case 6:
        return json_pack("{s:s, s:i}", "key", "", "version", 1); /* empty key */
    case 7:
        return json_pack("{s:i, s:i}", "key", 7, "version", 1);
    case 8:
        return json_pack("{s:i}", "version", 1); /* no key */
    default:
        return json_pack("{s:s, s:i, s:i}", "key", "a", "version", 1, "deleted", 1);
    }
}

/* Data sets that are not valid. */
static json_t *make_bad_data(uint8_t b)
{
    switch (b % 6) {
    case 0:
        return json_array();
    case 1:
        return json_pack("{s:[]}", "features"); /* namespace not an object */
    case 2:                                     /* filed under another key */
        return json_pack("{s:{s:{s:s, s:i}}}", "features", "b", "key", "a", "version", 1);
    case 3: /* one bad item among good ones */
        return json_pack("{s:{s:{s:s, s:i}}, s:{s:{s:s}}}", "segments", "a", "key", "a", "version",
                         1, "features", "b", "key", "b");
    case 4: /* bad item in a namespace of no known kind: validated all the same */
        return json_pack("{s:{s:{s:s, s:i}}}", "other", "x", "key", "x", "version", -3);
    default:
        return json_string("features");
    }
}

/* Bad input: rejected with LD_EINVAL (LD_ECLOSED once closed), the store
 * unchanged, the mock never reached. */
static void op_bad(struct run *r, struct input *in)
{
    uint8_t b = u8(in), c = u8(in);
    const ld_kind *kind = kind_of(c & 1);
    ld_future *f = NULL;
    json_t *item = NULL;
    switch (b % 12) {
    case 0:
        f = ld_store_get(r->store, NULL, KEYS[c & 7]);
        break;
    case 1:
        f = ld_store_get(r->store, kind, "");
        break;
    case 2:
        f = ld_store_get(r->store, kind, NULL);
        break;
    case 3:
        f = ld_store_all(r->store, NULL);
        break;
    case 4:
        item = json_pack("{s:s, s:i}", "key", KEYS[c & 7], "version", 1);
        f = ld_store_upsert(r->store, NULL, item);
        break;
    case 5:
        item = make_bad_item(c);
        f = ld_store_upsert(r->store, kind, item);
        break;
    case 6:
        f = ld_store_upsert(r->store, kind, NULL);
        break;
    case 7:
        f = ld_store_delete(r->store, kind, KEYS[c & 7], c & 0x80 ? INT64_MIN : -1 - (c >> 4));
        break;
    case 8:
        f = ld_store_delete(r->store, kind, c & 1 ? "" : NULL, 1);
        break;
    case 9:
        f = ld_store_delete(r->store, NULL, KEYS[c & 7], 1);
        break;
    case 10:
        item = make_bad_data(c);
        f = ld_store_init(r->store, item);
        break;
    default:
        f = ld_store_init(r->store, NULL);
        break;
    }
    json_decref(item);
    issue(r, f, X_ERR, open_store(r) ? LD_EINVAL : LD_ECLOSED, false, NULL, false);
}

/* Failure injection. On the mock store it arms ld_mock_store_fail_next()
 * (the model counts it down as the mock does); on the memory store the
 * call must fail with LD_EINVAL: not a mock. Bad arguments are refused. */
static void op_fail(struct run *r, struct input *in)
{
    uint8_t a = u8(in), b = u8(in);
    int op = a % 8; /* 7: not an enum ld_mock_op */
    int n = (a >> 3) & 3;
    if ((a >> 5) == 7)
        n = -1;
    static const int codes[] = {LD_ESTORE, LD_EIO, -77, LD_ETIMEDOUT, LD_ESTORE, -1, 0, 3};
    int code = codes[b & 7];
    int rc = ld_mock_store_fail_next(r->store, (enum ld_mock_op)op, n, code);
    g_line = r->line;
    if (!g_mock || op >= NOPS || n < 0 || code >= 0) {
        CHECK(rc == LD_EINVAL);
        return;
    }
    CHECK(rc == 0);
    r->m.fail_left[op] = n;
    r->m.fail_code[op] = code;
}

static void store_new(struct run *r)
{
    r->store = g_store == S_MOCK     ? ld_mock_store_new(r->base)
               : g_store == S_MEMORY ? ld_memory_store_new(r->base)
                                     : deferred_new(r->base, &r->deferred);
    CHECK(r->store != NULL);
    CHECK(strcmp(ld_store_describe(r->store), STORE_NAMES[g_store]) == 0);
    CHECK(ld_store_base(r->store) == r->base);
}

/* The mock's counters must match the model's. */
static void check_mock_counts(const struct run *r)
{
    if (!g_mock)
        return;
    int sum = 0;
    for (int op = 0; op < LD_MOCK_OP_ANY; op++) {
        CHECK(ld_mock_store_calls(r->store, (enum ld_mock_op)op) == r->m.calls[op]);
        sum += r->m.calls[op];
    }
    CHECK(ld_mock_store_calls(r->store, LD_MOCK_OP_ANY) == sum);
    CHECK(ld_mock_store_init_count(r->store) == r->m.inits);
}

/* Frees the store with operations maybe still pending: each completes as
 * expected or is cancelled; held results stay readable. Then a new store. */
static void op_free(struct run *r)
{
    check_mock_counts(r);
    ld_store_free(r->store); /* frees r->deferred (from the loop) */
    r->store = NULL;
    r->deferred = NULL;
    if (r->npend > 0)
        CHECK(ld_future_wait(r->pend[r->npend - 1].f) == 0);
    for (size_t i = 0; i < r->npend; i++) {
        struct pending *p = &r->pend[i];
        g_line = p->line;
        CHECK(!ld_future_is_pending(p->f));
        if (!(ld_future_is_rejected(p->f) && ld_future_error(p->f) == LD_ECANCELED))
            check_result(p);
        pending_release(p);
    }
    r->npend = 0;
    for (int i = 0; i < 4; i++)
        event_base_loop(r->base, EVLOOP_NONBLOCK);
    check_held(r);
    model_reset(&r->m);
    memset(r->snap, 0, sizeof(r->snap));
    store_new(r);
}

/* The deferred store answers one of the operations waiting, any of them. */
static void op_answer(struct run *r, struct input *in)
{
    uint8_t b = u8(in);
    if (g_store != S_DEFERRED || r->deferred->n == 0)
        return;
    deferred_complete(r->deferred, b % r->deferred->n);
    if (b & 0x80) /* let the loop run too */
        event_base_loop(r->base, EVLOOP_NONBLOCK);
}

static void release_held(struct run *r, uint8_t n)
{
    n = (uint8_t)(n % (MAXHELD + 1));
    while (n-- > 0 && r->nheld > 0) {
        pending_release(&r->held[0]);
        memmove(&r->held[0], &r->held[1], (r->nheld - 1) * sizeof(r->held[0]));
        memset(&r->held[--r->nheld], 0, sizeof(r->held[0]));
    }
    r->held_next = 0;
}

static void run_sequence(const uint8_t *data, size_t size, int store)
{
    static struct run r; /* large: not on the stack */
    memset(&r, 0, sizeof(r));
    g_store = store;
    struct input in = {data, size};
    /* One base for the whole process: the library keeps a small dispatcher
     * per distinct base address until exit (lib/core/loop.c), and under ASan a
     * new base rarely gets an old address, so a base per input would grow
     * that list (and libFuzzer's leak check would run after every input).
     * Each input leaves the base idle, as it found it. */
    if (!g_base)
        g_base = event_base_new();
    r.base = g_base;
    CHECK(r.base != NULL);
    store_new(&r);

    /* Ops 0..13 weighted by the table below. */
    while (in.n > 0) {
        uint8_t op = u8(&in);
        r.line++;
        switch (op & 0x1f) {
        case 0:
        case 1:
        case 2:
        case 3:
            op_get(&r, &in, op);
            break;
        case 4:
        case 5:
            op_all(&r, &in, op);
            break;
        case 6:
        case 7:
        case 8:
        case 9:
        case 10:
            r.drop = op & 0x80;
            op_upsert(&r, &in);
            break;
        case 11:
        case 12:
        case 13:
            r.drop = op & 0x80;
            op_delete(&r, &in);
            break;
        case 14:
        case 15:
            op_init(&r, &in);
            break;
        case 16:
            op_initialized(&r);
            break;
        case 17:
            if ((op & 0xe0) == 0xe0) /* rare */
                op_close(&r);
            else
                op_initialized(&r);
            break;
        case 18:
        case 19:
        case 20:
        case 21:
            flush(&r);
            break;
        case 22:
            release_held(&r, u8(&in));
            break;
        case 23:
        case 24:
        case 25:
            op_bad(&r, &in);
            break;
        case 26:
        case 27:
            op_fail(&r, &in);
            break;
        case 28:
            if ((op & 0xe0) == 0xe0) /* rare */
                op_free(&r);
            else
                flush(&r);
            break;
        case 29:
        case 30:
            op_answer(&r, &in);
            break;
        default:
            op_get(&r, &in, op);
            break;
        }
    }

    flush(&r);
    check_mock_counts(&r);
    release_held(&r, MAXHELD);
    ld_store_free(r.store);
    model_reset(&r.m);
    /* The lifetime rule of future.h: let the loop run what is queued. */
    int i;
    for (i = 0; i < 1000 && event_base_loop(r.base, EVLOOP_NONBLOCK) == 0; i++)
        ;
    CHECK(i < 1000);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* Every future a real malloc/free, so that ASan sees a use after free
     * instead of a recycled future. */
    setenv("LDASYNC_NO_POOL", "1", 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    run_sequence(data, size, S_MEMORY);
    run_sequence(data, size, S_MOCK);
    run_sequence(data, size, S_DEFERRED);
    return 0;
}
