"""docs/frameworks.md's Python blocks run as written, against each server
with the module (its `127.0.0.1:6379` is the test's server): the `limits`
block's asserts hold, the Flask-Limiter and slowapi blocks build their apps
on slidewin:// (Flask-Limiter makes the storage when the app is set up),
the throttled-py block limits on SLIDEWIN.CHECK."""

import os
import re

import pytest
from conftest import ROOT

DOC = os.path.join(ROOT, "docs", "frameworks.md")


def blocks():
    text = open(DOC).read()
    found = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(found) == 4, "the limits, Flask-Limiter, slowapi and throttled-py blocks"
    return found


@pytest.mark.parametrize("index", range(4), ids=["limits", "flask-limiter", "slowapi", "throttled-py"])
def test_the_docs_python_blocks_run(server, index):
    code = blocks()[index]
    assert "127.0.0.1:6379" in code
    scope = {"__name__": "frameworks_doc"}
    exec(compile(code.replace("127.0.0.1:6379", f"127.0.0.1:{server.port}"), f"{DOC}[{index}]", "exec"), scope)
    if index == 0:
        assert server.calls("slidewin.check") == 5 and server.calls("slidewin.peek") == 2
    elif index == 1:
        client = scope["app"].test_client()
        assert [client.get("/sms/1").status_code for _ in range(4)] == [200, 200, 200, 429]
        # Per phone, not per client address: another phone from the same
        # address is still served.
        assert client.get("/sms/2").status_code == 200
        assert server.calls("slidewin.check") == 5
    elif index == 2:
        assert type(scope["limiter"]._storage).__name__ == "SlidewinStorage"
    else:
        # Five allowed and one refused, each one CHECK; the peek one PEEK.
        assert server.calls("slidewin.check") == 6 and server.calls("slidewin.peek") == 1
