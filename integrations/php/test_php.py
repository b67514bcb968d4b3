"""The Symfony RateLimiter integration, run by Debian's PHP with php-redis
and php-symfony-rate-limiter against a server with the module: the
limiter's behaviour (tests/functional.php), and the exactness of the same
burst against Symfony's own sliding_window (tests/exactness.php)."""

import json
import os

from conftest import run, tool

HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT, WINDOW_MS = 10, 1000


def most_in_a_trailing_window(times_ms):
    """The most admitted in any window (t - 1 s, t]."""
    ts = sorted(times_ms)
    return max((sum(1 for u in ts if t - WINDOW_MS < u <= t) for t in ts), default=0)


def test_the_limiter_against_the_module(server):
    out = run([tool("php"), os.path.join(HERE, "tests", "functional.php"), str(server.port)])
    assert out.stdout.rstrip().endswith("all passed"), out.stdout
    assert out.stdout.count("ok: ") >= 25, out.stdout


def test_exact_where_symfony_sliding_window_is_not(server, record_property):
    out = run([tool("php"), os.path.join(HERE, "tests", "exactness.php"), str(server.port)])
    d = json.loads(out.stdout)
    slidewin = most_in_a_trailing_window(d["admitted"]["slidewin"])
    symfony = most_in_a_trailing_window(d["admitted"]["symfony"])
    print(f"requests {d['requests']}: most admitted in a trailing second: slidewin {slidewin}, "
          f"Symfony sliding_window {symfony} (limit {LIMIT})")
    record_property("exactness", {"slidewin": slidewin, "symfony": symfony})
    assert slidewin == LIMIT
    assert symfony > LIMIT, symfony
