"""`AsyncLimiter`: `Limiter` for `redis.asyncio` clients (`Redis` on any
pool, Sentinel's `master_for`, `RedisCluster`), with the same policy,
cache, breaker, backends and counts: each call is the same generator of
`steps` as `Limiter`'s, driven by awaiting each step."""

from typing import Callable, Iterable, Optional, Tuple

import redis
import redis.asyncio

from . import steps as st
from .backends import Backend
from .calls import CHECK, CHECK_ALL, _rule, _rules, reservation_id
from .calls import PEEK, _key, new_request_id, request_id_of, with_request_id  # noqa: F401 (imported here before)
from .connections import AsyncLink
from .decision import Decision, Rule
from .errors import SlidewinModuleError  # noqa: F401 (imported here before)
from .outage import RECONNECT, resendable  # noqa: F401 (imported here before)
from .policy import Policy
from .reservation import AsyncReservation


class AsyncLimiter:
    """The asyncio twin of `Limiter`: `await limiter.check(...)`, with the
    same options, cache, breaker, retries, backends and error handling; its
    commands go, once each, on connections of its own (see
    `slidewin.connections`)."""

    def __init__(self, client, **options):
        self.policy = Policy(**options)
        self.link = AsyncLink(client, self.policy.timeout_ms)
        self.client = client
        self._cluster = self.link.cluster

    @classmethod
    def from_url(cls, url: str, **options) -> "AsyncLimiter":
        return cls(redis.asyncio.Redis.from_url(url), **options)

    def stats(self) -> dict:
        """As `Limiter.stats`."""
        return self.policy.snapshot()

    async def aclose(self) -> None:
        """Closes the limiter's connections (the client given stays open)."""
        await self.link.close()

    async def _run(self, steps):
        return await st.arun(steps, self.link)

    async def _send(self, key, build: Callable[[Backend], list]):
        """As `Limiter._send`."""
        return await self._run(st.send(self.policy, key, build))

    async def _send_again_once(self, key, build: Callable[[Backend], list]):
        """As `Limiter._send_again_once`."""
        return await self._run(st.send_again_once(self.policy, key, build))

    async def _decide(self, kind: str, rules: Tuple[Rule, ...], cost: int, request_id=None, given: bool = False,
                      shadow: bool = False) -> Decision:
        """As `Limiter._decide`, awaiting Redis."""
        return await self._run(st.decide(self.policy, self._cluster, kind, rules, cost, request_id, given, shadow))

    async def check(self, key, limit: int, window_ms: int, cost: int = 1, request_id=None,
                    shadow: Optional[bool] = None) -> Decision:
        """As `Limiter.check`."""
        return await self._run(st.check(self.policy, self._cluster, key, limit, window_ms, cost, request_id, shadow))

    async def check_all(self, rules: Iterable, cost: int = 1, request_id=None, shadow: Optional[bool] = None) -> Decision:
        """As `Limiter.check_all`."""
        return await self._run(st.check_all(self.policy, self._cluster, rules, cost, request_id, shadow))

    def reserve(self, key, limit: int, window_ms: int, cost: int, request_id=None,
                shadow: Optional[bool] = None) -> AsyncReservation:
        """As `Limiter.reserve`: `async with limiter.reserve(...) as r:`."""
        rid, given = reservation_id(request_id)
        return AsyncReservation(self, CHECK, (_rule(key, limit, window_ms),), cost, rid, given, self.policy.shadow_of(shadow))

    def reserve_all(self, rules: Iterable, cost: int, request_id=None, shadow: Optional[bool] = None) -> AsyncReservation:
        """As `Limiter.reserve_all`."""
        rid, given = reservation_id(request_id)
        return AsyncReservation(self, CHECK_ALL, _rules(rules), cost, rid, given, self.policy.shadow_of(shadow))

    async def settle(self, key, request_id, cost: int) -> Optional[int]:
        """As `Limiter.settle`: the units now charged, or None."""
        return await self._run(st.settle(self.policy, key, request_id, cost))

    async def peek(self, key, limit: int, window_ms: int, cost: int = 1) -> Decision:
        """As `Limiter.peek`."""
        return await self._run(st.peek(self.policy, self._cluster, key, limit, window_ms, cost))

    async def undo(self, target, request_id=None) -> int:
        """As `Limiter.undo`: a decision's members sent once per key (a
        decision without members is a no-op that returns 0), or a charge
        by its request id, sent once more after a lost connection."""
        return await self._run(st.undo(self.policy, target, request_id))


__all__ = ["AsyncLimiter"]
