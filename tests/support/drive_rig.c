/* A test world for the lease-mode driver (drive_rig.h). */
#include "drive_rig.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn/error.h"

/* More calls than any case makes in one go: past it the drive is taken
 * to loop. */
#define RUN_BOUND 100000

/* ---- the drive's operations ---- */

__attribute__((format(printf, 2, 3))) static void trace(
    const kn_rig_worker_t *w, const char *fmt, ...) {
  if (!getenv("KN_RIG_TRACE")) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%8lld %s ", (long long)w->rig->now, w->id);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static int64_t op_now(void *env) {
  kn_rig_worker_t *w = env;
  return w->rig->now;
}

static int op_submit(void *env, const kn_cc_action_t *a) {
  kn_rig_worker_t *w = env;
  kn_store_job_t *j = kn_store_job_new(a);
  if (!j) return -1;
  j->sent_ms = w->rig->now;
  if (w->tail)
    w->tail->next = j;
  else
    w->head = j;
  w->tail = j;
  return 0;
}

static int op_start(void *env, const kn_cc_action_t *a) {
  kn_rig_seen_t *s = &((kn_rig_worker_t *)env)->s;
  s->start++;
  s->tenure = a->tenure;
  s->until = a->until_ms;
  snprintf(s->started, sizeof(s->started), "%s", a->key);
  snprintf(s->start_ckpt, sizeof(s->start_ckpt), "%s",
           a->lease && a->lease->checkpoint ? a->lease->checkpoint : "");
  return 0;
}

static void op_stop(void *env, const char *key, int64_t tenure,
                    kn_drive_stop_t why, kn_err_t reason,
                    const char *next_owner) {
  kn_rig_worker_t *w = env;
  kn_rig_seen_t *s = &w->s;
  switch (why) {
    case KN_DRIVE_LOST:
      s->stop++;
      s->stop_reason = reason;
      break;
    case KN_DRIVE_YIELD:
      trace(w, "hands %s (tenure %lld) over to %s", key, (long long)tenure,
            next_owner ? next_owner : "?");
      s->yield++;
      snprintf(s->next_owner, sizeof(s->next_owner), "%s",
               next_owner ? next_owner : "");
      if (w->answer_yields && w->n_yields < KN_RIG_YIELDS) {
        snprintf(w->yields[w->n_yields].key, sizeof(w->yields[0].key), "%s",
                 key);
        w->yields[w->n_yields++].tenure = tenure;
      }
      break;
    case KN_DRIVE_DONE:
      s->done++;
      break;
  }
}

static void op_deadline(void *env, const char *key, int64_t tenure,
                        int64_t until_ms) {
  kn_rig_seen_t *s = &((kn_rig_worker_t *)env)->s;
  (void)key, (void)tenure;
  s->deadline++;
  s->until = until_ms;
}

static void op_reply(void *env, void *req, kn_err_t code, const char *msg) {
  kn_rig_seen_t *s = &((kn_rig_worker_t *)env)->s;
  (void)req, (void)msg;
  s->replies++;
  s->reply_code = code;
}

static void op_fatal(void *env, kn_err_t code, const char *msg) {
  kn_rig_seen_t *s = &((kn_rig_worker_t *)env)->s;
  (void)msg;
  s->fatal++;
  s->fatal_code = code;
}

static void op_log(void *env, int level, const char *msg) {
  (void)level;
  trace(env, "log: %s", msg);
}

static const kn_drive_ops_t rig_ops = {
    .now = op_now,
    .submit = op_submit,
    .start = op_start,
    .stop = op_stop,
    .deadline = op_deadline,
    .reply = op_reply,
    .fatal = op_fatal,
    .log = op_log,
};

/* ---- the world ---- */

int kn_rig_open(kn_rig_t *r) {
  kn_error_t *err = NULL;
  memset(r, 0, sizeof(*r));
  r->ls = kn_lease_store_open("memory", NULL, &err);
  kn_error_destroy(err);
  return r->ls ? 0 : -1;
}

void kn_rig_close(kn_rig_t *r) {
  for (unsigned i = 0; i < KN_RIG_LOOKS; i++) kn_lease_clear(&r->look[i]);
  kn_lease_array_free(r->all, r->n_all);
  kn_lease_store_destroy(r->ls);
  memset(r, 0, sizeof(*r));
}

int kn_rig_start(kn_rig_t *r, kn_rig_worker_t *w, const kn_cc_cfg_t *cfg) {
  memset(w, 0, sizeof(*w));
  w->rig = r;
  w->id = cfg->worker;
  w->d = kn_drive_new(cfg, &rig_ops, w);
  return w->d ? 0 : -1;
}

static kn_store_job_t *pop(kn_rig_worker_t *w) {
  kn_store_job_t *j = w->head;
  if (!j) return NULL;
  if (!(w->head = j->next)) w->tail = NULL;
  j->next = NULL;
  return j;
}

