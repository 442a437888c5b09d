#include "core/conf.h"

#include <stdlib.h>
#include <string.h>

#include "util/str.h"

static const kn_prop_t *const tables[] = {kn_props_client, kn_props_consumer,
                                          kn_props_producer};
#define NTABLES (sizeof(tables) / sizeof(tables[0]))

static size_t prop_count(void) {
  static size_t n;
  if (!n) {
    size_t c = 0;
    for (size_t t = 0; t < NTABLES; t++)
      for (const kn_prop_t *p = tables[t]; p->name; p++) c++;
    n = c;
  }
  return n;
}

/* Index of name across all tables, or -1. */
static long prop_index(const char *name) {
  long i = 0;
  for (size_t t = 0; t < NTABLES; t++)
    for (const kn_prop_t *p = tables[t]; p->name; p++, i++)
      if (strcmp(p->name, name) == 0) return i;
  return -1;
}

static const kn_prop_t *prop_at(long idx) {
  long i = 0;
  for (size_t t = 0; t < NTABLES; t++)
    for (const kn_prop_t *p = tables[t]; p->name; p++, i++)
      if (i == idx) return p;
  return NULL;
}

const kn_prop_t *kn_prop_find(const char *name) {
  long i = prop_index(name);
  return i < 0 ? NULL : prop_at(i);
}

kn_conf_t *kn_conf_new(void) {
  kn_conf_t *conf = calloc(1, sizeof(*conf));
  if (!conf) return NULL;
  conf->values = calloc(prop_count(), sizeof(char *));
  if (!conf->values) {
    free(conf);
    return NULL;
  }
  return conf;
}

kn_conf_t *kn_conf_dup(const kn_conf_t *src) {
  kn_conf_t *conf = kn_conf_new();
  if (!conf) return NULL;
  char **values = conf->values;
  *conf = *src;
  conf->values = values;
  for (size_t i = 0; i < prop_count(); i++) {
    if (src->values[i] && !(conf->values[i] = strdup(src->values[i]))) {
      kn_conf_destroy(conf);
      return NULL;
    }
  }
  return conf;
}

void kn_conf_destroy(kn_conf_t *conf) {
  if (!conf) return;
  for (size_t i = 0; i < prop_count(); i++) free(conf->values[i]);
  free(conf->values);
  free(conf);
}

static int in_choices(const char *choices, const char *v) {
  size_t n = strlen(v);
  for (const char *c = choices; *c;) {
    size_t len = strcspn(c, ",");
    if (len == n && strncmp(c, v, n) == 0) return 1;
    c += len;
    if (*c == ',') c++;
  }
  return 0;
}

static int validate(const kn_prop_t *p, const char *value, char *errstr,
                    size_t size) {
  long long v;
  switch (p->type) {
    case KN_PROP_INT:
      if (kn_str_to_i64(value, p->min, p->max, &v)) {
        snprintf(errstr, size,
                 "%s: expected an integer from %lld to %lld, got \"%s\"",
                 p->name, p->min, p->max, value);
        return -1;
      }
      return 0;
    case KN_PROP_BOOL:
      if (kn_str_to_bool(value) < 0) {
        snprintf(errstr, size, "%s: expected true or false, got \"%s\"",
                 p->name, value);
        return -1;
      }
      return 0;
    case KN_PROP_ENUM:
      if (!in_choices(p->choices, value)) {
        snprintf(errstr, size, "%s: expected one of %s, got \"%s\"", p->name,
                 p->choices, value);
        return -1;
      }
      return 0;
    default:
      return 0;
  }
}

kn_conf_res_t kn_conf_set(kn_conf_t *conf, const char *name, const char *value,
                          char *errstr, size_t errstr_size) {
  char dummy[1];
  if (!errstr || !errstr_size) {
    errstr = dummy;
    errstr_size = sizeof(dummy);
  }
  long i = prop_index(name);
  if (i < 0) {
    snprintf(errstr, errstr_size, "no such configuration property: \"%s\"",
             name);
    return KN_CONF_UNKNOWN;
  }
  const kn_prop_t *p = prop_at(i);
  if (!value) { /* back to the default */
    free(conf->values[i]);
    conf->values[i] = NULL;
    return KN_CONF_OK;
  }
  if (validate(p, value, errstr, errstr_size)) return KN_CONF_INVALID;
  char *dup = strdup(value);
  if (!dup) {
    snprintf(errstr, errstr_size, "out of memory");
    return KN_CONF_INVALID;
  }
  free(conf->values[i]);
  conf->values[i] = dup;
  return KN_CONF_OK;
}

