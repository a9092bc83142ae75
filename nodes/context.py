"""What every node receives through LangGraph's runtime context."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engines.base import Engine
from engines.extractive import ExtractiveEngine
from engines.recording import ModelCall
from tools.extraction import Page
from tools.search import SearchProvider


class PageReader(Protocol):
    """Fetches a page and extracts its main text (the scraper; a fake in tests)."""

    async def fetch(self, url: str) -> Page:
        """Return the page at `url`: its final URL, title and main text.

        Raise `ScrapeError` when it cannot be read; the caller records that and goes on.
        """
        ...


class ModelCallSink(Protocol):
    """Where a run's model calls are kept as its evidence (`service.evidence.RunEvidence`)."""

    def model_calls(self, node: str, calls: Sequence[ModelCall]) -> None:
        """Keep a node step's model requests; never raises."""
        ...


@dataclass(frozen=True, slots=True)
class Deps:
    """Collaborators of a run; built once by the app, swapped freely by tests."""

    engine: Engine
    search: SearchProvider
    search_concurrency: int = 5  # searches at once in a research step, its members together
    # Member researchers of a research step working at once (`nodes.members`).
    max_parallel_members: int = 4
    reader: PageReader | None = None
    pages_per_query: int = 2
    # Writes and reviews the partial report when the engine's model refuses to serve the run.
    fallback: Engine = field(default_factory=ExtractiveEngine)
    # Where the run's model calls are recorded (the tools record its searches and reads).
    evidence: ModelCallSink | None = None
    # Where progress events go as nodes tell them (name, payload); None: the custom stream only.
    progress: Callable[[str, dict[str, Any]], None] | None = None
