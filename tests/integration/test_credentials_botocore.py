#!/usr/bin/env python3
"""The credentials chain next to botocore's: each fixture (shared config and
credentials files, environment, SSO token cache) is resolved by
tests/tools/creds_tool and by botocore (boto3 of this Python) against the
same loopback responders, which follow the AWS API references:

- STS (Query protocol, form bodies, XML answers): AssumeRole, whose
  SigV4 signature is checked with botocore's own signer against the
  secret of the key it names, and AssumeRoleWithWebIdentity (unsigned);
- IAM Identity Center: SSO GetRoleCredentials (GET
  /federation/credentials, x-amz-sso_bearer_token) and SSO-OIDC
  CreateToken (POST /token, refresh_token grant);
- IMDSv2 and the container endpoint.

The credentials a responder hands out are derived from what it was asked
(role, caller key, external id, duration, token), so the same keys at both
ends mean the same path through the chain.  Every fixture must end with
the same source, key id, secret and session token on both sides, or with
an error on both.  Secrets never appear in the tool's output (debug logs
included).  Touches nothing beyond 127.0.0.1; HOME is a temporary
directory.  Prints "N passed, M failed".
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.parse

import runkit
from credkit import Responder, iso, sha

TOOL = os.environ.get("CREDS_TOOL") or os.path.join(
    os.environ.get("KN_BUILD_DIR", "build"), "tests", "tools", "creds_tool")

# botocore's method names and creds_tool's sources
METHOD = {"env": "environment", "assume-role": "assume-role",
          "assume-role-with-web-identity": "web-identity", "sso": "sso",
          "shared-credentials-file": "profile", "config-file": "profile",
          "custom-process": "process", "container-role": "container",
          "iam-role": "imds"}


def derive(*parts):
    return hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:16].upper()


class Aws:
    """The responders, and every secret they know or handed out."""

    def __init__(self):
        self.keys = {}        # access key id -> (secret, session token)
        self.secrets = set()  # strings that must never be printed
        self.sso_tokens = set()
        self.refresh = {}     # refresh token -> (client id, client secret)
        self.container_token = "container-auth-token-Zq9"
        self.short_calls = 0
        self.sts = Responder(self.sts_handle, protocol="HTTP/1.1")
        self.sso = Responder(self.sso_handle, protocol="HTTP/1.1")
        self.oidc = Responder(self.oidc_handle, protocol="HTTP/1.1")
        self.imds = Responder(self.imds_handle, protocol="HTTP/1.1")
        self.ctr = Responder(self.ctr_handle, protocol="HTTP/1.1")
        self.secrets.add(self.container_token)

    def stop(self):
        for s in (self.sts, self.sso, self.oidc, self.imds, self.ctr):
            s.stop()

    def issue(self, prefix, *parts):
        h = derive(prefix, *parts)
        akid = prefix + h
        secret, token = "sk/%s+%s" % (h, prefix), "tok-%s-%s" % (prefix, h)
        self.keys[akid] = (secret, token)
        self.secrets.update((secret, token))
        return akid, secret, token

    def static(self, akid, secret, token=None):
        self.keys[akid] = (secret, token)
        self.secrets.add(secret)
        if token:
            self.secrets.add(token)

    # -- STS --

    def verify_sigv4(self, req):
        """The caller's key id if the request is correctly signed by it."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        h = req["headers"]
        m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/sts/aws4_request, "
                     r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$",
                     h.get("authorization", ""))
        if not m:
            return None, "no SigV4 Authorization for sts"
        akid, _date, region, signed, sig = m.groups()
        if akid not in self.keys:
            return None, "unknown key " + akid
        secret, token = self.keys[akid]
        if token and h.get("x-amz-security-token") != token:
            return None, "wrong or missing X-Amz-Security-Token"
        hdrs = {n: h[n] for n in signed.split(";") if n in h}
        if set(hdrs) != set(signed.split(";")):
            return None, "a signed header is missing"
        ar = AWSRequest(method=req["method"], url="http://127.0.0.1:%d%s" % (
            req["port"], req["path"]), data=req["body"].encode(), headers=hdrs)
        ar.context["timestamp"] = h["x-amz-date"]
        signer = SigV4Auth(Credentials(akid, secret, token), "sts", region)
        want = signer.signature(signer.string_to_sign(ar, signer.canonical_request(ar)), ar)
        return (akid, None) if want == sig else (None, "bad signature")

    @staticmethod
    def sts_error(code, msg, status=403):
        return status, {"Content-Type": "text/xml"}, (
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
            "<Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error>"
            "<RequestId>r-1</RequestId></ErrorResponse>" % (code, msg))

    def sts_handle(self, req):
        form = dict(urllib.parse.parse_qsl(req["body"]))
        action = form.get("Action")
        if form.get("Version") != "2011-06-15":
            return self.sts_error("InvalidAction", "version", 400)
        session = form.get("RoleSessionName", "")
        if not re.fullmatch(r"[\w+=,.@-]{2,64}", session):
            return self.sts_error("ValidationError", "session name", 400)
        # Generated session names differ between SDKs; named ones count.
        named = "" if re.match(r"(libkinesis|botocore-session)-", session) else session
        dur = int(form.get("DurationSeconds", "3600"))
        if action == "AssumeRole":
            caller, why = self.verify_sigv4(req)
            if not caller:
                return self.sts_error("SignatureDoesNotMatch", why)
            serial = ""
            if form["RoleArn"].endswith("/short"):
                # Credentials that are soon due for a refresh: new ones each time.
                self.short_calls += 1
                serial, dur = self.short_calls, 120
            akid, secret, token = self.issue("ASIAROLE", form["RoleArn"], caller,
                                             form.get("ExternalId", ""), dur, named, serial)
        elif action == "AssumeRoleWithWebIdentity":
            if "authorization" in req["headers"]:
                return self.sts_error("InvalidRequest", "signed", 400)
            akid, secret, token = self.issue("ASIAWEB", form["RoleArn"],
                                             form.get("WebIdentityToken"), named)
        else:
            return self.sts_error("InvalidAction", "action", 400)
        return 200, {"Content-Type": "text/xml"}, (
            "<{a}Response xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><{a}Result>"
            "<Credentials><AccessKeyId>{k}</AccessKeyId><SecretAccessKey>{s}</SecretAccessKey>"
            "<SessionToken>{t}</SessionToken><Expiration>{e}</Expiration></Credentials>"
            "<AssumedRoleUser><Arn>x</Arn><AssumedRoleId>y</AssumedRoleId></AssumedRoleUser>"
            "</{a}Result><ResponseMetadata><RequestId>r-2</RequestId></ResponseMetadata>"
            "</{a}Response>").format(a=action, k=akid, s=secret, t=token, e=iso(dur))

    # -- IAM Identity Center --

    def sso_handle(self, req):
        u = urllib.parse.urlsplit(req["path"])
        q = dict(urllib.parse.parse_qsl(u.query))
        tok = req["headers"].get("x-amz-sso_bearer_token")
        if req["method"] != "GET" or u.path != "/federation/credentials":
            return 404, {}, "{}"
        if tok not in self.sso_tokens:
            return 401, {"x-amzn-ErrorType": "UnauthorizedException",
                         "Content-Type": "application/json"}, json.dumps(
                {"message": "Session token not found or invalid"})
        akid, secret, token = self.issue("ASIASSO", tok, q.get("account_id"),
                                         q.get("role_name"))
        return 200, {"Content-Type": "application/json"}, json.dumps({"roleCredentials": {
            "accessKeyId": akid, "secretAccessKey": secret, "sessionToken": token,
            "expiration": int(time.time() + 3600) * 1000}})

    def oidc_handle(self, req):
        if req["method"] != "POST" or req["path"] != "/token":
            return 404, {}, "{}"
        b = json.loads(req["body"] or "{}")
        client = self.refresh.get(b.get("refreshToken"))
        if b.get("grantType") != "refresh_token" or client != (
                b.get("clientId"), b.get("clientSecret")):
            return 400, {"Content-Type": "application/json"}, json.dumps(
                {"error": "invalid_grant", "error_description": "bad refresh token"})
        at = "at-" + derive("refresh", b["refreshToken"])
        rt = "rt-" + derive("next", b["refreshToken"])
        self.sso_tokens.add(at)
        self.secrets.update((at, rt))
        return 200, {"Content-Type": "application/json"}, json.dumps(
            {"accessToken": at, "tokenType": "Bearer", "expiresIn": 3600, "refreshToken": rt})

    # -- IMDSv2 and the container endpoint --

    def imds_handle(self, req):
        h = req["headers"]
        if req["method"] == "PUT" and req["path"] == "/latest/api/token":
            self.secrets.add("imds-session-Tk1")
            return 200, {"X-aws-ec2-metadata-token-ttl-seconds":
                         h.get("x-aws-ec2-metadata-token-ttl-seconds", "21600")}, "imds-session-Tk1"
        if h.get("x-aws-ec2-metadata-token") != "imds-session-Tk1":
            return 401, {}, ""
        base = "/latest/meta-data/iam/security-credentials/"
        if req["path"] in (base, base.rstrip("/")):
            return 200, {}, "ec2-role"
        if req["path"] == base + "ec2-role":
            self.static("ASIAIMDSROLE", "imds/secret", "imds-token-1")
            return 200, {}, json.dumps({
                "Code": "Success", "LastUpdated": iso(0), "Type": "AWS-HMAC",
                "AccessKeyId": "ASIAIMDSROLE", "SecretAccessKey": "imds/secret",
                "Token": "imds-token-1", "Expiration": iso(3600)})
        return 404, {}, ""

    def ctr_handle(self, req):
        if req["headers"].get("authorization") != self.container_token:
            return 401, {}, "no"
        self.static("ASIACONTAINER", "ctr/secret", "ctr-token-1")
        return 200, {"Content-Type": "application/json"}, json.dumps({
            "AccessKeyId": "ASIACONTAINER", "SecretAccessKey": "ctr/secret",
            "Token": "ctr-token-1", "Expiration": iso(3600)})


