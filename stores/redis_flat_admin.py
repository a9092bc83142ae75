"""Whole-thread operations of `stores.redis_flat_saver`: delete, prune, copy, delete runs.

Rare calls: each reads what a thread holds, then changes it in one transaction.
"""

from collections.abc import Iterable

from langgraph.checkpoint.serde.base import SerializerProtocol
from redis.asyncio import Redis

from stores.redis_connection import awaited
from stores.redis_flat_layout import (
    COPY_SCRIPT,
    THREADS,
    ThreadKeys,
    blob_fields,
    decode_checkpoint,
    split_member,
    thread_keys,
)


async def delete_thread(client: Redis, thread_id: str) -> None:
    """Delete every key of the thread."""
    keys = thread_keys(thread_id)
    written = await awaited(client.smembers(keys.written))
    pipe = client.pipeline(transaction=True)
    pipe.delete(*keys.fixed(), *(keys.writes(m) for m in written))
    pipe.srem(THREADS, thread_id)
    await pipe.execute()


async def prune(client: Redis, thread_id: str, keep_latest: bool) -> None:
    """Keep each namespace's latest checkpoint, its writes and its values; or nothing.

    Meant for threads that are not running: a value written while this runs may go.
    """
    if not keep_latest:
        await delete_thread(client, thread_id)
        return
    keys = thread_keys(thread_id)
    pipe = client.pipeline(transaction=False)
    pipe.zrange(keys.index, 0, -1)
    pipe.smembers(keys.written)
    pipe.hkeys(keys.blobs)
    members, written, stored_blobs = await pipe.execute()
    latest: dict[str, bytes] = {}
    for name in members:  # within a namespace, members sort as their ids do
        namespace, _ = split_member(name)
        latest[namespace] = max(latest.get(namespace, name), name)
    kept = list(latest.values())
    lists = await awaited(client.hmget(keys.versions, kept)) if kept else []
    referenced = {
        field
        for name, versions in zip(kept, lists, strict=True)
        for field in blob_fields(split_member(name)[0], versions or b"")
    }
    await _drop(
        client,
        keys,
        [m for m in members if m not in latest.values()],
        [m for m in written if m not in latest.values()],
        [f for f in stored_blobs if f not in referenced],
    )


async def _drop(
    client: Redis,
    keys: ThreadKeys,
    checkpoints: list[bytes],
    writes: Iterable[bytes],
    blobs: list[bytes] | None = None,
) -> None:
    """Delete checkpoints, the writes of checkpoints, and channel values, in one transaction."""
    writes = list(writes)
    pipe = client.pipeline(transaction=True)
    if checkpoints:
        pipe.zrem(keys.index, *checkpoints)
        pipe.hdel(keys.checkpoints, *checkpoints)  # type: ignore[arg-type]
        pipe.hdel(keys.versions, *checkpoints)  # type: ignore[arg-type]
    if writes:
        pipe.delete(*(keys.writes(m) for m in writes))
        pipe.srem(keys.written, *writes)
    if blobs:
        pipe.hdel(keys.blobs, *blobs)  # type: ignore[arg-type]
    await pipe.execute()


async def copy_thread(client: Redis, source: str, target: str) -> None:
    """Copy the source thread's keys onto the target's, merged into what it holds."""
    src, dst = thread_keys(source), thread_keys(target)
    written = await awaited(client.smembers(src.written))
    pairs = [*zip(src.fixed(), dst.fixed(), strict=True)]
    pairs += [(src.writes(m), dst.writes(m)) for m in written]
    names = [key for pair in pairs for key in pair]
    await awaited(client.eval(COPY_SCRIPT, len(names), *names))
    if await client.exists(dst.index):
        await awaited(client.sadd(THREADS, target))


async def delete_for_runs(client: Redis, serde: SerializerProtocol, run_ids: set[str]) -> None:
    """Delete, in every thread, the checkpoints whose metadata `run_id` is in `run_ids`."""
    if not run_ids:
        return
    for thread in await awaited(client.smembers(THREADS)):
        keys = thread_keys(thread.decode())
        records = await awaited(client.hgetall(keys.checkpoints))
        doomed = [
            name
            for name, raw in records.items()
            if serde.loads_typed(decode_checkpoint(raw)[1]).get("run_id") in run_ids
        ]
        if doomed:
            await _drop(client, keys, doomed, doomed)
