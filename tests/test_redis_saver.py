"""The Redis checkpointer on a real server: LangGraph's conformance suite and our state types."""

import uuid
from collections.abc import AsyncIterator

import pytest
from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate

from core.models import ResearchPlan, Review, SearchResult
from core.usage import RoundRecord, Usage
from graph.builder import build_graph
from nodes.context import Deps
from stores.redis_flat_saver import FlatRedisSaver, redis_saver

from .support import run_graph, start


async def test_our_saver_passes_the_whole_conformance_suite(redis_url: str) -> None:
    @checkpointer_test(name="FlatRedisSaver")
    async def factory() -> AsyncIterator[FlatRedisSaver]:
        async with redis_saver(redis_url) as saver:
            yield saver

    report = await validate(factory)
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert report.passed_all(), failures
    # Every capability, copy_thread and delete_for_runs included.
    assert sum(r.tests_passed for r in report.results.values()) == 81


async def _saved(saver: FlatRedisSaver, thread: str, namespace: str, step: int) -> dict:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": namespace}}
    checkpoint = empty_checkpoint()
    return await saver.aput(config, checkpoint, {"source": "loop", "step": step, "score": step}, {})


async def _listed(saver: FlatRedisSaver, config: dict, **kwargs: object) -> list[CheckpointTuple]:
    return [t async for t in saver.alist(config, **kwargs)]


@pytest.fixture
async def saver(redis_url: str) -> AsyncIterator[FlatRedisSaver]:
    async with redis_saver(redis_url) as opened:
        yield opened


async def test_list_before_returns_only_older_checkpoints(saver: FlatRedisSaver) -> None:
    thread = uuid.uuid4().hex
    saved = [await _saved(saver, thread, "", step) for step in range(4)]
    older = await _listed(saver, {"configurable": {"thread_id": thread}}, before=saved[2])
    ids = [t.config["configurable"]["checkpoint_id"] for t in older]
    assert ids == [
        saved[1]["configurable"]["checkpoint_id"],
        saved[0]["configurable"]["checkpoint_id"],
    ]
    limited = await _listed(
        saver, {"configurable": {"thread_id": thread}}, before=saved[3], limit=1
    )
    assert [t.config for t in limited] == [saved[2]]


async def test_the_root_namespace_lists_only_root_checkpoints(saver: FlatRedisSaver) -> None:
    thread = uuid.uuid4().hex
    root = await _saved(saver, thread, "", 0)
    await _saved(saver, thread, "child:1", 0)
    listed = await _listed(saver, {"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    assert [t.config for t in listed] == [root]
    everything = await _listed(saver, {"configurable": {"thread_id": thread}})
    assert len(everything) == 2


async def test_metadata_filters_on_any_key(saver: FlatRedisSaver) -> None:
    thread = uuid.uuid4().hex
    for step in range(3):
        await _saved(saver, thread, "", step)
    listed = await _listed(
        saver, {"configurable": {"thread_id": thread}}, filter={"score": 1, "source": "loop"}
    )
    assert [t.metadata["score"] for t in listed] == [1]


async def test_pruning_no_thread_does_nothing(saver: FlatRedisSaver) -> None:
    await saver.aprune([])


async def test_a_whole_run_round_trips_our_state_types(saver: FlatRedisSaver, deps: Deps) -> None:
    graph = build_graph(saver)
    thread = uuid.uuid4().hex
    values = await run_graph(graph, deps, thread, start(min_sources=3))
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread}})
    state = snapshot.values
    assert state["final_report"] == values["final_report"] and snapshot.next == ()
    assert isinstance(state["task_plan"], ResearchPlan)
    assert all(isinstance(s, SearchResult) for s in state["research_data"])
    assert isinstance(state["review"], Review) and isinstance(state["usage"], Usage)
    assert all(isinstance(r, RoundRecord) for r in state["rounds"])
    history = [s async for s in graph.aget_state_history({"configurable": {"thread_id": thread}})]
    assert len(history) > 5
