"""The HTTP face of the run manager: `/v1/research`, its SSE stream, health and readiness."""

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, FastAPI, Header, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field
from sse_starlette import EventSourceResponse

from app.auth import KeyAuth, stored_id_dependency
from app.edge import RequestGate, StreamSlots, StrictJSONRoute
from app.errors import ERROR_RESPONSES, install_error_handlers
from app.metrics import ServiceMetrics
from app.platform_api import platform_router
from app.report_html import report_html
from app.runtime import open_runtime, running_worker
from app.settings import Settings
from app.web import mount_web
from core.budget import budget_reason
from core.models import (
    ApprovalDecision,
    CitationCheck,
    ResearchNote,
    ResearchPlan,
)
from core.options import ResearchRequest
from core.state import ReportStatus
from core.urls import normalize_url
from core.usage import RoundRecord
from engines.checks import footnote_urls, split_front_matter
from service.errors import BackendUnavailable, InvalidState, Unprocessable
from service.runner import pending_interrupt, thread_config
from service.runs import RunManager
from service.thread_ids import public_id
from stores.events import MAX_EVENT_ID, TERMINAL_EVENT, EventLog, event_id, resume_point
from stores.registry import CURSOR_PATTERN, RunStatus, ThreadRecord

HEARTBEAT_S = 15


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
        default_factory=list, description="One record of node calls per iteration."
    )
    citations: CitationCheck | None = Field(
        None, description="How the latest draft's footnotes held up against the sources."
    )
    stopped: str | None = Field(None, description="Why the run stopped early, if it did.")
    error: str | None = None
    report: str | None = None


def _links(thread_id: str) -> Links:
    base = f"/v1/research/{public_id(thread_id)}"
    return Links(self=base, events=f"{base}/events", report=f"{base}/report")


def _summary(record: ThreadRecord) -> ThreadSummary:
    summary = record.model_dump(include=set(ThreadSummary.model_fields))
    return ThreadSummary(
        **summary | {"thread_id": public_id(record.thread_id), "report_status": record.report}
    )


