#!/usr/bin/env python3
"""Signs thousands of generated requests with botocore's SigV4Auth and with
libkinesis (through tests/tools/sigv4_tool) and requires the canonical
request, string to sign and Authorization header to match byte for byte.

The requests vary methods, paths with dot segments, repeated slashes,
reserved, percent-encoded and non-ASCII characters; queries with repeated,
empty and non-ASCII names and values, encoded in several valid ways;
headers with odd spacing, folded lines, repeated names, headers botocore
leaves unsigned or replaces; empty, binary and JSON payloads, precomputed
payload hashes and unsigned payloads; with and without session tokens;
several services, regions and dates.

Deliberate differences, so not generated: Unicode white space inside
header values (botocore trims it as Python's str.split() does; the signer
trims ASCII white space only, as HTTP sees bytes), empty pieces in a raw
query string ("a=1&&b=2": botocore signs an empty pair, the signer skips
it), and a Date header (the signer refuses it).

Environment: SIGV4_TOOL (path to sigv4_tool, set by ctest); SIGV4_SEED and
SIGV4_COUNT to replay one seed; SIGV4_RANDOM_SEEDS=N adds N seeds drawn at
random (a search beyond the fixed ones, which alone run by default so that
a run's outcome does not depend on chance).  Exits 0 when everything
matches.
"""
import datetime
import hashlib
import json
import os
import random
import sys
from unittest import mock
from urllib.parse import quote

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runkit  # noqa: E402

FIXED_SEED = 20150830
FIXED_COUNT = 1500
# More fixed seeds, of RANDOM_COUNT requests each.
MORE_SEEDS = (1, 2718281828, 3141592653, 1618033988, 4294967295)
RANDOM_COUNT = 100

METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS",
           "get", "Post", "MKCOL", "X-Custom"]
SERVICES = ["kinesis", "dynamodb", "sts", "monitoring", "service",
            "execute-api"]
REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-2", "cn-north-1",
           "us-gov-west-1", "me-central-1"]
HOSTS = ["example.amazonaws.com", "kinesis.eu-west-1.amazonaws.com",
         "127.0.0.1:4567", "localhost:8443", "dynamodb.us-east-1.amazonaws.com",
         "[::1]:8000"]
NOTABLE_TIMES = [0, 951782400, 951868799, 1440938160, 1456704000,
                 1700000000, 1704067199, 1704067200, 4107542400]

PATH_SEGMENTS = [
    "a", "b", "example", "Stream-1", ".", "..", "...", "", "~user", "-_.~",
    "é", "ሴ", "日本", "😀", "%2F", "%20", "%41", "%e1%88%b4", "%25", "%",
    "a b", "a+b", "k=v", "x:y", "u@h", "!$&'()*,;", "[]{}|^`", "\\",
    '"q"', "<>", "..a", ".b", "a.", "$delete", "%2e%2e",
]
QUERY_WORDS = [
    "Param", "param", "Param1", "Param-3", "a", "b", "A", "Z", "", "x y",
    "é", "ሴ", "😀", "a&b", "a=b", "1+1", "50%", "/path", "?", "#frag",
    "~-._", "Action", "Version", "NextToken", "AAAA/BBBB+CC==", "%41",
    "StreamName", "ShardId", "shardId-000000000000",
]
HEADER_NAMES = [
    "Content-Type", "X-Amz-Target", "Content-Length", "Accept",
    "Accept-Encoding", "X-Custom", "x-custom", "X-CUSTOM", "My-Header1",
    "x-amz-meta-Key", "X-Amz-Content-SHA256", "X-Amz-Security-Token",
    "Authorization", "X-Amz-Date", "User-Agent", "Expect", "X-Amzn-Trace-Id",
    "Connection", "Keep-Alive", "Transfer-Encoding", "TE", "Trailer",
    "Upgrade", "Proxy-Authorization", "Proxy-Authenticate",
    "X-!#$%&'*+.^_`|~", "a", "Z9", "x-amz-user-agent", "Content-MD5",
]
VALUE_WORDS = [
    "value1", "VALUE1", "application/x-amz-json-1.1",
    "Kinesis_20131202.GetRecords", '"a   b   c"', "gzip, deflate", "100",
    "é", "ሴ", "😀", "a,b", "k=v; q=0.5", "\x01ctl\x7f", "UNSIGNED-PAYLOAD",
]
SPACES = [" ", "  ", "\t", " \t ", "\x0b", "\x0c", "\x1c", "\x1f",
          "\r\n ", "\n\t"]
