"""The backends: the module, then the FUNCTION library, as a setting.
Off, a server without the module raises SlidewinModuleError; on but not
permitted (an ACL user without FUNCTION LOAD), the error names both the
missing module and the refused load; an administrator's library is used
by a user who may only call it."""

import pytest
import redis

from slidewin import FUNCTION, REDIS, Limiter, SlidewinModuleError, library_code


def test_the_fallback_off_raises_on_a_missing_module(bare_server):
    lim = Limiter(bare_server.client(), backends=("module",))
    with pytest.raises(SlidewinModuleError) as e:
        lim.check("k", 1, 60_000)
    text = str(e.value)
    assert "the slidewin module is not loaded" in text and "SLIDEWIN.CHECK" in text.upper(), text
    assert "not tried (backends=('module',)): function, script" in text, text
    assert not bare_server.client().execute_command("FUNCTION", "LIST"), "nothing was loaded"
    assert bare_server.calls("function|load") == 0
    with pytest.raises(SlidewinModuleError):  # every call, not only the first
        lim.peek("k", 1, 60_000)
    assert lim.policy.breaker.state == "closed", "not an outage"


def test_a_user_without_function_load_gets_both_causes(bare_server):
    admin = bare_server.client()
    admin.execute_command("ACL", "SETUSER", "app", "on", ">app-secret", "~*", "+@all", "-@scripting")
    lim = Limiter(redis.Redis(port=bare_server.port, username="app", password="app-secret"))
    with pytest.raises(SlidewinModuleError) as e:
        lim.check("k", 1, 60_000)
    text = str(e.value)
    assert "the slidewin module is not loaded" in text, text
    assert "FUNCTION LOAD of the slidewin library was refused" in text and "'function|load'" in text, text


def test_a_library_loaded_by_an_administrator_answers_a_user_who_may_only_call_it(bare_server):
    admin = bare_server.client()
    admin.execute_command("FUNCTION", "LOAD", "REPLACE", library_code())
    admin.execute_command("ACL", "SETUSER", "app", "on", ">app-secret", "~*", "+@all", "-function")
    lim = Limiter(redis.Redis(port=bare_server.port, username="app", password="app-secret"))
    d = lim.check("k", 1, 60_000)
    assert (d.allowed, d.source) == (True, FUNCTION)
    assert lim.stats()["backend"] == "function"


def test_the_chain_is_validated():
    for bad in ((), ("function", "function"), ("module", "lua")):
        with pytest.raises(ValueError):
            Limiter(redis.Redis(), backends=bad)


def test_the_module_is_used_first_and_stays(server):
    lim = Limiter(server.client())
    assert lim.check("k", 1, 60_000).source == REDIS
    assert lim.stats()["backend"] == "module"
    assert not server.client().execute_command("FUNCTION", "LIST"), "no library loaded where the module answers"
