/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * redis-tool: ldasync's Redis store (libldasync-redis) from the command
 * line, for tests/interop/node-redis.sh, which sets it against LaunchDarkly's
 * Node SDK Redis store. Public API only, as any user of the library.
 *
 *   redis-tool URL PREFIX init FILE
 *       ld_store_init() with the data set in FILE,
 *       {"features": {KEY: ITEM, ...}, "segments": {KEY: ITEM, ...}}.
 *   redis-tool URL PREFIX dump
 *       prints {"features": ALL, "segments": ALL, "initialized": BOOL}:
 *       ld_store_all() of each kind (tombstones left out, as it leaves
 *       them) and ld_store_initialized().
 *   redis-tool URL PREFIX upsert features|segments JSON
 *       ld_store_upsert() of the item JSON; prints true when it was
 *       applied, false when the stored version was not older.
 *   redis-tool URL PREFIX delete features|segments KEY VERSION
 *       ld_store_delete(); prints true or false as upsert.
 *
 * URL as ld_redis_options_set_url() takes it (unix:/path/to/socket, or
 * redis://host:port/db). JSON is printed compact, keys sorted, on one line.
 * Exit status 0; 1 with a message on stderr for any error (a bad command
 * line, an operation rejected, or one not answered within 10 s).
 */
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/error.h>
#include <ldasync/future.h>
#include <ldasync/json.h>
#include <ldasync/kind.h>
#include <ldasync/redis.h>
#include <ldasync/store.h>

static void usage(void)
{
    fprintf(stderr, "usage: redis-tool URL PREFIX init FILE\n"
                    "       redis-tool URL PREFIX dump\n"
                    "       redis-tool URL PREFIX upsert features|segments JSON\n"
                    "       redis-tool URL PREFIX delete features|segments KEY VERSION\n");
}

/* Waits for `f` (stolen), at most 10 s. @return the completed future, a new
 * reference, fulfilled; NULL after printing why it is not (what: the
 * operation's name). */
static ld_future *await(ld_future *f, const char *what)
{
    const struct timeval limit = {10, 0};
    ld_future *t = f ? ld_future_timeout(f, &limit) : NULL;
    if (!t) {
        fprintf(stderr, "redis-tool: %s: out of memory\n", what);
        return NULL;
    }
    int rc = ld_future_wait(t);
    if (rc != 0) {
        fprintf(stderr, "redis-tool: %s: waiting failed: %s\n", what, ld_strerror(rc));
        ld_future_unref(t);
        return NULL;
    }
    if (!ld_future_is_fulfilled(t)) {
        const char *msg = ld_future_error_message(t);
        fprintf(stderr, "redis-tool: %s: %s (%s)\n", what, msg ? msg : "rejected",
                ld_err_name(ld_future_error(t)));
        ld_future_unref(t);
        return NULL;
    }
    return t;
}

/* Parses JSON text (what: for the message). @return a new reference or NULL
 * after printing why. */
static json_t *parse(const char *text, size_t len, const char *what)
{
    json_error_t err;
    json_t *v = ld_json_loadb(text, len, 0, &err);
    if (!v)
        fprintf(stderr, "redis-tool: %s: line %d: %s\n", what, err.line, err.text);
    return v;
}

static json_t *load_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "redis-tool: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            char *nbuf = realloc(buf, cap);
            if (!nbuf) {
                fprintf(stderr, "redis-tool: %s: out of memory\n", path);
                free(buf);
                fclose(fp);
                return NULL;
            }
            buf = nbuf;
        }
        size_t n = fread(buf + len, 1, cap - len, fp);
        len += n;
        if (n == 0)
            break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        fprintf(stderr, "redis-tool: %s: read error\n", path);
        free(buf);
        return NULL;
    }
    json_t *v = parse(buf, len, path);
    free(buf);
    return v;
}

static const ld_kind *kind_arg(const char *name)
{
    const ld_kind *kind = ld_kind_by_namespace(name);
    if (!kind)
        fprintf(stderr, "redis-tool: %s: not a kind (features or segments)\n", name);
    return kind;
}

/* Prints `v` (borrowed) on one line. @return 0, or 1 after a message. */
static int print_json(const json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!text) {
        fprintf(stderr, "redis-tool: the result could not be printed\n");
        return 1;
    }
    puts(text);
    free(text);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* Prints the bool that `f` (stolen) fulfils with. @return 0, or 1. */
