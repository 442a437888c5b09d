/* kncat's option scanner and value parsers. */
#include "args.h"
#include "kt.h"

static int scan(char **argv, int argc, const kc_opt_t *opts, int stop,
                char *trace, size_t cap, kc_args_t *a, char **ops) {
  kc_args_init(a, argc, argv, ops, 4, stop);
  int id;
  trace[0] = '\0';
  while ((id = kc_args_next(a, opts)) > 0) {
    char item[64];
    snprintf(item, sizeof(item), "%s%d=%s", trace[0] ? " " : "", id,
             a->arg ? a->arg : "");
    strncat(trace, item, cap - strlen(trace) - 1);
  }
  return id;
}

static const kc_opt_t opts[] = {{'e', 'e', "exit", 0},
                                {'c', 'c', "count", 1},
                                {'v', 'v', NULL, 0},
                                {300, 0, "at", 1},
                                {0, 0, NULL, 0}};

static void test_scanner(void) {
  char trace[256];
  kc_args_t a;
  char *ops[4];
  {
    char *argv[] = {"s1",  "-e", "-c10", "--at=5", "s2",
                    "-vv", "-c", "7",    "--at",   "9"};
    KT_CHECK_INT(scan(argv, 10, opts, 0, trace, sizeof(trace), &a, ops), 0);
    KT_CHECK_STR(trace, "101= 99=10 300=5 118= 118= 99=7 300=9");
    KT_CHECK_INT(a.n_operands, 2);
    KT_CHECK_STR(ops[0], "s1");
    KT_CHECK_STR(ops[1], "s2");
  }
  {
    char *argv[] = {"-ec", "3", "-", "--", "-e"};
    KT_CHECK_INT(scan(argv, 5, opts, 0, trace, sizeof(trace), &a, ops), 0);
    KT_CHECK_STR(trace, "101= 99=3");
    KT_CHECK_INT(a.n_operands, 2);
    KT_CHECK_STR(ops[0], "-");
    KT_CHECK_STR(ops[1], "-e");
  }
  {
    char *argv[] = {"-x"};
    KT_CHECK_INT(scan(argv, 1, opts, 0, trace, sizeof(trace), &a, ops), -1);
    KT_CHECK_STR(a.err, "unknown option -x");
  }
  {
    char *argv[] = {"--nope=1"};
    KT_CHECK_INT(scan(argv, 1, opts, 0, trace, sizeof(trace), &a, ops), -1);
    KT_CHECK_STR(a.err, "unknown option --nope");
  }
  {
    char *argv[] = {"-c"};
    KT_CHECK_INT(scan(argv, 1, opts, 0, trace, sizeof(trace), &a, ops), -1);
    KT_CHECK_STR(a.err, "option -c needs a value");
  }
  {
    char *argv[] = {"--exit=1"};
    KT_CHECK_INT(scan(argv, 1, opts, 0, trace, sizeof(trace), &a, ops), -1);
  }
  {
    char *argv[] = {"a", "b", "c", "d", "e"};
    KT_CHECK_INT(scan(argv, 5, opts, 0, trace, sizeof(trace), &a, ops), -1);
    KT_CHECK_STR(a.err, "unexpected argument \"e\"");
  }
  { /* global scanning stops at the command */
    char *argv[] = {"-v", "consume", "-e"};
    KT_CHECK_INT(scan(argv, 3, opts, 1, trace, sizeof(trace), &a, ops), 0);
    KT_CHECK_STR(trace, "118=");
    KT_CHECK_INT(a.idx, 1);
  }
}

static void test_int(void) {
  long long v = 0;
  KT_CHECK(kc_parse_int("42", 0, 100, &v) == 0 && v == 42);
  KT_CHECK(kc_parse_int("101", 0, 100, &v) != 0);
  KT_CHECK(kc_parse_int("", 0, 100, &v) != 0);
  KT_CHECK(kc_parse_int(" 4", 0, 100, &v) != 0);
  KT_CHECK(kc_parse_int("4x", 0, 100, &v) != 0);
  KT_CHECK(kc_parse_int("99999999999999999999", 0, INT64_MAX, &v) != 0);
  KT_CHECK(kc_parse_int("-1", 0, 100, &v) != 0);
}

