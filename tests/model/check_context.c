/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* Contexts: parsing, validation, canonical keys, references, the builder. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "check_util.h"

/* Parses JSON text into a context; fails the test on bad JSON text. */
static ld_context *parse(const char *text, const char **why)
{
    json_error_t err;
    json_t *j = json_loads(text, JSON_ALLOW_NUL, &err);
    ck_assert_msg(j != NULL, "bad test JSON %s: %s", text, err.text);
    ld_context *c = ld_context_from_json(j, why);
    json_decref(j);
    return c;
}

static ld_context *ok(const char *text)
{
    const char *why = NULL;
    ld_context *c = parse(text, &why);
    ck_assert_msg(c != NULL, "%s refused: %s", text, why ? why : "(no reason)");
    return c;
}

/* ---- validation ------------------------------------------------------- */

START_TEST(test_invalid_contexts_name_the_field)
{
    static const struct {
        const char *json;
        const char *field; /* the message must contain it */
    } cases[] = {
        {"{\"key\": 1}", "\"key\""},
        {"{\"name\": \"no key\"}", "\"key\""},
        {"{\"key\": null}", "\"key\""},
        {"{\"kind\": 1, \"key\": \"a\"}", "\"kind\""},
        {"{\"kind\": \"\", \"key\": \"a\"}", "\"kind\""},
        {"{\"kind\": \"kind\", \"key\": \"a\"}", "\"kind\""},
        {"{\"kind\": \"org:x\", \"key\": \"a\"}", "\"kind\""},
        {"{\"kind\": \"org x\", \"key\": \"a\"}", "\"kind\""},
        {"{\"kind\": \"\\u00e9\", \"key\": \"a\"}", "\"kind\""},
        {"{\"kind\": \"a\\u0000b\", \"key\": \"a\"}", "\"kind\""},
        {"{\"kind\": \"org\"}", "\"key\""},
        {"{\"kind\": \"org\", \"key\": \"\"}", "\"key\""},
        {"{\"kind\": \"org\", \"key\": 5}", "\"key\""},
        {"{\"kind\": \"org\", \"key\": \"a\\u0000b\"}", "\"key\""},
        {"{\"kind\": \"org\", \"key\": \"a\", \"name\": 3}", "\"name\""},
        {"{\"kind\": \"org\", \"key\": \"a\", \"anonymous\": \"yes\"}", "\"anonymous\""},
        {"{\"kind\": \"org\", \"key\": \"a\", \"_meta\": []}", "\"_meta\""},
        {"{\"kind\": \"org\", \"key\": \"a\", \"_meta\": {\"privateAttributes\": \"x\"}}",
         "privateAttributes"},
        {"{\"kind\": \"org\", \"key\": \"a\", \"_meta\": {\"privateAttributes\": [1]}}",
         "privateAttributes"},
        {"{\"kind\": \"multi\"}", "at least one kind"},
        {"{\"kind\": \"multi\", \"key\": \"a\"}", "must be an object"},
        {"{\"kind\": \"multi\", \"org\": 5}", "must be an object"},
        {"{\"kind\": \"multi\", \"multi\": {\"key\": \"a\"}}", "\"kind\""},
        {"{\"kind\": \"multi\", \"kind\": {\"key\": \"a\"}}", "\"kind\""},
        {"{\"kind\": \"multi\", \"p@rty\": {\"key\": \"a\"}}", "\"kind\""},
        {"{\"kind\": \"multi\", \"org\": {\"key\": 17}}", "\"key\""},
        {"{\"kind\": \"multi\", \"org\": {\"key\": \"\"}}", "\"key\""},
        {"{\"kind\": \"multi\", \"org\": {}}", "\"key\""},
        {"{\"kind\": \"multi\", \"org\": {\"key\": \"o\", \"name\": true}}", "\"name\""},
        {"{\"key\": \"u\", \"email\": 5}", "\"email\""},
        {"{\"key\": \"u\", \"firstName\": []}", "\"firstName\""},
        {"{\"key\": \"u\", \"lastName\": {}}", "\"lastName\""},
        {"{\"key\": \"u\", \"country\": 1}", "\"country\""},
        {"{\"key\": \"u\", \"ip\": true}", "\"ip\""},
        {"{\"key\": \"u\", \"avatar\": 1.5}", "\"avatar\""},
        {"{\"key\": \"u\", \"name\": 1}", "\"name\""},
        {"{\"key\": \"u\", \"secondary\": 1}", "\"secondary\""},
        {"{\"key\": \"u\", \"anonymous\": 1}", "\"anonymous\""},
        {"{\"key\": \"u\", \"custom\": []}", "\"custom\""},
        {"{\"key\": \"u\", \"privateAttributeNames\": {}}", "privateAttributeNames"},
        {"{\"key\": \"u\", \"privateAttributeNames\": [null]}", "privateAttributeNames"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *why = NULL;
        ld_context *c = parse(cases[i].json, &why);
        ck_assert_msg(c == NULL, "%s was accepted", cases[i].json);
        ck_assert_msg(why && strstr(why, cases[i].field), "%s: message \"%s\" lacks %s",
                      cases[i].json, why ? why : "(none)", cases[i].field);
        /* why may be NULL */
        ck_assert_ptr_null(parse(cases[i].json, NULL));
    }
}
END_TEST

START_TEST(test_non_objects_and_null_are_invalid)
{
    static const char *const texts[] = {"[]", "1", "\"user\"", "true", "null", "[{\"key\":1}]"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        const char *why = NULL;
        json_t *j = json_loads(texts[i], JSON_DECODE_ANY, NULL);
        ck_assert_ptr_nonnull(j);
        ck_assert_ptr_null(ld_context_from_json(j, &why));
        ck_assert_ptr_nonnull(why);
        json_decref(j);
    }
    const char *why = NULL;
    ck_assert_ptr_null(ld_context_from_json(NULL, &why));
    ck_assert_ptr_nonnull(strstr(why, "object"));
}
END_TEST

/* Keys made with json_object_setn: "kind\0x" is neither "kind" nor a valid kind. */
START_TEST(test_multi_kind_names_with_nul_are_invalid)
{
    json_t *j = json_pack("{s:s, s:{s:s}}", "kind", "multi", "org", "key", "o");
    json_object_setn_new(j, "kind\0x", 6, json_pack("{s:s}", "key", "k"));
    json_object_setn_new(j, "org\0y", 5, json_pack("{s:s}", "key", "k"));
    const char *why = NULL;
    ck_assert_ptr_null(ld_context_from_json(j, &why));
    ck_assert_ptr_nonnull(strstr(why, "\"kind\""));
    json_decref(j);
}
END_TEST

/* Attribute names are compared with their length: "name\0x" is an
 * attribute of its own, neither "name" nor "anonymous" nor "kind". */
START_TEST(test_attribute_names_with_nul_keep_their_length)
{
    json_t *j = json_pack("{s:s, s:s}", "kind", "org", "key", "o");
    json_object_setn_new(j, "name\0x", 6, json_integer(1));
    json_object_setn_new(j, "anonymous\0x", 11, json_integer(2));
    json_object_setn_new(j, "kind\0x", 6, json_integer(3));
    const char *why = NULL;
    ld_context *c = ld_context_from_json(j, &why);
    ck_assert_msg(c != NULL, "%s", why);
    ck_assert_ptr_null(ld_context_get(c, "org", "name"));
    ck_assert(!ld_context_anonymous(c, "org"));
    json_t *out = ld_context_to_json(c);
    ck_assert_uint_eq(json_object_size(out), 5);
    ck_assert_int_eq(json_integer_value(json_object_getn(out, "kind\0x", 6)), 3);
    ck_assert_str_eq(json_string_value(json_object_get(out, "kind")), "org");
    json_decref(out);
    ld_context_unref(c);
    json_decref(j);
}
END_TEST

START_TEST(test_kinds_allow_letters_digits_dot_underscore_dash)
{
    ld_context *c = ok("{\"kind\": \"Org.unit_2-b\", \"key\": \"k\"}");
    ck_assert_str_eq(ld_context_kind(c, 0), "Org.unit_2-b");
    ck_assert(!ld_context_is_multi(c));
    ck_assert_uint_eq(ld_context_kind_count(c), 1);
    ld_context_unref(c);
}
END_TEST

/* ---- single, old-style, multi ------------------------------------------ */

START_TEST(test_single_kind_context_attributes)
{
    ld_context *c = ok("{\"kind\": \"org\", \"key\": \"o1\", \"name\": \"Acme\", "
                       "\"anonymous\": true, \"tier\": 3, \"gone\": null, "
                       "\"_meta\": {\"privateAttributes\": [\"tier\", \"/a/b\"], \"x\": 1}}");
    ck_assert_str_eq(ld_context_kind(c, 0), "org");
    ck_assert_ptr_null(ld_context_kind(c, 1));
    ck_assert_str_eq(ld_context_key(c, "org"), "o1");
    ck_assert_ptr_null(ld_context_key(c, NULL)); /* no user */
    ck_assert(ld_context_anonymous(c, "org"));
    ck_assert(!ld_context_anonymous(c, "user"));
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "name")), "Acme");
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "tier")), 3);
    ck_assert_ptr_null(ld_context_get(c, "org", "gone"));
    ck_assert_ptr_null(ld_context_get(c, "org", "_meta"));
    ck_assert_uint_eq(ld_context_private_count(c, "org"), 2);
    ck_assert_str_eq(ld_context_private(c, "org", 0), "tier");
    ck_assert_str_eq(ld_context_private(c, "org", 1), "/a/b");
    ck_assert_ptr_null(ld_context_private(c, "org", 2));
    ld_context_unref(c);
}
END_TEST

