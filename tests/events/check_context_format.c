/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Contexts as analytics events show them (lib/events/context_format.c):
 * each output compared field by field with what LaunchDarkly's SDKs write
 * (the cases of the SDK test harness's
 * common_tests_events_contexts.go and more), the order of
 * "redactedAttributes" included; and every allocation failing in turn.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/context.h>

#include "check_fail_alloc.h"
#include "check_suites.h"
#include "events/events-internal.h"

static ld_context *ctx_of(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    ck_assert_msg(j != NULL, "bad JSON in the test: %s", err.text);
    const char *why = NULL;
    ld_context *c = ld_context_from_json(j, &why);
    ck_assert_msg(c != NULL, "bad context in the test: %s", why ? why : "?");
    json_decref(j);
    return c;
}

/* Formats `context` (JSON text) with all-private `all`, global references
 * `refs` (NULL-terminated, or NULL) and `anon` (redact anonymous), and
 * checks the result equals `want` (JSON text): objects field by field,
 * arrays (redactedAttributes) in order. */
static void check_format(const char *context, bool all, const char *const *refs, bool anon,
                         const char *want)
{
    size_t n = 0;
    while (refs && refs[n])
        n++;
    struct ld__ctx_format *f = ld__ctx_format_new(all, refs, n);
    ck_assert_ptr_nonnull(f);
    ld_context *c = ctx_of(context);
    json_t *got = ld__ctx_format(f, c, anon);
    ck_assert_ptr_nonnull(got);
    json_t *w = json_loads(want, 0, NULL);
    ck_assert_ptr_nonnull(w);
    char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
    ck_assert_msg(json_equal(got, w), "for %s\n got  %s\n want %s", context, g, want);
    free(g);
    json_decref(w);
    json_decref(got);
    ld_context_unref(c);
    ld__ctx_format_free(f);
}

#define NONE ((const char *const *)NULL)

START_TEST(test_single_kind_minimal)
{
    check_format("{\"kind\":\"user\",\"key\":\"a\"}", false, NONE, false,
                 "{\"kind\":\"user\",\"key\":\"a\"}");
    check_format("{\"kind\":\"org\",\"key\":\"o\"}", true, NONE, true,
                 "{\"kind\":\"org\",\"key\":\"o\"}");
}
END_TEST

START_TEST(test_multi_kind_minimal)
{
    check_format("{\"kind\":\"multi\",\"org\":{\"key\":\"o\"},\"other\":{\"key\":\"x\"}}", false,
                 NONE, false,
                 "{\"kind\":\"multi\",\"org\":{\"key\":\"o\"},\"other\":{\"key\":\"x\"}}");
}
END_TEST

/* Every attribute copied as it is, whatever its type. */
START_TEST(test_attributes_nothing_private)
{
    check_format("{\"kind\":\"org\",\"key\":\"k\",\"name\":\"a\",\"b\":\"c\"}", false, NONE, false,
                 "{\"kind\":\"org\",\"key\":\"k\",\"name\":\"a\",\"b\":\"c\"}");
    const char *values[] = {"true",  "false", "0",          "-3.5", "\"\"",
                            "\"x\"", "[]",    "[1,[2],{}]", "{}",   "{\"a\":{\"b\":[null]}}"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char in[200], want[200];
        snprintf(in, sizeof in, "{\"kind\":\"user\",\"key\":\"k\",\"attr\":%s}", values[i]);
        snprintf(want, sizeof want, "{\"kind\":\"user\",\"key\":\"k\",\"attr\":%s}", values[i]);
        check_format(in, false, NONE, false, want);
    }
}
END_TEST

/* "anonymous" only when true; _meta.privateAttributes never echoed. */
START_TEST(test_anonymous_and_meta)
{
    check_format("{\"kind\":\"user\",\"key\":\"k\",\"anonymous\":false}", false, NONE, false,
                 "{\"kind\":\"user\",\"key\":\"k\"}");
    check_format("{\"kind\":\"user\",\"key\":\"k\",\"anonymous\":true}", false, NONE, false,
                 "{\"kind\":\"user\",\"key\":\"k\",\"anonymous\":true}");
    check_format("{\"kind\":\"user\",\"key\":\"k\",\"a\":1,"
                 "\"_meta\":{\"privateAttributes\":[\"zz\"]}}",
                 false, NONE, false, "{\"kind\":\"user\",\"key\":\"k\",\"a\":1}");
}
END_TEST

