"""What every node receives through LangGraph's runtime context."""

from dataclasses import dataclass

from engines.base import Engine
from tools.search import SearchProvider


@dataclass(frozen=True, slots=True)
class Deps:
    """Collaborators of a run; built once by the app, swapped freely by tests."""

    engine: Engine
    search: SearchProvider
    search_concurrency: int = 5