START_TEST(test_null_name_and_anonymous_are_absent)
{
    ld_context *c = ok("{\"kind\": \"user\", \"key\": \"u\", \"name\": null, "
                       "\"anonymous\": null, \"_meta\": null}");
    ck_assert_ptr_null(ld_context_get(c, NULL, "name"));
    ck_assert(!ld_context_anonymous(c, NULL));
    ck_assert(json_is_false(ld_context_get(c, NULL, "anonymous")));
    ld_context_unref(c);
}
END_TEST

START_TEST(test_old_style_user)
{
    ld_context *c = ok("{\"key\": \"u1\", \"name\": \"Ann\", \"firstName\": \"A\", "
                       "\"lastName\": \"N\", \"email\": \"a@x\", \"country\": \"FR\", "
                       "\"ip\": \"1.2.3.4\", \"avatar\": \"http://a\", \"secondary\": \"s\", "
                       "\"anonymous\": true, \"other\": 1, \"country2\": null, "
                       "\"custom\": {\"age\": 40, \"kind\": \"org\", \"key\": \"k\", "
                       "\"anonymous\": false, \"groups\": [\"a\"], \"nil\": null}, "
                       "\"privateAttributeNames\": [\"email\", \"/odd~name\"]}");
    ck_assert_str_eq(ld_context_kind(c, 0), "user");
    ck_assert_str_eq(ld_context_key(c, NULL), "u1");
    ck_assert_str_eq(ld_context_key(c, "user"), "u1");
    ck_assert(ld_context_anonymous(c, NULL));
    static const char *const builtins[][2] = {
        {"name", "Ann"},   {"firstName", "A"}, {"lastName", "N"},      {"email", "a@x"},
        {"country", "FR"}, {"ip", "1.2.3.4"},  {"avatar", "http://a"},
    };
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        ck_assert_str_eq(json_string_value(ld_context_get(c, NULL, builtins[i][0])),
                         builtins[i][1]);
    ck_assert_ptr_null(ld_context_get(c, NULL, "secondary"));
    ck_assert_ptr_null(ld_context_get(c, NULL, "other")); /* unknown top-level: ignored */
    ck_assert_ptr_null(ld_context_get(c, NULL, "nil"));
    ck_assert_int_eq(json_integer_value(ld_context_get(c, NULL, "age")), 40);
    ck_assert(json_is_array(ld_context_get(c, NULL, "groups")));
    /* custom cannot override kind, key, anonymous */
    ck_assert_str_eq(json_string_value(ld_context_get(c, NULL, "kind")), "user");
    ck_assert_str_eq(json_string_value(ld_context_get(c, NULL, "key")), "u1");
    ck_assert(json_is_true(ld_context_get(c, NULL, "anonymous")));
    /* private names are literal: "/odd~name" becomes a reference to it */
    ck_assert_uint_eq(ld_context_private_count(c, NULL), 2);
    ck_assert_str_eq(ld_context_private(c, NULL, 0), "email");
    ck_assert_str_eq(ld_context_private(c, NULL, 1), "/~1odd~0name");
    ck_assert_str_eq(ld_context_fully_qualified_key(c), "u1");
    ld_context_unref(c);
}
END_TEST

START_TEST(test_old_style_user_may_have_an_empty_key)
{
    ld_context *c = ok("{\"key\": \"\"}");
    ck_assert_str_eq(ld_context_key(c, NULL), "");
    ck_assert_str_eq(ld_context_fully_qualified_key(c), "");
    ld_context_unref(c);
    /* but a new-style user may not */
    const char *why = NULL;
    ck_assert_ptr_null(parse("{\"kind\": \"user\", \"key\": \"\"}", &why));
    ck_assert_ptr_nonnull(strstr(why, "\"key\""));
}
END_TEST

START_TEST(test_old_style_custom_name_must_be_a_string_to_count)
{
    ld_context *c = ok("{\"key\": \"u\", \"custom\": {\"name\": 5}}");
    ck_assert_ptr_null(ld_context_get(c, NULL, "name"));
    ld_context_unref(c);
    c = ok("{\"key\": \"u\", \"name\": \"top\", \"custom\": {\"name\": \"inner\"}}");
    ck_assert_str_eq(json_string_value(ld_context_get(c, NULL, "name")), "top");
    ld_context_unref(c);
}
END_TEST

START_TEST(test_multi_kind_context)
{
    ld_context *c = ok("{\"kind\": \"multi\", \"user\": {\"key\": \"u:1\", \"name\": \"U\"}, "
                       "\"org\": {\"key\": \"o%1\", \"anonymous\": true, \"kind\": \"org\"}, "
                       "\"Device\": {\"key\": \"d\"}}");
    ck_assert(ld_context_is_multi(c));
    ck_assert_uint_eq(ld_context_kind_count(c), 3);
    ck_assert_str_eq(ld_context_kind(c, 0), "Device"); /* byte order */
    ck_assert_str_eq(ld_context_kind(c, 1), "org");
    ck_assert_str_eq(ld_context_kind(c, 2), "user");
    ck_assert_str_eq(ld_context_key(c, "user"), "u:1");
    ck_assert_str_eq(ld_context_key(c, "org"), "o%1");
    ck_assert_ptr_null(ld_context_key(c, "zzz"));
    ck_assert(ld_context_anonymous(c, "org"));
    ck_assert(!ld_context_anonymous(c, "user"));
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "kind")), "org");
    ck_assert_str_eq(json_string_value(ld_context_get(c, "user", "name")), "U");
    ck_assert_ptr_null(ld_context_get(c, "org", "name"));
    ck_assert_str_eq(ld_context_fully_qualified_key(c), "Device:d:org:o%251:user:u%3A1");
    ld_context_unref(c);
}
END_TEST

START_TEST(test_multi_with_one_kind_is_that_single_context)
{
    ld_context *c = ok("{\"kind\": \"multi\", \"org\": {\"key\": \"o\"}}");
    ck_assert(!ld_context_is_multi(c));
    ck_assert_uint_eq(ld_context_kind_count(c), 1);
    ck_assert_str_eq(ld_context_fully_qualified_key(c), "org:o");
    json_t *j = ld_context_to_json(c);
    ck_assert_str_eq(json_string_value(json_object_get(j, "kind")), "org");
    json_decref(j);
    ld_context_unref(c);
}
END_TEST

/* ---- canonical keys -------------------------------------------------- */

START_TEST(test_fully_qualified_keys_escape_colon_and_percent)
{
    static const char *const cases[][2] = {
        {"{\"kind\": \"user\", \"key\": \"a:b%c\"}", "a:b%c"}, /* user: unchanged */
        {"{\"key\": \"a:b\"}", "a:b"},
        {"{\"kind\": \"org\", \"key\": \"a:b%c\"}", "org:a%3Ab%25c"},
        {"{\"kind\": \"org\", \"key\": \"%3A\"}", "org:%253A"},
        {"{\"kind\": \"multi\", \"user\": {\"key\": \"u\"}, \"org\": {\"key\": \"o\"}}",
         "org:o:user:u"},
        {"{\"kind\": \"multi\", \"b\": {\"key\": \":\"}, \"a\": {\"key\": \"%\"}}", "a:%25:b:%3A"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ld_context *c = ok(cases[i][0]);
        ck_assert_str_eq(ld_context_fully_qualified_key(c), cases[i][1]);
        ld_context_unref(c);
    }
    ck_assert_ptr_null(ld_context_fully_qualified_key(NULL));
}
END_TEST

/* ---- attribute references -------------------------------------------- */

START_TEST(test_attribute_references_walk_objects_and_unescape)
{
    ld_context *c = ok("{\"kind\": \"org\", \"key\": \"k\", \"name\": \"n\", "
                       "\"a\": {\"b\": {\"c\": 7}, \"x/y\": 1, \"x~y\": 2, \"~1\": 3}, "
                       "\"a/b\": \"slash\", \"/lead\": \"L\", \"arr\": [10, 20], "
                       "\"s\": \"str\", \"~\": \"tilde\"}");
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "/a/b/c")), 7);
    ck_assert(json_is_object(ld_context_get(c, "org", "/a/b")));
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "/a/x~1y")), 1);
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "/a/x~0y")), 2);
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "/a/~01")), 3); /* ~0 then 1 */
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "a/b")), "slash");
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "/a~1b")), "slash");
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "/~1lead")), "L");
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "~")), "tilde"); /* plain */
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "/~0")), "tilde");
    /* built-ins */
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "kind")), "org");
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "/kind")), "org");
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "key")), "k");
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "/key")), "k");
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "/name")), "n");
    ck_assert(json_is_false(ld_context_get(c, "org", "anonymous")));
    /* no array indexing, no walking into non-objects, absent things */
    ck_assert_ptr_null(ld_context_get(c, "org", "/arr/0"));
    ck_assert_ptr_null(ld_context_get(c, "org", "/s/x"));
    ck_assert_ptr_null(ld_context_get(c, "org", "/key/x"));
    ck_assert_ptr_null(ld_context_get(c, "org", "/a/zz"));
    ck_assert_ptr_null(ld_context_get(c, "org", "/nope/b"));
    ck_assert_ptr_null(ld_context_get(c, "org", "/_meta"));
    ck_assert_ptr_null(ld_context_get(c, "user", "/a"));
    ck_assert_ptr_null(ld_context_get(NULL, "org", "/a"));
    ck_assert_ptr_null(ld_context_get(c, "org", NULL));
    ld_context_unref(c);
}
END_TEST

