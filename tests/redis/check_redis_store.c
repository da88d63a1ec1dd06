/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The Redis store against a real redis-server: the store contract, the
 * layout as other SDKs write and read it (raw commands), and what goes
 * wrong: races, a server stopped, killed, restarted, a wrong password.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <ldasync/testing.h>

#include "check_redis.h"

static const ld_kind *F(void)
{
    return ld_kind_features();
}

/* ---- the contract ------------------------------------------------------- */

static int contract_setup(struct event_base *base, void *arg)
{
    (void)base;
    (void)arg;
    redisReply *r = redisd_cmd(&rt_server, "FLUSHALL");
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

static ld_store *contract_new(struct event_base *base, void *arg)
{
    (void)arg;
    ld_redis_options *o = ld_redis_options_new();
    ld_redis_options_set_url(o, rt_server.url);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    return s;
}

static const struct ld_store_contract_factory factory = {
    .version = LD_STORE_CONTRACT_FACTORY_VERSION,
    .setup = contract_setup,
    .new_store = contract_new,
};

/* ---- the layout --------------------------------------------------------- */

static struct event_base *base;

static void setup(void)
{
    rt_flushall();
    base = event_base_new();
}

static void teardown(void)
{
    event_base_free(base);
}

START_TEST(test_layout_written)
{
    ld_store *s = rt_store(base, "pfx");
    json_t *data = rt_j("{\"features\":{\"f1\":{\"key\":\"f1\",\"version\":3,\"on\":true}},"
                        "\"segments\":{\"s1\":{\"key\":\"s1\",\"version\":2}}}");
    rt_ok(ld_store_init(s, data));
    json_decref(data);
    redisReply *r = redisd_cmd(&rt_server, "HGET pfx:features f1");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    json_t *f = rt_j(r->str);
    ck_assert_int_eq(json_integer_value(json_object_get(f, "version")), 3);
    ck_assert(json_is_true(json_object_get(f, "on")));
    json_decref(f);
    freeReplyObject(r);
    r = redisd_cmd(&rt_server, "HGET pfx:segments s1");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    r = redisd_cmd(&rt_server, "EXISTS pfx:$inited");
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    /* a delete writes a tombstone with its key, as the Python SDK does */
    ck_assert(rt_bool(ld_store_delete(s, F(), "f1", 4)));
    r = redisd_cmd(&rt_server, "HGET pfx:features f1");
    json_t *t = rt_j(r->str);
    ck_assert_str_eq(json_string_value(json_object_get(t, "key")), "f1");
    ck_assert_int_eq(json_integer_value(json_object_get(t, "version")), 4);
    ck_assert(json_is_true(json_object_get(t, "deleted")));
    json_decref(t);
    freeReplyObject(r);
    /* nothing under the default prefix */
    r = redisd_cmd(&rt_server, "EXISTS launchdarkly:features");
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    ld_store_free(s);
}
END_TEST

START_TEST(test_layout_read)
{
    /* what another SDK wrote: Go's and Node's tombstones too */
    redisReply *r =
        redisd_cmd(&rt_server, "HSET launchdarkly:features a {\"key\":\"a\",\"version\":1} "
                               "b {\"version\":4,\"deleted\":true} "
                               "c {\"key\":\"$deleted\",\"version\":2,\"deleted\":true}");
    freeReplyObject(r);
    freeReplyObject(redisd_cmd(&rt_server, "SET launchdarkly:$inited \"\""));
    ld_store *s = rt_store(base, NULL);
    ck_assert(rt_bool(ld_store_initialized(s)));
    json_t *a = rt_json(ld_store_get(s, F(), "a"));
    ck_assert_int_eq(json_integer_value(json_object_get(a, "version")), 1);
    json_decref(a);
    ck_assert_ptr_null(rt_json(ld_store_get(s, F(), "b")));
    ck_assert_ptr_null(rt_json(ld_store_get(s, F(), "c")));
    json_t *all = rt_json(ld_store_all(s, F()));
    ck_assert_int_eq(json_object_size(all), 1);
    ck_assert_ptr_nonnull(json_object_get(all, "a"));
    json_decref(all);
    /* Node's keyless tombstone still blocks an older upsert */
    json_t *b3 = rt_j("{\"key\":\"b\",\"version\":3}");
    ck_assert(!rt_bool(ld_store_upsert(s, F(), b3)));
    json_decref(b3);
    ld_store_free(s);
}
END_TEST

START_TEST(test_bad_json_in_redis)
{
    freeReplyObject(redisd_cmd(&rt_server, "HSET launchdarkly:features bad {nope"));
    freeReplyObject(redisd_cmd(&rt_server, "HSET launchdarkly:features arr [1,2]"));
    ld_store *s = rt_store(base, NULL);
    rt_error(ld_store_get(s, F(), "bad"), LD_EPARSE, "bad");
    rt_error(ld_store_get(s, F(), "arr"), LD_EPARSE, "arr");
    rt_error(ld_store_all(s, F()), LD_EPARSE, NULL);
    /* an upsert replaces what is not an item */
    json_t *item = rt_j("{\"key\":\"bad\",\"version\":1}");
    ck_assert(rt_bool(ld_store_upsert(s, F(), item)));
    json_decref(item);
    json_t *got = rt_json(ld_store_get(s, F(), "bad"));
    ck_assert_int_eq(json_integer_value(json_object_get(got, "version")), 1);
    json_decref(got);
    ld_store_free(s);
}
END_TEST

START_TEST(test_wrong_type_in_redis)
{
    freeReplyObject(redisd_cmd(&rt_server, "SET launchdarkly:features notahash"));
    ld_store *s = rt_store(base, NULL);
    rt_error(ld_store_get(s, F(), "x"), LD_ESTORE, "WRONGTYPE");
    rt_error(ld_store_all(s, F()), LD_ESTORE, "WRONGTYPE");
    json_t *item = rt_j("{\"key\":\"x\",\"version\":1}");
    rt_error(ld_store_upsert(s, F(), item), LD_ESTORE, "WRONGTYPE");
    json_decref(item);
    /* init replaces it (DEL first) */
    json_t *data = rt_j("{\"features\":{\"x\":{\"key\":\"x\",\"version\":1}}}");
    rt_ok(ld_store_init(s, data));
    json_decref(data);
    json_t *got = rt_json(ld_store_get(s, F(), "x"));
    ck_assert_ptr_nonnull(got);
    json_decref(got);
    ld_store_free(s);
}
END_TEST

static long long exec_calls(void)
{
    redisReply *r = redisd_cmd(&rt_server, "INFO commandstats");
    const char *p = r ? strstr(r->str, "cmdstat_exec:calls=") : NULL;
    long long n = p ? atoll(p + strlen("cmdstat_exec:calls=")) : 0;
    if (r)
        freeReplyObject(r);
    return n;
}

/* Another process writes the hash between our read and our write: WATCH
 * makes the upsert read again (EXEC is called more often than there are
 * upserts), and versions still decide. */
START_TEST(test_upsert_race_retries)
{
    ld_store *s = rt_store(base, NULL);
    freeReplyObject(redisd_cmd(&rt_server, "CONFIG RESETSTAT"));
    redisContext *raw = redisd_connect(&rt_server);
    ld_future *fs[10];
    for (int i = 0; i < 10; i++) {
        char text[64];
        snprintf(text, sizeof(text), "{\"key\":\"k\",\"version\":%d}", 10 + i);
        json_t *item = rt_j(text);
        fs[i] = ld_store_upsert(s, F(), item);
        json_decref(item);
    }
    /* five writes of another field of the hash, each between two passes
     * of the loop: at most five conflicts for any upsert (it tries ten
     * times) */
    for (int i = 0; i < 5; i++) {
        event_base_loop(base, EVLOOP_ONCE);
        redisReply *r = redisCommand(
            raw, "HSET launchdarkly:features other {\"key\":\"other\",\"version\":%d}", i);
        freeReplyObject(r);
    }
    for (int i = 0; i < 10; i++)
        ck_assert(rt_bool(fs[i]));
    redisFree(raw);
    json_t *got = rt_json(ld_store_get(s, F(), "k"));
    ck_assert_int_eq(json_integer_value(json_object_get(got, "version")), 19);
    json_decref(got);
    ck_assert_msg(exec_calls() > 10, "no upsert was retried (%lld EXEC)", exec_calls());
    ld_store_free(s);
}
END_TEST

START_TEST(test_read_your_writes_pipelined)
{
    /* issued together, nothing awaited in between: each read sees the
     * writes issued before it */
    ld_store *s = rt_store(base, NULL);
    ld_future *g[20];
    for (int i = 0; i < 20; i++) {
        char text[64];
        snprintf(text, sizeof(text), "{\"key\":\"k\",\"version\":%d}", i + 1);
        json_t *item = rt_j(text);
        ld_future_unref(ld_store_upsert(s, F(), item));
        json_decref(item);
        g[i] = ld_store_get(s, F(), "k");
    }
    for (int i = 0; i < 20; i++) {
        json_t *got = rt_json(g[i]);
        ck_assert_int_eq(json_integer_value(json_object_get(got, "version")), i + 1);
        json_decref(got);
    }
    ld_store_free(s);
}
END_TEST

/* The store checks an init's items itself, a slice per loop pass, before
 * it writes (ld_store_set_init_validates()): invalid data, however deep
 * (the 9,000th item of 10,000), is rejected with ld_data_validate()'s
 * reason and writes nothing (the data set before stays, $inited too); a
 * get issued after it waits for it and reads the data before; each rule
 * ld_data_validate() has is kept. */
START_TEST(test_an_invalid_init_writes_nothing)
{
    ld_store *s = rt_store(base, NULL);
    json_t *old = rt_j("{\"features\":{\"kept\":{\"key\":\"kept\",\"version\":7}}}");
    rt_ok(ld_store_init(s, old));
    json_decref(old);
    json_t *flags = json_object();
    for (int i = 0; i < 10000; i++) {
        char key[32];
        snprintf(key, sizeof(key), "flag-%05d", i);
        json_object_set_new(flags, key, json_pack("{s:s,s:i}", "key", key, "version", i + 1));
    }
    /* the 9,000th: a version that is not an integer >= 0 */
    json_object_set_new(json_object_get(flags, "flag-08999"), "version", json_integer(-1));
    json_t *data = json_pack("{s:o,s:{}}", "features", flags, "segments");
    const char *want = NULL;
    ck_assert_int_eq(ld_data_validate(data, &want), LD_EINVAL);
    ld_future *init = ld_store_init(s, data);
    ld_future *get = ld_store_get(s, F(), "kept");
    ck_assert(ld_future_is_pending(init)); /* checked over the next passes */
    rt_error(init, LD_EINVAL, want);
    json_t *kept = rt_json(get);
    ck_assert_int_eq(ld_item_version(kept), 7);
    json_decref(kept);
    redisReply *r = redisd_cmd(&rt_server, "HLEN launchdarkly:features");
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    ck_assert(rt_bool(ld_store_initialized(s)));
    /* the same data made valid: written */
    json_object_set_new(json_object_get(json_object_get(data, "features"), "flag-08999"), "version",
                        json_integer(9000));
    rt_ok(ld_store_init(s, data));
    json_decref(data);
    r = redisd_cmd(&rt_server, "HLEN launchdarkly:features");
    ck_assert_int_eq(r->integer, 10000);
    freeReplyObject(r);
    /* every rule of ld_data_validate(), each with its reason */
    static const char *const bad[] = {
        "[]",
        "{\"features\":[]}",
        "{\"features\":{\"a\":{\"key\":\"a\",\"version\":1}},\"segments\":7}",
        "{\"features\":{\"a\":{\"key\":\"b\",\"version\":1}}}",
        "{\"features\":{\"a\":{\"version\":1}}}",
        "{\"features\":{\"a\":{\"key\":\"a\",\"version\":1,\"deleted\":1}}}",
        "{\"features\":{\"$valid\":{\"key\":\"$valid\",\"version\":1}}}",
        "{\"other\":{\"x\":5}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *d = json_loads(bad[i], JSON_ALLOW_NUL, NULL);
        ck_assert_msg(d != NULL, "%s", bad[i]);
        const char *why = NULL;
        ck_assert_int_eq(ld_data_validate(d, &why), LD_EINVAL);
        rt_error(ld_store_init(s, d), LD_EINVAL, why);
        json_decref(d);
    }
    /* filed under "a\0b" (jansson's text reader takes no NUL in a key) */
    json_t *nul = json_pack("{s:{}}", "features");
    json_object_setn_new(json_object_get(nul, "features"), "a\0b", 3,
                         json_pack("{s:s,s:i}", "key", "a", "version", 1));
    const char *why = NULL;
    ck_assert_int_eq(ld_data_validate(nul, &why), LD_EINVAL);
    rt_error(ld_store_init(s, nul), LD_EINVAL, why);
    json_decref(nul);
    r = redisd_cmd(&rt_server, "HLEN launchdarkly:features");
    ck_assert_int_eq(r->integer, 10000);
    freeReplyObject(r);
    ld_store_free(s);
    /* with no Redis to reach: invalid data is still LD_EINVAL, valid data
     * LD_ESTORE */
    ld_redis_options *o = ld_redis_options_new();
    ck_assert_int_eq(ld_redis_options_set_url(o, "unix:/nonexistent/redis.sock"), 0);
    ld_store *gone = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    json_t *wrong = rt_j("{\"features\":{\"a\":{\"key\":\"b\",\"version\":1}}}");
    rt_error(ld_store_init(gone, wrong), LD_EINVAL, "differs from the key");
    json_decref(wrong);
    json_t *right = rt_j("{\"features\":{\"a\":{\"key\":\"a\",\"version\":1}}}");
    rt_error(ld_store_init(gone, right), LD_ESTORE, NULL);
    json_decref(right);
    ld_store_free(gone);
}
END_TEST

START_TEST(test_many_items_sliced)
{
    /* 10,000 flags: the init writes, and all() parses, over many passes */
    json_t *flags = json_object();
    for (int i = 0; i < 10000; i++) {
        char key[32];
        snprintf(key, sizeof(key), "flag-%05d", i);
        json_object_set_new(flags, key,
                            json_pack("{s:s,s:i,s:b,s:[b,b],s:s}", "key", key, "version", i + 1,
                                      "on", 1, "variations", 1, 0, "salt",
                                      "a-salt-long-enough-to-make-items-realistic"));
    }
    json_t *data = json_pack("{s:o,s:{}}", "features", flags, "segments");
    ld_store *s = rt_store(base, NULL);
    rt_ok(ld_store_init(s, data));
    json_decref(data);
    redisReply *r = redisd_cmd(&rt_server, "HLEN launchdarkly:features");
    ck_assert_int_eq(r->integer, 10000);
    freeReplyObject(r);
    json_t *all = rt_json(ld_store_all(s, F()));
    ck_assert_int_eq(json_object_size(all), 10000);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(all, "flag-09999"), "version")), 10000);
    json_decref(all);
    ld_store_free(s);
}
END_TEST

