"""`Limiter`: slidewin for a redis-py client (`redis.Redis` on any pool:
TCP, Unix socket, TLS, Sentinel's `master_for`; or
`redis.cluster.RedisCluster`), with the local fast path, the outage policy
and its circuit breaker, the backends (the module, then the FUNCTION
library), and counts of every decision the server did not make."""

import dataclasses
import functools
import hashlib
import os
import time
import uuid
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, Union

import redis

from . import decision as d
from . import stats as st
from .connections import Link
from .decision import Decision, Rule
from .errors import SlidewinModuleError
from .local import CircuitBreaker, DenialCache, LocalWindows, key_bytes, monotonic_ms
from .reservation import Reservation

#: What to answer while Redis is unreachable or slower than the timeout.
DENY, ALLOW, LOCAL = "deny", "allow", "local"
#: The kinds of call.
CHECK, CHECK_ALL, PEEK = "check", "check_all", "peek"
POLICIES = (DENY, ALLOW, LOCAL)

# What a failed round trip means. The circuit breaker is shared by every
# key of a limiter, so it counts only what says the server cannot answer
# *any* key; what concerns one slot, or is the server's own refusal of a
# write, is answered per call by the outage policy and left out of the
# breaker. Anything else (WRONGTYPE, bad arguments, NOPERM) is raised to
# the caller.

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
#: the slot not served), a slot the client knows no node for, redirections
#: that do not end. The outage policy answers that call; the breaker does
#: not count it (a cluster with one failed shard must not put every key on
#: the outage policy). TRYAGAIN is one of these once it persists through
#: `TRYAGAIN_DELAYS_MS`.
SLOT_ERRORS = (
    redis.exceptions.ClusterError,  # ClusterDownError, too many redirections
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
#: within the call's budget (`timeout_ms`, else `TRYAGAIN_BUDGET_MS`). The
#: server ran nothing of a call it answered TRYAGAIN: sending it again
#: cannot charge twice.
TRYAGAIN_DELAYS_MS = (10, 20, 40, 80)
TRYAGAIN_BUDGET_MS = 200

#: What `Policy.after_error` asks the limiter to do before trying again.
RECONNECT = "reconnect"

#: The longest request id the server takes, in bytes (and the shortest: 1).
MAX_REQUEST_ID = 128


def request_id_of(request_id) -> Union[str, bytes]:
    """A request id as the caller gave it (str, sent as UTF-8, or bytes),
    checked against the server's bounds so that a bad one is refused
    before anything is sent (also while Redis is away)."""
    if isinstance(request_id, (bytearray, memoryview)):
        request_id = bytes(request_id)
    if not isinstance(request_id, (str, bytes)):
        raise TypeError(f"a request id is str or bytes, got {type(request_id).__name__}")
    size = len(request_id.encode("utf-8")) if isinstance(request_id, str) else len(request_id)
    if not 1 <= size <= MAX_REQUEST_ID:
        raise ValueError(f"a request id must be 1 to {MAX_REQUEST_ID} bytes, got {size}")
    return request_id


def new_request_id() -> bytes:
    """A request id made by the client: 16 random bytes (a UUID4's)."""
    return uuid.uuid4().bytes


def resendable(e: Exception) -> bool:
    """Whether `e` leaves a call's fate unknown (a lost connection, a reply
    slower than the timeout: it may have run). Only a call with a request
    id is then sent once more: the server answers a repeat of an id it
    charged without charging again. Not LOADING (nothing ran, and a resend
    now fails the same), not a refused login, not a READONLY in disguise."""
    if isinstance(e, (redis.exceptions.BusyLoadingError, redis.exceptions.AuthenticationError,
                      redis.exceptions.AuthorizationError)):
        return False
    if isinstance(e.__context__, redis.exceptions.ReadOnlyError):
        return False
    return isinstance(e, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError))


def may_hold_charge(decision: Decision) -> bool:
    """Whether the server may hold a charge for `decision`'s call: the
    server allowed it, or the outage policy answered (the call may have run
    before its reply was lost). A refusal from the server, or from the
    denial cache (nothing sent), charged nothing."""
    if decision.source == d.LOCAL_CACHE:
        return False
    if decision.source == d.FALLBACK:
        return True
    return decision.allowed

LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slidewin.lua")


def library_code() -> str:
    """The FUNCTION library shipped in the package (lua/slidewin.lua)."""
    with open(LIBRARY_PATH, encoding="utf-8") as f:
        return f.read()


EVAL_FRAME_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slidewin-eval.lua")


@functools.lru_cache(maxsize=1)
def eval_code() -> str:
    """The library's EVAL form, for servers without FUNCTION, as
    scripts/eval-script.sh prints it: the frame (lua/slidewin-eval.lua)
    with the library, less its `#!lua` line, in place of `-- @LIBRARY@`."""
    with open(EVAL_FRAME_PATH, encoding="utf-8") as f:
        frame = f.read()
    library = library_code().split("\n", 1)[1]
    return "".join(library if line == "-- @LIBRARY@\n" else line for line in frame.splitlines(keepends=True))


