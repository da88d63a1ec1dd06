/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Clause operators (lib/eval/eval-ops.h): LaunchDarkly's vectors (evaluation spec,
 * 8.1-8.4), the strict date and semver parsers, `in` over hashed lists, and
 * compiling with allocations failing. lib/eval/eval_ops.c is compiled into this
 * program (Makefile.am, tests/internal_alloc.c).
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <math.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "check_util.h"
#include "eval/eval-internal.h"

static json_t *parse(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    ck_assert_msg(j != NULL, "bad JSON in the test: %s (%s)", text, err.text);
    return j;
}

static enum ld__op op_of(const char *name)
{
    return ld__op_parse(name, strlen(name));
}

static struct ld__clause_values *compile_ok(const char *op, const json_t *values)
{
    struct ld__clause_values *cv = NULL;
    ck_assert_int_eq(ld__clause_values_compile(op_of(op), values, &cv), 0);
    ck_assert_ptr_nonnull(cv);
    return cv;
}

/* `u` (JSON text) against the clause values (JSON text) under `op`. */
static bool match_text(const char *op, const char *u, const char *values)
{
    json_t *uj = parse(u), *vj = parse(values);
    struct ld__clause_values *cv = compile_ok(op, vj);
    json_decref(vj); /* the compiled form must not need it */
    bool got = ld__clause_values_match(cv, uj);
    ld__clause_values_free(cv);
    json_decref(uj);
    return got;
}

#define EXPECT(op, u, values, want)                                                             \
    ck_assert_msg(match_text(op, u, values) == (want), "%s: %s against %s should be %s", op, u, \
                  values, (want) ? "true" : "false")

#define T true
#define F false

/* ---- operator names ------------------------------------------------------ */

START_TEST(test_op_parse_knows_launchdarkly_names_only)
{
    static const struct {
        const char *name;
        enum ld__op op;
    } names[] = {
        {"in", LD__OP_IN},
        {"endsWith", LD__OP_ENDS_WITH},
        {"startsWith", LD__OP_STARTS_WITH},
        {"matches", LD__OP_MATCHES},
        {"contains", LD__OP_CONTAINS},
        {"lessThan", LD__OP_LESS_THAN},
        {"lessThanOrEqual", LD__OP_LESS_THAN_OR_EQUAL},
        {"greaterThan", LD__OP_GREATER_THAN},
        {"greaterThanOrEqual", LD__OP_GREATER_THAN_OR_EQUAL},
        {"before", LD__OP_BEFORE},
        {"after", LD__OP_AFTER},
        {"semVerEqual", LD__OP_SEMVER_EQUAL},
        {"semVerLessThan", LD__OP_SEMVER_LESS_THAN},
        {"semVerGreaterThan", LD__OP_SEMVER_GREATER_THAN},
        {"segmentMatch", LD__OP_SEGMENT_MATCH},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        ck_assert_int_eq(op_of(names[i].name), names[i].op);
    const char *unknown[] = {"",         "whatever",  "In",  "IN",         "segmentmatch",
                             "endswith", "startsWit", "in ", "semverEqual"};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
        ck_assert_int_eq(op_of(unknown[i]), LD__OP_UNKNOWN);
    ck_assert_int_eq(ld__op_parse(NULL, 0), LD__OP_UNKNOWN);
    ck_assert_int_eq(ld__op_parse("in\0x", 4), LD__OP_UNKNOWN); /* by length */
    ck_assert_int_eq(ld__op_parse("inx", 2), LD__OP_IN);
}
END_TEST

/* ---- 8.1 ------------------------------------------------------------------ */

START_TEST(test_number_operators_follow_go_vectors)
{
    EXPECT("in", "99", "[99]", T);
    EXPECT("in", "99", "[99, 98, 97, 96]", T);
    EXPECT("in", "99.0001", "[99.0001]", T);
    EXPECT("lessThan", "1", "[1.99999]", T);
    EXPECT("lessThan", "1.99999", "[1]", F);
    EXPECT("lessThan", "1", "[2]", T);
    EXPECT("lessThanOrEqual", "1", "[1.0]", T);
    EXPECT("greaterThan", "2", "[1.99999]", T);
    EXPECT("greaterThan", "1.99999", "[2]", F);
    EXPECT("greaterThan", "2", "[1]", T);
    EXPECT("greaterThanOrEqual", "1", "[1.0]", T);
    /* equal is neither less nor greater */
    EXPECT("lessThan", "1", "[1.0]", F);
    EXPECT("greaterThan", "1.0", "[1]", F);
    EXPECT("lessThanOrEqual", "2", "[1]", F);
    EXPECT("greaterThanOrEqual", "1", "[2]", F);
    EXPECT("lessThan", "-5", "[-4.5]", T);
}
END_TEST

START_TEST(test_string_operators_follow_go_vectors)
{
    EXPECT("in", "\"x\"", "[\"x\"]", T);
    EXPECT("in", "\"x\"", "[\"x\", \"a\", \"b\", \"c\"]", T);
    EXPECT("in", "\"x\"", "[\"xyz\"]", F);
    EXPECT("startsWith", "\"xyz\"", "[\"x\"]", T);
    EXPECT("startsWith", "\"x\"", "[\"xyz\"]", F);
    EXPECT("endsWith", "\"xyz\"", "[\"z\"]", T);
    EXPECT("endsWith", "\"z\"", "[\"xyz\"]", F);
    EXPECT("contains", "\"xyz\"", "[\"y\"]", T);
    EXPECT("contains", "\"y\"", "[\"xyz\"]", F);
}
END_TEST

START_TEST(test_mixed_types_never_match)
{
    EXPECT("in", "\"99\"", "[99]", F);
    EXPECT("in", "99", "[\"99\"]", F);
    EXPECT("contains", "\"99\"", "[99]", F);
    EXPECT("startsWith", "\"99\"", "[99]", F);
    EXPECT("endsWith", "\"99\"", "[99]", F);
    EXPECT("lessThanOrEqual", "\"99\"", "[99]", F);
    EXPECT("lessThanOrEqual", "99", "[\"99\"]", F);
    EXPECT("greaterThanOrEqual", "\"99\"", "[99]", F);
    EXPECT("greaterThanOrEqual", "99", "[\"99\"]", F);
    /* booleans are not numbers, numbers not booleans */
    EXPECT("in", "true", "[1]", F);
    EXPECT("in", "1", "[true]", F);
    EXPECT("in", "0", "[false]", F);
    EXPECT("lessThan", "true", "[2]", F);
    EXPECT("greaterThan", "2", "[false]", F);
    EXPECT("in", "null", "[null]", F);
    EXPECT("in", "\"\"", "[null, false, 0, [], {}]", F);
    EXPECT("in", "[]", "[\"\", 0, {}]", F);
    EXPECT("in", "{}", "[[], \"{}\"]", F);
}
END_TEST

START_TEST(test_in_compares_booleans)
{
    EXPECT("in", "true", "[true]", T);
    EXPECT("in", "false", "[false]", T);
    EXPECT("in", "true", "[false]", F);
    EXPECT("in", "false", "[true]", F);
    EXPECT("in", "true", "[false, true]", T);
}
END_TEST

START_TEST(test_in_compares_arrays_and_objects_deeply)
{
    /* 8.1: a context value [["x"]] is tried element by element by the caller:
     * here the element ["x"] */
    EXPECT("in", "[\"x\"]", "[[\"x\"]]", T);
    EXPECT("in", "[\"x\"]", "[[\"x\"], [\"a\"], [\"b\"]]", T);
    EXPECT("in", "{\"x\":\"1\"}", "[{\"x\":\"1\"}]", T);
    EXPECT("in", "{\"x\":\"1\"}", "[{\"x\":\"1\"}, {\"a\":\"2\"}, {\"b\":\"3\"}]", T);
    /* deep, numbers by value, member order irrelevant, element order matters */
    EXPECT("in", "[1, [2, {\"a\": 3}]]", "[[1.0, [2.0, {\"a\": 3.0}]]]", T);
    EXPECT("in", "{\"a\": 1, \"b\": [true, null]}", "[{\"b\": [true, null], \"a\": 1.0}]", T);
    EXPECT("in", "[1, 2]", "[[2, 1]]", F);
    EXPECT("in", "[1, 2]", "[[1, 2, 3], [1], [1, \"2\"]]", F);
    EXPECT("in", "{\"a\": 1}", "[{\"a\": 1, \"b\": 2}, {\"b\": 1}, {\"a\": true}, {\"a\": \"1\"}]",
           F);
    EXPECT("in", "{\"a\": 1, \"b\": 2}", "[{\"a\": 1}]", F);
    EXPECT("in", "[]", "[[]]", T);
    EXPECT("in", "{}", "[{}]", T);
    EXPECT("in", "[]", "[{}]", F);
    /* keys compared with their length */
    json_t *u = json_object(), *v = json_pack("[{s:i}]", "a", 1);
    json_object_setn_new(u, "a\0b", 3, json_integer(1));
    struct ld__clause_values *cv = compile_ok("in", v);
    ck_assert(!ld__clause_values_match(cv, u));
    ld__clause_values_free(cv);
    json_decref(u);
    json_decref(v);
}
END_TEST

START_TEST(test_matches_follows_go_vectors)
{
    EXPECT("matches", "\"hello world\"", "[\"hello.*rld\"]", T);
    EXPECT("matches", "\"hello world\"", "[\"hello.*orl\"]", T);
    EXPECT("matches", "\"hello world\"", "[\"l+\"]", T);
    EXPECT("matches", "\"hello world\"", "[\"(world|planet)\"]", T);
    EXPECT("matches", "\"hello world\"", "[\"aloha\"]", F);
    EXPECT("matches", "\"hello world\"", "[\"***bad regex\"]", F);
}
END_TEST

START_TEST(test_bad_regexes_are_dropped_and_good_ones_still_match)
{
    EXPECT("matches", "\"hello world\"", "[\"***bad regex\", \"[unclosed\", \"(x\", \"wor\"]", T);
    EXPECT("matches", "\"hello world\"", "[\"***bad regex\", \"[unclosed\", \"(x\"]", F);
    EXPECT("matches", "\"a\"", "[\"\\\\\"]", F);                   /* trailing backslash */
    EXPECT("matches", "\"anything\"", "[\"\"]", T);                /* empty pattern */
    EXPECT("matches", "\"x\"", "[1, true, null, [\"x\"], {}]", F); /* not patterns */
    /* unanchored, case-sensitive, UTF-8 */
    EXPECT("matches", "\"say Hello\"", "[\"Hello\"]", T);
    EXPECT("matches", "\"say Hello\"", "[\"hello\"]", F);
    EXPECT("matches", "\"caf\\u00e9\"", "[\"^caf.$\"]", T);
    /* PCRE2 features (Go's RE2 would reject lookbehind) */
    EXPECT("matches", "\"foobar\"", "[\"(?<=foo)bar\"]", T);
}
END_TEST

START_TEST(test_matches_refuses_invalid_utf8_subjects)
{
    json_t *values = parse("[\"^.$\", \"x\", \"\"]");
    struct ld__clause_values *cv = compile_ok("matches", values);
    json_t *bad = json_stringn_nocheck("x\xff", 2);
    json_t *good = json_string("\xc3\xa9"); /* é */
    ck_assert(!ld__clause_values_match(cv, bad));
    ck_assert(ld__clause_values_match(cv, good));
    json_decref(bad);
    json_decref(good);
    ld__clause_values_free(cv);
    json_decref(values);
}
END_TEST

/* "(a+)+$" against 40 a's and a "!" backtracks 2^40 times without a
 * limit: the match limit stops it and it does not match (an event loop
 * must not be held for hours). A pattern after it still runs. */
START_TEST(test_matches_gives_up_on_catastrophic_backtracking_without_matching)
{
    json_t *values = parse("[\"(a+)+$\", \"!$\"]");
    struct ld__clause_values *cv = compile_ok("matches", values);
    char subject[42];
    memset(subject, 'a', 40);
    subject[40] = '!';
    subject[41] = '\0';
    json_t *u = json_string(subject);
    ck_assert(ld__clause_values_match(cv, u)); /* by "!$" */
    json_decref(values);
    ld__clause_values_free(cv);
    values = parse("[\"(a+)+$\"]");
    cv = compile_ok("matches", values);
    ck_assert(!ld__clause_values_match(cv, u));
    json_decref(u);
    json_decref(values);
    ld__clause_values_free(cv);
}
END_TEST

/* Whether patterns run on PCRE2's JIT here (LDASYNC_NO_JIT: the
 * interpreter, for valgrind). */
static bool jit_in_use(void)
{
    uint32_t jit = 0;
    const char *env = getenv("LDASYNC_NO_JIT");
    return pcre2_config(PCRE2_CONFIG_JIT, &jit) >= 0 && jit && !(env && *env && strcmp(env, "0"));
}

/* `len` characters of a-z with a '-' every 7th. */
static json_t *letters(size_t len, bool dashes)
{
    char *s = malloc(len + 1);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < len; i++)
        s[i] = dashes && i % 7 == 3 ? '-' : (char)('a' + i % 26);
    s[len] = '\0';
    json_t *j = json_string(s);
    free(s);
    return j;
}

