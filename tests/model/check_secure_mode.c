/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The secure mode hash (ld_secure_mode_hash): LaunchDarkly's vector, the
 * fully-qualified keys it hashes, OpenSSL's HMAC() as an oracle, errors, no
 * allocation.
 *
 * The expected values other than LaunchDarkly's were made with the openssl
 * command line, independently of the library:
 *   printf '%s' 'MESSAGE' | openssl dgst -sha256 -hmac 'SDK KEY'
 * with MESSAGE the fully-qualified key the comment beside each one names.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "check_util.h"

/* The context of JSON text `text`; fails the test if it is refused. */
static ld_context *ctx_of(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    ck_assert_msg(j != NULL, "bad test JSON %s: %s", text, err.text);
    const char *why = NULL;
    ld_context *c = ld_context_from_json(j, &why);
    json_decref(j);
    ck_assert_msg(c != NULL, "%s refused: %s", text, why ? why : "(no reason)");
    return c;
}

/* Asserts that the hash of the context `text` with `sdk_key` is `want`. */
static void expect_hash(const char *sdk_key, const char *text, const char *want)
{
    ld_context *c = ctx_of(text);
    char out[65];
    memset(out, 'X', sizeof out);
    ck_assert_int_eq(ld_secure_mode_hash(sdk_key, c, out), 0);
    ck_assert_msg(strcmp(out, want) == 0, "%s with key \"%s\": %s, not %s", text, sdk_key, out,
                  want);
    ld_context_unref(c);
}

