#!/usr/bin/env python3
"""Adversarial workloads: what one call costs on a crafted key or with the
largest arguments, against the same work done the ordinary way.

No command's cost may depend on how a key's entries are laid out, and MCHECK
costs the sum of its keys' CHECKs. Each row runs one call on a fresh server
(so the server's peak RSS is the row's own) and reports the call's server
CPU time (the server's main thread, from its schedstat: steady on a
busy machine), the call's own time by INFO commandstats, and how far the server's peak
RSS (VmHWM, reset before the call) rose above its RSS before the call,
against its baseline row: the same amount of work on an ordinary key.

Rows (WORKLOADS below; a layout is a function, so more can be added, e.g.
the compact log's interleaved ids and 2^24 runs):
- `MCHECK 1 key COST max-limit` against `CHECK COST max-limit` on an empty
  key, at max-limit 100000 and 200000 (the member search was O(COST^2));
- `MCHECK 64 keys COST max-limit`: 6,400,000 entries in one call before
  `slidewin.max-entries-per-call`; refused now (the row shows the error);
- `CHECK` and `MCHECK` `COST n` on a key whose wide member ids (the ids a
  call falls back to when its short id is taken) are taken one in two
  (every wide search started again near the last one's start: O(n^2)
  lookups), against the same key with the same number of entries laid
  where no call looks. The layout is laid inside the script that makes the
  call, at the call's own millisecond; that needs a server whose module
  clock stands still within a script (`slidewin_cached_clock:1`); elsewhere
  the row says so.

Usage: bench/adversarial.py [--server NAME ...] [--log-type zset|compact ...]
       [--module PATH] [--rounds 3] [--ids N] [--only TEXT,..] [--skip TEXT,..]
       [--timeout S] [--out FILE] [--smoke]
"""

import argparse
import os
import sys
import time
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402

import bench  # noqa: E402
from bench import SERVERS, Server  # noqa: E402

WINDOW_MS = 600_000


