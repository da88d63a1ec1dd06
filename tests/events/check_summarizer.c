/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The summary of evaluations (lib/events/summarizer.c): the summary event
 * LaunchDarkly's SDKs send, compared field by field:
 * counts over many records, several versions of a flag, unknown flags,
 * the reset at each flush, the union of context kinds; recording without
 * allocating once things have been seen; and every allocation failing in
 * turn.
 */
#include <check.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/context.h>
#include <ldasync/error.h>

#include "check_fail_alloc.h"
#include "check_suites.h"
#include "events/events-internal.h"

static ld_context *ctx_of(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ld_context *c = ld_context_from_json(j, NULL);
    ck_assert_ptr_nonnull(c);
    json_decref(j);
    return c;
}

static ld_context *user(void)
{
    return ctx_of("{\"kind\":\"user\",\"key\":\"u\"}");
}

/* Records with a key given as a C string. */
static int rec(struct ld__summarizer *s, const char *key, int64_t version, int variation,
               json_t *value, json_t *def, const ld_context *c, int64_t now)
{
    return ld__summarizer_record(s, key, strlen(key), version, variation, value, def, c, now);
}

/* Flushes `s` and checks the summary equals `want` (JSON text; NULL: no
 * summary), objects field by field, arrays in order. */
static void check_flush(struct ld__summarizer *s, const char *want)
{
    json_t *got = (json_t *)1;
    ck_assert_int_eq(ld__summarizer_flush(s, &got), 0);
    if (!want) {
        ck_assert_ptr_null(got);
        return;
    }
    ck_assert_ptr_nonnull(got);
    json_t *w = json_loads(want, 0, NULL);
    ck_assert_ptr_nonnull(w);
    char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
    ck_assert_msg(json_equal(got, w), "\n got  %s\n want %s", g, want);
    free(g);
    json_decref(w);
    json_decref(got);
}

START_TEST(test_empty)
{
    struct ld__summarizer *s = ld__summarizer_new();
    ck_assert_ptr_nonnull(s);
    ck_assert(ld__summarizer_empty(s));
    check_flush(s, NULL);
    ld__summarizer_free(s);
}
END_TEST

/* Counts over many records of two variations; start and end the earliest
 * and latest times, whatever the order they come in. */
START_TEST(test_counts_many_records)
{
    struct ld__summarizer *s = ld__summarizer_new();
    ld_context *u = user();
    json_t *on = json_string("on"), *off = json_string("off"), *def = json_string("dflt");
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(
            rec(s, "f", 3, i % 3 == 0, i % 3 == 0 ? on : off, def, u, 1000 + (i * 7919) % 1000), 0);
    ck_assert(!ld__summarizer_empty(s));
    check_flush(s, "{\"kind\":\"summary\",\"startDate\":1000,\"endDate\":1999,\"features\":"
                   "{\"f\":{\"default\":\"dflt\",\"contextKinds\":[\"user\"],\"counters\":["
                   "{\"value\":\"on\",\"count\":334,\"variation\":1,\"version\":3},"
                   "{\"value\":\"off\",\"count\":666,\"variation\":0,\"version\":3}]}}}");
    ck_assert(ld__summarizer_empty(s));
    json_decref(on);
    json_decref(off);
    json_decref(def);
    ld_context_unref(u);
    ld__summarizer_free(s);
}
END_TEST

/* One counter per (variation, version), an older version after a newer
 * included; the value of each the first seen, the default the first. */
START_TEST(test_several_versions)
{
    struct ld__summarizer *s = ld__summarizer_new();
    ld_context *u = user();
    json_t *a = json_integer(10), *b = json_integer(20), *d1 = json_integer(0),
           *d2 = json_integer(-1);
    ck_assert_int_eq(rec(s, "f", 1, 0, a, d1, u, 5), 0);
    ck_assert_int_eq(rec(s, "f", 2, 0, b, d2, u, 6), 0); /* value b first for (0, 2) */
    ck_assert_int_eq(rec(s, "f", 1, 1, b, d2, u, 7), 0); /* older version after newer */
    ck_assert_int_eq(rec(s, "f", 2, 0, a, d2, u, 8), 0);
    ck_assert_int_eq(rec(s, "f", 1, 0, b, d2, u, 9), 0);
    ck_assert_int_eq(rec(s, "f", 0, 0, a, d2, u, 9), 0); /* version 0 is a version */
    check_flush(s, "{\"kind\":\"summary\",\"startDate\":5,\"endDate\":9,\"features\":"
                   "{\"f\":{\"default\":0,\"contextKinds\":[\"user\"],\"counters\":["
                   "{\"value\":10,\"count\":2,\"variation\":0,\"version\":1},"
                   "{\"value\":20,\"count\":2,\"variation\":0,\"version\":2},"
                   "{\"value\":20,\"count\":1,\"variation\":1,\"version\":1},"
                   "{\"value\":10,\"count\":1,\"variation\":0,\"version\":0}]}}}");
    json_decref(a);
    json_decref(b);
    json_decref(d1);
    json_decref(d2);
    ld_context_unref(u);
    ld__summarizer_free(s);
}
END_TEST

