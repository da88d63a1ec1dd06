/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: LaunchDarkly's file data source, an FDv2 initializer and
 * synchronizer (file_source.h).
 *
 * Both share a `struct src`: the copied paths and a worker (core-internal.h)
 * that reads them. A read is a job of the worker: it opens, reads and
 * parses the files, merges them, (for the synchronizer) keeps versions
 * monotonic and builds the change set (file_data.c), and its future is
 * fulfilled with a `struct ld__fs_result`, from the loop; the fetch's
 * future adopts it as a basis, the synchronizer hands it to its next. The
 * worker touches nothing but the job, the paths and the synchronizer's
 * table of versions (which only the reader touches, one read at a time).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_SYS_INOTIFY_H
#include <sys/inotify.h>
#endif

#include <event2/event.h>
#include <jansson.h>

#include <ldasync/error.h>
#include <ldasync/fdv2.h>
#include <ldasync/file_source.h>

#include "core/core-internal.h"
#include "sources/sources-internal.h"

#define QUIET_MAX_MS 1000 /* the longest a burst of changes delays a read */

/* ------------------------------------------------------------------------- */
/* The source and its reads                                                  */

struct src {
    struct event_base *base;
    char **paths;
    size_t n;
    unsigned refs; /* loop thread: the owner's, one per read not handed on */
    bool freed;
    struct ld__worker *worker;
    /* synchronizer: the versions yielded; the reader's only */
    bool versions;
    struct ld__fs_versions seen;
};

static struct event *ev_new(struct event_base *base, int fd, short what,
                            void (*cb)(evutil_socket_t, short, void *), void *arg)
{
    struct event *ev = ld__calloc(1, event_get_struct_event_size());
    if (ev && event_assign(ev, base, fd, what, cb, arg) != 0) {
        ld__free(ev);
        ev = NULL;
    }
    return ev;
}

static void ev_free(struct event *ev)
{
    if (ev) {
        event_del(ev);
        ld__free(ev);
    }
}

static bool job_wanted(const void *job)
{
    return ld__job_wanted(job);
}

/* The worker's job: a read of the files of `arg`, a struct src. */
static void *read_job(const struct ld__work *job, void *arg, int *code)
{
    struct src *s = arg;
    struct ld__fs_ctl ctl = {job_wanted, job, !ld__job_on_loop(job)};
    (void)code; /* NULL: no memory, or no longer wanted */
    return ld__fs_read_all(s->paths, s->n, s->versions ? &s->seen : NULL, &ctl);
}

/* Frees the copies of the paths. */
static void src_destroy(struct src *s)
{
    for (size_t i = 0; s->paths && i < s->n; i++)
        ld__free(s->paths[i]);
    ld__free(s->paths);
    s->paths = NULL;
    s->n = 0;
}

/* Sets up `s` with copies of the paths: 0, or LD_EINVAL / LD_ENOMEM with
 * nothing left to free but `s` itself. */
static int src_init(struct src *s, struct event_base *base, const char *const *paths, size_t n)
{
    if (!base || !paths || n == 0)
        return LD_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!paths[i] || !*paths[i])
            return LD_EINVAL;
    s->base = base;
    s->refs = 1;
    s->worker = ld__worker_new(base);
    if (!s->worker)
        return LD_ENOMEM;
    s->paths = ld__calloc(n, sizeof(char *));
    s->n = s->paths ? n : 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!(s->paths[i] = ld__strdup(paths[i]))) {
            src_destroy(s);
            break;
        }
    }
    if (!s->paths) {
        ld__worker_free(s->worker);
        s->worker = NULL;
        return LD_ENOMEM;
    }
    return 0;
}

/* At free: ends the worker (joined), rejects what it had not started. */
static void src_stop_reader(struct src *s)
{
    s->freed = true;
    ld__worker_free(s->worker);
    s->worker = NULL;
}

