/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* Helpers shared by the Check suites. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/http.h>
#include <openssl/evp.h>

#include <ldasync/testing.h>

#include "check_util.h"

struct event_base *ld_test_base;
int ld_test_frees;
int ld_test_order[16];
int ld_test_n_order;
int ld_test_cancels;

static struct event *guard;
static int guard_added;

/* A positive whole number from the environment variable `name`, or `dflt`. */
static long env_positive(const char *name, long dflt)
{
    const char *s = getenv(name);
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    return s && *s && !*end && v > 0 ? v : dflt;
}

/* The guard's time: LD_TEST_GUARD_SEC, or Check's CK_DEFAULT_TIMEOUT when
 * that is longer (check-valgrind sets it), times CK_TIMEOUT_MULTIPLIER (the
 * sanitizer builds in CI set it), as Check scales its own timeouts. */
static long guard_seconds(void)
{
    long base = env_positive("CK_DEFAULT_TIMEOUT", LD_TEST_GUARD_SEC);
    if (base < LD_TEST_GUARD_SEC)
        base = LD_TEST_GUARD_SEC;
    return base * env_positive("CK_TIMEOUT_MULTIPLIER", 1);
}

static void guard_fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    ck_abort_msg("test did not finish within %ld s", guard_seconds());
}

void ld_test_setup(void)
{
    ld_test_base = event_base_new();
    ck_assert_ptr_nonnull(ld_test_base);
    guard = event_new(ld_test_base, -1, 0, guard_fired, NULL);
    ck_assert_ptr_nonnull(guard);
    struct timeval tv = {guard_seconds(), 0};
    ck_assert_int_eq(event_add(guard, &tv), 0);
    guard_added = event_base_get_num_events(ld_test_base, EVENT_BASE_COUNT_ADDED);
    ld_test_frees = 0;
    ld_test_n_order = 0;
    ld_test_cancels = 0;
}

void ld_test_teardown(void)
{
    ld_test_flush(); /* the lifetime rule of future.h: run what is queued */
    event_free(guard);
    guard = NULL;
    event_base_free(ld_test_base);
    ld_test_base = NULL;
}

void ld_test_flush(void)
{
    for (int pass = 0; pass < 100000; pass++) {
        event_base_loop(ld_test_base, EVLOOP_NONBLOCK);
        if (event_base_get_num_events(ld_test_base, EVENT_BASE_COUNT_ACTIVE) == 0 &&
            event_base_get_num_events(ld_test_base, EVENT_BASE_COUNT_ADDED) <= guard_added)
            return;
    }
    ck_abort_msg("the loop did not become idle");
}

/* The helpers below run tens of thousands of times per suite: they test
 * with `if` and fail with ck_abort_msg, because every passing ck_assert
 * costs a write(2) to Check's message file. */
void ld_test_wait(ld_future *f)
{
    int rc = ld_future_wait(f);
    if (rc != 0)
        ck_abort_msg("ld_future_wait: %d", rc);
    if (ld_future_is_pending(f))
        ck_abort_msg("still pending after ld_future_wait");
}

ld_future *ld_test_done(ld_future *f)
{
    if (!f)
        ck_abort_msg("no future");
    ld_test_wait(f);
    return f;
}

ld_future *ld_test_fulfilled(ld_future *f)
{
    ld_test_done(f);
    if (!ld_future_is_fulfilled(f))
        ck_abort_msg("rejected: %s", ld_future_error_message(f));
    return f;
}

void ld_test_await_ok(ld_future *f)
{
    ld_future_unref(ld_test_fulfilled(f));
}

bool ld_test_await_bool(ld_future *f)
{
    bool v = ld_future_bool(ld_test_fulfilled(f));
    ld_future_unref(f);
    return v;
}

