#include "aws/ini.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/buf.h"
#include "util/str.h"

typedef struct parser {
  kn_ini_t *ini;
  kn_ini_section_t *sec; /* current section */
  kn_ini_entry_t *ent;   /* entry whose value may continue */
  size_t key_indent;     /* indentation of the last key or header line */
  int nested;            /* ent's value is a sub-section */
  kn_buf_t val;          /* ent's value while it may grow */
  int line;
  kn_error_t *err; /* set with the first failure (NULL: out of memory) */
} parser_t;

static void entries_free(kn_ini_entry_t *e, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(e[i].key);
    free(e[i].value);
    entries_free(e[i].subs, e[i].n_subs);
  }
  free(e);
}

void kn_ini_destroy(kn_ini_t *ini) {
  if (!ini) return;
  for (size_t i = 0; i < ini->n_sections; i++) {
    free(ini->sections[i].name);
    entries_free(ini->sections[i].entries, ini->sections[i].n_entries);
  }
  free(ini->sections);
  free(ini->source);
  free(ini);
}

/* Records "source:line: message" and returns -1. */
__attribute__((format(printf, 2, 3))) static int syntax(parser_t *ps,
                                                        const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = kn_vasprintf(fmt, ap);
  va_end(ap);
  if (msg)
    ps->err =
        kn_error_new(KN_ERR__CONF, "%s:%d: %s", ps->ini->source, ps->line, msg);
  free(msg);
  return -1;
}

static int nomem(parser_t *ps) {
  ps->err = kn_error_new(KN_ERR__NOMEM, "out of memory");
  return -1;
}

/* Appends a zeroed element to a dynamic array; NULL on out-of-memory. */
static void *grow(void **arr, size_t *n, size_t size) {
  void *p = realloc(*arr, (*n + 1) * size);
  if (!p) return NULL;
  *arr = p;
  char *el = (char *)p + *n * size;
  memset(el, 0, size);
  (*n)++;
  return el;
}

