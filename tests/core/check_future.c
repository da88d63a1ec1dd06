/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* The ld_future contract, one behaviour per test. */
#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

/* Records the order in which callbacks ran. */
static int order[64];
static int norder;

static void record_cb(ld_future *f, void *arg)
{
    (void)f;
    ck_assert_int_lt(norder, 64);
    order[norder++] = (int)(intptr_t)arg;
}

static void reset_order(void)
{
    norder = 0;
}

/* ---- creating, bad input ------------------------------------------------ */

START_TEST(test_new_null_base_is_null)
{
    ck_assert_ptr_null(ld_future_new(NULL));
    ck_assert_ptr_null(ld_future_fulfilled_json(NULL, json_true()));
    ck_assert_ptr_null(ld_future_rejected(NULL, LD_EIO, "x"));
}
END_TEST

START_TEST(test_null_is_safe_everywhere)
{
    ld_future_unref(NULL);
    ck_assert_ptr_null(ld_future_ref(NULL));
    ck_assert_ptr_null(ld_future_base(NULL));
    ck_assert(!ld_future_is_pending(NULL));
    ck_assert(!ld_future_is_fulfilled(NULL));
    ck_assert(!ld_future_is_rejected(NULL));
    ck_assert_ptr_null(ld_future_json(NULL));
    ck_assert(!ld_future_bool(NULL));
    ck_assert_int_eq(ld_future_int(NULL), 0);
    ck_assert_ptr_null(ld_future_ptr(NULL));
    ck_assert_int_eq(ld_future_error(NULL), LD_EINVAL);
    ck_assert_ptr_null(ld_future_error_message(NULL));
    ck_assert_int_eq(ld_future_fulfill(NULL), LD_EINVAL);
    ck_assert_int_eq(ld_future_fulfill_bool(NULL, true), LD_EINVAL);
    ck_assert_int_eq(ld_future_fulfill_int(NULL, 1), LD_EINVAL);
    ck_assert_int_eq(ld_future_reject(NULL, LD_EIO, "x"), LD_EINVAL);
    ck_assert_int_eq(ld_future_cancel(NULL), LD_EINVAL);
    ck_assert_int_eq(ld_future_wait(NULL), LD_EINVAL);
    ck_assert_int_eq(ld_future_on_complete(NULL, ld_test_count_cb, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_future_set_cancel_handler(NULL, ld_test_count_cb, NULL), LD_EINVAL);
    ck_assert_ptr_null(ld_future_then(NULL, NULL, NULL));
    ck_assert_ptr_null(ld_future_catch(NULL, NULL, NULL));
    ck_assert_ptr_null(ld_future_timeout(NULL, NULL));
    ck_assert_ptr_null(ld_future_all_get(NULL, 0));
}
END_TEST

START_TEST(test_null_future_frees_offered_values)
{
    json_t *v = json_object();
    json_incref(v);
    ck_assert_int_eq(ld_future_fulfill_json(NULL, v), LD_EINVAL);
    ck_assert_int_eq(v->refcount, 1);
    json_decref(v);
    ck_assert_int_eq(ld_future_fulfill_ptr(NULL, &v, ld_test_count_free), LD_EINVAL);
    ck_assert_int_eq(ld_test_frees, 1);
}
END_TEST

START_TEST(test_base_is_reported)
{
    ld_future *f = ld_future_new(B);
    ck_assert_ptr_eq(ld_future_base(f), B);
    ck_assert(ld_future_is_pending(f));
    ck_assert_int_eq(ld_future_error(f), 0);
    ld_future_unref(f);
}
END_TEST

/* ---- values --------------------------------------------------------------- */

START_TEST(test_fulfill_values_read_back)
{
    ld_future *n = ld_future_new(B), *b = ld_future_new(B), *i = ld_future_new(B);
    ld_future *j = ld_future_new(B), *p = ld_future_new(B), *jn = ld_future_new(B);
    static int target;
    ck_assert_int_eq(ld_future_fulfill(n), 0);
    ck_assert_int_eq(ld_future_fulfill_bool(b, true), 0);
    ck_assert_int_eq(ld_future_fulfill_int(i, -42), 0);
    ck_assert_int_eq(ld_future_fulfill_json(j, json_string("x")), 0);
    ck_assert_int_eq(ld_future_fulfill_ptr(p, &target, NULL), 0);
    ck_assert_int_eq(ld_future_fulfill_json(jn, NULL), 0);
    ck_assert(ld_future_is_fulfilled(n) && !ld_future_is_pending(n));
    ck_assert(ld_future_bool(b));
    ck_assert_int_eq(ld_future_int(i), -42);
    ck_assert_str_eq(json_string_value(ld_future_json(j)), "x");
    ck_assert_ptr_eq(ld_future_ptr(p), &target);
    ck_assert(ld_future_is_fulfilled(jn));
    ck_assert_ptr_null(ld_future_json(jn));
    /* reading the wrong type gives the neutral value */
    ck_assert_ptr_null(ld_future_json(b));
    ck_assert_int_eq(ld_future_int(b), 0);
    ck_assert(!ld_future_bool(i));
    ck_assert_ptr_null(ld_future_ptr(j));
    ck_assert_ptr_null(ld_future_error_message(j));
    ld_future *all[] = {n, b, i, j, p, jn};
    for (size_t k = 0; k < 6; k++)
        ld_future_unref(all[k]);
}
END_TEST

START_TEST(test_reject_keeps_code_and_message)
{
    ld_future *f = ld_future_new(B);
    ck_assert_int_eq(ld_future_reject(f, LD_EIO, "disk %d failed", 3), 0);
    ck_assert(ld_future_is_rejected(f));
    ck_assert_int_eq(ld_future_error(f), LD_EIO);
    ck_assert_str_eq(ld_future_error_message(f), "disk 3 failed");
    ld_future_unref(f);
}
END_TEST

START_TEST(test_reject_without_format_uses_strerror)
{
    ld_future *f = ld_future_rejected(B, LD_ESTORE, NULL);
    ck_assert_int_eq(ld_future_error(f), LD_ESTORE);
    ck_assert_str_eq(ld_future_error_message(f), ld_strerror(LD_ESTORE));
    ld_future_unref(f);
}
END_TEST

START_TEST(test_reject_with_nonnegative_code_is_einval)
{
    ld_future *f = ld_future_new(B);
    ck_assert_int_eq(ld_future_reject(f, 0, "no"), LD_EINVAL);
    ck_assert_int_eq(ld_future_reject(f, 5, "no"), LD_EINVAL);
    ck_assert(ld_future_is_pending(f));
    ck_assert_ptr_null(ld_future_rejected(B, 0, "no"));
    ld_future_unref(f);
}
END_TEST

START_TEST(test_complete_twice_is_ealready_and_frees_value)
{
    ld_future *f = ld_future_new(B);
    ck_assert_int_eq(ld_future_fulfill_int(f, 1), 0);
    json_t *v = json_object();
    json_incref(v);
    ck_assert_int_eq(ld_future_fulfill_json(f, v), LD_EALREADY);
    ck_assert_int_eq(v->refcount, 1);
    json_decref(v);
    ck_assert_int_eq(ld_future_fulfill_ptr(f, &v, ld_test_count_free), LD_EALREADY);
    ck_assert_int_eq(ld_test_frees, 1);
    ck_assert_int_eq(ld_future_fulfill(f), LD_EALREADY);
    ck_assert_int_eq(ld_future_fulfill_bool(f, true), LD_EALREADY);
    ck_assert_int_eq(ld_future_reject(f, LD_EIO, "late"), LD_EALREADY);
    ck_assert_int_eq(ld_future_cancel(f), LD_EALREADY);
    ck_assert_int_eq(ld_future_int(f), 1);
    ld_future_unref(f);
}
END_TEST

START_TEST(test_values_freed_once_at_last_unref)
{
    static int target;
    ld_future *f = ld_future_new(B);
    ld_future_fulfill_ptr(f, &target, ld_test_count_free);
    ld_future_ref(f);
    ld_future_on_complete(ld_future_ref(f), ld_test_count_cb, &(int){0});
    ld_future_unref(f);
    ld_test_flush();
    ck_assert_int_eq(ld_test_frees, 0);
    ld_future_unref(f);
    ck_assert_int_eq(ld_test_frees, 1);
}
END_TEST

/* ---- callbacks: never re-entrant, FIFO, exactly once ----------------------- */

START_TEST(test_callback_not_run_inside_complete)
{
    int calls = 0;
    ld_future *f = ld_future_new(B);
    ck_assert_int_eq(ld_future_on_complete(ld_future_ref(f), ld_test_count_cb, &calls), 0);
    ld_future_fulfill(f);
    ck_assert_int_eq(calls, 0);
    ld_test_flush();
    ck_assert_int_eq(calls, 1);
    ld_future_unref(f);
}
END_TEST

START_TEST(test_callback_on_complete_future_not_run_inside_register)
{
    int calls = 0;
    ld_future *f = ld_future_new(B);
    ld_future_fulfill(f);
    ck_assert_int_eq(ld_future_on_complete(f, ld_test_count_cb, &calls), 0);
    ck_assert_int_eq(calls, 0);
    ld_test_flush();
    ck_assert_int_eq(calls, 1);
}
END_TEST

static void register_inside_cb(ld_future *f, void *arg)
{
    int *calls = arg;
    (*calls)++;
    if (*calls == 1) {
        ld_future_on_complete(ld_future_ref(f), register_inside_cb, arg);
        ck_assert_int_eq(*calls, 1); /* not run inside the callback either */
    }
}

START_TEST(test_callback_registered_inside_callback_runs_later)
{
    int calls = 0;
    ld_future *f = ld_future_new(B);
    ld_future_fulfill(f);
    ld_future_on_complete(f, register_inside_cb, &calls);
    ld_test_flush();
    ck_assert_int_eq(calls, 2);
}
END_TEST

START_TEST(test_callbacks_of_one_future_run_in_registration_order)
{
    reset_order();
    ld_future *f = ld_future_new(B);
    for (intptr_t i = 0; i < 5; i++)
        ld_future_on_complete(ld_future_ref(f), record_cb, (void *)i);
    ld_future_fulfill(f);
    for (intptr_t i = 5; i < 8; i++) /* also after completion */
        ld_future_on_complete(ld_future_ref(f), record_cb, (void *)i);
    ld_test_flush();
    ck_assert_int_eq(norder, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(order[i], i);
    ld_future_unref(f);
}
END_TEST

START_TEST(test_callbacks_across_futures_run_in_completion_order)
{
    reset_order();
    ld_future *f1 = ld_future_new(B), *f2 = ld_future_new(B), *f3 = ld_future_new(B);
    ld_future_on_complete(ld_future_ref(f1), record_cb, (void *)1);
    ld_future_on_complete(ld_future_ref(f2), record_cb, (void *)2);
    ld_future_on_complete(ld_future_ref(f3), record_cb, (void *)3);
    ld_future_fulfill(f3);
    ld_future_fulfill(f1);
    ld_future_fulfill(f2);
    /* registered on a complete future: ready now, so after the others */
    ld_future_on_complete(ld_future_ref(f3), record_cb, (void *)4);
    ld_test_flush();
    ck_assert_int_eq(norder, 4);
    ck_assert_int_eq(order[0], 3);
    ck_assert_int_eq(order[1], 1);
    ck_assert_int_eq(order[2], 2);
    ck_assert_int_eq(order[3], 4);
    ld_future_unref(f1);
    ld_future_unref(f2);
    ld_future_unref(f3);
}
END_TEST

START_TEST(test_callback_runs_exactly_once)
{
    int calls = 0;
    ld_future *f = ld_future_new(B);
    ld_future_on_complete(ld_future_ref(f), ld_test_count_cb, &calls);
    ld_future_fulfill(f);
    ld_test_flush();
    ld_future_reject(f, LD_EIO, NULL);
    ld_future_cancel(f);
    ld_test_flush();
    ck_assert_int_eq(calls, 1);
    ld_future_unref(f);
}
END_TEST

START_TEST(test_on_complete_bad_input_never_calls)
{
    ld_future *f = ld_future_new(B);
    ld_future_fulfill(f);
    ck_assert_int_eq(ld_future_on_complete(f, NULL, NULL), LD_EINVAL); /* steals f */
    ld_test_flush();
}
END_TEST

/* ---- then, catch ------------------------------------------------------------ */

static void add_one(ld_future *in, ld_future *out, void *arg)
{
    (void)arg;
    ld_future_fulfill_int(out, ld_future_int(in) + 1);
}

static void must_not_run(ld_future *in, ld_future *out, void *arg)
{
    (void)in;
    (void)out;
    (void)arg;
    ck_abort_msg("function ran although it must not");
}

START_TEST(test_then_runs_fn_on_fulfil)
{
    ld_future *in = ld_future_new(B);
    ld_future *out = ld_future_then(ld_future_ref(in), add_one, NULL);
    ck_assert_ptr_nonnull(out);
    ld_future_fulfill_int(in, 41);
    ck_assert(ld_future_is_pending(out));
    ld_test_wait(out);
    ck_assert_int_eq(ld_future_int(out), 42);
    ld_future_unref(in);
    ld_future_unref(out);
}
END_TEST

START_TEST(test_then_passes_rejection_without_fn)
{
    ld_future *in = ld_future_new(B);
    ld_future *out = ld_future_then(ld_future_ref(in), must_not_run, NULL);
    ld_future_reject(in, LD_EPARSE, "bad byte at %d", 7);
    ld_test_wait(out);
    ck_assert_int_eq(ld_future_error(out), LD_EPARSE);
    ck_assert_str_eq(ld_future_error_message(out), "bad byte at 7");
    ld_future_unref(in);
    ld_future_unref(out);
}
END_TEST

static void recover(ld_future *in, ld_future *out, void *arg)
{
    (void)arg;
    ld_future_fulfill_int(out, -ld_future_error(in));
}

START_TEST(test_catch_runs_fn_on_reject)
{
    ld_future *out = ld_future_catch(ld_future_rejected(B, LD_EIO, NULL), recover, NULL);
    ld_test_wait(out);
    ck_assert_int_eq(ld_future_int(out), -LD_EIO);
    ld_future_unref(out);
}
END_TEST

START_TEST(test_catch_passes_value_without_fn)
{
    ld_future *out =
        ld_future_catch(ld_future_fulfilled_json(B, json_integer(5)), must_not_run, NULL);
    ld_test_wait(out);
    ck_assert_int_eq(json_integer_value(ld_future_json(out)), 5);
    ld_future_unref(out);
}
END_TEST

static ld_future *later_out;

static void complete_later(ld_future *in, ld_future *out, void *arg)
{
    (void)in;
    (void)arg;
    later_out = ld_future_ref(out);
}

START_TEST(test_then_fn_may_complete_out_later)
{
    ld_future *out = ld_future_then(ld_future_fulfilled_json(B, NULL), complete_later, NULL);
    ld_test_flush();
    ck_assert(ld_future_is_pending(out));
    ck_assert_int_eq(ld_future_fulfill_bool(later_out, true), 0);
    ld_future_unref(later_out);
    ld_test_wait(out);
    ck_assert(ld_future_bool(out));
    ld_future_unref(out);
}
END_TEST

START_TEST(test_then_result_cannot_be_completed_from_outside)
{
    ld_future *in = ld_future_new(B);
    ld_future *out = ld_future_then(ld_future_ref(in), add_one, NULL);
    ck_assert_int_eq(ld_future_fulfill_int(out, 7), LD_EALREADY);
    ld_future_fulfill_int(in, 1);
    ld_test_wait(out);
    ck_assert_int_eq(ld_future_int(out), 2);
    ld_future_unref(in);
    ld_future_unref(out);
}
END_TEST

START_TEST(test_then_null_fn_releases_input)
{
    ld_future *in = ld_future_new(B);
    ld_future_fulfill_ptr(in, &order, ld_test_count_free);
    ck_assert_ptr_null(ld_future_then(in, NULL, NULL));
    ck_assert_int_eq(ld_test_frees, 1);
}
END_TEST

START_TEST(test_million_link_then_chain_uses_constant_stack)
{
    enum { LINKS = 1000000 };
    ld_future *head = ld_future_new(B);
    ld_future *f = ld_future_ref(head);
    int null_links = 0; /* counted, not asserted per link: each ck_assert is a write(2) */
    for (int i = 0; i < LINKS && f; i++) {
        f = ld_future_then(f, add_one, NULL);
        null_links += !f;
    }
    ck_assert_int_eq(null_links, 0);
    ld_future_fulfill_int(head, 0);
    ld_future_unref(head);
    ld_test_wait(f);
    ck_assert_int_eq(ld_future_int(f), LINKS);
    ld_future_unref(f);
}
END_TEST

START_TEST(test_million_link_chain_on_complete_input)
{
    enum { LINKS = 1000000 };
    ld_future *f = ld_future_new(B);
    ld_future_fulfill_int(f, 0);
    for (int i = 0; i < LINKS; i++)
        f = ld_future_then(f, add_one, NULL);
    ld_test_wait(f);
    ck_assert_int_eq(ld_future_int(f), LINKS);
    ld_future_unref(f);
}
END_TEST

/* ---- forward --------------------------------------------------------------- */

START_TEST(test_forward_adopts_json_by_reference)
{
    json_t *v = json_object();
    ld_future *from = ld_future_new(B), *out = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(out, ld_future_ref(from)), 0);
    ck_assert_int_eq(ld_future_fulfill(out), LD_EALREADY); /* it is adopting */
    ld_future_fulfill_json(from, v);
    ld_test_wait(out);
    ck_assert_ptr_eq(ld_future_json(out), v);
    ld_future_unref(from);
    ld_future_unref(out);
}
END_TEST

START_TEST(test_forward_adopts_rejection)
{
    ld_future *out = ld_future_new(B);
    ld_future_forward(out, ld_future_rejected(B, LD_ECLOSED, "closed %s", "now"));
    ld_test_wait(out);
    ck_assert_int_eq(ld_future_error(out), LD_ECLOSED);
    ck_assert_str_eq(ld_future_error_message(out), "closed now");
    ld_future_unref(out);
}
END_TEST

START_TEST(test_forward_shares_pointer_and_frees_it_once)
{
    static int target;
    ld_future *from = ld_future_new(B), *out = ld_future_new(B);
    ld_future_fulfill_ptr(from, &target, ld_test_count_free);
    ld_future_forward(out, from);
    ld_test_wait(out);
    ck_assert_ptr_eq(ld_future_ptr(out), &target);
    ck_assert_int_eq(ld_test_frees, 0);
    ld_future_unref(out);
    ck_assert_int_eq(ld_test_frees, 1);
}
END_TEST

START_TEST(test_forward_to_itself_rejects_einval)
{
    ld_future *f = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(f, ld_future_ref(f)), LD_EINVAL);
    ck_assert_int_eq(ld_future_error(f), LD_EINVAL);
    ld_future_unref(f);
}
END_TEST