@functools.lru_cache(maxsize=1)
def eval_sha() -> str:
    """The SHA-1 EVALSHA names the EVAL form by."""
    return hashlib.sha1(eval_code().encode("utf-8")).hexdigest()


def is_unknown_command(e: Exception) -> bool:
    """Whether `e` says the server does not know one of slidewin's commands
    (`SLIDEWIN.*`, or `FCALL slidewin_*` on a server without FUNCTION): its
    "unknown command" reply, or a cluster client's refusal to route a
    command its COMMAND table lacks."""
    text = str(e).lower()
    return "slidewin" in text and ("unknown command" in text or "doesn't exist in redis commands" in text)


# -- the backends: who answers, in the order the limiter tries them --------

#: The backends' names, for `Limiter(backends=...)`.
MODULE, FUNCTION_LIBRARY, SCRIPT = "module", "function", "script"


class Backend:
    """One way of running slidewin's commands on the server. `loads`: the
    command that installs it (sent once to every primary before its first
    use; None: nothing to install)."""

    name = ""
    source = ""
    loads: Optional[list] = None

    def __init__(self):
        self.installed = self.loads is None
        self.reinstalled = False
        self.install_error: Optional[Exception] = None

    def absent(self, e: Exception) -> bool:
        """Whether `e` says this backend cannot answer on this server (the
        limiter then tries the next one)."""
        return is_unknown_command(e)

    def lost(self, e: Exception) -> bool:
        """Whether `e` says what `loads` installed is gone (installed again, once)."""
        return False

    def why_absent(self, e: Exception) -> str:
        return f"{self.name}: {e}"

    # A call with a request id asks for DETAIL (the server refuses ID with
    # WITHMEMBERS: the charge is given back by its id, not its members).

    def check(self, rule: Rule, cost: int, request_id=None) -> list:
        raise NotImplementedError

    def check_all(self, rules: Sequence[Rule], cost: int, request_id=None) -> list:
        raise NotImplementedError

    def peek(self, rule: Rule, cost: int) -> list:
        raise NotImplementedError

    def undo(self, key, members: Sequence[str]) -> list:
        raise NotImplementedError

    def undo_id(self, key, request_id) -> list:
        """UNDO key ID request-id."""
        raise NotImplementedError

    def settle(self, key, request_id, cost: int) -> list:
        """SETTLE key ID request-id COST units."""
        raise NotImplementedError


def _charge_options(cost: int, request_id, detail: bool = False) -> list:
    """COST, then ID and DETAIL for a call with a request id, else
    WITHMEMBERS (CHECK's implies DETAIL; MCHECK's is given with `detail`)."""
    if request_id is None:
        return ["COST", cost] + (["DETAIL"] if detail else []) + ["WITHMEMBERS"]
    return ["COST", cost, "ID", request_id, "DETAIL"]


class ModuleBackend(Backend):
    """The module's commands, SLIDEWIN.*."""

    name, source = MODULE, d.REDIS

    def why_absent(self, e: Exception) -> str:
        return f"the slidewin module is not loaded ({e})"

    def check(self, rule, cost, request_id=None):
        return ["SLIDEWIN.CHECK", rule.key, rule.limit, rule.window_ms] + _charge_options(cost, request_id)

    def check_all(self, rules, cost, request_id=None):
        flat = [x for r in rules for x in (r.key, r.limit, r.window_ms)]
        return ["SLIDEWIN.MCHECK", len(rules)] + flat + _charge_options(cost, request_id, detail=True)

    def peek(self, rule, cost):
        return ["SLIDEWIN.PEEK", rule.key, rule.limit, rule.window_ms, "COST", cost]

    def undo(self, key, members):
        return ["SLIDEWIN.UNDO", key] + list(members)

    def undo_id(self, key, request_id):
        return ["SLIDEWIN.UNDO", key, "ID", request_id]

    def settle(self, key, request_id, cost):
        return ["SLIDEWIN.SETTLE", key, "ID", request_id, "COST", cost]


