/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Evaluation contexts (context.h): parsing LaunchDarkly's JSON forms, the
 * builder, canonical keys and attribute references.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/context.h>
#include <ldasync/error.h>

#include "core/core-internal.h"
#include "model/model-internal.h"

/* Above this many kinds a context gets a hash table of them: the evaluator
 * looks a kind up per clause, and a context may have thousands. */
enum { HASHED_KINDS = 8 };

struct ld_context_builder {
    char *kind;
    char *key;
    json_t *attrs;
    json_t *priv;
    bool anonymous;
    bool nomem; /* a set or private call ran out of memory */
};

static const char NOMEM[] = "out of memory";

static void set_why(const char **why, const char *msg)
{
    if (why)
        *why = msg;
}

/* set_why(), then the answer of a step that failed. */
static int invalid(const char **why, const char *msg)
{
    set_why(why, msg);
    return -1;
}

static ld_context *fail(const char **why, const char *msg)
{
    set_why(why, msg);
    return NULL;
}

/* A deep copy of `v` that is NULL when any allocation failed (jansson's
 * json_copy() drops the members it could not add, and its deep copy may). */
static json_t *copy_value(const json_t *v, bool deep)
{
    if (json_is_object(v)) {
        json_t *o = json_object();
        if (!o)
            return NULL;
        for (void *it = json_object_iter((json_t *)v); it;
             it = json_object_iter_next((json_t *)v, it)) {
            json_t *m = json_object_iter_value(it);
            json_t *c = deep ? copy_value(m, true) : json_incref(m);
            if (!c || json_object_setn_new_nocheck(o, json_object_iter_key(it),
                                                   json_object_iter_key_len(it), c) != 0) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    if (json_is_array(v)) {
        json_t *a = json_array();
        if (!a)
            return NULL;
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *m = json_array_get(v, i);
            json_t *c = deep ? copy_value(m, true) : json_incref(m);
            if (!c || json_array_append_new(a, c) != 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    return json_copy((json_t *)v); /* scalars: all or nothing */
}

/* ---- making contexts ---------------------------------------------------- */

static void part_clear(struct ld__context_part *p)
{
    json_decref(p->kind);
    json_decref(p->key);
    json_decref(p->attrs);
    json_decref(p->priv);
    memset(p, 0, sizeof *p);
}

static ld_context *ctx_alloc(size_t n)
{
    ld_context *c = ld__calloc(1, sizeof *c + n * sizeof(struct ld__context_part));
    if (!c)
        return NULL;
    atomic_init(&c->refs, 1);
    c->n = n;
    return c;
}

static void ctx_free(ld_context *c)
{
    for (size_t i = 0; i < c->n; i++)
        part_clear(&c->parts[i]);
    ld__free(c->fqkey);
    ld__free(c->slots);
    ld__free(c);
}

/* NULL if `s` (`len` bytes) is a valid kind, else the reason. */
static const char *kind_invalid(const char *s, size_t len)
{
    if (len == 0)
        return "context \"kind\" must not be empty";
    if (len == 4 && memcmp(s, "kind", 4) == 0)
        return "context \"kind\" must not be \"kind\"";
    if (len == 5 && memcmp(s, "multi", 5) == 0)
        return "context \"kind\" \"multi\" must be a multi-kind context";
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return "context \"kind\" may only contain A-Z, a-z, 0-9, '.', '_' and '-'";
    }
    return NULL;
}

static size_t escaped_len(const char *s, size_t len)
{
    size_t n = len;
    for (size_t i = 0; i < len; i++)
        if (s[i] == ':' || s[i] == '%')
            n += 2;
    return n;
}

static char *put_escaped(char *out, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '%') {
            memcpy(out, "%25", 3);
            out += 3;
        } else if (s[i] == ':') {
            memcpy(out, "%3A", 3);
            out += 3;
        } else {
            *out++ = s[i];
        }
    }
    return out;
}

/* FNV-1a, 32 bits: kinds are short. */
static uint32_t kind_hash(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* The hash table of a context of many kinds; false when out of memory. */
static bool index_kinds(ld_context *c)
{
    if (c->n <= HASHED_KINDS)
        return true;
    size_t size = 16;
    while (size < 2 * c->n)
        size *= 2;
    c->slots = ld__calloc(size, sizeof *c->slots);
    if (!c->slots)
        return false;
    c->mask = size - 1;
    for (size_t i = 0; i < c->n; i++) {
        const json_t *k = c->parts[i].kind;
        uint32_t h = kind_hash(json_string_value(k), json_string_length(k));
        size_t at = h & c->mask;
        while (c->slots[at])
            at = (at + 1) & c->mask;
        c->slots[at] = (uint64_t)h << 32 | (uint64_t)(i + 1);
    }
    return true;
}

static int cmp_parts(const void *a, const void *b)
{
    const struct ld__context_part *x = a, *y = b;
    return strcmp(json_string_value(x->kind), json_string_value(y->kind));
}

/* Sorts the parts, refuses duplicate kinds and computes the canonical key.
 * On failure frees `c` and returns NULL. */
static ld_context *ctx_finish(ld_context *c, const char **why)
{
    qsort(c->parts, c->n, sizeof c->parts[0], cmp_parts);
    for (size_t i = 1; i < c->n; i++) {
        if (cmp_parts(&c->parts[i - 1], &c->parts[i]) == 0) {
            set_why(why, "multi-kind context cannot have the same kind more than once");
            ctx_free(c);
            return NULL;
        }
    }
    const struct ld__context_part *p0 = &c->parts[0];
    if (c->n == 1 && strcmp(json_string_value(p0->kind), "user") == 0) {
        c->fqkey = ld__strdup(json_string_value(p0->key));
    } else {
        size_t len = 0;
        for (size_t i = 0; i < c->n; i++)
            len += json_string_length(c->parts[i].kind) + 2 +
                   escaped_len(json_string_value(c->parts[i].key),
                               json_string_length(c->parts[i].key));
        c->fqkey = ld__malloc(len);
        if (c->fqkey) {
            char *o = c->fqkey;
            for (size_t i = 0; i < c->n; i++) {
                const struct ld__context_part *p = &c->parts[i];
                if (i)
                    *o++ = ':';
                memcpy(o, json_string_value(p->kind), json_string_length(p->kind));
                o += json_string_length(p->kind);
                *o++ = ':';
                o = put_escaped(o, json_string_value(p->key), json_string_length(p->key));
            }
            *o = '\0';
        }
    }
    if (!c->fqkey || !index_kinds(c)) {
        set_why(why, NOMEM);
        ctx_free(c);
        return NULL;
    }
    return c;
}

/* A literal attribute name as a reference string (new reference): names
 * starting with '/' become "/" + the name with '~' -> "~0", '/' -> "~1". */
static json_t *literal_to_ref(const json_t *name)
{
    const char *s = json_string_value(name);
    size_t len = json_string_length(name);
    if (len == 0 || s[0] != '/')
        return json_stringn_nocheck(s, len);
    size_t n = 1;
    for (size_t i = 0; i < len; i++)
        n += (s[i] == '~' || s[i] == '/') ? 2 : 1;
    char *buf = ld__malloc(n);
    if (!buf)
        return NULL;
    char *o = buf;
    *o++ = '/';
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '~') {
            *o++ = '~';
            *o++ = '0';
        } else if (s[i] == '/') {
            *o++ = '~';
            *o++ = '1';
        } else {
            *o++ = s[i];
        }
    }
    json_t *r = json_stringn_nocheck(buf, n);
    ld__free(buf);
    return r;
}

