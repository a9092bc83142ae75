"""The event log on Redis Streams: one stream per thread, readable from any API replica.

Stream ids are `0-N` (`XADD key 0-*` takes the next sequence number atomically), so the
SSE id is N, as in the SQLite log, on whichever replica the client reaches. Streams are
capped (approximately) at `max_events` entries. Like the registry, this log assumes one
Redis server, not a Cluster: a batch's script spans many threads' streams.

Appends are batched into one Lua script call (`_APPEND`) sent through the process's
shared pipelines (`stores.redis_batches`), in the order they were emitted. They are
idempotent: each event carries a key, and an event whose key its stream stored already
is not stored again, so a resent batch or a retried execution adds nothing twice. An
execution's events and checkpoint writes are stored in order, up to the first that
fails (`ordered`).

Followers are served from memory (`stores.recent_events`): streams this process writes
get there as they are appended, the others through one shared blocking `XREAD`
(`stores.redis_watch`). A follower reads the stream itself when memory does not reach
back to its position, and after waiting a while without news.
"""

import asyncio
import functools
import secrets
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from typing import Any

from redis.asyncio import Redis

from stores.batching import Batcher, set_outcome
from stores.events import TERMINAL_EVENT, Event, QueuedAppends, QueuedEvent
from stores.recent_events import RecentEvents
from stores.redis_batches import RedisBatches
from stores.redis_connection import awaited, text
from stores.redis_outage import Outage
from stores.redis_watch import BLOCK_MS, StreamWatch

_FOLLOW_PAGE = 256
# How long a follower waits for news before it reads the stream itself: of a stream this
# process writes (another process may append to it too), of one the watch reads.
_LOCAL_CHECK_S = 1.0
_REMOTE_CHECK_S = BLOCK_MS / 1000
# What the watch's connection must allow for beyond a plain command's timeout.
FOLLOW_BLOCK_S = BLOCK_MS / 1000
# How long a follower waits for a Redis that stopped answering before its stream ends.
FOLLOW_OUTAGE_S = 60.0
# Events per script call: a larger batch goes in several (each blocks Redis a moment).
_APPEND_CHUNK = 256
# How long a stream's event keys are kept after its last append (a retry comes sooner).
KEYS_TTL_S = 86_400

# Append a batch of events. KEYS: pairs of a stream and the hash of its events' keys;
# ARGV[1]: the cap on a stream's length, ARGV[2]: the keys' lifetime, then five per event:
# its pair's index in KEYS, its key, name, payload, time. Each event's reply is its stream
# id, `{id}` when its key was stored already, or its own error (`pcall`: one that fails, a
# key of another type, fails alone, and the events after it are still appended).
_APPEND = """
local out = {}
for i = 3, #ARGV, 5 do
    local stream, seen = KEYS[tonumber(ARGV[i])], KEYS[tonumber(ARGV[i]) + 1]
    local first = redis.call('HGET', seen, ARGV[i + 1])
    if first then
        out[#out + 1] = {first}
    else
        local id = redis.pcall('XADD', stream, 'MAXLEN', '~', ARGV[1], '0-*',
            'name', ARGV[i + 2], 'data', ARGV[i + 3], 'at', ARGV[i + 4])
        if type(id) == 'string' then
            redis.call('HSET', seen, ARGV[i + 1], id)
        end
        out[#out + 1] = id
    end
end
for k = 2, #KEYS, 2 do
    redis.call('EXPIRE', KEYS[k], ARGV[2])
end
return out
"""


def _seq(stream_id: bytes | str) -> int:
    return int(text(stream_id).split("-", 1)[1])


