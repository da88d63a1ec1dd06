/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The file data source (file_source.h): initializer and synchronizer, on
 * files in a mkdtemp directory; and its data (lib/sources/file_data.c,
 * compiled in), called directly. */
#include <dirent.h>
#include <errno.h>
#include <event2/thread.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ldasync/testing.h>

#include "check_suites.h"
#include "check_util.h"
#include "core/core-internal.h"
#include "sources/sources-internal.h"

#define B ld_test_base

static char g_dir[64];
static char g_path[8][512];

static void make_dir(void)
{
    strcpy(g_dir, "/tmp/ldasync-files-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
}

static void threaded_setup(void)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0); /* before event_base_new() */
    ld_test_setup();
    make_dir();
}

static void unthreaded_setup(void)
{
    ld_test_setup();
    make_dir();
}

static void remove_dir(void)
{
    DIR *d = opendir(g_dir);
    if (d) {
        struct dirent *e;
        char p[600];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof(p), "%s/%s", g_dir, e->d_name);
                unlink(p);
            }
        }
        closedir(d);
    }
    rmdir(g_dir);
}

static void file_teardown(void)
{
    ld_test_teardown();
    remove_dir();
}

/* The path of `name` in the directory (kept in slot `slot`). */
static const char *path_of(int slot, const char *name)
{
    snprintf(g_path[slot], sizeof(g_path[slot]), "%s/%s", g_dir, name);
    return g_path[slot];
}

/* Writes `text` (with ' for ") to `path`, in place. */
static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (const char *p = text; *p; p++)
        fputc(*p == '\'' ? '"' : *p, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* Writes `text` to a temporary file and renames it onto `path`. */
static void write_renamed(const char *path, const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.tmp~", path);
    write_text(tmp, text);
    ck_assert_int_eq(rename(tmp, path), 0);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Runs the loop for `ms` milliseconds. */
static void run_for(long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_base_loopexit(B, &tv);
    event_base_dispatch(B);
}

/* ---- reading results ----------------------------------------------------- */

/* The item `key` of kind `kind` in change set `cs`, or NULL. */
static json_t *item_in(const ld_fdv2_change_set *cs, const ld_kind *kind, const char *key)
{
    for (size_t i = 0; i < ld_fdv2_change_set_count(cs); i++) {
        const ld_fdv2_change *c = ld_fdv2_change_set_get(cs, i);
        if (ld_fdv2_change_kind(c) == kind && strcmp(ld_fdv2_change_key(c), key) == 0) {
            ck_assert_int_eq(ld_fdv2_change_action(c), LD_FDV2_ACTION_PUT);
            ck_assert_int_eq(ld_fdv2_change_version(c), json_integer_value(json_object_get(
                                                            ld_fdv2_change_object(c), "version")));
            return ld_fdv2_change_object(c);
        }
    }
    return NULL;
}

static json_t *flag_in(const ld_fdv2_change_set *cs, const char *key)
{
    return item_in(cs, ld_kind_features(), key);
}

static json_t *segment_in(const ld_fdv2_change_set *cs, const char *key)
{
    return item_in(cs, ld_kind_segments(), key);
}

static int64_t version_in(const ld_fdv2_change_set *cs, const char *key)
{
    json_t *f = flag_in(cs, key);
    ck_assert_msg(f != NULL, "flag %s missing", key);
    return json_integer_value(json_object_get(f, "version"));
}

/* Asserts that `got` equals the JSON of `text` (with ' for "). */
static void assert_json(json_t *got, const char *text)
{
    json_t *want = ld_test_j(text);
    char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
    ck_assert_msg(json_equal(got, want), "got %s, want %s", g ? g : "(null)", text);
    free(g);
    json_decref(want);
}

/* A fetch of a new initializer on `paths`, waited for; the initializer is
 * freed (after the fetch completed). */
static ld_future *fetch_paths(const char *const *paths, size_t n)
{
    ld_initializer *in = ld_file_initializer_new(B, paths, n);
    ck_assert_ptr_nonnull(in);
    ld_future *f = ld_test_done(ld_initializer_fetch(in));
    ld_initializer_free(in);
    ld_test_flush();
    return f;
}

static ld_future *fetch_one(const char *path)
{
    const char *paths[] = {path};
    return fetch_paths(paths, 1);
}

static const ld_fdv2_change_set *basis_cs(ld_future *f)
{
    ck_assert_msg(ld_future_is_fulfilled(f), "fetch failed: %s", ld_future_error_message(f));
    const ld_fdv2_basis *b = ld_fdv2_future_basis(f);
    ck_assert_ptr_nonnull(b);
    ck_assert(!ld_fdv2_basis_persist(b));
    ck_assert_ptr_null(ld_fdv2_basis_environment_id(b));
    const ld_fdv2_change_set *cs = ld_fdv2_basis_change_set(b);
    ck_assert_int_eq(ld_fdv2_change_set_intent(cs), LD_FDV2_INTENT_XFER_FULL);
    ck_assert(!ld_fdv2_selector_is_defined(ld_fdv2_change_set_selector(cs)));
    return cs;
}

/* Asserts that the fetch of `path` rejects with `code` and a message
 * containing `in1` and `in2` (either may be NULL). */
static void expect_fetch_error(const char *path, int code, const char *in1, const char *in2)
{
    ld_future *f = fetch_one(path);
    ck_assert_msg(ld_future_is_rejected(f), "fetch of %s did not fail", path);
    const char *msg = ld_future_error_message(f);
    ck_assert_msg(ld_future_error(f) == code, "%s instead of %s: %s",
                  ld_err_name(ld_future_error(f)), ld_err_name(code), msg);
    ck_assert_msg(!in1 || strstr(msg, in1), "\"%s\" not in \"%s\"", in1, msg);
    ck_assert_msg(!in2 || strstr(msg, in2), "\"%s\" not in \"%s\"", in2, msg);
    ld_future_unref(f);
}

/* ---- initializer: the files ---------------------------------------------- */

START_TEST(test_initializer_reads_flags_with_their_keys_and_versions)
{
    const char *p = path_of(0, "flags.json");
    write_text(p, "{'flags': {'a': {'key': 'a', 'version': 7, 'on': true, 'variations': [1, 2]},"
                  "           'b': {'on': false}}}");
    ld_future *f = fetch_one(p);
    const ld_fdv2_change_set *cs = basis_cs(f);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 2);
    assert_json(flag_in(cs, "a"), "{'key': 'a', 'version': 7, 'on': true, 'variations': [1, 2]}");
    /* without key and version: the key it is filed under, version 1 */
    assert_json(flag_in(cs, "b"), "{'key': 'b', 'version': 1, 'on': false}");
    ld_future_unref(f);
}
END_TEST

START_TEST(test_initializer_flag_values_are_on_flags_serving_the_value)
{
    const char *p = path_of(0, "values.json");
    write_text(p, "{'flagValues': {'s': 'hello', 'o': {'x': [1]}, 'n': null}}");
    ld_future *f = fetch_one(p);
    const ld_fdv2_change_set *cs = basis_cs(f);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 3);
    assert_json(flag_in(cs, "s"), "{'key': 's', 'version': 1, 'on': true, "
                                  "'fallthrough': {'variation': 0}, 'variations': ['hello']}");
    assert_json(flag_in(cs, "o"), "{'key': 'o', 'version': 1, 'on': true, "
                                  "'fallthrough': {'variation': 0}, 'variations': [{'x': [1]}]}");
    assert_json(flag_in(cs, "n"), "{'key': 'n', 'version': 1, 'on': true, "
                                  "'fallthrough': {'variation': 0}, 'variations': [null]}");
    ld_future_unref(f);
}
END_TEST

/* Integers beyond int64 are valid JSON, and LaunchDarkly's SDKs read them
 * as doubles: the file is read (it was refused, "too big integer"), with
 * them as reals; versions and other integers stay integers. */
START_TEST(test_initializer_reads_integers_beyond_int64_as_reals)
{
    const char *p = path_of(0, "big.json");
    write_text(p, "{'flags': {'a': {'version': 7, 'on': true, "
                  "'variations': [10000000000000000000, 1]}},"
                  " 'flagValues': {'b': -10000000000000000000}}");
    ld_future *f = fetch_one(p);
    const ld_fdv2_change_set *cs = basis_cs(f);
    json_t *va = json_object_get(flag_in(cs, "a"), "variations");
    ck_assert(json_is_real(json_array_get(va, 0)));
    ck_assert(json_real_value(json_array_get(va, 0)) == 1e19);
    ck_assert(json_is_integer(json_array_get(va, 1)));
    ck_assert(json_is_integer(json_object_get(flag_in(cs, "a"), "version")));
    ck_assert_int_eq(version_in(cs, "a"), 7);
    json_t *vb = json_array_get(json_object_get(flag_in(cs, "b"), "variations"), 0);
    ck_assert(json_is_real(vb) && json_real_value(vb) == -1e19);
    ld_future_unref(f);
}
END_TEST

/* The flag of a flagValues entry serves its value through the evaluator. */
START_TEST(test_initializer_flag_value_evaluates_to_the_value)
{
    const char *p = path_of(0, "values.json");
    write_text(p, "{'flagValues': {'s': 'hello'}}");
    ld_future *f = fetch_one(p);
    json_t *data =
        json_pack("{s:{s:O}, s:{}}", "features", "s", flag_in(basis_cs(f), "s"), "segments");
    ld_store *store = ld_test_memory_with(data);
    ld_evaluator *ev = ld_test_evaluator_of(store);
    ld_context *ctx = ld_test_ctx_of("{'kind': 'user', 'key': 'u'}");
    ld_future *d = ld_test_fulfilled(
        ld_evaluator_detail(ev, "s", ctx, LD_VALUE_STRING, json_string("fallback")));
    const ld_detail *det = ld_future_ptr(d);
    ck_assert_str_eq(json_string_value(ld_detail_value(det)), "hello");
    ck_assert_int_eq(ld_detail_variation_index(det), 0);
    ld_future_unref(d);
    ld_context_unref(ctx);
    ld_test_done_with(ev, store);
    json_decref(data);
    ld_future_unref(f);
}
END_TEST

