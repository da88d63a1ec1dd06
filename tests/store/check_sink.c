/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* Update sinks: the front layer, the store sink and its data-source status. */
#include <string.h>
#include <time.h>

#include "check_suites.h"
#include "check_util.h"

#define B ld_test_base

static ld_store *store;
static ld_update_sink *sink;

/* ---- what listeners heard -------------------------------------------------- */

struct heard {
    char who;
    enum ld_data_source_state state;
    int64_t since_ms;
    int has_error;
    ld_data_source_error_info error;
    char message[64];
};

static struct heard heard[32];
static int nheard;

static void record(ld_update_sink *s, const ld_data_source_status *st, void *arg)
{
    ck_assert_ptr_eq(s, sink);
    ck_assert_int_lt(nheard, 32);
    struct heard *h = &heard[nheard++];
    h->who = (char)(intptr_t)arg;
    h->state = st->state;
    h->since_ms = st->since_ms;
    h->has_error = st->error != NULL;
    if (st->error) {
        h->error = *st->error;
        snprintf(h->message, sizeof(h->message), "%s", st->error->message);
        h->error.message = h->message;
    }
}

static int64_t listen_as(char who)
{
    int64_t id = ld_store_sink_add_listener(sink, record, (void *)(intptr_t)who);
    ck_assert_int_gt(id, 0);
    return id;
}

/* The sequence of listener tags heard so far, e.g. "ABAB". */
static const char *who_heard(void)
{
    static char buf[33];
    for (int i = 0; i < nheard; i++)
        buf[i] = heard[i].who;
    buf[nheard] = '\0';
    return buf;
}

static ld_data_source_status status(void)
{
    ld_data_source_status st;
    ck_assert_int_eq(ld_store_sink_status(sink, &st), 0);
    return st;
}

static void report(enum ld_data_source_state state, const ld_data_source_error_info *error)
{
    ck_assert_int_eq(ld_update_sink_update_status(sink, state, error), 0);
}

static ld_data_source_error_info net_error(const char *message)
{
    ld_data_source_error_info e = {LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0, 1700000000000, message};
    return e;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* ---- fixtures, helpers ----------------------------------------------------- */

static void sink_setup(void)
{
    ld_test_setup();
    store = ld_memory_store_new(B);
    ck_assert_ptr_nonnull(store);
    sink = ld_store_sink_new(store);
    ck_assert_ptr_nonnull(sink);
    nheard = 0;
}

static void sink_teardown(void)
{
    ld_update_sink_free(sink);
    sink = NULL;
    ld_test_flush(); /* operations of the sink finish before their store goes */
    ld_store_free(store);
    store = NULL;
    ld_test_teardown();
}

static json_t *foo_bar_data(void)
{
    return json_pack("{s:{s:o, s:o}, s:{}}", "features", "foo", ld_test_feature("foo", 10), "bar",
                     ld_test_feature("bar", 10), "segments");
}

static int64_t store_version(const char *key)
{
    ld_future *f = ld_test_fulfilled(ld_store_get(store, ld_kind_features(), key));
    int64_t v = ld_future_json(f) ? ld_item_version(ld_future_json(f)) : -1;
    ld_future_unref(f);
    return v;
}

/* ---- the status rules ------------------------------------------------------ */

START_TEST(test_new_sink_is_initializing_since_its_creation_without_error)
{
    struct timeval before, after;
    gettimeofday(&before, NULL);
    ld_update_sink *s = ld_store_sink_new(store);
    gettimeofday(&after, NULL);
    ld_data_source_status st;
    ck_assert_int_eq(ld_store_sink_status(s, &st), 0);
    ck_assert_int_eq(st.state, LD_DATA_SOURCE_STATE_INITIALIZING);
    ck_assert_ptr_null(st.error);
    ck_assert_int_ge(st.since_ms, (int64_t)before.tv_sec * 1000 + before.tv_usec / 1000);
    ck_assert_int_le(st.since_ms, (int64_t)after.tv_sec * 1000 + after.tv_usec / 1000);
    ld_update_sink_free(s);
}
END_TEST

START_TEST(test_valid_changes_the_state_and_since_and_is_broadcast)
{
    listen_as('A');
    int64_t created = status().since_ms;
    sleep_ms(3);
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    ck_assert_int_eq(status().state, LD_DATA_SOURCE_STATE_VALID);
    ck_assert_int_gt(status().since_ms, created);
    ck_assert_ptr_null(status().error);
    ld_test_flush();
    ck_assert_int_eq(nheard, 1);
    ck_assert_int_eq(heard[0].state, LD_DATA_SOURCE_STATE_VALID);
    ck_assert_int_eq(heard[0].since_ms, status().since_ms);
    ck_assert(!heard[0].has_error);
}
END_TEST

START_TEST(test_interrupted_while_initializing_stays_initializing)
{
    listen_as('A');
    int64_t since = status().since_ms;
    sleep_ms(3);
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, NULL); /* no change, no error: nothing */
    ck_assert_int_eq(status().state, LD_DATA_SOURCE_STATE_INITIALIZING);
    ck_assert_int_eq(status().since_ms, since);
    ld_test_flush();
    ck_assert_int_eq(nheard, 0);
    ld_data_source_error_info e = net_error("refused");
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, &e); /* a new error: broadcast, still initializing */
    ck_assert_int_eq(status().state, LD_DATA_SOURCE_STATE_INITIALIZING);
    ck_assert_int_eq(status().since_ms, since);
    ck_assert_str_eq(status().error->message, "refused");
    ld_test_flush();
    ck_assert_int_eq(nheard, 1);
    ck_assert_int_eq(heard[0].state, LD_DATA_SOURCE_STATE_INITIALIZING);
    ck_assert_int_eq(heard[0].error.kind, LD_DATA_SOURCE_ERROR_KIND_NETWORK);
}
END_TEST

