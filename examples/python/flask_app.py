#!/usr/bin/env python3
"""Flask-Limiter on slidewin: a Flask app whose routes are limited by
decorators, the limits kept by the slidewin module (storage_uri
"slidewin://..."), moving window (the exact sliding window, on the server's
clock).

    pip install "./clients/python[limits]" flask flask-limiter
    python3 examples/python/flask_app.py --storage-uri slidewin://127.0.0.1:6379 --port 8000
    curl -i http://127.0.0.1:8000/sms/+8613800000000     # the 4th to one phone within a minute: 429

A refused request gets 429 with Retry-After (seconds until the oldest entry
leaves the window: when the same request passes) and X-RateLimit-Limit /
-Remaining / -Reset (Flask-Limiter's headers; Reset is a Unix time); every
answer carries the X-RateLimit headers.
"""

import argparse
import os
import sys

from flask import Flask, jsonify, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

try:
    import slidewin.limits  # noqa: F401  registers slidewin:// with limits
except ImportError:  # run from a checkout without `pip install ./clients/python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
    import slidewin.limits  # noqa: F401


def create_app(storage_uri: str) -> Flask:
    app = Flask(__name__)
    limiter = Limiter(
        get_remote_address,
        app=app,
        storage_uri=storage_uri,
        strategy="moving-window",  # SLIDEWIN.CHECK per hit, SLIDEWIN.PEEK for the headers
        headers_enabled=True,
        default_limits=["100 per minute"],
    )

    @app.get("/sms/<phone>")
    @limiter.limit("3 per minute", key_func=lambda: "sms:" + request.view_args["phone"])  # per phone
    def send_sms(phone):
        return jsonify(sent=True, to=phone)

    @app.get("/search")
    @limiter.limit("10 per minute", cost=2)  # each search costs two units of the rule (COST 2)
    def search():
        return jsonify(results=[])

    @app.get("/health")
    @limiter.exempt
    def health():
        return jsonify(storage=limiter.storage.check())

    return app


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage-uri", default=os.environ.get("STORAGE_URI", "slidewin://127.0.0.1:6379"))
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    create_app(args.storage_uri).run(host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
