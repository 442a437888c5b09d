/* Deaggregation: one Kinesis record in, its user records appended to a
 * batch.
 *
 * The protobuf is unpacked by protobuf-c (the code protoc-c generates from
 * kpl_messages.proto) with an allocator that carves everything the message
 * needs out of one block, sized from the input: one allocation per
 * aggregate instead of one per field.  Once every check has passed, the
 * payloads and keys are copied back over the aggregate's own bytes, which
 * are no longer needed, and the user records point there; the block is
 * freed before returning, so the next call gets the same heap memory back
 * instead of new pages. */
#include <stdalign.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "agg/kpl_messages.pb-c.h"
#include "core/error.h"
#include "util/crypto.h"

int kn_agg_has_magic(const void *data, size_t len) {
  return len >= KN_AGG_MAGIC_LEN &&
         memcmp(data, KN_AGG_MAGIC, KN_AGG_MAGIC_LEN) == 0;
}

/* ---- The arena ------------------------------------------------------------
 */

/* A chunk of the arena: this header, then the bytes handed out. */
struct chunk {
  struct chunk *next;
  size_t used, cap;
};

#define ARENA_ALIGN 8u
#define CHUNK_HDR \
  ((sizeof(struct chunk) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1))

struct arena {
  struct chunk *head; /* the chunk being filled; older ones follow */
  size_t first_cap;   /* size of the first chunk, made on first use */
  int nomem;          /* an allocation failed */
};

static void arena_init(struct arena *a, size_t input_len) {
  a->head = NULL;
  a->nomem = 0;
  /* Payloads and keys are copied once (at most the input's size); the
   * messages, the pointer arrays and the NUL terminators take some more:
   * about a tenth more for 1 KB records.  Small records need further
   * chunks. */
  size_t cap = input_len < SIZE_MAX / 4 ? input_len + input_len / 4 + 1024
                                        : SIZE_MAX / 2;
  a->first_cap = cap;
}

static void *arena_alloc(void *data, size_t size) {
  struct arena *a = data;
  if (size > SIZE_MAX / 2) {
    a->nomem = 1;
    return NULL;
  }
  size = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
  struct chunk *c = a->head;
  if (!c || c->cap - c->used < size) {
    size_t cap = c ? c->cap * 2 : a->first_cap;
    if (cap < size) cap = size;
    if (cap > SIZE_MAX - CHUNK_HDR) cap = SIZE_MAX - CHUNK_HDR;
    struct chunk *n = malloc(CHUNK_HDR + cap);
    if (!n) {
      a->nomem = 1;
      return NULL;
    }
    n->next = c;
    n->used = 0;
    n->cap = cap;
    a->head = c = n;
  }
  void *p = (char *)c + CHUNK_HDR + c->used;
  c->used += size;
  return p;
}

/* Everything is freed at once, with the arena. */
static void arena_free_one(void *data, void *p) {
  (void)data;
  (void)p;
}

static void arena_free(struct arena *a) {
  while (a->head) {
    struct chunk *next = a->head->next;
    free(a->head);
    a->head = next;
  }
}

/* ---- Errors ---------------------------------------------------------------
 */

static kn_err_t corrupt(kn_error_t **errp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static kn_err_t corrupt(kn_error_t **errp, const char *fmt, ...) {
  if (errp) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    *errp = kn_error_new(KN_ERR__CORRUPT, "aggregated record: %s", msg);
  }
  return KN_ERR__CORRUPT;
}

static kn_err_t nomem(kn_error_t **errp) {
  if (errp) *errp = kn_error_new(KN_ERR__NOMEM, "deaggregation: out of memory");
  return KN_ERR__NOMEM;
}

/* Non-zero when one of the message's unknown fields has the number 0,
 * which protobuf forbids and protobuf-c lets through when the tag is
 * written in more than one byte. */
static int has_field0(const ProtobufCMessage *m) {
  for (unsigned i = 0; i < m->n_unknown_fields; i++)
    if (m->unknown_fields[i].tag == 0) return 1;
  return 0;
}

static int any_field0(const KnKpl__AggregatedRecord *m) {
  if (has_field0(&m->base)) return 1;
  for (size_t i = 0; i < m->n_records; i++) {
    const KnKpl__Record *r = m->records[i];
    if (has_field0(&r->base)) return 1;
    for (size_t j = 0; j < r->n_tags; j++)
      if (has_field0(&r->tags[j]->base)) return 1;
  }
  return 0;
}

/* ---- The range check ------------------------------------------------------
 */

enum { HK_UNKNOWN, HK_IN, HK_OUT, HK_BAD };

/* The verdict on one key table entry, worked out on first use and kept in
 * *v. */
