"""Runs' evidence in the SQLite data file (see `stores.evidence`).

Texts are rows of `evidence_content`, one per hash; `evidence_ref` says which threads name
which texts, so deleting a thread drops exactly the texts no other thread names. Records
go through the file's writer: one queued before a checkpoint commits with it or before it.
"""

import asyncio
import logging
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime

from stores.evidence import (
    RECORD,
    Evidence,
    PackedText,
    Record,
    RunHeader,
    StoreFigures,
    hashes_of,
    packed_texts,
    unpack,
)
from stores.sqlite_writer import SqliteReader, SqliteWriter

logger = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS evidence_run (thread_id TEXT PRIMARY KEY, "
    "created_at TEXT NOT NULL, header TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS evidence_record (seq INTEGER PRIMARY KEY, "
    "thread_id TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS evidence_record_by_thread ON evidence_record (thread_id, seq)",
    "CREATE TABLE IF NOT EXISTS evidence_content (hash TEXT PRIMARY KEY, chars INTEGER NOT NULL, "
    "body BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS evidence_ref (thread_id TEXT NOT NULL, hash TEXT NOT NULL, "
    "PRIMARY KEY (thread_id, hash)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS evidence_ref_by_hash ON evidence_ref (hash)",
)
_HEADER = "INSERT OR IGNORE INTO evidence_run (thread_id, created_at, header) VALUES (?, ?, ?)"
_REPLACE_HEADER = (
    "INSERT OR REPLACE INTO evidence_run (thread_id, created_at, header) VALUES (?, ?, ?)"
)
_RECORD = "INSERT INTO evidence_record (thread_id, body) VALUES (?, ?)"
_CONTENT = "INSERT OR IGNORE INTO evidence_content (hash, chars, body) VALUES (?, ?, ?)"
_REF = "INSERT OR IGNORE INTO evidence_ref (thread_id, hash) VALUES (?, ?)"
_GET_HEADER = "SELECT header FROM evidence_run WHERE thread_id = ?"
_GET_RECORDS = "SELECT body FROM evidence_record WHERE thread_id = ? ORDER BY seq"
_OLD_RUNS = "SELECT thread_id FROM evidence_run WHERE created_at < ? ORDER BY created_at"
_OLDEST_RUNS = "SELECT thread_id FROM evidence_run ORDER BY created_at LIMIT ?"
_CONTENT_BYTES = "SELECT COALESCE(SUM(LENGTH(body)), 0) FROM evidence_content"


def _forget(conn: sqlite3.Connection, thread_ids: Sequence[str]) -> None:
    """Delete the threads' evidence and the texts nothing else names."""
    for thread_id in thread_ids:
        hashes = [
            h
            for (h,) in conn.execute(
                "SELECT hash FROM evidence_ref WHERE thread_id = ?", (thread_id,)
            )
        ]
        conn.execute("DELETE FROM evidence_ref WHERE thread_id = ?", (thread_id,))
        conn.execute("DELETE FROM evidence_record WHERE thread_id = ?", (thread_id,))
        conn.execute("DELETE FROM evidence_run WHERE thread_id = ?", (thread_id,))
        conn.executemany(
            "DELETE FROM evidence_content WHERE hash = ? "
            "AND NOT EXISTS (SELECT 1 FROM evidence_ref WHERE hash = ?)",
            [(h, h) for h in hashes],
        )


@dataclass(frozen=True, slots=True)
class _Write:
    thread_id: str
    header: RunHeader
    body: str
    rows: list[PackedText]


