#!/usr/bin/env python3
"""slidewin benchmark: SLIDEWIN.CHECK against the physical floor and its peers.

Starts one server with the module loaded (Redis 7.0 by default; --server picks
any of the suite's four), registers a server-clock version of the seed's
sliding-window Lua script, and drives each command with redis-benchmark
(-c 50 -P 16, -r for random keys) under the same load. The server-side cost
per call comes from INFO commandstats (usec_per_call), the client throughput
from redis-benchmark. Each row is compared, as ratios measured in one run
(the machines are shared and noisy; absolute numbers are not comparable
between runs), with:
- the floor: the same effects as the server's own commands on the same keys,
  `ZADD key <now> <member>` then `PEXPIREAT key <at>` (for COST 5, a ZADD of
  five members), each timed by its own load and summed;
- the seed's Lua script;
- redis-cell's CL.THROTTLE when --cell gives its module ("not given" else).

Also: a production-shape run (one replica attached, appendonly yes,
appendfsync everysec), and a memory and CPU guide at limits 5 to 10000 with
zset-max-listpack-entries at 128, 1024 and 8192.

Usage: bench/bench.py [--server redis-7.0|redis-8.2|valkey-8.1|valkey-9.1]
       [--scale 1.0] [--rounds 3] [--cell libredis_cell.so] [--out FILE]
       [--log-type zset|compact]
"""

import argparse
import atexit
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
# cargo's build folder: CARGO_TARGET_DIR (the Makefile exports it), else ./target.
TARGET_DIR = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"))
MODULE = os.environ.get("SLIDEWIN_MODULE", os.path.join(TARGET_DIR, "release", "libslidewin.so"))

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


# Every server started and not yet stopped. An exit on any path (a normal
# return, sys.exit, an exception, SIGTERM turned into SystemExit, even one
# that lands while a server is still starting) stops what is left here.
_RUNNING = []
# Every load (redis-benchmark) started and not yet reaped: killed at exit.
_LOADS = []


@atexit.register
def _stop_running():
    for proc in list(_LOADS):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for server in list(_RUNNING):
        server.stop()


