"""In-process state: the denial cache (the local fast path), the exact
per-instance sliding window (the `local` outage policy) and the circuit
breaker. Thread-safe, bounded, and clocked by an injectable `clock` (ms)."""

import threading
import time
from collections import OrderedDict, deque
from typing import Callable, Deque, Dict, List, Optional, Set, Tuple

from .decision import Rule


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def key_bytes(key) -> bytes:
    """A key as the server holds it: bytes as given, str as UTF-8 (as
    redis-py sends it). `"a"` and `b"a"` are one key."""
    return key if isinstance(key, bytes) else str(key).encode("utf-8")


class DenialCache:
    """Remembers, per rule (key, limit, window), what Redis refused: "a call
    of cost >= c is refused until t" after a denial of cost c.

    A denial of cost c, with the wait w Redis returned, says the same call
    fits in w ms (the entry that must leave for c units to fit leaves
    then); a call of a higher cost needs that entry and more to leave, so it
    is refused for w too. It says nothing of a lower cost, which may fit
    now: such calls go to Redis. So an entry refuses only what Redis would
    refuse, and ends no later than Redis's own refusal (the time is counted
    from before the request was sent, `since`). The one way the cache can
    be stricter than Redis: another instance's UNDO gives room back before
    the wait is over; this instance learns it when the entry ends (its own
    `forget_key` clears the key at once).

    Per rule it keeps a few steps (cost ascending, until ascending: a step
    that a lower cost refusing longer makes redundant is dropped), at most
    `STEPS` (the highest cost dropped first: dropping only costs a round
    trip). Bounded: past `max_entries` rules the least recently refused
    rule is dropped.
    """

    STEPS = 8

    def __init__(self, max_entries: int = 10_000, clock: Callable[[], int] = monotonic_ms):
        self._max = max_entries
        self._clock = clock
        # (key as bytes, limit, window) -> [(cost, until), ...], cost and until ascending.
        self._steps: "OrderedDict[Tuple[bytes, int, int], List[Tuple[int, int]]]" = OrderedDict()
        self._by_key: Dict[bytes, Set[Tuple[bytes, int, int]]] = {}
        self._lock = threading.Lock()

    def block(self, rule: Rule, retry_after_ms: int, cost: int = 1, since: Optional[int] = None) -> None:
        """After Redis refused a call of `cost` on `rule` with this wait;
        `since` is the clock read before the request was sent (now when
        not given)."""
        if retry_after_ms <= 0 or self._max <= 0:
            return
        until = (self._clock() if since is None else since) + retry_after_ms
        k = (key_bytes(rule.key), rule.limit, rule.window_ms)
        with self._lock:
            steps = self._steps.get(k)
            if steps is None:
                steps = self._steps[k] = []
                self._by_key.setdefault(k[0], set()).add(k)
            self._steps.move_to_end(k)
            now = self._clock()
            steps[:] = [(c, u) for c, u in steps if u > now]
            if not any(c <= cost and u >= until for c, u in steps):
                steps[:] = [(c, u) for c, u in steps if not (c >= cost and u <= until)]
                steps.append((cost, until))
                steps.sort()
                del steps[self.STEPS:]
            while len(self._steps) > self._max:
                old, _ = self._steps.popitem(last=False)
                self._unindex(old)

    def blocked_for(self, rule: Rule, cost: int = 1) -> int:
        """The ms a call of `cost` on this rule stays refused, 0 when it is
        not known refused."""
        k = (key_bytes(rule.key), rule.limit, rule.window_ms)
        with self._lock:
            steps = self._steps.get(k)
            if steps is None:
                return 0
            now = self._clock()
            # Until ascends with cost: the steps that have ended lead.
            while steps and steps[0][1] <= now:
                steps.pop(0)
            if not steps:
                del self._steps[k]
                self._unindex(k)
                return 0
            # The highest step at or below `cost` refuses the longest.
            until = max((u for c, u in steps if c <= cost), default=now)
            return until - now

    def forget_key(self, key) -> None:
        """This instance gave entries of `key` back (UNDO)."""
        with self._lock:
            for k in self._by_key.pop(key_bytes(key), ()):
                self._steps.pop(k, None)

    def _unindex(self, k: Tuple[bytes, int, int]) -> None:
        rules = self._by_key.get(k[0])
        if rules is not None:
            rules.discard(k)
            if not rules:
                del self._by_key[k[0]]

    def __len__(self) -> int:
        with self._lock:
            return len(self._steps)


