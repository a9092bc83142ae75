"""The run manager: research runs as background tasks, everything they do as events.

Every step of a run becomes an event in the event log that any client can stream. One manager per process. Runs wait `queued` for a slot (`max_concurrent`); beyond
`max_queued` waiting runs a start is refused. Pause takes effect at the next node
boundary (the graph's own checkpoint), cancel at once (in-flight searches included).
A run's task never raises: whatever happens is recorded as a status and events.
"""

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from langgraph.types import Command, StreamMode

from app.errors import InvalidState, NotFound, TooManyRuns
from app.events import TERMINAL_EVENT, EventLog
from app.registry import TERMINAL, Registry, RunStatus, ThreadRecord
from app.runner import is_finished, pending_interrupt, thread_config
from engines.base import ModelAccessError
from graph.builder import ResearchGraph
from graph.models import ApprovalDecision, ResearchRequest
from graph.state import initial_state
from nodes.context import Deps

logger = logging.getLogger(__name__)

# LangGraph's stream modes the events are made from.
STREAM_MODES: list[StreamMode] = ["tasks", "updates", "custom"]


class RunManager:
    """Starts, pauses, resumes and cancels research runs; publishes their events."""

    def __init__(
        self,
        graph: ResearchGraph,
        deps: Deps,
        events: EventLog,
        registry: Registry,
        max_concurrent: int = 8,
        max_queued: int = 100,
        delete_checkpoints: Callable[[str], Awaitable[None]] | None = None,
        on_status: Callable[[ThreadRecord], None] | None = None,
    ) -> None:
        self.graph = graph
        self.deps = deps
        self.events = events
        self.registry = registry
        self._slots = asyncio.Semaphore(max_concurrent)
        self._capacity = max_concurrent + max_queued
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._pause_requested: set[str] = set()
        self._delete_checkpoints = delete_checkpoints
        self._stopping = False
        self._on_status = on_status
        # This process writes every status of its live runs, so it can answer lookups of
        # them from memory; the registry stays the record (finished runs, restarts).
        self._records: dict[str, ThreadRecord] = {}
        # Progress events queued but not yet known to be stored, per thread.
        self._unsettled: dict[str, list[Awaitable[int]]] = {}

    # -- lifecycle -----------------------------------------------------------------------

    async def recover(self) -> int:
        """Resume the runs that were queued or running when the process stopped."""
        records = await self.registry.active()
        for record in records:
            await self._publish(record.thread_id, "status", {"status": "queued", "recovered": True})
            self._launch(record.thread_id, None)
        return len(records)

    async def shutdown(self) -> None:
        """Stop every run at once; their checkpoints let `recover` pick them up again."""
        self._stopping = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- commands ------------------------------------------------------------------------

    async def start(self, owner: str, request: ResearchRequest) -> ThreadRecord:
        """Register a new thread and queue its run."""
        if len(self._tasks) >= self._capacity:
            raise TooManyRuns(
                f"{len(self._tasks)} runs are queued or running, the limit: retry later"
            )
        now = datetime.now(UTC)
        record = ThreadRecord(
            thread_id=uuid.uuid4().hex,
            owner=owner,
            topic=request.topic,
            status="queued",
            created_at=now,
            updated_at=now,
            options=request.options.model_dump(mode="json"),
        )
        # The registry row and the first event are independent writes: one wait for both.
        await asyncio.gather(
            self.registry.create(record),
            self._publish(record.thread_id, "status", {"status": "queued"}),
        )
        self._records[record.thread_id] = record
        if self._on_status is not None:
            self._on_status(record)
        self._launch(record.thread_id, initial_state(request.topic, request.options))
        return record

    async def get(self, owner: str, thread_id: str) -> ThreadRecord:
        """The caller's thread, or NotFound (also for another owner's thread)."""
        record = self._records.get(thread_id) or await self.registry.get(thread_id)
        if record is None or record.owner != owner:
            raise NotFound(f"no research thread {thread_id!r}: list yours with GET /v1/research")
        return record

    async def pause(self, owner: str, thread_id: str) -> ThreadRecord:
        """Stop the run at its next node boundary."""
        record = await self.get(owner, thread_id)
        if record.status not in ("queued", "running"):
            raise InvalidState(
                f"only a queued or running run can pause; this one is {record.status}"
            )
        self._pause_requested.add(thread_id)
        return record

    async def resume(
        self, owner: str, thread_id: str, decision: ApprovalDecision | None
    ) -> ThreadRecord:
        """Continue a paused run, or answer the approval a run waits for."""
        record = await self.get(owner, thread_id)
        if record.status == "paused" and decision is None:
            payload: Any = None
        elif record.status == "waiting_for_approval" and decision is not None:
            payload = Command(resume=decision.model_dump(mode="json"))
        elif record.status == "waiting_for_approval":
            raise InvalidState(
                "this run waits for approval: send a decision (approve, edit or reject)"
            )
        elif record.status == "paused":
            raise InvalidState(
                "this run is paused, not waiting for approval: resume with an empty body"
            )
        else:
            raise InvalidState(
                f"only a paused or waiting run can resume; this one is {record.status}"
            )
        record = await self._set_status(thread_id, "queued")
        self._launch(thread_id, payload)
        return record

    async def cancel(self, owner: str, thread_id: str) -> ThreadRecord:
        """Stop the run now; a paused or waiting run is closed."""
        record = await self.get(owner, thread_id)
        if record.status in TERMINAL:
            raise InvalidState(f"the run is already {record.status}")
        task = self._tasks.get(thread_id)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return await self.get(owner, thread_id)
        return await self._finish(thread_id, "cancelled")

    async def delete(self, owner: str, thread_id: str) -> None:
        """Remove the thread: its run, checkpoints, events and registry entry."""
        await self.get(owner, thread_id)
        task = self._tasks.get(thread_id)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._delete_checkpoints is not None:
            await self._delete_checkpoints(thread_id)
        await self.events.delete(thread_id)
        await self.registry.delete(thread_id)
        self._records.pop(thread_id, None)

    # -- the run itself ------------------------------------------------------------------

    def _launch(self, thread_id: str, payload: Any) -> None:
        task = asyncio.create_task(self._run(thread_id, payload), name=f"research-{thread_id}")
        self._tasks[thread_id] = task
        task.add_done_callback(lambda done: self._forget(thread_id, done))

    def _forget(self, thread_id: str, task: asyncio.Task[None]) -> None:
        # A resumed run may already have a newer task under the same id: keep that one.
        if self._tasks.get(thread_id) is task:
            del self._tasks[thread_id]

    async def _run(self, thread_id: str, payload: Any) -> None:
        try:
            async with self._slots:
                if thread_id in self._pause_requested:
                    self._pause_requested.discard(thread_id)
                    await self._set_status(thread_id, "paused")
                    return
                await self._set_status(thread_id, "running")
                paused = await self._stream(thread_id, payload)
            await self._settle(thread_id, paused)
        except asyncio.CancelledError:
            if self._stopping:
                raise  # the process stops: the run stays `running` and is recovered later
            await self._finish(thread_id, "cancelled")
        except Exception as exc:  # a failed run is a status and an event, never a crash
            if isinstance(exc, ModelAccessError):  # says which setting to fix, holds no secret
                # No traceback: the client library's own exception below it may quote the key.
                logger.error("research run %s failed: %s", thread_id, exc)
                message = str(exc)
            else:
                logger.exception("research run %s failed", thread_id)
                message = f"{type(exc).__name__}: the run stopped; its checkpoint is kept"
            await self._publish(thread_id, "error", {"code": "run_failed", "message": message})
            await self._finish(thread_id, "failed", message)

    async def _stream(self, thread_id: str, payload: Any) -> bool:
        """Run the graph, publishing its events; True when stopped by a pause request."""
        config = thread_config(thread_id)
        async for mode, chunk in self.graph.astream(
            payload, config, context=self.deps, stream_mode=STREAM_MODES
        ):
            self._translate(thread_id, str(mode), chunk)
            if mode == "updates" and thread_id in self._pause_requested:
                self._pause_requested.discard(thread_id)
                await self._settle_events(thread_id)
                return True
        await self._settle_events(thread_id)
        return False

    def _translate(self, thread_id: str, mode: str, chunk: Any) -> None:
        if mode == "custom" and isinstance(chunk, dict) and "event" in chunk:
            payload = {k: v for k, v in chunk.items() if k != "event"}
            self._emit(thread_id, str(chunk["event"]), payload)
        elif mode == "tasks" and isinstance(chunk, dict):
            if "result" not in chunk:
                self._emit(thread_id, "node_started", {"node": chunk["name"]})
            elif not chunk.get("interrupts"):
                result = chunk.get("result") or {}
                data: dict[str, Any] = {"node": chunk["name"]}
                if "iteration_count" in result:
                    data["iteration"] = result["iteration_count"]
                self._emit(thread_id, "node_finished", data)

    async def _settle(self, thread_id: str, paused: bool) -> None:
        snapshot = await self.graph.aget_state(thread_config(thread_id))
        question = pending_interrupt(snapshot)
        if question is not None:
            # Status first: a client that answers as soon as it sees the question must
            # find the run waiting, not still running (it would get a 409).
            await self._set_status(thread_id, "waiting_for_approval")
            await self._publish(thread_id, "approval_required", question)
        elif paused and not is_finished(snapshot):
            await self._set_status(thread_id, "paused")
        else:
            await self._finish(thread_id, "completed")

    # -- records and events --------------------------------------------------------------

    async def _publish(self, thread_id: str, name: str, data: dict[str, Any]) -> None:
        await self.events.append(thread_id, name, data)

    def _emit(self, thread_id: str, name: str, data: dict[str, Any]) -> None:
        """Queue a progress event without waiting for its commit (`_settle_events` waits)."""
        self._unsettled.setdefault(thread_id, []).append(self.events.emit(thread_id, name, data))

    async def _settle_events(self, thread_id: str) -> None:
        """Wait until every event emitted for the thread is stored (raise if one failed)."""
        pending = self._unsettled.pop(thread_id, [])
        if pending:
            await asyncio.gather(*pending)

    async def _set_status(
        self, thread_id: str, status: RunStatus, error: str | None = None
    ) -> ThreadRecord:
        record = await self.registry.set_status(thread_id, status, error)
        if status in TERMINAL:
            self._records.pop(thread_id, None)  # keep memory for the threads still alive
        else:
            self._records[thread_id] = record
        if self._on_status is not None:
            self._on_status(record)
        await self._publish(
            thread_id, "status", {"status": status, **({"error": error} if error else {})}
        )
        return record

    async def _finish(
        self, thread_id: str, status: RunStatus, error: str | None = None
    ) -> ThreadRecord:
        try:
            await self._settle_events(thread_id)
        except Exception:  # the run ends either way; its status must still be recorded
            logger.exception("events of %s could not be stored", thread_id)
        record = await self._set_status(thread_id, status, error)
        await self._publish(thread_id, TERMINAL_EVENT, {"status": status})
        return record
