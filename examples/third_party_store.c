/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * third_party_store: how to write your own store, and how to prove it right.
 *
 * "jsonstore" keeps its data in one jansson object, {namespace: {key: item}},
 * and answers like a store on the network would: each operation joins a
 * queue, and the queue is worked off later, from the event loop. It is
 * written against the implementer's half of store.h (struct ld_store_ops +
 * ld_store_new()); the front layer does the rest (validation, closing, order
 * of results, cancelling what is in flight at free).
 *
 * main() then runs the whole store contract of libldasync-testing on it with
 * Check, exactly as the memory store runs it; Check prints the number of
 * failed tests, and the exit status is 0 only if there were none. `make`
 * builds it and `make check` runs it.
 *
 *     ./examples/third_party_store                       run the contract
 *     CK_VERBOSITY=verbose ./examples/third_party_store  list every test
 */
#include <event2/event.h>
#include <stdlib.h>

#include <ldasync/testing.h>

/* ---- the store -------------------------------------------------------------- */

enum op_type { OP_GET, OP_ALL, OP_INIT, OP_UPSERT, OP_DELETE, OP_INITIALIZED };

/* One queued operation. The front layer keeps its inputs alive only for the
 * duration of the call, so the queue takes its own references and copies. */
struct op {
    struct op *next;
    enum op_type type;
    const char *ns; /* the kind's namespace (static) */
    json_t *key;    /* a JSON string, or NULL */
    json_t *value;  /* the item, the tombstone or the data set, or NULL */
    ld_future *out;
};

struct jsonstore {
    json_t *data; /* namespace -> {key -> item}, tombstones included */
    bool inited;
    struct event *work; /* runs the queue */
    struct op *head, *tail;
};

static json_t *items_of(struct jsonstore *js, const char *ns)
{
    json_t *items = json_object_get(js->data, ns);
    if (!items) {
        items = json_object();
        if (json_object_set_new(js->data, ns, items) != 0)
            return NULL;
    }
    return items;
}

/* Stores `item` if it is newer than what is there: 1 applied, 0 not, <0. */
static int write_item(struct jsonstore *js, const char *ns, const char *key, json_t *item)
{
    json_t *items = items_of(js, ns);
    if (!items)
        return LD_ENOMEM;
    json_t *old = json_object_get(items, key);
    if (old && ld_item_version(old) >= ld_item_version(item))
        return 0;
    return json_object_set(items, key, item) == 0 ? 1 : LD_ENOMEM;
}

/* A new object of the live (not deleted) items of a namespace. */
static json_t *live_items(struct jsonstore *js, const char *ns)
{
    json_t *live = json_object();
    const char *key;
    json_t *item;
    json_object_foreach(json_object_get(js->data, ns), key, item)
    {
        if (live && !ld_item_is_deleted(item) && json_object_set(live, key, item) != 0) {
            json_decref(live);
            live = NULL;
        }
    }
    return live;
}

/* A new data set: the namespaces copied, the items shared. */
static json_t *copy_data(const json_t *all_data)
{
    json_t *copy = json_object();
    const char *ns;
    size_t ns_len;
    json_t *items;
    /* with their length: a namespace "features\0x" is not "features" */
    json_object_keylen_foreach((json_t *)all_data, ns, ns_len, items)
    {
        if (copy && json_object_setn_new(copy, ns, ns_len, json_copy(items)) != 0) {
            json_decref(copy);
            copy = NULL;
        }
    }
    return copy;
}

static void complete_write(ld_future *out, int rc)
{
    if (rc < 0)
        ld_future_reject(out, rc, "jsonstore: write failed");
    else
        ld_future_fulfill_bool(out, rc == 1);
}

static void run_op(struct jsonstore *js, struct op *op)
{
    const char *key = json_string_value(op->key);
    json_t *item, *fresh;
    switch (op->type) {
    case OP_GET:
        item = json_object_get(json_object_get(js->data, op->ns), key);
        ld_future_fulfill_json(op->out,
                               item && !ld_item_is_deleted(item) ? json_incref(item) : NULL);
        break;
    case OP_ALL:
        if ((item = live_items(js, op->ns)) != NULL)
            ld_future_fulfill_json(op->out, item);
        else
            ld_future_reject(op->out, LD_ENOMEM, NULL);
        break;
    case OP_INIT:
        if ((fresh = copy_data(op->value)) != NULL) {
            json_decref(js->data);
            js->data = fresh;
            js->inited = true;
            ld_future_fulfill(op->out);
        } else {
            ld_future_reject(op->out, LD_ENOMEM, NULL);
        }
        break;
    case OP_UPSERT:
    case OP_DELETE:
        complete_write(op->out, write_item(js, op->ns, key, op->value));
        break;
    case OP_INITIALIZED:
        ld_future_fulfill_bool(op->out, js->inited);
        break;
    }
}

