"""Finalize: pick the best-reviewed draft, mark it partial if it did not pass, ask for sign-off."""

import json
from typing import Any, Literal

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from core.budget import budget_reason
from core.models import ApprovalDecision, Draft
from core.state import ResearchState
from core.steps import WRITER
from engines.base import Engine
from engines.checks import unfound_words
from engines.report_markdown import cites_anything, has_gaps, split_front_matter
from nodes.context import Deps
from nodes.progress import tell


def best_draft(drafts: list[Draft]) -> Draft | None:
    """Return the approved draft with the best score, else the best-scored one, else the latest."""
    return max(
        drafts,
        key=lambda d: (
            d.review is not None and d.review.approved,
            d.review.overall_score if d.review else -1.0,
            d.version,
        ),
        default=None,
    )


def front_matter(
    state: ResearchState, draft: Draft, engine: Engine, status: str, stopped: str | None
) -> str:
    """Return YAML front matter that says how the report was made (strings as JSON).

    Nothing in it depends on when the run happened, so a replay writes the same report byte
    for byte. A report that is not final opens with why (`stopped`) and what would help.
    """
    review = draft.review
    usage = state.get("usage")
    lines = [
        "---",
        f"topic: {json.dumps(state['topic'], ensure_ascii=False)}",
        f"engine: {json.dumps(engine.description, ensure_ascii=False)}",
    ]
    if engine.models:
        lines.append(f"models: {json.dumps(engine.models, ensure_ascii=False)}")
    if usage is not None and usage.total_tokens:
        lines.append(f"tokens: {usage.total_tokens}")
        lines.append(f"cost_usd: {round(usage.cost_usd, 6)}")
    if review is not None and review.citations is not None:
        citations = review.citations
        share = citations.share
        lines.append(f"supported_citations: {'null' if share is None else share}")
        lines.append(f"cited_claims: {citations.cited_claims}")
        lines.append(f"uncited_claims: {citations.uncited_claims}")
    lines += [
        f"status: {status}",
        f"draft: {draft.version}",
        f"review_score: {review.overall_score if review else 'not reviewed'}",
        f"sources: {len(state.get('research_data', []))}",
        f"iterations: {state.get('iteration_count', 0)}",
        f"iteration_budget: {state['options'].max_iterations}",
        *_past_budget(state),
        "---",
    ]
    if stopped:
        lines.insert(-1, f"stopped: {json.dumps(stopped, ensure_ascii=False)}")
    if status == "insufficient":
        lines += ["", f"> **Insufficient sources:** {stopped}."]
    elif status == "partial":
        why = stopped or "the budget was spent, or there was nothing more to find"
        marked = " The gaps are listed under Open Questions." if has_gaps(draft.markdown) else ""
        lines += [
            "",
            f"> **Partial report:** the research ended before a draft passed review: {why}."
            + marked,
        ]
    return "\n".join(lines) + "\n\n"


NO_QUERIES = "the plan has no search queries, so nothing was researched: add queries to the plan"


def insufficient(search: str, unfound: list[str] | None = None) -> str:
    """Return why a report is insufficient (the subject's words no source used), and what helps."""
    where = (
        "set a web search key (TAVILY_API_KEY or BRAVE_API_KEY) or index documents about "
        "it (`research-agent corpus index`)"
        if search == "local"
        else "rephrase the topic, or name the subject as its sources would"
    )
    said = f" (no source about it says {', '.join(repr(w) for w in unfound)})" if unfound else ""
    return f"the collected sources do not cover this subject{said}: {where}"


def _no_draft(state: ResearchState) -> Draft:
    """Return the report of a run that wrote nothing: no queries, or nothing to write from."""
    plan = state.get("task_plan")
    if plan is not None and not plan.search_queries:
        body = f"# {plan.theme}\n\nNothing was researched: the plan has no search queries.\n"
    else:
        body = f"# {state['topic']}\n\nNo report could be written.\n"
    return Draft(version=1, markdown=body, source_count=0)


def _past_budget(state: ResearchState) -> list[str]:
    """Return why the iteration count passes the budget, when it does.

    The supervisor has a first draft written and reviewed past the budget rather than end
    with no report.
    """
    extra = state.get("iteration_count", 0) - state["options"].max_iterations
    if extra <= 0:
        return []
    why = f"{extra} step(s) past the budget wrote and reviewed a first draft from what was found"
    return [f"past_budget: {json.dumps(why)}"]


async def finalize(
    state: ResearchState, runtime: Runtime[Deps]
) -> Command[Literal["writer", "__end__"]]:
    """Publish the report; with `plan_and_report` approval, a human signs it off first."""
    draft = best_draft(state.get("drafts", [])) or _no_draft(state)
    plan = state.get("task_plan")
    no_research = plan is not None and not plan.search_queries and not state.get("drafts")
    # A halted run (the model refused to serve it) is partial whatever the fallback wrote.
    approved = draft.review is not None and draft.review.approved and not state.get("halted")
    # A report that cites nothing is never final, however it came about; nor is one whose
    # sources leave half of the subject's words and of the topic's unsaid (what it quotes
    # is about another thing: `unfound_words`).
    topic = plan.theme if plan is not None else state["topic"]
    unfound = unfound_words(topic, state.get("research_data", []))
    uncovered = not cites_anything(draft.markdown) or bool(unfound)
    status = "insufficient" if uncovered else "final" if approved else "partial"
    if no_research:
        stopped: str | None = NO_QUERIES
    elif uncovered:
        stopped = insufficient(runtime.context.search.name, unfound)
    else:
        stopped = None if approved else budget_reason(state)
    _, body = split_front_matter(draft.markdown)
    report = front_matter(state, draft, runtime.context.engine, status, stopped) + body
    update: dict[str, Any] = dict(final_report=report, report_status=status, stop_reason=stopped)
    if state["options"].approval == "plan_and_report":
        answer = ApprovalDecision.model_validate(
            interrupt({"type": "report", "report": report, "status": status})
        )
        update["human_input"] = answer.model_dump(mode="json")
        if answer.decision == "reject":
            feedback = answer.feedback or ""
            update.update(
                final_report=None,
                report_status=None,
                stop_reason=None,
                feedback=feedback,
                messages=[HumanMessage(content=f"Report rejected: {feedback}")],
            )
            return Command(goto=WRITER, update=update)
        if answer.decision == "edit" and answer.report is not None:
            update["final_report"] = answer.report
    tell(runtime, {"event": "report", "status": status, "chars": len(update["final_report"])})
    return Command(goto="__end__", update=update)