class RedisEventLog(QueuedAppends):
    """`EventLog` on Redis Streams (see the module docstring)."""

    def __init__(
        self,
        client: "Redis",
        prefix: str = "research:events:",
        max_events: int = 10_000,
        follow_client: "Redis | None" = None,
        batches: RedisBatches | None = None,
        *,
        recheck_s: float = _REMOTE_CHECK_S,
        block_ms: int = BLOCK_MS,
    ) -> None:
        """Log on `client`; the shared read of followed streams blocks on `follow_client`.

        `batches`: `client`'s shared command batches. `recheck_s`: how long a follower of a
        stream another process writes waits for news before reading it itself.
        `block_ms`: how long the shared read blocks.
        """
        self._client = client
        # The watch blocks on a connection of its own: a pool of its own keeps it apart.
        self._follow_client = follow_client or client
        self._prefix = prefix
        self._max_events = max_events
        self._appends = Batcher(self._write)
        self._commands = batches or RedisBatches(client)
        self._append_script = client.register_script(_APPEND)
        # Streams an execution of this process is writing (how many executions).
        self._local: Counter[str] = Counter()
        # Per stream written here: events not yet known stored, and the failure that lost
        # one (none after it is stored: what is stored is a prefix).
        self._unsettled: dict[str, list[asyncio.Future[int]]] = {}
        self._lost: dict[str, BaseException] = {}
        self._recent = RecentEvents()
        self._watch = StreamWatch(
            self._follow_client,
            client,
            self._recent,
            self._key,
            self._events,
            skip=lambda stream: stream in self._local,
            block_ms=block_ms,
        )
        self._recheck_s = recheck_s
        self._closed = False
        self._outage = Outage("event log followers")

    def _key(self, thread_id: str) -> str:
        return f"{self._prefix}{thread_id}"

    def _keys_key(self, thread_id: str) -> str:
        return f"{self._prefix}{thread_id}:keys"

    def _queue(self, op: QueuedEvent) -> None:
        if op.key is None:
            op.key = secrets.token_hex(8)
        if op.thread_id in self._local:
            pending = self._unsettled.setdefault(op.thread_id, [])
            pending[:] = [f for f in pending if not f.done()]
            pending.append(op.done)
        self._appends.add(op)

    @asynccontextmanager
    async def ordered(self, thread_id: str) -> AsyncIterator[None]:
        """Wrap a checkpoint write of a thread an execution of this process runs.

        The write waits for the events queued before it and is not made when one was lost;
        when the write fails, the execution's later events are not stored either.
        """
        pending = self._unsettled.get(thread_id, [])
        await asyncio.gather(*(asyncio.shield(f) for f in pending if not f.cancelled()))
        if (failure := self._lost.get(thread_id)) is not None:
            raise failure
        try:
            yield
        except Exception as exc:
            if thread_id in self._local:
                self._lost.setdefault(thread_id, exc)
            raise

    async def _write(self, batch: list[QueuedEvent]) -> None:
        # An execution whose event was lost stores no later one (a retry emits them again).
        kept = []
        for op in batch:
            if (failure := self._lost.get(op.thread_id)) is not None:
                set_outcome(op.done, failure)
            else:
                kept.append(op)
        batch = kept
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
                if op.thread_id in self._local:
                    self._lost.setdefault(op.thread_id, reply)
                set_outcome(op.done, reply)
                continue
            if isinstance(reply, list):  # stored already, by an earlier try
                set_outcome(op.done, _seq(reply[0]))
                continue
            event_id = _seq(reply)
            if op.thread_id in self._local:
                self._recent.remember(
                    Event(event_id, op.thread_id, op.name, op.text, op.created_at)
                )
            set_outcome(op.done, event_id)

    def _append_call(self, chunk: list[QueuedEvent]) -> "asyncio.Future[Any]":
        """Queue one call of `_APPEND` for these events (now, so the chunks keep order)."""
        index: dict[str, int] = {}
        keys: list[str] = []
        args: list[Any] = [self._max_events, KEYS_TTL_S]
        for op in chunk:
            stream = self._key(op.thread_id)
            if stream not in index:
                index[stream] = len(keys) + 1
                keys += (stream, self._keys_key(op.thread_id))
            args += (index[stream], op.key, op.name, op.text, op.created_at.isoformat())
        return self._commands.call(self._append_script, keys, args)

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
                    self._unsettled.pop(stream, None)  # the next execution starts clean
                    self._lost.pop(stream, None)
                    if self._watch.follows(stream):  # the watch reads on from memory's end
                        self._watch.changed(stream)
                    else:
                        self._recent.forget(stream)

    def _events(self, thread_id: str, entries: list[Any]) -> list[Event]:
        events = []
        for stream_id, fields in entries:
            values = {text(k): text(v) for k, v in fields.items()}
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
        """Yield the events after `after`, then new ones as they come, until `done`.

        While Redis is away the follower waits; away longer than `FOLLOW_OUTAGE_S`, the
        stream ends without `done`, for its client to reconnect.
        """
        self._check_open()
        position = after
        self._watch.add(thread_id, after)
        try:
            while True:
                self._check_open()
                events = await self._outage.waited(
                    functools.partial(self._next, thread_id, position), FOLLOW_OUTAGE_S
                )
                if events is None:
                    return
                for event in events:
                    position = event.id
                    yield event
                    if event.name == TERMINAL_EVENT:
                        return
        finally:
            self._watch.remove(thread_id)

    async def _next(self, thread_id: str, position: int) -> list[Event]:
        """Return the next events after `position`, from memory when it has them.

        Empty when the follower was woken without news (look again: the log may be closed).
        """
        events, waiter = await self._recent.look(
            thread_id, position, lambda p: self._read_page(thread_id, p)
        )
        if events:
            return events
        patience = _LOCAL_CHECK_S if thread_id in self._local else self._recheck_s
        try:
            async with asyncio.timeout(patience):
                await waiter.wait()
            return []
        except TimeoutError:  # quiet for a while: was something appended meanwhile?
            return await self._read_page(thread_id, position)

    async def _read_page(self, thread_id: str, position: int) -> list[Event]:
        """Read a follower's page from Redis; the shared read then starts after it."""
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
        await self._client.delete(self._key(thread_id), self._keys_key(thread_id))

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