void ld_test_expect_error(ld_future *f, int code, const char *in_message)
{
    ld_test_done(f);
    ck_assert_msg(ld_future_error(f) == code, "expected %s, got %s", ld_err_name(code),
                  ld_err_name(ld_future_error(f)));
    if (in_message)
        ck_assert_msg(strstr(ld_future_error_message(f), in_message), "\"%s\" lacks \"%s\"",
                      ld_future_error_message(f), in_message);
    ld_future_unref(f);
}

void ld_test_note_order(ld_future *f, void *arg)
{
    (void)f;
    ck_assert_int_lt(ld_test_n_order, 16);
    ld_test_order[ld_test_n_order++] = (int)(intptr_t)arg;
}

void ld_test_watch(ld_future *f, int i)
{
    ck_assert_int_eq(
        ld_future_on_complete(ld_future_ref(f), ld_test_note_order, (void *)(intptr_t)i), 0);
}

void ld_test_count_cancel(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    ld_test_cancels++;
}

void ld_test_count_cb(ld_future *f, void *arg)
{
    (void)f;
    (*(int *)arg)++;
}

void ld_test_count_free(void *p)
{
    (void)p;
    ld_test_frees++;
}

void ld_test_script_keep(void *impl, ld_future *out)
{
    struct ld_test_script *s = impl;
    ck_assert_int_lt(s->n, 16);
    s->outs[s->n++] = out;
}

void ld_test_script_close(void *impl, ld_future *out)
{
    struct ld_test_script *s = impl;
    s->closes++;
    ld_future_fulfill(out);
    ld_future_unref(out);
}

void ld_test_script_free(void *impl)
{
    struct ld_test_script *s = impl;
    for (int i = 0; i < s->n; i++)
        ld_future_unref(s->outs[i]);
    s->n = 0;
    s->freed++;
}

const char *ld_test_script_name(void *impl)
{
    (void)impl;
    return "script";
}

static const char *const iface_names[LD_TEST_N_IFACES] = {
    "store",        "event processor", "update processor", "big segment store",
    "synchronizer", "initializer"};

const char *ld_test_iface_name(enum ld_test_iface i)
{
    return iface_names[i];
}

ld_future *ld_test_iface_op(enum ld_test_iface i, void *obj)
{
    switch (i) {
    case LD_TEST_STORE:
        return ld_store_get(obj, ld_kind_features(), "k");
    case LD_TEST_EVENT_PROCESSOR:
        return ld_event_processor_flush(obj);
    case LD_TEST_UPDATE_PROCESSOR:
        return ld_update_processor_start(obj);
    case LD_TEST_BIG_SEGMENT_STORE:
        return ld_big_segment_store_get_metadata(obj);
    case LD_TEST_SYNCHRONIZER:
        return ld_synchronizer_next(obj);
    default:
        return ld_initializer_fetch(obj);
    }
}

ld_future *ld_test_iface_close(enum ld_test_iface i, void *obj)
{
    switch (i) {
    case LD_TEST_STORE:
        return ld_store_close(obj);
    case LD_TEST_EVENT_PROCESSOR:
        return ld_event_processor_close(obj);
    case LD_TEST_UPDATE_PROCESSOR:
        return ld_update_processor_stop(obj);
    case LD_TEST_BIG_SEGMENT_STORE:
        return ld_big_segment_store_close(obj);
    case LD_TEST_SYNCHRONIZER:
        return ld_synchronizer_stop(obj);
    default:
        return ld_initializer_stop(obj);
    }
}

void ld_test_iface_free(enum ld_test_iface i, void *obj)
{
    switch (i) {
    case LD_TEST_STORE:
        ld_store_free(obj);
        break;
    case LD_TEST_EVENT_PROCESSOR:
        ld_event_processor_free(obj);
        break;
    case LD_TEST_UPDATE_PROCESSOR:
        ld_update_processor_free(obj);
        break;
    case LD_TEST_BIG_SEGMENT_STORE:
        ld_big_segment_store_free(obj);
        break;
    case LD_TEST_SYNCHRONIZER:
        ld_synchronizer_free(obj);
        break;
    default:
        ld_initializer_free(obj);
        break;
    }
}

