/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The chaos test: every public path run again and again with its Nth
 * allocation failing, N = 1, 2, ... until the path runs without a failure,
 * through ldasync's allocator (ld_set_alloc_funcs) and, in a second pass,
 * jansson's too (json_set_alloc_funcs), counted together. Each run must
 * end as the headers promise: the result, or NULL / LD_ENOMEM where the
 * header says so, nothing left pending for ever, no crash, and for stores
 * their contents unchanged by an operation that failed. Leaks show up under
 * valgrind (make check-valgrind) and LeakSanitizer.
 *
 * A separate program, so that LDASYNC_NO_POOL can be set before the first
 * future: then every future is an allocation of its own.
 */
#include <check.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ldasync/ldasync.h>
#include <ldasync/testing.h>

#include "check_fail_alloc.h"

static struct event_base *B;

/* ---- the failing allocator (check_fail_alloc.h) ------------------------- */

static const char *g_path; /* the running path's name, for messages */

/* Allocation failures count only between ON and OFF: set-up, checks and
 * clean-up allocate normally. */
#define ON() (g_counting = true)
#define OFF() (g_counting = false)

static void flush(void)
{
    for (int i = 0; i < 1000 && event_base_loop(B, EVLOOP_NONBLOCK) == 0; i++)
        ;
}

/* Runs the loop until `f` completes; fails the test if it never does. */
static void settle(ld_future *f)
{
    for (int i = 0; i < 100000 && ld_future_is_pending(f); i++)
        event_base_loop(B, EVLOOP_NONBLOCK | EVLOOP_ONCE);
    ck_assert_msg(!ld_future_is_pending(f), "a future was left pending (%s, N=%ld)", g_path,
                  g_fail_at);
}

/* A future's outcome is its value or LD_ENOMEM; `ok` says whether it is. */
static bool failed_with_enomem(ld_future *f)
{
    settle(f);
    if (ld_future_is_rejected(f)) {
        ck_assert_msg(ld_future_error(f) == LD_ENOMEM,
                      "rejected with %s, not LD_ENOMEM (%s, N=%ld)",
                      ld_err_name(ld_future_error(f)), g_path, g_fail_at);
        return true;
    }
    return false;
}

/*
 * A path: set-up (not counted), the act (counted; it checks its own
 * outcome), and clean-up. run() repeats it with N = 1, 2, ... until a run
 * in which no allocation failed.
 */
struct path {
    void (*setup)(void);
    void (*act)(void);
    void (*teardown)(void);
    const char *name;
};

#define PATH(setup, act, teardown) \
    {                              \
        setup, act, teardown, #act \
    }

static void nothing(void)
{
}

static void run(const struct path *p)
{
    g_path = p->name;
    for (g_fail_at = 1; g_fail_at < 200000; g_fail_at++) {
        g_calls = 0;
        OFF();
        (p->setup ? p->setup : nothing)();
        flush();
        ON();
        p->act();
        OFF();
        bool done = g_calls < g_fail_at; /* nothing failed in this run */
        (p->teardown ? p->teardown : nothing)();
        flush();
        if (done)
            return;
    }
    ck_abort_msg("the path never ran without a failure");
}

static void chaos_setup(void)
{
    B = event_base_new();
    ck_assert_ptr_nonnull(B);
    ck_assert_int_eq(ld_set_alloc_funcs(chaos_malloc, chaos_realloc, free), 0);
    json_set_alloc_funcs(chaos_json_malloc, free);
    g_fail_at = 0;
    g_counting = false;
    setenv("LDASYNC_CACHE_CHECK_MS", "0", 1); /* no caching store's periodic check */
}

static void chaos_teardown(void)
{
    g_fail_at = 0;
    flush();
    event_base_free(B);
    ld_set_alloc_funcs(NULL, NULL, NULL);
    json_set_alloc_funcs(malloc, free);
}

/* Each test runs its paths with ldasync's allocations failing, then with
 * jansson's failing as well. */
#define CHAOS_TEST(name, ...)                                             \
    START_TEST(name)                                                      \
    {                                                                     \
        const struct path paths[] = {__VA_ARGS__};                        \
        for (int json = 0; json < 2; json++) {                            \
            g_json = json;                                                \
            for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) \
                run(&paths[i]);                                           \
        }                                                                 \
    }                                                                     \
    END_TEST

/* ---- futures ------------------------------------------------------------ */

static int g_ran;

static void count_cb(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    g_ran++;
}

static void act_on_complete(void)
{
    g_ran = 0;
    ld_future *f = ld_future_new(B);
    if (!f)
        return;
    int rc = ld_future_on_complete(ld_future_ref(f), count_cb, NULL);
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    ck_assert_int_eq(ld_future_fulfill_int(f, 7), 0);
    settle(f);
    flush();
    ck_assert_int_eq(g_ran, rc == 0 ? 1 : 0);
    ck_assert_int_eq(ld_future_int(f), 7);
    ld_future_unref(f);
}

static void act_reject(void)
{
    ld_future *f = ld_future_new(B);
    if (!f)
        return;
    int rc = ld_future_reject(f, LD_EIO, "disk %s", "gone");
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    ck_assert_int_eq(ld_future_error(f), LD_EIO); /* rejected either way */
    ck_assert_str_eq(ld_future_error_message(f), rc == 0 ? "disk gone" : ld_strerror(LD_EIO));
    ld_future_unref(f);
}

static void act_ready_futures(void)
{
    ld_future *r = ld_future_rejected(B, LD_EIO, "x%d", 1);
    if (r)
        ck_assert_int_eq(ld_future_error(r), LD_EIO);
    ld_future_unref(r);
    ld_future *j = ld_future_fulfilled_json(B, json_integer(5));
    if (j)
        ck_assert(ld_future_is_fulfilled(j));
    ld_future_unref(j);
}

static void then_fn(ld_future *in, ld_future *out, void *arg)
{
    (void)arg;
    ld_future_fulfill_int(out, ld_future_int(in) + 1);
}

static void act_then(void)
{
    ld_future *in = ld_future_new(B);
    if (!in)
        return;
    ld_future *out = ld_future_then(ld_future_ref(in), then_fn, NULL);
    ld_future_fulfill_int(in, 1);
    ld_future_unref(in);
    if (!out)
        return;
    if (!failed_with_enomem(out))
        ck_assert_int_eq(ld_future_int(out), 2);
    ld_future_unref(out);
}

static void catch_fn(ld_future *in, ld_future *out, void *arg)
{
    (void)arg;
    ld_future_fulfill_int(out, -ld_future_error(in));
}

static void act_catch(void)
{
    ld_future *in = ld_future_new(B);
    if (!in)
        return;
    ld_future *out = ld_future_catch(ld_future_ref(in), catch_fn, NULL);
    ld_future_reject(in, LD_EIO, NULL);
    ld_future_unref(in);
    if (!out)
        return;
    if (!failed_with_enomem(out))
        ck_assert_int_eq(ld_future_int(out), -LD_EIO);
    ld_future_unref(out);
}

/* Three pending inputs (or fewer if memory ran out), the caller keeping a
 * reference to each. */
static int make_inputs(ld_future **in, ld_future **mine)
{
    for (int i = 0; i < 3; i++) {
        if (!(in[i] = ld_future_new(B))) {
            for (int j = 0; j < i; j++) {
                ld_future_unref(in[j]);
                ld_future_unref(mine[j]);
            }
            return -1;
        }
        mine[i] = ld_future_ref(in[i]);
    }
    return 0;
}

static void act_all_race(bool race)
{
    ld_future *in[3], *mine[3];
    if (make_inputs(in, mine) != 0)
        return;
    ld_future *c = race ? ld_future_race(B, in, 3) : ld_future_all(B, in, 3);
    for (int i = 0; i < 3; i++) {
        ld_future_fulfill_int(mine[i], i);
        ld_future_unref(mine[i]);
    }
    if (!c)
        return;
    if (!failed_with_enomem(c) && !race)
        for (size_t i = 0; i < 3; i++)
            ck_assert_int_eq(ld_future_int(ld_future_all_get(c, i)), (int64_t)i);
    ld_future_unref(c);
}

static void act_all(void)
{
    act_all_race(false);
}

static void act_race(void)
{
    act_all_race(true);
}

static void act_timeout(void)
{
    ld_future *in = ld_future_new(B);
    if (!in)
        return;
    struct timeval tv = {0, 1000};
    ld_future *t = ld_future_timeout(ld_future_ref(in), &tv);
    if (t) {
        settle(t);
        ck_assert(ld_future_error(t) == LD_ETIMEDOUT || ld_future_error(t) == LD_ENOMEM);
    }
    ld_future_unref(t);
    ld_future_fulfill(in); /* a producer completes what it made */
    ld_future_unref(in);
}

static void act_forward(void)
{
    ld_future *out = ld_future_new(B);
    ld_future *from = ld_future_new(B);
    if (!out || !from) {
        ld_future_unref(out);
        ld_future_unref(from);
        return;
    }
    ld_future *mine = ld_future_ref(from);
    int rc = ld_future_forward(out, from);
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    ld_future_fulfill_int(mine, 3);
    ld_future_unref(mine);
    if (rc == 0 && !failed_with_enomem(out))
        ck_assert_int_eq(ld_future_int(out), 3);
    ld_future_unref(out);
}

static void act_cancel(void)
{
    g_ran = 0;
    ld_future *p = ld_future_new(B);
    if (!p)
        return;
    int rc = ld_future_set_cancel_handler(p, count_cb, NULL);
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    /* the producer keeps its reference; nobody else wants p but d */
    ld_future *d = ld_future_then(ld_future_ref(p), then_fn, NULL);
    if (!d) {
        ld_future_unref(p);
        return;
    }
    ck_assert_int_eq(ld_future_cancel(d), 0);
    ck_assert_int_eq(ld_future_error(d), LD_ECANCELED);
    flush();
    ck_assert_msg(g_ran == (rc == 0), "cancel handler ran %d times (%s, N=%ld)", g_ran, g_path,
                  g_fail_at); /* the producer heard of it */
    /* without a handler, the reference kept counts as somebody else's */
    ck_assert_msg(ld_future_error(p) == (rc == 0 ? LD_ECANCELED : 0), "producer: %s (%s, N=%ld)",
                  ld_err_name(ld_future_error(p)), g_path, g_fail_at);
    ld_future_fulfill(p); /* a producer completes what it made (LD_EALREADY if cancelled) */
    ld_future_unref(p);
    ld_future_unref(d);
}

