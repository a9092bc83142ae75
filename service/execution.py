"""Executing a research run: the graph from its last checkpoint to its next stop.

An execution ends when the graph finishes, waits for approval, pauses, fails or is
cancelled; what it does becomes statuses (registry) and events (event log). The same code
runs in the API process and in queue workers, and an execution delivered twice continues
from the checkpoint instead of repeating what is done.
"""

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from langgraph.types import Command, StateSnapshot, StreamMode
from pydantic import BaseModel, Field

from core.models import ApprovalDecision, Rerun
from core.options import ResearchRequest, RunOptions
from core.state import ReportStatus, initial_state
from engines.base import ModelAccessError
from graph.builder import ResearchGraph
from nodes.context import Deps
from nodes.members import PauseRequested
from nodes.progress import ExecutionProgress
from service.collections import Collections
from service.errors import InvalidState
from service.evidence import run_deps
from service.platform_runs import STREAM_MODES as PLATFORM_MODES
from service.platform_runs import PlatformRuns, stream_key
from service.runner import is_finished, pending_interrupt, question_of, thread_config
from service.signals import RunSignals
from service.thread_ids import public_id
from stores.batching import committed_together
from stores.data_file import storage_failure
from stores.events import TERMINAL_EVENT, EventLog
from stores.evidence import EvidenceStore
from stores.registry import ACTIVE, TERMINAL, Registry, RunStatus, ThreadRecord

logger = logging.getLogger(__name__)

# What a run that met a full disk says; and how its end is retried until there is room
# (first and longest pause, seconds).
DISK_FULL = (
    "the disk holding the data file is full: the run stopped and its checkpoint is kept; "
    "free space, then continue it (research-agent resume, or a new run of the topic)"
)
FULL_DISK_RETRY_S = (0.5, 10.0)

# The key of an `updates` chunk that says the graph stopped at an interrupt.
INTERRUPT = "__interrupt__"
# LangGraph's stream modes an execution reads (nodes emit their own events, `Deps.progress`).
STREAM_MODES: list[StreamMode] = ["updates"]
# Stream modes whose chunks carry the thread's config (debug checkpoints, message
# metadata): the client knows its thread by its own id, not the stored one.
CONFIG_MODES = frozenset({"debug", "messages"})


class RunInput(BaseModel):
    """What an execution of a thread starts with, small enough to travel in a queue job.

    `decision` answers the approval the thread waited on at checkpoint `after`; past that
    checkpoint it is applied already, and a second delivery only continues.
    """

    decision: dict[str, Any] | None = None
    after: str | None = None
    # Continued after its executor stopped or died: said so in the run's status event.
    recovered: bool = False
    # A LangGraph Platform run: its id, the stream modes it asked for, where to stop.
    run_id: str | None = None
    stream_modes: list[str] = Field(default_factory=list)
    interrupt_before: list[str] | Literal["*"] | None = None
    interrupt_after: list[str] | Literal["*"] | None = None


class Admission(BaseModel):
    """A Platform run's work: a new thread's topic, an answer, or (neither) a continuation."""

    request: ResearchRequest | None = None
    decision: ApprovalDecision | None = None
    run_input: RunInput = Field(default_factory=RunInput)


@dataclass
class Stop:
    """How an execution's stream ended; none of these set: the graph finished."""

    paused: bool = False  # by a pause request, at a node boundary
    interrupted: bool = False  # by an interrupt (a question, or interrupt_before/after)
    question: dict[str, Any] | None = None  # what the thread waits to have answered
    report: ReportStatus | None = None  # the status of the report finalize wrote, if it did


