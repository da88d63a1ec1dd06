/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the evaluation layer's internal header: the hashes of bucketing,
 * the clause operators, the compiled forms of flags and segments, and the
 * evaluator's parts. Never installed.
 */
#ifndef LDASYNC_EVAL_INTERNAL_H
#define LDASYNC_EVAL_INTERNAL_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <ldasync/eval.h>
#include <ldasync/kind.h>

#include "core/core-internal.h"
#include "model/model-internal.h"

/*
 * The hashes of flag evaluation (LaunchDarkly semantics): the bucket
 * of a context for rollouts and weighted segment rules, and the key a big
 * segment store knows a context by.
 *
 * Nothing here allocates (with the library's allocator or OpenSSL's), keeps
 * state or fails: every function may run on any thread at any time, also
 * concurrently (everything lives on the caller's stack).
 */

/* The size of the `buf` ld__bucket_text() needs: the longest integer,
 * "-9223372036854775808", is 20 characters and a NUL. */
#define LD__BUCKET_BUF 32

/* The bucketable form of a context attribute value `v`:
 * - a JSON string: its bytes as they are (*s points into `v`, *len is its
 *   length, which counts any NUL inside it);
 * - an integral JSON number: a jansson integer, or a real with no fractional
 *   part and |x| < 2^53, in decimal with no exponent, no ".0", "-" for
 *   negatives ("33333" for 33333 and 33333.0, "0" for -0.0), written to `buf`
 *   (at least LD__BUCKET_BUF bytes, NUL-terminated), *s = buf;
 * and returns true. Anything else (a non-integral or too large real, a bool,
 * an array, an object, null, NULL) returns false, meaning bucket 0 without
 * hashing, and leaves *s and *len alone. */
bool ld__bucket_text(const json_t *v, char *buf, const char **s, size_t *len);

/* The bucket in [0, 1] of `value` (value_len bytes) for the flag or segment
 * `key` (key_len bytes) with `salt` (salt_len bytes); or, when has_seed, for
 * `seed` (a rollout's seed; key and salt are then not read and may be NULL).
 * Seed 0 is a seed, as in Go (Node ignores it).
 *
 * The bucket is the first 15 hex digits (60 bits) of the SHA-1 of
 * "<key>.<salt>.<value>" (or "<seed in decimal>.<value>") as an integer,
 * divided by 0xFFFFFFFFFFFFFFF, in double (as Node and Python; Go rounds to
 * float32). A pointer may be NULL when its length is 0. Never allocates,
 * never fails. */
double ld__bucket(const char *key, size_t key_len, const char *salt, size_t salt_len, bool has_seed,
                  int64_t seed, const char *value, size_t value_len);

/* Length of a big segment store key: base64 of a SHA-256 (32 bytes). */
#define LD__BIG_SEGMENT_HASH_LEN 44

/* The key of a context in a big segment store: base64 (standard alphabet,
 * padded) of the SHA-256 of the context key (`len` bytes). Writes
 * LD__BIG_SEGMENT_HASH_LEN characters and a NUL to `out`. Never allocates,
 * never fails. */
void ld__big_segment_hash(const char *key, size_t len, char out[LD__BIG_SEGMENT_HASH_LEN + 1]);

/*
 * The clause operators of flag evaluation, with the semantics of
 * LaunchDarkly's server SDKs (Go's where they differ, except: regular
 * expressions are PCRE2's, dates need a 2-digit hour, an offset hour of 0-23
 * and a day that exists in its month).
 *
 * A clause's "values" are compiled once per operator (ld__clause_values_compile)
 * into a form that ld__clause_values_match tests a context value against
 * without allocating: numbers as doubles, dates as milliseconds, semantic
 * versions parsed, regular expressions compiled by PCRE2 (with its JIT when it
 * is available), and for `in`, values of one JSON type beyond a handful in a
 * hash set.
 *
 * Values of a type that can never match under the operator (a number for
 * `startsWith`, a string for `lessThan`, a bad date, semver or regex, a JSON
 * null) are dropped at compile time: they never match and are not an error.
 *
 * Equality of numbers (in `in`, also inside arrays and objects) is equality of
 * their values as doubles, as in LaunchDarkly's SDKs, whose JSON numbers are
 * doubles: 1 == 1.0, and two integers above 2^53 that round to the same double
 * are equal.
 *
 * Threads: a compiled form is immutable except for the PCRE2 match data and
 * match context (its limit) of `matches` and its "stopped" mark, which
 * ld__clause_values_match writes: a
 * compiled form is used by one thread at a time (the evaluator runs on its
 * loop thread). Forms of different clauses are independent. JIT-compiled
 * patterns run on a stack of the calling thread's own (made at its first
 * JIT match, up to 8 MiB mapped as needed, freed when the thread exits).
 *
 * Limits of `matches`: one match stops after 100,000 backtracking steps
 * from one start position (PCRE2's match limit; fewer when the pattern may
 * start at more than 20 positions: a budget of 2,000,000 steps, 500,000
 * without the JIT, is shared between them, at least 8 each; eval_ops.c),
 * 4 MiB of the interpreter's frames or the JIT's
 * 8 MiB stack; a stopped match is no match, and marks the compiled form
 * (ld__clause_values_stopped), once per flag or segment version.
 *
 * Memory: everything goes through ld__malloc/ld__free (alloc-internal.h),
 * PCRE2's allocations too (through a general context). The JIT's executable
 * code is mapped by PCRE2 itself (mmap).
 */

