"""Reviewer: verify the draft's citations, score it, and attach the review to it.

The review joins its draft by version (`core.state.merge_drafts`): the draft's text is
not written or streamed again.
"""

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from core.models import CitationCheck, DraftReview, Review, ReviewIssue
from core.state import ResearchState
from core.steps import REVIEWER
from engines.report_markdown import strip_unknown_footnotes
from nodes.accounting import accounted, unless_refused
from nodes.context import Deps
from nodes.progress import tell

# What the `review` event shows of the review.
SHOWN = {"approved", "overall_score", "scores", "citations"}


def _with_removed(review: Review, removed: list[int]) -> Review:
    """Count the footnotes removed before the review as fact-check issues of this review."""
    if not removed:
        return review
    issues = [
        ReviewIssue(
            type="fact_check",
            severity="high",
            description=f"Footnote [^{n}] named a source the run never collected; it was removed.",
            location="References",
        )
        for n in removed
    ]
    citations = (review.citations or CitationCheck()).model_copy(
        update={"unknown_removed": len(removed)}
    )
    return review.model_copy(update={"issues": [*issues, *review.issues], "citations": citations})


@accounted(REVIEWER)
async def reviewer(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Review the latest draft (every engine: unknown footnotes are removed first)."""
    plan = state.get("task_plan")
    drafts = state.get("drafts", [])
    if plan is None or not drafts:
        raise ValueError("the reviewer needs a plan and a draft")
    deps, latest = runtime.context, drafts[-1]
    sources = state.get("research_data", [])
    markdown, removed = strip_unknown_footnotes(latest.markdown, sources)
    review, halted = await unless_refused(
        "review",
        deps.engine.review(markdown, plan, sources),
        lambda: deps.fallback.review(markdown, plan, sources),
    )
    review = _with_removed(review, removed)
    shown = review.model_dump(mode="json", include=SHOWN)
    tell(runtime, {"event": "review", "version": latest.version, **shown})
    verdict = "approved" if review.approved else f"needs work ({review.suggested_action})"
    said = f"Review of draft {latest.version}: {verdict}, score {review.overall_score:.2f}."
    reviewed = DraftReview(
        version=latest.version, review=review, markdown=markdown if removed else None
    )
    update: dict[str, Any] = {
        "review": review,
        "feedback": review.feedback,
        "drafts": [reviewed],
        "next_action": review.suggested_action,
        "iteration_count": state.get("iteration_count", 0) + 1,
        "messages": [AIMessage(content=said, name=REVIEWER)],
    }
    if halted:
        update["halted"] = halted
    return update
