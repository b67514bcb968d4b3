"""`python -m slidewin health` against real servers: the report, its
thresholds (the defaults: an idle server passes, a server kept busy fails)
and exit status, the SCAN for limiter keys, `--help`, and the Prometheus
format."""

import re
import subprocess
import sys
import threading
import time

import redis

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
    # The default thresholds: an idle server must pass them. A shared 2-core
    # machine is not always idle: another process taking the CPUs for a
    # tenth of a second really does slow 1% of the PINGs past 5 ms (seen
    # once in a fresh-machine run, p99 5.9 ms over 1440 PINGs). So the best
    # of five runs must pass; the old report alarmed on every run, and the
    # busy-server test below must alarm on its only one. (Five tries, two
    # seconds apart: the same fresh-machine run saw three servers in a row
    # alarm while the VM was slow for minutes; an idle run reads 0.2 ms.)
    runs = []
    for attempt in range(5):
        if attempt:
            time.sleep(2)
        out = health(server)
        runs.append(out)
        if out.returncode == 0:
            break
    assert out.returncode == 0, "\n---\n".join(r.stdout + r.stderr for r in runs)
    text = out.stdout
    assert "round trip: p50" in text and "slidewin.check: 6 calls" in text
    pings = int(re.search(r"over (\d+) PINGs", text).group(1))
    assert pings >= 100, "a p99 over enough samples"
    assert "sms:limit:*" in text, "the biggest keys, from the SCAN, as their pattern"
    assert "203.0.113.7" not in text and "10.0.0." not in text, "no key's name by default"
    assert "evicted_keys: 0" in text and "slidewin_checks_denied: 1" in text
    assert "most denied (SLIDEWIN.TOP 5):" in text
    assert "status: ok" in text


def test_a_server_held_by_another_client_alerts_on_latency(server):
    # Another client keeps the server busy (DEBUG SLEEP 20 ms, again and
    # again): a good share of the PINGs wait behind it.
    stop = threading.Event()

    def hold():
        c = server.client()
        while not stop.is_set():
            c.execute_command("DEBUG", "SLEEP", "0.02")
            time.sleep(0.002)

    t = threading.Thread(target=hold)
    t.start()
    try:
        out = health(server)
    finally:
        stop.set()
        t.join(timeout=10)
    assert out.returncode == 1, out.stdout + out.stderr
    alert = re.search(r"ALERT: round-trip p99 ([\d.]+) ms > 5 ms \((\d+) PINGs\)", out.stdout)
    assert alert, out.stdout
    assert float(alert.group(1)) > 5 and int(alert.group(2)) >= 100
    assert "status: ALERT" in out.stdout


def test_a_crossed_threshold_exits_1(server):
    lim = Limiter(server.client())
    lim.check("sms:limit:big", 10_000, 60_000, cost=5_000)
    out = health(server, "--big-key-bytes", "100000")
    assert out.returncode == 1, out.stdout
    assert "ALERT: 1 limiter keys over 100000 bytes, e.g. sms:limit:*" in out.stdout
    server.client().config_set("maxmemory-policy", "allkeys-lru")
    # The COST 5000 call above can pass 10 ms on a loaded machine and land
    # in the slow log, and a loaded machine can slow PINGs: only the
    # eviction warning is under test here (the default latency threshold
    # has its own two tests above).
    out = health(server, "--slow-ms", "100000", "--latency-ms", "1000", "--big-key-bytes", str(1 << 30))
    assert out.returncode == 0, out.stdout
    # No maxmemory: nothing is evicted yet, a warning.
    assert "WARNING: maxmemory-policy allkeys-lru can evict limiter keys (every limiter key carries a TTL); no maxmemory is set" in out.stdout


# The evicting policies (issue: clusters under change): every limiter key has
# a TTL, so the volatile-* ones take limiter keys first.
EVICTING = ["allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-lfu", "volatile-ttl", "volatile-random"]


