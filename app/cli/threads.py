"""`research-agent run`, `resume`, `show`, `rerun`, `export` and `import`: threads from the terminal."""

import asyncio
import sys
import threading
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, NoReturn

import click
from langgraph.types import StateSnapshot
from pydantic import ValidationError
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from app.cli.console import (
    err,
    explain,
    fail,
    interrupted_before_start,
    load_settings,
    print_report,
)
from app.composition import EngineSetupError
from app.report_formats import FILE_FORMATS, RENDERERS
from app.report_pdf import RendererMissing
from app.runtime import Runtime, open_runtime, running_worker
from app.settings import Settings
from app.stores import BackendSetupError, Stores, open_stores
from core.models import ApprovalDecision, ResearchPlan
from core.models import explain as explain_model
from core.options import ResearchRequest
from core.usage import RoundRecord, Submission, TokenUsage
from graph.builder import ResearchGraph, build_graph
from service.errors import InvalidState, NotFound
from service.reproduction import RunArchive, export_archive, import_archive
from service.runner import is_finished, pending_interrupt, remaining_steps, thread_config
from service.thread_ids import LOCAL_OWNER, check_client_id, owner_id, public_id, scoped
from service.views import rounds_of, snapshot_report
from stores.registry import ThreadExists
from tools.local_corpus import CorpusMissingError


@asynccontextmanager
async def _runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """Open the service's runtime in this process (with a worker, on Redis); its runs stop on exit."""
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


def _unknown_thread(thread_id: str) -> NoReturn:
    fail(f"unknown thread {thread_id!r}: start one with `research-agent run TOPIC`")


def _require_data(settings: Settings, thread_id: str) -> None:
    """Say the thread is unknown when there is no data file to find it in (nothing is made)."""
    if settings.redis_url is None and not settings.checkpoint_path.is_file():
        _unknown_thread(thread_id)


@asynccontextmanager
async def _stores_and_graph(settings: Settings) -> AsyncIterator[tuple[ResearchGraph, Stores]]:
    """Open the stores and the graph over them: reading and filing threads needs no engine."""
    try:
        async with open_stores(settings) as stores:
            yield build_graph(stores.saver), stores
    except BackendSetupError as exc:
        fail(str(exc))


def until_interrupted(
    work: Coroutine[Any, Any, None], thread_id: str, started: threading.Event | None = None
) -> None:
    """Run `work`; on Ctrl-C say how to resume the thread (if `started` is set) instead of a traceback."""
    try:
        asyncio.run(work)
    except KeyboardInterrupt:
        if started is not None and not started.is_set():
            interrupted_before_start(thread_id)
        err.print(
            f"\n[yellow]interrupted[/]: continue with `research-agent resume {escape(thread_id)}`"
        )
        raise click.exceptions.Exit(130) from None


class ProgressPrinter:
    """One line per step and event, to stderr so that the report alone goes to stdout."""

    def __init__(self) -> None:
        self.sources = 0
        self.tokens = 0
        self.structured: dict[str, str] = {}  # the structured-output method said per model

    def __call__(self, kind: str, event: Any) -> None:
        """Report one event of the run (`service.execution` names them)."""
        if not isinstance(event, dict):
            return
        if kind == "node_finished":
            iteration = event.get("iteration")
            suffix = f" · iteration {iteration}" if iteration is not None else ""
            err.print(f"[cyan]●[/] {event['node']}{suffix} · {self.sources} sources")
        elif kind == "source":
            self.sources += 1
        elif kind == "note":
            outcome = (
                f"{event['results']} results, {event['new']} new"
                if event["status"] == "ok"
                else event["status"]
            )
            if event.get("pages_read"):
                outcome += f", {event['pages_read']} pages read"
            if event.get("page_errors"):
                outcome += f", {event['page_errors']} pages unreadable"
            err.print(f"  [dim]search[/] {escape(repr(event['query']))}: {outcome}")
        elif kind == "plan":
            plan = event["plan"]
            edited = " (edited)" if event.get("edited") else ""
            err.print(
                f"[cyan]●[/] plan{edited}: {len(plan['investigation_points'])} points, {len(plan['search_queries'])} queries"
            )
        elif kind == "review":
            verdict = "passed" if event["approved"] else "needs work"
            err.print(
                f"  [dim]review[/] draft {event['version']}: {event['overall_score']:.2f} ({verdict})"
            )
        elif kind == "fallback":
            err.print(f"  [yellow]fallback[/] {event['step']}: {escape(event['reason'])}")
        elif kind == "repair":
            err.print(f"  [dim]repair[/] {event['step']}: {escape(event['error'])}")
        elif kind == "structured_output" and event["method"] != self.structured.get(event["model"]):
            self.structured[event["model"]] = event["method"]
            refused = ", ".join(event["refused"]) or "none"
            err.print(
                f"  [dim]structured output[/] {escape(event['model'])}: {event['method']}"
                f" (refused by the server: {escape(refused)})"
            )
        elif kind == "usage" and event["total"]["tokens"] > self.tokens:
            total = event["total"]
            self.tokens = total["tokens"]
            err.print(f"  [dim]usage[/] {total['tokens']} tokens, ${total['cost_usd']:.4f}")


