#include "sender.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct entry {
  uint64_t recno;
  int attempts; /* calls that already carried it */
  size_t key_len, len;
  char *mem; /* key, NUL, data */
} entry_t;

/* Keys of the records being retried in the call under construction.
 * Generation stamps make clearing free. */
#define KEYSET_SLOTS 1024 /* > 2 * KC_PUT_MAX_RECORDS */
typedef struct keyslot {
  const char *key;
  uint32_t gen;
} keyslot_t;

struct kc_sender {
  kn_client_t *client;
  const char *stream;
  kc_sender_cfg_t cfg;
  entry_t *q; /* queue: [head, tail), oldest first */
  size_t head, tail, cap;
  size_t queued_bytes;
  kn_put_entry_t put[KC_PUT_MAX_RECORDS];
  keyslot_t keys[KEYSET_SLOTS];
  uint32_t gen;
  uint64_t rng;
  kn_error_t *error;
  kc_sender_stats_t st;
};

static uint64_t hash_key(const char *k, size_t n) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)k[i]) * 1099511628211ULL;
  return h;
}

/* Adds key; returns 1 if it was there already. */
static int keyset_add(kc_sender_t *s, const char *key, size_t n, int add) {
  size_t i = (size_t)hash_key(key, n) & (KEYSET_SLOTS - 1);
  for (;; i = (i + 1) & (KEYSET_SLOTS - 1)) {
    keyslot_t *k = &s->keys[i];
    if (k->gen != s->gen) {
      if (add) {
        k->key = key;
        k->gen = s->gen;
      }
      return 0;
    }
    if (strcmp(k->key, key) == 0) return 1;
  }
}

kc_sender_t *kc_sender_new(kn_client_t *client, const char *stream,
                           const kc_sender_cfg_t *cfg) {
  kc_sender_t *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  s->client = client;
  s->stream = stream;
  s->cfg = *cfg;
  if (s->cfg.max_attempts < 1) s->cfg.max_attempts = 1;
  s->gen = 1;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  s->rng = (uint64_t)ts.tv_nsec * 2654435761u + (uint64_t)ts.tv_sec + 1;
  return s;
}

static void drop_queue(kc_sender_t *s, int count_failed) {
  for (size_t i = s->head; i < s->tail; i++) free(s->q[i].mem);
  if (count_failed) s->st.failed += s->tail - s->head;
  s->head = s->tail = 0;
  s->queued_bytes = 0;
}

void kc_sender_destroy(kc_sender_t *s) {
  if (!s) return;
  drop_queue(s, 0);
  free(s->q);
  kn_error_destroy(s->error);
  free(s);
}

const kn_error_t *kc_sender_error(const kc_sender_t *s) { return s->error; }
const kc_sender_stats_t *kc_sender_stats(const kc_sender_t *s) { return &s->st; }
void kc_sender_count_failed(kc_sender_t *s) { s->st.failed++; }

/* Error codes of a PutRecords entry that another attempt cannot fix; the
 * documented ones (throughput exceeded, InternalFailure) are retriable. */
static int code_is_permanent(const char *code) {
  if (!strncmp(code, "KMS", 3)) return strcmp(code, "KMSThrottlingException") != 0;
  return !strcmp(code, "InvalidArgumentException") ||
         !strcmp(code, "ValidationException") ||
         !strcmp(code, "AccessDeniedException") ||
         !strcmp(code, "ResourceNotFoundException");
}