START_TEST(test_forward_to_itself_with_only_reference_is_safe)
{
    ld_future *f = ld_future_new(B);
    /* `from` steals the one reference to `out`: no use after free */
    ck_assert_int_eq(ld_future_forward(f, f), LD_EINVAL);
}
END_TEST

START_TEST(test_forward_into_cycle_rejects_einval)
{
    ld_future *a = ld_future_new(B);
    ld_future *t = ld_future_then(ld_future_ref(a), add_one, NULL); /* t waits on a */
    ld_future *u = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(u, ld_future_ref(t)), 0);         /* u waits on t */
    ck_assert_int_eq(ld_future_forward(a, ld_future_ref(u)), LD_EINVAL); /* a would wait on a */
    ck_assert_int_eq(ld_future_error(a), LD_EINVAL);
    ld_test_wait(u);
    ck_assert_int_eq(ld_future_error(u), LD_EINVAL);
    ld_future_unref(a);
    ld_future_unref(t);
    ld_future_unref(u);
}
END_TEST

START_TEST(test_forward_bad_input)
{
    ld_future *out = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(NULL, ld_future_new(B)), LD_EINVAL);
    ck_assert_int_eq(ld_future_forward(out, NULL), LD_EINVAL);
    struct event_base *other = event_base_new();
    ck_assert_int_eq(ld_future_forward(out, ld_future_new(other)), LD_EINVAL);
    event_base_free(other);
    ld_future_fulfill(out);
    ck_assert_int_eq(ld_future_forward(out, ld_future_new(B)), LD_EALREADY);
    ld_future *busy = ld_future_new(B);
    ld_future *src = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(busy, ld_future_ref(src)), 0);
    ck_assert_int_eq(ld_future_forward(busy, ld_future_new(B)), LD_EALREADY);
    ld_future_fulfill(src);
    ld_test_wait(busy);
    ld_future_unref(src);
    ld_future_unref(busy);
    ld_future_unref(out);
}
END_TEST

