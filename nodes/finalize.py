"""Finalize: pick the best-reviewed draft, mark it partial if it did not pass, ask for sign-off."""

import json
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from engines.checks import split_front_matter
from graph.models import ApprovalDecision, Draft
from graph.routing import WRITER
from graph.state import ResearchState
from nodes.context import Deps


def best_draft(drafts: list[Draft]) -> Draft | None:
    """The approved draft with the best score, else the best-scored one, else the latest."""
    if not drafts:
        return None
    return max(
        drafts,
        key=lambda d: (
            d.review is not None and d.review.approved,
            d.review.overall_score if d.review else -1.0,
            d.version,
        ),
    )


def front_matter(state: ResearchState, draft: Draft, engine: str, status: str) -> str:
    """YAML front matter that says how the report was made (strings as JSON, valid YAML)."""
    review = draft.review
    lines = [
        "---",
        f"topic: {json.dumps(state['topic'], ensure_ascii=False)}",
        f"engine: {json.dumps(engine, ensure_ascii=False)}",
        f"status: {status}",
        f"draft: {draft.version}",
        f"review_score: {review.overall_score if review else 'not reviewed'}",
        f"sources: {len(state.get('research_data', []))}",
        f"iterations: {state.get('iteration_count', 0)}",
        f"generated_at: {datetime.now(UTC).isoformat(timespec='seconds')}",
        "---",
    ]
    if status == "partial":
        lines += [
            "",
            "> **Partial report:** the research ended (budget spent, or nothing more to find)"
            " before a draft passed review; the gaps are marked below.",
        ]
    return "\n".join(lines) + "\n\n"


async def finalize(
    state: ResearchState, runtime: Runtime[Deps]
) -> Command[Literal["writer", "__end__"]]:
    """Publish the report; with `plan_and_report` approval, a human signs it off first."""
    draft = best_draft(state.get("drafts", []))
    if draft is None:
        draft = Draft(
            version=1,
            markdown=f"# {state['topic']}\n\nNo report could be written.\n",
            source_count=0,
        )
    status = "final" if draft.review is not None and draft.review.approved else "partial"
    _, body = split_front_matter(draft.markdown)
    report = front_matter(state, draft, runtime.context.engine.description, status) + body
    update: dict[str, Any] = {
        "final_report": report,
        "report_status": status,
        "current_draft": draft.markdown,
    }
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
                feedback=feedback,
                messages=[HumanMessage(content=f"Report rejected: {feedback}")],
            )
            return Command(goto=WRITER, update=update)
        if answer.decision == "edit" and answer.report is not None:
            update["final_report"] = answer.report
    runtime.stream_writer(
        {"event": "report", "status": status, "chars": len(update["final_report"])}
    )
    return Command(goto="__end__", update=update)