START_TEST(test_invalid_attribute_references_find_nothing)
{
    ld_context *c = ok("{\"kind\": \"org\", \"key\": \"k\", \"a\": {\"\": 1, \"b\": 2}, "
                       "\"\": 3, \"a~2\": 4, \"a~\": 5}");
    static const char *const bad[] = {"",    "/",  "//x",    "/a/",      "/a//b",  "/a~2",
                                      "/a~", "/~", "/a/b~x", "/nope/~2", "/nope//"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(ld_context_get(c, "org", bad[i]) == NULL, "ref \"%s\" found something",
                      bad[i]);
    ld_context_unref(c);
}
END_TEST

START_TEST(test_long_escaped_reference_components)
{
    char name[300], ref[700];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    name[150] = '/';
    json_t *j = json_pack("{s:s, s:s, s:{s:i}}", "kind", "org", "key", "k", "a", name, 9);
    ld_context *c = ld_context_from_json(j, NULL);
    json_decref(j);
    ck_assert_ptr_nonnull(c);
    name[150] = '\0';
    snprintf(ref, sizeof ref, "/a/%s~1%s", name, name + 151);
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", ref)), 9);
    ld_context_unref(c);
}
END_TEST

START_TEST(test_literal_lookup_does_not_parse_references)
{
    ld_context *c = ok("{\"kind\": \"user\", \"key\": \"k\", \"/a\": 1, \"a\": {\"b\": 2}, "
                       "\"~0\": 3}");
    ck_assert_int_eq(json_integer_value(ld_context_get_literal(c, NULL, "/a")), 1);
    ck_assert_ptr_null(ld_context_get_literal(c, NULL, "/a/b"));
    ck_assert_int_eq(json_integer_value(ld_context_get_literal(c, NULL, "~0")), 3);
    ck_assert_str_eq(json_string_value(ld_context_get_literal(c, NULL, "key")), "k");
    ck_assert_str_eq(json_string_value(ld_context_get_literal(c, NULL, "kind")), "user");
    ck_assert(json_is_false(ld_context_get_literal(c, NULL, "anonymous")));
    ck_assert_ptr_null(ld_context_get_literal(c, NULL, ""));
    ck_assert_ptr_null(ld_context_get_literal(c, NULL, NULL));
    ck_assert_ptr_null(ld_context_get_literal(c, "org", "key"));
    ld_context_unref(c);
}
END_TEST

/* ---- JSON out --------------------------------------------------------- */

static void assert_round_trip(const char *text, const char *expected)
{
    ld_context *c = ok(text);
    json_t *out = ld_context_to_json(c);
    ck_assert_ptr_nonnull(out);
    json_t *want = json_loads(expected, 0, NULL);
    ck_assert_ptr_nonnull(want);
    char *got = json_dumps(out, JSON_SORT_KEYS);
    ck_assert_msg(json_equal(out, want), "%s gave %s", text, got);
    free(got);
    /* and back */
    ld_context *again = ld_context_from_json(out, NULL);
    ck_assert_ptr_nonnull(again);
    json_t *out2 = ld_context_to_json(again);
    ck_assert(json_equal(out2, want));
    ck_assert_str_eq(ld_context_fully_qualified_key(again), ld_context_fully_qualified_key(c));
    json_decref(out2);
    ld_context_unref(again);
    json_decref(want);
    json_decref(out);
    ld_context_unref(c);
}

START_TEST(test_to_json_round_trips)
{
    assert_round_trip("{\"kind\": \"org\", \"key\": \"o\", \"name\": \"N\", \"x\": [1], "
                      "\"anonymous\": false, \"nil\": null}",
                      "{\"kind\": \"org\", \"key\": \"o\", \"name\": \"N\", \"x\": [1]}");
    assert_round_trip("{\"kind\": \"org\", \"key\": \"o\", \"anonymous\": true, "
                      "\"_meta\": {\"privateAttributes\": [\"/x/y\"]}}",
                      "{\"kind\": \"org\", \"key\": \"o\", \"anonymous\": true, "
                      "\"_meta\": {\"privateAttributes\": [\"/x/y\"]}}");
    assert_round_trip("{\"key\": \"u\", \"email\": \"e\", \"custom\": {\"c\": 1}, "
                      "\"anonymous\": true, \"privateAttributeNames\": [\"/c\", \"email\"]}",
                      "{\"kind\": \"user\", \"key\": \"u\", \"email\": \"e\", \"c\": 1, "
                      "\"anonymous\": true, "
                      "\"_meta\": {\"privateAttributes\": [\"/~1c\", \"email\"]}}");
    assert_round_trip("{\"kind\": \"multi\", \"user\": {\"key\": \"u\", \"kind\": \"user\"}, "
                      "\"org\": {\"key\": \"o\", \"a\": {\"b\": 1}}}",
                      "{\"kind\": \"multi\", \"user\": {\"key\": \"u\"}, "
                      "\"org\": {\"key\": \"o\", \"a\": {\"b\": 1}}}");
    ck_assert_ptr_null(ld_context_to_json(NULL));
}
END_TEST

START_TEST(test_context_keeps_no_reference_to_its_json)
{
    json_t *j = json_loads("{\"kind\": \"org\", \"key\": \"o\", \"a\": {\"b\": 1}}", 0, NULL);
    ld_context *c = ld_context_from_json(j, NULL);
    ck_assert_ptr_nonnull(c);
    json_object_set_new(json_object_get(j, "a"), "b", json_integer(2));
    json_decref(j);
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "/a/b")), 1);
    /* nor does its JSON form share with it */
    json_t *out = ld_context_to_json(c);
    json_object_set_new(json_object_get(out, "a"), "b", json_integer(3));
    json_decref(out);
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "/a/b")), 1);
    ld_context_unref(c);
}
END_TEST

/* ---- builder and multi ------------------------------------------------ */

START_TEST(test_builder_builds_a_context)
{
    ld_context_builder *b = ld_context_builder_new("org", "o:1");
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(ld_context_builder_set(b, "name", json_string("Acme")), 0);
    ck_assert_int_eq(ld_context_builder_set(b, "tier", json_integer(2)), 0);
    ck_assert_int_eq(ld_context_builder_set(b, "gone", json_integer(2)), 0);
    ck_assert_int_eq(ld_context_builder_set(b, "gone", json_null()), 0);
    ck_assert_int_eq(ld_context_builder_private(b, "/tier"), 0);
    ld_context_builder_anonymous(b, true);
    const char *why = NULL;
    ld_context *c = ld_context_builder_build(b, &why);
    ck_assert_msg(c != NULL, "%s", why);
    ck_assert_str_eq(ld_context_kind(c, 0), "org");
    ck_assert_str_eq(ld_context_key(c, "org"), "o:1");
    ck_assert_str_eq(ld_context_fully_qualified_key(c), "org:o%3A1");
    ck_assert(ld_context_anonymous(c, "org"));
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "name")), "Acme");
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "tier")), 2);
    ck_assert_ptr_null(ld_context_get(c, "org", "gone"));
    ck_assert_str_eq(ld_context_private(c, "org", 0), "/tier");
    /* the builder can go on; the first context does not change */
    ck_assert_int_eq(ld_context_builder_set(b, "tier", json_integer(3)), 0);
    ck_assert_int_eq(ld_context_builder_set(b, "anonymous", json_false()), 0);
    ld_context *c2 = ld_context_builder_build(b, NULL);
    ck_assert_ptr_nonnull(c2);
    ck_assert_int_eq(json_integer_value(ld_context_get(c2, "org", "tier")), 3);
    ck_assert(!ld_context_anonymous(c2, "org"));
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "tier")), 2);
    ld_context_builder_free(b);
    ld_context_unref(c2);
    ck_assert(ld_context_anonymous(c, "org"));
    ld_context_unref(c);
}
END_TEST

