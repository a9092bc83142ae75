"""Progress told while a step works: each query's findings as it finishes, in query order."""

import asyncio
from typing import Any

from engines.extractive import ExtractiveEngine
from graph.builder import ResearchGraph
from nodes.context import Deps
from tools.local_corpus import LocalCorpus
from tools.search import Depth, SearchHit

from .support import run_graph, start

# A safety net against a hang (a step that told nothing until it ended), not a timing.
TIMEOUT_S = 30.0


class HeldSearch:
    """Once `holding`, answers one query at once and holds every other until `release`."""

    name = "held"

    def __init__(self, inner: LocalCorpus) -> None:
        self.inner = inner
        self.holding = False
        self.release = asyncio.Event()
        self.answered = 0

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        if self.holding:
            if self.answered > 0:
                await self.release.wait()
            self.answered += 1
        return await self.inner.search(query, max_results, depth)


async def test_a_query_is_told_as_it_finishes_while_the_others_still_search(
    graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    search = HeldSearch(corpus)
    told: list[tuple[str, dict[str, Any]]] = []
    before_release: list[str] = []

    def progress(name: str, data: dict[str, Any]) -> None:
        told.append((name, data))
        if (name, data.get("node")) == ("node_started", "researcher"):
            search.holding = True
        if name in ("source", "note") and not search.release.is_set():
            before_release.append(name)
            if name == "note":  # the first query's findings are out: let the rest finish
                search.release.set()

    deps = Deps(engine=ExtractiveEngine(), search=search, progress=progress)
    values = await asyncio.wait_for(run_graph(graph, deps, "t-progress", start()), TIMEOUT_S)
    assert "note" in before_release, "nothing was told until the step ended"
    # Told in the order the queries ran, as the notes kept in the state say.
    notes = [data for name, data in told if name == "note"]
    assert [n["query"] for n in notes] == [n.query for n in values["notes"]]
    assert [n["step_no"] for n in notes] == list(range(1, len(notes) + 1))
    # Each source once, and every one the run kept.
    urls = [data["url"] for name, data in told if name == "source"]
    assert len(urls) == len(set(urls)) == len(values["research_data"])
    # Each step announced: started, then finished, in turn.
    nodes = [(name, data["node"]) for name, data in told if name.startswith("node_")]
    assert nodes[0] == ("node_started", "supervisor")
    assert all(a[0] != b[0] for a, b in zip(nodes, nodes[1:], strict=False))
