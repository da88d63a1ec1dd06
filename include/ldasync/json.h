/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/json.h: reading JSON text as LaunchDarkly's SDKs read it.
 *
 * jansson refuses a whole document that holds an integer beyond its
 * json_int_t (64 bits): "too big integer". Such an integer is valid JSON,
 * and LaunchDarkly's SDKs, whose numbers are doubles, read it as the
 * nearest double. These functions load as jansson's json_loadb() and
 * json_load_callback() do, with the same flags and errors, except that an
 * integer beyond json_int_t (above 9223372036854775807 or below
 * -9223372036854775808) is read as a real (10000000000000000000 as 1e19).
 * Every other number is read as jansson reads it: integers within range
 * stay integers, reals stay reals. The library reads all JSON text (flag
 * files) this way; a program that hands the library JSON it parsed itself
 * (a context's JSON, ld_context_from_json) can use them too.
 *
 * Memory: jansson's allocator (json_set_alloc_funcs); nothing else is
 * allocated. Thread rules: jansson's (any thread; the callback is called on
 * the calling thread).
 */
#ifndef LDASYNC_JSON_H
#define LDASYNC_JSON_H

#include <jansson.h>
#include <stddef.h>

#include <ldasync/common.h>

LD_BEGIN_DECLS

/** json_loadb(), with integers beyond json_int_t read as reals: the
 *  `buflen` bytes of `buffer` (NUL bytes need JSON_ALLOW_NUL, as in
 *  jansson), jansson's `flags`. A document with such an integer is read
 *  twice (the first read stops at it). @return a new reference; NULL on
 *  an error, described in `error` (may be NULL) as jansson describes it
 *  (NULL `buffer`: "wrong arguments"). An error found after such an
 *  integer is placed 2 bytes further than it is, per such integer before
 *  it. @since 0.1.0 */
LD_EXPORT json_t *ld_json_loadb(const char *buffer, size_t buflen, size_t flags,
                                json_error_t *error);

/** json_load_callback(), with integers beyond json_int_t read as reals:
 *  `callback` is called with `data` until it returns 0 (the end) or
 *  (size_t)-1 (a read error, which jansson takes as the end: the load
 *  fails, as a premature end of input, unless the text read is whole); it
 *  is asked for at most 4 KiB at a time. The text is read
 *  once, through a 4 KiB buffer on the stack. @return a new reference;
 *  NULL on an error, described in `error` (may be NULL) as jansson
 *  describes it (NULL `callback`: "wrong arguments"); positions after such
 *  an integer as for ld_json_loadb(). @since 0.1.0 */
LD_EXPORT json_t *ld_json_load_callback(json_load_callback_t callback, void *data, size_t flags,
                                        json_error_t *error);

LD_END_DECLS

#endif /* LDASYNC_JSON_H */
