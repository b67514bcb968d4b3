"""What the limiters answer when Redis replies with an error, or does not
reply, against real servers made to fail for real: a hung server (SIGSTOP),
a server loading its dataset, a replica (READONLY, MASTERDOWN), a failover
whose endpoint moved, writes refused (OOM, NOREPLICAS, MISCONF), and the
async limiter under `deny` and `local`. Only what concerns every key
(connection loss, timeouts, LOADING, MASTERDOWN, a READONLY that persists)
opens the breaker."""

import asyncio
import os
import shutil
import signal
import socket
import threading
import time

import pytest
import redis
import redis.asyncio
from conftest import Server, free_port
from redis.backoff import NoBackoff
from redis.retry import Retry

from slidewin import ALLOW, DENY, FALLBACK, FUNCTION, LOCAL, REDIS, AsyncLimiter, Limiter

DEADLINE_S = 15


def eventually(what, predicate, deadline_s=DEADLINE_S, pause=0.02):
    """Polls `predicate` until it is true; fails after the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"not within {deadline_s} s: {what}")
        time.sleep(pause)


def within(seconds, fn):
    """Runs `fn` in a thread; fails (instead of hanging) if it has not
    returned after `seconds`."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised below
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"the call did not return within {seconds} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def raw(srv):
    """A client without retries, to ask the server what it is doing."""
    return redis.Redis(port=srv.port, socket_timeout=2, retry=Retry(NoBackoff(), 0))


class Endpoint:
    """A TCP address that forwards each new connection to the current
    master, as a virtual IP or a DNS name that failover moves: connections
    already open stay with the node they reached."""

    def __init__(self, target_port: int):
        self.target = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self._listener.close()
        for s in self._sockets:
            s.close()


def redis_answers(lim, key="probe"):
    """Polls until a check on `key` is answered by Redis again."""
    return eventually(f"Redis answers {key}", lambda: lim.check(key, 1_000, 60_000).source in (REDIS, FUNCTION))


# -- timeouts: a hung server ---------------------------------------------


def test_a_hung_server_times_out_into_the_policy_and_opens_the_breaker(server):
    lim = Limiter(server.client(), outage=DENY, timeout_ms=200, breaker_pause_ms=300)
    local = AsyncLimiter(redis.asyncio.Redis(port=server.port), outage=LOCAL, timeout_ms=200)

    async def async_calls():
        out = [await local.check("hung", 2, 60_000) for _ in range(3)]
        return out

    assert lim.check("hung", 5, 60_000).source == REDIS
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        # The server accepts nothing and answers nothing: the reply times
        # out (generous deadline: the test fails instead of hanging).
        d = within(10, lambda: lim.check("hung", 5, 60_000))
        assert (d.allowed, d.source) == (False, FALLBACK)
        assert lim.policy.breaker.state == "open"
        # While open, the calls are answered without waiting.
        assert within(10, lambda: lim.check("other", 5, 60_000)).source == FALLBACK
        # The async limiter times out the same way, into its local window.
        answers = within(10, lambda: asyncio.run(asyncio.wait_for(async_calls(), 10)))
        assert [(a.allowed, a.source) for a in answers] == [(True, FALLBACK), (True, FALLBACK), (False, FALLBACK)]
        assert local.policy.breaker.state == "open"
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    redis_answers(lim)
    assert lim.policy.breaker.state == "closed"


# -- LOADING: a restarting server ----------------------------------------


def test_loading_is_an_outage_for_every_key(server):
    c = raw(server)
    c.execute_command("DEBUG", "POPULATE", 50_000)
    c.save()
    server.stop()
    # 100 µs per key: 5 s of loading, ended below by CONFIG SET.
    server.start(extra=["--key-load-delay", "100", "--loading-process-events-interval-bytes", "1024"], wait=False)

    def loading():
        try:
            raw(server).ping()
            pytest.fail("the dataset loaded before the test could see LOADING")
        except redis.exceptions.BusyLoadingError:
            return True
        except redis.exceptions.ConnectionError:
            return False  # not listening yet

    eventually("the server replies LOADING", loading)
    lim = Limiter(server.client(), outage=ALLOW, timeout_ms=1000, breaker_pause_ms=200)
    d = lim.check("k", 1, 60_000)
    assert (d.allowed, d.source) == (True, FALLBACK)
    assert lim.policy.breaker.state == "open", "LOADING concerns every key"
    raw(server).config_set("key-load-delay", 0)  # CONFIG is served while loading
    redis_answers(lim)
    assert raw(server).dbsize() == 50_001


