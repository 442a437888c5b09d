#include "util/pager.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* FNV-1a, 64 bits. */
static uint64_t hash(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

int kn_pager_next(kn_pager_t *p, const char *token, size_t len) {
  if (++p->pages > (p->limit ? p->limit : KN_PAGE_LIMIT)) return KN_PAGER_LIMIT;
  if (!token) return KN_PAGER_GO_ON;
  uint64_t h = hash(token, len);
  /* A linear search: at most KN_PAGE_LIMIT tokens, each a network call. */
  for (size_t i = 0; i < p->n; i++)
    if (p->seen[i] == h) return KN_PAGER_REPEAT;
  if (p->n == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 16;
    uint64_t *v = realloc(p->seen, cap * sizeof(*v));
    if (!v) return KN_PAGER_NOMEM;
    p->seen = v;
    p->cap = cap;
  }
  p->seen[p->n++] = h;
  return KN_PAGER_GO_ON;
}

int kn_pager_next_str(kn_pager_t *p, const char *token) {
  return kn_pager_next(p, token, token ? strlen(token) : 0);
}

kn_error_t *kn_pager_error(const kn_pager_t *p, int rc, const char *what) {
  if (rc == KN_PAGER_NOMEM)
    return kn_error_new(KN_ERR__NOMEM, "%s: out of memory", what);
  if (rc != KN_PAGER_LIMIT) return NULL;
  kn_error_t *e =
      kn_error_new(KN_ERR__BAD_MSG,
                   "%s: more than %zu pages: the server does not "
                   "end the listing",
                   what, p->limit ? p->limit : (size_t)KN_PAGE_LIMIT);
  kn_error_set_retriable(e, 0);
  return e;
}

void kn_pager_free(kn_pager_t *p) {
  free(p->seen);
  *p = (kn_pager_t){0};
}