void kn_rig_kill(kn_rig_worker_t *w) {
  kn_store_job_t *j;
  kn_drive_destroy(w->d);
  w->d = NULL;
  while ((j = pop(w))) kn_store_job_free(j);
  w->n_yields = 0;
}

/* The fault j meets, or NULL. */
static const kn_error_t *fault(const kn_rig_worker_t *w,
                               const kn_store_job_t *j) {
  const kn_rig_t *r = w->rig;
  if (j->op == KN_CC_LIST_LEASES) return r->fail_list;
  if (j->op == KN_CC_LIST_SHARDS) return r->fail_shards;
  if (j->op == KN_CC_RENEW && j->mark && r->fail_mark) return r->fail_mark;
  if (j->op == KN_CC_RENEW) return r->fail_renew;
  if (j->op == KN_CC_HEARTBEAT && r->fail_beat && r->fail_beat_of &&
      strcmp(w->id, r->fail_beat_of) == 0)
    return r->fail_beat;
  return NULL;
}

/* Carries out j and tells the drive. */
static void answer(kn_rig_worker_t *w, kn_store_job_t *j) {
  kn_rig_t *r = w->rig;
  const kn_error_t *f = fault(w, j);
  if (!f && j->op != KN_CC_LIST_SHARDS) kn_store_job_apply(r->ls, w->id, j);
  if (r->fail_roster && j->roster) {
    kn_members_clear(&j->roster_m);
    j->has_roster = 0;
    j->roster_refused = 1;
  }
  /* As the DynamoDB store marks the leases of KCL 3.x workers. */
  for (size_t i = 0;
       r->hands_over && j->op == KN_CC_LIST_LEASES && i < j->n_leases; i++)
    j->leases[i].owner_hands_over =
        j->leases[i].owner && strcmp(j->leases[i].owner, r->hands_over) == 0;
  const kn_error_t *err = f ? f : j->err;
  if (!err && j->op == KN_CC_RENEW && r->landed_renew) err = r->landed_renew;
  if (err && kn_error_code(err) == KN_ERR_CONDITIONAL_CHECK_FAILED)
    w->s.refused++;
  else if (err)
    w->s.failed++;
  trace(w, "%-12s %-3s %s", kn_cc_op_name(j->op), j->key ? j->key : "",
        err ? kn_error_string(err) : "ok");
  if (j->op == KN_CC_LIST_LEASES) w->s.lists++;
  if (j->op == KN_CC_HEARTBEAT) {
    w->s.beats++;
    if (!err) w->s.beat_ms = j->sent_ms;
  }
  kn_drive_result_t res = kn_store_job_result(j);
  res.err = err;
  res.shards = r->shards;
  res.n_shards = r->n_shards;
  kn_drive_result(w->d, &res);
}

int kn_rig_run(kn_rig_worker_t *w) {
  for (int n = 0;; n++) {
    kn_store_job_t *j = pop(w);
    if (!j && !w->n_yields) return 0;
    if (n == RUN_BOUND) {
      kn_store_job_free(j);
      kn_rig_kill(w);
      return -1;
    }
    if (j) {
      answer(w, j);
      kn_store_job_free(j);
    } else {
      /* The oldest first; the drive may ask for more meanwhile. */
      char key[sizeof(w->yields[0].key)];
      int64_t tenure = w->yields[0].tenure;
      memcpy(key, w->yields[0].key, sizeof(key));
      memmove(&w->yields[0], &w->yields[1],
              --w->n_yields * sizeof(w->yields[0]));
      trace(w, "the application is done with %s (tenure %lld)", key,
            (long long)tenure);
      kn_drive_yielded(w->d, key, tenure, NULL);
    }
  }
}

int kn_rig_tick(kn_rig_worker_t *w, int64_t now) {
  if (now > w->rig->now) w->rig->now = now;
  kn_drive_tick(w->d);
  return kn_rig_run(w);
}

const kn_lease_t *kn_rig_lease(kn_rig_t *r, const char *key) {
  kn_lease_t *l = &r->look[r->n_look++ % KN_RIG_LOOKS];
  kn_lease_clear(l);
  kn_error_t *err = key ? r->ls->ops->get(r->ls, key, l) : NULL;
  if (err) kn_lease_clear(l);
  kn_error_destroy(err);
  return l;
}

size_t kn_rig_list(kn_rig_t *r, const kn_lease_t **v) {
  kn_lease_array_free(r->all, r->n_all);
  r->all = NULL;
  r->n_all = 0;
  kn_error_t *err = r->ls->ops->list(r->ls, &r->all, &r->n_all);
  kn_error_destroy(err);
  *v = r->all;
  return r->n_all;
}
