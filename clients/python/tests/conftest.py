"""Real servers for the client's tests: each of the suite's four (found by
scripts/server-path.sh, as the Rust suite finds them), with the module
built by `make build`, or without it. A missing server or module fails the
test run: nothing is skipped."""

import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
# cargo's build folder: CARGO_TARGET_DIR (the Makefile exports it), else ./target.
TARGET_DIR = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"))
MODULE = os.environ.get("SLIDEWIN_MODULE", os.path.join(TARGET_DIR, "release", "libslidewin.so"))
SERVERS = ["redis-7.0", "redis-8.2", "valkey-8.1", "valkey-9.1"]
START_DEADLINE_S = 15

#: An older module, to test what the client says of a module without the
#: commands and options it sends: the source of this commit (before request
#: ids and shadow mode: no SLIDEWIN.SETTLE, no ID, no SHADOW), built once
#: into TARGET_DIR/slidewin-<commit>/ (about two minutes), or the build
#: SLIDEWIN_OLD_MODULE names. A real module of an earlier day: the servers
#: cannot hide a module's command (rename-command refuses module commands).
OLD_MODULE_COMMIT = "07be96b"


def old_module() -> str:
    """The path of the older module (see `OLD_MODULE_COMMIT`), built when missing."""
    given = os.environ.get("SLIDEWIN_OLD_MODULE")
    if given:
        if not os.path.isfile(given):
            pytest.fail(f"SLIDEWIN_OLD_MODULE={given}: no such file")
        return given
    home = os.path.join(TARGET_DIR, f"slidewin-{OLD_MODULE_COMMIT}")
    built = os.path.join(home, "target", "release", "libslidewin.so")
    if os.path.isfile(built):
        return built
    src = os.path.join(home, "src")
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    archive = subprocess.run(["git", "-C", ROOT, "archive", OLD_MODULE_COMMIT], capture_output=True)
    if archive.returncode != 0:
        pytest.fail(f"git archive {OLD_MODULE_COMMIT} failed: {archive.stderr.decode()}")
    subprocess.run(["tar", "-x", "-C", src], input=archive.stdout, check=True)
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(home, "target"))
    # Without link-time optimisation, in parallel code units: it is built
    # to be talked to, not timed.
    fast = ["--config", "profile.release.lto=false", "--config", "profile.release.codegen-units=16"]
    out = subprocess.run(["cargo", "build", "--release", *fast], cwd=src, env=env, capture_output=True, text=True)
    if out.returncode != 0 or not os.path.isfile(built):
        pytest.fail(f"building the module of {OLD_MODULE_COMMIT} failed:\n{out.stderr[-3000:]}")
    return built


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_binary(name: str) -> str:
    out = subprocess.run([os.path.join(ROOT, "scripts", "server-path.sh"), name], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.fail(f"{name} not found (run make deps): {out.stderr.strip()}")
    return out.stdout.strip()


class Server:
    """A server process on a free port in a temp dir, stopped gracefully,
    then killed; every wait has a deadline."""

    #: Redis 7.0+ directives (a subclass for Redis 6.2 leaves them out).
    debug_args = ["--enable-debug-command", "yes"]

    def __init__(self, name: str, module: bool = True, port: int = 0, args=(), module_args=(), module_path: str = MODULE):
        self.name = name
        self.module = module
        self.module_path = module_path
        self.module_args = list(module_args)  # after the module's path
        self.args = list(args)  # more server arguments, on every start
        self.dir = tempfile.mkdtemp(prefix="slidewin-py-")
        self.port = port or free_port()
        self.proc = None
        self.start()

    def start(self, extra=(), wait: bool = True):
        """Starts the server (`extra`: arguments for this start only) and,
        with `wait`, waits until it answers PING (not LOADING)."""
        args = [server_binary(self.name), "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--save", "", "--appendonly", "no", "--logfile", "server.log",
                ] + self.debug_args + self.args + list(extra)
        if self.module:
            if not os.path.isfile(self.module_path):
                pytest.fail(f"module not built at {self.module_path}: run make build")
            args += ["--loadmodule", self.module_path] + self.module_args
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait:
            return
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            try:
                redis.Redis(port=self.port, socket_timeout=1).ping()
                return
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    log = open(os.path.join(self.dir, "server.log")).read() if os.path.exists(os.path.join(self.dir, "server.log")) else ""
                    self.kill()
                    pytest.fail(f"{self.name} did not start:\n{log}")
                time.sleep(0.05)

    def client(self, **kw) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, **kw)

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                # No retries: SHUTDOWN closes the connection, and redis-py's
                # default retry would reconnect for seconds.
                redis.Redis(port=self.port, socket_timeout=2, retry=Retry(NoBackoff(), 0)).shutdown(nosave=True)
            except redis.exceptions.RedisError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def calls(self, command: str) -> int:
        """Calls of `command` the server has run (INFO commandstats)."""
        return self.cmdstat(command, "calls")

    def cmdstat(self, command: str, field: str) -> int:
        """A field of `command` in INFO commandstats: `calls`, or
        `rejected_calls` (refused before running: READONLY, OOM, TRYAGAIN
        ...)."""
        stats = self.client().info("commandstats")
        return int(stats.get(f"cmdstat_{command}", {}).get(field, 0))

    def check_command(self) -> str:
        """The command a CHECK is counted under: the module's, or FCALL."""
        return "slidewin.check" if self.module else "fcall"

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(params=SERVERS)
def server(request):
    s = Server(request.param)
    yield s
    s.close()


@pytest.fixture(params=[(name, log_type) for name in SERVERS for log_type in ("zset", "compact")],
                ids=[f"{name}-{log_type}" for name in SERVERS for log_type in ("zset", "compact")])
def store_server(request):
    """Each server with the module, keys as sorted sets (the default) and
    as compact logs (`log-type compact`): the client must not care."""
    name, log_type = request.param
    s = Server(name, module_args=["log-type", log_type])
    s.log_type = log_type
    s.key_type = {"zset": "zset", "compact": "slidewlog"}[log_type]
    yield s
    s.close()


def entries(r: redis.Redis, key: str) -> int:
    """How many entries `key`'s log holds, whichever store holds it (a
    PEEK under a limit far above them: remaining = limit - entries)."""
    limit = 100_000
    return limit - r.execute_command("SLIDEWIN.PEEK", key, limit, 3_600_000)[2]


def count_sends(limiter) -> list:
    """The commands `limiter` sends from now on (their names, one per send),
    counted where they leave it."""
    sent = []
    real = limiter.link.execute

    def counting(key, args):
        sent.append(args[0])
        return real(key, args)

    limiter.link.execute = counting
    return sent


@pytest.fixture(params=SERVERS)
def old_server(request):
    """A server with the older module (`OLD_MODULE_COMMIT`)."""
    s = Server(request.param, module_path=old_module())
    yield s
    s.close()


@pytest.fixture(params=SERVERS)
def bare_server(request):
    """A server without the module: the FUNCTION library answers."""
    s = Server(request.param, module=False)
    yield s
    s.close()


@pytest.fixture(params=[(name, module) for name in SERVERS for module in (True, False)],
                ids=[f"{name}-{'module' if module else 'library'}" for name in SERVERS for module in (True, False)])
def any_server(request):
    """Each server with the module, and each without it (FCALL)."""
    name, module = request.param
    s = Server(name, module=module)
    yield s
    s.close()
