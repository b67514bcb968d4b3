"""`Limiter`: slidewin for a redis-py client (`redis.Redis` or
`redis.cluster.RedisCluster`), with the local fast path, the outage policy
and its circuit breaker, and the FUNCTION-library fallback."""

import functools
import hashlib
import os
import time
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, Union

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import decision as d
from .decision import Decision, Rule
from .local import CircuitBreaker, DenialCache, LocalWindows, monotonic_ms

#: What to answer while Redis is unreachable or slower than the timeout.
DENY, ALLOW, LOCAL = "deny", "allow", "local"
#: The kinds of call.
CHECK, CHECK_ALL, PEEK = "check", "check_all", "peek"
POLICIES = (DENY, ALLOW, LOCAL)

# What a failed round trip means. The circuit breaker is shared by every
# key of a limiter, so it counts only what says the server cannot answer
# *any* key; what concerns one slot, or is the server's own refusal of a
# write, is answered per call by the outage policy and left out of the
# breaker. Anything else (WRONGTYPE, bad arguments, MOVED on a plain client,
# NOPERM) is raised to the caller.

#: The server is out of reach for every key: connection loss (LOADING, a
#: restarting server, is a ConnectionError in redis-py), a reply slower than
#: the timeout, MASTERDOWN (a replica that lost its master and serves no
#: stale data). The outage policy answers; the breaker counts it.
OUTAGE_ERRORS = (
    redis.exceptions.ConnectionError,  # also BusyLoadingError (LOADING)
    redis.exceptions.TimeoutError,
    redis.exceptions.MasterDownError,
)

#: One slot cannot answer now: CLUSTERDOWN (a shard without a master, or
#: the slot not served), redis-py's cluster client giving up on a slot
#: ("TTL exhausted." after its own TRYAGAIN/MOVED/ASK retries), a slot the
#: client knows no node for. The outage policy answers that call; the
#: breaker does not count it (a cluster with one failed shard must not put
#: every key on the outage policy). TRYAGAIN is one of these once it
#: persists through `TRYAGAIN_DELAYS_MS`.
SLOT_ERRORS = (
    redis.exceptions.ClusterError,  # ClusterDownError, "TTL exhausted."
    redis.exceptions.SlotNotCoveredError,
)

#: The server is up but refuses writes for a state of its own: OOM
#: (maxmemory reached, nothing to evict), NOREPLICAS (min-replicas-to-write
#: not met), MISCONF (it cannot persist). A reply, not an outage: the
#: outage policy answers the call (it cannot be recorded: `deny` refuses,
#: `allow` admits, `local` counts locally), and the breaker does not count
#: it (each call asks again and learns at once when writes come back).
WRITE_REFUSALS = ("OOM", "NOREPLICAS", "MISCONF")

#: TRYAGAIN (a multi-key call on a slot being migrated, its keys split
#: between two nodes) is retried after these pauses, as cluster clients do,
#: within the call's budget (`timeout_ms`, else `TRYAGAIN_BUDGET_MS`).
TRYAGAIN_DELAYS_MS = (10, 20, 40, 80)
TRYAGAIN_BUDGET_MS = 200

#: What `Policy.after_error` asks the limiter to do before trying again.
RECONNECT = "reconnect"

LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slidewin.lua")


def library_code() -> str:
    """The FUNCTION library shipped in the package (scripts/slidewin.lua)."""
    with open(LIBRARY_PATH, encoding="utf-8") as f:
        return f.read()


EVAL_FRAME_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slidewin-eval.lua")


@functools.lru_cache(maxsize=1)
def eval_code() -> str:
    """The library's EVAL form, for servers without FUNCTION, as
    scripts/eval-script.sh prints it: the frame (scripts/slidewin-eval.lua)
    with the library, less its `#!lua` line, in place of `-- @LIBRARY@`."""
    with open(EVAL_FRAME_PATH, encoding="utf-8") as f:
        frame = f.read()
    library = library_code().split("\n", 1)[1]
    return "".join(library if line == "-- @LIBRARY@\n" else line for line in frame.splitlines(keepends=True))


@functools.lru_cache(maxsize=1)
def eval_sha() -> str:
    """The SHA-1 EVALSHA names the EVAL form by."""
    return hashlib.sha1(eval_code().encode("utf-8")).hexdigest()


def no_function_command(e: Exception) -> bool:
    """Whether `e` says the server has no FUNCTION command (Redis 6.x, an
    EVAL-only service): the library then runs in its EVAL form."""
    text = str(e).lower()
    return "function" in text and ("unknown command" in text or "doesn't exist in redis commands" in text)