B64 = ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
       "+/")


def rand_str(rng, alphabet, lo, hi):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


def gen_path(rng):
    r = rng.random()
    if r < 0.05:
        return ""
    if r < 0.15:
        return "/"
    segs = [rng.choice(PATH_SEGMENTS) for _ in range(rng.randint(1, 7))]
    path = "/" + "/".join(segs)
    if rng.random() < 0.3:
        path += "/"
    if rng.random() < 0.1:
        path = "/" + path
    return path


def encode_component(rng, s):
    """Percent-encodes s as a client might: always what must be encoded,
    sometimes more, hex in either case."""
    out = []
    must = set(b"&=+#%")
    for b in s.encode("utf-8"):
        c = chr(b)
        unreserved = c.isascii() and (c.isalnum() or c in "-._~")
        safe_in_query = c in "/:@!$'()*,;?"
        if unreserved and rng.random() > 0.1:
            out.append(c)
        elif safe_in_query and b not in must and rng.random() < 0.4:
            out.append(c)
        else:
            fmt = "%%%02X" if rng.random() < 0.7 else "%%%02x"
            out.append(fmt % b)
    return "".join(out)


def gen_query(rng):
    """Returns (wire query or None, botocore params or None, URL query)."""
    r = rng.random()
    if r < 0.2:
        return None, None, ""
    if r < 0.25:
        return "", None, ""
    n = rng.randint(1, 8)
    pairs = []
    for _ in range(n):
        if pairs and rng.random() < 0.25:
            k = rng.choice(pairs)[0]  # a repeated name
        else:
            k = rng.choice(QUERY_WORDS)
        v = "" if rng.random() < 0.2 else rng.choice(QUERY_WORDS)
        if rng.random() < 0.2:
            v += rand_str(rng, B64, 1, 20)
        pairs.append((k, v))
    if rng.random() < 0.3:
        # URL mode: a strictly encoded query that botocore sorts as is.
        q = "&".join(quote(k, safe="-_.~") + "=" + quote(v, safe="-_.~")
                     for k, v in pairs)
        return q, None, q
    pieces = []
    for k, v in pairs:
        ek, ev = encode_component(rng, k), encode_component(rng, v)
        if v == "" and k != "" and rng.random() < 0.5:
            pieces.append(ek)
        else:
            pieces.append(ek + "=" + ev)
    return "&".join(pieces), pairs, ""


def gen_value(rng):
    parts = []
    for _ in range(rng.randint(0, 4)):
        if rng.random() < 0.5:
            parts.append(rng.choice(SPACES))
        parts.append(rng.choice(VALUE_WORDS) if rng.random() < 0.7
                     else rand_str(rng, B64, 1, 30))
    if rng.random() < 0.4:
        parts.append(rng.choice(SPACES))
    return "".join(parts)


def gen_headers(rng, token):
    host_name = rng.choice(["Host", "host", "HOST"])
    host = rng.choice(HOSTS)
    if rng.random() < 0.2:
        host = rng.choice(SPACES[:4]) + host + rng.choice(SPACES[:4])
    headers = [(host_name, host)]
    for _ in range(rng.randint(0, 10)):
        if len(headers) > 1 and rng.random() < 0.2:
            name = rng.choice(headers)[0]
            if rng.random() < 0.5:
                name = name.swapcase()
        else:
            name = rng.choice(HEADER_NAMES)
        if name.lower() == "x-amz-content-sha256":
            # The signer holds it in a 65-byte array: real values only.
            value = rng.choice([
                "UNSIGNED-PAYLOAD", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
                "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "",
                hashlib.sha256(rand_str(rng, B64, 0, 9).encode()).hexdigest(),
                " " + "UNSIGNED-PAYLOAD" + "\t"])
        else:
            value = gen_value(rng)
        headers.append((name, value))
    if rng.random() < 0.1:
        headers.append(("Host", rng.choice(HOSTS)))  # a repeated Host
    rng.shuffle(headers)
    return headers


