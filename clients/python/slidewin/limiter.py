"""`Limiter`: slidewin for a redis-py client (`redis.Redis` or
`redis.cluster.RedisCluster`), with the local fast path, the outage policy
and its circuit breaker, and the FUNCTION-library fallback."""

import os
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import decision as d
from .decision import Decision, Rule
from .local import CircuitBreaker, DenialCache, LocalWindows, monotonic_ms

#: What to answer while Redis is unreachable or slower than the timeout.
DENY, ALLOW, LOCAL = "deny", "allow", "local"
POLICIES = (DENY, ALLOW, LOCAL)

#: Errors that mean "Redis is away", not "the call is wrong".
OUTAGE_ERRORS = (
    redis.exceptions.ConnectionError,  # also BusyLoadingError
    redis.exceptions.TimeoutError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
)

LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slidewin.lua")


def library_code() -> str:
    """The FUNCTION library shipped in the package (scripts/slidewin.lua)."""
    with open(LIBRARY_PATH, encoding="utf-8") as f:
        return f.read()


def is_unknown_command(e: Exception) -> bool:
    text = str(e).lower()
    return "unknown command" in text and "slidewin" in text


def with_timeout(client, timeout_ms: Optional[int]):
    """A client on its own pool whose connects and replies time out after
    `timeout_ms`, without redis-py's retries (the outage policy answers
    instead); the given client itself when no timeout is asked for or it is
    a cluster client (create that with `socket_timeout` yourself)."""
    pool = getattr(client, "connection_pool", None)
    if timeout_ms is None or pool is None:
        return client
    kwargs = dict(pool.connection_kwargs)
    kwargs["socket_timeout"] = kwargs["socket_connect_timeout"] = timeout_ms / 1000
    kwargs["retry"] = Retry(NoBackoff(), 0)
    new_pool = type(pool)(
        connection_class=pool.connection_class,
        max_connections=pool.max_connections,
        **kwargs,
    )
    return type(client)(connection_pool=new_pool)


class Commands:
    """The commands of one call, for the module or the FUNCTION library."""

    @staticmethod
    def check(function: bool, rule: Rule, cost: int) -> list:
        tail = [rule.limit, rule.window_ms, "COST", cost, "WITHMEMBERS"]
        if function:
            return ["FCALL", "slidewin_check", 1, rule.key] + tail
        return ["SLIDEWIN.CHECK", rule.key] + tail

    @staticmethod
    def check_all(function: bool, rules: Sequence[Rule], cost: int) -> list:
        tail = ["COST", cost, "DETAIL", "WITHMEMBERS"]
        if function:
            limits = [x for r in rules for x in (r.limit, r.window_ms)]
            return ["FCALL", "slidewin_mcheck", len(rules)] + [r.key for r in rules] + limits + tail
        flat = [x for r in rules for x in (r.key, r.limit, r.window_ms)]
        return ["SLIDEWIN.MCHECK", len(rules)] + flat + tail

    @staticmethod
    def peek(function: bool, rule: Rule, cost: int) -> list:
        tail = [rule.limit, rule.window_ms, "COST", cost]
        if function:
            return ["FCALL_RO", "slidewin_peek", 1, rule.key] + tail
        return ["SLIDEWIN.PEEK", rule.key] + tail

    @staticmethod
    def undo(function: bool, key: str, members: Sequence[str]) -> list:
        if function:
            return ["FCALL", "slidewin_undo", 1, key] + list(members)
        return ["SLIDEWIN.UNDO", key] + list(members)


class Policy:
    """Everything but the I/O, shared by `Limiter` and `AsyncLimiter`."""

    def __init__(
        self,
        outage: str = DENY,
        timeout_ms: Optional[int] = 100,
        breaker_failures: int = 1,
        breaker_pause_ms: int = 1000,
        cache_size: int = 10_000,
        local_keys: int = 10_000,
        function_fallback: bool = True,
        clock: Callable[[], int] = monotonic_ms,
    ):
        if outage not in POLICIES:
            raise ValueError(f"outage must be one of {POLICIES}, got {outage!r}")
        self.outage = outage
        self.timeout_ms = timeout_ms
        self.cache = DenialCache(cache_size, clock)
        self.windows = LocalWindows(local_keys, clock)
        self.breaker = CircuitBreaker(breaker_failures, breaker_pause_ms, clock)
        self.function_fallback = function_fallback
        self.use_function = False  # set once the module is found missing
        self.source = d.REDIS

    def cached(self, rules: Tuple[Rule, ...]) -> Optional[Decision]:
        """A refusal from the denial cache when a rule is known refused."""
        wait = max((self.cache.blocked_for(r) for r in rules), default=0)
        if wait > 0:
            return d.refusal(rules, wait, d.LOCAL_CACHE)
        return None

    def remember(self, decision: Decision) -> None:
        """Caches the refusing rules of a denial from Redis."""
        if decision.allowed:
            return
        per_rule = decision.per_rule or (decision,)
        for sub in per_rule:
            if not sub.allowed:
                for r in sub.rules:
                    self.cache.block(r, sub.retry_after_ms)

    def during_outage(self, rules: Tuple[Rule, ...], cost: int) -> Decision:
        """The outage policy's answer."""
        if self.outage == ALLOW:
            return d.admission(rules, None, d.FALLBACK)
        if self.outage == LOCAL:
            allowed, remaining, retry = self.windows.check(rules, cost)
            if allowed:
                return d.admission(rules, remaining, d.FALLBACK)
            return d.refusal(rules, retry, d.FALLBACK)
        # deny: try again after the breaker's pause.
        return d.refusal(rules, self.breaker.pause_ms, d.FALLBACK)


def _rule(key, limit, window_ms) -> Rule:
    return Rule(str(key), int(limit), int(window_ms))


