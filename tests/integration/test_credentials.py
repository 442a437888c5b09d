#!/usr/bin/env python3
"""Credential providers against loopback responders: STS
AssumeRoleWithWebIdentity, the container endpoint and IMDSv2, plus expiry
and refresh.  Drives tests/tools/creds_tool (CREDS_TOOL, or found under
KN_BUILD_DIR).  Touches nothing beyond 127.0.0.1 and never reads the real
~/.aws: HOME and the AWS_* file variables point at a temporary directory.
Exits 0 when every case passes and prints "N passed, M failed"."""

import datetime
import json
import os
import shutil
import socket
import sys
import tempfile
import traceback
import urllib.parse

import runkit
from credkit import Responder, iso, sha

TOOL = os.environ.get("CREDS_TOOL") or os.path.join(
    os.environ.get("KN_BUILD_DIR", "build"), "tests", "tools", "creds_tool")


class Lab:
    """A private HOME and a clean environment for each case."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="kn-creds-it-")
        os.makedirs(os.path.join(self.dir, ".aws"))

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def env(self, **extra):
        e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
             "HOME": self.dir,
             "AWS_CONFIG_FILE": self.path(".aws/config"),
             "AWS_SHARED_CREDENTIALS_FILE": self.path(".aws/credentials"),
             "AWS_REGION": "us-east-1",
             "AWS_EC2_METADATA_DISABLED": "true"}
        for k, v in extra.items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        return e

    def run(self, env, *args):
        p = runkit.run([TOOL, *args], env=env, timeout=60)
        gets, error = [], None
        for line in p.stdout.splitlines():
            if line.startswith("get="):
                gets.append(dict(kv.split("=", 1) for kv in line.split(" ")))
            elif line.startswith("error="):
                error = line
        return p.returncode, gets, error, p.stdout + p.stderr

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


# --- STS ---------------------------------------------------------------

def sts_handler(state):
    def handle(req):
        form = dict(urllib.parse.parse_qsl(req["body"]))
        state["forms"].append(form)
        if state.get("fail"):
            code, status = state["fail"]
            return status, {"Content-Type": "text/xml", "x-amzn-RequestId": "req-err-1"}, (
                "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
                "<Error><Type>Sender</Type><Code>%s</Code><Message>no &amp; never</Message>"
                "</Error><RequestId>req-err-1</RequestId></ErrorResponse>" % code)
        if (form.get("Action") != "AssumeRoleWithWebIdentity" or
                form.get("Version") != "2011-06-15" or
                form.get("WebIdentityToken") != state["token"]):
            return 400, {}, "<ErrorResponse><Error><Code>Bad</Code></Error></ErrorResponse>"
        n = len(state["forms"])
        secret = "sts/secret+%d" % n
        return 200, {"Content-Type": "text/xml"}, (
            "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
            "<AssumeRoleWithWebIdentityResult>"
            "<SubjectFromWebIdentityToken>sub</SubjectFromWebIdentityToken>"
            "<Credentials><SessionToken>sts-token-%d&amp;x</SessionToken>"
            "<SecretAccessKey>%s</SecretAccessKey>"
            "<Expiration>%s</Expiration><AccessKeyId>ASIASTS%d</AccessKeyId></Credentials>"
            "</AssumeRoleWithWebIdentityResult>"
            "<ResponseMetadata><RequestId>req-%d</RequestId></ResponseMetadata>"
            "</AssumeRoleWithWebIdentityResponse>" % (n, secret, iso(state["ttl"]), n, n))
    return handle


def case_sts_env(lab):
    state = {"forms": [], "token": "eyJ.token.value", "ttl": 3600}
    r = Responder(sts_handler(state))
    try:
        tok = lab.write("token", state["token"] + "\n")
        env = lab.env(AWS_WEB_IDENTITY_TOKEN_FILE=tok,
                      AWS_ROLE_ARN="arn:aws:iam::123456789012:role/web",
                      AWS_ROLE_SESSION_NAME="it-session",
                      AWS_ENDPOINT_URL_STS=r.url)
        rc, gets, err, out = lab.run(env, "--gets", "2")
        check(rc == 0 and len(gets) == 2, out)
        g = gets[0]
        check(g["source"] == "web-identity", out)
        check(g["akid"] == "ASIASTS1" and gets[1]["akid"] == "ASIASTS1", out)
        check(g["secret_sha256"] == sha("sts/secret+1"), out)
        check(g["token_sha256"] == sha("sts-token-1&x"), out)
        check(int(g["expires"]) > 0, out)
        check(len(state["forms"]) == 1, "cached: one STS call, got %d" % len(state["forms"]))
        f = state["forms"][0]
        check(f["RoleArn"] == "arn:aws:iam::123456789012:role/web", f)
        check(f["RoleSessionName"] == "it-session", f)
        req = r.requests[0]
        check(req["method"] == "POST", req)
        check(req["headers"]["content-type"].startswith("application/x-www-form-urlencoded"), req)
        check(req["headers"]["user-agent"].startswith("libkinesis/"), req)
        check("authorization" not in req["headers"], "the call is unsigned")
        check(state["token"] not in out, "the token is never printed")
    finally:
        r.stop()


def case_sts_generated_session_and_profile(lab):
    state = {"forms": [], "token": "profile-token", "ttl": 3600}
    r = Responder(sts_handler(state))
    try:
        tok = lab.write("ptoken", state["token"])
        lab.write(".aws/config",
                  "[profile wi]\nrole_arn = arn:aws:iam::1:role/p\n"
                  "web_identity_token_file = %s\n"
                  "[services local]\nsts =\n  endpoint_url = %s\n" % (tok, r.url))
        with open(lab.path(".aws/config"), "a") as f:
            f.write("[profile wi2]\nrole_arn = arn:aws:iam::1:role/p\n"
                    "web_identity_token_file = %s\nservices = local\n" % tok)
        env = lab.env(AWS_PROFILE="wi2")
        rc, gets, err, out = lab.run(env)
        check(rc == 0 and gets and gets[0]["source"] == "web-identity", out)
        check(state["forms"][0]["RoleSessionName"].startswith("libkinesis-"), state["forms"])
    finally:
        r.stop()


def case_sts_errors(lab):
    state = {"forms": [], "token": "t", "ttl": 3600, "fail": ("AccessDenied", 403)}
    r = Responder(sts_handler(state))
    try:
        tok = lab.write("token", "t")
        env = lab.env(AWS_WEB_IDENTITY_TOKEN_FILE=tok, AWS_ROLE_ARN="arn:aws:iam::1:role/x",
                      AWS_ENDPOINT_URL_STS=r.url)
        rc, gets, err, out = lab.run(env)
        check(rc == 1 and err, out)
        check("AccessDenied: no & never (HTTP 403, request id req-err-1)" in err, err)
        check(len(state["forms"]) == 1, "AccessDenied is not retried")
        # An identity provider hiccup is retried (3 attempts in all).
        state["forms"].clear()
        state["fail"] = ("IDPCommunicationError", 400)
        rc, gets, err, out = lab.run(env)
        check(rc == 1 and "IDPCommunicationError" in err, out)
        check(len(state["forms"]) == 3, "retried: %d calls" % len(state["forms"]))
    finally:
        r.stop()


# --- container ----------------------------------------------------------

def container_handler(state):
    def handle(req):
        if req["headers"].get("authorization") != state["token"]:
            return 401, {}, '{"message":"bad token"}'
        if req["path"] != "/creds/v1":
            return 404, {}, "not found"
        n = state["n"] = state.get("n", 0) + 1
        return 200, {"Content-Type": "application/json"}, json.dumps({
            "AccessKeyId": "ASIACTR%d" % n, "SecretAccessKey": "ctr-secret-%d" % n,
            "Token": "ctr-token", "Expiration": iso(state["ttl"]),
            "RoleArn": "arn:aws:iam::1:role/task"})
    return handle


def case_container(lab):
    state = {"token": "Bearer abc123", "ttl": 3600}
    r = Responder(container_handler(state))
    try:
        env = lab.env(AWS_CONTAINER_CREDENTIALS_FULL_URI=r.url + "/creds/v1",
                      AWS_CONTAINER_AUTHORIZATION_TOKEN=state["token"])
        rc, gets, err, out = lab.run(env)
        check(rc == 0 and gets[0]["source"] == "container", out)
        check(gets[0]["akid"] == "ASIACTR1", out)
        check(gets[0]["secret_sha256"] == sha("ctr-secret-1"), out)
        check(gets[0]["token_sha256"] == sha("ctr-token"), out)
        check(state["token"] not in out, "the token is never printed")
        # The token file wins over the variable, and is re-read.
        tf = lab.write("ctoken", state["token"] + "\n")
        env["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "wrong"
        env["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = tf
        rc, gets, err, out = lab.run(env)
        check(rc == 0 and gets[0]["akid"] == "ASIACTR2", out)
        # A wrong token: the endpoint's 401 is reported.
        del env["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"]
        rc, gets, err, out = lab.run(env)
        check(rc == 1 and "HTTP 401" in err and "bad token" in err, out)
        # localhost is a loopback name too.
        env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://localhost:%d/creds/v1" % r.port
        env["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = state["token"]
        rc, gets, err, out = lab.run(env)
        check(rc == 0 and gets[0]["source"] == "container", out)
        # Environment keys come first: the endpoint is not asked.
        before = r.count()
        env["AWS_ACCESS_KEY_ID"] = "AKIAENV"
        env["AWS_SECRET_ACCESS_KEY"] = "envsecret"
        rc, gets, err, out = lab.run(env)
        check(rc == 0 and gets[0]["source"] == "environment" and r.count() == before, out)
    finally:
        r.stop()


# --- IMDSv2 -------------------------------------------------------------

class Imds:
    """IMDSv2: PUT /latest/api/token with the TTL header, then GETs with
    the token.  Modes change the behaviour for one case."""

    def __init__(self, ttl=3600, mode=""):
        self.ttl = ttl
        self.mode = mode
        self.tokens = []
        self.creds_served = 0
        self.r = Responder(self.handle)

    def handle(self, req):
        h = req["headers"]
        if req["method"] == "PUT" and req["path"] == "/latest/api/token":
            if self.mode in ("v1", "v1-disabled"):
                return 403, {}, "Forbidden"
            if self.mode == "no-token-api":
                return 404, {}, "Not Found"
            ttl = h.get("x-aws-ec2-metadata-token-ttl-seconds")
            if not ttl or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return 400, {}, "Bad Request"
            tok = "imds-token-%d" % (len(self.tokens) + 1)
            if self.mode == "ctl-token":
                tok += "\r\nX-Injected: yes"
            self.tokens.append(tok)
            return 200, {"X-aws-ec2-metadata-token-ttl-seconds": ttl}, tok
        if req["method"] != "GET":
            return 405, {}, ""
        tok = h.get("x-aws-ec2-metadata-token")
        if self.mode == "v1":
            pass  # no token needed
        elif not tok or tok not in self.tokens:
            return 401, {}, "Unauthorized"
        elif self.mode == "stale-first" and tok == self.tokens[0]:
            return 401, {}, "Unauthorized"  # the first token went stale
        base = "/latest/meta-data/iam/security-credentials/"
        if req["path"] == base:
            if self.mode == "no-role":
                return 404, {}, "Not Found"
            return 200, {}, "it-role\n"
        if req["path"] == base + "it-role":
            self.creds_served += 1
            n = self.creds_served
            return 200, {"Content-Type": "text/plain"}, json.dumps({
                "Code": "Success", "LastUpdated": iso(0), "Type": "AWS-HMAC",
                "AccessKeyId": "ASIAIMDS%d" % n, "SecretAccessKey": "imds-secret-%d" % n,
                "Token": "imds-session-%d" % n, "Expiration": iso(self.ttl)})
        return 404, {}, "Not Found"


def imds_env(lab, imds, **extra):
    return lab.env(AWS_EC2_METADATA_DISABLED=None,
                   AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.r.url + "/", **extra)


def case_imds(lab):
    imds = Imds()
    try:
        rc, gets, err, out = lab.run(imds_env(lab, imds), "--gets", "2")
        check(rc == 0 and len(gets) == 2, out)
        g = gets[0]
        check(g["source"] == "imds" and g["akid"] == "ASIAIMDS1", out)
        check(g["secret_sha256"] == sha("imds-secret-1"), out)
        check(g["token_sha256"] == sha("imds-session-1"), out)
        check(gets[1]["akid"] == "ASIAIMDS1", "cached")
        check(imds.r.count("PUT") == 1 and imds.creds_served == 1, imds.r.requests)
        put = [q for q in imds.r.requests if q["method"] == "PUT"][0]
        check(put["headers"]["x-aws-ec2-metadata-token-ttl-seconds"] == "21600", put)
        for q in imds.r.requests:
            if q["method"] == "GET":
                check(q["headers"].get("x-aws-ec2-metadata-token") == "imds-token-1", q)
    finally:
        imds.r.stop()


def case_imds_stale_token(lab):
    # The first token is refused (401): the client asks for a new one once.
    imds = Imds(mode="stale-first")
    try:
        rc, gets, err, out = lab.run(imds_env(lab, imds))
        check(rc == 0 and gets[0]["akid"] == "ASIAIMDS1", out)
        check(imds.r.count("PUT") == 2, "two token requests: %d" % imds.r.count("PUT"))
    finally:
        imds.r.stop()


def case_imds_token_required(lab):
    # The token API is missing (404) but GETs need a token: a clear 401 error.
    imds = Imds(mode="no-token-api")
    try:
        rc, gets, err, out = lab.run(imds_env(lab, imds))
        check(rc == 1 and "requires a session token (HTTP 401)" in err, out)
    finally:
        imds.r.stop()


def case_imds_v1(lab):
    imds = Imds(mode="v1")
    try:
        rc, gets, err, out = lab.run(imds_env(lab, imds))
        check(rc == 0 and gets[0]["akid"] == "ASIAIMDS1", out)
        for q in imds.r.requests:
            check("x-aws-ec2-metadata-token" not in q["headers"], q)
        # With IMDSv1 disabled the refusal is an error.
        rc, gets, err, out = lab.run(imds_env(lab, imds, AWS_EC2_METADATA_V1_DISABLED="true"))
        check(rc == 1 and "IMDSv1 is disabled" in err, out)
    finally:
        imds.r.stop()


def case_imds_no_role(lab):
    imds = Imds(mode="no-role")
    try:
        rc, gets, err, out = lab.run(imds_env(lab, imds))
        check(rc == 1 and "error=_CREDENTIALS" in err, out)
        check("no IAM role attached to the instance" in err, err)
    finally:
        imds.r.stop()


def case_imds_unreachable_is_fast(lab):
    # A closed port stands for a laptop: give up quickly with a reason.
    # The port stays bound (never listening) so nothing else can take it.
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    try:
        env = lab.env(AWS_EC2_METADATA_DISABLED=None,
                      AWS_EC2_METADATA_SERVICE_ENDPOINT="http://127.0.0.1:%d" % port)
        t0 = datetime.datetime.now()
        rc, gets, err, out = lab.run(env)
        dt = (datetime.datetime.now() - t0).total_seconds()
    finally:
        closed.close()
    check(rc == 1 and "not reachable at http://127.0.0.1:%d" % port in err, out)
    # No hang and no long retrying: a bound a loaded machine stays far below.
    check(dt < 30, "took %.1f s" % dt)


# --- expiry and refresh ---------------------------------------------------

def case_imds_token_with_control_characters(lab):
    # A token that would add header lines is refused, never sent.
    imds = Imds(mode="ctl-token")
    try:
        rc, gets, err, out = lab.run(imds_env(lab, imds))
        check(rc == 1 and err and "session token holds control characters" in err, out)
        check(imds.r.count("GET") == 0, "nothing asked with the token")
        check(not any("x-injected" in r["headers"] for r in imds.r.requests), "no injection")
    finally:
        imds.r.stop()


def case_refresh(lab):
    # Credentials expiring within the 5-minute window are fetched again in
    # the background when a get finds them there (the tool waits past the
    # 1 s minimum interval): that get has the cached ones, a later one the
    # new ones.
    imds = Imds(ttl=120)
    try:
        rc, gets, err, out = lab.run(imds_env(lab, imds), "--gets", "4",
                                     "--interval-ms", "1200")
        check(rc == 0 and len(gets) == 4, out)
        ids = [int(g["akid"][len("ASIAIMDS"):]) for g in gets]
        check(ids[:2] == [1, 1] and ids == sorted(ids) and ids[3] >= 2, out)
        check(int(gets[0]["expires"]) <= int(gets[3]["expires"]), out)
        check(imds.r.count("PUT") == 1, "the IMDS token is reused")
    finally:
        imds.r.stop()
    state = {"token": "T", "ttl": 100}
    r = Responder(container_handler(state))
    try:
        env = lab.env(AWS_CONTAINER_CREDENTIALS_FULL_URI=r.url + "/creds/v1",
                      AWS_CONTAINER_AUTHORIZATION_TOKEN="T")
        rc, gets, err, out = lab.run(env, "--gets", "4", "--interval-ms", "1200")
        ids = [g["akid"] for g in gets]
        check(rc == 0 and ids[:2] == ["ASIACTR1", "ASIACTR1"] and ids == sorted(ids)
              and ids[3] != "ASIACTR1", out)
        # Far from expiry: one fetch for many gets.
        state["ttl"] = 3600
        rc, gets, err, out = lab.run(env, "--gets", "3", "--interval-ms", "1200")
        check(rc == 0 and len({g["akid"] for g in gets}) == 1, out)
    finally:
        r.stop()


def case_refresh_failure_keeps_valid(lab):
    # The second fetch fails: the still-valid credentials are kept.
    imds = Imds(ttl=120)
    orig = imds.handle

    def flaky(req):
        if imds.creds_served >= 1 and req["path"].endswith("/it-role"):
            return 500, {}, "oops"
        return orig(req)
    imds.r.handle = flaky
    try:
        rc, gets, err, out = lab.run(imds_env(lab, imds), "--gets", "3",
                                     "--interval-ms", "1200")
        check(rc == 0 and [g["akid"] for g in gets] == ["ASIAIMDS1"] * 3, out)
        check("refreshing credentials failed" in out, out)
    finally:
        imds.r.stop()


def case_credential_process(lab):
    script = lab.write("proc.sh", "#!/bin/sh\nprintf '%s'\n" % json.dumps({
        "Version": 1, "AccessKeyId": "AKIAPROC", "SecretAccessKey": "proc-secret",
        "SessionToken": "proc-token", "Expiration": iso(3600)}))
    os.chmod(script, 0o755)
    lab.write(".aws/config", "[default]\ncredential_process = %s\n" % script)
    rc, gets, err, out = lab.run(lab.env())
    check(rc == 0 and gets[0]["source"] == "process" and gets[0]["akid"] == "AKIAPROC", out)
    check(gets[0]["secret_sha256"] == sha("proc-secret"), out)
    # A corrupt credentials file: the error names file and line.
    lab.write(".aws/credentials", "[default]\naws_access_key_id = A\n\n[x]\noops\n")
    rc, gets, err, out = lab.run(lab.env())
    check(rc == 2 and "~/.aws/credentials:5: expected \"key = value\"" in err, out)


CASES = [case_sts_env, case_sts_generated_session_and_profile, case_sts_errors,
         case_container, case_imds, case_imds_stale_token, case_imds_token_required,
         case_imds_v1, case_imds_no_role, case_imds_unreachable_is_fast,
         case_imds_token_with_control_characters, case_refresh,
         case_refresh_failure_keeps_valid, case_credential_process]


def main():
    if not os.access(TOOL, os.X_OK):
        print("creds_tool not found at %s (set CREDS_TOOL or KN_BUILD_DIR)" % TOOL)
        print("0 passed, 1 failed")
        return 1
    passed = failed = 0
    for case in CASES:
        lab = Lab()
        try:
            case(lab)
            passed += 1
            print("ok   %s" % case.__name__)
        except Exception as e:
            failed += 1
            print("FAIL %s: %s" % (case.__name__, e))
            if not isinstance(e, AssertionError):
                traceback.print_exc()
        finally:
            lab.close()
        sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
