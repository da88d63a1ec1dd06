/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * check_main.c: runs every suite and prints Check's summary line.
 *
 * Check's environment variables apply: CK_RUN_SUITE / CK_RUN_CASE select what runs,
 * CK_VERBOSITY=verbose lists each test (default: normal), CK_FORK=no runs the tests
 * in this process (for gdb and valgrind), CK_TIMEOUT_MULTIPLIER scales timeouts.
 * LDASYNC_SHARD=i/n (1 <= i <= n) runs only every n-th suite from the i-th:
 * `make check-valgrind` runs the shards side by side, one per core.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "check_suites.h"
#include "net/net-internal.h"

/* the suites, a table in columns */
/* clang-format off */
static Suite *(*const suites[])(void) = {
    ld_suite_error,          ld_suite_version,      ld_suite_future,      ld_suite_future_thread,
    ld_suite_worker,         ld_suite_json,         ld_suite_kind,        ld_suite_context,
    ld_suite_store,          ld_suite_memory_load,  ld_suite_store_now,   ld_suite_status,
    ld_suite_sink,           ld_suite_big_segments, ld_suite_bucket,      ld_suite_fdv2,
    ld_suite_file_source,    ld_suite_processor,    ld_suite_fronts,      ld_suite_contract,
    ld_suite_mock_store,     ld_suite_mock_ifaces,  ld_suite_eval_ops,    ld_suite_eval,
    ld_suite_eval_attack,    ld_suite_eval_slices,  ld_suite_eval_big,    ld_suite_eval_slices_attack,
    ld_suite_serve,          ld_suite_serve_e2e,    ld_suite_serve_chaos, ld_suite_serve_loop,
    ld_suite_sse,            ld_suite_http,         ld_suite_backoff,     ld_suite_data_system,
    ld_suite_client,         ld_suite_secure_mode,  ld_suite_streaming,   ld_suite_polling,
    ld_suite_network_attack, ld_suite_client_big_segments, ld_suite_event_sender,
    ld_suite_event_forwarder, ld_suite_summarizer, ld_suite_context_format, ld_suite_event_payload,
    ld_suite_client_big_segments_attack, ld_suite_client_events, ld_suite_client_events_attack,
    ld_suite_client_events_attack2, ld_suite_store_source, ld_suite_caching_store,
    ld_suite_client_events_attack3,
};
/* clang-format on */

/* Whether suite `pos` (from 0) is in the shard LDASYNC_SHARD names (all
 * of them without it). A malformed value runs nothing and says so. */
static bool in_shard(size_t pos, bool *bad)
{
    const char *env = getenv("LDASYNC_SHARD");
    unsigned i, n;
    char end;
    if (!env || !*env)
        return true;
    if (sscanf(env, "%u/%u%c", &i, &n, &end) != 2 || n == 0 || i == 0 || i > n) {
        *bad = true;
        return false;
    }
    return pos % n == i - 1;
}

int main(void)
{
    /* libcurl's memory hooks: this program's copy of http.c, whose
     * ld__http_spare_curl the suites set, not the library's (in one
     * process, CK_FORK=no, the first to use libcurl would win) */
    if (!ld__http_global_init()) {
        fprintf(stderr, "libcurl cannot be initialised\n");
        return EXIT_FAILURE;
    }
    SRunner *runner = srunner_create(NULL);
    bool bad = false;
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        if (in_shard(i, &bad))
            srunner_add_suite(runner, suites[i]());
    if (bad) {
        fprintf(stderr, "LDASYNC_SHARD must be i/n with 1 <= i <= n, not \"%s\"\n",
                getenv("LDASYNC_SHARD"));
        srunner_free(runner);
        return EXIT_FAILURE;
    }
    srunner_run_all(runner, CK_ENV);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
