/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * Jobs (eval-internal.h): evaluations that wait for the store. A job
 * requests the items it knows it needs together (the flag; then the
 * prerequisites and segments that the items read so far refer to; and so
 * on: one round trip per level), then runs the walk over what came back,
 * and requests again whatever that walk still missed.
 */
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <event2/event.h>

#include <ldasync/big_segments.h>
#include <ldasync/error.h>
#include <ldasync/eval.h>
#include <ldasync/kind.h>

#include "core/core-internal.h"
#include "eval/eval-internal.h"
#include "model/model-internal.h"
#include "store/store-internal.h"

enum { S_WANTED, S_ASKED, S_DONE };

struct ld__slot {
    struct ld__job *job;
    struct ld__slot *next;
    char *key;
    size_t len;
    struct ld__item *item; /* referenced; NULL when absent */
    int error;             /* the store's, or 0 */
    uint8_t type;
    uint8_t state;
};

/* A job's wait for a compile off the loop (eval_big.c). */
struct ld__cwait {
    struct ld__cwait *next;
    struct ld__job *job;
    struct ld__slot *slot; /* the item it came back for, or NULL (all flags) */
    json_t *json;          /* referenced */
    uint8_t type;
};

struct ld__mslot {
    struct ld__job *job;
    struct ld__mslot *next;
    json_t *key;        /* the context key, referenced */
    json_t *membership; /* referenced, or NULL */
    int status;
    uint8_t state;
    bool now; /* answered within the call: `status` is its status */
};

void ld__job_free(struct ld__job *j)
{
    for (struct ld__cwait *w = j->waits, *n; w; w = n) { /* (none: outstanding was 0) */
        n = w->next;
        json_decref(w->json);
        ld__free(w);
    }
    for (struct ld__slot *s = j->slots, *n; s; s = n) {
        n = s->next;
        ld__item_unref(s->item);
        ld__free(s->key);
        ld__free(s);
    }
    for (struct ld__mslot *s = j->mslots, *n; s; s = n) {
        n = s->next;
        json_decref(s->key);
        json_decref(s->membership);
        ld__free(s);
    }
    ld__flags_state_free(j->partial);
    json_decref(j->st);
    json_decref(j->meta);
    json_decref(j->flags);
    json_decref(j->segments);
    json_decref(j->fallback);
    ld_context_unref(j->ctx);
    ld__free(j->key);
    ld_future_unref(j->out);
    ld__free(j);
}

void ld__job_unlink(struct ld__job *j)
{
    if (!j->ev)
        return;
    if (j->prev)
        j->prev->next = j->next;
    else
        j->ev->jobs = j->next;
    if (j->next)
        j->next->prev = j->prev;
    j->prev = j->next = NULL;
    j->ev = NULL;
}

/* Ends the job: `ptr` (a detail or a state, freed by `free_ptr`) or `all`
 * fulfils its future, or `code` rejects it. */
static void queue_kick(ld_evaluator *ev);

static void job_end(struct ld__job *j, void *ptr, ld_free_fn free_ptr, json_t *all, int code)
{
    ld_evaluator *ev = j->ev;
    if (ev && j->waiting && ev->qhead == j) {
        /* it held the queue, waiting for memberships: the next goes on */
        ev->qhead = j->qnext;
        if (!ev->qhead)
            ev->qtail = NULL;
        j->qnext = NULL;
        j->queued = j->waiting = false;
    }
    ld__job_unlink(j);
    if (ptr)
        ld_future_fulfill_ptr(j->out, ptr, free_ptr);
    else if (all)
        ld_future_fulfill_json(j->out, all);
    else
        ld_future_reject(j->out, code, NULL);
    if (j->outstanding == 0)
        ld__job_free(j);
    else
        j->ev = NULL; /* freed by the last callback */
    if (ev)
        queue_kick(ev);
}

static struct ld__slot *find_slot(struct ld__job *j, enum ld__item_type type, const char *key,
                                  size_t len)
{
    for (struct ld__slot *s = j->slots; s; s = s->next)
        if (s->type == type && s->len == len && memcmp(s->key, key, len) == 0)
            return s;
    return NULL;
}

