"""The production Redis checkpointer: plain keys, msgpack values, one round trip per call.

Like `InMemorySaver` and our SQLite saver, it keeps each checkpoint without its channel
values, each channel value once per version, and pending writes per checkpoint, in plain
Redis keys (`stores.redis_flat_layout`). `aput`, `aput_writes` and `aget_tuple` are one
atomic Lua script each, sent through shared pipelines (`stores.redis_batches`).
"""

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from itertools import chain
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from redis.asyncio import Redis

from stores import redis_flat_admin as admin
from stores.checkpointer import kept_writes, serializer
from stores.redis_batches import RedisBatches
from stores.redis_connection import awaited, redis_client
from stores.redis_flat_layout import (
    GET_SCRIPT,
    PUT_SCRIPT,
    THREADS,
    WRITES_SCRIPT,
    Stored,
    assemble,
    blob_field,
    blob_fields,
    decode_checkpoint,
    encode_checkpoint,
    encode_typed,
    encode_versions,
    encode_write,
    member,
    read_reply,
    sorted_writes,
    thread_keys,
)

T = TypeVar("T")


class FlatRedisSaver(BaseCheckpointSaver[str]):
    """A checkpointer on plain Redis keys (see the module docstring)."""

    def __init__(self, client: Redis) -> None:
        """Keep checkpoints on `client`; the running loop serves the sync API."""
        super().__init__(serde=serializer())
        self._redis = client
        self._get = client.register_script(GET_SCRIPT)
        self._put = client.register_script(PUT_SCRIPT)
        self._writes = client.register_script(WRITES_SCRIPT)
        # Puts and writes of concurrent runs share pipelines (`drain` waits for what is left).
        self._commands = RedisBatches(client)
        self.loop = asyncio.get_running_loop()
        # Around each put and write of a thread (`ordered_by`).
        self._ordered: Callable[[str], AbstractAsyncContextManager[None]] = lambda _: nullcontext()

    def ordered_by(self, ordered: Callable[[str], AbstractAsyncContextManager[None]]) -> None:
        """Make every put and write of a thread happen within `ordered(thread_id)`.

        With `RedisEventLog.ordered`, a step's events are stored before its writes.
        """
        self._ordered = ordered

    async def drain(self) -> None:
        """Wait until every put and write queued has been stored."""
        await self._commands.drain()

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Return the in-memory saver's versions: a counter, then a random tie-breaker."""
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint and the channel values it introduces, in one transaction."""
        configurable = config["configurable"]
        thread_id, namespace = str(configurable["thread_id"]), configurable.get("checkpoint_ns", "")
        keys = thread_keys(thread_id)
        values = checkpoint["channel_values"]
        blobs = {
            blob_field(namespace, channel, str(version)): encode_typed(
                self.serde.dumps_typed(values[channel]) if channel in values else ("empty", b"")
            )
            for channel, version in new_versions.items()
        }
        name = member(namespace, checkpoint["id"])
        record = encode_checkpoint(
            self.serde.dumps_typed({**checkpoint, "channel_values": {}}),
            self.serde.dumps_typed(get_checkpoint_metadata(config, metadata)),
            configurable.get("checkpoint_id"),
        )
        versions = {channel: str(v) for channel, v in checkpoint["channel_versions"].items()}
        async with self._ordered(thread_id):
            await self._commands.call(
                self._put,
                keys=[keys.blobs, keys.checkpoints, keys.versions, keys.index, THREADS],
                args=[name, record, encode_versions(versions), thread_id, *chain(*blobs.items())],
            )
        return {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": namespace,
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
        """Store a task's pending writes in one transaction; a cancelled task's are not kept.

        Special channels (`WRITES_IDX_MAP`) replace what is stored; other writes keep the
        first one stored, as the stock savers do.
        """
        writes = kept_writes(writes)
        if not writes:
            return
        configurable = config["configurable"]
        keys = thread_keys(str(configurable["thread_id"]))
        name = member(configurable.get("checkpoint_ns", ""), str(configurable["checkpoint_id"]))
        args: list[str | bytes] = [name]
        for idx, (channel, value) in enumerate(writes):
            index = WRITES_IDX_MAP.get(channel, idx)
            args += (
                "1" if index < 0 else "0",
                f"{task_id}\0{index}".encode(),
                encode_write(channel, self.serde.dumps_typed(value), task_path),
            )
        async with self._ordered(str(configurable["thread_id"])):
            await self._commands.call(
                self._writes, keys=[keys.writes(name), keys.written], args=args
            )

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Return the checkpoint asked for (the namespace's latest without an id), in one trip."""
        configurable = config["configurable"]
        thread_id, namespace = str(configurable["thread_id"]), configurable.get("checkpoint_ns", "")
        keys = thread_keys(thread_id)
        found = await self._commands.call(
            self._get,
            keys=[keys.index, keys.checkpoints, keys.versions, keys.blobs],
            args=[namespace, get_checkpoint_id(config) or "", keys.writes_prefix],
        )
        if not found:
            return None
        checkpoint_id, record, values, writes = read_reply(namespace, found)
        stored = Stored(thread_id, namespace, checkpoint_id, decode_checkpoint(record))
        return assemble(self.serde, stored, values, sorted_writes(writes))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 (the base class's name)
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """List newest first: every thread, a thread's every namespace, or one namespace."""
        if config is None:
            threads = sorted(m.decode() for m in await awaited(self._redis.smembers(THREADS)))
        else:
            threads = [str(config["configurable"]["thread_id"])]
        namespace = config["configurable"].get("checkpoint_ns") if config else None
        wanted = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        for thread_id in threads:
            if left is not None and left <= 0:
                return
            listed = await self._list_thread(
                thread_id, namespace, wanted, before_id, filter or {}, left
            )
            for item in listed:
                yield item
            left = None if left is None else left - len(listed)

    async def _list_thread(
        self,
        thread_id: str,
        namespace: str | None,
        wanted: str | None,
        before_id: str | None,
        filter: dict[str, Any],  # noqa: A002
        limit: int | None,
    ) -> list[CheckpointTuple]:
        """Return one thread's matching checkpoints, newest first, in three round trips."""
        keys = thread_keys(thread_id)
        if namespace is None:
            raw = await self._redis.zrange(keys.index, 0, -1)
        else:
            ns = namespace.encode()
            raw = await self._redis.zrevrangebylex(keys.index, b"(" + ns + b"\1", b"[" + ns + b"\0")
        candidates = sorted(
            (
                (checkpoint_id, ns_)
                for ns_, _, checkpoint_id in (m.decode().partition("\0") for m in raw)
                if (wanted is None or checkpoint_id == wanted)
                and (before_id is None or checkpoint_id < before_id)
            ),
            reverse=True,
        )
        if not candidates or (limit is not None and limit <= 0):
            return []
        chosen = await self._matching(thread_id, candidates, filter, limit)
        pipe = self._redis.pipeline(transaction=False)
        for stored, fields in chosen:
            pipe.hmget(keys.blobs, fields or [b""])
            pipe.hgetall(keys.writes(member(stored.namespace, stored.checkpoint_id)))
        results = await pipe.execute()
        return [
            assemble(
                self.serde,
                stored,
                dict(zip(fields, results[2 * n], strict=False)),
                sorted_writes(results[2 * n + 1]),
            )
            for n, (stored, fields) in enumerate(chosen)
        ]

    async def _matching(
        self,
        thread_id: str,
        candidates: list[tuple[str, str]],
        filter: dict[str, Any],  # noqa: A002
        limit: int | None,
    ) -> list[tuple[Stored, list[bytes]]]:
        """Return the candidates (id, namespace) whose metadata matches, with their blob fields."""
        keys = thread_keys(thread_id)
        names = [member(ns, checkpoint_id) for checkpoint_id, ns in candidates]
        pipe = self._redis.pipeline(transaction=False)
        pipe.hmget(keys.checkpoints, names)
        pipe.hmget(keys.versions, names)
        records, version_lists = await pipe.execute()
        chosen: list[tuple[Stored, list[bytes]]] = []
        for (checkpoint_id, ns), record, versions in zip(
            candidates, records, version_lists, strict=True
        ):
            if record is None:
                continue
            stored = Stored(thread_id, ns, checkpoint_id, decode_checkpoint(record))
            metadata = stored.metadata(self.serde)
            if any(metadata.get(k) != v for k, v in filter.items()):
                continue
            chosen.append((stored, blob_fields(ns, versions or b"")))
            if limit is not None and len(chosen) >= limit:
                break
        return chosen

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints, writes and channel values."""
        await admin.delete_thread(self._redis, str(thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep each namespace's latest checkpoint ("keep_latest") or nothing ("delete")."""
        for thread_id in thread_ids:
            await admin.prune(self._redis, str(thread_id), keep_latest=strategy == "keep_latest")

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's checkpoints and writes onto another."""
        await admin.copy_thread(self._redis, str(source_thread_id), str(target_thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata names one of `run_ids`."""
        await admin.delete_for_runs(self._redis, self.serde, set(run_ids))

    # -- the sync API: from another thread only, as LangGraph's async savers do ----------

    def _sync(self, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run `work` on the saver's loop from another thread; refused on the loop itself."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            raise asyncio.InvalidStateError(
                "Synchronous calls to FlatRedisSaver are only allowed from a different "
                "thread; on the event loop, use the async interface."
            )
        return asyncio.run_coroutine_threadsafe(work(), self.loop).result()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:  # noqa: D102
        return self._sync(lambda: self.aget_tuple(config))

    def list(  # noqa: D102
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

        return iter(self._sync(collect))

    def put(  # noqa: D102
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._sync(lambda: self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(  # noqa: D102
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._sync(lambda: self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:  # noqa: D102
        self._sync(lambda: self.adelete_thread(thread_id))


@asynccontextmanager
async def redis_saver(url: str) -> AsyncIterator[FlatRedisSaver]:
    """Open the saver on `url`; what it queued is stored before the client closes.

    The server is pinged first, so an unreachable one fails here, not at the first checkpoint.
    """
    client = redis_client(url)
    try:
        await awaited(client.ping())
        saver = FlatRedisSaver(client)
        try:
            yield saver
        finally:
            await saver.drain()
    finally:
        await client.aclose()