def gen_payload(rng):
    r = rng.random()
    if r < 0.3:
        return b""
    if r < 0.6:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 2000)))
    doc = {"StreamName": rand_str(rng, B64, 1, 40),
           "Limit": rng.randint(1, 10000),
           "Data": rand_str(rng, B64, 0, 500)}
    return json.dumps(doc).encode()


def gen_request(rng, rid):
    token = None
    r = rng.random()
    if r < 0.4:
        token = rand_str(rng, B64 + "=", 16, 1200)
    elif r < 0.45:
        token = ""
    ak = ("ASIA" if token else "AKIA") + rand_str(
        rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16, 16)
    sk = rand_str(rng, B64, 40, 40) if rng.random() < 0.9 else \
        rand_str(rng, B64, 1, 300)
    epoch = (rng.choice(NOTABLE_TIMES) if rng.random() < 0.2
             else rng.randint(0, 4102444800))
    query, params, url_query = gen_query(rng)
    payload = gen_payload(rng)
    headers = gen_headers(rng, token)
    mode = rng.random()
    payload_hash = None
    unsigned = False
    if mode < 0.15:
        payload_hash = hashlib.sha256(payload).hexdigest()
    elif mode < 0.25:
        unsigned = True
    return {
        "id": rid,
        "method": rng.choice(METHODS),
        "path": gen_path(rng),
        "query": query,
        "params": params,
        "url_query": url_query,
        "headers": headers,
        "payload": payload,
        "payload_hash": payload_hash,
        "unsigned": unsigned,
        "access_key": ak,
        "secret_key": sk,
        "token": token,
        "region": rng.choice(REGIONS),
        "service": rng.choice(SERVICES),
        "epoch": epoch,
    }


class CapturingSigV4Auth(botocore.auth.SigV4Auth):
    """Keeps the intermediate strings add_auth() computes."""

    def canonical_request(self, request):
        self.last_cr = super().canonical_request(request)
        return self.last_cr

    def string_to_sign(self, request, canonical_request):
        self.last_sts = super().string_to_sign(request, canonical_request)
        return self.last_sts


def botocore_sign(req):
    # The signature takes the Host header; the URL's host only has to parse.
    url = "https://example.amazonaws.com" + req["path"]
    if req["url_query"]:
        url += "?" + req["url_query"]
    request = AWSRequest(method=req["method"], url=url, data=req["payload"],
                         params=req["params"] or {})
    for name, value in req["headers"]:
        request.headers[name] = value  # appends: repeated names are kept
    if req["unsigned"]:
        request.context["payload_signing_enabled"] = False
    creds = Credentials(req["access_key"], req["secret_key"], req["token"])
    auth = CapturingSigV4Auth(creds, req["service"], req["region"])
    now = datetime.datetime.fromtimestamp(
        req["epoch"], datetime.timezone.utc).replace(tzinfo=None)
    with mock.patch("botocore.auth.get_current_datetime", return_value=now):
        auth.add_auth(request)
    return {
        "canonical_request": auth.last_cr,
        "string_to_sign": auth.last_sts,
        "authorization": request.headers["Authorization"],
        "amz_date": request.headers["X-Amz-Date"],
        # As botocore picks it (a header value may hold a newline, so it
        # cannot be cut from the canonical request).
        "payload_hash": (request.headers["X-Amz-Content-SHA256"]
                         if "X-Amz-Content-SHA256" in request.headers
                         else auth.payload(request)),
    }


