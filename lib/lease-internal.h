/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: what a module that lends values to futures needs from them (the
 * memory store). Never installed. The rest of what other modules use of
 * futures is in future-internal.h, which includes this header.
 */
#ifndef LDASYNC_LEASE_INTERNAL_H
#define LDASYNC_LEASE_INTERNAL_H

#include <stdbool.h>

#include <ldasync/future.h>
#include <ldasync/store.h>

/*
 * A lease (struct ld_lease, store.h): what keeps a borrowed value alive
 * while a future holds it. The future does not own the value (it takes no
 * reference of its own); its lender hands it a lease instead, and the
 * future calls release(lease) once, when it is freed (from whichever thread
 * drops its last reference). The lender decides what a lease stands for
 * (the memory store: one count of a generation of its items). A future that
 * adopts the value (forward, then, catch, ...) takes a jansson reference of
 * its own. Any store may lend this way through get_now (store.h).
 */

/* True once libevent threading is on: futures made from then on may be
 * released on any thread, so a lease may be released on any thread. */
bool ld__future_threads(void);

/* A future completed later (see future-internal.h), fulfilled with `v`
 * (stolen; with `lease`, v is borrowed and `lease`, stolen, keeps it alive
 * instead); without memory, NULL, and `lease` (or, without a lease, `v`)
 * released. */
ld_future *ld__future_later_json(struct event_base *base, json_t *v, struct ld_lease *lease);

#endif /* LDASYNC_LEASE_INTERNAL_H */
