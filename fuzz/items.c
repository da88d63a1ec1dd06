/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * fuzz/items.c: libFuzzer target for item and data set validation and for
 * ld_data_sort() (include/ldasync/kind.h).
 *
 * Input: one flags byte, then JSON text. The text is decoded with jansson
 * (JSON_DECODE_ANY; flag bit 0 adds JSON_ALLOW_NUL) and the value, and every
 * object value inside it down to two levels, goes through ld_item_parse(),
 * ld_item_validate() (with a key chosen by the flags), the item readers and
 * ld_data_validate(). Each answer is compared with a model of the rules
 * written here from kind.h; any difference calls abort(). A data set that is
 * accepted is sorted with ld_data_sort(), and the result is checked: every
 * namespace once, in the documented order; every item of a namespace exactly
 * once; flags after their prerequisites unless the edge lies on a cycle;
 * other kinds in their input order.
 *
 * Uses the public API only.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <ldasync/ldasync.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz/items.c:%d: check failed: %s\n", __LINE__, #cond); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* ---- the model of kind.h's rules ------------------------------------------ */

/* A non-empty string, not "$valid" or "$flagsState" (kind.h: the all-flags
 * state's own keys). kind.h says only "non-empty string"; the library also
 * refuses a key with an embedded NUL (its message says so), which a C
 * string key could not represent. The model follows the library there. */
static bool model_key_ok(const json_t *k)
{
    if (!json_is_string(k))
        return false;
    size_t n = json_string_length(k);
    const char *s = json_string_value(k);
    if (strcmp(s, "$valid") == 0 || strcmp(s, "$flagsState") == 0)
        return false; /* (with a NUL after it, refused below anyway) */
    return n > 0 && memchr(s, '\0', n) == NULL;
}

static bool model_version_ok(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) >= 0;
}

/* An item: an object, "key" a non-empty string, "version" an integer >= 0,
 * "deleted" absent or a boolean. */
static bool model_item_ok(const json_t *item)
{
    if (!json_is_object(item))
        return false;
    if (!model_key_ok(json_object_get(item, "key")))
        return false;
    if (!model_version_ok(json_object_get(item, "version")))
        return false;
    const json_t *d = json_object_get(item, "deleted");
    return d == NULL || json_is_boolean(d);
}

/* The item is valid and its key is the `len` bytes at `key`. */
static bool model_filed_ok(const json_t *item, const char *key, size_t len)
{
    if (!model_item_ok(item))
        return false;
    const json_t *k = json_object_get(item, "key");
    return json_string_length(k) == len && memcmp(json_string_value(k), key, len) == 0;
}

/* An object of namespaces, each an object of valid items filed under their
 * own keys (object keys compared byte for byte, NULs included). */
static bool model_data_ok(const json_t *all)
{
    if (!json_is_object(all))
        return false;
    const char *ns, *key;
    size_t key_len;
    json_t *coll, *item;
    json_object_foreach((json_t *)all, ns, coll)
    {
        if (!json_is_object(coll))
            return false;
        json_object_keylen_foreach(coll, key, key_len, item)
        {
            if (!model_filed_ok(item, key, key_len))
                return false;
        }
    }
    return true;
}

/* ---- items ---------------------------------------------------------------- */