START_TEST(test_builder_set_of_a_null_value_fails_the_build)
{
    ld_context_builder *b = ld_context_builder_new("org", "o");
    ck_assert_int_eq(ld_context_builder_set(b, "x", NULL), LD_ENOMEM);
    const char *why = NULL;
    ck_assert_ptr_null(ld_context_builder_build(b, &why));
    ck_assert_str_eq(why, "out of memory");
    ld_context_builder_free(b);
}
END_TEST

START_TEST(test_builder_default_kind_is_user)
{
    ld_context_builder *b = ld_context_builder_new(NULL, "u");
    ld_context *c = ld_context_builder_build(b, NULL);
    ck_assert_str_eq(ld_context_kind(c, 0), "user");
    ck_assert_str_eq(ld_context_fully_qualified_key(c), "u");
    ld_context_unref(c);
    ld_context_builder_free(b);
}
END_TEST

START_TEST(test_builder_refuses_invalid_input)
{
    static const struct {
        const char *kind, *key, *field;
    } cases[] = {
        {"org", NULL, "\"key\""},   {"org", "", "\"key\""},     {"", "k", "\"kind\""},
        {"kind", "k", "\"kind\""},  {"multi", "k", "\"kind\""}, {"a:b", "k", "\"kind\""},
        {"org", "\xff", "\"key\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ld_context_builder *b = ld_context_builder_new(cases[i].kind, cases[i].key);
        ck_assert_ptr_nonnull(b);
        const char *why = NULL;
        ck_assert_ptr_null(ld_context_builder_build(b, &why));
        ck_assert_msg(why && strstr(why, cases[i].field), "case %zu: %s", i, why);
        ld_context_builder_free(b);
    }
    ld_context_builder *b = ld_context_builder_new("org", "k");
    ck_assert_int_eq(ld_context_builder_set(b, "kind", json_string("x")), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "key", json_string("x")), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "_meta", json_object()), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "name", json_integer(1)), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "anonymous", json_string("y")), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "", json_true()), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, NULL, json_true()), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "\xff", json_true()), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(NULL, "a", json_true()), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_private(b, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_private(NULL, "a"), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_private(b, "\xfe"), LD_EINVAL);
    ld_context_builder_anonymous(NULL, true);
    ck_assert_int_eq(ld_context_builder_set(NULL, "a", NULL), LD_EINVAL);
    /* none of that changed the builder */
    ld_context *c = ld_context_builder_build(b, NULL);
    ck_assert_ptr_nonnull(c);
    json_t *j = ld_context_to_json(c);
    json_t *want = json_pack("{s:s, s:s}", "kind", "org", "key", "k");
    ck_assert(json_equal(j, want));
    json_decref(want);
    json_decref(j);
    ld_context_unref(c);
    ld_context_builder_free(b);
    ld_context_builder_free(NULL);
    ck_assert_ptr_null(ld_context_builder_build(NULL, NULL));
}
END_TEST

static ld_context *build(const char *kind, const char *key)
{
    ld_context_builder *b = ld_context_builder_new(kind, key);
    ld_context *c = ld_context_builder_build(b, NULL);
    ld_context_builder_free(b);
    ck_assert_ptr_nonnull(c);
    return c;
}

START_TEST(test_multi_from_parts)
{
    ld_context *u = build("user", "u"), *o = build("org", "o"), *d = build("device", "d");
    const ld_context *parts[] = {u, o};
    const char *why = NULL;
    ld_context *m = ld_context_multi(parts, 2, &why);
    ck_assert_msg(m != NULL, "%s", why);
    ck_assert(ld_context_is_multi(m));
    ck_assert_str_eq(ld_context_fully_qualified_key(m), "org:o:user:u");
    /* a multi part contributes its kinds */
    const ld_context *parts2[] = {m, d};
    ld_context *m2 = ld_context_multi(parts2, 2, &why);
    ck_assert_ptr_nonnull(m2);
    ck_assert_uint_eq(ld_context_kind_count(m2), 3);
    ck_assert_str_eq(ld_context_fully_qualified_key(m2), "device:d:org:o:user:u");
    /* one kind: that context itself */
    const ld_context *one[] = {o};
    ld_context *s = ld_context_multi(one, 1, NULL);
    ck_assert_ptr_eq(s, o);
    ld_context_unref(s);
    /* errors */
    const ld_context *dup[] = {u, m};
    ck_assert_ptr_null(ld_context_multi(dup, 2, &why));
    ck_assert_ptr_nonnull(strstr(why, "same kind"));
    ck_assert_ptr_null(ld_context_multi(parts, 0, &why));
    ck_assert_ptr_nonnull(strstr(why, "at least one kind"));
    ck_assert_ptr_null(ld_context_multi(NULL, 2, &why));
    const ld_context *withnull[] = {u, NULL};
    ck_assert_ptr_null(ld_context_multi(withnull, 2, &why));
    ld_context_unref(u);
    ld_context_unref(o);
    ld_context_unref(d);
    /* the multi contexts outlive their parts */
    ck_assert_str_eq(ld_context_key(m2, "org"), "o");
    json_t *j = ld_context_to_json(m2);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "device"), "key")), "d");
    json_decref(j);
    ld_context_unref(m);
    ld_context_unref(m2);
}
END_TEST

/* ---- reference counting ---------------------------------------------- */

static void *ref_unref(void *arg)
{
    ld_context *c = arg;
    void *bad = NULL;
    for (int i = 0; i < 20000; i++) {
        ld_context_ref(c);
        if (strcmp(ld_context_key(c, "org"), "o") != 0)
            bad = c;
        ld_context_unref(c);
    }
    ld_context_unref(c); /* the reference given to this thread */
    return bad;
}

START_TEST(test_reference_counting_across_threads)
{
    ck_assert_ptr_null(ld_context_ref(NULL));
    ld_context_unref(NULL);
    ld_context *c = build("org", "o");
    ck_assert_ptr_eq(ld_context_ref(c), c);
    ld_context_unref(c);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        ld_context_ref(c);
        ck_assert_int_eq(pthread_create(&t[i], NULL, ref_unref, c), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *bad = c;
        pthread_join(t[i], &bad);
        ck_assert_ptr_null(bad);
    }
    ck_assert_str_eq(ld_context_key(c, "org"), "o");
    ld_context_unref(c); /* the last one: valgrind/ASan see any early free */
}
END_TEST

START_TEST(test_accessors_are_null_safe)
{
    ck_assert(!ld_context_is_multi(NULL));
    ck_assert_uint_eq(ld_context_kind_count(NULL), 0);
    ck_assert_ptr_null(ld_context_kind(NULL, 0));
    ck_assert_ptr_null(ld_context_key(NULL, NULL));
    ck_assert(!ld_context_anonymous(NULL, NULL));
    ck_assert_uint_eq(ld_context_private_count(NULL, NULL), 0);
    ck_assert_ptr_null(ld_context_private(NULL, NULL, 0));
    ck_assert_ptr_null(ld_context_get_literal(NULL, NULL, "key"));
}
END_TEST

/* ---- found by the adversarial review ------------------------------------ */

/* to_json gives the caller a new value it may change: not even the kind and
 * key strings are shared with the context. */
START_TEST(test_to_json_shares_no_string_with_the_context)
{
    ld_context *c =
        ok("{\"kind\": \"multi\", \"org\": {\"key\": \"o\"}, \"user\": {\"key\": \"u\"}}");
    json_t *out = ld_context_to_json(c);
    json_string_set(json_object_get(json_object_get(out, "org"), "key"), "changed");
    json_decref(out);
    ld_context *s = ok("{\"kind\": \"org\", \"key\": \"o\"}");
    out = ld_context_to_json(s);
    json_string_set(json_object_get(out, "key"), "changed");
    json_string_set(json_object_get(out, "kind"), "changed");
    json_decref(out);
    ck_assert_str_eq(ld_context_key(c, "org"), "o");
    ck_assert_str_eq(ld_context_key(s, "org"), "o");
    ck_assert_str_eq(json_string_value(ld_context_get(s, "org", "key")), "o");
    ck_assert_str_eq(json_string_value(ld_context_get(s, "org", "kind")), "org");
    ld_context_unref(s);
    ld_context_unref(c);
}
END_TEST

/* Only the old-style form allows the empty key: to_json uses it, so that
 * from_json of the result is an equal context. */
