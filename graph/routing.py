"""Routing rules (seed 001 F002/F006): pure functions of the state, one per decision point."""

from typing import Final, Literal

from graph.models import Action
from graph.state import ResearchState

SUPERVISOR: Final = "supervisor"
APPROVE_PLAN: Final = "approve_plan"
RESEARCHER: Final = "researcher"
WRITER: Final = "writer"
REVIEWER: Final = "reviewer"
FINALIZE: Final = "finalize"

_TARGET: dict[Action, Literal["researcher", "writer", "reviewer", "finalize"]] = {
    "research": RESEARCHER,
    "write": WRITER,
    "review": REVIEWER,
    "end": FINALIZE,
}


def budget_spent(state: ResearchState) -> bool:
    """True when the iteration or active-time budget is used up."""
    options = state["options"]
    if state.get("iteration_count", 0) >= options.max_iterations:
        return True
    usage = state.get("usage")
    return usage is not None and usage.seconds >= options.time_budget_s


def fixed_supervisor_rule(state: ResearchState) -> tuple[Action, str] | None:
    """The supervisor's rules in order; None means the engine must decide.

    1. budget spent: write once if there is no draft yet, else end;
    2. fewer sources than `min_sources`: research;
    3. no draft yet: write.
    """
    has_draft = bool(state.get("current_draft"))
    if budget_spent(state):
        if not has_draft:
            return (
                "write",
                "The budget is spent and there is no draft: write one from what was found.",
            )
        return "end", "The budget is spent: finish with the best draft."
    count = len(state.get("research_data", []))
    minimum = state["options"].min_sources
    if count < minimum:
        return "research", f"Only {count} of {minimum} sources collected: research more."
    if not has_draft:
        return "write", f"{count} sources collected: write the first draft."
    return None


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
    if review is None or review.approved or budget_spent(state):
        return FINALIZE
    return (
        RESEARCHER
        if review.suggested_action == "research"
        else WRITER
        if review.suggested_action == "write"
        else FINALIZE
    )