START_TEST(test_interrupted_after_valid_is_interrupted)
{
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    ld_data_source_error_info e = {LD_DATA_SOURCE_ERROR_KIND_RESPONSE, 503, 1700000000123,
                                   "service unavailable"};
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, &e);
    ld_data_source_status st = status();
    ck_assert_int_eq(st.state, LD_DATA_SOURCE_STATE_INTERRUPTED);
    ck_assert_ptr_nonnull(st.error);
    ck_assert_int_eq(st.error->kind, LD_DATA_SOURCE_ERROR_KIND_RESPONSE);
    ck_assert_int_eq(st.error->status_code, 503);
    ck_assert_int_eq(st.error->time_ms, 1700000000123);
    ck_assert_str_eq(st.error->message, "service unavailable");
}
END_TEST

START_TEST(test_same_state_without_error_is_not_broadcast_and_keeps_since)
{
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    int64_t since = status().since_ms;
    listen_as('A');
    sleep_ms(3);
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    ck_assert_int_eq(status().since_ms, since);
    ld_test_flush();
    ck_assert_int_eq(nheard, 0);
}
END_TEST

START_TEST(test_new_error_in_the_same_state_is_broadcast_and_keeps_since)
{
    ld_data_source_error_info e = net_error("first");
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, &e);
    int64_t since = status().since_ms;
    listen_as('A');
    sleep_ms(3);
    e = net_error("second");
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, &e);
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, &e); /* the same error again is a new report */
    ck_assert_int_eq(status().since_ms, since);
    ck_assert_str_eq(status().error->message, "second");
    ld_test_flush();
    ck_assert_int_eq(nheard, 2);
    ck_assert_int_eq(heard[0].since_ms, since);
    ck_assert_str_eq(heard[1].message, "second");
}
END_TEST

START_TEST(test_error_is_kept_when_a_report_has_none)
{
    ld_data_source_error_info e = net_error("reset by peer");
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, &e);
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    ld_data_source_status st = status();
    ck_assert_int_eq(st.state, LD_DATA_SOURCE_STATE_VALID);
    ck_assert_ptr_nonnull(st.error);
    ck_assert_int_eq(st.error->kind, LD_DATA_SOURCE_ERROR_KIND_NETWORK);
    ck_assert_str_eq(st.error->message, "reset by peer");
}
END_TEST

START_TEST(test_error_message_is_copied_and_null_reads_as_empty)
{
    char msg[] = "timeout";
    ld_data_source_error_info e = net_error(msg);
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, &e);
    strcpy(msg, "changed");
    ck_assert_str_eq(status().error->message, "timeout");
    e.message = NULL;
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, &e);
    ck_assert_str_eq(status().error->message, "");
}
END_TEST

START_TEST(test_error_time_zero_means_now)
{
    struct timeval before, after;
    ld_data_source_error_info e = {LD_DATA_SOURCE_ERROR_KIND_UNKNOWN, 0, 0, "?"};
    gettimeofday(&before, NULL);
    report(LD_DATA_SOURCE_STATE_OFF, &e);
    gettimeofday(&after, NULL);
    ck_assert_int_ge(status().error->time_ms,
                     (int64_t)before.tv_sec * 1000 + before.tv_usec / 1000);
    ck_assert_int_le(status().error->time_ms, (int64_t)after.tv_sec * 1000 + after.tv_usec / 1000);
    ck_assert_int_eq(e.time_ms, 0); /* the caller's error is not written to */
}
END_TEST

START_TEST(test_off_is_a_state_like_the_others)
{
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    report(LD_DATA_SOURCE_STATE_OFF, NULL);
    ck_assert_int_eq(status().state, LD_DATA_SOURCE_STATE_OFF);
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, NULL); /* off is not initializing: this applies */
    ck_assert_int_eq(status().state, LD_DATA_SOURCE_STATE_INTERRUPTED);
}
END_TEST

/* ---- forwarding to the store ---------------------------------------------- */

START_TEST(test_init_reaches_the_store_and_does_not_make_the_status_valid)
{
    listen_as('A');
    json_t *data = foo_bar_data();
    ld_future_unref(ld_test_fulfilled(ld_update_sink_init(sink, data)));
    json_decref(data);
    ck_assert_int_eq(store_version("foo"), 10);
    ck_assert(ld_test_await_bool(ld_store_initialized(store)));
    ck_assert_int_eq(status().state, LD_DATA_SOURCE_STATE_INITIALIZING);
    ld_test_flush();
    ck_assert_int_eq(nheard, 0);
}
END_TEST

