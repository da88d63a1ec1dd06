/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync-bench: fixed workloads, each reported as the median of several
 * timed runs after a warm-up run.
 *
 *   ldasync-bench [--json] [--runs N] [GROUP|NAME ...]
 *   ldasync-bench --dump-eval-data
 *
 * GROUP is the part of a name before the first dot ("future"); with no
 * argument every workload runs. The "alt" group measures the designs that
 * ld_future's dispatch was chosen against (lib/core/future.c), as batched round
 * trips: event_base_once() per callback, and an event inside each future. Text output: name, ops
 * per run, ns/op (for
 * *_bytes workloads: bytes per item; *_kb workloads: KiB; *_ms workloads:
 * milliseconds; *_us workloads: microseconds), peak RSS of the process in
 * KiB. The redis group needs a redis-server (see its section); without one
 * it prints "skipped" and the exit status is unaffected.
 * --json prints one object per line with the same fields.
 * --dump-eval-data prints the data of the eval group (eval_data_text) as
 * one line of JSON text on stdout and exits, so that another SDK can be
 * measured on the same flags and segments (bench/node/).
 */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/http.h>
#include <event2/thread.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ldasync/ldasync.h>
#include <ldasync/redis.h>

/* The summarizer is internal: lib/events/summarizer.c is compiled into
 * this program (Makefile.am), with tests/internal_alloc.c's ld__malloc. */
#include "events/events-internal.h"

/* A redis-server of its own for the redis group, as the Redis tests start
 * one (compiled in: Makefile.am). */
#include "../tests/redis/redisd.h"

static int json_out;
static int runs = 7;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static long rss_kb(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A workload returns the figure of one run: ns per op (or bytes per item). */
typedef double (*workload_fn)(struct event_base *base, long ops);

struct workload {
    const char *name;
    long ops;
    workload_fn fn;
    int threaded; /* libevent threading on (evthread_use_pthreads) */
};

/* The redis group needs Redis: skipped without one. */
static bool needs_redis(const struct workload *w)
{
    return strncmp(w->name, "redis.", 6) == 0;
}

static void report(const char *name, long ops, double value)
{
    if (json_out)
        printf("{\"name\":\"%s\",\"ops\":%ld,\"ns_per_op\":%.2f,\"peak_rss_kb\":%ld}\n", name, ops,
               value, peak_rss_kb());
    else
        printf("%-38s %10ld %10.2f %10ld\n", name, ops, value, peak_rss_kb());
    fflush(stdout);
}

/* ---- future workloads ----------------------------------------------------- */

static long done_count;

static void count_cb(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    done_count++;
}

static void run_until(struct event_base *base, long target)
{
    while (done_count < target)
        event_base_loop(base, EVLOOP_ONCE);
}

/* Runs the loop until what a workload left queued (results it released
 * before the loop ran complete from the loop) has run: before the next
 * run, and before the base is freed. */
static void drain(struct event_base *base)
{
    for (int i = 0; i < 1000; i++)
        event_base_loop(base, EVLOOP_NONBLOCK);
}

/* Many futures completed, then the loop runs their callbacks. */
static double bench_batched(struct event_base *base, long ops)
{
    enum { BATCH = 1000 };
    done_count = 0;
    double t0 = now_ns();
    for (long done = 0; done < ops; done += BATCH) {
        for (int i = 0; i < BATCH; i++) {
            ld_future *f = ld_future_new(base);
            ld_future_fulfill(f);
            ld_future_on_complete(f, count_cb, NULL);
        }
        run_until(base, done + BATCH);
    }
    return (now_ns() - t0) / (double)ops;
}

/* Each future made and completed in the previous one's callback. */
static long seq_left;

static void seq_cb(ld_future *f, void *arg)
{
    (void)f;
    done_count++;
    if (--seq_left <= 0)
        return;
    ld_future *next = ld_future_new(arg);
    ld_future_fulfill(next);
    ld_future_on_complete(next, seq_cb, arg);
}

static double bench_sequential(struct event_base *base, long ops)
{
    done_count = 0;
    seq_left = ops;
    double t0 = now_ns();
    ld_future *f = ld_future_new(base);
    ld_future_fulfill(f);
    ld_future_on_complete(f, seq_cb, base);
    run_until(base, ops);
    return (now_ns() - t0) / (double)ops;
}

/* Futures completed in batches by another thread. */
enum { XBATCH = 1000 };

struct xchan {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ld_future *batch[XBATCH];
    int full; /* a batch is waiting for the producer */
    int stop;
};

static void *producer(void *arg)
{
    struct xchan *c = arg;
    ld_future *local[XBATCH];
    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (!c->full && !c->stop)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->stop && !c->full) {
            pthread_mutex_unlock(&c->mu);
            return NULL;
        }
        memcpy(local, c->batch, sizeof(local));
        c->full = 0;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
        for (int i = 0; i < XBATCH; i++) {
            ld_future_fulfill(local[i]);
            ld_future_unref(local[i]);
        }
    }
}

static void xchan_hand_over(struct xchan *c, ld_future **fs)
{
    pthread_mutex_lock(&c->mu);
    while (c->full)
        pthread_cond_wait(&c->cv, &c->mu);
    memcpy(c->batch, fs, sizeof(c->batch));
    c->full = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static double bench_cross_thread(struct event_base *base, long ops)
{
    struct xchan c = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    pthread_t t;
    ld_future *fs[XBATCH];
    pthread_create(&t, NULL, producer, &c);
    done_count = 0;
    double t0 = now_ns();
    for (long sent = 0; sent < ops; sent += XBATCH) {
        for (int i = 0; i < XBATCH; i++) {
            ld_future *f = ld_future_new(base);
            fs[i] = ld_future_ref(f);
            ld_future_on_complete(f, count_cb, NULL);
        }
        xchan_hand_over(&c, fs);
        /* keep one batch in flight while the loop runs the previous one */
        if (sent >= XBATCH)
            run_until(base, sent);
    }
    run_until(base, ops);
    double ns = (now_ns() - t0) / (double)ops;
    pthread_mutex_lock(&c.mu);
    c.stop = 1;
    pthread_cond_signal(&c.cv);
    pthread_mutex_unlock(&c.mu);
    pthread_join(t, NULL);
    return ns;
}

static void pass_through(ld_future *in, ld_future *out, void *arg)
{
    (void)in;
    (void)arg;
    ld_future_fulfill(out);
}

/* One at a time with ld_future_wait: a loop iteration (and a poll) each. */
static double bench_wait(struct event_base *base, long ops)
{
    double t0 = now_ns();
    for (long i = 0; i < ops; i++) {
        ld_future *f = ld_future_new(base);
        ld_future_fulfill(f);
        ld_future *out = ld_future_then(f, pass_through, NULL);
        ld_future_wait(out);
        ld_future_unref(out);
    }
    return (now_ns() - t0) / (double)ops;
}

static void add_one(ld_future *in, ld_future *out, void *arg)
{
    (void)arg;
    ld_future_fulfill_int(out, ld_future_int(in) + 1);
}

/* Cost per link of a then chain: building it and running it. */
/* Builds a chain of `links` then links on a pending head, completes the
 * head, and waits for the end of the chain. */
static void then_chain(struct event_base *base, long links)
{
    ld_future *head = ld_future_new(base);
    ld_future *f = ld_future_ref(head);
    for (long i = 0; i < links; i++)
        f = ld_future_then(f, add_one, NULL);
    ld_future_fulfill_int(head, 0);
    ld_future_unref(head);
    ld_future_wait(f);
    if (ld_future_int(f) != links) {
        fprintf(stderr, "then_chain: wrong result %lld\n", (long long)ld_future_int(f));
        exit(1);
    }
    ld_future_unref(f);
}

/* Cost per link, chains of 1,000 links: the steady state of code that
 * chains a few steps per request. */
static double bench_then_chain(struct event_base *base, long ops)
{
    enum { LINKS = 1000 };
    double t0 = now_ns();
    for (long done = 0; done < ops; done += LINKS)
        then_chain(base, LINKS);
    return (now_ns() - t0) / (double)ops;
}

/* Cost per link of one chain of `ops` links: 64 MB of futures for a
 * million, written while building and read back while running, so this
 * one is bound by memory, not by the code. */
static double bench_then_chain_long(struct event_base *base, long ops)
{
    double t0 = now_ns();
    then_chain(base, ops);
    return (now_ns() - t0) / (double)ops;
}

/* Memory per pending future with one callback (bytes, in the ns field). */
static double bench_pending_bytes(struct event_base *base, long ops)
{
    ld_future **fs = malloc((size_t)ops * sizeof(*fs));
    if (!fs)
        exit(1);
    /* make the array resident first (volatile: the stores must happen) */
    volatile char *touch = (volatile char *)fs;
    for (size_t i = 0; i < (size_t)ops * sizeof(*fs); i += 4096)
        touch[i] = 0;
    long before = rss_kb();
    for (long i = 0; i < ops; i++) {
        ld_future *f = ld_future_new(base);
        fs[i] = ld_future_ref(f);
        ld_future_on_complete(f, count_cb, NULL);
    }
    long after = rss_kb();
    done_count = 0;
    for (long i = 0; i < ops; i++) {
        ld_future_fulfill(fs[i]);
        ld_future_unref(fs[i]);
    }
    run_until(base, ops);
    free(fs);
    return (double)(after - before) * 1024.0 / (double)ops;
}

/* ---- the designs ld_future's dispatch was measured against -------------- */

static void alt_count(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    done_count++;
}

/* One event_base_once() per callback (libevent allocates each). */
static double bench_alt_event_once(struct event_base *base, long ops)
{
    enum { BATCH = 1000 };
    static const struct timeval zero = {0, 0};
    done_count = 0;
    double t0 = now_ns();
    for (long done = 0; done < ops; done += BATCH) {
        for (int i = 0; i < BATCH; i++)
            event_base_once(base, -1, EV_TIMEOUT, alt_count, NULL, &zero);
        run_until(base, done + BATCH);
    }
    return (now_ns() - t0) / (double)ops;
}

/* A future with its own event inside: malloc, event_assign, event_active. */
struct evfuture {
    int64_t value;
    struct event ev;
};

static void alt_evfuture_done(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    done_count++;
    free(arg);
}

static double bench_alt_event_per_future(struct event_base *base, long ops)
{
    enum { BATCH = 1000 };
    done_count = 0;
    double t0 = now_ns();
    for (long done = 0; done < ops; done += BATCH) {
        for (int i = 0; i < BATCH; i++) {
            struct evfuture *f = malloc(sizeof(*f));
            if (!f)
                exit(1);
            f->value = i;
            event_assign(&f->ev, base, -1, 0, alt_evfuture_done, f);
            event_active(&f->ev, 0, 0);
        }
        run_until(base, done + BATCH);
    }
    return (now_ns() - t0) / (double)ops;
}

/* ---- store workloads ------------------------------------------------------ */

enum { FLAGS = 10000 };

/* The flag fixture (docs/design.md, "The testing kit"): make_feature(key, version). */
static json_t *make_feature(const char *key, long version)
{
    return json_pack("{s:s, s:I, s:b, s:[b,b], s:n, s:{}, s:[], s:[], s:[], s:[], s:s}", "key", key,
                     "version", (json_int_t)version, "on", 1, "variations", 1, 0, "offVariation",
                     "fallthrough", "prerequisites", "targets", "contextTargets", "rules", "salt",
                     "abc");
}

static void flag_key(char *buf, size_t len, long i)
{
    snprintf(buf, len, "flag-%06ld", i);
}

/* {"features": {n flags}, "segments": {}} */
static json_t *make_data(long n)
{
    json_t *features = json_object();
    char key[32];
    for (long i = 0; i < n; i++) {
        flag_key(key, sizeof(key), i);
        json_object_set_new(features, key, make_feature(key, 1));
    }
    return json_pack("{s:o, s:{}}", "features", features, "segments");
}

/* A memory store holding n flags, and their keys. */
static ld_store *store_with(struct event_base *base, long n, char (**keys)[32])
{
    ld_store *st = ld_memory_store_new(base);
    json_t *data = make_data(n);
    ld_future *f = ld_store_init(st, data);
    ld_future_wait(f);
    ld_future_unref(f);
    json_decref(data);
    *keys = malloc((size_t)n * sizeof(**keys));
    if (!*keys)
        exit(1);
    for (long i = 0; i < n; i++)
        flag_key((*keys)[i], sizeof((*keys)[i]), i);
    return st;
}

static unsigned long rng = 88172645463325252UL;

/* A random index below n (n < 2^32): xorshift64, then the high half of the
 * 32x32 product (no division on the path to the key). */
static long next_index(long n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (long)(((rng >> 32) * (unsigned long)n) >> 32);
}

static double bench_store_init(struct event_base *base, long ops)
{
    ld_store *st = ld_memory_store_new(base);
    json_t *data = make_data(FLAGS);
    double t0 = now_ns();
    for (long i = 0; i < ops; i++) {
        ld_future *f = ld_store_init(st, data);
        ld_future_wait(f);
        ld_future_unref(f);
    }
    double ns = (now_ns() - t0) / (double)ops;
    json_decref(data);
    ld_store_free(st);
    return ns;
}

struct getter {
    ld_store *st;
    char (*keys)[32];
    long left;
};

static void get_next(ld_future *f, void *arg)
{
    struct getter *g = arg;
    (void)f;
    done_count++;
    if (--g->left <= 0)
        return;
    ld_future_on_complete(ld_store_get(g->st, ld_kind_features(), g->keys[next_index(FLAGS)]),
                          get_next, g);
}

/* Each get issued from the callback of the previous one. */
static double bench_store_get(struct event_base *base, long ops)
{
    char(*keys)[32];
    struct getter g = {store_with(base, FLAGS, &keys), NULL, ops};
    g.keys = keys;
    done_count = 0;
    double t0 = now_ns();
    ld_future_on_complete(ld_store_get(g.st, ld_kind_features(), keys[0]), get_next, &g);
    run_until(base, ops);
    double ns = (now_ns() - t0) / (double)ops;
    ld_store_free(g.st);
    free(keys);
    return ns;
}

/* 1,000 gets issued, then the loop runs their callbacks. */
static double bench_store_get_batched(struct event_base *base, long ops)
{
    enum { BATCH = 1000 };
    char(*keys)[32];
    ld_store *st = store_with(base, FLAGS, &keys);
    done_count = 0;
    double t0 = now_ns();
    for (long done = 0; done < ops; done += BATCH) {
        for (int i = 0; i < BATCH; i++)
            ld_future_on_complete(ld_store_get(st, ld_kind_features(), keys[next_index(FLAGS)]),
                                  count_cb, NULL);
        run_until(base, done + BATCH);
    }
    double ns = (now_ns() - t0) / (double)ops;
    ld_store_free(st);
    free(keys);
    return ns;
}

/* The same lookups in a jansson object of the same items, no futures. */
static double bench_store_get_raw(struct event_base *base, long ops)
{
    (void)base;
    json_t *data = make_data(FLAGS);
    json_t *features = json_object_get(data, "features");
    char key[32];
    char(*keys)[32] = malloc(FLAGS * sizeof(*keys));
    if (!keys)
        exit(1);
    for (long i = 0; i < FLAGS; i++)
        flag_key(keys[i], sizeof(keys[i]), i);
    long found = 0;
    double t0 = now_ns();
    for (long i = 0; i < ops; i++)
        found += json_object_get(features, keys[next_index(FLAGS)]) != NULL;
    double ns = (now_ns() - t0) / (double)ops;
    if (found != ops)
        exit(1);
    (void)key;
    free(keys);
    json_decref(data);
    return ns;
}

/* References to the items a store of n flags holds (see store_writes). */
static json_t **hold_items(ld_store *st, long n, char (*keys)[32])
{
    json_t **current = calloc((size_t)n, sizeof(*current));
    if (!current)
        exit(1);
    for (long i = 0; i < n; i++) {
        ld_future *f = ld_store_get(st, ld_kind_features(), keys[i]);
        ld_future_wait(f);
        current[i] = json_incref(ld_future_json(f));
        ld_future_unref(f);
    }
    return current;
}

static void release_items(json_t **current, long n)
{
    for (long i = 0; i < n; i++)
        json_decref(current[i]);
    free(current);
}

/* Upserts (or deletes) of random keys with ever higher versions, in a store
 * of n flags, 100 distinct keys per batch (so every write applies). The
 * items of a batch are made just before the clock starts (as a data source
 * parses an item just before it writes it: 100 flags fit in the cache, as
 * one would). The clock covers the writes and the loop pass after them (in
 * which the memory store lets go of the items it replaced). The bench keeps
 * a reference to every item the store holds, so the items a write replaces
 * are freed after the clock stops: freeing a flag's JSON takes about a
 * microsecond by itself, and is the caller's data, not the store. A
 * deleted key gets a new item after the clock stops, so that every delete
 * replaces an item (most would replace a tombstone otherwise). With
 * `held`, that many get results are held meanwhile, one of them replaced by
 * a new one before every batch, on the clock: the items replaced while a
 * result is held are freed by the store after the bench let go of them,
 * on the clock, one way or another (~1-6 us each, in this bench's heap). */
static double store_writes(struct event_base *base, long ops, long n, int del, int held)
{
    char(*keys)[32];
    ld_store *st = store_with(base, n, &keys);
    enum { BATCH = 100 };
    json_t *items[BATCH];
    json_t **current = hold_items(st, n, keys); /* what the store holds */
    long *idx = malloc(BATCH * sizeof(*idx));
    unsigned char *taken = calloc((size_t)n, 1);
    ld_future **gets = calloc((size_t)held + 1, sizeof(*gets));
    if (!idx || !taken || !gets)
        exit(1);
    for (int h = 0; h < held; h++)
        gets[h] = ld_store_get(st, ld_kind_features(), keys[next_index(n)]);
    double total = 0;
    for (long done = 0, version = 2; done < ops; done += BATCH, version++) {
        for (int i = 0; i < BATCH; i++) {
            do
                idx[i] = next_index(n);
            while (taken[idx[i]]);
            taken[idx[i]] = 1;
            items[i] = del ? NULL : make_feature(keys[idx[i]], version);
        }
        double t0 = now_ns();
        if (held) { /* the oldest result goes, a new one comes */
            long h = (done / BATCH) % held;
            ld_future_unref(gets[h]);
            gets[h] = ld_store_get(st, ld_kind_features(), keys[(version * 37) % n]);
        }
        for (int i = 0; i < BATCH; i++) {
            ld_future *f = del ? ld_store_delete(st, ld_kind_features(), keys[idx[i]], version)
                               : ld_store_upsert(st, ld_kind_features(), items[i]);
            ld_future_unref(f);
        }
        event_base_loop(base, EVLOOP_NONBLOCK); /* what the store does later */
        total += now_ns() - t0;
        for (int i = 0; i < BATCH; i++) {
            taken[idx[i]] = 0;
            json_decref(current[idx[i]]);
            current[idx[i]] = items[i]; /* our reference moves there */
            if (del) {                  /* the key comes back, so later deletes find an item */
                current[idx[i]] = make_feature(keys[idx[i]], version + 1);
                ld_future_unref(ld_store_upsert(st, ld_kind_features(), current[idx[i]]));
            }
        }
        version += del; /* the restored items' version */
    }
    for (int h = 0; h < held; h++)
        ld_future_unref(gets[h]);
    free(gets);
    release_items(current, n);
    free(idx);
    free(taken);
    ld_store_free(st);
    free(keys);
    return total / (double)ops;
}

static double bench_store_upsert(struct event_base *base, long ops)
{
    return store_writes(base, ops, FLAGS, 0, 0);
}

static double bench_store_upsert_1k(struct event_base *base, long ops)
{
    return store_writes(base, ops, 1000, 0, 0);
}

static double bench_store_upsert_100k(struct event_base *base, long ops)
{
    return store_writes(base, ops, 100000, 0, 0);
}

static double bench_store_upsert_held(struct event_base *base, long ops)
{
    return store_writes(base, ops, FLAGS, 0, 16);
}

/* jansson's live bytes, counted by an allocator around malloc's. */
static long json_live_bytes;

static void *json_count_malloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        json_live_bytes += (long)malloc_usable_size(p);
    return p;
}