/* Clause operators. LD__OP_UNKNOWN is any name LaunchDarkly does not define:
 * it never matches (the clause is false, then `negate` applies). */
enum ld__op {
    LD__OP_UNKNOWN = 0,
    LD__OP_IN,
    LD__OP_ENDS_WITH,
    LD__OP_STARTS_WITH,
    LD__OP_MATCHES,
    LD__OP_CONTAINS,
    LD__OP_LESS_THAN,
    LD__OP_LESS_THAN_OR_EQUAL,
    LD__OP_GREATER_THAN,
    LD__OP_GREATER_THAN_OR_EQUAL,
    LD__OP_BEFORE,
    LD__OP_AFTER,
    LD__OP_SEMVER_EQUAL,
    LD__OP_SEMVER_LESS_THAN,
    LD__OP_SEMVER_GREATER_THAN,
    LD__OP_SEGMENT_MATCH
};

/* The operator named by the `len` bytes at `name` (LaunchDarkly's spelling,
 * case-sensitive: "in", "endsWith", "startsWith", "matches", "contains",
 * "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual",
 * "before", "after", "semVerEqual", "semVerLessThan", "semVerGreaterThan",
 * "segmentMatch"); LD__OP_UNKNOWN for anything else, including NULL. */
enum ld__op ld__op_parse(const char *name, size_t len);

/* The compiled values of one clause for one operator. */
struct ld__clause_values;

/*
 * Compiles a clause's "values" for `op`. `values` is borrowed and may be any
 * JSON (or NULL): anything but an array is an empty list. The compiled form
 * copies what it keeps, except arrays and objects of `in`, of which it holds
 * references (json_incref; the caller must not modify them afterwards, as for
 * every item of the store).
 *
 * LD__OP_UNKNOWN and LD__OP_SEGMENT_MATCH compile to a form that never matches
 * (segmentMatch is the evaluator's: its values are segment keys).
 *
 * Returns 0 and sets *out (free it with ld__clause_values_free), or LD_ENOMEM
 * (or LD_ECANCELED: see ld__compile_work) with *out NULL and nothing
 * allocated left behind. Never fails on bad input. References are taken
 * with ld__json_incref(), so the compile may run on any thread.
 */
int ld__clause_values_compile(enum ld__op op, const json_t *values, struct ld__clause_values **out);

/*
 * True when the context value `u` matches any of the compiled values under
 * the operator. `u` is one value, not NULL. The caller handles an absent or
 * null attribute (false whatever `negate` says; a JSON null here simply never
 * matches) and an array attribute, whose elements it tries one by one: an
 * element that is itself an array or object is compared as a value, which
 * only `in` can match, by deep equality. Never fails, and never allocates but
 * on the `matches` path described below; a
 * form of LD__OP_UNKNOWN never matches.
 *
 * `matches`: the subject must be valid UTF-8 (it is checked: an invalid one
 * never matches). If PCRE2 could not JIT-compile a pattern, its interpreter
 * keeps its backtracking frames in the form's match data, allocated at
 * compile time; a match that backtracks deeper than they allow grows them
 * (through ld__malloc), and if that fails the pattern does not match. A
 * pattern that exhausts the JIT's stack (a group repeated over thousands of
 * characters) is matched again by the interpreter, with a match data of its
 * own and at most 16 MB of heap, freed before returning: that path
 * allocates, and past that limit (or without memory) there is no match.
 */
bool ld__clause_values_match(const struct ld__clause_values *cv, const json_t *u);

/* Where PCRE2 may start a search of a `matches` pattern: anywhere, only at
 * the start (anchored), at line starts, at each code unit `first` (either
 * case of a letter), at each byte of its first bytes' `bits`; and an upper
 * bound of those positions in `s`, counted up to `enough` (eval_parse.c). */
enum ld__re_starts { LD__RE_ANY, LD__RE_ONCE, LD__RE_LINES, LD__RE_FIRST, LD__RE_BITS };
size_t ld__re_start_positions(int starts, unsigned char first, uint32_t newline,
                              const uint8_t *bits, const unsigned char *s, size_t len,
                              size_t enough);

/* Strict UTF-8 as PCRE2 checks it (eval_parse.c). */
bool ld__re_utf8_valid(const unsigned char *s, size_t len);

/* True once a limit (or lack of memory) stopped a match of this `matches`
 * form: that match answered "no match". Never set for other operators. */
bool ld__clause_values_stopped(const struct ld__clause_values *cv);

/* The bytes of heap the compiled form holds (its block, PCRE2's compiled
 * patterns, JIT code and match data), for the per-flag memory report. The
 * JSON arrays and objects it holds references to are not counted: they belong
 * to the item. 0 for NULL. */
