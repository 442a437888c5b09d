/* lease_tool: drives a lease store from the integration tests.
 *
 *   lease_tool [options] conformance SPEC
 *   lease_tool [options] racer SPEC KEY OWNER
 *       prints "ready", then per stdin line "COUNTER OLD_OWNER|-" tries a
 *       take and prints "won N", "lost" or "error NAME RETRIABLE MESSAGE"
 *   lease_tool [options] ensure SPEC
 *   lease_tool [options] get SPEC KEY          (one JSON object)
 *   lease_tool [options] list SPEC             (a JSON array)
 *   lease_tool [options] create SPEC JSON      (a lease as get prints it)
 *   lease_tool [options] take SPEC KEY COUNTER OLD_OWNER|- OWNER
 *   lease_tool [options] renew|release SPEC KEY COUNTER OWNER
 *   lease_tool [options] checkpoint SPEC KEY COUNTER OWNER CKPT|- SUBSEQ
 *                        [PENDING|- PENDING_SUBSEQ [STATE_HEX|-]]
 *   lease_tool [options] children SPEC KEY [CHILD...]
 *   lease_tool [options] remove SPEC KEY COUNTER
 *   lease_tool [options] heartbeat SPEC WORKER BEAT LEASES BUMP [FORGET...]
 *       prints {"epoch": N, "members": [{"worker", "beat", "leases"}...]}
 *
 * Options: --busy-ms N (SQLite), --scan-limit N (DynamoDB Scan pages),
 * --threads N --rounds N --many N --prefix P (conformance),
 * -X prop=value (client properties for DynamoDB), --via client|own
 * (DynamoDB through a kn_client_t, the default, or a service handle of the
 * store's own).
 *
 * Changes print "ok N" (the new counter) or "ok"; renew and checkpoint
 * then print "handoff to WORKER" when WORKER has asked for the lease.
 * Failures print "error NAME RETRIABLE MESSAGE" on stdout and exit 1;
 * usage errors exit 2. */
#include "util/json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "kn/client.h"
#include "kn/conf.h"
#include "lease/store.h"
#include "lease/store_dynamodb.h"
#include "lease/store_int.h"
#include "lease_conformance.h"
#include "util/hex.h"

static long busy_ms = KN_LEASE_SQLITE_BUSY_MS;
static int scan_limit;
static int threads = 4, rounds = 20, many = 50;
static const char *prefix;
static kn_conf_t *conf;
static kn_client_t *client; /* NULL: --via own */

static kn_lease_store_t *open_store(void *opaque, kn_error_t **errp) {
  const char *spec = opaque;
  kn_lease_store_t *ls;
  if (strncmp(spec, "sqlite:", 7) == 0) {
    ls = kn_lease_store_sqlite_open(spec + 7, busy_ms, errp);
  } else if (strncmp(spec, "dynamodb:", 9) == 0) {
    ls = client ? kn_lease_store_open(spec, client, errp)
                : kn_lease_store_dynamodb_open_conf(spec + 9, conf, errp);
    if (ls && scan_limit)
      kn_lease_store_dynamodb_set_scan_limit(ls, scan_limit);
  } else {
    ls = kn_lease_store_open(spec, NULL, errp);
  }
  return ls;
}

static int report(kn_error_t *e) {
  if (!e) return 0;
  printf("error %s %d %s\n", kn_err2name(kn_error_code(e)),
         kn_error_is_retriable(e) ? 1 : 0, kn_error_string(e));
  fflush(stdout);
  kn_error_destroy(e);
  return 1;
}

/* counter (may be NULL) is read only after the call has run. */
static int done(kn_error_t *e, const int64_t *counter) {
  if (e) return report(e);
  if (counter)
    printf("ok %lld\n", (long long)*counter);
  else
    printf("ok\n");
  return 0;
}

/* ---- leases as JSON ---- */

static json_t *str_or_null(const char *s) {
  return s ? json_string(s) : json_null();
}

static json_t *strv(char **v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(a, json_string(v[i]));
  return a;
}

