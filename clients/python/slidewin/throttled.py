"""slidewin as a throttled-py rate limiter: ``using="slidewin"``.

Importing this module registers a limiter named ``slidewin`` with
throttled-py (https://pypi.org/project/throttled-py/), sync and async,
beside its built-in ones (``sliding_window`` is left as it is)::

    import slidewin.throttled  # registers "slidewin"
    from throttled import Throttled, per_min
    from throttled.store import RedisStore

    throttle = Throttled(using="slidewin", quota=per_min(5),
                         store=RedisStore(server="redis://127.0.0.1:6379/0"))
    result = throttle.limit("sms:203.0.113.7", cost=1)
    if result.limited:
        wait = result.state.retry_after      # seconds, exact

    # asyncio: the same with throttled.asyncio's Throttled and RedisStore,
    # and `await throttle.limit(...)`.

Each ``limit(key, cost)`` is one ``SLIDEWIN.CHECK key limit window_ms COST
cost DETAIL`` and each ``peek(key)`` one ``SLIDEWIN.PEEK key limit
window_ms DETAIL``, on the store's own Redis client (the server must load
the module), so the decision is slidewin's exact sliding log on the server
clock. ``limit`` is the quota's rate limit (``quota.get_limit()``; a
quota's ``burst`` is not used, as for throttled-py's sliding window) and
``window_ms`` its period in milliseconds. The key is throttled-py's, under
its own prefix (``throttled:v1:slidewin:<key>``, or ``<key_prefix>:v1:
slidewin:<key>``), so it never meets the keys of another algorithm.

The ``RateLimitState`` carries slidewin's DETAIL fields, in seconds:

- ``limit``: the quota's limit;
- ``remaining``: the calls that still fit in the window after this one;
- ``reset_after``: until the window holds no entry at all (0 when empty);
- ``retry_after``: 0 when allowed; otherwise the exact wait until the same
  call (same cost) would pass. A cost above the limit can never pass:
  slidewin replies -1 there, given here as ``math.inf``, so that
  ``Throttled(timeout=...)`` returns at once instead of retrying until its
  timeout (code that turns it into a ``Retry-After`` header must check for
  it: ``math.ceil(math.inf)`` raises). A peek's ``retry_after`` is the wait
  before a call of cost 1 passes.

A cost of 0 (throttled-py allows it) records nothing and is never limited:
it is answered by a ``SLIDEWIN.PEEK``. An error the server replies (the
module not loaded, a limit above ``slidewin.max-limit``, a window above
``slidewin.max-window-ms``, a key holding another type) raises
``throttled.exceptions.DataError`` (``SetUpError`` when the module is
missing or an ACL refuses the command) with the server's message, not
throttled-py's "store unavailable", which is kept for a server that cannot
be reached, a read-only replica, an OOM refusal and cluster errors. Only
throttled-py's Redis stores are supported (``MemoryStore`` raises
``SetUpError``): the decision is the server's.

Tested with throttled-py 3.5.0 (``pip install "slidewin[throttled]"``).
"""

import math
from datetime import timedelta
from typing import Sequence, Tuple

import redis.exceptions
from throttled import constants, exceptions
from throttled import store as sync_store
from throttled.asyncio import store as async_store
from throttled.asyncio.rate_limiter import BaseRateLimiter as AsyncBaseRateLimiter
from throttled.asyncio.rate_limiter import RateLimiterRegistry as AsyncRateLimiterRegistry
from throttled.rate_limiter import (
    BaseRateLimiter,
    BaseRateLimiterMixin,
    RateLimiterRegistry,
    RateLimitResult,
    RateLimitState,
)

__all__ = [
    "SLIDEWIN",
    "SlidewinRateLimiter",
    "AsyncSlidewinRateLimiter",
    "window_ms",
]

#: The name the limiter is registered under: ``Throttled(using=SLIDEWIN)``.
SLIDEWIN = "slidewin"

CHECK = "SLIDEWIN.CHECK"
PEEK = "SLIDEWIN.PEEK"