static void test_delim(void) {
  char d[8];
  size_t n = 0;
  KT_CHECK(kc_parse_delim("\\n", d, sizeof(d), &n) == 0 && n == 1 &&
           d[0] == '\n');
  KT_CHECK(kc_parse_delim("\\0", d, sizeof(d), &n) == 0 && n == 1 && d[0] == 0);
  KT_CHECK(kc_parse_delim("\\x1e", d, sizeof(d), &n) == 0 && n == 1 &&
           d[0] == 0x1e);
  KT_CHECK(kc_parse_delim("\\xff", d, sizeof(d), &n) == 0 && n == 1 &&
           (unsigned char)d[0] == 0xff);
  KT_CHECK(kc_parse_delim("\\036", d, sizeof(d), &n) == 0 && n == 1 &&
           d[0] == 036);
  KT_CHECK(kc_parse_delim("\\r\\n", d, sizeof(d), &n) == 0 && n == 2 &&
           !memcmp(d, "\r\n", 2));
  KT_CHECK(kc_parse_delim("--|", d, sizeof(d), &n) == 0 && n == 3 &&
           !memcmp(d, "--|", 3));
  KT_CHECK(kc_parse_delim("\\\\\\t", d, sizeof(d), &n) == 0 && n == 2 &&
           !memcmp(d, "\\\t", 2));
  KT_CHECK(kc_parse_delim("", d, sizeof(d), &n) != 0);
  KT_CHECK(kc_parse_delim("\\", d, sizeof(d), &n) != 0);
  KT_CHECK(kc_parse_delim("\\q", d, sizeof(d), &n) != 0);
  KT_CHECK(kc_parse_delim("\\xg", d, sizeof(d), &n) != 0);
  KT_CHECK(kc_parse_delim("123456789", d, sizeof(d), &n) != 0);
}

static void test_position(void) {
  kc_pos_t p;
  KT_CHECK(kc_parse_position("trim_horizon", &p) == 0 &&
           p.kind == KC_POS_TRIM_HORIZON);
  KT_CHECK(kc_parse_position("beginning", &p) == 0 &&
           p.kind == KC_POS_TRIM_HORIZON);
  KT_CHECK(kc_parse_position("latest", &p) == 0 && p.kind == KC_POS_LATEST);
  KT_CHECK(kc_parse_position("end", &p) == 0 && p.kind == KC_POS_LATEST);
  KT_CHECK(kc_parse_position(
               "at:49590338271490256608559692538361571095921575989136588898",
               &p) == 0 &&
           p.kind == KC_POS_AT_SEQ &&
           !strcmp(p.seq,
                   "49590338271490256608559692538361571095921575989136588898"));
  KT_CHECK(kc_parse_position("after:1", &p) == 0 && p.kind == KC_POS_AFTER_SEQ);
  KT_CHECK(kc_parse_position("ts:1700000000000", &p) == 0 &&
           p.kind == KC_POS_TIMESTAMP && p.ts_ms == 1700000000000LL);
  KT_CHECK(kc_parse_position("at:", &p) != 0);
  KT_CHECK(kc_parse_position("at:12a", &p) != 0);
  KT_CHECK(kc_parse_position("ts:-5", &p) != 0);
  KT_CHECK(kc_parse_position("ts:", &p) != 0);
  KT_CHECK(kc_parse_position("TRIM_HORIZON", &p) != 0);
  KT_CHECK_STR(kc_position_name(KC_POS_AFTER_SEQ), "after_sequence");
  KT_CHECK_STR(kc_position_name(KC_POS_TIMESTAMP), "at_timestamp");
}

static void test_hash_key_and_shard(void) {
  KT_CHECK(kc_is_hash_key("0"));
  KT_CHECK(kc_is_hash_key("340282366920938463463374607431768211455"));
  KT_CHECK(!kc_is_hash_key("340282366920938463463374607431768211456"));
  KT_CHECK(kc_is_hash_key("0340282366920938463463374607431768211455"));
  KT_CHECK(!kc_is_hash_key("1e5"));
  KT_CHECK(!kc_is_hash_key(""));
  char id[64];
  KT_CHECK(kc_shard_id("3", id, sizeof(id)) == 0);
  KT_CHECK_STR(id, "shardId-000000000003");
  KT_CHECK(kc_shard_id("shardId-000000000007", id, sizeof(id)) == 0);
  KT_CHECK_STR(id, "shardId-000000000007");
  KT_CHECK(kc_shard_id("-3", id, sizeof(id)) == 0);
  KT_CHECK_STR(id, "-3");
  KT_CHECK(kc_shard_id("shardId-000000000007", id, 8) != 0);
}

int main(void) {
  KT_RUN(test_scanner);
  KT_RUN(test_int);
  KT_RUN(test_delim);
  KT_RUN(test_position);
  KT_RUN(test_hash_key_and_shard);
  return KT_DONE();
}
