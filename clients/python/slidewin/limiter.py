"""`Limiter`: slidewin for a redis-py client (`redis.Redis` on any pool:
TCP, Unix socket, TLS, Sentinel's `master_for`; or
`redis.cluster.RedisCluster`).

The limiter is assembled from modules of one concern each, and every name
they held here is still importable from here:
- `calls`: the calls' arguments, commands and replies' decisions;
- `backends`: who answers (the module, the FUNCTION library, its EVAL form);
- `outage`: the outage policy, its errors and retries;
- `policy`: `Policy`, the options, denial cache and counts around them;
- `steps`: each call written once, driven here and in `AsyncLimiter`."""

from typing import Callable, Iterable, Optional, Tuple

import redis

from . import steps as st
from .backends import (BACKENDS, DEFAULT_BACKENDS, EVAL_FRAME_PATH, FUNCTION_LIBRARY, LIBRARY_PATH, MODULE, SCRIPT,  # noqa: F401
                       Backend, Chain, FunctionBackend, ModuleBackend, ScriptBackend, eval_code, eval_sha, is_unknown_command,
                       library_code)
from .calls import (CHECK, CHECK_ALL, MAX_REQUEST_ID, PEEK, _key, _keys, _rule, _rules, may_hold_charge, merge_top,  # noqa: F401
                    new_request_id, request_id_of, reservation_id, with_request_id)
from .backends import _charge_options  # noqa: F401
from .calls import _as_text  # noqa: F401
from .connections import Link
from .decision import Decision, Rule
from .errors import SlidewinModuleError  # noqa: F401
from .local import CircuitBreaker, DenialCache, LocalWindows, key_bytes, monotonic_ms  # noqa: F401
from .outage import (ALLOW, DENY, LOCAL, OUTAGE_ERRORS, POLICIES, RECONNECT, SLOT_ERRORS, TRYAGAIN_BUDGET_MS,  # noqa: F401
                     TRYAGAIN_DELAYS_MS, WRITE_REFUSALS, Attempt, quiet_on_exit, refusal_reason, resendable, write_refused)
