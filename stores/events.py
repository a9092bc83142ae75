"""The per-thread event log that SSE streams replay from and follow live.

Each thread's events carry ids 1, 2, 3, ... with no gaps; the id is the SSE `id`, so a
client that reconnects with `Last-Event-ID` gets exactly what it missed.
"""

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic_core import PydanticSerializationError, to_json

TERMINAL_EVENT = "done"
# The last event of a stream: a thread's `done`, a Platform run's `end`
# (`service.platform_runs.END_EVENT`). Memory kept for a stream is let go at either.
CLOSING_EVENTS = frozenset({TERMINAL_EVENT, "end"})

# The largest id a client may name (SQLite's largest integer; a Redis stream's ids go
# further): a position past it is past every event.
MAX_EVENT_ID = 2**63 - 1


def event_id(header: str | None) -> int:
    """Return a `Last-Event-ID` as a position: 0 unless ASCII digits, capped at the last id."""
    if not header or not header.isascii() or not header.isdigit():
        return 0
    return MAX_EVENT_ID if len(header) > 19 else min(int(header), MAX_EVENT_ID)


async def resume_point(
    log: "EventLog", thread_id: str, after: int, last_names: set[str]
) -> int | None:
    """Return where a reconnecting follower of `thread_id` starts, or None if nothing is left.

    A position past the last event is taken as the last; at the end of a stream whose last
    event is one of `last_names` there is nothing to follow.
    """
    if after == 0:
        return 0
    last = await log.last_id(thread_id)
    if after < last or last == 0:
        return after if last else 0
    ending = await log.read(thread_id, after=last - 1, limit=1)
    return None if ending and ending[0].name in last_names else last


# An event's payload: an object, or a list (a Platform run's messages-tuple chunk).
EventData = dict[str, Any] | list[Any]


def encode(data: Any, lenient: bool = False) -> str:
    """Return an event's payload as JSON, as stored and sent over SSE.

    Pydantic models, messages and dataclasses are encoded as the SDK reads them; another
    type raises TypeError, or with `lenient` becomes its repr.
    """
    try:
        return to_json(data, fallback=repr if lenient else None).decode()
    except PydanticSerializationError as exc:
        raise TypeError(f"an event's payload must be JSON: {exc}") from None


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a thread's log; `id` is the SSE event id, `text` its payload's JSON."""

    id: int
    thread_id: str
    name: str
    text: str
    created_at: datetime

    @property
    def data(self) -> EventData:
        """The payload, parsed from its JSON."""
        parsed: EventData = json.loads(self.text)
        return parsed


class EventLogClosed(RuntimeError):
    """The log was used after it was closed."""


class EventLog(Protocol):
    """Where a thread's events are appended, read back and followed.

    Every method raises `EventLogClosed` once the log is closed, and its backend's error
    (`sqlite3.Error`, `redis.exceptions.ConnectionError`) when the store is away.
    """

    async def append(self, thread_id: str, name: str, data: Any) -> Event:
        """Store an event under the thread's next id and return it once stored.

        Raises:
            TypeError: the payload is not JSON (nothing is stored).
        """
        ...

    def emit(
        self,
        thread_id: str,
        name: str,
        data: Any,
        lenient: bool = False,
        key: str | None = None,
    ) -> Awaitable[int]:
        """Queue an event now and return an awaitable of its id; emits keep their order.

        Args:
            thread_id: the stream.
            name: the SSE event name.
            data: the payload.
            lenient: store values JSON cannot encode as their repr instead of failing.
            key: the event's identity within the stream: an event emitted again under a
                stored key is not stored twice. The SQLite log (one writer) ignores it.

        Raises:
            TypeError: the payload is not JSON and not `lenient`.
        """
        ...

    async def read(self, thread_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        """Return the thread's events with an id above `after`, oldest first, at most `limit`.

        Raises:
            ValueError: `limit` is negative.
        """
        ...

    def follow(self, thread_id: str, after: int = 0) -> AsyncIterator[Event]:
        """Yield the events after `after`, then new ones as they come, until `done`."""
        ...

    def writing(self, *streams: str) -> AbstractContextManager[None]:
        """Mark streams as written by this process while the block runs.

        Followers in this process then take those streams' new events from memory.
        """
        ...

    async def last_id(self, thread_id: str) -> int:
        """Return the thread's highest event id, 0 when it has none."""
        ...

    async def delete(self, thread_id: str) -> None:
        """Remove every event of the thread; a later append starts at id 1 again."""
        ...

    async def ping(self) -> None:
        """Return when the store answers; raise its backend's error when it does not."""
        ...


@dataclass
class QueuedEvent:
    """An event on its way to the store (both logs queue these)."""

    thread_id: str
    name: str
    text: str
    created_at: datetime
    done: asyncio.Future[int] = field(repr=False)
    key: str | None = None


class QueuedAppends(ABC):
    """`append` and `emit` of a log whose writes are queued and batched (`_queue`)."""

    _closed: bool

    @abstractmethod
    def _queue(self, op: QueuedEvent) -> None:
        """Queue one event for the next batch; `op.done` gives its id."""

    def _check_open(self) -> None:
        if self._closed:
            raise EventLogClosed("the event log is closed")

    def _append(
        self, thread_id: str, name: str, data: Any, lenient: bool = False, key: str | None = None
    ) -> QueuedEvent:
        self._check_open()
        text = encode(data, lenient)  # a bad payload fails here, alone
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        op = QueuedEvent(thread_id, name, text, datetime.now(UTC), done, key)
        self._queue(op)
        return op

    async def append(self, thread_id: str, name: str, data: Any) -> Event:
        """Store an event under the thread's next id and return it."""
        op = self._append(thread_id, name, data)
        return Event(await op.done, thread_id, name, op.text, op.created_at)

    def emit(
        self,
        thread_id: str,
        name: str,
        data: Any,
        lenient: bool = False,
        key: str | None = None,
    ) -> asyncio.Future[int]:
        """Queue an event now; the future gives its id. Emits keep their order."""
        return self._append(thread_id, name, data, lenient, key).done
