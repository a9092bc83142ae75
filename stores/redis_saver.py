"""The stock-format Redis checkpointer: `langgraph-checkpoint-redis`'s saver, made to honour the contract.

Checkpoints are now written by `stores.redis_flat_saver` (plain keys); this saver reads
the threads an earlier release wrote as JSON documents (`legacy_reader`).

`AsyncRedisSaver` 0.5.2 fails 7 of the 66 cases of LangGraph's conformance suite:
`list(before=...)` is silently ignored (it parses the UUIDv6 checkpoint id as a ULID and
swallows the error); `checkpoint_ns=""` lists every namespace instead of the root one;
metadata filters on keys other than source/step/thread_id/run_id raise; `prune([])`
raises instead of doing nothing (and `prune` keeps the wrong checkpoints through the
namespace bug). `ConformingRedisSaver` fixes each in `alist`/`aprune`, leaving the
stored format, `aput` and `aget_tuple` untouched.

It needs the JSON and Search modules (Redis >= 8, Redis Stack, or Valkey with both):
`check_modules` says so in plain words before anything else fails on `FT.INFO`.

The saver's fast read path copies the stock reads, and `JsonCachingRedis` patches
redis-py's JSON commands onto pipelines: the library code they copy or rely on is
fingerprinted in `COPIED` (checked by `tests/test_upstream.py`).
"""

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.redis.aio import AsyncRedisSaver
from langgraph.checkpoint.redis.base import REDIS_KEY_SEPARATOR, BaseRedisSaver
from langgraph.checkpoint.redis.jsonplus_redis import JsonPlusRedisSerializer
from langgraph.checkpoint.redis.key_registry import CheckpointKeyRegistry
from langgraph.checkpoint.redis.util import EMPTY_ID_SENTINEL, from_storage_safe_id
from langgraph.constants import TASKS
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.commands.json import JSON
from redis.exceptions import ResponseError

from core.upstream import require_version
from stores.checkpointer import ALLOWED_NAMES, kept_writes
from stores.redis_connection import redis_client

require_version("langgraph-checkpoint-redis", "0.5.2", "0.6")
require_version("redis", "7.4", "8")
COPIED = {
    "langgraph.checkpoint.redis.aio.AsyncRedisSaver.aget_tuple": "a207695cf419fc87",
    "langgraph.checkpoint.redis.aio.AsyncRedisSaver.alist": "e0fd0a6bbeb29b1f",
    "langgraph.checkpoint.redis.aio.AsyncRedisSaver.aprune": "a08018a6f7566064",
    "redis.commands.json.JSON.__init__": "4f1fb2b52925c574",
    "redis.asyncio.client.Redis.pipeline": "0d5df09dabec596d",
    "redis.commands.redismodules.AsyncRedisModuleCommands.json": "0508f0c717ad56a1",
}

# The metadata keys the index can filter on; others are filtered here, after the query.
_INDEXED_FILTERS = frozenset({"source", "step", "thread_id", "run_id"})
_MODULES = {"rejson": "JSON", "search": "Search"}


class JsonCachingRedis(Redis):
    """A client whose `json()` is built once, for it and for each of its pipelines.

    redis-py builds the JSON command object anew on every `json()` call, registering its
    two dozen reply callbacks each time, and the Redis saver calls it for every command:
    74 times per research run, about a tenth of the run's CPU.
    """

    _json: JSON | None = None

    def json(self, *args: Any, **kwargs: Any) -> JSON:  # noqa: D102
        if args or kwargs:  # its own encoder or decoder: its own object
            return super().json(*args, **kwargs)
        if self._json is None:
            self._json = super().json()
        return self._json

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> "Pipeline":  # noqa: D102
        pipe = super().pipeline(transaction, shard_hint)
        template = self.json()  # its callbacks are already in the shared reply table
        pipe.json = lambda *_, **__: _bound_json(template, pipe)  # type: ignore[method-assign]
        return pipe


def _bound_json(template: JSON, pipe: "Pipeline") -> JSON:
    bound = copy.copy(template)
    bound.client = pipe
    bound.execute_command = pipe.execute_command
    return bound


# LangGraph saves a task cancelled mid-step (a cancel, a stopping or aborted worker) as
# an error write holding the CancelledError. Unlisted, every read of that checkpoint logs
# a refusal; listed, it reads back as None (LangGraph never rebuilds exceptions), which
# is all a resume needs: it runs the task again.
_ERROR_TYPES: tuple[type, ...] = (asyncio.CancelledError,)


