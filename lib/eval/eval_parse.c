/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the strict parsers of the clause operators (eval-internal.h):
 * semantic versions and their precedence, and RFC 3339 dates; and for
 * `matches`, the UTF-8 check of a subject and the count of the positions
 * PCRE2 may start a search at. They keep no state and never allocate.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <pcre2.h>
#include <stdint.h>
#include <string.h>

#include "eval/eval-internal.h"

/* ---- semantic versions --------------------------------------------------- */

static bool is_digit(unsigned char c)
{
    return (unsigned)(c - '0') < 10u;
}

static bool is_ident_char(unsigned char c)
{
    return is_digit(c) || (unsigned)((c | 0x20) - 'a') < 26u || c == '-';
}

/* A numeric component at *p: "0" or [1-9][0-9]* fitting 64 bits. */
static bool semver_number(const char **p, const char *end, uint64_t *out)
{
    const char *q = *p;
    uint64_t v = 0;
    if (q == end || !is_digit((unsigned char)*q))
        return false;
    if (*q == '0') {
        q++;
        if (q != end && is_digit((unsigned char)*q))
            return false; /* leading zero */
    } else {
        for (; q != end && is_digit((unsigned char)*q); q++) {
            unsigned d = (unsigned)(*q - '0');
            if (v > (UINT64_MAX - d) / 10)
                return false;
            v = v * 10 + d;
        }
    }
    *p = q;
    *out = v;
    return true;
}

/* Dot-separated identifiers from *p up to the end or a byte outside them;
 * `numeric_rule`: all-digit identifiers must not have a leading zero. */
static bool semver_idents(const char **p, const char *end, bool numeric_rule)
{
    const char *q = *p;
    for (;;) {
        const char *start = q;
        bool digits = true;
        for (; q != end && is_ident_char((unsigned char)*q); q++)
            digits = digits && is_digit((unsigned char)*q);
        size_t n = (size_t)(q - start);
        if (n == 0)
            return false;
        if (numeric_rule && digits && n > 1 && *start == '0')
            return false;
        if (q == end || *q != '.')
            break;
        q++;
    }
    *p = q;
    return true;
}

bool ld__semver_parse(const char *s, size_t len, struct ld__semver *out)
{
    if (!s)
        return false;
    const char *p = s, *end = s + len;
    out->minor = out->patch = 0;
    out->pre = NULL;
    out->pre_len = 0;
    if (!semver_number(&p, end, &out->major))
        return false;
    if (p != end && *p == '.') {
        p++;
        if (!semver_number(&p, end, &out->minor))
            return false;
        if (p != end && *p == '.') {
            p++;
            if (!semver_number(&p, end, &out->patch))
                return false;
        }
    }
    if (p != end && *p == '-') {
        const char *pre = ++p;
        if (!semver_idents(&p, end, true))
            return false;
        out->pre = pre;
        out->pre_len = (size_t)(p - pre);
    }
    if (p != end && *p == '+') {
        p++;
        if (!semver_idents(&p, end, false))
            return false;
    }
    return p == end;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

static bool all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!is_digit((unsigned char)s[i]))
            return false;
    return true;
}

/* One prerelease identifier against another (SemVer 2.0.0, 11.4). */
static int ident_compare(const char *a, size_t an, const char *b, size_t bn)
{
    bool na = all_digits(a, an), nb = all_digits(b, bn);
    if (na && nb) {
        /* no leading zeros: the longer number is the greater */
        if (an != bn)
            return an < bn ? -1 : 1;
        int c = memcmp(a, b, an);
        return (c > 0) - (c < 0);
    }
    if (na || nb)
        return na ? -1 : 1; /* numeric identifiers are lower */
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c)
        return (c > 0) - (c < 0);
    return cmp_u64(an, bn);
}

int ld__semver_compare(const struct ld__semver *a, const struct ld__semver *b)
{
    int c = cmp_u64(a->major, b->major);
    if (!c)
        c = cmp_u64(a->minor, b->minor);
    if (!c)
        c = cmp_u64(a->patch, b->patch);
    if (c)
        return c;
    if (!a->pre || !b->pre)
        return (a->pre == NULL) - (b->pre == NULL); /* a prerelease is lower */
    const char *pa = a->pre, *ea = pa + a->pre_len;
    const char *pb = b->pre, *eb = pb + b->pre_len;
    for (;;) {
        if (pa == ea || pb == eb)
            return (pa != ea) - (pb != eb); /* more identifiers: greater */
        const char *da = memchr(pa, '.', (size_t)(ea - pa));
        const char *db = memchr(pb, '.', (size_t)(eb - pb));
        size_t an = (size_t)((da ? da : ea) - pa), bn = (size_t)((db ? db : eb) - pb);
        if ((c = ident_compare(pa, an, pb, bn)) != 0)
            return c;
        pa = da ? da + 1 : ea;
        pb = db ? db + 1 : eb;
    }
}

/* ---- dates --------------------------------------------------------------- */

static bool digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit((unsigned char)s[i]))
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

static bool leap_year(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int y, int m)
{
    static const unsigned char days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && leap_year(y) ? 29 : days[m - 1];
}

/* Days from 1970-01-01 to the proleptic Gregorian date y-m-d (m 1-12). The
 * year is shifted to start in March, so that the leap day is the last day of
 * a year; eras of 400 years have 146097 days. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;                                   /* 0-399 */
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* 0-365 */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* 0-146096 */
    return era * 146097 + doe - 719468;
}

