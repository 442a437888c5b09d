/* Decoding AWS JSON error responses, and the retry policy's arithmetic. */
#include <stdlib.h>

#include "aws/retry.h"
#include "aws/service.h"
#include "core/error.h"
#include "kt.h"

struct case_ {
  int status;
  const char *body;
  const char *header; /* x-amzn-ErrorType */
  kn_err_t code;
  const char *type;   /* expected kn_error_type, NULL for none */
  const char *in_msg; /* expected inside kn_error_string */
  int retriable;
  int throttling;
};

static const struct case_ cases[] = {
    /* Kinesis (JSON 1.1), as kinesalite and AWS answer. */
    {400,
     "{\"__type\":\"ResourceNotFoundException\",\"message\":\"Stream s under "
     "account 000000000000 not found.\"}",
     NULL, KN_ERR_RESOURCE_NOT_FOUND, "ResourceNotFoundException",
     "Stream s under account", 0, 0},
    {400,
     "{\"__type\":\"ResourceInUseException\",\"message\":\"Stream s already "
     "exists\"}",
     NULL, KN_ERR_RESOURCE_IN_USE, "ResourceInUseException", "already exists",
     0, 0},
    {400,
     "{\"__type\":\"ProvisionedThroughputExceededException\",\"message\":"
     "\"Rate exceeded for shard shardId-000000000000\"}",
     NULL, KN_ERR_PROVISIONED_THROUGHPUT_EXCEEDED,
     "ProvisionedThroughputExceededException", "Rate exceeded", 1, 1},
    {400,
     "{\"__type\":\"LimitExceededException\",\"message\":\"Rate exceeded\"}",
     NULL, KN_ERR_LIMIT_EXCEEDED, "LimitExceededException", "Rate exceeded", 1,
     1},
    {400,
     "{\"__type\":\"ExpiredIteratorException\",\"message\":\"Iterator "
     "expired.\"}",
     NULL, KN_ERR_EXPIRED_ITERATOR, "ExpiredIteratorException",
     "Iterator expired", 0, 0},
    {400, "{\"__type\":\"InvalidArgumentException\",\"message\":\"bad\"}", NULL,
     KN_ERR_INVALID_ARGUMENT, "InvalidArgumentException", "bad", 0, 0},
    {400, "{\"__type\":\"KMSThrottlingException\",\"message\":\"slow\"}", NULL,
     KN_ERR_KMS_THROTTLING, "KMSThrottlingException", "slow", 1, 1},
    {400,
     "{\"__type\":\"ValidationException\",\"message\":\"1 validation error "
     "detected\"}",
     NULL, KN_ERR_VALIDATION, "ValidationException", "1 validation error", 0,
     0},
    /* kinesis-local: unknown actions and missing members. */
    {400, "{\"__type\":\"AccessDeniedException\",\"message\":null}", NULL,
     KN_ERR_ACCESS_DENIED, "AccessDeniedException", "AccessDeniedException", 0,
     0},
    {400, "{\"__type\":\"SerializationException\"}", NULL, KN_ERR_SERIALIZATION,
     "SerializationException", "SerializationException", 0, 0},
    /* Signatures and credentials. */
    {400,
     "{\"__type\":\"UnrecognizedClientException\",\"message\":\"The security "
     "token included in the request is invalid.\"}",
     NULL, KN_ERR_AUTH, "UnrecognizedClientException", "security token", 0, 0},
    {403,
     "{\"__type\":\"InvalidSignatureException\",\"message\":\"The request "
     "signature we calculated does not match\"}",
     NULL, KN_ERR_AUTH, "InvalidSignatureException", "does not match", 0, 0},
    /* DynamoDB (JSON 1.0): namespaced types, "message" or "Message". */
    {400,
     "{\"__type\":\"com.amazonaws.dynamodb.v20120810#"
     "ConditionalCheckFailedException\",\"message\":\"The conditional request "
     "failed\"}",
     NULL, KN_ERR_CONDITIONAL_CHECK_FAILED, "ConditionalCheckFailedException",
     "conditional request failed", 0, 0},
    {400,
     "{\"__type\":\"com.amazonaws.dynamodb.v20120810#"
     "ResourceNotFoundException\",\"Message\":\"Requested resource not "
     "found\"}",
     NULL, KN_ERR_RESOURCE_NOT_FOUND, "ResourceNotFoundException",
     "Requested resource not found", 0, 0},
    {400,
     "{\"__type\":\"com.amazon.coral.availability#ThrottlingException\","
     "\"message\":\"Rate of requests exceeds the allowed throughput.\"}",
     NULL, KN_ERR_THROTTLING, "ThrottlingException", "Rate of requests", 1, 1},
    {400,
     "{\"__type\":\"com.amazonaws.dynamodb.v20120810#"
     "ProvisionedThroughputExceededException\",\"message\":\"x\"}",
     NULL, KN_ERR_PROVISIONED_THROUGHPUT_EXCEEDED,
     "ProvisionedThroughputExceededException", "x", 1, 1},
    {500,
     "{\"__type\":\"com.amazonaws.dynamodb.v20120810#InternalServerError\","
     "\"message\":\"Internal server error\"}",
     NULL, KN_ERR_INTERNAL_FAILURE, "InternalServerError",
     "Internal server error", 1, 0},
    /* The protocol's "code" member. */
    {400, "{\"code\":\"ValidationException\",\"message\":\"m\"}", NULL,
     KN_ERR_VALIDATION, "ValidationException", "m", 0, 0},
    /* Bodies without a type: the status decides. */
    {500, "", NULL, KN_ERR_INTERNAL_FAILURE, NULL, "HTTP 500", 1, 0},
    {500, NULL, NULL, KN_ERR_INTERNAL_FAILURE, NULL, "HTTP 500", 1, 0},
    {503, "", NULL, KN_ERR_SERVICE_UNAVAILABLE, NULL, "HTTP 503", 1, 0},
    {502,
     "<html>\r\n<head><title>502 Bad "
     "Gateway</title></head>\r\n<body><center><h1>502 Bad "
     "Gateway</h1></center></body></html>",
     NULL, KN_ERR_INTERNAL_FAILURE, NULL, "\"502 Bad Gateway\"", 1, 0},
    {504, "upstream request timeout", NULL, KN_ERR_INTERNAL_FAILURE, NULL,
     "upstream request timeout", 1, 0},
    {429, "", NULL, KN_ERR_THROTTLING, NULL, "HTTP 429", 1, 1},
    {413,
     "<html><head><title>413 Request Entity Too Large</title></head></html>",
     NULL, KN_ERR_HTTP, NULL, "413 Request Entity Too Large", 0, 0},
    {400, "not json at all", NULL, KN_ERR_HTTP, NULL, "not json at all", 0, 0},
    {400, "[1,2,3]", NULL, KN_ERR_HTTP, NULL, "HTTP 400", 0, 0},
    {400, "{\"__type\":42,\"message\":\"numeric type\"}", NULL, KN_ERR_HTTP,
     NULL, "numeric type", 0, 0},
    {500, "{}", NULL, KN_ERR_INTERNAL_FAILURE, NULL, "HTTP 500", 1, 0},
    /* Unknown types are kept, and retried only when the status says so. */
    {400, "{\"__type\":\"BrandNewException\",\"message\":\"n\"}", NULL,
     KN_ERR_REMOTE_OTHER, "BrandNewException", "BrandNewException: n", 0, 0},
    {500, "{\"__type\":\"BrandNewException\",\"message\":\"n\"}", NULL,
     KN_ERR_REMOTE_OTHER, "BrandNewException", "HTTP 500", 1, 0},
    /* The x-amzn-ErrorType header alone, and winning over the body. */
    {400, "",
     "ThrottlingException:http://internal.amazon.com/coral/"
     "com.amazon.coral.service/",
     KN_ERR_THROTTLING, "ThrottlingException", "HTTP 400", 1, 1},
    {400, "{\"__type\":\"SerializationException\",\"message\":\"body\"}",
     "ValidationException", KN_ERR_VALIDATION, "ValidationException", "body", 0,
     0},
    {400, "{\"message\":\"only a message\"}",
     "com.amazonaws.kinesis#ExpiredNextTokenException:http://x/",
     KN_ERR_EXPIRED_NEXT_TOKEN, "ExpiredNextTokenException", "only a message",
     0, 0},
};

