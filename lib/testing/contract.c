/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the store contract as Check tests (testing.h).
 *
 * Check's fixtures take no argument, so a registration is found through the
 * loop index: each registration adds every test as a loop test over the one
 * index [i, i + 1) of its entry in a static table, and each test starts with
 * begin(_i), which runs the factory. The checked teardown frees what begin()
 * made, also after a failure in CK_FORK=no mode.
 *
 * Tests wait with ld_future_wait() (a store may answer from the network),
 * and assert nothing inside callbacks: those only record what happened.
 */
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/testing.h>

#include "testing-internal.h"

#define GUARD_SEC 60

struct registration {
    char *name;
    struct ld_store_contract_factory factory;
    void *arg;
};

static struct registration *regs;
static int nregs, capregs;

/* The running test. */
static const struct registration *R;
static struct event_base *B;
static ld_store *S;
static bool V; /* reads go through the read-only view */
static struct event *guard;
static bool factory_ready;

static void guard_fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    ck_abort_msg("%s: no answer from the store within %d s", R->name, GUARD_SEC);
}

/* Loop indices from VIEW_LOOP on run a test with its reads (get, all)
 * through the store's read-only view (ld_store_read_only()). */
#define VIEW_LOOP (1 << 20)

static void begin(int i)
{
    V = i >= VIEW_LOOP;
    R = &regs[V ? i - VIEW_LOOP : i];
    B = event_base_new();
    ck_assert_msg(B != NULL, "event_base_new failed");
    guard = event_new(B, -1, 0, guard_fired, NULL);
    struct timeval tv = {GUARD_SEC, 0};
    ck_assert_msg(guard && event_add(guard, &tv) == 0, "cannot add the guard timer");
    if (R->factory.setup) {
        int rc = R->factory.setup(B, R->arg);
        ck_assert_msg(rc == 0, "%s: factory setup failed (%d)", R->name, rc);
    }
    factory_ready = true;
    S = R->factory.new_store(B, R->arg);
    ck_assert_msg(S != NULL, "%s: factory new_store returned NULL", R->name);
}

/* Runs the loop until nothing is active. */
static void settle(void)
{
    for (int pass = 0; pass < 100000; pass++) {
        event_base_loop(B, EVLOOP_NONBLOCK);
        if (event_base_get_num_events(B, EVENT_BASE_COUNT_ACTIVE) == 0)
            return;
    }
    ck_abort_msg("the loop did not become idle");
}

static void end(void)
{
    if (!B)
        return;
    ld_store_free(S);
    S = NULL;
    settle();
    if (factory_ready && R->factory.teardown)
        R->factory.teardown(B, R->arg);
    factory_ready = false;
    event_free(guard);
    guard = NULL;
    int idle = 0;
    for (int pass = 0; pass < 1000 && !idle; pass++)
        idle = event_base_loop(B, EVLOOP_NONBLOCK) == 1; /* 1: no events at all */
    event_base_free(B);
    B = NULL;
    ck_assert_msg(idle, "%s: events were left on the base after the store was freed", R->name);
}

/* ---- helpers ----------------------------------------------------------- */

#define F ld_kind_features()
#define SEG ld_kind_segments()

/* The read path: the store's own functions or, for the view's run of the
 * contract, the read-only view's. */
static ld_future *read_get(const ld_kind *kind, const char *key)
{
    return V ? ld_read_only_store_get(ld_store_read_only(S), kind, key)
             : ld_store_get(S, kind, key);
}

static ld_future *read_all(const ld_kind *kind)
{
    return V ? ld_read_only_store_all(ld_store_read_only(S), kind) : ld_store_all(S, kind);
}

/* The flag fixture (docs/design.md, "The testing kit"). New reference. */
static json_t *make_feature(const char *key, int64_t version)
{
    json_t *f = json_pack("{s:s, s:I, s:b, s:[b,b], s:n, s:{}, s:[], s:[], s:[], s:[], s:s}", "key",
                          key, "version", (json_int_t)version, "on", 1, "variations", 1, 0,
                          "offVariation", "fallthrough", "prerequisites", "targets",
                          "contextTargets", "rules", "salt", "abc");
    ck_assert_ptr_nonnull(f);
    return f;
}

static json_t *make_segment(const char *key, int64_t version)
{
    json_t *s = json_pack("{s:s, s:I, s:[], s:[], s:s}", "key", key, "version", (json_int_t)version,
                          "included", "excluded", "salt", "xyz");
    ck_assert_ptr_nonnull(s);
    return s;
}

static json_t *make_item(const ld_kind *kind, const char *key, int64_t version)
{
    return kind == SEG ? make_segment(key, version) : make_feature(key, version);
}

/* Waits for f (issued by the operation `what`) and returns it, still held. */
static ld_future *await(ld_future *f, const char *what)
{
    ck_assert_msg(f != NULL, "%s returned NULL", what);
    int rc = ld_future_wait(f);
    ck_assert_msg(rc == 0, "waiting for %s: %s", what, ld_err_name(rc));
    ck_assert_msg(!ld_future_is_pending(f), "%s still pending after the wait", what);
    return f;
}

/* Waits for f and checks that it fulfilled. */
static ld_future *fulfilled(ld_future *f, const char *what)
{
    await(f, what);
    ck_assert_msg(ld_future_is_fulfilled(f), "%s rejected: %s (%s)", what,
                  ld_err_name(ld_future_error(f)), ld_future_error_message(f));
    return f;
}

#define FULFILLED(call) fulfilled((call), #call)

static void done_ok(ld_future *f, const char *what)
{
    ld_future_unref(fulfilled(f, what));
}

#define OK(call) done_ok((call), #call)

static bool done_bool(ld_future *f, const char *what)
{
    bool v = ld_future_bool(fulfilled(f, what));
    ld_future_unref(f);
    return v;
}

#define BOOL(call) done_bool((call), #call)

