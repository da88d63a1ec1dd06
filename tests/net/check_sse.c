/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The server-sent events parser (lib/net/sse.c): the rules of the WHATWG
 * event stream format one by one, every stream fed in every split, large
 * events, the size bound, taking an event's data, and memory running out.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/alloc.h>
#include <ldasync/error.h>

#include "check_fail_alloc.h"
#include "check_suites.h"
#include "core/core-internal.h"
#include "net/net-internal.h"

/* What the parser said, as text: each event as "type|id|data\n" (data with
 * its bytes as they are), each retry as "retry=N\n". */
struct heard {
    char text[8192];
    size_t len;
    int stop_after; /* events before the callback says stop (0: never) */
    int events;
    bool take; /* take each event's data */
};

static void say(struct heard *h, const char *s, size_t n)
{
    ck_assert_uint_lt(h->len + n, sizeof h->text);
    memcpy(h->text + h->len, s, n);
    h->len += n;
    h->text[h->len] = '\0';
}

static int on_event(void *arg, const struct ld__sse_event *ev)
{
    struct heard *h = arg;
    ck_assert_uint_eq(strlen(ev->type), ev->type_len);
    ck_assert_uint_eq(strlen(ev->id), ev->id_len);
    ck_assert(ev->data[ev->data_len] == '\0');
    say(h, ev->type, ev->type_len);
    say(h, "|", 1);
    say(h, ev->id, ev->id_len);
    say(h, "|", 1);
    say(h, ev->data, ev->data_len);
    say(h, "\n", 1);
    h->events++;
    return h->stop_after && h->events >= h->stop_after ? 7 : 0;
}

static void on_retry(void *arg, uint32_t ms)
{
    char text[32];
    int n = snprintf(text, sizeof text, "retry=%u\n", ms);
    say(arg, text, (size_t)n);
}

/* What `stream` (n bytes) gives fed in one piece. */
static const char *parse(struct heard *h, const char *stream, size_t n)
{
    memset(h, 0, sizeof *h);
    struct ld__sse *p = ld__sse_new(1 << 20, on_event, on_retry, h);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(ld__sse_feed(p, stream, n), 0);
    ld__sse_free(p);
    return h->text;
}

#define PARSE(h, lit) parse((h), (lit), sizeof(lit) - 1)

/* The cases: a stream and what it gives. */
static const struct {
    const char *name;
    const char *stream;
    size_t len; /* 0: strlen */
    const char *want;
} cases[] = {
    {"LF", "data: a\n\n", 0, "message||a\n"},
    {"CRLF", "data: a\r\n\r\n", 0, "message||a\n"},
    {"CR", "data: a\r\r", 0, "message||a\n"},
    {"mixed line ends", "event: x\rdata: 1\r\ndata: 2\n\r\ndata: 3\r\n\n", 0,
     "x||1\n2\nmessage||3\n"},
    {"CR CR is two line ends", "data: a\r\rdata: b\r\r", 0, "message||a\nmessage||b\n"},
    {"LF CR", "data: a\n\rdata: b\n\n", 0, "message||a\nmessage||b\n"},
    {"multi-line data", "data: one\ndata: two\ndata:\ndata\n\n", 0, "message||one\ntwo\n\n\n"},
    {"one leading space is dropped", "data:  two spaces\ndata:none\n\n", 0,
     "message|| two spaces\nnone\n"},
    {"a tab is kept", "data:\tx\n\n", 0, "message||\tx\n"},
    {"comments", ": hi\n:\ndata: a\n: between\n\n:only a comment\n\n", 0, "message||a\n"},
    {"event type", "event: put\ndata: {}\n\n", 0, "put||{}\n"},
    {"the type does not last", "event: put\ndata: 1\n\ndata: 2\n\n", 0, "put||1\nmessage||2\n"},
    {"the last type wins", "event: a\nevent: b\ndata: 1\n\n", 0, "b||1\n"},
    {"an empty type is message", "event:\ndata: 1\n\n", 0, "message||1\n"},
    {"a type without data is dropped", "event: put\n\ndata: 1\n\n", 0, "message||1\n"},
    {"no data no event", "\n\n\nid: 5\n\n", 0, ""},
    {"empty data is an event", "data\n\ndata:\n\n", 0, "message||\nmessage||\n"},
    {"the ID lasts", "id: 7\ndata: a\n\ndata: b\n\n", 0, "message|7|a\nmessage|7|b\n"},
    {"an ID set without an event is kept", "id: 9\n\ndata: x\n\n", 0, "message|9|x\n"},
    {"an empty ID resets it", "id: 7\ndata: a\n\nid\ndata: b\n\n", 0, "message|7|a\nmessage||b\n"},
    {"an ID with a NUL is ignored", "id: 1\ndata: a\n\nid: 2\0x\ndata: b\n\n", 33,
     "message|1|a\nmessage|1|b\n"},
    {"a NUL in data stays", "data: a\0b\n\n", 11, "message||a\0b\n"},
    {"retry", "retry: 1500\nretry: 15x\nretry:\nretry: -1\nretry: 00\ndata: a\n\n", 0,
     "retry=1500\nretry=0\nmessage||a\n"},
    {"a huge retry is the most", "retry: 99999999999999999999\n", 0, "retry=4294967295\n"},
    {"unknown fields", "foo: bar\ndata2: x\nDATA: y\nevents: z\ndata: a\n\n", 0, "message||a\n"},
    {"a field name longer than any", "retryretry: 5\ndatadatadata: x\n\n", 0, ""},
    {"the first colon splits", "data: a: b\ndata::c\n\n", 0, "message||a: b\n:c\n"},
    {"a BOM at the start is dropped",
     "\xEF\xBB\xBF"
     "data: a\n\n",
     0, "message||a\n"},
    {"only one BOM",
     "\xEF\xBB\xBF\xEF\xBB\xBF"
     "data: a\n\ndata: b\n\n",
     0, "message||b\n"},
    {"half a BOM is text",
     "\xEF\xBB"
     "data: a\n\ndata: b\n\n",
     0, "message||b\n"},
    {"a BOM later is text", "data: a\xEF\xBB\xBF\n\n", 0, "message||a\xEF\xBB\xBF\n"},
    {"no empty line, no event", "data: a\n\ndata: b\n", 0, "message||a\n"},
    {"bytes are not decoded", "data: \xff\xfe\n\n", 0, "message||\xff\xfe\n"},
    {"LaunchDarkly's put", "event: put\ndata: {\"path\":\"/\",\"data\":{}}\n\n:\n\n", 0,
     "put||{\"path\":\"/\",\"data\":{}}\n"},
};

