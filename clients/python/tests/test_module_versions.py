"""A server whose slidewin module is older than the client (a real module
of an earlier commit, `conftest.OLD_MODULE_COMMIT`: no SLIDEWIN.SETTLE, no
ID, no SHADOW) is told from one without the module: the client raises
SlidewinModuleError naming the command or option the module lacks and the
version MODULE LIST gives, and never falls back to the FUNCTION library
there; without the module, the library still answers."""

import asyncio

import pytest
import redis

from slidewin import FUNCTION, REDIS, AsyncLimiter, Limiter, SlidewinModuleError


def no_library(server) -> bool:
    return not server.client().execute_command("FUNCTION", "LIST") and server.calls("fcall") == 0


def test_the_old_module_answers_what_it_knows(old_server):
    lim = Limiter(old_server.client())
    d = lim.check("k", 2, 60_000)
    assert (d.allowed, d.remaining, d.source) == (True, 1, REDIS)
    assert lim.undo(d) == 1
    assert no_library(old_server)


def test_an_option_the_old_module_lacks_is_named_with_its_version(old_server):
    lim = Limiter(old_server.client())
    with pytest.raises(SlidewinModuleError) as e:
        lim.check("k", 2, 60_000, shadow=True)
    text = str(e.value)
    assert "has no option SHADOW" in text and "version 0.1.0 (MODULE LIST ver 100)" in text, text
    assert "unknown option 'SHADOW'" in text, "the server's own reply is quoted"
    with pytest.raises(SlidewinModuleError, match="has no option ID"):
        lim.check("k", 2, 60_000, request_id="r1")
    with pytest.raises(SlidewinModuleError, match="has no option SHADOW"):
        lim.check_all([("a", 2, 60_000), ("b", 2, 60_000)], shadow=True)
    assert no_library(old_server), "no silent fall back to the FUNCTION library"
    assert lim.stats()["backend"] == "module" and lim.policy.breaker.state == "closed"
    # Nothing was charged by the refused calls; the module still answers.
    assert lim.check("k", 2, 60_000).remaining == 1


def test_a_command_the_old_module_lacks_is_named_with_its_version(old_server):
    lim = Limiter(old_server.client())
    with pytest.raises(SlidewinModuleError) as e:
        lim.settle("k", "r1", 3)
    text = str(e.value)
    assert "has no command SLIDEWIN.SETTLE" in text and "version 0.1.0 (MODULE LIST ver 100)" in text, text
    assert no_library(old_server)
    assert lim.check("k", 1, 60_000).source == REDIS, "the module stays the backend"


def test_the_async_limiter_says_the_same(old_server):
    async def run():
        lim = AsyncLimiter(redis.asyncio.Redis(port=old_server.port))
        try:
            with pytest.raises(SlidewinModuleError, match="has no option SHADOW"):
                await lim.check("k", 2, 60_000, shadow=True)
            with pytest.raises(SlidewinModuleError, match="has no command SLIDEWIN.SETTLE"):
                await lim.settle("k", "r1", 3)
            assert (await lim.check("k", 2, 60_000)).source == REDIS
        finally:
            await lim.aclose()

    asyncio.run(run())
    assert no_library(old_server)


def test_a_user_without_module_list_still_learns_the_module_is_old(old_server):
    admin = old_server.client()
    admin.execute_command("ACL", "SETUSER", "app", "on", ">app-secret", "~*", "+@all", "-module")
    lim = Limiter(redis.Redis(port=old_server.port, username="app", password="app-secret"))
    with pytest.raises(SlidewinModuleError) as e:
        lim.settle("k", "r1", 3)
    text = str(e.value)
    assert "has no command SLIDEWIN.SETTLE" in text and "version unknown: MODULE LIST was refused" in text, text
    assert no_library(old_server)


def test_without_the_module_the_library_still_answers(bare_server):
    lim = Limiter(bare_server.client())
    assert lim.settle("k", "r1", 3) is None, "no charge under that id"
    assert lim.stats()["backend"] == "function"
    d = lim.check("k", 1, 60_000, shadow=True)
    assert (d.allowed, d.shadow_refused, d.source) == (True, False, FUNCTION)
