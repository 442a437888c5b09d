/* The DynamoDB lease store without a server: items as the KCL writes them,
 * and the exact requests the store sends (through a scripted transport). */
#include "util/json.h"
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kt.h"
#include "lease/ddb_item.h"
#include "lease/store_dynamodb.h"

/* ---- items ---- */

/* A lease as KCL 2.x/3.x stores it (numbers as strings, B as base64). */
static const char kcl_item[] =
    "{\"leaseKey\":{\"S\":\"shardId-000000000004\"},"
    "\"leaseOwner\":{\"S\":\"kcl-worker-1\"},"
    "\"leaseCounter\":{\"N\":\"42\"},"
    "\"ownerSwitchesSinceCheckpoint\":{\"N\":\"3\"},"
    "\"checkpoint\":{\"S\":"
    "\"49590338271490256608559692538361571095921575989136588898\"},"
    "\"checkpointSubSequenceNumber\":{\"N\":\"5\"},"
    "\"pendingCheckpoint\":{\"S\":"
    "\"49590338271490256608559692538361571095921575989136589000\"},"
    "\"pendingCheckpointSubSequenceNumber\":{\"N\":\"2\"},"
    "\"pendingCheckpointState\":{\"B\":\"AAFzdGF0Zf8=\"},"
    "\"parentShardId\":{\"SS\":[\"shardId-000000000001\",\"shardId-"
    "000000000002\"]},"
    "\"childShardIds\":{\"SS\":[\"shardId-000000000007\"]},"
    "\"startingHashKey\":{\"S\":\"0\"},"
    "\"endingHashKey\":{\"S\":\"170141183460469231731687303715884105727\"},"
    "\"throughputKBps\":{\"N\":\"12.5\"},"
    "\"checkpointOwner\":{\"S\":\"kcl-worker-2\"},"
    "\"entityType\":{\"S\":\"LEASE\"}}";

static void test_item_to_lease(void) {
  json_t *item = json_loads(kcl_item, 0, NULL);
  kn_lease_t l;
  kn_error_t *e = NULL;
  KT_REQUIRE(kn_ddb_item_to_lease(item, &l, &e) == 0, kn_error_destroy(e),
             json_decref(item));
  KT_CHECK(e == NULL);
  KT_CHECK_STR(l.key, "shardId-000000000004");
  KT_CHECK_STR(l.owner, "kcl-worker-1");
  KT_CHECK_INT(l.counter, 42);
  KT_CHECK_INT(l.owner_switches, 3);
  KT_CHECK_STR(l.checkpoint,
               "49590338271490256608559692538361571095921575989136588898");
  KT_CHECK_INT(l.checkpoint_subseq, 5);
  KT_CHECK_STR(l.pending,
               "49590338271490256608559692538361571095921575989136589000");
  KT_CHECK_INT(l.pending_subseq, 2);
  KT_CHECK_INT(l.pending_state_len, 8);
  KT_CHECK(l.pending_state && memcmp(l.pending_state, "\0\1state\xff", 8) == 0);
  KT_CHECK_INT(l.n_parents, 2);
  KT_CHECK_STR(l.parents[1], "shardId-000000000002");
  KT_CHECK_INT(l.n_children, 1);
  KT_CHECK_STR(l.children[0], "shardId-000000000007");
  KT_CHECK_STR(l.hash_start, "0");
  KT_CHECK_STR(l.hash_end, "170141183460469231731687303715884105727");
  KT_CHECK_STR(l.checkpoint_owner, "kcl-worker-2");
  KT_CHECK_STR(l.extra,
               "{\"entityType\":{\"S\":\"LEASE\"},"
               "\"throughputKBps\":{\"N\":\"12.5\"}}");

  /* And back: the same item, attribute for attribute. */
  json_t *again = kn_ddb_item_from_lease(&l, &e);
  KT_CHECK(again && json_equal(again, item));
  json_decref(again);
  kn_error_destroy(e);
  kn_lease_clear(&l);
  json_decref(item);
}

static void test_item_edge_cases(void) {
  kn_lease_t l;
  kn_error_t *e = NULL;
  /* KCL 3.x coordinator state lives in the same table: not a lease. */
  json_t *item = json_loads(
      "{\"leaseKey\":{\"S\":\"Leader\"},"
      "\"entityType\":{\"S\":\"LEADER\"}}",
      0, NULL);
  KT_CHECK_INT(kn_ddb_item_to_lease(item, &l, &e), 1);
  json_decref(item);
  /* A minimal KCL 1.x/2.x lease: free, no entityType. */
  item = json_loads(
      "{\"leaseKey\":{\"S\":\"s\"},\"leaseCounter\":{\"N\":\"0\"},"
      "\"checkpoint\":{\"S\":\"TRIM_HORIZON\"},"
      "\"pendingCheckpoint\":{\"S\":\"\"},"
      "\"pendingCheckpointState\":{\"N\":\"0\"}}",
      0, NULL);
  KT_CHECK_INT(kn_ddb_item_to_lease(item, &l, &e), 0);
  KT_CHECK(l.owner == NULL && l.extra == NULL && l.pending == NULL);
  KT_CHECK(l.pending_state == NULL); /* wrong type: ignored, as the KCL does */
  KT_CHECK_STR(l.checkpoint, KN_CKPT_TRIM_HORIZON);
  kn_lease_clear(&l);
  json_decref(item);
  /* No key, a bad number, bad base64: errors, nothing half-filled. */
  item = json_loads("{\"leaseCounter\":{\"N\":\"1\"}}", 0, NULL);
  KT_CHECK_INT(kn_ddb_item_to_lease(item, &l, &e), -1);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__BAD_MSG);
  kn_error_destroy(e);
  json_decref(item);
  item = json_loads(
      "{\"leaseKey\":{\"S\":\"s\"},\"leaseCounter\":{\"N\":\"1.5\"}}", 0, NULL);
  KT_CHECK_INT(kn_ddb_item_to_lease(item, &l, &e), -1);
  KT_CHECK(e && strstr(kn_error_string(e), "leaseCounter"));
  kn_error_destroy(e);
  KT_CHECK(l.key == NULL);
  json_decref(item);
  item = json_loads(
      "{\"leaseKey\":{\"S\":\"s\"},"
      "\"pendingCheckpointState\":{\"B\":\"@@@\"}}",
      0, NULL);
  KT_CHECK_INT(kn_ddb_item_to_lease(item, &l, &e), -1);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__BAD_MSG);
  kn_error_destroy(e);
  json_decref(item);

  /* A free lease has no leaseOwner; extra cannot override KCL fields. */
  kn_lease_t free_lease = {
      .key = "k",
      .counter = 1,
      .checkpoint = "LATEST",
      .extra =
          "{\"leaseOwner\":{\"S\":\"x\"},\"leaseCounter\":{\"N\":\"9\"},"
          "\"x\":{\"BOOL\":true}}"};
  item = kn_ddb_item_from_lease(&free_lease, &e);
  json_t *want = json_loads(
      "{\"leaseKey\":{\"S\":\"k\"},\"leaseCounter\":{\"N\":\"1\"},"
      "\"ownerSwitchesSinceCheckpoint\":{\"N\":\"0\"},"
      "\"checkpoint\":{\"S\":\"LATEST\"},"
      "\"checkpointSubSequenceNumber\":{\"N\":\"0\"},\"x\":{\"BOOL\":true}}",
      0, NULL);
  KT_CHECK(item && json_equal(item, want));
  json_decref(item);
  json_decref(want);
  free_lease.extra = "[1]";
  KT_CHECK(kn_ddb_item_from_lease(&free_lease, &e) == NULL);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__INVALID_ARG);
  kn_error_destroy(e);
}

