/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Attacks on libldasync-redis through its public API: hostile data in
 * Redis, a server that misbehaves, options at their limits, operations
 * piled up when the connection goes. Each test names what must hold.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "check_redis.h"

static struct event_base *base;

static void setup(void)
{
    rt_flushall();
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
}

static void teardown(void)
{
    redisd_resume(&rt_server); /* a test that paused it may have failed */
    event_base_free(base);
    base = NULL;
}

static void raw(const char *fmt, const char *a, size_t alen, const char *b, size_t blen)
{
    redisContext *c = redisd_connect(&rt_server);
    ck_assert_ptr_nonnull(c);
    redisReply *r = redisCommand(c, fmt, a, alen, b, blen);
    ck_assert_msg(r && r->type != REDIS_REPLY_ERROR, "raw command failed");
    freeReplyObject(r);
    redisFree(c);
}

/* A field name that is not valid UTF-8 in the features hash: all() says
 * the data is bad (LD_EPARSE), not that memory ran out. */
START_TEST(test_all_field_not_utf8)
{
    static const char key[] = "bad\xff\xfe";
    static const char item[] = "{\"key\":\"bad\",\"version\":1}";
    raw("HSET launchdarkly:features %b %b", key, sizeof(key) - 1, item, sizeof(item) - 1);
    ld_store *s = rt_store(base, NULL);
    rt_error(ld_store_all(s, ld_kind_features()), LD_EPARSE, NULL);
    ld_store_free(s);
}
END_TEST

/* A field name with a NUL byte ("a\0evil") must not shadow the item "a":
 * all() either rejects the data or keeps "a" as Redis has it. */
START_TEST(test_all_field_with_nul_does_not_shadow)
{
    static const char good[] = "{\"key\":\"a\",\"version\":1,\"on\":true}";
    static const char evil_key[] = "a\0evil";
    static const char evil[] = "{\"key\":\"a\",\"version\":99,\"on\":false}";
    raw("HSET launchdarkly:features %b %b", "a", 1, good, sizeof(good) - 1);
    raw("HSET launchdarkly:features %b %b", evil_key, sizeof(evil_key) - 1, evil, sizeof(evil) - 1);
    ld_store *s = rt_store(base, NULL);
    ld_future *f = rt_wait(ld_store_all(s, ld_kind_features()));
    if (ld_future_is_fulfilled(f)) {
        json_t *a = json_object_get(ld_future_json(f), "a");
        ck_assert_ptr_nonnull(a);
        ck_assert_int_eq(json_integer_value(json_object_get(a, "version")), 1);
    } else {
        ck_assert_int_eq(ld_future_error(f), LD_EPARSE);
    }
    ld_future_unref(f);
    ld_store_free(s);
}
END_TEST

/* The largest timeouts the options accept work: a get is answered (no
 * overflow of the deadline makes it time out at once). */
START_TEST(test_huge_timeouts)
{
    ld_redis_options *o = rt_options(NULL);
    ck_assert_int_eq(ld_redis_options_set_timeouts(o, INT64_MAX, INT64_MAX), 0);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, INT64_MAX, INT64_MAX), 0);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    for (int i = 0; i < 5; i++) {
        json_t *v = rt_json(ld_store_get(s, ld_kind_features(), "nothing"));
        ck_assert_ptr_null(v);
        rt_run_for(base, 20);
    }
    ld_store_free(s);
}
END_TEST

/* Tens of thousands of operations wait behind a write when the connection
 * times out: they all reject, without one nested call per operation (the
 * stack), and the store answers again once Redis does. */
START_TEST(test_pile_behind_write_on_timeout)
{
    enum { N = 50000 };
    ld_redis_options *o = rt_options(NULL);
    ck_assert_int_eq(ld_redis_options_set_timeouts(o, 2000, 300), 0);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, 50, 200), 0);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    ck_assert(!rt_bool(ld_store_initialized(s))); /* connected */
    redisd_pause(&rt_server);
    json_t *item = rt_j("{\"key\":\"w\",\"version\":1}");
    ld_future *w = ld_store_upsert(s, ld_kind_features(), item);
    json_decref(item);
    ld_future **fs = calloc(N, sizeof(*fs));
    ck_assert_ptr_nonnull(fs);
    for (int i = 0; i < N; i++)
        fs[i] = ld_store_get(s, ld_kind_features(), "w");
    rt_wait(fs[N - 1]);
    redisd_resume(&rt_server);
    rt_wait(w);
    ck_assert(ld_future_is_rejected(w));
    ld_future_unref(w);
    for (int i = 0; i < N; i++) {
        rt_wait(fs[i]);
        ck_assert(ld_future_is_rejected(fs[i]));
        ld_future_unref(fs[i]);
    }
    free(fs);
    /* and it comes back */
    bool ok = false;
    for (int i = 0; i < 100 && !ok; i++) {
        ld_future *g = rt_wait(ld_store_get(s, ld_kind_features(), "w"));
        ok = ld_future_is_fulfilled(g);
        ld_future_unref(g);
        if (!ok)
            rt_run_for(base, 50);
    }
    ck_assert(ok);
    ld_store_free(s);
}
END_TEST

/* ---- a server that accepts and hangs up at once -------------------------- */

struct hangup {
    int fd;
    int accepts;
    struct event *ev;
    char path[108];
};

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct hangup *h = arg;
    int c = accept(fd, NULL, NULL);
    if (c >= 0) {
        h->accepts++;
        close(c);
    }
}

