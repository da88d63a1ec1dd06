/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * lib/net/net_config.c: ld_net_config (network.h), how the data sources
 * reach LaunchDarkly, and what they derive from it: URLs, request headers,
 * HTTP options.
 */

#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include <openssl/rand.h>

#include <ldasync/error.h>
#include <ldasync/network.h>
#include <ldasync/version.h>

#include "core/core-internal.h"
#include "net/net-internal.h"

#define DAY_MS 86400000

static bool key_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* Whether `s` is 1..max bytes of [A-Za-z0-9._-]. */
static bool key_like(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!key_char((unsigned char)s[i]))
            return false;
    return true;
}

/* Whether `s` holds no space and no control byte. */
static bool no_space(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == 0x7f)
            return false;
    return true;
}

/* Replaces *slot by a copy of `v` (NULL: none). */
static int set_str(char **slot, const char *v)
{
    char *copy = NULL;
    if (v && !(copy = ld__strdup(v)))
        return LD_ENOMEM;
    ld__free(*slot);
    *slot = copy;
    return 0;
}

void ld__uuid4(char out[37])
{
    unsigned char b[16];
    if (RAND_bytes(b, sizeof(b)) != 1) {
        /* no entropy from OpenSSL: a weaker ID still tells instances apart */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)out;
        for (size_t i = 0; i < sizeof(b); i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b[i] = (unsigned char)x;
        }
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

ld_net_config *ld_net_config_new(const char *sdk_key)
{
    if (!sdk_key || !key_like(sdk_key, 8192))
        return NULL;
    ld_net_config *c = ld__calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->sdk_key = ld__strdup(sdk_key);
    c->stream_uri = ld__strdup(LD_DEFAULT_STREAM_URI);
    c->base_uri = ld__strdup(LD_DEFAULT_BASE_URI);
    c->events_uri = ld__strdup(LD_DEFAULT_EVENTS_URI);
    if (!c->sdk_key || !c->stream_uri || !c->base_uri || !c->events_uri) {
        ld_net_config_free(c);
        return NULL;
    }
    c->verify = true;
    c->connect_ms = 10000;
    c->read_ms = 15000;
    c->stream_read_ms = 300000;
    c->reconnect_ms = 1000;
    c->reconnect_max_ms = 30000;
    c->poll_ms = 30000;
    ld__uuid4(c->instance_id);
    return c;
}

ld_net_config *ld_net_config_copy(const ld_net_config *cfg)
{
    if (!cfg)
        return NULL;
    ld_net_config *c = ld__calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    *c = *cfg;
    char **s[] = {&c->sdk_key,         &c->stream_uri, &c->base_uri,    &c->events_uri,
                  &c->filter,          &c->app_id,     &c->app_version, &c->wrapper_name,
                  &c->wrapper_version, &c->ca_file,    &c->proxy};
    bool ok = true;
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
        const char *v = *s[i];
        *s[i] = NULL;
        if (v && ok && !(*s[i] = ld__strdup(v)))
            ok = false;
    }
    if (!ok) {
        ld_net_config_free(c);
        return NULL;
    }
    return c;
}

void ld_net_config_free(ld_net_config *c)
{
    if (!c)
        return;
    ld__free(c->sdk_key);
    ld__free(c->stream_uri);
    ld__free(c->base_uri);
    ld__free(c->events_uri);
    ld__free(c->filter);
    ld__free(c->app_id);
    ld__free(c->app_version);
    ld__free(c->wrapper_name);
    ld__free(c->wrapper_version);
    ld__free(c->ca_file);
    ld__free(c->proxy);
    ld__free(c);
}

/* "http://" or "https://", a host, no space; trailing '/' dropped. */
static int set_uri(char **slot, const char *uri, const char *dflt)
{
    if (!uri)
        return set_str(slot, dflt);
    size_t skip;
    if (strncmp(uri, "http://", 7) == 0)
        skip = 7;
    else if (strncmp(uri, "https://", 8) == 0)
        skip = 8;
    else
        return LD_EINVAL;
    if (!no_space(uri) || uri[skip] == '\0' || uri[skip] == '/' || uri[skip] == ':' ||
        uri[skip] == '?' || uri[skip] == '#')
        return LD_EINVAL;
    /* the rest (an IPv6 address's brackets, a port in range, the host's
     * characters) as libcurl, which will connect to it, parses it */
    CURLU *u = curl_url();
    if (!u)
        return LD_ENOMEM;
    CURLUcode rc = curl_url_set(u, CURLUPART_URL, uri, 0);
    curl_url_cleanup(u);
    if (rc == CURLUE_OUT_OF_MEMORY)
        return LD_ENOMEM;
    if (rc != CURLUE_OK)
        return LD_EINVAL;
    size_t n = strlen(uri);
    while (n > skip && uri[n - 1] == '/')
        n--;
    char *copy = ld__malloc(n + 1);
    if (!copy)
        return LD_ENOMEM;
    memcpy(copy, uri, n);
    copy[n] = '\0';
    ld__free(*slot);
    *slot = copy;
    return 0;
}

