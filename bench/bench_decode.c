/* GetRecords decoding speed: canned responses of 1,000 records of 1 KiB
 * (random bytes, then text) decoded into batches, next to a plain base64
 * decode of the same Data strings, which is the floor the decoder can
 * approach, by the implementation in use and by each other one the CPU
 * supports.  Both decode in place, so each round first copies its input;
 * the copy is timed on its own and not counted.
 *
 * Usage: bench_decode [rounds]   (default 200) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kinesis/batch.h"
#include "kinesis/decode_records.h"
#include "util/base64.h"

#define NREC 1000
#define RECLEN 1024

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct canned {
  char *body; /* the response */
  size_t len;
  char *data;   /* the Data strings back to back */
  size_t *dlen; /* length of each */
  size_t data_len;
} canned_t;

static unsigned long long rng = 88172645463325252ull;
static unsigned next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (unsigned)rng;
}

static void make(canned_t *c, int text) {
  static const char words[] =
      "the quick brown fox jumps over the lazy dog 0123456789 ";
  size_t cap = (size_t)NREC * (RECLEN * 2 + 300) + 1024;
  c->body = malloc(cap);
  c->data = malloc((size_t)NREC * (RECLEN * 2));
  c->dlen = malloc(NREC * sizeof(size_t));
  c->data_len = 0;
  unsigned char payload[RECLEN];
  size_t k = (size_t)sprintf(
      c->body,
      "{\"MillisBehindLatest\":0,\"NextShardIterator\":\"AAAAAAAAAAHG+"
      "XR78eekOxcxnBswoZwvdOrmouqe0eIFcf5W9K98h5q9Cy50PG2SK6VDvhVxfdG/"
      "TIQjxpTPyEGdDfwP8HUAfM0ba/"
      "diH9jhASpoW8iqBij0gYzMiujNJkaLTgcIdd0f8b6fXeKChNf37rhZ/"
      "Rip+LpdAGiOfk7Y0tXN+TBnkFjZdWNB2leuOTLsnqNdUSU=\",\"Records\":[");
  for (int i = 0; i < NREC; i++) {
    for (int j = 0; j < RECLEN; j++)
      payload[j] = text
                       ? (unsigned char)words[next_rand() % (sizeof(words) - 1)]
                       : (unsigned char)next_rand();
    k += (size_t)sprintf(
        c->body + k, "%s{\"PartitionKey\":\"partition-key-%06d\",\"Data\":\"",
        i ? "," : "", i);
    size_t n = kn_base64_encode(c->body + k, payload, RECLEN);
    memcpy(c->data + c->data_len, c->body + k, n);
    c->dlen[i] = n;
    c->data_len += n;
    k += n;
    k += (size_t)sprintf(
        c->body + k,
        "\",\"ApproximateArrivalTimestamp\":1795971594.%03d,\"SequenceNumber\":"
        "\"4968068138506349393315871002288%025d\"}",
        i % 1000, i);
  }
  k += (size_t)sprintf(c->body + k, "]}");
  c->len = k;
}

static const kn_base64_impl_t impls[] = {KN_BASE64_SCALAR, KN_BASE64_SSSE3,
                                         KN_BASE64_AVX2};
#define N_IMPLS 3

typedef struct result {
  double copy_s, decode_s, b64_s[N_IMPLS];
} result_t;

/* Best time of a plain base64 decode of every Data string with impl. */
static double time_b64(const canned_t *c, char *dwork, int rounds,
                       kn_base64_impl_t impl) {
  double best = 1e9;
  for (int r = 0; r < rounds; r++) {
    memcpy(dwork, c->data, c->data_len);
    double t0 = now_s();
    size_t off = 0, total = 0;
    for (int i = 0; i < NREC; i++) {
      long n =
          kn_base64_decode_with(impl, dwork + off, dwork + off, c->dlen[i]);
      if (n < 0) return -1;
      total += (size_t)n;
      off += c->dlen[i];
    }
    double t = now_s() - t0;
    if (total != (size_t)NREC * RECLEN) return -1;
    if (t < best) best = t;
  }
  return best;
}

static int run(const canned_t *c, int rounds, result_t *res) {
  char *work = malloc(c->len + 1), *dwork = malloc(c->data_len + 1);
  double best_copy = 1e9, best_dec = 1e9;
  size_t checksum = 0;
  for (int r = 0; r < rounds; r++) {
    double t0 = now_s();
    memcpy(work, c->body, c->len + 1);
    double t1 = now_s();
    kn_batch_t *b = kn_batch_new("s", "shardId-000000000000");
    kn_error_t *e =
        kn_decode_records(b, work, c->len, KN_RECORDS_GET_RECORDS, NULL);
    double t2 = now_s();
    if (e || kn_batch_count(b) != NREC) {
      fprintf(stderr, "decode failed: %s\n", e ? kn_error_string(e) : "count");
      return -1;
    }
    checksum += b->bytes;
    kn_batch_destroy(b);
    if (t1 - t0 < best_copy) best_copy = t1 - t0;
    if (t2 - t1 < best_dec) best_dec = t2 - t1;
  }
  if (checksum != (size_t)rounds * NREC * RECLEN) return -1;
  for (int k = 0; k < N_IMPLS; k++) {
    res->b64_s[k] = 0;
    if (!kn_base64_impl_supported(impls[k])) continue;
    if ((res->b64_s[k] = time_b64(c, dwork, rounds, impls[k])) < 0) return -1;
  }
  free(work);
  free(dwork);
  res->copy_s = best_copy;
  res->decode_s = best_dec;
  return 0;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 200;
  if (rounds < 1) rounds = 1;
  const double mb = (double)NREC * RECLEN / 1e6; /* payload per response */
  printf(
      "GetRecords decode: %d records x %d B per response, best of %d rounds\n",
      NREC, RECLEN, rounds);
  kn_base64_impl_t use = kn_base64_impl();
  printf("%-7s %8s %13s %13s %13s %7s", "payload", "body MB", "decoder MB/s",
         "decoder ms/MB", "base64 MB/s", "ratio");
  for (int k = 0; k < N_IMPLS; k++)
    if (kn_base64_impl_supported(impls[k]))
      printf(" %13s", kn_base64_impl_name(impls[k]));
  printf("\n");
  for (int text = 0; text <= 1; text++) {
    canned_t c;
    make(&c, text);
    result_t r;
    if (run(&c, rounds, &r)) {
      fprintf(stderr, "benchmark failed\n");
      return 1;
    }
    double dec = mb / r.decode_s, b64 = mb / r.b64_s[use];
    printf("%-7s %8.2f %13.0f %13.3f %13.0f %6.0f%%", text ? "text" : "random",
           (double)c.len / 1e6, dec, r.decode_s * 1e3 / mb, b64,
           100.0 * dec / b64);
    for (int k = 0; k < N_IMPLS; k++)
      if (kn_base64_impl_supported(impls[k]))
        printf(" %13.0f", mb / r.b64_s[k]);
    printf("\n");
    free(c.body);
    free(c.data);
    free(c.dlen);
  }
  printf(
      "(MB/s of decoded payload; base64 = a plain decode of the same Data\n"
      " strings with the implementation in use (%s), the floor; ratio =\n"
      " decoder / base64; then plain base64 by each implementation)\n",
      kn_base64_impl_name(use));
  return 0;
}
