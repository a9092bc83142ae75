"""Turn a provider's hits into the sources the state keeps."""

from collections.abc import Sequence

from core.models import SearchResult
from tools.search import SearchHit


def to_sources(
    hits: Sequence[SearchHit], provider: str, query: str | None = None
) -> list[SearchResult]:
    """Return sources for `hits`, remembering the provider and the query that found them."""
    return [
        SearchResult(
            title=h.title,
            url=h.url,
            content=h.content,
            source=provider,
            published_date=h.published_date,
            relevance_score=h.score,
            query=query,
        )
        for h in hits
    ]