CHAOS_TEST(test_chaos_futures, PATH(NULL, act_on_complete, NULL), PATH(NULL, act_reject, NULL),
           PATH(NULL, act_ready_futures, NULL), PATH(NULL, act_then, NULL),
           PATH(NULL, act_catch, NULL), PATH(NULL, act_all, NULL), PATH(NULL, act_race, NULL),
           PATH(NULL, act_timeout, NULL), PATH(NULL, act_forward, NULL),
           PATH(NULL, act_cancel, NULL))

/* ---- stores ----------------------------------------------------------- */

static ld_store *S;
static json_t *g_before; /* the store's contents when the act began */
static ld_store *(*g_make_store)(struct event_base *);

static json_t *feature(const char *key, int version)
{
    return json_pack("{s:s, s:i, s:b, s:[bb], s:n, s:{}, s:[], s:[], s:[], s:[], s:s}", "key", key,
                     "version", version, "on", 1, "variations", 1, 0, "offVariation", "fallthrough",
                     "prerequisites", "targets", "contextTargets", "rules", "salt", "abc");
}

/* {"features": ..., "segments": ...} as the store holds it now. */
static json_t *contents(void)
{
    json_t *all = json_object();
    const ld_kind *kinds[] = {ld_kind_features(), ld_kind_segments()};
    for (int i = 0; i < 2; i++) {
        ld_future *f = ld_store_all(S, kinds[i]);
        settle(f);
        ck_assert_msg(ld_future_is_fulfilled(f), "all: %s (%s, N=%ld)",
                      ld_err_name(ld_future_error(f)), g_path, g_fail_at);
        json_object_set_new(all, ld_kind_namespace(kinds[i]), json_deep_copy(ld_future_json(f)));
        ld_future_unref(f);
    }
    return all;
}

static void store_setup(void)
{
    S = g_make_store(B);
    ck_assert_ptr_nonnull(S);
    json_t *data =
        json_pack("{s:{s:o, s:o}, s:{s:{s:s, s:i}}}", "features", "foo", feature("foo", 10), "bar",
                  feature("bar", 10), "segments", "s1", "key", "s1", "version", 1);
    ld_future *f = ld_store_init(S, data);
    settle(f);
    ck_assert(ld_future_is_fulfilled(f));
    ld_future_unref(f);
    json_decref(data);
    g_before = contents();
}

static void store_teardown(void)
{
    ld_store_free(S);
    S = NULL;
    json_decref(g_before);
    g_before = NULL;
}

/* After an operation that failed with LD_ENOMEM, the store is as it was. */
static void assert_unchanged(void)
{
    OFF();
    json_t *now = contents();
    ck_assert_msg(json_equal(now, g_before), "a failed operation changed the store (%s, N=%ld)",
                  g_path, g_fail_at);
    json_decref(now);
}

/* The store's answer to `f`: false when it failed with LD_ENOMEM (and the
 * store is unchanged). */
static bool answered(ld_future *f)
{
    ck_assert_ptr_nonnull(f); /* NULL only if the store is NULL */
    if (failed_with_enomem(f)) {
        assert_unchanged();
        return false;
    }
    ck_assert_msg(ld_future_is_fulfilled(f), "rejected with %s (%s, N=%ld)",
                  ld_err_name(ld_future_error(f)), g_path, g_fail_at);
    return true;
}

static void act_get(void)
{
    ld_future *f = ld_store_get(S, ld_kind_features(), "foo");
    if (answered(f))
        ck_assert_int_eq(json_integer_value(json_object_get(ld_future_json(f), "version")), 10);
    ld_future_unref(f);
}

static void act_get_now(void)
{
    json_t *item = json_true();
    int rc = ld_store_get_now(S, ld_kind_features(), "foo", &item);
    ck_assert_msg(rc == 0 || rc == LD_EBUSY || rc == LD_ENOMEM, "%s (%s, N=%ld)", ld_err_name(rc),
                  g_path, g_fail_at);
    if (rc == 0)
        ck_assert_int_eq(json_integer_value(json_object_get(item, "version")), 10);
    else
        ck_assert_ptr_null(item);
    json_decref(item);
    rc = ld_store_get_now(S, ld_kind_features(), "nobody", &item);
    ck_assert(rc == 0 || rc == LD_EBUSY || rc == LD_ENOMEM);
    ck_assert_ptr_null(item);
}

static void act_all_items(void)
{
    ld_future *f = ld_store_all(S, ld_kind_features());
    if (answered(f))
        ck_assert_int_eq(json_object_size(ld_future_json(f)), 2);
    ld_future_unref(f);
}

static void act_init(void)
{
    OFF();
    json_t *data = json_pack("{s:{s:o}}", "features", "baz", feature("baz", 1));
    ON();
    ld_future *f = ld_store_init(S, data);
    if (answered(f)) {
        OFF();
        json_t *now = contents();
        ck_assert_int_eq(json_object_size(json_object_get(now, "features")), 1);
        ck_assert_int_eq(json_object_size(json_object_get(now, "segments")), 0);
        json_decref(now);
    }
    ld_future_unref(f);
    OFF();
    json_decref(data);
}

/* An init of more items than a slice of the sliced memory store (over
 * several passes of the loop there), with an operation waiting for it. */
static void act_init_large(void)
{
    OFF();
    json_t *data = json_pack("{s:{s:o, s:o, s:o}, s:{s:{s:s, s:i}}}", "features", "baz",
                             feature("baz", 1), "qux", feature("qux", 1), "foo", feature("foo", 3),
                             "segments", "s2", "key", "s2", "version", 1);
    ON();
    ld_future *f = ld_store_init(S, data);
    ld_future *g = ld_store_get(S, ld_kind_features(), "qux");
    if (answered(f)) {
        settle(g);
        if (ld_future_is_fulfilled(g))
            ck_assert_ptr_nonnull(ld_future_json(g));
        else
            ck_assert_int_eq(ld_future_error(g), LD_ENOMEM);
        OFF();
        json_t *now = contents();
        ck_assert_int_eq(json_object_size(json_object_get(now, "features")), 3);
        ck_assert_int_eq(json_object_size(json_object_get(now, "segments")), 1);
        json_decref(now);
    }
    settle(g);
    ld_future_unref(g);
    ld_future_unref(f);
    OFF();
    json_decref(data);
}

static void act_upsert_key(const char *key, int version)
{
    OFF();
    json_t *item = feature(key, version);
    ON();
    ld_future *f = ld_store_upsert(S, ld_kind_features(), item);
    if (answered(f))
        ck_assert(ld_future_bool(f));
    ld_future_unref(f);
    OFF();
    json_decref(item);
}

static void act_upsert(void)
{
    act_upsert_key("foo", 11);
}

static void act_upsert_new(void)
{
    act_upsert_key("a-key-long-enough-not-to-fit-inline-in-the-slot", 1);
}

static void act_delete(void)
{
    ld_future *f = ld_store_delete(S, ld_kind_features(), "foo", 11);
    if (answered(f))
        ck_assert(ld_future_bool(f));
    ld_future_unref(f);
}

static void act_delete_unknown(void)
{
    ld_future *f = ld_store_delete(S, ld_kind_segments(), "nope", 3);
    if (answered(f))
        ck_assert(ld_future_bool(f));
    ld_future_unref(f);
}

static void act_initialized(void)
{
    ld_future *f = ld_store_initialized(S);
    if (answered(f))
        ck_assert(ld_future_bool(f));
    ld_future_unref(f);
}

static void act_bad_input(void)
{
    ld_future *f = ld_store_get(S, ld_kind_features(), "");
    ck_assert_ptr_nonnull(f);
    settle(f);
    ck_assert(ld_future_error(f) == LD_EINVAL || ld_future_error(f) == LD_ENOMEM);
    ld_future_unref(f);
    assert_unchanged();
}

static void act_close(void)
{
    ld_future *f = ld_store_close(S);
    if (!failed_with_enomem(f)) {
        ck_assert(ld_future_is_fulfilled(f));
        ld_future *g = ld_store_get(S, ld_kind_features(), "foo");
        settle(g);
        ck_assert(ld_future_error(g) == LD_ECLOSED || ld_future_error(g) == LD_ENOMEM);
        ld_future_unref(g);
    } else {
        assert_unchanged(); /* and still open */
    }
    ld_future_unref(f);
}

/* Operations still pending when the store is freed. */
static void act_free_pending(void)
{
    ld_future *f[3] = {ld_store_get(S, ld_kind_features(), "foo"), ld_store_initialized(S),
                       ld_store_all(S, ld_kind_segments())};
    ld_store_free(S);
    S = NULL;
    for (int i = 0; i < 3; i++) {
        settle(f[i]);
        ld_future_unref(f[i]);
    }
}

static void act_store_new(void)
{
    ld_store *s = g_make_store(B);
    if (s)
        ck_assert_str_eq(ld_store_describe(s), ld_store_describe(S));
    ld_store_free(s);
}

#define STORE_PATHS                                                                             \
    PATH(store_setup, act_get, store_teardown), PATH(store_setup, act_get_now, store_teardown), \
        PATH(store_setup, act_all_items, store_teardown),                                       \
        PATH(store_setup, act_init, store_teardown),                                            \
        PATH(store_setup, act_init_large, store_teardown),                                      \
        PATH(store_setup, act_upsert, store_teardown),                                          \
        PATH(store_setup, act_upsert_new, store_teardown),                                      \
        PATH(store_setup, act_delete, store_teardown),                                          \
        PATH(store_setup, act_delete_unknown, store_teardown),                                  \
        PATH(store_setup, act_initialized, store_teardown),                                     \
        PATH(store_setup, act_bad_input, store_teardown),                                       \
        PATH(store_setup, act_close, store_teardown),                                           \
        PATH(store_setup, act_free_pending, store_teardown),                                    \
        PATH(store_setup, act_store_new, store_teardown)

static void memory_store_fixture(void)
{
    chaos_setup();
    g_make_store = ld_memory_store_new;
}

/* A memory store whose init loads 2 items per pass of the loop: the
 * set-up's init and act_init_large's are large ones. */
static ld_store *sliced_memory_store_new(struct event_base *base)
{
    setenv("LDASYNC_STORE_INIT_SLICE", "2", 1);
    ld_store *s = ld_memory_store_new(base);
    unsetenv("LDASYNC_STORE_INIT_SLICE");
    return s;
}

static void sliced_memory_store_fixture(void)
{
    chaos_setup();
    g_make_store = sliced_memory_store_new;
}

static void mock_store_fixture(void)
{
    chaos_setup();
    g_make_store = ld_mock_store_new;
}