/* The version of the item that get returns, -1 for NULL. */
static int64_t version_of(const ld_kind *kind, const char *key)
{
    ld_future *f = fulfilled(read_get(kind, key), "get");
    json_t *item = ld_future_json(f);
    int64_t v = -1;
    if (item) {
        ck_assert_msg(json_is_object(item), "get(\"%s\") is not an object", key);
        ck_assert_msg(!ld_item_is_deleted(item), "get(\"%s\") returned a tombstone", key);
        v = ld_item_version(item);
        ck_assert_msg(v >= 0, "get(\"%s\") returned an item without a valid version", key);
    }
    ld_future_unref(f);
    return v;
}

/* The number of items that all returns for `kind`, after checking that it
 * is an object of valid items, none a tombstone. */
static size_t all_size(const ld_kind *kind)
{
    ld_future *f = fulfilled(read_all(kind), "all");
    json_t *all = ld_future_json(f);
    ck_assert_msg(json_is_object(all), "all did not fulfil with an object");
    const char *key;
    json_t *item;
    json_object_foreach(all, key, item)
    {
        ck_assert_msg(ld_item_validate(item, key, NULL) == 0, "all[\"%s\"] is not a valid item",
                      key);
        ck_assert_msg(!ld_item_is_deleted(item), "all contains the tombstone of \"%s\"", key);
    }
    size_t n = json_object_size(all);
    ld_future_unref(f);
    return n;
}

/* The version of all[key] for `kind`, -1 if absent. */
static int64_t all_version(const ld_kind *kind, const char *key)
{
    ld_future *f = fulfilled(read_all(kind), "all");
    json_t *item = json_object_get(ld_future_json(f), key);
    int64_t v = item ? ld_item_version(item) : -1;
    ld_future_unref(f);
    return v;
}

static void init_with(json_t *data)
{
    OK(ld_store_init(S, data));
    json_decref(data);
}

/* The "inited store" (docs/design.md, "The testing kit"): foo v10 and bar v10. */
static void init_foo_bar(void)
{
    init_with(json_pack("{s:{s:o, s:o}, s:{}}", "features", "foo", make_feature("foo", 10), "bar",
                        make_feature("bar", 10), "segments"));
}

static bool upsert(const ld_kind *kind, const char *key, int64_t version)
{
    json_t *item = make_item(kind, key, version);
    bool applied = BOOL(ld_store_upsert(S, kind, item));
    json_decref(item);
    return applied;
}

static bool delete_at(const ld_kind *kind, const char *key, int64_t version)
{
    return BOOL(ld_store_delete(S, kind, key, version));
}

static void expect_error(ld_future *f, const char *what, int code, const char *in_message)
{
    await(f, what);
    ck_assert_msg(ld_future_is_rejected(f), "%s fulfilled; expected %s", what, ld_err_name(code));
    ck_assert_msg(ld_future_error(f) == code, "%s rejected with %s; expected %s", what,
                  ld_err_name(ld_future_error(f)), ld_err_name(code));
    const char *msg = ld_future_error_message(f);
    if (in_message)
        ck_assert_msg(msg && strstr(msg, in_message), "%s: message \"%s\" does not name \"%s\"",
                      what, msg ? msg : "(null)", in_message);
    ld_future_unref(f);
}

#define EXPECT_ERROR(call, code, in_message) expect_error((call), #call, (code), (in_message))

/* foo and bar are still at v10, nothing else is there, and initialized. */
static void expect_foo_bar_unchanged(void)
{
    ck_assert_int_eq(version_of(F, "foo"), 10);
    ck_assert_int_eq(version_of(F, "bar"), 10);
    ck_assert_int_eq(all_size(F), 2);
    ck_assert_int_eq(all_size(SEG), 0);
    ck_assert_msg(BOOL(ld_store_initialized(S)), "the store is no longer initialized");
}

/* Callbacks record, tests check. */
static int order[32], norder;

static void count_cb(ld_future *f, void *arg)
{
    (void)f;
    (*(int *)arg)++;
}

static void note_order(ld_future *f, void *arg)
{
    (void)f;
    if (norder < 32)
        order[norder] = (int)(intptr_t)arg;
    norder++;
}

/* ---- the 17 cases of the Python SDK's async store suite ------------------ */

START_TEST(not_initialized_before_init)
{
    begin(_i);
    ck_assert_msg(!BOOL(ld_store_initialized(S)), "a new store says it is initialized");
}
END_TEST

START_TEST(initialized)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(BOOL(ld_store_initialized(S)), "not initialized after init");
}
END_TEST

START_TEST(get_existing_feature)
{
    begin(_i);
    init_foo_bar();
    ld_future *f = FULFILLED(read_get(F, "foo"));
    json_t *expected = make_feature("foo", 10);
    ck_assert_msg(json_equal(ld_future_json(f), expected),
                  "get(\"foo\") is not the item given to init");
    json_decref(expected);
    ld_future_unref(f);
}
END_TEST

START_TEST(get_nonexisting_feature)
{
    begin(_i);
    init_foo_bar();
    ck_assert_int_eq(version_of(F, "biz"), -1);
}
END_TEST

START_TEST(get_all_versions)
{
    begin(_i);
    init_foo_bar();
    ck_assert_int_eq(all_size(F), 2);
    ck_assert_int_eq(all_version(F, "foo"), 10);
    ck_assert_int_eq(all_version(F, "bar"), 10);
}
END_TEST

START_TEST(upsert_with_newer_version)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(upsert(F, "foo", 11), "upsert of a newer version returned false");
    ck_assert_int_eq(version_of(F, "foo"), 11);
}
END_TEST

START_TEST(upsert_with_older_version)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(!upsert(F, "foo", 9), "upsert of an older version returned true");
    ck_assert_int_eq(version_of(F, "foo"), 10);
}
END_TEST

START_TEST(upsert_with_new_feature)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(upsert(F, "biz", 1), "upsert of a new key returned false");
    ck_assert_int_eq(version_of(F, "biz"), 1);
    ck_assert_int_eq(all_size(F), 3);
}
END_TEST

START_TEST(delete_with_newer_version)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(delete_at(F, "foo", 11), "delete at a newer version returned false");
    ck_assert_int_eq(version_of(F, "foo"), -1);
}
END_TEST

