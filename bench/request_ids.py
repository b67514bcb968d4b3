#!/usr/bin/env python3
"""What a request ID costs: instructions per call (callgrind) and bytes per
entry (MEMORY USAGE), with and without `ID`, in one run.

Instructions, counted inside the server's `call()` as bench/instructions.py
does, on fresh keys, every call allowed, five calls per key:
- CHECK k 5 60000 (no ID), and the same on the module given by --before
  (an older build, for "a CHECK without ID is unchanged");
- CHECK k 5 60000 ID <16 bytes>, each call its own ID;
- the same five calls again: repeats (nothing charged);
- SETTLE of a 5-unit charge down to 2 and back up to 5.

Memory, MEMORY USAGE of keys the module made (sorted sets, or compact logs
with --log-type compact): five calls of COST 1 per key, and one call of COST
N (N = 100 and 1000: listpack and skiplist encodings), with no ID, a
16-byte ID and a 36-byte ID (a UUID's text).

Usage: bench/request_ids.py [--server redis-7.0|...] [--keys 300] [--before path/to/old/libslidewin.so] [--log-type zset|compact] [--out FILE]
"""

import argparse
import glob
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from bench import SERVERS, Server  # noqa: E402
from instructions import totals  # noqa: E402


def instructions(server, module, keys, log_type, with_ids):
    """Instructions per call of each workload on one server with `module`."""
    saved = bench.MODULE
    bench.MODULE = module
    try:
        wrapper = ["valgrind", "--tool=callgrind", "--toggle-collect=call",
                   "--callgrind-out-file=callgrind.out.%p", "--dump-instr=no"]
        srv = Server(server, wrapper=wrapper, timeout=120, module_args=["log-type", log_type])
    finally:
        bench.MODULE = saved
    pid = srv.proc.pid
    out = {}
    try:
        def measure(name, calls, per_key):
            subprocess.run(["callgrind_control", "--zero", str(pid)], check=True, capture_output=True)
            pipe = srv.r.pipeline(transaction=False)
            for k in range(keys):
                calls(pipe, k)
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
            return totals(max(new, key=os.path.getmtime)) / (keys * per_key)

        def rid(k, i):
            return f"{k:08x}-{i:07x}".encode()  # 16 bytes

        def check(pipe, k):
            for _ in range(5):
                pipe.execute_command("SLIDEWIN.CHECK", f"plain:{k}", 5, 60000)

        def check_id(pipe, k):
            for i in range(5):
                pipe.execute_command("SLIDEWIN.CHECK", f"ids:{k}", 5, 60000, "ID", rid(k, i))

        def settle(pipe, k):
            pipe.execute_command("SLIDEWIN.SETTLE", f"cost:{k}", "ID", rid(k, 0), "COST", 2)
            pipe.execute_command("SLIDEWIN.SETTLE", f"cost:{k}", "ID", rid(k, 0), "COST", 5)

        out["check"] = measure("check", check, 5)
        if with_ids:
            out["check_id"] = measure("checkid", check_id, 5)
            out["repeat"] = measure("repeat", check_id, 5)
            for k in range(keys):
                srv.r.execute_command("SLIDEWIN.CHECK", f"cost:{k}", 10, 60000, "COST", 5, "ID", rid(k, 0))
            out["settle"] = measure("settle", settle, 2)
    finally:
        srv.stop()
    return out


def memory(server, log_type):
    """MEMORY USAGE of keys made with and without IDs."""
    srv = Server(server, module_args=["log-type", log_type])
    rows = []
    try:
        r = srv.r
        ids = {"no ID": None, "16-byte ID": b"0123456789abcdef",
               "36-byte ID": b"123e4567-e89b-12d3-a456-426614174000"}
        for label, rid in ids.items():
            # Five calls of COST 1 (the SMS shape): five charges.
            for i in range(5):
                extra = ["ID", rid + str(i).encode()] if rid else []
                r.execute_command("SLIDEWIN.CHECK", f"five:{label}", 5, 60000, *extra)
            five = r.memory_usage(f"five:{label}", samples=0)
            row = [label, five]
            for cost in (100, 1000):
                extra = ["ID", rid] if rid else []
                r.execute_command("SLIDEWIN.CHECK", f"big:{cost}:{label}", 100_000, 60000, "COST", cost, *extra)
                row.append(r.memory_usage(f"big:{cost}:{label}", samples=0) / cost)
            rows.append(row)
        version = srv.version
    finally:
        srv.stop()
    return version, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=SERVERS, default="redis-7.0")
    ap.add_argument("--keys", type=int, default=300)
    ap.add_argument("--before", help="an older build of the module: its CHECK without ID is measured in the same run")
    ap.add_argument("--log-type", choices=["zset", "compact"], default="zset")
    ap.add_argument("--out", help="also write the tables (markdown) to this file")
    ap.add_argument("--memory-only", action="store_true", help="only the MEMORY USAGE table (no callgrind)")
    opts = ap.parse_args()
    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    version, mem = memory(opts.server, opts.log_type)
    if opts.memory_only:
        emit_memory(emit, opts, version, mem)
        return finish(opts, lines)
    now = instructions(opts.server, bench.MODULE, opts.keys, opts.log_type, True)
    before = instructions(opts.server, opts.before, opts.keys, opts.log_type, False) if opts.before else None
    emit(f"### {opts.server} {version}, log-type {opts.log_type}: instructions per call (callgrind)")
    emit()
    emit("| call | instructions | × CHECK without ID |")
    emit("|---|---:|---:|")
    emit(f"| CHECK k 5 60000 | {now['check']:,.0f} | 1.00 |")
    if before:
        emit(f"| the same, on --before ({os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(opts.before))))}) "
             f"| {before['check']:,.0f} | {before['check'] / now['check']:.3f} |")
    emit(f"| CHECK k 5 60000 ID <16 bytes> | {now['check_id']:,.0f} | {now['check_id'] / now['check']:.2f} |")
    emit(f"| the same call repeated (charges nothing) | {now['repeat']:,.0f} | {now['repeat'] / now['check']:.2f} |")
    emit(f"| SETTLE of a 5-unit charge (to 2, then back to 5) | {now['settle']:,.0f} | {now['settle'] / now['check']:.2f} |")
    emit()
    emit_memory(emit, opts, version, mem)
    finish(opts, lines)


def emit_memory(emit, opts, version, mem):
    emit(f"### {opts.server} {version}, log-type {opts.log_type}: MEMORY USAGE")
    emit()
    emit("| charges | key of five COST 1 calls (bytes) | per entry, one COST 100 call | per entry, one COST 1000 call |")
    emit("|---|---:|---:|---:|")
    for label, five, e100, e1000 in mem:
        emit(f"| {label} | {five} | {e100:.1f} | {e1000:.1f} |")
    emit()


def finish(opts, lines):
    if opts.out:
        with open(opts.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
