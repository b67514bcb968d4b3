"""Concurrency leases: at most `limit` holders of a resource at once, each
holding one slot until it releases it or its lease runs out.

    from slidewin.lease import Lease
    with Lease(redis.Redis(), "gpu:pool", limit=4, ttl_ms=30_000) as lease:
        for chunk in work:
            lease.ensure()          # raises LeaseLost once the lease may be gone
            process(chunk)

A lease is a charge made with a request id in a sliding window as long as
the lease (docs/leases.md):

- acquire: `SLIDEWIN.CHECK key limit ttl_ms ID <lease-id> DETAIL`; a full
  pool refuses and says when the oldest lease runs out (`retry_after_ms`);
- renew: one script that gives the charge back and takes it again at the
  server's now (`SLIDEWIN.UNDO key ID <lease-id>` then the same CHECK),
  atomically: a slot still held is always taken back; a lease that already
  ran out is taken again only if a slot is free;
- release: `SLIDEWIN.UNDO key ID <lease-id>` (idempotent: sent again, it
  removes nothing);
- a holder that crashes stops renewing: its slot frees itself `ttl_ms` after
  its last acquire or renewal.

The holder's own deadline is `ttl_ms` after it *sent* the acquire or the
renewal that succeeded, earlier than the server's (which counts from when it
ran the call): once past it, `valid` is false and `ensure()` raises, before
the server can give the slot to anyone else. The pool never holds more than
`limit` leases; a holder that keeps working past its deadline (a process
stopped longer than the lease) is the only way to have more at work, which
is why work should call `ensure()` between steps.

Charging commands are sent once (the limiter's own connections, no retry);
there is no outage policy: a lease is never granted without the server.
"""

import asyncio
import os
import threading
import time
from typing import Optional

from .connections import AsyncLink, Link
from .errors import SlidewinError

# Gives the charge under ARGV[3] back and takes it again now, in one step:
# UNDO then CHECK ... ID ... DETAIL (the CHECK's reply).
RENEW_SCRIPT = """
redis.call('SLIDEWIN.UNDO', KEYS[1], 'ID', ARGV[3])
return redis.call('SLIDEWIN.CHECK', KEYS[1], ARGV[1], ARGV[2], 'ID', ARGV[3], 'DETAIL')
"""


class LeaseUnavailable(SlidewinError):
    """Every slot is held (after waiting, if asked to wait)."""

    def __init__(self, key, retry_after_ms: int):
        super().__init__(f"slidewin: no free lease on {key!r} (the next frees in {retry_after_ms} ms)")
        self.retry_after_ms = retry_after_ms


class LeaseLost(SlidewinError):
    """The lease ran out (or a renewal found it taken): stop the work."""


def _new_id() -> str:
    return "lease:" + os.urandom(12).hex()


