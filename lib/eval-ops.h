/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the clause operators of flag evaluation, with the semantics of
 * LaunchDarkly's server SDKs (Go's where they differ, except: regular
 * expressions are PCRE2's, dates need a 2-digit hour, an offset hour of 0-23
 * and a day that exists in its month). Never installed.
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
 * Threads: a compiled form is immutable except for the PCRE2 match data of
 * `matches`, which ld__clause_values_match writes: a compiled form is used by
 * one thread at a time (the evaluator runs on its loop thread). Forms of
 * different clauses are independent. JIT-compiled patterns run on a 32 KiB
 * stack that PCRE2 takes from the calling thread's stack.
 *
 * Memory: everything goes through ld__malloc/ld__free (alloc-internal.h),
 * PCRE2's allocations too (through a general context). The JIT's executable
 * code is mapped by PCRE2 itself (mmap).
 */
#ifndef LDASYNC_EVAL_OPS_H
#define LDASYNC_EVAL_OPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
 * with *out NULL and nothing allocated left behind. Never fails on bad input.
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

#endif /* LDASYNC_EVAL_OPS_H */