/* A flag not found: "unknown": true, no version, no variation, its value
 * the default; a known flag serving the default has a version and no
 * variation; NULL values are null. Several flags side by side. */
START_TEST(test_unknown_flag)
{
    struct ld__summarizer *s = ld__summarizer_new();
    ld_context *u = user();
    json_t *d = json_string("d");
    ck_assert_int_eq(rec(s, "missing", LD__NO_VERSION, LD__NO_VARIATION, d, d, u, 1), 0);
    ck_assert_int_eq(rec(s, "missing", LD__NO_VERSION, LD__NO_VARIATION, d, d, u, 2), 0);
    ck_assert_int_eq(rec(s, "off", 7, LD__NO_VARIATION, d, d, u, 3), 0);
    ck_assert_int_eq(rec(s, "nulls", LD__NO_VERSION, LD__NO_VARIATION, NULL, NULL, u, 3), 0);
    check_flush(s, "{\"kind\":\"summary\",\"startDate\":1,\"endDate\":3,\"features\":{"
                   "\"missing\":{\"default\":\"d\",\"contextKinds\":[\"user\"],\"counters\":["
                   "{\"value\":\"d\",\"count\":2,\"unknown\":true}]},"
                   "\"off\":{\"default\":\"d\",\"contextKinds\":[\"user\"],\"counters\":["
                   "{\"value\":\"d\",\"count\":1,\"version\":7}]},"
                   "\"nulls\":{\"default\":null,\"contextKinds\":[\"user\"],\"counters\":["
                   "{\"value\":null,\"count\":1,\"unknown\":true}]}}}");
    json_decref(d);
    ld_context_unref(u);
    ld__summarizer_free(s);
}
END_TEST

/* A flush resets the counts, the dates, the first values and defaults and
 * the kinds: the next summary has only what came after. */
START_TEST(test_reset_between_flushes)
{
    struct ld__summarizer *s = ld__summarizer_new();
    ld_context *u = user(), *o = ctx_of("{\"kind\":\"org\",\"key\":\"o\"}");
    json_t *d1 = json_string("d1"), *d2 = json_string("d2");
    ck_assert_int_eq(rec(s, "a", LD__NO_VERSION, LD__NO_VARIATION, d1, d1, u, 100), 0);
    ck_assert_int_eq(rec(s, "b", 1, 0, json_true(), d1, u, 100), 0);
    check_flush(s, "{\"kind\":\"summary\",\"startDate\":100,\"endDate\":100,\"features\":{"
                   "\"a\":{\"default\":\"d1\",\"contextKinds\":[\"user\"],\"counters\":["
                   "{\"value\":\"d1\",\"count\":1,\"unknown\":true}]},"
                   "\"b\":{\"default\":\"d1\",\"contextKinds\":[\"user\"],\"counters\":["
                   "{\"value\":true,\"count\":1,\"variation\":0,\"version\":1}]}}}");
    check_flush(s, NULL);
    ck_assert_int_eq(rec(s, "a", LD__NO_VERSION, LD__NO_VARIATION, d2, d2, o, 200), 0);
    ck_assert_int_eq(rec(s, "a", LD__NO_VERSION, LD__NO_VARIATION, d1, d1, o, 300), 0);
    check_flush(s, "{\"kind\":\"summary\",\"startDate\":200,\"endDate\":300,\"features\":{"
                   "\"a\":{\"default\":\"d2\",\"contextKinds\":[\"org\"],\"counters\":["
                   "{\"value\":\"d2\",\"count\":2,\"unknown\":true}]}}}");
    /* b, idle for an interval, was dropped; it comes back as new */
    ck_assert_int_eq(rec(s, "b", 1, 0, json_false(), d2, u, 400), 0);
    check_flush(s, "{\"kind\":\"summary\",\"startDate\":400,\"endDate\":400,\"features\":{"
                   "\"b\":{\"default\":\"d2\",\"contextKinds\":[\"user\"],\"counters\":["
                   "{\"value\":false,\"count\":1,\"variation\":0,\"version\":1}]}}}");
    json_decref(d1);
    json_decref(d2);
    ld_context_unref(u);
    ld_context_unref(o);
    ld__summarizer_free(s);
}
END_TEST

/* contextKinds: each kind once, in byte order (LaunchDarkly's SDKs keep
 * them in a set: no order), multi-kind contexts contributing each of
 * theirs; none for a NULL context. */
