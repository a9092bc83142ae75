"""Time to a report under a latency model: one member at a time, four at once, the critical path.

The engine, the search provider and the page reader only wait: each call for a delay drawn
from a fixed seed (a search 0.8 s, a page read 0.6 s, a model call its tokens at 20
tokens/s; each delay times U(0.8, 1.2), the same for the same call in every run). The plan
has POINTS investigation points of QUERIES queries each (after the topic's own keyword
query, which every plan leads with), so each point is one member's share. One invocation
runs the same topic with max_parallel_members=1 and =4 on the SQLite checkpointer and
prints their wall times and their research steps', and the critical-path bound of the
4-member run: the longest chain of dependent calls in its own record (the probe search,
the plan, the slowest member's slowest query: search, its page reads, its summary; then
the draft and its review), summed from the delays it drew.

    python bench/time_to_report.py [--points 4] [--queries 2] [--scale 1.0] [--seed 41]
"""

import argparse
import asyncio
import hashlib
import random
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from core.models import ResearchPlan, Review, ReviewScores, SearchResult
from core.options import RunOptions
from core.state import initial_state
from engines.simulated import SleepingEngine
from graph.builder import build_graph
from nodes.context import Deps
from stores.sqlite_saver import GroupCommitSqliteSaver
from stores.sqlite_writer import open_sqlite
from tools.extraction import Page
from tools.search import Depth, SearchHit

TOPIC = "alpha beta gamma delta epsilon zeta eta theta"
POINT_NAMES = TOPIC.split()
ASPECTS = ["origins", "impact", "critics", "legacy", "methods", "sources"]


@dataclass
class Latency:
    """The latency model: per-call delays drawn from a seed, and the log of what was drawn."""

    seed: int
    scale: float
    search_s: float = 0.8
    page_s: float = 0.6
    tokens_per_s: float = 20.0
    tokens: dict[str, int] = field(
        default_factory=lambda: {"plan": 200, "summary": 120, "write": 800, "review": 150}
    )
    drawn: dict[tuple[str, str], float] = field(default_factory=dict)

    def delay(self, kind: str, key: str) -> float:
        """Return (and log) the delay of call `kind` on `key`: the same in every run."""
        base = self.search_s if kind == "search" else self.page_s if kind == "page" else 0.0
        if kind in self.tokens:
            base = self.tokens[kind] / self.tokens_per_s
        jitter = random.Random(f"{self.seed}:{kind}:{key}").uniform(0.8, 1.2)
        seconds = base * jitter * self.scale
        self.drawn[kind, key] = seconds
        return seconds

    async def wait(self, kind: str, key: str) -> None:
        """Wait the delay of one call."""
        await asyncio.sleep(self.delay(kind, key))


def _digest(query: str) -> str:
    return hashlib.sha1(query.encode()).hexdigest()[:10]


class LatencySearch:
    """Waits a search's delay, then returns distinct hits whose URLs name their query."""

    name = "simulated"

    def __init__(self, latency: Latency) -> None:
        self.latency = latency

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        """Wait, then return `max_results` hits."""
        await self.latency.wait("search", query)
        return [
            SearchHit(
                title=f"Result {i} for {query}",
                url=f"https://simulated.invalid/{_digest(query)}/{i}",
                content=f"Finding {i} about {query}.",
                score=1.0 / (i + 1),
            )
            for i in range(max_results)
        ]


class LatencyReader:
    """Waits a page read's delay, then returns a page longer than its snippet."""

    def __init__(self, latency: Latency) -> None:
        self.latency = latency

    async def fetch(self, url: str) -> Page:
        """Wait, then return the page."""
        await self.latency.wait("page", url)
        text = f"The page at {url} says more. " * 20
        return Page(url=url, final_url=url, title=url, text=text)


class LatencyEngine(SleepingEngine):
    """Plans POINTS points of QUERIES queries; each model call waits its tokens' time."""

    def __init__(self, latency: Latency, points: int, queries: int) -> None:
        super().__init__(0.0)
        self.latency = latency
        self.points = POINT_NAMES[:points]
        self.queries = queries

    async def plan(
        self, topic: str, probe: Sequence[SearchResult], feedback: str | None
    ) -> ResearchPlan:
        """Wait a plan's tokens; each point's queries hold its name (one member each)."""
        await self.latency.wait("plan", topic)
        queries = [f"{p} {a}" for p in self.points for a in ASPECTS[: self.queries]]
        return ResearchPlan(
            theme=topic,
            investigation_points=[p.capitalize() for p in self.points],
            search_queries=queries,
            plan_text="latency-model plan",
        )

    async def summarize(self, query: str, sources: Sequence[SearchResult]) -> str:
        """Wait a summary's tokens."""
        await self.latency.wait("summary", query)
        return await super().summarize(query, sources)

    async def write(
        self,
        plan: ResearchPlan,
        sources: Sequence[SearchResult],
        review: Review | None,
        feedback: str | None,
        on_token: Callable[[str], None] | None = None,
    ) -> str:
        """Wait a draft's tokens; write one citing every source."""
        await self.latency.wait("write", plan.theme)
        return await super().write(plan, sources, review, feedback, on_token)

    async def review(
        self, draft: str, plan: ResearchPlan, sources: Sequence[SearchResult]
    ) -> Review:
        """Wait a review's tokens; approve."""
        await self.latency.wait("review", plan.theme)
        scores = ReviewScores(fact_check=1, completeness=1, logic=1, format=1)
        return Review.from_scores(scores, [], None, "write")