# -- READONLY and MASTERDOWN: replicas, failover -------------------------


def test_a_replica_answers_readonly_the_policy_answers_and_the_breaker_opens(server):
    replica = Server(server.name)
    try:
        raw(replica).replicaof("127.0.0.1", server.port)
        lim = Limiter(replica.client(), outage=DENY, breaker_pause_ms=60_000)
        before = replica.cmdstat("slidewin.check", "rejected_calls")
        d = lim.check("k", 5, 60_000)
        assert (d.allowed, d.source) == (False, FALLBACK)
        assert replica.cmdstat("slidewin.check", "rejected_calls") == before + 2, "tried once more on a fresh connection"
        assert lim.policy.breaker.state == "open", "every key is on that node"
        assert lim.check("other", 5, 60_000).source == FALLBACK
        assert replica.cmdstat("slidewin.check", "rejected_calls") == before + 2, "the breaker answered"
        # PEEK is a read: a replica serves it.
        assert Limiter(replica.client()).peek("k", 5, 60_000).source == REDIS
    finally:
        replica.close()


def test_after_a_failover_readonly_is_retried_on_a_fresh_connection(server):
    new = Server(server.name)
    endpoint = Endpoint(server.port)
    try:
        raw(new).replicaof("127.0.0.1", server.port)
        eventually("the replica is in sync", lambda: raw(new).info("replication").get("master_link_status") == "up")
        # A generous timeout: every connection goes through the forwarder's
        # Python threads, slow on a loaded machine; READONLY is under test.
        lim = Limiter(redis.Redis(port=endpoint.port), outage=DENY, timeout_ms=2000)
        alim = AsyncLimiter(redis.asyncio.Redis(port=endpoint.port), outage=DENY, timeout_ms=2000)

        async def acheck():
            return await alim.check("k", 5, 60_000)

        # One event loop for the async limiter: its connections live on it.
        loop = asyncio.new_event_loop()
        try:
            assert lim.check("k", 5, 60_000).allowed
            first = loop.run_until_complete(acheck())
            assert first.allowed and first.source == REDIS
            eventually("the entries reached the replica", lambda: raw(new).zcard("k") == 2)
            # Failover: the replica is promoted, the old master demoted. It
            # keeps the limiters' connections open and answers READONLY on
            # them; the endpoint sends new connections to the new master.
            raw(new).replicaof("no", "one")
            raw(server).replicaof("127.0.0.1", new.port)
            endpoint.target = new.port
            d = lim.check("k", 5, 60_000)
            assert (d.allowed, d.source, d.remaining) == (True, REDIS, 2), (d, lim.stats())
            a = loop.run_until_complete(acheck())
            assert (a.allowed, a.source, a.remaining) == (True, REDIS, 1), (a, alim.stats())
            assert lim.policy.breaker.state == alim.policy.breaker.state == "closed"
            assert raw(new).zcard("k") == 4
            loop.run_until_complete(alim.aclose())
        finally:
            loop.close()
    finally:
        endpoint.close()
        new.close()


def test_a_stale_replica_answers_masterdown_an_outage(server):
    stale = Server(server.name, args=["--replica-serve-stale-data", "no"])
    try:
        raw(stale).replicaof("127.0.0.1", free_port())  # a master that is not there
        lim = Limiter(stale.client(), outage=ALLOW, breaker_pause_ms=60_000)
        d = lim.peek("k", 5, 60_000)
        assert (d.allowed, d.source) == (True, FALLBACK)
        assert lim.policy.breaker.state == "open", "the replica serves no key"
    finally:
        stale.close()


# -- writes refused: OOM, NOREPLICAS, MISCONF -----------------------------


