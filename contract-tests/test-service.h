/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* contract-tests/test-service.h: what the service's files share. */
#ifndef LDASYNC_TEST_SERVICE_H
#define LDASYNC_TEST_SERVICE_H

#include <ldasync/ldasync.h>

struct event_base;

/* A big segment store that asks the test harness's callback service at
 * `uri` ("http://host:port/path"), on `base`'s loop (callback-store.c).
 * NULL if `uri` is not an http URI with a host, or memory ran out. */
ld_big_segment_store *ts_callback_store_new(struct event_base *base, const char *uri);

#endif /* LDASYNC_TEST_SERVICE_H */
