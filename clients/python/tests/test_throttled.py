"""slidewin.throttled: the throttled-py limiter `slidewin`, sync and async,
against the four servers (and both log types where the decision is
judged). Retry and reset are checked against the DETAIL semantics with
the server's own clock (TIME) bracketing each call."""

import asyncio
import math
import threading
import time
from datetime import timedelta

import pytest
import redis
import throttled
import throttled.asyncio as athrottled
from throttled import RateLimiterRegistry, Throttled, exceptions, per_duration, per_min
from throttled.asyncio import RateLimiterRegistry as AsyncRegistry
from throttled.rate_limiter.sliding_window import SlidingWindowRateLimiter
from throttled.asyncio.rate_limiter.sliding_window import SlidingWindowRateLimiter as AsyncSlidingWindow
from throttled.store import MemoryStore, RedisStore

import slidewin.throttled as st
from conftest import SERVERS, entries

PREFIX = "throttled:v1:slidewin:"
BUILTINS = ["fixed_window", "sliding_window", "leaking_bucket", "token_bucket", "gcra"]


def server_ms(r: redis.Redis) -> float:
    sec, usec = r.time()
    return sec * 1000 + usec / 1000


def quota(limit, ms):
    return per_duration(timedelta(milliseconds=ms), limit)


def make(s, limit, ms, **kw):
    return Throttled(using="slidewin", quota=quota(limit, ms), store=RedisStore(server=s.url()), **kw)


def test_registered_under_its_own_name_beside_the_builtins():
    assert st.SLIDEWIN == "slidewin"
    assert RateLimiterRegistry.get("slidewin") is st.SlidewinRateLimiter
    assert AsyncRegistry.get("slidewin") is st.AsyncSlidewinRateLimiter
    # The built-in sliding window is still throttled-py's own, sync and async.
    assert RateLimiterRegistry.get("sliding_window") is SlidingWindowRateLimiter
    assert AsyncRegistry.get("sliding_window") is AsyncSlidingWindow
    for name in BUILTINS:
        assert RateLimiterRegistry.get(name).__module__.startswith("throttled.")
        assert AsyncRegistry.get(name).__module__.startswith("throttled.")
    assert "slidewin" not in throttled.constants.RateLimiterType.choice()


def test_builtin_sliding_window_is_untouched(server):
    """throttled-py's sliding_window on the same store: its own keys (plain
    counters), its own Lua, no SLIDEWIN call; and ours does not meet them."""
    r = server.client()
    store = RedisStore(server=server.url())
    builtin = Throttled(using="sliding_window", quota=per_min(2), store=store)
    ours = Throttled(using="slidewin", quota=per_min(2), store=store)
    assert [builtin.limit("k").limited for _ in range(3)] == [False, False, True]
    assert server.calls("slidewin.check") == 0 and server.calls("slidewin.peek") == 0
    keys = r.keys("*")
    assert keys and all(k.startswith("throttled:v1:sliding_window:k:period:") for k in keys)
    assert all(r.type(k) == "string" for k in keys)
    assert builtin.peek("k").remaining == 0
    # Ours on the same key name: a separate log, full limit.
    assert [ours.limit("k").limited for _ in range(3)] == [False, False, True]
    assert r.type(PREFIX + "k") == "zset"
    assert builtin.limit("k").limited  # still denied by its own counters


def test_decisions_retry_and_reset_follow_detail(store_server):
    """limit 3 in 10 s: allow, allow COST 2, deny; retry = oldest + window
    - now, reset = newest + window - now (server clock); a denial records
    nothing and leaves the expiry alone."""
    s = store_server
    r = s.client()
    t = make(s, 3, 10_000)
    key = PREFIX + "user:42"

    a0 = server_ms(r)
    first = t.limit("user:42")
    a1 = server_ms(r)
    assert not first.limited
    assert (first.state.limit, first.state.remaining, first.state.retry_after) == (3, 2, 0)
    assert first.state.reset_after == 10.0  # just added: a whole window
    assert r.type(key) == s.key_type

    time.sleep(0.3)
    b0 = server_ms(r)
    second = t.limit("user:42", cost=2)
    b1 = server_ms(r)
    assert not second.limited and second.state.remaining == 0 and second.state.reset_after == 10.0
    assert entries(r, key) == 3
    pttl = r.pttl(key)

    time.sleep(0.2)
    c0 = server_ms(r)
    denied = t.limit("user:42")
    c1 = server_ms(r)
    assert denied.limited
    st_ = denied.state
    assert (st_.limit, st_.remaining) == (3, 0)
    # s(n + cost - limit) = s1, the first entry; whole ms, at least 1.
    retry_ms = st_.retry_after * 1000
    assert math.floor(a0 + 10_000 - c1) - 1 <= retry_ms <= math.ceil(a1 + 10_000 - c0) + 1
    reset_ms = st_.reset_after * 1000
    assert math.floor(b0 + 10_000 - c1) - 1 <= reset_ms <= math.ceil(b1 + 10_000 - c0) + 1
    assert retry_ms < reset_ms
    assert entries(r, key) == 3  # nothing recorded
    assert r.pttl(key) <= pttl  # expiry not pushed

    # COST 2 must wait for the second oldest: the COST 2 entries (b).
    d0 = server_ms(r)
    two = t.limit("user:42", cost=2)
    d1 = server_ms(r)
    assert two.limited
    assert math.floor(b0 + 10_000 - d1) - 1 <= two.state.retry_after * 1000 <= math.ceil(b1 + 10_000 - d0) + 1