/* Copies the strings of `arr` (an array, or null / NULL) into p->priv,
 * literal names converted to references if `literal`. 0, or -1 with *why. */
static int take_private(struct ld__context_part *p, const json_t *arr, bool literal,
                        const char *bad, const char **why)
{
    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr))
        return invalid(why, bad);
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v)
    {
        /* handed out as C strings: "a\0b" would be read as "a" */
        if (!json_is_string(v) || memchr(json_string_value(v), '\0', json_string_length(v)))
            return invalid(why, bad);
    }
    json_array_foreach(arr, i, v)
    {
        json_t *s = literal ? literal_to_ref(v)
                            : json_stringn_nocheck(json_string_value(v), json_string_length(v));
        if (!s || json_array_append_new(p->priv, s) != 0)
            return invalid(why, NOMEM);
    }
    return 0;
}

/* Sets the attribute `name` of `p` to a deep copy of `v` (nulls skipped).
 * 0, or -1 with *why. */
static int take_attr(struct ld__context_part *p, const char *name, size_t len, const json_t *v,
                     const char **why)
{
    if (json_is_null(v))
        return 0;
    json_t *copy = copy_value(v, true);
    if (!copy || json_object_setn_new_nocheck(p->attrs, name, len, copy) != 0)
        return invalid(why, NOMEM);
    return 0;
}

