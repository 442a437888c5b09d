/* client_tool: every kn_client_t operation from the command line, for
 * tests/integration/test_client_ops.py.  Prints one JSON object per
 * command on stdout; a failure prints {"error": NAME, "message": ...,
 * "type": ..., "http": N} and exits 1 (2 for usage or setup errors).
 *
 *   client_tool [-X name=value]... COMMAND ARGS...
 *
 * Data arguments are hex, or @FILE for a file's bytes; payloads come back
 * as "len", "md5" and (up to 64 KiB) "hex". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/resource.h>

#include "kinesis/batch.h"
#include "kn/client.h"
#include "util/buf.h"
#include "util/crypto.h"
#include "util/hex.h"

static const char usage_text[] =
    "usage: client_tool [-X name=value]... COMMAND ARGS...\n"
    "  create STREAM SHARDS | delete STREAM [enforce] | wait STREAM "
    "active|deleted MS\n"
    "  describe STREAM | list-streams | list-shards STREAM [FILTER [ARG]]\n"
    "  split STREAM SHARD [KEY] | merge STREAM SHARD ADJACENT | "
    "update-shard-count STREAM N\n"
    "  iterator STREAM SHARD TYPE [SEQ|MS] | get ITERATOR [LIMIT]\n"
    "  read STREAM SHARD TYPE [SEQ|MS] [MAX_RECORDS]\n"
    "  drain STREAM SHARD (from the trim horizon, counting only)\n"
    "  put STREAM KEY DATA [EHK] | put-records STREAM KEY=DATA[=EHK]...\n"
    "  put-many STREAM COUNT SIZE [KEY_PREFIX]\n"
    "  register STREAM_ARN NAME | describe-consumer STREAM_ARN NAME | "
    "describe-consumer-arn ARN\n"
    "  deregister STREAM_ARN NAME | deregister-arn ARN | list-consumers "
    "STREAM_ARN\n"
    "  hash KEY | seqcmp A B\n"
    "TYPE: trim_horizon latest at_sequence_number after_sequence_number "
    "at_timestamp\n"
    "FILTER: after_shard_id at_trim_horizon from_trim_horizon at_latest "
    "at_timestamp "
    "from_timestamp\n";

static kn_buf_t out = KN_BUF_INIT;

static void jstr(const char *s) {
  if (!s)
    kn_buf_append_str(&out, "null");
  else
    kn_buf_append_json_str(&out, s, strlen(s));
}

static void jkey(const char *k) {
  if (out.len && out.p[out.len - 1] != '{' && out.p[out.len - 1] != '[')
    kn_buf_append_char(&out, ',');
  jstr(k);
  kn_buf_append_char(&out, ':');
}

static void jkv(const char *k, const char *v) {
  jkey(k);
  jstr(v);
}

static void jkn(const char *k, long long v) {
  jkey(k);
  kn_buf_printf(&out, "%lld", v);
}

static void jkb(const char *k, int v) {
  jkey(k);
  kn_buf_append_str(&out, v ? "true" : "false");
}

static void open_c(char c) {
  if (out.len && out.p[out.len - 1] != '{' && out.p[out.len - 1] != '[' &&
      out.p[out.len - 1] != ':')
    kn_buf_append_char(&out, ',');
  kn_buf_append_char(&out, c);
}

static int done(void) {
  fwrite(out.p, 1, out.len, stdout);
  fputc('\n', stdout);
  kn_buf_free(&out);
  return 0;
}

static int fail(kn_error_t *e) {
  kn_buf_reset(&out);
  kn_buf_append_char(&out, '{');
  jkv("error", kn_err2name(kn_error_code(e)));
  jkv("message", kn_error_string(e));
  jkv("type", kn_error_type(e));
  jkn("http", kn_error_http_status(e));
  kn_buf_append_char(&out, '}');
  done();
  kn_error_destroy(e);
  return 1;
}

/* Hex or @FILE into a malloc'ed buffer. */
static unsigned char *load_data(const char *arg, size_t *len) {
  if (arg[0] == '@') {
    FILE *f = fopen(arg + 1, "rb");
    if (!f) return NULL;
    kn_buf_t b = KN_BUF_INIT;
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) kn_buf_append(&b, tmp, n);
    fclose(f);
    if (!b.p) kn_buf_reserve(&b, 1);
    return (unsigned char *)kn_buf_steal(&b, len);
  }
  size_t n = strlen(arg);
  if (n % 2) return NULL;
  unsigned char *d = malloc(n / 2 + 1);
  if (!d || kn_hex_decode(d, arg, n / 2)) {
    free(d);
    return NULL;
  }
  *len = n / 2;
  return d;
}

