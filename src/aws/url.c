#include "aws/url.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "util/str.h"

int kn_url_parse(const char *url, kn_url_t *out, const char **why) {
  const char *dummy;
  if (!why) why = &dummy;
  memset(out, 0, sizeof(*out));
  for (const char *c = url; *c; c++)
    if ((unsigned char)*c <= ' ' || *c == 0x7f) {
      *why = "white space or control characters";
      return -1;
    }
  const char *p;
  if (strncasecmp(url, "https://", 8) == 0) {
    out->https = 1;
    p = url + 8;
  } else if (strncasecmp(url, "http://", 7) == 0) {
    p = url + 7;
  } else {
    *why = "the scheme is not http:// or https://";
    return -1;
  }
  size_t alen = strcspn(p, "/?#");
  const char *aend = p + alen;
  if (memchr(p, '@', alen)) {
    *why = "user information (\"user@\") is not allowed";
    return -1;
  }
  const char *hs = p, *he, *port = NULL;
  if (*p == '[') {
    const char *rb = memchr(p, ']', alen);
    if (!rb) {
      *why = "unterminated IPv6 address";
      return -1;
    }
    hs = p + 1;
    he = rb;
    out->ipv6 = 1;
    if (rb + 1 < aend) {
      if (rb[1] != ':') {
        *why = "unexpected text after the IPv6 address";
        return -1;
      }
      port = rb + 2;
    }
  } else {
    const char *colon = memchr(p, ':', alen);
    he = colon ? colon : aend;
    if (colon) port = colon + 1;
  }
  size_t hlen = (size_t)(he - hs);
  if (hlen == 0) {
    *why = "no host";
    return -1;
  }
  if (hlen >= sizeof(out->host)) {
    *why = "the host name is too long";
    return -1;
  }
  for (const char *c = hs; c < he; c++) {
    int ok = isalnum((unsigned char)*c) || *c == '-' || *c == '.' ||
             *c == '_' || *c == '~' || *c == '%' || (out->ipv6 && *c == ':');
    if (!ok) {
      *why = "invalid character in the host";
      return -1;
    }
  }
  memcpy(out->host, hs, hlen);
  out->host[hlen] = '\0';
  if (port) {
    long v = 0;
    const char *c = port;
    for (; c < aend && isdigit((unsigned char)*c) && v <= 65535; c++)
      v = v * 10 + (*c - '0');
    if (c == port || c != aend || v < 1 || v > 65535) {
      *why = "invalid port";
      return -1;
    }
    out->port = (int)v;
  }
  out->path_off = (size_t)(aend - url);
  return 0;
}

int kn_host_is_loopback_literal(const char *host) {
  if (kn_str_ieq(host, "localhost")) return 1;
  struct in_addr a4;
  if (inet_pton(AF_INET, host, &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  struct in6_addr a6;
  if (inet_pton(AF_INET6, host, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return 0;
}