_LIMIT = constants.ATOMIC_ACTION_TYPE_LIMIT
_PEEK = constants.ATOMIC_ACTION_TYPE_PEEK


def window_ms(period: timedelta) -> int:
    """A quota's period in whole milliseconds (at least 1 ms)."""
    ms = round(period.total_seconds() * 1000)
    if ms < 1:
        raise exceptions.DataError(f"Invalid quota period: {period!r}, slidewin needs at least 1 ms.")
    return ms


def _server_error(command: str, exc: redis.exceptions.ResponseError) -> Exception:
    """What a server's error reply to `command` is raised as: a setting or
    an argument to fix, not an unreachable store (throttled-py wraps every
    RedisError as StoreUnavailableError)."""
    message = str(exc)
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return exceptions.SetUpError(
            f"{command}: the Redis user may not run it or touch the key (ACL: grant "
            f"+slidewin.check +slidewin.peek and the key pattern). Server: {message}"
        )
    if "unknown command" in message.lower():
        return exceptions.SetUpError(
            f"{command} is not known to the server: load the slidewin module "
            f"(--loadmodule libslidewin.so). Server: {message}"
        )
    return exceptions.DataError(f"{command}: {message}")


def _answered(exc: Exception) -> bool:
    """An error reply meaning a bad call or a missing permission (not an
    outage, a failover, a read-only replica or a full server, which stay
    throttled-py's StoreUnavailableError)."""
    return type(exc) in (redis.exceptions.ResponseError, redis.exceptions.NoPermissionError)


def _args(keys: Sequence[str], args: Sequence[int]) -> Tuple[str, list]:
    """(command, arguments) for `args` = (limit, window_ms, cost)."""
    limit, window, cost = (int(a) for a in args)
    if cost == 0:
        return PEEK, [PEEK, keys[0], limit, window, "DETAIL"]
    return CHECK, [CHECK, keys[0], limit, window, "COST", cost, "DETAIL"]


def _peek_args(keys: Sequence[str], args: Sequence[int]) -> list:
    limit, window = int(args[0]), int(args[1])
    return [PEEK, keys[0], limit, window, "DETAIL"]


class SlidewinCheckAction(sync_store.BaseRedisAtomicAction):
    """One SLIDEWIN.CHECK ... COST n DETAIL (PEEK for a cost of 0) on the
    store's Redis client; returns the five DETAIL integers."""

    TYPE = _LIMIT

    def do(self, keys, args):
        command, argv = _args(keys, args)
        try:
            reply = self._backend.get_client().execute_command(*argv)
        except redis.exceptions.ResponseError as e:
            if _answered(e):
                raise _server_error(command, e) from e
            raise
        return tuple(int(x) for x in reply[:5])


class SlidewinPeekAction(sync_store.BaseRedisAtomicAction):
    """One SLIDEWIN.PEEK ... DETAIL on the store's Redis client."""

    TYPE = _PEEK

    def do(self, keys, args):
        try:
            reply = self._backend.get_client().execute_command(*_peek_args(keys, args))
        except redis.exceptions.ResponseError as e:
            if _answered(e):
                raise _server_error(PEEK, e) from e
            raise
        return tuple(int(x) for x in reply[:5])


class AsyncSlidewinCheckAction(async_store.BaseRedisAtomicAction):
    """SlidewinCheckAction on throttled.asyncio's RedisStore."""

    TYPE = _LIMIT

    async def do(self, keys, args):
        command, argv = _args(keys, args)
        try:
            reply = await self._backend.get_client().execute_command(*argv)
        except redis.exceptions.ResponseError as e:
            if _answered(e):
                raise _server_error(command, e) from e
            raise
        return tuple(int(x) for x in reply[:5])


class AsyncSlidewinPeekAction(async_store.BaseRedisAtomicAction):
    """SlidewinPeekAction on throttled.asyncio's RedisStore."""

    TYPE = _PEEK

    async def do(self, keys, args):
        try:
            reply = await self._backend.get_client().execute_command(*_peek_args(keys, args))
        except redis.exceptions.ResponseError as e:
            if _answered(e):
                raise _server_error(PEEK, e) from e
            raise
        return tuple(int(x) for x in reply[:5])


