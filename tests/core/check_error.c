/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* check_error.c: the error table, ld_strerror() and ld_err_name(). */
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include <ldasync/error.h>

#include "check_suites.h"

struct error_entry {
    int code;
    const char *name;
    const char *message;
};

static const struct error_entry table[] = {
#define ENTRY_(name, value, message) {LD_##name, "LD_" #name, message},
    LD_ERRNO_MAP(ENTRY_)
#undef ENTRY_
};

static const size_t table_len = sizeof table / sizeof table[0];

START_TEST(codes_keep_their_documented_values)
{
    /* The values are ABI: programs compiled against an older header rely on them. */
    ck_assert_int_eq(LD_EINVAL, -1);
    ck_assert_int_eq(LD_ENOMEM, -2);
    ck_assert_int_eq(LD_ECANCELED, -3);
    ck_assert_int_eq(LD_ETIMEDOUT, -4);
    ck_assert_int_eq(LD_ECLOSED, -5);
    ck_assert_int_eq(LD_EALREADY, -6);
    ck_assert_int_eq(LD_EBUSY, -7);
    ck_assert_int_eq(LD_ESTORE, -8);
    ck_assert_int_eq(LD_EIO, -9);
    ck_assert_int_eq(LD_EPARSE, -10);
    ck_assert_uint_eq(table_len, 10);
}
END_TEST

START_TEST(every_code_is_negative_and_distinct)
{
    for (size_t i = 0; i < table_len; i++) {
        ck_assert_int_lt(table[i].code, 0);
        for (size_t j = i + 1; j < table_len; j++)
            ck_assert_int_ne(table[i].code, table[j].code);
    }
}
END_TEST

START_TEST(every_code_has_its_own_name)
{
    for (size_t i = 0; i < table_len; i++) {
        const char *name = ld_err_name(table[i].code);
        ck_assert_str_eq(name, table[i].name);
        ck_assert_msg(strncmp(name, "LD_E", 4) == 0, "%s does not start with LD_E", name);
        for (size_t j = i + 1; j < table_len; j++)
            ck_assert_str_ne(name, ld_err_name(table[j].code));
    }
}
END_TEST

START_TEST(every_code_has_its_own_message)
{
    for (size_t i = 0; i < table_len; i++) {
        const char *message = ld_strerror(table[i].code);
        ck_assert_str_eq(message, table[i].message);
        ck_assert_uint_gt(strlen(message), 0);
        ck_assert_str_ne(message, "unknown error");
        ck_assert_str_ne(message, "success");
        for (size_t j = i + 1; j < table_len; j++)
            ck_assert_str_ne(message, ld_strerror(table[j].code));
    }
}
END_TEST

START_TEST(messages_match_the_design)
{
    ck_assert_str_eq(ld_strerror(LD_EINVAL), "invalid argument");
    ck_assert_str_eq(ld_strerror(LD_ENOMEM), "out of memory");
    ck_assert_str_eq(ld_strerror(LD_ECANCELED), "operation canceled");
    ck_assert_str_eq(ld_strerror(LD_ETIMEDOUT), "operation timed out");
    ck_assert_str_eq(ld_strerror(LD_ECLOSED), "component is closed");
    ck_assert_str_eq(ld_strerror(LD_EALREADY), "future already completed");
    ck_assert_str_eq(ld_strerror(LD_EBUSY), "resource busy");
    ck_assert_str_eq(ld_strerror(LD_ESTORE), "store backend failure");
    ck_assert_str_eq(ld_strerror(LD_EIO), "i/o error");
    ck_assert_str_eq(ld_strerror(LD_EPARSE), "malformed data");
}
END_TEST

START_TEST(zero_is_success)
{
    ck_assert_str_eq(ld_strerror(0), "success");
    ck_assert_str_eq(ld_err_name(0), "LD_OK");
}
END_TEST

static const int unknown_codes[] = {1, 2, 42, INT_MAX, -11, -1000, INT_MIN};

START_TEST(unknown_codes_have_a_placeholder)
{
    int code = unknown_codes[_i];
    ck_assert_str_eq(ld_strerror(code), "unknown error");
    ck_assert_str_eq(ld_err_name(code), "LD_EUNKNOWN");
}
END_TEST

START_TEST(strings_are_static)
{
    /* The same pointer on every call: nothing is allocated, nothing to free. */
    ck_assert_ptr_eq(ld_strerror(LD_EIO), ld_strerror(LD_EIO));
    ck_assert_ptr_eq(ld_err_name(LD_EIO), ld_err_name(LD_EIO));
    ck_assert_ptr_eq(ld_strerror(12345), ld_strerror(54321));
}
END_TEST

Suite *ld_suite_error(void)
{
    Suite *suite = suite_create("error");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, codes_keep_their_documented_values);
    tcase_add_test(tc, every_code_is_negative_and_distinct);
    tcase_add_test(tc, every_code_has_its_own_name);
    tcase_add_test(tc, every_code_has_its_own_message);
    tcase_add_test(tc, messages_match_the_design);
    tcase_add_test(tc, zero_is_success);
    tcase_add_loop_test(tc, unknown_codes_have_a_placeholder, 0,
                        (int)(sizeof unknown_codes / sizeof unknown_codes[0]));
    tcase_add_test(tc, strings_are_static);
    suite_add_tcase(suite, tc);
    return suite;
}
