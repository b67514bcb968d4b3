#!/usr/bin/env python3
"""What `maxmemory` eviction does to a rate limiter, measured.

A limiter key that is evicted forgets its entries: the next call finds an
empty window and is admitted, though the caller already used its limit.
Every limiter key carries a TTL (its expiry is the newest entry plus the
window), so the `volatile-*` policies take limiter keys before anything
without a TTL.

For each server, log type and policy, on a fresh server with the module:
1. 2,000 limiter keys are filled to their limit (5 calls per key, window
   10 minutes: nothing expires during the run), so that every later call on
   them must be denied;
2. memory pressure with traffic: rounds of cache writes (16 KB values, half
   with a TTL of an hour, half without, as a cache shares an instance) and
   of 200 CHECKs on random limiter keys, until the cache written is twice
   `maxmemory` (set to the memory in use after step 1 plus 8 MB).
Measured: the limiter keys evicted (of 2,000), the calls admitted in step 2
(each one an over-admission: every key was full), the most admitted on one
key, the cache values evicted, and the writes the server refused with OOM
(SET, CHECK: under `noeviction`, and under `volatile-*` once nothing with a
TTL is left).

Usage: bench/eviction.py [--server NAME ...] [--log-type zset|compact ...]
       [--keys 2000] [--out FILE] [--smoke]
"""

import argparse
import os
import random
import sys

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import SERVERS, Server  # noqa: E402

POLICIES = ["noeviction", "allkeys-lru", "allkeys-lfu", "allkeys-random",
            "volatile-lru", "volatile-lfu", "volatile-ttl", "volatile-random"]
LIMIT = 5
WINDOW_MS = 600_000
VALUE = 16 << 10
HEADROOM = 8 << 20


def measure(server, log_type, policy, keys, seed):
    srv = Server(server, module_args=["log-type", log_type])
    try:
        r = srv.r
        rng = random.Random(seed)
        names = [f"rl:{i}" for i in range(keys)]
        pipe = r.pipeline(transaction=False)
        for i, k in enumerate(names):
            for _ in range(LIMIT):
                pipe.execute_command("SLIDEWIN.CHECK", k, LIMIT, WINDOW_MS)
            if i % 200 == 199:
                pipe.execute()
        pipe.execute()
        maxmemory = int(r.info("memory")["used_memory"]) + HEADROOM
        r.config_set("maxmemory", maxmemory)
        r.config_set("maxmemory-policy", policy)
        admitted, oom_set, oom_check = {}, 0, 0
        written, cache = 0, 0
        while written < 2 * maxmemory:
            pipe = r.pipeline(transaction=False)
            for _ in range(20):
                if cache % 2:
                    pipe.set(f"cache:{cache}", b"x" * VALUE, ex=3600)
                else:
                    pipe.set(f"cache:{cache}", b"x" * VALUE)
                cache += 1
                written += VALUE
            for reply in pipe.execute(raise_on_error=False):
                if isinstance(reply, redis.exceptions.ResponseError):
                    oom_set += 1
            picked = [rng.choice(names) for _ in range(200)]
            pipe = r.pipeline(transaction=False)
            for k in picked:
                pipe.execute_command("SLIDEWIN.CHECK", k, LIMIT, WINDOW_MS)
            for k, reply in zip(picked, pipe.execute(raise_on_error=False)):
                if isinstance(reply, redis.exceptions.ResponseError):
                    oom_check += 1
                elif reply == 1:
                    admitted[k] = admitted.get(k, 0) + 1
        # A key is gone, or came back as a fresh window (admitted again).
        pipe = r.pipeline(transaction=False)
        for k in names:
            pipe.exists(k)
        missing = {k for k, e in zip(names, pipe.execute()) if not e}
        lost = len(missing | set(admitted))
        pipe = r.pipeline(transaction=False)
        for i in range(cache):
            pipe.exists(f"cache:{i}")
        cache_left = sum(pipe.execute())
        stats = r.info("stats")
        return {
            "lost": lost,
            "over": sum(admitted.values()),
            "max_over": max(admitted.values(), default=0),
            "cache_evicted": cache - cache_left - oom_set,
            "cache": cache,
            "oom_set": oom_set,
            "oom_check": oom_check,
            "evicted_keys": int(stats.get("evicted_keys", 0)),
            "version": srv.version,
        }
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", nargs="+", choices=SERVERS, default=SERVERS)
    ap.add_argument("--log-type", nargs="+", choices=["zset", "compact"], default=["zset", "compact"])
    ap.add_argument("--keys", type=int, default=2000)
    ap.add_argument("--out", help="also write the tables (markdown) to this file")
    ap.add_argument("--smoke", action="store_true", help="one server, one log type, three policies, 200 keys: checks the script works")
    opts = ap.parse_args()
    servers, log_types, policies, keys = opts.server, opts.log_type, POLICIES, opts.keys
    if opts.smoke:
        servers, log_types, policies, keys = servers[:1], log_types[:1], ["noeviction", "allkeys-lru", "volatile-ttl"], 200
    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    for server in servers:
        for log_type in log_types:
            rows = [(p, measure(server, log_type, p, keys, seed=7)) for p in policies]
            emit(f"### {server} {rows[0][1]['version']}, log-type {log_type}: {keys} full limiter keys (limit {LIMIT}, "
                 f"window {WINDOW_MS // 60000} min), maxmemory = used + {HEADROOM >> 20} MB, "
                 f"{rows[0][1]['cache']} cache values of {VALUE >> 10} KB (half with a TTL)")
            emit()
            emit("| policy | limiter keys lost | over-admitted calls | most on one key | cache values evicted | OOM: SET | OOM: CHECK | evicted_keys |")
            emit("|---|---:|---:|---:|---:|---:|---:|---:|")
            for p, m in rows:
                emit(f"| {p} | {m['lost']} ({100 * m['lost'] / keys:.0f}%) | {m['over']} | {m['max_over']} | "
                     f"{m['cache_evicted']} | {m['oom_set']} | {m['oom_check']} | {m['evicted_keys']} |")
            emit()
            if opts.smoke:
                # The script's own sanity: noeviction loses nothing, and an
                # evicting policy under this pressure does evict.
                by = dict(rows)
                if by["noeviction"]["lost"] or by["noeviction"]["evicted_keys"]:
                    sys.exit("eviction smoke: noeviction lost limiter keys")
                if not by["volatile-ttl"]["lost"]:
                    sys.exit("eviction smoke: volatile-ttl evicted no limiter key")
    if opts.out:
        with open(opts.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
