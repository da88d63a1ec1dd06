/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Details (eval.h): what one evaluation answers, and its JSON.
 */
#include <ldasync/big_segments.h>
#include <ldasync/eval.h>

#include "core/core-internal.h"
#include "eval/eval-internal.h"

void ld__detail_free(void *p)
{
    ld_detail *d = p;
    if (d->index < 0)
        json_decref(d->value);
    ld__item_unref(d->flag);
    ld__line_free(d);
}

json_t *ld_detail_value(const ld_detail *d)
{
    return d ? d->value : NULL;
}

int ld_detail_variation_index(const ld_detail *d)
{
    return d ? d->index : -1;
}

enum ld_reason_kind ld_detail_reason_kind(const ld_detail *d)
{
    return d ? (enum ld_reason_kind)d->kind : LD_REASON_ERROR;
}

enum ld_eval_error ld_detail_error(const ld_detail *d)
{
    return d ? (enum ld_eval_error)d->error : LD_EVAL_ERROR_NONE;
}

int ld_detail_rule_index(const ld_detail *d)
{
    return d && d->kind == LD_REASON_RULE_MATCH ? d->rule : -1;
}

const char *ld_detail_rule_id(const ld_detail *d)
{
    return d && d->kind == LD_REASON_RULE_MATCH ? d->rule_id.s : NULL;
}

const char *ld_detail_prerequisite_key(const ld_detail *d)
{
    return d && d->kind == LD_REASON_PREREQUISITE_FAILED ? d->prereq.s : NULL;
}

bool ld_detail_in_experiment(const ld_detail *d)
{
    return d && d->in_experiment;
}

int ld_detail_big_segments_status(const ld_detail *d)
{
    return d ? d->big : -1;
}

const char *ld_reason_kind_name(enum ld_reason_kind kind)
{
    static const char *const names[] = {"OFF",        "FALLTHROUGH",         "TARGET_MATCH",
                                        "RULE_MATCH", "PREREQUISITE_FAILED", "ERROR"};
    return (unsigned)kind < sizeof names / sizeof *names ? names[kind] : "UNKNOWN";
}

const char *ld_eval_error_name(enum ld_eval_error error)
{
    static const char *const names[] = {"NONE",           "FLAG_NOT_FOUND",
                                        "MALFORMED_FLAG", "USER_NOT_SPECIFIED",
                                        "WRONG_TYPE",     "EXCEPTION"};
    return (unsigned)error < sizeof names / sizeof *names ? names[error] : "UNKNOWN";
}

static int set_new(json_t *o, const char *k, json_t *v)
{
    return json_object_set_new(o, k, v);
}

/* The reason object of a detail's parts. */
static json_t *reason_json(uint8_t kind, uint8_t error, int rule, const struct ld__str *rule_id,
                           const struct ld__str *prereq, bool in_experiment, int big)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    int rc = set_new(o, "kind", json_string(ld_reason_kind_name((enum ld_reason_kind)kind)));
    /* The strings are the stored item's as they are: valid UTF-8 unless a C
     * caller made them with json_stringn_nocheck(), which json_stringn()
     * would refuse (as if memory ran out). */
    if (kind == LD_REASON_RULE_MATCH) {
        rc |= set_new(o, "ruleIndex", json_integer(rule));
        if (rule_id->s)
            rc |= set_new(o, "ruleId", json_stringn_nocheck(rule_id->s, rule_id->len));
    } else if (kind == LD_REASON_PREREQUISITE_FAILED) {
        rc |= set_new(o, "prerequisiteKey", json_stringn_nocheck(prereq->s, prereq->len));
    } else if (kind == LD_REASON_ERROR) {
        rc |= set_new(o, "errorKind", json_string(ld_eval_error_name((enum ld_eval_error)error)));
    }
    if (in_experiment)
        rc |= set_new(o, "inExperiment", json_true());
    if (big >= 0)
        rc |= set_new(o, "bigSegmentsStatus",
                      json_string(ld_big_segments_status_name((enum ld_big_segments_status)big)));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *ld_detail_reason_to_json(const ld_detail *d)
{
    if (!d)
        return NULL;
    return reason_json(d->kind, d->error, d->rule, &d->rule_id, &d->prereq, d->in_experiment,
                       d->big);
}

json_t *ld_detail_to_json(const ld_detail *d)
{
    if (!d)
        return NULL;
    json_t *o = json_object();
    json_t *reason = ld_detail_reason_to_json(d);
    if (!o || !reason)
        goto fail;
    /* A copy of a value of the flag: the detail may be read on another
     * thread than the one counting references to that value. */
    json_t *v = !d->value                                     ? json_null()
                : d->index < 0 || ld__json_immortal(d->value) ? json_incref(d->value)
                                                              : json_deep_copy(d->value);
    int rc = json_object_set_new(o, "value", v);
    if (d->index >= 0)
        rc |= set_new(o, "variationIndex", json_integer(d->index));
    rc |= set_new(o, "reason", reason);
    reason = NULL;
    if (rc)
        goto fail;
    return o;
fail:
    json_decref(o);
    json_decref(reason);
    return NULL;
}
