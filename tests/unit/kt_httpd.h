/* kt_httpd.h - a tiny HTTP/1.1 server on 127.0.0.1 for unit tests: one
 * thread per connection, keep-alive, answers chosen by a handler. */
#ifndef KT_HTTPD_H
#define KT_HTTPD_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct kt_httpd_req {
  char method[16];
  char path[256];
  char head[8192]; /* request line and headers */
  char *body;      /* NUL-terminated */
  size_t body_len;
} kt_httpd_req_t;

enum { KT_REPLY = 0, KT_CLOSE = 1, KT_HANG = 2 };

/* Writes the whole response (status line, headers, body) into out (size
 * bytes) and returns KT_REPLY with *out_len set; or KT_CLOSE to drop the
 * connection unanswered, KT_HANG to never answer. */
typedef int (*kt_httpd_fn)(void *ud, const kt_httpd_req_t *req, char *out,
                           size_t size, size_t *out_len);

/* Connections open at once; finished ones are reaped as new ones come. */
#define KT_HTTPD_MAX_CONN 512

struct kt_conn {
  struct kt_httpd *s;
  int fd;
  pthread_t th;
  atomic_int done; /* the thread has finished with fd */
};

typedef struct kt_httpd {
  int fd;
  int port;
  kt_httpd_fn fn;
  void *ud;
  pthread_t acceptor;
  struct kt_conn *conns[KT_HTTPD_MAX_CONN];
  int n_conn;
  pthread_mutex_t lock;
  atomic_int stop;
  atomic_int requests;
  atomic_int connections;
} kt_httpd_t;

static size_t kt_content_length(const char *head) {
  const char *p = head;
  while ((p = strchr(p, '\n')) != NULL) {
    p++;
    if (strncasecmp(p, "Content-Length:", 15) == 0)
      return (size_t)strtoul(p + 15, NULL, 10);
  }
  return 0;
}

static void *kt_conn_main(void *arg) {
  struct kt_conn *c = arg;
  kt_httpd_t *s = c->s;
  size_t cap = 1 << 16, len = 0;
  char *in = malloc(cap);
  size_t out_cap = 1 << 20;
  char *out = malloc(out_cap);
  for (;;) {
    char *end;
    while ((end = len ? memmem(in, len, "\r\n\r\n", 4) : NULL) == NULL) {
      if (len == cap) goto done;
      ssize_t n = recv(c->fd, in + len, cap - len, 0);
      if (n <= 0) goto done;
      len += (size_t)n;
    }
    size_t head_len = (size_t)(end - in) + 4;
    kt_httpd_req_t *req = calloc(1, sizeof(*req));
    size_t hl = head_len < sizeof(req->head) ? head_len : sizeof(req->head) - 1;
    memcpy(req->head, in, hl);
    sscanf(req->head, "%15s %255s", req->method, req->path);
    req->body_len = kt_content_length(req->head);
    while (len < head_len + req->body_len) {
      if (head_len + req->body_len > cap) {
        cap = head_len + req->body_len;
        in = realloc(in, cap);
      }
      ssize_t n = recv(c->fd, in + len, cap - len, 0);
      if (n <= 0) {
        free(req);
        goto done;
      }
      len += (size_t)n;
    }
    req->body = malloc(req->body_len + 1);
    memcpy(req->body, in + head_len, req->body_len);
    req->body[req->body_len] = 0;
    memmove(in, in + head_len + req->body_len, len - head_len - req->body_len);
    len -= head_len + req->body_len;
    atomic_fetch_add(&s->requests, 1);
    size_t out_len = 0;
    int act = s->fn(s->ud, req, out, out_cap, &out_len);
    free(req->body);
    free(req);
    if (act == KT_CLOSE) break;
    if (act == KT_HANG) {
      while (!atomic_load(&s->stop)) usleep(10000);
      break;
    }
    size_t off = 0;
    while (off < out_len) {
      ssize_t n = send(c->fd, out + off, out_len - off, MSG_NOSIGNAL);
      if (n <= 0) goto done;
      off += (size_t)n;
    }
  }
done:
  shutdown(c->fd,
           SHUT_RDWR); /* closed when reaped, so fds are not reused early */
  free(in);
  free(out);
  atomic_store(&c->done, 1);
  return NULL;
}

