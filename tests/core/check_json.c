/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* Reading JSON text (ldasync/json.h): integers beyond json_int_t are read
 * as reals, everything else as jansson reads it. */
#include <stdlib.h>
#include <string.h>

#include <ldasync/json.h>

#include "check_suites.h"
#include "check_util.h"

/* Gives the text `step` bytes at a time (0: all it can). */
struct src {
    const char *text;
    size_t len, pos, step;
    int fail_at; /* calls before a read error (0: none) */
};

static size_t src_cb(void *buffer, size_t buflen, void *data)
{
    struct src *s = data;
    if (s->fail_at && --s->fail_at == 0)
        return (size_t)-1;
    size_t n = s->len - s->pos;
    if (n > buflen)
        n = buflen;
    if (s->step && n > s->step)
        n = s->step;
    memcpy(buffer, s->text + s->pos, n);
    s->pos += n;
    return n;
}

/* `text` read every way (ld_json_loadb, ld_json_load_callback whole and a
 * byte at a time) equals `want` (JSON text read by jansson, with reals and
 * integers where they should be), types included. */
static void expect_read(const char *text, const char *want_text)
{
    json_t *want = json_loads(want_text, JSON_DECODE_ANY, NULL);
    ck_assert_ptr_nonnull(want);
    for (int way = 0; way < 3; way++) {
        json_error_t err;
        struct src s = {text, strlen(text), 0, way == 2 ? 1 : 0, 0};
        json_t *got = way == 0 ? ld_json_loadb(text, strlen(text), JSON_DECODE_ANY, &err)
                               : ld_json_load_callback(src_cb, &s, JSON_DECODE_ANY, &err);
        ck_assert_msg(got != NULL, "%s (way %d): %s", text, way, err.text);
        char *a = json_dumps(got, JSON_ENCODE_ANY), *b = json_dumps(want, JSON_ENCODE_ANY);
        ck_assert_msg(json_equal(got, want) && strcmp(a, b) == 0, "%s (way %d): %s, want %s", text,
                      way, a, b);
        free(a);
        free(b);
        json_decref(got);
    }
    json_decref(want);
}

START_TEST(test_integers_beyond_int64_are_reals)
{
    expect_read("10000000000000000000", "1e19");
    expect_read("-10000000000000000000", "-1e19");
    expect_read("9223372036854775808", "9223372036854775808.0");
    expect_read("-9223372036854775809", "-9223372036854775809.0");
    expect_read("123456789012345678901234567890", "1.2345678901234568e29");
    expect_read("{\"version\": 3, \"big\": 10000000000000000000, \"v\": [1, 2.5, -7]}",
                "{\"version\": 3, \"big\": 1e19, \"v\": [1, 2.5, -7]}");
    expect_read("[18446744073709551616,1]", "[1.8446744073709552e19,1]");
    expect_read("{\"a\":10000000000000000000}", "{\"a\":1e19}");
}
END_TEST

START_TEST(test_everything_else_is_read_as_jansson_reads_it)
{
    /* the bounds of json_int_t stay integers */
    expect_read("9223372036854775807", "9223372036854775807");
    expect_read("-9223372036854775808", "-9223372036854775808");
    expect_read("[0, -0, 1, 1.0, 2e3, 1.5E+2, 1e-2, 0.5]",
                "[0, -0, 1, 1.0, 2e3, 1.5E+2, 1e-2, 0.5]");
    /* digits in strings are text, escapes included; big exponents and
     * fractions are reals already */
    expect_read("[\"10000000000000000000\", \"\\\"10000000000000000000\", \"\\\\\", 5]",
                "[\"10000000000000000000\", \"\\\"10000000000000000000\", \"\\\\\", 5]");
    expect_read("[1.10000000000000000000, 1e100, 10000000000000000000.5]",
                "[1.1, 1e100, 10000000000000000000.5]");
}
END_TEST

static void expect_error(const char *text, const char *want)
{
    for (int way = 0; way < 2; way++) {
        json_error_t err;
        struct src s = {text, strlen(text), 0, 1, 0};
        json_t *got = way == 0 ? ld_json_loadb(text, strlen(text), 0, &err)
                               : ld_json_load_callback(src_cb, &s, 0, &err);
        ck_assert_msg(got == NULL, "%s (way %d) was read", text, way);
        ck_assert_msg(strstr(err.text, want) != NULL, "%s (way %d): %s, want %s", text, way,
                      err.text, want);
    }
}

START_TEST(test_bad_text_is_refused_as_jansson_refuses_it)
{
    expect_error("[00000000000000000000000]", "invalid token");
    expect_error("[1e99999]", "real number overflow");
    expect_error("[10000000000000000000", "']' expected");
    expect_error("[10000000000000000000,]", "unexpected token");
    expect_error("[-]", "invalid token");
    expect_error("", "'[' or '{' expected");
    expect_error("10000000000000000000", "'[' or '{' expected"); /* no JSON_DECODE_ANY */
    /* NULL arguments, a read error */
    json_error_t err;
    ck_assert_ptr_null(ld_json_loadb(NULL, 3, 0, &err));
    ck_assert_int_eq(json_error_code(&err), json_error_invalid_argument);
    ck_assert_ptr_null(ld_json_load_callback(NULL, NULL, 0, &err));
    ck_assert_int_eq(json_error_code(&err), json_error_invalid_argument);
    json_t *j = ld_json_loadb("[10000000000000000000]", 22, 0, NULL); /* no error wanted */
    ck_assert(json_is_real(json_array_get(j, 0)));
    json_decref(j);
    struct src s = {"[1, 2, 3]", 9, 0, 2, 2};
    ck_assert_ptr_null(ld_json_load_callback(src_cb, &s, 0, &err)); /* jansson: an end */
    ck_assert_int_eq(json_error_code(&err), json_error_premature_end_of_input);
}
END_TEST

START_TEST(test_a_read_error_after_the_whole_text_loads_as_jansson_does)
{
    /* json.h: a read error is taken as the end, "the load fails ... unless
     * the text read is whole"; jansson loads these. The text already given
     * in the same call as the error must not be dropped. */
    const char *texts[] = {"[12345]", "[10000000000000000000]", "{\"a\": -10000000000000000000}"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        for (size_t step = 0; step < 3; step++) {
            size_t len = strlen(texts[i]);
            /* the error comes at the first call after the whole text */
            int calls = step ? (int)((len + step - 1) / step) + 1 : 2;
            struct src s = {texts[i], len, 0, step, calls};
            json_error_t err;
            json_t *j = ld_json_load_callback(src_cb, &s, 0, &err);
            ck_assert_msg(j != NULL, "%s (step %zu): %s", texts[i], step, err.text);
            json_decref(j);
        }
    }
}
END_TEST

Suite *ld_suite_json(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, test_integers_beyond_int64_are_reals);
    tcase_add_test(tc, test_everything_else_is_read_as_jansson_reads_it);
    tcase_add_test(tc, test_bad_text_is_refused_as_jansson_refuses_it);
    tcase_add_test(tc, test_a_read_error_after_the_whole_text_loads_as_jansson_does);
    suite_add_tcase(s, tc);
    return s;
}