def _seconds(ms: int) -> float:
    return ms / 1000.0


def _retry(ms: int) -> float:
    """retry_after in seconds: slidewin's -1 (never passes) as math.inf."""
    return math.inf if ms < 0 else ms / 1000.0


class SlidewinCoreMixin(BaseRateLimiterMixin):
    """What the sync and async limiters share: the name, the actions, the
    arguments, and the state from a DETAIL reply."""

    class Meta(BaseRateLimiterMixin.Meta):
        type = SLIDEWIN

    @classmethod
    def _supported_atomic_action_types(cls):
        return [_LIMIT, _PEEK]

    def _validate_registered_atomic_actions(self) -> None:
        if self._store.TYPE != constants.StoreType.REDIS.value:
            raise exceptions.SetUpError(
                f"the {SLIDEWIN} rate limiter runs on the server (SLIDEWIN.CHECK): "
                f"it needs throttled-py's RedisStore, not a {type(self._store).__name__}"
            )
        super()._validate_registered_atomic_actions()

    def _rule(self, key: str) -> Tuple[str, int, int]:
        return self._prepare_key(key), self.quota.get_limit(), window_ms(self.quota.rate.period)

    @staticmethod
    def _result(cost: int, detail) -> RateLimitResult:
        allowed, limit, remaining, retry, reset = detail
        # A cost of 0 was a PEEK (of cost 1): nothing recorded, never limited.
        limited = cost > 0 and not allowed
        return RateLimitResult(
            limited=limited,
            state_values=(limit, remaining, _seconds(reset), _retry(retry) if limited else 0.0),
        )

    @staticmethod
    def _state(detail) -> RateLimitState:
        _allowed, limit, remaining, retry, reset = detail
        return RateLimitState(limit=limit, remaining=remaining, reset_after=_seconds(reset), retry_after=_retry(retry))


class SlidewinRateLimiter(SlidewinCoreMixin, BaseRateLimiter):
    """throttled-py's rate limiter ``slidewin``: SLIDEWIN.CHECK / PEEK."""

    _DEFAULT_ATOMIC_ACTION_CLASSES = (SlidewinCheckAction, SlidewinPeekAction)

    def _limit(self, key: str, cost: int = 1) -> RateLimitResult:
        k, limit, window = self._rule(key)
        return self._result(cost, self._atomic_actions[_LIMIT].do([k], [limit, window, cost]))

    def _peek(self, key: str) -> RateLimitState:
        k, limit, window = self._rule(key)
        return self._state(self._atomic_actions[_PEEK].do([k], [limit, window]))


class AsyncSlidewinRateLimiter(SlidewinCoreMixin, AsyncBaseRateLimiter):
    """The same for throttled.asyncio (``await limit(...)``)."""

    _DEFAULT_ATOMIC_ACTION_CLASSES = (AsyncSlidewinCheckAction, AsyncSlidewinPeekAction)

    async def _limit(self, key: str, cost: int = 1) -> RateLimitResult:
        k, limit, window = self._rule(key)
        return self._result(cost, await self._atomic_actions[_LIMIT].do([k], [limit, window, cost]))

    async def _peek(self, key: str) -> RateLimitState:
        k, limit, window = self._rule(key)
        return self._state(await self._atomic_actions[_PEEK].do([k], [limit, window]))


# The metaclass registered both classes when they were made; make sure they
# are the ones found under the name.
if RateLimiterRegistry.get(SLIDEWIN) is not SlidewinRateLimiter or (
    AsyncRateLimiterRegistry.get(SLIDEWIN) is not AsyncSlidewinRateLimiter
):  # pragma: no cover - a throttled-py whose registration works otherwise
    raise ImportError("slidewin.throttled: throttled-py did not register the slidewin limiter")
