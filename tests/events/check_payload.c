/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The payloads of analytics events (lib/events/payload.c): each kind of
 * record written as LaunchDarkly's SDKs write the event, compared field by
 * field (parsed back with jansson) with the object expected, the order of a
 * feature event's fields as text; escaping; the summary last; gzip
 * inflated back; every allocation failing in turn (nothing leaked); and a
 * write on another thread while this one counts references to the values
 * written.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include <ldasync/context.h>
#include <ldasync/error.h>
#include <ldasync/eval.h>
#include <ldasync/future.h>

#include "check_fail_alloc.h"
#include "check_suites.h"
#include "check_util.h"
#include "core/core-internal.h"
#include "events/events-internal.h"

#define J ld_test_j

/* ---- helpers -------------------------------------------------------------- */

/* The evaluation whose detail gives the records' reasons: flag "f", off,
 * serving variation 1 ({"kind":"OFF"}). */
struct eval_fixture {
    ld_store *store;
    ld_evaluator *ev;
    ld_context *ctx;
    ld_future *f;
};

static const ld_detail *off_detail(struct eval_fixture *e)
{
    json_t *data = ld_test_data_of("{'f':{'on':false,'variations':['a','b'],'offVariation':1,"
                                   "'fallthrough':{'variation':0}}}",
                                   NULL);
    e->store = ld_test_memory_with(data);
    json_decref(data);
    e->ev = ld_test_evaluator_of(e->store);
    e->ctx = ld_test_ctx_of("{'kind':'user','key':'u'}");
    e->f = ld_test_fulfilled(ld_evaluator_detail(e->ev, "f", e->ctx, LD_VALUE_STRING, NULL));
    const ld_detail *d = ld_future_ptr(e->f);
    ck_assert_ptr_nonnull(d);
    return d;
}

static void eval_done(struct eval_fixture *e)
{
    ld_future_unref(e->f);
    ld_context_unref(e->ctx);
    ld_test_done_with(e->ev, e->store);
}

static struct ld__ev_record rec(enum ld__ev_kind kind, int64_t ms, const char *key, ld_context *ctx)
{
    struct ld__ev_record r;
    memset(&r, 0, sizeof r);
    r.kind = (uint8_t)kind;
    r.creation_ms = ms;
    r.key = key;
    r.key_len = key ? strlen(key) : 0;
    r.version = LD__NO_VERSION;
    r.variation = LD__NO_VARIATION;
    r.ctx = ctx;
    return r;
}

/* The summary of three evaluations of flag "f" (version 4) serving
 * variation 0 (true) for a user, default false, at 1, 2 and 2 ms. */
#define SUMMARY_F                                                                   \
    "{'kind':'summary','startDate':1,'endDate':2,'features':{'f':{'default':false," \
    "'contextKinds':['user'],'counters':[{'value':true,'count':3,'variation':0,'version':4}]}}}"

static struct ld__summary *summary_f(void)
{
    struct ld__summarizer *z = ld__summarizer_new();
    ld_context *u = ld_test_ctx_of("{'kind':'user','key':'u'}");
    int64_t when[3] = {1, 2, 2};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(
            ld__summarizer_record(z, "f", 1, 4, 0, json_true(), json_false(), u, when[i]), 0);
    struct ld__summary *sum = NULL;
    ck_assert_int_eq(ld__summarizer_take(z, &sum), 0);
    ck_assert_ptr_nonnull(sum);
    ld__summarizer_free(z);
    ld_context_unref(u);
    return sum;
}

/* The plain text of a payload (the caller frees it with ld__free()). */
static char *write_text(const struct ld__ctx_format *fmt, const struct ld__ev_record *recs,
                        size_t n, const struct ld__summary *summary, size_t *len)
{
    char *body = NULL;
    ck_assert_int_eq(ld__payload_write(fmt, recs, n, summary, false, &body, len), 0);
    ck_assert_ptr_nonnull(body);
    return body;
}

/* The payload parsed back; it must be an array of `n` events. */
static json_t *write_parsed(const struct ld__ctx_format *fmt, const struct ld__ev_record *recs,
                            size_t n, const struct ld__summary *summary, size_t want_n)
{
    size_t len;
    char *body = write_text(fmt, recs, n, summary, &len);
    json_error_t err;
    json_t *got = json_loadb(body, len, 0, &err);
    ck_assert_msg(got != NULL, "not JSON (%s): %.*s", err.text, (int)len, body);
    ck_assert_msg(json_is_array(got) && json_array_size(got) == want_n, "want %zu events: %.*s",
                  want_n, (int)len, body);
    ld__free(body);
    return got;
}

