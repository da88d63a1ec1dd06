/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * check_eval_attack.c: the evaluator (include/ldasync/eval.h) attacked as an
 * adversary would, through the public API only: data of every wrong shape
 * that the store accepts, deep and wide structures, catastrophic regular
 * expressions, big segment stores that fail, go stale or are swapped and
 * freed while memberships are pending, lifetimes and orders (frees from
 * callbacks, details that outlive everything, items replaced between
 * evaluations), bounded memory under many upserts, allocation failures on
 * every path, and details released on other threads.
 *
 * Every result must be a detail (never a crash, leak, hang or rejection
 * other than the documented ones), the same on a store that answers at once
 * and on one that answers later, and the same every time.
 *
 * Tests that show a defect not fixed here can be skipped with
 * LDASYNC_EVAL_ATTACK_SKIP_KNOWN=1 (see known_failing()).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <ldasync/eval.h>
#include <ldasync/ldasync.h>
#include <ldasync/testing.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- helpers ---------------------------------------------------------------- */

/* True when `name` is a known failure to skip (LDASYNC_EVAL_ATTACK_SKIP_KNOWN=1). */
static bool known_failing(const char *name)
{
    static const char *const known[] = {NULL};
    const char *e = getenv("LDASYNC_EVAL_ATTACK_SKIP_KNOWN");
    if (!e || strcmp(e, "1") != 0)
        return false;
    for (size_t i = 0; i < N_OF(known) && known[i]; i++)
        if (strcmp(known[i], name) == 0)
            return true;
    return false;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* JSON text with ' for " (any JSON value). */
static json_t *J(const char *text)
{
    size_t n = strlen(text);
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i <= n; i++)
        s[i] = text[i] == '\'' ? '"' : text[i];
    json_error_t err;
    json_t *j = json_loads(s, JSON_DECODE_ANY, &err);
    free(s);
    ck_assert_msg(j != NULL, "bad JSON in the test (%s): %s", err.text, text);
    return j;
}

static char *dumps(const json_t *j)
{
    char *s = j ? json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    return s ? s : strdup("(NULL)");
}

static void expect_json(const char *what, const json_t *got, const char *want)
{
    json_t *w = J(want);
    if (!got || !json_equal((json_t *)got, w)) {
        char *g = dumps(got), *x = dumps(w);
        ck_abort_msg("%s:\n  got  %s\n  want %s", what, g, x);
    }
    json_decref(w);
}

/* Fills in "key" and "version" 1 of each item of `items` (in place). */
static void complete_items(json_t *items)
{
    const char *key;
    json_t *item;
    json_object_foreach(items, key, item)
    {
        if (json_is_object(item) && !json_object_get(item, "key"))
            json_object_set_new(item, "key", json_string(key));
        if (json_is_object(item) && !json_object_get(item, "version"))
            json_object_set_new(item, "version", json_integer(1));
    }
}

static json_t *data_of(const char *flags, const char *segments)
{
    json_t *f = J(flags ? flags : "{}");
    json_t *s = J(segments ? segments : "{}");
    complete_items(f);
    complete_items(s);
    json_t *data = json_pack("{s:o,s:o}", "features", f, "segments", s);
    ck_assert_ptr_nonnull(data);
    return data;
}

static ld_store *memory_with(const json_t *data)
{
    ld_store *s = ld_memory_store_new(B);
    ck_assert_ptr_nonnull(s);
    ld_test_await_ok(ld_store_init(s, data));
    return s;
}

static ld_context *ctx_of(const char *text)
{
    json_t *j = J(text);
    const char *why = NULL;
    ld_context *c = ld_context_from_json(j, &why);
    json_decref(j);
    ck_assert_msg(c != NULL, "bad context in the test (%s): %s", why ? why : "?", text);
    return c;
}

static ld_evaluator *evaluator_of(ld_store *s)
{
    ld_evaluator *ev = ld_evaluator_new(s);
    ck_assert_ptr_nonnull(ev);
    return ev;
}

static const ld_detail *D(ld_future *f)
{
    const ld_detail *d = ld_future_ptr(f);
    ck_assert_ptr_nonnull(d);
    return d;
}

/* ld_detail_to_json() of an evaluation (a new reference). */
static json_t *detail_json(ld_evaluator *ev, const char *key, ld_context *ctx, ld_value_type type,
                           json_t *fallback)
{
    ld_future *f = ld_test_fulfilled(ld_evaluator_detail(ev, key, ctx, type, fallback));
    json_t *j = ld_detail_to_json(D(f));
    ck_assert_ptr_nonnull(j);
    ld_future_unref(f);
    return j;
}

static void done_with(ld_evaluator *ev, ld_store *s)
{
    ld_evaluator_free(ev);
    ld_test_flush();
    ld_store_free(s);
    ld_test_flush();
}

/* ---- a version 1 store that answers later ------------------------------------ */

/* Answers get and all from the loop (event_base_once), a batch at a time;
 * `hold` keeps the answers until later_release(); `fail` rejects every read
 * with LD_ESTORE. Writes go to its JSON. */
struct later {
    struct event_base *base;
    json_t *data;
    ld_future *outs[4096];
    json_t *answers[4096];
    int n;
    int gets;
    bool scheduled, hold, fail;
};

static void later_answer(evutil_socket_t fd, short what, void *arg)
{
    struct later *l = arg;
    (void)fd;
    (void)what;
    int n = l->n;
    static ld_future *outs[4096];
    static json_t *answers[4096];
    memcpy(outs, l->outs, sizeof(outs[0]) * (size_t)n);
    memcpy(answers, l->answers, sizeof(answers[0]) * (size_t)n);
    l->n = 0;
    l->scheduled = false;
    for (int i = 0; i < n; i++) {
        if (l->fail) {
            json_decref(answers[i]);
            ld_future_reject(outs[i], LD_ESTORE, "no luck");
        } else {
            ld_future_fulfill_json(outs[i], answers[i]);
        }
        ld_future_unref(outs[i]);
    }
}

static void later_schedule(struct later *l)
{
    static const struct timeval zero = {0, 0};
    if (l->scheduled || l->hold || l->n == 0)
        return;
    l->scheduled = true;
    ck_assert_int_eq(event_base_once(l->base, -1, EV_TIMEOUT, later_answer, l, &zero), 0);
}

static void later_release(struct later *l)
{
    l->hold = false;
    later_schedule(l);
}

static void later_push(struct later *l, ld_future *out, json_t *answer)
{
    ck_assert_int_lt(l->n, 4096);
    l->outs[l->n] = out;
    l->answers[l->n] = answer;
    l->n++;
    later_schedule(l);
}