/* True if the `len` bytes at `s` are the string `lit`. */
static bool is(const char *s, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

/* The key of `obj` into p->key; `empty_ok` for old-style users. */
static int take_key(struct ld__context_part *p, const json_t *obj, bool empty_ok, const char **why)
{
    const json_t *key = json_object_get(obj, "key");
    if (!key)
        return invalid(why, "context \"key\" is missing");
    if (!json_is_string(key))
        return invalid(why, "context \"key\" must be a string");
    size_t len = json_string_length(key);
    if (len == 0 && !empty_ok)
        return invalid(why, "context \"key\" must not be empty");
    if (memchr(json_string_value(key), '\0', len))
        return invalid(why, "context \"key\" must not contain NUL");
    p->key = json_stringn_nocheck(json_string_value(key), len);
    if (!p->key)
        return invalid(why, NOMEM);
    return 0;
}

static int part_init(struct ld__context_part *p, const char *kind, size_t kind_len,
                     const char **why)
{
    p->kind = json_stringn_nocheck(kind, kind_len);
    p->attrs = json_object();
    p->priv = json_array();
    if (!p->kind || !p->attrs || !p->priv)
        return invalid(why, NOMEM);
    return 0;
}

/* A new-style individual context from `obj` (an object), of kind `kind`. */
static int parse_single(struct ld__context_part *p, const char *kind, size_t kind_len,
                        const json_t *obj, const char **why)
{
    if (part_init(p, kind, kind_len, why) != 0 || take_key(p, obj, false, why) != 0)
        return -1;
    for (void *it = json_object_iter((json_t *)obj); it;
         it = json_object_iter_next((json_t *)obj, it)) {
        const char *name = json_object_iter_key(it);
        size_t len = json_object_iter_key_len(it);
        const json_t *v = json_object_iter_value(it);
        if (is(name, len, "kind") || is(name, len, "key"))
            continue;
        if (is(name, len, "name")) {
            if (!json_is_string(v) && !json_is_null(v))
                return invalid(why, "context \"name\" must be a string");
        } else if (is(name, len, "anonymous")) {
            if (!json_is_boolean(v) && !json_is_null(v))
                return invalid(why, "context \"anonymous\" must be a boolean");
            p->anonymous = json_is_true(v);
            continue;
        } else if (is(name, len, "_meta")) {
            if (json_is_null(v))
                continue;
            if (!json_is_object(v))
                return invalid(why, "context \"_meta\" must be an object");
            if (take_private(
                    p, json_object_get(v, "privateAttributes"), false,
                    "context \"_meta.privateAttributes\" must be an array of strings without NUL",
                    why) != 0)
                return -1;
            continue;
        }
        if (take_attr(p, name, len, v, why) != 0)
            return -1;
    }
    return 0;
}

static const struct {
    const char *name;
    const char *bad;
} USER_STRINGS[] = {
    {"name", "user \"name\" must be a string"},
    {"firstName", "user \"firstName\" must be a string"},
    {"lastName", "user \"lastName\" must be a string"},
    {"email", "user \"email\" must be a string"},
    {"country", "user \"country\" must be a string"},
    {"ip", "user \"ip\" must be a string"},
    {"avatar", "user \"avatar\" must be a string"},
    {"secondary", "user \"secondary\" must be a string"}, /* checked, dropped */
};

/* An old-style user (no "kind"). */
static int parse_user(struct ld__context_part *p, const json_t *obj, const char **why)
{
    if (part_init(p, "user", 4, why) != 0 || take_key(p, obj, true, why) != 0)
        return -1;
    const json_t *custom = json_object_get(obj, "custom");
    if (custom && !json_is_null(custom)) {
        if (!json_is_object(custom))
            return invalid(why, "user \"custom\" must be an object");
        for (void *it = json_object_iter((json_t *)custom); it;
             it = json_object_iter_next((json_t *)custom, it)) {
            const char *name = json_object_iter_key(it);
            size_t len = json_object_iter_key_len(it);
            const json_t *v = json_object_iter_value(it);
            if (is(name, len, "kind") || is(name, len, "key") || is(name, len, "anonymous") ||
                is(name, len, "_meta") || (is(name, len, "name") && !json_is_string(v)))
                continue;
            if (take_attr(p, name, len, v, why) != 0)
                return -1;
        }
    }
    for (size_t i = 0; i < sizeof USER_STRINGS / sizeof USER_STRINGS[0]; i++) {
        const json_t *v = json_object_get(obj, USER_STRINGS[i].name);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_string(v))
            return invalid(why, USER_STRINGS[i].bad);
        if (strcmp(USER_STRINGS[i].name, "secondary") != 0 &&
            take_attr(p, USER_STRINGS[i].name, strlen(USER_STRINGS[i].name), v, why) != 0)
            return -1;
    }
    const json_t *anon = json_object_get(obj, "anonymous");
    if (anon && !json_is_boolean(anon) && !json_is_null(anon))
        return invalid(why, "user \"anonymous\" must be a boolean");
    p->anonymous = json_is_true(anon);
    return take_private(p, json_object_get(obj, "privateAttributeNames"), true,
                        "user \"privateAttributeNames\" must be an array of strings without NUL",
                        why);
}

