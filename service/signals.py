"""Pause and cancel requests, from the process that took the call to the one running the run.

A run checks for a pause at every node boundary and for a cancel when its task is
cancelled, so both kinds of request must be readable wherever the run executes: in
memory when runs execute in the API process, in Redis when workers elsewhere hold them.
The same place holds each thread's admission lock: who starts a Platform run that waited
for a busy thread (the thread's executor as its run stops, or the API that stored the
waiting run just after) must decide it alone, or two runs start on one question.
"""

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from redis.asyncio import Redis

# A forgotten request (its run died with no one to resume it) must not live for ever.
SIGNAL_TTL_S = 24 * 3600
# An admission takes a few store round trips; a holder that died frees the lock after this.
ADMISSION_LOCK_S = 30.0


class RunSignals(Protocol):
    """Requests to stop a run, set by the API and read by whoever executes the run.

    `MemorySignals` serves one process; `RedisSignals` any number of API replicas and
    workers. Each request is per thread; none raises for an unknown thread.
    """

    async def request_pause(self, thread_id: str) -> None:
        """Ask the run to stop at its next node boundary (its checkpoint)."""
        ...

    async def take_pause(self, thread_id: str) -> bool:
        """Whether a pause was asked for; True once per request (it is consumed)."""
        ...

    async def request_cancel(self, thread_id: str) -> None:
        """Mark the run as cancelled by its owner, before its task is stopped."""
        ...

    async def cancel_requested(self, thread_id: str) -> bool:
        """Whether a stopped task was cancelled by its owner (False: the process stops)."""
        ...

    async def clear(self, thread_id: str) -> None:
        """Forget the thread's requests (its run settled, or the thread is deleted)."""
        ...

    def admission(self, thread_id: str) -> AbstractAsyncContextManager[None]:
        """The thread's admission lock, held while deciding which waiting run starts.

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
        """The thread's admission lock, in this process."""
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
        if thread_id in self._pauses:
            self._pauses.discard(thread_id)
            return True
        return False

    async def request_cancel(self, thread_id: str) -> None:
        """Note the request."""
        self._cancels.add(thread_id)

    async def cancel_requested(self, thread_id: str) -> bool:
        """Whether the owner asked to cancel."""
        return thread_id in self._cancels

    async def clear(self, thread_id: str) -> None:
        """Drop both kinds of request."""
        self._pauses.discard(thread_id)
        self._cancels.discard(thread_id)


class RedisSignals:
    """Requests any API replica can set and any worker can read: one key each."""

    def __init__(self, client: "Redis", prefix: str = "research:signal") -> None:
        self._client = client
        self._prefix = prefix

    def _key(self, kind: str, thread_id: str) -> str:
        return f"{self._prefix}:{kind}:{thread_id}"

    @asynccontextmanager
    async def admission(self, thread_id: str) -> AsyncIterator[None]:
        """The thread's admission lock, across processes (a redis-py lock with a timeout)."""
        lock = self._client.lock(
            self._key("admission", thread_id),
            timeout=ADMISSION_LOCK_S,
            blocking_timeout=ADMISSION_LOCK_S,
        )
        async with lock:
            yield

    async def request_pause(self, thread_id: str) -> None:
        """Note the request."""
        await self._client.set(self._key("pause", thread_id), 1, ex=SIGNAL_TTL_S)

    async def take_pause(self, thread_id: str) -> bool:
        """Consume the request, if there is one."""
        # DEL answers how many keys it removed: taking the request is one atomic command.
        return bool(await self._client.delete(self._key("pause", thread_id)))

    async def request_cancel(self, thread_id: str) -> None:
        """Note the request."""
        await self._client.set(self._key("cancel", thread_id), 1, ex=SIGNAL_TTL_S)

    async def cancel_requested(self, thread_id: str) -> bool:
        """Whether the owner asked to cancel."""
        return bool(await self._client.exists(self._key("cancel", thread_id)))

    async def clear(self, thread_id: str) -> None:
        """Drop both kinds of request."""
        await self._client.delete(self._key("pause", thread_id), self._key("cancel", thread_id))
