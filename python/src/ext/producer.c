/* Producer: kn_producer_t for Python.
 *
 * produce() copies the record and returns at once.  Each record's
 * on_delivery callable (a reference held from produce until its report)
 * runs inside poll, flush or close on the calling thread, as
 * on_delivery(err, report): err is None or a KinesisError, report a
 * DeliveryReport.  An exception a callback raises is raised by the call
 * that ran it, after every report ready then has been served. */
#include <string.h>

#include "knpy.h"

typedef struct {
  PyObject_HEAD kn_producer_t *kp; /* owned; NULL before init */
  knpy_pending_t pending;
  int closed;
} ProducerObject;

/* ---- delivery reports ---- */

static PyStructSequence_Field report_fields[] = {
    {"shard_id", "The shard that stored the record, or None."},
    {"sequence_number", "Sequence number of the Kinesis record holding it."},
    {"sub_sequence_number", "Its position in the aggregate (0 when plain)."},
    {"aggregated", "True if stored inside a KPL aggregate."},
    {"partition_key", "The record's partition key."},
    {"explicit_hash_key", "The explicit hash key, or None."},
    {"attempts", "PutRecords calls that carried it."},
    {NULL}};

static PyStructSequence_Desc report_desc = {
    "libkinesis.DeliveryReport",
    "Where a produced record was stored (or what was tried).", report_fields,
    7};

PyTypeObject knpy_DeliveryReportType;

int knpy_report_type_init(void) {
  return PyStructSequence_InitType2(&knpy_DeliveryReportType, &report_desc);
}

static PyObject *text(const char *s) {
  if (!s) Py_RETURN_NONE;
  return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "surrogateescape");
}

static PyObject *report_new(const kn_msg_t *m) {
  PyObject *r = PyStructSequence_New(&knpy_DeliveryReportType);
  if (!r) return NULL;
  PyObject *v[7] = {text(kn_msg_shard_id(m)),
                    text(kn_msg_sequence_number(m)),
                    PyLong_FromUnsignedLongLong(kn_msg_subsequence_number(m)),
                    PyBool_FromLong(kn_msg_aggregated(m)),
                    text(*kn_msg_partition_key(m) ? kn_msg_partition_key(m)
                                                   : NULL),
                    text(kn_msg_explicit_hash_key(m)),
                    PyLong_FromLong(kn_msg_attempts(m))};
  int ok = 1;
  for (int i = 0; i < 7; i++) {
    if (!v[i]) ok = 0;
    PyStructSequence_SetItem(r, i, v[i] ? v[i] : Py_NewRef(Py_None));
  }
  if (!ok) Py_CLEAR(r);
  return r;
}

/* Runs on the thread in poll/flush/close/destroy, GIL released. */
static void cb_delivery(kn_producer_t *kp, const kn_msg_t *m, void *opaque) {
  PyObject *fn = kn_msg_opaque(m);
  if (!fn) return;
  ProducerObject *self = opaque;
  PyGILState_STATE g = PyGILState_Ensure();
  const kn_error_t *e = kn_msg_error(m);
  PyObject *err = e ? knpy_error_from(e, 0) : Py_NewRef(Py_None);
  PyObject *rep = err ? report_new(m) : NULL;
  PyObject *res = rep ? PyObject_CallFunctionObjArgs(fn, err, rep, NULL) : NULL;
  if (res)
    Py_DECREF(res);
  else if (self)
    knpy_pending_keep(&self->pending);
  else
    PyErr_WriteUnraisable(fn);
  Py_XDECREF(err);
  Py_XDECREF(rep);
  Py_DECREF(fn); /* the reference produce() took */
  PyGILState_Release(g);
}

/* ---- life ---- */

static int producer_init(ProducerObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"conf", NULL};
  PyObject *conf_dict = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Producer", kwlist, &conf_dict))
    return -1;
  if (self->kp) {
    PyErr_SetString(PyExc_RuntimeError, "Producer already initialised");
    return -1;
  }
  kn_conf_t *conf = knpy_conf_from(conf_dict);
  if (!conf) return -1;
  kn_conf_set_delivery_cb(conf, cb_delivery, self);
  char errstr[512] = "";
  kn_producer_t *kp;
  KNPY_UNLOCKED(kp = kn_producer_new(conf, errstr, sizeof(errstr)));
  kn_conf_destroy(conf);
  if (!kp) {
    knpy_raise(KN_ERR__CONF, errstr);
    return -1;
  }
  self->kp = kp;
  return 0;
}