static void payload(const void *d, size_t len) {
  uint8_t md5[KN_MD5_LEN];
  char hex[2 * KN_MD5_LEN + 1];
  kn_md5(d, len, md5);
  kn_hex_encode(hex, md5, sizeof md5);
  jkn("len", (long long)len);
  jkv("md5", hex);
  if (len <= 65536) {
    char *h = malloc(2 * len + 1);
    kn_hex_encode(h, d, len);
    jkv("hex", h);
    free(h);
  }
}

static void shard_json(const kn_shard_t *s) {
  open_c('{');
  jkv("id", kn_shard_id(s));
  jkv("parent", kn_shard_parent_id(s));
  jkv("adjacent_parent", kn_shard_adjacent_parent_id(s));
  jkv("start", kn_shard_hash_key_start(s));
  jkv("end", kn_shard_hash_key_end(s));
  jkv("seq_start", kn_shard_sequence_start(s));
  jkv("seq_end", kn_shard_sequence_end(s));
  jkb("open", kn_shard_is_open(s));
  kn_buf_append_char(&out, '}');
}

static void shards_json(const char *k, const kn_shard_list_t *l) {
  jkey(k);
  if (!l) {
    kn_buf_append_str(&out, "null");
    return;
  }
  kn_buf_append_char(&out, '[');
  for (size_t i = 0; i < kn_shard_list_count(l); i++)
    shard_json(kn_shard_list_get(l, i));
  kn_buf_append_char(&out, ']');
}

static void record_json(const kn_record_t *r) {
  size_t len;
  const void *d = kn_record_data(r, &len);
  open_c('{');
  jkv("seq", kn_record_sequence_number(r));
  jkv("key", kn_record_partition_key(r));
  jkn("arrival_ms", kn_record_arrival_ms(r));
  payload(d, len);
  kn_buf_append_char(&out, '}');
}

static void consumer_json(const kn_stream_consumer_t *c) {
  open_c('{');
  jkv("name", kn_stream_consumer_name(c));
  jkv("arn", kn_stream_consumer_arn(c));
  jkv("status", kn_stream_consumer_status(c));
  jkn("created_ms", kn_stream_consumer_created_ms(c));
  kn_buf_append_char(&out, '}');
}

static int iter_type(const char *s, kn_iterator_type_t *t) {
  static const char *names[] = {"trim_horizon", "latest", "at_sequence_number",
                                "after_sequence_number", "at_timestamp"};
  for (int i = 0; i < 5; i++)
    if (strcmp(s, names[i]) == 0) {
      *t = (kn_iterator_type_t)i;
      return 0;
    }
  return -1;
}

static int filter_type(const char *s, kn_shard_filter_type_t *t) {
  static const char *names[] = {
      "none",      "after_shard_id", "at_trim_horizon", "from_trim_horizon",
      "at_latest", "at_timestamp",   "from_timestamp"};
  for (int i = 0; i < 7; i++)
    if (strcmp(s, names[i]) == 0) {
      *t = (kn_shard_filter_type_t)i;
      return 0;
    }
  return -1;
}

static int usage(void) {
  fputs(usage_text, stderr);
  return 2;
}

/* Reads a shard from an iterator type until its end (no next iterator)
 * or until it is caught up (an empty answer at MillisBehindLatest 0). */
static int cmd_read(kn_client_t *kc, int argc, char **argv) {
  kn_iterator_type_t t;
  if (argc < 3 || iter_type(argv[2], &t)) return usage();
  const char *seq = NULL;
  long long ts = 0, max = -1;
  int a = 3;
  if (t == KN_ITER_AT_SEQUENCE_NUMBER || t == KN_ITER_AFTER_SEQUENCE_NUMBER) {
    if (argc < 4) return usage();
    seq = argv[a++];
  } else if (t == KN_ITER_AT_TIMESTAMP) {
    if (argc < 4) return usage();
    ts = atoll(argv[a++]);
  }
  if (argc > a) max = atoll(argv[a]);
  char *it = NULL;
  kn_error_t *e = kn_get_shard_iterator(kc, argv[0], argv[1], t, seq, ts, &it);
  if (e) return fail(e);
  kn_buf_append_str(&out, "{\"records\":[");
  long long count = 0, calls = 0;
  int ended = 0, empty_streak = 0;
  kn_batch_t *last = NULL;
  while (it && calls < 100000) {
    kn_batch_t *b;
    e = kn_get_records(kc, it, 0, &b);
    calls++;
    if (e) {
      free(it);
      kn_batch_destroy(last);
      return fail(e);
    }
    for (size_t i = 0; i < kn_batch_count(b); i++)
      record_json(kn_batch_record(b, i));
    count += (long long)kn_batch_count(b);
    free(it);
    it = kn_batch_next_iterator(b) ? strdup(kn_batch_next_iterator(b)) : NULL;
    ended = kn_batch_shard_end(b);
    empty_streak = kn_batch_count(b) ? 0 : empty_streak + 1;
    int caught_up = kn_batch_count(b) == 0 && kn_batch_millis_behind(b) <= 0;
    kn_batch_destroy(last);
    last = b;
    if (caught_up && empty_streak >= 2) break;
    if (max >= 0 && count >= max) break;
  }
  kn_buf_append_char(&out, ']');
  jkn("count", count);
  jkb("ended", ended);
  jkn("calls", calls);
  jkn("millis_behind", last ? kn_batch_millis_behind(last) : -1);
  shards_json("children", last ? kn_batch_child_shards(last) : NULL);
  jkv("next", it);
  kn_buf_append_char(&out, '}');
  kn_batch_destroy(last);
  free(it);
  return done();
}

