/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync: LaunchDarkly's secure mode hash (context.h): the HMAC-SHA256 of
 * a context's fully-qualified key, keyed with the SDK key, in hex.
 *
 * HMAC (RFC 2104) is written out here over OpenSSL's low-level SHA256_Init/
 * Update/Final on stack contexts, for the reasons lib/eval/bucket.c gives
 * for its hashes: OpenSSL's HMAC() (EVP_Q_mac in 3.0) and EVP_MAC allocate
 * through OpenSSL's allocator, which is not the library's hook and not ours
 * to set, and they can fail; this allocates nothing, cannot fail and
 * triggers no OpenSSL initialisation. The same OPENSSL_API_COMPAT request
 * as bucket.c's. tests/model/check_secure_mode.c compares the result with
 * OpenSSL's HMAC() and checks that no allocation happens.
 */
#undef OPENSSL_API_COMPAT /* whatever the build asks for elsewhere */
#define OPENSSL_API_COMPAT 0x10101000L

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <ldasync/context.h>
#include <ldasync/error.h>

#ifdef OPENSSL_NO_DEPRECATED_3_0
#error "lib/model/secure_mode.c needs OpenSSL's SHA256_Init (see the comment at its top)"
#endif

enum { BLOCK = SHA256_CBLOCK }; /* 64 bytes */

int ld_secure_mode_hash(const char *sdk_key, const ld_context *ctx, char out[65])
{
    static const char HEX[] = "0123456789abcdef";
    const char *msg = ld_context_fully_qualified_key(ctx);
    if (!sdk_key || !msg || !out)
        return LD_EINVAL;

    /* The key, hashed first if longer than a block, padded with zeros. */
    unsigned char k[BLOCK] = {0};
    unsigned char pad[BLOCK], md[SHA256_DIGEST_LENGTH];
    SHA256_CTX c;
    size_t key_len = strlen(sdk_key);
    if (key_len > BLOCK) {
        /* not SHA256(): in OpenSSL 3 it is EVP_Q_digest, which allocates */
        SHA256_Init(&c);
        SHA256_Update(&c, sdk_key, key_len);
        SHA256_Final(k, &c);
    } else {
        memcpy(k, sdk_key, key_len);
    }
    for (size_t i = 0; i < BLOCK; i++)
        pad[i] = k[i] ^ 0x36;
    SHA256_Init(&c);
    SHA256_Update(&c, pad, BLOCK);
    SHA256_Update(&c, msg, strlen(msg));
    SHA256_Final(md, &c);

    for (size_t i = 0; i < BLOCK; i++)
        pad[i] = k[i] ^ 0x5c;
    SHA256_Init(&c);
    SHA256_Update(&c, pad, BLOCK);
    SHA256_Update(&c, md, sizeof md);
    SHA256_Final(md, &c);

    for (size_t i = 0; i < sizeof md; i++) {
        out[2 * i] = HEX[md[i] >> 4];
        out[2 * i + 1] = HEX[md[i] & 0xf];
    }
    out[2 * sizeof md] = '\0';
    /* The SDK key is a secret: leave none of it on the stack. */
    OPENSSL_cleanse(k, sizeof k);
    OPENSSL_cleanse(pad, sizeof pad);
    OPENSSL_cleanse(&c, sizeof c);
    return 0;
}