/* ---- a scripted transport ---- */

typedef struct step {
  const char *action;   /* expected action */
  const char *response; /* body on success */
  const char *error;    /* or an error type (namespaced, as DynamoDB) */
} step_t;

typedef struct script {
  const step_t *steps;
  int n, next;
  json_t *sent[16]; /* request bodies, in order */
} script_t;

static script_t script;

static kn_error_t *fake_call(void *opaque, const char *action, const char *body,
                             size_t len, kn_buf_t *out) {
  script_t *s = opaque;
  if (s->next >= s->n) {
    KT_CHECK_MSG(0, "unexpected call %s", action);
    return kn_error_new(KN_ERR__FAIL, "unscripted");
  }
  const step_t *st = &s->steps[s->next];
  KT_CHECK_STR(action, st->action);
  if (s->next < 16) s->sent[s->next] = json_loadb(body, len, 0, NULL);
  s->next++;
  if (st->error) return kn_error_remote(400, st->error, "scripted", "req-1");
  kn_buf_append_str(out, st->response ? st->response : "{}");
  return NULL;
}

static kn_lease_store_t *store_with(const step_t *steps, int n) {
  for (int i = 0; i < 16; i++) {
    json_decref(script.sent[i]);
    script.sent[i] = NULL;
  }
  script.steps = steps;
  script.n = n;
  script.next = 0;
  kn_error_t *e = NULL;
  kn_lease_store_t *ls =
      kn_lease_store_dynamodb_new("leases_app", fake_call, &script, NULL, &e);
  KT_CHECK_MSG(ls != NULL, "%s", e ? kn_error_string(e) : "");
  if (!ls) {
    kn_error_destroy(e);
    return NULL;
  }
  kn_lease_store_dynamodb_set_table_wait(ls, 5000);
  return ls;
}

/* The request sent at step i equals the JSON text want. */
static void check_sent(int i, const char *want) {
  json_t *w = json_loads(want, 0, NULL);
  KT_CHECK_MSG(w != NULL, "bad expectation %s", want);
  int eq = w && script.sent[i] && json_equal(w, script.sent[i]);
  if (!eq) {
    char *got = script.sent[i]
                    ? json_dumps(script.sent[i], JSON_SORT_KEYS | JSON_COMPACT)
                    : NULL;
    KT_CHECK_MSG(eq, "request %d:\n  got  %s\n  want %s", i,
                 got ? got : "(none)", want);
    free(got);
  } else {
    KT_CHECK(eq);
  }
  json_decref(w);
}

#define CCF_TYPE \
  "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"
#define KEY "{\"leaseKey\":{\"S\":\"shard-1\"}}"

