#!/usr/bin/env python3
"""slowapi on slidewin: a FastAPI app whose routes are limited by
decorators, the limits kept by the slidewin module (storage_uri
"slidewin://..."), moving window (the exact sliding window, on the server's
clock).

    pip install "./clients/python[limits]" fastapi slowapi uvicorn
    python3 examples/python/fastapi_app.py --storage-uri slidewin://127.0.0.1:6379 --port 8000
    curl -i http://127.0.0.1:8000/login/alice       # the 4th within a minute: 429

A refused request gets 429 with Retry-After (seconds until the oldest entry
leaves the window) and X-RateLimit-Limit / -Remaining / -Reset (slowapi's
headers; Reset is a Unix time); the allowed ones carry the X-RateLimit
headers too (slowapi needs the `response: Response` parameter for that).
"""

import argparse
import os
import sys

from fastapi import FastAPI, Request, Response
from slowapi import Limiter, _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded
from slowapi.util import get_remote_address

try:
    import slidewin.limits  # noqa: F401  registers slidewin:// with limits
except ImportError:  # run from a checkout without `pip install ./clients/python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
    import slidewin.limits  # noqa: F401


def create_app(storage_uri: str) -> FastAPI:
    limiter = Limiter(
        key_func=get_remote_address,
        storage_uri=storage_uri,
        strategy="moving-window",  # SLIDEWIN.CHECK per hit, SLIDEWIN.PEEK for the headers
        headers_enabled=True,
    )
    app = FastAPI()
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)

    @app.get("/login/{user}")
    @limiter.limit("3/minute", key_func=lambda request: "login:" + request.path_params["user"])
    async def login(request: Request, response: Response, user: str):
        return {"user": user, "ok": True}

    @app.get("/export")
    @limiter.limit("10/minute", cost=4)  # an export costs four units of the rule (COST 4)
    async def export(request: Request, response: Response):
        return {"rows": 0}

    return app


def main():
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage-uri", default=os.environ.get("STORAGE_URI", "slidewin://127.0.0.1:6379"))
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(create_app(args.storage_uri), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