class _Base:
    def __init__(self, key, limit: int, ttl_ms: int, lease_id: Optional[str], renew_every_ms: Optional[int]):
        if not 1 <= limit or not 1 <= ttl_ms:
            raise ValueError("limit and ttl_ms must be positive")
        self.key = key
        self.limit = limit
        self.ttl_ms = ttl_ms
        self.id = lease_id or _new_id()
        # Renew a third of the way through: two more tries before it runs out.
        self.renew_every_ms = renew_every_ms or max(1, ttl_ms // 3)
        if self.renew_every_ms >= ttl_ms:
            raise ValueError("renew_every_ms must be shorter than ttl_ms")
        self._deadline = 0.0  # time.monotonic() past which the lease may be gone
        self.renewals = 0

    def _check_args(self):
        return ["SLIDEWIN.CHECK", self.key, self.limit, self.ttl_ms, "ID", self.id, "DETAIL"]

    def _renew_args(self):
        return ["EVAL", RENEW_SCRIPT, 1, self.key, self.limit, self.ttl_ms, self.id]

    def _granted(self, reply, sent_at: float) -> bool:
        allowed = bool(reply[0])
        self._deadline = sent_at + self.ttl_ms / 1000 if allowed else 0.0
        return allowed

    @property
    def valid(self) -> bool:
        """Held, and surely still held on the server."""
        return time.monotonic() < self._deadline

    @property
    def remaining_s(self) -> float:
        """Seconds until the lease may run out (0 when not held)."""
        return max(0.0, self._deadline - time.monotonic())

    def ensure(self) -> None:
        """Raises LeaseLost unless the lease is valid."""
        if not self.valid:
            raise LeaseLost(f"slidewin: the lease {self.id} on {self.key!r} is not held")


class Lease(_Base):
    """One holder's lease on `key` (sync redis-py client). Use it as a
    context manager (acquire, renew in a background thread, release), or
    call acquire(), renew() and release() yourself."""

    def __init__(self, client, key, limit: int, ttl_ms: int, lease_id: Optional[str] = None,
                 renew_every_ms: Optional[int] = None, timeout_ms: Optional[int] = 1000, wait_s: float = 0.0):
        super().__init__(key, limit, ttl_ms, lease_id, renew_every_ms)
        self._link = Link(client, timeout_ms)
        self.wait_s = wait_s
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def acquire(self, wait_s: Optional[float] = None) -> bool:
        """Takes a slot; with `wait_s`, waits up to that long for one (until
        the oldest lease runs out, as the server says). True when held."""
        end = time.monotonic() + (self.wait_s if wait_s is None else wait_s)
        while True:
            sent_at = time.monotonic()
            reply = self._link.execute(self.key, self._check_args())
            if self._granted(reply, sent_at):
                return True
            retry_s = reply[3] / 1000 if reply[3] > 0 else 0.05
            if time.monotonic() + retry_s > end:
                self.last_retry_after_ms = reply[3]
                return False
            time.sleep(retry_s)

    def renew(self) -> bool:
        """Extends the lease to `ttl_ms` from now. False when it was lost
        (ran out and its slot was taken): stop the work."""
        sent_at = time.monotonic()
        ok = self._granted(self._link.execute(self.key, self._renew_args()), sent_at)
        self.renewals += ok
        return ok

    def release(self) -> int:
        """Gives the slot back (0 when the lease had already run out)."""
        self._deadline = 0.0
        return int(self._link.execute(self.key, ["SLIDEWIN.UNDO", self.key, "ID", self.id]))

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.renew_every_ms / 1000):
            try:
                if not self.renew():
                    return
            except Exception:  # noqa: BLE001 - tried again until the deadline
                if not self.valid:
                    return

    def __enter__(self) -> "Lease":
        if not self.acquire():
            raise LeaseUnavailable(self.key, getattr(self, "last_retry_after_ms", 0))
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew_loop, name=f"slidewin-lease-{self.id}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.release()


class AsyncLease(_Base):
    """The same for an asyncio client (`redis.asyncio.Redis`): `async with`,
    renewing in a task."""

    def __init__(self, client, key, limit: int, ttl_ms: int, lease_id: Optional[str] = None,
                 renew_every_ms: Optional[int] = None, timeout_ms: Optional[int] = 1000, wait_s: float = 0.0):
        super().__init__(key, limit, ttl_ms, lease_id, renew_every_ms)
        self._link = AsyncLink(client, timeout_ms)
        self.wait_s = wait_s
        self._task: Optional[asyncio.Task] = None

    async def acquire(self, wait_s: Optional[float] = None) -> bool:
        end = time.monotonic() + (self.wait_s if wait_s is None else wait_s)
        while True:
            sent_at = time.monotonic()
            reply = await self._link.execute(self.key, self._check_args())
            if self._granted(reply, sent_at):
                return True
            retry_s = reply[3] / 1000 if reply[3] > 0 else 0.05
            if time.monotonic() + retry_s > end:
                self.last_retry_after_ms = reply[3]
                return False
            await asyncio.sleep(retry_s)

    async def renew(self) -> bool:
        sent_at = time.monotonic()
        ok = self._granted(await self._link.execute(self.key, self._renew_args()), sent_at)
        self.renewals += ok
        return ok

    async def release(self) -> int:
        self._deadline = 0.0
        return int(await self._link.execute(self.key, ["SLIDEWIN.UNDO", self.key, "ID", self.id]))

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.renew_every_ms / 1000)
            try:
                if not await self.renew():
                    return
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - tried again until the deadline
                if not self.valid:
                    return

    async def __aenter__(self) -> "AsyncLease":
        if not await self.acquire():
            raise LeaseUnavailable(self.key, getattr(self, "last_retry_after_ms", 0))
        self._task = asyncio.ensure_future(self._renew_loop())
        return self

    async def __aexit__(self, *exc) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self.release()
