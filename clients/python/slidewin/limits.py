"""Storages for the `limits` library (and so for Flask-Limiter and slowapi)
whose moving window runs on the slidewin module.

Importing this module registers, with limits' storage-scheme registry:

    slidewin://host:6379/0          SlidewinStorage          (redis.Redis)
    slidewins://host:6380/0         SlidewinStorage          (TLS)
    slidewin+unix:///path/to/sock   SlidewinStorage          (Unix socket)
    slidewin+cluster://h1:p1,h2:p2  SlidewinClusterStorage   (redis.cluster.RedisCluster)
    async+slidewin://...            AsyncSlidewinStorage     (redis.asyncio.Redis)
    async+slidewins://, async+slidewin+unix://
    async+slidewin+cluster://...    AsyncSlidewinClusterStorage (redis.asyncio.RedisCluster)

so that `storage_from_string("slidewin://localhost:6379")`, or Flask-Limiter's
`storage_uri="slidewin://localhost:6379"`, works once `import slidewin.limits`
has run. Each class subclasses limits' own Redis storage of the same kind:
the URI (after its scheme is mapped to the redis one), the options, the key
prefix, `wrap_exceptions`, the fixed window and the sliding-window counter
are limits' own. What changes is the moving window:

- `acquire_entry(key, limit, expiry, amount)` is one
  `SLIDEWIN.CHECK key limit window_ms COST amount`: decided on the server's
  clock, exactly, in O(log n) instead of limits' Lua over a list;
- `get_moving_window(key, limit, expiry)` is one
  `SLIDEWIN.PEEK key limit window_ms WITHOLDEST`: the count of entries in
  the window is `limit - remaining`, and the window's start is now minus the
  age the server measured for the oldest entry (so a client whose clock is
  off still gets a reset time that is right on its own clock).

The moving window's log lives at `<key_prefix>:slidewin:<key>`, apart from
the counters limits keeps at `<key_prefix>:<key>`: a sorted set (or the
module's compact log) never meets limits' strings or lists under one name.
`clear` removes both; `reset` removes every key under the prefix, as limits
does.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import redis
from limits.aio.storage import RedisClusterStorage as _AioRedisClusterStorage
from limits.aio.storage import RedisStorage as _AioRedisStorage
from limits.errors import ConfigurationError
from limits.storage import RedisClusterStorage as _RedisClusterStorage
from limits.storage import RedisStorage as _RedisStorage

from . import errors as _errors

__all__ = [
    "SlidewinStorage",
    "SlidewinClusterStorage",
    "AsyncSlidewinStorage",
    "AsyncSlidewinClusterStorage",
    "SlidewinStorageError",
    "SlidewinLimitError",
    "SlidewinModuleError",
    "MOVING_WINDOW_TAG",
]

MOVING_WINDOW_TAG = "slidewin"
"""The moving window of `key` is kept at `<key_prefix>:slidewin:<key>`."""


class SlidewinStorageError(redis.exceptions.ResponseError):
    """An error this storage explains better than the server's reply. A
    redis-py `ResponseError`, so that limits' `wrap_exceptions=True` turns
    it into `limits.errors.StorageError` like any other storage error."""


class SlidewinLimitError(SlidewinStorageError):
    """A rule the server refuses: its limit (or a hit's cost) is above
    `slidewin.max-limit`, or its window above `slidewin.max-window-ms`.
    `setting` names the setting, `value` what the rule needs, `maximum` the
    server's current value."""

    def __init__(self, message: str, setting: str, value: int, maximum: int):
        super().__init__(message)
        self.setting = setting
        self.value = value
        self.maximum = maximum


class SlidewinModuleError(SlidewinStorageError, _errors.SlidewinModuleError):
    """The server has no slidewin module, or one without `WITHOLDEST` (also
    a `slidewin.SlidewinModuleError`)."""


# The module's range errors (docs/reference.md, Errors): the bound follows the setting.
_RANGE_ERRORS = [
    (re.compile(r"^limit must be an integer between 1 and (\d+)"), "slidewin.max-limit", "limit"),
    (re.compile(r"^COST count must be an integer between 1 and (\d+)"), "slidewin.max-limit", "cost"),
    (re.compile(r"^window_ms must be an integer between 1 and (\d+)"), "slidewin.max-window-ms", "window_ms"),
    # A call adding more entries in all than the setting allows (COST times
    # MCHECK's keys): the bound is its last number.
    (re.compile(r"^COST \d+ on \d+ keys? would add (\d+) entries; slidewin\.max-entries-per-call allows (\d+) a call"),
     "slidewin.max-entries-per-call", "entries"),
]


# What _explain looks at: the server's error replies, and the RedisError
# redis-py's cluster clients raise, before sending, for a command their
# COMMAND table lacks. Anything it does not recognise is raised as it is.
_EXPLAINED = (redis.exceptions.RedisError,)


def _explain(exc: Exception, limit: int, window_ms: int, cost: int) -> Exception:
    """The error to raise for a refused SLIDEWIN command: a clearer one
    when we know what the reply means, else the reply itself."""
    message = str(exc)
    for pattern, setting, what in _RANGE_ERRORS:
        m = pattern.match(message)
        if m and what == "entries":
            total, maximum = int(m.group(1)), int(m.group(2))
            text = (f"slidewin refuses a call adding {total} entries: the server's {setting} is {maximum};"
                    f" raise it (CONFIG SET {setting} {total}) or charge less in one call")
            return SlidewinLimitError(text, setting, total, maximum)
        if m:
            maximum = int(m.group(1))
            value = {"limit": limit, "cost": cost, "window_ms": window_ms}[what]
            if value < 1:
                return exc
            fix = (f"raise it (CONFIG SET {setting} {value}, or '{setting.split('.', 1)[1]} {value}'"
                   f" after the module's path in loadmodule) or use a smaller rule")
            if what == "window_ms":
                text = (f"slidewin refuses a window of {window_ms} ms: the server's {setting} is {maximum}; {fix}")
            else:
                text = (f"slidewin refuses a {what} of {value}: the server's {setting} is {maximum}"
                        f" (the most entries one key may hold); {fix}")
            return SlidewinLimitError(text, setting, value, maximum)
    lower = message.lower()
    if "unknown command" in lower or "doesn't exist in redis commands" in lower:
        return SlidewinModuleError(
            f"the server has no slidewin module ({message}): load it (--loadmodule libslidewin.so),"
            " or use limits' own redis:// storage")
    if "unknown option" in lower and "witholdest" in lower:
        return SlidewinModuleError(
            f"the slidewin module on this server is too old for this storage ({message}):"
            " get_moving_window needs SLIDEWIN.PEEK ... WITHOLDEST")
    return exc


def _window_ms(expiry: float) -> int:
    return int(round(expiry * 1000))


def _window(reply: Any, limit: int) -> tuple[float, int]:
    """(start of the window on this client's clock, entries in it) from a
    PEEK ... WITHOLDEST reply [allowed, limit, remaining, retry_after_ms,
    reset_after_ms, oldest_age_ms]."""
    now = time.time()
    count = limit - int(reply[2])
    oldest_age_ms = int(reply[5])
    if count <= 0 or oldest_age_ms < 0:
        return now, 0
    return now - oldest_age_ms / 1000, count


def _scheme_to_redis(uri: str, prefix: str = "") -> str:
    """slidewin[s|+unix|+cluster]://... as the redis scheme limits' parent
    storage expects (after `prefix`, e.g. "async+")."""
    body = uri[len(prefix):] if prefix and uri.startswith(prefix) else uri
    if not body.startswith("slidewin"):
        raise ConfigurationError(f"not a slidewin storage uri: {uri}")
    return prefix + "redis" + body[len("slidewin"):]


class _MovingWindowOnModule:
    """The moving window on SLIDEWIN.CHECK / SLIDEWIN.PEEK (sync)."""

    key_prefix: str

    def moving_window_key(self, key: str) -> str:
        """Where the moving window of `key` lives."""
        return f"{self.key_prefix}:{MOVING_WINDOW_TAG}:{key}"

    def _slidewin(self, *args: Any) -> Any:
        try:
            return self.get_connection().execute_command(*args)  # type: ignore[attr-defined]
        except _EXPLAINED as exc:
            limit, window_ms = int(args[2]), int(args[3])
            cost = int(args[5]) if len(args) > 5 and args[4] == "COST" else 1
            err = _explain(exc, limit, window_ms, cost)
            if err is exc:
                raise
            raise err from exc

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """Records `amount` entries in the moving window of `key` if they
        fit under `limit` within the last `expiry` seconds, on the server's
        clock: one SLIDEWIN.CHECK."""
        if amount > limit:
            return False  # never fits (limits' own answer; no round trip)
        if amount < 1:
            return True  # nothing to record (as limits' Redis storage answers)
        reply = self._slidewin("SLIDEWIN.CHECK", self.moving_window_key(key), limit,
                               _window_ms(expiry), "COST", amount)
        return bool(int(reply))

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """(start of the window, entries in it): one SLIDEWIN.PEEK; the
        start is the oldest entry's time, `time.time()` when empty."""
        reply = self._slidewin("SLIDEWIN.PEEK", self.moving_window_key(key), limit,
                               _window_ms(expiry), "WITHOLDEST")
        return _window(reply, limit)

    def clear(self, key: str) -> None:
        """Removes limits' counter for `key` and its moving window."""
        self.get_connection().delete(self.prefixed_key(key), self.moving_window_key(key))  # type: ignore[attr-defined]


class SlidewinStorage(_MovingWindowOnModule, _RedisStorage):
    """limits' `RedisStorage` with the moving window on the slidewin module.

    :param uri: ``slidewin://[:password]@host:port[/db]``, ``slidewins://...``
     (TLS) or ``slidewin+unix:///path/to/sock``: given to
     :func:`redis.from_url` as the matching ``redis``/``rediss``/``unix`` uri.
    Every other parameter is that of :class:`limits.storage.RedisStorage`
    (``connection_pool``, ``key_prefix``, ``wrap_exceptions``, and options
    for :class:`redis.Redis`).
    """

    STORAGE_SCHEME = ["slidewin", "slidewins", "slidewin+unix"]

    def __init__(self, uri: str, connection_pool: Any = None, key_prefix: str = _RedisStorage.PREFIX,
                 wrap_exceptions: bool = False, **options: Any) -> None:
        super().__init__(_scheme_to_redis(uri), connection_pool=connection_pool, key_prefix=key_prefix,
                         wrap_exceptions=wrap_exceptions, **options)


class SlidewinClusterStorage(_MovingWindowOnModule, _RedisClusterStorage):
    """limits' `RedisClusterStorage` with the moving window on the slidewin
    module (which every master must load).

    :param uri: ``slidewin+cluster://[:password]@host:port,host:port``.
    Every other parameter is that of :class:`limits.storage.RedisClusterStorage`.
    """

    STORAGE_SCHEME = ["slidewin+cluster"]

    def __init__(self, uri: str, key_prefix: str = _RedisStorage.PREFIX, wrap_exceptions: bool = False,
                 **options: Any) -> None:
        super().__init__(_scheme_to_redis(uri), key_prefix=key_prefix, wrap_exceptions=wrap_exceptions,
                         **options)


class _AsyncMovingWindowOnModule:
    """The moving window on SLIDEWIN.CHECK / SLIDEWIN.PEEK (asyncio)."""

    bridge: Any

    def moving_window_key(self, key: str) -> str:
        return f"{self.bridge.key_prefix}:{MOVING_WINDOW_TAG}:{key}"

    async def _slidewin(self, *args: Any) -> Any:
        try:
            return await self.bridge.get_connection().execute_command(*args)
        except _EXPLAINED as exc:
            limit, window_ms = int(args[2]), int(args[3])
            cost = int(args[5]) if len(args) > 5 and args[4] == "COST" else 1
            err = _explain(exc, limit, window_ms, cost)
            if err is exc:
                raise
            raise err from exc

    async def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if amount > limit:
            return False
        if amount < 1:
            return True
        reply = await self._slidewin("SLIDEWIN.CHECK", self.moving_window_key(key), limit,
                                     _window_ms(expiry), "COST", amount)
        return bool(int(reply))

    async def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        reply = await self._slidewin("SLIDEWIN.PEEK", self.moving_window_key(key), limit,
                                     _window_ms(expiry), "WITHOLDEST")
        return _window(reply, limit)

    async def clear(self, key: str) -> None:
        await self.bridge.get_connection().delete(self.bridge.prefixed_key(key), self.moving_window_key(key))


def _redispy_only(implementation: str) -> None:
    if implementation != "redispy":
        raise ConfigurationError(
            f"slidewin's async storages run on redis-py's asyncio client (implementation='redispy'),"
            f" not {implementation!r}")


class AsyncSlidewinStorage(_AsyncMovingWindowOnModule, _AioRedisStorage):
    """limits' async `RedisStorage` (on :class:`redis.asyncio.Redis`) with
    the moving window on the slidewin module.

    :param uri: ``async+slidewin://host:port[/db]``, ``async+slidewins://...``
     or ``async+slidewin+unix:///path/to/sock``.
    :param implementation: only ``"redispy"`` (the default here).
    Every other parameter is that of :class:`limits.aio.storage.RedisStorage`.
    """

    STORAGE_SCHEME = ["async+slidewin", "async+slidewins", "async+slidewin+unix"]

    def __init__(self, uri: str, wrap_exceptions: bool = False, implementation: str = "redispy",
                 key_prefix: str = _AioRedisStorage.PREFIX, **options: Any) -> None:
        _redispy_only(implementation)
        super().__init__(_scheme_to_redis(uri, "async+"), wrap_exceptions=wrap_exceptions,
                         implementation="redispy", key_prefix=key_prefix, **options)


class AsyncSlidewinClusterStorage(_AsyncMovingWindowOnModule, _AioRedisClusterStorage):
    """limits' async `RedisClusterStorage` (on
    :class:`redis.asyncio.RedisCluster`) with the moving window on the
    slidewin module.

    :param uri: ``async+slidewin+cluster://[:password]@host:port,host:port``.
    :param implementation: only ``"redispy"`` (the default here).
    """

    STORAGE_SCHEME = ["async+slidewin+cluster"]

    def __init__(self, uri: str, wrap_exceptions: bool = False, implementation: str = "redispy",
                 key_prefix: str = _AioRedisStorage.PREFIX, **options: Any) -> None:
        _redispy_only(implementation)
        super().__init__(_scheme_to_redis(uri, "async+"), wrap_exceptions=wrap_exceptions,
                         implementation="redispy", key_prefix=key_prefix, **options)
        _initialize_once_first(self.bridge.storage)


def _initialize_once_first(cluster: Any) -> None:
    """Makes the first command of a new `redis.asyncio.RedisCluster` wait
    for one initialisation (CLUSTER SLOTS) before any command is sent.

    Left to itself (redis-py 8.1), a fresh client given many commands at
    once (asyncio.gather of hits, the first requests of an app) initialises
    once per waiting command; a re-initialisation closes the connections
    that carry commands already sent, and redis-py sends those again: a
    CHECK the server had applied is applied twice (seen in the suite: 12-13
    CHECKs on the server for 10 hits, a hit charged without its caller being
    told). After one initialisation, the same load sends each command once.
    """
    execute = cluster.execute_command
    state: dict = {"done": False, "lock": None}

    async def execute_command(*args: Any, **kwargs: Any) -> Any:
        if not state["done"]:
            if state["lock"] is None:
                state["lock"] = asyncio.Lock()
            async with state["lock"]:
                if not state["done"]:
                    await cluster.initialize()
                    state["done"] = True
        return await execute(*args, **kwargs)

    cluster.execute_command = execute_command