struct ld__slot *ld__job_want(struct ld__job *j, enum ld__item_type type, const char *key,
                              size_t len)
{
    struct ld__slot *s = find_slot(j, type, key, len);
    if (s || !ld__key_ok(&(struct ld__str){key, len}))
        return s;
    s = ld__calloc(1, sizeof *s);
    char *k = ld__malloc(len + 1);
    if (!s || !k) {
        ld__free(s);
        ld__free(k);
        j->nomem = true;
        return NULL;
    }
    memcpy(k, key, len);
    k[len] = '\0';
    s->job = j;
    s->key = k;
    s->len = len;
    s->type = (uint8_t)type;
    s->state = S_WANTED;
    s->next = j->slots;
    j->slots = s;
    return s;
}

static void want_ref(void *arg, enum ld__item_type type, const struct ld__str *key)
{
    ld__job_want(arg, type, key->s, key->len);
}

/* True when the job is over (the evaluator went away): the callback that
 * found it so frees it once it was the last. */
static bool job_gone(struct ld__job *j)
{
    j->outstanding--;
    if (j->ev)
        return false;
    if (j->outstanding == 0)
        ld__job_free(j);
    return true;
}

static int job_membership(void *arg, const json_t *key, const json_t **m, int *status);

/* A big segment that came back: its membership read goes with the next
 * level's reads rather than after the walk that needs it. */
static void want_membership(struct ld__job *j, const struct ld__item *it)
{
    const struct ld__segment *s = (const struct ld__segment *)it;
    if (it->type != LD__SEGMENT || !s->unbounded || !s->has_generation || !j->ev->bss)
        return;
    int part = ld__context_find(j->ctx, s->unbounded_kind.s, s->unbounded_kind.len);
    const json_t *m;
    int status;
    if (part >= 0)
        (void)job_membership(j, ld__context_part_key(j->ctx, (size_t)part), &m, &status);
}

/* Slot `s` has its item `it` (NULL: memory ran out). */
static void slot_item(struct ld__slot *s, struct ld__item *it)
{
    struct ld__job *j = s->job;
    s->state = S_DONE;
    if (!it) {
        j->nomem = true;
    } else if (!it->deleted) {
        s->item = ld__item_ref(it);
        ld__item_references(it, want_ref, j); /* read them ahead */
        want_membership(j, it);
    }
}

/* A compile the job waited for is over: its item is in the cache, or
 * (memory ran out) not. */
