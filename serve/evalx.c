/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/evalx.c: client-side evaluation, as LaunchDarkly's service and
 * ld-relay answer it: GET /sdk/evalx/{env}/contexts/{base64url context}
 * and REPORT /sdk/evalx/{env}/context (the context as the JSON body), both
 * with ?withReasons=true, both decoded by evaluate(), and answered with
 * CORS headers.
 */
#include <limits.h>
#include <string.h>

#include <event2/http.h>
#include <event2/util.h>
#include <openssl/evp.h>

#include "serve-internal.h"

/* evaluate()'s `arg`: the answer's flags, and this bit when reasons are
 * asked for. */
#define WITH_REASONS 0x100

/* LaunchDarkly's client-side evaluation result (as ld-relay's evalx and
 * LaunchDarkly's service answer it), from the evaluator's all-flags state:
 * {"<flag>": {"value": v, "variation": n | null, "version": flag version,
 * "trackEvents": true (when), "trackReason": true (when), "reason": {...}
 * (when asked for or tracked), "debugEventsUntilDate": ms (when),
 * "prerequisites": [keys] (when the flag's evaluation entered any)}, ...}. */
static json_t *evalx_of_state(const json_t *state)
{
    json_t *meta = json_object_get(state, "$flagsState");
    json_t *out = json_object();
    if (!out || !json_is_object(meta))
        return out;
    const char *key;
    json_t *m;
    json_object_foreach(meta, key, m)
    {
        json_t *value = json_object_get(state, key);
        json_t *o = json_object();
        int rc = o ? 0 : -1;
        rc |= json_object_set(o, "value", value ? value : json_null());
        json_t *var = json_object_get(m, "variation");
        rc |= json_object_set(o, "variation", var ? var : json_null());
        static const char *const copy[] = {"version", "trackEvents",   "trackReason",
                                           "reason",  "prerequisites", "debugEventsUntilDate"};
        for (size_t i = 0; i < sizeof copy / sizeof copy[0]; i++) {
            json_t *v = json_object_get(m, copy[i]);
            if (v)
                rc |= json_object_set(o, copy[i], v);
        }
        rc |= json_object_set_new(out, key, o);
        if (rc) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* Decodes base64url (or base64; padding optional) with OpenSSL's decoder
 * (after mapping the URL-safe alphabet onto the standard one and padding).
 * @return a new buffer (NUL-terminated, length in *len), or NULL if `s` is
 * not base64 or memory ran out (*len then 0 or 1). */
static char *b64_decode(const char *s, size_t n, size_t *len)
{
    while (n > 0 && s[n - 1] == '=')
        n--;
    *len = 0;
    if (n % 4 == 1 || n > INT_MAX / 2)
        return NULL;
    size_t padded = (n + 3) / 4 * 4;
    unsigned char *in = lds_malloc(padded + 1);
    unsigned char *out = lds_malloc(padded / 4 * 3 + 1);
    if (!in || !out) {
        lds_free(in);
        lds_free(out);
        *len = 1;
        return NULL;
    }
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c == '=') /* OpenSSL would skip spaces at the ends */
            rc = -1;
        in[i] = c == '-' ? '+' : c == '_' ? '/' : c;
    }
    memset(in + n, '=', padded - n);
    if (rc == 0)
        rc = EVP_DecodeBlock(out, in, (int)padded);
    lds_free(in);
    if (rc < 0) {
        lds_free(out);
        return NULL;
    }
    *len = (size_t)rc - (padded - n); /* each '=' added decoded as a 0 */
    out[*len] = '\0';
    return (char *)out;
}

static bool query_flag(const char *query, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = query; p && *p;) {
        const char *end = strchr(p, '&');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == nl + 5 && strncmp(p, name, nl) == 0 && strncmp(p + nl, "=true", 5) == 0)
            return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

/* Answers a request whose context was not made: `j` is the parsed JSON
 * (NULL when json_loadb() failed with `jerr`), `why` what
 * ld_context_from_json() said. Memory running out is 500, not the client's
 * mistake. */
