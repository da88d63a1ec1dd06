/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * The hashes of flag evaluation (lib/eval/bucket.c): buckets and big segment
 * store keys, against the vectors of the LaunchDarkly SDKs' tests.
 *
 * lib/eval/bucket.c is compiled into this program (Makefile.am): the shared
 * library does not export its ld__ functions. The composition of the hashed
 * string is checked against an oracle that hashes the expected string with
 * OpenSSL's EVP API (another way than the library's).
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "check_suites.h"
#include "eval/eval-internal.h"

/* |actual - expected| <= eps * |expected|, as Go's assert.InEpsilon. */
#define assert_in_epsilon(actual, expected, eps)                                              \
    do {                                                                                      \
        double a_ = (actual), e_ = (expected);                                                \
        ck_assert_msg(fabs(a_ - e_) <= (eps)*fabs(e_), "%s = %.17g, expected %.17g (eps %g)", \
                      #actual, a_, e_, (double)(eps));                                        \
    } while (0)

/* Go's tests compare with a relative epsilon of 1e-7 (Go buckets in float32). */
#define GO_EPSILON 1e-7
/* The values recomputed in double (Python's hashlib, as Node and Python do). */
#define DOUBLE_EPSILON 1e-15

/* The bucket of the string s, with SHA-1 through EVP_Digest (OpenSSL 1.1 and
 * 3). */
static double oracle(const char *s, size_t len)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    ck_assert_int_eq(EVP_Digest(s, len, md, &md_len, EVP_sha1(), NULL), 1);
    ck_assert_uint_eq(md_len, 20);
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++)
        bits = bits << 8 | md[i];
    return (double)(bits >> 4) / 1152921504606846975.0;
}

static double oracle_str(const char *s)
{
    return oracle(s, strlen(s));
}

/* ld__bucket without a seed, on NUL-terminated strings. */
static double bucket(const char *key, const char *salt, const char *value)
{
    return ld__bucket(key, strlen(key), salt, strlen(salt), false, 0, value, strlen(value));
}

/* ld__bucket with a seed (the key and salt are passed, and must not count). */
static double bucket_seed(const char *key, const char *salt, int64_t seed, const char *value)
{
    return ld__bucket(key, strlen(key), salt, strlen(salt), true, seed, value, strlen(value));
}

/* The bucket of a JSON attribute value for hashKey/saltyA, or -1 when it is
 * not bucketable. */
static double bucket_of_json(json_t *v)
{
    char buf[LD__BUCKET_BUF];
    const char *s = NULL;
    size_t len = 0;
    double b = -1;
    if (ld__bucket_text(v, buf, &s, &len))
        b = ld__bucket("hashKey", 7, "saltyA", 6, false, 0, s, len);
    json_decref(v);
    return b;
}

/* go-server-sdk-evaluation evaluator_bucketing_testdata_test.go (Go's
 * values) with the values recomputed in double (eval-spec 5.3). */
START_TEST(test_bucket_matches_go_vectors)
{
    static const struct {
        const char *value;
        bool has_seed;
        int64_t seed;
        double go, exact;
    } v[] = {
        {"userKeyA", false, 0, 0.42157587, 0.4215758743392494},
        {"userKeyB", false, 0, 0.6708485, 0.6708484965703435},
        {"userKeyC", false, 0, 0.10343106, 0.1034310617276969},
        {"33333", false, 0, 0.54771423, 0.5477142345861467},
        {"99999", false, 0, 0.7309658, 0.7309657969146673},
        {"userKeyA", true, 61, 0.09801207, 0.0980120652476667},
        {"userKeyB", true, 61, 0.14483777, 0.1448377737757314},
        {"userKeyC", true, 61, 0.9242641, 0.9242640945125551},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        double b = ld__bucket("hashKey", 7, "saltyA", 6, v[i].has_seed, v[i].seed, v[i].value,
                              strlen(v[i].value));
        assert_in_epsilon(b, v[i].go, GO_EPSILON);
        assert_in_epsilon(b, v[i].exact, DOUBLE_EPSILON);
    }
}
END_TEST

