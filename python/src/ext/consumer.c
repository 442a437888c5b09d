/* Consumer: kn_consumer_t for Python.
 *
 * Waiting calls release the GIL and wait in slices of KNPY_SLICE_MS,
 * looking at signals in between (Ctrl-C interrupts a poll).  The lease,
 * shard-end and statistics callbacks run inside poll on the polling
 * thread; an exception one of them raises is raised by that poll, and a
 * batch the same poll returned is kept for the next poll (nothing is
 * lost). */
#include <string.h>

#include "knpy.h"

typedef struct {
  PyObject_HEAD kn_consumer_t *kc; /* owned; NULL before init */
  PyObject *on_acquired, *on_lost, *on_ended, *on_stats; /* or NULL */
  PyObject *held_batch; /* returned by a poll whose callback raised */
  knpy_pending_t pending;
  int closed;
} ConsumerObject;

/* ---- callbacks (polling thread, GIL released) ---- */

static void run_cb(ConsumerObject *self, PyObject *fn, PyObject *args) {
  if (!args) {
    knpy_pending_keep(&self->pending);
    return;
  }
  PyObject *r = PyObject_CallObject(fn, args);
  Py_DECREF(args);
  if (r)
    Py_DECREF(r);
  else
    knpy_pending_keep(&self->pending);
}

static void cb_acquired(kn_consumer_t *kc, const char *shard_id, int64_t token,
                        const void *state, size_t len, void *opaque) {
  ConsumerObject *self = opaque;
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject *st = NULL;
  if (state)
    st = PyBytes_FromStringAndSize(state, (Py_ssize_t)len);
  else
    st = Py_NewRef(Py_None);
  run_cb(self, self->on_acquired,
         st ? Py_BuildValue("(sLN)", shard_id, (long long)token, st) : NULL);
  PyGILState_Release(g);
}

static void cb_lost(kn_consumer_t *kc, const char *shard_id, kn_err_t reason,
                    void *opaque) {
  ConsumerObject *self = opaque;
  PyGILState_STATE g = PyGILState_Ensure();
  run_cb(self, self->on_lost, Py_BuildValue("(si)", shard_id, (int)reason));
  PyGILState_Release(g);
}

static void cb_ended(kn_consumer_t *kc, const char *shard_id, void *opaque) {
  ConsumerObject *self = opaque;
  PyGILState_STATE g = PyGILState_Ensure();
  run_cb(self, self->on_ended, Py_BuildValue("(s)", shard_id));
  PyGILState_Release(g);
}

static void cb_stats(void *opaque, const char *json, size_t len) {
  ConsumerObject *self = opaque;
  PyGILState_STATE g = PyGILState_Ensure();
  run_cb(self, self->on_stats, Py_BuildValue("(s#)", json, (Py_ssize_t)len));
  PyGILState_Release(g);
}

/* ---- life ---- */

static int take_cb(PyObject *kw, const char *name, PyObject **slot) {
  PyObject *v = kw ? PyDict_GetItemString(kw, name) : NULL;
  if (!v || v == Py_None) return 0;
  if (!PyCallable_Check(v)) {
    PyErr_Format(PyExc_TypeError, "%s must be callable", name);
    return -1;
  }
  Py_XSETREF(*slot, Py_NewRef(v));
  return 0;
}

