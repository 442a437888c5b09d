#include "aws/profile.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/buf.h"
#include "util/file.h"
#include "util/str.h"

void kn_aws_profile_destroy(kn_aws_profile_t *p) {
  if (!p) return;
  kn_ini_destroy(p->config);
  kn_ini_destroy(p->credentials);
  free(p->name);
  free(p);
}

/* Parses one file into *out; a missing file leaves *out NULL. */
static kn_error_t *load_file(const char *path, kn_ini_t **out) {
  *out = NULL;
  if (!path || !*path) return NULL;
  char *shown = kn_path_display(path);
  if (!shown) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  kn_buf_t text = KN_BUF_INIT;
  kn_error_t *e = NULL;
  int rc = kn_file_read(path, KN_AWS_PROFILE_MAX_FILE, &text);
  if (rc == ENOENT) {
    /* Not having the file is the common case. */
  } else if (rc == EFBIG) {
    e = kn_error_new(KN_ERR__CONF,
                     "%s: larger than %u bytes: not a config file", shown,
                     KN_AWS_PROFILE_MAX_FILE);
  } else if (rc) {
    e = kn_error_new(KN_ERR__CONF, "cannot read %s: %s", shown,
                     kn_file_strerror(rc));
  } else {
    e = kn_ini_parse(text.p ? text.p : "", text.len, shown, out);
    if (!*out && !e) e = kn_error_new(KN_ERR__NOMEM, "out of memory");
  }
  kn_buf_free(&text);
  free(shown);
  return e;
}

const char *kn_aws_config_profile_name(const char *section, size_t *len) {
  if (strcmp(section, "default") == 0) {
    *len = 7;
    return section;
  }
  if (strncmp(section, "profile", 7) != 0 ||
      !isspace((unsigned char)section[7]))
    return NULL;
  const char *n = section + 7;
  while (isspace((unsigned char)*n)) n++;
  size_t l = strlen(n);
  /* A quoted name, as shlex would read it in botocore. */
  if (l >= 2 && (n[0] == '"' || n[0] == '\'') && n[l - 1] == n[0]) {
    n++;
    l -= 2;
  }
  *len = l;
  return l ? n : NULL;
}

static const kn_ini_section_t *find_config_profile(const kn_ini_t *ini,
                                                   const char *name) {
  if (!ini) return NULL;
  const kn_ini_section_t *plain = NULL;
  size_t want = strlen(name);
  for (size_t i = 0; i < ini->n_sections; i++) {
    const kn_ini_section_t *sec = &ini->sections[i];
    size_t len;
    const char *n = kn_aws_config_profile_name(sec->name, &len);
    if (!n || len != want || strncmp(n, name, len) != 0) continue;
    if (n != sec->name) return sec; /* "[profile NAME]" wins */
    plain = sec;
  }
  return plain;
}

kn_error_t *kn_aws_profile_load(const char *config_path,
                                const char *credentials_path, const char *name,
                                kn_aws_profile_t **out) {
  *out = NULL;
  kn_aws_profile_t *p = calloc(1, sizeof(*p));
  if (!p || !(p->name = strdup(name))) {
    free(p);
    return kn_error_new(KN_ERR__NOMEM, "out of memory");
  }
  kn_error_t *e = load_file(config_path, &p->config);
  if (!e) e = load_file(credentials_path, &p->credentials);
  if (e) {
    kn_aws_profile_destroy(p);
    return e;
  }
  p->config_sec = find_config_profile(p->config, name);
  p->cred_sec = kn_ini_section(p->credentials, name);
  *out = p;
  return NULL;
}

int kn_aws_profile_exists(const kn_aws_profile_t *p) {
  return p && (p->config_sec || p->cred_sec);
}

static void set_where(char *where, size_t size, const kn_ini_t *ini, int line) {
  if (where && size) snprintf(where, size, "%s:%d", ini->source, line);
}

const char *kn_aws_profile_get(const kn_aws_profile_t *p, const char *key,
                               char *where, size_t where_size) {
  if (!p) return NULL;
  const kn_ini_entry_t *e = kn_ini_entry(p->cred_sec, key);
  if (e) {
    set_where(where, where_size, p->credentials, e->line);
    return e->value;
  }
  e = kn_ini_entry(p->config_sec, key);
  if (e) {
    set_where(where, where_size, p->config, e->line);
    return e->value;
  }
  return NULL;
}

/* The section called kind followed by name ("services " "dev"), compared
 * in place: a look-up that allocated could not tell out-of-memory from a
 * section that is not there. */
static const kn_ini_section_t *section_of(const kn_ini_t *ini, const char *kind,
                                          const char *name) {
  size_t k = strlen(kind);
  for (size_t i = 0; i < ini->n_sections; i++) {
    const char *n = ini->sections[i].name;
    if (strncmp(n, kind, k) == 0 && strcmp(n + k, name) == 0)
      return &ini->sections[i];
  }
  return NULL;
}

const char *kn_aws_profile_service_get(const kn_aws_profile_t *p,
                                       const char *service, const char *key,
                                       char *where, size_t where_size) {
  const char *svcs = kn_aws_profile_get(p, "services", NULL, 0);
  if (!svcs || !*svcs || !p->config) return NULL;
  const kn_ini_section_t *sec = section_of(p->config, "services ", svcs);
  const kn_ini_entry_t *sub = kn_ini_sub(kn_ini_entry(sec, service), key);
  if (!sub) return NULL;
  set_where(where, where_size, p->config, sub->line);
  return sub->value;
}

void kn_aws_profile_view(const kn_aws_profile_t *files, const char *name,
                         kn_aws_profile_t *view) {
  memset(view, 0, sizeof(*view));
  view->name = (char *)name; /* borrowed: a view is never destroyed */
  view->config = files->config;
  view->credentials = files->credentials;
  view->config_sec = find_config_profile(files->config, name);
  view->cred_sec = kn_ini_section(files->credentials, name);
}

const char *kn_aws_profile_get_file(const kn_aws_profile_t *p, int credentials,
                                    const char *key, char *where,
                                    size_t where_size) {
  if (!p) return NULL;
  const kn_ini_entry_t *e =
      kn_ini_entry(credentials ? p->cred_sec : p->config_sec, key);
  if (!e) return NULL;
  set_where(where, where_size, credentials ? p->credentials : p->config,
            e->line);
  return e->value;
}

const kn_ini_section_t *kn_aws_sso_session(const kn_aws_profile_t *p,
                                           const char *name) {
  if (!p || !p->config) return NULL;
  return section_of(p->config, "sso-session ", name);
}
