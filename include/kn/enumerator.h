/* kn_enumerator_t: the coordinator of the stream-processor model
 * (docs/STREAM_PROCESSING.md), as Flink's split enumerator is for its
 * Kinesis source.  It keeps the shard graph, offers a shard once every
 * parent is finished (or gone past the retention period), assigns it to
 * one of the readers through an assigner, takes the readers' "finished"
 * reports, and follows readers joining and leaving.  Its whole state is
 * a snapshot in a documented, versioned byte format.
 *
 * The enumerator is a pure state machine: the application feeds it
 * events (a shard listing, a reader joined or left, a shard finished) and
 * takes its actions (assign shard S from position P to reader R, take
 * shard S back from reader R) with kn_enumerator_next_action().  It starts
 * no thread and does no I/O, except kn_enumerator_sync(), which lists the
 * stream's shards on the caller's thread: call it when
 * kn_enumerator_due_ms() says, from the loop that handles the actions.
 * Applications that list shards themselves call kn_enumerator_shards().
 *
 * Not thread-safe: one thread at a time. */
#ifndef KN_ENUMERATOR_H
#define KN_ENUMERATOR_H

#include <stddef.h>
#include <stdint.h>

#include "kn/client.h"
#include "kn/error.h"
#include "kn/export.h"
#include "kn/position.h"
#include "kn/record.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_enumerator_s kn_enumerator_t;

/* Longest shard or reader id, with its NUL. */
#define KN_ENUM_ID_MAX 256

/* How a ready shard finds its reader. */
typedef enum kn_assigner {
  /* The midpoint of the shard's hash key range, scaled onto the readers
   * in id order: keys stay with the same reader across splits and
   * merges while the readers do not change (Flink's default). */
  KN_ASSIGN_HASH_RANGE = 0,
  /* The reader with the fewest unfinished shards (ties: lowest id). */
  KN_ASSIGN_SHARD_COUNT = 1,
  /* The reader with the least throughput of unfinished shards, as
   * reported with kn_enumerator_shard_load() (a shard not reported
   * weighs its parents' load shared among their children, or 1). */
  KN_ASSIGN_THROUGHPUT = 2
} kn_assigner_t;

/* A shard as an assigner sees it. */
typedef struct kn_enum_shard_info {
  const char *shard_id;
  const char *hash_key_start, *hash_key_end; /* decimal */
  uint64_t load;                             /* as weighed for THROUGHPUT */
} kn_enum_shard_info_t;

/* A reader as an assigner sees it. */
typedef struct kn_enum_reader_info {
  const char *reader_id;
  size_t shards; /* unfinished shards assigned to it */
  uint64_t load; /* their summed load */
} kn_enum_reader_info_t;

/* A custom assigner: returns the index in readers[0 .. n-1] (in reader id
 * order, n >= 1) for shard.  Called inside the enumerator's calls;
 * pointers are valid only during the call.  An index out of range counts
 * as 0. */
typedef size_t(kn_assign_fn)(void *opaque, const kn_enum_shard_info_t *shard,
                             const kn_enum_reader_info_t *readers, size_t n);

/* A new enumerator that starts the shards of its first listing at
 * *initial (copied) and every shard born later at TRIM_HORIZON; shards
 * closed before a first listing at LATEST are finished at once.  NULL on
 * out-of-memory. */
KN_API kn_enumerator_t *kn_enumerator_new(const kn_position_t *initial,
                                          kn_assigner_t assigner);
/* Accepts NULL. */
KN_API void kn_enumerator_destroy(kn_enumerator_t *en);

/* Replaces the assigner with fn (NULL: back to the built-in one). */
KN_API void kn_enumerator_set_assign_fn(kn_enumerator_t *en, kn_assign_fn *fn,
                                        void *opaque);
/* How often kn_enumerator_due_ms() asks for a listing (default 10000). */
KN_API void kn_enumerator_set_sync_interval(kn_enumerator_t *en,
                                            int64_t interval_ms);

/* ---- events ---- */

/* A complete listing of the stream's shards (every page of ListShards,
 * no filter), taken at now_ms on the caller's monotonic clock.  New
 * shards join the graph; known shards absent from it have aged out past
 * the retention period: unassigned ones count as finished, so their
 * children are offered.  list is borrowed.  KN_ERR__NOMEM leaves the
 * enumerator as it was. */
KN_API kn_err_t kn_enumerator_shards(kn_enumerator_t *en,
                                     const kn_shard_list_t *list,
                                     int64_t now_ms);

/* A reader (reader_id copied, 1 to 255 bytes) joins: it gets shards from
 * the next offers on.  Joining twice is harmless. */
KN_API kn_err_t kn_enumerator_reader_joined(kn_enumerator_t *en,
                                            const char *reader_id);
/* A reader left (stopped, failed, or gone in a rescale): its unfinished
 * shards are offered again from their last known positions (see
 * kn_enumerator_shard_returned()), and actions queued for it and not
 * yet taken with kn_enumerator_next_action() are dropped.  Unknown
 * readers are ignored. */
KN_API kn_err_t kn_enumerator_reader_left(kn_enumerator_t *en,
                                          const char *reader_id);