/* A group repeated over a long subject takes a JIT stack frame per
 * repetition: PCRE2's default stack (32 KiB) stopped this linear pattern
 * after a few thousand characters, and the interpreter it fell back to
 * gave up too ("no match", after 100+ ms). On the thread's own stack it
 * matches. Without the JIT (valgrind) the interpreter's limits stop it:
 * then it answers no match and says it was stopped. */
START_TEST(test_matches_linear_pattern_on_a_long_subject)
{
    json_t *values = parse("[\"^(?:[a-z]|-)+$\"]");
    struct ld__clause_values *cv = compile_ok("matches", values);
    json_t *u = letters(50000, true);
    bool m = ld__clause_values_match(cv, u);
    if (jit_in_use()) {
        ck_assert(m);
        ck_assert(!ld__clause_values_stopped(cv));
    } else {
        ck_assert(m || ld__clause_values_stopped(cv));
    }
    json_t *bad = json_string("abc-DEF"); /* and a short subject still fails */
    ck_assert(!ld__clause_values_match(cv, bad));
    json_decref(bad);
    json_decref(u);
    json_decref(values);
    ld__clause_values_free(cv);
}
END_TEST

/* Evaluators on several threads: each thread's matches run on its own JIT
 * stack, made at its first compile, so long subjects match on every
 * thread at once (and the stacks are freed as the threads exit). */
struct linear_run {
    json_t *subject;
    int matched;
};

static void *linear_on_thread(void *arg)
{
    struct linear_run *r = arg;
    json_t *values = json_loads("[\"^(?:[a-z]|-)+$\"]", 0, NULL);
    struct ld__clause_values *cv = NULL;
    if (values && ld__clause_values_compile(LD__OP_MATCHES, values, &cv) == 0)
        for (int i = 0; i < 20; i++)
            r->matched += ld__clause_values_match(cv, r->subject);
    ld__clause_values_free(cv);
    json_decref(values);
    return NULL;
}

START_TEST(test_matches_on_several_threads_at_once)
{
    json_t *u = letters(50000, true);
    struct linear_run runs[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        runs[i] = (struct linear_run){u, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, linear_on_thread, &runs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        if (jit_in_use())
            ck_assert_int_eq(runs[i].matched, 20);
    }
    json_decref(u);
}
END_TEST

/* A runaway pattern on 100,000 characters: a limit stops it, it does not
 * match, and the compiled form is marked stopped (once: it stays marked,
 * the mark is per compiled form, so per flag version). A form whose
 * matches were never stopped is not marked. */
START_TEST(test_matches_runaway_pattern_is_stopped_and_marked_once)
{
    json_t *values = parse("[\"^(([a-z])+.)+[A-Z]([a-z])+$\"]");
    struct ld__clause_values *cv = compile_ok("matches", values);
    json_t *small = json_string("abcAbc");
    ck_assert(ld__clause_values_match(cv, small));
    ck_assert(!ld__clause_values_stopped(cv));
    json_t *u = letters(100000, false);
    ck_assert(!ld__clause_values_match(cv, u));
    ck_assert(ld__clause_values_stopped(cv));
    ck_assert(!ld__clause_values_match(cv, u));
    ck_assert(ld__clause_values_match(cv, small)); /* still answers */
    ck_assert(ld__clause_values_stopped(cv));
    ld__clause_values_free(cv);
    json_decref(values);
    /* other operators are never marked */
    values = parse("[\"abc\"]");
    cv = compile_ok("startsWith", values);
    ck_assert(ld__clause_values_match(cv, small));
    ck_assert(!ld__clause_values_stopped(cv));
    ld__clause_values_free(cv);
    json_decref(values);
    json_decref(small);
    json_decref(u);
}
END_TEST

/* `len` characters: blocks of `block` x's, each closed by a 'z', then
 * `end` (so that the 'y' PCRE2 looks for first may be there). */
static json_t *x_blocks(size_t len, size_t block, const char *end)
{
    char *s = malloc(len + 1);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < len; i++)
        s[i] = i % (block + 1) == block ? 'z' : 'x';
    memcpy(s + len - strlen(end), end, strlen(end));
    s[len] = '\0';
    json_t *j = json_string(s);
    free(s);
    return j;
}

