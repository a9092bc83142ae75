import asyncio
import contextlib
import sqlite3
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.serde.types import ERROR

from graph.builder import build_graph
from nodes.context import Deps
from stores.redis_flat_saver import redis_saver
from stores.sqlite_saver import GroupCommitSqliteSaver
from stores.sqlite_writer import open_sqlite

from .support import run_graph, start


@checkpointer_test(name="GroupCommitSqliteSaver")
async def group_commit_saver() -> AsyncIterator[GroupCommitSqliteSaver]:
    with tempfile.TemporaryDirectory() as tmp:
        async with open_sqlite(Path(tmp) / "conformance.sqlite", GroupCommitSqliteSaver) as saver:
            yield saver


async def test_the_sqlite_saver_passes_the_langgraph_conformance_suite() -> None:
    report = await validate(group_commit_saver)
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert report.passed_all(), failures
    assert sum(r.tests_passed for r in report.results.values()) >= 50


async def test_a_channel_value_is_stored_once_per_version(tmp_path: Path, deps: Deps) -> None:
    """Checkpoints name versions; the sources are not written again at every step."""
    path = tmp_path / "c.sqlite"
    async with open_sqlite(path, GroupCommitSqliteSaver) as saver:
        graph = build_graph(saver)
        values = await run_graph(graph, deps, "t", start())
        history = [s async for s in graph.aget_state_history({"configurable": {"thread_id": "t"}})]
    with sqlite3.connect(path) as db:
        stored = db.execute(
            "SELECT COUNT(*) FROM checkpoint_blobs WHERE channel = 'research_data'"
        ).fetchone()[0]
    assert 1 <= stored < len(history), "one row per new version, not one per checkpoint"
    assert history[0].values["research_data"] == values["research_data"]


async def test_concurrent_runs_all_reach_the_file(tmp_path: Path, deps: Deps) -> None:
    path = tmp_path / "c.sqlite"
    async with open_sqlite(path, GroupCommitSqliteSaver) as saver:
        graph = build_graph(saver)
        await asyncio.gather(*(run_graph(graph, deps, f"run-{i}", start()) for i in range(8)))
    async with open_sqlite(path, GroupCommitSqliteSaver) as reopened:
        graph = build_graph(reopened)
        for i in range(8):
            snapshot = await graph.aget_state({"configurable": {"thread_id": f"run-{i}"}})
            assert snapshot.values["final_report"], f"run-{i} lost its checkpoints"


async def test_a_failed_transaction_reaches_every_waiting_writer(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    async with open_sqlite(path, GroupCommitSqliteSaver) as saver:
        with sqlite3.connect(path) as other:
            other.execute("DROP TABLE writes")
        config = {"configurable": {"thread_id": "x", "checkpoint_ns": "", "checkpoint_id": "1"}}
        with pytest.raises(Exception, match="no such table"):
            await saver.aput_writes(config, [("channel", 1)], "task")  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_a_cancelled_task_keeps_no_writes_so_it_runs_again_on_resume(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """A node cancelled after its state writes but before its routing (a CLI stopped, a
    service shut down) must run again, not pass on half its output with no next step."""
    async with contextlib.AsyncExitStack() as stack:
        if backend == "sqlite":
            saver: Any = await stack.enter_async_context(
                open_sqlite(tmp_path / "c.sqlite", GroupCommitSqliteSaver)
            )
        else:
            saver = await stack.enter_async_context(
                redis_saver(request.getfixturevalue("redis_url"))
            )
        config = {"configurable": {"thread_id": f"cancelled-{backend}", "checkpoint_ns": ""}}
        stored = await saver.aput(config, empty_checkpoint(), {"source": "loop", "step": 2}, {})
        await saver.aput_writes(
            stored, [("next_action", "write"), (ERROR, asyncio.CancelledError())], "cut"
        )
        await saver.aput_writes(stored, [("notes", ["kept"])], "finished")
        pending = (await saver.aget_tuple(stored)).pending_writes
    assert [(task, channel) for task, channel, _ in pending] == [("finished", "notes")]


async def test_a_checkpoint_holding_the_removed_current_draft_channel_still_loads(
    tmp_path: Path, deps: Deps
) -> None:
    """Threads checkpointed while the state had `current_draft` (a copy of the last draft)."""
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    async with open_sqlite(tmp_path / "c.sqlite", GroupCommitSqliteSaver) as saver:
        graph = build_graph(saver)
        values = await run_graph(graph, deps, "t", start())
        latest = await saver.aget_tuple(config)
        assert latest is not None
        old = latest.checkpoint.copy()
        old["id"] = empty_checkpoint()["id"]  # a newer id: the latest checkpoint now
        old["channel_values"] = {**old["channel_values"], "current_draft": "# an old copy"}
        old["channel_versions"] = {**old["channel_versions"], "current_draft": "9"}
        await saver.aput(latest.config, old, latest.metadata, {"current_draft": "9"})
        snapshot = await graph.aget_state({"configurable": {"thread_id": "t"}})
    assert snapshot.config["configurable"]["checkpoint_id"] == old["id"]
    assert "current_draft" not in snapshot.values
    assert snapshot.values["final_report"] == values["final_report"]
