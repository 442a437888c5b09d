#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn/version.h"
#include "util/str.h"

const char *kn_version_str(void) { return KN_VERSION_STR; }
int kn_version_num(void) { return KN_VERSION_NUM; }

struct err_desc {
  kn_err_t code;
  const char *name;
  const char *str;
};

static const struct err_desc err_descs[] = {
    {KN_ERR__FAIL, "_FAIL", "Local failure"},
    {KN_ERR__INVALID_ARG, "_INVALID_ARG", "Invalid argument"},
    {KN_ERR__NOMEM, "_NOMEM", "Out of memory"},
    {KN_ERR__TIMED_OUT, "_TIMED_OUT", "Timed out"},
    {KN_ERR__TRANSPORT, "_TRANSPORT", "Transport failure"},
    {KN_ERR__BAD_MSG, "_BAD_MSG", "Malformed response"},
    {KN_ERR__QUEUE_FULL, "_QUEUE_FULL", "Queue full"},
    {KN_ERR__CONF, "_CONF", "Invalid configuration"},
    {KN_ERR__CREDENTIALS, "_CREDENTIALS", "No usable credentials"},
    {KN_ERR__STATE, "_STATE", "Invalid state"},
    {KN_ERR__DESTROY, "_DESTROY", "Handle is closing"},
    {KN_ERR__MSG_TIMED_OUT, "_MSG_TIMED_OUT", "Record time-to-live expired"},
    {KN_ERR__CORRUPT, "_CORRUPT", "Corrupt data"},
    {KN_ERR__LEASE_LOST, "_LEASE_LOST", "Lease lost"},
    {KN_ERR__IO, "_IO", "Local I/O error"},
    {KN_ERR__NOT_FOUND, "_NOT_FOUND", "Not found"},
    {KN_ERR__UNSUPPORTED, "_UNSUPPORTED", "Not supported by the server"},
    {KN_ERR__PARTIAL, "_PARTIAL", "Some items failed"},
    {KN_ERR__HANDOFF, "_HANDOFF", "Lease handed to another worker"},
    {KN_ERR_NO_ERROR, "NO_ERROR", "Success"},
    {KN_ERR_RESOURCE_NOT_FOUND, "RESOURCE_NOT_FOUND", "Resource not found"},
    {KN_ERR_RESOURCE_IN_USE, "RESOURCE_IN_USE", "Resource in use"},
    {KN_ERR_LIMIT_EXCEEDED, "LIMIT_EXCEEDED", "Limit exceeded"},
    {KN_ERR_PROVISIONED_THROUGHPUT_EXCEEDED, "PROVISIONED_THROUGHPUT_EXCEEDED",
     "Provisioned throughput exceeded"},
    {KN_ERR_THROTTLING, "THROTTLING", "Request throttled"},
    {KN_ERR_EXPIRED_ITERATOR, "EXPIRED_ITERATOR", "Shard iterator expired"},
    {KN_ERR_EXPIRED_NEXT_TOKEN, "EXPIRED_NEXT_TOKEN",
     "Pagination token expired"},
    {KN_ERR_INVALID_ARGUMENT, "INVALID_ARGUMENT", "Invalid argument (remote)"},
    {KN_ERR_VALIDATION, "VALIDATION", "Request failed validation"},
    {KN_ERR_SERIALIZATION, "SERIALIZATION", "Request could not be parsed"},
    {KN_ERR_ACCESS_DENIED, "ACCESS_DENIED", "Access denied"},
    {KN_ERR_AUTH, "AUTH", "Credentials or signature rejected"},
    {KN_ERR_KMS, "KMS", "KMS key unusable"},
    {KN_ERR_KMS_THROTTLING, "KMS_THROTTLING", "KMS throttled"},
    {KN_ERR_INTERNAL_FAILURE, "INTERNAL_FAILURE", "Internal server failure"},
    {KN_ERR_SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE", "Service unavailable"},
    {KN_ERR_CONDITIONAL_CHECK_FAILED, "CONDITIONAL_CHECK_FAILED",
     "Conditional check failed"},
    {KN_ERR_HTTP, "HTTP", "HTTP error"},
    {KN_ERR_REMOTE_OTHER, "REMOTE_OTHER", "Service error"},
};

static const struct err_desc *err_find(kn_err_t err) {
  for (size_t i = 0; i < sizeof(err_descs) / sizeof(err_descs[0]); i++)
    if (err_descs[i].code == err) return &err_descs[i];
  return NULL;
}

const char *kn_err2str(kn_err_t err) {
  const struct err_desc *d = err_find(err);
  return d ? d->str : "Unknown error code";
}

const char *kn_err2name(kn_err_t err) {
  const struct err_desc *d = err_find(err);
  return d ? d->name : "UNKNOWN";
}

/* AWS error types, namespace stripped, and what they mean to us. */
static const struct {
  const char *type;
  kn_err_t code;
} aws_types[] = {
    {"ResourceNotFoundException", KN_ERR_RESOURCE_NOT_FOUND},
    {"ResourceInUseException", KN_ERR_RESOURCE_IN_USE},
    {"LimitExceededException", KN_ERR_LIMIT_EXCEEDED},
    {"ProvisionedThroughputExceededException",
     KN_ERR_PROVISIONED_THROUGHPUT_EXCEEDED},
    {"ThrottlingException", KN_ERR_THROTTLING},
    {"Throttling", KN_ERR_THROTTLING},
    {"ThrottledException", KN_ERR_THROTTLING},
    {"RequestLimitExceeded", KN_ERR_THROTTLING},
    {"TooManyRequestsException", KN_ERR_THROTTLING},
    {"SlowDown", KN_ERR_THROTTLING},
    {"ExpiredIteratorException", KN_ERR_EXPIRED_ITERATOR},
    {"ExpiredNextTokenException", KN_ERR_EXPIRED_NEXT_TOKEN},
    {"InvalidArgumentException", KN_ERR_INVALID_ARGUMENT},
    {"ValidationException", KN_ERR_VALIDATION},
    {"ValidationError", KN_ERR_VALIDATION},
    {"SerializationException", KN_ERR_SERIALIZATION},
    {"AccessDeniedException", KN_ERR_ACCESS_DENIED},
    {"AccessDenied", KN_ERR_ACCESS_DENIED},
    {"UnrecognizedClientException", KN_ERR_AUTH},
    {"InvalidSignatureException", KN_ERR_AUTH},
    {"SignatureDoesNotMatch", KN_ERR_AUTH},
    {"IncompleteSignatureException", KN_ERR_AUTH},
    {"MissingAuthenticationTokenException", KN_ERR_AUTH},
    {"MissingAuthenticationToken", KN_ERR_AUTH},
    {"ExpiredTokenException", KN_ERR_AUTH},
    {"ExpiredToken", KN_ERR_AUTH},
    {"InvalidClientTokenId", KN_ERR_AUTH},
    {"KMSDisabledException", KN_ERR_KMS},
    {"KMSInvalidStateException", KN_ERR_KMS},
    {"KMSAccessDeniedException", KN_ERR_KMS},
    {"KMSNotFoundException", KN_ERR_KMS},
    {"KMSOptInRequired", KN_ERR_KMS},
    {"KMSThrottlingException", KN_ERR_KMS_THROTTLING},
    {"InternalFailure", KN_ERR_INTERNAL_FAILURE},
    {"InternalFailureException", KN_ERR_INTERNAL_FAILURE},
    {"InternalServerError", KN_ERR_INTERNAL_FAILURE},
    {"InternalServerErrorException", KN_ERR_INTERNAL_FAILURE},
    {"InternalError", KN_ERR_INTERNAL_FAILURE},
    {"ServiceUnavailable", KN_ERR_SERVICE_UNAVAILABLE},
    {"ServiceUnavailableException", KN_ERR_SERVICE_UNAVAILABLE},
    {"ConditionalCheckFailedException", KN_ERR_CONDITIONAL_CHECK_FAILED},
};

kn_err_t kn_err_from_aws_type(const char *type) {
  if (!type || !*type) return KN_ERR_HTTP;
  for (size_t i = 0; i < sizeof(aws_types) / sizeof(aws_types[0]); i++)
    if (strcmp(aws_types[i].type, type) == 0) return aws_types[i].code;
  return KN_ERR_REMOTE_OTHER;
}

static int code_is_throttling(kn_err_t code) {
  return code == KN_ERR_PROVISIONED_THROUGHPUT_EXCEEDED ||
         code == KN_ERR_THROTTLING || code == KN_ERR_LIMIT_EXCEEDED ||
         code == KN_ERR_KMS_THROTTLING;
}

static int code_is_retriable(kn_err_t code, int http_status) {
  switch (code) {
    case KN_ERR__TIMED_OUT:
    case KN_ERR__TRANSPORT:
    case KN_ERR__BAD_MSG:
    case KN_ERR_INTERNAL_FAILURE:
    case KN_ERR_SERVICE_UNAVAILABLE:
      return 1;
    case KN_ERR_HTTP:
    case KN_ERR_REMOTE_OTHER:
      return http_status >= 500 || http_status == 429;
    default:
      return code_is_throttling(code);
  }
}

/* Returned instead of NULL when an error cannot be allocated. */
static kn_error_t oom_error = {.code = KN_ERR__NOMEM,
                               .string = (char *)"out of memory"};

kn_error_t *kn_error_nomem(void) { return &oom_error; }

void kn_error_set_retriable(kn_error_t *error, int retriable) {
  if (error && error != &oom_error) error->retriable = retriable;
}

/* Every message may carry a server's text (an error message, a name it
 * returned), and a message ends up on terminals and in logs: control and
 * escape characters never get that far. */
static kn_error_t *error_alloc(kn_err_t code, char *string) {
  if (!string) return &oom_error;
  kn_error_t *e = calloc(1, sizeof(*e));
  if (!e) {
    free(string);
    return &oom_error;
  }
  kn_text_sanitize(string);
  e->code = code;
  e->string = string;
  e->throttling = code_is_throttling(code);
  e->retriable = code_is_retriable(code, 0);
  return e;
}

kn_error_t *kn_error_new(kn_err_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = kn_vasprintf(fmt, ap);
  va_end(ap);
  return error_alloc(code, s);
}

kn_error_t *kn_error_remote(int http_status, const char *type,
                            const char *message, const char *request_id) {
  const char *bare = type;
  if (bare) {
    /* "namespace#Type" (DynamoDB) and "Type:http://..." (some services) */
    const char *hash = strrchr(bare, '#');
    if (hash) bare = hash + 1;
  }
  char *bare_dup = NULL;
  if (bare && *bare) {
    size_t n = strcspn(bare, ":");
    bare_dup = kn_strndup(bare, n);
    if (!bare_dup) return &oom_error;
    kn_text_sanitize(bare_dup);
  }
  kn_err_t code = kn_err_from_aws_type(bare_dup);
  if (code == KN_ERR_HTTP && http_status >= 500)
    code = http_status == 503 ? KN_ERR_SERVICE_UNAVAILABLE
                              : KN_ERR_INTERNAL_FAILURE;
  if (code == KN_ERR_HTTP && http_status == 429) code = KN_ERR_THROTTLING;

  char status[48] = "";
  if (http_status) snprintf(status, sizeof(status), "HTTP %d", http_status);
  char *s = kn_asprintf(
      "%s%s%s (%s%s%s)", bare_dup ? bare_dup : kn_err2str(code),
      message && *message ? ": " : "", message ? message : "", status,
      request_id ? ", request id " : "", request_id ? request_id : "");
  kn_error_t *e = error_alloc(code, s);
  if (e == &oom_error) {
    free(bare_dup);
    return e;
  }
  e->type = bare_dup;
  e->http_status = http_status;
  e->request_id = request_id ? strdup(request_id) : NULL;
  kn_text_sanitize(e->request_id);
  e->retriable = code_is_retriable(code, http_status);
  return e;
}

kn_error_t *kn_error_prefix(kn_error_t *error, const char *fmt, ...) {
  if (!error || error == &oom_error) return error;
  va_list ap;
  va_start(ap, fmt);
  char *pre = kn_vasprintf(fmt, ap);
  va_end(ap);
  if (!pre) return error;
  char *s = kn_asprintf("%s: %s", pre, error->string);
  free(pre);
  if (s) {
    kn_text_sanitize(s);
    free(error->string);
    error->string = s;
  }
  return error;
}

kn_error_t *kn_error_copy(const kn_error_t *error) {
  if (!error) return NULL;
  if (error == &oom_error) return &oom_error;
  kn_error_t *e = calloc(1, sizeof(*e));
  if (!e) return &oom_error;
  *e = *error;
  e->string = strdup(error->string);
  e->type = error->type ? strdup(error->type) : NULL;
  e->request_id = error->request_id ? strdup(error->request_id) : NULL;
  if (!e->string || (error->type && !e->type) ||
      (error->request_id && !e->request_id)) {
    kn_error_destroy(e);
    return &oom_error;
  }
  return e;
}

kn_err_t kn_error_code_of(const kn_error_t *error) {
  return error ? error->code : KN_ERR__NOMEM;
}

kn_err_t kn_error_to_errstr(kn_error_t *error, char *errstr, size_t size) {
  kn_err_t code = kn_error_code_of(error);
  if (errstr && size)
    snprintf(errstr, size, "%s", error ? error->string : "out of memory");
  kn_error_destroy(error);
  return code;
}

kn_err_t kn_error_code(const kn_error_t *error) {
  return error ? error->code : KN_ERR_NO_ERROR;
}
const char *kn_error_string(const kn_error_t *error) {
  return error ? error->string : "Success";
}
const char *kn_error_type(const kn_error_t *error) {
  return error ? error->type : NULL;
}
int kn_error_http_status(const kn_error_t *error) {
  return error ? error->http_status : 0;
}
const char *kn_error_request_id(const kn_error_t *error) {
  return error ? error->request_id : NULL;
}
int kn_error_is_retriable(const kn_error_t *error) {
  return error ? error->retriable : 0;
}
int kn_error_is_throttling(const kn_error_t *error) {
  return error ? error->throttling : 0;
}

void kn_error_destroy(kn_error_t *error) {
  if (!error || error == &oom_error) return;
  free(error->type);
  free(error->request_id);
  free(error->string);
  free(error);
}