class RunExecutor:
    """Executes research threads and records their statuses and events."""

    def __init__(
        self,
        graph: ResearchGraph,
        deps: Deps,
        events: EventLog,
        registry: Registry,
        signals: RunSignals,
        transient: tuple[type[Exception], ...] = (),
        evidence: EvidenceStore | None = None,
        collections: Collections | None = None,
    ) -> None:
        self.graph = graph
        self.platform = PlatformRuns(events)
        self.events = events
        self.registry = registry
        self.signals = signals
        self._observers: list[Callable[[ThreadRecord], None]] = []
        # Per thread, writes queued but not yet known to be stored.
        self._pending: dict[str, list[Awaitable[object]]] = {}
        self.deps = deps
        # Where runs' evidence is recorded (None: it is not, and nothing can be re-run).
        self.evidence = evidence
        # The keys' document collections a run may search (None: there are none).
        self.collections = collections
        # Failures of a store away for a moment: the run is left `running` for a retry.
        self._transient = transient

    async def execute(self, thread_id: str, run_input: RunInput) -> None:
        """Run the thread until it stops, then the Platform runs enqueued behind it.

        An owner's cancel ends the run as `cancelled`; any other cancellation, or a
        transient store failure, propagates and leaves the run `running` for a retry.
        """
        next_input: RunInput | None = run_input
        while next_input is not None:
            if not await self._execute_once(thread_id, next_input):
                return
            next_input = await self.admit_next(thread_id)

    async def _execute_once(self, thread_id: str, run_input: RunInput) -> bool:
        """Run to the next stop; return False when cancelled."""
        streams = [thread_id]
        if run_input.run_id is not None:
            streams.append(stream_key(run_input.run_id))
        with self.events.writing(*streams):  # its followers here are served from memory
            return await self._run_to_stop(thread_id, run_input)

    async def _run_to_stop(self, thread_id: str, run_input: RunInput) -> bool:
        ended = True  # False: the run is left to a retry, its Platform run stays open
        try:
            record = await self.registry.get(thread_id)
            if record is None or record.status not in ACTIVE:
                return True  # deleted, finished, or stopped by an earlier delivery of this input
            if await self.signals.take_pause(thread_id):
                await self.set_status(thread_id, "paused")
                return True
            payload, rerun = await self._payload(record, run_input)
            deps = await run_deps(self._tools(record, rerun), self.evidence, thread_id, rerun)
            progress = ExecutionProgress(
                functools.partial(self._emit, thread_id), run_input.after or ""
            )
            pause_asked = functools.partial(self.signals.pause_asked, thread_id)
            deps = replace(deps, progress=progress, pause_asked=pause_asked)
            # Not awaited before the graph starts: the status event is queued ahead of the
            # graph's and awaited with them, before the stop is recorded.
            self._track(thread_id, self.activate(thread_id, "running", run_input.recovered))
            if run_input.run_id is not None:
                running = self.platform.mark_running(thread_id, run_input.run_id)
                self._track(thread_id, asyncio.ensure_future(running))
            stop = await self._stream(thread_id, payload, run_input, deps)
            await self._record_stop(thread_id, stop)
        except asyncio.CancelledError:
            if not await self.signals.cancel_requested(thread_id):
                ended = False
                raise  # the process stops: the run stays `running` and is continued later
            await self.finish(thread_id, "cancelled")
            return False
        except Exception as exc:  # a failed run is a status and an event, never a crash
            if caused(exc, lambda e: isinstance(e, PauseRequested)):  # mid-step, members kept
                await self.signals.take_pause(thread_id)
                await self._await_events(thread_id)
                await self._record_stop(thread_id, Stop(paused=True))
                return True
            if self._is_transient(exc):
                ended = False
                logger.warning("research run %s left for a retry: %s", thread_id, exc)
                raise
            if isinstance(exc, ModelAccessError):  # says which setting to fix, holds no secret
                # No traceback: the client library's own exception below it may quote the key.
                logger.error("research run %s failed: %s", thread_id, exc)
                message = str(exc)
            elif _disk_full(exc):
                logger.error("research run %s stopped: %s", thread_id, DISK_FULL)
                message = DISK_FULL
            else:
                logger.exception("research run %s failed", thread_id)
                message = f"{type(exc).__name__}: the run stopped; its checkpoint is kept"
            await self._record_failure(thread_id, message)
        finally:
            # Events of a run that stopped early: whatever became of them, they are done.
            leftover = self._pending.pop(thread_id, [])
            if leftover:
                await asyncio.gather(*leftover, return_exceptions=True)
            if ended and run_input.run_id is not None:
                await self._close_platform_runs(thread_id)
        return True

    def _tools(self, record: ThreadRecord, rerun: Rerun | None) -> Deps:
        """Return the run's tools: the server's, with the collections its options name.

        A replay answers from the evidence, whatever became of the collections since.
        """
        if self.collections is None or (rerun is not None and rerun.mode == "replay"):
            return self.deps
        options = RunOptions.model_validate(record.options)
        return self.collections.run_deps(record.owner, options, self.deps)

    async def _payload(self, record: ThreadRecord, run_input: RunInput) -> tuple[Any, Rerun | None]:
        """Return the graph input (a first state, an answer, or None) and the thread's re-run."""
        snapshot = await self.graph.aget_state(thread_config(record.thread_id))
        current = checkpoint_id(snapshot)
        if current is None:
            options = RunOptions.model_validate(record.options)
            return initial_state(record.topic, options), None
        rerun = (snapshot.values or {}).get("rerun")
        if run_input.decision is not None and current == run_input.after:
            return Command(resume=run_input.decision), rerun
        return None, rerun

    async def _stream(self, thread_id: str, payload: Any, run_input: RunInput, deps: Deps) -> Stop:
        """Run the graph, publishing its events and a Platform run's chunks; return the stop."""
        stop = Stop()
        config = thread_config(thread_id)
        public = public_id(thread_id)  # the id its client knows, in configs it streams
        wanted: dict[StreamMode, list[str]] = {}
        for name in run_input.stream_modes:
            wanted.setdefault(PLATFORM_MODES[name], []).append(name)
        modes = list(dict.fromkeys([*STREAM_MODES, *wanted]))
        async for mode, chunk in self.graph.astream(
            payload,
            config,
            context=deps,
            stream_mode=modes,
            # Each step waits for its checkpoint: the next step's events come after it.
            durability="sync",
            interrupt_before=run_input.interrupt_before,
            interrupt_after=run_input.interrupt_after,
        ):
            if run_input.run_id is not None and mode in wanted:
                if mode in CONFIG_MODES and public != thread_id:
                    chunk = renamed(chunk, thread_id, public)
                for name in wanted[mode]:
                    self._track(thread_id, self.platform.emit(run_input.run_id, name, chunk))
            if mode != "updates":
                continue
            if isinstance(chunk, dict):
                for update in chunk.values():
                    if isinstance(update, dict) and "report_status" in update:
                        stop.report = update["report_status"]
                if INTERRUPT in chunk:  # a question, or a stop before/after a node (empty)
                    stop.interrupted = True
                    if chunk[INTERRUPT] and stop.question is None:
                        stop.question = question_of(chunk[INTERRUPT][0])
            if await self.signals.take_pause(thread_id):
                stop.paused = True
                break
        await self._await_events(thread_id)
        return stop

    async def _record_stop(self, thread_id: str, stop: Stop) -> None:
        """Record the status the run stopped in."""
        if stop.question is not None:
            await self.signals.clear(thread_id)
            # Status first: a client that answers as soon as it sees the question must
            # find the run waiting, not still running (it would get a 409).
            await self.set_status(thread_id, "waiting_for_approval")
            await self.publish(thread_id, "approval_required", stop.question)
        elif stop.paused or stop.interrupted:  # a pause, or interrupt_before/after
            await self.set_status(thread_id, "paused")
        else:
            await self.finish(thread_id, "completed", report=stop.report)

    async def _record_failure(self, thread_id: str, message: str) -> None:
        """Record the failed run's `error` event and status, retried while the disk is full."""
        published = False
        pause, longest = FULL_DISK_RETRY_S
        while True:
            try:
                if not published:
                    await self.publish(
                        thread_id, "error", {"code": "run_failed", "message": message}
                    )
                    published = True
                await self.finish(thread_id, "failed", message)
                return
            except Exception as exc:
                if not _disk_full(exc):
                    raise
                logger.warning("run %s: its end waits for room on the disk (%s)", thread_id, exc)
            await asyncio.sleep(pause)
            pause = min(pause * 2, longest)

    def _is_transient(self, exc: BaseException) -> bool:
        """Return whether `exc` is (or wraps) a store failure that passes."""
        return caused(exc, lambda e: isinstance(e, self._transient))

    async def update_status_from_checkpoint(self, thread_id: str) -> None:
        """Make an idle thread's status follow its checkpoint (after its state was edited)."""
        snapshot = await self.graph.aget_state(thread_config(thread_id))
        if pending_interrupt(snapshot) is not None:
            status: RunStatus = "waiting_for_approval"
        elif not is_finished(snapshot):
            status = "paused"
        else:
            return  # nothing left to run: it stays as it ended
        record = await self.registry.get(thread_id)
        if record is not None and record.status != status:
            await self.set_status(thread_id, status)

    # -- statuses and events -------------------------------------------------------------

    def observe(self, observer: Callable[[ThreadRecord], None]) -> None:
        """Call `observer` with every status recorded here."""
        self._observers.append(observer)

    def notify(self, record: ThreadRecord) -> None:
        """Tell the observers of a status recorded elsewhere (a new thread's first)."""
        for observer in self._observers:
            observer(record)

    async def publish(self, thread_id: str, name: str, data: dict[str, Any]) -> None:
        """Append an event and wait until it is stored."""
        await self.events.append(thread_id, name, data)

    def _emit(
        self, thread_id: str, name: str, data: dict[str, Any], key: str | None = None
    ) -> None:
        """Queue a progress event without waiting for its commit (`_await_events` waits)."""
        self._track(thread_id, self.events.emit(thread_id, name, data, key=key))

    def _track(self, thread_id: str, pending: Awaitable[object]) -> None:
        self._pending.setdefault(thread_id, []).append(pending)

    async def _await_events(self, thread_id: str) -> None:
        """Wait until every event emitted for the thread is stored (raise if one failed)."""
        pending = self._pending.pop(thread_id, [])
        if pending:
            await asyncio.gather(*pending)

    async def set_status(
        self,
        thread_id: str,
        status: RunStatus,
        error: str | None = None,
        recovered: bool = False,
        report: ReportStatus | None = None,
    ) -> ThreadRecord:
        """Record a status (and the report's) and publish it as an event.

        A status that ends, pauses or questions the run is recorded before its event, so a
        client acting on the event finds it; an active one is written with it (`activate`).
        """
        if status in ACTIVE and error is None and report is None:
            # Awaited here, not through `activate`'s task: a task starts a turn later.
            return await self._activated(
                thread_id, status, self._status_emitted(thread_id, status, recovered)
            )
        record = await self.registry.set_status(thread_id, status, error, report)
        self.notify(record)
        await self.publish(thread_id, "status", _status_event(status, error, report, recovered))
        return record

    def activate(
        self, thread_id: str, status: RunStatus, recovered: bool = False
    ) -> "asyncio.Future[ThreadRecord]":
        """Record that the run is queued or running, with its status event queued at once.

        The record and the event are written together: an active status changes nothing a
        client may do, so the event may be stored a moment before the record. It is queued
        before this returns, ahead of any event the caller emits next.
        """
        event = self._status_emitted(thread_id, status, recovered)
        return asyncio.ensure_future(self._activated(thread_id, status, event))

    def _status_emitted(self, thread_id: str, status: RunStatus, recovered: bool) -> Awaitable[int]:
        assert status in ACTIVE
        return self.events.emit(thread_id, "status", _status_event(status, None, None, recovered))

    async def _activated(
        self, thread_id: str, status: RunStatus, event: Awaitable[int]
    ) -> ThreadRecord:
        """Record an active status whose event is queued already; return the record."""
        with committed_together(event):
            record = await self.registry.set_status(thread_id, status)
        self.notify(record)
        await event
        return record

    async def finish(
        self,
        thread_id: str,
        status: RunStatus,
        error: str | None = None,
        report: ReportStatus | None = None,
    ) -> ThreadRecord:
        """Close the run with a terminal status (and its report's) and the stream's last event."""
        assert status in TERMINAL
        try:
            await self._await_events(thread_id)
        except Exception:  # the run ends either way; its status must still be recorded
            logger.exception("events of %s could not be stored", thread_id)
        await self.signals.clear(thread_id)
        record = await self.set_status(thread_id, status, error, report=report)
        await self.publish(thread_id, TERMINAL_EVENT, {"status": status})
        # The thread's Platform run, executing, waiting or queued, ends here too.
        await self.platform.close_open(thread_id, status, error)
        return record

    # -- Platform runs: admission, and the runs waiting for a busy thread ----------------

    async def admit(self, record: ThreadRecord, admission: Admission) -> RunInput:
        """Return the input of a Platform run on this idle thread, or raise InvalidState.

        A topic starts a new thread, a decision answers its question, and neither
        continues a paused thread.
        """
        run_input = admission.run_input
        if admission.request is not None:
            if record.status != "new":
                raise InvalidState(
                    "this thread has researched its topic already: create a new thread for a "
                    "new topic, or answer its pending question with a command"
                )
            request = admission.request
            await self.registry.update(
                record.thread_id,
                topic=request.topic,
                options=request.options.model_dump(mode="json"),
            )
        elif admission.decision is not None:
            if record.status != "waiting_for_approval":
                raise InvalidState(f"nothing waits for an answer: the thread is {record.status}")
            run_input = await self.answering(record.thread_id, admission.decision, run_input)
        elif record.status != "paused":
            raise InvalidState(
                "give an input with a topic to start the thread, or a command to resume it"
            )
        return run_input

    async def answering(
        self, thread_id: str, decision: ApprovalDecision, run_input: RunInput
    ) -> RunInput:
        """Return `run_input` carrying the decision for the question the thread waits on."""
        snapshot = await self.graph.aget_state(thread_config(thread_id))
        return run_input.model_copy(
            update={"decision": decision.model_dump(mode="json"), "after": checkpoint_id(snapshot)}
        )

    async def admit_next(self, thread_id: str) -> RunInput | None:
        """Admit the oldest run enqueued for this idle thread; return its input, or None.

        A waiting run that no longer fits the thread ends in `error` and the next is tried.
        """
        async with self.signals.admission(thread_id):
            return await self.admit_waiting(thread_id)

    async def admit_waiting(self, thread_id: str) -> RunInput | None:
        """Do `admit_next` for a caller that holds the thread's admission lock."""
        while (run := await self.platform.next_enqueued(thread_id)) is not None:
            record = await self.registry.get(thread_id)
            if record is None or record.status in ACTIVE:
                return None  # gone, or busy again: a later stop admits it
            admission = Admission.model_validate(run.enqueued)
            try:
                run_input = await self.admit(record, admission)
            except InvalidState as exc:
                await self.platform.close(run, "error", exc.message)
                continue
            await self.platform.save(run.model_copy(update={"enqueued": None}))
            await self.signals.clear(thread_id)  # a pause asked of the run before it
            await self.set_status(thread_id, "queued")
            return run_input
        return None

    async def _close_platform_runs(self, thread_id: str) -> None:
        """End a Platform run that stopped short of the end (`finish` ends the rest)."""
        record = await self.registry.get(thread_id)
        if record is not None and record.status not in TERMINAL:
            await self.platform.close_open(thread_id, record.status, record.error)


