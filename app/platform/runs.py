"""The Platform API's runs: start (in the background, streamed or waited for), list, cancel, join."""

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, cast, get_args

from fastapi import Header, Query, Response
from langgraph_sdk import schema as sdk
from pydantic import BaseModel, ConfigDict, Field, field_validator
from sse_starlette import EventSourceResponse

from app.background import BackgroundWork
from app.dependencies import Background, Manager, Owner, StoredThread, Streams
from app.edge import StreamSlots
from app.platform import FreeJSON, Lenient, Metadata, doc, platform_router
from app.platform.assistants import ASSISTANT_ID, check_assistant
from app.platform.threads import values_json
from app.sse import event_stream, sse_frame
from core.models import ApprovalDecision
from core.options import ResearchRequest
from service.errors import InvalidState, NotFound
from service.execution import Admission, RunInput
from service.platform_runs import END_EVENT, STREAM_MODES, PlatformRun, stream_key
from service.runs import RunManager
from service.thread_ids import is_client_id, public_id
from stores.events import EventLog, event_id, resume_point

VALUES = "The thread's values"


# The stream modes served (`service.platform_runs.STREAM_MODES`), as the schema names them.
StreamModeName = Literal["values", "updates", "custom", "messages-tuple", "debug"]
assert set(get_args(StreamModeName)) == set(STREAM_MODES)


class Command(BaseModel):
    """A run's command: only `resume`, the answer to the question the thread waits on."""

    model_config = ConfigDict(extra="forbid")

    resume: ApprovalDecision


class RunCreate(Lenient):
    """The body of every run-starting call.

    Its fields are checked here, at the edge, so the published schema says what is
    accepted: a research request as `input`, an approval decision as `command.resume`.
    """

    assistant_id: str
    input: ResearchRequest | None = None
    command: Command | None = None
    metadata: Metadata = Field(default_factory=dict)
    config: FreeJSON | None = None
    context: FreeJSON | None = None
    stream_mode: StreamModeName | list[StreamModeName] = "values"
    stream_subgraphs: bool = False
    interrupt_before: list[str] | Literal["*"] | None = None
    interrupt_after: list[str] | Literal["*"] | None = None
    multitask_strategy: Literal["reject", "enqueue", "interrupt"] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    on_completion: Literal["delete", "keep"] = "delete"
    if_not_exists: Literal["reject", "create"] = "reject"

    @field_validator("stream_mode", mode="before")
    @classmethod
    def _known_modes(cls, value: Any) -> Any:
        asked = [value] if isinstance(value, str) else value
        if not isinstance(asked, list):
            return value  # not a mode nor a list: the type check says so
        if unknown := [m for m in asked if not (isinstance(m, str) and m in STREAM_MODES)]:
            raise ValueError(f"stream modes {unknown} are not served; use {sorted(STREAM_MODES)}")
        return value

    @field_validator("multitask_strategy", mode="before")
    @classmethod
    def _served_strategies(cls, value: Any) -> Any:
        if value == "rollback":
            raise ValueError(
                "multitask_strategy 'rollback' is not served: research already done is kept; "
                "use reject, enqueue or interrupt"
            )
        return value

    @field_validator("command", mode="before")
    @classmethod
    def _resume_only(cls, value: Any) -> Any:
        if isinstance(value, dict) and set(value) - {"resume"}:
            raise ValueError("only command.resume (an approval decision) is served")
        return value

    @property
    def stream_modes(self) -> list[str]:
        """Return the modes asked for, each once, in order."""
        modes = [self.stream_mode] if isinstance(self.stream_mode, str) else self.stream_mode
        return list(dict.fromkeys(modes))

    def admission(self, run_id: str) -> Admission:
        """Return what the run asks of the thread."""
        run_input = RunInput(
            run_id=run_id,
            stream_modes=self.stream_modes,
            interrupt_before=self.interrupt_before,
            interrupt_after=self.interrupt_after,
        )
        decision = self.command.resume if self.command is not None else None
        return Admission(request=self.input, decision=decision, run_input=run_input)

    def recorded(self) -> dict[str, Any]:
        """Return what the run's record keeps of this request (the SDK's `kwargs`)."""
        return self.model_dump(mode="json", include=_KWARGS, exclude_none=True)


# What a run record keeps of its request (the SDK's `kwargs`).
_KWARGS = {
    "input",
    "command",
    "config",
    "context",
    "stream_mode",
    "interrupt_before",
    "interrupt_after",
    "on_disconnect",
}


