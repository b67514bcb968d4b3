#!/usr/bin/env python3
"""What a charge costs at scale: request ids on one key holding 1k to 1M
live charges, both log types, master and replica (issue 39's table).

On each server, for each log type (`zset`, and `compact`: the module loaded
with `log-type compact`), a master and a replica attached to it are started
(the module loaded with `max-limit 10000000`, so a key may hold 1M charges;
every key has a window of WINDOW_MS, so nothing expires during a run).

For each size of --sizes, one key is built afresh with charges,
`SLIDEWIN.CHECK key LIMIT WINDOW_MS ID <16 bytes>` (COST 1): first a tail
of --tail charges one a millisecond, then the rest pipelined, thousands a
round trip; ids are random bytes (`random`) or a 16-digit counter
(`ordered`: each id sorts after the one before). At each size, after the
replica has caught up, batches are measured by INFO commandstats (CONFIG
RESETSTAT on master and replica before each batch, usec_per_call after it):
- steady state ("expiring"): CHECK with a new ID, then CHECK without ID,
  one call a millisecond (up to --sweep-calls), with a window that cuts
  through the tail, so that about one charge leaves the window each call
  as on a busy key (a charge in, a charge out): the cost of a trim;
then, nothing expiring (the window is WINDOW_MS), batches of --batch calls:
- CHECK with a new ID (COST 1);
- UNDO key ID of each charge that batch made (the key is back at its size);
- CHECK without ID (these entries stay: at most --batch a size);
- SETTLE of one of the key's first (oldest) charges, raised by one unit
  (COST 2), then lowered back (COST 1);
- on the replica, for each batch: the server time of every command it ran
  to apply the master's effects (slidewin.apply on compact logs; zadd,
  zrem, pexpireat, multi, exec... on sorted sets), summed and divided by
  the master's calls;
- MEMORY USAGE key SAMPLES 0 divided by the live charges (right after the
  fill).
A fill stops after --fill-seconds (the size reached is reported and
measured; larger sizes are not), a batch after --phase-seconds (the calls
made are measured).

Before the fills, on the same servers (empty): the small-key case (five
CHECKs of COST 1 a key, with 16-byte ids and without, over --small-keys
keys: used_memory grown per key and MEMORY USAGE of one key) and the
day-window token key (window 86400000 ms: --day-charges charges with ids,
one a millisecond, and a SETTLE raising each older charge by one unit,
all after the charges, or each --day-lag charges after its own as a
gateway settles: the error replies are counted).

Usage: bench/charges.py [--servers redis-7.0,redis-8.2,valkey-8.1,valkey-9.1]
       [--log-types zset,compact] [--orders random,ordered]
       [--sizes 1000,10000,100000,1000000] [--batch 500]
       [--fill-seconds 120] [--phase-seconds 20] [--tail 1000]
       [--sweep-calls 300] [--small-keys 10000] [--day-charges 1100]
       [--day-lag 2] [--out FILE] [--smoke]
(SLIDEWIN_MODULE=path measures another build.)
"""

import argparse
import hashlib
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402

import bench  # noqa: E402
from bench import SERVERS, Server  # noqa: E402

WINDOW_MS = 30 * 86_400_000  # 30 days: nothing expires during a run
LIMIT = 10_000_000  # the largest slidewin.max-limit
MODULE_ARGS = ["max-limit", str(LIMIT), "max-charges-per-key", str(1 << 24)]
DAY_MS = 86_400_000
SMALL_KEY = "sms:limit:192.168.1.100"
# Commands a replica runs that are not the master's effects.
NOT_EFFECTS = {"info", "config", "ping", "replconf", "select", "command", "client", "hello",
               "memory", "dbsize", "debug", "time"}