int ld_net_config_set_stream_uri(ld_net_config *cfg, const char *uri)
{
    return cfg ? set_uri(&cfg->stream_uri, uri, LD_DEFAULT_STREAM_URI) : LD_EINVAL;
}

int ld_net_config_set_base_uri(ld_net_config *cfg, const char *uri)
{
    return cfg ? set_uri(&cfg->base_uri, uri, LD_DEFAULT_BASE_URI) : LD_EINVAL;
}

int ld_net_config_set_events_uri(ld_net_config *cfg, const char *uri)
{
    return cfg ? set_uri(&cfg->events_uri, uri, LD_DEFAULT_EVENTS_URI) : LD_EINVAL;
}

int ld_net_config_set_payload_filter(ld_net_config *cfg, const char *key)
{
    if (!cfg || (key && !key_like(key, 8192)))
        return LD_EINVAL;
    return set_str(&cfg->filter, key);
}

int ld_net_config_set_application(ld_net_config *cfg, const char *id, const char *version)
{
    if (!cfg || (id && !key_like(id, 64)) || (version && !key_like(version, 64)))
        return LD_EINVAL;
    char *a = NULL, *b = NULL;
    if ((id && !(a = ld__strdup(id))) || (version && !(b = ld__strdup(version)))) {
        ld__free(a);
        return LD_ENOMEM;
    }
    ld__free(cfg->app_id);
    ld__free(cfg->app_version);
    cfg->app_id = a;
    cfg->app_version = b;
    return 0;
}

static bool header_safe(const char *s, bool slash_ok)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s < ' ' || *s == 0x7f || (!slash_ok && *s == '/'))
            return false;
    return true;
}

int ld_net_config_set_wrapper(ld_net_config *cfg, const char *name, const char *version)
{
    if (!cfg || (!name && version) || (name && !header_safe(name, false)) ||
        (version && !header_safe(version, true)))
        return LD_EINVAL;
    char *a = NULL, *b = NULL;
    if ((name && !(a = ld__strdup(name))) || (version && !(b = ld__strdup(version)))) {
        ld__free(a);
        return LD_ENOMEM;
    }
    ld__free(cfg->wrapper_name);
    ld__free(cfg->wrapper_version);
    cfg->wrapper_name = a;
    cfg->wrapper_version = b;
    return 0;
}

int ld_net_config_set_ca_file(ld_net_config *cfg, const char *path)
{
    if (!cfg || (path && !*path))
        return LD_EINVAL;
    return set_str(&cfg->ca_file, path);
}

int ld_net_config_set_verify_peer(ld_net_config *cfg, bool verify)
{
    if (!cfg)
        return LD_EINVAL;
    cfg->verify = verify;
    return 0;
}

int ld_net_config_set_proxy(ld_net_config *cfg, const char *url)
{
    if (!cfg || (url && *url && !no_space(url)))
        return LD_EINVAL;
    int code = set_str(&cfg->proxy, url);
    if (code == 0)
        cfg->proxy_set = url != NULL;
    return code;
}

int ld_net_config_set_timeouts(ld_net_config *cfg, int64_t connect_ms, int64_t read_ms,
                               int64_t stream_read_ms)
{
    if (!cfg || connect_ms > DAY_MS || read_ms > DAY_MS || stream_read_ms > DAY_MS)
        return LD_EINVAL;
    if (connect_ms > 0)
        cfg->connect_ms = connect_ms;
    if (read_ms > 0)
        cfg->read_ms = read_ms;
    if (stream_read_ms > 0)
        cfg->stream_read_ms = stream_read_ms;
    return 0;
}

int ld_net_config_set_reconnect_delay(ld_net_config *cfg, int64_t initial_ms)
{
    if (!cfg || initial_ms < 0 || initial_ms > 3600000)
        return LD_EINVAL;
    cfg->reconnect_ms = initial_ms;
    return 0;
}

