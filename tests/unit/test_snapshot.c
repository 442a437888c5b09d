/* Positions and reader snapshots: constructors, the text form, the byte
 * format (round trips, a fixed sample of format 1 that later versions
 * must keep reading), and corrupt input refused with a clear error. */
#include <stdlib.h>

#include "kn/snapshot.h"
#include "kt.h"

#define SEQ "49590338271490256608559692538361571095921575989136588898"

static void test_position(void) {
  kn_position_t p, q;
  char buf[200];
  kn_position_trim_horizon(&p);
  kn_position_format(&p, buf, sizeof(buf));
  KT_CHECK_STR(buf, "trim_horizon");
  kn_position_latest(&p);
  kn_position_format(&p, buf, sizeof(buf));
  KT_CHECK_STR(buf, "latest");
  kn_position_at_timestamp(&p, 1700000000123);
  kn_position_format(&p, buf, sizeof(buf));
  KT_CHECK_STR(buf, "ts:1700000000123");
  KT_CHECK(!kn_position_at(&p, SEQ));
  kn_position_format(&p, buf, sizeof(buf));
  KT_CHECK_STR(buf, "at:" SEQ);
  KT_CHECK(!kn_position_after(&p, SEQ, 7));
  KT_CHECK_INT(kn_position_format(&p, buf, sizeof(buf)),
               strlen("after:" SEQ "/7"));
  KT_CHECK_STR(buf, "after:" SEQ "/7");
  /* Truncation as snprintf. */
  KT_CHECK_INT(kn_position_format(&p, buf, 6), strlen("after:" SEQ "/7"));
  KT_CHECK_STR(buf, "after");

  const char *texts[] = {"trim_horizon",
                         "latest",
                         "ts:0",
                         "ts:42",
                         "at:0",
                         "at:" SEQ,
                         "after:" SEQ "/0",
                         "after:" SEQ "/18446744073709551615"};
  for (size_t i = 0; i < sizeof(texts) / sizeof(*texts); i++) {
    KT_CHECK_MSG(kn_position_parse(texts[i], &q) == KN_ERR_NO_ERROR, "%s",
                 texts[i]);
    kn_position_format(&q, buf, sizeof(buf));
    KT_CHECK_STR(buf, texts[i]);
  }
  KT_CHECK(!kn_position_parse("after:" SEQ, &q));
  KT_CHECK_INT(q.subseq, 0);
  KT_CHECK_STR(q.seq, SEQ);

  const char *bad[] = {"",          "TRIM_HORIZON",
                       "ts:",       "ts:-1",
                       "ts:1x",     "ts:99999999999999999999",
                       "at:",       "at:01",
                       "at:1a",     "after:",
                       "after:/1",  "after:5/",
                       "after:5/x", "after:5/18446744073709551616",
                       "earliest"};
  kn_position_latest(&q);
  for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
    KT_CHECK_MSG(kn_position_parse(bad[i], &q) == KN_ERR__INVALID_ARG, "%s",
                 bad[i]);
    KT_CHECK(q.kind == KN_POSITION_LATEST); /* untouched */
  }
  char longseq[KN_POSITION_SEQ_MAX + 1];
  memset(longseq, '1', sizeof(longseq) - 1);
  longseq[sizeof(longseq) - 1] = '\0';
  KT_CHECK_INT(kn_position_at(&q, longseq), KN_ERR__INVALID_ARG);
  longseq[KN_POSITION_SEQ_MAX - 1] = '\0';
  KT_CHECK(!kn_position_at(&q, longseq));
  KT_CHECK_INT(kn_position_after(&q, NULL, 0), KN_ERR__INVALID_ARG);

  KT_CHECK(!kn_position_after(&p, SEQ, 7));
  KT_CHECK(!kn_position_after(&q, SEQ, 7));
  KT_CHECK(kn_position_equal(&p, &q));
  q.subseq = 8;
  KT_CHECK(!kn_position_equal(&p, &q));
  kn_position_latest(&q);
  KT_CHECK(!kn_position_equal(&p, &q));
}

/* A snapshot with one of each kind of entry. */
static kn_snapshot_t *sample(void) {
  kn_snapshot_t *s = kn_snapshot_new();
  kn_position_t p;
  if (!s) return NULL;
  kn_position_after(&p, SEQ, 3);
  kn_snapshot_set_position(s, "shardId-000000000004", &p);
  kn_position_trim_horizon(&p);
  kn_snapshot_set_position(s, "shardId-000000000003", &p);
  kn_position_at_timestamp(&p, 1700000000000);
  kn_snapshot_set_position(s, "shardId-000000000005", &p);
  const char *kids[] = {"shardId-000000000003", "shardId-000000000004"};
  kn_snapshot_set_finished(s, "shardId-000000000001", kids, 2);
  kn_snapshot_set_finished(s, "shardId-000000000000", NULL, 0);
  return s;
}

