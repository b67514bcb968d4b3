"""`python -m slidewin health [redis-url]`: a rate limiter's monitoring checks
in one report, with an exit status for cron or CI.

Thresholds (each has an option below): round-trip latency p99 over 5 ms; a limiter
key over 1 MB (MEMORY USAGE); slow-log entries over 10 ms naming SLIDEWIN
or the sorted-set commands; `evicted_keys` above 0 (an evicted limiter key
forgets its entries: its caller gets a fresh window). A `maxmemory-policy`
that can evict limiter keys (`allkeys-*`, or `volatile-*`: every limiter key
carries a TTL, so those take them first) on a server that holds limiter
keys and has a `maxmemory` is an alert too; without a `maxmemory` (nothing
is evicted yet) or without limiter keys it is a warning. Run `noeviction`,
or the limiter on an instance of its own.
Exit status: 0 healthy, 1 a threshold crossed, 2 the server could not be
reached or asked.

The round trip is measured on a connection already set up (its first
PING, which pays the connect, is not counted), one PING at a time, as
`redis-cli --latency` does, for a second or 2000 PINGs, whichever comes
first (at least 100 unless that takes 10 times longer): the p99 is a real
percentile, not the slowest of a few samples. The PINGs follow each other
without a pause by default: a pause lets the measuring host's CPUs go idle,
and waking them adds milliseconds on virtual machines that are not the
server's (`--ping-interval-ms` adds one, as redis-cli's 10 ms).

Limiter keys are found by a bounded SCAN of the sorted sets (all keys by
default; `--match` narrows it): the report counts those that look like a
limiter's log (a TTL, and scores that are times in milliseconds, as
slidewin, its FUNCTION library and the Lua script slidewin replaces write
them), and every compact log (`slidewin.log-type compact`: the type
`slidewlog`), and shows the biggest by MEMORY USAGE. (The Lua script
slidewin replaces: the usual sorted-set limiter run by EVAL, which trims
with ZREMRANGEBYSCORE, counts with ZCARD and adds a `<ms>-<uuid>` member
with ZADD, on the client's clock.)

Key names say who is limited (phone numbers, addresses, user ids), and a
report goes to files, dashboards and chat. So the report names keys by
pattern by default: `sms:limit:203.0.113.7` is shown as `sms:limit:*`,
keys of one pattern added up (`--key-names pattern`). `--key-names hash`
shows a keyed hash of each name instead (HMAC-SHA256 with the secret in
SLIDEWIN_KEY_HASH_SECRET: stable across reports, unreadable without the
secret). `--key-names raw` shows the names themselves, and the slow log's
arguments: only where the report stays as private as the data.
"""

import argparse
import hashlib
import hmac
import os
import re
import sys
import time
from typing import Dict, Iterable, List, Optional, Tuple

import redis

from .local import key_bytes

LATENCY_MS = 5.0
LATENCY_SECONDS = 1.0
MAX_PINGS = 2000
MIN_PINGS = 100
PING_INTERVAL_MS = 0.0
BIG_KEY_BYTES = 1 << 20
SLOW_US = 10_000
MATCH = "*"
SCAN_LIMIT = 100_000
SCAN_COUNT = 1000
SORTED_SET_COMMANDS = ("zadd", "zrem", "zremrangebyscore", "zcard", "zcount", "zrange", "zscore", "evalsha", "eval", "fcall", "fcall_ro")
# Scores of a limiter log are Unix times in ms: 2001-09-09 to 2286-11-20.
MS_TIME_RANGE = (10**12, 10**13)
# The data type of the module's compact logs.
COMPACT_TYPE = "slidewlog"
# Policies under which a server with a maxmemory evicts keys with a TTL.
EVICTING = ("allkeys-", "volatile-")
# How key names appear in the report (--key-names).
PATTERN, HASH, RAW = "pattern", "hash", "raw"
KEY_NAMES = (PATTERN, HASH, RAW)
# The secret of --key-names hash.
HASH_SECRET_ENV = "SLIDEWIN_KEY_HASH_SECRET"
# A segment of a key name kept in its pattern: letters, '_' and '-' only.
_WORD = re.compile(rb"[A-Za-z_-]+")