def is_unknown_command(e: Exception) -> bool:
    """Whether `e` says the module is not loaded: the server's "unknown
    command" reply, or a cluster client's refusal to route a command its
    COMMAND table lacks ("... command doesn't exist in Redis commands",
    raised by redis-py before anything is sent)."""
    text = str(e).lower()
    return "slidewin" in text and ("unknown command" in text or "doesn't exist in redis commands" in text)


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
    if isinstance(pool, redis.asyncio.ConnectionPool):
        kwargs["retry"] = AsyncRetry(NoBackoff(), 0)
    else:
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

    @staticmethod
    def as_eval(fcall: list, sha: str) -> list:
        """An FCALL (or FCALL_RO) as the EVAL form takes it: EVALSHA sha
        numkeys key ... function arg ..."""
        name, numkeys = fcall[1], fcall[2]
        keys, args = fcall[3 : 3 + numkeys], fcall[3 + numkeys :]
        return ["EVALSHA", sha, numkeys] + keys + [name] + args


class Attempt:
    """The retries of one call: TRYAGAIN's pauses within the budget, and
    one reconnect after READONLY."""

    def __init__(self, budget_ms: int, clock: Callable[[], int]):
        self.clock = clock
        self.started = clock()
        self.budget_ms = budget_ms
        self.tryagain = 0
        self.reconnected = False

    def next_tryagain_pause(self) -> Optional[float]:
        """Seconds to wait before trying again, None when the retries or
        the budget are spent."""
        if self.tryagain >= len(TRYAGAIN_DELAYS_MS):
            return None
        pause = TRYAGAIN_DELAYS_MS[self.tryagain]
        if self.clock() - self.started + pause > self.budget_ms:
            return None
        self.tryagain += 1
        return pause / 1000