/* Redis answers an all with the same bytes as the last time: the store
 * hands out the same (immutable) result again, parsed once; other bytes
 * (another process wrote) are parsed again. */
START_TEST(test_all_of_the_same_bytes_is_parsed_once)
{
    freeReplyObject(
        redisd_cmd(&rt_server, "HSET launchdarkly:features a {\"key\":\"a\",\"version\":1}"));
    ld_store *s = rt_store(base, NULL);
    ld_future *f1 = rt_wait(ld_store_all(s, F()));
    ld_future *f2 = rt_wait(ld_store_all(s, F()));
    ck_assert(ld_future_is_fulfilled(f1) && ld_future_is_fulfilled(f2));
    ck_assert_ptr_eq(ld_future_json(f1), ld_future_json(f2));
    freeReplyObject(
        redisd_cmd(&rt_server, "HSET launchdarkly:features a {\"key\":\"a\",\"version\":2}"));
    ld_future *f3 = rt_wait(ld_store_all(s, F()));
    ck_assert(ld_future_json(f3) != ld_future_json(f1));
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(ld_future_json(f3), "a"), "version")),
        2);
    /* the first result is unchanged */
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(ld_future_json(f1), "a"), "version")),
        1);
    ld_future_unref(f1);
    ld_future_unref(f2);
    ld_future_unref(f3);
    ld_store_free(s);
}
END_TEST

