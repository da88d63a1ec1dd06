/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The data-source status types shared by sinks and FDv2 updates: their names. */
#include <ldasync/status.h> /* first: the header stands on its own */

#include "check_suites.h"
#include "check_util.h"

START_TEST(test_state_names)
{
    ck_assert_str_eq(ld_ds_state_name(LD_DS_INITIALIZING), "initializing");
    ck_assert_str_eq(ld_ds_state_name(LD_DS_VALID), "valid");
    ck_assert_str_eq(ld_ds_state_name(LD_DS_INTERRUPTED), "interrupted");
    ck_assert_str_eq(ld_ds_state_name(LD_DS_OFF), "off");
    ck_assert_ptr_null(ld_ds_state_name((enum ld_ds_state)4));
    ck_assert_ptr_null(ld_ds_state_name((enum ld_ds_state) - 1));
}
END_TEST

START_TEST(test_error_kind_names)
{
    ck_assert_str_eq(ld_ds_error_kind_name(LD_DS_ERROR_UNKNOWN), "unknown");
    ck_assert_str_eq(ld_ds_error_kind_name(LD_DS_ERROR_NETWORK), "network_error");
    ck_assert_str_eq(ld_ds_error_kind_name(LD_DS_ERROR_RESPONSE), "error_response");
    ck_assert_str_eq(ld_ds_error_kind_name(LD_DS_ERROR_INVALID_DATA), "invalid_data");
    ck_assert_str_eq(ld_ds_error_kind_name(LD_DS_ERROR_STORE), "store_error");
    ck_assert_ptr_null(ld_ds_error_kind_name((enum ld_ds_error_kind)5));
    ck_assert_ptr_null(ld_ds_error_kind_name((enum ld_ds_error_kind) - 1));
}
END_TEST

Suite *ld_suite_status(void)
{
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("names");
    tcase_add_test(tc, test_state_names);
    tcase_add_test(tc, test_error_kind_names);
    suite_add_tcase(s, tc);
    return s;
}
