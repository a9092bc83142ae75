"""One writer for a SQLite file (concurrent writes share one transaction), and its reads.

The service keeps checkpoints, events and the thread registry in one file. Measured with
200 runs at once (bench/sdk_load.py), two designs before this one lost most of a second
per commit though the disk was idle:

- a writer connection per store: they took SQLite's one write lock in turn, and a writer
  that found it taken slept in SQLite's busy handler (1, 2, 5, ... up to 100 ms);
- one shared writer on a worker thread: every statement gives up the GIL and must win it
  back from the busy event loop (up to the 5 ms switch interval each), so a batch of a
  few hundred writes took seconds.

So the writes queued while a transaction commits go together into the next one, run on
the event loop itself: a batch takes a few milliseconds of C, with no lock wait, because
this is the file's only writer in the process. A write lock held by another process is
never waited for on the loop: the busy timeout is zero, and the batch is retried after
an asyncio sleep. The WAL is copied back into the database (the part that fsyncs) by a
worker thread, not by the commit that happens to cross the threshold. Each write runs in
a savepoint, so one that fails (a duplicate key) fails alone; a failed commit fails all.

Reads run on the event loop too (`SqliteReader`): a WAL reader never waits for the
writer, and a point read from the page cache takes microseconds, where a hop to a reader
thread (aiosqlite's one thread per connection) queued behind every other read and had
to win the GIL back from the loop.
"""

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

from stores.batching import Batcher, settle
from stores.data_file import check_data_file, create_data_file, storage_failure

T = TypeVar("T")

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 30.0  # other connections (readers) may wait; the writer never does
# Backoff while another process holds the write lock: first and largest sleep, seconds.
_LOCKED_RETRY_S = (0.001, 0.05)
# Copy the WAL back into the database at most this often (seconds) while writes go on.
_WAL_CHECKPOINT_EVERY_S = 1.0


class StoreClosed(ValueError):
    """The writer or reader was used after it was closed."""


@dataclass
class _Work:
    run: Callable[[sqlite3.Connection], Any]
    done: asyncio.Future[Any] = field(repr=False)
    then: Callable[[Any], None] | None = None


class SqliteWriter:
    """Group commit over one connection (see the module docstring)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        wal_checkpoint_every_s: float = _WAL_CHECKPOINT_EVERY_S,
    ) -> None:
        self._conn = conn
        self.path = path
        self._wal_checkpoint_every_s = wal_checkpoint_every_s
        self._batches = Batcher(self._write)
        self._wal_checkpoint: asyncio.Task[None] | None = None
        self._last_wal_checkpoint = time.monotonic()
        self._closed = False
        # Why the last commit failed, when its storage did (a full disk): cleared by the
        # next commit that succeeds. `check_writable` tells readiness.
        self._storage_failure: BaseException | None = None

    def submit(
        self,
        work: Callable[[sqlite3.Connection], T],
        then: Callable[[T | BaseException], None] | None = None,
    ) -> "asyncio.Future[T]":
        """Queue `work` for the next transaction; the future gives its result once committed.

        `work` runs on the event loop with the connection inside a transaction: it only
        executes statements (no waiting, no serialising of large values), and never
        commits or rolls back itself. Its place in the order is fixed now.

        `then` is called with the outcome (the result, or the exception that failed the
        write or its transaction) as soon as the transaction ends, before the future is
        settled: a callback on the future would run one turn of the event loop later, and
        under load a turn is tens of milliseconds. It must not raise.
        """
        if self._closed:
            raise StoreClosed("the SQLite writer is closed")
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._batches.add(_Work(work, done, then))
        return done

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` in the next transaction and return its result once committed."""
        return await self.submit(work)

    async def drain(self) -> None:
        """Wait until every queued write has been committed."""
        await self._batches.drain()
        if self._wal_checkpoint is not None:
            await self._wal_checkpoint

    async def close(self) -> None:
        """Commit what is queued, then refuse further writes."""
        await self.drain()
        self._closed = True

    async def check_writable(self) -> None:
        """Raise the storage failure of the last commit, until a write succeeds again.

        While the last commit succeeded this writes nothing; after a failure (a full
        disk) it tries a small real write, so readiness returns once there is room.
        """
        if self._storage_failure is not None:
            await self.run(_probe_write)

    async def _write(self, batch: list[_Work]) -> None:
        try:
            outcomes = await self._commit_when_unlocked(batch)
        except Exception as exc:  # the commit failed: so did every write in it
            outcomes = [exc] * len(batch)
        self._storage_failure = next(
            (o for o in outcomes if isinstance(o, BaseException) and storage_failure(o)), None
        )
        for work, outcome in zip(batch, outcomes, strict=True):
            if work.then is not None:
                work.then(outcome)
            settle(work.done, outcome)

    async def _commit_when_unlocked(self, batch: list[_Work]) -> list[Any]:
        """Commit the batch; while another process holds the write lock, sleep and retry.

        Only taking the lock is retried: once a write has run, its effects (an event
        log's id cache) must not be repeated.
        """
        await _when_unlocked(lambda: self._conn.execute("BEGIN IMMEDIATE"))
        outcomes = self._commit(batch)
        self._maybe_checkpoint_wal()
        return outcomes

    def _maybe_checkpoint_wal(self) -> None:
        now = time.monotonic()
        running = self._wal_checkpoint is not None and not self._wal_checkpoint.done()
        if running or now - self._last_wal_checkpoint < self._wal_checkpoint_every_s:
            return
        self._last_wal_checkpoint = now
        self._wal_checkpoint = asyncio.create_task(asyncio.to_thread(_checkpoint_wal, self.path))

    def _commit(self, batch: list[_Work]) -> list[Any]:
        """Run a batch in the open transaction, each write in a savepoint; commit."""
        conn = self._conn
        outcomes: list[Any] = []
        try:
            for work in batch:
                conn.execute("SAVEPOINT work")
                try:
                    outcomes.append(work.run(conn))
                except Exception as exc:
                    conn.execute("ROLLBACK TO work")
                    outcomes.append(exc)
                conn.execute("RELEASE work")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return outcomes


