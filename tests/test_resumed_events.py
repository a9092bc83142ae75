"""An execution that dies right after a checkpoint write, then resumed: every event once.

The service's Redis stores as an execution uses them (`service.execution`): the saver
writes a thread's checkpoints after the events queued before them (`ordered_by`), events
are keyed by task and place (`nodes.progress`), and the log keeps one event per key. The
saver here stores writes as the service's does until the one a test names: that one is
stored, and then the execution's process is taken as dead: the events it tells from the
start of that write on are lost with it, and it stores nothing more. Another execution
then resumes the thread from what was stored, and the thread's events must read as an
uninterrupted run's, none lost and none twice.
"""

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata

from engines.extractive import ExtractiveEngine
from graph.builder import build_graph
from nodes.context import Deps
from nodes.progress import ExecutionProgress
from service.runner import thread_config
from stores.redis_connection import redis_client
from stores.redis_events import RedisEventLog
from stores.redis_flat_saver import FlatRedisSaver
from tools.local_corpus import LocalCorpus

from .sse import Frame, timeline
from .support import start

# A safety net against a hang, not a timing the test relies on.
TIMEOUT_S = 60.0

# Which write the process dies after: its kind ("put" or "writes"), namespace, channels.
Fatal = Callable[[str, str, Sequence[str]], bool]


class Died(Exception):
    """The execution's process is gone (what it would have done next is not done)."""


class DyingSaver(FlatRedisSaver):
    """The service's Redis saver, in a process that dies right after the `fatal` write."""

    def __init__(self, client: Any, fatal: Fatal | None) -> None:
        super().__init__(client)
        self.fatal = fatal
        self.dead = False
        self.died_after: str | None = None
        self.writes = 0

    async def _stored(self, kind: str, config: RunnableConfig, channels: Sequence[str]) -> None:
        if self.dead:
            raise Died(f"right after {self.died_after}")
        self.writes += 1
        namespace = str(config["configurable"].get("checkpoint_ns", ""))
        if self.fatal is not None and self.fatal(kind, namespace, channels):
            self.dead = True  # its later events die with it; this write is made first
            self.died_after = f"{kind} {namespace} {','.join(channels)}"

    def _end(self) -> None:
        if self.dead:
            raise Died(f"right after {self.died_after}")

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        await self._stored("put", config, [])
        stored = await super().aput(config, checkpoint, metadata, new_versions)
        self._end()
        return stored

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._stored("writes", config, [channel for channel, _ in writes])
        await super().aput_writes(config, writes, task_id, task_path)
        self._end()


async def execute(url: str, corpus: LocalCorpus, thread_id: str, fatal: Fatal | None) -> str | None:
    """Run the thread (from its checkpoint, if it has one) as an execution does.

    Return how it died, None when it stopped by itself.
    """
    client = redis_client(url)
    saver = DyingSaver(client, fatal)
    events = RedisEventLog(client)
    saver.ordered_by(events.ordered)
    graph = build_graph(saver)
    told: list[asyncio.Future[int]] = []

    def publish(name: str, data: dict[str, Any], key: str) -> None:
        if not saver.dead:
            told.append(events.emit(thread_id, name, data, key=key))

    config = thread_config(thread_id)
    payload = None if (await graph.aget_state(config)).values else start()
    deps = Deps(engine=ExtractiveEngine(), search=corpus, progress=ExecutionProgress(publish))
    died = None
    try:
        with events.writing(thread_id):
            try:
                stream = graph.astream(
                    payload, config, context=deps, stream_mode="updates", durability="sync"
                )
                async with asyncio.timeout(TIMEOUT_S):
                    async for _ in stream:
                        pass
            except Died as exc:
                died = str(exc)
            await asyncio.gather(*told, return_exceptions=True)
        await saver.drain()
    finally:
        await events.close()
        await client.aclose()
    return died


async def told(url: str, thread_id: str) -> list[Frame]:
    """The thread's events, as a client reads them."""
    client = redis_client(url)
    log = RedisEventLog(client)
    try:
        stored = await log.read(thread_id)
    finally:
        await log.close()
        await client.aclose()
    assert [e.id for e in stored] == list(range(1, len(stored) + 1)), "every event once"
    frames = []
    for event in stored:
        assert isinstance(event.data, dict)
        frames.append(Frame(event.id, event.name, event.data))
    return frames


def in_research_step(kind: str, channels: set[str]) -> Fatal:
    """The first write of this kind in the research step's subgraph holding these channels."""
    return lambda k, namespace, written: (
        k == kind and namespace.startswith("researcher:") and channels <= set(written)
    )


@pytest.fixture
async def uninterrupted(redis_url: str, corpus: LocalCorpus) -> list[str]:
    """The timeline of a run nothing stopped."""
    assert await execute(redis_url, corpus, "uninterrupted", None) is None
    reference = timeline(await told(redis_url, "uninterrupted"))
    assert any(e.startswith("member_started") for e in reference), "the step has members"
    return reference


@pytest.mark.parametrize(
    ("thread_id", "fatal"),
    [
        # A member's answer is kept: the step resumes with the other members.
        pytest.param("after-a-member", in_research_step("writes", {"members"}), id="member"),
        # Every member's answer and the findings told: the step resumes after them.
        pytest.param("after-the-queries", in_research_step("writes", {"outcomes"}), id="queries"),
        # The subgraph's end is kept, the step's is not: it runs nothing of it again.
        pytest.param(
            "after-the-subgraph", in_research_step("writes", {"update", "events"}), id="subgraph"
        ),
    ],
)
async def test_a_resumed_research_step_tells_every_event_once(
    redis_url: str,
    corpus: LocalCorpus,
    uninterrupted: list[str],
    thread_id: str,
    fatal: Fatal,
) -> None:
    died = await execute(redis_url, corpus, thread_id, fatal)
    assert died is not None, "the execution died where the test says"
    assert await execute(redis_url, corpus, thread_id, None) is None
    assert timeline(await told(redis_url, thread_id)) == uninterrupted, died


@pytest.mark.slow
async def test_an_execution_dead_after_any_of_its_writes_resumes_with_every_event_once(
    redis_url: str, corpus: LocalCorpus, uninterrupted: list[str]
) -> None:
    """Every write of a run, in turn, is the last its first execution makes."""
    number = 0
    while True:
        number += 1
        thread_id = f"dead-after-{number}"
        seen = 0

        def nth(kind: str, namespace: str, channels: Sequence[str], n: int = number) -> bool:
            nonlocal seen
            seen += 1
            return seen == n

        died = await execute(redis_url, corpus, thread_id, nth)
        if died is None:  # the run has fewer writes: each was the last once
            break
        assert await execute(redis_url, corpus, thread_id, None) is None
        assert timeline(await told(redis_url, thread_id)) == uninterrupted, died
    assert number > 20, "the run was cut after each of its writes"
