/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/kind.h: kinds of versioned items (feature flags, segments), item
 * validation, tombstones, and the dependency order persistent stores write
 * a data set in.
 *
 * An item is a jansson object with a non-empty string "key", an integer
 * "version" >= 0 and, optionally, a boolean "deleted". Keys must be valid
 * UTF-8 (they come from JSON; strict: no overlong forms, no surrogates,
 * nothing above U+10FFFF) without NUL: a key made with json_string_nocheck()
 * or json_stringn_nocheck() that is not is refused like any other bad key.
 * Namespaces (the keys of a data set) are compared with their length: one
 * with a NUL in it, "features\0x", is not "features" but a namespace of no
 * known kind. A tombstone is
 * {"key": K, "version": V, "deleted": true}: it records that K was deleted at
 * version V, so that an older update cannot bring it back.
 *
 * All functions here are pure: any thread, no shared state.
 */
#ifndef LDASYNC_KIND_H
#define LDASYNC_KIND_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include <ldasync/common.h>

LD_BEGIN_DECLS

/** A kind of item. The two kinds are static objects: compare them by
 *  pointer, never free them. @since 0.1.0 */
typedef struct ld_kind ld_kind;

/** Feature flags: namespace "features", priority 1; a flag depends on the
 *  flags named in its "prerequisites" ([{"key": ...}, ...]). @since 0.1.0 */
LD_EXPORT const ld_kind *ld_kind_features(void);

/** Segments: namespace "segments", priority 0 (written before flags).
 *  @since 0.1.0 */
LD_EXPORT const ld_kind *ld_kind_segments(void);

/** The kind's namespace ("features", "segments"), or NULL for NULL.
 *  @since 0.1.0 */
LD_EXPORT const char *ld_kind_namespace(const ld_kind *kind);

/** The kind's priority (lower is written first), or -1 for NULL.
 *  @since 0.1.0 */
LD_EXPORT int ld_kind_priority(const ld_kind *kind);

/** The kind whose namespace is `ns`, or NULL if there is none (or `ns` is
 *  NULL). @since 0.1.0 */
LD_EXPORT const ld_kind *ld_kind_by_namespace(const char *ns);

/** Checks that `item` is a valid item and, if `key` is not NULL, that its
 *  "key" is `key` (the key it is filed under). Its "key" is a non-empty
 *  UTF-8 string without NUL, and neither "$valid" nor "$flagsState": those
 *  are the all-flags state's own top-level keys, which a flag's key would
 *  collide with (LaunchDarkly allows only letters, digits, '.', '_' and
 *  '-' in keys, so no such item comes from it), refused for every kind.
 *  @return 0, or LD_EINVAL with `*why` (if `why` is not NULL) set to a static
 *  message naming the field at fault, e.g. "item \"version\" must be an
 *  integer >= 0", "item \"key\" must be valid UTF-8". @since 0.1.0 */
LD_EXPORT int ld_item_validate(const json_t *item, const char *key, const char **why);

/** What a store needs to know of an item. @since 0.1.0 */
struct ld_item_info {
    const char *key; /* borrowed from the item */
    int64_t version;
    bool deleted;
};

/** Validates `item` as ld_item_validate(item, NULL, why) does and, if it is
 *  valid and `info` is not NULL, fills *info (its key is borrowed from the
 *  item). @return 0 or LD_EINVAL. @since 0.1.0 */
LD_EXPORT int ld_item_parse(const json_t *item, struct ld_item_info *info, const char **why);

/** The item's "key" (borrowed), or NULL if it has none. @since 0.1.0 */
LD_EXPORT const char *ld_item_key(const json_t *item);

/** The item's "version", or -1 if it has no valid one. @since 0.1.0 */
LD_EXPORT int64_t ld_item_version(const json_t *item);

/** True if the item is a tombstone ("deleted": true). @since 0.1.0 */
LD_EXPORT bool ld_item_is_deleted(const json_t *item);

/** A new tombstone {"key": key, "version": version, "deleted": true}.
 *  @return a new reference; NULL if `key` is NULL, empty, not valid UTF-8
 *  or one ld_item_validate() refuses ("$valid", "$flagsState"), `version`
 *  is negative, or memory ran out. @since 0.1.0 */
LD_EXPORT json_t *ld_tombstone_new(const char *key, int64_t version);

/** Checks a full data set, {"features": {key: item, ...}, "segments": {...}}:
 *  an object whose values are objects of valid items filed under their own
 *  keys (equal, length included: a valid UTF-8 key without NUL).
 *  Namespaces other than those of the known kinds (compared with their
 *  length) are accepted and their items validated the same way.
 *  @return 0, or LD_EINVAL with `*why` set as for ld_item_validate().
 *  @since 0.1.0 */
LD_EXPORT int ld_data_validate(const json_t *all_data, const char **why);

/** The order in which a persistent store should write a full data set:
 *  kinds by ascending priority (segments, then features, then namespaces of
 *  no known kind in their input order, "features\0x" among them), and
 *  within features every flag after the flags it names as prerequisites
 *  (depth first; a prerequisite missing from the data is skipped; a cycle is
 *  broken where it is found, so every item appears exactly once). Other
 *  kinds keep their input order. A namespace is written with its length
 *  (json_string_length() of "namespace").
 *  Does not recurse: any depth of prerequisites uses constant stack.
 *  @param all_data a data set that passes ld_data_validate() (borrowed).
 *  @return a new reference to an array of {"namespace": ns, "items": [item,
 *  ...]} objects, the items shared by reference with `all_data`; NULL if
 *  `all_data` is not valid or memory ran out. @since 0.1.0 */
LD_EXPORT json_t *ld_data_sort(const json_t *all_data);

LD_END_DECLS

#endif /* LDASYNC_KIND_H */
