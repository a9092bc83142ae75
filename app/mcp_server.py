"""The MCP face: research runs as Model Context Protocol tools and resources.

A third face over the same runs as the REST API (`app.routes_research`) and the Platform
API (`app.platform`): every tool calls the run manager as the matching route does, and its
answer is the route's model. Streamable HTTP is mounted at `/mcp` by `research-agent serve`
(the key checked by `RequestGate` before the body is read, as for `/v1/`; each tool call
reads the key of its own request); `research-agent mcp` serves stdio on the embedded
defaults, as the local owner the CLI's threads belong to.

A failure the REST API answers with `{"error": {code, message, details}}` is a tool error
(`isError`) carrying that same body; a resource read's is a JSON-RPC error with the code
in `data.code`. Another key's thread is `not_found`, as over REST.
"""

import logging
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import FastAPI
from mcp.server.elicitation import AcceptedElicitation, render_elicitation_schema
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)
from mcp_types import TextContent as MCPText
from pydantic import AnyUrl, BaseModel, Field, ValidationError
from starlette.requests import Request
from starlette.routing import Route

from app.auth import KeyAuth
from app.errors import error_body, error_code, store_failure_answer, validation_failure
from app.report_formats import RENDERERS, STANDALONE
from app.report_html import RenderedReports
from app.routes_research import (
    StartAnswer,
    ThreadDetail,
    ThreadPage,
    ThreadSummary,
    links,
    thread_detail,
    thread_summary,
)
from app.settings import Settings
from core.models import REPORT_MAX_CHARS, ApprovalDecision, ResearchPlan
from core.options import ResearchRequest, RunOptions, Topic
from core.questions import Question, QuestionAnswer
from core.state import ReportStatus
from service.errors import (
    BackendUnavailable,
    InvalidState,
    NotFound,
    ResearchError,
    TooManyStreams,
    Unauthorized,
    Unprocessable,
)
from service.questions import Questions
from service.runs import RunManager
from service.thread_ids import LOCAL_OWNER, public_id
from stores.events import Event
from stores.registry import CURSOR_PATTERN, RunStatus

MCP_PATH = "/mcp"
# The key of the plan's question in an `InputRequiredResult`.
PLAN_QUESTION = "plan"
# The context a tool or resource is handed (the SDK finds the parameter by this type).
Ctx = Context[Any, Any]

INSTRUCTIONS = (
    "Deep research: `research` runs a topic to its cited report, sending progress as it "
    "goes; `start_research` answers at once with a thread id to follow with `get_status`. "
    "A run started with options {'approval': 'plan'} waits for `approve_plan`. Read the "
    "report with `get_report` or the resource research://threads/{id}/report, and the text "
    "behind footnote n at research://threads/{id}/sources/{n}."
)


class Footnote(BaseModel):
    """One footnote of a report: its number, its source's title and address."""

    n: int
    title: str
    url: str


def _footnotes(sources: Iterable[Mapping[str, Any]]) -> list[Footnote]:
    return [Footnote.model_validate(s) for s in sources]


class ResearchOutcome(BaseModel):
    """Where a `research` call left its thread: the report, or what waits and how to go on."""

    thread_id: str
    status: RunStatus
    report_status: ReportStatus | None = None
    report: str | None = Field(None, description="The report as Markdown, once written.")
    sources: list[Footnote] = Field(
        default_factory=list, description="The footnotes' sources: number, title, URL."
    )
    approval: dict[str, Any] | None = Field(
        None, description="What waits for approval, if anything."
    )
    next_step: str | None = Field(None, description="What to call next, when the run waits.")
    error: str | None = None


class ReportAnswer(BaseModel):
    """A thread's report in one format, with the sources its footnotes cite."""

    thread_id: str
    format: Literal["markdown", "html"]
    status: ReportStatus | None
    content: str = Field(description="Markdown, or a whole HTML document.")
    sources: list[Footnote]


class PlanAnswer(BaseModel):
    """A human's answer to a plan asked through elicitation."""

    decision: Literal["approve", "reject"] = Field(
        description="approve: research this plan; reject: plan again with the feedback."
    )
    feedback: str = Field("", description="What to change (needed to reject).")


