/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: LaunchDarkly's file data source, an FDv2 initializer and
 * synchronizer (file_source.h).
 *
 * Both share a `struct src`: the copied paths and a reader. A read is a
 * job: the reader opens, reads and parses the files, merges them, (for the
 * synchronizer) keeps versions monotonic, builds the change set, and
 * fulfils the job's `done` future with a `struct result`; job_done() then
 * runs on the loop and hands the result on (the fetch's future, or the
 * synchronizer's next). The reader is a worker thread of the source when
 * libevent threading is on (the future is completed across threads, as
 * future.h allows), else an event on the loop. The worker touches nothing
 * but the job, the paths and the synchronizer's table of versions (which
 * only the reader touches, one read at a time), and checks between blocks
 * of input and between items whether the job is still wanted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

#define READ_BLOCK 65536        /* input read (and checked for cancellation) at a time */
#define READ_TRIES 20           /* reads of a file that keeps changing, ... */
#define READ_RETRY_NS 10000000L /* ... 10 ms apart */
#define QUIET_MAX_MS 1000       /* the longest a burst of changes delays a read */
#define KINDS 2                 /* 0: flags, 1: segments */

static const char *const KIND_WORD[KINDS] = {"flag", "segment"};

static const ld_kind *kind_of(int k)
{
    return k == 0 ? ld_kind_features() : ld_kind_segments();
}

/* ------------------------------------------------------------------------- */
/* File status                                                               */

struct sig {
    int err; /* 0: the fields below are the file's; else the errno of stat */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim, ctim;
};

static void sig_from_stat(struct sig *s, const struct stat *st)
{
    memset(s, 0, sizeof(*s));
    s->dev = st->st_dev;
    s->ino = st->st_ino;
    s->size = st->st_size;
    s->mtim = st->st_mtim;
    s->ctim = st->st_ctim;
}

static void sig_of_path(struct sig *s, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        sig_from_stat(s, &st);
    } else {
        memset(s, 0, sizeof(*s));
        s->err = errno ? errno : EIO;
    }
}

