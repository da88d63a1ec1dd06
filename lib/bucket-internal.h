/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the hashes of flag evaluation (LaunchDarkly semantics): the bucket
 * of a context for rollouts and weighted segment rules, and the key a big
 * segment store knows a context by. Never installed.
 *
 * Nothing here allocates (with the library's allocator or OpenSSL's), keeps
 * state or fails: every function may run on any thread at any time, also
 * concurrently (everything lives on the caller's stack).
 */
#ifndef LDASYNC_BUCKET_INTERNAL_H
#define LDASYNC_BUCKET_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* The size of the `buf` ld__bucket_text() needs: the longest integer,
 * "-9223372036854775808", is 20 characters and a NUL. */
#define LD__BUCKET_BUF 32

/* The bucketable form of a context attribute value `v`:
 * - a JSON string: its bytes as they are (*s points into `v`, *len is its
 *   length, which counts any NUL inside it);
 * - an integral JSON number: a jansson integer, or a real with no fractional
 *   part and |x| < 2^53, in decimal with no exponent, no ".0", "-" for
 *   negatives ("33333" for 33333 and 33333.0, "0" for -0.0), written to `buf`
 *   (at least LD__BUCKET_BUF bytes, NUL-terminated), *s = buf;
 * and returns true. Anything else (a non-integral or too large real, a bool,
 * an array, an object, null, NULL) returns false, meaning bucket 0 without
 * hashing, and leaves *s and *len alone. */
bool ld__bucket_text(const json_t *v, char *buf, const char **s, size_t *len);

/* The bucket in [0, 1] of `value` (value_len bytes) for the flag or segment
 * `key` (key_len bytes) with `salt` (salt_len bytes); or, when has_seed, for
 * `seed` (a rollout's seed; key and salt are then not read and may be NULL).
 * Seed 0 is a seed, as in Go (Node ignores it).
 *
 * The bucket is the first 15 hex digits (60 bits) of the SHA-1 of
 * "<key>.<salt>.<value>" (or "<seed in decimal>.<value>") as an integer,
 * divided by 0xFFFFFFFFFFFFFFF, in double (as Node and Python; Go rounds to
 * float32). A pointer may be NULL when its length is 0. Never allocates,
 * never fails. */
double ld__bucket(const char *key, size_t key_len, const char *salt, size_t salt_len, bool has_seed,
                  int64_t seed, const char *value, size_t value_len);

/* Length of a big segment store key: base64 of a SHA-256 (32 bytes). */
#define LD__BIG_SEGMENT_HASH_LEN 44

/* The key of a context in a big segment store: base64 (standard alphabet,
 * padded) of the SHA-256 of the context key (`len` bytes). Writes
 * LD__BIG_SEGMENT_HASH_LEN characters and a NUL to `out`. Never allocates,
 * never fails. */
void ld__big_segment_hash(const char *key, size_t len, char out[LD__BIG_SEGMENT_HASH_LEN + 1]);

#endif /* LDASYNC_BUCKET_INTERNAL_H */
