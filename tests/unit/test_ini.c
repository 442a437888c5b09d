/* The shared config/credentials file parser. */
#include <stdlib.h>
#include <string.h>

#include "aws/ini.h"
#include "core/error.h"
#include "kt.h"

/* A nested value and its line; NULL and -1 when there is none (as after a
 * failed allocation). */
static const char *sub_value(const kn_ini_entry_t *e, const char *key) {
  const kn_ini_entry_t *sub = kn_ini_sub(e, key);
  return sub ? sub->value : NULL;
}

static long sub_line(const kn_ini_entry_t *e, const char *key) {
  const kn_ini_entry_t *sub = kn_ini_sub(e, key);
  return sub ? (long)sub->line : -1;
}

static kn_ini_t *parse_ok(const char *text) {
  kn_ini_t *ini = NULL;
  kn_error_t *e = kn_ini_parse(text, strlen(text), "test.ini", &ini);
  KT_CHECK_MSG(e == NULL && ini != NULL, "%s",
               e ? kn_error_string(e) : "nomem");
  kn_error_destroy(e);
  return ini;
}

/* Parses text that must fail; checks the message. */
static void parse_err(const char *text, const char *want) {
  kn_ini_t *ini = NULL;
  kn_error_t *e = kn_ini_parse(text, strlen(text), "~/.aws/credentials", &ini);
  KT_CHECK(ini == NULL);
  KT_CHECK(e != NULL);
  if (e) {
    KT_CHECK_INT(kn_error_code(e), KN_ERR__CONF);
    KT_CHECK_MSG(strstr(kn_error_string(e), want) != NULL,
                 "got \"%s\", want \"%s\"", kn_error_string(e), want);
  }
  kn_error_destroy(e);
  kn_ini_destroy(ini);
}

static void test_basic(void) {
  kn_ini_t *ini = parse_ok(
      "[default]\n"
      "aws_access_key_id = AKIDDEFAULT\n"
      "aws_secret_access_key=secret/with+chars==\n"
      "\n"
      "[profile dev]\n"
      "region = eu-west-1\n"
      "output   =   json   \n");
  if (!ini) return;
  KT_CHECK_INT(ini->n_sections, 2);
  KT_CHECK_STR(ini->source, "test.ini");
  const kn_ini_section_t *d = kn_ini_section(ini, "default");
  KT_CHECK(d != NULL);
  KT_CHECK_INT(d ? d->line : 0, 1);
  KT_CHECK_STR(kn_ini_get(d, "aws_access_key_id"), "AKIDDEFAULT");
  KT_CHECK_STR(kn_ini_get(d, "aws_secret_access_key"), "secret/with+chars==");
  KT_CHECK_INT(kn_ini_entry(d, "aws_secret_access_key")->line, 3);
  const kn_ini_section_t *dev = kn_ini_section(ini, "profile dev");
  KT_CHECK_STR(kn_ini_get(dev, "region"), "eu-west-1");
  KT_CHECK_STR(kn_ini_get(dev, "output"), "json");
  KT_CHECK(kn_ini_get(dev, "missing") == NULL);
  KT_CHECK(kn_ini_section(ini, "dev") == NULL);
  KT_CHECK(kn_ini_section(ini, "Default") == NULL); /* names are exact */
  KT_CHECK(kn_ini_get(NULL, "x") == NULL);
  KT_CHECK(kn_ini_section(NULL, "x") == NULL);
  kn_ini_destroy(ini);
}

static void test_empty_and_comments(void) {
  kn_ini_t *ini = parse_ok("");
  KT_CHECK_INT(ini ? ini->n_sections : 99, 0);
  kn_ini_destroy(ini);
  ini = parse_ok("\n\n   \n# only comments\n; here\n   # indented\n");
  KT_CHECK_INT(ini ? ini->n_sections : 99, 0);
  kn_ini_destroy(ini);
  ini = parse_ok(
      "# leading comment\n"
      "[default] # a comment after the header\n"
      "; another\n"
      "region = us-west-2\n"
      "[other] ; semicolon comment [with brackets]\n"
      "key = a # not a comment\n"
      "cmd = /bin/sh -c 'x ; y'\n");
  const kn_ini_section_t *d = kn_ini_section(ini, "default");
  KT_CHECK_STR(kn_ini_get(d, "region"), "us-west-2");
  const kn_ini_section_t *o = kn_ini_section(ini, "other");
  KT_CHECK(o != NULL);
  /* configparser has no inline comments in values. */
  KT_CHECK_STR(kn_ini_get(o, "key"), "a # not a comment");
  KT_CHECK_STR(kn_ini_get(o, "cmd"), "/bin/sh -c 'x ; y'");
  kn_ini_destroy(ini);
}