START_TEST(delete_unknown_feature)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(delete_at(F, "biz", 11), "delete of an unknown key returned false");
    ck_assert_int_eq(version_of(F, "biz"), -1);
    ck_assert_msg(!upsert(F, "biz", 10), "the tombstone of an unknown key did not block v10");
    ck_assert_msg(upsert(F, "biz", 12), "upsert after the tombstone's version returned false");
}
END_TEST

START_TEST(delete_with_older_version)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(!delete_at(F, "foo", 9), "delete at an older version returned true");
    ck_assert_int_eq(version_of(F, "foo"), 10);
}
END_TEST

START_TEST(upsert_older_version_after_delete)
{
    begin(_i);
    init_foo_bar();
    ck_assert(delete_at(F, "foo", 11));
    ck_assert_msg(!upsert(F, "foo", 9), "an older upsert came back over a tombstone");
    ck_assert_int_eq(version_of(F, "foo"), -1);
}
END_TEST

START_TEST(deleted_item_not_in_all)
{
    begin(_i);
    init_foo_bar();
    ck_assert(delete_at(F, "foo", 11));
    ck_assert_int_eq(all_version(F, "foo"), -1);
    ck_assert_int_eq(all_size(F), 1);
}
END_TEST

START_TEST(upsert_equal_version_not_applied)
{
    begin(_i);
    init_foo_bar();
    json_t *item = make_feature("foo", 10);
    json_object_set_new(item, "on", json_false());
    ck_assert_msg(!BOOL(ld_store_upsert(S, F, item)), "upsert of an equal version returned true");
    ld_future *f = FULFILLED(read_get(F, "foo"));
    ck_assert_msg(json_is_true(json_object_get(ld_future_json(f), "on")),
                  "upsert of an equal version replaced the item");
    ld_future_unref(f);
    json_decref(item);
}
END_TEST

START_TEST(delete_equal_version_not_applied)
{
    begin(_i);
    init_foo_bar();
    ck_assert_msg(!delete_at(F, "foo", 10), "delete at an equal version returned true");
    ck_assert_int_eq(version_of(F, "foo"), 10);
}
END_TEST

START_TEST(init_replaces_existing_data)
{
    begin(_i);
    init_foo_bar();
    ck_assert(upsert(F, "biz", 1));
    ck_assert(upsert(SEG, "s", 1));
    init_with(json_pack("{s:{s:o}}", "features", "new", make_feature("new", 1)));
    ck_assert_msg(version_of(F, "foo") == -1, "init kept \"foo\", absent from its data");
    ck_assert_msg(version_of(F, "biz") == -1, "init kept \"biz\", absent from its data");
    ck_assert_int_eq(version_of(F, "new"), 1);
    ck_assert_int_eq(all_size(F), 1);
    ck_assert_msg(all_size(SEG) == 0, "a kind absent from init's data kept its items");
    ck_assert_int_eq(version_of(SEG, "s"), -1);
}
END_TEST

START_TEST(describe_names_the_implementation)
{
    begin(_i);
    const char *d = ld_store_describe(S);
    ck_assert_msg(d && *d, "describe() is empty");
    ck_assert_str_eq(ld_store_describe(NULL), "(null)");
}
END_TEST

/* ---- more of store.h's semantics ----------------------------------------- */

START_TEST(writes_do_not_initialize)
{
    begin(_i);
    ck_assert(upsert(F, "foo", 1));
    ck_assert(delete_at(F, "bar", 1));
    ck_assert_msg(!BOOL(ld_store_initialized(S)), "upsert or delete made the store initialized");
}
END_TEST

START_TEST(init_with_empty_data_initializes)
{
    begin(_i);
    ck_assert(upsert(F, "foo", 1));
    init_with(json_object());
    ck_assert(BOOL(ld_store_initialized(S)));
    ck_assert_int_eq(all_size(F), 0);
    ck_assert_int_eq(all_size(SEG), 0);
}
END_TEST

START_TEST(kinds_are_kept_apart)
{
    begin(_i);
    init_with(json_pack("{s:{s:o}, s:{s:o}}", "features", "k", make_feature("k", 1), "segments",
                        "k", make_segment("k", 5)));
    ck_assert_int_eq(version_of(F, "k"), 1);
    ck_assert_int_eq(version_of(SEG, "k"), 5);
    ck_assert_msg(upsert(F, "k", 2), "the segment's version blocked the flag's upsert");
    ck_assert(delete_at(SEG, "k", 6));
    ck_assert_int_eq(version_of(F, "k"), 2);
    ck_assert_int_eq(version_of(SEG, "k"), -1);
    ck_assert_int_eq(all_size(F), 1);
    ck_assert_int_eq(all_size(SEG), 0);
}
END_TEST

START_TEST(items_come_back_equal)
{
    begin(_i);
    json_t *seg = make_segment("s", 3);
    json_object_set_new(seg, "nested", json_pack("{s:[i,f,s,n], s:{}}", "a", 1, 2.5, "x", "o"));
    ck_assert(BOOL(ld_store_upsert(S, SEG, seg)));
    ld_future *g = FULFILLED(read_get(SEG, "s"));
    ck_assert_msg(json_equal(ld_future_json(g), seg), "get returned a different item");
    ld_future *a = FULFILLED(read_all(SEG));
    ck_assert_msg(json_equal(json_object_get(ld_future_json(a), "s"), seg),
                  "all returned a different item");
    ld_future_unref(g);
    ld_future_unref(a);
    json_decref(seg);
}
END_TEST

START_TEST(upsert_of_a_tombstone_deletes)
{
    begin(_i);
    init_foo_bar();
    json_t *tomb = json_pack("{s:s, s:i, s:b}", "key", "foo", "version", 11, "deleted", 1);
    ck_assert_msg(BOOL(ld_store_upsert(S, F, tomb)), "upsert of a newer tombstone returned false");
    ck_assert_int_eq(version_of(F, "foo"), -1);
    ck_assert_int_eq(all_version(F, "foo"), -1);
    ck_assert_msg(!upsert(F, "foo", 10), "an upserted tombstone did not block an older upsert");
    ck_assert(upsert(F, "foo", 12));
    json_decref(tomb);
}
END_TEST