#define NCASES (sizeof cases / sizeof cases[0])

static size_t case_len(size_t i)
{
    return cases[i].len ? cases[i].len : strlen(cases[i].stream);
}

START_TEST(test_each_rule)
{
    struct heard h;
    const char *got = parse(&h, cases[_i].stream, case_len((size_t)_i));
    size_t want_len = strlen(cases[_i].want);
    if (strcmp(cases[_i].name, "a NUL in data stays") == 0)
        want_len = 13;
    ck_assert_msg(h.len == want_len && memcmp(got, cases[_i].want, want_len) == 0,
                  "%s: got \"%s\", want \"%s\"", cases[_i].name, got, cases[_i].want);
}
END_TEST

/* Each case fed in two and in three pieces, split at every position, and
 * a byte at a time: the same events. */
START_TEST(test_every_split_gives_the_same_events)
{
    for (size_t c = 0; c < NCASES; c++) {
        size_t n = case_len(c);
        struct heard whole, h;
        parse(&whole, cases[c].stream, n);
        for (size_t a = 0; a <= n; a++)
            for (size_t b = a; b <= n; b++) {
                memset(&h, 0, sizeof h);
                struct ld__sse *p = ld__sse_new(1 << 20, on_event, on_retry, &h);
                ck_assert_ptr_nonnull(p);
                const char *s = cases[c].stream;
                if (ld__sse_feed(p, s, a) != 0 || ld__sse_feed(p, s + a, b - a) != 0 ||
                    ld__sse_feed(p, s + b, n - b) != 0)
                    ck_abort_msg("%s: a feed failed", cases[c].name);
                ld__sse_free(p);
                if (h.len != whole.len || memcmp(h.text, whole.text, h.len) != 0)
                    ck_abort_msg("%s split at %zu and %zu: \"%s\", whole: \"%s\"", cases[c].name, a,
                                 b, h.text, whole.text);
            }
        memset(&h, 0, sizeof h);
        struct ld__sse *p = ld__sse_new(1 << 20, on_event, on_retry, &h);
        for (size_t i = 0; i < n; i++)
            ck_assert_int_eq(ld__sse_feed(p, cases[c].stream + i, 1), 0);
        ld__sse_free(p);
        ck_assert_msg(h.len == whole.len && memcmp(h.text, whole.text, h.len) == 0,
                      "%s a byte at a time", cases[c].name);
    }
}
END_TEST

/* A new body: the event and line being read go, the last ID stays, a BOM
 * is looked for again. */
