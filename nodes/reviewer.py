"""Reviewer: score the current draft and attach the review to it."""

import time
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from graph.routing import REVIEWER
from graph.state import ResearchState
from nodes.accounting import spent
from nodes.context import Deps


async def reviewer(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Review the latest draft; its verdict decides the next step."""
    started = time.perf_counter()
    plan = state.get("task_plan")
    drafts = state.get("drafts", [])
    if plan is None or not drafts:
        raise ValueError("the reviewer needs a plan and a draft")
    review = await runtime.context.engine.review(
        drafts[-1].markdown, plan, state.get("research_data", [])
    )
    runtime.stream_writer(
        {
            "event": "review",
            "version": drafts[-1].version,
            **review.model_dump(mode="json", include={"approved", "overall_score", "scores"}),
        }
    )
    verdict = "approved" if review.approved else f"needs work ({review.suggested_action})"
    return {
        "review": review,
        "feedback": review.feedback,
        "drafts": [drafts[-1].model_copy(update={"review": review})],
        "next_action": review.suggested_action,
        "iteration_count": state.get("iteration_count", 0) + 1,
        "messages": [
            AIMessage(
                content=f"Review of draft {drafts[-1].version}: {verdict}, score {review.overall_score:.2f}.",
                name=REVIEWER,
            )
        ],
        "usage": spent(REVIEWER, started, requests=1),
    }
