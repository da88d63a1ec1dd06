/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/blob.c: immutable, reference-counted byte strings (response bodies
 * and event texts), handed to evbuffers by reference.
 */
#include <string.h>

#include <event2/buffer.h>

#include "serve-internal.h"

struct lds_blob *lds_blob_new(size_t len)
{
    struct lds_blob *b = lds_malloc(sizeof *b + len + 1);
    if (b) {
        b->refs = 1;
        b->len = len;
        b->data[len] = '\0';
    }
    return b;
}

void lds_blob_unref(struct lds_blob *b)
{
    if (b && --b->refs == 0)
        lds_free(b);
}

static void blob_cleanup(const void *data, size_t len, void *arg)
{
    (void)data;
    (void)len;
    lds_blob_unref(arg);
}

/* Appends `b` to `buf` by reference. @return 0 or -1. */
int lds_blob_add(struct evbuffer *buf, struct lds_blob *b)
{
    b->refs++;
    if (evbuffer_add_reference(buf, b->data, b->len, blob_cleanup, b) != 0) {
        b->refs--;
        return -1;
    }
    return 0;
}

/* A blob of the concatenation of `n` parts. */
struct lds_blob *lds_blob_concat(const char *const *parts, const size_t *lens, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += lens[i];
    struct lds_blob *b = lds_blob_new(len);
    if (!b)
        return NULL;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(b->data + at, parts[i], lens[i]);
        at += lens[i];
    }
    return b;
}

/* A blob of the compact JSON text of `j`. */
struct lds_blob *lds_blob_json(const json_t *j)
{
    size_t len = json_dumpb(j, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
    if (len == 0)
        return NULL;
    struct lds_blob *b = lds_blob_new(len);
    if (b && json_dumpb(j, b->data, len, JSON_COMPACT | JSON_ENCODE_ANY) != len) {
        lds_blob_unref(b);
        return NULL;
    }
    return b;
}
