/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the file source's data (sources-internal.h, "The file source's
 * data"): reading and parsing the files, merging them into one data set,
 * keeping the synchronizer's versions monotonic, and the change set. Pure
 * functions of their arguments and the files: no loop, no thread, no
 * store. The file source (file_source.c) runs them off the loop, on a
 * worker (core-internal.h); they check between blocks of input and between
 * items whether their read is still wanted (struct ld__fs_ctl).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <ldasync/error.h>
#include <ldasync/fdv2.h>
#include <ldasync/file_source.h>
#include <ldasync/json.h>

#include "core/core-internal.h"
#include "sources/sources-internal.h"

#define READ_BLOCK 65536        /* input read (and checked for cancellation) at a time */
#define READ_TRIES 20           /* reads of a file that keeps changing, ... */
#define READ_RETRY_NS 10000000L /* ... 10 ms apart */
#define KINDS LD__FS_KINDS      /* 0: flags, 1: segments */

static const char *const KIND_WORD[KINDS] = {"flag", "segment"};

static const ld_kind *kind_of(int k)
{
    return k == 0 ? ld_kind_features() : ld_kind_segments();
}

static bool wanted(const struct ld__fs_ctl *ctl)
{
    return !ctl || !ctl->wanted || ctl->wanted(ctl->arg);
}

static bool may_wait(const struct ld__fs_ctl *ctl)
{
    return !ctl || ctl->may_wait;
}

/* ------------------------------------------------------------------------- */
/* File status                                                               */

static void sig_from_stat(struct ld__fs_sig *s, const struct stat *st)
{
    memset(s, 0, sizeof(*s));
    s->dev = st->st_dev;
    s->ino = st->st_ino;
    s->size = st->st_size;
    s->mtim = st->st_mtim;
    s->ctim = st->st_ctim;
}

void ld__fs_sig_of_path(struct ld__fs_sig *s, const char *path)
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

bool ld__fs_sig_eq(const struct ld__fs_sig *a, const struct ld__fs_sig *b)
{
    if (a->err || b->err)
        return a->err == b->err;
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && ts_eq(a->mtim, b->mtim) &&
           ts_eq(a->ctim, b->ctim);
}

static bool stat_eq(const struct stat *a, const struct stat *b)
{
    struct ld__fs_sig x, y;
    sig_from_stat(&x, a);
    sig_from_stat(&y, b);
    return ld__fs_sig_eq(&x, &y);
}

/* ------------------------------------------------------------------------- */
/* Results                                                                   */

void ld__fs_result_free(void *p)
{
    struct ld__fs_result *r = p;
    if (!r)
        return;
    ld__free(r->msg);
    ld_fdv2_change_set_free(r->cs);
    ld__free(r->sigs);
    ld__free(r);
}

/* Why a read failed, as a result (keeps `r`'s sigs). */
LD_PRINTF(3, 4) static int fail(struct ld__fs_result *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ld__free(r->msg);
    r->msg = ld__vasprintf(fmt, ap);
    va_end(ap);
    r->code = r->msg ? code : LD_ENOMEM;
    return r->code;
}

static int oom(struct ld__fs_result *r)
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
    const struct ld__fs_ctl *ctl;
    char *buf;
    size_t len, pos;
};

/* jansson asks for input a little at a time; it gets it from `buf`, which
 * is refilled READ_BLOCK bytes at a time. (size_t)-1 stops the parse. */