START_TEST(test_old_style_user_with_an_empty_key_round_trips)
{
    ld_context *c = ok("{\"key\": \"\", \"name\": \"N\", \"email\": \"e\", \"anonymous\": true, "
                       "\"custom\": {\"a\": {\"b\": [1]}, \"/x~y\": 2}, "
                       "\"privateAttributeNames\": [\"email\", \"/x~y\", \"a/b\", \"\"]}");
    json_t *out = ld_context_to_json(c);
    ck_assert_ptr_nonnull(out);
    const char *why = NULL;
    ld_context *again = ld_context_from_json(out, &why);
    ck_assert_msg(again != NULL, "refused: %s", why);
    ck_assert_str_eq(ld_context_kind(again, 0), "user");
    ck_assert_str_eq(ld_context_key(again, NULL), "");
    ck_assert_str_eq(ld_context_fully_qualified_key(again), "");
    ck_assert(ld_context_anonymous(again, NULL));
    ck_assert_str_eq(json_string_value(ld_context_get(again, NULL, "name")), "N");
    ck_assert_str_eq(json_string_value(ld_context_get(again, NULL, "email")), "e");
    ck_assert_ptr_null(ld_context_get(again, NULL, "/a/b/0")); /* no array index */
    ck_assert(json_is_array(ld_context_get(again, NULL, "/a/b")));
    ck_assert_int_eq(json_integer_value(ld_context_get_literal(again, NULL, "/x~y")), 2);
    ck_assert_uint_eq(ld_context_private_count(again, NULL), 4);
    for (size_t i = 0; i < 4; i++)
        ck_assert_str_eq(ld_context_private(again, NULL, i), ld_context_private(c, NULL, i));
    json_t *out2 = ld_context_to_json(again);
    ck_assert(json_equal(out, out2));
    json_decref(out2);
    json_decref(out);
    ld_context_unref(again);
    ld_context_unref(c);
}
END_TEST

/* A multi-kind context's keys are never empty (its JSON form could not be
 * read back): an old-style user with the empty key is not a part. */
START_TEST(test_multi_refuses_a_part_with_an_empty_key)
{
    ld_context *u = ok("{\"key\": \"\"}");
    ld_context *o = ok("{\"kind\": \"org\", \"key\": \"o\"}");
    const ld_context *parts[] = {o, u};
    const char *why = NULL;
    ld_context *m = ld_context_multi(parts, 2, &why);
    ck_assert_ptr_null(m);
    ck_assert_msg(why && strstr(why, "\"key\""), "%s", why ? why : "(none)");
    /* alone it is itself */
    ld_context *s = ld_context_multi(parts + 1, 1, NULL);
    ck_assert_ptr_eq(s, u);
    ld_context_unref(s);
    ld_context_unref(o);
    ld_context_unref(u);
}
END_TEST

/* A private reference is handed out as a C string: one with a NUL would be
 * read as another ("email\0x" as "email"), so it is refused. */
START_TEST(test_private_references_with_nul_are_invalid)
{
    static const struct {
        const char *json;
        const char *field;
    } cases[] = {
        {"{\"kind\": \"org\", \"key\": \"a\", \"email\": 1, "
         "\"_meta\": {\"privateAttributes\": [\"email\\u0000x\"]}}",
         "privateAttributes"},
        {"{\"kind\": \"multi\", \"org\": {\"key\": \"a\", "
         "\"_meta\": {\"privateAttributes\": [\"a\", \"\\u0000\"]}}}",
         "privateAttributes"},
        {"{\"key\": \"u\", \"privateAttributeNames\": [\"/email\\u0000x\"]}",
         "privateAttributeNames"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *why = NULL;
        ld_context *c = parse(cases[i].json, &why);
        ck_assert_msg(c == NULL, "%s was accepted", cases[i].json);
        ck_assert_msg(why && strstr(why, cases[i].field), "%s: %s", cases[i].json,
                      why ? why : "(none)");
    }
}
END_TEST

/* "name must be valid UTF-8" holds for the null value that removes it too. */
START_TEST(test_builder_set_refuses_an_invalid_utf8_name_with_a_null_value)
{
    ld_context_builder *b = ld_context_builder_new("org", "k");
    ck_assert_int_eq(ld_context_builder_set(b, "\xff", json_null()), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "a\xc3", json_null()), LD_EINVAL);
    ld_context *c = ld_context_builder_build(b, NULL);
    ck_assert_ptr_nonnull(c);
    ld_context_unref(c);
    ld_context_builder_free(b);
}
END_TEST

/* eval-spec 1.2: "kind": null is no kind (an old-style user), as in Node. */
START_TEST(test_null_kind_is_an_old_style_user)
{
    ld_context *c = ok("{\"kind\": null, \"key\": \"\", \"email\": \"e\", "
                       "\"custom\": {\"c\": 1}, \"privateAttributeNames\": [\"/c\"]}");
    ck_assert_str_eq(ld_context_kind(c, 0), "user");
    ck_assert_str_eq(ld_context_key(c, NULL), "");
    ck_assert_str_eq(json_string_value(ld_context_get(c, NULL, "email")), "e");
    ck_assert_int_eq(json_integer_value(ld_context_get(c, NULL, "c")), 1);
    ck_assert_str_eq(ld_context_private(c, NULL, 0), "/~1c");
    ld_context_unref(c);
}
END_TEST

/* eval-spec 1.1/1.2: in a multi-kind context the property name is the kind;
 * a "kind" inside a part that says otherwise (a nested "multi" included) is
 * invalid. The same kind repeated is fine. */
START_TEST(test_multi_part_with_another_kind_inside_is_invalid)
{
    static const char *const bad[] = {
        "{\"kind\": \"multi\", \"org\": {\"kind\": \"user\", \"key\": \"o\"}}",
        "{\"kind\": \"multi\", \"org\": {\"kind\": \"multi\", \"key\": \"o\"}, "
        "\"user\": {\"key\": \"u\"}}",
        "{\"kind\": \"multi\", \"org\": {\"kind\": \"multi\", \"user\": {\"key\": \"u\"}, "
        "\"key\": \"o\"}}",
        "{\"kind\": \"multi\", \"org\": {\"kind\": 1, \"key\": \"o\"}}",
        "{\"kind\": \"multi\", \"org\": {\"kind\": null, \"key\": \"o\"}}",
        "{\"kind\": \"multi\", \"org\": {\"kind\": \"org\\u0000\", \"key\": \"o\"}}",
        "{\"kind\": \"multi\", \"org\": {\"kind\": \"Org\", \"key\": \"o\"}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *why = NULL;
        ld_context *c = parse(bad[i], &why);
        ck_assert_msg(c == NULL, "%s was accepted", bad[i]);
        ck_assert_msg(why && strstr(why, "\"kind\""), "%s: %s", bad[i], why ? why : "(none)");
    }
    ld_context *c = ok("{\"kind\": \"multi\", \"org\": {\"kind\": \"org\", \"key\": \"o\"}, "
                       "\"user\": {\"key\": \"u\"}}");
    ck_assert_str_eq(ld_context_fully_qualified_key(c), "org:o:user:u");
    ld_context_unref(c);
}
END_TEST

/* ---- randomized round trip ------------------------------------------- */

static unsigned long g_rnd;

static unsigned rnd(unsigned n)
{
    g_rnd = g_rnd * 6364136223846793005UL + 1442695040888963407UL;
    return (unsigned)((g_rnd >> 33) % n);
}

/* Strings with the characters that matter: escapes of canonical keys and
 * references, non-ASCII, and (when `nul`) NUL. */
static json_t *rnd_string(bool nul, bool nonempty)
{
    static const char *const bits[] = {"a",  "Z",        ":", "%",    "~",  "/",   "~0",
                                       "~1", "\xc3\xa9", " ", "kind", "3A", "\x01"};
    char buf[64];
    size_t len = 0;
    unsigned n = rnd(6) + (nonempty ? 1 : 0);
    for (unsigned i = 0; i < n; i++) {
        if (nul && rnd(8) == 0) {
            buf[len++] = '\0';
            continue;
        }
        const char *b = bits[rnd(sizeof bits / sizeof bits[0])];
        memcpy(buf + len, b, strlen(b));
        len += strlen(b);
    }
    return json_stringn(buf, len);
}

