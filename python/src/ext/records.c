/* Batch and Record: read-only views of a kn_batch_t.
 *
 * A Batch owns its kn_batch_t (destroyed with the Batch).  A Record holds
 * a reference to its Batch, so its buffer (the payload, zero-copy) stays
 * valid as long as the Record or any memoryview of it lives. */
#include <string.h>

#include "knpy.h"

typedef struct {
  PyObject_HEAD kn_batch_t *b; /* owned */
} BatchObject;

typedef struct {
  PyObject_HEAD BatchObject *batch; /* a reference */
  const kn_record_t *r;             /* inside batch->b */
} RecordObject;

static PyObject *utf8(const char *s) {
  if (!s) Py_RETURN_NONE;
  return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "surrogateescape");
}

/* ---- Batch ---- */

PyObject *knpy_batch_new(kn_batch_t *b) {
  BatchObject *o = PyObject_New(BatchObject, &knpy_BatchType);
  if (!o) {
    kn_batch_destroy(b);
    return NULL;
  }
  o->b = b;
  return (PyObject *)o;
}

const kn_batch_t *knpy_batch_ptr(PyObject *o) {
  return PyObject_TypeCheck(o, &knpy_BatchType) ? ((BatchObject *)o)->b : NULL;
}

static void batch_dealloc(BatchObject *o) {
  kn_batch_destroy(o->b);
  PyObject_Free(o);
}

static Py_ssize_t batch_len(BatchObject *o) {
  return (Py_ssize_t)kn_batch_count(o->b);
}

static PyObject *batch_item(BatchObject *o, Py_ssize_t i) {
  if (i < 0 || (size_t)i >= kn_batch_count(o->b)) {
    PyErr_SetString(PyExc_IndexError, "record index out of range");
    return NULL;
  }
  RecordObject *r = PyObject_New(RecordObject, &knpy_RecordType);
  if (!r) return NULL;
  Py_INCREF(o);
  r->batch = o;
  r->r = kn_batch_record(o->b, (size_t)i);
  return (PyObject *)r;
}

static PyObject *batch_shard_id(BatchObject *o, void *c) {
  return utf8(kn_batch_shard_id(o->b));
}
static PyObject *batch_stream(BatchObject *o, void *c) {
  return utf8(kn_batch_stream(o->b));
}
static PyObject *batch_behind(BatchObject *o, void *c) {
  int64_t ms = kn_batch_millis_behind(o->b);
  if (ms < 0) Py_RETURN_NONE;
  return PyLong_FromLongLong(ms);
}
static PyObject *batch_end(BatchObject *o, void *c) {
  return PyBool_FromLong(kn_batch_shard_end(o->b));
}

static PyObject *batch_repr(BatchObject *o) {
  return PyUnicode_FromFormat("<libkinesis.Batch shard_id=%s records=%zu>",
                              kn_batch_shard_id(o->b), kn_batch_count(o->b));
}

static PyGetSetDef batch_getset[] = {
    {"shard_id", (getter)batch_shard_id, NULL, "The shard of every record.",
     NULL},
    {"stream", (getter)batch_stream, NULL, "The stream's name.", NULL},
    {"millis_behind_latest", (getter)batch_behind, NULL,
     "MillisBehindLatest of the response the records came in, or None.", NULL},
    {"shard_end", (getter)batch_end, NULL,
     "True if the shard is closed and these are its last records.", NULL},
    {NULL}};

static PySequenceMethods batch_seq = {
    .sq_length = (lenfunc)batch_len,
    .sq_item = (ssizeargfunc)batch_item,
};

PyTypeObject knpy_BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libkinesis.Batch",
    .tp_basicsize = sizeof(BatchObject),
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_repr = (reprfunc)batch_repr,
    .tp_as_sequence = &batch_seq,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "Records of one shard, in order, from one Consumer.poll(). "
        "A sequence of Record; it owns their bytes.",
    .tp_getset = batch_getset,
};

/* ---- Record ---- */

const kn_record_t *knpy_record_ptr(PyObject *o) {
  return PyObject_TypeCheck(o, &knpy_RecordType) ? ((RecordObject *)o)->r
                                                 : NULL;
}

static void record_dealloc(RecordObject *o) {
  Py_DECREF(o->batch);
  PyObject_Free(o);
}

static int record_getbuffer(RecordObject *o, Py_buffer *view, int flags) {
  size_t len = 0;
  const void *data = kn_record_data(o->r, &len);
  return PyBuffer_FillInfo(view, (PyObject *)o, (void *)data, (Py_ssize_t)len,
                           1, flags);
}

static PyBufferProcs record_buffer = {
    .bf_getbuffer = (getbufferproc)record_getbuffer,
};

