/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * testing-internal.h: what the parts of libldasync-testing share. Never
 * installed.
 */
#ifndef LDASYNC_TESTING_INTERNAL_H
#define LDASYNC_TESTING_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include <ldasync/alloc.h>
#include <ldasync/future.h>

/*
 * Allocation through the hooks of alloc.h, as in libldasync (whose own
 * wrappers are not exported): the same names, so code reads the same in both
 * libraries.
 */
static inline void *ld__malloc(size_t size)
{
    ld_malloc_fn m;
    ld_get_alloc_funcs(&m, NULL, NULL);
    return m(size ? size : 1);
}

static inline void *ld__calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = ld__malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

static inline void *ld__realloc(void *ptr, size_t size)
{
    ld_realloc_fn r;
    if (!ptr)
        return ld__malloc(size);
    ld_get_alloc_funcs(NULL, &r, NULL);
    return r(ptr, size ? size : 1);
}

static inline void ld__free(void *ptr)
{
    ld_dealloc_fn f;
    if (!ptr)
        return;
    ld_get_alloc_funcs(NULL, NULL, &f);
    f(ptr);
}

static inline char *ld__strdup(const char *s)
{
    size_t len = strlen(s) + 1;
    char *copy = ld__malloc(len);
    if (copy)
        memcpy(copy, s, len);
    return copy;
}

/*
 * The registry of mocks. A mock is an ordinary object of its interface (an
 * ld_store *, ...) whose implementation pointer libldasync keeps private; the
 * registry maps the object back to the mock, so that the ld_mock_* functions
 * take the object itself and can tell a mock of theirs from anything else.
 * `type` is the address of something static of the mock's module (its ops
 * table), so objects of different mocks never match. Any thread (locked).
 */

/* Records that `object` is the mock `mock` of `type`, replacing any entry
 * left for an earlier object at the same address. 0 or LD_ENOMEM. */
int ld__mock_register(const void *object, const void *type, void *mock);

/* Forgets the entry of `object` registered for `mock`, if it is still
 * there; call it from the mock's free. The front layer may have freed
 * `object` already and its address may hold a new mock's object: that
 * one's entry (another `mock`) stays. */
void ld__mock_unregister(const void *object, const void *mock);

/* The mock of `type` registered for `object`, or NULL. */
void *ld__mock_find(const void *object, const void *type);

/*
 * A FIFO of futures that wait for something scripted (a synchronizer's
 * nexts, an initializer's fetches). Zero-initialised means empty. The queue
 * owns one reference to each future in it.
 */
struct ld__waiter;
struct ld__waiters {
    struct ld__waiter *head, *tail;
};

/* Appends `out` (stolen on success). 0 or LD_ENOMEM (`out` untouched). */
int ld__waiters_push(struct ld__waiters *q, ld_future *out);

/* Removes the oldest future and returns it (the caller gets the queue's
 * reference), or NULL if the queue is empty. */
ld_future *ld__waiters_pop(struct ld__waiters *q);

/* Releases every future in the queue and empties it. */
void ld__waiters_drop(struct ld__waiters *q);

#endif /* LDASYNC_TESTING_INTERNAL_H */
