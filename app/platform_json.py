"""The Platform API's answers, typed as `langgraph_sdk.schema` defines them.

Built as the SDK reads them; FastAPI encodes them as they are (no response model filters
them: `app.platform_schema` documents their shapes for `/openapi.json`).
"""

from datetime import UTC, datetime
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.types import PregelTask, StateSnapshot
from langgraph_sdk import schema as sdk

from app.platform_api import ASSISTANT_ID, GRAPH_ID
from service.platform_runs import PlatformRun, jsonable, thread_status
from service.thread_ids import public_id
from stores.registry import ThreadRecord

_CREATED = datetime(2026, 1, 1, tzinfo=UTC)


class RunJSON(sdk.Run):
    """A run as this service answers it: the SDK's `Run` and what it was asked (`kwargs`)."""

    kwargs: dict[str, Any]


def assistant_json() -> sdk.Assistant:
    """The one assistant, as the SDK reads it."""
    return sdk.Assistant(
        assistant_id=ASSISTANT_ID,
        graph_id=GRAPH_ID,
        name=GRAPH_ID,
        description="Deep research: plan, search, write a cited report, review it.",
        config={},
        context={},
        metadata={},
        version=1,
        created_at=_CREATED,
        updated_at=_CREATED,
    )


def checkpoint_json(config: RunnableConfig | None) -> sdk.Checkpoint | None:
    """Where a state was saved, None for no config (a state with no parent)."""
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


def saved_at(config: RunnableConfig) -> sdk.Checkpoint:
    """The checkpoint a snapshot's own config, or a write's, names (never empty)."""
    return cast(sdk.Checkpoint, checkpoint_json(config))


def _task_interrupts(task: PregelTask) -> list[sdk.Interrupt]:
    """A task's pending interrupts as the SDK reads them."""
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
    """A checkpoint as the SDK's ThreadState."""
    return sdk.ThreadState(
        values=jsonable(snapshot.values or {}),
        next=list(snapshot.next),
        checkpoint=saved_at(snapshot.config),
        metadata=jsonable(snapshot.metadata or {}),
        created_at=snapshot.created_at,
        parent_checkpoint=checkpoint_json(snapshot.parent_config),
        tasks=[_task_json(task) for task in snapshot.tasks],
        interrupts=_interrupts(snapshot),
    )


def thread_json(record: ThreadRecord, snapshot: StateSnapshot) -> sdk.Thread:
    """A thread, with the values and pending interrupts of its latest checkpoint."""
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
    """A thread's values as a run that waited for its end answers them."""
    result: dict[str, Any] = jsonable(snapshot.values or {})
    if interrupts := _interrupts(snapshot):
        result["__interrupt__"] = interrupts
    return result


def run_json(run: PlatformRun) -> RunJSON:
    """A run as the SDK reads it (its times as pydantic writes them: `Z` for UTC)."""
    body = run.model_dump(mode="json", exclude={"request", "enqueued"})
    return cast(RunJSON, body | {"thread_id": public_id(run.thread_id), "kwargs": run.request})