/* A version 2 store whose members that answer at once always say LD_EBUSY,
 * and whose asynchronous members hand the operation to a memory store:
 * every operation takes the front's LD_EBUSY paths. */
static int busy_get(void *impl, const ld_kind *kind, const char *key, size_t len, json_t **item,
                    struct ld_lease **lease)
{
    (void)impl, (void)kind, (void)key, (void)len, (void)item, (void)lease;
    return LD_EBUSY;
}

static int busy_all(void *impl, const ld_kind *kind, json_t **all)
{
    (void)impl, (void)kind, (void)all;
    return LD_EBUSY;
}

static int busy_init(void *impl, const json_t *all_data, const char **why)
{
    (void)impl, (void)all_data, (void)why;
    return LD_EBUSY;
}

static int busy_upsert(void *impl, const ld_kind *kind, const json_t *item,
                       const struct ld_item_info *info)
{
    (void)impl, (void)kind, (void)item, (void)info;
    return LD_EBUSY;
}

static int busy_del(void *impl, const ld_kind *kind, const char *key, int64_t version)
{
    (void)impl, (void)kind, (void)key, (void)version;
    return LD_EBUSY;
}

/* out adopts the inner store's answer `from`. */
static void hand_to(ld_future *out, ld_future *from)
{
    if (ld_future_forward(out, from) != 0)
        ld_future_reject(out, LD_ENOMEM, NULL);
    ld_future_unref(out);
}

static void inner_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    hand_to(out, ld_store_get(impl, kind, key));
}

static void inner_all(void *impl, const ld_kind *kind, ld_future *out)
{
    hand_to(out, ld_store_all(impl, kind));
}

static void inner_init(void *impl, const json_t *all_data, ld_future *out)
{
    hand_to(out, ld_store_init(impl, all_data));
}

static void inner_upsert(void *impl, const ld_kind *kind, const json_t *item,
                         const struct ld_item_info *info, ld_future *out)
{
    (void)info;
    hand_to(out, ld_store_upsert(impl, kind, item));
}

static void inner_del(void *impl, const ld_kind *kind, const char *key, int64_t version,
                      ld_future *out)
{
    hand_to(out, ld_store_delete(impl, kind, key, version));
}

static void inner_initialized(void *impl, ld_future *out)
{
    hand_to(out, ld_store_initialized(impl));
}

static void inner_free(void *impl)
{
    ld_store_free(impl);
}

static const struct ld_store_ops busy_ops = {
    .version = LD_STORE_OPS_VERSION,
    .get = inner_get,
    .all = inner_all,
    .init = inner_init,
    .upsert = inner_upsert,
    .del = inner_del,
    .initialized = inner_initialized,
    .free = inner_free,
    .get_now = busy_get,
    .all_now = busy_all,
    .init_now = busy_init,
    .upsert_now = busy_upsert,
    .del_now = busy_del,
};

static ld_store *busy_store_new(struct event_base *base)
{
    ld_store *inner = ld_memory_store_new(base);
    ld_store *s = inner ? ld_store_new(base, &busy_ops, inner) : NULL;
    if (!s)
        ld_store_free(inner);
    return s;
}

static void busy_store_fixture(void)
{
    chaos_setup();
    g_make_store = busy_store_new;
}

/* The caching store over a memory store, forever and with a ttl. */
static ld_store *caching_forever_new(struct event_base *base)
{
    return ld_caching_store_new(base, ld_memory_store_new(base), LD_CACHE_FOREVER);
}

static ld_store *caching_ttl_new(struct event_base *base)
{
    return ld_caching_store_new(base, ld_memory_store_new(base), 600000);
}

static void caching_forever_fixture(void)
{
    chaos_setup();
    g_make_store = caching_forever_new;
}

static void caching_ttl_fixture(void)
{
    chaos_setup();
    g_make_store = caching_ttl_new;
}

/* The caching store (forever) over a mock store whose next upsert fails
 * with LD_ESTORE: the cache becomes unavailable, polls (every ms), and
 * writes its data back once the mock answers. */
static ld_store *g_mock;

static ld_store *caching_mock_new(struct event_base *base)
{
    setenv("LDASYNC_CACHE_POLL_MS", "1", 1);
    g_mock = ld_mock_store_new(base);
    ld_store *s = ld_caching_store_new(base, g_mock, LD_CACHE_FOREVER);
    unsetenv("LDASYNC_CACHE_POLL_MS");
    return s;
}

static void caching_fail_setup(void)
{
    g_make_store = caching_mock_new;
    store_setup();
    ck_assert_int_eq(ld_mock_store_fail_next(g_mock, LD_MOCK_OP_UPSERT, 1, LD_ESTORE), 0);
}

static bool cache_available(ld_store_status *st)
{
    ck_assert_int_eq(ld_store_current_status(S, st), 0);
    return st->available;
}

static void act_caching_recovery(void)
{
    OFF();
    json_t *item = feature("foo", 11);
    ON();
    ld_future *f = ld_store_upsert(S, ld_kind_features(), item);
    settle(f);
    int code = ld_future_error(f);
    ck_assert_msg(code == LD_ESTORE || code == LD_ENOMEM, "%s (%s, N=%ld)", ld_err_name(code),
                  g_path, g_fail_at);
    ld_future_unref(f);
    ld_store_status st;
    for (int i = 0; i < 100000 && !cache_available(&st); i++)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert_msg(st.available, "the cache stayed unavailable (%s, N=%ld)", g_path, g_fail_at);
    OFF();
    flush();
    if (code == LD_ESTORE && !st.needs_refresh) {
        /* written back: the data the cache served, foo at 11 */
        int n = ld_mock_store_init_count(g_mock);
        ck_assert_int_ge(n, 2);
        const json_t *back = ld_mock_store_init_data(g_mock, (size_t)n - 1);
        ck_assert_int_eq(ld_item_version(json_object_get(json_object_get(back, "features"), "foo")),
                         11);
    }
    json_decref(item);
}

static void act_caching_free_failing(void)
{
    OFF();
    json_t *item = feature("foo", 11);
    ON();
    ld_future *f = ld_store_upsert(S, ld_kind_features(), item);
    ld_future *g = ld_store_get(S, ld_kind_features(), "nobody");
    settle(f);
    ld_store_free(S); /* polling, perhaps; g's read in flight */
    S = NULL;
    settle(g);
    ld_future_unref(f);
    ld_future_unref(g);
    OFF();
    json_decref(item);
}

CHAOS_TEST(test_chaos_store, STORE_PATHS)

CHAOS_TEST(test_chaos_caching_status,
           PATH(caching_fail_setup, act_caching_recovery, store_teardown),
           PATH(caching_fail_setup, act_caching_free_failing, store_teardown))

/* ---- the store sink ------------------------------------------------------ */

static ld_update_sink *K;
static int g_heard;

static void heard(ld_update_sink *sink, const ld_data_source_status *st, void *arg)
{
    (void)sink;
    (void)st;
    (void)arg;
    g_heard++;
}

static void sink_setup(void)
{
    g_make_store = ld_memory_store_new;
    store_setup();
    K = ld_store_sink_new(S);
    ck_assert_ptr_nonnull(K);
}

static void sink_teardown(void)
{
    ld_update_sink_free(K);
    K = NULL;
    store_teardown();
}

static void act_sink_new(void)
{
    ld_update_sink *k = ld_store_sink_new(S);
    ld_update_sink_free(k);
}

static void act_sink_write(void)
{
    OFF();
    json_t *item = feature("foo", 12);
    json_t *data = json_pack("{s:{s:o}}", "features", "foo", feature("foo", 13));
    ON();
    ld_future *f = ld_update_sink_upsert(K, ld_kind_features(), item);
    if (answered(f))
        ck_assert(ld_future_bool(f));
    ld_future_unref(f);
    f = ld_update_sink_delete(K, ld_kind_segments(), "s1", 2);
    ck_assert_ptr_nonnull(f);
    settle(f);
    ld_future_unref(f);
    f = ld_update_sink_init(K, data);
    ck_assert_ptr_nonnull(f);
    settle(f);
    ld_future_unref(f);
    OFF();
    json_decref(item);
    json_decref(data);
}

static void act_sink_status(void)
{
    g_heard = 0;
    int64_t id = ld_store_sink_add_listener(K, heard, NULL);
    ck_assert(id > 0 || id == LD_ENOMEM);
    ld_data_source_error_info e = {LD_DATA_SOURCE_ERROR_KIND_NETWORK, 503, 0, "down"};
    int rc = ld_update_sink_update_status(K, LD_DATA_SOURCE_STATE_VALID, &e);
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    ld_data_source_status st;
    ck_assert_int_eq(ld_store_sink_status(K, &st), 0);
    ck_assert_int_eq(st.state, rc == 0 ? LD_DATA_SOURCE_STATE_VALID
                                       : LD_DATA_SOURCE_STATE_INITIALIZING); /* nothing changed */
    flush();
    ck_assert_int_le(g_heard, 1);
    if (id > 0)
        ck_assert_int_eq(ld_store_sink_remove_listener(K, id), 0);
}

/* ---- FDv2 ---------------------------------------------------------------- */

static void act_fdv2_builder(void)
{
    ld_fdv2_change_set_builder *b = ld_fdv2_change_set_builder_new();
    if (!b)
        return;
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_FULL), 0);
    OFF();
    json_t *obj = feature("f", 1);
    ON();
    int rc = ld_fdv2_change_set_builder_add_put(b, ld_kind_features(), "f", 1, obj);
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    ck_assert_uint_eq(ld_fdv2_change_set_builder_count(b), rc == 0 ? 1 : 0);
    size_t n = ld_fdv2_change_set_builder_count(b);
    rc = ld_fdv2_change_set_builder_add_delete(b, ld_kind_segments(), "s", 2);
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    ck_assert_uint_eq(ld_fdv2_change_set_builder_count(b), n + (rc == 0));
    n = ld_fdv2_change_set_builder_count(b);
    ld_fdv2_selector *sel = ld_fdv2_selector_new("p:1", 4);
    ld_fdv2_change_set *cs = NULL;
    rc = ld_fdv2_change_set_builder_finish(b, sel, &cs);
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    if (rc == 0) {
        ck_assert_uint_eq(ld_fdv2_change_set_count(cs), n);
        ld_fdv2_basis *basis = ld_fdv2_basis_new(cs, true, "env");
        ld_future *f = basis ? ld_future_new(B) : NULL;
        if (f && ld_fdv2_fulfill_basis(f, basis) == 0)
            ck_assert_ptr_eq(ld_fdv2_future_basis(f), basis);
        else if (!f)
            ld_fdv2_basis_free(basis);
        ld_future_unref(f);
    } else {
        ck_assert_ptr_null(cs);
        ck_assert_uint_eq(ld_fdv2_change_set_builder_count(b), n); /* unchanged */
    }
    ld_fdv2_selector_free(sel);
    ld_fdv2_change_set_builder_free(b);
    OFF();
    json_decref(obj);
}

