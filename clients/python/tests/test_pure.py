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


def test_the_packaged_library_is_lua_slidewin_lua():
    import os

    from slidewin import library_code

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    with open(os.path.join(root, "lua", "slidewin.lua"), encoding="utf-8") as f:
        assert library_code() == f.read(), "clients/python/slidewin/slidewin.lua is a link to lua/slidewin.lua"


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


def test_a_denial_refuses_its_cost_and_higher_costs_only():
    clock = Clock(0)
    cache = DenialCache(clock=clock)
    cache.block(R, 500, cost=5)
    assert [cache.blocked_for(R, c) for c in (1, 4, 5, 9)] == [0, 0, 500, 500]
    assert cache.blocked_for(R) == 0, "a cost of 1 by default"
    # A cheaper denial refuses its cost and up, for its own (shorter) wait;
    # higher costs keep the longer one.
    cache.block(R, 200, cost=2)
    assert [cache.blocked_for(R, c) for c in (1, 2, 3, 5, 6)] == [0, 200, 200, 500, 500]
    # A step made redundant (a lower cost refused longer) is not kept.
    cache.block(R, 100, cost=7)
    assert cache.blocked_for(R, 7) == 500
    clock.now = 200
    assert [cache.blocked_for(R, c) for c in (1, 2, 4, 5)] == [0, 0, 0, 300]
    clock.now = 500
    assert cache.blocked_for(R, 100) == 0 and len(cache) == 0
    # A denial of 1 refuses everything for its wait.
    cache.block(R, 50)
    assert [cache.blocked_for(R, c) for c in (1, 3, 50)] == [50, 50, 50]


def test_a_denial_is_timed_from_before_the_request_was_sent():
    clock = Clock(1_000)
    cache = DenialCache(clock=clock)
    # Sent at 970, the reply read at 1000: Redis's wait ran from between
    # the two, so the entry ends at 970 + 100, never after Redis's own.
    cache.block(R, 100, cost=1, since=970)
    assert cache.blocked_for(R) == 70


def test_the_steps_per_rule_are_bounded():
    clock = Clock(0)
    cache = DenialCache(clock=clock)
    for i in range(20):
        cache.block(R, 100 + i, cost=20 - i)  # each cheaper one waits longer
    assert cache.blocked_for(R, 1) == 119, "the cheapest, refusing longest, is kept"
    steps = cache._steps[(R.key.encode(), R.limit, R.window_ms)]
    assert len(steps) <= DenialCache.STEPS


def test_the_policy_caches_what_a_reply_refused_with_its_cost():
    from slidewin.limiter import CHECK, CHECK_ALL, Policy

    clock = Clock(0)
    policy = Policy(clock=clock)
    rule = (Rule("k", 10, 60_000),)
    # CHECK ... COST 5 DETAIL WITHMEMBERS refused: 2 left, 59 s to wait.
    policy.answered(CHECK, [0, 10, 2, 59_000, 59_000, []], rule, cost=5, since=0)
    assert policy.cached(rule, 1) is None and policy.cached(rule, 4) is None
    assert policy.cached(rule, 5).retry_after_ms == 59_000
    assert policy.cached(rule, 5).source == "local-cache"
    # An allowed reply caches nothing.
    policy.answered(CHECK, [1, 10, 1, 0, 60_000, ["9"]], (Rule("other", 10, 60_000),), cost=1, since=0)
    assert len(policy.cache) == 1
    # MCHECK ... COST 2: the phone rule refused, the ip rule not.
    ip, phone = Rule("{u}ip", 10, 60_000), Rule("{u}phone", 3, 60_000)
    policy.answered(CHECK_ALL, [0, 30_000, [1, 10, 8, 0, 40_000], [0, 3, 1, 30_000, 30_000], []], (ip, phone), cost=2, since=0)
    assert policy.cached((ip, phone), 1) is None, "1 may fit the phone rule"
    assert policy.cached((ip, phone), 2).retry_after_ms == 30_000
    assert policy.cached((ip,), 2) is None and policy.cached((phone,), 3) is not None
    clock.now = 30_000
    assert policy.cached((ip, phone), 2) is None, "ends when Redis would allow"


