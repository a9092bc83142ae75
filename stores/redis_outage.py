"""A Redis outage, told once: a warning when Redis stops answering, one when it is back.

Periodic work (a worker's upkeep, heartbeats, a sweep) fails every few hundred
milliseconds while Redis is away; each failure logged on its own buried the log in
tracebacks of one known cause. Work that must happen (a job's retry, a write of
evidence) waits for Redis instead, for a bounded time (`persist`).
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
        """An attempt failed because Redis is away: warn if that is news."""
        if self._since is None:
            self._since = time.monotonic()
            logger.warning("%s: Redis is not answering (%s); waiting for it", self._what, exc)

    def answered(self) -> None:
        """An attempt succeeded: say how long Redis was away, if it was."""
        if self._since is not None:
            away = time.monotonic() - self._since
            self._since = None
            logger.warning("%s: Redis answers again after %.1f s", self._what, away)

    @asynccontextmanager
    async def tolerated(self, confirms: bool = True) -> AsyncIterator[None]:
        """Around one round of periodic work: Redis being away ends the round quietly.

        `confirms`: a round that ends well shows Redis answers; not so for one that may
        end without asking it anything (saq's aborts, when no job runs long enough).
        """
        try:
            yield
        except AWAY as exc:
            self.failed(exc)
            return
        if confirms:
            self.answered()

    async def waited(self, action: Callable[[], Awaitable[T]], longest_s: float) -> T | None:
        """`persist`, but None where it would raise: Redis was away for `longest_s`."""
        try:
            return await self.persist(action, longest_s)
        except AWAY:
            return None

    async def persist(self, action: Callable[[], Awaitable[T]], longest_s: float) -> T:
        """`action()`, tried again while Redis is away, for up to `longest_s` seconds.

        Raises the last failure when Redis is away longer; `action` must be safe to
        repeat (one that timed out may have been applied).
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