static void test_requests(void) {
  static const step_t steps[] = {
      {"UpdateItem", "{}", NULL}, {"UpdateItem", "{}", NULL},
      {"UpdateItem", "{}", NULL}, {"UpdateItem", "{}", NULL},
      {"UpdateItem", "{}", NULL}, {"UpdateItem", "{}", NULL},
      {"UpdateItem", "{}", NULL}, {"DeleteItem", "{}", NULL},
      {"GetItem", "{}", NULL},
  };
  kn_lease_store_t *ls = store_with(steps, 9);
  if (!ls) return;
  int64_t c = 0;
  KT_CHECK_OK(ls->ops->take(ls, "shard-1", 4, "w1", "w2", &c));
  KT_CHECK_INT(c, 5);
  check_sent(0,
             "{\"TableName\":\"leases_app\",\"Key\":" KEY
             ","
             "\"UpdateExpression\":\"SET #o = :o, #c = :n REMOVE #co, #bf "
             "ADD #sw :one\","
             "\"ConditionExpression\":\"#c = :c AND #o = :old\","
             "\"ExpressionAttributeNames\":{\"#c\":\"leaseCounter\","
             "\"#co\":\"checkpointOwner\",\"#bf\":\"ownerBeatFailing\","
             "\"#o\":\"leaseOwner\",\"#sw\":\"ownerSwitchesSinceCheckpoint\"},"
             "\"ExpressionAttributeValues\":{\":c\":{\"N\":\"4\"},"
             "\":old\":{\"S\":\"w1\"},\":o\":{\"S\":\"w2\"},"
             "\":n\":{\"N\":\"5\"},\":one\":{\"N\":\"1\"}}}");
  KT_CHECK_OK(ls->ops->take(ls, "shard-1", 0, NULL, "w2", &c));
  check_sent(1,
             "{\"TableName\":\"leases_app\",\"Key\":" KEY
             ","
             "\"UpdateExpression\":\"SET #o = :o, #c = :n REMOVE #co, #bf\","
             "\"ConditionExpression\":\"#c = :c AND attribute_not_exists(#o)\","
             "\"ExpressionAttributeNames\":{\"#c\":\"leaseCounter\","
             "\"#co\":\"checkpointOwner\",\"#o\":\"leaseOwner\","
             "\"#bf\":\"ownerBeatFailing\"},"
             "\"ExpressionAttributeValues\":{\":c\":{\"N\":\"0\"},"
             "\":o\":{\"S\":\"w2\"},\":n\":{\"N\":\"1\"}}}");
  char *to = NULL;
  KT_CHECK_OK(ls->ops->renew(ls, "shard-1", 7, "w2", &c, &to));
  KT_CHECK(to == NULL);
  KT_CHECK_INT(c, 8);
  check_sent(2, "{\"TableName\":\"leases_app\",\"Key\":" KEY
                ","
                "\"UpdateExpression\":\"SET #c = :n\","
                "\"ConditionExpression\":\"#c = :c AND ((#o = :o AND "
                "attribute_not_exists(#co)) OR #co = :o)\","
                "\"ExpressionAttributeNames\":{\"#c\":\"leaseCounter\","
                "\"#co\":\"checkpointOwner\",\"#o\":\"leaseOwner\"},"
                "\"ExpressionAttributeValues\":{\":c\":{\"N\":\"7\"},"
                "\":o\":{\"S\":\"w2\"},\":n\":{\"N\":\"8\"}},"
                "\"ReturnValues\":\"ALL_NEW\"}");
  KT_CHECK_OK(ls->ops->release(ls, "shard-1", 8, "w2", &c));
  check_sent(3, "{\"TableName\":\"leases_app\",\"Key\":" KEY
                ","
                "\"UpdateExpression\":\"SET #c = :n REMOVE #o, #co, #bf\","
                "\"ConditionExpression\":\"#c = :c AND ((#o = :o AND "
                "attribute_not_exists(#co)) OR #co = :o)\","
                "\"ExpressionAttributeNames\":{\"#c\":\"leaseCounter\","
                "\"#co\":\"checkpointOwner\",\"#o\":\"leaseOwner\","
                "\"#bf\":\"ownerBeatFailing\"},"
                "\"ExpressionAttributeValues\":{\":c\":{\"N\":\"8\"},"
                "\":o\":{\"S\":\"w2\"},\":n\":{\"N\":\"9\"}}}");
  to = NULL;
  KT_CHECK_OK(ls->ops->checkpoint(ls, "shard-1", 9, "w2", "123", 4, "456", 1,
                                  "\x01\x02", 2, &c, &to));
  KT_CHECK(to == NULL);
  check_sent(4,
             "{\"TableName\":\"leases_app\",\"Key\":" KEY
             ","
             "\"UpdateExpression\":\"SET #c = :n, #cp = :cp, #cs = :cs, "
             "#sw = :zero, #p = :p, #ps = :ps, #st = :st\","
             "\"ConditionExpression\":\"#c = :c AND ((#o = :o AND "
             "attribute_not_exists(#co)) OR #co = :o)\","
             "\"ExpressionAttributeNames\":{\"#c\":\"leaseCounter\","
             "\"#co\":\"checkpointOwner\","
             "\"#o\":\"leaseOwner\",\"#cp\":\"checkpoint\","
             "\"#cs\":\"checkpointSubSequenceNumber\","
             "\"#sw\":\"ownerSwitchesSinceCheckpoint\","
             "\"#st\":\"pendingCheckpointState\",\"#p\":\"pendingCheckpoint\","
             "\"#ps\":\"pendingCheckpointSubSequenceNumber\"},"
             "\"ExpressionAttributeValues\":{\":c\":{\"N\":\"9\"},"
             "\":o\":{\"S\":\"w2\"},\":n\":{\"N\":\"10\"},"
             "\":cp\":{\"S\":\"123\"},\":cs\":{\"N\":\"4\"},"
             "\":zero\":{\"N\":\"0\"},\":p\":{\"S\":\"456\"},"
             "\":ps\":{\"N\":\"1\"},\":st\":{\"B\":\"AQI=\"}},"
             "\"ReturnValues\":\"ALL_NEW\"}");
  KT_CHECK_OK(ls->ops->checkpoint(ls, "shard-1", 10, "w2", NULL, 0, NULL, 0,
                                  NULL, 0, &c, &to));
  KT_CHECK(to == NULL);
  check_sent(5, "{\"TableName\":\"leases_app\",\"Key\":" KEY
                ","
                "\"UpdateExpression\":\"SET #c = :n REMOVE #p, #ps, #st\","
                "\"ConditionExpression\":\"#c = :c AND ((#o = :o AND "
                "attribute_not_exists(#co)) OR #co = :o)\","
                "\"ExpressionAttributeNames\":{\"#c\":\"leaseCounter\","
                "\"#co\":\"checkpointOwner\","
                "\"#o\":\"leaseOwner\",\"#st\":\"pendingCheckpointState\","
                "\"#p\":\"pendingCheckpoint\","
                "\"#ps\":\"pendingCheckpointSubSequenceNumber\"},"
                "\"ExpressionAttributeValues\":{\":c\":{\"N\":\"10\"},"
                "\":o\":{\"S\":\"w2\"},\":n\":{\"N\":\"11\"}},"
                "\"ReturnValues\":\"ALL_NEW\"}");
  char *kids[] = {"shard-2", "shard-3"};
  KT_CHECK_OK(ls->ops->set_children(ls, "shard-1", kids, 2));
  check_sent(6, "{\"TableName\":\"leases_app\",\"Key\":" KEY
                ","
                "\"UpdateExpression\":\"SET #ch = :ch\","
                "\"ConditionExpression\":\"attribute_exists(#k)\","
                "\"ExpressionAttributeNames\":{\"#k\":\"leaseKey\","
                "\"#ch\":\"childShardIds\"},"
                "\"ExpressionAttributeValues\":{\":ch\":{\"SS\":[\"shard-2\","
                "\"shard-3\"]}}}");
  KT_CHECK_OK(ls->ops->remove(ls, "shard-1", 11));
  check_sent(7, "{\"TableName\":\"leases_app\",\"Key\":" KEY
                ","
                "\"ConditionExpression\":\"#c = :c\","
                "\"ExpressionAttributeNames\":{\"#c\":\"leaseCounter\"},"
                "\"ExpressionAttributeValues\":{\":c\":{\"N\":\"11\"}}}");
  kn_lease_t l;
  kn_error_t *e = ls->ops->get(ls, "shard-1", &l);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__NOT_FOUND);
  kn_error_destroy(e);
  check_sent(8, "{\"TableName\":\"leases_app\",\"Key\":" KEY
                ","
                "\"ConsistentRead\":true}");
  KT_CHECK_INT(script.next, 9);
  kn_lease_store_destroy(ls);
}

