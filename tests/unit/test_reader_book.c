/* The stream reader's bookkeeping: positions follow what poll returned,
 * pause and resume, watermarks with idle and finished shards, LATEST
 * resumed from when it was added, finished shards kept in snapshots
 * until a checkpoint that holds them is confirmed, and which shards are
 * compared with the trim horizon. */
#include <stdlib.h>

#include "kt.h"
#include "stream/reader_book.h"

#define A "shardId-000000000000"
#define B "shardId-000000000001"
#define C "shardId-000000000002"

static kn_position_t th(void) {
  kn_position_t p;
  kn_position_trim_horizon(&p);
  return p;
}

static void test_positions(void) {
  kn_rbook_t b;
  kn_rbook_init(&b);
  kn_position_t p = th(), q;
  KT_CHECK(!kn_rbook_add(&b, B, &p, 0, 1000));
  KT_CHECK(!kn_rbook_add(&b, A, &p, 0, 1000));
  KT_CHECK_INT(kn_rbook_add(&b, A, &p, 0, 1000), KN_ERR__STATE);
  KT_CHECK_INT(kn_rbook_add(&b, "", &p, 0, 1000), KN_ERR__INVALID_ARG);
  KT_CHECK_INT(b.n, 2);
  KT_CHECK_STR(b.v[0].id, A); /* id order */
  kn_rbook_returned(&b, A, "100", 0, 5000, 10);
  kn_rbook_returned(&b, A, "200", 3, 4000, 20);
  kn_rbook_returned(&b, "unknown", "300", 0, 9000, 20);
  kn_rbook_resume_at(kn_rbook_find(&b, A), &q);
  char buf[64];
  kn_position_format(&q, buf, sizeof(buf));
  KT_CHECK_STR(buf, "after:200/3");
  /* The watermark never goes back. */
  KT_CHECK_INT(kn_rbook_watermark(&b, A, 20), 5000);
  KT_CHECK_INT(kn_rbook_watermark(&b, B, 20), KN_RB_NONE);
  KT_CHECK_INT(kn_rbook_watermark(&b, C, 20), KN_RB_NONE);
  /* Removing hands back the position. */
  KT_CHECK(!kn_rbook_remove(&b, A, &q));
  kn_position_format(&q, buf, sizeof(buf));
  KT_CHECK_STR(buf, "after:200/3");
  KT_CHECK_INT(kn_rbook_remove(&b, A, &q), KN_ERR__NOT_FOUND);
  KT_CHECK_INT(kn_rbook_pause(&b, A, 1), KN_ERR__NOT_FOUND);
  KT_CHECK(!kn_rbook_pause(&b, B, 1));
  KT_CHECK(!kn_rbook_active(kn_rbook_find(&b, B)));
  KT_CHECK(!kn_rbook_pause(&b, B, 0));
  KT_CHECK(kn_rbook_active(kn_rbook_find(&b, B)));
  kn_rbook_free(&b);
}

/* LATEST with nothing returned resumes at the time it was added. */
static void test_latest(void) {
  kn_rbook_t b;
  kn_rbook_init(&b);
  kn_position_t p, q;
  kn_position_latest(&p);
  KT_CHECK(!kn_rbook_add(&b, A, &p, 0, 1700000000000));
  kn_rbook_resume_at(kn_rbook_find(&b, A), &q);
  KT_CHECK(q.kind == KN_POSITION_AT_TIMESTAMP);
  KT_CHECK_INT(q.timestamp_ms, 1700000000000);
  kn_rbook_returned(&b, A, "7", 0, 1, 1);
  kn_rbook_resume_at(kn_rbook_find(&b, A), &q);
  KT_CHECK(q.kind == KN_POSITION_AFTER);
  kn_rbook_free(&b);
}

static void test_watermark(void) {
  kn_rbook_t b;
  kn_rbook_init(&b);
  b.idle_ms = 1000;
  kn_position_t p = th();
  kn_rbook_add(&b, A, &p, 0, 0);
  kn_rbook_add(&b, B, &p, 0, 0);
  kn_rbook_add(&b, C, &p, 0, 0);
  /* One active shard without a watermark holds everything back. */
  kn_rbook_returned(&b, A, "1", 0, 500, 100);
  kn_rbook_returned(&b, B, "1", 0, 300, 100);
  KT_CHECK_INT(kn_rbook_watermark(&b, NULL, 100), KN_RB_NONE);
  kn_rbook_returned(&b, C, "1", 0, 900, 100);
  KT_CHECK_INT(kn_rbook_watermark(&b, NULL, 100), 300);
  /* B idle: no longer holds it back. */
  kn_rbook_returned(&b, A, "2", 0, 600, 1000);
  kn_rbook_returned(&b, C, "2", 0, 950, 1000);
  KT_CHECK(kn_rbook_idle(&b, B, 1100));
  KT_CHECK(!kn_rbook_idle(&b, A, 1100));
  KT_CHECK_INT(kn_rbook_watermark(&b, NULL, 1100), 600);
  /* A paused shard never counts as idle. */
  kn_rbook_pause(&b, B, 1);
  KT_CHECK_INT(kn_rbook_watermark(&b, NULL, 1100), 300);
  kn_rbook_pause(&b, B, 0);
  /* Finished shards do not count. */
  kn_rbook_finished(&b, A);
  KT_CHECK_INT(kn_rbook_watermark(&b, NULL, 1100), 950);
  /* All idle: the greatest. */
  KT_CHECK_INT(kn_rbook_watermark(&b, NULL, 5000), 950);
  kn_rbook_free(&b);
  kn_rbook_init(&b);
  KT_CHECK_INT(kn_rbook_watermark(&b, NULL, 0), KN_RB_NONE);
  kn_rbook_free(&b);
}

