"""Threads of the stock format, read for `stores.redis_flat_saver` where its keys lack them.

Deployments before the flat saver kept checkpoints as the stock saver's JSON documents
(`stores.redis_saver.ConformingRedisSaver`). Such a thread is read through that saver;
resumed, it goes on in the flat keys, so one thread may hold both: its new checkpoints
name versions of channels unchanged since, which only the old documents hold
(`LegacyThreads.complete`), and writes made since on its last old checkpoint are flat
(`LegacyThreads.tuple`).
"""

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol
from redis.asyncio import Redis

from stores.redis_connection import awaited
from stores.redis_flat_layout import (
    Missing,
    blob_field,
    encode_typed,
    member,
    sorted_writes,
    thread_keys,
)
from stores.redis_saver import ConformingRedisSaver


class LegacyThreads:
    """The stock-format reader, and what joins its threads to the flat keys."""

    def __init__(
        self, client: Redis, serde: SerializerProtocol, saver: ConformingRedisSaver
    ) -> None:
        """Read through `saver`; copy what is found into the flat keys of `client`."""
        self._redis = client
        self._serde = serde
        self.saver = saver

    async def tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint as the stock saver stored it, with writes made on it since."""
        found = await self.saver.aget_tuple(config)
        if found is None:
            return None
        configurable = found.config["configurable"]
        keys = thread_keys(str(configurable["thread_id"]))
        name = member(configurable.get("checkpoint_ns", ""), configurable["checkpoint_id"])
        stored = await awaited(self._redis.hgetall(keys.writes(name)))
        later = sorted_writes(stored)
        if not later:
            return found
        tasks = {task for task, _, _ in found.pending_writes or []}
        extra = [(w.task_id, w.channel, self._serde.loads_typed(w.typed)) for w in later]
        pending = [*(found.pending_writes or []), *(w for w in extra if w[0] not in tasks)]
        return found._replace(pending_writes=pending)

    async def complete(self, item: CheckpointTuple, missing: Missing) -> CheckpointTuple:
        """Fill in the channel values a flat checkpoint names that only old documents hold.

        Found ones are copied to the flat keys, so each is looked up once.
        """
        configurable = item.config["configurable"]
        namespace = configurable.get("checkpoint_ns", "")
        wanted, found = dict(missing), {}
        history = self.saver.alist(
            {"configurable": {"thread_id": configurable["thread_id"], "checkpoint_ns": namespace}}
        )
        async for old in history:
            for channel, version in list(wanted.items()):
                if str(old.checkpoint["channel_versions"].get(channel)) == version:
                    if channel in old.checkpoint["channel_values"]:
                        found[channel] = old.checkpoint["channel_values"][channel]
                    del wanted[channel]
            if not wanted:
                break
        if found:
            item.checkpoint["channel_values"].update(found)
            versions = dict(missing)
            copies = {
                blob_field(namespace, channel, versions[channel]): encode_typed(
                    self._serde.dumps_typed(value)
                )
                for channel, value in found.items()
            }
            keys = thread_keys(str(configurable["thread_id"]))
            await awaited(self._redis.hset(keys.blobs, mapping=copies))
        return item

    async def merged(
        self,
        flat: Sequence[CheckpointTuple],
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,  # noqa: A002 (the base class's name)
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[CheckpointTuple]:
        """The flat keys' listed checkpoints and the old documents', newest first."""
        listed = self.saver.alist(config, filter=filter, before=before, limit=limit)
        old = [t async for t in listed]
        merged = sorted(
            [*flat, *old], key=lambda t: t.config["configurable"]["checkpoint_id"], reverse=True
        )
        return merged[:limit] if limit is not None else merged
