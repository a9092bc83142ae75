"""`research-agent run`, `resume` and `show`: research threads through the run service.

A run from the terminal is a thread like any other: the same run manager registers it,
executes it, records its statuses and events in the data file (or Redis), so it shows
in `GET /v1/research` and on the web page. The terminal follows its events as an SSE
client would, and answers an approval through the manager.
"""

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NoReturn

import click
from langgraph.types import StateSnapshot
from rich.markup import escape
from rich.table import Table

from app.cli_approval import ask_in_terminal
from app.cli_common import err, fail, interrupted_before_start, print_report
from app.cli_progress import ProgressPrinter
from app.deps import EngineSetupError
from app.runtime import Runtime, open_runtime, running_worker
from app.settings import Settings
from app.stores import BackendSetupError, Stores, open_stores
from core.options import ResearchRequest
from graph.builder import ResearchGraph, build_graph
from service.errors import NotFound
from service.runner import is_finished, pending_interrupt, remaining_steps, thread_config
from service.thread_ids import LOCAL_OWNER
from stores.registry import ThreadExists
from tools.local_corpus import CorpusMissingError


@asynccontextmanager
async def _runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """The service's runtime in this process (with a worker, on Redis); its runs stop on exit."""
    try:
        async with open_runtime(settings) as runtime:
            try:
                if runtime.queued is None:
                    yield runtime
                else:
                    async with running_worker(runtime):
                        yield runtime
            finally:
                await runtime.manager.shutdown()
    except (CorpusMissingError, EngineSetupError, BackendSetupError) as exc:
        fail(str(exc))


async def _snapshot(runtime: Runtime, thread_id: str) -> StateSnapshot:
    return await runtime.manager.snapshot(thread_id)


async def _follow(runtime: Runtime, thread_id: str, after: int, interactive: bool) -> str | None:
    """Print the thread's events after `after` until its run ends or waits; an error's text.

    An approval it waits for is asked here when `interactive`, and the answer sent
    through the run manager; the run then goes on and is followed further.
    """
    printer = ProgressPrinter()
    printer.sources = len((await _snapshot(runtime, thread_id)).values.get("research_data", []))
    error: str | None = None
    async for event in runtime.stores.events.follow(thread_id, after):
        data = event.data
        if not isinstance(data, dict):
            continue
        if event.name == "status" and data["status"] == "paused":
            break  # no further event until someone resumes it
        if event.name == "error":
            error = str(data.get("message", "the run failed"))
        elif event.name == "approval_required":
            answer = await ask_in_terminal(data) if interactive else None
            if answer is None:
                break
            await runtime.manager.resume(LOCAL_OWNER, thread_id, answer)
        else:
            printer(event.name, data)
    return error


async def _finish(
    runtime: Runtime, thread_id: str, out_file: Path | None, error: str | None
) -> None:
    """Print the report (or where the thread stopped, and how to go on)."""
    snapshot = await _snapshot(runtime, thread_id)
    values: dict[str, Any] = snapshot.values
    waiting = pending_interrupt(snapshot)
    if error is not None and not is_finished(snapshot):
        fail(f"{error} (then `research-agent resume {thread_id}`)")
    if waiting is not None:
        err.print(
            f"\n[yellow]waiting for approval[/] of the {escape(str(waiting.get('type', 'plan')))}: "
            f"run `research-agent resume {escape(thread_id)}`"
        )
        return
    report = values.get("final_report")
    if not report:
        err.print(f"\n[yellow]not finished[/]: run `research-agent resume {escape(thread_id)}`")
        return
    if out_file is not None:
        out_file.write_text(report, encoding="utf-8")
        err.print(f"\nreport written to {escape(str(out_file))}")
    else:
        print_report(report)
    err.print(
        f"[green]done[/] · thread {escape(thread_id)} · status {values.get('report_status')} · {len(values.get('research_data', []))} sources"
    )


async def research(
    settings: Settings,
    request: ResearchRequest,
    thread_id: str,
    out_file: Path | None,
    interactive: bool,
    started: threading.Event | None = None,
) -> None:
    """Start thread `thread_id` through the run service, follow it, print its report.

    `started` is set once the thread exists (a Ctrl-C after it leaves a thread to resume).
    """
    async with _runtime(settings) as runtime:
        try:
            record = await runtime.manager.start(LOCAL_OWNER, request, thread_id)
        except ThreadExists:
            fail(
                f"thread {thread_id!r} already exists: use `research-agent resume {thread_id}` or another --thread"
            )
        if started is not None:
            started.set()
        deps = runtime.executor.deps
        err.print(f"engine {deps.engine.name} · search {deps.search.name}")
        error = await _follow(runtime, record.thread_id, 0, interactive)
        await _finish(runtime, record.thread_id, out_file, error)


