"""Shadow mode in the client (`shadow=True`: SHADOW): a call the limit
would refuse is let through, charging nothing, and the decision says so
(`shadow_refused`); counted in `stats()` and the health report; the denial
cache neither refuses a shadow call nor learns from one; the outage policy's
refusals are let through the same way. On the module and on the FUNCTION
library alike."""

import asyncio

import redis

from slidewin import FALLBACK, FUNCTION, REDIS, AsyncLimiter, Limiter
from slidewin.health import client_counts, client_prometheus

from conftest import entries


def source_of(server) -> str:
    return REDIS if server.module else FUNCTION


def test_a_shadow_call_the_limit_refuses_is_let_through_and_charges_nothing(any_server):
    r = any_server.client()
    lim = Limiter(r)
    src = source_of(any_server)
    first = lim.check("k", 1, 60_000, shadow=True)
    assert (first.allowed, first.shadow_refused, first.remaining, first.source) == (True, False, 0, src)
    assert len(first.members) == 1, "an allowed shadow call is charged as usual"
    d = lim.check("k", 1, 60_000, shadow=True)
    assert (d.allowed, d.shadow_refused, d.remaining, d.source) == (True, True, 0, src)
    assert 59_000 < d.retry_after_ms <= 60_000, "the wait an enforced limit would give"
    assert d.members == () and "Retry-After" not in d.headers()
    assert entries(r, "k") == 1 if any_server.module else r.zcard("k") == 1
    assert lim.undo(d) == 0, "nothing to give back"
    assert lim.stats()["shadow_refused"] == {src: 1}
    assert lim.stats()["decisions"][src] == {"decided": 2}
    if any_server.module:
        assert r.info("slidewin")["slidewin_checks_shadow_refused"] == 1
    # Enforced, the same call is refused by the server (the shadow call
    # left nothing in the denial cache)...
    enforced = lim.check("k", 1, 60_000)
    assert (enforced.allowed, enforced.shadow_refused, enforced.source) == (False, False, src)
    # ... and a shadow call is not refused by the cache that refusal filled.
    again = lim.check("k", 1, 60_000, shadow=True)
    assert (again.allowed, again.shadow_refused, again.source) == (True, True, src)
    assert "local-cache" not in lim.stats()["decisions"]


def test_several_rules_tell_which_would_have_refused(any_server):
    lim = Limiter(any_server.client())
    rules = [("{u}ip", 10, 60_000), ("{u}phone", 1, 60_000)]
    assert lim.check_all(rules).allowed
    d = lim.check_all(rules, shadow=True)
    assert (d.allowed, d.shadow_refused) == (True, True)
    assert [r.allowed for r in d.per_rule] == [True, False], "each rule's own verdict stays real"
    assert d.retry_after_ms > 0 and d.members == ()
    ok = lim.check_all([("{u}ip", 10, 60_000)], shadow=True)
    assert (ok.allowed, ok.shadow_refused, len(ok.members)) == (True, False, 1)


def test_a_shadow_call_with_a_request_id_holds_no_charge(any_server):
    r = any_server.client()
    lim = Limiter(r)
    assert lim.check("k", 1, 60_000, request_id="a").allowed
    d = lim.check("k", 1, 60_000, request_id="b", shadow=True)
    assert (d.allowed, d.shadow_refused, d.request_id) == (True, True, "b")
    calls = any_server.calls("slidewin.undo") + any_server.calls("fcall")
    assert lim.undo(d) == 0
    assert any_server.calls("slidewin.undo") + any_server.calls("fcall") == calls, "nothing sent: no charge"
    assert lim.settle("k", "b", 1) is None
    # A reservation let through sends nothing when its block ends.
    with lim.reserve("k", 1, 60_000, cost=1, shadow=True) as res:
        assert res.allowed and res.decision.shadow_refused
        res.cost = 0
    assert res.settled is None and res.refunded is None
    assert lim.stats()["shadow_refused"] == {source_of(any_server): 2}


def test_the_limiter_wide_setting_and_its_override(server):
    lim = Limiter(server.client(), shadow=True)
    assert lim.check("k", 1, 60_000).allowed
    d = lim.check("k", 1, 60_000)
    assert (d.allowed, d.shadow_refused) == (True, True)
    assert not lim.check("k", 1, 60_000, shadow=False).allowed, "a call may ask to be enforced"


def test_the_outage_policy_refusals_are_let_through(server):
    lim = Limiter(server.client(), outage="deny", timeout_ms=200)
    server.stop()
    d = lim.check("k", 1, 60_000, shadow=True)
    assert (d.allowed, d.shadow_refused, d.source) == (True, True, FALLBACK)
    enforced = lim.check("k", 1, 60_000)  # the breaker is open now: the policy answers
    assert (enforced.allowed, enforced.source) == (False, FALLBACK)
    d = lim.check("k", 1, 60_000, shadow=True)
    assert (d.allowed, d.shadow_refused) == (True, True)
    assert lim.stats()["shadow_refused"] == {FALLBACK: 2}
    allow = Limiter(server.client(), outage="allow", timeout_ms=200)
    d = allow.check("k", 1, 60_000, shadow=True)
    assert (d.allowed, d.shadow_refused) == (True, False), "the policy admitted it: nothing would have been refused"


def test_the_health_report_counts_shadow_refusals(server):
    lim = Limiter(server.client())
    lim.check("k", 1, 60_000, shadow=True)
    lim.check("k", 1, 60_000, shadow=True)
    assert client_counts([lim])["shadow_refused"] == {REDIS: 1}
    text = client_prometheus(lim)
    assert 'slidewin_client_shadow_refused_total{source="redis"} 1' in text, text
    assert 'slidewin_client_decisions_total{source="redis",reason="decided"} 2' in text, text


def test_the_async_limiter_shadows_too(any_server):
    async def run():
        lim = AsyncLimiter(redis.asyncio.Redis(port=any_server.port))
        try:
            assert (await lim.check("k", 1, 60_000, shadow=True)).allowed
            d = await lim.check("k", 1, 60_000, shadow=True)
            assert (d.allowed, d.shadow_refused) == (True, True)
            m = await lim.check_all([("k", 1, 60_000)], shadow=True)
            assert (m.allowed, m.shadow_refused) == (True, True)
            return lim.stats()["shadow_refused"]
        finally:
            await lim.aclose()

    assert asyncio.run(run()) == {source_of(any_server): 2}