def _show_plan(plan: ResearchPlan) -> None:
    err.print(f"\n[bold]Plan:[/] {escape(plan.theme)}\n{escape(plan.plan_text)}")
    for label, items in (
        ("Investigation points", plan.investigation_points),
        ("Search queries", plan.search_queries),
    ):
        err.print(f"[bold]{label}[/]")
        for item in items:
            err.print(f"  - {escape(item)}")


def _ask(prompt: str) -> str | None:
    """Read one answer from stdin (prompting on stderr, so stdout keeps only the report)."""
    err.print(prompt, end="")
    line = sys.stdin.readline()
    return line.strip() if line else None


def _read_lines(label: str, current: list[str]) -> list[str]:
    err.print(
        f"{label}: one per line, then an empty line (an empty list keeps the current {len(current)})"
    )
    lines: list[str] = []
    while (line := sys.stdin.readline()) and line.strip():
        lines.append(line.strip())
    return lines or current


async def ask_in_terminal(question: dict[str, Any]) -> ApprovalDecision | None:
    """Show what waits for approval and read approve / edit / reject; None means later."""
    is_plan = question.get("type") == "plan"
    if is_plan:
        _show_plan(ResearchPlan.model_validate(question["plan"]))
    else:
        err.print(Markdown(str(question.get("report", ""))))
    while True:
        choice = _ask("approve / edit / reject / later [approve]: ")
        if choice is None or choice.lower() == "later":
            return None
        choice = choice.lower() or "approve"
        if choice == "approve":
            return ApprovalDecision(decision="approve")
        if choice == "reject":
            feedback = _ask("What should change? ")
            if feedback:
                return ApprovalDecision(decision="reject", feedback=feedback)
            return None
        if choice == "edit" and is_plan:
            plan = ResearchPlan.model_validate(question["plan"])
            points = _read_lines("Investigation points", plan.investigation_points)
            queries = _read_lines("Search queries", plan.search_queries)
            try:
                edited = ResearchPlan.model_validate(
                    {**plan.model_dump(), "investigation_points": points, "search_queries": queries}
                )
            except ValidationError as exc:
                err.print(f"that plan is not valid ({escape(explain(exc))}); try again")
                continue
            return ApprovalDecision(decision="edit", plan=edited)
        if choice == "edit":
            err.print("Paste the report, then a line with a single '.':")
            lines = []
            while (line := sys.stdin.readline()) and line.rstrip("\n") != ".":
                lines.append(line)
            return ApprovalDecision(decision="edit", report="".join(lines))
        err.print(f"unknown answer {escape(repr(choice))}")


async def _follow(runtime: Runtime, thread_id: str, after: int, interactive: bool) -> str | None:
    """Print the thread's events after `after` until its run ends or waits; return an error's text.

    When `interactive`, an approval it waits for is asked here and the run followed further.
    """
    printer = ProgressPrinter()
    printer.sources = len(
        (await runtime.manager.snapshot(thread_id)).values.get("research_data", [])
    )
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
    snapshot = await runtime.manager.snapshot(thread_id)
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
    """Start thread `thread_id` through the run manager, follow it, print its report; set `started` once it exists."""
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