static void later_get(void *impl, const ld_kind *kind, const char *key, ld_future *out)
{
    struct later *l = impl;
    l->gets++;
    json_t *item = json_object_get(json_object_get(l->data, ld_kind_namespace(kind)), key);
    if (item && json_is_true(json_object_get(item, "deleted")))
        item = NULL;
    later_push(l, out, json_incref(item));
}

static void later_all(void *impl, const ld_kind *kind, ld_future *out)
{
    struct later *l = impl;
    json_t *all = json_object();
    const char *key;
    json_t *item;
    json_object_foreach(json_object_get(l->data, ld_kind_namespace(kind)), key, item)
    {
        if (!json_is_true(json_object_get(item, "deleted")))
            json_object_set(all, key, item);
    }
    later_push(l, out, all);
}

static void later_init(void *impl, const json_t *all_data, ld_future *out)
{
    struct later *l = impl;
    json_decref(l->data);
    l->data = json_deep_copy(all_data);
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void later_upsert(void *impl, const ld_kind *kind, const json_t *item,
                         const struct ld_item_info *info, ld_future *out)
{
    struct later *l = impl;
    json_t *ns = json_object_get(l->data, ld_kind_namespace(kind));
    json_object_set_new(ns, info->key, json_deep_copy(item));
    ld_future_fulfill_bool(out, true);
    ld_future_unref(out);
}

static void later_del(void *impl, const ld_kind *kind, const char *key, int64_t version,
                      ld_future *out)
{
    struct later *l = impl;
    json_t *ns = json_object_get(l->data, ld_kind_namespace(kind));
    json_object_set_new(ns, key, json_pack("{s:s,s:I,s:b}", "key", key, "version",
                                           (json_int_t)version, "deleted", 1));
    ld_future_fulfill_bool(out, true);
    ld_future_unref(out);
}

static void later_initialized(void *impl, ld_future *out)
{
    (void)impl;
    ld_future_fulfill_bool(out, true);
    ld_future_unref(out);
}

static void later_free(void *impl)
{
    struct later *l = impl;
    for (int i = 0; i < l->n; i++) {
        json_decref(l->answers[i]);
        ld_future_reject(l->outs[i], LD_ECANCELED, NULL);
        ld_future_unref(l->outs[i]);
    }
    json_decref(l->data);
    free(l);
}

static const struct ld_store_ops later_ops = {
    .version = 1,
    .get = later_get,
    .all = later_all,
    .init = later_init,
    .upsert = later_upsert,
    .del = later_del,
    .initialized = later_initialized,
    .free = later_free,
};

static ld_store *later_new(const json_t *data, struct later **out)
{
    struct later *l = calloc(1, sizeof(*l));
    ck_assert_ptr_nonnull(l);
    l->base = B;
    l->data = json_deep_copy(data);
    ck_assert_ptr_nonnull(l->data);
    ld_store *s = ld_store_new(B, &later_ops, l);
    ck_assert_ptr_nonnull(s);
    if (out)
        *out = l;
    return s;
}

/* The detail JSON of flag `key` from `data` for `ctx`, on a memory store and
 * on a store that answers later, which must agree; twice each (the second
 * from the compiled cache), which must agree too. A new reference. */
static json_t *eval_both(const json_t *data, const char *key, ld_context *ctx, ld_value_type type,
                         const char *fallback)
{
    json_t *first = NULL;
    for (int which = 0; which < 2; which++) {
        ld_store *s = which == 0 ? memory_with(data) : later_new(data, NULL);
        ld_evaluator *ev = evaluator_of(s);
        for (int again = 0; again < 2; again++) {
            json_t *got = detail_json(ev, key, ctx, type, fallback ? J(fallback) : NULL);
            if (!first) {
                first = got;
                continue;
            }
            if (!json_equal(first, got)) {
                char *a = dumps(first), *b = dumps(got);
                ck_abort_msg("%s: %s store (pass %d) disagrees:\n  %s\n  %s", key,
                             which ? "later" : "memory", again, a, b);
            }
            json_decref(got);
        }
        done_with(ev, s);
    }
    return first;
}

#define USER(k) "{'key':'" k "'}"
#define MALFORMED "{'value':'fb','reason':{'kind':'ERROR','errorKind':'MALFORMED_FLAG'}}"
#define FT(v, i) "{'value':'" v "','variationIndex':" #i ",'reason':{'kind':'FALLTHROUGH'}}"
#define RM(v, i, r)                                                                               \
    "{'value':'" v "','variationIndex':" #i ",'reason':{'kind':'RULE_MATCH','ruleIndex':" #r \
    ",'ruleId':'r'}}"

/* ---- malformed data: every field with every wrong type ----------------------- */

/* A flag "f" made from BASE_* with one field replaced. */
#define VARS "'variations':['a','b','c']"
#define RULE(clause) "'rules':[{'id':'r','variation':2,'clauses':[" clause "]}]"
#define KEY_IN_U "{'attribute':'key','op':'in','values':['u']}"
#define FLAG(body) "{'f':{'on':true," VARS ",'offVariation':0,'fallthrough':{'variation':1}," body "}}"
#define FLAG_NO_FT(body) "{'f':{'on':true," VARS ",'offVariation':0," body "}}"

struct mcase {
    const char *name;
    const char *flags;
    const char *segments;
    const char *ctx; /* NULL: user "u" */
    const char *want; /* NULL: any detail, as long as it is deterministic */
};

static const struct mcase malformed_cases[] = {
    /* variations */
    {"variations an object", "{'f':{'on':true,'variations':{'0':'a'},'fallthrough':{'variation':0}}}",
     NULL, NULL, MALFORMED},
    {"variations a string", "{'f':{'on':true,'variations':'abc','fallthrough':{'variation':0}}}",
     NULL, NULL, MALFORMED},
    {"variations a number", "{'f':{'on':true,'variations':3,'fallthrough':{'variation':0}}}", NULL,
     NULL, MALFORMED},
    {"variations null", "{'f':{'on':true,'variations':null,'fallthrough':{'variation':0}}}", NULL,
     NULL, MALFORMED},
    {"variations of nulls", "{'f':{'on':true,'variations':[null,null],'fallthrough':{'variation':1}}}",
     NULL, NULL, "{'value':null,'variationIndex':1,'reason':{'kind':'FALLTHROUGH'}}"},
    /* on */
    {"on a string", "{'f':{'on':'true'," VARS ",'offVariation':0,'fallthrough':{'variation':1}}}",
     NULL, NULL, "{'value':'a','variationIndex':0,'reason':{'kind':'OFF'}}"},
    /* offVariation */
    {"offVariation a string", "{'f':{'on':false," VARS ",'offVariation':'0'}}", NULL, NULL,
     MALFORMED},
    {"offVariation a fraction", "{'f':{'on':false," VARS ",'offVariation':0.5}}", NULL, NULL,
     MALFORMED},
    {"offVariation negative", "{'f':{'on':false," VARS ",'offVariation':-1}}", NULL, NULL,
     MALFORMED},
    {"offVariation huge", "{'f':{'on':false," VARS ",'offVariation':1e300}}", NULL, NULL,
     MALFORMED},
    {"offVariation beyond int", "{'f':{'on':false," VARS ",'offVariation':4294967296}}", NULL,
     NULL, MALFORMED},
    {"offVariation an array", "{'f':{'on':false," VARS ",'offVariation':[0]}}", NULL, NULL,
     MALFORMED},
    {"offVariation integral real", "{'f':{'on':false," VARS ",'offVariation':2.0}}", NULL, NULL,
     "{'value':'c','variationIndex':2,'reason':{'kind':'OFF'}}"},
    /* fallthrough */
    {"fallthrough a string", FLAG_NO_FT("'fallthrough':'1'"), NULL, NULL, MALFORMED},
    {"fallthrough an array", FLAG_NO_FT("'fallthrough':[1]"), NULL, NULL, MALFORMED},
    {"fallthrough empty", FLAG_NO_FT("'fallthrough':{}"), NULL, NULL, MALFORMED},
    {"fallthrough absent", FLAG_NO_FT("'x':0"), NULL, NULL, MALFORMED},
    {"fallthrough variation a string", FLAG_NO_FT("'fallthrough':{'variation':'1'}"), NULL, NULL,
     MALFORMED},
    {"fallthrough variation a bool", FLAG_NO_FT("'fallthrough':{'variation':true}"), NULL, NULL,
     MALFORMED},
    {"fallthrough variation INT_MIN", FLAG_NO_FT("'fallthrough':{'variation':-2147483648}"), NULL,
     NULL, MALFORMED},
    {"fallthrough variation 2^63", FLAG_NO_FT("'fallthrough':{'variation':9223372036854775807}"),
     NULL, NULL, MALFORMED},
    {"fallthrough rollout a string", FLAG_NO_FT("'fallthrough':{'rollout':'x'}"), NULL, NULL,
     MALFORMED},
    {"rollout variations an object",
     FLAG_NO_FT("'fallthrough':{'rollout':{'variations':{'variation':0,'weight':100000}}}"), NULL,
     NULL, MALFORMED},
    {"rollout variation negative",
     FLAG_NO_FT("'fallthrough':{'rollout':{'variations':[{'variation':-1,'weight':100000}]}}"),
     NULL, NULL, MALFORMED},
    {"rollout variation a fraction",
     FLAG_NO_FT("'fallthrough':{'rollout':{'variations':[{'variation':0.5,'weight':100000}]}}"),
     NULL, NULL, MALFORMED},
    {"rollout variation absent",
     FLAG_NO_FT("'fallthrough':{'rollout':{'variations':[{'weight':100000}]}}"), NULL, NULL,
     MALFORMED},
    {"rollout variation out of range",
     FLAG_NO_FT("'fallthrough':{'rollout':{'variations':[{'variation':7,'weight':100000}]}}"),
     NULL, NULL, MALFORMED},
    {"rollout entry a number", FLAG_NO_FT("'fallthrough':{'rollout':{'variations':[5]}}"), NULL,
     NULL, MALFORMED},
    {"rollout weight a string",
     FLAG_NO_FT("'fallthrough':{'rollout':{'variations':[{'variation':0,'weight':'100000'}]}}"),
     NULL, NULL, MALFORMED},
    {"rollout weight a fraction",
     FLAG_NO_FT("'fallthrough':{'rollout':{'variations':[{'variation':0,'weight':0.5}]}}"), NULL,
     NULL, MALFORMED},
    {"rollout weight huge",
     FLAG_NO_FT("'fallthrough':{'rollout':{'variations':[{'variation':0,'weight':1e300},"
                "{'variation':1,'weight':1}]}}"),
     NULL, NULL, MALFORMED},
    {"rollout weight INT_MAX",
     FLAG_NO_FT("'fallthrough':{'rollout':{'variations':[{'variation':0,'weight':2147483647},"
                "{'variation':1,'weight':2147483647}]}}"),
     NULL, NULL, "{'value':'a','variationIndex':0,'reason':{'kind':'FALLTHROUGH'}}"},
    {"rollout weights negative",
     FLAG_NO_FT("'fallthrough':{'rollout':{'variations':[{'variation':0,'weight':-100000},"
                "{'variation':1,'weight':-5}]}}"),
     NULL, NULL, "{'value':'b','variationIndex':1,'reason':{'kind':'FALLTHROUGH'}}"},
    {"rollout weights all absent",
     FLAG_NO_FT("'fallthrough':{'rollout':{'variations':[{'variation':0},{'variation':2}]}}"),
     NULL, NULL, "{'value':'c','variationIndex':2,'reason':{'kind':'FALLTHROUGH'}}"},
    {"rollout seed a string",
     FLAG_NO_FT("'fallthrough':{'rollout':{'seed':'61','variations':[{'variation':0,'weight':"
                "50000},{'variation':1,'weight':50000}]}}"),
     NULL, NULL, NULL},
    {"rollout seed a fraction",
     FLAG_NO_FT("'fallthrough':{'rollout':{'seed':61.5,'variations':[{'variation':0,'weight':"
                "50000},{'variation':1,'weight':50000}]}}"),
     NULL, NULL, NULL},
    {"rollout seed huge",
     FLAG_NO_FT("'fallthrough':{'rollout':{'seed':1e300,'variations':[{'variation':0,'weight':"
                "50000},{'variation':1,'weight':50000}]}}"),
     NULL, NULL, NULL},
    {"rollout seed INT64_MIN",
     FLAG_NO_FT("'fallthrough':{'rollout':{'seed':-9223372036854775808,'variations':[{'"
                "variation':0,'weight':50000},{'variation':1,'weight':50000}]}}"),
     NULL, NULL, NULL},
    {"rollout bucketBy a number",
     FLAG_NO_FT("'fallthrough':{'rollout':{'bucketBy':5,'variations':[{'variation':0,'weight':"
                "100000}]}}"),
     NULL, NULL, MALFORMED},
    {"rollout bucketBy an invalid reference",
     FLAG_NO_FT("'fallthrough':{'rollout':{'contextKind':'user','bucketBy':'/a//b','variations':"
                "[{'variation':0,'weight':100000}]}}"),
     NULL, NULL, MALFORMED},
    {"rollout contextKind a number",
     FLAG_NO_FT("'fallthrough':{'rollout':{'contextKind':5,'variations':[{'variation':0,'weight':"
                "100000}]}}"),
     NULL, NULL, MALFORMED},
    {"rollout kind a number",
     FLAG_NO_FT("'fallthrough':{'rollout':{'kind':5,'variations':[{'variation':0,'weight':"
                "100000}]}}"),
     NULL, NULL, "{'value':'a','variationIndex':0,'reason':{'kind':'FALLTHROUGH'}}"},
    /* rules and clauses */
    {"rules an object", FLAG("'rules':{'id':'r','variation':2,'clauses':[]}"), NULL, NULL,
     MALFORMED},
    {"rules a string", FLAG("'rules':'r'"), NULL, NULL, MALFORMED},
    {"rule a number", FLAG("'rules':[5]"), NULL, NULL, MALFORMED},
    {"rule null", FLAG("'rules':[null]"), NULL, NULL, MALFORMED},
    {"rule variation a string", FLAG("'rules':[{'id':'r','variation':'2','clauses':[]}]"), NULL,
     NULL, MALFORMED},
    {"rule id a number",
     FLAG("'rules':[{'id':5,'variation':2,'clauses':[" KEY_IN_U "]}]"), NULL, NULL,
     "{'value':'c','variationIndex':2,'reason':{'kind':'RULE_MATCH','ruleIndex':0}}"},
    {"clauses a string", FLAG("'rules':[{'id':'r','variation':2,'clauses':'x'}]"), NULL, NULL,
     MALFORMED},
    {"clauses an object", FLAG("'rules':[{'id':'r','variation':2,'clauses':{}}]"), NULL, NULL,
     MALFORMED},
    {"clause a string", FLAG(RULE("'key in u'")), NULL, NULL, MALFORMED},
    {"clause an array", FLAG(RULE("['key','in','u']")), NULL, NULL, MALFORMED},
    {"clause values a number", FLAG(RULE("{'attribute':'key','op':'in','values':5}")), NULL, NULL,
     MALFORMED},
    {"clause values a string", FLAG(RULE("{'attribute':'key','op':'in','values':'u'}")), NULL,
     NULL, MALFORMED},
    {"clause values an object", FLAG(RULE("{'attribute':'key','op':'in','values':{'u':1}}")), NULL,
     NULL, MALFORMED},
    {"clause values absent", FLAG(RULE("{'attribute':'key','op':'in'}")), NULL, NULL,
     FT("b", 1)},
    {"clause op a number", FLAG(RULE("{'attribute':'key','op':5,'values':['u']}")), NULL, NULL,
     FT("b", 1)},
    {"clause op null, negated",
     FLAG(RULE("{'attribute':'key','op':null,'values':['u'],'negate':true}")), NULL, NULL,
     RM("c", 2, 0)},
    {"clause op an unknown name", FLAG(RULE("{'attribute':'key','op':'In','values':['u']}")), NULL,
     NULL, FT("b", 1)},
    {"clause attribute an array", FLAG(RULE("{'attribute':['key'],'op':'in','values':['u']}")),
     NULL, NULL, MALFORMED},
    {"clause attribute a number", FLAG(RULE("{'attribute':5,'op':'in','values':['u']}")), NULL,
     NULL, MALFORMED},
    {"clause attribute absent", FLAG(RULE("{'op':'in','values':['u']}")), NULL, NULL, MALFORMED},
    {"clause contextKind a number",
     FLAG(RULE("{'contextKind':5,'attribute':'key','op':'in','values':['u']}")), NULL, NULL,
     MALFORMED},
    {"clause contextKind an object",
     FLAG(RULE("{'contextKind':{},'attribute':'key','op':'in','values':['u']}")), NULL, NULL,
     MALFORMED},
    {"clause negate a string",
     FLAG(RULE("{'attribute':'key','op':'in','values':['u'],'negate':'true'}")), NULL, NULL,
     RM("c", 2, 0)},
    {"clause values of every type for every operator",
     FLAG("'rules':["
          "{'id':'r','variation':2,'clauses':[{'attribute':'a','op':'lessThan','values':[null,"
          "'x',[],{},true,-1e308]}]},"
          "{'id':'r','variation':2,'clauses':[{'attribute':'a','op':'matches','values':[null,5,"
          "[],{},'(',true]}]},"
          "{'id':'r','variation':2,'clauses':[{'attribute':'a','op':'before','values':[null,'x',"
          "[],{},true,-1e308]}]},"
          "{'id':'r','variation':2,'clauses':[{'attribute':'a','op':'semVerEqual','values':[null,"
          "5,[],{},true,'99999999999999999999.0.0']}]},"
          "{'id':'r','variation':2,'clauses':[{'attribute':'a','op':'startsWith','values':[null,"
          "5,[],{},true]}]},"
          "{'id':'r','variation':2,'clauses':[{'attribute':'a','op':'in','values':[null,5,[[]],"
          "{'x':{}},false]}]}]"),
     NULL, "{'key':'u','custom':{'a':[null,'x',[],{},true,1.5,'1.0.0']}}", FT("b", 1)},
    {"segmentMatch values a string", FLAG(RULE("{'op':'segmentMatch','values':'s'}")), "{'s':{}}",
     NULL, MALFORMED},
    {"segmentMatch values of other types",
     FLAG(RULE("{'op':'segmentMatch','values':[5,null,{},[],'','s']}")),
     "{'s':{'included':['u']}}", NULL, RM("c", 2, 0)},
    /* targets */
    {"targets an object", FLAG("'targets':{'values':['u'],'variation':2}"), NULL, NULL, MALFORMED},
    {"target a number", FLAG("'targets':[5]"), NULL, NULL, MALFORMED},
    {"target values a string", FLAG("'targets':[{'values':'u','variation':2}]"), NULL, NULL,
     MALFORMED},
    {"target values not strings",
     FLAG("'targets':[{'values':[5,null,{},['u'],'u'],'variation':2}]"), NULL, NULL,
     "{'value':'c','variationIndex':2,'reason':{'kind':'TARGET_MATCH'}}"},
    {"target variation a string", FLAG("'targets':[{'values':['u'],'variation':'2'}]"), NULL, NULL,
     MALFORMED},
    {"target variation absent", FLAG("'targets':[{'values':['u']}]"), NULL, NULL, MALFORMED},
    {"contextTargets a string", FLAG("'contextTargets':'x'"), NULL, NULL, MALFORMED},
    {"contextTarget contextKind a number",
     FLAG("'contextTargets':[{'contextKind':5,'values':['u'],'variation':2}]"), NULL, NULL, NULL},
    /* prerequisites */
    {"prerequisites an object", FLAG("'prerequisites':{'key':'p','variation':0}"), NULL, NULL,
     MALFORMED},
    {"prerequisite a number", FLAG("'prerequisites':[5]"), NULL, NULL, MALFORMED},
    {"prerequisite a string", FLAG("'prerequisites':['p']"), NULL, NULL, MALFORMED},
    {"prerequisite without key", FLAG("'prerequisites':[{'variation':0}]"), NULL, NULL,
     MALFORMED},
    {"prerequisite key a number", FLAG("'prerequisites':[{'key':5,'variation':0}]"), NULL, NULL,
     MALFORMED},
    {"prerequisite key empty", FLAG("'prerequisites':[{'key':'','variation':0}]"), NULL, NULL,
     MALFORMED},
    {"prerequisite variation a string",
     "{'f':{'on':true," VARS ",'offVariation':0,'fallthrough':{'variation':1},"
     "'prerequisites':[{'key':'p','variation':'0'}]},"
     "'p':{'on':true,'variations':[true],'fallthrough':{'variation':0}}}",
     NULL, NULL,
     "{'value':'a','variationIndex':0,'reason':{'kind':'PREREQUISITE_FAILED','prerequisiteKey':"
     "'p'}}"},
    {"prerequisite flag malformed",
     "{'f':{'on':true," VARS ",'offVariation':0,'fallthrough':{'variation':1},"
     "'prerequisites':[{'key':'p','variation':0}]},"
     "'p':{'on':true,'variations':5,'fallthrough':{'variation':0}}}",
     NULL, NULL, MALFORMED},
    /* salt, flags' other fields */
    {"salt a number",
     FLAG_NO_FT("'salt':5,'fallthrough':{'rollout':{'variations':[{'variation':0,'weight':50000},"
                "{'variation':1,'weight':50000}]}}"),
     NULL, NULL, NULL},
    {"trackEvents and clientSide of wrong types",
     FLAG("'trackEvents':'yes','clientSide':1,'clientSideAvailability':[],"
          "'debugEventsUntilDate':'soon'"),
     NULL, NULL, FT("b", 1)},
    /* segments */
    {"segment included an object", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'included':{'u':true}}}", NULL, MALFORMED},
    {"segment included a string", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'included':'u'}}", NULL, MALFORMED},
    {"segment included not strings", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'included':[5,null,['u'],'u']}}", NULL, RM("c", 2, 0)},
    {"segment excluded a number", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'excluded':5}}", NULL, MALFORMED},
    {"segment includedContexts values a string",
     FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'includedContexts':[{'contextKind':'user','values':'u'}]}}", NULL, MALFORMED},
    {"segment includedContexts entry a string",
     FLAG(RULE("{'op':'segmentMatch','values':['s']}")), "{'s':{'includedContexts':['u']}}", NULL,
     MALFORMED},
    {"segment rules an object", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'rules':{}}}", NULL, MALFORMED},
    {"segment rule a string", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'rules':['x']}}", NULL, MALFORMED},
    {"segment rule clauses a number", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'rules':[{'clauses':5}]}}", NULL, MALFORMED},
    {"segment rule weight a string", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'rules':[{'clauses':[],'weight':'50000'}]}}", NULL, MALFORMED},
    {"segment rule weight huge", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'rules':[{'clauses':[],'weight':1e300}]}}", NULL, MALFORMED},
    {"segment rule weight negative", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'rules':[{'clauses':[],'weight':-1}]}}", NULL, FT("b", 1)},
    {"segment rule bucketBy a number", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'rules':[{'clauses':[],'weight':50000,'bucketBy':5}]}}", NULL, MALFORMED},
    {"segment rule rolloutContextKind an array",
     FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'rules':[{'clauses':[],'weight':50000,'rolloutContextKind':[]}]}}", NULL, MALFORMED},
    {"segment generation a string", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'unbounded':true,'generation':'1'}}", NULL,
     "{'value':'b','variationIndex':1,'reason':{'kind':'FALLTHROUGH','bigSegmentsStatus':'NOT_"
     "CONFIGURED'}}"},
    {"segment unbounded a string", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'unbounded':'true','generation':1,'included':['u']}}", NULL, RM("c", 2, 0)},
    {"segment unboundedContextKind a number", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'unbounded':true,'generation':1,'unboundedContextKind':5}}", NULL, NULL},
    {"segment salt an object", FLAG(RULE("{'op':'segmentMatch','values':['s']}")),
     "{'s':{'salt':{},'rules':[{'clauses':[],'weight':50000}]}}", NULL, NULL},
};