static void json_count_free(void *p)
{
    json_live_bytes -= (long)malloc_usable_size(p);
    free(p);
}

/* How much jansson's live memory grows (KiB) over `ops` upserts of 1,000
 * flags while 16 get results are held: one to the end, and 15 of which one
 * is replaced by a new one every 1,000 writes (a server holding a few
 * evaluation results while its data source writes); from after the first
 * 1,000 writes to the end. The
 * loop runs after every 100 writes; the store holds the only reference to
 * the items it holds, so the figure is what the store keeps. */
static double bench_store_held_growth_kb(struct event_base *base, long ops)
{
    enum { N = 1000, HELD = 16, BATCH = 100 };
    char(*keys)[32] = malloc(N * sizeof(*keys));
    if (!keys)
        exit(1);
    json_set_alloc_funcs(json_count_malloc, json_count_free);
    ld_store *st = ld_memory_store_new(base);
    ld_future *held[HELD];
    long first = 0;
    for (long w = 0; w < N + ops; w++) {
        long k = w % N;
        if (w < N)
            flag_key(keys[k], sizeof(keys[k]), k);
        json_t *item = make_feature(keys[k], 1 + w / N);
        ld_future_unref(ld_store_upsert(st, ld_kind_features(), item));
        json_decref(item);
        if (w % BATCH == BATCH - 1)
            event_base_loop(base, EVLOOP_NONBLOCK);
        if (w == N - 1) {
            for (int h = 0; h < HELD; h++)
                held[h] = ld_store_get(st, ld_kind_features(), keys[h * 61 % N]);
            event_base_loop(base, EVLOOP_NONBLOCK);
            first = json_live_bytes;
        } else if (w % N == N - 1) { /* held[0] stays to the end */
            long h = 1 + (w / N) % (HELD - 1);
            ld_future_unref(held[h]);
            held[h] = ld_store_get(st, ld_kind_features(), keys[next_index(N)]);
        }
    }
    event_base_loop(base, EVLOOP_NONBLOCK);
    long growth = json_live_bytes - first;
    for (int h = 0; h < HELD; h++)
        ld_future_unref(held[h]);
    ld_store_free(st);
    json_set_alloc_funcs(malloc, free);
    free(keys);
    return (double)growth / 1024.0;
}

static double bench_store_delete(struct event_base *base, long ops)
{
    return store_writes(base, ops, FLAGS, 1, 0);
}

/* all, then one upsert; `hold`: the caller keeps each result until after
 * the next write (so the store cannot write into it), else releases it
 * first. As in store_writes, the loop pass after every 100 operations is
 * timed, and the items a write replaces are freed off the clock. */
static double store_all(struct event_base *base, long ops, int hold)
{
    enum { PASS = 100 };
    char(*keys)[32];
    ld_store *st = store_with(base, FLAGS, &keys);
    json_t **current = hold_items(st, FLAGS, keys);
    json_t *replaced[PASS];
    int nreplaced = 0;
    ld_future *held = NULL;
    double total = 0;
    for (long i = 0; i < ops; i++) {
        long k = next_index(FLAGS);
        json_t *item = make_feature(keys[k], 2 + i);
        double t0 = now_ns();
        ld_future *f = ld_store_all(st, ld_kind_features());
        if (hold) {
            ld_future_unref(held); /* the reader lets go of the previous one */
            held = f;
        } else {
            ld_future_unref(f);
        }
        ld_future_unref(ld_store_upsert(st, ld_kind_features(), item));
        if (i % PASS == PASS - 1)
            event_base_loop(base, EVLOOP_NONBLOCK);
        total += now_ns() - t0;
        replaced[nreplaced++] = current[k];
        current[k] = item;
        if (i % PASS == PASS - 1) {
            while (nreplaced > 0)
                json_decref(replaced[--nreplaced]);
        }
    }
    if (nreplaced > 0) { /* the last pass, when ops is not a multiple of PASS */
        double t0 = now_ns();
        event_base_loop(base, EVLOOP_NONBLOCK);
        total += now_ns() - t0;
    }
    while (nreplaced > 0)
        json_decref(replaced[--nreplaced]);
    ld_future_unref(held);
    release_items(current, FLAGS);
    ld_store_free(st);
    free(keys);
    return total / (double)ops;
}

static double bench_store_all(struct event_base *base, long ops)
{
    return store_all(base, ops, 0);
}

static double bench_store_all_held(struct event_base *base, long ops)
{
    return store_all(base, ops, 1);
}

/* Memory of a memory store per item, beyond the item JSON (bytes). */
static double bench_store_item_bytes(struct event_base *base, long ops)
{
    json_t *data = make_data(ops);
    ld_store *st = ld_memory_store_new(base);
    long before = rss_kb();
    ld_future *f = ld_store_init(st, data);
    ld_future_wait(f);
    ld_future_unref(f);
    long after = rss_kb();
    ld_store_free(st);
    json_decref(data);
    return (double)(after - before) * 1024.0 / (double)ops;
}

/* ---- what a user pays: items parsed from JSON text, held by the store ---- */

/* JSON text of a flag (feature_text) or of {"features": {n flags},
 * "segments": {}} (data_text), as a data source receives it: new strings. */
static char *dump(json_t *json)
{
    char *text = json_dumps(json, JSON_COMPACT);
    json_decref(json);
    if (!text)
        exit(1);
    return text;
}

static char *feature_text(const char *key, long version)
{
    return dump(make_feature(key, version));
}

static char *data_text(long n)
{
    return dump(make_data(n));
}

static json_t *parse_text(const char *text)
{
    json_t *json = json_loads(text, 0, NULL);
    if (!json)
        exit(1);
    return json;
}

/* Waits for f (checked: fulfilled) and releases it. */
static void wait_ok(ld_future *f, const char *what)
{
    ld_future_wait(f);
    if (!ld_future_is_fulfilled(f)) {
        fprintf(stderr, "%s failed\n", what);
        exit(1);
    }
    ld_future_unref(f);
}

/* A memory store holding n flags parsed from their JSON text (as a data
 * source fills one), and their keys; the store holds the only reference to
 * each item. */
static ld_store *store_parsed(struct event_base *base, long n, char (**keys)[32])
{
    char *text = data_text(n);
    ld_store *st = ld_memory_store_new(base);
    json_t *data = parse_text(text);
    wait_ok(ld_store_init(st, data), "init");
    json_decref(data);
    free(text);
    drain(base);
    *keys = malloc((size_t)n * sizeof(**keys));
    if (!*keys)
        exit(1);
    for (long i = 0; i < n; i++)
        flag_key((*keys)[i], sizeof((*keys)[i]), i);
    return st;
}

/* Counts completed writes that applied (a write's result is a bool). */
static long applied_count;

static void applied_cb(ld_future *f, void *arg)
{
    (void)arg;
    done_count++;
    applied_count += ld_future_is_fulfilled(f) && ld_future_bool(f);
}

/* Writes as a data source makes them, in a store of FLAGS flags filled
 * from their JSON text, that holds the only reference to every item it
 * holds (the bench drops its own right after each call): upserts (or
 * deletes) of random keys with ever higher versions, 100 distinct keys per
 * batch, so every write applies and replaces a flag. On the clock: the
 * writes, the release of the bench's reference to each new item, waiting
 * for every result (a callback reads it: applied, checked), and the loop
 * pass in which the store lets go of the items the writes replaced, so
 * their freeing (the store held the last reference) is inside. The JSON
 * text of a batch's items is made just before the clock, and the items
 * parsed from it (json_loads) just before the clock too, or, with
 * `parsed`, on the clock, as a data source parses an item and writes it. A
 * deleted key gets a new item after the clock (the loop runs for it off
 * the clock too), so that every delete replaces an item. */
static double store_writes_owned(struct event_base *base, long ops, int del, int parsed)
{
    enum { BATCH = 100 };
    char(*keys)[32];
    ld_store *st = store_parsed(base, FLAGS, &keys);
    json_t *items[BATCH];
    char *texts[BATCH];
    long idx[BATCH];
    unsigned char *taken = calloc(FLAGS, 1);
    if (!taken)
        exit(1);
    double total = 0;
    for (long done = 0, version = 2; done < ops; done += BATCH, version++) {
        for (int i = 0; i < BATCH; i++) {
            do
                idx[i] = next_index(FLAGS);
            while (taken[idx[i]]);
            taken[idx[i]] = 1;
            texts[i] = del ? NULL : feature_text(keys[idx[i]], version);
            items[i] = del || parsed ? NULL : parse_text(texts[i]);
        }
        done_count = applied_count = 0;
        double t0 = now_ns();
        for (int i = 0; i < BATCH; i++) {
            ld_future *f;
            if (del) {
                f = ld_store_delete(st, ld_kind_features(), keys[idx[i]], version);
            } else {
                json_t *item = parsed ? parse_text(texts[i]) : items[i];
                f = ld_store_upsert(st, ld_kind_features(), item);
                json_decref(item); /* the store's is the only reference now */
            }
            ld_future_on_complete(f, applied_cb, NULL);
        }
        run_until(base, BATCH);
        total += now_ns() - t0;
        if (applied_count != BATCH) {
            fprintf(stderr, "store_writes_owned: %ld of %d applied\n", applied_count, BATCH);
            exit(1);
        }
        done_count = 0;
        for (int i = 0; i < BATCH; i++) {
            taken[idx[i]] = 0;
            free(texts[i]);
            if (del) { /* the key comes back, so later deletes find an item */
                char *text = feature_text(keys[idx[i]], version + 1);
                json_t *item = parse_text(text);
                ld_future_on_complete(ld_store_upsert(st, ld_kind_features(), item), count_cb,
                                      NULL);
                json_decref(item);
                free(text);
            }
        }
        if (del)
            run_until(base, BATCH);
        version += del; /* the restored items' version */
    }
    free(taken);
    ld_store_free(st);
    free(keys);
    return total / (double)ops;
}

static double bench_store_upsert_owned(struct event_base *base, long ops)
{
    return store_writes_owned(base, ops, 0, 0);
}

static double bench_store_delete_owned(struct event_base *base, long ops)
{
    return store_writes_owned(base, ops, 1, 0);
}

static double bench_store_upsert_parsed(struct event_base *base, long ops)
{
    return store_writes_owned(base, ops, 0, 1);
}