static bool ts_eq(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

static bool sig_eq(const struct sig *a, const struct sig *b)
{
    if (a->err || b->err)
        return a->err == b->err;
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && ts_eq(a->mtim, b->mtim) &&
           ts_eq(a->ctim, b->ctim);
}

static bool stat_eq(const struct stat *a, const struct stat *b)
{
    struct sig x, y;
    sig_from_stat(&x, a);
    sig_from_stat(&y, b);
    return sig_eq(&x, &y);
}

/* ------------------------------------------------------------------------- */
/* The source, its jobs and its reader                                       */

/* What a read produces. */
struct result {
    int code;               /* 0, LD_EIO, LD_EPARSE, LD_ENOMEM */
    bool unstable;          /* a file kept changing while it was read */
    char *msg;              /* the error message (code != 0), NULL if memory ran out */
    ld_fdv2_change_set *cs; /* code == 0 */
    struct sig *sigs;       /* the files' status as read, n of them (NULL: no memory) */
};

static void result_free(void *p)
{
    struct result *r = p;
    if (!r)
        return;
    ld__free(r->msg);
    ld_fdv2_change_set_free(r->cs);
    ld__free(r->sigs);
    ld__free(r);
}

struct src;

struct job {
    unsigned refs; /* loop thread: job_done's, the cancel handler's */
    atomic_bool cancelled;
    struct job *next;
    struct src *src;
    ld_future *done; /* the reader's reference, released by the reader */
    ld_future *out;  /* initializer: the fetch's future (a reference) */
    bool on_loop;    /* read on the loop: never sleeps */
};

struct src {
    struct event_base *base;
    char **paths;
    size_t n;
    unsigned refs; /* loop thread: the owner's, one per job not finished */
    bool freed;
    /* on the loop, with each result (not after free) */
    void (*loaded)(struct src *s, struct job *job, struct result *r);
    /* synchronizer: kind -> key -> the item yielded last; reader only */
    bool versions;
    json_t *seen[KINDS];
    /* the worker thread */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started;            /* loop thread */
    atomic_bool quit;        /* set on the loop, read by the worker */
    struct job *head, *tail; /* under mu */
    int closing[4];          /* under mu: descriptors the worker closes */
    size_t nclosing;
    /* reads on the loop (threading off) */
    struct event *run_ev;
    struct job *lhead, *ltail;
};

static bool wanted(const struct job *job)
{
    return !atomic_load_explicit(&job->cancelled, memory_order_relaxed) &&
           !atomic_load_explicit(&job->src->quit, memory_order_relaxed);
}

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

static void src_unref(struct src *s);

static void job_unref(struct job *job)
{
    if (--job->refs == 0) {
        struct src *s = job->src;
        ld__free(job);
        src_unref(s);
    }
}

/* Why a read failed, as a result (keeps `r`'s sigs). */
LD_PRINTF(3, 4) static int fail(struct result *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ld__free(r->msg);
    r->msg = ld__vasprintf(fmt, ap);
    va_end(ap);
    r->code = r->msg ? code : LD_ENOMEM;
    return r->code;
}

static int oom(struct result *r)
{
    ld__free(r->msg);
    r->msg = NULL;
    return r->code = LD_ENOMEM;
}

/* ---- reading one file ---------------------------------------------------- */

struct reader {
    int fd;
    int err; /* errno of a failed read */
    bool cancelled;
    const struct job *job;
    char *buf;
    size_t len, pos;
};

/* jansson asks for input a little at a time; it gets it from `buf`, which
 * is refilled READ_BLOCK bytes at a time. (size_t)-1 stops the parse. */
static size_t read_cb(void *buffer, size_t size, void *arg)
{
    struct reader *rd = arg;
    if (rd->pos == rd->len) {
        if (!wanted(rd->job)) {
            rd->cancelled = true;
            return (size_t)-1;
        }
        ssize_t k;
        do
            k = read(rd->fd, rd->buf, READ_BLOCK);
        while (k < 0 && errno == EINTR);
        if (k < 0) {
            rd->err = errno;
            return (size_t)-1;
        }
        rd->len = (size_t)k;
        rd->pos = 0;
        if (k == 0)
            return 0;
    }
    size_t k = rd->len - rd->pos;
    if (k > size)
        k = size;
    memcpy(buffer, rd->buf + rd->pos, k);
    rd->pos += k;
    return k;
}

static void nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* How long, in ns, until the file whose status is `st` has gone unmodified
 * for LD_FILE_QUIET_MS (0: it has). */
static long quiet_left_ns(const struct stat *st)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double age_ms = (double)(now.tv_sec - st->st_mtim.tv_sec) * 1e3 +
                    (double)(now.tv_nsec - st->st_mtim.tv_nsec) / 1e6;
    if (age_ms >= LD_FILE_QUIET_MS)
        return 0;
    if (age_ms < 0) /* a clock set back: wait the whole time */
        age_ms = 0;
    return (long)((LD_FILE_QUIET_MS - age_ms) * 1e6) + 1000000L;
}

/* Reads and parses `path` into *doc; its status goes to *sig. 0 or the
 * code of `r` (set with its message); LD_ECANCELED when no longer wanted. */
