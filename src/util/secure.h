/* Wiping key material (secret keys, signing keys, tokens, credential
 * documents, header lines holding them) before its memory is reused, with
 * OPENSSL_cleanse, which the compiler cannot optimise away. */
#ifndef KN_UTIL_SECURE_H
#define KN_UTIL_SECURE_H

#include <stddef.h>

/* Zeroes n bytes at p; accepts NULL. */
void kn_secure_wipe(void *p, size_t n);
/* Wipes a NUL-terminated string and frees it; accepts NULL. */
void kn_secure_free_str(char *s);

#endif
