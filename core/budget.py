"""The run's budgets and the supervisor's fixed rules: pure functions of the state."""

from core.models import Action
from core.state import ResearchState


def _largest_step(state: ResearchState) -> tuple[int, float]:
    """Return the tokens and cost of the costliest node call so far: the estimate of the next one."""
    calls = [s.usage for r in state.get("rounds", []) for s in r.submissions]
    return (
        max((c.input_tokens + c.output_tokens for c in calls), default=0),
        max((c.cost_usd for c in calls), default=0.0),
    )


def budget_reason(state: ResearchState) -> str | None:
    """Return why the run must stop researching: a budget used up (or about to be), or a halt."""
    if state.get("halted"):
        return state["halted"]
    options = state["options"]
    if state.get("iteration_count", 0) >= options.max_iterations:
        return f"the iteration budget ({options.max_iterations}) is spent"
    usage = state.get("usage")
    if usage is None:
        return None
    if usage.seconds >= options.time_budget_s:
        return f"the time budget ({options.time_budget_s:g} s) is spent"
    next_tokens, next_cost = _largest_step(state)
    if options.max_tokens is not None and usage.total_tokens + next_tokens > options.max_tokens:
        return (
            f"the token budget would be passed ({usage.total_tokens} of {options.max_tokens} "
            f"tokens used, the next step may take {next_tokens})"
        )
    if options.max_cost_usd is not None and usage.cost_usd + next_cost > options.max_cost_usd:
        return (
            f"the cost budget would be passed (${usage.cost_usd:.4f} of "
            f"${options.max_cost_usd:g} used, the next step may cost ${next_cost:.4f})"
        )
    return None


def fixed_supervisor_rule(state: ResearchState) -> tuple[Action, str] | None:
    """Apply the supervisor's rules in order; None means the engine must decide.

    0. a plan without queries and nothing collected: end (no research needed);
    1. budget spent (or the run halted): write once if there is no draft yet, else end;
    2. fewer sources than `min_sources`: research, or write (end) when nothing is left to search;
    3. no draft yet: write.
    """
    has_draft = bool(state.get("drafts"))
    count = len(state.get("research_data", []))
    plan = state.get("task_plan")
    if plan is not None and not plan.search_queries and not count and not has_draft:
        return "end", "The plan needs no research: no further research needed."
    reason = budget_reason(state)
    if reason is not None:
        if not has_draft and (count or not state.get("halted")):
            return (
                "write",
                f"Stopping because {reason}, with no draft: write one from what was found.",
            )
        return "end", f"Stopping because {reason}: finish with the best draft."
    minimum = state["options"].min_sources
    if count < minimum:
        return "research", f"Only {count} of {minimum} sources collected: research more."
    if not has_draft:
        return "write", f"{count} sources collected: write the first draft."
    return None
