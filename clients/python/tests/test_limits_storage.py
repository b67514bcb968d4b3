"""slidewin.limits, the storages for the `limits` library, against the four
servers: the schemes, the moving window on the module (exact, one round
trip, the server's clock), limits' own strategies beside it on other keys,
clear/reset/check, the errors for rules the server refuses, asyncio, a
cluster, a Unix socket, both log types. limits' own suite runs on these
storages too (make test-limits); these are the cases it does not cover."""

import asyncio
import functools
import hashlib
import os
import time

import pytest
import redis
from conftest import SERVERS, Server, entries
from limits import RateLimitItemPerDay, RateLimitItemPerMinute, RateLimitItemPerSecond, parse
from limits.aio import strategies as aio_strategies
from limits.errors import ConfigurationError, StorageError
from limits.storage import RedisStorage, storage_from_string
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter, SlidingWindowCounterRateLimiter
from test_cluster import Cluster

import slidewin.limits as swl


def uri(server, scheme="slidewin"):
    return f"{scheme}://127.0.0.1:{server.port}/0"


def commandstats(server):
    """{command: calls} from INFO commandstats, without INFO itself and the
    connection handshake (HELLO, CLIENT SETINFO) of new connections."""
    stats = server.client().info("commandstats")
    calls = {k[len("cmdstat_"):]: v["calls"] for k, v in stats.items()}
    return {k: n for k, n in calls.items() if k not in ("info", "hello") and not k.startswith("client|")}


def delta(before, after):
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after) if after.get(k, 0) != before.get(k, 0)}


@pytest.fixture(params=SERVERS)
def unix_server(request, tmp_path_factory):
    sock = os.path.join(str(tmp_path_factory.mktemp("sock")), "redis.sock")
    s = Server(request.param, args=["--unixsocket", sock, "--unixsocketperm", "700"])
    s.sock = sock
    yield s
    s.close()


@pytest.fixture(params=SERVERS)
def limits_cluster(request):
    c = Cluster(request.param)
    yield c
    c.close()


def test_the_schemes_are_registered_and_map_to_limits_redis_storages(server):
    for scheme, cls in [("slidewin", swl.SlidewinStorage), ("async+slidewin", swl.AsyncSlidewinStorage)]:
        s = storage_from_string(uri(server, scheme))
        assert type(s) is cls
    st = storage_from_string(uri(server), key_prefix="app", socket_timeout=3)
    assert isinstance(st, RedisStorage), "a subclass of limits' own RedisStorage"
    assert st.check() is True
    kw = st.storage.connection_pool.connection_kwargs
    assert (kw["port"], kw["socket_timeout"]) == (server.port, 3), "options reach redis.Redis as limits documents"
    # slidewins:// is rediss:// (TLS): the client is made for TLS (this server has none).
    tls = storage_from_string(uri(server, "slidewins"))
    assert tls.storage.connection_pool.connection_class is redis.connection.SSLConnection
    assert tls.check() is False, "no TLS on this server: unhealthy, not an exception"
    with pytest.raises(ConfigurationError, match="redispy"):
        storage_from_string(uri(server, "async+slidewin"), implementation="coredis")
    with pytest.raises(ConfigurationError):
        swl.SlidewinStorage(uri(server, "redis"))