class Limiter:
    """Sliding-window checks on a redis-py client.

    `outage` is `deny`, `allow` or `local` (an exact per-instance window);
    it answers while Redis is unreachable or slower than `timeout_ms`, and
    the circuit breaker (open after `breaker_failures` consecutive failures,
    probing again after `breaker_pause_ms`) keeps calls from waiting out
    the timeout meanwhile. Denials are cached for their wait (`cache_size`
    rules), so a refused caller is refused again without a round trip.
    Without the module (an unknown-command reply) it loads the packaged
    FUNCTION library once and answers through FCALL.
    """

    def __init__(self, client, **options):
        self.policy = Policy(**options)
        self.client = with_timeout(client, self.policy.timeout_ms)
        self._cluster = isinstance(client, redis.cluster.RedisCluster)

    @classmethod
    def from_url(cls, url: str, **options) -> "Limiter":
        return cls(redis.Redis.from_url(url), **options)

    # -- I/O -------------------------------------------------------------

    def _load_library(self) -> None:
        args = ["FUNCTION", "LOAD", "REPLACE", library_code()]
        if self._cluster:
            # Every primary holds its own copy of the library.
            for node in self.client.get_primaries():
                self.client.get_redis_connection(node).execute_command(*args)
        else:
            self.client.execute_command(*args)

    def _send(self, build: Callable[[bool], list]):
        """Runs one call on the module, or on the library once the module
        is known missing; connection errors propagate."""
        if not self.policy.use_function:
            try:
                return self.client.execute_command(*build(False))
            except redis.exceptions.ResponseError as e:
                if not (is_unknown_command(e) and self.policy.function_fallback):
                    raise
                self._load_library()
                self.policy.use_function = True
                self.policy.source = d.FUNCTION
        return self.client.execute_command(*build(True))

    def _guarded(self, rules: Tuple[Rule, ...], cost: int, call: Callable[[], Decision]) -> Decision:
        if not self.policy.breaker.allow():
            return self.policy.during_outage(rules, cost)
        try:
            decision = call()
        except OUTAGE_ERRORS:
            self.policy.breaker.failure()
            return self.policy.during_outage(rules, cost)
        self.policy.breaker.success()
        return decision

    # -- API -------------------------------------------------------------

    def check(self, key: str, limit: int, window_ms: int, cost: int = 1) -> Decision:
        """SLIDEWIN.CHECK: records `cost` calls on `key` if they fit."""
        rule = _rule(key, limit, window_ms)
        cached = self.policy.cached((rule,))
        if cached:
            return cached

        def call():
            reply = self._send(lambda f: Commands.check(f, rule, cost))
            return d.from_detail(reply, rule, self.policy.source, reply[5])

        decision = self._guarded((rule,), cost, call)
        if decision.source in (d.REDIS, d.FUNCTION):
            self.policy.remember(decision)
        return decision

    def check_all(self, rules: Iterable, cost: int = 1) -> Decision:
        """SLIDEWIN.MCHECK: every rule `(key, limit, window_ms)` must allow
        `cost`, and then all are charged; all or nothing."""
        rules = tuple(r if isinstance(r, Rule) else _rule(*r) for r in rules)
        if not rules:
            raise ValueError("check_all needs at least one rule")
        cached = self.policy.cached(rules)
        if cached:
            return cached

        def call():
            reply = self._send(lambda f: Commands.check_all(f, rules, cost))
            return d.from_multi(reply, list(rules), self.policy.source)

        decision = self._guarded(rules, cost, call)
        if decision.source in (d.REDIS, d.FUNCTION):
            self.policy.remember(decision)
        return decision

    def peek(self, key: str, limit: int, window_ms: int, cost: int = 1) -> Decision:
        """SLIDEWIN.PEEK: what `check` would answer now, changing nothing.
        While Redis is away it answers like the outage policy would, without
        charging the local window."""
        rule = _rule(key, limit, window_ms)
        cached = self.policy.cached((rule,))
        if cached:
            return cached

        def call():
            reply = self._send(lambda f: Commands.peek(f, rule, cost))
            return d.from_detail(reply, rule, self.policy.source)

        if not self.policy.breaker.allow():
            return self._peek_outage(rule)
        try:
            decision = call()
        except OUTAGE_ERRORS:
            self.policy.breaker.failure()
            return self._peek_outage(rule)
        self.policy.breaker.success()
        return decision

    def _peek_outage(self, rule: Rule) -> Decision:
        if self.policy.outage == ALLOW or self.policy.outage == LOCAL:
            return d.admission((rule,), None, d.FALLBACK)
        return d.refusal((rule,), self.policy.breaker.pause_ms, d.FALLBACK)

    def undo(self, decision: Decision) -> int:
        """SLIDEWIN.UNDO: gives an allowed decision's entries back on every
        key it charged; returns the entries removed. Send it once, soon
        after the decision (see the README on member names)."""
        if not decision.allowed or not decision.members:
            return 0
        removed = 0
        for key in decision.keys:
            self.policy.cache.forget_key(key)
            removed += int(self._send(lambda f, k=key: Commands.undo(f, k, decision.members)))
        return removed


def merge_top(replies: Iterable[List]) -> List[Tuple[str, int, int]]:
    """Merges SLIDEWIN.TOP replies from several nodes (a cluster's masters
    each answer for their own keys): counts and error bounds add per key,
    heaviest first."""
    merged = {}
    for reply in replies:
        for key, count, error in reply:
            key = key.decode() if isinstance(key, bytes) else key
            c, e = merged.get(key, (0, 0))
            merged[key] = (c + int(count), e + int(error))
    return sorted(((k, c, e) for k, (c, e) in merged.items()), key=lambda t: (-t[1], t[0]))
