/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * redisd: a real redis-server for the tests, started on a unix socket in a
 * temporary directory of its own (no TCP port, no saved data), and a plain
 * blocking hiredis connection to it for raw commands (what another SDK or
 * the Relay Proxy would write, and what the store wrote).
 */
#ifndef LDASYNC_TESTS_REDISD_H
#define LDASYNC_TESTS_REDISD_H

#include <stdbool.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

struct redisd {
    pid_t pid;      /* 0 when not running */
    char dir[256];  /* its directory (removed by redisd_destroy) */
    char sock[300]; /* the socket */
    char url[320];  /* "unix:" sock */
    char conf_extra[256];
};

/* The redis-server to run: $REDIS_SERVER, or the one configure found, or
 * "redis-server" from PATH; NULL when there is none (tests skip). */
const char *redisd_program(void);

/* Makes the directory and starts the server (`extra`: more command-line
 * options such as "--requirepass secret", or NULL); waits until it answers
 * PING. 0, or -1 with a message on stderr. */
int redisd_start(struct redisd *d, const char *extra);

/* Starts it again after redisd_stop()/redisd_kill(), on the same socket,
 * empty. */
int redisd_restart(struct redisd *d);

/* SIGTERM and wait; SIGKILL and wait. */
void redisd_stop(struct redisd *d);
void redisd_kill(struct redisd *d);

/* SIGSTOP, SIGCONT. */
void redisd_pause(struct redisd *d);
void redisd_resume(struct redisd *d);

/* Stops it and removes its directory. */
void redisd_destroy(struct redisd *d);

/* A blocking connection for raw commands (NULL on failure; redisFree()). */
redisContext *redisd_connect(const struct redisd *d);

/* Runs a command on a new blocking connection (AUTH first when the server
 * has a password in `pass`), returns the reply (freeReplyObject()) or NULL. */
redisReply *redisd_cmd(const struct redisd *d, const char *fmt, ...);

#endif