START_TEST(test_100k_forward_chain_uses_constant_stack)
{
    enum { LINKS = 100000 };
    ld_future *first = ld_future_new(B);
    ld_future *cur = ld_future_ref(first);
    int refused = 0; /* counted, not asserted per link: each ck_assert is a write(2) */
    for (int i = 0; i < LINKS; i++) {
        ld_future *next = ld_future_new(B);
        refused += ld_future_forward(cur, ld_future_ref(next)) != 0;
        ld_future_unref(cur);
        cur = next;
    }
    ck_assert_int_eq(refused, 0);
    ld_future_fulfill_int(cur, 99);
    ld_future_unref(cur);
    ld_test_wait(first);
    ck_assert_int_eq(ld_future_int(first), 99);
    ld_future_unref(first);
}
END_TEST

/* Builds a chain of `links` forward links in which each new future forwards
 * the previous one (the newest waits on the oldest, so each new link sits
 * at the far end of the chain from its root). Returns the root (pending);
 * *newest gets the last future. Both are new references. */
static ld_future *forward_chain_onto_root(int links, ld_future **newest)
{
    ld_future *root = ld_future_new(B);
    ld_future *cur = ld_future_ref(root);
    int refused = 0; /* counted, not asserted per link: each ck_assert is a write(2) */
    for (int i = 0; i < links; i++) {
        ld_future *next = ld_future_new(B);
        refused += ld_future_forward(next, cur) != 0; /* steals cur */
        cur = next;
    }
    ck_assert_int_eq(refused, 0);
    *newest = cur;
    return root;
}

