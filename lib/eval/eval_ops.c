/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: clause operators (eval-internal.h); their strict parsers of
 * semantic versions and dates are in eval_parse.c.
 *
 * A compiled form is one block from ld__malloc: the header, then the arrays
 * the operator needs (strings as pointer + length into the block's own copy
 * of their bytes, doubles, parsed semvers, JSON references, hash tables).
 * Ordered operators keep only their bound: "u < any c" is "u < max(c)", so
 * lessThan, lessThanOrEqual, before and semVerLessThan keep the greatest
 * value, their counterparts the least. `matches` adds PCRE2's compiled
 * patterns and one match data block shared by them.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <pcre2.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldasync/error.h>

#include "core/core-internal.h"
#include "eval/eval-internal.h"

/* `in` searches the values of one JSON type linearly up to this many, and
 * through a hash table beyond. */
#define IN_LINEAR_MAX 8

struct cv_str {
    const char *s;
    size_t len;
};

/* A compiled pattern of `matches`; `jit`: JIT-compiled (pcre2_jit_match);
 * `starts`: enum ld__re_starts; `newline`: its newline (PCRE2_NEWLINE_*);
 * `bits`: PCRE2's bitmap of first bytes, in `code`. */
struct cv_re {
    pcre2_code *code;
    const uint8_t *bits;
    bool jit;
    uint8_t starts;
    uint8_t newline;
    uint8_t first;
};

/* The values of one JSON type of an `in` clause: `n` entries in `v`
 * (struct cv_str, double or json_t *), and when n > IN_LINEAR_MAX an open
 * addressing table of mask + 1 slots, each 0 (empty) or the high 32 bits of
 * the value's hash above its index + 1. */
struct cv_set {
    const void *v;
    const uint64_t *tab;
    uint32_t n;
    uint32_t mask;
};

struct ld__clause_values {
    uint8_t op;
    uint8_t bools; /* in: 1 if false is a value, 2 if true is */
    bool stopped;  /* matches: a limit stopped one of its matches */
    uint32_t n;    /* entries; for the ordered operators 1 if there is a bound */
    size_t bytes;  /* the block and PCRE2's patterns (not the match data) */
    union {
        const struct cv_str *str; /* startsWith, endsWith, contains */
        struct {
            struct cv_set str, num, json;
        } in;
        double bound;                /* the numeric operators, before, after */
        struct ld__semver sv_bound;  /* semVerLessThan, semVerGreaterThan */
        const struct ld__semver *sv; /* semVerEqual */
        struct {
            struct cv_re *v;
            pcre2_match_data *md;
            pcre2_match_context *mc; /* the limits, the JIT's stack */
        } re;
    } u;
};

/* ---- operator names ------------------------------------------------------ */

enum ld__op ld__op_parse(const char *name, size_t len)
{
    static const struct {
        const char *name;
        uint8_t len;
        uint8_t op;
    } ops[] = {
        {"in", 2, LD__OP_IN},
        {"endsWith", 8, LD__OP_ENDS_WITH},
        {"startsWith", 10, LD__OP_STARTS_WITH},
        {"matches", 7, LD__OP_MATCHES},
        {"contains", 8, LD__OP_CONTAINS},
        {"lessThan", 8, LD__OP_LESS_THAN},
        {"lessThanOrEqual", 15, LD__OP_LESS_THAN_OR_EQUAL},
        {"greaterThan", 11, LD__OP_GREATER_THAN},
        {"greaterThanOrEqual", 18, LD__OP_GREATER_THAN_OR_EQUAL},
        {"before", 6, LD__OP_BEFORE},
        {"after", 5, LD__OP_AFTER},
        {"semVerEqual", 11, LD__OP_SEMVER_EQUAL},
        {"semVerLessThan", 14, LD__OP_SEMVER_LESS_THAN},
        {"semVerGreaterThan", 17, LD__OP_SEMVER_GREATER_THAN},
        {"segmentMatch", 12, LD__OP_SEGMENT_MATCH},
    };
    if (!name)
        return LD__OP_UNKNOWN;
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (ops[i].len == len && memcmp(ops[i].name, name, len) == 0)
            return (enum ld__op)ops[i].op;
    return LD__OP_UNKNOWN;
}

/* ---- the block ------------------------------------------------------------ */

/* Reserves `n` elements of `size` bytes aligned to `align` at the end of a
 * block of *total bytes; false on overflow. */
static bool reserve(size_t *total, size_t align, size_t n, size_t size, size_t *at)
{
    size_t start = (*total + align - 1) & ~(align - 1);
    if (start < *total || (size && n > (SIZE_MAX - start) / size))
        return false;
    *at = start;
    *total = start + n * size;
    return true;
}