START_TEST(test_initializer_reads_segments)
{
    const char *p = path_of(0, "segs.json");
    write_text(p, "{'segments': {'s1': {'included': ['u1'], 'version': 3}, 's2': {}}}");
    ld_future *f = fetch_one(p);
    const ld_fdv2_change_set *cs = basis_cs(f);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 2);
    assert_json(segment_in(cs, "s1"), "{'key': 's1', 'version': 3, 'included': ['u1']}");
    assert_json(segment_in(cs, "s2"), "{'key': 's2', 'version': 1}");
    ck_assert_ptr_null(flag_in(cs, "s1"));
    ld_future_unref(f);
}
END_TEST

START_TEST(test_initializer_merges_files_in_order)
{
    const char *paths[] = {path_of(0, "one.json"), path_of(1, "two.json"),
                           path_of(2, "three.json")};
    write_text(paths[0], "{'flags': {'f1': {'on': true}}, 'segments': {'s1': {}}}");
    write_text(paths[1], "{'flagValues': {'f2': 2}, 'other': 'ignored'}");
    write_text(paths[2],
               "{'flags': {'f3': {}}, 'flagValues': {'f4': true}, 'segments': {'s2': {}}}");
    ld_future *f = fetch_paths(paths, 3);
    const ld_fdv2_change_set *cs = basis_cs(f);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 6);
    const char *order[] = {"f1", "f2", "f3", "f4", "s1", "s2"};
    for (size_t i = 0; i < 6; i++)
        ck_assert_str_eq(ld_fdv2_change_key(ld_fdv2_change_set_get(cs, i)), order[i]);
    ck_assert_ptr_nonnull(segment_in(cs, "s2"));
    ld_future_unref(f);
}
END_TEST

START_TEST(test_initializer_key_defined_in_two_files_is_an_error)
{
    const char *paths[] = {path_of(0, "one.json"), path_of(1, "two.json")};
    write_text(paths[0], "{'flags': {'dup': {}}}");
    write_text(paths[1], "{'flagValues': {'dup': 1}}");
    ld_future *f = fetch_paths(paths, 2);
    ck_assert_int_eq(ld_future_error(f), LD_EPARSE);
    const char *msg = ld_future_error_message(f);
    ck_assert_msg(strstr(msg, "flag \"dup\" is defined twice"), "%s", msg);
    ck_assert_msg(strstr(msg, paths[0]) && strstr(msg, paths[1]), "%s", msg);
    ld_future_unref(f);
    /* segments too */
    write_text(paths[0], "{'segments': {'s': {}}}");
    write_text(paths[1], "{'segments': {'s': {}}}");
    f = fetch_paths(paths, 2);
    ck_assert_int_eq(ld_future_error(f), LD_EPARSE);
    ck_assert_msg(strstr(ld_future_error_message(f), "segment \"s\" is defined twice"), "%s",
                  ld_future_error_message(f));
    ld_future_unref(f);
    /* a flag and a segment may share a key */
    write_text(paths[1], "{'flags': {'s': {}}}");
    f = fetch_paths(paths, 2);
    ck_assert_uint_eq(ld_fdv2_change_set_count(basis_cs(f)), 2);
    ld_future_unref(f);
}
END_TEST

START_TEST(test_initializer_key_in_flags_and_flag_values_is_an_error)
{
    const char *p = path_of(0, "f.json");
    write_text(p, "{'flags': {'k': {}}, 'flagValues': {'k': 1}}");
    expect_fetch_error(p, LD_EPARSE, p,
                       "flag \"k\" is defined twice (in \"flags\" and \"flagValues\")");
    /* twice in one object: jansson rejects the duplicate with a position */
    write_text(p, "{'flagValues': {'k': 1,\n 'k': 2}}");
    expect_fetch_error(p, LD_EPARSE, p, "duplicate object key");
}
END_TEST

START_TEST(test_initializer_parse_error_names_file_line_and_column)
{
    const char *p = path_of(0, "broken.json");
    write_text(p, "{\n  'flags': {\n    'a': {,}\n  }\n}\n");
    char want[600];
    snprintf(want, sizeof(want), "%s:3:11: ", p);
    expect_fetch_error(p, LD_EPARSE, want, NULL);
    /* truncated */
    write_text(p, "{'flagValues'");
    snprintf(want, sizeof(want), "%s:1:", p);
    expect_fetch_error(p, LD_EPARSE, want, NULL);
    /* empty, or blank lines: lines and columns count from 1 */
    write_text(p, "");
    snprintf(want, sizeof(want), "%s:1:1: ", p);
    expect_fetch_error(p, LD_EPARSE, want, NULL);
    write_text(p, "\n\n");
    snprintf(want, sizeof(want), "%s:3:1: ", p);
    expect_fetch_error(p, LD_EPARSE, want, NULL);
}
END_TEST

START_TEST(test_initializer_missing_file_is_eio_with_path_and_reason)
{
    const char *p = path_of(0, "missing.json");
    expect_fetch_error(p, LD_EIO, p, strerror(ENOENT));
    /* a directory cannot be read either */
    expect_fetch_error(g_dir, LD_EIO, g_dir, strerror(EISDIR));
    /* the error of one of several files */
    const char *paths[] = {path_of(1, "ok.json"), p};
    write_text(paths[0], "{}");
    ld_future *f = fetch_paths(paths, 2);
    ck_assert_int_eq(ld_future_error(f), LD_EIO);
    ck_assert_ptr_nonnull(strstr(ld_future_error_message(f), p));
    ld_future_unref(f);
}
END_TEST

START_TEST(test_initializer_fifo_or_device_is_eio_without_waiting)
{
    /* a FIFO: opening it for reading waits for a writer */
    const char *p = path_of(0, "fifo.json");
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    const char *paths[] = {p};
    ld_initializer *in = ld_file_initializer_new(B, paths, 1);
    ck_assert_ptr_nonnull(in);
    ld_future *f = ld_initializer_fetch(in);
    for (int i = 0; i < 100 && ld_future_is_pending(f); i++)
        run_for(20);
    bool waited = ld_future_is_pending(f);
    if (waited) { /* let the read that waits go: a writer comes and goes */
        int w = open(p, O_WRONLY | O_NONBLOCK);
        if (w >= 0)
            close(w);
        f = ld_test_done(f);
    }
    ck_assert_msg(!waited, "the fetch of a FIFO waited for a writer");
    ck_assert_int_eq(ld_future_error(f), LD_EIO);
    ck_assert_ptr_nonnull(strstr(ld_future_error_message(f), "not a regular file"));
    ld_future_unref(f);
    ld_initializer_free(in);
    ld_test_flush();
    /* a device: read without end, or nothing at all */
    expect_fetch_error("/dev/null", LD_EIO, "/dev/null", "not a regular file");
}
END_TEST

START_TEST(test_initializer_wrong_shapes_name_file_and_key)
{
    const char *p = path_of(0, "shape.json");
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"[1, 2]", "the top level is not a JSON object"},
        {"{'flags': []}", "\"flags\" is not an object"},
        {"{'flagValues': 3}", "\"flagValues\" is not an object"},
        {"{'segments': null}", "\"segments\" is not an object"},
        {"{'flags': {'a': 1}}", "flag \"a\" is not an object"},
        {"{'segments': {'s': []}}", "segment \"s\" is not an object"},
        {"{'flags': {'a': {'version': -1}}}", "flag \"a\": \"version\" is not an integer >= 0"},
        {"{'flags': {'a': {'version': '2'}}}", "flag \"a\": \"version\" is not an integer >= 0"},
        {"{'flags': {'a': {'version': 1.5}}}", "flag \"a\": \"version\" is not an integer >= 0"},
        {"{'segments': {'s': {'version': null}}}", "segment \"s\": \"version\" is not"},
        {"{'flags': {'a': {'key': 'b'}}}", "flag \"a\": \"key\" is not \"a\""},
        {"{'flags': {'a': {'key': 5}}}", "flag \"a\": \"key\" is not \"a\""},
        {"{'flags': {'a': {'deleted': 1}}}", "flag \"a\": \"deleted\" is not a boolean"},
        {"{'flags': {'': {}}}", "a flag key is empty"},
        {"{'flagValues': {'': 1}}", "a flag key is empty"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_text(p, cases[i].text);
        expect_fetch_error(p, LD_EPARSE, p, cases[i].want);
    }
}
END_TEST

START_TEST(test_initializer_new_refuses_bad_arguments)
{
    const char *good[] = {"/x"};
    const char *null_path[] = {NULL};
    const char *empty_path[] = {""};
    ck_assert_ptr_null(ld_file_initializer_new(NULL, good, 1));
    ck_assert_ptr_null(ld_file_initializer_new(B, NULL, 1));
    ck_assert_ptr_null(ld_file_initializer_new(B, good, 0));
    ck_assert_ptr_null(ld_file_initializer_new(B, null_path, 1));
    ck_assert_ptr_null(ld_file_initializer_new(B, empty_path, 1));
    ck_assert_ptr_null(ld_file_synchronizer_new(NULL, good, 1, 10));
    ck_assert_ptr_null(ld_file_synchronizer_new(B, NULL, 1, 10));
    ck_assert_ptr_null(ld_file_synchronizer_new(B, good, 0, 10));
    ck_assert_ptr_null(ld_file_synchronizer_new(B, empty_path, 1, 10));
    ck_assert_ptr_null(ld_file_synchronizer_new(B, good, 1, -1));
    ck_assert_ptr_null(ld_file_synchronizer_new(B, good, 1, 86400001));
    ld_initializer *in = ld_file_initializer_new(B, good, 1);
    ck_assert_str_eq(ld_initializer_name(in), "file");
    ld_initializer_free(in);
}
END_TEST

