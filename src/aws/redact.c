#include "aws/redact.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/buf.h"

int kn_redact_is_secret(const char *name, size_t len) {
  static const char *const secrets[] = {"authorization", "proxy-authorization",
                                        "x-amz-security-token",
                                        "x-aws-ec2-metadata-token"};
  for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++)
    if (strlen(secrets[i]) == len && strncasecmp(name, secrets[i], len) == 0)
      return 1;
  return 0;
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* Appends line [p, e) (its terminator excluded), redacted when it is a
 * secret header or, with *in_secret set, a continuation of one.  Updates
 * *in_secret for the next line. */
static int put_line(kn_buf_t *b, const char *p, const char *e, int *in_secret) {
  const char *keep_end = NULL; /* redact after this point */
  if (p < e && is_blank(*p)) {
    if (*in_secret) {
      keep_end = p;
      while (keep_end < e && is_blank(*keep_end)) keep_end++;
    }
  } else {
    *in_secret = 0;
    const char *colon = memchr(p, ':', (size_t)(e - p));
    if (colon) {
      const char *ns = p, *ne = colon;
      while (ns < ne && is_blank(*ns)) ns++;
      while (ne > ns && is_blank(ne[-1])) ne--;
      if (kn_redact_is_secret(ns, (size_t)(ne - ns))) {
        *in_secret = 1;
        keep_end = colon + 1;
        while (keep_end < e && is_blank(*keep_end)) keep_end++;
      }
    }
  }
  if (!keep_end) return kn_buf_append(b, p, (size_t)(e - p));
  if (kn_buf_append(b, p, (size_t)(keep_end - p))) return -1;
  return kn_buf_append_str(b, KN_REDACTED);
}

char *kn_redact_header_block(const char *block, size_t len, size_t *out_len) {
  if (!block) return NULL;
  kn_buf_t b = KN_BUF_INIT;
  /* Room for the copy and a few redaction markers, in one allocation. */
  if (kn_buf_reserve(&b, len + 4 * sizeof(KN_REDACTED))) return NULL;
  const char *p = block, *end = block + len;
  int in_secret = 0;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *e = nl ? nl : end;
    const char *content_end = (e > p && e[-1] == '\r') ? e - 1 : e;
    if (put_line(&b, p, content_end, &in_secret) ||
        kn_buf_append(&b, content_end, (size_t)(e - content_end) + !!nl)) {
      kn_buf_free(&b);
      return NULL;
    }
    p = nl ? nl + 1 : end;
  }
  if (out_len) *out_len = b.len;
  return kn_buf_steal(&b, NULL);
}

char *kn_redact_header_line(const char *line) {
  return line ? kn_redact_header_block(line, strlen(line), NULL) : NULL;
}