/* Go's TestVariationIndexForUser: weights 60000 / 40000 with hashKey/saltyA
 * put userKeyA and userKeyC in the first variation, userKeyB in the second. */
START_TEST(test_bucket_splits_go_rollout_as_go_does)
{
    ck_assert(bucket("hashKey", "saltyA", "userKeyA") < 0.6);
    ck_assert(bucket("hashKey", "saltyA", "userKeyB") >= 0.6);
    ck_assert(bucket("hashKey", "saltyA", "userKeyC") < 0.6);
}
END_TEST

/* js-core Bucketer.test.ts: the strings that are hashed, for flag-key/salty. */
START_TEST(test_bucket_hashes_node_input_strings)
{
    static const struct {
        const char *value;
        bool has_seed;
        int64_t seed;
        const char *hashed;
        double exact;
    } v[] = {
        {"is-key", false, 0, "flag-key.salty.is-key", 0.1721203751270051},
        {"is-key", true, 82, "82.is-key", 0.221865446692997},
        {"17", false, 0, "flag-key.salty.17", 0.00012492028410765812},
        {"user-key", false, 0, "flag-key.salty.user-key", 0.40585750716918273},
        {"org-key", false, 0, "flag-key.salty.org-key", 0.9226292052432392},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        double b = ld__bucket("flag-key", 8, "salty", 5, v[i].has_seed, v[i].seed, v[i].value,
                              strlen(v[i].value));
        ck_assert_msg(b == oracle_str(v[i].hashed), "%s: %.17g, hash of \"%s\" is %.17g",
                      v[i].value, b, v[i].hashed, oracle_str(v[i].hashed));
        assert_in_epsilon(b, v[i].exact, DOUBLE_EPSILON);
    }
    /* Node Evaluator.bucketing.test.ts's flag, without its seed. */
    assert_in_epsilon(bucket("flagkey", "salt", "userKeyA"), 0.3726967017490113, DOUBLE_EPSILON);
}
END_TEST

/* The integer attribute 17 hashes as "17", like the string. */
START_TEST(test_bucket_of_integer_attribute_hashes_its_decimal_text)
{
    char buf[LD__BUCKET_BUF];
    const char *s = NULL;
    size_t len = 0;
    json_t *v = json_integer(17);
    ck_assert(ld__bucket_text(v, buf, &s, &len));
    ck_assert(ld__bucket("flag-key", 8, "salty", 5, false, 0, s, len) ==
              oracle_str("flag-key.salty.17"));
    json_decref(v);
}
END_TEST

/* Seed 0 is a seed, as in Go ("0.userKeyA"); Node would ignore it. */
START_TEST(test_bucket_seed_zero_is_a_seed)
{
    double zero = bucket_seed("hashKey", "saltyA", 0, "userKeyA");
    ck_assert(zero == oracle_str("0.userKeyA"));
    assert_in_epsilon(zero, 0.6156251042514794, DOUBLE_EPSILON);
    ck_assert(zero != bucket("hashKey", "saltyA", "userKeyA"));
    ck_assert(bucket_seed("hashKey", "saltyA", -5, "userKeyA") == oracle_str("-5.userKeyA"));
    ck_assert(bucket_seed("hashKey", "saltyA", INT64_MIN, "v") ==
              oracle_str("-9223372036854775808.v"));
    ck_assert(bucket_seed("hashKey", "saltyA", INT64_MAX, "v") ==
              oracle_str("9223372036854775807.v"));
}
END_TEST

/* With a seed, the key and the salt are not part of the hash (and may be
 * NULL). */
START_TEST(test_bucket_with_seed_ignores_key_and_salt)
{
    double b = bucket_seed("hashKey", "saltyA", 61, "userKeyA");
    ck_assert(bucket_seed("other", "", 61, "userKeyA") == b);
    ck_assert(ld__bucket(NULL, 0, NULL, 0, true, 61, "userKeyA", 8) == b);
}
END_TEST

