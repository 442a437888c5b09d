#include "metrics_http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "signals.h"

/* Connections at once, from one address, how long an idle one is kept
 * and how long one request may take in all (from the connection, or the
 * end of the previous request on it, to the end of its answer): enough
 * for a few scrapers and probes, few enough that a flood costs little and
 * that clients sending a byte now and then cannot keep the slots. */
#define MAX_CONNECTIONS 16
#define MAX_PER_ADDRESS 4
#define CONNECTION_TIMEOUT_S 10
#define REQUEST_DEADLINE_MS 10000
#define REAP_EVERY_MS 500
#define FIRST_BUFFER (64 * 1024)

/* A connection the server holds; in kc_metrics.conns. */
typedef struct conn {
  struct conn *prev, *next;
  int fd;
  int64_t deadline_ms; /* monotonic */
  int cut;             /* shut down at its deadline */
} conn_t;

struct kc_metrics {
  struct MHD_Daemon *d;
  int port;
  pthread_mutex_t mu; /* guards everything below, up to cmu */
  kn_consumer_t *kc;  /* attached, or NULL */
  kn_producer_t *kp;
  char *last; /* the document rendered at detach, or NULL */
  size_t last_len;
  char why[256];       /* why not alive once detached */
  char told[2][320];   /* the reasons last logged for /healthz, /readyz */
  pthread_mutex_t cmu; /* guards conns and stop */
  pthread_cond_t cv;   /* signals stop */
  conn_t *conns;       /* owned here; added and removed by the server's
                        * thread, shut down by the reaper's */
  int stop;
  pthread_t reaper;
  int reaper_started;
};

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- answers ---- */

/* The document of the attached object, malloc'ed, or NULL. mu held. */
static char *render_locked(kc_metrics_t *m, size_t *len) {
  size_t size = FIRST_BUFFER;
  for (int tries = 0; tries < 4; tries++) {
    char *buf = malloc(size);
    if (!buf) return NULL;
    size_t n = 0;
    if (m->kc)
      n = kn_consumer_metrics(m->kc, buf, size);
    else if (m->kp)
      n = kn_producer_metrics(m->kp, buf, size);
    else if (m->last) {
      free(buf);
      buf = malloc(m->last_len + 1);
      if (!buf) return NULL;
      memcpy(buf, m->last, m->last_len + 1);
      *len = m->last_len;
      return buf;
    }
    if (n == 0 && (m->kc || m->kp)) { /* out of memory */
      free(buf);
      return NULL;
    }
    if (n < size) {
      *len = n;
      return buf;
    }
    free(buf);
    size = n + 4096; /* more shards since: try once more, a bit larger */
  }
  return NULL;
}

/* Non-zero if alive (which 'h', /healthz) or ready ('r', /readyz); the
 * reason when not, into reason.  mu held. */
static int health_locked(kc_metrics_t *m, int which, char *reason,
                         size_t size) {
  reason[0] = '\0';
  if (m->kc) {
    kn_consumer_health_t h;
    kn_consumer_health(m->kc, &h);
    int ok = which == 'h' ? h.alive : h.ready;
    if (!ok) snprintf(reason, size, "%s", h.reason);
    return ok;
  }
  if (m->kp) {
    int ready = 0;
    int alive = kn_producer_alive(m->kp, &ready);
    int ok = which == 'h' ? alive : ready;
    if (!ok)
      snprintf(reason, size, "%s",
               alive ? "the shard map is not loaded yet" : "closing");
    return ok;
  }
  snprintf(reason, size, "%s", m->why[0] ? m->why : "not started");
  return 0;
}

/* The reason goes to the log, once for each change: it may name roles,
 * accounts, paths or a credential helper's words, which are not for
 * whoever can reach the port.  mu held. */
static void tell_locked(kc_metrics_t *m, int which, const char *reason) {
  char *told = m->told[which == 'h' ? 0 : 1];
  if (!strcmp(told, reason)) return;
  snprintf(told, sizeof(m->told[0]), "%s", reason);
  if (reason[0])
    fprintf(stderr, "kncat: metrics: /%s: 503: %s\n",
            which == 'h' ? "healthz" : "readyz", reason);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
                             char *body, size_t len, const char *type) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status,
                            const char *msg) {
  char *body = strdup(msg);
  if (!body) return MHD_NO;
  return reply(c, status, body, strlen(body), "text/plain; charset=utf-8");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **state) {
  (void)version;
  (void)upload;
  kc_metrics_t *m = cls;
  /* Other methods are refused as soon as the headers are in, their body
   * unread (and the connection then closed). */
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
      strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
    char *body = strdup("GET only\n");
    if (!body) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
      free(body);
      return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; charset=utf-8");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
    MHD_destroy_response(r);
    return ret;
  }
  /* Answer once the headers are in; a body is not wanted. */
  if (!*state) {
    *state = m;
    return MHD_YES;
  }
  if (*upload_size) {
    *upload_size = 0;
    return MHD_YES;
  }
  if (strcmp(url, "/metrics") == 0) {
    size_t len = 0;
    pthread_mutex_lock(&m->mu);
    char *doc = render_locked(m, &len);
    pthread_mutex_unlock(&m->mu);
    if (!doc) return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    return reply(c, MHD_HTTP_OK, doc, len,
                 "text/plain; version=0.0.4; charset=utf-8");
  }
  if (strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0) {
    char reason[320];
    pthread_mutex_lock(&m->mu);
    int ok = health_locked(m, url[1], reason, sizeof(reason));
    tell_locked(m, url[1], reason);
    pthread_mutex_unlock(&m->mu);
    return text(c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                ok              ? "ok\n"
                : url[1] == 'h' ? "not alive\n"
                                : "not ready\n");
  }
  if (strcmp(url, "/") == 0)
    return text(c, MHD_HTTP_OK, "kncat: /metrics /healthz /readyz\n");
  return text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* ---- connections and their deadline ---- */

