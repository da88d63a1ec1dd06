/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * installcheck-testing.c: an outside program, built by `make installcheck` (and so
 * by `make distcheck`) against the installed testing kit with nothing but
 *     cc installcheck-testing.c `pkg-config --cflags --libs ldasync-testing`
 * It runs the store contract on the mock store, so it proves that the installed
 * header, libldasync-testing, ldasync-testing.pc and the program's own Check work
 * together (a Check failure raised inside the library reaches this runner).
 */
#include <stdio.h>
#include <stdlib.h>

#include <ldasync/testing.h>

static ld_store *new_mock(struct event_base *base, void *arg)
{
    (void)arg;
    return ld_mock_store_new(base);
}

int main(void)
{
    static const struct ld_store_contract_factory factory = {
        .version = LD_STORE_CONTRACT_FACTORY_VERSION,
        .new_store = new_mock,
    };
    Suite *suite = suite_create("installcheck");
    if (ld_store_contract_add_tests(suite, "mock", &factory, NULL) != 0)
        return EXIT_FAILURE;
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int run = srunner_ntests_run(runner), failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    printf("ldasync-testing %s: %d contract tests, %d failed\n", ld_version_string(), run, failed);
    return run > 0 && failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