static void producer_dealloc(ProducerObject *self) {
  if (self->kp) {
    /* Reports still due run their callbacks here (KN_ERR__DESTROY when not
     * closed); their exceptions have no caller left. */
    kn_producer_t *kp = self->kp;
    KNPY_UNLOCKED(kn_producer_destroy(kp));
    self->kp = NULL;
  }
  if (self->pending.type) {
    knpy_pending_raise(&self->pending);
    PyErr_WriteUnraisable((PyObject *)self);
  }
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int usable(ProducerObject *self) {
  if (!self->kp) {
    PyErr_SetString(PyExc_RuntimeError, "Producer not initialised");
    return 0;
  }
  if (self->closed) {
    knpy_raise(KN_ERR__STATE, "the producer is closed");
    return 0;
  }
  return 1;
}

/* ---- produce ---- */

static PyObject *producer_produce(ProducerObject *self, PyObject *args,
                                  PyObject *kw) {
  static char *kwlist[] = {"data", "partition_key", "explicit_hash_key",
                           "on_delivery", NULL};
  Py_buffer data = {0};
  const char *key = NULL, *hash_key = NULL;
  PyObject *key_obj = NULL, *on_delivery = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "s*|$OzO:produce", kwlist, &data,
                                   &key_obj, &hash_key, &on_delivery))
    return NULL;
  PyObject *out = NULL;
  if (!key_obj) {
    PyErr_SetString(PyExc_TypeError, "produce() needs partition_key");
    goto end;
  }
  /* None: no key, for a stream whose service places records (AUTO). */
  if (key_obj != Py_None) {
    if (!PyUnicode_Check(key_obj)) {
      PyErr_SetString(PyExc_TypeError, "partition_key must be str or None");
      goto end;
    }
    Py_ssize_t n;
    if (!(key = PyUnicode_AsUTF8AndSize(key_obj, &n))) goto end;
    if ((size_t)n != strlen(key)) {
      PyErr_SetString(PyExc_ValueError, "embedded null character");
      goto end;
    }
  }
  if (on_delivery != Py_None && !PyCallable_Check(on_delivery)) {
    PyErr_SetString(PyExc_TypeError, "on_delivery must be callable");
    goto end;
  }
  if (!usable(self)) goto end;
  PyObject *fn = on_delivery == Py_None ? NULL : Py_NewRef(on_delivery);
  kn_err_t err = kn_producer_send(self->kp, key, hash_key, data.buf,
                                  (size_t)data.len, KN_MSG_F_COPY, fn);
  if (err != KN_ERR_NO_ERROR) {
    Py_XDECREF(fn);
    const char *why = kn_err2str(err);
    char msg[256];
    if (err == KN_ERR__QUEUE_FULL)
      why =
          "the queue is full (queue.max.records or queue.max.bytes): poll "
          "and produce again";
    else if (err == KN_ERR__INVALID_ARG) {
      snprintf(msg, sizeof(msg),
               "bad record: a partition key of 1 to 256 characters (None "
               "only on a stream whose RecordDistributionStrategy is AUTO), "
               "an explicit hash key in [0, 2^128-1] and data and key "
               "together within the stream's MaxRecordSizeInKiB (1 MiB "
               "unless raised, at most 10 MiB)");
      why = msg;
    }
    knpy_raise(err, why);
    goto end;
  }
  out = Py_NewRef(Py_None);
end:
  PyBuffer_Release(&data);
  return out;
}

/* ---- serving reports ---- */

typedef struct {
  ProducerObject *self;
  int served;     /* poll: reports served in the last slice */
  kn_err_t flush; /* flush: the last slice's outcome */
} serve_t;

static void poll_slice(void *ctx, int ms) {
  serve_t *s = ctx;
  s->served = kn_producer_poll(s->self->kp, ms);
}
static int poll_done(void *ctx) {
  serve_t *s = ctx;
  if (knpy_pending_raise(&s->self->pending)) return -1;
  return s->served > 0;
}
static void flush_slice(void *ctx, int ms) {
  serve_t *s = ctx;
  s->flush = kn_producer_flush(s->self->kp, ms);
}
static int flush_done(void *ctx) {
  serve_t *s = ctx;
  if (knpy_pending_raise(&s->self->pending)) return -1;
  return s->flush == KN_ERR_NO_ERROR;
}

/* poll() and flush(): the timeout argument, then the sliced wait. */
static int serve(ProducerObject *self, PyObject *args, PyObject *kw,
                 const char *fmt, int flush, serve_t *s) {
  static char *kwlist[] = {"timeout", NULL};
  PyObject *timeout = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &timeout)) return -1;
  long long ms = knpy_timeout_ms(timeout);
  if (ms == -2 || !usable(self)) return -1;
  s->self = self;
  return knpy_wait_sliced(ms, flush ? flush_slice : poll_slice,
                          flush ? flush_done : poll_done, s);
}

static PyObject *producer_poll(ProducerObject *self, PyObject *args,
                               PyObject *kw) {
  serve_t s = {0};
  int r = serve(self, args, kw, "|O:poll", 0, &s);
  return r < 0 ? NULL : PyLong_FromLong(r ? s.served : 0);
}

static PyObject *producer_flush(ProducerObject *self, PyObject *args,
                                PyObject *kw) {
  serve_t s = {0};
  if (serve(self, args, kw, "|O:flush", 1, &s) < 0) return NULL;
  return PyLong_FromSize_t(kn_producer_outq_len(self->kp));
}

