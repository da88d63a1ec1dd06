/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/fdv2.h: the types of LaunchDarkly's data system version 2 (FDv2)
 * and the two kinds of data source that produce them.
 *
 * Types (opaque; each made by a _new function or the builder, freed by its
 * _free function; immutable once made, so any thread may read one that no
 * thread modifies or frees):
 *   - ld_fdv2_selector: a point in the history of the data, (state, version);
 *     the empty selector ("", 0) means "not defined".
 *   - ld_fdv2_change: one put (with the item's JSON) or delete of a flag or
 *     segment at a version. Lives inside a change set.
 *   - ld_fdv2_change_set: an intent (xfer-full, xfer-changes, none), the
 *     changes in order, and the selector the data reached.
 *   - ld_fdv2_change_set_builder: assembles change sets from a stream of
 *     events, with the rules of LaunchDarkly's SDKs (see below).
 *   - ld_fdv2_basis: what an initializer fetches: a change set, whether to
 *     persist it, and the environment ID.
 *   - ld_fdv2_update: what a synchronizer yields: the data source state, an
 *     optional change set, an optional error and the environment ID. State
 *     and error are the data-source status types of status.h.
 *
 * Ownership: strings are copied; JSON objects are shared by reference (the
 * change takes its own reference, so they must not be modified afterwards);
 * a change set handed to ld_fdv2_basis_new() or ld_fdv2_update_new() is
 * stolen, on every path. Accessors return borrowed values, valid while the
 * object lives. Selectors passed in are borrowed and copied; NULL stands for
 * the empty selector wherever a selector is read.
 *
 * Data sources. ld_initializer (fetch a basis once) and ld_synchronizer (an
 * asynchronous iterator of updates) follow the pattern of store.h: an ops
 * struct with its version first, a _new(base, ops, impl) constructor, and
 * front functions that validate, return futures completing from the loop in
 * issue order (rejections by the front included), and reject with
 * LD_ECLOSED once closed. Out of memory is handled as store.h says: the
 * operation is rejected with LD_ENOMEM before the implementation hears of
 * it, and "NULL only if" promises hold. Closing a data source
 * is not graceful: results the implementation has not delivered yet are
 * rejected with LD_ECLOSED (from the loop, after the results it had
 * delivered, and before the close future), and the implementation's futures
 * for them are cancelled, because nobody wants data from a source being
 * shut down.
 *
 * Thread rules: builders, initializers and synchronizers belong to one
 * thread (for the latter two, the thread that runs their base's loop). The
 * name functions (intent, action, kind and their _from_name) are any-thread.
 */
#ifndef LDASYNC_FDV2_H
#define LDASYNC_FDV2_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ldasync/common.h>
#include <ldasync/future.h>
#include <ldasync/kind.h>
#include <ldasync/status.h>

LD_BEGIN_DECLS

struct event_base;

/* ------------------------------------------------------------------------- */
/* Enumerations. Functions that return one of them as an int return LD_EINVAL */
/* (negative) for a NULL object.                                             */

/** What the server intends to send. @since 0.1.0 */
enum ld_fdv2_intent {
    LD_FDV2_INTENT_XFER_FULL = 0,    /* "xfer-full": a full data set, replacing all */
    LD_FDV2_INTENT_XFER_CHANGES = 1, /* "xfer-changes": changes to the data held */
    LD_FDV2_INTENT_NONE = 2          /* "none": the data held is up to date */
};

/** The intent's protocol name ("xfer-full", "xfer-changes", "none"): a
 *  static string, or NULL for a value not in the enum. @since 0.1.0 */
LD_EXPORT const char *ld_fdv2_intent_name(enum ld_fdv2_intent intent);

/** The intent named `name`. @return an enum ld_fdv2_intent value, or
 *  LD_EINVAL for NULL or an unknown name. @since 0.1.0 */
LD_EXPORT int ld_fdv2_intent_from_name(const char *name);

/** What a change does. @since 0.1.0 */
enum ld_fdv2_action {
    LD_FDV2_ACTION_PUT = 0,   /* "put": insert or replace the item */
    LD_FDV2_ACTION_DELETE = 1 /* "delete": delete it (store a tombstone) */
};

/** The action's name ("put", "delete"): a static string, or NULL for a
 *  value not in the enum. @since 0.1.0 */
LD_EXPORT const char *ld_fdv2_action_name(enum ld_fdv2_action action);

/** The FDv2 name of a kind: "flag" for ld_kind_features(), "segment" for
 *  ld_kind_segments(); NULL for anything else. @since 0.1.0 */
LD_EXPORT const char *ld_fdv2_kind_name(const ld_kind *kind);

/** The kind an FDv2 object kind names ("flag", "segment"), or NULL.
 *  @since 0.1.0 */
LD_EXPORT const ld_kind *ld_fdv2_kind_from_name(const char *name);

/* ------------------------------------------------------------------------- */
/* Selector                                                                  */

/** A selector: (state, version). Create with ld_fdv2_selector_new(), free
 *  with ld_fdv2_selector_free(). @since 0.1.0 */
typedef struct ld_fdv2_selector ld_fdv2_selector;

/** A new selector; `state` is copied. ("", 0) is the empty selector.
 *  @return NULL if `state` is NULL, `version` is negative or memory ran
 *  out. @since 0.1.0 */
LD_EXPORT ld_fdv2_selector *ld_fdv2_selector_new(const char *state, int64_t version);

/** Frees a selector made by ld_fdv2_selector_new() (never one borrowed
 *  from a change set). NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_fdv2_selector_free(ld_fdv2_selector *sel);

/** The state (borrowed; "" for the empty selector and for NULL).
 *  @since 0.1.0 */
LD_EXPORT const char *ld_fdv2_selector_state(const ld_fdv2_selector *sel);

/** The version (0 for the empty selector and for NULL). @since 0.1.0 */
LD_EXPORT int64_t ld_fdv2_selector_version(const ld_fdv2_selector *sel);

/** False for the empty selector ("", 0) and for NULL, true for any other
 *  (as Python's Selector.is_defined()). @since 0.1.0 */
LD_EXPORT bool ld_fdv2_selector_is_defined(const ld_fdv2_selector *sel);

/** True if both have the same state and version (NULL equals the empty
 *  selector). @since 0.1.0 */
LD_EXPORT bool ld_fdv2_selector_equal(const ld_fdv2_selector *a, const ld_fdv2_selector *b);

/* ------------------------------------------------------------------------- */
/* Change and change set                                                     */

/** One change, borrowed from its change set. @since 0.1.0 */
typedef struct ld_fdv2_change ld_fdv2_change;

/** The action: an enum ld_fdv2_action value, or LD_EINVAL for NULL.
 *  @since 0.1.0 */
LD_EXPORT int ld_fdv2_change_action(const ld_fdv2_change *change);
/** ld_kind_features() or ld_kind_segments(); NULL for NULL. @since 0.1.0 */
LD_EXPORT const ld_kind *ld_fdv2_change_kind(const ld_fdv2_change *change);
/** The item's key (borrowed), NULL for NULL. @since 0.1.0 */
LD_EXPORT const char *ld_fdv2_change_key(const ld_fdv2_change *change);
/** The version (>= 0), -1 for NULL. @since 0.1.0 */
LD_EXPORT int64_t ld_fdv2_change_version(const ld_fdv2_change *change);
/** The item of a put (borrowed, immutable); NULL for a delete and for NULL.
 *  @since 0.1.0 */
LD_EXPORT json_t *ld_fdv2_change_object(const ld_fdv2_change *change);

/** A change set. Made by the builder, ld_fdv2_change_set_no_changes() or
 *  ld_fdv2_change_set_empty(); freed with ld_fdv2_change_set_free().
 *  @since 0.1.0 */
typedef struct ld_fdv2_change_set ld_fdv2_change_set;

/** Intent "none", no changes, the empty selector: the data held is up to
 *  date. @return a new change set, NULL if memory ran out. @since 0.1.0 */
LD_EXPORT ld_fdv2_change_set *ld_fdv2_change_set_no_changes(void);

/** Intent "xfer-full" with no changes and selector `sel` (borrowed, copied;
 *  NULL: the empty selector): start without data, or clear all data.
 *  @return a new change set, NULL if memory ran out. @since 0.1.0 */
LD_EXPORT ld_fdv2_change_set *ld_fdv2_change_set_empty(const ld_fdv2_selector *sel);

/** Frees a change set and its changes. NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_fdv2_change_set_free(ld_fdv2_change_set *cs);

/** The intent: an enum ld_fdv2_intent value, LD_EINVAL for NULL.
 *  @since 0.1.0 */
LD_EXPORT int ld_fdv2_change_set_intent(const ld_fdv2_change_set *cs);

/** The number of changes (0 for NULL). @since 0.1.0 */
LD_EXPORT size_t ld_fdv2_change_set_count(const ld_fdv2_change_set *cs);

/** Change `i`, in the order they were added (borrowed), or NULL if `i` is
 *  out of range or `cs` is NULL. @since 0.1.0 */
LD_EXPORT const ld_fdv2_change *ld_fdv2_change_set_get(const ld_fdv2_change_set *cs, size_t i);

/** The selector (borrowed, never NULL: the empty selector when there is
 *  none, and for a NULL `cs`). @since 0.1.0 */
LD_EXPORT const ld_fdv2_selector *ld_fdv2_change_set_selector(const ld_fdv2_change_set *cs);

/* ------------------------------------------------------------------------- */
/* Change set builder                                                        */

/** Assembles change sets from server events: start(intent) on a
 *  server-intent event, add_put / add_delete per object event, finish(sel)
 *  on payload-transferred. The rules (those of LaunchDarkly's SDKs):
 *    - a new builder has no intent; start() sets one and drops the changes;
 *    - expect_changes() fails without an intent, turns "none" into
 *      "xfer-changes", and leaves any other intent alone;
 *    - finish(sel) fails without an intent; otherwise it returns the change
 *      set (the intent, the changes added since start/finish/reset, `sel`),
 *      empties the builder's changes and, if the intent was "xfer-full",
 *      makes it "xfer-changes" for what follows;
 *    - reset() drops the changes and keeps the intent.
 *  A call that fails changes nothing. Create with
 *  ld_fdv2_change_set_builder_new(), free with ..._free(). @since 0.1.0 */
typedef struct ld_fdv2_change_set_builder ld_fdv2_change_set_builder;

/** @return a new builder without an intent, NULL if memory ran out.
 *  @since 0.1.0 */
LD_EXPORT ld_fdv2_change_set_builder *ld_fdv2_change_set_builder_new(void);

/** Frees a builder and the changes it holds. NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_fdv2_change_set_builder_free(ld_fdv2_change_set_builder *b);

/** Begins a change set with `intent`, dropping the changes held.
 *  @return 0; LD_EINVAL (NULL builder, intent not in the enum).
 *  @since 0.1.0 */
LD_EXPORT int ld_fdv2_change_set_builder_start(ld_fdv2_change_set_builder *b,
                                               enum ld_fdv2_intent intent);

/** Prepares for changes without a new server intent: "none" becomes
 *  "xfer-changes". @return 0; LD_EINVAL (NULL builder, or no intent yet).
 *  @since 0.1.0 */
LD_EXPORT int ld_fdv2_change_set_builder_expect_changes(ld_fdv2_change_set_builder *b);

/** Drops the changes held, keeping the intent. @return 0; LD_EINVAL (NULL).
 *  @since 0.1.0 */
LD_EXPORT int ld_fdv2_change_set_builder_reset(ld_fdv2_change_set_builder *b);

/** Adds a put of `object` (borrowed: the change takes a reference; must not
 *  be modified afterwards) as `key` (copied) of `kind` at `version`. No
 *  intent is needed yet. @return 0; LD_EINVAL (NULL builder, `kind` not
 *  features or segments, `key` NULL or empty, `version` < 0, `object` not a
 *  JSON object); LD_ENOMEM. @since 0.1.0 */
LD_EXPORT int ld_fdv2_change_set_builder_add_put(ld_fdv2_change_set_builder *b, const ld_kind *kind,
                                                 const char *key, int64_t version, json_t *object);

/** Adds a delete of `key` of `kind` at `version`. @return as add_put, without
 *  the object. @since 0.1.0 */
LD_EXPORT int ld_fdv2_change_set_builder_add_delete(ld_fdv2_change_set_builder *b,
                                                    const ld_kind *kind, const char *key,
                                                    int64_t version);

/** Completes the change set with selector `sel` (borrowed, copied; NULL:
 *  the empty selector) and the rules above. @param out receives the new
 *  change set (NULL on failure). @return 0; LD_EINVAL (NULL builder or
 *  `out`, or no intent yet); LD_ENOMEM (the builder is unchanged).
 *  @since 0.1.0 */
LD_EXPORT int ld_fdv2_change_set_builder_finish(ld_fdv2_change_set_builder *b,
                                                const ld_fdv2_selector *sel,
                                                ld_fdv2_change_set **out);

/** The builder's intent: an enum ld_fdv2_intent value, or LD_EINVAL when it
 *  has none yet (or `b` is NULL). @since 0.1.0 */
LD_EXPORT int ld_fdv2_change_set_builder_intent(const ld_fdv2_change_set_builder *b);

/** The number of changes held (0 for NULL). @since 0.1.0 */
LD_EXPORT size_t ld_fdv2_change_set_builder_count(const ld_fdv2_change_set_builder *b);

/** Why the builder's last failed call failed (a static message naming the
 *  argument or the rule, e.g. "key must be a non-empty string"), or NULL if
 *  none failed yet. @since 0.1.0 */
LD_EXPORT const char *ld_fdv2_change_set_builder_error(const ld_fdv2_change_set_builder *b);

/* ------------------------------------------------------------------------- */
/* Basis and update                                                          */

/** The result of an initializer's fetch. @since 0.1.0 */
typedef struct ld_fdv2_basis ld_fdv2_basis;

/** A new basis. Steals `change_set` on every path; `environment_id` (may be
 *  NULL: none) is copied. @return NULL if `change_set` is NULL or memory ran
 *  out. @since 0.1.0 */
LD_EXPORT ld_fdv2_basis *ld_fdv2_basis_new(ld_fdv2_change_set *change_set, bool persist,
                                           const char *environment_id);
/** Frees the basis and its change set. NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_fdv2_basis_free(ld_fdv2_basis *basis);
/** The change set (borrowed; NULL for NULL). @since 0.1.0 */
LD_EXPORT const ld_fdv2_change_set *ld_fdv2_basis_change_set(const ld_fdv2_basis *basis);
/** Whether the data should be written to a persistent store (false for
 *  NULL). @since 0.1.0 */
LD_EXPORT bool ld_fdv2_basis_persist(const ld_fdv2_basis *basis);
/** The environment ID (borrowed), or NULL if none. @since 0.1.0 */
LD_EXPORT const char *ld_fdv2_basis_environment_id(const ld_fdv2_basis *basis);

/** One result of a synchronizer. @since 0.1.0 */
typedef struct ld_fdv2_update ld_fdv2_update;

/** A new update. Steals `change_set` (may be NULL: no data in this update)
 *  on every path; `error` (may be NULL: none) is copied by the rules of
 *  status.h (time_ms 0 becomes the time of this call), `environment_id`
 *  (may be NULL) is copied. @return NULL if `state` is not an enum
 *  ld_data_source_state value, `error` is not valid by the rules of status.h, or
 *  memory ran out. @since 0.1.0 */
LD_EXPORT ld_fdv2_update *ld_fdv2_update_new(enum ld_data_source_state state,
                                             ld_fdv2_change_set *change_set,
                                             const ld_data_source_error_info *error,
                                             const char *environment_id);
/** Frees the update and its change set. NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_fdv2_update_free(ld_fdv2_update *update);
/** The state: an enum ld_data_source_state value, LD_EINVAL for NULL. @since 0.1.0 */
LD_EXPORT int ld_fdv2_update_state(const ld_fdv2_update *update);
/** The change set (borrowed), or NULL if none. @since 0.1.0 */
LD_EXPORT const ld_fdv2_change_set *ld_fdv2_update_change_set(const ld_fdv2_update *update);
/** The error (borrowed, its message too: never NULL), or NULL if none.
 *  @since 0.1.0 */
LD_EXPORT const ld_data_source_error_info *ld_fdv2_update_error(const ld_fdv2_update *update);
/** The environment ID (borrowed), or NULL if none. @since 0.1.0 */
LD_EXPORT const char *ld_fdv2_update_environment_id(const ld_fdv2_update *update);

/* ------------------------------------------------------------------------- */
/* Bases and updates in futures                                              */

/** Fulfils `out` with `basis` as its pointer value, freed with the future.
 *  Steals `basis` on every path (freed if the call fails). @return as
 *  ld_future_fulfill_ptr(); LD_EINVAL also for a NULL basis. @since 0.1.0 */
LD_EXPORT int ld_fdv2_fulfill_basis(ld_future *out, ld_fdv2_basis *basis);

/** Fulfils `out` with `update`, as ld_fdv2_fulfill_basis(). @since 0.1.0 */
LD_EXPORT int ld_fdv2_fulfill_update(ld_future *out, ld_fdv2_update *update);

/** The basis of a future fulfilled by ld_fdv2_fulfill_basis(), or that
 *  adopted such a future's value (borrowed: valid while you hold the
 *  future), else NULL: NULL also for a future fulfilled with any other
 *  pointer (ld_future_fulfill_ptr()), which is never read. @since 0.1.0 */
LD_EXPORT const ld_fdv2_basis *ld_fdv2_future_basis(const ld_future *f);

/** The update of a future fulfilled by ld_fdv2_fulfill_update(), or that
 *  adopted such a future's value (borrowed), else NULL: NULL also for a
 *  future fulfilled with any other pointer, which is never read.
 *  @since 0.1.0 */
LD_EXPORT const ld_fdv2_update *ld_fdv2_future_update(const ld_future *f);

/* ------------------------------------------------------------------------- */
/* Initializer                                                               */

/** A data source that fetches one basis (e.g. a poll, a file). Create with
 *  ld_initializer_new(), release with ld_initializer_free(). @since 0.1.0 */
typedef struct ld_initializer ld_initializer;

/** The implementation's name (e.g. "polling"); never NULL: "unknown"
 *  without ops->name, "(null)" for NULL. @since 0.1.0 */
LD_EXPORT const char *ld_initializer_name(const ld_initializer *init);

/** Fetches a basis. @return a new reference, fulfilled with the basis
 *  (ld_fdv2_future_basis()); rejected with LD_ECLOSED after stop (also
 *  when stop comes while it is pending), or with the implementation's
 *  error. NULL only if `init` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_initializer_fetch(ld_initializer *init);

/** Stops the initializer, aborting (as every `_stop` of ldasync; a `_close`
 *  drains): pending fetches reject with LD_ECLOSED (from the loop, before
 *  the stop's future), later ones too. Stopping twice fulfils again, after
 *  the first stop (which the second does not abort).
 *  @return a new reference, fulfilled (no value) when the implementation
 *  has stopped (ops->stop). NULL only if `init` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_initializer_stop(ld_initializer *init);

/** Frees the initializer: pending fetches reject with LD_ECANCELED, and
 *  ops->free runs. Safe from inside a callback of one of its own futures.
 *  When operations were pending, ops->free runs from the loop after their
 *  cancel handlers (which may use the implementation). NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_initializer_free(ld_initializer *init);

/** The version of struct ld_initializer_ops this header describes.
 *  @since 0.1.0 */
#define LD_INITIALIZER_OPS_VERSION 1

/** What an initializer implementation provides. `fetch` and `stop` receive
 *  `out`, a pending future they own (one reference), to complete (now or
 *  later, on the loop thread) and release: fetch with
 *  ld_fdv2_fulfill_basis() or a rejection (LD_EIO, LD_EPARSE, ...), stop
 *  with ld_future_fulfill(). A fetch's `out` is cancelled when the
 *  initializer is stopped or freed while it is pending (listen with
 *  ld_future_set_cancel_handler() to end the work). `fetch` is required;
 *  `name`, `stop` and `free` may be NULL. @since 0.1.0 */
struct ld_initializer_ops {
    int version; /* LD_INITIALIZER_OPS_VERSION */
    const char *(*name)(void *impl);
    void (*fetch)(void *impl, ld_future *out);
    void (*stop)(void *impl, ld_future *out);
    void (*free)(void *impl);
};

/** Makes an initializer from an implementation; `ops` is borrowed and must
 *  outlive it. @return NULL if `base` or `ops` is NULL, the version is
 *  unknown, `fetch` is missing, or memory ran out (ops->free is not called
 *  then). @since 0.1.0 */
LD_EXPORT ld_initializer *ld_initializer_new(struct event_base *base,
                                             const struct ld_initializer_ops *ops, void *impl);

/* ------------------------------------------------------------------------- */
/* Synchronizer                                                              */

/** A data source that keeps the data up to date (streaming, polling): an
 *  asynchronous iterator of updates. Call ld_synchronizer_next(), wait for
 *  the update, handle it, call next again. The iteration ends with a next
 *  rejected with LD_ECLOSED: after stop, or when the implementation ends
 *  it. Create with ld_synchronizer_new(), release with
 *  ld_synchronizer_free(). @since 0.1.0 */
typedef struct ld_synchronizer ld_synchronizer;

/** The implementation's name; never NULL ("unknown" without ops->name,
 *  "(null)" for NULL). @since 0.1.0 */
LD_EXPORT const char *ld_synchronizer_name(const ld_synchronizer *sync);

/** The next update. Several may be requested before the first completes;
 *  they complete in request order. @return a new reference, fulfilled with
 *  an update (ld_fdv2_future_update()); rejected with LD_ECLOSED once
 *  stopped (a next pending at stop is rejected then), or with the
 *  implementation's error. NULL only if `sync` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_synchronizer_next(ld_synchronizer *sync);

/** Stops the synchronizer, aborting (as every `_stop` of ldasync; a
 *  `_close` drains): nexts not yet handed back reject with
 *  LD_ECLOSED (from the loop, in order, before the returned future
 *  completes), later ones too. A next the implementation has answered but
 *  that waits behind an earlier unanswered one counts as not handed back:
 *  its update is dropped.
 *  Stopping twice fulfils again, after the first stop (which the second
 *  does not abort). @return a new reference, fulfilled (no value) when the
 *  implementation has stopped. NULL only if `sync` is NULL.
 *  @since 0.1.0 */
LD_EXPORT ld_future *ld_synchronizer_stop(ld_synchronizer *sync);

/** Frees the synchronizer: pending nexts reject with LD_ECANCELED, and
 *  ops->free runs. Safe from inside a callback of one of its own futures.
 *  When operations were pending, ops->free runs from the loop after their
 *  cancel handlers (which may use the implementation). NULL-safe. @since 0.1.0 */
LD_EXPORT void ld_synchronizer_free(ld_synchronizer *sync);

/** Asks the synchronizer to send the whole data set again: its consumer
 *  lost data (a store that came back from an outage without what it held:
 *  ld_store_status's needs_refresh, which the data system acts on). The
 *  library's synchronizers do: the file one reads its files again, the
 *  streaming one reconnects (a new put), the polling one forgets its ETag
 *  (its next poll is answered in full), the store one yields what it reads
 *  next. One whose ops have no `refresh` (version 1) does nothing. Loop
 *  thread. @return 0; LD_EINVAL if `sync` is NULL. @since 0.1.0 */
LD_EXPORT int ld_synchronizer_refresh(ld_synchronizer *sync);

/** The version of struct ld_synchronizer_ops this header describes: 2,
 *  which adds `refresh`. A version 1 struct (without it) is still
 *  accepted. @since 0.1.0 */
#define LD_SYNCHRONIZER_OPS_VERSION 2

/** What a synchronizer implementation provides. `next` and `stop` receive
 *  `out`, a pending future they own (one reference), to complete (now or
 *  later, on the loop thread) and release: next with
 *  ld_fdv2_fulfill_update(), or a rejection; LD_ECLOSED ends the
 *  iteration, so an implementation that has nothing more to say rejects
 *  every later next with it. stop with ld_future_fulfill(). A next's `out`
 *  is cancelled when the synchronizer is stopped or freed while it is
 *  pending. `refresh` (version 2) hears ld_synchronizer_refresh() (not
 *  once stopped). `next` is required; `name`, `stop`, `free` and
 *  `refresh` may be NULL.
 *  @since 0.1.0 */
struct ld_synchronizer_ops {
    int version; /* LD_SYNCHRONIZER_OPS_VERSION */
    const char *(*name)(void *impl);
    void (*next)(void *impl, ld_future *out);
    void (*stop)(void *impl, ld_future *out);
    void (*free)(void *impl);
    /* Version 2 (may be NULL): ld_synchronizer_refresh(). */
    void (*refresh)(void *impl);
};

/** Makes a synchronizer from an implementation; `ops` is borrowed and must
 *  outlive it. @return NULL if `base` or `ops` is NULL, the version is
 *  unknown, `next` is missing, or memory ran out (ops->free is not called
 *  then). @since 0.1.0 */
LD_EXPORT ld_synchronizer *ld_synchronizer_new(struct event_base *base,
                                               const struct ld_synchronizer_ops *ops, void *impl);

LD_END_DECLS

#endif /* LDASYNC_FDV2_H */
