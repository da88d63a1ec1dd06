/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Contexts as analytics events show them (events-internal.h): the JSON of
 * a context with its private attributes redacted, as LaunchDarkly's SDKs
 * write it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <ldasync/context.h>

#include "core/core-internal.h"
#include "events/events-internal.h"
#include "model/model-internal.h"

/* A global private attribute reference: its text and depth (0: invalid). */
struct gref {
    char *text;
    size_t depth;
};

struct ld__ctx_format {
    bool all_private;
    size_t n;
    struct gref refs[];
};

/* ---- attribute references ----------------------------------------------- */

/* The depth of the reference `r` (the number of its components), or 0 if it
 * is invalid: empty, "/", an empty component, or a '~' not followed by '0'
 * or '1'. A plain name (no leading '/') is one component, taken literally. */
static size_t ref_depth(const char *r)
{
    if (!r || !*r)
        return 0;
    if (r[0] != '/')
        return 1;
    size_t depth = 0;
    const char *s = r + 1;
    for (;;) {
        size_t len = 0;
        for (; s[len] && s[len] != '/'; len++)
            if (s[len] == '~' && s[len + 1] != '0' && s[len + 1] != '1')
                return 0;
        if (len == 0)
            return 0;
        depth++;
        if (!s[len])
            return depth;
        s += len + 1;
    }
}

/* Compares the path component at *pp (of a valid path reference) with the
 * `len` bytes at `name`, unescaping it on the way, and moves *pp past it
 * (and past the '/' after it). */
static bool comp_eq(const char **pp, const char *name, size_t len)
{
    const char *s = *pp;
    size_t o = 0;
    bool eq = true;
    for (; *s && *s != '/'; s++) {
        char c = *s;
        if (c == '~') {
            c = s[1] == '0' ? '~' : '/';
            s++;
        }
        if (o >= len || name[o] != c)
            eq = false;
        o++;
    }
    *pp = *s ? s + 1 : s;
    return eq && o == len;
}

/* Where the formatting is in a context: the attribute (depth 1) or the
 * property of an object attribute; `up` is the node above (NULL at the top). */
struct pnode {
    const struct pnode *up;
    const char *name;
    size_t len;
    size_t depth;
};

/* True if the first n->depth components of the path reference at *pp are
 * the path of `n`; moves *pp past them. */
static bool prefix_eq(const char **pp, const struct pnode *n)
{
    if (n->up && !prefix_eq(pp, n->up))
        return false;
    return comp_eq(pp, n->name, n->len);
}

enum verdict { KEEP, NESTED, REDACT };

/* What the valid reference `r` of depth `depth` says of the value at `n`:
 * REDACT if it designates it, NESTED if it designates something inside it
 * (`object`: the value is an object), else KEEP. */
static enum verdict judge(const char *r, size_t depth, const struct pnode *n, bool object)
{
    if (depth < n->depth || (depth > n->depth && !object))
        return KEEP;
    if (r[0] != '/') /* a plain name: depth 1 */
        return strlen(r) == n->len && memcmp(r, n->name, n->len) == 0 ? REDACT : KEEP;
    const char *p = r + 1;
    if (!prefix_eq(&p, n))
        return KEEP;
    return depth == n->depth ? REDACT : NESTED;
}

/* ---- formatting ------------------------------------------------------------ */

struct job {
    const struct ld__ctx_format *f;
    json_t *priv;     /* the individual context's own references */
    json_t *redacted; /* made on the first redaction */
};

/* Appends a new string (NULL: memory ran out) to the list of redactions.
 * 0 or -1. */
static int redacted_add(struct job *j, json_t *s)
{
    if (!s)
        return -1;
    if (!j->redacted && !(j->redacted = json_array())) {
        json_decref(s);
        return -1;
    }
    return json_array_append_new(j->redacted, s);
}

/* The attribute name `name` as a literal reference (Go's
 * NewAttrRefForName): unchanged unless it starts with '/', then '/' and
 * the name with '~' written "~0" and '/' "~1". New reference or NULL. */
static json_t *literal_ref(const char *name, size_t len)
{
    if (len == 0 || name[0] != '/')
        return json_stringn_nocheck(name, len);
    size_t n = 1;
    for (size_t i = 0; i < len; i++)
        n += (name[i] == '~' || name[i] == '/') ? 2 : 1;
    char *buf = ld__malloc(n);
    if (!buf)
        return NULL;
    char *o = buf;
    *o++ = '/';
    for (size_t i = 0; i < len; i++) {
        if (name[i] == '~' || name[i] == '/') {
            *o++ = '~';
            *o++ = name[i] == '~' ? '0' : '1';
        } else {
            *o++ = name[i];
        }
    }
    json_t *r = json_stringn_nocheck(buf, n);
    ld__free(buf);
    return r;
}

/* The verdict of all the references on the value at `n`; on REDACT, *why
 * is the reference (the configuration's first, then the context's). */
static enum verdict verdict(const struct job *j, const struct pnode *n, bool object,
                            const char **why)
{
    enum verdict v = KEEP;
    for (size_t i = 0; i < j->f->n; i++) {
        const struct gref *g = &j->f->refs[i];
        if (!g->depth)
            continue;
        enum verdict one = judge(g->text, g->depth, n, object);
        if (one == REDACT) {
            *why = g->text;
            return REDACT;
        }
        if (one == NESTED)
            v = NESTED;
    }
    for (size_t i = 0; i < json_array_size(j->priv); i++) {
        const char *r = json_string_value(json_array_get(j->priv, i));
        size_t depth = ref_depth(r);
        if (!depth)
            continue;
        enum verdict one = judge(r, depth, n, object);
        if (one == REDACT) {
            *why = r;
            return REDACT;
        }
        if (one == NESTED)
            v = NESTED;
    }
    return v;
}