@dataclass(frozen=True)
class Face:
    """What the tools work with: the run manager, the HTML renderer, and who calls."""

    manager: Callable[[], RunManager]
    reports: Callable[[], RenderedReports]
    owner_of: Callable[[Ctx], str]

    async def thread(self, ctx: Ctx, thread_id: str) -> tuple[str, str]:
        """Return the caller and the stored id of its thread `thread_id` (NotFound for another's)."""
        owner = self.owner_of(ctx)
        return owner, await self.manager().resolve(owner, thread_id)


def http_owner(auth: KeyAuth) -> Callable[[Ctx], str]:
    """Return the owner of the key each HTTP request presents (Unauthorized without one)."""

    def owner(ctx: Ctx) -> str:
        request = ctx.request_context.request
        found = auth.owner(request) if isinstance(request, Request) else None
        if found is None:
            raise Unauthorized(KeyAuth.REFUSAL)
        return found

    return owner


def local_owner(ctx: Ctx) -> str:
    """Return the owner of stdio's threads: the local one, as the CLI's."""
    return LOCAL_OWNER


def tool_error(code: str, message: str, details: dict[str, Any] | None = None) -> CallToolResult:
    """Return a tool error carrying the REST API's error body (`code`, `message`, `details`)."""
    body = error_body(code, message, details)
    return CallToolResult(
        content=[MCPText(type="text", text=f"{code}: {message}")],
        structured_content=body,
        is_error=True,
    )


class ResearchServer(MCPServer[Any]):
    """The SDK's server, answering the service's failures as the REST API names them."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Ctx | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Call a tool; its arguments' or the service's failure is a tool error with its code."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            failure = exc.__cause__
            if isinstance(failure, ResearchError):
                return tool_error(error_code(failure), failure.message, failure.details)
            if isinstance(failure, ValidationError):
                message, details = validation_failure(failure.errors(), "arguments")
                return tool_error("validation_error", message, details)
            stored = store_failure_answer(failure) if failure is not None else None
            if stored is not None:
                return tool_error(*stored[1:])
            raise

    async def read_resource(
        self, uri: AnyUrl | str, context: Ctx | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        """Read a resource; the service's failure is a JSON-RPC error with its code in `data`."""
        try:
            return await super().read_resource(uri, context)
        except ResourceError as exc:
            failure = exc.__cause__
            if not isinstance(failure, ResearchError):
                raise
            server_side = isinstance(failure, BackendUnavailable | TooManyStreams)
            data = {"code": error_code(failure), "uri": str(uri), "details": failure.details}
            raise MCPError(
                INTERNAL_ERROR if server_side else INVALID_PARAMS, failure.message, data
            ) from None


