/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/log.c: log levels and lines (server.h), and the server's own
 * lines.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "serve-internal.h"

const char *lds_log_level_name(int level)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    return level >= 0 && level <= LDS_LOG_DEBUG ? names[level] : NULL;
}

int lds_log_level_parse(const char *name)
{
    for (int i = 0; name && i <= LDS_LOG_DEBUG; i++)
        if (strcmp(name, lds_log_level_name(i)) == 0)
            return i;
    if (name && strcmp(name, "warning") == 0)
        return LDS_LOG_WARN;
    return -1;
}

void lds_log_v(lds_log_fn fn, void *arg, int max_level, int level, const char *fmt, va_list ap)
{
    if (!fn || level > max_level)
        return;
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    fn(level, line, arg);
}

void lds_log(const lds_server *srv, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lds_log_v(srv->o.log, srv->o.log_arg, srv->o.log_level, level, fmt, ap);
    va_end(ap);
}