/* Asserts that `got` (borrowed) equals the JSON text `want` (' for "). */
static void expect(const char *what, const json_t *got, const char *want)
{
    json_t *w = J(want);
    if (!json_equal((json_t *)got, w)) {
        char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
        char *x = json_dumps(w, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
        ck_abort_msg("%s:\n  got  %s\n  want %s", what, g ? g : "?", x ? x : "?");
    }
    json_decref(w);
}

/* The gzip member `in` inflated (zlib, windowBits 15 + 32: gzip
 * detected); the caller frees it with free(). */
static char *inflate_all(const char *in, size_t len, size_t *out_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    ck_assert_int_eq(inflateInit2(&zs, 15 + 32), Z_OK);
    size_t cap = len * 4 + 64, done = 0;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.avail_in = (uInt)len;
    int rc;
    do {
        if (done == cap) {
            cap *= 2;
            out = realloc(out, cap);
            ck_assert_ptr_nonnull(out);
        }
        zs.next_out = (Bytef *)out + done;
        zs.avail_out = (uInt)(cap - done);
        uInt before = zs.avail_out;
        rc = inflate(&zs, Z_NO_FLUSH);
        done += before - zs.avail_out;
        ck_assert_msg(rc == Z_OK || rc == Z_STREAM_END || (rc == Z_BUF_ERROR && done == cap),
                      "inflate: %d", rc);
    } while (rc != Z_STREAM_END);
    ck_assert_uint_eq(zs.avail_in, 0); /* one member, nothing after it */
    inflateEnd(&zs);
    *out_len = done;
    return out;
}

#define USER_U "{'kind':'user','key':'u'}"
#define ANON "{'kind':'user','key':'a','anonymous':true,'name':'N','email':'e'}"
#define ANON_SHOWN "{'kind':'user','key':'a','anonymous':true,'name':'N','email':'e'}"
#define ANON_REDACTED                            \
    "{'kind':'user','key':'a','anonymous':true," \
    "'_meta':{'redactedAttributes':['name','email']}}"

/* ---- feature and debug events --------------------------------------------- */

/* Every field of a feature event, in the order LaunchDarkly's SDKs write
 * them: the text itself compared. */
START_TEST(test_feature_all_fields_in_order)
{
    struct eval_fixture e;
    const ld_detail *d = off_detail(&e);
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    ck_assert_ptr_nonnull(fmt);
    ld_context *ctx = ld_test_ctx_of(USER_U);
    json_t *value = json_string("on"), *dflt = json_string("off");
    struct ld__ev_record r = rec(LD__EV_FEATURE, 1700000000123, "flag", ctx);
    r.version = 3;
    r.variation = 1;
    r.value = value;
    r.dflt = dflt;
    r.reason = d;
    r.prereq_of = "parent";
    r.prereq_of_len = 6;
    size_t len;
    char *body = write_text(fmt, &r, 1, NULL, &len);
    const char *want = "[{\"kind\":\"feature\",\"creationDate\":1700000000123,\"key\":\"flag\","
                       "\"version\":3,\"context\":{\"kind\":\"user\",\"key\":\"u\"},"
                       "\"value\":\"on\",\"variation\":1,\"default\":\"off\","
                       "\"reason\":{\"kind\":\"OFF\"},\"prereqOf\":\"parent\"}]";
    ck_assert_uint_eq(len, strlen(want));
    ck_assert_msg(memcmp(body, want, len) == 0, "got  %.*s\nwant %s", (int)len, body, want);
    ld__free(body);
    json_decref(value);
    json_decref(dflt);
    ld_context_unref(ctx);
    ld__ctx_format_free(fmt);
    eval_done(&e);
}
END_TEST

/* Without version, variation, reason and prereqOf those fields are left
 * out; NULL value and default are null. */
START_TEST(test_feature_absent_fields_and_nulls)
{
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    ld_context *ctx = ld_test_ctx_of(USER_U);
    struct ld__ev_record r[2] = {rec(LD__EV_FEATURE, 5, "flag", ctx),
                                 rec(LD__EV_DEBUG, 6, "other", ctx)};
    r[1].version = 0; /* 0 is a version, and variation 0 a variation */
    r[1].variation = 0;
    json_t *got = write_parsed(fmt, r, 2, NULL, 2);
    expect("feature", json_array_get(got, 0),
           "{'kind':'feature','creationDate':5,'key':'flag','context':" USER_U
           ",'value':null,'default':null}");
    expect("debug", json_array_get(got, 1),
           "{'kind':'debug','creationDate':6,'key':'other','version':0,'context':" USER_U
           ",'value':null,'variation':0,'default':null}");
    json_decref(got);
    ld_context_unref(ctx);
    ld__ctx_format_free(fmt);
}
END_TEST

/* The reason, prereqOf, JSON values of every type and a 64-bit version and
 * date, parsed back. */
START_TEST(test_feature_reason_prereq_values)
{
    struct eval_fixture e;
    const ld_detail *d = off_detail(&e);
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    ld_context *ctx = ld_test_ctx_of(USER_U);
    json_t *value = J("{'a':[1,2.5,true,null,'x'],'b':{}}");
    json_t *dflt = J("[]");
    struct ld__ev_record r = rec(LD__EV_DEBUG, INT64_C(4102444800000), "f", ctx);
    r.version = INT64_C(9007199254740993);
    r.variation = 7;
    r.value = value;
    r.dflt = dflt;
    r.reason = d;
    r.prereq_of = "top";
    r.prereq_of_len = 3;
    json_t *got = write_parsed(fmt, &r, 1, NULL, 1);
    expect("debug", json_array_get(got, 0),
           "{'kind':'debug','creationDate':4102444800000,'key':'f','version':9007199254740993,"
           "'context':" USER_U ",'value':{'a':[1,2.5,true,null,'x'],'b':{}},'variation':7,"
           "'default':[],'reason':{'kind':'OFF'},'prereqOf':'top'}");
    json_decref(got);
    json_decref(value);
    json_decref(dflt);
    ld_context_unref(ctx);
    ld__ctx_format_free(fmt);
    eval_done(&e);
}
END_TEST

/* ---- contexts ------------------------------------------------------------- */

/* An anonymous context is redacted in feature and custom events, not in
 * debug, index and identify events. */
START_TEST(test_anonymous_redacted_in_feature_and_custom_only)
{
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    ld_context *ctx = ld_test_ctx_of(ANON);
    struct ld__ev_record r[5] = {
        rec(LD__EV_FEATURE, 1, "f", ctx), rec(LD__EV_DEBUG, 2, "f", ctx),
        rec(LD__EV_INDEX, 3, NULL, ctx),  rec(LD__EV_IDENTIFY, 4, NULL, ctx),
        rec(LD__EV_CUSTOM, 5, "c", ctx),
    };
    json_t *got = write_parsed(fmt, r, 5, NULL, 5);
    expect("feature", json_array_get(got, 0),
           "{'kind':'feature','creationDate':1,'key':'f','context':" ANON_REDACTED
           ",'value':null,'default':null}");
    expect("debug", json_array_get(got, 1),
           "{'kind':'debug','creationDate':2,'key':'f','context':" ANON_SHOWN
           ",'value':null,'default':null}");
    expect("index", json_array_get(got, 2),
           "{'kind':'index','creationDate':3,'context':" ANON_SHOWN "}");
    expect("identify", json_array_get(got, 3),
           "{'kind':'identify','creationDate':4,'context':" ANON_SHOWN "}");
    expect("custom", json_array_get(got, 4),
           "{'kind':'custom','creationDate':5,'key':'c','context':" ANON_REDACTED "}");
    json_decref(got);
    ld_context_unref(ctx);
    ld__ctx_format_free(fmt);
}
END_TEST

/* The formatting configuration applies: all attributes private. */
START_TEST(test_all_attributes_private)
{
    struct ld__ctx_format *fmt = ld__ctx_format_new(true, NULL, 0);
    ld_context *ctx = ld_test_ctx_of("{'kind':'org','key':'o','name':'N','tier':2}");
    struct ld__ev_record r[2] = {rec(LD__EV_IDENTIFY, 1, NULL, ctx),
                                 rec(LD__EV_FEATURE, 2, "f", ctx)};
    json_t *got = write_parsed(fmt, r, 2, NULL, 2);
    const char *redacted =
        "{'kind':'org','key':'o','_meta':{'redactedAttributes':['name','tier']}}";
    char want[512];
    snprintf(want, sizeof want, "{'kind':'identify','creationDate':1,'context':%s}", redacted);
    expect("identify", json_array_get(got, 0), want);
    snprintf(want, sizeof want,
             "{'kind':'feature','creationDate':2,'key':'f','context':%s,'value':null,"
             "'default':null}",
             redacted);
    expect("feature", json_array_get(got, 1), want);
    json_decref(got);
    ld_context_unref(ctx);
    ld__ctx_format_free(fmt);
}
END_TEST

/* A multi-kind context, its anonymous kind redacted in a feature event. */
START_TEST(test_multi_kind_context)
{
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    ld_context *ctx = ld_test_ctx_of("{'kind':'multi','user':{'key':'u','name':'A'},"
                                     "'org':{'key':'o','anonymous':true,'name':'B'}}");
    struct ld__ev_record r[2] = {rec(LD__EV_FEATURE, 1, "f", ctx), rec(LD__EV_INDEX, 2, NULL, ctx)};
    json_t *got = write_parsed(fmt, r, 2, NULL, 2);
    expect("feature", json_array_get(got, 0),
           "{'kind':'feature','creationDate':1,'key':'f','context':{'kind':'multi',"
           "'org':{'key':'o','anonymous':true,'_meta':{'redactedAttributes':['name']}},"
           "'user':{'key':'u','name':'A'}},'value':null,'default':null}");
    expect("index", json_array_get(got, 1),
           "{'kind':'index','creationDate':2,'context':{'kind':'multi',"
           "'org':{'key':'o','anonymous':true,'name':'B'},'user':{'key':'u','name':'A'}}}");
    json_decref(got);
    ld_context_unref(ctx);
    ld__ctx_format_free(fmt);
}
END_TEST

/* ---- custom, raw, strings --------------------------------------------------- */

/* "data" only with data, "metricValue" only with a metric, as a number
 * that reads back as the same double. */
START_TEST(test_custom_data_and_metric)
{
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    ld_context *ctx = ld_test_ctx_of(USER_U);
    json_t *data = J("{'x':[1,'two']}");
    const double metrics[] = {0.1, 1.5, -2.0, 1e300, 123456789.123456789, 5e-324};
    enum { NM = sizeof metrics / sizeof metrics[0] };
    struct ld__ev_record r[NM + 2];
    r[0] = rec(LD__EV_CUSTOM, 1, "bare", ctx);
    r[1] = rec(LD__EV_CUSTOM, 2, "data", ctx);
    r[1].dflt = data;
    for (size_t i = 0; i < NM; i++) {
        r[2 + i] = rec(LD__EV_CUSTOM, 3, "m", ctx);
        r[2 + i].has_metric = true;
        r[2 + i].metric = metrics[i];
    }
    r[2].dflt = data; /* both */
    json_t *got = write_parsed(fmt, r, NM + 2, NULL, NM + 2);
    expect("bare", json_array_get(got, 0),
           "{'kind':'custom','creationDate':1,'key':'bare','context':" USER_U "}");
    expect("data", json_array_get(got, 1),
           "{'kind':'custom','creationDate':2,'key':'data','context':" USER_U
           ",'data':{'x':[1,'two']}}");
    for (size_t i = 0; i < NM; i++) {
        json_t *ev = json_array_get(got, 2 + i);
        json_t *m = json_object_get(ev, "metricValue");
        ck_assert_msg(json_is_number(m), "metric %zu missing", i);
        ck_assert_msg(json_number_value(m) == metrics[i], "metric %.17g read back as %.17g",
                      metrics[i], json_number_value(m));
        ck_assert_uint_eq(json_object_size(ev), i == 0 ? 6 : 5);
    }
    expect("data and metric", json_array_get(got, 2),
           "{'kind':'custom','creationDate':3,'key':'m','context':" USER_U
           ",'data':{'x':[1,'two']},'metricValue':0.1}");
    json_decref(got);
    json_decref(data);
    ld_context_unref(ctx);
    ld__ctx_format_free(fmt);
}
END_TEST

/* Keys with quotes, backslashes, control characters, a NUL and non-ASCII
 * characters are escaped: they read back as the same bytes. */
START_TEST(test_strings_escaped)
{
    static const char key[] = "q\"uo\\te\nnl\ttab\x01\x1f\x7f e\xc3\xa9 \xe2\x82\xac "
                              "\xf0\x9f\x98\x80 nul\0after </script>";
    static const char prereq[] = "\"\\\n\xc3\xa9";
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    ld_context *ctx = ld_test_ctx_of(USER_U);
    struct ld__ev_record r[2] = {rec(LD__EV_FEATURE, 1, NULL, ctx),
                                 rec(LD__EV_CUSTOM, 2, NULL, ctx)};
    for (int i = 0; i < 2; i++) {
        r[i].key = key;
        r[i].key_len = sizeof key - 1; /* the NUL inside included */
    }
    r[0].prereq_of = prereq;
    r[0].prereq_of_len = sizeof prereq - 1;
    size_t len;
    char *body = write_text(fmt, r, 2, NULL, &len);
    ck_assert_ptr_null(memchr(body, '\n', len)); /* compact, and escaped */
    ck_assert_ptr_null(memchr(body, '\0', len));
    json_t *got = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
    ck_assert_ptr_nonnull(got);
    for (int i = 0; i < 2; i++) {
        json_t *k = json_object_get(json_array_get(got, (size_t)i), "key");
        ck_assert_uint_eq(json_string_length(k), sizeof key - 1);
        ck_assert(memcmp(json_string_value(k), key, sizeof key - 1) == 0);
    }
    json_t *p = json_object_get(json_array_get(got, 0), "prereqOf");
    ck_assert_str_eq(json_string_value(p), prereq);
    json_decref(got);
    ld__free(body);
    ld_context_unref(ctx);
    ld__ctx_format_free(fmt);
}
END_TEST

/* A raw event is written as it is, where it comes. */
/* Events in a row sharing a context (with and without anonymous
 * redaction) and a flag key: each written as if alone, whatever comes
 * between (the writer copies what it wrote for the one before). */
START_TEST(test_shared_contexts_and_keys_written_as_alone)
{
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    ld_context *a = ld_test_ctx_of(ANON), *u = ld_test_ctx_of(USER_U);
    const char *key = "flag-\"k\"";
    struct ld__ev_record r[7] = {rec(LD__EV_FEATURE, 1, key, a), rec(LD__EV_INDEX, 2, NULL, a),
                                 rec(LD__EV_FEATURE, 3, key, a), rec(LD__EV_DEBUG, 4, key, a),
                                 rec(LD__EV_FEATURE, 5, key, u), rec(LD__EV_FEATURE, 6, key, a),
                                 rec(LD__EV_CUSTOM, 7, key, a)};
    json_t *all = write_parsed(fmt, r, 7, NULL, 7);
    for (size_t i = 0; i < 7; i++) {
        json_t *alone = write_parsed(fmt, &r[i], 1, NULL, 1);
        ck_assert_msg(json_equal(json_array_get(all, i), json_array_get(alone, 0)),
                      "event %zu differs", i);
        json_decref(alone);
    }
    /* and what they are: the anonymous context redacted in feature events
     * only, the key escaped */
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(all, 5), "key")),
                     "flag-\"k\"");
    expect("feature", json_object_get(json_array_get(all, 5), "context"), ANON_REDACTED);
    expect("debug", json_object_get(json_array_get(all, 3), "context"), ANON_SHOWN);
    expect("other", json_object_get(json_array_get(all, 4), "context"), USER_U);
    json_decref(all);
    ld_context_unref(a);
    ld_context_unref(u);
    ld__ctx_format_free(fmt);
}
END_TEST