/* The harness's "single-kind, allAttributesPrivate": name and custom
 * attributes redacted, key and anonymous not. */
START_TEST(test_all_attributes_private)
{
    check_format("{\"kind\":\"user\",\"key\":\"k\",\"name\":\"a\",\"b\":\"c\",\"anonymous\":true}",
                 true, NONE, false,
                 "{\"kind\":\"user\",\"key\":\"k\",\"anonymous\":true,"
                 "\"_meta\":{\"redactedAttributes\":[\"name\",\"b\"]}}");
}
END_TEST

/* A name starting with '/' is listed as a literal reference ("/~1ssn"),
 * as Go's SDK and the harness want; other names unchanged. */
START_TEST(test_all_private_slash_names_escaped)
{
    check_format("{\"kind\":\"user\",\"key\":\"k\",\"/ssn\":\"1\"}", true, NONE, false,
                 "{\"kind\":\"user\",\"key\":\"k\","
                 "\"_meta\":{\"redactedAttributes\":[\"/~1ssn\"]}}");
    check_format("{\"kind\":\"user\",\"key\":\"k\",\"/a~b/c\":1,\"x/y~\":2}", true, NONE, false,
                 "{\"kind\":\"user\",\"key\":\"k\","
                 "\"_meta\":{\"redactedAttributes\":[\"/~1a~0b~1c\",\"x/y~\"]}}");
}
END_TEST

/* "name" first, then the custom attributes in the order they were set. */
START_TEST(test_redacted_in_attribute_order)
{
    ld_context_builder *b = ld_context_builder_new("user", "k");
    ck_assert_int_eq(ld_context_builder_set(b, "z", json_integer(1)), 0);
    ck_assert_int_eq(ld_context_builder_set(b, "a", json_integer(2)), 0);
    ck_assert_int_eq(ld_context_builder_set(b, "name", json_string("n")), 0);
    ck_assert_int_eq(ld_context_builder_set(b, "m", json_integer(3)), 0);
    ld_context *c = ld_context_builder_build(b, NULL);
    ck_assert_ptr_nonnull(c);
    struct ld__ctx_format *f = ld__ctx_format_new(true, NULL, 0);
    json_t *got = ld__ctx_format(f, c, false);
    json_t *want = json_loads("[\"name\",\"z\",\"a\",\"m\"]", 0, NULL);
    ck_assert(
        json_equal(json_object_get(json_object_get(got, "_meta"), "redactedAttributes"), want));
    json_decref(want);
    json_decref(got);
    ld__ctx_format_free(f);
    ld_context_unref(c);
    ld_context_builder_free(b);
}
END_TEST

/* The harness's "single-kind, specific private attributes": "name" global,
 * "b" the context's own. */
START_TEST(test_specific_private_attributes)
{
    const char *const refs[] = {"name", NULL};
    check_format("{\"kind\":\"user\",\"key\":\"k\",\"name\":\"a\",\"b\":\"c\",\"d\":\"e\","
                 "\"_meta\":{\"privateAttributes\":[\"b\"]}}",
                 false, refs, false,
                 "{\"kind\":\"user\",\"key\":\"k\",\"d\":\"e\","
                 "\"_meta\":{\"redactedAttributes\":[\"name\",\"b\"]}}");
}
END_TEST

/* The harness's "private attribute nested property": properties of object
 * attributes by path, the rest of the objects kept. */
START_TEST(test_nested_property)
{
    const char *const refs[] = {"/c/prop2/sub1", NULL};
    check_format("{\"kind\":\"user\",\"key\":\"k\",\"name\":\"a\","
                 "\"b\":{\"prop1\":true,\"prop2\":3},"
                 "\"c\":{\"prop1\":{\"sub1\":true},\"prop2\":{\"sub1\":4,\"sub2\":5}},"
                 "\"_meta\":{\"privateAttributes\":[\"/b/prop1\"]}}",
                 false, refs, false,
                 "{\"kind\":\"user\",\"key\":\"k\",\"name\":\"a\",\"b\":{\"prop2\":3},"
                 "\"c\":{\"prop1\":{\"sub1\":true},\"prop2\":{\"sub2\":5}},"
                 "\"_meta\":{\"redactedAttributes\":[\"/b/prop1\",\"/c/prop2/sub1\"]}}");
    /* a whole object by path, and the listing's order is the walk's */
    const char *const refs2[] = {"/a/y", "/a/x/deep", NULL};
    check_format("{\"kind\":\"user\",\"key\":\"k\","
                 "\"a\":{\"x\":{\"deep\":1,\"keep\":2},\"y\":{\"q\":1},\"z\":3}}",
                 false, refs2, false,
                 "{\"kind\":\"user\",\"key\":\"k\",\"a\":{\"x\":{\"keep\":2},\"z\":3},"
                 "\"_meta\":{\"redactedAttributes\":[\"/a/x/deep\",\"/a/y\"]}}");
}
END_TEST