/* get, then the callback reads one field of the item ("on", as an
 * evaluation reads first), each get issued from the previous callback, in
 * a store filled from the JSON text of 10,000 flags: the get of store.get
 * plus reading the item it returns, which the get itself never touches (a
 * cold item: jansson's lookup reads the object, its bucket array and the
 * pair, each a cache miss of its own). The values read are checked. */
struct reader {
    ld_store *st;
    char (*keys)[32];
    long left, on;
};

static void read_next(ld_future *f, void *arg)
{
    struct reader *r = arg;
    done_count++;
    r->on += json_is_true(json_object_get(ld_future_json(f), "on"));
    if (--r->left <= 0)
        return;
    ld_future_on_complete(ld_store_get(r->st, ld_kind_features(), r->keys[next_index(FLAGS)]),
                          read_next, r);
}

static double bench_store_get_read(struct event_base *base, long ops)
{
    char(*keys)[32];
    struct reader r = {store_parsed(base, FLAGS, &keys), NULL, ops, 0};
    r.keys = keys;
    done_count = 0;
    double t0 = now_ns();
    ld_future_on_complete(ld_store_get(r.st, ld_kind_features(), keys[0]), read_next, &r);
    run_until(base, ops);
    double ns = (now_ns() - t0) / (double)ops;
    if (r.on != ops) {
        fprintf(stderr, "store.get.read: %ld of %ld flags on\n", r.on, ops);
        exit(1);
    }
    ld_store_free(r.st);
    free(keys);
    return ns;
}

/* init from the JSON text of 10,000 flags, as a data source's first (or
 * reconnecting) payload: on the clock, parsing the text (json_loads), the
 * init (validation and load), waiting for its result, the release of the
 * bench's reference to the parsed data (the store then holds the only
 * reference to the items) and a loop pass. Every timed init replaces the
 * 10,000 items of the one before (the store is filled before the clock),
 * and the memory store lets go of a replaced table at once, inside the
 * init, when no result it handed out may read it (none here): freeing
 * those items is on the clock too. */
static double bench_store_init_parsed(struct event_base *base, long ops)
{
    char *text = data_text(FLAGS);
    ld_store *st = ld_memory_store_new(base);
    json_t *data = parse_text(text);
    wait_ok(ld_store_init(st, data), "init");
    json_decref(data);
    drain(base);
    double t0 = now_ns();
    for (long i = 0; i < ops; i++) {
        data = parse_text(text);
        wait_ok(ld_store_init(st, data), "init");
        json_decref(data);
        event_base_loop(base, EVLOOP_NONBLOCK);
    }
    double ns = (now_ns() - t0) / (double)ops;
    ld_store_free(st);
    free(text);
    return ns;
}

/* The first all after an init of 10,000 flags, which builds the snapshot
 * (later ones reuse it: store.all): on the clock, the all, waiting for its
 * result, reading its size (checked) and releasing it. The init (of the
 * same data, parsed from its text once) and the loop pass after it are off
 * the clock. */
static double bench_store_all_cold(struct event_base *base, long ops)
{
    ld_store *st = ld_memory_store_new(base);
    char *text = data_text(FLAGS);
    json_t *data = parse_text(text);
    free(text);
    double total = 0;
    for (long i = 0; i < ops; i++) {
        wait_ok(ld_store_init(st, data), "init");
        drain(base);
        double t0 = now_ns();
        ld_future *f = ld_store_all(st, ld_kind_features());
        ld_future_wait(f);
        size_t n = json_object_size(ld_future_json(f));
        ld_future_unref(f);
        total += now_ns() - t0;
        if (n != FLAGS) {
            fprintf(stderr, "store.all.cold: %zu flags\n", n);
            exit(1);
        }
    }
    json_decref(data);
    ld_store_free(st);
    return total / (double)ops;
}

/* malloc's bytes in use: the arenas' (chunk headers and padding included)
 * and the chunks it maps by themselves (large ones: the store's table). */
static long heap_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    return (long)(mi.uordblks + mi.hblkhd);
#else
    return -1;
#endif
}

/* The whole heap a store of `ops` flags holds, per flag (bytes): the
 * growth of malloc's bytes in use from before parsing the JSON text of
 * the flags to after the store holds them and the bench let go of the
 * parsed data (the store then holds the only reference to each item):
 * the items as jansson parsed them, the store's table and whatever else
 * it keeps; not the text. Run once, in the workload's own process (a
 * fresh heap); -1 without glibc's mallinfo2(), 0 under ASan (whose
 * allocator mallinfo2() does not see). */
static double bench_store_bytes_per_flag(struct event_base *base, long ops)
{
    char *text = data_text(ops);
    ld_store *st = ld_memory_store_new(base);
    drain(base);
    long before = heap_in_use();
    json_t *data = parse_text(text);
    wait_ok(ld_store_init(st, data), "init");
    json_decref(data);
    drain(base);
    long after = heap_in_use();
    ld_store_free(st);
    free(text);
    if (before < 0)
        return -1;
    return (double)(after - before) / (double)ops;
}

/* ---- eval workloads ------------------------------------------------------- */

/* The data of the eval group, parsed from its JSON text as a data source
 * gets it: FLAGS boolean flags that are on with no rules ("flag-000000",
 * ...); "rich": 50 individual targets, three rules of two clauses each and
 * a percentage rollout as fallthrough; "seg": a rule matching through
 * segment "seg1" of 1,000 included keys ("member-0" ...). */
static char *eval_data_text(void)
{
    json_t *features = json_object(), *targets = json_array(), *included = json_array();
    char key[32];
    for (long i = 0; i < FLAGS; i++) {
        flag_key(key, sizeof(key), i);
        json_object_set_new(features, key,
                            json_pack("{s:s, s:i, s:b, s:[b,b], s:i, s:{s:i}, s:s}", "key", key,
                                      "version", (int)(i % 997) + 1, "on", 1, "variations", 1, 0,
                                      "offVariation", 1, "fallthrough", "variation", 0, "salt",
                                      "abc"));
    }
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "target-%d", i);
        json_array_append_new(targets, json_string(key));
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "member-%d", i);
        json_array_append_new(included, json_string(key));
    }
    json_object_set_new(
        features, "rich",
        json_pack("{s:s, s:i, s:b, s:[s,s,s], s:i, s:[{s:o, s:i}], s:["
                  "{s:s, s:[{s:s, s:s, s:[s,s,s]}, {s:s, s:s, s:[s]}], s:i},"
                  "{s:s, s:[{s:s, s:s, s:[i]}, {s:s, s:s, s:[s]}], s:i},"
                  "{s:s, s:[{s:s, s:s, s:[b]}, {s:s, s:s, s:[s]}], s:i}],"
                  "s:{s:{s:[{s:i, s:i}, {s:i, s:i}, {s:i, s:i}]}}, s:s}",
                  "key", "rich", "version", 1, "on", 1, "variations", "a", "b", "c", "offVariation",
                  0, "targets", "values", targets, "variation", 2, "rules", "id", "r1", "clauses",
                  "attribute", "country", "op", "in", "values", "fr", "de", "it", "attribute",
                  "email", "op", "endsWith", "values", "@example.com", "variation", 0, "id", "r2",
                  "clauses", "attribute", "age", "op", "greaterThan", "values", 65, "attribute",
                  "version", "op", "semVerGreaterThan", "values", "2.0.0", "variation", 1, "id",
                  "r3", "clauses", "attribute", "beta", "op", "in", "values", 1, "attribute",
                  "email", "op", "endsWith", "values", "@corp.com", "variation", 2, "fallthrough",
                  "rollout", "variations", "variation", 0, "weight", 30000, "variation", 1,
                  "weight", 30000, "variation", 2, "weight", 40000, "salt", "rich-salt"));
    json_object_set_new(features, "seg",
                        json_pack("{s:s, s:i, s:b, s:[b,b], s:i, s:[{s:s, s:[{s:s, s:s, s:[s]}],"
                                  " s:i}], s:{s:i}, s:s}",
                                  "key", "seg", "version", 1, "on", 1, "variations", 1, 0,
                                  "offVariation", 1, "rules", "id", "in-seg", "clauses",
                                  "attribute", "", "op", "segmentMatch", "values", "seg1",
                                  "variation", 0, "fallthrough", "variation", 1, "salt", "x"));
    json_t *segments = json_pack("{s:{s:s, s:i, s:o, s:s}}", "seg1", "key", "seg1", "version", 1,
                                 "included", included, "salt", "y");
    return dump(json_pack("{s:o, s:o}", "features", features, "segments", segments));
}

static ld_store *eval_store(struct event_base *base)
{
    char *text = eval_data_text();
    ld_store *st = ld_memory_store_new(base);
    json_t *data = parse_text(text);
    wait_ok(ld_store_init(st, data), "init");
    json_decref(data);
    free(text);
    drain(base);
    return st;
}

/* The context of the eval workloads, built once as a server builds one
 * from a request: a user that matches no rule of "rich". */
static ld_context *eval_context(const char *key)
{
    ld_context_builder *b = ld_context_builder_new("user", key);
    ld_context_builder_set(b, "email", json_string("someone@example.org"));
    ld_context_builder_set(b, "country", json_string("us"));
    ld_context_builder_set(b, "age", json_integer(30));
    ld_context_builder_set(b, "version", json_string("1.4.2"));
    ld_context_builder_set(b, "beta", json_false());
    ld_context *ctx = ld_context_builder_build(b, NULL);
    ld_context_builder_free(b);
    if (!ctx)
        exit(1);
    return ctx;
}

struct evaluator_run {
    ld_evaluator *ev;
    ld_context *ctx;
    const char *flag; /* or NULL: random flags of the FLAGS */
    char (*keys)[32];
    json_t *expect; /* the value every evaluation must serve */
    long left, wrong;
};

static void eval_next(ld_future *f, void *arg)
{
    struct evaluator_run *r = arg;
    done_count++;
    if (!json_equal(ld_detail_value(ld_future_ptr(f)), r->expect))
        r->wrong++;
    if (--r->left <= 0)
        return;
    const char *key = r->flag ? r->flag : r->keys[next_index(FLAGS)];
    ld_future_on_complete(ld_evaluator_detail(r->ev, key, r->ctx, LD_VALUE_ANY, NULL), eval_next,
                          r);
}

/* Evaluations of `flag` for `ctx_key`, each issued from the callback of the
 * previous one, which reads its value (checked against `expect`). On the
 * clock: the evaluation, its future and detail, the callback, the release. */
static double eval_sequential(struct event_base *base, long ops, const char *flag,
                              const char *ctx_key, json_t *expect)
{
    ld_store *st = eval_store(base);
    struct evaluator_run r = {
        ld_evaluator_new(st), eval_context(ctx_key), flag, NULL, expect, ops, 0};
    if (!flag) {
        r.keys = malloc(FLAGS * sizeof(*r.keys));
        if (!r.keys)
            exit(1);
        for (long i = 0; i < FLAGS; i++)
            flag_key(r.keys[i], sizeof(r.keys[i]), i);
    }
    done_count = 0;
    double t0 = now_ns();
    ld_future_on_complete(
        ld_evaluator_detail(r.ev, flag ? flag : r.keys[0], r.ctx, LD_VALUE_ANY, NULL), eval_next,
        &r);
    run_until(base, ops);
    double ns = (now_ns() - t0) / (double)ops;
    if (r.wrong) {
        fprintf(stderr, "eval: %ld of %ld evaluations served another value\n", r.wrong, ops);
        exit(1);
    }
    ld_evaluator_free(r.ev);
    ld_context_unref(r.ctx);
    ld_store_free(st);
    drain(base);
    free(r.keys);
    json_decref(expect);
    return ns;
}

static double bench_eval_bool(struct event_base *base, long ops)
{
    return eval_sequential(base, ops, "flag-000042", "user-1", json_true());
}

static double bench_eval_bool_random(struct event_base *base, long ops)
{
    return eval_sequential(base, ops, NULL, "user-1", json_true());
}

/* "user-1" buckets into the third variation of the rollout. */
static double bench_eval_rich(struct event_base *base, long ops)
{
    return eval_sequential(base, ops, "rich", "user-1", json_string("c"));
}

static double bench_eval_segment(struct event_base *base, long ops)
{
    return eval_sequential(base, ops, "seg", "member-500", json_true());
}

/* `matches` on the attribute "name": one flag "re" whose rule serves true
 * when `pattern` matches; each op evaluates it for a user whose name is
 * `len` characters (blocks of `block` x's closed by a 'z'; "zxy" last) and
 * checks that the rule answered `want`. */
static double eval_matches(struct event_base *base, long ops, const char *pattern, size_t len,
                           size_t block, bool want)
{
    json_t *data =
        json_pack("{s:{s:{s:s,s:i,s:b,s:[b,b],s:{s:i},s:[{s:s,s:[{s:s,s:s,s:[s]}],"
                  "s:i}]}},s:{}}",
                  "features", "re", "key", "re", "version", 1, "on", 1, "variations", 0, 1,
                  "fallthrough", "variation", 0, "rules", "id", "r", "clauses", "attribute", "name",
                  "op", "matches", "values", pattern, "variation", 1, "segments");
    ld_store *st = ld_memory_store_new(base);
    if (!data || !st)
        exit(1);
    wait_ok(ld_store_init(st, data), "init");
    json_decref(data);
    char *name = malloc(len + 1);
    if (!name)
        exit(1);
    for (size_t i = 0; i < len; i++)
        name[i] = i % (block + 1) == block ? 'z' : 'x';
    memcpy(name + len - 3, "zxy", 3);
    name[len] = '\0';
    ld_context_builder *b = ld_context_builder_new("user", "u");
    ld_context_builder_set(b, "name", json_string(name));
    ld_context *ctx = ld_context_builder_build(b, NULL);
    ld_context_builder_free(b);
    free(name);
    ld_evaluator *ev = ld_evaluator_new(st);
    if (!ctx || !ev)
        exit(1);
    double t0 = 0;
    for (long i = -1; i < ops; i++) { /* the first, which compiles, off the clock */
        if (i == 0)
            t0 = now_ns();
        ld_future *f = ld_evaluator_detail(ev, "re", ctx, LD_VALUE_BOOL, json_false());
        ld_future_wait(f);
        if (!ld_future_is_fulfilled(f) ||
            ld_detail_variation_index(ld_future_ptr(f)) != (want ? 1 : 0)) {
            fprintf(stderr, "eval.matches: wrong answer\n");
            exit(1);
        }
        ld_future_unref(f);
    }
    double ns = (now_ns() - t0) / (double)ops;
    ld_evaluator_free(ev);
    ld_context_unref(ctx);
    ld_store_free(st);
    drain(base);
    return ns;
}

/* A subject of 40 characters, as user attributes are: the cost of an
 * ordinary unanchored match. */
static double bench_eval_matches(struct event_base *base, long ops)
{
    return eval_matches(base, ops, "x{3}z(?:xy|xz)", 40, 3, true);
}

/* "(x+x+)+y" tried at each of 100,000 start positions, backtracking at
 * each (blocks of 14 x's): stopped by the budget of the positions (1.3 s
 * a match when each position had the whole match limit). */
static double bench_eval_matches_runaway(struct event_base *base, long ops)
{
    return eval_matches(base, ops, "(x+x+)+y", 100000, 14, false);
}

/* One all-flags state of the FLAGS + 2 flags for `ctx`: made, awaited,
 * checked and released. */
