#!/usr/bin/env python3
"""A TLS front for a plain-HTTP lab endpoint (the fault proxy, kinesalite,
dynalite), for clients that speak only HTTPS: the KPL's native daemon has a
host and a port but no scheme.  It terminates TLS with a self-signed
certificate for 127.0.0.1 and localhost, made at start with Debian's
openssl, and relays the bytes both ways to the target unchanged.  Clients
turn certificate checks off, or trust `cert_path`.

    from tlsfront import TlsFront
    with FaultProxy(k, limits=limits) as proxy, TlsFront(proxy.endpoint) as tls:
        tls.endpoint        # "https://127.0.0.1:PORT"

Shell: python3 tests/lab/tlsfront.py --target URL [--port N] prints
ENDPOINT=https://127.0.0.1:PORT and serves until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import ssl
import subprocess
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlparse


def _target_of(target) -> tuple[str, int]:
    url = target if isinstance(target, str) else target.endpoint
    u = urlparse(url)
    if u.scheme != "http" or not u.port:
        raise ValueError(f"tlsfront: a plain http://HOST:PORT target, not {url!r}")
    return u.hostname, u.port


class TlsFront:
    def __init__(self, target, *, port: int = 0):
        self.host, self.target_port = _target_of(target)
        self.port = port
        self._dir: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server = None

    @property
    def endpoint(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def cert_path(self) -> str:
        return str(Path(self._dir) / "cert.pem")

    def _make_cert(self):
        self._dir = tempfile.mkdtemp(prefix="kn-tlsfront-")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-subj", "/CN=localhost", "-addext",
             "subjectAltName=IP:127.0.0.1,DNS:localhost",
             "-keyout", str(Path(self._dir) / "key.pem"), "-out", self.cert_path],
            check=True, capture_output=True)

    async def _pipe(self, reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError, OSError):
            pass
        finally:
            try:
                writer.close()
            except (ConnectionError, ssl.SSLError, OSError):
                pass

    async def _client(self, creader, cwriter):
        try:
            treader, twriter = await asyncio.open_connection(self.host, self.target_port)
        except OSError:
            cwriter.close()
            return
        try:
            await asyncio.gather(self._pipe(creader, twriter), self._pipe(treader, cwriter))
        except asyncio.CancelledError:
            # stopping: the connections go with the loop
            twriter.close()
            cwriter.close()

    def start(self) -> "TlsFront":
        self._make_cert()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert_path, str(Path(self._dir) / "key.pem"))
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def serve():
            self._server = await asyncio.start_server(
                self._client, "127.0.0.1", self.port, ssl=ctx)
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()

        def run():
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="tlsfront", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("tlsfront: did not start listening")
        return self

    def stop(self):
        if self._loop and self._thread:
            async def close():
                if self._server:
                    self._server.close()
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                self._loop.stop()
            asyncio.run_coroutine_threadsafe(close(), self._loop)
            self._thread.join(5)
            self._loop.close()
            self._loop = self._thread = None
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    with TlsFront(a.target, port=a.port) as t:
        print(f"ENDPOINT={t.endpoint}", flush=True)
        done.wait()


if __name__ == "__main__":
    main()