/* Joins and closes the finished connections (s->lock held). */
static void kt_httpd_reap(kt_httpd_t *s) {
  int k = 0;
  for (int i = 0; i < s->n_conn; i++) {
    struct kt_conn *c = s->conns[i];
    if (atomic_load(&c->done)) {
      pthread_join(c->th, NULL);
      close(c->fd);
      free(c);
    } else {
      s->conns[k++] = c;
    }
  }
  s->n_conn = k;
}

static void *kt_accept_main(void *arg) {
  kt_httpd_t *s = arg;
  for (;;) {
    struct pollfd pfd = {s->fd, POLLIN, 0};
    if (poll(&pfd, 1, 20) <= 0) {
      if (atomic_load(&s->stop)) break;
      continue;
    }
    int fd = accept(s->fd, NULL, NULL);
    if (fd < 0) continue;
    atomic_fetch_add(&s->connections, 1);
    pthread_mutex_lock(&s->lock);
    kt_httpd_reap(s);
    struct kt_conn *c = NULL;
    if (s->n_conn < KT_HTTPD_MAX_CONN && !atomic_load(&s->stop))
      c = calloc(1, sizeof(*c));
    if (!c) {
      pthread_mutex_unlock(&s->lock);
      close(fd);
      continue;
    }
    c->s = s;
    c->fd = fd;
    if (pthread_create(&c->th, NULL, kt_conn_main, c)) {
      free(c);
      close(fd);
    } else {
      s->conns[s->n_conn++] = c;
    }
    pthread_mutex_unlock(&s->lock);
  }
  return NULL;
}

static int kt_httpd_start(kt_httpd_t *s, kt_httpd_fn fn, void *ud) {
  memset(s, 0, sizeof(*s));
  s->fn = fn;
  s->ud = ud;
  pthread_mutex_init(&s->lock, NULL);
  s->fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(s->fd, 64))
    return -1;
  socklen_t sl = sizeof(sa);
  getsockname(s->fd, (struct sockaddr *)&sa, &sl);
  s->port = ntohs(sa.sin_port);
  return pthread_create(&s->acceptor, NULL, kt_accept_main, s);
}

static void kt_httpd_stop(kt_httpd_t *s) {
  atomic_store(&s->stop, 1);
  pthread_join(s->acceptor, NULL);
  for (int i = 0; i < s->n_conn; i++) shutdown(s->conns[i]->fd, SHUT_RDWR);
  for (int i = 0; i < s->n_conn; i++) {
    pthread_join(s->conns[i]->th, NULL);
    close(s->conns[i]->fd);
    free(s->conns[i]);
  }
  s->n_conn = 0;
  close(s->fd);
  pthread_mutex_destroy(&s->lock);
}

/* A response with a body and optional extra header lines ("A: b\r\n"). */
static size_t kt_httpd_resp(char *out, size_t size, int status,
                            const char *extra, const char *body) {
  int n =
      snprintf(out, size, "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n%s\r\n%s",
               status, strlen(body), extra ? extra : "", body);
  return n < 0 ? 0 : (size_t)n;
}

/* A port on 127.0.0.1 where nothing listens (bound and closed). */
/* A loopback port where connections are refused: bound (so no other
 * process can take it meanwhile) but never listening.  The socket stays
 * open for the life of the process. */
__attribute__((unused)) static int kt_closed_port(void) {
  static int fd = -1;
  static int port;
  if (fd >= 0) return port;
  fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, (struct sockaddr *)&sa, sizeof(sa));
  socklen_t sl = sizeof(sa);
  getsockname(fd, (struct sockaddr *)&sa, &sl);
  port = ntohs(sa.sin_port);
  return port;
}

#endif