/* Slots of the hash table for n values (a power of two, at least 2n), or 0
 * when the values are searched linearly. */
static size_t table_slots(size_t n)
{
    size_t slots = 16;
    if (n <= IN_LINEAR_MAX)
        return 0;
    while (slots < 2 * n)
        slots *= 2;
    return slots;
}

static void table_put(uint64_t *tab, uint32_t mask, uint64_t h, uint32_t index)
{
    uint32_t i = (uint32_t)h & mask;
    while (tab[i])
        i = (i + 1) & mask;
    tab[i] = (h & UINT64_C(0xffffffff00000000)) | (index + 1);
}

/* The block's bytes at `offset` (reserve() aligned it). */
static void *in_block(struct ld__clause_values *cv, size_t offset)
{
    return (char *)cv + offset;
}

static struct ld__clause_values *block_new(enum ld__op op, size_t size)
{
    struct ld__clause_values *cv = ld__calloc(1, size);
    if (cv) {
        cv->op = (uint8_t)op;
        cv->bytes = size;
    }
    return cv;
}

/* ---- compiling ----------------------------------------------------------- */

/* How many strings put_strings() hashes ahead of the one it puts. */
#define PUT_AHEAD 16

/* Puts strs[0..n) into the table, in order (the table is the same as one
 * put at a time), hashing PUT_AHEAD strings ahead and asking for their
 * slots: a large table is written at random places, and waiting for each
 * slot in turn was most of the time of a large set's compile. */
static void put_strings(uint64_t *tab, uint32_t mask, const struct cv_str *strs, uint32_t n)
{
    uint64_t ring[PUT_AHEAD];
    for (uint32_t k = 0; k < n && k < PUT_AHEAD; k++) {
        ring[k] = ld__hash_bytes(strs[k].s, strs[k].len);
        __builtin_prefetch(&tab[(uint32_t)ring[k] & mask], 1);
    }
    for (uint32_t k = 0; k < n; k++) {
        uint64_t h = ring[k % PUT_AHEAD];
        if (k + PUT_AHEAD < n) {
            const struct cv_str *a = &strs[k + PUT_AHEAD];
            uint64_t next = ld__hash_bytes(a->s, a->len);
            ring[k % PUT_AHEAD] = next;
            __builtin_prefetch(&tab[(uint32_t)next & mask], 1);
        }
        table_put(tab, mask, h, k);
    }
}

_Thread_local const struct ld__work *ld__compile_work;

/* False once the worker job this thread compiles for is no longer wanted
 * (looked at every 4,096 values). */
static bool compile_wanted(size_t i)
{
    return (i & 4095) != 0 || !ld__compile_work || ld__job_wanted(ld__compile_work);
}

static int compile_in(const json_t *values, struct ld__clause_values **out)
{
    size_t n = json_array_size(values), ns = 0, nn = 0, nj = 0, text = 0;
    uint8_t bools = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(values, i);
        if (!compile_wanted(i))
            return LD_ECANCELED;
        if (json_is_string(v)) {
            ns++;
            text += json_string_length(v);
        } else if (json_is_number(v)) {
            nn++;
        } else if (json_is_array(v) || json_is_object(v)) {
            nj++;
        } else if (json_is_true(v)) {
            bools |= 2;
        } else if (json_is_false(v)) {
            bools |= 1;
        }
    }
    if (ns > UINT32_MAX / 4 || nn > UINT32_MAX / 4 || nj > UINT32_MAX / 4)
        return LD_ENOMEM;
    size_t ts = table_slots(ns), tn = table_slots(nn), tj = table_slots(nj);
    size_t total = sizeof(struct ld__clause_values), o_s, o_n, o_j, o_ts, o_tn, o_tj, o_text;
    if (!reserve(&total, alignof(struct cv_str), ns, sizeof(struct cv_str), &o_s) ||
        !reserve(&total, alignof(double), nn, sizeof(double), &o_n) ||
        !reserve(&total, alignof(json_t *), nj, sizeof(json_t *), &o_j) ||
        !reserve(&total, alignof(uint64_t), ts, sizeof(uint64_t), &o_ts) ||
        !reserve(&total, alignof(uint64_t), tn, sizeof(uint64_t), &o_tn) ||
        !reserve(&total, alignof(uint64_t), tj, sizeof(uint64_t), &o_tj) ||
        !reserve(&total, 1, text, 1, &o_text))
        return LD_ENOMEM;
    struct ld__clause_values *cv = block_new(LD__OP_IN, total);
    if (!cv)
        return LD_ENOMEM;
    struct cv_str *strs = in_block(cv, o_s);
    double *nums = in_block(cv, o_n);
    json_t **jsons = in_block(cv, o_j);
    uint64_t *tab_s = ts ? in_block(cv, o_ts) : NULL;
    uint64_t *tab_n = tn ? in_block(cv, o_tn) : NULL;
    uint64_t *tab_j = tj ? in_block(cv, o_tj) : NULL;
    char *arena = in_block(cv, o_text);
    uint32_t is = 0, in = 0, ij = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(values, i);
        if (!compile_wanted(i)) {
            cv->u.in.json = (struct cv_set){jsons, NULL, ij, 0}; /* what it referenced */
            ld__clause_values_free(cv);
            return LD_ECANCELED;
        }
        if (json_is_string(v)) {
            size_t len = json_string_length(v);
            memcpy(arena, json_string_value(v), len);
            strs[is].s = arena;
            strs[is].len = len;
            arena += len;
            is++; /* put into tab_s below */
        } else if (json_is_number(v)) {
            nums[in] = json_number_value(v);
            if (tab_n)
                table_put(tab_n, (uint32_t)(tn - 1), ld__hash_number(nums[in]), in);
            in++;
        } else if (json_is_array(v) || json_is_object(v)) {
            jsons[ij] = ld__json_incref(v); /* atomic: also off the loop (eval_big.c) */
            if (tab_j)
                table_put(tab_j, (uint32_t)(tj - 1), ld__hash_json(v), ij);
            ij++;
        }
    }
    if (tab_s)
        put_strings(tab_s, (uint32_t)(ts - 1), strs, is);
    cv->bools = bools;
    cv->u.in.str = (struct cv_set){strs, tab_s, is, ts ? (uint32_t)(ts - 1) : 0};
    cv->u.in.num = (struct cv_set){nums, tab_n, in, tn ? (uint32_t)(tn - 1) : 0};
    cv->u.in.json = (struct cv_set){jsons, tab_j, ij, tj ? (uint32_t)(tj - 1) : 0};
    *out = cv;
    return 0;
}

