"""The thread registry: one row per research thread, who owns it and how its run stands.

Times are stored in UTC as fixed-width ISO text so that text order is time order; a
naive datetime handed in is taken to be UTC. Every operation is one SQL statement on an
autocommit connection, so concurrent callers cannot interleave inside a transaction.
"""

import builtins
import json
import re
import sqlite3
from collections.abc import Iterable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from pydantic import BaseModel, field_validator

from core.state import ReportStatus
from stores.sqlite_writer import SqliteReader, SqliteWriter

# `new`: a thread created (through the LangGraph Platform API) before its first run.
RunStatus = Literal[
    "new", "queued", "running", "waiting_for_approval", "paused", "completed", "failed", "cancelled"
]
ACTIVE: frozenset[RunStatus] = frozenset({"queued", "running"})
TERMINAL: frozenset[RunStatus] = frozenset({"completed", "failed", "cancelled"})

_COLUMNS = (
    "thread_id, owner, topic, status, created_at, updated_at, error, options, metadata, report"
)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS thread_registry ("
    "thread_id TEXT PRIMARY KEY, owner TEXT NOT NULL, topic TEXT NOT NULL, "
    "status TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, "
    "error TEXT, options TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}', report TEXT)",
    "CREATE INDEX IF NOT EXISTS thread_registry_by_owner "
    "ON thread_registry (owner, created_at DESC, thread_id DESC)",
    "CREATE INDEX IF NOT EXISTS thread_registry_active "
    "ON thread_registry (created_at, thread_id) WHERE status IN ('queued', 'running')",
)
_INSERT = f"INSERT INTO thread_registry ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_GET = f"SELECT {_COLUMNS} FROM thread_registry WHERE thread_id = ?"
_FIRST_PAGE = (
    f"SELECT {_COLUMNS} FROM thread_registry WHERE owner = ? "
    "ORDER BY created_at DESC, thread_id DESC LIMIT ?"
)
_NEXT_PAGE = (
    f"SELECT {_COLUMNS} FROM thread_registry WHERE owner = ? AND (created_at, thread_id) < (?, ?) "
    "ORDER BY created_at DESC, thread_id DESC LIMIT ?"
)
# A run that starts again forgets the last report's status until it writes its own.
_SET_STATUS = (
    "UPDATE thread_registry SET status = ?, error = ?, updated_at = ?, "
    "report = CASE WHEN ? IS NOT NULL THEN ? WHEN ? IN ('queued', 'running') THEN NULL "
    "ELSE report END WHERE thread_id = ? "
    f"RETURNING {_COLUMNS}"
)
# A NULL leaves its column as it is.
_UPDATE = (
    "UPDATE thread_registry SET topic = COALESCE(?, topic), options = COALESCE(?, options), "
    f"metadata = COALESCE(?, metadata), updated_at = ? WHERE thread_id = ? RETURNING {_COLUMNS}"
)
_DELETE = "DELETE FROM thread_registry WHERE thread_id = ?"
# Must match the partial index above so SQLite can use it.
_ACTIVE = (
    f"SELECT {_COLUMNS} FROM thread_registry WHERE status IN ('queued', 'running') "
    "ORDER BY created_at, thread_id"
)


class ThreadExists(Exception):
    """A thread with this id is already registered."""