START_TEST(test_malformed_data_gives_a_deterministic_detail)
{
    const struct mcase *c = &malformed_cases[_i];
    json_t *data = data_of(c->flags, c->segments);
    ld_context *ctx = ctx_of(c->ctx ? c->ctx : USER("u"));
    json_t *got = eval_both(data, "f", ctx, LD_VALUE_ANY, "'fb'");
    if (c->want)
        expect_json(c->name, got, c->want);
    json_decref(got);
    /* the all-flags state has the flag too, whatever happened */
    ld_store *s = memory_with(data);
    ld_evaluator *ev = evaluator_of(s);
    ld_future *f = ld_test_fulfilled(ld_evaluator_all_flags(ev, ctx, LD_ALL_FLAGS_WITH_REASONS));
    json_t *st = ld_future_json(f);
    ck_assert_msg(json_is_true(json_object_get(st, "$valid")), "%s: all flags not valid", c->name);
    ck_assert_msg(json_object_get(json_object_get(st, "$flagsState"), "f") != NULL,
                  "%s: all flags lacks f", c->name);
    ld_future_unref(f);
    done_with(ev, s);
    ld_context_unref(ctx);
    json_decref(data);
}
END_TEST

/* ---- one JSON item stored under two kinds ------------------------------------- */

/* The store shares the items it is given (store.h: borrowed, referenced), so
 * the very same json_t may be stored as a flag and as a segment, e.g. a
 * placeholder {"key":"x","version":1}. Both must evaluate as what they are
 * stored as: a detail, never an LD_ENOMEM rejection. */