/* An unanchored runaway pattern is tried at every start position, each
 * under the match limit: "(x+x+)+y" on blocks of 14 x's backtracks some
 * 24,000 steps at each. A budget shared by the positions stops it: no
 * match, and the form is marked stopped. The pattern still matches where
 * it should, short and long. */
START_TEST(test_matches_unanchored_runaway_is_stopped_across_positions)
{
    json_t *values = parse("[\"(x+x+)+y\"]");
    struct ld__clause_values *cv = compile_ok("matches", values);
    json_t *small = json_string("zzxxxy");
    ck_assert(ld__clause_values_match(cv, small));
    ck_assert(!ld__clause_values_stopped(cv));
    json_t *u = x_blocks(100000, 14, "zxy");
    ck_assert(!ld__clause_values_match(cv, u));
    ck_assert(ld__clause_values_stopped(cv));
    ck_assert(ld__clause_values_match(cv, small));
    json_decref(u);
    ld__clause_values_free(cv);
    /* short blocks: a few steps a position, within the budget: the search
     * runs to the end, and finds the match there */
    cv = compile_ok("matches", values);
    u = x_blocks(100000, 2, "zxxy");
    ck_assert(ld__clause_values_match(cv, u));
    ck_assert(!ld__clause_values_stopped(cv));
    json_decref(u);
    ld__clause_values_free(cv);
    json_decref(values);
    json_decref(small);
}
END_TEST

/* `n` x's with `tail` written at `at`. */
static json_t *xs_with(size_t n, size_t at, const char *tail)
{
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, 'x', n);
    memcpy(s + at, tail, strlen(tail));
    s[n] = '\0';
    json_t *j = json_string(s);
    free(s);
    return j;
}

/* The budget bounds backtracking, not searching: patterns that match far
 * into a subject of 1,000,000 characters still match, and those that do
 * not match answer "no match" without a stop. Anchored patterns (one start
 * position) keep the whole limit. */
START_TEST(test_matches_searches_far_into_a_long_subject)
{
    static const struct {
        const char *pattern;
        size_t at;
        const char *tail;
        bool match;
    } cases[] = {
        {"[\"y$\"]", 999999, "y", true},
        {"[\"abc\"]", 900000, "abc", true},
        {"[\"abc\", \"y$\"]", 900000, "abd", false},
        {"[\"[a-c]{3}\\\\d\"]", 900000, "abc1", true},
        {"[\"(?:ab|cd)+e\"]", 900000, "ababcde", true},
        {"[\"x(?=y)\"]", 999999, "y", true},
        {"[\"x(?=y)\"]", 999999, "z", false},
        {"[\"(?m)^abc\"]", 900000, "\nabc", true},
        {"[\"^x+y\"]", 999999, "y", true},
        {"[\"^x+z\"]", 999999, "y", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *values = parse(cases[i].pattern);
        struct ld__clause_values *cv = compile_ok("matches", values);
        json_t *u = xs_with(1000000, cases[i].at, cases[i].tail);
        ck_assert_msg(ld__clause_values_match(cv, u) == cases[i].match, "%s", cases[i].pattern);
        ck_assert_msg(!ld__clause_values_stopped(cv), "%s", cases[i].pattern);
        json_decref(u);
        json_decref(values);
        ld__clause_values_free(cv);
    }
}
END_TEST

/* The operator checks subjects itself (then skips PCRE2's check): it must
 * refuse exactly what PCRE2 refuses. Every string of 1 or 2 bytes, of 3
 * bytes from bytes around every boundary, and of 4 such bytes starting with
 * a 4-byte lead (or an invalid one), against PCRE2's check. */
START_TEST(test_matches_checks_utf8_as_pcre2_does)
{
    json_t *values = parse("[\"\"]"); /* matches every valid subject */
    struct ld__clause_values *cv = compile_ok("matches", values);
    int err;
    PCRE2_SIZE at;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR) "", 0, PCRE2_UTF, &err, &at, NULL);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    ck_assert_ptr_nonnull(code);
    ck_assert_ptr_nonnull(md);
    static const unsigned char edge[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf,
                                         0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee,
                                         0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xf8, 0xfe, 0xff};
    const size_t ne = sizeof(edge);
    unsigned char buf[16];
    long checked = 0, refused = 0;
    for (size_t len = 1; len <= 4; len++) {
        size_t total = 1;
        for (size_t k = 0; k < len; k++)
            total *= len <= 2 ? 256 : ne;
        for (size_t n = 0; n < total; n++) {
            size_t x = n;
            for (size_t k = 0; k < len; k++) {
                size_t base = len <= 2 ? 256 : ne;
                buf[k] = len <= 2 ? (unsigned char)(x % base) : edge[x % base];
                x /= base;
            }
            if (len == 4 && buf[0] < 0xf0)
                continue;
            /* also after 8 ASCII bytes (the word-at-a-time path) */
            for (int pad = 0; pad <= 8; pad += 8) {
                unsigned char s[32];
                memset(s, 'a', (size_t)pad);
                memcpy(s + pad, buf, len);
                size_t slen = (size_t)pad + len;
                bool pcre_ok = pcre2_match(code, s, slen, 0, 0, md, NULL) >= 0;
                json_t *u = json_stringn_nocheck((const char *)s, slen);
                bool ours = ld__clause_values_match(cv, u);
                json_decref(u);
                if (ours != pcre_ok) /* not ck_assert each time: each is a write(2) */
                    ck_abort_msg("length %zu, first byte %02x: ours %d, PCRE2 %d", slen, s[pad],
                                 ours, pcre_ok);
                checked++;
                refused += !pcre_ok;
            }
        }
    }
    ck_assert_int_gt(refused, 1000);
    ck_assert_int_gt(checked, refused);
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    ld__clause_values_free(cv);
    json_decref(values);
}
END_TEST

