/* JSON documents through jansson: the one header that includes it.
 *
 * Lookups are forgiving in the way the servers need: an absent member, an
 * explicit null and a value of the wrong type all read as "not there", and
 * decoders decide which members they require.  Returned pointers are owned
 * by the document. */
#ifndef KN_UTIL_JSON_H
#define KN_UTIL_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "kn/error.h"

/* Parses body[0..len), whose top level must be an object; *out is freed
 * with json_decref().  Errors are KN_ERR__BAD_MSG naming `what` and the
 * position. */
kn_error_t *kn_json_parse_object(const char *body, size_t len, const char *what,
                                 json_t **out);

/* The member's value if it has that type, else NULL. */
const char *kn_json_str(const json_t *obj, const char *key);
json_t *kn_json_obj(const json_t *obj, const char *key);
json_t *kn_json_arr(const json_t *obj, const char *key);

/* Numbers in any JSON form.  0 with *out set; 1 when absent or null; -1
 * when the value is not a number or out of range. */
int kn_json_i64(const json_t *obj, const char *key, int64_t *out);
/* A timestamp in epoch seconds (integer or fraction) as milliseconds. */
int kn_json_epoch_ms(const json_t *obj, const char *key, int64_t *out);
/* true/false: 0 with *out set; 1 absent or null; -1 another type. */
int kn_json_bool(const json_t *obj, const char *key, int *out);

#endif
