/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * lib/net/backoff.c: reconnection delays with exponential backoff, jitter
 * and a reset after a good connection (net-internal.h).
 */
#include "net/net-internal.h"

void ld__backoff_init(struct ld__backoff *b, int64_t initial_ms, int64_t max_ms, int64_t reset_ms,
                      uint64_t seed)
{
    b->initial_ms = initial_ms > 0 ? initial_ms : 1000;
    b->max_ms = max_ms >= b->initial_ms ? max_ms : b->initial_ms;
    b->reset_ms = reset_ms > 0 ? reset_ms : 60000;
    b->good_since_ms = -1;
    b->attempts = 0;
    b->rng = seed ? seed : 0x9e3779b97f4a7c15ULL;
}

void ld__backoff_good(struct ld__backoff *b, int64_t now_ms)
{
    if (b->good_since_ms < 0)
        b->good_since_ms = now_ms;
}

/* xorshift64*: a uniform 64-bit value. */
static uint64_t next_random(struct ld__backoff *b)
{
    uint64_t x = b->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    b->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

int64_t ld__backoff_next(struct ld__backoff *b, int64_t now_ms)
{
    if (b->good_since_ms >= 0 && now_ms - b->good_since_ms >= b->reset_ms)
        b->attempts = 0;
    b->good_since_ms = -1;
    /* base = min(initial * 2^attempts, max), doubling no further than max */
    int64_t base = b->initial_ms;
    for (uint32_t i = 0; i < b->attempts && base < b->max_ms; i++)
        base = base > b->max_ms / 2 ? b->max_ms : base * 2;
    if (base > b->max_ms)
        base = b->max_ms;
    if (base < b->max_ms)
        b->attempts++; /* once at max, the count stays: nothing to overflow */
    /* less a random part of up to half */
    int64_t half = base / 2;
    int64_t jitter = half > 0 ? (int64_t)(next_random(b) % ((uint64_t)half + 1)) : 0;
    return base - jitter;
}
