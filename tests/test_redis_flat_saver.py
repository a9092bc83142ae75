"""The flat Redis checkpointer: plain keys, one round trip per call, old threads still read."""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Command
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from core.models import ResearchPlan, SearchResult
from graph.builder import build_graph
from nodes.context import Deps
from stores.redis_flat_layout import PREFIX
from stores.redis_flat_saver import redis_saver
from stores.redis_saver import conforming_redis_saver

from .redis_server import redis_server
from .support import run_graph, start


@pytest.fixture(scope="module")
def bare_url() -> Iterator[str]:
    """A valkey-server with no module loaded."""
    with redis_server(with_modules=False) as url:
        yield url


async def _keys(url: str) -> dict[str, str]:
    client: Redis = Redis.from_url(url, decode_responses=True)
    try:
        names = [k async for k in client.scan_iter(match=f"{PREFIX}*")]
        return {name: await client.type(name) for name in names}
    finally:
        await client.aclose()


async def test_a_whole_run_on_a_server_without_modules(bare_url: str, deps: Deps) -> None:
    """Plain hashes, sets and sorted sets; each channel value stored once per version."""
    thread = uuid.uuid4().hex
    async with redis_saver(bare_url) as saver:
        assert not saver.reads_stock_format
        graph = build_graph(saver)
        values = await run_graph(graph, deps, thread, start(min_sources=3))
        config = {"configurable": {"thread_id": thread}}
        state = (await graph.aget_state(config)).values
        history = [s async for s in graph.aget_state_history(config)]
    assert state["final_report"] == values["final_report"]
    assert isinstance(state["task_plan"], ResearchPlan)
    assert all(isinstance(s, SearchResult) for s in state["research_data"])
    keys = await _keys(bare_url)
    own = {k: t for k, t in keys.items() if f"{{{thread}}}" in k}
    assert set(own.values()) <= {"hash", "set", "zset"}
    assert all(f"{{{thread}}}" in k for k in keys if k != f"{PREFIX}threads")
    client: Redis = Redis.from_url(bare_url)
    try:
        fields = await client.hkeys(f"{PREFIX}{{{thread}}}:blobs")
    finally:
        await client.aclose()
    stored = [f for f in fields if f.split(b"\0")[1] == b"research_data"]
    assert 1 <= len(stored) < len(history), "one value per new version, not per checkpoint"


class Trips:
    """Counts round trips: single commands (a script is one) and pipelines."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, client: Redis) -> None:
        self.count = 0
        command, execute = client.execute_command, Pipeline.execute

        async def counted_command(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return await command(*args, **kwargs)

        async def counted_execute(pipe: Pipeline, raise_on_error: bool = True) -> Any:
            self.count += 1
            return await execute(pipe, raise_on_error)

        monkeypatch.setattr(client, "execute_command", counted_command)
        monkeypatch.setattr(Pipeline, "execute", counted_execute)

    def take(self) -> int:
        count, self.count = self.count, 0
        return count


async def test_each_call_is_one_round_trip(bare_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with redis_saver(bare_url) as saver:
        warm = {"configurable": {"thread_id": "warm", "checkpoint_ns": ""}}
        warmed = await saver.aput(warm, empty_checkpoint(), {}, {})  # scripts loaded
        await saver.aput_writes(warmed, [("notes", [])], "task")
        await saver.aget_tuple(warm)
        trips = Trips(monkeypatch, saver._redis)
        config = {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"topic": "t", "notes": ["n"]}
        checkpoint["channel_versions"] = {"topic": "1", "notes": "1"}
        stored = await saver.aput(config, checkpoint, {"step": 0}, {"topic": "1", "notes": "1"})
        assert trips.take() == 1
        await saver.aput_writes(stored, [("notes", ["m"]), ("topic", "u")], "task")
        assert trips.take() == 1
        latest = await saver.aget_tuple(config)
        assert trips.take() == 1
        by_id = await saver.aget_tuple(stored)
        assert trips.take() == 1
    assert latest is not None and latest == by_id
    assert latest.checkpoint["channel_values"] == {"topic": "t", "notes": ["n"]}
    assert [(c, v) for _, c, v in latest.pending_writes or []] == [("notes", ["m"]), ("topic", "u")]


async def test_threads_of_the_stock_format_are_read_resumed_and_deleted(deps: Deps) -> None:
    """A thread the stock saver left waiting for approval is finished by the flat saver."""
    thread = uuid.uuid4().hex
    config = {"configurable": {"thread_id": thread}}
    with redis_server() as url:
        async with redis_saver(url) as fresh:
            assert not fresh.reads_stock_format, "no stock index yet: no fallback"
        async with conforming_redis_saver(url) as stock:
            old_graph = build_graph(stock)
            await run_graph(old_graph, deps, thread, start(approval="plan"))
            before = await old_graph.aget_state(config)
            old_history = [s.config async for s in old_graph.aget_state_history(config)]
        assert before.next == ("approve_plan",)
        async with redis_saver(url) as saver:
            assert saver.reads_stock_format
            graph = build_graph(saver)
            read = await graph.aget_state(config)
            assert read.values == before.values and read.next == before.next
            assert [s.config async for s in graph.aget_state_history(config)] == old_history
            values = await run_graph(graph, deps, thread, Command(resume={"decision": "approve"}))
            assert values["final_report"] and values["topic"] == before.values["topic"]
            assert (await graph.aget_state(config)).next == ()
            history = [s async for s in graph.aget_state_history(config)]
            assert len(history) > len(old_history)
            assert [s.config for s in history[-len(old_history) :]] == old_history
            # The topic was written before the resume: only the stock documents held it,
            # and reading it copied it to the flat keys.
            copied = await saver._redis.hkeys(f"{PREFIX}{{{thread}}}:blobs")
            assert any(f.split(b"\0")[1] == b"topic" for f in copied)
            await saver.adelete_thread(thread)
            assert await saver.aget_tuple(config) is None
            assert [t async for t in saver.alist(config)] == []
        assert not [k for k in await _keys(url) if thread in k]
