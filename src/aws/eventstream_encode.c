/* Event stream encoder and header builders (see eventstream.h). */
#include "aws/eventstream.h"

#include <string.h>
#include <zlib.h>

#include "core/error.h"

const char *kn_evs_type_name(kn_evs_type_t type) {
  static const char *const names[] = {"bool",      "bool", "byte",  "short",
                                      "int",       "long", "bytes", "string",
                                      "timestamp", "uuid"};
  return (unsigned)type <= KN_EVS_UUID ? names[type] : "unknown";
}

/* Encoded size of one header, or 0 with *why set if it cannot be
 * encoded. */
static size_t header_len(const kn_evs_header_t *h, const char **why) {
  if (h->name_len > 255) {
    *why = "name longer than 255 bytes";
    return 0;
  }
  size_t n = 1 + h->name_len + 1;
  int64_t v = h->num;
  switch (h->type) {
    case KN_EVS_BOOL_TRUE:
    case KN_EVS_BOOL_FALSE:
      return n;
    case KN_EVS_BYTE:
      if (v < INT8_MIN || v > INT8_MAX) break;
      return n + 1;
    case KN_EVS_SHORT:
      if (v < INT16_MIN || v > INT16_MAX) break;
      return n + 2;
    case KN_EVS_INT:
      if (v < INT32_MIN || v > INT32_MAX) break;
      return n + 4;
    case KN_EVS_LONG:
    case KN_EVS_TIMESTAMP:
      return n + 8;
    case KN_EVS_BYTES:
    case KN_EVS_STRING:
      if (h->val_len > 65535) {
        *why = "value longer than 65535 bytes";
        return 0;
      }
      if (h->val_len && !h->val) {
        *why = "value missing";
        return 0;
      }
      return n + 2 + h->val_len;
    case KN_EVS_UUID:
      if (h->val_len != 16 || !h->val) {
        *why = "UUID not 16 bytes";
        return 0;
      }
      return n + 16;
    default:
      *why = "unknown value type";
      return 0;
  }
  *why = "value out of range for its type";
  return 0;
}

/* Sum of the header sizes, or 0 with *bad the index of the first header
 * that cannot be encoded. */
static size_t headers_len(const kn_evs_header_t *hs, size_t n, size_t *bad,
                          const char **why) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    size_t k = header_len(&hs[i], why);
    if (!k) {
      *bad = i;
      return 0;
    }
    total += k;
    if (total > UINT32_MAX) {
      *bad = i;
      *why = "headers over 4 GiB";
      return 0;
    }
  }
  *bad = n;
  return total;
}

size_t kn_evs_encoded_len(const kn_evs_header_t *headers, size_t n_headers,
                          size_t payload_len) {
  size_t bad;
  const char *why;
  size_t hl = headers_len(headers, n_headers, &bad, &why);
  if (bad < n_headers) return 0;
  if (payload_len > UINT32_MAX - KN_EVS_MIN_FRAME - hl) return 0;
  return KN_EVS_MIN_FRAME + hl + payload_len;
}

static uint8_t *put32(uint8_t *o, uint32_t v) {
  o[0] = (uint8_t)(v >> 24);
  o[1] = (uint8_t)(v >> 16);
  o[2] = (uint8_t)(v >> 8);
  o[3] = (uint8_t)v;
  return o + 4;
}

static uint8_t *put64(uint8_t *o, int64_t v) {
  uint64_t u = (uint64_t)v; /* two's complement by definition of the cast */
  put32(o, (uint32_t)(u >> 32));
  return put32(o + 4, (uint32_t)u);
}

