"""`AsyncLimiter`: `Limiter` for `redis.asyncio` clients (`Redis` on any
pool, Sentinel's `master_for`, `RedisCluster`), with the same policy,
cache, breaker, backends and counts (see `limiter.py`)."""

import asyncio
from typing import Callable, Iterable, Optional, Tuple

import redis
import redis.asyncio

from .connections import AsyncLink
from .decision import Decision, Rule
from .errors import SlidewinModuleError
from .limiter import (CHECK, CHECK_ALL, PEEK, RECONNECT, Backend, Policy, _key, _rule, _rules, new_request_id, request_id_of,
                      resendable, with_request_id)
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

    async def _send(self, key, build: Callable[[Backend], list]):
        """As `Limiter._send`."""
        chain = self.policy.chain
        while True:
            backend = chain.current()
            if not backend.installed:
                try:
                    await self.link.on_every_primary(backend.loads)
                    backend.install_error = None
                except redis.exceptions.ResponseError as e:
                    backend.install_error = e
                backend.installed = True
            try:
                reply = await self.link.execute(key, build(backend))
                backend.reinstalled = False
                return reply, backend.source
            except redis.exceptions.ResponseError as e:
                chain.after_error(backend, e)

    async def _send_again_once(self, key, build: Callable[[Backend], list]):
        """As `Limiter._send_again_once`."""
        try:
            return await self._send(key, build)
        except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException) as e:
            if not resendable(e):
                raise
        return await self._send(key, build)

    async def _decide(self, kind: str, rules: Tuple[Rule, ...], cost: int, request_id=None, given: bool = False) -> Decision:
        """As `Limiter._decide`, awaiting Redis."""
        policy = self.policy
        early = policy.without_redis(kind, rules, cost, cache=not given)
        if early:
            return with_request_id(early, request_id)
        attempt = policy.attempt()
        while True:
            since = policy.clock()
            try:
                reply, source = await self._send(rules[0].key, lambda b: policy.command(kind, b, rules, cost, request_id))
            except SlidewinModuleError:
                policy.breaker.success()
                raise
            except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException) as e:
                if request_id is not None and not attempt.resent and resendable(e):
                    attempt.resent = True
                    continue
                step = policy.after_error(e, kind, rules, cost, attempt, self._cluster)
                if step is None:
                    raise
                if isinstance(step, Decision):
                    return with_request_id(step, request_id)
                if step == RECONNECT:
                    await self.link.reconnect()
                else:
                    await asyncio.sleep(step)
                continue
            except BaseException:
                # Cancelled, or an error of another kind: the probe is free.
                policy.breaker.release()
                raise
            return policy.answered(kind, reply, rules, cost, since, source, request_id)

    async def check(self, key, limit: int, window_ms: int, cost: int = 1, request_id=None) -> Decision:
        """As `Limiter.check`."""
        rid, given = self.policy.request_id(request_id)
        return await self._decide(CHECK, (_rule(key, limit, window_ms),), cost, rid, given)

    async def check_all(self, rules: Iterable, cost: int = 1, request_id=None) -> Decision:
        """As `Limiter.check_all`."""
        rid, given = self.policy.request_id(request_id)
        return await self._decide(CHECK_ALL, _rules(rules), cost, rid, given)

    def reserve(self, key, limit: int, window_ms: int, cost: int, request_id=None) -> AsyncReservation:
        """As `Limiter.reserve`: `async with limiter.reserve(...) as r:`."""
        rid, given = (request_id_of(request_id), True) if request_id is not None else (new_request_id(), False)
        return AsyncReservation(self, CHECK, (_rule(key, limit, window_ms),), cost, rid, given)

    def reserve_all(self, rules: Iterable, cost: int, request_id=None) -> AsyncReservation:
        """As `Limiter.reserve_all`."""
        rid, given = (request_id_of(request_id), True) if request_id is not None else (new_request_id(), False)
        return AsyncReservation(self, CHECK_ALL, _rules(rules), cost, rid, given)

    async def settle(self, key, request_id, cost: int) -> Optional[int]:
        """As `Limiter.settle`: the units now charged, or None."""
        key, rid, cost = _key(key), request_id_of(request_id), int(cost)
        self.policy.gave_back(key)
        reply, _ = await self._send_again_once(key, lambda b: b.settle(key, rid, cost))
        units = int(reply)
        return None if units < 0 else units

    async def peek(self, key, limit: int, window_ms: int, cost: int = 1) -> Decision:
        return await self._decide(PEEK, (_rule(key, limit, window_ms),), cost)

    async def undo(self, target, request_id=None) -> int:
        """As `Limiter.undo`: a decision's members sent once per key (a
        decision without members is a no-op that returns 0), or a charge
        by its request id, sent once more after a lost connection."""
        keys, rid, members = self.policy.undo_plan(target, request_id)
        removed = 0
        for key in keys:
            self.policy.gave_back(key)
            if rid is None:
                reply, _ = await self._send(key, lambda b, k=key: b.undo(k, members))
            else:
                reply, _ = await self._send_again_once(key, lambda b, k=key: b.undo_id(k, rid))
            removed += int(reply)
        return removed
