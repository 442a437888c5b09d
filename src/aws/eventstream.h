/* The AWS event stream framing (application/vnd.amazon.eventstream):
 * an incremental decoder and an encoder.  Pure: bytes in, messages out.
 *
 * A frame ("message") is
 *   total length (u32 BE) | headers length (u32 BE) | prelude CRC32 (u32 BE)
 *   | headers | payload | message CRC32 (u32 BE)
 * where the prelude CRC covers the first 8 bytes and the message CRC every
 * byte before it.  A header is
 *   name length (u8) | name | value type (u8) | value
 * with the value types of kn_evs_type_t; multi-byte numbers are big-endian
 * and two's complement, byte arrays and strings carry a u16 BE length.
 *
 * Decoding is push-style: feed bytes in pieces of any size (one byte at a
 * time works) and each complete, verified message goes to a callback.  A
 * frame that arrives whole inside one piece is handed over in place (no
 * copy); a frame split across pieces is copied once into a buffer of its
 * exact size, which the callback may take over with kn_evs_take_frame()
 * to keep the payload without a second copy. */
#ifndef KN_AWS_EVENTSTREAM_H
#define KN_AWS_EVENTSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "kn/error.h"
#include "util/buf.h"

#define KN_EVS_PRELUDE_LEN 12
#define KN_EVS_MIN_FRAME 16 /* prelude + message CRC */
/* The protocol's limits: a message (frame) of at most 16 MiB in all, of
 * which at most 128 KiB of headers.  A frame that declares more is
 * refused before anything is allocated for it.  Kinesis events stay well
 * below them. */
#define KN_EVS_MAX_MESSAGE (16u * 1024 * 1024)
#define KN_EVS_MAX_HEADERS (128u * 1024)
/* Default cap on a frame's total length: the protocol's. */
#define KN_EVS_DEFAULT_MAX_FRAME KN_EVS_MAX_MESSAGE

/* Header value types; the numbers are the wire tags. */
typedef enum kn_evs_type {
  KN_EVS_BOOL_TRUE = 0,
  KN_EVS_BOOL_FALSE = 1,
  KN_EVS_BYTE = 2,      /* int8 */
  KN_EVS_SHORT = 3,     /* int16 */
  KN_EVS_INT = 4,       /* int32 */
  KN_EVS_LONG = 5,      /* int64 */
  KN_EVS_BYTES = 6,     /* u16 length + bytes */
  KN_EVS_STRING = 7,    /* u16 length + UTF-8 (not checked) */
  KN_EVS_TIMESTAMP = 8, /* int64 milliseconds since the Unix epoch */
  KN_EVS_UUID = 9       /* 16 bytes */
} kn_evs_type_t;

/* "bool", "byte", ..., "uuid"; "unknown" for other values. */
const char *kn_evs_type_name(kn_evs_type_t type);

/* One header.  Decoded headers point into the frame (nothing is
 * NUL-terminated).  To encode, fill one in (see the kn_evs_h_* helpers);
 * the encoder copies what it points at. */
typedef struct kn_evs_header {
  const char *name;
  size_t name_len; /* 0..255 */
  kn_evs_type_t type;
  int64_t num;        /* BOOL_* (1 or 0), BYTE, SHORT, INT, LONG, TIMESTAMP */
  const uint8_t *val; /* BYTES, STRING, UUID */
  size_t val_len;     /* BYTES and STRING: 0..65535; UUID: 16 */
} kn_evs_header_t;

/* A decoded message.  Every pointer (headers, their names and values, the
 * payload, the frame) is valid only during the callback. */
typedef struct kn_evs_msg {
  const kn_evs_header_t *headers; /* in wire order */
  size_t n_headers;
  const uint8_t *payload;
  size_t payload_len;
  const uint8_t *frame; /* the whole frame, prelude to CRC */
  size_t frame_len;
  uint64_t offset; /* of the frame in the stream, for diagnostics */
} kn_evs_msg_t;

/* The last header named name (NUL-terminated), as the JS SDK keeps the
 * last of duplicates; NULL if none. */
const kn_evs_header_t *kn_evs_msg_header(const kn_evs_msg_t *msg,
                                         const char *name);
/* The value of string header name, or NULL when it is absent or not a
 * string; *len gets its length.  Not NUL-terminated. */
const char *kn_evs_msg_str(const kn_evs_msg_t *msg, const char *name,
                           size_t *len);
/* Non-zero if header name is a string equal to s (NUL-terminated). */
int kn_evs_msg_str_eq(const kn_evs_msg_t *msg, const char *name, const char *s);