static int consumer_init(ConsumerObject *self, PyObject *args, PyObject *kw) {
  PyObject *conf_dict = NULL;
  if (!PyArg_ParseTuple(args, "|O:Consumer", &conf_dict)) return -1;
  if (self->kc) {
    PyErr_SetString(PyExc_RuntimeError, "Consumer already initialised");
    return -1;
  }
  if (kw) {
    static const char *known[] = {"on_lease_acquired", "on_lease_lost",
                                  "on_shard_ended", "on_stats", NULL};
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw, &pos, &k, &v)) {
      int ok = 0;
      for (int i = 0; known[i]; i++)
        if (PyUnicode_Check(k) &&
            PyUnicode_CompareWithASCIIString(k, known[i]) == 0)
          ok = 1;
      if (!ok) {
        PyErr_Format(PyExc_TypeError, "Consumer got an unexpected keyword %R",
                     k);
        return -1;
      }
    }
  }
  if (take_cb(kw, "on_lease_acquired", &self->on_acquired) ||
      take_cb(kw, "on_lease_lost", &self->on_lost) ||
      take_cb(kw, "on_shard_ended", &self->on_ended) ||
      take_cb(kw, "on_stats", &self->on_stats))
    return -1;
  kn_conf_t *conf = knpy_conf_from(conf_dict);
  if (!conf) return -1;
  if (self->on_acquired) kn_conf_set_lease_acquired_cb(conf, cb_acquired, self);
  if (self->on_lost) kn_conf_set_lease_lost_cb(conf, cb_lost, self);
  if (self->on_ended) kn_conf_set_shard_ended_cb(conf, cb_ended, self);
  if (self->on_stats) kn_conf_set_stats_cb(conf, cb_stats, self);
  char errstr[512] = "";
  kn_consumer_t *kc;
  KNPY_UNLOCKED(kc = kn_consumer_new(conf, errstr, sizeof(errstr)));
  kn_conf_destroy(conf);
  if (!kc) {
    knpy_raise(KN_ERR__CONF, errstr);
    return -1;
  }
  self->kc = kc;
  return 0;
}

static void consumer_destroy_handle(ConsumerObject *self) {
  kn_consumer_t *kc = self->kc;
  self->kc = NULL;
  if (!kc) return;
  KNPY_UNLOCKED(kn_consumer_destroy(kc));
}