static void all_flags_once(ld_evaluator *ev, ld_context *ctx)
{
    ld_future *f = ld_evaluator_all_flags(ev, ctx, 0);
    ld_future_wait(f);
    if (json_object_size(ld_future_json(f)) != FLAGS + 4) {
        fprintf(stderr, "eval.all_flags: wrong state\n");
        exit(1);
    }
    ld_future_unref(f);
}

/* The all-flags state of the FLAGS + 2 flags for one context, as a server
 * makes it per request; on the clock: the evaluation, its JSON, waiting for
 * its future, releasing it. The first state after the data arrived, which
 * also compiles every flag, is off the clock: eval.all_flags.first times
 * it. */
static double bench_eval_all_flags(struct event_base *base, long ops)
{
    ld_store *st = eval_store(base);
    ld_evaluator *ev = ld_evaluator_new(st);
    ld_context *ctx = eval_context("user-1");
    all_flags_once(ev, ctx);
    double t0 = now_ns();
    for (long i = 0; i < ops; i++)
        all_flags_once(ev, ctx);
    double ns = (now_ns() - t0) / (double)ops;
    ld_evaluator_free(ev);
    ld_context_unref(ctx);
    ld_store_free(st);
    drain(base);
    return ns;
}

/* The first all-flags state of a new evaluator on the store of the eval
 * data: it compiles the FLAGS + 2 flags it walks. Per op: an evaluator
 * made, its first state, the evaluator freed. */
static double bench_eval_all_flags_first(struct event_base *base, long ops)
{
    ld_store *st = eval_store(base);
    ld_context *ctx = eval_context("user-1");
    double total = 0;
    for (long i = 0; i < ops; i++) {
        double t0 = now_ns();
        ld_evaluator *ev = ld_evaluator_new(st);
        all_flags_once(ev, ctx);
        ld_evaluator_free(ev);
        total += now_ns() - t0;
    }
    double ns = total / (double)ops;
    ld_context_unref(ctx);
    ld_store_free(st);
    drain(base);
    return ns;
}

/* ---- contexts of many kinds ---------------------------------------------- */

/* FLAGS client-side flags as a server at the README's scale holds them, each
 * reading the context per clause: 10 "user" targets, a rule on the user's
 * email and the key of an "org", a rule on the kind "device", and a
 * percentage rollout by the user's key as fallthrough. */
static ld_store *kinds_store(struct event_base *base)
{
    json_t *features = json_object();
    char key[32];
    for (long i = 0; i < FLAGS; i++) {
        json_t *targets = json_array();
        for (int t = 0; t < 10; t++) {
            char tk[32];
            snprintf(tk, sizeof tk, "target-%ld-%d", i, t);
            json_array_append_new(targets, json_string(tk));
        }
        flag_key(key, sizeof(key), i);
        json_object_set_new(
            features, key,
            json_pack(
                "{s:s, s:i, s:b, s:[s,s,s], s:i, s:b, s:[{s:s, s:o, s:i}], s:["
                "{s:s, s:[{s:s, s:s, s:s, s:[s]}, {s:s, s:s, s:s, s:[s]}], s:i},"
                "{s:s, s:[{s:s, s:s, s:[s]}], s:i}],"
                "s:{s:{s:[{s:i, s:i}, {s:i, s:i}, {s:i, s:i}], s:s}}, s:s}",
                "key", key, "version", 1, "on", 1, "variations", "a", "b", "c", "offVariation", 0,
                "clientSide", 1, "contextTargets", "contextKind", "user", "values", targets,
                "variation", 0, "rules", "id", "r1", "clauses", "contextKind", "user", "attribute",
                "email", "op", "endsWith", "values", "@corp.com", "contextKind", "org", "attribute",
                "key", "op", "in", "values", "org-1", "variation", 1, "id", "r2", "clauses",
                "attribute", "kind", "op", "in", "values", "device", "variation", 1, "fallthrough",
                "rollout", "variations", "variation", 0, "weight", 30000, "variation", 1, "weight",
                30000, "variation", 2, "weight", 40000, "bucketBy", "key", "salt", "kinds-salt"));
    }
    char *text = dump(json_pack("{s:o, s:{}}", "features", features, "segments"));
    ld_store *st = ld_memory_store_new(base);
    json_t *data = parse_text(text);
    wait_ok(ld_store_init(st, data), "init");
    json_decref(data);
    free(text);
    drain(base);
    return st;
}

/* A context of `n` kinds, parsed from JSON as a server gets it: the user of
 * eval_context(), alone (n = 1) or with n - 1 kinds "k0000" ... (none of
 * them "org" or "device", so that both contexts get the same values). */
static ld_context *kinds_context(int n)
{
    json_t *user = json_pack("{s:s, s:s, s:s}", "kind", "user", "key", "user-1", "email",
                             "someone@example.org");
    json_t *j = user;
    if (n > 1) {
        json_object_del(user, "kind");
        j = json_pack("{s:s, s:o}", "kind", "multi", "user", user);
        for (int i = 1; i < n; i++) {
            char kind[32], key[32];
            snprintf(kind, sizeof kind, "k%04d", i - 1);
            snprintf(key, sizeof key, "key-%d", i);
            json_object_set_new(j, kind, json_pack("{s:s, s:i}", "key", key, "n", i));
        }
    }
    ld_context *ctx = ld_context_from_json(j, NULL);
    json_decref(j);
    if (!ctx || ld_context_kind_count(ctx) != (size_t)n)
        exit(1);
    return ctx;
}

/* The all-flags state (client-side, with reasons, as evalx asks) of the
 * kinds_store() flags for a context of `nkinds` kinds; per op: one state
 * made, awaited, checked and released. The first state (the compile) is off
 * the clock. */
static double all_flags_kinds(struct event_base *base, long ops, int nkinds)
{
    ld_store *st = kinds_store(base);
    ld_evaluator *ev = ld_evaluator_new(st);
    ld_context *ctx = kinds_context(nkinds);
    unsigned opts = LD_ALL_FLAGS_CLIENT_SIDE_ONLY | LD_ALL_FLAGS_WITH_REASONS;
    double t0 = 0;
    for (long i = -1; i < ops; i++) {
        if (i == 0)
            t0 = now_ns();
        ld_future *f = ld_evaluator_all_flags(ev, ctx, opts);
        ld_future_wait(f);
        if (json_object_size(ld_future_json(f)) != FLAGS + 2) {
            fprintf(stderr, "eval.all_flags.kinds: wrong state\n");
            exit(1);
        }
        ld_future_unref(f);
    }
    double ns = (now_ns() - t0) / (double)ops;
    ld_evaluator_free(ev);
    ld_context_unref(ctx);
    ld_store_free(st);
    drain(base);
    return ns;
}

static double bench_eval_all_flags_kinds_1(struct event_base *base, long ops)
{
    return all_flags_kinds(base, ops, 1);
}

static double bench_eval_all_flags_kinds_3001(struct event_base *base, long ops)
{
    return all_flags_kinds(base, ops, 3001);
}

/* Allocations through ldasync's allocator hook (ld_set_alloc_funcs). */
static long hook_allocs;

static void *count_malloc(size_t n)
{
    hook_allocs++;
    return malloc(n);
}

static void *count_realloc(void *p, size_t n)
{
    hook_allocs++;
    return realloc(p, n);
}

/* The hook's allocations per evaluation of `flag` (figure: allocations,
 * not ns), after a warm-up that compiled it. */
static double eval_allocs(struct event_base *base, long ops, const char *flag, json_t *expect)
{
    ld_store *st = eval_store(base);
    ld_evaluator *ev = ld_evaluator_new(st);
    ld_context *ctx = eval_context("user-1");
    wait_ok(ld_evaluator_detail(ev, flag, ctx, LD_VALUE_ANY, NULL), "eval");
    drain(base);
    ld_set_alloc_funcs(count_malloc, count_realloc, free);
    hook_allocs = 0;
    for (long i = 0; i < ops; i++) {
        ld_future *f = ld_evaluator_detail(ev, flag, ctx, LD_VALUE_ANY, NULL);
        ld_future_wait(f);
        if (!json_equal(ld_detail_value(ld_future_ptr(f)), expect))
            exit(1);
        ld_future_unref(f);
    }
    drain(base);
    double per = (double)hook_allocs / (double)ops;
    ld_set_alloc_funcs(malloc, realloc, free);
    ld_evaluator_free(ev);
    ld_context_unref(ctx);
    ld_store_free(st);
    drain(base);
    json_decref(expect);
    return per;
}

static double bench_eval_allocs_bool(struct event_base *base, long ops)
{
    return eval_allocs(base, ops, "flag-000042", json_true());
}

static double bench_eval_allocs_rich(struct event_base *base, long ops)
{
    return eval_allocs(base, ops, "rich", json_string("c"));
}

/* The compiled forms' heap per flag, once every flag was evaluated
 * (ld_evaluator_stats). */
static double bench_eval_bytes_per_flag(struct event_base *base, long ops)
{
    ld_store *st = eval_store(base);
    ld_evaluator *ev = ld_evaluator_new(st);
    ld_context *ctx = eval_context("user-1");
    char key[32];
    for (long i = 0; i < ops; i++) {
        flag_key(key, sizeof key, i % FLAGS);
        wait_ok(ld_evaluator_detail(ev, key, ctx, LD_VALUE_ANY, NULL), "eval");
    }
    struct ld_evaluator_stats stats;
    ld_evaluator_stats(ev, &stats);
    ld_evaluator_free(ev);
    ld_context_unref(ctx);
    ld_store_free(st);
    drain(base);
    return (double)stats.bytes / (double)stats.flags;
}

/* ---- file data source workloads ------------------------------------------ */

/* The eval group's data (FLAGS + 2 flags, one segment) as a LaunchDarkly
 * flag file ({"flags": ..., "segments": ...}) in a new directory: its path
 * in `path` (the directory is path's dirname). */
static void file_write_eval_data(char *path, size_t len)
{
    char dir[] = "/tmp/ldasync-bench-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(path, len, "%s/flags.json", dir);
    char *text = eval_data_text();
    json_t *data = json_loads(text, 0, NULL);
    free(text);
    json_t *file = json_pack("{s:O, s:O}", "flags", json_object_get(data, "features"), "segments",
                             json_object_get(data, "segments"));
    json_decref(data);
    if (!file || json_dump_file(file, path, JSON_COMPACT) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    json_decref(file);
}

static void file_remove(const char *path)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    unlink(path);
    rmdir(dir);
}

/* Writes a copy of the file `arg` next to it and renames it onto it. */
static void *file_rewrite(void *arg)
{
    const char *path = arg;
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%.250s.new", path);
    FILE *in = fopen(path, "rb"), *out = fopen(tmp, "wb");
    char buf[65536];
    size_t k;
    while (in && out && (k = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, k, out);
    if (!in || !out || fclose(out) != 0 || rename(tmp, path) != 0)
        exit(1);
    fclose(in);
    return NULL;
}

/* A repeating 1 ms timer on the loop that records its greatest lateness. */
static double stall_max_ns, stall_last_ns;

static void stall_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    double now = now_ns();
    if (stall_last_ns > 0 && now - stall_last_ns - 1e6 > stall_max_ns)
        stall_max_ns = now - stall_last_ns - 1e6;
    stall_last_ns = now;
}

/* The most CPU time the loop's thread spent in one pass of the loop (its
 * callbacks: work that holds the loop, whatever the scheduler does). */
static double busy_max_ns;

static double thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static ld_future *loop_until_done(struct event_base *base, ld_future *f)
{
    while (ld_future_is_pending(f)) {
        double t0 = thread_cpu_ns();
        event_base_loop(base, EVLOOP_ONCE);
        if (thread_cpu_ns() - t0 > busy_max_ns)
            busy_max_ns = thread_cpu_ns() - t0;
    }
    if (!ld_future_is_fulfilled(f)) {
        fprintf(stderr, "file: %s\n", ld_future_error_message(f));
        exit(1);
    }
    return f;
}

/* The longest loop stall, in ms, while a file initializer fetches the
 * eval group's data (10,000 flags) and a file synchronizer yields it, is
 * told of a rewrite (renamed into place) and yields it again. The results
 * are kept, as a data system keeps the items in its store, and released
 * after the measure (file.basis_free_ms says what releasing the last
 * reference to such data costs the loop); the store is not involved
 * (file.store_init_ms). */
/* A base whose timers use timerfd (EVENT_BASE_FLAG_PRECISE_TIMER): where
 * epoll_wait() sleeps in whole jiffies (4 ms here), a 1 ms timer would be
 * ~3 ms late on an idle loop. */
static struct event_base *precise_base(void)
{
    struct event_config *cfg = event_config_new();
    event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    struct event_base *base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (!base)
        exit(1);
    return base;
}

static double file_load(struct event_base *base, long ops)
{
    char path[256];
    file_write_eval_data(path, sizeof path);
    const char *paths[] = {path};
    struct event *tick = event_new(base, -1, EV_PERSIST, stall_tick, NULL);
    struct timeval ms1 = {0, 1000};
    ld_future **kept = calloc((size_t)ops * 3, sizeof(ld_future *));
    event_add(tick, &ms1);
    stall_max_ns = stall_last_ns = busy_max_ns = 0;
    for (long i = 0; i < ops; i++) {
        ld_initializer *in = ld_file_initializer_new(base, paths, 1);
        ld_future *f = loop_until_done(base, ld_initializer_fetch(in));
        if (ld_fdv2_change_set_count(ld_fdv2_basis_change_set(ld_fdv2_future_basis(f))) !=
            FLAGS + 3) {
            fprintf(stderr, "file: wrong count\n");
            exit(1);
        }
        kept[3 * i] = f;
        ld_initializer_free(in);
        ld_synchronizer *sy = ld_file_synchronizer_new(base, paths, 1, 1000);
        kept[3 * i + 1] = loop_until_done(base, ld_synchronizer_next(sy));
        /* rewritten as an editor does (a new file renamed into place), by
         * another thread: the loop is not held by the writing */
        ld_future *n = ld_synchronizer_next(sy);
        pthread_t writer;
        if (pthread_create(&writer, NULL, file_rewrite, path) != 0)
            exit(1);
        kept[3 * i + 2] = loop_until_done(base, n);
        pthread_join(writer, NULL);
        ld_future_unref(loop_until_done(base, ld_synchronizer_stop(sy)));
        ld_synchronizer_free(sy);
    }
    drain(base);
    event_free(tick);
    for (long i = 0; i < ops * 3; i++)
        ld_future_unref(kept[i]);
    free(kept);
    drain(base);
    file_remove(path);
    return stall_max_ns / 1e6;
}

static double bench_file_load_stall(struct event_base *base, long ops)
{
    (void)base;
    struct event_base *precise = precise_base();
    double ms = file_load(precise, ops);
    event_base_free(precise);
    return ms;
}

/* The same work: the most CPU time the loop's thread spent in one pass of
 * the loop, in ms (the stall the work itself causes, apart from the
 * scheduling of a busy machine that file.idle_stall_ms shows). */
static double bench_file_load_busy(struct event_base *base, long ops)
{
    file_load(base, ops);
    return busy_max_ns / 1e6;
}

/* The same timer on an idle loop for 1 s per op: the lateness the system
 * itself causes (scheduling, timer slack), for scale. */
