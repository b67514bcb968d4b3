#!/usr/bin/env python3
"""slidewin on Redis Cluster with redis-py's RedisCluster.

Keys that one SLIDEWIN.MCHECK judges together must live in one slot, so
they share a hash tag: here the user, {user:42}. The cluster client routes
each call to the slot's owner (and follows MOVED/ASK by itself).

    python3 examples/python/sms_cluster.py [--host 127.0.0.1] [--port 30001]
    (make cluster starts a local cluster on ports 30001-30006)
"""

import argparse
import math

from redis.cluster import RedisCluster


def check(rc: RedisCluster, user: str, ip: str):
    tag = "{user:" + user + "}"
    reply = rc.execute_command(
        "SLIDEWIN.MCHECK", 2,
        f"sms:{tag}:ip:{ip}", 5, 60000,      # this user from this IP: 5 per minute
        f"sms:{tag}:codes", 10, 86400000,    # this user: 10 codes per day
        "DETAIL",
    )
    if reply[0] == 1:
        return 200, {}
    retry = "never" if reply[1] < 0 else str(math.ceil(reply[1] / 1000))
    return 429, {"Retry-After": retry}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=30001)
    opts = ap.parse_args()
    rc = RedisCluster(host=opts.host, port=opts.port, decode_responses=True)
    results = [check(rc, "42", "203.0.113.7")[0] for _ in range(6)]
    print("user 42, six codes in a minute:", results)
    print("user 43 meanwhile:", check(rc, "43", "203.0.113.7")[0])
    slot = rc.keyslot("sms:{user:42}:ip:203.0.113.7")
    print("both keys of user 42 in one slot:", slot == rc.keyslot("sms:{user:42}:codes"))


if __name__ == "__main__":
    main()