START_TEST(test_bucket_with_empty_salt_keeps_both_dots)
{
    double b = bucket("hashKey", "", "userKeyA");
    ck_assert(b == oracle_str("hashKey..userKeyA"));
    assert_in_epsilon(b, 0.008705020130580632, DOUBLE_EPSILON);
    ck_assert(ld__bucket("hashKey", 7, NULL, 0, false, 0, "userKeyA", 8) == b);
    /* An empty value too. */
    ck_assert(ld__bucket("hashKey", 7, "saltyA", 6, false, 0, NULL, 0) ==
              oracle_str("hashKey.saltyA."));
}
END_TEST

/* The lengths count, not NULs: "a.b.c" split in different places is one
 * string, and a value with a NUL inside hashes all its bytes. */
START_TEST(test_bucket_hashes_key_salt_value_joined_by_dots)
{
    ck_assert(bucket("a.b", "c", "d") == bucket("a", "b.c", "d"));
    ck_assert(bucket("a", "b", "c.d") == bucket("a", "b.c", "d"));
    ck_assert(bucket("a", "b", "c.d") == oracle_str("a.b.c.d"));
    ck_assert(ld__bucket("k", 1, "s", 1, false, 0, "x\0y", 3) == oracle("k.s.x\0y", 7));
    ck_assert(ld__bucket("keyX", 3, "saltX", 4, false, 0, "valueX", 5) ==
              oracle_str("key.salt.value"));
}
END_TEST

START_TEST(test_bucket_of_long_inputs)
{
    size_t n = 10000;
    char *key = malloc(n + 1), *value = malloc(n + 1), *joined = malloc(2 * n + 4);
    ck_assert_ptr_nonnull(key);
    ck_assert_ptr_nonnull(value);
    ck_assert_ptr_nonnull(joined);
    memset(key, 'k', n);
    key[n] = '\0';
    memset(value, 'v', n);
    value[n] = '\0';
    snprintf(joined, 2 * n + 4, "%s.s.%s", key, value);
    double b = bucket(key, "s", value);
    ck_assert(b == oracle_str(joined));
    assert_in_epsilon(b, 0.25490491103548807, DOUBLE_EPSILON);
    snprintf(joined, 2 * n + 4, "7.%s", value);
    ck_assert(bucket_seed(key, "s", 7, value) == oracle_str(joined));

    char out[LD__BIG_SEGMENT_HASH_LEN + 1];
    ld__big_segment_hash(key, n, out);
    ck_assert_str_eq(out, "xIb2P8FtytOc5dDiUDvb2YQuJ7uxMqux3i1VqoeSADY=");
    free(key);
    free(value);
    free(joined);
}
END_TEST

/* Keys, salts and values of lengths around the 64-byte SHA-1 block and the
 * 256-byte buffer lib/eval/bucket.c gathers the string in. */
START_TEST(test_bucket_of_inputs_around_block_and_buffer_sizes)
{
    static const size_t lens[] = {0,   1,   55,  63,  64,  65,  127, 128, 200,
                                  253, 254, 255, 256, 257, 300, 511, 600};
    static char key[601], salt[601], value[601], joined[1805];
    memset(key, 'k', sizeof(key) - 1);
    memset(salt, 's', sizeof(salt) - 1);
    memset(value, 'v', sizeof(value) - 1);
    size_t n = sizeof(lens) / sizeof(lens[0]);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            size_t kl = lens[i], sl = lens[(i + j) % n], vl = lens[j];
            int len = snprintf(joined, sizeof(joined), "%.*s.%.*s.%.*s", (int)kl, key, (int)sl,
                               salt, (int)vl, value);
            ck_assert_msg(ld__bucket(key, kl, salt, sl, false, 0, value, vl) ==
                              oracle(joined, (size_t)len),
                          "key %zu, salt %zu, value %zu bytes", kl, sl, vl);
            len = snprintf(joined, sizeof(joined), "-1234567.%.*s", (int)vl, value);
            ck_assert_msg(ld__bucket(NULL, 0, NULL, 0, true, -1234567, value, vl) ==
                              oracle(joined, (size_t)len),
                          "seed, value %zu bytes", vl);
        }
}
END_TEST