static int key_verdict(const char *key, int is_ehk, const kn_agg_filter_t *f,
                       uint8_t *v) {
  if (*v == HK_UNKNOWN) {
    kn_u128_t hk;
    size_t n = strlen(key);
    if (is_ehk) {
      if (kn_u128_parse(key, n, &hk)) return *v = HK_BAD;
    } else {
      hk = kn_hashkey_of(key, n);
    }
    *v = kn_u128_in_range(hk, f->range_start, f->range_end) ? HK_IN : HK_OUT;
  }
  return *v;
}

/* ---- The entry point ------------------------------------------------------
 */

kn_err_t kn_agg_expand(kn_batch_t *b, void *data, size_t len, const char *seq,
                       int64_t arrival_ms, const kn_agg_filter_t *filter,
                       kn_agg_result_t *res, kn_error_t **errp) {
  const uint8_t *base = data;
  memset(res, 0, sizeof(*res));
  if (errp) *errp = NULL;
  if (!kn_agg_has_magic(data, len)) return KN_ERR_NO_ERROR;
  /* As the KCL: an empty protobuf does not make an aggregate. */
  if (len <= KN_AGG_OVERHEAD)
    return corrupt(errp, "%zu bytes are too few to hold a message and its MD5",
                   len);

  const uint8_t *pb = base + KN_AGG_MAGIC_LEN;
  size_t pb_len = len - KN_AGG_OVERHEAD;
  uint8_t md5[KN_AGG_MD5_LEN];
  kn_md5(pb, pb_len, md5);
  if (memcmp(md5, pb + pb_len, KN_AGG_MD5_LEN) != 0)
    return corrupt(errp, "MD5 mismatch");

  struct arena ar;
  arena_init(&ar, len);
  ProtobufCAllocator alloc = {arena_alloc, arena_free_one, &ar};
  KnKpl__AggregatedRecord *m =
      kn_kpl__aggregated_record__unpack(&alloc, pb_len, pb);
  size_t n0 = b->n, bytes0 = b->bytes;
  kn_err_t err = KN_ERR_NO_ERROR;

  if (!m) {
    err = ar.nomem ? nomem(errp)
                   : corrupt(errp,
                             "protobuf-c cannot unpack the message (malformed, "
                             "or a required field missing)");
    goto out;
  }
  if (any_field0(m)) {
    err = corrupt(errp, "invalid field number 0");
    goto out;
  }

  /* Every index inside its table; the largest of each names the record
   * in the message, as it is the one that tells the table is too short. */
  uint64_t max_pk = 0, max_ehk = 0;
  size_t max_pk_rec = 0, max_ehk_rec = 0;
  int any_ehk = 0;
  for (size_t i = 0; i < m->n_records; i++) {
    const KnKpl__Record *r = m->records[i];
    if (i == 0 || r->partition_key_index > max_pk) {
      max_pk = r->partition_key_index;
      max_pk_rec = i;
    }
    if (r->has_explicit_hash_key_index &&
        (!any_ehk || r->explicit_hash_key_index > max_ehk)) {
      max_ehk = r->explicit_hash_key_index;
      max_ehk_rec = i;
      any_ehk = 1;
    }
  }
  if (m->n_records && max_pk >= m->n_partition_key_table) {
    err = corrupt(errp,
                  "record %zu: partition key index %llu outside the table of "
                  "%zu",
                  max_pk_rec, (unsigned long long)max_pk,
                  m->n_partition_key_table);
    goto out;
  }
  if (any_ehk && max_ehk >= m->n_explicit_hash_key_table) {
    err = corrupt(errp,
                  "record %zu: explicit hash key index %llu outside the table "
                  "of %zu",
                  max_ehk_rec, (unsigned long long)max_ehk,
                  m->n_explicit_hash_key_table);
    goto out;
  }
  /* Every partition key within the service's bounds: longer ones cannot
   * have been sent by a producer, and would cost every later step. */
  for (size_t k = 0; k < m->n_partition_key_table; k++) {
    const char *key = m->partition_key_table[k];
    size_t bytes = strnlen(key, KN_AGG_KEY_MAX_BYTES + 1), chars = 0;
    if (bytes > KN_AGG_KEY_MAX_BYTES) {
      err = corrupt(errp, "partition key %zu has %zu bytes, over %d", k,
                    strlen(key), KN_AGG_KEY_MAX_BYTES);
      goto out;
    }
    for (size_t i = 0; i < bytes; i++)
      chars += ((uint8_t)key[i] & 0xC0) != 0x80;
    if (chars > KN_AGG_KEY_MAX_CHARS) {
      err = corrupt(errp, "partition key %zu has %zu characters, over %d", k,
                    chars, KN_AGG_KEY_MAX_CHARS);
      goto out;
    }
  }
  res->aggregated = 1;
  res->n_user = m->n_records;

  if (filter && filter->check_range && m->n_records) {
    size_t npk = m->n_partition_key_table, nehk = m->n_explicit_hash_key_table;
    uint8_t *pk_v = arena_alloc(&ar, npk + nehk + 1);
    if (!pk_v) {
      memset(res, 0, sizeof(*res));
      err = nomem(errp);
      goto out;
    }
    memset(pk_v, HK_UNKNOWN, npk + nehk);
    uint8_t *ehk_v = pk_v + npk;
    for (size_t i = 0; i < m->n_records; i++) {
      const KnKpl__Record *r = m->records[i];
      int v = r->has_explicit_hash_key_index
                  ? key_verdict(
                        m->explicit_hash_key_table[r->explicit_hash_key_index],
                        1, filter, &ehk_v[r->explicit_hash_key_index])
                  : key_verdict(m->partition_key_table[r->partition_key_index],
                                0, filter, &pk_v[r->partition_key_index]);
      if (v == HK_BAD) {
        memset(res, 0, sizeof(*res));
        err = corrupt(errp,
                      "record %zu: explicit hash key is not a decimal in "
                      "[0, 2^128 - 1]",
                      i);
        goto out;
      }
      if (v == HK_OUT) {
        res->out_of_range = 1;
        goto out;
      }
    }
  }

  size_t first = 0;
  if (filter && filter->subseq_floor >= 0) {
    first = (uint64_t)filter->subseq_floor >= m->n_records
                ? m->n_records
                : (size_t)filter->subseq_floor + 1;
    res->n_below_floor = first;
  }
  if (first == m->n_records) goto out; /* nothing kept, data untouched */

  /* Where everything goes in data: the kept payloads from the start, then
   * every key of both tables with its NUL.  Each of them took at least two
   * bytes more than that (tag and length) inside the protobuf, so it all
   * fits in the pb_len bytes before the MD5. */
  size_t npk = m->n_partition_key_table, nehk = m->n_explicit_hash_key_table;
  char **keys = arena_alloc(&ar, (npk + nehk + 1) * sizeof(*keys));
  if (!keys) {
    memset(res, 0, sizeof(*res));
    err = nomem(errp);
    goto out;
  }
  char *dst = data;
  size_t off = 0;
  for (size_t i = first; i < m->n_records; i++) off += m->records[i]->data.len;
  for (size_t k = 0; k < npk + nehk; k++) {
    const char *key = k < npk ? m->partition_key_table[k]
                              : m->explicit_hash_key_table[k - npk];
    keys[k] = dst + off;
    off += strlen(key) + 1;
  }

  if (off > len) { /* cannot happen (see above); never write past data */
    memset(res, 0, sizeof(*res));
    err = corrupt(errp, "user records larger than the message");
    goto out;
  }

  /* The records first, pointing where their bytes will be: running out of
   * memory here leaves data as it was. */
  off = 0;
  for (size_t i = first; i < m->n_records; i++) {
    const KnKpl__Record *r = m->records[i];
    kn_record_t *rec = kn_batch_push(b);
    if (!rec) {
      kn_batch_truncate(b, n0);
      b->bytes = bytes0;
      memset(res, 0, sizeof(*res));
      err = nomem(errp);
      goto out;
    }
    rec->data = dst + off;
    rec->len = r->data.len;
    rec->pkey = keys[r->partition_key_index];
    rec->ehk = r->has_explicit_hash_key_index
                   ? keys[npk + r->explicit_hash_key_index]
                   : NULL;
    rec->seq = seq;
    rec->subseq = i;
    rec->arrival_ms = arrival_ms;
    rec->aggregated = 1;
    b->bytes += r->data.len;
    off += r->data.len;
    res->n_added++;
  }

  /* Nothing can fail from here: the copies come from the arena, never from
   * data, so they cannot overlap what they overwrite. */
  off = 0;
  for (size_t i = first; i < m->n_records; i++) {
    const KnKpl__Record *r = m->records[i];
    /* protobuf-c leaves an empty payload without a pointer. */
    if (r->data.len) memcpy(dst + off, r->data.data, r->data.len);
    off += r->data.len;
  }
  for (size_t k = 0; k < npk + nehk; k++) {
    const char *key = k < npk ? m->partition_key_table[k]
                              : m->explicit_hash_key_table[k - npk];
    memcpy(keys[k], key, strlen(key) + 1);
  }

out:
  arena_free(&ar);
  return err;
}
