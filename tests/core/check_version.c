/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* check_version.c: the version macros agree with each other and with the library. */
#include <stdio.h>

#include <ldasync/version.h>

#include "check_suites.h"

START_TEST(string_macro_matches_number_macros)
{
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", LD_VERSION_MAJOR, LD_VERSION_MINOR,
             LD_VERSION_PATCH);
    ck_assert_str_eq(LD_VERSION_STRING, expected);
}
END_TEST

START_TEST(hex_macro_packs_the_numbers)
{
    ck_assert_int_eq(LD_VERSION_HEX >> 16, LD_VERSION_MAJOR);
    ck_assert_int_eq((LD_VERSION_HEX >> 8) & 0xff, LD_VERSION_MINOR);
    ck_assert_int_eq(LD_VERSION_HEX & 0xff, LD_VERSION_PATCH);
#if LD_VERSION_HEX < 0x000100
#error "LD_VERSION_HEX must be usable in #if and at least 0.1.0"
#endif
}
END_TEST

START_TEST(library_reports_the_header_version)
{
    ck_assert_str_eq(ld_version_string(), LD_VERSION_STRING);
    ck_assert_uint_eq(ld_version_hex(), LD_VERSION_HEX);
}
END_TEST

START_TEST(version_is_the_package_version)
{
#ifdef PACKAGE_VERSION
    ck_assert_str_eq(ld_version_string(), PACKAGE_VERSION);
#endif
}
END_TEST

Suite *ld_suite_version(void)
{
    Suite *suite = suite_create("version");
    TCase *tc = tcase_create("version");
    tcase_add_test(tc, string_macro_matches_number_macros);
    tcase_add_test(tc, hex_macro_packs_the_numbers);
    tcase_add_test(tc, library_reports_the_header_version);
    tcase_add_test(tc, version_is_the_package_version);
    suite_add_tcase(suite, tc);
    return suite;
}