def _unknown_thread(thread_id: str) -> NoReturn:
    fail(f"unknown thread {thread_id!r}: start one with `research-agent run TOPIC`")


async def _resume(settings: Settings, thread_id: str, out_file: Path | None) -> None:
    require_data(settings, thread_id)
    async with _runtime(settings) as runtime:
        manager = runtime.manager
        try:
            record = await manager.get(LOCAL_OWNER, thread_id)
        except NotFound:
            _unknown_thread(thread_id)
        snapshot = await _snapshot(runtime, thread_id)
        if is_finished(snapshot):
            await _finish(runtime, thread_id, out_file, None)
            return
        after = await runtime.stores.events.last_id(thread_id)
        question = pending_interrupt(snapshot)
        if question is not None:
            answer = await ask_in_terminal(question)
            if answer is None:
                await _finish(runtime, thread_id, out_file, None)
                return
            err.print(f"resuming thread {escape(thread_id)} with your answer")
            await manager.resume(LOCAL_OWNER, thread_id, answer)
        elif record.status == "paused":
            err.print(f"resuming thread {escape(thread_id)}")
            await manager.resume(LOCAL_OWNER, thread_id, None)
        else:
            steps = ", ".join(remaining_steps(snapshot))
            err.print(f"resuming thread {escape(thread_id)} at {steps}")
            await manager.take_up(LOCAL_OWNER, thread_id)
        error = await _follow(runtime, thread_id, after, interactive=True)
        await _finish(runtime, thread_id, out_file, error)


def resume(thread_id: str, out_file: Path | None) -> None:
    """Continue an interrupted, waiting or killed run from its last checkpoint."""
    from app.cli_common import load_settings

    until_interrupted(_resume(load_settings(), thread_id, out_file), thread_id)


def until_interrupted(
    work: Coroutine[Any, Any, None], thread_id: str, started: threading.Event | None = None
) -> None:
    """Run `work`; on Ctrl-C say how to pick the thread up again instead of a traceback.

    `started`: for a new thread, set once it exists; interrupted before, nothing was saved
    and there is nothing to resume.
    """
    try:
        asyncio.run(work)
    except KeyboardInterrupt:
        if started is not None and not started.is_set():
            interrupted_before_start(thread_id)
        err.print(
            f"\n[yellow]interrupted[/]: continue with `research-agent resume {escape(thread_id)}`"
        )
        raise click.exceptions.Exit(130) from None


def require_data(settings: Settings, thread_id: str) -> None:
    """Say the thread is unknown when there is no data file to find it in (nothing is made)."""
    if settings.redis_url is None and not settings.service_db_path.is_file():
        _unknown_thread(thread_id)


@asynccontextmanager
async def stores_and_graph(settings: Settings) -> AsyncIterator[tuple[ResearchGraph, Stores]]:
    """The stores and the graph over them: reading and filing threads needs no engine."""
    try:
        async with open_stores(settings) as stores:
            yield build_graph(stores.saver), stores
    except BackendSetupError as exc:
        fail(str(exc))


async def _show(settings: Settings, thread_id: str) -> None:
    require_data(settings, thread_id)
    async with stores_and_graph(settings) as (graph, _):
        snapshot = await graph.aget_state(thread_config(thread_id))
    values: dict[str, Any] = snapshot.values
    if not values:
        _unknown_thread(thread_id)
    err.print(
        f"[bold]{escape(values['topic'])}[/] · {_status(snapshot)} · iteration {values.get('iteration_count', 0)} · {len(values.get('research_data', []))} sources"
    )
    notes = Table("step", "query", "status", "sources", title="Research notes")
    for note in values.get("notes", []):
        notes.add_row(
            str(note.step_no),
            escape(note.query),
            escape(note.status if note.error is None else f"{note.status}: {note.error}"),
            str(len(note.sources)),
        )
    err.print(notes)
    if values.get("final_report"):
        print_report(values["final_report"])


def _status(snapshot: StateSnapshot) -> str:
    """Where the thread stands, as its checkpoint says."""
    if pending_interrupt(snapshot):
        return "waiting for approval"
    if not is_finished(snapshot):
        return "running or interrupted"
    report_status = snapshot.values.get("report_status")
    return f"completed, {report_status} report" if report_status else "completed"


def show(thread_id: str) -> None:
    """Print a thread's status, research notes and report."""
    from app.cli_common import load_settings

    asyncio.run(_show(load_settings(), thread_id))