static ld_context *parse_multi(const json_t *j, const char **why)
{
    size_t n = json_object_size(j) - 1; /* all but "kind" */
    if (n == 0)
        return fail(why, "multi-kind context must contain at least one kind");
    ld_context *c = ctx_alloc(n);
    if (!c)
        return fail(why, NOMEM);
    size_t i = 0;
    for (void *it = json_object_iter((json_t *)j); it;
         it = json_object_iter_next((json_t *)j, it)) {
        /* with its length: a key "kind\0x" is not "kind" but a bad kind */
        const char *name = json_object_iter_key(it);
        size_t len = json_object_iter_key_len(it);
        const json_t *v = json_object_iter_value(it);
        if (len == 4 && memcmp(name, "kind", 4) == 0)
            continue;
        const char *bad = kind_invalid(name, len);
        if (!bad && !json_is_object(v))
            bad = "multi-kind context: each kind must be an object";
        /* eval-spec 1.1: the property name is the kind; a "kind" inside that
         * says otherwise (a nested "multi" too) is invalid */
        const json_t *inner = json_object_get(v, "kind");
        if (!bad && inner &&
            !(json_is_string(inner) && json_string_length(inner) == len &&
              memcmp(json_string_value(inner), name, len) == 0))
            bad = "multi-kind context: a \"kind\" inside a kind must be that kind";
        if (bad || i >= n || parse_single(&c->parts[i++], name, len, v, &bad) != 0) {
            set_why(why, bad ? bad : "context \"kind\" must not be repeated");
            ctx_free(c);
            return NULL;
        }
    }
    return ctx_finish(c, why);
}