def key_pattern(key) -> str:
    """A key's shape without who it limits: the `:`-separated segments
    made of letters (`sms`, `limit`, `ip`) are kept, every other segment
    (numbers, addresses, phone numbers, names: anything with a digit or a
    sign, and always the last segment) becomes `*`.
    `sms:limit:9.9.9.9` and `sms:limit:+8613800000000` are `sms:limit:*`,
    `login:alice` is `login:*`."""
    parts = key_bytes(key).split(b":")
    out = [p.decode("ascii") if _WORD.fullmatch(p) and i < len(parts) - 1 else "*" for i, p in enumerate(parts)]
    return ":".join(out)


def key_hash(key, secret: bytes) -> str:
    """A keyed hash of a key's name (HMAC-SHA256, 16 hex digits): the same
    key gives the same label in every report made with the same secret, and
    the name cannot be read back or guessed from it without the secret."""
    return "h:" + hmac.new(secret, key_bytes(key), hashlib.sha256).hexdigest()[:16]


def raw_name(key) -> str:
    """The key's name as text: UTF-8, other bytes as \\xNN escapes."""
    return key_bytes(key).decode("utf-8", errors="backslashreplace")


class KeyNames:
    """How the report names keys: `pattern` (default: `key_pattern`, keys of
    one pattern added up), `hash` (`key_hash`, needs a secret) or `raw`
    (the names themselves: phone numbers, addresses, user ids go wherever
    the report goes)."""

    def __init__(self, mode: str = PATTERN, secret: Optional[bytes] = None):
        if mode not in KEY_NAMES:
            raise ValueError(f"key names must be one of {KEY_NAMES}, got {mode!r}")
        if mode == HASH and not secret:
            raise ValueError(f"--key-names hash needs a secret in the environment variable {HASH_SECRET_ENV}")
        self.mode = mode
        self.secret = secret

    def name(self, key) -> str:
        if self.mode == RAW:
            return raw_name(key)
        if self.mode == HASH:
            return key_hash(key, self.secret)
        return key_pattern(key)

    def biggest(self, sizes: List[Tuple[int, bytes]], top: int) -> List[Dict]:
        """The `top` biggest, by name: with patterns, one row per pattern
        (its biggest key's bytes and how many keys it has)."""
        rows: Dict[str, Dict] = {}
        for size, key in sorted(sizes, reverse=True):
            row = rows.setdefault(self.name(key), {"key": self.name(key), "bytes": size, "keys": 0})
            row["keys"] += 1
        return sorted(rows.values(), key=lambda r: (-r["bytes"], r["key"]))[:top]

    def top(self, entries: Iterable[Tuple[bytes, int, int]], top: int) -> List[Tuple[str, int, int]]:
        """SLIDEWIN.TOP's keys by name, counts and bounds added per name."""
        merged: Dict[str, Tuple[int, int]] = {}
        for key, count, error in entries:
            c, e = merged.get(self.name(key), (0, 0))
            merged[self.name(key)] = (c + count, e + error)
        return sorted(((k, c, e) for k, (c, e) in merged.items()), key=lambda t: (-t[1], t[0]))[:top]


