/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/file_source.h: LaunchDarkly's file data source, as an FDv2
 * initializer and an FDv2 synchronizer (fdv2.h).
 *
 * The files. Each is a JSON object with any of these members (others are
 * ignored):
 *   - "flags": an object flag key -> full flag object;
 *   - "flagValues": an object flag key -> value: a flag that is on and
 *     serves that value to everyone, built as the Python and Node SDKs
 *     build it: {"key": K, "version": 1, "on": true,
 *     "fallthrough": {"variation": 0}, "variations": [value]};
 *   - "segments": an object segment key -> full segment object.
 * An item of "flags" or "segments" without "key" gets the key it is filed
 * under (its "key", if any, must equal that key); without "version" it gets
 * version 1, as the Python SDK's file source does. Several files merge, in
 * the order given; a key defined twice (in two files, or in "flags" and
 * "flagValues", or twice in one JSON object) is an error. The data is a full
 * change set (intent xfer-full, one put per item, flags first, then
 * segments, in file order; the empty selector); a basis is not to be
 * persisted and has no environment ID.
 *
 * Errors (the rejection of a fetch; the message of a synchronizer's
 * invalid_data error):
 *   - LD_EIO: a file cannot be opened or read: "PATH: strerror text";
 *     also a file that kept changing while it was read ("PATH: the file
 *     kept changing while it was read": a read during which a file's
 *     status (device, inode, size, change and modification times) changed
 *     is done again, up to 20 times 10 ms apart); and a path that is not a
 *     regular file ("PATH: Is a directory"; a FIFO, a socket or a device:
 *     "PATH: not a regular file", refused at once, never waited for or
 *     read);
 *   - LD_EPARSE: malformed JSON: "PATH:LINE:COLUMN: what jansson says"
 *     (line and column of jansson's json_error_t, both from 1); a file
 *     that does not parse but was modified less than LD_FILE_QUIET_MS ago
 *     (perhaps being written) is read again once it has been left alone
 *     for that long, a few times, before the error is given;
 *     or the wrong shape, naming the file and the key: "PATH: the top
 *     level is not a JSON object", "PATH: \"flags\" is not an object",
 *     "PATH: flag \"K\" is not an object", "PATH: flag \"K\": \"version\"
 *     is not an integer >= 0", "PATH: flag \"K\": \"key\" is not \"K\"",
 *     "PATH: flag \"K\" is defined twice (also in OTHER)", ...;
 *   - LD_ENOMEM: memory ran out.
 *
 * Threads. Reading and parsing never run on the loop when libevent
 * threading is on (evthread_use_pthreads() before event_base_new(), the
 * condition future.h sets for completing futures from other threads): each
 * initializer and synchronizer then has one worker thread of its own
 * (started at its first read, reused, joined when it is freed) that opens,
 * reads and parses the files, builds the change set and completes an
 * internal future; the fetch's or next's future is completed from the
 * loop. The worker touches no store and no object of the caller. When
 * threading is off, a read happens on the loop instead, from a loop
 * callback (never inside the call that asked for it): the results are the
 * same, but the loop is held for the time of the parse (tens of
 * milliseconds for a file of 10,000 flags: docs/performance.md), and a
 * file that changes while it is read, or that does not parse just after it
 * was modified, is not waited for (the error is given at once; a
 * synchronizer tries again after its quiet time). The allocator hooks
 * (alloc.h, and jansson's json_set_alloc_funcs()) are called from the
 * worker thread: they must be thread-safe then, as for completing futures
 * from other threads.
 *
 * Stopping or freeing while a read runs is safe: the worker checks between
 * blocks of 64 KiB of input and between items whether its read is still
 * wanted, and drops it if not; ld_initializer_free() and
 * ld_synchronizer_free() then wait for the worker to end (a few
 * milliseconds at most, plus a blocked read of a slow file system, plus,
 * for a synchronizer freed without a stop long enough before, the
 * kernel's close of its watch: tens of milliseconds). As for
 * every future of a base, run the loop after freeing one of these before
 * freeing the base (future.h, lifetime rule).
 *
 * Thread rules: an initializer and a synchronizer belong to the thread that
 * runs their base's loop (fdv2.h).
 */
#ifndef LDASYNC_FILE_SOURCE_H
#define LDASYNC_FILE_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include <ldasync/common.h>
#include <ldasync/fdv2.h>

LD_BEGIN_DECLS

struct event_base;

/** An initializer (fdv2.h) named "file" whose fetch reads the `n` files of
 *  `paths` (the strings are copied) and fulfils with a basis holding their
 *  data as a full change set (see the top of this file); each fetch reads
 *  the files again. A fetch rejects with LD_EIO, LD_EPARSE or LD_ENOMEM as
 *  described above, and as every initializer after stop (LD_ECLOSED) and
 *  free (LD_ECANCELED).
 *  @return a new initializer, to free with ld_initializer_free(); NULL if
 *  `base` or `paths` is NULL, `n` is 0, a path is NULL or empty, or memory
 *  ran out. @since 0.1.0 */
LD_EXPORT ld_initializer *ld_file_initializer_new(struct event_base *base, const char *const *paths,
                                                  size_t n);

/** The quiet time, in milliseconds, a synchronizer waits for after the last
 *  change it sees before it reads the files. @since 0.1.0 */
#define LD_FILE_QUIET_MS 50

/**
 * A synchronizer (fdv2.h) named "file" that watches the `n` files of
 * `paths` (copied) and yields their data, in full first, then what changed:
 *   - the first next() yields the data of the files as they are (state
 *     valid, a full change set);
 *   - each later next() waits until a file has changed since the previous
 *     read and yields what changed since the data yielded last (state
 *     valid, a change set of intent xfer-changes: a put of each item new or
 *     changed, with its version (see Versions), a delete of each item gone,
 *     at the version of its deletion; segments first, then flags, each
 *     kind's puts in file order, then its deletes; no changes when only
 *     the files' status changed); changes made while no next was
 *     waiting are not lost: the next next() reads at once. The update is a
 *     full change set again when an update was lost on the way: one no
 *     next took (a next cancelled, the synchronizer stopped), one that ran
 *     out of memory, or one a data system (data_system.h) that runs this
 *     synchronizer could not apply (the store failed it). That full set
 *     comes with the next read, which, as every read, waits until a file
 *     changes: until then the store holds what it took of the lost update;
 *   - a file that cannot be read or parsed yields an update with state
 *     interrupted, no change set, and an error of kind invalid_data whose
 *     message is the error message described at the top of this file: the
 *     data of the last good read stays where it is. When the files are good
 *     again, the next update is valid again, with the data. (A read that
 *     runs out of memory is done again after the quiet time below; a next
 *     rejects with LD_ENOMEM only when its update cannot be made.)
 *
 * Watching. Where inotify exists (Linux), the directories that hold the
 * files (of the paths as given and, when a path is a symbolic link, of its
 * target) are watched, so that a file replaced by a rename into place (what
 * editors and `mv` do) or by `cp` is seen as well as one written in place.
 * Without inotify, or when a directory cannot be watched, the files' status
 * (device, inode, size, change and modification times) is polled every
 * `interval_ms` instead. A path whose realpath() is not the path as given
 * (a symbolic link on the way, its own or a directory's, e.g. a
 * deployment's "current" link; a relative path), or that cannot be
 * resolved yet, is polled as well: a link pointed elsewhere changes
 * nothing in the directories watched. The environment variable
 * LDASYNC_FILE_POLL=1, read when the synchronizer is made, forces polling
 * (for tests). Stopping the watch hands the inotify instance to the
 * synchronizer's worker thread (see Threads) to close, because that close
 * waits for the kernel (tens of milliseconds, docs/performance.md) and
 * would hold the loop; free joins the worker, so no descriptor and no
 * thread of the synchronizer outlives it (a free that comes long enough
 * after the stop no longer waits for that close). Without a worker, the
 * close happens on the loop.
 *
 * Half-written files never reach the store: after a change is seen, the
 * files are read only once nothing has changed in their directories for
 * LD_FILE_QUIET_MS (at most 1 s after the first change of a burst, for
 * directories that never stay quiet); when polling, once their status has
 * stayed the same for that long. A read during which a file changed (its
 * status before and after differ) is thrown away and done again. A writer
 * that pauses for longer than the quiet time in the middle of a file can
 * still be read half-way (the update is then interrupted if the half does
 * not parse): write a temporary file and rename it into place.
 *
 * Versions. Consumers that receive data as patches ignore an item whose
 * version is not above the version they hold, and a hand-edited file rarely
 * has its versions bumped. So the synchronizer keeps the versions it yields
 * monotonic: it remembers, per kind and key, the item it yielded last (by
 * reference); an item whose JSON (apart from "version") changed since then
 * gets the version of the file when that is higher than the one yielded
 * last, else the one yielded last + 1; an item that did not change keeps
 * the version yielded last (and, in a full set, is yielded as the same
 * object; a set of changes leaves it out). An item that leaves the files
 * is remembered by the version of its deletion only: the version yielded
 * last + 1, the version of the delete a set of changes carries and the one
 * consumers that turn a full update into a delete use (the data system
 * does, data_system.h), so that
 * it comes back with a higher one (the file's, when higher, else that + 1)
 * and is not ignored by whoever holds the deletion. Data that failed to
 * load changes nothing here.
 *
 * @param interval_ms the polling interval, used when polling: 1 to
 *        86,400,000 (a day); 0 means 1000.
 * @return a new synchronizer, to free with ld_synchronizer_free(); NULL if
 *         `base` or `paths` is NULL, `n` is 0, a path is NULL or empty,
 *         `interval_ms` is out of range, or memory ran out.
 * @since 0.1.0
 */
LD_EXPORT ld_synchronizer *ld_file_synchronizer_new(struct event_base *base,
                                                    const char *const *paths, size_t n,
                                                    int64_t interval_ms);

LD_END_DECLS

#endif /* LDASYNC_FILE_SOURCE_H */