ld_context *ld_context_from_json(const json_t *j, const char **why)
{
    if (!j || !json_is_object(j))
        return fail(why, "context must be a JSON object");
    const json_t *kind = json_object_get(j, "kind");
    if (json_is_null(kind))
        kind = NULL; /* an old-style user, as in Node's SDK (eval-spec 1.2) */
    if (kind && !json_is_string(kind))
        return fail(why, "context \"kind\" must be a string");
    if (kind && strcmp(json_string_value(kind), "multi") == 0 && json_string_length(kind) == 5)
        return parse_multi(j, why);
    if (kind) {
        const char *bad = kind_invalid(json_string_value(kind), json_string_length(kind));
        if (bad)
            return fail(why, bad);
    }
    ld_context *c = ctx_alloc(1);
    if (!c)
        return fail(why, NOMEM);
    int rc =
        kind ? parse_single(&c->parts[0], json_string_value(kind), json_string_length(kind), j, why)
             : parse_user(&c->parts[0], j, why);
    if (rc != 0) {
        ctx_free(c);
        return NULL;
    }
    return ctx_finish(c, why);
}

/* ---- references and accessors ------------------------------------------- */

ld_context *ld_context_ref(ld_context *ctx)
{
    if (ctx)
        atomic_fetch_add_explicit(&ctx->refs, 1, memory_order_relaxed);
    return ctx;
}

void ld_context_unref(ld_context *ctx)
{
    if (ctx && atomic_fetch_sub_explicit(&ctx->refs, 1, memory_order_acq_rel) == 1)
        ctx_free(ctx);
}

bool ld_context_is_multi(const ld_context *ctx)
{
    return ctx && ctx->n > 1;
}

size_t ld_context_kind_count(const ld_context *ctx)
{
    return ctx ? ctx->n : 0;
}

const char *ld_context_kind(const ld_context *ctx, size_t i)
{
    return ctx && i < ctx->n ? json_string_value(ctx->parts[i].kind) : NULL;
}

static bool part_is(const struct ld__context_part *p, const char *kind, size_t len)
{
    return json_string_length(p->kind) == len && memcmp(json_string_value(p->kind), kind, len) == 0;
}

/* The index of the part of kind `kind` (`len` bytes), or -1. A context of
 * many kinds looks it up in its hash table, so that a clause costs the
 * same whatever the number of kinds; the slot's hash spares reading the
 * kinds that only share the slot. */
static int find_index(const ld_context *ctx, const char *kind, size_t len)
{
    if (!ctx->slots) {
        for (size_t i = 0; i < ctx->n; i++)
            if (part_is(&ctx->parts[i], kind, len))
                return (int)i;
        return -1;
    }
    uint32_t h = kind_hash(kind, len);
    for (size_t at = h & ctx->mask; ctx->slots[at]; at = (at + 1) & ctx->mask) {
        uint64_t e = ctx->slots[at];
        size_t i = (size_t)(uint32_t)e - 1;
        if ((uint32_t)(e >> 32) == h && part_is(&ctx->parts[i], kind, len))
            return (int)i;
    }
    return -1;
}

static const struct ld__context_part *find(const ld_context *ctx, const char *kind)
{
    if (!ctx)
        return NULL;
    if (!kind)
        kind = "user";
    int i = find_index(ctx, kind, strlen(kind));
    return i < 0 ? NULL : &ctx->parts[i];
}

const char *ld_context_key(const ld_context *ctx, const char *kind)
{
    const struct ld__context_part *p = find(ctx, kind);
    return p ? json_string_value(p->key) : NULL;
}

const char *ld_context_fully_qualified_key(const ld_context *ctx)
{
    return ctx ? ctx->fqkey : NULL;
}

bool ld_context_anonymous(const ld_context *ctx, const char *kind)
{
    const struct ld__context_part *p = find(ctx, kind);
    return p && p->anonymous;
}

size_t ld_context_private_count(const ld_context *ctx, const char *kind)
{
    const struct ld__context_part *p = find(ctx, kind);
    return p ? json_array_size(p->priv) : 0;
}

