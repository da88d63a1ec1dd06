/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* Helpers shared by the Check suites: a base per test, guarded loops. */
#ifndef LDASYNC_CHECK_UTIL_H
#define LDASYNC_CHECK_UTIL_H

#include <check.h>
#include <event2/event.h>
#include <ldasync/ldasync.h>

/* 1 in ASan/TSan builds, where malloc is the sanitizer's. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LD_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LD_TEST_SANITIZED 1
#endif
#endif
#ifndef LD_TEST_SANITIZED
#define LD_TEST_SANITIZED 0
#endif

/* The base of the running test (made by ld_test_setup). */
extern struct event_base *ld_test_base;

/* Checked fixture: a fresh base plus a guard timer that fails the test after
 * LD_TEST_GUARD_SEC seconds (scaled as Check scales its timeouts: see
 * check_util.c), so loop-driven tests end under CK_FORK=no too. */
void ld_test_setup(void);
void ld_test_teardown(void);

#define LD_TEST_GUARD_SEC 60

/* Runs the loop without blocking until nothing is active, so every callback
 * that is ready has run. Fails the test if that takes over 100000 passes. */
void ld_test_flush(void);

/* This process's resident memory in kB (VmRSS), -1 if unknown. */
long ld_test_rss_kb(void);

/* The descriptors this process has open (-1 if unknown). */
int ld_test_count_fds(void);

struct evhttp;
/* Binds `http` (asserted not NULL) to a free port of 127.0.0.1.
 * @return the port. */
int ld_test_http_listen(struct evhttp *http);

/* Waits for f (ld_future_wait) and asserts it returned 0. */
void ld_test_wait(ld_future *f);

/* Asserts that f is not NULL, waits for it and returns it. */
ld_future *ld_test_done(ld_future *f);

/* ld_test_done(), and asserts that f was fulfilled (the message says the
 * error otherwise). */
ld_future *ld_test_fulfilled(ld_future *f);

/* ld_test_fulfilled(), then releases f. */
void ld_test_await_ok(ld_future *f);

/* ld_test_fulfilled(), then releases f and returns its bool. */
bool ld_test_await_bool(ld_future *f);

/* ld_test_done(), asserts that f was rejected with `code` and, unless
 * `in_message` is NULL, that its message contains `in_message`; releases f. */
void ld_test_expect_error(ld_future *f, int code, const char *in_message);

/* The flag fixture (docs/design.md, "The testing kit"): a new reference
 * to a flag of LaunchDarkly's shape with `key` and `version`. */
json_t *ld_test_feature(const char *key, int version);

/* A callback that counts its calls in *(int *)arg. */
void ld_test_count_cb(ld_future *f, void *arg);

/* Completion order: ld_test_note_order (a callback) appends its arg, an int,
 * to ld_test_order; ld_test_watch(f, i) makes it note i when f completes
 * (with a reference of its own). ld_test_setup empties the record. */
extern int ld_test_order[16];
extern int ld_test_n_order;
void ld_test_note_order(ld_future *f, void *arg);
void ld_test_watch(ld_future *f, int i);

/* A cancel handler that counts its calls in ld_test_cancels (set to 0 by
 * ld_test_setup). */
extern int ld_test_cancels;
void ld_test_count_cancel(ld_future *f, void *arg);

/* A ld_free_fn that counts its calls in a global counter. */
extern int ld_test_frees;
void ld_test_count_free(void *p);

/* The part every scripted implementation of the interface tests shares
 * (put it first in the test's own struct): the futures handed to it, kept
 * for the test to complete, and counts of close (or stop) and free calls.
 * The functions below are ops for such an implementation (`impl`). */
struct ld_test_script {
    ld_future *outs[16];
    int n;
    int closes;
    int freed;
};

/* Keeps `out` for the test. */
void ld_test_script_keep(void *impl, ld_future *out);
/* Counts the call and fulfils `out` (a close or a stop). */
void ld_test_script_close(void *impl, ld_future *out);
/* Releases what was kept and counts the call. */
void ld_test_script_free(void *impl);
/* "script". */
const char *ld_test_script_name(void *impl);

/* The interfaces with a front layer, so that what every front does is
 * tested once for all of them (check_fronts.c, check_mock_interfaces.c). */
enum ld_test_iface {
    LD_TEST_STORE,
    LD_TEST_EVENT_PROCESSOR,
    LD_TEST_UPDATE_PROCESSOR,
    LD_TEST_BIG_SEGMENT_STORE,
    LD_TEST_SYNCHRONIZER,
    LD_TEST_INITIALIZER,
    LD_TEST_N_IFACES
};

/* "store", "event processor", ... */
const char *ld_test_iface_name(enum ld_test_iface i);

/* An operation of `obj` that waits for its implementation: a get (of
 * features "k"), a flush, the start, get_metadata, a next, a fetch. */
ld_future *ld_test_iface_op(enum ld_test_iface i, void *obj);

