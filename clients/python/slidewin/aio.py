"""`AsyncLimiter`: `Limiter` for `redis.asyncio` clients, with the same
policy, cache, breaker and fallback (see `limiter.py`)."""

from typing import Callable, Iterable, Tuple

import redis
import redis.asyncio

from . import decision as d
from .decision import Decision, Rule
from .limiter import ALLOW, LOCAL, OUTAGE_ERRORS, Commands, Policy, _rule, is_unknown_command, library_code, with_timeout


class AsyncLimiter:
    """The asyncio twin of `Limiter`: `await limiter.check(...)`."""

    def __init__(self, client, **options):
        self.policy = Policy(**options)
        self.client = with_timeout(client, self.policy.timeout_ms)
        self._cluster = isinstance(client, redis.asyncio.cluster.RedisCluster)

    @classmethod
    def from_url(cls, url: str, **options) -> "AsyncLimiter":
        return cls(redis.asyncio.Redis.from_url(url), **options)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def _load_library(self) -> None:
        args = ["FUNCTION", "LOAD", "REPLACE", library_code()]
        if self._cluster:
            # Every primary holds its own copy of the library.
            for node in self.client.get_primaries():
                await node.execute_command(*args)
        else:
            await self.client.execute_command(*args)

    async def _send(self, build: Callable[[bool], list]):
        if not self.policy.use_function:
            try:
                return await self.client.execute_command(*build(False))
            except redis.exceptions.ResponseError as e:
                if not (is_unknown_command(e) and self.policy.function_fallback):
                    raise
                await self._load_library()
                self.policy.use_function = True
                self.policy.source = d.FUNCTION
        return await self.client.execute_command(*build(True))

    async def _guarded(self, rules: Tuple[Rule, ...], cost: int, call) -> Decision:
        if not self.policy.breaker.allow():
            return self.policy.during_outage(rules, cost)
        try:
            decision = await call()
        except OUTAGE_ERRORS:
            self.policy.breaker.failure()
            return self.policy.during_outage(rules, cost)
        self.policy.breaker.success()
        return decision

    async def check(self, key: str, limit: int, window_ms: int, cost: int = 1) -> Decision:
        rule = _rule(key, limit, window_ms)
        cached = self.policy.cached((rule,))
        if cached:
            return cached

        async def call():
            reply = await self._send(lambda f: Commands.check(f, rule, cost))
            return d.from_detail(reply, rule, self.policy.source, reply[5])

        decision = await self._guarded((rule,), cost, call)
        if decision.source in (d.REDIS, d.FUNCTION):
            self.policy.remember(decision)
        return decision

    async def check_all(self, rules: Iterable, cost: int = 1) -> Decision:
        rules = tuple(r if isinstance(r, Rule) else _rule(*r) for r in rules)
        if not rules:
            raise ValueError("check_all needs at least one rule")
        cached = self.policy.cached(rules)
        if cached:
            return cached

        async def call():
            reply = await self._send(lambda f: Commands.check_all(f, rules, cost))
            return d.from_multi(reply, list(rules), self.policy.source)

        decision = await self._guarded(rules, cost, call)
        if decision.source in (d.REDIS, d.FUNCTION):
            self.policy.remember(decision)
        return decision

    async def peek(self, key: str, limit: int, window_ms: int, cost: int = 1) -> Decision:
        rule = _rule(key, limit, window_ms)
        cached = self.policy.cached((rule,))
        if cached:
            return cached
        if not self.policy.breaker.allow():
            return self._peek_outage(rule)
        try:
            reply = await self._send(lambda f: Commands.peek(f, rule, cost))
        except OUTAGE_ERRORS:
            self.policy.breaker.failure()
            return self._peek_outage(rule)
        self.policy.breaker.success()
        return d.from_detail(reply, rule, self.policy.source)

    def _peek_outage(self, rule: Rule) -> Decision:
        if self.policy.outage in (ALLOW, LOCAL):
            return d.admission((rule,), None, d.FALLBACK)
        return d.refusal((rule,), self.policy.breaker.pause_ms, d.FALLBACK)

    async def undo(self, decision: Decision) -> int:
        if not decision.allowed or not decision.members:
            return 0
        removed = 0
        for key in decision.keys:
            self.policy.cache.forget_key(key)
            removed += int(await self._send(lambda f, k=key: Commands.undo(f, k, decision.members)))
        return removed
