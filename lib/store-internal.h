/*
 * ldasync: what other parts of the library need to know of a store.
 * Never installed.
 */
#ifndef LDASYNC_STORE_INTERNAL_H
#define LDASYNC_STORE_INTERNAL_H

#include <ldasync/store.h>

/* The base the store completes its futures on (never NULL for a store). */
struct event_base *ld__store_base(const ld_store *store);

#endif /* LDASYNC_STORE_INTERNAL_H */
