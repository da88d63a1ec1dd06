/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: kinds of items, item validation, tombstones, and the dependency
 * order of a data set (kind.h).
 */
#include <stdlib.h>
#include <string.h>

#include <ldasync/error.h>
#include <ldasync/kind.h>

#include "core/core-internal.h"
#include "model/model-internal.h"

struct ld_kind {
    const char *ns;
    int priority;
    int has_prerequisites;
};

const ld_kind ld__kind_segments = {"segments", 0, 0};
const ld_kind ld__kind_features = {"features", 1, 1};

/* In ascending priority: the order ld_data_sort() writes kinds in. */
static const ld_kind *const kinds[] = {&ld__kind_segments, &ld__kind_features};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

const ld_kind *ld_kind_features(void)
{
    return &ld__kind_features;
}

const ld_kind *ld_kind_segments(void)
{
    return &ld__kind_segments;
}

const char *ld_kind_namespace(const ld_kind *kind)
{
    return kind ? kind->ns : NULL;
}

int ld_kind_priority(const ld_kind *kind)
{
    return kind ? kind->priority : -1;
}

const ld_kind *ld_kind_by_namespace(const char *ns)
{
    for (size_t i = 0; ns && i < NKINDS; i++)
        if (strcmp(kinds[i]->ns, ns) == 0)
            return kinds[i];
    return NULL;
}

/* The kind whose namespace is the `len` bytes at `ns` (a JSON object key,
 * which may hold a NUL: then it is no kind's). */
static const ld_kind *kind_by_namespace_len(const char *ns, size_t len)
{
    for (size_t i = 0; i < NKINDS; i++)
        if (strlen(kinds[i]->ns) == len && memcmp(kinds[i]->ns, ns, len) == 0)
            return kinds[i];
    return NULL;
}

/* ---- UTF-8 ---------------------------------------------------------------- */

bool ld__utf8_valid_tail(const char *p, size_t len)
{
    const unsigned char *s = (const unsigned char *)p, *end = s + len;
    while (s < end) {
        unsigned c = *s;
        if (c < 0x80) {
            s++;
            continue;
        }
        size_t n;                      /* continuation bytes */
        unsigned lo = 0x80, hi = 0xBF; /* the range of the first of them */
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
        } else if (c == 0xE0) {
            n = 2, lo = 0xA0; /* no overlong forms */
        } else if (c == 0xED) {
            n = 2, hi = 0x9F; /* no surrogates */
        } else if (c >= 0xE1 && c <= 0xEF) {
            n = 2;
        } else if (c == 0xF0) {
            n = 3, lo = 0x90; /* no overlong forms */
        } else if (c >= 0xF1 && c <= 0xF3) {
            n = 3;
        } else if (c == 0xF4) {
            n = 3, hi = 0x8F; /* nothing above U+10FFFF */
        } else {
            return false; /* a continuation byte, C0, C1, F5..FF */
        }
        if ((size_t)(end - s) <= n || s[1] < lo || s[1] > hi)
            return false;
        for (size_t k = 2; k <= n; k++)
            if ((s[k] & 0xC0) != 0x80)
                return false;
        s += n + 1;
    }
    return true;
}

/* ---- items ---------------------------------------------------------------- */

static int invalid(const char **why, const char *message)
{
    if (why)
        *why = message;
    return LD_EINVAL;
}

/* The all-flags state's own keys: a flag of such a key would be written
 * over them (or they over it). */
bool ld__key_reserved(const char *s, size_t len)
{
    return (len == 6 && memcmp(s, "$valid", 6) == 0) ||
           (len == 11 && memcmp(s, "$flagsState", 11) == 0);
}