START_TEST(test_one_json_item_as_flag_and_segment_evaluates)
{
    json_t *shared = J("{'key':'x','version':1,'on':true,'variations':['v'],"
                       "'fallthrough':{'variation':0},'included':['u']}");
    json_t *f = J("{'key':'f','version':1,'on':true,'variations':['no','yes'],"
                  "'fallthrough':{'variation':0},'rules':[{'id':'r','variation':1,"
                  "'clauses':[{'op':'segmentMatch','values':['x']}]}]}");
    json_t *data = json_pack("{s:{s:O,s:O},s:{s:O}}", "features", "x", shared, "f", f, "segments",
                             "x", shared);
    ck_assert_ptr_nonnull(data);
    ld_context *ctx = ctx_of(USER("u"));
    for (int which = 0; which < 2; which++) {
        ld_store *s = which == 0 ? memory_with(data) : later_new(data, NULL);
        ld_evaluator *ev = evaluator_of(s);
        /* the flag first, then the segment through f; and the other order */
        for (int order = 0; order < 2; order++) {
            const char *keys[2] = {order ? "f" : "x", order ? "x" : "f"};
            for (int k = 0; k < 2; k++) {
                ld_future *r = ld_evaluator_detail(ev, keys[k], ctx, LD_VALUE_ANY, NULL);
                ld_test_done(r);
                ck_assert_msg(ld_future_is_fulfilled(r), "%s store, %s: rejected (%s)",
                              which ? "later" : "memory", keys[k], ld_future_error_message(r));
                json_t *got = ld_detail_to_json(D(r));
                if (strcmp(keys[k], "x") == 0)
                    expect_json("x as a flag", got,
                                "{'value':'v','variationIndex':0,'reason':{'kind':'FALLTHROUGH'}}");
                else
                    expect_json("f, x as a segment", got,
                                "{'value':'yes','variationIndex':1,'reason':{'kind':'RULE_"
                                "MATCH','ruleIndex':0,'ruleId':'r'}}");
                json_decref(got);
                ld_future_unref(r);
            }
            /* a fresh evaluator for the other order */
            ld_evaluator_free(ev);
            ld_test_flush();
            ev = evaluator_of(s);
        }
        done_with(ev, s);
    }
    ld_context_unref(ctx);
    json_decref(data);
    json_decref(shared);
    json_decref(f);
}
END_TEST

