/* Error responses of the AWS JSON protocols (awsJson1_0, awsJson1_1). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "aws/service.h"
#include "core/error.h"
#include "util/str.h"

#define KN_SNIPPET_MAX 160

static const char *member(json_t *obj, const char *const *names) {
  for (; *names; names++) {
    const char *s = json_string_value(json_object_get(obj, *names));
    if (s && *s) return s;
  }
  return NULL;
}

/* "ValidationException:http://internal.amazon.com/..." (the header's
 * form) loses everything from the colon; namespaces before '#' are
 * stripped later by kn_error_remote(). */
static char *bare_type(const char *t) {
  if (!t) return NULL;
  while (*t == ' ' || *t == '\t') t++;
  size_t n = strcspn(t, ":");
  while (n && (t[n - 1] == ' ' || t[n - 1] == '\t')) n--;
  return n ? kn_strndup(t, n) : NULL;
}

/* For bodies that are not JSON (a proxy's HTML page): the <title> when
 * there is one, otherwise the start of the text, on one line. */
static char *snippet(const char *body, size_t len) {
  const char *p = body, *end = body + len;
  const char *t = len > 7 ? strstr(body, "<title>") : NULL;
  if (t && t < end) {
    const char *te = strstr(t, "</title>");
    if (te && te < end) {
      p = t + 7;
      end = te;
    }
  }
  char *out = malloc(KN_SNIPPET_MAX + 4);
  if (!out) return NULL;
  size_t n = 0;
  int space = 1;
  for (; p < end && n < KN_SNIPPET_MAX; p++) {
    unsigned char c = (unsigned char)*p;
    if (c <= ' ' || c == 0x7f) {
      if (!space) out[n++] = ' ';
      space = 1;
      continue;
    }
    out[n++] = (char)c;
    space = 0;
  }
  while (n && out[n - 1] == ' ') n--;
  if (p < end) {
    memcpy(out + n, "...", 3);
    n += 3;
  }
  out[n] = '\0';
  return out;
}

kn_error_t *kn_svc_decode_error(int http_status, const char *body,
                                size_t body_len, const char *type_hint,
                                const char *request_id) {
  static const char *const type_names[] = {"code", "__type", "Code", NULL};
  static const char *const msg_names[] = {"message", "Message", "errorMessage",
                                          NULL};
  json_t *root = NULL;
  if (body && body_len) root = json_loadb(body, body_len, 0, NULL);

  /* The header wins over the body, then "code", then "__type", as the
   * protocols specify. */
  char *type = bare_type(type_hint);
  char *msg = NULL;
  int nomem = 0;
  if (json_is_object(root)) {
    if (!type) {
      const char *t = member(root, type_names);
      type = bare_type(t);
      nomem |= t && !type && *t != ':';
    }
    const char *m = member(root, msg_names);
    if (m) nomem |= !(msg = strdup(m));
  } else if (body && body_len) {
    char *s = snippet(body, body_len);
    if (s && *s) msg = kn_asprintf("unexpected response body \"%s\"", s);
    nomem |= !s || (*s && !msg);
    free(s);
  }
  json_decref(root);
  kn_error_t *err = nomem ? kn_error_nomem()
                          : kn_error_remote(http_status, type, msg, request_id);
  free(type);
  free(msg);
  return err;
}
