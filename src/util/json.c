#include "util/json.h"

#include <math.h>

#include "core/error.h"

kn_error_t *kn_json_parse_object(const char *body, size_t len, const char *what,
                                 json_t **out) {
  json_error_t jerr;
  *out = NULL;
  json_t *doc = json_loadb(body ? body : "", body ? len : 0, 0, &jerr);
  if (!doc)
    return kn_error_new(KN_ERR__BAD_MSG, "malformed %s: %s at byte %d", what,
                        jerr.text, jerr.position);
  if (!json_is_object(doc)) {
    json_decref(doc);
    return kn_error_new(KN_ERR__BAD_MSG, "malformed %s: not a JSON object",
                        what);
  }
  *out = doc;
  return NULL;
}

const char *kn_json_str(const json_t *obj, const char *key) {
  return json_string_value(json_object_get(obj, key));
}

json_t *kn_json_obj(const json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);
  return json_is_object(v) ? v : NULL;
}

json_t *kn_json_arr(const json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);
  return json_is_array(v) ? v : NULL;
}

/* The value times 10^scale (0 or 3), rounded. */
static int num_scaled(const json_t *v, int scale, int64_t *out) {
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    if (scale && (i > INT64_MAX / 1000 || i < INT64_MIN / 1000)) return -1;
    *out = (int64_t)i * (scale ? 1000 : 1);
    return 0;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v) * (scale ? 1000.0 : 1.0);
    /* Bounds strictly inside int64_t so the conversion is defined. */
    if (!(d > -9.2e18 && d < 9.2e18)) return -1;
    *out = (int64_t)llround(d);
    return 0;
  }
  return -1;
}

int kn_json_i64(const json_t *obj, const char *key, int64_t *out) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) return 1;
  return num_scaled(v, 0, out);
}

int kn_json_epoch_ms(const json_t *obj, const char *key, int64_t *out) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) return 1;
  return num_scaled(v, 3, out);
}

int kn_json_bool(const json_t *obj, const char *key, int *out) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) return 1;
  if (!json_is_boolean(v)) return -1;
  *out = json_is_true(v);
  return 0;
}
