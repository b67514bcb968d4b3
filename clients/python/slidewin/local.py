"""In-process state: the denial cache (the local fast path), the exact
per-instance sliding window (the `local` outage policy) and the circuit
breaker. Thread-safe, bounded, and clocked by an injectable `clock` (ms)."""

import threading
import time
from collections import OrderedDict, deque
from typing import Callable, Deque, Optional, Tuple

from .decision import Rule


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class DenialCache:
    """Remembers "refused until t" per (key, limit, window) after a denial.

    Only denials are cached, so it can never allow what Redis would refuse:
    while an entry lives, Redis would refuse the same call too (the entries
    that filled the window only leave it when the wait is over). The one way
    it can be stricter than Redis: another instance's UNDO gives room back
    before the wait is over; this instance learns it when the entry ends.
    Bounded: past `max_entries` the least recently refused entry is
    dropped (a dropped entry only costs a round trip).
    """

    def __init__(self, max_entries: int = 10_000, clock: Callable[[], int] = monotonic_ms):
        self._max = max_entries
        self._clock = clock
        self._until: "OrderedDict[Tuple[str, int, int], int]" = OrderedDict()
        self._lock = threading.Lock()

    def block(self, rule: Rule, retry_after_ms: int) -> None:
        """After Redis refused a call on `rule` with this wait."""
        if retry_after_ms <= 0 or self._max <= 0:
            return
        until = self._clock() + retry_after_ms
        k = (rule.key, rule.limit, rule.window_ms)
        with self._lock:
            self._until[k] = max(until, self._until.get(k, 0))
            self._until.move_to_end(k)
            while len(self._until) > self._max:
                self._until.popitem(last=False)

    def blocked_for(self, rule: Rule) -> int:
        """The ms this rule stays refused, 0 when not known refused."""
        k = (rule.key, rule.limit, rule.window_ms)
        with self._lock:
            until = self._until.get(k)
            if until is None:
                return 0
            left = until - self._clock()
            if left <= 0:
                del self._until[k]
                return 0
            return left

    def forget_key(self, key: str) -> None:
        """This instance gave entries of `key` back (UNDO)."""
        with self._lock:
            for k in [k for k in self._until if k[0] == key]:
                del self._until[k]

    def __len__(self) -> int:
        with self._lock:
            return len(self._until)


class LocalWindows:
    """An exact sliding window per rule, in this process only: the seeds'
    per-instance counter, used by the `local` outage policy. With N
    instances a key may see up to N x limit calls per window while Redis is
    away. Bounded to `max_keys` rules (least recently used dropped)."""

    def __init__(self, max_keys: int = 10_000, clock: Callable[[], int] = monotonic_ms):
        self._max = max_keys
        self._clock = clock
        self._logs: "OrderedDict[Tuple[str, int, int], Deque[int]]" = OrderedDict()
        self._lock = threading.Lock()

    def _log(self, rule: Rule, now: int) -> Deque[int]:
        k = (rule.key, rule.limit, rule.window_ms)
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
    opens it for another pause."""

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

