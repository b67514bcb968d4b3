"""The limiter's calls written once for `Limiter` and `AsyncLimiter`: each
is a generator that yields what it needs done on the server (`Execute`,
`OnEveryPrimary`, `Reconnect`, `Sleep`) and is sent the reply, or has the
error thrown in; `run` drives one on a `connections.Link`, `arun` on an
`AsyncLink` (awaiting each step). Everything else (the backends' chain,
the retries, the outage policy, the breaker) happens here, once.

A step is never yielded inside an `except` block: the error thrown in
there would take the handled one as its `__context__`, and `resendable`
reads a ReadOnlyError from there."""

import asyncio
import time
from typing import Any, Callable, Generator, Optional, Tuple

import redis

from . import backends
from .backends import Backend
from .calls import CHECK, CHECK_ALL, PEEK, _key, _rule, _rules, request_id_of, undo_plan, with_request_id
from .decision import Decision, Rule
from .errors import SlidewinModuleError
from .outage import RECONNECT, resendable
from .policy import Policy

#: What a call raises to its caller, or reads as an outage (redis-py's errors).
ERRORS = (redis.exceptions.RedisError, redis.exceptions.RedisClusterException)

Steps = Generator[Any, Any, Any]


# -- what a call asks of the server ---------------------------------------------


class Execute:
    """One command, sent once to the node of `key`; the step's value is its reply."""

    def __init__(self, key, args: list):
        self.key, self.args = key, args

    def run(self, link):
        return link.execute(self.key, self.args)

    async def arun(self, link):
        return await link.execute(self.key, self.args)


class OnEveryPrimary:
    """One command on every primary (installing a backend)."""

    def __init__(self, args: list):
        self.args = args

    def run(self, link):
        return link.on_every_primary(self.args)

    async def arun(self, link):
        return await link.on_every_primary(self.args)


class Reconnect:
    """The idle connections closed: the next command connects afresh."""

    def run(self, link):
        return link.reconnect()

    async def arun(self, link):
        return await link.reconnect()