def test_peek_reads_detail_and_writes_nothing(store_server):
    s = store_server
    r = s.client()
    t = make(s, 2, 60_000)
    empty = t.peek("p")
    assert (empty.limit, empty.remaining, empty.reset_after, empty.retry_after) == (2, 2, 0, 0)
    assert r.exists(PREFIX + "p") == 0  # a peek creates nothing
    t.limit("p")
    after_one = t.peek("p")
    assert (after_one.remaining, after_one.retry_after) == (1, 0)
    assert 59.0 < after_one.reset_after <= 60.0
    t.limit("p")
    full = t.peek("p")
    assert full.remaining == 0 and 59.0 < full.retry_after <= 60.0
    assert 59.0 < full.reset_after <= 60.0
    assert entries(r, PREFIX + "p") == 2
    assert s.calls("slidewin.peek") >= 3 and s.calls("slidewin.check") == 2
    # The raw command, as the README documents it, says the same.
    raw = r.execute_command("SLIDEWIN.PEEK", PREFIX + "p", 2, 60_000, "DETAIL")
    assert raw[:3] == [0, 2, 0]


def test_cost(server):
    r = server.client()
    t = make(server, 5, 60_000)
    key = PREFIX + "c"
    res = t.limit("c", cost=3)
    assert not res.limited and res.state.remaining == 2 and entries(r, key) == 3
    # Cost 0 records nothing and is never limited, even when full.
    t.limit("c", cost=2)
    zero = t.limit("c", cost=0)
    assert not zero.limited and zero.state.remaining == 0 and zero.state.retry_after == 0
    assert entries(r, key) == 5
    assert t.limit("c", cost=1).limited


def test_a_cost_above_the_limit_never_passes_and_does_not_wait(server):
    r = server.client()
    t = make(server, 3, 60_000, timeout=2)
    started = time.monotonic()
    res = t.limit("big", cost=4)
    assert time.monotonic() - started < 0.5  # no retry loop until the timeout
    assert res.limited and res.state.retry_after == math.inf  # slidewin's -1
    assert res.state.remaining == 3
    assert r.exists(PREFIX + "big") == 0
    assert server.calls("slidewin.check") == 1


def test_blocking_waits_the_exact_retry_then_passes(server):
    """throttled-py's blocking mode (timeout) sleeps retry_after and tries
    again: with a 1 s window (throttled-py's shortest quota) the second
    call passes once the first entry leaves."""
    t = make(server, 1, 1000, timeout=3)
    assert not t.limit("w").limited
    started = time.monotonic()
    res = t.limit("w")
    waited = time.monotonic() - started
    assert not res.limited
    assert 0.8 < waited < 2.5
    # Non-blocking: denied at once, with the wait.
    quick = make(server, 1, 1000)
    denied = quick.limit("w")
    assert denied.limited and 0 < denied.state.retry_after <= 1.0


def test_context_manager_and_decorator_raise_limited(server):
    t = make(server, 1, 60_000, key="cm")
    with t as res:
        assert not res.limited
    with pytest.raises(exceptions.LimitedError) as info:
        with t:
            pass
    assert info.value.rate_limit_result.state.retry_after > 59

    @Throttled(key="deco", using="slidewin", quota=per_min(1), store=RedisStore(server=server.url()))
    def call():
        return "ok"

    assert call() == "ok"
    with pytest.raises(exceptions.LimitedError):
        call()


def test_key_prefix_the_quota_dsl_and_the_exact_period(server):
    r = server.client()
    t = Throttled(using="slidewin", quota="2/s", store=RedisStore(server=server.url()), key_prefix="myapp")
    assert not t.limit("k").limited
    assert r.type("myapp:v1:slidewin:k") == "zset"
    assert 0 < r.pttl("myapp:v1:slidewin:k") <= 1000
    # The period in ms as given (throttled-py's own limiters use whole seconds).
    t = make(server, 1, 1500)
    assert t.limit("ms").state.reset_after == 1.5
    assert 1000 < r.pttl(PREFIX + "ms") <= 1500
    assert st.window_ms(timedelta(milliseconds=1500)) == 1500
    with pytest.raises(exceptions.DataError, match="at least 1 ms"):
        st.window_ms(timedelta(microseconds=10))