def redis_serializer() -> JsonPlusRedisSerializer:
    """The Redis saver's JSON serializer, reviving our state types and nothing else."""
    return JsonPlusRedisSerializer(
        allowed_json_modules=[
            (*module.split("."), name)
            for module, name in (
                *ALLOWED_NAMES,
                *((t.__module__, t.__name__) for t in _ERROR_TYPES),
            )
        ]
    )


class RedisModulesMissing(RuntimeError):
    """The Redis server lacks the JSON or Search module the stock-format saver needs."""


async def _missing_modules(client: "Redis") -> list[str]:
    loaded = {
        str(m.get(b"name", m.get("name", b""))).strip("b'").lower()
        for m in await client.module_list()
    }
    return [label for name, label in _MODULES.items() if name not in loaded]


async def check_modules(client: "Redis") -> None:
    """Raise `RedisModulesMissing` naming what is missing and what to run instead."""
    if missing := await _missing_modules(client):
        raise RedisModulesMissing(
            f"the Redis server has no {' and no '.join(missing)} module, which the stock-format "
            "checkpointer needs: run Redis 8 (docker run -p 6379:6379 redis:8), Redis Stack, or "
            "Valkey with the ReJSON and RediSearch modules loaded"
        )


# The stock saver's index of checkpoint documents (`langgraph.checkpoint.redis.base`).
LEGACY_INDEX = "checkpoint"


async def legacy_reader(client: "Redis") -> "ConformingRedisSaver | None":
    """A saver for the stock-format threads on the server, or None when it holds none.

    Decided once, when the service opens its stores: the server has the modules, the
    stock saver's index, and documents in it.
    """
    if await _missing_modules(client):
        return None
    command = cast(Callable[..., Awaitable[Any]], client.execute_command)
    try:
        info = await command("FT.INFO", LEGACY_INDEX)
    except ResponseError:  # no such index
        return None
    fields: dict[Any, Any] = dict(zip(info[::2], info[1::2], strict=True))
    if int(fields.get(b"num_docs", fields.get("num_docs", 0))) == 0:
        return None
    saver = ConformingRedisSaver(redis_client=client)
    saver.serde = redis_serializer()
    await saver.asetup()
    return saver