BOTOCORE = r"""
import hashlib, json, sys
import boto3
sha = lambda s: hashlib.sha256(s.encode()).hexdigest()
try:
    s = boto3.Session(profile_name=sys.argv[1]) if len(sys.argv) > 1 else boto3.Session()
    c = s.get_credentials()
    if c is None:
        print(json.dumps({"error": "no credentials"}))
        sys.exit(0)
    f = c.get_frozen_credentials()
    print(json.dumps({"source": c.method, "akid": f.access_key,
                      "secret_sha256": sha(f.secret_key),
                      "token_sha256": sha(f.token) if f.token else "none"}))
except Exception as e:
    print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
"""


class Fixture:
    def __init__(self, name, config="", credentials="", env=None, profile=None,
                 cache=None, want=None, want_error=None, imds=False):
        self.name = name
        self.config = config
        self.credentials = credentials
        self.env = env or {}
        self.profile = profile      # the profile property / Session(profile_name)
        self.cache = cache or {}    # cache key -> token document
        self.want = want            # the source both must report
        self.want_error = want_error  # a piece of our message when both fail
        self.imds = imds


class Run:
    def __init__(self, aws):
        self.aws = aws
        self.dir = tempfile.mkdtemp(prefix="kn-creds-boto-")

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def setup(self, fx):
        """Writes the fixture's files afresh (a refresh rewrites the cache)."""
        aws_dir = os.path.join(self.dir, ".aws")
        shutil.rmtree(aws_dir, ignore_errors=True)
        os.makedirs(os.path.join(aws_dir, "sso", "cache"))
        for name, text in (("config", fx.config), ("credentials", fx.credentials)):
            with open(os.path.join(aws_dir, name), "w") as f:
                f.write(text.replace("@DIR@", self.dir))
        for key, doc in fx.cache.items():
            path = os.path.join(aws_dir, "sso", "cache",
                                hashlib.sha1(key.encode()).hexdigest() + ".json")
            with open(path, "w") as f:
                json.dump(doc, f)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.dir,
               "AWS_CONFIG_FILE": os.path.join(aws_dir, "config"),
               "AWS_SHARED_CREDENTIALS_FILE": os.path.join(aws_dir, "credentials"),
               "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_ENDPOINT_URL_STS": self.aws.sts.url,
               "AWS_ENDPOINT_URL_SSO": self.aws.sso.url,
               "AWS_ENDPOINT_URL_SSO_OIDC": self.aws.oidc.url,
               "AWS_METADATA_SERVICE_NUM_ATTEMPTS": "1"}
        if fx.imds:
            env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = self.aws.imds.url + "/"
        else:
            env["AWS_EC2_METADATA_DISABLED"] = "true"
        for k, v in fx.env.items():
            env[k] = v.replace("@DIR@", self.dir).replace("@CTR@", self.aws.ctr.url)
        return env

    def ours(self, fx):
        env = self.setup(fx)
        args = [TOOL, "-X", "log.level=7"]
        if fx.profile:
            args += ["-X", "profile=" + fx.profile]
        p = runkit.run(args, env=env, timeout=120)
        out = p.stdout + p.stderr
        for line in p.stdout.splitlines():
            if line.startswith("get="):
                g = dict(kv.split("=", 1) for kv in line.split(" "))
                return {k: g[k] for k in ("source", "akid", "secret_sha256",
                                          "token_sha256")}, out
            if line.startswith("error="):
                return {"error": line}, out
        return {"error": "no answer: rc %d" % p.returncode}, out

    def botocore(self, fx):
        env = self.setup(fx)
        args = [sys.executable, "-c", BOTOCORE] + ([fx.profile] if fx.profile else [])
        p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return {"error": "botocore: " + p.stderr[-500:]}
        if "source" in r:
            r["source"] = METHOD.get(r["source"], r["source"])
        return r