START_TEST(tombstones_in_init_data_block_older_upserts)
{
    begin(_i);
    init_with(json_pack("{s:{s:o, s:{s:s, s:i, s:b}}}", "features", "foo", make_feature("foo", 1),
                        "gone", "key", "gone", "version", 7, "deleted", 1));
    ck_assert_int_eq(version_of(F, "gone"), -1);
    ck_assert_int_eq(all_size(F), 1);
    ck_assert_msg(!upsert(F, "gone", 7), "a tombstone from init did not block an equal upsert");
    ck_assert(upsert(F, "gone", 8));
    ck_assert_int_eq(version_of(F, "gone"), 8);
}
END_TEST

START_TEST(delete_then_newer_upsert_restores)
{
    begin(_i);
    init_foo_bar();
    ck_assert(delete_at(F, "foo", 11));
    ck_assert(upsert(F, "foo", 12));
    ck_assert_int_eq(version_of(F, "foo"), 12);
    ck_assert_int_eq(all_version(F, "foo"), 12);
}
END_TEST

START_TEST(version_zero_and_large_versions)
{
    begin(_i);
    const int64_t big = (int64_t)1 << 52;
    ck_assert_msg(upsert(F, "zero", 0), "upsert of a new key at version 0 returned false");
    ck_assert_int_eq(version_of(F, "zero"), 0);
    ck_assert_msg(delete_at(F, "unknown", 0), "delete of an unknown key at 0 returned false");
    ck_assert(!upsert(F, "unknown", 0));
    ck_assert(upsert(F, "big", big));
    ck_assert(!upsert(F, "big", big - 1));
    ck_assert(upsert(F, "big", big + 1));
    ck_assert_int_eq(version_of(F, "big"), big + 1);
}
END_TEST

START_TEST(keys_are_opaque_strings)
{
    begin(_i);
    char long_key[1001];
    memset(long_key, 'k', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    const char *keys[] = {"a:b", "features", "$inited", "with space", "sl/ash", "\xc3\xa9t\xc3\xa9",
                          "*",   "a\"quote", long_key};
    size_t n = sizeof(keys) / sizeof(keys[0]);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(upsert(F, keys[i], (int64_t)i + 1), "upsert of key %zu failed", i);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(version_of(F, keys[i]), (int64_t)i + 1);
        ck_assert_int_eq(all_version(F, keys[i]), (int64_t)i + 1);
    }
    ck_assert_int_eq(all_size(F), n);
    ck_assert_int_eq(version_of(F, "a"), -1);
    ck_assert_int_eq(version_of(SEG, "a:b"), -1);
}
END_TEST

START_TEST(many_items)
{
    begin(_i);
    enum { NF = 500, NS = 100 };
    json_t *features = json_object(), *segments = json_object();
    char key[32];
    for (int i = 0; i < NF; i++) {
        snprintf(key, sizeof(key), "flag-%d", i);
        json_object_set_new(features, key, make_feature(key, i));
    }
    for (int i = 0; i < NS; i++) {
        snprintf(key, sizeof(key), "segment-%d", i);
        json_object_set_new(segments, key, make_segment(key, i));
    }
    init_with(json_pack("{s:o, s:o}", "features", features, "segments", segments));
    ck_assert_int_eq(all_size(F), NF);
    ck_assert_int_eq(all_size(SEG), NS);
    for (int i = 0; i < NF; i += 7) {
        snprintf(key, sizeof(key), "flag-%d", i);
        ck_assert_int_eq(version_of(F, key), i);
    }
    for (int i = 0; i < NF; i += 2) {
        snprintf(key, sizeof(key), "flag-%d", i);
        ck_assert(delete_at(F, key, i + 1));
    }
    ck_assert_int_eq(all_size(F), NF / 2);
}
END_TEST

START_TEST(init_accepts_unknown_namespaces)
{
    begin(_i);
    init_with(json_pack("{s:{s:o}, s:{s:{s:s, s:i}}}", "features", "foo", make_feature("foo", 1),
                        "other", "x", "key", "x", "version", 1));
    ck_assert_int_eq(version_of(F, "foo"), 1);
    ck_assert_int_eq(all_size(F), 1);
    ck_assert_int_eq(all_size(SEG), 0);
}
END_TEST

START_TEST(init_ignores_a_namespace_with_nul_like_unknown_ones)
{
    begin(_i);
    /* "features\0x" (10 bytes) is no kind's namespace, first or after
     * "features" */
    for (int features_first = 0; features_first < 2; features_first++) {
        json_t *data = json_object();
        json_t *foo = json_pack("{s:o}", "foo", make_feature("foo", 1));
        json_t *x = json_pack("{s:o}", "x", make_feature("x", 1));
        ck_assert_ptr_nonnull(data);
        if (features_first)
            json_object_set_new(data, "features", foo);
        ck_assert_int_eq(json_object_setn_new(data, "features\0x", 10, x), 0);
        if (!features_first)
            json_object_set_new(data, "features", foo);
        init_with(data);
        ck_assert_int_eq(version_of(F, "foo"), 1);
        ck_assert_int_eq(version_of(F, "x"), -1);
        ck_assert_int_eq(all_size(F), 1);
        ck_assert_int_eq(all_size(SEG), 0);
    }
    json_t *data = json_object();
    ck_assert_int_eq(
        json_object_setn_new(data, "segments\0", 9, json_pack("{s:o}", "s", make_segment("s", 1))),
        0);
    init_with(data);
    ck_assert_int_eq(version_of(SEG, "s"), -1);
    ck_assert_int_eq(all_size(F), 0);
    ck_assert_int_eq(all_size(SEG), 0);
}
END_TEST

/* ---- bad input ------------------------------------------------------------ */

