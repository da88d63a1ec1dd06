/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * libldasync-testing: the mock big segment store (testing.h). Memberships
 * are a JSON object context hash -> membership; the queries are an array of
 * copied strings (a context hash is any non-empty C string, not always
 * valid UTF-8 for jansson).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <ldasync/testing.h>

#include "testing-internal.h"

#define STALE_AGE_MS INT64_C(86400000) /* one day */

struct mock {
    struct ld__mock head;
    enum ld_mock_big_segments_preset preset;
    json_t *memberships; /* context hash -> membership object */
    char **queries;
    size_t n_queries, cap_queries;
    int metadata_queries;
};

static const struct ld_big_segment_store_ops mock_ops;

static struct mock *mock_of(const ld_big_segment_store *store)
{
    return ld__mock_find(store, &mock_ops);
}

static int64_t now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void mock_get_metadata(void *impl, ld_future *out)
{
    struct mock *m = impl;
    m->metadata_queries++;
    switch (m->preset) {
    case LD_MOCK_BIG_SEGMENTS_PRESET_UP_TO_DATE:
        ld_future_fulfill_int(out, now_ms());
        break;
    case LD_MOCK_BIG_SEGMENTS_PRESET_STALE:
        ld_future_fulfill_int(out, now_ms() - STALE_AGE_MS);
        break;
    case LD_MOCK_BIG_SEGMENTS_PRESET_NONE:
        ld_future_fulfill_int(out, LD_BIG_SEGMENT_TIME_UNKNOWN);
        break;
    case LD_MOCK_BIG_SEGMENTS_PRESET_ERROR:
        ld_future_reject(out, LD_ESTORE, "mock big segment store: scripted metadata failure");
        break;
    }
    ld_future_unref(out);
}

/* Appends a copy of `hash` to the queries. 0 or LD_ENOMEM. */
static int record_query(struct mock *m, const char *hash)
{
    if (m->n_queries == m->cap_queries) {
        size_t cap = m->cap_queries ? 2 * m->cap_queries : 8;
        char **q = ld__realloc(m->queries, cap * sizeof(*q));
        if (!q)
            return LD_ENOMEM;
        m->queries = q;
        m->cap_queries = cap;
    }
    char *copy = ld__strdup(hash);
    if (!copy)
        return LD_ENOMEM;
    m->queries[m->n_queries++] = copy;
    return 0;
}

static void mock_get_membership(void *impl, const char *context_hash, ld_future *out)
{
    struct mock *m = impl;
    if (record_query(m, context_hash) != 0) {
        ld_future_reject(out, LD_ENOMEM, "mock big segment store: out of memory");
    } else {
        json_t *membership = json_object_get(m->memberships, context_hash);
        ld_future_fulfill_json(out, json_incref(membership));
    }
    ld_future_unref(out);
}

static void release(void *impl)
{
    struct mock *m = impl;
    json_decref(m->memberships);
    for (size_t i = 0; i < m->n_queries; i++)
        ld__free(m->queries[i]);
    ld__free(m->queries);
}

static const struct ld_big_segment_store_ops mock_ops = {
    .version = LD_BIG_SEGMENT_STORE_OPS_VERSION,
    .get_metadata = mock_get_metadata,
    .get_membership = mock_get_membership,
    .close = NULL, /* the front layer fulfils it at once */
    .free = ld__mock_free,
    .describe = ld__mock_describe,
};

static bool is_preset(enum ld_mock_big_segments_preset preset)
{
    return (unsigned)preset <= LD_MOCK_BIG_SEGMENTS_PRESET_ERROR;
}

ld_big_segment_store *ld_mock_big_segment_store_new(struct event_base *base,
                                                    enum ld_mock_big_segments_preset preset)
{
    if (!is_preset(preset))
        return NULL;
    struct mock *m = ld__mock_alloc(base, sizeof(*m), &mock_ops, release);
    if (!m)
        return NULL;
    m->preset = preset;
    m->memberships = json_object();
    return ld__mock_finish(m, m->memberships ? ld_big_segment_store_new(base, &mock_ops, m) : NULL);
}

int ld_mock_big_segment_store_set_preset(ld_big_segment_store *store,
                                         enum ld_mock_big_segments_preset preset)
{
    struct mock *m = mock_of(store);
    if (!m || !is_preset(preset))
        return LD_EINVAL;
    m->preset = preset;
    return 0;
}

static bool is_membership(const json_t *membership)
{
    const char *ref;
    json_t *value;
    if (!json_is_object(membership))
        return false;
    json_object_foreach((json_t *)membership, ref, value)
    {
        if (!json_is_boolean(value))
            return false;
    }
    return true;
}

int ld_mock_big_segment_store_set_membership(ld_big_segment_store *store, const char *context_hash,
                                             json_t *membership)
{
    struct mock *m = mock_of(store);
    if (!m || !context_hash || !*context_hash || (membership && !is_membership(membership)))
        return LD_EINVAL;
    if (!membership) {
        json_object_del(m->memberships, context_hash);
        return 0;
    }
    return json_object_set_nocheck(m->memberships, context_hash, membership) == 0 ? 0 : LD_ENOMEM;
}

int ld_mock_big_segment_store_membership_query_count(const ld_big_segment_store *store)
{
    const struct mock *m = mock_of(store);
    return m ? (int)m->n_queries : LD_EINVAL;
}

const char *ld_mock_big_segment_store_membership_query(const ld_big_segment_store *store, size_t i)
{
    const struct mock *m = mock_of(store);
    return m && i < m->n_queries ? m->queries[i] : NULL;
}

int ld_mock_big_segment_store_metadata_query_count(const ld_big_segment_store *store)
{
    const struct mock *m = mock_of(store);
    return m ? m->metadata_queries : LD_EINVAL;
}
