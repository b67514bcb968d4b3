#!/usr/bin/env python3
"""Instructions per call, counted by callgrind: repeatable where timings are not.

Runs one server under `valgrind --tool=callgrind --toggle-collect=call`, so
only the instructions executed inside the server's `call()` are counted:
the command itself and the propagation of its effects, the same span INFO
commandstats times. For each workload it zeroes the counters, sends the
calls (pipelined), dumps, and divides. Networking and parsing are left out,
which is fair to the floor (two commands, ZADD and PEXPIREAT, for one of
ours).

Workloads, each on fresh keys, every call allowed:
- CHECK: SLIDEWIN.CHECK k 5 60000, five calls per key (the SMS shape);
- floor: ZADD k <now> <member> + PEXPIREAT k <at>: the same effects;
- COST 5 and its floor: ZADD k with five members + PEXPIREAT;
- CL.THROTTLE (redis-cell), when --cell gives the module;
- CHECK on a full key: SLIDEWIN.CHECK k 100000 3600000 on keys already
  holding 99,000 entries spread over the last 50 minutes (is the cost flat in the
  limit?), against CHECK k 5 60000 above.

For the CHECK it also splits the count: the module's own code (the
instructions executed in its object) and the server's part (the dispatch of a
module command and every API call the module makes: opening the key,
RedisModule_Replicate, the expiry, the reply, the events...), the share no
module code can remove, against the floor.

With --log-type compact the module makes compact logs (the full keys are
loaded with SLIDEWIN.APPLY LOG, the sorted sets with ZADD).

Usage: bench/instructions.py [--server redis-7.0|...] [--keys 400] [--cell libredis_cell.so] [--log-type zset|compact]
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import MODULE, SERVERS, Server  # noqa: E402


def totals(path):
    """The instruction total of one callgrind dump."""
    with open(path) as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    sys.exit(f"no totals in {path}")


def split(path, module):
    """Of one callgrind dump's instructions, those executed in the module's
    own code (the self cost of every function of the object named by
    `module`: cost lines outside a call's) and the total; what is left is
    the server's part, its dispatch of a module command and every API call
    the module makes. Read from the dump itself: callgrind_annotate's call
    tree counts a tail call twice in an LTO-built server."""
    names = {}
    own = 0
    ours = False
    after_calls = False
    name_re = re.compile(r"(c?f?ob)=\((\d+)\)(?: (.*))?$")
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if after_calls:
                # The inclusive cost of the call just named: not self cost.
                after_calls = False
                continue
            m = name_re.match(line)
            if m:
                if m.group(3) is not None:
                    names[m.group(2)] = m.group(3)
                if m.group(1) == "ob":
                    ours = module in names.get(m.group(2), "")
            elif line.startswith("calls="):
                after_calls = True
            elif ours and (line[:1].isdigit() or line[:1] in "+-*"):
                parts = line.split()
                if len(parts) > 1:
                    own += int(parts[1])
    return own, totals(path)


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zigzag(v):
    return (v << 1) ^ (v >> 63)


def compact_payload(scores):
    """The compact log encoding (src/store/compact/codec.rs) of one entry per score,
    members 1, 2, ... (scores ascending, gaps under 16384 ms)."""
    out = bytearray([1, 0]) + varint(len(scores)) + varint(zigzag(scores[0]))
    prev = scores[0]
    for s in scores:
        gap = s - prev
        out += bytes([gap]) if gap < 128 else bytes([0x80 | (gap >> 8), gap & 0xFF])
        prev = s
    return bytes(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=SERVERS, default="redis-7.0")
    ap.add_argument("--keys", type=int, default=400)
    ap.add_argument("--cell", help="path of redis-cell's module (libredis_cell.so)")
    ap.add_argument("--out", help="append the table (markdown) to this file")
    ap.add_argument("--log-type", choices=["zset", "compact"], default="zset")
    ap.add_argument("--full-keys", type=int, default=10, help="keys of the full-key workload")
    opts = ap.parse_args()

    wrapper = ["valgrind", "--tool=callgrind", "--toggle-collect=call",
               "--callgrind-out-file=callgrind.out.%p", "--dump-instr=no"]
    srv = Server(opts.server, cell=opts.cell, wrapper=wrapper, timeout=120,
                 module_args=["log-type", opts.log_type])
    pid = srv.proc.pid
    rows = []
    try:
        clock = {"ms": 0}
        parts = {}

        def measure(name, calls, per_call, keys=None):
            """Runs calls(pipe) for every key; returns instructions per call.
            The server's time is read before the counters are zeroed: a TIME
            inside the measured span would be counted as the floor's (it
            was, ~270 instructions a call, until 2026-12-03)."""
            keys = keys or opts.keys
            clock["ms"] = now_ms()
            subprocess.run(["callgrind_control", "--zero", str(pid)], check=True, capture_output=True)
            pipe = srv.r.pipeline(transaction=False)
            for k in range(keys):
                calls(pipe, f"{name}:{k}")
                if k % 50 == 49:
                    pipe.execute()
            pipe.execute()
            before = set(glob.glob(os.path.join(srv.dir, "callgrind.out.*")))
            subprocess.run(["callgrind_control", "--dump=" + name, str(pid)], check=True, capture_output=True)
            deadline = time.time() + 60
            while True:
                new = set(glob.glob(os.path.join(srv.dir, "callgrind.out.*"))) - before
                if new:
                    time.sleep(0.5)
                    break
                if time.time() > deadline:
                    sys.exit("callgrind did not dump")
                time.sleep(0.1)
            path = max(new, key=os.path.getmtime)
            ir = totals(path)
            if name == "check":
                own, total = split(path, os.path.basename(MODULE))
                parts["own"] = own / (keys * per_call)
                parts["server"] = (total - own) / (keys * per_call)
            return ir / (keys * per_call)

        def now_ms():
            s, us = srv.r.time()
            return s * 1000 + us // 1000

        def check(pipe, key):
            for _ in range(5):
                pipe.execute_command("SLIDEWIN.CHECK", key, 5, 60000)

        def floor(pipe, key):
            t = clock["ms"]
            for i in range(1, 6):
                pipe.execute_command("ZADD", key, t, i)
                pipe.execute_command("PEXPIREAT", key, t + 60000)

        def check_cost(pipe, key):
            pipe.execute_command("SLIDEWIN.CHECK", key, 50, 60000, "COST", 5)

        def floor_cost(pipe, key):
            t = clock["ms"]
            pipe.execute_command("ZADD", key, t, 1, t, 2, t, 3, t, 4, t, 5)
            pipe.execute_command("PEXPIREAT", key, t + 60000)

        def throttle(pipe, key):
            for _ in range(5):
                pipe.execute_command("CL.THROTTLE", key, 4, 5, 60)

        check_ir = measure("check", check, 5)
        # SLIDEWIN.TOP's summary off: what recording each decision costs.
        srv.r.config_set("slidewin.top-capacity", 0)
        check_off_ir = measure("checkoff", check, 5)
        srv.r.config_set("slidewin.top-capacity", 128)
        floor_ir = measure("floor", floor, 5)
        cost_ir = measure("cost5", check_cost, 1)
        floor_cost_ir = measure("floorcost5", floor_cost, 1)
        cell_ir = measure("cell", throttle, 5) if opts.cell else None

        # Full keys: 99,000 entries 30 ms apart, the oldest 49.5 minutes
        # old: loading 99,000 ZADDs under callgrind takes minutes, and
        # entries expiring meanwhile would make every measured CHECK trim
        # hundreds (seen: 93,000-170,000 instructions a call instead of
        # ~15,000 with 36 ms over the whole hour).
        start = now_ms() - 2_970_000
        scores = [start + 30 * i for i in range(99_000)]
        for k in range(opts.full_keys):
            key = f"full:{k}"
            if opts.log_type == "compact":
                srv.r.execute_command("SLIDEWIN.APPLY", key, "LOG", compact_payload(scores),
                                      "PXAT", scores[-1] + 3_600_000)
            else:
                for at in range(0, len(scores), 10_000):
                    srv.r.zadd(key, {str(i + 1): scores[i] for i in range(at, min(at + 10_000, len(scores)))})
                srv.r.pexpireat(key, scores[-1] + 3_600_000)

        def check_full(pipe, key):
            for _ in range(5):
                pipe.execute_command("SLIDEWIN.CHECK", key, 100_000, 3_600_000)

        full_ir = measure("full", check_full, 5, keys=opts.full_keys)
        rows.append(f"| {opts.server} {srv.version} ({opts.log_type}) | {check_ir:,.0f} | {floor_ir:,.0f} | {check_ir / floor_ir:.2f} | "
                    f"{cost_ir:,.0f} | {floor_cost_ir:,.0f} | {cost_ir / floor_cost_ir:.2f} | "
                    + (f"{cell_ir:,.0f} | {check_ir / cell_ir:.2f} |" if cell_ir else "not given | - |")
                    + f" {check_off_ir:,.0f} | {check_ir / check_off_ir:.3f} |"
                    + f" {full_ir:,.0f} | {full_ir / check_ir:.2f} |"
                    + f" {parts['own']:,.0f} | {parts['server']:,.0f} | {parts['server'] / floor_ir:.2f} |")
    finally:
        srv.stop()
    header = ("| server (log type) | CHECK (instr/call) | floor ZADD+PEXPIREAT | × floor | CHECK COST 5 | floor ZADD 5 + PEXPIREAT "
              "| × floor | CL.THROTTLE | CHECK × CL.THROTTLE | CHECK, TOP off | TOP on / off "
              "| CHECK on a 99,000-entry key, limit 100,000 | × limit 5 "
              "| CHECK: the module's own code | CHECK: the server's part | server's part × floor |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(header)
    for r in rows:
        print(r)
    if opts.out:
        new = not os.path.exists(opts.out)
        with open(opts.out, "a") as f:
            if new:
                f.write(header + "\n")
            f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