START_TEST(null_store_gives_null)
{
    begin(_i);
    json_t *item = make_feature("foo", 1);
    json_t *data = json_object();
    ck_assert_ptr_null(ld_store_get(NULL, F, "foo"));
    ck_assert_ptr_null(ld_store_all(NULL, F));
    ck_assert_ptr_null(ld_store_init(NULL, data));
    ck_assert_ptr_null(ld_store_upsert(NULL, F, item));
    ck_assert_ptr_null(ld_store_delete(NULL, F, "foo", 1));
    ck_assert_ptr_null(ld_store_initialized(NULL));
    ck_assert_ptr_null(ld_store_close(NULL));
    ld_store_free(NULL);
    json_decref(item);
    json_decref(data);
}
END_TEST

START_TEST(bad_kind_or_key_is_einval_and_changes_nothing)
{
    begin(_i);
    init_foo_bar();
    EXPECT_ERROR(read_get(NULL, "foo"), LD_EINVAL, "kind");
    EXPECT_ERROR(read_get(F, NULL), LD_EINVAL, "key");
    EXPECT_ERROR(read_get(F, ""), LD_EINVAL, "key");
    EXPECT_ERROR(read_all(NULL), LD_EINVAL, "kind");
    EXPECT_ERROR(ld_store_delete(S, NULL, "foo", 11), LD_EINVAL, "kind");
    EXPECT_ERROR(ld_store_delete(S, F, NULL, 11), LD_EINVAL, "key");
    EXPECT_ERROR(ld_store_delete(S, F, "", 11), LD_EINVAL, "key");
    EXPECT_ERROR(ld_store_delete(S, F, "foo", -1), LD_EINVAL, "version");
    json_t *item = make_feature("foo", 11);
    EXPECT_ERROR(ld_store_upsert(S, NULL, item), LD_EINVAL, "kind");
    json_decref(item);
    expect_foo_bar_unchanged();
}
END_TEST

/* An item of `kind` whose key is `key`, taken as it is (it may be invalid
 * UTF-8, as jansson's *_nocheck functions allow). */
static json_t *make_raw_key_item(const ld_kind *kind, const char *key, int64_t version)
{
    json_t *item = make_item(kind, "placeholder", version);
    ck_assert_int_eq(json_object_set_new(item, "key", json_string_nocheck(key)), 0);
    return item;
}

START_TEST(non_utf8_keys_are_einval_and_change_nothing)
{
    begin(_i);
    init_foo_bar();
    const char *bad[] = {
        "caf\xe9", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "long-ascii-prefix-\xe2\x82",
        "foo\xff"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char what[64];
        snprintf(what, sizeof(what), "get of bad key %zu", i);
        expect_error(ld_store_get(S, F, bad[i]), what, LD_EINVAL, "UTF-8");
        snprintf(what, sizeof(what), "delete of bad key %zu", i);
        expect_error(ld_store_delete(S, F, bad[i], 11), what, LD_EINVAL, "UTF-8");
        json_t *item = make_raw_key_item(F, bad[i], 11);
        snprintf(what, sizeof(what), "upsert of bad key %zu", i);
        expect_error(ld_store_upsert(S, F, item), what, LD_EINVAL, "UTF-8");
        /* init: filed under its own key; a good item filed under a bad key */
        json_t *data =
            json_pack("{s:{}, s:{s:o}}", "features", "segments", "s", make_segment("s", 1));
        json_object_set_new_nocheck(json_object_get(data, "features"), bad[i], item);
        snprintf(what, sizeof(what), "init with bad item key %zu", i);
        expect_error(ld_store_init(S, data), what, LD_EINVAL, "UTF-8");
        json_decref(data);
        data = json_pack("{s:{}}", "features");
        json_object_set_new_nocheck(json_object_get(data, "features"), bad[i],
                                    make_feature("foo", 12));
        snprintf(what, sizeof(what), "init with bad data key %zu", i);
        expect_error(ld_store_init(S, data), what, LD_EINVAL, "UTF-8");
        json_decref(data);
    }
    expect_foo_bar_unchanged();
    /* what is valid UTF-8 is a key like any other */
    const char *good[] = {"\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf\xee\x80\x80"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        ck_assert_msg(upsert(F, good[i], 1), "upsert of good key %zu failed", i);
        ck_assert_int_eq(version_of(F, good[i]), 1);
        ck_assert_msg(delete_at(F, good[i], 2), "delete of good key %zu failed", i);
        ck_assert_int_eq(version_of(F, good[i]), -1);
    }
}
END_TEST