static PyObject *record_data(RecordObject *o, void *c) {
  return PyMemoryView_FromObject((PyObject *)o);
}
static PyObject *record_bytes(RecordObject *o, PyObject *unused) {
  size_t len = 0;
  const void *data = kn_record_data(o->r, &len);
  return PyBytes_FromStringAndSize(data, (Py_ssize_t)len);
}
static Py_ssize_t record_len(RecordObject *o) {
  size_t len = 0;
  kn_record_data(o->r, &len);
  return (Py_ssize_t)len;
}
static PyObject *record_key(RecordObject *o, void *c) {
  /* None: written without a key (a stream whose service places records). */
  const char *k = kn_record_partition_key(o->r);
  if (!*k) Py_RETURN_NONE;
  return utf8(k);
}
static PyObject *record_hash_key(RecordObject *o, void *c) {
  return utf8(kn_record_explicit_hash_key(o->r));
}
static PyObject *record_seq(RecordObject *o, void *c) {
  return utf8(kn_record_sequence_number(o->r));
}
static PyObject *record_subseq(RecordObject *o, void *c) {
  return PyLong_FromUnsignedLongLong(kn_record_subsequence_number(o->r));
}
static PyObject *record_aggregated(RecordObject *o, void *c) {
  return PyBool_FromLong(kn_record_is_aggregated(o->r));
}
static PyObject *record_shard(RecordObject *o, void *c) {
  return utf8(kn_record_shard_id(o->r));
}
static PyObject *record_arrival_ms(RecordObject *o, void *c) {
  return PyLong_FromLongLong(kn_record_arrival_ms(o->r));
}

/* datetime.fromtimestamp(ms / 1000, timezone.utc); looked up once. */
static PyObject *from_ts, *utc;
static PyObject *record_arrival(RecordObject *o, void *c) {
  if (!from_ts) {
    PyObject *dt = PyImport_ImportModule("datetime");
    if (!dt) return NULL;
    PyObject *cls = PyObject_GetAttrString(dt, "datetime");
    PyObject *tz = PyObject_GetAttrString(dt, "timezone");
    Py_DECREF(dt);
    utc = tz ? PyObject_GetAttrString(tz, "utc") : NULL;
    Py_XDECREF(tz);
    from_ts = cls && utc ? PyObject_GetAttrString(cls, "fromtimestamp") : NULL;
    Py_XDECREF(cls);
    if (!from_ts) {
      Py_CLEAR(utc);
      return NULL;
    }
  }
  int64_t ms = kn_record_arrival_ms(o->r);
  return PyObject_CallFunction(from_ts, "dO", (double)ms / 1000.0, utc);
}

static PyObject *record_repr(RecordObject *o) {
  size_t len = 0;
  kn_record_data(o->r, &len);
  return PyUnicode_FromFormat(
      "<libkinesis.Record shard_id=%s sequence_number=%s "
      "sub_sequence_number=%llu len=%zu>",
      kn_record_shard_id(o->r), kn_record_sequence_number(o->r),
      (unsigned long long)kn_record_subsequence_number(o->r), len);
}

static PyGetSetDef record_getset[] = {
    {"data", (getter)record_data, NULL,
     "The payload as a read-only memoryview, without a copy; it keeps the "
     "batch alive.",
     NULL},
    {"partition_key", (getter)record_key, NULL, "The partition key (str), or None for a record written without one "
     "(a stream whose RecordDistributionStrategy is AUTO).",
     NULL},
    {"explicit_hash_key", (getter)record_hash_key, NULL,
     "The explicit hash key of a user record of an aggregate, or None.", NULL},
    {"sequence_number", (getter)record_seq, NULL,
     "The Kinesis record's sequence number (a decimal str).", NULL},
    {"sub_sequence_number", (getter)record_subseq, NULL,
     "The position inside an aggregated record (0 when not aggregated).", NULL},
    {"aggregated", (getter)record_aggregated, NULL,
     "True if the record came out of a KPL aggregate.", NULL},
    {"shard_id", (getter)record_shard, NULL, "The shard it was read from.",
     NULL},
    {"approximate_arrival", (getter)record_arrival, NULL,
     "ApproximateArrivalTimestamp as an aware datetime (UTC).", NULL},
    {"approximate_arrival_ms", (getter)record_arrival_ms, NULL,
     "ApproximateArrivalTimestamp in epoch milliseconds.", NULL},
    {NULL}};

static PyMethodDef record_methods[] = {{"__bytes__", (PyCFunction)record_bytes,
                                        METH_NOARGS, "A copy of the payload."},
                                       {NULL}};

static PySequenceMethods record_seq_methods = {
    .sq_length = (lenfunc)record_len,
};

PyTypeObject knpy_RecordType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libkinesis.Record",
    .tp_basicsize = sizeof(RecordObject),
    .tp_dealloc = (destructor)record_dealloc,
    .tp_repr = (reprfunc)record_repr,
    .tp_as_buffer = &record_buffer,
    .tp_as_sequence = &record_seq_methods,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "One user record (a payload and where it is stored).  "
        "Supports the buffer protocol: bytes(record), "
        "memoryview(record).",
    .tp_getset = record_getset,
    .tp_methods = record_methods,
};