static void consumer_dealloc(ConsumerObject *self) {
  PyObject_GC_UnTrack(self);
  consumer_destroy_handle(self);
  Py_CLEAR(self->on_acquired);
  Py_CLEAR(self->on_lost);
  Py_CLEAR(self->on_ended);
  Py_CLEAR(self->on_stats);
  Py_CLEAR(self->held_batch);
  knpy_pending_clear(&self->pending);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int consumer_traverse(ConsumerObject *self, visitproc visit, void *arg) {
  Py_VISIT(self->on_acquired);
  Py_VISIT(self->on_lost);
  Py_VISIT(self->on_ended);
  Py_VISIT(self->on_stats);
  return 0;
}

static int consumer_clear(ConsumerObject *self) {
  /* Callbacks may refer to the consumer: a cycle.  The handle goes first so
   * that nothing calls them after. */
  consumer_destroy_handle(self);
  Py_CLEAR(self->on_acquired);
  Py_CLEAR(self->on_lost);
  Py_CLEAR(self->on_ended);
  Py_CLEAR(self->on_stats);
  return 0;
}

static int usable(ConsumerObject *self) {
  if (!self->kc) {
    PyErr_SetString(PyExc_RuntimeError, "Consumer not initialised");
    return 0;
  }
  if (self->closed) {
    knpy_raise(KN_ERR__STATE, "the consumer is closed");
    return 0;
  }
  return 1;
}

/* ---- poll ---- */

typedef struct {
  ConsumerObject *self;
  kn_batch_t *b;   /* the last slice's batch, or NULL */
  PyObject *batch; /* it as a Batch, once done */
} poll_t;

static void poll_slice(void *ctx, int ms) {
  poll_t *p = ctx;
  p->b = kn_consumer_poll(p->self->kc, ms);
}

static int poll_done(void *ctx) {
  poll_t *p = ctx;
  ConsumerObject *self = p->self;
  if (p->b && !(p->batch = knpy_batch_new(p->b))) return -1;
  if (self->pending.type) {
    self->held_batch = p->batch; /* the next poll returns it */
    p->batch = NULL;
    knpy_pending_raise(&self->pending);
    return -1;
  }
  if (p->batch) return 1;
  const kn_error_t *fatal = kn_consumer_fatal_error(self->kc);
  if (fatal) {
    PyObject *e = knpy_error_from(fatal, 1);
    if (e) {
      PyErr_SetObject(knpy_KinesisError, e);
      Py_DECREF(e);
    }
    return -1;
  }
  return 0;
}

static PyObject *consumer_poll(ConsumerObject *self, PyObject *args,
                               PyObject *kw) {
  static char *kwlist[] = {"timeout", NULL};
  PyObject *timeout = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:poll", kwlist, &timeout))
    return NULL;
  long long ms = knpy_timeout_ms(timeout);
  if (ms == -2 || !usable(self)) return NULL;
  if (self->held_batch) {
    PyObject *b = self->held_batch;
    self->held_batch = NULL;
    return b;
  }
  poll_t p = {self, NULL, NULL};
  int r = knpy_wait_sliced(ms, poll_slice, poll_done, &p);
  if (r < 0) return NULL;
  if (r == 0) Py_RETURN_NONE;
  return p.batch;
}

static PyObject *consumer_wait(ConsumerObject *self, PyObject *arg) {
  long long ms = knpy_timeout_ms(arg);
  if (ms == -2 || !usable(self)) return NULL;
  if (self->held_batch) Py_RETURN_TRUE;
  int r;
  KNPY_UNLOCKED(r = kn_consumer_wait(self->kc, (int)ms));
  return PyBool_FromLong(r);
}

/* ---- checkpoints ---- */

static PyObject *done(kn_error_t *e) {
  if (e) return knpy_raise_error(e, 0);
  Py_RETURN_NONE;
}

static PyObject *consumer_checkpoint(ConsumerObject *self, PyObject *target) {
  if (!usable(self)) return NULL;
  const kn_record_t *r = knpy_record_ptr(target);
  const kn_batch_t *b = r ? NULL : knpy_batch_ptr(target);
  if (!r && !b) {
    PyErr_SetString(PyExc_TypeError, "checkpoint() takes a Record or a Batch");
    return NULL;
  }
  if (b && kn_batch_count(b) == 0) Py_RETURN_NONE;
  kn_error_t *e;
  KNPY_UNLOCKED(e = r ? kn_consumer_checkpoint(self->kc, r)
                      : kn_consumer_checkpoint_batch(self->kc, b));
  return done(e);
}

static PyObject *consumer_checkpoint_seq(ConsumerObject *self, PyObject *args,
                                         PyObject *kw) {
  static char *kwlist[] = {"shard_id", "sequence_number", "sub_sequence_number",
                           NULL};
  const char *shard, *seq;
  unsigned long long sub = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|K:checkpoint_sequence", kwlist,
                                   &shard, &seq, &sub) ||
      !usable(self))
    return NULL;
  kn_error_t *e;
  KNPY_UNLOCKED(
      e = kn_consumer_checkpoint_seq(self->kc, shard, seq, (uint64_t)sub));
  return done(e);
}

static PyObject *consumer_checkpoint_async(ConsumerObject *self,
                                           PyObject *target) {
  if (!usable(self)) return NULL;
  const kn_record_t *r = knpy_record_ptr(target);
  if (!r) {
    PyErr_SetString(PyExc_TypeError, "checkpoint_async() takes a Record");
    return NULL;
  }
  kn_err_t err = kn_consumer_checkpoint_async(self->kc, r);
  if (err != KN_ERR_NO_ERROR) return knpy_raise(err, kn_err2str(err));
  Py_RETURN_NONE;
}

