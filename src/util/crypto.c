#include "util/crypto.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/md5.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

/* The low-level MD5()/SHA256() one-shots are deprecated in OpenSSL 3 but
 * are markedly faster than EVP for small inputs (no provider lookup), and
 * MD5 runs once per partition key and per aggregated record. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

void kn_md5(const void *data, size_t len, uint8_t out[KN_MD5_LEN]) {
  MD5(data, len, out);
}

void kn_sha256(const void *data, size_t len, uint8_t out[KN_SHA256_LEN]) {
  SHA256(data, len, out);
}

struct kn_md5_ctx {
  MD5_CTX c;
};

kn_md5_ctx_t *kn_md5_new(void) {
  kn_md5_ctx_t *ctx = OPENSSL_malloc(sizeof(*ctx));
  if (ctx) MD5_Init(&ctx->c);
  return ctx;
}

void kn_md5_update(kn_md5_ctx_t *ctx, const void *data, size_t len) {
  MD5_Update(&ctx->c, data, len);
}

void kn_md5_final(kn_md5_ctx_t *ctx, uint8_t out[KN_MD5_LEN]) {
  MD5_Final(out, &ctx->c);
  MD5_Init(&ctx->c);
}

void kn_md5_free(kn_md5_ctx_t *ctx) { OPENSSL_free(ctx); }

#pragma GCC diagnostic pop

void kn_hmac_sha256(const void *key, size_t key_len, const void *data,
                    size_t len, uint8_t out[KN_SHA256_LEN]) {
  unsigned int n = KN_SHA256_LEN;
  HMAC(EVP_sha256(), key, (int)key_len, data, len, out, &n);
}

int kn_random_bytes(void *out, size_t len) {
  return RAND_bytes(out, (int)len) == 1 ? 0 : -1;
}