def test_threads_never_exceed_the_limit(server):
    t = make(server, 50, 60_000)
    allowed = []
    lock = threading.Lock()

    def worker():
        for _ in range(25):
            if not t.limit("race").limited:
                with lock:
                    allowed.append(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert len(allowed) == 50
    assert entries(server.client(), PREFIX + "race") == 50


def test_async(store_server):
    s = store_server
    r = s.client()

    async def run():
        store = athrottled.RedisStore(server=s.url())
        t = athrottled.Throttled(using="slidewin", quota=quota(2, 10_000), store=store)
        a0 = server_ms(r)
        one = await t.limit("a")
        a1 = server_ms(r)
        two = await t.limit("a")
        three = await t.limit("a")
        c1 = server_ms(r)
        peek = await t.peek("a")
        big = await t.limit("a", cost=3)
        zero = await t.limit("a", cost=0)
        return a0, a1, c1, one, two, three, peek, big, zero

    a0, a1, c1, one, two, three, peek, big, zero = asyncio.run(run())
    assert (one.limited, two.limited, three.limited) == (False, False, True)
    assert one.state.remaining == 1 and two.state.remaining == 0
    assert math.floor(a0 + 10_000 - c1) - 1 <= three.state.retry_after * 1000 <= math.ceil(a1 + 10_000 - a0) + 1
    assert peek.remaining == 0 and 0 < peek.retry_after <= three.state.retry_after
    assert big.limited and big.state.retry_after == math.inf
    assert not zero.limited
    assert entries(r, PREFIX + "a") == 2
    assert r.type(PREFIX + "a") == s.key_type


def test_server_errors_are_not_outages(server):
    r = server.client()
    # A limit above slidewin.max-limit (100000 by default): the server's message.
    with pytest.raises(exceptions.DataError, match="limit must be an integer between 1 and 100000"):
        make(server, 200_000, 60_000).limit("x")
    r.set(PREFIX + "str", "v")
    with pytest.raises(exceptions.DataError, match="WRONGTYPE"):
        make(server, 5, 60_000).limit("str")
    with pytest.raises(exceptions.DataError, match="WRONGTYPE"):
        make(server, 5, 60_000).peek("str")
    with pytest.raises(exceptions.SetUpError, match="RedisStore"):
        Throttled(using="slidewin", quota=per_min(1), store=MemoryStore()).limit("x")

    async def async_error():
        t = athrottled.Throttled(using="slidewin", quota=per_min(200_000),
                                 store=athrottled.RedisStore(server=server.url()))
        await t.limit("x")

    with pytest.raises(exceptions.DataError, match="limit must be"):
        asyncio.run(async_error())
    # An ACL user without the commands: a setup error naming the grant.
    r.execute_command("ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-slidewin.check")
    acl = Throttled(using="slidewin", quota=per_min(5),
                    store=RedisStore(server=f"redis://app:pw@127.0.0.1:{server.port}/0"))
    with pytest.raises(exceptions.SetUpError, match="ACL"):
        acl.limit("x")
    assert acl.peek("x").remaining == 5  # PEEK is still granted
    # Unreachable: throttled-py's own StoreUnavailableError.
    t = make(server, 5, 60_000)
    server.stop()
    with pytest.raises(exceptions.StoreUnavailableError):
        t.limit("x")


def test_without_the_module_the_error_says_load_it(bare_server):
    with pytest.raises(exceptions.SetUpError, match="load the slidewin module"):
        make(bare_server, 5, 60_000).limit("x")


@pytest.fixture(params=SERVERS)
def cluster(request):
    from test_cluster import Cluster

    c = Cluster(request.param)
    yield c
    c.close()


def test_on_a_cluster_each_key_goes_to_its_slot(cluster):
    """throttled-py's redis+cluster:// store: each CHECK goes to the node
    owning its key's slot (redis-py routes the module's commands by the key
    they declare), sync and async."""
    url = "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes)
    t = Throttled(using="slidewin", quota=per_min(2), store=RedisStore(server=url))
    names = [f"user:{i}" for i in range(20)]
    for name in names:
        assert [t.limit(name).limited for _ in range(3)] == [False, False, True]
        assert t.peek(name).remaining == 0
    for name in names:
        _slot, owner, _, _, _ = cluster.owner(PREFIX + name)
        assert entries(owner.client(), PREFIX + name) == 2
    assert sum(n.client().dbsize() for n in cluster.nodes) == len(names)  # no key twice
    assert all(n.calls("slidewin.check") > 0 for n in cluster.nodes)

    async def run():
        at = athrottled.Throttled(using="slidewin", quota=per_min(1),
                                  store=athrottled.RedisStore(server=url))
        return [(await at.limit(f"a:{i}")).limited for i in range(10) for _ in range(2)]

    assert asyncio.run(run()) == [False, True] * 10
    for i in range(10):
        _slot, owner, _, _, _ = cluster.owner(PREFIX + f"a:{i}")
        assert entries(owner.client(), PREFIX + f"a:{i}") == 1
