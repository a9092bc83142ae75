"""One writer for a SQLite file (concurrent writes share one transaction), and its reads.

Writes queued while a transaction commits go together into the next one, run on the
event loop itself: a writer connection per store took SQLite's write lock in turn and
slept in its busy handler, and a writer thread had to win the GIL back from the busy loop
for every statement. The busy timeout is zero: a lock held by another process is retried
after an asyncio sleep. The WAL is checkpointed by a worker thread. Each write runs in a
savepoint, so one that fails fails alone; a failed commit fails all.

Reads run on the event loop too (`SqliteReader`): a WAL reader never waits for the writer.
"""

import asyncio
import logging
import shutil
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

from stores.batching import Batcher, set_outcome
from stores.data_file import check_data_file, create_data_file, storage_failure

T = TypeVar("T")

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 30.0  # other connections (readers) may wait; the writer never does
# Backoff while another process holds the write lock: first and largest sleep, seconds.
_LOCKED_RETRY_S = (0.001, 0.05)
# Copy the WAL back into the database at most this often (seconds) while writes go on.
_WAL_CHECKPOINT_EVERY_S = 1.0
# Free space after a full disk before readiness returns: room for a few batches of writes.
ROOM_BYTES = 1 << 20


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
        # Why a commit failed, when its storage did (a full disk): kept until readiness
        # (`check_writable`) finds room again. A commit that succeeds meanwhile does not
        # clear it: a nearly full disk takes some small writes in the room the WAL holds.
        self._storage_failure: BaseException | None = None

    def submit(
        self,
        work: Callable[[sqlite3.Connection], T],
        then: Callable[[T | BaseException], None] | None = None,
    ) -> "asyncio.Future[T]":
        """Queue `work` for the next transaction; the future gives its result once committed.

        `work` runs on the event loop inside the transaction: it only executes statements,
        and never commits or rolls back. `then` gets the outcome as the transaction ends,
        a turn of the event loop before a callback on the future would; it must not raise.
        """
        if self._closed:
            raise StoreClosed("the SQLite writer is closed")
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._batches.add(_Work(work, done, then))
        return done

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` in the next transaction and return its result once committed."""
        return await self.submit(work)

    async def create(self, *statements: str) -> None:
        """Run a store's `CREATE ... IF NOT EXISTS` statements, in one transaction."""

        def work(conn: sqlite3.Connection) -> None:
            for statement in statements:
                conn.execute(statement)

        await self.run(work)

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
        """Raise the last storage failure (a full disk) until there is room again.

        Room: the file system has `ROOM_BYTES` free for the data file, and a small real
        write succeeds.
        """
        if self._storage_failure is None:
            return
        if shutil.disk_usage(self.path.parent).free < ROOM_BYTES:
            raise self._storage_failure
        await self.run(_probe_write)
        self._storage_failure = None

    async def _write(self, batch: list[_Work]) -> None:
        try:
            outcomes = await self._commit_when_unlocked(batch)
        except Exception as exc:  # the commit failed: so did every write in it
            outcomes = [exc] * len(batch)
        failed = (o for o in outcomes if isinstance(o, BaseException) and storage_failure(o))
        self._storage_failure = next(failed, self._storage_failure)
        for work, outcome in zip(batch, outcomes, strict=True):
            if work.then is not None:
                work.then(outcome)
            set_outcome(work.done, outcome)

    async def _commit_when_unlocked(self, batch: list[_Work]) -> list[Any]:
        """Commit the batch; while another process holds the write lock, sleep and retry.

        Only taking the lock is retried: a write that has run must not run again.
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
        """Return the result of `work` (reads of `conn` only); a busy file is retried later."""
        if self.closed:
            raise StoreClosed("the SQLite reader is closed")
        return await _when_unlocked(work)

    async def fetchall(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """Return the rows of one query."""
        return await self.run(lambda: self.conn.execute(sql, params).fetchall())


@asynccontextmanager
async def open_sqlite_reader(path: Path) -> AsyncIterator[SqliteReader]:
    """Open a reader of the SQLite file at `path`."""
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
    """Return `attempt()`; while another connection holds the lock, sleep (asyncio's) and retry."""
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
    """Make one small write that must reach the file (readiness after a storage failure)."""
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
    """Open the writer's connection to the data file, in WAL mode.

    No sync per commit (only a power cut may lose the last writes), no busy timeout and no
    automatic WAL checkpoint. An existing file must pass `check_data_file` first.
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
    """Open the writer of the SQLite file at `path`; what is queued is committed on exit."""
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
        """Prepare the store's tables and return it; what it must close goes on `stack`."""
        ...


S = TypeVar("S", bound=SqliteStore)


@asynccontextmanager
async def open_sqlite(
    path: Path, kind: type[S], writer: SqliteWriter | None = None
) -> AsyncIterator[S]:
    """Open (creating what is missing) a store of `kind` in the SQLite file at `path`.

    `writer`: the file's writer, when other stores share it; without one, the store gets
    a writer of its own. What the store queued is written before it closes.
    """
    async with AsyncExitStack() as stack:
        if writer is None:
            writer = await stack.enter_async_context(open_sqlite_writer(path))
        reader = await stack.enter_async_context(open_sqlite_reader(path))
        yield await kind.open_in(stack, reader, writer)