/* OpenSSL's HMAC() of `msg` with `key`, in lowercase hex. */
static void oracle(const char *key, const char *msg, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    ck_assert_ptr_nonnull(HMAC(EVP_sha256(), key, (int)strlen(key), (const unsigned char *)msg,
                               strlen(msg), md, &len));
    ck_assert_uint_eq(len, 32);
    for (unsigned int i = 0; i < len; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* LaunchDarkly's SDKs test secure mode with this vector. */
START_TEST(test_secure_mode_hash_of_user_is_launchdarkly_vector)
{
    static const char want[] = "aa747c502a898200f9e4fa21bac68136f886a0e27aec70ba06daf2e2a5cb5597";
    expect_hash("secret", "{\"kind\": \"user\", \"key\": \"Message\"}", want);
    expect_hash("secret", "{\"key\": \"Message\"}", want); /* old-style user */
    expect_hash("secret", "{\"kind\": \"multi\", \"user\": {\"key\": \"Message\"}}", want);

    ld_context_builder *b = ld_context_builder_new(NULL, "Message");
    ld_context *c = ld_context_builder_build(b, NULL);
    ck_assert_ptr_nonnull(c);
    char out[65];
    ck_assert_int_eq(ld_secure_mode_hash("secret", c, out), 0);
    ck_assert_str_eq(out, want);
    ld_context_unref(c);
    ld_context_builder_free(b);
}
END_TEST

START_TEST(test_secure_mode_hash_of_other_kind_hashes_kind_and_key)
{
    /* org:orgKey */
    expect_hash("secret", "{\"kind\": \"org\", \"key\": \"orgKey\"}",
                "2899cb0bc6e0232bca6badf337da704ca92155b226958179c5025c7e29760c0b");
    /* org:Message: not the user's hash of the same key */
    expect_hash("secret", "{\"kind\": \"org\", \"key\": \"Message\"}",
                "a045e65c6d23bda4559ed4f2371a2508ce63016ceff58b00aa07b435e2bfedaa");
}
END_TEST

START_TEST(test_secure_mode_hash_escapes_colon_and_percent_in_keys)
{
    /* org:a%3Ab%25c */
    expect_hash("secret", "{\"kind\": \"org\", \"key\": \"a:b%c\"}",
                "9577970dd342e0646be9cbd41eccde3380f83c1d0451994ed5da4a33fdadbb73");
    /* a user's key alone, not escaped: a:b% */
    expect_hash("secret", "{\"kind\": \"user\", \"key\": \"a:b%\"}",
                "108ecf3e099a7756ae854d5227f9b895a64c9e1a9486b8555cf2777ab209142e");
}
END_TEST

START_TEST(test_secure_mode_hash_of_multi_sorts_kinds)
{
    /* a:b%3A:org:o%25:user:u */
    static const char want[] = "e268163651a2b5b2de6334f3bf41c456ecfb880298e76362ba399195ceb12e69";
    expect_hash("secret",
                "{\"kind\": \"multi\", \"user\": {\"key\": \"u\"}, \"org\": {\"key\": \"o%\"}, "
                "\"a\": {\"key\": \"b:\"}}",
                want);
    expect_hash("secret",
                "{\"kind\": \"multi\", \"org\": {\"key\": \"o%\"}, \"a\": {\"key\": \"b:\"}, "
                "\"user\": {\"key\": \"u\"}}",
                want);

    /* made by ld_context_multi() from parts out of order */
    ld_context *u = ctx_of("{\"key\": \"u\"}");
    ld_context *o = ctx_of("{\"kind\": \"org\", \"key\": \"o%\"}");
    ld_context *a = ctx_of("{\"kind\": \"a\", \"key\": \"b:\"}");
    const ld_context *parts[] = {u, o, a};
    ld_context *m = ld_context_multi(parts, 3, NULL);
    ck_assert_ptr_nonnull(m);
    char out[65];
    ck_assert_int_eq(ld_secure_mode_hash("secret", m, out), 0);
    ck_assert_str_eq(out, want);
    ld_context_unref(m);
    ld_context_unref(a);
    ld_context_unref(o);
    ld_context_unref(u);
}
END_TEST

START_TEST(test_secure_mode_hash_with_empty_sdk_key)
{
    /* Message, with the empty key */
    expect_hash("", "{\"key\": \"Message\"}",
                "6a5534c9374987626f4ea96eb5a242989a5667b17599b368b6b5c82b04a78a5a");
    /* org:o, with the empty key */
    expect_hash("", "{\"kind\": \"org\", \"key\": \"o\"}",
                "499905f927de4532e166df1a6298c88e14d185ceb7e734f0dc6575de61d82a8b");
}
END_TEST

START_TEST(test_secure_mode_hash_of_old_style_user_with_empty_key)
{
    /* the empty message */
    expect_hash("secret", "{\"key\": \"\"}",
                "f9e66e179b6747ae54108f82f8ade8b3c25d76fd30afde6c395822c530196169");
}
END_TEST

START_TEST(test_secure_mode_hash_with_sdk_key_longer_than_a_block)
{
    /* Message, with 100 'k's (HMAC hashes a key longer than 64 bytes first) */
    char key[101];
    memset(key, 'k', 100);
    key[100] = '\0';
    expect_hash(key, "{\"key\": \"Message\"}",
                "a69d8e11683e55bb37792bf63ffa2aec7a0e22c45d5cbe3c6b2fa2ea15d31e52");
    /* device:d%3A1, with an SDK key of the usual shape */
    expect_hash("sdk-00000000-0000-0000-0000-000000000000",
                "{\"kind\": \"device\", \"key\": \"d:1\"}",
                "65d40862152f32c0190654d359d3fc67e7582e563d8b658cbe03885f66423b3d");
}
END_TEST

/* Every SDK key length around the block size (64), and keys around it, agree
 * with OpenSSL's HMAC(). */
START_TEST(test_secure_mode_hash_agrees_with_openssl_hmac)
{
    char key[200], ckey[200], json[300];
    for (size_t klen = 0; klen < 140; klen++) {
        for (size_t i = 0; i < klen; i++)
            key[i] = (char)('!' + (i * 7 + klen) % 90);
        key[klen] = '\0';
        for (size_t clen = 1; clen < 140; clen += 13) {
            for (size_t i = 0; i < clen; i++)
                ckey[i] = (char)('a' + (i + clen) % 26);
            ckey[clen] = '\0';
            bool user = clen % 2 == 0;
            snprintf(json, sizeof json, "{\"kind\": \"%s\", \"key\": \"%s\"}",
                     user ? "user" : "org", ckey);
            ld_context *c = ctx_of(json);
            char want[65], got[65];
            oracle(key, ld_context_fully_qualified_key(c), want);
            ck_assert_int_eq(ld_secure_mode_hash(key, c, got), 0);
            ck_assert_msg(strcmp(got, want) == 0, "key length %zu, %s: %s, not %s", klen, json, got,
                          want);
            ld_context_unref(c);
        }
    }
}
END_TEST

START_TEST(test_secure_mode_hash_refuses_null_arguments)
{
    ld_context *c = ctx_of("{\"key\": \"Message\"}");
    char out[65];
    memset(out, 'X', sizeof out);
    ck_assert_int_eq(ld_secure_mode_hash(NULL, c, out), LD_EINVAL);
    ck_assert_int_eq(ld_secure_mode_hash("secret", NULL, out), LD_EINVAL);
    ck_assert_int_eq(ld_secure_mode_hash("secret", c, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_secure_mode_hash(NULL, NULL, NULL), LD_EINVAL);
    for (size_t i = 0; i < sizeof out; i++)
        ck_assert_int_eq(out[i], 'X'); /* unchanged */
    ld_context_unref(c);
}
END_TEST

/* An invalid context is never made: what stands for it is NULL. */
START_TEST(test_secure_mode_hash_of_invalid_context_is_einval)
{
    static const char *const invalid[] = {
        "{\"kind\": \"org\", \"key\": \"\"}",
        "{\"kind\": \"multi\", \"org\": {\"key\": \"a\"}, \"user\": {\"key\": 1}}",
        "{\"kind\": \"kind\", \"key\": \"a\"}",
    };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        json_t *j = json_loads(invalid[i], 0, NULL);
        ck_assert_ptr_nonnull(j);
        ld_context *c = ld_context_from_json(j, NULL);
        json_decref(j);
        ck_assert_ptr_null(c);
        char out[65] = "unchanged";
        ck_assert_int_eq(ld_secure_mode_hash("secret", c, out), LD_EINVAL);
        ck_assert_str_eq(out, "unchanged");
    }
}
END_TEST

/* No allocation: neither through the library's hooks nor through OpenSSL's
 * allocator. OpenSSL lets a program count its allocations only before its
 * first one: in a forked test (the default) that is always the case; under
 * CK_FORK=no, if something before used OpenSSL, that half is skipped (and
 * said). */
static long lib_allocations, openssl_allocations;

static void *lib_malloc(size_t n)
{
    lib_allocations++;
    return malloc(n);
}

static void *lib_realloc(void *p, size_t n)
{
    lib_allocations++;
    return realloc(p, n);
}

static void *ossl_malloc(size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    openssl_allocations++;
    return malloc(n);
}

static void *ossl_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    openssl_allocations++;
    return realloc(p, n);
}

static void ossl_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
    free(p);
}

