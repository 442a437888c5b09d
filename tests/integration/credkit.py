"""What the credential tests share: times and digests as the services
write them, and a loopback HTTP responder that records every request."""

import datetime
import hashlib
import http.server
import threading
import traceback


def iso(seconds_from_now):
    """UTC time seconds from now, as credential documents write it."""
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
        seconds=seconds_from_now)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def sha(s):
    return hashlib.sha256(s.encode()).hexdigest()


class Responder:
    """A threaded HTTP server on a free loopback port.  handle(req) returns
    (status, headers dict, body str); every request is recorded as a dict
    of method, path, headers (lower-case names), body and port.
    protocol: the HTTP version it answers with ("HTTP/1.1" keeps
    connections open)."""

    def __init__(self, handle, protocol="HTTP/1.0"):
        outer = self
        self.handle = handle
        self.requests = []
        self.lock = threading.Lock()

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = protocol

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                req = {"method": self.command, "path": self.path,
                       "headers": {k.lower(): v for k, v in self.headers.items()},
                       "body": body, "port": outer.port}
                with outer.lock:
                    outer.requests.append(req)
                try:
                    status, headers, text = outer.handle(req)
                except Exception:
                    traceback.print_exc()
                    status, headers, text = 500, {}, "responder failed"
                data = text.encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = _any

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def count(self, method=None, path_prefix=""):
        with self.lock:
            return sum(1 for r in self.requests
                       if (method is None or r["method"] == method)
                       and r["path"].startswith(path_prefix))

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