def refuse_writes(srv, how):
    """Makes the server refuse writes for real; returns the undo."""
    c = raw(srv)
    if how == "OOM":
        c.config_set("maxmemory", 1)  # noeviction: nothing can be freed
        return lambda: c.config_set("maxmemory", 0)
    if how == "NOREPLICAS":
        c.config_set("min-replicas-to-write", 1)  # and no replica
        return lambda: c.config_set("min-replicas-to-write", 0)
    assert how == "MISCONF"
    # A snapshot that cannot be written: its directory is gone.
    c.config_set("save", "3600 1")
    shutil.rmtree(srv.dir)
    c.bgsave()
    eventually("the snapshot failed", lambda: c.info("persistence").get("rdb_last_bgsave_status") == "err")
    return lambda: c.config_set("stop-writes-on-bgsave-error", "no")


@pytest.mark.parametrize("how", ["OOM", "NOREPLICAS", "MISCONF"])
def test_refused_writes_get_the_policy_without_opening_the_breaker(any_server, how):
    srv = any_server
    src = REDIS if srv.module else FUNCTION
    command = srv.check_command()
    limiters = {p: Limiter(srv.client(), outage=p) for p in (DENY, ALLOW, LOCAL)}
    alim = AsyncLimiter(redis.asyncio.Redis(port=srv.port), outage=DENY)
    loop = asyncio.new_event_loop()  # the async limiter's connections live on it
    try:
        # Before: Redis answers (and the FUNCTION library gets loaded).
        assert all(lim.check("before", 5, 60_000).source == src for lim in limiters.values())
        assert loop.run_until_complete(alim.check("before", 5, 60_000)).source == src
        undo = refuse_writes(srv, how)
        try:
            before = srv.cmdstat(command, "rejected_calls")
            deny = [limiters[DENY].check("k", 3, 60_000) for _ in range(3)]
            assert all((d.allowed, d.source) == (False, FALLBACK) for d in deny), deny
            allow = [limiters[ALLOW].check("k", 3, 60_000) for _ in range(5)]
            assert all((d.allowed, d.source) == (True, FALLBACK) for d in allow)
            local = [limiters[LOCAL].check("k", 3, 60_000).allowed for _ in range(5)]
            assert local == [True, True, True, False, False], "the exact per-instance window"
            a = loop.run_until_complete(alim.check("k", 3, 60_000))
            assert (a.allowed, a.source) == (False, FALLBACK)
            assert srv.cmdstat(command, "rejected_calls") == before + 14, "every call asked Redis: no breaker"
            assert all(lim.policy.breaker.state == "closed" for lim in limiters.values())
            assert alim.policy.breaker.state == "closed"
            # Reads still work.
            assert limiters[DENY].peek("k", 3, 60_000).source == src
        finally:
            undo()
        # Writes are back: Redis answers at once (no breaker pause to wait out).
        for lim in limiters.values():
            d = lim.check("k", 3, 60_000)
            assert (d.allowed, d.source) == (True, src)
        loop.run_until_complete(alim.aclose())
    finally:
        loop.close()


# -- the async limiter under deny and local, with the server killed -------


@pytest.mark.parametrize("policy", [DENY, LOCAL])
def test_async_outage_policies(server, policy):
    async def run():
        lim = AsyncLimiter(redis.asyncio.Redis(port=server.port), outage=policy, timeout_ms=200, breaker_pause_ms=200)
        ok = await lim.check("k", 3, 60_000)
        server.kill()
        down = [await lim.check("k", 3, 60_000) for _ in range(5)]
        peek = await lim.peek("k", 3, 60_000)
        opened = lim.policy.breaker.opened
        server.start()
        deadline = time.monotonic() + DEADLINE_S
        back = None
        while time.monotonic() < deadline:
            back = await lim.check("after", 3, 60_000)
            if back.source == REDIS:
                break
            await asyncio.sleep(0.05)
        await lim.aclose()
        return ok, down, peek, opened, back

    ok, down, peek, opened, back = asyncio.run(run())
    assert ok.source == REDIS
    assert all(d.source == FALLBACK for d in down)
    allowed = [d.allowed for d in down]
    if policy == DENY:
        assert allowed == [False] * 5 and not peek.allowed
        assert all(d.retry_after_ms == 200 for d in down), "the breaker's pause"
    else:
        assert allowed == [True, True, True, False, False], "the exact per-instance window"
        assert peek.allowed and peek.source == FALLBACK
    assert opened >= 1
    assert back is not None and back.source == REDIS, "Redis answers once it is back"