static PyObject *producer_close(ProducerObject *self, PyObject *unused) {
  if (!self->kp || self->closed) Py_RETURN_NONE;
  self->closed = 1;
  kn_error_t *e;
  KNPY_UNLOCKED(e = kn_producer_close(self->kp));
  if (knpy_pending_raise(&self->pending)) {
    kn_error_destroy(e);
    return NULL;
  }
  if (e) return knpy_raise_error(e, 0);
  Py_RETURN_NONE;
}

/* ---- observation ---- */

static Py_ssize_t producer_len(ProducerObject *self) {
  return (Py_ssize_t)kn_producer_outq_len(self->kp);
}

static PyObject *producer_counters(ProducerObject *self, PyObject *unused) {
  if (!self->kp) return PyErr_Format(PyExc_RuntimeError, "not initialised");
  static const char *names[KN_PC__COUNT] = {
      "sent",  "delivered", "failed", "retries",
      "calls", "in_flight", "bytes",  "map_refreshes"};
  PyObject *d = PyDict_New();
  for (int i = 0; d && i < KN_PC__COUNT; i++) {
    PyObject *v = PyLong_FromUnsignedLongLong(
        kn_producer_counter(self->kp, (kn_producer_counter_t)i));
    if (!v || PyDict_SetItemString(d, names[i], v) < 0) Py_CLEAR(d);
    Py_XDECREF(v);
  }
  return d;
}

static PyObject *producer_metrics(ProducerObject *self, PyObject *unused) {
  if (!self->kp) return PyErr_Format(PyExc_RuntimeError, "not initialised");
  size_t size = 8192;
  for (;;) {
    char *buf = PyMem_Malloc(size);
    if (!buf) return PyErr_NoMemory();
    size_t n = kn_producer_metrics(self->kp, buf, size);
    if (n == 0 || n < size) {
      PyObject *s =
          n ? PyUnicode_DecodeUTF8(buf, (Py_ssize_t)n, "replace") : NULL;
      PyMem_Free(buf);
      return s ? s : PyErr_NoMemory();
    }
    PyMem_Free(buf);
    size = n + 1;
  }
}

static PyObject *producer_health(ProducerObject *self, PyObject *unused) {
  if (!self->kp) return PyErr_Format(PyExc_RuntimeError, "not initialised");
  int ready = 0;
  int alive = kn_producer_alive(self->kp, &ready) && !self->closed;
  return Py_BuildValue("{sNsNss}", "alive", PyBool_FromLong(alive), "ready",
                       PyBool_FromLong(alive && ready), "reason",
                       !alive  ? "closed"
                       : ready ? "ok"
                               : "the shard map has not loaded yet");
}

static PyMethodDef producer_methods[] = {
    {"produce", (PyCFunction)(void (*)(void))producer_produce,
     METH_VARARGS | METH_KEYWORDS,
     "produce(data, *, partition_key, explicit_hash_key=None, "
     "on_delivery=None)\n\nQueues one record (data: bytes-like or str) and "
     "returns at once.  partition_key None: no key, on a stream whose "
     "RecordDistributionStrategy is AUTO.  on_delivery(err, report) runs "
     "inside a later poll, "
     "flush or close.  KinesisError(code=ERR__QUEUE_FULL, retriable=True) "
     "when the queue is full."},
    {"poll", (PyCFunction)(void (*)(void))producer_poll,
     METH_VARARGS | METH_KEYWORDS,
     "poll(timeout=None) -> int\n\nServes the delivery reports ready, "
     "waiting up to timeout seconds for the first; returns how many."},
    {"flush", (PyCFunction)(void (*)(void))producer_flush,
     METH_VARARGS | METH_KEYWORDS,
     "flush(timeout=None) -> int\n\nSends everything queued and serves "
     "reports until all are served or the timeout ran out; returns the "
     "records still not reported."},
    {"close", (PyCFunction)producer_close, METH_NOARGS,
     "close()\n\nSends everything queued and serves every report."},
    {"counters", (PyCFunction)producer_counters, METH_NOARGS,
     "counters() -> dict: sent, delivered, failed, retries, calls, "
     "in_flight, bytes, map_refreshes."},
    {"metrics", (PyCFunction)producer_metrics, METH_NOARGS,
     "metrics() -> str: the Prometheus text exposition."},
    {"health", (PyCFunction)producer_health, METH_NOARGS,
     "health() -> dict: alive, ready (shard map loaded) and the reason."},
    {NULL}};

static PySequenceMethods producer_seq = {
    .sq_length = (lenfunc)producer_len,
};

PyTypeObject knpy_ProducerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libkinesis._Producer",
    .tp_basicsize = sizeof(ProducerObject),
    .tp_dealloc = (destructor)producer_dealloc,
    .tp_as_sequence = &producer_seq,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C producer (use libkinesis.Producer).",
    .tp_methods = producer_methods,
    .tp_init = (initproc)producer_init,
    .tp_new = PyType_GenericNew,
};
