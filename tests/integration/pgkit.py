"""A throwaway PostgreSQL server for the tests: Debian's server binaries
(package postgresql), a cluster made by initdb in a temporary directory,
listening on a free loopback port with trust authentication.

PostgreSQL refuses to run as root; run as root (as CI is), initdb and the
server run as the `postgres` user the package creates, through setpriv
(which execs, so the server's pid is the child's and signals reach it),
and the directory is given to that user.

    pg = pgkit.Postgres(tmpdir).start()
    pg.conninfo                      # for libpq
    pg.query("SELECT 1")             # rows as lists of strings (psql -At)
    pg.stop()
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))
import lab  # noqa: E402


def bindir() -> str:
    """Where initdb, postgres and pg_ctl are (they are not on PATH)."""
    try:
        d = subprocess.run(["pg_config", "--bindir"], capture_output=True,
                           text=True, check=True).stdout.strip()
        if os.path.exists(os.path.join(d, "postgres")):
            return d
    except (OSError, subprocess.CalledProcessError):
        pass
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if not found:
        raise RuntimeError("no PostgreSQL server: scripts/install-deps.sh installs it")
    return os.path.dirname(found[-1])


class Postgres:
    def __init__(self, parent: str):
        self.dir = os.path.join(parent, "pg")
        self.data = os.path.join(self.dir, "data")
        self.port = lab.free_port()
        self.bin = bindir()
        self.proc = None
        self.conninfo = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def _as_owner(self, argv):
        if os.geteuid() != 0:
            return argv
        return ["setpriv", "--reuid=postgres", "--regid=postgres",
                "--init-groups", "--"] + argv

    def start(self) -> "Postgres":
        os.makedirs(self.dir)
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            # The temporary parent is root's 0700: the server must reach
            # its directory.
            os.chmod(os.path.dirname(self.dir), 0o755)
        subprocess.run(self._as_owner([
            os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "postgres",
            "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"]),
            check=True, capture_output=True)
        # fsync off: the test kills clients, never the server or the host.
        self.log = open(os.path.join(self.dir, "log"), "wb")
        self.proc = subprocess.Popen(self._as_owner([
            os.path.join(self.bin, "postgres"), "-D", self.data,
            "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
            "-k", self.dir, "-c", "fsync=off", "-c", "max_connections=50"]),
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("postgres exited: " + Path(self.dir, "log").read_text())
            ok = subprocess.run([os.path.join(self.bin, "pg_isready"), "-q", "-h",
                                 "127.0.0.1", "-p", str(self.port)])
            if ok.returncode == 0:
                return self
            if time.monotonic() > deadline:
                raise RuntimeError("postgres did not start")
            time.sleep(0.1)  # why: polling the server's readiness

    def query(self, sql: str) -> list[list[str]]:
        p = subprocess.run(["psql", "-X", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                            "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                            "-d", "postgres", "-c", sql],
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {p.stderr}")
        return [line.split("\t") for line in p.stdout.splitlines()]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
