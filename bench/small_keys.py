#!/usr/bin/env python3
"""What a `limit 5` key costs the server, by `used_memory` growth.

On each server: 100,000 keys named like `sms:limit:192.168.1.100`, five
`SLIDEWIN.CHECK key 5 600000` each (a 10-minute window, so that no key
expires while the others are made), made in one pipelined burst a key and
again with each key's five calls --apart-ms apart (five rounds over all
the keys: the seeds' five SMS requests, seconds apart), as compact logs and as sorted
sets (two servers, one per log type), and the fixed-window counter the
module replaces at its simplest (five `INCR` and an `EXPIRE key 600` a key, on the
sorted-set server after a `FLUSHALL SYNC`). Reports `used_memory` grown per
key and `MEMORY USAGE key SAMPLES 0` of one such key. docs/compact-log.md
prints these figures; the suite asserts the compact key's MEMORY USAGE and
that its used_memory stays below the sorted set's (tests/compact/memory.rs).

Usage: bench/small_keys.py [--servers redis-7.0,...] [--keys 100000] [--apart-ms 1000,20000] [--out FILE]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import SERVERS, Server  # noqa: E402

KEY = "sms:limit:192.168.1.100"


def grow(srv, keys, counter, apart_ms=0):
    """used_memory grown per key after filling `keys` keys: five calls a
    key in one burst (`apart_ms` 0), or in five rounds over all the keys,
    a round starting at least `apart_ms` after the one before (each key's
    entries that far apart, as the seeds' five SMS requests are)."""
    r = srv.r
    r.execute_command("FLUSHALL", "SYNC")
    before = int(r.info("memory")["used_memory"])
    names = [f"sms:limit:192.168.{i // 256 % 256}.{i % 256}" + (f":{i // 65536}" if i >= 65536 else "")
             for i in range(keys)]
    rounds = [5] if apart_ms == 0 else [1] * 5
    for n, calls in enumerate(rounds):
        started = time.monotonic()
        p = r.pipeline(transaction=False)
        for i, k in enumerate(names):
            for _ in range(calls):
                if counter:
                    p.incr(k)
                else:
                    p.execute_command("SLIDEWIN.CHECK", k, 5, 600000)
            if counter and n == 0:
                p.expire(k, 600)
            if i % 2000 == 1999:
                p.execute()
                p = r.pipeline(transaction=False)
        p.execute()
        if n + 1 < len(rounds):
            time.sleep(max(0.0, apart_ms / 1000 - (time.monotonic() - started)))
    assert r.dbsize() == keys
    grown = (int(r.info("memory")["used_memory"]) - before) / keys
    return grown, r.memory_usage(names[0], samples=0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--out")
    ap.add_argument("--apart-ms", default="1000,20000",
                    help="comma-separated: the five calls of a key this far apart (rounds over all the keys), "
                         "besides the burst; empty: burst only")
    args = ap.parse_args()
    lines = [
        f"### a limit-5 key after five CHECKs ({args.keys:,} keys)",
        "",
        "| server | five calls | MEMORY USAGE compact | MEMORY USAGE sorted set | used_memory a key, compact | sorted set | fixed-window counter | compact × counter | compact × sorted set |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    aparts = [int(a) for a in args.apart_ms.split(",") if a.strip()]
    modes = [(0, "in one burst")] + [(a, f"{a:,} ms apart") for a in aparts if a > 0]
    for kind in args.servers.split(","):
        rows = {apart: {} for apart, _ in modes}
        for log_type in ("compact", "zset"):
            srv = Server(kind, module_args=["log-type", log_type])
            try:
                for apart, _ in modes:
                    row = rows[apart]
                    row[log_type], row[log_type + "_mu"] = grow(srv, args.keys, False, apart)
                    if log_type == "zset":
                        row["counter"], _ = grow(srv, args.keys, True, apart)
                version = srv.version
            finally:
                srv.stop()
        for apart, label in modes:
            row = rows[apart]
            lines.append(
                f"| {kind} {version} | {label} | {row['compact_mu']} B | {row['zset_mu']} B | "
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