/* startsWith, endsWith, contains: the strings. */
static int compile_strings(enum ld__op op, const json_t *values, struct ld__clause_values **out)
{
    size_t n = json_array_size(values), ns = 0, text = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(values, i);
        if (!compile_wanted(i))
            return LD_ECANCELED;
        if (json_is_string(v)) {
            ns++;
            text += json_string_length(v);
        }
    }
    size_t total = sizeof(struct ld__clause_values), o_s, o_text;
    if (ns > UINT32_MAX ||
        !reserve(&total, alignof(struct cv_str), ns, sizeof(struct cv_str), &o_s) ||
        !reserve(&total, 1, text, 1, &o_text))
        return LD_ENOMEM;
    struct ld__clause_values *cv = block_new(op, total);
    if (!cv)
        return LD_ENOMEM;
    struct cv_str *strs = in_block(cv, o_s);
    char *arena = in_block(cv, o_text);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(values, i);
        if (json_is_string(v)) {
            size_t len = json_string_length(v);
            memcpy(arena, json_string_value(v), len);
            strs[cv->n].s = arena;
            strs[cv->n++].len = len;
            arena += len;
        }
    }
    cv->u.str = strs;
    *out = cv;
    return 0;
}

/* lessThan(OrEqual), before: the greatest value; the others the least. */
static int compile_bound(enum ld__op op, const json_t *values, struct ld__clause_values **out)
{
    bool dates = op == LD__OP_BEFORE || op == LD__OP_AFTER;
    bool want_max =
        op == LD__OP_LESS_THAN || op == LD__OP_LESS_THAN_OR_EQUAL || op == LD__OP_BEFORE;
    double bound = 0;
    bool any = false;
    for (size_t i = 0; i < json_array_size(values); i++) {
        const json_t *v = json_array_get(values, i);
        double x;
        if (dates) {
            if (!ld__date_parse(v, &x))
                continue;
        } else if (json_is_number(v)) {
            x = json_number_value(v);
        } else {
            continue;
        }
        if (!any || (want_max ? x > bound : x < bound))
            bound = x;
        any = true;
    }
    struct ld__clause_values *cv = block_new(op, sizeof(*cv));
    if (!cv)
        return LD_ENOMEM;
    cv->n = any;
    cv->u.bound = bound;
    *out = cv;
    return 0;
}

static bool json_semver(const json_t *v, struct ld__semver *sv)
{
    return json_is_string(v) && ld__semver_parse(json_string_value(v), json_string_length(v), sv);
}

/* semVerLessThan: the greatest version; semVerGreaterThan: the least. Its
 * prerelease is copied after the header. */