const char *ld_context_private(const ld_context *ctx, const char *kind, size_t i)
{
    const struct ld__context_part *p = find(ctx, kind);
    return p ? json_string_value(json_array_get(p->priv, i)) : NULL;
}

/* The top-level attribute `name` (`len` bytes) of `p`. */
static json_t *top(const struct ld__context_part *p, const char *name, size_t len)
{
    if (len == 4 && memcmp(name, "kind", 4) == 0)
        return p->kind;
    if (len == 3 && memcmp(name, "key", 3) == 0)
        return p->key;
    if (len == 9 && memcmp(name, "anonymous", 9) == 0)
        return p->anonymous ? json_true() : json_false();
    return json_object_getn(p->attrs, name, len);
}

json_t *ld_context_get_literal(const ld_context *ctx, const char *kind, const char *name)
{
    const struct ld__context_part *p = find(ctx, kind);
    if (!p || !name || !*name)
        return NULL;
    return top(p, name, strlen(name));
}

json_t *ld_context_get(const ld_context *ctx, const char *kind, const char *ref)
{
    const struct ld__context_part *p = find(ctx, kind);
    if (!p || !ref || !*ref)
        return NULL;
    if (ref[0] != '/')
        return top(p, ref, strlen(ref));
    json_t *cur = NULL;
    const char *s = ref + 1;
    for (bool first = true;; first = false) {
        const char *end = strchr(s, '/');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == 0)
            return NULL; /* "/", "//x", "/a/" */
        /* Unescape into a buffer (only shrinks). */
        char small[128];
        char *buf = len < sizeof small ? small : ld__malloc(len + 1);
        if (!buf)
            return NULL;
        size_t o = 0;
        bool bad = false;
        for (size_t i = 0; i < len; i++) {
            if (s[i] != '~') {
                buf[o++] = s[i];
            } else if (i + 1 < len && (s[i + 1] == '0' || s[i + 1] == '1')) {
                buf[o++] = s[i + 1] == '0' ? '~' : '/';
                i++;
            } else {
                bad = true;
                break;
            }
        }
        json_t *next = NULL;
        if (!bad) {
            if (first)
                next = top(p, buf, o);
            else if (json_is_object(cur))
                next = json_object_getn(cur, buf, o);
        }
        if (buf != small)
            ld__free(buf);
        if (bad)
            return NULL;
        /* An absent value ends the walk, but the rest of the reference must
         * still be valid: keep checking it. */
        cur = next;
        if (!end)
            return cur;
        s = end + 1;
    }
}

/* ---- JSON out ----------------------------------------------------------- */

static json_t *part_to_json(const struct ld__context_part *p, bool with_kind)
{
    json_t *o = copy_value(p->attrs, true);
    if (!o)
        return NULL;
    /* copies: the caller may change the result, the context's strings never */
    if ((with_kind && json_object_set_new(o, "kind", json_copy(p->kind)) != 0) ||
        json_object_set_new(o, "key", json_copy(p->key)) != 0 ||
        (p->anonymous && json_object_set(o, "anonymous", json_true()) != 0))
        goto fail;
    if (json_array_size(p->priv)) {
        json_t *priv = copy_value(p->priv, true);
        json_t *meta = json_object();
        if (!priv || !meta) {
            json_decref(priv);
            json_decref(meta);
            goto fail;
        }
        if (json_object_set_new(meta, "privateAttributes", priv) != 0) {
            json_decref(meta);
            goto fail;
        }
        if (json_object_set_new(o, "_meta", meta) != 0)
            goto fail;
    }
    return o;
fail:
    json_decref(o);
    return NULL;
}

/* The literal name a reference of an old-style user was made from (the
 * inverse of literal_to_ref; new reference). */
static json_t *ref_to_literal(const json_t *ref)
{
    const char *s = json_string_value(ref);
    size_t len = json_string_length(ref);
    if (len == 0 || s[0] != '/')
        return json_stringn_nocheck(s, len);
    char *buf = ld__malloc(len);
    if (!buf)
        return NULL;
    size_t o = 0;
    for (size_t i = 1; i < len; i++) {
        if (s[i] == '~' && i + 1 < len && (s[i + 1] == '0' || s[i + 1] == '1')) {
            buf[o++] = s[i + 1] == '0' ? '~' : '/';
            i++;
        } else {
            buf[o++] = s[i];
        }
    }
    json_t *r = json_stringn_nocheck(buf, o);
    ld__free(buf);
    return r;
}

