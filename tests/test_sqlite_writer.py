"""The data file's one writer: shared transactions, failures alone, never a blocked loop."""

import asyncio
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from stores.sqlite_writer import StoreClosed, open_sqlite_writer

SCHEMA = "CREATE TABLE IF NOT EXISTS items (key TEXT PRIMARY KEY, value BLOB)"


def insert(key: str, value: bytes = b"") -> Callable[[sqlite3.Connection], str]:
    def work(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO items VALUES (?, ?)", (key, value))
        return key

    return work


def keys(db: Path) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:
        return [row[0] for row in conn.execute("SELECT key FROM items ORDER BY key")]


async def test_writes_queued_together_commit_together_and_a_failing_one_fails_alone(
    tmp_path: Path,
) -> None:
    db = tmp_path / "data.sqlite"
    async with open_sqlite_writer(db) as writer:
        await writer.run(lambda conn: conn.execute(SCHEMA))
        await writer.run(insert("taken"))
        # Queued before the flusher runs: one transaction holds all three.
        results = await asyncio.gather(
            writer.submit(insert("a")),
            writer.submit(insert("taken")),  # a duplicate key
            writer.submit(insert("b")),
            return_exceptions=True,
        )
    assert results[0] == "a" and results[2] == "b"
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert keys(db) == ["a", "b", "taken"]


async def test_then_gets_each_outcome_as_its_transaction_ends_before_its_future_settles(
    tmp_path: Path,
) -> None:
    seen: list[tuple[object, list[bool]]] = []
    futures: list[asyncio.Future[str]] = []

    def then(outcome: str | BaseException) -> None:
        kind = type(outcome) if isinstance(outcome, BaseException) else outcome
        seen.append((kind, [future.done() for future in futures]))

    async with open_sqlite_writer(tmp_path / "data.sqlite") as writer:
        await writer.run(lambda conn: conn.execute(SCHEMA))
        await writer.run(insert("taken"))
        futures.append(writer.submit(insert("a"), then=then))
        futures.append(writer.submit(insert("taken"), then=then))  # a duplicate key
        await asyncio.gather(*futures, return_exceptions=True)
    # Each write's callback ran before its own future was settled (and so before any
    # callback of that future, which would run a turn of the loop later).
    assert seen == [("a", [False, False]), (sqlite3.IntegrityError, [True, False])]


async def test_a_lock_held_elsewhere_is_waited_for_without_blocking_the_loop(
    tmp_path: Path,
) -> None:
    db = tmp_path / "data.sqlite"
    async with open_sqlite_writer(db) as writer:
        await writer.run(lambda conn: conn.execute(SCHEMA))
        # Another process (here: another connection) holds the write lock.
        other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        pending = writer.submit(insert("late"))
        ticks = 0
        for _ in range(20):  # the loop keeps turning while the write waits
            await asyncio.sleep(0.005)
            ticks += 1
            assert not pending.done()
        other.execute("COMMIT")
        other.close()
        assert await pending == "late"
    assert ticks == 20 and keys(db) == ["late"]


async def test_the_wal_is_copied_into_the_database_by_a_worker_thread(tmp_path: Path) -> None:
    db = tmp_path / "data.sqlite"
    blob = bytes(1_000_000)
    async with open_sqlite_writer(db, wal_checkpoint_every_s=3600) as writer:
        await writer.run(lambda conn: conn.execute(SCHEMA))
        await writer.run(insert("one", blob))
        # Automatic checkpoints are off: the megabyte sits in the WAL only.
        assert db.stat().st_size < len(blob)
    async with open_sqlite_writer(db, wal_checkpoint_every_s=0) as writer:
        await writer.run(insert("two", blob))
        await writer.drain()  # includes the checkpoint it started
        assert db.stat().st_size > 2 * len(blob)
    assert keys(db) == ["one", "two"]


async def test_a_closed_writer_refuses_work(tmp_path: Path) -> None:
    async with open_sqlite_writer(tmp_path / "data.sqlite") as writer:
        pass
    with pytest.raises(StoreClosed, match="closed"):
        writer.submit(lambda conn: None)
