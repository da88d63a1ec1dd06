/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * check_main.c: runs every suite and prints Check's summary line.
 *
 * Check's environment variables apply: CK_RUN_SUITE / CK_RUN_CASE select what runs,
 * CK_VERBOSITY=verbose lists each test (default: normal), CK_FORK=no runs the tests
 * in this process (for gdb and valgrind), CK_TIMEOUT_MULTIPLIER scales timeouts.
 */
#include <stdlib.h>

#include "check_suites.h"

int main(void)
{
    SRunner *runner = srunner_create(ld_suite_error());
    srunner_add_suite(runner, ld_suite_version());
    srunner_add_suite(runner, ld_suite_future());
    srunner_add_suite(runner, ld_suite_future_thread());
    srunner_add_suite(runner, ld_suite_worker());
    srunner_add_suite(runner, ld_suite_json());
    srunner_add_suite(runner, ld_suite_kind());
    srunner_add_suite(runner, ld_suite_context());
    srunner_add_suite(runner, ld_suite_store());
    srunner_add_suite(runner, ld_suite_memory_load());
    srunner_add_suite(runner, ld_suite_store_now());
    srunner_add_suite(runner, ld_suite_status());
    srunner_add_suite(runner, ld_suite_sink());
    srunner_add_suite(runner, ld_suite_big_segments());
    srunner_add_suite(runner, ld_suite_bucket());
    srunner_add_suite(runner, ld_suite_fdv2());
    srunner_add_suite(runner, ld_suite_file_source());
    srunner_add_suite(runner, ld_suite_processor());
    srunner_add_suite(runner, ld_suite_fronts());
    srunner_add_suite(runner, ld_suite_contract());
    srunner_add_suite(runner, ld_suite_mock_store());
    srunner_add_suite(runner, ld_suite_mock_ifaces());
    srunner_add_suite(runner, ld_suite_eval_ops());
    srunner_add_suite(runner, ld_suite_eval());
    srunner_add_suite(runner, ld_suite_eval_attack());
    srunner_add_suite(runner, ld_suite_eval_slices());
    srunner_add_suite(runner, ld_suite_eval_big());
    srunner_add_suite(runner, ld_suite_eval_slices_attack());
    srunner_add_suite(runner, ld_suite_serve());
    srunner_add_suite(runner, ld_suite_serve_e2e());
    srunner_add_suite(runner, ld_suite_serve_chaos());
    srunner_add_suite(runner, ld_suite_serve_loop());
    srunner_add_suite(runner, ld_suite_data_system());
    srunner_add_suite(runner, ld_suite_client());

    srunner_run_all(runner, CK_ENV);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
