"""`AsyncLimiter`: `Limiter` for `redis.asyncio` clients, with the same
policy, cache, breaker and fallback (see `limiter.py`)."""

import asyncio
from typing import Callable, Iterable, Tuple

import redis
import redis.asyncio

from .decision import Decision, Rule
from .limiter import (
    CHECK,
    CHECK_ALL,
    PEEK,
    RECONNECT,
    Commands,
    Policy,
    _rule,
    _rules,
    eval_code,
    eval_sha,
    library_code,
    no_function_command,
    with_timeout,
)


class AsyncLimiter:
    """The asyncio twin of `Limiter`: `await limiter.check(...)`, with the
    same options, cache, breaker, retries and error handling."""

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
        try:
            if self._cluster:
                # Every primary holds its own copy of the library.
                for node in self.client.get_primaries():
                    await node.execute_command(*args)
            else:
                await self.client.execute_command(*args)
        except redis.exceptions.RedisError as e:
            if not no_function_command(e):
                raise
            self.policy.use_eval = True

    async def _eval(self, fcall: list):
        """As `Limiter._eval`: EVAL follows only NOSCRIPT, which means the
        script did not run, so the call is never charged twice."""
        command = Commands.as_eval(fcall, eval_sha())
        try:
            return await self.client.execute_command(*command)
        except redis.exceptions.NoScriptError:
            return await self.client.execute_command("EVAL", eval_code(), *command[2:])

    async def _send(self, build: Callable[[bool], list]):
        if not self.policy.use_function:
            try:
                return await self.client.execute_command(*build(False))
            except redis.exceptions.RedisError as e:
                # Connection errors are RedisErrors too: re-raised here.
                if not self.policy.falls_back(e):
                    raise
                await self._load_library()
                self.policy.use_function = True
        if self.policy.use_eval:
            return await self._eval(build(True))
        return await self.client.execute_command(*build(True))

    async def _reconnect(self) -> None:
        """As `Limiter._reconnect`."""
        pool = getattr(self.client, "connection_pool", None)
        if pool is not None:
            await pool.disconnect(inuse_connections=False)

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
                reply = await self._send(lambda f: policy.command(kind, f, rules, cost))
            except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException) as e:
                step = policy.after_error(e, kind, rules, cost, attempt, self._cluster)
                if step is None:
                    raise
                if isinstance(step, Decision):
                    return step
                if step == RECONNECT:
                    await self._reconnect()
                else:
                    await asyncio.sleep(step)
                continue
            except BaseException:
                # Cancelled, or an error of another kind: the probe is free.
                policy.breaker.release()
                raise
            return policy.answered(kind, reply, rules, cost, since)

    async def check(self, key: str, limit: int, window_ms: int, cost: int = 1) -> Decision:
        return await self._decide(CHECK, (_rule(key, limit, window_ms),), cost)

    async def check_all(self, rules: Iterable, cost: int = 1) -> Decision:
        return await self._decide(CHECK_ALL, _rules(rules), cost)

    async def peek(self, key: str, limit: int, window_ms: int, cost: int = 1) -> Decision:
        return await self._decide(PEEK, (_rule(key, limit, window_ms),), cost)

    async def undo(self, decision: Decision) -> int:
        """As `Limiter.undo`: a decision without members (a peek's, a
        refusal, an outage answer) is a no-op that returns 0."""
        if not decision.allowed or not decision.members:
            return 0
        removed = 0
        for key in decision.keys:
            self.policy.cache.forget_key(key)
            removed += int(await self._send(lambda f, k=key: Commands.undo(f, k, decision.members)))
        return removed
