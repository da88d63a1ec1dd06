/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/context.h: evaluation contexts, as LaunchDarkly defines them.
 *
 * A context is what a flag is evaluated for: one or more individual
 * contexts, each of a kind ("user", "org", ...) with a key and attributes.
 * A context is immutable once made and reference counted; its count is
 * atomic, so a context may be shared by any number of threads, each holding
 * its own reference (ld_context_ref / ld_context_unref), and read by all of
 * them at once. Every pointer a context hands out (kinds, keys, attribute
 * values) is borrowed from it: valid while the caller holds a reference,
 * never to be modified.
 *
 * Individual contexts of a multi-kind context are kept sorted by kind
 * (byte order): index i of ld_context_kind() follows that order.
 *
 * Kinds: a non-empty string of ASCII letters, digits, '.', '_' and '-',
 * neither "kind" nor "multi". Keys: non-empty strings without NUL, except
 * that an old-style user (JSON without "kind") may have the empty key, as
 * in LaunchDarkly's SDKs.
 */
#ifndef LDASYNC_CONTEXT_H
#define LDASYNC_CONTEXT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include <ldasync/common.h>

LD_BEGIN_DECLS

/** An evaluation context: immutable, reference counted. @since 0.1.0 */
typedef struct ld_context ld_context;

/** Parses a context from LaunchDarkly's JSON forms:
 *  - single-kind: {"kind": K, "key": "...", "name": "...", "anonymous": b,
 *    "<attribute>": any, ..., "_meta": {"privateAttributes": [ref, ...]}};
 *  - multi-kind: {"kind": "multi", "<kind>": {single-kind object without
 *    "kind"}, ...} (the property name is the kind: a "kind" inside a part
 *    must be that same string, else the context is invalid, as is a nested
 *    multi-kind context). A multi-kind context of exactly one kind is that
 *    single-kind context (ld_context_is_multi() is false);
 *  - old-style user (no "kind", or "kind": null): {"key": "...", "name",
 *    "firstName", "lastName", "email", "country", "ip", "avatar" (strings or
 *    null), "anonymous", "custom": {...}, "privateAttributeNames": [name,
 *    ...]}; it
 *    becomes a context of kind "user" whose attributes are the built-in
 *    strings and the properties of "custom" ("kind", "key", "anonymous" and
 *    "_meta" in "custom" are ignored); "secondary" (string or null) is
 *    accepted and dropped, as LaunchDarkly's current SDKs drop it; other
 *    top-level properties are ignored. Its private attribute names are
 *    literal names, not references.
 *  Attributes whose value is null are absent. "name" must be a string or
 *  null, "anonymous" a boolean or null (null is false). Private attribute
 *  references and names must not contain NUL (they are handed out as C
 *  strings).
 *  The context keeps no reference to `j` (values are copied).
 *  @param j any JSON value, or NULL (borrowed).
 *  @param why if not NULL, receives on failure a static message naming the
 *  field at fault (e.g. "context \"kind\" must be a string"), or
 *  "out of memory".
 *  @return a new context (one reference) or NULL if `j` is not a valid
 *  context or memory ran out. Any thread. @since 0.1.0 */
LD_EXPORT ld_context *ld_context_from_json(const json_t *j, const char **why);

/** Takes one more reference to `ctx` (atomic: any thread).
 *  @return `ctx`; NULL for NULL. @since 0.1.0 */
LD_EXPORT ld_context *ld_context_ref(ld_context *ctx);

/** Drops one reference to `ctx`, freeing it with the last one. NULL-safe;
 *  any thread. @since 0.1.0 */
LD_EXPORT void ld_context_unref(ld_context *ctx);

/** True if `ctx` has more than one kind (false for NULL). @since 0.1.0 */
LD_EXPORT bool ld_context_is_multi(const ld_context *ctx);

/** The number of kinds of `ctx` (1 for a single-kind context, 0 for NULL).
 *  @since 0.1.0 */
LD_EXPORT size_t ld_context_kind_count(const ld_context *ctx);

/** The kind of the `i`th individual context (kinds in byte order), borrowed;
 *  NULL if `ctx` is NULL or `i` is out of range. @since 0.1.0 */