class FunctionBackend(Backend):
    """The FUNCTION library shipped in the package (`FCALL slidewin_*`),
    installed with `FUNCTION LOAD REPLACE` on every primary. If the load is
    refused (no `@scripting` rights), the calls are tried anyway: an
    administrator may have loaded the library."""

    name, source = FUNCTION_LIBRARY, d.FUNCTION

    @property
    def loads(self):  # read when needed: the file is read once, not at import
        return ["FUNCTION", "LOAD", "REPLACE", library_code()]

    def __init__(self):
        super().__init__()
        self.installed = False

    def lost(self, e):
        return "function not found" in str(e).lower()

    def absent(self, e):
        # Refused (NOPERM) after its load was refused too: this user cannot
        # use the library; the next backend, or SlidewinModuleError.
        refused = self.install_error is not None and isinstance(e, redis.exceptions.NoPermissionError)
        return is_unknown_command(e) or self.lost(e) or refused

    def why_absent(self, e):
        if self.install_error is not None:
            return f"FUNCTION LOAD of the slidewin library was refused ({self.install_error}), and calling it failed too ({e})"
        return f"the FUNCTION library cannot answer ({e})"

    def check(self, rule, cost, request_id=None):
        return ["FCALL", "slidewin_check", 1, rule.key, rule.limit, rule.window_ms] + _charge_options(cost, request_id)

    def check_all(self, rules, cost, request_id=None):
        limits = [x for r in rules for x in (r.limit, r.window_ms)]
        keys = [r.key for r in rules]
        return ["FCALL", "slidewin_mcheck", len(rules)] + keys + limits + _charge_options(cost, request_id, detail=True)

    def peek(self, rule, cost):
        return ["FCALL_RO", "slidewin_peek", 1, rule.key, rule.limit, rule.window_ms, "COST", cost]

    def undo(self, key, members):
        return ["FCALL", "slidewin_undo", 1, key] + list(members)

    def undo_id(self, key, request_id):
        return ["FCALL", "slidewin_undo", 1, key, "ID", request_id]

    def settle(self, key, request_id, cost):
        return ["FCALL", "slidewin_settle", 1, key, "ID", request_id, "COST", cost]


class ScriptBackend(FunctionBackend):
    """The same library in its EVAL form (`eval_code()`), for servers
    without FUNCTION (Redis 6.x, services that allow EVAL only): installed
    with `SCRIPT LOAD` on every primary and called by `EVALSHA sha numkeys
    key ... function arg ...`, with the same replies (`source "function"`).

    A `NOSCRIPT` reply (a restart, a failover, `SCRIPT FLUSH`) installs it
    again and sends the call again: safe only because NOSCRIPT means the
    server ran nothing of the call, so nothing was charged."""

    name = SCRIPT

    @property
    def loads(self):
        return ["SCRIPT", "LOAD", eval_code()]

    def lost(self, e):
        # redis-py turns the NOSCRIPT reply into NoScriptError.
        return isinstance(e, redis.exceptions.NoScriptError) or str(e).upper().startswith("NOSCRIPT")

    def why_absent(self, e):
        if self.install_error is not None:
            return f"SCRIPT LOAD of the slidewin library's EVAL form was refused ({self.install_error}), and calling it failed too ({e})"
        return f"the EVAL form of the library cannot answer ({e})"

    @staticmethod
    def as_eval(fcall: list) -> list:
        """An FCALL (or FCALL_RO) as the EVAL form takes it."""
        name, numkeys = fcall[1], fcall[2]
        keys, args = fcall[3 : 3 + numkeys], fcall[3 + numkeys :]
        return ["EVALSHA", eval_sha(), numkeys] + keys + [name] + args

    def check(self, rule, cost, request_id=None):
        return self.as_eval(super().check(rule, cost, request_id))

    def check_all(self, rules, cost, request_id=None):
        return self.as_eval(super().check_all(rules, cost, request_id))

    def peek(self, rule, cost):
        return self.as_eval(super().peek(rule, cost))

    def undo(self, key, members):
        return self.as_eval(super().undo(key, members))

    def undo_id(self, key, request_id):
        return self.as_eval(super().undo_id(key, request_id))

    def settle(self, key, request_id, cost):
        return self.as_eval(super().settle(key, request_id, cost))


#: Every backend by name. The default chain is `DEFAULT_BACKENDS`.
BACKENDS = {MODULE: ModuleBackend, FUNCTION_LIBRARY: FunctionBackend, SCRIPT: ScriptBackend}
DEFAULT_BACKENDS = (MODULE, FUNCTION_LIBRARY, SCRIPT)


class Chain:
    """The backends in the order they are tried: the first that answers is
    used from then on; one whose commands the server does not know (or that
    cannot be installed) gives way to the next. When none is left,
    `SlidewinModuleError` names each one and why it could not answer."""

    def __init__(self, names: Sequence[str]):
        names = tuple(names)
        unknown = [n for n in names if n not in BACKENDS]
        if not names or unknown or len(set(names)) != len(names):
            raise ValueError(f"backends must be distinct names among {tuple(BACKENDS)}, in the order to try them; got {names!r}")
        self.names = names
        self.backends = [BACKENDS[n]() for n in names]
        self.index = 0
        self.reasons: List[str] = []

    def current(self) -> Backend:
        if self.index >= len(self.backends):
            off = [n for n in BACKENDS if n not in self.names]
            tail = f"; not tried (backends={self.names!r}): {', '.join(off)}" if off else ""
            raise SlidewinModuleError("slidewin cannot answer on this server: " + "; ".join(self.reasons) + tail)
        return self.backends[self.index]

    def after_error(self, backend: Backend, e: Exception) -> None:
        """`backend`'s call failed with `e` (a reply: the server ran nothing
        that charged, or the error is the caller's): returns to have the
        call tried again, installed again once when what `loads` installed
        was lost, or on the next backend when this one cannot answer;
        raises `e` otherwise."""
        if backend.lost(e) and not backend.reinstalled and backend.install_error is None:
            backend.installed, backend.reinstalled = False, True
            return
        if not backend.absent(e):
            raise e
        self.give_up(backend, e)

    def give_up(self, backend: Backend, e: Exception) -> None:
        """`backend` cannot answer: the next one is tried (once per backend,
        whichever thread sees it first)."""
        if self.index < len(self.backends) and self.backends[self.index] is backend:
            self.reasons.append(backend.why_absent(e))
            self.index += 1


