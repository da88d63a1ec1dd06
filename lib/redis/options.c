/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ld_redis_options (redis.h): where Redis is and how to talk to it; the
 * URL forms of ld_redis_options_set_url().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/error.h>

#include "redis/redis-internal.h"

#define DEFAULT_PREFIX "launchdarkly"

static const struct ld_redis_options defaults = {
    .port = 6379,
    .connect_ms = 2000,
    .command_ms = 5000,
    .reconnect_ms = 100,
    .reconnect_max_ms = 30000,
};

ld_redis_options *ld_redis_options_new(void)
{
    ld_redis_options *o = ldr_malloc(sizeof(*o));
    if (!o)
        return NULL;
    *o = defaults;
    o->host = ldr_strdup("127.0.0.1");
    o->prefix = ldr_strdup(DEFAULT_PREFIX);
    if (!o->host || !o->prefix) {
        ld_redis_options_free(o);
        return NULL;
    }
    return o;
}

void ldr_options_clear(struct ld_redis_options *o)
{
    ldr_free(o->host);
    ldr_free(o->path);
    ldr_free(o->password);
    ldr_free(o->prefix);
    o->host = o->path = o->password = o->prefix = NULL;
}

void ld_redis_options_free(ld_redis_options *opts)
{
    if (!opts)
        return;
    ldr_options_clear(opts);
    ldr_free(opts);
}

static int dup_or_null(char **out, const char *s)
{
    *out = NULL;
    if (!s)
        return 0;
    *out = ldr_strdup(s);
    return *out ? 0 : LD_ENOMEM;
}

int ldr_options_copy(struct ld_redis_options *out, const ld_redis_options *o)
{
    ld_redis_options *mine = NULL;
    if (!o) {
        mine = ld_redis_options_new();
        if (!mine)
            return LD_ENOMEM;
        o = mine;
    }
    *out = *o;
    int rc = 0;
    if (dup_or_null(&out->host, o->host) || dup_or_null(&out->path, o->path) ||
        dup_or_null(&out->password, o->password) || dup_or_null(&out->prefix, o->prefix)) {
        rc = LD_ENOMEM;
        /* dup_or_null() set each field it reached; the rest still borrow */
        if (out->host == o->host)
            out->host = NULL;
        if (out->path == o->path)
            out->path = NULL;
        if (out->password == o->password)
            out->password = NULL;
        if (out->prefix == o->prefix)
            out->prefix = NULL;
        ldr_options_clear(out);
    }
    ld_redis_options_free(mine);
    return rc;
}

void ldr_options_where(const struct ld_redis_options *o, char *buf, size_t size)
{
    if (o->path)
        snprintf(buf, size, "unix:%s", o->path);
    else if (strchr(o->host, ':'))
        snprintf(buf, size, "[%s]:%d", o->host, o->port);
    else
        snprintf(buf, size, "%s:%d", o->host, o->port);
}

/* ---- the URL ---------------------------------------------------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* s[0..n) percent-decoded into a new string; NULL with *rc set (LD_EINVAL
 * for a bad escape or a NUL, LD_ENOMEM). */
static char *decode(const char *s, size_t n, int *rc)
{
    char *d = ldr_malloc(n + 1), *p = d;
    if (!d) {
        *rc = LD_ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0)
                goto bad;
            c = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            if (c == '\0')
                goto bad;
            i += 2;
        }
        *p++ = c;
    }
    *p = '\0';
    return d;
bad:
    ldr_free(d);
    *rc = LD_EINVAL;
    return NULL;
}

