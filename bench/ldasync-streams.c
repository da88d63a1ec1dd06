/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync-streams: many server-side streaming clients against one
 * ldasync-serve, for the serve bench (bench/serve-bench.sh).
 *
 * It opens N connections to GET /all (as LaunchDarkly's server-side SDKs
 * stream), waits until every one has its `put` event, reads the server's
 * resident memory (from /proc, given its pid) before and after, then
 * rewrites one flag of a data file the server watches and times how long
 * until every stream has received a `patch` event: the figure is the time
 * from the write to the last stream's patch, with the median and the 99th
 * percentile over the streams. Plain libevent, one thread: the client's
 * own delay is inside the figure, so it is an upper bound.
 *
 * usage: ldasync-streams --port P --key KEY --streams N --pid PID
 *                        --file DATA.json --flag KEY [--host 127.0.0.1]
 *                        [--pause MS]
 * --pause: waits MS milliseconds between the last put and the change, and
 * says so on stderr ("connected"), to attach a profiler to the server;
 * then when the file is changed, on the clock of `perf record -k
 * CLOCK_MONOTONIC`.
 * The data file must hold the flag under "flags" with a boolean or number
 * variation list; each run appends a variation to it (a change the server
 * sees as a new version of the flag).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct stream {
    struct bufferevent *bev;
    int got_put;
    int got_patch;
    double patch_ms; /* since the write */
};

