"""A Redis outage, logged once: a warning when Redis stops answering, one when it is back.

Periodic work skips its rounds while Redis is away instead of logging a traceback each
time; work that must happen waits for Redis, for a bounded time (`persist`).
"""

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

# What a Redis that is away (stopped, restarting, unreachable) raises.
AWAY = (RedisConnectionError, RedisTimeoutError, TimeoutError, OSError)
# How work that must happen waits for Redis to answer again: first and longest pause.
PAUSE_S = (0.25, 5.0)

T = TypeVar("T")


class Outage:
    """Whether Redis is away, as seen by one component (`what`), and since when."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._since: float | None = None

    @property
    def ongoing(self) -> bool:
        """Whether the last attempt failed because Redis was away."""
        return self._since is not None

    def failed(self, exc: BaseException) -> None:
        """Note a failure because Redis is away; warn if the outage is new."""
        if self._since is None:
            self._since = time.monotonic()
            logger.warning("%s: Redis is not answering (%s); waiting for it", self._what, exc)

    def answered(self) -> None:
        """Note a success; say how long Redis was away, if it was."""
        if self._since is not None:
            away = time.monotonic() - self._since
            self._since = None
            logger.warning("%s: Redis answers again after %.1f s", self._what, away)

    @asynccontextmanager
    async def tolerated(self, confirms: bool = True) -> AsyncIterator[None]:
        """End one round of periodic work quietly when Redis is away.

        `confirms`: whether a round that ends well shows Redis answers (not so for a round
        that may ask it nothing).
        """
        try:
            yield
        except AWAY as exc:
            self.failed(exc)
            return
        if confirms:
            self.answered()

    async def waited(self, action: Callable[[], Awaitable[T]], longest_s: float) -> T | None:
        """Return `persist(action, longest_s)`, or None where it would raise."""
        try:
            return await self.persist(action, longest_s)
        except AWAY:
            return None

    async def persist(self, action: Callable[[], Awaitable[T]], longest_s: float) -> T:
        """Return `action()`, tried again while Redis is away, for up to `longest_s` seconds.

        Raise the last failure when Redis is away longer; `action` must be safe to repeat.
        """
        deadline = time.monotonic() + longest_s
        pause, longest = PAUSE_S
        while True:
            try:
                result = await action()
            except AWAY as exc:
                self.failed(exc)
                if time.monotonic() + pause > deadline:
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, longest)
                continue
            self.answered()
            return result
