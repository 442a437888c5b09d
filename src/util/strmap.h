/* A map from strings to pointers, for lookups by shard id among thousands
 * (open addressing, linear probing; no removal: the tables it indexes only
 * grow).
 *
 * Ownership: keys are borrowed -- each must stay valid and unchanged while
 * the map holds it (it is normally a field of the value).  The map owns
 * only its slot array. */
#ifndef KN_UTIL_STRMAP_H
#define KN_UTIL_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct kn_strmap_slot {
  const char *key; /* NULL: empty */
  void *val;
  uint64_t hash; /* of key: most probes end without a string compare */
} kn_strmap_slot_t;

typedef struct kn_strmap {
  kn_strmap_slot_t *slots;
  size_t cap; /* a power of two, or 0 */
  size_t n;
} kn_strmap_t;

#define KN_STRMAP_INIT \
  { NULL, 0, 0 }

/* Frees the slots and empties the map.  Accepts an empty map. */
void kn_strmap_free(kn_strmap_t *m);
/* The value of key, or NULL. */
void *kn_strmap_get(const kn_strmap_t *m, const char *key);
/* Sets key to val (replacing an earlier value).  0, or -1 on
 * out-of-memory (the map is then unchanged). */
int kn_strmap_put(kn_strmap_t *m, const char *key, void *val);

#endif
