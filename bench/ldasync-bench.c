/*
 * ldasync-bench: fixed workloads, each reported as the median of several
 * timed runs after a warm-up run.
 *
 *   ldasync-bench [--json] [--runs N] [GROUP|NAME ...]
 *
 * GROUP is the part of a name before the first dot ("future"); with no
 * argument every workload runs. The "alt" group measures the designs that
 * ld_future's dispatch was chosen against (lib/future.c), as batched round
 * trips: event_base_once() per callback, and an event inside each future. Text output: name, ops
 * per run, ns/op (for
 * *_bytes workloads: bytes per item), peak RSS of the process in KiB.
 * --json prints one object per line with the same fields.
 */
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <ldasync/ldasync.h>

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

/* pending_bytes first: it measures fresh memory, before other workloads
 * leave freed futures around for reuse. Threaded workloads last: libevent
 * threading cannot be turned off again, and with it on every future may be
 * shared between threads, so it pays for atomic operations (the *.threaded
 * rows show that price). The alt group, a reference, runs last. */
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

static void run_workload(const struct workload *w)
{
    if (w->threaded)
        evthread_use_pthreads();
    struct event_base *base = event_base_new();
    if (!base) {
        fprintf(stderr, "event_base_new failed\n");
        exit(1);
    }
    /* pending_bytes is a memory figure: the first run (on fresh memory) is
     * the honest one, later runs reuse freed futures. */
    int is_bytes = strstr(w->name, "_bytes") != NULL;
    double *v = malloc(sizeof(double) * (size_t)runs);
    if (!v)
        exit(1);
    if (is_bytes) {
        v[0] = w->fn(base, w->ops);
        report(w->name, w->ops, v[0]);
    } else {
        w->fn(base, w->ops); /* warm-up */
        for (int r = 0; r < runs; r++)
            v[r] = w->fn(base, w->ops);
        qsort(v, (size_t)runs, sizeof(double), cmp_double);
        report(w->name, w->ops, v[runs / 2]);
    }
    free(v);
    event_base_free(base);
}

static void usage(void)
{
    fprintf(stderr, "usage: ldasync-bench [--json] [--runs N] [GROUP|NAME ...]\nworkloads:\n");
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
        if (selected(workloads[i].name, argc, argv, first))
            run_workload(&workloads[i]);
    return 0;
}
