#include "util/secure.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

void kn_secure_wipe(void *p, size_t n) {
  if (p && n) OPENSSL_cleanse(p, n);
}

void kn_secure_free_str(char *s) {
  if (!s) return;
  OPENSSL_cleanse(s, strlen(s));
  free(s);
}