def rss_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def cpu_ns(pid):
    """CPU time the server's main thread has used, in ns (its schedstat):
    unlike a wall-clock time it does not grow when other processes of a
    busy machine take the CPU away."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[0])


class TooSlow(Exception):
    """The call had not finished after --timeout seconds."""


def measured(srv, stat, call, timeout):
    """Runs `call(r)` once: (its reply or error, the server's CPU ms over
    the call, the call's own µs by INFO commandstats (wall clock, so it
    includes time the server waited for the CPU), the peak RSS rise in MB
    above the RSS just before the call)."""
    pid = srv.proc.pid
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    before = rss_kb(pid, "VmRSS")
    srv.r.config_resetstat()
    cpu = cpu_ns(pid)
    client = redis.Redis(port=srv.port, decode_responses=True, socket_timeout=timeout)
    try:
        reply = call(client)
    except redis.exceptions.ResponseError as e:  # an error reply is the row's result
        reply = e
    except redis.exceptions.TimeoutError:
        return TooSlow(f"still running after {timeout} s"), float("nan"), float("nan"), float("nan")
    finally:
        client.close()
    cpu_ms = (cpu_ns(pid) - cpu) / 1e6
    peak = rss_kb(pid, "VmHWM")
    entry = srv.r.info("commandstats").get(f"cmdstat_{stat}")
    usec = float(entry["usec"]) if entry else float("nan")
    return reply, cpu_ms, usec, (peak - before) / 1024


# ---- Layouts: each prepares a fresh server and returns (stat, call) ----


def plain(command, keys, cost, max_limit):
    """CHECK or MCHECK `COST cost` on `keys` empty keys."""
    def prepare(srv):
        names = [f"{{a}}:k{i}" for i in range(keys)]
        if command == "CHECK":
            return "slidewin.check", lambda r: r.execute_command(
                "SLIDEWIN.CHECK", names[0], max_limit, WINDOW_MS, "COST", cost)
        args = [keys]
        for k in names:
            args += [k, max_limit, WINDOW_MS]
        return "slidewin.mcheck", lambda r: r.execute_command("SLIDEWIN.MCHECK", *args, "COST", cost)
    return prepare


# Lays `n` entries in KEYS[2] and calls CHECK or MCHECK `COST cost` on it,
# all at one server millisecond. KEYS[1]'s short id is taken (the caller
# made it so), so its CHECK takes a wide id `w` = ms << 20 | s, the
# server's sequence s: the next wide id the server makes is w + 1. With
# `taken` 1, the entries take w + 2, w + 4, ...: the call's wide ids are
# taken one in two; with 0 they take ids 10^12 above (no call looks there).
# KEYS[2]'s short id is taken too. Ids are kept as hi * 10^7 + lo: beyond
# 2^53, Lua's numbers are not exact.
LAY_AND_CALL = r"""
local r = redis.call('SLIDEWIN.CHECK', KEYS[1], 100000, 600000, 'WITHMEMBERS')
local w = r[6][1]
local hi = tonumber(string.sub(w, 1, #w - 7))
local lo = tonumber(string.sub(w, -7))
local n, cost, taken, compact = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1', ARGV[5] == '1'
if not taken then hi = hi + 100000 end
local function id(d)
    local l = lo + d
    return string.format('%.0f%07d', hi + math.floor(l / 10000000), l % 10000000)
end
local score = tonumber(redis.call('TIME')[1]) * 1000 - 1000
local batch = {}
local function flush()
    if #batch == 0 then return end
    if compact then
        redis.call('SLIDEWIN.APPLY', KEYS[2], unpack(batch))
    else
        redis.call('ZADD', KEYS[2], unpack(batch))
    end
    batch = {}
end
for i = 0, n - 1 do
    if compact then
        batch[#batch + 1] = 'ADD'; batch[#batch + 1] = score; batch[#batch + 1] = id(2 + 2 * i); batch[#batch + 1] = 1
    else
        batch[#batch + 1] = score; batch[#batch + 1] = id(2 + 2 * i)
    end
    if #batch >= 4000 then flush() end
end
flush()
local reply
if ARGV[4] == 'MCHECK' then
    reply = redis.call('SLIDEWIN.MCHECK', 1, KEYS[2], 200000, 600000, 'COST', cost, 'WITHMEMBERS')
else
    reply = redis.call('SLIDEWIN.CHECK', KEYS[2], 200000, 600000, 'COST', cost, 'WITHMEMBERS')
end
local members = reply[#reply]
return {w, reply[1], members[1], members[2], members[#members]}
"""


def block_short(r, key, compact):
    """Takes `key`'s short id: members 9 and 10 scored in an hour, so "9"
    is the newest and the next short id, 10, is taken."""
    at = int(time.time() * 1000) + 3_600_000
    if compact:
        r.execute_command("SLIDEWIN.APPLY", key, "ADD", at, 9, 2, "PXAT", at + 3_600_000)
    else:
        r.zadd(key, {"9": at, "10": at})


def wide_ids(command, n, cost, taken):
    """`command` COST `cost` on a key holding `n` entries; `taken`: they
    take the call's wide ids one in two."""
    def prepare(srv):
        if srv.r.info("slidewin").get("slidewin_cached_clock") != 1:
            return None
        compact = srv.log_type == "compact"
        block_short(srv.r, "{w}:learn", compact)
        block_short(srv.r, "{w}:key", compact)
        stat = "slidewin." + command.lower()

        def call(r):
            w, allowed, first, second, last = r.eval(
                LAY_AND_CALL, 2, "{w}:learn", "{w}:key", n, cost, int(taken), command, int(compact))
            if allowed != 1:
                raise RuntimeError(f"not allowed: {allowed}")
            if taken:
                # The layout was hit: the call's ids are w + 1, w + 3, ...
                base = int(w)
                if (int(first), int(second)) != (base + 1, base + 3):
                    raise RuntimeError(f"layout missed: wide id {w}, members {first} {second} .. {last}")
            return allowed
        return stat, call
    return prepare


def workloads(ids):
    """(label, max-limit, layout, baseline label, compared by) for every
    row: "cpu", the server's CPU over the call; "call", the command's own
    time by commandstats, for a call made inside the script that lays its
    key (the CPU counts the laying too)."""
    rows = []
    for max_limit in (100_000, 200_000):
        base = f"CHECK COST {max_limit} (max-limit {max_limit})"
        rows.append((base, max_limit, plain("CHECK", 1, max_limit, max_limit), None, "cpu"))
        rows.append((f"MCHECK 1 key COST {max_limit} (max-limit {max_limit})", max_limit,
                     plain("MCHECK", 1, max_limit, max_limit), base, "cpu"))
    rows.append(("MCHECK 64 keys COST 100000 (max-limit 100000)", 100_000,
                 plain("MCHECK", 64, 100_000, 100_000), "CHECK COST 100000 (max-limit 100000)", "cpu"))
    for command in ("CHECK", "MCHECK"):
        base = f"{command} COST {ids}, {ids} entries laid apart"
        rows.append((base, 200_000, wide_ids(command, ids, ids, False), None, "call"))
        rows.append((f"{command} COST {ids}, wide ids taken one in two", 200_000,
                     wide_ids(command, ids, ids, True), base, "call"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", action="append", choices=SERVERS, help="default: all four")
    ap.add_argument("--log-type", action="append", choices=["zset", "compact"], help="default: both")
    ap.add_argument("--module", default=bench.MODULE, help="the module to load (to measure another build)")
    ap.add_argument("--rounds", type=int, default=3, help="fresh servers per row; medians are reported")
    ap.add_argument("--ids", type=int, default=10_000, help="entries laid and COST of the wide-id rows")
    ap.add_argument("--only", help="run only the rows whose label contains one of these (comma-separated)")
    ap.add_argument("--skip", help="skip the rows whose label contains one of these (comma-separated)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds one call may take before the row gives up")
    ap.add_argument("--out", help="also write the tables (markdown) to this file")
    ap.add_argument("--smoke", action="store_true", help="small rows, one server, one log type")
    a = ap.parse_args()
    bench.MODULE = os.path.abspath(a.module)
    servers = a.server or (SERVERS[:1] if a.smoke else SERVERS)
    log_types = a.log_type or (["zset"] if a.smoke else ["zset", "compact"])
    ids = 300 if a.smoke else a.ids
    if a.smoke:
        a.rounds = 1
    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    for server in servers:
        for log_type in log_types:
            emit(f"### {server}, {log_type}")
            emit()
            emit("| call | server CPU | the call (commandstats) | peak RSS rise | against its baseline: time, peak RSS |")
            emit("|---|---:|---:|---:|---|")
            results = {}
            for label, max_limit, layout, baseline, metric in workloads(ids):
                if a.only and not any(o in label for o in a.only.split(",")):
                    continue
                if a.skip and any(o in label for o in a.skip.split(",")):
                    continue
                if a.smoke and "COST 200000" in label:
                    continue
                runs = []
                for _ in range(a.rounds):
                    srv = Server(server, module_args=["max-limit", str(max_limit), "log-type", log_type])
                    srv.log_type = log_type
                    try:
                        prepared = layout(srv)
                        if prepared is None:
                            break
                        stat, call = prepared
                        runs.append(measured(srv, stat, call, a.timeout))
                    finally:
                        srv.stop()
                    if isinstance(runs[-1][0], Exception):
                        break
                if not runs:
                    emit(f"| {label} | n/a: the module's clock moves within a script here | | | |")
                    continue
                reply = runs[-1][0]
                if isinstance(reply, TooSlow):
                    emit(f"| {label} | {reply} | | | |")
                    continue
                cpu, usec, rise = (median(r[i] for r in runs) for i in (1, 2, 3))
                results[label] = (cpu if metric == "cpu" else usec / 1000, rise)
                if isinstance(reply, Exception):
                    emit(f"| {label} | {cpu:.1f} ms | {usec / 1000:.1f} ms | {rise:.0f} MB | refused: `{reply}` |")
                    continue
                against = ""
                if baseline in results:
                    b_time, b_rise = results[baseline]
                    own = results[label][0]
                    what = "" if metric == "cpu" else " (the call's own time)"
                    against = f"{own / b_time:.2f}x{what}, {rise - b_rise:+.0f} MB"
                emit(f"| {label} | {cpu:.1f} ms | {usec / 1000:.1f} ms | {rise:.0f} MB | {against} |")
            emit()
    if a.out:
        with open(a.out, "w") as f:
            f.write(f"# Adversarial workloads\n\nWritten by bench/adversarial.py (module {os.path.basename(bench.MODULE)}).\n\n")
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
