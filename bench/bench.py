#!/usr/bin/env python3
"""slidewin benchmark: SLIDEWIN.CHECK against the seed's Lua script, side by side.

Starts one server with the module loaded (Debian's redis-server by default),
registers a server-clock version of the seed's sliding-window Lua script, and
drives each command with redis-benchmark (-c 50 -P 16, -r for random keys)
under the same load. The server-side cost per call comes from
INFO commandstats (usec_per_call), the client throughput from redis-benchmark.
Ratios measured in one run are the figures that matter: the machines are
shared and noisy, absolute numbers are not comparable between runs.

Usage: bench/bench.py [--server redis-7.0|redis-8.2|valkey-8.1|valkey-9.1] [--scale 1.0] [--out FILE]
"""

import argparse
import csv
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from statistics import median

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = os.environ.get("SLIDEWIN_MODULE", os.path.join(ROOT, "target/release/libslidewin.so"))

# The seed's script (ZREMRANGEBYSCORE, ZCARD, ZADD, EXPIRE), with the server
# clock (TIME) instead of the client's and PEXPIRE to the window. As in the
# seed, the caller supplies the member ("<ms>-<uuid>"-sized, random per call);
# ARGV: limit, window_ms, member [, cost: members <member>-1 .. -cost].
LUA_CHECK = r"""
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[4] or '1')
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) + cost > limit then
    return 0
end
if cost == 1 then
    redis.call('ZADD', KEYS[1], now, ARGV[3])
else
    for i = 1, cost do
        redis.call('ZADD', KEYS[1], now, ARGV[3] .. '-' .. i)
    end
end
redis.call('PEXPIRE', KEYS[1], window)
return 1
"""

# A member as the seed's callers build it: "<ms>-<uuid>", 50 bytes, random.
MEMBER = "1764480000000-__rand_int__-__rand_int__-__rand_int__"

# A read-only peek in Lua: count the window, no detail.
LUA_PEEK = r"""
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local n = redis.call('ZCOUNT', KEYS[1], '(' .. (now - tonumber(ARGV[2])), '+inf')
if n + tonumber(ARGV[3] or '1') > tonumber(ARGV[1]) then return 0 end
return 1
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVERS = ["redis-7.0", "redis-8.2", "valkey-8.1", "valkey-9.1"]
ALIASES = {"redis": "redis-7.0", "valkey": "valkey-8.1"}


def server_binary(kind):
    """The binary of one of the suite's servers, found by scripts/server-path.sh."""
    name = ALIASES.get(kind, kind)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "server-path.sh")
    out = subprocess.run([script, name], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr.strip() or f"{name} not found: run `make deps`")
    return out.stdout.strip()


class Server:
    """One server with the module (and redis-cell when given) loaded.
    `extra` adds server arguments; `wrapper` runs the server under a tool
    (valgrind); `timeout` is how long it may take to answer."""

    def __init__(self, kind, cell=None, extra=(), wrapper=(), timeout=15):
        if not os.path.isfile(MODULE):
            sys.exit(f"module not built at {MODULE}: run `make build`")
        self.dir = tempfile.mkdtemp(prefix="slidewin-bench-")
        self.port = free_port()
        args = [server_binary(kind), "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--save", "", "--appendonly", "no",
                "--logfile", "server.log", "--loadmodule", MODULE]
        if cell:
            args += ["--loadmodule", os.path.abspath(cell)]
        self.proc = subprocess.Popen(
            list(wrapper) + args + list(extra),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.dir)
        self.r = redis.Redis(port=self.port, decode_responses=True)
        deadline = time.time() + timeout
        while True:
            try:
                self.r.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.time() > deadline or self.proc.poll() is not None:
                    log = open(os.path.join(self.dir, "server.log")).read()
                    self.proc.kill()
                    self.proc.wait()
                    shutil.rmtree(self.dir, ignore_errors=True)
                    sys.exit("server did not start:\n" + log)
                time.sleep(0.05)
        self.version = self.r.info("server").get("valkey_version") or self.r.info("server")["redis_version"]

    def stop(self):
        try:
            self.r.shutdown(nosave=True)
        except redis.exceptions.ConnectionError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def run(server, args, n, keyspace, stat):
    """Runs one redis-benchmark load; returns (usec_per_call, requests/s)."""
    server.r.config_resetstat()
    cmd = ["redis-benchmark", "-p", str(server.port), "-c", "50", "-P", "16",
           "-n", str(n), "--csv"]
    if keyspace:
        cmd += ["-r", str(keyspace)]
    out = subprocess.run(cmd + args, check=True, capture_output=True, text=True, timeout=600).stdout
    rows = list(csv.reader(io.StringIO(out)))
    rps = float(rows[-1][1])
    stats = server.r.info("commandstats")
    entry = stats.get(f"cmdstat_{stat}")
    if not entry:
        sys.exit(f"no commandstats for {stat}: {sorted(stats)}")
    return float(entry["usec_per_call"]), rps