START_TEST(bad_items_are_einval_naming_the_field_and_change_nothing)
{
    begin(_i);
    init_foo_bar();
    struct {
        json_t *item;
        const char *field;
    } bad[] = {
        {NULL, "object"},
        {json_array(), "object"},
        {json_string("foo"), "object"},
        {json_pack("{s:i}", "version", 11), "key"},
        {json_pack("{s:s, s:i}", "key", "", "version", 11), "key"},
        {json_pack("{s:i, s:i}", "key", 3, "version", 11), "key"},
        {json_pack("{s:s#, s:i}", "key", "fo\0o", (int)4, "version", 11), "key"},
        {json_pack("{s:s}", "key", "foo"), "version"},
        {json_pack("{s:s, s:s}", "key", "foo", "version", "11"), "version"},
        {json_pack("{s:s, s:f}", "key", "foo", "version", 11.5), "version"},
        {json_pack("{s:s, s:i}", "key", "foo", "version", -11), "version"},
        {json_pack("{s:s, s:n}", "key", "foo", "version"), "version"},
        {json_pack("{s:s, s:i, s:s}", "key", "foo", "version", 11, "deleted", "yes"), "deleted"},
        {json_pack("{s:s, s:i, s:i}", "key", "foo", "version", 11, "deleted", 1), "deleted"},
        {json_pack("{s:s, s:i, s:n}", "key", "foo", "version", 11, "deleted"), "deleted"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(i == 0 || bad[i].item, "cannot build bad item %zu", i);
        char what[64];
        snprintf(what, sizeof(what), "upsert of bad item %zu", i);
        expect_error(ld_store_upsert(S, F, bad[i].item), what, LD_EINVAL, bad[i].field);
        json_decref(bad[i].item);
    }
    expect_foo_bar_unchanged();
}
END_TEST

START_TEST(bad_init_is_einval_and_all_or_nothing)
{
    begin(_i);
    init_foo_bar();
    struct {
        json_t *data;
        const char *field;
    } bad[] = {
        {NULL, "all_data"},
        {json_array(), "all_data"},
        {json_pack("{s:[]}", "features"), "namespace"},
        {json_pack("{s:{}, s:i}", "features", "segments", 1), "namespace"},
        /* a good item first, then a bad one: nothing is applied */
        {json_pack("{s:{s:o, s:[]}}", "features", "new", make_feature("new", 1), "bad"), "object"},
        {json_pack("{s:{s:o, s:o}}", "features", "new", make_feature("new", 1), "other",
                   make_feature("x", 1)),
         "filed under"},
        {json_pack("{s:{s:o}, s:{s:{s:s, s:s}}}", "features", "new", make_feature("new", 1),
                   "segments", "s", "key", "s", "version", "1"),
         "version"},
        {json_pack("{s:{s:o}, s:{s:{s:s, s:i, s:i}}}", "features", "new", make_feature("new", 1),
                   "segments", "s", "key", "s", "version", 1, "deleted", 0),
         "deleted"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(i == 0 || bad[i].data, "cannot build bad data set %zu", i);
        char what[64];
        snprintf(what, sizeof(what), "init with bad data set %zu", i);
        expect_error(ld_store_init(S, bad[i].data), what, LD_EINVAL, bad[i].field);
        json_decref(bad[i].data);
    }
    ck_assert_int_eq(version_of(F, "new"), -1);
    expect_foo_bar_unchanged();
}
END_TEST

START_TEST(bad_init_leaves_a_new_store_uninitialized)
{
    begin(_i);
    json_t *bad = json_pack("{s:{s:o}}", "features", "other", make_feature("x", 1));
    EXPECT_ERROR(ld_store_init(S, bad), LD_EINVAL, "filed under");
    json_decref(bad);
    ck_assert_msg(!BOOL(ld_store_initialized(S)), "a rejected init initialized the store");
    ck_assert_int_eq(all_size(F), 0);
}
END_TEST

/* ---- ordering and re-entrancy --------------------------------------------- */

START_TEST(results_complete_in_issue_order)
{
    begin(_i);
    json_t *foo11 = make_feature("foo", 11);
    json_t *data = json_pack("{s:{s:o}}", "features", "bar", make_feature("bar", 3));
    ld_future *fs[] = {
        ld_store_initialized(S),          /* 0: false */
        ld_store_init(S, data),           /* 1 */
        ld_store_upsert(S, F, foo11),     /* 2: true */
        read_get(F, "foo"),               /* 3: v11 */
        ld_store_upsert(S, F, foo11),     /* 4: false, equal */
        ld_store_delete(S, F, "foo", 12), /* 5: true */
        read_get(F, "foo"),               /* 6: NULL */
        read_all(F),                      /* 7: {bar} */
        ld_store_initialized(S),          /* 8: true */
    };
    enum { N = sizeof(fs) / sizeof(fs[0]) };
    norder = 0;
    for (intptr_t i = 0; i < N; i++) {
        ck_assert_msg(fs[i] != NULL, "operation %d returned NULL", (int)i);
        ck_assert_int_eq(ld_future_on_complete(ld_future_ref(fs[i]), note_order, (void *)i), 0);
    }
    ck_assert_msg(norder == 0, "a callback ran before the loop did");
    for (int i = 0; i < N; i++)
        fulfilled(fs[i], "an operation of the sequence");
    settle();
    ck_assert_int_eq(norder, N);
    for (int i = 0; i < N; i++)
        ck_assert_msg(order[i] == i, "completion %d was operation %d", i, order[i]);
    ck_assert(!ld_future_bool(fs[0]));
    ck_assert(ld_future_bool(fs[2]));
    ck_assert_int_eq(ld_item_version(ld_future_json(fs[3])), 11);
    ck_assert(!ld_future_bool(fs[4]));
    ck_assert(ld_future_bool(fs[5]));
    ck_assert_ptr_null(ld_future_json(fs[6]));
    ck_assert_int_eq(json_object_size(ld_future_json(fs[7])), 1);
    ck_assert(ld_future_bool(fs[8]));
    for (int i = 0; i < N; i++)
        ld_future_unref(fs[i]);
    json_decref(foo11);
    json_decref(data);
}
END_TEST

/* Issued from inside a callback: the next operation's result. */
static struct nested {
    ld_future *inner;
    int inner_calls;
    int inner_calls_at_return; /* inner_calls when the outer callback returned */
} nested;

static void count_inner(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    nested.inner_calls++;
}

static void issue_from_callback(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    nested.inner = read_get(F, "foo");
    if (nested.inner)
        ld_future_on_complete(ld_future_ref(nested.inner), count_inner, NULL);
    nested.inner_calls_at_return = nested.inner_calls;
}

START_TEST(callbacks_never_run_inside_the_call)
{
    begin(_i);
    init_foo_bar();
    json_t *item = make_feature("foo", 11);
    json_t *data = json_pack("{s:{s:o}}", "features", "foo", make_feature("foo", 10));
    int calls = 0;
    ld_future *fs[] = {
        read_get(F, "foo"),          read_all(F),
        ld_store_upsert(S, F, item), ld_store_delete(S, F, "foo", 12),
        ld_store_initialized(S),     ld_store_init(S, data),
        read_get(NULL, "foo"), /* rejected by the front */
    };
    enum { N = sizeof(fs) / sizeof(fs[0]) };
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(ld_future_on_complete(ld_future_ref(fs[i]), count_cb, &calls), 0);
        ck_assert_msg(calls == 0, "callback %d ran inside on_complete", i);
    }
    for (int i = 0; i < N; i++)
        await(fs[i], "an operation");
    settle();
    ck_assert_int_eq(calls, N);

    memset(&nested, 0, sizeof(nested));
    ld_future *outer = ld_store_initialized(S);
    ld_future_on_complete(ld_future_ref(outer), issue_from_callback, NULL);
    await(outer, "initialized");
    settle();
    ck_assert_msg(nested.inner != NULL, "get issued from a callback returned NULL");
    ck_assert_msg(nested.inner_calls_at_return == 0,
                  "a callback ran inside the call that issued its operation");
    await(nested.inner, "get issued from a callback");
    settle();
    ck_assert_int_eq(nested.inner_calls, 1);
    ck_assert_int_eq(ld_item_version(ld_future_json(nested.inner)), 10);
    ld_future_unref(nested.inner);
    ld_future_unref(outer);
    for (int i = 0; i < N; i++)
        ld_future_unref(fs[i]);
    json_decref(item);
    json_decref(data);
}
END_TEST

/* ---- close and free ----------------------------------------------------- */

START_TEST(operations_after_close_are_eclosed)
{
    begin(_i);
    init_foo_bar();
    ld_future *before = read_get(F, "foo");
    OK(ld_store_close(S));
    ld_future_unref(fulfilled(before, "get issued before close"));
    json_t *item = make_feature("foo", 11);
    json_t *data = json_object();
    EXPECT_ERROR(read_get(F, "foo"), LD_ECLOSED, NULL);
    EXPECT_ERROR(read_all(F), LD_ECLOSED, NULL);
    EXPECT_ERROR(ld_store_init(S, data), LD_ECLOSED, NULL);
    EXPECT_ERROR(ld_store_upsert(S, F, item), LD_ECLOSED, NULL);
    EXPECT_ERROR(ld_store_delete(S, F, "foo", 12), LD_ECLOSED, NULL);
    EXPECT_ERROR(ld_store_initialized(S), LD_ECLOSED, NULL);
    OK(ld_store_close(S)); /* closing again fulfils */
    json_decref(item);
    json_decref(data);
}
END_TEST

START_TEST(operations_issued_before_close_complete)
{
    begin(_i);
    init_foo_bar();
    json_t *item = make_feature("foo", 11);
    ld_future *up = ld_store_upsert(S, F, item);
    ld_future *get = read_get(F, "foo");
    ld_future *closed = ld_store_close(S);
    ck_assert_msg(BOOL(up), "upsert issued before close was not applied");
    ld_future_unref(fulfilled(closed, "close"));
    ck_assert_int_eq(ld_item_version(ld_future_json(fulfilled(get, "get before close"))), 11);
    ld_future_unref(get);
    json_decref(item);
}
END_TEST

/* Each future of the store completes exactly once: fulfilled, or rejected
 * with LD_ECANCELED if the store had not answered when it was freed. */
static void expect_done_or_canceled(ld_future **fs, int n, const int *calls)
{
    for (int i = 0; i < n; i++) {
        await(fs[i], "an operation in flight at free");
        ck_assert_msg(ld_future_is_fulfilled(fs[i]) || ld_future_error(fs[i]) == LD_ECANCELED,
                      "operation %d in flight at free: %s", i, ld_err_name(ld_future_error(fs[i])));
        ck_assert_msg(calls[i] == 1, "the callback of operation %d ran %d times", i, calls[i]);
        ld_future_unref(fs[i]);
    }
}

START_TEST(free_completes_operations_in_flight)
{
    begin(_i);
    json_t *item = make_feature("foo", 1);
    json_t *data = json_object();
    ld_future *fs[] = {ld_store_init(S, data),
                       ld_store_upsert(S, F, item),
                       read_get(F, "foo"),
                       read_all(F),
                       ld_store_delete(S, F, "foo", 2),
                       ld_store_initialized(S)};
    enum { N = sizeof(fs) / sizeof(fs[0]) };
    int calls[N] = {0};
    for (int i = 0; i < N; i++)
        ld_future_on_complete(ld_future_ref(fs[i]), count_cb, &calls[i]);
    ld_store_free(S);
    S = NULL;
    settle();
    expect_done_or_canceled(fs, N, calls);
    json_decref(item);
    json_decref(data);
}
END_TEST

static void free_store_inside(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    ld_store_free(S);
    S = NULL;
}

START_TEST(free_from_inside_a_callback_of_the_store)
{
    begin(_i);
    ld_future *fs[] = {ld_store_initialized(S), read_get(F, "foo"), ld_store_initialized(S)};
    int calls[3] = {0};
    ck_assert_ptr_nonnull(fs[0]);
    ld_future_on_complete(ld_future_ref(fs[0]), free_store_inside, NULL);
    for (int i = 0; i < 3; i++)
        ld_future_on_complete(ld_future_ref(fs[i]), count_cb, &calls[i]);
    await(fs[0], "initialized");
    settle();
    ck_assert_msg(S == NULL, "the callback that frees the store did not run");
    expect_done_or_canceled(fs, 3, calls);
}
END_TEST

/* ---- registration ---------------------------------------------------------- */

/* Every result is pending when the call returns and completes from the
 * loop (its state, not only its callbacks), each operation with a future of
 * its own. */
START_TEST(results_are_pending_when_returned)
{
    begin(_i);
    init_foo_bar();
    json_t *item = make_feature("foo", 11);
    json_t *data = json_pack("{s:{s:o}}", "features", "foo", make_feature("foo", 12));
    ld_future *fs[] = {
        read_get(F, "foo"),
        read_all(F),
        ld_store_upsert(S, F, item),
        ld_store_upsert(S, F, item),
        ld_store_delete(S, F, "bar", 11),
        ld_store_delete(S, F, "x", 1),
        ld_store_initialized(S),
        ld_store_init(S, data),
        read_get(F, ""), /* bad input */
        ld_store_close(S),
        read_get(F, "foo"), /* closed */
    };
    enum { N = sizeof(fs) / sizeof(fs[0]) };
    json_decref(item);
    json_decref(data);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(fs[i] != NULL, "operation %d returned NULL", i);
        ck_assert_msg(ld_future_is_pending(fs[i]), "operation %d was complete when returned", i);
        for (int j = 0; j < i; j++)
            ck_assert_msg(fs[i] != fs[j], "operations %d and %d share a future", j, i);
    }
    for (int i = 0; i < N; i++)
        ld_future_unref(await(fs[i], "an operation"));
}
END_TEST