static int print_applied(ld_future *f, const char *what)
{
    ld_future *done = await(f, what);
    if (!done)
        return 1;
    puts(ld_future_bool(done) ? "true" : "false");
    ld_future_unref(done);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int cmd_init(ld_store *store, int argc, char **argv)
{
    if (argc != 1) {
        usage();
        return 1;
    }
    json_t *data = load_file(argv[0]);
    if (!data)
        return 1;
    ld_future *done = await(ld_store_init(store, data), "init");
    json_decref(data);
    if (!done)
        return 1;
    ld_future_unref(done);
    return 0;
}

static int cmd_dump(ld_store *store, int argc)
{
    if (argc != 0) {
        usage();
        return 1;
    }
    json_t *out = json_object();
    if (!out)
        return 1;
    const ld_kind *kinds[] = {ld_kind_features(), ld_kind_segments()};
    int rc = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0] && rc == 0; i++) {
        const char *ns = ld_kind_namespace(kinds[i]);
        ld_future *all = await(ld_store_all(store, kinds[i]), ns);
        if (!all) {
            rc = 1;
            break;
        }
        /* the object is shared and immutable: the output takes a copy */
        json_t *items = json_deep_copy(ld_future_json(all));
        ld_future_unref(all);
        if (!items || json_object_set_new(out, ns, items) != 0)
            rc = 1;
    }
    if (rc == 0) {
        ld_future *inited = await(ld_store_initialized(store), "initialized");
        if (!inited ||
            json_object_set_new(out, "initialized", json_boolean(ld_future_bool(inited))) != 0)
            rc = 1;
        ld_future_unref(inited);
    }
    if (rc == 0)
        rc = print_json(out);
    json_decref(out);
    return rc;
}

static int cmd_upsert(ld_store *store, int argc, char **argv)
{
    if (argc != 2) {
        usage();
        return 1;
    }
    const ld_kind *kind = kind_arg(argv[0]);
    if (!kind)
        return 1;
    json_t *item = parse(argv[1], strlen(argv[1]), "the item");
    if (!item)
        return 1;
    int rc = print_applied(ld_store_upsert(store, kind, item), "upsert");
    json_decref(item);
    return rc;
}

static int cmd_delete(ld_store *store, int argc, char **argv)
{
    if (argc != 3) {
        usage();
        return 1;
    }
    const ld_kind *kind = kind_arg(argv[0]);
    if (!kind)
        return 1;
    char *end;
    errno = 0;
    long long version = strtoll(argv[2], &end, 10);
    if (errno != 0 || end == argv[2] || *end != '\0') {
        fprintf(stderr, "redis-tool: %s: not a version\n", argv[2]);
        return 1;
    }
    return print_applied(ld_store_delete(store, kind, argv[1], (int64_t)version), "delete");
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        usage();
        return 1;
    }
    const char *url = argv[1], *prefix = argv[2], *cmd = argv[3];
    if (strcmp(cmd, "init") != 0 && strcmp(cmd, "dump") != 0 && strcmp(cmd, "upsert") != 0 &&
        strcmp(cmd, "delete") != 0) {
        usage();
        return 1;
    }
    ld_redis_options *opts = ld_redis_options_new();
    if (!opts) {
        fprintf(stderr, "redis-tool: out of memory\n");
        return 1;
    }
    int rc = ld_redis_options_set_url(opts, url);
    if (rc != 0) {
        fprintf(stderr, "redis-tool: %s: %s\n", url, ld_strerror(rc));
        ld_redis_options_free(opts);
        return 1;
    }
    rc = ld_redis_options_set_prefix(opts, prefix);
    if (rc != 0) {
        fprintf(stderr, "redis-tool: prefix %s: %s\n", prefix, ld_strerror(rc));
        ld_redis_options_free(opts);
        return 1;
    }
    struct event_base *base = event_base_new();
    ld_store *store = base ? ld_redis_store_new(base, opts) : NULL;
    ld_redis_options_free(opts);
    if (!store) {
        fprintf(stderr, "redis-tool: the store could not be made\n");
        if (base)
            event_base_free(base);
        return 1;
    }

    if (strcmp(cmd, "init") == 0)
        rc = cmd_init(store, argc - 4, argv + 4);
    else if (strcmp(cmd, "dump") == 0)
        rc = cmd_dump(store, argc - 4);
    else if (strcmp(cmd, "upsert") == 0)
        rc = cmd_upsert(store, argc - 4, argv + 4);
    else
        rc = cmd_delete(store, argc - 4, argv + 4);

    ld_future *closed = await(ld_store_close(store), "close");
    if (!closed && rc == 0)
        rc = 1;
    ld_future_unref(closed);
    ld_store_free(store);
    event_base_free(base);
    return rc;
}