static void test_decode_cases(void) {
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const struct case_ *c = &cases[i];
    kn_error_t *e = kn_svc_decode_error(
        c->status, c->body, c->body ? strlen(c->body) : 0, c->header, "rid-1");
    KT_CHECK_MSG(e != NULL, "case %zu", i);
    if (!e) continue;
    KT_CHECK_MSG(kn_error_code(e) == c->code, "case %zu: %s", i,
                 kn_err2name(kn_error_code(e)));
    const char *t = kn_error_type(e);
    KT_CHECK_MSG(c->type ? t && strcmp(t, c->type) == 0 : t == NULL,
                 "case %zu: type %s", i, t ? t : "(null)");
    KT_CHECK_MSG(strstr(kn_error_string(e), c->in_msg) != NULL,
                 "case %zu: \"%s\"", i, kn_error_string(e));
    KT_CHECK_MSG(strstr(kn_error_string(e), "rid-1") != NULL, "case %zu", i);
    KT_CHECK_MSG(kn_error_is_retriable(e) == c->retriable, "case %zu", i);
    KT_CHECK_MSG(kn_error_is_throttling(e) == c->throttling, "case %zu", i);
    KT_CHECK_INT(kn_error_http_status(e), c->status);
    KT_CHECK_STR(kn_error_request_id(e), "rid-1");
    kn_error_destroy(e);
  }
}