/* Many gets in flight, answered together (Redis answers what it read at
 * once; the store parses part of a read's items from later passes): each
 * completes with its item (missing, deleted and unparsable ones too), in
 * the order of their answers, and before a write issued after them. */
#define N_TOGETHER 300

struct done_order {
    int order[N_TOGETHER + 1];
    int n;
};

struct done_slot {
    struct done_order *o;
    int i;
    int code;   /* the future's error, 0 when fulfilled */
    bool right; /* fulfilled with what get i should have */
};

/* Get i's item: absent (i % 7 == 3), deleted (i % 11 == 5), not JSON
 * (i == 150), else {"key": "k-i", ...}. */
static int together_kind(int i)
{
    return i % 7 == 3 ? 1 : i % 11 == 5 ? 2 : i == 150 ? 3 : 0;
}

static void note_done(ld_future *f, void *arg)
{
    struct done_slot *d = arg;
    d->o->order[d->o->n++] = d->i;
    d->code = ld_future_error(f);
    if (d->i == N_TOGETHER) { /* the upsert */
        d->right = ld_future_is_fulfilled(f) && ld_future_bool(f);
        return;
    }
    char key[32];
    snprintf(key, sizeof(key), "k-%d", d->i);
    json_t *v = ld_future_json(f);
    int kind = together_kind(d->i);
    d->right = kind == 3   ? ld_future_error(f) == LD_EPARSE
               : kind != 0 ? ld_future_is_fulfilled(f) && !v
                           : ld_future_is_fulfilled(f) &&
                                 strcmp(json_string_value(json_object_get(v, "key")), key) == 0;
}

