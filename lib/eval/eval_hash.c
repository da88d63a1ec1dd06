/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Hashing and deep equality of JSON values, for the sets of `in` clauses
 * (eval_ops.c): equal values (numbers by value, objects whatever the
 * order of their members) hash equal.
 */
#include <string.h>

#include "eval/eval-internal.h"

/* How deep hash_json() looks into arrays and objects: below, a value
 * hashes by its type and size only (still a function of the value, so
 * equal values hash equal). A context attribute may be nested a million
 * levels deep (a C caller can build one): the hash must not recurse that
 * far on the loop's stack. */
#define HASH_DEPTH 32

static uint64_t hash_json_at(const json_t *v, int depth);

uint64_t ld__hash_json(const json_t *v)
{
    return hash_json_at(v, 0);
}

static uint64_t hash_json_at(const json_t *v, int depth)
{
    if (depth >= HASH_DEPTH && (json_is_array(v) || json_is_object(v)))
        return ld__mix64((json_is_array(v) ? json_array_size(v) : json_object_size(v)) ^
                         (json_is_array(v) ? UINT64_C(0x2000) : UINT64_C(0x1000)));
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        /* a sum: independent of the order of the members */
        uint64_t h = json_object_size(v);
        json_t *o = (json_t *)v;
        for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it)) {
            uint64_t k = ld__hash_bytes(json_object_iter_key(it), json_object_iter_key_len(it));
            h += ld__mix64(k ^ (hash_json_at(json_object_iter_value(it), depth + 1) *
                                UINT64_C(0x9e3779b97f4a7c15)));
        }
        return ld__mix64(h ^ UINT64_C(0x1000));
    }
    case JSON_ARRAY: {
        uint64_t h = json_array_size(v) ^ UINT64_C(0x2000);
        for (size_t i = 0; i < json_array_size(v); i++)
            h = ld__mix64(h ^ hash_json_at(json_array_get(v, i), depth + 1)) + i;
        return h;
    }
    case JSON_STRING:
        return ld__hash_bytes(json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
    case JSON_REAL:
        return ld__hash_number(json_number_value(v));
    case JSON_TRUE:
        return 1;
    case JSON_FALSE:
        return 2;
    default:
        return 3;
    }
}

bool ld__json_same(const json_t *a, const json_t *b)
{
    if (a == b)
        return true;
    bool an = json_is_number(a), bn = json_is_number(b);
    if (an || bn)
        return an && bn && json_number_value(a) == json_number_value(b);
    if (json_typeof(a) != json_typeof(b))
        return false;
    switch (json_typeof(a)) {
    case JSON_STRING: {
        size_t n = json_string_length(a);
        return n == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), n) == 0;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(a);
        if (n != json_array_size(b))
            return false;
        for (size_t i = 0; i < n; i++)
            if (!ld__json_same(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    }
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b))
            return false;
        json_t *o = (json_t *)a;
        for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it)) {
            const json_t *bv =
                json_object_getn(b, json_object_iter_key(it), json_object_iter_key_len(it));
            if (!bv || !ld__json_same(json_object_iter_value(it), bv))
                return false;
        }
        return true;
    }
    default:
        return true; /* true, false, null: the type is the value */
    }
}
