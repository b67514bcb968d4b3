#!/usr/bin/env python3
"""limits' own Redis moving window against SLIDEWIN.CHECK: server time per hit.

The `limits` library (under Flask-Limiter and slowapi) keeps its moving
window as a Redis list of client-clock timestamps, written by a Lua script
(EVALSHA of acquire_moving_window.lua: LINDEX, LPUSH, LTRIM, EXPIRE). This
benchmark drives limits' real API, `MovingWindowRateLimiter(RedisStorage)
.hit(RateLimitItemPerDay(limit), key)`, and the same decision with
slidewin, `SLIDEWIN.CHECK key limit 86400000`, on one server with the
module loaded, at each limit (10, 1,000 and 70,000 per day by default).

The window is a day, so nothing expires during a run and each key reaches
the state a busy key lives in: full. Each limit is measured in three phases:
- fill: every key from empty to its limit (every hit allowed); enough keys
  that the phase has about --fill-hits hits (one key at limit 70,000);
- full: --full-hits more hits, round-robin over the same keys, every one
  denied (the steady state of many callers at their limit);
- hot: as many hits on one full key, every one denied (one caller being
  limited: the same key at every limit, so only the limit changes);
- stats: as many reads of that key's window: limits' `get_window_stats`
  (moving_window.lua, what Flask-Limiter calls for its headers) against
  `SLIDEWIN.PEEK key limit window_ms DETAIL`.
The server time per hit is INFO commandstats' usec over calls (CONFIG
RESETSTAT before each phase) of `evalsha` for limits and of
`slidewin.check` / `slidewin.peek` for slidewin; the calls counted must be
the hits made, and both must allow the same number of hits (all in fill,
none in full). Each of --rounds rounds flushes the database and runs the
limits in turn, the two sides in alternating order; the medians are
reported. The machine is shared and noisy: compare the ratios of one run,
not absolute numbers across runs.

Usage: bench/limits_bench.py [--servers redis-7.0,redis-8.2,valkey-8.1,valkey-9.1]
       [--limits 10,1000,70000] [--fill-hits 20000] [--full-hits 20000]
       [--rounds 3] [--log-types zset,compact] [--out bench/results-limits.md]
       bench/limits_bench.py --smoke    (a few seconds: one server, small
                                         limits; checks it works, numbers
                                         not meaningful)

Servers are started as bench/bench.py starts them (free port, temp dir,
SIGTERM then kill, a deadline on every wait) and stopped on every exit
path, SIGTERM included.
"""

import argparse
import importlib.util
import math
import os
import platform
import signal
import sys
import time
from statistics import median

import redis

HERE = os.path.dirname(os.path.abspath(__file__))

# bench/bench.py's Server, free_port and exit handling (every server
# started is stopped at exit, on any path), loaded under its own name.
_spec = importlib.util.spec_from_file_location("slidewin_bench", os.path.join(HERE, "bench.py"))
swbench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(swbench)

try:
    import limits
    from limits import RateLimitItemPerDay
    from limits.storage import RedisStorage
    from limits.strategies import MovingWindowRateLimiter
except ImportError:  # pragma: no cover
    sys.exit("limits is not installed in this interpreter: run scripts/deps.sh (it installs limits into .venv)")

WINDOW_MS = 86_400_000  # RateLimitItemPerDay: nothing expires during a run
PHASES = ("fill", "full", "hot", "stats")
LABELS = {"fill": "fill (allowed)", "full": "full (denied), round-robin over the keys",
          "hot": "full (denied), one key", "stats": "stats of one full key (get_window_stats / PEEK)"}


def median_ratio(a, b):
    return a / b if b else float("nan")


