"""The Platform API's threads: create, read, patch, delete, search; their states and history."""

import asyncio
from typing import Any

from fastapi import APIRouter, Response
from langgraph_sdk import schema as sdk

from app.dependencies import Manager, Owner, StoredThread
from app.edge import StrictJSONRoute
from app.platform_api import (
    CheckpointQuery,
    HistoryQuery,
    StateUpdate,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
)
from app.platform_json import saved_at, state_json, thread_json
from app.platform_schema import PLATFORM_ERRORS, StateWritten, Thread, ThreadState, doc
from service.platform_runs import thread_status
from service.runs import RunManager
from stores.registry import ThreadRecord

# How far `threads/search` reads the registry, page by page, for its filters.
_SEARCH_PAGE = 100

router = APIRouter(
    tags=["langgraph platform"], responses=PLATFORM_ERRORS, route_class=StrictJSONRoute
)


async def _thread(manager: RunManager, record: ThreadRecord) -> sdk.Thread:
    return thread_json(record, await manager.snapshot(record.thread_id))


def _matches(metadata: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return not wanted or all(metadata.get(k) == v for k, v in wanted.items())


@router.post("/threads", **doc(Thread))
async def create_thread(body: ThreadCreate, owner: Owner, manager: Manager) -> sdk.Thread:
    """A new thread, waiting for its first run."""
    record = await manager.create_thread(owner, body.thread_id, body.metadata, body.if_exists)
    return await _thread(manager, record)


@router.get("/threads/{thread_id}", **doc(Thread))
async def get_thread(thread_id: StoredThread, owner: Owner, manager: Manager) -> sdk.Thread:
    """The thread: status, metadata, values, pending interrupts."""
    return await _thread(manager, await manager.get(owner, thread_id))


@router.patch("/threads/{thread_id}", **doc(Thread))
async def patch_thread(
    thread_id: StoredThread, body: ThreadPatch, owner: Owner, manager: Manager
) -> sdk.Thread:
    """Merge metadata into the thread's."""
    return await _thread(manager, await manager.merge_metadata(owner, thread_id, body.metadata))


@router.delete("/threads/{thread_id}", status_code=204)
async def delete_thread(thread_id: StoredThread, owner: Owner, manager: Manager) -> Response:
    """Remove the thread, its runs, checkpoints and events."""
    await manager.delete(owner, thread_id)
    return Response(status_code=204)


@router.post("/threads/search", **doc(list[Thread]))
async def search_threads(body: ThreadSearch, owner: Owner, manager: Manager) -> list[sdk.Thread]:
    """The caller's threads, newest first, filtered by status and metadata."""
    wanted: list[ThreadRecord] = []
    cursor: str | None = None
    while len(wanted) < body.offset + body.limit:
        page, cursor = await manager.threads(owner, _SEARCH_PAGE, cursor)
        wanted += [
            r
            for r in page
            if _matches(r.metadata, body.metadata)
            and (body.status is None or thread_status(r.status) == body.status)
        ]
        if cursor is None:
            break
    chosen = wanted[body.offset : body.offset + body.limit]
    return list(await asyncio.gather(*(_thread(manager, r) for r in chosen)))


@router.get("/threads/{thread_id}/state", **doc(ThreadState))
async def get_state(thread_id: StoredThread, owner: Owner, manager: Manager) -> sdk.ThreadState:
    """The thread's latest checkpoint."""
    return state_json(await manager.snapshot(thread_id))


@router.post("/threads/{thread_id}/state", **doc(StateWritten))
async def update_state(
    thread_id: StoredThread, body: StateUpdate, owner: Owner, manager: Manager
) -> sdk.ThreadUpdateStateResponse:
    """Edit an idle thread's state (as node `as_node`); answers the new checkpoint."""
    at = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
    written = await manager.update_state(owner, thread_id, body.values, body.as_node, at)
    return sdk.ThreadUpdateStateResponse(checkpoint=saved_at(written))


@router.get("/threads/{thread_id}/state/{checkpoint_id}", **doc(ThreadState))
async def get_state_at(
    thread_id: StoredThread, checkpoint_id: str, owner: Owner, manager: Manager
) -> sdk.ThreadState:
    """The thread's state at one checkpoint."""
    return state_json(await manager.snapshot(thread_id, checkpoint_id))


@router.post("/threads/{thread_id}/state/checkpoint", **doc(ThreadState))
async def post_state_at(
    thread_id: StoredThread, body: CheckpointQuery, owner: Owner, manager: Manager
) -> sdk.ThreadState:
    """The thread's state at the checkpoint given (the latest without an id)."""
    return state_json(await manager.snapshot(thread_id, body.checkpoint.get("checkpoint_id")))


@router.post("/threads/{thread_id}/history", **doc(list[ThreadState]))
async def get_history(
    thread_id: StoredThread, body: HistoryQuery, owner: Owner, manager: Manager
) -> list[sdk.ThreadState]:
    """The thread's checkpoints, newest first."""
    snapshots = await manager.history(thread_id, body.limit, body.before, body.metadata)
    return [state_json(s) for s in snapshots]