def build_server(face: Face) -> ResearchServer:
    """Return the MCP server whose tools and resources act on `face`'s runs."""
    # The SDK's constructor sets up the root logger (Rich, INFO): the service keeps its own,
    # so that no library's INFO lines (request URLs among them) start reaching its logs.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        server = ResearchServer("research-agent", version="0.1.0", instructions=INSTRUCTIONS)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)

    @server.tool()
    async def start_research(
        topic: Topic, ctx: Ctx, options: RunOptions | None = None
    ) -> StartAnswer:
        """Start researching a topic; answers at once with the thread id (the run goes on).

        Follow it with get_status; with options {"approval": "plan"} it waits for approve_plan.
        """
        request = ResearchRequest(topic=topic, options=options or RunOptions())
        record = await face.manager().start(face.owner_of(ctx), request)
        found = links(record.thread_id)
        return StartAnswer(thread_id=public_id(record.thread_id), status=record.status, links=found)

    @server.tool()
    async def research(
        topic: Topic, ctx: Ctx, options: RunOptions | None = None
    ) -> ResearchOutcome | InputRequiredResult:
        """Research a topic to its cited report, sending progress notifications as the run goes.

        A run that waits for approval (options {"approval": "plan"}) is asked through
        elicitation when the client offers it; otherwise the answer says what to approve
        and how. A client that goes away leaves the run going: get_status finds it.
        """
        owner = face.owner_of(ctx)
        manager = face.manager()
        if ctx.request_state is None:
            request = ResearchRequest(topic=topic, options=options or RunOptions())
            stored = (await manager.start(owner, request)).thread_id
            return await _follow(manager, ctx, owner, stored, ask=True)
        # The retry that carries the answer to the plan this call asked (2026-07-28 clients).
        _, stored = await face.thread(ctx, ctx.request_state)
        decision = _answer((ctx.input_responses or {}).get(PLAN_QUESTION))
        if decision is not None:
            await manager.resume(owner, stored, decision)
        return await _follow(manager, ctx, owner, stored, ask=decision is not None)

    @server.tool()
    async def get_status(thread_id: str, ctx: Ctx) -> ThreadDetail:
        """Status, plan, pending approval, progress, usage and the report once there is one."""
        owner, stored = await face.thread(ctx, thread_id)
        manager = face.manager()
        return thread_detail(await manager.view(await manager.get(owner, stored)))

    @server.tool()
    async def get_report(
        thread_id: str, ctx: Ctx, format: Literal["markdown", "html"] = "markdown"
    ) -> ReportAnswer:
        """The report as Markdown, or as a whole HTML document, with its sources."""
        _, stored = await face.thread(ctx, thread_id)
        found = await face.manager().report(stored)
        if found is None:
            raise InvalidState("there is no report yet: follow the events until 'report'")
        content = found.markdown
        if format == "html":
            if len(content) > REPORT_MAX_CHARS:
                raise Unprocessable(
                    f"the report is {len(content)} characters, over the {REPORT_MAX_CHARS} "
                    "rendered as HTML: ask for it as Markdown"
                )
            rendered = await face.reports().rendered(RENDERERS[STANDALONE], content)
            content = rendered if isinstance(rendered, str) else rendered.decode()
        return ReportAnswer(
            thread_id=public_id(stored),
            format=format,
            status=found.status,
            content=content,
            sources=_footnotes(found.sources),
        )

    @server.tool()
    async def approve_plan(
        thread_id: str,
        decision: Literal["approve", "edit", "reject"],
        ctx: Ctx,
        plan: ResearchPlan | None = None,
        feedback: str | None = None,
        report: str | None = None,
    ) -> ThreadSummary:
        """Answer the approval a run waits for: approve, edit (with a plan) or reject (with feedback).

        At the report gate (options {"approval": "plan_and_report"}) an edit sends `report`.
        """
        answer = ApprovalDecision(decision=decision, plan=plan, feedback=feedback, report=report)
        owner, stored = await face.thread(ctx, thread_id)
        return thread_summary(await face.manager().resume(owner, stored, answer))

    @server.tool()
    async def cancel(thread_id: str, ctx: Ctx) -> ThreadSummary:
        """Stop the run now."""
        owner, stored = await face.thread(ctx, thread_id)
        return thread_summary(await face.manager().cancel(owner, stored))

    @server.tool()
    async def list_threads(
        ctx: Ctx,
        cursor: str | None = Field(
            None, pattern=CURSOR_PATTERN, description="`next_cursor` of a page."
        ),
        limit: int = Field(20, ge=1, le=100),
    ) -> ThreadPage:
        """The caller's threads, newest first; pass `next_cursor` back for the next page."""
        owner = face.owner_of(ctx)
        try:
            records, next_cursor = await face.manager().threads(owner, limit, cursor)
        except ValueError:
            raise Unprocessable("cursor: not one this server gave out; start without it") from None
        return ThreadPage(items=[thread_summary(r) for r in records], next_cursor=next_cursor)

    @server.tool()
    async def ask(thread_id: str, question: Question, ctx: Ctx) -> QuestionAnswer:
        """Answer a question from a finished run's evidence only; every sentence cites a source."""
        owner, stored = await face.thread(ctx, thread_id)
        return await Questions(face.manager()).ask(owner, stored, question)

    @server.resource(
        "research://threads/{thread_id}/report",
        name="report",
        description="A thread's report, as Markdown.",
        mime_type="text/markdown",
    )
    async def report_resource(thread_id: str, ctx: Ctx) -> str:
        _, stored = await face.thread(ctx, thread_id)
        found = await face.manager().report(stored)
        if found is None:
            raise InvalidState("there is no report yet: follow the events until 'report'")
        return found.markdown

    @server.resource(
        "research://threads/{thread_id}/sources/{n}",
        name="source",
        description="The exact text the run read for footnote n, and the passages its sentences cite.",
        mime_type="application/json",
    )
    async def source_resource(thread_id: str, n: str, ctx: Ctx) -> str:
        _, stored = await face.thread(ctx, thread_id)
        if not (n.isascii() and n.isdigit() and 1 <= int(n) <= 100_000):
            raise NotFound(f"no footnote {n!r}: footnotes are numbered from 1")
        view = await face.manager().source(stored, int(n))
        return view.model_dump_json()

    return server