static void src_unref(struct src *s)
{
    if (--s->refs)
        return;
    ld__worker_free(s->worker); /* not stopped yet when made in vain */
    ld__fs_versions_clear(&s->seen);
    src_destroy(s);
    ld__free(s); /* struct src is first in both sources */
}

/* ------------------------------------------------------------------------- */
/* The initializer                                                           */

static const char *init_name(void *impl)
{
    (void)impl;
    return "file";
}

/* The result of a read as the fetch's basis, or its rejection. */
static void to_basis(ld_future *in, ld_future *out, void *arg)
{
    struct ld__fs_result *r = ld_future_ptr(in);
    (void)arg;
    if (r->code) {
        if (r->msg)
            ld_future_reject(out, r->code, "%s", r->msg);
        else
            ld_future_reject(out, r->code, NULL);
    } else {
        ld_fdv2_basis *basis = ld_fdv2_basis_new(r->cs, false, NULL);
        r->cs = NULL; /* stolen */
        if (basis)
            ld_fdv2_fulfill_basis(out, basis);
        else
            ld_future_reject(out, LD_ENOMEM, NULL);
    }
}

/* The fetch's `out` adopts the read's basis; cancelling `out` (at stop
 * and free) cancels the read through the chain. */
static void init_fetch(void *impl, ld_future *out)
{
    struct src *s = impl;
    ld_future *read = ld__worker_submit(s->worker, read_job, s, ld__fs_result_free);
    ld_future *basis = read ? ld_future_then(read, to_basis, NULL) : NULL;
    if (!basis || ld_future_forward(out, basis) != 0)
        ld_future_reject(out, LD_ENOMEM, NULL);
    ld_future_unref(out);
}

static void init_stop(void *impl, ld_future *out)
{
    ld__worker_stop(((struct src *)impl)->worker);
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void init_free(void *impl)
{
    struct src *s = impl;
    src_stop_reader(s);
    src_unref(s);
}

static const struct ld_initializer_ops INIT_OPS = {
    LD_INITIALIZER_OPS_VERSION, init_name, init_fetch, init_stop, init_free,
};

ld_initializer *ld_file_initializer_new(struct event_base *base, const char *const *paths, size_t n)
{
    struct src *s = ld__calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (src_init(s, base, paths, n) != 0) {
        ld__free(s);
        return NULL;
    }
    ld_initializer *in = ld_initializer_new(base, &INIT_OPS, s);
    if (!in)
        src_unref(s);
    return in;
}

/* ------------------------------------------------------------------------- */
/* The synchronizer                                                          */

struct fsync {
    struct src s;                   /* first */
    struct ld__src_waiters waiters; /* nexts waiting, in order */
    bool stopped;
    bool dirty;   /* the files changed since the last read began (or: none yet) */
    bool loading; /* a read runs */
    bool recheck; /* the quiet time ended while a read ran */
    bool named;   /* an event named one of the files */
    bool polling;
    bool quiet_armed;
    int64_t burst_ms; /* when the current burst of changes began */
    int64_t interval_ms;
    struct ld__fs_sig *loaded; /* the files' status at the last read */
    struct ld__fs_sig *polled; /* ... at the last poll */
    struct ld__fs_sig *now;    /* scratch */
    struct event *poll_ev, *quiet_ev, *ino_ev;
    int ino_fd;
    char **names; /* base names to match inotify events with */
    size_t nnames;
    /* changes only: the consumer holds what was yielded last (a full set,
     * and every update since) */
    bool synced;
    ld_synchronizer *self; /* the registry's key */
    struct fsync *next_live;
};

/* The live synchronizers, for ld__file_synchronizer_lost(): a consumer on
 * any loop (thread) may ask about its own. */
static pthread_mutex_t g_live_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fsync *g_live;

static void live_add(struct fsync *y, ld_synchronizer *self)
{
    y->self = self;
    pthread_mutex_lock(&g_live_mu);
    y->next_live = g_live;
    g_live = y;
    pthread_mutex_unlock(&g_live_mu);
}

static void live_remove(struct fsync *y)
{
    pthread_mutex_lock(&g_live_mu);
    for (struct fsync **link = &g_live; *link; link = &(*link)->next_live) {
        if (*link == y) {
            *link = y->next_live;
            break;
        }
    }
    pthread_mutex_unlock(&g_live_mu);
}

void ld__file_synchronizer_lost(ld_synchronizer *sync)
{
    pthread_mutex_lock(&g_live_mu);
    for (struct fsync *y = g_live; y; y = y->next_live)
        if (y->self == sync)
            y->synced = false; /* the loop thread's own synchronizer */
    pthread_mutex_unlock(&g_live_mu);
}

static const char *sync_name(void *impl)
{
    (void)impl;
    return "file";
}

static void stat_all(struct fsync *y, struct ld__fs_sig *out)
{
    for (size_t i = 0; i < y->s.n; i++)
        ld__fs_sig_of_path(&out[i], y->s.paths[i]);
}

static bool sigs_eq(const struct fsync *y, const struct ld__fs_sig *a, const struct ld__fs_sig *b)
{
    for (size_t i = 0; i < y->s.n; i++)
        if (!ld__fs_sig_eq(&a[i], &b[i]))
            return false;
    return true;
}

static int64_t mono_ms(void)
{
    return ld__now_ns() / 1000000;
}

/* A change was seen: read once the files have been quiet for a while. */
static void arm_quiet(struct fsync *y)
{
    if (y->stopped || !y->quiet_ev)
        return;
    int64_t now = mono_ms();
    if (!y->quiet_armed) {
        y->quiet_armed = true;
        y->burst_ms = now;
    }
    int64_t left = y->burst_ms + QUIET_MAX_MS - now;
    int64_t wait = left < LD_FILE_QUIET_MS ? (left > 0 ? left : 0) : LD_FILE_QUIET_MS;
    struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)(wait % 1000) * 1000};
    event_add(y->quiet_ev, &tv);
}