START_TEST(test_raw_event)
{
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    ld_context *ctx = ld_test_ctx_of(USER_U);
    json_t *raw = J("{'kind':'custom','key':'k\\n','z':[1,{'a':null}],'contextKeys':{'user':'u'}}");
    struct ld__ev_record r[2] = {rec(LD__EV_INDEX, 1, NULL, ctx), rec(LD__EV_RAW, 0, NULL, NULL)};
    r[1].dflt = raw;
    size_t len;
    char *body = write_text(fmt, r, 2, NULL, &len);
    const char *want = "[{\"kind\":\"index\",\"creationDate\":1,\"context\":{\"kind\":\"user\","
                       "\"key\":\"u\"}},{\"kind\":\"custom\",\"key\":\"k\\n\",\"z\":[1,{\"a\":"
                       "null}],\"contextKeys\":{\"user\":\"u\"}}]";
    ck_assert_msg(len == strlen(want) && memcmp(body, want, len) == 0, "got  %.*s\nwant %s",
                  (int)len, body, want);
    ld__free(body);
    json_decref(raw);
    ld_context_unref(ctx);
    ld__ctx_format_free(fmt);
}
END_TEST

/* ---- the array ------------------------------------------------------------ */

/* The summary comes last, after the records in their order. */
START_TEST(test_summary_last)
{
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    ld_context *ctx = ld_test_ctx_of(USER_U);
    struct ld__summary *summary = summary_f();
    struct ld__ev_record r[3] = {rec(LD__EV_IDENTIFY, 1, NULL, ctx),
                                 rec(LD__EV_FEATURE, 2, "f", ctx), rec(LD__EV_CUSTOM, 3, "c", ctx)};
    json_t *got = write_parsed(fmt, r, 3, summary, 4);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(got, 0), "kind")),
                     "identify");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(got, 1), "kind")), "feature");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(got, 2), "kind")), "custom");
    expect("summary", json_array_get(got, 3), SUMMARY_F);
    json_decref(got);
    ld__summary_free(summary);
    ld_context_unref(ctx);
    ld__ctx_format_free(fmt);
}
END_TEST