START_TEST(test_upsert_and_delete_give_the_store_results)
{
    json_t *data = foo_bar_data();
    ld_future_unref(ld_test_fulfilled(ld_update_sink_init(sink, data)));
    json_decref(data);
    json_t *newer = ld_test_feature("foo", 11), *older = ld_test_feature("bar", 9);
    ck_assert(ld_test_await_bool(ld_update_sink_upsert(sink, ld_kind_features(), newer)));
    ck_assert(!ld_test_await_bool(ld_update_sink_upsert(sink, ld_kind_features(), older)));
    ck_assert_int_eq(store_version("foo"), 11);
    ck_assert_int_eq(store_version("bar"), 10);
    ck_assert(ld_test_await_bool(ld_update_sink_delete(sink, ld_kind_features(), "bar", 11)));
    ck_assert(!ld_test_await_bool(ld_update_sink_delete(sink, ld_kind_features(), "foo", 11)));
    ck_assert_int_eq(store_version("bar"), -1);
    ck_assert_int_eq(store_version("foo"), 11);
    json_decref(newer);
    json_decref(older);
}
END_TEST

START_TEST(test_data_the_store_rejects_as_invalid_is_not_a_store_error)
{
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    listen_as('A');
    json_t *bad = json_pack("{s:s}", "key", "foo");
    ld_test_expect_error(ld_update_sink_upsert(sink, ld_kind_features(), bad), LD_EINVAL,
                         "version");
    json_decref(bad);
    ld_test_expect_error(ld_update_sink_delete(sink, ld_kind_features(), "", 1), LD_EINVAL, "key");
    ld_test_expect_error(ld_update_sink_delete(sink, ld_kind_features(), "k", -1), LD_EINVAL,
                         "version");
    bad = json_pack("{s:[]}", "features");
    ld_test_expect_error(ld_update_sink_init(sink, bad), LD_EINVAL, NULL);
    json_decref(bad);
    ld_test_flush();
    ck_assert_int_eq(status().state, LD_DATA_SOURCE_STATE_VALID);
    ck_assert_ptr_null(status().error);
    ck_assert_int_eq(nheard, 0);
}
END_TEST

/* ---- store failures -------------------------------------------------------- */

/* A store whose writes fail with `code` while `code` is set, and otherwise
 * succeed; with `hold` set, they wait in `held` for the test to complete
 * them. */
struct script {
    int code;
    const char *message;
    int hold;
    ld_future *held[4];
    int nheld;
};

static void script_write(struct script *s, ld_future *out, int is_bool)
{
    if (s->hold) {
        s->held[s->nheld++] = out;
        return;
    }
    if (s->code)
        ld_future_reject(out, s->code, "%s", s->message);
    else if (is_bool)
        ld_future_fulfill_bool(out, true);
    else
        ld_future_fulfill(out);
    ld_future_unref(out);
}

static void script_get(void *impl, const ld_kind *k, const char *key, ld_future *out)
{
    (void)impl;
    (void)k;
    (void)key;
    ld_future_fulfill_json(out, NULL);
    ld_future_unref(out);
}

static void script_all(void *impl, const ld_kind *k, ld_future *out)
{
    (void)impl;
    (void)k;
    ld_future_fulfill_json(out, json_object());
    ld_future_unref(out);
}

static void script_init(void *impl, const json_t *d, ld_future *out)
{
    (void)d;
    script_write(impl, out, 0);
}

static void script_upsert(void *impl, const ld_kind *k, const json_t *item,
                          const struct ld_item_info *info, ld_future *out)
{
    (void)k;
    (void)item;
    (void)info;
    script_write(impl, out, 1);
}

static void script_del(void *impl, const ld_kind *k, const char *key, int64_t v, ld_future *out)
{
    (void)k;
    (void)key;
    (void)v;
    script_write(impl, out, 1);
}

static void script_initialized(void *impl, ld_future *out)
{
    (void)impl;
    ld_future_fulfill_bool(out, false);
    ld_future_unref(out);
}

static void script_free(void *impl)
{
    struct script *s = impl;
    for (int i = 0; i < s->nheld; i++)
        ld_future_unref(s->held[i]);
    s->nheld = 0;
}

static const struct ld_store_ops script_ops = {
    .version = LD_STORE_OPS_VERSION,
    .get = script_get,
    .all = script_all,
    .init = script_init,
    .upsert = script_upsert,
    .del = script_del,
    .initialized = script_initialized,
    .free = script_free,
};

static struct script script;

static void script_setup(void)
{
    ld_test_setup();
    memset(&script, 0, sizeof(script));
    script.code = LD_ESTORE;
    script.message = "disk on fire";
    store = ld_store_new(B, &script_ops, &script);
    ck_assert_ptr_nonnull(store);
    sink = ld_store_sink_new(store);
    ck_assert_ptr_nonnull(sink);
    nheard = 0;
}