/* The server's thread: a connection starts (its deadline is set) or is
 * closed (forgotten, before libmicrohttpd closes its descriptor: so the
 * reaper, under cmu, only ever shuts down a descriptor still open). */
static void on_connection(void *cls, struct MHD_Connection *c, void **ctx,
                          enum MHD_ConnectionNotificationCode code) {
  kc_metrics_t *m = cls;
  pthread_mutex_lock(&m->cmu);
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    conn_t *k = info ? calloc(1, sizeof(*k)) : NULL;
    if (k) { /* out of memory: this one has the idle time-out only */
      k->fd = info->connect_fd;
      k->deadline_ms = mono_ms() + REQUEST_DEADLINE_MS;
      k->next = m->conns;
      if (m->conns) m->conns->prev = k;
      m->conns = k;
    }
    *ctx = k;
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *ctx) {
    conn_t *k = *ctx;
    if (k->prev)
      k->prev->next = k->next;
    else
      m->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    free(k);
    *ctx = NULL;
  }
  pthread_mutex_unlock(&m->cmu);
}

/* The server's thread: a request is answered; the next on the connection
 * has a deadline of its own. */
static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode toe) {
  (void)state;
  (void)toe;
  kc_metrics_t *m = cls;
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  pthread_mutex_lock(&m->cmu);
  conn_t *k = info ? info->socket_context : NULL;
  if (k && !k->cut) k->deadline_ms = mono_ms() + REQUEST_DEADLINE_MS;
  pthread_mutex_unlock(&m->cmu);
}

/* The reaper's thread: shuts down connections past their deadline;
 * libmicrohttpd then sees them end and closes them. */
static void *reaper_main(void *arg) {
  kc_metrics_t *m = arg;
  pthread_mutex_lock(&m->cmu);
  while (!m->stop) {
    int64_t now = mono_ms();
    for (conn_t *k = m->conns; k; k = k->next)
      if (!k->cut && now >= k->deadline_ms) {
        shutdown(k->fd, SHUT_RDWR);
        k->cut = 1;
      }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += REAP_EVERY_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&m->cv, &m->cmu, &until);
  }
  pthread_mutex_unlock(&m->cmu);
  return NULL;
}

/* ---- the server ---- */

/* HOST:PORT into host and port; an empty host is loopback. */
static int split_addr(const char *addr, char *host, size_t size, long *port) {
  const char *colon = strrchr(addr, ':');
  if (!colon) return -1;
  const char *h = addr;
  size_t hl = (size_t)(colon - addr);
  if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
    h++;
    hl -= 2;
  }
  if (hl >= size) return -1;
  memcpy(host, h, hl);
  host[hl] = '\0';
  if (!hl) snprintf(host, size, "127.0.0.1");
  char *end;
  *port = strtol(colon + 1, &end, 10);
  if (colon[1] == '\0' || *end || *port < 0 || *port > 65535) return -1;
  return 0;
}

static void free_metrics(kc_metrics_t *m) {
  pthread_mutex_destroy(&m->mu);
  pthread_mutex_destroy(&m->cmu);
  pthread_cond_destroy(&m->cv);
  free(m->last);
  free(m);
}