static int compile_semver_bound(enum ld__op op, const json_t *values,
                                struct ld__clause_values **out)
{
    struct ld__semver bound = {0, 0, 0, NULL, 0}, sv;
    bool any = false;
    for (size_t i = 0; i < json_array_size(values); i++) {
        if (!json_semver(json_array_get(values, i), &sv))
            continue;
        int c = any ? ld__semver_compare(&sv, &bound) : 0;
        if (!any || (op == LD__OP_SEMVER_LESS_THAN ? c > 0 : c < 0))
            bound = sv;
        any = true;
    }
    size_t total = sizeof(struct ld__clause_values), o_text;
    if (!reserve(&total, 1, bound.pre_len, 1, &o_text))
        return LD_ENOMEM;
    struct ld__clause_values *cv = block_new(op, total);
    if (!cv)
        return LD_ENOMEM;
    if (bound.pre) {
        bound.pre = memcpy(in_block(cv, o_text), bound.pre, bound.pre_len);
    }
    cv->n = any;
    cv->u.sv_bound = bound;
    *out = cv;
    return 0;
}

/* semVerEqual: every valid version, prereleases copied to the block. */
static int compile_semver_list(const json_t *values, struct ld__clause_values **out)
{
    size_t n = json_array_size(values), nv = 0, text = 0;
    struct ld__semver sv;
    for (size_t i = 0; i < n; i++) {
        if (json_semver(json_array_get(values, i), &sv)) {
            nv++;
            text += sv.pre_len;
        }
    }
    size_t total = sizeof(struct ld__clause_values), o_v, o_text;
    if (nv > UINT32_MAX ||
        !reserve(&total, alignof(struct ld__semver), nv, sizeof(struct ld__semver), &o_v) ||
        !reserve(&total, 1, text, 1, &o_text))
        return LD_ENOMEM;
    struct ld__clause_values *cv = block_new(LD__OP_SEMVER_EQUAL, total);
    if (!cv)
        return LD_ENOMEM;
    struct ld__semver *svs = in_block(cv, o_v);
    char *arena = in_block(cv, o_text);
    for (size_t i = 0; i < n; i++) {
        if (!json_semver(json_array_get(values, i), &sv))
            continue;
        if (sv.pre) {
            memcpy(arena, sv.pre, sv.pre_len);
            sv.pre = arena;
            arena += sv.pre_len;
        }
        svs[cv->n++] = sv;
    }
    cv->u.sv = svs;
    *out = cv;
    return 0;
}

/* PCRE2 allocates through these (its general context). */
static void *pcre_malloc(size_t size, void *data)
{
    (void)data;
    return ld__malloc(size);
}

static void pcre_free(void *ptr, void *data)
{
    (void)data;
    ld__free(ptr);
}

static size_t pattern_bytes(const pcre2_code *code)
{
    size_t size = 0, jit = 0;
    pcre2_pattern_info(code, PCRE2_INFO_SIZE, &size);
    pcre2_pattern_info(code, PCRE2_INFO_JITSIZE, &jit);
    return size + jit;
}

/* How many times one match may call PCRE2's internal match() from one
 * start position (its "match limit"; the JIT counts its backtracking
 * points alike): a pattern that backtracks catastrophically ("(a+)+$" on
 * a long string) stops there and does not match, instead of holding the
 * loop for seconds. Real patterns need far fewer. Measured: runaway
 * anchored patterns on up to 1,000,000 characters stop within 1.2 ms with
 * the JIT, 7 ms without (after a first match that grows the interpreter's
 * frames). */
#define MATCH_LIMIT 100000

/* PCRE2 counts its limit afresh at each start position of an unanchored
 * search, so "(x+x+)+y" on blocks of 14 x's took 1.3 s over 100,000
 * characters with the JIT (24,000 steps at each position, all under the
 * limit). A match of one pattern shares a budget of steps between the
 * positions it may start at: each gets the budget divided by their number,
 * at most MATCH_LIMIT and at least a floor, so that a search stays linear
 * (real patterns take 1 or 2 steps a position with the JIT, 2 to 4
 * without). The JIT's steps are cheaper (1.5-2 ns against 7-20 for the
 * interpreter): each has its budget and floor. Subjects under 20 (the JIT)
 * or 5 (interpreter) characters keep MATCH_LIMIT at every position.
 * Measured, the slowest matches stopped or not: 2.5 ms over 100,000
 * characters and 7 ms over 1,000,000 with the JIT; 20 and 47 ms without. */
#define REGEX_BUDGET_JIT 2000000
#define REGEX_BUDGET_INTERP 500000
#define REGEX_FLOOR_JIT 2
#define REGEX_FLOOR_INTERP 4
/* Subjects on which each position may take at least this many steps are
 * not scanned for their start positions (a subject of up to 1,999 bytes
 * with the JIT, 499 without). */
#define REGEX_COUNT_BELOW 1000

