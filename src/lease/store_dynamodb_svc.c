/* Connecting the DynamoDB lease store to the AWS service layer: a
 * DynamoDB service handle on a client's loop, credentials and settings, or
 * a whole set of the store's own. */
#include <stdlib.h>

#include "aws/creds.h"
#include "aws/http.h"
#include "aws/service.h"
#include "aws/settings.h"
#include "core/error.h"
#include "kn/conf.h"
#include "kinesis/client_int.h"
#include "lease/store_dynamodb.h"

static kn_error_t *svc_call(void *opaque, const char *action, const char *body,
                            size_t len, kn_buf_t *out) {
  return kn_svc_call_sync((kn_svc_t *)opaque, action, body, len, NULL, out);
}

static void svc_free(void *opaque) { kn_svc_destroy(opaque); }

/* Everything a store without a client owns, freed in reverse order. */
typedef struct own_env {
  kn_conf_t *conf;
  kn_aws_settings_t settings;
  int settings_loaded;
  kn_creds_provider_t *creds;
  kn_loop_t *loop;
  kn_svc_t *svc;
} own_env_t;

static void own_env_free(void *opaque) {
  own_env_t *env = opaque;
  if (!env) return;
  kn_svc_destroy(env->svc);
  kn_loop_destroy(env->loop);
  kn_creds_provider_destroy(env->creds);
  if (env->settings_loaded) kn_aws_settings_clear(&env->settings);
  kn_conf_destroy(env->conf);
  free(env);
}

static kn_error_t *own_env_call(void *opaque, const char *action,
                                const char *body, size_t len, kn_buf_t *out) {
  return svc_call(((own_env_t *)opaque)->svc, action, body, len, out);
}

/* Settings from conf (NULL: defaults), the environment and the shared
 * config files, as any AWS SDK resolves them. */
static own_env_t *own_env_new(const kn_conf_t *conf, kn_error_t **errp) {
  own_env_t *env = calloc(1, sizeof(*env));
  if (!env || !(env->conf = conf ? kn_conf_dup(conf) : kn_conf_new())) {
    free(env);
    *errp = kn_error_new(KN_ERR__NOMEM, "lease store: out of memory");
    return NULL;
  }
  *errp = kn_aws_settings_load(&env->settings, env->conf, NULL);
  if (!*errp) {
    env->settings_loaded = 1;
    env->creds = kn_creds_provider_new(&env->settings, errp);
  }
  if (!*errp) env->loop = kn_loop_new(&env->settings.http, errp);
  if (!*errp)
    env->svc =
        kn_svc_new(env->loop, env->creds, &env->settings, &kn_svc_dynamodb,
                   env->settings.dynamodb_endpoint, errp);
  if (*errp) {
    own_env_free(env);
    return NULL;
  }
  return env;
}

kn_lease_store_t *kn_lease_store_dynamodb_open(const char *table,
                                               struct kn_client_s *client,
                                               kn_error_t **errp) {
  *errp = NULL;
  if (client) {
    /* The store's own service handle, on the client's I/O thread,
     * credentials and settings (borrowed: the client outlives the store). */
    kn_svc_t *svc =
        kn_svc_new(client->loop, client->creds, &client->settings,
                   &kn_svc_dynamodb, client->settings.dynamodb_endpoint, errp);
    if (!svc) {
      *errp = kn_error_prefix(*errp, "lease store dynamodb:%s", table);
      return NULL;
    }
    return kn_lease_store_dynamodb_new(table, svc_call, svc, svc_free, errp);
  }
  return kn_lease_store_dynamodb_open_conf(table, NULL, errp);
}

kn_lease_store_t *kn_lease_store_dynamodb_open_conf(const char *table,
                                                    const kn_conf_t *conf,
                                                    kn_error_t **errp) {
  *errp = NULL;
  own_env_t *env = own_env_new(conf, errp);
  if (!env) {
    *errp = kn_error_prefix(*errp, "lease store dynamodb:%s", table);
    return NULL;
  }
  return kn_lease_store_dynamodb_new(table, own_env_call, env, own_env_free,
                                     errp);
}
