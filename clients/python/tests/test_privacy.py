"""Keys as the user gave them (bytes unchanged, str as UTF-8), and reports
that do not carry who is limited: the health report's text and Prometheus
output name keys by pattern unless told otherwise, with non-UTF-8 keys
handled everywhere."""

import os
import re
import subprocess
import sys

import redis

from slidewin import REDIS, Limiter, merge_top
from slidewin.health import KeyNames, client_prometheus, key_hash, key_pattern, render_prometheus, render_text, gather
from conftest import entries

PHONE = "sms:limit:phone:+8613800000042"
IP = "sms:limit:9.9.9.9"
BINARY = b"user:\xff\xfe"


def health(server, *args, env=None):
    return subprocess.run([sys.executable, "-m", "slidewin", "health", server.url(), "--latency-ms", "1000",
                           "--slow-ms", "100000", *args],
                          capture_output=True, text=True, timeout=120, cwd="/", env=env)


def test_bytes_keys_are_the_keys_the_server_holds(store_server):
    c = redis.Redis(port=store_server.port)
    lim = Limiter(c, cache_size=0)
    assert lim.check(BINARY, 1, 60_000).allowed
    # The same key, asked raw: already full. No other key was made.
    assert c.execute_command("SLIDEWIN.CHECK", BINARY, 1, 60_000) == 0
    assert c.keys("*") == [BINARY]
    assert entries(c, BINARY) == 1
    # A str key is its UTF-8: "é" and b"\xc3\xa9" are one key.
    assert lim.check("k:é", 2, 60_000).allowed
    d = lim.check("k:é".encode(), 2, 60_000)
    assert d.allowed and d.remaining == 0 and d.keys == ["k:é".encode()]
    m = lim.check_all([(BINARY + b":a", 5, 60_000), (bytearray(BINARY + b":b"), 5, 60_000)])
    assert m.allowed and m.keys == [BINARY + b":a", BINARY + b":b"]
    assert lim.undo(m) == 2
    assert entries(c, BINARY + b":a") == 0


def test_merge_top_keeps_non_utf8_keys(server):
    lim = Limiter(redis.Redis(port=server.port), cache_size=0)
    for _ in range(3):
        lim.check(BINARY, 1, 60_000)
        lim.check("plain", 1, 60_000)
    reply = redis.Redis(port=server.port).execute_command("SLIDEWIN.TOP", 5)
    merged = merge_top([reply, [[b"plain", 1, 0]]])
    assert merged == [("plain", 3, 0), (BINARY, 2, 0)], merged


def test_reports_name_no_key_by_default(server):
    lim = Limiter(server.client(), cache_size=0)
    for key in (PHONE, IP, BINARY, "login:alice"):
        for _ in range(3):
            lim.check(key, 1, 60_000)
    # Big enough to cross --big-key-bytes: its name would be in the alert.
    lim.check(PHONE + "0", 5_000, 60_000, cost=2_000)
    for fmt in ("text", "prometheus"):
        out = health(server, "--format", fmt, "--big-key-bytes", "1000")
        assert out.returncode == 1, out.stdout + out.stderr  # the big key's alert
        for secret in ("8613800000042", "9.9.9.9", "alice", "\\xff", "\ufffd"):
            assert secret not in out.stdout, (fmt, secret, out.stdout)
        assert "sms:limit:phone:*" in out.stdout and "sms:limit:*" in out.stdout and "login:*" in out.stdout
    # The slow log's entries name keys in their arguments: only the command is shown.
    server.client().config_set("slowlog-log-slower-than", 0)  # this CHECK goes into the slow log, with its key
    lim.check(PHONE, 1, 60_000)
    server.client().config_set("slowlog-log-slower-than", 10_000_000)
    out = health(server, "--slow-ms", "0")
    assert re.search(r"^\s+\d+ µs  slidewin\.check$", out.stdout, re.M), out.stdout
    assert "8613800000042" not in out.stdout and "9.9.9.9" not in out.stdout
    # The patterns are few: one row per pattern, keys of one pattern added up.
    text = health(server).stdout
    assert re.search(r"B  sms:limit:phone:\* \(2 keys\)", text), text
    assert "most denied (SLIDEWIN.TOP 5):" in text and re.search(r"\s+2 \(±0\)  sms:limit:\*", text), text


def test_hash_and_raw_names_are_explicit(server):
    lim = Limiter(server.client(), cache_size=0)
    lim.check(PHONE, 1, 60_000)
    lim.check(BINARY, 1, 60_000)
    out = health(server, "--key-names", "hash")
    assert out.returncode == 2 and "SLIDEWIN_KEY_HASH_SECRET" in out.stderr, "a keyed hash needs a secret"
    env = dict(os.environ, SLIDEWIN_KEY_HASH_SECRET="s3cret")
    out = health(server, "--key-names", "hash", "--format", "prometheus", env=env)
    assert out.returncode == 0, out.stderr
    assert f'slidewin_key_bytes{{key="{key_hash(PHONE, b"s3cret")}"}}' in out.stdout
    assert "8613800000042" not in out.stdout
    assert key_hash(PHONE, b"s3cret") != key_hash(PHONE, b"other"), "keyed: another secret, another name"
    out = health(server, "--key-names", "raw")
    assert out.returncode == 0 and "warning: --key-names raw" in out.stderr
    assert PHONE in out.stdout and "user:\\xff\\xfe" in out.stdout, "raw names, non-UTF-8 bytes escaped"


def test_patterns_keep_words_only():
    assert key_pattern("sms:limit:9.9.9.9") == "sms:limit:*"
    assert key_pattern(PHONE) == "sms:limit:phone:*"
    assert key_pattern("login:alice") == "login:*"
    assert key_pattern("alice") == "*"
    assert key_pattern("api:user:42:calls") == "api:user:*:*"
    assert key_pattern(BINARY) == "user:*"
    assert KeyNames().top([(b"a:1", 2, 0), (b"a:2", 3, 1), (b"b:x", 1, 0)], 5) == [("a:*", 5, 1), ("b:*", 1, 0)]


def test_the_report_renders_any_key_and_the_limiters_counts(server):
    server.kill()
    lim = Limiter(redis.Redis(port=server.port), outage="allow", breaker_pause_ms=60_000)
    assert lim.check(BINARY, 1, 60_000).allowed and lim.check("x", 1, 60_000).allowed
    server.start()
    out = gather(redis.Redis(port=server.port), latency_seconds=0.1, pings=100, limiters=[lim])
    prom = render_prometheus(out)
    assert 'slidewin_client_decisions_total{source="fallback",reason="connection"} 1' in prom, prom
    assert 'slidewin_client_decisions_total{source="fallback",reason="breaker-open"} 1' in prom, prom
    assert "slidewin_client_breaker_opened_total 1" in prom
    assert "this process's limiters, fallback: breaker-open 1, connection 1" in render_text(out)
    assert client_prometheus(lim) == "\n".join(l for l in prom.splitlines() if "slidewin_client_" in l) + "\n"
    assert lim.stats()["decisions"] == {"fallback": {"connection": 1, "breaker-open": 1}}
    assert Limiter(redis.Redis(port=server.port)).check("y", 1, 1000).source == REDIS