bool ld__date_parse_string(const char *s, size_t len, double *ms)
{
    int y, mo, d, h, mi, sec;
    if (!s || len < 20)
        return false;
    if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &h) ||
        s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60)
        return false;
    size_t i = 19;
    uint32_t ns = 0;
    if (s[i] == '.') {
        size_t start = ++i;
        for (; i < len && is_digit((unsigned char)s[i]); i++) {
            if (i - start == 9)
                return false; /* more than 9 digits */
            ns = ns * 10 + (uint32_t)(s[i] - '0');
        }
        if (i == start)
            return false;
        for (size_t n = i - start; n < 9; n++)
            ns *= 10;
    }
    if (i >= len)
        return false; /* no offset */
    int64_t off = 0;
    if (s[i] == 'Z' || s[i] == 'z') {
        i++;
    } else if (s[i] == '+' || s[i] == '-') {
        int oh, om;
        if (len - i < 6 || !digits(s + i + 1, 2, &oh) || s[i + 3] != ':' ||
            !digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
            return false;
        off = (int64_t)(oh * 60 + om) * 60;
        if (s[i] == '-')
            off = -off;
        i += 6;
    } else {
        return false;
    }
    if (i != len)
        return false;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off;
    /* whole milliseconds exactly, then the sub-millisecond rest */
    *ms = (double)(secs * 1000 + (int64_t)(ns / 1000000)) + (double)(ns % 1000000) / 1e6;
    return true;
}

bool ld__date_parse(const json_t *v, double *ms)
{
    if (!v)
        return false;
    if (json_is_string(v))
        return ld__date_parse_string(json_string_value(v), json_string_length(v), ms);
    if (json_is_number(v)) {
        *ms = json_number_value(v);
        return true;
    }
    return false;
}

/* ---- `matches` subjects (eval_ops.c) ------------------------------------ */

/* An upper bound of the positions in `s` at which PCRE2 may start a search
 * of a pattern (eval-internal.h; counted up to `enough`): for a pattern that may start anywhere,
 * every byte and the end; else those its start is looked for at (PCRE2
 * skips the others): each line start (PCRE2_NEWLINE_ANY also counts bytes
 * that may end NEL, LS or PS), each first code unit in either case, each
 * byte of the first bytes' bitmap. */
size_t ld__re_start_positions(int starts, unsigned char first, uint32_t newline,
                              const uint8_t *bits, const unsigned char *s, size_t len,
                              size_t enough)
{
    if (starts == LD__RE_ONCE)
        return 1;
    if (starts == LD__RE_ANY)
        return len + 1;
    unsigned char a = first, b = a;
    if (starts == LD__RE_FIRST && (a | 0x20) >= 'a' && (a | 0x20) <= 'z')
        b = a ^ 0x20; /* the other case of a letter: the pattern may be caseless */
    if (starts == LD__RE_LINES) {
        a = b = newline == PCRE2_NEWLINE_CR ? '\r' : newline == PCRE2_NEWLINE_NUL ? 0 : '\n';
        if (newline == PCRE2_NEWLINE_ANYCRLF || newline == PCRE2_NEWLINE_ANY)
            b = '\r';
    }
    size_t n = 1, i = 0;
    bool by_bits = starts == LD__RE_BITS;
    if (by_bits || (starts == LD__RE_LINES && newline == PCRE2_NEWLINE_ANY)) {
        for (; i < len && n < enough; i++) {
            unsigned char c = s[i];
            n += by_bits ? (bits[c >> 3] >> (c & 7)) & 1
                         : c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x85 ||
                               c == 0xa8 || c == 0xa9;
        }
        return n;
    }
    /* blocks of 128 bytes counted into a byte: a loop the compiler
     * vectorizes (some 0.1 ms a megabyte) */
    while (i + 128 <= len && n < enough) {
        unsigned char k = 0;
        for (int j = 0; j < 128; j++)
            k += (s[i + j] == a) | (s[i + j] == b);
        n += k;
        i += 128;
    }
    for (; i < len && n < enough; i++)
        n += s[i] == a || s[i] == b;
    return n;
}

/* Strict UTF-8, as PCRE2 checks it: no overlong forms, no surrogates,
 * nothing above U+10FFFF, no truncated sequence. ASCII 8 bytes at a time. */
bool ld__re_utf8_valid(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        uint64_t w;
        if (len - i >= 8 && (memcpy(&w, s + i, 8), !(w & UINT64_C(0x8080808080808080)))) {
            i += 8;
            continue;
        }
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        unsigned lo = 0x80, hi = 0xbf; /* the range of the second byte */
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            lo = c == 0xe0 ? 0xa0 : 0x80; /* overlong */
            hi = c == 0xed ? 0x9f : 0xbf; /* surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            lo = c == 0xf0 ? 0x90 : 0x80; /* overlong */
            hi = c == 0xf4 ? 0x8f : 0xbf; /* above U+10FFFF */
        } else {
            return false;
        }
        if (len - i <= n || s[i + 1] < lo || s[i + 1] > hi)
            return false;
        for (size_t k = 2; k <= n; k++)
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
        i += n + 1;
    }
    return true;
}