static void test_create(void) {
  static const step_t steps[] = {{"PutItem", "{}", NULL},
                                 {"PutItem", NULL, CCF_TYPE}};
  kn_lease_store_t *ls = store_with(steps, 2);
  if (!ls) return;
  kn_lease_t l = {.key = "shard-1", .checkpoint = "TRIM_HORIZON"};
  KT_CHECK_OK(ls->ops->create(ls, &l));
  check_sent(0,
             "{\"TableName\":\"leases_app\",\"Item\":{"
             "\"leaseKey\":{\"S\":\"shard-1\"},\"leaseCounter\":{\"N\":\"0\"},"
             "\"ownerSwitchesSinceCheckpoint\":{\"N\":\"0\"},"
             "\"checkpoint\":{\"S\":\"TRIM_HORIZON\"},"
             "\"checkpointSubSequenceNumber\":{\"N\":\"0\"}},"
             "\"ConditionExpression\":\"attribute_not_exists(#k)\","
             "\"ExpressionAttributeNames\":{\"#k\":\"leaseKey\"}}");
  kn_error_t *e = ls->ops->create(ls, &l);
  KT_CHECK_INT(kn_error_code(e), KN_ERR_CONDITIONAL_CHECK_FAILED);
  KT_CHECK(e && strstr(kn_error_string(e), "dynamodb:leases_app"));
  KT_CHECK_STR(kn_error_type(e), "ConditionalCheckFailedException");
  kn_error_destroy(e);
  kn_lease_store_destroy(ls);
}

/* A retried change that had succeeded: its condition fails, the item
 * shows the intended result, the call succeeds.  A real loss stays one. */
static void test_retried_success(void) {
  static const step_t steps[] = {
      {"UpdateItem", NULL, CCF_TYPE},
      {"GetItem",
       "{\"Item\":{\"leaseKey\":{\"S\":\"shard-1\"},"
       "\"leaseOwner\":{\"S\":\"w1\"},\"leaseCounter\":{\"N\":\"6\"}}}",
       NULL},
      {"UpdateItem", NULL, CCF_TYPE},
      {"GetItem",
       "{\"Item\":{\"leaseKey\":{\"S\":\"shard-1\"},"
       "\"leaseOwner\":{\"S\":\"w9\"},\"leaseCounter\":{\"N\":\"6\"}}}",
       NULL},
      {"UpdateItem", NULL, CCF_TYPE},
      {"GetItem",
       "{\"Item\":{\"leaseKey\":{\"S\":\"shard-1\"},"
       "\"leaseOwner\":{\"S\":\"w1\"},\"leaseCounter\":{\"N\":\"6\"},"
       "\"checkpoint\":{\"S\":\"100\"}}}",
       NULL},
  };
  kn_lease_store_t *ls = store_with(steps, 6);
  if (!ls) return;
  int64_t c = 0;
  KT_CHECK_OK(ls->ops->take(ls, "shard-1", 5, NULL, "w1", &c));
  KT_CHECK_INT(c, 6);
  kn_error_t *e = ls->ops->take(ls, "shard-1", 5, NULL, "w1", &c);
  KT_CHECK_INT(kn_error_code(e), KN_ERR_CONDITIONAL_CHECK_FAILED);
  kn_error_destroy(e);
  /* A checkpoint counts only if what it wrote is there. */
  char *to = "unset";
  e = ls->ops->checkpoint(ls, "shard-1", 5, "w1", "200", 0, NULL, 0, NULL, 0,
                          &c, &to);
  KT_CHECK_INT(kn_error_code(e), KN_ERR_CONDITIONAL_CHECK_FAILED);
  KT_CHECK(to == NULL);
  kn_error_destroy(e);
  KT_CHECK_INT(script.next, 6);
  kn_lease_store_destroy(ls);
}

/* A checkpoint answers as a renewal does: the item as written (ALL_NEW)
 * tells of a hand-off asked for, and so does the item read back after a
 * retried call whose first attempt had succeeded. */
static void test_checkpoint_handoff(void) {
  static const step_t steps[] = {
      {"UpdateItem",
       "{\"Attributes\":{\"leaseKey\":{\"S\":\"shard-1\"},"
       "\"leaseOwner\":{\"S\":\"w2\"},\"checkpointOwner\":{\"S\":\"w1\"},"
       "\"leaseCounter\":{\"N\":\"4\"}}}",
       NULL},
      {"UpdateItem",
       "{\"Attributes\":{\"leaseKey\":{\"S\":\"shard-1\"},"
       "\"leaseOwner\":{\"S\":\"w1\"},\"leaseCounter\":{\"N\":\"5\"}}}",
       NULL},
      {"UpdateItem", NULL, CCF_TYPE},
      {"GetItem",
       "{\"Item\":{\"leaseKey\":{\"S\":\"shard-1\"},"
       "\"leaseOwner\":{\"S\":\"w3\"},\"checkpointOwner\":{\"S\":\"w1\"},"
       "\"leaseCounter\":{\"N\":\"6\"},\"checkpoint\":{\"S\":\"300\"},"
       "\"checkpointSubSequenceNumber\":{\"N\":\"0\"}}}",
       NULL},
      {"UpdateItem", NULL, CCF_TYPE},
      {"GetItem",
       "{\"Item\":{\"leaseKey\":{\"S\":\"shard-1\"},"
       "\"leaseOwner\":{\"S\":\"w3\"},\"checkpointOwner\":{\"S\":\"w1\"},"
       "\"leaseCounter\":{\"N\":\"7\"}}}",
       NULL},
  };
  kn_lease_store_t *ls = store_with(steps, 6);
  if (!ls) return;
  int64_t c = 0;
  char *to = NULL;
  KT_CHECK_OK(ls->ops->checkpoint(ls, "shard-1", 3, "w1", "100", 0, NULL, 0,
                                  NULL, 0, &c, &to));
  KT_CHECK_INT(c, 4);
  KT_CHECK_STR(to, "w2");
  free(to);
  to = NULL;
  KT_CHECK_OK(ls->ops->checkpoint(ls, "shard-1", 4, "w1", "200", 0, NULL, 0,
                                  NULL, 0, &c, &to));
  KT_CHECK_INT(c, 5);
  KT_CHECK(to == NULL);
  free(to); /* an answer out of turn */
  to = NULL;
  /* Retried, found done: the hand-off comes from the item read back. */
  KT_CHECK_OK(ls->ops->checkpoint(ls, "shard-1", 5, "w1", "300", 0, NULL, 0,
                                  NULL, 0, &c, &to));
  KT_CHECK_INT(c, 6);
  KT_CHECK_STR(to, "w3");
  free(to);
  to = NULL;
  /* The same for a renewal. */
  KT_CHECK_OK(ls->ops->renew(ls, "shard-1", 6, "w1", &c, &to));
  KT_CHECK_INT(c, 7);
  KT_CHECK_STR(to, "w3");
  free(to);
  KT_CHECK_INT(script.next, 6);
  kn_lease_store_destroy(ls);
}