/* Reads a shard from its trim horizon until caught up and prints only
 * counts and the CPU time used, to measure the client's own cost. */
static int cmd_drain(kn_client_t *kc, int argc, char **argv) {
  if (argc != 2) return usage();
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  char *it = NULL;
  kn_error_t *e = kn_get_shard_iterator(kc, argv[0], argv[1],
                                        KN_ITER_TRIM_HORIZON, NULL, 0, &it);
  if (e) return fail(e);
  long long count = 0, bytes = 0, calls = 0;
  int empty = 0;
  while (it) {
    kn_batch_t *b;
    e = kn_get_records(kc, it, 0, &b);
    free(it);
    it = NULL;
    if (e) return fail(e);
    calls++;
    count += (long long)kn_batch_count(b);
    bytes += (long long)b->bytes;
    empty = kn_batch_count(b) ? 0 : empty + 1;
    if (kn_batch_next_iterator(b) && empty < 2)
      it = strdup(kn_batch_next_iterator(b));
    kn_batch_destroy(b);
  }
  getrusage(RUSAGE_SELF, &ru1);
  double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec +
                        ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) *
                   1e3 +
               (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec +
                        ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) /
                   1e3;
  kn_buf_append_char(&out, '{');
  jkn("count", count);
  jkn("bytes", bytes);
  jkn("calls", calls);
  jkn("cpu_us", (long long)(cpu * 1e3));
  jkn("max_rss_kb", ru1.ru_maxrss);
  kn_buf_append_char(&out, '}');
  return done();
}

