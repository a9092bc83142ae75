"""Pause and cancel requests, from the process that took the call to the one running the run.

Requests live in memory when runs execute in the API process, in Redis when workers do
(`stores.redis_signals`). The same place holds each thread's admission lock, so only one
caller decides which waiting run starts.
"""

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol


class RunSignals(Protocol):
    """Requests to stop a run, set by the API and read by whoever executes the run.

    `MemorySignals` serves one process; `RedisSignals` any number of API replicas and
    workers. Each request is per thread; none raises for an unknown thread.
    """

    async def request_pause(self, thread_id: str) -> None:
        """Ask the run to stop at its next node boundary (its checkpoint)."""
        ...

    async def take_pause(self, thread_id: str) -> bool:
        """Return whether a pause was asked for; True once per request (it is consumed)."""
        ...

    async def pause_asked(self, thread_id: str) -> bool:
        """Return whether a pause is asked for, leaving the request to `take_pause`."""
        ...

    async def request_cancel(self, thread_id: str) -> None:
        """Mark the run as cancelled by its owner, before its task is stopped."""
        ...

    async def cancel_requested(self, thread_id: str) -> bool:
        """Return whether a stopped task was cancelled by its owner (False: the process stops)."""
        ...

    async def clear(self, thread_id: str) -> None:
        """Forget the thread's requests (its run stopped, or the thread is deleted)."""
        ...

    def admission(self, thread_id: str) -> AbstractAsyncContextManager[None]:
        """Hold the thread's admission lock while deciding which waiting run starts.

        Raises:
            redis.exceptions.LockError: (Redis) the lock was not had within its timeout.
        """
        ...


class MemorySignals:
    """Requests for runs that execute in this process."""

    def __init__(self) -> None:
        self._pauses: set[str] = set()
        self._cancels: set[str] = set()
        # A lock lives while someone holds or waits for it, so idle threads cost nothing.
        self._admissions: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    @asynccontextmanager
    async def admission(self, thread_id: str) -> AsyncIterator[None]:
        """Hold the thread's admission lock, in this process."""
        lock = self._admissions.get(thread_id)
        if lock is None:
            lock = self._admissions[thread_id] = asyncio.Lock()
        async with lock:
            yield

    async def request_pause(self, thread_id: str) -> None:
        """Note the request."""
        self._pauses.add(thread_id)

    async def take_pause(self, thread_id: str) -> bool:
        """Consume the request, if there is one."""
        asked = thread_id in self._pauses
        self._pauses.discard(thread_id)
        return asked

    async def pause_asked(self, thread_id: str) -> bool:
        """Return whether the request is there."""
        return thread_id in self._pauses

    async def request_cancel(self, thread_id: str) -> None:
        """Note the request."""
        self._cancels.add(thread_id)

    async def cancel_requested(self, thread_id: str) -> bool:
        """Return whether the owner asked to cancel."""
        return thread_id in self._cancels

    async def clear(self, thread_id: str) -> None:
        """Drop both kinds of request."""
        self._pauses.discard(thread_id)
        self._cancels.discard(thread_id)