/* Issues one write of kind `op` (0 init, 1 upsert, 2 delete). */
static ld_future *write_op(int op)
{
    json_t *data = op == 0 ? foo_bar_data() : ld_test_feature("foo", 1);
    ld_future *f = op == 0   ? ld_update_sink_init(sink, data)
                   : op == 1 ? ld_update_sink_upsert(sink, ld_kind_features(), data)
                             : ld_update_sink_delete(sink, ld_kind_features(), "foo", 2);
    json_decref(data);
    ck_assert_ptr_nonnull(f);
    return f;
}

START_TEST(test_store_failure_sets_interrupted_and_store_error)
{
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    listen_as('A');
    struct timeval before;
    gettimeofday(&before, NULL);
    ld_test_expect_error(write_op(_i), LD_ESTORE, "disk on fire");
    ld_data_source_status st = status();
    ck_assert_int_eq(st.state, LD_DATA_SOURCE_STATE_INTERRUPTED);
    ck_assert_ptr_nonnull(st.error);
    ck_assert_int_eq(st.error->kind, LD_DATA_SOURCE_ERROR_KIND_STORE);
    ck_assert_int_eq(st.error->status_code, 0);
    ck_assert_int_ge(st.error->time_ms, (int64_t)before.tv_sec * 1000 + before.tv_usec / 1000);
    ck_assert_str_eq(st.error->message, "disk on fire");
    ld_test_flush();
    ck_assert_int_eq(nheard, 1);
    ck_assert_int_eq(heard[0].state, LD_DATA_SOURCE_STATE_INTERRUPTED);
    ck_assert_int_eq(heard[0].error.kind, LD_DATA_SOURCE_ERROR_KIND_STORE);
}
END_TEST

START_TEST(test_store_failure_while_initializing_stays_initializing)
{
    listen_as('A');
    ld_test_expect_error(write_op(_i), LD_ESTORE, NULL);
    ck_assert_int_eq(status().state, LD_DATA_SOURCE_STATE_INITIALIZING);
    ck_assert_int_eq(status().error->kind, LD_DATA_SOURCE_ERROR_KIND_STORE);
    ld_test_flush();
    ck_assert_int_eq(nheard, 1);
}
END_TEST

START_TEST(test_store_success_changes_no_status)
{
    script.code = 0;
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    listen_as('A');
    ld_future_unref(ld_test_fulfilled(write_op(_i)));
    ld_test_flush();
    ck_assert_int_eq(status().state, LD_DATA_SOURCE_STATE_VALID);
    ck_assert_ptr_null(status().error);
    ck_assert_int_eq(nheard, 0);
}
END_TEST

static int seen_in_callback;

static void check_status_in_callback(ld_future *f, void *arg)
{
    (void)arg;
    ck_assert_int_eq(ld_future_error(f), LD_EIO); /* any code but LD_EINVAL is a store error */
    ck_assert_int_eq(status().state, LD_DATA_SOURCE_STATE_INTERRUPTED);
    ck_assert_int_eq(nheard, 1); /* the broadcast was queued before the result */
    seen_in_callback = 1;
}

START_TEST(test_status_and_broadcast_precede_the_failed_result)
{
    seen_in_callback = 0;
    script.hold = 1;
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    listen_as('A');
    ld_future *f = write_op(1);
    ld_future_on_complete(ld_future_ref(f), check_status_in_callback, NULL);
    ld_test_flush();
    ck_assert(ld_future_is_pending(f));
    ck_assert_int_eq(status().state, LD_DATA_SOURCE_STATE_VALID);
    ld_future_reject(script.held[0], LD_EIO, "socket closed");
    ld_test_flush();
    ck_assert(seen_in_callback);
    ck_assert_str_eq(ld_future_error_message(f), "socket closed");
    ld_future_unref(f);
}
END_TEST

START_TEST(test_free_with_a_store_operation_pending)
{
    script.hold = 1;
    listen_as('A');
    ld_future *f = write_op(1);
    ld_update_sink_free(sink);
    sink = NULL;
    ld_future_reject(script.held[0], LD_ESTORE, "late");
    ld_test_wait(f);
    ck_assert_int_eq(ld_future_error(f), LD_ESTORE); /* the caller still learns it */
    ld_future_unref(f);
    ld_test_flush();
    ck_assert_int_eq(nheard, 0);
}
END_TEST

/* ---- listeners ------------------------------------------------------------- */

START_TEST(test_listeners_run_from_the_loop_not_inside_update_status)
{
    listen_as('A');
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    ck_assert_int_eq(nheard, 0);
    ld_test_flush();
    ck_assert_int_eq(nheard, 1);
    ld_test_flush();
    ck_assert_int_eq(nheard, 1); /* exactly once */
}
END_TEST

START_TEST(test_listeners_hear_each_broadcast_in_order_added)
{
    listen_as('A');
    listen_as('B');
    listen_as('C');
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    ld_data_source_error_info e = net_error("x");
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, &e);
    ld_test_flush();
    ck_assert_str_eq(who_heard(), "ABCABC");
    ck_assert_int_eq(heard[0].state, LD_DATA_SOURCE_STATE_VALID);
    ck_assert_int_eq(heard[3].state, LD_DATA_SOURCE_STATE_INTERRUPTED);
}
END_TEST