def fixtures(aws):
    aws.static("AKIDBASE", "base/secret")
    aws.static("AKIDENV", "env/secret", "env-token")
    aws.static("AKIDDEV", "dev/secret")
    aws.static("AKIDCONF", "conf/secret")
    aws.static("AKIDPROC", "proc/secret", "proc-token")
    aws.static("AKIDSELF", "self/secret")
    env_keys = {"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "env/secret",
                "AWS_SESSION_TOKEN": "env-token"}
    proc = "credential_process = @DIR@/proc.sh --flag\n"
    base = "[base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = base/secret\n"
    chain = ("[profile top]\nrole_arn = arn:aws:iam::111122223333:role/top\n"
             "source_profile = mid\n"
             "[profile mid]\nrole_arn = arn:aws:iam::111122223333:role/mid\n"
             "source_profile = base\nexternal_id = mid-ext\n")
    # SSO: one session with a valid token, one whose token needs a
    # refresh, a legacy profile, an expired legacy token.
    aws.sso_tokens.update(("sso-valid-token-1", "sso-legacy-token-1"))
    aws.refresh["rt-cached-1"] = ("client-1", "client-secret-1")
    aws.secrets.update(("sso-valid-token-1", "sso-legacy-token-1", "rt-cached-1",
                        "client-secret-1", "sso-old-token-1"))
    start = "https://d-1234.awsapps.com/start"
    sso_cfg = ("[profile sso]\nsso_session = corp\nsso_account_id = 111122223333\n"
               "sso_role_name = Reader\n"
               "[profile ssorefresh]\nsso_session = soon\nsso_account_id = 111122223333\n"
               "sso_role_name = Reader\n"
               "[profile legacy]\nsso_start_url = %s\nsso_region = eu-west-1\n"
               "sso_account_id = 444455556666\nsso_role_name = Admin\n"
               "[sso-session corp]\nsso_start_url = %s\nsso_region = eu-west-1\n"
               "sso_registration_scopes = sso:account:access\n"
               "[sso-session soon]\nsso_start_url = %s/soon\nsso_region = eu-west-1\n"
               % (start, start, start))
    valid = {"accessToken": "sso-valid-token-1", "expiresAt": iso(7200),
             "startUrl": start, "region": "eu-west-1"}
    soon = {"accessToken": "sso-old-token-1", "expiresAt": iso(300),
            "refreshToken": "rt-cached-1", "clientId": "client-1",
            "clientSecret": "client-secret-1", "registrationExpiresAt": iso(86400),
            "startUrl": start + "/soon", "region": "eu-west-1"}
    legacy = {"accessToken": "sso-legacy-token-1", "expiresAt": iso(7200),
              "startUrl": start, "region": "eu-west-1"}
    tokfile = "@DIR@/web-token"
    return [
        Fixture("environment over a role profile", config=chain, credentials=base,
                env=dict(env_keys, AWS_PROFILE="top"), want="environment"),
        Fixture("AWS_PROFILE picks the profile", credentials=base +
                "[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = dev/secret\n",
                env={"AWS_PROFILE": "dev"}, want="profile"),
        Fixture("the profile property turns environment keys off, as --profile",
                credentials=base + "[dev]\naws_access_key_id = AKIDDEV\n"
                "aws_secret_access_key = dev/secret\n", env=env_keys, profile="dev",
                want="profile"),
        Fixture("source_profile chain of two roles", config=chain, credentials=base,
                env={"AWS_PROFILE": "top"}, want="assume-role"),
        Fixture("role_session_name, external_id, duration_seconds", credentials=base,
                config="[profile r]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = base\n"
                "role_session_name = kn-it\nexternal_id = ext-42\nduration_seconds = 1800\n",
                env={"AWS_PROFILE": "r"}, want="assume-role"),
        Fixture("a profile that is its own source", config="[profile self]\n"
                "role_arn = arn:aws:iam::1:role/self\nsource_profile = self\n"
                "aws_access_key_id = AKIDSELF\naws_secret_access_key = self/secret\n",
                env={"AWS_PROFILE": "self"}, want="assume-role"),
        Fixture("credential_process beside role_arn: the role wins, its source "
                "runs the process", config="[profile p]\nrole_arn = arn:aws:iam::1:role/p\n"
                "source_profile = procsrc\n" + proc + "[profile procsrc]\n" + proc,
                env={"AWS_PROFILE": "p"}, want="assume-role"),
        Fixture("credential_source Environment", config="[profile ce]\n"
                "role_arn = arn:aws:iam::1:role/ce\ncredential_source = Environment\n",
                env=env_keys, profile="ce", want="assume-role"),
        Fixture("credential_source Ec2InstanceMetadata", config="[profile ci]\n"
                "role_arn = arn:aws:iam::1:role/ci\ncredential_source = Ec2InstanceMetadata\n",
                env={"AWS_PROFILE": "ci"}, imds=True, want="assume-role"),
        Fixture("credential_source EcsContainer with a token file", config="[profile cc]\n"
                "role_arn = arn:aws:iam::1:role/cc\ncredential_source = EcsContainer\n",
                env={"AWS_PROFILE": "cc", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "@CTR@/creds",
                     "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "@DIR@/ctr-token"},
                want="assume-role"),
        Fixture("web_identity_token_file in the profile beats its source_profile",
                config="[profile w]\nrole_arn = arn:aws:iam::1:role/w\n"
                "web_identity_token_file = %s\nsource_profile = base\n" % tokfile,
                credentials=base, env={"AWS_PROFILE": "w"}, want="web-identity"),
        Fixture("web identity from the environment with the profile's role",
                config="[default]\nrole_arn = arn:aws:iam::1:role/wenv\n"
                "web_identity_token_file = %s\n" % tokfile,
                env={"AWS_WEB_IDENTITY_TOKEN_FILE": tokfile,
                     "AWS_ROLE_ARN": "arn:aws:iam::1:role/from-env"}, want="web-identity"),
        Fixture("SSO session", config=sso_cfg, env={"AWS_PROFILE": "sso"},
                cache={"corp": valid}, want="sso"),
        Fixture("SSO session token refreshed through SSO-OIDC", config=sso_cfg,
                env={"AWS_PROFILE": "ssorefresh"}, cache={"soon": soon}, want="sso"),
        Fixture("legacy SSO profile", config=sso_cfg, env={"AWS_PROFILE": "legacy"},
                cache={start: legacy}, want="sso"),
        Fixture("SSO profile as a role's source", config=sso_cfg +
                "[profile viasso]\nrole_arn = arn:aws:iam::1:role/v\nsource_profile = sso\n",
                env={"AWS_PROFILE": "viasso"}, cache={"corp": valid}, want="assume-role"),
        Fixture("legacy SSO token expired", config=sso_cfg, env={"AWS_PROFILE": "legacy"},
                cache={start: dict(legacy, expiresAt=iso(-60))},
                want_error="run `aws sso login --profile legacy`"),
        Fixture("SSO token not cached", config=sso_cfg, env={"AWS_PROFILE": "sso"},
                want_error="run `aws sso login --sso-session corp`"),
        Fixture("credentials-file keys before credential_process", config="[default]\n" + proc,
                credentials="[default]\naws_access_key_id = AKIDBASE\n"
                "aws_secret_access_key = base/secret\n", want="profile"),
        Fixture("credential_process before config-file keys", config="[default]\n" + proc +
                "aws_access_key_id = AKIDCONF\naws_secret_access_key = conf/secret\n",
                want="process"),
        Fixture("source_profile loop", config="[profile a]\nrole_arn = arn:aws:iam::1:role/a\n"
                "source_profile = b\n[profile b]\nrole_arn = arn:aws:iam::1:role/b\n"
                "source_profile = a\n", env={"AWS_PROFILE": "a"},
                want_error="source_profile makes a loop: a -> b -> a"),
        Fixture("container endpoint", env={
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": "@CTR@/creds",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "@DIR@/ctr-token"}, want="container"),
        Fixture("instance metadata", imds=True, want="imds"),
    ]


def ours_only(aws, run):
    """What botocore cannot be asked: refreshes over time, and the token
    cache a refresh rewrites."""
    # Role credentials near expiry are refreshed through the whole chain
    # (source profile, then AssumeRole) while the cached ones are used.
    fx = Fixture("refresh", credentials="[base]\naws_access_key_id = AKIDBASE\n"
                 "aws_secret_access_key = base/secret\n",
                 config="[profile short]\nrole_arn = arn:aws:iam::1:role/short\n"
                 "source_profile = base\n", env={"AWS_PROFILE": "short"})
    env = run.setup(fx)
    p = runkit.run([TOOL, "--gets", "4", "--interval-ms", "1200"], env=env, timeout=120)
    ids = [dict(kv.split("=", 1) for kv in line.split(" "))["akid"]
           for line in p.stdout.splitlines() if line.startswith("get=")]
    if len(ids) != 4 or ids[0] != ids[1] or len(set(ids)) < 2 or aws.short_calls < 2:
        raise AssertionError("role refresh: %s, %d AssumeRole calls\n%s" % (
            ids, aws.short_calls, p.stdout + p.stderr))
    leaked = [x for x in aws.secrets if x in p.stdout + p.stderr]
    if leaked:
        raise AssertionError("secrets in the output: %s" % leaked)
    # The refreshed SSO token is written back for the next run (and the
    # AWS CLI), readable by the owner only.
    fx = [f for f in fixtures(aws) if f.name.startswith("SSO session token refreshed")][0]
    ours, out = run.ours(fx)
    path = os.path.join(run.dir, ".aws", "sso", "cache",
                        hashlib.sha1(b"soon").hexdigest() + ".json")
    doc = json.load(open(path))
    if (doc["accessToken"] not in aws.sso_tokens or doc["accessToken"] == "sso-old-token-1"
            or doc["refreshToken"] == "rt-cached-1" or doc["clientSecret"] != "client-secret-1"
            or os.stat(path).st_mode & 0o077):
        raise AssertionError("cache after refresh: %s" % {k: v for k, v in doc.items()
                                                          if "ecret" not in k})
    aws.refresh[doc["refreshToken"]] = ("client-1", "client-secret-1")


def main():
    if not os.access(TOOL, os.X_OK):
        print("creds_tool not found at %s (set CREDS_TOOL or KN_BUILD_DIR)" % TOOL)
        print("0 passed, 1 failed")
        return 1
    try:
        import boto3  # noqa: F401
    except ImportError:
        print("boto3 is not installed for %s" % sys.executable)
        print("0 passed, 1 failed")
        return 1
    aws = Aws()
    run = Run(aws)
    passed = failed = 0
    try:
        for fx in fixtures(aws):
            try:
                # Files the fixtures point at, written afresh each time.
                # (botocore sends both tokens as they are, new line included)
                with open(os.path.join(run.dir, "web-token"), "w") as f:
                    f.write("eyJ-web-identity-token")
                with open(os.path.join(run.dir, "ctr-token"), "w") as f:
                    f.write(aws.container_token)
                script = os.path.join(run.dir, "proc.sh")
                with open(script, "w") as f:
                    f.write("#!/bin/sh\n[ \"$1\" = --flag ] || exit 3\nprintf '%s'\n" % json.dumps({
                        "Version": 1, "AccessKeyId": "AKIDPROC",
                        "SecretAccessKey": "proc/secret", "SessionToken": "proc-token",
                        "Expiration": iso(3600)}))
                os.chmod(script, 0o755)
                aws.secrets.add("eyJ-web-identity-token")
                ours, out = run.ours(fx)
                theirs = run.botocore(fx)
                if fx.want_error:
                    if "error" not in ours or "error" not in theirs:
                        raise AssertionError("want errors: ours %s, botocore %s" % (ours, theirs))
                    if fx.want_error not in ours["error"]:
                        raise AssertionError("ours: %s" % ours["error"])
                else:
                    if ours != theirs:
                        raise AssertionError("ours %s\n    botocore %s" % (ours, theirs))
                    if ours.get("source") != fx.want:
                        raise AssertionError("source %s, want %s" % (ours.get("source"), fx.want))
                leaked = [s for s in aws.secrets if s in out]
                if leaked:
                    raise AssertionError("secrets in the output: %s" % leaked)
                passed += 1
                print("ok   %s: %s" % (fx.name, ours.get("source") or ours.get("error")))
            except Exception as e:
                failed += 1
                print("FAIL %s: %s" % (fx.name, e))
                if not isinstance(e, AssertionError):
                    traceback.print_exc()
            sys.stdout.flush()
        try:
            ours_only(aws, run)
            passed += 1
            print("ok   refreshes and the token cache")
        except Exception as e:
            failed += 1
            print("FAIL refreshes and the token cache: %s" % e)
            if not isinstance(e, AssertionError):
                traceback.print_exc()
    finally:
        run.close()
        aws.stop()
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