def create_app(settings: Settings) -> FastAPI:
    """The service: one graph, one run manager, stores on the embedded SQLite file."""
    auth = KeyAuth([k.get_secret_value() for k in settings.api_keys])
    metrics = ServiceMetrics()
    streams = StreamSlots(settings.max_streams)
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            runtime = await stack.enter_async_context(open_runtime(settings))
            stores, manager = runtime.stores, runtime.manager
            runtime.executor.observe(metrics.record_status)
            state.update(
                manager=manager, events=stores.events, registry=stores.registry, saver=stores.saver
            )
            if runtime.queue is not None and settings.in_process_worker:
                await stack.enter_async_context(running_worker(runtime))
            stack.push_async_callback(manager.shutdown)
            await manager.recover()
            yield

    app = FastAPI(
        title="research-agent",
        version="0.1.0",
        description="Deep research as a service: start a run, stream its progress, approve, read the report.",
        lifespan=lifespan,
    )
    app.add_middleware(RequestGate, auth=auth, max_body_bytes=settings.max_body_bytes)
    install_error_handlers(app)
    Owner = Annotated[str, Depends(auth)]

    def manager() -> RunManager:
        return state["manager"]  # type: ignore[no-any-return]

    # A path's thread id, as the caller's stored thread (NotFound for any other).
    Thread = Annotated[str, Depends(stored_id_dependency(manager, auth))]

    async def thread_values(thread_id: str) -> dict[str, Any]:
        """The thread's state as its last checkpoint holds it."""
        snapshot = await manager().graph.aget_state(thread_config(thread_id))
        return dict(snapshot.values or {})

    router = APIRouter(
        prefix="/v1/research",
        tags=["research"],
        responses=ERROR_RESPONSES,
        route_class=StrictJSONRoute,
    )

    @router.post("", status_code=202, response_model=StartAnswer)
    async def start(request: ResearchRequest, owner: Owner, response: Response) -> StartAnswer:
        """Start researching a topic; the run goes on in the background."""
        record = await manager().start(owner, request)
        links = _links(record.thread_id)
        response.headers["Location"] = links.self
        return StartAnswer(thread_id=public_id(record.thread_id), status=record.status, links=links)

    @router.get("", response_model=ThreadPage)
    async def list_threads(
        owner: Owner,
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
        cursor: Annotated[
            str | None, Query(pattern=CURSOR_PATTERN, description="`next_cursor` of a page.")
        ] = None,
    ) -> ThreadPage:
        """The caller's threads, newest first; pass `next_cursor` back for the next page."""
        try:
            records, next_cursor = await manager().registry.list(owner, limit, cursor)
        except ValueError:
            raise Unprocessable("cursor: not one this server gave out; start without it") from None
        return ThreadPage(items=[_summary(r) for r in records], next_cursor=next_cursor)

    @router.get("/{thread_id}", response_model=ThreadDetail)
    async def get_thread(thread_id: Thread, owner: Owner) -> ThreadDetail:
        """Status, plan, pending approval, progress, usage and the report once there is one."""
        record = await manager().get(owner, thread_id)
        snapshot = await manager().graph.aget_state(thread_config(thread_id))
        values = snapshot.values or {}
        usage = values.get("usage")
        review = values.get("review")
        summary = _summary(record).model_dump()
        # The checkpoint knows the report's status even for runs recorded before the
        # registry kept it.
        summary["report_status"] = values.get("report_status") or summary["report_status"]
        return ThreadDetail(
            **summary,
            options=record.options,
            plan=values.get("task_plan"),
            approval=pending_interrupt(snapshot)
            if record.status == "waiting_for_approval"
            else None,
            iteration=values.get("iteration_count", 0),
            usage=usage.model_dump() if usage is not None else {},
            tokens=usage.total_tokens if usage is not None else 0,
            cost_usd=round(usage.cost_usd, 6) if usage is not None else 0.0,
            rounds=values.get("rounds", []),
            citations=review.citations if review is not None else None,
            stopped=values.get("stop_reason")
            or (
                budget_reason(values)  # type: ignore[arg-type]
                if values.get("report_status") == "partial"
                else values.get("halted")
            ),
            error=record.error,
            report=values.get("final_report"),
        )

    @router.get("/{thread_id}/events", response_class=EventSourceResponse)
    async def stream_events(
        thread_id: Thread,
        owner: Owner,
        after: Annotated[
            int | None, Query(ge=0, le=MAX_EVENT_ID, description="Replay events after this id.")
        ] = None,
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> EventSourceResponse:
        """Server-Sent Events: every event once, in order; reconnect with Last-Event-ID."""
        log: EventLog = state["events"]
        wanted = after if after is not None else event_id(last_event_id)
        start_after = await resume_point(log, thread_id, wanted, {TERMINAL_EVENT})

        async def frames() -> AsyncIterator[dict[str, str]]:
            if start_after is None:  # the stream ended before the client's position
                return
            metrics.sse_clients.inc()
            try:
                async for event in log.follow(thread_id, start_after):
                    yield {"id": str(event.id), "event": event.name, "data": event.text}
                    metrics.events_sent.inc()
            finally:
                metrics.sse_clients.dec()

        streams.check()
        return EventSourceResponse(streams.counted(frames()), ping=HEARTBEAT_S)

    @router.post("/{thread_id}/pause", response_model=ThreadSummary)
    async def pause(thread_id: Thread, owner: Owner) -> ThreadSummary:
        """Stop the run at its next node boundary."""
        return _summary(await manager().pause(owner, thread_id))

    @router.post("/{thread_id}/resume", response_model=ThreadSummary)
    async def resume(
        thread_id: str, owner: Owner, decision: Annotated[ApprovalDecision | None, Body()] = None
    ) -> ThreadSummary:
        """An empty body continues a paused run; a decision answers a pending approval."""
        # Resolved here, not by a dependency: a malformed decision is 422 for any id.
        stored = await manager().resolve(owner, thread_id)
        return _summary(await manager().resume(owner, stored, decision))

    @router.post("/{thread_id}/cancel", response_model=ThreadSummary)
    async def cancel(thread_id: Thread, owner: Owner) -> ThreadSummary:
        """Stop the run now."""
        return _summary(await manager().cancel(owner, thread_id))

    @router.delete("/{thread_id}", status_code=204)
    async def delete(thread_id: Thread, owner: Owner) -> Response:
        """Remove the thread, its checkpoints and its events."""
        await manager().delete(owner, thread_id)
        return Response(status_code=204)

    @router.get(
        "/{thread_id}/report",
        responses={200: {"content": {"text/markdown": {}, "text/html": {}}}},
    )
    async def report(thread_id: Thread, owner: Owner, request: Request) -> Response:
        """The report: Markdown, JSON with its sources, or a safe HTML fragment, by `Accept`.

        `application/json` gives the sources too; `text/html` renders the Markdown with raw
        HTML escaped (the web page shows it as is).
        """
        values = await thread_values(thread_id)
        markdown = values.get("final_report")
        if not markdown:
            raise InvalidState("there is no report yet: follow the events until 'report'")
        if "application/json" in request.headers.get("accept", ""):
            _, body = split_front_matter(markdown)
            titles = {normalize_url(r.url): r.title for r in values.get("research_data", [])}
            sources = [
                {"n": n, "title": titles.get(normalize_url(url), url), "url": url}
                for n, url in sorted(footnote_urls(body).items())
            ]
            return JSONResponse(
                {"status": values.get("report_status"), "report": markdown, "sources": sources}
            )
        if "text/html" in request.headers.get("accept", ""):
            return HTMLResponse(report_html(markdown))
        return PlainTextResponse(markdown, media_type="text/markdown; charset=utf-8")

    @router.get("/{thread_id}/notes", response_model=list[ResearchNote])
    async def notes(thread_id: Thread, owner: Owner) -> list[ResearchNote]:
        """The research notes: one per search query, with its sources and errors."""
        values = await thread_values(thread_id)
        return list(values.get("notes", []))

    app.include_router(router)
    app.include_router(platform_router(manager, auth, streams))
    mount_web(app)

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @app.get("/metrics", tags=["ops"], response_class=PlainTextResponse)
    async def prometheus() -> Response:
        """Prometheus metrics: runs by status, run duration, events sent, SSE clients."""
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/readyz", tags=["ops"], responses={503: ERROR_RESPONSES[503]})
    async def readyz() -> dict[str, str]:
        """The checkpointer, the event log and the registry answer."""
        try:
            await state["events"].ping()
            await state["registry"].ping()
            await state["saver"].aget_tuple(thread_config("readyz"))
        except Exception as exc:
            raise BackendUnavailable(f"a store does not answer ({type(exc).__name__})") from exc
        return {"status": "ready"}

    return app