size_t ld__clause_values_bytes(const struct ld__clause_values *cv);

/* Frees a compiled form (drops its JSON references). NULL is a no-op. */
void ld__clause_values_free(struct ld__clause_values *cv);

/* ---- the strict parsers (the operators use them; tests call them directly) */

/*
 * A semantic version (SemVer 2.0.0, minor and patch optional: "2" is 2.0.0,
 * "2.1-rc" is 2.1.0-rc). `pre` points to the prerelease identifiers (without
 * the '-') in the parsed string, `pre_len` bytes; NULL and 0 when there is
 * none. Build metadata is dropped (it never affects precedence).
 */
struct ld__semver {
    uint64_t major, minor, patch;
    const char *pre;
    size_t pre_len;
};

/*
 * Parses the `len` bytes at `s` strictly: numeric components without leading
 * zeros that fit 64 bits, at most three of them, prerelease and build
 * identifiers non-empty and of [0-9A-Za-z-], numeric prerelease identifiers
 * without leading zeros, nothing else (no "v", no spaces). True and *out on
 * success; false (and *out unspecified) otherwise.
 */
bool ld__semver_parse(const char *s, size_t len, struct ld__semver *out);

/* SemVer precedence: <0, 0 or >0 as a is lower than, equal to or higher than
 * b. Numeric prerelease identifiers compare as numbers of any length. */
int ld__semver_compare(const struct ld__semver *a, const struct ld__semver *b);

/*
 * A date as Unix milliseconds: a JSON number is milliseconds already (it may
 * be negative or fractional); a JSON string must be an RFC 3339 date-time,
 * "YYYY-MM-DD" 'T'|'t' "hh:mm:ss" [ '.' 1 to 9 digits ] 'Z'|'z'|('+'|'-')"hh:mm",
 * with month 1-12, day within the month (leap years counted), hour 0-23,
 * minute 0-59, second 0-60, offset hour 0-23 and minute 0-59, and nothing
 * after it. The computation does not depend on the locale or time zone.
 * True and *ms, or false for anything else (NULL, other JSON types, a bad
 * string).
 */
bool ld__date_parse(const json_t *v, double *ms);

/* The string form of ld__date_parse: the `len` bytes at `s`. */
bool ld__date_parse_string(const char *s, size_t len, double *ms);

/*
 * The compiled forms of flags and segments that the evaluator
 * walks instead of their JSON (eval_compile.c), shared with eval.c.
 *
 * A compiled item holds a reference to its stored JSON item and borrows
 * every string from it (keys, salts, rule ids, context kinds), so that what
 * it adds to the store's memory is its arrays and hash sets. It is
 * immutable once made and reference counted (atomically: a detail that
 * holds its flag may be released on any thread).
 */

/* A string borrowed from the item (or from the compiled form's buffer). */
struct ld__str {
    const char *s;
    size_t len;
};

/* An attribute of a context: the kind to select, then a path of property
 * names (a literal name is a path of one). */
struct ld__attr {
    struct ld__str kind; /* "user" when the JSON gave none */
    struct ld__str first;
    struct ld__str *more; /* further names, or NULL */
    char *buf;            /* unescaped names, when a component had ~0 or ~1 */
    uint8_t nmore;
    bool is_kind; /* the attribute "kind" of a clause: matches the kinds */
    bool bad;     /* empty or invalid reference */
};

struct ld__clause {
    enum ld__op op;
    bool negate;
    bool bad; /* malformed: evaluating it is MALFORMED_FLAG */
    struct ld__attr attr;
    struct ld__clause_values *values; /* not for segmentMatch */
    struct ld__str *segments;         /* segmentMatch: the segment keys */
    size_t nsegments;
    const json_t *kinds; /* `in` on the attribute "kind": its values (borrowed), each
                            looked up in the context rather than each kind in them */
};

struct ld__weighted {
    int variation;
    int weight;
    bool untracked;
};

/* A percentage rollout (one block). */
struct ld__rollout {
    struct ld__attr by; /* bucketBy and the rollout's context kind */
    int64_t seed;
    size_t n;
    bool has_seed;
    bool experiment;
    struct ld__weighted w[]; /* n > 0 */
};

/* A variation or a rollout. */
struct ld__vor {
    int variation; /* >= 0: that index (range checked when served); see below */
    struct ld__rollout *rollout;
};
#define LD__VOR_ROLLOUT (-1)   /* variation: bucket with `rollout` */
#define LD__VOR_MALFORMED (-2) /* neither, or an empty rollout */

struct ld__target {
    struct ld__str kind;            /* "user" for the old `targets` */
    struct ld__clause_values *keys; /* an `in` set of the keys */
    int variation;
};

struct ld__rule {
    struct ld__str id; /* s NULL when the rule has none */
    struct ld__clause *clauses;
    size_t nclauses;
    struct ld__vor vor;
    bool track_events;
    bool bad;
};

struct ld__prereq {
    struct ld__str key;
    int variation; /* -1 when malformed: never met */
};

enum ld__item_type { LD__FLAG, LD__SEGMENT };