static void test_list_pages(void) {
  static const step_t steps[] = {
      {"Scan",
       "{\"Items\":[{\"leaseKey\":{\"S\":\"a\"},\"leaseCounter\":{\"N\":\"1\"}}"
       ","
       "{\"leaseKey\":{\"S\":\"Leader\"},\"entityType\":{\"S\":\"LEADER\"}}],"
       "\"LastEvaluatedKey\":{\"leaseKey\":{\"S\":\"Leader\"}}}",
       NULL},
      {"Scan",
       "{\"Items\":[{\"leaseKey\":{\"S\":\"b\"},\"leaseCounter\":{\"N\":\"2\"}}"
       "],"
       "\"Count\":1}",
       NULL},
  };
  kn_lease_store_t *ls = store_with(steps, 2);
  if (!ls) return;
  kn_lease_store_dynamodb_set_scan_limit(ls, 2);
  kn_lease_t *v = NULL;
  size_t n = 0;
  KT_CHECK_OK(ls->ops->list(ls, &v, &n));
  KT_CHECK_INT(n, 2);
  if (n == 2) {
    KT_CHECK_STR(v[0].key, "a");
    KT_CHECK_STR(v[1].key, "b");
    KT_CHECK_INT(v[1].counter, 2);
  }
  kn_lease_array_free(v, n);
  check_sent(0,
             "{\"TableName\":\"leases_app\",\"ConsistentRead\":true,"
             "\"Limit\":2}");
  check_sent(1,
             "{\"TableName\":\"leases_app\",\"ConsistentRead\":true,"
             "\"Limit\":2,\"ExclusiveStartKey\":{\"leaseKey\":{\"S\":"
             "\"Leader\"}}}");
  kn_lease_store_destroy(ls);
}

/* The KCL 3.x's worker-metrics items are no leases, but tell which owners
 * answer a hand-off: their leases are listed owner_hands_over, whichever
 * page the item came on. */
static void test_list_kcl3_workers(void) {
  static const step_t steps[] = {
      {"Scan",
       "{\"Items\":[{\"leaseKey\":{\"S\":\"a\"},\"leaseCounter\":{\"N\":\"1\"},"
       "\"leaseOwner\":{\"S\":\"kcl3-1\"}},"
       "{\"leaseKey\":{\"S\":\"b\"},\"leaseCounter\":{\"N\":\"1\"},"
       "\"leaseOwner\":{\"S\":\"kcl2-1\"}}],"
       "\"LastEvaluatedKey\":{\"leaseKey\":{\"S\":\"b\"}}}",
       NULL},
      {"Scan",
       "{\"Items\":[{\"leaseKey\":{\"S\":\"c\"},\"leaseCounter\":{\"N\":\"1\"}}"
       ","
       "{\"leaseKey\":{\"S\":\"kcl3-1\"},"
       "\"entityType\":{\"S\":\"WORKER_METRIC_STATS\"},"
       "\"lastUpdateTime\":{\"N\":\"1764690000\"}},"
       "{\"leaseKey\":{\"S\":\"Migration3.0\"},"
       "\"entityType\":{\"S\":\"CLIENT_VERSION_MIGRATION\"}}]}",
       NULL},
  };
  kn_lease_store_t *ls = store_with(steps, 2);
  if (!ls) return;
  kn_lease_t *v = NULL;
  size_t n = 0;
  KT_CHECK_OK(ls->ops->list(ls, &v, &n));
  KT_CHECK_INT(n, 3);
  for (size_t i = 0; i < n; i++)
    KT_CHECK_INT(v[i].owner_hands_over, strcmp(v[i].key, "a") == 0);
  kn_lease_array_free(v, n);
  kn_lease_store_destroy(ls);
}

/* A LastEvaluatedKey seen before (even with pages between) ends a scan. */
static void test_list_cycle(void) {
  static const step_t steps[] = {
      {"Scan",
       "{\"Items\":[{\"leaseKey\":{\"S\":\"a\"},\"leaseCounter\":{\"N\":\"1\"}}"
       "],"
       "\"LastEvaluatedKey\":{\"leaseKey\":{\"S\":\"a\"}}}",
       NULL},
      {"Scan",
       "{\"Items\":[{\"leaseKey\":{\"S\":\"b\"},\"leaseCounter\":{\"N\":\"1\"}}"
       "],"
       "\"LastEvaluatedKey\":{\"leaseKey\":{\"S\":\"b\"}}}",
       NULL},
      {"Scan",
       "{\"Items\":[{\"leaseKey\":{\"S\":\"c\"},\"leaseCounter\":{\"N\":\"1\"}}"
       "],"
       "\"LastEvaluatedKey\":{\"leaseKey\":{\"S\":\"a\"}}}",
       NULL},
  };
  kn_lease_store_t *ls = store_with(steps, 3);
  if (!ls) return;
  kn_lease_t *v = NULL;
  size_t n = 0;
  KT_CHECK_OK(ls->ops->list(ls, &v, &n));
  KT_CHECK_INT(n, 3);
  KT_CHECK_INT(script.next, 3);
  kn_lease_array_free(v, n);
  kn_lease_store_destroy(ls);
}