START_TEST(test_initializer_copies_the_paths)
{
    char name[600];
    snprintf(name, sizeof(name), "%s", path_of(0, "a.json"));
    write_text(name, "{'flagValues': {'x': 1}}");
    const char *paths[] = {name};
    ld_initializer *in = ld_file_initializer_new(B, paths, 1);
    memset(name, 'z', strlen(name)); /* the caller's string changes */
    ld_future *f = ld_test_done(ld_initializer_fetch(in));
    ck_assert_ptr_nonnull(flag_in(basis_cs(f), "x"));
    ld_future_unref(f);
    /* each fetch reads the files again */
    write_text(g_path[0], "{'flagValues': {'y': 1}}");
    f = ld_test_done(ld_initializer_fetch(in));
    ck_assert_ptr_nonnull(flag_in(basis_cs(f), "y"));
    ck_assert_ptr_null(flag_in(basis_cs(f), "x"));
    ld_future_unref(f);
    ld_initializer_free(in);
}
END_TEST

START_TEST(test_initializer_fetches_complete_in_order)
{
    const char *p = path_of(0, "a.json");
    write_text(p, "{'flagValues': {'x': 1}}");
    const char *paths[] = {p};
    ld_initializer *in = ld_file_initializer_new(B, paths, 1);
    for (int i = 0; i < 5; i++) {
        ld_future *f = ld_initializer_fetch(in);
        ld_test_watch(f, i);
        ld_future_unref(f);
    }
    ld_future *last = ld_test_done(ld_initializer_fetch(in));
    ck_assert(ld_future_is_fulfilled(last));
    ld_future_unref(last);
    ld_test_flush();
    ck_assert_int_eq(ld_test_n_order, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(ld_test_order[i], i);
    ld_initializer_free(in);
}
END_TEST

/* ---- initializer: stopping and freeing with a fetch pending -------------- */

/* A file of `n` flags at `path`. */
static void write_many(const char *path, int n)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"flags\": {", f);
    for (int i = 0; i < n; i++)
        fprintf(f,
                "%s\"flag-%d\": {\"key\": \"flag-%d\", \"version\": %d, \"on\": true, "
                "\"variations\": [true, false], \"offVariation\": 1, \"fallthrough\": "
                "{\"variation\": 0}, \"prerequisites\": [], \"targets\": [], \"rules\": [], "
                "\"salt\": \"abc\"}",
                i ? ", " : "", i, i, i + 1);
    fputs("}}", f);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_initializer_stop_rejects_a_pending_fetch)
{
    const char *p = path_of(0, "big.json");
    write_many(p, 20000);
    const char *paths[] = {p};
    ld_initializer *in = ld_file_initializer_new(B, paths, 1);
    ld_future *f = ld_initializer_fetch(in);
    ld_future *s = ld_initializer_stop(in);
    ld_test_expect_error(f, LD_ECLOSED, NULL);
    ld_test_await_ok(s);
    ld_test_expect_error(ld_initializer_fetch(in), LD_ECLOSED, NULL);
    ld_initializer_free(in);
    ld_test_flush();
}
END_TEST

START_TEST(test_initializer_free_cancels_a_pending_fetch)
{
    const char *p = path_of(0, "big.json");
    write_many(p, 20000);
    const char *paths[] = {p};
    for (int delay = 0; delay < 40; delay += 4) {
        ld_initializer *in = ld_file_initializer_new(B, paths, 1);
        ld_future *f = ld_initializer_fetch(in);
        sleep_ms(delay); /* the worker at different points of its read */
        ld_initializer_free(in);
        ld_test_expect_error(f, LD_ECANCELED, NULL);
        ld_test_flush();
    }
}
END_TEST

START_TEST(test_initializer_free_right_after_stop)
{
    const char *p = path_of(0, "big.json");
    write_many(p, 20000);
    const char *paths[] = {p};
    ld_initializer *in = ld_file_initializer_new(B, paths, 1);
    ld_future *f = ld_initializer_fetch(in);
    ld_future *s = ld_initializer_stop(in);
    ld_initializer_free(in);
    ld_test_expect_error(f, LD_ECLOSED, NULL);
    ld_test_done(s);
    ld_future_unref(s);
    ld_test_flush();
}
END_TEST

/* Writes `text` to `path` in place, 8 KiB at a time, 1 ms apart. */
struct slow_write {
    const char *path;
    const char *text;
    atomic_int started;
};

static void *slow_write_main(void *arg)
{
    struct slow_write *w = arg;
    FILE *f = fopen(w->path, "w");
    size_t len = strlen(w->text);
    for (size_t at = 0; f && at < len; at += 8192) {
        fwrite(w->text + at, 1, len - at < 8192 ? len - at : 8192, f);
        fflush(f);
        atomic_store(&w->started, 1);
        sleep_ms(1);
    }
    if (f)
        fclose(f);
    atomic_store(&w->started, 1);
    return NULL;
}

/* A file being written while it is read is read again once its status
 * stays the same from open to end: the fetch gets the whole file, never a
 * parse error on the part written so far. */
START_TEST(test_initializer_rereads_a_file_written_while_read)
{
    /* Not under valgrind (make check-valgrind sets LDASYNC_VALGRIND): it
     * runs one thread at a time and can leave the writer unscheduled for
     * longer than the quiet time, a writer pausing mid-file, which
     * file_source.h says may be read half-way. Every other build runs it. */
    if (getenv("LDASYNC_VALGRIND"))
        return;
    const char *p = path_of(0, "slow.json");
    size_t cap = 1 << 20, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text + len, cap - len, "{\"flagValues\": {");
    int n = 0;
    while (len < 600000)
        len += (size_t)snprintf(text + len, cap - len, "%s\"flag-%d\": \"a value of flag %d\"",
                                n ? ", " : "", n, n),
            n++;
    snprintf(text + len, cap - len, "}}");
    write_text(p, "");
    struct slow_write w = {p, text, 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, slow_write_main, &w), 0);
    while (!atomic_load(&w.started))
        sleep_ms(1);
    ld_future *f = fetch_one(p);
    pthread_join(t, NULL);
    const ld_fdv2_change_set *cs = basis_cs(f);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), (size_t)n);
    ld_future_unref(f);
    free(text);
}
END_TEST

struct in_cb {
    ld_initializer *in;
    ld_future *second;
    int how; /* 0: free, 1: stop then free, 2: fetch again then free */
    int ran;
};

static void act_in_callback(ld_future *f, void *arg)
{
    struct in_cb *c = arg;
    (void)f;
    c->ran++;
    if (c->how == 1)
        ld_future_unref(ld_initializer_stop(c->in));
    if (c->how == 2)
        c->second = ld_initializer_fetch(c->in);
    ld_initializer_free(c->in);
    c->in = NULL;
}

START_TEST(test_initializer_stop_and_free_from_inside_callbacks)
{
    const char *p = path_of(0, "a.json");
    write_text(p, "{'flagValues': {'x': 1}}");
    const char *paths[] = {p};
    for (int how = 0; how < 3; how++) {
        struct in_cb c = {ld_file_initializer_new(B, paths, 1), NULL, how, 0};
        ld_future *f = ld_initializer_fetch(c.in);
        ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f), act_in_callback, &c), 0);
        ld_test_wait(f);
        ck_assert(ld_future_is_fulfilled(f));
        ld_future_unref(f);
        ld_test_flush();
        ck_assert_int_eq(c.ran, 1);
        if (how == 2)
            ld_test_expect_error(c.second, LD_ECANCELED, NULL);
        ld_test_flush();
    }
}
END_TEST

/* Without libevent threading the files are read on the loop: same results,
 * no thread. */
/* The entries of directory `dir` (-1 if it cannot be read). */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int thread_count(void)
{
    return count_entries("/proc/self/task");
}

/* The thread count once it is at most `want`, or what it is after `ms`
 * milliseconds: a joined thread can stay listed in /proc a moment after
 * the join. */
static int thread_count_settled(int want, int ms)
{
    int n = thread_count();
    for (int i = 0; i < ms && n > want; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        n = thread_count();
    }
    return n;
}

#ifdef HAVE_EVTHREAD_GET_LOCK_CALLBACKS
struct evthread_lock_callbacks *evthread_get_lock_callbacks(void);
static bool threading_on(void)
{
    struct evthread_lock_callbacks *cb = evthread_get_lock_callbacks();
    return cb && cb->alloc;
}
#else
static bool threading_on(void)
{
    return true; /* unknown: do not count threads */
}
#endif

static void check_threads(bool want_worker)
{
    const char *p = path_of(0, "a.json");
    write_text(p, "{'flagValues': {'x': 1}, 'segments': {'s': {}}}");
    const char *paths[] = {p};
    int before = thread_count();
    ld_initializer *in = ld_file_initializer_new(B, paths, 1);
    ld_future *f = ld_test_done(ld_initializer_fetch(in));
    const ld_fdv2_change_set *cs = basis_cs(f);
    ck_assert_ptr_nonnull(flag_in(cs, "x"));
    ck_assert_ptr_nonnull(segment_in(cs, "s"));
    /* under CK_FORK=no an earlier suite may have turned threading on */
    bool worker = want_worker || threading_on();
    int during = thread_count();
    if (before > 0 && worker) /* (a sanitizer may add a thread of its own) */
        ck_assert_int_ge(during, before + 1);
    if (before > 0 && !worker) /* (... which it may start at any time) */
        ck_assert_int_le(during, before + (LD_TEST_SANITIZED ? 1 : 0));
    ld_future_unref(f);
    ld_initializer_free(in);
    ld_test_flush();
    if (before > 0)
        ck_assert_int_le(thread_count_settled(during - (worker ? 1 : 0), 1000),
                         during - (worker ? 1 : 0)); /* joined */
}

START_TEST(test_initializer_reads_on_a_worker_thread_when_threading_is_on)
{
    check_threads(true);
}
END_TEST

START_TEST(test_initializer_reads_on_the_loop_without_threading)
{
    check_threads(false);
}
END_TEST

/* ---- synchronizer -------------------------------------------------------- */

