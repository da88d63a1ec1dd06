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
 * The skeleton of a mock. A mock is an ordinary object of its interface (an
 * ld_store *, ...) made with the interface's _new from the mock's ops table
 * and a struct of the mock's own, which begins with a struct ld__mock. The
 * registry (a short list under a lock: tests hold a handful of mocks at a
 * time) maps the object back to that struct, so that the ld_mock_* functions
 * take the object itself and can tell a mock of theirs from anything else.
 * A mock's `type` is the address of its ops table, so objects of different
 * mocks never match. A constructor reads:
 *
 *     struct mock *m = ld__mock_alloc(base, sizeof(*m), &mock_ops, release);
 *     if (!m)
 *         return NULL;
 *     ...set the fields of m...
 *     return ld__mock_finish(m, fields_ok ? ld_x_new(base, &mock_ops, m) : NULL);
 *
 * with `.free = ld__mock_free` in mock_ops; the ld_mock_* functions find the
 * mock with ld__mock_find(object, &mock_ops).
 */
struct ld__mock {
    struct ld__mock *next; /* in the registry */
    const void *object;    /* the interface's object, once registered */
    const void *type;      /* the mock's ops table */
    void (*release)(void *mock);
};

/* A zeroed mock struct of `size` bytes (a struct that begins with a struct
 * ld__mock) of `type`; `release` (or NULL) frees what its fields hold, when
 * the mock is freed. NULL if `base` is NULL or memory ran out. */
void *ld__mock_alloc(const struct event_base *base, size_t size, const void *type,
                     void (*release)(void *mock));

/* Ends a constructor: registers `object`, the interface's object made around
 * `mock` (which now owns the mock), and returns it; if `object` is NULL
 * (making it or filling the mock's fields failed) frees the mock and returns
 * NULL. Registering cannot fail. It drops any entry left for an earlier
 * object at the same address: the front layer may free an object before it
 * calls its mock's free (from the loop, when operations were cancelled). */
void *ld__mock_finish(void *mock, void *object);

/* The ops' free of every mock: unregisters it (if its entry is still there),
 * calls its release and frees it. */
void ld__mock_free(void *mock);

/* The mock of `type` registered for `object`, or NULL. Any thread. */
void *ld__mock_find(const void *object, const void *type);

/* The describe() of the mocks that have one: "mock". */
const char *ld__mock_describe(void *mock);

/*
 * A FIFO whose links are in the things queued (structs that begin with a
 * struct ld__node), so that queueing cannot fail. Zero-initialised means
 * empty.
 */
struct ld__node {
    struct ld__node *next;
};
struct ld__fifo {
    struct ld__node *head, *tail;
};

/* Appends `node`. */
void ld__fifo_push(struct ld__fifo *q, struct ld__node *node);

/* Removes the oldest node and returns it, or NULL if the queue is empty. */
struct ld__node *ld__fifo_pop(struct ld__fifo *q);

/*
 * A FIFO of futures that wait for something scripted (a synchronizer's
 * nexts, an initializer's fetches). Zero-initialised means empty. The queue
 * owns one reference to each future in it.
 */
struct ld__waiters {
    struct ld__fifo q;
};

/* Appends `out` (stolen on success). 0 or LD_ENOMEM (`out` untouched). */
int ld__waiters_push(struct ld__waiters *q, ld_future *out);

/* Removes the oldest future and returns it (the caller gets the queue's
 * reference), or NULL if the queue is empty. */
ld_future *ld__waiters_pop(struct ld__waiters *q);

/* Releases every future in the queue and empties it. */
void ld__waiters_drop(struct ld__waiters *q);

#endif /* LDASYNC_TESTING_INTERNAL_H */
