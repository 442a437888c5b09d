/* AWS Signature Version 4, as a pure function: request in, headers out.
 * No clock, no I/O: the caller passes the time. */
#ifndef KN_AWS_SIGV4_H
#define KN_AWS_SIGV4_H

#include <stddef.h>

typedef struct kn_sigv4_header {
  const char *name;  /* any case */
  const char *value; /* as sent; folded and trimmed for signing */
} kn_sigv4_header_t;

typedef struct kn_sigv4_request {
  const char *method;   /* "POST" */
  const char *path;     /* the path as sent on the wire, e.g. "/" */
  const char *query;    /* raw query string without '?', or NULL */
  const kn_sigv4_header_t *headers; /* must include Host */
  size_t n_headers;
  const void *payload;
  size_t payload_len;
  /* Hex SHA-256 of the payload when already known, or "UNSIGNED-PAYLOAD";
   * NULL: computed from payload. */
  const char *payload_hash;
} kn_sigv4_request_t;

typedef struct kn_sigv4_creds {
  const char *access_key_id;
  const char *secret_access_key;
  const char *session_token; /* NULL when none */
} kn_sigv4_creds_t;

/* Headers to add to the request.  Buffers are inline: no ownership. */
typedef struct kn_sigv4_result {
  char authorization[1024];  /* value of the Authorization header */
  char amz_date[17];         /* value of X-Amz-Date: YYYYMMDDTHHMMSSZ */
  char payload_hash[65];     /* hex SHA-256 used (for X-Amz-Content-Sha256) */
  /* Intermediate strings, for tests and debug logs. */
  char *canonical_request;   /* malloc'ed; free with kn_sigv4_result_clear */
  char *string_to_sign;      /* malloc'ed */
} kn_sigv4_result_t;

/* Signs req for service/region at epoch_s (UTC seconds).  The X-Amz-Date
 * and, when a session token is given, X-Amz-Security-Token headers are
 * signed as if present: the caller must send them with the values used.
 * Headers the SDKs leave unsigned (User-Agent, Expect, X-Amzn-Trace-Id)
 * are left unsigned.  Returns 0, or -1 on invalid input or out-of-memory. */
int kn_sigv4_sign(const kn_sigv4_request_t *req, const kn_sigv4_creds_t *creds,
                  const char *region, const char *service, long long epoch_s,
                  kn_sigv4_result_t *out);

void kn_sigv4_result_clear(kn_sigv4_result_t *out);

#endif