static void sync_loaded(struct fsync *y, struct ld__fs_result *r);

/* A read is over: its future is fulfilled with its result, or rejected (no
 * memory, or no longer wanted). */
static void sync_read(ld_future *read, void *arg)
{
    struct fsync *y = arg;
    if (!y->s.freed)
        sync_loaded(y, ld_future_is_fulfilled(read) ? ld_future_ptr(read) : NULL);
    src_unref(&y->s);
}

static void maybe_load(struct fsync *y)
{
    if (y->stopped || y->loading || !y->dirty || !y->waiters.head)
        return;
    y->s.seen.changes_only = y->synced; /* no read runs: the reader's to read */
    ld_future *read = ld__worker_submit(y->s.worker, read_job, &y->s, ld__fs_result_free);
    if (!read || ld_future_on_complete(read, sync_read, y) != 0) {
        /* no memory: try again after a quiet time */
        y->named = true;
        arm_quiet(y);
        return;
    }
    y->s.refs++; /* sync_read's */
    y->dirty = false;
    y->loading = true;
}

#ifdef HAVE_SYS_INOTIFY_H
static void watch_targets(struct fsync *y);
#endif

/* The quiet time is over (or a read that ran meanwhile ended): read if the
 * files changed since the last read. */
static void read_if_changed(struct fsync *y)
{
#ifdef HAVE_SYS_INOTIFY_H
    watch_targets(y); /* a link may point elsewhere now */
#endif
    stat_all(y, y->now);
    if (y->named || !sigs_eq(y, y->now, y->loaded)) {
        y->dirty = true;
        y->named = false;
    }
    maybe_load(y);
}