def resp(*args):
    """One command in RESP, its arguments str, int or bytes."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = str(a).encode()
        elif isinstance(a, str):
            a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Raw:
    """A pipelining connection for commands whose replies are one line each
    (integers and errors: CHECK without DETAIL, SETTLE, UNDO)."""

    def __init__(self, port, timeout=600):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def run(self, packed, n):
        """Sends `n` packed commands; returns their reply lines."""
        self.sock.sendall(packed)
        lines = []
        while len(lines) < n:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("server closed the connection")
            self.buf += data
            parts = self.buf.split(b"\r\n")
            self.buf = parts.pop()
            lines += parts
        if len(lines) > n:
            raise RuntimeError(f"{len(lines) - n} unexpected reply lines (a multi-line reply?)")
        return lines

    def close(self):
        self.sock.close()


def replica_offset(r):
    info = r.info("replication")
    for name in ("slave_repl_offset", "replica_repl_offset", "master_repl_offset"):
        if name in info:
            return int(info[name])
    return -1


def caught_up(master, replica, timeout):
    """Waits until the replica has applied everything the master had sent
    when called; returns the seconds waited, or None after `timeout`. A
    replica busy applying a long stream answers nothing until it is done:
    its INFO is asked with a short timeout, again until `timeout`."""
    target = int(master.r.info("replication")["master_repl_offset"])
    start = time.time()
    while True:
        try:
            client = redis.Redis(port=replica.port, socket_timeout=5, socket_connect_timeout=5)
            try:
                if replica_offset(client) >= target:
                    return time.time() - start
            finally:
                client.close()
        except (redis.exceptions.TimeoutError, redis.exceptions.ConnectionError):
            pass
        if time.time() - start > timeout:
            return None
        time.sleep(0.01)


def attach(master, replica, timeout=60):
    deadline = time.time() + timeout
    while master.r.info("replication").get("connected_slaves", 0) < 1 or \
            replica.r.info("replication").get("master_link_status") != "up":
        if time.time() > deadline:
            sys.exit("charges: the replica did not attach")
        time.sleep(0.1)


def dataset(r):
    """used_memory without the replication buffers (the backlog and what the
    replica has not read: they grow and shrink with the writes, not the keys)."""
    info = r.info("memory")
    return int(info["used_memory"]) - int(info.get("mem_total_replication_buffers", 0))


def effects(replica):
    """The replica's commandstats of applied effects: {command: (calls, usec)}."""
    out = {}
    for name, entry in replica.r.info("commandstats").items():
        cmd = name[len("cmdstat_"):]
        if cmd.split("|")[0] in NOT_EFFECTS:
            continue
        out[cmd] = (int(entry["calls"]), int(entry["usec"]))
    return out


