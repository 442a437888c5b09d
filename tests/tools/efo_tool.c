/* efo_tool: a kn_consumer_t on the command line, for the fan-out
 * integration tests and benchmarks (tests/integration/test_efo*.py,
 * bench/bench_efo.py).  Only the public API.
 *
 *   efo_tool [-X name=value]... STREAM [options]
 *     -c N      exit after N records
 *     -e        exit once caught up (kn_consumer_caught_up)
 *     -t MS     exit after MS without records (after the first one)
 *     -T MS     give up after MS in all (exit 3)
 *     -w MS     sleep MS after each batch (a slow application)
 *     -s FILE   the statistics document, rewritten every second and at exit
 *     -q        count only: no record lines
 *     -C        checkpoint each batch (kn_consumer_checkpoint_batch)
 *
 * One JSON line per record on stdout: shard, seq, subseq, key, data (the
 * payload as text, test payloads are ASCII) and recv_ms (wall clock when
 * the poll returned it).  At exit one summary line on stderr:
 *   SUMMARY {"records":N,"bytes":B,"cpu_s":S,"maxrss_kb":K}
 * (K: the peak resident set, VmHWM).
 * Exit status: 0, 1 when the consumer failed (FATAL line on stderr), 2 for
 * usage, 3 on -T.  SIGINT/SIGTERM close the consumer and exit 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "kn/consumer.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

static long long wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void json_str(FILE *f, const char *s, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

static void write_stats(kn_consumer_t *kc, const char *path) {
  if (!path) return;
  char *json = kn_consumer_stats_json(kc);
  if (!json) return;
  char tmp[4096];
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (f) {
    fputs(json, f);
    fclose(f);
    rename(tmp, path);
  }
  free(json);
}

/* Peak resident set of this program (VmHWM): unlike ru_maxrss it does not
 * carry the peak of the process that exec'd us. */
static long peak_rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof(line), f))
    if (strncmp(line, "VmHWM:", 6) == 0) kb = strtol(line + 6, NULL, 10);
  if (f) fclose(f);
  return kb;
}

static int usage(void) {
  fprintf(stderr,
          "usage: efo_tool [-X name=value]... STREAM [-c N] [-e] "
          "[-t MS] [-T MS] [-w MS] [-s FILE] [-q] [-C]\n");
  return 2;
}

int main(int argc, char **argv) {
  char errstr[512];
  kn_conf_t *conf = kn_conf_new();
  const char *stream = NULL, *stats_path = NULL;
  long long max_count = -1, idle_ms = -1, total_ms = -1, wait_ms = 0;
  int until_caught_up = 0, quiet = 0, checkpoint = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "-X") == 0 && v) {
      char *eq = strchr(v, '=');
      if (!eq) return usage();
      *eq = '\0';
      if (kn_conf_set(conf, v, eq + 1, errstr, sizeof(errstr)) != KN_CONF_OK) {
        fprintf(stderr, "efo_tool: %s\n", errstr);
        return 2;
      }
      i++;
    } else if (strcmp(a, "-c") == 0 && v) {
      max_count = atoll(argv[++i]);
    } else if (strcmp(a, "-t") == 0 && v) {
      idle_ms = atoll(argv[++i]);
    } else if (strcmp(a, "-T") == 0 && v) {
      total_ms = atoll(argv[++i]);
    } else if (strcmp(a, "-w") == 0 && v) {
      wait_ms = atoll(argv[++i]);
    } else if (strcmp(a, "-s") == 0 && v) {
      stats_path = argv[++i];
    } else if (strcmp(a, "-e") == 0) {
      until_caught_up = 1;
    } else if (strcmp(a, "-q") == 0) {
      quiet = 1;
    } else if (strcmp(a, "-C") == 0) {
      checkpoint = 1;
    } else if (a[0] != '-' && !stream) {
      stream = a;
    } else {
      return usage();
    }
  }
  if (!stream) return usage();
  if (kn_conf_set(conf, "stream", stream, errstr, sizeof(errstr)) !=
      KN_CONF_OK) {
    fprintf(stderr, "efo_tool: %s\n", errstr);
    return 2;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGPIPE, SIG_IGN);

  kn_consumer_t *kc = kn_consumer_new(conf, errstr, sizeof(errstr));
  kn_conf_destroy(conf);
  if (!kc) {
    fprintf(stderr, "FATAL %s\n", errstr);
    return 1;
  }
  long long count = 0, bytes = 0;
  long long t0 = mono_ms(), last_rec = 0, last_stats = 0;
  int rc = 0;
  while (!stop_flag) {
    kn_batch_t *b = kn_consumer_poll(kc, 100);
    long long now = mono_ms();
    if (stats_path && now - last_stats >= 1000) {
      write_stats(kc, stats_path);
      last_stats = now;
    }
    const kn_error_t *fatal = kn_consumer_fatal_error(kc);
    if (!b && fatal) {
      fprintf(stderr, "FATAL %s\n", kn_error_string(fatal));
      rc = 1;
      break;
    }
    if (b) {
      long long recv = wall_ms();
      for (size_t i = 0; i < kn_batch_count(b); i++) {
        const kn_record_t *r = kn_batch_record(b, i);
        size_t len = 0;
        const char *data = kn_record_data(r, &len);
        bytes += (long long)len;
        count++;
        if (quiet) continue;
        printf("{\"shard\":\"%s\",\"seq\":\"%s\",\"subseq\":%llu,\"key\":",
               kn_batch_shard_id(b), kn_record_sequence_number(r),
               (unsigned long long)kn_record_subsequence_number(r));
        const char *key = kn_record_partition_key(r);
        json_str(stdout, key, strlen(key));
        fputs(",\"data\":", stdout);
        json_str(stdout, data, len);
        printf(",\"recv_ms\":%lld}\n", recv);
      }
      fflush(stdout);
      last_rec = now;
      if (checkpoint) {
        kn_error_t *err = kn_consumer_checkpoint_batch(kc, b);
        if (err) fprintf(stderr, "checkpoint: %s\n", kn_error_string(err));
        kn_error_destroy(err);
      }
      kn_batch_destroy(b);
      if (wait_ms > 0) usleep((useconds_t)(wait_ms * 1000));
    }
    if (max_count >= 0 && count >= max_count) break;
    if (until_caught_up && !b && kn_consumer_caught_up(kc)) break;
    if (idle_ms >= 0 && last_rec && now - last_rec >= idle_ms) break;
    if (total_ms >= 0 && now - t0 >= total_ms) {
      fprintf(stderr, "efo_tool: gave up after %lld ms with %lld records\n",
              total_ms, count);
      rc = 3;
      break;
    }
  }
  write_stats(kc, stats_path);
  kn_error_t *err = kn_consumer_close(kc);
  if (err) fprintf(stderr, "close: %s\n", kn_error_string(err));
  kn_error_destroy(err);
  kn_consumer_destroy(kc);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  fprintf(stderr,
          "SUMMARY {\"records\":%lld,\"bytes\":%lld,\"cpu_s\":%.4f,"
          "\"maxrss_kb\":%ld}\n",
          count, bytes, cpu, peak_rss_kb());
  return rc;
}