/* UTF-8 bytes are hashed as they are. */
START_TEST(test_bucket_of_utf8_inputs)
{
    double b = bucket("flåg-键", "sälty", "ключ-🔑");
    ck_assert(b == oracle_str("flåg-键.sälty.ключ-🔑"));
    assert_in_epsilon(b, 0.8350874389851745, DOUBLE_EPSILON);
}
END_TEST

/* Many inputs: always in [0, 1] and equal to the oracle's bucket. */
START_TEST(test_bucket_agrees_with_oracle_and_stays_in_range)
{
    char key[40], value[40], joined[128];
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "flag-%d", i * 7919 % 1000);
        snprintf(value, sizeof(value), "user-%08x", (unsigned)i * 2654435761u);
        snprintf(joined, sizeof(joined), "%s.salt%d.%s", key, i % 13, value);
        char salt[16];
        snprintf(salt, sizeof(salt), "salt%d", i % 13);
        double b = bucket(key, salt, value);
        ck_assert(b >= 0 && b <= 1);
        ck_assert_msg(b == oracle_str(joined), "%s", joined);
    }
}
END_TEST

/* Strings are bucketable as they are: the text is the string's own bytes. */
START_TEST(test_bucket_text_of_string_is_the_string)
{
    char buf[LD__BUCKET_BUF];
    const char *s = NULL;
    size_t len = 0;
    json_t *v = json_string("userKeyA");
    ck_assert(ld__bucket_text(v, buf, &s, &len));
    ck_assert_ptr_eq(s, json_string_value(v));
    ck_assert_uint_eq(len, 8);
    json_decref(v);

    v = json_stringn("a\0b", 3);
    ck_assert(ld__bucket_text(v, buf, &s, &len));
    ck_assert_uint_eq(len, 3);
    ck_assert_int_eq(memcmp(s, "a\0b", 3), 0);
    json_decref(v);

    v = json_string("");
    ck_assert(ld__bucket_text(v, buf, &s, &len));
    ck_assert_uint_eq(len, 0);
    json_decref(v);
}
END_TEST

static void assert_text(json_t *v, const char *expected)
{
    char buf[LD__BUCKET_BUF];
    const char *s = NULL;
    size_t len = 0;
    ck_assert_msg(ld__bucket_text(v, buf, &s, &len), "not bucketable, expected \"%s\"", expected);
    ck_assert_ptr_eq(s, buf);
    ck_assert_uint_eq(len, strlen(expected));
    ck_assert_str_eq(s, expected);
    json_decref(v);
}

/* Integral numbers: decimal, no exponent, no ".0", "-" for negatives. */
START_TEST(test_bucket_text_of_integral_numbers)
{
    assert_text(json_integer(33333), "33333");
    assert_text(json_real(33333.0), "33333");
    assert_text(json_integer(0), "0");
    assert_text(json_real(0.0), "0");
    assert_text(json_real(-0.0), "0");
    assert_text(json_integer(-42), "-42");
    assert_text(json_real(-42.0), "-42");
    assert_text(json_integer(INT64_MIN), "-9223372036854775808");
    assert_text(json_integer(INT64_MAX), "9223372036854775807");
    assert_text(json_real(9007199254740991.0), "9007199254740991");
    assert_text(json_real(-9007199254740991.0), "-9007199254740991");
    assert_text(json_real(1e15), "1000000000000000");
    /* Parsed: jansson keeps integers beyond 2^53 exact. */
    assert_text(json_loads("9007199254740993", JSON_DECODE_ANY, NULL), "9007199254740993");
    assert_text(json_loads("33333.0", JSON_DECODE_ANY, NULL), "33333");
    assert_text(json_loads("3.3333e4", JSON_DECODE_ANY, NULL), "33333");
}
END_TEST