async def _resume(settings: Settings, thread_id: str, out_file: Path | None) -> None:
    _require_data(settings, thread_id)
    async with _runtime(settings) as runtime:
        manager = runtime.manager
        try:
            record = await manager.get(LOCAL_OWNER, thread_id)
        except NotFound:
            _unknown_thread(thread_id)
        snapshot = await manager.snapshot(thread_id)
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
            await manager.continue_from_checkpoint(LOCAL_OWNER, thread_id)
        error = await _follow(runtime, thread_id, after, interactive=True)
        await _finish(runtime, thread_id, out_file, error)


def resume(thread_id: str, out_file: Path | None) -> None:
    """Continue an interrupted, waiting or killed run from its last checkpoint."""
    until_interrupted(_resume(load_settings(), thread_id, out_file), thread_id)


async def _show(settings: Settings, thread_id: str) -> None:
    _require_data(settings, thread_id)
    async with _stores_and_graph(settings) as (graph, _):
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
    _show_members(rounds_of(values))
    if values.get("final_report"):
        print_report(values["final_report"])


def _show_members(rounds: list[RoundRecord]) -> None:
    """Print each round's member researchers, a line each (an error's message whole, unwrapped)."""
    for record in rounds:
        members = record.members
        if members is None:
            continue
        err.print(
            f"[bold]Member researchers, round {record.round_number}[/]: {members.success_count} succeeded, "
            f"{members.failure_count} failed · {_spent(members.total_usage)}"
        )
        for member in members.submissions:
            status = (
                f"{member.status}: {member.error_message}"
                if member.error_message
                else member.status
            )
            err.print(
                f"  {escape(member.agent_name)} · {escape(member.agent_type)} · {escape(status)} · "
                f"{_spent(member.usage)} · {_took(member)}"
            )


def _spent(usage: TokenUsage) -> str:
    """Return model usage as `show` says it: tokens, then requests."""
    tokens = usage.input_tokens + usage.output_tokens
    return f"{tokens:,} tokens, {usage.requests:,} model requests"


def _took(submission: Submission) -> str:
    """Return how long a piece of work took: milliseconds under a second, else seconds."""
    ms = submission.execution_time_ms
    return f"{ms:,.0f} ms" if ms < 1000 else f"{ms / 1000:,.1f} s"


def _status(snapshot: StateSnapshot) -> str:
    """Return where the thread stands, as its checkpoint says."""
    if pending_interrupt(snapshot):
        return "waiting for approval"
    if not is_finished(snapshot):
        return "running or interrupted"
    report_status = snapshot.values.get("report_status")
    return f"completed, {report_status} report" if report_status else "completed"


def show(thread_id: str) -> None:
    """Print a thread's status, research notes, member researchers and report."""
    asyncio.run(_show(load_settings(), thread_id))


async def _rerun(
    settings: Settings, thread_id: str, mode: Literal["replay", "refresh"], out_file: Path | None
) -> None:
    _require_data(settings, thread_id)
    async with _runtime(settings) as runtime:
        try:
            await runtime.manager.get(LOCAL_OWNER, thread_id)
            record = await runtime.manager.rerun(LOCAL_OWNER, thread_id, mode)
        except NotFound:
            _unknown_thread(thread_id)
        except InvalidState as exc:
            fail(f"thread {thread_id!r}: {exc.message}")
        err.print(f"thread {escape(record.thread_id)} · {mode} of {escape(thread_id)}")
        error = await _follow(runtime, record.thread_id, 0, interactive=True)
        await _finish(runtime, record.thread_id, out_file, error)


def rerun(thread_id: str, mode: Literal["replay", "refresh"], out_file: Path | None) -> None:
    """Re-run a thread's topic, options and plan as a new thread, and print its report."""
    until_interrupted(_rerun(load_settings(), thread_id, mode, out_file), thread_id)


async def _export(settings: Settings, thread_id: str, out_file: Path) -> None:
    async with _stores_and_graph(settings) as (graph, stores):
        record = await stores.registry.get(thread_id)
        if record is None or record.owner != LOCAL_OWNER:
            _unknown_thread(thread_id)
        archive = await export_archive(graph, stores.events, stores.evidence, record)
    out_file.write_text(archive.model_dump_json(), encoding="utf-8")
    evidence = archive.evidence
    rounds = [RoundRecord.model_validate(r) for r in archive.state.get("rounds", [])]
    members = sum(len(r.members.submissions) for r in rounds if r.members is not None)
    err.print(
        f"thread {escape(thread_id)} written to {escape(str(out_file))}: {len(archive.events)} "
        f"events, {len(evidence.records)} evidence records, {len(evidence.contents)} texts, "
        f"{len(rounds)} rounds with {members} member submissions"
    )


