/* Keeping secrets out of logs: copies of HTTP header text with the values
 * of credential-bearing headers replaced by "<redacted>".
 *
 * Secret headers (names in any case): Authorization, Proxy-Authorization,
 * X-Amz-Security-Token, X-Aws-Ec2-Metadata-Token. */
#ifndef KN_AWS_REDACT_H
#define KN_AWS_REDACT_H

#include <stddef.h>

#define KN_REDACTED "<redacted>"

/* 1 if a header named name[0..len) carries a secret, else 0. */
int kn_redact_is_secret(const char *name, size_t len);

/* One "Name: value" line, with or without its CRLF or LF (kept).  The
 * name, the colon and the white space after it are kept; a secret value
 * becomes "<redacted>".  Other lines, and lines without a colon, are copied
 * as they are.  Returns a malloc'ed string the caller frees, or NULL for a
 * NULL line or on out-of-memory. */
char *kn_redact_header_line(const char *line);

/* A block of header lines separated by LF or CRLF, such as a request's
 * header section with its request line, or a libcurl debug callback's
 * buffer.  Each line is redacted as above; continuation lines (starting
 * with a space or tab) of a secret header are redacted too.  block need not
 * be NUL-terminated.  Returns a malloc'ed NUL-terminated copy (its length
 * in *out_len when out_len is not NULL) that the caller frees, or NULL on
 * out-of-memory or a NULL block. */
char *kn_redact_header_block(const char *block, size_t len, size_t *out_len);

#endif