class Sleep:
    """A pause (TRYAGAIN's back-off)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def run(self, link):
        time.sleep(self.seconds)

    async def arun(self, link):
        await asyncio.sleep(self.seconds)


def run(steps: Steps, link):
    """Drives `steps` on a `Link`: returns what it returns, raises what it raises."""
    value: Any = None
    error: Optional[BaseException] = None
    while True:
        try:
            step = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value
        value, error = None, None
        try:
            value = step.run(link)
        except BaseException as e:  # thrown into the call, which decides (cancellation too)
            error = e


async def arun(steps: Steps, link):
    """`run` on an `AsyncLink`, awaiting each step."""
    value: Any = None
    error: Optional[BaseException] = None
    while True:
        try:
            step = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value
        value, error = None, None
        try:
            value = await step.arun(link)
        except BaseException as e:
            error = e


# -- the calls -------------------------------------------------------------------


def module_found(key) -> Steps:
    """Whether the slidewin module is loaded on the node of `key`, and its
    version: (True, MODULE LIST's `ver`), (True, None) when MODULE LIST is
    refused (an ACL) but COMMAND INFO knows SLIDEWIN.CHECK, (False, None)
    when it is not loaded. Both replies are read raw (the limiter's own
    connections parse nothing): COMMAND INFO of an unknown command is a nil."""
    listed = refused = None
    try:
        listed = yield Execute(key, ["MODULE", "LIST"])
    except redis.exceptions.ResponseError as e:  # NOPERM: MODULE is an admin command
        refused = e
    if refused is None:
        ver = backends.module_in_list(listed)
        return ver is not None, ver
    info = None
    try:
        info = yield Execute(key, ["COMMAND", "INFO", "slidewin.check"])
    except redis.exceptions.ResponseError:
        pass
    return bool(info and info[0]), None


def send(policy: Policy, key, build: Callable[[Backend], list]) -> Steps:
    """Runs one call on the first backend of the chain that can answer;
    connection errors propagate. Returns (reply, source).

    A loaded module that refuses a command or an option this client sent
    (older than the client) raises `SlidewinModuleError` naming it and the
    module's version: the next backend is tried only when the module is not
    loaded at all."""
    chain = policy.chain
    while True:
        backend = chain.current()
        if not backend.installed:
            install_error = None
            try:
                yield OnEveryPrimary(backend.loads)
            except redis.exceptions.ResponseError as e:
                install_error = e  # NOPERM, no FUNCTION: try the calls anyway
            backend.install_error = install_error
            backend.installed = True
        failure = None
        try:
            reply = yield Execute(key, build(backend))
        except redis.exceptions.ResponseError as e:
            failure = e
        if failure is None:
            # What was lost may be installed again after this success.
            backend.reinstalled = False
            return reply, backend.source
        what = backends.lacking(backend, failure)
        if what is not None:
            loaded, ver = yield from module_found(key)
            if loaded or what[0] == "option":  # an option refused: the module parsed the command
                raise backends.outdated(what, ver, failure)
        chain.after_error(backend, failure)


def send_again_once(policy: Policy, key, build: Callable[[Backend], list]) -> Steps:
    """`send` for a call the server runs the same however often it comes
    (UNDO or SETTLE by request id): sent once more after an error that
    leaves its fate unknown (`resendable`)."""
    try:
        return (yield from send(policy, key, build))
    except ERRORS as e:
        if not resendable(e):
            raise
    return (yield from send(policy, key, build))


def decide(policy: Policy, cluster: bool, kind: str, rules: Tuple[Rule, ...], cost: int, request_id=None,
           given: bool = False, shadow: bool = False) -> Steps:
    """The local cache (not for an id the caller `given`: it may repeat a
    charged call; nor for a shadow call), else Redis (the breaker
    permitting), else the outage policy; denials from Redis are remembered
    (not a peek's). A call with a request id is sent once more after a lost
    connection or a timeout: the server charges an id once."""
    early = policy.without_redis(kind, rules, cost, cache=not given, shadow=shadow)
    if early:
        return with_request_id(early, request_id)
    attempt = policy.attempt()
    while True:
        since = policy.clock()
        error = None
        try:
            reply, source = yield from send(policy, rules[0].key,
                                            lambda b: policy.command(kind, b, rules, cost, request_id, shadow))
        except SlidewinModuleError:
            policy.breaker.success()
            raise
        except ERRORS as e:
            error = e
        except BaseException:
            # Cancelled, or an error of another kind: the probe is free.
            policy.breaker.release()
            raise
        if error is None:
            return policy.answered(kind, reply, rules, cost, since, source, request_id, shadow)
        if request_id is not None and not attempt.resent and resendable(error):
            attempt.resent = True
            continue
        step = policy.after_error(error, kind, rules, cost, attempt, cluster, shadow)
        if step is None:
            raise error
        if isinstance(step, Decision):
            return with_request_id(step, request_id)
        yield Reconnect() if step == RECONNECT else Sleep(step)


def check(policy: Policy, cluster: bool, key, limit, window_ms, cost, request_id, shadow) -> Steps:
    """`Limiter.check`."""
    rid, given = policy.request_id(request_id)
    return decide(policy, cluster, CHECK, (_rule(key, limit, window_ms),), cost, rid, given, policy.shadow_of(shadow))


def check_all(policy: Policy, cluster: bool, rules, cost, request_id, shadow) -> Steps:
    """`Limiter.check_all`."""
    rid, given = policy.request_id(request_id)
    return decide(policy, cluster, CHECK_ALL, _rules(rules), cost, rid, given, policy.shadow_of(shadow))


def peek(policy: Policy, cluster: bool, key, limit, window_ms, cost) -> Steps:
    """`Limiter.peek`."""
    return decide(policy, cluster, PEEK, (_rule(key, limit, window_ms),), cost)


def settle(policy: Policy, key, request_id, cost) -> Steps:
    """`Limiter.settle`: the units now charged, or None."""
    key, rid, cost = _key(key), request_id_of(request_id), int(cost)
    policy.gave_back(key)
    reply, _ = yield from send_again_once(policy, key, lambda b: b.settle(key, rid, cost))
    units = int(reply)
    return None if units < 0 else units


def undo(policy: Policy, target, request_id=None) -> Steps:
    """`Limiter.undo`: the entries removed."""
    keys, rid, members = undo_plan(target, request_id)
    removed = 0
    for key in keys:
        policy.gave_back(key)
        if rid is None:
            reply, _ = yield from send(policy, key, lambda b, k=key: b.undo(k, members))
        else:
            reply, _ = yield from send_again_once(policy, key, lambda b, k=key: b.undo_id(k, rid))
        removed += int(reply)
    return removed


__all__ = ["run", "arun", "send", "send_again_once", "decide", "check", "check_all", "peek", "settle", "undo",
           "Execute", "OnEveryPrimary", "Reconnect", "Sleep"]
