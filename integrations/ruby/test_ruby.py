"""The rack-attack integration, run by Debian's Ruby with ruby-rack,
ruby-rack-attack and ruby-redis against a server with the module: the
throttle through Rack::MockRequest (test/test_rack_attack.rb, minitest),
and the exactness of the same burst against rack-attack's own throttle
(test/exactness.rb)."""

import json
import os

from conftest import run, tool

HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT, WINDOW_MS = 10, 1000


def most_in_a_trailing_window(times_ms):
    ts = sorted(times_ms)
    return max((sum(1 for u in ts if t - WINDOW_MS < u <= t) for t in ts), default=0)


def ruby(script, server):
    return run([tool("ruby"), "-I", os.path.join(HERE, "lib"), os.path.join(HERE, "test", script)],
               env={**os.environ, "SLIDEWIN_PORT": str(server.port)})


def test_the_throttle_through_rack(server):
    out = ruby("test_rack_attack.rb", server)
    assert "4 runs," in out.stdout and " 0 failures, 0 errors, 0 skips" in out.stdout, out.stdout


def test_exact_where_rack_attack_is_not(server, record_property):
    d = json.loads(ruby("exactness.rb", server).stdout)
    slidewin = most_in_a_trailing_window(d["admitted"]["slidewin"])
    own = most_in_a_trailing_window(d["admitted"]["rack_attack"])
    print(f"requests {d['requests']}: most admitted in a trailing second: slidewin {slidewin}, "
          f"rack-attack {own} (limit {LIMIT})")
    record_property("exactness", {"slidewin": slidewin, "rack_attack": own})
    assert slidewin == LIMIT
    assert own > LIMIT, own
