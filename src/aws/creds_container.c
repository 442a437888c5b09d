/* The container credentials endpoint (ECS task roles, EKS Pod Identity). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "aws/creds_int.h"
#include "aws/url.h"
#include "core/error.h"
#include "util/buf.h"
#include "util/file.h"
#include "util/secure.h"
#include "util/str.h"

#define ECS_HOST "169.254.170.2"
#define MAX_TOKEN_FILE (16 * 1024)

/* The link-local hosts of the ECS and EKS agents. */
static int is_agent_host(const char *host) {
  return strcmp(host, ECS_HOST) == 0 || strcmp(host, "169.254.170.23") == 0 ||
         kn_str_ieq(host, "fd00:ec2::23");
}

/* True if every address host resolves to is a loopback one. */
static int resolves_to_loopback(const char *host) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res) return 0;
  int ok = 1;
  for (struct addrinfo *a = res; a && ok; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const struct sockaddr_in *s = (const void *)a->ai_addr;
      ok = (ntohl(s->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const struct sockaddr_in6 *s = (const void *)a->ai_addr;
      ok = IN6_IS_ADDR_LOOPBACK(&s->sin6_addr);
    } else {
      ok = 0;
    }
  }
  freeaddrinfo(res);
  return ok;
}

/* A full URI must not send the token anywhere else: https, or http to the
 * loopback or the agents, as the SDKs require. */
static kn_error_t *check_full_uri(const char *uri) {
  kn_url_t u;
  const char *why = NULL;
  if (kn_url_parse(uri, &u, &why))
    return kn_error_new(KN_ERR__CONF,
                        "AWS_CONTAINER_CREDENTIALS_FULL_URI \"%s\" is not a "
                        "valid URL: %s",
                        uri, why);
  if (u.https || kn_host_is_loopback_literal(u.host) || is_agent_host(u.host) ||
      resolves_to_loopback(u.host))
    return NULL;
  return kn_error_new(KN_ERR__CONF,
                      "AWS_CONTAINER_CREDENTIALS_FULL_URI \"%s\": plain http "
                      "is only allowed to a loopback address or the ECS/EKS "
                      "agent (169.254.170.2, 169.254.170.23, fd00:ec2::23)",
                      uri);
}

/* The Authorization header line, or NULL with *errp set when the token is
 * configured but unusable; *line stays NULL when there is none. */
static int auth_header(kn_creds_ctx_t *ctx, char **line, kn_error_t **errp) {
  *line = NULL;
  const char *file = ctx->env[KN_CENV_CONTAINER_TOKEN_FILE];
  const char *tok = ctx->env[KN_CENV_CONTAINER_TOKEN];
  const char *from = "AWS_CONTAINER_AUTHORIZATION_TOKEN";
  kn_buf_t b = KN_BUF_INIT;
  if (file) {
    /* Read each time: EKS rotates it. */
    int rc = kn_file_read(file, MAX_TOKEN_FILE, &b);
    if (rc || !b.len) {
      *errp = kn_error_new(KN_ERR__CREDENTIALS,
                           "container credentials: token file %s "
                           "(AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE): %s",
                           file, rc ? kn_file_strerror(rc) : "empty");
      kn_buf_free(&b);
      return -1;
    }
    tok = kn_str_trim(b.p);
    from = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE";
  }
  int rc = 0;
  if (tok) {
    for (const char *c = tok; *c && !rc; c++)
      if ((unsigned char)*c < ' ' || *c == 0x7f) rc = -1;
    if (rc)
      *errp = kn_error_new(KN_ERR__CREDENTIALS,
                           "container credentials: the token from %s holds "
                           "control characters",
                           from);
    else if (!(*line = kn_asprintf("Authorization: %s", tok)))
      rc = -1, *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
  }
  if (b.p) kn_secure_wipe(b.p, b.len);
  kn_buf_free(&b);
  return rc;
}

kn_creds_res_t kn_creds_from_container(kn_creds_ctx_t *ctx, kn_creds_t *out,
                                       kn_error_t **errp) {
  const char *rel = ctx->env[KN_CENV_CONTAINER_RELATIVE_URI];
  const char *full = ctx->env[KN_CENV_CONTAINER_FULL_URI];
  char *url = NULL;
  if (rel) {
    url = kn_asprintf("http://" ECS_HOST "%s%s", rel[0] == '/' ? "" : "/", rel);
  } else if (full) {
    if ((*errp = check_full_uri(full))) return KN_CREDS_FAILED;
    url = strdup(full);
  } else {
    return KN_CREDS_ABSENT;
  }
  if (!url) {
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
    return KN_CREDS_FAILED;
  }
  char *auth = NULL;
  if (auth_header(ctx, &auth, errp)) {
    free(url);
    return KN_CREDS_FAILED;
  }
  const char *headers[] = {"Accept: application/json", ctx->user_agent_header,
                           auth, NULL};
  kn_http_req_t req = {0};
  req.method = "GET";
  req.url = url;
  req.headers = headers;
  req.timeout_ms = ctx->metadata_timeout_ms;
  kn_http_resp_t resp;
  kn_creds_res_t res = KN_CREDS_FAILED;
  char what[300];
  snprintf(what, sizeof(what), "container credentials from %.200s", url);
  if (kn_creds_http(ctx, &req, ctx->metadata_max_attempts, &resp) !=
      KN_ERR_NO_ERROR) {
    *errp = kn_error_prefix(resp.error, "container credentials");
    resp.error = NULL;
  } else if (resp.status != 200) {
    char *snip =
        kn_creds_snippet(resp.body.p ? resp.body.p : "", resp.body.len, 200);
    *errp =
        kn_error_new(KN_ERR__CREDENTIALS, "%s: HTTP %d%s%s", what, resp.status,
                     snip && *snip ? ": " : "", snip ? snip : "");
    free(snip);
  } else if (kn_creds_parse_json(resp.body.p ? resp.body.p : "", resp.body.len,
                                 KN_CREDS_DOC_CONTAINER, what, out,
                                 errp) == 0) {
    out->source = KN_CREDS_SRC_CONTAINER;
    res = KN_CREDS_FOUND;
  }
  if (resp.body.p) kn_secure_wipe(resp.body.p, resp.body.len);
  kn_http_resp_clear(&resp);
  kn_secure_free_str(auth);
  free(url);
  return res;
}
