/* Transfers on the loop's multi handle.  curl forbids multi calls from
 * inside its own callbacks, so work asked for there (adding, pausing,
 * resuming, cancelling) is put on the loop's dirty list and applied right
 * after curl returns. */
#include <stdlib.h>
#include <string.h>

#include "aws/http_int.h"
#include "core/error.h"
#include "util/clock.h"

static void mark_dirty(struct kn_http_xfer *x) {
  if (x->on_dirty) return;
  x->on_dirty = 1;
  x->dirty_next = x->loop->dirty;
  x->loop->dirty = x;
}

static void unlink_xfer(struct kn_http_xfer *x) {
  if (x->prev)
    x->prev->next = x->next;
  else
    x->loop->xfers = x->next;
  if (x->next) x->next->prev = x->prev;
  x->prev = x->next = NULL;
}

static CURL *easy_get(kn_loop_t *loop) {
  if (loop->n_idle == 0) return curl_easy_init();
  CURL *h = loop->idle[--loop->n_idle];
  curl_easy_reset(h);
  return h;
}

static void easy_put(kn_loop_t *loop, struct kn_http_xfer *x) {
  if (x->easy && loop->n_idle < KN_IDLE_EASY_MAX) {
    loop->idle[loop->n_idle++] = x->easy;
    x->easy = NULL;
  }
}

static void free_xfer(struct kn_http_xfer *x) {
  if (x->added) curl_multi_remove_handle(x->loop->multi, x->easy);
  x->added = 0;
  unlink_xfer(x);
  easy_put(x->loop, x);
  kn_xfer_cleanup(x);
  free(x);
}

/* Reports x's outcome to its owner and frees it. */
static void complete(struct kn_http_xfer *x) {
  kn_http_resp_t resp = x->resp;
  memset(&x->resp, 0, sizeof(x->resp));
  kn_http_cb *cb = x->cb;
  void *opaque = x->opaque;
  free_xfer(x);
  cb(opaque, &resp);
  kn_http_resp_clear(&resp);
}

static kn_error_t *add(struct kn_http_xfer *x) {
  CURLMcode mc = curl_multi_add_handle(x->loop->multi, x->easy);
  if (mc != CURLM_OK)
    return kn_error_new(
        mc == CURLM_OUT_OF_MEMORY ? KN_ERR__NOMEM : KN_ERR__FAIL,
        "%s %s: cannot start the transfer: %s", x->method, x->url,
        curl_multi_strerror(mc));
  x->added = 1;
  return NULL;
}

kn_http_xfer_t *kn_http_start(kn_loop_t *loop, const kn_http_req_t *req,
                              kn_http_cb *cb, void *opaque, kn_error_t **errp) {
  *errp = NULL;
  struct kn_http_xfer *x = calloc(1, sizeof(*x));
  if (!x) {
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory starting a transfer");
    return NULL;
  }
  x->loop = loop;
  x->cb = cb;
  x->opaque = opaque;
  x->start_us = kn_mono_us();
  x->easy = easy_get(loop);
  kn_error_t *err =
      x->easy ? kn_xfer_setup(x, &loop->opts, req, 1)
              : kn_error_new(KN_ERR__NOMEM, "out of memory (curl_easy_init)");
  if (!err) {
    x->next = loop->xfers;
    if (x->next) x->next->prev = x;
    loop->xfers = x;
    if (loop->in_curl)
      mark_dirty(x);
    else if ((err = add(x)) != NULL)
      unlink_xfer(x);
  }
  if (err) {
    kn_xfer_cleanup(x);
    free(x);
    *errp = err;
    return NULL;
  }
  return x;
}

void kn_http_pause(kn_http_xfer_t *x) {
  if (!x || x->want_paused) return;
  x->want_paused = 1;
  if (x->loop->in_curl || !x->added) {
    mark_dirty(x);
    return;
  }
  /* Pausing never calls back, so it can be done at once. */
  curl_easy_pause(x->easy, CURLPAUSE_RECV);
  x->paused = 1;
}

void kn_http_resume(kn_http_xfer_t *x) {
  if (!x || !x->want_paused) return;
  x->want_paused = 0;
  mark_dirty(x); /* unpausing delivers held data: never from in here */
}

void kn_http_cancel(kn_http_xfer_t *x) {
  if (!x || x->cancelled) return;
  x->cancelled = 1;
  if (x->loop->in_curl || x->on_dirty)
    mark_dirty(x);
  else
    free_xfer(x);
}

void kn_http_loop_apply(kn_loop_t *loop) {
  struct kn_http_xfer *x;
  while ((x = loop->dirty) != NULL) {
    loop->dirty = x->dirty_next;
    x->on_dirty = 0;
    if (x->cancelled) {
      free_xfer(x);
      continue;
    }
    if (!x->added) {
      kn_error_t *err = add(x);
      if (err) {
        x->resp.error = err;
        complete(x);
        continue;
      }
    }
    if (x->want_paused != x->paused) {
      x->paused = x->want_paused;
      /* Unpausing runs the write callback with held data; callbacks may
       * cancel x or others, which is safe while in_curl defers them. */
      loop->in_curl = 1;
      curl_easy_pause(x->easy, x->paused ? CURLPAUSE_RECV : CURLPAUSE_CONT);
      loop->in_curl = 0;
    }
  }
}

static void count(kn_loop_t *loop, struct kn_http_xfer *x) {
  kn_http_stats_t *st = &loop->stats;
  long connects = 0;
  curl_off_t up = 0, down = 0;
  curl_easy_getinfo(x->easy, CURLINFO_NUM_CONNECTS, &connects);
  curl_easy_getinfo(x->easy, CURLINFO_SIZE_UPLOAD_T, &up);
  curl_easy_getinfo(x->easy, CURLINFO_SIZE_DOWNLOAD_T, &down);
  st->requests++;
  st->failures += x->resp.error != NULL || x->resp.status == 0;
  st->connects += (uint64_t)(connects > 0 ? connects : 0);
  st->http2 += x->resp.http_version == 2 && x->resp.status != 0;
  st->bytes_out += (uint64_t)(up > 0 ? up : 0);
  st->bytes_in += (uint64_t)(down > 0 ? down : 0);
}

void kn_loop_stats(const kn_loop_t *loop, kn_http_stats_t *out) {
  *out = loop->stats;
}

void kn_http_loop_done(kn_loop_t *loop) {
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(loop->multi, &left)) != NULL) {
    if (m->msg != CURLMSG_DONE) continue;
    CURLcode rc = m->data.result;
    struct kn_http_xfer *x = NULL;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
    if (!x || x->cancelled) continue; /* freed by the next apply */
    kn_xfer_finish(x, rc);
    count(loop, x);
    complete(x);
  }
}

void kn_http_loop_drop_all(kn_loop_t *loop) {
  loop->dirty = NULL;
  while (loop->xfers) free_xfer(loop->xfers);
  while (loop->n_idle) curl_easy_cleanup(loop->idle[--loop->n_idle]);
}
