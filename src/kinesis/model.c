#include "kinesis/model.h"

#include <stdlib.h>
#include <string.h>

#include "util/str.h"

/* ---- String lists ---- */

kn_strlist_t *kn_strlist_new(void) { return calloc(1, sizeof(kn_strlist_t)); }

int kn_strlist_add(kn_strlist_t *l, const char *s, size_t n) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    char **v = realloc(l->v, cap * sizeof(*v));
    if (!v) return -1;
    l->v = v;
    l->cap = cap;
  }
  char *c = kn_strndup(s, n);
  if (!c) return -1;
  l->v[l->n++] = c;
  return 0;
}

size_t kn_strlist_count(const kn_strlist_t *l) { return l ? l->n : 0; }

const char *kn_strlist_get(const kn_strlist_t *l, size_t i) {
  return l && i < l->n ? l->v[i] : NULL;
}

void kn_strlist_destroy(kn_strlist_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  free(l);
}

/* ---- Stream summaries ---- */

const char *kn_stream_summary_name(const kn_stream_summary_t *s) {
  return s->name;
}
const char *kn_stream_summary_arn(const kn_stream_summary_t *s) {
  return s->arn;
}
const char *kn_stream_summary_status(const kn_stream_summary_t *s) {
  return s->status;
}
const char *kn_stream_summary_mode(const kn_stream_summary_t *s) {
  return s->mode;
}
int kn_stream_summary_open_shards(const kn_stream_summary_t *s) {
  return s->open_shards;
}
int kn_stream_summary_retention_hours(const kn_stream_summary_t *s) {
  return s->retention_hours;
}
int kn_stream_summary_consumers(const kn_stream_summary_t *s) {
  return s->consumers;
}
int kn_stream_summary_max_record_kib(const kn_stream_summary_t *s) {
  return s->max_record_kib;
}
const char *kn_stream_summary_distribution(const kn_stream_summary_t *s) {
  return s->distribution;
}

void kn_stream_summary_destroy(kn_stream_summary_t *s) {
  if (!s) return;
  free(s->name);
  free(s->arn);
  free(s->status);
  free(s->mode);
  free(s->distribution);
  free(s);
}

/* ---- Stream consumers ---- */

const char *kn_stream_consumer_name(const kn_stream_consumer_t *c) {
  return c->name;
}
const char *kn_stream_consumer_arn(const kn_stream_consumer_t *c) {
  return c->arn;
}
const char *kn_stream_consumer_status(const kn_stream_consumer_t *c) {
  return c->status;
}
int64_t kn_stream_consumer_created_ms(const kn_stream_consumer_t *c) {
  return c->created_ms;
}

void kn_stream_consumer_clear(kn_stream_consumer_t *c) {
  free(c->name);
  free(c->arn);
  free(c->status);
  free(c->stream_arn);
  memset(c, 0, sizeof(*c));
}

void kn_stream_consumer_destroy(kn_stream_consumer_t *c) {
  if (!c) return;
  kn_stream_consumer_clear(c);
  free(c);
}

kn_stream_consumer_list_t *kn_stream_consumer_list_new(void) {
  return calloc(1, sizeof(kn_stream_consumer_list_t));
}

int kn_stream_consumer_list_take(kn_stream_consumer_list_t *l,
                                 kn_stream_consumer_t *c) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 8;
    kn_stream_consumer_t *v = realloc(l->v, cap * sizeof(*v));
    if (!v) return -1;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = *c;
  memset(c, 0, sizeof(*c));
  return 0;
}

size_t kn_stream_consumer_list_count(const kn_stream_consumer_list_t *l) {
  return l ? l->n : 0;
}

const kn_stream_consumer_t *kn_stream_consumer_list_get(
    const kn_stream_consumer_list_t *l, size_t i) {
  return l && i < l->n ? &l->v[i] : NULL;
}

void kn_stream_consumer_list_destroy(kn_stream_consumer_list_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) kn_stream_consumer_clear(&l->v[i]);
  free(l->v);
  free(l);
}

/* ---- PutRecords results ---- */

size_t kn_put_results_count(const kn_put_results_t *r) { return r ? r->n : 0; }
size_t kn_put_results_failed(const kn_put_results_t *r) {
  return r ? r->failed : 0;
}

const char *kn_put_results_shard_id(const kn_put_results_t *r, size_t i) {
  return r && i < r->n ? r->v[i].shard_id : NULL;
}
const char *kn_put_results_sequence_number(const kn_put_results_t *r,
                                           size_t i) {
  return r && i < r->n ? r->v[i].seq : NULL;
}
const char *kn_put_results_error_code(const kn_put_results_t *r, size_t i) {
  return r && i < r->n ? r->v[i].error_code : NULL;
}
const char *kn_put_results_error_message(const kn_put_results_t *r, size_t i) {
  return r && i < r->n ? r->v[i].error_message : NULL;
}

void kn_put_results_destroy(kn_put_results_t *r) {
  if (!r) return;
  free(r->v);
  free(r->body);
  free(r);
}