def test_tryagain_is_retried_within_the_budget():
    from slidewin.limiter import Policy

    def pauses(timeout_ms):
        clock = Clock(0)
        attempt = Policy(timeout_ms=timeout_ms, clock=clock).attempt()
        out = []
        while True:
            pause = attempt.next_tryagain_pause()
            if pause is None:
                return out
            out.append(pause)
            clock.now += int(pause * 1000) + 1  # the pause and a round trip
    assert pauses(100) == [0.01, 0.02, 0.04], "the next (80 ms) would pass 100 ms"
    assert pauses(None) == [0.01, 0.02, 0.04, 0.08], "at most 200 ms without a timeout"
    assert pauses(10_000) == [0.01, 0.02, 0.04, 0.08]
    assert pauses(5) == []


def test_each_error_has_its_answer_and_only_outages_open_the_breaker():
    import redis.exceptions as x

    from slidewin.decision import Decision
    from slidewin.limiter import CHECK, RECONNECT, Policy

    rules = (R,)

    def outcome(e, cluster=False, retries=0, reconnected=False):
        policy = Policy(outage="allow", clock=Clock(0))
        attempt = policy.attempt()
        attempt.tryagain = retries
        attempt.reconnected = reconnected
        step = policy.after_error(e, CHECK, rules, 1, attempt, cluster)
        if isinstance(step, Decision):
            assert step.allowed and step.source == "fallback"
            step = "policy"
        return step, policy.breaker.state

    assert outcome(x.TryAgainError("TRYAGAIN Multiple keys request during rehashing of slot")) == (0.01, "closed")
    assert outcome(x.TryAgainError("TRYAGAIN"), retries=4) == ("policy", "closed")
    assert outcome(x.ClusterDownError("CLUSTERDOWN The cluster is down")) == ("policy", "closed")
    assert outcome(x.ClusterError("TTL exhausted.")) == ("policy", "closed")
    assert outcome(x.SlotNotCoveredError('Slot "1" is not covered by the cluster.')) == ("policy", "closed")
    assert outcome(x.OutOfMemoryError("OOM command not allowed when used memory > 'maxmemory'.")) == ("policy", "closed")
    assert outcome(x.ResponseError("NOREPLICAS Not enough good replicas to write.")) == ("policy", "closed")
    assert outcome(x.ResponseError("MISCONF Redis is configured to save RDB snapshots")) == ("policy", "closed")
    assert outcome(x.ConnectionError("Connection refused")) == ("policy", "open")
    assert outcome(x.TimeoutError("Timeout reading from socket")) == ("policy", "open")
    assert outcome(x.BusyLoadingError("LOADING Redis is loading the dataset in memory")) == ("policy", "open")
    assert outcome(x.MasterDownError("MASTERDOWN Link with MASTER is down")) == ("policy", "open")
    assert outcome(x.ReadOnlyError("READONLY You can't write against a read only replica.")) == (RECONNECT, "closed")
    assert outcome(x.ReadOnlyError("READONLY"), reconnected=True) == ("policy", "open")
    assert outcome(x.ReadOnlyError("READONLY"), reconnected=True, cluster=True) == ("policy", "closed")
    assert outcome(x.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")) == (None, "closed")
    assert outcome(x.ResponseError("ERR COST count must be an integer between 1 and 100000")) == (None, "closed")


def test_a_probe_that_ends_without_news_frees_the_probe():
    clock = Clock(0)
    b = CircuitBreaker(failures=1, pause_ms=100, clock=clock)
    b.failure()
    clock.now = 100
    assert b.allow() and not b.allow(), "one probe"
    b.release()  # e.g. an error raised to the caller
    assert b.allow(), "the next call may probe"
    assert b.state == "half-open"
