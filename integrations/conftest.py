"""What the integrations' tests share: a server with the module (built by
`make build`) on a free loopback port, a free port for the program under
test, and a helper that runs a child process with a deadline. A missing
server, module or tool fails the test: nothing is skipped.

The servers run: INTEGRATION_SERVERS (names of scripts/server-path.sh,
space-separated), by default Debian's Redis 7.0 and Valkey 9.1, the oldest
and the newest of the suite."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import redis

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TARGET_DIR = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"))
MODULE = os.environ.get("SLIDEWIN_MODULE", os.path.join(TARGET_DIR, "release", "libslidewin.so"))
SERVERS = os.environ.get("INTEGRATION_SERVERS", "redis-7.0 valkey-9.1").split()
DEADLINE_S = 15


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tool(name: str) -> str:
    """The path of a program the test needs (scripts/deps.sh integrations
    installs them all)."""
    path = shutil.which(name) or (os.path.exists(name) and name)
    if not path:
        pytest.fail(f"{name} not found: run scripts/deps.sh integrations")
    return path


def wait_for(what: str, cond, deadline_s: float = DEADLINE_S, interval: float = 0.05,
             explain=None):
    """Polls `cond` until it holds; fails the test after the deadline with
    what `explain()` says (a log's tail, say)."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            if cond():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}" + (f"\n{explain()}" if explain else ""))
        time.sleep(interval)


class Server:
    """A server with the module on a free loopback port in a temp dir;
    stop() ends it (SIGTERM, then SIGKILL after a deadline)."""

    def __init__(self, name: str, module_args=()):
        out = subprocess.run([os.path.join(ROOT, "scripts", "server-path.sh"), name],
                             capture_output=True, text=True)
        if out.returncode != 0:
            pytest.fail(f"{name} not found (run make deps): {out.stderr.strip()}")
        if not os.path.isfile(MODULE):
            pytest.fail(f"module not built at {MODULE}: run make build")
        self.name = name
        self.module_args = list(module_args)
        self.binary = out.stdout.strip()
        self.dir = tempfile.mkdtemp(prefix="slidewin-int-")
        self.port = free_port()
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--save", "", "--appendonly", "no", "--logfile", "server.log",
             "--loadmodule", MODULE, *self.module_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(f"{self.name} on port {self.port}", lambda: self.client().ping())

    def client(self, **kw) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, **kw)

    def pause(self):
        """Freezes the server (SIGSTOP): it accepts nothing and answers nothing."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(DEADLINE_S)

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(params=SERVERS)
def server(request):
    s = Server(request.param)
    yield s
    s.cleanup()


def run(args, timeout=60, **kw) -> subprocess.CompletedProcess:
    """Runs a program to completion within `timeout` seconds; its output is
    shown when it fails."""
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{args[0]} did not finish in {timeout}s: {e.stdout}\n{e.stderr}")
    if out.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out