int ld__item_parse_hinted(const json_t *item, struct ld_item_info *info, const char **why,
                          ld__item_hint_fn hint, void *arg)
{
    if (!json_is_object(item))
        return invalid(why, "item must be a JSON object");
    const json_t *k = json_object_getn(item, "key", 3);
    if (!json_is_string(k) || json_string_length(k) == 0 ||
        strlen(json_string_value(k)) != json_string_length(k))
        return invalid(why, "item \"key\" must be a non-empty string without NUL");
    if (!ld__utf8_valid(json_string_value(k), json_string_length(k)))
        return invalid(why, "item \"key\" must be valid UTF-8");
    if (ld__key_reserved(json_string_value(k), json_string_length(k)))
        return invalid(why, "item \"key\" must not be \"$valid\" or \"$flagsState\"");
    if (hint)
        hint(arg, json_string_value(k), json_string_length(k));
    const json_t *v = json_object_getn(item, "version", 7);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return invalid(why, "item \"version\" must be an integer >= 0");
    const json_t *d = json_object_getn(item, "deleted", 7);
    if (d && !json_is_boolean(d))
        return invalid(why, "item \"deleted\" must be a boolean");
    if (info) {
        info->key = json_string_value(k);
        info->version = (int64_t)json_integer_value(v);
        info->deleted = json_is_true(d);
    }
    return 0;
}

int ld_item_parse(const json_t *item, struct ld_item_info *info, const char **why)
{
    return ld__item_parse_hinted(item, info, why, NULL, NULL);
}

/* ld_item_parse() plus the check that the item is filed under its own key
 * (when `key` is not NULL). */
static int parse_filed(const json_t *item, const char *key, size_t key_len,
                       struct ld_item_info *info, const char **why)
{
    int rc = ld_item_parse(item, info, why);
    /* info->key has no NUL (ld_item_parse); an object key may */
    if (rc == 0 && key && (strlen(info->key) != key_len || memcmp(info->key, key, key_len) != 0))
        return invalid(why, ld__utf8_valid(key, key_len)
                                ? "item \"key\" differs from the key it is filed under"
                                : "the key an item is filed under must be valid UTF-8");
    return rc;
}

int ld_item_validate(const json_t *item, const char *key, const char **why)
{
    struct ld_item_info info;
    return parse_filed(item, key, key ? strlen(key) : 0, &info, why);
}

const char *ld_item_key(const json_t *item)
{
    return json_string_value(json_object_get(item, "key"));
}

int64_t ld_item_version(const json_t *item)
{
    const json_t *v = json_object_get(item, "version");
    return json_is_integer(v) && json_integer_value(v) >= 0 ? (int64_t)json_integer_value(v) : -1;
}

bool ld_item_is_deleted(const json_t *item)
{
    return json_is_true(json_object_get(item, "deleted"));
}

json_t *ld_tombstone_new(const char *key, int64_t version)
{
    if (!key || !*key || version < 0 || !ld__utf8_valid(key, strlen(key)) ||
        ld__key_reserved(key, strlen(key)))
        return NULL;
    return json_pack("{s:s, s:I, s:b}", "key", key, "version", (json_int_t)version, "deleted", 1);
}

/* ---- data sets ------------------------------------------------------------ */