/* ---- deep and wide structures ---------------------------------------------------- */

/* A prerequisite chain p0 -> p1 -> ... -> p(n-1), each served 0 when on. */
static json_t *chain_data(int n)
{
    json_t *flags = json_object();
    for (int i = 0; i < n; i++) {
        char key[32], next[32];
        snprintf(key, sizeof key, "p%d", i);
        snprintf(next, sizeof next, "p%d", i + 1);
        json_t *fl = json_pack("{s:s,s:i,s:b,s:[s],s:{s:i}}", "key", key, "version", 1, "on", 1,
                               "variations", "ok", "fallthrough", "variation", 0);
        if (i + 1 < n)
            json_object_set_new(fl, "prerequisites",
                                json_pack("[{s:s,s:i}]", "key", next, "variation", 0));
        json_object_set_new(flags, key, fl);
    }
    return json_pack("{s:o,s:{}}", "features", flags, "segments");
}

START_TEST(test_prerequisite_chain_beyond_the_limit_is_malformed)
{
    ld_context *ctx = ctx_of(USER("u"));
    /* 64 flags deep is the limit: p0 .. p63 evaluate, 65 do not */
    static const struct {
        int n;
        const char *want;
    } cases[] = {
        {64, "{'value':'ok','variationIndex':0,'reason':{'kind':'FALLTHROUGH'}}"},
        {65, "{'value':'fb','reason':{'kind':'ERROR','errorKind':'MALFORMED_FLAG'}}"},
        {10000, "{'value':'fb','reason':{'kind':'ERROR','errorKind':'MALFORMED_FLAG'}}"},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        json_t *data = chain_data(cases[i].n);
        double t0 = now_s();
        json_t *got = eval_both(data, "p0", ctx, LD_VALUE_ANY, "'fb'");
        double t = now_s() - t0;
        char what[64];
        snprintf(what, sizeof what, "a chain of %d", cases[i].n);
        expect_json(what, got, cases[i].want);
        ck_assert_msg(t < 5.0, "%s took %.2f s", what, t);
        json_decref(got);
        json_decref(data);
    }
    ld_context_unref(ctx);
}
END_TEST

