/* agg_tool: the library's KPL aggregation on a line protocol, for the
 * interoperability tests (tests/integration/test_agg_interop.py).
 *
 *   agg_tool aggregate [MAX_BYTES]
 *     in:  one user record a line:   PKEY EHK DATA
 *     out: one Kinesis record a line: PKEY EHK DATA COUNT AGGREGATED
 *   agg_tool deaggregate
 *     in:  one Kinesis record's data a line: DATA
 *     out: "ok N" then N lines "SUBSEQ PKEY EHK DATA", or "plain", or
 *          "corrupt MESSAGE"
 *
 * Every PKEY, EHK and DATA token is "b:" and the base64 of its bytes, or
 * "-" for an absent explicit hash key.  An empty input line separates
 * aggregations: whatever is pending is flushed, then an empty line is
 * written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "core/error.h"
#include "util/base64.h"

static void put_token(const void *p, size_t n) {
  char *s = malloc(kn_base64_encoded_len(n) + 1);
  size_t len = kn_base64_encode(s, p, n);
  fputs("b:", stdout);
  fwrite(s, 1, len, stdout);
  free(s);
}

/* Decodes a token in place; returns its length, or -1 for "-" (absent)
 * and -2 for a malformed token. */
static long get_token(char *tok) {
  if (strcmp(tok, "-") == 0) return -1;
  if (strncmp(tok, "b:", 2) != 0) return -2;
  long n = kn_base64_decode(tok, tok + 2, strlen(tok + 2));
  return n < 0 ? -2 : n;
}

static int emit(kn_aggregator_t *a) {
  kn_agg_out_t out;
  if (kn_aggregator_count(a) == 0) return 0;
  if (kn_aggregator_flush(a, &out)) return -1;
  put_token(out.pkey, strlen(out.pkey));
  putchar(' ');
  if (out.ehk)
    put_token(out.ehk, strlen(out.ehk));
  else
    putchar('-');
  putchar(' ');
  put_token(out.data, out.len);
  printf(" %zu %d\n", out.n_records, out.aggregated);
  return 0;
}

static int aggregate(size_t max_bytes) {
  kn_aggregator_t *a = kn_aggregator_new(max_bytes, 0);
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int rc = 0;
  if (!a) {
    fprintf(stderr, "agg_tool: bad MAX_BYTES\n");
    return 2;
  }
  while (rc == 0 && (n = getline(&line, &cap, stdin)) >= 0) {
    if (n && line[n - 1] == '\n') line[--n] = '\0';
    if (n == 0) {
      rc = emit(a);
      putchar('\n');
      continue;
    }
    char *save, *pk = strtok_r(line, " ", &save),
                *ehk = strtok_r(NULL, " ", &save),
                *data = strtok_r(NULL, " ", &save);
    long pk_len = pk ? get_token(pk) : -2, ehk_len = ehk ? get_token(ehk) : -2,
         data_len = data ? get_token(data) : -2;
    if (pk_len < 0 || ehk_len < -1 || data_len < 0) {
      fprintf(stderr, "agg_tool: malformed line\n");
      rc = 2;
      break;
    }
    for (int tries = 0; tries < 2; tries++) {
      kn_err_t err = kn_aggregator_add(
          a, pk, (size_t)pk_len, ehk_len < 0 ? NULL : ehk,
          ehk_len < 0 ? 0 : (size_t)ehk_len, data, (size_t)data_len);
      if (err == KN_ERR_NO_ERROR) break;
      if (err != KN_ERR__QUEUE_FULL || tries) {
        fprintf(stderr, "agg_tool: add: %s\n", kn_err2str(err));
        rc = 1;
        break;
      }
      if ((rc = emit(a))) break;
    }
  }
  if (rc == 0) rc = emit(a);
  free(line);
  kn_aggregator_destroy(a);
  return rc;
}

static int deaggregate(void) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int rc = 0;
  while ((n = getline(&line, &cap, stdin)) >= 0) {
    if (n && line[n - 1] == '\n') line[--n] = '\0';
    kn_batch_t *b = kn_batch_new("stream", "shardId-000000000000");
    /* The user records point into the data: the batch owns it. */
    char *data = kn_batch_alloc(b, (size_t)n + 1);
    memcpy(data, line, (size_t)n + 1);
    long len = get_token(data);
    if (len < 0) {
      fprintf(stderr, "agg_tool: malformed line\n");
      kn_batch_destroy(b);
      rc = 2;
      break;
    }
    kn_agg_result_t res;
    kn_error_t *e = NULL;
    kn_err_t err = kn_agg_expand(b, data, (size_t)len, "1", 0, NULL, &res, &e);
    if (err) {
      printf("corrupt %s\n", e ? kn_error_string(e) : kn_err2str(err));
    } else if (!res.aggregated) {
      printf("plain\n");
    } else {
      printf("ok %zu\n", b->n);
      for (size_t i = 0; i < b->n; i++) {
        const kn_record_t *r = &b->recs[i];
        printf("%llu ", (unsigned long long)r->subseq);
        put_token(r->pkey, strlen(r->pkey));
        putchar(' ');
        if (r->ehk)
          put_token(r->ehk, strlen(r->ehk));
        else
          putchar('-');
        putchar(' ');
        put_token(r->data, r->len);
        putchar('\n');
      }
    }
    kn_error_destroy(e);
    kn_batch_destroy(b);
  }
  free(line);
  return rc;
}

int main(int argc, char **argv) {
  int rc = 2;
  if (argc >= 2 && strcmp(argv[1], "aggregate") == 0)
    rc = aggregate(argc >= 3 ? strtoul(argv[2], NULL, 10) : 0);
  else if (argc == 2 && strcmp(argv[1], "deaggregate") == 0)
    rc = deaggregate();
  else
    fprintf(stderr,
            "usage: agg_tool aggregate [MAX_BYTES] | agg_tool deaggregate\n");
  if (fflush(stdout)) rc = 1;
  return rc;
}