static json_t *rnd_value(int depth)
{
    switch (rnd(depth > 2 ? 6 : 8)) {
    case 0:
        return json_null();
    case 1:
        return json_boolean(rnd(2));
    case 2:
        return json_integer((json_int_t)rnd(1000) - 500);
    case 3:
        return json_real(rnd(1000) / 8.0);
    case 4:
    case 5:
        return rnd_string(true, false);
    case 6: {
        json_t *a = json_array();
        for (unsigned i = rnd(4); i > 0; i--)
            json_array_append_new(a, rnd_value(depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (unsigned i = rnd(4); i > 0; i--) {
            json_t *k = rnd_string(true, false);
            json_object_setn_new(o, json_string_value(k), json_string_length(k),
                                 rnd_value(depth + 1));
            json_decref(k);
        }
        return o;
    }
    }
}

/* Random attributes (names never the reserved ones) into `o`. */
static void rnd_attrs(json_t *o, const char *const *reserved, size_t nreserved)
{
    for (unsigned i = rnd(5); i > 0; i--) {
        json_t *k = rnd_string(true, false);
        bool skip = false;
        for (size_t r = 0; r < nreserved; r++)
            skip |= strlen(reserved[r]) == json_string_length(k) &&
                    memcmp(reserved[r], json_string_value(k), json_string_length(k)) == 0;
        if (!skip)
            json_object_setn_new(o, json_string_value(k), json_string_length(k), rnd_value(0));
        json_decref(k);
    }
    if (rnd(3) == 0)
        json_object_set_new(o, "name", rnd(4) ? rnd_string(true, false) : json_null());
}

static json_t *rnd_private(void)
{
    json_t *a = json_array();
    for (unsigned i = rnd(4); i > 0; i--)
        json_array_append_new(a, rnd_string(false, false));
    return a;
}

static const char *const KINDS[] = {"user", "org", "a.b_c-D9", "Device", "x", "_", "9"};
static const char *const RESERVED[] = {"kind", "key", "anonymous", "_meta", "name"};

static json_t *rnd_single(bool with_kind, const char *kind)
{
    json_t *o = json_object();
    if (with_kind)
        json_object_set_new(o, "kind", json_string(kind));
    json_object_set_new(o, "key", rnd_string(false, true));
    rnd_attrs(o, RESERVED, 5);
    if (rnd(3) == 0)
        json_object_set_new(o, "anonymous", rnd(3) ? json_boolean(rnd(2)) : json_null());
    if (rnd(2))
        json_object_set_new(o, "_meta", json_pack("{s:o}", "privateAttributes", rnd_private()));
    return o;
}

static json_t *rnd_context_json(void)
{
    switch (rnd(3)) {
    case 0:
        return rnd_single(true, KINDS[rnd(7)]);
    case 1: {
        json_t *m = json_pack("{s:s}", "kind", "multi");
        for (unsigned i = rnd(4) + 1; i > 0; i--) {
            const char *k = KINDS[rnd(7)];
            json_object_set_new(m, k, rnd_single(rnd(4) == 0, k));
        }
        return m;
    }
    default: {
        static const char *const builtins[] = {"name",    "firstName", "lastName", "email",
                                               "country", "ip",        "avatar",   "secondary"};
        json_t *u = json_object();
        json_object_set_new(u, "key", rnd_string(false, false)); /* may be empty */
        for (size_t i = 0; i < 8; i++)
            if (rnd(3) == 0)
                json_object_set_new(u, builtins[i], rnd(4) ? rnd_string(true, false) : json_null());
        if (rnd(2)) {
            json_t *custom = json_object();
            rnd_attrs(custom, NULL, 0);
            json_object_set_new(u, "custom", custom);
        }
        if (rnd(3) == 0)
            json_object_set_new(u, "anonymous", json_boolean(rnd(2)));
        if (rnd(2))
            json_object_set_new(u, "privateAttributeNames", rnd_private());
        return u;
    }
    }
}

/* json_equal(), with object keys compared with their length (jansson's
 * looks them up as C strings: an object with "a\0b" is not equal to
 * itself). */
static bool same_json(const json_t *a, const json_t *b)
{
    if (json_is_object(a) && json_is_object(b)) {
        if (json_object_size(a) != json_object_size(b))
            return false;
        const char *k;
        size_t len;
        json_t *v;
        json_object_keylen_foreach((json_t *)a, k, len, v)
        {
            if (!same_json(v, json_object_getn(b, k, len)))
                return false;
        }
        return true;
    }
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!same_json(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    }
    return json_equal(a, b);
}

/* Everything the accessors show, and the JSON form, are the same. */
static void assert_same_context(const ld_context *a, const ld_context *b, const char *text)
{
    ck_assert_msg(ld_context_kind_count(a) == ld_context_kind_count(b), "%s", text);
    ck_assert_msg(strcmp(ld_context_fully_qualified_key(a), ld_context_fully_qualified_key(b)) == 0,
                  "%s: %s vs %s", text, ld_context_fully_qualified_key(a),
                  ld_context_fully_qualified_key(b));
    for (size_t i = 0; i < ld_context_kind_count(a); i++) {
        const char *k = ld_context_kind(a, i);
        ck_assert_str_eq(k, ld_context_kind(b, i));
        ck_assert_str_eq(ld_context_key(a, k), ld_context_key(b, k));
        ck_assert(ld_context_anonymous(a, k) == ld_context_anonymous(b, k));
        ck_assert(json_equal(ld_context_get(a, k, "anonymous"), ld_context_get(b, k, "anonymous")));
        ck_assert_uint_eq(ld_context_private_count(a, k), ld_context_private_count(b, k));
        for (size_t p = 0; p < ld_context_private_count(a, k); p++)
            ck_assert_str_eq(ld_context_private(a, k, p), ld_context_private(b, k, p));
    }
    json_t *ja = ld_context_to_json(a), *jb = ld_context_to_json(b);
    if (!same_json(ja, jb)) {
        char *ta = json_dumps(ja, JSON_SORT_KEYS), *tb = json_dumps(jb, JSON_SORT_KEYS);
        ck_abort_msg("%s: to_json differs: %s vs %s", text, ta, tb);
    }
    json_decref(ja);
    json_decref(jb);
}

/* from_json(to_json(c)) is c, for random contexts parsed, built and joined. */
START_TEST(test_random_contexts_round_trip_through_json)
{
    g_rnd = 20261201;
    ld_context *prev = NULL;
    for (int n = 0; n < 3000; n++) {
        json_t *j = rnd_context_json();
        char *text = json_dumps(j, JSON_SORT_KEYS | JSON_ENCODE_ANY);
        const char *why = NULL;
        ld_context *c = ld_context_from_json(j, &why);
        ck_assert_msg(c != NULL, "%s refused: %s", text, why);
        /* every non-null attribute given is there, as given */
        const char *name;
        size_t len;
        json_t *v;
        if (!json_object_get(j, "custom") && !json_object_get(j, "privateAttributeNames") &&
            json_is_string(json_object_get(j, "kind")) &&
            strcmp(json_string_value(json_object_get(j, "kind")), "multi") != 0) {
            json_object_keylen_foreach(j, name, len, v)
            {
                if (!len || strlen(name) != len || json_is_null(v) || strcmp(name, "_meta") == 0 ||
                    strcmp(name, "anonymous") == 0)
                    continue;
                ck_assert_msg(same_json(ld_context_get_literal(c, ld_context_kind(c, 0), name), v),
                              "%s: attribute %s", text, name);
            }
        }
        json_t *out = ld_context_to_json(c);
        ld_context *again = ld_context_from_json(out, &why);
        char *outtext = json_dumps(out, JSON_SORT_KEYS);
        ck_assert_msg(again != NULL, "%s -> %s refused: %s", text, outtext, why);
        assert_same_context(c, again, text);
        /* the same through the builder, and joined with the previous one */
        if (!ld_context_is_multi(c) && *ld_context_key(c, ld_context_kind(c, 0))) {
            const char *k = ld_context_kind(c, 0);
            ld_context_builder *b = ld_context_builder_new(k, ld_context_key(c, k));
            json_t *one = json_object_get(out, "kind") ? out : NULL;
            json_object_keylen_foreach(one, name, len, v)
            {
                if (len && strlen(name) == len && strcmp(name, "kind") && strcmp(name, "key") &&
                    strcmp(name, "_meta"))
                    ck_assert_int_eq(ld_context_builder_set(b, name, json_incref(v)), 0);
            }
            for (size_t p = 0; p < ld_context_private_count(c, k); p++)
                ck_assert_int_eq(ld_context_builder_private(b, ld_context_private(c, k, p)), 0);
            ld_context *built = ld_context_builder_build(b, &why);
            ld_context_builder_free(b);
            ck_assert_msg(built != NULL, "%s: %s", text, why);
            bool nul_name = false;
            json_object_keylen_foreach(one, name, len, v) nul_name |= strlen(name) != len || !len;
            if (!nul_name) /* the builder makes no name "" or with a NUL */
                assert_same_context(c, built, text);
            if (prev) {
                const ld_context *parts[] = {prev, built};
                ld_context *m = ld_context_multi(parts, 2, &why);
                if (m) {
                    json_t *mj = ld_context_to_json(m);
                    ld_context *m2 = ld_context_from_json(mj, &why);
                    ck_assert_msg(m2 != NULL, "%s: multi refused: %s", text, why);
                    assert_same_context(m, m2, text);
                    ld_context_unref(m2);
                    json_decref(mj);
                    ld_context_unref(m);
                } else {
                    ck_assert_msg(strstr(why, "same kind"), "%s: %s", text, why);
                }
            }
            ld_context_unref(prev);
            prev = built;
        }
        free(outtext);
        json_decref(out);
        ld_context_unref(again);
        ld_context_unref(c);
        free(text);
        json_decref(j);
    }
    ld_context_unref(prev);
}
END_TEST

/* ---- promises of context.h ------------------------------------------- */

START_TEST(test_builder_copies_kind_key_and_private_references)
{
    char kind[] = "org", key[] = "k1", ref[] = "/a";
    ld_context_builder *b = ld_context_builder_new(kind, key);
    ck_assert_int_eq(ld_context_builder_private(b, ref), 0);
    memset(kind, 'x', 3);
    memset(key, 'y', 2);
    memset(ref, 'z', 2);
    ld_context *c = ld_context_builder_build(b, NULL);
    ld_context_builder_free(b);
    ck_assert_str_eq(ld_context_kind(c, 0), "org");
    ck_assert_str_eq(ld_context_key(c, "org"), "k1");
    ck_assert_str_eq(ld_context_private(c, "org", 0), "/a");
    ck_assert_uint_eq(ld_context_private_count(c, "user"), 0);
    ck_assert_ptr_null(ld_context_private(c, "user", 0));
    ck_assert_ptr_null(ld_context_private(c, "org", 1));
    ld_context_unref(c);
}
END_TEST

/* A failed set (LD_EINVAL) changes nothing; the builder builds again and
 * again; values are stolen on every path (LeakSanitizer and valgrind see a
 * leak or a double free). */
START_TEST(test_builder_steals_values_on_every_path)
{
    ld_context_builder *b = ld_context_builder_new("org", "k");
    ck_assert_int_eq(ld_context_builder_set(b, "kind", json_pack("{s:i}", "a", 1)), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "key", json_pack("[i]", 1)), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "_meta", json_pack("{s:[]}", "privateAttributes")),
                     LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "anonymous", json_pack("[]")), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "anonymous", json_null()), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "name", json_pack("{}")), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "\xc3", json_pack("{}")), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "", json_string("x")), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(NULL, "a", json_string("x")), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, NULL, json_string("x")), LD_EINVAL);
    ck_assert_int_eq(ld_context_builder_set(b, "anonymous", json_true()), 0);
    ck_assert_int_eq(ld_context_builder_set(b, "a", json_pack("{s:[i]}", "b", 1)), 0);
    ck_assert_int_eq(ld_context_builder_set(b, "a", json_pack("{s:[i]}", "b", 2)),
                     0); /* replaces */
    ck_assert_int_eq(ld_context_builder_set(b, "name", json_string("N")), 0);
    ck_assert_int_eq(ld_context_builder_set(b, "name", json_null()), 0);
    ck_assert_int_eq(ld_context_builder_set(b, "gone", json_null()), 0);
    ck_assert_int_eq(ld_context_builder_private(b, ""), 0); /* not checked: kept as given */
    ld_context *c1 = ld_context_builder_build(b, NULL);
    ld_context *c2 = ld_context_builder_build(b, NULL);
    ck_assert_ptr_nonnull(c1);
    ck_assert_ptr_ne(c1, c2);
    ck_assert_ptr_eq(ld_context_get(c1, "org", "a"), ld_context_get(c2, "org", "a")); /* shared */
    ck_assert_int_eq(json_integer_value(ld_context_get(c1, "org", "/a/b")), 0);       /* array */
    ck_assert(ld_context_anonymous(c1, "org"));
    ck_assert_ptr_null(ld_context_get(c1, "org", "name"));
    ck_assert_uint_eq(ld_context_private_count(c1, "org"), 1);
    ck_assert_int_eq(ld_context_builder_set(b, "a", json_null()), 0);
    ld_context_builder_free(b);
    ck_assert(json_is_array(ld_context_get(c1, "org", "/a/b"))); /* outlives the builder */
    json_t *j = ld_context_to_json(c2);
    ld_context *again = ld_context_from_json(j, NULL);
    ck_assert_ptr_nonnull(again);
    ck_assert_str_eq(ld_context_private(again, "org", 0), "");
    ld_context_unref(again);
    json_decref(j);
    ld_context_unref(c1);
    ld_context_unref(c2);
}
END_TEST

