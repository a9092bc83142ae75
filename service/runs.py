"""The run manager: what the API's and the CLI's commands do to a research thread.

Start, pause, resume, cancel, delete and re-run are decided here; a launcher executes the
runs and an executor records what they do. Pause takes effect at the next node boundary,
cancel at once. The manager also answers every read of a thread (`service.views`).
"""

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.errors import InvalidUpdateError
from langgraph.types import StateSnapshot

from core.models import ApprovalDecision, ResearchNote
from core.options import ResearchRequest
from core.state import coerce_update
from service.citations import SourceView, source_view
from service.errors import InvalidState, NotFound, Unprocessable
from service.execution import Admission, RunExecutor, RunInput
from service.launchers import Launcher
from service.platform_runs import FINISHED, PlatformRun
from service.reproduction import RunArchive, export_archive, rerun_of
from service.run_diff import RunDiff, diff_runs, side
from service.runner import is_finished, pending_interrupt, thread_config
from service.thread_ids import is_client_id, public_id, scoped
from service.views import ReportView, ThreadView, snapshot_report, thread_view
from stores.batching import committed_together
from stores.evidence import EvidenceStore
from stores.registry import ACTIVE, TERMINAL, RunStatus, ThreadExists, ThreadRecord


class RunManager:
    """Starts, pauses, resumes, cancels, deletes and re-runs research runs; reads them."""

    def __init__(
        self,
        executor: RunExecutor,
        launcher: Launcher,
        delete_checkpoints: Callable[[str], Awaitable[None]] | None = None,
        sole_writer: bool = True,
    ) -> None:
        self.executor = executor
        self.graph = executor.graph
        self.events = executor.events
        self.registry = executor.registry
        self.signals = executor.signals
        self.launcher = launcher
        self._delete_checkpoints = delete_checkpoints
        # When this process writes every status of its live runs (embedded mode), lookups
        # of them are answered from memory; otherwise the registry is always asked.
        self._records: dict[str, ThreadRecord] = {}
        if sole_writer:
            executor.observe(self._remember)

    def _remember(self, record: ThreadRecord) -> None:
        if record.status in TERMINAL:
            self._records.pop(record.thread_id, None)  # keep memory for threads still alive
        else:
            self._records[record.thread_id] = record

    # -- lifecycle -----------------------------------------------------------------------

    async def recover(self) -> int:
        """Continue the runs that were queued or running when their executor stopped."""
        records = await self.registry.active()
        for record in records:
            await self.launcher.ensure_running(record.thread_id)
        return len(records)

    async def shutdown(self) -> None:
        """Stop this process's runs; their checkpoints let them be continued later."""
        await self.launcher.close()

    # -- commands ------------------------------------------------------------------------

    async def start(
        self,
        owner: str,
        request: ResearchRequest,
        thread_id: str | None = None,
        seed: Callable[[str], Awaitable[None]] | None = None,
        stored_id: str | None = None,
        replay: bool = False,
    ) -> ThreadRecord:
        """Register a new thread and queue its run (TooManyRuns when no place is left).

        `thread_id`: a name the caller chose (ThreadExists if taken). `seed` writes what
        the run starts from (a re-run's first state) before it is queued. `stored_id`: the
        id the service chose (a watch's refresh; ThreadExists if registered). The
        collections the options name must be the owner's (NotFound), unless the run
        replays another's evidence (`replay`).
        """
        if request.options.collections and not replay:
            request = await self._collections_checked(owner, request)
        stored = stored_id or (uuid.uuid4().hex if thread_id is None else scoped(owner, thread_id))
        if thread_id is not None and (await self.snapshot(stored)).values:
            raise ThreadExists(stored)
        async with self.launcher.reserve(stored):
            record = _new_thread(
                stored,
                owner,
                "queued",
                topic=request.topic,
                options=request.options.model_dump(mode="json"),
            )
            if seed is not None:  # before the row: a run is never found without its start
                await seed(record.thread_id)
            # The first event is queued with the registry row: one write for both.
            queued = self.executor.events.emit(record.thread_id, "status", {"status": "queued"})
            with committed_together(queued):
                await self.registry.create(record)
            await queued
            self.executor.notify(record)
            await self.launcher.launch(record.thread_id, RunInput())
        return record

    async def _collections_checked(self, owner: str, request: ResearchRequest) -> ResearchRequest:
        """Return the request with its collections named by id; NotFound for one not the owner's."""
        collections = self.executor.collections
        if collections is None:
            raise Unprocessable("options.collections: this server keeps no collections")
        ids = await collections.resolve(owner, request.options.collections)
        options = request.options.model_copy(update={"collections": ids})
        return request.model_copy(update={"options": options})

    async def get(self, owner: str, thread_id: str) -> ThreadRecord:
        """Return the caller's thread, or raise NotFound (also for another owner's thread)."""
        record = self._records.get(thread_id) or await self.registry.get(thread_id)
        if record is None or record.owner != owner:
            raise NotFound(f"no research thread {thread_id!r}: list yours with GET /v1/research")
        return record

    async def resolve(self, owner: str, thread_id: str) -> str:
        """Return the stored id of the caller's thread that the caller calls `thread_id`.

        Another key's thread, or a name no client could use, is NotFound, like an id
        nobody has (`service.thread_ids`).
        """
        if is_client_id(thread_id):
            for stored in dict.fromkeys((thread_id, scoped(owner, thread_id))):
                record = self._records.get(stored) or await self.registry.get(stored)
                if record is not None and record.owner == owner:
                    return stored
        raise NotFound(f"no research thread {thread_id!r}: list yours with GET /v1/research")

    async def pause(self, owner: str, thread_id: str) -> ThreadRecord:
        """Stop the run at its next node boundary."""
        record = await self.get(owner, thread_id)
        if record.status not in ("queued", "running"):
            raise InvalidState(
                f"only a queued or running run can pause; this one is {record.status}"
            )
        await self.signals.request_pause(thread_id)
        return record

    async def resume(
        self, owner: str, thread_id: str, decision: ApprovalDecision | None
    ) -> ThreadRecord:
        """Continue a paused run, or answer the approval a run waits for.

        Decided under the thread's admission lock, so of two answers exactly one starts.
        """
        await self.get(owner, thread_id)
        async with self.signals.admission(thread_id):
            record = await self._latest(thread_id)
            if record.status == "paused" and decision is None:
                run_input = RunInput()
            elif record.status == "waiting_for_approval" and decision is not None:
                run_input = await self.executor.answering(thread_id, decision, RunInput())
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
            record = await self.executor.set_status(thread_id, "queued")
        await self.launcher.launch(thread_id, run_input)
        return record

    async def continue_from_checkpoint(self, owner: str, thread_id: str) -> ThreadRecord:
        """Continue a thread whose checkpoint has steps left though no run drives it.

        For the CLI's `resume` of a killed or failed run; a thread that waits for an
        answer, or has nothing left, is left as it is.
        """
        await self.get(owner, thread_id)
        async with self.signals.admission(thread_id):
            snapshot = await self.snapshot(thread_id)
            if pending_interrupt(snapshot) is not None or is_finished(snapshot):
                return await self._latest(thread_id)
            record = await self.executor.set_status(thread_id, "queued")
        await self.launcher.ensure_running(thread_id)
        return record

    async def _latest(self, thread_id: str) -> ThreadRecord:
        """Return the thread's record as the registry has it now (not from memory)."""
        record = await self.registry.get(thread_id)
        if record is None:
            raise NotFound(f"no research thread {thread_id!r}: it was deleted")
        return record

    # -- the LangGraph Platform API's view ---------------------------------------------

    async def create_thread(
        self, owner: str, thread_id: str | None, metadata: dict[str, Any], if_exists: str
    ) -> ThreadRecord:
        """Register a thread before its first run (status `new`, no topic yet).

        With `if_exists="do_nothing"`, the caller's thread of that name is returned as it is.
        """
        if thread_id is None:
            stored = str(uuid.uuid4())
        else:
            with contextlib.suppress(NotFound):
                stored = await self.resolve(owner, thread_id)
                return await self._existing(owner, stored, thread_id, if_exists)
            stored = scoped(owner, thread_id)
        record = _new_thread(stored, owner, "new", metadata=metadata)
        try:
            await self.registry.create(record)
        except ThreadExists:  # created at the same moment by another request of the caller
            return await self._existing(owner, stored, thread_id or stored, if_exists)
        return record

    async def _existing(
        self, owner: str, stored: str, thread_id: str, if_exists: str
    ) -> ThreadRecord:
        if if_exists == "do_nothing":
            return await self.get(owner, stored)
        raise InvalidState(f"thread {thread_id!r} already exists")

    async def merge_metadata(
        self, owner: str, thread_id: str, metadata: dict[str, Any]
    ) -> ThreadRecord:
        """Merge `metadata` into the thread's."""
        record = await self.get(owner, thread_id)
        updated = await self.registry.update(thread_id, metadata=record.metadata | metadata)
        if thread_id in self._records:  # the memory of a live thread must not go stale
            self._records[thread_id] = updated
        return updated

    async def start_platform_run(self, owner: str, run: PlatformRun, admission: Admission) -> None:
        """Start a Platform run: a new thread's topic, an answer, or a continuation.

        On a busy thread the run is rejected, or with `multitask_strategy` enqueue (or
        interrupt, which also pauses the current run) waits for the thread to stop.
        """
        thread_id = run.thread_id
        await self.get(owner, thread_id)
        if admission.request is not None and admission.request.options.collections:
            checked = await self._collections_checked(owner, admission.request)
            admission = admission.model_copy(update={"request": checked})
        # A new topic holds a place until its run is launched (after the lock).
        async with contextlib.AsyncExitStack() as place:
            async with self.signals.admission(thread_id):
                record = await self._latest(thread_id)
                # Runs already waiting keep their turn: a new one queues behind them.
                waiting = await self.executor.platform.next_enqueued(thread_id) is not None
                if record.status in ACTIVE or waiting:
                    if run.multitask_strategy == "reject":
                        raise InvalidState(
                            "the thread is busy with a run: join it, cancel it, or send this run "
                            "with multitask_strategy enqueue"
                        )
                    # Stored under the lock: the executor, as the current run stops, takes the
                    # same lock before it looks for waiting runs, so it finds this one.
                    queued = admission.model_dump(mode="json")
                    await self.executor.platform.start(run.model_copy(update={"enqueued": queued}))
                    if record.status in ACTIVE:
                        if run.multitask_strategy == "interrupt":
                            await self.signals.request_pause(thread_id)
                        return
                    # Idle with runs waiting: their executor stopped before it started them.
                    next_input = await self.executor.admit_waiting(thread_id)
                else:
                    if admission.request is not None:  # a new topic: a new run needs a place
                        await place.enter_async_context(self.launcher.reserve(thread_id))
                    next_input = await self.executor.admit(record, admission)
                    # The run's events are queued with the status's: one write for all.
                    started = self.executor.platform.start(run)
                    with committed_together(started):
                        await self.executor.set_status(thread_id, "queued")
                    await started
            if next_input is not None:
                await self.launcher.launch(thread_id, next_input)

    async def _admit_next(self, thread_id: str) -> None:
        run_input = await self.executor.admit_next(thread_id)
        if run_input is not None:
            await self.launcher.launch(thread_id, run_input)

    async def update_state(
        self,
        owner: str,
        thread_id: str,
        values: dict[str, Any] | None,
        as_node: str | None,
        at_checkpoint: str | None,
    ) -> RunnableConfig:
        """Write `values` into an idle thread's state as if node `as_node` returned them.

        The thread's status then follows the new checkpoint; return its config.
        Unprocessable says what is wrong with the update.
        """
        await self.get(owner, thread_id)
        try:
            update = coerce_update(values) if values is not None else None
        except ValueError as exc:  # pydantic's ValidationError is one
            raise Unprocessable(f"state update: {exc}") from None
        config = thread_config(thread_id, at_checkpoint)
        async with self.signals.admission(thread_id):
            record = await self._latest(thread_id)
            if record.status in ACTIVE:
                raise InvalidState("the thread is busy with a run: update its state once it stops")
            if record.status == "new":
                raise InvalidState("the thread has no state yet: start it with a run and a topic")
            if at_checkpoint:  # NotFound unless it is the thread's: never a state from nothing
                await self.snapshot(thread_id, at_checkpoint)
            try:
                written = await self.graph.aupdate_state(config, update, as_node=as_node)
            except InvalidUpdateError as exc:
                raise Unprocessable(f"state update: {exc}") from None
            await self.executor.update_status_from_checkpoint(thread_id)
        return written

    async def cancel_platform_run(self, owner: str, run_id: str, thread_id: str) -> None:
        """Cancel one Platform run: a waiting run is dropped, a started one stops its thread."""
        await self.get(owner, thread_id)
        async with self.signals.admission(thread_id):  # a waiting run is not started meanwhile
            run = await self.executor.platform.get(thread_id, run_id)
            if run is None:
                raise NotFound(f"no run {run_id!r} on thread {thread_id!r}")
            if run.status in FINISHED:
                raise InvalidState(f"the run has ended already ({run.status})")
            if run.enqueued is not None:
                await self.executor.platform.close(run, "interrupted", None)
                return
        await self.cancel(owner, thread_id)

    async def cancel(self, owner: str, thread_id: str) -> ThreadRecord:
        """Stop the run now; a paused or waiting run is closed."""
        record = await self.get(owner, thread_id)
        if record.status in TERMINAL:
            raise InvalidState(f"the run is already {record.status}")
        await self.signals.request_cancel(thread_id)
        await self.launcher.stop(thread_id)
        # A run that was executing closed itself; one that was not is closed here.
        latest = await self.registry.get(thread_id)
        if latest is None or latest.status not in TERMINAL:
            latest = await self.executor.finish(thread_id, "cancelled")
        await self._admit_next(thread_id)  # a run enqueued behind the cancelled one
        return latest

    async def delete(self, owner: str, thread_id: str) -> None:
        """Remove the thread: its run, checkpoints, events and registry entry.

        Under the thread's admission lock, so no run starts while the thread is removed.
        """
        await self.get(owner, thread_id)
        async with self.signals.admission(thread_id):
            await self.signals.request_cancel(thread_id)
            await self.launcher.stop(thread_id)
            if self._delete_checkpoints is not None:
                await self._delete_checkpoints(thread_id)
            await self.events.delete(thread_id)
            if self.executor.evidence is not None:
                await self.executor.evidence.delete(thread_id)
            await self.executor.platform.delete_thread(thread_id)
            await self.registry.delete(thread_id)
            await self.signals.clear(thread_id)
            self._records.pop(thread_id, None)

    # -- reads: views of threads, their checkpoints and Platform runs --------------------

    async def view(self, record: ThreadRecord) -> ThreadView:
        """Return the view of the thread `record` is the record of."""
        return thread_view(record, await self.snapshot(record.thread_id))

    async def report(self, thread_id: str) -> ReportView | None:
        """Return the thread's report (at the report gate, the draft), None before there is one."""
        return snapshot_report(await self.snapshot(thread_id))

    async def notes(self, thread_id: str) -> list[ResearchNote]:
        """Return the thread's research notes: one per search query."""
        values = (await self.snapshot(thread_id)).values or {}
        return list(values.get("notes", []))

    async def threads(
        self, owner: str, limit: int, cursor: str | None
    ) -> tuple[list[ThreadRecord], str | None]:
        """Return a page of the owner's threads, newest first, and the cursor of the next."""
        return await self.registry.list(owner, limit, cursor)

    async def snapshot(self, thread_id: str, checkpoint_id: str | None = None) -> StateSnapshot:
        """Return the thread's state at a checkpoint (the latest without one), or NotFound."""
        snapshot = await self.graph.aget_state(thread_config(thread_id, checkpoint_id))
        # A checkpoint the saver does not have comes back as an empty snapshot of the
        # config asked for: no creation time.
        found = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
        if checkpoint_id and (found != checkpoint_id or snapshot.created_at is None):
            raise NotFound(f"no checkpoint {checkpoint_id!r} on thread {public_id(thread_id)!r}")
        return snapshot

    async def history(
        self,
        thread_id: str,
        limit: int,
        before: dict[str, Any] | None,
        metadata: dict[str, Any] | None,
    ) -> list[StateSnapshot]:
        """Return the thread's checkpoints, newest first, before `before`, matching `metadata`."""
        until: RunnableConfig | None = {"configurable": before} if before else None
        snapshots = self.graph.aget_state_history(
            thread_config(thread_id), limit=limit, before=until, filter=metadata
        )
        return [s async for s in snapshots]

    def drawing(self) -> dict[str, Any]:
        """Return the graph's nodes and edges, as JSON."""
        drawn: dict[str, Any] = self.graph.get_graph().to_json()
        return drawn

    async def platform_run(self, thread_id: str, run_id: str) -> PlatformRun:
        """Return one Platform run of the thread, or raise NotFound."""
        run = await self.executor.platform.get(thread_id, run_id)
        if run is None:
            raise NotFound(f"no run {run_id!r} on thread {public_id(thread_id)!r}")
        return run

    async def platform_runs(self, thread_id: str) -> list[PlatformRun]:
        """Return the thread's Platform runs, newest first."""
        return await self.executor.platform.list(thread_id)

    # -- records: re-runs, citations, diffs, archives -----------------------------------

    def _evidence(self) -> EvidenceStore:
        if self.executor.evidence is None:
            raise InvalidState("this server keeps no evidence of its runs")
        return self.executor.evidence

    async def _values(self, thread_id: str) -> dict[str, Any]:
        return dict((await self.snapshot(thread_id)).values or {})

    async def rerun(
        self,
        owner: str,
        thread_id: str,
        mode: Literal["replay", "refresh"],
        stored_id: str | None = None,
    ) -> ThreadRecord:
        """Start a new thread re-running `thread_id`'s topic, options and plan (`rerun_of`).

        `stored_id`: the new thread's id, when the service chose it (ThreadExists if taken).
        """
        store = self._evidence()
        record = await self.registry.get(thread_id)
        if record is not None and record.status in ACTIVE:
            raise InvalidState(f"the run is {record.status}: re-run it once it has stopped")
        if stored_id is not None and await self.registry.get(stored_id) is not None:
            raise ThreadExists(stored_id)
        request, seed = await rerun_of(self.graph, store, thread_id, mode)
        return await self.start(
            owner, request, seed=seed, stored_id=stored_id, replay=mode == "replay"
        )

    async def source(self, thread_id: str, n: int) -> SourceView:
        """Return footnote `n` of the thread's report: the text the run read, and the quotes."""
        values = await self._values(thread_id)
        if not values.get("final_report"):
            raise InvalidState("there is no report yet: follow the events until 'report'")
        records = await self.executor.evidence.records(thread_id) if self.executor.evidence else []
        try:
            view = source_view(values, n, records)
        except LookupError as exc:
            raise NotFound(str(exc)) from None
        if self.executor.evidence is not None:
            kept = await self.executor.evidence.contents([view.content_hash])
            view.kept = view.content_hash in kept
        return view

    async def diff(self, thread_id: str, other_id: str) -> RunDiff:
        """Return what differs between the run of `thread_id` and that of `other_id`."""
        before, after = await asyncio.gather(self._values(thread_id), self._values(other_id))
        store = self.executor.evidence
        records = (
            await asyncio.gather(store.records(thread_id), store.records(other_id))
            if store is not None
            else ([], [])
        )
        return diff_runs(
            side(public_id(thread_id), before, records[0]),
            side(public_id(other_id), after, records[1]),
            before,
            after,
        )

    async def export_run(self, record: ThreadRecord) -> RunArchive:
        """Return the thread whole, as an archive."""
        return await export_archive(self.graph, self.events, self._evidence(), record)


def _new_thread(
    thread_id: str,
    owner: str,
    status: RunStatus,
    topic: str = "",
    options: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> ThreadRecord:
    """Return the record of a thread registered now."""
    now = datetime.now(UTC)
    return ThreadRecord(
        thread_id=thread_id,
        owner=owner,
        topic=topic,
        status=status,
        created_at=now,
        updated_at=now,
        options=options or {},
        metadata=metadata or {},
    )
