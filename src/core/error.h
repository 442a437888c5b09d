/* Internal construction of kn_error_t values. */
#ifndef KN_CORE_ERROR_H
#define KN_CORE_ERROR_H

#include <stddef.h>
#include "kn/error.h"

struct kn_error_s {
  kn_err_t code;
  int http_status;
  int retriable;
  int throttling;
  char *type;       /* AWS error type, NULL for local errors */
  char *request_id; /* NULL when unknown */
  char *string;     /* full human message */
};

/* A local error; message is printf-formatted.  Never NULL: when memory
 * runs out, the shared out-of-memory error (kn_error_nomem()), so that a
 * failure is never mistaken for success. */
kn_error_t *kn_error_new(kn_err_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The shared, static error KN_ERR__NOMEM "out of memory": what every
 * constructor returns when it cannot allocate.  kn_error_destroy() leaves
 * it alone; it must not be changed (kn_error_set_retriable() skips it). */
kn_error_t *kn_error_nomem(void);
void kn_error_set_retriable(kn_error_t *error, int retriable);

/* A remote error from an AWS response (never NULL, as kn_error_new).  type may
 * carry a namespace
 * ("com.amazonaws.dynamodb.v20120810#ResourceNotFoundException") which is
 * stripped; message and request_id may be NULL.  The code and the
 * retriable and throttling flags are derived from type and status. */
kn_error_t *kn_error_remote(int http_status, const char *type,
                            const char *message, const char *request_id);

/* The code for a bare error type (namespace already stripped). */
kn_err_t kn_err_from_aws_type(const char *type);

/* Prepends "context: " to the message; returns error (NULL-safe; the
 * out-of-memory error and a message that cannot grow stay as they are). */
kn_error_t *kn_error_prefix(kn_error_t *error, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* NULL for NULL; the out-of-memory error when memory runs out. */
kn_error_t *kn_error_copy(const kn_error_t *error);

/* kn_error_code() that maps a NULL from an allocation failure, i.e. any
 * NULL passed where an error was expected, to KN_ERR__NOMEM. */
kn_err_t kn_error_code_of(const kn_error_t *error);

/* Writes the message into errstr (always terminated), destroys error and
 * returns its code.  For the constructors that report through errstr. */
kn_err_t kn_error_to_errstr(kn_error_t *error, char *errstr, size_t size);

#endif
