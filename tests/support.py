"""Helpers shared by the tests."""

import itertools
from pathlib import Path
from typing import Any

import pytest

from core.models import ResearchPlan, SearchResult
from core.options import RunOptions
from core.state import initial_state
from engines.extractive import ExtractiveEngine
from engines.report_markdown import cited_sentences
from graph.builder import ResearchGraph
from nodes.context import Deps
from tools.local_corpus import LocalCorpus
from tools.search import Depth, SearchHit

FIXTURE_CORPUS = Path(__file__).parent / "fixtures" / "corpus"
TOPIC = "history of the printing press"
TAVILY_KEY = "tvly-secret-key-123"
BRAVE_KEY = "brave-secret-key-456"


def _weasyprint_missing() -> str | None:
    """Return why WeasyPrint cannot load here (None: it can)."""
    try:
        import weasyprint  # noqa: F401
    except (ImportError, OSError) as exc:
        return str(exc)
    return None


# The tests that print PDFs (the report as PDF, PDFs to index) need WeasyPrint and Pango.
needs_weasyprint = pytest.mark.skipif(
    _weasyprint_missing() is not None,
    reason="WeasyPrint cannot load Pango, so the tests cannot make PDFs: `apt-get install "
    "libpango-1.0-0 libpangoft2-1.0-0 fonts-dejavu-core fonts-wqy-microhei` "
    "(.ci/run installs them)",
)


def page(title: str, content: str) -> SearchResult:
    """A source with an encyclopaedia-style URL made from its title."""
    return SearchResult(
        title=title, url=f"https://example.org/wiki/{title.replace(' ', '_')}", content=content
    )


async def quoted(theme: str, point: str, *sources: SearchResult) -> list[str]:
    """The cited sentences of an extractive briefing on `theme` with one point."""
    plan = ResearchPlan(theme=theme, investigation_points=[point], search_queries=["x"])
    draft = await ExtractiveEngine().write(plan, list(sources), None, None)
    return [claim for claim, _ in cited_sentences(draft)]


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