START_TEST(test_context_kinds_union)
{
    struct ld__summarizer *s = ld__summarizer_new();
    ld_context *u = user(),
               *m = ctx_of("{\"kind\":\"multi\",\"user\":{\"key\":\"u\"},"
                           "\"org\":{\"key\":\"o\"}}"),
               *d = ctx_of("{\"kind\":\"device\",\"key\":\"d\"}");
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, u, 1), 0);
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, m, 1), 0);
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, d, 1), 0);
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, u, 1), 0);
    ck_assert_int_eq(rec(s, "g", 1, 0, NULL, NULL, NULL, 1), 0);
    check_flush(s, "{\"kind\":\"summary\",\"startDate\":1,\"endDate\":1,\"features\":{"
                   "\"f\":{\"default\":null,\"contextKinds\":[\"device\",\"org\",\"user\"],"
                   "\"counters\":[{\"value\":null,\"count\":4,\"variation\":0,\"version\":1}]},"
                   "\"g\":{\"default\":null,\"contextKinds\":[],"
                   "\"counters\":[{\"value\":null,\"count\":1,\"variation\":0,\"version\":1}]}}}");
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, d, 2), 0);
    check_flush(s, "{\"kind\":\"summary\",\"startDate\":2,\"endDate\":2,\"features\":{"
                   "\"f\":{\"default\":null,\"contextKinds\":[\"device\"],"
                   "\"counters\":[{\"value\":null,\"count\":1,\"variation\":0,\"version\":1}]}}}");
    ld_context_unref(u);
    ld_context_unref(m);
    ld_context_unref(d);
    ld__summarizer_free(s);
}
END_TEST

/* A multi-kind context of the kinds k<from>..k<to - 1> (4 digits). */
static ld_context *kinds_ctx(int from, int to)
{
    json_t *j = json_pack("{s:s}", "kind", "multi");
    char kind[16];
    for (int i = from; i < to; i++) {
        snprintf(kind, sizeof kind, "k%04d", i);
        json_object_set_new(j, kind, json_pack("{s:s}", "key", "x"));
    }
    ld_context *c = ld_context_from_json(j, NULL);
    ck_assert_ptr_nonnull(c);
    json_decref(j);
    return c;
}

/* Contexts of many kinds: the union is right (each kind once, in order),
 * and a context whose kinds were all seen records without allocating. */
START_TEST(test_many_kinds)
{
    struct ld__summarizer *s = ld__summarizer_new();
    ld_context *a = kinds_ctx(0, 1000), *b = kinds_ctx(500, 1500), *c = kinds_ctx(1490, 1491);
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, b, 1), 0);
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, a, 1), 0);
    CHAOS_BEGIN(1);
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, a, 1), 0);
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, c, 1), 0);
    ck_assert_msg(!chaos_end(1), "recording seen kinds allocated");
    json_t *out = NULL;
    ck_assert_int_eq(ld__summarizer_flush(s, &out), 0);
    json_t *kinds =
        json_object_get(json_object_get(json_object_get(out, "features"), "f"), "contextKinds");
    ck_assert_int_eq(json_array_size(kinds), 1500);
    char kind[16];
    for (int i = 0; i < 1500; i++) {
        snprintf(kind, sizeof kind, "k%04d", i);
        ck_assert_str_eq(json_string_value(json_array_get(kinds, (size_t)i)), kind);
    }
    json_decref(out);
    ld_context_unref(a);
    ld_context_unref(b);
    ld_context_unref(c);
    ld__summarizer_free(s);
}
END_TEST

/* A fixed buffer for ld__summary_dump(). */
struct sbuf {
    char *p;
    size_t len, cap;
};

static int sbuf_put(const char *text, size_t n, void *arg)
{
    struct sbuf *b = arg;
    if (n >= b->cap - b->len)
        return -1;
    memcpy(b->p + b->len, text, n);
    b->len += n;
    return 0;
}

/* Many flags (the table grows), keys with NUL bytes and large variation
 * indices (found by a scan, INT_MAX too): each counted apart. */
