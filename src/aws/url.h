/* Just enough URL parsing to check endpoint URLs and pick their host. */
#ifndef KN_AWS_URL_H
#define KN_AWS_URL_H

#include <stddef.h>

typedef struct kn_url {
  int https;       /* 0: http */
  char host[256];  /* IPv6 without brackets */
  int ipv6;        /* the host was written in brackets */
  int port;        /* 0: the scheme's default */
  size_t path_off; /* offset of the path (or "?"/"#", or end) in the URL */
} kn_url_t;

/* Parses an absolute http:// or https:// URL (scheme in any case) with a
 * non-empty host and an optional port 1..65535.  White space, control
 * characters and user information ("user@host") are refused.  Returns 0,
 * or -1 with a reason in *why (a static string). */
int kn_url_parse(const char *url, kn_url_t *out, const char **why);

/* True for a literal loopback host: 127.0.0.0/8, ::1, "localhost". */
int kn_host_is_loopback_literal(const char *host);

#endif