class LocalWindows:
    """An exact sliding window per rule, in this process only, used by the
    `local` outage policy. With N
    instances a key may see up to N x limit calls per window while Redis is
    away. Bounded to `max_keys` rules (least recently used dropped)."""

    def __init__(self, max_keys: int = 10_000, clock: Callable[[], int] = monotonic_ms):
        self._max = max_keys
        self._clock = clock
        self._logs: "OrderedDict[Tuple[bytes, int, int], Deque[int]]" = OrderedDict()
        self._lock = threading.Lock()

    def _log(self, rule: Rule, now: int) -> Deque[int]:
        k = (key_bytes(rule.key), rule.limit, rule.window_ms)
        log = self._logs.get(k)
        if log is None:
            log = deque()
            self._logs[k] = log
            while len(self._logs) > self._max:
                self._logs.popitem(last=False)
        self._logs.move_to_end(k)
        while log and log[0] <= now - rule.window_ms:
            log.popleft()
        return log

    def check(self, rules, cost: int = 1) -> Tuple[bool, int, int]:
        """Allowed only if every rule has room for `cost`; then charges all.
        Returns (allowed, remaining of the tightest rule, retry_after_ms)."""
        now = self._clock()
        with self._lock:
            logs = [(r, self._log(r, now)) for r in rules]
            fits = [len(log) + cost <= r.limit for r, log in logs]
            if all(fits):
                for _, log in logs:
                    log.extend([now] * cost)
                return True, min(r.limit - len(log) for r, log in logs), 0
            waits = []
            for (r, log), ok in zip(logs, fits):
                if ok:
                    continue
                if cost > r.limit:
                    return False, 0, -1
                # The (len + cost - limit)-th oldest entry must leave first.
                oldest = log[len(log) + cost - r.limit - 1]
                waits.append(max(1, oldest + r.window_ms - now))
            return False, 0, max(waits)


class CircuitBreaker:
    """Opens after `failures` consecutive failures; while open, calls fail
    fast (the outage policy answers without waiting for a timeout); after
    `pause_ms` one call probes Redis again: success closes it, failure
    opens it for another pause. What counts as a failure (the server out of
    reach for every key) and as a success (any reply) is the limiter's
    choice: see `slidewin.limiter`."""

    def __init__(self, failures: int = 1, pause_ms: int = 1000, clock: Callable[[], int] = monotonic_ms):
        self._threshold = max(1, failures)
        self.pause_ms = pause_ms
        self._clock = clock
        self._failures = 0
        self._open_until: Optional[int] = None
        self._probing = False
        self._lock = threading.Lock()
        self.opened = 0  # times it opened, for monitoring

    def allow(self) -> bool:
        """Whether a call may go to Redis now (one probe when the pause ends)."""
        with self._lock:
            if self._open_until is None:
                return True
            if self._clock() < self._open_until or self._probing:
                return False
            self._probing = True
            return True

    def success(self) -> None:
        with self._lock:
            self._failures = 0
            self._open_until = None
            self._probing = False

    def release(self) -> None:
        """A call ended that says nothing of Redis's reach (a slot-level
        error, an error raised to the caller): the probe it may have held
        goes to the next call; nothing else changes."""
        with self._lock:
            self._probing = False

    def failure(self) -> None:
        with self._lock:
            self._failures += 1
            self._probing = False
            if self._failures >= self._threshold or self._open_until is not None:
                if self._open_until is None:
                    self.opened += 1
                self._open_until = self._clock() + self.pause_ms

    @property
    def state(self) -> str:
        with self._lock:
            if self._open_until is None:
                return "closed"
            return "half-open" if self._clock() >= self._open_until else "open"

