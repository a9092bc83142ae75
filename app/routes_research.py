"""`/v1/research`: the service's own API; a second router serves a run's record (sources, re-runs, diffs, export)."""

import dataclasses
import re
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Path, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field
from sse_starlette import EventSourceResponse

from app.dependencies import Manager, Metrics, Owner, Reports, StoredThread, Streams
from app.edge import StrictJSONRoute
from app.errors import ERROR_RESPONSES, ErrorBody, JSONLine
from app.report_formats import (
    FILE_FORMATS,
    FORMATS,
    HTML,
    JSON,
    MARKDOWN,
    RENDERERS,
    STANDALONE,
    negotiate,
    not_acceptable,
)
from app.report_html import DOCUMENT_POLICY
from app.report_pdf import RendererMissing
from app.sse import event_stream, sse_frame
from core.models import (
    REPORT_MAX_CHARS,
    ApprovalDecision,
    CitationCheck,
    Rerun,
    ResearchNote,
    ResearchPlan,
)
from core.options import ResearchRequest
from core.state import ReportStatus
from core.usage import RoundRecord
from service.citations import SourceView
from service.errors import InvalidState, Unprocessable
from service.run_diff import RunDiff
from service.thread_ids import public_id
from service.views import ThreadView
from stores.events import MAX_EVENT_ID, TERMINAL_EVENT, event_id, resume_point
from stores.registry import CURSOR_PATTERN, RunStatus, ThreadRecord


class Links(BaseModel):
    """Where to find a thread's parts."""

    self: str
    events: str
    report: str


class StartAnswer(BaseModel):
    """The answer to a new research request."""

    thread_id: str
    status: RunStatus
    links: Links


class ThreadSummary(BaseModel):
    """A thread in a listing."""

    thread_id: str
    topic: str
    status: RunStatus
    created_at: datetime
    updated_at: datetime
    report_status: ReportStatus | None = Field(
        None,
        description="The status of the report the last run wrote: final, or partial when "
        "no draft passed review or the sources do not cover the subject.",
    )


class ThreadPage(BaseModel):
    """One page of the caller's threads, newest first."""

    items: list[ThreadSummary]
    next_cursor: str | None = None


class ThreadDetail(ThreadSummary):
    """Everything known about a thread."""

    options: dict[str, Any]
    plan: ResearchPlan | None = None
    approval: dict[str, Any] | None = Field(
        None, description="What waits for approval, if anything."
    )
    iteration: int = 0
    usage: dict[str, Any] = Field(
        default_factory=dict, description="Per node and per model: requests, tokens, seconds, cost."
    )
    tokens: int = Field(0, description="Model tokens used so far (input + output).")
    cost_usd: float = Field(0.0, description="Estimated model cost so far, from the price table.")
    rounds: list[RoundRecord] = Field(
        default_factory=list,
        description="One record of node calls per iteration, with the record of the member "
        "researchers its research step ran (`members`).",
    )
    citations: CitationCheck | None = Field(
        None, description="How the latest draft's footnotes held up against the sources."
    )
    stopped: str | None = Field(None, description="Why the run stopped early, if it did.")
    error: str | None = None
    report: str | None = None
    rerun: Rerun | None = Field(
        None, description="The run this one re-runs, and whether it replays its evidence."
    )


def links(thread_id: str) -> Links:
    """Return the links of a thread's parts."""
    base = f"/v1/research/{public_id(thread_id)}"
    return Links(self=base, events=f"{base}/events", report=f"{base}/report")


def _started(record: ThreadRecord, response: Response) -> StartAnswer:
    """Answer a new thread's start: its id, status and links, and its `Location`."""
    found = links(record.thread_id)
    response.headers["Location"] = found.self
    return StartAnswer(thread_id=public_id(record.thread_id), status=record.status, links=found)


def thread_summary(record: ThreadRecord) -> ThreadSummary:
    """Return a thread as a listing shows it (the REST API's and the MCP tools')."""
    summary = record.model_dump(include=set(ThreadSummary.model_fields))
    return ThreadSummary(
        **summary | {"thread_id": public_id(record.thread_id), "report_status": record.report}
    )


def thread_detail(view: ThreadView) -> ThreadDetail:
    """Return everything known about a thread (the REST API's and the MCP tools')."""
    found = {f.name: getattr(view, f.name) for f in dataclasses.fields(view) if f.name != "record"}
    record = view.record
    return ThreadDetail(
        **thread_summary(record).model_dump() | found, options=record.options, error=record.error
    )