START_TEST(test_string_operators_follow_harness_vectors)
{
    EXPECT("startsWith", "\"prefix\"", "[\"prefix\"]", T);
    EXPECT("startsWith", "\"prefixabc\"", "[\"prefix\"]", T);
    EXPECT("startsWith", "\"notprefix\"", "[\"prefix\"]", F);
    EXPECT("startsWith", "\"Prefixabc\"", "[\"prefix\"]", F);
    EXPECT("endsWith", "\"suffix\"", "[\"suffix\"]", T);
    EXPECT("endsWith", "\"abcsuffix\"", "[\"suffix\"]", T);
    EXPECT("endsWith", "\"suffixno\"", "[\"suffix\"]", F);
    EXPECT("endsWith", "\"abcSuffix\"", "[\"suffix\"]", F);
    EXPECT("contains", "\"substring\"", "[\"substring\"]", T);
    EXPECT("contains", "\"abcsubstringxyz\"", "[\"substring\"]", T);
    EXPECT("contains", "\"abcsubstxyz\"", "[\"substring\"]", F);
    EXPECT("contains", "\"abcSubstringxyz\"", "[\"substring\"]", F);
    EXPECT("matches", "\"matchThisName\"", "[\"^[A-Za-z]+\"]", T);
    EXPECT("matches", "\"_Don't match This Name\"", "[\"^[A-Za-z]+\"]", F);
    const char *ops[] = {"startsWith", "endsWith", "contains", "matches"};
    const char *us[] = {"true", "99", "null"};
    const char *cs[] = {"[\"true\"]", "[\"99\"]", "[\"null\"]"};
    for (int o = 0; o < 4; o++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                EXPECT(ops[o], us[i], cs[j], F);
    /* the empty string starts, ends and is contained in every string */
    EXPECT("startsWith", "\"\"", "[\"\"]", T);
    EXPECT("endsWith", "\"abc\"", "[\"\"]", T);
    EXPECT("contains", "\"abc\"", "[\"\"]", T);
    /* several values: any */
    EXPECT("endsWith", "\"file.txt\"", "[\".png\", \".txt\"]", T);
    EXPECT("contains", "\"aaab\"", "[\"x\", \"aab\"]", T);
    EXPECT("contains", "\"aaa\"", "[\"aaaa\"]", F);
    EXPECT("contains", "\"abcabd\"", "[\"abd\"]", T);
}
END_TEST

START_TEST(test_string_operators_compare_bytes_with_embedded_nul)
{
    json_t *u = json_stringn("ab\0cd", 5);
    json_t *v = json_array();
    json_array_append_new(v, json_stringn("\0c", 2));
    const char *ops[] = {"contains", "startsWith", "endsWith", "in"};
    const bool want[] = {true, false, false, false};
    for (int i = 0; i < 4; i++) {
        struct ld__clause_values *cv = compile_ok(ops[i], v);
        ck_assert_msg(ld__clause_values_match(cv, u) == want[i], "%s", ops[i]);
        ld__clause_values_free(cv);
    }
    json_decref(u);
    json_decref(v);
    EXPECT("in", "\"a\\u0000b\"", "[\"a\\u0000b\"]", T);
    EXPECT("in", "\"a\\u0000b\"", "[\"a\\u0000c\", \"a\"]", F);
}
END_TEST

#define STR1 "\"2017-12-06T00:00:00.000-07:00\""
#define STR2 "\"2017-12-06T00:01:01.000-07:00\""

START_TEST(test_date_operators_follow_go_vectors)
{
    EXPECT("before", STR1, "[" STR2 "]", T);
    EXPECT("before", "10000000", "[10000001]", T);
    EXPECT("before", STR2, "[" STR1 "]", F);
    EXPECT("before", "10000001", "[10000000]", F);
    EXPECT("before", STR1, "[" STR1 "]", F);
    EXPECT("before", "10000000", "[10000000]", F);
    EXPECT("before", "null", "[" STR1 "]", F);
    EXPECT("before", STR1, "[\"hey what's this?\"]", F);
    EXPECT("after", STR2, "[" STR1 "]", T);
    EXPECT("after", "10000001", "[10000000]", T);
    EXPECT("after", STR1, "[" STR2 "]", F);
    EXPECT("after", "10000000", "[10000001]", F);
    EXPECT("after", STR1, "[" STR1 "]", F);
    EXPECT("after", "10000000", "[10000000]", F);
    EXPECT("after", "null", "[" STR1 "]", F);
    EXPECT("after", STR1, "[\"hey what's this?\"]", F);
    /* fractional milliseconds are kept */
    EXPECT("before", "10000000.25", "[10000000.5]", T);
    EXPECT("after", "10000000.5", "[10000000]", T);
}
END_TEST

START_TEST(test_date_operators_follow_harness_vectors)
{
    const char *lower[] = {STR1, "\"2017-12-06T07:00:00.000Z\"", "1512543600000"};
    const char *higher[] = {STR2, "\"2017-12-06T07:01:01.000Z\"", "1512543601000"};
    char values[128];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            snprintf(values, sizeof(values), "[%s]", higher[j]);
            EXPECT("before", lower[i], values, T);
            EXPECT("after", lower[i], values, F);
            snprintf(values, sizeof(values), "[%s]", lower[j]);
            EXPECT("before", higher[i], values, F);
            EXPECT("after", higher[i], values, T);
        }
    }
    const char *equal[] = {STR1, "\"2017-12-06T07:00:00.000Z\"", "\"2017-12-06T07:00:00Z\"",
                           "1512543600000", "\"2017-12-06t07:00:00z\""};
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 5; j++) {
            snprintf(values, sizeof(values), "[%s]", equal[j]);
            EXPECT("before", equal[i], values, F);
            EXPECT("after", equal[i], values, F);
        }
    }
    const char *bad[] = {"\"2017-12-06X00:00:00.000-07:00\"",
                         "\"2017-12-06\"",
                         "\"00:00:00.000-07.00\"",
                         "\"badstring\"",
                         "\"\"",
                         "\"1512543600000\"",
                         "true",
                         "[1512543600000]",
                         "{}"};
    const char *good[] = {STR1, "\"2017-12-06T07:00:00.000Z\"", "1512543600000"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        for (int j = 0; j < 3; j++) {
            const char *ops[] = {"before", "after"};
            for (int o = 0; o < 2; o++) {
                snprintf(values, sizeof(values), "[%s]", good[j]);
                EXPECT(ops[o], bad[i], values, F);
                snprintf(values, sizeof(values), "[%s]", bad[i]);
                EXPECT(ops[o], good[j], values, F);
            }
        }
    }
}
END_TEST

START_TEST(test_semver_operators_follow_go_vectors)
{
    EXPECT("semVerEqual", "\"2.0.0\"", "[\"2.0.0\"]", T);
    EXPECT("semVerEqual", "\"2.0\"", "[\"2.0.0\"]", T);
    EXPECT("semVerEqual", "\"2-rc1\"", "[\"2.0.0-rc1\"]", T);
    EXPECT("semVerEqual", "\"2+build2\"", "[\"2.0.0+build2\"]", T);
    EXPECT("semVerEqual", "\"2.0.0\"", "[\"2.0.1\"]", F);
    EXPECT("semVerLessThan", "\"2.0.0\"", "[\"2.0.1\"]", T);
    EXPECT("semVerLessThan", "\"2.0\"", "[\"2.0.1\"]", T);
    EXPECT("semVerLessThan", "\"2.0.1\"", "[\"2.0.0\"]", F);
    EXPECT("semVerLessThan", "\"2.0.1\"", "[\"2.0\"]", F);
    EXPECT("semVerLessThan", "\"2.0.1\"", "[\"xbad%ver\"]", F);
    EXPECT("semVerLessThan", "\"2.0.0-rc\"", "[\"2.0.0-rc.beta\"]", T);
    EXPECT("semVerGreaterThan", "\"2.0.1\"", "[\"2.0\"]", T);
    EXPECT("semVerGreaterThan", "\"10.0.1\"", "[\"2.0\"]", T);
    EXPECT("semVerGreaterThan", "\"2.0.0\"", "[\"2.0.1\"]", F);
    EXPECT("semVerGreaterThan", "\"2.0\"", "[\"2.0.1\"]", F);
    EXPECT("semVerGreaterThan", "\"2.0.1\"", "[\"xbad%ver\"]", F);
    EXPECT("semVerGreaterThan", "\"2.0.0-rc.1\"", "[\"2.0.0-rc.0\"]", T);
}
END_TEST

