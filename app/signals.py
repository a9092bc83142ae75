"""Pause and cancel requests, from the process that took the call to the one running the run.

A run checks for a pause at every node boundary and for a cancel when its task is
cancelled, so both kinds of request must be readable wherever the run executes: in
memory when runs execute in the API process, in Redis when workers elsewhere hold them.
"""

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from redis.asyncio import Redis

# A forgotten request (its run died with no one to resume it) must not live for ever.
SIGNAL_TTL_S = 24 * 3600


class RunSignals(Protocol):
    """Requests to stop a run, set by the API and read by whoever executes the run."""

    async def request_pause(self, thread_id: str) -> None:
        """Ask the run to stop at its next node boundary."""
        ...

    async def take_pause(self, thread_id: str) -> bool:
        """True once per pause request (the request is consumed)."""
        ...

    async def request_cancel(self, thread_id: str) -> None:
        """Mark the run as cancelled by its owner, before its task is stopped."""
        ...

    async def cancel_requested(self, thread_id: str) -> bool:
        """Whether a stopped task was cancelled by its owner (else: the process stops)."""
        ...

    async def clear(self, thread_id: str) -> None:
        """Forget the thread's requests (its run settled, or the thread is deleted)."""
        ...


class MemorySignals:
    """Requests for runs that execute in this process."""

    def __init__(self) -> None:
        self._pauses: set[str] = set()
        self._cancels: set[str] = set()

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