/* The heap the interpreter may take for one match (its backtracking
 * frames, kept in the clause's match data): a group repeated over the
 * subject takes a frame per repetition. Beyond: no match. */
#define REGEX_HEAP_LIMIT_KIB 4096

/* The JIT's stack, one per thread (PCRE2's default, 32 KiB on the machine
 * stack, holds a group repeated over only a few thousand characters). Its
 * pages are mapped by PCRE2 as they are needed, up to JIT_STACK_MAX;
 * beyond, the match stops (no match). 8 MiB holds "^(?:[a-z]|-)+$" over
 * some 200,000 characters. */
#define JIT_STACK_START (32 * 1024)
#define JIT_STACK_MAX (8 * 1024 * 1024)

/* LDASYNC_NO_JIT=1 compiles patterns for PCRE2's interpreter only: for
 * valgrind, which cannot follow JIT code (make check-valgrind sets it). */
static bool g_no_jit;
static pthread_once_t g_jit_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_stack_key;
static bool g_stack_key_ok;

/* Thread exit: the thread's JIT stack goes. (The main thread's stays
 * until the process ends.) */
static void stack_free(void *js)
{
    pcre2_jit_stack_free(js);
}

static void jit_init_once(void)
{
    const char *env = getenv("LDASYNC_NO_JIT");
    g_no_jit = env && *env && strcmp(env, "0") != 0;
    g_stack_key_ok = !g_no_jit && pthread_key_create(&g_stack_key, stack_free) == 0;
}

static bool jit_wanted(void)
{
    pthread_once(&g_jit_once, jit_init_once);
    return !g_no_jit;
}

/* PCRE2 asks for the JIT's stack at each JIT match (pcre2_jit_stack_assign):
 * the calling thread's, made on its first match. Evaluators of different
 * threads may share nothing else, so one stack per thread is never used by
 * two matches at once (a match never starts another). NULL (no memory):
 * PCRE2's default stack, on which long subjects stop early. */
static pcre2_jit_stack *thread_stack(void *data)
{
    (void)data;
    if (!jit_wanted() || !g_stack_key_ok) /* (the once also orders the key's making) */
        return NULL;
    pcre2_jit_stack *js = pthread_getspecific(g_stack_key);
    if (js)
        return js;
    pcre2_general_context *gc = pcre2_general_context_create(pcre_malloc, pcre_free, NULL);
    js = gc ? pcre2_jit_stack_create(JIT_STACK_START, JIT_STACK_MAX, gc) : NULL;
    pcre2_general_context_free(gc); /* the stack keeps its own copy of the hooks */
    if (js && pthread_setspecific(g_stack_key, js) != 0) {
        pcre2_jit_stack_free(js);
        js = NULL;
    }
    return js;
}

/* matches: each string compiled (PCRE2_UTF), JIT-compiled when possible;
 * patterns that do not compile are dropped. One match data block (one
 * ovector pair: only success matters) serves them all. */