static void quiet_cb(evutil_socket_t fd, short what, void *arg)
{
    struct fsync *y = arg;
    (void)fd;
    (void)what;
    if (y->polling) {
        stat_all(y, y->now);
        if (!sigs_eq(y, y->now, y->polled)) { /* still changing */
            memcpy(y->polled, y->now, y->s.n * sizeof(struct ld__fs_sig));
            if (mono_ms() - y->burst_ms < QUIET_MAX_MS) {
                arm_quiet(y);
                return;
            }
            /* changing for too long: read now (a read during which a file
             * changes is done again) */
        }
    }
    y->quiet_armed = false;
    if (y->loading)
        y->recheck = true;
    else
        read_if_changed(y);
}

static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
    struct fsync *y = arg;
    (void)fd;
    (void)what;
    stat_all(y, y->now);
    if (!sigs_eq(y, y->now, y->polled)) {
        memcpy(y->polled, y->now, y->s.n * sizeof(struct ld__fs_sig));
        arm_quiet(y);
    }
}

static int start_polling(struct fsync *y)
{
    y->polling = true;
    if (!y->poll_ev)
        y->poll_ev = ev_new(y->s.base, -1, EV_PERSIST, poll_cb, y);
    if (!y->poll_ev)
        return LD_ENOMEM;
    stat_all(y, y->polled);
    struct timeval tv = {(time_t)(y->interval_ms / 1000),
                         (suseconds_t)(y->interval_ms % 1000) * 1000};
    return event_add(y->poll_ev, &tv) == 0 ? 0 : LD_ENOMEM;
}

#ifdef HAVE_SYS_INOTIFY_H
static void stop_inotify(struct fsync *y)
{
    ev_free(y->ino_ev);
    y->ino_ev = NULL;
    /* Closing an inotify instance waits for an RCU grace period of the
     * kernel (tens of milliseconds, no CPU): the worker does it, off the loop. */
    if (y->ino_fd >= 0)
        ld__worker_close_later(y->s.worker, y->ino_fd);
    y->ino_fd = -1;
}

static bool is_watched_name(const struct fsync *y, const char *name)
{
    for (size_t i = 0; i < y->nnames; i++)
        if (strcmp(y->names[i], name) == 0)
            return true;
    return false;
}

static void inotify_cb(evutil_socket_t fd, short what, void *arg)
{
    struct fsync *y = arg;
    (void)what;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool seen = false, lost = false;
    for (;;) {
        ssize_t k = read(fd, buf, sizeof(buf));
        if (k <= 0)
            break;
        for (char *p = buf; p < buf + k;) {
            const struct inotify_event *e = (const struct inotify_event *)(void *)p;
            seen = true;
            if (e->mask & (IN_Q_OVERFLOW))
                y->named = true;
            if (e->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT))
                lost = true;
            if (e->len && is_watched_name(y, e->name))
                y->named = true;
            p += sizeof(struct inotify_event) + e->len;
        }
    }
    if (lost) { /* a directory went away: poll from now on */
        stop_inotify(y);
        y->named = true;
        if (start_polling(y) != 0)
            y->polling = false;
    }
    if (seen)
        arm_quiet(y);
}

/* Adds the base name of `path` to the names, and a watch on its directory. */
static int watch_path(struct fsync *y, const char *path)
{
    char dir[PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof(dir))
        return -1;
    memcpy(dir, path, len + 1);
    char *slash = strrchr(dir, '/');
    const char *name = slash ? slash + 1 : dir;
    if (!is_watched_name(y, name)) {
        char **grown = ld__realloc(y->names, (y->nnames + 1) * sizeof(char *));
        if (!grown)
            return LD_ENOMEM;
        y->names = grown;
        if (!(y->names[y->nnames] = ld__strdup(name)))
            return LD_ENOMEM;
        y->nnames++;
    }
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    uint32_t mask = IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                    IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
    return inotify_add_watch(y->ino_fd, dir, mask) >= 0 ? 0 : -1;
}