#define NS "com.amazonaws.dynamodb.v20120810#"
#define DESC(status)                                                   \
  "{\"Table\":{\"TableName\":\"leases_app\",\"TableStatus\":\"" status \
  "\",\"KeySchema\":[{\"AttributeName\":\"leaseKey\",\"KeyType\":\"HASH\"}]}}"
#define DESC_M(status)                                                         \
  "{\"Table\":{\"TableName\":\"leases_app-members\",\"TableStatus\":\"" status \
  "\",\"KeySchema\":[{\"AttributeName\":\"key\",\"KeyType\":\"HASH\"}]}}"

static void test_ensure_table(void) {
  /* Missing; another worker creates it at the same moment; it becomes
   * ACTIVE. */
  static const step_t steps[] = {
      {"DescribeTable", NULL, NS "ResourceNotFoundException"},
      {"CreateTable", NULL, NS "ResourceInUseException"},
      {"DescribeTable", DESC("CREATING"), NULL},
      {"DescribeTable", DESC("ACTIVE"), NULL},
      /* Then the membership table, the same way. */
      {"DescribeTable", NULL, NS "ResourceNotFoundException"},
      {"CreateTable", "{}", NULL},
      {"DescribeTable", DESC_M("CREATING"), NULL},
      {"DescribeTable", DESC_M("ACTIVE"), NULL},
  };
  kn_lease_store_t *ls = store_with(steps, 8);
  if (!ls) return;
  KT_CHECK_OK(ls->ops->ensure_table(ls));
  KT_CHECK_INT(script.next, 8);
  check_sent(0, "{\"TableName\":\"leases_app\"}");
  check_sent(1,
             "{\"TableName\":\"leases_app\",\"AttributeDefinitions\":[{"
             "\"AttributeName\":\"leaseKey\",\"AttributeType\":\"S\"}],"
             "\"KeySchema\":[{\"AttributeName\":\"leaseKey\",\"KeyType\":"
             "\"HASH\"}],\"BillingMode\":\"PAY_PER_REQUEST\"}");
  check_sent(4, "{\"TableName\":\"leases_app-members\"}");
  check_sent(5,
             "{\"TableName\":\"leases_app-members\",\"AttributeDefinitions\":"
             "[{\"AttributeName\":\"key\",\"AttributeType\":\"S\"}],"
             "\"KeySchema\":[{\"AttributeName\":\"key\",\"KeyType\":"
             "\"HASH\"}],\"BillingMode\":\"PAY_PER_REQUEST\"}");
  kn_lease_store_destroy(ls);

  /* Rights that do not reach the membership table: the lease table alone
   * is enough. */
  static const step_t denied[] = {
      {"DescribeTable", DESC("ACTIVE"), NULL},
      {"DescribeTable", NULL, NS "AccessDeniedException"},
      {"DescribeTable", DESC("ACTIVE"), NULL},
      {"DescribeTable", NULL, NS "ResourceNotFoundException"},
      {"CreateTable", NULL, NS "AccessDeniedException"},
  };
  ls = store_with(denied, 5);
  if (!ls) return;
  KT_CHECK_OK(ls->ops->ensure_table(ls));
  KT_CHECK_OK(ls->ops->ensure_table(ls));
  KT_CHECK_INT(script.next, 5);
  kn_lease_store_destroy(ls);

  /* A membership table of another key, or one that stays throttled:
   * errors as for the lease table. */
  static const step_t wrong_m[] = {
      {"DescribeTable", DESC("ACTIVE"), NULL},
      {"DescribeTable", DESC("ACTIVE"), NULL},
      {"DescribeTable", DESC("ACTIVE"), NULL},
      {"DescribeTable", NULL, NS "ThrottlingException"},
  };
  ls = store_with(wrong_m, 4);
  if (!ls) return;
  kn_error_t *e = ls->ops->ensure_table(ls);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__CONF);
  KT_CHECK(e && strstr(kn_error_string(e),
                       "leases_app-members is not a "
                       "membership table"));
  kn_error_destroy(e);
  e = ls->ops->ensure_table(ls);
  KT_CHECK(e && kn_error_is_retriable(e));
  kn_error_destroy(e);
  kn_lease_store_destroy(ls);

  /* Another application's table under that name. */
  static const step_t wrong[] = {
      {"DescribeTable",
       "{\"Table\":{\"TableStatus\":\"ACTIVE\",\"KeySchema\":[{"
       "\"AttributeName\":\"id\",\"KeyType\":\"HASH\"}]}}",
       NULL},
  };
  ls = store_with(wrong, 1);
  if (!ls) return;
  e = ls->ops->ensure_table(ls);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__CONF);
  KT_CHECK(e && strstr(kn_error_string(e), "not a lease table"));
  kn_error_destroy(e);
  kn_lease_store_destroy(ls);

  /* Throttling that outlasted the transport's retries: retriable. */
  static const step_t throttled[] = {
      {"DescribeTable", NULL, NS "ProvisionedThroughputExceededException"},
  };
  ls = store_with(throttled, 1);
  if (!ls) return;
  e = ls->ops->ensure_table(ls);
  KT_CHECK(e && kn_error_is_retriable(e) && kn_error_is_throttling(e));
  kn_error_destroy(e);
  kn_lease_store_destroy(ls);
}

/* ---- membership ---- */

#define MEMBERS_KEY "{\"key\":{\"S\":\"members\"}}"

