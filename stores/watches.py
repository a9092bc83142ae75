"""Watches: a thread refreshed on a schedule, and the diffs its refreshes found.

A watch is one record per watched thread. Every change of a record is a compare-and-set
on its `version`, so of two processes that act on the same due refresh (API replicas,
workers, a process started again after a kill) exactly one wins. An entry (one per
refresh, keyed by its sequence number) is written only when absent, so recording a
refresh twice stores it once.

The SQLite store keeps two tables in the data file; `stores.redis_watches` keeps the
same on Redis.
"""

import builtins
import secrets
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, field_validator

from core.state import ReportStatus
from stores.registry import RunStatus
from stores.sqlite_writer import SqliteReader, SqliteWriter


class WatchRecord(BaseModel):
    """A watched thread: its interval, its next due time and the refresh in flight."""

    thread_id: str  # the watched thread (stored id)
    owner: str
    watch_id: str  # new for every watch of the thread: refresh ids derive from it
    every_s: float
    webhook: str | None = None
    created_at: datetime
    next_due: datetime
    tick: int = 0  # refreshes claimed so far: the last one's sequence number
    current: str | None = None  # the refresh in flight (stored id), claimed at `claimed_at`
    claimed_at: datetime | None = None
    previous: str  # what the next refresh is compared with: the last completed one
    skipped: int = 0  # due times passed while a refresh was still running
    # Why the last due refresh could not start (its options name a collection since
    # deleted): it is tried again at the next due time, not at every tick.
    refused: str | None = None
    version: int = 0

    @field_validator("created_at", "next_due", "claimed_at")
    @classmethod
    def _in_utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    def due_score(self) -> float:
        """Return when the scheduler must look at it: at once (0) while a refresh is in flight."""
        return 0.0 if self.current is not None else self.next_due.timestamp()


class WatchEntryRecord(BaseModel):
    """One refresh of a watch: which run it was, what it was compared with, the diff."""

    seq: int
    at: datetime
    thread_id: str  # the refresh (public id)
    previous: str  # the run it is compared with (public id)
    status: RunStatus
    report_status: ReportStatus | None = None
    changed: bool = False
    diff: dict[str, Any] | None = None  # `service.run_diff.RunDiff` as JSON


class Delivery(BaseModel):
    """An entry still to be delivered, kept with the entry until done.

    Two kinds: `event`, the entry told on the owner's event stream (`/v1/watches/events`),
    and `webhook`, its POST to the watch's webhook.

    Recorded in the same write as its entry, so no kill can leave an entry whose delivery
    is forgotten. A process that tries it first claims it (`attempts` + 1, `next_try` a
    lease ahead) by a compare-and-set on `version`; a failed try sets `next_try` to the
    backoff's next time; an acknowledged one is removed. A claimant that dies leaves a
    claim that falls due again when its lease ends, so another process tries it.
    """

    thread_id: str  # the watched thread (stored id)
    seq: int  # the entry's sequence number
    kind: Literal["event", "webhook"] = "webhook"
    owner: str
    url: str | None = None  # a webhook's URL, as the watch had it when the entry was recorded
    attempts: int = 0  # tries started so far
    next_try: datetime
    version: int = 0

    @field_validator("next_try")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value

    def key(self) -> str:
        """Return its identity: one per entry and kind."""
        return f"{self.thread_id}:{self.seq}:{self.kind}"


