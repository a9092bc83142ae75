"""Approving a plan (or a report) in the terminal: approve, edit, reject or later."""

import sys
from typing import Any

from pydantic import ValidationError
from rich.markdown import Markdown
from rich.markup import escape

from app.cli_common import err, explain
from core.models import ApprovalDecision, ResearchPlan


def _show_plan(plan: ResearchPlan) -> None:
    err.print(f"\n[bold]Plan:[/] {escape(plan.theme)}\n{escape(plan.plan_text)}")
    err.print("[bold]Investigation points[/]")
    for point in plan.investigation_points:
        err.print(f"  - {escape(point)}")
    err.print("[bold]Search queries[/]")
    for query in plan.search_queries:
        err.print(f"  - {escape(query)}")


def _ask(prompt: str) -> str | None:
    """Read one answer from stdin (prompting on stderr, so stdout keeps only the report)."""
    err.print(prompt, end="")
    line = sys.stdin.readline()
    return line.strip() if line else None


def _read_lines(label: str, current: list[str]) -> list[str] | None:
    err.print(
        f"{label}: one per line, then an empty line (an empty list keeps the current {len(current)})"
    )
    lines: list[str] = []
    while (line := sys.stdin.readline()) and line.strip():
        lines.append(line.strip())
    return lines or current


async def ask_in_terminal(question: dict[str, Any]) -> ApprovalDecision | None:
    """Show what waits for approval and read approve / edit / reject; None means later."""
    is_plan = question.get("type") == "plan"
    if is_plan:
        _show_plan(ResearchPlan.model_validate(question["plan"]))
    else:
        err.print(Markdown(str(question.get("report", ""))))
    while True:
        choice = _ask("approve / edit / reject / later [approve]: ")
        if choice is None or choice.lower() == "later":
            return None
        choice = choice.lower() or "approve"
        if choice == "approve":
            return ApprovalDecision(decision="approve")
        if choice == "reject":
            feedback = _ask("What should change? ")
            if feedback:
                return ApprovalDecision(decision="reject", feedback=feedback)
            return None
        if choice == "edit" and is_plan:
            plan = ResearchPlan.model_validate(question["plan"])
            points = _read_lines("Investigation points", plan.investigation_points)
            queries = _read_lines("Search queries", plan.search_queries)
            try:
                edited = ResearchPlan.model_validate(
                    {**plan.model_dump(), "investigation_points": points, "search_queries": queries}
                )
            except ValidationError as exc:
                err.print(f"that plan is not valid ({escape(explain(exc))}); try again")
                continue
            return ApprovalDecision(decision="edit", plan=edited)
        if choice == "edit":
            err.print("Paste the report, then a line with a single '.':")
            lines = []
            while (line := sys.stdin.readline()) and line.rstrip("\n") != ".":
                lines.append(line)
            return ApprovalDecision(decision="edit", report="".join(lines))
        err.print(f"unknown answer {escape(repr(choice))}")
