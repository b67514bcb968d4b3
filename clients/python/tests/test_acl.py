"""The ACL lines of docs/operating.md ("Access control (ACL)"), run as the
page shows them on each server, Redis 7.0 first (where the module's
commands are in no ACL category and `-@write` does not cover them): each
user may run what the page says and gets NOPERM for the rest."""

import os
import re
import shlex

import pytest
import redis

from conftest import ROOT

PAGE = os.path.join(ROOT, "docs", "operating.md")


def documented_lines():
    """The `$ redis-cli ACL SETUSER ...` lines of the page's section."""
    text = open(PAGE, encoding="utf-8").read()
    section = text.split("## Access control (ACL)", 1)[1].split("\n## ", 1)[0]
    lines = [shlex.split(m) for m in re.findall(r"^\$ redis-cli (ACL SETUSER .+)$", section, re.M)]
    assert {l[2] for l in lines} == {"app", "reader"}, lines
    return lines


def as_user(server, name):
    return redis.Redis(port=server.port, username=name, password=f"{name}-secret", decode_responses=True)


def refused(c, *args) -> bool:
    try:
        c.execute_command(*args)
    except redis.exceptions.NoPermissionError:
        return True
    return False


def test_the_documented_acl_lines_hold(server):
    admin = server.client()
    categories = int(admin.info("slidewin")["slidewin_acl_categories"])
    # Without the names, the category rules alone: on a server that gives
    # module commands no category (Redis 7.0), they let everything through.
    admin.execute_command("ACL", "SETUSER", "control", "on", ">control-secret", "~*", "+@all", "-@write", "-@admin", "-@dangerous")
    control = as_user(server, "control")
    assert refused(control, "SLIDEWIN.CHECK", "k", 5, 60_000) == bool(categories)
    assert refused(control, "SLIDEWIN.TOP", 5) == bool(categories)
    for line in documented_lines():
        assert admin.execute_command(*line) == "OK"
    app, reader = as_user(server, "app"), as_user(server, "reader")
    # app: the limiter on its own keys, not TOP.
    assert app.execute_command("SLIDEWIN.CHECK", "sms:limit:1.2.3.4", 5, 60_000) == 1
    reply = app.execute_command("SLIDEWIN.MCHECK", 1, "sms:limit:ip:1", 5, 60_000, "WITHMEMBERS")
    assert app.execute_command("SLIDEWIN.UNDO", "sms:limit:ip:1", *reply[-1]) == 1
    assert app.execute_command("SLIDEWIN.CHECK", "sms:limit:r", 5, 60_000, "ID", "r1") == 1
    assert app.execute_command("SLIDEWIN.SETTLE", "sms:limit:r", "ID", "r1", "COST", 2) == 2
    assert app.execute_command("SLIDEWIN.PEEK", "sms:limit:1.2.3.4", 5, 60_000)[0] == 1
    assert refused(app, "SLIDEWIN.TOP", 5)
    assert refused(app, "SLIDEWIN.CHECK", "other:1", 5, 60_000), "another prefix's key"
    # reader: PEEK only.
    assert reader.execute_command("SLIDEWIN.PEEK", "sms:limit:1.2.3.4", 5, 60_000)[2] == 4
    for args in (("SLIDEWIN.CHECK", "k", 5, 60_000), ("SLIDEWIN.MCHECK", 1, "k", 5, 60_000),
                 ("SLIDEWIN.UNDO", "sms:limit:1.2.3.4", "1"), ("SLIDEWIN.TOP", 5),
                 ("SLIDEWIN.SETTLE", "sms:limit:r", "ID", "r1", "COST", 0)):
        assert refused(reader, *args), args
    assert admin.execute_command("SLIDEWIN.PEEK", "sms:limit:1.2.3.4", 5, 60_000)[2] == 4, "nothing changed"
