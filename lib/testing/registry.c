/*
 * libldasync-testing: the registry of mocks (testing-internal.h). A short
 * list under a lock: tests hold a handful of mocks at a time.
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

int ld__mock_register(const void *object, const void *type, void *mock)
{
    struct entry *e = ld__malloc(sizeof(*e));
    if (!e)
        return LD_ENOMEM;
    e->object = object;
    e->type = type;
    e->mock = mock;
    pthread_mutex_lock(&lock);
    e->next = entries;
    entries = e;
    pthread_mutex_unlock(&lock);
    return 0;
}

void ld__mock_unregister(const void *object)
{
    pthread_mutex_lock(&lock);
    for (struct entry **p = &entries; *p; p = &(*p)->next) {
        if ((*p)->object == object) {
            struct entry *e = *p;
            *p = e->next;
            ld__free(e);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
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