static void test_decode_snippet(void) {
  /* Long bodies with control characters come out short and on one line. */
  char body[2000];
  for (size_t i = 0; i < sizeof(body) - 1; i++)
    body[i] = i % 50 == 0 ? '\n' : 'a';
  body[sizeof(body) - 1] = 0;
  kn_error_t *e = kn_svc_decode_error(502, body, strlen(body), NULL, NULL);
  const char *s = kn_error_string(e);
  KT_CHECK(strchr(s, '\n') == NULL);
  KT_CHECK(strlen(s) < 300);
  KT_CHECK(strstr(s, "...") != NULL);
  KT_CHECK(kn_error_request_id(e) == NULL);
  kn_error_destroy(e);
  /* Binary garbage does not break the message. */
  const char bin[] = {'\x01', '\xff', '\x00', '{', 'x'};
  e = kn_svc_decode_error(500, bin, sizeof(bin), NULL, NULL);
  KT_CHECK_INT(kn_error_code(e), KN_ERR_INTERNAL_FAILURE);
  kn_error_destroy(e);
}

/* Nothing a terminal acts on gets from a server into an error. */
static void test_sanitize(void) {
  static const struct {
    const char *in, *out;
  } texts[] = {
      {"", ""},
      {"plain text, caf\xC3\xA9 \xE2\x80\x94 ok",
       "plain text, caf\xC3\xA9 \xE2\x80\x94 ok"},
      {"a\x1b[31mb\x07", "a?[31mb?"},
      {"line\r\nnext\tcol", "line  next col"},
      {"del\x7f", "del?"},
      {"c1 \xC2\x9B"
       "2J \xC2\x85 \xC2\xA0",
       "c1 ?2J ? \xC2\xA0"},
      {"bidi \xE2\x80\xAE \xE2\x81\xA6 \xE2\x80\x8F", "bidi ? ? ?"},
      {"bad \xff\xfe \xC0\x80 \xED\xA0\x80 \xF4\x90\x80\x80",
       "bad ?? ?? ??? ????"},
      {"cut \xE2\x82", "cut ??"},
  };
  for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", texts[i].in);
    size_t n = kn_text_sanitize(buf);
    KT_CHECK_STR(buf, texts[i].out);
    KT_CHECK_INT(n, strlen(texts[i].out));
  }
  KT_CHECK_INT(kn_text_sanitize(NULL), 0);

  /* A JSON error with escapes in the type, message and request id. */
  const char *body =
      "{\"__type\":\"Evil\\u001b[2JException\","
      "\"message\":\"\\u001b]0;owned\\u0007 red\\u009b\\nfake\"}";
  kn_error_t *e =
      kn_svc_decode_error(400, body, strlen(body), NULL, "id\x1b[1m");
  KT_CHECK_STR(
      kn_error_string(e),
      "Evil?[2JException: ?]0;owned? red? fake (HTTP 400, request id id?[1m)");
  KT_CHECK_STR(kn_error_type(e), "Evil?[2JException");
  KT_CHECK_STR(kn_error_request_id(e), "id?[1m");
  e = kn_error_prefix(e, "shard %s", "s\x1b");
  KT_CHECK_STR(kn_error_string(e),
               "shard s?: Evil?[2JException: ?]0;owned? red? fake (HTTP 400, "
               "request id id?[1m)");
  kn_error_destroy(e);
  /* A body that is not JSON, nor UTF-8. */
  const char raw[] = "\x1b[2J\xC2\x9B\xff oops";
  e = kn_svc_decode_error(400, raw, sizeof(raw) - 1, NULL, NULL);
  KT_CHECK_STR(
      kn_error_string(e),
      "HTTP error: unexpected response body \"[2J?? oops\" (HTTP 400)");
  kn_error_destroy(e);
  /* Local errors quoting a server's text too. */
  e = kn_error_new(KN_ERR__BAD_MSG, "stream \"%s\"", "x\x1b]8;;");
  KT_CHECK_STR(kn_error_string(e), "stream \"x?]8;;\"");
  kn_error_destroy(e);
}