/* reader_id read shard_id to its end.  children (borrowed; NULL when the
 * reader does not know them) join the graph as a listing would add them;
 * one with a parent the enumerator has never seen waits for a listing
 * (the other parent of a merge may be younger than the last listing).
 * A report about a shard already finished is harmless (readers announce
 * finished shards again after a restore).  KN_ERR__NOT_FOUND for a shard
 * never seen. */
KN_API kn_err_t kn_enumerator_finished(kn_enumerator_t *en,
                                       const char *reader_id,
                                       const char *shard_id,
                                       const kn_shard_list_t *children);

/* The application hands shard_id back (a reader left, or answered a
 * REVOKE) with the position where reading resumes, taken from that
 * reader's last completed checkpoint.  The shard is offered again from
 * there.  NULL pos keeps the enumerator's last known position. */
KN_API kn_err_t kn_enumerator_shard_returned(kn_enumerator_t *en,
                                             const char *shard_id,
                                             const kn_position_t *pos);

/* The throughput of shard_id (bytes per second, any unit the
 * application keeps constant), for KN_ASSIGN_THROUGHPUT. */
KN_API kn_err_t kn_enumerator_shard_load(kn_enumerator_t *en,
                                         const char *shard_id, uint64_t load);

/* Takes shards away from readers so that the assigner's choice holds
 * again (after readers joined: rescaling from N to M): emits REVOKE
 * actions; each revoked shard is offered again once the application
 * calls kn_enumerator_shard_returned() for it.  With KN_ASSIGN_HASH_RANGE
 * a shard moves when its midpoint maps to another reader; otherwise
 * shards move from readers above the fair share (rounded up) to readers
 * below it. */
KN_API kn_err_t kn_enumerator_rebalance(kn_enumerator_t *en);

/* ---- actions ---- */

typedef enum kn_enum_action_kind {
  KN_ENUM_ASSIGN = 1, /* reader_id is to read shard_id from start */
  KN_ENUM_REVOKE = 2  /* reader_id is to stop shard_id and hand it back */
} kn_enum_action_kind_t;

typedef struct kn_enum_action {
  kn_enum_action_kind_t kind;
  char shard_id[KN_ENUM_ID_MAX];
  char reader_id[KN_ENUM_ID_MAX];
  kn_position_t start;                       /* ASSIGN */
  char parents[2][KN_ENUM_ID_MAX];           /* ASSIGN: "" when none */
  char hash_key_start[40], hash_key_end[40]; /* ASSIGN: decimal */
} kn_enum_action_t;

/* Offers every ready shard to a reader (when at least one has joined)
 * and pops the oldest pending action into *out: returns 1, or 0 when
 * there is none. */
KN_API int kn_enumerator_next_action(kn_enumerator_t *en,
                                     kn_enum_action_t *out);

/* ---- state ---- */

typedef enum kn_enum_shard_state {
  KN_ENUM_UNKNOWN = 0,  /* not in the graph (never seen, or pruned) */
  KN_ENUM_WAITING = 1,  /* a parent is unfinished */
  KN_ENUM_READY = 2,    /* waiting for a reader */
  KN_ENUM_ASSIGNED = 3, /* a reader has it */
  KN_ENUM_REVOKING = 4, /* taken back, not returned yet */
  KN_ENUM_FINISHED = 5
} kn_enum_shard_state_t;

/* The state of shard_id; reader_id (size bytes; may be NULL) gets the
 * reader that holds it, or "". */
KN_API kn_enum_shard_state_t
kn_enumerator_shard_state(const kn_enumerator_t *en, const char *shard_id,
                          char *reader_id, size_t size);
/* Counts: shards in the graph, and unfinished shards held by reader_id. */
KN_API size_t kn_enumerator_shard_count(const kn_enumerator_t *en);
KN_API size_t kn_enumerator_reader_shards(const kn_enumerator_t *en,
                                          const char *reader_id);

/* When the next listing is due, on the clock of now_ms (a time at or
 * before now_ms: list now). */
KN_API int64_t kn_enumerator_due_ms(const kn_enumerator_t *en, int64_t now_ms);

/* Lists the shards of stream through client (every page; pages after the
 * first carry only NextToken) and feeds them to kn_enumerator_shards()
 * with now_ms.  Blocks the caller for the listing's HTTP calls. */
KN_API kn_error_t *kn_enumerator_sync(kn_enumerator_t *en, kn_client_t *client,
                                      const char *stream, int64_t now_ms);

/* The whole state (shard graph, assignments, positions, readers) in the
 * documented format KN_ENUM_SNAPSHOT_FORMAT; *out is malloc'ed, free()
 * it.  Pending actions are not part of it: a restored enumerator offers
 * ready shards again. */
#define KN_ENUM_SNAPSHOT_FORMAT 1
KN_API kn_error_t *kn_enumerator_snapshot(const kn_enumerator_t *en, void **out,
                                          size_t *len);
/* A new enumerator from snapshot bytes of this or an earlier version,
 * with the assigner given.  KN_ERR__CORRUPT for bytes that are no
 * enumerator snapshot, damaged, or of a newer format. */
KN_API kn_error_t *kn_enumerator_restore(const void *p, size_t len,
                                         kn_assigner_t assigner,
                                         kn_enumerator_t **out);

#ifdef __cplusplus
}
#endif
#endif
