/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the hashes of flag evaluation (bucket-internal.h): SHA-1 buckets
 * and SHA-256 big segment keys, with OpenSSL's libcrypto.
 *
 * Why the low-level SHA1_Init/SHA256_Init API, deprecated since OpenSSL 3.0:
 * every allocation of the library must go through its allocator hooks, and
 * OpenSSL allocates through its own (CRYPTO_set_mem_functions is
 * process-wide, not ours to set), so the hash of a bucket must not allocate
 * at all. OpenSSL 3.0's allocations per bucket (their times are in
 * docs/performance.md, "Figures behind design choices"):
 *   SHA1() one-shot (EVP_Q_digest inside)            3 allocations
 *   EVP_Digest() with an EVP_MD fetched once         2 allocations
 *   EVP_DigestInit_ex2/Update/Final_ex on a reused
 *     EVP_MD_CTX (3.0 frees and re-creates the
 *     provider's context on every Init; changed
 *     after 3.0 by openssl/openssl#18105)            1 allocation
 *   SHA1_Init/Update/Final on a stack SHA_CTX        none (the fastest)
 * Calling the provider's digest functions directly (found through
 * OSSL_PROVIDER_query_operation) also avoids allocation but needs a
 * context per evaluator and leans on the provider interface, which is for
 * provider authors. The low-level API needs no state, cannot fail (an
 * allocation that fails would leave a bucket without an answer), triggers
 * no OpenSSL initialisation and is the fastest. OPENSSL_API_COMPAT
 * (openssl_user_macros(7)) asks for the 1.1.1 API in this file only, whose
 * declarations carry no deprecation attribute; an OpenSSL built without
 * deprecated functions stops the build here. tests/eval/check_bucket.c checks that
 * no OpenSSL allocation happens.
 */
#undef OPENSSL_API_COMPAT /* whatever the build asks for elsewhere */
#define OPENSSL_API_COMPAT 0x10101000L

#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "eval/eval-internal.h"

#ifdef OPENSSL_NO_DEPRECATED_3_0
#error "lib/eval/bucket.c needs OpenSSL's SHA1_Init and SHA256_Init (see the comment at its top)"
#endif

/* 2^53: reals of this magnitude or more are not bucketable. */
#define MAX_EXACT_INTEGER 9007199254740992.0

/* Writes `v` in decimal and a NUL to buf (at least 21 bytes); returns the
 * number of characters before the NUL. */
static size_t int64_text(int64_t v, char *buf)
{
    char digits[20];
    size_t n = 0, len = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        buf[len++] = '-';
    while (n > 0)
        buf[len++] = digits[--n];
    buf[len] = '\0';
    return len;
}

bool ld__bucket_text(const json_t *v, char *buf, const char **s, size_t *len)
{
    int64_t i;
    if (json_is_string(v)) {
        *s = json_string_value(v);
        *len = json_string_length(v);
        return true;
    }
    if (json_is_integer(v)) {
        i = (int64_t)json_integer_value(v);
    } else if (json_is_real(v)) {
        double x = json_real_value(v);
        /* NaN fails the range test; in range, the conversion is defined. */
        if (!(x > -MAX_EXACT_INTEGER && x < MAX_EXACT_INTEGER))
            return false;
        i = (int64_t)x;
        if ((double)i != x)
            return false;
    } else {
        return false;
    }
    *len = int64_text(i, buf);
    *s = buf;
    return true;
}

/* The SHA-1 of a string given in pieces, gathered in a stack buffer: a short
 * string (the usual case) costs one SHA1_Update instead of five. */
struct sha1_feed {
    SHA_CTX ctx;
    size_t used;
    char buf[256];
};

static void feed(struct sha1_feed *f, const char *s, size_t len)
{
    if (len > sizeof(f->buf) - f->used) {
        if (f->used > 0)
            SHA1_Update(&f->ctx, f->buf, f->used);
        f->used = 0;
        if (len > sizeof(f->buf)) {
            SHA1_Update(&f->ctx, s, len);
            return;
        }
    }
    if (len > 0)
        memcpy(f->buf + f->used, s, len);
    f->used += len;
}

double ld__bucket(const char *key, size_t key_len, const char *salt, size_t salt_len, bool has_seed,
                  int64_t seed, const char *value, size_t value_len)
{
    struct sha1_feed f;
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1_Init(&f.ctx);
    f.used = 0;
    if (has_seed) {
        char digits[LD__BUCKET_BUF];
        feed(&f, digits, int64_text(seed, digits));
    } else {
        feed(&f, key, key_len);
        feed(&f, ".", 1);
        feed(&f, salt, salt_len);
    }
    feed(&f, ".", 1);
    feed(&f, value, value_len);
    if (f.used > 0)
        SHA1_Update(&f.ctx, f.buf, f.used);
    SHA1_Final(md, &f.ctx);

    /* The first 15 hex digits are the first 60 bits. */
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++)
        bits = bits << 8 | md[i];
    return (double)(bits >> 4) / (double)UINT64_C(0xFFFFFFFFFFFFFFF);
}

void ld__big_segment_hash(const char *key, size_t len, char out[LD__BIG_SEGMENT_HASH_LEN + 1])
{
    SHA256_CTX c;
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256_Init(&c);
    if (len > 0)
        SHA256_Update(&c, key, len);
    SHA256_Final(md, &c);
    /* 32 bytes make 44 characters (the last one '='), then a NUL. */
    EVP_EncodeBlock((unsigned char *)out, md, (int)sizeof md);
}
