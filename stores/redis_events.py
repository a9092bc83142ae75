"""The event log on Redis Streams: one stream per thread, readable from any API replica.

Stream ids are `0-N`: Redis numbers them itself (`XADD key 0-* ...` takes the thread's
next sequence number atomically), so the SSE id of an event is N, the same 1, 2, 3, ...
as the SQLite log, and `Last-Event-ID: N` is `XREAD ... 0-N` on whichever replica the
client reaches. Streams are capped (approximately) at `max_events` entries.

Appends are queued and written in order by one flusher, a batch per pipeline, so a run
that emits many progress events pays one round trip per batch, and the events of one
caller keep the order in which they were emitted. Followers block on `XREAD` with a
timeout, then read again: no in-process notification is needed, so an event appended by
another process wakes them too.
"""

from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Any

from redis.asyncio import Redis

from stores.batching import Batcher, settle
from stores.events import TERMINAL_EVENT, Event, QueuedAppends, QueuedEvent
from stores.redis_saver import awaited

_FOLLOW_PAGE = 256
_BLOCK_MS = 5_000
# What a follower's connection must allow for beyond a plain command's timeout.
FOLLOW_BLOCK_S = _BLOCK_MS / 1000


def _seq(stream_id: bytes | str) -> int:
    text = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
    return int(text.split("-", 1)[1])


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RedisEventLog(QueuedAppends):
    """`EventLog` on Redis Streams (see the module docstring)."""

    def __init__(
        self,
        client: "Redis",
        prefix: str = "research:events:",
        max_events: int = 10_000,
        follow_client: "Redis | None" = None,
    ) -> None:
        self._client = client
        # A follower holds a connection while it blocks: give them their own pool, so
        # hundreds of SSE clients never starve the appends.
        self._follow_client = follow_client or client
        self._prefix = prefix
        self._max_events = max_events
        self._batches = Batcher(self._write)
        self._closed = False

    def _key(self, thread_id: str) -> str:
        return f"{self._prefix}{thread_id}"

    def _queue(self, op: QueuedEvent) -> None:
        self._batches.add(op)

    async def _write(self, batch: list[QueuedEvent]) -> None:
        pipe = self._client.pipeline(transaction=False)
        for op in batch:
            pipe.xadd(
                self._key(op.thread_id),
                {"name": op.name, "data": op.text, "at": op.created_at.isoformat()},
                id="0-*",
                maxlen=self._max_events,
                approximate=True,
            )
        try:
            results = await pipe.execute(raise_on_error=False)
        except Exception as exc:  # the connection failed: every append of the batch did
            results = [exc] * len(batch)
        for op, result in zip(batch, results, strict=True):
            settle(op.done, result if isinstance(result, BaseException) else _seq(result))

    def _events(self, thread_id: str, entries: list[Any]) -> list[Event]:
        events = []
        for stream_id, fields in entries:
            values = {_text(k): _text(v) for k, v in fields.items()}
            at = datetime.fromisoformat(values["at"])
            events.append(Event(_seq(stream_id), thread_id, values["name"], values["data"], at))
        return events

    async def read(self, thread_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        """Return the thread's events with an id above `after`, oldest first."""
        self._check_open()
        if limit is not None and limit < 0:
            raise ValueError("limit must not be negative")
        if limit == 0:
            return []
        entries: Any = await self._client.xrange(
            self._key(thread_id), min=f"(0-{after}", max="+", count=limit
        )
        return self._events(thread_id, entries)

    async def follow(self, thread_id: str, after: int = 0) -> AsyncGenerator[Event, None]:
        """Yield the events after `after`, then new ones as they come, until `done`."""
        position = after
        key = self._key(thread_id)
        while True:
            self._check_open()
            answer: Any = await self._follow_client.xread(
                {key: f"0-{position}"}, count=_FOLLOW_PAGE, block=_BLOCK_MS
            )
            for _stream, entries in answer or []:
                for event in self._events(thread_id, entries):
                    position = event.id
                    yield event
                    if event.name == TERMINAL_EVENT:
                        return

    async def last_id(self, thread_id: str) -> int:
        """Return the thread's highest event id, 0 when it has none."""
        self._check_open()
        entries: Any = await self._client.xrevrange(self._key(thread_id), count=1)
        return _seq(entries[0][0]) if entries else 0

    async def delete(self, thread_id: str) -> None:
        """Remove every event of the thread; its next append gets id 1 again."""
        self._check_open()
        await self._client.delete(self._key(thread_id))

    async def ping(self) -> None:
        """Raise when Redis cannot be reached."""
        self._check_open()
        await awaited(self._client.ping())

    async def close(self) -> None:
        """Write what is queued, then refuse further use."""
        await self._batches.drain()
        self._closed = True
