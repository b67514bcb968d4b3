"""Debian's nginx with libnginx-mod-http-lua and lua-nginx-redis running the
example configuration (slidewin.conf, its addresses replaced by loopback
ports the test picks) against a server with the module: limits, headers,
keys, shadow mode, pooled connections, and outages (server gone, server
frozen) answered as configured, with no "closed socket" line logged."""

import http.client
import os
import re
import shutil
import signal
import subprocess
import tempfile

import pytest

from conftest import DEADLINE_S, free_port, run, tool, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = "/usr/lib/nginx/modules"


class Nginx:
    """nginx in the foreground (daemon off) in a temp prefix, one worker."""

    def __init__(self, redis_port: int):
        self.dir = tempfile.mkdtemp(prefix="slidewin-nginx-")
        os.chmod(self.dir, 0o755)
        self.port, self.backend = free_port(), free_port()
        conf = open(os.path.join(HERE, "slidewin.conf")).read()
        # The Lua module is copied into the prefix: nginx's worker runs as an
        # unprivileged user, who may not read a checkout under a private
        # directory (mktemp -d makes them 0700).
        lua = os.path.join(self.dir, "lua")
        shutil.copytree(os.path.join(HERE, "lua"), lua)
        for top, dirs, files in os.walk(lua):
            os.chmod(top, 0o755)
            for f in files:
                os.chmod(os.path.join(top, f), 0o644)
        conf = (conf.replace("/usr/share/slidewin/nginx/lua", lua)
                .replace("port = 6379", f"port = {redis_port}")
                .replace("127.0.0.1:8080", f"127.0.0.1:{self.port}")
                .replace("127.0.0.1:9000", f"127.0.0.1:{self.backend}"))
        assert conf.count(f"port = {redis_port}") == 3 and str(self.backend) in conf
        self.error_log = os.path.join(self.dir, "error.log")
        main = f"""
load_module {MODULES}/ndk_http_module.so;
load_module {MODULES}/ngx_http_lua_module.so;
daemon off;
worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.error_log} notice;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {self.dir}/body;
    proxy_temp_path {self.dir}/proxy;
    fastcgi_temp_path {self.dir}/fastcgi;
    uwsgi_temp_path {self.dir}/uwsgi;
    scgi_temp_path {self.dir}/scgi;
    server {{
        listen 127.0.0.1:{self.backend};
        location / {{ return 200 "ok\\n"; }}
    }}
{conf}
}}
"""
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(main)
        nginx = tool("nginx")
        run([nginx, "-t", "-p", self.dir, "-c", self.conf, "-e", self.error_log], timeout=DEADLINE_S)
        self.proc = subprocess.Popen([nginx, "-p", self.dir, "-c", self.conf, "-e", self.error_log],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("nginx", lambda: self.get("/slidewin-status")[0] == 200,
                 explain=lambda: "nginx's error log:\n" + self.log()[-3000:])

    def get(self, path: str, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            c.request("GET", path, headers=headers or {})
            r = c.getresponse()
            body = r.read().decode()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, body
        finally:
            c.close()

    def log(self) -> str:
        return open(self.error_log).read() if os.path.exists(self.error_log) else ""

    def status(self) -> dict:
        code, _, body = self.get("/slidewin-status")
        assert code == 200, body
        return {k: int(v) for k, v in (line.split() for line in body.splitlines())}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(DEADLINE_S)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def nginx(server):
    n = Nginx(server.port)
    yield n
    n.stop()


def no_closed_socket_lines(log: str):
    assert "closed socket" not in log, log
    assert "[alert]" not in log and "[crit]" not in log, log


def test_limits_with_headers_and_refusals_are_not_charged(server, nginx):
    r = server.client()
    for i in range(100):
        code, h, body = nginx.get("/api/items")
        assert (code, body) == (200, "ok\n"), (i, code, body)
        assert h["ratelimit-limit"] == "100"
        assert h["ratelimit-remaining"] == str(99 - i)
        assert h["ratelimit-reset"] == "60"
        assert "retry-after" not in h
    for _ in range(5):
        code, h, _ = nginx.get("/api/items")
        assert code == 429
        assert h["ratelimit-remaining"] == "0"
        assert 58 <= int(h["retry-after"]) <= 60, h
        assert 58 <= int(h["ratelimit-reset"]) <= 60, h
    # The 100 allowed were charged, the 429s not.
    assert r.zcard("rl:api:127.0.0.1") == 100
    assert int(r.info("slidewin")["slidewin_checks_denied"]) == 5
    s = nginx.status()
    assert (s["slidewin_nginx_allowed_total"], s["slidewin_nginx_refused_total"]) == (100, 5)
    no_closed_socket_lines(nginx.log())


def test_connections_are_pooled(server, nginx):
    r = server.client()
    before = int(r.info("stats")["total_connections_received"])
    for _ in range(30):
        assert nginx.get("/api/x")[0] == 200
    after = int(r.info("stats")["total_connections_received"])
    # One worker: one connection, reused (our own INFO adds one).
    assert after - before <= 2, (before, after)


def test_key_from_a_header_falls_back_to_the_address(server, nginx):
    r = server.client()
    for _ in range(10):
        assert nginx.get("/paid/x", {"X-API-Key": "k1"})[0] == 200
    code, h, _ = nginx.get("/paid/x", {"X-API-Key": "k1"})
    assert code == 429 and int(h["retry-after"]) == 1, h
    # Another key has its own window; no header is the client address.
    assert nginx.get("/paid/x", {"X-API-Key": "k2"})[0] == 200
    assert nginx.get("/paid/x")[0] == 200
    assert r.zcard("rl:paid:k1") == 10
    assert r.zcard("rl:paid:k2") == 1
    assert r.zcard("rl:paid:127.0.0.1") == 1


def test_shadow_lets_everything_through_and_counts(server, nginx):
    r = server.client()
    seen = []
    for _ in range(25):
        code, h, _ = nginx.get("/beta/x")
        assert code == 200
        seen.append(h.get("ratelimit-shadow"))
    assert seen == [None] * 20 + ["refused"] * 5
    assert r.zcard("rl:beta:127.0.0.1") == 20, "shadow refusals are not charged"
    info = r.info("slidewin")
    assert int(info["slidewin_checks_shadow_refused"]) == 5
    assert int(info["slidewin_checks_denied"]) == 0
    top = r.execute_command("SLIDEWIN.TOP", "DENIED")
    assert [t[0] for t in top] == [b"rl:beta:127.0.0.1"] and top[0][1] == 5, top
    assert nginx.status()["slidewin_nginx_shadow_refused_total"] == 5
    assert len(re.findall(r"\[notice\].*shadow limit would refuse rl:beta:127\.0\.0\.1", nginx.log())) == 5


def test_outage_fails_open_or_closed_as_configured(server, nginx):
    # Pool a connection first, so the outage also meets a pooled one.
    assert nginx.get("/api/x")[0] == 200
    assert nginx.get("/paid/x")[0] == 200
    server.stop()
    code, h, body = nginx.get("/api/x")
    assert (code, body) == (200, "ok\n"), "fail open"
    assert "ratelimit-limit" not in h
    assert nginx.get("/paid/x")[0] == 503, "fail closed"
    assert nginx.get("/api/x")[0] == 200
    s = nginx.status()
    assert (s["slidewin_nginx_outage_open_total"], s["slidewin_nginx_outage_closed_total"]) == (2, 1)
    log = nginx.log()
    assert log.count("limiter unavailable, failing open") == 2, log
    assert log.count("limiter unavailable, failing closed (503)") == 1, log
    no_closed_socket_lines(log)
    # Back: the next requests are limited again.
    server.start()
    code, h, _ = nginx.get("/api/x")
    assert code == 200 and h["ratelimit-remaining"] == "99", h
    no_closed_socket_lines(nginx.log())


def test_a_frozen_server_times_out_and_its_connection_is_not_reused(server, nginx):
    r = server.client()
    assert nginx.get("/api/x")[0] == 200  # a pooled connection
    server.pause()
    try:
        code, _, _ = nginx.get("/api/x")  # times out after 100 ms: fails open
        assert code == 200
        assert nginx.get("/paid/x")[0] == 503
    finally:
        server.resume()
    # The timed-out calls may still be executed once the server resumes
    # (they were sent), but their connections were closed: no later request
    # reads a stale reply. Each reply is this request's own: remaining falls
    # by one a request and ends at the limit less the entries.
    remaining = []
    for _ in range(5):
        code, h, _ = nginx.get("/api/x")
        assert code == 200, h
        remaining.append(int(h["ratelimit-remaining"]))
    assert remaining == list(range(remaining[0], remaining[0] - 5, -1)), remaining
    assert remaining[-1] == 100 - r.zcard("rl:api:127.0.0.1"), remaining
    log = nginx.log()
    assert "timeout" in log and log.count("failing open") == 1, log
    no_closed_socket_lines(log)
