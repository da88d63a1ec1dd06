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

#include <event2/util.h>

#include <ldasync/data_system.h>
#include <ldasync/fdv2.h>
#include <ldasync/sink.h>

#include "store/store-internal.h" /* struct ld__listeners */

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
 * none yet. `changes_only`, set by the reader's owner between reads: the
 * consumer holds what was yielded last, so a read builds the changes since
 * then (xfer-changes: a put of each item new or changed, a delete of each
 * item gone, at the version of its deletion), not a full set (a read with
 * nothing yielded before is full all the same). */
struct ld__fs_versions {
    json_t *seen[LD__FS_KINDS];
    bool changes_only;
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
 * and builds the change set into r->cs: full, or the changes (see struct
 * ld__fs_versions). @return 0, or the code of `r`
 * (set, with its message); LD_ECANCELED when no longer wanted. */
int ld__fs_build(json_t *const *docs, char *const *paths, size_t n, struct ld__fs_versions *ver,
                 const struct ld__fs_ctl *ctl, struct ld__fs_result *r);

/* Reads the `n` files of `paths` and builds their data (ld__fs_build()).
 * @return a new result (its code says whether the read succeeded), or NULL
 * when memory ran out before there was one, or when the read is no longer
 * wanted. */
struct ld__fs_result *ld__fs_read_all(char *const *paths, size_t n, struct ld__fs_versions *ver,
                                      const struct ld__fs_ctl *ctl);

/* ---- The file synchronizer ------------------------------------------------ */

/* Tells `sync`, if it is a file synchronizer (file_source.c), that an
 * update it gave was lost (not applied): it yields a full set next, not
 * the changes since that update. Anything else: nothing. The thread of
 * `sync`'s loop. */
void ld__file_synchronizer_lost(ld_synchronizer *sync);

/* The same for a store synchronizer (store_source.c): its next read yields
 * a full transfer whatever it reads. Not a store synchronizer: nothing. */
void ld__store_synchronizer_lost(ld_synchronizer *sync);

/* ---- Waiters (src_waiters.c) -------------------------------------------------
 * The futures (`out` of an ops function) a source has not answered yet, in
 * the order they came. Zeroed: empty. Loop thread.
 */
struct ld__src_waiter;
struct ld__src_waiters {
    struct ld__src_waiter *head, *tail;
};

/* Queues `out` (taken). Without memory it is rejected with LD_ENOMEM and
 * released instead: @return false then. */
bool ld__src_waiters_push(struct ld__src_waiters *q, ld_future *out);
/* The oldest future (the caller's reference now), or NULL when empty. */
ld_future *ld__src_waiters_pop(struct ld__src_waiters *q);
/* Empties the queue: each future still pending is rejected with `code` and
 * `msg` (0: left as it is, for a front that rejects it), and released. */
void ld__src_waiters_settle(struct ld__src_waiters *q, int code, const char *msg);

/* ---- FDv1 data (fdv1.c) -----------------------------------------------------
 * The JSON of LaunchDarkly's first protocol, as change sets.
 */
enum ld__fdv1_what {
    LD__FDV1_ALL,    /* a poll's body: {"flags": {...}, "segments": {...}} */
    LD__FDV1_PUT,    /* a put event's data: {"path": "/", "data": ALL} */
    LD__FDV1_PATCH,  /* {"path": "/flags/KEY", "data": {...}} */
    LD__FDV1_DELETE, /* {"path": "/segments/KEY", "version": N} */
};

/* Bodies this long or longer are parsed off the loop. */
#define LD__FDV1_BIG (64 * 1024)
/* The longest event or body taken. */
#define LD__FDV1_MAX ((size_t)256 * 1024 * 1024)

/* A parse's outcome. */
struct ld__fdv1_result {
    int code;               /* 0, LD_EPARSE, LD_ENOMEM */
    ld_fdv2_change_set *cs; /* code 0: the changes; NULL for a patch or delete
                               of a path that is not a flag's or a segment's */
    char msg[200];          /* code != 0: why */
};

/* Parses `len` bytes of `what` into *r (zeroed first). @return r->code. */
int ld__fdv1_parse(enum ld__fdv1_what what, const char *data, size_t len,
                   struct ld__fdv1_result *r);
/* Frees a result allocated with ld__malloc and its change set; an
 * ld_free_fn. */
void ld__fdv1_result_free(void *r);

/* "HTTP error N" and, for 401 and 403, " (invalid SDK key)"; whether
 * LaunchDarkly's SDKs retry after it. */
bool ld__fdv1_recoverable(long status);
void ld__fdv1_status_message(long status, char *out, size_t n);

/* ---- The data system ------------------------------------------------------
 * Shared by data_system.c (the sources, applying change sets, the API) and
 * data_changes.c (the change listeners and the delivery of notes).
 */

#define LD__DS_SLICE_NS 1000000 /* the longest a slice of the loop's time should run */
#define LD__DS_CLOCK_EVERY 32   /* steps between two looks at the clock */

/* The order a full set's changes are heard in. */
enum { LD__DS_SEGMENTS = 0, LD__DS_FEATURES = 1 };

/* Changes applied, waiting to be heard. */
struct ld__ds_note {
    struct ld__ds_note *next;
    uint64_t seq;
    bool diff;
    /* a change set's changes: those applied[i] */
    ld_future *holder; /* keeps `cs` alive */
    const ld_fdv2_change_set *cs;
    unsigned char *applied;
    size_t i;
    /* a full change set: `data` against `old` */
    json_t *old[2]; /* the snapshots it replaced (NULL: none) */
    json_t *data;   /* {"features": {...}, "segments": {...}} */
    int kind;       /* LD__DS_SEGMENTS, LD__DS_FEATURES, then 2: done */
    bool deletes;   /* false: the puts of the new data; true: the deletes */
    void *iter;
};

struct ld__ds_job;
struct ld__ds_status_listener;

struct ld_data_system {
    struct event_base *base;
    ld_store *store;
    ld_update_sink *sink;
    ld_initializer **inits;
    size_t n_inits, next_init;
    ld_synchronizer *sync;
    ld_future *ready; /* ours to complete */
    unsigned refs;
    bool started, freed, closing, has_data;
    int last_code;
    char *last_msg;
    int64_t initial_delay_ms, max_delay_ms, delay_ms;
    struct event *timer;         /* the start, then the retries */
    struct event *slicer;        /* the delivery of notes */
    struct event *builder;       /* the building of a full change set's data */
    struct ld__ds_job *building; /* the job whose data is being built */
    bool slicing;                /* slicer added */
    /* change listeners: fn is an ld_data_system_change_fn; each hears the
     * notes numbered above its `after` */
    struct ld__listeners listeners;
    unsigned delivering;
    uint64_t seq;
    struct ld__ds_note *notes, *notes_tail;
    struct ld__ds_status_listener *status_listeners;
    int64_t store_listener; /* the store's status listener (needs_refresh), or <= 0 */
};

/* Drops a reference of the data system; the last one frees it. */
void ld__ds_release(ld_data_system *ds);

/* The kind of LD__DS_SEGMENTS or LD__DS_FEATURES. */
const ld_kind *ld__ds_kind_of(int k);

/* Frees a note and what it holds. */
void ld__ds_note_free(struct ld__ds_note *n);

/* Queues note `n` (taken) for the change listeners, and the slicer. */
void ld__ds_queue_note(ld_data_system *ds, struct ld__ds_note *n);

/* The slicer's callback: delivers notes for about a millisecond. */
void ld__ds_slice(evutil_socket_t fd, short what, void *arg);

#endif /* LDASYNC_SOURCES_INTERNAL_H */