int ld__data_walk(const json_t *all_data, ld__data_visit_fn visit, void *arg, const char **why)
{
    if (!json_is_object(all_data))
        return invalid(why, "all_data must be a JSON object of namespaces");
    const char *ns, *key;
    size_t ns_len, key_len;
    json_t *coll, *item;
    json_object_keylen_foreach((json_t *)all_data, ns, ns_len, coll)
    {
        if (!json_is_object(coll))
            return invalid(why, "all_data: each namespace must map to an object of items");
        const ld_kind *kind = kind_by_namespace_len(ns, ns_len);
        json_object_keylen_foreach(coll, key, key_len, item)
        {
            struct ld_item_info info;
            int rc = parse_filed(item, key, key_len, &info, why);
            if (rc == 0 && visit && kind)
                rc = visit(arg, kind, item, &info);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

int ld_data_validate(const json_t *all_data, const char **why)
{
    return ld__data_walk(all_data, NULL, NULL, why);
}

/* A frame of the depth-first walk: an item and the next prerequisite of it
 * to look at. */
struct frame {
    json_t *item;
    size_t next;
};

/* The key of the next prerequisite of f->item that is in `coll` and not yet
 * placed (or being placed), or NULL when there is none left; its length in
 * *len (a key with a NUL names no item: item keys have none). */
static const char *next_prerequisite(struct frame *f, const json_t *coll, const json_t *seen,
                                     size_t *len)
{
    const json_t *prereqs = json_object_get(f->item, "prerequisites");
    size_t n = json_array_size(prereqs);
    while (f->next < n) {
        const json_t *ks = json_object_get(json_array_get(prereqs, f->next++), "key");
        const char *k = json_string_value(ks);
        *len = json_string_length(ks);
        if (k && json_object_getn(coll, k, *len) && !json_object_getn(seen, k, *len))
            return k;
    }
    return NULL;
}

/* Flags in an order where each comes after its prerequisites. An item is
 * marked seen when the walk reaches it, before its prerequisites are
 * visited, so a cycle ends where it closes. An explicit stack: no recursion
 * however deep the prerequisites go. */
static json_t *sort_by_prerequisites(const json_t *coll)
{
    json_t *out = json_array(), *seen = json_object();
    size_t cap = 16, depth = 0;
    struct frame *stack = ld__malloc(cap * sizeof(*stack));
    const char *key;
    json_t *item;
    int ok = out && seen && stack;
    json_object_foreach((json_t *)coll, key, item)
    {
        if (!ok)
            break;
        if (json_object_get(seen, key))
            continue;
        ok = json_object_set(seen, key, json_true()) == 0;
        stack[depth++] = (struct frame){item, 0};
        while (ok && depth > 0) {
            size_t pk_len;
            const char *pk = next_prerequisite(&stack[depth - 1], coll, seen, &pk_len);
            if (!pk) {
                ok = json_array_append(out, stack[--depth].item) == 0;
                continue;
            }
            if (depth == cap) {
                struct frame *bigger = ld__realloc(stack, 2 * cap * sizeof(*stack));
                if (!bigger) {
                    ok = 0;
                    break;
                }
                stack = bigger;
                cap *= 2;
            }
            ok = json_object_setn(seen, pk, pk_len, json_true()) == 0;
            stack[depth++] = (struct frame){json_object_getn(coll, pk, pk_len), 0};
        }
    }
    ld__free(stack);
    json_decref(seen);
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}

static json_t *items_in_order(const json_t *coll)
{
    json_t *out = json_array();
    const char *key;
    json_t *item;
    json_object_foreach((json_t *)coll, key, item)
    {
        if (!out || json_array_append(out, item) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static int append_kind(json_t *out, const char *ns, size_t ns_len, const json_t *coll,
                       int by_prerequisites)
{
    json_t *items = by_prerequisites ? sort_by_prerequisites(coll) : items_in_order(coll);
    if (!items)
        return LD_ENOMEM;
    return json_array_append_new(
               out, json_pack("{s:s%, s:o}", "namespace", ns, ns_len, "items", items)) == 0
               ? 0
               : LD_ENOMEM;
}

json_t *ld_data_sort(const json_t *all_data)
{
    if (ld_data_validate(all_data, NULL) != 0)
        return NULL;
    json_t *out = json_array();
    int rc = out ? 0 : LD_ENOMEM;
    for (size_t i = 0; rc == 0 && i < NKINDS; i++) {
        const json_t *coll = json_object_get(all_data, kinds[i]->ns);
        if (coll)
            rc = append_kind(out, kinds[i]->ns, strlen(kinds[i]->ns), coll,
                             kinds[i]->has_prerequisites);
    }
    const char *ns;
    size_t ns_len;
    json_t *coll;
    json_object_keylen_foreach((json_t *)all_data, ns, ns_len, coll)
    {
        if (rc == 0 && !kind_by_namespace_len(ns, ns_len))
            rc = append_kind(out, ns, ns_len, coll, 0);
    }
    if (rc != 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}