static void send_context_error(lds_server *srv, struct evhttp_request *req, const json_t *j,
                               const json_error_t *jerr, const char *why, int flags)
{
    if (!j ? json_error_code(jerr) == json_error_out_of_memory
           : why && strcmp(why, "out of memory") == 0)
        lds_send_error(srv, req, 500, "out of memory", flags);
    else if (!j)
        lds_send_error(srv, req, 400, "the context is not valid JSON", flags);
    else
        lds_send_error(srv, req, 400, why ? why : "invalid context", flags);
}

/* True when Content-Type value `ct` is of media type `type`: compared
 * case-insensitively (RFC 9110, 8.3.1), parameters aside. */
static bool media_type_is(const char *ct, const char *type)
{
    size_t n = strlen(type);
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (evutil_ascii_strncasecmp(ct, type, n) != 0)
        return false;
    for (ct += n; *ct == ' ' || *ct == '\t';)
        ct++;
    return *ct == '\0' || *ct == ';';
}

static int reasons_asked(const char *query)
{
    return query_flag(query, "withReasons") ? WITH_REASONS : 0;
}

/* Evaluates for the context whose JSON is `text`: a REPORT's body, or a
 * GET's path segment decoded. */
static void evaluate(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                     const char *text, size_t len, int arg)
{
    int flags = arg & ~WITH_REASONS;
    json_error_t jerr = {0}; /* jansson leaves it as it is when its first allocation fails */
    const char *why = NULL;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    ld_context *ctx = j ? ld_context_from_json(j, &why) : NULL;
    if (!ctx)
        send_context_error(srv, req, j, &jerr, why, flags);
    else
        lds_wait_for(
            srv, req,
            ld_evaluator_all_flags(srv->ev, ctx,
                                   LD_ALL_FLAGS_CLIENT_SIDE_ONLY |
                                       (arg & WITH_REASONS ? LD_ALL_FLAGS_WITH_REASONS : 0)),
            rt, flags);
    ld_context_unref(ctx);
    json_decref(j);
}

void lds_evalx_get_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                         char *const *seg, const char *query)
{
    size_t len;
    char *text = b64_decode(seg[4], strlen(seg[4]), &len);
    if (!text)
        lds_send_error(srv, req, len ? 500 : 400,
                       len ? "out of memory" : "the context is not valid base64url", LDS_F_CORS);
    else
        evaluate(srv, req, rt, text, len, LDS_F_CORS | reasons_asked(query));
    lds_free(text);
}

/* A REPORT's body came (lds_read_body()). */
static void report_body(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                        const char *text, size_t len, int arg)
{
    if (srv->closing)
        lds_send_error(srv, req, 503, "server closing", LDS_F_CORS | LDS_F_CLOSE);
    else
        evaluate(srv, req, rt, text, len, arg);
}

void lds_evalx_report_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                            char *const *seg, const char *query)
{
    (void)seg;
    const char *ct = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    if (ct && !media_type_is(ct, "application/json")) {
        lds_send_error(srv, req, 415, "Content-Type must be application/json",
                       LDS_F_CORS | LDS_F_CLOSE);
        return;
    }
    lds_read_body(srv, req, rt, LDS_F_CORS | LDS_F_CLOSE, report_body,
                  LDS_F_CORS | LDS_F_CLOSE | reasons_asked(query));
}

void lds_evalx_finish(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                      ld_future *f, int flags)
{
    (void)rt;
    if (ld_future_is_rejected(f)) {
        lds_send_rejected(srv, req, f, flags);
        return;
    }
    json_t *state = ld_future_json(f);
    if (!json_is_true(json_object_get(state, "$valid"))) {
        lds_send_error(srv, req, 503, "service not initialized", LDS_F_CORS);
        return;
    }
    json_t *x = evalx_of_state(state);
    struct lds_blob *b = x ? lds_blob_json(x) : NULL;
    json_decref(x);
    if (b)
        lds_send_blob(srv, req, 200, b, NULL, LDS_F_CORS);
    else
        lds_send_error(srv, req, 500, "out of memory", LDS_F_CORS);
    lds_blob_unref(b);
}