START_TEST(test_reset_starts_a_new_body)
{
    struct heard h = {0};
    struct ld__sse *p = ld__sse_new(1 << 20, on_event, on_retry, &h);
    ck_assert_int_eq(ld__sse_feed(p, "id: 4\ndata: a\n\nevent: x\ndata: lost\nda", 36), 0);
    ld__sse_reset(p);
    static const char next[] = "\xEF\xBB\xBF"
                               "ta: b\ndata: c\n\n";
    ck_assert_int_eq(ld__sse_feed(p, next, sizeof next - 1), 0);
    ck_assert_str_eq(h.text, "message|4|a\nmessage|4|c\n");
    size_t len;
    ck_assert_str_eq(ld__sse_last_id(p, &len), "4");
    ck_assert_uint_eq(len, 1);
    /* a CR at the end of the old body does not eat the new body's LF */
    ck_assert_int_eq(ld__sse_feed(p, "data: d\r", 8), 0);
    ld__sse_reset(p);
    ck_assert_int_eq(ld__sse_feed(p, "\ndata: e\n\n", 10), 0);
    ck_assert_str_eq(h.text, "message|4|a\nmessage|4|c\nmessage|4|e\n");
    ld__sse_free(p);
}
END_TEST

/* A callback that says stop: the feed returns its value at once. */
START_TEST(test_the_callback_stops_the_feed)
{
    struct heard h = {0};
    h.stop_after = 1;
    struct ld__sse *p = ld__sse_new(1 << 20, on_event, NULL, &h);
    static const char s[] = "retry: 5\ndata: a\n\ndata: b\n\n";
    ck_assert_int_eq(ld__sse_feed(p, s, sizeof s - 1), 7);
    ck_assert_str_eq(h.text, "message||a\n"); /* no retry callback: none heard */
    ld__sse_reset(p);
    h.stop_after = 0;
    ck_assert_int_eq(ld__sse_feed(p, "data: c\n\n", 9), 0);
    ck_assert_str_eq(h.text, "message||a\nmessage||c\n");
    ld__sse_free(p);
}
END_TEST

static int take_event(void *arg, const struct ld__sse_event *ev)
{
    struct ld__sse *p = *(struct ld__sse **)arg;
    size_t len;
    char *d = ld__sse_take_data(p, &len);
    ck_assert_ptr_eq(d, ev->data);
    ck_assert_uint_eq(len, ev->data_len);
    ((char **)arg)[1 + (d[0] == 'b')] = d;
    return 0;
}

START_TEST(test_taking_the_data)
{
    void *slots[3] = {0};
    struct ld__sse *p = ld__sse_new(1 << 20, take_event, NULL, slots);
    slots[0] = p;
    ck_assert_ptr_null(ld__sse_take_data(p, NULL)); /* outside on_event */
    ck_assert_int_eq(ld__sse_feed(p, "data: a1\n\ndata: b2\n\n", 20), 0);
    ck_assert_str_eq(slots[1], "a1");
    ck_assert_str_eq(slots[2], "b2");
    ld__free(slots[1]);
    ld__free(slots[2]);
    ld__sse_free(p);
}
END_TEST

/* An event of 4 MB in one data line, fed in pieces of every size class:
 * one event with every byte; and the bound: one byte more than max_event
 * is LD_EPARSE, in data, type or ID, whatever the pieces. */
static int count_event(void *arg, const struct ld__sse_event *ev)
{
    size_t *n = arg;
    *n = ev->data_len;
    for (size_t i = 0; i < ev->data_len; i++)
        if (ev->data[i] != (char)('a' + i % 26))
            ck_abort_msg("byte %zu differs", i);
    return 0;
}

