"""What every node receives through LangGraph's runtime context."""

from collections.abc import Awaitable, Callable, Sequence
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
class MemberKind:
    """One kind of member researcher (a `[team]` entry): where it searches, what summarises, its budget.

    Each investigation point of a step is researched by one member of each kind.
    """

    name: str
    agent_type: str  # the team design's agent type: web-search or corpus-search
    search: SearchProvider
    engine: Engine | None = None  # None: the run's
    max_searches: int | None = None  # per member
    max_seconds: float | None = None  # per member
    token_budget: int | None = None  # per member, within its share of the run's


@dataclass(frozen=True, slots=True)
class Deps:
    """Collaborators of a run; built once by the app, swapped freely by tests."""

    engine: Engine
    search: SearchProvider
    search_concurrency: int = 5  # searches at once in a research step, its members together
    # Member researchers of a research step working at once (`nodes.members`).
    max_parallel_members: int = 4
    # The kinds of member (`[team]`); none: one kind, searching with `search`.
    member_kinds: tuple[MemberKind, ...] = ()
    reader: PageReader | None = None
    pages_per_query: int = 2
    # Writes and reviews the partial report when the engine's model refuses to serve the run.
    fallback: Engine = field(default_factory=ExtractiveEngine)
    # Where the run's model calls are recorded (the tools record its searches and reads).
    evidence: ModelCallSink | None = None
    # Where progress events go as nodes tell them (name, payload); None: the custom stream only.
    progress: Callable[[str, dict[str, Any]], None] | None = None
    # Whether the run was asked to pause: members whose turn comes then do not start.
    pause_asked: Callable[[], Awaitable[bool]] | None = None

    def kinds(self) -> tuple[MemberKind, ...]:
        """Return the kinds of member: the configured ones, else one that searches with `search`."""
        if self.member_kinds:
            return self.member_kinds
        name = self.search.name
        return (
            MemberKind(name, "corpus-search" if name == "local" else "web-search", self.search),
        )