async def _follow(
    manager: RunManager, ctx: Ctx, owner: str, stored: str, ask: bool
) -> ResearchOutcome | InputRequiredResult:
    """Report the run's progress until it ends or waits; ask for its plan's approval where the client can.

    A client with a back-channel (stdio, a session of the handshake era) is asked with
    `elicitation/create` here; a 2026-07-28 one gets the question as an
    `InputRequiredResult` and calls again with the answer, the thread in `request_state`.
    """
    progress = _Progress(ctx)
    await progress.say(f"thread {public_id(stored)}: started")
    # A retry goes on from the events the first call reported.
    after = await manager.events.last_id(stored) if ctx.request_state is not None else 0
    while True:
        stream = manager.events.follow(stored, after)
        try:
            async for event in stream:
                after = event.id
                await progress.event(event)
                if event.name == "approval_required":
                    break
                if event.name == "status" and _data(event).get("status") == "paused":
                    break
        finally:
            if isinstance(stream, AsyncGenerator):
                await stream.aclose()
        question = await _plan_question(manager, ctx, owner, stored) if ask else None
        if question is None:
            break
        if not ctx.session.can_send_request:
            schema = render_elicitation_schema(PlanAnswer)
            asked = ElicitRequest(
                params=ElicitRequestFormParams(message=question, requested_schema=schema)
            )
            return InputRequiredResult(
                input_requests={PLAN_QUESTION: asked}, request_state=public_id(stored)
            )
        elicited = await ctx.elicit(question, PlanAnswer)
        if not isinstance(elicited, AcceptedElicitation):
            break
        await manager.resume(owner, stored, _decision(elicited.data))
    return await _outcome(manager, owner, stored)


async def _plan_question(manager: RunManager, ctx: Ctx, owner: str, stored: str) -> str | None:
    """Return what to ask of the plan the run waits for; None if none waits or the client cannot be asked."""
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        return None
    view = await manager.view(await manager.get(owner, stored))
    approval = view.approval or {}
    if view.record.status != "waiting_for_approval" or approval.get("type") != "plan":
        return None
    plan = ResearchPlan.model_validate(approval["plan"])
    searches = "\n".join(f"- {q}" for q in plan.search_queries)
    return (
        f"Approve the research plan for thread {public_id(stored)}?\n\n{plan.plan_text}\n\n"
        f"Searches:\n{searches}"
    )


def _decision(answer: PlanAnswer) -> ApprovalDecision:
    return ApprovalDecision(decision=answer.decision, feedback=answer.feedback or None)


def _answer(response: object) -> ApprovalDecision | None:
    """Return the decision an accepted elicitation holds; None for another answer, or none."""
    if not isinstance(response, ElicitResult) or response.action != "accept":
        return None
    try:
        return _decision(PlanAnswer.model_validate(response.content or {}))
    except ValidationError:  # a rejection without feedback, or no answer at all
        return None


async def _outcome(manager: RunManager, owner: str, stored: str) -> ResearchOutcome:
    """Return where the thread stands: its report and sources, or what waits and how to go on."""
    view = await manager.view(await manager.get(owner, stored))
    record = view.record
    found = await manager.report(stored) if record.status == "completed" else None
    return ResearchOutcome(
        thread_id=public_id(stored),
        status=record.status,
        report_status=view.report_status,
        report=found.markdown if found is not None else None,
        sources=_footnotes(found.sources) if found is not None else [],
        approval=view.approval,
        next_step=_next_step(public_id(stored), record.status, view.approval),
        error=record.error,
    )