static int read_file(const struct job *job, const char *path, json_t **doc, struct sig *sig,
                     struct result *r)
{
    char *buf = ld__malloc(READ_BLOCK);
    if (!buf)
        return oom(r);
    int code = 0;
    for (int attempt = 1;; attempt++) {
        *doc = NULL;
        /* O_NONBLOCK: opening a FIFO would wait for a writer (forever,
         * holding the worker, or the loop, and every stop and free) */
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat before, after_fd, after_path;
        if (fd < 0 || fstat(fd, &before) != 0) {
            int e = errno ? errno : EIO;
            if (fd >= 0)
                close(fd);
            sig->err = e;
            code = fail(r, LD_EIO, "%s: %s", path, strerror(e));
            break;
        }
        if (!S_ISREG(before.st_mode)) {
            /* only regular files: a FIFO, a socket or a device could be
             * read without end, or wait for a writer at every read */
            close(fd);
            sig_from_stat(sig, &before);
            code = fail(r, LD_EIO, "%s: %s", path,
                        S_ISDIR(before.st_mode) ? strerror(EISDIR) : "not a regular file");
            break;
        }
        struct reader rd = {fd, 0, false, job, buf, 0, 0};
        json_error_t jerr, again; /* jansson leaves them as they are when an
                                     allocation fails before it begins */
        memset(&jerr, 0, sizeof(jerr));
        memset(&again, 0, sizeof(again));
        json_t *j = json_load_callback(read_cb, &rd, JSON_REJECT_DUPLICATES, &jerr);
        if (!j && !rd.err && !rd.cancelled && json_error_code(&jerr) != json_error_out_of_memory &&
            lseek(fd, 0, SEEK_SET) == 0) {
            /* jansson reports some allocation failures as syntax errors:
             * a syntax error is real when a second parse finds it at the
             * same place; a second parse that succeeds is taken */
            rd.len = rd.pos = 0;
            j = json_load_callback(read_cb, &rd, JSON_REJECT_DUPLICATES, &again);
            if (!j && (again.position != jerr.position || strcmp(again.text, jerr.text) != 0))
                again.text[0] = '\0'; /* not the same: memory ran out in one of them */
            jerr = again;
        }
        bool stable = fstat(fd, &after_fd) == 0 && stat(path, &after_path) == 0 &&
                      stat_eq(&before, &after_fd) && stat_eq(&before, &after_path);
        close(fd);
        sig_from_stat(sig, &before);
        if (rd.cancelled || !wanted(job)) {
            json_decref(j);
            code = LD_ECANCELED;
            break;
        }
        if (rd.err) {
            json_decref(j);
            code = fail(r, LD_EIO, "%s: %s", path, strerror(rd.err));
            break;
        }
        if (!stable) {
            json_decref(j);
            if (attempt < READ_TRIES && !job->on_loop) {
                nap(READ_RETRY_NS);
                continue;
            }
            r->unstable = true;
            code = fail(r, LD_EIO, "%s: the file kept changing while it was read", path);
            break;
        }
        long wait;
        if (!j && jerr.text[0] && attempt < READ_TRIES && !job->on_loop &&
            (wait = quiet_left_ns(&before)) > 0) {
            /* a parse error in a file modified just now: perhaps one being
             * written, with pauses longer than a read; read it again once
             * it has been quiet for a while */
            for (; wait > 0 && wanted(job); wait -= READ_RETRY_NS)
                nap(wait < READ_RETRY_NS ? wait : READ_RETRY_NS);
            continue;
        }
        if (!j) {
            if (json_error_code(&jerr) == json_error_out_of_memory || !jerr.text[0])
                code = oom(r);
            else
                /* jansson's column is 0 at the start of a line (an empty
                 * file's end): the header counts both from 1 */
                code = fail(r, LD_EPARSE, "%s:%d:%d: %s", path, jerr.line < 1 ? 1 : jerr.line,
                            jerr.column < 1 ? 1 : jerr.column, jerr.text);
            break;
        }
        *doc = j;
        break;
    }
    ld__free(buf);
    return code;
}

/* ---- merging ------------------------------------------------------------- */

struct merge {
    struct result *r;
    const struct job *job;
    char **paths;
    json_t **docs;
    json_t *items[KINDS]; /* key -> item, in file order */
};

static const char *const MEMBERS[3] = {"flags", "flagValues", "segments"};

/* Where `key` of kind `k` is defined in file `f` other than in `member`
 * (an index of MEMBERS): the member's index, or -1. */
static int defined_in(json_t *doc, int k, const char *key, int skip)
{
    for (int m = 0; m < 3; m++) {
        if (m == skip || (k == 0) != (m < 2))
            continue;
        json_t *obj = json_object_get(doc, MEMBERS[m]);
        if (json_is_object(obj) && json_object_get(obj, key))
            return m;
    }
    return -1;
}

/* Adds `item` (borrowed) as `key` of kind `k`, from member `m` of file `f`. */
static int add_item(struct merge *mg, int k, const char *key, json_t *item, size_t f, int m)
{
    if (json_object_get(mg->items[k], key)) {
        const char *path = mg->paths[f];
        if (defined_in(mg->docs[f], k, key, m) >= 0)
            return fail(mg->r, LD_EPARSE,
                        "%s: %s \"%s\" is defined twice (in \"flags\" and \"flagValues\")", path,
                        KIND_WORD[k], key);
        for (size_t g = 0; g < f; g++)
            if (defined_in(mg->docs[g], k, key, -1) >= 0)
                return fail(mg->r, LD_EPARSE, "%s: %s \"%s\" is defined twice (also in %s)", path,
                            KIND_WORD[k], key, mg->paths[g]);
        return fail(mg->r, LD_EPARSE, "%s: %s \"%s\" is defined twice", path, KIND_WORD[k], key);
    }
    return json_object_set(mg->items[k], key, item) == 0 ? 0 : oom(mg->r);
}

/* Checks a full item of "flags" or "segments" and gives it its key and
 * version when it has none. */
