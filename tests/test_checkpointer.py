import asyncio
import sqlite3
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from graph.builder import build_graph
from graph.checkpointer import GroupCommitSqliteSaver, serializer, sqlite_saver
from nodes.context import Deps

from .support import run_graph, start


@checkpointer_test(name="GroupCommitSqliteSaver")
async def group_commit_saver() -> AsyncIterator[GroupCommitSqliteSaver]:
    with tempfile.TemporaryDirectory() as tmp:
        async with sqlite_saver(Path(tmp) / "conformance.sqlite") as saver:
            yield saver


async def test_the_sqlite_saver_passes_the_langgraph_conformance_suite() -> None:
    report = await validate(group_commit_saver)
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert report.passed_all(), failures
    assert sum(r.tests_passed for r in report.results.values()) >= 50


async def test_checkpoints_written_by_group_commit_read_back_with_the_stock_saver(
    tmp_path: Path, deps: Deps
) -> None:
    path = tmp_path / "c.sqlite"
    async with sqlite_saver(path) as saver:
        values = await run_graph(build_graph(saver), deps, "t", start())
    async with AsyncSqliteSaver.from_conn_string(str(path)) as stock:
        stock.serde = serializer()
        snapshot = await build_graph(stock).aget_state({"configurable": {"thread_id": "t"}})
    assert snapshot.values["final_report"] == values["final_report"]
    assert snapshot.next == ()


async def test_concurrent_runs_all_reach_the_file(tmp_path: Path, deps: Deps) -> None:
    path = tmp_path / "c.sqlite"
    async with sqlite_saver(path) as saver:
        graph = build_graph(saver)
        await asyncio.gather(*(run_graph(graph, deps, f"run-{i}", start()) for i in range(8)))
    async with sqlite_saver(path) as reopened:
        graph = build_graph(reopened)
        for i in range(8):
            snapshot = await graph.aget_state({"configurable": {"thread_id": f"run-{i}"}})
            assert snapshot.values["final_report"], f"run-{i} lost its checkpoints"


async def test_a_failed_transaction_reaches_every_waiting_writer(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    async with sqlite_saver(path) as saver:
        with sqlite3.connect(path) as other:
            other.execute("DROP TABLE writes")
        config = {"configurable": {"thread_id": "x", "checkpoint_ns": "", "checkpoint_id": "1"}}
        with pytest.raises(Exception, match="no such table"):
            await saver.aput_writes(config, [("channel", 1)], "task")  # type: ignore[arg-type]
