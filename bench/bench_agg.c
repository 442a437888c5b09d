/* bench_agg: KPL aggregation and deaggregation speed for 1 KB user records
 * with distinct partition keys, next to OpenSSL MD5 over the same bytes,
 * which both directions must pay (the MD5 of the whole protobuf).
 *
 *   bench_agg [-n RECORDS] [-s RECORD_SIZE] [-t SECONDS] [-r ROUNDS] [-x]
 *
 * Each round also runs bench/agg_node.js (aws-kinesis-agg under node) on
 * the same shape of data, for the ratios at the end; -x skips that.
 *
 * "aggregate" borrows the payloads (kn_aggregator_add_borrowed), as the
 * producer does; "payloads copied" is kn_aggregator_add.
 *
 * Each figure is the best pass over all records, measured for SECONDS in
 * each of ROUNDS rounds, in MB/s of user payload (1 MB = 10^6 bytes), so
 * that the lines compare directly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agg/agg.h"
#include "agg/kpl_messages.pb-c.h"
#include "util/crypto.h"

typedef struct {
  char pk[24];
  size_t pk_len;
  uint8_t *data;
} urec_t;

typedef struct {
  uint8_t *p;
  size_t len;
} blob_t;

static size_t n_recs = 32768, rec_size = 1024;
static double seconds = 0.5;
static int rounds = 3;
static int with_node = 1;
static urec_t *recs;
static size_t payload; /* bytes of user data in one pass */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Runs pass() until `seconds` have gone by and returns the best MB/s.
 * prep (may be NULL) runs before each pass, untimed. */
static double best_mbps(int (*pass)(void *), int (*prep)(void *), void *arg) {
  double best = 0, start = now();
  int passes = 0;
  do {
    if (prep && prep(arg)) return -1;
    double t0 = now();
    if (pass(arg)) return -1;
    double dt = now() - t0, mbps = (double)payload / dt / 1e6;
    if (mbps > best) best = mbps;
    passes++;
  } while (now() - start < seconds || passes < 3);
  return best;
}

/* ---- Aggregation ----------------------------------------------------------
 */

struct agg_arg {
  size_t cap;
  int copy;           /* kn_aggregator_add (copies) rather than _add_borrowed */
  kn_aggregator_t *a; /* kept from pass to pass, as a producer keeps it */
  blob_t *keep;       /* when not NULL, the aggregates are copied here */
  size_t n_keep;
};

static kn_err_t add_rec(const struct agg_arg *arg, kn_aggregator_t *a,
                        size_t i) {
  return arg->copy
             ? kn_aggregator_add(a, recs[i].pk, recs[i].pk_len, NULL, 0,
                                 recs[i].data, rec_size)
             : kn_aggregator_add_borrowed(a, recs[i].pk, recs[i].pk_len, NULL,
                                          0, recs[i].data, rec_size);
}

static int pass_aggregate(void *p) {
  struct agg_arg *arg = p;
  kn_aggregator_t *a = arg->a;
  kn_agg_out_t out;
  arg->n_keep = 0;
  for (size_t i = 0; i <= n_recs; i++) {
    kn_err_t err = i < n_recs ? add_rec(arg, a, i) : KN_ERR__QUEUE_FULL;
    if (err == KN_ERR_NO_ERROR) continue;
    if (err != KN_ERR__QUEUE_FULL || kn_aggregator_flush(a, &out)) break;
    if (arg->keep) {
      blob_t *bl = &arg->keep[arg->n_keep++];
      bl->p = malloc(out.len);
      memcpy(bl->p, out.data, out.len);
      bl->len = out.len;
    }
    if (i < n_recs && add_rec(arg, a, i)) return -1;
  }
  return 0;
}

/* ---- Deaggregation ----------------------------------------------------------
 */

struct deagg_arg {
  blob_t *aggs;
  size_t n;
  const kn_agg_filter_t *filter;
  uint8_t *work; /* room for every aggregate, one after the other */
};

/* kn_agg_expand writes over what it expands, as the consumer lets it do
 * with the GetRecords body it has just decoded: before each pass, untimed,
 * every aggregate is copied afresh into the working area, where the pass
 * finds it as the consumer does, in memory of its own.  aws-kinesis-agg
 * reads its input in place too. */
static int prep_deaggregate(void *p) {
  struct deagg_arg *arg = p;
  size_t off = 0;
  for (size_t i = 0; i < arg->n; i++) {
    memcpy(arg->work + off, arg->aggs[i].p, arg->aggs[i].len);
    off += arg->aggs[i].len;
  }
  return 0;
}