static double bench_file_idle_stall(struct event_base *base_, long ops)
{
    (void)base_;
    struct event_base *base = precise_base();
    struct event *tick = event_new(base, -1, EV_PERSIST, stall_tick, NULL);
    struct timeval ms1 = {0, 1000}, end = {ops, 0};
    event_add(tick, &ms1);
    stall_max_ns = stall_last_ns = 0;
    event_base_loopexit(base, &end);
    event_base_dispatch(base);
    event_free(tick);
    event_base_free(base);
    return stall_max_ns / 1e6;
}

/* The time, in ms, of releasing the last reference to a basis a file
 * initializer fetched (10,000 flags that nothing else holds). */
static double bench_file_basis_free(struct event_base *base, long ops)
{
    char path[256];
    file_write_eval_data(path, sizeof path);
    const char *paths[] = {path};
    ld_initializer *in = ld_file_initializer_new(base, paths, 1);
    double total = 0;
    for (long i = 0; i < ops; i++) {
        ld_future *f = loop_until_done(base, ld_initializer_fetch(in));
        double t0 = now_ns();
        ld_future_unref(f);
        total += now_ns() - t0;
    }
    ld_initializer_free(in);
    drain(base);
    file_remove(path);
    return total / (double)ops / 1e6;
}

/* The time, in ms, of ld_store_init() of a memory store with the change
 * set a file initializer fetched (10,000 flags): the data object built
 * from the changes, the init until its future completes. */
static double bench_file_store_init(struct event_base *base, long ops)
{
    char path[256];
    file_write_eval_data(path, sizeof path);
    const char *paths[] = {path};
    ld_initializer *in = ld_file_initializer_new(base, paths, 1);
    ld_future *f = loop_until_done(base, ld_initializer_fetch(in));
    const ld_fdv2_change_set *cs = ld_fdv2_basis_change_set(ld_fdv2_future_basis(f));
    ld_store *st = ld_memory_store_new(base);
    double total = 0;
    for (long i = 0; i < ops; i++) {
        double t0 = now_ns();
        json_t *data = json_pack("{s:{}, s:{}}", "features", "segments");
        for (size_t c = 0; c < ld_fdv2_change_set_count(cs); c++) {
            const ld_fdv2_change *ch = ld_fdv2_change_set_get(cs, c);
            json_object_set(json_object_get(data, ld_kind_namespace(ld_fdv2_change_kind(ch))),
                            ld_fdv2_change_key(ch), ld_fdv2_change_object(ch));
        }
        ld_future_unref(loop_until_done(base, ld_store_init(st, data)));
        total += now_ns() - t0;
        json_decref(data);
    }
    ld_store_free(st);
    ld_future_unref(f);
    ld_initializer_free(in);
    drain(base);
    file_remove(path);
    return total / (double)ops / 1e6;
}

/* ---- large data: the longest loop pass ------------------------------------ */

/* Runs single passes of the loop until `f` completes, then `after` more:
 * the longest pass (or `issued_ns`, the call that issued `f`), in ns of
 * the thread's CPU time (the machine may be shared: wall time would count
 * other processes). */
static double longest_pass_until(struct event_base *base, ld_future *f, double issued_ns, int after)
{
    double longest = issued_ns;
    while (ld_future_is_pending(f) || after-- > 0) {
        double t0 = thread_cpu_ns();
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        if (thread_cpu_ns() - t0 > longest)
            longest = thread_cpu_ns() - t0;
    }
    return longest;
}

/* The longest loop pass, in ms of CPU, while a memory store is initialized
 * with 100,000 flags (parsed before the clock) replacing 100,000 others
 * (which only the store holds): the init call itself, every pass until its
 * future completes, and 200 passes after (letting go of the old data). */
static double bench_store_init_100k_pass_ms(struct event_base *base, long ops)
{
    enum { N = 100000 };
    ld_store *st = ld_memory_store_new(base);
    json_t *data = make_data(N);
    ld_future_unref(loop_until_done(base, ld_store_init(st, data)));
    json_decref(data);
    double longest = 0;
    for (long i = 0; i < ops; i++) {
        data = make_data(N);
        double t0 = thread_cpu_ns();
        ld_future *f = ld_store_init(st, data);
        json_decref(data); /* the store's now */
        double ns = longest_pass_until(base, f, thread_cpu_ns() - t0, 200);
        if (!ld_future_is_fulfilled(f)) {
            fprintf(stderr, "init: %s\n", ld_future_error_message(f));
            exit(1);
        }
        ld_future_unref(f);
        if (ns > longest)
            longest = ns;
    }
    ld_store_free(st);
    drain(base);
    return longest / 1e6;
}

/* ---- big items: a flag or segment of 1,000,000 values ---------------------- */

enum { BIG_N = 1000000 };

/* The three shapes: a flag of 1,000,000 individual targets; a segment of
 * 1,000,000 included keys that a flag's rule matches; a flag whose rule
 * has an `in` clause of 1,000,000 values. The context "u0999999" is the
 * last of them: each serves true. */
enum big_shape { BIG_TARGETS, BIG_INCLUDED, BIG_IN };

static json_t *big_values(void)
{
    json_t *a = json_array();
    char key[32];
    for (long i = 0; i < BIG_N; i++) {
        snprintf(key, sizeof key, "u%07ld", i);
        json_array_append_new(a, json_string(key));
    }
    return a;
}

/* The item whose versions the workload upserts (a new object per version,
 * sharing `values`), and its kind; the flag of BIG_INCLUDED is put once. */
static json_t *big_item(enum big_shape shape, json_t *values, long version)
{
    if (shape == BIG_INCLUDED)
        return json_pack("{s:s, s:I, s:O, s:s}", "key", "bigseg", "version", (json_int_t)version,
                         "included", values, "salt", "s");
    json_t *f = json_pack("{s:s, s:I, s:b, s:[b,b], s:i, s:{s:i}, s:s}", "key", "big", "version",
                          (json_int_t)version, "on", 1, "variations", 0, 1, "offVariation", 0,
                          "fallthrough", "variation", 0, "salt", "s");
    if (shape == BIG_TARGETS)
        json_object_set_new(f, "targets",
                            json_pack("[{s:O, s:i}]", "values", values, "variation", 1));
    else
        json_object_set_new(f, "rules",
                            json_pack("[{s:s, s:[{s:s, s:s, s:O}], s:i}]", "id", "r", "clauses",
                                      "attribute", "key", "op", "in", "values", values, "variation",
                                      1));
    return f;
}

/* Each op: a new version of the big item is upserted (off the clock),
 * then a detail evaluation of "big" for "u0999999" is issued and awaited.
 * Returns ns per evaluation (wall time: what the caller waits), or
 * (`pass`) the longest loop pass in ms of the loop thread's CPU (the
 * issuing call is one). */
static double big_compile(struct event_base *base, long ops, enum big_shape shape, bool pass)
{
    ld_store *st = ld_memory_store_new(base);
    wait_ok(ld_store_init(st, json_pack("{s:{}, s:{}}", "features", "segments")), "init");
    json_t *values = big_values();
    if (shape == BIG_INCLUDED) {
        json_t *f =
            json_pack("{s:s, s:i, s:b, s:[b,b], s:i, s:{s:i}, s:s, s:[{s:s, s:[{s:s, "
                      "s:s, s:[s]}], s:i}]}",
                      "key", "big", "version", 1, "on", 1, "variations", 0, 1, "offVariation", 0,
                      "fallthrough", "variation", 0, "salt", "s", "rules", "id", "r", "clauses",
                      "attribute", "", "op", "segmentMatch", "values", "bigseg", "variation", 1);
        wait_ok(ld_store_upsert(st, ld_kind_features(), f), "upsert");
        json_decref(f);
    }
    const ld_kind *kind = shape == BIG_INCLUDED ? ld_kind_segments() : ld_kind_features();
    ld_evaluator *ev = ld_evaluator_new(st);
    ld_context *ctx = eval_context("u0999999");
    /* an event, so that a pass of the loop waits for the worker's
     * completion rather than returning at once (no event: a spin) */
    struct event *idle = event_new(base, -1, EV_PERSIST, stall_tick, NULL);
    event_add(idle, &(struct timeval){1, 0});
    double total = 0, longest = 0;
    for (long i = 0; i < ops; i++) {
        json_t *item = big_item(shape, values, i + 2);
        wait_ok(ld_store_upsert(st, kind, item), "upsert");
        json_decref(item);
        drain(base);
        double t0 = now_ns(), c0 = thread_cpu_ns();
        ld_future *f = ld_evaluator_detail(ev, "big", ctx, LD_VALUE_BOOL, json_false());
        double ns = thread_cpu_ns() - c0; /* the call is a pass */
        while (ld_future_is_pending(f)) {
            double p0 = thread_cpu_ns();
            event_base_loop(base, EVLOOP_ONCE);
            if (thread_cpu_ns() - p0 > ns)
                ns = thread_cpu_ns() - p0;
        }
        total += now_ns() - t0;
        if (!ld_future_is_fulfilled(f) || !json_is_true(ld_detail_value(ld_future_ptr(f)))) {
            fprintf(stderr, "eval.compile: wrong detail\n");
            exit(1);
        }
        ld_future_unref(f);
        if (ns > longest)
            longest = ns;
    }
    event_free(idle);
    ld_evaluator_free(ev);
    ld_context_unref(ctx);
    ld_store_free(st);
    json_decref(values);
    drain(base);
    return pass ? longest / 1e6 : total / (double)ops;
}

static double bench_compile_targets(struct event_base *base, long ops)
{
    return big_compile(base, ops, BIG_TARGETS, false);
}

static double bench_compile_targets_pass(struct event_base *base, long ops)
{
    return big_compile(base, ops, BIG_TARGETS, true);
}

static double bench_compile_included(struct event_base *base, long ops)
{
    return big_compile(base, ops, BIG_INCLUDED, false);
}

static double bench_compile_included_pass(struct event_base *base, long ops)
{
    return big_compile(base, ops, BIG_INCLUDED, true);
}

static double bench_compile_in(struct event_base *base, long ops)
{
    return big_compile(base, ops, BIG_IN, false);
}

static double bench_compile_in_pass(struct event_base *base, long ops)
{
    return big_compile(base, ops, BIG_IN, true);
}

/* ---- big segments ----------------------------------------------------------
 *
 * Flag "big" serves true when the context is in big segment "bs"; the big
 * segment store answers within each call (as one in memory would): "u" is
 * in "bs", its metadata is now. Each op is a detail evaluation of "big" for
 * "u", issued, awaited and its value and big segments status read.
 *   eval.big_segment        an ld_client: memberships cached, the metadata
 *                           polled (the first op, which reads, off the clock)
 *   eval.big_segment.store  an ld_evaluator given the store itself: two
 *                           store reads per evaluation (the client before
 *                           its cache)
 */

static void bs_metadata(void *impl, ld_future *out)
{
    (void)impl;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ld_future_fulfill_int(out, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    ld_future_unref(out);
}

static void bs_membership(void *impl, const char *hash, ld_future *out)
{
    json_t *in = impl;
    ld_future_fulfill_json(out, json_incref(json_object_get(in, hash)));
    ld_future_unref(out);
}

static void bs_free(void *impl)
{
    json_decref(impl);
}

static const struct ld_big_segment_store_ops bs_ops = {
    .version = LD_BIG_SEGMENT_STORE_OPS_VERSION,
    .get_metadata = bs_metadata,
    .get_membership = bs_membership,
    .free = bs_free,
};

static double big_segment_eval(struct event_base *base, long ops, bool cached)
{
    json_t *data =
        json_pack("{s:{s:{s:s,s:i,s:b,s:[b,b],s:i,s:{s:i},s:[{s:s,s:i,s:[{s:s,s:s,s:[s]}]}]}},"
                  "s:{s:{s:s,s:i,s:b,s:i}}}",
                  "features", "big", "key", "big", "version", 1, "on", 1, "variations", 0, 1,
                  "offVariation", 0, "fallthrough", "variation", 0, "rules", "id", "r", "variation",
                  1, "clauses", "attribute", "", "op", "segmentMatch", "values", "bs", "segments",
                  "bs", "key", "bs", "version", 1, "unbounded", 1, "generation", 1);
    /* base64(SHA-256("u")) */
    json_t *members =
        json_pack("{s:{s:b}}", "C/6TXnDDIcfKOvx1zg0MovmLVCLgCLsxwAxtfx8cCtY=", "bs.g1", 1);
    ld_store *st = ld_memory_store_new(base);
    ld_big_segment_store *bss = members ? ld_big_segment_store_new(base, &bs_ops, members) : NULL;
    if (!data || !st || !bss)
        exit(1);
    wait_ok(ld_store_init(st, data), "init");
    json_decref(data);
    ld_client *cl = NULL;
    ld_evaluator *ev = NULL;
    if (cached) {
        ld_client_options *o = ld_client_options_new();
        ld_client_options_set_store(o, st);
        ld_client_options_set_offline(o, true);
        ld_client_options_set_big_segments(o, bss, 0);
        cl = ld_client_new(base, o);
        ld_client_options_free(o);
    } else {
        ev = ld_evaluator_new(st);
        if (ev)
            ld_evaluator_set_big_segment_store(ev, bss, 0);
    }
    ld_context *ctx = eval_context("u");
    if ((!cl && !ev) || !ctx)
        exit(1);
    double t0 = 0;
    for (long i = -1; i < ops; i++) { /* the first, which reads, off the clock */
        if (i == 0)
            t0 = now_ns();
        ld_future *f = cl ? ld_client_variation_detail(cl, "big", ctx, LD_VALUE_BOOL, NULL)
                          : ld_evaluator_detail(ev, "big", ctx, LD_VALUE_BOOL, NULL);
        while (ld_future_is_pending(f))
            event_base_loop(base, EVLOOP_ONCE);
        const ld_detail *d = ld_future_ptr(f);
        if (!d || !json_is_true(ld_detail_value(d)) ||
            ld_detail_big_segments_status(d) != LD_BIG_SEGMENTS_STATUS_HEALTHY) {
            fprintf(stderr, "big segment: not served as expected\n");
            exit(1);
        }
        ld_future_unref(f);
    }
    double ns = (now_ns() - t0) / (double)ops;
    ld_client_free(cl);
    ld_evaluator_free(ev);
    ld_context_unref(ctx);
    drain(base);
    ld_big_segment_store_free(bss);
    ld_store_free(st);
    drain(base);
    return ns;
}

static double bench_eval_big_segment(struct event_base *base, long ops)
{
    return big_segment_eval(base, ops, true);
}

static double bench_eval_big_segment_store(struct event_base *base, long ops)
{
    return big_segment_eval(base, ops, false);
}

/* ---- stream workloads ----------------------------------------------------
 * An ld_client streaming from a fake LaunchDarkly stream (an evhttp server
 * on a thread and loop of its own, speaking the protocol: GET /all, a put
 * of the eval group's data, 10,000 flags, then patches on command). */

struct upstream {
    pthread_t thread;
    struct event_base *base;
    struct evhttp *http;
    int port;
    char *put;      /* the put event */
    char **patches; /* patch events, one per op */
    long n_patches;
    int cmd[2]; /* a pipe: 4-byte patch numbers; -1 quits */
    struct event *cmd_ev;
    struct evhttp_request *live;
    _Atomic double sent_ns; /* when the last patch was written */
};

static void up_send(struct evhttp_request *req, const char *text)
{
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, text, strlen(text));
    evhttp_send_reply_chunk(req, b);
    evbuffer_free(b);
}