def fill(server, key, entries, lua_sha=None):
    """A key holding `entries` entries written by the module or the script."""
    if lua_sha:
        for _ in range(entries):
            ms = int(time.time() * 1000)
            server.r.evalsha(lua_sha, 1, key, entries, 600000, f"{ms}-{uuid.uuid4()}")
    else:
        server.r.execute_command("SLIDEWIN.CHECK", key, entries, 600000, "COST", entries)
    assert server.r.zcard(key) == entries
    return server.r.memory_usage(key, samples=0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=SERVERS + list(ALIASES), default="redis-7.0")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every request count (0.05 for a smoke run)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per workload; medians are reported")
    ap.add_argument("--out", help="also write the tables (markdown) to this file")
    opts = ap.parse_args()

    def n(base):
        return max(1000, int(base * opts.scale))

    # SIGTERM (a CI time-out, `kill`) unwinds like Ctrl-C, so the finally
    # below stops the server on every exit path.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("bench: terminated"))
    srv = Server(opts.server)
    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    try:
        check_sha = srv.r.script_load(LUA_CHECK)
        peek_sha = srv.r.script_load(LUA_PEEK)
        emit(f"server: {opts.server} {srv.version}; cpu: {os.cpu_count()} cores; "
             f"redis-benchmark -c 50 -P 16; scale {opts.scale}; median of {opts.rounds} interleaved rounds")
        emit()
        # (workload, label, args, requests, keyspace, commandstats name)
        sms = n(1_000_000)
        HUGE = 1_000_000_000  # -r range for members of the single-key loads
        workloads = [
            ("SMS: 100k keys, limit 5, 60 s", [
                ("SLIDEWIN.CHECK", ["SLIDEWIN.CHECK", "sms:__rand_int__", "5", "60000"], sms, 100_000, "slidewin.check"),
                ("Lua script", ["EVALSHA", check_sha, "1", "lua:__rand_int__", "5", "60000", MEMBER], sms, 100_000, "evalsha"),
                ("SET (floor)", ["SET", "set:__rand_int__", "x"], sms, 100_000, "set"),
                ("ZADD (floor)", ["ZADD", "zadd:__rand_int__", "__rand_int__", MEMBER], sms, 100_000, "zadd"),
            ]),
            ("hot key: 1 key, limit 1000, 1 s", [
                ("SLIDEWIN.CHECK", ["SLIDEWIN.CHECK", "hot", "1000", "1000"], n(300_000), 0, "slidewin.check"),
                ("Lua script", ["EVALSHA", check_sha, "1", "luahot", "1000", "1000", MEMBER], n(300_000), HUGE, "evalsha"),
                ("SET (floor)", ["SET", "sethot", "x"], n(300_000), 0, "set"),
            ]),
            ("big window: 1 key, limit 10000, 10 s", [
                ("SLIDEWIN.CHECK", ["SLIDEWIN.CHECK", "big", "10000", "10000"], n(300_000), 0, "slidewin.check"),
                ("Lua script", ["EVALSHA", check_sha, "1", "luabig", "10000", "10000", MEMBER], n(300_000), HUGE, "evalsha"),
                ("SET (floor)", ["SET", "setbig", "x"], n(300_000), 0, "set"),
            ]),
            ("SMS policy: MCHECK, 3 rules (5/min, 1/min, 10/day) on 3 random keys", [
                ("SLIDEWIN.MCHECK, 3 rules", ["SLIDEWIN.MCHECK", "3", "{__rand_int__}:ip", "5", "60000",
                                             "{__rand_int__}:phone", "1", "60000", "{__rand_int__}:phone", "10", "86400000"],
                 n(300_000), 100_000, "slidewin.mcheck"),
                ("SLIDEWIN.CHECK (one rule)", ["SLIDEWIN.CHECK", "sms:__rand_int__", "5", "60000"], n(300_000), 100_000, "slidewin.check"),
                ("Lua script (one rule)", ["EVALSHA", check_sha, "1", "lua:__rand_int__", "5", "60000", MEMBER], n(300_000), 100_000, "evalsha"),
                ("SET (floor)", ["SET", "set:__rand_int__", "x"], n(300_000), 100_000, "set"),
            ]),
            ("SMS keys, COST 5 (limit 50) and PEEK", [
                ("SLIDEWIN.CHECK COST 5", ["SLIDEWIN.CHECK", "sms:__rand_int__", "50", "60000", "COST", "5"], n(300_000), 100_000, "slidewin.check"),
                ("SLIDEWIN.PEEK (filled keys)", ["SLIDEWIN.PEEK", "sms:__rand_int__", "50", "60000"], n(300_000), 100_000, "slidewin.peek"),
                ("Lua script, cost 5", ["EVALSHA", check_sha, "1", "lua:__rand_int__", "50", "60000", MEMBER, "5"], n(300_000), 100_000, "evalsha"),
                ("Lua peek (ZCOUNT, filled keys)", ["EVALSHA", peek_sha, "1", "lua:__rand_int__", "50", "60000", "1"], n(300_000), 100_000, "evalsha"),
                ("SET (floor)", ["SET", "set:__rand_int__", "x"], n(300_000), 100_000, "set"),
            ]),
        ]
        summary = []
        for title, rows in workloads:
            # Interleave the commands over several rounds, each run on an
            # empty database, and report medians: neighbours on a shared
            # machine slow whole seconds down, not single commands.
            per_round = []
            for _ in range(opts.rounds):
                results = {}
                for label, args, count, keyspace, stat in rows:
                    # PEEK rows read the keys the row before them filled.
                    if "PEEK" not in label.upper():
                        srv.r.flushall()
                    results[label] = run(srv, args, count, keyspace, stat)
                per_round.append(results)
            labels = [row[0] for row in rows]
            # Each row is compared with the Lua row doing the same job: PEEK
            # with the Lua peek, everything else with the Lua check script.
            lua_check = next((l for l in labels if l.startswith("Lua script")), None)
            lua_peek = next((l for l in labels if l.startswith("Lua peek")), None)
            set_label = next(l for l in labels if l.startswith("SET"))
            emit(f"### {title}")
            emit()
            emit("| command | µs/call (server) | requests/s | × Lua (same job) | × SET |")
            emit("|---|---:|---:|---:|---:|")
            for label in labels:
                usec = median(r[label][0] for r in per_round)
                rps = median(r[label][1] for r in per_round)
                lua_label = lua_peek if "PEEK" in label.upper() else lua_check
                vs_lua = median(r[label][0] / r[lua_label][0] for r in per_round) if lua_label else None
                vs_set = median(r[label][0] / r[set_label][0] for r in per_round)
                emit(f"| {label} | {usec:.2f} | {rps:,.0f} | {f'{vs_lua:.2f}' if vs_lua else '-'} | {vs_set:.2f} |")
                if label.startswith("SLIDEWIN.") and "PEEK" not in label and vs_lua:
                    summary.append((title, label, vs_lua, vs_set))
            emit()
            srv.r.flushall()

        emit("### hot key: SLIDEWIN.CHECK cost by set size (window 1 s)")
        emit()
        emit("| limit (entries in the set) | µs/call | requests/s |")
        emit("|---:|---:|---:|")
        for limit in (100, 1000, 10000):
            usec, rps = run(srv, ["SLIDEWIN.CHECK", f"scale:{limit}", str(limit), "1000"], n(300_000), 0, "slidewin.check")
            emit(f"| {limit} | {usec:.2f} | {rps:,.0f} |")
        emit()

        emit("### memory per key (MEMORY USAGE ... SAMPLES 0)")
        emit()
        emit("| entries | slidewin | Lua script (`<ms>-<uuid>` members) | ratio |")
        emit("|---:|---:|---:|---:|")
        srv.r.flushall()
        for entries in (5, 1000):
            ours = fill(srv, f"mem:sw:{entries}", entries)
            theirs = fill(srv, f"mem:lua:{entries}", entries, check_sha)
            emit(f"| {entries} | {ours} B | {theirs} B | {ours / theirs:.2f} |")
        emit()
        emit("targets: CHECK <= 0.25 x Lua on every workload, <= 3 x SET on SMS, 5-entry key <= 0.5 x Lua's")
        for title, label, vs_lua, vs_set in summary:
            emit(f"- {title} / {label}: {vs_lua:.2f} x Lua, {vs_set:.2f} x SET")
    finally:
        srv.stop()
    if opts.out:
        with open(opts.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