/* A decimal integer in [lo, hi] that is all of s[0..n). */
static bool parse_int(const char *s, size_t n, long lo, long hi, long *out)
{
    if (n == 0 || n > 10)
        return false;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int ld_redis_options_set_url(ld_redis_options *opts, const char *url)
{
    if (!opts || !url)
        return LD_EINVAL;
    struct ld_redis_options n = *opts; /* the new values; strings allocated below */
    char *host = NULL, *path = NULL, *password = NULL;
    bool set_password = false;
    int rc = LD_EINVAL;
    long v;
    if (starts(url, "unix:") || starts(url, "redis+unix:")) {
        const char *p = url + (starts(url, "unix:") ? 5 : 11);
        if (starts(p, "//"))
            p += 2;
        if (*p != '/')
            return LD_EINVAL; /* absolute paths only */
        const char *q = strchr(p, '?');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        n.database = opts->database;
        if (q) {
            if (!starts(q, "?db=") || !parse_int(q + 4, strlen(q + 4), 0, 1000000, &v))
                return LD_EINVAL;
            n.database = (int)v;
        }
        path = decode(p, len, &rc);
        if (!path)
            return rc;
        if (strlen(path) < 2) {
            ldr_free(path);
            return LD_EINVAL;
        }
        n.port = 0;
    } else if (starts(url, "redis://")) {
        const char *p = url + 8, *end = p + strcspn(p, "/?#");
        if (*end == '?' || *end == '#')
            return LD_EINVAL;
        const char *at = NULL;
        for (const char *s = p; s < end; s++)
            if (*s == '@')
                at = s;
        if (at) {
            const char *colon = memchr(p, ':', (size_t)(at - p));
            if (!colon || colon != p)
                return LD_EINVAL; /* a user name (ACL users) is not supported */
            password = decode(colon + 1, (size_t)(at - colon - 1), &rc);
            if (!password)
                return rc;
            set_password = true;
            p = at + 1;
        }
        const char *hend, *port = NULL;
        if (*p == '[') {
            hend = memchr(p, ']', (size_t)(end - p));
            if (!hend)
                goto bad;
            host = ldr_strndup(p + 1, (size_t)(hend - p - 1));
            if (hend + 1 < end) {
                if (hend[1] != ':')
                    goto bad;
                port = hend + 2;
            }
        } else {
            hend = memchr(p, ':', (size_t)(end - p));
            if (hend)
                port = hend + 1;
            else
                hend = end;
            host = ldr_strndup(p, (size_t)(hend - p));
        }
        if (!host) {
            rc = LD_ENOMEM;
            goto bad;
        }
        if (!*host || strpbrk(host, "%@[] "))
            goto bad;
        n.port = 6379;
        if (port) {
            if (!parse_int(port, (size_t)(end - port), 1, 65535, &v))
                goto bad;
            n.port = (int)v;
        }
        n.database = 0;
        if (*end == '/' && end[1]) {
            if (!parse_int(end + 1, strlen(end + 1), 0, 1000000, &v))
                goto bad;
            n.database = (int)v;
        }
    } else {
        return LD_EINVAL; /* rediss:// (TLS) and anything else */
    }
    ldr_free(opts->host);
    ldr_free(opts->path);
    opts->host = host;
    opts->path = path;
    opts->port = n.port;
    opts->database = n.database;
    if (set_password) {
        ldr_free(opts->password);
        opts->password = password;
        if (opts->password && !*opts->password) {
            ldr_free(opts->password);
            opts->password = NULL;
        }
    }
    return 0;
bad:
    ldr_free(host);
    ldr_free(path);
    ldr_free(password);
    return rc;
}

int ld_redis_options_set_password(ld_redis_options *opts, const char *password)
{
    if (!opts)
        return LD_EINVAL;
    char *p = NULL;
    if (password && *password && !(p = ldr_strdup(password)))
        return LD_ENOMEM;
    ldr_free(opts->password);
    opts->password = p;
    return 0;
}

int ld_redis_options_set_database(ld_redis_options *opts, int database)
{
    if (!opts || database < 0)
        return LD_EINVAL;
    opts->database = database;
    return 0;
}

int ld_redis_options_set_prefix(ld_redis_options *opts, const char *prefix)
{
    if (!opts || !prefix || !*prefix)
        return LD_EINVAL;
    char *p = ldr_strdup(prefix);
    if (!p)
        return LD_ENOMEM;
    ldr_free(opts->prefix);
    opts->prefix = p;
    return 0;
}

/* The longest time the options keep (a year): deadlines computed from the
 * monotonic clock, and a delay doubled, stay far from overflowing. */
#define MAX_MS ((int64_t)366 * 24 * 3600 * 1000)

static int64_t cap(int64_t ms)
{
    return ms > MAX_MS ? MAX_MS : ms;
}

int ld_redis_options_set_timeouts(ld_redis_options *opts, int64_t connect_ms, int64_t command_ms)
{
    if (!opts || connect_ms <= 0 || command_ms <= 0)
        return LD_EINVAL;
    opts->connect_ms = cap(connect_ms);
    opts->command_ms = cap(command_ms);
    return 0;
}

int ld_redis_options_set_reconnect(ld_redis_options *opts, int64_t initial_ms, int64_t max_ms)
{
    if (!opts || initial_ms <= 0 || max_ms < initial_ms)
        return LD_EINVAL;
    opts->reconnect_ms = cap(initial_ms);
    opts->reconnect_max_ms = cap(max_ms);
    return 0;
}