static int holds_finished(kn_snapshot_t *s, const char *id) {
  long i = kn_snapshot_find(s, id);
  return i >= 0 && kn_snapshot_is_finished(s, (size_t)i);
}

/* FLINK-37627: a finished shard stays in the snapshots until a checkpoint
 * taken after the application took its report is confirmed. */
static void test_finished_until_confirmed(void) {
  kn_rbook_t b;
  kn_rbook_init(&b);
  kn_position_t p = th();
  kn_snapshot_t *s = kn_snapshot_new();
  if (!s) return;
  kn_rbook_add(&b, A, &p, 0, 0);
  kn_rbook_add(&b, B, &p, 0, 0);
  kn_rbook_returned(&b, A, "5", 0, 1, 1);
  KT_CHECK(!kn_rbook_snapshot(&b, 1, s));
  KT_CHECK_INT(kn_snapshot_count(s), 2);
  kn_rbook_finished(&b, A);
  KT_CHECK_STR(kn_rbook_take_finished(&b), A);
  KT_CHECK(kn_rbook_take_finished(&b) == NULL); /* once */
  /* Checkpoint 1 (taken before A finished) is confirmed: A stays. */
  kn_rbook_confirm(&b, 1);
  KT_CHECK(!kn_rbook_snapshot(&b, 2, s));
  KT_CHECK(holds_finished(s, A));
  KT_CHECK(!kn_rbook_snapshot(&b, 3, s));
  KT_CHECK(holds_finished(s, A));
  /* Checkpoint 2 held it: once confirmed, A is gone from snapshots. */
  kn_rbook_confirm(&b, 2);
  KT_CHECK(!kn_rbook_snapshot(&b, 4, s));
  KT_CHECK_INT(kn_snapshot_find(s, A), -1);
  KT_CHECK_INT(kn_snapshot_count(s), 1);
  /* A finished shard nobody was told about is never dropped. */
  kn_rbook_finished(&b, B);
  KT_CHECK(!kn_rbook_snapshot(&b, 5, s));
  kn_rbook_confirm(&b, 9);
  KT_CHECK(!kn_rbook_snapshot(&b, 6, s));
  KT_CHECK(holds_finished(s, B));
  /* Its report taken: only a checkpoint taken after that counts (the
   * enumerator state of the ones before may lack the report). */
  KT_CHECK_STR(kn_rbook_take_finished(&b), B);
  kn_rbook_confirm(&b, 9);
  KT_CHECK(!kn_rbook_snapshot(&b, 10, s));
  KT_CHECK(holds_finished(s, B));
  kn_rbook_confirm(&b, 10);
  KT_CHECK(!kn_rbook_snapshot(&b, 11, s));
  KT_CHECK_INT(kn_snapshot_count(s), 0);
  /* A finished shard is not handed back: its report says it all. */
  kn_rbook_add(&b, C, &p, 0, 0);
  kn_rbook_finished(&b, C);
  KT_CHECK_INT(kn_rbook_remove(&b, C, NULL), KN_ERR__STATE);
  KT_CHECK(kn_rbook_find(&b, C) != NULL);
  KT_CHECK_STR(kn_rbook_take_finished(&b), C);
  KT_CHECK(!kn_rbook_snapshot(&b, 12, s));
  kn_rbook_confirm(&b, 12);
  /* A finished shard can be added again (a restore re-assigns it). */
  KT_CHECK(!kn_rbook_add(&b, A, &p, 0, 0));
  kn_rbook_finished(&b, A);
  KT_CHECK(!kn_rbook_add(&b, A, &p, 0, 0));
  KT_CHECK(kn_rbook_active(kn_rbook_find(&b, A)));
  kn_snapshot_destroy(s);
  kn_rbook_free(&b);
}

/* A shard added at a sequence number is compared with the trim horizon
 * before its first read; one added at TRIM_HORIZON, LATEST or a time is
 * not. */
static void test_check_trim(void) {
  kn_rbook_t b;
  kn_rbook_init(&b);
  kn_position_t p = th(), q, r;
  KT_CHECK(!kn_position_after(&q, "100", 2));
  KT_CHECK(!kn_position_at(&r, "200"));
  KT_CHECK(!kn_rbook_add(&b, A, &p, 0, 1000));
  KT_CHECK(!kn_rbook_add(&b, B, &q, 0, 1000));
  KT_CHECK(!kn_rbook_add(&b, C, &r, 0, 1000));
  KT_CHECK(!kn_rbook_find(&b, A)->check_trim);
  KT_CHECK(kn_rbook_find(&b, B)->check_trim);
  KT_CHECK(kn_rbook_find(&b, C)->check_trim);
  kn_rbook_free(&b);
}

int main(void) {
  KT_RUN(test_positions);
  KT_RUN(test_latest);
  KT_RUN(test_watermark);
  KT_RUN(test_finished_until_confirmed);
  KT_RUN(test_check_trim);
  return KT_DONE();
}
