/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * bench/bare-evhttp.c: the HTTP layer's limit for bench/serve-bench.sh: a
 * bare evhttp server answering every request with one constant JSON body
 * (the text of the file given: say one flag), by reference, with keep-alive.
 * Its loop is configured as ldasync-serve's is (epoll's change list), so
 * that the two differ only in what they do per request; `--default` gives
 * libevent's default configuration instead.
 *
 * usage: bare-evhttp PORT BODY_FILE [--default]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

static char *body;
static size_t body_len;

static void answer(struct evhttp_request *req, void *arg)
{
    struct evbuffer *out = arg;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evbuffer_add_reference(out, body, body_len, NULL, NULL);
    evhttp_send_reply(req, 200, "OK", out);
}

int main(int argc, char **argv)
{
    if (argc != 3 && (argc != 4 || strcmp(argv[3], "--default") != 0)) {
        fprintf(stderr, "usage: bare-evhttp PORT BODY_FILE [--default]\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0) {
        perror(argv[2]);
        return 1;
    }
    long n = ftell(f);
    rewind(f);
    body = malloc((size_t)n + 1);
    if (!body || n < 0 || fread(body, 1, (size_t)n, f) != (size_t)n) {
        perror(argv[2]);
        return 1;
    }
    fclose(f);
    body_len = (size_t)n;
    struct event_config *cfg = event_config_new();
    if (cfg && argc == 3)
        event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    struct event_base *base = cfg ? event_base_new_with_config(cfg) : NULL;
    if (cfg)
        event_config_free(cfg);
    struct evhttp *http = base ? evhttp_new(base) : NULL;
    struct evbuffer *out = evbuffer_new();
    if (!http || !out || evhttp_bind_socket(http, "127.0.0.1", (ev_uint16_t)atoi(argv[1])) != 0) {
        fprintf(stderr, "bare-evhttp: cannot listen on port %s\n", argv[1]);
        return 1;
    }
    evhttp_set_gencb(http, answer, out);
    event_base_dispatch(base);
    return 0;
}
