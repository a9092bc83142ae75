"""The event log on Redis Streams: one stream per thread, readable from any API replica.

Stream ids are `0-N`: Redis numbers them itself (`XADD key 0-* ...` takes the thread's
next sequence number atomically), so the SSE id of an event is N, the same 1, 2, 3, ...
as the SQLite log, and `Last-Event-ID: N` is `XREAD ... 0-N` on whichever replica the
client reaches. Streams are capped (approximately) at `max_events` entries.

Appends are queued and written in order by one flusher, a whole batch (the events of
every run that emitted meanwhile) in one call of a Lua script (`_APPEND`) that goes out
with the process's other commands (`stores.redis_batches`), reads too. A run that emits
many progress events shares one round trip per batch, the client packs one command
instead of one per event (measured: 25 events 0.6 -> 0.3 ms of client CPU), and the
events of one caller keep the order in which they were emitted. The script names every
stream it appends to, but a batch spans many threads' streams: like the registry, this
log assumes one Redis server, not a Cluster.

Followers are served from memory (`stores.recent_events`), as on SQLite. A stream a leg
of this process is writing (`writing`: the embedded worker) gets there as it is appended;
the streams other processes write (a worker's run, followed from an API replica) are
read into it by one blocking `XREAD` over all of them (`stores.redis_watch`), not one per
follower. A follower reads the stream itself when memory does not reach back to its
position (it joined late, or another process appended in between), and when it has
waited a while without news, so nothing is missed while the shared read is down.
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
from stores.redis_batches import RedisBatches
from stores.redis_saver import awaited
from stores.redis_watch import BLOCK_MS, StreamWatch

_FOLLOW_PAGE = 256
# How long a follower waits for news before it reads the stream itself: of a stream this
# process writes (another process may append to it too), of one the watch reads.
_LOCAL_CHECK_S = 1.0
_REMOTE_CHECK_S = BLOCK_MS / 1000
# What the watch's connection must allow for beyond a plain command's timeout.
FOLLOW_BLOCK_S = BLOCK_MS / 1000
# Events per script call: a larger batch goes in several (each blocks Redis a moment).
_APPEND_CHUNK = 256

# Append a batch of events. KEYS: the streams; ARGV[1]: the cap on a stream's length, then
# four per event: its stream's index in KEYS, name, payload, time. Each event's reply is
# its stream id, or its own error (`pcall`: one that fails, a key of another type, fails
# alone, and the events after it are still appended, as separate commands would be).
_APPEND = """
local out = {}
for i = 2, #ARGV, 4 do
    out[#out + 1] = redis.pcall('XADD', KEYS[tonumber(ARGV[i])], 'MAXLEN', '~', ARGV[1],
        '0-*', 'name', ARGV[i + 1], 'data', ARGV[i + 2], 'at', ARGV[i + 3])