static void hangup_start(struct hangup *h)
{
    memset(h, 0, sizeof(*h));
    char path[512];
    snprintf(path, sizeof(path), "%s/hangup.sock", rt_server.dir);
    ck_assert_uint_lt(strlen(path), sizeof(h->path));
    memcpy(h->path, path, strlen(path) + 1);
    unlink(h->path);
    h->fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(h->fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(h->path), sizeof(sa.sun_path));
    memcpy(sa.sun_path, h->path, strlen(h->path) + 1);
    ck_assert_int_eq(bind(h->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(h->fd, 16), 0);
    evutil_make_socket_nonblocking(h->fd);
    h->ev = event_new(base, h->fd, EV_READ | EV_PERSIST, on_accept, h);
    event_add(h->ev, NULL);
}

static void hangup_stop(struct hangup *h)
{
    event_free(h->ev);
    close(h->fd);
    unlink(h->path);
}

static int status_changes;

static void on_status(ld_store *store, const ld_store_status *st, void *arg)
{
    (void)store;
    (void)st;
    (void)arg;
    status_changes++;
}

/* A server that accepts each connection and closes it at once (as Redis
 * does at maxclients, or a proxy with no backend): the store connects
 * again with the delay doubling, not every initial delay forever. */
START_TEST(test_hangup_server_backs_off)
{
    struct hangup h;
    hangup_start(&h);
    char url[200];
    snprintf(url, sizeof(url), "unix:%s", h.path);
    ld_redis_options *o = ld_redis_options_new();
    ck_assert_int_eq(ld_redis_options_set_url(o, url), 0);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, 20, 10000), 0);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    status_changes = 0;
    ck_assert_int_gt(ld_store_add_status_listener(s, on_status, NULL), 0);
    rt_run_for(base, 1500);
    /* with backoff: about 10+20+40+...+640 ms of waits, 8 connections */
    ck_assert_msg(h.accepts <= 12, "%d connections in 1.5 s", h.accepts);
    ck_assert_msg(status_changes <= 2 * 12 + 1, "%d status changes in 1.5 s", status_changes);
    ld_store_free(s);
    hangup_stop(&h);
}
END_TEST

/* Freeing the store from inside its own status listener (allowed by
 * store.h) when its connection is killed, while it reconnects. */
static void free_in_listener(ld_store *store, const ld_store_status *st, void *arg)
{
    (void)st;
    int *freed = arg;
    if (!*freed) {
        *freed = 1;
        ld_store_free(store);
    }
}

START_TEST(test_free_in_status_listener)
{
    ld_redis_options *o = rt_options(NULL);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, 1, 5), 0);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    ck_assert(!rt_bool(ld_store_initialized(s))); /* connected */
    int freed = 0;
    ck_assert_int_gt(ld_store_add_status_listener(s, free_in_listener, &freed), 0);
    ld_future *g = ld_store_get(s, ld_kind_features(), "x");
    redisReply *r = redisd_cmd(&rt_server, "CLIENT KILL TYPE normal SKIPME yes");
    ck_assert_ptr_nonnull(r);
    freeReplyObject(r);
    rt_wait(g);
    ld_future_unref(g);
    for (int i = 0; i < 50 && !freed; i++)
        rt_run_for(base, 20);
    ck_assert_int_eq(freed, 1);
    rt_run_for(base, 50);
}
END_TEST

/* Very small timeouts and delays: the store keeps working or rejecting,
 * every future completes, nothing leaks. */
START_TEST(test_tiny_timeouts)
{
    ld_redis_options *o = rt_options(NULL);
    ck_assert_int_eq(ld_redis_options_set_timeouts(o, 1, 1), 0);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, 1, 1), 0);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    json_t *data = rt_j("{\"features\":{\"a\":{\"key\":\"a\",\"version\":1}},\"segments\":{}}");
    for (int round = 0; round < 200; round++) {
        ld_future *fs[3] = {ld_store_init(s, data), ld_store_get(s, ld_kind_features(), "a"),
                            ld_store_all(s, ld_kind_features())};
        for (int i = 0; i < 3; i++) {
            rt_wait(fs[i]);
            if (ld_future_is_rejected(fs[i])) {
                int e = ld_future_error(fs[i]);
                ck_assert_msg(e == LD_ESTORE || e == LD_ETIMEDOUT, "rejected with %s",
                              ld_err_name(e));
            }
            ld_future_unref(fs[i]);
        }
    }
    json_decref(data);
    ld_store_free(s);
}
END_TEST

/* The big segment store's metadata: a value that is not all digits of a
 * time that fits rejects with LD_EPARSE (strtoll() alone took an overflow
 * as LLONG_MAX, and "+5", " 5" or "5\0junk" as 5). */
START_TEST(test_big_segments_synced_hostile)
{
    static const char *const bad[] = {"99999999999999999999999", "+5", " 5", "5 "};
    ld_redis_options *o = rt_options(NULL);
    ld_big_segment_store *bs = ld_redis_big_segment_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(bs);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        raw("SET %b %b", "launchdarkly:big_segments_synchronized_on", 41, bad[i], strlen(bad[i]));
        rt_error(ld_big_segment_store_get_metadata(bs), LD_EPARSE, NULL);
    }
    raw("SET %b %b", "launchdarkly:big_segments_synchronized_on", 41, "5\0junk", 6);
    rt_error(ld_big_segment_store_get_metadata(bs), LD_EPARSE, NULL);
    raw("SET %b %b", "launchdarkly:big_segments_synchronized_on", 41, "1700000000123", 13);
    ld_future *f = rt_wait(ld_big_segment_store_get_metadata(bs));
    ck_assert(ld_future_is_fulfilled(f));
    ck_assert_int_eq(ld_future_int(f), 1700000000123);
    ld_future_unref(f);
    ld_big_segment_store_free(bs);
}
END_TEST