static void script_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    (void)kind;
    (void)key;
    ld_test_script_keep(impl, out);
}

static void script_all(void *impl, const ld_kind *kind, ld_future *out)
{
    (void)kind;
    ld_test_script_keep(impl, out);
}

static void script_init(void *impl, const json_t *all_data, ld_future *out)
{
    (void)all_data;
    ld_test_script_keep(impl, out);
}

static void script_upsert(void *impl, const ld_kind *kind, const json_t *item,
                          const struct ld_item_info *info, ld_future *out)
{
    (void)kind;
    (void)item;
    (void)info;
    ld_test_script_keep(impl, out);
}

static void script_del(void *impl, const ld_kind *kind, const char *key, int64_t version,
                       ld_future *out)
{
    (void)kind;
    (void)key;
    (void)version;
    ld_test_script_keep(impl, out);
}

const struct ld_store_ops ld_test_script_store_ops = {
    .version = LD_STORE_OPS_VERSION,
    .get = script_get,
    .all = script_all,
    .init = script_init,
    .upsert = script_upsert,
    .del = script_del,
    .initialized = ld_test_script_keep,
    .close = ld_test_script_close,
    .free = ld_test_script_free,
    .describe = ld_test_script_name,
};

static int script_send(void *impl, json_t *event)
{
    (void)impl;
    (void)event;
    return 0;
}

static bool script_initialized(void *impl)
{
    (void)impl;
    return false;
}

static void script_membership(void *impl, const char *hash, ld_future *out)
{
    (void)hash;
    ld_test_script_keep(impl, out);
}

const struct ld_event_processor_ops ld_test_script_event_processor_ops = {
    .version = LD_EVENT_PROCESSOR_OPS_VERSION,
    .send_event = script_send,
    .flush = ld_test_script_keep,
    .close = ld_test_script_close,
    .free = ld_test_script_free,
};

const struct ld_update_processor_ops ld_test_script_update_processor_ops = {
    .version = LD_UPDATE_PROCESSOR_OPS_VERSION,
    .start = ld_test_script_keep,
    .initialized = script_initialized,
    .stop = ld_test_script_close,
    .free = ld_test_script_free,
};

const struct ld_big_segment_store_ops ld_test_script_big_segment_store_ops = {
    .version = LD_BIG_SEGMENT_STORE_OPS_VERSION,
    .get_metadata = ld_test_script_keep,
    .get_membership = script_membership,
    .close = ld_test_script_close,
    .free = ld_test_script_free,
    .describe = ld_test_script_name,
};

const struct ld_synchronizer_ops ld_test_script_synchronizer_ops = {
    .version = LD_SYNCHRONIZER_OPS_VERSION,
    .name = ld_test_script_name,
    .next = ld_test_script_keep,
    .stop = ld_test_script_close,
    .free = ld_test_script_free,
};

const struct ld_initializer_ops ld_test_script_initializer_ops = {
    .version = LD_INITIALIZER_OPS_VERSION,
    .name = ld_test_script_name,
    .fetch = ld_test_script_keep,
    .stop = ld_test_script_close,
    .free = ld_test_script_free,
};

void *ld_test_script_new(enum ld_test_iface i, struct ld_test_script *impl)
{
    void *obj = NULL;
    switch (i) {
    case LD_TEST_STORE:
        obj = ld_store_new(ld_test_base, &ld_test_script_store_ops, impl);
        break;
    case LD_TEST_EVENT_PROCESSOR:
        obj = ld_event_processor_new(ld_test_base, &ld_test_script_event_processor_ops, impl);
        break;
    case LD_TEST_UPDATE_PROCESSOR:
        obj = ld_update_processor_new(ld_test_base, &ld_test_script_update_processor_ops, impl);
        break;
    case LD_TEST_BIG_SEGMENT_STORE:
        obj = ld_big_segment_store_new(ld_test_base, &ld_test_script_big_segment_store_ops, impl);
        break;
    case LD_TEST_SYNCHRONIZER:
        obj = ld_synchronizer_new(ld_test_base, &ld_test_script_synchronizer_ops, impl);
        break;
    default:
        obj = ld_initializer_new(ld_test_base, &ld_test_script_initializer_ops, impl);
        break;
    }
    ck_assert_msg(obj != NULL, "no %s", ld_test_iface_name(i));
    return obj;
}

