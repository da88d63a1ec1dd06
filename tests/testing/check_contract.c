/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The store contract (lib/testing/contract.c) on the stores of this tree, and
 * ld_store_contract_add_tests() itself. */
#include <stdlib.h>

#include <ldasync/testing.h>

#include "check_suites.h"
#include "check_util.h"

static ld_store *new_memory(struct event_base *base, void *arg)
{
    (void)arg;
    return ld_memory_store_new(base);
}

/* A memory store whose every init of more than two items loads over
 * several passes of the loop (memory_store.c, struct load). */
static ld_store *new_memory_sliced(struct event_base *base, void *arg)
{
    (void)arg;
    setenv("LDASYNC_STORE_INIT_SLICE", "2", 1);
    ld_store *s = ld_memory_store_new(base);
    unsetenv("LDASYNC_STORE_INIT_SLICE");
    return s;
}

static ld_store *new_mock(struct event_base *base, void *arg)
{
    (void)arg;
    return ld_mock_store_new(base);
}

static ld_store *new_hybrid(struct event_base *base, void *arg)
{
    (void)arg;
    return ld_test_hybrid_store_new(base);
}

static const struct ld_store_contract_factory hybrid_factory = {
    .version = LD_STORE_CONTRACT_FACTORY_VERSION,
    .new_store = new_hybrid,
};

static const struct ld_store_contract_factory memory_factory = {
    .version = LD_STORE_CONTRACT_FACTORY_VERSION,
    .new_store = new_memory,
};

static const struct ld_store_contract_factory memory_sliced_factory = {
    .version = LD_STORE_CONTRACT_FACTORY_VERSION,
    .new_store = new_memory_sliced,
};

static const struct ld_store_contract_factory mock_factory = {
    .version = LD_STORE_CONTRACT_FACTORY_VERSION,
    .new_store = new_mock,
};

START_TEST(test_add_tests_bad_input)
{
    Suite *s = suite_create("unused");
    struct ld_store_contract_factory f = memory_factory;
    ck_assert_int_eq(ld_store_contract_add_tests(NULL, "x", &f, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_store_contract_add_tests(s, NULL, &f, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_store_contract_add_tests(s, "", &f, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_store_contract_add_tests(s, "x", NULL, NULL), LD_EINVAL);
    f.version = LD_STORE_CONTRACT_FACTORY_VERSION + 1;
    ck_assert_int_eq(ld_store_contract_add_tests(s, "x", &f, NULL), LD_EINVAL);
    f = memory_factory;
    f.new_store = NULL;
    ck_assert_int_eq(ld_store_contract_add_tests(s, "x", &f, NULL), LD_EINVAL);
    /* Check has no suite_free; a suite is freed by its runner */
    srunner_free(srunner_create(s));
}
END_TEST

Suite *ld_suite_contract(void)
{
    Suite *s = suite_create("contract");
    if (ld_store_contract_add_tests(s, "memory", &memory_factory, NULL) != 0 ||
        ld_store_contract_add_tests(s, "memory-sliced", &memory_sliced_factory, NULL) != 0 ||
        ld_store_contract_add_tests(s, "mock", &mock_factory, NULL) != 0 ||
        ld_store_contract_add_tests(s, "hybrid", &hybrid_factory, NULL) != 0)
        abort(); /* not inside a test: no ck_assert here */
    TCase *tc = tcase_create("registration");
    tcase_add_test(tc, test_add_tests_bad_input);
    suite_add_tcase(s, tc);
    return s;
}