START_TEST(test_many_flags_and_odd_keys)
{
    struct ld__summarizer *s = ld__summarizer_new();
    char key[32];
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 500; i++) {
            snprintf(key, sizeof key, "flag-%d", i);
            ck_assert_int_eq(rec(s, key, i, i % 5, NULL, NULL, NULL, 1), 0);
        }
    /* the largest variation index, then a newer version (which remaps) */
    ck_assert_int_eq(rec(s, "big", 5, INT_MAX, NULL, NULL, NULL, 1), 0);
    ck_assert_int_eq(rec(s, "big", 6, 0, NULL, NULL, NULL, 1), 0);
    ck_assert_int_eq(rec(s, "big", 5, INT_MAX, NULL, NULL, NULL, 1), 0);
    json_t *got = NULL;
    ck_assert_int_eq(ld__summarizer_flush(s, &got), 0);
    json_t *features = json_object_get(got, "features");
    ck_assert_int_eq(json_object_size(features), 501);
    json_t *big = json_object_get(json_object_get(features, "big"), "counters");
    ck_assert_int_eq(json_array_size(big), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(big, 0), "variation")),
                     INT_MAX);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(big, 0), "count")), 2);
    for (int i = 0; i < 500; i++) {
        snprintf(key, sizeof key, "flag-%d", i);
        json_t *c = json_array_get(json_object_get(json_object_get(features, key), "counters"), 0);
        ck_assert_int_eq(json_integer_value(json_object_get(c, "count")), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(c, "version")), i);
        ck_assert_int_eq(json_integer_value(json_object_get(c, "variation")), i % 5);
    }
    json_decref(got);
    /* Keys with NUL bytes (jansson cannot read them back as object keys:
     * the text is compared). */
    ck_assert_int_eq(ld__summarizer_record(s, "a\0b", 3, 1, 5000, NULL, NULL, NULL, 1), 0);
    ck_assert_int_eq(ld__summarizer_record(s, "a\0c", 3, 1, 5000, NULL, NULL, NULL, 1), 0);
    ck_assert_int_eq(ld__summarizer_record(s, "a\0c", 3, 1, 5000, NULL, NULL, NULL, 1), 0);
    struct ld__summary *sum = NULL;
    ck_assert_int_eq(ld__summarizer_take(s, &sum), 0);
    char text[1024];
    struct sbuf t = {text, 0, sizeof text};
    ck_assert_int_eq(ld__summary_dump(sum, sbuf_put, &t), 0);
    text[t.len] = '\0';
    ck_assert_str_eq(text, "{\"kind\":\"summary\",\"startDate\":1,\"endDate\":1,\"features\":{"
                           "\"a\\u0000b\":{\"default\":null,\"contextKinds\":[],\"counters\":["
                           "{\"value\":null,\"count\":1,\"variation\":5000,\"version\":1}]},"
                           "\"a\\u0000c\":{\"default\":null,\"contextKinds\":[],\"counters\":["
                           "{\"value\":null,\"count\":2,\"variation\":5000,\"version\":1}]}}}");
    ld__summary_free(sum);
    ld__summarizer_free(s);
}
END_TEST

START_TEST(test_invalid_arguments)
{
    struct ld__summarizer *s = ld__summarizer_new();
    json_t *out = NULL;
    ck_assert_int_eq(ld__summarizer_record(NULL, "f", 1, 1, 0, NULL, NULL, NULL, 1), LD_EINVAL);
    ck_assert_int_eq(ld__summarizer_record(s, NULL, 1, 1, 0, NULL, NULL, NULL, 1), LD_EINVAL);
    ck_assert_int_eq(ld__summarizer_flush(NULL, &out), LD_EINVAL);
    ck_assert_int_eq(ld__summarizer_flush(s, NULL), LD_EINVAL);
    struct ld__summary *sum = (struct ld__summary *)1;
    ck_assert_int_eq(ld__summarizer_take(NULL, &sum), LD_EINVAL);
    ck_assert_int_eq(ld__summarizer_take(s, NULL), LD_EINVAL);
    ck_assert_int_eq(ld__summarizer_take(s, &sum), 0);
    ck_assert_ptr_null(sum); /* nothing recorded */
    ck_assert_int_eq(ld__summary_dump(NULL, sbuf_put, NULL), LD_EINVAL);
    ld__summary_free(NULL);
    ck_assert(ld__summarizer_empty(NULL));
    ld__summarizer_free(s);
    ld__summarizer_free(NULL);
}
END_TEST

/* The values are held by reference: the summarizer keeps them alive, and
 * gives its references back at the flush. */
START_TEST(test_values_held_by_reference)
{
    struct ld__summarizer *s = ld__summarizer_new();
    json_t *v = json_string("v"), *d = json_string("d");
    ck_assert_int_eq(rec(s, "f", 1, 0, v, d, NULL, 1), 0);
    ck_assert_int_eq(v->refcount, 2);
    ck_assert_int_eq(d->refcount, 2);
    ck_assert_int_eq(rec(s, "f", 1, 0, v, d, NULL, 1), 0); /* no new references */
    ck_assert_int_eq(v->refcount, 2);
    json_t *out = NULL;
    ck_assert_int_eq(ld__summarizer_flush(s, &out), 0);
    ck_assert_int_eq(v->refcount, 1);
    ck_assert_int_eq(d->refcount, 1);
    ck_assert_ptr_ne(
        json_object_get(json_object_get(json_object_get(out, "features"), "f"), "default"),
        d); /* a copy */
    json_decref(out);
    json_decref(v);
    json_decref(d);
    ld__summarizer_free(s);
}
END_TEST

