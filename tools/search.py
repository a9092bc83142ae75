"""The one interface every search provider implements, and the shape of its results."""

from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

Depth = Literal["basic", "advanced"]


class SearchHit(BaseModel):
    """One search result, the same shape from every provider."""

    title: str
    url: str
    content: str
    score: float = Field(0.0, ge=0.0)
    published_date: str | None = None
    # An uploaded document's passage: the file it came from, and its page (a PDF's).
    document: str | None = None
    page: int | None = None


class SearchError(Exception):
    """A search failed; the researcher records it and goes on."""


@runtime_checkable
class SearchProvider(Protocol):
    """Anything that turns a query into ranked hits."""

    name: str

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        """Return at most `max_results` hits for `query`, best first.

        `depth="advanced"` digs deeper where the provider can, at a higher cost. A failure
        raises `ProviderError`, whose type says whether a retry may help.
        """
        ...