/* Segments s0 .. s(n-1), s(i) nesting s(i+1) and the last nesting s0. */
START_TEST(test_segment_cycle_across_many_segments_is_malformed)
{
    int n = 1000;
    json_t *segs = json_object();
    for (int i = 0; i < n; i++) {
        char key[32], next[32];
        snprintf(key, sizeof key, "s%d", i);
        snprintf(next, sizeof next, "s%d", (i + 1) % n);
        json_object_set_new(segs, key,
                            json_pack("{s:s,s:i,s:[{s:[{s:s,s:[s]}]}]}", "key", key, "version", 1,
                                      "rules", "clauses", "op", "segmentMatch", "values", next));
    }
    json_t *data = json_pack("{s:{s:{s:s,s:i,s:b,s:[s,s],s:{s:i},s:[{s:s,s:i,s:[{s:s,s:[s]}]}]}},"
                             "s:o}",
                             "features", "f", "key", "f", "version", 1, "on", 1, "variations", "a",
                             "b", "fallthrough", "variation", 0, "rules", "id", "r", "variation",
                             1, "clauses", "op", "segmentMatch", "values", "s0", "segments", segs);
    ck_assert_ptr_nonnull(data);
    ld_context *ctx = ctx_of(USER("u"));
    json_t *got = eval_both(data, "f", ctx, LD_VALUE_ANY, "'fb'");
    expect_json("a cycle of 1000 segments", got,
                "{'value':'fb','reason':{'kind':'ERROR','errorKind':'MALFORMED_FLAG'}}");
    json_decref(got);
    ld_context_unref(ctx);
    json_decref(data);
}
END_TEST

/* A flag whose rules reference 1,000 segments; the context is in the last. */
START_TEST(test_rules_over_a_thousand_segments)
{
    int n = 1000;
    json_t *segs = json_object(), *rules = json_array();
    for (int i = 0; i < n; i++) {
        char key[32], id[32];
        snprintf(key, sizeof key, "s%d", i);
        snprintf(id, sizeof id, "r%d", i);
        json_object_set_new(segs, key,
                            json_pack("{s:s,s:i,s:[s]}", "key", key, "version", 1, "included",
                                      i == n - 1 ? "u" : "nobody"));
        json_array_append_new(rules, json_pack("{s:s,s:i,s:[{s:s,s:[s]}]}", "id", id, "variation",
                                               1, "clauses", "op", "segmentMatch", "values", key));
    }
    json_t *data = json_pack("{s:{s:{s:s,s:i,s:b,s:[s,s],s:{s:i},s:o}},s:o}", "features", "f",
                             "key", "f", "version", 1, "on", 1, "variations", "a", "b",
                             "fallthrough", "variation", 0, "rules", rules, "segments", segs);
    ld_context *ctx = ctx_of(USER("u"));
    json_t *got = eval_both(data, "f", ctx, LD_VALUE_ANY, "'fb'");
    expect_json("1000 segments", got,
                "{'value':'b','variationIndex':1,'reason':{'kind':'RULE_MATCH','ruleIndex':999,"
                "'ruleId':'r999'}}");
    json_decref(got);
    ld_context_unref(ctx);
    json_decref(data);
}
END_TEST

