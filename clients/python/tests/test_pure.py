"""The client's pure parts, with a fake clock: no server."""

import threading

from slidewin.decision import Decision, Rule, from_detail, from_multi
from slidewin.local import CircuitBreaker, DenialCache, LocalWindows


class Clock:
    def __init__(self, now=1_000):
        self.now = now

    def __call__(self):
        return self.now


R = Rule("sms:limit:1.2.3.4", 5, 60_000)


def test_headers_follow_the_ietf_draft():
    allowed = from_detail([1, 5, 4, 0, 60_000], R, "redis", ["1"])
    assert allowed.headers() == {"RateLimit-Limit": "5", "RateLimit-Remaining": "4", "RateLimit-Reset": "60"}
    denied = from_detail([0, 5, 0, 1_001, 59_999], R, "redis")
    assert denied.headers() == {
        "RateLimit-Limit": "5",
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": "60",
        "Retry-After": "2",
    }
    never = from_detail([0, 5, 0, -1, 0], R, "redis")
    assert "Retry-After" not in never.headers()
    assert allowed.members == ("1",) and allowed.keys == [R.key]


def test_multi_reply_is_summarised_by_its_tightest_rule():
    rules = [Rule("ip", 5, 60_000), Rule("phone", 1, 60_000)]
    d = from_multi([0, 30_000, [1, 5, 3, 0, 40_000], [0, 1, 0, 30_000, 30_000], []], rules, "redis")
    assert not d.allowed and d.limit == 1 and d.remaining == 0 and d.retry_after_ms == 30_000
    assert d.reset_after_ms == 30_000, "the tightest rule's"
    assert [p.allowed for p in d.per_rule] == [True, False]
    assert d.keys == ["ip", "phone"]


def test_the_denial_cache_expires_and_is_bounded():
    clock = Clock()
    cache = DenialCache(max_entries=2, clock=clock)
    cache.block(R, 500)
    assert cache.blocked_for(R) == 500
    clock.now += 499
    assert cache.blocked_for(R) == 1
    clock.now += 1
    assert cache.blocked_for(R) == 0, "ends exactly when Redis would allow"
    cache.block(R, 0)
    cache.block(R, -1)
    assert len(cache) == 0, "no wait, or never: not cached"
    for i in range(5):
        cache.block(Rule(f"k{i}", 1, 1000), 100)
    assert len(cache) == 2
    assert cache.blocked_for(Rule("k4", 1, 1000)) == 100
    cache.forget_key("k4")
    assert cache.blocked_for(Rule("k4", 1, 1000)) == 0
    # The same key under another rule is another entry.
    cache.block(Rule("k", 1, 1000), 100)
    assert cache.blocked_for(Rule("k", 2, 1000)) == 0


def test_local_windows_are_exact_per_instance():
    clock = Clock(0)
    w = LocalWindows(clock=clock)
    rule = Rule("k", 3, 1_000)
    results = []
    for t in (0, 100, 200, 300, 999, 1_000, 1_100):
        clock.now = t
        results.append(w.check([rule])[0])
    assert results == [True, True, True, False, False, True, True]
    clock.now = 1_150
    allowed, remaining, retry = w.check([rule])
    assert (allowed, remaining, retry) == (False, 0, 50)
    assert w.check([rule], cost=4) == (False, 0, -1)
    # All or nothing across rules.
    other = Rule("o", 10, 1_000)
    assert w.check([other, rule])[0] is False
    assert w.check([other])[1] == 9, "the refused call charged nothing"


def test_the_breaker_opens_fails_fast_and_probes_once_after_the_pause():
    clock = Clock(0)
    b = CircuitBreaker(failures=2, pause_ms=300, clock=clock)
    b.failure()
    assert b.allow() and b.state == "closed"
    b.failure()
    assert b.state == "open" and not b.allow() and b.opened == 1
    clock.now = 300
    assert b.allow(), "one probe after the pause"
    assert not b.allow(), "only one"
    b.failure()
    assert b.state == "open" and not b.allow()
    clock.now = 600
    assert b.allow()
    b.success()
    assert b.state == "closed" and b.allow() and b.allow()


def test_the_cache_is_thread_safe():
    cache = DenialCache(max_entries=100)

    def work(i):
        for j in range(2_000):
            cache.block(Rule(f"k{(i * j) % 300}", 1, 1000), 1_000)
            cache.blocked_for(Rule(f"k{j % 300}", 1, 1000))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) <= 100


def test_a_decision_is_immutable():
    d = Decision(True, 1, 0, 0, 0)
    try:
        d.allowed = False
    except Exception:
        return
    raise AssertionError("Decision must be frozen")


def test_the_packaged_library_is_scripts_slidewin_lua():
    import os

    from slidewin import library_code

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    with open(os.path.join(root, "scripts", "slidewin.lua"), encoding="utf-8") as f:
        assert library_code() == f.read(), "clients/python/slidewin/slidewin.lua is a link to scripts/slidewin.lua"


def test_a_missing_module_is_recognised_from_the_server_or_the_cluster_client():
    from redis.exceptions import ConnectionError, RedisError, ResponseError

    from slidewin.limiter import is_unknown_command

    # The server's reply (a plain client), and redis-py's cluster client,
    # which refuses to route a command missing from its COMMAND table.
    assert is_unknown_command(ResponseError("unknown command 'SLIDEWIN.CHECK', with args beginning with: 'k' "))
    assert is_unknown_command(RedisError("SLIDEWIN.CHECK command doesn't exist in Redis commands"))
    # Anything else is not a reason to fall back.
    assert not is_unknown_command(ResponseError("unknown command 'FOO', with args beginning with: "))
    assert not is_unknown_command(ResponseError("ERR limit must be an integer between 1 and 1000000"))
    assert not is_unknown_command(ConnectionError("Error 111 connecting to localhost:6379. Connection refused."))