def write_refused(e: Exception) -> bool:
    """Whether `e` is the server refusing a write for a state of its own
    (`WRITE_REFUSALS`)."""
    if isinstance(e, redis.exceptions.OutOfMemoryError):
        return True
    return isinstance(e, redis.exceptions.ResponseError) and str(e).split(" ", 1)[0] in WRITE_REFUSALS


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
        self.clock = clock
        self.cache = DenialCache(cache_size, clock)
        self.windows = LocalWindows(local_keys, clock)
        self.breaker = CircuitBreaker(breaker_failures, breaker_pause_ms, clock)
        self.function_fallback = function_fallback
        self.use_function = False  # set once the module is found missing
        self.use_eval = False  # and the library runs through EVALSHA: no FUNCTION

    @property
    def source(self) -> str:
        """Where Redis answers come from: the module or the library."""
        return d.FUNCTION if self.use_function else d.REDIS

    def cached(self, rules: Tuple[Rule, ...], cost: int = 1) -> Optional[Decision]:
        """A refusal from the denial cache when a rule is known to refuse
        `cost` (a denial of a higher cost does not count: see
        `DenialCache`)."""
        wait = max((self.cache.blocked_for(r, cost) for r in rules), default=0)
        if wait > 0:
            return d.refusal(rules, wait, d.LOCAL_CACHE)
        return None

    # Around the round trip, for both limiters: what answers before it,
    # after a failure, and after a reply.

    def without_redis(self, kind: str, rules: Tuple[Rule, ...], cost: int) -> Optional[Decision]:
        """The denial cache's refusal, or the outage policy's answer while
        the breaker is open; None when Redis should be asked."""
        cached = self.cached(rules, cost)
        if cached:
            return cached
        if not self.breaker.allow():
            return self.outage_answer(kind, rules, cost)
        return None

    def attempt(self) -> Attempt:
        """The retry state of one call."""
        budget = self.timeout_ms if self.timeout_ms else TRYAGAIN_BUDGET_MS
        return Attempt(min(budget, TRYAGAIN_BUDGET_MS), self.clock)

    def after_error(
        self, e: Exception, kind: str, rules: Tuple[Rule, ...], cost: int, attempt: Attempt, cluster: bool
    ) -> Union[Decision, float, str, None]:
        """What a failed round trip leads to: a Decision (the outage
        policy's answer), a pause in seconds before trying again, RECONNECT
        (try once more on fresh connections), or None (raise `e`).

        - connection loss, timeout, LOADING, MASTERDOWN (`OUTAGE_ERRORS`):
          the policy answers, the breaker counts a failure;
        - TRYAGAIN: tried again after `TRYAGAIN_DELAYS_MS` within the
          budget; if it persists, the policy answers that call;
        - CLUSTERDOWN and the other `SLOT_ERRORS`: the policy answers that
          call;
        - OOM, NOREPLICAS, MISCONF (`WRITE_REFUSALS`): the policy answers
          that call;
        - READONLY (the node we reach is a replica now: a failover, and a
          connection still open to the demoted master): once more on fresh
          connections (an endpoint whose name moved to the new master
          answers then); if it persists, on a plain client the policy
          answers and the breaker counts a failure (every key is on that
          node), on a cluster client the policy answers that call;
        - a refused login (NOAUTH, WRONGPASS; redis-py raises them as
          ConnectionErrors): raised, not an outage;
        - anything else: raised.
        Only `OUTAGE_ERRORS` and a READONLY that persists on a plain client
        count toward the breaker; the other errors are replies (a success
        for it: the server is reachable) or, for a slot the client knows no
        node for, leave it as it is.
        """
        if isinstance(e, (redis.exceptions.AuthenticationError, redis.exceptions.AuthorizationError)):
            # NOAUTH, WRONGPASS: redis-py makes them ConnectionErrors, but
            # the server answered: a wrong setting, raised, never an outage
            # (with outage="allow" it would admit everything).
            self.breaker.success()
            return None
        if isinstance(e, redis.exceptions.TryAgainError):
            pause = attempt.next_tryagain_pause()
            if pause is not None:
                return pause
            self.breaker.success()
            return self.outage_answer(kind, rules, cost)
        if isinstance(e, OUTAGE_ERRORS):
            return self.failed(kind, rules, cost)
        if isinstance(e, redis.exceptions.ReadOnlyError):
            if not attempt.reconnected:
                attempt.reconnected = True
                return RECONNECT
            if cluster:
                self.breaker.success()
                return self.outage_answer(kind, rules, cost)
            return self.failed(kind, rules, cost)
        if isinstance(e, SLOT_ERRORS):
            if isinstance(e, redis.exceptions.RedisError):
                self.breaker.success()  # a node replied
            else:
                self.breaker.release()
            return self.outage_answer(kind, rules, cost)
        if write_refused(e):
            self.breaker.success()
            return self.outage_answer(kind, rules, cost)
        if isinstance(e, redis.exceptions.ResponseError):
            self.breaker.success()  # the server replied: the caller's error
        else:
            self.breaker.release()
        return None

    def failed(self, kind: str, rules: Tuple[Rule, ...], cost: int) -> Decision:
        """Redis could not be reached: the breaker counts it, the outage
        policy answers."""
        self.breaker.failure()
        return self.outage_answer(kind, rules, cost)

    def answered(self, kind: str, reply, rules: Tuple[Rule, ...], cost: int = 1, since: Optional[int] = None) -> Decision:
        """Redis replied: its Decision; a denial is remembered with its cost
        (not a peek's), timed from `since`, the clock read before the
        request was sent."""
        self.breaker.success()
        decision = self.parse(kind, reply, rules)
        if kind != PEEK:
            self.remember(decision, cost, since)
        return decision

    def falls_back(self, e: Exception) -> bool:
        """Whether `e` (the module missing) moves the calls to the library."""
        return self.function_fallback and is_unknown_command(e)

    # One call of each kind: its command, its reply's Decision, its answer
    # while Redis is away; `Limiter` and `AsyncLimiter` only do the I/O.

    @staticmethod
    def command(kind: str, function: bool, rules: Tuple[Rule, ...], cost: int) -> list:
        if kind == CHECK_ALL:
            return Commands.check_all(function, rules, cost)
        build = Commands.peek if kind == PEEK else Commands.check
        return build(function, rules[0], cost)

    def parse(self, kind: str, reply, rules: Tuple[Rule, ...]) -> Decision:
        if kind == CHECK_ALL:
            return d.from_multi(reply, list(rules), self.source)
        members = reply[5] if kind == CHECK else ()
        return d.from_detail(reply, rules[0], self.source, members)

    def outage_answer(self, kind: str, rules: Tuple[Rule, ...], cost: int) -> Decision:
        """The outage policy's answer; a peek charges no local window."""
        if kind != PEEK:
            return self.during_outage(rules, cost)
        if self.outage in (ALLOW, LOCAL):
            return d.admission(rules, None, d.FALLBACK)
        return d.refusal(rules, self.breaker.pause_ms, d.FALLBACK)

    def remember(self, decision: Decision, cost: int = 1, since: Optional[int] = None) -> None:
        """Caches the refusing rules of a denial from Redis (not from the
        cache itself or the outage policy), each with the cost refused and
        its own wait."""
        if decision.allowed or decision.source not in (d.REDIS, d.FUNCTION):
            return
        per_rule = decision.per_rule or (decision,)
        for sub in per_rule:
            if not sub.allowed:
                for r in sub.rules:
                    self.cache.block(r, sub.retry_after_ms, cost, since)

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


def _rules(rules: Iterable) -> Tuple[Rule, ...]:
    """`Rule`s or `(key, limit, window_ms)` tuples, at least one."""
    out = tuple(r if isinstance(r, Rule) else _rule(*r) for r in rules)
    if not out:
        raise ValueError("check_all needs at least one rule")
    return out