class Sides:
    """The two implementations on one server."""

    def __init__(self, srv):
        self.srv = srv
        # limits' own storage, as an application configures it.
        self.storage = RedisStorage(f"redis://127.0.0.1:{srv.port}/0")
        self.limiter = MovingWindowRateLimiter(self.storage)
        self.r = redis.Redis(port=srv.port)  # slidewin's calls, one per hit like limits'

    def warm(self):
        """Loads limits' scripts (the first EVALSHA of each is a NOSCRIPT
        retry) and runs one call of each command, on a key deleted after."""
        item = RateLimitItemPerDay(1)
        self.limiter.hit(item, "warm")
        self.limiter.get_window_stats(item, "warm")
        self.r.execute_command("SLIDEWIN.CHECK", "warm", 1, WINDOW_MS)
        self.r.execute_command("SLIDEWIN.PEEK", "warm", 1, WINDOW_MS, "DETAIL")
        self.srv.r.flushall()

    def measure(self, stat, hits, run):
        """Runs `run()` (which makes `hits` calls and returns how many were
        allowed); returns (server µs per hit, allowed)."""
        self.srv.r.config_resetstat()
        allowed = run()
        entry = self.srv.r.info("commandstats").get(f"cmdstat_{stat}")
        if not entry or int(entry["calls"]) != hits:
            sys.exit(f"limits_bench: expected {hits} calls of {stat}, commandstats has {entry}")
        if int(entry.get("failed_calls", 0)):
            sys.exit(f"limits_bench: {stat} failed calls: {entry}")
        return int(entry["usec"]) / hits, allowed

    def limits_phases(self, limit, keys, full_hits):
        item = RateLimitItemPerDay(limit)
        names = [f"lim:{limit}:{i}" for i in range(keys)]
        hit, stats = self.limiter.hit, self.limiter.get_window_stats

        def fill():
            return sum(hit(item, k) for k in names for _ in range(limit))

        def full():
            return sum(hit(item, names[i % keys]) for i in range(full_hits))

        def hot():
            return sum(hit(item, names[0]) for _ in range(full_hits))

        def read():
            # remaining is 0 on a full key: count the reads that saw room.
            return sum(stats(item, names[0]).remaining > 0 for _ in range(full_hits))

        return {"fill": self.measure("evalsha", keys * limit, fill),
                "full": self.measure("evalsha", full_hits, full),
                "hot": self.measure("evalsha", full_hits, hot),
                "stats": self.measure("evalsha", full_hits, read)}

    def slidewin_phases(self, limit, keys, full_hits):
        names = [f"sw:{limit}:{i}" for i in range(keys)]
        call = self.r.execute_command

        def fill():
            return sum(call("SLIDEWIN.CHECK", k, limit, WINDOW_MS) for k in names for _ in range(limit))

        def full():
            return sum(call("SLIDEWIN.CHECK", names[i % keys], limit, WINDOW_MS) for i in range(full_hits))

        def hot():
            return sum(call("SLIDEWIN.CHECK", names[0], limit, WINDOW_MS) for _ in range(full_hits))

        def read():
            return sum(call("SLIDEWIN.PEEK", names[0], limit, WINDOW_MS, "DETAIL")[2] > 0
                       for _ in range(full_hits))

        return {"fill": self.measure("slidewin.check", keys * limit, fill),
                "full": self.measure("slidewin.check", full_hits, full),
                "hot": self.measure("slidewin.check", full_hits, hot),
                "stats": self.measure("slidewin.peek", full_hits, read)}


