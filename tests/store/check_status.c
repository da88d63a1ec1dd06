/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The data-source status types shared by sinks and FDv2 updates: their names. */
#include <ldasync/status.h> /* first: the header stands on its own */

#include "check_suites.h"
#include "check_util.h"

START_TEST(test_state_names)
{
    LD_TEST_ENUM_NAMES(ld_data_source_state_name, enum ld_data_source_state, "initializing",
                       "valid", "interrupted", "off");
}
END_TEST

START_TEST(test_error_kind_names)
{
    LD_TEST_ENUM_NAMES(ld_data_source_error_kind_name, enum ld_data_source_error_kind, "unknown",
                       "network_error", "error_response", "invalid_data", "store_error");
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
