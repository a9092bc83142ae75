"""Watches: `/v1/research/{id}/watch` (a thread refreshed on a schedule) and `/v1/watches`.

A watch re-runs its thread with `refresh` at an interval (`service.watches`); each refresh's
diff against the previous one is an entry, listed by `.../watch/changes` and told, when
something changed, on the key's stream `GET /v1/watches/events`.
"""

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from pydantic import BaseModel, Field

from app.dependencies import Manager, Metrics, Owner, StoredThread, Streams
from app.edge import StrictJSONRoute
from app.errors import ERROR_RESPONSES
from app.sse import event_stream, sse_frame
from service.watches import WatchEntry, Watches, WatchView, events_stream, parse_every, view
from stores.events import MAX_EVENT_ID, event_id, resume_point


async def _watches(request: Request) -> Watches:
    watches: Watches = request.app.state.watches
    return watches


WatchService = Annotated[Watches, Depends(_watches)]

router = APIRouter(tags=["watches"], responses=ERROR_RESPONSES, route_class=StrictJSONRoute)


class WatchRequest(BaseModel):
    """How often to refresh the thread."""

    model_config = {"extra": "forbid"}

    every: str = Field(
        max_length=64,
        examples=["P1D"],
        description="An ISO 8601 duration, from PT1H to P90D (e.g. PT6H, P1D, P1W).",
    )
    webhook: str | None = Field(
        None,
        max_length=2048,
        description="An http(s) URL each entry that changed something is POSTed to, signed "
        "(X-Research-Signature) with the key's secret (GET /v1/watches/secret).",
    )


class WatchSecret(BaseModel):
    """The key's webhook signing secret."""

    secret: str = Field(description="HMAC-SHA256 key of X-Research-Signature.")


@router.post("/v1/research/{thread_id}/watch", status_code=201, response_model=WatchView)
async def watch(
    thread_id: StoredThread, body: WatchRequest, owner: Owner, watches: WatchService
) -> WatchView:
    """Refresh this finished thread every `every`; watching it again sets a new interval."""
    every = parse_every(body.every, watches.min_every)
    return view(await watches.watch(owner, thread_id, every, body.webhook))


@router.get("/v1/research/{thread_id}/watch", response_model=WatchView)
async def get_watch(thread_id: StoredThread, owner: Owner, watches: WatchService) -> WatchView:
    """The thread's watch: its interval, next due time and refreshes so far."""
    return view(await watches.get(owner, thread_id))


@router.delete("/v1/research/{thread_id}/watch", status_code=204)
async def unwatch(thread_id: StoredThread, owner: Owner, watches: WatchService) -> Response:
    """Stop watching the thread (its refreshes stay, as threads of their own)."""
    await watches.unwatch(owner, thread_id)
    return Response(status_code=204)


@router.get("/v1/research/{thread_id}/watch/changes", response_model=list[WatchEntry])
async def changes(
    thread_id: StoredThread,
    owner: Owner,
    watches: WatchService,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[WatchEntry]:
    """Each refresh, newest first, with its diff against the previous one."""
    return await watches.changes(owner, thread_id, limit)


@router.get("/v1/watches", response_model=list[WatchView])
async def list_watches(owner: Owner, watches: WatchService) -> list[WatchView]:
    """The caller's watches, oldest first."""
    return [view(w) for w in await watches.of_owner(owner)]


@router.get("/v1/watches/secret", response_model=WatchSecret)
async def watch_secret(owner: Owner, watches: WatchService) -> WatchSecret:
    """The secret this key's webhooks are signed with (made the first time it is asked for)."""
    return WatchSecret(secret=await watches.store.secret(owner))


class LoggedEntry(BaseModel):
    """One event of the key's stream of watch entries, as the SSE stream would frame it."""

    id: int
    event: str
    data: Any


@router.get(
    "/v1/watches/events",
    response_model=list[LoggedEntry],
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def watch_events(
    request: Request,
    owner: Owner,
    manager: Manager,
    streams: Streams,
    metrics: Metrics,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_EVENT_ID, description="Entries after this id.")
    ] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Any:
    """The caller's watch entries that changed something (`watch_entry`), after `after`.

    With `Accept: text/event-stream` (an EventSource sends it) a stream that stays open
    and tells new entries as they come (reconnect with Last-Event-ID); otherwise the
    entries so far, as JSON.
    """
    log, stream = manager.events, events_stream(owner)
    wanted = after if after is not None else event_id(last_event_id)
    if "text/event-stream" not in request.headers.get("accept", ""):
        logged = await log.read(stream, after=wanted, limit=1000)
        return [LoggedEntry(id=e.id, event=e.name, data=e.data) for e in logged]
    start_after = await resume_point(log, stream, wanted, set()) or 0

    async def frames() -> AsyncIterator[bytes]:
        metrics.sse_clients.inc()
        try:
            async for event in log.follow(stream, start_after):
                yield sse_frame(event)
                metrics.events_sent.inc()
        finally:
            metrics.sse_clients.dec()

    return event_stream(streams, frames())