/* No records: the summary alone, or "[]" without one. */
START_TEST(test_no_records)
{
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    struct ld__summary *summary = summary_f();
    size_t len;
    char *body = write_text(fmt, NULL, 0, summary, &len);
    const char *want = "[{\"kind\":\"summary\",\"startDate\":1,\"endDate\":2,\"features\":{\"f\":"
                       "{\"default\":false,\"contextKinds\":[\"user\"],\"counters\":[{\"value\":"
                       "true,\"count\":3,\"variation\":0,\"version\":4}]}}}]";
    ck_assert_msg(len == strlen(want) && memcmp(body, want, len) == 0, "got %.*s", (int)len, body);
    ld__free(body);
    body = write_text(fmt, NULL, 0, NULL, &len);
    ck_assert_uint_eq(len, 2);
    ck_assert(memcmp(body, "[]", 2) == 0);
    ld__free(body);
    ld__summary_free(summary);
    ld__ctx_format_free(fmt);
}
END_TEST

/* Arguments that are not a payload's. */
START_TEST(test_invalid_arguments)
{
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    char *body = (char *)"untouched";
    size_t len = 7;
    struct ld__ev_record r = rec(LD__EV_FEATURE, 1, "f", NULL);
    ck_assert_int_eq(ld__payload_write(NULL, NULL, 0, NULL, false, &body, &len), LD_EINVAL);
    ck_assert_int_eq(ld__payload_write(fmt, NULL, 0, NULL, false, NULL, &len), LD_EINVAL);
    ck_assert_int_eq(ld__payload_write(fmt, NULL, 0, NULL, false, &body, NULL), LD_EINVAL);
    ck_assert_int_eq(ld__payload_write(fmt, NULL, 1, NULL, false, &body, &len), LD_EINVAL);
    ck_assert_int_eq(ld__payload_write(fmt, &r, 1, NULL, false, &body, &len), LD_EINVAL);
    r.kind = LD__EV_RAW + 1;
    ck_assert_int_eq(ld__payload_write(fmt, &r, 1, NULL, false, &body, &len), LD_EINVAL);
    ck_assert_int_eq(ld__gzip("x", 1, NULL, &len), LD_EINVAL);
    ck_assert_int_eq(ld__gzip("x", 1, &body, NULL), LD_EINVAL);
    ck_assert_int_eq(ld__gzip(NULL, 1, &body, &len), LD_EINVAL);
    ck_assert_str_eq(body, "untouched");
    ck_assert_uint_eq(len, 7);
    ld__ctx_format_free(fmt);
}
END_TEST