def spawn(args, register, **kw):
    """Starts a child with SIGTERM held back until `register(proc)` has run:
    a SIGTERM that lands inside Popen (after the fork, while it waits for the
    exec) would otherwise unwind out of Popen and orphan the child. The child
    itself gets the signal mask as it was (a child inherits the mask)."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        proc = subprocess.Popen(args, preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, mask), **kw)
        register(proc)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return proc


class Server:
    """One server with the module (and redis-cell when given) loaded.
    `extra` adds server arguments; `wrapper` runs the server under a tool
    (valgrind); `timeout` is how long it may take to answer. It is stopped
    at exit if the caller did not stop it."""

    def __init__(self, kind, cell=None, extra=(), wrapper=(), timeout=15, module_args=()):
        if not os.path.isfile(MODULE):
            sys.exit(f"module not built at {MODULE}: run `make build`")
        self.proc = None
        self.dir = tempfile.mkdtemp(prefix="slidewin-bench-")
        self.port = free_port()
        args = [server_binary(kind), "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--save", "", "--appendonly", "no",
                "--logfile", "server.log", "--loadmodule", MODULE] + list(module_args)
        if cell:
            args += ["--loadmodule", os.path.abspath(cell)]
        self.r = redis.Redis(port=self.port, decode_responses=True)
        # No SIGTERM between starting the process and registering it.
        def register(proc):
            self.proc = proc
            _RUNNING.append(self)
        spawn(list(wrapper) + args + list(extra), register,
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.dir)
        deadline = time.time() + timeout
        while True:
            try:
                self.r.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.time() > deadline or self.proc.poll() is not None:
                    with open(os.path.join(self.dir, "server.log")) as f:
                        log = f.read()
                    self.stop()
                    sys.exit("server did not start:\n" + log)
                time.sleep(0.05)
        self.version = self.r.info("server").get("valkey_version") or self.r.info("server")["redis_version"]

    def stop(self):
        """Stops the server (SIGTERM, its graceful shutdown; with no save
        point configured it saves nothing; a kill after 10 s) and removes its
        directory. Stopping twice does nothing more. Not SHUTDOWN: redis-py
        retries the connection the server has just closed, for seconds."""
        if self not in _RUNNING:
            return
        try:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            # Interrupted (SIGTERM during the wait): make sure it is gone.
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            _RUNNING.remove(self)
            shutil.rmtree(self.dir, ignore_errors=True)


def run(server, args, n, keyspace, stat):
    """Runs one redis-benchmark load; returns (usec_per_call, requests/s)."""
    server.r.config_resetstat()
    cmd = ["redis-benchmark", "-p", str(server.port), "-c", "50", "-P", "16",
           "-n", str(n), "--csv"]
    if keyspace:
        cmd += ["-r", str(keyspace)]
    # Registered before SIGTERM can land, killed on every way out of here.
    proc = spawn(cmd + args, _LOADS.append, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _LOADS.remove(proc)
    if proc.returncode != 0:
        sys.exit(f"redis-benchmark failed ({proc.returncode}): {err.strip()}")
    rows = list(csv.reader(io.StringIO(out)))
    rps = float(rows[-1][1])
    stats = server.r.info("commandstats")
    entry = stats.get(f"cmdstat_{stat}")
    if not entry:
        sys.exit(f"no commandstats for {stat}: {sorted(stats)}")
    return float(entry["usec_per_call"]), rps


def run_parts(server, parts):
    """Runs the loads of one row in turn: (µs per call summed over the parts,
    calls per second when each call does every part)."""
    usec, inverse = 0.0, 0.0
    for args, n, keyspace, stat in parts:
        u, rps = run(server, args, n, keyspace, stat)
        usec += u
        inverse += 1 / rps
    return usec, 1 / inverse


def fill(server, key, entries, lua_sha=None):
    """A key holding `entries` entries written by the module or the script."""
    if lua_sha:
        for _ in range(entries):
            ms = int(time.time() * 1000)
            server.r.evalsha(lua_sha, 1, key, entries, 600000, f"{ms}-{uuid.uuid4()}")
    else:
        server.r.execute_command("SLIDEWIN.CHECK", key, entries, 600000, "COST", entries)
    if lua_sha:
        assert server.r.zcard(key) == entries
    else:
        # Either store (a sorted set or a compact log): PEEK counts them.
        detail = server.r.execute_command("SLIDEWIN.PEEK", key, entries, 600000)
        assert int(detail[2]) == 0, detail
    return server.r.memory_usage(key, samples=0)


# An absolute time in ms for the floor's scores and expiries: a year from now,
# so the floor's keys live through the run like ours.
def far_ms():
    return int(time.time() * 1000) + 365 * 86_400_000


def one(args, n, keyspace, stat):
    """A row of one load."""
    return [(args, n, keyspace, stat)]


def sms_rows(check_sha, n, keyspace, limit, cell):
    """CHECK, the floor, the Lua script and CL.THROTTLE on `keyspace` random
    keys at `limit` per 60 s."""
    at = str(far_ms())
    rows = [
        ("SLIDEWIN.CHECK", one(["SLIDEWIN.CHECK", "sms:__rand_int__", str(limit), "60000"], n, keyspace, "slidewin.check")),
        ("floor: ZADD + PEXPIREAT", [
            (["ZADD", "floor:__rand_int__", at, "__rand_int__"], n, keyspace, "zadd"),
            (["PEXPIREAT", "floor:__rand_int__", at], n, keyspace, "pexpireat"),
        ]),
        ("Lua script", one(["EVALSHA", check_sha, "1", "lua:__rand_int__", str(limit), "60000", MEMBER], n, keyspace, "evalsha")),
    ]
    if cell:
        rows.append(("CL.THROTTLE (redis-cell)", one(
            ["CL.THROTTLE", "cell:__rand_int__", str(limit - 1), str(limit), "60"], n, keyspace, "cl.throttle")))
    rows.append(("SET (reference)", one(["SET", "set:__rand_int__", "x"], n, keyspace, "set")))
    return rows


def guide(srv, n, emit, scale=1.0):
    """Memory and CPU per limit: bytes per key at `limit` entries, and the
    cost of an allowed CHECK on a key that holds `limit` entries (keys
    filled beforehand, each checked about twice with room to spare), at
    zset-max-listpack-entries 128 (the default), 1024 and 8192."""
    emit("### memory and CPU guide: a key holding `limit` entries")
    emit()
    emit("| limit | zset-max-listpack-entries | encoding | bytes per key | bytes per entry | allowed CHECK µs/call | requests/s |")
    emit("|---:|---:|---|---:|---:|---:|---:|")
    name = "zset-max-listpack-entries"
    default = srv.r.config_get(name).get(name, "128")
    try:
        for entries_max in (128, 1024, 8192):
            srv.r.config_set(name, entries_max)
            for limit in (5, 100, 1000, 10000):
                srv.r.flushall()
                # Fewer keys for big limits: filling a big listpack is
                # quadratic (each insert shifts the entries after it).
                keys = max(2, int(max(20, 200_000 // limit) * min(1.0, 2 * scale)))
                slow = redis.Redis(port=srv.port, socket_timeout=600)
                pipe = slow.pipeline(transaction=False)
                for k in range(keys):
                    # `limit` entries now, room for as many more.
                    pipe.execute_command("SLIDEWIN.CHECK", f"guide:{k}", 2 * limit, 600_000, "COST", limit)
                    if k % 100 == 99:
                        pipe.execute()
                pipe.execute()
                slow.close()
                size = srv.r.memory_usage("guide:0", samples=0)
                encoding = srv.r.object("encoding", "guide:0")
                usec, rps = run(srv, ["SLIDEWIN.CHECK", "guide:__rand_int__", str(2 * limit), "600000"],
                                max(1000, min(n(2 * keys), 2 * keys)), keys, "slidewin.check")
                emit(f"| {limit} | {entries_max} | {encoding} | {size:,} | {size / limit:.1f} | {usec:.2f} | {rps:,.0f} |")
    finally:
        srv.r.config_set(name, default)
        srv.r.flushall()
    emit()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=SERVERS + list(ALIASES), default="redis-7.0")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every request count (0.05 for a smoke run)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per workload; medians are reported")
    ap.add_argument("--cell", help="redis-cell's module (libredis_cell.so): adds a CL.THROTTLE column")
    ap.add_argument("--out", help="also write the tables (markdown) to this file")
    ap.add_argument("--only-guide", action="store_true", help="run only the memory and CPU guide")
    ap.add_argument("--log-type", choices=["zset", "compact"], default="zset",
                    help="slidewin.log-type of the module's servers (keys CHECK makes: sorted sets or compact logs)")
    opts = ap.parse_args()
    if opts.cell and not os.path.isfile(opts.cell):
        sys.exit(f"--cell {opts.cell}: no such file")
    margs = ["log-type", opts.log_type]

    def n(base):
        return max(1000, int(base * opts.scale))

    # SIGTERM (a CI time-out, `kill`) unwinds like Ctrl-C, so the finally
    # blocks below stop every server on every exit path.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("bench: terminated"))
    lines = []
    summary = []
    memory_line = None

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    def table(srv, title, rows, rounds):
        """Runs `rows` interleaved over `rounds` rounds (each on an empty
        database, except PEEK rows, which read what the row before filled)
        and emits one table of medians with the ratios to the floor, the Lua
        row doing the same job and CL.THROTTLE."""
        per_round = []
        for _ in range(rounds):
            results = {}
            for row in rows:
                label, parts = row[0], row[1]
                if "PEEK" not in label.upper():
                    srv.r.flushall()
                # A row may set the server up first (CONFIG SET ...).
                for setup in (row[2] if len(row) > 2 else []):
                    srv.r.execute_command(*setup)
                results[label] = run_parts(srv, parts)
            per_round.append(results)
        labels = [row[0] for row in rows]
        floor = next((l for l in labels if l.startswith("floor")), None)
        lua_check = next((l for l in labels if l.startswith("Lua script")), None)
        lua_peek = next((l for l in labels if l.startswith("Lua peek")), None)
        cell = next((l for l in labels if l.startswith("CL.THROTTLE")), None)

        def ratio(label, other):
            if not other or other == label:
                return "-"
            return f"{median(r[label][0] / r[other][0] for r in per_round):.2f}"

        emit(f"### {title}")
        emit()
        emit("| command | µs/call (server) | requests/s | × floor | × Lua (same job) | × CL.THROTTLE |")
        emit("|---|---:|---:|---:|---:|---:|")
        for label in labels:
            usec = median(r[label][0] for r in per_round)
            rps = median(r[label][1] for r in per_round)
            lua = lua_peek if "PEEK" in label.upper() else lua_check
            peek = "PEEK" in label.upper()
            cell_col = ratio(label, cell) if opts.cell else "not given"
            emit(f"| {label} | {usec:.2f} | {rps:,.0f} | {'-' if peek else ratio(label, floor)} | "
                 f"{ratio(label, lua)} | {'-' if peek else cell_col} |")
            if label.startswith("SLIDEWIN.") and not peek:
                summary.append((title, label, ratio(label, floor), ratio(label, lua),
                                ratio(label, cell) if opts.cell else "not given"))
        emit()
        srv.r.flushall()

    if opts.only_guide:
        srv = Server(opts.server, module_args=margs)
        try:
            emit(f"server: {opts.server} {srv.version}; cpu: {os.cpu_count()} cores; log-type {opts.log_type}")
            emit()
            guide(srv, n, emit, opts.scale)
        finally:
            srv.stop()
        if opts.out:
            with open(opts.out, "w") as f:
                f.write("\n".join(lines) + "\n")
        return

    srv = Server(opts.server, cell=opts.cell, module_args=margs)
    try:
        check_sha = srv.r.script_load(LUA_CHECK)
        peek_sha = srv.r.script_load(LUA_PEEK)
        emit(f"server: {opts.server} {srv.version}; cpu: {os.cpu_count()} cores; "
             f"redis-benchmark -c 50 -P 16; scale {opts.scale}; median of {opts.rounds} interleaved rounds; "
             f"redis-cell: {os.path.basename(opts.cell) if opts.cell else 'not given'}; log-type {opts.log_type}")
        emit()
        HUGE = 1_000_000_000  # -r range for members of the single-key loads
        at = str(far_ms())
        table(srv, "allowed calls: 100k keys, limit 100, 60 s (every call allowed)",
              sms_rows(check_sha, n(1_000_000), 100_000, 100, opts.cell), opts.rounds)
        table(srv, "SMS: 100k keys, limit 5, 60 s (about half denied)",
              sms_rows(check_sha, n(1_000_000), 100_000, 5, opts.cell), opts.rounds)
        table(srv, "COST 5 (limit 50, 100k keys, every call allowed) and PEEK", [
            ("SLIDEWIN.CHECK COST 5", one(["SLIDEWIN.CHECK", "sms:__rand_int__", "50", "60000", "COST", "5"], n(300_000), 100_000, "slidewin.check")),
            ("floor: ZADD 5 members + PEXPIREAT", [
                (["ZADD", "floor:__rand_int__", at, "__rand_int__", at, "__rand_int__", at, "__rand_int__",
                  at, "__rand_int__", at, "__rand_int__"], n(300_000), 100_000, "zadd"),
                (["PEXPIREAT", "floor:__rand_int__", at], n(300_000), 100_000, "pexpireat"),
            ]),
            ("SLIDEWIN.PEEK (filled keys)", one(["SLIDEWIN.PEEK", "sms:__rand_int__", "50", "60000"], n(300_000), 100_000, "slidewin.peek")),
            ("Lua script, cost 5", one(["EVALSHA", check_sha, "1", "lua:__rand_int__", "50", "60000", MEMBER, "5"], n(300_000), 100_000, "evalsha")),
            ("Lua peek (ZCOUNT, filled keys)", one(["EVALSHA", peek_sha, "1", "lua:__rand_int__", "50", "60000", "1"], n(300_000), 100_000, "evalsha")),
        ], opts.rounds)
        table(srv, "hot key: 1 key, limit 1000, 1 s", [
            ("SLIDEWIN.CHECK", one(["SLIDEWIN.CHECK", "hot", "1000", "1000"], n(300_000), 0, "slidewin.check")),
            ("Lua script", one(["EVALSHA", check_sha, "1", "luahot", "1000", "1000", MEMBER], n(300_000), HUGE, "evalsha")),
            ("SET (reference)", one(["SET", "sethot", "x"], n(300_000), 0, "set")),
        ], opts.rounds)
        table(srv, "SMS policy: MCHECK, 3 rules (5/min, 1/min, 10/day) on 3 random keys", [
            ("SLIDEWIN.MCHECK, 3 rules", one(["SLIDEWIN.MCHECK", "3", "{__rand_int__}:ip", "5", "60000",
                                              "{__rand_int__}:phone", "1", "60000", "{__rand_int__}:phone", "10", "86400000"],
                                             n(300_000), 100_000, "slidewin.mcheck")),
            ("SLIDEWIN.CHECK (one rule)", one(["SLIDEWIN.CHECK", "sms:__rand_int__", "5", "60000"], n(300_000), 100_000, "slidewin.check")),
            ("Lua script (one rule)", one(["EVALSHA", check_sha, "1", "lua:__rand_int__", "5", "60000", MEMBER], n(300_000), 100_000, "evalsha")),
        ], opts.rounds)

        # SLIDEWIN.TOP's summary on the hot path: the same CHECK loads with
        # slidewin.top-capacity at its default and at 0 (off), interleaved.
        top_on = [("CONFIG", "SET", "slidewin.top-capacity", "128")]
        top_off = [("CONFIG", "SET", "slidewin.top-capacity", "0")]
        sms = ["SLIDEWIN.CHECK", "sms:__rand_int__", "5", "60000"]
        table(srv, "SLIDEWIN.TOP summary on the hot path: SMS load (half denied), capacity 128 vs off", [
            ("SLIDEWIN.CHECK, TOP on (capacity 128)", one(sms, n(1_000_000), 100_000, "slidewin.check"), top_on),
            ("floor: SLIDEWIN.CHECK, TOP off", one(sms, n(1_000_000), 100_000, "slidewin.check"), top_off),
        ], opts.rounds)
        srv.r.config_set("slidewin.top-capacity", 128)

        emit("### memory per key (MEMORY USAGE ... SAMPLES 0)")
        emit()
        emit("| entries | slidewin | Lua script (`<ms>-<uuid>` members) | ratio |")
        emit("|---:|---:|---:|---:|")
        srv.r.flushall()
        for entries in (5, 1000):
            # Key names of one length, as the seed's: sms:limit:<ip>.
            ours = fill(srv, f"sms:limit:10.0.{entries % 256}.1", entries)
            theirs = fill(srv, f"sms:limit:10.0.{entries % 256}.2", entries, check_sha)
            emit(f"| {entries} | {ours} B | {theirs} B | {ours / theirs:.2f} |")
            if entries == 5:
                memory_line = f"- memory: a 5-entry key takes {ours} B, {ours / theirs:.2f} x the Lua script's ({theirs} B)"
        emit()

        guide(srv, n, emit, opts.scale)
    finally:
        srv.stop()

    # Production shape: one replica attached, the AOF on with everysec, so
    # propagation is real work; the floor and the script pay it too.
    master = Server(opts.server, cell=opts.cell, extra=["--appendonly", "yes", "--appendfsync", "everysec"],
                    module_args=margs)
    replica = None
    try:
        replica = Server(opts.server, cell=opts.cell, extra=["--replicaof", "127.0.0.1", str(master.port)],
                         module_args=margs)
        deadline = time.time() + 30
        while master.r.info("replication").get("connected_slaves", 0) < 1 or \
                replica.r.info("replication").get("master_link_status") != "up":
            if time.time() > deadline:
                sys.exit("bench: the replica did not attach")
            time.sleep(0.1)
        check_sha = master.r.script_load(LUA_CHECK)
        table(master, "production shape: one replica, appendonly yes, appendfsync everysec; 100k keys, limit 100, 60 s",
              [r for r in sms_rows(check_sha, n(500_000), 100_000, 100, opts.cell) if not r[0].startswith("SET")],
              opts.rounds)
    finally:
        if replica:
            replica.stop()
        master.stop()

    emit("targets: allowed CHECK <= 1.15 x floor, <= 0.7 x CL.THROTTLE, <= 0.2 x Lua; COST 5 <= 1.2 x floor; "
         "5-entry key <= 0.35 x Lua's")
    for title, label, vs_floor, vs_lua, vs_cell in summary:
        emit(f"- {title} / {label}: {vs_floor} x floor, {vs_lua} x Lua, {vs_cell} x CL.THROTTLE")
    if memory_line:
        emit(memory_line)
    if opts.out:
        with open(opts.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
