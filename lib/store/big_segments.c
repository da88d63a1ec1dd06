/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the big segment store front layer and helpers (big_segments.h).
 */
#include <stdlib.h>
#include <string.h>

#include <ldasync/big_segments.h>
#include <ldasync/error.h>

#include "core/core-internal.h"
#include "model/model-internal.h"
#include "store/store-internal.h"

struct ld_big_segment_store {
    struct ld__component c; /* first: the skeleton (front-internal.h) */
    const struct ld_big_segment_store_ops *ops;
    ld__bss_now_fn now; /* NULL: none */
};

void ld__big_segment_store_set_now(ld_big_segment_store *s, ld__bss_now_fn fn)
{
    s->now = fn;
}

int ld__big_segment_store_now(ld_big_segment_store *s, const char *hash, int64_t stale_after_ms,
                              const json_t **m, int *status)
{
    /* Not held back by reads under way: a membership kept does not wait
     * for another context's read (the answer is a snapshot, and nothing is
     * written through this store). */
    if (!s->now || ld__front_closed(&s->c.front))
        return LD_EBUSY;
    return s->now(s->c.impl, hash, stale_after_ms, m, status);
}

ld_big_segment_store *ld_big_segment_store_new(struct event_base *base,
                                               const struct ld_big_segment_store_ops *ops,
                                               void *impl)
{
    if (!base || !ops || ops->version != LD_BIG_SEGMENT_STORE_OPS_VERSION || !ops->get_metadata ||
        !ops->get_membership)
        return NULL;
    ld_big_segment_store *s =
        ld__component_new(sizeof(*s), base, impl, "big segment store is closed");
    if (s)
        s->ops = ops;
    return s;
}

ld_future *ld_big_segment_store_get_metadata(ld_big_segment_store *s)
{
    return s ? ld__component_call(&s->c, NULL, s->ops->get_metadata) : NULL;
}

ld_future *ld_big_segment_store_get_membership(ld_big_segment_store *s, const char *context_hash)
{
    struct ld__front_op op;
    ld_future *r;
    if (!s)
        return NULL;
    const char *bad =
        !context_hash || !*context_hash ? "context_hash must be a non-empty string" : NULL;
    if ((r = ld__front_begin(&s->c.front, bad, &op)) != NULL)
        return r;
    s->ops->get_membership(s->c.impl, context_hash, ld_future_ref(op.impl));
    return ld__front_finish(&s->c.front, &op);
}

ld_future *ld_big_segment_store_close(ld_big_segment_store *s)
{
    return s ? ld__component_close(&s->c, false, s->ops->close) : NULL;
}

void ld_big_segment_store_free(ld_big_segment_store *s)
{
    if (s)
        ld__component_free(&s->c, s->ops->free);
}

const char *ld_big_segment_store_describe(const ld_big_segment_store *s)
{
    return s ? ld__component_text(&s->c, s->ops->describe) : "(null)";
}

/* ---- helpers ------------------------------------------------------------- */

/* Sets every ref of `refs` to `value` in `m`; 0, LD_EINVAL or LD_ENOMEM. */
static int set_refs(json_t *m, const char *const *refs, size_t n, json_t *value, const char *bad,
                    const char **why)
{
    for (size_t i = 0; i < n; i++) {
        if (!refs[i] || !*refs[i]) {
            *why = bad;
            return LD_EINVAL;
        }
        /* checked here: jansson refuses a key that is not UTF-8 as it
         * refuses one when memory runs out */
        if (!ld__utf8_valid(refs[i], strlen(refs[i]))) {
            *why = "segment refs must be valid UTF-8";
            return LD_EINVAL;
        }
        if (json_object_set_nocheck(m, refs[i], value) != 0)
            return LD_ENOMEM;
    }
    return 0;
}

int ld_big_segment_membership_from_refs(const char *const *included, size_t n_included,
                                        const char *const *excluded, size_t n_excluded,
                                        json_t **membership, const char **why)
{
    const char *unused;
    if (!why)
        why = &unused;
    if (!membership) {
        *why = "membership must not be NULL";
        return LD_EINVAL;
    }
    *membership = NULL;
    if (!included && n_included > 0) {
        *why = "included must not be NULL when n_included > 0";
        return LD_EINVAL;
    }
    if (!excluded && n_excluded > 0) {
        *why = "excluded must not be NULL when n_excluded > 0";
        return LD_EINVAL;
    }
    if (n_included == 0 && n_excluded == 0)
        return 0;
    json_t *m = json_object();
    if (!m)
        return LD_ENOMEM;
    int rc = set_refs(m, excluded, n_excluded, json_false(),
                      "excluded refs must be non-empty strings", why);
    if (rc == 0)
        rc = set_refs(m, included, n_included, json_true(),
                      "included refs must be non-empty strings", why);
    if (rc != 0) {
        json_decref(m);
        return rc;
    }
    *membership = m;
    return 0;
}

bool ld_big_segment_is_stale(int64_t last_up_to_date_ms, int64_t now_ms, int64_t stale_after_ms)
{
    if (last_up_to_date_ms < 0)
        return true;
    /* now - last >= stale_after, without overflowing */
    return now_ms >= last_up_to_date_ms && (uint64_t)now_ms - (uint64_t)last_up_to_date_ms >=
                                               (uint64_t)(stale_after_ms < 0 ? 0 : stale_after_ms);
}

const char *ld_big_segments_status_name(enum ld_big_segments_status status)
{
    switch (status) {
    case LD_BIG_SEGMENTS_STATUS_HEALTHY:
        return "HEALTHY";
    case LD_BIG_SEGMENTS_STATUS_STALE:
        return "STALE";
    case LD_BIG_SEGMENTS_STATUS_NOT_CONFIGURED:
        return "NOT_CONFIGURED";
    case LD_BIG_SEGMENTS_STATUS_STORE_ERROR:
        return "STORE_ERROR";
    }
    return NULL;
}
