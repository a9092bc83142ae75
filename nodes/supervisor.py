"""Supervisor: plan once, then route by the fixed rules or the engine's judgement."""

import logging
import time
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from engines.base import Progress
from graph.models import Action, SearchResult
from graph.routing import SUPERVISOR, fixed_supervisor_rule
from graph.state import ResearchState
from nodes.accounting import spent
from nodes.context import Deps
from nodes.sources import to_sources

logger = logging.getLogger(__name__)


async def _probe(state: ResearchState, deps: Deps) -> list[SearchResult]:
    """Search the topic itself, so the plan can use the words of the first results."""
    try:
        hits = await deps.search.search(state["topic"], state["options"].max_results)
    except Exception as exc:  # a failed probe only makes the plan less specific
        logger.warning("probe search failed: %s", type(exc).__name__)
        return []
    return to_sources(hits, deps.search.name)


async def supervisor(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Make the plan if there is none; otherwise choose the next action."""
    started = time.perf_counter()
    deps = runtime.context
    plan = state.get("task_plan")
    if plan is None:
        probe = await _probe(state, deps)
        plan = await deps.engine.plan(state["topic"], probe, state.get("feedback"))
        approved = state["options"].approval == "none"
        runtime.stream_writer({"event": "plan", "plan": plan.model_dump(mode="json")})
        return {
            "task_plan": plan,
            "plan_approved": approved,
            "feedback": None,
            "next_action": "research",
            "human_input_required": not approved,
            "messages": [AIMessage(content=f"Plan: {plan.plan_text}", name=SUPERVISOR)],
            "usage": spent(SUPERVISOR, started, requests=1),
        }
    rule = fixed_supervisor_rule(state)
    if rule is None:
        drafts = state.get("drafts", [])
        decision = await deps.engine.decide(
            Progress(
                topic=state["topic"],
                plan=plan,
                source_count=len(state.get("research_data", [])),
                sources_at_last_draft=drafts[-1].source_count if drafts else 0,
                has_draft=bool(state.get("current_draft")),
                last_review=state.get("review"),
                iteration_count=state.get("iteration_count", 0),
                max_iterations=state["options"].max_iterations,
            )
        )
        action: Action = decision.action
        reasoning = decision.reasoning
    else:
        action, reasoning = rule
    return {
        "next_action": action,
        "messages": [
            AIMessage(content=f"Next action: {action}. Reason: {reasoning}", name=SUPERVISOR)
        ],
        "usage": spent(SUPERVISOR, started),
    }
