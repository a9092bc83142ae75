"""The event log in the SQLite data file (the embedded default).

Appends queued by the time the file's writer runs go into its next transaction as one
piece of work (`stores.sqlite_writer`). Ids come from a per-thread last-id cache that
only the writer touches, so this process must be the only writer of the table; after a
failed transaction the threads involved are read from the file again. A cancelled
caller's append is still written. `delete` forgets the thread: its ids restart at 1.
Followers register before reading the backlog and are served from memory
(`stores.recent_events`).
"""

import asyncio
import functools
import sqlite3
from collections import OrderedDict
from collections.abc import AsyncGenerator, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from stores.batching import ignore_failures, set_outcome
from stores.events import TERMINAL_EVENT, Event, QueuedAppends, QueuedEvent
from stores.recent_events import RecentEvents
from stores.sqlite_writer import SqliteReader, SqliteWriter, StoreClosed

# A rowid table: SQLite keeps rows of tens of KB (a Platform run's `updates` chunks)
# poorly in a WITHOUT ROWID table's b-tree.
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS event_log (seq INTEGER PRIMARY KEY, "
    "thread_id TEXT NOT NULL, id INTEGER NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL, "
    "created_at TEXT NOT NULL, UNIQUE (thread_id, id))"
)
_INSERT = "INSERT INTO event_log (thread_id, id, name, data, created_at) VALUES (?, ?, ?, ?, ?)"
_LAST_ID = "SELECT COALESCE(MAX(id), 0) FROM event_log WHERE thread_id = ?"
_DELETE = "DELETE FROM event_log WHERE thread_id = ?"
_READ = (
    "SELECT id, name, data, created_at FROM event_log "
    "WHERE thread_id = ? AND id > ? ORDER BY id LIMIT ?"
)
# A follower reads its backlog in pages of this many events.
_FOLLOW_PAGE = 256
# Streams whose last id is kept in memory; past it the oldest are read again when needed.
_LAST_IDS = 4096


@dataclass
class _Delete:
    thread_id: str
    done: asyncio.Future[None] = field(repr=False)


_Op = QueuedEvent | _Delete