START_TEST(test_large_events_and_the_bound)
{
    size_t n = 4u << 20;
    char *s = malloc(n + 16);
    ck_assert_ptr_nonnull(s);
    memcpy(s, "data: ", 6);
    for (size_t i = 0; i < n; i++)
        s[6 + i] = (char)('a' + i % 26);
    memcpy(s + 6 + n, "\n\n", 2);
    size_t total = n + 8;
    static const size_t pieces[] = {1 << 20, 65536, 4093, 1};
    for (size_t k = 0; k < 4; k++) {
        size_t got = 0;
        struct ld__sse *p = ld__sse_new(n + 1, count_event, NULL, &got);
        for (size_t at = 0; at < total; at += pieces[k]) {
            size_t m = total - at < pieces[k] ? total - at : pieces[k];
            if (ld__sse_feed(p, s + at, m) != 0)
                ck_abort_msg("feed at %zu", at);
        }
        ck_assert_uint_eq(got, n);
        ld__sse_free(p);
    }
    /* max_event n: the data and its LF are n + 1 */
    for (size_t k = 0; k < 2; k++) {
        size_t got = 0;
        struct ld__sse *p = ld__sse_new(n, count_event, NULL, &got);
        int rc = 0;
        for (size_t at = 0; at < total && rc == 0; at += pieces[k]) {
            size_t m = total - at < pieces[k] ? total - at : pieces[k];
            rc = ld__sse_feed(p, s + at, m);
        }
        ck_assert_int_eq(rc, LD_EPARSE);
        ck_assert_uint_eq(got, 0);
        ld__sse_reset(p); /* and it goes on */
        ck_assert_int_eq(ld__sse_feed(p, "data: abc\n\n", 11), 0);
        ck_assert_uint_eq(got, 3);
        ld__sse_free(p);
    }
    free(s);
    struct heard h = {0};
    struct ld__sse *p = ld__sse_new(10, on_event, NULL, &h);
    ck_assert_int_eq(ld__sse_feed(p, "event: 12345\nid: 12\ndata: 1\n\n", 29), 0);
    ck_assert_int_eq(ld__sse_feed(p, "event: 12345\nid: 1234\ndata: 1\n\n", 31), LD_EPARSE);
    ld__sse_reset(p);
    ck_assert_int_eq(ld__sse_feed(p, "event: 12345678901\n", 19), LD_EPARSE);
    ck_assert_str_eq(h.text, "12345|12|1\n");
    ld__sse_free(p);
}
END_TEST

START_TEST(test_bad_arguments)
{
    struct heard h = {0};
    ck_assert_ptr_null(ld__sse_new(10, NULL, on_retry, &h));
    ck_assert_int_eq(ld__sse_feed(NULL, "x", 1), LD_EINVAL);
    struct ld__sse *p = ld__sse_new(10, on_event, NULL, &h);
    ck_assert_int_eq(ld__sse_feed(p, NULL, 1), LD_EINVAL);
    ck_assert_int_eq(ld__sse_feed(p, NULL, 0), 0);
    ld__sse_free(p);
    ld__sse_free(NULL);
    ld__sse_reset(NULL);
    size_t len = 9;
    ck_assert_str_eq(ld__sse_last_id(NULL, &len), "");
    ck_assert_uint_eq(len, 0);
}
END_TEST

/* Every allocation failing in turn: LD_ENOMEM from the feed (or NULL from
 * new), never a crash; what was heard before the failure is right; after
 * a reset, the parser works. */
START_TEST(test_allocation_failures)
{
    static const char s[] = "id: 1\nevent: put\ndata: {\"a\":1}\ndata: 2\n\nevent: patch\n"
                            "data: x\n\n";
    for (g_fail_at = 1;; g_fail_at++) {
        struct heard h = {0};
        ck_assert_int_eq(ld_set_alloc_funcs(chaos_malloc, chaos_realloc, free), 0);
        g_calls = 0;
        g_counting = true;
        struct ld__sse *p = ld__sse_new(1 << 20, on_event, on_retry, &h);
        int rc = p ? ld__sse_feed(p, s, sizeof s - 1) : LD_ENOMEM;
        g_counting = false;
        ld_set_alloc_funcs(NULL, NULL, NULL);
        bool failed = g_calls >= g_fail_at;
        if (!failed) {
            ck_assert_int_eq(rc, 0);
            ck_assert_str_eq(h.text, "put|1|{\"a\":1}\n2\npatch|1|x\n");
            ld__sse_free(p);
            break;
        }
        ck_assert_msg(rc == LD_ENOMEM, "N=%ld: %d", g_fail_at, rc);
        ck_assert(strncmp("put|1|{\"a\":1}\n2\npatch|1|x\n", h.text, h.len) == 0);
        if (p) {
            ld__sse_reset(p);
            memset(&h, 0, sizeof h);
            ck_assert_int_eq(ld__sse_feed(p, "data: z\n\n", 9), 0);
            ck_assert(strstr(h.text, "|z\n") != NULL);
        }
        ld__sse_free(p);
    }
    g_fail_at = 0;
}
END_TEST

Suite *ld_suite_sse(void)
{
    Suite *s = suite_create("sse");
    TCase *tc = tcase_create("rules");
    tcase_add_loop_test(tc, test_each_rule, 0, (int)NCASES);
    tcase_add_test(tc, test_every_split_gives_the_same_events);
    tcase_add_test(tc, test_reset_starts_a_new_body);
    tcase_add_test(tc, test_the_callback_stops_the_feed);
    tcase_add_test(tc, test_taking_the_data);
    tcase_add_test(tc, test_large_events_and_the_bound);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_allocation_failures);
    suite_add_tcase(s, tc);
    return s;
}