static void check_item(const json_t *item, uint8_t flags)
{
    bool ok = model_item_ok(item);

    struct ld_item_info info;
    memset(&info, 0xa5, sizeof(info));
    const char *why = NULL;
    int rc = ld_item_parse(item, &info, &why);
    CHECK(rc == 0 || rc == LD_EINVAL);
    CHECK((rc == 0) == ok);
    if (ok) {
        const json_t *k = json_object_get(item, "key");
        CHECK(info.key == json_string_value(k)); /* borrowed from the item */
        CHECK(info.version == (int64_t)json_integer_value(json_object_get(item, "version")));
        CHECK(info.deleted == json_is_true(json_object_get(item, "deleted")));
    } else {
        CHECK(why != NULL && *why != '\0');
    }
    CHECK(ld_item_parse(item, NULL, NULL) == rc);

    /* ld_item_validate with no key, the item's own key, a longer one, a
     * shorter one, or an empty one. */
    const json_t *k = json_object_get(item, "key");
    const char *own = json_string_value(k);
    char other[64];
    const char *key = NULL;
    bool want = ok;
    switch ((flags >> 1) & 3) {
    case 0:
        break;
    case 1:
        if (own && strlen(own) == json_string_length(k)) {
            key = own;
        }
        break;
    case 2:
        snprintf(other, sizeof(other), "%.40sx", own ? own : "");
        key = other;
        want = false; /* never the item's key: one byte more */
        break;
    case 3:
        key = "";
        want = false;
        break;
    }
    why = NULL;
    rc = ld_item_validate(item, key, &why);
    CHECK(rc == 0 || rc == LD_EINVAL);
    if (key == other && own && strlen(own) > 40)
        want = ok && strcmp(own, other) == 0; /* truncated: may be equal by chance */
    CHECK((rc == 0) == want);
    CHECK(rc == 0 || (why != NULL && *why != '\0'));
    CHECK(ld_item_validate(item, NULL, NULL) == (ok ? 0 : LD_EINVAL));

    /* The readers. */
    const json_t *v = json_object_get(item, "version");
    CHECK(ld_item_version(item) == (model_version_ok(v) ? (int64_t)json_integer_value(v) : -1));
    CHECK(ld_item_is_deleted(item) == json_is_true(json_object_get(item, "deleted")));
    const char *rk = ld_item_key(item);
    if (!json_is_object(item) || k == NULL)
        CHECK(rk == NULL);
    else if (json_is_string(k))
        CHECK(rk == own);
}

/* ---- ld_data_sort --------------------------------------------------------- */

static bool is_ns(const char *key, size_t len, const char *ns)
{
    return len == strlen(ns) && memcmp(key, ns, len) == 0;
}

/* The index in `items` (n entries) of the item with key `k` in `coll`, or -1.
 * The library looks prerequisite keys up as C strings (json_object_get), and
 * so does the model: a key with an embedded NUL names what its C string
 * names. */
static long find_item(json_t *const *items, size_t n, const json_t *coll, const json_t *k)
{
    /* by the whole string: a key with a NUL byte names no item (the
     * library looks keys up by length too) */
    const json_t *it = json_is_string(k)
                           ? json_object_getn(coll, json_string_value(k), json_string_length(k))
                           : NULL;
    for (size_t i = 0; it && i < n; i++)
        if (items[i] == it)
            return (long)i;
    return -1;
}

/* Does flag `from` depend on flag `to`, directly or through others?
 * An iterative depth-first search over the prerequisite edges. */
static bool reaches(json_t *const *items, size_t n, const json_t *coll, size_t from, size_t to)
{
    bool *seen = calloc(n, sizeof(*seen));
    size_t *stack = malloc(n * sizeof(*stack));
    CHECK(seen && stack);
    size_t depth = 0;
    bool found = false;
    stack[depth++] = from;
    seen[from] = true;
    while (depth > 0 && !found) {
        size_t cur = stack[--depth];
        const json_t *pre = json_object_get(items[cur], "prerequisites");
        for (size_t j = 0; j < json_array_size(pre); j++) {
            long p = find_item(items, n, coll, json_object_get(json_array_get(pre, j), "key"));
            if (p < 0)
                continue;
            if ((size_t)p == to) {
                found = true;
                break;
            }
            if (!seen[p]) {
                seen[p] = true;
                stack[depth++] = (size_t)p;
            }
        }
    }
    free(seen);
    free(stack);
    return found;
}

