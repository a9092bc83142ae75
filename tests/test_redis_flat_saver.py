"""The flat Redis checkpointer: plain keys, one round trip per call."""

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from redis.asyncio import Redis

from core.models import ResearchPlan, SearchResult
from graph.builder import build_graph
from nodes.context import Deps
from stores.redis_flat_layout import PREFIX
from stores.redis_flat_saver import FlatRedisSaver, redis_saver

from .redis_server import counting_client, redis_server, round_trips
from .support import run_graph, start


@pytest.fixture(scope="module")
def own_url() -> Iterator[str]:
    """A server of this module's own: the layout test looks at every checkpoint key on it."""
    with redis_server() as url:
        yield url


async def _keys(url: str) -> dict[str, str]:
    client: Redis = Redis.from_url(url, decode_responses=True)
    try:
        names = [k async for k in client.scan_iter(match=f"{PREFIX}*")]
        return {name: await client.type(name) for name in names}
    finally:
        await client.aclose()


async def test_a_whole_run_on_a_server_without_modules(own_url: str, deps: Deps) -> None:
    """Plain hashes, sets and sorted sets; each channel value stored once per version."""
    thread = uuid.uuid4().hex
    async with redis_saver(own_url) as saver:
        graph = build_graph(saver)
        values = await run_graph(graph, deps, thread, start(min_sources=3))
        config = {"configurable": {"thread_id": thread}}
        state = (await graph.aget_state(config)).values
        history = [s async for s in graph.aget_state_history(config)]
    assert state["final_report"] == values["final_report"]
    assert isinstance(state["task_plan"], ResearchPlan)
    assert all(isinstance(s, SearchResult) for s in state["research_data"])
    keys = await _keys(own_url)
    own = {k: t for k, t in keys.items() if f"{{{thread}}}" in k}
    assert set(own.values()) <= {"hash", "set", "zset"}
    assert all(f"{{{thread}}}" in k for k in keys if k != f"{PREFIX}threads")
    client: Redis = Redis.from_url(own_url)
    try:
        fields = await client.hkeys(f"{PREFIX}{{{thread}}}:blobs")
    finally:
        await client.aclose()
    stored = [f for f in fields if f.split(b"\0")[1] == b"research_data"]
    assert 1 <= len(stored) < len(history), "one value per new version, not per checkpoint"


@asynccontextmanager
async def counted_saver(url: str) -> AsyncIterator[FlatRedisSaver]:
    """A saver whose client's connections count the round trips it makes."""
    client = counting_client(url)
    try:
        saver = FlatRedisSaver(client)
        yield saver
        await saver.drain()
    finally:
        await client.aclose()


async def test_each_call_is_one_round_trip(own_url: str) -> None:
    async with counted_saver(own_url) as saver:
        warm = {"configurable": {"thread_id": "warm", "checkpoint_ns": ""}}
        warmed = await saver.aput(warm, empty_checkpoint(), {}, {})  # scripts loaded
        await saver.aput_writes(warmed, [("notes", [])], "task")
        await saver.aget_tuple(warm)
        round_trips()
        config = {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"topic": "t", "notes": ["n"]}
        checkpoint["channel_versions"] = {"topic": "1", "notes": "1"}
        stored = await saver.aput(config, checkpoint, {"step": 0}, {"topic": "1", "notes": "1"})
        assert round_trips() == 1
        await saver.aput_writes(stored, [("notes", ["m"]), ("topic", "u")], "task")
        assert round_trips() == 1
        latest = await saver.aget_tuple(config)
        assert round_trips() == 1
        by_id = await saver.aget_tuple(stored)
        assert round_trips() == 1
    assert latest is not None and latest == by_id
    assert latest.checkpoint["channel_values"] == {"topic": "t", "notes": ["n"]}
    assert [(c, v) for _, c, v in latest.pending_writes or []] == [("notes", ["m"]), ("topic", "u")]