/* ---- gzip ----------------------------------------------------------------- */

/* The gzip payload inflates back to the plain one. */
START_TEST(test_gzip_payload_inflates_to_text)
{
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    ld_context *ctx = ld_test_ctx_of(ANON);
    struct ld__summary *summary = summary_f();
    enum { N = 300 };
    struct ld__ev_record r[N];
    for (size_t i = 0; i < N; i++)
        r[i] = rec((enum ld__ev_kind)(i % 5), (int64_t)i, "some-flag", ctx);
    size_t plain_len, gz_len, back_len;
    char *plain = write_text(fmt, r, N, summary, &plain_len);
    char *gz = NULL;
    ck_assert_int_eq(ld__payload_write(fmt, r, N, summary, true, &gz, &gz_len), 0);
    ck_assert_uint_ge(gz_len, 18);
    ck_assert_int_eq((unsigned char)gz[0], 0x1f); /* the gzip magic */
    ck_assert_int_eq((unsigned char)gz[1], 0x8b);
    ck_assert_uint_lt(gz_len, plain_len / 4); /* it compresses */
    char *back = inflate_all(gz, gz_len, &back_len);
    ck_assert_uint_eq(back_len, plain_len);
    ck_assert(memcmp(back, plain, plain_len) == 0);
    free(back);
    ld__free(gz);
    ld__free(plain);
    ld__summary_free(summary);
    ld_context_unref(ctx);
    ld__ctx_format_free(fmt);
}
END_TEST