/* A path reaches into objects only: not into arrays, strings or absent
 * properties. */
START_TEST(test_paths_into_non_objects_redact_nothing)
{
    const char *const refs[] = {"/s/x", "/arr/0", "/o/missing", "/o/p/q", NULL};
    const char *in = "{\"kind\":\"user\",\"key\":\"k\",\"s\":\"str\",\"arr\":[{\"0\":1}],"
                     "\"o\":{\"p\":5}}";
    check_format(in, false, refs, false, in);
}
END_TEST

/* "~1" is '/', "~0" is '~' in a path; a plain name is literal. */
START_TEST(test_reference_escapes)
{
    const char *const refs[] = {"/a~1b", "/~0t", "c/d", "/o/p~1q", NULL};
    check_format("{\"kind\":\"user\",\"key\":\"k\",\"a/b\":1,\"~t\":2,\"c/d\":3,\"c\":4,"
                 "\"o\":{\"p/q\":5,\"p\":6}}",
                 false, refs, false,
                 "{\"kind\":\"user\",\"key\":\"k\",\"c\":4,\"o\":{\"p\":6},"
                 "\"_meta\":{\"redactedAttributes\":[\"/a~1b\",\"/~0t\",\"c/d\",\"/o/p~1q\"]}}");
}
END_TEST

/* Invalid references designate nothing (a context's own as well). */
START_TEST(test_invalid_references_ignored)
{
    const char *const refs[] = {"", "/", "//a", "/a/", "/a~2", "/a~", NULL};
    const char *in = "{\"kind\":\"user\",\"key\":\"k\",\"a\":{\"\":1},\"a~2\":2,\"a~\":3}";
    check_format(in, false, refs, false, in);
    check_format("{\"kind\":\"user\",\"key\":\"k\",\"a\":1,"
                 "\"_meta\":{\"privateAttributes\":[\"/a/\",\"//a\",\"/\"]}}",
                 false, NONE, false, "{\"kind\":\"user\",\"key\":\"k\",\"a\":1}");
}
END_TEST

/* key, kind and anonymous are never redacted. */
START_TEST(test_key_kind_anonymous_never_redacted)
{
    const char *const refs[] = {"key", "kind", "anonymous", "/key", "_meta", NULL};
    check_format("{\"kind\":\"org\",\"key\":\"k\",\"anonymous\":true,"
                 "\"_meta\":{\"privateAttributes\":[\"key\",\"/kind\"]}}",
                 false, refs, false, "{\"kind\":\"org\",\"key\":\"k\",\"anonymous\":true}");
}
END_TEST

/* One listing per property, the configuration's reference first. */
START_TEST(test_listed_once_configuration_first)
{
    const char *const refs[] = {"/b", "b", NULL};
    check_format("{\"kind\":\"user\",\"key\":\"k\",\"b\":1,"
                 "\"_meta\":{\"privateAttributes\":[\"b\"]}}",
                 false, refs, false,
                 "{\"kind\":\"user\",\"key\":\"k\",\"_meta\":{\"redactedAttributes\":[\"/b\"]}}");
    /* whole attribute private and a nested reference too: listed once */
    const char *const refs2[] = {"/o/p", NULL};
    check_format("{\"kind\":\"user\",\"key\":\"k\",\"o\":{\"p\":1},"
                 "\"_meta\":{\"privateAttributes\":[\"o\"]}}",
                 false, refs2, false,
                 "{\"kind\":\"user\",\"key\":\"k\",\"_meta\":{\"redactedAttributes\":[\"o\"]}}");
}
END_TEST

/* Anonymous contexts fully redacted only when the event asks; in a
 * multi-kind context only the anonymous kinds. */
