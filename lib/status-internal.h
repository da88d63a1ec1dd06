/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: what the users of the data-source status types (sink.c, fdv2.c)
 * share. Never installed.
 */
#ifndef LDASYNC_STATUS_INTERNAL_H
#define LDASYNC_STATUS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <ldasync/status.h>

/* The current time in ms since the Unix epoch. */
int64_t ld__now_ms(void);

/* Checks `in` by the rules of status.h and, if it is valid, sets *out to it
 * with a time of 0 replaced by now and a NULL message by "" (the message is
 * still borrowed, from `in` or static). @return true if `in` is valid. */
bool ld__ds_error_info_prepare(const ld_ds_error_info *in, ld_ds_error_info *out);

#endif /* LDASYNC_STATUS_INTERNAL_H */
