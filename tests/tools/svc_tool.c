/* svc_tool: raw AWS JSON service calls through the library's service
 * layer, for integration tests and measurements.
 *
 *   svc_tool [options] ACTION [JSON]
 *     -X name=value       a client property (kinesis.endpoint, http.version,
 *                         ssl.verify, retry.*, http.*)
 *     --service NAME      kinesis (default) or dynamodb
 *     --attempts N        max attempts of each call (default:
 * retry.max.attempts)
 *     --timeout-ms N      per attempt (default: http.request.timeout.ms)
 *     --repeat N          N blocking calls one after the other
 *     --chain N           N calls one after the other, each started by the
 *                         previous one's callback on the I/O thread
 *     --concurrent N      N calls started at once on the I/O thread
 *     -v                  debug log on stderr
 *
 * Prints one JSON object per call for a single call, else a summary, then
 * a line of totals: calls, errors, connections opened, HTTP/2 responses,
 * the process's CPU time.  Exit status: 0 all calls succeeded, 1 some
 * failed, 2 usage or setup error. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "aws/creds.h"
#include "aws/service.h"
#include "aws/settings.h"
#include "core/error.h"
#include "kn/conf.h"
#include "util/buf.h"
#include "util/clock.h"

static void usage(void) {
  fprintf(stderr,
          "usage: svc_tool [-X prop=value]... [--service kinesis|dynamodb] "
          "[--attempts N] [--timeout-ms N] [--repeat N | --chain N | "
          "--concurrent N] [-v] "
          "ACTION [JSON]\n");
}

static void print_result(const char *action, kn_error_t *err,
                         const kn_buf_t *body, int attempts, int status,
                         double ms) {
  kn_buf_t o = KN_BUF_INIT;
  kn_buf_printf(&o, "{\"action\":");
  kn_buf_append_json_str(&o, action, strlen(action));
  kn_buf_printf(&o, ",\"ok\":%s,\"status\":%d,\"attempts\":%d,\"ms\":%.1f",
                err ? "false" : "true", status, attempts, ms);
  kn_buf_printf(&o, ",\"code\":\"%s\"", kn_err2name(kn_error_code(err)));
  if (err) {
    const char *t = kn_error_type(err);
    kn_buf_printf(&o, ",\"type\":");
    if (t)
      kn_buf_append_json_str(&o, t, strlen(t));
    else
      kn_buf_append_str(&o, "null");
    kn_buf_printf(&o, ",\"retriable\":%s,\"throttling\":%s,\"error\":",
                  kn_error_is_retriable(err) ? "true" : "false",
                  kn_error_is_throttling(err) ? "true" : "false");
    const char *s = kn_error_string(err);
    kn_buf_append_json_str(&o, s, strlen(s));
  }
  kn_buf_printf(&o, ",\"body\":");
  kn_buf_append_json_str(&o, body->p ? body->p : "", body->len);
  kn_buf_append_str(&o, "}\n");
  fwrite(o.p, 1, o.len, stdout);
  kn_buf_free(&o);
}

/* --concurrent: every call started from one loop task. */
struct fan {
  kn_svc_t *svc;
  const char *action;
  const char *json;
  kn_call_opts_t opts;
  int n, started, done, errors;
  int max_attempts_seen;
  kn_error_t *first_err;
  pthread_mutex_t lock;
  pthread_cond_t cond;
};

static void fan_cb(void *opaque, kn_call_result_t *res) {
  struct fan *f = opaque;
  if (res->err) {
    f->errors++;
    if (!f->first_err)
      f->first_err = res->err;
    else
      kn_error_destroy(res->err);
  }
  if (res->attempts > f->max_attempts_seen)
    f->max_attempts_seen = res->attempts;
  if (++f->done == f->started) {
    pthread_mutex_lock(&f->lock);
    pthread_cond_signal(&f->cond);
    pthread_mutex_unlock(&f->lock);
  }
}

static void fan_start(void *arg) {
  struct fan *f = arg;
  for (int i = 0; i < f->n; i++) {
    kn_buf_t body = KN_BUF_INIT;
    kn_buf_append_str(&body, f->json);
    kn_error_t *err = NULL;
    f->started++;
    if (!kn_svc_call(f->svc, f->action, &body, &f->opts, fan_cb, f, &err)) {
      f->started--;
      f->errors++;
      if (!f->first_err)
        f->first_err = err;
      else
        kn_error_destroy(err);
    }
  }
  if (f->started == 0) {
    pthread_mutex_lock(&f->lock);
    pthread_cond_signal(&f->cond);
    pthread_mutex_unlock(&f->lock);
  }
}

/* A single call, with everything its result says. */
struct one {
  kn_svc_t *svc;
  const char *action;
  const char *json;
  kn_call_opts_t opts;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int done;
  kn_error_t *err;
  kn_buf_t out;
  int attempts, status;
};