START_TEST(test_million_link_forward_chain_builds_and_settles)
{
    enum { LINKS = 1000000 };
    ld_future *newest;
    ld_future *root = forward_chain_onto_root(LINKS, &newest);
    ld_future_fulfill_int(root, 42);
    ld_future_unref(root);
    ld_test_wait(newest);
    ck_assert_int_eq(ld_future_int(newest), 42);
    ld_future_unref(newest);
}
END_TEST

START_TEST(test_forward_closing_100k_link_cycle_rejects_einval)
{
    enum { LINKS = 100000 };
    ld_future *newest;
    ld_future *root = forward_chain_onto_root(LINKS, &newest);
    /* root would wait on newest, which waits on root through 100,000 links */
    ck_assert_int_eq(ld_future_forward(root, ld_future_ref(newest)), LD_EINVAL);
    ck_assert_int_eq(ld_future_error(root), LD_EINVAL);
    ld_test_wait(newest);
    ck_assert_int_eq(ld_future_error(newest), LD_EINVAL);
    ld_future_unref(root);
    ld_future_unref(newest);

    /* the other direction: the oldest waits on the newest */
    ld_future *first = ld_future_new(B);
    ld_future *cur = ld_future_ref(first);
    int refused = 0; /* counted, not asserted per link: each ck_assert is a write(2) */
    for (int i = 0; i < LINKS; i++) {
        ld_future *next = ld_future_new(B);
        refused += ld_future_forward(cur, ld_future_ref(next)) != 0;
        ld_future_unref(cur);
        cur = next;
    }
    ck_assert_int_eq(refused, 0);
    ck_assert_int_eq(ld_future_forward(cur, ld_future_ref(first)), LD_EINVAL);
    ld_test_wait(first);
    ck_assert_int_eq(ld_future_error(first), LD_EINVAL);
    ld_future_unref(first);
    ld_future_unref(cur);
}
END_TEST

START_TEST(test_forward_cycle_through_then_links_rejects_einval)
{
    /* root <- then x 1000 <- forward <- then x 1000 ...: a cycle through
     * both kinds of link, checked again after part of the chain settled */
    ld_future *root = ld_future_new(B);
    ld_future *f = ld_future_ref(root);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 1000; i++)
            f = ld_future_then(f, add_one, NULL);
        ld_future *out = ld_future_new(B);
        ck_assert_int_eq(ld_future_forward(out, f), 0);
        f = out;
    }
    ck_assert_int_eq(ld_future_forward(root, ld_future_ref(f)), LD_EINVAL);
    ld_test_wait(f);
    ck_assert_int_eq(ld_future_error(f), LD_EINVAL);
    ld_future_unref(f);
    ld_future_unref(root);

    /* after a chain settled, its old links no longer count */
    ld_future *a = ld_future_new(B);
    ld_future *t = ld_future_then(ld_future_ref(a), add_one, NULL);
    ld_future *u = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(u, ld_future_ref(t)), 0);
    ld_future *probe = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(probe, ld_future_ref(u)), 0); /* remembers u..a */
    ld_future_fulfill_int(a, 1);
    ld_test_wait(probe);
    ck_assert_int_eq(ld_future_int(probe), 2);
    ld_future *b = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(b, ld_future_ref(u)), 0); /* u is complete */
    ld_test_wait(b);
    ck_assert_int_eq(ld_future_int(b), 2);
    ld_future_unref(a);
    ld_future_unref(t);
    ld_future_unref(u);
    ld_future_unref(probe);
    ld_future_unref(b);
}
END_TEST

START_TEST(test_forward_from_cancelled_link_is_no_cycle)
{
    /* root <- m <- x (forwards); m is cancelled: x no longer waits on root,
     * so root may forward x */
    ld_future *root = ld_future_new(B);
    ld_future *m = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(m, ld_future_ref(root)), 0);
    ld_future *x = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(x, ld_future_ref(m)), 0);
    ld_future *probe = ld_future_new(B);
    ck_assert_int_eq(ld_future_forward(probe, ld_future_ref(x)), 0); /* remembers x..root */
    ld_future_cancel(m);
    ck_assert_int_eq(ld_future_forward(root, ld_future_ref(x)), 0);
    ld_test_wait(root);
    ck_assert_int_eq(ld_future_error(root), LD_ECANCELED);
    ld_test_wait(probe);
    ld_future_unref(root);
    ld_future_unref(m);
    ld_future_unref(x);
    ld_future_unref(probe);
}
END_TEST

/* ---- cancellation ------------------------------------------------------------ */

static int handler_calls;
static int handler_saw_callbacks;
static int cb_calls;

static void handler_cb(ld_future *f, void *arg)
{
    (void)arg;
    ck_assert_int_eq(ld_future_error(f), LD_ECANCELED);
    handler_saw_callbacks = cb_calls;
    handler_calls++;
}

static void counting_cb(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    cb_calls++;
}

static void reset_cancel_counts(void)
{
    handler_calls = handler_saw_callbacks = cb_calls = 0;
}

/* A producer's cancel handler: counts, then drops the producer's reference. */
static void producer_cancelled(ld_future *f, void *arg)
{
    (void)arg;
    handler_calls++;
    ld_future_unref(f);
}

