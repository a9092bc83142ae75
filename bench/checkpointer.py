"""Checkpoint latency of our four savers on one workload, and the Redis savers' round trips.

Savers: memory (`memory_saver()`), sqlite (`sqlite_saver` on a temp file), redis-stock
(`AsyncRedisSaver` of langgraph-checkpoint-redis, `asetup()`, with our `redis_serializer()`,
so only the saver code differs) and redis-ours (`redis_saver(url)`: `ConformingRedisSaver`).
Both Redis savers talk to one throwaway valkey-server with the JSON and Search modules
(tests/redis_server.py) on loopback; each saver writes its own threads.

Workload: research threads as LangGraph checkpoints them. Step n of a thread is one node of
the supervisor -> researcher -> writer -> reviewer cycle: a checkpoint holding every
channel value (topic, RunOptions, a ResearchPlan, 10 SearchResults of ~1,200 chars, the
queries, a ~3,000-char draft, Usage, counters, a branch channel), `new_versions` for the
channels that node changed, metadata {"source": "loop", "step": n, "parents": {}}, then
two pending writes of the next task. Per step and saver, timed one by one:

- aput             (parent config -> new checkpoint, with new_versions)
- aput_writes      (2 writes against the new checkpoint)
- aget_tuple latest  (config with thread_id only: what starts every run)
- aget_tuple by id   (the previous checkpoint of the thread, by checkpoint_id)

Rounds go thread by thread (round r: thread r % threads), the savers interleaved within
each round, order rotated per round, so they share the machine's noise. Then `alist` of
whole 20-checkpoint histories, and for the Redis savers the round trips of each operation
(counted by wrapping redis-py's `Redis.execute_command` and `Pipeline.execute`: a
pipeline is one round trip), a cProfile of aput, and a pipelined aput sketched here (not
a saver we ship) to size what pipelining would save. Figures only.

    python bench/checkpointer.py [--steps 500] [--threads 50] [--history 20] [--quick]
"""

import argparse
import asyncio
import contextlib
import cProfile
import importlib.metadata
import math
import pstats
import random
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    copy_checkpoint,
    empty_checkpoint,
)
from langgraph.checkpoint.redis.aio import AsyncRedisSaver
from langgraph.checkpoint.redis.util import to_storage_safe_id, to_storage_safe_str
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from graph.checkpointer import memory_saver, sqlite_saver
from graph.models import NodeUsage, ResearchPlan, RunOptions, SearchResult, Usage
from graph.redis_saver import redis_saver, redis_serializer

# `python bench/checkpointer.py` puts bench/ first on sys.path, not the repository root, and
# `tests` is not an installed package: put the root on the path to reuse the test server.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.redis_server import redis_server  # noqa: E402

SAVERS = ("memory", "sqlite", "redis-stock", "redis-ours")
REDIS_SAVERS = ("redis-stock", "redis-ours")
OPS = ("aput", "aput_writes", "aget_tuple latest", "aget_tuple by id")
NODES = ("supervisor", "researcher", "writer", "reviewer")
SOURCES, SOURCE_CHARS, DRAFT_CHARS = 10, 1_200, 3_000
QUICK_STEPS, QUICK_THREADS, QUICK_HISTORY_THREADS, QUICK_PROFILE = 100, 10, 3, 50
WARM_UP_STEPS = 12  # one warm-up thread per saver: imports, first index use, connections
TRACE_STEPS = 8  # steps whose Redis round trips are counted, per Redis saver

# -- the workload ---------------------------------------------------------------------------

WORDS = (
    "printing press movable type Mainz Venice guild merchants paper mills ink workshop "
    "edition Latin vernacular bible scholars university council privilege apprentices "
    "woodcut octavo inventory river trade historians estimate cost generation"
).split()


def prose(rng: random.Random, chars: int) -> str:
    """Sentences of plausible words, about `chars` long."""
    sentences: list[str] = []
    while sum(len(s) + 1 for s in sentences) < chars:
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 18))]
        sentences.append(" ".join(words).capitalize() + f" in {rng.randint(1440, 1560)}.")
    return " ".join(sentences)


def search_results(rng: random.Random, batch: int) -> list[SearchResult]:
    """One researcher step's sources: 10 results of ~1,200 chars."""
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
            seconds=rng.uniform(0.5, 9.0),
            requests=step // 4 + 1,
            prompt_tokens=rng.randint(500, 9000),
            completion_tokens=rng.randint(100, 2000),
            cost_usd=rng.uniform(0.0001, 0.01),
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


def thread_steps(seed: int, count: int) -> list[Step]:
    """`count` consecutive checkpoints of one research thread (deterministic but for ids)."""
    rng = random.Random(seed)
    versions: dict[str, str] = {}
    values: dict[str, Any] = {}
    seen: dict[str, dict[str, str]] = {}
    steps: list[Step] = []
    saver = memory_saver()  # only for get_next_version (the format every saver here uses)
    previous = empty_checkpoint()
    for n in range(count):
        node = NODES[n % len(NODES)]
        nxt = NODES[(n + 1) % len(NODES)]
        changed: dict[str, Any] = {"usage": usage(rng, n), f"branch:to:{nxt}": None}
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
                    investigation_points=["Origins", "Spread across Europe", "Effects"],
                    search_queries=[f"printing press {w}" for w in ("origins", "spread")],
                    plan_text=prose(rng, 400),
                )
        elif node == "researcher":
            changed["research_data"] = search_results(rng, n)
            changed["queries_done"] = [*values.get("queries_done", []), f"query {n}"]
            changed["iteration_count"] = values.get("iteration_count", 0) + 1
        elif node == "writer":
            changed["current_draft"] = prose(rng, DRAFT_CHARS)
            changed["iteration_count"] = values.get("iteration_count", 0) + 1
        else:
            changed["feedback"] = prose(rng, 300)
            changed["next_action"] = "write"
        values = {k: v for k, v in values.items() if not k.startswith("branch:to:")} | changed
        new_versions = {ch: saver.get_next_version(versions.get(ch), None) for ch in changed}
        versions |= new_versions
        seen[node] = {f"branch:to:{node}": versions.get(f"branch:to:{node}", "")}
        checkpoint = empty_checkpoint()
        checkpoint.update(
            id=str(uuid.uuid6(clock_seq=n)) if hasattr(uuid, "uuid6") else previous_id(n),
            channel_values=dict(values),
            channel_versions=dict(versions),
            versions_seen={k: dict(v) for k, v in seen.items()},
            updated_channels=sorted(changed),
        )
        previous = checkpoint
        task_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        writes = [("usage", usage(rng, n + 1)), ("next_action", rng.choice(["write", "end"]))]
        steps.append(
            Step(previous, {"source": "loop", "step": n, "parents": {}}, new_versions, writes, task_id)
        )
    return steps


def previous_id(n: int) -> str:
    """A time-ordered checkpoint id (LangGraph's uuid6), for Pythons without uuid.uuid6."""
    from langgraph.checkpoint.base.id import uuid6

    return str(uuid6(clock_seq=n))