static int pass_deaggregate(void *p) {
  struct deagg_arg *arg = p;
  kn_batch_t *b = kn_batch_new("stream", "shardId-000000000000");
  const char *seq = kn_batch_strndup(
      b, "49590338271490256608559692538361571095921575989136588898", 56);
  size_t total = 0, off = 0;
  for (size_t i = 0; i < arg->n; i++) {
    kn_agg_result_t res;
    if (kn_agg_expand(b, arg->work + off, arg->aggs[i].len, seq, 0, arg->filter,
                      &res, NULL))
      return -1;
    off += arg->aggs[i].len;
    total += res.n_added;
  }
  kn_batch_destroy(b);
  return total == n_recs ? 0 : -1;
}

static int pass_md5(void *p) {
  struct deagg_arg *arg = p;
  uint8_t md5[16];
  for (size_t i = 0; i < arg->n; i++) {
    const blob_t *bl = &arg->aggs[i];
    kn_md5(bl->p + 4, bl->len - 20, md5);
    if (memcmp(md5, bl->p + bl->len - 16, 16)) return -1;
  }
  return 0;
}

/* MD5, then protobuf-c's unpack with its default allocator (a malloc for
 * every message and payload), each message freed at once.  The decoder
 * unpacks into one block per aggregate, also freed before it returns,
 * and copies the payloads back over its input. */
static int pass_protobuf_c(void *p) {
  struct deagg_arg *arg = p;
  uint8_t md5[16];
  size_t total = 0;
  for (size_t i = 0; i < arg->n; i++) {
    const blob_t *bl = &arg->aggs[i];
    kn_md5(bl->p + 4, bl->len - 20, md5);
    if (memcmp(md5, bl->p + bl->len - 16, 16)) return -1;
    KnKpl__AggregatedRecord *ar =
        kn_kpl__aggregated_record__unpack(NULL, bl->len - 20, bl->p + 4);
    if (!ar) return -1;
    total += ar->n_records;
    kn_kpl__aggregated_record__free_unpacked(ar, NULL);
  }
  return total == n_recs ? 0 : -1;
}

static char node_report[2048]; /* the last run's own lines */

/* Runs the aws-kinesis-agg benchmark for `seconds`; fills its figures, or
 * returns -1. */
static int run_node(double *agg, double *deagg) {
  char cmd[1024];
  snprintf(cmd, sizeof(cmd),
           "node '%s/bench/agg_node.js' -n %zu -s %zu -t %g 2>&1",
           KN_SOURCE_DIR, n_recs, rec_size, seconds);
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  char line[512];
  int found = 0;
  node_report[0] = '\0';
  while (fgets(line, sizeof(line), f)) {
    if (sscanf(line, "{\"aggregate_mbps\":%lf,\"deaggregate_mbps\":%lf", agg,
               deagg) == 2)
      found = 1;
    else if (strlen(node_report) + strlen(line) < sizeof(node_report))
      strcat(node_report, line);
  }
  return pclose(f) == 0 && found ? 0 : -1;
}

static void free_blobs(blob_t *bl, size_t n) {
  for (size_t i = 0; i < n; i++) free(bl[i].p);
}

