/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * evaluate: evaluating feature flags with ld_evaluator.
 *
 * We put two flags and a segment into a memory store, build a few contexts
 * with the context builder, and print what each flag serves each context,
 * and why (LaunchDarkly's reason JSON). Last, the all-flags state that a
 * client-side SDK would bootstrap from.
 *
 * Build: make; run: ./examples/evaluate (exits 0 when all went well).
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>

#include <ldasync/ldasync.h>

/* The data, as LaunchDarkly's streaming API sends it. "new-checkout" is on
 * for members of segment "beta" and for organizations of the "enterprise"
 * tier, and off otherwise; "banner-color" rolls out colors by percentage. */
static const char *const DATA =
    "{\"features\": {"
    "  \"new-checkout\": {\"key\": \"new-checkout\", \"version\": 3, \"on\": true,"
    "    \"variations\": [false, true], \"offVariation\": 0,"
    "    \"fallthrough\": {\"variation\": 0},"
    "    \"rules\": ["
    "      {\"id\": \"beta-users\", \"variation\": 1, \"clauses\": ["
    "        {\"attribute\": \"\", \"op\": \"segmentMatch\", \"values\": [\"beta\"]}]},"
    "      {\"id\": \"big-orgs\", \"variation\": 1, \"clauses\": ["
    "        {\"contextKind\": \"org\", \"attribute\": \"tier\", \"op\": \"in\","
    "         \"values\": [\"enterprise\"]}]}]},"
    "  \"banner-color\": {\"key\": \"banner-color\", \"version\": 1, \"on\": true,"
    "    \"salt\": \"b2\", \"variations\": [\"red\", \"green\", \"blue\"],"
    "    \"fallthrough\": {\"rollout\": {\"variations\": ["
    "      {\"variation\": 0, \"weight\": 50000}, {\"variation\": 1, \"weight\": 30000},"
    "      {\"variation\": 2, \"weight\": 20000}]}}}},"
    " \"segments\": {"
    "  \"beta\": {\"key\": \"beta\", \"version\": 1, \"included\": [\"alice\"]}}}";

/* Waits for `f` and releases it; false if it was rejected. */
static bool await(ld_future *f)
{
    ld_future_wait(f);
    bool ok = ld_future_is_fulfilled(f);
    if (!ok)
        fprintf(stderr, "failed: %s\n", ld_future_error_message(f));
    ld_future_unref(f);
    return ok;
}

static void print_json(const char *label, json_t *j)
{
    char *text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    printf("%s%s\n", label, text ? text : "?");
    free(text);
}

/* Evaluates `flag` for `ctx` and prints value and reason. */
static bool show(ld_evaluator *ev, const char *flag, ld_context *ctx)
{
    /* The fallback is served when the flag cannot be evaluated; the
     * evaluator takes our reference to it. */
    ld_future *f = ld_evaluator_detail(ev, flag, ctx, LD_VALUE_ANY, json_string("(fallback)"));
    if (ld_future_wait(f) != 0 || !ld_future_is_fulfilled(f)) {
        ld_future_unref(f);
        return false;
    }
    const ld_detail *d = ld_future_ptr(f); /* valid while we hold f */
    printf("  %-13s for %-24s ", flag, ld_context_fully_qualified_key(ctx));
    print_json("= ", ld_detail_value(d));
    json_t *reason = ld_detail_reason_to_json(d);
    print_json("      because ", reason);
    json_decref(reason);
    ld_future_unref(f);
    return true;
}

static ld_context *user(const char *key, const char *name)
{
    ld_context_builder *b = ld_context_builder_new("user", key);
    ld_context_builder_set(b, "name", json_string(name));
    ld_context *ctx = ld_context_builder_build(b, NULL);
    ld_context_builder_free(b);
    return ctx;
}

int main(void)
{
    struct event_base *base = event_base_new();
    ld_store *store = ld_memory_store_new(base);
    json_t *data = json_loads(DATA, 0, NULL);
    if (!base || !store || !data || !await(ld_store_init(store, data)))
        return EXIT_FAILURE;
    json_decref(data);
    ld_evaluator *ev = ld_evaluator_new(store);

    /* Contexts: two users, and a user working for an organization (a
     * multi-kind context of the two). */
    ld_context *alice = user("alice", "Alice");
    ld_context *bob = user("bob", "Bob");
    ld_context_builder *b = ld_context_builder_new("org", "acme");
    ld_context_builder_set(b, "tier", json_string("enterprise"));
    ld_context *acme = ld_context_builder_build(b, NULL);
    ld_context_builder_free(b);
    const ld_context *parts[] = {bob, acme};
    ld_context *bob_at_acme = ld_context_multi(parts, 2, NULL);
    if (!ev || !alice || !bob || !acme || !bob_at_acme)
        return EXIT_FAILURE;

    bool ok = true;
    ld_context *contexts[] = {alice, bob, bob_at_acme};
    for (size_t i = 0; i < 3; i++) {
        ok = show(ev, "new-checkout", contexts[i]) && ok;
        ok = show(ev, "banner-color", contexts[i]) && ok;
    }
    ok = show(ev, "no-such-flag", alice) && ok; /* the fallback, reason ERROR */

    /* Every flag at once, with reasons. */
    ld_future *all = ld_evaluator_all_flags(ev, bob_at_acme, LD_ALL_FLAGS_WITH_REASONS);
    ld_future_wait(all);
    ok = ld_future_is_fulfilled(all) && ok;
    print_json("all flags for bob at acme: ", ld_future_json(all));
    ld_future_unref(all);

    for (size_t i = 0; i < 3; i++)
        ld_context_unref(contexts[i]);
    ld_context_unref(acme);
    ld_evaluator_free(ev);
    ld_store_free(store);
    event_base_loop(base, EVLOOP_NONBLOCK); /* let what the store let go of go */
    event_base_free(base);
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
