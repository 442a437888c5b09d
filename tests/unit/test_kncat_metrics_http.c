/* kncat --metrics, the server alone (nothing attached): where it listens,
 * what one address may hold, the whole-request deadline, methods refused
 * before their body, and health answers that keep the reason to the log. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "kt.h"
#include "metrics_http.h"

/* The local address of the socket listening on port, as /proc/net/tcp or
 * tcp6 write it (hex), into out; 0 if found. */
static int listen_addr(int port, char *out, size_t size) {
  const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
  for (int i = 0; i < 2; i++) {
    FILE *f = fopen(files[i], "r");
    if (!f) continue;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
      char local[128];
      unsigned lport, state;
      if (sscanf(line, " %*d: %127[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x", local,
                 &lport, &state) == 3 &&
          (int)lport == port && state == 0x0A /* LISTEN */) {
        snprintf(out, size, "%s", local);
        fclose(f);
        return 0;
      }
    }
    fclose(f);
  }
  return -1;
}

/* A connection to 127.0.0.1:port from the address src (any of 127/8 on
 * Linux), or -1. */
static int connect_from(const char *src, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  inet_pton(AF_INET, src, &a.sin_addr);
  struct timeval tv = {KT_PROMPT_MS / 1000, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    a.sin_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) return fd;
  }
  close(fd);
  return -1;
}

/* Sends req from src and reads the answer (until the server closes, or
 * KT_PROMPT_MS without a byte) into out; returns the status, 0 for none. */
static int ask(const char *src, int port, const char *req, char *out,
               size_t size) {
  out[0] = '\0';
  int fd = connect_from(src, port);
  if (fd < 0) return 0;
  size_t n = 0;
  if (send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req)) {
    ssize_t r;
    while (n + 1 < size && (r = recv(fd, out + n, size - 1 - n, 0)) > 0)
      n += (size_t)r;
  }
  out[n] = '\0';
  close(fd);
  int status = 0;
  if (sscanf(out, "HTTP/1.%*d %d", &status) != 1) status = 0;
  return status;
}

static const char *body_of(const char *answer) {
  const char *b = strstr(answer, "\r\n\r\n");
  return b ? b + 4 : "";
}

/* The server on a free loopback port, or NULL (a failed check). */
static kc_metrics_t *open_loopback(void) {
  char err[256];
  kc_metrics_t *m = kc_metrics_open(":0", err, sizeof(err));
  KT_CHECK_MSG(m != NULL, "%s", err);
  return m;
}

#define GET(path) \
  "GET " path " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

/* Where the server asked to listen on addr does listen (as /proc/net
 * writes it), or "" if it could not start. */
static const char *bound(const char *addr, char *out, size_t size) {
  char err[256];
  out[0] = '\0';
  kc_metrics_t *m = kc_metrics_open(addr, err, sizeof(err));
  KT_CHECK_MSG(m != NULL, "%s: %s", addr, err);
  if (!m) return out;
  KT_CHECK(listen_addr(kc_metrics_port(m), out, size) == 0);
  char answer[4096]; /* over IPv4 loopback in every case */
  KT_CHECK_INT(
      ask("127.0.0.1", kc_metrics_port(m), GET("/"), answer, sizeof(answer)),
      200);
  kc_metrics_close(m);
  return out;
}

/* ":PORT" is loopback only; every address only when asked for. */
static void test_binding(void) {
  char err[256], addr[160];
  KT_CHECK_STR(bound(":0", addr, sizeof(addr)), "0100007F"); /* 127.0.0.1 */
  KT_CHECK_STR(bound("0.0.0.0:0", addr, sizeof(addr)), "00000000");
  KT_CHECK_STR(bound("127.0.0.1:0", addr, sizeof(addr)), "0100007F");
  /* [::] (where the host has IPv6): every address, IPv4 ones too. */
  int v6 = socket(AF_INET6, SOCK_STREAM, 0);
  if (v6 >= 0) {
    close(v6);
    KT_CHECK_STR(bound("[::]:0", addr, sizeof(addr)),
                 "00000000000000000000000000000000");
  }
  KT_CHECK(kc_metrics_open("nonsense", err, sizeof(err)) == NULL);
  KT_CHECK(strstr(err, "HOST:PORT") != NULL);
}

/* Sends a byte on each of the connections every 500 ms until stop. */
typedef struct trickle {
  int *fds, n;
  volatile int stop;
} trickle_t;

static void *trickle_main(void *arg) {
  trickle_t *t = arg;
  while (!t->stop) {
    for (int i = 0; i < t->n; i++)
      if (t->fds[i] >= 0) send(t->fds[i], "a", 1, MSG_NOSIGNAL);
    usleep(500000);
  }
  return NULL;
}

