/* The _libkinesis module: KinesisError, configuration, constants. */
#include <math.h>
#include <string.h>

#include "knpy.h"

PyObject *knpy_KinesisError;

/* ---- errors ---- */

static int set_attr(PyObject *o, const char *name, PyObject *v) {
  if (!v) return -1;
  int r = PyObject_SetAttrString(o, name, v);
  Py_DECREF(v);
  return r;
}

static PyObject *str_or_none(const char *s) {
  if (s) return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
  Py_RETURN_NONE;
}

static PyObject *error_build(kn_err_t code, const char *message, int retriable,
                             int fatal, const char *type, int http_status,
                             const char *request_id, int throttling) {
  PyObject *msg = str_or_none(message ? message : kn_err2str(code));
  if (!msg) return NULL;
  PyObject *e = PyObject_CallOneArg(knpy_KinesisError, msg);
  Py_DECREF(msg);
  if (!e) return NULL;
  if (set_attr(e, "code", PyLong_FromLong(code)) ||
      set_attr(e, "name", PyUnicode_FromString(kn_err2name(code))) ||
      set_attr(e, "retriable", PyBool_FromLong(retriable)) ||
      set_attr(e, "fatal", PyBool_FromLong(fatal)) ||
      set_attr(e, "throttling", PyBool_FromLong(throttling)) ||
      set_attr(e, "error_type", str_or_none(type)) ||
      set_attr(e, "http_status", PyLong_FromLong(http_status)) ||
      set_attr(e, "request_id", str_or_none(request_id))) {
    Py_DECREF(e);
    return NULL;
  }
  return e;
}

PyObject *knpy_error_new(kn_err_t code, const char *message, int retriable,
                         int fatal) {
  return error_build(code, message, retriable, fatal, NULL, 0, NULL, 0);
}

PyObject *knpy_error_from(const kn_error_t *e, int fatal) {
  return error_build(kn_error_code(e), kn_error_string(e),
                     kn_error_is_retriable(e), fatal, kn_error_type(e),
                     kn_error_http_status(e), kn_error_request_id(e),
                     kn_error_is_throttling(e));
}

static PyObject *raise_instance(PyObject *e) {
  if (e) {
    PyErr_SetObject(knpy_KinesisError, e);
    Py_DECREF(e);
  }
  return NULL;
}

PyObject *knpy_raise(kn_err_t code, const char *message) {
  int retriable = code == KN_ERR__QUEUE_FULL || code == KN_ERR__TIMED_OUT;
  return raise_instance(knpy_error_new(code, message, retriable, 0));
}

PyObject *knpy_raise_error(kn_error_t *e, int fatal) {
  PyObject *o = knpy_error_from(e, fatal);
  kn_error_destroy(e);
  return raise_instance(o);
}

/* ---- pending callback exceptions ---- */

void knpy_pending_keep(knpy_pending_t *p) {
  if (p->type) {
    PyErr_WriteUnraisable(NULL);
    return;
  }
  PyErr_Fetch(&p->type, &p->value, &p->tb);
}

int knpy_pending_raise(knpy_pending_t *p) {
  if (!p->type) return 0;
  PyErr_Restore(p->type, p->value, p->tb);
  p->type = p->value = p->tb = NULL;
  return -1;
}

void knpy_pending_clear(knpy_pending_t *p) {
  Py_CLEAR(p->type);
  Py_CLEAR(p->value);
  Py_CLEAR(p->tb);
}

/* ---- configuration ---- */

static PyObject *value_text(PyObject *v) {
  if (v == Py_True) return PyUnicode_FromString("true");
  if (v == Py_False) return PyUnicode_FromString("false");
  if (PyUnicode_Check(v) || PyLong_Check(v) || PyFloat_Check(v))
    return PyObject_Str(v);
  return NULL;
}

kn_conf_t *knpy_conf_from(PyObject *dict) {
  kn_conf_t *conf = kn_conf_new();
  if (!conf) {
    PyErr_NoMemory();
    return NULL;
  }
  if (!dict || dict == Py_None) return conf;
  if (!PyDict_Check(dict)) {
    PyErr_SetString(PyExc_TypeError, "conf must be a dict");
    goto fail;
  }
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dict, &pos, &k, &v)) {
    if (!PyUnicode_Check(k)) {
      PyErr_SetString(PyExc_TypeError, "conf keys must be str");
      goto fail;
    }
    if (v == Py_None) continue;
    const char *name = PyUnicode_AsUTF8(k);
    if (!name) goto fail;
    PyObject *text = value_text(v);
    if (!text) {
      PyErr_Format(PyExc_TypeError,
                   "conf property \"%s\": value must be str, int, float or "
                   "bool, not %s",
                   name, Py_TYPE(v)->tp_name);
      goto fail;
    }
    const char *value = PyUnicode_AsUTF8(text);
    if (!value) {
      Py_DECREF(text);
      goto fail;
    }
    char errstr[512] = "";
    kn_conf_res_t r = kn_conf_set(conf, name, value, errstr, sizeof(errstr));
    Py_DECREF(text);
    if (r == KN_CONF_OK) continue;
    char msg[768];
    if (r == KN_CONF_UNKNOWN)
      snprintf(msg, sizeof(msg), "unknown property \"%s\"", name);
    else
      snprintf(msg, sizeof(msg), "property \"%s\": %s", name,
               errstr[0] ? errstr : "invalid value");
    knpy_raise(KN_ERR__CONF, msg);
    goto fail;
  }
  return conf;
