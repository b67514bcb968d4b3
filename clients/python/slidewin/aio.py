"""`AsyncLimiter`: `Limiter` for `redis.asyncio` clients (`Redis` on any
pool, Sentinel's `master_for`, `RedisCluster`), with the same policy,
cache, breaker, backends and counts (see `limiter.py`)."""

import asyncio
from typing import Callable, Iterable, Tuple

import redis
import redis.asyncio

from .connections import AsyncLink
from .decision import Decision, Rule
from .errors import SlidewinModuleError
from .limiter import CHECK, CHECK_ALL, PEEK, RECONNECT, Backend, Policy, _rule, _rules


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

    async def _decide(self, kind: str, rules: Tuple[Rule, ...], cost: int) -> Decision:
        """As `Limiter._decide`, awaiting Redis."""
        policy = self.policy
        early = policy.without_redis(kind, rules, cost)
        if early:
            return early
        attempt = policy.attempt()
        while True:
            since = policy.clock()
            try:
                reply, source = await self._send(rules[0].key, lambda b: policy.command(kind, b, rules, cost))
            except SlidewinModuleError:
                policy.breaker.success()
                raise
            except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException) as e:
                step = policy.after_error(e, kind, rules, cost, attempt, self._cluster)
                if step is None:
                    raise
                if isinstance(step, Decision):
                    return step
                if step == RECONNECT:
                    await self.link.reconnect()
                else:
                    await asyncio.sleep(step)
                continue
            except BaseException:
                # Cancelled, or an error of another kind: the probe is free.
                policy.breaker.release()
                raise
            return policy.answered(kind, reply, rules, cost, since, source)

    async def check(self, key, limit: int, window_ms: int, cost: int = 1) -> Decision:
        return await self._decide(CHECK, (_rule(key, limit, window_ms),), cost)

    async def check_all(self, rules: Iterable, cost: int = 1) -> Decision:
        return await self._decide(CHECK_ALL, _rules(rules), cost)

    async def peek(self, key, limit: int, window_ms: int, cost: int = 1) -> Decision:
        return await self._decide(PEEK, (_rule(key, limit, window_ms),), cost)

    async def undo(self, decision: Decision) -> int:
        """As `Limiter.undo`: sent once per key; a decision without members
        (a peek's, a refusal, an outage answer) is a no-op that returns 0."""
        if not decision.allowed or not decision.members:
            return 0
        removed = 0
        for key in decision.keys:
            self.policy.cache.forget_key(key)
            reply, _ = await self._send(key, lambda b, k=key: b.undo(k, decision.members))
            removed += int(reply)
        return removed
