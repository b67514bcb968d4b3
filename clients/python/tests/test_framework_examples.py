"""examples/python/flask_app.py (Flask-Limiter) and fastapi_app.py (slowapi)
run as a user runs them, as processes serving HTTP, on storage_uri
"slidewin://..." against each server with the module: decorated routes
answer 429 with Retry-After and the X-RateLimit headers, the decisions are
the module's (SLIDEWIN.CHECK, no Lua), and Retry-After is the exact wait for
the oldest entry to leave the window."""

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from conftest import ROOT, free_port

EXAMPLES = os.path.join(ROOT, "examples", "python")
START_DEADLINE_S = 30


class App:
    """An example app on a free port, stopped after the test."""

    def __init__(self, script: str, storage_uri: str):
        self.port = free_port()
        self.log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"slidewin-{script}-{self.port}.log"), "w+")
        self.proc = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, script), "--storage-uri", storage_uri,
                                      "--port", str(self.port)], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    self.log.seek(0)
                    pytest.fail(f"{script} did not start:\n{self.log.read()}")
                time.sleep(0.1)

    def get(self, path: str):
        """(status, headers, body) of GET path."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


def storage_uri(server):
    return f"slidewin://127.0.0.1:{server.port}/0"


def check_refusals(server, app, path, limit, window_s, then_other):
    """`limit` requests to `path` pass, spread over ~1.5 s, the next one is
    refused with the exact wait; another key is still served."""
    t_first = time.time()
    for i in range(limit):
        status, headers, _ = app.get(path)
        assert status == 200, (path, i, status)
        assert headers["X-RateLimit-Limit"] == str(limit)
        assert headers["X-RateLimit-Remaining"] == str(limit - 1 - i)
        if i == 0:
            time.sleep(1.5)
    status, headers, body = app.get(path)
    t_refused = time.time()
    assert status == 429, (status, body)
    assert headers["X-RateLimit-Remaining"] == "0" and headers["X-RateLimit-Limit"] == str(limit)
    # The first entry leaves the window at t_first + window: Retry-After is
    # that wait in whole seconds (Flask-Limiter rounds down, slowapi adds 1
    # and rounds down), not the window's length.
    exact = window_s - (t_refused - t_first)
    assert exact - 1 <= int(headers["Retry-After"]) <= exact + 1, (headers["Retry-After"], exact)
    assert abs(float(headers["X-RateLimit-Reset"]) - (t_first + window_s)) <= 1.5
    assert app.get(then_other)[0] == 200


def test_flask_limiter_example(server):
    app = App("flask_app.py", storage_uri(server))
    try:
        check_refusals(server, app, "/sms/+8613800000001", 3, 60, "/sms/+8613800000002")
        # COST: each search takes 2 of 10 per minute.
        assert [app.get("/search")[0] for _ in range(6)] == [200] * 5 + [429]
        assert app.get("/health")[0] == 200
        c = server.client()
        keys = c.keys("LIMITS:slidewin:*")
        assert any("+8613800000001" in k for k in keys) and all(c.type(k) == "zset" for k in keys), keys
        assert server.calls("slidewin.check") >= 10, "the module decided"
        assert server.calls("evalsha") == 0 and server.calls("eval") == 0, "no Lua moving window"
    finally:
        app.stop()


def test_slowapi_example(server):
    app = App("fastapi_app.py", storage_uri(server))
    try:
        check_refusals(server, app, "/login/alice", 3, 60, "/login/bob")
        # COST: each export takes 4 of 10 per minute.
        assert [app.get("/export")[0] for _ in range(3)] == [200, 200, 429]
        c = server.client()
        assert any("login:alice" in k for k in c.keys("LIMITS:slidewin:*"))
        assert server.calls("slidewin.check") >= 8 and server.calls("evalsha") == 0
    finally:
        app.stop()