class Limiter:
    """Sliding-window checks on a redis-py client.

    `outage` is `deny`, `allow` or `local` (an exact per-instance window);
    it answers while Redis cannot decide: unreachable, slower than
    `timeout_ms`, loading, a slot migrating or down, writes refused (OOM,
    NOREPLICAS, MISCONF); see `Policy.after_error` for each error. The
    circuit breaker (open after `breaker_failures` consecutive failures,
    probing again after `breaker_pause_ms`) keeps calls from waiting out
    the timeout meanwhile; it counts only what concerns every key
    (connection loss, timeouts, LOADING, MASTERDOWN, a READONLY that
    persists on fresh connections), never one slot's trouble. TRYAGAIN is
    tried again a few times within `timeout_ms` first.

    Denials are cached for their wait (`cache_size` rules) with the cost
    refused: a caller refused is refused again without a round trip, for
    that cost and any higher one; a lower cost is asked of Redis (it may
    fit). Without the module (an unknown-command reply) it loads the
    packaged FUNCTION library once and answers through FCALL; on a server
    without FUNCTION, through the library's EVAL form (EVALSHA).
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
        try:
            if self._cluster:
                # Every primary holds its own copy of the library.
                for node in self.client.get_primaries():
                    self.client.get_redis_connection(node).execute_command(*args)
            else:
                self.client.execute_command(*args)
        except redis.exceptions.RedisError as e:
            if not no_function_command(e):
                raise
            self.policy.use_eval = True

    def _eval(self, fcall: list):
        """The library's call through EVALSHA, and EVAL when the server
        lacks the script. Safe only because NOSCRIPT means the script did
        not run: nothing was charged, so sending it with EVAL charges once.
        No other error, nor a lost connection, is followed by a second send
        (the call may have run)."""
        command = Commands.as_eval(fcall, eval_sha())
        try:
            return self.client.execute_command(*command)
        except redis.exceptions.NoScriptError:
            return self.client.execute_command("EVAL", eval_code(), *command[2:])

    def _send(self, build: Callable[[bool], list]):
        """Runs one call on the module, or on the library once the module
        is known missing; connection errors propagate."""
        if not self.policy.use_function:
            try:
                return self.client.execute_command(*build(False))
            except redis.exceptions.RedisError as e:
                # Connection errors are RedisErrors too: re-raised here.
                if not self.policy.falls_back(e):
                    raise
                self._load_library()
                self.policy.use_function = True
        if self.policy.use_eval:
            return self._eval(build(True))
        return self.client.execute_command(*build(True))

    def _reconnect(self) -> None:
        """Closes the idle connections: the next command connects afresh
        (and resolves the host name again). A cluster client keeps its
        own: it follows the topology itself."""
        pool = getattr(self.client, "connection_pool", None)
        if pool is not None:
            pool.disconnect(inuse_connections=False)

    def _decide(self, kind: str, rules: Tuple[Rule, ...], cost: int) -> Decision:
        """The local cache, else Redis (the breaker permitting), else the
        outage policy; denials from Redis are remembered (not a peek's)."""
        policy = self.policy
        early = policy.without_redis(kind, rules, cost)
        if early:
            return early
        attempt = policy.attempt()
        while True:
            since = policy.clock()
            try:
                reply = self._send(lambda f: policy.command(kind, f, rules, cost))
            except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException) as e:
                step = policy.after_error(e, kind, rules, cost, attempt, self._cluster)
                if step is None:
                    raise
                if isinstance(step, Decision):
                    return step
                if step == RECONNECT:
                    self._reconnect()
                else:
                    time.sleep(step)
                continue
            except BaseException:
                policy.breaker.release()
                raise
            return policy.answered(kind, reply, rules, cost, since)

    # -- API -------------------------------------------------------------

    def check(self, key: str, limit: int, window_ms: int, cost: int = 1) -> Decision:
        """SLIDEWIN.CHECK: records `cost` calls on `key` if they fit."""
        return self._decide(CHECK, (_rule(key, limit, window_ms),), cost)

    def check_all(self, rules: Iterable, cost: int = 1) -> Decision:
        """SLIDEWIN.MCHECK: every rule `(key, limit, window_ms)` must allow
        `cost`, and then all are charged; all or nothing."""
        return self._decide(CHECK_ALL, _rules(rules), cost)

    def peek(self, key: str, limit: int, window_ms: int, cost: int = 1) -> Decision:
        """SLIDEWIN.PEEK: what `check` would answer now, changing nothing.
        While Redis is away it answers like the outage policy would, without
        charging the local window."""
        return self._decide(PEEK, (_rule(key, limit, window_ms),), cost)

    def undo(self, decision: Decision) -> int:
        """SLIDEWIN.UNDO: gives an allowed decision's entries back on every
        key it charged; returns the entries removed. Send it once, soon
        after the decision (see Members in docs/reference.md). A decision
        without members (a peek's, a refusal, an outage answer) charged
        nothing: undoing it is a no-op that returns 0 and sends nothing."""
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