LD_EXPORT const char *ld_context_kind(const ld_context *ctx, size_t i);

/** The key of the individual context of kind `kind` (NULL means "user"),
 *  borrowed; NULL if `ctx` is NULL or has no such kind. @since 0.1.0 */
LD_EXPORT const char *ld_context_key(const ld_context *ctx, const char *kind);

/** The fully-qualified (canonical) key, borrowed: for a single context of
 *  kind "user" its key unchanged; for another single kind "kind:key"; for a
 *  multi-kind context the "kind:key" of each kind in kind order joined with
 *  ':'. In keys (not kinds) '%' is written "%25" and ':' "%3A". NULL for
 *  NULL. @since 0.1.0 */
LD_EXPORT const char *ld_context_fully_qualified_key(const ld_context *ctx);

/** LaunchDarkly's secure mode hash of `ctx`: the HMAC-SHA256 of its
 *  fully-qualified key (ld_context_fully_qualified_key(): the key alone for
 *  a single context of kind "user") keyed with `sdk_key`, as the server-side
 *  SDKs' secureModeHash computes it for the client-side SDKs.
 *  @param sdk_key the SDK key, a NUL-terminated string (borrowed; the empty
 *  string is an empty HMAC key).
 *  @param ctx the context (borrowed).
 *  @param out receives the hash as 64 lowercase hex digits and a NUL;
 *  unchanged on error.
 *  @return 0; LD_EINVAL if `sdk_key`, `ctx` or `out` is NULL (a context
 *  that exists is always valid: the functions that make one refuse an
 *  invalid one). Allocates nothing and cannot otherwise fail. Any thread.
 *  @since 0.1.0 */
LD_EXPORT int ld_secure_mode_hash(const char *sdk_key, const ld_context *ctx, char out[65]);

/** True if the individual context of kind `kind` (NULL means "user") is
 *  anonymous; false if it is not or there is no such kind. @since 0.1.0 */
LD_EXPORT bool ld_context_anonymous(const ld_context *ctx, const char *kind);

/** An attribute of the individual context of kind `kind` (NULL means
 *  "user"), by attribute reference, as LaunchDarkly's clauses with a
 *  contextKind address them:
 *  - "name" (no leading '/'): the top-level attribute named "name",
 *    literally ("a/b" is the attribute "a/b");
 *  - "/a/b/c": attribute "a", then property "b" of that object, then "c";
 *    in each component "~1" is '/' and "~0" is '~'. Components index JSON
 *    objects only, never arrays.
 *  "kind" and "key" are the kind's and key's strings, "anonymous" is always
 *  a boolean (false when not anonymous), "name" and the other attributes are
 *  as set; "_meta" is not an attribute.
 *  Invalid references ("", "/", an empty component as in "//x" or "/a/",
 *  '~' followed by anything but '0' or '1') find nothing.
 *  @return the value, borrowed from `ctx` (do not modify it); NULL if it is
 *  absent, `ref` is invalid or any argument is NULL (but `kind`), or if
 *  memory ran out (only a component of 128 bytes or more is copied to the
 *  heap to be unescaped). Any thread. @since 0.1.0 */
LD_EXPORT json_t *ld_context_get(const ld_context *ctx, const char *kind, const char *ref);

/** As ld_context_get(), with `name` a literal top-level attribute name: no
 *  '/' path, no '~' escapes ("/a" is the attribute named "/a"). This is how
 *  LaunchDarkly reads clause attributes and bucketBy when the clause or
 *  rollout has no contextKind. @since 0.1.0 */
LD_EXPORT json_t *ld_context_get_literal(const ld_context *ctx, const char *kind, const char *name);

/** The number of private attribute references of the kind `kind` (NULL
 *  means "user"); 0 if there is no such kind. @since 0.1.0 */
LD_EXPORT size_t ld_context_private_count(const ld_context *ctx, const char *kind);

/** The `i`th private attribute reference of kind `kind`, borrowed, as an
 *  attribute reference string (an old-style user's literal name starting
 *  with '/' is given as a reference, "/a" as "/~1a"); NULL if out of range.
 *  @since 0.1.0 */
LD_EXPORT const char *ld_context_private(const ld_context *ctx, const char *kind, size_t i);

