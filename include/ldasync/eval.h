/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/eval.h: the evaluator. It answers "what does flag K serve this
 * context, and why?" from the data in any ld_store, as LaunchDarkly's server
 * SDKs answer it: off, prerequisites, individual targets, rules with every
 * clause operator, segments (also big segments, through an
 * ld_big_segment_store), percentage rollouts and experiments, and reasons in
 * LaunchDarkly's JSON shape.
 *
 * Every store read is a future, so an evaluation is a chain of futures. On a
 * store that answers at once (the memory store) it reads everything within
 * the call and its future completes from the loop without any further
 * round trip. On a store that answers later, the items an evaluation needs
 * are requested together, one round trip per level of prerequisites and
 * segments (the flag; then its prerequisites and segments; then theirs).
 * Evaluations are independent of each other: on such a store one that
 * needs fewer round trips may complete before one issued earlier. On a
 * store that answers at once they complete in the order issued, but for
 * all-flags states made in slices (below). A call
 * rejected for a bad argument (LD_EINVAL) or for lack of memory returns a
 * future that is already complete (its callbacks still run from the loop),
 * so it comes before evaluations issued earlier.
 *
 * An all-flags state (ld_evaluator_all_flags(), ld_evaluator_flags_state())
 * never holds the loop for long: one that needs more than about a
 * millisecond (a few hundred flags, or flags compiled for the first time)
 * is made in slices of about a millisecond, one per pass of the loop, so
 * that the loop runs everything else in between. Such a state:
 *  - is of the data as it was when asked (the store's snapshots are held
 *    while it is made), however many passes it takes;
 *  - completes after its last slice, so evaluations of single flags issued
 *    after it may complete before it; states are made one after the other,
 *    and complete in the order asked (one that waits meanwhile, for big
 *    segment memberships or for an item compiled off the loop, holds back
 *    those asked after it);
 *  - stops if its future is cancelled (ld_future_cancel()): no more slices
 *    run; one cancelled while it waits stops holding back the others when
 *    the next state is asked or its reads come back, whichever is first;
 *    freeing the evaluator rejects it with LD_ECANCELED.
 * A state of 10,000 flags is about a dozen slices.
 *
 * Each flag and segment is compiled once per stored version into a compact
 * form (targets and large `in` lists as hash sets, regular expressions
 * compiled, semantic versions and dates parsed) that the evaluator keeps
 * for as long as the store keeps the item (once the store lets go of it,
 * the compiled form is dropped later, a few at a time as other items are
 * compiled). ld_evaluator_stats() reports what it holds.
 *
 * An item of more than 50,000 values (its targets, context targets,
 * included and excluded keys and contexts, rules, clauses, clause values,
 * prerequisites and variations, each counted; the environment variable
 * LDASYNC_EVAL_BIG_ITEM, read by ld_evaluator_new(), sets another number)
 * is compiled off the loop, on a thread of the evaluator's own (the
 * library's worker, as the file source has: started at the first such
 * item, stopped and joined by ld_evaluator_free(); an evaluator that never
 * meets such an item has no thread). The evaluations that need the item
 * meanwhile wait, without holding the loop: a detail, an all-flags state
 * (whole or in slices: it goes on from the flag that waited) and
 * evaluations on any store; all of them share one compile, and answer as
 * they would had it been compiled on the loop (docs/performance.md has
 * the figures at 1,000,000 values). The allocator functions (alloc.h) are
 * called from that thread too: they must be thread-safe. Without libevent
 * threading (evthread_use_pthreads()) the worker has no thread: the
 * compile runs from a loop callback, in a pass of its own (as long as the
 * compile), after the call that needs it. Freeing the evaluator while an
 * item compiles stops that compile (a large `in` set gives up within
 * 4,096 values) and waits for the thread; the evaluations waiting are
 * rejected with LD_ECANCELED, as every pending one is. A compile that
 * runs out of memory answers LD_ENOMEM to the evaluations that waited
 * for it, as a compile on the loop does.
 *
 * An evaluation error is not a rejected future: the future fulfils with a
 * detail holding the fallback value and an ERROR reason (FLAG_NOT_FOUND,
 * MALFORMED_FLAG, WRONG_TYPE, USER_NOT_SPECIFIED, EXCEPTION), as every
 * LaunchDarkly SDK does. Only programming errors (a NULL evaluator, key or
 * context) reject, with LD_EINVAL. Prerequisite chains or segment nesting
 * deeper than 64, and evaluations that would enter more than 100,000 flags
 * and segments (nesting that names the same items over and over, which
 * grows exponentially with the depth), are MALFORMED_FLAG.
 *
 * Regular expressions (`matches`) are PCRE2's, run by its JIT where it has
 * one, on a stack of each thread's own (up to 8 MiB, mapped as needed and
 * kept until the thread exits), so that patterns that repeat a group match
 * subjects of some 200,000 characters. A match is bounded: it stops after
 * 100,000 backtracking steps from one start position (PCRE2's match limit),
 * on a full JIT stack, or without the JIT (LDASYNC_NO_JIT=1) past 4 MiB of
 * the interpreter's frames. An unanchored pattern is tried at each position
 * where it may start (every character; for a pattern that begins with a
 * literal or a class, each character that can begin it; after each newline
 * for `.*` or multiline `^`), and those positions share a budget of
 * 2,000,000 steps (500,000 without the JIT): each may take the budget divided
 * by their number, at most 100,000 and at least 2 (4 without the JIT). So a
 * pattern that backtracks a little at every position of a long subject
 * stops instead of running for seconds, while a search stays linear: on
 * subjects shorter than 20 bytes (5 without the JIT) and for anchored
 * patterns (`^`) every position keeps the whole 100,000; a pattern that needs more steps at one
 * position than its share stops even if it would have matched.
 * A stopped match answers "no match": the clause is false (then `negate`
 * applies), the evaluation goes on and is not an error. The library has no
 * log of its own: the evaluator records a stop in the clause's compiled
 * form and tells the function set with ld_evaluator_set_limit_fn(), once
 * per flag or segment version. Measured with the JIT, the slowest match
 * stopped or not: about 2.5 ms on 100,000 characters; on 1,000,000, 7-14 ms,
 * as long as a plain search that tries every position (some 10 ns each).
 * Without the JIT: 18 ms on 100,000 characters, 50 ms on 1,000,000. The
 * budget counts backtracking steps, not characters read: a lookahead that
 * reads to the end of the subject from each position (`(?=\w*!)a` on a long
 * word) stays quadratic (0.35 s on 20,000 characters): such patterns should
 * be anchored, or their subjects short. Each pattern of a clause has its
 * own budget.
 *
 * Thread rules: an evaluator belongs to the thread that runs the loop of its
 * store's base, like the store. A detail is immutable: once its future is
 * complete it may be read from any thread, and released on any thread once
 * libevent threading is on (ld_detail_value() is the store's JSON: read it,
 * do not reference it there; ld_detail_to_json() makes a copy). An
 * all-flags state shares JSON with the store and with other states: read it
 * and release it on the loop thread, as jansson's reference counts are not
 * free of data races between threads.
 */
#ifndef LDASYNC_EVAL_H
#define LDASYNC_EVAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ldasync/common.h>
#include <ldasync/context.h>
#include <ldasync/future.h>
#include <ldasync/store.h>

LD_BEGIN_DECLS

/** The type a caller expects a flag to serve. A value of another JSON type
 *  is not served: the detail holds the fallback and a WRONG_TYPE error.
 *  LD_VALUE_INT and LD_VALUE_DOUBLE both accept any JSON number. As in
 *  LaunchDarkly's SDKs, a fallback that is JSON null (or NULL) turns the
 *  check off.
 *  @since 0.1.0 */
typedef enum {
    LD_VALUE_ANY = 0, /* any JSON value, no check */
    LD_VALUE_BOOL,
    LD_VALUE_INT,
    LD_VALUE_DOUBLE,
    LD_VALUE_STRING
} ld_value_type;

/** Why a detail has its value (LaunchDarkly's reason "kind"). @since 0.1.0 */
enum ld_reason_kind {
    LD_REASON_OFF = 0,             /* the flag is off */
    LD_REASON_FALLTHROUGH,         /* no target or rule matched */
    LD_REASON_TARGET_MATCH,        /* the context's key is in a target list */
    LD_REASON_RULE_MATCH,          /* a rule matched: see rule index and id */
    LD_REASON_PREREQUISITE_FAILED, /* a prerequisite was not met */
    LD_REASON_ERROR                /* see the error kind */
};

/** The error of an ERROR reason. @since 0.1.0 */
enum ld_eval_error {
    LD_EVAL_ERROR_NONE = 0,
    LD_EVAL_ERROR_FLAG_NOT_FOUND,     /* no such flag, or it was deleted */
    LD_EVAL_ERROR_MALFORMED_FLAG,     /* the flag or a segment it uses is invalid */
    LD_EVAL_ERROR_USER_NOT_SPECIFIED, /* LaunchDarkly's error for a context that is
                                         not valid: never reported here, since a
                                         context is validated when it is made */
    LD_EVAL_ERROR_WRONG_TYPE,         /* the value is not of the type asked for */
    LD_EVAL_ERROR_EXCEPTION           /* the store failed */
};

/* The big segment store interface is the store layer's
 * (<ldasync/big_segments.h>); the evaluator only takes a pointer to one.
 * C11 allows this typedef to be repeated. */
typedef struct ld_big_segment_store ld_big_segment_store;

/** An opaque evaluator. @since 0.1.0 */
typedef struct ld_evaluator ld_evaluator;

/** The result of one evaluation: value, variation index and reason.
 *  Owned by the future it fulfils (ld_future_ptr() returns it); valid while
 *  that future is referenced. @since 0.1.0 */
typedef struct ld_detail ld_detail;

/** Makes an evaluator that reads `store` (borrowed: free the evaluator
 *  before the store). @return a new evaluator; NULL if `store` is NULL or
 *  memory ran out. @since 0.1.0 */
LD_EXPORT ld_evaluator *ld_evaluator_new(ld_store *store);

/** Lets the evaluator consult `bss` (borrowed: it must outlive the
 *  evaluator, or be replaced first) for big segments; NULL removes it (big
 *  segments then report NOT_CONFIGURED). Its data counts as STALE when its
 *  metadata is `stale_after_ms` old or more (LaunchDarkly's default is
 *  120000; <= 0 means that default). Evaluations waiting for their store
 *  reads use the new one from then on (a membership read pending on the
 *  old one when it is freed reports STORE_ERROR). @return 0; LD_EINVAL if
 *  `ev` is NULL.
 *  @since 0.1.0 */
LD_EXPORT int ld_evaluator_set_big_segment_store(ld_evaluator *ev, ld_big_segment_store *bss,
                                                 int64_t stale_after_ms);

/** Frees the evaluator. Evaluations still waiting for the store (or for
 *  a large item's compile) are rejected with LD_ECANCELED (from the loop).
 *  A compile under way on the evaluator's thread gives up and the thread
 *  is joined (a few ms at most). Details already made stay valid. Safe
 *  from inside an evaluation's callback. NULL-safe.
 *  @since 0.1.0 */
LD_EXPORT void ld_evaluator_free(ld_evaluator *ev);

/** Evaluates flag `flag_key` for `ctx`. Borrows `key` (copied when needed)
 *  and `ctx` (referenced while pending); steals `fallback` (a new
 *  reference, or NULL for JSON null) on every path, and serves it when the
 *  flag cannot serve a value of `type`.
 *  @return a new reference to a future fulfilled with an ld_detail
 *  (ld_future_ptr()); rejected with LD_EINVAL if `flag_key` or `ctx` is
 *  NULL, with LD_ENOMEM if memory ran out, with LD_ECANCELED if the
 *  evaluator is freed first. NULL only if `ev` is NULL. @since 0.1.0 */
LD_EXPORT ld_future *ld_evaluator_detail(ld_evaluator *ev, const char *flag_key, ld_context *ctx,
                                         ld_value_type type, json_t *fallback);

/** Options of ld_evaluator_all_flags(), or-ed together. @since 0.1.0 */
enum {
    /** Only flags available to client-side SDKs (clientSideAvailability
     *  .usingEnvironmentId, or the older clientSide). */
    LD_ALL_FLAGS_CLIENT_SIDE_ONLY = 1,
    /** Add each flag's reason. */
    LD_ALL_FLAGS_WITH_REASONS = 2,
    /** Omit version and reason of flags whose events are not tracked. */
    LD_ALL_FLAGS_DETAILS_ONLY_FOR_TRACKED_FLAGS = 4
};

/** Evaluates every flag of the store for `ctx` (borrowed, referenced while
 *  pending) into LaunchDarkly's all-flags state:
 *  {"<flag>": value, ..., "$flagsState": {"<flag>": {"variation": n,
 *  "version": v, "reason": {...}, "trackEvents": true, "trackReason": true,
 *  "debugEventsUntilDate": ms, "prerequisites": [keys]}, ...},
 *  "$valid": true}, the JSON that LaunchDarkly's client-side SDKs bootstrap
 *  from ("prerequisites": the flag's prerequisites its evaluation entered,
 *  in order, when there are any). A flag whose evaluation
 *  fails is there with value null and its ERROR reason. When the store
 *  fails, or was never initialized (ld_store_initialized()), the state is
 *  {"$flagsState": {}, "$valid": false}, as LaunchDarkly's SDKs answer.
 *  @return a new reference to a future fulfilled with the object
 *  (ld_future_json(), which the caller may take with json_incref): an
 *  object of its own each time, but what is inside it (the flags' values,
 *  which are the store's, and the $flagsState entries, which states share)
 *  must not be modified; rejected with LD_EINVAL if `ctx` is NULL or `options` has
 *  unknown bits, LD_ENOMEM, LD_ECANCELED if the evaluator is freed first.
 *  NULL only if `ev` is NULL. To write the state in another form, read it
 *  from ld_evaluator_flags_state() instead. @since 0.1.0 */
LD_EXPORT ld_future *ld_evaluator_all_flags(ld_evaluator *ev, ld_context *ctx, unsigned options);

/* ------------------------------------------------------------------------- */
/* All-flags states as results to read, rather than JSON.                    */

/** The all-flags state of one context as the evaluator made it: each flag's
 *  key, detail and $flagsState fields, to be written (as LaunchDarkly's
 *  all-flags JSON, ld-relay's evalx, or anything else) straight from it,
 *  without a JSON tree in between. ld_evaluator_all_flags() writes its
 *  JSON from the same results.
 *
 *  Owned by the future it fulfils (ld_future_ptr() returns it); valid, and
 *  every string, detail and value it lends valid, while that future is
 *  referenced. It is immutable, but it shares JSON with the store (the
 *  keys and values are the store's): read it, and release its future, on
 *  the thread of the evaluator's loop. Every accessor takes NULL and an
 *  index out of range, and then answers as for "none". @since 0.1.0 */
typedef struct ld_flags_state ld_flags_state;

/** Which of LaunchDarkly's $flagsState fields a flag carries
 *  (ld_flags_state_fields()), as the all-flags options decided. "variation"
 *  is written when the detail has a variation index; "prerequisites" when
 *  ld_flags_state_prerequisite_count() is not 0. @since 0.1.0 */
enum {
    LD_FLAG_STATE_VERSION = 1,            /**< "version": ld_flags_state_version() */
    LD_FLAG_STATE_REASON = 2,             /**< "reason": the detail's reason */
    LD_FLAG_STATE_TRACK_EVENTS = 4,       /**< "trackEvents": true */
    LD_FLAG_STATE_TRACK_REASON = 8,       /**< "trackReason": true */
    LD_FLAG_STATE_DEBUG_EVENTS_UNTIL = 16 /**< "debugEventsUntilDate":
                                             ld_flags_state_debug_events_until() */
};

/** Evaluates every flag of the store for `ctx` (borrowed, referenced while
 *  pending) as ld_evaluator_all_flags() does, with the same `options`, but
 *  answers the results rather than JSON. @return a new reference to a
 *  future fulfilled with an ld_flags_state (ld_future_ptr()), which lists
 *  the flags in the order ld_evaluator_all_flags() writes them; rejected
 *  as ld_evaluator_all_flags() is (LD_EINVAL if `ctx` is NULL or `options`
 *  has unknown bits, LD_ENOMEM, LD_ECANCELED). NULL only if `ev` is NULL.
 *  @since 0.1.0 */
LD_EXPORT ld_future *ld_evaluator_flags_state(ld_evaluator *ev, ld_context *ctx, unsigned options);

/** False when the store failed or was never initialized (the state then
 *  holds no flag: LaunchDarkly's {"$flagsState": {}, "$valid": false});
 *  false for NULL. @since 0.1.0 */
LD_EXPORT bool ld_flags_state_valid(const ld_flags_state *s);

/** How many flags the state holds. @since 0.1.0 */
LD_EXPORT size_t ld_flags_state_count(const ld_flags_state *s);

/** The key of flag `i` (borrowed), as the store filed it; its length in
 *  *len when `len` is not NULL (0 when there is no such flag). @return the
 *  key, NUL-terminated; NULL if `i` is out of range. @since 0.1.0 */
LD_EXPORT const char *ld_flags_state_key(const ld_flags_state *s, size_t i, size_t *len);

/** The detail of flag `i` (borrowed: read it with the ld_detail_*()
 *  functions; the value is NULL for JSON null), or NULL if `i` is out of
 *  range. Do not release it; it lives as long as the state. @since 0.1.0 */
LD_EXPORT const ld_detail *ld_flags_state_detail(const ld_flags_state *s, size_t i);

/** The LD_FLAG_STATE_* bits of flag `i`; 0 if `i` is out of range.
 *  @since 0.1.0 */
LD_EXPORT unsigned ld_flags_state_fields(const ld_flags_state *s, size_t i);

/** The version of flag `i`, also when LD_FLAG_STATE_VERSION is not set;
 *  -1 if `i` is out of range. @since 0.1.0 */
LD_EXPORT int64_t ld_flags_state_version(const ld_flags_state *s, size_t i);

/** The flag's debugEventsUntilDate (Unix milliseconds) when
 *  LD_FLAG_STATE_DEBUG_EVENTS_UNTIL is set; 0 otherwise. @since 0.1.0 */
LD_EXPORT int64_t ld_flags_state_debug_events_until(const ld_flags_state *s, size_t i);

/** How many prerequisites of flag `i` its evaluation entered: the keys
 *  LaunchDarkly lists as its "prerequisites"; 0 if `i` is out of range.
 *  @since 0.1.0 */
LD_EXPORT size_t ld_flags_state_prerequisite_count(const ld_flags_state *s, size_t i);

/** The key of prerequisite `k` of flag `i` (borrowed; `k` counts in the
 *  order they were evaluated); its length in *len when `len` is not NULL
 *  (0 when there is no such key). @return the key, NUL-terminated; NULL if
 *  `i` or `k` is out of range. @since 0.1.0 */
LD_EXPORT const char *ld_flags_state_prerequisite(const ld_flags_state *s, size_t i, size_t k,
                                                  size_t *len);

/** What an evaluator holds: the flags and segments it compiled and the heap
 *  bytes of their compiled forms (not counting the store's JSON, which the
 *  evaluator shares). @since 0.1.0 */
struct ld_evaluator_stats {
    size_t flags;             /* compiled flags held */
    size_t segments;          /* compiled segments held */
    size_t bytes;             /* their heap bytes, plus the evaluator's tables */
    size_t compiling;         /* large items being compiled off the loop now */
    size_t compiled_off_loop; /* large items compiled off the loop so far */
};

/** Fills `out`. @return 0; LD_EINVAL if `ev` or `out` is NULL.
 *  @since 0.1.0 */
LD_EXPORT int ld_evaluator_stats(const ld_evaluator *ev, struct ld_evaluator_stats *out);

/** Told that a limit stopped a `matches` clause of the flag or segment
 *  `key` (borrowed: copy what you keep) at `version`: `kind` is
 *  ld_kind_features() or ld_kind_segments(). The clause answered "no
 *  match" (see the top of this header). */
typedef void (*ld_evaluator_limit_fn)(const ld_kind *kind, const char *key, int64_t version,
                                      void *arg);

/** Sets the function told when a limit stops a `matches` clause: once
 *  per flag or segment version (the first stop of each compiled clause),
 *  on the thread that runs the evaluation, from inside it, before the
 *  evaluation's future completes. It must not free the evaluator or its
 *  store. NULL `fn` tells no one (the default). A log line is what it is
 *  for: ldasync-serve logs a warning with the key and version.
 *  @return 0; LD_EINVAL if `ev` is NULL. @since 0.1.0 */
LD_EXPORT int ld_evaluator_set_limit_fn(ld_evaluator *ev, ld_evaluator_limit_fn fn, void *arg);

/* ------------------------------------------------------------------------- */
/* Details. Each function takes NULL (and then answers as for "none").       */

/** The value served (borrowed: valid while the detail is): a variation of
 *  the flag, or the fallback (NULL when the fallback was JSON null).
 *  @since 0.1.0 */
LD_EXPORT json_t *ld_detail_value(const ld_detail *d);

/** The index of the variation served; -1 when the fallback is served
 *  (errors; off with no off variation). @since 0.1.0 */
LD_EXPORT int ld_detail_variation_index(const ld_detail *d);

/** The reason's kind (LD_REASON_ERROR for NULL). @since 0.1.0 */
LD_EXPORT enum ld_reason_kind ld_detail_reason_kind(const ld_detail *d);

/** The error of an ERROR reason; LD_EVAL_ERROR_NONE otherwise.
 *  @since 0.1.0 */
LD_EXPORT enum ld_eval_error ld_detail_error(const ld_detail *d);

/** The 0-based index of the rule that matched; -1 unless RULE_MATCH.
 *  @since 0.1.0 */
LD_EXPORT int ld_detail_rule_index(const ld_detail *d);

/** The id of the rule that matched (borrowed), or NULL (not RULE_MATCH, or
 *  the rule has no id). @since 0.1.0 */
LD_EXPORT const char *ld_detail_rule_id(const ld_detail *d);

/** The key of the prerequisite that failed (borrowed); NULL unless
 *  PREREQUISITE_FAILED. @since 0.1.0 */
LD_EXPORT const char *ld_detail_prerequisite_key(const ld_detail *d);

/** True when the context was bucketed into an experiment. @since 0.1.0 */
LD_EXPORT bool ld_detail_in_experiment(const ld_detail *d);

/** The big segments status when the evaluation consulted a big segment
 *  (an enum ld_big_segments_status), else -1. @since 0.1.0 */
LD_EXPORT int ld_detail_big_segments_status(const ld_detail *d);

/** The reason as LaunchDarkly writes it, e.g. {"kind":"RULE_MATCH",
 *  "ruleIndex":0,"ruleId":"r1"} or {"kind":"ERROR","errorKind":
 *  "FLAG_NOT_FOUND"}. @return a new reference; NULL if `d` is NULL or
 *  memory ran out. @since 0.1.0 */
LD_EXPORT json_t *ld_detail_reason_to_json(const ld_detail *d);

/** {"value": v, "variationIndex": n (absent when none), "reason": {...}}.
 *  @return a new reference; NULL if `d` is NULL or memory ran out.
 *  @since 0.1.0 */
LD_EXPORT json_t *ld_detail_to_json(const ld_detail *d);

/** "OFF", "FALLTHROUGH", "TARGET_MATCH", "RULE_MATCH",
 *  "PREREQUISITE_FAILED", "ERROR"; "UNKNOWN" for another value.
 *  @since 0.1.0 */
LD_EXPORT const char *ld_reason_kind_name(enum ld_reason_kind kind);

/** "FLAG_NOT_FOUND", "MALFORMED_FLAG", "USER_NOT_SPECIFIED", "WRONG_TYPE",
 *  "EXCEPTION"; "NONE" for LD_EVAL_ERROR_NONE, "UNKNOWN" for another value.
 *  @since 0.1.0 */
LD_EXPORT const char *ld_eval_error_name(enum ld_eval_error error);

LD_END_DECLS

#endif /* LDASYNC_EVAL_H */
