"""Concurrency leases (slidewin.lease) against real servers: each of the
four with the module, keys as sorted sets and as compact logs. At most
`limit` held, a release frees a slot at once, renewals keep a lease past its
ttl while others wait, a lost lease is reported, a holder killed mid-work
frees its slot when its lease runs out, contention never puts more than
`limit` holders at work, and the asyncio form does the same."""

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import redis
import redis.asyncio

from slidewin.lease import AsyncLease, Lease, LeaseLost, LeaseUnavailable
from conftest import entries

TTL_MS = 400


def test_at_most_limit_leases_and_a_release_frees_one(store_server):
    r = store_server.client()
    held = [Lease(r, "pool:a", 3, 60_000) for _ in range(3)]
    assert all(lease.acquire() for lease in held)
    assert all(lease.valid and lease.remaining_s > 59 for lease in held)
    extra = Lease(r, "pool:a", 3, 60_000)
    assert not extra.acquire()
    assert 59_000 < extra.last_retry_after_ms <= 60_000
    with pytest.raises(LeaseUnavailable) as e:
        with Lease(r, "pool:a", 3, 60_000):
            pass
    assert e.value.retry_after_ms > 59_000
    assert entries(r, "pool:a") == 3, "refusals hold nothing"
    assert held[1].release() == 1
    assert not held[1].valid
    assert held[1].release() == 0, "a release sent again removes nothing"
    assert extra.acquire() and entries(r, "pool:a") == 3


def test_renewals_keep_a_lease_past_its_ttl_while_others_wait(store_server):
    r = store_server.client()
    with Lease(r, "pool:b", 1, TTL_MS, renew_every_ms=100) as lease:
        other = Lease(r, "pool:b", 1, TTL_MS)
        for _ in range(5):
            time.sleep(0.25)
            lease.ensure()
            assert not other.acquire(), "the slot is still held"
        assert lease.renewals >= 8
    # Released on exit: free at once, not a ttl later.
    assert entries(r, "pool:b") == 0
    assert other.acquire()


def test_a_lease_that_ran_out_is_lost_if_its_slot_was_taken(store_server):
    r = store_server.client()
    first = Lease(r, "pool:c", 1, TTL_MS)
    assert first.acquire()
    time.sleep(TTL_MS / 1000 + 0.1)
    assert not first.valid
    with pytest.raises(LeaseLost):
        first.ensure()
    second = Lease(r, "pool:c", 1, TTL_MS)
    assert second.acquire()
    assert not first.renew(), "taken by another"
    assert not first.valid and entries(r, "pool:c") == 1
    assert second.renew() and second.valid
    # Ran out with its slot still free: the renewal takes it again.
    second_id = second.id
    time.sleep(TTL_MS / 1000 + 0.1)
    assert second.renew() and second.valid and second.id == second_id
    assert entries(r, "pool:c") == 1


HOLDER = """
import sys, time, redis
from slidewin.lease import Lease
with Lease(redis.Redis(port=int(sys.argv[1])), "pool:crash", 1, int(sys.argv[2]), renew_every_ms=100) as lease:
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_crashed_holders_lease_runs_out(store_server):
    r = store_server.client()
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(store_server.port), str(TTL_MS)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        time.sleep(0.6)  # renewed past its first ttl
        waiter = Lease(r, "pool:crash", 1, TTL_MS)
        assert not waiter.acquire(), "held (and renewed) by the other process"
        os.kill(proc.pid, signal.SIGKILL)  # no release, no more renewals
        killed = time.monotonic()
        proc.wait(10)
        assert waiter.acquire(wait_s=2), "free once the crashed holder's lease ran out"
        waited = time.monotonic() - killed
        assert waited <= TTL_MS / 1000 + 0.3, waited
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_contention_never_puts_more_than_limit_at_work(server):
    # Each holds its lease longer than the ttl: only renewals keep it.
    limit, workers, rounds = 3, 6, 2
    at_work, most, lock = [0], [0], threading.Lock()
    errors = []

    def worker():
        r = redis.Redis(port=server.port)
        try:
            for _ in range(rounds):
                with Lease(r, "pool:busy", limit, TTL_MS, renew_every_ms=100, wait_s=5):
                    with lock:
                        at_work[0] += 1
                        most[0] = max(most[0], at_work[0])
                    time.sleep(0.5)
                    with lock:
                        at_work[0] -= 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert most[0] == limit, most[0]
    assert entries(server.client(), "pool:busy") == 0


def test_async_lease(store_server):
    async def main():
        r = redis.asyncio.Redis(port=store_server.port)
        async with AsyncLease(r, "pool:async", 1, TTL_MS, renew_every_ms=100) as lease:
            await asyncio.sleep(0.7)
            lease.ensure()
            assert lease.renewals >= 4
            assert not await AsyncLease(r, "pool:async", 1, TTL_MS).acquire()
        assert entries(store_server.client(), "pool:async") == 0
        abandoned = AsyncLease(r, "pool:async", 1, TTL_MS)
        assert await abandoned.acquire()  # then never renewed nor released
        late = AsyncLease(r, "pool:async", 1, TTL_MS)
        assert await late.acquire(wait_s=2)
        assert not abandoned.valid and not await abandoned.renew()
        await r.aclose()

    asyncio.run(main())
