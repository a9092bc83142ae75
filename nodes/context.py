"""What every node receives through LangGraph's runtime context."""

from dataclasses import dataclass, field
from typing import Protocol

from engines.base import Engine
from engines.extractive import ExtractiveEngine
from tools.extraction import Page
from tools.search import SearchProvider


class PageReader(Protocol):
    """Fetches a page and extracts its main text (the scraper; a fake in tests)."""

    async def fetch(self, url: str) -> Page:
        """Fetch the page at `url` and extract its main text.

        Returns:
            The page: its final URL (after redirects), title and main text.

        Raises:
            ScrapeError: the page could not be read (refused address, too large, not
                HTML or text, timeout, HTTP error); the caller records it and goes on.
        """
        ...


@dataclass(frozen=True, slots=True)
class Deps:
    """Collaborators of a run; built once by the app, swapped freely by tests."""

    engine: Engine
    search: SearchProvider
    search_concurrency: int = 5
    reader: PageReader | None = None
    pages_per_query: int = 2
    # Writes and reviews the partial report when the engine's model refuses to serve the run.
    fallback: Engine = field(default_factory=ExtractiveEngine)
