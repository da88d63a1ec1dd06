/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the model's internal header: what kind.c offers the rest of the
 * library, and what the evaluator reads of a context. Never installed.
 */
#ifndef LDASYNC_MODEL_INTERNAL_H
#define LDASYNC_MODEL_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <ldasync/context.h>
#include <ldasync/kind.h>

/*
 * What kind.c offers the rest of the library.
 */

/* The two kinds, whose addresses ld_kind_features() and ld_kind_segments()
 * return: the library's own code compares with them without a call (the
 * public functions are called through the PLT). */
extern const struct ld_kind ld__kind_features __attribute__((visibility("hidden")));
extern const struct ld_kind ld__kind_segments __attribute__((visibility("hidden")));

/* True if the `len` bytes at `s` are valid UTF-8 (strict: no overlong
 * forms, no surrogates, nothing above U+10FFFF), starting at a character
 * boundary. The out-of-line part of ld__utf8_valid(). */
bool ld__utf8_valid_tail(const char *s, size_t len);

/* True if the `len` bytes at `s` are valid UTF-8. Keys must be (they come
 * from JSON): cheap for ASCII, whose high bits are checked 8 (or 4) bytes
 * at a time, the last block overlapping the one before; the full check
 * runs only from the block where a byte >= 0x80 is. */
static inline bool ld__utf8_valid(const char *s, size_t len)
{
    const uint64_t high = UINT64_C(0x8080808080808080);
    uint64_t w;
    uint32_t a, b;
    size_t i = 0;
    if (len >= 8) {
        for (; i + 8 <= len; i += 8) {
            memcpy(&w, s + i, 8);
            if (w & high)
                return ld__utf8_valid_tail(s + i, len - i);
        }
        if (i == len)
            return true;
        memcpy(&w, s + len - 8, 8); /* bytes before i are ASCII: a hit is at or after i */
        return !(w & high) || ld__utf8_valid_tail(s + i, len - i);
    }
    if (len >= 4) {
        memcpy(&a, s, 4);
        memcpy(&b, s + len - 4, 4);
        return !((a | b) & 0x80808080u) || ld__utf8_valid_tail(s, len);
    }
    for (; i < len; i++)
        if ((unsigned char)s[i] >= 0x80)
            return ld__utf8_valid_tail(s, len);
    return true;
}

/* Called for each valid item of a known kind; a non-zero return stops the
 * walk and is returned by it. */
typedef int (*ld__data_visit_fn)(void *arg, const ld_kind *kind, json_t *item,
                                 const struct ld_item_info *info);

/* Validates `all_data` as ld_data_validate() does, reading each item once,
 * and calls `visit` (if not NULL) for every valid item of a known kind,
 * until the first invalid item (which ends the walk with LD_EINVAL and *why
 * set). Items visited before an invalid one are not taken back: a caller
 * that must be all or nothing builds on the side. */
int ld__data_walk(const json_t *all_data, ld__data_visit_fn visit, void *arg, const char **why);

/* Told the item's key as soon as it is known valid, before the rest is
 * read: a store can start loading what it will touch for this key. */
typedef void (*ld__item_hint_fn)(void *arg, const char *key, size_t len);

/* True for a key no item may have (kind.h): "$valid" or "$flagsState", the
 * all-flags state's own top-level keys; `len` is the key's length. */
bool ld__key_reserved(const char *key, size_t len);

/* ld_item_parse() with `hint` (may be NULL) called along the way. */
int ld__item_parse_hinted(const json_t *item, struct ld_item_info *info, const char **why,
                          ld__item_hint_fn hint, void *arg);

/*
 * What the evaluator reads of a context, without copies or
 * reference counts. `ctx` is never NULL here; `i` is below
 * ld_context_kind_count(). Every json_t is borrowed from the context.
 */

/*
 * The layout of a context, for the inline readers below (lib/events reads
 * a context's attributes through them: a file compiled into the test
 * program as well as into the library cannot call the library's ld__
 * functions). Only context.c makes and changes contexts.
 */

/* One individual context. Every json_t here is owned and never modified
 * after the context is made. */
struct ld__context_part {
    json_t *kind;  /* string */
    json_t *key;   /* string */
    json_t *attrs; /* object: "name" and custom attributes, no nulls; never
                      "kind", "key", "anonymous" or "_meta" */
    json_t *priv;  /* array of attribute reference strings */
    bool anonymous;
};

struct ld_context {
    atomic_size_t refs;
    char *fqkey;
    uint64_t *slots; /* when n > HASHED_KINDS (context.c): (hash << 32 | index + 1), 0 empty */
    size_t mask;     /* slots - 1, a power of two - 1, at least 2n - 1 */
    size_t n;
    struct ld__context_part parts[]; /* sorted by kind */
};

/* The `i`th individual context of `ctx` (kinds in byte order), borrowed:
 * its kind and key (strings), whether it is anonymous, its attributes (an
 * object of "name" and the custom attributes, in the order they were set)
 * and its private attribute references (an array of strings). */
static inline const struct ld__context_part *ld__context_part(const ld_context *ctx, size_t i)
{
    return &ctx->parts[i];
}

/* The index of the individual context of kind `kind` (`len` bytes), or -1. */
int ld__context_find(const ld_context *ctx, const char *kind, size_t len);

/* Its kind and key (strings). */
json_t *ld__context_part_kind(const ld_context *ctx, size_t i);
json_t *ld__context_part_key(const ld_context *ctx, size_t i);

/* Its top-level attribute `name` (`len` bytes, unescaped): "kind", "key",
 * "anonymous" (always a bool), or another; NULL when absent. */
json_t *ld__context_part_attr(const ld_context *ctx, size_t i, const char *name, size_t len);

#endif /* LDASYNC_MODEL_INTERNAL_H */