static int normalize(struct merge *mg, int k, const char *path, const char *key, json_t *item)
{
    const char *w = KIND_WORD[k];
    if (!*key)
        return fail(mg->r, LD_EPARSE, "%s: a %s key is empty", path, w);
    if (!json_is_object(item))
        return fail(mg->r, LD_EPARSE, "%s: %s \"%s\" is not an object", path, w, key);
    json_t *jk = json_object_get(item, "key");
    if (!jk) {
        if (json_object_set_new(item, "key", json_string(key)) != 0)
            return oom(mg->r);
    } else if (!json_is_string(jk) || strcmp(json_string_value(jk), key) != 0) {
        return fail(mg->r, LD_EPARSE, "%s: %s \"%s\": \"key\" is not \"%s\"", path, w, key, key);
    }
    json_t *jv = json_object_get(item, "version");
    if (!jv) {
        if (json_object_set_new(item, "version", json_integer(1)) != 0)
            return oom(mg->r);
    } else if (!json_is_integer(jv) || json_integer_value(jv) < 0) {
        return fail(mg->r, LD_EPARSE, "%s: %s \"%s\": \"version\" is not an integer >= 0", path, w,
                    key);
    }
    json_t *jd = json_object_get(item, "deleted");
    if (jd && !json_is_boolean(jd))
        return fail(mg->r, LD_EPARSE, "%s: %s \"%s\": \"deleted\" is not a boolean", path, w, key);
    return 0;
}

/* The flag of a "flagValues" entry, as the Python and Node SDKs make it. */
static json_t *flag_with_value(const char *key, json_t *value)
{
    return json_pack("{s:s, s:i, s:b, s:{s:i}, s:[O]}", "key", key, "version", 1, "on", 1,
                     "fallthrough", "variation", 0, "variations", value);
}

static int merge_file(struct merge *mg, size_t f)
{
    json_t *doc = mg->docs[f];
    const char *path = mg->paths[f];
    if (!json_is_object(doc))
        return fail(mg->r, LD_EPARSE, "%s: the top level is not a JSON object", path);
    for (int m = 0; m < 3; m++) {
        json_t *obj = json_object_get(doc, MEMBERS[m]);
        if (!obj)
            continue;
        if (!json_is_object(obj))
            return fail(mg->r, LD_EPARSE, "%s: \"%s\" is not an object", path, MEMBERS[m]);
        int k = m == 2 ? 1 : 0;
        const char *key;
        json_t *v;
        json_object_foreach(obj, key, v)
        {
            if (!wanted(mg->job))
                return LD_ECANCELED;
            int code;
            if (m == 1) {
                if (!*key)
                    return fail(mg->r, LD_EPARSE, "%s: a flag key is empty", path);
                json_t *flag = flag_with_value(key, v);
                if (!flag)
                    return oom(mg->r);
                code = add_item(mg, k, key, flag, f, m);
                json_decref(flag);
            } else {
                code = normalize(mg, k, path, key, v);
                if (!code)
                    code = add_item(mg, k, key, v, f, m);
            }
            if (code)
                return code;
        }
    }
    return 0;
}

/* ---- versions (synchronizer) --------------------------------------------- */

static int64_t version_of(const json_t *item)
{
    return json_integer_value(json_object_get(item, "version"));
}

/* Whether a and b have the same members with equal values, "version" apart. */
static bool same_but_version(json_t *a, json_t *b)
{
    size_t na = json_object_size(a) - (json_object_get(a, "version") ? 1 : 0);
    size_t nb = json_object_size(b) - (json_object_get(b, "version") ? 1 : 0);
    if (na != nb)
        return false;
    const char *key;
    json_t *va;
    json_object_foreach(a, key, va)
    {
        if (strcmp(key, "version") == 0)
            continue;
        json_t *vb = json_object_get(b, key);
        if (!vb || !json_equal(va, vb))
            return false;
    }
    return true;
}

/* Gives the items of this read their versions (file_source.h, "Versions")
 * and makes the table of what is yielded now; the table changes only when
 * everything succeeded. */