/* A future whose producer holds a reference and listens for cancellation;
 * returns the consumer's reference. */
static ld_future *producer_new(void)
{
    ld_future *f = ld_future_new(B);
    ck_assert_int_eq(ld_future_set_cancel_handler(f, producer_cancelled, NULL), 0);
    return ld_future_ref(f);
}

START_TEST(test_cancel_rejects_and_runs_handler_from_loop_first)
{
    reset_cancel_counts();
    ld_future *f = ld_future_new(B);
    ck_assert_int_eq(ld_future_set_cancel_handler(f, handler_cb, NULL), 0);
    ld_future_on_complete(ld_future_ref(f), counting_cb, NULL);
    ck_assert_int_eq(ld_future_cancel(f), 0);
    ck_assert_int_eq(ld_future_error(f), LD_ECANCELED);
    ck_assert_int_eq(handler_calls, 0);
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 1);
    ck_assert_int_eq(handler_saw_callbacks, 0);
    ck_assert_int_eq(cb_calls, 1);
    ck_assert_int_eq(ld_future_cancel(f), LD_EALREADY);
    ld_future_unref(f);
}
END_TEST

START_TEST(test_cancel_handler_not_run_on_fulfil)
{
    reset_cancel_counts();
    ld_future *f = ld_future_new(B);
    ld_future_set_cancel_handler(f, handler_cb, NULL);
    ld_future_set_cancel_handler(f, handler_cb, NULL); /* replaces */
    ld_future_fulfill(f);
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 0);
    ck_assert_int_eq(ld_future_set_cancel_handler(f, handler_cb, NULL), LD_EALREADY);
    ld_future_unref(f);
    ld_future *p = ld_future_new(B); /* released while pending: never called */
    ld_future_set_cancel_handler(p, handler_cb, NULL);
    ld_future_unref(p);
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 0);
}
END_TEST

START_TEST(test_set_cancel_handler_bad_input)
{
    ld_future *in = ld_future_new(B);
    ld_future *out = ld_future_then(ld_future_ref(in), add_one, NULL);
    ck_assert_int_eq(ld_future_set_cancel_handler(in, NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_future_set_cancel_handler(out, handler_cb, NULL), LD_EINVAL);
    ld_future_fulfill_int(in, 0);
    ld_test_wait(out);
    ld_future_unref(in);
    ld_future_unref(out);
}
END_TEST

START_TEST(test_cancel_propagates_through_then_and_catch)
{
    reset_cancel_counts();
    ld_future *src = producer_new();
    ld_future *keep = ld_future_ref(src); /* another consumer of src */
    ld_future *t = ld_future_then(src, must_not_run, NULL);
    ld_future *c = ld_future_catch(t, recover, NULL);
    ld_future *t2 = ld_future_then(c, must_not_run, NULL);
    ck_assert_int_eq(ld_future_cancel(t2), 0);
    ld_test_flush();
    /* the links went, src stays: somebody else still wants it */
    ck_assert(ld_future_is_pending(keep));
    ck_assert_int_eq(handler_calls, 0);
    ck_assert_int_eq(ld_future_error(t2), LD_ECANCELED);
    ld_future_unref(t2);
    ld_future_cancel(keep);
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 1);
    ld_future_unref(keep);

    reset_cancel_counts();
    src = producer_new();
    /* now only the chain wants src: cancelling the end reaches it */
    ld_future *chain = ld_future_catch(ld_future_then(src, must_not_run, NULL), must_not_run, NULL);
    ck_assert_int_eq(ld_future_cancel(chain), 0);
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 1);
    ck_assert_int_eq(ld_future_error(chain), LD_ECANCELED);
    ld_future_unref(chain);
}
END_TEST

START_TEST(test_cancel_propagates_through_forward)
{
    reset_cancel_counts();
    ld_future *out = ld_future_new(B);
    ld_future_forward(out, producer_new());
    ld_future_cancel(out);
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 1);
    ld_future_unref(out);
}
END_TEST

START_TEST(test_cancel_long_chain_uses_constant_stack)
{
    reset_cancel_counts();
    ld_future *f = producer_new();
    for (int i = 0; i < 200000; i++)
        f = ld_future_then(f, must_not_run, NULL);
    ld_future_cancel(f);
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 1);
    ld_future_unref(f);
}
END_TEST

/* Runs a few loop passes without waiting (ld_test_flush would wait for the
 * armed timer to go). */
static void run_passes(int n)
{
    for (int i = 0; i < n; i++)
        event_base_loop(B, EVLOOP_NONBLOCK);
}

/* Consumers of a shared input, one of each kind that registers on it. */
enum { C_THEN, C_CATCH, C_FORWARD, C_TIMEOUT, C_ALL, C_RACE, C_KINDS };
static const char *const consumer_names[C_KINDS] = {"then",    "catch", "forward",
                                                    "timeout", "all",   "race"};

/* A consumer of `in` (stolen) of the given kind. */
static ld_future *consumer_new(int kind, ld_future *in)
{
    static const struct timeval later = {30, 0};
    ld_future *out = NULL, *two[2] = {in, NULL};
    switch (kind) {
    case C_THEN:
        out = ld_future_then(in, must_not_run, NULL);
        break;
    case C_CATCH:
        out = ld_future_catch(in, must_not_run, NULL);
        break;
    case C_FORWARD:
        out = ld_future_new(B);
        ck_assert_int_eq(ld_future_forward(out, in), 0);
        break;
    case C_TIMEOUT:
        out = ld_future_timeout(in, &later);
        break;
    case C_ALL:
        out = ld_future_all(B, &in, 1);
        break;
    default:
        two[1] = ld_future_new(B); /* a rival nobody else holds */
        out = ld_future_race(B, two, 2);
        break;
    }
    ck_assert_ptr_nonnull(out);
    return out;
}

START_TEST(test_cancelling_every_consumer_cancels_shared_input)
{
    for (int a = 0; a < C_KINDS; a++) {
        for (int b = 0; b < C_KINDS; b++) {
            reset_cancel_counts();
            ld_future *p = producer_new();
            ld_future *first = consumer_new(a, ld_future_ref(p));
            ld_future *second = consumer_new(b, p);
            ld_future_cancel(first);
            run_passes(5);
            /* the second consumer still wants p */
            ck_assert_msg(handler_calls == 0, "%s+%s: cancelled while %s waits", consumer_names[a],
                          consumer_names[b], consumer_names[b]);
            ck_assert(ld_future_is_pending(second));
            ld_future_cancel(second);
            run_passes(5);
            ck_assert_msg(handler_calls == 1, "%s+%s: the producer's handler ran %d times",
                          consumer_names[a], consumer_names[b], handler_calls);
            ld_test_flush();
            ld_future_unref(first);
            ld_future_unref(second);
        }
    }
}
END_TEST