class SqliteEventLog(QueuedAppends):
    """An `EventLog` kept in one SQLite file (which may hold other tables too)."""

    def __init__(self, reader: SqliteReader, writer: SqliteWriter) -> None:
        self._reader = reader
        self._writer = writer
        # Touched only by _commit, or after it failed; least recently written first.
        self._last_ids: OrderedDict[str, int] = OrderedDict()
        self._pending: list[_Op] = []  # queued for the writer's next transaction
        self._submitted = False  # a piece of work that will take them is with the writer
        self._in_flight: set[asyncio.Future[list[int]]] = set()
        # Every stream this process writes: it is the file's only writer.
        self._recent = RecentEvents()
        self._closed = False

    @classmethod
    async def open_in(
        cls, stack: AsyncExitStack, reader: SqliteReader, writer: SqliteWriter
    ) -> "SqliteEventLog":
        """Return the log of the file (see `stores.sqlite_writer.open_sqlite`)."""
        await writer.create(_SCHEMA)
        log = cls(reader, writer)
        stack.push_async_callback(log.close)
        return log

    def _queue(self, op: _Op) -> None:
        self._pending.append(op)
        if self._submitted:
            return
        taken: list[list[_Op]] = []  # the batch the work took, once it ran
        try:
            submitted = self._writer.submit(
                functools.partial(self._commit_pending, taken=taken),
                then=functools.partial(self._committed, taken=taken),
            )
        except StoreClosed as exc:
            self._fail(self._take_pending(), exc)
            return
        self._submitted = True
        self._in_flight.add(submitted)
        submitted.add_done_callback(self._in_flight.discard)
        ignore_failures(submitted)  # its outcome reaches the ops through `then`

    def _take_pending(self) -> list[_Op]:
        batch, self._pending = self._pending, []
        self._submitted = False
        return batch

    def _commit_pending(self, conn: sqlite3.Connection, *, taken: list[list[_Op]]) -> list[int]:
        """Write every op queued until now, in the writer's open transaction."""
        batch = self._take_pending()
        taken.append(batch)
        return self._commit(conn, batch=batch)

    async def read(self, thread_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        """Return the thread's events with an id above `after`, oldest first."""
        self._check_open()
        if limit is not None and limit < 0:
            raise ValueError("limit must not be negative")
        rows = await self._reader.fetchall(
            _READ, (thread_id, after, -1 if limit is None else limit)
        )
        return [
            Event(row[0], thread_id, row[1], row[2], datetime.fromisoformat(row[3])) for row in rows
        ]

    async def follow(self, thread_id: str, after: int = 0) -> AsyncGenerator[Event, None]:
        """Yield the events after `after`, then new ones as they come, until `done`."""
        position = after
        while True:
            self._check_open()
            events, waiter = await self._recent.look(
                thread_id, position, lambda p: self.read(thread_id, after=p, limit=_FOLLOW_PAGE)
            )
            for event in events:
                position = event.id
                yield event
                if event.name == TERMINAL_EVENT:
                    return
            if len(events) < _FOLLOW_PAGE:
                await waiter.wait()

    async def last_id(self, thread_id: str) -> int:
        """Return the thread's highest event id, 0 when it has none."""
        self._check_open()
        rows = await self._reader.fetchall(_LAST_ID, (thread_id,))
        return int(rows[0][0])

    async def delete(self, thread_id: str) -> None:
        """Remove every event of the thread; its next append gets id 1 again."""
        self._check_open()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue(_Delete(thread_id, done))
        await done

    async def ping(self) -> None:
        """Raise when the store cannot be reached."""
        self._check_open()
        await self._reader.fetchall("SELECT 1 FROM event_log LIMIT 1")

    async def close(self) -> None:
        """Write what is queued, refuse further use and wake followers so they raise."""
        self._closed = True
        while self._in_flight:
            await asyncio.wait(list(self._in_flight))
        self._recent.wake_all()

    @contextmanager
    def writing(self, *streams: str) -> Iterator[None]:
        """Do nothing: this process is the file's only writer, and its followers are told."""
        yield

    def _committed(self, outcome: list[int] | BaseException, *, taken: list[list[_Op]]) -> None:
        """Give the ops of a transaction their ids, or the error that failed it.

        Called by the writer as the transaction ends, so followers wake in the same turn.
        """
        # The work never ran when its transaction could not begin: its ops still wait.
        batch = taken[0] if taken else self._take_pending()
        if isinstance(outcome, BaseException):  # every caller of the failed transaction
            self._fail(batch, outcome)
            return
        for op, result in zip(batch, outcome, strict=True):
            if isinstance(op, QueuedEvent):
                self._recent.remember(Event(result, op.thread_id, op.name, op.text, op.created_at))
                set_outcome(op.done, result)
            else:
                self._recent.forget(op.thread_id)
                set_outcome(op.done, None)

    def _fail(self, batch: list[_Op], error: BaseException) -> None:
        for op in batch:  # its ids were not taken: read them from the file again
            self._last_ids.pop(op.thread_id, None)
            set_outcome(op.done, error)

    def _commit(self, conn: sqlite3.Connection, *, batch: list[_Op]) -> list[int]:
        """Write a batch (in the writer's transaction); return each op's id (0 for deletes)."""
        results: list[int] = []
        for op in batch:
            if isinstance(op, _Delete):
                conn.execute(_DELETE, (op.thread_id,))
                self._last_ids.pop(op.thread_id, None)
                results.append(0)
                continue
            last = self._last_ids.get(op.thread_id)
            if last is None:
                last = int(conn.execute(_LAST_ID, (op.thread_id,)).fetchone()[0])
            event_id = last + 1
            conn.execute(
                _INSERT, (op.thread_id, event_id, op.name, op.text, op.created_at.isoformat())
            )
            self._last_ids[op.thread_id] = event_id
            self._last_ids.move_to_end(op.thread_id)
            if len(self._last_ids) > _LAST_IDS:  # read again from the file if written again
                self._last_ids.popitem(last=False)
            results.append(event_id)
        return results