class Attempt:
    """The retries of one call: TRYAGAIN's pauses within the budget, and
    one reconnect after READONLY."""

    def __init__(self, budget_ms: int, clock: Callable[[], int]):
        self.clock = clock
        self.started = clock()
        self.budget_ms = budget_ms
        self.tryagain = 0
        self.reconnected = False
        self.resent = False

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
        backends: Sequence[str] = DEFAULT_BACKENDS,
        log_every_ms: int = st.LOG_EVERY_MS,
        clock: Callable[[], int] = monotonic_ms,
        request_ids: bool = False,
    ):
        if outage not in POLICIES:
            raise ValueError(f"outage must be one of {POLICIES}, got {outage!r}")
        if timeout_ms is not None and timeout_ms <= 0:
            raise ValueError(f"timeout_ms must be a positive number of ms or None, got {timeout_ms!r}")
        self.outage = outage
        self.timeout_ms = timeout_ms
        self.clock = clock
        self.cache = DenialCache(cache_size, clock)
        self.windows = LocalWindows(local_keys, clock)
        self.breaker = CircuitBreaker(breaker_failures, breaker_pause_ms, clock)
        self.chain = Chain(backends)
        self.stats = st.Stats(clock, log_every_ms)
        self.request_ids = bool(request_ids)

    def request_id(self, given) -> Tuple[Union[str, bytes, None], bool]:
        """The id a charging call carries, and whether the caller gave it:
        the caller's (checked), else one made here when `request_ids` is
        on, else None."""
        if given is not None:
            return request_id_of(given), True
        if self.request_ids:
            return new_request_id(), False
        return None, False

    @property
    def source(self) -> str:
        """Where Redis answers come from now: the module or the library."""
        return self.chain.current().source

    def snapshot(self) -> dict:
        """`Limiter.stats()`."""
        backend = self.chain.backends[self.chain.index].name if self.chain.index < len(self.chain.backends) else None
        return {
            "decisions": self.stats.snapshot(),
            "breaker": {"state": self.breaker.state, "opened": self.breaker.opened},
            "backend": backend,
            "outage": self.outage,
        }

    def cached(self, rules: Tuple[Rule, ...], cost: int = 1) -> Optional[Decision]:
        """A refusal from the denial cache when a rule is known to refuse
        `cost` (a denial of a higher cost does not count: see
        `DenialCache`)."""
        wait = max((self.cache.blocked_for(r, cost) for r in rules), default=0)
        if wait > 0:
            self.stats.count(d.LOCAL_CACHE, st.DENIED_BEFORE)
            return d.refusal(rules, wait, d.LOCAL_CACHE)
        return None

    # Around the round trip, for both limiters: what answers before it,
    # after a failure, and after a reply.

    def without_redis(self, kind: str, rules: Tuple[Rule, ...], cost: int, cache: bool = True) -> Optional[Decision]:
        """The denial cache's refusal (unless `cache` is False: a request id
        the caller gave may repeat a call the server charged, which only
        the server can answer), or the outage policy's answer while the
        breaker is open; None when Redis should be asked."""
        cached = self.cached(rules, cost) if cache else None
        if cached:
            return cached
        if not self.breaker.allow():
            return self.outage_answer(kind, rules, cost, st.BREAKER_OPEN)
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

        Only what the server refused without running it is sent again
        (TRYAGAIN, READONLY): a call that timed out or lost its connection
        may have run, and is never sent a second time.

        - connection loss, timeout, LOADING, MASTERDOWN (`OUTAGE_ERRORS`):
          the policy answers, the breaker counts a failure;
        - TRYAGAIN: tried again after `TRYAGAIN_DELAYS_MS` within the
          budget; if it persists, the policy answers that call;
        - CLUSTERDOWN and the other `SLOT_ERRORS`: the policy answers that
          call;
        - OOM, NOREPLICAS, MISCONF (`WRITE_REFUSALS`): the policy answers
          that call;
        - READONLY (the node we reach is a replica now: a failover, and a
          connection still open to the demoted master; redis-py's Sentinel
          connections raise it as "The previous master is now a slave"):
          once more on fresh connections (an endpoint whose name moved, or
          Sentinel, gives the new master then); if it persists, on a plain
          client the policy answers and the breaker counts a failure
          (every key is on that node), on a cluster client the policy
          answers that call;
        - a refused login (NOAUTH, WRONGPASS; redis-py raises them as
          ConnectionErrors): raised, not an outage;
        - anything else: raised.
        Only `OUTAGE_ERRORS` and a READONLY that persists on a plain client
        count toward the breaker; the other errors are replies (a success
        for it: the server is reachable) or, for a slot the client knows no
        node for, leave it as it is.
        """
        if isinstance(e, redis.exceptions.ConnectionError) and isinstance(e.__context__, redis.exceptions.ReadOnlyError):
            e = e.__context__  # redis-py's Sentinel connection: READONLY re-raised as a ConnectionError
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
            return self.outage_answer(kind, rules, cost, st.TRYAGAIN, e)
        if isinstance(e, OUTAGE_ERRORS):
            if isinstance(e, redis.exceptions.BusyLoadingError):
                reason = st.LOADING
            elif isinstance(e, redis.exceptions.MasterDownError):
                reason = st.MASTERDOWN
            elif isinstance(e, redis.exceptions.TimeoutError):
                reason = st.TIMEOUT
            else:
                reason = st.CONNECTION
            return self.failed(kind, rules, cost, reason, e)
        if isinstance(e, redis.exceptions.ReadOnlyError):
            if not attempt.reconnected:
                attempt.reconnected = True
                return RECONNECT
            if cluster:
                self.breaker.success()
                return self.outage_answer(kind, rules, cost, st.READONLY, e)
            return self.failed(kind, rules, cost, st.READONLY, e)
        if isinstance(e, SLOT_ERRORS):
            if isinstance(e, redis.exceptions.RedisError):
                self.breaker.success()  # a node replied
            else:
                self.breaker.release()
            return self.outage_answer(kind, rules, cost, st.CLUSTER, e)
        if write_refused(e):
            self.breaker.success()
            return self.outage_answer(kind, rules, cost, refusal_reason(e), e)
        if isinstance(e, redis.exceptions.ResponseError):
            self.breaker.success()  # the server replied: the caller's error
        else:
            self.breaker.release()
        return None

    def failed(self, kind: str, rules: Tuple[Rule, ...], cost: int, reason: str = st.CONNECTION,
               error: Optional[Exception] = None) -> Decision:
        """Redis could not be reached: the breaker counts it, the outage
        policy answers."""
        opened = self.breaker.opened
        self.breaker.failure()
        if self.breaker.opened != opened:
            self.stats.warn(
                "breaker",
                "slidewin: the circuit breaker opened (%s%s): for %d ms every call gets the outage policy %r without asking Redis",
                reason, f": {error}" if error else "", self.breaker.pause_ms, self.outage,
            )
        return self.outage_answer(kind, rules, cost, reason, error)

    def answered(self, kind: str, reply, rules: Tuple[Rule, ...], cost: int = 1, since: Optional[int] = None,
                 source: Optional[str] = None, request_id=None) -> Decision:
        """Redis replied: its Decision; a denial is remembered with its cost
        (not a peek's), timed from `since`, the clock read before the
        request was sent."""
        self.breaker.success()
        decision = self.parse(kind, reply, rules, source or self.source, request_id)
        self.stats.count(decision.source, st.DECIDED)
        if kind != PEEK:
            self.remember(decision, cost, since)
        return decision

    # One call of each kind: its command, its reply's Decision, its answer
    # while Redis is away; `Limiter` and `AsyncLimiter` only do the I/O.

    @staticmethod
    def command(kind: str, backend: Backend, rules: Tuple[Rule, ...], cost: int, request_id=None) -> list:
        if kind == CHECK_ALL:
            return backend.check_all(rules, cost, request_id)
        if kind == PEEK:
            return backend.peek(rules[0], cost)
        return backend.check(rules[0], cost, request_id)

    def parse(self, kind: str, reply, rules: Tuple[Rule, ...], source: str, request_id=None) -> Decision:
        if kind == CHECK_ALL:
            decision = d.from_multi(reply, list(rules), source, with_members=request_id is None)
        else:
            members = reply[5] if kind == CHECK and request_id is None else ()
            decision = d.from_detail(reply, rules[0], source, members)
        return with_request_id(decision, request_id)

    def undo_plan(self, target, request_id=None) -> Tuple[List, Union[str, bytes, None], Tuple[str, ...]]:
        """What `undo(target, request_id)` sends: (the keys, the request id
        or None, the members); no keys: nothing to send.

        `target` is a Decision (its own request id, else its members), or a
        key or a list of keys with `request_id`."""
        if isinstance(target, Decision):
            rid = target.request_id
            if request_id is not None and (rid is None or request_id_of(request_id) != rid):
                raise ValueError("undo(decision) gives back the decision's own charge: pass request_id only with keys")
            if rid is not None:
                return (target.keys if may_hold_charge(target) else []), rid, ()
            if not target.allowed or not target.members:
                return [], None, ()
            return target.keys, None, target.members
        if request_id is None:
            raise TypeError("undo(key or keys) needs request_id=: the id the charge was made under")
        return _keys(target), request_id_of(request_id), ()

    def gave_back(self, key) -> None:
        """This instance gave entries of `key` back (UNDO, SETTLE): the
        denial cache forgets the key."""
        self.cache.forget_key(key)

    def exit_failed(self, what: str, reservation, e: Exception) -> None:
        """A reservation's settle or refund at the end of its block could
        not be sent: logged (rate-limited), not raised. The charge then
        stays as reserved until it leaves its window."""
        self.stats.warn(
            "reservation:" + what,
            "slidewin: a reservation's %s was not applied (%s); its charge under request id %r stays as reserved until it leaves the window",
            what, e, reservation.request_id,
        )

    def outage_answer(self, kind: str, rules: Tuple[Rule, ...], cost: int, reason: str = st.CONNECTION,
                      error: Optional[Exception] = None) -> Decision:
        """The outage policy's answer, counted and logged (rate-limited); a
        peek charges no local window."""
        if kind != PEEK:
            decision = self.during_outage(rules, cost)
        elif self.outage in (ALLOW, LOCAL):
            decision = d.admission(rules, None, d.FALLBACK)
        else:
            decision = d.refusal(rules, self.breaker.pause_ms, d.FALLBACK)
        self.stats.count(d.FALLBACK, reason)
        self.stats.warn(
            "fallback:" + reason,
            "slidewin: Redis did not decide (%s%s); the outage policy %r %s the call",
            reason, f": {error}" if error else "", self.outage, "admitted" if decision.allowed else "refused",
        )
        return decision

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


def with_request_id(decision: Decision, request_id) -> Decision:
    """`decision`, carrying the request id its call was made under."""
    return decision if request_id is None else dataclasses.replace(decision, request_id=request_id)


def quiet_on_exit(e: Exception) -> bool:
    """Whether an error of a reservation's settle or refund at the end of
    its block is logged instead of raised: the server out of reach, one
    slot's trouble, writes refused. The rest (WRONGTYPE, NOPERM, a bad
    argument) is raised."""
    return isinstance(e, OUTAGE_ERRORS + SLOT_ERRORS) or write_refused(e)


def refusal_reason(e: Exception) -> str:
    """`oom`, `noreplicas` or `misconf`."""
    if isinstance(e, redis.exceptions.OutOfMemoryError):
        return "oom"
    return str(e).split(" ", 1)[0].lower()


def _key(key):
    """A key as redis-py sends it: bytes unchanged (a bytearray or
    memoryview as its bytes), str as UTF-8 (redis-py encodes it), a number
    as its text."""
    if isinstance(key, (bytes, str)):
        return key
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    if isinstance(key, (int, float)) and not isinstance(key, bool):
        return str(key)
    raise TypeError(f"a key is str or bytes, got {type(key).__name__}")


def _rule(key, limit, window_ms) -> Rule:
    return Rule(_key(key), int(limit), int(window_ms))


def _keys(target) -> List:
    """A key, or keys, as `undo` and `settle` take them."""
    if isinstance(target, (bytes, str, bytearray, memoryview, int, float)):
        return [_key(target)]
    keys = []
    for k in target:
        k = _key(k)
        if k not in keys:
            keys.append(k)
    if not keys:
        raise ValueError("undo needs at least one key")
    return keys


def _rules(rules: Iterable) -> Tuple[Rule, ...]:
    """`Rule`s or `(key, limit, window_ms)` tuples, at least one."""
    out = tuple(_rule(r.key, r.limit, r.window_ms) if isinstance(r, Rule) else _rule(*r) for r in rules)
    if not out:
        raise ValueError("check_all needs at least one rule")
    return out


class Limiter:
    """Sliding-window checks on a redis-py client.

    `client`: `redis.Redis` on any connection (TCP, Unix socket, TLS,
    Sentinel's `master_for`, a pool of your own) or
    `redis.cluster.RedisCluster`. The limiter sends its commands on
    connections of its own, made with the client's settings plus
    `timeout_ms` (connect and reply; None keeps the client's own timeouts)
    and without retries: a charging command (CHECK, MCHECK, UNDO, their
    FCALLs) is sent once, never again after a timeout or a lost connection
    (it may have run); only what the server refused without running it
    (READONLY, TRYAGAIN, MOVED, ASK) goes again, and a call made with a
    request id (which the server charges once) goes once more after a
    timeout or a lost connection.

    `request_ids=True` gives every `check` and `check_all` a request id of
    16 random bytes (off by default: an id costs memory on every entry it
    charges, see docs/llm-gateway.md); `request_id=` gives one to a call.

    `outage` is `deny`, `allow` or `local` (an exact per-instance window);
    it answers while Redis cannot decide: unreachable, slower than
    `timeout_ms`, loading, a slot migrating or down, writes refused (OOM,
    NOREPLICAS, MISCONF); see `Policy.after_error` for each error. The
    circuit breaker (open after `breaker_failures` consecutive failures,
    probing again after `breaker_pause_ms`) keeps calls from waiting out
    the timeout meanwhile; it counts only what concerns every key
    (connection loss, timeouts, LOADING, MASTERDOWN, a READONLY that
    persists on fresh connections), never one slot's trouble. TRYAGAIN is
    tried again a few times within `timeout_ms` first. Every answer the
    server did not give is counted (`stats()`) and logged at WARNING on the
    `slidewin` logger, at most once per `log_every_ms` per reason.

    Denials are cached for their wait (`cache_size` rules) with the cost
    refused: a caller refused is refused again without a round trip, for
    that cost and any higher one; a lower cost is asked of Redis (it may
    fit).

    `backends`: who answers, tried in order: `"module"` (SLIDEWIN.*), then
    `"function"` (the packaged FUNCTION library, loaded with `FUNCTION LOAD
    REPLACE` on every primary the first time the module is found missing).
    `backends=("module",)` turns the fallback off: a server without the
    module raises `SlidewinModuleError`, as does one where no backend can
    answer (the error names each and why).
    """

    def __init__(self, client, **options):
        self.policy = Policy(**options)
        self.link = Link(client, self.policy.timeout_ms)
        self.client = client
        self._cluster = self.link.cluster

    @classmethod
    def from_url(cls, url: str, **options) -> "Limiter":
        return cls(redis.Redis.from_url(url), **options)

    def stats(self) -> dict:
        """What the limiter answered, and how: `{"decisions": {source:
        {reason: count}}, "breaker": {"state", "opened"}, "backend",
        "outage"}`. Sources `redis`/`function` count the server's
        decisions (reason `decided`); `local-cache` and `fallback` the
        others, by reason (see `slidewin.stats`)."""
        return self.policy.snapshot()

    def close(self) -> None:
        """Closes the limiter's connections (the client given stays open)."""
        self.link.close()

    # -- I/O -------------------------------------------------------------

    def _send(self, key, build: Callable[[Backend], list]):
        """Runs one call on the first backend of the chain that can answer;
        connection errors propagate. Returns (reply, source)."""
        chain = self.policy.chain
        while True:
            backend = chain.current()
            if not backend.installed:
                try:
                    self.link.on_every_primary(backend.loads)
                    backend.install_error = None
                except redis.exceptions.ResponseError as e:
                    backend.install_error = e  # NOPERM, no FUNCTION: try the calls anyway
                backend.installed = True
            try:
                reply = self.link.execute(key, build(backend))
                # What was lost may be installed again after this success.
                backend.reinstalled = False
                return reply, backend.source
            except redis.exceptions.ResponseError as e:
                chain.after_error(backend, e)

    def _send_again_once(self, key, build: Callable[[Backend], list]):
        """`_send` for a call the server runs the same however often it
        comes (UNDO or SETTLE by request id): sent once more after an error
        that leaves its fate unknown (`resendable`)."""
        try:
            return self._send(key, build)
        except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException) as e:
            if not resendable(e):
                raise
        return self._send(key, build)

    def _decide(self, kind: str, rules: Tuple[Rule, ...], cost: int, request_id=None, given: bool = False) -> Decision:
        """The local cache (not for an id the caller `given`: it may repeat
        a charged call), else Redis (the breaker permitting), else the
        outage policy; denials from Redis are remembered (not a peek's). A
        call with a request id is sent once more after a lost connection or
        a timeout: the server charges an id once."""
        policy = self.policy
        early = policy.without_redis(kind, rules, cost, cache=not given)
        if early:
            return with_request_id(early, request_id)
        attempt = policy.attempt()
        while True:
            since = policy.clock()
            try:
                reply, source = self._send(rules[0].key, lambda b: policy.command(kind, b, rules, cost, request_id))
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
                    self.link.reconnect()
                else:
                    time.sleep(step)
                continue
            except BaseException:
                policy.breaker.release()
                raise
            return policy.answered(kind, reply, rules, cost, since, source, request_id)

    # -- API -------------------------------------------------------------

    def check(self, key, limit: int, window_ms: int, cost: int = 1, request_id=None) -> Decision:
        """SLIDEWIN.CHECK: records `cost` calls on `key` (str or bytes, sent
        as redis-py sends keys) if they fit.

        `request_id` (str or bytes, 1 to 128 bytes): the charge is made
        under that id (`CHECK ... ID`): while it is in its window, the same
        id again charges nothing and is allowed; `undo` and `settle` change
        it by its id. Such a call is sent once more after a lost connection
        or a timeout, and skips the denial cache. With
        `Limiter(request_ids=True)` every check without one gets an id made
        here (`decision.request_id`)."""
        rid, given = self.policy.request_id(request_id)
        return self._decide(CHECK, (_rule(key, limit, window_ms),), cost, rid, given)

    def check_all(self, rules: Iterable, cost: int = 1, request_id=None) -> Decision:
        """SLIDEWIN.MCHECK: every rule `(key, limit, window_ms)` must allow
        `cost`, and then all are charged; all or nothing. `request_id`: as
        for `check`, one id for the call, a charge under it on each key (a
        repeat is recognised when any key still holds it)."""
        rid, given = self.policy.request_id(request_id)
        return self._decide(CHECK_ALL, _rules(rules), cost, rid, given)

    def reserve(self, key, limit: int, window_ms: int, cost: int, request_id=None) -> Reservation:
        """A reservation of `cost` units on one rule (a context manager:
        `with limiter.reserve(...) as r:`): a CHECK under a request id
        (`request_id`, else 16 random bytes), settled at `r.cost` when the
        block ends, refunded when it ends by an exception. See
        `slidewin.reservation`."""
        rid, given = (request_id_of(request_id), True) if request_id is not None else (new_request_id(), False)
        return Reservation(self, CHECK, (_rule(key, limit, window_ms),), cost, rid, given)

    def reserve_all(self, rules: Iterable, cost: int, request_id=None) -> Reservation:
        """`reserve` on several rules (one MCHECK): `cost` on each key, all
        or nothing; settled and refunded on each key."""
        rid, given = (request_id_of(request_id), True) if request_id is not None else (new_request_id(), False)
        return Reservation(self, CHECK_ALL, _rules(rules), cost, rid, given)

    def settle(self, key, request_id, cost: int) -> Optional[int]:
        """SLIDEWIN.SETTLE: sets the units charged under `request_id` on
        `key` to `cost`: fewer gives the difference back, more adds it at
        the charge's own time (even past the limit: later calls wait), 0
        gives it all back. Returns the units now charged, or None when the
        key holds no charge under that id (it left its window, or was never
        made): nothing changed. Sent once more after a lost connection or a
        timeout (setting the same units twice is setting them once); other
        errors are raised."""
        key, rid, cost = _key(key), request_id_of(request_id), int(cost)
        self.policy.gave_back(key)
        reply, _ = self._send_again_once(key, lambda b: b.settle(key, rid, cost))
        units = int(reply)
        return None if units < 0 else units

    def peek(self, key, limit: int, window_ms: int, cost: int = 1) -> Decision:
        """SLIDEWIN.PEEK: what `check` would answer now, changing nothing.
        While Redis is away it answers like the outage policy would, without
        charging the local window."""
        return self._decide(PEEK, (_rule(key, limit, window_ms),), cost)

    def undo(self, target, request_id=None) -> int:
        """SLIDEWIN.UNDO: gives a charge back on every key it was made on;
        returns the entries removed.

        - `undo(decision)` for a decision made without a request id: its
          members, sent once per key, never again (an error is raised to
          you: the UNDO may have run). A decision without members (a
          peek's, a refusal, an outage answer) charged nothing: a no-op
          that returns 0 and sends nothing.
        - `undo(decision)` for one made with a request id, or
          `undo(key_or_keys, request_id=...)`: `UNDO key ID request-id`,
          exact and idempotent, so sent once more after a lost connection
          or a timeout (the count then misses what the first send removed).
          An outage answer's charge is asked for too (its call may have run
          before the reply was lost); a refusal from the server or the
          denial cache sends nothing.
        """
        keys, rid, members = self.policy.undo_plan(target, request_id)
        removed = 0
        for key in keys:
            self.policy.gave_back(key)
            if rid is None:
                reply, _ = self._send(key, lambda b, k=key: b.undo(k, members))
            else:
                reply, _ = self._send_again_once(key, lambda b, k=key: b.undo_id(k, rid))
            removed += int(reply)
        return removed


def merge_top(replies: Iterable[List]) -> List[Tuple[Union[str, bytes], int, int]]:
    """Merges SLIDEWIN.TOP replies from several nodes (a cluster's masters
    each answer for their own keys): counts and error bounds add per key,
    heaviest first. A key is given as text when it is UTF-8, else as the
    bytes the server holds (a key of any bytes is a valid key)."""
    merged = {}
    for reply in replies:
        for key, count, error in reply:
            raw = key_bytes(key)
            c, e = merged.get(raw, (0, 0))
            merged[raw] = (c + int(count), e + int(error))
    ordered = sorted(merged.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return [(_as_text(k), c, e) for k, (c, e) in ordered]


def _as_text(raw: bytes) -> Union[str, bytes]:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


__all__ = ["Limiter", "Policy", "Backend", "Chain", "BACKENDS", "DEFAULT_BACKENDS", "MODULE", "FUNCTION_LIBRARY", "SCRIPT", "eval_code",
           "DENY", "ALLOW", "LOCAL", "merge_top", "library_code"]
