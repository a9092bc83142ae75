"""An engine that only waits: measures the graph's overhead without any real work."""

import asyncio
from collections.abc import Callable, Sequence

from core.models import ResearchPlan, Review, ReviewScores, RoutingDecision, SearchResult
from engines.base import Progress


class SleepingEngine:
    """Sleeps a fixed latency in write and review; its drafts always pass.

    With `SleepingSearchProvider`, every node of a run waits once.
    """

    name = "simulated"
    description = "simulated (sleeps instead of thinking; for benchmarks)"

    @property
    def models(self) -> dict[str, str]:
        """No model."""
        return {}

    def __init__(self, latency_s: float) -> None:
        self._latency_s = latency_s

    async def plan(
        self, topic: str, probe: Sequence[SearchResult], feedback: str | None
    ) -> ResearchPlan:
        """Plan one point and one query; no sleep, as the supervisor's probe search waited."""
        return ResearchPlan(
            theme=topic[:300],
            investigation_points=[topic[:300]],
            search_queries=[topic[:400]],
            plan_text="simulated plan",
        )

    async def refine_queries(
        self,
        plan: ResearchPlan,
        sources: Sequence[SearchResult],
        done: Sequence[str],
        review: Review | None,
    ) -> list[str]:
        """Return no queries: nothing further to search."""
        return []

    async def decide(self, progress: Progress) -> RoutingDecision:
        """Finish, always."""
        return RoutingDecision(action="end", reasoning="simulated")

    async def summarize(self, query: str, sources: Sequence[SearchResult]) -> str:
        """Count the results."""
        return f"{len(sources)} results for {query}"

    async def write(
        self,
        plan: ResearchPlan,
        sources: Sequence[SearchResult],
        review: Review | None,
        feedback: str | None,
        on_token: Callable[[str], None] | None = None,
    ) -> str:
        """Write a well-formed report citing every source."""
        await asyncio.sleep(self._latency_s)
        claims = " ".join(f"{s.content}[^{i}]" for i, s in enumerate(sources, start=1))
        references = "\n".join(
            f"[^{i}]: [{s.title}]({s.url})" for i, s in enumerate(sources, start=1)
        )
        return f"# {plan.theme}\n\n## Executive Summary\n\n{claims}\n\n## Key Findings\n\n{claims}\n\n## Detailed Analysis\n\n{claims}\n\n## References\n\n{references}\n"

    async def review(
        self, draft: str, plan: ResearchPlan, sources: Sequence[SearchResult]
    ) -> Review:
        """Approve the draft."""
        await asyncio.sleep(self._latency_s)
        return Review.from_scores(
            ReviewScores(fact_check=1, completeness=1, logic=1, format=1), [], None, "write"
        )
