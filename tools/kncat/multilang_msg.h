/* multilang: the messages of the MultiLangDaemon protocol (KCL >= 2.1 wire
 * format), one JSON object per line.
 *
 * To the child every key is always written, null where there is no value,
 * in a fixed order (the golden lines of tests/unit/test_kncat_multilang.c).
 * From the child only `status` and `checkpoint` are understood; other keys
 * are skipped.  Pure code: no I/O. */
#ifndef KNCAT_MULTILANG_MSG_H
#define KNCAT_MULTILANG_MSG_H

#include <stddef.h>
#include <stdint.h>

/* A growing output buffer; p is owned (kc_ml_buf_free).  skip_line: read
 * buffers only, the rest of a line cut at its cap is being dropped. */
typedef struct kc_ml_buf {
  char *p;
  size_t len, cap;
  int skip_line;
} kc_ml_buf_t;

void kc_ml_buf_free(kc_ml_buf_t *b);
/* Drops the first n bytes (written to the child). */
void kc_ml_buf_consume(kc_ml_buf_t *b, size_t n);

/* Each encoder appends one whole line (with its '\n') and returns 0, or -1
 * on out of memory (the buffer is then as before).  Strings are written as
 * JSON strings; NULL is written as null. */

/* seq: the lease checkpoint (a sequence number or a sentinel such as
 * TRIM_HORIZON); subseq < 0: null. */
int kc_ml_enc_initialize(kc_ml_buf_t *b, const char *shard_id, const char *seq,
                         int64_t subseq);

/* processRecords: begin, one call per record, end. */
typedef struct kc_ml_rec {
  const void *data;
  size_t len;
  const char *key; /* partition key */
  const char *seq;
  uint64_t subseq; /* 0 for records not from a KPL aggregate */
  int64_t arrival_ms;
} kc_ml_rec_t;
int kc_ml_enc_records_begin(kc_ml_buf_t *b);
int kc_ml_enc_record(kc_ml_buf_t *b, int first, const kc_ml_rec_t *r);
/* millis_behind < 0: null.  Ends the line begun by _begin. */
int kc_ml_enc_records_end(kc_ml_buf_t *b, int64_t millis_behind);

/* leaseLost, shardEnded, shutdownRequested: {"action":NAME}. */
int kc_ml_enc_action(kc_ml_buf_t *b, const char *action);

/* The answer to a checkpoint: the position asked for (seq NULL: null;
 * subseq < 0: null) and the error's Java simple name, or NULL. */
int kc_ml_enc_checkpoint(kc_ml_buf_t *b, const char *seq, int64_t subseq,
                         const char *error);

/* ---- from the child ---- */

enum { KC_ML_IN_STATUS = 1, KC_ML_IN_CHECKPOINT };

#define KC_ML_SEQ_MAX 128

typedef struct kc_ml_in {
  int kind;              /* KC_ML_IN_* */
  char response_for[32]; /* status: the action it answers */
  /* checkpoint: has_seq 0 for null or absent (everything delivered);
   * seq_bad when the value is not a string of digits or too long. */
  int has_seq, seq_bad;
  char seq[KC_ML_SEQ_MAX];
  int has_subseq, subseq_bad;
  uint64_t subseq;
} kc_ml_in_t;

enum {
  KC_ML_DEC_OK = 0,
  KC_ML_DEC_SKIP = 1,     /* blank, not JSON, or no "action": log, skip */
  KC_ML_DEC_PROTOCOL = -1 /* an action this protocol does not have */
};

/* Decodes one line (without its newline).  why gets a short reason for
 * SKIP and PROTOCOL. */
int kc_ml_decode(const char *line, size_t len, kc_ml_in_t *out, char *why,
                 size_t whysz);

#endif
