/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * All-flags states (eval.h): the results ld_evaluator_flags_state() made
 * (eval_all.c), read one flag at a time.
 */
#include <ldasync/eval.h>

#include "core/core-internal.h"
#include "eval/eval-internal.h"

void ld__flags_state_free(void *p)
{
    struct ld_flags_state *st = p;
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++)
        ld__item_unref(&st->r[i].f->h);
    ld__free(st->r);
    json_decref(st->flags);
    ld__free(st);
}

/* Flag `i` of `s`, or NULL. */
static const struct ld__flag_result *result(const ld_flags_state *s, size_t i)
{
    return s && i < s->n ? &s->r[i] : NULL;
}

bool ld_flags_state_valid(const ld_flags_state *s)
{
    return s && s->valid;
}

size_t ld_flags_state_count(const ld_flags_state *s)
{
    return s ? s->n : 0;
}

const char *ld_flags_state_key(const ld_flags_state *s, size_t i, size_t *len)
{
    const struct ld__flag_result *r = result(s, i);
    if (len)
        *len = r ? r->len : 0;
    return r ? r->key : NULL;
}

const ld_detail *ld_flags_state_detail(const ld_flags_state *s, size_t i)
{
    const struct ld__flag_result *r = result(s, i);
    return r ? &r->d : NULL;
}

unsigned ld_flags_state_fields(const ld_flags_state *s, size_t i)
{
    const struct ld__flag_result *r = result(s, i);
    return r ? r->fields : 0;
}

int64_t ld_flags_state_version(const ld_flags_state *s, size_t i)
{
    const struct ld__flag_result *r = result(s, i);
    return r ? r->f->h.version : -1;
}

int64_t ld_flags_state_debug_events_until(const ld_flags_state *s, size_t i)
{
    const struct ld__flag_result *r = result(s, i);
    return r && (r->fields & LD_FLAG_STATE_DEBUG_EVENTS_UNTIL) ? r->f->debug_until : 0;
}

size_t ld_flags_state_prerequisite_count(const ld_flags_state *s, size_t i)
{
    const struct ld__flag_result *r = result(s, i);
    if (!r)
        return 0;
    return r->d.nprereqs < r->f->nprereqs ? r->d.nprereqs : r->f->nprereqs;
}

const char *ld_flags_state_prerequisite(const ld_flags_state *s, size_t i, size_t k, size_t *len)
{
    const struct ld__flag_result *r = result(s, i);
    bool ok = r && k < ld_flags_state_prerequisite_count(s, i);
    if (len)
        *len = ok ? r->f->prereqs[k].key.len : 0;
    return ok ? r->f->prereqs[k].key.s : NULL;
}
