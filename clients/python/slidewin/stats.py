"""What a limiter answered without the server, counted and logged.

Every decision is counted by its `source` and a `reason`: `redis` and
`function` ("decided": the server decided), `local-cache` ("denied-before":
a refusal remembered in this process) and `fallback` (the outage policy: the
reason says why the server did not decide: `breaker-open`, `timeout`,
`connection`, `loading`, `masterdown`, `readonly`, `tryagain`, `cluster`,
`oom`, `noreplicas`, `misconf`). Shadow calls the limit would have refused
(let through: `Decision.shadow_refused`) are counted apart, by source.
`Limiter.stats()` returns the counts; the health report
(`slidewin.health.client_prometheus`) exports them.

An outage answer and the breaker opening are logged at WARNING on the
`slidewin` logger, at most once per `log_every_ms` per kind of answer (the
record says how many were not logged since the last one): an outage that
refuses every SMS is seen, and a busy process does not flood its log.
"""

import logging
import threading
from collections import Counter
from typing import Callable, Dict, Tuple

from . import decision as d

LOG = logging.getLogger("slidewin")
#: At most one record per kind of answer in this many ms.
LOG_EVERY_MS = 10_000

#: The reasons the server did not decide (source `fallback`).
BREAKER_OPEN = "breaker-open"
TIMEOUT = "timeout"
CONNECTION = "connection"
LOADING = "loading"
MASTERDOWN = "masterdown"
READONLY = "readonly"
TRYAGAIN = "tryagain"
CLUSTER = "cluster"
#: The reason of the denial cache's answers (source `local-cache`).
DENIED_BEFORE = "denied-before"
#: The reason of the server's own decisions (sources `redis`, `function`).
DECIDED = "decided"


class Stats:
    """Counts per (source, reason), and the rate-limited WARNING records."""

    def __init__(self, clock: Callable[[], int], log_every_ms: int = LOG_EVERY_MS):
        self._clock = clock
        self._log_every_ms = log_every_ms
        self._counts: Counter = Counter()
        self._shadow: Counter = Counter()
        self._lock = threading.Lock()
        # kind of record -> (when last logged, records held back since)
        self._logged: Dict[str, Tuple[int, int]] = {}

    def count(self, source: str, reason: str) -> None:
        with self._lock:
            self._counts[(source, reason)] += 1

    def shadow_refused(self, source: str) -> None:
        """A shadow call the limit (`redis`, `function`) or the outage
        policy (`fallback`) would have refused, let through."""
        with self._lock:
            self._shadow[source] += 1

    def shadow_snapshot(self) -> Dict[str, int]:
        """{source: count} of the shadow calls let through."""
        with self._lock:
            return dict(sorted(self._shadow.items()))

    def warn(self, kind: str, message: str, *args) -> None:
        """Logs `message` at WARNING unless a record of this `kind` went out
        less than `log_every_ms` ago (then it is counted, and the next
        record says how many were held back)."""
        now = self._clock()
        with self._lock:
            last, held = self._logged.get(kind, (None, 0))
            if last is not None and now - last < self._log_every_ms:
                self._logged[kind] = (last, held + 1)
                return
            self._logged[kind] = (now, 0)
        if held:
            message += " (%d more like it not logged since the last record)"
            args = args + (held,)
        LOG.warning(message, *args)

    def snapshot(self) -> Dict[str, Dict[str, int]]:
        """{source: {reason: count}}, every count since the limiter was made."""
        out: Dict[str, Dict[str, int]] = {}
        with self._lock:
            for (source, reason), n in sorted(self._counts.items()):
                out.setdefault(source, {})[reason] = n
        return out

    def not_by_server(self) -> int:
        """The decisions the server did not make (local cache, fallback)."""
        with self._lock:
            return sum(n for (source, _), n in self._counts.items() if source in (d.LOCAL_CACHE, d.FALLBACK))