START_TEST(test_listeners_hear_the_status_as_it_was_at_broadcast_time)
{
    listen_as('A');
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    int64_t valid_since = status().since_ms;
    sleep_ms(3);
    ld_data_source_error_info e = net_error("one");
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, &e);
    e = net_error("two");
    report(LD_DATA_SOURCE_STATE_INTERRUPTED, &e);
    report(LD_DATA_SOURCE_STATE_OFF, NULL);
    ld_test_flush(); /* all four were made before any was heard */
    ck_assert_int_eq(nheard, 4);
    ck_assert_int_eq(heard[0].state, LD_DATA_SOURCE_STATE_VALID);
    ck_assert_int_eq(heard[0].since_ms, valid_since);
    ck_assert(!heard[0].has_error);
    ck_assert_int_eq(heard[1].state, LD_DATA_SOURCE_STATE_INTERRUPTED);
    ck_assert_int_gt(heard[1].since_ms, valid_since);
    ck_assert_str_eq(heard[1].message, "one");
    ck_assert_str_eq(heard[2].message, "two");
    ck_assert_int_eq(heard[3].state, LD_DATA_SOURCE_STATE_OFF);
    ck_assert_str_eq(heard[3].message, "two");
}
END_TEST

START_TEST(test_a_listener_added_after_a_broadcast_does_not_hear_it)
{
    listen_as('A');
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    listen_as('B');
    ld_test_flush();
    ck_assert_str_eq(who_heard(), "A");
    report(LD_DATA_SOURCE_STATE_OFF, NULL);
    ld_test_flush();
    ck_assert_str_eq(who_heard(), "AAB");
}
END_TEST

START_TEST(test_no_broadcast_is_queued_without_listeners)
{
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    ck_assert_int_eq(event_base_get_num_events(B, EVENT_BASE_COUNT_ACTIVE), 0);
    listen_as('A');
    report(LD_DATA_SOURCE_STATE_OFF, NULL);
    ck_assert_int_eq(event_base_get_num_events(B, EVENT_BASE_COUNT_ACTIVE), 1);
    ld_test_flush();
    ck_assert_str_eq(who_heard(), "A");
}
END_TEST

START_TEST(test_a_removed_listener_misses_broadcasts_already_queued)
{
    int64_t a = listen_as('A');
    listen_as('B');
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    ck_assert_int_eq(ld_store_sink_remove_listener(sink, a), 0);
    ld_test_flush();
    ck_assert_str_eq(who_heard(), "B");
}
END_TEST

START_TEST(test_remove_listener_rejects_unknown_ids)
{
    int64_t a = listen_as('A');
    ck_assert_int_eq(ld_store_sink_remove_listener(sink, a + 1), LD_EINVAL);
    ck_assert_int_eq(ld_store_sink_remove_listener(sink, 0), LD_EINVAL);
    ck_assert_int_eq(ld_store_sink_remove_listener(sink, -1), LD_EINVAL);
    ck_assert_int_eq(ld_store_sink_remove_listener(sink, a), 0);
    ck_assert_int_eq(ld_store_sink_remove_listener(sink, a), LD_EINVAL);
    ck_assert_int_gt(listen_as('B'), a); /* ids are not reused */
}
END_TEST

/* Listeners that act on the sink from inside. */
static int64_t ids[4];

static void remove_self_and_c(ld_update_sink *s, const ld_data_source_status *st, void *arg)
{
    record(s, st, arg);
    ck_assert_int_eq(ld_store_sink_remove_listener(s, ids[0]), 0);
    ck_assert_int_eq(ld_store_sink_remove_listener(s, ids[2]), 0);
}

START_TEST(test_a_listener_may_remove_itself_and_others)
{
    ids[0] = ld_store_sink_add_listener(sink, remove_self_and_c, (void *)(intptr_t)'A');
    ids[1] = listen_as('B');
    ids[2] = listen_as('C');
    ids[3] = listen_as('D');
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    report(LD_DATA_SOURCE_STATE_OFF, NULL);
    ld_test_flush();
    ck_assert_str_eq(who_heard(), "ABDBD");
    ck_assert_int_eq(ld_store_sink_remove_listener(sink, ids[0]), LD_EINVAL);
    ck_assert_int_eq(ld_store_sink_remove_listener(sink, ids[3]), 0); /* the tail, after sweep */
    listen_as('E');
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    ld_test_flush();
    ck_assert_str_eq(who_heard(), "ABDBDBE");
}
END_TEST

static void report_from_inside(ld_update_sink *s, const ld_data_source_status *st, void *arg)
{
    record(s, st, arg);
    if (st->state == LD_DATA_SOURCE_STATE_VALID) {
        listen_as('N'); /* hears what comes next, not the broadcast being heard */
        int before = nheard;
        ck_assert_int_eq(ld_update_sink_update_status(s, LD_DATA_SOURCE_STATE_OFF, NULL), 0);
        ck_assert_int_eq(nheard, before); /* not re-entrant */
    }
}

