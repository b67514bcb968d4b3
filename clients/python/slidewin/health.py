"""`python -m slidewin health [redis-url] [--match 'sms:limit:*']`: the
seeds' monitoring checks in one report, with an exit status for cron or CI.

Thresholds (the second seed's): round-trip latency p99 over 5 ms; a limiter
key over 1 MB (MEMORY USAGE); slow-log entries over 10 ms naming SLIDEWIN
or the sorted-set commands; `evicted_keys` above 0 (an evicted limiter key
forgets its entries). A `maxmemory-policy` that can evict limiter keys
(`allkeys-*`, or `volatile-*`: limiter keys carry a TTL) is a warning.
Exit status: 0 healthy, 1 a threshold crossed, 2 the server could not be
reached or asked.
"""

import argparse
import sys
import time
from typing import Dict, List, Optional, Tuple

import redis

LATENCY_MS = 5.0
BIG_KEY_BYTES = 1 << 20
SLOW_US = 10_000
SORTED_SET_COMMANDS = ("zadd", "zrem", "zremrangebyscore", "zcard", "zcount", "zrange", "zscore", "evalsha", "eval", "fcall", "fcall_ro")


def percentile(values: List[float], p: float) -> float:
    """The p-th percentile (nearest rank) of `values`."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, int(-(-p * len(ordered) // 100)))
    return ordered[min(rank, len(ordered)) - 1]


def _text(v) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def gather(
    r: redis.Redis,
    match: str,
    pings: int = 50,
    scan_limit: int = 10_000,
    top: int = 10,
    latency_ms: float = LATENCY_MS,
    big_key_bytes: int = BIG_KEY_BYTES,
    slow_us: int = SLOW_US,
) -> Dict:
    """Asks the server everything the report shows; the thresholds default
    to the seeds'."""
    out: Dict = {"alerts": [], "warnings": [], "thresholds": {"latency_ms": latency_ms, "big_key_bytes": big_key_bytes, "slow_us": slow_us}}
    rtts = []
    for _ in range(pings):
        t = time.perf_counter()
        r.ping()
        rtts.append((time.perf_counter() - t) * 1000)
    out["ping_ms"] = {"p50": percentile(rtts, 50), "p99": percentile(rtts, 99)}
    if out["ping_ms"]["p99"] > latency_ms:
        out["alerts"].append(f"round-trip p99 {out['ping_ms']['p99']:.2f} ms > {latency_ms} ms")

    # The server's own figures for the SLIDEWIN commands, where it keeps them.
    stats = r.info("commandstats")
    out["commands"] = {
        name[len("cmdstat_"):]: {"calls": int(v.get("calls", 0)), "usec_per_call": float(v.get("usec_per_call", 0))}
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
            slow.append({"command": _text(cmd)[:120], "duration_us": int(entry["duration"])})
    out["slowlog"] = slow
    if slow:
        out["alerts"].append(f"{len(slow)} slow-log entries over {slow_us / 1000:g} ms name SLIDEWIN or sorted-set commands")

    # The biggest limiter keys, from a bounded SCAN.
    sizes: List[Tuple[int, str]] = []
    scanned = 0
    for key in r.scan_iter(match=match, count=1000):
        scanned += 1
        size = r.memory_usage(key, samples=0) or 0
        sizes.append((int(size), _text(key)))
        if scanned >= scan_limit:
            break
    sizes.sort(reverse=True)
    out["scanned"] = scanned
    out["biggest"] = [{"key": k, "bytes": b} for b, k in sizes[:top]]
    big = [k for b, k in sizes if b > big_key_bytes]
    if big:
        out["alerts"].append(f"{len(big)} limiter keys over {big_key_bytes} bytes, e.g. {big[0]}")

    info = r.info("stats")
    out["evicted_keys"] = int(info.get("evicted_keys", 0))
    if out["evicted_keys"] > 0:
        out["alerts"].append(f"evicted_keys {out['evicted_keys']} > 0: evicted limiter keys forget their entries")
    policy = _text(r.config_get("maxmemory-policy").get("maxmemory-policy", "noeviction"))
    out["maxmemory_policy"] = policy
    if policy.startswith(("allkeys-", "volatile-")):
        out["warnings"].append(f"maxmemory-policy {policy} can evict limiter keys (they carry a TTL)")

    try:
        section = r.info("slidewin")
        out["slidewin"] = {k: v for k, v in section.items() if k.startswith("slidewin_")}
    except redis.exceptions.ResponseError:
        out["slidewin"] = {}
    if not out["slidewin"]:
        out["warnings"].append("INFO slidewin is empty: the module is not loaded (the FUNCTION library may be in use)")
    try:
        out["top_denied"] = [(_text(k), int(c), int(e)) for k, c, e in r.execute_command("SLIDEWIN.TOP", 5, "DENIED")]
    except redis.exceptions.ResponseError as e:
        out["top_denied"] = None  # no module, summary off, or no admin rights
        out["top_error"] = str(e)
    return out


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
    lines = [
        f"round trip: p50 {out['ping_ms']['p50']:.3f} ms, p99 {out['ping_ms']['p99']:.3f} ms (threshold {out['thresholds']['latency_ms']} ms)",
    ]
    for name, c in sorted(out["commands"].items()):
        h = out["latency_histogram"].get(name, {})
        p99 = f", p99 ≤ {h['p99_usec']} µs" if h else ""
        lines.append(f"{name}: {c['calls']} calls, {c['usec_per_call']:.2f} µs per call{p99}")
    lines.append(f"slow log (> {out['thresholds']['slow_us'] / 1000:g} ms, SLIDEWIN or sorted sets): {len(out['slowlog'])}")
    for s in out["slowlog"][:5]:
        lines.append(f"  {s['duration_us']} µs  {s['command']}")
    lines.append(f"biggest limiter keys ({out['scanned']} scanned):")
    for b in out["biggest"]:
        lines.append(f"  {b['bytes']:>10} B  {b['key']}")
    lines.append(f"evicted_keys: {out['evicted_keys']}; maxmemory-policy: {out['maxmemory_policy']}")
    for k, v in out["slidewin"].items():
        lines.append(f"{k}: {v}")
    if out.get("top_denied"):
        lines.append("most denied (SLIDEWIN.TOP 5):")
        for k, c, e in out["top_denied"]:
            lines.append(f"  {c:>8} (±{e})  {k}")
    for w in out["warnings"]:
        lines.append(f"WARNING: {w}")
    for a in out["alerts"]:
        lines.append(f"ALERT: {a}")
    lines.append("status: " + ("ALERT" if out["alerts"] else "ok"))
    return "\n".join(lines)


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_prometheus(out: Dict) -> str:
    """The same figures in the Prometheus text format (for node_exporter's
    textfile collector)."""
    m = [
        "# HELP slidewin_ping_latency_ms Round-trip latency of PING, by quantile.",
        "# TYPE slidewin_ping_latency_ms gauge",
        f'slidewin_ping_latency_ms{{quantile="0.5"}} {out["ping_ms"]["p50"]:.6f}',
        f'slidewin_ping_latency_ms{{quantile="0.99"}} {out["ping_ms"]["p99"]:.6f}',
        "# TYPE slidewin_command_usec_per_call gauge",
    ]
    for name, c in sorted(out["commands"].items()):
        m.append(f'slidewin_command_usec_per_call{{command="{_label(name)}"}} {c["usec_per_call"]}')
    m += ["# TYPE slidewin_command_calls counter"]
    for name, c in sorted(out["commands"].items()):
        m.append(f'slidewin_command_calls{{command="{_label(name)}"}} {c["calls"]}')
    m += [
        "# TYPE slidewin_slowlog_entries gauge",
        f"slidewin_slowlog_entries {len(out['slowlog'])}",
        "# TYPE slidewin_key_bytes gauge",
    ]
    for b in out["biggest"]:
        m.append(f'slidewin_key_bytes{{key="{_label(b["key"])}"}} {b["bytes"]}')
    m += [
        "# TYPE slidewin_evicted_keys counter",
        f"slidewin_evicted_keys {out['evicted_keys']}",
        "# TYPE slidewin_maxmemory_policy_can_evict gauge",
        f"slidewin_maxmemory_policy_can_evict {int(out['maxmemory_policy'].startswith(('allkeys-', 'volatile-')))}",
    ]
    for k, v in out["slidewin"].items():
        try:
            m.append(f"{k} {float(v)}")
        except (TypeError, ValueError):
            continue
    for k, c, _ in out.get("top_denied") or []:
        m.append(f'slidewin_top_denied{{key="{_label(k)}"}} {c}')
    m += ["# TYPE slidewin_health_alerts gauge", f"slidewin_health_alerts {len(out['alerts'])}"]
    return "\n".join(m) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m slidewin", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    h = sub.add_parser("health", help="report latency, slow log, big keys, evictions and the module's counters")
    h.add_argument("url", nargs="?", default="redis://127.0.0.1:6379/0")
    h.add_argument("--match", default="sms:limit:*", help="SCAN pattern of the limiter keys")
    h.add_argument("--scan-limit", type=int, default=10_000, help="stop the SCAN after this many keys")
    h.add_argument("--pings", type=int, default=50)
    h.add_argument("--format", choices=("text", "prometheus"), default="text")
    h.add_argument("--latency-ms", type=float, default=LATENCY_MS, help="alert when the PING p99 is above (default 5)")
    h.add_argument("--big-key-bytes", type=int, default=BIG_KEY_BYTES, help="alert on limiter keys above (default 1 MB)")
    h.add_argument("--slow-ms", type=float, default=SLOW_US / 1000, help="alert on slow-log entries above (default 10)")
    opts = ap.parse_args(argv)
    try:
        r = redis.Redis.from_url(opts.url, socket_timeout=5, socket_connect_timeout=5)
        out = gather(
            r,
            opts.match,
            pings=opts.pings,
            scan_limit=opts.scan_limit,
            latency_ms=opts.latency_ms,
            big_key_bytes=opts.big_key_bytes,
            slow_us=int(opts.slow_ms * 1000),
        )
    except redis.exceptions.RedisError as e:
        print(f"slidewin health: cannot ask {opts.url}: {e}", file=sys.stderr)
        return 2
    print(render_prometheus(out) if opts.format == "prometheus" else render_text(out), end="" if opts.format == "prometheus" else "\n")
    return 1 if out["alerts"] else 0
