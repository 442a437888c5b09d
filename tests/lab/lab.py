#!/usr/bin/env python3
"""Local Kinesis and DynamoDB servers for tests, on free loopback ports.

Tests talk to real server processes rather than mocks inside the test,
so the client's HTTP, signing and error handling are exercised end to end.
Three servers from tests/lab/node_modules are supported:

  kinesalite     fast Kinesis emulation (polling, split/merge)
  kinesis-local  Kinesis emulation with consumers and SubscribeToShard;
                 has a plain HTTP port and a TLS port
  dynalite       DynamoDB emulation (for lease tables)

Every server gets ports chosen when it starts, binds 127.0.0.1 only and is
stopped when the test ends, when the interpreter exits, on SIGTERM, and
even if this process is killed outright (see lifeline.js).

Usage from Python:

    import lab
    with lab.Kinesalite() as k, lab.Dynalite() as d:
        client = lab.boto3_client("kinesis", k)
        subprocess.run(cmd, env=lab.env_for(kinesis=k, dynamodb=d))

Usage from the shell (see README.md):

    python3 tests/lab/lab.py run --kinesalite -- ./build/tests/integration
    python3 tests/lab/lab.py serve --kinesis-local
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

LAB_DIR = Path(__file__).resolve().parent
NODE_MODULES = LAB_DIR / "node_modules"
PRELOADS = (LAB_DIR / "loopback.js", LAB_DIR / "lifeline.js")
LOOPBACK = "127.0.0.1"
REGION = "us-east-1"
DUMMY_CREDENTIAL = "test"

START_TIMEOUT = 30.0
# Grace period between SIGTERM and SIGKILL. The servers keep everything in
# memory, so there is nothing to lose; kinesis-local may otherwise wait for
# open SubscribeToShard streams before it exits.
STOP_TIMEOUT = 2.0
COMMAND_GRACE = 5.0
PORT_ATTEMPTS = 5
LOG_TAIL_LINES = 40


class LabError(RuntimeError):
    """A lab server could not be found, started or reached."""


# --------------------------------------------------------------------------
# Small helpers


def free_port() -> int:
    """Return a TCP port that was free on 127.0.0.1 a moment ago.

    The port is released before returning, so another process may take it
    before the server binds it; Server.start() notices and retries.
    """
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def _decode_proc_address(hex_address: str) -> tuple[str, int]:
    """Decode an 'ADDR:PORT' field of /proc/net/tcp{,6} (host byte order)."""
    hex_ip, hex_port = hex_address.split(":")
    raw = bytes.fromhex(hex_ip)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, words), int(hex_port, 16)


def listening_addresses(pid: int) -> set[tuple[str, int]] | None:
    """The (ip, port) pairs on which process `pid` has listening TCP sockets.

    Read from /proc, so it tells which process really owns a port (a probe
    could otherwise be answered by someone else's server that grabbed the
    port first). Returns None where /proc is not available.
    """
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return None if not os.path.isdir("/proc/self/fd") else set()
    inodes = set()
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A = LISTEN
                found.add(_decode_proc_address(fields[1]))
    return found


_session_dir_path: Path | None = None
_session_lock = threading.Lock()


def session_dir() -> Path:
    """A per-process temporary directory for logs and empty AWS config files.

    Removed at interpreter exit unless KN_LAB_KEEP_LOGS=1.
    """
    global _session_dir_path
    with _session_lock:
        if _session_dir_path is None:
            path = Path(tempfile.mkdtemp(prefix="kn-lab-"))
            for name in ("aws-config", "aws-credentials"):
                (path / name).touch()
            if os.environ.get("KN_LAB_KEEP_LOGS") != "1":
                atexit.register(shutil.rmtree, path, True)
            _session_dir_path = path
        return _session_dir_path


def _endpoint_of(target) -> str:
    """Accept a Server (or anything with .endpoint) or a URL string."""
    return getattr(target, "endpoint", target)


# --------------------------------------------------------------------------
# Clients and environments that never see the developer's AWS setup


def env_for(kinesis=None, dynamodb=None, base: dict | None = None) -> dict:
    """Environment for a process that must talk to the lab, and only to it.

    `kinesis` and `dynamodb` are Servers or endpoint URLs. `base` defaults to
    os.environ; every AWS_* variable in it is dropped (a profile, token or
    endpoint from the developer's shell must not leak into tests), and the
    config and credentials files point at empty files.
    """
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if not k.startswith("AWS_")}
    lab_dir = session_dir()
    env.update(
        AWS_ACCESS_KEY_ID=DUMMY_CREDENTIAL,
        AWS_SECRET_ACCESS_KEY=DUMMY_CREDENTIAL,
        AWS_REGION=REGION,
        AWS_DEFAULT_REGION=REGION,
        AWS_CONFIG_FILE=str(lab_dir / "aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(lab_dir / "aws-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    if kinesis is not None:
        env["AWS_ENDPOINT_URL_KINESIS"] = _endpoint_of(kinesis)
    if dynamodb is not None:
        env["AWS_ENDPOINT_URL_DYNAMODB"] = _endpoint_of(dynamodb)
    return env


def boto3_client(service: str, endpoint, *, attempts: int = 3,
                 timeout: float = 10.0, **config):
    """A boto3 client for `service` at `endpoint` (a Server or a URL).

    Dummy credentials, region us-east-1, and a botocore session that ignores
    AWS_PROFILE and the developer's config files. `attempts` is the total
    number of attempts (1 disables retrying, which fault tests want).
    Certificate checks are off for https: kinesis-local's certificate is
    self-signed. Extra keyword arguments go to botocore.config.Config.
    """
    import boto3
    import botocore.config
    import botocore.session

    lab_dir = session_dir()
    core = botocore.session.Session(session_vars={
        "profile": (None, None, None, None),
        "config_file": (None, None, str(lab_dir / "aws-config"), None),
        "credentials_file": (None, None, str(lab_dir / "aws-credentials"), None),
    })
    session = boto3.session.Session(
        botocore_session=core,
        aws_access_key_id=DUMMY_CREDENTIAL,
        aws_secret_access_key=DUMMY_CREDENTIAL,
        region_name=REGION,
    )
    url = _endpoint_of(endpoint)
    if url.startswith("https:"):
        from urllib3.exceptions import InsecureRequestWarning
        warnings.filterwarnings("ignore", category=InsecureRequestWarning)
    settings = dict(retries={"total_max_attempts": attempts, "mode": "standard"},
                    connect_timeout=timeout, read_timeout=timeout)
    settings.update(config)
    return session.client(service, endpoint_url=url, verify=False,
                          config=botocore.config.Config(**settings))


# --------------------------------------------------------------------------
# Process lifetime


_live: set["Server"] = set()
_live_lock = threading.Lock()
_handlers_installed = False


def stop_all() -> None:
    """Stop every server this process started and has not stopped yet."""
    with _live_lock:
        servers = list(_live)
    for server in servers:
        server.stop()


def _on_sigterm(signum, frame):
    """Stop the servers, then die of SIGTERM as if no handler were set.

    Re-raising the signal (rather than raising SystemExit) makes sure a
    test runner that catches every exception cannot keep the process alive.
    """
    stop_all()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_handlers() -> None:
    """Register atexit and, if nobody else handles it, SIGTERM cleanup."""
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    session_dir()   # its removal must run after stop_all (atexit is LIFO)
    atexit.register(stop_all)
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL):
        signal.signal(signal.SIGTERM, _on_sigterm)


def _leader_exited(pid: int) -> bool:
    """Whether child `pid` has exited, without reaping it.

    While the child is an unreaped zombie its pid, and so its process group
    id, cannot be reused; that makes the final killpg in _end_group safe.
    """
    try:
        return os.waitid(os.P_PID, pid,
                         os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _end_group(process: subprocess.Popen, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM the process group, SIGKILL it after `timeout`, reap the leader."""
    pgid = process.pid

    def signal_group(sig):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    if process.returncode is None:
        signal_group(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while not _leader_exited(pgid) and time.monotonic() < deadline:
            time.sleep(0.02)
        signal_group(signal.SIGKILL)  # leftovers, or a leader that hung
    process.wait()


# --------------------------------------------------------------------------
# Servers


class Server:
    """One lab server process; subclasses say how to launch and probe it.

    start() picks free ports, launches the server and returns once a signed
    request succeeds; stop() ends its whole process group. Also a context
    manager. Attributes: `endpoint` (plain http URL), `port`, `log_path`,
    `process`.
    """

    name = ""          # as used on the command line
    env_name = ""      # variable set by `lab.py run`
    package = ""       # folder under node_modules
    service = ""       # botocore service name of the readiness probe

    def __init__(self, *, log_dir: str | os.PathLike | None = None,
                 start_timeout: float = START_TIMEOUT):
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.start_timeout = start_timeout
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self._log_file = None

    # -- what subclasses provide

    def _pick_ports(self) -> None:
        self.port = free_port()

    def _ports(self) -> set[int]:
        return {self.port}

    def _arguments(self) -> list[str]:
        raise NotImplementedError

    def _environment(self) -> dict:
        return {}

    def _probe_calls(self) -> list:
        """Signed requests that all succeed once the server is ready."""
        client = boto3_client(self.service, self.endpoint, attempts=1, timeout=2)
        if self.service == "kinesis":
            return [client.list_streams]
        return [client.list_tables]

    # -- public

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None

    def start(self) -> "Server":
        """Launch the server and wait until it answers; no-op if running."""
        if self.process is not None:
            return self
        package_dir = self._package_dir()
        _install_handlers()
        for _ in range(PORT_ATTEMPTS):
            self._pick_ports()
            self._spawn(package_dir)
            if self._wait_until_ready():
                return self
        raise LabError(f"{self.name}: no free port after {PORT_ATTEMPTS} attempts")

    def stop(self) -> None:
        """Stop the server and everything in its process group; idempotent."""
        process, self.process = self.process, None
        if process is None:
            return
        with _live_lock:
            _live.discard(self)
        _end_group(process)
        if process.stdin:
            process.stdin.close()
        if self._log_file:
            self._log_file.close()
            self._log_file = None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the server's output, for error messages."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def listening_addresses(self) -> set[tuple[str, int]] | None:
        """Where the server process listens (see module listening_addresses)."""
        return listening_addresses(self.process.pid) if self.process else None

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.endpoint if self.process else "stopped"
        return f"<{type(self).__name__} {state}>"

    # -- internals

    def _package_dir(self) -> Path:
        path = NODE_MODULES / self.package
        if not path.is_dir():
            raise LabError(
                f"{path} is missing: the lab's npm packages are not installed. "
                f"Run `make check` or `npm ci --prefix {LAB_DIR}`.")
        return path

    def _spawn(self, package_dir: Path) -> None:
        node = shutil.which("node")
        if node is None:
            raise LabError("node is not on PATH; the lab servers need Node.js 20")
        log_dir = self.log_dir or session_dir()
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{self.name}-{self.port}.log"
        self._log_file = open(self.log_path, "wb")
        # A minimal environment: NODE_OPTIONS or AWS_* from the developer's
        # shell would change how the servers behave.
        env = {k: os.environ[k] for k in ("PATH", "HOME", "TMPDIR")
               if k in os.environ}
        env.update(self._environment(), KN_LAB_LIFELINE="1")
        preloads = [arg for p in PRELOADS for arg in ("-r", str(p))]
        self.process = subprocess.Popen(
            [node, *preloads, *self._arguments()],
            cwd=package_dir, env=env, stdin=subprocess.PIPE,
            stdout=self._log_file, stderr=subprocess.STDOUT,
            start_new_session=True)  # own process group, away from Ctrl-C
        with _live_lock:
            _live.add(self)

    def _wait_until_ready(self) -> bool:
        """True once ready; False if the port was taken (caller retries)."""
        deadline = time.monotonic() + self.start_timeout
        probes = self._probe_calls()
        last_error = None
        while time.monotonic() < deadline:
            if _leader_exited(self.process.pid):
                process = self.process
                self.stop()
                tail = self.log_tail()
                if "EADDRINUSE" in tail:
                    return False
                raise LabError(
                    f"{self.name} exited with code {process.returncode} while "
                    f"starting; log {self.log_path}:\n{tail}")
            # Probe only once our process holds the ports: a server someone
            # else started on them in the meantime would answer as well.
            owned = listening_addresses(self.process.pid)
            if owned is None or self._ports() <= {port for _, port in owned}:
                try:
                    for probe in probes:
                        probe()
                    return True
                except Exception as error:  # not answering yet
                    last_error = error
            time.sleep(0.1)
        tail = self.log_tail()
        self.stop()
        raise LabError(
            f"{self.name} did not answer within {self.start_timeout:.0f} s "
            f"(last error: {last_error}); log {self.log_path}:\n{tail}")


class Kinesalite(Server):
    """kinesalite: fast, polling only; no consumers or SubscribeToShard."""

    name, env_name, package, service = (
        "kinesalite", "KN_LAB_KINESALITE", "kinesalite", "kinesis")

    def __init__(self, *, shard_limit: int = 500, **kwargs):
        super().__init__(**kwargs)
        self.shard_limit = shard_limit

    def _arguments(self):
        # The default limit of 10 open shards on the whole server is too low
        # for a test suite; a benchmark of one worker on 1,000 shards asks
        # for more (the limit counts the shards of every stream).
        return ["cli.js", "--port", str(self.port), "--shardLimit",
                str(self.shard_limit)]


class KinesisLocal(Server):
    """kinesis-local (kinesis-mock): consumers, SubscribeToShard over TLS.

    `endpoint` is its plain HTTP port (HTTP/1.1 and cleartext HTTP/2),
    `tls_endpoint` its TLS port (ALPN h2 and http/1.1, self-signed).
    """

    name, env_name, package, service = (
        "kinesis-local", "KN_LAB_KINESIS_LOCAL", "kinesis-local", "kinesis")
    tls_env_name = "KN_LAB_KINESIS_LOCAL_TLS"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.tls_port: int | None = None

    @property
    def tls_endpoint(self) -> str:
        return f"https://{LOOPBACK}:{self.tls_port}"

    def _pick_ports(self):
        self.port = free_port()
        self.tls_port = free_port()
        while self.tls_port == self.port:
            self.tls_port = free_port()

    def _ports(self):
        return {self.port, self.tls_port}

    def _arguments(self):
        # Run from the package folder: it loads server.json (its TLS
        # certificate) from the working directory.
        return ["main.js"]

    def _environment(self):
        return {
            "KINESIS_MOCK_PLAIN_PORT": str(self.port),
            "KINESIS_MOCK_TLS_PORT": str(self.tls_port),
            "SHARD_LIMIT": "1000",
            "ON_DEMAND_STREAM_COUNT_LIMIT": "100",
            "LOG_LEVEL": "WARN",
            "AWS_REGION": REGION,
            "SHOULD_PERSIST_DATA": "false",
            "LOAD_DATA_IF_EXISTS": "false",
        }

    def _probe_calls(self):
        tls = boto3_client("kinesis", self.tls_endpoint, attempts=1, timeout=2)
        return super()._probe_calls() + [tls.list_streams]


class Dynalite(Server):
    """dynalite: DynamoDB for lease tables."""

    name, env_name, package, service = (
        "dynalite", "KN_LAB_DYNALITE", "dynalite", "dynamodb")

    def _arguments(self):
        return ["cli.js", "--port", str(self.port), "--host", LOOPBACK]


SERVERS = {cls.name: cls for cls in (Kinesalite, KinesisLocal, Dynalite)}


def start(name: str, **kwargs) -> Server:
    """Start the server called `name` ('kinesalite', 'kinesis-local', 'dynalite')."""
    try:
        cls = SERVERS[name]
    except KeyError:
        raise LabError(f"unknown server {name!r}; known: {', '.join(SERVERS)}") from None
    return cls(**kwargs).start()


def lab_variables(servers) -> dict:
    """KN_LAB_* variables naming the endpoints of `servers`."""
    env = {}
    for server in servers:
        env[server.env_name] = server.endpoint
        if isinstance(server, KinesisLocal):
            env[server.tls_env_name] = server.tls_endpoint
    return env


def _default_kinesis(servers):
    """The Kinesis server AWS_ENDPOINT_URL_KINESIS points to: kinesis-local
    if started (closer to AWS), else kinesalite."""
    by_name = {s.name: s for s in servers}
    return by_name.get("kinesis-local") or by_name.get("kinesalite")


# --------------------------------------------------------------------------
# Command line


def _start_selected(args) -> list[Server]:
    names = [name for name in SERVERS if getattr(args, name.replace("-", "_"))]
    servers = []
    try:
        for name in names or list(SERVERS):
            servers.append(start(name, log_dir=args.log_dir))
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


class _Interrupted(Exception):
    """SIGINT or SIGTERM arrived while the command line tool was running."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum, frame):
    # One interruption is enough: cleanup below is bounded in time and must
    # not itself be interrupted.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    raise _Interrupted(signum)


def _end_command(child: subprocess.Popen, signum: int) -> int:
    """End the command after lab.py got `signum`; return its status."""
    if signum == signal.SIGINT:
        # Ctrl-C in a terminal reaches the command too (same process group):
        # give it a moment to finish on its own before passing it on.
        try:
            return child.wait(timeout=COMMAND_GRACE)
        except subprocess.TimeoutExpired:
            pass
    child.send_signal(signum)
    try:
        return child.wait(timeout=COMMAND_GRACE)
    except subprocess.TimeoutExpired:
        child.kill()
        return child.wait()


def _run(args, servers) -> int:
    """Run the command with the lab environment; return its exit status."""
    env = env_for(kinesis=_default_kinesis(servers),
                  dynamodb=next((s for s in servers if s.name == "dynalite"), None))
    env.update(lab_variables(servers))
    try:
        child = subprocess.Popen(args.command, env=env)
    except OSError as error:
        print(f"lab.py: cannot run {args.command[0]}: {error}", file=sys.stderr)
        return 127
    try:
        code = child.wait()
    except _Interrupted as stop:
        code = _end_command(child, stop.signum)
    finally:
        if child.returncode is None:
            child.kill()
            child.wait()
    return 128 - code if code < 0 else code   # shell convention for signals


def _serve(servers) -> int:
    for server in servers:
        for name, url in lab_variables([server]).items():
            print(f"{name}={url}")
        print(f"# {server.name} log: {server.log_path}")
    sys.stdout.flush()
    try:
        while not any(_leader_exited(s.process.pid) for s in servers):
            time.sleep(0.5)
    except _Interrupted:
        return 0
    dead = [s.name for s in servers if _leader_exited(s.process.pid)]
    print(f"lab.py: server exited: {', '.join(dead)}", file=sys.stderr)
    return 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Start the local AWS test servers on loopback ports.")
    commands = parser.add_subparsers(dest="command_name", required=True)
    run = commands.add_parser(
        "run", help="start servers, run a command with their endpoints, stop them")
    serve = commands.add_parser(
        "serve", help="start servers, print NAME=URL lines, run until interrupted")
    for sub in (run, serve):
        for name in SERVERS:
            sub.add_argument(f"--{name}", action="store_true",
                             help=f"start {name} (default: all servers)")
        sub.add_argument("--log-dir", help="keep server logs in this directory")
    run.add_argument("command", nargs=argparse.REMAINDER,
                     help="-- CMD ARGS...: the command to run")
    args = parser.parse_args(argv)
    if args.command_name == "run":
        if args.command[:1] == ["--"]:
            args.command = args.command[1:]
        if not args.command:
            parser.error("run needs a command after --")

    # Explicit handlers: a shell starting lab.py in the background leaves
    # SIGINT ignored, and SIGTERM must end the command and the servers too.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _raise_interrupted)
    try:
        servers = _start_selected(args)
    except LabError as error:
        print(f"lab.py: {error}", file=sys.stderr)
        return 1
    except _Interrupted as stop:
        return 128 + stop.signum
    try:
        return _run(args, servers) if args.command_name == "run" else _serve(servers)
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