/* Each segment s(i) has two rules that both nest s(i+1), and the context is
 * in none: a naive walk visits s(depth) 2^depth times. Same for flags whose
 * two prerequisites are both the next flag. A shallow diamond evaluates; a
 * deep one (2^60 visits) is MALFORMED_FLAG, quickly: an event-loop server
 * cannot stop for hours. */
static json_t *diamond_data(int depth)
{
    json_t *segs = json_object(), *flags = json_object();
    char key[32], next[32];
    for (int i = 0; i < depth; i++) {
        snprintf(key, sizeof key, "s%d", i);
        snprintf(next, sizeof next, "s%d", i + 1);
        json_object_set_new(segs, key,
                            json_pack("{s:s,s:i,s:[{s:[{s:s,s:[s]}]},{s:[{s:s,s:[s]}]}]}", "key",
                                      key, "version", 1, "rules", "clauses", "op", "segmentMatch",
                                      "values", next, "clauses", "op", "segmentMatch", "values",
                                      next));
        snprintf(key, sizeof key, "p%d", i);
        snprintf(next, sizeof next, "p%d", i + 1);
        json_t *fl = json_pack("{s:s,s:i,s:b,s:[s],s:{s:i}}", "key", key, "version", 1, "on", 1,
                               "variations", "ok", "fallthrough", "variation", 0);
        if (i + 1 < depth)
            json_object_set_new(fl, "prerequisites",
                                json_pack("[{s:s,s:i},{s:s,s:i}]", "key", next, "variation", 0,
                                          "key", next, "variation", 0));
        json_object_set_new(flags, key, fl);
    }
    snprintf(key, sizeof key, "s%d", depth);
    json_object_set_new(segs, key, json_pack("{s:s,s:i}", "key", key, "version", 1));
    json_object_set_new(flags, "f",
                        json_pack("{s:s,s:i,s:b,s:[s,s],s:{s:i},s:[{s:s,s:i,s:[{s:s,s:[s]}]}]}",
                                  "key", "f", "version", 1, "on", 1, "variations", "a", "b",
                                  "fallthrough", "variation", 0, "rules", "id", "r", "variation",
                                  1, "clauses", "op", "segmentMatch", "values", "s0"));
    return json_pack("{s:o,s:o}", "features", flags, "segments", segs);
}

START_TEST(test_diamond_nesting_does_not_take_exponential_time)
{
    ld_context *ctx = ctx_of(USER("u"));
    static const struct {
        int depth;
        const char *key, *want;
    } cases[] = {
        {12, "f", "{'value':'a','variationIndex':0,'reason':{'kind':'FALLTHROUGH'}}"},
        {12, "p0", "{'value':'ok','variationIndex':0,'reason':{'kind':'FALLTHROUGH'}}"},
        {60, "f", MALFORMED},
        {60, "p0", MALFORMED},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        json_t *data = diamond_data(cases[i].depth);
        double t0 = now_s();
        json_t *got = eval_both(data, cases[i].key, ctx, LD_VALUE_ANY, "'fb'");
        double t = now_s() - t0;
        char what[64];
        snprintf(what, sizeof what, "diamond %d deep, %s", cases[i].depth, cases[i].key);
        fprintf(stderr, "%s: %.3f s for 4 evaluations\n", what, t);
        expect_json(what, got, cases[i].want);
        ck_assert_msg(t < 10.0, "%s took %.2f s", what, t);
        json_decref(got);
        json_decref(data);
    }
    ld_context_unref(ctx);
}
END_TEST

/* Huge keys and ids everywhere (100 KB), deep attribute references. */
START_TEST(test_huge_keys_and_deep_references)
{
    size_t n = 100 * 1024;
    char *big = malloc(n + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'k', n);
    big[n] = '\0';
    json_t *data = json_pack(
        "{s:{s:{s:s,s:i,s:b,s:s,s:[s,s,s],s:{s:i},s:[{s:s,s:i}],"
        "s:[{s:s,s:i,s:[{s:s,s:[s]}]},{s:s,s:{s:[{s:i,s:i},{s:i,s:i}]},s:[]}]},"
        "s:{s:s,s:i,s:b,s:[s],s:{s:i}}},"
        "s:{s:{s:s,s:i,s:[s],s:i,s:b}}}",
        "features", big, "key", big, "version", 1, "on", 1, "salt", big, "variations", "a", "b",
        "c", "fallthrough", "variation", 0, "prerequisites", "key", "p", "variation", 0, "rules",
        "id", big, "variation", 1, "clauses", "op", "segmentMatch", "values", big, "id", big,
        "rollout", "variations", "variation", 0, "weight", 50000, "variation", 2, "weight", 50000,
        "clauses", "p", "key", "p", "version", 1, "on", 1, "variations", "ok", "fallthrough",
        "variation", 0, "segments", big, "key", big, "version", 1, "included", big, "generation",
        1, "unbounded", 0);
    ck_assert_ptr_nonnull(data);
    ld_context_builder *b = ld_context_builder_new("user", big);
    ld_context *in = ld_context_builder_build(b, NULL);
    ld_context_builder_free(b);
    ck_assert_ptr_nonnull(in);
    ld_context *out = ctx_of(USER("u"));
    json_t *got = eval_both(data, big, in, LD_VALUE_ANY, NULL);
    ck_assert_int_eq(json_integer_value(json_object_get(got, "variationIndex")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(got, "reason"), "ruleId")),
                     big);
    json_decref(got);
    got = eval_both(data, big, out, LD_VALUE_ANY, NULL);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(got, "reason"), "ruleIndex")),
                     1);
    json_decref(got);
    ld_context_unref(in);
    ld_context_unref(out);
    json_decref(data);

    /* an attribute reference of 300 components, and one of 200, on a context
     * that has the 200-deep path */
    for (int comps = 200; comps <= 300; comps += 100) {
        char *ref = malloc((size_t)comps * 2 + 1), *p = ref;
        for (int i = 0; i < comps; i++) {
            *p++ = '/';
            *p++ = 'a';
        }
        *p = '\0';
        json_t *v = json_string("deep");
        for (int i = 0; i < 199; i++)
            v = json_pack("{s:o}", "a", v);
        ld_context_builder *cb = ld_context_builder_new("user", "u");
        ck_assert_int_eq(ld_context_builder_set(cb, "a", v), 0);
        ld_context *ctx = ld_context_builder_build(cb, NULL);
        ld_context_builder_free(cb);
        json_t *d = json_pack("{s:{s:{s:s,s:i,s:b,s:[s,s],s:{s:i},s:[{s:s,s:i,s:[{s:s,s:s,s:s,"
                              "s:[s]}]}]}},s:{}}",
                              "features", "f", "key", "f", "version", 1, "on", 1, "variations",
                              "a", "b", "fallthrough", "variation", 0, "rules", "id", "r",
                              "variation", 1, "clauses", "contextKind", "user", "attribute", ref,
                              "op", "in", "values", "deep", "segments");
        json_t *g = eval_both(d, "f", ctx, LD_VALUE_ANY, NULL);
        char *gs = dumps(g);
        fprintf(stderr, "attribute reference of %d components: %s\n", comps, gs);
        free(gs);
        if (comps == 200)
            ck_assert_int_eq(json_integer_value(json_object_get(g, "variationIndex")), 1);
        else
            ck_assert_ptr_nonnull(json_object_get(g, "reason"));
        json_decref(g);
        json_decref(d);
        ld_context_unref(ctx);
        free(ref);
    }
    free(big);
}
END_TEST