class ConformingRedisSaver(AsyncRedisSaver):
    """`AsyncRedisSaver` with `alist`/`aprune` that follow the conformance suite.

    Its `aget_tuple` also needs 2-3 round trips instead of 4-5 (`_aget_tuple_pipelined`).
    """

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes; a cancelled task's are not kept (`kept_writes`)."""
        if kept := kept_writes(writes):
            await super().aput_writes(config, kept, task_id, task_path)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint, its pending writes and the parent's pending sends."""
        if self.ttl_config or self.cluster_mode or self._key_registry is None:
            return await super().aget_tuple(config)  # the cases the fast path leaves out
        return await self._aget_tuple_pipelined(config)

    async def _aget_tuple_pipelined(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The stock reads in two pipelines, each waiting on the one before.

        First the document with its write keys, then the writes with the parent's write
        keys. The stock saver reads the document twice (the second time for channel values
        it already has) and asks ZCARD before each ZRANGE.
        """
        configurable = config["configurable"]
        thread_id = configurable["thread_id"]
        namespace = configurable.get("checkpoint_ns", "")
        located = await self._locate(thread_id, namespace, get_checkpoint_id(config))
        if located is None:
            return None
        key, checkpoint_id = located
        write_keys_of = CheckpointKeyRegistry.make_write_keys_zset_key
        pipe = self._redis.pipeline(transaction=False)
        pipe.json().get(key)
        pipe.zrange(write_keys_of(thread_id, namespace, checkpoint_id), 0, -1)
        document, write_keys = await pipe.execute()
        if not document:
            return None
        parent_id = from_storage_safe_id(document.get("parent_checkpoint_id", ""))
        pipe = self._redis.pipeline(transaction=False)
        for write_key in write_keys:
            pipe.json().get(write_key)
        if parent_id:
            pipe.zrange(write_keys_of(thread_id, namespace, parent_id), 0, -1)
        results = await pipe.execute()
        writes, parent_keys = results[: len(write_keys)], results[len(write_keys) :]
        sends = await self._pending_sends(parent_keys[0] if parent_keys else [])
        raw = document["checkpoint"]
        values = self._recursive_deserialize(raw.get("channel_values", {}))
        own = {"thread_id": thread_id, "checkpoint_ns": namespace}
        return CheckpointTuple(
            config={"configurable": {**own, "checkpoint_id": checkpoint_id}},
            checkpoint=self._load_checkpoint(raw, values, sends),
            metadata=_metadata(document),  # type: ignore[arg-type]
            parent_config={"configurable": {**own, "checkpoint_id": parent_id}}
            if parent_id
            else None,
            pending_writes=BaseRedisSaver._load_writes(self.serde, _by_task(writes)),
        )

    async def _locate(
        self, thread_id: str, namespace: str, checkpoint_id: str | None
    ) -> tuple[str, str] | None:
        """The key and id of the checkpoint asked for (the latest when none is named)."""
        if checkpoint_id and checkpoint_id != EMPTY_ID_SENTINEL:
            return self._make_redis_checkpoint_key_cached(
                thread_id, namespace, checkpoint_id
            ), checkpoint_id
        pointer = await self._redis.get(
            self._make_redis_checkpoint_latest_key(thread_id, namespace)
        )
        if pointer is None:
            return None
        key = pointer.decode() if isinstance(pointer, bytes) else pointer
        # The pointer holds the checkpoint's key, which ends with the checkpoint id.
        return key, from_storage_safe_id(key.rsplit(REDIS_KEY_SEPARATOR, 1)[1])

    async def _pending_sends(self, parent_keys: list[Any]) -> list[tuple[str, Any]]:
        """The parent's writes to TASKS, in order: this checkpoint's pending sends."""
        task_keys = [
            k.decode() if isinstance(k, bytes) else k
            for k in parent_keys
            if TASKS.encode() in (k if isinstance(k, bytes) else k.encode())
        ]
        if not task_keys:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for task_key in task_keys:
            pipe.json().get(task_key)
        found = [w for w in await pipe.execute() if w and w.get("channel") == TASKS]
        found.sort(key=lambda w: (w.get("task_path", ""), w.get("task_id", ""), w.get("idx", 0)))
        return [(w.get("type", ""), w.get("blob", b"")) for w in found]

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 (the base class's name)
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """List newest first; `before`, the root namespace and any metadata key all filter."""
        indexed = {k: v for k, v in (filter or {}).items() if k in _INDEXED_FILTERS}
        other = {k: v for k, v in (filter or {}).items() if k not in _INDEXED_FILTERS}
        namespace = (config or {}).get("configurable", {}).get("checkpoint_ns")
        before_id = get_checkpoint_id(before) if before else None
        exact = not other and namespace is None and before_id is None
        # Post-filtering needs every candidate: the limit applies after it.
        listed = super().alist(config, filter=indexed or None, limit=limit if exact else None)
        count = 0
        async for item in listed:
            configurable = item.config["configurable"]
            if namespace is not None and configurable.get("checkpoint_ns", "") != namespace:
                continue
            # UUIDv6 checkpoint ids sort by time, so "before" is a string comparison.
            if before_id is not None and configurable["checkpoint_id"] >= before_id:
                continue
            if any(item.metadata.get(k) != v for k, v in other.items()):
                continue
            yield item
            count += 1
            if limit is not None and count >= limit:
                return

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
        max_results: int = 10000,
    ) -> None:
        """Prune per namespace; no threads means nothing to do."""
        if not thread_ids:
            return
        await super().aprune(
            thread_ids, strategy=strategy, keep_last=keep_last, max_results=max_results
        )


@asynccontextmanager
async def conforming_redis_saver(url: str) -> AsyncIterator[ConformingRedisSaver]:
    """A set-up stock-format saver on `url`, with our serializer allowlist; modules checked first."""
    client = redis_client(url)
    try:
        await check_modules(client)
        saver = ConformingRedisSaver(redis_client=client)
        saver.serde = redis_serializer()
        await saver.asetup()
        yield saver
    finally:
        await client.aclose()


def _by_task(writes: list[Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Stored writes as the stock loader takes them, keyed by task and index."""
    return {
        (w.get("task_id", ""), str(w.get("idx", 0))): {
            "task_id": w.get("task_id", ""),
            "idx": str(w.get("idx", 0)),
            "channel": w.get("channel", ""),
            "type": w.get("type", ""),
            "blob": w.get("blob", b""),
        }
        for w in writes
        if w
    }


def _metadata(document: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's metadata without the NULs the saver stores for the index."""
    return {
        k.replace("\u0000", ""): v.replace("\u0000", "") if isinstance(v, str) else v
        for k, v in json.loads(document.get("metadata", "{}")).items()
    }