class WatchStore(Protocol):
    """Where watches and their entries are kept: SQLite, or Redis for many processes."""

    async def create(self, watch: WatchRecord) -> bool:
        """Store a new watch; False (nothing written) when the thread has one already."""
        ...

    async def get(self, thread_id: str) -> WatchRecord | None:
        """Return the thread's watch, or None."""
        ...

    async def replace(self, old: WatchRecord, new: WatchRecord) -> WatchRecord | None:
        """Store `new` if the stored watch is still `old` (same version); return it as stored.

        None when another change came first, or the watch is gone.
        """
        ...

    async def delete(self, thread_id: str) -> bool:
        """Remove the watch and its entries; return whether there was one."""
        ...

    async def due(self, now: datetime) -> builtins.list[WatchRecord]:
        """Return the watches due by `now`, and those with a refresh in flight."""
        ...

    async def of_owner(self, owner: str) -> builtins.list[WatchRecord]:
        """Return the owner's watches, oldest first."""
        ...

    async def add_entry(
        self,
        thread_id: str,
        entry: WatchEntryRecord,
        deliveries: builtins.list[Delivery] = [],  # noqa: B006 (never mutated)
    ) -> bool:
        """Store the entry unless one with its `seq` is there; return whether it was stored.

        Its `deliveries` are stored in the same write, only with a new entry.
        """
        ...

    async def entry(self, thread_id: str, seq: int) -> WatchEntryRecord | None:
        """Return the watch's entry number `seq`, or None."""
        ...

    async def deliveries_due(self, now: datetime) -> builtins.list[Delivery]:
        """Return the deliveries whose next try is due by `now`, the earliest first."""
        ...

    async def replace_delivery(self, old: Delivery, new: Delivery) -> Delivery | None:
        """Store `new` if the stored delivery is still `old` (same version); return it as stored."""
        ...

    async def finish_delivery(self, delivery: Delivery) -> None:
        """Remove the delivery (acknowledged, or given up)."""
        ...

    async def entries(self, thread_id: str, limit: int = 100) -> builtins.list[WatchEntryRecord]:
        """Return the watch's entries, newest first, at most `limit`."""
        ...

    async def secret(self, owner: str) -> str:
        """Return the owner's webhook signing secret, made (at random) the first time."""
        ...


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS watches (thread_id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
    "due REAL NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS watches_by_due ON watches (due)",
    "CREATE INDEX IF NOT EXISTS watches_by_owner ON watches (owner)",
    "CREATE TABLE IF NOT EXISTS watch_entries (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, "
    "body TEXT NOT NULL, PRIMARY KEY (thread_id, seq))",
    "CREATE TABLE IF NOT EXISTS watch_secrets (owner TEXT PRIMARY KEY, secret TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS watch_deliveries (key TEXT PRIMARY KEY, thread_id TEXT NOT NULL, "
    "due REAL NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS watch_deliveries_by_due ON watch_deliveries (due)",
    "CREATE INDEX IF NOT EXISTS watch_deliveries_by_thread ON watch_deliveries (thread_id)",
)


def _row(watch: WatchRecord) -> tuple[str, str, float, int, str]:
    return (
        watch.thread_id,
        watch.owner,
        watch.due_score(),
        watch.version,
        watch.model_dump_json(),
    )