kn_conf_res_t kn_conf_get(const kn_conf_t *conf, const char *name, char *dest,
                          size_t *dest_size) {
  long i = prop_index(name);
  if (i < 0) return KN_CONF_UNKNOWN;
  const kn_prop_t *p = prop_at(i);
  const char *v = conf->values[i] ? conf->values[i] : p->def ? p->def : "";
  size_t need = strlen(v) + 1;
  if (!dest || *dest_size < need) {
    *dest_size = need;
    return KN_CONF_INVALID;
  }
  memcpy(dest, v, need);
  *dest_size = need;
  return KN_CONF_OK;
}

const char *kn_conf_str(const kn_conf_t *conf, const char *name) {
  long i = prop_index(name);
  if (i < 0) return NULL;
  if (conf && conf->values[i]) return conf->values[i];
  return prop_at(i)->def;
}

long long kn_conf_int(const kn_conf_t *conf, const char *name) {
  const char *v = kn_conf_str(conf, name);
  long long x = 0;
  if (v) kn_str_to_i64(v, -(1LL << 62), 1LL << 62, &x);
  return x;
}

int kn_conf_bool(const kn_conf_t *conf, const char *name) {
  const char *v = kn_conf_str(conf, name);
  return v && kn_str_to_bool(v) == 1;
}

int kn_conf_is_set(const kn_conf_t *conf, const char *name) {
  long i = prop_index(name);
  return i >= 0 && conf && conf->values[i] != NULL;
}

void kn_conf_set_log_cb(kn_conf_t *conf,
                        void (*log_cb)(void *, int, const char *, const char *),
                        void *opaque) {
  conf->log_cb = log_cb;
  conf->log_opaque = opaque;
}

void kn_conf_set_stats_cb(kn_conf_t *conf,
                          void (*stats_cb)(void *, const char *, size_t),
                          void *opaque) {
  conf->cbs[KN_CB_STATS] = (kn_fnptr_t)stats_cb;
  conf->cb_opaque[KN_CB_STATS] = opaque;
}

void kn_conf_logger(const kn_conf_t *conf, kn_logger_t *lg, const char *name) {
  lg->level = (int)kn_conf_int(conf, "log.level");
  lg->cb = conf ? conf->log_cb : NULL;
  lg->opaque = conf ? conf->log_opaque : NULL;
  lg->name = name;
}

static const char *type_name(const kn_prop_t *p) {
  switch (p->type) {
    case KN_PROP_INT:
      return "integer";
    case KN_PROP_BOOL:
      return "boolean";
    case KN_PROP_ENUM:
      return "enum";
    default:
      return "string";
  }
}

void kn_conf_properties_show(FILE *fp) {
  for (size_t t = 0; t < NTABLES; t++)
    for (const kn_prop_t *p = tables[t]; p->name; p++) {
      fprintf(fp, "%-40s %-9s %-8s default: %s\n", p->name, p->scope,
              type_name(p), p->def ? p->def : "(unset)");
      fprintf(fp, "    %s%s%s\n", p->doc,
              p->type == KN_PROP_ENUM ? " One of: " : "",
              p->type == KN_PROP_ENUM ? p->choices : "");
    }
}

void kn_conf_properties_markdown(FILE *fp) {
  fputs(
      "# Configuration properties\n\n"
      "Generated from the library's property table by `kncat -X list-md`"
      " (`kncat -X list` prints the same as text); set a property with"
      " `kn_conf_set()` or `kncat -X name=value`.\n",
      fp);
  const char *scope = NULL;
  for (size_t t = 0; t < NTABLES; t++)
    for (const kn_prop_t *p = tables[t]; p->name; p++) {
      if (!scope || strcmp(scope, p->scope) != 0) {
        scope = p->scope;
        fprintf(fp,
                "\n## %s\n\n| Property | Type | Default | Description |\n"
                "|---|---|---|---|\n",
                scope);
      }
      char type[160];
      if (p->type == KN_PROP_INT)
        snprintf(type, sizeof(type), "integer %lld..%lld", p->min, p->max);
      else if (p->type == KN_PROP_ENUM)
        snprintf(type, sizeof(type), "one of `%s`", p->choices);
      else
        snprintf(type, sizeof(type), "%s", type_name(p));
      fprintf(fp, "| `%s` | %s | %s%s%s | %s |\n", p->name, type,
              p->def && *p->def ? "`" : "", p->def && *p->def ? p->def : "",
              p->def && *p->def ? "`" : "", p->doc);
    }
}
