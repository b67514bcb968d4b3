"""`Policy`: everything a limiter decides apart from the I/O, shared by
`Limiter` and `AsyncLimiter`: its options, the denial cache, the backends'
chain, the outage policy (`outage.OutagePolicy`) and the counts."""

from typing import Callable, Optional, Sequence, Tuple, Union

from . import calls
from . import decision as d
from . import stats as st
from .backends import DEFAULT_BACKENDS, Backend, Chain
from .calls import PEEK, new_request_id, request_id_of
from .decision import Decision, Rule
from .local import CircuitBreaker, DenialCache, LocalWindows, monotonic_ms
from .outage import DENY, POLICIES, OutagePolicy


class Policy(OutagePolicy):
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
        shadow: bool = False,
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
        self.shadow = bool(shadow)

    def request_id(self, given) -> Tuple[Union[str, bytes, None], bool]:
        """The id a charging call carries, and whether the caller gave it:
        the caller's (checked), else one made here when `request_ids` is
        on, else None."""
        if given is not None:
            return request_id_of(given), True
        if self.request_ids:
            return new_request_id(), False
        return None, False

    def shadow_of(self, shadow: Optional[bool]) -> bool:
        """Whether a call is a shadow call: as asked, else the limiter's
        `shadow`."""
        return self.shadow if shadow is None else bool(shadow)

    @property
    def source(self) -> str:
        """Where Redis answers come from now: the module or the library."""
        return self.chain.current().source

    def snapshot(self) -> dict:
        """`Limiter.stats()`."""
        backend = self.chain.backends[self.chain.index].name if self.chain.index < len(self.chain.backends) else None
        return {
            "decisions": self.stats.snapshot(),
            "shadow_refused": self.stats.shadow_snapshot(),
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

    # Around the round trip: what answers before it, and after a reply
    # (after a failure: `OutagePolicy.after_error`).

    def without_redis(self, kind: str, rules: Tuple[Rule, ...], cost: int, cache: bool = True,
                      shadow: bool = False) -> Optional[Decision]:
        """The denial cache's refusal (unless `cache` is False: a request id
        the caller gave may repeat a call the server charged, which only
        the server can answer; a shadow call is never refused), or the
        outage policy's answer while the breaker is open; None when Redis
        should be asked."""
        cached = self.cached(rules, cost) if cache and not shadow else None
        if cached:
            return cached
        if not self.breaker.allow():
            return self.outage_answer(kind, rules, cost, st.BREAKER_OPEN, shadow=shadow)
        return None

    def answered(self, kind: str, reply, rules: Tuple[Rule, ...], cost: int = 1, since: Optional[int] = None,
                 source: Optional[str] = None, request_id=None, shadow: bool = False) -> Decision:
        """Redis replied: its Decision; a denial is remembered with its cost
        (not a peek's), timed from `since`, the clock read before the
        request was sent. A shadow call the limit would have refused is
        counted apart (`stats()["shadow_refused"]`)."""
        self.breaker.success()
        decision = self.parse(kind, reply, rules, source or self.source, request_id, shadow)
        self.stats.count(decision.source, st.DECIDED)
        if decision.shadow_refused:
            self.stats.shadow_refused(decision.source)
        if kind != PEEK:
            self.remember(decision, cost, since)
        return decision

    # One call of each kind: its command and its reply's Decision (calls.py).

    @staticmethod
    def command(kind: str, backend: Backend, rules: Tuple[Rule, ...], cost: int, request_id=None,
                shadow: bool = False) -> list:
        return calls.command(kind, backend, rules, cost, request_id, shadow)

    def parse(self, kind: str, reply, rules: Tuple[Rule, ...], source: str, request_id=None,
              shadow: bool = False) -> Decision:
        return calls.parse(kind, reply, rules, source, request_id, shadow)

    @staticmethod
    def undo_plan(target, request_id=None):
        """`calls.undo_plan`."""
        return calls.undo_plan(target, request_id)

    def gave_back(self, key) -> None:
        """This instance gave entries of `key` back (UNDO, SETTLE): the
        denial cache forgets the key."""
        self.cache.forget_key(key)

    def exit_failed(self, what: str, reservation, e) -> None:
        """A reservation's settle or refund at the end of its block could
        not be sent: logged (rate-limited), not raised. The charge then
        stays as reserved until it leaves its window."""
        self.stats.warn(
            "reservation:" + what,
            "slidewin: a reservation's %s was not applied (%s); its charge under request id %r stays as reserved until it leaves the window",
            what, e, reservation.request_id,
        )

    def remember(self, decision: Decision, cost: int = 1, since: Optional[int] = None) -> None:
        """Caches the refusing rules of a denial from Redis (not from the
        cache itself or the outage policy; never a shadow call's: it was
        let through), each with the cost refused and its own wait."""
        if decision.allowed or decision.source not in (d.REDIS, d.FUNCTION):
            return
        per_rule = decision.per_rule or (decision,)
        for sub in per_rule:
            if not sub.allowed:
                for r in sub.rules:
                    self.cache.block(r, sub.retry_after_ms, cost, since)


__all__ = ["Policy"]