class SqliteWatchStore:
    """`WatchStore` in the SQLite data file, written through the file's one writer."""

    def __init__(self, reader: SqliteReader, writer: SqliteWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open_in(
        cls, stack: AsyncExitStack, reader: SqliteReader, writer: SqliteWriter
    ) -> "SqliteWatchStore":
        """Return the file's watch store (see `stores.sqlite_writer.open_sqlite`)."""
        await writer.create(*_SCHEMA)
        return cls(reader, writer)

    async def create(self, watch: WatchRecord) -> bool:
        """Insert the watch unless the thread has one."""
        sql = "INSERT OR IGNORE INTO watches VALUES (?, ?, ?, ?, ?)"
        row = _row(watch)
        return await self._writer.run(lambda conn: conn.execute(sql, row).rowcount > 0)

    async def get(self, thread_id: str) -> WatchRecord | None:
        """Return the thread's watch, or None."""
        rows = await self._reader.fetchall(
            "SELECT body FROM watches WHERE thread_id = ?", (thread_id,)
        )
        return WatchRecord.model_validate_json(rows[0][0]) if rows else None

    async def replace(self, old: WatchRecord, new: WatchRecord) -> WatchRecord | None:
        """Compare-and-set on the version (see `WatchStore.replace`)."""
        stored = new.model_copy(update={"version": old.version + 1})
        sql = (
            "UPDATE watches SET due = ?, version = ?, body = ? WHERE thread_id = ? AND version = ?"
        )
        row = (
            stored.due_score(),
            stored.version,
            stored.model_dump_json(),
            old.thread_id,
            old.version,
        )
        changed = await self._writer.run(lambda conn: conn.execute(sql, row).rowcount > 0)
        return stored if changed else None

    async def delete(self, thread_id: str) -> bool:
        """Remove the watch and its entries."""

        def work(conn: Any) -> bool:
            conn.execute("DELETE FROM watch_entries WHERE thread_id = ?", (thread_id,))
            conn.execute("DELETE FROM watch_deliveries WHERE thread_id = ?", (thread_id,))
            return bool(
                conn.execute("DELETE FROM watches WHERE thread_id = ?", (thread_id,)).rowcount
            )

        return await self._writer.run(work)

    async def due(self, now: datetime) -> builtins.list[WatchRecord]:
        """Return the watches due by `now` or with a refresh in flight."""
        rows = await self._reader.fetchall(
            "SELECT body FROM watches WHERE due <= ? ORDER BY due", (now.timestamp(),)
        )
        return [WatchRecord.model_validate_json(r[0]) for r in rows]

    async def of_owner(self, owner: str) -> builtins.list[WatchRecord]:
        """Return the owner's watches, oldest first."""
        rows = await self._reader.fetchall("SELECT body FROM watches WHERE owner = ?", (owner,))
        found = [WatchRecord.model_validate_json(r[0]) for r in rows]
        return sorted(found, key=lambda w: w.created_at)

    async def add_entry(
        self,
        thread_id: str,
        entry: WatchEntryRecord,
        deliveries: builtins.list[Delivery] = [],  # noqa: B006 (never mutated)
    ) -> bool:
        """Insert the entry unless its `seq` is stored, and with a new one its deliveries."""
        sql = "INSERT OR IGNORE INTO watch_entries VALUES (?, ?, ?)"
        row = (thread_id, entry.seq, entry.model_dump_json())
        pending = [_delivery_row(d) for d in deliveries]

        def work(conn: Any) -> bool:
            if conn.execute(sql, row).rowcount == 0:
                return False
            conn.executemany(
                "INSERT OR IGNORE INTO watch_deliveries VALUES (?, ?, ?, ?, ?)", pending
            )
            return True

        return await self._writer.run(work)

    async def entry(self, thread_id: str, seq: int) -> WatchEntryRecord | None:
        """Return the entry number `seq`, or None."""
        rows = await self._reader.fetchall(
            "SELECT body FROM watch_entries WHERE thread_id = ? AND seq = ?", (thread_id, seq)
        )
        return WatchEntryRecord.model_validate_json(rows[0][0]) if rows else None

    async def deliveries_due(self, now: datetime) -> builtins.list[Delivery]:
        """Return the deliveries due by `now`, the earliest first."""
        rows = await self._reader.fetchall(
            "SELECT body FROM watch_deliveries WHERE due <= ? ORDER BY due", (now.timestamp(),)
        )
        return [Delivery.model_validate_json(r[0]) for r in rows]

    async def replace_delivery(self, old: Delivery, new: Delivery) -> Delivery | None:
        """Compare-and-set on the delivery's version."""
        stored = new.model_copy(update={"version": old.version + 1})
        sql = "UPDATE watch_deliveries SET due = ?, version = ?, body = ? WHERE key = ? AND version = ?"
        row = (
            stored.next_try.timestamp(),
            stored.version,
            stored.model_dump_json(),
            old.key(),
            old.version,
        )
        changed = await self._writer.run(lambda conn: conn.execute(sql, row).rowcount > 0)
        return stored if changed else None

    async def finish_delivery(self, delivery: Delivery) -> None:
        """Remove the delivery."""
        sql = "DELETE FROM watch_deliveries WHERE key = ?"
        await self._writer.run(lambda conn: conn.execute(sql, (delivery.key(),)))

    async def entries(self, thread_id: str, limit: int = 100) -> builtins.list[WatchEntryRecord]:
        """Return the entries, newest first."""
        rows = await self._reader.fetchall(
            "SELECT body FROM watch_entries WHERE thread_id = ? ORDER BY seq DESC LIMIT ?",
            (thread_id, limit),
        )
        return [WatchEntryRecord.model_validate_json(r[0]) for r in rows]

    async def secret(self, owner: str) -> str:
        """Return the owner's signing secret; the first caller's random one is kept."""
        made = new_secret()

        def work(conn: Any) -> str:
            conn.execute("INSERT OR IGNORE INTO watch_secrets VALUES (?, ?)", (owner, made))
            row = conn.execute("SELECT secret FROM watch_secrets WHERE owner = ?", (owner,))
            return str(row.fetchone()[0])

        return await self._writer.run(work)


def _delivery_row(delivery: Delivery) -> tuple[str, str, float, int, str]:
    return (
        delivery.key(),
        delivery.thread_id,
        delivery.next_try.timestamp(),
        delivery.version,
        delivery.model_dump_json(),
    )


def new_secret() -> str:
    """Return a new random signing secret."""
    return secrets.token_urlsafe(32)
