"""How much the graph and its checkpointer add to a run whose work is only waiting.

Each run visits supervisor, researcher, writer and reviewer once, and each waits
LATENCY (a simulated search, draft or review), so the critical path is 4 x LATENCY.
N runs go at once in one process, with InMemorySaver and with the SQLite saver.

    python bench/graph_overhead.py [--latency-ms 50] [--runs 1,50,200]
"""

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver

from app.heap import freeze_heap
from core.options import RunOptions
from core.state import initial_state
from engines.simulated import SleepingEngine
from graph.builder import build_graph
from nodes.context import Deps
from stores.checkpointer import memory_saver
from stores.sqlite_saver import GroupCommitSqliteSaver
from stores.sqlite_writer import open_sqlite
from tools.simulated import SleepingSearchProvider

NODES_ON_PATH = 4


async def run_batch(
    saver: BaseCheckpointSaver[str], n: int, latency_s: float, tag: str
) -> tuple[float, float]:
    """Run `n` research threads at once; return (wall seconds, CPU seconds)."""
    graph = build_graph(saver)
    deps = Deps(engine=SleepingEngine(latency_s), search=SleepingSearchProvider(latency_s))
    options = RunOptions(min_sources=5, max_results=5)

    async def one(i: int) -> None:
        config = {"configurable": {"thread_id": f"{tag}-{n}-{i}"}}
        result = await graph.ainvoke(initial_state(f"topic {i}", options), config, context=deps)
        assert result["final_report"], "a run ended without a report"

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - wall, time.process_time() - cpu


async def main(latency_ms: float, sizes: list[int]) -> None:
    latency = latency_ms / 1000
    critical = NODES_ON_PATH * latency
    print(f"critical path {critical * 1000:.0f} ms ({NODES_ON_PATH} nodes x {latency_ms:.0f} ms)")
    print(f"{'N':>5} {'saver':>7} {'wall s':>8} {'wall/crit':>9} {'runs/s':>8} {'CPU ms/run':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        async with open_sqlite(Path(tmp) / "bench.sqlite", GroupCommitSqliteSaver) as sqlite:
            await run_batch(memory_saver(), 2, latency, "warm")  # imports and first compile
            for n in sizes:
                rates = {}
                for name, saver in (("memory", memory_saver()), ("sqlite", sqlite)):
                    wall, cpu = await run_batch(saver, n, latency, name)
                    rates[name] = n / wall
                    print(
                        f"{n:>5} {name:>7} {wall:>8.3f} {wall / critical:>9.2f} {n / wall:>8.1f} {cpu / n * 1000:>10.1f}"
                    )
                print(f"{n:>5} sqlite/memory runs/s ratio: {rates['sqlite'] / rates['memory']:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--runs", default="1,50,200")
    args = parser.parse_args()
    freeze_heap()  # as the service does after its start-up
    asyncio.run(main(args.latency_ms, [int(n) for n in args.runs.split(",")]))