static ld_synchronizer *g_sync;

/* The next update of g_sync, waited for (at most the guard's time). */
static ld_future *next_update(void)
{
    ld_future *f = ld_test_fulfilled(ld_synchronizer_next(g_sync));
    ck_assert_ptr_nonnull(ld_fdv2_future_update(f));
    return f;
}

/* The change of `kind` and `key` in `cs`, or NULL. */
static const ld_fdv2_change *change_in(const ld_fdv2_change_set *cs, const ld_kind *kind,
                                       const char *key)
{
    for (size_t i = 0; cs && i < ld_fdv2_change_set_count(cs); i++) {
        const ld_fdv2_change *c = ld_fdv2_change_set_get(cs, i);
        if (ld_fdv2_change_kind(c) == kind && strcmp(ld_fdv2_change_key(c), key) == 0)
            return c;
    }
    return NULL;
}

static void add_put(ld_fdv2_change_set_builder *b, const ld_fdv2_change *c)
{
    ck_assert_int_eq(
        ld_fdv2_change_set_builder_add_put(b, ld_fdv2_change_kind(c), ld_fdv2_change_key(c),
                                           ld_fdv2_change_version(c), ld_fdv2_change_object(c)),
        0);
}

/* The data a consumer holds after `cs`, as a full change set: `cs` when it
 * is full, else `held` with its changes (the synchronizer sends only what
 * changed after its first full set): the items held in their order, each
 * replaced by its put or dropped by its delete, then the new ones, flags
 * first. */
static ld_fdv2_change_set *data_after(const ld_fdv2_change_set *held, const ld_fdv2_change_set *cs)
{
    bool full = ld_fdv2_change_set_intent(cs) == LD_FDV2_INTENT_XFER_FULL;
    ld_fdv2_change_set_builder *b = ld_fdv2_change_set_builder_new();
    ck_assert_int_eq(ld_fdv2_change_set_builder_start(b, LD_FDV2_INTENT_XFER_FULL), 0);
    const ld_kind *kinds[] = {ld_kind_features(), ld_kind_segments()};
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; !full && i < ld_fdv2_change_set_count(held); i++) {
            const ld_fdv2_change *c = ld_fdv2_change_set_get(held, i);
            const ld_fdv2_change *d = ld_fdv2_change_kind(c) == kinds[k]
                                          ? change_in(cs, kinds[k], ld_fdv2_change_key(c))
                                          : c;
            if (ld_fdv2_change_kind(c) == kinds[k] &&
                (!d || ld_fdv2_change_action(d) == LD_FDV2_ACTION_PUT))
                add_put(b, d ? d : c);
        }
        for (size_t i = 0; i < ld_fdv2_change_set_count(cs); i++) {
            const ld_fdv2_change *d = ld_fdv2_change_set_get(cs, i);
            if (ld_fdv2_change_kind(d) == kinds[k] &&
                ld_fdv2_change_action(d) == LD_FDV2_ACTION_PUT &&
                (full || !change_in(held, kinds[k], ld_fdv2_change_key(d))))
                add_put(b, d);
        }
    }
    ld_fdv2_change_set *out;
    ck_assert_int_eq(ld_fdv2_change_set_builder_finish(b, NULL, &out), 0);
    ld_fdv2_change_set_builder_free(b);
    return out;
}

enum { HELD_MAX = 64 };
static ld_fdv2_change_set *g_held[HELD_MAX]; /* the data held after each update */
static size_t g_nheld;

static void forget_held(void)
{
    while (g_nheld > 0)
        ld_fdv2_change_set_free(g_held[--g_nheld]);
}

/* The data held once update `f` is applied (a full change set, valid until
 * sync_on() or sync_done()): `f` must be valid, with a full change set, or
 * changes after a full one. */
static const ld_fdv2_change_set *valid_cs(ld_future *f)
{
    const ld_fdv2_update *u = ld_fdv2_future_update(f);
    const ld_data_source_error_info *e = ld_fdv2_update_error(u);
    ck_assert_msg(ld_fdv2_update_state(u) == LD_DATA_SOURCE_STATE_VALID, "state %s (%s)",
                  ld_data_source_state_name(ld_fdv2_update_state(u)), e ? e->message : "");
    ck_assert_ptr_null(e);
    const ld_fdv2_change_set *cs = ld_fdv2_update_change_set(u);
    ck_assert_ptr_nonnull(cs);
    if (ld_fdv2_change_set_intent(cs) != LD_FDV2_INTENT_XFER_FULL) {
        ck_assert_int_eq(ld_fdv2_change_set_intent(cs), LD_FDV2_INTENT_XFER_CHANGES);
        ck_assert_msg(g_nheld > 0, "changes before a full set");
    }
    ck_assert_uint_lt(g_nheld, HELD_MAX);
    g_held[g_nheld] = data_after(g_nheld ? g_held[g_nheld - 1] : NULL, cs);
    return g_held[g_nheld++];
}

static const char *interrupted_message(ld_future *f)
{
    const ld_fdv2_update *u = ld_fdv2_future_update(f);
    ck_assert_int_eq(ld_fdv2_update_state(u), LD_DATA_SOURCE_STATE_INTERRUPTED);
    ck_assert_ptr_null(ld_fdv2_update_change_set(u));
    const ld_data_source_error_info *e = ld_fdv2_update_error(u);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->kind, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA);
    ck_assert_int_eq(e->status_code, 0);
    ck_assert(e->time_ms > 0);
    return e->message;
}

static void sync_on(const char *const *paths, size_t n, int64_t interval)
{
    forget_held();
    g_sync = ld_file_synchronizer_new(B, paths, n, interval);
    ck_assert_ptr_nonnull(g_sync);
    ck_assert_str_eq(ld_synchronizer_name(g_sync), "file");
}

static void sync_done(void)
{
    ld_test_await_ok(ld_synchronizer_stop(g_sync));
    ld_synchronizer_free(g_sync);
    g_sync = NULL;
    ld_test_flush();
    forget_held();
}

static void poll_setup(void)
{
    setenv("LDASYNC_FILE_POLL", "1", 1);
    threaded_setup();
}

static void poll_teardown(void)
{
    unsetenv("LDASYNC_FILE_POLL");
    file_teardown();
}

START_TEST(test_sync_first_next_yields_the_data)
{
    const char *p = path_of(0, "f.json");
    write_text(p,
               "{'flags': {'a': {'version': 4}}, 'flagValues': {'b': 1}, 'segments': {'s': {}}}");
    const char *paths[] = {p};
    sync_on(paths, 1, 20);
    ld_future *f = next_update();
    const ld_fdv2_change_set *cs = valid_cs(f);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 3);
    ck_assert_int_eq(version_in(cs, "a"), 4);
    ck_assert_int_eq(version_in(cs, "b"), 1);
    ck_assert_ptr_nonnull(segment_in(cs, "s"));
    ld_future_unref(f);
    /* nothing changed: the next waits */
    ld_future *n = ld_synchronizer_next(g_sync);
    run_for(200);
    ck_assert(ld_future_is_pending(n));
    ld_future_unref(n);
    sync_done();
}
END_TEST

/* A change yields a full update; an item whose JSON changed without a
 * higher version gets the version yielded last + 1; one that did not
 * change keeps its version (and object); a higher version in the file is
 * taken as it is. */
static void check_versions_kept_monotonic(bool renamed)
{
    const char *p = path_of(0, "f.json");
    write_text(p, "{'flags': {'a': {'version': 5, 'on': true}, 'b': {'version': 2}},"
                  " 'flagValues': {'v': 'x'}}");
    const char *paths[] = {p};
    sync_on(paths, 1, 20);
    ld_future *f1 = next_update();
    const ld_fdv2_change_set *cs1 = valid_cs(f1);
    ck_assert_int_eq(version_in(cs1, "a"), 5);
    const char *text2 = "{'flags': {'a': {'version': 5, 'on': false}, 'b': {'version': 2}},"
                        " 'flagValues': {'v': 'y'}}";
    if (renamed)
        write_renamed(p, text2);
    else
        write_text(p, text2);
    ld_future *f2 = next_update();
    const ld_fdv2_change_set *cs2 = valid_cs(f2);
    ck_assert_int_eq(version_in(cs2, "a"), 6);
    ck_assert_int_eq(version_in(cs2, "b"), 2);
    ck_assert(flag_in(cs2, "b") == flag_in(cs1, "b")); /* the same object */
    ck_assert_int_eq(version_in(cs2, "v"), 2);
    assert_json(flag_in(cs2, "a"), "{'key': 'a', 'version': 6, 'on': false}");
    /* a version raised in the file above the one yielded: taken as it is;
     * another edit without a raise: + 1 again */
    write_text(p, "{'flags': {'a': {'version': 9, 'on': true}, 'b': {'version': 2, 'x': 1}},"
                  " 'flagValues': {'v': 'y'}}");
    ld_future *f3 = next_update();
    const ld_fdv2_change_set *cs3 = valid_cs(f3);
    ck_assert_int_eq(version_in(cs3, "a"), 9);
    ck_assert_int_eq(version_in(cs3, "b"), 3);
    ck_assert_int_eq(version_in(cs3, "v"), 2);
    ld_future_unref(f1);
    ld_future_unref(f2);
    ld_future_unref(f3);
    sync_done();
}

START_TEST(test_sync_change_yields_update_with_versions_kept_monotonic)
{
    check_versions_kept_monotonic(false);
}
END_TEST

START_TEST(test_sync_rename_into_place_is_seen)
{
    check_versions_kept_monotonic(true);
}
END_TEST