/* The shared out-of-memory error: what constructors return instead of a
 * NULL that would read as success; never freed nor changed. */
static void test_nomem_error(void) {
  kn_error_t *e = kn_error_nomem();
  KT_CHECK_INT(kn_error_code(e), KN_ERR__NOMEM);
  KT_CHECK_STR(kn_error_string(e), "out of memory");
  KT_CHECK(kn_error_prefix(e, "context %d", 1) == e);
  KT_CHECK_STR(kn_error_string(e), "out of memory");
  KT_CHECK(kn_error_copy(e) == e);
  kn_error_set_retriable(e, 1);
  KT_CHECK(!kn_error_is_retriable(e));
  kn_error_destroy(e);
  kn_error_destroy(e);
  KT_CHECK_INT(kn_error_code(kn_error_nomem()), KN_ERR__NOMEM);
}

static void test_budget(void) {
  kn_retry_budget_t b;
  kn_retry_budget_init(&b, 500);
  kn_error_t *e500 = kn_error_remote(500, NULL, NULL, NULL);
  kn_error_t *tmo = kn_error_new(KN_ERR__TIMED_OUT, "timed out");
  int n = 0;
  while (kn_retry_budget_take(&b, e500) == 0) n++;
  KT_CHECK_INT(n, 100); /* 500 tokens, 5 a retry */
  KT_CHECK_INT(b.tokens, 0);
  for (int i = 0; i < 9; i++) kn_retry_budget_success(&b);
  KT_CHECK_INT(kn_retry_budget_take(&b, tmo), -1); /* 9 < 10 */
  KT_CHECK_INT(kn_retry_budget_take(&b, e500), 0);
  KT_CHECK_INT(b.tokens, 4);
  for (int i = 0; i < 1000; i++) kn_retry_budget_success(&b);
  KT_CHECK_INT(b.tokens, 500); /* capped */
  KT_CHECK_INT(kn_retry_budget_take(&b, tmo), 0);
  KT_CHECK_INT(b.tokens, 490);
  kn_retry_budget_init(&b, 0);
  KT_CHECK_INT(kn_retry_budget_take(&b, e500), -1);
  kn_error_destroy(e500);
  kn_error_destroy(tmo);
}