/* A Redis with a password, and a store with the wrong one: AUTH fails on
 * every connection; the store tries again with the delay doubling (not a
 * busy loop), and its operations reject with LD_ESTORE. */
START_TEST(test_wrong_password_backs_off)
{
    struct redisd d;
    ck_assert_int_eq(redisd_start(&d, "--requirepass secret"), 0);
    ld_redis_options *o = ld_redis_options_new();
    ck_assert_int_eq(ld_redis_options_set_url(o, d.url), 0);
    ck_assert_int_eq(ld_redis_options_set_password(o, "wrong"), 0);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, 20, 10000), 0);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    rt_error(ld_store_get(s, ld_kind_features(), "a"), LD_ESTORE, NULL);
    rt_run_for(base, 1500);
    ld_store_status st;
    ck_assert_int_eq(ld_store_current_status(s, &st), 0);
    ck_assert(!st.available);
    ld_store_free(s);
    redisContext *c = redisConnectUnix(d.sock);
    ck_assert(c && !c->err);
    redisReply *r = redisCommand(c, "AUTH secret");
    freeReplyObject(r);
    r = redisCommand(c, "INFO stats");
    ck_assert(r && r->type == REDIS_REPLY_STRING);
    const char *p = strstr(r->str, "total_connections_received:");
    ck_assert_ptr_nonnull(p);
    int n = atoi(p + strlen("total_connections_received:"));
    freeReplyObject(r);
    redisFree(c);
    redisd_destroy(&d);
    /* with backoff: 8 or so (and this one, and redisd's PING) */
    ck_assert_msg(n <= 14, "%d connections in 1.5 s", n);
}
END_TEST

/* The hash replaced by another type: every read and write rejects with
 * LD_ESTORE (Redis's WRONGTYPE), and an init puts things right. */
START_TEST(test_hash_of_another_type)
{
    redisReply *r = redisd_cmd(&rt_server, "SET launchdarkly:features notahash");
    freeReplyObject(r);
    ld_store *s = rt_store(base, NULL);
    rt_error(ld_store_all(s, ld_kind_features()), LD_ESTORE, "WRONGTYPE");
    rt_error(ld_store_get(s, ld_kind_features(), "a"), LD_ESTORE, "WRONGTYPE");
    json_t *item = rt_j("{\"key\":\"a\",\"version\":1}");
    rt_error(ld_store_upsert(s, ld_kind_features(), item), LD_ESTORE, "WRONGTYPE");
    json_decref(item);
    json_t *data = rt_j("{\"features\":{\"a\":{\"key\":\"a\",\"version\":1}},\"segments\":{}}");
    rt_ok(ld_store_init(s, data));
    json_decref(data);
    json_t *v = rt_json(ld_store_get(s, ld_kind_features(), "a"));
    ck_assert_ptr_nonnull(v);
    json_decref(v);
    ld_store_free(s);
}
END_TEST

/* An init of many items (several slices) freed half way: the transaction
 * is never run (Redis keeps what it had), nothing leaks. */
START_TEST(test_free_mid_init)
{
    ld_store *s = rt_store(base, NULL);
    json_t *old = rt_j("{\"features\":{\"old\":{\"key\":\"old\",\"version\":1}},\"segments\":{}}");
    rt_ok(ld_store_init(s, old));
    json_decref(old);
    json_t *features = json_object();
    char pad[1024];
    memset(pad, 'x', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    for (int i = 0; i < 2000; i++) {
        char key[32];
        snprintf(key, sizeof(key), "f%d", i);
        json_object_set_new(features, key,
                            json_pack("{s:s,s:i,s:s}", "key", key, "version", 1, "pad", pad));
    }
    json_t *data = json_pack("{s:o,s:{}}", "features", features, "segments");
    ld_future *f = ld_store_init(s, data);
    json_decref(data);
    for (int i = 0; i < 5; i++)
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ck_assert(!ld_future_is_fulfilled(f));
    ld_store_free(s);
    rt_wait(f);
    ld_future_unref(f);
    rt_run_for(base, 100);
    redisReply *r = redisd_cmd(&rt_server, "HLEN launchdarkly:features");
    ck_assert(r && r->type == REDIS_REPLY_INTEGER);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
}
END_TEST

/* Close, then free at once, with operations in flight on a paused Redis;
 * and a caching store over it freed while Redis is paused. */
START_TEST(test_close_free_while_paused)
{
    ld_store *s = rt_store(base, NULL);
    ck_assert(!rt_bool(ld_store_initialized(s)));
    ld_store *c = ld_caching_store_new(base, rt_store(base, "cached"), LD_CACHE_FOREVER);
    ck_assert_ptr_nonnull(c);
    ck_assert(!rt_bool(ld_store_initialized(c)));
    redisd_pause(&rt_server);
    ld_future *g = ld_store_get(s, ld_kind_features(), "a");
    ld_future *a = ld_store_all(c, ld_kind_features());
    event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ld_future *cl = ld_store_close(s);
    ld_future *cl2 = ld_store_close(s);
    ld_store_free(s);
    ld_store_free(c);
    ld_future *fs[] = {g, a, cl, cl2};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        rt_wait(fs[i]);
        ld_future_unref(fs[i]);
    }
    redisd_resume(&rt_server);
    rt_run_for(base, 50);
}
END_TEST

/* An upsert whose read under WATCH fails (the hash is of another type)
 * must not leave the WATCH on the connection: another client then changes
 * the key, and the next init (which repairs it) must still run, not end in
 * "the init's transaction was not run". */