static void op_free(struct op *op)
{
    json_decref(op->key);
    json_decref(op->value);
    ld_future_unref(op->out);
    free(op);
}

/* The loop callback: works off everything queued, oldest first. */
static void work(evutil_socket_t fd, short what, void *arg)
{
    struct jsonstore *js = arg;
    (void)fd;
    (void)what;
    struct op *op = js->head;
    js->head = js->tail = NULL;
    while (op) {
        struct op *next = op->next;
        run_op(js, op);
        op_free(op);
        op = next;
    }
}

/* Queues an operation; on failure completes `out` at once (allowed: the
 * front layer orders results). Takes `value` (a new reference). */
static void enqueue(struct jsonstore *js, enum op_type type, const ld_kind *kind, const char *key,
                    json_t *value, ld_future *out)
{
    struct op *op = calloc(1, sizeof(*op));
    if (!op || (key && !(op->key = json_string(key)))) {
        free(op);
        json_decref(value);
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        return;
    }
    op->type = type;
    op->ns = kind ? ld_kind_namespace(kind) : NULL;
    op->value = value;
    op->out = out;
    if (js->tail)
        js->tail->next = op;
    else
        js->head = op;
    js->tail = op;
    event_active(js->work, EV_TIMEOUT, 0);
}

static void js_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    enqueue(impl, OP_GET, kind, key, NULL, out);
}

static void js_all(void *impl, const ld_kind *kind, ld_future *out)
{
    enqueue(impl, OP_ALL, kind, NULL, NULL, out);
}

static void js_init(void *impl, const json_t *all_data, ld_future *out)
{
    /* a copy of the containers now: the caller may reuse them after the call */
    json_t *copy = copy_data(all_data);
    if (!copy) {
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        return;
    }
    enqueue(impl, OP_INIT, NULL, NULL, copy, out);
}

static void js_upsert(void *impl, const ld_kind *kind, const json_t *item,
                      const struct ld_item_info *info, ld_future *out)
{
    enqueue(impl, OP_UPSERT, kind, info->key, json_incref((json_t *)item), out);
}

static void js_del(void *impl, const ld_kind *kind, const char *key, int64_t version,
                   ld_future *out)
{
    enqueue(impl, OP_DELETE, kind, key, ld_tombstone_new(key, version), out);
}

static void js_initialized(void *impl, ld_future *out)
{
    enqueue(impl, OP_INITIALIZED, NULL, NULL, NULL, out);
}

/* Called by ld_store_free(): the front layer has cancelled the futures of
 * the operations still queued; release them without running them. */
static void js_free(void *impl)
{
    struct jsonstore *js = impl;
    for (struct op *op = js->head, *next; op; op = next) {
        next = op->next;
        op_free(op);
    }
    event_free(js->work);
    json_decref(js->data);
    free(js);
}

static const char *js_describe(void *impl)
{
    (void)impl;
    return "jsonstore";
}

static const struct ld_store_ops jsonstore_ops = {
    .version = LD_STORE_OPS_VERSION,
    .get = js_get,
    .all = js_all,
    .init = js_init,
    .upsert = js_upsert,
    .del = js_del,
    .initialized = js_initialized,
    .close = NULL, /* nothing to flush: the front layer fulfils close */
    .free = js_free,
    .describe = js_describe,
};

static ld_store *jsonstore_new(struct event_base *base)
{
    struct jsonstore *js = calloc(1, sizeof(*js));
    if (!js)
        return NULL;
    js->data = json_object();
    js->work = event_new(base, -1, 0, work, js);
    ld_store *store = js->data && js->work ? ld_store_new(base, &jsonstore_ops, js) : NULL;
    if (!store)
        js_free(js);
    return store;
}

/* ---- the contract ------------------------------------------------------------- */

static ld_store *new_store(struct event_base *base, void *arg)
{
    (void)arg;
    return jsonstore_new(base);
}

int main(void)
{
    static const struct ld_store_contract_factory factory = {
        .version = LD_STORE_CONTRACT_FACTORY_VERSION,
        .new_store = new_store, /* no setup or teardown: nothing outside the process */
    };
    Suite *suite = suite_create("third_party_store");
    if (ld_store_contract_add_tests(suite, "jsonstore", &factory, NULL) != 0)
        return EXIT_FAILURE;
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_ENV);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    /* not the count itself: 77 and 99 mean "skipped" and "hard error" to make */
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
