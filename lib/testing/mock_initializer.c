/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the mock initializer (testing.h). A basis goes into
 * a fetch's future and is freed with it, so the mock keeps the basis it was
 * given and answers each fetch with a copy, rebuilt with the change set
 * builder (the items are shared, as change sets share them anyway).
 */
#include <stdlib.h>
#include <string.h>

#include <ldasync/testing.h>

#include "testing-internal.h"

struct mock {
    struct ld__mock head;
    char *name;
    bool answered;        /* set_basis or set_error was called */
    ld_fdv2_basis *basis; /* when answered and error is 0 */
    int error;            /* < 0: fetches reject with it */
    struct ld__waiters waiting;
    bool stopped;
    int fetches;
};

static const struct ld_initializer_ops mock_ops;

static struct mock *mock_of(const ld_initializer *init)
{
    return ld__mock_find(init, &mock_ops);
}

static const char *mock_name(void *impl)
{
    const struct mock *m = impl;
    return m->name;
}

static int add_change(ld_fdv2_change_set_builder *b, const ld_fdv2_change *c)
{
    if (ld_fdv2_change_action(c) == LD_FDV2_ACTION_PUT)
        return ld_fdv2_change_set_builder_add_put(b, ld_fdv2_change_kind(c), ld_fdv2_change_key(c),
                                                  ld_fdv2_change_version(c),
                                                  ld_fdv2_change_object(c));
    return ld_fdv2_change_set_builder_add_delete(b, ld_fdv2_change_kind(c), ld_fdv2_change_key(c),
                                                 ld_fdv2_change_version(c));
}

/* A change set like `cs`, or NULL if memory ran out. */
static ld_fdv2_change_set *copy_change_set(const ld_fdv2_change_set *cs)
{
    ld_fdv2_change_set_builder *b = ld_fdv2_change_set_builder_new();
    ld_fdv2_change_set *copy = NULL;
    int rc = b ? ld_fdv2_change_set_builder_start(b, ld_fdv2_change_set_intent(cs)) : LD_ENOMEM;
    for (size_t i = 0; rc == 0 && i < ld_fdv2_change_set_count(cs); i++)
        rc = add_change(b, ld_fdv2_change_set_get(cs, i));
    if (rc == 0)
        ld_fdv2_change_set_builder_finish(b, ld_fdv2_change_set_selector(cs), &copy);
    ld_fdv2_change_set_builder_free(b);
    return copy;
}

static ld_fdv2_basis *copy_basis(const ld_fdv2_basis *basis)
{
    ld_fdv2_change_set *cs = copy_change_set(ld_fdv2_basis_change_set(basis));
    return cs ? ld_fdv2_basis_new(cs, ld_fdv2_basis_persist(basis),
                                  ld_fdv2_basis_environment_id(basis))
              : NULL;
}

/* Completes `out` (stolen) with what was set. */
static void answer(const struct mock *m, ld_future *out)
{
    ld_fdv2_basis *copy = NULL;
    if (m->error < 0)
        ld_future_reject(out, m->error, "mock initializer: scripted error");
    else if ((copy = copy_basis(m->basis)) != NULL)
        ld_fdv2_fulfill_basis(out, copy);
    else
        ld_future_reject(out, LD_ENOMEM, "mock initializer: out of memory");
    ld_future_unref(out);
}

static void mock_fetch(void *impl, ld_future *out)
{
    struct mock *m = impl;
    m->fetches++;
    if (m->answered) {
        answer(m, out);
    } else if (ld__waiters_push(&m->waiting, out) != 0) {
        ld_future_reject(out, LD_ENOMEM, "mock initializer: out of memory");
        ld_future_unref(out);
    }
}

static void mock_stop(void *impl, ld_future *out)
{
    struct mock *m = impl;
    m->stopped = true;
    ld__waiters_drop(&m->waiting); /* the front layer has rejected them already */
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void release(void *impl)
{
    struct mock *m = impl;
    ld__waiters_drop(&m->waiting);
    ld_fdv2_basis_free(m->basis);
    ld__free(m->name);
}

static const struct ld_initializer_ops mock_ops = {
    .version = LD_INITIALIZER_OPS_VERSION,
    .name = mock_name,
    .fetch = mock_fetch,
    .stop = mock_stop,
    .free = ld__mock_free,
};

ld_initializer *ld_mock_initializer_new(struct event_base *base, const char *name)
{
    struct mock *m = ld__mock_alloc(base, sizeof(*m), &mock_ops, release);
    if (!m)
        return NULL;
    m->name = ld__strdup(name ? name : "mock");
    return ld__mock_finish(m, m->name ? ld_initializer_new(base, &mock_ops, m) : NULL);
}

/* Sets what fetches get (`basis` stolen) and answers the waiting ones. */
static void set_answer(struct mock *m, ld_fdv2_basis *basis, int error)
{
    ld_fdv2_basis_free(m->basis);
    m->basis = basis;
    m->error = error;
    m->answered = true;
    ld_future *out;
    while ((out = ld__waiters_pop(&m->waiting)) != NULL) {
        if (ld_future_is_pending(out))
            answer(m, out);
        else
            ld_future_unref(out);
    }
}

int ld_mock_initializer_set_basis(ld_initializer *init, ld_fdv2_basis *basis)
{
    struct mock *m = mock_of(init);
    int rc = !m || !basis ? LD_EINVAL : m->stopped ? LD_ECLOSED : 0;
    if (rc != 0) {
        ld_fdv2_basis_free(basis);
        return rc;
    }
    set_answer(m, basis, 0);
    return 0;
}

int ld_mock_initializer_set_error(ld_initializer *init, int code)
{
    struct mock *m = mock_of(init);
    if (!m || code >= 0)
        return LD_EINVAL;
    if (m->stopped)
        return LD_ECLOSED;
    set_answer(m, NULL, code);
    return 0;
}

int ld_mock_initializer_fetch_count(const ld_initializer *init)
{
    const struct mock *m = mock_of(init);
    return m ? m->fetches : LD_EINVAL;
}

int ld_mock_initializer_stopped(const ld_initializer *init)
{
    const struct mock *m = mock_of(init);
    return m ? m->stopped : LD_EINVAL;
}