/* What flags and segments share. */
struct ld__item {
    atomic_size_t refs;
    json_t *json; /* the stored item, referenced */
    struct ld__str key;
    int64_t version;
    size_t bytes; /* heap held by the compiled form */
    uint8_t type; /* enum ld__item_type */
    bool deleted;
    bool bad; /* a field the evaluator needs has the wrong type */
};

struct ld__flag {
    struct ld__item h;
    json_t **vars;
    size_t nvars;
    int off; /* off variation; -1 none; LD__VOR_MALFORMED */
    struct ld__vor fallthrough;
    struct ld__target *targets;
    size_t ntargets;
    struct ld__rule *rules;
    size_t nrules;
    struct ld__prereq *prereqs;
    size_t nprereqs;
    struct ld__str salt;
    json_t **meta; /* all-flags entries by [with version][variation]: the
                      evaluator's loop thread fills it in, lazily */
    int64_t debug_until;
    bool has_debug;
    bool on;
    bool track_events;
    bool track_fallthrough;
    bool client_side;
    /* A flag whose result depends on no context and no other item (off;
     * or on with no prerequisite, target or rule and a fixed fallthrough
     * variation): its reason kind and variation index (-1: none), known
     * when compiled. */
    bool simple;
    uint8_t simple_kind;
    int simple_index;
};

struct ld__segment_rule {
    struct ld__clause *clauses;
    size_t nclauses;
    struct ld__attr by; /* bucketBy, rolloutContextKind */
    int weight;
    bool has_weight;
    bool bad;
};

struct ld__segment {
    struct ld__item h;
    struct ld__clause_values *included, *excluded;  /* user keys, or NULL */
    struct ld__target *included_ctx, *excluded_ctx; /* variation unused */
    size_t nincluded_ctx, nexcluded_ctx;
    struct ld__segment_rule *rules;
    size_t nrules;
    struct ld__str salt;
    struct ld__str unbounded_kind;
    struct ld__str ref; /* "{key}.g{generation}", owned; NULL unless unbounded with one */
    int64_t generation;
    bool has_generation;
    bool unbounded;
};

/* Compiles a stored flag or segment (`json` referenced on success).
 * @return 0 and *out (one reference); LD_ENOMEM. Never fails otherwise: a
 * field of the wrong type marks the item or the part that holds it bad. */
int ld__item_compile(enum ld__item_type type, json_t *json, struct ld__item **out);

/* ld__item_compile() for a thread other than the loop's (the evaluator's
 * worker): the item's `json` is left NULL, for the loop to set to a
 * reference it took (jansson's json_incref() is not free of data races),
 * and the only references taken are ld__json_incref()'s, of values inside
 * the item. Gives up (LD_ECANCELED) once ld__compile_work is no longer
 * wanted. @return 0 and *out; LD_ENOMEM; LD_ECANCELED. */
int ld__item_compile_off(enum ld__item_type type, const json_t *json, struct ld__item **out);

/* The worker job that the calling thread compiles for, or NULL: a large
 * `in` set looks at ld__job_wanted() every 4,096 values, and its compile
 * gives up (LD_ECANCELED) once it is false. Thread-local. */
extern _Thread_local const struct ld__work *ld__compile_work;

/* How many values the item's JSON holds that a compile walks: the entries
 * of its targets, context targets, included and excluded keys and
 * contexts, rules, clauses and clause values, prerequisites and
 * variations, each counted (json_array_size(), a loop over the entries of
 * the arrays of arrays only). */
size_t ld__item_values(enum ld__item_type type, const json_t *json);

static inline struct ld__item *ld__item_ref(struct ld__item *it)
{
    atomic_fetch_add_explicit(&it->refs, 1, memory_order_relaxed);
    return it;
}

void ld__item_unref(struct ld__item *it); /* NULL-safe */

/* The item's references to other items, for reading them ahead: calls
 * fn(arg, type, key) for each prerequisite flag and each segment of a
 * segmentMatch clause. */
void ld__item_references(const struct ld__item *it,
                         void (*fn)(void *arg, enum ld__item_type type, const struct ld__str *key),
                         void *arg);

/*
 * The evaluator's parts, shared by eval.c, eval_cache.c, eval_walk.c,
 * eval_job.c, eval_detail.c and eval_all.c.
 */

/* ---- the cache of compiled items (eval_cache.c) */

/* The flags of the last flags snapshot an all-flags state was made of, in
 * its order: a store that answers all with the same snapshot while nothing
 * changed (the memory store) is then walked without a lookup per flag.
 * Each flag is compiled when a state first reaches it (within that state's
 * slices), not when the plan is made. */
struct ld__plan_entry {
    const char *key; /* the snapshot's */
    size_t len;
    json_t *json;       /* the snapshot's */
    struct ld__flag *f; /* referenced once compiled, else NULL */
    bool skip;          /* a deleted item's placeholder */
};

struct ld__plan {
    json_t *snapshot; /* referenced, or NULL */
    struct ld__plan_entry *e;
    size_t n;
};

