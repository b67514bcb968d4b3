#!/usr/bin/env python3
"""The SMS-code policy with the slidewin Python client (clients/python).

Per IP 5 codes per minute; per phone 1 per minute and 10 per day. A request
passes only if every rule passes, and then all rules are charged (one
atomic SLIDEWIN.MCHECK); a refused request charges nothing. A denial maps
to HTTP 429 with the RateLimit headers and Retry-After. If the SMS provider
then fails, the attempt is given back (SLIDEWIN.UNDO). A caller refused
once is refused again from the local cache, without a round trip, until
its wait is over; if Redis is down, the outage policy answers.

On Redis Cluster all keys of one MCHECK must share a slot (a hash tag);
see sms_cluster.py.

    pip install ./clients/python
    python3 examples/python/sms_policy.py [--host 127.0.0.1] [--port 6379]
"""

import argparse
import os
import sys

import redis

try:
    from slidewin import Limiter
except ImportError:  # run from a checkout without `pip install ./clients/python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
    from slidewin import Limiter

MINUTE, DAY = 60_000, 86_400_000


def sms_rules(ip: str, phone: str):
    ip_key, phone_key = f"sms:limit:ip:{ip}", f"sms:limit:phone:{phone}"
    return [(ip_key, 5, MINUTE), (phone_key, 1, MINUTE), (phone_key, 10, DAY)]


def try_send(limiter: Limiter, ip: str, phone: str):
    """Returns (HTTP status, headers, the decision: undo it if sending fails)."""
    decision = limiter.check_all(sms_rules(ip, phone))
    return (200 if decision.allowed else 429), decision.headers(), decision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=6379)
    opts = ap.parse_args()
    # While Redis is unreachable or slower than 100 ms, refuse (SMS costs
    # money: an outage must not turn into free codes).
    limiter = Limiter(redis.Redis(host=opts.host, port=opts.port), outage="deny", timeout_ms=100)

    ip, phone = "203.0.113.7", "+8613800000000"
    status, headers, first = try_send(limiter, ip, phone)
    print("first code:", status, headers)
    status, headers, second = try_send(limiter, ip, phone)
    print("second code, same phone:", status, headers, second.source)
    status, _, third = try_send(limiter, ip, phone)
    print("third, at once:", status, third.source)
    # The provider failed for the first code: give it back, then retry.
    print("given back:", limiter.undo(first))
    status, headers, _ = try_send(limiter, ip, phone)
    print("after give-back:", status, headers)
    # Other phones from the same IP: the IP rule allows 5 per minute.
    statuses = [try_send(limiter, ip, f"+86139000000{i:02d}")[0] for i in range(5)]
    print("five more phones from the IP:", statuses)
    status, headers, _ = try_send(limiter, "198.51.100.1", "+8613900000000")
    print("that phone from another IP:", status, headers)


if __name__ == "__main__":
    main()