static void up_serve(struct evhttp_request *req, void *arg)
{
    struct upstream *u = arg;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/event-stream");
    evhttp_send_reply_start(req, 200, "OK");
    up_send(req, u->put);
    u->live = req;
}

static void up_cmd(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct upstream *u = arg;
    int32_t i;
    if (read(fd, &i, sizeof i) != (ssize_t)sizeof i || i < 0) {
        event_base_loopbreak(u->base);
        return;
    }
    atomic_store(&u->sent_ns, now_ns());
    if (u->live)
        up_send(u->live, u->patches[i]);
}

static void *up_main(void *arg)
{
    struct upstream *u = arg;
    event_base_dispatch(u->base);
    return NULL;
}

/* The eval group's data as a put, and `n` patches of its flags (a new
 * version each). */
static void upstream_start(struct upstream *u, long n)
{
    memset(u, 0, sizeof *u);
    char *text = eval_data_text();
    json_t *data = json_loads(text, 0, NULL);
    free(text);
    json_t *flags = json_object_get(data, "features");
    json_t *put = json_pack("{s:s, s:{s:O, s:O}}", "path", "/", "data", "flags", flags, "segments",
                            json_object_get(data, "segments"));
    char *pj = json_dumps(put, JSON_COMPACT);
    size_t len = strlen(pj) + 32;
    u->put = malloc(len);
    snprintf(u->put, len, "event: put\ndata: %s\n\n", pj);
    free(pj);
    json_decref(put);
    u->patches = calloc((size_t)n, sizeof(char *));
    u->n_patches = n;
    void *it = json_object_iter(flags);
    for (long i = 0; i < n; i++) {
        if (!it)
            it = json_object_iter(flags);
        json_t *flag = json_deep_copy(json_object_iter_value(it));
        json_object_set_new(flag, "version", json_integer(1000000 + i));
        char path[300];
        snprintf(path, sizeof path, "/flags/%s", json_object_iter_key(it));
        json_t *patch = json_pack("{s:s, s:o}", "path", path, "data", flag);
        char *t = json_dumps(patch, JSON_COMPACT);
        size_t l = strlen(t) + 40;
        u->patches[i] = malloc(l);
        snprintf(u->patches[i], l, "event: patch\ndata: %s\n\n", t);
        free(t);
        json_decref(patch);
        it = json_object_iter_next(flags, it);
    }
    json_decref(data);
    u->base = event_base_new();
    u->http = evhttp_new(u->base);
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(u->http, "127.0.0.1", 0);
    struct sockaddr_in sin;
    socklen_t sl = sizeof sin;
    if (!bs || pipe(u->cmd) != 0 ||
        getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sin, &sl) != 0) {
        fprintf(stderr, "stream: no upstream\n");
        exit(1);
    }
    u->port = ntohs(sin.sin_port);
    evhttp_set_gencb(u->http, up_serve, u);
    u->cmd_ev = event_new(u->base, u->cmd[0], EV_READ | EV_PERSIST, up_cmd, u);
    event_add(u->cmd_ev, NULL);
    if (pthread_create(&u->thread, NULL, up_main, u) != 0)
        exit(1);
}

static void upstream_stop(struct upstream *u)
{
    int32_t quit = -1;
    if (write(u->cmd[1], &quit, sizeof quit) != (ssize_t)sizeof quit)
        exit(1);
    pthread_join(u->thread, NULL);
    event_free(u->cmd_ev);
    evhttp_free(u->http);
    event_base_free(u->base);
    close(u->cmd[0]);
    close(u->cmd[1]);
    free(u->put);
    for (long i = 0; i < u->n_patches; i++)
        free(u->patches[i]);
    free(u->patches);
}

static ld_client *stream_client(struct event_base *base, int port)
{
    char uri[64];
    snprintf(uri, sizeof uri, "http://127.0.0.1:%d", port);
    ld_net_config *c = ld_net_config_new("sdk-bench");
    ld_net_config_set_stream_uri(c, uri);
    ld_client_options *o = ld_client_options_new();
    ld_client_options_set_net_config(o, c);
    ld_client_options_set_events(o, false); /* no events service here */
    ld_client *cl = ld_client_new(base, o);
    ld_client_options_free(o);
    ld_net_config_free(c);
    return cl;
}

/* The first put of 10,000 flags until ready, in ms: the client made, its
 * connection, the put's transfer, its parse (on the source's worker) and
 * the store's init; busy_max_ns keeps the longest pass of the loop. */
static double stream_put(struct event_base *base, long ops, bool busy)
{
    double total = 0, worst_busy = 0;
    for (long i = 0; i < ops; i++) {
        struct upstream u;
        upstream_start(&u, 1);
        busy_max_ns = 0;
        double t0 = now_ns();
        ld_client *cl = stream_client(base, u.port);
        ld_future *ready = ld_client_ready(cl);
        loop_until_done(base, ready);
        total += now_ns() - t0;
        if (busy_max_ns > worst_busy)
            worst_busy = busy_max_ns;
        ld_future_unref(ready);
        ld_client_free(cl);
        drain(base);
        upstream_stop(&u);
    }
    return busy ? worst_busy / 1e6 : total / (double)ops / 1e6;
}

/* What an idle client streaming 10,000 flags holds, in KiB: the resident
 * memory it added (after ready and a quiet second: the connection open, the
 * store and its evaluator, the parse's buffers given back), the upstream's
 * own memory made before and not counted. */
static double bench_stream_client_kb(struct event_base *base, long ops)
{
    (void)ops;
    struct upstream u;
    upstream_start(&u, 1);
    malloc_trim(0);
    long before = rss_kb();
    ld_client *cl = stream_client(base, u.port);
    ld_future *ready = ld_client_ready(cl);
    loop_until_done(base, ready);
    ld_future_unref(ready);
    struct timeval sec = {1, 0};
    event_base_loopexit(base, &sec);
    event_base_dispatch(base);
    malloc_trim(0);
    long after = rss_kb();
    ld_client_free(cl);
    drain(base);
    upstream_stop(&u);
    return (double)(after - before);
}

static double bench_stream_put_ready(struct event_base *base, long ops)
{
    return stream_put(base, ops, false);
}

static double bench_stream_put_busy(struct event_base *base, long ops)
{
    return stream_put(base, ops, true);
}

struct patch_wait {
    int64_t want;
    const char *key;
    bool seen;
};

static void patch_seen(ld_data_system *ds, const ld_kind *kind, const char *key, int64_t version,
                       const json_t *item, void *arg)
{
    (void)ds;
    (void)kind;
    (void)item;
    struct patch_wait *w = arg;
    if (version == w->want && strcmp(key, w->key) == 0)
        w->seen = true;
}

/* A patch written by the upstream until the client's store has it (its
 * change listener hears it) and an evaluation of that flag answers, in
 * us, one patch at a time: the median (or the 99th percentile). */
static double stream_patch(struct event_base *base, long ops, bool p99)
{
    struct upstream u;
    upstream_start(&u, ops);
    ld_client *cl = stream_client(base, u.port);
    ld_future *ready = ld_client_ready(cl);
    loop_until_done(base, ready);
    ld_future_unref(ready);
    struct patch_wait w = {0};
    ld_data_system_add_change_listener(ld_client_data_system(cl), patch_seen, &w);
    json_t *cj = json_pack("{s:s, s:s}", "kind", "user", "key", "u-1");
    ld_context *ctx = ld_context_from_json(cj, NULL);
    json_decref(cj);
    double *lat = malloc(sizeof(double) * (size_t)ops);
    char key[256];
    for (long i = 0; i < ops; i++) {
        /* the key and version of patch i */
        const char *k = strstr(u.patches[i], "\"/flags/") + 8;
        size_t kl = (size_t)(strchr(k, '"') - k);
        memcpy(key, k, kl);
        key[kl] = '\0';
        w.key = key;
        w.want = 1000000 + i;
        w.seen = false;
        int32_t n = (int32_t)i;
        if (write(u.cmd[1], &n, sizeof n) != (ssize_t)sizeof n)
            exit(1);
        while (!w.seen)
            event_base_loop(base, EVLOOP_ONCE);
        ld_future *f =
            loop_until_done(base, ld_client_variation_detail(cl, key, ctx, LD_VALUE_ANY, NULL));
        lat[i] = (now_ns() - atomic_load(&u.sent_ns)) / 1e3;
        ld_future_unref(f);
    }
    qsort(lat, (size_t)ops, sizeof(double), cmp_double);
    double v = p99 ? lat[(size_t)((double)ops * 0.99)] : lat[ops / 2];
    free(lat);
    ld_context_unref(ctx);
    ld_client_free(cl);
    drain(base);
    upstream_stop(&u);
    return v;
}

static double bench_stream_patch(struct event_base *base, long ops)
{
    return stream_patch(base, ops, false);
}

static double bench_stream_patch_p99(struct event_base *base, long ops)
{
    return stream_patch(base, ops, true);
}

/* ---- events ------------------------------------------------------------- */

/* Recording evaluations into the summarizer in the steady state (every
 * flag and variation seen before the clock starts): `nflags` flags of 2
 * variations, one user context; each op one record, the flag and
 * variation of op i fixed by i (all in cache for 1 flag, spread for 1,000). */
static double summary_record(long ops, long nflags)
{
    struct ld__summarizer *s = ld__summarizer_new();
    ld_context_builder *b = ld_context_builder_new("user", "user-1");
    ld_context *c = ld_context_builder_build(b, NULL);
    ld_context_builder_free(b);
    char(*keys)[32] = malloc((size_t)nflags * sizeof(*keys));
    size_t *lens = malloc((size_t)nflags * sizeof(*lens));
    if (!s || !c || !keys || !lens)
        exit(1);
    for (long i = 0; i < nflags; i++) {
        flag_key(keys[i], sizeof(keys[i]), i);
        lens[i] = strlen(keys[i]);
    }
    json_t *values[2] = {json_false(), json_true()};
    for (long i = 0; i < 2 * nflags; i++)
        ld__summarizer_record(s, keys[i / 2], lens[i / 2], 7, (int)(i % 2), values[i % 2],
                              json_false(), c, 1);
    int bad = 0;
    double t0 = now_ns();
    for (long i = 0; i < ops; i++) {
        long f = (i * 7919) % nflags;
        bad |= ld__summarizer_record(s, keys[f], lens[f], 7, (int)(i & 1), values[i & 1],
                                     json_false(), c, 1 + (i >> 10));
    }
    double ns = (now_ns() - t0) / (double)ops;
    json_t *out = NULL;
    if (bad || ld__summarizer_flush(s, &out) != 0 || !out)
        exit(1);
    json_decref(out);
    ld__summarizer_free(s);
    ld_context_unref(c);
    free(keys);
    free(lens);
    return ns;
}

static double bench_summary_record(struct event_base *base, long ops)
{
    (void)base;
    return summary_record(ops, 1);
}

static double bench_summary_record_1k(struct event_base *base, long ops)
{
    (void)base;
    return summary_record(ops, 1000);
}

/* Evaluations through an ld_client, as an application makes them, with
 * analytics events off or on. The client holds the eval group's data (its
 * store, initialized; an initializer that finds no file, so no stream) and
 * sends its events to a local events service on a thread and loop of its
 * own (answering 202). Each op is a detail evaluation (bool, default
 * false: LaunchDarkly's variationDetail) issued from the callback of the
 * one before, which reads its value.
 *   client.eval.bool              events off
 *   client.eval.bool.events       events on: the flag tracks nothing, so
 *                                 each evaluation is counted in the summary
 *                                 (and its context looked up in the LRU)
 *   client.eval.tracked.events    events on, the flag "tracked" has
 *                                 trackEvents: each evaluation also keeps a
 *                                 feature event (capacity: all of them)
 *   client.eval.tracked.flush_ms  then the flush of them all, in ms (one
 *                                 payload written on the worker, posted,
 *                                 answered), per op count given
 */

struct sink {
    pthread_t thread;
    struct event_base *base;
    struct evhttp *http;
    struct event *tick; /* wakes its loop to see `stop` (libevent threading may be off) */
    atomic_bool stop;
    int port;
    atomic_long posts, bytes;
};

static void sink_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct sink *k = arg;
    if (atomic_load(&k->stop))
        event_base_loopbreak(k->base);
}

static void sink_answer(struct evhttp_request *req, void *arg)
{
    struct sink *k = arg;
    k->posts++;
    k->bytes += (long)evbuffer_get_length(evhttp_request_get_input_buffer(req));
    evhttp_send_reply(req, 202, "Accepted", NULL);
}

static void *sink_run(void *arg)
{
    struct sink *k = arg;
    event_base_dispatch(k->base);
    return NULL;
}

static void sink_start(struct sink *k)
{
    memset(k, 0, sizeof *k);
    k->base = event_base_new();
    k->http = k->base ? evhttp_new(k->base) : NULL;
    struct evhttp_bound_socket *bs =
        k->http ? evhttp_bind_socket_with_handle(k->http, "127.0.0.1", 0) : NULL;
    if (!bs)
        exit(1);
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sin, &len);
    k->port = ntohs(sin.sin_port);
    evhttp_set_gencb(k->http, sink_answer, k);
    k->tick = event_new(k->base, -1, EV_PERSIST, sink_tick, k);
    struct timeval ms5 = {0, 5000};
    if (!k->tick || event_add(k->tick, &ms5) != 0 ||
        pthread_create(&k->thread, NULL, sink_run, k) != 0)
        exit(1);
}

static void sink_stop(struct sink *k)
{
    atomic_store(&k->stop, true);
    pthread_join(k->thread, NULL);
    event_free(k->tick);
    evhttp_free(k->http);
    event_base_free(k->base);
}

/* A client on `st` (borrowed), events on (to `k`, configured by `cfg`) or
 * off (`k` NULL). */
static ld_client *bench_client(struct event_base *base, ld_store *st, struct sink *k,
                               ld_events_config *cfg)
{
    ld_client_options *o = ld_client_options_new();
    ld_client_options_set_store(o, st);
    const char *nowhere[] = {"/nonexistent/ldasync-bench.json"};
    ld_client_options_add_initializer(o, ld_file_initializer_new(base, nowhere, 1));
    ld_net_config *n = ld_net_config_new("sdk-bench");
    char uri[64];
    snprintf(uri, sizeof uri, "http://127.0.0.1:%d", k ? k->port : 1);
    ld_net_config_set_events_uri(n, uri);
    ld_client_options_set_net_config(o, n);
    ld_client_options_set_events(o, k != NULL);
    ld_client_options_set_events_config(o, cfg);
    ld_client *cl = ld_client_new(base, o);
    ld_client_options_free(o);
    ld_net_config_free(n);
    if (!cl)
        exit(1);
    ld_future *ready = ld_client_ready(cl);
    while (ld_future_is_pending(ready))
        event_base_loop(base, EVLOOP_ONCE);
    ld_future_unref(ready);
    return cl;
}

struct client_run {
    ld_client *cl;
    ld_context *ctx;
    const char *flag;
    long left, wrong;
};

static void client_next(ld_future *f, void *arg)
{
    struct client_run *r = arg;
    done_count++;
    if (!ld_future_is_fulfilled(f) || !json_is_true(ld_detail_value(ld_future_ptr(f))))
        r->wrong++;
    if (--r->left <= 0)
        return;
    ld_future_on_complete(
        ld_client_variation_detail(r->cl, r->flag, r->ctx, LD_VALUE_BOOL, json_false()),
        client_next, r);
}

