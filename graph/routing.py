"""Routing: pure functions of the state, one per decision point of the graph."""

from typing import Literal

from core.budget import budget_reason
from core.models import Action
from core.state import ResearchState
from core.steps import APPROVE_PLAN, FINALIZE, RESEARCHER, REVIEWER, WRITER

_TARGET: dict[Action, Literal["researcher", "writer", "reviewer", "finalize"]] = {
    "research": RESEARCHER,
    "write": WRITER,
    "review": REVIEWER,
    "end": FINALIZE,
}


def route_supervisor(
    state: ResearchState,
) -> Literal["approve_plan", "researcher", "writer", "reviewer", "finalize"]:
    """Send a fresh plan to approval when required, else follow `next_action`."""
    if state.get("task_plan") is not None and not state.get("plan_approved", False):
        return APPROVE_PLAN
    return _TARGET[state.get("next_action", "research")]


def route_reviewer(state: ResearchState) -> Literal["researcher", "writer", "finalize"]:
    """End on approval or a spent budget; otherwise follow the review's suggestion."""
    review = state.get("review")
    if review is None or review.approved or budget_reason(state) is not None:
        return FINALIZE
    return (
        RESEARCHER
        if review.suggested_action == "research"
        else WRITER
        if review.suggested_action == "write"
        else FINALIZE
    )