void ld__plan_free(struct ld__plan *p);

struct ld__centry {
    const json_t *json;
    struct ld__item *item;
};

/* The $flagsState entries without a reason, one per distinct content
 * (variation, version when given, trackEvents, debugEventsUntilDate) and
 * shared by every flag with that content: the entries of 10,000 flags are
 * then a few hot objects, not 10,000 cold ones that each state references
 * when made and again when released (they were 40% of a state's time). */
struct ld__mentry {
    int64_t version;
    int64_t debug;
    int index;
    bool with_version;
    bool with_debug;
    bool track;
    json_t *obj; /* referenced; NULL: a free slot */
};

struct ld__metas {
    struct ld__mentry *t;
    size_t mask; /* capacity - 1; capacity a power of two, or 0 */
    size_t n;
};

/* An item compiled on the evaluator's worker (eval_big.c): more than
 * ld__cache.big values. Evaluations that need it wait for `out`. */
struct ld__compile {
    struct ld__compile *next;
    struct ld__cache *cache; /* NULL once the evaluator is freed */
    json_t *json;            /* referenced (on the loop) until the item takes it */
    ld_future *out;          /* the worker's job (our reference) */
    struct ld__item *item;   /* written by the worker before `out` completes */
    uint8_t type;
};

struct ld__cache {
    struct ld__centry *t;
    size_t mask; /* capacity - 1; capacity a power of two, or 0 */
    size_t n;
    size_t bytes; /* of the items */
    size_t nflags, nsegments;
    struct ld__plan plan; /* dropped when only it holds its snapshot */
    struct ld__metas metas;
    size_t sweep_at; /* the next slot cache_sweep() looks at */
    /* Items of more than `big` values are compiled on `worker` (made at the
     * first such item), one at a time; `compiles` are those under way. */
    struct event_base *base;
    struct ld__worker *worker;
    struct ld__compile *compiles;
    struct ld__compile *orphans; /* whose callback could not be set: freed after the worker */
    size_t big;
    size_t ncompiling, ncompiled;
};

/* Slots of the cache looked at for stale entries at each compile: enough
 * that a sweep goes round the table before it must grow again (a grow
 * leaves it a quarter full, and the next comes at half), so that a store
 * replacing items keeps the cache bounded (with 4 it grew without bound
 * when each compile replaced an item). */
#define LD__CACHE_SWEEP 16

static inline size_t ld__hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return (size_t)x;
}

/* Hashes of `in` values (eval_ops.c's sets; eval_hash.c): strings by
 * their bytes, numbers by value, any JSON deeply. */
static inline uint64_t ld__mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

static inline uint64_t ld__hash_bytes(const char *s, size_t len)
{
    uint64_t h = UINT64_C(0x9e3779b97f4a7c15) ^ len, w;
    for (; len >= 8; s += 8, len -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * UINT64_C(0xbf58476d1ce4e5b9);
        h ^= h >> 31;
    }
    w = 0;
    memcpy(&w, s, len);
    return ld__mix64(h ^ w);
}

/* Numbers hash by value: -0.0 as 0.0 (they are equal). */
static inline uint64_t ld__hash_number(double x)
{
    uint64_t bits;
    if (x == 0)
        x = 0;
    memcpy(&bits, &x, sizeof(bits));
    return ld__mix64(bits ^ UINT64_C(0x5bd1e9955bd1e995));
}

/* A hash of `v` that equal values (ld__json_same()) share. */
uint64_t ld__hash_json(const json_t *v);

/* Deep equality, numbers by value (1 == 1.0 at any depth). */
bool ld__json_same(const json_t *a, const json_t *b);

/* The entry of `json` compiled as `type`: the store may hold the same JSON
 * as a flag and as a segment (it shares what it is given), so both key it. */
static inline struct ld__item *ld__cache_find(const struct ld__cache *c, enum ld__item_type type,
                                              const json_t *json)
{
    if (!c->t)
        return NULL;
    for (size_t i = ld__hash_ptr(json) & c->mask;; i = (i + 1) & c->mask) {
        if (c->t[i].json == json && c->t[i].item && c->t[i].item->type == type)
            return c->t[i].item;
        if (!c->t[i].json)
            return NULL;
    }
}

/* Compiles `json` as `type` into the cache (after a miss of
 * ld__cache_find()); `keep`: see ld__cache_grow(). An item of more than
 * c->big values is compiled on the evaluator's worker instead: NULL with
 * *wait set to that compile (started now, or the one under way), which
 * ld__job_wait() waits for. @return the item (borrowed from the cache);
 * NULL with *wait NULL when memory ran out. */
struct ld__item *ld__cache_add(struct ld__cache *c, enum ld__item_type type, json_t *json,
                               bool keep, struct ld__compile **wait);

/* The compiled form of `json` (a stored flag or segment, borrowed), from
 * the cache or compiled now; `keep`: see ld__cache_grow(); *wait: see
 * ld__cache_add(). @return it (borrowed from the cache), or NULL. */
