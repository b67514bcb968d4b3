"""`Limiter` and `AsyncLimiter` against real servers (conftest.py): the
decisions, the local fast path, 16 threads on one key, the outage policies
with the server killed and started again, and the FUNCTION fallback."""

import asyncio
import re
import threading
import time

import redis
import redis.asyncio
from slidewin import ALLOW, DENY, FALLBACK, FUNCTION, LOCAL, LOCAL_CACHE, REDIS, AsyncLimiter, Limiter, Rule, merge_top
from conftest import count_sends, entries


def test_check_allows_then_denies_with_details(store_server):
    server = store_server
    lim = Limiter(server.client())
    first = lim.check("sms:limit:203.0.113.7", 2, 60_000)
    assert (first.allowed, first.limit, first.remaining, first.source) == (True, 2, 1, REDIS)
    # A token `<id>@<ms>`: the member id and its score, so it can never
    # name a later call's entry (tokens are opaque to the client).
    assert re.fullmatch(r"1@\d{13}", first.members[0]) and len(first.members) == 1
    assert first.reset_after_ms == 60_000
    assert server.client().type("sms:limit:203.0.113.7") == server.key_type
    assert lim.check("sms:limit:203.0.113.7", 2, 60_000).allowed
    denied = lim.check("sms:limit:203.0.113.7", 2, 60_000)
    assert (denied.allowed, denied.remaining, denied.source) == (False, 0, REDIS)
    assert 0 < denied.retry_after_ms <= 60_000
    assert denied.headers()["Retry-After"] == str(-(-denied.retry_after_ms // 1000))
    never = lim.check("other", 2, 60_000, cost=3)
    assert not never.allowed and never.retry_after_ms == -1


def test_check_all_peek_and_undo(store_server):
    server = store_server
    lim = Limiter(server.client())
    rules = [("{p}ip", 5, 60_000), ("{p}phone", 1, 60_000), Rule("{p}phone", 10, 86_400_000)]
    d = lim.check_all(rules)
    assert d.allowed and d.keys == ["{p}ip", "{p}phone"] and len(d.per_rule) == 3
    assert (d.limit, d.remaining) == (1, 0), "the tightest rule"
    peeked = lim.peek("{p}phone", 1, 60_000)
    assert not peeked.allowed and peeked.source == REDIS
    assert lim.undo(d) == 2, "one entry per key"
    assert lim.peek("{p}phone", 1, 60_000).allowed
    again = lim.check_all(rules)
    assert again.allowed
    refused = lim.check_all(rules)
    assert not refused.allowed and [p.allowed for p in refused.per_rule] == [True, False, True]
    assert lim.undo(refused) == 0


def test_a_blocked_caller_is_refused_without_round_trips(store_server):
    server = store_server
    lim = Limiter(server.client())
    key = "sms:limit:198.51.100.1"
    assert lim.check(key, 1, 60_000).allowed
    assert lim.check(key, 1, 60_000).source == REDIS  # the denial that is cached
    before = server.calls("slidewin.check")
    answers = [lim.check(key, 1, 60_000) for _ in range(1_000)]
    assert server.calls("slidewin.check") == before, "no call reached the server"
    assert all(not a.allowed and a.source == LOCAL_CACHE and a.retry_after_ms > 0 for a in answers)
    # Another rule on the key, or another key, still goes to Redis.
    assert lim.check(key, 5, 60_000).source == REDIS
    assert server.calls("slidewin.check") == before + 1
    # The cache never allows what Redis refuses: what it refused, Redis refuses too.
    assert not Limiter(server.client()).check(key, 1, 60_000).allowed


def test_sixteen_threads_on_one_key_never_exceed_the_limit(store_server):
    server = store_server
    # 16 threads, 2400 calls, limit 50 in a window longer than the run:
    # exactly 50 are allowed, with or without the local cache.
    # A generous timeout: a call that times out may have been recorded (and
    # is answered by the outage policy), which on a loaded machine would
    # blur the count under test.
    plain = Limiter(server.client(max_connections=32), cache_size=0, timeout_ms=10_000)
    cached = Limiter(server.client(max_connections=32), timeout_ms=10_000)
    allowed = []
    lock = threading.Lock()

    def work(limiter):
        for _ in range(150):
            d = limiter.check("hot", 50, 600_000)
            if d.allowed:
                with lock:
                    allowed.append(d.members)

    threads = [threading.Thread(target=work, args=(plain if i % 2 else cached,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(allowed) == 50
    assert entries(server.client(), "hot") == 50
    members = [m for ms in allowed for m in ms]
    assert len(set(members)) == 50, "every allowed call got its own entry"


def _kill_and_restart(server, limiter, policy_calls):
    """Kills the server under load, collects the answers while it is down,
    starts it again on the same port, and collects until Redis answers."""
    stop = threading.Event()
    load = []

    def background():
        while not stop.is_set():
            load.append(limiter.check("bg", 100_000, 60_000).source)

    t = threading.Thread(target=background)
    t.start()
    time.sleep(0.1)
    server.kill()
    down = [policy_calls() for _ in range(50)]
    server.start()
    deadline = time.monotonic() + 15
    back = None
    while time.monotonic() < deadline:
        back = policy_calls()
        if back.source == REDIS:
            break
        time.sleep(0.05)
    stop.set()
    t.join(timeout=10)
    return down, back, load


def test_outage_policies_answer_while_redis_is_down(server):
    results = {}
    for policy in (DENY, ALLOW, LOCAL):
        lim = Limiter(server.client(), outage=policy, timeout_ms=200, breaker_pause_ms=200)
        attempts = count_sends(lim)
        down, back, load = _kill_and_restart(server, lim, lambda: lim.check(f"{policy}:k", 3, 60_000))
        assert all(d.source == FALLBACK for d in down), [d.source for d in down]
        allowed = [d.allowed for d in down]
        if policy == DENY:
            assert not any(allowed)
        elif policy == ALLOW:
            assert all(allowed)
        else:
            assert allowed == [True] * 3 + [False] * 47, "the exact per-instance window"
        assert back is not None and back.source == REDIS, "Redis answers once it is back"
        assert FALLBACK in load and REDIS in load
        # The breaker keeps the calls from each waiting out the timeout:
        # far fewer went to the network than were answered.
        assert lim.policy.breaker.opened >= 1
        assert len(attempts) < len(load) + len(down), (len(attempts), len(load) + len(down))
        results[policy] = sum(allowed)
    print(f"\n{server.name}: allowed while down of 50 calls, limit 3: {results}")


def test_without_the_module_the_function_library_answers(bare_server):
    lim = Limiter(bare_server.client())
    first = lim.check("sms:limit:1", 1, 60_000)
    assert first.allowed and first.source == FUNCTION and re.fullmatch(r"1@\d{13}", first.members[0])
    assert not lim.check("sms:limit:1", 1, 60_000).allowed
    assert lim.check("sms:limit:1", 1, 60_000).source == LOCAL_CACHE
    d = lim.check_all([("{f}a", 2, 60_000), ("{f}b", 1, 60_000)])
    assert d.allowed and d.source == FUNCTION
    assert not lim.peek("{f}b", 1, 60_000).allowed
    assert lim.undo(d) == 2
    assert lim.peek("{f}b", 1, 60_000).allowed
    libs = bare_server.client().execute_command("FUNCTION", "LIST", "LIBRARYNAME", "slidewin")
    assert libs, "the library was loaded"


def test_unknown_command_errors_are_not_outages(server):
    lim = Limiter(server.client())
    server.client().set("str", "x")
    try:
        lim.check("str", 1, 1000)
    except redis.exceptions.ResponseError as e:
        assert "WRONGTYPE" in str(e)
    else:
        raise AssertionError("WRONGTYPE must reach the caller")
    assert lim.policy.breaker.state == "closed"


def test_async_limiter(store_server):
    server = store_server
    async def run():
        lim = AsyncLimiter(redis.asyncio.Redis(port=server.port))
        a = await lim.check("async", 1, 60_000)
        b = await lim.check("async", 1, 60_000)
        c = await lim.check("async", 1, 60_000)
        m = await lim.check_all([("{a}x", 1, 60_000), ("{a}y", 1, 60_000)])
        p = await lim.peek("{a}x", 1, 60_000)
        u = await lim.undo(m)
        await lim.aclose()
        return a, b, c, m, p, u

    a, b, c, m, p, u = asyncio.run(run())
    assert a.allowed and a.source == REDIS
    assert not b.allowed and b.source == REDIS
    assert not c.allowed and c.source == LOCAL_CACHE
    assert m.allowed and not p.allowed and u == 2


def test_async_outage_answers_with_the_policy(server):
    async def run():
        lim = AsyncLimiter(redis.asyncio.Redis(port=server.port), outage=ALLOW, timeout_ms=200)
        ok = await lim.check("k", 1, 60_000)
        server.kill()
        down = [await lim.check("k", 1, 60_000) for _ in range(5)]
        await lim.aclose()
        return ok, down

    ok, down = asyncio.run(run())
    assert ok.source == REDIS
    assert all(d.allowed and d.source == FALLBACK for d in down)


def test_merge_top_adds_per_key():
    merged = merge_top([[[b"a", 5, 0], [b"b", 3, 1]], [["c", 4, 0]], [["a", 1, 1]]])
    assert merged == [("a", 6, 1), ("c", 4, 0), ("b", 3, 1)]


def test_top_of_a_node_through_the_client(server):
    lim = Limiter(server.client(), cache_size=0)
    for _ in range(4):
        lim.check("t", 1, 60_000)
    reply = server.client().execute_command("SLIDEWIN.TOP", 5)
    assert merge_top([reply]) == [("t", 3, 0)]


def test_undo_of_a_decision_without_members_is_a_no_op(store_server):
    server = store_server
    lim = Limiter(server.client())
    assert lim.check("u", 2, 60_000).allowed
    peeked = lim.peek("u", 2, 60_000)
    assert peeked.allowed and peeked.members == (), "a peek charges nothing"
    before = server.calls("slidewin.undo")
    assert lim.undo(peeked) == 0
    assert lim.check("u", 2, 60_000).allowed
    denied = lim.check("u", 2, 60_000)
    assert not denied.allowed and lim.undo(denied) == 0
    assert lim.check("u", 2, 60_000).source == LOCAL_CACHE, "the no-op left the cached denial alone"

    async def run():
        alim = AsyncLimiter(redis.asyncio.Redis(port=server.port))
        p = await alim.peek("v", 2, 60_000)  # allowed: "v" has room
        removed = await alim.undo(p)
        await alim.aclose()
        return p, removed

    p, removed = asyncio.run(run())
    assert p.allowed and p.members == () and removed == 0
    assert server.calls("slidewin.undo") == before, "nothing was sent"
    assert entries(server.client(), "u") == 2, "nothing was given back"


def test_a_wrong_password_is_raised_not_treated_as_an_outage(server):
    # redis-py raises WRONGPASS / NOAUTH as ConnectionErrors; the server did
    # answer, so with outage="allow" the client must not admit everything.
    import pytest

    server.client().config_set("requirepass", "s3cret")
    try:
        for password in ("wrong", None):
            lim = Limiter(redis.Redis(port=server.port, password=password), outage="allow")
            with pytest.raises((redis.exceptions.AuthenticationError, redis.exceptions.AuthorizationError, redis.exceptions.ResponseError)):
                lim.check("auth:k", 5, 60_000)
            assert lim.policy.breaker.state == "closed"
    finally:
        redis.Redis(port=server.port, password="s3cret").config_set("requirepass", "")


def test_answers_without_the_server_are_counted_and_logged_rate_limited(server, caplog):
    import logging

    lim = Limiter(server.client(), outage=DENY, timeout_ms=200, breaker_pause_ms=60_000)
    assert lim.check("s", 1, 60_000).source == REDIS
    assert lim.check("s", 1, 60_000).source == REDIS  # refused: cached
    assert lim.check("s", 1, 60_000).source == LOCAL_CACHE
    server.kill()
    with caplog.at_level(logging.WARNING, logger="slidewin"):
        answers = [lim.check(f"k{i}", 5, 60_000) for i in range(20)]
    assert all(a.source == FALLBACK and not a.allowed for a in answers)
    assert lim.stats()["decisions"] == {
        "redis": {"decided": 2},
        "local-cache": {"denied-before": 1},
        "fallback": {"connection": 1, "breaker-open": 19},
    }
    assert lim.stats()["breaker"] == {"state": "open", "opened": 1}
    messages = [r.getMessage() for r in caplog.records if r.name == "slidewin"]
    assert all(r.levelname == "WARNING" for r in caplog.records if r.name == "slidewin")
    # One record each: the breaker opening, the connection failure, the
    # first answer while open; 18 more held back (rate-limited).
    assert len(messages) == 3, messages
    assert "circuit breaker opened (connection" in messages[0] and "'deny'" in messages[0]
    assert "Redis did not decide (connection" in messages[1] and "refused the call" in messages[1]
    assert "Redis did not decide (breaker-open)" in messages[2]
    # With no rate limit, the record after a held-back run says how many.
    lim.policy.stats._log_every_ms = 0
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="slidewin"):
        lim.check("again", 5, 60_000)
    assert "(18 more like it not logged since the last record)" in caplog.records[-1].getMessage()
