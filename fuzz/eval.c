/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * fuzz/eval.c: libFuzzer target for the evaluator (include/ldasync/eval.h).
 *
 * Input: JSON text for the data, a NUL byte, JSON text for the context.
 * The data is either a data set {"features": {...}, "segments": {...}} or a
 * single flag, which becomes flag "f" (its "key" and "version" are set).
 * A data set the store refuses ends the run; a context that does not parse
 * is replaced by the user "u". Every flag of the data set (and "f", and a
 * key that does not exist) is evaluated for the context twice by one
 * evaluator (the second time from its compiled forms) and once by a fresh
 * evaluator, with every ld_value_type: the three details must be identical
 * JSON, agree with the accessors, and serve the fallback exactly when they
 * say so. The all-flags state is computed twice, with every option, and
 * must be identical both times. A mock big segment store (up to date) is
 * set so that big segments are consulted. Nothing may crash or leak.
 *
 * Uses the public API only (and the testing kit's mock big segment store).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>
#include <ldasync/ldasync.h>
#include <ldasync/testing.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "fuzz/eval.c:%d: check failed: %s\n", __LINE__, #cond); \
            abort();                                                                \
        }                                                                           \
    } while (0)

static struct event_base *g_base;

/* Waits for `f` (a new reference, not NULL) to complete. */
static ld_future *await(ld_future *f)
{
    CHECK(f != NULL);
    CHECK(ld_future_wait(f) == 0);
    CHECK(!ld_future_is_pending(f));
    return f;
}

/* The data set of the input's first part, or NULL. */
static json_t *data_of(const char *text, size_t len)
{
    json_t *j = json_loadb(text, len, JSON_DECODE_ANY, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    if (json_object_get(j, "features") || json_object_get(j, "segments"))
        return j;
    json_object_set_new(j, "key", json_string("f"));
    json_object_set_new(j, "version", json_integer(1));
    return json_pack("{s:{s:o}}", "features", "f", j);
}

/* The detail of `key` as JSON, checked against its accessors. */
static json_t *evaluate(ld_evaluator *ev, const char *key, ld_context *ctx, ld_value_type type)
{
    json_t *fallback = json_string("fallback");
    ld_future *f = await(ld_evaluator_detail(ev, key, ctx, type, json_incref(fallback)));
    CHECK(ld_future_is_fulfilled(f));
    const ld_detail *d = ld_future_ptr(f);
    CHECK(d != NULL);
    json_t *j = ld_detail_to_json(d);
    CHECK(j != NULL);
    json_t *reason = ld_detail_reason_to_json(d);
    CHECK(json_equal(reason, json_object_get(j, "reason")));
    json_decref(reason);
    const char *kind = json_string_value(json_object_get(json_object_get(j, "reason"), "kind"));
    CHECK(kind && strcmp(kind, ld_reason_kind_name(ld_detail_reason_kind(d))) == 0);
    int index = ld_detail_variation_index(d);
    json_t *jindex = json_object_get(j, "variationIndex");
    CHECK(index == (jindex ? (int)json_integer_value(jindex) : -1));
    /* the fallback is served exactly when there is no variation index */
    CHECK((index < 0) == (ld_detail_value(d) == fallback));
    if (ld_detail_reason_kind(d) == LD_REASON_ERROR) {
        CHECK(index < 0);
        CHECK(ld_detail_error(d) != LD_EVAL_ERROR_NONE);
    } else {
        CHECK(ld_detail_error(d) == LD_EVAL_ERROR_NONE);
    }
    if (ld_detail_reason_kind(d) != LD_REASON_RULE_MATCH)
        CHECK(ld_detail_rule_index(d) == -1 && ld_detail_rule_id(d) == NULL);
    if (ld_detail_reason_kind(d) != LD_REASON_PREREQUISITE_FAILED)
        CHECK(ld_detail_prerequisite_key(d) == NULL);
    ld_future_unref(f);
    json_decref(fallback);
    return j;
}

static json_t *all_flags(ld_evaluator *ev, ld_context *ctx, unsigned options)
{
    ld_future *f = await(ld_evaluator_all_flags(ev, ctx, options));
    CHECK(ld_future_is_fulfilled(f));
    json_t *j = json_incref(ld_future_json(f));
    CHECK(json_is_object(j));
    ld_future_unref(f);
    return j;
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t size)
{
    if (size > 8192)
        return 0;
    if (!g_base) {
        setenv("LDASYNC_NO_POOL", "1", 1);
        g_base = event_base_new();
        CHECK(g_base != NULL);
    }
    const char *text = (const char *)input;
    const char *nul = memchr(text, '\0', size);
    size_t data_len = nul ? (size_t)(nul - text) : size;
    json_t *data = data_of(text, data_len);
    if (!data || ld_data_validate(data, NULL) != 0) {
        json_decref(data);
        return 0;
    }
    ld_context *ctx = NULL;
    if (nul) {
        json_t *cj = json_loadb(nul + 1, size - data_len - 1, JSON_DECODE_ANY, NULL);
        ctx = ld_context_from_json(cj, NULL);
        json_decref(cj);
    }
    if (!ctx) {
        json_t *cj = json_pack("{s:s}", "key", "u");
        ctx = ld_context_from_json(cj, NULL);
        json_decref(cj);
    }
    CHECK(ctx != NULL);

    ld_store *store = ld_memory_store_new(g_base);
    CHECK(store != NULL);
    ld_future *init = await(ld_store_init(store, data));
    CHECK(ld_future_is_fulfilled(init));
    ld_future_unref(init);
    ld_big_segment_store *bss =
        ld_mock_big_segment_store_new(g_base, LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE);
    CHECK(bss != NULL);
    ld_evaluator *ev = ld_evaluator_new(store);
    ld_evaluator *fresh = ld_evaluator_new(store);
    CHECK(ev && fresh);
    CHECK(ld_evaluator_set_big_segment_store(ev, bss, 0) == 0);
    CHECK(ld_evaluator_set_big_segment_store(fresh, bss, 0) == 0);

    /* the keys: every flag (at most 16), "f" and one that does not exist */
    const char *keys[18];
    size_t n = 0;
    const char *key;
    json_t *item;
    json_object_foreach(json_object_get(data, "features"), key, item)
    {
        (void)item;
        if (n == 16)
            break;
        keys[n++] = key;
    }
    keys[n++] = "f";
    keys[n++] = "no such flag";
    for (size_t i = 0; i < n; i++) {
        for (int t = LD_VALUE_ANY; t <= LD_VALUE_STRING; t++) {
            json_t *a = evaluate(ev, keys[i], ctx, (ld_value_type)t);
            json_t *b = evaluate(ev, keys[i], ctx, (ld_value_type)t);
            json_t *c = evaluate(fresh, keys[i], ctx, (ld_value_type)t);
            CHECK(json_equal(a, b));
            CHECK(json_equal(a, c));
            json_decref(a);
            json_decref(b);
            json_decref(c);
        }
    }
    for (unsigned options = 0; options < 8; options++) {
        json_t *a = all_flags(ev, ctx, options);
        json_t *b = all_flags(fresh, ctx, options);
        CHECK(json_equal(a, b));
        CHECK(json_is_true(json_object_get(a, "$valid")));
        json_decref(a);
        json_decref(b);
    }

    ld_evaluator_free(ev);
    ld_evaluator_free(fresh);
    ld_big_segment_store_free(bss);
    ld_store_free(store);
    event_base_loop(g_base, EVLOOP_NONBLOCK);
    ld_context_unref(ctx);
    json_decref(data);
    return 0;
}