static void fill_together(void)
{
    for (int i = 0; i < N_TOGETHER; i++) {
        char key[32], text[160];
        snprintf(key, sizeof(key), "k-%d", i);
        int kind = together_kind(i);
        if (kind == 1)
            continue;
        if (kind == 3)
            snprintf(text, sizeof(text), "{not json");
        else
            snprintf(text, sizeof(text),
                     "{\"key\":\"%s\",\"version\":%d,\"deleted\":%s,\"on\":true,"
                     "\"variations\":[true,false],\"salt\":\"abc\"}",
                     key, i + 1, kind == 2 ? "true" : "false");
        freeReplyObject(redisd_cmd(&rt_server, "HSET launchdarkly:features %s %s", key, text));
    }
}

START_TEST(test_gets_answered_together_complete_in_order)
{
    fill_together();
    ld_store *s = rt_store(base, NULL);
    struct done_order o = {{0}, 0};
    struct done_slot d[N_TOGETHER + 1];
    for (int i = 0; i < N_TOGETHER; i++) {
        char key[32];
        snprintf(key, sizeof(key), "k-%d", i);
        d[i] = (struct done_slot){&o, i, -1, false};
        ck_assert_int_eq(ld_future_on_complete(ld_store_get(s, F(), key), note_done, &d[i]), 0);
    }
    json_t *item = rt_j("{\"key\":\"k-0\",\"version\":1000}");
    d[N_TOGETHER] = (struct done_slot){&o, N_TOGETHER, -1, false};
    ck_assert_int_eq(
        ld_future_on_complete(ld_store_upsert(s, F(), item), note_done, &d[N_TOGETHER]), 0);
    json_decref(item);
    for (int t = 0; t < 10000 && o.n < N_TOGETHER + 1; t++)
        event_base_loop(base, EVLOOP_ONCE);
    ck_assert_int_eq(o.n, N_TOGETHER + 1);
    for (int i = 0; i <= N_TOGETHER; i++) {
        ck_assert_int_eq(o.order[i], i);
        ck_assert_msg(d[i].right, "get %d: error %d", i, d[i].code);
    }
    ld_store_free(s);
}
END_TEST