static size_t read_cb(void *buffer, size_t size, void *arg)
{
    struct reader *rd = arg;
    if (rd->pos == rd->len) {
        if (!wanted(rd->ctl)) {
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

int ld__fs_read_file(const struct ld__fs_ctl *ctl, const char *path, json_t **doc,
                     struct ld__fs_sig *sig, struct ld__fs_result *r)
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
        struct reader rd = {fd, 0, false, ctl, buf, 0, 0};
        json_error_t jerr, again; /* jansson leaves them as they are when an
                                     allocation fails before it begins */
        memset(&jerr, 0, sizeof(jerr));
        memset(&again, 0, sizeof(again));
        json_t *j = ld_json_load_callback(read_cb, &rd, JSON_REJECT_DUPLICATES, &jerr);
        if (!j && !rd.err && !rd.cancelled && json_error_code(&jerr) != json_error_out_of_memory &&
            lseek(fd, 0, SEEK_SET) == 0) {
            /* jansson reports some allocation failures as syntax errors:
             * a syntax error is real when a second parse finds it at the
             * same place; a second parse that succeeds is taken */
            rd.len = rd.pos = 0;
            j = ld_json_load_callback(read_cb, &rd, JSON_REJECT_DUPLICATES, &again);
            if (!j && (again.position != jerr.position || strcmp(again.text, jerr.text) != 0))
                again.text[0] = '\0'; /* not the same: memory ran out in one of them */
            jerr = again;
        }
        bool stable = fstat(fd, &after_fd) == 0 && stat(path, &after_path) == 0 &&
                      stat_eq(&before, &after_fd) && stat_eq(&before, &after_path);
        close(fd);
        sig_from_stat(sig, &before);
        if (rd.cancelled || !wanted(ctl)) {
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
            if (attempt < READ_TRIES && may_wait(ctl)) {
                nap(READ_RETRY_NS);
                continue;
            }
            r->unstable = true;
            code = fail(r, LD_EIO, "%s: the file kept changing while it was read", path);
            break;
        }
        long wait;
        if (!j && jerr.text[0] && attempt < READ_TRIES && may_wait(ctl) &&
            (wait = quiet_left_ns(&before)) > 0) {
            /* a parse error in a file modified just now: perhaps one being
             * written, with pauses longer than a read; read it again once
             * it has been quiet for a while */
            for (; wait > 0 && wanted(ctl); wait -= READ_RETRY_NS)
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
    struct ld__fs_result *r;
    const struct ld__fs_ctl *ctl;
    char *const *paths;
    json_t *const *docs;
    json_t *items[KINDS]; /* key -> item, in file order */
    /* changes only: what was yielded before this read (a reference) */
    bool changes_only;
    json_t *prev[KINDS];
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
            if (!wanted(mg->ctl))
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
static int keep_versions(struct ld__fs_versions *s, struct merge *mg)
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
             * keeps the iteration valid; `emit` may be an item yielded
             * before, which the loop thread counts too: counted atomically */
            if (!code && emit != item &&
                json_object_set_new(mg->items[k], key, ld__json_incref(emit)) != 0)
                code = oom(mg->r);
            if (!code && json_object_set_new(next[k], key, ld__json_incref(emit)) != 0)
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
            mg->prev[k] = s->seen[k]; /* for the changes; released with `mg` */
            s->seen[k] = next[k];
        }
    }
    mg->changes_only = !code && s->changes_only && mg->prev[0] && mg->prev[1];
    return code;
}

void ld__fs_versions_clear(struct ld__fs_versions *ver)
{
    for (int k = 0; k < KINDS; k++) {
        json_decref(ver->seen[k]);
        ver->seen[k] = NULL;
    }
}

/* ---- a whole read -------------------------------------------------------- */

/* Adds the deletes of kind `k` since the previous read: the items yielded
 * then and gone now, at the version of their deletion (in `seen`). */
static int add_deletes(ld_fdv2_change_set_builder *b, struct merge *mg, int k, json_t *seen)
{
    const char *key;
    json_t *was;
    json_object_foreach(mg->prev[k], key, was)
    {
        if (json_object_size(was) == 1 || json_object_get(mg->items[k], key))
            continue; /* deleted before, or still there */
        int code = ld_fdv2_change_set_builder_add_delete(b, kind_of(k), key,
                                                         version_of(json_object_get(seen, key)));
        if (code)
            return code;
    }
    return 0;
}

/* The change set of the items: all of them (full, flags first), or, with
 * changes only, the puts of the items not yielded before as they are and
 * the deletes of those gone, segments first: the order in which the data
 * system hears the difference a full set makes (data_system.h), so that
 * listeners hear the same either way. */
static int build_change_set(struct merge *mg, struct ld__fs_versions *ver)
{
    ld_fdv2_change_set_builder *b = ld_fdv2_change_set_builder_new();
    int code = b ? ld_fdv2_change_set_builder_start(
                       b, mg->changes_only ? LD_FDV2_INTENT_XFER_CHANGES : LD_FDV2_INTENT_XFER_FULL)
                 : LD_ENOMEM;
    for (int i = 0; i < KINDS && !code; i++) {
        int k = mg->changes_only ? KINDS - 1 - i : i;
        const char *key;
        json_t *item;
        json_object_foreach(mg->items[k], key, item)
        {
            if (!wanted(mg->ctl)) {
                code = LD_ECANCELED;
                break;
            }
            if (mg->changes_only && json_object_get(mg->prev[k], key) == item)
                continue; /* yielded before, this very object */
            code = ld_fdv2_change_set_builder_add_put(b, kind_of(k), key, version_of(item), item);
            if (code)
                break;
        }
        if (!code && mg->changes_only)
            code = add_deletes(b, mg, k, ver->seen[k]);
    }
    if (!code)
        code = ld_fdv2_change_set_builder_finish(b, NULL, &mg->r->cs);
    ld_fdv2_change_set_builder_free(b);
    if (code == LD_ECANCELED)
        return code;
    return code ? oom(mg->r) : 0;
}

int ld__fs_build(json_t *const *docs, char *const *paths, size_t n, struct ld__fs_versions *ver,
                 const struct ld__fs_ctl *ctl, struct ld__fs_result *r)
{
    struct merge mg = {r, ctl, paths, docs, {json_object(), json_object()}, false, {NULL, NULL}};
    int code = mg.items[0] && mg.items[1] ? 0 : oom(r);
    for (size_t f = 0; f < n && !code; f++)
        code = merge_file(&mg, f);
    if (!code && ver)
        code = keep_versions(ver, &mg);
    if (!code)
        code = build_change_set(&mg, ver);
    for (int k = 0; k < KINDS; k++) {
        json_decref(mg.items[k]);
        json_decref(mg.prev[k]);
    }
    return code;
}

struct ld__fs_result *ld__fs_read_all(char *const *paths, size_t n, struct ld__fs_versions *ver,
                                      const struct ld__fs_ctl *ctl)
{
    struct ld__fs_result *r = ld__calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    json_t **docs = ld__calloc(n, sizeof(json_t *));
    r->sigs = ld__calloc(n, sizeof(struct ld__fs_sig));
    int code = docs && r->sigs ? 0 : oom(r);
    for (size_t f = 0; f < n && !code; f++)
        code = ld__fs_read_file(ctl, paths[f], &docs[f], &r->sigs[f], r);
    if (r->sigs && docs) /* the status of the files not read: as they are */
        for (size_t f = 0; f < n; f++)
            if (!docs[f] && !r->sigs[f].err && !r->sigs[f].ino)
                ld__fs_sig_of_path(&r->sigs[f], paths[f]);
    if (!code)
        code = ld__fs_build(docs, paths, n, ver, ctl, r);
    for (size_t f = 0; docs && f < n; f++)
        json_decref(docs[f]);
    ld__free(docs);
    if (code == LD_ECANCELED) {
        ld__fs_result_free(r);
        return NULL;
    }
    return r;
}
