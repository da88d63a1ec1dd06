/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the skeleton and the registry of mocks
 * (testing-internal.h). The registry is a list of the mocks' own heads, so
 * registering allocates nothing and cannot fail.
 *
 * The front layer may free a component object before it calls the mock's
 * free (from the loop, when operations were cancelled), so by the time a
 * mock unregisters, its object's address may already belong to a new mock:
 * unregistering removes only that very mock, and registering an object
 * drops any older mock registered for the same address (its object is gone,
 * or the address could not be reused).
 */
#include <pthread.h>
#include <stdlib.h>

#include "testing-internal.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ld__mock *mocks;

/* Takes out of the list the mock `m`, if there, or else (m NULL) the mock
 * registered for `object`, if any. Under the lock. */
static void unlink_mock(const struct ld__mock *m, const void *object)
{
    for (struct ld__mock **p = &mocks; *p; p = &(*p)->next) {
        if (m ? *p == m : (*p)->object == object) {
            *p = (*p)->next;
            return;
        }
    }
}

void *ld__mock_alloc(const struct event_base *base, size_t size, const void *type,
                     void (*release)(void *mock))
{
    struct ld__mock *m = base ? ld__calloc(1, size) : NULL;
    if (m) {
        m->type = type;
        m->release = release;
    }
    return m;
}

void *ld__mock_finish(void *mock, void *object)
{
    struct ld__mock *m = mock;
    if (!object) {
        ld__mock_free(m);
        return NULL;
    }
    m->object = object;
    pthread_mutex_lock(&lock);
    unlink_mock(NULL, object);
    m->next = mocks;
    mocks = m;
    pthread_mutex_unlock(&lock);
    return object;
}

void ld__mock_free(void *mock)
{
    struct ld__mock *m = mock;
    pthread_mutex_lock(&lock);
    unlink_mock(m, NULL);
    pthread_mutex_unlock(&lock);
    if (m->release)
        m->release(m);
    ld__free(m);
}

void *ld__mock_find(const void *object, const void *type)
{
    struct ld__mock *found = NULL;
    if (!object)
        return NULL;
    pthread_mutex_lock(&lock);
    for (struct ld__mock *m = mocks; m; m = m->next) {
        if (m->object == object) {
            found = m->type == type ? m : NULL;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

const char *ld__mock_describe(void *mock)
{
    (void)mock;
    return "mock";
}