static json_t *lease_json(const kn_lease_t *l) {
  json_t *o = json_object();
  json_object_set_new(o, "key", json_string(l->key));
  json_object_set_new(o, "owner", str_or_null(l->owner));
  json_object_set_new(o, "counter", json_integer(l->counter));
  json_object_set_new(o, "owner_switches", json_integer(l->owner_switches));
  json_object_set_new(o, "checkpoint", str_or_null(l->checkpoint));
  json_object_set_new(o, "checkpoint_subseq",
                      json_integer(l->checkpoint_subseq));
  json_object_set_new(o, "pending", str_or_null(l->pending));
  json_object_set_new(o, "pending_subseq", json_integer(l->pending_subseq));
  if (l->pending_state) {
    char *hex = malloc(l->pending_state_len * 2 + 1);
    kn_hex_encode(hex, l->pending_state, l->pending_state_len);
    json_object_set_new(o, "pending_state", json_string(hex));
    free(hex);
  } else {
    json_object_set_new(o, "pending_state", json_null());
  }
  json_object_set_new(o, "parents", strv(l->parents, l->n_parents));
  json_object_set_new(o, "children", strv(l->children, l->n_children));
  json_object_set_new(o, "hash_start", str_or_null(l->hash_start));
  json_object_set_new(o, "hash_end", str_or_null(l->hash_end));
  json_object_set_new(o, "checkpoint_owner", str_or_null(l->checkpoint_owner));
  json_t *extra = l->extra ? json_loads(l->extra, 0, NULL) : NULL;
  json_object_set_new(o, "extra", extra ? extra : json_null());
  return o;
}

static char *opt_str(json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? strdup(s) : NULL;
}

static char **opt_strv(json_t *o, const char *k, size_t *n) {
  json_t *a = json_object_get(o, k);
  *n = json_array_size(a);
  if (!*n) return NULL;
  char **v = calloc(*n, sizeof(*v));
  for (size_t i = 0; i < *n; i++)
    v[i] = strdup(json_string_value(json_array_get(a, i)));
  return v;
}

