/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: the data-source status types (status.h): their names, and the
 * rule for an error info handed to the library.
 */
#include <stddef.h>
#include <sys/time.h>

#include <ldasync/status.h>

#include "store/store-internal.h"

static const char *const state_names[] = {"initializing", "valid", "interrupted", "off"};
static const char *const error_kind_names[] = {"unknown", "network_error", "error_response",
                                               "invalid_data", "store_error"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *ld_data_source_state_name(enum ld_data_source_state state)
{
    unsigned i = (unsigned)state; /* negatives too are out of range */
    return i < COUNT(state_names) ? state_names[i] : NULL;
}

const char *ld_data_source_error_kind_name(enum ld_data_source_error_kind kind)
{
    unsigned i = (unsigned)kind;
    return i < COUNT(error_kind_names) ? error_kind_names[i] : NULL;
}

int64_t ld__now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

bool ld__ds_error_info_prepare(const ld_data_source_error_info *in, ld_data_source_error_info *out)
{
    bool valid = ld_data_source_error_kind_name(in->kind) &&
                 (in->status_code == 0 || (in->status_code >= 100 && in->status_code <= 999)) &&
                 in->time_ms >= 0;
    if (!valid)
        return false;
    *out = *in;
    if (out->time_ms == 0)
        out->time_ms = ld__now_ms();
    if (!out->message)
        out->message = "";
    return true;
}
