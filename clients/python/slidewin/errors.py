"""The errors the client raises of its own."""

import redis


class SlidewinError(redis.exceptions.ResponseError):
    """An error slidewin explains better than the server's reply. A redis-py
    `ResponseError`, so code that catches those catches it too."""


class SlidewinModuleError(SlidewinError):
    """The server cannot answer slidewin's commands: the module is not
    loaded, and no fallback of the limiter's `backends` could take its
    place (off, or refused: the message names each step and its error)."""