START_TEST(test_a_listener_reporting_a_status_is_heard_later_not_reentrantly)
{
    ld_store_sink_add_listener(sink, report_from_inside, (void *)(intptr_t)'A');
    listen_as('B');
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    ld_test_flush();
    ck_assert_str_eq(who_heard(), "ABABN");
    ck_assert_int_eq(heard[1].state, LD_DATA_SOURCE_STATE_VALID);
    ck_assert_int_eq(heard[2].state, LD_DATA_SOURCE_STATE_OFF);
}
END_TEST

static void free_sink_inside(ld_update_sink *s, const ld_data_source_status *st, void *arg)
{
    record(s, st, arg);
    ld_update_sink_free(s);
    sink = NULL;
}

START_TEST(test_a_listener_may_free_the_sink)
{
    ld_store_sink_add_listener(sink, free_sink_inside, (void *)(intptr_t)'A');
    listen_as('B');
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    report(LD_DATA_SOURCE_STATE_OFF, NULL);
    ld_test_flush();
    ck_assert_str_eq(who_heard(), "A"); /* nothing after the free */
}
END_TEST

START_TEST(test_free_with_broadcasts_pending_calls_no_listener)
{
    listen_as('A');
    report(LD_DATA_SOURCE_STATE_VALID, NULL);
    report(LD_DATA_SOURCE_STATE_OFF, NULL);
    ld_update_sink_free(sink);
    sink = NULL;
    ld_test_flush();
    ck_assert_int_eq(nheard, 0);
}
END_TEST

/* ---- bad input -------------------------------------------------------------- */

START_TEST(test_bad_input_is_einval)
{
    const ld_kind *F = ld_kind_features();
    json_t *item = ld_test_feature("foo", 1);
    ck_assert_ptr_null(ld_store_sink_new(NULL));
    ck_assert_ptr_null(ld_update_sink_init(NULL, item));
    ck_assert_ptr_null(ld_update_sink_upsert(NULL, F, item));
    ck_assert_ptr_null(ld_update_sink_delete(NULL, F, "foo", 1));
    ck_assert_int_eq(ld_update_sink_update_status(NULL, LD_DATA_SOURCE_STATE_VALID, NULL),
                     LD_EINVAL);
    ld_update_sink_free(NULL);
    ld_test_expect_error(ld_update_sink_init(sink, NULL), LD_EINVAL, "all_data");
    ld_test_expect_error(ld_update_sink_upsert(sink, NULL, item), LD_EINVAL, "kind");
    ld_test_expect_error(ld_update_sink_upsert(sink, F, NULL), LD_EINVAL, "item");
    ld_test_expect_error(ld_update_sink_delete(sink, NULL, "foo", 1), LD_EINVAL, "kind");
    ld_test_expect_error(ld_update_sink_delete(sink, F, NULL, 1), LD_EINVAL, "key");
    json_decref(item);
}
END_TEST

START_TEST(test_bad_status_reports_are_einval_and_change_nothing)
{
    listen_as('A');
    ld_data_source_error_info bad[] = {
        {(enum ld_data_source_error_kind)5, 0, 1, "m"},
        {(enum ld_data_source_error_kind) - 1, 0, 1, "m"},
        {LD_DATA_SOURCE_ERROR_KIND_RESPONSE, -1, 1, "m"},
        {LD_DATA_SOURCE_ERROR_KIND_RESPONSE, 99, 1, "m"},
        {LD_DATA_SOURCE_ERROR_KIND_RESPONSE, 1000, 1, "m"},
        {LD_DATA_SOURCE_ERROR_KIND_NETWORK, 0, -1, "m"},
    };
    ck_assert_int_eq(ld_update_sink_update_status(sink, (enum ld_data_source_state)4, NULL),
                     LD_EINVAL);
    ck_assert_int_eq(ld_update_sink_update_status(sink, (enum ld_data_source_state) - 1, NULL),
                     LD_EINVAL);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_int_eq(ld_update_sink_update_status(sink, LD_DATA_SOURCE_STATE_VALID, &bad[i]),
                         LD_EINVAL);
    ck_assert_int_eq(status().state, LD_DATA_SOURCE_STATE_INITIALIZING);
    ck_assert_ptr_null(status().error);
    ld_test_flush();
    ck_assert_int_eq(nheard, 0);
    ld_data_source_error_info edge = {LD_DATA_SOURCE_ERROR_KIND_RESPONSE, 999, 1, "m"};
    report(LD_DATA_SOURCE_STATE_VALID, &edge);
    ck_assert_int_eq(status().error->status_code, 999);
    edge.status_code = 100;
    report(LD_DATA_SOURCE_STATE_VALID, &edge);
    ck_assert_int_eq(status().error->status_code, 100);
}
END_TEST

