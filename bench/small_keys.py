#!/usr/bin/env python3
"""What a `limit 5` key costs the server, by `used_memory` growth.

On each server: 100,000 keys named like `sms:limit:192.168.1.100`, five
`SLIDEWIN.CHECK key 5 600000` each (pipelined; a 10-minute window, so that
no key expires while the others are made), as compact logs and as sorted
sets (two servers, one per log type), and the fixed-window counter the
module replaces at its simplest (five `INCR` and an `EXPIRE key 600` a key, on the
sorted-set server after a `FLUSHALL SYNC`). Reports `used_memory` grown per
key and `MEMORY USAGE key SAMPLES 0` of one such key. docs/compact-log.md
prints these figures; the suite asserts the compact key's MEMORY USAGE and
that its used_memory stays below the sorted set's (tests/compact.rs).

Usage: bench/small_keys.py [--servers redis-7.0,...] [--keys 100000] [--out FILE]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import SERVERS, Server  # noqa: E402

KEY = "sms:limit:192.168.1.100"


def grow(srv, keys, counter):
    """used_memory grown per key after filling `keys` keys."""
    r = srv.r
    r.execute_command("FLUSHALL", "SYNC")
    before = int(r.info("memory")["used_memory"])
    p = r.pipeline(transaction=False)
    for i in range(keys):
        k = f"sms:limit:192.168.{i // 256}.{i % 256}"
        for _ in range(5):
            if counter:
                p.incr(k)
            else:
                p.execute_command("SLIDEWIN.CHECK", k, 5, 600000)
        if counter:
            p.expire(k, 600)
        if i % 2000 == 1999:
            p.execute()
            p = r.pipeline(transaction=False)
    p.execute()
    assert r.dbsize() == keys
    return (int(r.info("memory")["used_memory"]) - before) / keys


def one_key(srv):
    p = srv.r.pipeline(transaction=False)
    for _ in range(5):
        p.execute_command("SLIDEWIN.CHECK", KEY, 5, 60000)
    p.execute()
    return srv.r.memory_usage(KEY, samples=0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--out")
    args = ap.parse_args()
    lines = [
        f"### a limit-5 key after five CHECKs ({args.keys:,} keys)",
        "",
        "| server | MEMORY USAGE compact | MEMORY USAGE sorted set | used_memory a key, compact | sorted set | fixed-window counter | compact × counter | compact × sorted set |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in args.servers.split(","):
        row = {}
        for log_type in ("compact", "zset"):
            srv = Server(kind, module_args=["log-type", log_type])
            try:
                row[log_type + "_mu"] = one_key(srv)
                row[log_type] = grow(srv, args.keys, counter=False)
                if log_type == "zset":
                    row["counter"] = grow(srv, args.keys, counter=True)
                version = srv.version
            finally:
                srv.stop()
        lines.append(
            f"| {kind} {version} | {row['compact_mu']} B | {row['zset_mu']} B | "
            f"{row['compact']:.0f} B | {row['zset']:.0f} B | {row['counter']:.0f} B | "
            f"{row['compact'] / row['counter']:.2f} | {row['compact'] / row['zset']:.2f} |"
        )
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