static void lower(char *s) {
  for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

static char *trimmed_dup(const char *s, size_t n) {
  while (n && isspace((unsigned char)*s)) s++, n--;
  while (n && isspace((unsigned char)s[n - 1])) n--;
  return kn_strndup(s, n);
}

/* Stores the value collected for the current entry. */
static int finish_entry(parser_t *ps) {
  if (!ps->ent) return 0;
  if (!ps->nested) {
    /* Blank lines kept inside a value are dropped at its end. */
    while (ps->val.len && isspace((unsigned char)ps->val.p[ps->val.len - 1]))
      ps->val.len--;
    char *v = kn_strndup(ps->val.p ? ps->val.p : "", ps->val.len);
    if (!v) return nomem(ps);
    free(ps->ent->value);
    ps->ent->value = v;
  }
  kn_buf_reset(&ps->val);
  ps->ent = NULL;
  ps->nested = 0;
  return 0;
}

static int is_comment_start(char c) { return c == '#' || c == ';'; }

/* True if [s, end) is blank or a comment. */
static int rest_is_empty(const char *s, const char *end) {
  while (s < end && isspace((unsigned char)*s)) s++;
  return s == end || is_comment_start(*s);
}

static int section_line(parser_t *ps, const char *s, size_t n) {
  const char *end = s + n;
  /* The name ends at the first "]" that only a comment follows: names may
   * hold "]" (configparser allows it), comments too. */
  const char *close = NULL;
  for (const char *c = s + 1; c < end; c++)
    if (*c == ']' && rest_is_empty(c + 1, end)) {
      close = c;
      break;
    }
  if (!close)
    return memchr(s, ']', n)
               ? syntax(ps,
                        "unexpected text after the \"]\" of a section header")
               : syntax(ps, "expected \"]\" at the end of a section header");
  char *name = trimmed_dup(s + 1, (size_t)(close - s - 1));
  if (!name) return nomem(ps);
  int rc = 0;
  const kn_ini_section_t *dup = kn_ini_section(ps->ini, name);
  if (!*name) {
    rc = syntax(ps, "empty section name \"[]\"");
  } else if (dup) {
    rc = syntax(ps, "duplicate section [%s] (first at line %d)", name,
                dup->line);
  } else {
    kn_ini_section_t *sec =
        grow((void **)&ps->ini->sections, &ps->ini->n_sections, sizeof(*sec));
    if (sec) {
      sec->name = name;
      sec->line = ps->line;
      ps->sec = sec;
      return 0;
    }
    rc = nomem(ps);
  }
  free(name);
  return rc;
}

static int key_line(parser_t *ps, const char *s, size_t n) {
  const char *eq = memchr(s, '=', n);
  if (!ps->sec)
    return eq ? syntax(ps, "\"key = value\" before any [section] header")
              : syntax(ps, "expected a [section] header");
  if (!eq) return syntax(ps, "expected \"key = value\"");
  char *key = trimmed_dup(s, (size_t)(eq - s));
  if (!key) return nomem(ps);
  lower(key);
  int rc;
  const kn_ini_entry_t *dup = kn_ini_entry(ps->sec, key);
  if (!*key) {
    rc = syntax(ps, "expected a key before \"=\"");
  } else if (dup) {
    rc = syntax(ps, "duplicate key \"%s\" in [%s] (first at line %d)", key,
                ps->sec->name, dup->line);
  } else {
    char *val = trimmed_dup(eq + 1, (size_t)(s + n - eq - 1));
    kn_ini_entry_t *ent = val ? grow((void **)&ps->sec->entries,
                                     &ps->sec->n_entries, sizeof(*ent))
                              : NULL;
    if (ent) {
      ent->key = key;
      ent->value = val;
      ent->line = ps->line;
      ps->ent = ent;
      ps->nested = *val == '\0';
      kn_buf_reset(&ps->val);
      return kn_buf_append_str(&ps->val, val) ? nomem(ps) : 0;
    }
    free(val);
    rc = nomem(ps);
  }
  free(key);
  return rc;
}

/* An indented line under a key: more value, or a sub-section entry. */
static int continuation_line(parser_t *ps, const char *s, size_t n) {
  if (!ps->nested)
    return kn_buf_append_char(&ps->val, '\n') || kn_buf_append(&ps->val, s, n)
               ? nomem(ps)
               : 0;
  const char *eq = memchr(s, '=', n);
  if (!eq)
    return syntax(ps, "expected \"key = value\" in the sub-section \"%s\"",
                  ps->ent->key);
  char *key = trimmed_dup(s, (size_t)(eq - s));
  char *val = trimmed_dup(eq + 1, (size_t)(s + n - eq - 1));
  int rc;
  if (!key || !val) {
    rc = nomem(ps);
  } else if (!*key) {
    rc = syntax(ps, "expected a key before \"=\" in the sub-section \"%s\"",
                ps->ent->key);
  } else {
    lower(key);
    kn_ini_entry_t *sub =
        grow((void **)&ps->ent->subs, &ps->ent->n_subs, sizeof(*sub));
    if (sub) {
      sub->key = key;
      sub->value = val;
      sub->line = ps->line;
      return 0;
    }
    rc = nomem(ps);
  }
  free(key);
  free(val);
  return rc;
}

static int parse_line(parser_t *ps, const char *line, size_t n) {
  if (memchr(line, '\0', n)) return syntax(ps, "unexpected NUL byte");
  size_t indent = 0;
  while (indent < n && isspace((unsigned char)line[indent])) indent++;
  const char *s = line + indent;
  size_t len = n - indent;
  while (len && isspace((unsigned char)s[len - 1])) len--;
  /* Comments neither end nor continue a value. */
  if (len && is_comment_start(*s)) return 0;
  if (!len) {
    if (ps->ent && !ps->nested && kn_buf_append_char(&ps->val, '\n'))
      return nomem(ps);
    return 0;
  }
  if (ps->ent && indent > ps->key_indent) return continuation_line(ps, s, len);
  if (finish_entry(ps)) return -1;
  ps->key_indent = indent;
  if (*s == '[') return section_line(ps, s, len);
  return key_line(ps, s, len);
}

kn_error_t *kn_ini_parse(const char *text, size_t len, const char *source,
                         kn_ini_t **out) {
  *out = NULL;
  parser_t ps;
  memset(&ps, 0, sizeof(ps));
  ps.ini = calloc(1, sizeof(*ps.ini));
  if (!ps.ini || !(ps.ini->source = strdup(source ? source : "(text)"))) {
    free(ps.ini);
    return kn_error_new(KN_ERR__NOMEM, "out of memory");
  }
  const char *p = text, *end = text + len;
  if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3; /* UTF-8 BOM */
  int rc = 0;
  while (p < end && !rc) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    size_t n = (size_t)(le - p);
    if (n && p[n - 1] == '\r') n--;
    ps.line++;
    rc = parse_line(&ps, p, n);
    p = nl ? nl + 1 : end;
  }
  if (!rc) rc = finish_entry(&ps);
  kn_buf_free(&ps.val);
  if (rc) {
    kn_ini_destroy(ps.ini);
    return ps.err; /* NULL reads as out of memory */
  }
  *out = ps.ini;
  return NULL;
}

const kn_ini_section_t *kn_ini_section(const kn_ini_t *ini, const char *name) {
  if (!ini) return NULL;
  for (size_t i = 0; i < ini->n_sections; i++)
    if (strcmp(ini->sections[i].name, name) == 0) return &ini->sections[i];
  return NULL;
}

const kn_ini_entry_t *kn_ini_entry(const kn_ini_section_t *sec,
                                   const char *key) {
  if (!sec) return NULL;
  for (size_t i = 0; i < sec->n_entries; i++)
    if (kn_str_ieq(sec->entries[i].key, key)) return &sec->entries[i];
  return NULL;
}

const char *kn_ini_get(const kn_ini_section_t *sec, const char *key) {
  const kn_ini_entry_t *e = kn_ini_entry(sec, key);
  return e ? e->value : NULL;
}

const kn_ini_entry_t *kn_ini_sub(const kn_ini_entry_t *e, const char *key) {
  if (!e) return NULL;
  for (size_t i = e->n_subs; i > 0; i--)
    if (kn_str_ieq(e->subs[i - 1].key, key)) return &e->subs[i - 1];
  return NULL;
}
