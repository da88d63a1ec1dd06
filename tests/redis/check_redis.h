/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* check_redis: the suites and their shared helpers (check_redis.c). */
#ifndef LDASYNC_CHECK_REDIS_H
#define LDASYNC_CHECK_REDIS_H

#include <check.h>
#include <stdbool.h>

#include <ldasync/ldasync.h>
#include <ldasync/redis.h>

#include "redisd.h"

/* The server main() started for every test. */
extern struct redisd rt_server;

void rt_flushall(void);
ld_redis_options *rt_options(const char *prefix);
ld_store *rt_store(struct event_base *base, const char *prefix);
ld_future *rt_wait(ld_future *f);
void rt_ok(ld_future *f);
bool rt_bool(ld_future *f);
json_t *rt_json(ld_future *f);
void rt_error(ld_future *f, int code, const char *in_message);
json_t *rt_j(const char *text);
void rt_run_for(struct event_base *base, int ms);
/* A Redis store on the server `d` (timeouts: 0 for the defaults), which
 * connects again 20 to 40 ms after a failure. */
ld_store *rt_store_on(struct event_base *base, const struct redisd *d, int64_t connect_ms,
                      int64_t command_ms);
/* Whether `s` answers initialized (with `want_initialized`) within 10 s. */
bool rt_answers_again(struct event_base *base, ld_store *s, bool want_initialized);

Suite *rt_suite_options(void);
Suite *rt_suite_store(void);
Suite *rt_suite_big_segments(void);
Suite *rt_suite_daemon(void);
Suite *rt_suite_chaos(void);
Suite *rt_suite_outages(void);
Suite *rt_suite_attack(void);
Suite *rt_suite_attack2(void);

#endif