START_TEST(test_failed_upsert_leaves_no_watch)
{
    redisReply *r = redisd_cmd(&rt_server, "SET launchdarkly:features notahash");
    freeReplyObject(r);
    ld_store *s = rt_store(base, NULL);
    json_t *item = rt_j("{\"key\":\"a\",\"version\":1}");
    rt_error(ld_store_upsert(s, ld_kind_features(), item), LD_ESTORE, "WRONGTYPE");
    json_decref(item);
    r = redisd_cmd(&rt_server, "SET launchdarkly:features changed");
    freeReplyObject(r);
    json_t *data = rt_j("{\"features\":{\"a\":{\"key\":\"a\",\"version\":1}},\"segments\":{}}");
    rt_ok(ld_store_init(s, data));
    json_decref(data);
    ck_assert(rt_bool(ld_store_initialized(s)));
    ld_store_free(s);
}
END_TEST

/* Fills the features hash of `d` with `n` items of about `pad` bytes each,
 * through a pipeline of HSETs. */
static void fill(const struct redisd *d, int n, int pad)
{
    redisContext *c = redisd_connect(d);
    ck_assert_ptr_nonnull(c);
    char *v = malloc((size_t)pad + 100);
    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < n; i += 1000) {
        int m = n - i < 1000 ? n - i : 1000;
        for (int k = i; k < i + m; k++) {
            int len = snprintf(v, (size_t)pad + 100,
                               "{\"key\":\"f%d\",\"version\":1,\"pad\":\"%*s\"}", k, pad, "");
            redisAppendCommand(c, "HSET launchdarkly:features f%d %b", k, v, (size_t)len);
        }
        for (int k = 0; k < m; k++) {
            redisReply *r = NULL;
            ck_assert_int_eq(redisGetReply(c, (void **)&r), REDIS_OK);
            freeReplyObject(r);
        }
    }
    free(v);
    redisFree(c);
}

static long long hlen_features(void)
{
    redisReply *r = redisd_cmd(&rt_server, "HLEN launchdarkly:features");
    ck_assert(r && r->type == REDIS_REPLY_INTEGER);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* Redis paused while an init of 2 MB is half sent, then the command
 * timeout: the init rejects, and once Redis runs again what it holds is
 * the old data or the new, never a mix; a new init then succeeds. */
START_TEST(test_pause_mid_init_is_atomic)
{
    ld_redis_options *o = rt_options(NULL);
    ck_assert_int_eq(ld_redis_options_set_timeouts(o, 2000, 300), 0);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, 20, 100), 0);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    json_t *old = rt_j("{\"features\":{\"old\":{\"key\":\"old\",\"version\":1}},\"segments\":{}}");
    rt_ok(ld_store_init(s, old));
    json_t *features = json_object();
    char pad[1024];
    memset(pad, 'x', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    for (int i = 0; i < 2000; i++) {
        char key[32];
        snprintf(key, sizeof(key), "f%d", i);
        json_object_set_new(features, key,
                            json_pack("{s:s,s:i,s:s}", "key", key, "version", 1, "pad", pad));
    }
    json_t *data = json_pack("{s:o,s:{}}", "features", features, "segments");
    ld_future *f = ld_store_init(s, data);
    for (int i = 0; i < 3; i++)
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    redisd_pause(&rt_server);
    rt_wait(f);
    ck_assert(ld_future_is_rejected(f));
    ck_assert(ld_future_error(f) == LD_ETIMEDOUT || ld_future_error(f) == LD_ESTORE);
    ld_future_unref(f);
    redisd_resume(&rt_server);
    rt_run_for(base, 200);
    long long n = hlen_features();
    ck_assert_msg(n == 1 || n == 2000, "%lld items: a partial init", n);
    bool ok = false;
    for (int i = 0; i < 50 && !ok; i++) {
        ld_future *g = rt_wait(ld_store_init(s, data));
        ok = ld_future_is_fulfilled(g);
        ld_future_unref(g);
        if (!ok)
            rt_run_for(base, 50);
    }
    ck_assert(ok);
    ck_assert_int_eq(hlen_features(), 2000);
    json_decref(data);
    json_decref(old);
    ld_store_free(s);
}
END_TEST

/* Redis killed while the reply of an HGETALL of 200,000 fields is being
 * read: the all() rejects with LD_ESTORE, nothing leaks, and the store
 * works once Redis is back (restarted empty). */
START_TEST(test_kill_mid_hgetall)
{
    struct redisd d;
    ck_assert_int_eq(redisd_start(&d, NULL), 0);
    fill(&d, 200000, 20);
    ld_redis_options *o = ld_redis_options_new();
    ck_assert_int_eq(ld_redis_options_set_url(o, d.url), 0);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, 20, 100), 0);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    ck_assert(rt_bool(ld_store_initialized(s)) == false);
    ld_future *f = ld_store_all(s, ld_kind_features());
    for (int i = 0; i < 3; i++)
        event_base_loop(base, EVLOOP_ONCE);
    redisd_kill(&d);
    rt_wait(f);
    if (ld_future_is_rejected(f))
        ck_assert_int_eq(ld_future_error(f), LD_ESTORE);
    else /* read whole before the kill: the machine was fast */
        ck_assert_int_eq((int)json_object_size(ld_future_json(f)), 200000);
    ld_future_unref(f);
    ck_assert_int_eq(redisd_restart(&d), 0);
    bool ok = false;
    for (int i = 0; i < 50 && !ok; i++) {
        ld_future *g = rt_wait(ld_store_all(s, ld_kind_features()));
        ok = ld_future_is_fulfilled(g);
        if (ok)
            ck_assert_int_eq((int)json_object_size(ld_future_json(g)), 0);
        ld_future_unref(g);
        if (!ok)
            rt_run_for(base, 50);
    }
    ck_assert(ok);
    ld_store_free(s);
    redisd_destroy(&d);
}
END_TEST