void ld_test_script_answer(enum ld_test_iface i, ld_future *out)
{
    int rc = 0;
    switch (i) {
    case LD_TEST_STORE:
        rc = ld_future_fulfill_json(out, NULL);
        break;
    case LD_TEST_EVENT_PROCESSOR:
        rc = ld_future_fulfill_bool(out, true);
        break;
    case LD_TEST_UPDATE_PROCESSOR:
        rc = ld_future_fulfill(out);
        break;
    case LD_TEST_BIG_SEGMENT_STORE:
        rc = ld_future_fulfill_int(out, 7);
        break;
    case LD_TEST_SYNCHRONIZER:
        rc = ld_fdv2_fulfill_update(
            out, ld_fdv2_update_new(LD_DATA_SOURCE_STATE_VALID, NULL, NULL, NULL));
        break;
    default:
        rc = ld_fdv2_fulfill_basis(out,
                                   ld_fdv2_basis_new(ld_fdv2_change_set_no_changes(), true, "env"));
        break;
    }
    ck_assert_int_eq(rc, 0);
    ld_future_unref(out);
}

json_t *ld_test_feature(const char *key, int version)
{
    return json_pack("{s:s, s:i, s:b, s:[b,b], s:n, s:{}, s:[], s:[], s:[], s:[], s:s}", "key", key,
                     "version", version, "on", 1, "variations", 1, 0, "offVariation", "fallthrough",
                     "prerequisites", "targets", "contextTargets", "rules", "salt", "abc");
}

/* ---- evaluation tests ------------------------------------------------------ */

json_t *ld_test_j(const char *text)
{
    size_t n = strlen(text);
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i <= n; i++)
        s[i] = text[i] == '\'' ? '"' : text[i];
    json_error_t err;
    json_t *j = json_loads(s, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    free(s);
    ck_assert_msg(j != NULL, "bad JSON in the test (%s): %s", err.text, text);
    return j;
}

static void complete_items(json_t *items)
{
    const char *key;
    json_t *item;
    json_object_foreach(items, key, item)
    {
        if (json_is_object(item) && !json_object_get(item, "key"))
            json_object_set_new(item, "key", json_string(key));
        if (json_is_object(item) && !json_object_get(item, "version"))
            json_object_set_new(item, "version", json_integer(1));
    }
}

json_t *ld_test_data_of(const char *flags, const char *segments)
{
    json_t *f = ld_test_j(flags ? flags : "{}");
    json_t *s = ld_test_j(segments ? segments : "{}");
    complete_items(f);
    complete_items(s);
    json_t *data = json_pack("{s:o,s:o}", "features", f, "segments", s);
    ck_assert_ptr_nonnull(data);
    return data;
}

ld_store *ld_test_memory_with(const json_t *data)
{
    ld_store *s = ld_memory_store_new(ld_test_base);
    ck_assert_ptr_nonnull(s);
    ld_test_await_ok(ld_store_init(s, data));
    return s;
}

ld_context *ld_test_ctx_of(const char *text)
{
    json_t *j = ld_test_j(text);
    const char *why = NULL;
    ld_context *c = ld_context_from_json(j, &why);
    json_decref(j);
    ck_assert_msg(c != NULL, "bad context in the test (%s): %s", why ? why : "?", text);
    return c;
}