/* `ops` detail evaluations of `flag` by `cl` for user-1, each issued from
 * the callback of the one before, which reads its value (true): ns per
 * evaluation. Exits if one served another value. */
static double client_evals(struct event_base *base, ld_client *cl, const char *flag, long ops,
                           const char *name)
{
    struct client_run r = {cl, eval_context("user-1"), flag, ops, 0};
    done_count = 0;
    double t0 = now_ns();
    ld_future_on_complete(
        ld_client_variation_detail(cl, r.flag, r.ctx, LD_VALUE_BOOL, json_false()), client_next,
        &r);
    run_until(base, ops);
    double ns = (now_ns() - t0) / (double)ops;
    if (r.wrong) {
        fprintf(stderr, "%s: %ld of %ld evaluations served another value\n", name, r.wrong, ops);
        exit(1);
    }
    ld_context_unref(r.ctx);
    return ns;
}

static double client_eval(struct event_base *base, long ops, bool events, bool tracked,
                          bool flush_ms)
{
    ld_store *st = eval_store(base);
    if (tracked) {
        json_t *f = json_pack("{s:s,s:i,s:b,s:b,s:[b,b],s:{s:i},s:s}", "key", "tracked", "version",
                              1, "on", 1, "trackEvents", 1, "variations", 1, 0, "fallthrough",
                              "variation", 0, "salt", "s");
        wait_ok(ld_store_upsert(st, ld_kind_features(), f), "upsert");
        json_decref(f);
    }
    struct sink k;
    if (events)
        sink_start(&k);
    ld_events_config *cfg = ld_events_config_new();
    ld_events_config_set_diagnostics(cfg, false, 900000);
    if (tracked) { /* every event kept until the flush at the end */
        ld_events_config_set_capacity(cfg, (int)(ops + 16));
        ld_events_config_set_flush_interval(cfg, 3600000);
    }
    ld_client *cl = bench_client(base, st, events ? &k : NULL, cfg);
    ld_events_config_free(cfg);
    double ns = client_evals(base, cl, tracked ? "tracked" : "flag-000042", ops, "client.eval");
    if (tracked) {
        double t0 = now_ns();
        ld_future *f = ld_client_flush(cl);
        while (ld_future_is_pending(f))
            event_base_loop(base, EVLOOP_ONCE);
        if (!ld_future_is_fulfilled(f) || !ld_future_bool(f) || k.posts != 1) {
            fprintf(stderr, "client.eval: the events were not delivered\n");
            exit(1);
        }
        ld_future_unref(f);
        if (flush_ms)
            ns = (now_ns() - t0) / 1e6;
    }
    ld_client_free(cl);
    drain(base);
    ld_store_free(st);
    drain(base);
    if (events)
        sink_stop(&k);
    return ns;
}

static double bench_client_eval_bool(struct event_base *base, long ops)
{
    return client_eval(base, ops, false, false, false);
}

static double bench_client_eval_bool_events(struct event_base *base, long ops)
{
    return client_eval(base, ops, true, false, false);
}

static double bench_client_eval_tracked_events(struct event_base *base, long ops)
{
    return client_eval(base, ops, true, true, false);
}

static double bench_client_eval_tracked_flush_ms(struct event_base *base, long ops)
{
    return client_eval(base, ops, true, true, true);
}

/* A flush of 10,000 events and the summary of 10,000 flags: a client whose
 * buffer holds 10,000 custom events (ld_client_track) and whose summary
 * counts one evaluation of each of the eval group's 10,000 flags, flushed
 * (ld_client_flush() issued and awaited) with a 1 ms timer probing the
 * loop (a base with precise timers).
 *   events.flush_10k.ms        the flush, until the events service took it
 *   events.flush_10k.pass_ms   the longest stall of the loop meanwhile (wall
 *                              time, the probe's lateness: it counts the
 *                              loop's thread waiting for a core too)
 *   events.flush_10k.busy_ms   the loop thread's CPU time in its longest
 *                              pass meanwhile (the ld_client_flush call
 *                              counts as one)
 *   events.flush_10k.kb        the payload's size (one op)
 */
static double events_flush(long ops, int what)
{
    double total = 0, worst = 0, worst_busy = 0, kb = 0;
    for (long i = 0; i < ops; i++) {
        struct event_base *base = precise_base();
        ld_store *st = eval_store(base);
        struct sink k;
        sink_start(&k);
        ld_events_config *cfg = ld_events_config_new();
        ld_events_config_set_diagnostics(cfg, false, 900000);
        ld_events_config_set_flush_interval(cfg, 3600000);
        ld_events_config_set_capacity(cfg, 10001); /* the context's index event, and 10,000 */
        ld_client *cl = bench_client(base, st, &k, cfg);
        ld_events_config_free(cfg);
        ld_context *ctx = eval_context("user-1");
        json_t *data = json_pack("{s:s}", "page", "checkout");
        for (long e = 0; e < 10000; e++) {
            char key[32];
            flag_key(key, sizeof key, e);
            ld_future_unref(ld_client_bool_variation(cl, key, ctx, false));
            if (ld_client_track(cl, "viewed", ctx, data) != 0) {
                fprintf(stderr, "events.flush: a track was refused\n");
                exit(1);
            }
        }
        json_decref(data);
        drain(base);
        struct event *probe = event_new(base, -1, EV_PERSIST, stall_tick, NULL);
        struct timeval ms1 = {0, 1000};
        event_add(probe, &ms1);
        stall_max_ns = stall_last_ns = 0;
        double t0 = now_ns(), c0 = thread_cpu_ns();
        ld_future *f = ld_client_flush(cl);
        double busy = thread_cpu_ns() - c0; /* the call is a pass of its own */
        while (ld_future_is_pending(f)) {
            c0 = thread_cpu_ns();
            event_base_loop(base, EVLOOP_ONCE);
            if (thread_cpu_ns() - c0 > busy)
                busy = thread_cpu_ns() - c0;
        }
        total += now_ns() - t0;
        if (!ld_future_is_fulfilled(f) || !ld_future_bool(f) || k.posts != 1) {
            fprintf(stderr, "events.flush: not delivered\n");
            exit(1);
        }
        ld_future_unref(f);
        event_free(probe);
        if (stall_max_ns > worst)
            worst = stall_max_ns;
        if (busy > worst_busy)
            worst_busy = busy;
        kb = (double)k.bytes / 1024.0;
        ld_client_free(cl);
        ld_context_unref(ctx);
        drain(base);
        ld_store_free(st);
        drain(base);
        sink_stop(&k);
        event_base_free(base);
    }
    return what == 0   ? total / (double)ops / 1e6
           : what == 1 ? worst / 1e6
           : what == 3 ? worst_busy / 1e6
                       : kb;
}

static double bench_events_flush_ms(struct event_base *base, long ops)
{
    (void)base;
    return events_flush(ops, 0);
}

static double bench_events_flush_pass_ms(struct event_base *base, long ops)
{
    (void)base;
    return events_flush(ops, 1);
}

static double bench_events_flush_busy_ms(struct event_base *base, long ops)
{
    (void)base;
    return events_flush(ops, 3);
}

static double bench_events_flush_kb(struct event_base *base, long ops)
{
    (void)base;
    return events_flush(ops, 2);
}

/* ---- Redis ---------------------------------------------------------------- */

/* The Redis store (libldasync-redis) on the eval group's data (10,002
 * flags and a segment), in a redis-server of the workload's own: Debian's,
 * $REDIS_SERVER or the one configure or PATH finds (tests/redis/redisd.c),
 * on a unix socket in a new temporary directory, started in the workload's
 * process before its warm-up run and killed when the process ends; or, when
 * $LDASYNC_BENCH_REDIS is set (a unix socket's path, or a URL that
 * ld_redis_options_set_url() takes), that one, as bench/redis-bench.sh does
 * so that ldasync and the Node SDK use one server. Without either, the
 * group says so and is skipped. Each run makes a store and waits for its
 * first answer (ld_store_initialized: connected) before the clock; the
 * get and all workloads init the data before the clock too.
 *   redis.init_10k.ms         ld_store_init of the data (parsed before the
 *                             clock), awaited: ms per init
 *   redis.init_10k.pass_ms    the longest loop pass meanwhile (ms of the
 *                             thread's CPU time; the ld_store_init call
 *                             itself counts as one)
 *   redis.get                 ld_store_get of a flag, awaited, the item's
 *                             key read and compared, released; the next
 *                             issued from its callback: ns per get
 *   redis.get.p50_us, .p99_us the same gets, each timed from its issue to
 *                             its callback (us)
 *   redis.get.inflight64      64 gets in flight at all times (pipelined on
 *                             the store's one connection), each callback
 *                             issuing the next: ns per get
 *   redis.all_10k.ms          ld_store_all of the features, awaited, its
 *                             size read and checked, released: ms per all
 *   redis.all_10k.pass_ms     the longest loop pass meanwhile (CPU ms)
 * The flags read are flag-NNNNNN with N = i * 7919 mod 10,000 for the i-th
 * get of a run (as bench/node/redis-bench.mjs reads them).
 *
 * More ways to read the same Redis are one store maker away: redis_gets()
 * and redis_all() take the function that makes the store they read, so a
 * cached workload passes one that puts ld_caching_store_new() in front of
 * redis_store() (and inits through it), and a daemon-mode client's
 * evaluations can use redis_setup() and redis_store() to fill Redis. */

static struct redisd bench_redisd;
static char redis_url[400];

static void redis_teardown(void)
{
    redisd_destroy(&bench_redisd);
}

/* NULL when the redis group can run here, else why not. */
static const char *redis_missing(void)
{
    const char *env = getenv("LDASYNC_BENCH_REDIS");
    if (env && *env)
        return NULL;
    return redisd_program() ? NULL
                            : "no redis-server (set REDIS_SERVER or LDASYNC_BENCH_REDIS, or put "
                              "redis-server in PATH)";
}

/* In the workload's process: sets redis_url, starting a server if need
 * be (killed at exit). */
static void redis_setup(void)
{
    const char *env = getenv("LDASYNC_BENCH_REDIS");
    if (env && *env) {
        snprintf(redis_url, sizeof redis_url, "%s%s", env[0] == '/' ? "unix:" : "", env);
        return;
    }
    if (redisd_start(&bench_redisd, NULL) != 0) {
        redisd_destroy(&bench_redisd);
        exit(1);
    }
    atexit(redis_teardown);
    snprintf(redis_url, sizeof redis_url, "%s", bench_redisd.url);
}

/* The eval group's data, parsed once per process (off every clock). */
static const json_t *redis_data(void)
{
    static json_t *data;
    if (!data) {
        char *text = eval_data_text();
        data = parse_text(text);
        free(text);
    }
    return data;
}

static size_t redis_nfeatures(void)
{
    return json_object_size(json_object_get(redis_data(), "features"));
}

/* A Redis store, connected (its first answer came). */
static ld_store *redis_store(struct event_base *base)
{
    ld_redis_options *o = ld_redis_options_new();
    if (!o || ld_redis_options_set_url(o, redis_url) != 0)
        exit(1);
    ld_store *st = ld_redis_store_new(base, o);
    ld_redis_options_free(o);
    if (!st)
        exit(1);
    ld_future *f = ld_store_initialized(st);
    ld_future_wait(f);
    if (!ld_future_is_fulfilled(f)) {
        fprintf(stderr, "redis: %s\n", ld_future_error_message(f));
        exit(1);
    }
    ld_future_unref(f);
    return st;
}

typedef ld_store *(*store_maker)(struct event_base *base);

/* Runs the loop a pass at a time (EVLOOP_ONCE) until `f` completes, then
 * 30 passes more (what the store lets go of after it: EVLOOP_NONBLOCK
 * alone would run passes until none has an event due, all in one call);
 * *longest: the longest pass's CPU time of this thread (ns), if longer
 * than what it holds. */
static void await_passes(struct event_base *base, ld_future *f, double *longest)
{
    int after = 30;
    while (ld_future_is_pending(f) || after-- > 0) {
        double t0 = thread_cpu_ns();
        event_base_loop(base,
                        ld_future_is_pending(f) ? EVLOOP_ONCE : EVLOOP_ONCE | EVLOOP_NONBLOCK);
        double d = thread_cpu_ns() - t0;
        if (d > *longest)
            *longest = d;
    }
    if (!ld_future_is_fulfilled(f)) {
        fprintf(stderr, "redis: %s\n", ld_future_error_message(f));
        exit(1);
    }
}

static double redis_init(struct event_base *base, long ops, bool pass)
{
    const json_t *data = redis_data();
    ld_store *st = redis_store(base);
    double total = 0, longest = 0;
    for (long i = 0; i < ops; i++) {
        double t0 = now_ns(), c0 = thread_cpu_ns();
        ld_future *f = ld_store_init(st, data);
        double issued = thread_cpu_ns() - c0;
        if (issued > longest)
            longest = issued;
        await_passes(base, f, &longest);
        total += now_ns() - t0;
        ld_future_unref(f);
    }
    ld_store_free(st);
    drain(base);
    return pass ? longest / 1e6 : total / (double)ops / 1e6;
}

static double bench_redis_init_ms(struct event_base *base, long ops)
{
    return redis_init(base, ops, false);
}

static double bench_redis_init_pass_ms(struct event_base *base, long ops)
{
    return redis_init(base, ops, true);
}

/* Gets in flight: each slot has one, and issues the next from its
 * callback. */
struct rget {
    ld_store *st;
    long issued, done, ops, wrong;
    double *lat; /* each get's latency (ns), or NULL */
};

struct rslot {
    struct rget *g;
    double t0;
    char key[32];
};

static void rget_done(ld_future *f, void *arg);

static void rget_issue(struct rslot *s)
{
    struct rget *g = s->g;
    flag_key(s->key, sizeof s->key, (g->issued++ * 7919) % FLAGS);
    if (g->lat)
        s->t0 = now_ns();
    ld_future_on_complete(ld_store_get(g->st, ld_kind_features(), s->key), rget_done, s);
}

static void rget_done(ld_future *f, void *arg)
{
    struct rslot *s = arg;
    struct rget *g = s->g;
    if (g->lat)
        g->lat[g->done] = now_ns() - s->t0;
    const char *key = json_string_value(json_object_get(ld_future_json(f), "key"));
    if (!ld_future_is_fulfilled(f) || !key || strcmp(key, s->key) != 0)
        g->wrong++;
    g->done++;
    done_count++;
    if (g->issued < g->ops)
        rget_issue(s);
}

/* `what`: 0 ns per get, 1 the median latency (us), 2 the 99th percentile
 * (us). */