/* ld__gzip() of nothing, of a few bytes and of 3 MB of incompressible
 * bytes (more than deflateBound's first guess could be off by). */
START_TEST(test_gzip_sizes)
{
    const size_t sizes[] = {0, 1, 100, 3 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        unsigned char *in = malloc(n ? n : 1);
        uint32_t x = 2463534242u;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            in[i] = (unsigned char)x;
        }
        char *gz = NULL;
        size_t gz_len = 0, back_len;
        ck_assert_int_eq(ld__gzip(in, n, &gz, &gz_len), 0);
        char *back = inflate_all(gz, gz_len, &back_len);
        ck_assert_uint_eq(back_len, n);
        ck_assert(n == 0 || memcmp(back, in, n) == 0);
        free(back);
        ld__free(gz);
        free(in);
    }
}
END_TEST

/* ---- allocation failures ------------------------------------------------------ */

/* Hooks that count the blocks alive (a header before each) as well as
 * failing the g_fail_at-th allocation (check_fail_alloc.h's count). */
static long g_live;

static void *count_alloc(void *old, size_t n, bool json)
{
    if ((json ? g_json : true) && fail_now())
        return NULL;
    char *p = realloc(old ? (char *)old - 16 : NULL, n + 16);
    if (!p)
        return NULL;
    if (!old)
        __atomic_add_fetch(&g_live, 1, __ATOMIC_RELAXED);
    return p + 16;
}