START_TEST(test_store_sink_functions_check_their_arguments)
{
    ld_data_source_status st;
    ck_assert_int_eq(ld_store_sink_status(NULL, &st), LD_EINVAL);
    ck_assert_int_eq(ld_store_sink_status(sink, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_store_sink_add_listener(NULL, record, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_store_sink_add_listener(sink, NULL, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_store_sink_remove_listener(NULL, 1), LD_EINVAL);
}
END_TEST

/* ---- the interface: a custom sink ------------------------------------------ */

struct custom {
    int inits, upserts, dels, statuses, freed;
    const json_t *data;
    const ld_kind *kind;
    char key[16];
    int64_t version;
    enum ld_data_source_state state;
    int had_error;
    ld_data_source_error_info error;
};

static void custom_init(void *impl, const json_t *d, ld_future *out)
{
    struct custom *c = impl;
    c->inits++;
    c->data = d;
    ck_assert(ld_future_is_pending(out));
    ld_future_fulfill(out);
    ld_future_unref(out);
}

static void custom_upsert(void *impl, const ld_kind *k, const json_t *item, ld_future *out)
{
    struct custom *c = impl;
    c->upserts++;
    c->kind = k;
    c->data = item;
    ld_future_fulfill_bool(out, true);
    ld_future_unref(out);
}

static void custom_del(void *impl, const ld_kind *k, const char *key, int64_t v, ld_future *out)
{
    struct custom *c = impl;
    c->dels++;
    c->kind = k;
    snprintf(c->key, sizeof(c->key), "%s", key);
    c->version = v;
    ld_future_fulfill_bool(out, false);
    ld_future_unref(out);
}

static int custom_update_status(void *impl, enum ld_data_source_state state,
                                const ld_data_source_error_info *e)
{
    struct custom *c = impl;
    c->statuses++;
    c->state = state;
    c->had_error = e != NULL;
    if (e)
        c->error = *e;
    return state == LD_DATA_SOURCE_STATE_OFF ? LD_ENOMEM : 0;
}

static void custom_free(void *impl)
{
    ((struct custom *)impl)->freed++;
}

static const struct ld_update_sink_ops custom_ops = {
    .version = LD_UPDATE_SINK_OPS_VERSION,
    .init = custom_init,
    .upsert = custom_upsert,
    .del = custom_del,
    .update_status = custom_update_status,
    .free = custom_free,
};

START_TEST(test_a_custom_sink_gets_every_call)
{
    struct custom c = {0};
    ld_update_sink *s = ld_update_sink_new(B, &custom_ops, &c);
    ck_assert_ptr_nonnull(s);
    json_t *data = foo_bar_data(), *item = ld_test_feature("x", 3);
    ld_future_unref(ld_test_fulfilled(ld_update_sink_init(s, data)));
    ck_assert_int_eq(c.inits, 1);
    ck_assert_ptr_eq(c.data, data);
    ck_assert(ld_test_await_bool(ld_update_sink_upsert(s, ld_kind_segments(), item)));
    ck_assert_ptr_eq(c.kind, ld_kind_segments());
    ck_assert_ptr_eq(c.data, item);
    ck_assert(!ld_test_await_bool(ld_update_sink_delete(s, ld_kind_features(), "gone", 7)));
    ck_assert_str_eq(c.key, "gone");
    ck_assert_int_eq(c.version, 7);
    ck_assert_int_eq(ld_update_sink_update_status(s, LD_DATA_SOURCE_STATE_VALID, NULL), 0);
    ck_assert(!c.had_error);
    ld_data_source_error_info e = {LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA, 0, 0, "bad json"};
    ck_assert_int_eq(ld_update_sink_update_status(s, LD_DATA_SOURCE_STATE_INTERRUPTED, &e), 0);
    ck_assert_int_eq(c.state, LD_DATA_SOURCE_STATE_INTERRUPTED);
    ck_assert_int_eq(c.error.kind, LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA);
    ck_assert_int_gt(c.error.time_ms, 0); /* 0 became now */
    ck_assert_int_eq(ld_update_sink_update_status(s, LD_DATA_SOURCE_STATE_OFF, NULL),
                     LD_ENOMEM); /* passed on */
    ck_assert_int_eq(c.statuses, 3);
    /* store sink functions are not for other sinks */
    ld_data_source_status st;
    ck_assert_int_eq(ld_store_sink_status(s, &st), LD_EINVAL);
    ck_assert_int_eq(ld_store_sink_add_listener(s, record, NULL), LD_EINVAL);
    ck_assert_int_eq(ld_store_sink_remove_listener(s, 1), LD_EINVAL);
    /* bad input never reaches the implementation */
    ld_test_expect_error(ld_update_sink_upsert(s, NULL, item), LD_EINVAL, "kind");
    ck_assert_int_eq(ld_update_sink_update_status(s, (enum ld_data_source_state)9, NULL),
                     LD_EINVAL);
    ck_assert_int_eq(c.upserts, 1);
    ck_assert_int_eq(c.statuses, 3);
    ld_update_sink_free(s);
    ck_assert_int_eq(c.freed, 1);
    json_decref(data);
    json_decref(item);
}
END_TEST

START_TEST(test_update_sink_new_checks_its_arguments)
{
    struct custom c = {0};
    struct ld_update_sink_ops wrong;
    ck_assert_ptr_null(ld_update_sink_new(NULL, &custom_ops, &c));
    ck_assert_ptr_null(ld_update_sink_new(B, NULL, &c));
    LD_TEST_REFUSES(wrong, custom_ops, version, 2, ld_update_sink_new(B, &wrong, &c));
    LD_TEST_REFUSES(wrong, custom_ops, init, NULL, ld_update_sink_new(B, &wrong, &c));
    LD_TEST_REFUSES(wrong, custom_ops, upsert, NULL, ld_update_sink_new(B, &wrong, &c));
    LD_TEST_REFUSES(wrong, custom_ops, del, NULL, ld_update_sink_new(B, &wrong, &c));
    LD_TEST_REFUSES(wrong, custom_ops, update_status, NULL, ld_update_sink_new(B, &wrong, &c));
    wrong = custom_ops;
    wrong.free = NULL; /* optional */
    ld_update_sink *s = ld_update_sink_new(B, &wrong, &c);
    ck_assert_ptr_nonnull(s);
    ld_update_sink_free(s);
    ck_assert_int_eq(c.freed, 0);
}
END_TEST

Suite *ld_suite_sink(void)
{
    Suite *s = suite_create("sink");
    TCase *tc = tcase_create("status");
    tcase_add_checked_fixture(tc, sink_setup, sink_teardown);
    tcase_add_test(tc, test_new_sink_is_initializing_since_its_creation_without_error);
    tcase_add_test(tc, test_valid_changes_the_state_and_since_and_is_broadcast);
    tcase_add_test(tc, test_interrupted_while_initializing_stays_initializing);
    tcase_add_test(tc, test_interrupted_after_valid_is_interrupted);
    tcase_add_test(tc, test_same_state_without_error_is_not_broadcast_and_keeps_since);
    tcase_add_test(tc, test_new_error_in_the_same_state_is_broadcast_and_keeps_since);
    tcase_add_test(tc, test_error_is_kept_when_a_report_has_none);
    tcase_add_test(tc, test_error_message_is_copied_and_null_reads_as_empty);
    tcase_add_test(tc, test_error_time_zero_means_now);
    tcase_add_test(tc, test_off_is_a_state_like_the_others);
    tcase_add_test(tc, test_bad_input_is_einval);
    tcase_add_test(tc, test_bad_status_reports_are_einval_and_change_nothing);
    tcase_add_test(tc, test_store_sink_functions_check_their_arguments);
    suite_add_tcase(s, tc);

    tc = tcase_create("forwarding");
    tcase_add_checked_fixture(tc, sink_setup, sink_teardown);
    tcase_add_test(tc, test_init_reaches_the_store_and_does_not_make_the_status_valid);
    tcase_add_test(tc, test_upsert_and_delete_give_the_store_results);
    tcase_add_test(tc, test_data_the_store_rejects_as_invalid_is_not_a_store_error);
    suite_add_tcase(s, tc);

    tc = tcase_create("store_failure");
    tcase_add_checked_fixture(tc, script_setup, sink_teardown);
    /* _i: 0 init, 1 upsert, 2 delete */
    tcase_add_loop_test(tc, test_store_failure_sets_interrupted_and_store_error, 0, 3);
    tcase_add_loop_test(tc, test_store_failure_while_initializing_stays_initializing, 0, 3);
    tcase_add_loop_test(tc, test_store_success_changes_no_status, 0, 3);
    tcase_add_test(tc, test_status_and_broadcast_precede_the_failed_result);
    tcase_add_test(tc, test_free_with_a_store_operation_pending);
    suite_add_tcase(s, tc);

    tc = tcase_create("listeners");
    tcase_add_checked_fixture(tc, sink_setup, sink_teardown);
    tcase_add_test(tc, test_listeners_run_from_the_loop_not_inside_update_status);
    tcase_add_test(tc, test_listeners_hear_each_broadcast_in_order_added);
    tcase_add_test(tc, test_listeners_hear_the_status_as_it_was_at_broadcast_time);
    tcase_add_test(tc, test_a_listener_added_after_a_broadcast_does_not_hear_it);
    tcase_add_test(tc, test_no_broadcast_is_queued_without_listeners);
    tcase_add_test(tc, test_a_removed_listener_misses_broadcasts_already_queued);
    tcase_add_test(tc, test_remove_listener_rejects_unknown_ids);
    tcase_add_test(tc, test_a_listener_may_remove_itself_and_others);
    tcase_add_test(tc, test_a_listener_reporting_a_status_is_heard_later_not_reentrantly);
    tcase_add_test(tc, test_a_listener_may_free_the_sink);
    tcase_add_test(tc, test_free_with_broadcasts_pending_calls_no_listener);
    suite_add_tcase(s, tc);

    tc = tcase_create("interface");
    tcase_add_checked_fixture(tc, ld_test_setup, ld_test_teardown);
    tcase_add_test(tc, test_a_custom_sink_gets_every_call);
    tcase_add_test(tc, test_update_sink_new_checks_its_arguments);
    suite_add_tcase(s, tc);
    return s;
}
