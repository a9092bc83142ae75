"""Several search providers as one: results merged by rank and de-duplicated by URL."""

import asyncio
import logging
from collections.abc import Sequence
from itertools import chain, zip_longest

from core.urls import normalize_url
from tools.search import Depth, SearchHit, SearchProvider

logger = logging.getLogger(__name__)


def by_rank(lists: Sequence[Sequence[SearchHit]]) -> list[SearchHit]:
    """Interleave ranked lists rank by rank: each one's first, then each one's second, ..."""
    return [hit for hit in chain.from_iterable(zip_longest(*lists)) if hit is not None]


class CombinedProvider:
    """Query every provider at once; one provider failing only loses its own results."""

    def __init__(self, providers: Sequence[SearchProvider]) -> None:
        if not providers:
            raise ValueError("CombinedProvider needs at least one provider")
        self.providers = list(providers)
        self.name = "+".join(p.name for p in self.providers)

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        """Interleave the providers' hits rank by rank; raise only if every provider failed."""
        outcomes = await asyncio.gather(
            *(p.search(query, max_results, depth) for p in self.providers), return_exceptions=True
        )
        lists: list[list[SearchHit]] = []
        errors: list[BaseException] = []
        for provider, outcome in zip(self.providers, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                logger.warning("%s failed for %r: %s", provider.name, query, type(outcome).__name__)
                errors.append(outcome)
            else:
                lists.append(outcome)
        if not lists:
            raise errors[0]
        merged: dict[str, SearchHit] = {}
        for hit in by_rank(lists):
            merged.setdefault(normalize_url(hit.url), hit)
        return list(merged.values())[:max_results]
