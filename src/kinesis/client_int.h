/* Internal layout of kn_client_t and the blocking call shared by the
 * files that implement its operations (ops_*.c). */
#ifndef KN_KINESIS_CLIENT_INT_H
#define KN_KINESIS_CLIENT_INT_H

#include "aws/creds.h"
#include "aws/http.h"
#include "aws/service.h"
#include "aws/settings.h"
#include "kn/client.h"
#include "util/buf.h"
#include "util/log.h"

struct kn_client_s {
  kn_logger_t log; /* settings.http.log points here */
  kn_aws_settings_t settings;
  kn_creds_provider_t *creds;
  kn_loop_t *loop;
  kn_svc_t *svc; /* Kinesis */
};

/* Sends action with the body req (reset afterwards, whatever happens) and
 * waits.  On success *resp holds the response body (caller frees with
 * kn_buf_free); errors name the action and unsupported actions come back
 * as KN_ERR__UNSUPPORTED.  An encoding failure of the caller (enc_rc
 * non-zero) is reported as out-of-memory without a call. */
kn_error_t *kn_client_call(kn_client_t *kc, const char *action, int enc_rc,
                           kn_buf_t *req, kn_buf_t *resp);

/* For arguments the API requires. */
kn_error_t *kn_client_arg_error(const char *fn, const char *what);

#endif