START_TEST(test_semver_operators_follow_harness_vectors)
{
    char a[64], b[64];
    const char *equal[][2] = {
        {"2.0.0", "2.0.0"},       {"2.0", "2.0.0"},
        {"2", "2.0.0"},           {"2.0.0+build", "2.0.0"},
        {"2.0.0-rc", "2.0.0-rc"}, {"2.0-rc", "2.0.0-rc"},
        {"2-rc", "2.0.0-rc"},     {"2.0.0-rc+build", "2.0.0-rc"},
    };
    for (size_t i = 0; i < sizeof(equal) / sizeof(equal[0]); i++) {
        for (int dir = 0; dir < 2; dir++) {
            snprintf(a, sizeof(a), "\"%s\"", equal[i][dir]);
            snprintf(b, sizeof(b), "[\"%s\"]", equal[i][!dir]);
            EXPECT("semVerEqual", a, b, T);
            EXPECT("semVerLessThan", a, b, F);
            EXPECT("semVerGreaterThan", a, b, F);
        }
    }
    const char *unequal[][2] = {
        {"1.0.0", "2.0.0"},
        {"1.0", "2.0"},
        {"1", "2"},
        {"2.0.0", "2.1.0"},
        {"2.0", "2.1"},
        {"2.0.0", "2.0.1"},
        {"2.0.0-rc", "2.0.0"},
        {"2.0.0-rc", "2.0.0-rc.1"},
        {"2.0.0-rc.2.green", "2.0.0-rc.10.green"},
        {"2.0.0-rc.2.green", "2.0.0-rc.2.red"},
        {"2.0.0-rc.2.green", "2.0.0-rc.2.green.1"},
        {"2.0.0-rc.2.green", "2.0.1-rc.2.green"},
    };
    for (size_t i = 0; i < sizeof(unequal) / sizeof(unequal[0]); i++) {
        const char *lo = unequal[i][0], *hi = unequal[i][1];
        snprintf(a, sizeof(a), "\"%s\"", lo);
        snprintf(b, sizeof(b), "[\"%s\"]", hi);
        EXPECT("semVerEqual", a, b, F);
        EXPECT("semVerLessThan", a, b, T);
        EXPECT("semVerGreaterThan", a, b, F);
        snprintf(a, sizeof(a), "\"%s\"", hi);
        snprintf(b, sizeof(b), "[\"%s\"]", lo);
        EXPECT("semVerEqual", a, b, F);
        EXPECT("semVerLessThan", a, b, F);
        EXPECT("semVerGreaterThan", a, b, T);
    }
    const char *bad[] = {"\"02.0.0\"", "\"v2.0.0\"", "\"2.0.0.0\""};
    for (int i = 0; i < 3; i++) {
        snprintf(b, sizeof(b), "[%s]", bad[i]);
        EXPECT("semVerEqual", "\"2.0.0\"", b, F);
        EXPECT("semVerEqual", bad[i], "[\"2.0.0\"]", F);
    }
    /* operators-semver-bad-type */
    const char *types[] = {"null", "true", "2", "{}", "[\"2.0.0\"]"};
    const char *versions[] = {"\"2.0.0\"", "\"2.0\"", "\"2\""};
    const char *ops[] = {"semVerEqual", "semVerLessThan", "semVerGreaterThan"};
    for (int t = 0; t < 5; t++)
        for (int v = 0; v < 3; v++)
            for (int o = 0; o < 3; o++) {
                snprintf(b, sizeof(b), "[%s]", versions[v]);
                EXPECT(ops[o], types[t], b, F);
                snprintf(b, sizeof(b), "[%s]", types[t]);
                EXPECT(ops[o], versions[v], b, F);
            }
}
END_TEST

START_TEST(test_ordered_operators_match_any_of_several_values)
{
    /* "u < any c" is "u < the greatest c", and so on */
    EXPECT("lessThan", "4", "[1, 5, 3]", T);
    EXPECT("lessThan", "5", "[1, 5, 3]", F);
    EXPECT("lessThanOrEqual", "5", "[1, \"9\", 5, 3]", T);
    EXPECT("greaterThan", "2", "[3, 1, 5]", T);
    EXPECT("greaterThan", "1", "[3, 1, 5]", F);
    EXPECT("greaterThanOrEqual", "1", "[3, 1, true, 5]", T);
    EXPECT("before", "5", "[1, \"bad\", \"1970-01-01T00:00:00.006Z\", 2]", T);
    EXPECT("before", "6", "[1, \"bad\", \"1970-01-01T00:00:00.006Z\", 2]", F);
    EXPECT("after", "2", "[\"1970-01-01T00:00:00.006Z\", 1, 7]", T);
    EXPECT("after", "1", "[\"1970-01-01T00:00:00.006Z\", 1, 7]", F);
    EXPECT("semVerLessThan", "\"2.0.0\"", "[\"1.0.0\", \"bad\", \"2.0.0-rc\", \"2.0.1-a.b\"]", T);
    EXPECT("semVerLessThan", "\"2.0.1-a.b\"", "[\"1.0.0\", \"2.0.0-rc\", \"2.0.1-a.b\"]", F);
    EXPECT("semVerGreaterThan", "\"1.0.0-alpha.1\"", "[\"3.0.0\", \"1.0.0-alpha\", \"2.0.0\"]", T);
    EXPECT("semVerGreaterThan", "\"1.0.0-alpha\"", "[\"3.0.0\", \"1.0.0-alpha\", \"2.0.0\"]", F);
    EXPECT("semVerEqual", "\"1.2.3-x\"", "[\"1.2.3\", \"1.2.3-y\", 1, \"1.2.3-x+b\"]", T);
    EXPECT("semVerEqual", "\"1.2.3-x\"", "[\"1.2.3\", \"1.2.3-y\"]", F);
}
END_TEST

START_TEST(test_unknown_operator_never_matches)
{
    EXPECT("whatever", "\"x\"", "[\"x\"]", F);
    EXPECT("whatever", "1", "[1]", F);
    EXPECT("segmentMatch", "\"x\"", "[\"x\"]", F);
}
END_TEST

START_TEST(test_empty_and_non_array_values_never_match)
{
    const char *ops[] = {"in",
                         "endsWith",
                         "startsWith",
                         "matches",
                         "contains",
                         "lessThan",
                         "lessThanOrEqual",
                         "greaterThan",
                         "greaterThanOrEqual",
                         "before",
                         "after",
                         "semVerEqual",
                         "semVerLessThan",
                         "semVerGreaterThan",
                         "segmentMatch",
                         "nope"};
    const char *values[] = {"[]", "{}", "\"x\"", "1", "null", "true", "{\"0\": \"x\"}"};
    const char *us[] = {"\"x\"", "1",  "true", "\"2.0.0\"", "\"2017-12-06T07:00:00Z\"",
                        "[]",    "{}", "null"};
    for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
        for (size_t v = 0; v < sizeof(values) / sizeof(values[0]); v++)
            for (size_t u = 0; u < sizeof(us) / sizeof(us[0]); u++)
                EXPECT(ops[o], us[u], values[v], F);
        /* NULL values too */
        struct ld__clause_values *cv = NULL;
        ck_assert_int_eq(ld__clause_values_compile(op_of(ops[o]), NULL, &cv), 0);
        json_t *u = json_string("x");
        ck_assert(!ld__clause_values_match(cv, u));
        json_decref(u);
        ld__clause_values_free(cv);
    }
    ld__clause_values_free(NULL);
    ck_assert_uint_eq(ld__clause_values_bytes(NULL), 0);
}
END_TEST

/* ---- `in` over many values -------------------------------------------------- */

static struct ld__clause_values *compile_list(json_t *values)
{
    struct ld__clause_values *cv = compile_ok("in", values);
    json_decref(values);
    return cv;
}

static bool in_list(const struct ld__clause_values *cv, json_t *u)
{
    bool got = ld__clause_values_match(cv, u);
    json_decref(u);
    return got;
}

START_TEST(test_in_compares_numbers_by_value_small_and_hashed)
{
    for (int size = 1; size <= 1000; size = size < 8 ? size + 1 : size * 5) {
        json_t *ints = json_array(), *reals = json_array();
        for (int i = 0; i < size; i++) {
            json_array_append_new(ints, json_integer(i));
            json_array_append_new(reals, json_real(i));
        }
        struct ld__clause_values *ci = compile_list(ints), *cr = compile_list(reals);
        for (int i = 0; i < size; i++) {
            ck_assert_msg(in_list(ci, json_real(i)), "%d.0 in %d integers", i, size);
            ck_assert_msg(in_list(ci, json_integer(i)), "%d in %d integers", i, size);
            ck_assert_msg(in_list(cr, json_integer(i)), "%d in %d reals", i, size);
        }
        ck_assert(in_list(ci, json_real(-0.0))); /* -0 == 0 */
        ck_assert(!in_list(ci, json_integer(size)));
        ck_assert(!in_list(ci, json_integer(-1)));
        ck_assert(!in_list(ci, json_real(0.5)));
        ck_assert(!in_list(ci, json_string("0")));
        ck_assert(!in_list(ci, json_false()));
        ld__clause_values_free(ci);
        ld__clause_values_free(cr);
    }
}
END_TEST