START_TEST(test_sync_removed_item_comes_back_with_a_higher_version)
{
    const char *p = path_of(0, "f.json");
    write_text(p, "{'flags': {'a': {'version': 3}, 'b': {}}}");
    const char *paths[] = {p};
    sync_on(paths, 1, 20);
    ld_future *f = next_update();
    ck_assert_int_eq(version_in(valid_cs(f), "a"), 3);
    ld_future_unref(f);
    write_text(p, "{'flags': {'b': {}}}");
    f = next_update();
    ck_assert_ptr_null(flag_in(valid_cs(f), "a"));
    ld_future_unref(f);
    /* back: above 4, the version of its deletion (the data system's, and
     * what a stream sent), else SDKs holding the deletion ignore it */
    write_text(p, "{'flags': {'a': {'version': 3}, 'b': {}}}");
    f = next_update();
    ck_assert_int_eq(version_in(valid_cs(f), "a"), 5);
    ck_assert_int_eq(version_in(valid_cs(f), "b"), 1);
    ld_future_unref(f);
    /* gone again and back with its file version above: taken as it is */
    write_text(p, "{'flags': {'b': {}}}");
    f = next_update();
    ck_assert_ptr_null(flag_in(valid_cs(f), "a"));
    ld_future_unref(f);
    write_text(p, "{'flags': {'a': {'version': 7}, 'b': {}}}");
    f = next_update();
    ck_assert_int_eq(version_in(valid_cs(f), "a"), 7);
    ld_future_unref(f);
    sync_done();
}
END_TEST

START_TEST(test_sync_broken_file_interrupts_then_recovers)
{
    const char *p = path_of(0, "f.json");
    write_text(p, "{'flagValues': {'a': 1}}");
    const char *paths[] = {p};
    sync_on(paths, 1, 20);
    ld_future *f = next_update();
    valid_cs(f);
    ld_future_unref(f);
    write_text(p, "{'flagValues': {'a': }}");
    f = next_update();
    const char *msg = interrupted_message(f);
    char want[600];
    snprintf(want, sizeof(want), "%s:1:22: ", p);
    ck_assert_msg(strstr(msg, want) == msg, "%s", msg);
    ld_future_unref(f);
    /* a missing file is invalid data too */
    ck_assert_int_eq(unlink(p), 0);
    f = next_update();
    ck_assert_ptr_nonnull(strstr(interrupted_message(f), strerror(ENOENT)));
    ld_future_unref(f);
    write_text(p, "{'flagValues': {'a': 2}}");
    f = next_update();
    const ld_fdv2_change_set *cs = valid_cs(f);
    ck_assert_int_eq(
        json_integer_value(json_array_get(json_object_get(flag_in(cs, "a"), "variations"), 0)), 2);
    ck_assert_int_eq(version_in(cs, "a"), 2);
    ld_future_unref(f);
    sync_done();
}
END_TEST

START_TEST(test_sync_broken_at_start_is_interrupted)
{
    const char *p = path_of(0, "f.json");
    write_text(p, "{'flags': {'a': 1}}");
    const char *paths[] = {p};
    sync_on(paths, 1, 20);
    ld_future *f = next_update();
    ck_assert_ptr_nonnull(strstr(interrupted_message(f), "flag \"a\" is not an object"));
    ld_future_unref(f);
    write_renamed(p, "{'flags': {'a': {}}}");
    f = next_update();
    ck_assert_int_eq(version_in(valid_cs(f), "a"), 1);
    ld_future_unref(f);
    sync_done();
}
END_TEST

/* Writes a file in two halves with a pause between them. */
struct halves {
    const char *path;
    const char *text;
    long before_ms, pause_ms;
};

static void *write_halves(void *arg)
{
    struct halves *h = arg;
    sleep_ms(h->before_ms);
    FILE *f = fopen(h->path, "w");
    size_t len = strlen(h->text);
    fwrite(h->text, 1, len / 2, f);
    fflush(f);
    sleep_ms(h->pause_ms);
    fwrite(h->text + len / 2, 1, len - len / 2, f);
    fclose(f);
    return NULL;
}

static void check_half_never_yielded(void)
{
    const char *p = path_of(0, "f.json");
    write_text(p, "{'flagValues': {'a': 1}}");
    const char *paths[] = {p};
    sync_on(paths, 1, 10);
    ld_future *f = next_update();
    valid_cs(f);
    ld_future_unref(f);
    for (int round = 0; round < 3; round++) {
        char text[256];
        snprintf(text, sizeof(text),
                 "{\"flagValues\": {\"a\": %d, \"b\": \"a longer value, so that the half is "
                 "long\"}}",
                 round + 2);
        struct halves h = {p, text, 30, LD_FILE_QUIET_MS / 2};
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, write_halves, &h), 0);
        f = next_update(); /* an update with the half would be interrupted */
        const ld_fdv2_change_set *cs = valid_cs(f);
        ck_assert_int_eq(
            json_integer_value(json_array_get(json_object_get(flag_in(cs, "a"), "variations"), 0)),
            round + 2);
        ld_future_unref(f);
        pthread_join(t, NULL);
    }
    sync_done();
}

START_TEST(test_sync_half_written_file_is_never_yielded)
{
    check_half_never_yielded();
}
END_TEST

/* Rewrites the file (renamed into place, always whole) every 5 ms until
 * told to stop. */
struct churn {
    const char *path;
    atomic_int stop;
    int writes;
};

static void *churn_main(void *arg)
{
    struct churn *c = arg;
    char text[128];
    while (!atomic_load(&c->stop)) {
        snprintf(text, sizeof(text), "{'flagValues': {'a': %d}}", ++c->writes + 100);
        write_renamed(c->path, text);
        sleep_ms(5);
    }
    return NULL;
}

/* Stops the churn after 5 s (the update should have come by then), or
 * once it is stopped. */
static void *stop_churn_later(void *arg)
{
    struct churn *c = arg;
    for (int i = 0; i < 500 && !atomic_load(&c->stop); i++)
        sleep_ms(10);
    atomic_store(&c->stop, 1);
    return NULL;
}

/* Files that never stay quiet are read anyway, at most about 1 s after the
 * changes began. */
static void check_read_without_quiet(void)
{
    const char *p = path_of(0, "f.json");
    write_text(p, "{'flagValues': {'a': 1}}");
    const char *paths[] = {p};
    sync_on(paths, 1, 10);
    ld_future *f = next_update();
    valid_cs(f);
    ld_future_unref(f);
    struct churn c = {p, 0, 0};
    pthread_t t, dog;
    ck_assert_int_eq(pthread_create(&t, NULL, churn_main, &c), 0);
    ck_assert_int_eq(pthread_create(&dog, NULL, stop_churn_later, &c), 0);
    f = next_update();
    bool writing = !atomic_load(&c.stop);
    atomic_store(&c.stop, 1);
    pthread_join(t, NULL);
    pthread_join(dog, NULL);
    ck_assert(writing);
    int64_t a = json_integer_value(
        json_array_get(json_object_get(flag_in(valid_cs(f), "a"), "variations"), 0));
    ck_assert_int_gt(a, 100);
    ld_future_unref(f);
    sync_done();
}

START_TEST(test_sync_changes_while_no_next_waits_are_not_lost)
{
    const char *p = path_of(0, "f.json");
    write_text(p, "{'flagValues': {'a': 1}}");
    const char *paths[] = {p};
    sync_on(paths, 1, 20);
    ld_future *f = next_update();
    valid_cs(f);
    ld_future_unref(f);
    write_text(p, "{'flagValues': {'a': 1, 'b': 2}}");
    run_for(LD_FILE_QUIET_MS * 4); /* seen and settled, nobody asks */
    f = next_update();
    ck_assert_ptr_nonnull(flag_in(valid_cs(f), "b"));
    ld_future_unref(f);
    sync_done();
}
END_TEST

START_TEST(test_sync_watches_several_files)
{
    const char *paths[] = {path_of(0, "one.json"), path_of(1, "two.json")};
    write_text(paths[0], "{'flagValues': {'a': 1}}");
    write_text(paths[1], "{'segments': {'s': {}}}");
    sync_on(paths, 2, 20);
    ld_future *f = next_update();
    ck_assert_uint_eq(ld_fdv2_change_set_count(valid_cs(f)), 2);
    ld_future_unref(f);
    write_renamed(paths[1], "{'segments': {'s': {}, 't': {}}}");
    f = next_update();
    ck_assert_uint_eq(ld_fdv2_change_set_count(valid_cs(f)), 3);
    ld_future_unref(f);
    /* a duplicate across them interrupts */
    write_text(paths[1], "{'flagValues': {'a': 1}}");
    f = next_update();
    ck_assert_ptr_nonnull(strstr(interrupted_message(f), "defined twice"));
    ld_future_unref(f);
    sync_done();
}
END_TEST

/* A path that is a symbolic link, pointed at a file in another directory
 * (ln -sfn new-target path, as a rename of a new link): that file is
 * watched from then on, as the first target was, also when written in
 * place. (Polling is a day apart: only inotify can see it.) */
START_TEST(test_sync_symlink_pointed_elsewhere_watches_the_new_target)
{
    char dirs[3][600], target[2][640], link[640], tmp[640];
    static const char *const names[3] = {"a", "c", "d"};
    for (int i = 0; i < 3; i++) {
        snprintf(dirs[i], sizeof dirs[i], "%s/%s", g_dir, names[i]);
        ck_assert_int_eq(mkdir(dirs[i], 0700), 0);
    }
    snprintf(target[0], sizeof target[0], "%s/f.json", dirs[1]);
    snprintf(target[1], sizeof target[1], "%s/f.json", dirs[2]);
    snprintf(link, sizeof link, "%s/flags.json", dirs[0]);
    snprintf(tmp, sizeof tmp, "%s/flags.json.tmp", dirs[0]);
    write_text(target[0], "{'flagValues': {'v': 1}}");
    write_text(target[1], "{'flagValues': {'v': 2}}");
    ck_assert_int_eq(symlink(target[0], link), 0);
    const char *paths[] = {link};
    sync_on(paths, 1, 86400000);
    ld_future *f = next_update();
    assert_json(json_object_get(flag_in(valid_cs(f), "v"), "variations"), "[1]");
    ld_future_unref(f);
    ck_assert_int_eq(symlink(target[1], tmp), 0);
    ck_assert_int_eq(rename(tmp, link), 0);
    f = next_update();
    assert_json(json_object_get(flag_in(valid_cs(f), "v"), "variations"), "[2]");
    ld_future_unref(f);
    /* the new target, written in place */
    write_text(target[1], "{'flagValues': {'v': 3}}");
    f = ld_synchronizer_next(g_sync);
    run_for(LD_FILE_QUIET_MS * 20);
    ck_assert_msg(!ld_future_is_pending(f), "a write to the new target was not seen");
    ck_assert_ptr_nonnull(ld_fdv2_future_update(f));
    assert_json(json_object_get(flag_in(valid_cs(f), "v"), "variations"), "[3]");
    ld_future_unref(f);
    sync_done();
    unlink(link);
    unlink(target[0]);
    unlink(target[1]);
    for (int i = 0; i < 3; i++)
        rmdir(dirs[i]);
}
END_TEST