/* Once a flag, its pairs and kinds have been seen in two intervals (the
 * summarizer records into two tables in turn, one of them out with the
 * flush), recording allocates nothing (neither ldasync nor jansson), also
 * after a flush. */
START_TEST(test_steady_state_allocates_nothing)
{
    struct ld__summarizer *s = ld__summarizer_new();
    ld_context *m = ctx_of("{\"kind\":\"multi\",\"user\":{\"key\":\"u\"},\"org\":{\"key\":\"o\"}}");
    json_t *v[3] = {json_string("a"), json_string("b"), json_string("c")};
    for (int interval = 0; interval < 2; interval++) {
        for (int i = 0; i < 3; i++) {
            ck_assert_int_eq(rec(s, "f", 2, i, v[i], v[0], m, 1), 0);
            ck_assert_int_eq(rec(s, "g", LD__NO_VERSION, LD__NO_VARIATION, v[i], v[i], m, 1), 0);
        }
        if (interval == 0) {
            json_t *out = NULL;
            ck_assert_int_eq(ld__summarizer_flush(s, &out), 0);
            json_decref(out);
        }
    }
    for (int round = 0; round < 3; round++) {
        g_json = true;
        CHAOS_BEGIN(1);
        json_set_alloc_funcs(chaos_json_malloc, free);
        for (int i = 0; i < 3000; i++) {
            ck_assert_int_eq(rec(s, "f", 2, i % 3, v[i % 3], v[0], m, i), 0);
            ck_assert_int_eq(rec(s, "g", LD__NO_VERSION, LD__NO_VARIATION, v[0], v[0], m, i), 0);
        }
        bool allocated = chaos_end(1);
        json_set_alloc_funcs(malloc, free);
        g_json = false;
        ck_assert_msg(!allocated, "round %d: recording allocated", round);
        json_t *out = NULL;
        ck_assert_int_eq(ld__summarizer_flush(s, &out), 0);
        json_t *c =
            json_object_get(json_object_get(json_object_get(out, "features"), "f"), "counters");
        ck_assert_int_eq(json_array_size(c), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(c, 1), "count")),
                         round ? 1000 : 1001);
        json_decref(out);
    }
    for (int i = 0; i < 3; i++)
        json_decref(v[i]);
    ld_context_unref(m);
    ld__summarizer_free(s);
}
END_TEST

/* Every allocation failing in turn (the library's, then jansson's too):
 * each record counts or gives LD_ENOMEM having counted nothing, a flush
 * gives the summary or LD_ENOMEM having reset nothing; the summary in the
 * end is that of the records that counted. */
struct rec_args {
    const char *key;
    int64_t version;
    int variation;
    int kind; /* 0 user, 1 multi, 2 none */
};

static const struct rec_args RECS[] = {
    {"a", 1, 0, 0}, {"a", 1, 1, 1}, {"b", -1, -1, 0}, {"a", 2, 0, 1}, {"c", 3, 2000, 2},
    {"a", 1, 0, 0}, {"d", 1, 0, 1}, {"e", 1, 0, 0},   {"f", 1, 0, 0}, {"g", 1, 0, 0},
};
#define NRECS (sizeof RECS / sizeof RECS[0])

static void feed(struct ld__summarizer *s, ld_context *const *ctxs, json_t *value,
                 const bool *which, bool *counted, bool chaos)
{
    for (size_t i = 0; i < NRECS; i++) {
        if (which && !which[i])
            continue;
        const struct rec_args *r = &RECS[i];
        int rc = rec(s, r->key, r->version, r->variation, value, value,
                     r->kind < 2 ? ctxs[r->kind] : NULL, (int64_t)i);
        if (chaos)
            ck_assert(rc == 0 || rc == LD_ENOMEM);
        else
            ck_assert_int_eq(rc, 0);
        if (counted)
            counted[i] = rc == 0;
    }
}

/* A take that runs out of memory resets nothing: the next has it all. */
START_TEST(test_take_out_of_memory_resets_nothing)
{
    struct ld__summarizer *s = ld__summarizer_new();
    ld_context *u = user();
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, u, 5), 0);
    struct ld__summary *sum = NULL;
    CHAOS_BEGIN(1);
    int rc = ld__summarizer_take(s, &sum);
    ck_assert(chaos_end(1));
    ck_assert_int_eq(rc, LD_ENOMEM);
    ck_assert_ptr_null(sum);
    ck_assert(!ld__summarizer_empty(s));
    ck_assert_int_eq(ld__summarizer_take(s, &sum), 0);
    ck_assert_ptr_nonnull(sum);
    ck_assert(ld__summarizer_empty(s));
    char text[512];
    struct sbuf t = {text, 0, sizeof text};
    ck_assert_int_eq(ld__summary_dump(sum, sbuf_put, &t), 0);
    text[t.len] = '\0';
    ck_assert_ptr_nonnull(strstr(text, "\"count\":1"));
    /* a put that fails stops the dump */
    struct sbuf tiny = {text, 0, 8};
    ck_assert_int_eq(ld__summary_dump(sum, sbuf_put, &tiny), LD_ENOMEM);
    ld__summary_free(sum);
    ld_context_unref(u);
    ld__summarizer_free(s);
}
END_TEST