static void act_fdv2_update(void)
{
    ld_data_source_error_info e = {LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0, 0, "bad"};
    ld_fdv2_update *u = ld_fdv2_update_new(LD_DATA_SOURCE_STATE_INTERRUPTED,
                                           ld_fdv2_change_set_empty(NULL), &e, "env");
    if (u) {
        ck_assert_str_eq(ld_fdv2_update_error(u)->message, "bad");
        ld_future *f = ld_future_new(B);
        if (f)
            ck_assert_int_eq(ld_fdv2_fulfill_update(f, u), 0);
        else
            ld_fdv2_update_free(u);
        ld_future_unref(f);
    }
    ld_fdv2_change_set_free(ld_fdv2_change_set_no_changes());
}

/* ---- mocks --------------------------------------------------------------- */

static void act_mock_event_processor(void)
{
    ld_event_processor *ep = ld_mock_event_processor_new(B);
    if (!ep)
        return;
    OFF();
    json_t *e = json_pack("{s:s}", "kind", "custom");
    ON();
    int rc = ld_event_processor_send_event(ep, e);
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    ck_assert_int_eq(ld_mock_event_processor_event_count(ep), rc == 0);
    ld_future *f = ld_event_processor_flush(ep);
    if (!failed_with_enomem(f))
        ck_assert(ld_future_is_fulfilled(f));
    ld_future_unref(f);
    f = ld_event_processor_close(ep);
    settle(f);
    ld_future_unref(f);
    ld_event_processor_free(ep);
    OFF();
    json_decref(e);
}

static void act_mock_update_processor(void)
{
    ld_update_processor *up = ld_mock_update_processor_new(B, LD_MOCK_START_HOLD);
    if (!up)
        return;
    ld_future *f = ld_update_processor_start(up);
    int rc = ld_mock_update_processor_set_ready(up);
    settle(f);
    if (!failed_with_enomem(f)) {
        ck_assert_int_eq(rc, 0);
        ck_assert(ld_update_processor_initialized(up));
    }
    ld_future_unref(f);
    ld_update_processor_free(up);
}

static void act_mock_big_segments(void)
{
    ld_big_segment_store *bs =
        ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    if (!bs)
        return;
    OFF();
    json_t *m = json_pack("{s:b}", "seg.g1", 1);
    ON();
    int rc = ld_mock_big_segment_store_set_membership(bs, "hash", m);
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    ld_future *f = ld_big_segment_store_get_membership(bs, "hash");
    if (!failed_with_enomem(f) && rc == 0)
        ck_assert(json_is_true(json_object_get(ld_future_json(f), "seg.g1")));
    ld_future_unref(f);
    f = ld_big_segment_store_get_metadata(bs);
    if (!failed_with_enomem(f))
        ck_assert_int_gt(ld_future_int(f), 0);
    ld_future_unref(f);
    ld_big_segment_store_free(bs);
    OFF();
    json_decref(m);
}

static void act_mock_synchronizer(void)
{
    ld_synchronizer *sy = ld_mock_synchronizer_new(B, "s");
    if (!sy)
        return;
    ld_fdv2_update *u = ld_fdv2_update_new(LD_DATA_SOURCE_STATE_VALID, NULL, NULL, NULL);
    int rc = u ? ld_mock_synchronizer_push_update(sy, u) : LD_ENOMEM;
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    ld_future *f = ld_synchronizer_next(sy);
    if (rc == 0 && !failed_with_enomem(f))
        ck_assert_int_eq(ld_fdv2_update_state(ld_fdv2_future_update(f)),
                         LD_DATA_SOURCE_STATE_VALID);
    ld_future *stop = ld_synchronizer_stop(sy);
    settle(stop);
    settle(f);
    ld_future_unref(stop);
    ld_future_unref(f);
    ld_synchronizer_free(sy);
}

static void act_mock_initializer(void)
{
    ld_initializer *in = ld_mock_initializer_new(B, "i");
    if (!in)
        return;
    ld_future *f = ld_initializer_fetch(in);
    ld_fdv2_basis *basis = ld_fdv2_basis_new(ld_fdv2_change_set_no_changes(), false, NULL);
    int rc = basis ? ld_mock_initializer_set_basis(in, basis) : LD_ENOMEM;
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    if (rc == 0 && !failed_with_enomem(f))
        ck_assert_ptr_nonnull(ld_fdv2_future_basis(f));
    ld_future_unref(f);
    ld_initializer_free(in);
}

CHAOS_TEST(test_chaos_sink_fdv2_mocks, PATH(sink_setup, act_sink_new, sink_teardown),
           PATH(sink_setup, act_sink_write, sink_teardown),
           PATH(sink_setup, act_sink_status, sink_teardown), PATH(NULL, act_fdv2_builder, NULL),
           PATH(NULL, act_fdv2_update, NULL), PATH(NULL, act_mock_event_processor, NULL),
           PATH(NULL, act_mock_update_processor, NULL), PATH(NULL, act_mock_big_segments, NULL),
           PATH(NULL, act_mock_synchronizer, NULL), PATH(NULL, act_mock_initializer, NULL))

/* ---- the file data source ------------------------------------------------ */
/* No libevent threading in this program: the files are read on the loop,
 * so the Nth allocation is the same one in every run. */

static char g_file_dir[64];
static char g_file_path[4][128];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* Every token of these files (string, key or number, quotes included) is
 * shorter than 16 bytes: jansson 2.14 grows its token buffer past 16 bytes
 * without checking that it could (alloc.h), so with its allocations
 * failing a longer token can crash it. Those points aside, every
 * allocation of the file source fails in turn here, jansson's included;
 * file 3 (long tokens, an integer beyond int64) only with ldasync's. */
static void file_setup(void)
{
    strcpy(g_file_dir, "/tmp/ldasync-chaos-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_file_dir));
    for (int i = 0; i < 4; i++)
        snprintf(g_file_path[i], sizeof(g_file_path[i]), "%s/%d.json", g_file_dir, i);
    write_file(
        g_file_path[0],
        "{\"flags\": {\"a\": {\"on\": true, \"variations\": [1, 2]}, \"b\": {\"key\": \"b\", "
        "\"version\": 3}}, \"flagValues\": {\"v\": \"x\"}, \"segments\": {\"s\": "
        "{\"included\": [\"u\"]}}}");
    write_file(g_file_path[1], "{\"flagValues\": {\"w\": [1, {\"z\": null}]}}");
    write_file(g_file_path[2], "{\"flags\": {\"c\": {}},\n \"segments\": {\"t\": [}}");
    write_file(g_file_path[3],
               "{\"flags\": {\"abcdefghijklmnopqrstuvwxyz0123\": {\"version\": 12345678901234567, "
               "\"variations\": [10000000000000000000, \"a string of more than 16 bytes\"]}}}");
}

static void file_teardown(void)
{
    for (int i = 0; i < 4; i++)
        unlink(g_file_path[i]);
    rmdir(g_file_dir);
}

/* Fetches the `n` files at `paths` with a file initializer: out of memory,
 * or a full set of `count` changes whose change `at` has `version`. */
static void file_fetch(const char *const *paths, size_t n, size_t count, size_t at, int64_t version)
{
    ld_initializer *in = ld_file_initializer_new(B, paths, n);
    if (!in)
        return;
    ld_future *f = ld_initializer_fetch(in);
    if (!failed_with_enomem(f)) {
        ck_assert_msg(ld_future_is_fulfilled(f), "%s (N=%ld)", ld_future_error_message(f),
                      g_fail_at);
        const ld_fdv2_change_set *cs = ld_fdv2_basis_change_set(ld_fdv2_future_basis(f));
        ck_assert_uint_eq(ld_fdv2_change_set_count(cs), count);
        ck_assert_int_eq(ld_fdv2_change_version(ld_fdv2_change_set_get(cs, at)), version);
    }
    ld_future_unref(f);
    ld_initializer_free(in);
}

static void act_file_fetch(void)
{
    const char *paths[] = {g_file_path[0], g_file_path[1]};
    file_fetch(paths, 2, 5, 1, 3);
}

/* Long tokens and an integer beyond int64, with ldasync's allocations
 * failing only (see file_setup). */
static void act_file_fetch_long(void)
{
    if (g_json)
        return;
    const char *paths[] = {g_file_path[3]};
    file_fetch(paths, 1, 1, 0, 12345678901234567);
}

static void act_file_fetch_error(void)
{
    const char *paths[] = {g_file_path[1], g_file_path[2]};
    ld_initializer *in = ld_file_initializer_new(B, paths, 2);
    if (!in)
        return;
    ld_future *f = ld_initializer_fetch(in);
    settle(f);
    if (ld_future_error(f) != LD_ENOMEM) {
        ck_assert_msg(ld_future_error(f) == LD_EPARSE, "%s: %s (N=%ld)",
                      ld_err_name(ld_future_error(f)), ld_future_error_message(f), g_fail_at);
        /* the message, or the bare strerror text when it could not be made */
        const char *msg = ld_future_error_message(f);
        ck_assert_msg(strstr(msg, ":2:") || strcmp(msg, ld_strerror(LD_EPARSE)) == 0, "%s", msg);
    }
    ld_future_unref(f);
    ld_initializer_free(in);
}

static void act_file_free_pending(void)
{
    const char *paths[] = {g_file_path[0]};
    ld_initializer *in = ld_file_initializer_new(B, paths, 1);
    if (!in)
        return;
    ld_future *f = ld_initializer_fetch(in);
    ld_initializer_free(in);
    settle(f);
    ck_assert(ld_future_error(f) == LD_ECANCELED || ld_future_error(f) == LD_ENOMEM);
    ld_future_unref(f);
}

/* A synchronizer's first update: without memory it reads again after a
 * quiet time, so this waits (the loop blocks for that time) instead of
 * spinning. */
static void act_file_sync_first(void)
{
    const char *paths[] = {g_file_path[0], g_file_path[1]};
    ld_synchronizer *sy = ld_file_synchronizer_new(B, paths, 2, 10);
    if (!sy)
        return;
    ld_future *f = ld_synchronizer_next(sy);
    ck_assert_int_eq(ld_future_wait(f), 0);
    if (!failed_with_enomem(f)) {
        const ld_fdv2_update *u = ld_fdv2_future_update(f);
        ck_assert_int_eq(ld_fdv2_update_state(u), LD_DATA_SOURCE_STATE_VALID);
        ck_assert_uint_eq(ld_fdv2_change_set_count(ld_fdv2_update_change_set(u)), 5);
    }
    ld_future_unref(f);
    ld_synchronizer_free(sy);
}

CHAOS_TEST(test_chaos_file_source, PATH(file_setup, act_file_fetch, file_teardown),
           PATH(file_setup, act_file_fetch_long, file_teardown),
           PATH(file_setup, act_file_fetch_error, file_teardown),
           PATH(file_setup, act_file_free_pending, file_teardown),
           PATH(file_setup, act_file_sync_first, file_teardown))
/* ---- the data system ----------------------------------------------------- */

static ld_initializer *g_init;
static ld_synchronizer *g_sync;
static int g_changes;

static void count_change(ld_data_system *ds, const ld_kind *kind, const char *key, int64_t version,
                         const json_t *item, void *arg)
{
    (void)ds, (void)kind, (void)key, (void)version, (void)item, (void)arg;
    g_changes++;
}

static void count_status(ld_data_system *ds, const ld_data_source_status *st, void *arg)
{
    (void)ds, (void)st, (void)arg;
    g_heard++;
}

/* A change set of `intent` with puts of foo and baz at `version`, and a
 * delete of bar. */
static ld_fdv2_change_set *ds_change_set(enum ld_fdv2_intent intent, int version)
{
    ld_fdv2_change_set_builder *b = ld_fdv2_change_set_builder_new();
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, intent), 0);
    const char *keys[] = {"foo", "baz"};
    for (int i = 0; i < 2; i++) {
        json_t *f = feature(keys[i], version);
        ck_assert_int_eq(
            ld_fdv2_change_set_builder_add_put(b, ld_kind_features(), keys[i], version, f), 0);
        json_decref(f);
    }
    ck_assert_int_eq(ld_fdv2_change_set_builder_add_delete(b, ld_kind_features(), "bar", version),
                     0);
    ld_fdv2_change_set *cs = NULL;
    ck_assert_int_eq(ld_fdv2_change_set_builder_finish(b, NULL, &cs), 0);
    ld_fdv2_change_set_builder_free(b);
    return cs;
}

