"""TRYAGAIN during a real slot migration, on a two-master cluster started
here (each server of the suite, with the module): a multi-key check whose
keys the migration split between the two nodes gets TRYAGAIN; the limiter
retries it briefly, answers that call with the outage policy, keeps the
breaker closed, and every other key goes on being answered by Redis. Once
the migration completes, the same call succeeds."""

import asyncio
import time

import pytest
import redis
import redis.asyncio
from conftest import SERVERS, Server, free_port
from redis.cluster import RedisCluster

from slidewin import DENY, FALLBACK, REDIS, AsyncLimiter, Limiter

DEADLINE_S = 20


def eventually(what, predicate, deadline_s=DEADLINE_S):
    end = time.monotonic() + deadline_s
    while not predicate():
        if time.monotonic() > end:
            pytest.fail(f"not within {deadline_s} s: {what}")
        time.sleep(0.05)


class Cluster:
    """Two cluster-enabled masters sharing the 16384 slots, no replicas."""

    def __init__(self, name: str):
        self.nodes = []
        for _ in range(2):
            bus = free_port()
            self.nodes.append(Server(name, args=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                                 "--cluster-port", str(bus), "--cluster-node-timeout", "5000"]))
            self.nodes[-1].bus = bus
        a, b = (n.client() for n in self.nodes)
        a.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 8191)
        b.execute_command("CLUSTER", "ADDSLOTSRANGE", 8192, 16383)
        a.execute_command("CLUSTER", "SET-CONFIG-EPOCH", 1)
        b.execute_command("CLUSTER", "SET-CONFIG-EPOCH", 2)
        a.execute_command("CLUSTER", "MEET", "127.0.0.1", self.nodes[1].port, self.nodes[1].bus)
        for n in self.nodes:
            eventually(f"node {n.port} sees cluster_state:ok",
                       lambda n=n: "cluster_state:ok" in n.client().execute_command("CLUSTER", "INFO"))
            eventually(f"node {n.port} knows both masters",
                       lambda n=n: len(n.client().execute_command("CLUSTER", "SLOTS")) == 2)
        self.ids = [n.client().execute_command("CLUSTER", "MYID") for n in self.nodes]

    def owner(self, key: str):
        slot = self.nodes[0].client().execute_command("CLUSTER", "KEYSLOT", key)
        i = 0 if slot <= 8191 else 1
        return slot, self.nodes[i], self.nodes[1 - i], self.ids[i], self.ids[1 - i]

    def close(self):
        for n in self.nodes:
            n.close()


@pytest.fixture(params=SERVERS)
def cluster(request):
    c = Cluster(request.param)
    yield c
    c.close()


def test_tryagain_during_a_slot_migration_is_not_an_outage(cluster):
    a, b = "{mig}:ip", "{mig}:phone"
    rules = [(a, 10, 600_000), (b, 10, 600_000)]
    slot, source, target, source_id, target_id = cluster.owner(a)
    other_here = next(f"other:{i}" for i in range(1000) if cluster.owner(f"other:{i}")[1] is source)
    other_there = next(f"other:{i}" for i in range(1000) if cluster.owner(f"other:{i}")[1] is target)

    rc = RedisCluster(host="127.0.0.1", port=source.port, socket_timeout=2)
    lim = Limiter(rc, outage=DENY)  # a cluster client (redis-py retries TRYAGAIN itself)
    plain = Limiter(redis.Redis(port=source.port), outage=DENY)  # one node, a plain client
    aplain = AsyncLimiter(redis.asyncio.Redis(port=source.port), outage=DENY)
    assert lim.check_all(rules).allowed, "both keys exist on the source"

    # The migration: the slot importing on the target, migrating on the
    # source, and one of the two keys moved.
    t, s = target.client(), source.client()
    t.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
    s.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", b)
    assert s.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 1

    rejected = source.cmdstat("slidewin.mcheck", "rejected_calls")
    # The plain client gets TRYAGAIN itself: a few tries within timeout_ms,
    # then the outage policy for that call; the breaker stays closed.
    d = plain.check_all(rules)
    assert (d.allowed, d.source) == (False, FALLBACK), d
    tries = source.cmdstat("slidewin.mcheck", "rejected_calls") - rejected
    assert 2 <= tries <= 5, f"retried a few times, not once and not forever: {tries}"
    assert plain.policy.breaker.state == "closed"
    assert plain.check(other_here, 5, 60_000).source == REDIS, "other keys are still answered by Redis"

    async def async_calls():
        split = await aplain.check_all(rules)
        other = await aplain.check(other_here, 5, 60_000)
        await aplain.aclose()
        return split, other

    split, other = asyncio.run(async_calls())
    assert (split.allowed, split.source) == (False, FALLBACK)
    assert other.source == REDIS and aplain.policy.breaker.state == "closed"

    # The cluster client retries TRYAGAIN by itself and then gives up on
    # that slot ("TTL exhausted."): the policy answers, nothing opens.
    d = lim.check_all(rules)
    assert (d.allowed, d.source) == (False, FALLBACK), d
    assert lim.policy.breaker.state == "closed"
    for key in (other_here, other_there):
        assert lim.check(key, 5, 60_000).source == REDIS, key
    # Nothing was written for the refused calls.
    asking = t.pipeline(transaction=False)
    asking.execute_command("ASKING")
    asking.zcard(b)
    assert s.zcard(a) == 1 and asking.execute()[1] == 1

    # The migration completes: the same call succeeds, on the target.
    s.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", a)
    t.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
    s.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
    done = lim.check_all(rules)
    assert (done.allowed, done.source) == (True, REDIS), done
    assert [p.remaining for p in done.per_rule] == [8, 8], "both keys came through the migration"
    assert lim.policy.breaker.state == "closed" and lim.policy.breaker.opened == 0
    rc.close()


def test_a_cluster_client_without_a_timeout_gets_the_limiters(cluster):
    import os
    import signal
    import threading

    key = "{hang}k"
    _, node, other, _, _ = cluster.owner(key)
    rc = RedisCluster(host="127.0.0.1", port=node.port)  # no socket_timeout: it would wait forever
    lim = Limiter(rc, outage=DENY, timeout_ms=300)
    assert lim.check(key, 5, 60_000).source == REDIS
    os.kill(node.proc.pid, signal.SIGSTOP)
    box = {}
    try:
        t = threading.Thread(target=lambda: box.setdefault("d", lim.check(key, 5, 60_000)), daemon=True)
        t.start()
        t.join(10)
        assert "d" in box, "the call did not return within 10 s"
    finally:
        os.kill(node.proc.pid, signal.SIGCONT)
    assert (box["d"].allowed, box["d"].source) == (False, FALLBACK)
    assert lim.stats()["decisions"]["fallback"] == {"timeout": 1}
    rc.close()