static void test_heartbeat(void) {
  static const step_t steps[] = {
      {"UpdateItem",
       "{\"Attributes\":{\"key\":{\"S\":\"members\"},"
       "\"epoch\":{\"N\":\"7\"},"
       "\"w:w2\":{\"L\":[{\"N\":\"5\"},{\"N\":\"0\"}]},"
       "\"w:w1\":{\"L\":[{\"N\":\"12\"},{\"N\":\"3\"}]},"
       "\"other\":{\"S\":\"x\"}}}",
       NULL},
      {"UpdateItem",
       "{\"Attributes\":{\"key\":{\"S\":\"members\"},"
       "\"epoch\":{\"N\":\"0\"},"
       "\"w:w1\":{\"L\":[{\"N\":\"13\"},{\"N\":\"3\"}]}}}",
       NULL},
      {"UpdateItem", "{}", NULL},
      {"UpdateItem", NULL, NS "ResourceNotFoundException"},
      {"UpdateItem", NULL, NS "AccessDeniedException"},
      {"UpdateItem", NULL, NS "ProvisionedThroughputExceededException"},
  };
  kn_lease_store_t *ls = store_with(steps, 6);
  if (!ls) return;
  kn_members_t m;
  char *forget[] = {"w3", "w1", "w4", "w3"};
  KT_CHECK_OK(ls->ops->heartbeat(ls, "w1", 0, 12, 3, 2, forget, 4, &m));
  check_sent(0,
             "{\"TableName\":\"leases_app-members\",\"Key\":" MEMBERS_KEY
             ",\"UpdateExpression\":\"SET #w = :w REMOVE #f0, #f2 "
             "ADD #e :bump\","
             "\"ExpressionAttributeNames\":{\"#w\":\"w:w1\",\"#e\":\"epoch\","
             "\"#f0\":\"w:w3\",\"#f2\":\"w:w4\"},"
             "\"ExpressionAttributeValues\":{\":w\":{\"L\":[{\"N\":\"12\"},"
             "{\"N\":\"3\"}]},\":bump\":{\"N\":\"2\"}},"
             "\"ReturnValues\":\"ALL_NEW\"}");
  KT_CHECK_INT(m.n, 2);
  KT_CHECK_INT(m.epoch, 7);
  if (m.n == 2) {
    KT_CHECK_STR(m.v[0].worker, "w1");
    KT_CHECK_INT(m.v[0].beat, 12);
    KT_CHECK_INT(m.v[0].leases, 3);
    KT_CHECK_STR(m.v[1].worker, "w2");
    KT_CHECK_INT(m.v[1].beat, 5);
  }
  kn_members_clear(&m);
  /* Bump 0 is still an ADD (it makes the epoch when there is none). */
  KT_CHECK_OK(ls->ops->heartbeat(ls, "w1", 0, 13, 3, 0, NULL, 0, &m));
  check_sent(1,
             "{\"TableName\":\"leases_app-members\",\"Key\":" MEMBERS_KEY
             ",\"UpdateExpression\":\"SET #w = :w ADD #e :bump\","
             "\"ExpressionAttributeNames\":{\"#w\":\"w:w1\",\"#e\":\"epoch\"},"
             "\"ExpressionAttributeValues\":{\":w\":{\"L\":[{\"N\":\"13\"},"
             "{\"N\":\"3\"}]},\":bump\":{\"N\":\"0\"}},"
             "\"ReturnValues\":\"ALL_NEW\"}");
  KT_CHECK_INT(m.n, 1);
  KT_CHECK_INT(m.epoch, 0);
  kn_members_clear(&m);
  /* An answer without the item. */
  kn_error_t *e = ls->ops->heartbeat(ls, "w1", 0, 14, 3, 0, NULL, 0, &m);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__BAD_MSG);
  KT_CHECK(e && strstr(kn_error_string(e), "heartbeat"));
  KT_CHECK(m.n == 0 && m.v == NULL);
  kn_error_destroy(e);
  kn_members_clear(&m); /* an answer out of turn */
  /* No table, no rights: unsupported, saying why. */
  e = ls->ops->heartbeat(ls, "w1", 0, 15, 3, 0, NULL, 0, &m);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__UNSUPPORTED);
  KT_CHECK(e && strstr(kn_error_string(e), "does not exist"));
  KT_CHECK(!kn_error_is_retriable(e));
  kn_error_destroy(e);
  kn_members_clear(&m); /* an answer out of turn */
  e = ls->ops->heartbeat(ls, "w1", 0, 16, 3, 0, NULL, 0, &m);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__UNSUPPORTED);
  KT_CHECK(e && strstr(kn_error_string(e), "AccessDenied"));
  kn_error_destroy(e);
  kn_members_clear(&m); /* an answer out of turn */
  /* Throttling stays retriable. */
  e = ls->ops->heartbeat(ls, "w1", 0, 17, 3, 0, NULL, 0, &m);
  KT_CHECK(e && kn_error_is_retriable(e) && kn_error_is_throttling(e));
  kn_error_destroy(e);
  kn_members_clear(&m); /* an answer out of turn */
  KT_CHECK_INT(script.next, 6);
  /* No worker: refused before any call. */
  e = ls->ops->heartbeat(ls, NULL, 0, 1, 0, 0, NULL, 0, &m);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__INVALID_ARG);
  kn_error_destroy(e);
  kn_members_clear(&m); /* an answer out of turn */
  kn_lease_store_destroy(ls);

  /* A lease table name that leaves no room for the suffix. */
  char name[256];
  memset(name, 'a', 250);
  name[250] = '\0';
  e = NULL;
  ls = kn_lease_store_dynamodb_new(name, fake_call, &script, NULL, &e);
  KT_CHECK(ls != NULL);
  kn_error_destroy(e);
  if (ls) {
    e = ls->ops->heartbeat(ls, "w1", 0, 1, 0, 0, NULL, 0, &m);
    KT_CHECK_INT(kn_error_code(e), KN_ERR__UNSUPPORTED);
    kn_error_destroy(e);
    kn_lease_store_destroy(ls);
  }
}

/* The roster: a consistent Scan of the membership table, paged, each
 * item's members with its item number, the epochs summed, item 0's
 * digest; other items ignored. */