static PyObject *consumer_prepare(ConsumerObject *self, PyObject *args,
                                  PyObject *kw) {
  static char *kwlist[] = {"record", "state", NULL};
  PyObject *rec;
  Py_buffer state = {0};
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|y*:prepare_checkpoint", kwlist,
                                   &rec, &state))
    return NULL;
  const kn_record_t *r = knpy_record_ptr(rec);
  PyObject *out = NULL;
  if (!r)
    PyErr_SetString(PyExc_TypeError, "prepare_checkpoint() takes a Record");
  else if (usable(self)) {
    kn_error_t *e;
    KNPY_UNLOCKED(
        e = kn_consumer_prepare_checkpoint(self->kc, r, state.buf,
                                           state.buf ? (size_t)state.len : 0));
    out = done(e);
  }
  if (state.obj) PyBuffer_Release(&state);
  return out;
}

static PyObject *consumer_lease_checkpoint(ConsumerObject *self,
                                           PyObject *arg) {
  const char *shard = PyUnicode_AsUTF8(arg);
  if (!shard || !usable(self)) return NULL;
  char seq[256];
  uint64_t sub = 0;
  if (kn_consumer_lease_checkpoint(self->kc, shard, seq, sizeof(seq), &sub))
    Py_RETURN_NONE;
  return Py_BuildValue("(sK)", seq, (unsigned long long)sub);
}

static PyObject *consumer_fencing_token(ConsumerObject *self, PyObject *arg) {
  const char *shard = PyUnicode_AsUTF8(arg);
  if (!shard || !usable(self)) return NULL;
  int64_t t = kn_consumer_fencing_token(self->kc, shard);
  if (t < 0) Py_RETURN_NONE;
  return PyLong_FromLongLong(t);
}

static PyObject *consumer_caught_up(ConsumerObject *self, PyObject *unused) {
  if (!usable(self)) return NULL;
  if (self->held_batch) Py_RETURN_FALSE;
  return PyBool_FromLong(kn_consumer_caught_up(self->kc));
}

/* ---- observation ---- */

static PyObject *consumer_metrics(ConsumerObject *self, PyObject *unused) {
  if (!usable(self)) return NULL;
  size_t size = 16384;
  for (;;) {
    char *buf = PyMem_Malloc(size);
    if (!buf) return PyErr_NoMemory();
    size_t n;
    KNPY_UNLOCKED(n = kn_consumer_metrics(self->kc, buf, size));
    if (n == 0) {
      PyMem_Free(buf);
      return PyErr_NoMemory();
    }
    if (n < size) {
      PyObject *s = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)n, "replace");
      PyMem_Free(buf);
      return s;
    }
    PyMem_Free(buf);
    size = n + 1;
  }
}

static PyObject *consumer_health(ConsumerObject *self, PyObject *unused) {
  if (!self->kc) {
    usable(self);
    return NULL;
  }
  kn_consumer_health_t h;
  kn_consumer_health(self->kc, &h);
  if (self->closed) {
    h.alive = h.ready = 0;
    snprintf(h.reason, sizeof(h.reason), "closed");
  }
  return Py_BuildValue("{sNsNss}", "alive", PyBool_FromLong(h.alive), "ready",
                       PyBool_FromLong(h.ready), "reason", h.reason);
}

static PyObject *consumer_stats_json(ConsumerObject *self, PyObject *unused) {
  if (!usable(self)) return NULL;
  char *s;
  KNPY_UNLOCKED(s = kn_consumer_stats_json(self->kc));
  if (!s) return PyErr_NoMemory();
  PyObject *o = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
  free(s);
  return o;
}

static PyObject *consumer_close(ConsumerObject *self, PyObject *unused) {
  Py_CLEAR(self->held_batch); /* read again by the next owner */
  if (!self->kc || self->closed) Py_RETURN_NONE;
  self->closed = 1;
  kn_error_t *e;
  KNPY_UNLOCKED(e = kn_consumer_close(self->kc));
  if (knpy_pending_raise(&self->pending)) {
    kn_error_destroy(e);
    return NULL;
  }
  return done(e);
}

static PyObject *consumer_closed(ConsumerObject *self, void *c) {
  return PyBool_FromLong(self->closed);
}

