"""The `research-agent` command line: its commands, options and help.

Each command loads `app.cli.commands` or `app.cli.threads` only when it runs, so `--help`
and a mistyped option answer at once, without importing LangGraph and LangChain.
"""

from pathlib import Path

import click

DEMO_TOPIC = "history of the printing press"
OUT = click.option(
    "--out",
    "out_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report to this file instead of printing it.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def app() -> None:
    """A deep-research agent: plan, search, write a cited report, review it.

    Offline by default (an extractive engine over the Wikipedia demo corpus); set
    TAVILY_API_KEY or BRAVE_API_KEY for web search, OPENAI_API_KEY or
    RESEARCH_LLM_BASE_URL for a language model.
    """


@app.command(short_help="Research a topic and print the cited report.")
@click.argument("topic")
@click.option(
    "--max-iterations",
    default=5,
    show_default=True,
    help="Researcher, writer and reviewer steps (1..20).",
)
@click.option("--min-sources", default=5, show_default=True, help="Sources before the first draft.")
@click.option(
    "--max-results", default=5, show_default=True, help="Results per search query (1..20)."
)
@click.option(
    "--approve",
    default="none",
    show_default=True,
    metavar="none|plan|plan_and_report",
    help="Ask for approval of the plan, or of the plan and the report: none, plan, plan_and_report.",
)
@click.option(
    "--time-budget", default=600.0, show_default=True, help="Active time budget in seconds."
)
@OUT
@click.option("--thread", help="Thread id (default: a new one).")
def run(
    topic: str,
    max_iterations: int,
    min_sources: int,
    max_results: int,
    approve: str,
    time_budget: float,
    out_file: Path | None,
    thread: str | None,
) -> None:
    """Research TOPIC and print the cited report (progress goes to stderr)."""
    from app.cli import commands

    commands.run(
        topic,
        out_file,
        thread,
        max_iterations=max_iterations,
        min_sources=min_sources,
        max_results=max_results,
        approval=approve,
        time_budget_s=time_budget,
    )


@app.command(short_help="Continue a stopped, waiting or killed run.")
@click.argument("thread_id")
@OUT
def resume(thread_id: str, out_file: Path | None) -> None:
    """Continue an interrupted, waiting or killed run from its last checkpoint."""
    from app.cli import threads

    threads.resume(thread_id, out_file)


@app.command()
@click.argument("thread_id")
def show(thread_id: str) -> None:
    """Print a thread's status, research notes, member researchers and report."""
    from app.cli import threads

    threads.show(thread_id)


@app.command(short_help="Re-run a thread's topic, options and plan as a new thread.")
@click.argument("thread_id")
@click.option(
    "--mode",
    type=click.Choice(["replay", "refresh"]),
    default="replay",
    show_default=True,
    help="replay: answer every search and page read from what the run read (no network); "
    "refresh: search and read again.",
)
@OUT
def rerun(thread_id: str, mode: str, out_file: Path | None) -> None:
    """Re-run THREAD_ID as a new thread and print its report.

    Compare the two on the web page, or with GET /v1/research/{id}/diff/{other}.
    """
    from app.cli import threads

    threads.rerun(thread_id, "refresh" if mode == "refresh" else "replay", out_file)


@app.command(short_help="Ask a finished thread a question, answered from its evidence.")
@click.argument("thread_id")
@click.argument("question")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
def ask(thread_id: str, question: str, as_json: bool) -> None:
    """Answer QUESTION from THREAD_ID's evidence only: every sentence cites a source.

    When the evidence holds no answer it says so; `research-agent run QUESTION` researches it.
    """
    from app.cli import questions

    questions.ask(thread_id, question, as_json)


@app.command(
    short_help="Write a thread whole (report, evidence, events), or its report, to a file."
)
@click.argument("thread_id")
@click.option(
    "--out",
    "out_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The file to write (default: research-THREAD_ID.json, or report-THREAD_ID.FORMAT).",
)
@click.option(
    "--format",
    "file_format",
    type=click.Choice(["json", "html", "docx", "pdf"]),
    default="json",
    show_default=True,
    help="json: the whole thread, for `research-agent import`; html, docx, pdf: its report "
    "as an HTML document, a Word file or a PDF.",
)
def export(thread_id: str, out_file: Path | None, file_format: str) -> None:
    """Write THREAD_ID's record, state, events and evidence as one JSON file, or its report.

    With --format html, docx or pdf, the report alone, as the service's
    GET /v1/research/{id}/report gives it in that format.
    """
    from app.cli import threads

    if file_format == "json":
        threads.export(thread_id, out_file)
    else:
        threads.export_report(thread_id, file_format, out_file)


@app.command("import", short_help="Register an exported thread here.")
@click.argument("path", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--thread", help="Its id here (default: the id it was exported with).")
@click.option(
    "--key",
    help="The API key that owns the thread, when RESEARCH_API_KEYS holds several "
    "(default: the only key, or the local owner when no keys are set).",
)
def import_(path: Path, thread: str | None, key: str | None) -> None:
    """Import a file written by `research-agent export` as a finished thread."""
    from app.cli import threads

    threads.import_run(path, thread, key)


@app.command(short_help="Research a topic offline on the demo corpus.")
@click.argument("topic", default=DEMO_TOPIC)
@OUT
def demo(topic: str, out_file: Path | None) -> None:
    """Fetch the demo corpus if needed, then research TOPIC end to end, offline.

    TOPIC defaults to "history of the printing press".
    """
    from app.cli import commands

    commands.demo(topic, out_file)


@app.command(short_help="Run the HTTP service and the web page.")
@click.option("--host", help="Address to listen on (default: the setting, 127.0.0.1).")
@click.option("--port", type=click.IntRange(1, 65535), help="Port (default: the setting, 8000).")
@click.option(
    "--no-worker",
    is_flag=True,
    help="With Redis: only serve the API; `research-agent worker` processes execute the runs.",
)
def serve(host: str | None, port: int | None, no_worker: bool) -> None:
    """Run the HTTP service (REST, Server-Sent Events, the web page) on the embedded defaults."""
    from app.cli import commands

    commands.serve(host, port, no_worker)


@app.command(short_help="Serve the research tools over MCP on stdio (for desktop MCP clients).")
def mcp() -> None:
    """Serve the Model Context Protocol on stdin and stdout, on the embedded defaults.

    A desktop MCP client starts it as `research-agent mcp`; its runs execute in this
    process (they stop with it and `research-agent resume ID` continues them). `serve`
    offers the same tools over HTTP at /mcp.
    """
    from app.cli import commands

    commands.mcp()


@app.command(short_help="Execute queued runs from Redis.")
def worker() -> None:
    """Execute queued research runs from Redis (RESEARCH_REDIS_URL) until stopped.

    Start as many as you like, on any machine that reaches Redis: each takes up to
    max_concurrent_runs runs at a time. SIGTERM hands its runs back to the queue; a
    worker that dies has its runs taken over once its lease runs out.
    """
    from app.cli import commands

    commands.worker()


@app.group()
def corpus() -> None:
    """Build and inspect the local search corpus."""


@corpus.command("index")
@click.argument("path", type=click.Path(path_type=Path))
def corpus_index(path: Path) -> None:
    """Index PATH (a folder or file of .md, .txt, .html, .jsonl, .pdf, .docx) as the local corpus.

    The current index is replaced. PDF is read from its text layer (no OCR), page by page;
    a file that cannot be read is listed with the reason and the rest are indexed.
    """
    from app.cli import commands

    commands.corpus_index(path)


@corpus.command("demo")
def corpus_demo() -> None:
    """Download and index the Wikipedia demo corpus."""
    from app.cli import commands

    commands.corpus_demo()


@corpus.command("search")
@click.argument("query")
@click.option("--limit", default=5, show_default=True, help="Results to show.")
def corpus_search(query: str, limit: int) -> None:
    """Query the local corpus, to see what the researcher would find."""
    from app.cli import commands

    commands.corpus_search(query, limit)


class _WatchGroup(click.Group):
    """`watch ID --every 1d` watches a thread; `watch list`, `changes ID`, `stop ID` the rest."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Take a first argument that names no subcommand as the thread to watch."""
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["add", *args]
        return super().parse_args(ctx, args)


@app.group(cls=_WatchGroup, short_help="Refresh a thread on a schedule and show what changed.")
def watch() -> None:
    """Watch a finished thread: `research-agent watch ID --every 1d`.

    Each refresh re-runs the thread (searching and reading again) as a new thread and keeps
    its diff with the previous refresh. Refreshes run while `serve` (or a worker) runs.
    """


@watch.command("add", short_help="Watch a thread (the same as `watch ID`).")
@click.argument("thread_id")
@click.option(
    "--every", required=True, help="30m, 6h, 1d, 2w or an ISO 8601 duration (PT1H to P90D)."
)
@click.option("--webhook", help="An http(s) URL each changed entry is POSTed to, signed.")
def watch_add(thread_id: str, every: str, webhook: str | None) -> None:
    """Refresh THREAD_ID every --every."""
    from app.cli import watches

    watches.watch(thread_id, every, webhook)


@watch.command("list")
def watch_list() -> None:
    """List the watched threads."""
    from app.cli import watches

    watches.listing()


@watch.command("changes")
@click.argument("thread_id")
def watch_changes(thread_id: str) -> None:
    """Show each refresh of THREAD_ID and what it changed, newest first."""
    from app.cli import watches

    watches.changes(thread_id)


@watch.command("stop")
@click.argument("thread_id")
def watch_stop(thread_id: str) -> None:
    """Stop watching THREAD_ID (its refreshes stay)."""
    from app.cli import watches

    watches.stop(thread_id)


def main() -> None:
    """Entry point of the console script; a damaged data file is one line, not a traceback."""
    from stores.data_file import DamagedDataFile

    try:
        app(prog_name="research-agent")
    except DamagedDataFile as exc:
        from rich.markup import escape

        from app.cli.console import BAD_INPUT, err

        err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        raise SystemExit(BAD_INPUT) from None