static struct event_base *base;
static struct stream *streams;
static long nstreams, nput, npatch, nfailed;
static double t_write;
static const char *key = "", *host = "127.0.0.1";
static int port = 8030;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long rss_kb(long pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* Reads whole lines; an "event: put" / "event: patch" line marks the
 * stream. Everything else (the events' data, heartbeats) is dropped. */
static void on_read(struct bufferevent *bev, void *arg)
{
    struct stream *s = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t n;
    char *line;
    while ((line = evbuffer_readln(in, &n, EVBUFFER_EOL_LF)) != NULL) {
        if (!s->got_put && strcmp(line, "event: put") == 0) {
            s->got_put = 1;
            if (++nput == nstreams)
                event_base_loopbreak(base);
        } else if (!s->got_patch && t_write > 0 && strcmp(line, "event: patch") == 0) {
            s->got_patch = 1;
            s->patch_ms = now_ms() - t_write;
            if (++npatch == nstreams - nfailed)
                event_base_loopbreak(base);
        }
        free(line);
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct stream *s = arg;
    (void)bev;
    if (what & BEV_EVENT_CONNECTED)
        return;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        fprintf(stderr, "stream %ld: %s\n", (long)(s - streams),
                (what & BEV_EVENT_EOF) ? "closed by the server" : strerror(errno));
        bufferevent_free(s->bev);
        s->bev = NULL;
        nfailed++;
        if (nput + nfailed == nstreams || npatch == nstreams - nfailed)
            event_base_loopbreak(base);
    }
}

static int open_stream(struct stream *s, const struct sockaddr_in *sin)
{
    s->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!s->bev)
        return -1;
    bufferevent_setcb(s->bev, on_read, NULL, on_event, s);
    bufferevent_enable(s->bev, EV_READ);
    evbuffer_add_printf(bufferevent_get_output(s->bev),
                        "GET /all HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: %s\r\n"
                        "Accept: text/event-stream\r\n\r\n",
                        host, port, key);
    return bufferevent_socket_connect(s->bev, (const struct sockaddr *)sin, sizeof *sin);
}

/* Adds a variation to `flag` in the data file and bumps its version, then
 * writes the file in place. @return 0 or -1. */
static int change_flag(const char *file, const char *flag)
{
    json_error_t err;
    json_t *data = json_load_file(file, 0, &err);
    json_t *f = data ? json_object_get(json_object_get(data, "flags"), flag) : NULL;
    json_t *vars = f ? json_object_get(f, "variations") : NULL;
    if (!json_is_array(vars)) {
        fprintf(stderr, "%s: no flags.%s.variations (%s)\n", file, flag, data ? "" : err.text);
        json_decref(data);
        return -1;
    }
    json_array_append_new(vars, json_integer((json_int_t)json_array_size(vars)));
    json_object_set_new(f, "version",
                        json_integer(json_integer_value(json_object_get(f, "version")) + 1));
    int rc = json_dump_file(data, file, JSON_INDENT(2));
    json_decref(data);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    long pid = 0, pause_ms = 0;
    const char *file = NULL, *flag = NULL;
    nstreams = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port"))
            port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--host"))
            host = argv[i + 1];
        else if (!strcmp(argv[i], "--key"))
            key = argv[i + 1];
        else if (!strcmp(argv[i], "--streams"))
            nstreams = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--pid"))
            pid = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--file"))
            file = argv[i + 1];
        else if (!strcmp(argv[i], "--flag"))
            flag = argv[i + 1];
        else if (!strcmp(argv[i], "--pause"))
            pause_ms = atol(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!file || !flag || nstreams <= 0) {
        fprintf(stderr,
                "usage: %s --port P --key KEY --streams N --pid PID --file F --flag K [--host H] "
                "[--pause MS]\n",
                argv[0]);
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)nstreams + 64) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct sockaddr_in sin = {0};
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
        fprintf(stderr, "bad --host %s\n", host);
        return 2;
    }
    base = event_base_new();
    streams = calloc((size_t)nstreams, sizeof *streams);
    if (!base || !streams)
        return 1;
    long rss0 = pid ? rss_kb(pid) : -1;
    double t0 = now_ms();
    for (long i = 0; i < nstreams; i++) {
        if (open_stream(&streams[i], &sin) != 0) {
            fprintf(stderr, "stream %ld: cannot connect: %s\n", i, strerror(errno));
            return 1;
        }
        /* let the server accept as we go, so the backlog never overflows */
        if (i % 256 == 255)
            event_base_loop(base, EVLOOP_NONBLOCK);
    }
    event_base_dispatch(base);
    double t_connected = now_ms() - t0;
    if (nput + nfailed < nstreams || nfailed) {
        fprintf(stderr, "%ld of %ld streams got their put (%ld failed)\n", nput, nstreams, nfailed);
        return 1;
    }
    long rss1 = pid ? rss_kb(pid) : -1;
    if (pause_ms > 0) {
        fprintf(stderr, "connected\n");
        struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    t_write = now_ms();
    if (pause_ms > 0)
        fprintf(stderr, "changing the file at %.6f s (CLOCK_MONOTONIC)\n", t_write / 1e3);
    if (change_flag(file, flag) != 0)
        return 1;
    event_base_dispatch(base);
    double last = now_ms() - t_write;
    if (npatch < nstreams) {
        fprintf(stderr, "%ld of %ld streams got the patch (%ld failed)\n", npatch, nstreams,
                nfailed);
        return 1;
    }
    double *ms = malloc((size_t)nstreams * sizeof *ms);
    if (!ms)
        return 1;
    for (long i = 0; i < nstreams; i++)
        ms[i] = streams[i].patch_ms;
    qsort(ms, (size_t)nstreams, sizeof *ms, cmp_double);
    printf("streams %ld\n", nstreams);
    printf("connect_all_ms %.1f\n", t_connected);
    printf("patch_all_ms %.1f\n", last);
    printf("patch_p50_ms %.1f\n", ms[nstreams / 2]);
    printf("patch_p99_ms %.1f\n", ms[(nstreams * 99) / 100]);
    if (rss0 > 0 && rss1 > 0)
        printf("server_rss_kb %ld -> %ld, per_stream_bytes %.0f\n", rss0, rss1,
               (double)(rss1 - rss0) * 1024.0 / (double)nstreams);
    for (long i = 0; i < nstreams; i++)
        if (streams[i].bev)
            bufferevent_free(streams[i].bev);
    free(ms);
    free(streams);
    event_base_free(base);
    return 0;
}
