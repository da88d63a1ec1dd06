/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the event processor and update processor front layers
 * (processor.h).
 */
#include <stdlib.h>

#include <ldasync/error.h>
#include <ldasync/processor.h>

#include "core/core-internal.h"
#include "events/events-internal.h"
#include "store/store-internal.h"

/* ---- event processor ------------------------------------------------------ */

struct ld_event_processor {
    struct ld__component c; /* first: the skeleton (front-internal.h) */
    const struct ld_event_processor_ops *ops;
};

ld_event_processor *ld_event_processor_new(struct event_base *base,
                                           const struct ld_event_processor_ops *ops, void *impl)
{
    if (!base || !ops || ops->version != LD_EVENT_PROCESSOR_OPS_VERSION || !ops->send_event ||
        !ops->flush)
        return NULL;
    ld_event_processor *ep =
        ld__component_new(sizeof(*ep), base, impl, "event processor is closed");
    if (ep)
        ep->ops = ops;
    return ep;
}

void *ld__event_processor_impl(const ld_event_processor *ep, const void *ops)
{
    return ep && (const void *)ep->ops == ops ? ep->c.impl : NULL;
}

int ld_event_processor_send_event(ld_event_processor *ep, json_t *event)
{
    if (!ep || !json_is_object(event))
        return LD_EINVAL;
    if (ld__front_closed(&ep->c.front))
        return LD_ECLOSED;
    return ep->ops->send_event(ep->c.impl, event);
}

ld_future *ld_event_processor_flush(ld_event_processor *ep)
{
    return ep ? ld__component_call(&ep->c, NULL, ep->ops->flush) : NULL;
}

ld_future *ld_event_processor_close(ld_event_processor *ep)
{
    return ep ? ld__component_close(&ep->c, false, ep->ops->close) : NULL;
}

void ld_event_processor_free(ld_event_processor *ep)
{
    if (ep)
        ld__component_free(&ep->c, ep->ops->free);
}

/* ---- update processor ----------------------------------------------------- */

struct ld_update_processor {
    struct ld__component c; /* first: the skeleton (front-internal.h) */
    const struct ld_update_processor_ops *ops;
    bool started;
};

ld_update_processor *ld_update_processor_new(struct event_base *base,
                                             const struct ld_update_processor_ops *ops, void *impl)
{
    if (!base || !ops || ops->version != LD_UPDATE_PROCESSOR_OPS_VERSION || !ops->start ||
        !ops->initialized)
        return NULL;
    ld_update_processor *up =
        ld__component_new(sizeof(*up), base, impl, "update processor is stopped");
    if (up)
        up->ops = ops;
    return up;
}

ld_future *ld_update_processor_start(ld_update_processor *up)
{
    if (!up)
        return NULL;
    struct ld__front_op op;
    ld_future *r;
    const char *bad = up->started ? "update processor already started" : NULL;
    if ((r = ld__front_begin(&up->c.front, bad, &op)) != NULL)
        return r; /* not started: closed, started already, or no memory */
    up->started = true;
    up->ops->start(up->c.impl, ld_future_ref(op.impl));
    return ld__front_finish(&up->c.front, &op);
}

bool ld_update_processor_initialized(const ld_update_processor *up)
{
    return up && !ld__front_closed(&up->c.front) && up->ops->initialized(up->c.impl);
}

ld_future *ld_update_processor_stop(ld_update_processor *up)
{
    return up ? ld__component_close(&up->c, true, up->ops->stop) : NULL;
}

void ld_update_processor_free(ld_update_processor *up)
{
    if (up)
        ld__component_free(&up->c, up->ops->free);
}