static int waited_seen;

static void note_seen(ld_future *f, void *arg)
{
    (void)f;
    waited_seen |= (int)(intptr_t)arg;
}

/* Waiting for the third of three operations returns after the callbacks of
 * the first two have run: they completed first. */
START_TEST(waiting_for_the_third_runs_the_first_two_first)
{
    begin(_i);
    init_foo_bar();
    waited_seen = 0;
    json_t *item = make_feature("bar", 11);
    ck_assert_int_eq(ld_future_on_complete(read_get(F, "foo"), note_seen, (void *)1), 0);
    ck_assert_int_eq(ld_future_on_complete(ld_store_upsert(S, F, item), note_seen, (void *)2), 0);
    json_decref(item);
    ld_future *third = read_all(F);
    ck_assert_msg(ld_future_is_pending(third), "the third operation was complete when returned");
    ld_future_unref(await(third, "the third operation"));
    ck_assert_msg(waited_seen == 3, "the callbacks of the first two had not all run (%d)",
                  waited_seen);
}
END_TEST

START_TEST(read_only_view_is_the_store_s)
{
    begin(_i);
    ld_read_only_store *view = ld_store_read_only(S);
    ck_assert_msg(view != NULL, "ld_store_read_only returned NULL");
    ck_assert_msg(ld_store_read_only(S) == view, "a second view differs from the first");
    ck_assert_msg(ld_read_only_store_base(view) == B, "the view's base is not the store's");
    ck_assert_str_eq(ld_read_only_store_describe(view), ld_store_describe(S));
    ck_assert_ptr_null(ld_store_read_only(NULL));
    ck_assert_ptr_null(ld_read_only_store_get(NULL, F, "foo"));
    ck_assert_ptr_null(ld_read_only_store_all(NULL, F));
    ck_assert_ptr_null(ld_read_only_store_base(NULL));
    ck_assert_str_eq(ld_read_only_store_describe(NULL), "(null)");
    EXPECT_ERROR(ld_read_only_store_get(view, F, ""), LD_EINVAL, "key");
    EXPECT_ERROR(ld_read_only_store_all(view, NULL), LD_EINVAL, "kind");
    /* a write issued before a read through the view is seen by it */
    init_foo_bar();
    ld_future *w = ld_store_upsert(S, F, NULL); /* bad: answered by the front */
    json_t *item = make_feature("foo", 11);
    ld_future *u = ld_store_upsert(S, F, item);
    ld_future *g = ld_read_only_store_get(view, F, "foo");
    json_decref(item);
    ld_future_unref(await(w, "upsert of NULL"));
    ck_assert_msg(BOOL(u), "upsert foo v11 not applied");
    ld_future *got = fulfilled(g, "get through the view");
    ck_assert_int_eq(ld_item_version(ld_future_json(got)), 11);
    ld_future_unref(got);
}
END_TEST