/* ---- Decoder ---- */

typedef struct kn_evs_decoder kn_evs_decoder_t;

/* Called once per complete message whose lengths, CRCs and headers are
 * valid, in stream order, from inside kn_evs_feed().  Return 0 to go on;
 * any other value stops the decoder (kn_evs_feed() returns KN_ERR__STATE
 * at once and the rest of the input is ignored).  The callback must not
 * feed or destroy its own decoder. */
typedef int(kn_evs_msg_cb)(void *opaque, kn_evs_decoder_t *d,
                           const kn_evs_msg_t *msg);

/* max_frame caps a frame's total length (0: KN_EVS_DEFAULT_MAX_FRAME;
 * at least KN_EVS_MIN_FRAME, at most KN_EVS_MAX_MESSAGE).  cb must not be NULL.
 * Returns NULL on out-of-memory. */
kn_evs_decoder_t *kn_evs_decoder_new(size_t max_frame, kn_evs_msg_cb *cb,
                                     void *opaque);
/* Accepts NULL. */
void kn_evs_decoder_destroy(kn_evs_decoder_t *d);

/* Consumes len bytes (data is not kept after the call; the part of an
 * unfinished frame is copied).  Returns
 *   KN_ERR_NO_ERROR  every byte consumed, every complete message delivered;
 *   KN_ERR__CORRUPT  a bad frame (length out of bounds, CRC mismatch,
 *                    truncated or unknown header value);
 *   KN_ERR__NOMEM    out of memory;
 *   KN_ERR__STATE    the callback stopped the decoder, or called
 *                    kn_evs_feed() on it.
 * On any error *errp (when errp is not NULL) gets an error the caller
 * destroys, and the decoder stays failed: later calls return the same
 * code and deliver nothing. */
kn_err_t kn_evs_feed(kn_evs_decoder_t *d, const void *data, size_t len,
                     kn_error_t **errp);

/* At the end of the stream: KN_ERR_NO_ERROR if it ended between frames,
 * else KN_ERR__CORRUPT ("truncated") or the decoder's earlier failure, as
 * for kn_evs_feed(). */
kn_err_t kn_evs_finish(kn_evs_decoder_t *d, kn_error_t **errp);

/* Bytes of an incomplete frame held by the decoder. */
size_t kn_evs_pending(const kn_evs_decoder_t *d);
/* Frames delivered so far. */
uint64_t kn_evs_frames(const kn_evs_decoder_t *d);

/* Only inside the callback: the current frame as a writable malloc'ed
 * buffer that the caller now owns (free()).  It holds msg->frame_len bytes
 * plus a NUL after them, so the payload sits at
 * (msg->payload - msg->frame).  A frame the decoder buffered is handed
 * over without copying; a frame delivered in place is copied.  NULL on
 * out-of-memory, outside a callback, or when already taken for this
 * message.  msg's pointers keep pointing at the old bytes, which stay
 * valid until the callback returns. */
uint8_t *kn_evs_take_frame(kn_evs_decoder_t *d);

/* ---- Encoder ---- */

/* Appends one frame to out.  Returns KN_ERR_NO_ERROR; KN_ERR__INVALID_ARG
 * (with *errp) for a header that cannot be encoded (name over 255 bytes,
 * value out of its type's range, byte array or string over 65535 bytes,
 * UUID not 16 bytes, unknown type) or a frame over 4 GiB; KN_ERR__NOMEM.
 * On error out is left as it was. */
kn_err_t kn_evs_encode(kn_buf_t *out, const kn_evs_header_t *headers,
                       size_t n_headers, const void *payload,
                       size_t payload_len, kn_error_t **errp);

/* The exact encoded size, or 0 if the headers cannot be encoded. */
size_t kn_evs_encoded_len(const kn_evs_header_t *headers, size_t n_headers,
                          size_t payload_len);

/* Header builders; name and s are NUL-terminated and must outlive the
 * encode call. */
kn_evs_header_t kn_evs_h_str(const char *name, const char *s);
kn_evs_header_t kn_evs_h_bool(const char *name, int v);
/* BYTE, SHORT, INT, LONG or TIMESTAMP. */
kn_evs_header_t kn_evs_h_num(const char *name, kn_evs_type_t type, int64_t v);
/* BYTES, STRING or UUID. */
kn_evs_header_t kn_evs_h_bin(const char *name, kn_evs_type_t type,
                             const void *p, size_t len);

#endif
