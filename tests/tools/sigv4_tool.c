/* sigv4_tool: signs requests given as JSON lines on stdin and prints the
 * results as JSON lines, for tests/integration/test_sigv4_botocore.py.
 *
 * Input, one object per line:
 *   {"id": 1, "method": "POST", "path": "/", "query": "a=1" | null,
 *    "headers": [["Host", "example.com"], ...], "payload_hex": "00ff",
 *    "payload_hash": null | "...", "access_key": "...", "secret_key": "...",
 *    "token": null | "...", "region": "us-east-1", "service": "kinesis",
 *    "epoch": 1440938160}
 * Output, one object per input line:
 *   {"id": 1, "rc": 0, "canonical_request": "...", "string_to_sign": "...",
 *    "authorization": "...", "amz_date": "...", "payload_hash": "..."}
 *   or {"id": 1, "rc": -1} when the signer refuses the request.
 *
 * "sigv4_tool --bench [N]" instead times N signatures of a Kinesis
 * GetRecords request (process CPU time), without and with a 1 KB session
 * token. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aws/sigv4.h"
#include "util/hex.h"

static const char *str_or_null(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

static int set_str(json_t *o, const char *key, const char *s) {
  json_t *v = json_string(s);
  return v ? json_object_set_new(o, key, v) : -1;
}

/* Signs one request; prints its result line.  Returns 0, or -1 when the
 * input is malformed (the tool then stops). */
static int sign_line(const char *line, size_t lineno) {
  json_error_t jerr;
  json_t *in = json_loads(line, 0, &jerr);
  if (!json_is_object(in)) {
    fprintf(stderr, "sigv4_tool: line %zu: %s\n", lineno, jerr.text);
    json_decref(in);
    return -1;
  }
  int ret = -1;
  kn_sigv4_header_t *hs = NULL;
  unsigned char *payload = NULL;
  json_t *headers = json_object_get(in, "headers");
  size_t nh = json_is_array(headers) ? json_array_size(headers) : 0;
  const char *hex = str_or_null(in, "payload_hex");
  size_t plen = hex ? strlen(hex) / 2 : 0;
  hs = calloc(nh ? nh : 1, sizeof(*hs));
  payload = malloc(plen ? plen : 1);
  if (!hs || !payload || (hex && kn_hex_decode(payload, hex, plen))) {
    fprintf(stderr, "sigv4_tool: line %zu: bad payload\n", lineno);
    goto out;
  }
  for (size_t i = 0; i < nh; i++) {
    json_t *pair = json_array_get(headers, i);
    hs[i].name = json_string_value(json_array_get(pair, 0));
    hs[i].value = json_string_value(json_array_get(pair, 1));
  }
  kn_sigv4_request_t req = {str_or_null(in, "method"),
                            str_or_null(in, "path"),
                            str_or_null(in, "query"),
                            hs,
                            nh,
                            plen ? payload : NULL,
                            plen,
                            str_or_null(in, "payload_hash")};
  kn_sigv4_creds_t creds = {str_or_null(in, "access_key"),
                            str_or_null(in, "secret_key"),
                            str_or_null(in, "token")};
  kn_sigv4_result_t res;
  int rc = kn_sigv4_sign(
      &req, &creds, str_or_null(in, "region"), str_or_null(in, "service"),
      (long long)json_integer_value(json_object_get(in, "epoch")), &res);

  json_t *o = json_object();
  if (!o) goto out;
  json_object_set(o, "id", json_object_get(in, "id"));
  json_object_set_new(o, "rc", json_integer(rc));
  if (rc == 0 && (set_str(o, "canonical_request", res.canonical_request) ||
                  set_str(o, "string_to_sign", res.string_to_sign) ||
                  set_str(o, "authorization", res.authorization) ||
                  set_str(o, "amz_date", res.amz_date) ||
                  set_str(o, "payload_hash", res.payload_hash))) {
    fprintf(stderr, "sigv4_tool: line %zu: output is not UTF-8\n", lineno);
    json_decref(o);
    kn_sigv4_result_clear(&res);
    goto out;
  }
  kn_sigv4_result_clear(&res);
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!s) goto out;
  puts(s);
  free(s);
  ret = 0;
out:
  free(hs);
  free(payload);
  json_decref(in);
  return ret;
}

static double bench_one(const char *token, int n) {
  static const char body[] =
      "{\"ShardIterator\":\"AAAAAAAAAAHf65JkbV8ZJz3Y9EXAMPLE\",\"Limit\":1000}";
  const kn_sigv4_header_t h[] = {
      {"Host", "kinesis.eu-west-1.amazonaws.com"},
      {"Content-Type", "application/x-amz-json-1.1"},
      {"X-Amz-Target", "Kinesis_20131202.GetRecords"},
      {"User-Agent", "libkinesis/0.1.0"},
      {"Content-Length", "65"}};
  kn_sigv4_request_t req = {"POST",           "/", NULL, h, 5, body,
                            sizeof(body) - 1, NULL};
  kn_sigv4_creds_t creds = {"AKIAIOSFODNN7EXAMPLE",
                            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", token};
  kn_sigv4_result_t out;
  struct timespec a, b;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  for (int i = 0; i < n; i++) {
    if (kn_sigv4_sign(&req, &creds, "eu-west-1", "kinesis", 1700000000LL + i,
                      &out))
      return -1;
    kn_sigv4_result_clear(&out);
  }
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
  return ((double)(b.tv_sec - a.tv_sec) * 1e9 +
          (double)(b.tv_nsec - a.tv_nsec)) /
         1e3 / n;
}

static int bench(int n) {
  char token[1025];
  for (size_t i = 0; i < sizeof(token) - 1; i++)
    token[i] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz/+="[i % 55];
  token[sizeof(token) - 1] = '\0';
  double plain = bench_one(NULL, n), with_token = bench_one(token, n);
  if (plain < 0 || with_token < 0) return 1;
  printf(
      "GetRecords signature: %.2f us CPU; with a 1 KB session token: %.2f us "
      "(%d runs)\n",
      plain, with_token, n);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--bench") == 0)
    return bench(argc >= 3 ? atoi(argv[2]) > 0 ? atoi(argv[2]) : 1 : 100000);
  if (argc != 1) {
    fprintf(stderr,
            "usage: sigv4_tool < requests.jsonl | sigv4_tool --bench [N]\n");
    return 2;
  }
  char *line = NULL;
  size_t cap = 0, lineno = 0;
  ssize_t len;
  int rc = 0;
  while ((len = getline(&line, &cap, stdin)) >= 0) {
    lineno++;
    if (len <= 1) continue;
    if (sign_line(line, lineno)) {
      rc = 1;
      break;
    }
  }
  free(line);
  if (fflush(stdout)) rc = 1;
  return rc;
}
