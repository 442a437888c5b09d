/* The _libkinesis extension: shared declarations.
 *
 * Ownership: every Python object holds one reference to what it points at
 * (a Record holds its Batch, which owns the kn_batch_t).  C callbacks of
 * the library run on the thread that called poll/flush/close with the GIL
 * released; they take it back with PyGILState_Ensure. */
#ifndef KNPY_H
#define KNPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "kn/kn.h"

/* libkinesis.KinesisError, owned by the module. */
extern PyObject *knpy_KinesisError;
extern PyTypeObject knpy_ConsumerType;
extern PyTypeObject knpy_ProducerType;
extern PyTypeObject knpy_BatchType;
extern PyTypeObject knpy_RecordType;
extern PyTypeObject knpy_DeliveryReportType;

/* A KinesisError instance (new reference) for code and message; NULL with
 * an exception set if even that failed. */
PyObject *knpy_error_new(kn_err_t code, const char *message, int retriable,
                         int fatal);
/* The same from a kn_error_t (not destroyed). */
PyObject *knpy_error_from(const kn_error_t *e, int fatal);
/* Raises a KinesisError; always returns NULL. */
PyObject *knpy_raise(kn_err_t code, const char *message);
/* Raises e as a KinesisError and destroys it; always returns NULL. */
PyObject *knpy_raise_error(kn_error_t *e, int fatal);

/* A new kn_conf_t from a dict of property names to values (str, int,
 * float, bool); None is skipped.  NULL with KinesisError
 * (code ERR__CONF, naming the property) on a bad or unknown one. */
kn_conf_t *knpy_conf_from(PyObject *dict);

/* Seconds (float, None or negative: forever) to milliseconds (-1 forever);
 * -2 with an exception set on a bad value. */
long long knpy_timeout_ms(PyObject *timeout);
/* Runs stmt with the GIL released (the calling thread keeps its state). */
#define KNPY_UNLOCKED(stmt)                        \
  do {                                             \
    PyThreadState *knpy_ts_ = PyEval_SaveThread(); \
    stmt;                                          \
    PyEval_RestoreThread(knpy_ts_);                \
  } while (0)

/* The slice a waiting call waits before it looks at signals again. */
#define KNPY_SLICE_MS 100

/* A waiting call in slices: wait(ctx, slice_ms) runs with the GIL released
 * and waits at most slice_ms; then, with the GIL, done(ctx) says whether
 * the call is over (1), failed (-1, an exception set) or goes on (0), and
 * signal handlers run (Ctrl-C).  Returns 1 or -1 as done did, or 0 when
 * timeout_ms (-1: none) ran out. */
int knpy_wait_sliced(long long timeout_ms, void (*wait)(void *ctx, int ms),
                     int (*done)(void *ctx), void *ctx);

/* A callback's exception, kept until the call that ran it returns: the
 * first one wins, later ones are reported as unraisable. */
typedef struct knpy_pending {
  PyObject *type, *value, *tb;
} knpy_pending_t;
/* Moves the current exception into p (GIL held). */
void knpy_pending_keep(knpy_pending_t *p);
/* Raises what p keeps (returns -1) or returns 0. */
int knpy_pending_raise(knpy_pending_t *p);
void knpy_pending_clear(knpy_pending_t *p);

/* Records.  Batch takes b. */
PyObject *knpy_batch_new(kn_batch_t *b);
const kn_record_t *knpy_record_ptr(PyObject *o); /* NULL if not a Record */
const kn_batch_t *knpy_batch_ptr(PyObject *o);   /* NULL if not a Batch */

#endif
