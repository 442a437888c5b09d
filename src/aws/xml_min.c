#include "aws/xml_min.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

/* Skips a comment, CDATA section, declaration or processing instruction
 * that starts at p; returns the position after it, or NULL if p starts
 * none of them (or it is unterminated, then *bad is set). */
static const char *skip_special(const char *p, const char *end, int *bad) {
  static const struct {
    const char *open, *close;
  } kinds[] = {
      {"<!--", "-->"}, {"<![CDATA[", "]]>"}, {"<?", "?>"}, {"<!", ">"}};
  for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
    size_t ol = strlen(kinds[k].open), cl = strlen(kinds[k].close);
    if ((size_t)(end - p) < ol || memcmp(p, kinds[k].open, ol) != 0) continue;
    for (const char *q = p + ol; q + cl <= end; q++)
      if (memcmp(q, kinds[k].close, cl) == 0) return q + cl;
    *bad = 1;
    return NULL;
  }
  return NULL;
}

static int is_name_char(char c) {
  return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' ||
         c == ':';
}

/* Reads a tag name at p (after "<" or "</"); returns its end.  *local is
 * the part after any prefix. */
static const char *tag_name(const char *p, const char *end,
                            const char **local) {
  const char *s = p;
  *local = p;
  while (p < end && is_name_char(*p)) {
    if (*p == ':') *local = p + 1;
    p++;
  }
  return p > s ? p : NULL;
}

static int name_is(const char *local, const char *name_end, const char *name) {
  size_t n = strlen(name);
  return (size_t)(name_end - local) == n && memcmp(local, name, n) == 0;
}

/* The end of a tag ('>' included), skipping quoted attribute values. */
static const char *tag_end(const char *p, const char *end) {
  char q = 0;
  for (; p < end; p++) {
    if (q) {
      if (*p == q) q = 0;
    } else if (*p == '"' || *p == '\'') {
      q = *p;
    } else if (*p == '>') {
      return p + 1;
    }
  }
  return NULL;
}

int kn_xml_find(kn_xml_span_t in, const char *name, kn_xml_span_t *inner) {
  const char *p = in.p, *end = in.p + in.len;
  while (p < end) {
    const char *lt = memchr(p, '<', (size_t)(end - p));
    if (!lt) return -1;
    int bad = 0;
    const char *after = skip_special(lt, end, &bad);
    if (bad) return -1;
    if (after) {
      p = after;
      continue;
    }
    const char *local;
    const char *ne = tag_name(lt + 1, end, &local);
    const char *te = tag_end(lt + 1, end);
    if (!te) return -1;
    if (!ne || !name_is(local, ne, name)) {
      p = te;
      continue;
    }
    if (te - 2 > lt && te[-2] == '/') { /* <Name/> */
      inner->p = te;
      inner->len = 0;
      return 0;
    }
    /* Find the matching close tag, counting nested same-name elements. */
    int depth = 1;
    const char *q = te;
    while (q < end) {
      const char *l2 = memchr(q, '<', (size_t)(end - q));
      if (!l2) return -1;
      after = skip_special(l2, end, &bad);
      if (bad) return -1;
      if (after) {
        q = after;
        continue;
      }
      int closing = l2 + 1 < end && l2[1] == '/';
      const char *lname;
      const char *n2 = tag_name(l2 + 1 + closing, end, &lname);
      const char *t2 = tag_end(l2 + 1, end);
      if (!t2) return -1;
      if (n2 && name_is(lname, n2, name)) {
        if (closing && --depth == 0) {
          inner->p = te;
          inner->len = (size_t)(l2 - te);
          return 0;
        }
        if (!closing && t2[-2] != '/') depth++;
      }
      q = t2;
    }
    return -1;
  }
  return -1;
}

int kn_xml_path(kn_xml_span_t in, const char *const *path,
                kn_xml_span_t *inner) {
  kn_xml_span_t cur = in;
  for (; *path; path++)
    if (kn_xml_find(cur, *path, &cur)) return -1;
  *inner = cur;
  return 0;
}

/* Appends the UTF-8 encoding of code point cp; -1 if invalid. */
static int put_utf8(kn_buf_t *b, unsigned long cp) {
  char u[4];
  size_t n;
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  if (cp < 0x80) {
    u[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    u[0] = (char)(0xC0 | (cp >> 6));
    u[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    u[0] = (char)(0xE0 | (cp >> 12));
    u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    u[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    u[0] = (char)(0xF0 | (cp >> 18));
    u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    u[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  return kn_buf_append(b, u, n);
}

static int decode_entity(kn_buf_t *b, const char *e, size_t n) {
  static const struct {
    const char *name;
    char c;
  } named[] = {
      {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
  for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
    if (strlen(named[i].name) == n && memcmp(e, named[i].name, n) == 0)
      return kn_buf_append_char(b, named[i].c);
  if (n < 2 || e[0] != '#') return -1;
  int hex = e[1] == 'x' || e[1] == 'X';
  size_t i = hex ? 2 : 1;
  if (i == n || n - i > 8) return -1;
  unsigned long cp = 0;
  for (; i < n; i++) {
    int c = (unsigned char)e[i];
    int d = isdigit(c)           ? c - '0'
            : hex && isxdigit(c) ? (tolower(c) - 'a' + 10)
                                 : -1;
    if (d < 0) return -1;
    cp = cp * (hex ? 16 : 10) + (unsigned long)d;
  }
  return put_utf8(b, cp);
}

char *kn_xml_text(kn_xml_span_t span) {
  const char *p = span.p, *end = span.p + span.len;
  while (p < end && isspace((unsigned char)*p)) p++;
  while (end > p && isspace((unsigned char)end[-1])) end--;
  kn_buf_t b = KN_BUF_INIT;
  if (kn_buf_reserve(&b, (size_t)(end - p))) return NULL;
  while (p < end) {
    if (*p == '<' || *p == '\0') goto fail;
    if (*p == '&') {
      const char *semi = memchr(p, ';', (size_t)(end - p));
      if (!semi || decode_entity(&b, p + 1, (size_t)(semi - p - 1))) goto fail;
      p = semi + 1;
      continue;
    }
    if (kn_buf_append_char(&b, *p++)) goto fail;
  }
  return kn_buf_steal(&b, NULL);
fail:
  kn_buf_free(&b);
  return NULL;
}