end
return out
"""


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
        batches: RedisBatches | None = None,
    ) -> None:
        """`batches`: the command batches of `client` to send through (shared: fewer trips)."""
        self._client = client
        # The watch blocks on a connection of its own: a pool of its own keeps it apart.
        self._follow_client = follow_client or client
        self._prefix = prefix
        self._max_events = max_events
        self._appends = Batcher(self._write)
        self._commands = batches or RedisBatches(client)
        self._append_script = client.register_script(_APPEND)
        # Streams a leg of this process is writing (how many legs), and their latest events.
        self._local: Counter[str] = Counter()
        self._recent = RecentEvents()
        self._watch = StreamWatch(
            self._follow_client,
            client,
            self._recent,
            self._key,
            self._events,
            skip=lambda stream: stream in self._local,
        )
        self._closed = False

    def _key(self, thread_id: str) -> str:
        return f"{self._prefix}{thread_id}"

    def _queue(self, op: QueuedEvent) -> None:
        self._appends.add(op)

    async def _write(self, batch: list[QueuedEvent]) -> None:
        chunks = [batch[i : i + _APPEND_CHUNK] for i in range(0, len(batch), _APPEND_CHUNK)]
        outcomes = await asyncio.gather(
            *(self._append_call(chunk) for chunk in chunks), return_exceptions=True
        )
        replies: list[Any] = []
        for chunk, outcome in zip(chunks, outcomes, strict=True):
            # A call that failed as a whole (the connection): each of its appends did.
            replies += [outcome] * len(chunk) if isinstance(outcome, BaseException) else outcome
        for op, reply in zip(batch, replies, strict=True):
            if isinstance(reply, BaseException):
                settle(op.done, reply)
                continue
            event_id = _seq(reply)
            if op.thread_id in self._local:
                self._recent.remember(
                    Event(event_id, op.thread_id, op.name, op.text, op.created_at)
                )
            settle(op.done, event_id)

    def _append_call(self, chunk: list[QueuedEvent]) -> "asyncio.Future[Any]":
        """One call of `_APPEND` for these events (queued now, so the chunks keep order)."""
        index: dict[str, int] = {}
        args: list[Any] = [self._max_events]
        for op in chunk:
            key = index.setdefault(self._key(op.thread_id), len(index) + 1)
            args += (key, op.name, op.text, op.created_at.isoformat())
        return self._commands.call(self._append_script, list(index), args)

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
                    if self._watch.follows(stream):  # the watch reads on from memory's end
                        self._watch.changed(stream)
                    else:
                        self._recent.forget(stream)

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
        key = self._key(thread_id)
        entries = await self._commands.command(
            lambda pipe: pipe.xrange(key, min=f"(0-{after}", max="+", count=limit)
        )
        return self._events(thread_id, entries)

    async def follow(self, thread_id: str, after: int = 0) -> AsyncGenerator[Event, None]:
        """Yield the events after `after`, then new ones as they come, until `done`."""
        self._check_open()
        position = after
        self._watch.add(thread_id, after)
        try:
            while True:
                self._check_open()
                for event in await self._next(thread_id, position):
                    position = event.id
                    yield event
                    if event.name == TERMINAL_EVENT:
                        return
        finally:
            self._watch.remove(thread_id)

    async def _next(self, thread_id: str, position: int) -> list[Event]:
        """The next events after `position`: from memory when it has them.

        Empty when the follower was woken without news (look again: the log may be closed).
        """
        events, waiter = await self._recent.look(
            thread_id, position, lambda p: self._read_page(thread_id, p)
        )
        if events:
            return events
        patience = _LOCAL_CHECK_S if thread_id in self._local else _REMOTE_CHECK_S
        try:
            async with asyncio.timeout(patience):
                await waiter.wait()
            return []
        except TimeoutError:  # quiet for a while: was something appended meanwhile?
            return await self._read_page(thread_id, position)

    async def _read_page(self, thread_id: str, position: int) -> list[Event]:
        """A follower's page read from Redis; the shared read then starts after it."""
        events = await self.read(thread_id, after=position, limit=_FOLLOW_PAGE)
        if events:
            self._watch.advance(thread_id, events[-1].id)
        return events

    async def last_id(self, thread_id: str) -> int:
        """Return the thread's highest event id, 0 when it has none."""
        self._check_open()
        entries: Any = await self._client.xrevrange(self._key(thread_id), count=1)
        return _seq(entries[0][0]) if entries else 0

    async def delete(self, thread_id: str) -> None:
        """Remove every event of the thread; its next append gets id 1 again."""
        self._check_open()
        self._recent.forget(thread_id)
        self._watch.restart(thread_id)
        await self._client.delete(self._key(thread_id))

    async def ping(self) -> None:
        """Raise when Redis cannot be reached."""
        self._check_open()
        await awaited(self._client.ping())

    async def close(self) -> None:
        """Write what is queued, then refuse further use and wake followers so they raise."""
        await self._appends.drain()
        self._closed = True
        await self._watch.close()
        self._recent.wake_all()