static void test_section_names(void) {
  kn_ini_t *ini = parse_ok(
      "[  spaced name  ]\n"
      "a = 1\n"
      "[profile   many   spaces]\n"
      "[odd]name]\n"
      "b = 2\n"
      "  [not a header]\n"
      "[x]\n"
      "  [indented]\n"
      "c = 3\n");
  KT_CHECK(kn_ini_section(ini, "spaced name") != NULL);
  KT_CHECK(kn_ini_section(ini, "profile   many   spaces") != NULL);
  /* Indented under a key, a header is more value (as configparser reads
   * it); after a header it is a header. */
  KT_CHECK_STR(kn_ini_get(kn_ini_section(ini, "odd]name"), "b"),
               "2\n[not a header]");
  KT_CHECK_STR(kn_ini_get(kn_ini_section(ini, "indented"), "c"), "3");
  KT_CHECK(kn_ini_section(ini, "x") != NULL);
  kn_ini_destroy(ini);
}

static void test_keys(void) {
  kn_ini_t *ini = parse_ok(
      "[default]\n"
      "   indented_key = first\n"
      "AWS_Access_Key_ID = AKID\n"
      "empty =\n"
      "empty2=\n"
      "eq = a=b=c\n"
      "role_arn = arn:aws:iam::123456789012:role/x\n"
      "tabbed\t=\tv\t\n"
      "crlf = yes\r\n");
  const kn_ini_section_t *d = kn_ini_section(ini, "default");
  KT_CHECK_STR(kn_ini_get(d, "aws_access_key_id"), "AKID");
  KT_CHECK_STR(kn_ini_get(d, "AWS_ACCESS_KEY_ID"), "AKID"); /* keys fold case */
  const kn_ini_entry_t *ent = kn_ini_entry(d, "aws_access_key_id");
  KT_CHECK_STR(ent ? ent->key : NULL, "aws_access_key_id");
  KT_CHECK_STR(kn_ini_get(d, "empty"), "");
  KT_CHECK_STR(kn_ini_get(d, "empty2"), "");
  ent = kn_ini_entry(d, "empty");
  KT_CHECK_INT(ent ? (long long)ent->n_subs : -1, 0);
  KT_CHECK_STR(kn_ini_get(d, "eq"), "a=b=c");
  KT_CHECK_STR(kn_ini_get(d, "indented_key"), "first");
  KT_CHECK_STR(kn_ini_get(d, "role_arn"), "arn:aws:iam::123456789012:role/x");
  KT_CHECK_STR(kn_ini_get(d, "tabbed"), "v");
  KT_CHECK_STR(kn_ini_get(d, "crlf"), "yes");
  kn_ini_destroy(ini);
}

static void test_continuation(void) {
  kn_ini_t *ini = parse_ok(
      "[default]\n"
      "multi = first\n"
      "  second\n"
      "\tthird\n"
      "\n"
      "  # a comment inside\n"
      "  fourth\n"
      "\n"
      "\n"
      "after = x\n");
  const kn_ini_section_t *d = kn_ini_section(ini, "default");
  KT_CHECK_STR(kn_ini_get(d, "multi"), "first\nsecond\nthird\n\nfourth");
  KT_CHECK_STR(kn_ini_get(d, "after"), "x");
  kn_ini_destroy(ini);
  /* A key indented deeper than the previous key's line continues it; at the
   * same depth it is a new key. */
  ini = parse_ok(
      "[a]\n"
      "  k1 = v1\n"
      "  k2 = v2\n"
      "    more\n");
  d = kn_ini_section(ini, "a");
  KT_CHECK_STR(kn_ini_get(d, "k1"), "v1");
  KT_CHECK_STR(kn_ini_get(d, "k2"), "v2\nmore");
  kn_ini_destroy(ini);
  /* CRLF files. */
  ini = parse_ok("[a]\r\nk = v\r\n  w\r\n");
  KT_CHECK_STR(kn_ini_get(kn_ini_section(ini, "a"), "k"), "v\nw");
  kn_ini_destroy(ini);
  /* No newline at the end; a BOM at the start. */
  ini = parse_ok("\xEF\xBB\xBF[a]\nk = v");
  KT_CHECK_STR(kn_ini_get(kn_ini_section(ini, "a"), "k"), "v");
  kn_ini_destroy(ini);
}

