#!/usr/bin/env python3
"""Hostile layouts of compact logs against the same sizes laid out as CHECKs
lay them: server time and peak memory.

Each workload runs on a fresh server (the module in `log-type compact`), so
the server's peak resident memory (VmHWM) measures that workload alone:
- a 16 MB `SLIDEWIN.APPLY ... LOG` of 2^24 one-entry runs (the largest log
  the loader accepts): time, and the peak memory it took against the
  payload plus the log it built (target: within 3x);
- members interleaved across the log (low ids counting up, high ids
  counting down, the layout that once made every lookup decode every
  chunk), at the bound on runs out of member order, against the same
  number of runs in order: a CHECK of COST 5000 and an UNDO of ten absent
  members (target: within 3x);
- the same layouts past the bound: refused, and how long the refusal took.

Usage: bench/hostile_logs.py [--server redis-7.0|...] [--scale 1.0]
       [--out FILE] (SLIDEWIN_MODULE=path measures another build)
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import SERVERS, Server  # noqa: E402
from instructions import varint, zigzag  # noqa: E402

MAX_RUNS = 1 << 24
MAX_STRAYS = 1024


def header(runs, score):
    return bytes([1, 0]) + varint(runs) + varint(zigzag(score))


def record(gap, delta, count):
    return b"\xc0" + varint(gap) + varint(zigzag(delta)) + varint(count - 1)


def ordered_payload(runs, start):
    """`runs` one-entry runs, members 1, 2, 3..., one ms apart from
    `start`: one byte a run, the layout CHECKs make."""
    return header(runs, start) + b"\x00" + b"\x01" * (runs - 1)


def encode(runs):
    """The encoding of `runs`, (score, first, count) in score order."""
    out = bytearray(header(len(runs), runs[0][0]))
    score, expected = runs[0][0], 1
    for s, f, c in runs:
        gap = s - score
        if f == expected and c == 1 and gap < 128:
            out.append(gap)
        else:
            out += record(gap, f - expected, c)
        score, expected = s, f + c
    return bytes(out)


def interleaved_payload(pairs, start, chain=0):
    """`chain` runs in order, then `pairs` alternating low (counting up)
    and high (counting down) runs, one ms apart: every high run but the
    last has a later run starting below it (out of member order)."""
    runs = [(start + i, i + 1, 1) for i in range(chain)]
    high = 10**15
    for i in range(pairs):
        t = start + chain + 2 * i
        runs.append((t, chain + i + 1, 1))
        runs.append((t + 1, high - i, 1))
    return encode(runs)


def vm(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def usec(srv, command):
    stats = srv.r.info("commandstats")
    entry = stats.get("cmdstat_" + command.lower())
    return entry["usec"] if entry else 0


def timed(srv, command, *args):
    """Runs one command; its server time (INFO commandstats) in ms, and the
    reply or the error text."""
    srv.r.config_resetstat()
    try:
        reply = srv.r.execute_command(command, *args)
    except Exception as e:  # noqa: BLE001 - the refusal is a result here
        reply = f"error: {e}"
    return usec(srv, command.split()[0]) / 1000.0, reply


def fresh(kind):
    srv = Server(kind, module_args=["log-type", "compact"], timeout=30)
    srv.r.execute_command("CONFIG", "SET", "proto-max-bulk-len", str(1 << 30))
    return srv


def log_payload(kind, runs, emit):
    srv = fresh(kind)
    try:
        start = int(srv.r.time()[0]) * 1000 - runs - 10_000
        payload = ordered_payload(runs, start)
        base = vm(srv.proc.pid, "VmRSS")
        ms, reply = timed(srv, "SLIDEWIN.APPLY", "k", "LOG", payload)
        peak = vm(srv.proc.pid, "VmHWM") - base
        usage = srv.r.execute_command("MEMORY", "USAGE", "k", "SAMPLES", "0") or 0
        ratio = peak / (len(payload) + usage)
        emit(f"| LOG of {runs:,} runs ({len(payload) / 1e6:.1f} MB) | {ms:,.0f} ms | "
             f"{peak / 1e6:.1f} MB peak | {usage / 1e6:.1f} MB log | "
             f"{ratio:.2f}x payload + log | {reply} |")
        return ratio
    finally:
        srv.stop()


def lookups(kind, pairs, chain, emit):
    """CHECK COST 5000 and UNDO of ten absent members on an interleaved log
    and on an ordered one of as many runs."""
    results = {}
    for layout in ("ordered", "interleaved"):
        srv = fresh(kind)
        try:
            runs = chain + 2 * pairs
            start = int(srv.r.time()[0]) * 1000 - runs - 10_000
            payload = (interleaved_payload(pairs, start, chain) if layout == "interleaved"
                       else ordered_payload(runs, start))
            load_ms, reply = timed(srv, "SLIDEWIN.APPLY", "k", "LOG", payload)
            if reply != "OK" and reply is not True and not str(reply).startswith("OK"):
                emit(f"| {layout}, {runs:,} runs | LOG refused in {load_ms:,.1f} ms: {reply} | | |")
                results[layout] = None
                continue
            window = runs + 60_000
            check_ms, _ = timed(srv, "SLIDEWIN.CHECK", "k", 10_000_000, window, "COST", 5000)
            absent = [str(10**14 + 7 * i) for i in range(10)]
            undo_ms, _ = timed(srv, "SLIDEWIN.UNDO", "k", *absent)
            results[layout] = (check_ms, undo_ms)
            emit(f"| {layout}, {runs:,} runs | LOG {load_ms:,.1f} ms | CHECK COST 5000 "
                 f"{check_ms:,.2f} ms | UNDO of 10 absent {undo_ms:,.3f} ms |")
        finally:
            srv.stop()
    if results.get("ordered") and results.get("interleaved"):
        (c0, u0), (c1, u1) = results["ordered"], results["interleaved"]
        emit(f"| ratio | | CHECK {c1 / max(c0, 1e-3):.2f}x | UNDO {u1 / max(u0, 1e-3):.2f}x |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", default="redis-7.0", choices=SERVERS)
    p.add_argument("--scale", type=float, default=1.0,
                   help="fraction of the 2^24-run LOG (the bound itself at 1.0)")
    p.add_argument("--out", help="append the table to this file")
    a = p.parse_args()
    lines = []

    def emit(line):
        print(line, flush=True)
        lines.append(line)

    from bench import MODULE as module
    emit(f"\n## {a.server}, compact logs, {time.strftime('%Y-%m-%d')} ({module})\n")
    emit("| workload | time | peak memory | log | peak / (payload + log) | reply |")
    emit("|---|---:|---:|---:|---:|---|")
    log_payload(a.server, max(int(MAX_RUNS * a.scale), 2), emit)
    emit("")
    emit("| layout | load | CHECK | UNDO |")
    emit("|---|---:|---:|---:|")
    chain = int((1 << 20) * a.scale)
    lookups(a.server, MAX_STRAYS + 1, chain, emit)
    lookups(a.server, 25_000, 0, emit)
    if a.out:
        with open(a.out, "a") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