/* CLIENT KILL again and again while 10,000 reads and 100 writes are
 * pipelined: every future completes (fulfilled, or LD_ESTORE /
 * LD_ETIMEDOUT), and the store works afterwards. */
static void on_kill(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    int *kills = arg;
    redisReply *r = redisd_cmd(&rt_server, "CLIENT KILL TYPE normal SKIPME yes");
    if (r)
        freeReplyObject(r);
    (*kills)++;
}

START_TEST(test_client_kill_storm)
{
    enum { N = 10000, W = 100 };
    ld_redis_options *o = rt_options(NULL);
    ck_assert_int_eq(ld_redis_options_set_reconnect(o, 1, 5), 0);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    int kills = 0;
    struct event *ev = event_new(base, -1, EV_PERSIST, on_kill, &kills);
    struct timeval tv = {0, 3000};
    event_add(ev, &tv);
    ld_future **fs = calloc(N + W, sizeof(*fs));
    ck_assert_ptr_nonnull(fs);
    int ok = 0, failed_n = 0;
    for (int i = 0; i < N + W; i++) {
        if (i % 100 == 0) {
            json_t *item = json_pack("{s:s,s:i}", "key", "w", "version", i + 1);
            fs[i] = ld_store_upsert(s, ld_kind_features(), item);
            json_decref(item);
        } else {
            fs[i] = ld_store_get(s, ld_kind_features(), "w");
        }
        if (i % 500 == 0)
            event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    }
    for (int i = 0; i < N + W; i++) {
        rt_wait(fs[i]);
        if (ld_future_is_fulfilled(fs[i])) {
            ok++;
        } else {
            int e = ld_future_error(fs[i]);
            ck_assert_msg(e == LD_ESTORE || e == LD_ETIMEDOUT, "rejected with %s (%s)",
                          ld_err_name(e), ld_future_error_message(fs[i]));
            failed_n++;
        }
        ld_future_unref(fs[i]);
    }
    free(fs);
    event_free(ev);
    ck_assert_int_eq(ok + failed_n, N + W);
    bool back = false;
    for (int i = 0; i < 50 && !back; i++) {
        ld_future *g = rt_wait(ld_store_get(s, ld_kind_features(), "w"));
        back = ld_future_is_fulfilled(g);
        ld_future_unref(g);
        if (!back)
            rt_run_for(base, 20);
    }
    ck_assert(back);
    ld_store_free(s);
}
END_TEST

/* A host name being resolved when operations are issued: they wait for
 * the resolution (redis.h: "operations issued while a connection is being
 * made wait for it"), not reject at once with "still resolving"; a name
 * that does not resolve within the connect timeout rejects them then. */
START_TEST(test_ops_wait_for_name_resolution)
{
    ld_redis_options *o = ld_redis_options_new();
    ck_assert_int_eq(ld_redis_options_set_url(o, "redis://ldasync-attack.invalid:6379"), 0);
    ck_assert_int_eq(ld_redis_options_set_timeouts(o, 300, 300), 0);
    ld_store *s = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(s);
    ld_future *f = ld_store_get(s, ld_kind_features(), "a");
    rt_wait(f);
    ck_assert(ld_future_is_rejected(f));
    ck_assert_int_eq(ld_future_error(f), LD_ESTORE);
    ck_assert_msg(!strstr(ld_future_error_message(f), "still resolving"),
                  "did not wait for the name: %s", ld_future_error_message(f));
    ck_assert_msg(strstr(ld_future_error_message(f), "resol"), "message: %s",
                  ld_future_error_message(f));
    ld_future_unref(f);
    ld_store_free(s);
}
END_TEST

/* The unreachable: a unix "socket" that is a regular file or a directory,
 * a TCP port nobody listens on. Operations reject with LD_ESTORE at once
 * or within the connect timeout, and the store can be freed. */
START_TEST(test_unreachable_places)
{
    char file[300], url[400];
    snprintf(file, sizeof(file), "%s/not-a-socket", rt_server.dir);
    FILE *fp = fopen(file, "w");
    ck_assert_ptr_nonnull(fp);
    fclose(fp);
    const char *urls[] = {url, "unix:/tmp", "redis://127.0.0.1:1", "redis://[::1]:1"};
    snprintf(url, sizeof(url), "unix:%s", file);
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        ld_redis_options *o = ld_redis_options_new();
        ck_assert_int_eq(ld_redis_options_set_url(o, urls[i]), 0);
        ck_assert_int_eq(ld_redis_options_set_timeouts(o, 300, 300), 0);
        ck_assert_int_eq(ld_redis_options_set_reconnect(o, 1, 10), 0);
        ld_store *s = ld_redis_store_new(base, o);
        ld_redis_options_free(o);
        ck_assert_ptr_nonnull(s);
        rt_error(ld_store_get(s, ld_kind_features(), "a"), LD_ESTORE, NULL);
        rt_run_for(base, 100);
        rt_error(ld_store_all(s, ld_kind_features()), LD_ESTORE, NULL);
        ld_store_free(s);
    }
    unlink(file);
}
END_TEST

/* ld_store_free from inside the callback of one of the store's futures,
 * with a sliced all() and a write still under way behind it: the others
 * complete (cancelled or answered), nothing leaks. */
static void free_store_cb(ld_future *f, void *arg)
{
    (void)f;
    ld_store **sp = arg;
    ld_store_free(*sp);
    *sp = NULL;
}

