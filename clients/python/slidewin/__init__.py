"""slidewin for Python: exact sliding-window rate limiting on Redis/Valkey.

    from slidewin import Limiter
    limiter = Limiter(redis.Redis(), outage="local", timeout_ms=50)
    d = limiter.check("sms:limit:203.0.113.7", 5, 60_000)
    if not d.allowed:
        return 429, d.headers()

See docs/clients.md, section "Calling slidewin from an application".
"""

from .aio import AsyncLimiter
from .decision import FALLBACK, FUNCTION, LOCAL_CACHE, REDIS, Decision, Rule
from .errors import SlidewinError, SlidewinModuleError
from .limiter import (ALLOW, DEFAULT_BACKENDS, DENY, FUNCTION_LIBRARY, LOCAL, MAX_REQUEST_ID, MODULE, SCRIPT, Limiter, eval_code,
                      library_code, merge_top)
from .reservation import AsyncReservation, Reservation
from .lease import AsyncLease, Lease, LeaseLost, LeaseUnavailable  # noqa: F401 (docs/leases.md)

__all__ = [
    "Limiter",
    "AsyncLimiter",
    "Decision",
    "Rule",
    "Reservation",
    "AsyncReservation",
    "MAX_REQUEST_ID",
    "merge_top",
    "library_code",
    "DENY",
    "ALLOW",
    "LOCAL",
    "REDIS",
    "FUNCTION",
    "LOCAL_CACHE",
    "FALLBACK",
    "MODULE",
    "FUNCTION_LIBRARY",
    "SCRIPT",
    "DEFAULT_BACKENDS",
    "eval_code",
    "SlidewinError",
    "SlidewinModuleError",
]
__version__ = "0.1.0"