static int run(kn_client_t *kc, const char *cmd, int argc, char **argv) {
  kn_error_t *e = NULL;
  kn_buf_append_char(&out, '{');
  if (strcmp(cmd, "create") == 0 && argc == 2) {
    e = kn_create_stream(kc, argv[0], atoi(argv[1]));
  } else if (strcmp(cmd, "delete") == 0 && argc >= 1) {
    e = kn_delete_stream(kc, argv[0],
                         argc > 1 && strcmp(argv[1], "enforce") == 0);
  } else if (strcmp(cmd, "wait") == 0 && argc == 3) {
    e = kn_wait_stream(kc, argv[0], strcmp(argv[1], "deleted") == 0,
                       atoi(argv[2]));
  } else if (strcmp(cmd, "describe") == 0 && argc == 1) {
    kn_stream_summary_t *s;
    if (!(e = kn_describe_stream_summary(kc, argv[0], &s))) {
      jkv("name", kn_stream_summary_name(s));
      jkv("arn", kn_stream_summary_arn(s));
      jkv("status", kn_stream_summary_status(s));
      jkv("mode", kn_stream_summary_mode(s));
      jkn("open_shards", kn_stream_summary_open_shards(s));
      jkn("retention_hours", kn_stream_summary_retention_hours(s));
      jkn("consumers", kn_stream_summary_consumers(s));
      kn_stream_summary_destroy(s);
    }
  } else if (strcmp(cmd, "list-streams") == 0 && argc == 0) {
    kn_strlist_t *l;
    if (!(e = kn_list_streams(kc, &l))) {
      jkey("streams");
      kn_buf_append_char(&out, '[');
      for (size_t i = 0; i < kn_strlist_count(l); i++) {
        if (i) kn_buf_append_char(&out, ',');
        jstr(kn_strlist_get(l, i));
      }
      kn_buf_append_char(&out, ']');
      kn_strlist_destroy(l);
    }
  } else if (strcmp(cmd, "list-shards") == 0 && argc >= 1) {
    kn_shard_filter_type_t f = KN_SHARD_FILTER_NONE;
    if (argc > 1 && filter_type(argv[1], &f)) return usage();
    const char *id = argc > 2 ? argv[2] : NULL;
    long long ts = argc > 2 ? atoll(argv[2]) : 0;
    kn_shard_list_t *l;
    if (!(e = kn_list_shards(kc, argv[0], f, id, ts, &l))) {
      shards_json("shards", l);
      kn_shard_list_destroy(l);
    }
  } else if (strcmp(cmd, "split") == 0 && (argc == 2 || argc == 3)) {
    e = kn_split_shard(kc, argv[0], argv[1], argc == 3 ? argv[2] : NULL);
  } else if (strcmp(cmd, "merge") == 0 && argc == 3) {
    e = kn_merge_shards(kc, argv[0], argv[1], argv[2]);
  } else if (strcmp(cmd, "update-shard-count") == 0 && argc == 2) {
    e = kn_update_shard_count(kc, argv[0], atoi(argv[1]));
  } else if (strcmp(cmd, "iterator") == 0 && argc >= 3) {
    kn_iterator_type_t t;
    if (iter_type(argv[2], &t)) return usage();
    char *it;
    const char *arg = argc > 3 ? argv[3] : NULL;
    if (!(e = kn_get_shard_iterator(kc, argv[0], argv[1], t, arg,
                                    arg ? atoll(arg) : 0, &it))) {
      jkv("iterator", it);
      free(it);
    }
  } else if (strcmp(cmd, "get") == 0 && argc >= 1) {
    kn_batch_t *b;
    if (!(e = kn_get_records(kc, argv[0], argc > 1 ? atoi(argv[1]) : 0, &b))) {
      jkey("records");
      kn_buf_append_char(&out, '[');
      for (size_t i = 0; i < kn_batch_count(b); i++)
        record_json(kn_batch_record(b, i));
      kn_buf_append_char(&out, ']');
      jkv("next", kn_batch_next_iterator(b));
      jkn("millis_behind", kn_batch_millis_behind(b));
      jkb("shard_end", kn_batch_shard_end(b));
      shards_json("children", kn_batch_child_shards(b));
      kn_batch_destroy(b);
    }
  } else if (strcmp(cmd, "drain") == 0) {
    kn_buf_reset(&out);
    return cmd_drain(kc, argc, argv);
  } else if (strcmp(cmd, "read") == 0) {
    kn_buf_reset(&out);
    return cmd_read(kc, argc, argv);
  } else if (strcmp(cmd, "put") == 0 && (argc == 3 || argc == 4)) {
    size_t len;
    unsigned char *d = load_data(argv[2], &len);
    if (!d) return usage();
    char *seq, *shard;
    if (!(e = kn_put_record(kc, argv[0], argv[1], d, len,
                            argc == 4 ? argv[3] : NULL, &seq, &shard))) {
      jkv("seq", seq);
      jkv("shard", shard);
      free(seq);
      free(shard);
    }
    free(d);
  } else if ((strcmp(cmd, "put-records") == 0 && argc >= 1) ||
             (strcmp(cmd, "put-many") == 0 && argc >= 3)) {
    int many = cmd[4] == 'm';
    size_t n = many ? (size_t)atol(argv[1]) : (size_t)(argc - 1);
    size_t size = many ? (size_t)atol(argv[2]) : 0;
    kn_put_entry_t *ents = calloc(n ? n : 1, sizeof(*ents));
    char **keys = calloc(n ? n : 1, sizeof(char *));
    unsigned char **datas = calloc(n ? n : 1, sizeof(*datas));
    for (size_t i = 0; i < n; i++) {
      if (many) {
        char k[64];
        snprintf(k, sizeof k, "%s%zu", argc > 3 ? argv[3] : "key-", i);
        keys[i] = strdup(k);
        datas[i] = malloc(size ? size : 1);
        for (size_t j = 0; j < size; j++)
          datas[i][j] = (unsigned char)(i * 31 + j);
        ents[i].len = size;
      } else {
        /* KEY=DATA[=EHK] */
        keys[i] = strdup(argv[1 + i]);
        char *eq = strchr(keys[i], '=');
        if (!eq) return usage();
        *eq = '\0';
        char *eq2 = strchr(eq + 1, '=');
        if (eq2) {
          *eq2 = '\0';
          ents[i].explicit_hash_key = eq2 + 1;
        }
        datas[i] = load_data(eq + 1, &ents[i].len);
        if (!datas[i]) return usage();
      }
      ents[i].partition_key = keys[i];
      ents[i].data = datas[i];
    }
    kn_put_results_t *r;
    if (!(e = kn_put_records(kc, argv[0], ents, n, &r))) {
      jkn("failed", (long long)kn_put_results_failed(r));
      jkey("results");
      kn_buf_append_char(&out, '[');
      for (size_t i = 0; i < kn_put_results_count(r); i++) {
        open_c('{');
        jkv("seq", kn_put_results_sequence_number(r, i));
        jkv("shard", kn_put_results_shard_id(r, i));
        jkv("error", kn_put_results_error_code(r, i));
        jkv("message", kn_put_results_error_message(r, i));
        kn_buf_append_char(&out, '}');
      }
      kn_buf_append_char(&out, ']');
      kn_put_results_destroy(r);
    }
    for (size_t i = 0; i < n; i++) {
      free(keys[i]);
      free(datas[i]);
    }
    free(keys);
    free(datas);
    free(ents);
  } else if (strcmp(cmd, "register") == 0 && argc == 2) {
    kn_stream_consumer_t *c;
    if (!(e = kn_register_stream_consumer(kc, argv[0], argv[1], &c))) {
      jkey("consumer");
      consumer_json(c);
      kn_stream_consumer_destroy(c);
    }
  } else if ((strcmp(cmd, "describe-consumer") == 0 && argc == 2) ||
             (strcmp(cmd, "describe-consumer-arn") == 0 && argc == 1)) {
    kn_stream_consumer_t *c;
    if (argc == 2)
      e = kn_describe_stream_consumer(kc, argv[0], argv[1], NULL, &c);
    else
      e = kn_describe_stream_consumer(kc, NULL, NULL, argv[0], &c);
    if (!e) {
      jkey("consumer");
      consumer_json(c);
      kn_stream_consumer_destroy(c);
    }
  } else if (strcmp(cmd, "deregister") == 0 && argc == 2) {
    e = kn_deregister_stream_consumer(kc, argv[0], argv[1], NULL);
  } else if (strcmp(cmd, "deregister-arn") == 0 && argc == 1) {
    e = kn_deregister_stream_consumer(kc, NULL, NULL, argv[0]);
  } else if (strcmp(cmd, "list-consumers") == 0 && argc == 1) {
    kn_stream_consumer_list_t *l;
    if (!(e = kn_list_stream_consumers(kc, argv[0], &l))) {
      jkey("consumers");
      kn_buf_append_char(&out, '[');
      for (size_t i = 0; i < kn_stream_consumer_list_count(l); i++)
        consumer_json(kn_stream_consumer_list_get(l, i));
      kn_buf_append_char(&out, ']');
      kn_stream_consumer_list_destroy(l);
    }
  } else {
    return usage();
  }
  if (e) return fail(e);
  kn_buf_append_char(&out, '}');
  return done();
}