/* Slow clients from one address, each sending a byte well within the idle
 * time-out, hold a few connections, not all: a probe from another address
 * is answered while they go on. */
static void test_per_address(void) {
  char answer[4096];
  kc_metrics_t *m = open_loopback();
  if (!m) return;
  int port = kc_metrics_port(m), fds[16], held = 0;
  for (int i = 0; i < 16; i++) {
    fds[i] = connect_from("127.0.0.2", port);
    if (fds[i] >= 0 && send(fds[i], "GET /metrics HTTP/1.1\r\nX-Slow: ", 32,
                            MSG_NOSIGNAL) == 32)
      held++;
  }
  KT_CHECK_INT(held, 16);
  trickle_t t = {fds, 16, 0};
  pthread_t th;
  int started = pthread_create(&th, NULL, trickle_main, &t) == 0;
  KT_CHECK(started);
  /* Without a per-address limit nor a deadline the probe would wait as
   * long as they trickle. */
  KT_CHECK_INT(ask("127.0.0.1", port, GET("/healthz"), answer, sizeof(answer)),
               503);
  t.stop = 1;
  if (started) pthread_join(th, NULL);
  for (int i = 0; i < 16; i++)
    if (fds[i] >= 0) close(fds[i]);
  kc_metrics_close(m);
}

/* A request trickled a byte at a time, each well within the idle time-out,
 * is cut off at the whole-request deadline. */
static void test_deadline(void) {
  kc_metrics_t *m = open_loopback();
  if (!m) return;
  int fd = connect_from("127.0.0.3", kc_metrics_port(m));
  KT_CHECK(fd >= 0);
  int closed = 0;
  /* The deadline (10 s) and KT_PROMPT_MS more, a byte a second. */
  for (int i = 0; fd >= 0 && i < 10 + KT_PROMPT_MS / 1000 && !closed; i++) {
    const char *req = "GET /metrics HTTP/1.1\r\nX-Slow: ";
    char c = i < (int)strlen(req) ? req[i] : 'a';
    if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
      closed = 1;
      break;
    }
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 1000) > 0) {
      char buf[256];
      ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      closed = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    }
  }
  KT_CHECK(closed);
  if (fd >= 0) close(fd);
  kc_metrics_close(m);
}

/* A method other than GET and HEAD is refused before its body comes. */
static void test_refuse_non_get(void) {
  char answer[4096];
  kc_metrics_t *m = open_loopback();
  if (!m) return;
  int port = kc_metrics_port(m);
  KT_CHECK_INT(ask("127.0.0.1", port,
                   "POST /metrics HTTP/1.1\r\nHost: x\r\n"
                   "Content-Length: 1000000\r\n\r\n",
                   answer, sizeof(answer)),
               405);
  KT_CHECK_INT(ask("127.0.0.1", port,
                   "PUT /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                   "Expect: 100-continue\r\n\r\n",
                   answer, sizeof(answer)),
               405);
  KT_CHECK(strstr(answer, "100 Continue") == NULL);
  KT_CHECK_INT(ask("127.0.0.1", port, GET("/nothing"), answer, sizeof(answer)),
               404);
  KT_CHECK_INT(ask("127.0.0.1", port, GET("/metrics"), answer, sizeof(answer)),
               200);
  kc_metrics_close(m);
}

/* Why the worker is not alive goes to the log, not to whoever asks. */
static void test_health_details(void) {
  char answer[4096];
  kc_metrics_t *m = open_loopback();
  if (!m) return;
  const char *why =
      "failed: assuming arn:aws:iam::123456789012:role/secret: denied";
  kc_metrics_detach(m, why);
  char path[] = "/tmp/kn-metrics-log-XXXXXX";
  int log = mkstemp(path);
  KT_CHECK(log >= 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(log, 2);
  int port = kc_metrics_port(m);
  char readyz[4096];
  int hs = ask("127.0.0.1", port, GET("/healthz"), answer, sizeof(answer));
  int rs = ask("127.0.0.1", port, GET("/readyz"), readyz, sizeof(readyz));
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  KT_CHECK_INT(hs, 503);
  KT_CHECK_STR(body_of(answer), "not alive\n");
  KT_CHECK_INT(rs, 503);
  KT_CHECK_STR(body_of(readyz), "not ready\n");
  char logged[2048] = "";
  ssize_t n = pread(log, logged, sizeof(logged) - 1, 0);
  logged[n > 0 ? n : 0] = '\0';
  close(log);
  unlink(path);
  KT_CHECK_MSG(strstr(logged, why) != NULL, "logged \"%s\"", logged);
  kc_metrics_close(m);
}

int main(void) {
  KT_RUN(test_binding);
  KT_RUN(test_per_address);
  KT_RUN(test_refuse_non_get);
  KT_RUN(test_health_details);
  KT_RUN(test_deadline);
  return KT_DONE();
}
