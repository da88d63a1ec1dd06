/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the store contract as Check tests (testing.h).
 *
 * Check's fixtures take no argument, so a registration is found through the
 * loop index: each registration adds every test as a loop test over the one
 * index [i, i + 1) of its entry in a static table, and each test starts with
 * begin(_i), which runs the factory. The checked teardown frees what begin()
 * made, also after a failure in CK_FORK=no mode.
 *
 * Tests wait with ld_future_wait() (a store may answer from the network),
 * and assert nothing inside callbacks: those only record what happened.
 *
 * This file is the harness and the registration; the cases are in
 * contract_semantics.c, contract_bad_input.c and contract_order.c, written
 * with the helpers of testing-internal.h's contract section.
 */
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/testing.h>

#define LD_TESTING_CONTRACT
#include "testing-internal.h"

#define GUARD_SEC 60

struct registration {
    char *name;
    struct ld_store_contract_factory factory;
    void *arg;
};

static struct registration *regs;
static int nregs, capregs;

/* The running test (B, S and V are testing-internal.h's short names). */
static const struct registration *R;
struct event_base *ld__contract_base;
ld_store *ld__contract_store;
bool ld__contract_view;
static struct event *guard;
static bool factory_ready;

static void guard_fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    ck_abort_msg("%s: no answer from the store within %d s", R->name, GUARD_SEC);
}

/* Loop indices from VIEW_LOOP on run a test with its reads (get, all)
 * through the store's read-only view (ld_store_read_only()). */
#define VIEW_LOOP (1 << 20)

void ld__contract_begin(int i)
{
    V = i >= VIEW_LOOP;
    R = &regs[V ? i - VIEW_LOOP : i];
    B = event_base_new();
    ck_assert_msg(B != NULL, "event_base_new failed");
    guard = event_new(B, -1, 0, guard_fired, NULL);
    struct timeval tv = {GUARD_SEC, 0};
    ck_assert_msg(guard && event_add(guard, &tv) == 0, "cannot add the guard timer");
    if (R->factory.setup) {
        int rc = R->factory.setup(B, R->arg);
        ck_assert_msg(rc == 0, "%s: factory setup failed (%d)", R->name, rc);
    }
    factory_ready = true;
    S = R->factory.new_store(B, R->arg);
    ck_assert_msg(S != NULL, "%s: factory new_store returned NULL", R->name);
}

static void end(void)
{
    if (!B)
        return;
    ld_store_free(S);
    S = NULL;
    loop_until_idle();
    if (factory_ready && R->factory.teardown)
        R->factory.teardown(B, R->arg);
    factory_ready = false;
    event_free(guard);
    guard = NULL;
    int idle = 0;
    for (int pass = 0; pass < 1000 && !idle; pass++)
        idle = event_base_loop(B, EVLOOP_NONBLOCK) == 1; /* 1: no events at all */
    event_base_free(B);
    B = NULL;
    ck_assert_msg(idle, "%s: events were left on the base after the store was freed", R->name);
}

static void add_all(TCase *tc, int index)
{
    for (int view = 0; view < 2; view++) {
        int loop = view ? VIEW_LOOP + index : index;
        ld__contract_add_semantics(tc, loop);
        ld__contract_add_bad_input(tc, loop);
        ld__contract_add_order(tc, loop);
    }
}

int ld_store_contract_add_tests(Suite *suite, const char *name,
                                const struct ld_store_contract_factory *factory, void *arg)
{
    if (!suite || !name || !*name || !factory ||
        factory->version != LD_STORE_CONTRACT_FACTORY_VERSION || !factory->new_store)
        return LD_EINVAL;
    if (nregs == capregs) {
        int cap = capregs ? capregs * 2 : 4;
        struct registration *bigger = ld__realloc(regs, (size_t)cap * sizeof(*regs));
        if (!bigger)
            return LD_ENOMEM;
        regs = bigger;
        capregs = cap;
    }
    char *copy = ld__strdup(name);
    if (!copy)
        return LD_ENOMEM;
    int index = nregs++;
    regs[index] = (struct registration){copy, *factory, arg};
    TCase *tc = tcase_create(name); /* Check aborts if memory runs out */
    tcase_add_checked_fixture(tc, NULL, end);
    add_all(tc, index);
    suite_add_tcase(suite, tc);
    return 0;
}