static void one_done(struct one *o) {
  pthread_mutex_lock(&o->lock);
  o->done = 1;
  pthread_cond_signal(&o->cond);
  pthread_mutex_unlock(&o->lock);
}

static void one_cb(void *opaque, kn_call_result_t *res) {
  struct one *o = opaque;
  o->err = res->err;
  o->out = res->body;
  res->body = (kn_buf_t)KN_BUF_INIT;
  o->attempts = res->attempts;
  o->status = res->http_status;
  one_done(o);
}

static void one_start(void *arg) {
  struct one *o = arg;
  kn_buf_t body = KN_BUF_INIT;
  kn_buf_append_str(&body, o->json);
  if (!kn_svc_call(o->svc, o->action, &body, &o->opts, one_cb, o, &o->err))
    one_done(o);
}

/* --chain: the next call starts from the previous one's callback. */
struct chain {
  struct fan f;
  int left;
};

static void chain_next(struct chain *c);

static void chain_cb(void *opaque, kn_call_result_t *res) {
  struct chain *c = opaque;
  if (res->err) {
    c->f.errors++;
    if (!c->f.first_err)
      c->f.first_err = res->err;
    else
      kn_error_destroy(res->err);
  }
  if (res->attempts > c->f.max_attempts_seen)
    c->f.max_attempts_seen = res->attempts;
  c->f.done++;
  chain_next(c);
}

static void chain_next(struct chain *c) {
  while (c->left > 0) {
    c->left--;
    kn_buf_t body = KN_BUF_INIT;
    kn_buf_append_str(&body, c->f.json);
    kn_error_t *err = NULL;
    if (kn_svc_call(c->f.svc, c->f.action, &body, &c->f.opts, chain_cb, c,
                    &err))
      return;
    c->f.errors++;
    c->f.done++;
    if (!c->f.first_err)
      c->f.first_err = err;
    else
      kn_error_destroy(err);
  }
  pthread_mutex_lock(&c->f.lock);
  c->f.started = 1; /* finished */
  pthread_cond_signal(&c->f.cond);
  pthread_mutex_unlock(&c->f.lock);
}

static void chain_start(void *arg) { chain_next(arg); }

static void get_stats(void *arg) {
  void **a = arg;
  kn_loop_stats(a[0], a[1]);
}

static double cpu_seconds(double *user, double *sys) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  *user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
  *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
  return *user + *sys;
}