def export(thread_id: str, out_file: Path | None) -> None:
    """Write a thread whole to a JSON file (default: research-<id>.json here)."""
    settings = load_settings()
    _require_data(settings, thread_id)
    target = out_file or Path(f"research-{thread_id}.json")
    asyncio.run(_export(settings, thread_id, target))


async def _report_file(settings: Settings, thread_id: str, file_format: str) -> str | bytes:
    async with _stores_and_graph(settings) as (graph, stores):
        record = await stores.registry.get(thread_id)
        if record is None or record.owner != LOCAL_OWNER:
            _unknown_thread(thread_id)
        found = snapshot_report(await graph.aget_state(thread_config(thread_id)))
    if found is None:
        fail(
            f"thread {thread_id} has no report yet: `research-agent resume {thread_id}` finishes it"
        )
    try:
        return RENDERERS[FILE_FORMATS[file_format]](found.markdown)
    except RendererMissing as missing:
        fail(f"cannot write the report as {file_format}: {missing}")


def export_report(thread_id: str, file_format: str, out_file: Path | None) -> None:
    """Write a thread's report as an HTML document, a Word file or a PDF (default: report-<id>.<format>)."""
    settings = load_settings()
    _require_data(settings, thread_id)
    target = out_file or Path(f"report-{thread_id}.{file_format}")
    rendered = asyncio.run(_report_file(settings, thread_id, file_format))
    data = rendered.encode() if isinstance(rendered, str) else rendered
    try:
        target.write_bytes(data)
    except OSError as exc:
        fail(f"cannot write {target}: {exc.strerror or exc}")
    err.print(
        f"report of thread {escape(thread_id)} written to {escape(str(target))} ({file_format})"
    )


def _read_archive(path: Path) -> RunArchive:
    try:
        return RunArchive.model_validate_json(path.read_bytes())
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    except ValidationError as exc:
        fail(f"{path} is not a run exported by `research-agent export`: {explain_model(exc)[:500]}")


def _owner(settings: Settings, key: str | None) -> str:
    """Return who an imported thread belongs to: the key given, the only key, or the local owner."""
    keys = [k.get_secret_value() for k in settings.api_keys]
    if key is not None:
        if not keys:
            fail("--key: this service has no API keys (RESEARCH_API_KEYS): import without it")
        if key not in keys:
            fail("--key is not one of this service's API keys (RESEARCH_API_KEYS)")
        return owner_id(key)
    if len(keys) > 1:
        fail("this service has several API keys: say which one owns the thread with --key")
    return owner_id(keys[0]) if keys else LOCAL_OWNER


async def _import(settings: Settings, path: Path, thread_id: str | None, key: str | None) -> None:
    owner = _owner(settings, key)
    archive = _read_archive(path)
    wanted = thread_id or archive.thread.thread_id
    try:
        check_client_id(wanted)
    except ValueError as exc:
        fail(f"--thread {wanted!r}: {exc}")
    async with _stores_and_graph(settings) as (graph, stores):
        parts = (graph, stores.events, stores.registry, stores.evidence)
        try:
            record = await import_archive(parts, owner, archive, scoped(owner, wanted))
        except ThreadExists:
            fail(f"thread {wanted!r} already exists here: import it under another --thread")
        except InvalidState as exc:
            fail(f"{path}: {exc.message}")
        except ValueError as exc:
            fail(f"{path}: its state does not fit this version: {str(exc)[:500]}")
    shown = public_id(record.thread_id)
    # A key's thread is that key's to read, over HTTP; the CLI reads the local owner's.
    see = f"research-agent show {shown}" if owner == LOCAL_OWNER else f"GET /v1/research/{shown}"
    err.print(
        f"[green]imported[/] thread {escape(shown)} · {escape(record.topic)} · `{escape(see)}`",
        soft_wrap=True,
    )


def import_run(path: Path, thread_id: str | None, key: str | None = None) -> None:
    """Register an exported run as a finished thread here, owned by `key` (see `_owner`)."""
    asyncio.run(_import(load_settings(), path, thread_id, key))
