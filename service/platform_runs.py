"""LangGraph Platform runs: their records and their streams, kept in the event log.

- `platform-runs:{thread_id}` holds one event per change of a run's record; the newest
  event of a run is its record;
- `platform-run:{run_id}` is what the run streams, in the SDK's framing: `metadata`
  first, then one event per chunk, `error` if it failed, and `end` last.

Both names hold a `:`, which no thread id has (`service.thread_ids`).
"""

import asyncio
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any, Literal

from langgraph.types import StreamMode
from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python

from stores.events import EventLog
from stores.registry import RunStatus

PlatformRunStatus = Literal["pending", "running", "error", "success", "timeout", "interrupted"]
PlatformThreadStatus = Literal["idle", "busy", "interrupted", "error"]
RECORD_EVENT = "run"
END_EVENT = "end"
# The Platform's stream modes, and the LangGraph mode each one is made from.
STREAM_MODES: dict[str, StreamMode] = {
    "values": "values",
    "updates": "updates",
    "custom": "custom",
    "messages-tuple": "messages",
    "debug": "debug",
}
# The SDK names a messages-tuple chunk `messages`.
EVENT_NAMES = {"messages-tuple": "messages"}

_THREAD_STATUS: dict[RunStatus, PlatformThreadStatus] = {
    "new": "idle",
    "queued": "busy",
    "running": "busy",
    "waiting_for_approval": "interrupted",
    "paused": "interrupted",
    "completed": "idle",
    "cancelled": "idle",
    "failed": "error",
}
_RUN_STATUS: dict[RunStatus, PlatformRunStatus] = {
    "new": "pending",
    "queued": "pending",
    "running": "running",
    "waiting_for_approval": "interrupted",
    "paused": "interrupted",
    "completed": "success",
    "cancelled": "interrupted",
    "failed": "error",
}
FINISHED: frozenset[PlatformRunStatus] = frozenset({"error", "success", "timeout", "interrupted"})


def thread_status(status: RunStatus) -> PlatformThreadStatus:
    """Return the Platform's name for a thread in this state."""
    return _THREAD_STATUS[status]


def jsonable(value: Any) -> Any:
    """Return a chunk or state as the SDK receives it: pydantic models and messages as dicts."""
    return to_jsonable_python(value, fallback=repr)


class PlatformRun(BaseModel):
    """A run as the Platform API shows it."""

    run_id: str
    thread_id: str
    assistant_id: str
    created_at: datetime
    updated_at: datetime
    status: PlatformRunStatus = "pending"
    metadata: dict[str, Any] = Field(default_factory=dict)
    multitask_strategy: str = "reject"
    # What the run was asked to do (input, command, stream modes, ...): the API's `kwargs`.
    request: dict[str, Any] = Field(default_factory=dict)
    # A run sent to a busy thread waits here, its work validated
    # (`service.execution.Admission`), until the thread is free; None once it has started.
    enqueued: dict[str, Any] | None = None


def records_key(thread_id: str) -> str:
    """Return the event-log stream that holds the thread's run records."""
    return f"platform-runs:{thread_id}"


def stream_key(run_id: str) -> str:
    """Return the event-log stream of one run's chunks."""
    return f"platform-run:{run_id}"


class PlatformRuns:
    """Records and streams of Platform runs, on the service's event log."""

    def __init__(self, events: EventLog) -> None:
        self.events = events

    async def save(self, run: PlatformRun) -> PlatformRun:
        """Store the run's record as it is now."""
        await self.events.append(
            records_key(run.thread_id), RECORD_EVENT, run.model_dump(mode="json")
        )
        return run

    async def list(self, thread_id: str) -> list[PlatformRun]:
        """Return the thread's runs, newest first."""
        latest: dict[str, PlatformRun] = {}
        for event in await self.events.read(records_key(thread_id)):
            run = PlatformRun.model_validate(event.data)
            latest[run.run_id] = run
        return sorted(latest.values(), key=lambda r: r.created_at, reverse=True)

    async def get(self, thread_id: str, run_id: str) -> PlatformRun | None:
        """Return one run of the thread, or None."""
        return next((r for r in await self.list(thread_id) if r.run_id == run_id), None)

    async def set_status(self, run: PlatformRun, status: PlatformRunStatus) -> PlatformRun:
        """Record the run's new status."""
        changed = run.model_copy(update={"status": status, "updated_at": datetime.now(UTC)})
        return await self.save(changed)

    def start(self, run: PlatformRun) -> Awaitable[object]:
        """Record a new run and open its stream with the `metadata` event.

        Both events are queued before this returns; the awaitable ends once both are stored.
        """
        record = self.events.emit(
            records_key(run.thread_id), RECORD_EVENT, run.model_dump(mode="json")
        )
        opened = self.events.emit(
            stream_key(run.run_id), "metadata", {"run_id": run.run_id, "attempt": 1}
        )
        return asyncio.gather(record, opened)

    def emit(self, run_id: str, mode: str, chunk: Any) -> Awaitable[int]:
        """Queue one chunk of the run's stream, named as the SDK expects."""
        name = EVENT_NAMES.get(mode, mode)
        return self.events.emit(stream_key(run_id), name, chunk, lenient=True)

    async def close_open(self, thread_id: str, status: RunStatus, error: str | None) -> None:
        """End the thread's started runs (not closed or enqueued ones): it stopped in `status`."""
        final = _RUN_STATUS[status]
        for run in await self.list(thread_id):
            if run.status not in FINISHED and run.enqueued is None:
                await self.close(run, final, error)

    async def close(self, run: PlatformRun, final: PlatformRunStatus, error: str | None) -> None:
        """End one run: its stream gets `error` first if it failed, then `end`."""
        if final == "error":
            await self.events.append(
                stream_key(run.run_id),
                "error",
                {"error": "RunFailed", "message": error or "the run failed"},
            )
        await self.set_status(run.model_copy(update={"enqueued": None}), final)
        await self.events.append(
            stream_key(run.run_id), END_EVENT, {"run_id": run.run_id, "status": final}
        )

    async def next_enqueued(self, thread_id: str) -> PlatformRun | None:
        """Return the thread's oldest run still waiting for its turn."""
        waiting = [r for r in await self.list(thread_id) if r.enqueued is not None]
        return waiting[-1] if waiting else None

    async def mark_running(self, thread_id: str, run_id: str) -> None:
        """Record that a worker started executing the run."""
        run = await self.get(thread_id, run_id)
        if run is not None and run.status == "pending":
            await self.set_status(run, "running")

    async def delete_thread(self, thread_id: str) -> None:
        """Forget every run of the thread, records and streams."""
        for run in await self.list(thread_id):
            await self.events.delete(stream_key(run.run_id))
        await self.events.delete(records_key(thread_id))