/* A path through a symbolic link to a directory that is swapped (a
 * deployment's "current": ln -s r2 current.tmp; mv -T current.tmp
 * current) changes nothing in the directories watched; nor does the
 * creation of what a dangling link points at, elsewhere. Both are seen
 * (such paths are polled as well). */
START_TEST(test_sync_swapped_directory_link_and_dangling_link_are_seen)
{
    char r1[600], r2[600], cur[600], tmp[600], f1[640], f2[640], path[640];
    snprintf(r1, sizeof r1, "%s/r1", g_dir);
    snprintf(r2, sizeof r2, "%s/r2", g_dir);
    snprintf(cur, sizeof cur, "%s/current", g_dir);
    snprintf(tmp, sizeof tmp, "%s/current.tmp", g_dir);
    snprintf(f1, sizeof f1, "%s/f.json", r1);
    snprintf(f2, sizeof f2, "%s/f.json", r2);
    snprintf(path, sizeof path, "%s/f.json", cur);
    ck_assert_int_eq(mkdir(r1, 0700), 0);
    ck_assert_int_eq(mkdir(r2, 0700), 0);
    write_text(f1, "{'flagValues': {'v': 1}}");
    write_text(f2, "{'flagValues': {'v': 2}}");
    ck_assert_int_eq(symlink("r1", cur), 0);
    const char *paths[] = {path};
    sync_on(paths, 1, 20);
    ld_future *f = next_update();
    assert_json(json_object_get(flag_in(valid_cs(f), "v"), "variations"), "[1]");
    ld_future_unref(f);
    ck_assert_int_eq(symlink("r2", tmp), 0);
    ck_assert_int_eq(rename(tmp, cur), 0);
    f = ld_synchronizer_next(g_sync);
    run_for(LD_FILE_QUIET_MS * 20);
    ck_assert_msg(!ld_future_is_pending(f), "the swap of the directory link was not seen");
    assert_json(json_object_get(flag_in(valid_cs(f), "v"), "variations"), "[2]");
    ld_future_unref(f);
    sync_done();
    /* a link to a file not there yet, in another directory */
    char link[640];
    snprintf(link, sizeof link, "%s/link.json", g_dir);
    unlink(f1);
    ck_assert_int_eq(symlink(f1, link), 0);
    const char *paths2[] = {link};
    sync_on(paths2, 1, 20);
    f = next_update();
    ck_assert_ptr_nonnull(strstr(interrupted_message(f), "No such file"));
    ld_future_unref(f);
    write_text(f1, "{'flagValues': {'v': 3}}");
    f = ld_synchronizer_next(g_sync);
    run_for(LD_FILE_QUIET_MS * 20);
    ck_assert_msg(!ld_future_is_pending(f), "the target of a dangling link was not seen");
    assert_json(json_object_get(flag_in(valid_cs(f), "v"), "variations"), "[3]");
    ld_future_unref(f);
    sync_done();
    unlink(link);
    unlink(cur);
    unlink(f1);
    unlink(f2);
    rmdir(r1);
    rmdir(r2);
}
END_TEST

START_TEST(test_sync_stop_rejects_a_pending_next)
{
    const char *p = path_of(0, "f.json");
    write_many(p, 20000);
    const char *paths[] = {p};
    sync_on(paths, 1, 20);
    ld_future *n1 = ld_synchronizer_next(g_sync); /* reading */
    ld_future *s = ld_synchronizer_stop(g_sync);
    ld_test_expect_error(n1, LD_ECLOSED, NULL);
    ld_test_await_ok(s);
    ld_test_expect_error(ld_synchronizer_next(g_sync), LD_ECLOSED, NULL);
    ld_synchronizer_free(g_sync);
    g_sync = NULL;
    ld_test_flush();
}
END_TEST

START_TEST(test_sync_free_with_a_read_running_or_a_next_waiting)
{
    const char *p = path_of(0, "f.json");
    write_many(p, 20000);
    const char *paths[] = {p};
    for (int delay = 0; delay < 40; delay += 8) {
        sync_on(paths, 1, 20);
        ld_future *n1 = ld_synchronizer_next(g_sync);
        sleep_ms(delay);
        ld_synchronizer_free(g_sync);
        ld_test_expect_error(n1, LD_ECANCELED, NULL);
        ld_test_flush();
    }
    /* a next waiting for a change */
    sync_on(paths, 1, 20);
    ld_future *f = next_update();
    ld_future_unref(f);
    ld_future *n2 = ld_synchronizer_next(g_sync);
    run_for(10);
    ld_synchronizer_free(g_sync);
    g_sync = NULL;
    ld_test_expect_error(n2, LD_ECANCELED, NULL);
    ld_test_flush();
}
END_TEST

static void free_sync_in_callback(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    ld_synchronizer_free(g_sync);
    g_sync = NULL;
}

START_TEST(test_sync_free_from_inside_a_next_callback)
{
    const char *p = path_of(0, "f.json");
    write_text(p, "{'flagValues': {'a': 1}}");
    const char *paths[] = {p};
    sync_on(paths, 1, 20);
    ld_future *f = ld_synchronizer_next(g_sync);
    ld_future *n2 = ld_synchronizer_next(g_sync);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f), free_sync_in_callback, NULL), 0);
    ld_test_wait(f);
    ck_assert(ld_future_is_fulfilled(f));
    ld_future_unref(f);
    ld_test_expect_error(n2, LD_ECANCELED, NULL);
    ck_assert_ptr_null(g_sync);
    ld_test_flush();
}
END_TEST

START_TEST(test_sync_reads_files_that_never_stay_quiet)
{
    check_read_without_quiet();
}
END_TEST

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Closing an inotify instance waits for the kernel (an RCU grace period,
 * ~10-15 ms): stop does not hold the loop for it. */
START_TEST(test_sync_stop_does_not_wait_for_the_kernel)
{
    if (getenv("LDASYNC_VALGRIND"))
        return; /* timing */
    const char *p = path_of(0, "f.json");
    write_text(p, "{'flagValues': {'a': 1}}");
    const char *paths[] = {p};
    double best = 1e9;
    for (int i = 0; i < 5; i++) {
        sync_on(paths, 1, 20);
        ld_future_unref(next_update());
        double t0 = now_ms();
        ld_future *s = ld_synchronizer_stop(g_sync);
        double t = now_ms() - t0;
        best = t < best ? t : best;
        ld_test_await_ok(s);
        ld_synchronizer_free(g_sync);
        g_sync = NULL;
        ld_test_flush();
    }
    ck_assert_msg(best < 5, "stop held the loop for %.2f ms", best);
}
END_TEST

/* The descriptors open in this process (one of them the directory read). */
static int fd_count(void)
{
    return count_entries("/proc/self/fd");
}

/* ... but once it is freed (free has returned and the loop has run what
 * it queued), the watch's descriptor is closed and no thread of the
 * synchronizer is left: a program may exit right after (a
 * detached closer still running at exit is a leak under valgrind). Also
 * after a stop, and with a watch retargeted (its old descriptor handed
 * off while the synchronizer ran). The descriptor count is exact (the
 * worker closes it before it ends, and free joins the worker); a thread
 * can stay listed in /proc a moment after its join, so threads are
 * counted once they settle. */
START_TEST(test_sync_free_leaves_no_descriptor_and_no_thread)
{
    const char *p = path_of(0, "f.json");
    write_text(p, "{'flagValues': {'a': 1}}");
    const char *paths[] = {p};
    for (int round = 0; round < 3; round++) {
        ld_test_flush();
        int fds = fd_count(), threads = thread_count();
        ck_assert_int_gt(fds, 0);
        sync_on(paths, 1, 20);
        ld_future_unref(next_update());
        ck_assert_int_gt(fd_count(), fds); /* the watch */
        if (round == 1)
            ld_test_await_ok(ld_synchronizer_stop(g_sync));
        if (round == 2) { /* the file replaced: the watch may be remade */
            write_renamed(p, "{'flagValues': {'a': 2}}");
            ld_future_unref(next_update());
        }
        ld_synchronizer_free(g_sync);
        g_sync = NULL;
        ld_test_flush(); /* (a free after cancel handlers runs from the loop) */
        ck_assert_int_eq(fd_count(), fds);
        /* (a sanitizer may start one of its own once; a thread joined in
         * the round before may still have been listed when counted) */
        if (threads > 0 && round > 0)
            ck_assert_int_le(thread_count_settled(threads, 1000), threads);
    }
}
END_TEST

START_TEST(test_sync_polling_sees_changes_and_renames)
{
    check_versions_kept_monotonic(false);
    check_versions_kept_monotonic(true);
}
END_TEST

START_TEST(test_sync_polling_never_yields_a_half_written_file)
{
    check_half_never_yielded();
}
END_TEST

/* ---- the data, without a loop (lib/sources/file_data.c) ------------------ */