class ThreadRecord(BaseModel):
    """What the service knows about one research thread."""

    thread_id: str
    owner: str
    topic: str
    status: RunStatus
    created_at: datetime
    updated_at: datetime
    error: str | None = None
    options: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    # The status of the report the last run wrote (core.state.ReportStatus).
    report: ReportStatus | None = None

    @field_validator("created_at", "updated_at")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Registry(Protocol):
    """Where threads are registered: `SqliteRegistry`, or `RedisRegistry` for many processes.

    A backend that does not answer raises its own error (`sqlite3.Error`,
    `redis.exceptions.ConnectionError`); the HTTP layer answers that with 503.
    """

    async def create(self, record: ThreadRecord) -> None:
        """Register a new thread.

        Raises:
            ThreadExists: a thread with the record's id is registered already.
        """
        ...

    async def get(self, thread_id: str) -> ThreadRecord | None:
        """Return the thread's record, or None when it is not registered."""
        ...

    async def set_status(
        self,
        thread_id: str,
        status: RunStatus,
        error: str | None = None,
        report: ReportStatus | None = None,
    ) -> ThreadRecord:
        """Record the run's status, stamp `updated_at` and return the record as stored now.

        `error` replaces any earlier error (None clears it); `report` is the status of the
        report the run wrote, which a run that starts again (queued, running) clears.

        Raises:
            KeyError: no thread has this id.
        """
        ...

    async def update(
        self,
        thread_id: str,
        *,
        topic: str | None = None,
        options: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ThreadRecord:
        """Replace the fields given (None leaves one as it is); return the record as stored now.

        Raises:
            KeyError: no thread has this id.
        """
        ...

    async def delete(self, thread_id: str) -> bool:
        """Remove the thread's record; return whether there was one."""
        ...

    async def active(self) -> builtins.list[ThreadRecord]:
        """Return the queued and running threads, oldest first (what `recover` continues)."""
        ...

    async def ping(self) -> None:
        """Return when the store answers; raise its backend's error when it does not."""
        ...

    async def list(
        self, owner: str, limit: int = 20, cursor: str | None = None
    ) -> tuple[builtins.list[ThreadRecord], str | None]:
        """Return one page of the owner's threads, newest first, and the next page's cursor.

        `cursor` is a previous page's cursor, None for the first; the next one is None
        after the last page.

        Raises:
            ValueError: the cursor is not one this registry gave out.
        """
        ...


class SqliteRegistry:
    """The thread registry kept in one SQLite file (which may hold other tables too)."""

    def __init__(self, reader: SqliteReader, writer: SqliteWriter) -> None:
        self._reader = reader
        self._writer = writer  # writes, in the data file's shared transaction

    @classmethod
    async def open_in(
        cls, stack: AsyncExitStack, reader: SqliteReader, writer: SqliteWriter
    ) -> "SqliteRegistry":
        """Return the file's registry (see `stores.sqlite_writer.open_sqlite`)."""
        await writer.create(*_SCHEMA)
        return cls(reader, writer)

    async def _write(self, sql: str, params: tuple[Any, ...]) -> builtins.list[ThreadRecord]:
        """Run one statement in the writer's next transaction; return the records it returns."""
        return await self._writer.run(lambda conn: _records(conn.execute(sql, params).fetchall()))

    async def _write_one(self, thread_id: str, sql: str, params: tuple[Any, ...]) -> ThreadRecord:
        """Run one statement that returns the thread's record; KeyError if there is none."""
        records = await self._write(sql, params)
        if not records:
            raise KeyError(thread_id)
        return records[0]

    async def create(self, record: ThreadRecord) -> None:
        """Register a new thread; raise `ThreadExists` if its id is taken."""
        row = (
            record.thread_id,
            record.owner,
            record.topic,
            record.status,
            stamp(record.created_at),
            stamp(record.updated_at),
            record.error,
            json.dumps(record.options, ensure_ascii=False),
            json.dumps(record.metadata, ensure_ascii=False),
            record.report,
        )
        try:
            await self._write(_INSERT, row)
        except sqlite3.IntegrityError as exc:
            raise ThreadExists(record.thread_id) from exc

    async def get(self, thread_id: str) -> ThreadRecord | None:
        """Return the thread's record, or None when it is not registered."""
        records = _records(await self._reader.fetchall(_GET, (thread_id,)))
        return records[0] if records else None

    async def set_status(
        self,
        thread_id: str,
        status: RunStatus,
        error: str | None = None,
        report: ReportStatus | None = None,
    ) -> ThreadRecord:
        """Set the run status, error and report status (see `Registry.set_status`)."""
        now = stamp(datetime.now(UTC))
        row = (status, error, now, report, report, status, thread_id)
        return await self._write_one(thread_id, _SET_STATUS, row)

    async def update(
        self,
        thread_id: str,
        *,
        topic: str | None = None,
        options: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ThreadRecord:
        """Replace the fields given, stamp `updated_at`; KeyError for an unknown thread."""
        row = (
            topic,
            None if options is None else json.dumps(options, ensure_ascii=False),
            None if metadata is None else json.dumps(metadata, ensure_ascii=False),
            stamp(datetime.now(UTC)),
            thread_id,
        )
        return await self._write_one(thread_id, _UPDATE, row)

    async def delete(self, thread_id: str) -> bool:
        """Remove the thread's record; return whether there was one."""
        return await self._writer.run(lambda conn: conn.execute(_DELETE, (thread_id,)).rowcount > 0)

    async def active(self) -> builtins.list[ThreadRecord]:
        """Return the queued and running threads, oldest first (to resume after a restart)."""
        return _records(await self._reader.fetchall(_ACTIVE))

    async def ping(self) -> None:
        """Raise when the store cannot be reached, or its file cannot be written (a full disk)."""
        await self._reader.fetchall("SELECT 1 FROM thread_registry LIMIT 1")
        await self._writer.check_writable()

    async def list(
        self, owner: str, limit: int = 20, cursor: str | None = None
    ) -> tuple[builtins.list[ThreadRecord], str | None]:
        """Return one page of the owner's threads, newest first, and the next page's cursor.

        Raises:
            ValueError: `limit` is below 1 or `cursor` is not one this method returned.
        """
        if limit < 1:
            raise ValueError("limit must be at least 1")
        if cursor is None:
            rows = await self._reader.fetchall(_FIRST_PAGE, (owner, limit + 1))
        else:
            created_at, thread_id = decode_cursor(cursor)
            rows = await self._reader.fetchall(
                _NEXT_PAGE, (owner, created_at, thread_id, limit + 1)
            )
        records = _records(rows)
        if len(records) <= limit:
            return records, None
        page = records[:limit]
        last = page[-1]
        return page, encode_cursor(last.created_at, last.thread_id)


def stamp(moment: datetime) -> str:
    """Return a time as fixed-width UTC text, so that comparing the text compares the times."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _records(rows: Iterable[Any]) -> list[ThreadRecord]:
    return [
        ThreadRecord(
            thread_id=row[0],
            owner=row[1],
            topic=row[2],
            status=row[3],
            created_at=datetime.fromisoformat(row[4]),
            updated_at=datetime.fromisoformat(row[5]),
            error=row[6],
            options=json.loads(row[7]),
            metadata=json.loads(row[8]),
            report=row[9],
        )
        for row in rows
    ]


# A page cursor: the last thread's creation time (microseconds since the epoch, UTC) and
# its id. Every string of this shape is a valid cursor (it names a position, whether or
# not a thread is there), so the HTTP layer checks it with this pattern alone.
CURSOR_PATTERN = r"^[0-9]{1,17}~[A-Za-z0-9][A-Za-z0-9._@-]{0,255}$"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def encode_cursor(created_at: datetime, thread_id: str) -> str:
    """Return the cursor of the page after the thread created at `created_at`."""
    micros = (created_at.astimezone(UTC) - _EPOCH) // timedelta(microseconds=1)
    return f"{micros}~{thread_id}"


def decode_cursor(cursor: str) -> tuple[str, str]:
    """Return the (stamp, thread id) a cursor names; ValueError if it is not a cursor."""
    if re.fullmatch(CURSOR_PATTERN, cursor) is None:
        raise ValueError("invalid cursor")
    micros, thread_id = cursor.split("~", 1)
    return stamp(_EPOCH + timedelta(microseconds=int(micros))), thread_id