/* The store holds foo and bar; a mock initializer with a full basis
 * (version 20); a mock synchronizer with a full set (30) and changes (40). */
static void ds_setup(void)
{
    g_make_store = ld_memory_store_new;
    store_setup();
    g_init = ld_mock_initializer_new(B, "i");
    g_sync = ld_mock_synchronizer_new(B, "s");
    ck_assert_ptr_nonnull(g_init);
    ck_assert_ptr_nonnull(g_sync);
    ld_fdv2_basis *basis =
        ld_fdv2_basis_new(ds_change_set(LD_FDV2_INTENT_XFER_FULL, 20), true, NULL);
    ck_assert_int_eq(ld_mock_initializer_set_basis(g_init, basis), 0);
    ld_fdv2_update *u[] = {
        ld_fdv2_update_new(LD_DATA_SOURCE_STATE_VALID, ds_change_set(LD_FDV2_INTENT_XFER_FULL, 30),
                           NULL, NULL),
        ld_fdv2_update_new(LD_DATA_SOURCE_STATE_VALID,
                           ds_change_set(LD_FDV2_INTENT_XFER_CHANGES, 40), NULL, NULL)};
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(ld_mock_synchronizer_push_update(g_sync, u[i]), 0);
    g_changes = g_heard = 0;
}

static void ds_teardown(void)
{
    ld_initializer_free(g_init); /* when the data system did not take them */
    ld_synchronizer_free(g_sync);
    g_init = NULL;
    g_sync = NULL;
    store_teardown();
}

/* The whole life: start, the basis, both updates, listeners, close, free.
 * Whatever ran out of memory, ready completes (fulfilled, or rejected with
 * LD_ENOMEM or LD_ECLOSED) and the close fulfils or runs out of memory. */
static void act_data_system(void)
{
    ld_data_system *ds = ld_data_system_new(B, S, &g_init, 1, g_sync);
    g_init = NULL;
    g_sync = NULL;
    if (!ds)
        return;
    int64_t id = ld_data_system_add_change_listener(ds, count_change, NULL);
    ck_assert(id > 0 || id == LD_ENOMEM);
    id = ld_data_system_add_status_listener(ds, count_status, NULL);
    ck_assert(id > 0 || id == LD_ENOMEM);
    ld_future *ready = ld_data_system_ready(ds);
    ck_assert_ptr_nonnull(ready);
    flush();
    flush();
    ld_future *closed = ld_data_system_close(ds);
    ck_assert_ptr_nonnull(closed);
    settle(closed);
    if (ld_future_is_rejected(closed))
        ck_assert_int_eq(ld_future_error(closed), LD_ENOMEM);
    settle(ready);
    if (ld_future_is_rejected(ready))
        ck_assert_msg(ld_future_error(ready) == LD_ENOMEM || ld_future_error(ready) == LD_ECLOSED,
                      "ready rejected with %s (N=%ld)", ld_err_name(ld_future_error(ready)),
                      g_fail_at);
    flush();
    ld_future_unref(closed);
    ld_future_unref(ready);
    ld_data_system_free(ds);
    OFF();
    if (g_calls < g_fail_at) { /* nothing failed: everything was applied and heard */
        /* the basis: foo, baz, bar gone, segment s1 gone; the full set: foo, baz;
         * the changes: foo, baz, bar */
        ck_assert_int_eq(g_changes, 4 + 2 + 3);
        json_t *now = contents();
        json_t *foo = json_object_get(json_object_get(now, "features"), "foo");
        ck_assert_int_eq(json_integer_value(json_object_get(foo, "version")), 40);
        json_decref(now);
    }
    ON();
}

/* Freed with its work in flight, at every point of its life. */
static void act_data_system_free_early(void)
{
    ld_data_system *ds = ld_data_system_new(B, S, &g_init, 1, g_sync);
    g_init = NULL;
    g_sync = NULL;
    if (!ds)
        return;
    ld_data_system_add_change_listener(ds, count_change, NULL);
    ld_future *ready = ld_data_system_ready(ds);
    for (int i = 0; i < 3; i++)
        event_base_loop(B, EVLOOP_NONBLOCK | EVLOOP_ONCE);
    ld_data_system_free(ds);
    settle(ready);
    ld_future_unref(ready);
}

/* The store synchronizer: a memory store (S, as store_setup() fills it)
 * read into another one by a data system, then freed. */
static ld_store *g_mirror;

static void mirror_setup(void)
{
    g_make_store = ld_memory_store_new;
    store_setup();
    g_mirror = ld_memory_store_new(B);
    ck_assert_ptr_nonnull(g_mirror);
}

static void mirror_teardown(void)
{
    flush();
    ld_store_free(g_mirror);
    g_mirror = NULL;
    store_teardown();
}

static void act_store_synchronizer(void)
{
    ld_synchronizer *sync = ld_store_synchronizer_new(B, S, 1);
    if (!sync)
        return;
    ld_data_system *ds = ld_data_system_new(B, g_mirror, NULL, 0, sync);
    if (!ds)
        return;
    ld_future *ready = ld_data_system_ready(ds);
    ck_assert_ptr_nonnull(ready);
    /* a read fails (out of memory) and the next one, 1 ms later, succeeds */
    for (int i = 0; i < 2000 && ld_future_is_pending(ready); i++)
        event_base_loop(B, EVLOOP_ONCE);
    ck_assert(!ld_future_is_pending(ready));
    if (ld_future_is_rejected(ready))
        ck_assert_int_eq(ld_future_error(ready), LD_ENOMEM);
    ld_future_unref(ready);
    ld_data_system_free(ds);
    OFF();
    if (g_calls < g_fail_at) { /* nothing failed: the mirror holds S's data */
        ld_future *f = ld_store_get(g_mirror, ld_kind_features(), "foo");
        settle(f);
        ck_assert_ptr_nonnull(ld_future_json(f));
        ld_future_unref(f);
    }
    ON();
}

CHAOS_TEST(test_chaos_data_system, PATH(ds_setup, act_data_system, ds_teardown),
           PATH(ds_setup, act_data_system_free_early, ds_teardown),
           PATH(mirror_setup, act_store_synchronizer, mirror_teardown))

/* ---- the client ----------------------------------------------------------- */

static ld_client_options *g_opts;
static ld_context *g_cctx;

/* Options with the data system's sources (ds_setup) and the store of the
 * client's own; a context. */
static void client_setup(void)
{
    ds_setup();
    g_opts = ld_client_options_new();
    ck_assert_ptr_nonnull(g_opts);
    ck_assert_int_eq(ld_client_options_add_initializer(g_opts, g_init), 0);
    ck_assert_int_eq(ld_client_options_set_synchronizer(g_opts, g_sync), 0);
    g_init = NULL;
    g_sync = NULL;
    json_t *cj = json_pack("{s:s, s:s}", "kind", "user", "key", "u");
    g_cctx = ld_context_from_json(cj, NULL);
    json_decref(cj);
    ck_assert_ptr_nonnull(g_cctx);
}

static void client_teardown(void)
{
    ld_client_options_free(g_opts);
    g_opts = NULL;
    ld_context_unref(g_cctx);
    g_cctx = NULL;
    ds_teardown();
}

/* A future of the client is its value, or rejected with LD_ENOMEM, or
 * (after close) LD_ECLOSED. */
static void client_outcome(ld_future *f)
{
    ck_assert_ptr_nonnull(f);
    settle(f);
    if (ld_future_is_rejected(f))
        ck_assert_msg(ld_future_error(f) == LD_ENOMEM || ld_future_error(f) == LD_ECLOSED,
                      "rejected with %s (N=%ld)", ld_err_name(ld_future_error(f)), g_fail_at);
}

static void count_client_status(ld_client *c, const ld_data_source_status *st, void *arg)
{
    (void)c, (void)st, (void)arg;
    g_heard++;
}