static inline struct ld__item *ld__cache_get_keep(struct ld__cache *c, enum ld__item_type type,
                                                  json_t *json, bool keep,
                                                  struct ld__compile **wait)
{
    *wait = NULL;
    struct ld__item *it = ld__cache_find(c, type, json);
    return it ? it : ld__cache_add(c, type, json, keep, wait);
}

static inline struct ld__item *ld__cache_get(struct ld__cache *c, enum ld__item_type type,
                                             json_t *json, struct ld__compile **wait)
{
    return ld__cache_get_keep(c, type, json, false, wait);
}

/* Puts a compiled item (one reference, given) into the cache, making room.
 * @return 0, or LD_ENOMEM (`it` released). */
int ld__cache_put(struct ld__cache *c, struct ld__item *it);

/* ---- large items, compiled on the evaluator's worker (eval_big.c) */

/* The compile of `json` as `type` under way, or a new one on c->worker
 * (made now if need be). @return it, or NULL when memory ran out. */
struct ld__compile *ld__compile_start(struct ld__cache *c, enum ld__item_type type, json_t *json);

/* Ends the compiles of an evaluator being freed: the worker stops (a
 * compile under way gives up) and is freed (its thread joined); each
 * compile's future still completes from the loop, which frees it. */
void ld__compile_free_all(struct ld__cache *c);

/* The number above which an item is compiled on the worker: 50,000, or
 * LDASYNC_EVAL_BIG_ITEM (a test's knob). */
size_t ld__compile_big(void);

/* Makes room for one more entry (eval_cache.c says how). `keep`: an
 * evaluation reading at once may be walking a stale entry (when the store
 * lets go of what it read, or answered with a copy): ld__cache_add() then
 * drops none. @return 0 or LD_ENOMEM. */
int ld__cache_grow(struct ld__cache *c, bool keep);

void ld__cache_free(struct ld__cache *c);

/* ---- the evaluator */

struct ld__job;

struct ld_evaluator {
    ld_store *store;
    struct event_base *base;
    ld_big_segment_store *bss;
    int64_t stale_after;
    struct ld__cache cache;
    struct ld__job *jobs; /* waiting for the store */
    ld_evaluator_limit_fn limit_fn;
    void *limit_arg;
    /* All-flags jobs made in slices, first to last: the first is the one
     * being made; `resume` (a zero timeout) runs its next slice. */
    struct ld__job *qhead, *qtail;
    struct event *resume;
    int64_t slice_end;  /* ns: when the slice running now is over */
    size_t slice_flags; /* flags a slice evaluates at most (SIZE_MAX) */
    bool yielded;       /* the job run from the queue went back to it */
    bool resuming;      /* the queue is running a slice */
};

/* The membership of the context key `key` (a JSON string) when the big
 * segment store (set: ev->bss) answers within the call: 0 with *m
 * (borrowed until the loop runs; NULL: in no big segment) and *status;
 * else LD__E_NEED (*m NULL). */
int ld__membership_now(ld_evaluator *ev, const json_t *key, const json_t **m, int *status);

/* Tells ev's limit function that a `matches` clause of `it` stopped. */
void ld__evaluator_stopped(ld_evaluator *ev, const struct ld__item *it);

/* ---- details (eval_detail.c) */

struct ld_detail {
    struct ld__item *flag; /* referenced, or NULL */
    json_t *value; /* a variation, borrowed from flag; the fallback, owned, when index < 0 */
    struct ld__str rule_id, prereq; /* borrowed from flag */
    int index;
    int rule;
    uint8_t kind;  /* enum ld_reason_kind */
    uint8_t error; /* enum ld_eval_error */
    int8_t big;    /* enum ld_big_segments_status, or -1 */
    bool in_experiment;
    /* The flag's first nprereqs prerequisites were evaluated (found in the
     * store and entered, whatever their result): the all-flags state lists
     * their keys. Saturates at UINT16_MAX. */
    uint16_t nprereqs;
};

_Static_assert(sizeof(struct ld_detail) <= LD__LINE_SIZE, "a detail is one line");

/* Whether `d`, a result of `f`, is one whose reason LaunchDarkly always
 * sends (an experiment: in one, or a rule or fallthrough that tracks
 * events): the all-flags state's trackReason, a feature event's. */
static inline bool ld__tracks_reason(const struct ld__flag *f, const ld_detail *d)
{
    return d->in_experiment ||
           (d->kind == LD_REASON_RULE_MATCH && d->rule >= 0 && (size_t)d->rule < f->nrules &&
            f->rules[d->rule].track_events) ||
           (d->kind == LD_REASON_FALLTHROUGH && f->track_fallthrough);
}
_Static_assert(LD_REASON_OFF == 0 && LD_REASON_FALLTHROUGH == 1, "eval_compile.c's simple_kind");

void ld__detail_free(void *p); /* an ld_future_fulfill_ptr() destructor */

/* ---- one evaluation (eval_walk.c) */

/* What a step answers besides 0 (and 1 for a match). */
#define LD__E_FAIL (-100) /* an evaluation error, in es->error (none: the store) */
#define LD__E_NEED (-101) /* something is not at hand: the resolver noted what */