/** The context as new-style JSON: {"kind": K, "key": ..., attributes...,
 *  "anonymous": true (only when anonymous), "_meta": {"privateAttributes":
 *  [...]} (only when there are some)}, or {"kind": "multi", "<kind>": {...
 *  without "kind"}, ...}. An old-style user comes out as kind "user",
 *  except one with the empty key, which only the old-style form allows: it
 *  comes out in that form, {"key": "", "custom": {attributes...},
 *  "anonymous": true (only when anonymous), "privateAttributeNames": [...]
 *  (only when there are some)}.
 *  ld_context_from_json() of the result is an equal context.
 *  @return a new value (one reference) that shares nothing with `ctx`: the
 *  caller may change it. NULL for NULL or when memory ran out.
 *  @since 0.1.0 */
LD_EXPORT json_t *ld_context_to_json(const ld_context *ctx);

/** A builder of single-kind contexts for C callers. Not thread-safe: one
 *  thread at a time. @since 0.1.0 */
typedef struct ld_context_builder ld_context_builder;

/** A new builder of a context of kind `kind` (NULL means "user") and key
 *  `key` (copied; checked by ld_context_builder_build()).
 *  @return the builder, or NULL when memory ran out. @since 0.1.0 */
LD_EXPORT ld_context_builder *ld_context_builder_new(const char *kind, const char *key);

/** Sets attribute `name` (a literal top-level name) to `value`, which is
 *  stolen in every case (on failure too): do not modify it afterwards.
 *  A JSON null `value` removes the attribute. "name" must be a string (or
 *  null), "anonymous" a boolean (it sets the anonymous flag); "kind",
 *  "key" and "_meta" cannot be set this way; `name` must be valid UTF-8.
 *  A NULL `value` is taken for a value that could not be made (as when
 *  json_string() runs out of memory), so that
 *  ld_context_builder_set(b, "x", json_string(s)) never silently loses "x".
 *  @return 0; LD_EINVAL if `b` or `name` is NULL, `name` is empty or one of
 *  the above rules is broken (nothing changes); LD_ENOMEM if memory ran out
 *  or `value` is NULL: then ld_context_builder_build() fails too, with
 *  "out of memory". @since 0.1.0 */
LD_EXPORT int ld_context_builder_set(ld_context_builder *b, const char *name, json_t *value);

/** Marks the attribute reference `ref` (copied) private.
 *  @return 0; LD_EINVAL if `b` or `ref` is NULL; LD_ENOMEM (then
 *  ld_context_builder_build() fails too). @since 0.1.0 */
LD_EXPORT int ld_context_builder_private(ld_context_builder *b, const char *ref);

/** Sets whether the context is anonymous (default false). NULL-safe.
 *  @since 0.1.0 */
LD_EXPORT void ld_context_builder_anonymous(ld_context_builder *b, bool anonymous);

/** Builds the context. The builder is left as it was and may be changed
 *  and built again; the contexts built share the attribute values.
 *  @param why as for ld_context_from_json() (invalid kind or key, or an
 *  earlier ld_context_builder_set/private that ran out of memory).
 *  @return a new context (one reference), or NULL. @since 0.1.0 */
LD_EXPORT ld_context *ld_context_builder_build(const ld_context_builder *b, const char **why);

/** Frees the builder (NULL-safe); contexts built from it live on.
 *  @since 0.1.0 */
LD_EXPORT void ld_context_builder_free(ld_context_builder *b);

/** A multi-kind context of the individual contexts of `parts` (borrowed; a
 *  multi-kind part contributes each of its kinds, as LaunchDarkly's
 *  MultiBuilder does), with its own copy of their values. Exactly one kind
 *  in all gives that single-kind context (a new reference to it).
 *  @return a new context (one reference), or NULL with *why (if `why` is not
 *  NULL) for `n` == 0 or no kind at all, a NULL part or `parts`, the same
 *  kind twice, an empty key (an old-style user's) among two kinds or more,
 *  or no memory. @since 0.1.0 */
LD_EXPORT ld_context *ld_context_multi(const ld_context *const *parts, size_t n, const char **why);

LD_END_DECLS

#endif /* LDASYNC_CONTEXT_H */
