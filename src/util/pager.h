/* A guard for paging loops against a server that never ends them: a page
 * token seen before, at any distance (not only the previous one), or more
 * pages than any real listing has. */
#ifndef KN_UTIL_PAGER_H
#define KN_UTIL_PAGER_H

#include <stddef.h>
#include <stdint.h>

/* Pages one listing may take: 10,000 pages of ListShards are 10 million
 * shards, of a DynamoDB Scan 10 GB of leases. */
#define KN_PAGE_LIMIT 10000

/* The tokens seen, as 64-bit hashes (a collision at most ends a listing
 * early, never loops).  Owns seen; zero-initialise, free with
 * kn_pager_free(). */
typedef struct kn_pager {
  uint64_t *seen;
  size_t n, cap;
  size_t pages;
  size_t limit; /* 0: KN_PAGE_LIMIT */
} kn_pager_t;

enum {
  KN_PAGER_GO_ON = 0,  /* token new (or NULL): fetch on if there is one */
  KN_PAGER_REPEAT = 1, /* token seen before: the listing is complete */
  KN_PAGER_LIMIT = 2,  /* more pages than the limit */
  KN_PAGER_NOMEM = -1
};

/* Counts a page that ended with token (len bytes; NULL: none) and says
 * whether to go on. */
int kn_pager_next(kn_pager_t *p, const char *token, size_t len);
/* kn_pager_next() on a NUL-terminated token (or NULL). */
int kn_pager_next_str(kn_pager_t *p, const char *token);
/* The error that ends a listing after KN_PAGER_LIMIT or KN_PAGER_NOMEM
 * (what: the operation, "ListShards"); NULL for the other results. */
struct kn_error_s *kn_pager_error(const kn_pager_t *p, int rc,
                                  const char *what);
void kn_pager_free(kn_pager_t *p);

#endif