fail:
  kn_conf_destroy(conf);
  return NULL;
}

long long knpy_timeout_ms(PyObject *timeout) {
  if (!timeout || timeout == Py_None) return -1;
  double s = PyFloat_AsDouble(timeout);
  if (s == -1.0 && PyErr_Occurred()) return -2;
  if (isnan(s)) {
    PyErr_SetString(PyExc_ValueError, "timeout is NaN");
    return -2;
  }
  if (s < 0) return -1;
  double ms = ceil(s * 1000.0);
  return ms > 2147483647.0 ? -1 : (long long)ms;
}

int knpy_wait_sliced(long long timeout_ms, void (*wait)(void *ctx, int ms),
                     int (*done)(void *ctx), void *ctx) {
  long long left = timeout_ms;
  for (;;) {
    int slice = left < 0 || left > KNPY_SLICE_MS ? KNPY_SLICE_MS : (int)left;
    KNPY_UNLOCKED(wait(ctx, slice));
    int r = done(ctx);
    if (r) return r;
    if (PyErr_CheckSignals() < 0) return -1;
    if (left >= 0) {
      left -= slice;
      if (left <= 0) return 0;
    }
  }
}

/* ---- module ---- */

static PyObject *mod_version(PyObject *self, PyObject *unused) {
  return PyUnicode_FromString(kn_version_str());
}

static PyObject *mod_err2str(PyObject *self, PyObject *arg) {
  long code = PyLong_AsLong(arg);
  if (code == -1 && PyErr_Occurred()) return NULL;
  return PyUnicode_FromString(kn_err2str((kn_err_t)code));
}

static PyObject *mod_properties(PyObject *self, PyObject *unused) {
  char *buf = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&buf, &len);
  if (!fp) return PyErr_NoMemory();
  kn_conf_properties_show(fp);
  fclose(fp);
  PyObject *s = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len, "replace");
  free(buf);
  return s;
}

static PyMethodDef mod_methods[] = {
    {"version", mod_version, METH_NOARGS, "The C library's version."},
    {"err2str", mod_err2str, METH_O, "The description of an error code."},
    {"properties", mod_properties, METH_NOARGS,
     "Every configuration property (name, scope, default, description), as "
     "`kncat -X list` prints them."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef mod_def = {
    PyModuleDef_HEAD_INIT, "_libkinesis",
    "The C extension of libkinesis (use the libkinesis package).", -1,
    mod_methods};

static int add_type(PyObject *m, PyTypeObject *t, const char *name) {
  if (PyType_Ready(t) < 0) return -1;
  Py_INCREF(t);
  if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
    Py_DECREF(t);
    return -1;
  }
  return 0;
}

int knpy_report_type_init(void);

PyMODINIT_FUNC PyInit__libkinesis(void) {
  PyObject *m = PyModule_Create(&mod_def);
  if (!m) return NULL;
  knpy_KinesisError = PyErr_NewExceptionWithDoc(
      "libkinesis.KinesisError",
      "An error of the library: .code (an ERR_* constant), .name, "
      ".retriable, .fatal, .throttling, .error_type, .http_status, "
      ".request_id.",
      NULL, NULL);
  if (!knpy_KinesisError) goto fail;
  Py_INCREF(knpy_KinesisError);
  if (PyModule_AddObject(m, "KinesisError", knpy_KinesisError) < 0) {
    Py_DECREF(knpy_KinesisError);
    goto fail;
  }
  if (knpy_report_type_init() < 0 ||
      add_type(m, &knpy_ConsumerType, "Consumer") < 0 ||
      add_type(m, &knpy_ProducerType, "Producer") < 0 ||
      add_type(m, &knpy_BatchType, "Batch") < 0 ||
      add_type(m, &knpy_RecordType, "Record") < 0 ||
      add_type(m, &knpy_DeliveryReportType, "DeliveryReport") < 0)
    goto fail;
  static const int ranges[][2] = {{KN_ERR__FAIL, KN_ERR__HANDOFF},
                                  {KN_ERR_NO_ERROR, KN_ERR_REMOTE_OTHER}};
  for (size_t i = 0; i < 2; i++)
    for (int c = ranges[i][0]; c <= ranges[i][1]; c++) {
      char name[80];
      snprintf(name, sizeof(name), "ERR_%s", kn_err2name((kn_err_t)c));
      if (PyModule_AddIntConstant(m, name, c) < 0) goto fail;
    }
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
