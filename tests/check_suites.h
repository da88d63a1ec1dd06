/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* check_suites.h: the Check suites that tests/check_main.c runs, one per module. */
#ifndef LDASYNC_TESTS_CHECK_SUITES_H
#define LDASYNC_TESTS_CHECK_SUITES_H

#include <check.h>
#include <ldasync/store.h>

Suite *ld_suite_error(void);         /* check_error.c */
Suite *ld_suite_version(void);       /* check_version.c */
Suite *ld_suite_future(void);        /* check_future.c */
Suite *ld_suite_future_thread(void); /* check_future_thread.c */
Suite *ld_suite_worker(void);        /* check_worker.c */
Suite *ld_suite_json(void);          /* check_json.c */
Suite *ld_suite_kind(void);          /* check_kind.c */
Suite *ld_suite_context(void);       /* check_context.c */
Suite *ld_suite_secure_mode(void);   /* check_secure_mode.c */
Suite *ld_suite_store(void);         /* check_store.c */
Suite *ld_suite_memory_load(void);   /* check_memory_load.c */
Suite *ld_suite_store_now(void);     /* check_store_now.c */
Suite *ld_suite_caching_store(void); /* check_caching_store.c */
/* The hybrid store of check_store_now.c, for the contract. */
ld_store *ld_test_hybrid_store_new(struct event_base *base);
Suite *ld_suite_status(void);                     /* check_status.c */
Suite *ld_suite_sink(void);                       /* check_sink.c */
Suite *ld_suite_big_segments(void);               /* check_big_segments.c */
Suite *ld_suite_bucket(void);                     /* check_bucket.c */
Suite *ld_suite_fdv2(void);                       /* check_fdv2.c */
Suite *ld_suite_file_source(void);                /* check_file_source.c */
Suite *ld_suite_processor(void);                  /* check_processor.c */
Suite *ld_suite_context_format(void);             /* events/check_context_format.c */
Suite *ld_suite_summarizer(void);                 /* events/check_summarizer.c */
Suite *ld_suite_event_payload(void);              /* events/check_payload.c */
Suite *ld_suite_fronts(void);                     /* check_fronts.c */
Suite *ld_suite_contract(void);                   /* check_contract.c */
Suite *ld_suite_mock_store(void);                 /* check_mock_store.c */
Suite *ld_suite_mock_ifaces(void);                /* check_mock_interfaces.c */
Suite *ld_suite_eval_ops(void);                   /* check_eval_ops.c */
Suite *ld_suite_eval(void);                       /* check_eval.c */
Suite *ld_suite_eval_attack(void);                /* check_eval_attack.c */
Suite *ld_suite_eval_slices(void);                /* check_eval_slices.c */
Suite *ld_suite_eval_big(void);                   /* check_eval_big.c */
Suite *ld_suite_eval_slices_attack(void);         /* check_eval_slices_attack.c */
Suite *ld_suite_serve(void);                      /* check_serve.c */
Suite *ld_suite_serve_e2e(void);                  /* check_serve_e2e.c */
Suite *ld_suite_serve_chaos(void);                /* check_serve_chaos.c */
Suite *ld_suite_serve_loop(void);                 /* check_serve_loop.c */
Suite *ld_suite_data_system(void);                /* check_data_system.c */
Suite *ld_suite_sse(void);                        /* net/check_sse.c */
Suite *ld_suite_http(void);                       /* net/check_http.c */
Suite *ld_suite_streaming(void);                  /* net/check_streaming.c */
Suite *ld_suite_polling(void);                    /* net/check_polling.c */
Suite *ld_suite_network_attack(void);             /* net/check_network_attack.c */
Suite *ld_suite_backoff(void);                    /* net/check_backoff.c */
Suite *ld_suite_client(void);                     /* check_client.c */
Suite *ld_suite_client_big_segments(void);        /* check_client_big_segments.c */
Suite *ld_suite_event_sender(void);               /* events/check_sender.c */
Suite *ld_suite_event_forwarder(void);            /* events/check_sender.c */
Suite *ld_suite_client_big_segments_attack(void); /* check_client_big_segments_attack.c */
Suite *ld_suite_client_events(void);              /* events/check_events.c */
Suite *ld_suite_client_events_attack(void);       /* events/check_events_attack.c */
Suite *ld_suite_client_events_attack2(void);      /* events/check_events_attack2.c */
Suite *ld_suite_client_events_attack3(void);      /* events/check_events_attack3.c */
Suite *ld_suite_store_source(void);               /* sources/check_store_source.c */

#endif /* LDASYNC_TESTS_CHECK_SUITES_H */