def run_server(kind, log_type, opts, emit):
    srv = swbench.Server(kind, module_args=["log-type", log_type])
    try:
        sides = Sides(srv)
        sides.warm()
        # results[limit][side][phase] = [µs per hit, one per round]
        results = {L: {"limits": {p: [] for p in PHASES}, "slidewin": {p: [] for p in PHASES}}
                   for L in opts.limits}
        hits = {}
        for rnd in range(opts.rounds):
            for L in opts.limits:
                srv.r.flushall()
                keys = max(1, math.ceil(opts.fill_hits / L))
                hits[L] = (keys, keys * L, opts.full_hits)
                order = ("limits", "slidewin") if rnd % 2 == 0 else ("slidewin", "limits")
                got = {}
                for side in order:
                    phases = sides.limits_phases if side == "limits" else sides.slidewin_phases
                    got[side] = phases(L, keys, opts.full_hits)
                # The same decisions: every fill hit allowed, every later hit
                # denied, every read of a full key sees no room.
                for side in order:
                    allowed = tuple(got[side][p][1] for p in PHASES)
                    if allowed != (keys * L, 0, 0, 0):
                        sys.exit(f"limits_bench: {kind} limit {L}: {side} allowed {allowed}, "
                                 f"expected {(keys * L, 0, 0, 0)}")
                    for p in PHASES:
                        results[L][side][p].append(got[side][p][0])
        emit(f"### {kind} ({srv.version}), slidewin.log-type {log_type}")
        emit()
        emit("| limit per day | phase | keys | hits | limits µs/hit | slidewin µs/hit | slidewin ÷ limits |")
        emit("|---:|---|---:|---:|---:|---:|---:|")
        med = {}
        for L in opts.limits:
            keys, fill_hits, full_hits = hits[L]
            for p in PHASES:
                a = median(results[L]["limits"][p])
                b = median(results[L]["slidewin"][p])
                med[(L, p)] = (a, b)
                n = fill_hits if p == "fill" else full_hits
                k = keys if p in ("fill", "full") else 1
                emit(f"| {L:,} | {LABELS[p]} | {k:,} | {n:,} | {a:.2f} | {b:.2f} | {b / a:.2f} |")
        emit()
        lo, hi = min(opts.limits), max(opts.limits)
        if lo != hi:
            growth = []
            for p in PHASES:
                a0, b0 = med[(lo, p)]
                a1, b1 = med[(hi, p)]
                growth.append(f"{p}: limits ×{a1 / a0:.2f}, slidewin ×{b1 / b0:.2f}")
            emit(f"Growth from limit {lo:,} to {hi:,} (µs/hit at {hi:,} ÷ at {lo:,}): " + "; ".join(growth) + ".")
            emit()
        return med
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default=",".join(swbench.SERVERS),
                    help="comma-separated, of " + ", ".join(swbench.SERVERS))
    ap.add_argument("--limits", default="10,1000,70000", help="comma-separated limits per day")
    ap.add_argument("--fill-hits", type=int, default=20_000,
                    help="about this many hits fill keys at each limit (at least one key's limit)")
    ap.add_argument("--full-hits", type=int, default=20_000, help="denied hits, and reads, on the full keys")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; medians are reported")
    ap.add_argument("--log-types", default="zset,compact",
                    help="slidewin.log-type of each run, comma-separated (zset, compact); a server is started for each")
    ap.add_argument("--out", help="also write the tables (markdown) to this file")
    ap.add_argument("--smoke", action="store_true",
                    help="a few seconds: redis-7.0 (unless --servers), zset (unless --log-types), "
                         "limits 10,1000, 300 hits, 1 round")
    opts = ap.parse_args()
    if opts.smoke:
        if "--servers" not in " ".join(sys.argv):
            opts.servers = "redis-7.0"
        opts.limits, opts.fill_hits, opts.full_hits, opts.rounds = "10,1000", 300, 300, 1
        if "--log-types" not in " ".join(sys.argv):
            opts.log_types = "zset"
    opts.servers = [s for s in opts.servers.split(",") if s]
    for s in opts.servers:
        if s not in swbench.SERVERS:
            sys.exit(f"unknown server {s}: one of {', '.join(swbench.SERVERS)}")
    opts.limits = [int(x) for x in opts.limits.split(",") if x]
    opts.log_types = [t for t in opts.log_types.split(",") if t]
    for t in opts.log_types:
        if t not in ("zset", "compact"):
            sys.exit(f"unknown log type {t}: zset or compact")
    if opts.rounds < 1 or opts.full_hits < 1 or opts.fill_hits < 1 or min(opts.limits) < 1:
        sys.exit("rounds, hits and limits must be at least 1")

    # SIGTERM (a CI time-out, `kill`) unwinds like Ctrl-C: the finally
    # blocks and bench.py's exit handler stop every server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("limits_bench: terminated"))
    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    started = time.time()
    emit("# limits' Redis moving window against SLIDEWIN.CHECK")
    emit()
    emit(f"limits {limits.__version__} (`MovingWindowRateLimiter(RedisStorage)`, "
         f"`RateLimitItemPerDay(limit)`), redis-py {redis.__version__}, Python {platform.python_version()}; "
         f"{os.cpu_count()} CPUs; window 1 day (nothing expires); "
         f"about {opts.fill_hits:,} fill hits and {opts.full_hits:,} denied hits and reads per limit; "
         f"one call per hit, no pipelining; median of {opts.rounds} round(s). "
         f"Server time per hit from INFO commandstats: `evalsha` (limits) and `slidewin.check` / `slidewin.peek`. "
         f"Written by `bench/limits_bench.py`{' --smoke' if opts.smoke else ''} (`make bench-limits`).")
    emit()
    emit("Per hit, limits runs one EVALSHA of its acquire script (`LINDEX key limit-1`: the entry that must have "
         "left the window; then, when allowed, `LPUSH`, `LTRIM` to the limit and `EXPIRE`), with the client's "
         "`time.time()` as the timestamp; its `get_window_stats` runs a binary search of `LINDEX` calls over the "
         "list. slidewin runs one `SLIDEWIN.CHECK key limit 86400000` (`SLIDEWIN.PEEK ... DETAIL` for the "
         "stats) on the server clock. Phases: fill = each key from empty to its limit, all allowed; full = "
         "denied hits round-robin over those keys; hot = denied hits on one key; stats = window reads of that "
         "key. The two sides make the same decisions (checked on every run).")
    emit()
    summary = {}
    for kind in opts.servers:
        for log_type in opts.log_types:
            summary[f"{kind} {log_type}"] = run_server(kind, log_type, opts, emit)
    if 1000 in opts.limits:
        emit("### Summary: slidewin ÷ limits at limit 1,000 (target ≤ 0.3), and each side's growth")
        emit()
        lo, hi = min(opts.limits), max(opts.limits)
        emit(f"Growth: µs/hit at limit {hi:,} ÷ at {lo:,}, on one key (the hot and stats phases: "
             "the same key count at every limit).")
        emit()
        emit("| server, log type | ÷ fill | ÷ full | ÷ hot | ÷ stats | growth hot: limits | slidewin "
             "| growth stats: limits | slidewin | phases above 0.3 at 1,000 |")
        emit("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for kind, med in summary.items():
            r = [med[(1000, p)][1] / med[(1000, p)][0] for p in PHASES]
            g = [med[(hi, p)][i] / med[(lo, p)][i] for p in ("hot", "stats") for i in (0, 1)]
            above = ", ".join(p for p, x in zip(PHASES, r) if x > 0.3) or "none"
            emit(f"| {kind} | " + " | ".join(f"{x:.2f}" for x in r) + " | "
                 + " | ".join(f"×{x:.2f}" for x in g) + f" | {above} |")
        emit()
    emit(f"({time.time() - started:.0f} s)")
    if opts.out:
        with open(opts.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