def test_the_moving_window_is_exact_on_the_module_and_apart_from_limits_keys(store_server):
    s = store_server
    st = storage_from_string(uri(s))
    mw = MovingWindowRateLimiter(st)
    item = RateLimitItemPerMinute(3)
    before = commandstats(s)
    assert [mw.hit(item, "user", "42") for _ in range(5)] == [True, True, True, False, False]
    assert delta(before, commandstats(s)) == {"slidewin.check": 5}, "one CHECK per hit, nothing else"
    c = s.client()
    key = f"LIMITS:slidewin:{item.key_for('user', '42')}"
    assert c.keys("*") == [key], "the log lives apart from limits' keys"
    assert c.type(key) == s.key_type and entries(c, key) == 3
    assert 59_000 < c.pttl(key) <= 60_000

    # get_window_stats and test: one PEEK each.
    before = commandstats(s)
    stats = mw.get_window_stats(item, "user", "42")
    assert delta(before, commandstats(s)) == {"slidewin.peek": 1}
    assert stats.remaining == 0
    assert stats.reset_time - time.time() == pytest.approx(60, abs=0.5)
    assert mw.test(item, "user", "42") is False

    # COST: the hit's cost is the command's.
    big = RateLimitItemPerMinute(10)
    assert mw.hit(big, "c", cost=7) and not mw.hit(big, "c", cost=4) and mw.hit(big, "c", cost=3)
    assert mw.get_window_stats(big, "c").remaining == 0
    before = commandstats(s)
    assert mw.hit(big, "d", cost=11) is False, "a cost above the limit never fits"
    assert delta(before, commandstats(s)) == {}, "and needs no round trip"

    # Fixed window and sliding-window counter on the same item: limits'
    # own keys, beside the log, each working.
    fw, sw = FixedWindowRateLimiter(st), SlidingWindowCounterRateLimiter(st)
    assert [fw.hit(item, "user", "42") for _ in range(4)] == [True, True, True, False]
    assert [sw.hit(item, "user", "42") for _ in range(4)] == [True, True, True, False]
    assert c.type(f"LIMITS:{item.key_for('user', '42')}") == "string"
    assert c.type(key) == s.key_type

    # clear removes limits' counter and the log; reset removes every key of the prefix.
    mw.clear(item, "user", "42")
    assert not c.exists(key) and not c.exists(f"LIMITS:{item.key_for('user', '42')}")
    assert mw.get_window_stats(item, "user", "42").remaining == 3
    assert mw.hit(item, "user", "42")
    c.set("other:key", 1)
    n = len(c.keys("LIMITS:*"))
    assert st.reset() == n and c.keys("*") == ["other:key"]


def test_the_window_ages_on_the_server_clock(server):
    st = storage_from_string(uri(server))
    mw = MovingWindowRateLimiter(st)
    item = RateLimitItemPerSecond(2, 2)
    assert mw.hit(item, "k")
    time.sleep(1.0)
    assert mw.hit(item, "k") and not mw.hit(item, "k")
    start, count = st.get_moving_window(item.key_for("k"), 2, 2)
    assert count == 2
    assert time.time() - start == pytest.approx(1.0, abs=0.15), "the oldest entry's age, measured by the server"
    reset = mw.get_window_stats(item, "k").reset_time
    assert reset - time.time() == pytest.approx(1.0, abs=0.15), "when the oldest entry leaves"
    time.sleep(max(0.0, reset - time.time()) + 0.05)
    assert mw.hit(item, "k"), "room again once the oldest entry left"
    assert not mw.hit(item, "k")


def test_a_client_with_a_wrong_clock_decides_as_the_others_do(server, monkeypatch):
    """The deliberate difference from limits' Redis moving window, which
    stamps entries with the client's time.time(): entries written by an
    application instance whose clock runs 30 s ahead stay in the window,
    for the instances with the right clock, 30 s too long (while the key
    lives). On slidewin every instance's hit is stamped by the server."""
    item = RateLimitItemPerSecond(3, 1)
    real = time.time
    theirs = MovingWindowRateLimiter(RedisStorage(uri(server, "redis")))  # limits' own, same server
    ours = MovingWindowRateLimiter(storage_from_string(uri(server)))
    monkeypatch.setattr(time, "time", lambda: real() + 30)  # the instance that runs ahead
    for lim, k in ((theirs, "theirs"), (ours, "ours")):
        assert lim.hit(item, k) and lim.hit(item, k)
    ahead_stats = ours.get_window_stats(item, "ours")
    assert ahead_stats.reset_time - time.time() == pytest.approx(1.0, abs=0.15), "reset on the caller's own clock"
    monkeypatch.setattr(time, "time", real)  # an instance with the right clock
    time.sleep(0.5)
    for lim, k in ((theirs, "theirs"), (ours, "ours")):
        assert lim.hit(item, k), "the third of 3"
    time.sleep(0.7)  # the two first hits are 1.2 s old: out of a 1 s window
    assert ours.hit(item, "ours"), "slidewin: the window is 1 s on the server's clock, whoever hit"
    assert ours.get_window_stats(item, "ours").remaining == 1
    assert not theirs.hit(item, "theirs"), "limits' own storage: the entries from the future still count"