static void check_sorted_kind(const json_t *coll, const json_t *out_items, bool by_prerequisites)
{
    size_t n = json_object_size(coll);
    CHECK(json_is_array(out_items));
    CHECK(json_array_size(out_items) == n);
    json_t **items = malloc((n ? n : 1) * sizeof(*items));
    size_t *pos = malloc((n ? n : 1) * sizeof(*pos));
    CHECK(items && pos);
    size_t i = 0;
    const char *key;
    json_t *item;
    json_object_foreach((json_t *)coll, key, item)
    {
        items[i] = item;
        pos[i] = SIZE_MAX;
        i++;
    }
    /* Every item exactly once, shared by reference. */
    for (size_t o = 0; o < n; o++) {
        json_t *got = json_array_get(out_items, o);
        size_t at = SIZE_MAX;
        for (size_t j = 0; j < n; j++)
            if (items[j] == got)
                at = j;
        CHECK(at != SIZE_MAX);
        CHECK(pos[at] == SIZE_MAX);
        pos[at] = o;
        if (!by_prerequisites)
            CHECK(at == o); /* other kinds keep their input order */
    }
    /* Prerequisites first, except along a cycle. */
    for (size_t d = 0; by_prerequisites && d < n; d++) {
        const json_t *pre = json_object_get(items[d], "prerequisites");
        for (size_t j = 0; j < json_array_size(pre); j++) {
            long p = find_item(items, n, coll, json_object_get(json_array_get(pre, j), "key"));
            if (p < 0 || (size_t)p == d || pos[p] < pos[d])
                continue;
            /* p placed after d: only allowed if p depends on d (a cycle). */
            CHECK(reaches(items, n, coll, (size_t)p, d));
        }
    }
    free(items);
    free(pos);
}

static void check_sort(const json_t *all)
{
    json_t *sorted = ld_data_sort(all);
    CHECK(json_is_array(sorted));

    /* The namespaces expected, in order: segments, features, then the others
     * in input order. Compared byte for byte. */
    size_t n = json_object_size(all), m = 0;
    const char **ns = malloc((n ? n : 1) * sizeof(*ns));
    size_t *ns_len = malloc((n ? n : 1) * sizeof(*ns_len));
    const json_t **colls = malloc((n ? n : 1) * sizeof(*colls));
    CHECK(ns && ns_len && colls);
    static const char *const known[] = {"segments", "features"};
    const char *key;
    size_t key_len;
    json_t *coll;
    for (int k = 0; k < 2; k++) {
        json_object_keylen_foreach((json_t *)all, key, key_len, coll)
        {
            if (is_ns(key, key_len, known[k])) {
                ns[m] = key;
                ns_len[m] = key_len;
                colls[m++] = coll;
            }
        }
    }
    json_object_keylen_foreach((json_t *)all, key, key_len, coll)
    {
        if (!is_ns(key, key_len, known[0]) && !is_ns(key, key_len, known[1])) {
            ns[m] = key;
            ns_len[m] = key_len;
            colls[m++] = coll;
        }
    }
    CHECK(m == n);
    CHECK(json_array_size(sorted) == n);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(sorted, i);
        const json_t *name = json_object_get(e, "namespace");
        CHECK(json_is_string(name));
        CHECK(json_string_length(name) == ns_len[i]);
        CHECK(memcmp(json_string_value(name), ns[i], ns_len[i]) == 0);
        check_sorted_kind(colls[i], json_object_get(e, "items"),
                          is_ns(ns[i], ns_len[i], "features"));
    }
    free(ns);
    free(ns_len);
    free(colls);
    json_decref(sorted);
}

/* ---- data sets ------------------------------------------------------------ */

static void check_data(const json_t *all)
{
    bool ok = model_data_ok(all);
    const char *why = NULL;
    int rc = ld_data_validate(all, &why);
    CHECK(rc == 0 || rc == LD_EINVAL);
    CHECK((rc == 0) == ok);
    CHECK(rc == 0 || (why != NULL && *why != '\0'));
    CHECK(ld_data_validate(all, NULL) == rc);
    if (ok) {
        check_sort(all);
    } else {
        json_t *sorted = ld_data_sort(all);
        CHECK(sorted == NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    size_t dflags = JSON_DECODE_ANY | ((flags & 1) ? JSON_ALLOW_NUL : 0);
    json_error_t err;
    json_t *j = json_loadb((const char *)data + 1, size - 1, dflags, &err);
    if (!j)
        return 0;

    check_item(j, flags);
    check_data(j);
    /* One and two levels down: the namespaces of a data set and their items. */
    const char *k1, *k2;
    json_t *v1, *v2;
    if (json_is_object(j)) {
        json_object_foreach(j, k1, v1)
        {
            check_item(v1, flags);
            check_data(v1);
            if (json_is_object(v1)) {
                json_object_foreach(v1, k2, v2)
                {
                    check_item(v2, flags);
                }
            }
        }
    }
    json_decref(j);
    return 0;
}
