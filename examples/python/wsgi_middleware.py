#!/usr/bin/env python3
"""A WSGI middleware that rate-limits every request by client IP with the
slidewin client: 429 with the RateLimit headers and Retry-After when
refused, the RateLimit headers on every answer.

    pip install ./clients/python
    python3 examples/python/wsgi_middleware.py [--port 6379]            # six requests, printed
    python3 examples/python/wsgi_middleware.py [--port 6379] --serve 8000  # a real server (wsgiref)

Any WSGI framework (Flask: app.wsgi_app = SlidewinMiddleware(app.wsgi_app, ...);
Django: wrap the WSGI application) takes it as it is.
"""

import argparse
import os
import sys
from wsgiref.util import setup_testing_defaults

import redis

try:
    from slidewin import Limiter
except ImportError:  # run from a checkout without `pip install ./clients/python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
    from slidewin import Limiter


class SlidewinMiddleware:
    """At most `limit` requests per `window_ms` per key (the client IP by default)."""

    def __init__(self, app, limiter: Limiter, limit: int, window_ms: int, key=None):
        self.app = app
        self.limiter = limiter
        self.limit = limit
        self.window_ms = window_ms
        self.key = key or (lambda environ: "api:limit:" + environ.get("REMOTE_ADDR", "unknown"))

    def __call__(self, environ, start_response):
        decision = self.limiter.check(self.key(environ), self.limit, self.window_ms)
        headers = list(decision.headers().items())
        if not decision.allowed:
            start_response("429 Too Many Requests", headers + [("Content-Type", "text/plain")])
            return [b"too many requests\n"]

        def start(status, app_headers, exc_info=None):
            return start_response(status, app_headers + headers, exc_info)

        return self.app(environ, start)


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\n"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=6379)
    ap.add_argument("--serve", type=int, help="serve HTTP on this port instead of printing six requests")
    opts = ap.parse_args()
    limiter = Limiter(redis.Redis(host=opts.host, port=opts.port), outage="local", timeout_ms=50)
    app = SlidewinMiddleware(hello, limiter, limit=5, window_ms=60_000)
    if opts.serve:
        from wsgiref.simple_server import make_server
        make_server("127.0.0.1", opts.serve, app).serve_forever()
        return
    for i in range(6):
        environ = {"REMOTE_ADDR": "192.0.2.10"}
        setup_testing_defaults(environ)
        seen = {}

        def start_response(status, headers, exc_info=None):
            seen["status"], seen["headers"] = status, dict(headers)

        body = b"".join(app(environ, start_response))
        h = seen["headers"]
        print(f"request {i + 1}: {seen['status']} remaining={h['RateLimit-Remaining']} "
              f"retry-after={h.get('Retry-After', '-')} body={body.decode().strip()}")


if __name__ == "__main__":
    main()