static int compile_regexes(const json_t *values, struct ld__clause_values **out)
{
    size_t n = json_array_size(values), nr = 0;
    for (size_t i = 0; i < n; i++)
        nr += json_is_string(json_array_get(values, i));
    size_t total = sizeof(struct ld__clause_values), o_code;
    if (nr > UINT32_MAX ||
        !reserve(&total, alignof(struct cv_re), nr, sizeof(struct cv_re), &o_code))
        return LD_ENOMEM;
    struct ld__clause_values *cv = block_new(LD__OP_MATCHES, total);
    if (!cv)
        return LD_ENOMEM;
    cv->u.re.v = in_block(cv, o_code);
    *out = cv;
    if (nr == 0)
        return 0;

    pcre2_general_context *gc = pcre2_general_context_create(pcre_malloc, pcre_free, NULL);
    pcre2_compile_context *cc = gc ? pcre2_compile_context_create(gc) : NULL;
    if (cc)
        cv->u.re.md = pcre2_match_data_create(1, gc);
    if (cv->u.re.md)
        cv->u.re.mc = pcre2_match_context_create(gc);
    if (cv->u.re.mc) {
        pcre2_set_match_limit(cv->u.re.mc, MATCH_LIMIT);
        pcre2_set_heap_limit(cv->u.re.mc, REGEX_HEAP_LIMIT_KIB);
        pcre2_jit_stack_assign(cv->u.re.mc, thread_stack, NULL);
    }
    int rc = cv->u.re.mc ? 0 : LD_ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const json_t *v = json_array_get(values, i);
        if (!json_is_string(v))
            continue;
        int err;
        PCRE2_SIZE at;
        pcre2_code *code = pcre2_compile((PCRE2_SPTR)json_string_value(v), json_string_length(v),
                                         PCRE2_UTF, &err, &at, cc);
        if (!code) {
            if (err == PCRE2_ERROR_HEAP_FAILED)
                rc = LD_ENOMEM;
            continue; /* a bad pattern never matches */
        }
        struct cv_re *re = &cv->u.re.v[cv->n++];
        re->code = code;
        uint32_t opts = 0, type = 0, unit = 0, nl = PCRE2_NEWLINE_LF;
        pcre2_pattern_info(code, PCRE2_INFO_ALLOPTIONS, &opts);
        pcre2_pattern_info(code, PCRE2_INFO_FIRSTCODETYPE, &type);
        pcre2_pattern_info(code, PCRE2_INFO_FIRSTCODEUNIT, &unit);
        pcre2_pattern_info(code, PCRE2_INFO_FIRSTBITMAP, &re->bits);
        pcre2_pattern_info(code, PCRE2_INFO_NEWLINE, &nl);
        /* (PCRE2 reports these only where it skips to them: not with
         * (*NO_START_OPT)) */
        re->starts = (opts & PCRE2_ANCHORED) ? LD__RE_ONCE
                     : type == 2             ? LD__RE_LINES
                     : type == 1             ? LD__RE_FIRST
                     : re->bits              ? LD__RE_BITS
                                             : LD__RE_ANY;
        re->newline = (uint8_t)nl;
        re->first = (uint8_t)unit;
        re->jit = jit_wanted() && pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
        if (re->jit && !thread_stack(NULL))
            rc = LD_ENOMEM; /* made now, so that matching here allocates nothing */
        if (!re->jit) {
            /* No JIT (not built in, or out of memory): the interpreter,
             * whose backtracking frames live in the match data. A first
             * match makes them now rather than in the evaluation. */
            if (pcre2_match(code, (PCRE2_SPTR) "", 0, 0, 0, cv->u.re.md, cv->u.re.mc) ==
                PCRE2_ERROR_NOMEMORY)
                rc = LD_ENOMEM;
        }
        cv->bytes += pattern_bytes(code);
    }
    pcre2_compile_context_free(cc);
    pcre2_general_context_free(gc);
    if (rc) {
        ld__clause_values_free(cv);
        *out = NULL;
    }
    return rc;
}

int ld__clause_values_compile(enum ld__op op, const json_t *values, struct ld__clause_values **out)
{
    *out = NULL;
    if (!json_is_array(values))
        values = NULL; /* json_array_size(NULL) is 0 */
    switch (op) {
    case LD__OP_IN:
        return compile_in(values, out);
    case LD__OP_STARTS_WITH:
    case LD__OP_ENDS_WITH:
    case LD__OP_CONTAINS:
        return compile_strings(op, values, out);
    case LD__OP_MATCHES:
        return compile_regexes(values, out);
    case LD__OP_LESS_THAN:
    case LD__OP_LESS_THAN_OR_EQUAL:
    case LD__OP_GREATER_THAN:
    case LD__OP_GREATER_THAN_OR_EQUAL:
    case LD__OP_BEFORE:
    case LD__OP_AFTER:
        return compile_bound(op, values, out);
    case LD__OP_SEMVER_LESS_THAN:
    case LD__OP_SEMVER_GREATER_THAN:
        return compile_semver_bound(op, values, out);
    case LD__OP_SEMVER_EQUAL:
        return compile_semver_list(values, out);
    default:
        /* unknown, segmentMatch: never matches */
        return (*out = block_new(LD__OP_UNKNOWN, sizeof(**out))) ? 0 : LD_ENOMEM;
    }
}

/* ---- matching ------------------------------------------------------------ */

static bool in_strings(const struct cv_set *set, const json_t *u)
{
    const struct cv_str *v = set->v;
    const char *s = json_string_value(u);
    size_t len = json_string_length(u);
    if (!set->tab) {
        for (uint32_t i = 0; i < set->n; i++)
            if (v[i].len == len && memcmp(v[i].s, s, len) == 0)
                return true;
        return false;
    }
    uint64_t h = ld__hash_bytes(s, len), tag = h >> 32;
    for (uint32_t i = (uint32_t)h & set->mask;; i = (i + 1) & set->mask) {
        uint64_t slot = set->tab[i];
        if (!slot)
            return false;
        const struct cv_str *e = &v[(uint32_t)slot - 1];
        if (slot >> 32 == tag && e->len == len && memcmp(e->s, s, len) == 0)
            return true;
    }
}