def _disk_full(exc: BaseException) -> bool:
    """Return whether the data file's disk had no room for a write on the way to `exc`."""
    return caused(exc, lambda e: storage_failure(e) == "full")


def caused(exc: BaseException, test: Callable[[BaseException], bool]) -> bool:
    """Return whether `exc`, or an exception it was raised from or during, passes `test`."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain of causes is short; a cycle of contexts must not hang
        if seen is None:
            return False
        if test(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _status_event(
    status: RunStatus, error: str | None, report: ReportStatus | None, recovered: bool
) -> dict[str, Any]:
    """Return the payload of a `status` event."""
    data: dict[str, Any] = {"status": status}
    if error:
        data["error"] = error
    if report:
        data["report"] = report
    if recovered:
        data["recovered"] = True
    return data


def checkpoint_id(snapshot: StateSnapshot) -> str | None:
    """Return the id of the checkpoint a snapshot was read from; None for a thread never run."""
    value = snapshot.config.get("configurable", {}).get("checkpoint_id")
    return str(value) if value else None


def renamed(value: Any, stored: str, public: str) -> Any:
    """Return `value` with every string `stored` in it replaced by `public`."""
    if isinstance(value, str):
        return public if value == stored else value
    if isinstance(value, dict):
        return {key: renamed(item, stored, public) for key, item in value.items()}
    if isinstance(value, list | tuple):
        items = [renamed(item, stored, public) for item in value]
        if hasattr(value, "_fields"):  # a named tuple takes its fields one by one
            return type(value)(*items)
        return type(value)(items)
    return value