static void test_members_read(void) {
  static const step_t steps[] = {
      {"Scan",
       "{\"Items\":[{\"key\":{\"S\":\"members#3\"},\"epoch\":{\"N\":\"2\"},"
       "\"w:w2\":{\"L\":[{\"N\":\"5\"},{\"N\":\"0\"}]}},"
       "{\"key\":{\"S\":\"other\"},\"epoch\":{\"N\":\"9\"}}],"
       "\"LastEvaluatedKey\":{\"key\":{\"S\":\"members#3\"}}}",
       NULL},
      {"Scan",
       "{\"Items\":[{\"key\":{\"S\":\"members\"},\"epoch\":{\"N\":\"4\"},"
       "\"digest\":{\"S\":\"nb=4 epoch=6 seq=1 max=1\"},"
       "\"w:w1\":{\"L\":[{\"N\":\"2\"},{\"N\":\"1\"}]}}]}",
       NULL},
      {"Scan", "{\"Items\":[]}", NULL},
      {"Scan", NULL, NS "ResourceNotFoundException"},
      {"Scan", NULL, NS "AccessDeniedException"},
      {"Scan", NULL, NS "InternalServerError"},
  };
  kn_lease_store_t *ls = store_with(steps, 6);
  if (!ls) return;
  kn_members_t m;
  KT_CHECK_OK(ls->ops->members(ls, &m));
  check_sent(0,
             "{\"TableName\":\"leases_app-members\",\"ConsistentRead\":true}");
  check_sent(1,
             "{\"TableName\":\"leases_app-members\",\"ConsistentRead\":true,"
             "\"ExclusiveStartKey\":{\"key\":{\"S\":\"members#3\"}}}");
  KT_CHECK_INT(m.n, 2);
  KT_CHECK_INT(m.epoch, 6);
  if (m.n == 2) {
    KT_CHECK_STR(m.v[0].worker, "w1");
    KT_CHECK_INT(m.v[0].bucket, 0);
    KT_CHECK_STR(m.v[1].worker, "w2");
    KT_CHECK_INT(m.v[1].bucket, 3);
  }
  KT_CHECK_STR(m.digest ? m.digest : "", "nb=4 epoch=6 seq=1 max=1");
  kn_members_clear(&m);
  /* No item yet: nobody. */
  KT_CHECK_OK(ls->ops->members(ls, &m));
  KT_CHECK(m.n == 0 && m.v == NULL && m.epoch == 0);
  kn_error_t *e = ls->ops->members(ls, &m);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__UNSUPPORTED);
  kn_error_destroy(e);
  e = ls->ops->members(ls, &m);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__UNSUPPORTED);
  kn_error_destroy(e);
  e = ls->ops->members(ls, &m);
  KT_CHECK(e && kn_error_code(e) != KN_ERR__UNSUPPORTED &&
           kn_error_is_retriable(e));
  kn_error_destroy(e);
  KT_CHECK_INT(script.next, 6);
  kn_lease_store_destroy(ls);
}

static void test_members_item(void) {
  kn_members_t m;
  kn_error_t *e = NULL;
  /* Malformed members are no members; the rest sorted. */
  json_t *item = json_loads(
      "{\"key\":{\"S\":\"members\"},\"epoch\":{\"N\":\"-3\"},"
      "\"w:c\":{\"L\":[{\"N\":\"1\"},{\"N\":\"2\"}]},"
      "\"w:a\":{\"L\":[{\"N\":\"3\"},{\"N\":\"4\"}]},"
      "\"w:b\":{\"L\":[{\"N\":\"1.5\"},{\"N\":\"2\"}]},"
      "\"w:d\":{\"L\":[{\"N\":\"1\"}]},"
      "\"w:e\":{\"S\":\"1\"},"
      "\"w:f\":{\"L\":[{\"S\":\"1\"},{\"N\":\"2\"}]},"
      "\"w:\":{\"L\":[{\"N\":\"1\"},{\"N\":\"2\"}]},"
      "\"x:g\":{\"L\":[{\"N\":\"1\"},{\"N\":\"2\"}]}}",
      0, NULL);
  KT_CHECK_INT(kn_ddb_item_to_members(item, &m, &e), 0);
  KT_CHECK_INT(m.epoch, -3);
  KT_CHECK_INT(m.n, 2);
  if (m.n == 2) {
    KT_CHECK_STR(m.v[0].worker, "a");
    KT_CHECK_INT(m.v[0].beat, 3);
    KT_CHECK_INT(m.v[0].leases, 4);
    KT_CHECK_STR(m.v[1].worker, "c");
  }
  /* ... kept apart, to be forgotten: b, d, e, f and the nameless one. */
  KT_CHECK_INT(m.n_bad, 5);
  for (size_t i = 0; i < m.n_bad; i++) KT_CHECK(m.bad[i].leases == 0);
  kn_members_clear(&m);
  json_decref(item);
  /* Only the epoch: no members. */
  item = json_loads("{\"epoch\":{\"N\":\"0\"}}", 0, NULL);
  KT_CHECK_INT(kn_ddb_item_to_members(item, &m, &e), 0);
  KT_CHECK(m.n == 0 && m.v == NULL);
  json_decref(item);
  /* No epoch, a bad epoch, no item. */
  item = json_loads("{\"w:a\":{\"L\":[{\"N\":\"3\"},{\"N\":\"4\"}]}}", 0, NULL);
  KT_CHECK_INT(kn_ddb_item_to_members(item, &m, &e), -1);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__BAD_MSG);
  KT_CHECK(e && strstr(kn_error_string(e), "epoch"));
  KT_CHECK(m.n == 0 && m.v == NULL);
  kn_error_destroy(e);
  json_decref(item);
  item = json_loads("{\"epoch\":{\"S\":\"1\"}}", 0, NULL);
  KT_CHECK_INT(kn_ddb_item_to_members(item, &m, &e), -1);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__BAD_MSG);
  kn_error_destroy(e);
  json_decref(item);
  KT_CHECK_INT(kn_ddb_item_to_members(NULL, &m, &e), -1);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__BAD_MSG);
  kn_error_destroy(e);
  /* The value written. */
  json_t *v = kn_ddb_member_value(5, 0),
         *want = json_loads("{\"L\":[{\"N\":\"5\"},{\"N\":\"0\"}]}", 0, NULL);
  KT_CHECK(v && json_equal(v, want));
  json_decref(v);
  json_decref(want);
}

int main(void) {
  KT_RUN(test_item_to_lease);
  KT_RUN(test_item_edge_cases);
  KT_RUN(test_requests);
  KT_RUN(test_create);
  KT_RUN(test_retried_success);
  KT_RUN(test_checkpoint_handoff);
  KT_RUN(test_list_pages);
  KT_RUN(test_list_cycle);
  KT_RUN(test_list_kcl3_workers);
  KT_RUN(test_ensure_table);
  KT_RUN(test_heartbeat);
  KT_RUN(test_members_item);
  KT_RUN(test_members_read);
  for (int i = 0; i < 16; i++) json_decref(script.sent[i]);
  return KT_DONE();
}