START_TEST(test_cancelling_every_consumer_keeps_input_the_user_holds)
{
    for (int a = 0; a < C_KINDS; a++) {
        for (int b = 0; b < C_KINDS; b++) {
            reset_cancel_counts();
            ld_future *p = producer_new();
            ld_future *first = consumer_new(a, ld_future_ref(p));
            ld_future *second = consumer_new(b, ld_future_ref(p));
            ld_future_cancel(second);
            ld_future_cancel(first);
            ld_test_flush();
            ck_assert_msg(handler_calls == 0, "%s+%s: cancelled under the user's reference",
                          consumer_names[a], consumer_names[b]);
            ck_assert(ld_future_is_pending(p));
            ld_future_unref(first);
            ld_future_unref(second);
            ld_future_cancel(p); /* now the user lets go */
            ld_test_flush();
            ck_assert_int_eq(handler_calls, 1);
            ld_future_unref(p);
        }
    }
}
END_TEST

START_TEST(test_cancelling_consumers_of_shared_then_reaches_its_input)
{
    reset_cancel_counts();
    ld_future *mid = ld_future_then(producer_new(), must_not_run, NULL);
    ld_future *c1 = ld_future_then(ld_future_ref(mid), must_not_run, NULL);
    ld_future *c2 = ld_future_catch(mid, must_not_run, NULL);
    ld_future_cancel(c2);
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 0);
    ld_future_cancel(c1);
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 1);
    ld_future_unref(c1);
    ld_future_unref(c2);
}
END_TEST

START_TEST(test_on_complete_callback_keeps_shared_input_wanted)
{
    reset_cancel_counts();
    ld_future *p = producer_new();
    int calls = 0;
    ld_future_on_complete(ld_future_ref(p), ld_test_count_cb, &calls);
    ld_future *c1 = ld_future_then(ld_future_ref(p), must_not_run, NULL);
    ld_future *c2 = ld_future_then(p, must_not_run, NULL);
    ld_future_cancel(c1);
    ld_future_cancel(c2);
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 0); /* the callback still waits for it */
    ck_assert_int_eq(calls, 0);
    ck_assert(ld_future_is_pending(p)); /* borrowed: the producer holds it */
    ld_future_unref(c1);
    ld_future_unref(c2);
    ld_future_cancel(p); /* the callback's owner gives up too */
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 1);
    ck_assert_int_eq(calls, 1);
}
END_TEST

/* ---- timeout ----------------------------------------------------------------- */

START_TEST(test_timeout_rejects_and_cancels_input)
{
    reset_cancel_counts();
    struct timeval tv = {0, 10000};
    ld_future *t = ld_future_timeout(producer_new(), &tv);
    ld_test_wait(t);
    ck_assert_int_eq(ld_future_error(t), LD_ETIMEDOUT);
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 1);
    ld_future_unref(t);
}
END_TEST

START_TEST(test_timeout_adopts_input_that_completes_first)
{
    ld_future *src = ld_future_new(B);
    struct timeval tv = {30, 0};
    ld_future *t = ld_future_timeout(ld_future_ref(src), &tv);
    ld_future_fulfill_int(src, 8);
    ld_test_wait(t);
    ck_assert_int_eq(ld_future_int(t), 8);
    ld_test_flush(); /* the timer is gone: the loop goes idle */
    ld_future_unref(src);
    ld_future_unref(t);
}
END_TEST

START_TEST(test_timeout_cancel_cancels_input_and_timer)
{
    reset_cancel_counts();
    struct timeval tv = {30, 0};
    ld_future *t = ld_future_timeout(producer_new(), &tv);
    ld_future_cancel(t);
    ld_test_flush(); /* would spin until the guard if the timer stayed */
    ck_assert_int_eq(handler_calls, 1);
    ld_future_unref(t);
}
END_TEST

START_TEST(test_timeout_of_long_max_seconds_never_fires)
{
    static const struct timeval forever[] = {
        {LONG_MAX, 0}, {LONG_MAX, 999999}, {LONG_MAX / 2, 0}, {(time_t)1 << 40, 0}};
    for (size_t i = 0; i < sizeof(forever) / sizeof(forever[0]); i++) {
        ld_future *src = ld_future_new(B);
        ld_future *t = ld_future_timeout(ld_future_ref(src), &forever[i]);
        ck_assert_ptr_nonnull(t);
        run_passes(5);
        ck_assert_msg(ld_future_is_pending(t), "timeout %zu fired early: %s", i,
                      ld_future_error_message(t));
        ld_future_fulfill_int(src, (int64_t)i);
        ld_test_wait(t);
        ck_assert_int_eq(ld_future_int(t), (int64_t)i);
        ld_future_unref(src);
        ld_future_unref(t);
    }
    ld_test_flush(); /* the timers are gone */
}
END_TEST

START_TEST(test_timeout_with_usec_out_of_range_is_null)
{
    static const struct timeval bad[] = {{0, -1}, {0, 1000000}, {LONG_MAX, -1}, {1, LONG_MAX}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ld_future *in = ld_future_new(B);
        ld_future_fulfill_ptr(in, &order, ld_test_count_free);
        ck_assert_ptr_null(ld_future_timeout(in, &bad[i]));
        ck_assert_int_eq(ld_test_frees, (int)i + 1); /* the input was released */
    }
}
END_TEST

START_TEST(test_timeout_bad_input)
{
    struct timeval neg = {-1, 0};
    ck_assert_ptr_null(ld_future_timeout(ld_future_new(B), NULL));
    ck_assert_ptr_null(ld_future_timeout(ld_future_new(B), &neg));
}
END_TEST

/* ---- all, race ----------------------------------------------------------------- */

START_TEST(test_all_fulfils_when_all_fulfil)
{
    ld_future *in[3];
    for (int i = 0; i < 3; i++)
        in[i] = ld_future_new(B);
    ld_future *keep[3] = {ld_future_ref(in[0]), ld_future_ref(in[1]), ld_future_ref(in[2])};
    ld_future *all = ld_future_all(B, in, 3);
    ld_future_fulfill_int(keep[2], 2);
    ld_future_fulfill_int(keep[0], 0);
    ld_test_flush();
    ck_assert(ld_future_is_pending(all));
    ld_future_fulfill_int(keep[1], 1);
    ld_test_wait(all);
    ck_assert(ld_future_is_fulfilled(all));
    for (int i = 0; i < 3; i++) {
        ck_assert_ptr_eq(ld_future_all_get(all, (size_t)i), keep[i]);
        ck_assert_int_eq(ld_future_int(ld_future_all_get(all, (size_t)i)), i);
        ld_future_unref(keep[i]);
    }
    ck_assert_ptr_null(ld_future_all_get(all, 3));
    ld_future_unref(all);
}
END_TEST

