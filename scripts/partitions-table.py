#!/usr/bin/env python3
"""Per-configuration tables from the partition runs (make test-partitions).

Reads $CARGO_TARGET_DIR/partitions/<server>.runs.txt (./target unless set) (one line per run, written by
tests/partitions/runs.rs) for each server given (default: the four) and prints one
Markdown table per configuration, a row per server: what docs/operating.md ("Failover: what a decision is worth")
shows.

    scripts/partitions-table.py [--dir target/partitions] [server ...]
"""
import argparse
import os
import re
import statistics
import sys

CONFIGS = {
    "a": "(a) asynchronous replication",
    "b": "(b) `min-replicas-to-write 1`, `min-replicas-max-lag 2`",
    "c": "(c) act on a `1` only after `WAIT 1 200` >= 1",
}
SERVERS = ["redis-7.0", "redis-8.2", "valkey-8.1", "valkey-9.1"]
LINE = re.compile(r"^\d+ (\w) run (\d+): RunResult \{ (.*) \}$")
FIELD = re.compile(r"(\w+): (\d+)")


def runs(path):
    out = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line.strip())
            if not m:
                continue
            fields = {k: int(v) for k, v in FIELD.findall(m.group(3))}
            fields["config"] = m.group(1)
            fields["run"] = int(m.group(2))
            out.append(fields)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(os.environ.get("CARGO_TARGET_DIR") or "target", "partitions"))
    ap.add_argument("servers", nargs="*", default=SERVERS)
    args = ap.parse_args()
    data = {}
    for s in args.servers:
        p = os.path.join(args.dir, f"{s}.runs.txt")
        if os.path.exists(p):
            data[s] = runs(p)
        else:
            print(f"partitions-table: no {p}", file=sys.stderr)
    for c, title in CONFIGS.items():
        print(f"#### {title}\n")
        print(
            "| server | runs | calls | `1` replies | granted (acted on) | denied | NOREPLICAS "
            "| WAIT unconfirmed | no answer | lost granted: total | max per run | runs with a loss "
            "| keys over their limit (total, max per run) | max over-admission, certain / possible "
            "| failover ms: median (max) |"
        )
        print("|---" * 15 + "|")
        for s, rs in data.items():
            rs = [r for r in rs if r["config"] == c]
            if not rs:
                continue
            tot = lambda k: sum(r[k] for r in rs)
            mx = lambda k: max(r[k] for r in rs)
            fo = [r["failover_ms"] for r in rs]
            print(
                f"| {s} | {len(rs)} | {tot('calls'):,} | {tot('ones'):,} | {tot('granted'):,} "
                f"| {tot('denied'):,} | {tot('noreplicas'):,} "
                f"| {tot('unconfirmed'):,} | {tot('errors'):,} | **{tot('lost'):,}** | {mx('lost')} "
                f"| {sum(1 for r in rs if r['lost'] > 0)} "
                f"| {tot('keys_over'):,}, {mx('keys_over')} "
                f"| **{mx('over_certain')}** / {mx('over_possible')} "
                f"| {int(statistics.median(fo))} ({max(fo)}) |"
            )
        print()


if __name__ == "__main__":
    main()
