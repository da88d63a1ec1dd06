/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-redis's internals. The library is built on libldasync's public
 * API only (as a third party's store would be):
 *   alloc.c     allocation through ld_get_alloc_funcs();
 *   options.c   ld_redis_options and URL parsing;
 *   conn.c      one Redis connection on the loop (hiredis async): commands
 *               answered in order, timeouts, reconnection with backoff,
 *               availability;
 *   store.c     the feature store (ld_redis_store_new()).
 */
#ifndef LDASYNC_REDIS_INTERNAL_H
#define LDASYNC_REDIS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ldasync/redis.h>

struct redisReply;
struct event_base;

/* ---- alloc.c ---------------------------------------------------------- */

void *ldr_malloc(size_t size);
void *ldr_calloc(size_t n, size_t size);
void *ldr_realloc(void *p, size_t size);
void ldr_free(void *p);
char *ldr_strdup(const char *s);
char *ldr_strndup(const char *s, size_t n);

/* ---- options.c -------------------------------------------------------- */

struct ld_redis_options {
    char *host; /* TCP: a name or an address (no brackets); NULL for a socket */
    int port;
    char *path;     /* a unix socket, or NULL */
    char *password; /* NULL: none */
    int database;
    char *prefix;
    int64_t connect_ms, command_ms;
    int64_t reconnect_ms, reconnect_max_ms;
};

/* A deep copy of `o` (NULL: the defaults) into `out`; 0 or LD_ENOMEM. */
int ldr_options_copy(struct ld_redis_options *out, const ld_redis_options *o);
/* Frees what ldr_options_copy() allocated. */
void ldr_options_clear(struct ld_redis_options *o);
/* "host:port" or "unix:PATH" for messages (static buffer of the caller). */
void ldr_options_where(const struct ld_redis_options *o, char *buf, size_t size);

/* ---- conn.c ----------------------------------------------------------- */

struct ldr_conn;

/* A command's answer: `r` the reply (borrowed, valid during the call; may be
 * an error reply, REDIS_REPLY_ERROR), or NULL with `err` (LD_ESTORE,
 * LD_ETIMEDOUT, LD_ECANCELED) and a message. */
typedef void (*ldr_reply_fn)(void *arg, struct redisReply *r, int err, const char *msg);

/* Told of each change of availability (from the loop: a connection made
 * or lost). */
typedef void (*ldr_avail_fn)(void *arg, bool available);

/* A connection that connects now and again after each failure. NULL when
 * memory ran out. */
struct ldr_conn *ldr_conn_new(struct event_base *base, const struct ld_redis_options *o,
                              ldr_avail_fn avail, void *arg);

/* Sends one command (argv borrowed; copied by hiredis); `fn` (NULL: the
 * reply is not wanted) is called exactly once, later (never inside this
 * call), unless the connection is freed first (then never). Commands that
 * could not be sent (not connected) find a reconnection under way. @return 0; LD_ESTORE (not
 * connected: `*why` says why, fn not called) or LD_ENOMEM. */
int ldr_conn_send(struct ldr_conn *c, int argc, const char **argv, const size_t *lens,
                  ldr_reply_fn fn, void *arg, const char **why);

/* Drops the connection (the commands in flight fail with `why`) and
 * connects again: for a transaction that could not be sent whole. */
void ldr_conn_reset(struct ldr_conn *c, const char *why);

/* `fn(arg)` is called (from the loop, never within a call of this API)
 * when a name resolution ends: a connection is then being made, or the
 * resolution failed. It may free the connection. */
void ldr_conn_on_settled(struct ldr_conn *c, void (*fn)(void *arg), void *arg);

/* True while the host name is being resolved (sends fail: commands wait
 * for ldr_conn_on_settled()'s call). */
bool ldr_conn_resolving(const struct ldr_conn *c);

/* True while connected or connecting (sends are accepted). */
bool ldr_conn_usable(const struct ldr_conn *c);

/* Why commands cannot be sent now (not usable): the last connection's
 * failure, or that the name is being resolved. */
const char *ldr_conn_why(const struct ldr_conn *c);

/* A number that changes with each read from Redis: the replies given to
 * reply functions while it stays the same came in one read (in one pass
 * of the loop). */
uint64_t ldr_conn_read_seq(const struct ldr_conn *c);

/* Commands unanswered when the current (or last) read began. */
size_t ldr_conn_read_pending(const struct ldr_conn *c);

/* Commands sent and not answered yet. */
size_t ldr_conn_in_flight(const struct ldr_conn *c);

/* Frees it: the reply functions of commands in flight are not called. */
void ldr_conn_free(struct ldr_conn *c);

#endif /* LDASYNC_REDIS_INTERNAL_H */
