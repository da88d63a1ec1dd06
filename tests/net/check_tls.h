/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * TLS for the network suites' test servers: a CA and a server certificate
 * for "localhost" made at test time (P-256 keys, SHA-256, valid from an
 * hour ago for a day), another CA that signed nothing the server shows, the
 * two CAs as PEM files in a temporary directory, and an SSL_CTX serving the
 * certificate, for evhttp_set_bevcb() with ld_test_tls_bev().
 */
#ifndef LDASYNC_CHECK_TLS_H
#define LDASYNC_CHECK_TLS_H

#include <openssl/ssl.h>

struct bufferevent;
struct event_base;

struct ld_test_tls {
    EVP_PKEY *ca_key, *key, *other_key;
    X509 *ca, *cert, *other_ca;
    SSL_CTX *ctx;
    char dir[64], ca_file[96], other_file[96];
};

/* Makes all of it (asserting that each step works). */
void ld_test_tls_make(struct ld_test_tls *t);
/* Frees it and removes the files. */
void ld_test_tls_free(struct ld_test_tls *t);
/* An evhttp bufferevent callback: a server-side TLS bufferevent of the
 * SSL_CTX `ctx`. */
struct bufferevent *ld_test_tls_bev(struct event_base *base, void *ctx);

#endif
