"""The Platform API's runs: start (in the background, streamed or waited for), list, cancel, join.

A streamed run's clean-up (cancelling a run its client left, with `on_disconnect=cancel`;
removing a stateless run's thread once it ends) is background work the app owns.
"""

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response
from sse_starlette import EventSourceResponse

from app.background import BackgroundWork
from app.dependencies import Background, Manager, Owner, StoredThread, Streams
from app.edge import StreamSlots, StrictJSONRoute
from app.platform_api import ASSISTANT_ID, RunCreate, check_assistant
from app.platform_json import RunJSON, run_json, values_json
from app.platform_schema import PLATFORM_ERRORS, STREAMED, Run, doc
from app.sse import sse_frame
from service.errors import InvalidState, NotFound
from service.platform_runs import END_EVENT, PlatformRun, stream_key
from service.runs import RunManager
from service.thread_ids import is_client_id, public_id
from stores.events import EventLog, event_id, resume_point

HEARTBEAT_S = 15
VALUES = "The thread's values"

router = APIRouter(
    tags=["langgraph platform"], responses=PLATFORM_ERRORS, route_class=StrictJSONRoute
)


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
    """The stored id of the path's thread, created first if the run asks for that."""
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
    """The run's stream after event `after` (None: it ended before the client's position)."""
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
    streams.check()
    return EventSourceResponse(streams.counted(frames()), ping=HEARTBEAT_S, headers=headers)


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