struct ld__resolver {
    /* 0 with *out (NULL when absent or deleted); LD__E_NEED; LD__E_FAIL (with
     * es->error set). */
    int (*item)(void *arg, enum ld__item_type type, const struct ld__str *key,
                const struct ld__item **out);
    /* 0 with *m (borrowed; NULL when the context is in no big segment)
     * and *status; LD__E_NEED. `key` is the context key. */
    int (*membership)(void *arg, const json_t *key, const json_t **m, int *status);
    /* A limit stopped a `matches` clause of `it` for the first time. */
    void (*stopped)(void *arg, const struct ld__item *it);
};

/* ---- what an evaluation tells analytics events (the client's) */

/* One evaluation, as the recorder is told of it (all borrowed for the
 * call): the flag asked for, or one of the prerequisites its evaluation
 * entered (`prereq_of` then names the flag whose prerequisite it is). */
struct ld__eval_rec {
    const char *key; /* the flag's key */
    size_t key_len;
    const ld_context *ctx;
    const struct ld__flag *flag; /* NULL: not found (or not read: a store error) */
    const ld_detail *d;          /* the result (its value: NULL for the fallback) */
    const json_t *fallback;      /* the caller's; NULL (JSON null) for a prerequisite */
    const struct ld__flag *prereq_of;
    bool with_reason; /* the caller asked for the detail */
};

/* Told of each evaluation that completes, from the loop thread: the
 * prerequisites it entered first, in the order they were entered, then the
 * flag asked for. An evaluation that waits for the store is told of once,
 * when it completes (never for a walk that stopped to read). */
struct ld__recorder {
    void (*fn)(void *arg, const struct ld__eval_rec *r);
    void *arg;
    bool with_reason;
};

/* The prerequisites one walk entered, for the recorder. */
struct ld__prereq_ent {
    const struct ld__flag *flag, *of;
    int index, rule;
    struct ld__str rule_id, prereq;
    uint8_t kind;
    bool in_experiment;
};

struct ld__prereq_log {
    struct ld__prereq_ent *e; /* `inl`, or ld__malloc()ed */
    size_t n, cap;
    struct ld__prereq_ent inl[8];
};

/* Evaluates `f` (NULL: not found) into `d`, whose value and strings it
 * borrows from `f` (value NULL: the fallback is served); `log`, unless
 * NULL, receives the prerequisites entered (appended; past what memory
 * allows, the rest are left out). @return 0 or LD__E_NEED (d is then
 * undefined). */
int ld__evaluate_into(const ld_context *ctx, const struct ld__resolver *rv, void *arg,
                      const struct ld__item *f, ld_value_type type, const json_t *fallback,
                      ld_detail *d, struct ld__prereq_log *log);

/* ld__evaluate_into() into a detail of its own: 0 with *out (NULL when
 * memory ran out; fallback stolen), or LD__E_NEED (fallback not taken). */
int ld__evaluate(const ld_context *ctx, const struct ld__resolver *rv, void *arg,
                 const struct ld__item *f, ld_value_type type, json_t *fallback, ld_detail **out);

/* ld__evaluate(), and when it completes `rec` (unless NULL) is told of
 * it, `key` (`len` bytes) being the flag asked for. */
int ld__evaluate_rec(const ld_context *ctx, const struct ld__resolver *rv, void *arg,
                     const struct ld__item *f, ld_value_type type, json_t *fallback,
                     ld_detail **out, const struct ld__recorder *rec, const char *key, size_t len);

/* Tells `rec` of an evaluation that ended without a walk (the flag could
 * not be read): `d` for `key`, `fallback` the caller's. */
void ld__record_one(const struct ld__recorder *rec, const char *key, size_t len,
                    const ld_context *ctx, const ld_detail *d, const json_t *fallback);

/* ld_evaluator_detail() told to `rec` (borrowed: it must outlive the
 * evaluation, which freeing the evaluator ends). */
ld_future *ld__evaluator_detail_rec(ld_evaluator *ev, const char *flag_key, ld_context *ctx,
                                    ld_value_type type, json_t *fallback,
                                    const struct ld__recorder *rec);

/* ---- reading the store (eval.c, eval_job.c) */

static inline const ld_kind *ld__item_kind(enum ld__item_type type)
{
    return type == LD__FLAG ? &ld__kind_features : &ld__kind_segments;
}

/* False for a key no store can hold: empty, with a NUL inside (JSON allows
 * "p\u0000x"; the store's get takes a C string, which would ask for "p"),
 * or not valid UTF-8 (a store rejects it with LD_EINVAL). Such a flag,
 * prerequisite or segment is absent, on every store. */
static inline bool ld__key_ok(const struct ld__str *key)
{
    return key->len > 0 && !memchr(key->s, '\0', key->len) && ld__utf8_valid(key->s, key->len);
}

/* ---- jobs (eval_job.c) */