static void add_all(TCase *tc, int index)
{
    const TTest *tests[] = {
        /* the Python SDK's 17 */
        not_initialized_before_init,
        initialized,
        get_existing_feature,
        get_nonexisting_feature,
        get_all_versions,
        upsert_with_newer_version,
        upsert_with_older_version,
        upsert_with_new_feature,
        delete_with_newer_version,
        delete_unknown_feature,
        delete_with_older_version,
        upsert_older_version_after_delete,
        deleted_item_not_in_all,
        upsert_equal_version_not_applied,
        delete_equal_version_not_applied,
        init_replaces_existing_data,
        describe_names_the_implementation,
        /* more of the semantics */
        writes_do_not_initialize,
        init_with_empty_data_initializes,
        kinds_are_kept_apart,
        items_come_back_equal,
        upsert_of_a_tombstone_deletes,
        tombstones_in_init_data_block_older_upserts,
        delete_then_newer_upsert_restores,
        version_zero_and_large_versions,
        keys_are_opaque_strings,
        many_items,
        init_accepts_unknown_namespaces,
        init_ignores_a_namespace_with_nul_like_unknown_ones,
        /* bad input */
        null_store_gives_null,
        bad_kind_or_key_is_einval_and_changes_nothing,
        non_utf8_keys_are_einval_and_change_nothing,
        bad_items_are_einval_naming_the_field_and_change_nothing,
        bad_init_is_einval_and_all_or_nothing,
        bad_init_leaves_a_new_store_uninitialized,
        /* order, re-entrancy, close, free */
        results_complete_in_issue_order,
        callbacks_never_run_inside_the_call,
        operations_after_close_are_eclosed,
        operations_issued_before_close_complete,
        free_completes_operations_in_flight,
        free_from_inside_a_callback_of_the_store,
    };
    for (int view = 0; view < 2; view++) {
        int loop = view ? VIEW_LOOP + index : index;
        for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
            tcase_add_loop_test(tc, tests[i], loop, loop + 1);
        tcase_add_loop_test(tc, read_only_view_is_the_store_s, loop, loop + 1);
        tcase_add_loop_test(tc, results_are_pending_when_returned, loop, loop + 1);
        tcase_add_loop_test(tc, waiting_for_the_third_runs_the_first_two_first, loop, loop + 1);
    }
}

int ld_store_contract_add_tests(Suite *suite, const char *name,
                                const struct ld_store_contract_factory *factory, void *arg)
{
    if (!suite || !name || !*name || !factory ||
        factory->version != LD_STORE_CONTRACT_FACTORY_VERSION || !factory->new_store)
        return LD_EINVAL;
    if (nregs == capregs) {
        int cap = capregs ? capregs * 2 : 4;
        struct registration *bigger = ld__realloc(regs, (size_t)cap * sizeof(*regs));
        if (!bigger)
            return LD_ENOMEM;
        regs = bigger;
        capregs = cap;
    }
    char *copy = ld__strdup(name);
    if (!copy)
        return LD_ENOMEM;
    int index = nregs++;
    regs[index] = (struct registration){copy, *factory, arg};
    TCase *tc = tcase_create(name); /* Check aborts if memory runs out */
    tcase_add_checked_fixture(tc, NULL, end);
    add_all(tc, index);
    suite_add_tcase(suite, tc);
    return 0;
}