class SqliteReader:
    """Reads of the data file, run on the event loop (see the module docstring)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.closed = False

    async def run(self, work: Callable[[], T]) -> T:
        """The result of `work` (reads of `conn` only); a busy file is retried later."""
        if self.closed:
            raise StoreClosed("the SQLite reader is closed")
        return await _when_unlocked(work)

    async def fetchall(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """The rows of one query."""
        return await self.run(lambda: self.conn.execute(sql, params).fetchall())


@asynccontextmanager
async def open_sqlite_reader(path: Path) -> AsyncIterator[SqliteReader]:
    """A reader of the SQLite file at `path` (it waits for no lock on the loop)."""
    reader = SqliteReader(await asyncio.to_thread(_connect_reader, path))
    try:
        yield reader
    finally:
        reader.closed = True
        reader.conn.close()


def _connect_reader(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=0")
    return conn


async def _when_unlocked(attempt: Callable[[], T]) -> T:
    """`attempt()`; while SQLite says another connection holds the lock, sleep and retry.

    The sleeps are asyncio's, so the loop never waits on a lock (busy timeouts are 0).
    """
    pause, longest = _LOCKED_RETRY_S
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return attempt()
        except sqlite3.OperationalError as exc:
            if not _locked(exc) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(pause)
        pause = min(pause * 2, longest)


def _locked(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _probe_write(conn: sqlite3.Connection) -> None:
    """One small write that must reach the file (readiness after a storage failure)."""
    conn.execute("CREATE TABLE IF NOT EXISTS writable_probe (id INTEGER PRIMARY KEY, at REAL)")
    conn.execute("INSERT OR REPLACE INTO writable_probe VALUES (1, ?)", (time.time(),))


def _checkpoint_wal(path: Path) -> None:
    """Copy the WAL's committed pages into the database, without blocking anyone."""
    try:
        with closing(sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S)) as conn:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    except sqlite3.Error as exc:  # the next one catches up; the WAL keeps everything
        logger.warning("WAL checkpoint of %s failed: %s", path, exc)


def connect(path: Path) -> sqlite3.Connection:
    """The writer's connection to the data file, in WAL mode.

    WAL without a sync per commit: a killed process loses nothing (the WAL is in the OS
    cache); only a power cut may lose the last writes. No busy timeout (see the module
    docstring) and no automatic WAL checkpoint: `SqliteWriter` runs those in a thread.
    An existing file must pass `check_data_file` first (DamagedDataFile otherwise).
    """
    check_data_file(path)
    create_data_file(path)
    conn = sqlite3.connect(
        str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("PRAGMA busy_timeout=0")
    return conn


@asynccontextmanager
async def open_sqlite_writer(
    path: Path, wal_checkpoint_every_s: float = _WAL_CHECKPOINT_EVERY_S
) -> AsyncIterator[SqliteWriter]:
    """The writer of the SQLite file at `path`; what is queued is committed on exit."""
    conn = await asyncio.to_thread(connect, path)
    writer = SqliteWriter(conn, path, wal_checkpoint_every_s)
    try:
        yield writer
    finally:
        try:
            await writer.close()
        finally:
            conn.close()


class SqliteStore(Protocol):
    """A store kept in the SQLite data file; `open_sqlite` opens every kind the same way."""

    @classmethod
    async def open_in(
        cls, stack: AsyncExitStack, reader: SqliteReader, writer: SqliteWriter
    ) -> Self:
        """Prepare the store's tables and return it; what it must close goes on `stack`.

        Args:
            stack: closed when the store is closed, after what the store puts on it.
            reader: the file's reader, run on the event loop.
            writer: the file's writer (shared by the file's stores, or the store's own).

        Returns:
            The store, ready to use.
        """
        ...


S = TypeVar("S", bound=SqliteStore)


@asynccontextmanager
async def open_sqlite(
    path: Path, kind: type[S], writer: SqliteWriter | None = None
) -> AsyncIterator[S]:
    """Open (creating what is missing) a store of `kind` in the SQLite file at `path`.

    Args:
        path: the data file; created, with its folder, if it does not exist.
        kind: the store's class (`SqliteEventLog`, `SqliteRegistry`, the checkpointer).
        writer: the file's writer, when other stores of the file share it; without one,
            the store gets a writer of its own, closed with it.

    Yields:
        The store; what it queued is written before it closes.
    """
    async with AsyncExitStack() as stack:
        if writer is None:
            writer = await stack.enter_async_context(open_sqlite_writer(path))
        reader = await stack.enter_async_context(open_sqlite_reader(path))
        yield await kind.open_in(stack, reader, writer)