START_TEST(test_in_over_1000_strings_finds_each_and_only_them)
{
    json_t *values = json_array();
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "user-%d", i);
        json_array_append_new(values, json_string(key));
    }
    json_array_append_new(values, json_string(""));
    json_array_append_new(values, json_true());
    json_array_append_new(values, json_integer(7));
    struct ld__clause_values *cv = compile_list(values);
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "user-%d", i);
        ck_assert_msg(in_list(cv, json_string(key)), "%s", key);
        snprintf(key, sizeof(key), "user-%d", i + 1000);
        ck_assert_msg(!in_list(cv, json_string(key)), "%s", key);
        snprintf(key, sizeof(key), "user-%dx", i);
        ck_assert_msg(!in_list(cv, json_string(key)), "%s", key);
    }
    ck_assert(in_list(cv, json_string("")));
    ck_assert(in_list(cv, json_true()));
    ck_assert(!in_list(cv, json_false()));
    ck_assert(in_list(cv, json_real(7.0)));
    ck_assert(!in_list(cv, json_string("user-")));
    ck_assert(!in_list(cv, json_integer(0)));
    ck_assert(!in_list(cv, parse("[\"user-1\"]")));
    ld__clause_values_free(cv);
}
END_TEST

START_TEST(test_in_over_many_arrays_and_objects_compares_deeply)
{
    json_t *values = json_array();
    for (int i = 0; i < 50; i++) {
        json_array_append_new(values, json_pack("[i, s, {s:i}]", i, "a", "n", i));
        json_array_append_new(values, json_pack("{s:i, s:[b]}", "k", i, "flags", i % 2));
    }
    struct ld__clause_values *cv = compile_list(values);
    for (int i = 0; i < 50; i++) {
        ck_assert(in_list(cv, json_pack("[f, s, {s:f}]", (double)i, "a", "n", (double)i)));
        /* another member order */
        json_t *o = json_object();
        json_object_set_new(o, "flags", json_pack("[b]", i % 2));
        json_object_set_new(o, "k", json_real(i));
        ck_assert(in_list(cv, o));
        ck_assert(!in_list(cv, json_pack("{s:i, s:[b]}", "k", i, "flags", !(i % 2))));
        ck_assert(!in_list(cv, json_pack("[s, i, {s:i}]", "a", i, "n", i)));
    }
    ck_assert(!in_list(cv, json_pack("[i, s, {s:i}]", 50, "a", "n", 50)));
    ck_assert(!in_list(cv, json_array()));
    ck_assert(!in_list(cv, json_object()));
    ld__clause_values_free(cv);
}
END_TEST

/* Numbers are equal when their doubles are (as in the SDKs, whose JSON
 * numbers are doubles): integers above 2^53 that round together are equal. */
START_TEST(test_in_compares_large_integers_as_doubles)
{
    const json_int_t big = (json_int_t)1 << 53;
    for (int size = 1; size <= 20; size += 19) {
        json_t *values = json_array();
        for (int i = 1; i < size; i++)
            json_array_append_new(values, json_integer(-i));
        json_array_append_new(values, json_integer(big));
        struct ld__clause_values *cv = compile_list(values);
        ck_assert(in_list(cv, json_integer(big)));
        ck_assert(in_list(cv, json_integer(big + 1))); /* 2^53 + 1 rounds to 2^53 */
        ck_assert(in_list(cv, json_real(9007199254740992.0)));
        ck_assert(!in_list(cv, json_integer(big + 2)));
        ld__clause_values_free(cv);
    }
}
END_TEST

START_TEST(test_compiled_values_do_not_need_the_json_afterwards)
{
    /* match_text() frees the values before matching; here every type of
     * `in`, hashed, with the values array gone */
    json_t *values = json_array();
    for (int i = 0; i < 20; i++) {
        json_array_append_new(values, json_sprintf("s%d", i));
        json_array_append_new(values, json_pack("[i]", i));
        json_array_append_new(values, json_integer(i));
    }
    struct ld__clause_values *cv = compile_list(values);
    ck_assert(in_list(cv, json_string("s19")));
    ck_assert(in_list(cv, json_pack("[i]", 19)));
    ck_assert(in_list(cv, json_integer(19)));
    ld__clause_values_free(cv);
}
END_TEST

/* ---- the parsers ------------------------------------------------------------- */

static bool semver(const char *s, struct ld__semver *sv)
{
    return ld__semver_parse(s, strlen(s), sv);
}

START_TEST(test_semver_parse_reads_fields)
{
    struct ld__semver sv;
    ck_assert(semver("1.2.3", &sv));
    ck_assert(sv.major == 1 && sv.minor == 2 && sv.patch == 3 && sv.pre == NULL && sv.pre_len == 0);
    ck_assert(semver("2", &sv));
    ck_assert(sv.major == 2 && sv.minor == 0 && sv.patch == 0 && sv.pre == NULL);
    ck_assert(semver("2.5-rc.1+build.007", &sv));
    ck_assert(sv.major == 2 && sv.minor == 5 && sv.patch == 0);
    ck_assert_uint_eq(sv.pre_len, 4);
    ck_assert_int_eq(memcmp(sv.pre, "rc.1", 4), 0);
    ck_assert(semver("0.0.0", &sv));
    ck_assert(semver("18446744073709551615.18446744073709551615.18446744073709551615", &sv));
    ck_assert(sv.major == UINT64_MAX && sv.minor == UINT64_MAX && sv.patch == UINT64_MAX);
    const char *good[] = {"1.0.0-0",        "1.0.0-0a",
                          "1.0.0--",        "1.0.0-a-b.c-d",
                          "1.0.0+001",      "1.0.0+-",
                          "1.0.0-x.7.z.92", "1.0.0-alpha+001",
                          "10.20.30",       "1.0.0-99999999999999999999999"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        ck_assert_msg(semver(good[i], &sv), "%s should parse", good[i]);
    const char *bad[] = {"",
                         " 2.0.0",
                         "2.0.0 ",
                         "v2.0.0",
                         "02.0.0",
                         "2.00.0",
                         "2.0.01",
                         "2.0.0.0",
                         "2.",
                         "2.0.",
                         "2..0",
                         ".2.0",
                         "2.0.0-",
                         "2.0.0+",
                         "2.0.0-rc..1",
                         "2.0.0-rc.",
                         "2.0.0-01",
                         "2.0.0-rc.01",
                         "2.0.0-rc_1",
                         "2.0.0+build..1",
                         "2.0.0+build+x",
                         "2.0.0-r\xc3\xa9",
                         "18446744073709551616.0.0",
                         "1.18446744073709551616.0",
                         "1.0.99999999999999999999",
                         "-1.0.0",
                         "+1.0.0",
                         "1.0.0-rc+",
                         "a.b.c",
                         "xbad%ver"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!semver(bad[i], &sv), "\"%s\" should not parse", bad[i]);
    ck_assert(!ld__semver_parse("2.0.0\0", 6, &sv)); /* by length */
    ck_assert(ld__semver_parse("2.0.0x", 5, &sv));
    ck_assert(!ld__semver_parse(NULL, 0, &sv));
}
END_TEST

static int semver_cmp(const char *a, const char *b)
{
    struct ld__semver x, y;
    ck_assert_msg(semver(a, &x) && semver(b, &y), "%s, %s", a, b);
    return ld__semver_compare(&x, &y);
}

START_TEST(test_semver_compare_follows_precedence)
{
    /* SemVer 2.0.0, 11.4, plus numbers of any length and build metadata */
    const char *order[] = {"1.0.0-alpha",
                           "1.0.0-alpha.1",
                           "1.0.0-alpha.beta",
                           "1.0.0-beta",
                           "1.0.0-beta.2",
                           "1.0.0-beta.11",
                           "1.0.0-rc.1",
                           "1.0.0-rc.99999999999999999999",
                           "1.0.0-rc.1a",
                           "1.0.0",
                           "1.0.1",
                           "1.1.0",
                           "2.0.0",
                           "10.0.0",
                           "18446744073709551615.0.0"};
    size_t n = sizeof(order) / sizeof(order[0]);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            int c = semver_cmp(order[i], order[j]);
            int want = (i > j) - (i < j);
            ck_assert_msg((c > 0) - (c < 0) == want, "%s vs %s: %d", order[i], order[j], c);
        }
    ck_assert_int_eq(semver_cmp("1.0.0+a", "1.0.0+b"), 0);
    ck_assert_int_eq(semver_cmp("1.0.0-rc+a", "1.0.0-rc"), 0);
    ck_assert_int_lt(semver_cmp("1.0.0-A", "1.0.0-a"), 0); /* ASCII order */
    ck_assert_int_lt(semver_cmp("1.0.0-a", "1.0.0-aa"), 0);
    ck_assert_int_lt(semver_cmp("1.0.0-9", "1.0.0-10"), 0);
    ck_assert_int_lt(semver_cmp("1.0.0-999", "1.0.0--"), 0); /* numeric < alphanumeric */
}
END_TEST