class Bench:
    def __init__(self, opts, emit):
        self.opts = opts
        self.emit = emit
        self.notes = []  # anything odd, printed after the tables
        self.rng = random.Random(39)

    def note(self, text):
        print("note: " + text, flush=True)
        self.notes.append(text)

    # ---- one measured batch ----

    def batch(self, master, replica, stat, commands):
        """Runs `commands` (packed, in order) on the master, pipelined in
        chunks, for at most --phase-seconds; returns a dict: master µs a
        call, calls, errors, first error, replica µs a master call, the
        replica's commands."""
        self.settle(master, replica)
        master.r.config_resetstat()
        replica.r.config_resetstat()
        raw = Raw(master.port)
        deadline = time.time() + self.opts.phase_seconds
        made, errors, first_error, chunk = 0, 0, None, 50
        try:
            while made < len(commands) and time.time() < deadline:
                part = commands[made:made + chunk]
                t0 = time.time()
                lines = raw.run(b"".join(part), len(part))
                for line in lines:
                    if line.startswith(b"-"):
                        errors += 1
                        first_error = first_error or line[1:].decode(errors="replace")
                made += len(part)
                # The replica applies each chunk before the next is sent:
                # the phase's time bounds its work too.
                if caught_up(master, replica, max(1.0, deadline - time.time())) is None:
                    break
                took = time.time() - t0
                # At most ~0.5 s a round trip, so the deadline holds.
                chunk = max(1, min(500, int(chunk * 0.5 / max(took, 1e-4))))
        finally:
            raw.close()
        return self.collect(master, replica, stat, made, errors, first_error)

    # ---- filling ----

    def fill(self, master, key, ids, start, target):
        """Charges ids[start:target] on `key`; stops after --fill-seconds.
        Returns the number of charges the key holds."""
        raw = Raw(master.port)
        deadline = time.time() + self.opts.fill_seconds
        i, chunk = start, 1000
        try:
            while i < target and time.time() < deadline:
                part = ids[i:min(target, i + chunk)]
                packed = b"".join(resp("SLIDEWIN.CHECK", key, LIMIT, WINDOW_MS, "ID", x) for x in part)
                t0 = time.time()
                lines = raw.run(packed, len(part))
                took = time.time() - t0
                bad = [line for line in lines if line != b":1"]
                if bad:
                    self.note(f"{master.kind}/{master.log_type}: a fill CHECK answered {bad[0]!r} "
                              f"at {i:,} charges; the fill stops there")
                    i += lines.index(bad[0])
                    break
                i += len(part)
                chunk = max(10, min(5000, int(chunk * 1.0 / max(took, 1e-4))))
        finally:
            raw.close()
        return i

    # ---- the tables ----

    def sweep(self, master, replica, stat, make, cutoff_from, cutoff_to):
        """Steady state: calls one at a time, each in a millisecond of its
        own, with a window that puts the call's cutoff (now - window) at
        `cutoff_from` when the phase starts; the cutoff then moves with the
        clock through the tail of charges made one a millisecond, so about
        one charge leaves the window each call (more when a call takes
        longer than 1 ms). Stops when the cutoff reaches `cutoff_to`, after
        --sweep-calls calls or --phase-seconds. `make(window, i)` packs call
        i. Returns batch()'s dict and the cutoff reached."""
        self.settle(master, replica)
        master.r.config_resetstat()
        replica.r.config_resetstat()
        raw = Raw(master.port)
        window = now_ms() - cutoff_from
        deadline = time.time() + self.opts.phase_seconds
        made, errors, first_error, last = 0, 0, None, 0
        try:
            while made < self.opts.sweep_calls and time.time() < deadline:
                t = now_ms()
                while t == last:
                    t = now_ms()
                if t - window >= cutoff_to:
                    break
                line = raw.run(make(window, made), 1)[0]
                last = t
                if line.startswith(b"-"):
                    errors += 1
                    first_error = first_error or line[1:].decode(errors="replace")
                made += 1
        finally:
            raw.close()
        reached = now_ms() - window
        out = self.collect(master, replica, stat, made, errors, first_error)
        out["cutoff"] = reached
        return out

    def settle(self, master, replica):
        """Waits (up to --replica-seconds) for the replica to finish the
        work of the batch before, so that it answers and is measured alone."""
        if caught_up(master, replica, self.opts.replica_seconds) is None:
            self.note(f"{master.kind}/{master.log_type}: the replica was still behind "
                      f"{self.opts.replica_seconds} s after a batch; the next batch started anyway")

    def collect(self, master, replica, stat, made, errors, first_error):
        entry = master.r.info("commandstats").get(f"cmdstat_{stat}")
        out = {"usec": float(entry["usec_per_call"]) if entry else float("nan"), "calls": made,
               "errors": errors, "first_error": first_error, "replica": None, "replica_cmds": ""}
        waited = caught_up(master, replica, self.opts.replica_seconds)
        if waited is None:
            self.note(f"{master.kind}/{master.log_type}: the replica had not caught up "
                      f"{self.opts.replica_seconds} s after a {stat} batch")
            return out
        applied = effects(replica)
        if made:
            out["replica"] = sum(u for _, u in applied.values()) / made
        out["replica_cmds"] = "+".join(sorted(c for c, (n, _) in applied.items() if n))
        return out

    def tail(self, master, key, ids):
        """The key's first charges, one a millisecond (each call waits
        for the clock to move on): (first, last) ms they were made in."""
        raw = Raw(master.port)
        first = last = 0
        try:
            for i, x in enumerate(ids):
                t = now_ms()
                while t == last:
                    t = now_ms()
                line = raw.run(resp("SLIDEWIN.CHECK", key, LIMIT, WINDOW_MS, "ID", x), 1)[0]
                if line != b":1":
                    sys.exit(f"charges: a tail CHECK answered {line!r}")
                first = first or t
                last = t
        finally:
            raw.close()
        return first, now_ms()

    # ---- the tables ----

    def sizes_run(self, master, replica, order):
        """Builds one key of each size (afresh: a tail of --tail charges
        one a millisecond, then the rest pipelined) and measures there;
        returns {size: row} (a row: the measurements, or the reason there
        is none)."""
        o = self.opts
        key = f"charges:{order}"
        top = max(o.sizes)
        if order == "random":
            ids = [self.rng.randbytes(16) for _ in range(top)]
        else:
            ids = [b"%016d" % i for i in range(top)]
        rows, stopped = {}, None
        for size in o.sizes:
            if stopped:
                rows[size] = {"skip": stopped}
                continue
            master.r.execute_command("FLUSHALL", "SYNC")
            caught_up(master, replica, o.replica_seconds)
            t0 = time.time()
            tail = min(o.tail, size)
            tail_from, tail_to = self.tail(master, key, ids[:tail])
            have = self.fill(master, key, ids, tail, size)
            fill_s = time.time() - t0
            if have < size:
                stopped = f"the fill to {size:,} stopped at {have:,} charges after {o.fill_seconds:.0f} s"
                self.note(f"{master.kind} {master.log_type} {order}: filling to {size:,} stopped at "
                          f"{have:,} charges after {fill_s:.0f} s; measured there, larger sizes not")
            lag = caught_up(master, replica, o.replica_seconds)
            if lag is None:
                self.note(f"{master.kind} {master.log_type} {order}: the replica had not caught up "
                          f"{o.replica_seconds} s after the fill to {have:,}")
            elif lag > 1:
                self.note(f"{master.kind} {master.log_type} {order}: the replica caught up {lag:.1f} s "
                          f"after the master finished filling to {have:,} ({fill_s:.0f} s)")
            row = {"charges": have, "fill_s": fill_s}
            usage = master.r.memory_usage(key, samples=0) or 0
            row["bytes"] = usage / have if have else float("nan")
            b = min(o.batch, have)
            fresh = [b"n%07d%08d" % (size % 10_000_000, j) for j in range(b)]
            row["check_id"] = self.batch(master, replica, "slidewin.check", [
                resp("SLIDEWIN.CHECK", key, LIMIT, WINDOW_MS, "ID", x) for x in fresh])
            made = row["check_id"]["calls"]
            row["undo"] = self.batch(master, replica, "slidewin.undo", [
                resp("SLIDEWIN.UNDO", key, "ID", x) for x in fresh[:made]])
            if row["undo"]["calls"] < made:
                self.note(f"{master.kind} {master.log_type} {order} {have:,}: UNDO gave back "
                          f"{row['undo']['calls']} of the {made} charges the CHECK batch made")
            row["check"] = self.batch(master, replica, "slidewin.check", [
                resp("SLIDEWIN.CHECK", key, LIMIT, WINDOW_MS) for _ in range(b)])
            old = ids[:b]
            row["raise"] = self.batch(master, replica, "slidewin.settle", [
                resp("SLIDEWIN.SETTLE", key, "ID", x, "COST", 2) for x in old])
            raised = row["raise"]["calls"]
            row["lower"] = self.batch(master, replica, "slidewin.settle", [
                resp("SLIDEWIN.SETTLE", key, "ID", x, "COST", 1) for x in old[:raised]])
            # Steady state: the tail leaves the window, about a charge a
            # call; the first half under CHECK+ID, the second under CHECK.
            half = tail_from + (tail_to - tail_from) // 2
            row["x_check_id"] = self.sweep(
                master, replica, "slidewin.check",
                lambda w, i: resp("SLIDEWIN.CHECK", key, LIMIT, w, "ID", b"s%07d%08d" % (size % 10_000_000, i)),
                tail_from - 1, half)
            row["x_check"] = self.sweep(
                master, replica, "slidewin.check",
                lambda w, i: resp("SLIDEWIN.CHECK", key, LIMIT, w),
                row["x_check_id"]["cutoff"], tail_to)
            for name in NAMES:
                m = row[name]
                if m["errors"]:
                    self.note(f"{master.kind} {master.log_type} {order} {have:,}: {name} "
                              f"{m['errors']} of {m['calls']} calls failed: {m['first_error']}")
            rows[size] = row
            print(f"  {master.kind} {master.log_type} {order} {have:,} charges (fill {fill_s:.1f} s): " +
                  ", ".join(f"{n} {row[n]['usec']:.1f}/{fmt(row[n]['replica'])} ({row[n]['calls']})"
                            for n in NAMES) +
                  f", {row['bytes']:.1f} B/charge", flush=True)
        return rows

    def small_keys(self, master, replica):
        """used_memory grown per key and MEMORY USAGE of one key, five
        CHECKs of COST 1 a key, with 16-byte ids and without."""
        r = master.r
        out = {}
        # The first pass warms the server up (the replication backlog
        # grows to its size, 1 MB, with the first writes: ~100 B a key of
        # 10,000 that a first measured pass would count); not measured.
        for label, with_ids in (("warm-up", True), ("no ID", False), ("16-byte IDs", True)):
            r.execute_command("FLUSHALL", "SYNC")
            # used_memory counts the replication buffer the replica has not
            # read yet: read it with the replica caught up.
            self.settle(master, replica)
            before = dataset(r)
            raw = Raw(master.port)
            try:
                packed = []
                for k in range(self.opts.small_keys):
                    key = f"sms:limit:192.168.{k // 256 % 256}.{k % 256}" + (f":{k // 65536}" if k >= 65536 else "")
                    for j in range(5):
                        extra = ["ID", b"%08x%08x" % (k, j)] if with_ids else []
                        packed.append(resp("SLIDEWIN.CHECK", key, 5, WINDOW_MS, *extra))
                    if len(packed) >= 5000:
                        lines = raw.run(b"".join(packed), len(packed))
                        assert all(x == b":1" for x in lines), lines[:3]
                        packed = []
                if packed:
                    raw.run(b"".join(packed), len(packed))
            finally:
                raw.close()
            self.settle(master, replica)
            per_key = (dataset(r) - before) / self.opts.small_keys
            for j in range(5):
                extra = ["ID", b"one-key-id-%05d" % j] if with_ids else []
                r.execute_command("SLIDEWIN.CHECK", SMALL_KEY, 5, WINDOW_MS, *extra)
            out[label] = (per_key, r.memory_usage(SMALL_KEY, samples=0))
        r.execute_command("FLUSHALL", "SYNC")
        del out["warm-up"]
        return out

    def day_window(self, master):
        """A token key of a day's window: --day-charges charges with ids,
        one a millisecond, and a SETTLE raising each older charge by one
        unit, in two orders: every raise after every charge, and (as a
        gateway settles) each raise --day-lag charges after its own."""
        r = master.r
        n = self.opts.day_charges
        out = {"raises": n - 1}
        for name, lag in (("after", None), ("interleaved", self.opts.day_lag)):
            r.execute_command("FLUSHALL", "SYNC")
            key = "tokens:day"
            ids = [b"tok-%012d" % i for i in range(n)]
            raw = Raw(master.port)
            made, lines, last = [], [], 0
            try:
                for i, x in enumerate(ids):
                    t = now_ms()
                    while t == last:
                        t = now_ms()
                    made += raw.run(resp("SLIDEWIN.CHECK", key, LIMIT, DAY_MS, "ID", x), 1)
                    last = t
                    if lag is not None and i >= lag:
                        lines += raw.run(resp("SLIDEWIN.SETTLE", key, "ID", ids[i - lag], "COST", 2), 1)
                if lag is None:
                    # Every charge but the newest is older than a later one.
                    lines = raw.run(b"".join(resp("SLIDEWIN.SETTLE", key, "ID", x, "COST", 2)
                                             for x in ids[:-1]), n - 1)
            finally:
                raw.close()
            failed = [i for i, x in enumerate(lines) if x.startswith(b"-")]
            out[name] = {"raises": len(lines), "failed": len(failed),
                         "first_failed": failed[0] + 1 if failed else None,
                         "error": lines[failed[0]][1:].decode(errors="replace") if failed else "",
                         "check_errors": sum(1 for x in made if x != b":1")}
        r.execute_command("FLUSHALL", "SYNC")
        return out

    def server_run(self, kind):
        """Everything on one server: {log_type: results}."""
        out = {}
        for log_type in self.opts.log_types:
            margs = ["log-type", log_type] + MODULE_ARGS
            master = Server(kind, module_args=margs, timeout=30)
            master.kind, master.log_type = kind, log_type
            replica = None
            try:
                replica = Server(kind, module_args=margs, timeout=30,
                                 extra=["--replicaof", "127.0.0.1", str(master.port)])
                attach(master, replica)
                self.version = master.version
                res = {"small": self.small_keys(master, replica), "day": self.day_window(master)}
                print(f"  {kind} {log_type}: small keys {res['small']}, day window {res['day']}", flush=True)
                for order in self.opts.orders:
                    res[order] = self.sizes_run(master, replica, order)
                syncs = int(master.r.info("stats").get("sync_full", 0))
                if syncs > 1:
                    self.note(f"{kind} {log_type}: {syncs} full syncs (the replica reconnected)")
                out[log_type] = res
            finally:
                if replica:
                    replica.stop()
                master.stop()
        return out

    # ---- output ----

    def server_tables(self, kind, res):
        emit, o = self.emit, self.opts
        emit(f"## {kind} {self.version}")
        emit()
        cols = ["live charges", "CHECK+ID, expiring", "CHECK, expiring", "CHECK+ID", "CHECK",
                "SETTLE +1 (old)", "SETTLE −1", "UNDO ID",
                "replica: same 7", "B/charge"]
        for order in o.orders:
            emit(f"### {order} ids: server µs per call (INFO commandstats)")
            emit()
            head = ["charges"]
            for lt in o.log_types:
                head += [f"{lt} {c}" for c in cols]
            emit("| " + " | ".join(head) + " |")
            emit("|" + "---:|" * len(head))
            for size in o.sizes:
                cells = [f"{size:,}"]
                for lt in o.log_types:
                    row = res[lt][order].get(size, {"skip": "not run"})
                    if "skip" in row:
                        cells += ["—"] * len(cols)
                        continue
                    rep = " / ".join(fmt(row[n]["replica"]) for n in NAMES)
                    cells += [f"{row['charges']:,}"] + [cell(row[n]) for n in NAMES] + \
                             [rep, f"{row['bytes']:.1f}"]
                emit("| " + " | ".join(cells) + " |")
            emit()
            for lt in o.log_types:
                skipped = {row["skip"] for row in res[lt][order].values() if "skip" in row}
                for why in sorted(skipped):
                    emit(f"- {lt}, {order} ids, — : {why}.")
                done = [r for r in res[lt][order].values() if "skip" not in r]
                if done:
                    emit(f"- {lt}, {order} ids: fill time " +
                         ", ".join(f"{r['charges']:,} in {r['fill_s']:.1f} s" for r in done) + "; replica applies " +
                         ", ".join(sorted({r[n]['replica_cmds'] for r in done for n in NAMES
                                           if r[n]['replica_cmds']})))
            emit()
        emit("### small keys and the day-window token key")
        emit()
        emit("| log type | used_memory a key, 5 CHECKs, no ID | with 16-byte IDs | MEMORY USAGE, no ID | with 16-byte IDs | "
             f"day window: raises failed, all after the {o.day_charges:,} charges | "
             f"each raise {o.day_lag} charges after its own |")
        emit("|---|---:|---:|---:|---:|---|---|")
        for lt in o.log_types:
            s, d = res[lt]["small"], res[lt]["day"]
            days = []
            for name in ("after", "interleaved"):
                x = d[name]
                day = f"{x['failed']} of {x['raises']}"
                if x["failed"]:
                    day += f" (from raise {x['first_failed']:,}: `{x['error']}`)"
                if x["check_errors"]:
                    day += f"; {x['check_errors']} CHECKs failed"
                days.append(day)
            emit(f"| {lt} | {s['no ID'][0]:.0f} B | {s['16-byte IDs'][0]:.0f} B | {s['no ID'][1]} B | "
                 f"{s['16-byte IDs'][1]} B | {days[0]} | {days[1]} |")
        emit()
        self.goals(res)

    def goals(self, res):
        """Issue 39's done-when figures from this server's rows."""
        o, emit = self.opts, self.emit
        lines = []
        for lt in o.log_types:
            for order in o.orders:
                rows = res[lt][order]
                done = [r for s, r in sorted(rows.items()) if "skip" not in r]
                # The goal: 100k against 1k; else the largest measured.
                a = rows.get(1000) if rows.get(1000, {}).get("charges") == 1000 else None
                z = rows.get(100_000) if rows.get(100_000, {}).get("charges") == 100_000 else \
                    (done[-1] if done else None)
                if a and z and z is not a:
                    lines.append(f"- {lt}, {order}: CHECK+ID (expiring) at {z['charges']:,} charges = "
                                 f"{ratio(z['x_check_id']['usec'], a['x_check_id']['usec'])} x at 1,000 "
                                 f"(goal at 100k vs 1k: within 2x)")
                if done:
                    z = done[-1]
                    lines.append(f"- {lt}, {order}: at {z['charges']:,} charges, replica SETTLE +1 = "
                                 f"{ratio(z['raise']['replica'], z['raise']['usec'])} x the master's "
                                 f"(goal: within 3x); CHECK+ID = {ratio(z['x_check_id']['usec'], z['x_check']['usec'])} x "
                                 f"CHECK while charges leave the window, "
                                 f"{ratio(z['check_id']['usec'], z['check']['usec'])} x with none leaving "
                                 f"(goal: within 1.3x)")
        if lines:
            emit("Goals (issue 39):")
            emit()
            for line in lines:
                emit(line)
            emit()