def _next_step(thread_id: str, status: RunStatus, approval: dict[str, Any] | None) -> str | None:
    """Return what the caller may do next with a thread that stopped short of its report."""
    if status == "waiting_for_approval":
        gate = (approval or {}).get("type", "plan")
        edit = "'edit' with a plan" if gate == "plan" else "'edit' with a report"
        return (
            f"the {gate} waits for approval: call approve_plan with thread_id {thread_id!r} "
            f"and decision 'approve', {edit}, or 'reject' with feedback; then get_status "
            "or get_report"
        )
    if status == "paused":
        return f"the run is paused: resume it with POST /v1/research/{thread_id}/resume"
    if status in ("queued", "running"):
        return f"the run goes on: follow it with get_status (thread_id {thread_id!r})"
    return None


def _data(event: Event) -> dict[str, Any]:
    data = event.data
    return data if isinstance(data, dict) else {}


class _Progress:
    """The run's steps as MCP progress notifications: plan, searches, sources, drafts, reviews."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.count = 0
        self.sources = 0

    async def say(self, message: str) -> None:
        """Send one progress notification (nothing when the caller asked for none)."""
        self.count += 1
        await self.ctx.report_progress(self.count, None, message)

    async def event(self, event: Event) -> None:
        """Send the notification of one of the run's events, if it is a step worth one."""
        line = self._line(event.name, _data(event))
        if line is not None:
            await self.say(line)

    def _line(self, kind: str, data: dict[str, Any]) -> str | None:
        if kind == "status":
            return f"status: {data.get('status')}"
        if kind == "plan":
            plan = data.get("plan", {})
            edited = " (edited)" if data.get("edited") else ""
            points, queries = plan.get("investigation_points", []), plan.get("search_queries", [])
            return f"plan{edited}: {len(points)} points, {len(queries)} queries"
        if kind == "note":
            outcome = (
                f"{data.get('results')} results, {data.get('new')} new"
                if data.get("status") == "ok"
                else str(data.get("status"))
            )
            return f"search {data.get('query')!r}: {outcome}"
        if kind == "source":
            self.sources += 1
            return f"source {self.sources}: {data.get('title')}"
        if kind == "draft":
            return f"draft {data.get('version')}: {data.get('chars')} characters"
        if kind == "review":
            verdict = "passed" if data.get("approved") else "needs work"
            return f"review of draft {data.get('version')}: {data.get('overall_score', 0):.2f} ({verdict})"
        if kind == "report":
            return f"report: {data.get('status')}, {data.get('chars')} characters"
        if kind == "approval_required":
            return f"waiting for approval of the {data.get('type', 'plan')}"
        if kind == "error":
            return f"error: {data.get('message')}"
        return None


def _transport_security(settings: Settings) -> TransportSecuritySettings:
    """Check Host and Origin against DNS rebinding where no key guards the server (loopback only)."""
    if settings.api_keys:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def mount_mcp(app: FastAPI, auth: KeyAuth, settings: Settings) -> ResearchServer:
    """Serve MCP's streamable HTTP at `/mcp` of `app`, over its run manager; the lifespan runs its sessions."""
    face = Face(
        manager=lambda: app.state.manager,
        reports=lambda: app.state.reports,
        owner_of=http_owner(auth),
    )
    server = build_server(face)
    server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        max_request_body_size=settings.max_body_bytes,
        transport_security=_transport_security(settings),
    )
    app.router.routes.append(Route(MCP_PATH, StreamableHTTPASGIApp(server.session_manager)))
    return server


async def serve_stdio(settings: Settings) -> None:
    """Serve MCP over stdin and stdout on a runtime of this process, until the client closes."""
    from app.runtime import open_runtime, running_worker

    async with AsyncExitStack() as stack:
        runtime = await stack.enter_async_context(open_runtime(settings))
        if runtime.queue is not None:
            await stack.enter_async_context(running_worker(runtime))
        stack.push_async_callback(runtime.manager.shutdown)
        reports = RenderedReports()
        stack.callback(reports.close)
        face = Face(manager=lambda: runtime.manager, reports=lambda: reports, owner_of=local_owner)
        await build_server(face).run_stdio_async()
