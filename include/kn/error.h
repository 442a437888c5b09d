/* Error values.
 *
 * Every fallible call reports a kn_err_t code, and most also give a
 * kn_error_t that carries the full story: a human message, the AWS error
 * type, HTTP status, request id and whether retrying could help.
 *
 * Codes below zero are local (raised by the library itself); codes above
 * zero are remote (the service said so). */
#ifndef KN_ERROR_H
#define KN_ERROR_H

#include <stddef.h>

#include "kn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_err_t {
  /* Local errors. */
  KN_ERR__FAIL = -100,         /* generic local failure */
  KN_ERR__INVALID_ARG = -99,   /* invalid argument to an API call */
  KN_ERR__NOMEM = -98,         /* out of memory */
  KN_ERR__TIMED_OUT = -97,     /* did not complete within the timeout */
  KN_ERR__TRANSPORT = -96,     /* connect, DNS, TLS or connection reset */
  KN_ERR__BAD_MSG = -95,       /* malformed or truncated response */
  KN_ERR__QUEUE_FULL = -94,    /* a bounded queue is full: retry later */
  KN_ERR__CONF = -93,          /* invalid or inconsistent configuration */
  KN_ERR__CREDENTIALS = -92,   /* no usable credentials */
  KN_ERR__STATE = -91,         /* not valid in the handle's current state */
  KN_ERR__DESTROY = -90,       /* the handle is closing */
  KN_ERR__MSG_TIMED_OUT = -89, /* a record's time-to-live ran out */
  KN_ERR__CORRUPT = -88,       /* corrupt aggregated record or frame */
  KN_ERR__LEASE_LOST = -87,    /* the shard's lease is no longer held */
  KN_ERR__IO = -86,            /* local file or database I/O */
  KN_ERR__NOT_FOUND = -85,     /* a local lookup found nothing */
  KN_ERR__UNSUPPORTED = -84,   /* the server does not support this */
  KN_ERR__PARTIAL = -83,       /* some items of a batch failed */
  KN_ERR__HANDOFF = -82,       /* the lease is handed to another worker */

  KN_ERR_NO_ERROR = 0,

  /* Remote errors, from the service's error type. */
  KN_ERR_RESOURCE_NOT_FOUND = 1,
  KN_ERR_RESOURCE_IN_USE = 2,
  KN_ERR_LIMIT_EXCEEDED = 3,
  KN_ERR_PROVISIONED_THROUGHPUT_EXCEEDED = 4,
  KN_ERR_THROTTLING = 5, /* Throttling, RequestLimitExceeded, ... */
  KN_ERR_EXPIRED_ITERATOR = 6,
  KN_ERR_EXPIRED_NEXT_TOKEN = 7,
  KN_ERR_INVALID_ARGUMENT = 8,
  KN_ERR_VALIDATION = 9,
  KN_ERR_SERIALIZATION = 10,
  KN_ERR_ACCESS_DENIED = 11,
  KN_ERR_AUTH = 12, /* signature or credentials rejected */
  KN_ERR_KMS = 13,  /* KMS key disabled, not found, denied */
  KN_ERR_KMS_THROTTLING = 14,
  KN_ERR_INTERNAL_FAILURE = 15, /* InternalFailure or a bare 5xx */
  KN_ERR_SERVICE_UNAVAILABLE = 16,
  KN_ERR_CONDITIONAL_CHECK_FAILED = 17,
  KN_ERR_HTTP = 18,        /* an HTTP error with no AWS error type */
  KN_ERR_REMOTE_OTHER = 19 /* another error type: see kn_error_type() */
} kn_err_t;

/* Static strings; never NULL. */
KN_API const char *kn_err2str(kn_err_t err);  /* "Resource not found" */
KN_API const char *kn_err2name(kn_err_t err); /* "RESOURCE_NOT_FOUND" */

typedef struct kn_error_s kn_error_t;

KN_API kn_err_t kn_error_code(const kn_error_t *error);
/* The whole human message, with the error type, HTTP status and request id
 * when there are some.  Owned by the error. */
KN_API const char *kn_error_string(const kn_error_t *error);
/* The AWS error type without its namespace ("ResourceNotFoundException"),
 * or NULL for a local error.  Owned by the error. */
KN_API const char *kn_error_type(const kn_error_t *error);
/* HTTP status, or 0 when no response was received. */
KN_API int kn_error_http_status(const kn_error_t *error);
/* x-amzn-RequestId of the failed call, or NULL.  Owned by the error. */
KN_API const char *kn_error_request_id(const kn_error_t *error);
/* Non-zero if the same call may succeed when retried later. */
KN_API int kn_error_is_retriable(const kn_error_t *error);
/* Non-zero if the service asked the client to slow down. */
KN_API int kn_error_is_throttling(const kn_error_t *error);
/* Accepts NULL. */
KN_API void kn_error_destroy(kn_error_t *error);

/* Makes text from a server safe to show on a terminal, in place, on one
 * line: tab, CR and LF become a space; other control characters (C0, DEL,
 * C1), Unicode direction overrides and bytes that are not UTF-8 each
 * become one '?'.  Returns the
 * new length (never longer).  Error strings, error types, request ids and
 * log lines are already passed through it; for other text a program
 * prints (stream names, lease owners, ...).  Accepts NULL (returns 0). */
KN_API size_t kn_text_sanitize(char *s);

#ifdef __cplusplus
}
#endif
#endif