def test_a_call_above_the_servers_entries_per_call_is_a_clear_error(server):
    mw = MovingWindowRateLimiter(storage_from_string(uri(server)))
    server.client().config_set("slidewin.max-entries-per-call", 10)
    try:
        with pytest.raises(swl.SlidewinLimitError, match=r"slidewin\.max-entries-per-call is 10") as e:
            mw.hit(parse("100 per day"), "z", cost=20)
        assert (e.value.setting, e.value.value, e.value.maximum) == ("slidewin.max-entries-per-call", 20, 10)
        assert "CONFIG SET slidewin.max-entries-per-call 20" in str(e.value)
        assert mw.hit(parse("100 per day"), "z", cost=10), "at the bound: allowed"
    finally:
        server.client().config_set("slidewin.max-entries-per-call", 0)


def test_a_rule_above_the_servers_max_limit_is_a_clear_error(server):
    st = storage_from_string(uri(server))
    mw = MovingWindowRateLimiter(st)
    item = parse("1000000 per day")
    for call in (lambda: mw.hit(item, "x"), lambda: mw.get_window_stats(item, "x"), lambda: mw.test(item, "x")):
        with pytest.raises(swl.SlidewinLimitError, match=r"slidewin\.max-limit is 100000") as e:
            call()
        assert (e.value.setting, e.value.value, e.value.maximum) == ("slidewin.max-limit", 1_000_000, 100_000)
        assert "CONFIG SET slidewin.max-limit 1000000" in str(e.value)
    # wrap_exceptions: limits' StorageError around it, as for any storage error.
    wrapped = MovingWindowRateLimiter(storage_from_string(uri(server), wrap_exceptions=True))
    with pytest.raises(StorageError) as e:
        wrapped.hit(item, "x")
    assert isinstance(e.value.storage_error, swl.SlidewinLimitError)
    # A window above slidewin.max-window-ms (366 days).
    with pytest.raises(swl.SlidewinLimitError, match=r"slidewin\.max-window-ms") as e:
        mw.hit(RateLimitItemPerDay(1, 400), "y")
    assert e.value.setting == "slidewin.max-window-ms"
    # Raised, the setting works: the same rule is then accepted.
    server.client().config_set("slidewin.max-limit", 1_000_000)
    assert mw.hit(item, "x") and mw.get_window_stats(item, "x").remaining == 999_999
    assert not server.client().exists(f"LIMITS:slidewin:{RateLimitItemPerDay(1, 400).key_for('y')}"), \
        "nothing written for the refused rule"


