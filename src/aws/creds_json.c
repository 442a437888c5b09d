/* Credential documents in JSON: credential_process output, the container
 * endpoint and IMDS (creds_sso.c reads the SSO documents itself). */
#include <jansson.h>
#include <string.h>

#include "aws/creds_int.h"
#include "core/error.h"
#include "util/iso8601.h"

static int bad(kn_error_t **errp, const char *what, const char *why,
               const char *field) {
  *errp =
      kn_error_new(KN_ERR__BAD_MSG, "%s: %s%s%s%s", what, why,
                   field ? " \"" : "", field ? field : "", field ? "\"" : "");
  return -1;
}

/* A string member, or NULL; *wrong set if present but not a string. */
static const char *str_member(json_t *o, const char *name, int *wrong) {
  json_t *v = json_object_get(o, name);
  if (!v || json_is_null(v)) return NULL;
  if (!json_is_string(v)) {
    *wrong = 1;
    return NULL;
  }
  return json_string_value(v);
}

int kn_creds_parse_json(const char *json, size_t len, kn_creds_doc_t doc,
                        const char *what, kn_creds_t *out, kn_error_t **errp) {
  json_error_t jerr;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    /* jerr.text may quote the input, which holds secrets: position only. */
    *errp =
        kn_error_new(KN_ERR__BAD_MSG,
                     "%s: the output is not valid JSON (line %d, column %d)",
                     what, jerr.line, jerr.column);
    return -1;
  }
  int rc = -1;
  if (!json_is_object(root)) {
    bad(errp, what, "expected a JSON object", NULL);
    goto out;
  }
  if (doc == KN_CREDS_DOC_PROCESS) {
    json_t *v = json_object_get(root, "Version");
    if (!json_is_integer(v) || json_integer_value(v) != 1) {
      *errp =
          kn_error_new(KN_ERR__BAD_MSG, "%s: expected \"Version\": 1", what);
      goto out;
    }
  }
  int wrong = 0;
  if (doc == KN_CREDS_DOC_IMDS) {
    const char *code = str_member(root, "Code", &wrong);
    if (code && strcmp(code, "Success") != 0) {
      /* The code is a status word such as "AssumeRoleUnauthorizedAccess". */
      *errp = kn_error_new(KN_ERR__CREDENTIALS, "%s: Code is \"%.64s\"", what,
                           code);
      goto out;
    }
  }
  const char *id = str_member(root, "AccessKeyId", &wrong);
  const char *secret = str_member(root, "SecretAccessKey", &wrong);
  const char *token = str_member(
      root, doc == KN_CREDS_DOC_PROCESS ? "SessionToken" : "Token", &wrong);
  const char *exp = str_member(root, "Expiration", &wrong);
  if (wrong) {
    bad(errp, what, "a credential member is not a string", NULL);
    goto out;
  }
  if (!id || !*id) {
    bad(errp, what, "missing", "AccessKeyId");
    goto out;
  }
  if (!secret || !*secret) {
    bad(errp, what, "missing", "SecretAccessKey");
    goto out;
  }
  int64_t expires = 0;
  if (exp && kn_iso8601_parse(exp, &expires)) {
    *errp = kn_error_new(KN_ERR__BAD_MSG,
                         "%s: \"Expiration\" is not an ISO-8601 date-time: "
                         "\"%.40s\"",
                         what, exp);
    goto out;
  }
  if (!exp && doc != KN_CREDS_DOC_PROCESS) {
    bad(errp, what, "missing", "Expiration");
    goto out;
  }
  if (kn_creds_set_static(out, id, secret, token, NULL, what, errp)) goto out;
  out->expires_ms = expires;
  rc = 0;
out:
  json_decref(root);
  return rc;
}