START_TEST(test_free_in_future_callback)
{
    fill(&rt_server, 5000, 100);
    ld_store *s = rt_store(base, NULL);
    ld_future *g = ld_store_get(s, ld_kind_features(), "f1");
    ld_future *a = ld_store_all(s, ld_kind_features());
    json_t *item = rt_j("{\"key\":\"f1\",\"version\":7}");
    ld_future *w = ld_store_upsert(s, ld_kind_features(), item);
    json_decref(item);
    ld_future *a2 = ld_store_all(s, ld_kind_features());
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(g), free_store_cb, &s), 0);
    ld_future *fs[] = {g, a, w, a2};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        rt_wait(fs[i]);
        ld_future_unref(fs[i]);
    }
    ck_assert_ptr_null(s);
    rt_run_for(base, 50);
}
END_TEST

/* The same for the big segment store: its reads wait for the name. */
START_TEST(test_big_segments_wait_for_name_resolution)
{
    ld_redis_options *o = ld_redis_options_new();
    ck_assert_int_eq(ld_redis_options_set_url(o, "redis://ldasync-attack.invalid:6379"), 0);
    ck_assert_int_eq(ld_redis_options_set_timeouts(o, 300, 300), 0);
    ld_big_segment_store *bs = ld_redis_big_segment_store_new(base, o);
    ld_redis_options_free(o);
    ck_assert_ptr_nonnull(bs);
    ld_future *fs[] = {ld_big_segment_store_get_metadata(bs),
                       ld_big_segment_store_get_membership(bs, "aGFzaA==")};
    for (size_t i = 0; i < 2; i++) {
        rt_wait(fs[i]);
        ck_assert(ld_future_is_rejected(fs[i]));
        ck_assert_msg(!strstr(ld_future_error_message(fs[i]), "still resolving"),
                      "did not wait for the name: %s", ld_future_error_message(fs[i]));
        ld_future_unref(fs[i]);
    }
    /* freed with reads waiting for the name */
    ld_future *late = ld_big_segment_store_get_membership(bs, "aGFzaA==");
    ld_big_segment_store_free(bs);
    rt_wait(late);
    ld_future_unref(late);
}
END_TEST

/* ---- alls parsed a slice per pass ---------------------------------------- */

/* Fills the hash `ns` ("features", "segments") of the default prefix with
 * `n` items of about `pad` bytes, version `version`, through a pipeline. */
static void fill_ns(const char *ns, int n, int pad, int version)
{
    redisContext *c = redisd_connect(&rt_server);
    ck_assert_ptr_nonnull(c);
    char *v = malloc((size_t)pad + 100);
    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < n; i += 1000) {
        int m = n - i < 1000 ? n - i : 1000;
        for (int k = i; k < i + m; k++) {
            int len =
                snprintf(v, (size_t)pad + 100, "{\"key\":\"k%d\",\"version\":%d,\"pad\":\"%*s\"}",
                         k, version, pad, "");
            redisAppendCommand(c, "HSET launchdarkly:%s k%d %b", ns, k, v, (size_t)len);
        }
        for (int k = 0; k < m; k++) {
            redisReply *r = NULL;
            ck_assert_int_eq(redisGetReply(c, (void **)&r), REDIS_OK);
            freeReplyObject(r);
        }
    }
    free(v);
    redisFree(c);
}

/* Runs the loop until `f` is complete, for `ms` at most: whether it is. */
static bool done_within(ld_future *f, int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (!ld_future_is_pending(f))
            return true;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
            return false;
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    }
}

/* An all of each kind issued together, both answered with more than one
 * slice of bytes: the second answer comes while the first is still parsed
 * (Redis answers both at once; the store reads 16 KB a pass and parses
 * 64 KB). Both complete, each with its own kind's items. */
START_TEST(test_alls_of_two_kinds_parsed_at_once_both_complete)
{
    fill_ns("features", 4000, 100, 1);
    fill_ns("segments", 500, 100, 1);
    ld_store *s = rt_store(base, NULL);
    ck_assert(!rt_bool(ld_store_initialized(s))); /* connected */
    ld_future *fa = ld_store_all(s, ld_kind_features());
    ld_future *sa = ld_store_all(s, ld_kind_segments());
    bool f_done = done_within(fa, 10000), s_done = done_within(sa, 10000);
    ck_assert_msg(f_done && s_done, "all(features) %s, all(segments) %s",
                  f_done ? "complete" : "never completed", s_done ? "complete" : "never completed");
    ck_assert(ld_future_is_fulfilled(fa) && ld_future_is_fulfilled(sa));
    ck_assert_int_eq(json_object_size(ld_future_json(fa)), 4000);
    ck_assert_int_eq(json_object_size(ld_future_json(sa)), 500);
    ld_future_unref(fa);
    ld_future_unref(sa);
    ld_store_free(s);
    rt_run_for(base, 5);
}
END_TEST

/* An init of many items (sliced) issued right after an all of a large
 * hash: the write starts at once, the all's answer comes while the init's
 * items are written a slice per pass. Both complete, and a read after them
 * sees the init's data. */