def test_a_million_per_window_on_each_log_type(store_server):
    """limits' test_moving_window_huge_cost (1,000,000 per 2 s, one hit of
    cost 999,999, read back within the 2 s window) runs in make test-limits
    on the compact log only: on a sorted set that hit adds a million
    members, 1.1-1.5 s of server time on this machine, more under load,
    and may outlast the window. Here, with a window long
    enough for either, both logs decide it exactly; the compact log holds
    the hit as one run."""
    s = store_server
    c = s.client()
    c.config_set("slidewin.max-limit", 1_000_000)
    mw = MovingWindowRateLimiter(storage_from_string(uri(s)))
    item = RateLimitItemPerSecond(1_000_000, 30)
    assert mw.hit(item)
    assert mw.hit(item, cost=999_999)
    assert not mw.hit(item) and mw.test(item) is False
    assert mw.get_window_stats(item).remaining == 0
    key = f"LIMITS:slidewin:{item.key_for()}"
    assert c.execute_command("SLIDEWIN.PEEK", key, 1_000_000, 30_000)[2] == 0
    if s.log_type == "compact":
        # The million entries are two runs (a time, a first member, a
        # count each), not a million records: the key stays small. (Its
        # time is the benchmark's business, bench/limits_bench.py.)
        size = c.memory_usage(key, samples=0)
        assert size < 1024, f"a million entries in two runs on the compact log: {size} B"
    mw.clear(item)
    assert not c.exists(key)


def test_without_the_module_the_error_says_so(bare_server):
    mw = MovingWindowRateLimiter(storage_from_string(uri(bare_server)))
    with pytest.raises(swl.SlidewinModuleError, match="no slidewin module"):
        mw.hit(RateLimitItemPerMinute(5), "k")
    fw = FixedWindowRateLimiter(storage_from_string(uri(bare_server)))
    assert fw.hit(RateLimitItemPerMinute(5), "k"), "limits' own fixed window needs no module"


@pytest.fixture
def bare_cluster(monkeypatch):
    """A two-master cluster of plain servers (no module), of one server."""
    import test_cluster

    monkeypatch.setattr(test_cluster, "Server", functools.partial(Server, module=False))
    c = Cluster("valkey-9.1")
    yield c
    c.close()


def test_a_cluster_without_the_module_says_so(bare_cluster):
    # redis-py's cluster client refuses, before sending, a command its
    # COMMAND table lacks: the storage names the cause all the same.
    st = storage_from_string(f"slidewin+cluster://127.0.0.1:{bare_cluster.nodes[0].port}")
    with pytest.raises(swl.SlidewinModuleError, match="no slidewin module"):
        MovingWindowRateLimiter(st).hit(RateLimitItemPerMinute(5), "k")

    async def run():
        ast = storage_from_string(f"async+slidewin+cluster://127.0.0.1:{bare_cluster.nodes[0].port}")
        with pytest.raises(swl.SlidewinModuleError, match="no slidewin module"):
            await aio_strategies.MovingWindowRateLimiter(ast).get_window_stats(RateLimitItemPerMinute(5), "k")

    asyncio.run(run())


def test_a_unix_socket(unix_server):
    st = storage_from_string(f"slidewin+unix://{unix_server.sock}")
    assert type(st) is swl.SlidewinStorage and st.check()
    mw = MovingWindowRateLimiter(st)
    item = RateLimitItemPerMinute(2)
    assert [mw.hit(item, "u") for _ in range(3)] == [True, True, False]
    assert unix_server.client().exists(f"LIMITS:slidewin:{item.key_for('u')}")

    async def run():
        ast = storage_from_string(f"async+slidewin+unix://{unix_server.sock}")
        amw = aio_strategies.MovingWindowRateLimiter(ast)
        return [await amw.hit(item, "u") for _ in range(2)], await amw.get_window_stats(item, "u")

    hits, stats = asyncio.run(run())
    assert hits == [False, False] and stats.remaining == 0