static int keep_versions(struct src *s, struct merge *mg)
{
    json_t *next[KINDS] = {json_object(), json_object()};
    int code = next[0] && next[1] ? 0 : oom(mg->r);
    for (int k = 0; k < KINDS && !code; k++) {
        const char *key;
        json_t *item;
        json_object_foreach(mg->items[k], key, item)
        {
            json_t *prev = s->seen[k] ? json_object_get(s->seen[k], key) : NULL;
            json_t *emit = item;
            if (prev) {
                int64_t pv = version_of(prev);
                if (version_of(item) <= pv) {
                    if (same_but_version(prev, item))
                        emit = prev;
                    else if (json_object_set_new(item, "version",
                                                 json_integer(pv < INT64_MAX ? pv + 1 : pv)) != 0)
                        code = oom(mg->r);
                }
            }
            /* replacing the value of an existing key allocates nothing and
             * keeps the iteration valid */
            if (!code && emit != item && json_object_set(mg->items[k], key, emit) != 0)
                code = oom(mg->r);
            if (!code && json_object_set(next[k], key, emit) != 0)
                code = oom(mg->r);
            if (code)
                break;
        }
        if (code || !s->seen[k])
            continue;
        json_t *prev;
        json_object_foreach(s->seen[k], key, item)
        {
            if (json_object_get(mg->items[k], key))
                continue;
            /* gone: remembered by the version of its deletion only (the
             * one it had + 1, as the data system deletes it: coming back
             * at that version, it would be ignored by whoever holds the
             * deletion) */
            int64_t gone = version_of(item);
            if (json_object_size(item) != 1 && gone < INT64_MAX)
                gone++;
            prev = json_object_size(item) == 1 ? json_incref(item)
                                               : json_pack("{s:I}", "version", (json_int_t)gone);
            if (json_object_set_new(next[k], key, prev) != 0) {
                code = oom(mg->r);
                break;
            }
        }
    }
    for (int k = 0; k < KINDS; k++) {
        if (code) {
            json_decref(next[k]);
        } else {
            json_decref(s->seen[k]);
            s->seen[k] = next[k];
        }
    }
    return code;
}

/* ---- a whole read -------------------------------------------------------- */

static int build_change_set(struct merge *mg)
{
    ld_fdv2_change_set_builder *b = ld_fdv2_change_set_builder_new();
    int code = b ? ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_FULL) : LD_ENOMEM;
    for (int k = 0; k < KINDS && !code; k++) {
        const char *key;
        json_t *item;
        json_object_foreach(mg->items[k], key, item)
        {
            if (!wanted(mg->job)) {
                code = LD_ECANCELED;
                break;
            }
            code = ld_fdv2_change_set_builder_add_put(b, kind_of(k), key, version_of(item), item);
            if (code)
                break;
        }
    }
    if (!code)
        code = ld_fdv2_change_set_builder_finish(b, NULL, &mg->r->cs);
    ld_fdv2_change_set_builder_free(b);
    if (code == LD_ECANCELED)
        return code;
    return code ? oom(mg->r) : 0;
}

/* Reads everything for `job`: a result, or NULL when memory ran out before
 * there was one, or when the job is no longer wanted. */
static struct result *read_all(struct src *s, const struct job *job)
{
    struct result *r = ld__calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    struct merge mg = {r, job, s->paths, ld__calloc(s->n, sizeof(json_t *)), {NULL, NULL}};
    r->sigs = ld__calloc(s->n, sizeof(struct sig));
    mg.items[0] = json_object();
    mg.items[1] = json_object();
    int code = mg.docs && r->sigs && mg.items[0] && mg.items[1] ? 0 : oom(r);
    for (size_t f = 0; f < s->n && !code; f++)
        code = read_file(job, s->paths[f], &mg.docs[f], &r->sigs[f], r);
    if (r->sigs && mg.docs) /* the status of the files not read: as they are */
        for (size_t f = 0; f < s->n; f++)
            if (!mg.docs[f] && !r->sigs[f].err && !r->sigs[f].ino)
                sig_of_path(&r->sigs[f], s->paths[f]);
    for (size_t f = 0; f < s->n && !code; f++)
        code = merge_file(&mg, f);
    if (!code && s->versions)
        code = keep_versions(s, &mg);
    if (!code)
        code = build_change_set(&mg);
    for (size_t f = 0; mg.docs && f < s->n; f++)
        json_decref(mg.docs[f]);
    ld__free(mg.docs);
    json_decref(mg.items[0]);
    json_decref(mg.items[1]);
    if (code == LD_ECANCELED) {
        result_free(r);
        return NULL;
    }
    return r;
}

/* Runs `job` on the reader (the worker, or the loop) and completes its
 * `done` future; the job may be freed as soon as that happened. */