/* Components of 127, 128 and 129 bytes (the stack buffer holds 127), with
 * escapes across the boundary. */
START_TEST(test_reference_components_around_the_buffer_size)
{
    for (size_t n = 120; n < 136; n++) {
        char name[200], ref[400];
        memset(name, 'a', n);
        name[n] = '\0';
        name[n - 1] = '/';
        name[n / 2] = '~';
        json_t *j = json_pack("{s:s, s:s, s:{s:i}}", "kind", "org", "key", "k", "o", name, (int)n);
        ld_context *c = ld_context_from_json(j, NULL);
        json_decref(j);
        ck_assert_ptr_nonnull(c);
        /* "/o/" + name with '~' -> "~0", '/' -> "~1" */
        char *r = ref + snprintf(ref, sizeof ref, "/o/");
        for (size_t i = 0; i < n; i++) {
            if (name[i] == '~' || name[i] == '/') {
                *r++ = '~';
                *r++ = name[i] == '~' ? '0' : '1';
            } else {
                *r++ = name[i];
            }
        }
        *r = '\0';
        ck_assert_msg(json_integer_value(ld_context_get(c, "org", ref)) == (json_int_t)n, "n=%zu",
                      n);
        r[-1] = '~'; /* "~" at the end: invalid */
        ck_assert_ptr_null(ld_context_get(c, "org", ref));
        strcat(ref, "2"); /* "~2" */
        ck_assert_ptr_null(ld_context_get(c, "org", ref));
        ld_context_unref(c);
    }
}
END_TEST

/* References as LaunchDarkly reads them: slashes and escapes in plain
 * names are literal; "/" paths only walk objects. */
START_TEST(test_odd_attribute_references)
{
    ld_context *c = ok("{\"kind\": \"org\", \"key\": \"k\", \"~2\": 1, \"~1\": 2, \"/\": 3, "
                       "\"a\": {\"0\": \"zero\", \"\": 4}, \"arr\": [5, 6], \"_meta\": null}");
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "~2")), 1);   /* plain */
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "~1")), 2);   /* plain */
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "/~01")), 2); /* "~1" */
    ck_assert_int_eq(json_integer_value(ld_context_get(c, "org", "/~1")), 3);
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "/a/0")), "zero"); /* a name */
    ck_assert_ptr_null(ld_context_get(c, "org", "/arr/0"));
    ck_assert_ptr_null(ld_context_get(c, "org", "/arr/1"));
    ck_assert_ptr_null(ld_context_get(c, "org", "/a/"));
    ck_assert_ptr_null(ld_context_get(c, "org", "/_meta"));
    ck_assert_ptr_null(ld_context_get(c, "org", "_meta"));
    ck_assert_ptr_null(ld_context_get(c, "org", "/anonymous/x"));
    ck_assert(json_is_false(ld_context_get(c, "org", "/anonymous")));
    ck_assert_str_eq(json_string_value(ld_context_get(c, "org", "/kind")), "org");
    ck_assert_ptr_null(ld_context_get(c, "org", "/kind/"));
    ck_assert_ptr_null(ld_context_get(c, "org", "//"));
    ck_assert_ptr_null(ld_context_get(c, "org", "/~"));
    ck_assert_ptr_null(ld_context_get_literal(c, "org", "_meta"));
    ck_assert_int_eq(json_integer_value(ld_context_get_literal(c, "org", "/")), 3);
    ld_context_unref(c);
}
END_TEST

/* Huge keys and kinds, many kinds: canonical keys are exact. */
START_TEST(test_huge_keys_and_many_kinds)
{
    size_t n = 100000;
    char *key = malloc(n + 1), *want = malloc(3 * n + 16);
    for (size_t i = 0; i < n; i++)
        key[i] = i % 3 == 0 ? ':' : i % 3 == 1 ? '%' : 'k';
    key[n] = '\0';
    char *w = want + sprintf(want, "org:");
    for (size_t i = 0; i < n; i++)
        w += sprintf(w, "%s", key[i] == ':' ? "%3A" : key[i] == '%' ? "%25" : "k");
    json_t *m = json_pack("{s:s}", "kind", "multi");
    char kind[8];
    for (int i = 0; i < 200; i++) {
        snprintf(kind, sizeof kind, "k%03d", 199 - i);
        json_object_set_new(m, kind, json_pack("{s:s}", "key", "v"));
    }
    json_object_set_new(m, "org", json_pack("{s:s}", "key", key));
    ld_context *c = ld_context_from_json(m, NULL);
    json_decref(m);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(ld_context_kind_count(c), 201);
    ck_assert_str_eq(ld_context_kind(c, 0), "k000");
    ck_assert_str_eq(ld_context_kind(c, 199), "k199");
    const char *fq = ld_context_fully_qualified_key(c);
    ck_assert_uint_eq(strlen(fq), 200 * strlen("k000:v:") + strlen(want));
    ck_assert(strcmp(fq + 200 * strlen("k000:v:"), want) == 0);
    ld_context_unref(c);
    free(key);
    free(want);
}
END_TEST

/* The name of kind `i` of kinds_context(): lengths 1 to 6, so that some
 * are prefixes of others ("a", "ab", ...), and letters, digits, '.', '_'
 * and '-'. */