int main(int argc, char **argv) {
  kn_conf_t *conf = kn_conf_new();
  char err[512];
  int i = 1;
  for (; i + 1 < argc && strcmp(argv[i], "-X") == 0; i += 2) {
    char *kv = argv[i + 1], *eq = strchr(kv, '=');
    if (!eq) return usage();
    *eq = '\0';
    if (kn_conf_set(conf, kv, eq + 1, err, sizeof err) != KN_CONF_OK) {
      fprintf(stderr, "%s\n", err);
      kn_conf_destroy(conf);
      return 2;
    }
  }
  if (i >= argc) {
    kn_conf_destroy(conf);
    return usage();
  }
  const char *cmd = argv[i++];
  /* Pure helpers need no client. */
  if (strcmp(cmd, "hash") == 0 && argc - i == 1) {
    char buf[40];
    kn_conf_destroy(conf);
    printf("{\"hash\":\"%s\"}\n", kn_partition_key_hash(argv[i], buf));
    return 0;
  }
  if (strcmp(cmd, "seqcmp") == 0 && argc - i == 2) {
    kn_conf_destroy(conf);
    int c = kn_sequence_number_cmp(argv[i], argv[i + 1]);
    printf("{\"cmp\":%d}\n", (c > 0) - (c < 0));
    return 0;
  }
  kn_client_t *kc = kn_client_new(conf, err, sizeof err);
  kn_conf_destroy(conf);
  if (!kc) {
    printf("{\"error\":\"SETUP\",\"message\":");
    fflush(stdout);
    kn_buf_t b = KN_BUF_INIT;
    kn_buf_append_json_str(&b, err, strlen(err));
    printf("%s}\n", b.p);
    kn_buf_free(&b);
    return 2;
  }
  int rc = run(kc, cmd, argc - i, argv + i);
  kn_client_destroy(kc);
  kn_buf_free(&out);
  return rc;
}
