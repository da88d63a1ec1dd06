/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/common.h: macros shared by all public ldasync headers.
 *
 * Included by every other ldasync header; there is no need to include it directly.
 */
#ifndef LDASYNC_COMMON_H
#define LDASYNC_COMMON_H

/*
 * LD_EXPORT marks a declaration as part of the library's ABI.  libldasync is
 * compiled with -fvisibility=hidden, so a function without it is invisible outside
 * the library; on ELF the same attribute is right for the library and its users
 * (LD_BUILDING_LIBRARY, defined while compiling libldasync, is available for
 * platforms where the two differ).
 */
#if defined(__GNUC__) || defined(__clang__)
#define LD_EXPORT __attribute__((visibility("default")))
#else
#define LD_EXPORT
#endif

/*
 * LD_PRINTF(fmt, args): the function takes a printf-style format as its parameter
 * number fmt (1-based) and the values from parameter number args on (0 for a
 * va_list), so the compiler checks calls.
 */
#if defined(__GNUC__) || defined(__clang__)
#define LD_PRINTF(fmt, args) __attribute__((__format__(__printf__, fmt, args)))
#else
#define LD_PRINTF(fmt, args)
#endif

/* LD_BEGIN_DECLS / LD_END_DECLS: C linkage for the declarations between them in C++. */
#ifdef __cplusplus
#define LD_BEGIN_DECLS extern "C" {
#define LD_END_DECLS }
#else
#define LD_BEGIN_DECLS
#define LD_END_DECLS
#endif

#endif /* LDASYNC_COMMON_H */