static bool in_numbers(const struct cv_set *set, double x)
{
    const double *v = set->v;
    if (!set->tab) {
        for (uint32_t i = 0; i < set->n; i++)
            if (v[i] == x)
                return true;
        return false;
    }
    uint64_t h = ld__hash_number(x), tag = h >> 32;
    for (uint32_t i = (uint32_t)h & set->mask;; i = (i + 1) & set->mask) {
        uint64_t slot = set->tab[i];
        if (!slot)
            return false;
        if (slot >> 32 == tag && v[(uint32_t)slot - 1] == x)
            return true;
    }
}

static bool in_json(const struct cv_set *set, const json_t *u)
{
    json_t *const *v = set->v;
    if (!set->tab) {
        for (uint32_t i = 0; i < set->n; i++)
            if (ld__json_same(v[i], u))
                return true;
        return false;
    }
    uint64_t h = ld__hash_json(u), tag = h >> 32;
    for (uint32_t i = (uint32_t)h & set->mask;; i = (i + 1) & set->mask) {
        uint64_t slot = set->tab[i];
        if (!slot)
            return false;
        if (slot >> 32 == tag && ld__json_same(v[(uint32_t)slot - 1], u))
            return true;
    }
}

static bool match_in(const struct ld__clause_values *cv, const json_t *u)
{
    switch (json_typeof(u)) {
    case JSON_STRING:
        return cv->u.in.str.n && in_strings(&cv->u.in.str, u);
    case JSON_INTEGER:
    case JSON_REAL:
        return cv->u.in.num.n && in_numbers(&cv->u.in.num, json_number_value(u));
    case JSON_ARRAY:
    case JSON_OBJECT:
        return cv->u.in.json.n && in_json(&cv->u.in.json, u);
    case JSON_TRUE:
        return cv->bools & 2;
    case JSON_FALSE:
        return cv->bools & 1;
    default:
        return false;
    }
}

/* Naive search; clause values and attributes are short. */
static bool contains(const char *s, size_t len, const char *needle, size_t n)
{
    if (n == 0)
        return true;
    while (len >= n) {
        const char *p = memchr(s, needle[0], len - n + 1);
        if (!p)
            return false;
        if (memcmp(p + 1, needle + 1, n - 1) == 0)
            return true;
        len -= (size_t)(p + 1 - s);
        s = p + 1;
    }
    return false;
}

static bool match_strings(const struct ld__clause_values *cv, const json_t *u)
{
    if (!json_is_string(u) || cv->n == 0)
        return false;
    const char *s = json_string_value(u);
    size_t len = json_string_length(u);
    const struct cv_str *v = cv->u.str;
    for (uint32_t i = 0; i < cv->n; i++) {
        size_t n = v[i].len;
        switch (cv->op) {
        case LD__OP_STARTS_WITH:
            if (n <= len && memcmp(s, v[i].s, n) == 0)
                return true;
            break;
        case LD__OP_ENDS_WITH:
            if (n <= len && memcmp(s + len - n, v[i].s, n) == 0)
                return true;
            break;
        default:
            if (contains(s, len, v[i].s, n))
                return true;
        }
    }
    return false;
}

/* The match limit of each start position of `re` in a subject of `len`
 * bytes: its budget over the positions the search may start at. The
 * positions are counted only for subjects long enough to need it. */
static uint32_t position_limit(const struct cv_re *re, PCRE2_SPTR s, size_t len)
{
    size_t budget = re->jit ? REGEX_BUDGET_JIT : REGEX_BUDGET_INTERP;
    size_t least = re->jit ? REGEX_FLOOR_JIT : REGEX_FLOOR_INTERP;
    if (re->starts == LD__RE_ONCE)
        return MATCH_LIMIT;
    if (len < budget / REGEX_COUNT_BELOW)
        return len < budget / MATCH_LIMIT ? MATCH_LIMIT : (uint32_t)(budget / (len + 1));
    size_t limit = budget / ld__re_start_positions(re->starts, re->first, re->newline, re->bits, s,
                                                   len, budget / least);
    return limit >= MATCH_LIMIT ? MATCH_LIMIT : limit < least ? (uint32_t)least : (uint32_t)limit;
}

/* The subject is checked once here (a subject that is not UTF-8 never
 * matches, as PCRE2's own check would have it), so that JIT-compiled
 * patterns can run through pcre2_jit_match, which skips pcre2_match's
 * checks. Each pattern's match limit is set for this subject
 * (position_limit). A PCRE2 error (a match limit, the JIT stack) is no
 * match. */