/* The files' text (with ' for ") parsed, as ld__fs_read_file would give it. */
static json_t *doc_of(const char *text)
{
    char buf[1024];
    size_t i = 0;
    for (; text[i] && i < sizeof(buf) - 1; i++)
        buf[i] = text[i] == '\'' ? '"' : text[i];
    buf[i] = '\0';
    json_t *doc = json_loads(buf, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    return doc;
}

/* ld__fs_build() on docs made of `texts`, named p0, p1, ...: its code, and
 * its result in *r (to free with ld__fs_result_free). */
static int build_texts(const char *const *texts, size_t n, struct ld__fs_versions *ver,
                       struct ld__fs_result **r)
{
    static char p0[] = "p0", p1[] = "p1", p2[] = "p2", p3[] = "p3";
    char *const paths[] = {p0, p1, p2, p3};
    json_t *docs[4];
    for (size_t i = 0; i < n; i++)
        docs[i] = doc_of(texts[i]);
    *r = calloc(1, sizeof(**r));
    int code = ld__fs_build(docs, paths, n, ver, NULL, *r);
    ck_assert_int_eq(code, (*r)->code);
    for (size_t i = 0; i < n; i++)
        json_decref(docs[i]);
    return code;
}

START_TEST(test_data_build_merges_files_flags_first_with_keys_and_versions)
{
    const char *texts[] = {"{'flags': {'f1': {'on': true}}, 'segments': {'s1': {}}}",
                           "{'flagValues': {'f2': 2}, 'segments': {'s2': {'version': 4}}}"};
    struct ld__fs_result *r;
    ck_assert_int_eq(build_texts(texts, 2, NULL, &r), 0);
    ck_assert_int_eq(ld_fdv2_change_set_intent(r->cs), LD_FDV2_INTENT_XFER_FULL);
    ck_assert_uint_eq(ld_fdv2_change_set_count(r->cs), 4);
    const char *order[] = {"f1", "f2", "s1", "s2"};
    for (size_t i = 0; i < 4; i++)
        ck_assert_str_eq(ld_fdv2_change_key(ld_fdv2_change_set_get(r->cs, i)), order[i]);
    ck_assert_str_eq(json_string_value(json_object_get(flag_in(r->cs, "f1"), "key")), "f1");
    ck_assert_int_eq(version_in(r->cs, "f1"), 1);
    json_t *f2 = flag_in(r->cs, "f2");
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(f2, "variations"), 0)), 2);
    ck_assert_int_eq(ld_fdv2_change_version(ld_fdv2_change_set_get(r->cs, 3)), 4);
    ld__fs_result_free(r);
}
END_TEST

START_TEST(test_data_build_duplicate_keys_name_both_files)
{
    const char *texts[] = {"{'flags': {'dup': {}}}", "{'flagValues': {'dup': 1}}"};
    struct ld__fs_result *r;
    ck_assert_int_eq(build_texts(texts, 2, NULL, &r), LD_EPARSE);
    ck_assert_str_eq(r->msg, "p1: flag \"dup\" is defined twice (also in p0)");
    ck_assert_ptr_null(r->cs);
    ld__fs_result_free(r);
    const char *one[] = {"{'flags': {'dup': {}}, 'flagValues': {'dup': 1}}"};
    ck_assert_int_eq(build_texts(one, 1, NULL, &r), LD_EPARSE);
    ck_assert_str_eq(r->msg, "p0: flag \"dup\" is defined twice (in \"flags\" and \"flagValues\")");
    ld__fs_result_free(r);
}
END_TEST

START_TEST(test_data_versions_go_up_for_changes_only)
{
    struct ld__fs_versions ver = {{NULL, NULL}, false};
    struct ld__fs_result *r1, *r2;
    const char *v1[] = {"{'flags': {'a': {'on': true}, 'b': {'on': true, 'version': 5}}}"};
    const char *v2[] = {"{'flags': {'a': {'on': false}, 'b': {'on': true, 'version': 5}}}"};
    ck_assert_int_eq(build_texts(v1, 1, &ver, &r1), 0);
    ck_assert_int_eq(build_texts(v2, 1, &ver, &r2), 0);
    ck_assert_int_eq(version_in(r2->cs, "a"), 2); /* changed, same version in the file */
    ck_assert_int_eq(version_in(r2->cs, "b"), 5); /* unchanged: the object yielded last */
    ck_assert_ptr_eq(flag_in(r2->cs, "b"), flag_in(r1->cs, "b"));
    ld__fs_result_free(r1);
    ld__fs_result_free(r2);
    ld__fs_versions_clear(&ver);
}
END_TEST

START_TEST(test_data_versions_item_back_after_deletion_is_above_it)
{
    struct ld__fs_versions ver = {{NULL, NULL}, false};
    struct ld__fs_result *r;
    const char *both[] = {"{'flags': {'a': {'version': 3}, 'b': {}}}"};
    const char *only_b[] = {"{'flags': {'b': {}}}"};
    const char *bad[] = {"{'flags': {'a': 7}}"};
    ck_assert_int_eq(build_texts(both, 1, &ver, &r), 0);
    ld__fs_result_free(r);
    ck_assert_int_eq(build_texts(only_b, 1, &ver, &r), 0); /* a deleted at 4 */
    ld__fs_result_free(r);
    ck_assert_int_eq(build_texts(bad, 1, &ver, &r), LD_EPARSE); /* changes nothing */
    ld__fs_result_free(r);
    ck_assert_int_eq(build_texts(both, 1, &ver, &r), 0);
    ck_assert_int_eq(version_in(r->cs, "a"), 5);
    ld__fs_result_free(r);
    ld__fs_versions_clear(&ver);
}
END_TEST

static bool never_wanted(const void *arg)
{
    (void)arg;
    return false;
}

START_TEST(test_data_read_all_reads_and_reports_files)
{
    char *paths[] = {(char *)path_of(0, "a.json"), (char *)path_of(1, "missing.json")};
    write_text(paths[0], "{'flagValues': {'x': 1}}");
    struct ld__fs_result *r = ld__fs_read_all(paths, 1, NULL, NULL);
    ck_assert_int_eq(r->code, 0);
    ck_assert_ptr_nonnull(flag_in(r->cs, "x"));
    struct ld__fs_sig now;
    ld__fs_sig_of_path(&now, paths[0]);
    ck_assert(ld__fs_sig_eq(&r->sigs[0], &now));
    ld__fs_result_free(r);
    r = ld__fs_read_all(paths, 2, NULL, NULL);
    ck_assert_int_eq(r->code, LD_EIO);
    ck_assert_msg(strstr(r->msg, paths[1]) && strstr(r->msg, strerror(ENOENT)), "%s", r->msg);
    ck_assert_int_eq(r->sigs[1].err, ENOENT);
    ld__fs_result_free(r);
    struct ld__fs_ctl unwanted = {never_wanted, NULL, true};
    ck_assert_ptr_null(ld__fs_read_all(paths, 1, NULL, &unwanted));
}
END_TEST

START_TEST(test_data_read_file_gives_line_and_column_of_a_parse_error)
{
    const char *p = path_of(0, "bad.json");
    write_text(p, "{\n  'flags': {,}\n}");
    struct ld__fs_result r = {0};
    struct ld__fs_sig sig;
    json_t *doc = (json_t *)1;
    struct ld__fs_ctl no_wait = {NULL, NULL, false}; /* at once, though just written */
    ck_assert_int_eq(ld__fs_read_file(&no_wait, p, &doc, &sig, &r), LD_EPARSE);
    ck_assert_ptr_null(doc);
    char want[600];
    snprintf(want, sizeof(want), "%s:2:13:", p);
    ck_assert_msg(strncmp(r.msg, want, strlen(want)) == 0, "%s", r.msg);
    free(r.msg);
}
END_TEST

/* The change set of update `f` as the synchronizer made it. */
static const ld_fdv2_change_set *raw_cs(ld_future *f)
{
    return ld_fdv2_update_change_set(ld_fdv2_future_update(f));
}

START_TEST(test_sync_after_the_first_full_set_yields_only_what_changed)
{
    const char *p = path_of(0, "f.json");
    write_text(p, "{'flagValues': {'a': 1, 'b': 1, 'c': 1, 'd': 1, 'e': 1, 'f': 1}}");
    const char *paths[] = {p};
    sync_on(paths, 1, 20);
    ld_future *f = next_update();
    ck_assert_int_eq(ld_fdv2_change_set_intent(raw_cs(f)), LD_FDV2_INTENT_XFER_FULL);
    ck_assert_uint_eq(ld_fdv2_change_set_count(raw_cs(f)), 6);
    ld_future_unref(f);
    /* one flag changed among six: one put */
    write_renamed(p, "{'flagValues': {'a': 1, 'b': 1, 'c': 2, 'd': 1, 'e': 1, 'f': 1}}");
    f = next_update();
    const ld_fdv2_change_set *cs = raw_cs(f);
    ck_assert_int_eq(ld_fdv2_change_set_intent(cs), LD_FDV2_INTENT_XFER_CHANGES);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 1);
    const ld_fdv2_change *c = ld_fdv2_change_set_get(cs, 0);
    ck_assert_str_eq(ld_fdv2_change_key(c), "c");
    ck_assert_int_eq(ld_fdv2_change_action(c), LD_FDV2_ACTION_PUT);
    ck_assert_int_eq(ld_fdv2_change_version(c), 2);
    ld_future_unref(f);
    /* one gone: one delete, at the version of its deletion */
    write_renamed(p, "{'flagValues': {'a': 1, 'b': 1, 'c': 2, 'd': 1, 'e': 1}}");
    f = next_update();
    cs = raw_cs(f);
    ck_assert_int_eq(ld_fdv2_change_set_intent(cs), LD_FDV2_INTENT_XFER_CHANGES);
    ck_assert_uint_eq(ld_fdv2_change_set_count(cs), 1);
    c = ld_fdv2_change_set_get(cs, 0);
    ck_assert_str_eq(ld_fdv2_change_key(c), "f");
    ck_assert_int_eq(ld_fdv2_change_action(c), LD_FDV2_ACTION_DELETE);
    ck_assert_int_eq(ld_fdv2_change_version(c), 2);
    ld_future_unref(f);
    sync_done();
}
END_TEST

