/* The AWS shared config and credentials file format, parsed from text.
 *
 * The dialect is the one botocore reads through Python's configparser:
 * - "[name]" starts a section; the name is trimmed.  Text after the "]"
 *   may only be a comment.
 * - "key = value"; keys are trimmed and lower-cased (they are
 *   case-insensitive), values trimmed.  Only "=" separates them.
 * - Lines whose first non-blank character is '#' or ';' are comments.
 *   There are no inline comments in values ("a ; b" is a value, as
 *   credential_process command lines need).
 * - A line indented deeper than its key's line continues that key's value
 *   (joined with '\n').  When the key's own value is empty, the continuation
 *   lines form a sub-section of "key = value" lines:
 *       s3 =
 *         max_concurrent_requests = 10
 * - A duplicate section, or a duplicate key in a section, is an error.
 *
 * Errors are KN_ERR__CONF and read "source:line: what was expected". */
#ifndef KN_AWS_INI_H
#define KN_AWS_INI_H

#include <stddef.h>

#include "kn/error.h"

typedef struct kn_ini_entry {
  char *key;                 /* lower-case */
  char *value;               /* "" for a sub-section */
  int line;                  /* 1-based line of the key */
  struct kn_ini_entry *subs; /* sub-section entries, or NULL */
  size_t n_subs;
} kn_ini_entry_t;

typedef struct kn_ini_section {
  char *name; /* e.g. "default", "profile dev" */
  int line;
  kn_ini_entry_t *entries;
  size_t n_entries;
} kn_ini_section_t;

/* A parsed file.  Everything in it is owned by it. */
typedef struct kn_ini {
  char *source;               /* the name used in messages */
  kn_ini_section_t *sections; /* in file order */
  size_t n_sections;
} kn_ini_t;

/* Parses len bytes of text; source names it in error messages and is
 * copied.  On success sets *out (free with kn_ini_destroy) and returns
 * NULL.  On failure *out is NULL and the error is returned (NULL only if
 * even that could not be allocated: test *out, not the error). */
kn_error_t *kn_ini_parse(const char *text, size_t len, const char *source,
                         kn_ini_t **out);
void kn_ini_destroy(kn_ini_t *ini); /* accepts NULL */

/* Look-ups; ini and sec may be NULL (then NULL is returned).  Section
 * names match exactly, keys case-insensitively. */
const kn_ini_section_t *kn_ini_section(const kn_ini_t *ini, const char *name);
const kn_ini_entry_t *kn_ini_entry(const kn_ini_section_t *sec,
                                   const char *key);
/* The value of key in sec, or NULL. */
const char *kn_ini_get(const kn_ini_section_t *sec, const char *key);
/* An entry of e's sub-section, or NULL.  A key repeated in a sub-section
 * takes its last value. */
const kn_ini_entry_t *kn_ini_sub(const kn_ini_entry_t *e, const char *key);

#endif