static bool match_regexes(struct ld__clause_values *cv, const json_t *u)
{
    if (!json_is_string(u) || cv->n == 0)
        return false;
    PCRE2_SPTR s = (PCRE2_SPTR)json_string_value(u);
    size_t len = json_string_length(u);
    if (!ld__re_utf8_valid(s, len))
        return false;
    for (uint32_t i = 0; i < cv->n; i++) {
        const struct cv_re *re = &cv->u.re.v[i];
        pcre2_set_match_limit(cv->u.re.mc, position_limit(re, s, len));
        int rc = re->jit ? pcre2_jit_match(re->code, s, len, 0, 0, cv->u.re.md, cv->u.re.mc)
                         : pcre2_match(re->code, s, len, 0, PCRE2_NO_UTF_CHECK, cv->u.re.md,
                                       cv->u.re.mc);
        if (rc >= 0)
            return true; /* 0: matched, the ovector was too small for the groups */
        if (rc != PCRE2_ERROR_NOMATCH && rc != PCRE2_ERROR_PARTIAL)
            cv->stopped = true; /* a limit (match, heap, JIT stack) or memory: no match */
    }
    return false;
}

bool ld__clause_values_stopped(const struct ld__clause_values *cv)
{
    return cv && cv->op == LD__OP_MATCHES && cv->stopped;
}

static bool json_semver_u(const json_t *u, struct ld__semver *sv)
{
    return json_is_string(u) && ld__semver_parse(json_string_value(u), json_string_length(u), sv);
}

bool ld__clause_values_match(const struct ld__clause_values *cv, const json_t *u)
{
    double x;
    struct ld__semver sv;
    switch ((enum ld__op)cv->op) {
    case LD__OP_IN:
        return match_in(cv, u);
    case LD__OP_STARTS_WITH:
    case LD__OP_ENDS_WITH:
    case LD__OP_CONTAINS:
        return match_strings(cv, u);
    case LD__OP_MATCHES:
        /* the compiled form's match data, match context (its limit) and
         * `stopped` are its mutable part (eval-internal.h, threads) */
        return match_regexes((struct ld__clause_values *)cv, u);
    case LD__OP_LESS_THAN:
        return cv->n && json_is_number(u) && json_number_value(u) < cv->u.bound;
    case LD__OP_LESS_THAN_OR_EQUAL:
        return cv->n && json_is_number(u) && json_number_value(u) <= cv->u.bound;
    case LD__OP_GREATER_THAN:
        return cv->n && json_is_number(u) && json_number_value(u) > cv->u.bound;
    case LD__OP_GREATER_THAN_OR_EQUAL:
        return cv->n && json_is_number(u) && json_number_value(u) >= cv->u.bound;
    case LD__OP_BEFORE:
        return cv->n && ld__date_parse(u, &x) && x < cv->u.bound;
    case LD__OP_AFTER:
        return cv->n && ld__date_parse(u, &x) && x > cv->u.bound;
    case LD__OP_SEMVER_LESS_THAN:
        return cv->n && json_semver_u(u, &sv) && ld__semver_compare(&sv, &cv->u.sv_bound) < 0;
    case LD__OP_SEMVER_GREATER_THAN:
        return cv->n && json_semver_u(u, &sv) && ld__semver_compare(&sv, &cv->u.sv_bound) > 0;
    case LD__OP_SEMVER_EQUAL:
        if (cv->n == 0 || !json_semver_u(u, &sv))
            return false;
        for (uint32_t i = 0; i < cv->n; i++)
            if (ld__semver_compare(&sv, &cv->u.sv[i]) == 0)
                return true;
        return false;
    default:
        return false;
    }
}

/* ---- bytes and freeing ---------------------------------------------------- */

size_t ld__clause_values_bytes(const struct ld__clause_values *cv)
{
    if (!cv)
        return 0;
    size_t bytes = cv->bytes;
    if (cv->op == LD__OP_MATCHES && cv->u.re.md) {
#if PCRE2_MAJOR > 10 || (PCRE2_MAJOR == 10 && PCRE2_MINOR >= 34)
        bytes += pcre2_get_match_data_size(cv->u.re.md);
#else
        bytes += 128; /* about a match data block with one ovector pair */
#endif
#if PCRE2_MAJOR > 10 || (PCRE2_MAJOR == 10 && PCRE2_MINOR >= 45)
        bytes += pcre2_get_match_data_heapframes_size(cv->u.re.md);
#endif
    }
    return bytes;
}

void ld__clause_values_free(struct ld__clause_values *cv)
{
    if (!cv)
        return;
    if (cv->op == LD__OP_IN) {
        json_t *const *v = cv->u.in.json.v;
        for (uint32_t i = 0; i < cv->u.in.json.n; i++)
            ld__json_decref(v[i]);
    } else if (cv->op == LD__OP_MATCHES) {
        for (uint32_t i = 0; i < cv->n; i++)
            pcre2_code_free(cv->u.re.v[i].code);
        pcre2_match_data_free(cv->u.re.md);
        pcre2_match_context_free(cv->u.re.mc);
    }
    ld__free(cv);
}