/* The store freed while gets answered together wait for their items'
 * parse: each completes (with its item, or canceled), and nothing leaks
 * (the sanitizers' and valgrind's runs). */
START_TEST(test_free_with_answers_unparsed)
{
    fill_together();
    ld_store *s = rt_store(base, NULL);
    struct done_order o = {{0}, 0};
    struct done_slot d[N_TOGETHER];
    for (int i = 0; i < N_TOGETHER; i++) {
        char key[32];
        snprintf(key, sizeof(key), "k-%d", i);
        d[i] = (struct done_slot){&o, i, -1, false};
        ck_assert_int_eq(ld_future_on_complete(ld_store_get(s, F(), key), note_done, &d[i]), 0);
    }
    for (int t = 0; t < 10000 && o.n == 0; t++)
        event_base_loop(base, EVLOOP_ONCE);
    ck_assert_int_gt(o.n, 0);
    ld_store_free(s);
    rt_run_for(base, 20);
    ck_assert_int_eq(o.n, N_TOGETHER);
    for (int i = 0; i < N_TOGETHER; i++)
        ck_assert_msg(d[i].right || d[i].code == LD_ECANCELED, "get %d: error %d", i, d[i].code);
}
END_TEST

START_TEST(test_free_with_operations_in_flight)
{
    ld_store *s = rt_store(base, NULL);
    ld_future *fs[100];
    for (int i = 0; i < 100; i++)
        fs[i] = i % 2 ? ld_store_get(s, F(), "x") : ld_store_initialized(s);
    ld_store_free(s);
    for (int i = 0; i < 100; i++) {
        rt_wait(fs[i]);
        ck_assert_int_eq(ld_future_error(fs[i]), LD_ECANCELED);
        ld_future_unref(fs[i]);
    }
    rt_run_for(base, 20);
}
END_TEST