/* Watches the directory of the target of each path that is a symbolic
 * link, as it is now (a link pointed at a file elsewhere since the watch
 * began: that file's directory; watching a directory again changes
 * nothing). One that cannot be watched: polling from now on. */
static void watch_targets(struct fsync *y)
{
    for (size_t i = 0; i < y->s.n && y->ino_fd >= 0; i++) {
        char real[PATH_MAX];
        if (realpath(y->s.paths[i], real) && strcmp(real, y->s.paths[i]) != 0 &&
            watch_path(y, real) != 0) {
            stop_inotify(y);
            y->named = true;
            if (start_polling(y) != 0)
                y->polling = false;
        }
    }
}

/* True when a path goes through a symbolic link (its own, or a
 * directory's on the way) or cannot be resolved yet: a link pointed
 * elsewhere changes nothing in the directories watched. */
static bool through_links(const struct fsync *y)
{
    for (size_t i = 0; i < y->s.n; i++) {
        char real[PATH_MAX];
        if (!realpath(y->s.paths[i], real) || strcmp(real, y->s.paths[i]) != 0)
            return true;
    }
    return false;
}

/* 0: watching; -1: cannot (poll instead); LD_ENOMEM. */
static int start_inotify(struct fsync *y)
{
    y->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (y->ino_fd < 0)
        return -1;
    int code = 0;
    for (size_t i = 0; i < y->s.n && !code; i++) {
        code = watch_path(y, y->s.paths[i]);
        char real[PATH_MAX];
        if (!code && realpath(y->s.paths[i], real) && strcmp(real, y->s.paths[i]) != 0)
            code = watch_path(y, real);
    }
    if (!code && !(y->ino_ev = ev_new(y->s.base, y->ino_fd, EV_READ | EV_PERSIST, inotify_cb, y)))
        code = LD_ENOMEM;
    if (!code && event_add(y->ino_ev, NULL) != 0)
        code = -1;
    if (code)
        stop_inotify(y);
    return code;
}
#endif

/* Hands `u` (stolen) to the oldest next still waiting; false if none. */
static bool deliver(struct fsync *y, ld_fdv2_update *u, int code)
{
    ld_future *out;
    while ((out = ld__src_waiters_pop(&y->waiters)) != NULL) {
        bool pending = ld_future_is_pending(out);
        if (pending) {
            if (u)
                ld_fdv2_fulfill_update(out, u);
            else
                ld_future_reject(out, code, NULL);
        }
        ld_future_unref(out);
        if (pending)
            return true;
    }
    ld_fdv2_update_free(u);
    return false;
}

static void sync_loaded(struct fsync *y, struct ld__fs_result *r)
{
    struct src *s = &y->s;
    y->loading = false;
    if (y->stopped)
        return;
    if (!r || r->unstable || r->code == LD_ENOMEM) {
        /* no memory, or a file still being written: read again after a
         * quiet time (a full set: the versions may have moved on) */
        y->synced = false;
        y->named = true;
        arm_quiet(y);
        return;
    }
    if (r->sigs)
        memcpy(y->loaded, r->sigs, s->n * sizeof(struct ld__fs_sig));
    ld_fdv2_update *u;
    bool full = ld_fdv2_change_set_intent(r->cs) == LD_FDV2_INTENT_XFER_FULL;
    if (r->code == 0) {
        u = ld_fdv2_update_new(LD_DATA_SOURCE_STATE_VALID, r->cs, NULL, NULL);
        r->cs = NULL; /* stolen */
    } else {
        ld_data_source_error_info e = {LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0, 0, r->msg};
        u = ld_fdv2_update_new(LD_DATA_SOURCE_STATE_INTERRUPTED, NULL, &e, NULL);
    }
    bool taken = u != NULL;
    if (!deliver(y, u, LD_ENOMEM)) {
        y->dirty = true; /* nobody took it: read again for the next next() */
        taken = false;
    }
    if (r->code == 0) /* data lost on the way: a full set next time */
        y->synced = taken && (full || y->synced);
    if (y->recheck) {
        y->recheck = false;
        read_if_changed(y);
    } else {
        maybe_load(y);
    }
}

