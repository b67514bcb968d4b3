"""The outage policy: what a limiter answers while the server cannot
decide (unreachable, slower than the timeout, loading, a slot migrating or
down, writes refused), which errors count toward the circuit breaker, and
which failed calls may be sent again."""

from typing import Callable, Optional, Tuple, Union

import redis

from . import decision as d
from . import stats as st
from .calls import PEEK
from .decision import Decision, Rule

#: What to answer while Redis is unreachable or slower than the timeout.
DENY, ALLOW, LOCAL = "deny", "allow", "local"
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


class OutagePolicy:
    """The outage policy's part of `policy.Policy` (it holds `outage`,
    `breaker`, `windows`, `stats`, `timeout_ms` and `clock`): what a failed
    round trip leads to, and the answers given without the server."""

    outage: str
    timeout_ms: Optional[int]
    clock: Callable[[], int]

    def attempt(self) -> Attempt:
        """The retry state of one call."""
        budget = self.timeout_ms if self.timeout_ms else TRYAGAIN_BUDGET_MS
        return Attempt(min(budget, TRYAGAIN_BUDGET_MS), self.clock)

    def after_error(
        self, e: Exception, kind: str, rules: Tuple[Rule, ...], cost: int, attempt: Attempt, cluster: bool,
        shadow: bool = False,
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
            return self.outage_answer(kind, rules, cost, st.TRYAGAIN, e, shadow)
        if isinstance(e, OUTAGE_ERRORS):
            if isinstance(e, redis.exceptions.BusyLoadingError):
                reason = st.LOADING
            elif isinstance(e, redis.exceptions.MasterDownError):
                reason = st.MASTERDOWN
            elif isinstance(e, redis.exceptions.TimeoutError):
                reason = st.TIMEOUT
            else:
                reason = st.CONNECTION
            return self.failed(kind, rules, cost, reason, e, shadow)
        if isinstance(e, redis.exceptions.ReadOnlyError):
            if not attempt.reconnected:
                attempt.reconnected = True
                return RECONNECT
            if cluster:
                self.breaker.success()
                return self.outage_answer(kind, rules, cost, st.READONLY, e, shadow)
            return self.failed(kind, rules, cost, st.READONLY, e, shadow)
        if isinstance(e, SLOT_ERRORS):
            if isinstance(e, redis.exceptions.RedisError):
                self.breaker.success()  # a node replied
            else:
                self.breaker.release()
            return self.outage_answer(kind, rules, cost, st.CLUSTER, e, shadow)
        if write_refused(e):
            self.breaker.success()
            return self.outage_answer(kind, rules, cost, refusal_reason(e), e, shadow)
        if isinstance(e, redis.exceptions.ResponseError):
            self.breaker.success()  # the server replied: the caller's error
        else:
            self.breaker.release()
        return None

    def failed(self, kind: str, rules: Tuple[Rule, ...], cost: int, reason: str = st.CONNECTION,
               error: Optional[Exception] = None, shadow: bool = False) -> Decision:
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
        return self.outage_answer(kind, rules, cost, reason, error, shadow)

    def outage_answer(self, kind: str, rules: Tuple[Rule, ...], cost: int, reason: str = st.CONNECTION,
                      error: Optional[Exception] = None, shadow: bool = False) -> Decision:
        """The outage policy's answer, counted and logged (rate-limited); a
        peek charges no local window. A shadow call is let through what the
        policy refuses (`shadow_refused`: counted as such)."""
        if kind != PEEK:
            decision = self.during_outage(rules, cost)
        elif self.outage in (ALLOW, LOCAL):
            decision = d.admission(rules, None, d.FALLBACK)
        else:
            decision = d.refusal(rules, self.breaker.pause_ms, d.FALLBACK)
        self.stats.count(d.FALLBACK, reason)
        if shadow and not decision.allowed:
            decision = d.let_through(decision)
            self.stats.shadow_refused(d.FALLBACK)
        self.stats.warn(
            "fallback:" + reason,
            "slidewin: Redis did not decide (%s%s); the outage policy %r %s the call",
            reason, f": {error}" if error else "", self.outage,
            "let through (a shadow call)" if decision.shadow_refused else "admitted" if decision.allowed else "refused",
        )
        return decision

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
