"""The denial cache and COST, against real servers, with the module and
without it (the FUNCTION library): a denial of cost c refuses locally only
costs >= c; a lower cost goes to Redis, which may allow it."""

from slidewin import FUNCTION, LOCAL_CACHE, REDIS, Limiter

KEY = "api:user:42"


def source_of(srv):
    return REDIS if srv.module else FUNCTION


def mcheck_command(srv):
    return "slidewin.mcheck" if srv.module else "fcall"


def test_a_costly_denial_does_not_refuse_a_cheaper_call(any_server):
    srv = any_server
    lim = Limiter(srv.client())
    src = source_of(srv)
    assert lim.check(KEY, 10, 60_000, cost=8).allowed
    five = lim.check(KEY, 10, 60_000, cost=5)
    assert (five.allowed, five.source, five.remaining) == (False, src, 2)
    assert five.retry_after_ms > 50_000, "a cost of 5 waits for the cost-8 entries to leave"
    assert lim.peek(KEY, 10, 60_000).remaining == 2
    # The denial of 5 says nothing of 1: Redis is asked, and allows it.
    one = lim.check(KEY, 10, 60_000)
    assert (one.allowed, one.source, one.remaining) == (True, src, 1), one
    # 5 and more stay refused for the wait Redis gave, without a round trip.
    before = srv.calls(srv.check_command())
    for cost in (5, 6, 9):
        d = lim.check(KEY, 10, 60_000, cost=cost)
        assert (d.allowed, d.source) == (False, LOCAL_CACHE), (cost, d)
        assert 0 < d.retry_after_ms <= five.retry_after_ms
    assert srv.calls(srv.check_command()) == before, "no call reached the server"
    # 2 is below 5: asked of Redis, refused there (1 left), and now cached.
    two = lim.check(KEY, 10, 60_000, cost=2)
    assert (two.allowed, two.source) == (False, src)
    assert srv.calls(srv.check_command()) == before + 1
    # 1 still fits.
    last = lim.check(KEY, 10, 60_000)
    assert (last.allowed, last.source, last.remaining) == (True, src, 0)
    assert srv.client().zcard(KEY) == 10, "every slot Redis had, was used"


def test_a_cheap_denial_refuses_costlier_calls_locally(any_server):
    srv = any_server
    lim = Limiter(srv.client())
    src = source_of(srv)
    assert lim.check(KEY, 10, 60_000, cost=10).allowed
    one = lim.check(KEY, 10, 60_000)
    assert (one.allowed, one.source) == (False, src)
    before = srv.calls(srv.check_command())
    for cost in (1, 2, 5, 10):
        d = lim.check(KEY, 10, 60_000, cost=cost)
        assert (d.allowed, d.source) == (False, LOCAL_CACHE), (cost, d)
        assert 0 < d.retry_after_ms <= one.retry_after_ms
    assert srv.calls(srv.check_command()) == before, "no call reached the server"
    # Redis agrees with every one of those refusals.
    for cost in (1, 2, 5, 10):
        assert not Limiter(srv.client()).peek(KEY, 10, 60_000, cost=cost).allowed


def test_check_all_remembers_the_cost_per_rule(any_server):
    srv = any_server
    lim = Limiter(srv.client())
    src = source_of(srv)
    ip, phone = ("{u}ip", 10, 60_000), ("{u}phone", 3, 60_000)
    assert lim.check_all([ip, phone], cost=2).allowed
    refused = lim.check_all([ip, phone], cost=2)
    assert (refused.allowed, refused.source) == (False, src)
    assert [p.allowed for p in refused.per_rule] == [True, False]
    # A cost of 1 still fits the phone rule: Redis is asked and allows.
    one = lim.check_all([ip, phone])
    assert (one.allowed, one.source) == (True, src), one
    # The phone rule is full: Redis refuses 1, then 1 and 2 are refused
    # locally; the ip rule alone still goes to Redis.
    full = lim.check_all([ip, phone])
    assert (full.allowed, full.source) == (False, src)
    assert [lim.check_all([ip, phone], cost=c).source for c in (1, 2)] == [LOCAL_CACHE, LOCAL_CACHE]
    assert lim.check(*ip).source == src
    c = srv.client()
    assert c.zcard("{u}phone") == 3 and c.zcard("{u}ip") == 4


def test_check_all_refusal_of_one_then_higher_costs_are_local(any_server):
    srv = any_server
    lim = Limiter(srv.client())
    src = source_of(srv)
    ip, phone = ("{u}ip", 10, 60_000), ("{u}phone", 3, 60_000)
    assert lim.check_all([ip, phone], cost=3).allowed
    one = lim.check_all([ip, phone])
    assert (one.allowed, one.source) == (False, src)
    before = srv.calls(mcheck_command(srv))
    for cost in (1, 2, 3):
        d = lim.check_all([ip, phone], cost=cost)
        assert (d.allowed, d.source) == (False, LOCAL_CACHE), (cost, d)
    # The phone rule alone is known refused too, whichever call refused it.
    alone = lim.check("{u}phone", 3, 60_000, cost=2)
    assert (alone.allowed, alone.source) == (False, LOCAL_CACHE)
    assert srv.calls(mcheck_command(srv)) == before, "no call reached the server"
    # The ip rule was not refused: a call on it alone goes to Redis.
    ip_alone = lim.check("{u}ip", 10, 60_000, cost=5)
    assert (ip_alone.allowed, ip_alone.source) == (True, src)
