/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the mock event processor (testing.h). The events sent
 * are kept in a JSON array, by reference.
 */
#include <stdlib.h>

#include <ldasync/testing.h>

#include "testing-internal.h"

struct mock {
    struct ld__mock head;
    json_t *events;
    int flushes;
    bool closed;
};

static const struct ld_event_processor_ops mock_ops;

static struct mock *mock_of(const ld_event_processor *ep)
{
    return ld__mock_find(ep, &mock_ops);
}

static int mock_send_event(void *impl, json_t *event)
{
    struct mock *m = impl;
    return json_array_append(m->events, event) == 0 ? 0 : LD_ENOMEM;
}

static void mock_flush(void *impl, ld_future *out)
{
    struct mock *m = impl;
    m->flushes++;
    ld_future_fulfill_bool(out, true);
    ld_future_unref(out);
}

static void mock_close(void *impl, ld_future *out)
{
    struct mock *m = impl;
    m->closed = true;
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void release(void *impl)
{
    struct mock *m = impl;
    json_decref(m->events);
}

static const struct ld_event_processor_ops mock_ops = {
    .version = LD_EVENT_PROCESSOR_OPS_VERSION,
    .send_event = mock_send_event,
    .flush = mock_flush,
    .close = mock_close,
    .free = ld__mock_free,
};

ld_event_processor *ld_mock_event_processor_new(struct event_base *base)
{
    struct mock *m = ld__mock_alloc(base, sizeof(*m), &mock_ops, release);
    if (!m)
        return NULL;
    m->events = json_array();
    return ld__mock_finish(m, m->events ? ld_event_processor_new(base, &mock_ops, m) : NULL);
}

int ld_mock_event_processor_event_count(const ld_event_processor *ep)
{
    const struct mock *m = mock_of(ep);
    return m ? (int)json_array_size(m->events) : LD_EINVAL;
}

const json_t *ld_mock_event_processor_event(const ld_event_processor *ep, size_t i)
{
    const struct mock *m = mock_of(ep);
    return m ? json_array_get(m->events, i) : NULL;
}

int ld_mock_event_processor_flush_count(const ld_event_processor *ep)
{
    const struct mock *m = mock_of(ep);
    return m ? m->flushes : LD_EINVAL;
}

int ld_mock_event_processor_closed(const ld_event_processor *ep)
{
    const struct mock *m = mock_of(ep);
    return m ? m->closed : LD_EINVAL;
}

int ld_mock_event_processor_clear(ld_event_processor *ep)
{
    struct mock *m = mock_of(ep);
    if (!m)
        return LD_EINVAL;
    json_array_clear(m->events);
    return 0;
}