def _router(tag: str) -> APIRouter:
    """Return a router under `/v1/research`, tagged `tag`, with the error answers and JSON bodies."""
    return APIRouter(
        prefix="/v1/research", tags=[tag], responses=ERROR_RESPONSES, route_class=StrictJSONRoute
    )


router = _router("research")


@router.post("", status_code=202, response_model=StartAnswer)
async def start(
    request: ResearchRequest, owner: Owner, response: Response, manager: Manager
) -> StartAnswer:
    """Start researching a topic; the run goes on in the background."""
    return _started(await manager.start(owner, request), response)


@router.get("", response_model=ThreadPage)
async def list_threads(
    owner: Owner,
    manager: Manager,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[
        str | None, Query(pattern=CURSOR_PATTERN, description="`next_cursor` of a page.")
    ] = None,
) -> ThreadPage:
    """The caller's threads, newest first; pass `next_cursor` back for the next page."""
    try:
        records, next_cursor = await manager.threads(owner, limit, cursor)
    except ValueError:
        raise Unprocessable("cursor: not one this server gave out; start without it") from None
    return ThreadPage(items=[thread_summary(r) for r in records], next_cursor=next_cursor)


@router.get("/{thread_id}", response_model=ThreadDetail)
async def get_thread(thread_id: StoredThread, owner: Owner, manager: Manager) -> ThreadDetail:
    """Status, plan, pending approval, progress, usage and the report once there is one."""
    return thread_detail(await manager.view(await manager.get(owner, thread_id)))


@router.get("/{thread_id}/events", response_class=EventSourceResponse)
async def stream_events(
    thread_id: StoredThread,
    owner: Owner,
    manager: Manager,
    streams: Streams,
    metrics: Metrics,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_EVENT_ID, description="Replay events after this id.")
    ] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> EventSourceResponse:
    """Server-Sent Events: every event once, in order; reconnect with Last-Event-ID."""
    log = manager.events
    wanted = after if after is not None else event_id(last_event_id)
    start_after = await resume_point(log, thread_id, wanted, {TERMINAL_EVENT})

    async def frames() -> AsyncIterator[bytes]:
        if start_after is None:  # the stream ended before the client's position
            return
        metrics.sse_clients.inc()
        try:
            async for event in log.follow(thread_id, start_after):
                yield sse_frame(event)
                metrics.events_sent.inc()
        finally:
            metrics.sse_clients.dec()

    return event_stream(streams, frames())


@router.post("/{thread_id}/pause", response_model=ThreadSummary)
async def pause(thread_id: StoredThread, owner: Owner, manager: Manager) -> ThreadSummary:
    """Stop the run at its next node boundary."""
    return thread_summary(await manager.pause(owner, thread_id))


@router.post("/{thread_id}/resume", response_model=ThreadSummary)
async def resume(
    thread_id: str,
    owner: Owner,
    manager: Manager,
    decision: Annotated[ApprovalDecision | None, Body()] = None,
) -> ThreadSummary:
    """An empty body continues a paused run; a decision answers a pending approval."""
    # Resolved here, not by a dependency: a malformed decision is 422 for any id.
    stored = await manager.resolve(owner, thread_id)
    return thread_summary(await manager.resume(owner, stored, decision))


@router.post("/{thread_id}/cancel", response_model=ThreadSummary)
async def cancel(thread_id: StoredThread, owner: Owner, manager: Manager) -> ThreadSummary:
    """Stop the run now."""
    return thread_summary(await manager.cancel(owner, thread_id))


@router.delete("/{thread_id}", status_code=204)
async def delete(thread_id: StoredThread, owner: Owner, manager: Manager) -> Response:
    """Remove the thread, its checkpoints and its events."""
    await manager.delete(owner, thread_id)
    return Response(status_code=204)