START_TEST(test_close_waits_for_operations)
{
    ld_store *s = rt_store(base, NULL);
    ld_future *g = ld_store_initialized(s);
    ld_future *c = ld_store_close(s);
    ck_assert(!rt_bool(g));
    rt_ok(c);
    rt_error(ld_store_get(s, F(), "x"), LD_ECLOSED, NULL);
    ld_store_free(s);
}
END_TEST

/* ---- when Redis goes away ---------------------------------------------- */

START_TEST(test_wrong_password)
{
    /* this server has no password: AUTH fails, and so does every operation */
    ld_redis_options *o = rt_options(NULL);
    ld_redis_options_set_password(o, "nope");
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ld_future *f = ld_store_initialized(s);
    rt_wait(f);
    ck_assert(ld_future_is_rejected(f));
    ck_assert_int_eq(ld_future_error(f), LD_ESTORE);
    ck_assert_msg(strstr(ld_future_error_message(f), "AUTH") ||
                      strstr(ld_future_error_message(f), "password"),
                  "%s", ld_future_error_message(f));
    ld_future_unref(f);
    ld_store_free(s);
}
END_TEST

START_TEST(test_no_server_then_server)
{
    /* a socket nobody listens on: operations fail at once with LD_ESTORE,
     * then a server appears and the store connects by itself */
    struct redisd d;
    ck_assert_int_eq(redisd_start(&d, NULL), 0);
    redisd_stop(&d);
    ld_store *s = rt_store_on(base, &d, 0, 0);
    rt_error(ld_store_initialized(s), LD_ESTORE, "Redis");
    ck_assert_int_eq(redisd_restart(&d), 0);
    ck_assert_msg(rt_answers_again(base, s, false), "never reconnected");
    ld_store_free(s);
    redisd_destroy(&d);
}
END_TEST