START_TEST(test_an_init_sliced_while_an_all_is_parsed_both_complete)
{
    fill_ns("features", 4000, 100, 1);
    ld_store *s = rt_store(base, NULL);
    ck_assert(!rt_bool(ld_store_initialized(s))); /* connected */
    json_t *features = json_object();
    char pad[1024];
    memset(pad, 'x', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    for (int i = 0; i < 6000; i++) {
        char key[32];
        snprintf(key, sizeof(key), "n%d", i);
        json_object_set_new(features, key,
                            json_pack("{s:s,s:i,s:s}", "key", key, "version", 2, "pad", pad));
    }
    json_t *data = json_pack("{s:o,s:{}}", "features", features, "segments");
    ld_future *a = ld_store_all(s, ld_kind_features());
    ld_future *in = ld_store_init(s, data);
    json_decref(data);
    bool a_done = done_within(a, 10000), in_done = done_within(in, 10000);
    ck_assert_msg(a_done && in_done, "all %s, init %s", a_done ? "complete" : "never completed",
                  in_done ? "complete" : "never completed");
    ck_assert(ld_future_is_fulfilled(a));
    ck_assert_int_eq(json_object_size(ld_future_json(a)), 4000);
    ck_assert_msg(ld_future_is_fulfilled(in), "%s", ld_future_error_message(in));
    ld_future_unref(a);
    ld_future_unref(in);
    json_t *after = rt_json(ld_store_all(s, ld_kind_features()));
    ck_assert_int_eq(json_object_size(after), 6000);
    json_decref(after);
    ld_store_free(s);
    rt_run_for(base, 5);
}
END_TEST

/* Blocks allocated and not yet freed, through ldasync's and jansson's
 * allocators. */
static long g_blocks;

static void *blocks_malloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        __atomic_add_fetch(&g_blocks, 1, __ATOMIC_RELAXED);
    return p;
}

static void *blocks_realloc(void *q, size_t n)
{
    void *p = realloc(q, n);
    if (p && !q)
        __atomic_add_fetch(&g_blocks, 1, __ATOMIC_RELAXED);
    return p;
}

static void blocks_free(void *q)
{
    if (q)
        __atomic_sub_fetch(&g_blocks, 1, __ATOMIC_RELAXED);
    free(q);
}

/* Sets feature `key` at `version` in Redis, as another writer would. */
static void set_raw(int key, int version)
{
    char k[32], v[128];
    snprintf(k, sizeof k, "k%d", key);
    int n = snprintf(v, sizeof v, "{\"key\":\"%s\",\"version\":%d}", k, version);
    raw("HSET launchdarkly:features %b %b", k, strlen(k), v, (size_t)n);
}

/* Alls in a row, each answered with other bytes (a flag changed before
 * each), their results released at once: what the store keeps does not
 * grow with the number of alls (each replaced result is let go of over
 * the next passes), and it all goes when the store is freed half way
 * through letting one go. */
START_TEST(test_alls_in_a_row_with_changed_data_stay_bounded)
{
    fill_ns("features", 3000, 20, 1);
    ck_assert_int_eq(ld_set_alloc_funcs(blocks_malloc, blocks_realloc, blocks_free), 0);
    json_set_alloc_funcs(blocks_malloc, blocks_free);
    long base_blocks = __atomic_load_n(&g_blocks, __ATOMIC_RELAXED), left[2];
    enum { NBURST = 30 };
    for (int round = 0; round < 2; round++) {
        ld_store *s = rt_store(base, NULL);
        long most = 0, after3 = 0;
        for (int i = 0; i < 30; i++) {
            set_raw(i % 3000, 100 * round + i + 2);
            json_t *a = rt_json(ld_store_all(s, ld_kind_features()));
            ck_assert_int_eq(json_object_size(a), 3000);
            json_decref(a);
            rt_run_for(base, 2);
            long now = __atomic_load_n(&g_blocks, __ATOMIC_RELAXED) - base_blocks;
            if (i == 2)
                after3 = now;
            most = now > most ? now : most;
        }
        /* alls issued at once, a write between each pair, all released
         * at once */
        ld_future *fs[NBURST];
        for (int i = 0; i < NBURST; i++) {
            fs[i] = ld_store_all(s, ld_kind_features());
            json_t *item = json_pack("{s:s,s:i}", "key", "k1", "version", 1000 * (round + 1) + i);
            ld_future_unref(ld_store_upsert(s, ld_kind_features(), item));
            json_decref(item);
        }
        for (int i = 0; i < NBURST; i++) {
            rt_wait(fs[i]);
            ck_assert(ld_future_is_fulfilled(fs[i]));
            ld_future_unref(fs[i]);
        }
        rt_run_for(base, 50);
        long end = __atomic_load_n(&g_blocks, __ATOMIC_RELAXED) - base_blocks;
        ck_assert_msg(end <= after3 + after3 / 4 + NBURST && most <= 3 * after3,
                      "blocks held: %ld after 3 alls, %ld at most, %ld at the end", after3, most,
                      end);
        /* freed while a replaced result is let go of */
        set_raw(7, 5000 + round);
        json_decref(rt_json(ld_store_all(s, ld_kind_features())));
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        ld_store_free(s);
        rt_run_for(base, 20);
        left[round] = __atomic_load_n(&g_blocks, __ATOMIC_RELAXED) - base_blocks;
    }
    json_set_alloc_funcs(malloc, free);
    ld_set_alloc_funcs(NULL, NULL, NULL);
    /* the first round leaves what the base keeps for its futures (spares,
     * up to as many as were under way at once); a second one, nothing */
    ck_assert_msg(left[0] <= 2 * NBURST + 16 && left[1] <= left[0],
                  "%ld blocks left after a store's life, %ld after a second one", left[0], left[1]);
}
END_TEST

/* Alls of 0, 1, 1024, 1025 and 200,000 items one after the other (each
 * replacing the last result: at once up to 1024 members, over passes
 * beyond), a result held across the next all and across the store's free:
 * each answer is whole, and a held result stays whole. */