kc_metrics_t *kc_metrics_open(const char *addr, char *err, size_t size) {
  char host[256];
  long port;
  if (!addr || split_addr(addr, host, sizeof(host), &port)) {
    snprintf(err, size, "--metrics needs HOST:PORT, not \"%s\"",
             addr ? addr : "");
    return NULL;
  }
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  char ps[16];
  snprintf(ps, sizeof(ps), "%ld", port);
  int gai = getaddrinfo(host, ps, &hints, &ai);
  if (gai || !ai) {
    snprintf(err, size, "--metrics %s: %s", addr, gai_strerror(gai));
    return NULL;
  }
  kc_metrics_t *m = calloc(1, sizeof(*m));
  if (!m) {
    freeaddrinfo(ai);
    snprintf(err, size, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&m->mu, NULL);
  pthread_mutex_init(&m->cmu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&m->cv, &ca);
  pthread_condattr_destroy(&ca);
  /* poll(), not epoll: with epoll this libmicrohttpd (0.9.75) stopped
   * accepting once the connection limit had been reached, until a
   * time-out freed a slot. */
  unsigned flags = MHD_USE_POLL_INTERNAL_THREAD;
  if (ai->ai_family == AF_INET6) {
    /* [::] is every address, IPv4 ones too. */
    const struct sockaddr_in6 *a6 = (const void *)ai->ai_addr;
    flags |= IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) ? MHD_USE_DUAL_STACK
                                                     : MHD_USE_IPv6;
  }
  /* The server's threads take no SIGINT or SIGTERM: they must interrupt
   * the main thread's blocking reads. */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  m->d = MHD_start_daemon(
      flags, (uint16_t)port, NULL, NULL, on_request, m, MHD_OPTION_SOCK_ADDR,
      ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)MAX_PER_ADDRESS,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, m, MHD_OPTION_END);
  if (m->d)
    m->reaper_started = pthread_create(&m->reaper, NULL, reaper_main, m) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  freeaddrinfo(ai);
  if (!m->d || !m->reaper_started) {
    snprintf(err, size,
             m->d ? "--metrics %s: cannot start a thread"
                  : "--metrics %s: cannot listen there (in use, or not "
                    "an address of this host)",
             addr);
    if (m->d) MHD_stop_daemon(m->d);
    free_metrics(m);
    return NULL;
  }
  const union MHD_DaemonInfo *info =
      MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
  m->port = info ? (int)info->port : (int)port;
  return m;
}

int kc_metrics_port(const kc_metrics_t *m) { return m ? m->port : 0; }

void kc_metrics_attach_consumer(kc_metrics_t *m, kn_consumer_t *kc) {
  pthread_mutex_lock(&m->mu);
  m->kc = kc;
  m->kp = NULL;
  pthread_mutex_unlock(&m->mu);
}

void kc_metrics_attach_producer(kc_metrics_t *m, kn_producer_t *kp) {
  pthread_mutex_lock(&m->mu);
  m->kp = kp;
  m->kc = NULL;
  pthread_mutex_unlock(&m->mu);
}

void kc_metrics_detach(kc_metrics_t *m, const char *why) {
  pthread_mutex_lock(&m->mu);
  free(m->last);
  m->last = NULL;
  size_t len = 0;
  char *doc = render_locked(m, &len);
  m->last = doc;
  m->last_len = doc ? len : 0;
  m->kc = NULL;
  m->kp = NULL;
  snprintf(m->why, sizeof(m->why), "%s", why ? why : "stopped");
  pthread_mutex_unlock(&m->mu);
}

void kc_metrics_close(kc_metrics_t *m) {
  if (!m) return;
  pthread_mutex_lock(&m->cmu);
  m->stop = 1;
  pthread_cond_signal(&m->cv);
  pthread_mutex_unlock(&m->cmu);
  pthread_join(m->reaper, NULL);
  MHD_stop_daemon(m->d); /* closes (and so forgets) every connection */
  free_metrics(m);
}

/* ---- for commands ---- */

int kc_metrics_start(kc_ctx_t *ctx) {
  ctx->metrics_tried = 1;
  if (!ctx->metrics_addr || ctx->metrics) return KC_GO_ON;
  char err[512];
  ctx->metrics = kc_metrics_open(ctx->metrics_addr, err, sizeof(err));
  if (!ctx->metrics) {
    kc_errorf(ctx, "%s", err);
    return KC_EXIT_USAGE;
  }
  /* Always printed: with port 0 this is how the caller learns it. */
  char host[256];
  long port;
  split_addr(ctx->metrics_addr, host, sizeof(host), &port);
  int v6 = strchr(host, ':') != NULL;
  fprintf(stderr, "kncat: %s: metrics on http://%s%s%s:%d/metrics\n",
          ctx->cmd ? ctx->cmd->name : "kncat", v6 ? "[" : "", host,
          v6 ? "]" : "", kc_metrics_port(ctx->metrics));
  fflush(stderr);
  return KC_GO_ON;
}

void kc_metrics_stop_consumer(kc_ctx_t *ctx, kn_consumer_t *kc) {
  if (!ctx->metrics) return;
  char why[320];
  const kn_error_t *fe = kn_consumer_fatal_error(kc);
  if (fe)
    snprintf(why, sizeof(why), "failed: %s", kn_error_string(fe));
  else
    snprintf(why, sizeof(why), "finished");
  kc_metrics_detach(ctx->metrics, why);
}

void kc_metrics_stop_producer(kc_ctx_t *ctx, kn_producer_t *kp) {
  (void)kp;
  if (ctx->metrics) kc_metrics_detach(ctx->metrics, "finished");
}

void kc_metrics_finish(kc_ctx_t *ctx) {
  if (!ctx->metrics) return;
  struct timespec step = {0, 100 * 1000000L};
  for (long long left = ctx->metrics_linger_ms;
       left > 0 && !kc_signal_received(); left -= 100)
    nanosleep(&step, NULL);
  kc_metrics_close(ctx->metrics);
  ctx->metrics = NULL;
}
