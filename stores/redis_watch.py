"""One blocking read for every stream this process follows and another process writes.

Instead of an `XREAD` (and a connection) per follower, one task blocks in a single
`XREAD` over all those streams and puts what it reads into `RecentEvents`, which wakes
the followers. A follower that joins while the read blocks unblocks it (`CLIENT UNBLOCK`
from another connection) so it reads again with the new key.
"""

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stores.events import Event
from stores.recent_events import RecentEvents
from stores.redis_connection import text

if TYPE_CHECKING:
    from redis.asyncio import Redis

logger = logging.getLogger(__name__)

_PAGE = 256
BLOCK_MS = 5_000
# After a failed read (Redis restarting), wait this long before the next one. Followers
# meanwhile read the stream themselves when they have waited long enough.
_RETRY_S = 0.5
# An unblock can overtake the XREAD it is meant for (two connections): try again soon.
_UNBLOCK_RETRY_S = 0.005
_UNBLOCK_TRIES = 200


class StreamWatch:
    """Reads the followed streams into `recent` (see the module docstring).

    Args:
        client: the followers' pool; the watch keeps one of its connections.
        control: another client, to unblock the watch's connection.
        recent: where the events go, and whose waiters are woken.
        key: a stream's Redis key.
        parse: the events of a stream's `XREAD` entries.
        skip: whether a stream is written in this process (its events reach memory so).
        block_ms: how long one read blocks waiting for news.
    """

    def __init__(
        self,
        client: "Redis",
        control: "Redis",
        recent: RecentEvents,
        key: Callable[[str], str],
        parse: Callable[[str, list[Any]], list[Event]],
        skip: Callable[[str], bool],
        block_ms: int = BLOCK_MS,
    ) -> None:
        self._client = client
        self._control = control
        self._recent = recent
        self._key = key
        self._parse = parse
        self._skip = skip
        self._block_ms = block_ms
        self._followers: Counter[str] = Counter()
        self._positions: dict[str, int] = {}  # per stream, the last id read
        self._task: asyncio.Task[None] | None = None
        self._wanted = asyncio.Event()  # set when a stream may need reading
        # Which change of the stream set the XREAD in flight covers (None: not in one).
        self._changes = 0
        self._reading: int | None = None
        self._connection_id: int | None = None
        self._unblocker: asyncio.Task[None] | None = None

    def add(self, stream: str, position: int) -> None:
        """Add a follower of `stream` that wants the events after `position`."""
        self._followers[stream] += 1
        if stream not in self._positions:
            self._positions[stream] = position
            self.changed(stream)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    def remove(self, stream: str) -> None:
        """Remove one follower of `stream`; the last one takes the stream out of the read."""
        self._followers[stream] -= 1
        if self._followers[stream] <= 0:
            del self._followers[stream]
            self._positions.pop(stream, None)
            if not self._skip(stream):  # no one here reads it any more
                self._recent.forget(stream)

    def follows(self, stream: str) -> bool:
        """Return whether a follower in this process reads `stream`."""
        return stream in self._positions

    def advance(self, stream: str, position: int) -> None:
        """Note that a follower read the stream up to `position` itself."""
        if position > self._positions.get(stream, position):
            self._positions[stream] = position

    def restart(self, stream: str) -> None:
        """Read a deleted stream from the start again (its ids restart at 1)."""
        if stream in self._positions:
            self._positions[stream] = 0

    def changed(self, stream: str) -> None:
        """Add the stream to the read (a new follower, or no local execution writes it now)."""
        if stream not in self._positions or self._skip(stream):
            return
        self._changes += 1
        self._wanted.set()
        if self._reading is not None and (self._unblocker is None or self._unblocker.done()):
            self._unblocker = asyncio.create_task(self._unblock())

    async def close(self) -> None:
        """Stop reading."""
        tasks = [t for t in (self._task, self._unblocker) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # closing: nothing to report

    async def _run(self) -> None:
        while self._followers:
            try:
                await self._read_on_own_connection()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: followers read for themselves meanwhile
                logger.warning("the shared event read failed, retrying: %s", exc)
                await asyncio.sleep(_RETRY_S)

    async def _read_on_own_connection(self) -> None:
        connection = self._client.client()  # one connection of the pool, kept
        try:
            self._connection_id = int(await connection.client_id())
            while self._followers:
                streams = {
                    self._key(s): (s, max(p, self._recent.last_id(s)))
                    for s, p in self._positions.items()
                    if not self._skip(s)
                }
                if not streams:
                    self._wanted.clear()
                    await self._wanted.wait()
                    continue
                self._reading = self._changes
                try:
                    answer: Any = await connection.xread(
                        {key: f"0-{p}" for key, (_, p) in streams.items()},
                        count=_PAGE,
                        block=self._block_ms,
                    )
                finally:
                    self._reading = None
                for key, entries in answer or []:
                    stream, _ = streams[text(key)]
                    events = self._parse(stream, entries)
                    if stream in self._positions and events:  # a follower may be ahead
                        self._positions[stream] = max(self._positions[stream], events[-1].id)
                    for event in events:
                        self._recent.remember(event)
        finally:
            self._connection_id = None
            await connection.aclose()

    async def _unblock(self) -> None:
        """Unblock the read in flight until one covers every stream wanted now."""
        for _ in range(_UNBLOCK_TRIES):
            reading, connection_id = self._reading, self._connection_id
            if reading is None or reading >= self._changes or connection_id is None:
                return
            await self._control.client_unblock(connection_id)
            await asyncio.sleep(_UNBLOCK_RETRY_S)