/* The close (or stop) of `obj`. */
ld_future *ld_test_iface_close(enum ld_test_iface i, void *obj);

/* The free of `obj`. */
void ld_test_iface_free(enum ld_test_iface i, void *obj);

/* An object of interface `i` on ld_test_base whose
 * implementation is `impl`, with the scripted ops below; asserts it was
 * made. */
void *ld_test_script_new(enum ld_test_iface i, struct ld_test_script *impl);

/* Fulfils `out`, an operation ld_test_iface_op() handed to a scripted
 * implementation of `i`, with a value of its type, and releases it. */
void ld_test_script_answer(enum ld_test_iface i, ld_future *out);

/* The ops of a scripted implementation (impl: a struct ld_test_script),
 * which keeps every operation: send_event accepts and drops the event,
 * the update processor's initialized is false. */
extern const struct ld_store_ops ld_test_script_store_ops;
extern const struct ld_event_processor_ops ld_test_script_event_processor_ops;
extern const struct ld_update_processor_ops ld_test_script_update_processor_ops;
extern const struct ld_big_segment_store_ops ld_test_script_big_segment_store_ops;
extern const struct ld_synchronizer_ops ld_test_script_synchronizer_ops;
extern const struct ld_initializer_ops ld_test_script_initializer_ops;

/* Asserts that `call`, an expression that makes an object from `ops`, gives
 * NULL once `ops` is a copy of `good` with `member` = `value`. */
#define LD_TEST_REFUSES(ops, good, member, value, call)                           \
    do {                                                                          \
        (ops) = (good);                                                           \
        (ops).member = (value);                                                   \
        ck_assert_msg((call) == NULL, "accepted ops with " #member " = " #value); \
    } while (0)

/* Asserts that `name_fn`, the naming function of an enum `type` whose
 * values are 0, 1, ..., gives the names listed (for 0, 1, ... in order) and
 * NULL for the value after the last and for -1. */
#define LD_TEST_ENUM_NAMES(name_fn, type, ...)                    \
    do {                                                          \
        const char *const names_[] = {__VA_ARGS__};               \
        const int n_ = (int)(sizeof(names_) / sizeof(names_[0])); \
        for (int v_ = 0; v_ < n_; v_++)                           \
            ck_assert_str_eq(name_fn((type)v_), names_[v_]);      \
        ck_assert_ptr_null(name_fn((type)n_));                    \
        ck_assert_ptr_null(name_fn((type)-1));                    \
    } while (0)

/* Evaluation tests (check_eval.c, check_eval_attack.c). */
/* JSON text with ' for " (JSON_DECODE_ANY, NUL allowed in strings). */
json_t *ld_test_j(const char *text);
/* {"features": flags, "segments": segments} from such texts (NULL: {}),
 * each item given "key" (its property name) and "version" 1 if it has
 * none. */
json_t *ld_test_data_of(const char *flags, const char *segments);
/* A memory store on ld_test_base holding `data` (borrowed). */
ld_store *ld_test_memory_with(const json_t *data);
/* A mock initializer on ld_test_base whose basis is `data` (borrowed). */
ld_initializer *ld_test_initializer_of(const json_t *data);
/* A context from such a text (the test fails if it is invalid). */
ld_context *ld_test_ctx_of(const char *text);
ld_evaluator *ld_test_evaluator_of(ld_store *s);
/* Frees the evaluator, then the store, with the loop run after each. */
void ld_test_done_with(ld_evaluator *ev, ld_store *s);

/* A version 1 store that answers later: get, all and initialized from the
 * loop (event_base_once), a batch at a time. Reads issued before the loop
 * runs the pending batch join it, so `batches` counts round trips (and
 * batch_sizes[] holds the first 128). `hold` keeps the answers until
 * ld_test_later_release(). `fail` rejects every read with LD_ESTORE,
 * `fail_key` the gets of that key ("*": all gets), `fail_all` every all.
 * Writes go to its JSON. Freeing it rejects what is pending. */
#define LD_TEST_LATER_MAX 4096
struct ld_test_later {
    struct event_base *base;
    json_t *data; /* {"features": {...}, "segments": {...}} */
    ld_future *outs[LD_TEST_LATER_MAX];
    json_t *answers[LD_TEST_LATER_MAX]; /* new references */
    bool failing[LD_TEST_LATER_MAX];
    int n;
    bool scheduled, hold, fail, fail_all;
    const char *fail_key;
    int batches, gets;
    int batch_sizes[128];
};

/* Such a store on ld_test_base with a copy of `data` (borrowed); *out (if
 * not NULL) receives its state. */
ld_store *ld_test_later_new(const json_t *data, struct ld_test_later **out);
void ld_test_later_release(struct ld_test_later *l);

/* `s` in base64url without padding, as LaunchDarkly's JS SDKs put a
 * context in evalx paths (a new string, to free()). */
char *ld_test_b64url(const char *s);

#endif