/* The items a read yields are the store's too once applied, and the next
 * reads reuse those unchanged (their versions kept): their reference
 * counts, which the loop thread changes as it stores and drops them, are
 * counted on the worker atomically (a TSan build fails here otherwise). */
START_TEST(test_sync_counts_references_to_items_it_yielded_atomically)
{
    const char *p = path_of(0, "many.json");
    write_many(p, 2000);
    const char *paths[] = {p};
    sync_on(paths, 1, 20);
    ld_future *first = next_update();
    const ld_fdv2_change_set *held = raw_cs(first);
    for (int more = 1; more <= 3; more++) {
        write_many(p, 2000 + more); /* one flag more: one put */
        ld_future *f = ld_synchronizer_next(g_sync);
        while (ld_future_is_pending(f)) {
            /* the loop's references, taken and dropped as the store does */
            for (size_t i = 0; i < ld_fdv2_change_set_count(held); i++) {
                json_t *item = ld_fdv2_change_object(ld_fdv2_change_set_get(held, i));
                ld__json_decref(ld__json_incref(item));
            }
            event_base_loop(B, EVLOOP_NONBLOCK);
        }
        ld_test_fulfilled(f);
        ck_assert_int_eq(ld_fdv2_change_set_intent(raw_cs(f)), LD_FDV2_INTENT_XFER_CHANGES);
        ck_assert_uint_eq(ld_fdv2_change_set_count(raw_cs(f)), 1);
        ld_future_unref(f);
    }
    ld_future_unref(first);
    sync_done();
}
END_TEST

/* The mock store holds the items a file synchronizer yields through a
 * data system, and reads them while the next read runs on the worker: it
 * counts them as the worker does, atomically (a TSan build fails here
 * otherwise). */
START_TEST(test_mock_store_fed_by_a_file_synchronizer_counts_items_atomically)
{
    const char *p = path_of(0, "many.json");
    write_many(p, 2000);
    const char *paths[] = {p};
    ld_store *store = ld_mock_store_new(B);
    ld_data_system *ds =
        ld_data_system_new(B, store, NULL, 0, ld_file_synchronizer_new(B, paths, 1, 20));
    ck_assert_ptr_nonnull(ds);
    ld_test_await_ok(ld_data_system_ready(ds));
    for (int more = 1; more <= 3; more++) {
        write_many(p, 2000 + more); /* one flag more: one upsert */
        while (ld_mock_store_calls(store, LD_MOCK_OP_UPSERT) < more) {
            ld_future_unref(ld_store_all(store, ld_kind_features()));
            event_base_loop(B, EVLOOP_NONBLOCK);
        }
    }
    ld_data_system_free(ds);
    ld_test_flush();
    ld_store_free(store);
    ld_test_flush();
}
END_TEST

START_TEST(test_data_changes_only_puts_what_changed_and_deletes_what_left)
{
    struct ld__fs_versions ver = {{NULL, NULL}, false};
    struct ld__fs_result *r;
    const char *v1[] = {"{'flags': {'a': {}, 'b': {}, 'c': {}}, 'segments': {'s': {}}}"};
    const char *v2[] = {"{'flags': {'a': {}, 'b': {'on': true}, 'n': {}}, 'segments': {'s': {}}}"};
    ck_assert_int_eq(build_texts(v1, 1, &ver, &r), 0);
    ld__fs_result_free(r);
    ver.changes_only = true;
    ck_assert_int_eq(build_texts(v2, 1, &ver, &r), 0);
    ck_assert_int_eq(ld_fdv2_change_set_intent(r->cs), LD_FDV2_INTENT_XFER_CHANGES);
    ck_assert_uint_eq(ld_fdv2_change_set_count(r->cs), 3);
    const char *want[] = {"put b 2", "put n 1", "delete c 2"};
    for (size_t i = 0; i < 3; i++) {
        const ld_fdv2_change *c = ld_fdv2_change_set_get(r->cs, i);
        char got[64];
        snprintf(got, sizeof(got), "%s %s %lld", ld_fdv2_action_name(ld_fdv2_change_action(c)),
                 ld_fdv2_change_key(c), (long long)ld_fdv2_change_version(c));
        ck_assert_str_eq(got, want[i]);
    }
    ld__fs_result_free(r);
    ld__fs_versions_clear(&ver);
}
END_TEST

Suite *ld_suite_file_source(void)
{
    Suite *s = suite_create("file_source");
    TCase *tc = tcase_create("initializer");
    tcase_add_checked_fixture(tc, threaded_setup, file_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_initializer_reads_flags_with_their_keys_and_versions);
    tcase_add_test(tc, test_initializer_flag_values_are_on_flags_serving_the_value);
    tcase_add_test(tc, test_initializer_reads_integers_beyond_int64_as_reals);
    tcase_add_test(tc, test_initializer_flag_value_evaluates_to_the_value);
    tcase_add_test(tc, test_initializer_reads_segments);
    tcase_add_test(tc, test_initializer_merges_files_in_order);
    tcase_add_test(tc, test_initializer_key_defined_in_two_files_is_an_error);
    tcase_add_test(tc, test_initializer_key_in_flags_and_flag_values_is_an_error);
    tcase_add_test(tc, test_initializer_parse_error_names_file_line_and_column);
    tcase_add_test(tc, test_initializer_missing_file_is_eio_with_path_and_reason);
    tcase_add_test(tc, test_initializer_wrong_shapes_name_file_and_key);
    tcase_add_test(tc, test_initializer_fifo_or_device_is_eio_without_waiting);
    tcase_add_test(tc, test_initializer_new_refuses_bad_arguments);
    tcase_add_test(tc, test_initializer_copies_the_paths);
    tcase_add_test(tc, test_initializer_fetches_complete_in_order);
    tcase_add_test(tc, test_initializer_reads_on_a_worker_thread_when_threading_is_on);
    suite_add_tcase(s, tc);

    tc = tcase_create("initializer_pending");
    tcase_add_checked_fixture(tc, threaded_setup, file_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_initializer_stop_rejects_a_pending_fetch);
    tcase_add_test(tc, test_initializer_free_cancels_a_pending_fetch);
    tcase_add_test(tc, test_initializer_free_right_after_stop);
    tcase_add_test(tc, test_initializer_stop_and_free_from_inside_callbacks);
    tcase_add_test(tc, test_initializer_rereads_a_file_written_while_read);
    suite_add_tcase(s, tc);

    /* Not threaded: in forked tests (the default), libevent threading is
     * really off; under CK_FORK=no an earlier suite may have turned it on. */
    tc = tcase_create("unthreaded");
    tcase_add_checked_fixture(tc, unthreaded_setup, file_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_initializer_reads_on_the_loop_without_threading);
    tcase_add_test(tc, test_initializer_merges_files_in_order);
    tcase_add_test(tc, test_initializer_free_cancels_a_pending_fetch);
    tcase_add_test(tc, test_sync_broken_file_interrupts_then_recovers);
    suite_add_tcase(s, tc);

    tc = tcase_create("synchronizer");
    tcase_add_checked_fixture(tc, threaded_setup, file_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_sync_first_next_yields_the_data);
    tcase_add_test(tc, test_sync_change_yields_update_with_versions_kept_monotonic);
    tcase_add_test(tc, test_sync_rename_into_place_is_seen);
    tcase_add_test(tc, test_sync_removed_item_comes_back_with_a_higher_version);
    tcase_add_test(tc, test_sync_broken_file_interrupts_then_recovers);
    tcase_add_test(tc, test_sync_broken_at_start_is_interrupted);
    tcase_add_test(tc, test_sync_half_written_file_is_never_yielded);
    tcase_add_test(tc, test_sync_changes_while_no_next_waits_are_not_lost);
    tcase_add_test(tc, test_sync_watches_several_files);
    tcase_add_test(tc, test_sync_symlink_pointed_elsewhere_watches_the_new_target);
    tcase_add_test(tc, test_sync_swapped_directory_link_and_dangling_link_are_seen);
    tcase_add_test(tc, test_sync_stop_rejects_a_pending_next);
    tcase_add_test(tc, test_sync_free_with_a_read_running_or_a_next_waiting);
    tcase_add_test(tc, test_sync_free_from_inside_a_next_callback);
    tcase_add_test(tc, test_sync_stop_does_not_wait_for_the_kernel);
    tcase_add_test(tc, test_sync_free_leaves_no_descriptor_and_no_thread);
    tcase_add_test(tc, test_sync_reads_files_that_never_stay_quiet);
    tcase_add_test(tc, test_sync_after_the_first_full_set_yields_only_what_changed);
    tcase_add_test(tc, test_sync_counts_references_to_items_it_yielded_atomically);
    tcase_add_test(tc, test_mock_store_fed_by_a_file_synchronizer_counts_items_atomically);
    suite_add_tcase(s, tc);

    tc = tcase_create("polling");
    tcase_add_checked_fixture(tc, poll_setup, poll_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_sync_polling_sees_changes_and_renames);
    tcase_add_test(tc, test_sync_polling_never_yields_a_half_written_file);
    tcase_add_test(tc, test_sync_broken_file_interrupts_then_recovers);
    tcase_add_test(tc, test_sync_reads_files_that_never_stay_quiet);
    suite_add_tcase(s, tc);

    tc = tcase_create("data");
    tcase_add_checked_fixture(tc, unthreaded_setup, file_teardown);
    tcase_add_test(tc, test_data_build_merges_files_flags_first_with_keys_and_versions);
    tcase_add_test(tc, test_data_build_duplicate_keys_name_both_files);
    tcase_add_test(tc, test_data_versions_go_up_for_changes_only);
    tcase_add_test(tc, test_data_versions_item_back_after_deletion_is_above_it);
    tcase_add_test(tc, test_data_read_all_reads_and_reports_files);
    tcase_add_test(tc, test_data_read_file_gives_line_and_column_of_a_parse_error);
    tcase_add_test(tc, test_data_changes_only_puts_what_changed_and_deletes_what_left);
    suite_add_tcase(s, tc);
    return s;
}
