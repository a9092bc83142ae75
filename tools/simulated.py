"""A provider that only waits, for benchmarks of the graph's own overhead."""

import asyncio
import hashlib

from tools.search import Depth, SearchHit, SearchProvider

# A search snippet or a read page holds a few hundred words: state of a realistic size
# is what makes checkpoints and events cost what they cost in a real run.
_CONTENT_CHARS = 1200


def _filler(sentence: str) -> str:
    return " ".join([sentence] * (_CONTENT_CHARS // (len(sentence) + 1) + 1))[:_CONTENT_CHARS]


class SleepingSearchProvider:
    """Sleeps a fixed latency, then returns distinct synthetic hits."""

    name = "simulated"

    def __init__(self, latency_s: float) -> None:
        self._latency_s = latency_s

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        """Wait, then return `max_results` hits whose URLs are unique per query."""
        await asyncio.sleep(self._latency_s)
        digest = hashlib.sha1(query.encode()).hexdigest()[:10]
        return [
            SearchHit(
                title=f"Result {i} for {query}",
                url=f"https://simulated.invalid/{digest}/{i}",
                content=_filler(f"Simulated finding {i} about {query}."),
                score=1.0 / (i + 1),
            )
            for i in range(max_results)
        ]


class DelayedSearchProvider:
    """Wraps a real provider and adds latency, to make a run slow enough to interrupt."""

    def __init__(self, inner: SearchProvider, latency_s: float) -> None:
        self._inner = inner
        self._latency_s = latency_s
        self.name = inner.name

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        """Wait, then delegate."""
        await asyncio.sleep(self._latency_s)
        return await self._inner.search(query, max_results, depth)
