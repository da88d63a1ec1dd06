/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/alloc.h: the memory functions every ldasync allocation goes through.
 *
 * By default libldasync and libldasync-testing allocate with the C library's
 * malloc, realloc and free.  A program that counts, limits or pools its memory
 * (or a test that makes allocations fail) can replace them, as
 * json_set_alloc_funcs() does for jansson and event_set_mem_functions() for
 * libevent.  jansson and libevent keep their own functions: set those too if
 * they should follow.
 *
 * Lack of memory is reported (LD_ENOMEM, or a future rejected with it) on
 * every path, with one exception that the library cannot avoid: jansson
 * 2.14 itself, when its allocator (json_set_alloc_funcs) fails while it
 * reads JSON text.  Its lexer keeps the token being read in a buffer of 16
 * bytes that doubles as the token grows (load.c, lex_save), and ignores a
 * failure to grow it: the byte is dropped.  So when jansson's allocator
 * fails at the moment a string, key or number of 16 bytes or more (quotes
 * included) grows past 16, 32, 64... bytes, jansson reads a document with
 * that byte missing (a key "abcdefghijklmno" read as "abcdefghijklmn", the
 * number 12345678901234567 as 1234567890123457), or reads past the token's
 * end (SIGSEGV, e.g. a key of exactly 14 or 30 characters), or aborts on
 * one of its assertions.  Every JSON reading of the library (flag files,
 * ld_json_loadb() and ld_json_load_callback()) goes through that lexer, as
 * json_loads() does.  Every other allocation failure of the file source,
 * jansson's included, is reported as LD_ENOMEM (tests/check_chaos.c fails
 * each in turn).
 * A program that makes jansson's allocations fail should do so only where
 * it reads no JSON text, or keep the default allocator for jansson.
 */
#ifndef LDASYNC_ALLOC_H
#define LDASYNC_ALLOC_H

#include <stddef.h>

#include <ldasync/common.h>

LD_BEGIN_DECLS

/** Allocates `size` bytes (never called with 0), suitably aligned for any
 *  object as malloc is; NULL when memory ran out.  @since 0.1.0 */
typedef void *(*ld_malloc_fn)(size_t size);
/** Resizes a block got from the malloc or realloc function (never called
 *  with NULL or 0), as realloc does: NULL, with the block unchanged, when
 *  memory ran out.  @since 0.1.0 */
typedef void *(*ld_realloc_fn)(void *ptr, size_t size);
/** Frees a block got from the other two (never called with NULL).
 *  @since 0.1.0 */
typedef void (*ld_dealloc_fn)(void *ptr);

/*
 * ld_set_alloc_funcs: makes every later allocation of ldasync go through
 * `malloc_fn`, `realloc_fn` and `free_fn`.  All three NULL restores the C
 * library's functions.
 *
 * Call it before any other ldasync function, from one thread, while no other
 * thread uses ldasync.  Blocks allocated before the call are freed later with
 * the new `free_fn`, so change the functions afterwards only to ones that can
 * free each other's blocks (a wrapper around malloc, say).  The functions may
 * be called from any thread that uses ldasync, so they must be thread-safe if
 * the program completes futures from several threads.
 *
 * Futures are carved from slabs that are kept for reuse (not given back to
 * `free_fn`) unless the environment variable LDASYNC_NO_POOL is set when the
 * first future is made.
 *
 * Returns 0, or LD_EINVAL (some but not all of the three are NULL; nothing
 * changed).
 *
 * @since 0.1.0
 */
LD_EXPORT int ld_set_alloc_funcs(ld_malloc_fn malloc_fn, ld_realloc_fn realloc_fn,
                                 ld_dealloc_fn free_fn);

/*
 * ld_get_alloc_funcs: the functions in use (the C library's unless
 * ld_set_alloc_funcs() changed them).  Any of the pointers may be NULL when
 * that function is not wanted.  A store or mock written outside the library
 * can allocate with them so that its memory follows the same rules.
 *
 * @since 0.1.0
 */
LD_EXPORT void ld_get_alloc_funcs(ld_malloc_fn *malloc_fn, ld_realloc_fn *realloc_fn,
                                  ld_dealloc_fn *free_fn);

LD_END_DECLS

#endif /* LDASYNC_ALLOC_H */
