#!/usr/bin/env python3
"""slidewin on Redis Cluster with the slidewin client over redis-py's RedisCluster.

Keys that one SLIDEWIN.MCHECK judges together must live in one slot, so
they share a hash tag: here the user, {user:42}. The cluster client routes
each call to the slot's owner (and follows MOVED/ASK by itself). SLIDEWIN.TOP
is node-local: ask every master and merge the answers (merge_top).

    pip install ./clients/python
    python3 examples/python/sms_cluster.py [--host 127.0.0.1] [--port 30001]
    (make cluster starts a local cluster on ports 30001-30006)
"""

import argparse
import os
import sys

from redis.cluster import RedisCluster

try:
    from slidewin import Limiter, merge_top
except ImportError:  # run from a checkout without `pip install ./clients/python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
    from slidewin import Limiter, merge_top


def check(limiter: Limiter, user: str, ip: str):
    tag = "{user:" + user + "}"
    decision = limiter.check_all([
        (f"sms:{tag}:ip:{ip}", 5, 60_000),      # this user from this IP: 5 per minute
        (f"sms:{tag}:codes", 10, 86_400_000),   # this user: 10 codes per day
    ])
    return (200 if decision.allowed else 429), decision.headers()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=30001)
    opts = ap.parse_args()
    # A cluster client keeps its own timeouts: give it socket_timeout.
    rc = RedisCluster(host=opts.host, port=opts.port, socket_timeout=0.5)
    limiter = Limiter(rc, outage="local", cache_size=0)
    results = [check(limiter, "42", "203.0.113.7")[0] for _ in range(6)]
    print("user 42, six codes in a minute:", results)
    print("user 43 meanwhile:", check(limiter, "43", "203.0.113.7")[0])
    slot = rc.keyslot("sms:{user:42}:ip:203.0.113.7")
    print("both keys of user 42 in one slot:", slot == rc.keyslot("sms:{user:42}:codes"))
    # Who is refused, over the whole cluster (admin rights needed).
    replies = [rc.get_redis_connection(node).execute_command("SLIDEWIN.TOP", 3) for node in rc.get_primaries()]
    print("most denied:", merge_top(replies)[:1])


if __name__ == "__main__":
    main()