/* New, ready, a variation of each kind, the status, close, free. */
static void act_client(void)
{
    ld_client *c = ld_client_new(B, g_opts);
    if (!c)
        return;
    ld_future *ready = ld_client_ready(c);
    client_outcome(ready);
    bool was_ready = ld_future_is_fulfilled(ready);
    ld_future_unref(ready);
    OFF();
    json_t *fallback = json_string("fb");
    ON();
    ld_future *fs[] = {ld_client_bool_variation(c, "foo", g_cctx, false),
                       ld_client_int_variation(c, "foo", g_cctx, 5),
                       ld_client_number_variation(c, "foo", g_cctx, 1.5),
                       ld_client_string_variation(c, "foo", g_cctx, "x"),
                       ld_client_json_variation(c, "foo", g_cctx, fallback),
                       ld_client_variation_detail(c, "foo", g_cctx, LD_VALUE_BOOL, NULL),
                       ld_client_all_flags(c, g_cctx, 0)};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        client_outcome(fs[i]);
        if (i == 5 && was_ready && ld_future_is_fulfilled(fs[i])) /* foo's fallthrough is {} */
            ck_assert_int_eq(ld_detail_error(ld_future_ptr(fs[i])), LD_EVAL_ERROR_MALFORMED_FLAG);
        ld_future_unref(fs[i]);
    }
    ld_data_source_status st;
    ck_assert_int_eq(ld_client_data_source_status(c, &st), 0);
    int64_t id = ld_client_add_status_listener(c, count_client_status, NULL);
    ck_assert(id > 0 || id == LD_ENOMEM);
    ld_future *closed = ld_client_close(c);
    client_outcome(closed);
    ld_future_unref(closed);
    ld_client_free(c);
}

CHAOS_TEST(test_chaos_client, PATH(client_setup, act_client, client_teardown))

/* ---- the client's big segment cache ---------------------------------------- */

static ld_big_segment_store *g_bss;
static ld_context *g_cctx2;

/* An offline client's options on a memory store where flag "big" matches
 * big segment "bs" (the context "u" is in it); a mock big segment store. */
static void bs_client_setup(void)
{
    S = ld_memory_store_new(B);
    ck_assert_ptr_nonnull(S);
    json_t *data = json_pack(
        "{s:{s:{s:s, s:i, s:b, s:[bb], s:i, s:{s:i}, s:[{s:s, s:i, s:[{s:s, s:s, s:[s]}]}]}},"
        " s:{s:{s:s, s:i, s:b, s:i}}}",
        "features", "big", "key", "big", "version", 1, "on", 1, "variations", 1, 0, "offVariation",
        1, "fallthrough", "variation", 1, "rules", "id", "r", "variation", 0, "clauses",
        "attribute", "", "op", "segmentMatch", "values", "bs", "segments", "bs", "key", "bs",
        "version", 1, "unbounded", 1, "generation", 1);
    ck_assert_ptr_nonnull(data);
    ld_future *f = ld_store_init(S, data);
    settle(f);
    ck_assert(ld_future_is_fulfilled(f));
    ld_future_unref(f);
    json_decref(data);
    g_bss = ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    ck_assert_ptr_nonnull(g_bss);
    json_t *m = json_pack("{s:b}", "bs.g1", 1);
    /* base64(SHA-256("u")) */
    ck_assert_int_eq(ld_mock_big_segment_store_set_membership(
                         g_bss, "C/6TXnDDIcfKOvx1zg0MovmLVCLgCLsxwAxtfx8cCtY=", m),
                     0);
    json_decref(m);
    g_opts = ld_client_options_new();
    ck_assert_ptr_nonnull(g_opts);
    ld_client_options_set_store(g_opts, S);
    ld_client_options_set_offline(g_opts, true);
    ld_client_options_set_big_segments(g_opts, g_bss, 0);
    ld_client_options_set_big_segment_cache(g_opts, 1, 0, 1);
    json_t *cj = json_pack("{s:s, s:s}", "kind", "user", "key", "u");
    g_cctx = ld_context_from_json(cj, NULL);
    json_object_set_new(cj, "key", json_string("u2"));
    g_cctx2 = ld_context_from_json(cj, NULL);
    json_decref(cj);
    ck_assert_ptr_nonnull(g_cctx);
    ck_assert_ptr_nonnull(g_cctx2);
}

static void bs_client_teardown(void)
{
    ld_client_options_free(g_opts);
    g_opts = NULL;
    ld_context_unref(g_cctx);
    ld_context_unref(g_cctx2);
    g_cctx = g_cctx2 = NULL;
    ld_big_segment_store_free(g_bss);
    g_bss = NULL;
    ld_store_free(S);
    S = NULL;
}

static void count_bs_status(ld_client *c, const ld_big_segment_store_status *st, void *arg)
{
    (void)c, (void)st, (void)arg;
    g_heard++;
}

/* An evaluation of "big": its value, or LD_ENOMEM; a big segments status
 * of HEALTHY, or STORE_ERROR when a read of the cache failed. */
static void bs_outcome(ld_future *f, ld_context *ctx)
{
    client_outcome(f);
    if (ld_future_is_fulfilled(f)) {
        int st = ld_detail_big_segments_status(ld_future_ptr(f));
        ck_assert_msg(st == LD_BIG_SEGMENTS_STATUS_HEALTHY ||
                          st == LD_BIG_SEGMENTS_STATUS_STORE_ERROR,
                      "status %d (N=%ld)", st, g_fail_at);
        if (st == LD_BIG_SEGMENTS_STATUS_HEALTHY)
            ck_assert(json_is_true(ld_detail_value(ld_future_ptr(f))) == (ctx == g_cctx));
    }
    ld_future_unref(f);
}

/* New with the cache (one context, polls every ms), a listener, hits,
 * misses and an eviction, polls, the status, close, free. */
static void act_client_big_segments(void)
{
    ld_client *c = ld_client_new(B, g_opts);
    if (!c)
        return;
    int64_t id = ld_client_add_big_segment_status_listener(c, count_bs_status, NULL);
    ck_assert(id > 0 || id == LD_ENOMEM);
    ld_context *order[] = {g_cctx, g_cctx, g_cctx2, g_cctx};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        bs_outcome(ld_client_variation_detail(c, "big", order[i], LD_VALUE_BOOL, NULL), order[i]);
    OFF();
    struct timeval ms3 = {0, 3000};
    ld_future *later = ld_future_timeout(ld_future_new(B), &ms3);
    ON();
    settle(later); /* a few polls */
    ld_future_unref(later);
    ld_big_segment_store_status st;
    int rc = ld_client_big_segment_store_status(c, &st);
    ck_assert(rc == 0 || rc == LD_EBUSY);
    ld_future *pending = ld_client_variation_detail(c, "big", g_cctx2, LD_VALUE_BOOL, NULL);
    ld_future *closed = ld_client_close(c);
    client_outcome(closed);
    ld_future_unref(closed);
    ld_client_free(c); /* with `pending` perhaps still reading */
    settle(pending);
    ck_assert(ld_future_is_rejected(pending) || ld_future_is_fulfilled(pending));
    ld_future_unref(pending);
}

CHAOS_TEST(test_chaos_client_big_segments,
           PATH(bs_client_setup, act_client_big_segments, bs_client_teardown))

/* ---- network: configuration and the sources' making (no connection) ------- */

static void act_network(void)
{
    ld_net_config *c = ld_net_config_new("sdk-chaos");
    if (!c)
        return;
    ld_net_config_set_stream_uri(c, "http://127.0.0.1:1/");
    ld_net_config_set_base_uri(c, "http://127.0.0.1:1");
    ld_net_config_set_events_uri(c, "http://127.0.0.1:1");
    ld_net_config_set_payload_filter(c, "f");
    ld_net_config_set_application(c, "app", "1.0");
    ld_net_config_set_wrapper(c, "w", "2");
    ld_net_config_set_ca_file(c, "/nonexistent.pem");
    ld_net_config_set_proxy(c, "");
    ld_net_config *d = ld_net_config_copy(c);
    ld_synchronizer *st = ld_streaming_synchronizer_new(B, c);
    ld_synchronizer *ps = ld_polling_synchronizer_new(B, d ? d : c);
    ld_initializer *pi = ld_polling_initializer_new(B, c);
    ld_synchronizer_free(st);
    ld_synchronizer_free(ps);
    ld_initializer_free(pi);
    ld_client_options *o = ld_client_options_new();
    if (o && ld_client_options_set_net_config(o, c) == 0) {
        ld_client *cl = ld_client_new(B, o);
        char h[65];
        if (cl)
            ck_assert_int_eq(ld_client_secure_mode_hash(cl, g_cctx, h), 0);
        ld_client_free(cl); /* before its data system started: no connection */
    }
    ld_client_options_free(o);
    ld_net_config_free(d);
    ld_net_config_free(c);
}

CHAOS_TEST(test_chaos_network, PATH(client_setup, act_network, client_teardown))

/* ---- the hooks themselves ------------------------------------------------ */

START_TEST(test_set_alloc_funcs_all_or_none)
{
    ld_malloc_fn m;
    ld_realloc_fn r;
    ld_dealloc_fn f;
    ck_assert_int_eq(ld_set_alloc_funcs(chaos_malloc, NULL, free), LD_EINVAL);
    ck_assert_int_eq(ld_set_alloc_funcs(NULL, chaos_realloc, NULL), LD_EINVAL);
    ld_get_alloc_funcs(&m, &r, &f);
    ck_assert(m == malloc && r == realloc && f == free); /* unchanged */
    ck_assert_int_eq(ld_set_alloc_funcs(chaos_malloc, chaos_realloc, free), 0);
    ld_get_alloc_funcs(&m, NULL, NULL);
    ck_assert(m == chaos_malloc);
    ck_assert_int_eq(ld_set_alloc_funcs(NULL, NULL, NULL), 0);
    ld_get_alloc_funcs(&m, &r, &f);
    ck_assert(m == malloc && r == realloc && f == free);
}
END_TEST

static long g_counted;

static void *counting_malloc(size_t n)
{
    g_counted++;
    return malloc(n);
}

/* Every allocation of both libraries goes through the hooks: with the
 * hooks counting, a store, a mock and a few futures allocate through them
 * (and nothing is freed that the hooks did not allocate: valgrind and ASan
 * would see a mismatch). */
START_TEST(test_allocations_go_through_the_hooks)
{
    struct event_base *base = event_base_new();
    ck_assert_int_eq(ld_set_alloc_funcs(counting_malloc, realloc, free), 0);
    g_counted = 0;
    ld_store *s = ld_memory_store_new(base);
    ck_assert_int_gt(g_counted, 0);
    long n = g_counted;
    ld_store *m = ld_mock_store_new(base);
    ck_assert_int_gt(g_counted, n);
    ld_store_free(s);
    ld_store_free(m);
    for (int i = 0; i < 100 && event_base_loop(base, EVLOOP_NONBLOCK) == 0; i++)
        ;
    ld_set_alloc_funcs(NULL, NULL, NULL);
    event_base_free(base);
}
END_TEST

