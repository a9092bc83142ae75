"""The embedded checkpointer: LangGraph's SQLite saver with its writes group-committed.

It is `AsyncSqliteSaver` whose writes go through the file's group commit
(`stores.sqlite_writer`): the stock saver commits once per checkpoint on aiosqlite's one
thread, which bounds throughput with hundreds of runs. Channel values are stored once per
version in `checkpoint_blobs`, not in every checkpoint row. The two methods it copies
are fingerprinted in `COPIED` (checked by `tests/test_upstream.py`).
"""

import functools
import json
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from typing import Any

import aiosqlite
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from core.upstream import Copied, require_version
from stores.checkpointer import kept_writes, serializer
from stores.sqlite_writer import BUSY_TIMEOUT_S, SqliteReader, SqliteWriter

require_version("langgraph-checkpoint-sqlite", "3.1", "4")
# The stock saver's writes, copied to go through the group commit.
_GROUP_COMMIT = (
    "bench/graph_overhead.py --runs 200, 3 A/B pairs: SQLite runs/s over memory runs/s "
    "1.04-1.14 with the copies, 0.62-0.72 with the stock aput and aput_writes"
)
COPIED = {
    "langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver.aput": Copied(
        "cc3cbb70ae5c83fd", _GROUP_COMMIT
    ),
    "langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver.aput_writes": Copied(
        "73d69b31758821f2", _GROUP_COMMIT
    ),
}

_PUT_CHECKPOINT = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_PUT_WRITES = (
    "INSERT OR {conflict} INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
    "task_path, idx, channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_BLOBS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS checkpoint_blobs (thread_id TEXT NOT NULL, "
    "checkpoint_ns TEXT NOT NULL DEFAULT '', channel TEXT NOT NULL, version TEXT NOT NULL, "
    "type TEXT NOT NULL, blob BLOB, PRIMARY KEY (thread_id, checkpoint_ns, channel, version))"
)
_PUT_BLOB = (
    "INSERT OR REPLACE INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, "
    "type, blob) VALUES (?, ?, ?, ?, ?, ?)"
)
_GET_BLOB = (
    "SELECT type, blob FROM checkpoint_blobs "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?"
)
_DELETE_BLOBS = "DELETE FROM checkpoint_blobs WHERE thread_id = ?"

Rows = list[tuple[Any, ...]]


class GroupCommitSqliteSaver(AsyncSqliteSaver):
    """`AsyncSqliteSaver` whose concurrent writes share one transaction."""

    def __init__(
        self, conn: aiosqlite.Connection, writer: SqliteWriter, reader: SqliteReader
    ) -> None:
        super().__init__(conn, serde=serializer())
        self._writer = writer
        self._reads = reader
        self._reader = SqliteSaver(reader.conn, serde=self.serde)

    @classmethod
    async def open_in(
        cls, stack: AsyncExitStack, reader: SqliteReader, writer: SqliteWriter
    ) -> "GroupCommitSqliteSaver":
        """Return the file's checkpointer (see `stores.sqlite_writer.open_sqlite`)."""
        conn = await stack.enter_async_context(
            aiosqlite.connect(str(writer.path), timeout=BUSY_TIMEOUT_S)
        )
        await writer.create(_BLOBS_SCHEMA)
        saver = cls(conn, writer, reader)
        await saver.setup()
        stack.push_async_callback(saver.drain)
        return saver

    async def _write(self, *statements: tuple[str, Rows]) -> None:
        """Write rows in the next transaction; return once it has committed."""

        def work(conn: sqlite3.Connection) -> None:
            for sql, rows in statements:
                if rows:
                    conn.executemany(sql, rows)

        await self._writer.run(work)

    async def drain(self) -> None:
        """Wait until every queued write has been committed."""
        await self._writer.drain()

    def _with_values(self, found: CheckpointTuple | None) -> CheckpointTuple | None:
        """Return the checkpoint with the channel values it names put back into it."""
        if found is None:
            return None
        configurable = found.config["configurable"]
        key = (str(configurable["thread_id"]), configurable.get("checkpoint_ns", ""))
        values: dict[str, Any] = {}
        with self._reader.lock:  # the sync saver's lock: one user of the connection at a time
            for channel, version in found.checkpoint["channel_versions"].items():
                row = self._reader.conn.execute(_GET_BLOB, (*key, channel, str(version))).fetchone()
                if row is not None and row[0] != "empty":
                    values[channel] = self.serde.loads_typed((row[0], row[1]))
        found.checkpoint["channel_values"] = values
        return found

    def _get_tuple_sync(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._with_values(self._reader.get_tuple(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Read a checkpoint, on the event loop (`stores.sqlite_writer`: no thread hop)."""
        return await self._reads.run(functools.partial(self._get_tuple_sync, config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """List checkpoints, newest first, each with its channel values."""
        async for found in super().alist(config, filter=filter, before=before, limit=limit):
            complete = await self._reads.run(functools.partial(self._with_values, found))
            if complete is not None:
                yield complete

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints, writes and channel values."""
        await super().adelete_thread(thread_id)
        await self._write((_DELETE_BLOBS, [(str(thread_id),)]))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint (the stock row, written by the group commit)."""
        configurable = config["configurable"]
        thread_id, namespace = str(configurable["thread_id"]), configurable["checkpoint_ns"]
        values = checkpoint["channel_values"]
        # A channel with no value at its new version (a branch consumed, a value cleared)
        # gets no row: reading one that is missing is reading an empty channel.
        blobs = [
            (thread_id, namespace, channel, str(version), *self.serde.dumps_typed(values[channel]))
            for channel, version in new_versions.items()
            if channel in values
        ]
        type_, blob = self.serde.dumps_typed({**checkpoint, "channel_values": {}})
        meta = json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False)
        row = (
            thread_id,
            namespace,
            checkpoint["id"],
            configurable.get("checkpoint_id"),
            type_,
            blob,
            meta.encode("utf-8", "ignore"),
        )
        await self._write((_PUT_BLOB, blobs), (_PUT_CHECKPOINT, [row]))
        return {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": configurable["checkpoint_ns"],
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes (the stock rows, written by the group commit)."""
        writes = kept_writes(writes)
        if not writes:
            return
        configurable = config["configurable"]
        conflict = "REPLACE" if all(w[0] in WRITES_IDX_MAP for w in writes) else "IGNORE"
        rows = [
            (
                str(configurable["thread_id"]),
                str(configurable["checkpoint_ns"]),
                str(configurable["checkpoint_id"]),
                task_id,
                task_path,
                WRITES_IDX_MAP.get(channel, idx),
                channel,
                *self.serde.dumps_typed(value),
            )
            for idx, (channel, value) in enumerate(writes)
        ]
        await self._write((_PUT_WRITES.format(conflict=conflict), rows))
