#include "util/crypto.h"

#include <openssl/crypto.h>
#include <openssl/md5.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <string.h>

/* The low-level MD5()/SHA256() one-shots are deprecated in OpenSSL 3 but
 * are markedly faster than EVP for small inputs (no provider lookup), and
 * MD5 runs once per partition key and per aggregated record. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

void kn_md5(const void *data, size_t len, uint8_t out[KN_MD5_LEN]) {
  MD5(data, len, out);
}

/* Not SHA256(): in OpenSSL 3 that one-shot goes through EVP_Q_digest and
 * fetches the algorithm on every call, doubling the cost of short inputs
 * (canonical requests, small payloads). */
void kn_sha256(const void *data, size_t len, uint8_t out[KN_SHA256_LEN]) {
  SHA256_CTX c;
  SHA256_Init(&c);
  SHA256_Update(&c, data, len);
  SHA256_Final(out, &c);
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

/* RFC 2104 over the low-level SHA-256: OpenSSL 3's HMAC() fetches an EVP
 * implementation on every call, which for the short messages of SigV4 key
 * derivation costs about five times the hashing itself. */
void kn_hmac_sha256(const void *key, size_t key_len, const void *data,
                    size_t len, uint8_t out[KN_SHA256_LEN]) {
  uint8_t k[SHA256_CBLOCK] = {0}, pad[SHA256_CBLOCK], inner[KN_SHA256_LEN];
  SHA256_CTX c;
  if (key_len > sizeof(k))
    kn_sha256(key, key_len, k);
  else if (key_len)
    memcpy(k, key, key_len);
  for (size_t i = 0; i < sizeof(k); i++) pad[i] = k[i] ^ 0x36;
  SHA256_Init(&c);
  SHA256_Update(&c, pad, sizeof(pad));
  SHA256_Update(&c, data, len);
  SHA256_Final(inner, &c);
  for (size_t i = 0; i < sizeof(k); i++) pad[i] = k[i] ^ 0x5c;
  SHA256_Init(&c);
  SHA256_Update(&c, pad, sizeof(pad));
  SHA256_Update(&c, inner, sizeof(inner));
  SHA256_Final(out, &c);
  OPENSSL_cleanse(k, sizeof(k));
  OPENSSL_cleanse(pad, sizeof(pad));
}

#pragma GCC diagnostic pop

int kn_random_bytes(void *out, size_t len) {
  return RAND_bytes(out, (int)len) == 1 ? 0 : -1;
}