struct ld__job {
    struct ld__job *prev, *next;
    ld_evaluator *ev; /* NULL once the evaluator is freed */
    ld_store *store;
    ld_future *out;
    ld_context *ctx;
    json_t *fallback;
    char *key;
    size_t len;
    struct ld__slot *slots;
    struct ld__mslot *mslots;
    json_t *flags, *segments; /* all flags: the snapshots */
    int64_t metadata;
    int metadata_error;
    int outstanding;
    int store_error;    /* a store read failed: EXCEPTION */
    bool uninitialized; /* all flags: the store was never initialized */
    unsigned options;
    uint8_t type;
    uint8_t metadata_state;
    bool all;
    bool state; /* all flags: fulfil with an ld_flags_state, not JSON */
    bool nomem;
    bool queued; /* all flags: in the evaluator's queue of sliced jobs */
    /* all flags: at the head of that queue, reading the memberships it
     * needs in the middle of its slices; the states after it wait */
    bool waiting;
    /* All flags, made in slices: the plan's next entry, and what the
     * slices made so far (an ld_flags_state, or the JSON state and its
     * $flagsState). */
    size_t at;
    struct ld_flags_state *partial;
    json_t *st, *meta;
    struct ld__job *qnext;
    struct ld__cwait *waits;        /* compiles waited for (each counts in outstanding) */
    const struct ld__recorder *rec; /* told of the evaluation, or NULL */
};

/* An all-flags state is made in slices of about this many nanoseconds,
 * one slice per pass of the loop (the environment variable
 * LDASYNC_EVAL_SLICE_FLAGS also bounds a slice by a number of flags: a
 * test's knob). */
#define LD__EVAL_SLICE_NS 1000000

/* What each_result() answers when a slice is over. */
#define LD__E_YIELD (-102)

/* Puts all-flags job `j` in its evaluator's queue (at the front when
 * `front`: the job the queue is running), whose next slice runs in a later
 * pass of the loop. @return 0 or LD_ENOMEM. */
int ld__job_queue(struct ld__job *j, bool front);

/* Runs job `j` (started, with nothing outstanding) one step. */
void ld__job_step(struct ld__job *j);

/* A job of `ev` for `ctx` (referenced), linked into ev->jobs. @return it,
 * or NULL when memory ran out. */
struct ld__job *ld__job_new(ld_evaluator *ev, ld_context *ctx);

/* Starts the job; returns the caller's reference to its future. */
ld_future *ld__job_start(struct ld__job *j);

/* Unlinks the job from its evaluator, which no longer knows it. */
void ld__job_unlink(struct ld__job *j);

/* Frees the job (unlinked, with no read outstanding). */
void ld__job_free(struct ld__job *j);

/* Makes job `j` wait for compile `c` of `json` as `type` (once: a wait
 * under way is not repeated), for slot `s` (the item it came back for) or
 * NULL (an all-flags job, which walks its snapshots again): outstanding
 * counts it, and the job goes on when the compile is over. @return 0, or
 * LD_ENOMEM (j->nomem set). */
int ld__job_wait(struct ld__job *j, struct ld__compile *c, enum ld__item_type type, json_t *json,
                 struct ld__slot *s);

/* Notes that the job wants item `key` (`len` bytes) of `type` (nothing for a
 * key no store can hold). @return its slot, or NULL (j->nomem when memory
 * ran out). */
struct ld__slot *ld__job_want(struct ld__job *j, enum ld__item_type type, const char *key,
                              size_t len);

/* Reads what all-flags job `j` needs from a store that does not answer at
 * once: whether it is initialized (`init`: 1 or 0 when known, < 0 to ask)
 * and both snapshots. @return the caller's reference to the job's future. */
ld_future *ld__job_read_all(struct ld__job *j, int init);

/* The resolver of jobs: items from what came back (or from the snapshots of
 * an all-flags job), noting what is missing. */
extern const struct ld__resolver ld__job_resolver;

/* ---- all flags (eval_all.c) */

/* One flag of an all-flags state: what its evaluation gave, and which of
 * LaunchDarkly's $flagsState fields it carries (LD_FLAG_STATE_*). */
struct ld__flag_result {
    ld_detail d;        /* borrows from f (d.flag is NULL) */
    struct ld__flag *f; /* referenced in an ld_flags_state */
    const char *key;    /* the flags snapshot's */
    size_t len;
    unsigned fields;
};

/* The results of ld_evaluator_flags_state() (eval_state.c reads them). */
struct ld_flags_state {
    struct ld__flag_result *r;
    size_t n, cap;
    json_t *flags; /* the flags snapshot the keys and values are of, referenced */
    bool valid;
};

/* Frees a state (NULL-safe): an ld_future_fulfill_ptr() destructor. */
void ld__flags_state_free(void *p);

/* The all-flags state of the job's snapshots, as JSON; NULL when memory
 * ran out, or *rc is LD__E_NEED (memberships to read) or LD__E_YIELD (the
 * slice is over: the job keeps what it made, and a later call goes on). */
json_t *ld__all_flags_state(struct ld__job *j, int *rc);

/* The same as an ld_flags_state (a new one). */
struct ld_flags_state *ld__all_flags_results(struct ld__job *j, int *rc);

#endif /* LDASYNC_EVAL_INTERNAL_H */