static void run_job(struct src *s, struct job *job)
{
    ld_future *done = job->done;
    struct result *r = wanted(job) ? read_all(s, job) : NULL;
    if (r && !wanted(job)) { /* dropped here, not on the loop */
        result_free(r);
        r = NULL;
    }
    if (r)
        ld_future_fulfill_ptr(done, r, result_free);
    else
        ld_future_reject(done, wanted(job) ? LD_ENOMEM : LD_ECANCELED, NULL);
    ld_future_unref(done);
}

static void *worker_main(void *arg)
{
    struct src *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->head && !s->nclosing && !atomic_load(&s->quit))
            pthread_cond_wait(&s->cv, &s->mu);
        int fds[sizeof(s->closing) / sizeof(s->closing[0])];
        size_t nfds = s->nclosing;
        memcpy(fds, s->closing, nfds * sizeof(int));
        s->nclosing = 0;
        bool quit = atomic_load(&s->quit);
        struct job *job = quit ? NULL : s->head;
        if (job) {
            s->head = job->next;
            if (!s->head)
                s->tail = NULL;
        }
        pthread_mutex_unlock(&s->mu);
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
        if (quit)
            return NULL; /* what is still queued is the loop's, at free */
        if (job)
            run_job(s, job);
    }
}

static void run_loop_jobs(evutil_socket_t fd, short what, void *arg)
{
    struct src *s = arg;
    (void)fd;
    (void)what;
    struct job *job = s->lhead;
    if (!job)
        return;
    s->lhead = job->next;
    if (!s->lhead)
        s->ltail = NULL;
    else
        event_active(s->run_ev, EV_TIMEOUT, 0);      /* one read per pass of the loop */
    if (job->out && !ld_future_is_pending(job->out)) /* cancelled; its handler comes later */
        atomic_store(&job->cancelled, true);
    run_job(s, job);
}

static void job_done(ld_future *done, void *arg)
{
    struct job *job = arg;
    struct src *s = job->src;
    struct result *r = ld_future_is_fulfilled(done) ? ld_future_ptr(done) : NULL;
    if (!s->freed)
        s->loaded(s, job, r);
    ld_future_unref(job->out);
    job->out = NULL;
    job_unref(job);
}

/* Hands the reader a new job (whose `out` is set by the caller after):
 * the job, or NULL if memory ran out. */
static struct job *submit(struct src *s, ld_future *out)
{
    struct job *job = ld__calloc(1, sizeof(*job));
    ld_future *done = job ? ld_future_new(s->base) : NULL;
    if (!done || ld_future_on_complete(ld_future_ref(done), job_done, job) != 0) {
        ld_future_unref(done);
        ld__free(job);
        return NULL;
    }
    /* from here on job_done runs once `done` completes */
    job->refs = 1;
    job->src = s;
    job->done = done; /* the reader's reference */
    job->out = out;
    s->refs++;
    atomic_init(&job->cancelled, false);
    bool threaded = ld__future_threads();
    if (threaded && !s->started) {
        s->started = pthread_create(&s->thread, NULL, worker_main, s) == 0;
        threaded = s->started;
    }
    if (threaded) {
        pthread_mutex_lock(&s->mu);
        if (s->tail)
            s->tail->next = job;
        else
            s->head = job;
        s->tail = job;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        return job;
    }
    job->on_loop = true;
    if (!s->run_ev)
        s->run_ev = ev_new(s->base, -1, 0, run_loop_jobs, s);
    if (!s->run_ev) {
        ld_future_reject(done, LD_ENOMEM, NULL);
        ld_future_unref(done);
        return job;
    }
    if (s->ltail)
        s->ltail->next = job;
    else
        s->lhead = job;
    s->ltail = job;
    event_active(s->run_ev, EV_TIMEOUT, 0);
    return job;
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
    atomic_init(&s->quit, false);
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        return LD_ENOMEM;
    if (pthread_cond_init(&s->cv, NULL) != 0) {
        pthread_mutex_destroy(&s->mu);
        return LD_ENOMEM;
    }
    s->paths = ld__calloc(n, sizeof(char *));
    s->n = s->paths ? n : 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!(s->paths[i] = ld__strdup(paths[i]))) {
            src_destroy(s);
            break;
        }
    }
    if (!s->paths) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        return LD_ENOMEM;
    }
    return 0;
}