static void backoff(kc_sender_t *s, int attempts) {
  long long d = s->cfg.backoff_ms;
  for (int i = 1; i < attempts && d < s->cfg.backoff_max_ms; i++) d *= 2;
  if (d > s->cfg.backoff_max_ms) d = s->cfg.backoff_max_ms;
  /* Equal jitter: at least half the delay, so retries really slow down. */
  s->rng ^= s->rng << 13, s->rng ^= s->rng >> 7, s->rng ^= s->rng << 17;
  d = d / 2 + (long long)(s->rng % (uint64_t)(d / 2 + 1));
  struct timespec ts = {(time_t)(d / 1000), (long)(d % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* One PutRecords call from the head of the queue. */
static int send_one(kc_sender_t *s) {
  size_t n = 0, bytes = 0, retries = 0;
  int max_attempts_seen = 0;
  s->gen++;
  for (size_t i = s->head; i < s->tail && n < KC_PUT_MAX_RECORDS; i++) {
    entry_t *e = &s->q[i];
    if (bytes + e->key_len + e->len > KC_PUT_MAX_BYTES) break;
    if (e->attempts == 0 && retries && keyset_add(s, e->mem, e->key_len, 0))
      break; /* a newer record of a key being retried: next call */
    if (e->attempts > 0) {
      keyset_add(s, e->mem, e->key_len, 1);
      retries++;
      if (e->attempts > max_attempts_seen) max_attempts_seen = e->attempts;
    }
    s->put[n].partition_key = e->mem;
    s->put[n].data = e->mem + e->key_len + 1;
    s->put[n].len = e->len;
    s->put[n].explicit_hash_key = NULL;
    n++;
    bytes += e->key_len + e->len;
  }
  if (max_attempts_seen) backoff(s, max_attempts_seen);
  s->st.retries += retries;
  s->st.calls++;
  kn_put_results_t *res = NULL;
  kn_error_t *err = kn_put_records(s->client, s->stream, s->put, n, &res);
  if (err) {
    s->error = err;
    kn_put_results_destroy(res);
    drop_queue(s, 1);
    return -1;
  }
  size_t got = kn_put_results_count(res);
  /* Walk back so the records to retry pack against the unsent rest of
   * the queue, still in their original order. */
  size_t w = s->head + n;
  for (size_t i = n; i-- > 0;) {
    entry_t e = s->q[s->head + i];
    const char *code = i < got ? kn_put_results_error_code(res, i) : "missing";
    if (!code) {
      s->st.sent++;
    } else if (!code_is_permanent(code) &&
               e.attempts + 1 < s->cfg.max_attempts) {
      e.attempts++;
      s->q[--w] = e;
      continue;
    } else {
      s->st.failed++;
      if (s->cfg.on_failed)
        s->cfg.on_failed(s->cfg.opaque, e.recno, code,
                         i < got ? kn_put_results_error_message(res, i) : NULL);
    }
    s->queued_bytes -= e.key_len + e.len;
    free(e.mem);
  }
  s->head = w;
  kn_put_results_destroy(res);
  return 0;
}

int kc_sender_add(kc_sender_t *s, uint64_t recno, const char *key,
                  size_t key_len, const void *data, size_t len) {
  if (s->error) {
    s->st.failed++;
    return -1;
  }
  if (s->tail == s->cap) {
    if (s->head > 0) { /* reuse the space of sent records */
      memmove(s->q, s->q + s->head, (s->tail - s->head) * sizeof(*s->q));
      s->tail -= s->head;
      s->head = 0;
    }
    if (s->tail == s->cap) {
      size_t cap = s->cap ? s->cap * 2 : 2 * KC_PUT_MAX_RECORDS;
      entry_t *q = realloc(s->q, cap * sizeof(*q));
      if (!q) return -1;
      s->q = q;
      s->cap = cap;
    }
  }
  char *mem = malloc(key_len + 1 + (len ? len : 1));
  if (!mem) return -1;
  memcpy(mem, key, key_len);
  mem[key_len] = '\0';
  if (len) memcpy(mem + key_len + 1, data, len);
  s->q[s->tail++] = (entry_t){recno, 0, key_len, len, mem};
  s->queued_bytes += key_len + len;
  while (s->tail - s->head >= KC_PUT_MAX_RECORDS ||
         s->queued_bytes >= KC_PUT_MAX_BYTES)
    if (send_one(s)) return -1;
  return 0;
}

int kc_sender_flush(kc_sender_t *s) {
  if (s->error) return -1;
  while (s->head < s->tail)
    if (send_one(s)) return -1;
  return 0;
}