START_TEST(test_all_rejects_on_first_rejection_and_cancels_rest)
{
    reset_cancel_counts();
    ld_future *in[3] = {ld_future_new(B), ld_future_new(B), producer_new()};
    ld_future *failing = ld_future_ref(in[1]);
    ld_future *held = ld_future_ref(in[0]); /* someone else holds in[0] */
    ld_future *all = ld_future_all(B, in, 3);
    ld_future_reject(failing, LD_EIO, "boom");
    ld_test_wait(all);
    ck_assert_int_eq(ld_future_error(all), LD_EIO);
    ck_assert_str_eq(ld_future_error_message(all), "boom");
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 1);
    ck_assert(ld_future_is_pending(held));
    ck_assert_int_eq(ld_future_error(ld_future_all_get(all, 2)), LD_ECANCELED);
    ld_future_fulfill(held);
    ld_test_flush();
    ld_future_unref(held);
    ld_future_unref(failing);
    ld_future_unref(all);
}
END_TEST

START_TEST(test_all_of_nothing_is_fulfilled)
{
    ld_future *all = ld_future_all(B, NULL, 0);
    ck_assert(ld_future_is_fulfilled(all));
    ck_assert_ptr_null(ld_future_all_get(all, 0));
    ld_future_unref(all);
}
END_TEST

/* Cancelling all or race cancels the inputs nobody else holds. */
START_TEST(test_all_and_race_cancel_cancels_inputs)
{
    ld_future *(*const combine[2])(struct event_base *, ld_future **, size_t) = {ld_future_all,
                                                                                 ld_future_race};
    for (int c = 0; c < 2; c++) {
        reset_cancel_counts();
        ld_future *in[2] = {producer_new(), producer_new()};
        ld_future *out = combine[c](B, in, 2);
        ld_future_cancel(out);
        ld_test_flush();
        ck_assert_int_eq(handler_calls, 2);
        ld_future_unref(out);
    }
}
END_TEST

START_TEST(test_deeply_nested_combinators_release_with_constant_stack)
{
    enum { DEPTH = 300000 };
    ld_future *f = ld_future_new(B);
    ld_future *inner = ld_future_ref(f);
    struct timeval tv = {3600, 0};
    for (int i = 0; i < DEPTH && f; i++) /* no ck_assert per level: each is a write(2) */
        f = i % 2 ? ld_future_all(B, &f, 1) : ld_future_timeout(f, &tv);
    ck_assert_ptr_nonnull(f);
    ld_future_fulfill_int(inner, 1);
    ld_future_unref(inner);
    ld_test_wait(f);
    ck_assert(ld_future_is_fulfilled(f));
    ld_future_unref(f); /* releases 300,000 levels of inputs */
    ld_test_flush();
}
END_TEST

START_TEST(test_combinator_bad_input_steals_inputs)
{
    ld_future *in[2] = {ld_future_new(B), NULL};
    ld_future_fulfill_ptr(in[0], &order, ld_test_count_free);
    ck_assert_ptr_null(ld_future_all(B, in, 2));
    ck_assert_int_eq(ld_test_frees, 1);
    in[0] = ld_future_new(B);
    ck_assert_ptr_null(ld_future_all(NULL, in, 1));
    ck_assert_ptr_null(ld_future_all(B, NULL, 2));
    ck_assert_ptr_null(ld_future_race(B, NULL, 0));
    struct event_base *other = event_base_new();
    ld_future *mixed[2] = {ld_future_new(B), ld_future_new(other)};
    ck_assert_ptr_null(ld_future_race(B, mixed, 2));
    event_base_free(other);
    ld_future *plain = ld_future_new(B);
    ck_assert_ptr_null(ld_future_all_get(plain, 0));
    ld_future_unref(plain);
}
END_TEST

START_TEST(test_race_takes_first_and_cancels_losers)
{
    reset_cancel_counts();
    ld_future *in[3] = {producer_new(), ld_future_new(B), producer_new()};
    ld_future *winner = ld_future_ref(in[1]);
    ld_future *race = ld_future_race(B, in, 3);
    ld_future_fulfill_json(winner, json_string("won"));
    ld_test_wait(race);
    ck_assert_str_eq(json_string_value(ld_future_json(race)), "won");
    ld_test_flush();
    ck_assert_int_eq(handler_calls, 2);
    ld_future_unref(winner);
    ld_future_unref(race);
}
END_TEST

/* ---- wait ---------------------------------------------------------------------- */

static int wait_rc = 1;

static void wait_inside_cb(ld_future *f, void *arg)
{
    ld_future *other = arg;
    (void)f;
    wait_rc = ld_future_wait(other);
}

START_TEST(test_wait_inside_callback_is_ebusy)
{
    ld_future *other = ld_future_new(B);
    ld_future *f = ld_future_new(B);
    ld_future_fulfill(f);
    ld_future_on_complete(f, wait_inside_cb, other);
    ld_test_flush();
    ck_assert_int_eq(wait_rc, LD_EBUSY);
    ld_future_fulfill(other);
    ld_future_unref(other);
}
END_TEST

static void wait_inside_event(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    wait_rc = ld_future_wait(arg);
}

START_TEST(test_wait_inside_libevent_callback_is_ebusy)
{
    ld_future *other = ld_future_new(B);
    wait_rc = 1;
    event_base_once(B, -1, EV_TIMEOUT, wait_inside_event, other, &(struct timeval){0, 0});
    ld_test_flush();
    ck_assert_int_eq(wait_rc, LD_EBUSY);
    ld_future_unref(other);
}
END_TEST

START_TEST(test_wait_on_complete_future_returns_at_once)
{
    ld_future *f = ld_future_rejected(B, LD_EIO, NULL);
    ck_assert_int_eq(ld_future_wait(f), 0);
    ld_future_unref(f);
}
END_TEST

/* ---- dispatch ------------------------------------------------------------------ */

static int io_seen_after;
static int cb_count;

static void io_ready(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    (void)arg;
    char c;
    ck_assert_int_eq(read(fd, &c, 1), 1);
    io_seen_after = cb_count;
}

static void count_only(ld_future *f, void *arg)
{
    (void)f;
    (void)arg;
    cb_count++;
}

