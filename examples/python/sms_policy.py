#!/usr/bin/env python3
"""The SMS-code policy with slidewin and redis-py.

Per IP 5 codes per minute; per phone 1 per minute and 10 per day. A request
passes only if every rule passes, and then all rules are charged (one
atomic SLIDEWIN.MCHECK); a refused request charges nothing. A denial maps
to HTTP 429 with a Retry-After header. If the SMS provider then fails, the
attempt is given back with SLIDEWIN.UNDO.

On Redis Cluster all keys of one MCHECK must share a slot (a hash tag);
see sms_policy_cluster.py for how to choose the tag.

    python3 examples/python/sms_policy.py [--host 127.0.0.1] [--port 6379]
"""

import argparse
import math

import redis

MINUTE, DAY = 60_000, 86_400_000


def sms_rules(ip: str, phone: str):
    ip_key, phone_key = f"sms:limit:ip:{ip}", f"sms:limit:phone:{phone}"
    return [(ip_key, 5, MINUTE), (phone_key, 1, MINUTE), (phone_key, 10, DAY)]


def try_send(r: redis.Redis, ip: str, phone: str):
    """Returns (HTTP status, headers, members to give back on failure)."""
    rules = sms_rules(ip, phone)
    args = [len(rules)]
    for key, limit, window in rules:
        args += [key, limit, window]
    reply = r.execute_command("SLIDEWIN.MCHECK", *args, "WITHMEMBERS")
    allowed, retry_after_ms = reply[0], reply[1]
    per_rule, members = reply[2:-1], reply[-1]
    if allowed:
        remaining = min(rule[2] for rule in per_rule)
        return 200, {"X-RateLimit-Remaining": str(remaining)}, members
    # -1: this request can never pass (its cost exceeds a limit).
    retry = "never" if retry_after_ms < 0 else str(math.ceil(retry_after_ms / 1000))
    return 429, {"Retry-After": retry}, []


def give_back(r: redis.Redis, ip: str, phone: str, members):
    """The SMS provider failed: return the attempt to every rule's key."""
    keys = {key for key, _, _ in sms_rules(ip, phone)}
    return sum(r.execute_command("SLIDEWIN.UNDO", key, *members) for key in keys)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=6379)
    opts = ap.parse_args()
    r = redis.Redis(host=opts.host, port=opts.port, decode_responses=True)

    ip, phone = "203.0.113.7", "+8613800000000"
    status, headers, members = try_send(r, ip, phone)
    print("first code:", status, headers)
    status, headers, _ = try_send(r, ip, phone)
    print("second code, same phone:", status, headers)
    # The provider failed for the first code: give it back, then retry.
    print("given back:", give_back(r, ip, "+8613800000000", members))
    status, headers, _ = try_send(r, ip, phone)
    print("after give-back:", status, headers)
    # Other phones from the same IP: the IP rule allows 5 per minute.
    statuses = [try_send(r, ip, f"+86139000000{i:02d}")[0] for i in range(5)]
    print("five more phones from the IP:", statuses)
    status, headers, _ = try_send(r, "198.51.100.1", "+8613900000000")
    print("that phone from another IP:", status, headers)


if __name__ == "__main__":
    main()
