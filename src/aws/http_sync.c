/* kn_http_perform_blocking: one request on a private easy handle. */
#include <string.h>

#include "aws/http_int.h"
#include "core/error.h"
#include "util/clock.h"

kn_err_t kn_http_perform_blocking(const kn_http_opts_t *opts,
                                  const kn_http_req_t *req,
                                  kn_http_resp_t *resp) {
  memset(resp, 0, sizeof(*resp));
  if (kn_curl_init_once()) {
    resp->error = kn_error_new(KN_ERR__FAIL, "libcurl failed to initialise");
    return kn_error_code_of(resp->error);
  }
  struct kn_http_xfer x;
  memset(&x, 0, sizeof(x));
  x.start_us = kn_mono_us();
  x.easy = curl_easy_init();
  kn_error_t *err =
      x.easy ? kn_xfer_setup(&x, opts, req, 0)
             : kn_error_new(KN_ERR__NOMEM, "out of memory (curl_easy_init)");
  if (!err) {
    /* The connection closes with the handle: nothing lingers between
     * calls made from different threads. */
    curl_easy_setopt(x.easy, CURLOPT_FORBID_REUSE, 1L);
    kn_xfer_finish(&x, curl_easy_perform(x.easy));
    *resp = x.resp;
    memset(&x.resp, 0, sizeof(x.resp));
  } else {
    resp->error = err;
  }
  kn_xfer_cleanup(&x);
  if (resp->error) return kn_error_code(resp->error);
  return resp->status ? KN_ERR_NO_ERROR : KN_ERR__NOMEM;
}
