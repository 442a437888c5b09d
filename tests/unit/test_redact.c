/* Redaction of secret header values for logs. */
#include <stdlib.h>
#include <string.h>

#include "aws/redact.h"
#include "kt.h"

static void check_line(const char *in, const char *want) {
  char *got = kn_redact_header_line(in);
  KT_CHECK_MSG(got && strcmp(got, want) == 0, "\"%s\" -> \"%s\", want \"%s\"",
               in, got ? got : "(null)", want);
  free(got);
}

static void test_lines(void) {
  check_line(
      "Authorization: AWS4-HMAC-SHA256 Credential=AKID/x, "
      "SignedHeaders=host, Signature=abc",
      "Authorization: <redacted>");
  check_line("authorization:secret", "authorization:<redacted>");
  check_line("AUTHORIZATION:\t secret", "AUTHORIZATION:\t <redacted>");
  check_line("X-Amz-Security-Token: IQoJb3JpZ2luX2Vj\r\n",
             "X-Amz-Security-Token: <redacted>\r\n");
  check_line("x-amz-security-token: tok\n",
             "x-amz-security-token: <redacted>\n");
  check_line("Proxy-Authorization: Basic dXNlcjpwYXNz",
             "Proxy-Authorization: <redacted>");
  check_line("X-aws-ec2-metadata-token: AQAEA",
             "X-aws-ec2-metadata-token: <redacted>");
  check_line("Authorization : spaced", "Authorization : <redacted>");
  check_line("Authorization:", "Authorization:<redacted>");
  /* Not secrets. */
  check_line("Host: kinesis.us-east-1.amazonaws.com",
             "Host: kinesis.us-east-1.amazonaws.com");
  check_line("X-Amz-Date: 20150830T123600Z\r\n",
             "X-Amz-Date: 20150830T123600Z\r\n");
  check_line("Authorization-Extra: shown", "Authorization-Extra: shown");
  check_line("X-Authorization: shown", "X-Authorization: shown");
  check_line("Authorizatio: shown", "Authorizatio: shown");
  check_line("no colon here", "no colon here");
  check_line("", "");
  check_line(":authority: example.com", ":authority: example.com");
  KT_CHECK(kn_redact_header_line(NULL) == NULL);
}

static void test_block(void) {
  const char in[] =
      "POST / HTTP/1.1\r\n"
      "Host: kinesis.eu-west-1.amazonaws.com\r\n"
      "Authorization: AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20231114/"
      "eu-west-1/kinesis/aws4_request, SignedHeaders=host, Signature=0123\r\n"
      "X-Amz-Security-Token: first-part\r\n"
      "  continued-part\r\n"
      "\tmore\r\n"
      "X-Amz-Target: Kinesis_20131202.GetRecords\r\n"
      " not-a-secret-continuation\r\n"
      "x-amz-date: 20231114T221320Z\n"
      "authorization: lf-only\n"
      "\r\n";
  const char want[] =
      "POST / HTTP/1.1\r\n"
      "Host: kinesis.eu-west-1.amazonaws.com\r\n"
      "Authorization: <redacted>\r\n"
      "X-Amz-Security-Token: <redacted>\r\n"
      "  <redacted>\r\n"
      "\t<redacted>\r\n"
      "X-Amz-Target: Kinesis_20131202.GetRecords\r\n"
      " not-a-secret-continuation\r\n"
      "x-amz-date: 20231114T221320Z\n"
      "authorization: <redacted>\n"
      "\r\n";
  size_t n = 0;
  char *got = kn_redact_header_block(in, sizeof(in) - 1, &n);
  KT_CHECK_STR(got, want);
  KT_CHECK_INT(n, sizeof(want) - 1);
  free(got);

  /* Not NUL-terminated: only len bytes are read. */
  char raw[] = {'A', 'u', 't', 'h', 'o', 'r', 'i', 'z', 'a', 't', 'i', 'o',
                'n', ':', ' ', 's', 'e', 'c', 'r', 'e', 't', 'X', 'X'};
  got = kn_redact_header_block(raw, 21, NULL);
  KT_CHECK_STR(got, "Authorization: <redacted>");
  free(got);

  got = kn_redact_header_block("", 0, &n);
  KT_CHECK_STR(got, "");
  KT_CHECK_INT(n, 0);
  free(got);
  KT_CHECK(kn_redact_header_block(NULL, 3, NULL) == NULL);

  /* Many secrets: more markers than the first reservation holds. */
  char many[64 * 16 + 1] = "";
  char want_many[64 * 26 + 1] = "";
  for (int i = 0; i < 64; i++) {
    strcat(many, "Authorization:x\n");
    strcat(want_many, "Authorization:<redacted>\n");
  }
  got = kn_redact_header_block(many, strlen(many), NULL);
  KT_CHECK_STR(got, want_many);
  free(got);
}

static void test_is_secret(void) {
  KT_CHECK(kn_redact_is_secret("Authorization", 13));
  KT_CHECK(kn_redact_is_secret("x-AMZ-security-TOKEN", 20));
  KT_CHECK(!kn_redact_is_secret("Authorization", 12));
  KT_CHECK(!kn_redact_is_secret("Host", 4));
  KT_CHECK(!kn_redact_is_secret("", 0));
}

int main(void) {
  KT_RUN(test_lines);
  KT_RUN(test_block);
  KT_RUN(test_is_secret);
  return KT_DONE();
}
