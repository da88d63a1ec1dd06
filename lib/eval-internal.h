/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the compiled forms of flags and segments that the evaluator
 * walks instead of their JSON (eval_compile.c), shared with eval.c. Never
 * installed.
 *
 * A compiled item holds a reference to its stored JSON item and borrows
 * every string from it (keys, salts, rule ids, context kinds), so that what
 * it adds to the store's memory is its arrays and hash sets. It is
 * immutable once made and reference counted (atomically: a detail that
 * holds its flag may be released on any thread).
 */
#ifndef LDASYNC_EVAL_INTERNAL_H
#define LDASYNC_EVAL_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "eval-ops.h"

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
    int64_t generation;
    bool has_generation;
    bool unbounded;
};

/* Compiles a stored flag or segment (`json` referenced on success).
 * @return 0 and *out (one reference); LD_ENOMEM. Never fails otherwise: a
 * field of the wrong type marks the item or the part that holds it bad. */
int ld__item_compile(enum ld__item_type type, json_t *json, struct ld__item **out);

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

#endif /* LDASYNC_EVAL_INTERNAL_H */