START_TEST(test_secure_mode_hash_does_not_allocate)
{
    bool count_openssl = CRYPTO_set_mem_functions(ossl_malloc, ossl_realloc, ossl_free) != 0;
    if (!count_openssl)
        fprintf(stderr,
                "%s: OpenSSL already allocated in this process, its allocations not counted\n",
                __func__);
    ld_context *c[2] = {
        ctx_of("{\"key\": \"Message\"}"),
        ctx_of("{\"kind\": \"multi\", \"user\": {\"key\": \"u\"}, \"org\": {\"key\": \"o:%\"}}"),
    };
    char long_key[100];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    const char *keys[] = {"", "secret", long_key};

    ck_assert_int_eq(ld_set_alloc_funcs(lib_malloc, lib_realloc, free), 0);
    long before = openssl_allocations;
    char out[65];
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < 2; i++)
            ck_assert_int_eq(ld_secure_mode_hash(keys[k], c[i], out), 0);
    long lib = lib_allocations, ossl = openssl_allocations - before;
    ck_assert_int_eq(ld_set_alloc_funcs(NULL, NULL, NULL), 0);
    ck_assert_int_eq(lib, 0);
    if (count_openssl) {
        ck_assert_int_eq(ossl, 0);
        /* Proof that the counting works: HMAC() allocates. */
        char want[65];
        oracle("secret", "Message", want);
        ck_assert_int_gt(openssl_allocations, before);
    }
    ld_context_unref(c[0]);
    ld_context_unref(c[1]);
}
END_TEST

/* Any thread: two threads hash the same context at once. */
struct hash_many {
    const ld_context *ctx;
    int wrong;
};

static void *hash_many(void *arg)
{
    struct hash_many *h = arg;
    char out[65];
    for (int i = 0; i < 2000; i++)
        if (ld_secure_mode_hash("secret", h->ctx, out) != 0 ||
            strcmp(out, "aa747c502a898200f9e4fa21bac68136f886a0e27aec70ba06daf2e2a5cb5597") != 0)
            h->wrong++;
    return NULL;
}

START_TEST(test_secure_mode_hash_on_two_threads_at_once)
{
    ld_context *c = ctx_of("{\"key\": \"Message\"}");
    struct hash_many there = {c, 0}, here = {c, 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, hash_many, &there), 0);
    hash_many(&here);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(there.wrong, 0);
    ck_assert_int_eq(here.wrong, 0);
    ld_context_unref(c);
}
END_TEST

Suite *ld_suite_secure_mode(void)
{
    Suite *s = suite_create("secure_mode");
    TCase *tc = tcase_create("secure_mode");
    /* First: under CK_FORK=no it can count OpenSSL's allocations only if
     * OpenSSL has not allocated yet. */
    tcase_add_test(tc, test_secure_mode_hash_does_not_allocate);
    tcase_add_test(tc, test_secure_mode_hash_of_user_is_launchdarkly_vector);
    tcase_add_test(tc, test_secure_mode_hash_of_other_kind_hashes_kind_and_key);
    tcase_add_test(tc, test_secure_mode_hash_escapes_colon_and_percent_in_keys);
    tcase_add_test(tc, test_secure_mode_hash_of_multi_sorts_kinds);
    tcase_add_test(tc, test_secure_mode_hash_with_empty_sdk_key);
    tcase_add_test(tc, test_secure_mode_hash_of_old_style_user_with_empty_key);
    tcase_add_test(tc, test_secure_mode_hash_with_sdk_key_longer_than_a_block);
    tcase_add_test(tc, test_secure_mode_hash_agrees_with_openssl_hmac);
    tcase_add_test(tc, test_secure_mode_hash_refuses_null_arguments);
    tcase_add_test(tc, test_secure_mode_hash_of_invalid_context_is_einval);
    tcase_add_test(tc, test_secure_mode_hash_on_two_threads_at_once);
    suite_add_tcase(s, tc);
    return s;
}
