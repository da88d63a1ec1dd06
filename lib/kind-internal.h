/*
 * ldasync: what kind.c offers the rest of the library. Never installed.
 */
#ifndef LDASYNC_KIND_INTERNAL_H
#define LDASYNC_KIND_INTERNAL_H

#include <ldasync/kind.h>

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

/* ld_item_parse() with `hint` (may be NULL) called along the way. */
int ld__item_parse_hinted(const json_t *item, struct ld_item_info *info, const char **why,
                          ld__item_hint_fn hint, void *arg);

#endif /* LDASYNC_KIND_INTERNAL_H */
