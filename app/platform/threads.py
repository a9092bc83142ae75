"""The Platform API's threads: create, read, patch, delete, search; their states and history."""

import asyncio
import re
from datetime import datetime
from typing import Any, Literal, cast

from fastapi import Response
from langchain_core.runnables import RunnableConfig
from langgraph.types import PregelTask, StateSnapshot
from langgraph_sdk import schema as sdk
from pydantic import BaseModel, Field, field_validator

from app.dependencies import Manager, Owner, StoredThread
from app.platform import Count, FreeJSON, Lenient, Metadata, doc, platform_router
from service.platform_runs import jsonable, thread_status
from service.runs import RunManager
from service.thread_ids import CLIENT_ID, CLIENT_ID_RULE, check_client_id, public_id
from stores.registry import ThreadRecord

# How far `threads/search` reads the registry, page by page, for its filters.
_SEARCH_PAGE = 100
# The keys a checkpoint's metadata can be filtered by: what the SQLite saver takes (it
# refuses any other with a ValueError, as its guard against SQL injection).
FILTER_KEY = r"^[a-zA-Z0-9_.-]+$"


class ThreadCreate(Lenient):
    """POST /threads."""

    thread_id: str | None = Field(
        None,
        description=f"An id of your choosing: {CLIENT_ID_RULE}.",
        json_schema_extra={"pattern": f"^{CLIENT_ID.pattern}$"},
    )
    metadata: Metadata = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"

    @field_validator("thread_id")
    @classmethod
    def _client_id(cls, value: str | None) -> str | None:
        return None if value is None else check_client_id(value)


class ThreadPatch(Lenient):
    """PATCH /threads/{id}."""

    metadata: Metadata = Field(default_factory=dict)


class ThreadSearch(Lenient):
    """POST /threads/search."""

    metadata: Metadata | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: Count = Field(10, ge=1, le=1000)
    offset: Count = Field(0, ge=0)


class HistoryQuery(Lenient):
    """POST /threads/{id}/history."""

    limit: Count = Field(10, ge=1, le=1000)
    before: FreeJSON | None = None
    metadata: Metadata | None = Field(
        None, json_schema_extra={"propertyNames": {"pattern": FILTER_KEY}}
    )

    @field_validator("metadata")
    @classmethod
    def _filter_keys(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key in value or {}:
            if re.match(FILTER_KEY, key) is None:
                raise ValueError(
                    f"metadata filter key {key[:40]!r}: use letters, digits, '_', '.' and '-' only"
                )
        return value


class CheckpointQuery(Lenient):
    """POST /threads/{id}/state/checkpoint."""

    checkpoint: FreeJSON = Field(default_factory=dict)


class StateUpdate(Lenient):
    """POST /threads/{id}/state."""

    values: FreeJSON | None = None
    as_node: str | None = None
    checkpoint: FreeJSON | None = None
    checkpoint_id: str | None = None


class Interrupt(BaseModel):
    """A question a thread waits on (the plan to approve)."""

    value: Any
    id: str


class Thread(BaseModel):
    """A research thread."""

    thread_id: str
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any]
    status: Literal["idle", "busy", "interrupted", "error"]
    values: dict[str, Any]
    interrupts: dict[str, list[Interrupt]]


class Checkpoint(BaseModel):
    """Where a state was saved."""

    thread_id: str | None
    checkpoint_ns: str
    checkpoint_id: str | None
    checkpoint_map: dict[str, Any] | None


class Task(BaseModel):
    """A step the thread will run next, or waits in."""

    id: str
    name: str
    error: str | None
    interrupts: list[Interrupt]
    checkpoint: Checkpoint | None
    state: dict[str, Any] | None
    result: Any


class ThreadState(BaseModel):
    """A thread's state at one checkpoint."""

    values: dict[str, Any]
    next: list[str]
    checkpoint: Checkpoint | None
    metadata: dict[str, Any]
    created_at: str | None
    parent_checkpoint: Checkpoint | None
    tasks: list[Task]
    interrupts: list[Interrupt]


class StateWritten(BaseModel):
    """The checkpoint a state update wrote."""

    checkpoint: Checkpoint | None


def checkpoint_json(config: RunnableConfig | None) -> sdk.Checkpoint | None:
    """Return where a state was saved, None for no config (a state with no parent)."""
    if not config:
        return None
    configurable = config.get("configurable", {})
    thread_id: Any = configurable.get("thread_id")  # always there: `thread_config` sets it
    return sdk.Checkpoint(
        thread_id=public_id(thread_id) if thread_id else thread_id,
        checkpoint_ns=configurable.get("checkpoint_ns", ""),
        checkpoint_id=configurable.get("checkpoint_id"),
        checkpoint_map=configurable.get("checkpoint_map"),
    )


def _task_interrupts(task: PregelTask) -> list[sdk.Interrupt]:
    return [sdk.Interrupt(value=jsonable(i.value), id=i.id) for i in task.interrupts]


def _interrupts(snapshot: StateSnapshot) -> list[sdk.Interrupt]:
    return [i for task in snapshot.tasks for i in _task_interrupts(task)]


def _task_json(task: PregelTask) -> sdk.ThreadTask:
    return sdk.ThreadTask(
        id=task.id,
        name=task.name,
        error=repr(task.error) if task.error else None,
        interrupts=_task_interrupts(task),
        checkpoint=None,
        state=None,
        result=jsonable(task.result) if task.result is not None else None,
    )


def state_json(snapshot: StateSnapshot) -> sdk.ThreadState:
    """Return a checkpoint as the SDK's ThreadState."""
    return sdk.ThreadState(
        values=jsonable(snapshot.values or {}),
        next=list(snapshot.next),
        checkpoint=cast(sdk.Checkpoint, checkpoint_json(snapshot.config)),
        metadata=jsonable(snapshot.metadata or {}),
        created_at=snapshot.created_at,
        parent_checkpoint=checkpoint_json(snapshot.parent_config),
        tasks=[_task_json(task) for task in snapshot.tasks],
        interrupts=_interrupts(snapshot),
    )


def thread_json(record: ThreadRecord, snapshot: StateSnapshot) -> sdk.Thread:
    """Return a thread, with the values and pending interrupts of its latest checkpoint."""
    return sdk.Thread(
        thread_id=public_id(record.thread_id),
        created_at=record.created_at,
        updated_at=record.updated_at,
        metadata=record.metadata,
        status=thread_status(record.status),
        values=jsonable(snapshot.values or {}),
        interrupts={t.id: _task_interrupts(t) for t in snapshot.tasks if t.interrupts},
    )


def values_json(snapshot: StateSnapshot) -> dict[str, Any]:
    """Return a thread's values as a run that waited for its end answers them."""
    result: dict[str, Any] = jsonable(snapshot.values or {})
    if interrupts := _interrupts(snapshot):
        result["__interrupt__"] = interrupts
    return result


router = platform_router()


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
    return sdk.ThreadUpdateStateResponse(checkpoint=cast(sdk.Checkpoint, checkpoint_json(written)))


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
