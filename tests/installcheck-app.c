/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * installcheck-app.c: an outside program, built by `make installcheck` (and so by
 * `make distcheck`) against the installed ldasync with nothing but
 *     cc installcheck-app.c `pkg-config --cflags --libs ldasync`
 * It proves the installed headers, library and ldasync.pc work together.
 */
#include <stdio.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>
#include <ldasync/ldasync.h>

int main(void)
{
    if (strcmp(ld_version_string(), LD_VERSION_STRING) != 0 || ld_version_hex() != LD_VERSION_HEX) {
        fprintf(stderr, "header version %s, library version %s\n", LD_VERSION_STRING,
                ld_version_string());
        return 1;
    }
    if (strcmp(ld_err_name(LD_EINVAL), "LD_EINVAL") != 0)
        return 1;

    struct event_base *base = event_base_new();
    ld_future *future = base ? ld_future_new(base) : NULL;
    if (future == NULL)
        return 1;
    int rc = ld_future_fulfill_json(future, json_string("hello"));
    if (rc == 0)
        rc = ld_future_wait(future);
    json_t *value = ld_future_json(future);
    int ok = rc == 0 && json_is_string(value) && strcmp(json_string_value(value), "hello") == 0;
    ld_future_unref(future);
    event_base_free(base);

    printf("ldasync %s (%s): %s\n", ld_version_string(), ld_strerror(0), ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
