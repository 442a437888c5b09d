/* The loop's task queue: posting from many threads, kn_loop_call, and
 * destroy with work still queued. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "aws/http.h"
#include "core/error.h"
#include "kt.h"
#include "util/clock.h"

static kn_loop_t *new_loop(void) {
  kn_http_opts_t o = {
      .verify_tls = 1, .connect_timeout_ms = 1000, .max_connections = 4};
  kn_error_t *err = NULL;
  kn_loop_t *loop = kn_loop_new(&o, &err);
  KT_CHECK(loop != NULL);
  KT_CHECK(err == NULL);
  kn_error_destroy(err);
  return loop;
}

#define THREADS 8
#define POSTS 20000

struct counts {
  kn_loop_t *loop;
  long total;         /* I/O thread only */
  long last[THREADS]; /* per poster: the last sequence number seen */
  long out_of_order;
  long off_thread;
};

struct post {
  struct counts *c;
  int thread;
  long seq;
};

static void count_post(void *arg) {
  struct post *p = arg;
  struct counts *c = p->c;
  if (!kn_loop_on_thread(c->loop)) c->off_thread++;
  if (p->seq != c->last[p->thread] + 1) c->out_of_order++;
  c->last[p->thread] = p->seq;
  c->total++;
  free(p);
}

struct poster {
  struct counts *c;
  int id;
  int failed;
};

static void *poster_main(void *arg) {
  struct poster *ps = arg;
  for (long i = 1; i <= POSTS; i++) {
    struct post *p = malloc(sizeof(*p));
    *p = (struct post){ps->c, ps->id, i};
    if (kn_loop_post(ps->c->loop, count_post, p)) {
      free(p);
      ps->failed++;
    }
    if (i % 5000 == 0) kn_sleep_ms(1); /* let the loop sleep now and then */
  }
  return NULL;
}

static void noop(void *arg) { (void)arg; }

static void test_many_posters(void) {
  struct counts c = {0};
  c.loop = new_loop();
  KT_CHECK(!kn_loop_on_thread(c.loop));
  pthread_t th[THREADS];
  struct poster ps[THREADS];
  for (int i = 0; i < THREADS; i++) {
    ps[i] = (struct poster){&c, i, 0};
    pthread_create(&th[i], NULL, poster_main, &ps[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  /* A call queued after every post runs after all of them. */
  KT_CHECK_INT(kn_loop_call(c.loop, noop, NULL), 0);
  for (int i = 0; i < THREADS; i++) KT_CHECK_INT(ps[i].failed, 0);
  KT_CHECK_INT(c.total, (long)THREADS * POSTS);
  KT_CHECK_INT(c.out_of_order, 0);
  KT_CHECK_INT(c.off_thread, 0);
  kn_loop_destroy(c.loop);
}

/* kn_loop_call from many threads at once, and nested on the I/O thread. */
struct callst {
  kn_loop_t *loop;
  long n;
  int nested_direct;
};

static void incr(void *arg) {
  struct callst *s = arg;
  s->n++;
}

static void nested(void *arg) {
  struct callst *s = arg;
  long before = s->n;
  /* On the I/O thread kn_loop_call runs fn at once instead of deadlocking. */
  kn_loop_call(s->loop, incr, s);
  s->nested_direct = s->n == before + 1 && kn_loop_on_thread(s->loop);
}

static void *caller_main(void *arg) {
  struct callst *s = arg;
  for (int i = 0; i < 2000; i++) kn_loop_call(s->loop, incr, s);
  return NULL;
}

static void test_call(void) {
  struct callst s = {0};
  s.loop = new_loop();
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, caller_main, &s);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  KT_CHECK_INT(s.n, 8000); /* each call returned after its fn ran */
  KT_CHECK_INT(kn_loop_call(s.loop, nested, &s), 0);
  KT_CHECK(s.nested_direct);
  kn_loop_destroy(s.loop);
}

/* Destroy runs what was posted (it may own memory), then refuses posts. */
static atomic_int ran_at_destroy;
static kn_loop_t *refuse_loop;
static atomic_int refused;

/* Holds the loop until destroy has begun (a post fails), so that what
 * was posted after it is still queued then, however the threads run. */
static void hold_until_stopping(void *arg) {
  (void)arg;
  while (kn_loop_post(refuse_loop, noop, NULL) == 0) kn_sleep_ms(1);
}

static void owner(void *arg) {
  free(arg);
  atomic_fetch_add(&ran_at_destroy, 1);
  /* Posting while the loop stops fails, and the function is not run. */
  if (kn_loop_post(refuse_loop, noop, NULL) != 0) atomic_fetch_add(&refused, 1);
}

static void test_destroy_pending(void) {
  kn_loop_t *loop = new_loop();
  refuse_loop = loop;
  kn_loop_post(loop, hold_until_stopping, NULL);
  for (int i = 0; i < 200; i++) kn_loop_post(loop, owner, malloc(64));
  kn_loop_destroy(loop);
  KT_CHECK_INT(atomic_load(&ran_at_destroy), 200);
  KT_CHECK_INT(atomic_load(&refused), 200);
}

static void test_destroy_null_and_idle(void) {
  kn_loop_destroy(NULL);
  kn_loop_t *loop = new_loop();
  kn_sleep_ms(5);
  kn_loop_destroy(loop);
  KT_CHECK(1);
}

int main(void) {
  KT_RUN(test_many_posters);
  KT_RUN(test_call);
  KT_RUN(test_destroy_pending);
  KT_RUN(test_destroy_null_and_idle);
  return KT_DONE();
}
