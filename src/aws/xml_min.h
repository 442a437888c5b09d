/* The few STS XML response fields credential providers need, without an
 * XML library.  Enough for AWS Query protocol responses: elements without
 * namespace prefixes, text content with the five predefined entities and
 * character references, comments, CDATA and processing instructions
 * skipped.  It does not validate documents. */
#ifndef KN_AWS_XML_MIN_H
#define KN_AWS_XML_MIN_H

#include <stddef.h>

typedef struct kn_xml_span {
  const char *p; /* inside the document; not terminated */
  size_t len;
} kn_xml_span_t;

/* Finds the first element called name (a local name; a prefix such as
 * "sts:" before it is accepted) inside in, and sets *inner to its content.
 * A self-closing element has empty content.  Returns 0, or -1 if there is
 * no such element or it is not closed. */
int kn_xml_find(kn_xml_span_t in, const char *name, kn_xml_span_t *inner);

/* Follows a path of nested element names, e.g. {"Credentials",
 * "AccessKeyId", NULL}, each searched inside the previous one. */
int kn_xml_path(kn_xml_span_t in, const char *const *path,
                kn_xml_span_t *inner);

/* The text of span with entities decoded and surrounding white space
 * trimmed, as a malloc'ed string (caller frees); NULL if the text holds
 * markup, an unknown entity or a NUL, or on out-of-memory. */
char *kn_xml_text(kn_xml_span_t span);

#endif