/* Writes into `out` (an object) the value `v` at `n`, or what of it is not
 * private, listing what is. 0, or -1 when memory ran out. */
static int put_filtered(struct job *j, json_t *out, const struct pnode *n, json_t *v)
{
    bool object = json_is_object(v);
    const char *why = NULL;
    enum verdict verd = verdict(j, n, object, &why);
    if (verd == REDACT)
        return redacted_add(j, json_string_nocheck(why));
    json_t *copy;
    if (verd == KEEP) {
        copy = json_deep_copy(v);
    } else { /* NESTED: an object, some of whose properties are private */
        copy = json_object();
        const char *k;
        json_t *sub;
        json_object_foreach(v, k, sub)
        {
            struct pnode child = {n, k, strlen(k), n->depth + 1};
            if (copy && put_filtered(j, copy, &child, sub) != 0) {
                json_decref(copy);
                copy = NULL;
            }
        }
    }
    return json_object_setn_new_nocheck(out, n->name, n->len, copy);
}

/* The attribute `name` of `part` (present), written or redacted. */
static int put_attr(struct job *j, json_t *out, const char *name, json_t *v, bool redact_all)
{
    size_t len = strlen(name);
    if (redact_all)
        return redacted_add(j, literal_ref(name, len));
    struct pnode top = {NULL, name, len, 1};
    return put_filtered(j, out, &top, v);
}

/* One individual context as an object, with its "kind" if `with_kind`. */
static json_t *part_json(const struct ld__ctx_format *f, const struct ld__context_part *p,
                         bool with_kind, bool redact_anonymous)
{
    struct job j = {f, p->priv, NULL};
    bool redact_all = f->all_private || (redact_anonymous && p->anonymous);
    json_t *o = json_object();
    if (!o ||
        (with_kind &&
         json_object_set_new_nocheck(
             o, "kind",
             json_stringn_nocheck(json_string_value(p->kind), json_string_length(p->kind))) != 0) ||
        json_object_set_new_nocheck(
            o, "key",
            json_stringn_nocheck(json_string_value(p->key), json_string_length(p->key))) != 0 ||
        (p->anonymous && json_object_set_new_nocheck(o, "anonymous", json_true()) != 0))
        goto fail;
    /* "name" first, then the custom attributes in their order */
    json_t *name = json_object_get(p->attrs, "name");
    if (name && put_attr(&j, o, "name", name, redact_all) != 0)
        goto fail;
    const char *k;
    json_t *v;
    json_object_foreach(p->attrs, k, v)
    {
        if (strcmp(k, "name") != 0 && put_attr(&j, o, k, v, redact_all) != 0)
            goto fail;
    }
    if (j.redacted) {
        json_t *meta = json_object();
        if (!meta)
            goto fail;
        int rc = json_object_set_new_nocheck(meta, "redactedAttributes", j.redacted);
        j.redacted = NULL; /* taken, even on failure */
        if (rc != 0 || json_object_set_new_nocheck(o, "_meta", meta) != 0) {
            if (rc != 0)
                json_decref(meta);
            goto fail;
        }
    }
    return o;
fail:
    json_decref(j.redacted);
    json_decref(o);
    return NULL;
}

json_t *ld__ctx_format(const struct ld__ctx_format *f, const ld_context *ctx, bool redact_anonymous)
{
    if (!f || !ctx)
        return NULL;
    size_t n = ld_context_kind_count(ctx);
    if (n == 1)
        return part_json(f, ld__context_part(ctx, 0), true, redact_anonymous);
    json_t *o = json_object();
    if (!o || json_object_set_new_nocheck(o, "kind", json_string_nocheck("multi")) != 0)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        const struct ld__context_part *p = ld__context_part(ctx, i);
        if (json_object_set_new_nocheck(o, json_string_value(p->kind),
                                        part_json(f, p, false, redact_anonymous)) != 0)
            goto fail;
    }
    return o;
fail:
    json_decref(o);
    return NULL;
}

/* ---- the configuration ---------------------------------------------------- */

struct ld__ctx_format *ld__ctx_format_new(bool all_private, const char *const *refs, size_t n)
{
    if (!refs)
        n = 0;
    if (n > (SIZE_MAX - sizeof(struct ld__ctx_format)) / sizeof(struct gref))
        return NULL;
    struct ld__ctx_format *f = ld__calloc(1, sizeof *f + n * sizeof(struct gref));
    if (!f)
        return NULL;
    f->all_private = all_private;
    for (size_t i = 0; i < n; i++) {
        if (!refs[i])
            continue;
        char *text = ld__strdup(refs[i]);
        if (!text) {
            ld__ctx_format_free(f);
            return NULL;
        }
        f->refs[f->n].text = text;
        f->refs[f->n].depth = ref_depth(text);
        f->n++;
    }
    return f;
}

void ld__ctx_format_free(struct ld__ctx_format *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        ld__free(f->refs[i].text);
    ld__free(f);
}