int main(int argc, char **argv) {
  kn_conf_t *conf = kn_conf_new();
  const kn_svc_def_t *def = &kn_svc_kinesis;
  kn_call_opts_t opts = {0};
  int repeat = 1, concurrent = 0, chain = 0, verbose = 0;
  const char *action = NULL, *json = "{}";
  char errstr[512];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "-X") == 0 && next) {
      char *eq = strchr(next, '=');
      if (!eq) {
        usage();
        return 2;
      }
      *eq = '\0';
      if (kn_conf_set(conf, next, eq + 1, errstr, sizeof(errstr)) !=
          KN_CONF_OK) {
        fprintf(stderr, "svc_tool: %s\n", errstr);
        return 2;
      }
      i++;
    } else if (strcmp(a, "--service") == 0 && next) {
      def = strcmp(next, "dynamodb") == 0 ? &kn_svc_dynamodb : &kn_svc_kinesis;
      i++;
    } else if (strcmp(a, "--attempts") == 0 && next) {
      opts.max_attempts = atoi(next);
      i++;
    } else if (strcmp(a, "--timeout-ms") == 0 && next) {
      opts.timeout_ms = atol(next);
      i++;
    } else if (strcmp(a, "--repeat") == 0 && next) {
      repeat = atoi(next);
      i++;
    } else if (strcmp(a, "--chain") == 0 && next) {
      chain = atoi(next);
      i++;
    } else if (strcmp(a, "--concurrent") == 0 && next) {
      concurrent = atoi(next);
      i++;
    } else if (strcmp(a, "-v") == 0) {
      verbose = 1;
    } else if (a[0] == '-') {
      usage();
      return 2;
    } else if (!action) {
      action = a;
    } else {
      json = a;
    }
  }
  if (!action || repeat < 1 || concurrent < 0 || chain < 0) {
    usage();
    return 2;
  }

  kn_logger_t lg = {.level = verbose ? KN_LOG_DEBUG : KN_LOG_WARN,
                    .name = "svc_tool"};
  kn_aws_settings_t s;
  memset(&s, 0, sizeof(s));
  kn_error_t *err = kn_aws_settings_load(&s, conf, &lg);
  kn_conf_destroy(conf);
  kn_loop_t *loop = NULL;
  kn_creds_provider_t *creds = NULL;
  kn_svc_t *svc = NULL;
  if (!err) loop = kn_loop_new(&s.http, &err);
  if (!err) creds = kn_creds_provider_new(&s, &err);
  if (!err)
    svc = kn_svc_new(
        loop, creds, &s, def,
        def == &kn_svc_dynamodb ? s.dynamodb_endpoint : s.kinesis_endpoint,
        &err);
  if (err) {
    fprintf(stderr, "svc_tool: %s\n", kn_error_string(err));
    kn_error_destroy(err);
    kn_creds_provider_destroy(creds);
    kn_loop_destroy(loop);
    kn_aws_settings_clear(&s);
    return 2;
  }

  double u0, s0, u1, s1;
  cpu_seconds(&u0, &s0);
  int64_t t0 = kn_mono_us();
  int calls = 0, errors = 0, max_attempts = 0;
  if (chain) {
    struct chain c = {
        .f = {.svc = svc, .action = action, .json = json, .opts = opts},
        .left = chain};
    pthread_mutex_init(&c.f.lock, NULL);
    pthread_cond_init(&c.f.cond, NULL);
    pthread_mutex_lock(&c.f.lock);
    kn_loop_post(loop, chain_start, &c);
    while (!c.f.started) pthread_cond_wait(&c.f.cond, &c.f.lock);
    pthread_mutex_unlock(&c.f.lock);
    calls = chain;
    errors = c.f.errors;
    max_attempts = c.f.max_attempts_seen;
    if (c.f.first_err)
      fprintf(stderr, "svc_tool: first error: %s\n",
              kn_error_string(c.f.first_err));
    kn_error_destroy(c.f.first_err);
    pthread_mutex_destroy(&c.f.lock);
    pthread_cond_destroy(&c.f.cond);
  } else if (concurrent) {
    struct fan f = {.svc = svc,
                    .action = action,
                    .json = json,
                    .opts = opts,
                    .n = concurrent};
    pthread_mutex_init(&f.lock, NULL);
    pthread_cond_init(&f.cond, NULL);
    pthread_mutex_lock(&f.lock);
    kn_loop_post(loop, fan_start, &f);
    do pthread_cond_wait(&f.cond, &f.lock);
    while (f.done < f.started);
    pthread_mutex_unlock(&f.lock);
    calls = concurrent;
    errors = f.errors;
    max_attempts = f.max_attempts_seen;
    if (f.first_err)
      fprintf(stderr, "svc_tool: first error: %s\n",
              kn_error_string(f.first_err));
    kn_error_destroy(f.first_err);
    pthread_mutex_destroy(&f.lock);
    pthread_cond_destroy(&f.cond);
  } else {
    for (int i = 0; i < repeat; i++) {
      int64_t c0 = kn_mono_us();
      if (repeat == 1) {
        /* An asynchronous call, to see its attempts and status. */
        struct one o = {
            .svc = svc, .action = action, .json = json, .opts = opts};
        pthread_mutex_init(&o.lock, NULL);
        pthread_cond_init(&o.cond, NULL);
        pthread_mutex_lock(&o.lock);
        kn_loop_post(loop, one_start, &o);
        while (!o.done) pthread_cond_wait(&o.cond, &o.lock);
        pthread_mutex_unlock(&o.lock);
        print_result(action, o.err, &o.out, o.attempts, o.status,
                     (double)(kn_mono_us() - c0) / 1000.0);
        errors += o.err != NULL;
        max_attempts = o.attempts;
        kn_error_destroy(o.err);
        kn_buf_free(&o.out);
        pthread_mutex_destroy(&o.lock);
        pthread_cond_destroy(&o.cond);
      } else {
        kn_buf_t out = KN_BUF_INIT;
        err = kn_svc_call_sync(svc, action, json, strlen(json), &opts, &out);
        if (err && ++errors <= 3)
          fprintf(stderr, "svc_tool: call %d: %s\n", i + 1,
                  kn_error_string(err));
        kn_error_destroy(err);
        kn_buf_free(&out);
      }
      calls++;
    }
  }
  double wall = (double)(kn_mono_us() - t0) / 1e6;
  cpu_seconds(&u1, &s1);
  kn_http_stats_t st;
  void *sa[2] = {loop, &st};
  kn_loop_call(loop, get_stats, sa);
  printf(
      "{\"calls\":%d,\"errors\":%d,\"max_attempts\":%d,\"requests\":%llu,"
      "\"connects\":%llu,\"http2\":%llu,\"wall_s\":%.3f,\"cpu_user_s\":%.3f,"
      "\"cpu_sys_s\":%.3f}\n",
      calls, errors, max_attempts, (unsigned long long)st.requests,
      (unsigned long long)st.connects, (unsigned long long)st.http2, wall,
      u1 - u0, s1 - s0);
  kn_svc_destroy(svc);
  kn_loop_destroy(loop);
  kn_creds_provider_destroy(creds);
  kn_aws_settings_clear(&s);
  return errors ? 1 : 0;
}