/* ---- contexts ------------------------------------------------------------ */

/* ld_secure_mode_hash() is not here: it allocates nothing (stack buffers
 * and OpenSSL's low-level SHA-256), which tests/model/check_secure_mode.c
 * checks through the library's hooks and OpenSSL's allocator. */

static json_t *g_ctx_json[3];
static ld_context *g_ctx[2];

static const char *const CTX_TEXTS[3] = {
    "{\"kind\": \"org\", \"key\": \"o:1\", \"name\": \"Acme\", \"a\": {\"b\": [1, 2]}, "
    "\"anonymous\": true, \"_meta\": {\"privateAttributes\": [\"/a/b\"]}}",
    "{\"kind\": \"multi\", \"user\": {\"key\": \"u\", \"x\": 1}, \"org\": {\"key\": \"o%\"}}",
    "{\"key\": \"u\", \"email\": \"e\", \"custom\": {\"c\": {\"d\": 1}}, "
    "\"privateAttributeNames\": [\"/c\", \"email\"]}",
};
static const char *const CTX_KEYS[3] = {"org:o%3A1", "org:o%25:user:u", "u"};

static void context_teardown(void)
{
    for (int i = 0; i < 3; i++) {
        json_decref(g_ctx_json[i]);
        g_ctx_json[i] = NULL;
    }
    for (int i = 0; i < 2; i++) {
        ld_context_unref(g_ctx[i]);
        g_ctx[i] = NULL;
    }
}

/* Between runs of a path (teardown and setup are per run). */
static void context_fixture_setup(void)
{
    for (int i = 0; i < 3; i++)
        g_ctx_json[i] = json_loads(CTX_TEXTS[i], 0, NULL);
    for (int i = 0; i < 2; i++)
        g_ctx[i] = ld_context_from_json(g_ctx_json[i], NULL);
}

static void assert_nomem(const char *why)
{
    ck_assert_msg(why && strcmp(why, "out of memory") == 0, "%s: \"%s\", not out of memory (N=%ld)",
                  g_path, why ? why : "(null)", g_fail_at);
}

static void act_context_from_json(void)
{
    for (int i = 0; i < 3; i++) {
        const char *why = NULL;
        ld_context *c = ld_context_from_json(g_ctx_json[i], &why);
        OFF();
        if (!c) {
            assert_nomem(why);
        } else {
            ck_assert_str_eq(ld_context_fully_qualified_key(c), CTX_KEYS[i]);
            json_t *back = ld_context_to_json(c);
            ld_context *again = ld_context_from_json(back, NULL);
            json_t *back2 = ld_context_to_json(again);
            ck_assert(json_equal(back, back2));
            json_decref(back);
            json_decref(back2);
            ld_context_unref(again);
            ld_context_unref(c);
        }
        ON();
    }
}

static void act_context_to_json(void)
{
    for (int i = 0; i < 2; i++) {
        json_t *j = ld_context_to_json(g_ctx[i]);
        OFF();
        if (j) {
            ld_context *c = ld_context_from_json(j, NULL);
            ck_assert_ptr_nonnull(c);
            ck_assert_str_eq(ld_context_fully_qualified_key(c), CTX_KEYS[i]);
            ld_context_unref(c);
            json_decref(j);
        }
        ON();
    }
}

static void act_context_builder(void)
{
    ld_context_builder *b = ld_context_builder_new("org", "o");
    if (!b)
        return;
    int rc = ld_context_builder_set(b, "name", json_string("Acme"));
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    bool lost = rc != 0;
    rc = ld_context_builder_set(b, "a", json_pack("{s:i}", "b", 1));
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    lost |= rc != 0;
    rc = ld_context_builder_private(b, "/a/b");
    ck_assert(rc == 0 || rc == LD_ENOMEM);
    lost |= rc != 0;
    ld_context_builder_anonymous(b, true);
    const char *why = NULL;
    ld_context *c = ld_context_builder_build(b, &why);
    OFF();
    if (lost)
        ck_assert_ptr_null(c);
    if (!c) {
        assert_nomem(why);
    } else {
        ck_assert_str_eq(ld_context_fully_qualified_key(c), "org:o");
        ck_assert(ld_context_anonymous(c, "org"));
        ck_assert_msg(json_integer_value(ld_context_get(c, "org", "/a/b")) == 1, "N=%ld json=%d",
                      g_fail_at, (int)g_json);
        ck_assert_str_eq(ld_context_private(c, "org", 0), "/a/b");
    }
    ON();
    ld_context_unref(c);
    ld_context_builder_free(b);
}

static void act_context_multi(void)
{
    const char *why = NULL;
    const ld_context *parts[] = {g_ctx[0], g_ctx[1]}; /* org twice */
    ld_context *m = ld_context_multi(parts, 2, &why);
    OFF();
    ck_assert_ptr_null(m);
    ck_assert(strcmp(why, "out of memory") == 0 || strstr(why, "same kind"));
    ON();
    ld_context_builder *b = ld_context_builder_new("device", "d");
    ld_context *d = b ? ld_context_builder_build(b, NULL) : NULL;
    ld_context_builder_free(b);
    if (!d)
        return;
    const ld_context *parts2[] = {g_ctx[1], d};
    m = ld_context_multi(parts2, 2, &why);
    OFF();
    if (!m)
        assert_nomem(why);
    else
        ck_assert_str_eq(ld_context_fully_qualified_key(m), "device:d:org:o%25:user:u");
    ON();
    ld_context_unref(m);
    ld_context_unref(d);
}

static void act_context_get_long_ref(void)
{
    char ref[400];
    memset(ref, 'x', sizeof ref - 1);
    ref[0] = '/';
    ref[1] = '~';
    ref[2] = '1';
    ref[sizeof ref - 1] = '\0';
    /* absent either way; it must not crash or leak */
    ck_assert_ptr_null(ld_context_get(g_ctx[0], "org", ref));
    ck_assert_int_eq(json_integer_value(ld_context_get(g_ctx[1], "user", "/x")), 1);
}

/* An old-style user with the empty key comes out in the old-style form. */
static ld_context *g_old_user;

static void old_user_setup(void)
{
    json_t *j = json_loads("{\"key\": \"\", \"email\": \"e\", \"anonymous\": true, "
                           "\"custom\": {\"c\": {\"d\": [1]}}, "
                           "\"privateAttributeNames\": [\"/c\", \"email\"]}",
                           0, NULL);
    g_old_user = ld_context_from_json(j, NULL);
    json_decref(j);
    ck_assert_ptr_nonnull(g_old_user);
}

static void old_user_teardown(void)
{
    ld_context_unref(g_old_user);
    g_old_user = NULL;
}

static void act_context_old_user_to_json(void)
{
    json_t *j = ld_context_to_json(g_old_user);
    OFF();
    if (j) {
        ld_context *c = ld_context_from_json(j, NULL);
        ck_assert_ptr_nonnull(c);
        ck_assert_str_eq(ld_context_key(c, NULL), "");
        ck_assert_str_eq(ld_context_private(c, NULL, 0), "/~1c");
        json_t *again = ld_context_to_json(c);
        ck_assert(json_equal(j, again));
        json_decref(again);
        ld_context_unref(c);
        json_decref(j);
    }
    ON();
}

CHAOS_TEST(test_chaos_contexts,
           PATH(context_fixture_setup, act_context_from_json, context_teardown),
           PATH(context_fixture_setup, act_context_to_json, context_teardown),
           PATH(context_fixture_setup, act_context_builder, context_teardown),
           PATH(context_fixture_setup, act_context_multi, context_teardown),
           PATH(context_fixture_setup, act_context_get_long_ref, context_teardown),
           PATH(old_user_setup, act_context_old_user_to_json, old_user_teardown))

/* ---- evaluation ---------------------------------------------------------- */

static const char EVAL_DATA[] =
    "{\"features\": {"
    " \"f-bool\": {\"key\": \"f-bool\", \"version\": 1, \"on\": true, \"variations\": [true, "
    "false],"
    "  \"fallthrough\": {\"variation\": 0}},"
    " \"f-rich\": {\"key\": \"f-rich\", \"version\": 2, \"on\": true, \"variations\": [\"a\", "
    "\"b\", \"c\"],"
    "  \"salt\": \"s\", \"targets\": [{\"values\": [\"t1\", \"t2\"], \"variation\": 0}],"
    "  \"rules\": [{\"id\": \"r1\", \"variation\": 1, \"clauses\": ["
    "    {\"attribute\": \"email\", \"op\": \"matches\", \"values\": [\"^x.*@corp\"]},"
    "    {\"attribute\": \"version\", \"op\": \"semVerGreaterThan\", \"values\": [\"2.0.0\"]}]},"
    "   {\"id\": \"r2\", \"variation\": 2, \"clauses\": ["
    "    {\"attribute\": \"country\", \"op\": \"in\", \"values\": [\"a\", \"b\", \"c\", \"d\", "
    "\"e\","
    "      \"f\", \"g\", \"h\", \"i\", \"j\", \"k\", \"l\", \"us\"]},"
    "    {\"contextKind\": \"user\", \"attribute\": \"/obj/a~1b\", \"op\": \"endsWith\", "
    "\"values\": [\"z\"]}]}],"
    "  \"fallthrough\": {\"rollout\": {\"kind\": \"experiment\", \"seed\": 7, \"variations\": ["
    "    {\"variation\": 0, \"weight\": 50000}, {\"variation\": 1, \"weight\": 50000}]}}},"
    " \"f-pre\": {\"key\": \"f-pre\", \"version\": 3, \"on\": true, \"variations\": [1, 2],"
    "  \"prerequisites\": [{\"key\": \"f-bool\", \"variation\": 0}],"
    "  \"rules\": [{\"id\": \"in-seg\", \"variation\": 0, \"clauses\": ["
    "    {\"attribute\": \"\", \"op\": \"segmentMatch\", \"values\": [\"s-seg\"]}]}],"
    "  \"fallthrough\": {\"variation\": 1}},"
    " \"f-big\": {\"key\": \"f-big\", \"version\": 4, \"on\": true, \"variations\": [\"in\", "
    "\"out\"],"
    "  \"rules\": [{\"id\": \"big\", \"variation\": 0, \"clauses\": ["
    "    {\"attribute\": \"\", \"op\": \"segmentMatch\", \"values\": [\"s-big\"]}]}],"
    "  \"fallthrough\": {\"variation\": 1}}},"
    " \"segments\": {"
    " \"s-seg\": {\"key\": \"s-seg\", \"version\": 1, \"included\": [\"nobody\"], \"salt\": \"x\","
    "  \"rules\": [{\"clauses\": [{\"attribute\": \"country\", \"op\": \"startsWith\", \"values\": "
    "[\"u\"]}],"
    "   \"weight\": 100000}]},"
    " \"s-big\": {\"key\": \"s-big\", \"version\": 1, \"unbounded\": true, \"generation\": 1}}}";

