/* Credential endpoints answer small documents: a larger answer is refused
 * (credential.response.max.bytes), before it is all read when its
 * Content-Length says so. */
#include <stdlib.h>
#include <string.h>

#include "aws/creds.h"
#include "aws/settings.h"
#include "core/conf.h"
#include "core/error.h"
#include "kt.h"
#include "kt_aws.h"
#include "kt_httpd.h"

static kn_logger_t quiet = {2, NULL, NULL, "test"};

/* A valid container credentials document padded to `size` bytes. */
static int handler(void *ud, const kt_httpd_req_t *req, char *out, size_t size,
                   size_t *out_len) {
  size_t pad = (size_t)atoi(req->path + 1);
  (void)ud;
  char *doc = malloc(pad + 256);
  int n = snprintf(doc, pad + 256,
                   "{\"AccessKeyId\":\"AKIDCAP\",\"SecretAccessKey\":\"s\","
                   "\"Token\":\"t\",\"Expiration\":\"2099-01-01T00:00:00Z\"");
  memset(doc + n, ' ', pad);
  strcpy(doc + n + pad, "}");
  *out_len =
      kt_httpd_resp(out, size, 200, "Content-Type: application/json\r\n", doc);
  free(doc);
  return KT_REPLY;
}

/* Resolves with properties kv; returns the error code, *msg its text. */
static kn_err_t resolve(const char *const *kv, char *msg, size_t cap) {
  kn_conf_t *c = kn_conf_new();
  char err[256];
  kn_conf_set(c, "region", "us-east-1", err, sizeof(err));
  for (; kv && kv[0]; kv += 2) kn_conf_set(c, kv[0], kv[1], err, sizeof(err));
  kn_aws_settings_t s;
  kn_error_t *e = kn_aws_settings_load(&s, c, &quiet);
  kn_conf_destroy(c);
  kn_creds_t out;
  memset(&out, 0, sizeof(out));
  if (!e) {
    kn_creds_provider_t *p = kn_creds_provider_new(&s, &e);
    kn_aws_settings_clear(&s);
    if (p) e = kn_creds_get(p, &out);
    kn_creds_provider_destroy(p);
  }
  kn_err_t code = kn_error_code(e);
  snprintf(msg, cap, "%s", e ? kn_error_string(e) : out.access_key_id);
  kn_error_destroy(e);
  kn_creds_clear(&out);
  return code;
}

static kt_httpd_t srv;

static void use(size_t pad) {
  char uri[128];
  snprintf(uri, sizeof(uri), "http://127.0.0.1:%d/%zu", srv.port, pad);
  setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", uri, 1);
}

static void test_cap(void) {
  kt_aws_reset();
  char msg[1024];
  use(1000); /* small: fine */
  KT_CHECK_INT(resolve(NULL, msg, sizeof(msg)), KN_ERR_NO_ERROR);
  KT_CHECK_STR(msg, "AKIDCAP");
  use(100000); /* past the default of 64 KiB, whatever http.* says */
  static const char *const http_big[] = {"http.response.max.bytes", "10000000",
                                         NULL};
  KT_CHECK_INT(resolve(http_big, msg, sizeof(msg)), KN_ERR__BAD_MSG);
  KT_CHECK_MSG(strstr(msg, "response body larger than 65536 bytes"), "%s", msg);
  static const char *const cred_big[] = {"credential.response.max.bytes",
                                         "200000", NULL};
  KT_CHECK_INT(resolve(cred_big, msg, sizeof(msg)), KN_ERR_NO_ERROR);
  KT_CHECK_STR(msg, "AKIDCAP");
  unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
}

int main(void) {
  if (kt_httpd_start(&srv, handler, NULL)) return 1;
  KT_RUN(test_cap);
  kt_httpd_stop(&srv);
  kt_aws_cleanup();
  return KT_DONE();
}
