"""The calls a limiter makes, apart from how they travel: their arguments
(keys, rules, request ids) checked before anything is sent, the command of
each kind of call on a backend, and the `Decision` read from its reply."""

import dataclasses
import uuid
from typing import Iterable, List, Tuple, Union

from . import decision as d
from .decision import Decision, Rule
from .local import key_bytes

#: The kinds of call.
CHECK, CHECK_ALL, PEEK = "check", "check_all", "peek"

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


def reservation_id(request_id) -> Tuple[Union[str, bytes], bool]:
    """The id a reservation charges under, and whether the caller gave it:
    the caller's (checked), else 16 random bytes."""
    if request_id is not None:
        return request_id_of(request_id), True
    return new_request_id(), False


def may_hold_charge(decision: Decision) -> bool:
    """Whether the server may hold a charge for `decision`'s call: the
    server allowed it, or the outage policy answered (the call may have run
    before its reply was lost). A refusal from the server (also one a
    shadow call was let through with), or from the denial cache (nothing
    sent), charged nothing."""
    if decision.source == d.LOCAL_CACHE:
        return False
    if decision.source == d.FALLBACK:
        return True
    return decision.allowed and not decision.shadow_refused


def with_request_id(decision: Decision, request_id) -> Decision:
    """`decision`, carrying the request id its call was made under."""
    return decision if request_id is None else dataclasses.replace(decision, request_id=request_id)


# -- arguments ----------------------------------------------------------------


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


# -- one call of each kind: its command and its reply's Decision ---------------


def command(kind: str, backend, rules: Tuple[Rule, ...], cost: int, request_id=None, shadow: bool = False) -> list:
    """The command of a call of `kind` on `backend` (a `backends.Backend`)."""
    if kind == CHECK_ALL:
        return backend.check_all(rules, cost, request_id, shadow)
    if kind == PEEK:
        return backend.peek(rules[0], cost)
    return backend.check(rules[0], cost, request_id, shadow)


def parse(kind: str, reply, rules: Tuple[Rule, ...], source: str, request_id=None, shadow: bool = False) -> Decision:
    """The Decision of a reply to `command(kind, ...)`: DETAIL's fields,
    then `shadow_refused` with SHADOW, then the members (WITHMEMBERS: a
    charging call without a request id)."""
    if kind == CHECK_ALL:
        decision = d.from_multi(reply, list(rules), source, with_members=request_id is None, shadow=shadow)
    else:
        members = reply[6 if shadow else 5] if kind == CHECK and request_id is None else ()
        decision = d.from_detail(reply, rules[0], source, members, shadow=shadow)
    return with_request_id(decision, request_id)


def undo_plan(target, request_id=None) -> Tuple[List, Union[str, bytes, None], Tuple[str, ...]]:
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


__all__ = ["CHECK", "CHECK_ALL", "PEEK", "MAX_REQUEST_ID", "request_id_of", "new_request_id", "may_hold_charge",
           "with_request_id", "command", "parse", "undo_plan", "merge_top"]