static uint8_t *put_header(uint8_t *o, const kn_evs_header_t *h) {
  *o++ = (uint8_t)h->name_len;
  if (h->name_len) memcpy(o, h->name, h->name_len);
  o += h->name_len;
  *o++ = (uint8_t)h->type;
  uint64_t u = (uint64_t)h->num;
  switch (h->type) {
    case KN_EVS_BOOL_TRUE:
    case KN_EVS_BOOL_FALSE:
      break;
    case KN_EVS_BYTE:
      *o++ = (uint8_t)u;
      break;
    case KN_EVS_SHORT:
      *o++ = (uint8_t)(u >> 8);
      *o++ = (uint8_t)u;
      break;
    case KN_EVS_INT:
      o = put32(o, (uint32_t)u);
      break;
    case KN_EVS_LONG:
    case KN_EVS_TIMESTAMP:
      o = put64(o, h->num);
      break;
    case KN_EVS_BYTES:
    case KN_EVS_STRING:
      *o++ = (uint8_t)(h->val_len >> 8);
      *o++ = (uint8_t)h->val_len;
      /* fall through */
    case KN_EVS_UUID:
      if (h->val_len) memcpy(o, h->val, h->val_len);
      o += h->val_len;
      break;
  }
  return o;
}

kn_err_t kn_evs_encode(kn_buf_t *out, const kn_evs_header_t *headers,
                       size_t n_headers, const void *payload,
                       size_t payload_len, kn_error_t **errp) {
  if (errp) *errp = NULL;
  size_t bad;
  const char *why = NULL;
  size_t hl = headers_len(headers, n_headers, &bad, &why);
  if (bad < n_headers) {
    const kn_evs_header_t *h = &headers[bad];
    if (errp)
      *errp =
          kn_error_new(KN_ERR__INVALID_ARG,
                       "event stream: cannot encode header %zu \"%.*s\" "
                       "(%s): %s",
                       bad, h->name_len > 255 ? 255 : (int)h->name_len,
                       h->name ? h->name : "", kn_evs_type_name(h->type), why);
    return KN_ERR__INVALID_ARG;
  }
  if (payload_len > UINT32_MAX - KN_EVS_MIN_FRAME - hl) {
    if (errp)
      *errp = kn_error_new(KN_ERR__INVALID_ARG,
                           "event stream: frame over 4 GiB (%zu header bytes, "
                           "%zu payload bytes)",
                           hl, payload_len);
    return KN_ERR__INVALID_ARG;
  }
  size_t total = KN_EVS_MIN_FRAME + hl + payload_len;
  if (kn_buf_reserve(out, total)) {
    if (errp)
      *errp = kn_error_new(KN_ERR__NOMEM,
                           "event stream: out of memory for a "
                           "%zu-byte frame",
                           total);
    return KN_ERR__NOMEM;
  }
  uint8_t *f = (uint8_t *)out->p + out->len, *o = f;
  o = put32(o, (uint32_t)total);
  o = put32(o, (uint32_t)hl);
  uLong crc = crc32(0, NULL, 0);
  crc = crc32(crc, f, 8);
  o = put32(o, (uint32_t)crc);
  for (size_t i = 0; i < n_headers; i++) o = put_header(o, &headers[i]);
  if (payload_len) memcpy(o, payload, payload_len);
  o += payload_len;
  /* Frames are below 4 GiB, so one crc32 call per part is enough. */
  crc = crc32(crc, f + 8, (uInt)(o - f - 8));
  o = put32(o, (uint32_t)crc);
  out->len += total;
  out->p[out->len] = '\0';
  return KN_ERR_NO_ERROR;
}

kn_evs_header_t kn_evs_h_str(const char *name, const char *s) {
  return kn_evs_h_bin(name, KN_EVS_STRING, s, strlen(s));
}

kn_evs_header_t kn_evs_h_bool(const char *name, int v) {
  kn_evs_header_t h = {
      name,      strlen(name), v ? KN_EVS_BOOL_TRUE : KN_EVS_BOOL_FALSE,
      v ? 1 : 0, NULL,         0};
  return h;
}

kn_evs_header_t kn_evs_h_num(const char *name, kn_evs_type_t type, int64_t v) {
  kn_evs_header_t h = {name, strlen(name), type, v, NULL, 0};
  return h;
}

kn_evs_header_t kn_evs_h_bin(const char *name, kn_evs_type_t type,
                             const void *p, size_t len) {
  kn_evs_header_t h = {name, strlen(name), type, 0, p, len};
  return h;
}