static double redis_gets(struct event_base *base, long ops, int inflight, int what,
                         store_maker make)
{
    ld_store *st = make(base);
    wait_ok(ld_store_init(st, redis_data()), "redis init");
    drain(base);
    struct rget g = {st, 0, 0, ops, 0, NULL};
    if (what)
        g.lat = malloc((size_t)ops * sizeof(double));
    struct rslot *slots = calloc((size_t)inflight, sizeof(*slots));
    if (!slots || (what && !g.lat))
        exit(1);
    done_count = 0;
    double t0 = now_ns();
    for (int i = 0; i < inflight && g.issued < ops; i++) {
        slots[i].g = &g;
        rget_issue(&slots[i]);
    }
    run_until(base, ops);
    double ns = (now_ns() - t0) / (double)ops;
    if (g.wrong) {
        fprintf(stderr, "redis.get: %ld of %ld gets served another item\n", g.wrong, ops);
        exit(1);
    }
    if (what) {
        qsort(g.lat, (size_t)ops, sizeof(double), cmp_double);
        ns = g.lat[what == 1 ? ops / 2 : (ops * 99) / 100] / 1e3;
    }
    free(g.lat);
    free(slots);
    ld_store_free(st);
    drain(base);
    return ns;
}

static double bench_redis_get(struct event_base *base, long ops)
{
    return redis_gets(base, ops, 1, 0, redis_store);
}

static double bench_redis_get_p50(struct event_base *base, long ops)
{
    return redis_gets(base, ops, 1, 1, redis_store);
}

static double bench_redis_get_p99(struct event_base *base, long ops)
{
    return redis_gets(base, ops, 1, 2, redis_store);
}

static double bench_redis_get_inflight64(struct event_base *base, long ops)
{
    return redis_gets(base, ops, 64, 0, redis_store);
}

static double redis_all(struct event_base *base, long ops, bool pass, store_maker make)
{
    ld_store *st = make(base);
    wait_ok(ld_store_init(st, redis_data()), "redis init");
    drain(base);
    double total = 0, longest = 0;
    for (long i = 0; i < ops; i++) {
        /* a flag changed before each (off the clock): the store's all reads
         * other bytes, and parses them all again (it hands out its last
         * result again for the same bytes) */
        json_t *f0 = json_pack("{s:s,s:I,s:b}", "key", "flag-000000", "version",
                               (json_int_t)(1000000 + i), "on", 1);
        wait_ok(ld_store_upsert(st, ld_kind_features(), f0), "upsert");
        json_decref(f0);
        double t0 = now_ns(), c0 = thread_cpu_ns();
        ld_future *f = ld_store_all(st, ld_kind_features());
        if (thread_cpu_ns() - c0 > longest)
            longest = thread_cpu_ns() - c0;
        await_passes(base, f, &longest);
        size_t n = json_object_size(ld_future_json(f));
        ld_future_unref(f);
        total += now_ns() - t0;
        if (n != redis_nfeatures()) {
            fprintf(stderr, "redis.all: %zu flags, not %zu\n", n, redis_nfeatures());
            exit(1);
        }
    }
    ld_store_free(st);
    drain(base);
    return pass ? longest / 1e6 : total / (double)ops / 1e6;
}

static double bench_redis_all_ms(struct event_base *base, long ops)
{
    return redis_all(base, ops, false, redis_store);
}

static double bench_redis_all_pass_ms(struct event_base *base, long ops)
{
    return redis_all(base, ops, true, redis_store);
}

/* The same Redis behind the caching store (ttl 30 s, as the Node SDK's
 * cache in bench/node/redis-bench.mjs), filled by the init through it: every
 * get is answered from the cache.
 *   redis.get.cached          store.get's loop (its data and random keys,
 *                             each get issued from the previous one's
 *                             callback) through the cache
 *   redis.eval.daemon         a detail evaluation of a client in daemon mode
 *                             over that cache (as client.eval.bool: events
 *                             off, flag-000042, awaited, value read) */
static ld_store *redis_cached_store(struct event_base *base)
{
    ld_store *st = ld_caching_store_new(base, redis_store(base), 30000);
    if (!st)
        exit(1);
    return st;
}

/* As store.get (the same data, keys and loop), through the cache. */
static double bench_redis_get_cached(struct event_base *base, long ops)
{
    ld_store *st = redis_cached_store(base);
    json_t *data = make_data(FLAGS);
    wait_ok(ld_store_init(st, data), "redis init");
    json_decref(data);
    drain(base);
    char(*keys)[32] = malloc((size_t)FLAGS * sizeof(*keys));
    if (!keys)
        exit(1);
    for (long i = 0; i < FLAGS; i++)
        flag_key(keys[i], sizeof(keys[i]), i);
    struct getter g = {st, keys, ops};
    done_count = 0;
    double t0 = now_ns();
    ld_future_on_complete(ld_store_get(g.st, ld_kind_features(), keys[0]), get_next, &g);
    run_until(base, ops);
    double ns = (now_ns() - t0) / (double)ops;
    ld_store_free(st);
    drain(base);
    free(keys);
    return ns;
}

static double bench_redis_eval_daemon(struct event_base *base, long ops)
{
    ld_store *st = redis_cached_store(base);
    wait_ok(ld_store_init(st, redis_data()), "redis init");
    drain(base);
    ld_client_options *o = ld_client_options_new();
    ld_client_options_set_store(o, st);
    ld_client_options_set_daemon_mode(o, true);
    ld_client *cl = ld_client_new(base, o);
    ld_client_options_free(o);
    if (!cl)
        exit(1);
    wait_ok(ld_client_ready(cl), "ready");
    double ns = client_evals(base, cl, "flag-000042", ops, "redis.eval.daemon");
    ld_client_free(cl);
    drain(base);
    ld_store_free(st);
    drain(base);
    return ns;
}

/* Each workload runs in a process of its own (run_workload), so that its
 * figures are measured in the state it says: libevent threading on only
 * for those marked threaded (it cannot be turned off again, and with it on
 * every future may be shared between threads, so it pays for atomic
 * operations: the *.threaded rows show that price), memory figures on a
 * fresh heap, and the peak RSS column that workload's own. */
static const struct workload workloads[] = {
    {"future.pending_bytes", 1000000, bench_pending_bytes, 0},
    {"future.roundtrip.batched", 1000000, bench_batched, 0},
    {"future.roundtrip.sequential", 1000000, bench_sequential, 0},
    {"future.wait", 200000, bench_wait, 0},
    {"future.then_chain", 1000000, bench_then_chain, 0},
    {"future.then_chain.1m", 1000000, bench_then_chain_long, 0},
    {"future.cross_thread", 1000000, bench_cross_thread, 1},
    {"future.roundtrip.batched.threaded", 1000000, bench_batched, 1},
    {"future.roundtrip.sequential.threaded", 1000000, bench_sequential, 1},
    {"future.then_chain.threaded", 1000000, bench_then_chain, 1},
    {"store.item_bytes", 100000, bench_store_item_bytes, 0},
    {"store.init", 20, bench_store_init, 0},
    {"store.get", 1000000, bench_store_get, 0},
    {"store.get.batched", 1000000, bench_store_get_batched, 0},
    {"store.get.raw", 1000000, bench_store_get_raw, 0},
    {"store.get.read", 1000000, bench_store_get_read, 0},
    {"store.init.parsed", 5, bench_store_init_parsed, 0},
    {"store.all.cold", 20, bench_store_all_cold, 0},
    {"store.upsert", 200000, bench_store_upsert, 0},
    {"store.upsert.1k", 200000, bench_store_upsert_1k, 0},
    {"store.upsert.100k", 200000, bench_store_upsert_100k, 0},
    {"store.upsert.held", 200000, bench_store_upsert_held, 0},
    {"store.delete", 200000, bench_store_delete, 0},
    {"store.upsert.owned", 100000, bench_store_upsert_owned, 0},
    {"store.delete.owned", 100000, bench_store_delete_owned, 0},
    {"store.upsert.parsed", 100000, bench_store_upsert_parsed, 0},
    {"store.bytes_per_flag", FLAGS, bench_store_bytes_per_flag, 0},
    {"store.all", 100000, bench_store_all, 0},
    {"store.all.held", 100000, bench_store_all_held, 0},
    {"store.held_growth_kb", 1000000, bench_store_held_growth_kb, 0},
    {"store.init.100k.pass_ms", 3, bench_store_init_100k_pass_ms, 0},
    {"eval.bool", 1000000, bench_eval_bool, 0},
    {"eval.bool.random", 1000000, bench_eval_bool_random, 0},
    {"eval.rich", 1000000, bench_eval_rich, 0},
    {"eval.segment", 1000000, bench_eval_segment, 0},
    {"eval.matches.short", 1000000, bench_eval_matches, 0},
    {"eval.matches.runaway", 1000, bench_eval_matches_runaway, 0},
    {"eval.all_flags", 20, bench_eval_all_flags, 0},
    {"eval.all_flags.first", 5, bench_eval_all_flags_first, 0},
    {"eval.all_flags.kinds_1", 3, bench_eval_all_flags_kinds_1, 0},
    {"eval.all_flags.kinds_3001", 3, bench_eval_all_flags_kinds_3001, 0},
    {"eval.allocs.bool", 100000, bench_eval_allocs_bool, 0},
    {"eval.allocs.rich", 100000, bench_eval_allocs_rich, 0},
    {"eval.bytes_per_flag", FLAGS, bench_eval_bytes_per_flag, 0},
    {"eval.compile.targets_1m", 3, bench_compile_targets, 1},
    {"eval.compile.targets_1m.pass_ms", 3, bench_compile_targets_pass, 1},
    {"eval.compile.included_1m", 3, bench_compile_included, 1},
    {"eval.compile.included_1m.pass_ms", 3, bench_compile_included_pass, 1},
    {"eval.compile.in_1m", 3, bench_compile_in, 1},
    {"eval.compile.in_1m.pass_ms", 3, bench_compile_in_pass, 1},
    {"eval.big_segment", 200000, bench_eval_big_segment, 0},
    {"eval.big_segment.store", 200000, bench_eval_big_segment_store, 0},
    {"events.summary_record", 10000000, bench_summary_record, 0},
    {"client.eval.bool", 1000000, bench_client_eval_bool, 0},
    {"client.eval.bool.events", 1000000, bench_client_eval_bool_events, 0},
    {"client.eval.tracked.events", 200000, bench_client_eval_tracked_events, 1},
    {"client.eval.tracked.flush_ms", 200000, bench_client_eval_tracked_flush_ms, 1},
    {"events.flush_10k.ms", 5, bench_events_flush_ms, 1},
    {"events.flush_10k.pass_ms", 5, bench_events_flush_pass_ms, 1},
    {"events.flush_10k.busy_ms", 5, bench_events_flush_busy_ms, 1},
    {"events.flush_10k.kb", 1, bench_events_flush_kb, 1},
    {"events.summary_record.1k_flags", 10000000, bench_summary_record_1k, 0},
    {"file.load_stall_ms", 1, bench_file_load_stall, 1},
    {"file.load_busy_ms", 1, bench_file_load_busy, 1},
    {"file.idle_stall_ms", 1, bench_file_idle_stall, 1},
    {"file.basis_free_ms", 1, bench_file_basis_free, 1},
    {"file.store_init_ms", 1, bench_file_store_init, 1},
    {"stream.put_ready_ms", 3, bench_stream_put_ready, 1},
    {"stream.put_busy_ms", 3, bench_stream_put_busy, 1},
    {"stream.patch_us", 1000, bench_stream_patch, 1},
    {"stream.client_kb", 1, bench_stream_client_kb, 1},
    {"stream.patch_p99_us", 1000, bench_stream_patch_p99, 1},
    {"redis.init_10k.ms", 5, bench_redis_init_ms, 0},
    {"redis.init_10k.pass_ms", 5, bench_redis_init_pass_ms, 0},
    {"redis.get", 20000, bench_redis_get, 0},
    {"redis.get.p50_us", 20000, bench_redis_get_p50, 0},
    {"redis.get.p99_us", 20000, bench_redis_get_p99, 0},
    {"redis.get.inflight64", 200000, bench_redis_get_inflight64, 0},
    {"redis.all_10k.ms", 5, bench_redis_all_ms, 0},
    {"redis.all_10k.pass_ms", 5, bench_redis_all_pass_ms, 0},
    {"redis.get.cached", 1000000, bench_redis_get_cached, 0},
    {"redis.eval.daemon", 1000000, bench_redis_eval_daemon, 0},
    {"alt.event_once", 1000000, bench_alt_event_once, 0},
    {"alt.event_per_future", 1000000, bench_alt_event_per_future, 0},
};

static int selected(const char *name, int argc, char **argv, int first)
{
    if (first >= argc)
        return 1;
    for (int i = first; i < argc; i++) {
        size_t n = strlen(argv[i]);
        if (strcmp(name, argv[i]) == 0 || (strncmp(name, argv[i], n) == 0 && name[n] == '.'))
            return 1;
    }
    return 0;
}

static void measure_workload(const struct workload *w)
{
    if (w->threaded)
        evthread_use_pthreads();
    if (needs_redis(w))
        redis_setup();
    struct event_base *base = event_base_new();
    if (!base) {
        fprintf(stderr, "event_base_new failed\n");
        exit(1);
    }
    /* a memory figure (bytes or KiB): the first run (on fresh memory) is
     * the honest one, later runs reuse freed memory. */
    int is_bytes = strstr(w->name, "bytes") != NULL || strstr(w->name, "_kb") != NULL;
    double *v = malloc(sizeof(double) * (size_t)runs);
    if (!v)
        exit(1);
    if (is_bytes) {
        v[0] = w->fn(base, w->ops);
        drain(base);
        report(w->name, w->ops, v[0]);
    } else {
        w->fn(base, w->ops); /* warm-up */
        drain(base);
        for (int r = 0; r < runs; r++) {
            v[r] = w->fn(base, w->ops);
            drain(base);
        }
        qsort(v, (size_t)runs, sizeof(double), cmp_double);
        report(w->name, w->ops, v[runs / 2]);
    }
    free(v);
    event_base_free(base);
}

/* Runs the workload in a child process, which reports it (see workloads). */
static void run_workload(const struct workload *w)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        measure_workload(w);
        exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        perror("waitpid");
        exit(1);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: failed\n", w->name);
        exit(1);
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: ldasync-bench [--json] [--runs N] [GROUP|NAME ...]\n"
                    "       ldasync-bench --dump-eval-data  (the eval group's data as JSON)\n"
                    "workloads:\n");
    for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++)
        fprintf(stderr, "  %s\n", workloads[i].name);
}

int main(int argc, char **argv)
{
    int first = 1;
    while (first < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "--json") == 0) {
            json_out = 1;
        } else if (strcmp(argv[first], "--runs") == 0 && first + 1 < argc) {
            runs = atoi(argv[++first]);
            if (runs < 1)
                runs = 1;
        } else if (strcmp(argv[first], "--dump-eval-data") == 0) {
            char *text = eval_data_text();
            puts(text);
            free(text);
            return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
        } else {
            usage();
            return strcmp(argv[first], "--help") == 0 ? 0 : 2;
        }
        first++;
    }
    int any = 0;
    for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++)
        any |= selected(workloads[i].name, argc, argv, first);
    if (!any) {
        usage();
        return 2;
    }
    if (!json_out)
        printf("%-38s %10s %10s %10s\n", "workload", "ops", "ns/op", "peak_kb");
    for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++)
        if (selected(workloads[i].name, argc, argv, first)) {
            const char *missing = needs_redis(&workloads[i]) ? redis_missing() : NULL;
            if (!missing)
                run_workload(&workloads[i]);
            else if (json_out)
                printf("{\"name\":\"%s\",\"skipped\":\"%s\"}\n", workloads[i].name, missing);
            else
                printf("%-38s skipped: %s\n", workloads[i].name, missing);
        }
    return 0;
}