static int lease_from_json(const char *text, kn_lease_t *l) {
  json_t *o = json_loads(text, 0, NULL);
  memset(l, 0, sizeof(*l));
  if (!json_is_object(o)) return -1;
  l->key = opt_str(o, "key");
  l->owner = opt_str(o, "owner");
  l->counter = json_integer_value(json_object_get(o, "counter"));
  l->owner_switches = json_integer_value(json_object_get(o, "owner_switches"));
  l->checkpoint = opt_str(o, "checkpoint");
  l->checkpoint_subseq =
      json_integer_value(json_object_get(o, "checkpoint_subseq"));
  l->pending = opt_str(o, "pending");
  l->pending_subseq = json_integer_value(json_object_get(o, "pending_subseq"));
  const char *hex = json_string_value(json_object_get(o, "pending_state"));
  if (hex) {
    size_t n = strlen(hex) / 2;
    l->pending_state = malloc(n + 1);
    l->pending_state_len = n;
    if (kn_hex_decode(l->pending_state, hex, n) < 0) {
      json_decref(o);
      return -1;
    }
  }
  l->parents = opt_strv(o, "parents", &l->n_parents);
  l->children = opt_strv(o, "children", &l->n_children);
  l->hash_start = opt_str(o, "hash_start");
  l->hash_end = opt_str(o, "hash_end");
  l->checkpoint_owner = opt_str(o, "checkpoint_owner");
  json_t *extra = json_object_get(o, "extra");
  if (json_is_object(extra))
    l->extra = json_dumps(extra, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  return l->key ? 0 : -1;
}

static void print_json(json_t *j) {
  char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
  puts(s);
  free(s);
  json_decref(j);
}

/* ---- commands ---- */

static int64_t num(const char *s) { return strtoll(s, NULL, 10); }

static const char *dash(const char *s) {
  return strcmp(s, "-") == 0 ? NULL : s;
}

static int racer(kn_lease_store_t *ls, const char *key, const char *owner) {
  char line[512];
  printf("ready\n");
  fflush(stdout);
  while (fgets(line, sizeof(line), stdin)) {
    char old[256];
    long long counter;
    if (sscanf(line, "%lld %255s", &counter, old) != 2) break;
    int64_t c = -1;
    kn_error_t *e = ls->ops->take(ls, key, counter, dash(old), owner, &c);
    if (!e) {
      printf("won %lld\n", (long long)c);
    } else if (kn_error_code(e) == KN_ERR_CONDITIONAL_CHECK_FAILED) {
      printf("lost\n");
      kn_error_destroy(e);
    } else {
      report(e);
      continue;
    }
    fflush(stdout);
  }
  return 0;
}

static int usage(void) {
  fprintf(stderr,
          "usage: lease_tool [options] COMMAND SPEC ... (see the "
          "source)\n");
  return 2;
}

static int run(int argc, char **argv) {
  const char *cmd = argv[0], *spec = argv[1];
  int64_t c = -1;
  if (strcmp(cmd, "conformance") == 0 || strcmp(cmd, "race") == 0) {
    char pfx[64];
    if (!prefix) {
      snprintf(pfx, sizeof(pfx), "shardId-%ld", (long)getpid());
      prefix = pfx;
    }
    kn_lc_target_t t = {spec, open_store, (void *)spec, threads, rounds, many};
    int checks = 0;
    int failures = strcmp(cmd, "race") == 0
                       ? kn_lc_run_race(&t, prefix, &checks)
                       : kn_lc_run(&t, prefix, &checks);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
  }
  kn_error_t *e = NULL;
  kn_lease_store_t *ls = open_store((void *)spec, &e);
  if (!ls) return report(e);
  int rc = 0;
  if (strcmp(cmd, "racer") == 0 && argc == 4) {
    rc = racer(ls, argv[2], argv[3]);
  } else if (strcmp(cmd, "ensure") == 0 && argc == 2) {
    rc = done(ls->ops->ensure_table(ls), NULL);
  } else if (strcmp(cmd, "get") == 0 && argc == 3) {
    kn_lease_t l;
    e = ls->ops->get(ls, argv[2], &l);
    if (!e) {
      print_json(lease_json(&l));
      kn_lease_clear(&l);
    }
    rc = report(e);
  } else if (strcmp(cmd, "list") == 0 && argc == 2) {
    kn_lease_t *v = NULL;
    size_t n = 0;
    e = ls->ops->list(ls, &v, &n);
    if (!e) {
      json_t *a = json_array();
      for (size_t i = 0; i < n; i++)
        json_array_append_new(a, lease_json(&v[i]));
      print_json(a);
      kn_lease_array_free(v, n);
    }
    rc = report(e);
  } else if (strcmp(cmd, "create") == 0 && argc == 3) {
    kn_lease_t l;
    if (lease_from_json(argv[2], &l)) {
      kn_lease_clear(&l);
      rc = usage();
    } else {
      rc = done(ls->ops->create(ls, &l), NULL);
      kn_lease_clear(&l);
    }
  } else if (strcmp(cmd, "take") == 0 && argc == 6) {
    rc = done(
        ls->ops->take(ls, argv[2], num(argv[3]), dash(argv[4]), argv[5], &c),
        &c);
  } else if (strcmp(cmd, "renew") == 0 && argc == 5) {
    char *to = NULL;
    rc = done(ls->ops->renew(ls, argv[2], num(argv[3]), argv[4], &c, &to), &c);
    if (to) printf("handoff to %s\n", to);
    free(to);
  } else if (strcmp(cmd, "release") == 0 && argc == 5) {
    rc = done(ls->ops->release(ls, argv[2], num(argv[3]), argv[4], &c), &c);
  } else if (strcmp(cmd, "checkpoint") == 0 &&
             (argc == 7 || argc == 9 || argc == 10)) {
    const char *pending = argc >= 9 ? dash(argv[7]) : NULL;
    int64_t psub = argc >= 9 ? num(argv[8]) : 0;
    const char *hex = argc == 10 ? dash(argv[9]) : NULL;
    unsigned char *state = NULL;
    size_t state_len = 0;
    if (hex) {
      state_len = strlen(hex) / 2;
      state = malloc(state_len + 1);
      if (kn_hex_decode(state, hex, state_len) < 0) {
        free(state);
        kn_lease_store_destroy(ls);
        return usage();
      }
    }
    char *to = NULL;
    rc = done(ls->ops->checkpoint(ls, argv[2], num(argv[3]), argv[4],
                                  dash(argv[5]), num(argv[6]), pending, psub,
                                  state, state_len, &c, &to),
              &c);
    if (to) printf("handoff to %s\n", to);
    free(to);
    free(state);
  } else if (strcmp(cmd, "children") == 0 && argc >= 3) {
    rc = done(ls->ops->set_children(ls, argv[2], argv + 3, (size_t)argc - 3),
              NULL);
  } else if (strcmp(cmd, "heartbeat") == 0 && argc >= 6) {
    kn_members_t m;
    e = ls->ops->heartbeat
            ? ls->ops->heartbeat(ls, argv[2], 0, num(argv[3]), num(argv[4]),
                                 num(argv[5]), argv + 6, (size_t)argc - 6, &m)
            : kn_error_new(KN_ERR__UNSUPPORTED, "no membership");
    if (!e) {
      json_t *o = json_object(), *a = json_array();
      for (size_t i = 0; i < m.n; i++)
        json_array_append_new(
            a, json_pack("{s:s, s:I, s:I}", "worker", m.v[i].worker, "beat",
                         (json_int_t)m.v[i].beat, "leases",
                         (json_int_t)m.v[i].leases));
      json_object_set_new(o, "epoch", json_integer(m.epoch));
      json_object_set_new(o, "members", a);
      print_json(o);
      kn_members_clear(&m);
    }
    rc = report(e);
  } else if (strcmp(cmd, "remove") == 0 && argc == 4) {
    rc = done(ls->ops->remove(ls, argv[2], num(argv[3])), NULL);
  } else {
    rc = usage();
  }
  kn_lease_store_destroy(ls);
  return rc;
}

int main(int argc, char **argv) {
  int i = 1, via_own = 0;
  conf = kn_conf_new();
  for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
    const char *o = argv[i], *v = argv[i + 1];
    if (strcmp(o, "--busy-ms") == 0) {
      busy_ms = atol(v);
    } else if (strcmp(o, "--scan-limit") == 0) {
      scan_limit = atoi(v);
    } else if (strcmp(o, "--threads") == 0) {
      threads = atoi(v);
    } else if (strcmp(o, "--rounds") == 0) {
      rounds = atoi(v);
    } else if (strcmp(o, "--many") == 0) {
      many = atoi(v);
    } else if (strcmp(o, "--via") == 0) {
      via_own = strcmp(v, "own") == 0;
    } else if (strcmp(o, "--prefix") == 0) {
      prefix = v;
    } else if (strcmp(o, "-X") == 0) {
      char name[128], errstr[256];
      const char *eq = strchr(v, '=');
      if (!eq || (size_t)(eq - v) >= sizeof(name)) return usage();
      memcpy(name, v, (size_t)(eq - v));
      name[eq - v] = '\0';
      if (kn_conf_set(conf, name, eq + 1, errstr, sizeof(errstr)) !=
          KN_CONF_OK) {
        fprintf(stderr, "lease_tool: %s\n", errstr);
        return 2;
      }
    } else {
      return usage();
    }
  }
  if (argc - i < 2) return usage();
  if (!via_own && strncmp(argv[i + 1], "dynamodb:", 9) == 0) {
    char errstr[512];
    client = kn_client_new(conf, errstr, sizeof(errstr));
    if (!client) {
      printf("error _CONF 0 %s\n", errstr);
      kn_conf_destroy(conf);
      return 1;
    }
  }
  int rc = run(argc - i, argv + i);
  kn_client_destroy(client);
  kn_conf_destroy(conf);
  return rc;
}
