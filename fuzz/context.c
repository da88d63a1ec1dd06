/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * fuzz/context.c: libFuzzer target for evaluation contexts
 * (include/ldasync/context.h).
 *
 * Input: one flags byte, then attribute references separated by '\t' up to
 * the first '\n', then JSON text, decoded with jansson (JSON_DECODE_ANY;
 * flag bit 0 adds JSON_ALLOW_NUL). The value goes through
 * ld_context_from_json(), whose answer is compared with a model of the
 * rules written here from context.h and eval-spec section 1; any difference
 * calls abort(). An accepted context is checked (kinds sorted and valid,
 * keys, the canonical key, anonymous, private references, every attribute
 * given), looked up with each reference (compared with a model of
 * references), turned into JSON and read back (the same context), rebuilt
 * with the builder (flag bit 1) and joined with another context by
 * ld_context_multi() (flag bit 2).
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

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "fuzz/context.c:%d: check failed: %s\n", __LINE__, #cond); \
            abort();                                                                   \
        }                                                                              \
    } while (0)

/* ---- helpers -------------------------------------------------------------- */

static bool is(const char *s, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

/* json_equal() with object keys compared with their length. */
static bool same_json(const json_t *a, const json_t *b)
{
    if (json_is_object(a) && json_is_object(b)) {
        if (json_object_size(a) != json_object_size(b))
            return false;
        const char *k;
        size_t len;
        json_t *v;
        json_object_keylen_foreach((json_t *)a, k, len, v)
        {
            if (!same_json(v, json_object_getn(b, k, len)))
                return false;
        }
        return true;
    }
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!same_json(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    }
    return json_equal(a, b);
}

static bool has_nul(const json_t *s)
{
    return memchr(json_string_value(s), '\0', json_string_length(s)) != NULL;
}

/* ---- the model of the rules ----------------------------------------------- */

static bool model_kind_ok(const char *s, size_t len)
{
    if (len == 0 || is(s, len, "kind") || is(s, len, "multi"))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

static bool model_key_ok(const json_t *key, bool empty_ok)
{
    return json_is_string(key) && (empty_ok || json_string_length(key) > 0) && !has_nul(key);
}

static bool model_strings(const json_t *a)
{
    if (!a || json_is_null(a))
        return true;
    if (!json_is_array(a))
        return false;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!json_is_string(json_array_get(a, i)) || has_nul(json_array_get(a, i)))
            return false;
    return true;
}

static bool model_single_ok(const json_t *o)
{
    if (!model_key_ok(json_object_get(o, "key"), false))
        return false;
    const json_t *v = json_object_get(o, "name");
    if (v && !json_is_string(v) && !json_is_null(v))
        return false;
    v = json_object_get(o, "anonymous");
    if (v && !json_is_boolean(v) && !json_is_null(v))
        return false;
    v = json_object_get(o, "_meta");
    if (v && !json_is_null(v) && !json_is_object(v))
        return false;
    return !json_is_object(v) || model_strings(json_object_get(v, "privateAttributes"));
}

static const char *const BUILTINS[] = {"name",    "firstName", "lastName", "email",
                                       "country", "ip",        "avatar",   "secondary"};

static bool model_user_ok(const json_t *o)
{
    if (!model_key_ok(json_object_get(o, "key"), true))
        return false;
    for (size_t i = 0; i < sizeof BUILTINS / sizeof BUILTINS[0]; i++) {
        const json_t *v = json_object_get(o, BUILTINS[i]);
        if (v && !json_is_string(v) && !json_is_null(v))
            return false;
    }
    const json_t *v = json_object_get(o, "anonymous");
    if (v && !json_is_boolean(v) && !json_is_null(v))
        return false;
    v = json_object_get(o, "custom");
    if (v && !json_is_null(v) && !json_is_object(v))
        return false;
    return model_strings(json_object_get(o, "privateAttributeNames"));
}

static bool model_ok(const json_t *j)
{
    if (!json_is_object(j))
        return false;
    const json_t *kind = json_object_get(j, "kind");
    if (!kind || json_is_null(kind))
        return model_user_ok(j);
    if (!json_is_string(kind))
        return false;
    if (!is(json_string_value(kind), json_string_length(kind), "multi"))
        return model_kind_ok(json_string_value(kind), json_string_length(kind)) &&
               model_single_ok(j);
    if (json_object_size(j) < 2)
        return false;
    const char *name;
    size_t len;
    json_t *v;
    json_object_keylen_foreach((json_t *)j, name, len, v)
    {
        if (is(name, len, "kind"))
            continue;
        if (!model_kind_ok(name, len) || !json_is_object(v) || !model_single_ok(v))
            return false;
        const json_t *inner = json_object_get(v, "kind");
        if (inner && !(json_is_string(inner) && json_string_length(inner) == len &&
                       memcmp(json_string_value(inner), name, len) == 0))
            return false;
    }
    return true;
}

/* The canonical key: "kind:key" with '%' and ':' escaped in keys, joined with
 * ':', or the key of a lone user. */
static void model_fqkey(const ld_context *c, char *out, size_t cap)
{
    size_t n = ld_context_kind_count(c), o = 0;
    if (n == 1 && strcmp(ld_context_kind(c, 0), "user") == 0) {
        snprintf(out, cap, "%s", ld_context_key(c, "user"));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *k = ld_context_kind(c, i), *key = ld_context_key(c, k);
        o += (size_t)snprintf(out + o, cap - o, "%s%s:", i ? ":" : "", k);
        for (; *key; key++)
            o += (size_t)snprintf(out + o, cap - o, "%s",
                                  *key == '%'   ? "%25"
                                  : *key == ':' ? "%3A"
                                                : (char[]){*key, 0});
    }
}

/* What a reference finds (eval-spec 1.4): plain names literally; "/a/b":
 * objects only, "~0" '~', "~1" '/', anything else after '~' invalid, no
 * empty component. */
static const json_t *model_get(const ld_context *c, const char *kind, const char *ref)
{
    if (!*ref)
        return NULL;
    if (ref[0] != '/')
        return ld_context_get_literal(c, kind, ref);
    const json_t *cur = NULL;
    bool first = true, valid = true;
    size_t rlen = strlen(ref);
    char *buf = malloc(rlen + 1);
    CHECK(buf);
    const char *s = ref + 1;
    for (;;) {
        const char *end = strchr(s, '/');
        size_t len = end ? (size_t)(end - s) : strlen(s), o = 0;
        if (len == 0)
            valid = false;
        for (size_t i = 0; i < len && valid; i++) {
            if (s[i] != '~')
                buf[o++] = s[i];
            else if (i + 1 < len && (s[i + 1] == '0' || s[i + 1] == '1'))
                buf[o++] = s[++i] == '0' ? '~' : '/';
            else
                valid = false;
        }
        buf[o] = '\0';
        if (valid)
            cur = first ? ld_context_get_literal(c, kind, buf)
                        : (json_is_object(cur) ? json_object_getn(cur, buf, o) : NULL);
        first = false;
        if (!end || !valid)
            break;
        s = end + 1;
    }
    free(buf);
    return valid ? cur : NULL;
}

/* ---- checks ----------------------------------------------------------------- */

static void check_same(const ld_context *a, const ld_context *b)
{
    CHECK(ld_context_kind_count(a) == ld_context_kind_count(b));
    CHECK(strcmp(ld_context_fully_qualified_key(a), ld_context_fully_qualified_key(b)) == 0);
    for (size_t i = 0; i < ld_context_kind_count(a); i++) {
        const char *k = ld_context_kind(a, i);
        CHECK(strcmp(k, ld_context_kind(b, i)) == 0);
        CHECK(strcmp(ld_context_key(a, k), ld_context_key(b, k)) == 0);
        CHECK(ld_context_anonymous(a, k) == ld_context_anonymous(b, k));
        CHECK(ld_context_private_count(a, k) == ld_context_private_count(b, k));
        for (size_t p = 0; p < ld_context_private_count(a, k); p++)
            CHECK(strcmp(ld_context_private(a, k, p), ld_context_private(b, k, p)) == 0);
    }
    json_t *ja = ld_context_to_json(a), *jb = ld_context_to_json(b);
    CHECK(same_json(ja, jb));
    json_decref(ja);
    json_decref(jb);
}

/* The attributes of the individual context `o` (kind `kind`) are there;
 * `old` is the old-style user whose "custom" `o` is, or NULL. */
static void check_attrs(const ld_context *c, const char *kind, const json_t *o, const json_t *old)
{
    const char *name;
    size_t len;
    json_t *v;
    json_object_keylen_foreach((json_t *)o, name, len, v)
    {
        if (!len || strlen(name) != len || is(name, len, "kind") || is(name, len, "key") ||
            is(name, len, "anonymous") || is(name, len, "_meta"))
            continue;
        const json_t *got = ld_context_get_literal(c, kind, name);
        if (old && !is(name, len, "secondary") && json_is_string(json_object_get(old, name)))
            continue; /* the built-in at the top wins */
        if (json_is_null(v))
            CHECK(old || got == NULL); /* an old user's custom may fill it */
        else if (!old || !is(name, len, "name") || json_is_string(v))
            CHECK(same_json(got, v));
    }
}

static void check_context(const ld_context *c, const json_t *j, char **refs, size_t nrefs,
                          uint8_t flags)
{
    size_t n = ld_context_kind_count(c);
    CHECK(n >= 1 && ld_context_is_multi(c) == (n > 1));
    CHECK(ld_context_kind(c, n) == NULL);
    for (size_t i = 0; i < n; i++) {
        const char *k = ld_context_kind(c, i);
        CHECK(model_kind_ok(k, strlen(k)));
        CHECK(i == 0 || strcmp(ld_context_kind(c, i - 1), k) < 0);
        const char *key = ld_context_key(c, k);
        CHECK(key && (*key || (n == 1 && strcmp(k, "user") == 0)));
        CHECK(json_is_boolean(ld_context_get(c, k, "anonymous")));
        CHECK(json_is_true(ld_context_get(c, k, "anonymous")) == ld_context_anonymous(c, k));
        CHECK(strcmp(json_string_value(ld_context_get(c, k, "/kind")), k) == 0);
        CHECK(strcmp(json_string_value(ld_context_get(c, k, "key")), key) == 0);
        CHECK(ld_context_get(c, k, "_meta") == NULL);
        for (size_t r = 0; r < nrefs; r++)
            CHECK(ld_context_get(c, k, refs[r]) == model_get(c, k, refs[r]));
        const json_t *o = n > 1 || is(json_string_value(json_object_get(j, "kind")),
                                      json_string_length(json_object_get(j, "kind")), "multi")
                              ? json_object_get(j, k)
                              : j;
        bool old = o == j && !json_is_string(json_object_get(j, "kind"));
        if (!old)
            check_attrs(c, k, o, NULL);
        else if (json_is_object(json_object_get(j, "custom")))
            check_attrs(c, k, json_object_get(j, "custom"), j);
        if (old) {
            for (size_t b = 0; b < sizeof BUILTINS / sizeof BUILTINS[0] - 1; b++) {
                const json_t *v = json_object_get(j, BUILTINS[b]);
                if (json_is_string(v))
                    CHECK(same_json(ld_context_get_literal(c, k, BUILTINS[b]), v));
            }
            CHECK(ld_context_get(c, k, "secondary") == NULL ||
                  json_is_object(json_object_get(j, "custom")));
        }
    }
    static char fq[1 << 17];
    if (strlen(ld_context_fully_qualified_key(c)) < sizeof fq / 4) {
        model_fqkey(c, fq, sizeof fq);
        CHECK(strcmp(fq, ld_context_fully_qualified_key(c)) == 0);
    }

    /* JSON and back */
    json_t *out = ld_context_to_json(c);
    CHECK(out);
    const char *why = NULL;
    ld_context *again = ld_context_from_json(out, &why);
    CHECK(again);
    check_same(c, again);
    ld_context_unref(again);

    /* the builder, for a single kind with a key (names with a NUL or ""
     * cannot be given to it) */
    if ((flags & 2) && n == 1 && *ld_context_key(c, ld_context_kind(c, 0))) {
        const char *k = ld_context_kind(c, 0);
        ld_context_builder *b = ld_context_builder_new(k, ld_context_key(c, k));
        CHECK(b);
        const json_t *attrs = json_object_get(out, "kind") ? out : NULL;
        const char *name;
        size_t len;
        json_t *v;
        bool all = true;
        json_object_keylen_foreach((json_t *)attrs, name, len, v)
        {
            if (!len || strlen(name) != len) {
                all = false;
                continue;
            }
            int rc = ld_context_builder_set(b, name, json_incref(v));
            CHECK(rc == (is(name, len, "kind") || is(name, len, "key") || is(name, len, "_meta")
                             ? LD_EINVAL
                             : 0));
        }
        for (size_t p = 0; p < ld_context_private_count(c, k); p++)
            CHECK(ld_context_builder_private(b, ld_context_private(c, k, p)) == 0);
        ld_context *built = ld_context_builder_build(b, &why);
        CHECK(built);
        if (all)
            check_same(c, built);
        ld_context_builder_free(b);
        ld_context_unref(built);
    }

    /* joined with another kind */
    if (flags & 4) {
        json_t *oj = json_pack("{s:s, s:s, s:i}", "kind", "zz-fuzz", "key", "z:%", "n", 1);
        ld_context *other = ld_context_from_json(oj, NULL);
        CHECK(other);
        const ld_context *parts[] = {c, other};
        ld_context *m = ld_context_multi(parts, 2, &why);
        bool empty = n == 1 && !*ld_context_key(c, ld_context_kind(c, 0));
        bool twice = ld_context_key(c, "zz-fuzz") != NULL;
        CHECK((m != NULL) == (!empty && !twice));
        if (m) {
            CHECK(ld_context_kind_count(m) == n + 1);
            json_t *mj = ld_context_to_json(m);
            ld_context *m2 = ld_context_from_json(mj, &why);
            CHECK(m2);
            check_same(m, m2);
            ld_context_unref(m2);
            json_decref(mj);
        }
        ld_context_unref(m);
        ld_context_unref(other);
        json_decref(oj);
    }
    json_decref(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    const char *nl = memchr(text, '\n', len);
    size_t rlen = nl ? (size_t)(nl - text) : 0;

    /* the references: C strings, so cut at a NUL */
    char *rbuf = malloc(rlen + 1);
    char *refs[16];
    size_t nrefs = 0;
    CHECK(rbuf);
    memcpy(rbuf, text, rlen);
    rbuf[rlen] = '\0';
    for (char *r = rbuf; r && nrefs < 16;) {
        refs[nrefs++] = r;
        r = strchr(r, '\t');
        if (r)
            *r++ = '\0';
    }
    if (nl) {
        text = nl + 1;
        len -= rlen + 1;
    }

    size_t dflags = JSON_DECODE_ANY | ((flags & 1) ? JSON_ALLOW_NUL : 0);
    json_error_t err;
    json_t *j = json_loadb(text, len, dflags, &err);
    if (j) {
        const char *why = NULL;
        ld_context *c = ld_context_from_json(j, &why);
        CHECK((c != NULL) == model_ok(j));
        if (c)
            check_context(c, j, refs, nrefs, flags);
        else
            CHECK(why && *why);
        ld_context *c2 = ld_context_from_json(j, NULL); /* the same answer without why */
        CHECK((c2 != NULL) == (c != NULL));
        ld_context_unref(c2);
        ld_context_unref(c);
        json_decref(j);
    }
    free(rbuf);
    return 0;
}
