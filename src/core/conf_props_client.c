/* Properties shared by every handle: AWS access, HTTP, retries, logging. */
#include "core/conf.h"

#define MS_MAX 86400000LL

const kn_prop_t kn_props_client[] = {
    {"region", "client", KN_PROP_STR, NULL, 0, 0, NULL,
     "AWS region. Default: the region of `stream` when it is an ARN, "
     "AWS_REGION, AWS_DEFAULT_REGION, then the profile's region; us-east-1 "
     "when an endpoint is set and no region is found. Set to another region "
     "than a stream ARN's, it is an error."},
    {"profile", "client", KN_PROP_STR, NULL, 0, 0, NULL,
     "Profile of the shared config and credentials files. Default: "
     "AWS_PROFILE, AWS_DEFAULT_PROFILE, then \"default\". When set, as the "
     "AWS CLI's --profile, the keys in AWS_ACCESS_KEY_ID and "
     "AWS_SECRET_ACCESS_KEY are not used (the profile's credentials are)."},
    {"endpoint", "client", KN_PROP_STR, NULL, 0, 0, NULL,
     "Kinesis endpoint URL, as the AWS CLI's --endpoint-url (DynamoDB and "
     "STS do not use it); beats the environment. Each service's endpoint "
     "otherwise comes from AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL, "
     "the profile's services section and endpoint_url, then the regional "
     "AWS endpoint (AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true skips the "
     "environment and the profile)."},
    {"kinesis.endpoint", "client", KN_PROP_STR, NULL, 0, 0, NULL,
     "Kinesis endpoint URL. Default: `endpoint`, then "
     "AWS_ENDPOINT_URL_KINESIS, then as `endpoint`."},
    {"dynamodb.endpoint", "client", KN_PROP_STR, NULL, 0, 0, NULL,
     "DynamoDB endpoint URL for the lease table. Default: "
     "AWS_ENDPOINT_URL_DYNAMODB, then as `endpoint` describes (never "
     "`endpoint` itself)."},
    {"sts.endpoint", "client", KN_PROP_STR, NULL, 0, 0, NULL,
     "STS endpoint URL for role and web identity credentials. Default: "
     "AWS_ENDPOINT_URL_STS, then as `endpoint` describes (never `endpoint` "
     "itself)."},
    {"aws.access.key.id", "client", KN_PROP_STR, NULL, 0, 0, NULL,
     "Access key id; with aws.secret.access.key it takes precedence over the "
     "credentials chain."},
    {"aws.secret.access.key", "client", KN_PROP_SECRET, NULL, 0, 0, NULL,
     "Secret access key (never logged)."},
    {"aws.session.token", "client", KN_PROP_SECRET, NULL, 0, 0, NULL,
     "Session token for temporary credentials (never logged)."},
    {"ssl.verify", "client", KN_PROP_BOOL, "true", 0, 0, NULL,
     "Verify the server's TLS certificate and host name. Turn off only for "
     "local servers with self-signed certificates."},
    {"ssl.ca.location", "client", KN_PROP_STR, NULL, 0, 0, NULL,
     "CA bundle file. Default: AWS_CA_BUNDLE, the profile's ca_bundle, then "
     "the system store."},
    {"http.version", "client", KN_PROP_ENUM, "auto", 0, 0,
     "auto,1.1,2,2-prior-knowledge",
     "HTTP version: auto negotiates HTTP/2 over TLS (ALPN) and uses HTTP/1.1 "
     "in cleartext; 2-prior-knowledge speaks HTTP/2 in cleartext."},
    {"http.connect.timeout.ms", "client", KN_PROP_INT, "10000", 1, MS_MAX, NULL,
     "Timeout for establishing a connection (TCP and TLS)."},
    {"http.request.timeout.ms", "client", KN_PROP_INT, "30000", 1, MS_MAX, NULL,
     "Timeout for one HTTP request and response (not for event streams)."},
    {"http.max.connections", "client", KN_PROP_INT, "64", 1, 10000, NULL,
     "Connections kept open for reuse."},
    {"http.response.max.bytes", "client", KN_PROP_INT, "67108864", 1024,
     1LL << 32, NULL,
     "Largest response body accepted (event streams excepted: the protocol "
     "bounds their messages at 16 MiB); a larger one fails the call "
     "(_BAD_MSG), at once when its Content-Length says so."},
    {"retry.max.attempts", "client", KN_PROP_INT, "8", 1, 1000, NULL,
     "Attempts of a retriable call (throttling, 5xx, connection failures) "
     "before its error is reported. Default when unset: AWS_MAX_ATTEMPTS, "
     "the profile's max_attempts, then 8."},
    {"retry.backoff.ms", "client", KN_PROP_INT, "100", 1, MS_MAX, NULL,
     "Base of the exponential back-off between attempts (full jitter)."},
    {"retry.backoff.max.ms", "client", KN_PROP_INT, "20000", 1, MS_MAX, NULL,
     "Ceiling of the back-off between attempts."},
    {"retry.budget", "client", KN_PROP_INT, "500", 0, 1000000, NULL,
     "Retry tokens shared by a handle's calls: a retry costs 5 (10 after a "
     "timeout), a success returns 1; when empty, failures are reported at "
     "once instead of retried, so an outage does not multiply load."},
    {"metadata.timeout.ms", "client", KN_PROP_INT, "1000", 1, MS_MAX, NULL,
     "Timeout of each request to the EC2 instance metadata service and the "
     "container credentials endpoint. Default when unset: "
     "AWS_METADATA_SERVICE_TIMEOUT (seconds), the profile's "
     "metadata_service_timeout, then 1000."},
    {"metadata.max.attempts", "client", KN_PROP_INT, "2", 1, 10, NULL,
     "Attempts of each request to the instance metadata service and the "
     "container credentials endpoint. Default when unset: "
     "AWS_METADATA_SERVICE_NUM_ATTEMPTS, the profile's "
     "metadata_service_num_attempts, then 2."},
    {"credential.process.timeout.ms", "client", KN_PROP_INT, "60000", 1, MS_MAX,
     NULL, "Time a profile's credential_process may take before it is killed."},
    {"credential.response.max.bytes", "client", KN_PROP_INT, "65536", 1024,
     1LL << 24, NULL,
     "Largest response accepted from a credentials endpoint (instance "
     "metadata, container credentials, STS)."},
    {"log.level", "client", KN_PROP_INT, "5", 0, 7, NULL,
     "Most verbose level logged: 3 error, 4 warning, 5 notice, 6 info, 7 "
     "debug."},
    {"statistics.interval.ms", "client", KN_PROP_INT, "0", 0, MS_MAX, NULL,
     "Interval of the statistics callback; 0 disables statistics."},
    {"user.agent", "client", KN_PROP_STR, NULL, 0, 0, NULL,
     "Text appended to the User-Agent header."},
    {NULL, NULL, 0, NULL, 0, 0, NULL, NULL}};