@dataclass
class Run:
    """One run's wall time, its research step's time, and its members' record and shares."""

    wall_s: float
    research_s: float
    shares: dict[str, list[str]]
    members_ms: dict[str, float]
    values: dict[str, Any]


async def run_once(
    saver: GroupCommitSqliteSaver, latency: Latency, parallel: int, points: int, queries: int
) -> Run:
    """Run the topic with `parallel` members at once; return its times and record."""
    shares: dict[str, list[str]] = {}

    def progress(name: str, data: dict[str, Any]) -> None:
        if name == "member_started":
            shares[data["member"]] = data["queries"]

    deps = Deps(
        engine=LatencyEngine(latency, points, queries),
        search=LatencySearch(latency),
        reader=LatencyReader(latency),
        pages_per_query=2,
        max_parallel_members=parallel,
        progress=progress,
    )
    graph = build_graph(saver)
    config: RunnableConfig = {
        "configurable": {"thread_id": f"time-to-report-{parallel}-{time.time_ns()}"}
    }
    started = time.perf_counter()
    async for _ in graph.astream(
        initial_state(TOPIC, RunOptions()), config, context=deps, durability="sync"
    ):
        pass
    wall = time.perf_counter() - started
    values = (await graph.aget_state(config)).values
    assert values["report_status"] == "final", values.get("report_status")
    rounds = values["rounds"]
    research = [s for r in rounds for s in r.submissions if s.name == "researcher"]
    members = [s for r in rounds if r.members for s in r.members.submissions]
    return Run(
        wall_s=wall,
        research_s=sum(s.execution_time_ms for s in research) / 1000,
        shares=shares,
        members_ms={s.agent_name: s.execution_time_ms for s in members},
        values=values,
    )


def critical_path(run: Run, latency: Latency) -> tuple[float, float]:
    """Return the run's critical path and its research part, from the delays its calls drew.

    A member runs its queries at once (no more than a searcher's concurrency), each query
    a chain: its search, then its page reads at once, then its summary.
    """
    pages: defaultdict[str, list[float]] = defaultdict(list)
    for (kind, key), seconds in latency.drawn.items():
        if kind == "page":
            pages[key.split("/")[3]].append(seconds)
    drawn = latency.drawn

    def chain(query: str) -> float:
        reads = max(pages.get(_digest(query), [0.0]))
        return drawn["search", query] + reads + drawn["summary", query]

    research = max(max(chain(q) for q in queries) for queries in run.shares.values())
    theme = run.values["task_plan"].theme
    plan = drawn["search", TOPIC] + drawn["plan", TOPIC]
    return plan + research + drawn["write", theme] + drawn["review", theme], research


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


async def main(points: int, queries: int, scale: float, seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with open_sqlite(Path(tmp) / "bench.sqlite", GroupCommitSqliteSaver) as saver:
            # Imports and first compiles, outside the figures.
            await run_once(saver, Latency(seed, 0.001), 4, points, queries)
            one = await run_once(saver, Latency(seed, scale), 1, points, queries)
            latency = Latency(seed, scale)
            four = await run_once(saver, latency, 4, points, queries)
    critical, research_bound = critical_path(four, latency)
    model = Latency(seed, scale)
    tokens = ", ".join(f"{k} {v}" for k, v in model.tokens.items())
    print(
        f"latency model (seed {seed}, scale {scale:g}): search {model.search_s:g} s, page "
        f"{model.page_s:g} s, model {model.tokens_per_s:g} tokens/s ({tokens} tokens), "
        "each x U(0.8, 1.2)"
    )
    plan = four.values["task_plan"]
    sizes = ", ".join(str(len(q)) for q in four.shares.values())
    print(
        f"plan: {len(plan.investigation_points)} points, {len(plan.search_queries)} queries, "
        f"2 pages read per query -> {len(four.shares)} members ({sizes} queries)"
    )
    print(f"{'':34} {'wall s':>8} {'research step s':>16}")
    print(f"{'max_parallel_members=1':34} {one.wall_s:>8.2f} {one.research_s:>16.2f}")
    print(f"{'max_parallel_members=4':34} {four.wall_s:>8.2f} {four.research_s:>16.2f}")
    print(f"{'critical path (4-member record)':34} {critical:>8.2f} {research_bound:>16.2f}")
    slowest = max(four.members_ms.values()) / 1000
    print(f"4-member run: slowest member's recorded time {slowest:.2f} s")
    speedup = one.wall_s / four.wall_s
    over = four.wall_s / critical
    print(
        f"4 members vs 1: wall {speedup:.2f}x (target >= 2.5x: {verdict(speedup >= 2.5)}), "
        f"research step {one.research_s / four.research_s:.2f}x"
    )
    print(f"4-member wall / critical path: {over:.3f} (target <= 1.15: {verdict(over <= 1.15)})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--points", type=int, default=4, help="investigation points (1..8)")
    parser.add_argument("--queries", type=int, default=2, help="queries per point (1..6)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every delay")
    parser.add_argument("--seed", type=int, default=41)
    args = parser.parse_args()
    asyncio.run(main(args.points, args.queries, args.scale, args.seed))