static void test_subsections(void) {
  kn_ini_t *ini = parse_ok(
      "[default]\n"
      "region = us-east-1\n"
      "s3 =\n"
      "  max_concurrent_requests = 10\n"
      "\n"
      "  # comment\n"
      "  Addressing_Style = path\n"
      "  max_concurrent_requests = 20\n"
      "output = text\n"
      "[services local]\n"
      "kinesis =\n"
      "  endpoint_url = http://127.0.0.1:4567\n"
      "dynamodb =\n"
      "\tendpoint_url=http://127.0.0.1:8000/\n");
  const kn_ini_section_t *d = kn_ini_section(ini, "default");
  const kn_ini_entry_t *s3 = kn_ini_entry(d, "s3");
  KT_CHECK(s3 != NULL);
  if (s3) {
    KT_CHECK_STR(s3->value, "");
    KT_CHECK_INT(s3->n_subs, 3);
    KT_CHECK_STR(sub_value(s3, "max_concurrent_requests"),
                 "20"); /* last wins */
    KT_CHECK_INT(sub_line(s3, "max_concurrent_requests"), 8);
    KT_CHECK_STR(sub_value(s3, "addressing_style"), "path");
    KT_CHECK(kn_ini_sub(s3, "nope") == NULL);
  }
  KT_CHECK_STR(kn_ini_get(d, "output"), "text");
  KT_CHECK_STR(kn_ini_get(d, "region"), "us-east-1");
  const kn_ini_section_t *svc = kn_ini_section(ini, "services local");
  KT_CHECK_STR(sub_value(kn_ini_entry(svc, "kinesis"), "endpoint_url"),
               "http://127.0.0.1:4567");
  KT_CHECK_STR(sub_value(kn_ini_entry(svc, "dynamodb"), "endpoint_url"),
               "http://127.0.0.1:8000/");
  KT_CHECK(kn_ini_sub(NULL, "x") == NULL);
  kn_ini_destroy(ini);
  /* Blank lines before the first nested line. */
  ini = parse_ok("[a]\nk =\n\n   x = 1\n");
  KT_CHECK_STR(sub_value(kn_ini_entry(kn_ini_section(ini, "a"), "k"), "x"),
               "1");
  kn_ini_destroy(ini);
}

static void test_errors(void) {
  parse_err(
      "key = value\n",
      "~/.aws/credentials:1: \"key = value\" before any [section] header");
  parse_err("\n# c\ngarbage\n",
            "~/.aws/credentials:3: expected a [section] header");
  parse_err("[default]\naws_access_key_id = A\n\n# x\nthis line is wrong\n",
            "~/.aws/credentials:5: expected \"key = value\"");
  parse_err("[default]\n= value\n",
            "~/.aws/credentials:2: expected a key before \"=\"");
  parse_err("[default\nk = v\n", "~/.aws/credentials:1: expected \"]\"");
  parse_err("[default] trailing\n",
            "~/.aws/credentials:1: unexpected text after");
  parse_err("[]\n", "~/.aws/credentials:1: empty section name");
  parse_err("[   ]\n", "~/.aws/credentials:1: empty section name");
  parse_err("[a]\nk = 1\n[b]\n[a]\n",
            "~/.aws/credentials:4: duplicate section [a] (first at line 1)");
  parse_err(
      "[a]\nk = 1\nK = 2\n",
      "~/.aws/credentials:3: duplicate key \"k\" in [a] (first at line 2)");
  parse_err("[a]\ns3 =\n  nonsense\n",
            "~/.aws/credentials:3: expected \"key = value\" in the sub-section "
            "\"s3\"");
  parse_err("[a]\ns3 =\n  x = 1\n   = 2\n",
            "~/.aws/credentials:4: expected a key before \"=\" in the "
            "sub-section \"s3\"");
  static const char nul[] = "[a]\nk = v\0x\n";
  kn_ini_t *ini = NULL;
  kn_error_t *e = kn_ini_parse(nul, sizeof(nul) - 1, "f", &ini);
  KT_CHECK(ini == NULL);
  KT_CHECK(e && strstr(kn_error_string(e), "f:2: unexpected NUL byte"));
  kn_error_destroy(e);
  /* Line counting goes on through continuations and comments. */
  parse_err("[a]\nk = v\n  cont\n  cont\n# c\n\n[b\n", "~/.aws/credentials:7:");
}

static void test_no_source(void) {
  kn_ini_t *ini = NULL;
  kn_error_t *e = kn_ini_parse("oops\n", 5, NULL, &ini);
  KT_CHECK(e && strstr(kn_error_string(e), "(text):1:"));
  kn_error_destroy(e);
  kn_ini_destroy(NULL);
}

int main(void) {
  KT_RUN(test_basic);
  KT_RUN(test_empty_and_comments);
  KT_RUN(test_section_names);
  KT_RUN(test_keys);
  KT_RUN(test_continuation);
  KT_RUN(test_subsections);
  KT_RUN(test_errors);
  KT_RUN(test_no_source);
  return KT_DONE();
}