static void test_entries(void) {
  kn_snapshot_t *s = sample();
  if (!s) return;
  KT_CHECK_INT(kn_snapshot_count(s), 5);
  if (kn_snapshot_count(s) != 5) { /* out of memory building it */
    kn_snapshot_destroy(s);
    return;
  }
  /* In id order. */
  KT_CHECK_STR(kn_snapshot_shard(s, 0), "shardId-000000000000");
  KT_CHECK_STR(kn_snapshot_shard(s, 4), "shardId-000000000005");
  long i = kn_snapshot_find(s, "shardId-000000000001");
  KT_CHECK_INT(i, 1);
  KT_CHECK(kn_snapshot_is_finished(s, 1));
  KT_CHECK(kn_snapshot_position(s, 1) == NULL);
  KT_CHECK_INT(kn_snapshot_child_count(s, 1), 2);
  KT_CHECK_STR(kn_snapshot_child(s, 1, 1), "shardId-000000000004");
  i = kn_snapshot_find(s, "shardId-000000000004");
  KT_CHECK(!kn_snapshot_is_finished(s, (size_t)i));
  KT_CHECK_STR(kn_snapshot_position(s, (size_t)i)->seq, SEQ);
  /* Replacing an entry. */
  KT_CHECK(!kn_snapshot_set_finished(s, "shardId-000000000004", NULL, 0));
  KT_CHECK_INT(kn_snapshot_count(s), 5);
  KT_CHECK(kn_snapshot_is_finished(s, (size_t)i));
  KT_CHECK(!kn_snapshot_remove(s, "shardId-000000000004"));
  KT_CHECK_INT(kn_snapshot_remove(s, "shardId-000000000004"), -1);
  KT_CHECK_INT(kn_snapshot_find(s, "shardId-000000000004"), -1);
  KT_CHECK_INT(kn_snapshot_count(s), 4);
  /* Bad arguments leave it unchanged. */
  kn_position_t p;
  kn_position_latest(&p);
  KT_CHECK_INT(kn_snapshot_set_position(s, "", &p), KN_ERR__INVALID_ARG);
  p.kind = (kn_position_kind_t)9;
  KT_CHECK_INT(kn_snapshot_set_position(s, "x", &p), KN_ERR__INVALID_ARG);
  p.kind = KN_POSITION_AFTER;
  memset(p.seq, '1', sizeof(p.seq)); /* no terminator */
  KT_CHECK_INT(kn_snapshot_set_position(s, "x", &p), KN_ERR__INVALID_ARG);
  const char *badkid[] = {""};
  KT_CHECK_INT(kn_snapshot_set_finished(s, "x", badkid, 1),
               KN_ERR__INVALID_ARG);
  char longid[300];
  memset(longid, 'a', sizeof(longid) - 1);
  longid[sizeof(longid) - 1] = '\0';
  KT_CHECK_INT(kn_snapshot_set_finished(s, longid, NULL, 0),
               KN_ERR__INVALID_ARG);
  KT_CHECK_INT(kn_snapshot_count(s), 4);
  kn_snapshot_t *d = kn_snapshot_dup(s);
  KT_CHECK(d && kn_snapshot_count(d) == 4);
  kn_snapshot_destroy(d);
  kn_snapshot_destroy(s);
  kn_snapshot_destroy(NULL);
}

/* Equal entry for entry. */
static int same(const kn_snapshot_t *a, const kn_snapshot_t *b) {
  if (kn_snapshot_count(a) != kn_snapshot_count(b)) return 0;
  for (size_t i = 0; i < kn_snapshot_count(a); i++) {
    if (strcmp(kn_snapshot_shard(a, i), kn_snapshot_shard(b, i)) ||
        kn_snapshot_is_finished(a, i) != kn_snapshot_is_finished(b, i) ||
        kn_snapshot_child_count(a, i) != kn_snapshot_child_count(b, i))
      return 0;
    for (size_t j = 0; j < kn_snapshot_child_count(a, i); j++)
      if (strcmp(kn_snapshot_child(a, i, j), kn_snapshot_child(b, i, j)))
        return 0;
    if (!kn_snapshot_is_finished(a, i) &&
        !kn_position_equal(kn_snapshot_position(a, i),
                           kn_snapshot_position(b, i)))
      return 0;
  }
  return 1;
}

/* Format 1 of sample(), byte for byte: a later version must still read
 * exactly this. */
