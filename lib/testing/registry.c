/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the registry of mocks (testing-internal.h). A short
 * list under a lock: tests hold a handful of mocks at a time.
 *
 * An entry is the pair (object, mock). The front layer may free a component
 * object before it calls the mock's free (from the loop, when operations
 * were cancelled), so by the time a mock unregisters, its object's address
 * may already belong to a new mock: unregistering removes only the entry of
 * that very mock, and registering an object drops any older entry for the
 * same address (its object is gone, or the address could not be reused).
 */
#include <pthread.h>
#include <stdlib.h>

#include <ldasync/error.h>

#include "testing-internal.h"

struct entry {
    struct entry *next;
    const void *object;
    const void *type;
    void *mock;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *entries;

/* Takes the entry of `object` (and of `mock`, unless NULL) out of the list
 * and returns it, or NULL. Under the lock. */
static struct entry *unlink_entry(const void *object, const void *mock)
{
    for (struct entry **p = &entries; *p; p = &(*p)->next) {
        struct entry *e = *p;
        if (e->object == object && (!mock || e->mock == mock)) {
            *p = e->next;
            return e;
        }
    }
    return NULL;
}

int ld__mock_register(const void *object, const void *type, void *mock)
{
    struct entry *e = ld__malloc(sizeof(*e));
    if (!e)
        return LD_ENOMEM;
    e->object = object;
    e->type = type;
    e->mock = mock;
    pthread_mutex_lock(&lock);
    struct entry *stale = unlink_entry(object, NULL);
    e->next = entries;
    entries = e;
    pthread_mutex_unlock(&lock);
    ld__free(stale);
    return 0;
}

void ld__mock_unregister(const void *object, const void *mock)
{
    pthread_mutex_lock(&lock);
    struct entry *e = unlink_entry(object, mock);
    pthread_mutex_unlock(&lock);
    ld__free(e);
}

void *ld__mock_find(const void *object, const void *type)
{
    void *mock = NULL;
    if (!object)
        return NULL;
    pthread_mutex_lock(&lock);
    for (const struct entry *e = entries; e; e = e->next) {
        if (e->object == object) {
            mock = e->type == type ? e->mock : NULL;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return mock;
}