def percentile(values: List[float], p: float) -> float:
    """The p-th percentile (nearest rank) of `values`."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, int(-(-p * len(ordered) // 100)))
    return ordered[min(rank, len(ordered)) - 1]


def _text(v) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def sample_round_trips(
    r: redis.Redis,
    seconds: float = LATENCY_SECONDS,
    max_pings: int = MAX_PINGS,
    interval_ms: float = PING_INTERVAL_MS,
    min_pings: int = MIN_PINGS,
) -> List[float]:
    """PING round trips in ms, as `redis-cli --latency` takes them: the
    first PING (which pays the connection set-up) is not counted; then one
    PING at a time, `interval_ms` apart, for `seconds` or `max_pings`,
    whichever comes first, and at least `min_pings` unless that takes more
    than 10 x `seconds`."""
    r.ping()  # connects: not counted
    rtts: List[float] = []
    start = time.perf_counter()
    while len(rtts) < max_pings:
        elapsed = time.perf_counter() - start
        if elapsed >= seconds and (len(rtts) >= min_pings or elapsed >= 10 * seconds):
            break
        t = time.perf_counter()
        r.ping()
        rtts.append((time.perf_counter() - t) * 1000)
        if interval_ms > 0:
            time.sleep(interval_ms / 1000)
    return rtts


def scan_limiter_keys(r: redis.Redis, match: str, scan_limit: int) -> Dict:
    """A SCAN of the sorted sets matching `match`, stopped once it has
    stepped over about `scan_limit` keys: how many it saw, and the size of
    those that look like a limiter's log (a TTL, lowest score a time in
    ms)."""
    found: List[Tuple[int, str]] = []
    cursor, steps, sorted_sets = 0, 0, 0
    compact = scan_compact_logs(r, match, scan_limit)
    found.extend(compact["limiter_keys"])
    while True:
        cursor, keys = r.scan(cursor=cursor, match=match, count=SCAN_COUNT, _type="zset")
        steps += 1
        if keys:
            sorted_sets += len(keys)
            pipe = r.pipeline(transaction=False)
            for key in keys:
                pipe.pttl(key)
                pipe.zrange(key, 0, 0, withscores=True)
            replies = pipe.execute()
            limiters = [
                key
                for key, ttl, lowest in zip(keys, replies[::2], replies[1::2])
                if int(ttl) > 0 and lowest and MS_TIME_RANGE[0] <= float(lowest[0][1]) < MS_TIME_RANGE[1]
            ]
            if limiters:
                pipe = r.pipeline(transaction=False)
                for key in limiters:
                    pipe.memory_usage(key, samples=0)
                for key, size in zip(limiters, pipe.execute()):
                    found.append((int(size or 0), key_bytes(key)))
        if int(cursor) == 0 or steps * SCAN_COUNT >= scan_limit:
            break
    return {
        "sorted_sets": sorted_sets,
        "compact_logs": len(compact["limiter_keys"]),
        "limiter_keys": found,
        "complete": int(cursor) == 0 and compact["complete"],
    }


def scan_compact_logs(r: redis.Redis, match: str, scan_limit: int) -> Dict:
    """A bounded SCAN of the compact logs matching `match` (each one is a
    limiter's log) with their MEMORY USAGE; none where the server does not
    know the type (the module in its default mode, or not loaded)."""
    found: List[Tuple[int, str]] = []
    cursor, steps = 0, 0
    while True:
        try:
            cursor, keys = r.scan(cursor=cursor, match=match, count=SCAN_COUNT, _type=COMPACT_TYPE)
        except redis.exceptions.ResponseError:
            return {"limiter_keys": [], "complete": True}  # a server that refuses an unknown type
        steps += 1
        if keys:
            pipe = r.pipeline(transaction=False)
            for key in keys:
                pipe.memory_usage(key, samples=0)
            for key, size in zip(keys, pipe.execute()):
                found.append((int(size or 0), key_bytes(key)))
        if int(cursor) == 0 or steps * SCAN_COUNT >= scan_limit:
            break
    return {"limiter_keys": found, "complete": int(cursor) == 0}


def gather(
    r: redis.Redis,
    match: str = MATCH,
    latency_seconds: float = LATENCY_SECONDS,
    pings: int = MAX_PINGS,
    ping_interval_ms: float = PING_INTERVAL_MS,
    scan_limit: int = SCAN_LIMIT,
    top: int = 10,
    latency_ms: float = LATENCY_MS,
    big_key_bytes: int = BIG_KEY_BYTES,
    slow_us: int = SLOW_US,
    key_names: Optional[KeyNames] = None,
    limiters: Iterable = (),
) -> Dict:
    """Asks the server everything the report shows; the thresholds default
    to the ones in the module's docstring. Keys are named by `key_names`
    (patterns by default); `limiters` (this process's `Limiter`s) add
    their counts of the decisions the server did not make."""
    names = key_names or KeyNames()
    out: Dict = {"alerts": [], "warnings": [], "thresholds": {"latency_ms": latency_ms, "big_key_bytes": big_key_bytes, "slow_us": slow_us}}
    rtts = sample_round_trips(r, latency_seconds, pings, ping_interval_ms)
    out["ping_ms"] = {"p50": percentile(rtts, 50), "p99": percentile(rtts, 99), "samples": len(rtts), "sum": sum(rtts)}
    if out["ping_ms"]["p99"] > latency_ms:
        out["alerts"].append(f"round-trip p99 {out['ping_ms']['p99']:.2f} ms > {latency_ms:g} ms ({len(rtts)} PINGs)")

    # The server's own figures for the SLIDEWIN commands, where it keeps them.
    stats = r.info("commandstats")
    out["commands"] = {
        name[len("cmdstat_"):]: {
            "calls": int(v.get("calls", 0)),
            "usec": int(v.get("usec", 0)),
            "usec_per_call": float(v.get("usec_per_call", 0)),
        }
        for name, v in stats.items()
        if name.startswith("cmdstat_slidewin.")
    }
    try:
        hist = r.execute_command("LATENCY", "HISTOGRAM", *out["commands"].keys()) if out["commands"] else []
        out["latency_histogram"] = _histogram_p99(hist)
    except redis.exceptions.ResponseError:
        out["latency_histogram"] = {}  # Redis/Valkey before 7.0 keep none

    slow = []
    for entry in r.slowlog_get(128):
        cmd = entry.get("command", b"")
        name = _text(cmd).split(" ", 1)[0].lower()
        if entry.get("duration", 0) > slow_us and (name.startswith("slidewin.") or name in SORTED_SET_COMMANDS):
            # The arguments name keys: shown only with raw key names.
            shown = _text(cmd)[:120] if names.mode == RAW else name
            slow.append({"command": shown, "duration_us": int(entry["duration"])})
    out["slowlog"] = slow
    if slow:
        out["alerts"].append(f"{len(slow)} slow-log entries over {slow_us / 1000:g} ms name SLIDEWIN or sorted-set commands")

    scan = scan_limiter_keys(r, match, scan_limit)
    sizes = sorted(scan["limiter_keys"], reverse=True)
    out["scan"] = {"match": match, "sorted_sets": scan["sorted_sets"], "compact_logs": scan["compact_logs"],
                   "limiter_keys": len(sizes), "complete": scan["complete"], "limit": scan_limit}
    out["key_names"] = names.mode
    out["biggest"] = names.biggest(sizes, top)
    big = [k for b, k in sizes if b > big_key_bytes]
    if big:
        out["alerts"].append(f"{len(big)} limiter keys over {big_key_bytes} bytes, e.g. {names.name(big[0])}")

    info = r.info("stats")
    out["evicted_keys"] = int(info.get("evicted_keys", 0))
    if out["evicted_keys"] > 0:
        out["alerts"].append(
            f"evicted_keys {out['evicted_keys']} > 0: an evicted limiter key forgets its entries, "
            "and its caller gets a fresh window (over-admission)"
        )
    policy = _text(r.config_get("maxmemory-policy").get("maxmemory-policy", "noeviction"))
    maxmemory = int(r.config_get("maxmemory").get("maxmemory", 0) or 0)
    out["maxmemory_policy"] = policy
    out["maxmemory"] = maxmemory
    if policy.startswith(EVICTING):
        why = f"maxmemory-policy {policy} can evict limiter keys (every limiter key carries a TTL)"
        fix = "run noeviction, or the limiter on an instance of its own"
        if sizes and maxmemory > 0:
            out["alerts"].append(
                f"{why}, and this server holds {len(sizes)} of them under maxmemory {maxmemory}: "
                f"an evicted one admits a fresh window; {fix}"
            )
        elif sizes:
            out["warnings"].append(f"{why}; no maxmemory is set, so none is evicted yet; {fix}")
        else:
            out["warnings"].append(f"{why}; none was found on this server")

    try:
        section = r.info("slidewin")
        out["slidewin"] = {k: v for k, v in section.items() if k.startswith("slidewin_")}
        # The counters: the fields of the module's stats section.
        out["slidewin_counters"] = sorted(k for k in r.info("slidewin_stats") if k.startswith("slidewin_"))
    except redis.exceptions.ResponseError:
        out["slidewin"], out["slidewin_counters"] = {}, []
    if not out["slidewin"]:
        out["warnings"].append("INFO slidewin is empty: the module is not loaded (the FUNCTION library may be in use)")
    try:
        reply = r.execute_command("SLIDEWIN.TOP", 5, "DENIED")
        out["top_denied"] = names.top(((k, int(c), int(e)) for k, c, e in reply), 5)
    except redis.exceptions.ResponseError as e:
        out["top_denied"] = None  # no module, summary off, or no admin rights
        out["top_error"] = str(e)
    out["client"] = client_counts(limiters)
    return out


def client_counts(limiters: Iterable) -> Dict:
    """The decisions of this process's limiters, added up: {"decisions":
    {source: {reason: n}}, "shadow_refused": {source: n}, "breaker_opened":
    n, "breakers_open": n}."""
    decisions: Dict[str, Dict[str, int]] = {}
    shadow: Dict[str, int] = {}
    opened = open_now = 0
    for lim in limiters:
        s = lim.stats()
        for source, reasons in s["decisions"].items():
            for reason, n in reasons.items():
                decisions.setdefault(source, {})[reason] = decisions.get(source, {}).get(reason, 0) + n
        for source, n in s.get("shadow_refused", {}).items():
            shadow[source] = shadow.get(source, 0) + n
        opened += s["breaker"]["opened"]
        open_now += s["breaker"]["state"] != "closed"
    return {"decisions": decisions, "shadow_refused": shadow, "breaker_opened": opened, "breakers_open": open_now}


def client_prometheus(*limiters) -> str:
    """The decisions of this process's limiters in the Prometheus text
    format, for an application's own metrics endpoint:
    `slidewin_client_decisions_total{source,reason}`,
    `slidewin_client_shadow_refused_total{source}`,
    `slidewin_client_breaker_opened_total`, `slidewin_client_breakers_open`."""
    e = _Exposition()
    _client_families(e, client_counts(limiters))
    return e.text()


def _client_families(e: "_Exposition", client: Dict) -> None:
    e.family(
        "slidewin_client_decisions_total",
        "counter",
        "Decisions of this process's limiters by source (redis, function: the server; local-cache, fallback: not) and reason.",
        [({"source": src, "reason": why}, n) for src, reasons in sorted(client["decisions"].items()) for why, n in sorted(reasons.items())],
    )
    e.family(
        "slidewin_client_shadow_refused_total",
        "counter",
        "Shadow calls (SHADOW) let through that the limit (source redis, function) or the outage policy (fallback) would have refused.",
        [({"source": src}, n) for src, n in sorted(client.get("shadow_refused", {}).items())],
    )
    e.family("slidewin_client_breaker_opened_total", "counter", "Times the limiters' circuit breakers opened.",
             [(None, client["breaker_opened"])])
    e.family("slidewin_client_breakers_open", "gauge", "Limiters whose circuit breaker is open now.",
             [(None, client["breakers_open"])])


def _histogram_p99(reply) -> Dict[str, Dict[str, float]]:
    """Per command: calls and the p99 bucket (µs) of LATENCY HISTOGRAM."""
    result = {}
    items = reply if isinstance(reply, list) else []
    if isinstance(reply, dict):
        items = [x for kv in reply.items() for x in kv]
    for name, body in zip(items[::2], items[1::2]):
        fields = dict(zip(body[::2], body[1::2])) if isinstance(body, list) else body
        fields = {_text(k): v for k, v in fields.items()}
        calls = int(fields.get("calls", 0))
        buckets = fields.get("histogram_usec", [])
        if isinstance(buckets, dict):
            pairs = sorted((int(k), int(v)) for k, v in buckets.items())
        else:
            pairs = [(int(a), int(b)) for a, b in zip(buckets[::2], buckets[1::2])]
        p99 = next((us for us, cumulative in pairs if cumulative >= 0.99 * calls), 0)
        result[_text(name)] = {"calls": calls, "p99_usec": p99}
    return result


def render_text(out: Dict) -> str:
    ping = out["ping_ms"]
    lines = [
        f"round trip: p50 {ping['p50']:.3f} ms, p99 {ping['p99']:.3f} ms over {ping['samples']} PINGs (threshold {out['thresholds']['latency_ms']:g} ms)",
    ]
    for name, c in sorted(out["commands"].items()):
        h = out["latency_histogram"].get(name, {})
        p99 = f", p99 ≤ {h['p99_usec']} µs" if h else ""
        lines.append(f"{name}: {c['calls']} calls, {c['usec_per_call']:.2f} µs per call{p99}")
    lines.append(f"slow log (> {out['thresholds']['slow_us'] / 1000:g} ms, SLIDEWIN or sorted sets): {len(out['slowlog'])}")
    for s in out["slowlog"][:5]:
        lines.append(f"  {s['duration_us']} µs  {s['command']}")
    scan = out["scan"]
    extent = "the whole keyspace" if scan["complete"] else f"stopped after ~{scan['limit']} keys (--scan-limit)"
    lines.append(
        f"biggest limiter keys ({scan['limiter_keys']} limiter keys among {scan['sorted_sets']} sorted sets and {scan['compact_logs']} compact logs matching {scan['match']!r}; SCAN of {extent}):"
    )
    if out.get("key_names", PATTERN) == PATTERN:
        lines.append("  (key names as patterns: --key-names)")
    for b in out["biggest"]:
        many = f" ({b['keys']} keys)" if b.get("keys", 1) > 1 else ""
        lines.append(f"  {b['bytes']:>10} B  {b['key']}{many}")
    lines.append(
        f"evicted_keys: {out['evicted_keys']}; maxmemory-policy: {out['maxmemory_policy']}; maxmemory: {out['maxmemory']}"
    )
    for k, v in out["slidewin"].items():
        lines.append(f"{k}: {v}")
    if out.get("top_denied"):
        lines.append("most denied (SLIDEWIN.TOP 5):")
        for k, c, e in out["top_denied"]:
            lines.append(f"  {c:>8} (±{e})  {k}")
    client = out.get("client") or {}
    for src, reasons in sorted(client.get("decisions", {}).items()):
        lines.append(f"this process's limiters, {src}: " + ", ".join(f"{why} {n}" for why, n in sorted(reasons.items())))
    if client.get("shadow_refused"):
        lines.append("this process's shadow calls let through that would have been refused: "
                     + ", ".join(f"{src} {n}" for src, n in sorted(client["shadow_refused"].items())))
    for w in out["warnings"]:
        lines.append(f"WARNING: {w}")
    for a in out["alerts"]:
        lines.append(f"ALERT: {a}")
    lines.append("status: " + ("ALERT" if out["alerts"] else "ok"))
    return "\n".join(lines)


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(v) -> str:
    """A sample value: integers as integers (`46`, not `46.0`)."""
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    f = float(v)
    if f.is_integer() and abs(f) < 2**53:
        return str(int(f))
    return repr(f)


def _metric_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_:" else "_" for ch in name)


class _Exposition:
    """Metric families in the Prometheus text format: `# HELP` and
    `# TYPE` once before each family's samples; counters end in `_total`,
    other types do not; values are numbers."""

    def __init__(self):
        self.lines: List[str] = []

    def family(self, name: str, kind: str, help_text: str, samples) -> None:
        """`samples`: (labels dict or None, value, suffix) or (labels, value)."""
        if kind == "counter" and not name.endswith("_total"):
            raise ValueError(f"counter {name} must end in _total")
        if kind != "counter" and name.endswith("_total"):
            raise ValueError(f"{kind} {name} must not end in _total")
        samples = list(samples)
        if not samples:
            return
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for sample in samples:
            labels, value = sample[0], sample[1]
            suffix = sample[2] if len(sample) > 2 else ""
            text = ""
            if labels:
                text = "{" + ",".join(f'{k}="{_label(str(v))}"' for k, v in labels.items()) + "}"
            self.lines.append(f"{name}{suffix}{text} {_value(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render_prometheus(out: Dict) -> str:
    """The same figures in the Prometheus text exposition format (for
    node_exporter's textfile collector): base units (seconds, bytes),
    `_total` counters, a HELP and a TYPE line per family."""
    e = _Exposition()
    ping = out["ping_ms"]
    e.family(
        "slidewin_ping_rtt_seconds",
        "summary",
        "Round-trip time of PING on a warmed connection, sampled by the health report.",
        [
            ({"quantile": "0.5"}, ping["p50"] / 1000),
            ({"quantile": "0.99"}, ping["p99"] / 1000),
            (None, ping["sum"] / 1000, "_sum"),
            (None, ping["samples"], "_count"),
        ],
    )
    commands = sorted(out["commands"].items())
    e.family(
        "slidewin_command_calls_total",
        "counter",
        "Calls of each SLIDEWIN command (INFO commandstats).",
        [({"command": n}, c["calls"]) for n, c in commands],
    )
    e.family(
        "slidewin_command_duration_seconds_total",
        "counter",
        "Time the server spent in each SLIDEWIN command (INFO commandstats usec).",
        [({"command": n}, c["usec"] / 1e6) for n, c in commands],
    )
    e.family(
        "slidewin_command_latency_p99_seconds",
        "gauge",
        "Upper bound of the LATENCY HISTOGRAM bucket holding each command's 99th percentile.",
        [({"command": n}, h["p99_usec"] / 1e6) for n, h in sorted(out["latency_histogram"].items())],
    )
    e.family(
        "slidewin_slowlog_entries",
        "gauge",
        "Slow-log entries over the threshold naming SLIDEWIN or sorted-set commands.",
        [(None, len(out["slowlog"]))],
    )
    e.family(
        "slidewin_limiter_keys",
        "gauge",
        "Limiter keys found by the health report's bounded SCAN.",
        [(None, out["scan"]["limiter_keys"])],
    )
    e.family(
        "slidewin_key_bytes",
        "gauge",
        "MEMORY USAGE of the biggest limiter keys (per key pattern, keyed hash or name: --key-names).",
        [({"key": b["key"]}, b["bytes"]) for b in out["biggest"]],
    )
    e.family("slidewin_evicted_keys_total", "counter", "Keys evicted by the server (INFO stats evicted_keys).", [(None, out["evicted_keys"])])
    e.family(
        "slidewin_maxmemory_policy_can_evict",
        "gauge",
        "1 when maxmemory-policy can evict limiter keys (allkeys-*, volatile-*).",
        [(None, int(out["maxmemory_policy"].startswith(("allkeys-", "volatile-"))))],
    )
    counters = set(out.get("slidewin_counters", ()))
    for k, v in out["slidewin"].items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        name = _metric_name(k)
        if k in counters:
            e.family(name + "_total", "counter", f"INFO slidewin {k}: a counter since the module loaded.", [(None, v)])
        else:
            e.family(name, "gauge", f"INFO slidewin {k}.", [(None, v)])
    e.family(
        "slidewin_top_denied",
        "gauge",
        "Denials of the most denied keys over the SLIDEWIN.TOP period (per key pattern, keyed hash or name: --key-names).",
        [({"key": k}, c) for k, c, _ in out.get("top_denied") or []],
    )
    if out.get("client", {}).get("decisions"):
        _client_families(e, out["client"])
    e.family("slidewin_health_alerts", "gauge", "Thresholds the health report found crossed.", [(None, len(out["alerts"]))])
    return e.text()


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written, every option's default shown."""


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m slidewin", description=__doc__, formatter_class=_HelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    h = sub.add_parser(
        "health",
        help="report latency, slow log, big keys, evictions and the module's counters",
        description=__doc__,
        formatter_class=_HelpFormatter,
    )
    h.add_argument("url", nargs="?", default="redis://127.0.0.1:6379/0", help="the server to ask")
    h.add_argument("--match", default=MATCH, help="SCAN pattern: only sorted sets matching it are considered (limiter-looking ones are reported)")
    h.add_argument("--scan-limit", type=int, default=SCAN_LIMIT, help="stop the SCAN after stepping over about this many keys")
    h.add_argument("--latency-seconds", type=float, default=LATENCY_SECONDS, help="sample the PING round trip for this long")
    h.add_argument("--pings", type=int, default=MAX_PINGS, help=f"at most this many PINGs (at least {MIN_PINGS} are taken unless that takes 10 x --latency-seconds)")
    h.add_argument("--ping-interval-ms", type=float, default=PING_INTERVAL_MS, help="pause between two PINGs")
    h.add_argument("--format", choices=("text", "prometheus"), default="text", help="text report or Prometheus text exposition")
    h.add_argument("--latency-ms", type=float, default=LATENCY_MS, help="alert when the PING p99 is above this (ms)")
    h.add_argument("--big-key-bytes", type=int, default=BIG_KEY_BYTES, help="alert on limiter keys above this (bytes)")
    h.add_argument("--slow-ms", type=float, default=SLOW_US / 1000, help="alert on slow-log entries above this (ms)")
    h.add_argument("--key-names", choices=KEY_NAMES, default=PATTERN,
                   help=f"how keys are named: pattern (sms:limit:*), hash (keyed with ${HASH_SECRET_ENV}) or raw (the names: who is limited; private data)")
    opts = ap.parse_args(argv)
    secret = os.environ.get(HASH_SECRET_ENV, "").encode()
    try:
        names = KeyNames(opts.key_names, secret)
    except ValueError as e:
        print(f"slidewin health: {e}", file=sys.stderr)
        return 2
    if names.mode == RAW:
        print("slidewin health: warning: --key-names raw puts key names (who is limited) into the report", file=sys.stderr)
    try:
        r = redis.Redis.from_url(opts.url, socket_timeout=5, socket_connect_timeout=5)
        out = gather(
            r,
            opts.match,
            latency_seconds=opts.latency_seconds,
            pings=opts.pings,
            ping_interval_ms=opts.ping_interval_ms,
            scan_limit=opts.scan_limit,
            latency_ms=opts.latency_ms,
            big_key_bytes=opts.big_key_bytes,
            slow_us=int(opts.slow_ms * 1000),
            key_names=names,
        )
    except redis.exceptions.RedisError as e:
        print(f"slidewin health: cannot ask {opts.url}: {e}", file=sys.stderr)
        return 2
    print(render_prometheus(out) if opts.format == "prometheus" else render_text(out), end="" if opts.format == "prometheus" else "\n")
    return 1 if out["alerts"] else 0
