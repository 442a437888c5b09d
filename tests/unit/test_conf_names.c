/* Every property name the code reads or sets is in the property table: a
 * typo would otherwise read 0 or NULL without a word.  The sources under
 * src/ and tools/ are scanned for calls of the functions that take a
 * property name, and each name given as a string literal is looked up. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "kt.h"

/* Functions taking a property name, which argument it is (from 0), and
 * the one file where a helper of that name means this (NULL: all the
 * files without such an entry). */
static const struct {
  const char *fn;
  int arg;
  const char *file;
} takers[] = {
    {"kn_conf_str", 1, NULL},
    {"kn_conf_int", 1, NULL},
    {"kn_conf_bool", 1, NULL},
    {"kn_conf_is_set", 1, NULL},
    {"kn_conf_set", 1, NULL},
    {"kn_prop_find", 0, NULL},
    {"prop", 1, "src/aws/settings.c"},
    {"int_setting", 2, "src/aws/settings.c"},
    {"set_prop", 1, "tools/kncat/main.c"},
    {"set_conf", 2, "tools/kncat/cmd_produce.c"},
    {"set", 2, "tools/kncat/multilang_props.c"}, /* (b, KCL key, name, v) */
    {"map_int", 2, "tools/kncat/multilang_props.c"},
    {"set", 1, NULL}, /* tools/kncat/cmd_*.c: (ctx, name, value) */
};

static int names_checked, names_unknown;

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), t = strlen(tail);
  return n >= t && strcmp(s + n - t, tail) == 0;
}

static int taker_arg(const char *path, const char *id, size_t n) {
  int fallback = -1;
  for (size_t i = 0; i < sizeof(takers) / sizeof(takers[0]); i++) {
    if (strlen(takers[i].fn) != n || memcmp(takers[i].fn, id, n) != 0) continue;
    if (takers[i].file && ends_with(path, takers[i].file)) return takers[i].arg;
    if (!takers[i].file && fallback < 0) fallback = takers[i].arg;
  }
  /* A name with a file of its own means something else elsewhere only
   * when it also has a general entry. */
  for (size_t i = 0; i < sizeof(takers) / sizeof(takers[0]); i++)
    if (fallback < 0 && strlen(takers[i].fn) == n &&
        memcmp(takers[i].fn, id, n) == 0 && takers[i].file)
      return -1;
  return fallback;
}

/* Skips a comment, string or character literal at p; returns p itself
 * when none starts there. */
static const char *skip_lexeme(const char *p) {
  if (p[0] == '/' && p[1] == '*') {
    const char *e = strstr(p + 2, "*/");
    return e ? e + 2 : p + strlen(p);
  }
  if (p[0] == '/' && p[1] == '/') {
    const char *e = strchr(p, '\n');
    return e ? e : p + strlen(p);
  }
  if (*p == '"' || *p == '\'') {
    char q = *p++;
    while (*p && *p != q) p += p[0] == '\\' && p[1] ? 2 : 1;
    return *p ? p + 1 : p;
  }
  return p;
}

static int line_of(const char *text, const char *p) {
  int line = 1;
  for (const char *q = text; q < p; q++) line += *q == '\n';
  return line;
}

/* The argument `want` of the call whose '(' is at p, if it is one string
 * literal (adjacent literals are not used for names); 0 otherwise. */
static int literal_arg(const char *p, int want, char *out, size_t cap) {
  int depth = 0, arg = 0;
  const char *start = p + 1;
  for (const char *q = p; *q; q++) {
    const char *s = skip_lexeme(q);
    if (s != q) {
      q = s - 1;
      continue;
    }
    if (*q == '(' || *q == '[' || *q == '{') depth++;
    if (*q == ')' || *q == ']' || *q == '}') depth--;
    if ((*q == ',' && depth == 1) || depth == 0) {
      if (arg == want) {
        while (*start == ' ' || *start == '\n' || *start == '\t') start++;
        const char *e = q;
        while (e > start && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\t'))
          e--;
        size_t n = (size_t)(e - start);
        if (n < 2 || start[0] != '"' || e[-1] != '"' ||
            skip_lexeme(start) != e || n - 2 >= cap)
          return 0;
        memcpy(out, start + 1, n - 2);
        out[n - 2] = '\0';
        return 1;
      }
      if (depth == 0) return 0;
      arg++;
      start = q + 1;
    }
  }
  return 0;
}

/* Checks the names in one file's text; returns how many were unknown. */
static int scan_text(const char *path, const char *text) {
  int unknown = 0;
  for (const char *p = text; *p;) {
    const char *s = skip_lexeme(p);
    if (s != p) {
      p = s;
      continue;
    }
    int ident =
        (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_';
    if (!ident) {
      p++;
      continue;
    }
    const char *id = p;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
           (*p >= '0' && *p <= '9') || *p == '_')
      p++;
    int want = taker_arg(path, id, (size_t)(p - id));
    const char *q = p;
    while (*q == ' ' || *q == '\n' || *q == '\t') q++;
    char name[256];
    if (want < 0 || *q != '(' || !literal_arg(q, want, name, sizeof(name)))
      continue;
    /* A definition or declaration lists parameters, not literals. */
    names_checked++;
    if (!kn_prop_find(name)) {
      unknown++;
      fprintf(stderr, "%s:%d: no property \"%s\"\n", path, line_of(text, id),
              name);
    }
  }
  return unknown;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (buf) buf[n] = '\0';
  fclose(f);
  return buf;
}

static int visit(const char *path, const struct stat *st, int type,
                 struct FTW *ftw) {
  (void)st;
  (void)ftw;
  size_t n = strlen(path);
  if (type != FTW_F || n < 2 || strcmp(path + n - 2, ".c") != 0) return 0;
  char *text = slurp(path);
  KT_CHECK_MSG(text != NULL, "cannot read %s", path);
  if (text) names_unknown += scan_text(path, text);
  free(text);
  return 0;
}

/* The scanner itself finds names wherever a call puts them. */
static void test_scanner(void) {
  int before = names_checked;
  KT_CHECK_INT(
      scan_text("(sample) src/aws/settings.c",
                "x = kn_conf_int(conf, \"log.level\");\n"
                "y = kn_conf_str(\n    conf,\n    \"no.such.property\");\n"
                "/* kn_conf_bool(conf, \"in.a.comment\") */\n"
                "s = \"kn_conf_bool(conf, \\\"in.a.string\\\")\";\n"
                "z = kn_conf_int(conf, name);\n"
                "w = int_setting(conf, pf, \"retry.max.attempts\", \"AWS\");\n"
                "v = set(c, \"unknown.too\", f(a, b));\n"),
      2);
  KT_CHECK_INT(names_checked - before, 4);
}

static void test_sources(void) {
  names_checked = names_unknown = 0;
  static const char *const dirs[] = {"src", "tools"};
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", KN_SOURCE_DIR, dirs[i]);
    KT_CHECK_MSG(nftw(path, visit, 16, FTW_PHYS) == 0, "cannot walk %s", path);
  }
  KT_CHECK_INT(names_unknown, 0);
  /* The code reads some 80 properties: a scanner that finds far fewer
   * has stopped seeing the calls. */
  KT_CHECK_MSG(names_checked >= 80, "only %d names found", names_checked);
  fprintf(stderr, "     %d property names checked\n", names_checked);
}

int main(void) {
  KT_RUN(test_scanner);
  KT_RUN(test_sources);
  return KT_DONE();
}