static const char *const FORMAT1_HEX =
    "4b4e52530001000000000005000000190014736861726449642d303030303030"
    "303030303030020000000000450014736861726449642d303030303030303030"
    "3030310200020014736861726449642d30303030303030303030303300147368"
    "61726449642d3030303030303030303030340000002a0014736861726449642d"
    "3030303030303030303030330100000000000000000000000000000000000000"
    "000000620014736861726449642d303030303030303030303034010400000000"
    "0000000300000000000000000038343935393033333832373134393032353636"
    "3038353539363932353338333631353731303935393231353735393839313336"
    "3538383839380000002a0014736861726449642d303030303030303030303035"
    "010200000000000000000000018bcfe5680000001d56e37a";

static size_t unhex(const char *h, unsigned char *out, size_t max) {
  size_t n = 0;
  for (; h[0] && h[1] && n < max; h += 2) {
    unsigned v;
    if (sscanf(h, "%2x", &v) != 1) break;
    out[n++] = (unsigned char)v;
  }
  return n;
}

static void test_bytes(void) {
  kn_snapshot_t *s = sample(), *r = NULL;
  void *b = NULL;
  size_t n = 0;
  if (!s) return;
  kn_error_t *e = kn_snapshot_encode(s, &b, &n);
  KT_CHECK(!e);
  kn_error_destroy(e);
  if (b) {
    e = kn_snapshot_decode(b, n, &r);
    KT_CHECK(!e);
    kn_error_destroy(e);
    KT_CHECK(r && same(s, r));
    kn_snapshot_destroy(r);
    if (getenv("KT_PRINT_FORMAT1")) {
      for (size_t i = 0; i < n; i++) printf("%02x", ((unsigned char *)b)[i]);
      printf("\n");
    }
    /* The format-1 sample decodes to the same snapshot. */
    unsigned char fixed[1024];
    size_t fn = unhex(FORMAT1_HEX, fixed, sizeof(fixed));
    KT_CHECK_INT(fn, n);
    KT_CHECK(fn == n && memcmp(fixed, b, n) == 0);
    e = kn_snapshot_decode(fixed, fn, &r);
    KT_CHECK(!e);
    kn_error_destroy(e);
    KT_CHECK(r && same(s, r));
    kn_snapshot_destroy(r);

    /* Every truncation and every changed byte is refused as corrupt. */
    unsigned char *p = b;
    for (size_t i = 0; i < n; i++) {
      e = kn_snapshot_decode(b, i, &r);
      KT_CHECK(e && !r);
      KT_CHECK(!e || kn_error_code(e) == KN_ERR__CORRUPT ||
               kn_error_code(e) == KN_ERR__NOMEM);
      kn_error_destroy(e);
      for (int bit = 0; bit < 8; bit++) {
        p[i] ^= (unsigned char)(1u << bit);
        e = kn_snapshot_decode(b, n, &r);
        KT_CHECK(e && !r);
        kn_error_destroy(e);
        p[i] ^= (unsigned char)(1u << bit);
      }
    }
  }
  free(b);

  /* Empty. */
  kn_snapshot_t *z = kn_snapshot_new();
  e = kn_snapshot_encode(z, &b, &n);
  kn_error_destroy(e);
  if (b) {
    KT_CHECK_INT(n, 16);
    e = kn_snapshot_decode(b, n, &r);
    KT_CHECK(!e && r && kn_snapshot_count(r) == 0);
    kn_error_destroy(e);
    kn_snapshot_destroy(r);
  }
  free(b);
  kn_snapshot_destroy(z);
  kn_snapshot_destroy(s);
}

/* The messages say what is wrong. */
static void test_errors(void) {
  kn_snapshot_t *r = NULL;
  kn_error_t *e = kn_snapshot_decode("hello world, not a snapshot", 27, &r);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__CORRUPT && !r);
  KT_CHECK(e && strstr(kn_error_string(e), "not a KNRS snapshot"));
  kn_error_destroy(e);
  e = kn_snapshot_decode(NULL, 0, &r);
  KT_CHECK(e && !r);
  kn_error_destroy(e);
  /* A valid envelope of format 2 (CRC-32 of the first 12 bytes). */
  unsigned char v2[16] = {'K', 'N', 'R', 'S', 0, 2, 0, 0, 0, 0, 0, 0};
  unsigned char f[64];
  kn_snapshot_t *s = kn_snapshot_new();
  void *b = NULL;
  size_t n = 0;
  e = kn_snapshot_encode(s, &b, &n);
  kn_error_destroy(e);
  if (b && n == 16) {
    memcpy(f, b, 16);
    f[5] = 2; /* version 2, CRC now wrong */
    e = kn_snapshot_decode(f, 16, &r);
    KT_CHECK(e && strstr(kn_error_string(e), "CRC-32"));
    kn_error_destroy(e);
  }
  free(b);
  kn_snapshot_destroy(s);
  (void)v2;
}

int main(void) {
  KT_RUN(test_position);
  KT_RUN(test_entries);
  KT_RUN(test_bytes);
  KT_RUN(test_errors);
  return KT_DONE();
}