START_TEST(test_paused_server_times_out)
{
    struct redisd d;
    ck_assert_int_eq(redisd_start(&d, NULL), 0);
    ld_store *s = rt_store_on(base, &d, 200, 100);
    ck_assert(!rt_bool(ld_store_initialized(s)));
    redisd_pause(&d);
    ld_future *fs[10];
    for (int i = 0; i < 10; i++)
        fs[i] = ld_store_get(s, F(), "x");
    for (int i = 0; i < 10; i++)
        rt_error(fs[i], LD_ETIMEDOUT, "100 ms");
    redisd_resume(&d);
    ck_assert_msg(rt_answers_again(base, s, false), "never came back");
    ld_store_free(s);
    redisd_destroy(&d);
}
END_TEST

START_TEST(test_killed_mid_pipeline)
{
    struct redisd d;
    ck_assert_int_eq(redisd_start(&d, NULL), 0);
    ld_store *s = rt_store_on(base, &d, 0, 0);
    ck_assert(!rt_bool(ld_store_initialized(s)));
    ld_future *fs[1000];
    for (int i = 0; i < 1000; i++)
        fs[i] = ld_store_get(s, F(), "x");
    redisd_kill(&d);
    int ok = 0, failed = 0;
    for (int i = 0; i < 1000; i++) {
        rt_wait(fs[i]);
        if (ld_future_is_fulfilled(fs[i]))
            ok++;
        else if (ld_future_error(fs[i]) == LD_ESTORE)
            failed++;
        ld_future_unref(fs[i]);
    }
    ck_assert_int_eq(ok + failed, 1000);
    /* restarted empty: the store connects again and reads the new server */
    ck_assert_int_eq(redisd_restart(&d), 0);
    ck_assert_msg(rt_answers_again(base, s, false), "never reconnected");
    ld_store_free(s);
    redisd_destroy(&d);
}
END_TEST

START_TEST(test_client_kill_reconnects)
{
    ld_redis_options *o = rt_options(NULL);
    ld_redis_options_set_reconnect(o, 10, 20);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert(!rt_bool(ld_store_initialized(s)));
    freeReplyObject(redisd_cmd(&rt_server, "CLIENT KILL TYPE normal"));
    ck_assert_msg(rt_answers_again(base, s, false), "never reconnected");
    ld_store_free(s);
}
END_TEST

Suite *rt_suite_store(void)
{
    Suite *s = suite_create("redis_store");
    ld_store_contract_add_tests(s, "contract", &factory, NULL);
    TCase *tc = tcase_create("layout");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_layout_written);
    tcase_add_test(tc, test_layout_read);
    tcase_add_test(tc, test_bad_json_in_redis);
    tcase_add_test(tc, test_wrong_type_in_redis);
    tcase_add_test(tc, test_upsert_race_retries);
    tcase_add_test(tc, test_read_your_writes_pipelined);
    tcase_add_test(tc, test_many_items_sliced);
    tcase_add_test(tc, test_an_invalid_init_writes_nothing);
    tcase_add_test(tc, test_all_of_the_same_bytes_is_parsed_once);
    tcase_add_test(tc, test_gets_answered_together_complete_in_order);
    tcase_add_test(tc, test_free_with_answers_unparsed);
    tcase_add_test(tc, test_free_with_operations_in_flight);
    tcase_add_test(tc, test_close_waits_for_operations);
    suite_add_tcase(s, tc);
    tc = tcase_create("outages");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_wrong_password);
    tcase_add_test(tc, test_no_server_then_server);
    tcase_add_test(tc, test_paused_server_times_out);
    tcase_add_test(tc, test_killed_mid_pipeline);
    tcase_add_test(tc, test_client_kill_reconnects);
    suite_add_tcase(s, tc);
    return s;
}
