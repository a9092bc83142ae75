"""Helpers shared by the tests."""

import itertools
from pathlib import Path
from typing import Any

from core.options import RunOptions
from core.state import initial_state
from graph.builder import ResearchGraph
from nodes.context import Deps
from tools.local_corpus import LocalCorpus
from tools.search import Depth, SearchHit

FIXTURE_CORPUS = Path(__file__).parent / "fixtures" / "corpus"
TOPIC = "history of the printing press"
TAVILY_KEY = "tvly-secret-key-123"
BRAVE_KEY = "brave-secret-key-456"


class FlakyProvider:
    """Fails every second search, to prove one failure never kills a run."""

    name = "flaky"

    def __init__(self, inner: LocalCorpus) -> None:
        self.inner = inner
        self.calls = itertools.count()

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        if next(self.calls) % 2 == 1:
            raise ConnectionError(f"search backend refused {query!r}")
        return await self.inner.search(query, max_results, depth)


async def run_graph(
    graph: ResearchGraph, deps: Deps, thread_id: str, payload: Any
) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread_id}}
    async for _ in graph.astream(payload, config, context=deps, stream_mode="updates"):
        pass
    return (await graph.aget_state(config)).values  # type: ignore[no-any-return]


def start(topic: str = TOPIC, **options: Any) -> dict[str, Any]:
    return dict(initial_state(topic, RunOptions(**options)))


class Sleeps:
    """Records retry delays instead of waiting them."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
