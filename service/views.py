"""The read model: what the HTTP API and the CLI show of a thread, built from its checkpoint."""

from dataclasses import dataclass, field
from typing import Any, TypedDict

from langgraph.types import StateSnapshot

from core.budget import budget_reason
from core.models import CitationCheck, Rerun, ResearchPlan
from core.state import ReportStatus
from core.urls import normalize_url
from core.usage import RoundRecord
from engines.report_markdown import footnote_urls, split_front_matter
from service.runner import pending_interrupt
from stores.registry import ThreadRecord


@dataclass(frozen=True)
class ThreadView:
    """A thread's record and what its latest checkpoint says of its research."""

    record: ThreadRecord
    report_status: ReportStatus | None = None
    plan: ResearchPlan | None = None
    approval: dict[str, Any] | None = None
    iteration: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    tokens: int = 0
    cost_usd: float = 0.0
    rounds: list[RoundRecord] = field(default_factory=list)
    citations: CitationCheck | None = None
    stopped: str | None = None
    report: str | None = None
    rerun: Rerun | None = None


class ReportSource(TypedDict):
    """One footnote of a report: its number, its source's title and address."""

    n: int
    title: str
    url: str


@dataclass(frozen=True)
class ReportView:
    """A finished (or partial) report and the sources its footnotes cite."""

    status: ReportStatus | None
    markdown: str
    sources: list[ReportSource]


def thread_view(record: ThreadRecord, snapshot: StateSnapshot) -> ThreadView:
    """Return the view of `record` whose latest checkpoint is `snapshot`."""
    values = snapshot.values or {}
    usage = values.get("usage")
    review = values.get("review")
    partial = values.get("report_status") == "partial"
    return ThreadView(
        record=record,
        report_status=values.get("report_status") or record.report,
        plan=values.get("task_plan"),
        approval=pending_interrupt(snapshot) if record.status == "waiting_for_approval" else None,
        iteration=values.get("iteration_count", 0),
        usage=usage.model_dump() if usage is not None else {},
        tokens=usage.total_tokens if usage is not None else 0,
        cost_usd=round(usage.cost_usd, 6) if usage is not None else 0.0,
        rounds=rounds_of(values),
        citations=review.citations if review is not None else None,
        stopped=values.get("stop_reason")
        or (budget_reason(values) if partial else values.get("halted")),  # type: ignore[arg-type]
        report=values.get("final_report"),
        rerun=values.get("rerun"),
    )


def rounds_of(values: dict[str, Any]) -> list[RoundRecord]:
    """Return a thread's round records, in round order (node calls, members' record).

    The one reading of them: the thread detail, its `rounds` route and `show` take it.
    """
    return list(values.get("rounds", []))


def snapshot_report(snapshot: StateSnapshot) -> ReportView | None:
    """Return the report a thread's latest state holds (at the report gate, the draft)."""
    values = dict(snapshot.values or {})
    asked = pending_interrupt(snapshot)
    if not values.get("final_report") and asked is not None and asked.get("type") == "report":
        values |= {"final_report": asked.get("report"), "report_status": asked.get("status")}
    return report_view(values)


def report_view(values: dict[str, Any]) -> ReportView | None:
    """Return the report a thread's state holds, with its cited sources (None before one)."""
    markdown = values.get("final_report")
    if not markdown:
        return None
    _, body = split_front_matter(markdown)
    titles = {normalize_url(r.url): r.title for r in values.get("research_data", [])}
    sources = [
        ReportSource(n=n, title=titles.get(normalize_url(url), url), url=url)
        for n, url in sorted(footnote_urls(body).items())
    ]
    return ReportView(status=values.get("report_status"), markdown=markdown, sources=sources)
