"""The answer of a check: `Decision`, and its HTTP headers."""

from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Tuple, Union

#: Where a decision came from.
REDIS = "redis"  # the module (SLIDEWIN.*)
FUNCTION = "function"  # the FUNCTION library (FCALL slidewin_*), module not loaded
LOCAL_CACHE = "local-cache"  # a denial remembered in this process: no round trip
FALLBACK = "fallback"  # Redis unreachable or slow: the outage policy answered


@dataclass(frozen=True)
class Rule:
    """At most `limit` calls in any trailing `window_ms`, on `key` (str,
    sent as UTF-8, or bytes, sent as they are)."""

    key: Union[str, bytes]
    limit: int
    window_ms: int


@dataclass(frozen=True)
class Decision:
    """What a check decided.

    - `allowed`: whether the call may go ahead.
    - `limit`, `remaining`, `reset_after_ms`: the rule's (for several
      rules, those of the rule with the fewest calls remaining).
    - `remaining`: calls still allowed in the window after this one.
    - `retry_after_ms`: 0 when allowed; -1 when the call can never pass
      (its cost exceeds a limit); else the wait before the same call passes.
    - `reset_after_ms`: until the window holds nothing.
    - `members`: the entries added (what `undo` gives back), as the server
      named them (tokens `<id>@<ms>`; keep them opaque); empty for a call
      made with a request id (`undo` gives that back by its id).
    - `source`: `redis`, `function`, `local-cache` or `fallback`.
    - `rules`: the rules judged; `per_rule`: each rule's own decision (MCHECK).
    - `request_id`: the id the call was made under (`check(...,
      request_id=)`, a reservation, or `Limiter(request_ids=True)`), as
      given (str or bytes); None for a call without one.
    - `shadow_refused`: a shadow call (`check(..., shadow=True)`,
      `SHADOW`) the limit would have refused: `allowed` is True, nothing
      was charged, and `remaining` and `retry_after_ms` are what the
      enforced limit says. For several rules, `per_rule` tells which
      would have refused (their `allowed` stays the real one).
    """

    allowed: bool
    limit: int
    remaining: int
    retry_after_ms: int
    reset_after_ms: int
    members: Tuple[str, ...] = ()
    source: str = REDIS
    rules: Tuple[Rule, ...] = ()
    per_rule: Tuple["Decision", ...] = field(default=(), repr=False)
    request_id: Union[str, bytes, None] = None
    shadow_refused: bool = False

    @property
    def keys(self) -> List[Union[str, bytes]]:
        """The distinct keys of the rules, in order."""
        seen: List[Union[str, bytes]] = []
        for r in self.rules:
            if r.key not in seen:
                seen.append(r.key)
        return seen

    def headers(self) -> Dict[str, str]:
        """The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers)
        and, on a denial that can pass later, `Retry-After`; times in whole
        seconds, rounded up."""
        h = {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(max(0, self.remaining)),
            "RateLimit-Reset": str(_seconds(self.reset_after_ms)),
        }
        if not self.allowed and self.retry_after_ms > 0:
            h["Retry-After"] = str(_seconds(self.retry_after_ms))
        return h


def _seconds(ms: int) -> int:
    """Whole seconds, rounded up, never negative."""
    return max(0, -(-int(ms) // 1000))


def from_detail(reply, rule: Rule, source: str, members=(), shadow: bool = False) -> Decision:
    """A decision from the five DETAIL fields
    `[allowed, limit, remaining, retry_after_ms, reset_after_ms]`, and with
    `shadow` the sixth, `shadow_refused`."""
    allowed, limit, remaining, retry, reset = (int(x) for x in reply[:5])
    return Decision(
        allowed=bool(allowed),
        limit=limit,
        remaining=remaining,
        retry_after_ms=retry,
        reset_after_ms=reset,
        members=tuple(_text(m) for m in members),
        source=source,
        rules=(rule,),
        shadow_refused=shadow and bool(int(reply[5])),
    )


def from_multi(reply, rules: List[Rule], source: str, with_members: bool = True, shadow: bool = False) -> Decision:
    """A decision from MCHECK's DETAIL WITHMEMBERS reply
    `[allowed, retry_after_ms, [five fields] per rule..., [members]]`
    (`with_members=False`: its DETAIL reply, without the members, as a
    call with an ID gets it; `shadow`: `shadow_refused` after the rules'
    fields)."""
    allowed, retry = int(reply[0]), int(reply[1])
    end = len(reply) - 1 if with_members else len(reply)
    members = tuple(_text(m) for m in reply[end]) if with_members else ()
    shadow_refused = False
    if shadow:
        end -= 1
        shadow_refused = bool(int(reply[end]))
    fields_per_rule = reply[2:end]
    per_rule = tuple(
        from_detail(fields, rule, source) for fields, rule in zip(fields_per_rule, rules)
    )
    # The headers speak for one rule: the one with the fewest calls left
    # (on a tie, the one that resets last).
    tightest = min(per_rule, key=lambda d: (d.remaining, -d.reset_after_ms))
    return Decision(
        allowed=bool(allowed),
        limit=tightest.limit,
        remaining=tightest.remaining,
        retry_after_ms=retry,
        reset_after_ms=tightest.reset_after_ms,
        members=members,
        source=source,
        rules=tuple(rules),
        per_rule=per_rule,
        shadow_refused=shadow_refused,
    )


def _text(m) -> str:
    return m.decode() if isinstance(m, bytes) else str(m)


def refusal(rules: Tuple[Rule, ...], retry_after_ms: int, source: str) -> Decision:
    """A denial answered without Redis (cache or outage policy)."""
    limit = min((r.limit for r in rules), default=0)
    return Decision(
        allowed=False,
        limit=limit,
        remaining=0,
        retry_after_ms=retry_after_ms,
        reset_after_ms=max(retry_after_ms, 0),
        source=source,
        rules=rules,
    )


def let_through(decision: Decision) -> Decision:
    """A refusal answered without Redis (the outage policy) to a shadow
    call: let through, telling it would have been refused."""
    if decision.allowed:
        return decision
    return replace(decision, allowed=True, shadow_refused=True)


def admission(rules: Tuple[Rule, ...], remaining: Optional[int], source: str) -> Decision:
    """An allowed call answered without Redis (the outage policy)."""
    limit = min((r.limit for r in rules), default=0)
    return Decision(
        allowed=True,
        limit=limit,
        remaining=limit if remaining is None else remaining,
        retry_after_ms=0,
        reset_after_ms=0,
        source=source,
        rules=rules,
    )