static bool date_string(const char *s, double *ms)
{
    return ld__date_parse_string(s, strlen(s), ms);
}

static void expect_date(const char *s, double want)
{
    double ms = NAN;
    ck_assert_msg(date_string(s, &ms), "%s should parse", s);
    ck_assert_msg(ms == want, "%s: %.6f, not %.6f", s, ms, want);
    json_t *j = json_string(s);
    ms = NAN;
    ck_assert(ld__date_parse(j, &ms) && ms == want);
    json_decref(j);
}

START_TEST(test_date_parse_follows_go_vectors)
{
    expect_date("1970-01-01T00:00:00Z", 0);
    expect_date("2016-04-16T22:57:31.684Z", 1460847451684.0);
    expect_date("2016-04-16T17:09:12.759-07:00", 1460851752759.0);
    expect_date("2016-04-16T17:09:12-07:00", 1460851752000.0);
    expect_date("1969-12-31T23:57:56.544-00:00", -123456.0);
    expect_date("2017-12-06T00:00:00.000-07:00", 1512543600000.0);
    expect_date("2017-12-06T07:01:01.000Z", 1512543661000.0);
    json_t *j = json_integer(0);
    double ms = NAN;
    ck_assert(ld__date_parse(j, &ms) && ms == 0);
    json_decref(j);
    j = json_real(-123456.5);
    ck_assert(ld__date_parse(j, &ms) && ms == -123456.5);
    json_decref(j);
}
END_TEST

START_TEST(test_date_parse_checks_calendar_and_clock)
{
    /* leap days */
    expect_date("2016-02-29T00:00:00Z", 1456704000000.0);
    expect_date("2000-02-29T00:00:00Z", 951782400000.0);
    expect_date("1600-02-29T00:00:00Z", -11670998400000.0);
    expect_date("2017-03-01T00:00:00Z", 1488326400000.0);
    expect_date("2016-12-31T23:59:59.999Z", 1483228799999.0);
    expect_date("0000-01-01T00:00:00Z", -62167219200000.0);
    expect_date("9999-12-31T23:59:59.999999999Z", 253402300799999.999999);
    expect_date("2017-04-30T00:00:00Z", 1493510400000.0);
    /* second 60 is the next minute (Go) */
    expect_date("2016-12-31T23:59:60Z", 1483228800000.0);
    /* offsets */
    expect_date("2017-12-06T23:59:00+23:59", 1512518400000.0);
    expect_date("2017-12-06T00:00:00-23:59", 1512604740000.0);
    expect_date("2017-12-06T07:00:00+00:00", 1512543600000.0);
    /* fractions: 1 to 9 digits, kept below the millisecond */
    expect_date("1970-01-01T00:00:00.5Z", 500);
    expect_date("1970-01-01T00:00:00.123456789Z", 123.456789);
    expect_date("1970-01-01T00:00:00.000000001Z", 0.000001);
    expect_date("1969-12-31T23:59:59.999Z", -1);
    /* 't' and 'z' */
    expect_date("2017-12-06t07:00:00z", 1512543600000.0);
    const char *bad[] = {"2017-02-29T00:00:00Z",
                         "1900-02-29T00:00:00Z",
                         "2017-04-31T00:00:00Z",
                         "2017-06-31T00:00:00Z",
                         "2017-13-01T00:00:00Z",
                         "2017-00-01T00:00:00Z",
                         "2017-01-00T00:00:00Z",
                         "2017-01-32T00:00:00Z",
                         "2017-01-01T24:00:00Z",
                         "2017-01-01T00:60:00Z",
                         "2017-01-01T00:00:61Z",
                         "2017-01-01T7:00:00Z",
                         "2017-01-01T07:0:00Z",
                         "2017-1-01T07:00:00Z",
                         "17-01-01T07:00:00Z",
                         "+2017-01-01T07:00:00Z",
                         "2017-01-01T07:00:00",
                         "2017-01-01T07:00:00+24:00",
                         "2017-01-01T07:00:00+07:60",
                         "2017-01-01T07:00:00-07",
                         "2017-01-01T07:00:00+0700",
                         "2017-01-01T07:00:00+07:00:00",
                         "2017-01-01T07:00:00+7:00",
                         "2017-01-01T07:00:00.Z",
                         "2017-01-01T07:00:00.1234567890Z",
                         "2017-01-01T07:00:00,5Z",
                         "2017-01-01T07:00:00ZZ",
                         "2017-01-01T07:00:00Z ",
                         " 2017-01-01T07:00:00Z",
                         "2017-01-01 07:00:00Z",
                         "2017-01-01X07:00:00Z",
                         "2017/01/01T07:00:00Z",
                         "2017-01-01T07-00-00Z",
                         "2017-01-01T07:00:00UTC",
                         "2017-12-06X00:00:00.000-07:00",
                         "2017-12-06",
                         "00:00:00.000-07.00",
                         "badstring",
                         "",
                         "1512543600000",
                         "２017-01-01T07:00:00Z"};
    double ms;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!date_string(bad[i], &ms), "\"%s\" should not parse", bad[i]);
    ck_assert(!ld__date_parse_string("2017-01-01T07:00:00Z\0", 21, &ms)); /* by length */
    ck_assert(ld__date_parse_string("2017-01-01T07:00:00Zx", 20, &ms));
    ck_assert(!ld__date_parse_string(NULL, 0, &ms));
    const char *types[] = {"true", "false", "null", "[0]", "{}", "\"\""};
    for (int i = 0; i < 6; i++) {
        json_t *j = parse(types[i]);
        ck_assert_msg(!ld__date_parse(j, &ms), "%s", types[i]);
        json_decref(j);
    }
    ck_assert(!ld__date_parse(NULL, &ms));
}
END_TEST

/* ---- bytes ---------------------------------------------------------------- */

START_TEST(test_bytes_grow_with_what_is_kept)
{
    json_t *small = parse("[\"a\", \"b\", \"c\"]"), *big = json_array();
    for (int i = 0; i < 1000; i++)
        json_array_append_new(big, json_sprintf("key-%d", i));
    struct ld__clause_values *cs = compile_ok("in", small), *cb = compile_ok("in", big);
    ck_assert_uint_gt(ld__clause_values_bytes(cs), 3);
    ck_assert_uint_gt(ld__clause_values_bytes(cb), 1000 * (16 + 5));
    ck_assert_uint_gt(ld__clause_values_bytes(cb), 10 * ld__clause_values_bytes(cs));
    struct ld__clause_values *cr = compile_ok("matches", small);
    ck_assert_uint_gt(ld__clause_values_bytes(cr), ld__clause_values_bytes(cs));
    ld__clause_values_free(cs);
    ld__clause_values_free(cb);
    ld__clause_values_free(cr);
    json_decref(small);
    json_decref(big);
}
END_TEST

/* ---- allocation failures ------------------------------------------------- */

static long g_fail_at; /* 0: nothing fails */
static long g_calls;
static bool g_counting;

static void *failing_malloc(size_t n)
{
    if (g_counting && ++g_calls == g_fail_at)
        return NULL;
    return malloc(n);
}

static void *failing_realloc(void *p, size_t n)
{
    if (g_counting && ++g_calls == g_fail_at)
        return NULL;
    return realloc(p, n);
}

struct case_ {
    const char *op;
    const char *values;
    const char *yes[4]; /* subjects that match */
    const char *no[4];  /* subjects that do not */
};

/* Compiles `c` with allocation N failing, N = 1, 2, ... until nothing fails:
 * each compile is LD_ENOMEM with NULL or a form that matches as it should,
 * and matching allocates nothing. Leaks show under ASan and valgrind. */
