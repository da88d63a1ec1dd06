/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * TLS for the network suites' test servers (check_tls.h).
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "check_tls.h"

static void add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(X509_add_ext(x, e, -1), 1);
    X509_EXTENSION_free(e);
}

/* A certificate of `key` named `cn`, signed by `signer_key` as `issuer`
 * (itself when NULL): a CA, or a server certificate for `san`. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, EVP_PKEY *signer_key, X509 *issuer,
                       const char *san)
{
    static long serial = 1;
    X509 *x = X509_new();
    ck_assert_ptr_nonnull(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
    X509 *by = issuer ? issuer : x;
    if (san) {
        add_ext(x, by, NID_basic_constraints, "CA:FALSE");
        add_ext(x, by, NID_subject_alt_name, san);
        add_ext(x, by, NID_ext_key_usage, "serverAuth");
    } else {
        add_ext(x, by, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(x, by, NID_key_usage, "critical,keyCertSign,cRLSign");
    }
    ck_assert_int_gt(X509_sign(x, signer_key, EVP_sha256()), 0);
    return x;
}

static void write_pem(const char *path, X509 *x)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(PEM_write_X509(f, x), 1);
    fclose(f);
}

struct bufferevent *ld_test_tls_bev(struct event_base *base, void *arg)
{
    SSL *ssl = SSL_new(arg);
    return ssl ? bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                BEV_OPT_CLOSE_ON_FREE)
               : NULL;
}

void ld_test_tls_make(struct ld_test_tls *t)
{
    memset(t, 0, sizeof *t);
    t->ca_key = EVP_EC_gen("P-256");
    t->key = EVP_EC_gen("P-256");
    t->other_key = EVP_EC_gen("P-256");
    ck_assert(t->ca_key && t->key && t->other_key);
    t->ca = make_cert(t->ca_key, "ldasync test CA", t->ca_key, NULL, NULL);
    t->cert = make_cert(t->key, "localhost", t->ca_key, t->ca, "DNS:localhost");
    t->other_ca = make_cert(t->other_key, "another CA", t->other_key, NULL, NULL);
    snprintf(t->dir, sizeof t->dir, "/tmp/ldasync-tls-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(t->dir));
    snprintf(t->ca_file, sizeof t->ca_file, "%s/ca.pem", t->dir);
    snprintf(t->other_file, sizeof t->other_file, "%s/other.pem", t->dir);
    write_pem(t->ca_file, t->ca);
    write_pem(t->other_file, t->other_ca);
    t->ctx = SSL_CTX_new(TLS_server_method());
    ck_assert_ptr_nonnull(t->ctx);
    ck_assert_int_eq(SSL_CTX_use_certificate(t->ctx, t->cert), 1);
    ck_assert_int_eq(SSL_CTX_use_PrivateKey(t->ctx, t->key), 1);
}

void ld_test_tls_free(struct ld_test_tls *t)
{
    SSL_CTX_free(t->ctx);
    X509_free(t->ca);
    X509_free(t->cert);
    X509_free(t->other_ca);
    EVP_PKEY_free(t->ca_key);
    EVP_PKEY_free(t->key);
    EVP_PKEY_free(t->other_key);
    unlink(t->ca_file);
    unlink(t->other_file);
    rmdir(t->dir);
    memset(t, 0, sizeof *t);
}