static void kind_name(char *out, size_t size, int i)
{
    static const char chars[] = "ab.Z_-9";
    char *o = out;
    int len = 1 + i % 6;
    for (int v = i / 6, k = 0; k < len && (size_t)(o - out) + 1 < size; k++, v /= 7)
        *o++ = chars[k == 0 ? (i / 6) % 7 : v % 7];
    snprintf(o, size - (size_t)(o - out), "%d", i);
}

/* A multi-kind context of `n` kinds whose key is the kind's number, added in
 * an order set by `seed` (through JSON, or by ld_context_multi() of built
 * contexts when `built`). */
static ld_context *kinds_context(int n, unsigned seed, bool built)
{
    int *order = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        seed = seed * 1103515245u + 12345u;
        int j = (int)((seed >> 8) % (unsigned)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    char kind[32], key[32];
    ld_context *c;
    if (built) {
        ld_context **parts = malloc(sizeof(ld_context *) * (size_t)n);
        for (int i = 0; i < n; i++) {
            kind_name(kind, sizeof kind, order[i]);
            snprintf(key, sizeof key, "%d", order[i]);
            parts[i] = build(kind, key);
        }
        c = ld_context_multi((const ld_context *const *)parts, (size_t)n, NULL);
        for (int i = 0; i < n; i++)
            ld_context_unref(parts[i]);
        free(parts);
    } else {
        json_t *m = json_pack("{s:s}", "kind", "multi");
        for (int i = 0; i < n; i++) {
            kind_name(kind, sizeof kind, order[i]);
            snprintf(key, sizeof key, "%d", order[i]);
            json_object_set_new(m, kind, json_pack("{s:s}", "key", key));
        }
        c = ld_context_from_json(m, NULL);
        json_decref(m);
    }
    free(order);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(ld_context_kind_count(c), (size_t)n);
    return c;
}

/* Every kind of a context of many kinds is found, whatever the order its
 * kinds came in and however many there are (a few, or thousands: the
 * lookup changes form past a few), and no other kind is. */
START_TEST(test_many_kinds_are_each_found)
{
    static const int sizes[] = {2, 3, 8, 9, 10, 17, 64, 3001};
    char kind[40], key[32];
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        for (unsigned seed = 0; seed < 3; seed++) {
            ld_context *c = kinds_context(n, seed, seed == 2);
            for (int i = 0; i < n; i++) {
                kind_name(kind, sizeof kind, i);
                snprintf(key, sizeof key, "%d", i);
                const char *got = ld_context_key(c, kind);
                ck_assert_msg(got && strcmp(got, key) == 0, "%d kinds, seed %u: kind %s has %s", n,
                              seed, kind, got ? got : "(none)");
                ck_assert_str_eq(json_string_value(ld_context_get(c, kind, "kind")), kind);
                /* a kind's prefixes and extensions that are not kinds */
                size_t len = strlen(kind);
                strcat(kind, "x");
                ck_assert_ptr_null(ld_context_key(c, kind));
                kind[len - 1] = '\0';
                if (n <= 64) {
                    bool is_kind = false; /* "ab11" cut to "ab1" may be a kind */
                    for (int j = 0; j < n && !is_kind; j++) {
                        char other[40];
                        kind_name(other, sizeof other, j);
                        is_kind = strcmp(other, kind) == 0;
                    }
                    ck_assert(is_kind == (ld_context_key(c, kind) != NULL));
                }
            }
            ck_assert_ptr_null(ld_context_key(c, "user"));
            ck_assert_ptr_null(ld_context_key(c, "zzz"));
            ck_assert_ptr_null(ld_context_key(c, NULL)); /* "user" */
            ck_assert(!ld_context_anonymous(c, "missing"));
            ld_context_unref(c);
        }
    }
}
END_TEST

/* Threads that each hold a reference read, convert and join the same
 * contexts at once, and drop their references in any order (TSan build). */
struct reader_arg {
    ld_context *m, *org, *user;
    bool bad;
};

static void *reader(void *p)
{
    struct reader_arg *a = p;
    for (int i = 0; i < 300; i++) {
        if (strcmp(ld_context_fully_qualified_key(a->m), "org:o:user:u%3A1") != 0 ||
            json_integer_value(ld_context_get(a->m, "org", "/a/b")) != 1 ||
            !json_is_true(ld_context_get(a->m, "user", "anonymous")))
            a->bad = true;
        json_t *j = ld_context_to_json(a->m);
        ld_context *back = ld_context_from_json(j, NULL);
        const ld_context *parts[] = {a->user, a->org};
        ld_context *m2 = ld_context_multi(parts, 2, NULL);
        if (!back || !m2 ||
            strcmp(ld_context_fully_qualified_key(back), ld_context_fully_qualified_key(m2)) != 0)
            a->bad = true;
        ld_context_unref(m2);
        ld_context_unref(back);
        json_decref(j);
    }
    ld_context_unref(a->m);
    ld_context_unref(a->org);
    ld_context_unref(a->user);
    return NULL;
}

START_TEST(test_contexts_are_read_by_many_threads_at_once)
{
    ld_context *org = ok("{\"kind\": \"org\", \"key\": \"o\", \"a\": {\"b\": 1}}");
    ld_context *user = ok("{\"key\": \"u:1\", \"anonymous\": true}");
    const ld_context *parts[] = {org, user};
    ld_context *m = ld_context_multi(parts, 2, NULL);
    ck_assert_ptr_nonnull(m);
    pthread_t t[4];
    struct reader_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct reader_arg){ld_context_ref(m), ld_context_ref(org), ld_context_ref(user),
                                      false};
        ck_assert_int_eq(pthread_create(&t[i], NULL, reader, &args[i]), 0);
    }
    ld_context_unref(m); /* the last references are the threads' */
    ld_context_unref(org);
    ld_context_unref(user);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        ck_assert(!args[i].bad);
    }
}
END_TEST

Suite *ld_suite_context(void)
{
    Suite *s = suite_create("context");
    TCase *tc = tcase_create("contexts");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_invalid_contexts_name_the_field);
    tcase_add_test(tc, test_non_objects_and_null_are_invalid);
    tcase_add_test(tc, test_multi_kind_names_with_nul_are_invalid);
    tcase_add_test(tc, test_attribute_names_with_nul_keep_their_length);
    tcase_add_test(tc, test_kinds_allow_letters_digits_dot_underscore_dash);
    tcase_add_test(tc, test_single_kind_context_attributes);
    tcase_add_test(tc, test_null_name_and_anonymous_are_absent);
    tcase_add_test(tc, test_old_style_user);
    tcase_add_test(tc, test_old_style_user_may_have_an_empty_key);
    tcase_add_test(tc, test_old_style_custom_name_must_be_a_string_to_count);
    tcase_add_test(tc, test_multi_kind_context);
    tcase_add_test(tc, test_multi_with_one_kind_is_that_single_context);
    tcase_add_test(tc, test_fully_qualified_keys_escape_colon_and_percent);
    tcase_add_test(tc, test_attribute_references_walk_objects_and_unescape);
    tcase_add_test(tc, test_invalid_attribute_references_find_nothing);
    tcase_add_test(tc, test_long_escaped_reference_components);
    tcase_add_test(tc, test_literal_lookup_does_not_parse_references);
    tcase_add_test(tc, test_to_json_round_trips);
    tcase_add_test(tc, test_context_keeps_no_reference_to_its_json);
    tcase_add_test(tc, test_builder_builds_a_context);
    tcase_add_test(tc, test_builder_set_of_a_null_value_fails_the_build);
    tcase_add_test(tc, test_builder_default_kind_is_user);
    tcase_add_test(tc, test_builder_refuses_invalid_input);
    tcase_add_test(tc, test_multi_from_parts);
    tcase_add_test(tc, test_reference_counting_across_threads);
    tcase_add_test(tc, test_accessors_are_null_safe);
    tcase_add_test(tc, test_to_json_shares_no_string_with_the_context);
    tcase_add_test(tc, test_old_style_user_with_an_empty_key_round_trips);
    tcase_add_test(tc, test_multi_refuses_a_part_with_an_empty_key);
    tcase_add_test(tc, test_private_references_with_nul_are_invalid);
    tcase_add_test(tc, test_builder_set_refuses_an_invalid_utf8_name_with_a_null_value);
    tcase_add_test(tc, test_null_kind_is_an_old_style_user);
    tcase_add_test(tc, test_multi_part_with_another_kind_inside_is_invalid);
    tcase_add_test(tc, test_random_contexts_round_trip_through_json);
    tcase_add_test(tc, test_builder_copies_kind_key_and_private_references);
    tcase_add_test(tc, test_builder_steals_values_on_every_path);
    tcase_add_test(tc, test_reference_components_around_the_buffer_size);
    tcase_add_test(tc, test_odd_attribute_references);
    tcase_add_test(tc, test_huge_keys_and_many_kinds);
    tcase_add_test(tc, test_many_kinds_are_each_found);
    tcase_add_test(tc, test_contexts_are_read_by_many_threads_at_once);
    suite_add_tcase(s, tc);
    return s;
}