ld_evaluator *ld_test_evaluator_of(ld_store *s)
{
    ld_evaluator *ev = ld_evaluator_new(s);
    ck_assert_ptr_nonnull(ev);
    return ev;
}

void ld_test_done_with(ld_evaluator *ev, ld_store *s)
{
    ld_evaluator_free(ev);
    ld_test_flush();
    ld_store_free(s);
    ld_test_flush();
}

/* ---- a version 1 store that answers later ---------------------------------- */

static void later_answer(evutil_socket_t fd, short what, void *arg)
{
    struct ld_test_later *l = arg;
    (void)fd;
    (void)what;
    int n = l->n;
    static ld_future *outs[LD_TEST_LATER_MAX];
    static json_t *answers[LD_TEST_LATER_MAX];
    static bool failing[LD_TEST_LATER_MAX];
    memcpy(outs, l->outs, sizeof(outs[0]) * (size_t)n);
    memcpy(answers, l->answers, sizeof(answers[0]) * (size_t)n);
    memcpy(failing, l->failing, sizeof(failing[0]) * (size_t)n);
    l->n = 0; /* reads issued from here on are the next batch */
    l->scheduled = false;
    for (int i = 0; i < n; i++) {
        if (failing[i]) {
            json_decref(answers[i]);
            ld_future_reject(outs[i], LD_ESTORE, "no luck");
        } else {
            ld_future_fulfill_json(outs[i], answers[i]);
        }
        ld_future_unref(outs[i]);
    }
}

static void later_schedule(struct ld_test_later *l)
{
    static const struct timeval zero = {0, 0};
    if (l->scheduled || l->hold || l->n == 0)
        return;
    l->scheduled = true;
    if (event_base_once(l->base, -1, EV_TIMEOUT, later_answer, l, &zero) != 0)
        ck_abort_msg("event_base_once failed");
}

void ld_test_later_release(struct ld_test_later *l)
{
    l->hold = false;
    later_schedule(l);
}

static void later_push(struct ld_test_later *l, ld_future *out, json_t *answer, bool fail)
{
    if (l->n >= LD_TEST_LATER_MAX)
        ck_abort_msg("more than %d answers held", LD_TEST_LATER_MAX);
    if (l->n == 0) {
        if (l->batches < 128)
            l->batch_sizes[l->batches] = 0;
        l->batches++;
    }
    if (l->batches <= 128)
        l->batch_sizes[l->batches - 1]++;
    l->outs[l->n] = out;
    l->answers[l->n] = answer;
    l->failing[l->n] = fail;
    l->n++;
    later_schedule(l);
}

static void later_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    struct ld_test_later *l = impl;
    l->gets++;
    json_t *item = json_object_get(json_object_get(l->data, ld_kind_namespace(kind)), key);
    if (item && json_is_true(json_object_get(item, "deleted")))
        item = NULL;
    bool fail = l->fail ||
                (l->fail_key && (strcmp(l->fail_key, "*") == 0 || strcmp(l->fail_key, key) == 0));
    later_push(l, out, json_incref(item), fail);
}

static void later_all(void *impl, const ld_kind *kind, ld_future *out)
{
    struct ld_test_later *l = impl;
    json_t *all = json_object();
    const char *key;
    json_t *item;
    json_object_foreach(json_object_get(l->data, ld_kind_namespace(kind)), key, item)
    {
        if (!json_is_true(json_object_get(item, "deleted")))
            json_object_set(all, key, item);
    }
    later_push(l, out, all, l->fail || l->fail_all);
}