class Run(BaseModel):  # type: ignore[no-redef]  # pydantic-mypy: the alias `kwargs` vs its **kwargs
    """One run of a thread: from its start to its end, a pause or a question."""

    run_id: str
    thread_id: str
    assistant_id: str
    created_at: datetime
    updated_at: datetime
    status: Literal["pending", "running", "error", "success", "timeout", "interrupted"]
    metadata: dict[str, Any]
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"]
    request: dict[str, Any] = Field(alias="kwargs", description="What the run was asked to do.")


class RunJSON(sdk.Run):
    """A run as this service answers it: the SDK's `Run` and what it was asked (`kwargs`)."""

    kwargs: dict[str, Any]


def run_json(run: PlatformRun) -> RunJSON:
    """Return a run as the SDK reads it (its times as pydantic writes them: `Z` for UTC)."""
    body = run.model_dump(mode="json", exclude={"request", "enqueued"})
    return cast(RunJSON, body | {"thread_id": public_id(run.thread_id), "kwargs": run.request})


# A run's stream: Server-Sent Events named by stream mode (`metadata` first, `end` last).
STREAMED: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: metadata, a chunk per stream mode, end",
        "content": {"text/event-stream": {}},
    }
}

router = platform_router()


async def _start(manager: RunManager, owner: str, thread_id: str, body: RunCreate) -> PlatformRun:
    check_assistant(body.assistant_id)
    run_id = str(uuid.uuid4())
    admission = body.admission(run_id)
    now = datetime.now(UTC)
    run = PlatformRun(
        run_id=run_id,
        thread_id=thread_id,
        assistant_id=ASSISTANT_ID,
        created_at=now,
        updated_at=now,
        metadata=body.metadata,
        multitask_strategy=body.multitask_strategy,
        request=body.recorded(),
    )
    await manager.start_platform_run(owner, run, admission)
    return run


async def _thread_for(manager: RunManager, owner: str, thread_id: str, body: RunCreate) -> str:
    """Return the stored id of the path's thread, created first if the run asks for that."""
    if body.if_not_exists == "create" and is_client_id(thread_id):
        record = await manager.create_thread(owner, thread_id, {}, "do_nothing")
        return record.thread_id
    return await manager.resolve(owner, thread_id)


async def until_end(events: EventLog, run_id: str) -> None:
    """Wait until the run's stream has its `end` event."""
    async for event in events.follow(stream_key(run_id)):
        if event.name == END_EVENT:
            return


async def _values_at_end(manager: RunManager, thread_id: str, run_id: str) -> dict[str, Any]:
    await until_end(manager.events, run_id)
    return values_json(await manager.snapshot(thread_id))


async def _cancel_quietly(manager: RunManager, owner: str, run: PlatformRun) -> None:
    """Cancel the run its client left, unless it has ended (or gone) meanwhile."""
    with contextlib.suppress(InvalidState, NotFound):
        await manager.cancel_platform_run(owner, run.run_id, run.thread_id)


async def _delete_after(manager: RunManager, owner: str, run: PlatformRun) -> None:
    """Remove a stateless run's thread once the run has ended (its client may be gone)."""
    await until_end(manager.events, run.run_id)
    await manager.delete(owner, run.thread_id)


def _stream(
    context: tuple[RunManager, StreamSlots, BackgroundWork],
    owner: str,
    run: PlatformRun,
    after: int | None = 0,
    on_disconnect: str = "continue",
    then_delete: bool = False,
) -> EventSourceResponse:
    """Return the run's stream after event `after` (None: it ended before the client's position)."""
    manager, streams, background = context

    async def frames() -> AsyncIterator[bytes]:
        if after is None:
            return
        ended = False
        try:
            async for event in manager.events.follow(stream_key(run.run_id), after):
                yield sse_frame(event)
                if event.name == END_EVENT:
                    ended = True
                    return
        finally:
            if not ended and on_disconnect == "cancel":
                background.start(_cancel_quietly(manager, owner, run))
            if then_delete:
                background.start(_delete_after(manager, owner, run))

    headers = {"Content-Location": f"/threads/{public_id(run.thread_id)}/runs/{run.run_id}"}
    return event_stream(streams, frames(), headers)


@router.post("/threads/{thread_id}/runs", **doc(Run))
async def create_run(thread_id: str, body: RunCreate, owner: Owner, manager: Manager) -> RunJSON:
    """Start a run in the background."""
    stored = await _thread_for(manager, owner, thread_id, body)
    return run_json(await _start(manager, owner, stored, body))


