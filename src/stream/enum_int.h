/* Internals of kn_enumerator_t (include/kn/enumerator.h), shared by its
 * files: the events (enumerator.c), the assigners (enum_assign.c), the
 * snapshot (enum_snapshot.c) and the listing shell (enum_sync.c). */
#ifndef KN_STREAM_ENUM_INT_H
#define KN_STREAM_ENUM_INT_H

#include <stddef.h>
#include <stdint.h>

#include "kinesis/hashkey.h"
#include "kn/enumerator.h"

/* What the enumerator stores; WAITING and READY of the public state are
 * both ST_PENDING, told apart by the parents. */
typedef enum eshard_state {
  ST_PENDING = 0,
  ST_ASSIGNED = 1,
  ST_REVOKING = 2,
  ST_FINISHED = 3
} eshard_state_t;

typedef struct eshard {
  char *id;           /* owned */
  char *parent, *adj; /* owned, or NULL */
  char hk_start[KN_U128_DEC_BUFSZ], hk_end[KN_U128_DEC_BUFSZ];
  kn_u128_t start, end;
  eshard_state_t state;
  char *reader;      /* owned; ASSIGNED, REVOKING: who holds it */
  kn_position_t pos; /* where the next reader starts */
  uint64_t load;
  int has_load;
  int listed; /* seen in a listing (not only in a report) */
} eshard_t;

struct kn_enumerator_s {
  eshard_t *shards; /* in id order */
  size_t n_shards, cap_shards;
  char **readers; /* owned ids, in id order */
  size_t n_readers, cap_readers;
  kn_enum_action_t *actions; /* FIFO: actions[head .. n_actions-1] */
  size_t head, n_actions, cap_actions;
  kn_position_t initial;
  kn_assigner_t assigner;
  kn_assign_fn *assign_fn;
  void *assign_opaque;
  int listed_once;      /* a listing came in (or was restored) */
  int64_t interval_ms;  /* between listings */
  int64_t last_sync_ms; /* of the last listing; valid with synced */
  int synced;
};

/* Index of id in en->shards, or -1. */
long kn_enum_find(const kn_enumerator_t *en, const char *id);
/* The same with where it is or would go in the sorted table (enum_table.c). */
long kn_enum_find_at(const kn_enumerator_t *en, const char *id, size_t *at);
long kn_enum_reader_at(const kn_enumerator_t *en, const char *id, size_t *at);
/* Index of id in en->readers, or -1. */
long kn_enum_reader(const kn_enumerator_t *en, const char *id);
/* A new shard from its fields (copied); returns its index, or -1 on
 * out-of-memory, -2 on a malformed id or hash key. */
long kn_enum_add(kn_enumerator_t *en, const char *id, const char *parent,
                 const char *adj, const char *hk_start, const char *hk_end);
/* Adds reader id (copied); 0, or KN_ERR__NOMEM / KN_ERR__INVALID_ARG. */
kn_err_t kn_enum_add_reader(kn_enumerator_t *en, const char *id);
/* Non-zero if every parent of s is finished or absent. */
int kn_enum_parents_done(const kn_enumerator_t *en, const eshard_t *s);

/* The reader (index into en->readers) the assigner picks for s; needs at
 * least one reader.  -1 on out-of-memory. */
long kn_enum_pick(kn_enumerator_t *en, const eshard_t *s);
/* The load s weighs for the assigners. */
uint64_t kn_enum_weight(const kn_enumerator_t *en, const eshard_t *s);
/* Appends a REVOKE (or ASSIGN) action for s; KN_ERR__NOMEM. */
kn_err_t kn_enum_push(kn_enumerator_t *en, kn_enum_action_kind_t kind,
                      const eshard_t *s);

#endif
