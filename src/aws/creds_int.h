/* Internals shared by the credential providers (creds_*.c). */
#ifndef KN_AWS_CREDS_INT_H
#define KN_AWS_CREDS_INT_H

#include <stddef.h>
#include <stdint.h>

#include "aws/creds.h"
#include "aws/http.h"
#include "aws/profile.h"
#include "kn/error.h"
#include "util/log.h"

/* Environment variables the providers read, captured at creation. */
typedef enum kn_cenv {
  KN_CENV_ACCESS_KEY_ID,
  KN_CENV_SECRET_ACCESS_KEY,
  KN_CENV_SESSION_TOKEN,
  KN_CENV_WEB_IDENTITY_TOKEN_FILE,
  KN_CENV_ROLE_ARN,
  KN_CENV_ROLE_SESSION_NAME,
  KN_CENV_CONTAINER_RELATIVE_URI,
  KN_CENV_CONTAINER_FULL_URI,
  KN_CENV_CONTAINER_TOKEN,
  KN_CENV_CONTAINER_TOKEN_FILE,
  KN_CENV_IMDS_DISABLED,
  KN_CENV_IMDS_ENDPOINT,
  KN_CENV_IMDS_ENDPOINT_MODE,
  KN_CENV_IMDS_V1_DISABLED,
  KN_CENV__COUNT
} kn_cenv_t;

extern const char *const kn_cenv_names[KN_CENV__COUNT];

/* What every provider may read.  Owned by the chain; providers run with
 * its lock held, so they may keep state here (the IMDS token). */
typedef struct kn_creds_ctx {
  char *access_key_id; /* explicit properties */
  char *secret_access_key;
  char *session_token;
  kn_aws_profile_t *profile; /* the shared files as read at creation */
  int env_keys_off;          /* a profile named by property: no env keys */
  char *region;
  char *sts_endpoint;
  char *sso_endpoint; /* configured, or NULL: from sso_region */
  char *sso_oidc_endpoint;
  char *sso_cache_dir;     /* ~/.aws/sso/cache, or NULL */
  char *user_agent_header; /* "User-Agent: ..." */
  char *ca_file;
  kn_http_opts_t http; /* http.ca_file points at ca_file */
  long request_timeout_ms;
  long metadata_timeout_ms;
  int metadata_max_attempts;
  long process_timeout_ms;
  char *env[KN_CENV__COUNT]; /* NULL when unset or empty */
  const kn_logger_t *log;
  /* IMDSv2 session token, reused until shortly before its TTL ends. */
  char *imds_token;
  int64_t imds_token_expires_mono_ms;
  /* Why a provider that found nothing did so, for the final message. */
  char note[256];
} kn_creds_ctx_t;

typedef enum kn_creds_res {
  KN_CREDS_FOUND,  /* *out is filled */
  KN_CREDS_ABSENT, /* not configured here: try the next provider */
  KN_CREDS_FAILED  /* configured but failed: *errp (NULL: out of memory) */
} kn_creds_res_t;

typedef kn_creds_res_t(kn_creds_fetch_fn)(kn_creds_ctx_t *ctx, kn_creds_t *out,
                                          kn_error_t **errp);

kn_creds_fetch_fn kn_creds_from_properties;   /* creds_static.c */
kn_creds_fetch_fn kn_creds_from_env;          /* the keys, always */
kn_creds_fetch_fn kn_creds_from_env_chain;    /* unless env_keys_off */
kn_creds_fetch_fn kn_creds_from_role;         /* creds_role.c */
kn_creds_fetch_fn kn_creds_from_web_identity; /* creds_sts.c */
kn_creds_fetch_fn kn_creds_from_sso;          /* creds_sso.c */
kn_creds_fetch_fn kn_creds_from_profile;      /* creds_profile.c */
kn_creds_fetch_fn kn_creds_from_container;    /* creds_container.c */
kn_creds_fetch_fn kn_creds_from_imds;         /* creds_imds.c */

/* Fills *out with copies of static keys after checking them; what names
 * their origin in messages.  0, or -1 with *errp set. */