/* An old-style user: the only form in which the key may be empty. */
static json_t *old_user_to_json(const struct ld__context_part *p)
{
    json_t *o = json_object();
    if (!o || json_object_set_new(o, "key", json_copy(p->key)) != 0 ||
        (json_object_size(p->attrs) &&
         json_object_set_new(o, "custom", copy_value(p->attrs, true)) != 0) ||
        (p->anonymous && json_object_set_new(o, "anonymous", json_true()) != 0))
        goto fail;
    if (json_array_size(p->priv)) {
        json_t *names = json_array();
        if (json_object_set_new(o, "privateAttributeNames", names) != 0)
            goto fail;
        for (size_t i = 0; i < json_array_size(p->priv); i++)
            if (json_array_append_new(names, ref_to_literal(json_array_get(p->priv, i))) != 0)
                goto fail;
    }
    return o;
fail:
    json_decref(o);
    return NULL;
}

json_t *ld_context_to_json(const ld_context *ctx)
{
    if (!ctx)
        return NULL;
    /* only an old-style user has an empty key (the builder and multi-kind
     * contexts refuse it) */
    if (ctx->n == 1 && json_string_length(ctx->parts[0].key) == 0)
        return old_user_to_json(&ctx->parts[0]);
    if (ctx->n == 1)
        return part_to_json(&ctx->parts[0], true);
    json_t *o = json_object();
    if (!o || json_object_set_new(o, "kind", json_string("multi")) != 0)
        goto fail;
    for (size_t i = 0; i < ctx->n; i++)
        if (json_object_set_new(o, json_string_value(ctx->parts[i].kind),
                                part_to_json(&ctx->parts[i], false)) != 0)
            goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

/* ---- the builder -------------------------------------------------------- */

ld_context_builder *ld_context_builder_new(const char *kind, const char *key)
{
    ld_context_builder *b = ld__calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->kind = ld__strdup(kind ? kind : "user");
    b->key = key ? ld__strdup(key) : NULL;
    b->attrs = json_object();
    b->priv = json_array();
    if (!b->kind || (key && !b->key) || !b->attrs || !b->priv) {
        ld_context_builder_free(b);
        return NULL;
    }
    return b;
}

void ld_context_builder_free(ld_context_builder *b)
{
    if (!b)
        return;
    ld__free(b->kind);
    ld__free(b->key);
    json_decref(b->attrs);
    json_decref(b->priv);
    ld__free(b);
}

int ld_context_builder_set(ld_context_builder *b, const char *name, json_t *value)
{
    if (b && !value) {
        /* the value could not be made (json_string() etc. returned NULL):
         * the context would silently lack it, so the build fails */
        b->nomem = true;
        return LD_ENOMEM;
    }
    if (!b || !name || !*name || strcmp(name, "kind") == 0 || strcmp(name, "key") == 0 ||
        strcmp(name, "_meta") == 0 || !ld__utf8_valid(name, strlen(name))) {
        json_decref(value);
        return LD_EINVAL;
    }
    if (strcmp(name, "anonymous") == 0) {
        if (!json_is_boolean(value)) {
            json_decref(value);
            return LD_EINVAL;
        }
        b->anonymous = json_is_true(value);
        json_decref(value);
        return 0;
    }
    if (json_is_null(value)) {
        json_decref(value);
        json_object_del(b->attrs, name);
        return 0;
    }
    if (strcmp(name, "name") == 0 && !json_is_string(value)) {
        json_decref(value);
        return LD_EINVAL;
    }
    if (json_object_set_new(b->attrs, name, value) != 0) {
        b->nomem = true;
        return LD_ENOMEM;
    }
    return 0;
}

int ld_context_builder_private(ld_context_builder *b, const char *ref)
{
    if (!b || !ref)
        return LD_EINVAL;
    if (!ld__utf8_valid(ref, strlen(ref)))
        return LD_EINVAL;
    if (json_array_append_new(b->priv, json_string_nocheck(ref)) != 0) {
        b->nomem = true;
        return LD_ENOMEM;
    }
    return 0;
}

void ld_context_builder_anonymous(ld_context_builder *b, bool anonymous)
{
    if (b)
        b->anonymous = anonymous;
}

ld_context *ld_context_builder_build(const ld_context_builder *b, const char **why)
{
    if (!b)
        return fail(why, "no builder");
    if (b->nomem)
        return fail(why, NOMEM);
    const char *bad = kind_invalid(b->kind, strlen(b->kind));
    if (!bad && !b->key)
        bad = "context \"key\" is missing";
    else if (!bad && !*b->key)
        bad = "context \"key\" must not be empty";
    else if (!bad && !ld__utf8_valid(b->key, strlen(b->key)))
        bad = "context \"key\" must be valid UTF-8";
    if (bad)
        return fail(why, bad);
    ld_context *c = ctx_alloc(1);
    if (!c)
        return fail(why, NOMEM);
    struct ld__context_part *p = &c->parts[0];
    p->kind = json_string_nocheck(b->kind);
    p->key = json_string_nocheck(b->key);
    p->attrs = copy_value(b->attrs, false);
    p->priv = copy_value(b->priv, false);
    p->anonymous = b->anonymous;
    if (!p->kind || !p->key || !p->attrs || !p->priv) {
        set_why(why, NOMEM);
        ctx_free(c);
        return NULL;
    }
    return ctx_finish(c, why);
}

ld_context *ld_context_multi(const ld_context *const *parts, size_t n, const char **why)
{
    if (!parts && n)
        return fail(why, "multi-kind context: no parts");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!parts[i])
            return fail(why, "multi-kind context: a part is NULL");
        total += parts[i]->n;
    }
    if (total == 0)
        return fail(why, "multi-kind context must contain at least one kind");
    if (total == 1) {
        for (size_t i = 0; i < n; i++)
            if (parts[i]->n)
                return ld_context_ref((ld_context *)parts[i]);
    }
    /* as in the JSON form, whose parts cannot have it: only an old-style user
     * has the empty key */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < parts[i]->n; j++)
            if (json_string_length(parts[i]->parts[j].key) == 0)
                return fail(why, "multi-kind context: context \"key\" must not be empty");
    ld_context *c = ctx_alloc(total);
    if (!c)
        return fail(why, NOMEM);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < parts[i]->n; j++) {
            const struct ld__context_part *from = &parts[i]->parts[j];
            struct ld__context_part *to = &c->parts[k++];
            /* copies, not shared: jansson's json_incref() reads the count
             * without an atomic load, a data race with another thread that
             * frees a context sharing the value (TSan) */
            to->kind = json_copy(from->kind);
            to->key = json_copy(from->key);
            to->attrs = copy_value(from->attrs, true);
            to->priv = copy_value(from->priv, true);
            to->anonymous = from->anonymous;
            if (!to->kind || !to->key || !to->attrs || !to->priv) {
                ctx_free(c);
                return fail(why, NOMEM);
            }
        }
    }
    return ctx_finish(c, why);
}

/* ---- For the evaluator (context-internal.h) ------------------------------- */

int ld__context_find(const ld_context *ctx, const char *kind, size_t len)
{
    return find_index(ctx, kind, len);
}

json_t *ld__context_part_kind(const ld_context *ctx, size_t i)
{
    return ctx->parts[i].kind;
}

json_t *ld__context_part_key(const ld_context *ctx, size_t i)
{
    return ctx->parts[i].key;
}

json_t *ld__context_part_attr(const ld_context *ctx, size_t i, const char *name, size_t len)
{
    return top(&ctx->parts[i], name, len);
}
