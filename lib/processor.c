/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the event processor and update processor front layers
 * (processor.h).
 */
#include <stdlib.h>

#include <ldasync/error.h>
#include <ldasync/processor.h>

#include "alloc-internal.h"
#include "front-internal.h"

/* ---- event processor ------------------------------------------------------ */

struct ld_event_processor {
    struct ld__front front;
    const struct ld_event_processor_ops *ops;
    void *impl;
};

ld_event_processor *ld_event_processor_new(struct event_base *base,
                                           const struct ld_event_processor_ops *ops, void *impl)
{
    if (!base || !ops || ops->version != LD_EVENT_PROCESSOR_OPS_VERSION || !ops->send_event ||
        !ops->flush)
        return NULL;
    ld_event_processor *ep = ld__calloc(1, sizeof(*ep));
    if (!ep)
        return NULL;
    if (ld__front_init(&ep->front, base, "event processor is closed") != 0) {
        ld__free(ep);
        return NULL;
    }
    ep->ops = ops;
    ep->impl = impl;
    return ep;
}

int ld_event_processor_send_event(ld_event_processor *ep, json_t *event)
{
    if (!ep || !json_is_object(event))
        return LD_EINVAL;
    if (ep->front.closed)
        return LD_ECLOSED;
    return ep->ops->send_event(ep->impl, event);
}

ld_future *ld_event_processor_flush(ld_event_processor *ep)
{
    struct ld__op op;
    ld_future *r;
    if (!ep)
        return NULL;
    if ((r = ld__front_begin(&ep->front, NULL, &op)) != NULL)
        return r;
    ep->ops->flush(ep->impl, ld_future_ref(op.impl));
    return ld__front_finish(&ep->front, &op);
}

ld_future *ld_event_processor_close(ld_event_processor *ep)
{
    return ep ? ld__front_close(&ep->front, false, ep->ops->close, ep->impl) : NULL;
}

void ld_event_processor_free(ld_event_processor *ep)
{
    if (!ep)
        return;
    ld__front_release(&ep->front, ep->ops->free, ep->impl);
    ld__free(ep);
}

/* ---- update processor ----------------------------------------------------- */

struct ld_update_processor {
    struct ld__front front;
    const struct ld_update_processor_ops *ops;
    void *impl;
    bool started;
};

ld_update_processor *ld_update_processor_new(struct event_base *base,
                                             const struct ld_update_processor_ops *ops, void *impl)
{
    if (!base || !ops || ops->version != LD_UPDATE_PROCESSOR_OPS_VERSION || !ops->start ||
        !ops->initialized)
        return NULL;
    ld_update_processor *up = ld__calloc(1, sizeof(*up));
    if (!up)
        return NULL;
    if (ld__front_init(&up->front, base, "update processor is closed") != 0) {
        ld__free(up);
        return NULL;
    }
    up->ops = ops;
    up->impl = impl;
    return up;
}

ld_future *ld_update_processor_start(ld_update_processor *up)
{
    struct ld__op op;
    ld_future *r;
    if (!up)
        return NULL;
    const char *bad = up->started ? "update processor already started" : NULL;
    if ((r = ld__front_begin(&up->front, bad, &op)) != NULL)
        return r;
    up->started = true;
    up->ops->start(up->impl, ld_future_ref(op.impl));
    return ld__front_finish(&up->front, &op);
}

bool ld_update_processor_initialized(const ld_update_processor *up)
{
    return up && !up->front.closed && up->ops->initialized(up->impl);
}

ld_future *ld_update_processor_close(ld_update_processor *up)
{
    return up ? ld__front_close(&up->front, true, up->ops->close, up->impl) : NULL;
}

void ld_update_processor_free(ld_update_processor *up)
{
    if (!up)
        return;
    ld__front_release(&up->front, up->ops->free, up->impl);
    ld__free(up);
}