static void compiled(ld_future *f, void *arg)
{
    struct ld__cwait *w = arg;
    struct ld__job *j = w->job;
    (void)f;
    for (struct ld__cwait **p = &j->waits; *p; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    json_t *json = w->json;
    struct ld__slot *s = w->slot;
    enum ld__item_type type = (enum ld__item_type)w->type;
    ld__free(w);
    if (!job_gone(j)) {
        struct ld__item *it = ld__cache_find(&j->ev->cache, type, json);
        if (s)
            slot_item(s, it);
        else if (!it)
            j->nomem = true;
        if (j->outstanding == 0)
            ld__job_step(j);
    }
    json_decref(json);
}

int ld__job_wait(struct ld__job *j, struct ld__compile *c, enum ld__item_type type, json_t *json,
                 struct ld__slot *s)
{
    for (struct ld__cwait *w = j->waits; w; w = w->next)
        if (w->json == json && w->type == type)
            return 0;
    struct ld__cwait *w = ld__calloc(1, sizeof *w);
    if (!w || ld_future_on_complete(ld_future_ref(c->out), compiled, w) != 0) {
        ld__free(w);
        j->nomem = true;
        return LD_ENOMEM;
    }
    w->job = j;
    w->slot = s;
    w->json = json_incref(json);
    w->type = (uint8_t)type;
    w->next = j->waits;
    j->waits = w;
    j->outstanding++;
    return 0;
}

static void item_done(ld_future *f, void *arg)
{
    struct ld__slot *s = arg;
    struct ld__job *j = s->job;
    if (job_gone(j))
        return;
    s->state = S_DONE;
    if (ld_future_is_fulfilled(f)) {
        json_t *json = ld_future_json(f);
        if (json) {
            enum ld__item_type type = (enum ld__item_type)s->type;
            struct ld__compile *c;
            struct ld__item *it = ld__cache_get(&j->ev->cache, type, json, &c);
            if (it || !c || ld__job_wait(j, c, type, json, s) != 0)
                slot_item(s, it);
            else
                s->state = S_ASKED; /* until the compile is over */
        }
    } else if (ld_future_error(f) == LD_ENOMEM) {
        j->nomem = true; /* not the store's failure: say LD_ENOMEM */
    } else {
        s->error = ld_future_error(f);
        j->store_error = s->error;
    }
    if (j->outstanding == 0)
        ld__job_step(j);
}

static void all_done(ld_future *f, void *arg)
{
    struct ld__job *j = arg;
    if (job_gone(j))
        return;
    if (ld_future_is_fulfilled(f)) {
        json_t *o = ld_future_json(f);
        json_t **into = j->flags ? &j->segments : &j->flags;
        /* The flags' future was issued first and completes first (store
         * futures complete in issue order). */
        *into = json_incref(o ? o : json_object());
        if (!*into)
            j->nomem = true;
    } else if (ld_future_error(f) == LD_ENOMEM) {
        j->nomem = true;
    } else {
        j->store_error = ld_future_error(f);
    }
    if (j->outstanding == 0)
        ld__job_step(j);
}

static void initialized_done(ld_future *f, void *arg)
{
    struct ld__job *j = arg;
    if (job_gone(j))
        return;
    if (ld_future_is_fulfilled(f))
        j->uninitialized = !ld_future_bool(f);
    else if (ld_future_error(f) == LD_ENOMEM)
        j->nomem = true;
    else
        j->store_error = ld_future_error(f);
    if (j->outstanding == 0)
        ld__job_step(j);
}

static void membership_done(ld_future *f, void *arg)
{
    struct ld__mslot *s = arg;
    struct ld__job *j = s->job;
    if (job_gone(j))
        return;
    s->state = S_DONE;
    if (ld_future_is_fulfilled(f))
        s->membership = json_incref(ld_future_json(f));
    else if (ld_future_error(f) == LD_ENOMEM)
        j->nomem = true;
    else
        s->status = LD_BIG_SEGMENTS_STATUS_STORE_ERROR;
    if (j->outstanding == 0)
        ld__job_step(j);
}

static void metadata_done(ld_future *f, void *arg)
{
    struct ld__job *j = arg;
    if (job_gone(j))
        return;
    j->metadata_state = S_DONE;
    if (ld_future_is_fulfilled(f))
        j->metadata = ld_future_int(f);
    else if (ld_future_error(f) == LD_ENOMEM)
        j->nomem = true;
    else
        j->metadata_error = ld_future_error(f);
    if (j->outstanding == 0)
        ld__job_step(j);
}

static int64_t now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* The status of a membership that came back. */
static int membership_status(const struct ld__job *j, const struct ld__mslot *s)
{
    if (s->now)
        return s->status;
    if (s->status == LD_BIG_SEGMENTS_STATUS_STORE_ERROR || j->metadata_error)
        return LD_BIG_SEGMENTS_STATUS_STORE_ERROR;
    if (ld_big_segment_is_stale(j->metadata, now_ms(), j->ev->stale_after))
        return LD_BIG_SEGMENTS_STATUS_STALE;
    return LD_BIG_SEGMENTS_STATUS_HEALTHY;
}

static int job_item(void *arg, enum ld__item_type type, const struct ld__str *key,
                    const struct ld__item **out)
{
    struct ld__job *j = arg;
    *out = NULL;
    if (!ld__key_ok(key))
        return 0;
    if (j->all) {
        json_t *o = type == LD__FLAG ? j->flags : j->segments;
        json_t *json = json_object_getn(o, key->s, key->len);
        if (!json)
            return 0;
        struct ld__compile *c = NULL;
        struct ld__item *it = j->ev ? ld__cache_get(&j->ev->cache, type, json, &c) : NULL;
        if (!it) {
            if (!c || ld__job_wait(j, c, type, json, NULL) != 0)
                j->nomem = true;
            return LD__E_NEED;
        }
        *out = it->deleted ? NULL : it;
        return 0;
    }
    struct ld__slot *s = find_slot(j, type, key->s, key->len);
    if (s && s->state == S_DONE) {
        if (s->error)
            return LD__E_FAIL;
        *out = s->item;
        return 0;
    }
    if (j->store_error)
        return LD__E_FAIL; /* the store failed (or went away): ask it nothing more */
    if (!s)
        ld__job_want(j, type, key->s, key->len);
    return LD__E_NEED;
}

static int job_membership(void *arg, const json_t *key, const json_t **m, int *status)
{
    struct ld__job *j = arg;
    *m = NULL;
    *status = LD_BIG_SEGMENTS_STATUS_NOT_CONFIGURED;
    if (!j->ev->bss)
        return 0;
    for (struct ld__mslot *s = j->mslots; s; s = s->next) {
        if (json_equal(s->key, key)) {
            if (s->state != S_DONE)
                return LD__E_NEED;
            *m = s->membership;
            *status = membership_status(j, s);
            return 0;
        }
    }
    struct ld__mslot *s = ld__calloc(1, sizeof *s);
    if (!s) {
        j->nomem = true;
        return LD__E_NEED;
    }
    s->job = j;
    s->key = json_incref((json_t *)key);
    s->state = S_WANTED;
    s->next = j->mslots;
    j->mslots = s;
    /* a membership the store answers within the call (the client's cache
     * keeps it) is not read: it waits for no other context's read */
    const json_t *kept;
    int kept_status;
    if (ld__membership_now(j->ev, key, &kept, &kept_status) != 0)
        return LD__E_NEED;
    s->state = S_DONE;
    s->now = true;
    s->membership = json_incref((json_t *)kept);
    s->status = kept_status;
    *m = s->membership;
    *status = kept_status;
    return 0;
}

static void job_stopped(void *arg, const struct ld__item *it)
{
    struct ld__job *j = arg;
    if (j->ev)
        ld__evaluator_stopped(j->ev, it);
}

const struct ld__resolver ld__job_resolver = {job_item, job_membership, job_stopped};

/* Issues what the job wants. @return how many reads it issued. */
static int job_issue(struct ld__job *j)
{
    int issued = 0;
    for (struct ld__slot *s = j->slots; s; s = s->next) {
        if (s->state != S_WANTED)
            continue;
        if (j->store_error) { /* ask a failed store nothing more */
            s->state = S_DONE;
            s->error = j->store_error;
            continue;
        }
        s->state = S_ASKED;
        ld_future *f = ld_store_get(j->store, ld__item_kind((enum ld__item_type)s->type), s->key);
        j->outstanding++;
        if (ld_future_on_complete(f, item_done, s) != 0) {
            j->outstanding--;
            s->state = S_DONE;
            s->error = LD_ENOMEM;
            j->nomem = true;
        } else {
            issued++;
        }
    }
    bool any = false;
    for (struct ld__mslot *s = j->mslots; s; s = s->next) {
        if (s->state != S_WANTED)
            continue;
        any = true;
        s->state = S_ASKED;
        char hash[LD__BIG_SEGMENT_HASH_LEN + 1];
        ld__big_segment_hash(json_string_value(s->key), json_string_length(s->key), hash);
        ld_future *f = ld_big_segment_store_get_membership(j->ev->bss, hash);
        j->outstanding++;
        if (ld_future_on_complete(f, membership_done, s) != 0) {
            j->outstanding--;
            s->state = S_DONE;
            s->status = LD_BIG_SEGMENTS_STATUS_STORE_ERROR;
            j->nomem = true;
        } else {
            issued++;
        }
    }
    if (any && j->metadata_state == S_WANTED) {
        j->metadata_state = S_ASKED;
        j->outstanding++;
        if (ld_future_on_complete(ld_big_segment_store_get_metadata(j->ev->bss), metadata_done,
                                  j) != 0) {
            j->outstanding--;
            j->metadata_state = S_DONE;
            j->metadata_error = LD_ENOMEM;
            j->nomem = true;
        } else {
            issued++;
        }
    }
    return issued;
}

/* The loop cannot run the queue of `ev`: its jobs end (the one waiting
 * for memberships, if any, goes on when they come). */
static void queue_fail(ld_evaluator *ev)
{
    struct ld__job *keep = ev->qhead && ev->qhead->waiting ? ev->qhead : NULL;
    struct ld__job *j = keep ? keep->qnext : ev->qhead;
    if (keep) {
        keep->qnext = NULL;
        ev->qtail = keep;
    } else {
        ev->qhead = ev->qtail = NULL;
    }
    while (j) {
        struct ld__job *next = j->qnext;
        j->qnext = NULL;
        j->queued = false;
        job_end(j, NULL, NULL, NULL, LD_ENOMEM);
        j = next;
    }
}

/* All-flags job `j`, which needs memberships in the middle of its slices,
 * holds the head of its evaluator's queue until they come: the states
 * asked after it are made after it. */
static void queue_hold(struct ld__job *j)
{
    ld_evaluator *ev = j->ev;
    j->queued = j->waiting = true;
    j->qnext = ev->qhead;
    ev->qhead = j;
    if (!ev->qtail)
        ev->qtail = j;
}

/* A head of the queue that waits for memberships but was cancelled lets
 * the others go on (it ends when its reads come back). @return whether it
 * did. */
static bool head_let_go(ld_evaluator *ev)
{
    struct ld__job *h = ev->qhead;
    if (!h || !h->waiting || ld_future_is_pending(h->out))
        return false;
    ev->qhead = h->qnext;
    if (!ev->qhead)
        ev->qtail = NULL;
    h->qnext = NULL;
    h->queued = h->waiting = false;
    return true;
}

/* Makes sure the queue of `ev` runs its next slice in a later pass of the
 * loop, unless its head waits for memberships (or nothing is queued). */
static void queue_kick(ld_evaluator *ev)
{
    head_let_go(ev);
    if (ev->resuming || !ev->qhead || ev->qhead->waiting || !ev->resume ||
        evtimer_pending(ev->resume, NULL))
        return;
    if (event_add(ev->resume, &(struct timeval){0, 0}) != 0)
        queue_fail(ev);
}

/* Runs the evaluation over what came back, or asks for more. */
void ld__job_step(struct ld__job *j)
{
    if (!j->ev) {
        job_end(j, NULL, NULL, NULL, LD_ECANCELED);
        return;
    }
    if (j->nomem) {
        job_end(j, NULL, NULL, NULL, LD_ENOMEM);
        return;
    }
    if (job_issue(j) > 0)
        return;
    if (j->nomem) {
        job_end(j, NULL, NULL, NULL, LD_ENOMEM);
        return;
    }
    if (j->all) {
        int rc;
        struct ld_flags_state *st = NULL;
        json_t *state = NULL;
        ld_evaluator *ev = j->ev;
        if (!ev->resuming) {
            /* states are made one after the other, in the order asked */
            if (ev->qhead == j && j->waiting) {
                /* its memberships came: it goes on, still first */
                ev->qhead = j->qnext;
                if (!ev->qhead)
                    ev->qtail = NULL;
                j->qnext = NULL;
                j->queued = j->waiting = false;
                if (!ld_future_is_pending(j->out)) {
                    job_end(j, NULL, NULL, NULL, LD_ECANCELED); /* cancelled meanwhile */
                    queue_kick(ev);
                    return;
                }
            } else if (!ld_future_is_pending(j->out)) {
                /* cancelled while it waited (queue_kick let go of its place) */
                job_end(j, NULL, NULL, NULL, LD_ECANCELED);
                return;
            } else if (ev->qhead) {
                if (ld__job_queue(j, false) != 0)
                    job_end(j, NULL, NULL, NULL, LD_ENOMEM);
                return;
            }
            ev->slice_end = ld__now_ns() + LD__EVAL_SLICE_NS;
        }
        if (j->state)
            st = ld__all_flags_results(j, &rc);
        else
            state = ld__all_flags_state(j, &rc);
        if (rc == LD__E_YIELD && ld__job_queue(j, true) == 0) {
            queue_kick(ev);
            return;
        }
        if (rc == LD__E_NEED && !j->nomem && (job_issue(j) > 0 || j->outstanding > 0)) {
            /* reads issued, or a compile waited for: it keeps its place */
            queue_hold(j);
            return;
        }
        if (!state && !st)
            job_end(j, NULL, NULL, NULL, LD_ENOMEM);
        else
            job_end(j, st, ld__flags_state_free, state, 0);
        queue_kick(ev);
        return;
    }
    const struct ld__item *f = NULL;
    struct ld__str key = {j->key, j->len};
    int rc = job_item(j, LD__FLAG, &key, &f);
    ld_detail *d = NULL;
    if (rc == LD__E_FAIL) {
        /* The flag could not be read. */
        d = ld__line_alloc();
        if (d) {
            memset(d, 0, sizeof *d);
            d->index = d->rule = d->big = -1;
            d->kind = LD_REASON_ERROR;
            d->error = LD_EVAL_ERROR_EXCEPTION;
            if (j->rec)
                ld__record_one(j->rec, j->key, j->len, j->ctx, d, j->fallback);
            d->value = j->fallback;
            j->fallback = NULL;
        }
    } else if (rc == 0) {
        json_t *fb = json_incref(j->fallback);
        rc = ld__evaluate_rec(j->ctx, &ld__job_resolver, j, f, (ld_value_type)j->type, fb, &d,
                              j->rec, j->key, j->len);
        if (rc == LD__E_NEED) {
            json_decref(fb);
            if (!j->nomem && (job_issue(j) > 0 || j->outstanding > 0))
                return;
            j->nomem = true; /* nothing more to ask for: only memory can say LD__E_NEED */
        }
    }
    if (!d) {
        job_end(j, NULL, NULL, NULL, LD_ENOMEM);
        return;
    }
    job_end(j, d, ld__detail_free, NULL, 0);
}

/* The evaluator's queue of all-flags jobs made in slices: the first runs
 * a slice in each pass of the loop (when it ends early, the next ones go
 * on within the same slice), until it is done; then the next. */
static void resume_run(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ld_evaluator *ev = arg;
    if (!ev->qhead || ev->qhead->waiting)
        return; /* its head goes on when its memberships come */
    ev->slice_end = ld__now_ns() + LD__EVAL_SLICE_NS;
    ev->resuming = true;
    do {
        struct ld__job *j = ev->qhead;
        ev->qhead = j->qnext;
        if (!ev->qhead)
            ev->qtail = NULL;
        j->qnext = NULL;
        j->queued = false;
        ev->yielded = false;
        if (!ld_future_is_pending(j->out))
            job_end(j, NULL, NULL, NULL, LD_ECANCELED); /* cancelled: no more slices */
        else
            ld__job_step(j);
    } while (ev->qhead && !ev->qhead->waiting && !ev->yielded && ld__now_ns() < ev->slice_end);
    ev->resuming = false;
    queue_kick(ev);
}

int ld__job_queue(struct ld__job *j, bool front)
{
    ld_evaluator *ev = j->ev;
    if (!ev->resume && !(ev->resume = evtimer_new(ev->base, resume_run, ev)))
        return LD_ENOMEM;
    /* a head that waits but was cancelled lets the queue go on */
    bool let_go = head_let_go(ev);
    if ((!ev->qhead || let_go) && event_add(ev->resume, &(struct timeval){0, 0}) != 0)
        return LD_ENOMEM;
    j->queued = true;
    ev->yielded |= front;
    if (front || !ev->qhead) {
        j->qnext = ev->qhead;
        ev->qhead = j;
        if (!ev->qtail)
            ev->qtail = j;
    } else {
        ev->qtail->qnext = j;
        ev->qtail = j;
    }
    return 0;
}

struct ld__job *ld__job_new(ld_evaluator *ev, ld_context *ctx)
{
    struct ld__job *j = ld__calloc(1, sizeof *j);
    ld_future *out = ld_future_new(ev->base);
    if (!j || !out) {
        ld__free(j);
        ld_future_unref(out);
        return NULL;
    }
    j->ev = ev;
    j->store = ev->store;
    j->out = out;
    j->ctx = ld_context_ref(ctx);
    j->metadata_state = S_WANTED;
    j->next = ev->jobs;
    if (ev->jobs)
        ev->jobs->prev = j;
    ev->jobs = j;
    return j;
}

/* Starts the job; returns the caller's reference to its future. */
ld_future *ld__job_start(struct ld__job *j)
{
    ld_future *r = ld_future_ref(j->out);
    ld__job_step(j);
    return r;
}

ld_future *ld__job_read_all(struct ld__job *j, int init)
{
    ld_evaluator *ev = j->ev;
    /* Ask whether it is initialized (unless it said already) and for both
     * snapshots; the flags come back before the segments. */
    int e0 = 0;
    j->uninitialized = false;
    if (init < 0) {
        j->outstanding++;
        e0 = ld_future_on_complete(ld_store_initialized(ev->store), initialized_done, j);
        j->outstanding -= e0 != 0;
    } else {
        j->uninitialized = init == 0;
    }
    ld_future *ff = ld_store_all(ev->store, ld_kind_features());
    ld_future *fs = ld_store_all(ev->store, ld_kind_segments());
    j->outstanding += 2;
    int e1 = ld_future_on_complete(ff, all_done, j);
    int e2 = ld_future_on_complete(fs, all_done, j);
    j->outstanding -= (e1 != 0) + (e2 != 0);
    ld_future *r = ld_future_ref(j->out);
    if (e0 || e1 || e2) {
        j->nomem = true;
        if (j->outstanding == 0)
            ld__job_step(j);
    }
    return r;
}