/* The summarizer remembers the flag and the context recorded last: a
 * flag's kinds are right whichever contexts come in turn, across flags,
 * across flushes, and after the context seen last is released by its
 * holder (the summarizer keeps it: no other takes its address). */
START_TEST(test_contexts_and_flags_in_turn)
{
    struct ld__summarizer *s = ld__summarizer_new();
    ld_context *u = user(), *o = ctx_of("{\"kind\":\"org\",\"key\":\"o\"}");
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, u, 1), 0);
    ck_assert_int_eq(rec(s, "g", 1, 0, NULL, NULL, u, 1), 0);
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, o, 1), 0);
    ck_assert_int_eq(rec(s, "g", 1, 0, NULL, NULL, u, 1), 0);
    json_t *got = NULL;
    ck_assert_int_eq(ld__summarizer_flush(s, &got), 0);
    json_t *f = json_object_get(json_object_get(got, "features"), "f");
    json_t *g = json_object_get(json_object_get(got, "features"), "g");
    ck_assert_int_eq(json_array_size(json_object_get(f, "contextKinds")), 2);
    ck_assert_int_eq(json_array_size(json_object_get(g, "contextKinds")), 1);
    json_decref(got);
    /* the next interval: "f" for the org only */
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, o, 2), 0);
    ld_context_unref(o); /* the summarizer still holds it */
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, o, 2), 0);
    ck_assert_int_eq(ld__summarizer_flush(s, &got), 0);
    json_t *kinds =
        json_object_get(json_object_get(json_object_get(got, "features"), "f"), "contextKinds");
    ck_assert_int_eq(json_array_size(kinds), 1);
    ck_assert_str_eq(json_string_value(json_array_get(kinds, 0)), "org");
    json_decref(got);
    ld_context_unref(u);
    ld__summarizer_free(s); /* lets go of the org */
}
END_TEST

/* A flag evaluated in every interval while its version changes (and its
 * contexts' kinds): what the summarizer keeps is what the last interval
 * counted, not every version and kind ever seen. */
START_TEST(test_what_is_kept_is_bounded_by_the_last_interval)
{
    struct ld__summarizer *s = ld__summarizer_new();
    char kind[32];
    for (int i = 0; i < 200; i++) {
        snprintf(kind, sizeof kind, "{\"kind\":\"k%d\",\"key\":\"x\"}", i);
        ld_context *c = ctx_of(kind);
        ck_assert_int_eq(rec(s, "f", i + 1, 0, NULL, NULL, c, i), 0);
        ld_context_unref(c);
        json_t *got = NULL;
        ck_assert_int_eq(ld__summarizer_flush(s, &got), 0);
        json_t *f = json_object_get(json_object_get(got, "features"), "f");
        ck_assert_int_eq(json_array_size(json_object_get(f, "counters")), 1);
        ck_assert_int_eq(json_integer_value(json_object_get(
                             json_array_get(json_object_get(f, "counters"), 0), "version")),
                         i + 1);
        json_decref(got);
        /* in each of its two tables: the flag, a counter, a kind */
        ck_assert_uint_le(ld__summarizer_held(s), 6);
    }
    ld__summarizer_free(s);
}
END_TEST

/* A take hands the interval's table over: what is recorded after it goes
 * to the next summary only; once a table was reset and given back, a take
 * allocates nothing (it takes that one); a summary not reset, or one more
 * than the summarizer keeps, is freed when given back; two summaries out
 * at once (a flush before the last one was written) both come out right. */
