"""Supervisor: plan once, then route by the fixed rules or the engine's judgement."""

import logging
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from core.budget import fixed_supervisor_rule
from core.models import ResearchPlan, SearchResult
from core.state import ResearchState
from core.steps import SUPERVISOR
from engines.base import ModelAccessError, Progress
from nodes.accounting import accounted
from nodes.context import Deps
from nodes.progress import tell
from nodes.sources import to_sources
from tools.text import keyword_query, topic_parts

logger = logging.getLogger(__name__)


async def _probe(state: ResearchState, deps: Deps) -> list[SearchResult]:
    """Search the topic itself, so the plan can use the words of the first results."""
    try:
        hits = await deps.search.search(state["topic"], state["options"].max_results)
    except Exception as exc:  # a failed probe only makes the plan less specific
        logger.warning("probe search failed: %s", type(exc).__name__)
        return []
    return to_sources(hits, deps.search.name)


def led_by_topic(plan: ResearchPlan, topic: str) -> ResearchPlan:
    """Return the plan led by the topic's own keyword query, then each of its parts.

    Whatever the engine made of the question, the words the user typed are searched. A
    plan without queries (nothing to research) stays so.
    """
    first = keyword_query(topic)
    if not plan.search_queries or not first:
        return plan
    lead = [first, *topic_parts(topic)]  # both sides of "X vs Y", both parts of a question
    known = {q.casefold() for q in lead}
    rest = [q for q in plan.search_queries if q.casefold() not in known]
    return plan.model_copy(update={"search_queries": [*lead, *rest]})


@accounted(SUPERVISOR)
async def supervisor(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Make the plan if there is none; otherwise choose the next action.

    A model that refuses to plan fails the run (nothing is collected yet); one that
    refuses to route halts it, so the report is written from what was found.
    """
    deps = runtime.context
    plan = state.get("task_plan")
    if plan is None:
        probe = await _probe(state, deps)
        plan = led_by_topic(
            await deps.engine.plan(state["topic"], probe, state.get("feedback")), state["topic"]
        )
        tell(runtime, {"event": "plan", "plan": plan.model_dump(mode="json")})
        return {
            "task_plan": plan,
            "plan_approved": state["options"].approval == "none",
            "feedback": None,
            # A plan without queries says the topic needs no research: finish at once.
            "next_action": "research" if plan.search_queries else "end",
            "messages": [AIMessage(content=f"Plan: {plan.plan_text}", name=SUPERVISOR)],
        }
    halted: str | None = None
    rule = fixed_supervisor_rule(state)
    if rule is not None:
        action, reasoning = rule
    else:
        drafts = state.get("drafts", [])
        progress = Progress(
            topic=state["topic"],
            plan=plan,
            source_count=len(state.get("research_data", [])),
            sources_at_last_draft=drafts[-1].source_count if drafts else 0,
            has_draft=bool(drafts),
            last_review=state.get("review"),
            iteration_count=state.get("iteration_count", 0),
            max_iterations=state["options"].max_iterations,
        )
        try:
            decision = await deps.engine.decide(progress)
            action, reasoning = decision.action, decision.reasoning
        except ModelAccessError as exc:
            halted = str(exc)
            action, reasoning = "end", f"Stopping because {halted}."
    update: dict[str, Any] = {
        "next_action": action,
        "messages": [
            AIMessage(content=f"Next action: {action}. Reason: {reasoning}", name=SUPERVISOR)
        ],
    }
    if halted:
        update["halted"] = halted
    return update