static void later_init(void *impl, const json_t *all_data, ld_future *out)
{
    struct ld_test_later *l = impl;
    json_decref(l->data);
    l->data = json_deep_copy(all_data);
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void later_upsert(void *impl, const ld_kind *kind, const json_t *item,
                         const struct ld_item_info *info, ld_future *out)
{
    struct ld_test_later *l = impl;
    json_t *ns = json_object_get(l->data, ld_kind_namespace(kind));
    json_object_set_new(ns, info->key, json_deep_copy(item));
    ld_future_fulfill_bool(out, true);
    ld_future_unref(out);
}

static void later_del(void *impl, const ld_kind *kind, const char *key, int64_t version,
                      ld_future *out)
{
    struct ld_test_later *l = impl;
    json_t *ns = json_object_get(l->data, ld_kind_namespace(kind));
    json_object_set_new(
        ns, key,
        json_pack("{s:s,s:I,s:b}", "key", key, "version", (json_int_t)version, "deleted", 1));
    ld_future_fulfill_bool(out, true);
    ld_future_unref(out);
}

static void later_initialized(void *impl, ld_future *out)
{
    (void)impl;
    ld_future_fulfill_bool(out, true);
    ld_future_unref(out);
}

static void later_free(void *impl)
{
    struct ld_test_later *l = impl;
    for (int i = 0; i < l->n; i++) {
        json_decref(l->answers[i]);
        ld_future_reject(l->outs[i], LD_ECANCELED, NULL);
        ld_future_unref(l->outs[i]);
    }
    json_decref(l->data);
    free(l);
}

static const struct ld_store_ops later_ops = {
    .version = 1,
    .get = later_get,
    .all = later_all,
    .init = later_init,
    .upsert = later_upsert,
    .del = later_del,
    .initialized = later_initialized,
    .free = later_free,
};

ld_store *ld_test_later_new(const json_t *data, struct ld_test_later **out)
{
    struct ld_test_later *l = calloc(1, sizeof(*l));
    ck_assert_ptr_nonnull(l);
    l->base = ld_test_base;
    l->data = json_deep_copy(data);
    ck_assert_ptr_nonnull(l->data);
    ld_store *s = ld_store_new(ld_test_base, &later_ops, l);
    ck_assert_ptr_nonnull(s);
    if (out)
        *out = l;
    return s;
}

char *ld_test_b64url(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc((n + 2) / 3 * 4 + 1);
    ck_assert_ptr_nonnull(out);
    int len = EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    ck_assert_int_ge(len, 0);
    while (len > 0 && out[len - 1] == '=')
        len--;
    out[len] = '\0';
    for (char *p = out; *p; p++)
        *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    return out;
}

long ld_test_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

int ld_test_count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

int ld_test_http_listen(struct evhttp *http)
{
    ck_assert_ptr_nonnull(http);
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
    ck_assert_ptr_nonnull(bs);
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    ck_assert_int_eq(getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sin, &len), 0);
    return ntohs(sin.sin_port);
}

/* A full change set of `data`. */
static ld_fdv2_change_set *full_of(const json_t *data)
{
    ld_fdv2_change_set_builder *b = ld_fdv2_change_set_builder_new();
    ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_FULL);
    const ld_kind *kinds[] = {ld_kind_features(), ld_kind_segments()};
    for (int k = 0; k < 2; k++) {
        const char *key;
        json_t *item;
        json_object_foreach(json_object_get(data, ld_kind_namespace(kinds[k])), key, item)
        {
            int64_t v = json_integer_value(json_object_get(item, "version"));
            ck_assert_int_eq(ld_fdv2_change_set_builder_add_put(b, kinds[k], key, v, item), 0);
        }
    }
    ld_fdv2_change_set *cs = NULL;
    ck_assert_int_eq(ld_fdv2_change_set_builder_finish(b, NULL, &cs), 0);
    ld_fdv2_change_set_builder_free(b);
    return cs;
}

ld_initializer *ld_test_initializer_of(const json_t *data)
{
    ld_initializer *in = ld_mock_initializer_new(ld_test_base, "flags");
    ck_assert_ptr_nonnull(in);
    ck_assert_int_eq(
        ld_mock_initializer_set_basis(in, ld_fdv2_basis_new(full_of(data), true, NULL)), 0);
    return in;
}