@router.post(
    "/threads/{thread_id}/runs/stream", response_class=EventSourceResponse, responses=STREAMED
)
async def stream_run(
    thread_id: str,
    body: RunCreate,
    owner: Owner,
    manager: Manager,
    streams: Streams,
    background: Background,
) -> EventSourceResponse:
    """Start a run and stream it."""
    streams.check()  # before the run starts: a refused stream starts nothing
    run = await _start(manager, owner, await _thread_for(manager, owner, thread_id, body), body)
    return _stream((manager, streams, background), owner, run, on_disconnect=body.on_disconnect)


@router.post("/threads/{thread_id}/runs/wait", **doc(dict[str, Any], VALUES))
async def wait_run(
    thread_id: str, body: RunCreate, owner: Owner, manager: Manager
) -> dict[str, Any]:
    """Start a run and answer with the thread's values once it ends."""
    stored = await _thread_for(manager, owner, thread_id, body)
    run = await _start(manager, owner, stored, body)
    return await _values_at_end(manager, stored, run.run_id)


@router.post("/runs/stream", response_class=EventSourceResponse, responses=STREAMED)
async def stream_stateless(
    body: RunCreate, owner: Owner, manager: Manager, streams: Streams, background: Background
) -> EventSourceResponse:
    """A run on a thread of its own, removed once the run ends (`on_completion`)."""
    streams.check()
    record = await manager.create_thread(owner, None, {}, "raise")
    run = await _start(manager, owner, record.thread_id, body)
    return _stream(
        (manager, streams, background),
        owner,
        run,
        on_disconnect=body.on_disconnect,
        then_delete=body.on_completion == "delete",
    )


@router.post("/runs/wait", **doc(dict[str, Any], VALUES))
async def wait_stateless(body: RunCreate, owner: Owner, manager: Manager) -> dict[str, Any]:
    """A run on a thread of its own; answers with its final values."""
    record = await manager.create_thread(owner, None, {}, "raise")
    run = await _start(manager, owner, record.thread_id, body)
    values = await _values_at_end(manager, record.thread_id, run.run_id)
    if body.on_completion == "delete":
        await manager.delete(owner, record.thread_id)
    return values


@router.get("/threads/{thread_id}/runs", **doc(list[Run]))
async def list_runs(
    thread_id: StoredThread,
    owner: Owner,
    manager: Manager,
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> list[RunJSON]:
    """The thread's runs, newest first."""
    runs = await manager.platform_runs(thread_id)
    return [run_json(r) for r in runs[offset : offset + limit]]


@router.get("/threads/{thread_id}/runs/{run_id}", **doc(Run))
async def get_run(thread_id: StoredThread, run_id: str, owner: Owner, manager: Manager) -> RunJSON:
    """One run."""
    return run_json(await manager.platform_run(thread_id, run_id))


@router.post(
    "/threads/{thread_id}/runs/{run_id}/cancel",
    status_code=202,
    responses={202: {"description": "Cancelled"}, 204: {"description": "Cancelled (wait)"}},
)
async def cancel_run(
    thread_id: StoredThread, run_id: str, owner: Owner, manager: Manager, wait: bool = False
) -> Response:
    """Cancel the run (the thread's research stops where it is); drop it if it waits."""
    await manager.cancel_platform_run(owner, run_id, thread_id)
    return Response(status_code=202 if not wait else 204)


@router.get("/threads/{thread_id}/runs/{run_id}/join", **doc(dict[str, Any], VALUES))
async def join_run(
    thread_id: StoredThread, run_id: str, owner: Owner, manager: Manager
) -> dict[str, Any]:
    """Wait for the run to end; answer with the thread's values."""
    await manager.platform_run(thread_id, run_id)
    return await _values_at_end(manager, thread_id, run_id)


@router.get(
    "/threads/{thread_id}/runs/{run_id}/stream",
    response_class=EventSourceResponse,
    responses=STREAMED,
)
async def join_stream(
    thread_id: StoredThread,
    run_id: str,
    owner: Owner,
    manager: Manager,
    streams: Streams,
    background: Background,
    last_event_id: Annotated[str | None, Header()] = None,
) -> EventSourceResponse:
    """The run's stream from the start, or after `Last-Event-ID`."""
    run = await manager.platform_run(thread_id, run_id)
    after = await resume_point(
        manager.events, stream_key(run.run_id), event_id(last_event_id), {END_EVENT}
    )
    return _stream((manager, streams, background), owner, run, after)