NAMES = ("x_check_id", "x_check", "check_id", "check", "raise", "lower", "undo")


def now_ms():
    return time.time_ns() // 1_000_000


def fmt(x):
    if x is None or x != x:
        return "—"
    return f"{x:,.1f}" if x < 1000 else f"{x:,.0f}"


def cell(m):
    text = fmt(m["usec"])
    if m["errors"]:
        text += f" ({m['errors']} of {m['calls']} failed)"
    return text


def ratio(a, b):
    if a is None or b is None or not b or a != a or b != b:
        return "—"
    return f"{a / b:.2f}"


def build_id():
    """The module measured: its path, sha256 and, when it is this
    checkout's build, the checkout's commit."""
    with open(bench.MODULE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        head = "?"
    built = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(bench.MODULE)))
    # A module given by SLIDEWIN_MODULE may come from any commit: the
    # checkout's is not its source.
    source = (f"source {head}" if not os.environ.get("SLIDEWIN_MODULE")
              else f"given by SLIDEWIN_MODULE, its source unknown; bench from {head}")
    return f"{bench.MODULE} (sha256 {digest}, built {built}; {source})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--log-types", default="zset,compact")
    ap.add_argument("--orders", default="random,ordered")
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--batch", type=int, default=500, help="calls in a measured batch")
    ap.add_argument("--fill-seconds", type=float, default=120, help="longest fill to one size")
    ap.add_argument("--phase-seconds", type=float, default=20, help="longest measured batch")
    ap.add_argument("--replica-seconds", type=float, default=300, help="longest wait for the replica")
    ap.add_argument("--tail", type=int, default=1000, help="charges made one a millisecond first (the steady-state calls expire them)")
    ap.add_argument("--sweep-calls", type=int, default=300, help="most calls in a steady-state batch")
    ap.add_argument("--small-keys", type=int, default=10_000)
    ap.add_argument("--day-charges", type=int, default=1100)
    ap.add_argument("--day-lag", type=int, default=2, help="charges between a charge and its raise (day window, interleaved)")
    ap.add_argument("--out", help="write the tables (markdown) to this file")
    ap.add_argument("--no-sizes", action="store_true", help="only the small keys and the day-window token key")
    ap.add_argument("--smoke", action="store_true",
                    help="a short run: redis-7.0, 1k charges, random ids, batches of 50 (about 10 s)")
    opts = ap.parse_args()
    if opts.smoke:
        opts.servers, opts.sizes, opts.orders, opts.batch = "redis-7.0", "1000", "random", 50
        opts.small_keys, opts.fill_seconds, opts.phase_seconds = 200, 30, 10
        opts.tail, opts.sweep_calls, opts.day_charges = 200, 50, 1100
    opts.servers = [s for s in opts.servers.split(",") if s]
    opts.log_types = [s for s in opts.log_types.split(",") if s]
    opts.orders = [] if opts.no_sizes else [s for s in opts.orders.split(",") if s]
    opts.sizes = sorted(int(s) for s in opts.sizes.split(",") if s)
    for s in opts.servers:
        if s not in SERVERS:
            ap.error(f"--servers: {s} is not one of {','.join(SERVERS)}")
    for s in opts.log_types:
        if s not in ("zset", "compact"):
            ap.error(f"--log-types: {s} is not zset or compact")
    for s in opts.orders:
        if s not in ("random", "ordered"):
            ap.error(f"--orders: {s} is not random or ordered")
    # SIGTERM unwinds like an exception: bench.py's exit handler stops the servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("charges: terminated"))
    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    started = time.time()
    built = build_id()  # as the run starts (the worktree may move on)
    b = Bench(opts, emit)
    results = {}

    def render(final):
        """The tables of the servers done so far (written after each
        server, so that a run cut short keeps what it measured)."""
        lines.clear()
        done = "" if final else f" (partial: {len(results)} of {len(opts.servers)} servers so far)"
        emit("# Charges at scale (bench/charges.py)" + done)
        emit()
        emit(f"- command: `{' '.join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:])}`")
        emit(f"- module: {built}")
        emit(f"- machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}; run took "
             f"{(time.time() - started) / 60:.1f} min (" +
             ", ".join(f"{k} {t / 60:.1f}" for k, (_, _, t) in results.items()) + ")")
        emit(f"- one key, window {WINDOW_MS:,} ms, limit {LIMIT:,} (module loaded with `max-limit {LIMIT}`); "
             f"16-byte ids; batches of {opts.batch} calls (fewer where --phase-seconds {opts.phase_seconds:g} ran out); "
             f"a fill stops after {opts.fill_seconds:g} s")
        emit("- µs per call: the master's INFO commandstats usec_per_call over one batch (CONFIG RESETSTAT "
             "before it); replica: the usec of every command the replica ran to apply that batch's "
             "effects, divided by the master's calls; B/charge: MEMORY USAGE key SAMPLES 0 / live charges "
             "(right after the fill). `—`: not measured (the reason is under the table).")
        emit(f"- each key: {opts.tail:,} charges one a millisecond (the tail), then the rest pipelined. "
             "`expiring`: one call a millisecond (at most "
             f"{opts.sweep_calls}), the window cut through the tail so that about one charge leaves it a call "
             "(a busy key's steady state: this is where a trim's cost shows); the other columns: nothing expires. "
             "CHECK without ID leaves its entries (at most one batch); UNDO ID gives back the charges "
             "the CHECK+ID batch made; SETTLE raises the key's first (oldest) charges from 1 to 2 units, then lowers "
             "them back. Replica: the same seven, in order.")
        emit()
        for kind, (res, version, _) in results.items():
            b.version = version
            b.server_tables(kind, res)
        if b.notes:
            emit("## Notes from the run")
            emit()
            for n in b.notes:
                emit(f"- {n}")
            emit()

    for kind in opts.servers:
        print(f"# {kind}", flush=True)
        t0 = time.time()
        results[kind] = (b.server_run(kind), b.version, time.time() - t0)
        if opts.out or kind == opts.servers[-1]:
            render(kind == opts.servers[-1])
        if opts.out:
            with open(opts.out, "w") as f:
                f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