def tool_input(req):
    headers = req["headers"]
    if req["unsigned"]:
        # What botocore does for an unsigned payload: one signed
        # X-Amz-Content-SHA256 header saying so.
        headers = [(n, v) for n, v in headers
                   if n.lower() != "x-amz-content-sha256"]
        headers.append(("X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD"))
    return {
        "id": req["id"],
        "method": req["method"],
        "path": req["path"],
        "query": req["query"],
        "headers": [list(h) for h in headers],
        "payload_hex": req["payload"].hex(),
        "payload_hash": req["payload_hash"],
        "access_key": req["access_key"],
        "secret_key": req["secret_key"],
        "token": req["token"],
        "region": req["region"],
        "service": req["service"],
        "epoch": req["epoch"],
    }


def find_tool():
    tool = os.environ.get("SIGV4_TOOL")
    if not tool:
        build = os.environ.get("KN_BUILD_DIR", "build")
        tool = os.path.join(build, "tests", "tools", "sigv4_tool")
    if not os.access(tool, os.X_OK):
        sys.exit(f"FAIL: sigv4_tool not found at {tool!r} (set SIGV4_TOOL)")
    return tool


def run_tool(tool, requests):
    lines = "".join(json.dumps(tool_input(r), ensure_ascii=False) + "\n"
                    for r in requests)
    proc = runkit.run([tool], input=lines.encode("utf-8"), text=False, timeout=300)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr.decode("utf-8", "replace"))
        sys.exit(f"FAIL: sigv4_tool exited with {proc.returncode}")
    results = {}
    for line in proc.stdout.decode("utf-8").splitlines():
        obj = json.loads(line)
        results[obj["id"]] = obj
    return results


def report_mismatch(req, want, got):
    shown = dict(tool_input(req))
    if len(shown["payload_hex"]) > 80:
        shown["payload_hex"] = shown["payload_hex"][:80] + "..."
    print("MISMATCH for request:", file=sys.stderr)
    print(json.dumps(shown, ensure_ascii=False, indent=1), file=sys.stderr)
    if got.get("rc") != 0:
        print(f"libkinesis refused it (rc={got.get('rc')})", file=sys.stderr)
    for key in ("canonical_request", "string_to_sign", "authorization",
                "amz_date", "payload_hash"):
        if got.get(key) != want[key]:
            print(f"--- {key}: botocore", file=sys.stderr)
            print(repr(want[key]), file=sys.stderr)
            print(f"--- {key}: libkinesis", file=sys.stderr)
            print(repr(got.get(key)), file=sys.stderr)
    print("=== canonical request, botocore:", file=sys.stderr)
    print(want["canonical_request"], file=sys.stderr)
    print("=== canonical request, libkinesis:", file=sys.stderr)
    print(got.get("canonical_request"), file=sys.stderr)


def main():
    tool = find_tool()
    if os.environ.get("SIGV4_SEED"):
        plan = [(int(os.environ["SIGV4_SEED"]),
                 int(os.environ.get("SIGV4_COUNT", FIXED_COUNT)))]
    else:
        plan = [(FIXED_SEED, FIXED_COUNT)] + [
            (seed, RANDOM_COUNT) for seed in MORE_SEEDS] + [
            (int.from_bytes(os.urandom(4), "big"), RANDOM_COUNT)
            for _ in range(int(os.environ.get("SIGV4_RANDOM_SEEDS", "0")))]
    print("botocore", botocore.__version__, "seeds:",
          ", ".join(f"{s} x{n}" for s, n in plan))

    requests = []
    for seed, count in plan:
        rng = random.Random(seed)
        for _ in range(count):
            req = gen_request(rng, len(requests))
            req["seed"] = seed
            requests.append(req)
    results = run_tool(tool, requests)

    passed = 0
    for req in requests:
        want = botocore_sign(req)
        got = results.get(req["id"], {})
        same = got.get("rc") == 0 and all(
            got.get(k) == want[k] for k in want)
        if not same:
            report_mismatch(req, want, got)
            print(f"request {req['id']} of seed {req['seed']} "
                  "(replay with SIGV4_SEED)", file=sys.stderr)
            print(f"{passed} passed, 1 failed")
            return 1
        passed += 1
    print(f"{passed} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