class SqliteEvidenceStore:
    """`EvidenceStore` in the SQLite data file (which holds the service's other tables)."""

    def __init__(self, reader: SqliteReader, writer: SqliteWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._pending: list[_Write] = []  # queued for the writer's next transaction
        self._submitted = False  # a piece of work that will take them is with the writer

    @classmethod
    async def open_in(
        cls, stack: AsyncExitStack, reader: SqliteReader, writer: SqliteWriter
    ) -> "SqliteEvidenceStore":
        """Return the store of the file (see `stores.sqlite_writer.open_sqlite`)."""
        await writer.create(*_SCHEMA)
        return cls(reader, writer)

    def add(self, thread_id: str, header: RunHeader, record: Record, texts: Sequence[str]) -> None:
        """Queue `record` and its texts (see `EvidenceStore.add`); one savepoint takes them all."""
        try:
            rows = packed_texts(texts)
            self._pending.append(_Write(thread_id, header, record.model_dump_json(), rows))
            if not self._submitted:
                self._writer.submit(self._write_pending).add_done_callback(self._written)
                self._submitted = True
        except Exception as exc:  # the store is closing: the run goes on without it
            logger.warning("evidence of %s not kept: %s", thread_id, exc)

    def _write_pending(self, conn: sqlite3.Connection) -> list[str]:
        """Write every queued record in the writer's transaction; return their threads."""
        pending, self._pending, self._submitted = self._pending, [], False
        headers: dict[str, RunHeader] = {}
        for write in pending:  # the first header of a thread stands, as INSERT OR IGNORE
            headers.setdefault(write.thread_id, write.header)
        conn.executemany(
            _HEADER,
            [(t, h.created_at.isoformat(), h.model_dump_json()) for t, h in headers.items()],
        )
        conn.executemany(_RECORD, [(w.thread_id, w.body) for w in pending])
        conn.executemany(_CONTENT, [row for w in pending for row in w.rows])
        conn.executemany(_REF, [(w.thread_id, h) for w in pending for h, _, _ in w.rows])
        return list(headers)

    @staticmethod
    def _written(done: "asyncio.Future[list[str]]") -> None:
        if not done.cancelled() and done.exception() is not None:
            logger.warning("evidence of some runs not kept: %s", done.exception())

    async def put(self, thread_id: str, evidence: Evidence) -> None:
        """Store a whole run's evidence, replacing what the thread had."""
        header = evidence.header or RunHeader()
        header_row = (thread_id, header.created_at.isoformat(), header.model_dump_json())
        bodies = [(thread_id, r.model_dump_json()) for r in evidence.records]
        named = hashes_of(evidence.records) | hashes_of(header.script)
        rows = packed_texts(t for h, t in evidence.contents.items() if h in named)

        def write(conn: sqlite3.Connection) -> None:
            _forget(conn, [thread_id])
            conn.execute(_REPLACE_HEADER, header_row)
            conn.executemany(_RECORD, bodies)
            conn.executemany(_CONTENT, rows)
            conn.executemany(_REF, [(thread_id, h) for h, _, _ in rows])

        await self._writer.run(write)

    async def header(self, thread_id: str) -> RunHeader | None:
        """Return the thread's run header."""
        rows = await self._reader.fetchall(_GET_HEADER, (thread_id,))
        return RunHeader.model_validate_json(rows[0][0]) if rows else None

    async def records(self, thread_id: str) -> list[Record]:
        """Return the thread's records, oldest first."""
        rows = await self._reader.fetchall(_GET_RECORDS, (thread_id,))
        return [RECORD.validate_json(body) for (body,) in rows]

    async def contents(self, hashes: Iterable[str]) -> dict[str, str]:
        """Return the texts still kept of `hashes`."""
        wanted = sorted(set(hashes))
        found: dict[str, str] = {}
        for start in range(0, len(wanted), 500):  # SQLite's limit on parameters
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = await self._reader.fetchall(
                f"SELECT hash, body FROM evidence_content WHERE hash IN ({marks})", tuple(chunk)
            )
            found.update((h, unpack(body)) for h, body in rows)
        return found

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's evidence."""
        await self._writer.run(lambda conn: _forget(conn, [thread_id]))

    async def prune(self, older_than: datetime | None, max_bytes: int | None) -> int:
        """Forget old runs' evidence, then the oldest runs' until under `max_bytes`."""

        def work(conn: sqlite3.Connection) -> int:
            gone = 0
            if older_than is not None:
                old = [t for (t,) in conn.execute(_OLD_RUNS, (older_than.isoformat(),))]
                _forget(conn, old)
                gone += len(old)
            if max_bytes is not None:
                while conn.execute(_CONTENT_BYTES).fetchone()[0] > max_bytes:
                    oldest = [t for (t,) in conn.execute(_OLDEST_RUNS, (16,))]
                    if not oldest:
                        break
                    _forget(conn, oldest)
                    gone += len(oldest)
            return gone

        return await self._writer.run(work)

    async def figures(self) -> StoreFigures:
        """Return counts and sizes of what is stored."""
        rows = await self._reader.fetchall(
            "SELECT (SELECT COUNT(*) FROM evidence_run), (SELECT COUNT(*) FROM evidence_record), "
            "(SELECT COUNT(*) FROM evidence_content), "
            "(SELECT COALESCE(SUM(LENGTH(body)), 0) FROM evidence_content), "
            "(SELECT COALESCE(SUM(chars), 0) FROM evidence_content)"
        )
        runs, records, contents, size, chars = rows[0]
        return StoreFigures(
            runs=runs, records=records, contents=contents, content_bytes=size, text_chars=chars
        )

    async def flush(self) -> None:
        """Wait until what is queued is committed."""
        await self._writer.drain()