static void *count_malloc(size_t n)
{
    return count_alloc(NULL, n, false);
}

static void *count_realloc(void *p, size_t n)
{
    return count_alloc(p, n, false);
}

static void *count_json_malloc(size_t n)
{
    return count_alloc(NULL, n, true);
}

static void count_free(void *p)
{
    if (!p)
        return;
    __atomic_sub_fetch(&g_live, 1, __ATOMIC_RELAXED);
    free((char *)p - 16);
}

/* Every allocation (the library's and zlib's, then jansson's too) failing
 * in turn, plain and gzip: each run gives LD_ENOMEM or the whole payload,
 * and no block is left. */
START_TEST(test_allocations_failing_in_turn)
{
    struct eval_fixture e;
    const ld_detail *d = off_detail(&e);
    const char *const refs[] = {"email"};
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, refs, 1);
    ld_context *anon = ld_test_ctx_of(ANON);
    ld_context *multi = ld_test_ctx_of("{'kind':'multi','user':{'key':'u','email':'x'},"
                                       "'org':{'key':'o','name':'B'}}");
    json_t *value = J("{'a':[1,2,{'b':'c'}]}"), *dflt = J("'d'"), *data = J("[1,2]");
    struct ld__summary *summary = summary_f();
    struct ld__ev_record r[7] = {
        rec(LD__EV_FEATURE, 1, "f\"1", anon), rec(LD__EV_DEBUG, 2, "f", multi),
        rec(LD__EV_INDEX, 3, NULL, multi),    rec(LD__EV_IDENTIFY, 4, NULL, anon),
        rec(LD__EV_CUSTOM, 5, "c", anon),     rec(LD__EV_RAW, 0, NULL, NULL),
        rec(LD__EV_FEATURE, 7, "g", multi),
    };
    r[0].version = 2;
    r[0].variation = 1;
    r[0].value = value;
    r[0].dflt = dflt;
    r[0].reason = d;
    r[0].prereq_of = "p";
    r[0].prereq_of_len = 1;
    r[1].reason = d;
    r[4].dflt = data;
    r[4].has_metric = true;
    r[4].metric = 2.5;
    r[5].dflt = value;
    size_t want_len;
    char *want = write_text(fmt, r, 7, summary, &want_len);
    for (int gz = 0; gz < 2; gz++) {
        for (int js = 0; js < 2; js++) {
            long n, failures = 0;
            for (n = 1; n < 100000; n++) {
                g_json = js;
                __atomic_store_n(&g_live, 0, __ATOMIC_RELAXED);
                __atomic_store_n(&g_fail_at, n, __ATOMIC_RELAXED);
                ck_assert_int_eq(ld_set_alloc_funcs(count_malloc, count_realloc, count_free), 0);
                json_set_alloc_funcs(count_json_malloc, count_free);
                __atomic_store_n(&g_calls, 0, __ATOMIC_RELAXED);
                __atomic_store_n(&g_counting, true, __ATOMIC_RELAXED);
                char *body = NULL;
                size_t len = 0;
                int rc = ld__payload_write(fmt, r, 7, summary, gz, &body, &len);
                __atomic_store_n(&g_counting, false, __ATOMIC_RELAXED);
                bool failed = __atomic_load_n(&g_calls, __ATOMIC_RELAXED) >= n;
                char *copy = NULL;
                if (rc == 0) {
                    copy = malloc(len);
                    memcpy(copy, body, len);
                    ld__free(body); /* through the counting hooks */
                }
                long live = __atomic_load_n(&g_live, __ATOMIC_RELAXED);
                json_set_alloc_funcs(malloc, free);
                ld_set_alloc_funcs(NULL, NULL, NULL);
                g_json = false;
                ck_assert_msg(live == 0, "N=%ld gz=%d json=%d: %ld blocks leaked", n, gz, js, live);
                if (rc == 0) {
                    size_t text_len = len;
                    char *text = gz ? inflate_all(copy, len, &text_len) : copy;
                    ck_assert_msg(text_len == want_len && memcmp(text, want, want_len) == 0,
                                  "N=%ld gz=%d json=%d: a wrong payload:\n got  %.*s\n want %.*s",
                                  n, gz, js, (int)text_len, text, (int)want_len, want);
                    if (gz)
                        free(text);
                    free(copy);
                } else {
                    ck_assert_msg(rc == LD_ENOMEM, "N=%ld: %d", n, rc);
                    ck_assert_msg(failed, "N=%ld: LD_ENOMEM with no allocation failing", n);
                    ck_assert_ptr_null(body);
                }
                if (!failed)
                    break;
                ck_assert_msg(rc == LD_ENOMEM, "N=%ld: the failure went unnoticed", n);
                failures++;
            }
            ck_assert_msg(failures > (js   ? 20
                                      : gz ? 8
                                           : 3),
                          "gz=%d json=%d: only %ld allocations failed", gz, js, failures);
        }
    }
    ld__free(want);
    ld__summary_free(summary);
    json_decref(value);
    json_decref(dflt);
    json_decref(data);
    ld_context_unref(anon);
    ld_context_unref(multi);
    ld__ctx_format_free(fmt);
    eval_done(&e);
}
END_TEST

