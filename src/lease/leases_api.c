/* kn_leases_list(): a read-only snapshot of a lease table. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "kn/client.h"
#include "kn/leases.h"
#include "lease/store.h"
#include "lease/store_int.h"

struct kn_lease_list_s {
  kn_lease_t *v;
  size_t n;
  kn_members_t members;
};

static int by_key(const void *a, const void *b) {
  return strcmp(((const kn_lease_t *)a)->key, ((const kn_lease_t *)b)->key);
}

kn_error_t *kn_leases_list(const kn_conf_t *conf, const char *store,
                           kn_lease_list_t **out) {
  *out = NULL;
  if (!store || !*store || strcmp(store, "none") == 0)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "a lease store is needed (sqlite:PATH or "
                        "dynamodb:TABLE)");
  struct stat st;
  if (strncmp(store, "sqlite:", 7) == 0 && stat(store + 7, &st) != 0)
    return kn_error_new(KN_ERR_RESOURCE_NOT_FOUND, "no lease table at %s",
                        store + 7);
  kn_client_t *client = NULL;
  if (strncmp(store, "dynamodb:", 9) == 0) {
    char errstr[512];
    client = kn_client_new(conf, errstr, sizeof(errstr));
    if (!client) return kn_error_new(KN_ERR__CONF, "%s", errstr);
  }
  kn_error_t *err = NULL;
  /* A SQLite file is opened for reading: nothing is written to it. */
  kn_lease_store_t *ls = strncmp(store, "sqlite:", 7) == 0
                             ? kn_lease_store_sqlite_open_ro(
                                   store + 7, KN_LEASE_SQLITE_BUSY_MS, &err)
                             : kn_lease_store_open(store, client, &err);
  kn_lease_list_t *l = NULL;
  if (ls) {
    l = calloc(1, sizeof(*l));
    if (!l)
      err = kn_error_new(KN_ERR__NOMEM, "out of memory");
    else
      err = ls->ops->list(ls, &l->v, &l->n);
    /* The membership, where there is one: a read, never a heartbeat. */
    if (!err && ls->ops->members) {
      err = ls->ops->members(ls, &l->members);
      if (err && kn_error_code(err) == KN_ERR__UNSUPPORTED) {
        kn_error_destroy(err);
        err = NULL;
      }
      if (!err) kn_members_one_each(&l->members);
    }
  }
  kn_lease_store_destroy(ls);
  kn_client_destroy(client);
  if (err) {
    kn_lease_list_destroy(l);
    return err;
  }
  if (l->n) qsort(l->v, l->n, sizeof(*l->v), by_key);
  *out = l;
  return NULL;
}

size_t kn_lease_list_count(const kn_lease_list_t *l) { return l ? l->n : 0; }
const char *kn_lease_list_shard(const kn_lease_list_t *l, size_t i) {
  return l->v[i].key;
}
const char *kn_lease_list_owner(const kn_lease_list_t *l, size_t i) {
  return l->v[i].owner;
}
int64_t kn_lease_list_counter(const kn_lease_list_t *l, size_t i) {
  return l->v[i].counter;
}
const char *kn_lease_list_checkpoint(const kn_lease_list_t *l, size_t i) {
  return l->v[i].checkpoint;
}
int64_t kn_lease_list_checkpoint_subseq(const kn_lease_list_t *l, size_t i) {
  return l->v[i].checkpoint_subseq;
}
const char *kn_lease_list_pending(const kn_lease_list_t *l, size_t i) {
  return l->v[i].pending;
}
int64_t kn_lease_list_owner_switches(const kn_lease_list_t *l, size_t i) {
  return l->v[i].owner_switches;
}
size_t kn_lease_list_parent_count(const kn_lease_list_t *l, size_t i) {
  return l->v[i].n_parents;
}
const char *kn_lease_list_parent(const kn_lease_list_t *l, size_t i, size_t k) {
  return k < l->v[i].n_parents ? l->v[i].parents[k] : NULL;
}

size_t kn_lease_list_member_count(const kn_lease_list_t *l) {
  return l ? l->members.n : 0;
}
const char *kn_lease_list_member_worker(const kn_lease_list_t *l, size_t i) {
  return l->members.v[i].worker;
}
int64_t kn_lease_list_member_leases(const kn_lease_list_t *l, size_t i) {
  return l->members.v[i].leases;
}
int64_t kn_lease_list_member_beat(const kn_lease_list_t *l, size_t i) {
  return l->members.v[i].beat;
}
int64_t kn_lease_list_epoch(const kn_lease_list_t *l) {
  return l ? l->members.epoch : 0;
}

void kn_lease_list_destroy(kn_lease_list_t *l) {
  if (!l) return;
  kn_lease_array_free(l->v, l->n);
  kn_members_clear(&l->members);
  free(l);
}