START_TEST(test_redact_anonymous)
{
    const char *anon = "{\"kind\":\"user\",\"key\":\"k\",\"anonymous\":true,\"name\":\"n\","
                       "\"o\":{\"p\":1}}";
    check_format(anon, false, NONE, true,
                 "{\"kind\":\"user\",\"key\":\"k\",\"anonymous\":true,"
                 "\"_meta\":{\"redactedAttributes\":[\"name\",\"o\"]}}");
    check_format(anon, false, NONE, false, anon);
    const char *named = "{\"kind\":\"user\",\"key\":\"k\",\"name\":\"n\"}";
    check_format(named, false, NONE, true, named);
    check_format("{\"kind\":\"multi\","
                 "\"user\":{\"key\":\"u\",\"name\":\"n\",\"x\":1,"
                 "\"_meta\":{\"privateAttributes\":[\"name\"]}},"
                 "\"org\":{\"key\":\"o\",\"name\":\"m\",\"anonymous\":true}}",
                 false, NONE, true,
                 "{\"kind\":\"multi\","
                 "\"user\":{\"key\":\"u\",\"x\":1,\"_meta\":{\"redactedAttributes\":[\"name\"]}},"
                 "\"org\":{\"key\":\"o\",\"anonymous\":true,"
                 "\"_meta\":{\"redactedAttributes\":[\"name\"]}}}");
}
END_TEST

/* A context's own private attributes apply to it alone (the harness's
 * private attribute scoping): the next context keeps its attribute. */
START_TEST(test_private_attributes_scoped_to_context)
{
    const char *const refs[] = {"globallyPrivate", NULL};
    struct ld__ctx_format *f = ld__ctx_format_new(false, refs, 1);
    ld_context *a = ctx_of("{\"kind\":\"user\",\"key\":\"a\",\"selfPrivate\":\"1\","
                           "\"globallyPrivate\":\"2\",\"visible\":\"3\","
                           "\"_meta\":{\"privateAttributes\":[\"selfPrivate\"]}}");
    ld_context *b = ctx_of("{\"kind\":\"user\",\"key\":\"b\",\"selfPrivate\":\"1\","
                           "\"globallyPrivate\":\"2\",\"visible\":\"3\"}");
    json_t *ja = ld__ctx_format(f, a, false);
    json_t *jb = ld__ctx_format(f, b, false);
    json_t *wa = json_loads("{\"kind\":\"user\",\"key\":\"a\",\"visible\":\"3\",\"_meta\":"
                            "{\"redactedAttributes\":[\"selfPrivate\",\"globallyPrivate\"]}}",
                            0, NULL);
    json_t *wb = json_loads("{\"kind\":\"user\",\"key\":\"b\",\"selfPrivate\":\"1\","
                            "\"visible\":\"3\",\"_meta\":"
                            "{\"redactedAttributes\":[\"globallyPrivate\"]}}",
                            0, NULL);
    ck_assert(json_equal(ja, wa));
    ck_assert(json_equal(jb, wb));
    json_decref(ja);
    json_decref(jb);
    json_decref(wa);
    json_decref(wb);
    ld_context_unref(a);
    ld_context_unref(b);
    ld__ctx_format_free(f);
}
END_TEST

/* An old-style user: kind "user", its custom attributes at the top, its
 * private names (literal) applied; the context has its custom attributes
 * before the built-in ones, and the listing follows it. */
START_TEST(test_old_style_user)
{
    check_format("{\"key\":\"u\",\"name\":\"n\",\"email\":\"e\",\"custom\":{\"c\":1,\"/d\":2},"
                 "\"privateAttributeNames\":[\"email\",\"/d\"]}",
                 false, NONE, false,
                 "{\"kind\":\"user\",\"key\":\"u\",\"name\":\"n\",\"c\":1,"
                 "\"_meta\":{\"redactedAttributes\":[\"/~1d\",\"email\"]}}");
}
END_TEST

/* The result shares no value with the context. */
START_TEST(test_result_shares_nothing)
{
    struct ld__ctx_format *f = ld__ctx_format_new(false, NULL, 0);
    ld_context *c = ctx_of("{\"kind\":\"user\",\"key\":\"k\",\"o\":{\"p\":[1]}}");
    json_t *got = ld__ctx_format(f, c, false);
    ck_assert_ptr_ne(json_object_get(got, "o"), ld_context_get(c, NULL, "o"));
    json_object_set_new(json_object_get(got, "o"), "p", json_integer(2));
    json_t *p = ld_context_get(c, NULL, "/o/p");
    ck_assert(json_is_array(p) && json_array_size(p) == 1 &&
              json_integer_value(json_array_get(p, 0)) == 1);
    json_decref(got);
    ld_context_unref(c);
    ld__ctx_format_free(f);
}
END_TEST

