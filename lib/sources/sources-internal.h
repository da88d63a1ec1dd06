/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the sources' internal header (never installed).
 */
#ifndef LDASYNC_SOURCES_INTERNAL_H
#define LDASYNC_SOURCES_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

#include <ldasync/fdv2.h>

/* ---- The file source's data ---------------------------------------------
 * What the file source (file_source.h) reads, as pure functions of their
 * arguments and the files (file_data.c): no loop, no thread, no store. The
 * file source runs them on a worker (core-internal.h); the tests call them
 * directly.
 */

#define LD__FS_KINDS 2 /* 0: flags, 1: segments */

/* A file's status: what tells that it changed. */
struct ld__fs_sig {
    int err; /* 0: the fields below are the file's; else the errno of stat */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim, ctim;
};

/* The status of `path` now (stat; its errno in err when that fails). */
void ld__fs_sig_of_path(struct ld__fs_sig *s, const char *path);

/* Whether two statuses are the same (two failures: the same errno). */
bool ld__fs_sig_eq(const struct ld__fs_sig *a, const struct ld__fs_sig *b);

/* How a read is run: whether it is still wanted (`wanted(arg)`, asked
 * between blocks of input and between items; NULL: always), and whether it
 * may wait (sleep) for a file that is being written. A NULL control: always
 * wanted, may wait. */
struct ld__fs_ctl {
    bool (*wanted)(const void *arg);
    const void *arg;
    bool may_wait;
};

/* What a read produces. */
struct ld__fs_result {
    int code;                /* 0, LD_EIO, LD_EPARSE, LD_ENOMEM */
    bool unstable;           /* a file kept changing while it was read */
    char *msg;               /* the error message (code != 0), NULL if memory ran out */
    ld_fdv2_change_set *cs;  /* code == 0 */
    struct ld__fs_sig *sigs; /* the files' status as read, n of them (NULL: no memory) */
};

/* Frees a result (NULL-safe); an ld_free_fn. */
void ld__fs_result_free(void *r);

/* The synchronizer's versions: per kind, key -> the item yielded last (or,
 * for an item gone from the files, {"version": its deletion's}). Zeroed:
 * none yet. */
struct ld__fs_versions {
    json_t *seen[LD__FS_KINDS];
};

/* Forgets the versions (back to none yet). */
void ld__fs_versions_clear(struct ld__fs_versions *ver);

/* Reads and parses `path` into *doc (a new reference; NULL on failure); its
 * status goes to *sig. @return 0, or the code of `r` (set, with its
 * message, as file_source.h describes); LD_ECANCELED when no longer
 * wanted. */
int ld__fs_read_file(const struct ld__fs_ctl *ctl, const char *path, json_t **doc,
                     struct ld__fs_sig *sig, struct ld__fs_result *r);

/* Merges the `n` parsed files `docs` (their items are given keys and
 * versions in place; `paths` name them in messages), keeps the versions
 * of `ver` (NULL: none are kept; changed only when everything succeeds),
 * and builds the full change set into r->cs. @return 0, or the code of `r`
 * (set, with its message); LD_ECANCELED when no longer wanted. */
int ld__fs_build(json_t *const *docs, char *const *paths, size_t n, struct ld__fs_versions *ver,
                 const struct ld__fs_ctl *ctl, struct ld__fs_result *r);

/* Reads the `n` files of `paths` and builds their data (ld__fs_build()).
 * @return a new result (its code says whether the read succeeded), or NULL
 * when memory ran out before there was one, or when the read is no longer
 * wanted. */
struct ld__fs_result *ld__fs_read_all(char *const *paths, size_t n, struct ld__fs_versions *ver,
                                      const struct ld__fs_ctl *ctl);

#endif /* LDASYNC_SOURCES_INTERNAL_H */
