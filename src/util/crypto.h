/* Hashes and HMAC.  The one place that includes OpenSSL's digest API. */
#ifndef KN_UTIL_CRYPTO_H
#define KN_UTIL_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#define KN_MD5_LEN 16
#define KN_SHA256_LEN 32

void kn_md5(const void *data, size_t len, uint8_t out[KN_MD5_LEN]);
void kn_sha256(const void *data, size_t len, uint8_t out[KN_SHA256_LEN]);
void kn_hmac_sha256(const void *key, size_t key_len, const void *data,
                    size_t len, uint8_t out[KN_SHA256_LEN]);

/* Incremental MD5, for data that arrives in pieces.  Opaque; _free accepts
 * NULL.  _new returns NULL on out-of-memory. */
typedef struct kn_md5_ctx kn_md5_ctx_t;
kn_md5_ctx_t *kn_md5_new(void);
void kn_md5_update(kn_md5_ctx_t *ctx, const void *data, size_t len);
void kn_md5_final(kn_md5_ctx_t *ctx, uint8_t out[KN_MD5_LEN]); /* and reset */
void kn_md5_free(kn_md5_ctx_t *ctx);

/* Cryptographically random bytes; returns 0 on success. */
int kn_random_bytes(void *out, size_t len);

#endif
