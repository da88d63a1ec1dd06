/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * chain: a tour of ld_future in one small program.
 *
 * A pretend lookup service answers after a delay (a libevent timer). We
 *   1. chain two steps with ld_future_then() and wait for the result;
 *   2. put a deadline on a slow lookup with ld_future_timeout(): the lookup is
 *      cancelled, and its producer hears about it through its cancel handler;
 *   3. cancel a lookup ourselves, which cancels the chain's input too.
 *
 * Build: make; run: ./examples/chain (exits 0 when every step behaved).
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>

#include <ldasync/ldasync.h>

/* ---- the producer: answers `key` after `ms` milliseconds --------------------- */

struct lookup {
    ld_future *result; /* the producer's own reference */
    struct event *timer;
    const char *key;
};

static void lookup_free(struct lookup *l)
{
    event_free(l->timer);
    ld_future_unref(l->result);
    free(l);
}

static void lookup_answer(evutil_socket_t fd, short what, void *arg)
{
    struct lookup *l = arg;
    (void)fd;
    (void)what;
    /* steals the JSON value */
    ld_future_fulfill_json(l->result, json_pack("{s:s, s:i}", "key", l->key, "version", 3));
    lookup_free(l);
}

/* Runs on the loop if somebody cancels the future: stop the work. */
static void lookup_cancelled(ld_future *f, void *arg)
{
    struct lookup *l = arg;
    (void)f;
    printf("  producer: lookup of \"%s\" cancelled, timer stopped\n", l->key);
    lookup_free(l);
}

static ld_future *lookup_start(struct event_base *base, const char *key, int ms)
{
    struct lookup *l = calloc(1, sizeof(*l));
    ld_future *f = ld_future_new(base);
    if (!l || !f)
        exit(1);
    l->key = key;
    l->result = ld_future_ref(f);
    l->timer = event_new(base, -1, 0, lookup_answer, l);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_add(l->timer, &tv);
    ld_future_set_cancel_handler(f, lookup_cancelled, l);
    return f; /* the caller's reference */
}

/* ---- the consumer ----------------------------------------------------------- */

/* A then step: runs (from the loop) only if the lookup succeeded. */
static void read_version(ld_future *in, ld_future *out, void *arg)
{
    (void)arg;
    json_t *item = ld_future_json(in); /* borrowed */
    ld_future_fulfill_int(out, json_integer_value(json_object_get(item, "version")));
}

int main(void)
{
    struct event_base *base = event_base_new();
    int ok = 1;

    /* 1. lookup -> read_version, then wait for the end of the chain */
    printf("1. chain\n");
    ld_future *version = ld_future_then(lookup_start(base, "dark-mode", 10), read_version, NULL);
    ld_future_wait(version);
    printf("  version = %lld\n", (long long)ld_future_int(version));
    ok &= ld_future_int(version) == 3;
    ld_future_unref(version);

    /* 2. a deadline: 20 ms for a lookup that takes 2 s */
    printf("2. timeout\n");
    struct timeval deadline = {0, 20000};
    ld_future *slow = ld_future_timeout(lookup_start(base, "slow-flag", 2000), &deadline);
    ld_future_wait(slow);
    printf("  result: %s (%s)\n", ld_err_name(ld_future_error(slow)),
           ld_future_error_message(slow));
    ok &= ld_future_error(slow) == LD_ETIMEDOUT;
    ld_future_unref(slow);

    /* 3. cancelling the end of a chain cancels the lookup it waits on */
    printf("3. cancel\n");
    ld_future *chain = ld_future_then(lookup_start(base, "unused", 2000), read_version, NULL);
    ld_future_cancel(chain);
    ld_future_wait(chain);
    printf("  result: %s\n", ld_err_name(ld_future_error(chain)));
    ok &= ld_future_error(chain) == LD_ECANCELED;
    ld_future_unref(chain);

    /* let the cancel handler of step 3 run, then everything is released */
    event_base_loop(base, EVLOOP_NONBLOCK);
    event_base_free(base);
    printf(ok ? "all steps behaved\n" : "unexpected result\n");
    return ok ? 0 : 1;
}
