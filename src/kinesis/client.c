/* kn_client_t: settings, credentials, an I/O loop and the Kinesis service,
 * and the blocking call every operation goes through. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "core/error.h"
#include "kinesis/client_int.h"
#include "kinesis/kinesis.h"

kn_client_t *kn_client_new(const kn_conf_t *conf, char *errstr,
                           size_t errstr_size) {
  kn_client_t *kc = calloc(1, sizeof(*kc));
  kn_error_t *err = NULL;
  if (!kc) {
    kn_error_to_errstr(NULL, errstr, errstr_size);
    return NULL;
  }
  kn_conf_logger(conf, &kc->log, "client");
  err = kn_aws_settings_load(&kc->settings, conf, &kc->log);
  if (err) goto fail;
  kc->creds = kn_creds_provider_new(&kc->settings, &err);
  if (!kc->creds) goto fail;
  kc->loop = kn_loop_new(&kc->settings.http, &err);
  if (!kc->loop) goto fail;
  kc->svc = kn_svc_new(kc->loop, kc->creds, &kc->settings, &kn_svc_kinesis,
                       kc->settings.kinesis_endpoint, &err);
  if (!kc->svc) goto fail;
  kn_dbg(&kc->log, "client", "Kinesis at %s, region %s",
         kc->settings.kinesis_endpoint, kc->settings.region);
  return kc;

fail:
  kn_error_to_errstr(err, errstr, errstr_size);
  kn_client_destroy(kc);
  return NULL;
}

void kn_client_destroy(kn_client_t *kc) {
  if (!kc) return;
  /* Blocking calls have all returned by now, so no call is in flight:
   * the loop can stop first, then what it used goes. */
  kn_loop_destroy(kc->loop);
  kn_svc_destroy(kc->svc);
  kn_creds_provider_destroy(kc->creds);
  kn_aws_settings_clear(&kc->settings);
  free(kc);
}

kn_error_t *kn_kinesis_map_unsupported(kn_error_t *err, const char *action) {
  if (!err || err->code == KN_ERR__UNSUPPORTED || !err->type) return err;
  const char *t = err->type;
  int unsupported =
      strcmp(t, "UnknownOperationException") == 0 ||
      strcmp(t, "InvalidAction") == 0 ||
      (strcmp(t, "AccessDeniedException") == 0 && err->string &&
       strstr(err->string, "Unable to determine service/operation name"));
  if (!unsupported) return err;
  err->code = KN_ERR__UNSUPPORTED;
  err->retriable = 0;
  err->throttling = 0;
  return kn_error_prefix(err, "%s is not supported by this server", action);
}

kn_error_t *kn_client_call(kn_client_t *kc, const char *action, int enc_rc,
                           kn_buf_t *req, kn_buf_t *resp) {
  *resp = (kn_buf_t)KN_BUF_INIT;
  if (enc_rc) {
    kn_buf_reset(req);
    return kn_error_new(KN_ERR__NOMEM, "%s: out of memory", action);
  }
  kn_error_t *err =
      kn_svc_call_sync(kc->svc, action, req->p, req->len, NULL, resp);
  kn_buf_reset(req);
  if (err) {
    kn_buf_free(resp);
    return kn_kinesis_map_unsupported(err, action);
  }
  return NULL;
}

kn_error_t *kn_client_arg_error(const char *fn, const char *what) {
  return kn_error_new(KN_ERR__INVALID_ARG, "%s: %s", fn, what);
}