/* Tells the worker to end and drops the reads not started. Loop thread. */
static void src_quit(struct src *s)
{
    atomic_store(&s->quit, true);
    pthread_mutex_lock(&s->mu);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* The jobs of `list` that never ran: their `done` rejected (job_done runs
 * from the loop). */
static void cancel_jobs(struct job *list)
{
    while (list) {
        struct job *next = list->next;
        ld_future *done = list->done;
        ld_future_reject(done, LD_ECANCELED, NULL);
        ld_future_unref(done);
        list = next;
    }
}

/* Closes `fd` off the loop: on the worker, which free joins, so that no
 * descriptor and no thread outlives the source. On the loop if there is
 * no worker (threading off) or its short list is full. Loop thread. */
static void src_close_later(struct src *s, int fd)
{
    bool handed = false;
    if (s->started && !atomic_load(&s->quit)) {
        pthread_mutex_lock(&s->mu);
        if (s->nclosing < sizeof(s->closing) / sizeof(s->closing[0])) {
            s->closing[s->nclosing++] = fd;
            pthread_cond_signal(&s->cv);
            handed = true;
        }
        pthread_mutex_unlock(&s->mu);
    }
    if (!handed)
        close(fd);
}

/* At free: ends the worker (joined), rejects what it had not started. */
static void src_stop_reader(struct src *s)
{
    s->freed = true;
    src_quit(s);
    if (s->started) {
        pthread_join(s->thread, NULL);
        s->started = false;
    }
    pthread_mutex_lock(&s->mu);
    struct job *queued = s->head;
    s->head = s->tail = NULL;
    for (size_t i = 0; i < s->nclosing; i++)
        close(s->closing[i]);
    s->nclosing = 0;
    pthread_mutex_unlock(&s->mu);
    cancel_jobs(queued);
    queued = s->lhead;
    s->lhead = s->ltail = NULL;
    cancel_jobs(queued);
    ev_free(s->run_ev);
    s->run_ev = NULL;
}

static void src_unref(struct src *s)
{
    if (--s->refs)
        return;
    for (int k = 0; k < KINDS; k++)
        json_decref(s->seen[k]);
    src_destroy(s);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    ld__free(s); /* struct src is first in both sources */
}

/* ------------------------------------------------------------------------- */
/* The initializer                                                           */

static const char *init_name(void *impl)
{
    (void)impl;
    return "file";
}

static void fetch_cancelled(ld_future *out, void *arg)
{
    struct job *job = arg;
    (void)out;
    atomic_store(&job->cancelled, true);
    job_unref(job);
}

static void init_loaded(struct src *s, struct job *job, struct result *r)
{
    (void)s;
    ld_future *out = job->out;
    if (!ld_future_is_pending(out))
        return; /* cancelled: the cancel handler holds its own count */
    if (!r) {
        ld_future_reject(out, LD_ENOMEM, NULL);
    } else if (r->code) {
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
    if (job->refs > 1) /* the cancel handler will not run now */
        job->refs--;
}

static void init_fetch(void *impl, ld_future *out)
{
    struct src *s = impl;
    struct job *job = submit(s, out);
    if (!job) {
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        return;
    }
    if (ld_future_set_cancel_handler(out, fetch_cancelled, job) == 0)
        job->refs++;
}

static void init_stop(void *impl, ld_future *out)
{
    src_quit(impl);
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
    s->loaded = init_loaded;
    ld_initializer *in = ld_initializer_new(base, &INIT_OPS, s);
    if (!in)
        src_unref(s);
    return in;
}

/* ------------------------------------------------------------------------- */
/* The synchronizer                                                          */

struct waiter {
    struct waiter *next;
    ld_future *out;
};

struct fsync {
    struct src s;                 /* first */
    struct waiter *whead, *wtail; /* nexts waiting, in order */
    bool stopped;
    bool dirty;   /* the files changed since the last read began (or: none yet) */
    bool loading; /* a read runs */
    bool recheck; /* the quiet time ended while a read ran */
    bool named;   /* an event named one of the files */
    bool polling;
    bool quiet_armed;
    int64_t burst_ms; /* when the current burst of changes began */
    int64_t interval_ms;
    struct sig *loaded; /* the files' status at the last read */
    struct sig *polled; /* ... at the last poll */
    struct sig *now;    /* scratch */
    struct event *poll_ev, *quiet_ev, *ino_ev;
    int ino_fd;
    char **names; /* base names to match inotify events with */
    size_t nnames;
};

static const char *sync_name(void *impl)
{
    (void)impl;
    return "file";
}

static void stat_all(struct fsync *y, struct sig *out)
{
    for (size_t i = 0; i < y->s.n; i++)
        sig_of_path(&out[i], y->s.paths[i]);
}

static bool sigs_eq(const struct fsync *y, const struct sig *a, const struct sig *b)
{
    for (size_t i = 0; i < y->s.n; i++)
        if (!sig_eq(&a[i], &b[i]))
            return false;
    return true;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

static void maybe_load(struct fsync *y)
{
    if (y->stopped || y->loading || !y->dirty || !y->whead)
        return;
    if (!submit(&y->s, NULL)) { /* no memory: try again after a quiet time */
        y->named = true;
        arm_quiet(y);
        return;
    }
    y->dirty = false;
    y->loading = true;
}

#ifdef HAVE_SYS_INOTIFY_H
static void watch_targets(struct fsync *y);
#endif

/* The quiet time is over (or a read that ran meanwhile ended): read if the
 * files changed since the last read. */
static void settle(struct fsync *y)
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
            memcpy(y->polled, y->now, y->s.n * sizeof(struct sig));
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
        settle(y);
}

static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
    struct fsync *y = arg;
    (void)fd;
    (void)what;
    stat_all(y, y->now);
    if (!sigs_eq(y, y->now, y->polled)) {
        memcpy(y->polled, y->now, y->s.n * sizeof(struct sig));
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
     * kernel (10-25 ms here, no CPU): the worker does it, off the loop. */
    if (y->ino_fd >= 0)
        src_close_later(&y->s, y->ino_fd);
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

static void drop_waiters(struct fsync *y)
{
    while (y->whead) {
        struct waiter *w = y->whead;
        y->whead = w->next;
        ld_future_unref(w->out);
        ld__free(w);
    }
    y->wtail = NULL;
}

/* Hands `u` (stolen) to the oldest next still waiting; false if none. */
static bool deliver(struct fsync *y, ld_fdv2_update *u, int code)
{
    while (y->whead) {
        struct waiter *w = y->whead;
        y->whead = w->next;
        if (!y->whead)
            y->wtail = NULL;
        ld_future *out = w->out;
        ld__free(w);
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

static void sync_loaded(struct src *s, struct job *job, struct result *r)
{
    struct fsync *y = (struct fsync *)s;
    (void)job;
    y->loading = false;
    if (y->stopped)
        return;
    if (!r || r->unstable || r->code == LD_ENOMEM) {
        /* no memory, or a file still being written: read again after a
         * quiet time */
        y->named = true;
        arm_quiet(y);
        return;
    }
    if (r->sigs)
        memcpy(y->loaded, r->sigs, s->n * sizeof(struct sig));
    ld_fdv2_update *u;
    if (r->code == 0) {
        u = ld_fdv2_update_new(LD_DS_STATE_VALID, r->cs, NULL, NULL);
        r->cs = NULL; /* stolen */
    } else {
        ld_ds_error_info e = {LD_DS_ERROR_KIND_INVALID_DATA, 0, 0, r->msg};
        u = ld_fdv2_update_new(LD_DS_STATE_INTERRUPTED, NULL, &e, NULL);
    }
    if (!deliver(y, u, LD_ENOMEM))
        y->dirty = true; /* nobody took it: read again for the next next() */
    if (y->recheck) {
        y->recheck = false;
        settle(y);
    } else {
        maybe_load(y);
    }
}

static void sync_next(void *impl, ld_future *out)
{
    struct fsync *y = impl;
    struct waiter *w = ld__malloc(sizeof(*w));
    if (!w) {
        ld_future_reject(out, LD_ENOMEM, NULL);
        ld_future_unref(out);
        return;
    }
    w->next = NULL;
    w->out = out;
    if (y->wtail)
        y->wtail->next = w;
    else
        y->whead = w;
    y->wtail = w;
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
    drop_waiters(y);
    src_quit(&y->s);
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
    sync_halt(y);
    src_stop_reader(&y->s);
    sync_destroy(y);
    src_unref(&y->s);
}

static const struct ld_synchronizer_ops SYNC_OPS = {
    LD_SYNCHRONIZER_OPS_VERSION, sync_name, sync_next, sync_stop, sync_free,
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
    y->s.loaded = sync_loaded;
    y->s.versions = true;
    y->dirty = true;
    y->interval_ms = interval_ms;
    y->loaded = ld__calloc(n, sizeof(struct sig));
    y->polled = ld__calloc(n, sizeof(struct sig));
    y->now = ld__calloc(n, sizeof(struct sig));
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
    if (!sy) {
        y->stopped = false;
        sync_halt(y);
        src_stop_reader(&y->s);
        sync_destroy(y);
        src_unref(&y->s);
    }
    return sy;
}
