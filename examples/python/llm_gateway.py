#!/usr/bin/env python3
"""An LLM gateway's limits with the slidewin Python client (clients/python).

Per API key: 4 requests per minute, 10,000 tokens per minute and 100,000
tokens per day. A request's tokens are known only when the model answers,
so the gateway reserves an estimate (the prompt's tokens plus `max_tokens`)
and settles the real count at the end:

1. `SLIDEWIN.CHECK` the request rule (cost 1) under the request's id;
2. one `SLIDEWIN.MCHECK ... COST estimate ID request-id` on the two token
   rules (all or nothing), as a reservation;
3. the model answers: `SLIDEWIN.SETTLE key ID request-id COST used` on each
   token key (fewer gives tokens back, more charges the rest);
   the model fails: `SLIDEWIN.UNDO key ID request-id` gives them all back.

A request refused for its tokens gives its request back too. Every call
carries the request id, so a call whose reply was lost is sent again and
still charged once. On Redis Cluster the keys share a slot by their hash
tag (`{api key}`). See docs/llm-gateway.md.

    pip install ./clients/python
    python3 examples/python/llm_gateway.py [--host 127.0.0.1] [--port 6379]
"""

import argparse
import os
import sys
import uuid

import redis

try:
    from slidewin import Limiter
except ImportError:  # run from a checkout without `pip install ./clients/python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
    from slidewin import Limiter

MINUTE, DAY = 60_000, 86_400_000
REQUESTS_PER_MINUTE, TOKENS_PER_MINUTE, TOKENS_PER_DAY = 4, 10_000, 100_000


class ModelError(Exception):
    """The model (the upstream API) failed."""


def rules(api_key: str):
    tag = "{" + api_key + "}"  # one slot per API key on a cluster
    requests = (f"llm:{tag}:rpm", REQUESTS_PER_MINUTE, MINUTE)
    tokens = [(f"llm:{tag}:tpm", TOKENS_PER_MINUTE, MINUTE), (f"llm:{tag}:tpd", TOKENS_PER_DAY, DAY)]
    return requests, tokens


def handle(limiter: Limiter, api_key: str, prompt_tokens: int, max_tokens: int, model) -> tuple:
    """One request: (HTTP status, what it says). `model()` returns the
    tokens it used, or raises ModelError."""
    request_id = uuid.uuid4().bytes  # or the request's own id, 1 to 128 bytes
    requests, tokens = rules(api_key)
    counted = limiter.check(*requests, request_id=request_id)
    if not counted.allowed:
        return 429, f"Retry-After {counted.headers()['Retry-After']} (requests)"
    estimate = prompt_tokens + max_tokens
    try:
        with limiter.reserve_all(tokens, cost=estimate, request_id=request_id) as r:
            if not r.allowed:
                limiter.undo(counted)  # refused for its tokens: not a request either
                return 429, f"Retry-After {r.headers()['Retry-After']} ({estimate} tokens do not fit)"
            r.cost = model()  # settled to the tokens used when the block ends
            return 200, f"{r.cost} tokens (reserved {estimate})"
    except ModelError as e:  # the reservation was given back on the way out
        return 502, f"the model failed ({e}); its {estimate} tokens given back"


def left(limiter: Limiter, api_key: str) -> str:
    (rpm_key, rpm, window), tokens = rules(api_key)
    tpm_key, tpm, _ = tokens[0]
    return (f"left this minute: requests {limiter.peek(rpm_key, rpm, window).remaining}, "
            f"tokens {limiter.peek(tpm_key, tpm, MINUTE).remaining}")


def failing_model():
    raise ModelError("upstream 500")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=6379)
    opts = ap.parse_args()
    # While Redis is away, refuse: tokens cost money.
    limiter = Limiter(redis.Redis(host=opts.host, port=opts.port), outage="deny", timeout_ms=100)

    key = "sk-demo-7"
    for n, (prompt, max_tokens, model) in enumerate([
        (200, 1_000, lambda: 450),      # answered with fewer tokens than reserved
        (300, 900, failing_model),      # the model fails: everything given back
        (800, 9_000, lambda: 1),        # 9,800 tokens do not fit in what is left
        (1_000, 2_000, lambda: 3_200),  # more than estimated: the rest charged
        (100, 100, lambda: 150),
        (100, 100, lambda: 150),        # a fifth request in the minute: refused
    ], start=1):
        status, what = handle(limiter, key, prompt, max_tokens, model)
        print(f"request {n}: {status} {what}; {left(limiter, key)}")


if __name__ == "__main__":
    main()
