/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the mock update processor (testing.h). Its start is
 * answered from a scripted outcome; a held start keeps its future until
 * the test says how it ends.
 */
#include <stdlib.h>

#include <ldasync/testing.h>

#include "testing-internal.h"

struct mock {
    struct ld__mock head;
    enum ld_mock_start outcome;
    int fail_code;   /* < 0: the start rejects with it, whatever `outcome` says */
    ld_future *held; /* the start's future while it is held */
    bool completed;  /* the start's future has been completed */
    bool initialized;
    bool stopped;
    int starts;
};

static const struct ld_update_processor_ops mock_ops;

static struct mock *mock_of(const ld_update_processor *up)
{
    return ld__mock_find(up, &mock_ops);
}

/* Completes the start's future `out` (stolen) as the script says. */
static void answer(struct mock *m, ld_future *out)
{
    m->completed = true;
    if (m->fail_code < 0) {
        ld_future_reject(out, m->fail_code, "mock update processor: scripted start failure");
    } else {
        m->initialized = m->outcome == LD_MOCK_START_READY;
        ld_future_fulfill(out);
    }
    ld_future_unref(out);
}

static void mock_start(void *impl, ld_future *out)
{
    struct mock *m = impl;
    m->starts++;
    if (m->outcome == LD_MOCK_START_HOLD && m->fail_code == 0)
        m->held = out;
    else
        answer(m, out);
}

static bool mock_initialized(void *impl)
{
    const struct mock *m = impl;
    return m->initialized;
}

static void drop_held(void *impl)
{
    struct mock *m = impl;
    ld_future_unref(m->held); /* the front layer has rejected it already */
    m->held = NULL;
}

static void mock_stop(void *impl, ld_future *out)
{
    struct mock *m = impl;
    m->stopped = true;
    drop_held(m);
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static const struct ld_update_processor_ops mock_ops = {
    .version = LD_UPDATE_PROCESSOR_OPS_VERSION,
    .start = mock_start,
    .initialized = mock_initialized,
    .stop = mock_stop,
    .free = ld__mock_free,
};

ld_update_processor *ld_mock_update_processor_new(struct event_base *base, enum ld_mock_start start)
{
    if ((unsigned)start > LD_MOCK_START_GIVE_UP)
        return NULL;
    struct mock *m = ld__mock_alloc(base, sizeof(*m), &mock_ops, drop_held);
    if (!m)
        return NULL;
    m->outcome = start;
    return ld__mock_finish(m, ld_update_processor_new(base, &mock_ops, m));
}

/* Sets the outcome and, if the start is held, answers it with it. */
static int script(ld_update_processor *up, enum ld_mock_start outcome, int fail_code)
{
    struct mock *m = mock_of(up);
    if (!m)
        return LD_EINVAL;
    if (m->stopped)
        return LD_ECLOSED;
    if (m->completed)
        return LD_EALREADY;
    m->outcome = outcome;
    m->fail_code = fail_code;
    if (m->held) {
        ld_future *out = m->held;
        m->held = NULL;
        answer(m, out);
    }
    return 0;
}

int ld_mock_update_processor_set_ready(ld_update_processor *up)
{
    return script(up, LD_MOCK_START_READY, 0);
}

int ld_mock_update_processor_fail(ld_update_processor *up, int code)
{
    return code < 0 ? script(up, LD_MOCK_START_READY, code) : LD_EINVAL;
}

int ld_mock_update_processor_start_count(const ld_update_processor *up)
{
    const struct mock *m = mock_of(up);
    return m ? m->starts : LD_EINVAL;
}

int ld_mock_update_processor_stopped(const ld_update_processor *up)
{
    const struct mock *m = mock_of(up);
    return m ? m->stopped : LD_EINVAL;
}
