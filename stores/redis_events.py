"""The event log on Redis Streams: one stream per thread, readable from any API replica.

Stream ids are `0-N`: Redis numbers them itself (`XADD key 0-* ...` takes the thread's
next sequence number atomically), so the SSE id of an event is N, the same 1, 2, 3, ...
as the SQLite log, and `Last-Event-ID: N` is `XREAD ... 0-N` on whichever replica the
client reaches. Streams are capped (approximately) at `max_events` entries.

Appends are queued and written in order by one flusher, a batch per pipeline, so a run
that emits many progress events pays one round trip per batch, and the events of one
caller keep the order in which they were emitted.

Followers of a stream another process writes (a worker's run, followed from an API
replica) block on `XREAD` with a timeout, then read again. Followers of a stream a leg of
this process is writing (`writing`: the embedded worker) are woken by its appends and
served from memory (`stores.recent_events`), as on SQLite: about one `XREAD` per event
saved. They still read the stream when memory has a gap (another process appended in
between) and every `_LOCAL_CHECK_S` while idle, so no event written elsewhere is missed.
"""

import asyncio
from collections import Counter
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from redis.asyncio import Redis

from stores.batching import Batcher, settle
from stores.events import TERMINAL_EVENT, Event, QueuedAppends, QueuedEvent
from stores.recent_events import RecentEvents
from stores.redis_saver import awaited

_FOLLOW_PAGE = 256
_BLOCK_MS = 5_000
# How long a follower of a stream this process writes waits for its next append before it
# looks in Redis for one written by another process.
_LOCAL_CHECK_S = 1.0
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
        # Streams a leg of this process is writing (how many legs), and their latest events.
        self._local: Counter[str] = Counter()
        self._recent = RecentEvents()
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
            if isinstance(result, BaseException):
                settle(op.done, result)
                continue
            event_id = _seq(result)
            if op.thread_id in self._local:
                self._recent.remember(
                    Event(event_id, op.thread_id, op.name, op.text, op.created_at)
                )
            settle(op.done, event_id)

    @contextmanager
    def writing(self, *streams: str) -> Iterator[None]:
        """Serve these streams' followers in this process from memory while the block runs."""
        self._local.update(streams)
        try:
            yield
        finally:
            self._local.subtract(streams)
            for stream in streams:
                if self._local[stream] <= 0:
                    del self._local[stream]
                    self._recent.forget(stream)
                    self._recent.wake(stream)  # its followers go back to reading Redis

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
        while True:
            self._check_open()
            if thread_id in self._local:
                events = await self._next_local(thread_id, position)
            else:
                events = await self._next_remote(thread_id, position)
            for event in events:
                position = event.id
                yield event
                if event.name == TERMINAL_EVENT:
                    return

    async def _next_remote(self, thread_id: str, position: int) -> list[Event]:
        """The next events of a stream written elsewhere: a blocking read (none at its timeout)."""
        answer: Any = await self._follow_client.xread(
            {self._key(thread_id): f"0-{position}"}, count=_FOLLOW_PAGE, block=_BLOCK_MS
        )
        return [e for _stream, entries in answer or [] for e in self._events(thread_id, entries)]

    async def _next_local(self, thread_id: str, position: int) -> list[Event]:
        """The next events of a stream this process writes: from memory when it has them.

        Empty when the follower was woken without news (look again: the leg may have ended).
        """
        waiter = self._recent.waiter(thread_id)  # before looking: no append slips between
        events = self._recent.after(thread_id, position)
        if events is None:  # memory does not reach back (a gap, or a late follower)
            events = await self.read(thread_id, after=position, limit=_FOLLOW_PAGE)
        if events:
            return events
        try:
            async with asyncio.timeout(_LOCAL_CHECK_S):
                await waiter.wait()
            return []
        except TimeoutError:  # quiet for a while: was something appended elsewhere?
            return await self.read(thread_id, after=position, limit=_FOLLOW_PAGE)

    async def last_id(self, thread_id: str) -> int:
        """Return the thread's highest event id, 0 when it has none."""
        self._check_open()
        entries: Any = await self._client.xrevrange(self._key(thread_id), count=1)
        return _seq(entries[0][0]) if entries else 0

    async def delete(self, thread_id: str) -> None:
        """Remove every event of the thread; its next append gets id 1 again."""
        self._check_open()
        self._recent.forget(thread_id)
        await self._client.delete(self._key(thread_id))

    async def ping(self) -> None:
        """Raise when Redis cannot be reached."""
        self._check_open()
        await awaited(self._client.ping())

    async def close(self) -> None:
        """Write what is queued, then refuse further use and wake followers so they raise."""
        await self._batches.drain()
        self._closed = True
        self._recent.wake_all()
