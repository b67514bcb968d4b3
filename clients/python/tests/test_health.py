"""`python -m slidewin health` against real servers: the report, its
thresholds and exit status, and the Prometheus format."""

import subprocess
import sys

from slidewin import Limiter


def health(server, *args):
    # Run from outside the source tree: the installed package answers.
    return subprocess.run(
        [sys.executable, "-m", "slidewin", "health", server.url(), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )


def test_a_healthy_server_exits_0_and_reports_everything(server):
    lim = Limiter(server.client())
    for i in range(3):
        lim.check("sms:limit:203.0.113.7", 2, 60_000)
        lim.check(f"sms:limit:10.0.0.{i}", 5, 60_000)
    # A generous latency threshold: this machine is shared, and the
    # threshold logic is checked below with the key size instead.
    out = health(server, "--latency-ms", "1000")
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "round trip: p50" in text and "slidewin.check: 6 calls" in text
    assert "sms:limit:203.0.113.7" in text, "the biggest keys, from the SCAN"
    assert "evicted_keys: 0" in text and "slidewin_checks_denied: 1" in text
    assert "most denied (SLIDEWIN.TOP 5):" in text
    assert "status: ok" in text


def test_a_crossed_threshold_exits_1(server):
    lim = Limiter(server.client())
    lim.check("sms:limit:big", 10_000, 60_000, cost=5_000)
    out = health(server, "--latency-ms", "1000", "--big-key-bytes", "100000")
    assert out.returncode == 1, out.stdout
    assert "ALERT: 1 limiter keys over 100000 bytes, e.g. sms:limit:big" in out.stdout
    server.client().config_set("maxmemory-policy", "allkeys-lru")
    # The COST 5000 call above can pass 10 ms on a loaded machine and land
    # in the slow log: only the eviction warning is under test here.
    out = health(server, "--latency-ms", "1000", "--slow-ms", "100000")
    assert out.returncode == 0, out.stdout
    assert "WARNING: maxmemory-policy allkeys-lru can evict limiter keys" in out.stdout


def test_prometheus_format(server):
    Limiter(server.client()).check("sms:limit:1", 5, 60_000)
    out = health(server, "--latency-ms", "1000", "--format", "prometheus")
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stdout.splitlines() if l and not l.startswith("#")]
    metrics = {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in lines}
    assert 'slidewin_command_calls{command="slidewin.check"}' in metrics
    assert metrics["slidewin_evicted_keys"] == 0
    assert metrics["slidewin_checks_allowed"] == 1
    assert metrics['slidewin_key_bytes{key="sms:limit:1"}'] > 0
    assert metrics["slidewin_health_alerts"] == 0


def test_an_unreachable_server_exits_2(server):
    server.kill()
    out = health(server)
    assert out.returncode == 2 and "cannot ask" in out.stderr
