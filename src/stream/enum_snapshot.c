/* Format 1 of the enumerator's snapshot (docs/STREAM_PROCESSING.md). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "stream/enum_int.h"
#include "stream/wire.h"

#define MAGIC "KNES"
#define F_HAS_LOAD 1
#define F_LISTED 2

/* The action queued for shard id not yet popped, or NULL.  A snapshot
 * records a shard whose ASSIGN is still queued as unassigned (the
 * restored enumerator offers it again) and one whose REVOKE is still
 * queued as held. */
static const kn_enum_action_t *queued(const kn_enumerator_t *en,
                                      const char *id) {
  const kn_enum_action_t *last = NULL;
  for (size_t i = en->head; i < en->n_actions; i++)
    if (strcmp(en->actions[i].shard_id, id) == 0) last = &en->actions[i];
  return last;
}

kn_error_t *kn_enumerator_snapshot(const kn_enumerator_t *en, void **out,
                                   size_t *len) {
  kn_wr_t w = {KN_BUF_INIT, 0};
  *out = NULL;
  *len = 0;
  kn_wr_header(&w, MAGIC, KN_ENUM_SNAPSHOT_FORMAT);
  kn_wr_u8(&w, (uint8_t)(en->listed_once ? 1 : 0));
  kn_wr_u64(&w, (uint64_t)en->interval_ms);
  kn_wr_position(&w, &en->initial);
  kn_wr_u32(&w, (uint32_t)en->n_readers);
  for (size_t r = 0; r < en->n_readers; r++) kn_wr_str(&w, en->readers[r]);
  kn_wr_u32(&w, (uint32_t)en->n_shards);
  for (size_t i = 0; i < en->n_shards; i++) {
    const eshard_t *s = &en->shards[i];
    size_t at = w.b.len;
    kn_wr_u32(&w, 0); /* the entry's length, filled in below */
    kn_wr_str(&w, s->id);
    kn_wr_str(&w, s->parent);
    kn_wr_str(&w, s->adj);
    kn_wr_str(&w, s->hk_start);
    kn_wr_str(&w, s->hk_end);
    eshard_state_t st = s->state;
    const char *reader = s->reader;
    const kn_enum_action_t *q = queued(en, s->id);
    if (q && q->kind == KN_ENUM_ASSIGN && st == ST_ASSIGNED) {
      st = ST_PENDING;
      reader = NULL;
    } else if (q && q->kind == KN_ENUM_REVOKE && st == ST_REVOKING) {
      st = ST_ASSIGNED;
    }
    kn_wr_u8(&w, (uint8_t)st);
    kn_wr_str(&w, reader);
    kn_wr_position(&w, &s->pos);
    kn_wr_u64(&w, s->load);
    kn_wr_u8(&w, (uint8_t)((s->has_load ? F_HAS_LOAD : 0) |
                           (s->listed ? F_LISTED : 0)));
    kn_wr_put_u32(&w, at, (uint32_t)(w.b.len - at - 4));
  }
  void *p = kn_wr_finish(&w, len);
  if (!p) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  *out = p;
  return NULL;
}

/* One shard entry; 0, -1 malformed, -2 out of memory. */
static int read_shard(kn_rd_t *r, kn_enumerator_t *en) {
  uint32_t elen = kn_rd_u32(r);
  if (r->bad || elen > r->n - r->off) return -1;
  kn_rd_t er = {r->p, r->off + elen, r->off, 0};
  r->off += elen;
  int oom = 0, rc = 0;
  char *id = kn_rd_str(&er, &oom), *parent = kn_rd_str(&er, &oom),
       *adj = kn_rd_str(&er, &oom), *hs = kn_rd_str(&er, &oom),
       *he = kn_rd_str(&er, &oom);
  uint8_t state = kn_rd_u8(&er);
  char *reader = kn_rd_str(&er, &oom);
  kn_position_t pos;
  kn_rd_position(&er, &pos);
  uint64_t load = kn_rd_u64(&er);
  uint8_t flags = kn_rd_u8(&er);
  int holds = state == ST_ASSIGNED || state == ST_REVOKING;
  if (oom) {
    rc = -2;
  } else if (er.bad || !id || !hs || !he || state > ST_FINISHED ||
             !holds != !reader) {
    rc = -1;
  } else {
    long at = kn_enum_add(en, id, parent, adj, hs, he);
    if (at == -1) {
      rc = -2;
    } else if (at < 0) {
      rc = -1;
    } else {
      eshard_t *s = &en->shards[at];
      s->state = (eshard_state_t)state;
      s->reader = reader;
      reader = NULL;
      s->pos = pos;
      s->load = load;
      s->has_load = (flags & F_HAS_LOAD) != 0;
      s->listed = (flags & F_LISTED) != 0;
    }
  }
  free(id);
  free(parent);
  free(adj);
  free(hs);
  free(he);
  free(reader);
  return rc;
}

kn_error_t *kn_enumerator_restore(const void *p, size_t len,
                                  kn_assigner_t assigner,
                                  kn_enumerator_t **out) {
  *out = NULL;
  kn_rd_t r;
  uint16_t version;
  char why[160];
  if (kn_rd_open(&r, p, len, MAGIC, KN_ENUM_SNAPSHOT_FORMAT, &version, why,
                 sizeof(why)))
    return kn_error_new(KN_ERR__CORRUPT, "%s", why);
  kn_enumerator_t *en = kn_enumerator_new(NULL, assigner);
  if (!en) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  int rc = 0;
  en->listed_once = kn_rd_u8(&r) != 0;
  kn_enumerator_set_sync_interval(en, (int64_t)kn_rd_u64(&r));
  kn_rd_position(&r, &en->initial);
  uint32_t nr = kn_rd_u32(&r);
  for (uint32_t i = 0; i < nr && !r.bad && !rc; i++) {
    int oom = 0;
    char *id = kn_rd_str(&r, &oom);
    kn_err_t e = oom ? KN_ERR__NOMEM
                 : (r.bad || !id || kn_enum_reader(en, id) >= 0)
                     ? KN_ERR__INVALID_ARG
                     : kn_enum_add_reader(en, id);
    rc = e == KN_ERR__NOMEM ? -2 : e ? -1 : 0;
    free(id);
  }
  uint32_t ns = kn_rd_u32(&r);
  for (uint32_t i = 0; i < ns && !r.bad && !rc; i++) rc = read_shard(&r, en);
  /* Every holder must be a known reader. */
  for (size_t i = 0; !rc && i < en->n_shards; i++)
    if (en->shards[i].reader && kn_enum_reader(en, en->shards[i].reader) < 0)
      rc = -1;
  if (!rc && (r.bad || r.off != r.n)) rc = -1;
  if (rc) {
    kn_enumerator_destroy(en);
    return rc == -2 ? kn_error_new(KN_ERR__NOMEM, "out of memory")
                    : kn_error_new(KN_ERR__CORRUPT,
                                   "KNES snapshot malformed (fields do not "
                                   "parse or contradict each other)");
  }
  *out = en;
  return NULL;
}