START_TEST(test_a_take_hands_the_table_over)
{
    struct ld__summarizer *s = ld__summarizer_new();
    ld_context *u = user();
    char text[2048];
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, u, 5), 0);
    struct ld__summary *a = NULL, *b = NULL;
    ck_assert_int_eq(ld__summarizer_take(s, &a), 0);
    ck_assert_ptr_nonnull(a);
    ck_assert(ld__summarizer_empty(s));
    /* the next interval, while `a` is out (its worker has not written it) */
    ck_assert_int_eq(rec(s, "f", 1, 0, NULL, NULL, u, 6), 0);
    ck_assert_int_eq(rec(s, "g", 1, 1, NULL, NULL, u, 6), 0);
    struct sbuf t = {text, 0, sizeof text};
    ck_assert_int_eq(ld__summary_dump(a, sbuf_put, &t), 0);
    text[t.len] = '\0';
    ck_assert_str_eq(text, "{\"kind\":\"summary\",\"startDate\":5,\"endDate\":5,\"features\":{"
                           "\"f\":{\"default\":null,\"contextKinds\":[\"user\"],\"counters\":["
                           "{\"value\":null,\"count\":1,\"variation\":0,\"version\":1}]}}}");
    /* a second flush before `a` came back: a second table is made */
    ck_assert_int_eq(ld__summarizer_take(s, &b), 0);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_ne(a, b);
    t.len = 0;
    ck_assert_int_eq(ld__summary_dump(b, sbuf_put, &t), 0);
    text[t.len] = '\0';
    ck_assert_ptr_nonnull(strstr(text, "\"startDate\":6,\"endDate\":6,"));
    ck_assert_ptr_nonnull(strstr(text, "\"g\":{"));
    ck_assert_ptr_nonnull(strstr(text, "\"f\":{"));
    /* both come back: the first is kept, the second freed (ASan and
     * valgrind see a leak otherwise); a second reset does nothing */
    ld__summary_reset(a);
    ld__summary_reset(a);
    ld__summary_reset(b);
    ld__summary_reset(NULL);
    ld__summarizer_reuse(s, a);
    ld__summarizer_reuse(s, b);
    ld__summarizer_reuse(s, NULL);
    /* the next take is of the table given back: no allocation */
    ck_assert_int_eq(rec(s, "f", 2, 1, NULL, NULL, u, 7), 0);
    struct ld__summary *c = NULL;
    CHAOS_BEGIN(1);
    int rc = ld__summarizer_take(s, &c);
    bool allocated = chaos_end(1);
    ck_assert_int_eq(rc, 0);
    ck_assert(!allocated);
    ck_assert_ptr_eq(c, a);
    t.len = 0;
    ck_assert_int_eq(ld__summary_dump(c, sbuf_put, &t), 0);
    text[t.len] = '\0';
    ck_assert_ptr_nonnull(strstr(text, "\"count\":1,\"variation\":1,\"version\":2}]}}}"));
    ck_assert_ptr_null(strstr(text, "\"g\""));
    /* one not reset is freed, not kept: the next take makes a table */
    ld__summarizer_reuse(s, c);
    ck_assert_int_eq(rec(s, "f", 2, 1, NULL, NULL, u, 8), 0);
    CHAOS_BEGIN(1);
    rc = ld__summarizer_take(s, &c);
    allocated = chaos_end(1);
    ck_assert_int_eq(rc, LD_ENOMEM);
    ck_assert(allocated);
    ck_assert_int_eq(ld__summarizer_take(s, &c), 0);
    /* given back to no summarizer (the processor was freed): freed */
    ld__summary_reset(c);
    ld__summarizer_reuse(NULL, c);
    ld_context_unref(u);
    ld__summarizer_free(s);
}
END_TEST

/* A summary still out when the summarizer is freed, and a summarizer
 * freed with a table given back, release what they hold. */
START_TEST(test_free_with_a_summary_out)
{
    json_t *v = json_string("v");
    struct ld__summarizer *s = ld__summarizer_new();
    ck_assert_int_eq(rec(s, "f", 1, 0, v, v, NULL, 1), 0);
    struct ld__summary *a = NULL, *b = NULL;
    ck_assert_int_eq(ld__summarizer_take(s, &a), 0);
    ck_assert_int_eq(rec(s, "f", 1, 0, v, v, NULL, 2), 0);
    ck_assert_int_eq(v->refcount, 5); /* ours, and a value and a default in each table */
    ld__summary_reset(a);
    /* the reset (the worker's) counts no reference: the values it took out
     * are released when the table is given back (on the loop) */
    ck_assert_int_eq(v->refcount, 5);
    ld__summarizer_reuse(s, a);
    ck_assert_int_eq(v->refcount, 3);
    ck_assert_int_eq(ld__summarizer_take(s, &b), 0);
    ck_assert_ptr_eq(b, a);
    ld__summarizer_free(s);
    ck_assert_int_eq(v->refcount, 3); /* `b` holds the last interval's */
    ld__summary_free(b);
    ck_assert_int_eq(v->refcount, 1);
    json_decref(v);
}
END_TEST

/* A reset with no memory for the list of the values it takes out leaves
 * the table as it was: given back, it is freed (its values released on
 * the loop), and the next take makes another. */