@router.get(
    "/{thread_id}/report",
    responses={
        200: {"content": {f.media_type: {} for f in FORMATS}},
        406: {"model": ErrorBody, "description": "not_acceptable: a format not offered here"},
    },
)
async def report(
    thread_id: StoredThread,
    owner: Owner,
    request: Request,
    manager: Manager,
    reports: Reports,
    standalone: Annotated[
        bool, Query(description="The whole HTML document, whatever HTML `Accept` asks.")
    ] = False,
) -> Response:
    """The report: Markdown, JSON with its sources, or HTML, by `Accept`.

    `application/json` gives the sources too; `text/html` renders the Markdown with raw
    HTML escaped (the web page shows it as is); `text/html; profile=standalone` (or
    `?standalone=1`) is a whole HTML document to keep: title, summary, sections and the
    references the footnote marks link to. No format the caller accepts is a 406 that
    lists the formats offered.
    """
    wanted = negotiate(request.headers.get("accept", ""), standalone)
    found = await manager.report(thread_id)
    if found is None:
        raise InvalidState("there is no report yet: follow the events until 'report'")
    if wanted is JSON:
        return JSONLine(
            {"status": found.status, "report": found.markdown, "sources": found.sources}
        )
    if wanted is MARKDOWN:
        return PlainTextResponse(found.markdown, media_type="text/markdown; charset=utf-8")
    if len(found.markdown) > REPORT_MAX_CHARS:
        raise Unprocessable(
            f"the report is {len(found.markdown)} characters, over the {REPORT_MAX_CHARS} "
            "rendered as HTML, Word or PDF: ask for it as Markdown (Accept: text/markdown)"
        )
    if wanted is HTML:
        return HTMLResponse(await reports.html(found.markdown))
    try:
        rendered = await reports.rendered(RENDERERS[wanted], found.markdown)
    except RendererMissing as missing:
        raise not_acceptable(str(missing), tuple(f for f in FORMATS if f is not wanted)) from None
    if wanted is STANDALONE:
        return HTMLResponse(rendered, headers={"Content-Security-Policy": DOCUMENT_POLICY})
    extension = next(name for name, f in FILE_FORMATS.items() if f is wanted)
    return Response(
        rendered, media_type=wanted.media_type, headers=_attachment(thread_id, extension)
    )


def _attachment(thread_id: str, extension: str) -> dict[str, str]:
    """Return the header that saves a report file as `report-ID.EXT` (the id's unsafe characters as `_`)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", public_id(thread_id))[:100]
    return {"Content-Disposition": f'attachment; filename="report-{name}.{extension}"'}


@router.get("/{thread_id}/notes", response_model=list[ResearchNote])
async def notes(thread_id: StoredThread, owner: Owner, manager: Manager) -> list[ResearchNote]:
    """The research notes: one per search query, with its sources and errors."""
    return await manager.notes(thread_id)


@router.get("/{thread_id}/rounds", response_model=list[RoundRecord])
async def rounds(thread_id: StoredThread, owner: Owner, manager: Manager) -> list[RoundRecord]:
    """The rounds so far: each one's node calls and the record of its member researchers.

    The thread detail's `rounds`, on their own: a client following a run's members need
    not fetch its plan and report each time.
    """
    return (await manager.view(await manager.get(owner, thread_id))).rounds


records_router = _router("research records")


class RerunRequest(BaseModel):
    """How to re-run: on the stored evidence, or searching and reading again."""

    model_config = {"extra": "forbid"}

    mode: Literal["replay", "refresh"] = Field(
        "replay",
        description="replay: answer every search and page read from what the run read (no "
        "network; the extractive engine writes the same report); refresh: search and read again.",
    )


@records_router.get("/{thread_id}/sources/{n}", response_model=SourceView)
async def source(
    thread_id: StoredThread,
    owner: Owner,
    manager: Manager,
    n: Annotated[int, Path(ge=1, le=100_000, description="The footnote's number.")],
) -> SourceView:
    """The exact text the run read for footnote `n`, and the passages its sentences cite."""
    return await manager.source(thread_id, n)


@records_router.post("/{thread_id}/rerun", status_code=202, response_model=StartAnswer)
async def rerun(
    thread_id: StoredThread,
    owner: Owner,
    manager: Manager,
    response: Response,
    request: Annotated[RerunRequest | None, Body()] = None,
) -> StartAnswer:
    """Run the same topic, options and plan again, as a new thread."""
    mode = (request or RerunRequest()).mode
    return _started(await manager.rerun(owner, thread_id, mode), response)


@records_router.get("/{thread_id}/diff/{other}", response_model=RunDiff)
async def diff(thread_id: StoredThread, other: str, owner: Owner, manager: Manager) -> RunDiff:
    """What changed from this run to `other`: sources, findings, scores, models, prompts."""
    other_id = await manager.resolve(owner, other)
    return await manager.diff(thread_id, other_id)


@records_router.get("/{thread_id}/export")
async def export(thread_id: StoredThread, owner: Owner, manager: Manager) -> JSONResponse:
    """The run whole (record, state, events, evidence): `research-agent import` reads it."""
    archive = await manager.export_run(await manager.get(owner, thread_id))
    name = f"research-{public_id(thread_id)}.json"
    return JSONLine(
        archive.model_dump(mode="json"),
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