def test_asyncio(store_server):
    s = store_server

    async def run():
        st = storage_from_string(uri(s, "async+slidewin"), key_prefix="app")
        assert type(st) is swl.AsyncSlidewinStorage and await st.check()
        mw = aio_strategies.MovingWindowRateLimiter(st)
        item = RateLimitItemPerMinute(5)
        hits = await asyncio.gather(*[mw.hit(item, "a") for _ in range(20)])
        before = commandstats(s)
        stats = await mw.get_window_stats(item, "a")
        peeks = delta(before, commandstats(s))
        cost = [await mw.hit(RateLimitItemPerMinute(10), "b", cost=c) for c in (6, 5, 4, 11)]
        fixed = aio_strategies.FixedWindowRateLimiter(st)
        fw = [await fixed.hit(item, "a") for _ in range(6)]
        keys = sorted(s.client().keys("*"))
        await mw.clear(item, "a")
        after_clear = sorted(s.client().keys("*"))
        with pytest.raises(swl.SlidewinLimitError, match=r"slidewin\.max-limit"):
            await mw.hit(parse("1000000 per day"), "x")
        n = await st.reset()
        return hits, stats, peeks, cost, fw, keys, after_clear, n

    hits, stats, peeks, cost, fw, keys, after_clear, n = asyncio.run(run())
    item = RateLimitItemPerMinute(5)
    assert hits.count(True) == 5, "20 concurrent hits, exactly the limit admitted"
    assert peeks == {"slidewin.peek": 1} and stats.remaining == 0
    assert stats.reset_time - time.time() == pytest.approx(60, abs=1)
    assert cost == [True, False, True, False]
    assert fw == [True] * 5 + [False]
    assert keys == sorted([f"app:slidewin:{item.key_for('a')}", f"app:{item.key_for('a')}",
                           f"app:slidewin:{RateLimitItemPerMinute(10).key_for('b')}"])
    assert after_clear == [f"app:slidewin:{RateLimitItemPerMinute(10).key_for('b')}"]
    assert n == 1 and s.client().keys("*") == []


def test_a_cluster_sync_and_async(limits_cluster):
    nodes = limits_cluster.nodes
    cluster_uri = f"slidewin+cluster://127.0.0.1:{nodes[0].port}"
    st = storage_from_string(cluster_uri)
    assert type(st) is swl.SlidewinClusterStorage and st.check()
    mw = MovingWindowRateLimiter(st)
    item = RateLimitItemPerMinute(3)
    ids = [hashlib.sha1(str(i).encode()).hexdigest()[:8] for i in range(40)]  # spread over the slots
    owners = {limits_cluster.owner(f"LIMITS:slidewin:{item.key_for(i)}")[1].port for i in ids}
    assert len(owners) == 2, "the keys fall on both masters"
    for i in ids:
        assert [mw.hit(item, i) for _ in range(4)] == [True, True, True, False], i
        assert mw.get_window_stats(item, i).remaining == 0
    assert sum(n.calls("slidewin.check") for n in nodes) == 160
    assert sum(n.calls("slidewin.peek") for n in nodes) == 40
    FixedWindowRateLimiter(st).hit(item, ids[0])
    mw.clear(item, ids[0])
    assert mw.get_window_stats(item, ids[0]).remaining == 3
    assert FixedWindowRateLimiter(st).test(item, ids[0]), "clear removed limits' counter too"

    async def run(user):
        # A new storage each time: its client's first commands all at once.
        ast = storage_from_string("async+" + cluster_uri)
        assert type(ast) is swl.AsyncSlidewinClusterStorage
        amw = aio_strategies.MovingWindowRateLimiter(ast)
        hits = await asyncio.gather(*[amw.hit(item, user) for _ in range(10)])
        return hits, await amw.get_window_stats(item, user)

    for round in range(5):
        checks = sum(n.calls("slidewin.check") for n in nodes)
        hits, stats = asyncio.run(run(f"async-user-{round}"))
        assert hits.count(True) == 3 and stats.remaining == 0, (round, hits)
        # redis-py's fresh async cluster client, left to itself, sends some
        # of them twice (a CHECK applied twice): the storage prevents that.
        assert sum(n.calls("slidewin.check") for n in nodes) - checks == 10, "each hit sent once"
    async def reset():
        return await storage_from_string("async+" + cluster_uri).reset()

    assert asyncio.run(reset()) == 44, "reset removed every key on both masters"
    assert all(node.client().dbsize() == 0 for node in nodes)