START_TEST(test_a_reset_without_memory_for_its_list_is_freed_when_given_back)
{
    json_t *v = json_string("v");
    struct ld__summarizer *s = ld__summarizer_new();
    ck_assert_int_eq(rec(s, "f", 1, 0, v, v, NULL, 1), 0);
    struct ld__summary *a = NULL, *b = NULL;
    ck_assert_int_eq(ld__summarizer_take(s, &a), 0);
    ck_assert_int_eq(v->refcount, 3);
    CHAOS_BEGIN(1);
    ld__summary_reset(a);
    bool allocated = chaos_end(1);
    ck_assert(allocated);
    ck_assert_int_eq(v->refcount, 3); /* nothing counted */
    ld__summarizer_reuse(s, a);       /* not reset: freed */
    ck_assert_int_eq(v->refcount, 1);
    ck_assert_int_eq(rec(s, "f", 1, 0, v, v, NULL, 2), 0);
    CHAOS_BEGIN(1);
    int rc = ld__summarizer_take(s, &b);
    allocated = chaos_end(1);
    ck_assert_int_eq(rc, LD_ENOMEM); /* no table was given back */
    ck_assert(allocated);
    ck_assert_int_eq(ld__summarizer_take(s, &b), 0);
    ck_assert_ptr_nonnull(b);
    ld__summary_reset(b);
    ld__summarizer_reuse(s, b);
    ld__summarizer_free(s);
    ck_assert_int_eq(v->refcount, 1);
    json_decref(v);
}
END_TEST

START_TEST(test_chaos)
{
    ld_context *ctxs[2] = {user(), ctx_of("{\"kind\":\"multi\",\"user\":{\"key\":\"u\"},"
                                          "\"org\":{\"key\":\"o\"}}")};
    json_t *value = json_pack("{s:[i,i]}", "x", 1, 2);
    for (int js = 0; js < 2; js++) {
        long n, failures = 0;
        for (n = 1; n < 100000; n++) {
            bool counted[NRECS];
            json_t *got = NULL;
            g_json = js;
            CHAOS_BEGIN(n);
            json_set_alloc_funcs(chaos_json_malloc, free);
            struct ld__summarizer *s = ld__summarizer_new();
            int frc = 0;
            if (s) {
                feed(s, ctxs, value, NULL, counted, true);
                frc = ld__summarizer_flush(s, &got);
                ck_assert(frc == 0 || frc == LD_ENOMEM);
            }
            bool failed = chaos_end(n);
            json_set_alloc_funcs(malloc, free);
            g_json = false;
            if (!s) {
                ck_assert_msg(failed, "N=%ld: no summarizer, no failure", n);
            } else {
                if (frc == LD_ENOMEM) { /* nothing was reset: the next flush has it */
                    ck_assert(failed);
                    ck_assert_ptr_null(got);
                    ck_assert_int_eq(ld__summarizer_flush(s, &got), 0);
                }
                struct ld__summarizer *ref = ld__summarizer_new();
                feed(ref, ctxs, value, counted, NULL, false);
                json_t *want = NULL;
                ck_assert_int_eq(ld__summarizer_flush(ref, &want), 0);
                char *g = got ? json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
                char *w = want ? json_dumps(want, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
                ck_assert_msg(want == got || json_equal(got, want),
                              "N=%ld (jansson %d): a wrong summary\n got  %s\n want %s", n, js,
                              g ? g : "none", w ? w : "none");
                free(g);
                free(w);
                json_decref(want);
                ld__summarizer_free(ref);
                json_decref(got);
                ld__summarizer_free(s);
            }
            if (!failed)
                break;
            failures++;
        }
        ck_assert_msg(failures > 10, "only %ld allocations failed", failures);
    }
    ck_assert_int_eq(value->refcount, 1);
    json_decref(value);
    ld_context_unref(ctxs[0]);
    ld_context_unref(ctxs[1]);
}
END_TEST

Suite *ld_suite_summarizer(void)
{
    Suite *s = suite_create("summarizer");
    TCase *tc = tcase_create("summary");
    tcase_add_test(tc, test_empty);
    tcase_add_test(tc, test_contexts_and_flags_in_turn);
    tcase_add_test(tc, test_what_is_kept_is_bounded_by_the_last_interval);
    tcase_add_test(tc, test_counts_many_records);
    tcase_add_test(tc, test_several_versions);
    tcase_add_test(tc, test_unknown_flag);
    tcase_add_test(tc, test_reset_between_flushes);
    tcase_add_test(tc, test_context_kinds_union);
    tcase_add_test(tc, test_many_kinds);
    tcase_add_test(tc, test_many_flags_and_odd_keys);
    tcase_add_test(tc, test_invalid_arguments);
    tcase_add_test(tc, test_values_held_by_reference);
    tcase_add_test(tc, test_steady_state_allocates_nothing);
    tcase_add_test(tc, test_take_out_of_memory_resets_nothing);
    tcase_add_test(tc, test_a_take_hands_the_table_over);
    tcase_add_test(tc, test_free_with_a_summary_out);
    tcase_add_test(tc, test_a_reset_without_memory_for_its_list_is_freed_when_given_back);
    tcase_add_test(tc, test_chaos);
    suite_add_tcase(s, tc);
    return s;
}
