/* AWS Signature Version 4, as a pure function: request in, headers out.
 * No clock, no I/O, no global state: the caller passes the time, and any
 * thread may sign at once.
 *
 * Canonicalization follows botocore's SigV4Auth for non-S3 services
 * (Kinesis, DynamoDB, STS), so a request signed here and by botocore at the
 * same second gives the same bytes:
 * - method upper-cased;
 * - path: empty and "." segments and repeated slashes removed, ".." drops
 *   the segment before it, a trailing slash kept; then every byte outside
 *   A-Z a-z 0-9 - . _ ~ and "/" is percent-encoded, "%" included (so an
 *   encoded wire path is encoded a second time, as AWS expects outside S3);
 * - query: split on "&" (empty pieces skipped), each name and value
 *   percent-decoded then encoded again with RFC 3986 unreserved characters
 *   only ("+" is a literal plus: encode spaces as %20), "name" without "="
 *   taken as "name=", pairs sorted by encoded name then encoded value;
 * - headers: names lower-cased, values with leading and trailing ASCII
 *   white space removed and inner runs of it turned into one space (bytes
 *   >= 0x80 are taken as they are), repeated names joined by "," in the
 *   order given, sorted by name.  Unsigned, as botocore: Connection, Expect,
 *   Keep-Alive, Proxy-Authenticate, Proxy-Authorization, TE, Trailer,
 *   Transfer-Encoding, Upgrade, User-Agent, X-Amzn-Trace-Id. */
#ifndef KN_AWS_SIGV4_H
#define KN_AWS_SIGV4_H

#include <stddef.h>

typedef struct kn_sigv4_header {
  const char *name;  /* any case; an HTTP token (no spaces or colons) */
  const char *value; /* as sent; folded and trimmed for signing */
} kn_sigv4_header_t;

/* All pointers are borrowed for the duration of the call only. */
typedef struct kn_sigv4_request {
  const char *method; /* "POST"; any case */
  const char *path;   /* the path as sent on the wire, e.g. "/"; must
                         start with "/" (NULL or "" mean "/") and hold no
                         control characters, "?" or "#" */
  const char *query;  /* raw query string without '?', or NULL; must be
                         validly percent-encoded (no stray "%") */
  /* Must include Host.  Authorization, X-Amz-Date and, when a session token
   * is given, X-Amz-Security-Token headers in this list are ignored (a
   * retry may pass the previous attempt's).  A Date header is refused:
   * this signer always dates with X-Amz-Date. */
  const kn_sigv4_header_t *headers;
  size_t n_headers;
  const void *payload; /* may be NULL when payload_len is 0 */
  size_t payload_len;
  /* Hex SHA-256 of the payload when already known, or "UNSIGNED-PAYLOAD";
   * NULL: computed from payload.  An X-Amz-Content-Sha256 header in
   * headers takes precedence over both, as in botocore. */
  const char *payload_hash;
} kn_sigv4_request_t;

typedef struct kn_sigv4_creds {
  const char *access_key_id;
  const char *secret_access_key;
  const char *session_token; /* NULL or "" when none */
} kn_sigv4_creds_t;

/* Headers to add to the request.  The arrays are inline: no ownership. */
typedef struct kn_sigv4_result {
  char authorization[1024]; /* value of the Authorization header */
  char amz_date[17];        /* value of X-Amz-Date: YYYYMMDDTHHMMSSZ */
  char payload_hash[65];    /* hex SHA-256 used (for X-Amz-Content-Sha256) */
  /* Intermediate strings, for tests and debug logs.  Owned by the result:
   * free both with kn_sigv4_result_clear(). */
  char *canonical_request; /* malloc'ed */
  char *string_to_sign;    /* malloc'ed */
} kn_sigv4_result_t;

/* Signs req for service/region at epoch_s (UTC seconds, 1970 to 9999).
 * The X-Amz-Date and, when a session token is given, X-Amz-Security-Token
 * headers are signed as if present: the caller must send them, with
 * out->amz_date and creds->session_token as values.  Headers the SDKs leave
 * unsigned (see above) are left unsigned.
 *
 * Returns 0, or -1 on invalid input (NULL or empty method, access key,
 * secret, region or service; region, service or access key holding "/" or
 * white space; no Host header; a header name that is not an HTTP token; a
 * Date header; a bad path or query; a payload hash or X-Amz-Content-Sha256
 * value longer than 64 bytes; an Authorization value longer than the
 * inline array) or out-of-memory.  After -1, out holds no allocation;
 * kn_sigv4_result_clear() is safe either way. */
int kn_sigv4_sign(const kn_sigv4_request_t *req, const kn_sigv4_creds_t *creds,
                  const char *region, const char *service, long long epoch_s,
                  kn_sigv4_result_t *out);

/* Wipes authorization (OPENSSL_cleanse), frees the intermediate strings
 * and sets them to NULL; accepts NULL.  The signing key chain never
 * outlives kn_sigv4_sign(). */
void kn_sigv4_result_clear(kn_sigv4_result_t *out);

#endif