/* ---- catastrophic regular expressions ------------------------------------------- */

/* "(a+)+$" against "aaaa...ab": exponential backtracking. PCRE2's default
 * match limit (10,000,000) must stop it: the clause does not match, and the
 * evaluation takes a bounded time (reported). */
START_TEST(test_catastrophic_regex_is_bounded)
{
    static const char *const patterns[] = {"(a+)+$", "(a|a)*$", "(a*)*b", "^(([a-z])+.)+[A-Z]([a-z])+$",
                                           "(?:a|aa)+$"};
    char subject[4200];
    for (size_t len = 30; len <= 4096; len *= 8) {
        memset(subject, 'a', len);
        subject[len] = '!';
        subject[len + 1] = '\0';
        for (size_t i = 0; i < N_OF(patterns); i++) {
            json_t *data = json_pack("{s:{s:{s:s,s:i,s:b,s:[s,s],s:{s:i},s:[{s:s,s:i,s:[{s:s,s:s,"
                                     "s:[s]}]}]}},s:{}}",
                                     "features", "f", "key", "f", "version", 1, "on", 1,
                                     "variations", "a", "b", "fallthrough", "variation", 0, "rules",
                                     "id", "r", "variation", 1, "clauses", "attribute", "name", "op",
                                     "matches", "values", patterns[i], "segments");
            ld_context_builder *b = ld_context_builder_new("user", "u");
            ck_assert_int_eq(ld_context_builder_set(b, "name", json_string(subject)), 0);
            ld_context *ctx = ld_context_builder_build(b, NULL);
            ld_context_builder_free(b);
            ld_store *s = memory_with(data);
            ld_evaluator *ev = evaluator_of(s);
            json_t *warm = detail_json(ev, "f", ctx, LD_VALUE_ANY, NULL); /* compiles */
            json_decref(warm);
            double t0 = now_s();
            json_t *got = detail_json(ev, "f", ctx, LD_VALUE_ANY, NULL);
            double t = now_s() - t0;
            fprintf(stderr, "regex %-30s on %4zu chars: %8.3f ms, %s\n", patterns[i], len + 1,
                    t * 1000, json_integer_value(json_object_get(got, "variationIndex")) ? "match"
                                                                                      : "no match");
            ck_assert_msg(t < 5.0, "%s on %zu chars took %.2f s", patterns[i], len + 1, t);
            json_decref(got);
            done_with(ev, s);
            ld_context_unref(ctx);
            json_decref(data);
        }
    }
}
END_TEST

/* A plain pattern with a group, "^(a|b)*$", matches a string of 10,000
 * 'a's in every regex engine LaunchDarkly's SDKs use; PCRE2's JIT runs out
 * of its default 32 KB stack on it (PCRE2_ERROR_JIT_STACKLIMIT), which must
 * not turn into "no match". */
START_TEST(test_regex_with_groups_matches_long_strings)
{
    if (known_failing("regex with groups on long strings"))
        return;
    static const char *const patterns[] = {"^(a|b)*$", "^(?:a|b)+$", "(ab|a)*$"};
    size_t len = 10000;
    char *subject = malloc(len + 1);
    ck_assert_ptr_nonnull(subject);
    memset(subject, 'a', len);
    subject[len] = '\0';
    for (size_t i = 0; i < N_OF(patterns); i++) {
        json_t *data = json_pack("{s:{s:{s:s,s:i,s:b,s:[s,s],s:{s:i},s:[{s:s,s:i,s:[{s:s,s:s,"
                                 "s:[s]}]}]}},s:{}}",
                                 "features", "f", "key", "f", "version", 1, "on", 1, "variations",
                                 "a", "b", "fallthrough", "variation", 0, "rules", "id", "r",
                                 "variation", 1, "clauses", "attribute", "name", "op", "matches",
                                 "values", patterns[i], "segments");
        ld_context_builder *b = ld_context_builder_new("user", "u");
        ck_assert_int_eq(ld_context_builder_set(b, "name", json_string(subject)), 0);
        ld_context *ctx = ld_context_builder_build(b, NULL);
        ld_context_builder_free(b);
        ld_store *s = memory_with(data);
        ld_evaluator *ev = evaluator_of(s);
        json_t *got = detail_json(ev, "f", ctx, LD_VALUE_ANY, NULL);
        ck_assert_msg(json_integer_value(json_object_get(got, "variationIndex")) == 1,
                      "%s does not match %zu 'a's", patterns[i], len);
        json_decref(got);
        done_with(ev, s);
        ld_context_unref(ctx);
        json_decref(data);
    }
    free(subject);
}
END_TEST

/* ---- the suite ------------------------------------------------------------------- */

static TCase *tcase(Suite *s, const char *name, double timeout)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    return tc;
}

Suite *ld_suite_eval_attack(void)
{
    Suite *s = suite_create("eval_attack");
    (void)known_failing; (void)now_s; (void)later_release; /* TMP */
    TCase *tc = tcase(s, "malformed", 60);
    tcase_add_loop_test(tc, test_malformed_data_gives_a_deterministic_detail, 0,
                        (int)N_OF(malformed_cases));
    tcase_add_test(tc, test_one_json_item_as_flag_and_segment_evaluates);
    tc = tcase(s, "deep", 120);
    tcase_add_test(tc, test_prerequisite_chain_beyond_the_limit_is_malformed);
    tcase_add_test(tc, test_segment_cycle_across_many_segments_is_malformed);
    tcase_add_test(tc, test_rules_over_a_thousand_segments);
    tcase_add_test(tc, test_diamond_nesting_does_not_take_exponential_time);
    tcase_add_test(tc, test_huge_keys_and_deep_references);
    tcase_add_test(tc, test_catastrophic_regex_is_bounded);
    tcase_add_test(tc, test_regex_with_groups_matches_long_strings);
    return s;
}
