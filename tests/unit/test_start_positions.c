/* A consumer without a lease store started from a reader snapshot: the
 * conversion of positions both ways (a resume inside an aggregate keeps
 * its sub-sequence number), where each shard starts (finished, resumed,
 * born since), and the property's bytes checked as configuration. */
#include <stdlib.h>

#include "consumer/start_positions.h"
#include "kn/base64.h"
#include "kt.h"

#define SEQ "49590338271490256608559692538361571095921575989136588898"

static void roundtrip(const kn_position_t *p) {
  kn_pos_t q;
  kn_position_t back;
  kn_start_position_to_pos(p, &q);
  kn_start_pos_to_position(&q, &back);
  char a[200], b[200];
  kn_position_format(p, a, sizeof(a));
  kn_position_format(&back, b, sizeof(b));
  KT_CHECK_STR(b, a);
}

static void test_conversion(void) {
  kn_position_t p;
  kn_pos_t q;
  kn_position_trim_horizon(&p);
  roundtrip(&p);
  kn_position_latest(&p);
  roundtrip(&p);
  kn_position_at_timestamp(&p, 1700000000000);
  roundtrip(&p);
  kn_start_position_to_pos(&p, &q);
  KT_CHECK(q.type == KN_ITER_AT_TIMESTAMP && q.timestamp_ms == 1700000000000);
  kn_position_at(&p, SEQ);
  roundtrip(&p);
  kn_start_position_to_pos(&p, &q);
  KT_CHECK(q.type == KN_ITER_AT_SEQUENCE_NUMBER && !q.has_subseq);
  /* After a user record: AT the record, skipping sub-sequences <= 4. */
  kn_position_after(&p, SEQ, 4);
  roundtrip(&p);
  kn_start_position_to_pos(&p, &q);
  KT_CHECK(q.type == KN_ITER_AT_SEQUENCE_NUMBER && q.has_subseq &&
           q.subseq == 4);
  KT_CHECK_STR(q.seq, SEQ);
  /* After the whole record (`-o after:SEQ`). */
  kn_position_after(&p, SEQ, UINT64_MAX);
  roundtrip(&p);
  kn_start_position_to_pos(&p, &q);
  KT_CHECK(q.type == KN_ITER_AFTER_SEQUENCE_NUMBER);
}

static void test_apply(void) {
  kn_snapshot_t *s = kn_snapshot_new();
  if (!s) return;
  kn_position_t p;
  kn_position_after(&p, SEQ, 2);
  kn_snapshot_set_position(s, "shardId-000000000001", &p);
  kn_snapshot_set_finished(s, "shardId-000000000000", NULL, 0);
  kn_cshard_t cs;
  memset(&cs, 0, sizeof(cs));
  char id[32] = "shardId-000000000001";
  cs.id = id;
  cs.state = KN_CS_WAITING;
  cs.start.type = KN_ITER_LATEST; /* initial.position */
  kn_start_positions_apply(NULL, &cs);
  KT_CHECK(cs.start.type == KN_ITER_LATEST); /* no snapshot: untouched */
  kn_start_positions_apply(s, &cs);
  KT_CHECK(cs.start.type == KN_ITER_AT_SEQUENCE_NUMBER && cs.start.has_subseq &&
           cs.start.subseq == 2);
  KT_CHECK(cs.state == KN_CS_WAITING);
  strcpy(id, "shardId-000000000000");
  kn_start_positions_apply(s, &cs);
  KT_CHECK(cs.state == KN_CS_DONE);
  /* Born after the snapshot: from the beginning, whatever -o said. */
  strcpy(id, "shardId-000000000007");
  cs.state = KN_CS_WAITING;
  cs.start.type = KN_ITER_LATEST;
  kn_start_positions_apply(s, &cs);
  KT_CHECK(cs.start.type == KN_ITER_TRIM_HORIZON);
  KT_CHECK(cs.state == KN_CS_WAITING);
  kn_snapshot_destroy(s);
}

/* The property through a consumer's conf: unset, empty, valid, garbage. */
static void test_load(void) {
  kn_consumer_t kc;
  memset(&kc, 0, sizeof(kc));
  kc.conf = kn_conf_new();
  if (!kc.conf) return;
  kn_snapshot_t *got = NULL, *s = kn_snapshot_new();
  kn_error_t *e = kn_start_positions_load(&kc, &got);
  KT_CHECK(!e && !got);
  kn_error_destroy(e);
  char errstr[256];
  /* An empty snapshot is no snapshot. */
  KT_CHECK(!kn_conf_set_start_snapshot(kc.conf, s, errstr, sizeof(errstr)));
  e = kn_start_positions_load(&kc, &got);
  KT_CHECK(!e && !got);
  kn_error_destroy(e);
  kn_snapshot_destroy(got);
  got = NULL;
  kn_position_t p;
  kn_position_latest(&p);
  kn_snapshot_set_position(s, "shardId-000000000003", &p);
  KT_CHECK(!kn_conf_set_start_snapshot(kc.conf, s, errstr, sizeof(errstr)));
  e = kn_start_positions_load(&kc, &got);
  KT_CHECK(!e && got && kn_snapshot_count(got) == 1);
  kn_error_destroy(e);
  kn_snapshot_destroy(got);
  got = NULL;
  const char *bad[] = {"not base64!", "aGVsbG8gd29ybGQ="};
  for (int i = 0; i < 2; i++) {
    KT_CHECK(kn_conf_set(kc.conf, "start.positions", bad[i], errstr,
                         sizeof(errstr)) == KN_CONF_OK);
    e = kn_start_positions_load(&kc, &got);
    KT_CHECK(e && kn_error_code(e) == KN_ERR__CONF && !got);
    KT_CHECK(e && strstr(kn_error_string(e), "start.positions"));
    kn_error_destroy(e);
  }
  kn_snapshot_destroy(s);
  kn_conf_destroy(kc.conf);
}

int main(void) {
  KT_RUN(test_conversion);
  KT_RUN(test_apply);
  KT_RUN(test_load);
  return KT_DONE();
}
