"""The read model: what the HTTP faces show of a thread, built from its checkpoint here.

The faces never index checkpoint keys nor reach for the graph or the executor: they ask
the run manager (`ThreadReads`, which it inherits) for a `ThreadView`, a `ReportView`,
the notes, a state snapshot or a Platform run, and render those.
"""

from dataclasses import dataclass, field
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.types import StateSnapshot

from core.budget import budget_reason
from core.models import CitationCheck, Rerun, ResearchNote, ResearchPlan
from core.state import ReportStatus
from core.urls import normalize_url
from core.usage import RoundRecord
from engines.report_markdown import footnote_urls, split_front_matter
from graph.builder import ResearchGraph
from service.errors import NotFound
from service.execution import RunExecutor
from service.platform_runs import PlatformRun
from service.runner import pending_interrupt, thread_config
from service.thread_ids import public_id
from stores.registry import Registry, ThreadRecord


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
    """The view of `record` whose latest checkpoint is `snapshot`."""
    values = snapshot.values or {}
    usage = values.get("usage")
    review = values.get("review")
    partial = values.get("report_status") == "partial"
    return ThreadView(
        record=record,
        # The checkpoint knows the report's status even for runs recorded before the
        # registry kept it.
        report_status=values.get("report_status") or record.report,
        plan=values.get("task_plan"),
        approval=pending_interrupt(snapshot) if record.status == "waiting_for_approval" else None,
        iteration=values.get("iteration_count", 0),
        usage=usage.model_dump() if usage is not None else {},
        tokens=usage.total_tokens if usage is not None else 0,
        cost_usd=round(usage.cost_usd, 6) if usage is not None else 0.0,
        rounds=values.get("rounds", []),
        citations=review.citations if review is not None else None,
        stopped=values.get("stop_reason")
        or (budget_reason(values) if partial else values.get("halted")),  # type: ignore[arg-type]
        report=values.get("final_report"),
        rerun=values.get("rerun"),
    )


def report_view(values: dict[str, Any]) -> ReportView | None:
    """The report a thread's state holds, with its cited sources; None before there is one."""
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


class ThreadReads:
    """The run manager's reads: views of threads, their checkpoints and Platform runs."""

    graph: ResearchGraph
    executor: RunExecutor
    registry: Registry

    async def view(self, record: ThreadRecord) -> ThreadView:
        """The view of the thread `record` is the record of."""
        return thread_view(record, await self.snapshot(record.thread_id))

    async def report(self, thread_id: str) -> ReportView | None:
        """The thread's report, None before there is one.

        At the report gate (approval `plan_and_report`), the draft that waits for sign-off:
        the reviewer reads it as the report it will be (its front matter gives its status).
        """
        snapshot = await self.snapshot(thread_id)
        values = dict(snapshot.values or {})
        asked = pending_interrupt(snapshot)
        if not values.get("final_report") and asked is not None and asked.get("type") == "report":
            values |= {"final_report": asked.get("report"), "report_status": asked.get("status")}
        return report_view(values)

    async def notes(self, thread_id: str) -> list[ResearchNote]:
        """The thread's research notes: one per search query."""
        values = (await self.snapshot(thread_id)).values or {}
        return list(values.get("notes", []))

    async def threads(
        self, owner: str, limit: int, cursor: str | None
    ) -> tuple[list[ThreadRecord], str | None]:
        """A page of the owner's threads, newest first, and the cursor of the next."""
        return await self.registry.list(owner, limit, cursor)

    async def snapshot(self, thread_id: str, checkpoint_id: str | None = None) -> StateSnapshot:
        """The thread's state at a checkpoint (the latest without one), or NotFound."""
        config = thread_config(thread_id)
        if checkpoint_id:
            config["configurable"]["checkpoint_id"] = checkpoint_id
        snapshot = await self.graph.aget_state(config)
        # A checkpoint the saver does not have comes back as an empty snapshot of the
        # config asked for: no creation time.
        found = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
        if checkpoint_id and (found != checkpoint_id or snapshot.created_at is None):
            raise NotFound(f"no checkpoint {checkpoint_id!r} on thread {public_id(thread_id)!r}")
        return snapshot

    async def history(
        self,
        thread_id: str,
        limit: int,
        before: dict[str, Any] | None,
        metadata: dict[str, Any] | None,
    ) -> list[StateSnapshot]:
        """The thread's checkpoints, newest first, before `before`, matching `metadata`."""
        until: RunnableConfig | None = {"configurable": before} if before else None
        snapshots = self.graph.aget_state_history(
            thread_config(thread_id), limit=limit, before=until, filter=metadata
        )
        return [s async for s in snapshots]

    def drawing(self) -> dict[str, Any]:
        """The graph's nodes and edges, as JSON."""
        drawn: dict[str, Any] = self.graph.get_graph().to_json()
        return drawn

    async def platform_run(self, thread_id: str, run_id: str) -> PlatformRun:
        """One Platform run of the thread, or NotFound."""
        run = await self.executor.platform.get(thread_id, run_id)
        if run is None:
            raise NotFound(f"no run {run_id!r} on thread {public_id(thread_id)!r}")
        return run

    async def platform_runs(self, thread_id: str) -> list[PlatformRun]:
        """The thread's Platform runs, newest first."""
        return await self.executor.platform.list(thread_id)
