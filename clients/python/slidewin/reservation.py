"""Reservations: charge an estimate now, settle the real cost at the end.

    with limiter.reserve(f"tpm:{api_key}", 100_000, 60_000, cost=estimate) as r:
        if not r.allowed:
            return 429, r.headers()
        reply = call_the_model()          # an exception here gives the charge back
        r.cost = reply.usage.total_tokens  # settled to this on the way out

A reservation is one CHECK (`reserve`) or MCHECK (`reserve_all`) made with
a request id (the caller's, or 16 random bytes made here), so it can be
changed later: leaving the block normally sends `SLIDEWIN.SETTLE key ID
request-id COST cost` on each key when `cost` changed (nothing when it did
not), and leaving it by an exception sends `SLIDEWIN.UNDO key ID
request-id`. A refusal is reported as `check` reports it (`allowed` False,
`decision`, `headers()`): nothing is charged, and leaving does nothing. An
answer of the outage policy may come from a call that ran before its reply
was lost: leaving gives that charge back when it was refused, and settles
it when it was admitted.

What cannot be sent on the way out (the server out of reach, a slot's
trouble, writes refused) is logged at WARNING on the `slidewin` logger,
rate-limited, and not raised: the charge then stays as reserved until it
leaves its window. While the circuit breaker is open, an outage answer's
charge is not asked about at all. Other errors (WRONGTYPE, NOPERM) are
raised on a normal exit, logged after an exception (never masking it).
`commit()` and `refund()` do the same work explicitly and raise every
error.
"""

from typing import Dict, Optional, Tuple, Union

import redis

from . import decision as d
from .calls import may_hold_charge
from .decision import Decision, Rule
from .outage import quiet_on_exit

Key = Union[str, bytes]

_ERRORS = (redis.exceptions.RedisError, redis.exceptions.RedisClusterException)


class _State:
    """What a reservation holds; the I/O is its sync or async subclass's."""

    def __init__(self, limiter, kind: str, rules: Tuple[Rule, ...], cost: int, request_id: Key, given: bool,
                 shadow: bool = False):
        self._limiter = limiter
        self._kind = kind
        self._given = given
        self._shadow = shadow
        #: The rules charged.
        self.rules = rules
        #: The id the charge is made under.
        self.request_id = request_id
        #: The units reserved (the estimate).
        self.reserved = int(cost)
        #: The units to settle at when the block ends: set it to the actual cost.
        self.cost = int(cost)
        #: The reservation's decision (None until it is entered).
        self.decision: Optional[Decision] = None
        #: After a settle: per key, the units now charged, or None when the
        #: key held no charge under the id (it left its window, or the call
        #: never reached the server). None when nothing was settled.
        self.settled: Optional[Dict[Key, Optional[int]]] = None
        #: After a refund: the entries removed. None when nothing was refunded.
        self.refunded: Optional[int] = None
        self._done = False

    @property
    def allowed(self) -> bool:
        return self.decision is not None and self.decision.allowed

    def headers(self) -> Dict[str, str]:
        """The decision's RateLimit headers."""
        if self.decision is None:
            raise RuntimeError("the reservation has not been made yet: use it in a with block")
        return self.decision.headers()

    def _may_hold(self) -> bool:
        return self.decision is not None and may_hold_charge(self.decision)

    def _exit_step(self, failed: bool) -> Optional[str]:
        """What leaving the block sends: "settle", "refund", or None."""
        if self._done or not self._may_hold():
            return None
        if failed or not self.decision.allowed:
            return "refund"
        return "settle" if self.cost != self.reserved else None

    def _skip(self, step: str) -> bool:
        """An outage answer while the breaker is open: not asked (logged)."""
        policy = self._limiter.policy
        if self.decision.source == d.FALLBACK and policy.breaker.state == "open":
            policy.exit_failed(step, self, "the circuit breaker is open")
            return True
        return False

    def _exit_error(self, step: str, failed: bool, e: Exception) -> None:
        if not failed and not quiet_on_exit(e):
            raise e
        self._limiter.policy.exit_failed(step, self, e)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(request_id={self.request_id!r}, reserved={self.reserved}, cost={self.cost}, "
                f"decision={self.decision!r}, settled={self.settled!r}, refunded={self.refunded!r})")


class Reservation(_State):
    """`Limiter.reserve` / `Limiter.reserve_all`: a context manager (see
    the module's documentation)."""

    def __enter__(self) -> "Reservation":
        self.decision = self._limiter._decide(self._kind, self.rules, self.reserved, self.request_id, self._given, self._shadow)
        return self

    def commit(self) -> Optional[Dict[Key, Optional[int]]]:
        """Settles the charge at `cost` on every key now (refunds it when
        the reservation was refused: see `refund`); returns `settled`.
        Errors are raised."""
        self._done = True
        if not self._may_hold():
            return None
        if not self.decision.allowed:
            self.refund()
            return None
        self.settled = {k: self._limiter.settle(k, self.request_id, self.cost) for k in self.decision.keys}
        return self.settled

    def refund(self) -> int:
        """Gives the whole charge back now (UNDO by its id on every key);
        returns the entries removed. Errors are raised."""
        self._done = True
        self.refunded = self._limiter.undo(self.decision) if self._may_hold() else 0
        return self.refunded

    def __exit__(self, exc_type, exc, tb) -> bool:
        failed = exc_type is not None
        step = self._exit_step(failed)
        if step is None or self._skip(step):
            self._done = True
            return False
        try:
            if step == "refund":
                self.refund()
            else:
                self.commit()
        except _ERRORS as e:
            self._exit_error(step, failed, e)
        return False


class AsyncReservation(_State):
    """`AsyncLimiter.reserve` / `reserve_all`: `async with`."""

    async def __aenter__(self) -> "AsyncReservation":
        self.decision = await self._limiter._decide(self._kind, self.rules, self.reserved, self.request_id, self._given, self._shadow)
        return self

    async def commit(self) -> Optional[Dict[Key, Optional[int]]]:
        """As `Reservation.commit`."""
        self._done = True
        if not self._may_hold():
            return None
        if not self.decision.allowed:
            await self.refund()
            return None
        settled = {}
        for k in self.decision.keys:
            settled[k] = await self._limiter.settle(k, self.request_id, self.cost)
        self.settled = settled
        return settled

    async def refund(self) -> int:
        """As `Reservation.refund`."""
        self._done = True
        self.refunded = await self._limiter.undo(self.decision) if self._may_hold() else 0
        return self.refunded

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        failed = exc_type is not None
        step = self._exit_step(failed)
        if step is None or self._skip(step):
            self._done = True
            return False
        try:
            if step == "refund":
                await self.refund()
            else:
                await self.commit()
        except _ERRORS as e:
            self._exit_error(step, failed, e)
        return False


__all__ = ["Reservation", "AsyncReservation"]