static const char *const EVAL_FLAGS[] = {"f-bool", "f-rich", "f-pre", "f-big", "missing"};
enum { N_EVAL = sizeof EVAL_FLAGS / sizeof EVAL_FLAGS[0] };

static ld_context *g_ectx;
static ld_big_segment_store *g_bss;
static json_t *g_expect[N_EVAL + 1]; /* the details, then the all-flags state */

static ld_evaluator *evaluator(void)
{
    ld_evaluator *ev = ld_evaluator_new(S);
    if (ev)
        ck_assert_int_eq(ld_evaluator_set_big_segment_store(ev, g_bss, 0), 0);
    return ev;
}

/* What `ev` answers for case i (< N_EVAL: a detail's JSON; N_EVAL: the
 * all-flags state), or NULL when it ran out of memory. */
static json_t *eval_case(ld_evaluator *ev, int i)
{
    bool counting = g_counting;
    OFF();
    json_t *fallback = json_string("fallback");
    g_counting = counting;
    ld_future *f = i < N_EVAL
                       ? ld_evaluator_detail(ev, EVAL_FLAGS[i], g_ectx, LD_VALUE_ANY, fallback)
                       : ld_evaluator_all_flags(ev, g_ectx, LD_ALL_FLAGS_WITH_REASONS);
    if (i == N_EVAL)
        json_decref(fallback);
    ck_assert_ptr_nonnull(f);
    json_t *r = NULL;
    if (!failed_with_enomem(f)) {
        ck_assert_msg(ld_future_is_fulfilled(f), "rejected with %s (%s, N=%ld)",
                      ld_err_name(ld_future_error(f)), g_path, g_fail_at);
        bool on = g_counting;
        OFF();
        r = i < N_EVAL ? ld_detail_to_json(ld_future_ptr(f)) : json_incref(ld_future_json(f));
        ck_assert_ptr_nonnull(r);
        g_counting = on;
    }
    ld_future_unref(f);
    return r;
}

static void eval_setup(void)
{
    S = g_make_store(B);
    ck_assert_ptr_nonnull(S);
    json_t *data = json_loads(EVAL_DATA, 0, NULL);
    ck_assert_ptr_nonnull(data);
    ld_future *f = ld_store_init(S, data);
    settle(f);
    ck_assert(ld_future_is_fulfilled(f));
    ld_future_unref(f);
    json_decref(data);
    json_t *cj =
        json_loads("{\"kind\": \"user\", \"key\": \"userkey\", \"email\": \"xy@corp.com\","
                   " \"version\": \"2.1\", \"country\": \"us\", \"obj\": {\"a/b\": \"z\"}}",
                   0, NULL);
    g_ectx = ld_context_from_json(cj, NULL);
    json_decref(cj);
    ck_assert_ptr_nonnull(g_ectx);
    g_bss = ld_mock_big_segment_store_new(B, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    ck_assert_ptr_nonnull(g_bss);
    json_t *m = json_pack("{s:b}", "s-big.g1", 1);
    /* base64(sha256("userkey")) */
    ck_assert_int_eq(ld_mock_big_segment_store_set_membership(
                         g_bss, "72cBpXPyn4N6TqqlS8Tti37jEcoNhFzL9ZdG1jXkILE=", m),
                     0);
    json_decref(m);
    ld_evaluator *ev = evaluator();
    ck_assert_ptr_nonnull(ev);
    for (int i = 0; i <= N_EVAL; i++) {
        g_expect[i] = eval_case(ev, i);
        ck_assert_ptr_nonnull(g_expect[i]);
    }
    ld_evaluator_free(ev);
}

static void eval_teardown(void)
{
    for (int i = 0; i <= N_EVAL; i++) {
        json_decref(g_expect[i]);
        g_expect[i] = NULL;
    }
    ld_context_unref(g_ectx);
    g_ectx = NULL;
    ld_big_segment_store_free(g_bss);
    g_bss = NULL;
    store_teardown();
}

/* Every case on a new evaluator (whose first evaluations compile what they
 * read), then again on the same one: each answer is the expected one or
 * LD_ENOMEM. */
static void act_evaluate(void)
{
    ld_evaluator *ev = evaluator();
    if (!ev)
        return;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i <= N_EVAL; i++) {
            json_t *r = eval_case(ev, i);
            if (r) {
                OFF();
                char *got = json_dumps(r, JSON_SORT_KEYS),
                     *want = json_dumps(g_expect[i], JSON_SORT_KEYS);
                ck_assert_msg(json_equal(r, g_expect[i]), "case %d: %s, not %s (%s, N=%ld)", i, got,
                              want, g_path, g_fail_at);
                free(got);
                free(want);
                json_decref(r);
                ON();
            }
        }
    }
    ld_evaluator_free(ev);
}

/* The evaluator freed with evaluations pending: each is rejected with
 * LD_ECANCELED (or LD_ENOMEM), or was answered already. */
static void act_evaluator_free_pending(void)
{
    ld_evaluator *ev = evaluator();
    if (!ev)
        return;
    ld_future *fs[N_EVAL + 1];
    for (int i = 0; i < N_EVAL; i++)
        fs[i] = ld_evaluator_detail(ev, EVAL_FLAGS[i], g_ectx, LD_VALUE_ANY, NULL);
    fs[N_EVAL] = ld_evaluator_all_flags(ev, g_ectx, 0);
    ld_evaluator_free(ev);
    for (int i = 0; i <= N_EVAL; i++) {
        settle(fs[i]);
        if (ld_future_is_rejected(fs[i]))
            ck_assert_msg(ld_future_error(fs[i]) == LD_ECANCELED ||
                              ld_future_error(fs[i]) == LD_ENOMEM,
                          "rejected with %s (%s, N=%ld)", ld_err_name(ld_future_error(fs[i])),
                          g_path, g_fail_at);
        ld_future_unref(fs[i]);
    }
}

/* The same, with the all-flags state made in slices of 2 flags. */
static void act_evaluate_sliced(void)
{
    setenv("LDASYNC_EVAL_SLICE_FLAGS", "2", 1);
    act_evaluate();
    unsetenv("LDASYNC_EVAL_SLICE_FLAGS");
}

static void act_evaluator_free_pending_sliced(void)
{
    setenv("LDASYNC_EVAL_SLICE_FLAGS", "2", 1);
    act_evaluator_free_pending();
    unsetenv("LDASYNC_EVAL_SLICE_FLAGS");
}

/* The same, with every item of more than 2 values compiled on the
 * evaluator's worker (LDASYNC_EVAL_BIG_ITEM): f-rich, f-pre, f-big and
 * s-seg; the worker runs from the loop here (libevent threading off). */
static void act_evaluate_big(void)
{
    setenv("LDASYNC_EVAL_BIG_ITEM", "2", 1);
    act_evaluate();
    setenv("LDASYNC_EVAL_SLICE_FLAGS", "2", 1);
    act_evaluate();
    unsetenv("LDASYNC_EVAL_SLICE_FLAGS");
    unsetenv("LDASYNC_EVAL_BIG_ITEM");
}

static void act_evaluator_free_pending_big(void)
{
    setenv("LDASYNC_EVAL_BIG_ITEM", "2", 1);
    act_evaluator_free_pending();
    unsetenv("LDASYNC_EVAL_BIG_ITEM");
}

CHAOS_TEST(test_chaos_eval, PATH(eval_setup, act_evaluate, eval_teardown),
           PATH(eval_setup, act_evaluator_free_pending, eval_teardown),
           PATH(eval_setup, act_evaluate_sliced, eval_teardown),
           PATH(eval_setup, act_evaluator_free_pending_sliced, eval_teardown),
           PATH(eval_setup, act_evaluate_big, eval_teardown),
           PATH(eval_setup, act_evaluator_free_pending_big, eval_teardown))

static void add_case(Suite *s, const char *name, SFun setup, const TTest *test)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, chaos_teardown);
    tcase_add_test(tc, test);
    suite_add_tcase(s, tc);
}

static Suite *chaos_suite(void)
{
    Suite *s = suite_create("chaos");
    TCase *tc = tcase_create("hooks");
    tcase_add_test(tc, test_set_alloc_funcs_all_or_none);
    tcase_add_test(tc, test_allocations_go_through_the_hooks);
    suite_add_tcase(s, tc);

    add_case(s, "futures", chaos_setup, test_chaos_futures);
    add_case(s, "memory_store", memory_store_fixture, test_chaos_store);
    add_case(s, "sliced_memory_store", sliced_memory_store_fixture, test_chaos_store);
    add_case(s, "mock_store", mock_store_fixture, test_chaos_store);
    add_case(s, "busy_store", busy_store_fixture, test_chaos_store);
    add_case(s, "caching_store", caching_forever_fixture, test_chaos_store);
    add_case(s, "caching_store_ttl", caching_ttl_fixture, test_chaos_store);
    add_case(s, "caching_store_status", chaos_setup, test_chaos_caching_status);
    add_case(s, "sink_fdv2_mocks", chaos_setup, test_chaos_sink_fdv2_mocks);
    add_case(s, "contexts", chaos_setup, test_chaos_contexts);
    add_case(s, "file_source", chaos_setup, test_chaos_file_source);
    add_case(s, "data_system", chaos_setup, test_chaos_data_system);
    add_case(s, "client", chaos_setup, test_chaos_client);
    add_case(s, "client_big_segments", chaos_setup, test_chaos_client_big_segments);
    add_case(s, "network", chaos_setup, test_chaos_network);
    add_case(s, "eval_memory_store", memory_store_fixture, test_chaos_eval);
    add_case(s, "eval_busy_store", busy_store_fixture, test_chaos_eval);
    return s;
}

int main(void)
{
    /* Before the first future: every future is an allocation of its own. */
    setenv("LDASYNC_NO_POOL", "1", 1);
    SRunner *sr = srunner_create(chaos_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
