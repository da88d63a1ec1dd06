/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/status.h: the status of a data source: its state, the errors it
 * meets, and the two together with the time the state last changed.
 *
 * These are the types of LaunchDarkly's SDKs (DataSourceState,
 * DataSourceErrorInfo, DataSourceStatus), shared by the update sink a data
 * source reports to (sink.h) and the updates an FDv2 synchronizer yields
 * (fdv2.h).
 *
 * An ld_data_source_error_info handed to a function of this library is borrowed and
 * copied, message included; the caller's struct is never written to. It is
 * valid when:
 *   - kind is an enum ld_data_source_error_kind value;
 *   - status_code is 0 (none) or an HTTP status, 100..999;
 *   - time_ms is >= 0, and 0 means "now": the copy gets the time of the call.
 * An error read back from the library (a sink's status, an FDv2 update) has
 * a time > 0 and a message that is never NULL ("" when none was given).
 */
#ifndef LDASYNC_STATUS_H
#define LDASYNC_STATUS_H

#include <stdint.h>

#include <ldasync/common.h>

LD_BEGIN_DECLS

/** The state of a data source. @since 0.1.0 */
enum ld_data_source_state {
    LD_DATA_SOURCE_STATE_INITIALIZING = 0, /* "initializing": no valid data received yet */
    LD_DATA_SOURCE_STATE_VALID = 1,        /* "valid": receiving data as it should */
    LD_DATA_SOURCE_STATE_INTERRUPTED = 2,  /* "interrupted": had valid data, now has a problem */
    LD_DATA_SOURCE_STATE_OFF = 3           /* "off": stopped for good (given up, or shut down) */
};

/** The kind of a data-source error. @since 0.1.0 */
enum ld_data_source_error_kind {
    LD_DATA_SOURCE_ERROR_KIND_UNKNOWN = 0, /* "unknown" */
    LD_DATA_SOURCE_ERROR_KIND_NETWORK = 1, /* "network_error": connection failed or dropped */
    LD_DATA_SOURCE_ERROR_KIND_RESPONSE =
        2, /* "error_response": the service answered with an error */
    LD_DATA_SOURCE_ERROR_KIND_INVALID_DATA = 3, /* "invalid_data": what was received is malformed */
    LD_DATA_SOURCE_ERROR_KIND_STORE = 4 /* "store_error": the store failed to take an update */
};

/** The name of a state ("initializing", "valid", "interrupted", "off"): a
 *  static string, or NULL for a value that is no state. Any thread.
 *  @since 0.1.0 */
LD_EXPORT const char *ld_data_source_state_name(enum ld_data_source_state state);

/** The name of an error kind ("unknown", "network_error", "error_response",
 *  "invalid_data", "store_error"): a static string, or NULL for a value that
 *  is no error kind. Any thread. @since 0.1.0 */
LD_EXPORT const char *ld_data_source_error_kind_name(enum ld_data_source_error_kind kind);

/** A data-source error; the rules for giving and reading one are at the top
 *  of this file. @since 0.1.0 */
typedef struct ld_data_source_error_info {
    enum ld_data_source_error_kind kind;
    int status_code;     /* the HTTP status (100..999), or 0 if there was none */
    int64_t time_ms;     /* when it happened, in ms since the Unix epoch; given: 0 = now */
    const char *message; /* given: may be NULL; read back: never NULL */
} ld_data_source_error_info;

/** A data-source status, as read with ld_store_sink_status() or given to a
 *  status listener (sink.h). @since 0.1.0 */
typedef struct ld_data_source_status {
    enum ld_data_source_state state;
    int64_t since_ms;                       /* when the state last changed, ms since the epoch */
    const ld_data_source_error_info *error; /* the last error (borrowed), or NULL if none yet */
} ld_data_source_status;

LD_END_DECLS

#endif /* LDASYNC_STATUS_H */