/* Go TestBucketUserByFloatAttrNotAllowed and Node's non-bucketable values:
 * false, and *s, *len untouched. Reals of magnitude 2^53 or more are not
 * bucketable (not exact). */
START_TEST(test_bucket_text_rejects_non_integral_and_non_scalar_values)
{
    json_t *v[] = {
        json_real(999.999),
        json_real(0.5),
        json_real(-33333.5),
        json_real(9007199254740992.0),
        json_real(-9007199254740992.0),
        json_real(1e300),
        json_true(),
        json_false(),
        json_array(),
        json_object(),
        json_null(),
        json_loads("[\"userKeyA\"]", 0, NULL),
        NULL,
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char buf[LD__BUCKET_BUF];
        const char *s = "untouched";
        size_t len = 12345;
        ck_assert_msg(!ld__bucket_text(v[i], buf, &s, &len), "value %zu is bucketable", i);
        ck_assert_str_eq(s, "untouched");
        ck_assert_uint_eq(len, 12345);
        json_decref(v[i]);
    }
}
END_TEST

/* The attribute 33333 buckets the same as a string, an integer or 33333.0;
 * 999.999 is not bucketable (Go's vectors). */
START_TEST(test_bucket_of_json_attribute_values)
{
    assert_in_epsilon(bucket_of_json(json_string("33333")), 0.54771423, GO_EPSILON);
    assert_in_epsilon(bucket_of_json(json_integer(33333)), 0.54771423, GO_EPSILON);
    assert_in_epsilon(bucket_of_json(json_real(33333.0)), 0.54771423, GO_EPSILON);
    assert_in_epsilon(bucket_of_json(json_integer(99999)), 0.7309658, GO_EPSILON);
    ck_assert(bucket_of_json(json_real(999.999)) == -1);
    ck_assert(bucket_of_json(json_integer(-42)) == oracle_str("hashKey.saltyA.-42"));
    ck_assert(bucket_of_json(json_integer(INT64_MIN)) ==
              oracle_str("hashKey.saltyA.-9223372036854775808"));
    ck_assert(bucket_of_json(json_real(9007199254740991.0)) ==
              oracle_str("hashKey.saltyA.9007199254740991"));
}
END_TEST

/* The big segment store key: base64 of the SHA-256 of the context key
 * (eval-spec 6, computed with Python's hashlib). */
START_TEST(test_big_segment_hash_vectors)
{
    static const struct {
        const char *key, *hash;
    } v[] = {
        {"userkey", "72cBpXPyn4N6TqqlS8Tti37jEcoNhFzL9ZdG1jXkILE="},
        {"test-user-key", "07L9gnQBd1HMlbO1WXOukJUXFLwXVfCKrQWfYtZlU70="},
        {"", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="},
        {"ключ-🔑", "gXKBrNcBJEH4ZeOuDAU18x/AWMvBTIlJKbIIZYjt6fM="},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char out[LD__BIG_SEGMENT_HASH_LEN + 2];
        memset(out, '#', sizeof(out));
        ld__big_segment_hash(v[i].key, strlen(v[i].key), out);
        ck_assert_int_eq(out[LD__BIG_SEGMENT_HASH_LEN], '\0');
        ck_assert_int_eq(out[LD__BIG_SEGMENT_HASH_LEN + 1], '#'); /* nothing past the NUL */
        ck_assert_str_eq(out, v[i].hash);
    }
    char out[LD__BIG_SEGMENT_HASH_LEN + 1];
    ld__big_segment_hash(NULL, 0, out);
    ck_assert_str_eq(out, "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
}
END_TEST

/* Two threads bucketing at once get the same answers as one. */
static void *bucket_many(void *arg)
{
    int *wrong = arg;
    for (int i = 0; i < 20000; i++) {
        if (bucket("hashKey", "saltyA", "userKeyA") != 0.4215758743392494 ||
            bucket_seed("hashKey", "saltyA", 61, "userKeyB") != 0.1448377737757314)
            ++*wrong;
        char out[LD__BIG_SEGMENT_HASH_LEN + 1];
        ld__big_segment_hash("userkey", 7, out);
        if (strcmp(out, "72cBpXPyn4N6TqqlS8Tti37jEcoNhFzL9ZdG1jXkILE=") != 0)
            ++*wrong;
    }
    return NULL;
}

START_TEST(test_bucket_on_two_threads_at_once)
{
    pthread_t t;
    int wrong_there = 0, wrong_here = 0;
    ck_assert_int_eq(pthread_create(&t, NULL, bucket_many, &wrong_there), 0);
    bucket_many(&wrong_here);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(wrong_there, 0);
    ck_assert_int_eq(wrong_here, 0);
}
END_TEST

/* The hashes make no allocation through OpenSSL's allocator (nor through the
 * library's: they have no access to it). OpenSSL lets a program count its
 * allocations only before its first one: in a forked test (the default) that
 * is always the case; under CK_FORK=no, if something before used OpenSSL,
 * this test cannot count and says so. */
static long openssl_allocations;

static void *counting_malloc(size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    openssl_allocations++;
    return malloc(n);
}

static void *counting_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    openssl_allocations++;
    return realloc(p, n);
}

static void counting_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
    free(p);
}

