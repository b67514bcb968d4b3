"""No charging command is sent twice: the first send of a CHECK, MCHECK or
UNDO times out while the server still runs it (the server is held by
another client's DEBUG SLEEP: our command waits in its socket and runs when
the sleep ends), and the server counts how many it ran. The user's client
keeps redis-py's default retry (which re-sends a command after a timeout)
and its own `socket_timeout`: the limiter must not use either."""

import asyncio
import threading
import time

import pytest
import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from slidewin import FALLBACK, AsyncLimiter, Limiter
from conftest import entries
from test_cluster import Cluster, SERVERS

HOLD_S = 1.0


class Held:
    """Holds the server with DEBUG SLEEP for `HOLD_S`, from another client."""

    def __init__(self, server):
        self.server = server
        self.thread = threading.Thread(target=lambda: redis.Redis(port=server.port).execute_command("DEBUG", "SLEEP", HOLD_S))

    def start(self):
        probe = redis.Redis(port=self.server.port, socket_timeout=0.05, retry=Retry(NoBackoff(), 0))
        probe.ping()
        self.thread.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the server stops answering: the sleep has begun
            try:
                probe.ping()
            except redis.exceptions.TimeoutError:
                return
            time.sleep(0.005)
        pytest.fail("the server never started sleeping")

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.thread.join(timeout=30)


def settled(server, command, expected_at_least):
    """The server's count of `command` once every queued send has run (a
    re-send would arrive within redis-py's retry backoff: waited out)."""
    deadline = time.monotonic() + 10
    while server.calls(command) < expected_at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.5)
    return server.calls(command)


@pytest.mark.parametrize("timeout_ms", [None, 200])
def test_a_check_that_timed_out_is_not_sent_again(server, timeout_ms):
    client = redis.Redis(port=server.port, socket_timeout=0.3)  # redis-py's default retry
    lim = Limiter(client, timeout_ms=timeout_ms, outage="deny")
    lim.peek("once", 10, 600_000)  # connected: the CHECK itself is what waits
    before = server.calls("slidewin.check")
    with Held(server):
        d = lim.check("once", 10, 600_000)
    assert settled(server, "slidewin.check", before + 1) == before + 1, "the server ran the CHECK once"
    assert entries(server.client(), "once") == 1, "charged once (the timed-out call did run)"
    assert (d.allowed, d.source) == (False, FALLBACK), d
    assert lim.stats()["decisions"]["fallback"] == {"timeout": 1}


def test_mcheck_and_undo_are_sent_once(server):
    lim = Limiter(redis.Redis(port=server.port, socket_timeout=0.3), timeout_ms=None)
    lim.peek("{o}a", 10, 600_000)  # connected
    before = server.calls("slidewin.mcheck")
    with Held(server):
        d = lim.check_all([("{o}a", 10, 600_000), ("{o}b", 10, 600_000)], cost=3)
    assert settled(server, "slidewin.mcheck", before + 1) == before + 1
    assert entries(server.client(), "{o}a") == entries(server.client(), "{o}b") == 3
    assert d.source == FALLBACK
    allowed = lim.check("{o}u", 10, 600_000, cost=2)
    assert allowed.allowed
    before = server.calls("slidewin.undo")
    with Held(server):
        with pytest.raises(redis.exceptions.TimeoutError):
            lim.undo(allowed)  # raised to the caller: it may have run
    assert settled(server, "slidewin.undo", before + 1) == before + 1
    assert entries(server.client(), "{o}u") == 0


def test_async_check_is_sent_once(server):
    async def run():
        lim = AsyncLimiter(redis.asyncio.Redis(port=server.port, socket_timeout=0.3), timeout_ms=None)
        await lim.peek("async-once", 10, 600_000)  # connected
        held.start()
        d = await lim.check("async-once", 10, 600_000)
        await lim.aclose()
        return d

    before = server.calls("slidewin.check")
    held = Held(server)
    try:
        d = asyncio.run(run())
    finally:
        held.__exit__()
    assert settled(server, "slidewin.check", before + 1) == before + 1
    assert entries(server.client(), "async-once") == 1
    assert d.source == FALLBACK


@pytest.fixture(params=SERVERS[:1] + SERVERS[-1:])
def cluster(request):
    c = Cluster(request.param)
    yield c
    c.close()


def test_a_cluster_check_is_sent_once(cluster):
    # RedisCluster retries a command after a timeout on its own (its
    # `retry`, 3 by default), after reading the slots again.
    key = "cl-once"
    _, node, _, _, _ = cluster.owner(key)
    rc = RedisCluster(host="127.0.0.1", port=node.port, socket_timeout=0.3)
    lim = Limiter(rc, timeout_ms=None)
    assert lim.peek(key, 10, 600_000).allowed  # connected to the key's node
    before = node.calls("slidewin.check")
    with Held(node):
        d = lim.check(key, 10, 600_000)
    assert settled(node, "slidewin.check", before + 1) == before + 1
    assert entries(node.client(), key) == 1
    assert d.source == FALLBACK, d
    assert lim.check(key, 10, 600_000).remaining == 8, "Redis answers again"
    rc.close()