START_TEST(test_null_arguments)
{
    struct ld__ctx_format *f = ld__ctx_format_new(false, NULL, 3);
    ck_assert_ptr_nonnull(f);
    ld_context *c = ctx_of("{\"kind\":\"user\",\"key\":\"k\"}");
    ck_assert_ptr_null(ld__ctx_format(NULL, c, false));
    ck_assert_ptr_null(ld__ctx_format(f, NULL, false));
    ld_context_unref(c);
    ld__ctx_format_free(f);
    ld__ctx_format_free(NULL);
    const char *const refs[] = {NULL, "a"};
    f = ld__ctx_format_new(false, refs, 2);
    ck_assert_ptr_nonnull(f);
    ld__ctx_format_free(f);
}
END_TEST

/* Every allocation (the library's, then jansson's too) failing in turn:
 * each run gives NULL or the whole answer, and leaks nothing. */
START_TEST(test_chaos)
{
    const char *const refs[] = {"/c/prop2/sub1", "name", NULL};
    const char *in = "{\"kind\":\"multi\",\"user\":{\"key\":\"u\",\"name\":\"a\","
                     "\"/s\":1,\"b\":{\"prop1\":true,\"prop2\":3},"
                     "\"c\":{\"prop1\":{\"sub1\":true},\"prop2\":{\"sub1\":4,\"sub2\":5}},"
                     "\"_meta\":{\"privateAttributes\":[\"/b/prop1\"]}},"
                     "\"org\":{\"key\":\"o\",\"anonymous\":true,\"x\":[1,2]}}";
    ld_context *c = ctx_of(in);
    struct ld__ctx_format *f0 = ld__ctx_format_new(false, refs, 2);
    json_t *want = ld__ctx_format(f0, c, true);
    ck_assert_ptr_nonnull(want);
    for (int js = 0; js < 2; js++) {
        long n, failures = 0;
        for (n = 1; n < 100000; n++) {
            g_json = js;
            CHAOS_BEGIN(n);
            json_set_alloc_funcs(chaos_json_malloc, free);
            struct ld__ctx_format *f = ld__ctx_format_new(false, refs, 2);
            json_t *got = f ? ld__ctx_format(f, c, true) : NULL;
            bool failed = chaos_end(n);
            json_set_alloc_funcs(malloc, free);
            g_json = false;
            if (got)
                ck_assert_msg(json_equal(got, want), "N=%ld: a wrong answer", n);
            else
                ck_assert_msg(failed, "N=%ld: NULL with no allocation failing", n);
            json_decref(got);
            ld__ctx_format_free(f);
            if (!failed)
                break;
            failures++;
        }
        ck_assert_msg(failures > (js ? 10 : 2), "only %ld allocations failed", failures);
    }
    json_decref(want);
    ld__ctx_format_free(f0);
    ld_context_unref(c);
}
END_TEST

Suite *ld_suite_context_format(void)
{
    Suite *s = suite_create("context_format");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, test_single_kind_minimal);
    tcase_add_test(tc, test_multi_kind_minimal);
    tcase_add_test(tc, test_attributes_nothing_private);
    tcase_add_test(tc, test_anonymous_and_meta);
    tcase_add_test(tc, test_all_attributes_private);
    tcase_add_test(tc, test_all_private_slash_names_escaped);
    tcase_add_test(tc, test_redacted_in_attribute_order);
    tcase_add_test(tc, test_specific_private_attributes);
    tcase_add_test(tc, test_nested_property);
    tcase_add_test(tc, test_paths_into_non_objects_redact_nothing);
    tcase_add_test(tc, test_reference_escapes);
    tcase_add_test(tc, test_invalid_references_ignored);
    tcase_add_test(tc, test_key_kind_anonymous_never_redacted);
    tcase_add_test(tc, test_listed_once_configuration_first);
    tcase_add_test(tc, test_redact_anonymous);
    tcase_add_test(tc, test_private_attributes_scoped_to_context);
    tcase_add_test(tc, test_old_style_user);
    tcase_add_test(tc, test_result_shares_nothing);
    tcase_add_test(tc, test_null_arguments);
    tcase_add_test(tc, test_chaos);
    suite_add_tcase(s, tc);
    return s;
}