static PyMethodDef consumer_methods[] = {
    {"poll", (PyCFunction)(void (*)(void))consumer_poll,
     METH_VARARGS | METH_KEYWORDS,
     "poll(timeout=None) -> Batch | None\n\nWaits up to timeout seconds "
     "(None: forever) for the next batch of one shard.  Lease, shard-end "
     "and statistics callbacks run here; an exception one raises is raised "
     "here (a batch that came with it is returned by the next poll).  "
     "Raises KinesisError(fatal=True) once the consumer has failed."},
    {"_wait", (PyCFunction)consumer_wait, METH_O,
     "_wait(timeout) -> bool: waits until a poll would not wait (any "
     "thread; the asyncio helpers use it)."},
    {"checkpoint", (PyCFunction)consumer_checkpoint, METH_O,
     "checkpoint(record_or_batch)\n\nCheckpoints the shard at the record "
     "(or the batch's last record) and waits until the lease store has it. "
     "KinesisError(code=ERR__LEASE_LOST) when this worker no longer holds "
     "the shard."},
    {"checkpoint_sequence",
     (PyCFunction)(void (*)(void))consumer_checkpoint_seq,
     METH_VARARGS | METH_KEYWORDS,
     "checkpoint_sequence(shard_id, sequence_number, sub_sequence_number=0)"
     "\n\nCheckpoints at a position given by value."},
    {"checkpoint_async", (PyCFunction)consumer_checkpoint_async, METH_O,
     "checkpoint_async(record)\n\nQueues the checkpoint and returns at once."},
    {"prepare_checkpoint", (PyCFunction)(void (*)(void))consumer_prepare,
     METH_VARARGS | METH_KEYWORDS,
     "prepare_checkpoint(record, state=b'')\n\nRecords a pending checkpoint "
     "with application state (at most 64 KiB) without moving the "
     "checkpoint; the next owner gets the state in on_lease_acquired."},
    {"lease_checkpoint", (PyCFunction)consumer_lease_checkpoint, METH_O,
     "lease_checkpoint(shard_id) -> (sequence_number, sub_sequence_number) "
     "| None\n\nThe checkpoint of a held shard as this worker last knew "
     "it."},
    {"fencing_token", (PyCFunction)consumer_fencing_token, METH_O,
     "fencing_token(shard_id) -> int | None"},
    {"caught_up", (PyCFunction)consumer_caught_up, METH_NOARGS,
     "caught_up() -> bool: nothing waiting and every shard read to its "
     "current end."},
    {"metrics", (PyCFunction)consumer_metrics, METH_NOARGS,
     "metrics() -> str: the Prometheus text exposition (docs/METRICS.md)."},
    {"health", (PyCFunction)consumer_health, METH_NOARGS,
     "health() -> dict: alive, ready and the reason."},
    {"_stats_json", (PyCFunction)consumer_stats_json, METH_NOARGS,
     "The statistics document as JSON text."},
    {"close", (PyCFunction)consumer_close, METH_NOARGS,
     "close()\n\nStops reading, writes the final checkpoints and releases "
     "every lease.  Batches not yet polled are read again by the next "
     "owner."},
    {NULL}};

static PyGetSetDef consumer_getset[] = {
    {"closed", (getter)consumer_closed, NULL, "True after close().", NULL},
    {NULL}};

PyTypeObject knpy_ConsumerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libkinesis._Consumer",
    .tp_basicsize = sizeof(ConsumerObject),
    .tp_dealloc = (destructor)consumer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The C consumer (use libkinesis.Consumer).",
    .tp_traverse = (traverseproc)consumer_traverse,
    .tp_clear = (inquiry)consumer_clear,
    .tp_methods = consumer_methods,
    .tp_getset = consumer_getset,
    .tp_init = (initproc)consumer_init,
    .tp_new = PyType_GenericNew,
};
