/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/error.h: error codes.
 *
 * Every ldasync function that can fail reports a negative int from the table below
 * (0 means success), the way libuv does.  A function that takes a callback and
 * returns an error never calls that callback.
 */
#ifndef LDASYNC_ERROR_H
#define LDASYNC_ERROR_H

#include <ldasync/common.h>

LD_BEGIN_DECLS

/*
 * The one table of error codes: XX(name, value, message).  It generates enum
 * ld_errno, ld_strerror() and ld_err_name(); users may expand it too, e.g. to map
 * codes to their own errors.  Values are part of the ABI and never change.
 */
#define LD_ERRNO_MAP(XX)                         \
    XX(EINVAL, -1, "invalid argument")           \
    XX(ENOMEM, -2, "out of memory")              \
    XX(ECANCELED, -3, "operation canceled")      \
    XX(ETIMEDOUT, -4, "operation timed out")     \
    XX(ECLOSED, -5, "component is closed")       \
    XX(EALREADY, -6, "future already completed") \
    XX(EBUSY, -7, "resource busy")               \
    XX(ESTORE, -8, "store backend failure")      \
    XX(EIO, -9, "i/o error")                     \
    XX(EPARSE, -10, "malformed data")

/*
 * Error codes (all negative): LD_EINVAL, LD_ENOMEM, LD_ECANCELED, LD_ETIMEDOUT,
 * LD_ECLOSED (component closed), LD_EALREADY (future already completed), LD_EBUSY
 * (e.g. waiting inside a loop callback), LD_ESTORE (store backend failure), LD_EIO,
 * LD_EPARSE (malformed data).
 *
 * @since 0.1.0
 */
enum ld_errno {
#define LD_ERRNO_ENUM_(name, value, message) LD_##name = (value),
    LD_ERRNO_MAP(LD_ERRNO_ENUM_)
#undef LD_ERRNO_ENUM_
};

/*
 * ld_strerror: a short English description of an error code, e.g. "invalid argument"
 * for LD_EINVAL.  0 gives "success"; a code not in the table gives "unknown error".
 *
 * Returns a static string: never NULL, never to be freed.  Thread-safe.
 *
 * @since 0.1.0
 */
LD_EXPORT const char *ld_strerror(int code);

/*
 * ld_err_name: the name of an error code's constant, e.g. "LD_EINVAL" for LD_EINVAL.
 * 0 gives "LD_OK"; a code not in the table gives "LD_EUNKNOWN".
 *
 * Returns a static string: never NULL, never to be freed.  Thread-safe.
 *
 * @since 0.1.0
 */
LD_EXPORT const char *ld_err_name(int code);

LD_END_DECLS

#endif /* LDASYNC_ERROR_H */