/* ---- threads -------------------------------------------------------------- */

struct writer {
    const struct ld__ctx_format *fmt;
    const struct ld__ev_record *recs;
    size_t n;
    const struct ld__summary *summary;
    const char *want;
    size_t want_len;
    atomic_bool done;
    int rounds, bad;
};

static void *write_rounds(void *arg)
{
    struct writer *w = arg;
    for (int i = 0; i < w->rounds; i++) {
        char *body = NULL;
        size_t len = 0;
        int rc = ld__payload_write(w->fmt, w->recs, w->n, w->summary, i % 2, &body, &len);
        if (rc != 0) {
            w->bad++;
            continue;
        }
        if (i % 2 == 0 && (len != w->want_len || memcmp(body, w->want, len) != 0))
            w->bad++;
        ld__free(body);
    }
    atomic_store(&w->done, true);
    return NULL;
}

/* The writer on another thread while this one (the loop's part) takes and
 * drops references to the values the records point to: the payloads are
 * the same every time (and TSan sees no race). */
START_TEST(test_write_while_loop_counts_references)
{
    struct eval_fixture e;
    const ld_detail *d = off_detail(&e);
    struct ld__ctx_format *fmt = ld__ctx_format_new(false, NULL, 0);
    ld_context *ctx = ld_test_ctx_of(ANON);
    json_t *value = J("{'a':[1,2,{'b':'c'}]}"), *dflt = J("['x',{'y':1}]");
    struct ld__summary *summary = summary_f();
    struct ld__ev_record r[3] = {rec(LD__EV_FEATURE, 1, "f", ctx), rec(LD__EV_CUSTOM, 2, "c", ctx),
                                 rec(LD__EV_RAW, 0, NULL, NULL)};
    r[0].value = value;
    r[0].dflt = dflt;
    r[0].reason = d;
    r[1].dflt = value;
    r[2].dflt = dflt;
    size_t want_len;
    char *want = write_text(fmt, r, 3, summary, &want_len);
    struct writer w = {.fmt = fmt,
                       .recs = r,
                       .n = 3,
                       .summary = summary,
                       .want = want,
                       .want_len = want_len,
                       .rounds = 2000};
    atomic_init(&w.done, false);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, write_rounds, &w), 0);
    json_t *inner = json_object_get(value, "a");
    long turns = 0;
    while (!atomic_load(&w.done)) {
        json_incref(value);
        json_incref(dflt);
        json_incref(inner);
        ld_context_ref(ctx);
        json_decref(inner);
        json_decref(dflt);
        json_decref(value);
        ld_context_unref(ctx);
        turns++;
    }
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(w.bad, 0);
    if (!getenv("LDASYNC_VALGRIND")) /* valgrind runs one thread at a time */
        ck_assert_int_gt(turns, 0);
    ld__free(want);
    ld__summary_free(summary);
    json_decref(value);
    json_decref(dflt);
    ld_context_unref(ctx);
    ld__ctx_format_free(fmt);
    eval_done(&e);
}
END_TEST

Suite *ld_suite_event_payload(void)
{
    Suite *s = suite_create("event_payload");
    TCase *tc = tcase_create("payload");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_feature_all_fields_in_order);
    tcase_add_test(tc, test_feature_absent_fields_and_nulls);
    tcase_add_test(tc, test_feature_reason_prereq_values);
    tcase_add_test(tc, test_anonymous_redacted_in_feature_and_custom_only);
    tcase_add_test(tc, test_all_attributes_private);
    tcase_add_test(tc, test_multi_kind_context);
    tcase_add_test(tc, test_custom_data_and_metric);
    tcase_add_test(tc, test_strings_escaped);
    tcase_add_test(tc, test_shared_contexts_and_keys_written_as_alone);
    tcase_add_test(tc, test_raw_event);
    tcase_add_test(tc, test_summary_last);
    tcase_add_test(tc, test_no_records);
    tcase_add_test(tc, test_invalid_arguments);
    tcase_add_test(tc, test_gzip_payload_inflates_to_text);
    tcase_add_test(tc, test_gzip_sizes);
    tcase_add_test(tc, test_allocations_failing_in_turn);
    tcase_add_test(tc, test_write_while_loop_counts_references);
    suite_add_tcase(s, tc);
    return s;
}
