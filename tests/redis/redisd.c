/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* redisd.h: a real redis-server for the tests. */
#define _GNU_SOURCE
#include "redisd.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *redisd_program(void)
{
    const char *env = getenv("REDIS_SERVER");
    if (env && *env)
        return access(env, X_OK) == 0 ? env : NULL;
#ifdef LD_REDIS_SERVER
    if (access(LD_REDIS_SERVER, X_OK) == 0)
        return LD_REDIS_SERVER;
#endif
    static char found[512];
    const char *path = getenv("PATH");
    if (!path)
        return NULL;
    char *copy = strdup(path), *save = NULL;
    const char *res = NULL;
    for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
        snprintf(found, sizeof(found), "%s/redis-server", p);
        if (access(found, X_OK) == 0) {
            res = found;
            break;
        }
    }
    free(copy);
    return res;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int spawn(struct redisd *d)
{
    const char *prog = redisd_program();
    if (!prog) {
        fprintf(stderr, "redisd: no redis-server\n");
        return -1;
    }
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "exec %s --port 0 --unixsocket %s --unixsocketperm 700 --save '' --appendonly no "
             "--dir %s --logfile %s/redis.log --daemonize no %s",
             prog, d->sock, d->dir, d->dir, d->conf_extra);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
        }
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    d->pid = pid;
    /* up to 10 s for it to answer */
    for (int i = 0; i < 1000; i++) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            d->pid = 0;
            fprintf(stderr, "redisd: redis-server exited (see %s/redis.log)\n", d->dir);
            return -1;
        }
        redisContext *c = redisConnectUnix(d->sock);
        if (c && !c->err) {
            redisReply *r = redisCommand(c, "PING");
            bool ok = r && (r->type == REDIS_REPLY_STATUS ||
                            (r->type == REDIS_REPLY_ERROR && strstr(r->str, "NOAUTH")));
            if (r)
                freeReplyObject(r);
            redisFree(c);
            if (ok)
                return 0;
        } else if (c) {
            redisFree(c);
        }
        sleep_ms(10);
    }
    fprintf(stderr, "redisd: redis-server did not answer within 10 s\n");
    redisd_kill(d);
    return -1;
}

int redisd_start(struct redisd *d, const char *extra)
{
    memset(d, 0, sizeof(*d));
    const char *tmp = getenv("TMPDIR");
    snprintf(d->dir, sizeof(d->dir), "%s/ldasync-redis-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(d->dir)) {
        perror("redisd: mkdtemp");
        return -1;
    }
    snprintf(d->sock, sizeof(d->sock), "%s/redis.sock", d->dir);
    snprintf(d->url, sizeof(d->url), "unix:%s", d->sock);
    snprintf(d->conf_extra, sizeof(d->conf_extra), "%s", extra ? extra : "");
    return spawn(d);
}

int redisd_restart(struct redisd *d)
{
    if (d->pid)
        redisd_stop(d);
    unlink(d->sock);
    return spawn(d);
}

static void end(struct redisd *d, int sig)
{
    if (!d->pid)
        return;
    kill(d->pid, SIGCONT);
    kill(d->pid, sig);
    int status;
    while (waitpid(d->pid, &status, 0) < 0 && errno == EINTR) {
    }
    d->pid = 0;
}

void redisd_stop(struct redisd *d)
{
    end(d, SIGTERM);
}

void redisd_kill(struct redisd *d)
{
    end(d, SIGKILL);
}

void redisd_pause(struct redisd *d)
{
    if (d->pid)
        kill(d->pid, SIGSTOP);
}

void redisd_resume(struct redisd *d)
{
    if (d->pid)
        kill(d->pid, SIGCONT);
}

void redisd_destroy(struct redisd *d)
{
    redisd_kill(d);
    if (!d->dir[0])
        return;
    char path[400];
    snprintf(path, sizeof(path), "%s/redis.log", d->dir);
    unlink(path);
    unlink(d->sock);
    rmdir(d->dir);
    d->dir[0] = '\0';
}

redisContext *redisd_connect(const struct redisd *d)
{
    redisContext *c = redisConnectUnix(d->sock);
    if (!c || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    const char *pass = strstr(d->conf_extra, "--requirepass ");
    if (pass) {
        char pw[128];
        sscanf(pass + 14, "%127s", pw);
        redisReply *r = redisCommand(c, "AUTH %s", pw);
        if (r)
            freeReplyObject(r);
    }
    return c;
}

redisReply *redisd_cmd(const struct redisd *d, const char *fmt, ...)
{
    redisContext *c = redisd_connect(d);
    if (!c)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}