static void compile_under_failures(const struct case_ *c, json_t *values)
{
    json_t *yes[4] = {NULL}, *no[4] = {NULL};
    for (int i = 0; i < 4; i++) {
        yes[i] = c->yes[i] ? parse(c->yes[i]) : NULL;
        no[i] = c->no[i] ? parse(c->no[i]) : NULL;
    }
    ck_assert_int_eq(ld_set_alloc_funcs(failing_malloc, failing_realloc, free), 0);
    long enomem = 0;
    for (g_fail_at = 1; g_fail_at < 100000; g_fail_at++) {
        struct ld__clause_values *cv = (struct ld__clause_values *)&g_calls;
        g_calls = 0;
        g_counting = true;
        int rc = ld__clause_values_compile(op_of(c->op), values, &cv);
        g_counting = false;
        bool failed = g_calls >= g_fail_at;
        if (rc != 0) {
            ck_assert_msg(rc == LD_ENOMEM, "%s: %s at N=%ld", c->op, ld_err_name(rc), g_fail_at);
            ck_assert_ptr_null(cv);
            ck_assert(failed);
            enomem++;
            continue;
        }
        long fail_at = g_fail_at;
        g_fail_at = -1;
        g_calls = 0;
        g_counting = true; /* count, fail nothing */
        for (int i = 0; i < 4; i++) {
            if (yes[i])
                ck_assert_msg(ld__clause_values_match(cv, yes[i]), "%s %s: %s should match (N=%ld)",
                              c->op, c->values, c->yes[i], fail_at);
            if (no[i])
                ck_assert_msg(!ld__clause_values_match(cv, no[i]),
                              "%s %s: %s should not match (N=%ld)", c->op, c->values, c->no[i],
                              fail_at);
        }
        g_counting = false;
        ck_assert_msg(g_calls == 0, "%s: matching allocated %ld times", c->op, g_calls);
        ck_assert_uint_gt(ld__clause_values_bytes(cv), 0);
        ld__clause_values_free(cv);
        g_fail_at = fail_at;
        if (!failed)
            break;
    }
    ck_assert_msg(enomem > 0 || strcmp(c->op, "nope") == 0, "%s: no allocation failed", c->op);
    ld_set_alloc_funcs(NULL, NULL, NULL);
    for (int i = 0; i < 4; i++) {
        json_decref(yes[i]);
        json_decref(no[i]);
    }
}

START_TEST(test_compile_fails_cleanly_when_memory_runs_out)
{
    /* `in` with 100 values: more than the linear limit of each type */
    json_t *in = json_array();
    for (int i = 0; i < 40; i++) {
        json_array_append_new(in, json_sprintf("s%d", i));
        json_array_append_new(in, json_integer(i));
    }
    for (int i = 0; i < 10; i++) {
        json_array_append_new(in, json_pack("[i, s]", i, "a"));
        json_array_append_new(in, json_pack("{s:i}", "k", i));
    }
    ck_assert_uint_eq(json_array_size(in), 100);
    const struct case_ in_case = {"in",
                                  "(100 values)",
                                  {"\"s7\"", "7.0", "[3.0, \"a\"]", "{\"k\": 2.0}"},
                                  {"\"s40\"", "40", "{\"k\": 50}", "true"}};
    compile_under_failures(&in_case, in);
    json_decref(in);

    static const struct case_ cases[] = {
        {"matches",
         "[\"^a+b$\", \"***bad\", \"(x|y)z\", \"\\\\d{3}-\\\\d{4}\", \"(?<=foo)bar\", "
         "\"[unclosed\","
         " \"(?<name>q)(?P=name)\"]",
         {"\"aab\"", "\"yz\"", "\"555-1234\"", "\"foobar\""},
         {"\"nothing\"", "\"ab c\"", "\"bar\"", "\"q\""}},
        {"matches", "[\"qq\"]", {"\"aqq\""}, {"\"q\""}},
        {"startsWith", "[\"ab\", 1, \"cd\"]", {"\"abc\"", "\"cde\""}, {"\"b\"", "1"}},
        {"endsWith", "[\"ab\"]", {"\"cab\""}, {"\"abc\""}},
        {"contains", "[\"ab\", \"\"]", {"\"x\""}, {"1"}},
        {"semVerEqual",
         "[\"1.0.0-rc.1\", \"bad\", \"2.0.0+b\"]",
         {"\"1.0.0-rc.1+x\"", "\"2\""},
         {"\"1.0.0\"", "\"1.0.0-rc.2\""}},
        {"semVerLessThan",
         "[\"1.0.0-rc.1\", \"0.9.0\"]",
         {"\"1.0.0-rc.0\""},
         {"\"1.0.0-rc.1\"", "\"1.0.0\""}},
        {"semVerGreaterThan", "[\"1.0.0-rc.1\", \"1.1.0-a\"]", {"\"1.0.0\""}, {"\"1.0.0-rc\""}},
        {"lessThan", "[1, 2]", {"1.5"}, {"2"}},
        {"before", "[\"2017-12-06T07:00:00Z\"]", {"1"}, {"\"2017-12-06T07:00:00Z\""}},
        {"nope", "[\"x\"]", {NULL}, {"\"x\""}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *values = parse(cases[i].values);
        compile_under_failures(&cases[i], values);
        json_decref(values);
    }
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

Suite *ld_suite_eval_ops(void)
{
    Suite *s = suite_create("eval_ops");
    TCase *tc = tcase_create("operators");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_op_parse_knows_launchdarkly_names_only);
    tcase_add_test(tc, test_number_operators_follow_go_vectors);
    tcase_add_test(tc, test_string_operators_follow_go_vectors);
    tcase_add_test(tc, test_mixed_types_never_match);
    tcase_add_test(tc, test_in_compares_booleans);
    tcase_add_test(tc, test_in_compares_arrays_and_objects_deeply);
    tcase_add_test(tc, test_matches_follows_go_vectors);
    tcase_add_test(tc, test_bad_regexes_are_dropped_and_good_ones_still_match);
    tcase_add_test(tc, test_matches_refuses_invalid_utf8_subjects);
    tcase_add_test(tc, test_matches_gives_up_on_catastrophic_backtracking_without_matching);
    tcase_add_test(tc, test_matches_linear_pattern_on_a_long_subject);
    tcase_add_test(tc, test_matches_on_several_threads_at_once);
    tcase_add_test(tc, test_matches_runaway_pattern_is_stopped_and_marked_once);
    tcase_add_test(tc, test_matches_checks_utf8_as_pcre2_does);
    tcase_add_test(tc, test_matches_unanchored_runaway_is_stopped_across_positions);
    tcase_add_test(tc, test_matches_searches_far_into_a_long_subject);
    tcase_add_test(tc, test_string_operators_follow_harness_vectors);
    tcase_add_test(tc, test_string_operators_compare_bytes_with_embedded_nul);
    tcase_add_test(tc, test_date_operators_follow_go_vectors);
    tcase_add_test(tc, test_date_operators_follow_harness_vectors);
    tcase_add_test(tc, test_semver_operators_follow_go_vectors);
    tcase_add_test(tc, test_semver_operators_follow_harness_vectors);
    tcase_add_test(tc, test_ordered_operators_match_any_of_several_values);
    tcase_add_test(tc, test_unknown_operator_never_matches);
    tcase_add_test(tc, test_empty_and_non_array_values_never_match);
    suite_add_tcase(s, tc);

    tc = tcase_create("in_lists");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_in_compares_numbers_by_value_small_and_hashed);
    tcase_add_test(tc, test_in_over_1000_strings_finds_each_and_only_them);
    tcase_add_test(tc, test_in_over_many_arrays_and_objects_compares_deeply);
    tcase_add_test(tc, test_in_compares_large_integers_as_doubles);
    tcase_add_test(tc, test_compiled_values_do_not_need_the_json_afterwards);
    suite_add_tcase(s, tc);

    tc = tcase_create("parsers");
    tcase_add_test(tc, test_semver_parse_reads_fields);
    tcase_add_test(tc, test_semver_compare_follows_precedence);
    tcase_add_test(tc, test_date_parse_follows_go_vectors);
    tcase_add_test(tc, test_date_parse_checks_calendar_and_clock);
    suite_add_tcase(s, tc);

    tc = tcase_create("memory");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_bytes_grow_with_what_is_kept);
    tcase_add_test(tc, test_compile_fails_cleanly_when_memory_runs_out);
    suite_add_tcase(s, tc);
    return s;
}