START_TEST(test_alls_of_every_size_replacing_each_other)
{
    static const int sizes[] = {0, 1, 1024, 1025, 200000, 1025, 0};
    ld_store *s = rt_store(base, NULL);
    json_t *held = NULL;
    int held_n = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        rt_flushall();
        if (sizes[i])
            fill_ns("features", sizes[i], 0, (int)i + 1);
        json_t *a = rt_json(ld_store_all(s, ld_kind_features()));
        ck_assert_int_eq(json_object_size(a), sizes[i]);
        if (sizes[i])
            ck_assert_int_eq(ld_item_version(json_object_get(a, "k0")), (int)i + 1);
        if (i == 4) { /* the 200,000 items, held across the next all */
            held = json_incref(a);
            held_n = sizes[i];
        }
        json_decref(a);
        if (i == 5) {
            ck_assert_int_eq(json_object_size(held), held_n);
            json_decref(held);
            held = NULL;
        }
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    }
    /* the last result, 1025 items, replaced by one of 0, held over the free */
    rt_flushall();
    fill_ns("features", 1025, 0, 9);
    held = rt_json(ld_store_all(s, ld_kind_features()));
    rt_flushall();
    json_decref(rt_json(ld_store_all(s, ld_kind_features())));
    ld_store_free(s);
    rt_run_for(base, 5);
    ck_assert_int_eq(json_object_size(held), 1025);
    ck_assert_int_eq(ld_item_version(json_object_get(held, "k1024")), 9);
    json_decref(held);
}
END_TEST

/* Results of all handed to another thread, which reads and releases them
 * while the loop thread replaces them with the next alls. */
enum { TALLS = 40 };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ld_future *q[TALLS];
    int put;
} thand = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0};

static void *read_alls(void *arg)
{
    long bad = 0;
    (void)arg;
    for (int i = 0; i < TALLS; i++) {
        pthread_mutex_lock(&thand.mu);
        while (thand.put == i)
            pthread_cond_wait(&thand.cv, &thand.mu);
        ld_future *f = thand.q[i];
        pthread_mutex_unlock(&thand.mu);
        json_t *a = ld_future_json(f);
        bad += json_object_size(a) != 2000;
        bad += ld_item_version(json_object_get(a, "k5")) != (i % 4 == 3 ? 1 : 1);
        ld_future_unref(f);
    }
    return (void *)bad;
}

/* With libevent threading on, results of all released on another thread
 * while the loop thread's next alls (other bytes, or the same: the same
 * result again) replace them: each reads whole (ASan, TSan), and nothing
 * is left once the store is freed (the leak check). */
START_TEST(test_all_results_released_on_another_thread)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    struct event_base *tb = event_base_new();
    ck_assert_ptr_nonnull(tb);
    fill_ns("features", 2000, 10, 1);
    ld_store *s = rt_store(tb, NULL);
    thand.put = 0;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, read_alls, NULL), 0);
    for (int i = 0; i < TALLS; i++) {
        if (i % 4 != 3) /* other bytes, else the same result again */
            set_raw(1000 + i, 2 + i);
        ld_future *f = ld_store_all(s, ld_kind_features());
        ck_assert_int_eq(ld_future_wait(f), 0);
        ck_assert(ld_future_is_fulfilled(f));
        pthread_mutex_lock(&thand.mu);
        thand.q[thand.put++] = f;
        pthread_cond_signal(&thand.cv);
        pthread_mutex_unlock(&thand.mu);
        event_base_loop(tb, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        if (i == TALLS - 2) {
            ld_store_free(s); /* while the thread may hold the last ones */
            s = rt_store(tb, NULL);
        }
    }
    void *bad;
    pthread_join(t, &bad);
    ck_assert_ptr_null(bad);
    ld_store_free(s);
    rt_run_for(tb, 20);
    event_base_free(tb);
}
END_TEST

Suite *rt_suite_attack(void)
{
    Suite *s = suite_create("redis_attack");
    TCase *tc = tcase_create("attack");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_all_field_not_utf8);
    tcase_add_test(tc, test_all_field_with_nul_does_not_shadow);
    tcase_add_test(tc, test_huge_timeouts);
    tcase_add_test(tc, test_ops_wait_for_name_resolution);
    tcase_add_test(tc, test_big_segments_wait_for_name_resolution);
    tcase_add_test(tc, test_unreachable_places);
    tcase_add_test(tc, test_hangup_server_backs_off);
    tcase_add_test(tc, test_free_in_status_listener);
    tcase_add_test(tc, test_tiny_timeouts);
    tcase_add_test(tc, test_big_segments_synced_hostile);
    tcase_add_test(tc, test_wrong_password_backs_off);
    tcase_add_test(tc, test_hash_of_another_type);
    tcase_add_test(tc, test_failed_upsert_leaves_no_watch);
    tcase_add_test(tc, test_free_mid_init);
    tcase_add_test(tc, test_close_free_while_paused);
    tcase_add_test(tc, test_free_in_future_callback);
    tcase_add_test(tc, test_pause_mid_init_is_atomic);
    tcase_add_test(tc, test_client_kill_storm);
    tcase_add_test(tc, test_kill_mid_hgetall);
    tcase_add_test(tc, test_pile_behind_write_on_timeout);
    tcase_add_test(tc, test_alls_of_two_kinds_parsed_at_once_both_complete);
    tcase_add_test(tc, test_an_init_sliced_while_an_all_is_parsed_both_complete);
    tcase_add_test(tc, test_alls_in_a_row_with_changed_data_stay_bounded);
    tcase_add_test(tc, test_alls_of_every_size_replacing_each_other);
    tcase_add_test(tc, test_all_results_released_on_another_thread);
    suite_add_tcase(s, tc);
    return s;
}