START_TEST(test_long_queue_does_not_starve_io)
{
    enum { N = 20000 };
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    struct event *ev = event_new(B, fds[0], EV_READ, io_ready, NULL);
    event_add(ev, NULL);
    ck_assert_int_eq(write(fds[1], "x", 1), 1);
    cb_count = 0;
    io_seen_after = -1;
    for (int i = 0; i < N; i++) {
        ld_future *f = ld_future_new(B);
        ld_future_fulfill(f);
        ld_future_on_complete(f, count_only, NULL);
    }
    ld_test_flush();
    ck_assert_int_eq(cb_count, N);
    ck_assert_int_ge(io_seen_after, 0);
    ck_assert_int_lt(io_seen_after, N);
    event_free(ev);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

START_TEST(test_base_address_reused_after_free)
{
    for (int round = 0; round < 3; round++) {
        struct event_base *b = event_base_new();
        int calls = 0;
        ld_future *f = ld_future_new(b);
        ld_future_fulfill(f);
        ld_future_on_complete(f, ld_test_count_cb, &calls);
        event_base_loop(b, EVLOOP_NONBLOCK);
        ck_assert_int_eq(calls, 1);
        event_base_free(b);
    }
}
END_TEST

#if !LD_TEST_SANITIZED
static int no_pool(void)
{
    const char *e = getenv("LDASYNC_NO_POOL");
    return (e && *e && strcmp(e, "0") != 0) || getenv("LDASYNC_VALGRIND");
}

START_TEST(test_round_trip_allocates_nothing_after_warm_up)
{
    if (no_pool())
        return; /* malloc per future is the point of that mode */
    enum { N = 4096 };
    int calls = 0;
    for (int round = 0; round < 3; round++) {
        struct mallinfo2 before = mallinfo2();
        for (int i = 0; i < N; i++) {
            ld_future *f = ld_future_new(B);
            ld_future_fulfill_int(f, i);
            ld_future_on_complete(f, ld_test_count_cb, &calls);
        }
        ld_test_flush();
        struct mallinfo2 after = mallinfo2();
        if (round > 0) /* round 0 fills the free lists */
            ck_assert_uint_eq(after.uordblks, before.uordblks);
    }
    ck_assert_int_eq(calls, 3 * N);
}
END_TEST
#endif

Suite *ld_suite_future(void)
{
    Suite *s = suite_create("future");
    TCase *tc = tcase_create("basics");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_new_null_base_is_null);
    tcase_add_test(tc, test_null_is_safe_everywhere);
    tcase_add_test(tc, test_null_future_frees_offered_values);
    tcase_add_test(tc, test_base_is_reported);
    tcase_add_test(tc, test_fulfill_values_read_back);
    tcase_add_test(tc, test_reject_keeps_code_and_message);
    tcase_add_test(tc, test_reject_without_format_uses_strerror);
    tcase_add_test(tc, test_reject_with_nonnegative_code_is_einval);
    tcase_add_test(tc, test_complete_twice_is_ealready_and_frees_value);
    tcase_add_test(tc, test_values_freed_once_at_last_unref);
    suite_add_tcase(s, tc);

    tc = tcase_create("dispatch");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_callback_not_run_inside_complete);
    tcase_add_test(tc, test_callback_on_complete_future_not_run_inside_register);
    tcase_add_test(tc, test_callback_registered_inside_callback_runs_later);
    tcase_add_test(tc, test_callbacks_of_one_future_run_in_registration_order);
    tcase_add_test(tc, test_callbacks_across_futures_run_in_completion_order);
    tcase_add_test(tc, test_callback_runs_exactly_once);
    tcase_add_test(tc, test_on_complete_bad_input_never_calls);
    tcase_add_test(tc, test_long_queue_does_not_starve_io);
    tcase_add_test(tc, test_base_address_reused_after_free);
#if !LD_TEST_SANITIZED
    tcase_add_test(tc, test_round_trip_allocates_nothing_after_warm_up);
#endif
    suite_add_tcase(s, tc);

    tc = tcase_create("chaining");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_then_runs_fn_on_fulfil);
    tcase_add_test(tc, test_then_passes_rejection_without_fn);
    tcase_add_test(tc, test_catch_runs_fn_on_reject);
    tcase_add_test(tc, test_catch_passes_value_without_fn);
    tcase_add_test(tc, test_then_fn_may_complete_out_later);
    tcase_add_test(tc, test_then_result_cannot_be_completed_from_outside);
    tcase_add_test(tc, test_then_null_fn_releases_input);
    tcase_add_test(tc, test_million_link_then_chain_uses_constant_stack);
    tcase_add_test(tc, test_million_link_chain_on_complete_input);
    tcase_add_test(tc, test_forward_adopts_json_by_reference);
    tcase_add_test(tc, test_forward_adopts_rejection);
    tcase_add_test(tc, test_forward_shares_pointer_and_frees_it_once);
    tcase_add_test(tc, test_forward_to_itself_rejects_einval);
    tcase_add_test(tc, test_forward_to_itself_with_only_reference_is_safe);
    tcase_add_test(tc, test_forward_into_cycle_rejects_einval);
    tcase_add_test(tc, test_forward_bad_input);
    tcase_add_test(tc, test_100k_forward_chain_uses_constant_stack);
    tcase_add_test(tc, test_forward_closing_100k_link_cycle_rejects_einval);
    tcase_add_test(tc, test_forward_cycle_through_then_links_rejects_einval);
    tcase_add_test(tc, test_forward_from_cancelled_link_is_no_cycle);
    suite_add_tcase(s, tc);

    /* Its own case and a short timeout: building this chain took time
     * quadratic in its length (minutes) when each forward walked it. */
    tc = tcase_create("forward_chain");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_million_link_forward_chain_builds_and_settles);
    suite_add_tcase(s, tc);

    tc = tcase_create("cancel");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_cancel_rejects_and_runs_handler_from_loop_first);
    tcase_add_test(tc, test_cancel_handler_not_run_on_fulfil);
    tcase_add_test(tc, test_set_cancel_handler_bad_input);
    tcase_add_test(tc, test_cancel_propagates_through_then_and_catch);
    tcase_add_test(tc, test_cancel_propagates_through_forward);
    tcase_add_test(tc, test_cancel_long_chain_uses_constant_stack);
    tcase_add_test(tc, test_cancelling_every_consumer_cancels_shared_input);
    tcase_add_test(tc, test_cancelling_every_consumer_keeps_input_the_user_holds);
    tcase_add_test(tc, test_cancelling_consumers_of_shared_then_reaches_its_input);
    tcase_add_test(tc, test_on_complete_callback_keeps_shared_input_wanted);
    tcase_add_test(tc, test_timeout_rejects_and_cancels_input);
    tcase_add_test(tc, test_timeout_adopts_input_that_completes_first);
    tcase_add_test(tc, test_timeout_cancel_cancels_input_and_timer);
    tcase_add_test(tc, test_timeout_bad_input);
    tcase_add_test(tc, test_timeout_of_long_max_seconds_never_fires);
    tcase_add_test(tc, test_timeout_with_usec_out_of_range_is_null);
    tcase_add_test(tc, test_all_fulfils_when_all_fulfil);
    tcase_add_test(tc, test_all_rejects_on_first_rejection_and_cancels_rest);
    tcase_add_test(tc, test_all_of_nothing_is_fulfilled);
    tcase_add_test(tc, test_all_and_race_cancel_cancels_inputs);
    tcase_add_test(tc, test_deeply_nested_combinators_release_with_constant_stack);
    tcase_add_test(tc, test_combinator_bad_input_steals_inputs);
    tcase_add_test(tc, test_race_takes_first_and_cancels_losers);
    suite_add_tcase(s, tc);

    tc = tcase_create("wait");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_wait_inside_callback_is_ebusy);
    tcase_add_test(tc, test_wait_inside_libevent_callback_is_ebusy);
    tcase_add_test(tc, test_wait_on_complete_future_returns_at_once);
    suite_add_tcase(s, tc);
    return s;
}
