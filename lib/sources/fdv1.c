/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * lib/sources/fdv1.c: the JSON of LaunchDarkly's first data-source protocol
 * (a poll's body, the stream's put, patch and delete) as change sets, and
 * how its HTTP statuses are read. Pure functions: any thread.
 */

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <ldasync/error.h>
#include <ldasync/json.h>

#include "core/core-internal.h"
#include "net/net-internal.h"
#include "sources/sources-internal.h"

static int fail(struct ld__fdv1_result *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct ld__fdv1_result *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
    va_end(ap);
    ld_fdv2_change_set_free(r->cs);
    r->cs = NULL;
    return r->code = code;
}

/* The item's version: its "version" (0 when it has none). @return false
 * when it is there and not a non-negative integer. */
static bool version_of(const json_t *item, int64_t *v)
{
    const json_t *j = json_object_get(item, "version");
    if (!j) {
        *v = 0;
        return true;
    }
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return false;
    *v = json_integer_value(j);
    return true;
}

static int builder_failed(struct ld__fdv1_result *r, ld_fdv2_change_set_builder *b, int code,
                          const char *what, const char *key)
{
    if (code == LD_ENOMEM)
        return fail(r, LD_ENOMEM, "out of memory");
    const char *why = ld_fdv2_change_set_builder_error(b);
    return fail(r, LD_EPARSE, "%s \"%.80s\": %s", what, key, why ? why : "refused");
}

/* The items of `all` ({"flags": {...}, "segments": {...}}, either may be
 * missing) as puts into `b`. */
static int add_all(struct ld__fdv1_result *r, ld_fdv2_change_set_builder *b, json_t *all)
{
    static const char *const names[2] = {"flags", "segments"};
    if (!json_is_object(all))
        return fail(r, LD_EPARSE, "the data is not a JSON object");
    for (int k = 0; k < 2; k++) {
        json_t *items = json_object_get(all, names[k]);
        if (!items || json_is_null(items))
            continue;
        if (!json_is_object(items))
            return fail(r, LD_EPARSE, "\"%s\" is not a JSON object", names[k]);
        const ld_kind *kind = k == 0 ? ld_kind_features() : ld_kind_segments();
        const char *key;
        json_t *item;
        json_object_foreach(items, key, item)
        {
            int64_t v;
            if (!json_is_object(item))
                return fail(r, LD_EPARSE, "%s \"%.80s\" is not a JSON object", names[k], key);
            if (!version_of(item, &v))
                return fail(r, LD_EPARSE, "%s \"%.80s\" has a version that is not an integer >= 0",
                            names[k], key);
            int code = ld_fdv2_change_set_builder_add_put(b, kind, key, v, item);
            if (code)
                return builder_failed(r, b, code, names[k], key);
        }
    }
    return 0;
}

/* The kind and key of a path "/flags/KEY" or "/segments/KEY"; NULL kind
 * for any other path. */
static const ld_kind *path_kind(const char *path, const char **key)
{
    if (strncmp(path, "/flags/", 7) == 0) {
        *key = path + 7;
        return ld_kind_features();
    }
    if (strncmp(path, "/segments/", 10) == 0) {
        *key = path + 10;
        return ld_kind_segments();
    }
    return NULL;
}

int ld__fdv1_parse(enum ld__fdv1_what what, const char *data, size_t len, struct ld__fdv1_result *r)
{
    memset(r, 0, sizeof(*r));
    json_error_t jerr;
    json_t *doc = ld_json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) {
        if (strstr(jerr.text, "memory"))
            return fail(r, LD_ENOMEM, "out of memory");
        return fail(r, LD_EPARSE, "malformed JSON at line %d, column %d: %s", jerr.line,
                    jerr.column, jerr.text);
    }
    ld_fdv2_change_set_builder *b = ld_fdv2_change_set_builder_new();
    if (!b) {
        json_decref(doc);
        return fail(r, LD_ENOMEM, "out of memory");
    }
    int code = 0;
    if (!json_is_object(doc)) {
        code = fail(r, LD_EPARSE, "the JSON is not an object");
    } else if (what == LD__FDV1_ALL || what == LD__FDV1_PUT) {
        ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_FULL);
        json_t *all = doc;
        if (what == LD__FDV1_PUT) {
            all = json_object_get(doc, "data");
            if (!all)
                code = fail(r, LD_EPARSE, "the put has no \"data\"");
        }
        if (!code)
            code = add_all(r, b, all);
    } else {
        ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_CHANGES);
        const char *path = json_string_value(json_object_get(doc, "path"));
        const char *key = NULL;
        const ld_kind *kind = path ? path_kind(path, &key) : NULL;
        int64_t v = 0;
        if (!path) {
            code = fail(r, LD_EPARSE, "the %s has no \"path\" string",
                        what == LD__FDV1_PATCH ? "patch" : "delete");
        } else if (!kind) {
            /* another path: ignored, as LaunchDarkly's SDKs do */
        } else if (what == LD__FDV1_PATCH) {
            json_t *item = json_object_get(doc, "data");
            if (!json_is_object(item))
                code = fail(r, LD_EPARSE, "the patch of \"%.80s\" has no \"data\" object", path);
            else if (!version_of(item, &v))
                code =
                    fail(r, LD_EPARSE,
                         "the patch of \"%.80s\" has a version that is not an integer >= 0", path);
            else if ((code = ld_fdv2_change_set_builder_add_put(b, kind, key, v, item)) != 0)
                code = builder_failed(r, b, code, "the patch of", path);
        } else {
            json_t *jv = json_object_get(doc, "version");
            if (!json_is_integer(jv) || json_integer_value(jv) < 0)
                code = fail(r, LD_EPARSE, "the delete of \"%.80s\" has no \"version\" integer >= 0",
                            path);
            else if ((code = ld_fdv2_change_set_builder_add_delete(b, kind, key,
                                                                   json_integer_value(jv))) != 0)
                code = builder_failed(r, b, code, "the delete of", path);
        }
        if (!code && !kind) {
            ld_fdv2_change_set_builder_free(b);
            json_decref(doc);
            return 0; /* nothing to change */
        }
    }
    if (!code) {
        code = ld_fdv2_change_set_builder_finish(b, NULL, &r->cs);
        if (code)
            code = fail(r, LD_ENOMEM, "out of memory");
    }
    ld_fdv2_change_set_builder_free(b);
    json_decref(doc);
    return code;
}

void ld__fdv1_result_free(void *p)
{
    struct ld__fdv1_result *r = p;
    if (!r)
        return;
    ld_fdv2_change_set_free(r->cs);
    ld__free(r);
}

bool ld__fdv1_recoverable(long status)
{
    if (status >= 400 && status < 500)
        return status == 400 || status == 408 || status == 429;
    return true;
}

void ld__fdv1_status_message(long status, char *out, size_t n)
{
    snprintf(out, n, "HTTP error %ld%s%s", status,
             status == 401 || status == 403 ? " (invalid SDK key)" : "",
             ld__fdv1_recoverable(status) ? ", will retry" : ", giving up permanently");
}