START_TEST(test_bucket_and_big_segment_hash_do_not_allocate)
{
    if (!CRYPTO_set_mem_functions(counting_malloc, counting_realloc, counting_free)) {
        fprintf(stderr, "%s: OpenSSL already allocated in this process, allocations not counted\n",
                __func__);
        return;
    }
    /* Proof that the counting works: EVP_Digest allocates. */
    (void)oracle_str("x");
    ck_assert_int_gt(openssl_allocations, 0);
    long before = openssl_allocations;
    double sum = 0;
    char out[LD__BIG_SEGMENT_HASH_LEN + 1];
    for (int i = 0; i < 100; i++) {
        sum += bucket("hashKey", "saltyA", "userKeyA");
        sum += bucket_seed("hashKey", "saltyA", 61, "userKeyA");
        ld__big_segment_hash("userkey", 7, out);
    }
    ck_assert(sum > 0);
    ck_assert_int_eq(openssl_allocations, before);
}
END_TEST

Suite *ld_suite_bucket(void)
{
    Suite *s = suite_create("bucket");
    TCase *tc = tcase_create("bucket");
    /* First: under CK_FORK=no it can count only if OpenSSL has not allocated yet. */
    tcase_add_test(tc, test_bucket_and_big_segment_hash_do_not_allocate);
    tcase_add_test(tc, test_bucket_matches_go_vectors);
    tcase_add_test(tc, test_bucket_splits_go_rollout_as_go_does);
    tcase_add_test(tc, test_bucket_hashes_node_input_strings);
    tcase_add_test(tc, test_bucket_of_integer_attribute_hashes_its_decimal_text);
    tcase_add_test(tc, test_bucket_seed_zero_is_a_seed);
    tcase_add_test(tc, test_bucket_with_seed_ignores_key_and_salt);
    tcase_add_test(tc, test_bucket_with_empty_salt_keeps_both_dots);
    tcase_add_test(tc, test_bucket_hashes_key_salt_value_joined_by_dots);
    tcase_add_test(tc, test_bucket_of_long_inputs);
    tcase_add_test(tc, test_bucket_of_inputs_around_block_and_buffer_sizes);
    tcase_add_test(tc, test_bucket_of_utf8_inputs);
    tcase_add_test(tc, test_bucket_agrees_with_oracle_and_stays_in_range);
    tcase_add_test(tc, test_bucket_text_of_string_is_the_string);
    tcase_add_test(tc, test_bucket_text_of_integral_numbers);
    tcase_add_test(tc, test_bucket_text_rejects_non_integral_and_non_scalar_values);
    tcase_add_test(tc, test_bucket_of_json_attribute_values);
    tcase_add_test(tc, test_big_segment_hash_vectors);
    tcase_add_test(tc, test_bucket_on_two_threads_at_once);
    suite_add_tcase(s, tc);
    return s;
}