def test_an_evicting_policy_with_limiter_keys_under_a_maxmemory_fails_the_check(store_server):
    c = store_server.client()
    lim = Limiter(c)
    lim.check("sms:limit:203.0.113.9", 5, 60_000)
    used = int(c.info("memory")["used_memory"])
    c.config_set("maxmemory", used + (64 << 20))  # far from full: nothing evicted
    for policy in EVICTING:
        c.config_set("maxmemory-policy", policy)
        out = health(store_server, "--slow-ms", "100000", "--latency-ms", "1000")
        assert out.returncode == 1, (policy, out.stdout)
        assert (f"ALERT: maxmemory-policy {policy} can evict limiter keys (every limiter key carries a TTL), "
                "and this server holds 1 of them under maxmemory") in out.stdout, out.stdout
        assert "run noeviction, or the limiter on an instance of its own" in out.stdout
        assert "evicted_keys: 0" in out.stdout
    # The store's keys are what it found: sorted sets or compact logs.
    kind = "1 limiter keys among 1 sorted sets and 0 compact logs" if store_server.log_type == "zset" \
        else "1 limiter keys among 0 sorted sets and 1 compact logs"
    assert kind in out.stdout, out.stdout
    c.config_set("maxmemory-policy", "noeviction")
    out = health(store_server, "--slow-ms", "100000", "--latency-ms", "1000")
    assert out.returncode == 0, out.stdout
    assert "maxmemory-policy" not in "".join(l for l in out.stdout.splitlines() if l.startswith(("ALERT", "WARNING")))


def test_evicted_limiter_keys_fail_the_check(store_server):
    # A real eviction: limiter keys (TTL) and cache values without one under
    # volatile-ttl and a maxmemory the values overflow: the limiter keys go,
    # and evicted_keys says so.
    c = store_server.client()
    lim = Limiter(c)
    for i in range(200):
        lim.check(f"sms:limit:10.1.{i // 250}.{i % 250}", 5, 600_000)
    used = int(c.info("memory")["used_memory"])
    c.config_set("maxmemory", used + (2 << 20))
    c.config_set("maxmemory-policy", "volatile-ttl")
    pipe = c.pipeline(transaction=False)
    refused = 0
    for i in range(64):
        pipe.set(f"cache:{i}", "x" * (64 << 10))
        try:
            pipe.execute()
        except redis.exceptions.ResponseError:
            refused += 1  # OOM once nothing evictable is left: the values have no TTL
    evicted = int(c.info("stats")["evicted_keys"])
    left = sum(1 for i in range(200) if c.exists(f"sms:limit:10.1.{i // 250}.{i % 250}"))
    assert evicted > 0 and left < 200, (evicted, left, refused)
    assert evicted == 200 - left, "volatile-ttl evicts only keys with a TTL: the limiter keys"
    out = health(store_server, "--slow-ms", "100000", "--latency-ms", "1000")
    assert out.returncode == 1, out.stdout
    assert f"ALERT: evicted_keys {evicted} > 0: an evicted limiter key forgets its entries" in out.stdout, out.stdout


def test_limiter_keys_of_any_name_are_found_and_other_keys_are_not(any_server):
    c = any_server.client()
    lim = Limiter(c)
    lim.check("api:user:42", 5, 60_000, cost=3)
    lim.check_all([("{u:7}:ip", 5, 60_000), ("{u:7}:phone", 1, 60_000)])
    lim.check("sms:limit:1.2.3.4", 5, 60_000)
    # The seed script's log: ms scores, "<ms>-<uuid>" members, EXPIRE.
    now_ms = int(time.time() * 1000)
    c.zadd("legacy:rl:9", {f"{now_ms}-6f1c": now_ms})
    c.expire("legacy:rl:9", 60)
    # Not limiters: a sorted set without a TTL, one scored by rank, a string.
    c.zadd("leaderboard", {"alice": now_ms, "bob": now_ms + 1})
    c.zadd("cache:ranks", {"a": 1, "b": 2})
    c.expire("cache:ranks", 60)
    c.set("api:user:42:name", "x")
    # Only the SCAN is under test here, not the latency threshold.
    out = health(any_server, "--latency-ms", "1000", "--key-names", "raw")
    assert out.returncode == 0, out.stdout + out.stderr
    listed = re.findall(r"^\s+\d+ B  (\S+)$", out.stdout, re.M)
    assert sorted(listed) == sorted(["api:user:42", "{u:7}:ip", "{u:7}:phone", "sms:limit:1.2.3.4", "legacy:rl:9"]), out.stdout
    assert "5 limiter keys among 7 sorted sets and 0 compact logs matching '*'; SCAN of the whole keyspace" in out.stdout
    # --match still narrows it.
    narrowed = health(any_server, "--match", "sms:*", "--key-names", "raw")
    assert re.findall(r"^\s+\d+ B  (\S+)$", narrowed.stdout, re.M) == ["sms:limit:1.2.3.4"]


