/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/json.h: JSON text with integers beyond json_int_t read as reals.
 *
 * jansson 2.14 has no flag for that (JSON_DECODE_INT_AS_REAL turns every
 * integer into a real, versions too). So the text is passed through a
 * filter that appends "e0" to each such integer: jansson then reads it as
 * a real, and reads everything else untouched. The filter follows JSON's
 * strings (a digit inside one is text) and numbers (only the digits before
 * any '.', 'e' or 'E' are the integer part); text that is not JSON passes
 * as it is, for jansson to refuse.
 */
#include <ldasync/json.h>

#include <stdbool.h>
#include <string.h>

/* The magnitudes of json_int_t's bounds, as jansson 2.14 has it (long long). */
static const char INT_MAX_DIGITS[] = "9223372036854775807";
static const char INT_MIN_DIGITS[] = "9223372036854775808";
#define INT_DIGITS (sizeof(INT_MAX_DIGITS) - 1)

struct big_filter {
    json_load_callback_t src;
    void *src_data;
    const char *mem; /* or a buffer in memory (src NULL) */
    size_t mem_len;
    size_t in_len, in_pos;
    bool eof, err, in_string, escape, in_number, real, neg;
    size_t ndigits;          /* of the integer part */
    char digits[INT_DIGITS]; /* its first digits */
    size_t pending;          /* bytes of "e0" still to give */
    char in[4096];
};

/* Whether the integer part just read is beyond json_int_t. A leading 0
 * followed by digits is not JSON: left for jansson to refuse. */
static bool too_big(const struct big_filter *f)
{
    if (f->real || f->ndigits < INT_DIGITS || f->digits[0] == '0')
        return false;
    if (f->ndigits > INT_DIGITS)
        return true;
    return memcmp(f->digits, f->neg ? INT_MIN_DIGITS : INT_MAX_DIGITS, INT_DIGITS) > 0;
}

/* Ends the number being read: "e0" follows it when it is too big. */
static void end_number(struct big_filter *f)
{
    f->in_number = false;
    if (too_big(f))
        f->pending = 2;
}

/* Takes `c`, outside the "e0" to insert: true when it is given as it is,
 * false when "e0" must come first (it stays to be read again). */
static bool take(struct big_filter *f, char c)
{
    if (f->in_string) {
        if (f->escape)
            f->escape = false;
        else if (c == '\\')
            f->escape = true;
        else if (c == '"')
            f->in_string = false;
        return true;
    }
    if (f->in_number) {
        if (c >= '0' && c <= '9') {
            if (!f->real && f->ndigits++ < INT_DIGITS)
                f->digits[f->ndigits - 1] = c;
            return true;
        }
        if (c == '.' || c == 'e' || c == 'E' || (f->real && (c == '+' || c == '-'))) {
            f->real = true;
            return true;
        }
        end_number(f);
        return f->pending == 0;
    }
    if (c == '"') {
        f->in_string = true;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        f->in_number = true;
        f->real = false;
        f->neg = c == '-';
        f->ndigits = 0;
        if (c != '-')
            f->digits[f->ndigits++] = c;
    }
    return true;
}

/* More input: false at its end; *err set on a read error. */
static bool refill(struct big_filter *f, bool *err)
{
    f->in_pos = 0;
    if (!f->src) {
        size_t n = f->mem_len < sizeof(f->in) ? f->mem_len : sizeof(f->in);
        memcpy(f->in, f->mem, n);
        f->mem += n;
        f->mem_len -= n;
        f->in_len = n;
        return n > 0;
    }
    size_t n = f->src(f->in, sizeof(f->in), f->src_data);
    if (n == (size_t)-1 || n > sizeof(f->in)) {
        *err = true;
        f->in_len = 0;
        return false;
    }
    f->in_len = n;
    return n > 0;
}

static size_t filter_cb(void *buffer, size_t buflen, void *data)
{
    struct big_filter *f = data;
    char *out = buffer;
    size_t n = 0;
    while (n < buflen) {
        if (f->pending) {
            out[n++] = "e0"[2 - f->pending--];
            continue;
        }
        if (f->in_pos == f->in_len) {
            if (!f->eof && !refill(f, &f->err))
                f->eof = true; /* a read error too, once the text before it is given */
            if (f->eof) {
                if (f->in_number)
                    end_number(f); /* a number at the very end */
                if (!f->pending)
                    return n || !f->err ? n : (size_t)-1;
                continue;
            }
        }
        char c = f->in[f->in_pos];
        if (take(f, c)) {
            out[n++] = c;
            f->in_pos++;
        }
    }
    return n;
}

static json_t *load_filtered(struct big_filter *f, size_t flags, json_error_t *error)
{
    return json_load_callback(filter_cb, f, flags, error);
}

json_t *ld_json_load_callback(json_load_callback_t callback, void *data, size_t flags,
                              json_error_t *error)
{
    if (!callback) /* jansson's "wrong arguments" */
        return json_load_callback(callback, data, flags, error);
    struct big_filter f = {.src = callback, .src_data = data};
    return load_filtered(&f, flags, error);
}

json_t *ld_json_loadb(const char *buffer, size_t buflen, size_t flags, json_error_t *error)
{
    json_error_t mine;
    json_error_t *e = error ? error : &mine;
    json_t *j = json_loadb(buffer, buflen, flags, e);
    if (j || !buffer || json_error_code(e) != json_error_numeric_overflow ||
        strncmp(e->text, "too big", 7) != 0)
        return j;
    struct big_filter f = {.mem = buffer, .mem_len = buflen};
    return load_filtered(&f, flags, e);
}