from .policy import Policy
from .reservation import Reservation


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
    answer (the error names each and why). A server whose module is older
    than this client (it refuses a command or an option the client sends,
    such as SLIDEWIN.SETTLE or SHADOW) raises `SlidewinModuleError` naming
    what it lacks and the module's version: the library is used only where
    the module is not loaded at all.

    `shadow=True` makes every check a shadow call (see `check`) unless the
    call says otherwise.
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
        {reason: count}}, "shadow_refused": {source: count}, "breaker":
        {"state", "opened"}, "backend", "outage"}`. Sources
        `redis`/`function` count the server's decisions (reason `decided`);
        `local-cache` and `fallback` the others, by reason (see
        `slidewin.stats`); `shadow_refused` the shadow calls let through
        that the limit (or the outage policy) would have refused."""
        return self.policy.snapshot()

    def close(self) -> None:
        """Closes the limiter's connections (the client given stays open)."""
        self.link.close()

    # -- I/O: the calls themselves are written once, in `steps` ------------

    def _run(self, steps):
        return st.run(steps, self.link)

    def _send(self, key, build: Callable[[Backend], list]):
        """Runs one call on the first backend of the chain that can answer
        (`steps.send`). Returns (reply, source)."""
        return self._run(st.send(self.policy, key, build))

    def _send_again_once(self, key, build: Callable[[Backend], list]):
        """`steps.send_again_once`: once more after an error that leaves the fate unknown."""
        return self._run(st.send_again_once(self.policy, key, build))

    def _decide(self, kind: str, rules: Tuple[Rule, ...], cost: int, request_id=None, given: bool = False,
                shadow: bool = False) -> Decision:
        """`steps.decide`: the local cache, else Redis, else the outage policy."""
        return self._run(st.decide(self.policy, self._cluster, kind, rules, cost, request_id, given, shadow))

    # -- API -------------------------------------------------------------

    def check(self, key, limit: int, window_ms: int, cost: int = 1, request_id=None,
              shadow: Optional[bool] = None) -> Decision:
        """SLIDEWIN.CHECK: records `cost` calls on `key` (str or bytes, sent
        as redis-py sends keys) if they fit.

        `request_id` (str or bytes, 1 to 128 bytes): the charge is made
        under that id (`CHECK ... ID`): while it is in its window, the same
        id again charges nothing and is allowed; `undo` and `settle` change
        it by its id. Such a call is sent once more after a lost connection
        or a timeout, and skips the denial cache. With
        `Limiter(request_ids=True)` every check without one gets an id made
        here (`decision.request_id`).

        `shadow=True` (`CHECK ... SHADOW`; None: the limiter's `shadow`)
        puts the limit on trial: a call it would refuse is let through,
        charging nothing, with `decision.shadow_refused` True (counted in
        `stats()["shadow_refused"]`); while Redis is away, what the outage
        policy refuses is let through the same way."""
        return self._run(st.check(self.policy, self._cluster, key, limit, window_ms, cost, request_id, shadow))

    def check_all(self, rules: Iterable, cost: int = 1, request_id=None, shadow: Optional[bool] = None) -> Decision:
        """SLIDEWIN.MCHECK: every rule `(key, limit, window_ms)` must allow
        `cost`, and then all are charged; all or nothing. `request_id`: as
        for `check`, one id for the call, a charge under it on each key (a
        repeat is recognised when any key still holds it). `shadow`: as for
        `check`, for the whole call (`decision.per_rule` tells which rule
        would have refused)."""
        return self._run(st.check_all(self.policy, self._cluster, rules, cost, request_id, shadow))

    def reserve(self, key, limit: int, window_ms: int, cost: int, request_id=None,
                shadow: Optional[bool] = None) -> Reservation:
        """A reservation of `cost` units on one rule (a context manager:
        `with limiter.reserve(...) as r:`): a CHECK under a request id
        (`request_id`, else 16 random bytes), settled at `r.cost` when the
        block ends, refunded when it ends by an exception. See
        `slidewin.reservation`. `shadow`: as for `check` (a reservation let
        through holds no charge: leaving its block sends nothing)."""
        rid, given = reservation_id(request_id)
        return Reservation(self, CHECK, (_rule(key, limit, window_ms),), cost, rid, given, self.policy.shadow_of(shadow))

    def reserve_all(self, rules: Iterable, cost: int, request_id=None, shadow: Optional[bool] = None) -> Reservation:
        """`reserve` on several rules (one MCHECK): `cost` on each key, all
        or nothing; settled and refunded on each key."""
        rid, given = reservation_id(request_id)
        return Reservation(self, CHECK_ALL, _rules(rules), cost, rid, given, self.policy.shadow_of(shadow))

    def settle(self, key, request_id, cost: int) -> Optional[int]:
        """SLIDEWIN.SETTLE: sets the units charged under `request_id` on
        `key` to `cost`: fewer gives the difference back, more adds it at
        the charge's own time (even past the limit: later calls wait), 0
        gives it all back. Returns the units now charged, or None when the
        key holds no charge under that id (it left its window, or was never
        made): nothing changed. Sent once more after a lost connection or a
        timeout (setting the same units twice is setting them once); other
        errors are raised."""
        return self._run(st.settle(self.policy, key, request_id, cost))

    def peek(self, key, limit: int, window_ms: int, cost: int = 1) -> Decision:
        """SLIDEWIN.PEEK: what `check` would answer now, changing nothing.
        While Redis is away it answers like the outage policy would, without
        charging the local window."""
        return self._run(st.peek(self.policy, self._cluster, key, limit, window_ms, cost))

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
        return self._run(st.undo(self.policy, target, request_id))


__all__ = ["Limiter", "Policy", "Backend", "Chain", "BACKENDS", "DEFAULT_BACKENDS", "MODULE", "FUNCTION_LIBRARY", "SCRIPT", "eval_code",
           "DENY", "ALLOW", "LOCAL", "merge_top", "library_code"]