def test_help_shows_every_default():
    out = subprocess.run([sys.executable, "-m", "slidewin", "health", "--help"], capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    options = re.findall(r"^\s+(--[a-z-]+|url)\b", out.stdout, re.M)
    assert {"url", "--match", "--scan-limit", "--latency-seconds", "--pings", "--ping-interval-ms", "--format",
            "--latency-ms", "--big-key-bytes", "--slow-ms"} <= set(options), options
    for default in ("(default: redis://127.0.0.1:6379/0)", "(default: *)", "(default: 100000)", "(default: 1.0)",
                    "(default: 2000)", "(default: 0.0)", "(default: text)", "(default: 5.0)", "(default: 1048576)",
                    "(default: 10.0)"):
        assert default in text, default


def exposition(text):
    """Parses the Prometheus text format strictly: returns {family: (type,
    help)} and [(family, sample name, labels, value text)]; fails on what
    breaks the exposition conventions."""
    families, samples, current = {}, [], None
    for line in text.splitlines():
        if not line:
            continue
        m = re.fullmatch(r"# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)", line)
        if m:
            kind, name, rest = m.groups()
            entry = families.setdefault(name, {})
            assert kind not in entry, f"a second # {kind} for {name}"
            assert not any(s[0] == name for s in samples), f"# {kind} {name} after its samples"
            entry[kind] = rest
            current = name
            continue
        assert not line.startswith("#"), line
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)', line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.groups()
        family = current if current and (name == current or name in (current + "_sum", current + "_count")) else name
        assert family == current, f"{name}: samples of a family must follow its HELP and TYPE"
        float(value)
        samples.append((family, name, labels or "", value))
    for name, entry in families.items():
        assert set(entry) == {"HELP", "TYPE"}, f"{name} lacks # HELP or # TYPE"
        kind = entry["TYPE"]
        assert kind in ("counter", "gauge", "summary", "histogram", "untyped"), kind
        assert name.endswith("_total") == (kind == "counter"), f"{name} is a {kind}: counters end in _total, nothing else does"
    return families, samples


def test_prometheus_format_follows_the_exposition_conventions(server):
    lim = Limiter(server.client())
    lim.check("sms:limit:1", 5, 60_000)
    lim.check("sms:limit:1", 1, 60_000)
    out = health(server, "--format", "prometheus", "--latency-ms", "1000")
    assert out.returncode == 0, out.stderr
    families, samples = exposition(out.stdout)
    values = {n + l: v for _, n, l, v in samples}
    # Integers are printed as integers.
    for key in ('slidewin_command_calls_total{command="slidewin.check"}', "slidewin_evicted_keys_total",
                "slidewin_checks_allowed_total", "slidewin_checks_denied_total", 'slidewin_key_bytes{key="sms:limit:*"}',
                "slidewin_health_alerts", "slidewin_ping_rtt_seconds_count", "slidewin_top_capacity"):
        assert re.fullmatch(r"\d+", values[key]), (key, values[key])
    assert values['slidewin_command_calls_total{command="slidewin.check"}'] == "2"
    assert values["slidewin_checks_allowed_total"] == "1" and values["slidewin_checks_denied_total"] == "1"
    assert values["slidewin_evicted_keys_total"] == "0" and values["slidewin_health_alerts"] == "0"
    assert int(values['slidewin_key_bytes{key="sms:limit:*"}']) > 0
    assert int(values["slidewin_ping_rtt_seconds_count"]) >= 100
    # Counters and gauges by what they are; the round trip in seconds.
    assert families["slidewin_command_calls_total"]["TYPE"] == "counter"
    assert families["slidewin_evicted_keys_total"]["TYPE"] == "counter"
    assert families["slidewin_checks_denied_total"]["TYPE"] == "counter"
    assert families["slidewin_key_bytes"]["TYPE"] == "gauge"
    assert families["slidewin_top_capacity"]["TYPE"] == "gauge"
    assert families["slidewin_ping_rtt_seconds"]["TYPE"] == "summary"
    assert 0 < float(values['slidewin_ping_rtt_seconds{quantile="0.99"}']) < 1


def test_an_unreachable_server_exits_2(server):
    server.kill()
    out = health(server)
    assert out.returncode == 2 and "cannot ask" in out.stderr