int ld_net_config_set_poll_interval(ld_net_config *cfg, int64_t ms)
{
    if (!cfg || ms <= 0 || ms > DAY_MS)
        return LD_EINVAL;
    cfg->poll_ms = ms < 30000 ? 30000 : ms;
    return 0;
}

void ld__net_config_poll_interval_unclamped(ld_net_config *cfg, int64_t ms)
{
    cfg->poll_ms = ms;
}

const char *ld_net_config_sdk_key(const ld_net_config *cfg)
{
    return cfg ? cfg->sdk_key : NULL;
}

const char *ld_net_config_stream_uri(const ld_net_config *cfg)
{
    return cfg ? cfg->stream_uri : NULL;
}

const char *ld_net_config_base_uri(const ld_net_config *cfg)
{
    return cfg ? cfg->base_uri : NULL;
}

const char *ld_net_config_events_uri(const ld_net_config *cfg)
{
    return cfg ? cfg->events_uri : NULL;
}

const char *ld_net_config_instance_id(const ld_net_config *cfg)
{
    return cfg ? cfg->instance_id : NULL;
}

bool ld_net_config_verify_peer(const ld_net_config *cfg)
{
    return cfg ? cfg->verify : true;
}

/* ------------------------------------------------------------------------- */
/* What the sources derive                                                   */

char *ld__net_url(const ld_net_config *c, const char *root, const char *path)
{
    size_t n = strlen(root) + strlen(path) + (c->filter ? strlen(c->filter) + 8 : 0) + 1;
    char *url = ld__malloc(n);
    if (!url)
        return NULL;
    /* the filter's bytes need no percent-encoding: [A-Za-z0-9._-] */
    snprintf(url, n, "%s%s%s%s", root, path, c->filter ? "?filter=" : "",
             c->filter ? c->filter : "");
    return url;
}

char **ld__net_headers(const ld_net_config *c, const char *const *extra)
{
    char line[5][200 + 8192];
    size_t n = 0;
    snprintf(line[n++], sizeof(line[0]), "Authorization: %s", c->sdk_key);
    snprintf(line[n++], sizeof(line[0]), "User-Agent: ldasync/%s", ld_version_string());
    snprintf(line[n++], sizeof(line[0]), "X-LaunchDarkly-Instance-Id: %s", c->instance_id);
    if (c->app_id || c->app_version)
        snprintf(line[n++], sizeof(line[0]), "X-LaunchDarkly-Tags: %s%s%s%s%s",
                 c->app_id ? "application-id/" : "", c->app_id ? c->app_id : "",
                 c->app_id && c->app_version ? " " : "",
                 c->app_version ? "application-version/" : "",
                 c->app_version ? c->app_version : "");
    size_t n_extra = 0;
    while (extra && extra[n_extra])
        n_extra++;
    size_t wrap = c->wrapper_name
                      ? strlen("X-LaunchDarkly-Wrapper: ") + strlen(c->wrapper_name) +
                            (c->wrapper_version ? strlen(c->wrapper_version) + 1 : 0) + 1
                      : 0;
    size_t bytes = (n + n_extra + (wrap ? 1 : 0) + 1) * sizeof(char *) + wrap;
    for (size_t i = 0; i < n; i++)
        bytes += strlen(line[i]) + 1;
    for (size_t i = 0; i < n_extra; i++)
        bytes += strlen(extra[i]) + 1;
    char **h = ld__malloc(bytes);
    if (!h)
        return NULL;
    char *p = (char *)(h + n + n_extra + (wrap ? 1 : 0) + 1);
    size_t k = 0;
    for (size_t i = 0; i < n + n_extra; i++) {
        const char *s = i < n ? line[i] : extra[i - n];
        size_t len = strlen(s) + 1;
        memcpy(p, s, len);
        h[k++] = p;
        p += len;
    }
    if (wrap) {
        snprintf(p, wrap, "X-LaunchDarkly-Wrapper: %s%s%s", c->wrapper_name,
                 c->wrapper_version ? "/" : "", c->wrapper_version ? c->wrapper_version : "");
        h[k++] = p;
    }
    h[k] = NULL;
    return h;
}

void ld__net_http_options(const ld_net_config *c, bool stream, struct ld__http_options *o)
{
    memset(o, 0, sizeof(*o));
    o->ca_file = c->ca_file;
    o->insecure = !c->verify;
    o->proxy = c->proxy_set ? c->proxy : NULL;
    o->connect_timeout_ms = (long)c->connect_ms;
    o->read_timeout_ms = (long)(stream ? c->stream_read_ms : c->read_ms);
    o->user_agent = NULL; /* sent as a header of ours */
}