int kn_creds_set_static(kn_creds_t *out, const char *id, const char *secret,
                        const char *token, const char *source, const char *what,
                        kn_error_t **errp);

/* STS AssumeRoleWithWebIdentity with the token read from token_file;
 * session_name NULL: generated.  what names the configuration ("profile
 * \"x\" (~/.aws/config:3)") in messages. */
kn_creds_res_t kn_creds_web_identity(kn_creds_ctx_t *ctx, const char *role_arn,
                                     const char *token_file,
                                     const char *session_name, const char *what,
                                     kn_creds_t *out, kn_error_t **errp);

/* What AssumeRole is asked for; strings borrowed. */
typedef struct kn_creds_role {
  const char *role_arn;
  const char *session_name; /* NULL: generated */
  const char *external_id;  /* or NULL */
  int duration_s;           /* 0: STS's default (one hour) */
} kn_creds_role_t;

/* STS AssumeRole signed with source. */
kn_creds_res_t kn_creds_assume_role(kn_creds_ctx_t *ctx,
                                    const kn_creds_role_t *role,
                                    const kn_creds_t *source, const char *what,
                                    kn_creds_t *out, kn_error_t **errp);

/* The providers of one profile, in botocore's order: web identity (the
 * profile's keys, and the environment's when with_env), IAM Identity
 * Center (SSO), keys of the credentials file, credential_process, keys of
 * the config file.  ABSENT with ctx->note set when none applies. */
kn_creds_res_t kn_creds_profile_chain(kn_creds_ctx_t *ctx,
                                      const kn_aws_profile_t *pf, int with_env,
                                      kn_creds_t *out, kn_error_t **errp);
/* Single providers of that chain, for one profile. */
kn_creds_res_t kn_creds_web_identity_of(kn_creds_ctx_t *ctx,
                                        const kn_aws_profile_t *pf,
                                        int with_env, kn_creds_t *out,
                                        kn_error_t **errp);
kn_creds_res_t kn_creds_sso(kn_creds_ctx_t *ctx, const kn_aws_profile_t *pf,
                            kn_creds_t *out, kn_error_t **errp);
kn_creds_res_t kn_creds_profile_files(kn_creds_ctx_t *ctx,
                                      const kn_aws_profile_t *pf,
                                      kn_creds_t *out, kn_error_t **errp);

/* Runs command with /bin/sh -c (stdin /dev/null, stdout captured, stderr
 * kept for messages), killing its process group after timeout_ms, and
 * reads the credential_process JSON document from its output. */
kn_creds_res_t kn_creds_process(const char *command, long timeout_ms,
                                const char *what, const kn_logger_t *log,
                                kn_creds_t *out, kn_error_t **errp);

/* Credential JSON documents. */
typedef enum kn_creds_doc {
  KN_CREDS_DOC_PROCESS,   /* Version 1, SessionToken, optional Expiration */
  KN_CREDS_DOC_CONTAINER, /* Token, Expiration */
  KN_CREDS_DOC_IMDS       /* Code "Success", Token, Expiration */
} kn_creds_doc_t;

/* Parses len bytes of JSON into *out (source set by the caller).  Errors
 * (KN_ERR__BAD_MSG, prefixed with what) never quote the document, which
 * holds secrets.  0, or -1 with *errp set. */
int kn_creds_parse_json(const char *json, size_t len, kn_creds_doc_t doc,
                        const char *what, kn_creds_t *out, kn_error_t **errp);

/* Performs req up to attempts times while the failure is a transport
 * error, a timeout or a 5xx, sleeping a little between attempts.  Returns
 * like kn_http_perform_blocking; resp holds the last attempt. */
kn_err_t kn_creds_http(kn_creds_ctx_t *ctx, const kn_http_req_t *req,
                       int attempts, kn_http_resp_t *resp);

/* At most max bytes of text for an error message: printable ASCII, the
 * rest replaced by '?'.  Caller frees. */
char *kn_creds_snippet(const char *p, size_t len, size_t max);

#endif