static void sync_next(void *impl, ld_future *out)
{
    struct fsync *y = impl;
    if (ld__src_waiters_push(&y->waiters, out))
        maybe_load(y);
}

static void sync_halt(struct fsync *y)
{
    if (y->stopped)
        return;
    y->stopped = true;
#ifdef HAVE_SYS_INOTIFY_H
    stop_inotify(y);
#endif
    ev_free(y->poll_ev);
    ev_free(y->quiet_ev);
    y->poll_ev = y->quiet_ev = NULL;
    ld__src_waiters_settle(&y->waiters, 0, NULL);
    ld__worker_stop(y->s.worker);
}

static void sync_stop(void *impl, ld_future *out)
{
    sync_halt(impl);
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void sync_destroy(struct fsync *y)
{
    for (size_t i = 0; i < y->nnames; i++)
        ld__free(y->names[i]);
    ld__free(y->names);
    ld__free(y->loaded);
    ld__free(y->polled);
    ld__free(y->now);
    y->names = NULL;
    y->loaded = y->polled = y->now = NULL;
    y->nnames = 0;
}

static void sync_free(void *impl)
{
    struct fsync *y = impl;
    live_remove(y);
    sync_halt(y);
    src_stop_reader(&y->s);
    sync_destroy(y);
    src_unref(&y->s);
}

/* ld_synchronizer_refresh(): the files read again, changed or not, and
 * yielded as a full set. */
static void sync_refresh(void *impl)
{
    struct fsync *y = impl;
    if (y->stopped)
        return;
    y->synced = false;
    y->named = true;
    arm_quiet(y);
}

static const struct ld_synchronizer_ops SYNC_OPS = {
    LD_SYNCHRONIZER_OPS_VERSION, sync_name, sync_next, sync_stop, sync_free, sync_refresh,
};

ld_synchronizer *ld_file_synchronizer_new(struct event_base *base, const char *const *paths,
                                          size_t n, int64_t interval_ms)
{
    if (interval_ms == 0)
        interval_ms = 1000;
    if (interval_ms < 1 || interval_ms > 86400000)
        return NULL;
    struct fsync *y = ld__calloc(1, sizeof(*y));
    if (!y)
        return NULL;
    y->ino_fd = -1;
    int code = src_init(&y->s, base, paths, n);
    if (code) {
        ld__free(y);
        return NULL;
    }
    y->s.versions = true;
    y->dirty = true;
    y->interval_ms = interval_ms;
    y->loaded = ld__calloc(n, sizeof(struct ld__fs_sig));
    y->polled = ld__calloc(n, sizeof(struct ld__fs_sig));
    y->now = ld__calloc(n, sizeof(struct ld__fs_sig));
    y->quiet_ev = ev_new(base, -1, 0, quiet_cb, y);
    code = y->loaded && y->polled && y->now && y->quiet_ev ? 0 : LD_ENOMEM;
    const char *force = getenv("LDASYNC_FILE_POLL");
    bool poll = force && strcmp(force, "1") == 0;
#ifdef HAVE_SYS_INOTIFY_H
    if (!code && !poll) {
        code = start_inotify(y);
        if (code == -1)
            code = 0, poll = true;
        else if (!code && through_links(y))
            poll = true; /* as well */
    }
#else
    poll = true;
#endif
    if (!code && poll)
        code = start_polling(y);
    ld_synchronizer *sy = code ? NULL : ld_synchronizer_new(base, &SYNC_OPS, y);
    if (sy)
        live_add(y, sy);
    if (!sy) {
        y->stopped = false;
        sync_halt(y);
        src_stop_reader(&y->s);
        sync_destroy(y);
        src_unref(&y->s);
    }
    return sy;
}