static void test_decide(void) {
  kn_retry_policy_t p = {.max_attempts = 4,
                         .base_ms = 100,
                         .throttle_base_ms = 500,
                         .max_ms = 1000};
  kn_retry_budget_t b;
  kn_retry_budget_init(&b, 500);
  kn_error_t *e500 = kn_error_remote(500, NULL, NULL, NULL);
  kn_error_t *thr =
      kn_error_remote(400, "ProvisionedThroughputExceededException", "x", NULL);
  kn_error_t *nf = kn_error_remote(400, "ResourceNotFoundException", "x", NULL);
  kn_error_t *tr = kn_error_new(KN_ERR__TRANSPORT, "reset");
  int64_t d = -1;
  KT_CHECK_INT(kn_retry_decide(&p, &b, nf, 1, &d), KN_RETRY_FATAL);
  KT_CHECK_INT(b.tokens, 500); /* no charge when not retrying */
  KT_CHECK_INT(kn_retry_decide(&p, &b, e500, 4, &d), KN_RETRY_ATTEMPTS);
  KT_CHECK_INT(kn_retry_decide(&p, &b, tr, 1, &d), KN_RETRY);
  KT_CHECK_INT(b.tokens, 495);
  /* Delays stay under the ceiling of each attempt and use its range. */
  static const int64_t ceil500[] = {0, 100, 200, 400, 800, 1000, 1000};
  static const int64_t ceilthr[] = {0, 500, 1000, 1000};
  for (int attempt = 1; attempt <= 6; attempt++) {
    p.max_attempts = 100;
    int64_t lo = 1 << 30, hi = -1;
    for (int i = 0; i < 400; i++) {
      kn_retry_budget_init(&b, 500);
      KT_CHECK_INT(kn_retry_decide(&p, &b, e500, attempt, &d), KN_RETRY);
      if (d < lo) lo = d;
      if (d > hi) hi = d;
    }
    KT_CHECK_MSG(lo >= 0 && hi <= ceil500[attempt], "attempt %d: %lld..%lld",
                 attempt, (long long)lo, (long long)hi);
    KT_CHECK_MSG(hi > ceil500[attempt] / 2, "attempt %d: max %lld", attempt,
                 (long long)hi);
    KT_CHECK_MSG(lo < ceil500[attempt] / 2, "attempt %d: min %lld", attempt,
                 (long long)lo);
  }
  for (int attempt = 1; attempt <= 3; attempt++) {
    int64_t hi = -1;
    for (int i = 0; i < 400; i++) {
      kn_retry_budget_init(&b, 500);
      kn_retry_decide(&p, &b, thr, attempt, &d);
      if (d > hi) hi = d;
    }
    KT_CHECK_MSG(hi <= ceilthr[attempt] && hi > ceilthr[attempt] / 2,
                 "throttled %d: %lld", attempt, (long long)hi);
  }
  /* An empty budget reports at once. */
  kn_retry_budget_init(&b, 7);
  KT_CHECK_INT(kn_retry_decide(&p, &b, e500, 1, &d), KN_RETRY);
  KT_CHECK_INT(kn_retry_decide(&p, &b, e500, 2, &d), KN_RETRY_NO_BUDGET);
  kn_error_destroy(e500);
  kn_error_destroy(thr);
  kn_error_destroy(nf);
  kn_error_destroy(tr);
}

int main(void) {
  KT_RUN(test_decode_cases);
  KT_RUN(test_decode_snippet);
  KT_RUN(test_sanitize);
  KT_RUN(test_nomem_error);
  KT_RUN(test_budget);
  KT_RUN(test_decide);
  return KT_DONE();
}