int main(int argc, char **argv) {
  int opt;
  while ((opt = getopt(argc, argv, "n:s:t:r:x")) != -1) {
    switch (opt) {
      case 'n':
        n_recs = strtoul(optarg, NULL, 10);
        break;
      case 's':
        rec_size = strtoul(optarg, NULL, 10);
        break;
      case 't':
        seconds = strtod(optarg, NULL);
        break;
      case 'r':
        rounds = atoi(optarg);
        break;
      case 'x':
        with_node = 0;
        break;
      default:
        fprintf(stderr,
                "usage: %s [-n RECORDS] [-s RECORD_SIZE] [-t SECONDS] [-r "
                "ROUNDS] [-x]\n",
                argv[0]);
        return 2;
    }
  }
  if (!n_recs || rec_size > 512 * 1024 || rounds < 1) return 2;
  recs = calloc(n_recs, sizeof(*recs));
  for (size_t i = 0; i < n_recs; i++) {
    recs[i].pk_len = (size_t)snprintf(recs[i].pk, sizeof(recs[i].pk), "%016llx",
                                      (unsigned long long)rnd());
    recs[i].data = malloc(rec_size);
    for (size_t j = 0; j < rec_size; j++) recs[i].data[j] = (uint8_t)rnd();
  }
  payload = n_recs * rec_size;
  printf(
      "%zu user records of %zu bytes, distinct partition keys; best pass "
      "of %d rounds of %.1f s; MB/s of user payload\n",
      n_recs, rec_size, rounds, seconds);

  /* Both sizes of aggregate, kept for decoding. */
  size_t caps[] = {KN_AGG_DEFAULT_MAX_BYTES, KN_AGG_RECORD_LIMIT - 1};
  struct agg_arg aa[2], ac[2];
  struct deagg_arg da[2], dr[2];
  kn_agg_filter_t range = {.subseq_floor = -1, .check_range = 1};
  range.range_end = kn_u128_make(UINT64_MAX, UINT64_MAX);
  for (size_t c = 0; c < 2; c++) {
    aa[c] = (struct agg_arg){caps[c], 0, kn_aggregator_new(caps[c], 0),
                             calloc(n_recs, sizeof(blob_t)), 0};
    ac[c] =
        (struct agg_arg){caps[c], 1, kn_aggregator_new(caps[c], 0), NULL, 0};
    pass_aggregate(&aa[c]);
    size_t total = 1;
    for (size_t i = 0; i < aa[c].n_keep; i++) total += aa[c].keep[i].len;
    uint8_t *work = malloc(total);
    if (!work) return 1;
    da[c] = (struct deagg_arg){aa[c].keep, aa[c].n_keep, NULL, work};
    dr[c] = (struct deagg_arg){aa[c].keep, aa[c].n_keep, &range, work};
    aa[c].keep = NULL;
  }

  /* Rounds interleave every measurement, aws-kinesis-agg's included, so
   * that load from elsewhere on the machine spreads over all of them; each
   * keeps its best. */
  double md5[2] = {0}, agg[2] = {0}, agg_c[2] = {0}, deagg[2] = {0},
         deagg_r[2] = {0}, pbc[2] = {0};
  double node_agg = 0, node_deagg = 0;
  int node_ok = with_node;
  for (int round = 0; round < rounds; round++) {
    for (size_t c = 0; c < 2; c++) {
      md5[c] = fmax(md5[c], best_mbps(pass_md5, NULL, &da[c]));
      agg[c] = fmax(agg[c], best_mbps(pass_aggregate, NULL, &aa[c]));
      agg_c[c] = fmax(agg_c[c], best_mbps(pass_aggregate, NULL, &ac[c]));
      deagg[c] =
          fmax(deagg[c], best_mbps(pass_deaggregate, prep_deaggregate, &da[c]));
      deagg_r[c] = fmax(deagg_r[c],
                        best_mbps(pass_deaggregate, prep_deaggregate, &dr[c]));
      pbc[c] = fmax(pbc[c], best_mbps(pass_protobuf_c, NULL, &da[c]));
    }
    double na, nd;
    if (node_ok && run_node(&na, &nd) == 0) {
      node_agg = fmax(node_agg, na);
      node_deagg = fmax(node_deagg, nd);
    } else {
      node_ok = 0;
    }
  }

  for (size_t c = 0; c < 2; c++) {
    printf("\naggregates of up to %zu bytes (%zu of them)\n", caps[c], da[c].n);
    printf("  OpenSSL MD5 of the same bytes     %8.0f MB/s\n", md5[c]);
    printf("  aggregate                         %8.0f MB/s  %4.0f%% of MD5\n",
           agg[c], 100 * agg[c] / md5[c]);
    printf("  aggregate, payloads copied        %8.0f MB/s  %4.0f%% of MD5\n",
           agg_c[c], 100 * agg_c[c] / md5[c]);
    printf("  deaggregate (MD5 checked)         %8.0f MB/s  %4.0f%% of MD5\n",
           deagg[c], 100 * deagg[c] / md5[c]);
    printf("  deaggregate + hash range check    %8.0f MB/s  %4.0f%% of MD5\n",
           deagg_r[c], 100 * deagg_r[c] / md5[c]);
    printf("  MD5 + protobuf-c unpack (compare) %8.0f MB/s  %4.0f%% of MD5\n",
           pbc[c], 100 * pbc[c] / md5[c]);
    kn_aggregator_destroy(aa[c].a);
    kn_aggregator_destroy(ac[c].a);
    free_blobs(da[c].aggs, da[c].n);
    free(da[c].aggs);
    free(da[c].work);
  }

  if (with_node && !node_ok) {
    printf(
        "\naws-kinesis-agg benchmark did not run (node and the lab's "
        "node_modules needed)\n");
  } else if (with_node) {
    printf("\nbench/agg_node.js, last round:\n%s", node_report);
    printf(
        "aws-kinesis-agg (1 MB aggregates, its only size), best of %d rounds:\n"
        "  aggregate %.0f MB/s, deaggregate %.0f MB/s\n",
        rounds, node_agg, node_deagg);
    printf("libkinesis / aws-kinesis-agg on the same data:\n");
    printf(
        "  aggregate    %5.1fx with 1 MiB aggregates   %5.1fx with the KPL's "
        "51,200\n",
        agg[1] / node_agg, agg[0] / node_agg);
    printf(
        "  deaggregate  %5.1fx with 1 MiB aggregates   %5.1fx with the KPL's "
        "51,200\n",
        deagg[1] / node_deagg, deagg[0] / node_deagg);
  }
  for (size_t i = 0; i < n_recs; i++) free(recs[i].data);
  free(recs);
  return 0;
}
