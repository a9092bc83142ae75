"""Three hostile cases replayed against a real `research-agent serve`, with their figures.

Each case starts a fresh server the way bench/service_load.py does (own process, own temp
data dir, only the bench's RESEARCH_* settings, engine and search provider that only sleep,
so it works offline), on SQLite or (`--backend redis`) on a throwaway valkey-server, and
stops it at the end. Latencies are client-side wall times in ms, from the call to the
answer; server RSS is VmRSS (now) or VmHWM (peak) of the server process, in MB.

- burst: max_concurrent_runs=2, max_queued_runs=5, runs of 4 x 2000 ms. N=200 clients
  POST /v1/research at once (one connection each). The server must accept exactly
  2 + 5 = 7 (202) and refuse the rest at once (429 too_many_runs), not pile them up;
  "threads listed" is how many threads GET /v1/research shows afterwards (7: a refused
  run leaves nothing behind). A GET /healthz and a GET /v1/research, each on a fresh
  connection, go out with the burst ("during", with when they were answered, counted
  from the start of the burst) and again once every burst answer is in ("after"); they
  should take a few ms, not wait for the burst. The bench opens its 200 connections from
  one Python process on the server's CPUs: compare the server's CPU time over the burst
  with the bench's own before reading the burst's latency as the server's.
- slow: header_timeout_s=2, max_connections=200, the other limits at their defaults.
  K=1100 connections each send an incomplete request head (`GET /healthz HTTP/1.1`,
  `Host: x`, no blank line) and then nothing (slowloris). Once all are open, 20 normal
  GET /healthz (a fresh connection each, one every 40 ms) must still be answered
  quickly: past 200 connections the server closes the oldest connection still waiting
  for its head (a slow one) to make room. The table then says how many slow connections
  the server has closed (EOF or reset seen by the client) at 0 s (once all were open:
  the cap's evictions), 1 s, 3 s and 5 s: by 3 s all should be, those under the cap by
  the 2 s head deadline; "server fds" is how many file descriptors the server holds
  then. This process raises its own open-files soft limit to the hard limit first; the
  server raises its own (to max_connections + 256 at least).
- memory: default limits, runs of 4 x 5 ms. 4 batches of 100 LangGraph Platform runs
  through the SDK's client, 16 at a time, after 10 warm-up runs: each creates a thread
  (`threads.create`), starts a run on it (`runs.create`, stream_mode values, updates and
  debug) and waits for its end (`runs.join`, what `runs.wait` does in two calls: the SDK's
  `runs.wait` takes no stream_mode). The threads are kept, as a client's are. After each
  batch the server's VmRSS: it should stay flat from batch to batch (the event log used to
  keep the last events of every run's stream in memory for good: +1.8 MB per run);
  "KB/run" is the growth over the batch divided by its runs. Stateless runs
  (`runs.wait(None, ...)`) would not show that: their thread and streams are deleted
  when they end, which let the memory go even before the fix.

- render: default limits, runs of 4 x 5 ms. RENDER_THREADS runs with report approval
  each get an edited report of about 195,000 characters (Markdown with emphasis, code,
  lists, links and footnotes, under the API's cap). Then RENDER_REQUESTS GET .../report
  with `Accept: text/html` go out at once, spread over the threads (a report asked for by
  several at once), and a GET /healthz every 20 ms on a fresh connection while they run:
  "health during" is its latency then, against the same probes with the server idle; the
  renders' wall time is until the last HTML answer. The same requests again ("again")
  find the HTML rendered already.

    python bench/hardening.py [--case burst,slow,memory,render] [--backend sqlite|redis]
"""

import argparse
import asyncio
import math
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import StreamMode

# `python bench/hardening.py` puts bench/ first on sys.path, not the repository root.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bench.service_load import (  # noqa: E402
    SERVER_MAX_RUNS,
    Server,
    Service,
    free_port,
    log_problems,
    server_cpu_s,
    server_peak_rss_mb,
    service_env,
)
from bench.stats import percentile  # noqa: E402
from tests.redis_server import redis_server  # noqa: E402

CASES = ("burst", "slow", "memory", "render")
GRAPH = "research"
LOG_PROBLEM_LINES = 30

BURST_N = 200
BURST_LATENCY_MS = 2000
BURST_SETTINGS: dict[str, str | None] = {"max_concurrent_runs": "2", "max_queued_runs": "5"}
BURST_EXPECTED = 7
BURST_TIMEOUT_S = 30.0
PROBES = ("/healthz", "/v1/research?limit=100")

SLOW_K = 1100
SLOW_LATENCY_MS = 50
SLOW_SETTINGS: dict[str, str | None] = {
    "header_timeout_s": "2",
    "max_connections": "200",
    # The defaults: with bench/service_load.py's 1000 runs at once, the API process on
    # Redis holds a queue connection per slot (over 1000 descriptors while idle).
    "max_concurrent_runs": None,
    "max_queued_runs": None,
}
SLOW_HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"  # no blank line: the head never ends
SLOW_CHECKPOINTS_S = (0.0, 1.0, 3.0, 5.0)
NORMAL_REQUESTS = 20
NORMAL_EVERY_S = 0.04
NORMAL_TIMEOUT_S = 5.0

MEMORY_BATCHES = 4
MEMORY_RUNS = 100
MEMORY_AT_ONCE = 16
MEMORY_WARM_UP = 10
MEMORY_LATENCY_MS = 5  # 0 would make the server use the real engine and corpus
MEMORY_MODES: list[StreamMode] = ["values", "updates", "debug"]
# The defaults: bench/service_load.py's environment raises them, this case must not.
MEMORY_SETTINGS: dict[str, str | None] = {"max_concurrent_runs": None, "max_queued_runs": None}
MEMORY_SETTLE_S = 0.5
MEMORY_RUN_DEADLINE_S = 120.0
LEAK_BEFORE_KB = 1.8 * 1024

RENDER_THREADS = 3
RENDER_REQUESTS = 10
RENDER_CHARS = 195_000  # under the API's cap on an edited report (core.models)
RENDER_LATENCY_MS = 5
RENDER_PROBES = 20
RENDER_PROBE_EVERY_S = 0.02


# -- the server ------------------------------------------------------------------------


class LimitedServer(Server):
    """`research-agent serve` as bench/service_load.py starts it, with this case's settings.

    `settings` maps a setting's name to its value, or to None to leave it at its default.
    """

    def __init__(
        self,
        data_dir: Path,
        latency_ms: float,
        redis_url: str | None,
        settings: dict[str, str | None],
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        env = service_env(data_dir, latency_ms, redis_url, SERVER_MAX_RUNS)
        for name, value in settings.items():
            key = f"RESEARCH_{name.upper()}"
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        Service.__init__(self, ["serve", "--port", str(self.port)], env, data_dir / "server.log")


@asynccontextmanager
async def serving(
    backend: str, latency_ms: float, settings: dict[str, str | None], notes: list[str]
) -> AsyncIterator[LimitedServer]:
    """A ready server (and its Redis with `backend` redis); stopped, its errors in `notes`."""
    with ExitStack() as stack:
        redis_url = stack.enter_context(redis_server()) if backend == "redis" else None
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-hard-")))
        server = LimitedServer(data_dir, latency_ms, redis_url, settings)
        try:
            await server.wait_ready()
            yield server
        finally:
            stopping = time.perf_counter()
            server.stop()
            stopped = time.perf_counter() - stopping
            if stopped > 5:
                notes.append(f"the server took {stopped:.1f} s to stop (SIGTERM)")
            problems = log_problems(server.log_path.read_text(errors="replace"), LOG_PROBLEM_LINES)
            if problems:
                notes.append("server log, from its first error:\n" + "\n".join(problems))


def status_mb(pid: int, field: str) -> float:
    """A `VmXXX:` line of /proc/<pid>/status, in MB; NaN if the process is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return math.nan
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return math.nan


def open_files_limit(pid: int) -> str:
    """The `Max open files` soft and hard limits of a process, from /proc/<pid>/limits."""
    try:
        limits = Path(f"/proc/{pid}/limits").read_text()
    except OSError:
        return "?"
    for line in limits.splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return f"soft {soft}, hard {hard}"
    return "?"


def open_fds(pid: int) -> int:
    """How many file descriptors a process holds; -1 if that cannot be read."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def ms(seconds: float) -> str:
    """Seconds as milliseconds, one decimal; '-' for none."""
    return f"{seconds * 1000:.1f}" if not math.isnan(seconds) else "-"


def line(label: str, value: object) -> str:
    """One row of a case's table."""
    return f"  {label:<34} {value}"


# -- case 1: a burst of runs -----------------------------------------------------------


@dataclass
class Answer:
    """One request: its status code (or the exception's name), how long it took, when it ended."""

    status: str
    seconds: float
    ended: float
    body: Any = None


async def timed(request: Awaitable[httpx.Response], keep_body: bool = False) -> Answer:
    """Await a request; its answer, timed from here (a bench counts failures, never raises)."""
    start = time.perf_counter()
    try:
        response = await request
    except Exception as exc:
        end = time.perf_counter()
        return Answer(type(exc).__name__, end - start, end)
    end = time.perf_counter()
    body = response.json() if keep_body and response.status_code == 200 else None
    return Answer(str(response.status_code), end - start, end, body)


async def probe(base_url: str, path: str) -> Answer:
    """GET `path` on a connection of its own."""
    async with httpx.AsyncClient(base_url=base_url, timeout=BURST_TIMEOUT_S) as client:
        return await timed(client.get(path), keep_body=True)


def probe_text(answer: Answer, start: float | None = None) -> str:
    """A probe's outcome: status, latency, and for a listing how many threads it shows."""
    text = f"{answer.status} in {ms(answer.seconds)} ms"
    if start is not None:
        text += f", answered at {ms(answer.ended - start)} ms"
    if isinstance(answer.body, dict) and "items" in answer.body:
        text += f", {len(answer.body['items'])} threads listed"
    return text


async def burst(backend: str, notes: list[str]) -> None:
    print(
        f"\n== burst: {BURST_N} x POST /v1/research at once; "
        f"max_concurrent_runs={BURST_SETTINGS['max_concurrent_runs']}, "
        f"max_queued_runs={BURST_SETTINGS['max_queued_runs']}, "
        f"simulate_latency_ms={BURST_LATENCY_MS}; backend {backend}",
        flush=True,
    )
    async with serving(backend, BURST_LATENCY_MS, BURST_SETTINGS, notes) as server:
        pid = server.process.pid
        limits = httpx.Limits(max_connections=BURST_N, max_keepalive_connections=BURST_N)
        async with httpx.AsyncClient(
            base_url=server.base_url, timeout=BURST_TIMEOUT_S, limits=limits
        ) as pool:
            posts = [
                timed(pool.post("/v1/research", json={"topic": f"burst test {i}"}))
                for i in range(BURST_N)
            ]
            during = [probe(server.base_url, path) for path in PROBES]
            cpu, own_cpu = server_cpu_s(pid), time.process_time()
            start = time.perf_counter()
            answers = await asyncio.gather(*posts, *during)
            wall = max(a.ended for a in answers[:BURST_N]) - start
            cpu, own_cpu = server_cpu_s(pid) - cpu, time.process_time() - own_cpu
        after = [await probe(server.base_url, path) for path in PROBES]
        rss = server_peak_rss_mb(pid)
    burst_answers, probes_during = answers[:BURST_N], answers[BURST_N:]
    codes = Counter(a.status for a in burst_answers)
    other = {code: count for code, count in codes.items() if code not in ("202", "429")}
    latency = [a.seconds for a in burst_answers]
    by_code = {
        code: max(a.seconds for a in burst_answers if a.status == code) for code in sorted(codes)
    }
    print(line("accepted (202)", f"{codes['202']} (expected {BURST_EXPECTED})"))
    print(line("refused (429)", f"{codes['429']} (expected {BURST_N - BURST_EXPECTED})"))
    print(line("other answers", f"{sum(other.values())} {other or ''}".rstrip()))
    print(line("burst wall ms (last answer)", ms(wall)))
    print(line("answer latency p50 ms", ms(percentile(latency, 50))))
    print(line("answer latency p99 ms", ms(percentile(latency, 99))))
    print(line("answer latency max ms", ms(max(latency))))
    print(
        line(
            "answer latency max ms, by status",
            ", ".join(f"{code}: {ms(value)}" for code, value in by_code.items()),
        )
    )
    for path, answer in zip(PROBES, probes_during, strict=True):
        print(line(f"GET {path.split('?')[0]} during", probe_text(answer, start)))
    for path, answer in zip(PROBES, after, strict=True):
        print(line(f"GET {path.split('?')[0]} after", probe_text(answer)))
    print(line("server CPU s over the burst", f"{cpu:.2f}"))
    print(line("bench CPU s over the burst", f"{own_cpu:.2f}"))
    print(line("server peak RSS MB (VmHWM)", f"{rss:.0f}"), flush=True)
    if codes["202"] != BURST_EXPECTED or other:
        notes.append(f"{codes['202']} accepted, expected {BURST_EXPECTED}; other answers {other}")


# -- case 2: slow clients --------------------------------------------------------------


class SlowClient(asyncio.Protocol):
    """A client that sends an incomplete request head, then nothing; notes when it is closed."""

    def __init__(self) -> None:
        self.closed_at: float | None = None
        self.reset = False
        self.received = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Send the head's first lines, never its end."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(SLOW_HEAD)

    def data_received(self, data: bytes) -> None:
        """Count what the server sends (an error answer before it closes, say)."""
        self.received += len(data)

    def eof_received(self) -> bool | None:
        """The server closed: a read would return b""."""
        self._closed()
        return None  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        """Closed (a reset: a read would raise ConnectionResetError)."""
        self.reset = self.reset or (isinstance(exc, ConnectionResetError) and not self.closed_at)
        self._closed()

    def _closed(self) -> None:
        if self.closed_at is None:
            self.closed_at = time.perf_counter()


def raise_open_files_limit() -> tuple[int, int, int]:
    """Raise this process's open-files soft limit to the hard limit: (soft before, soft, hard)."""
    before, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return before, soft, hard


async def open_slow(port: int) -> SlowClient | str:
    """One slow connection, or why it could not be opened."""
    loop = asyncio.get_running_loop()
    try:
        _, client = await loop.create_connection(SlowClient, "127.0.0.1", port)
    except OSError as exc:
        return type(exc).__name__
    return client


async def normal_requests(base_url: str, start: float) -> list[Answer]:
    """GET /healthz every NORMAL_EVERY_S from `start`, each on a fresh connection."""
    limits = httpx.Limits(max_keepalive_connections=0)  # no reuse: a new connection each time
    async with httpx.AsyncClient(
        base_url=base_url, timeout=NORMAL_TIMEOUT_S, limits=limits
    ) as client:

        async def one(i: int) -> Answer:
            await asyncio.sleep(max(0.0, start + i * NORMAL_EVERY_S - time.perf_counter()))
            return await timed(client.get("/healthz"))

        return await asyncio.gather(*(one(i) for i in range(NORMAL_REQUESTS)))


async def slow(backend: str, notes: list[str]) -> None:
    print(
        f"\n== slow clients: {SLOW_K} connections with an incomplete head; "
        f"header_timeout_s={SLOW_SETTINGS['header_timeout_s']}, "
        f"max_connections={SLOW_SETTINGS['max_connections']}; backend {backend}",
        flush=True,
    )
    before, soft, hard = raise_open_files_limit()
    async with serving(backend, SLOW_LATENCY_MS, SLOW_SETTINGS, notes) as server:
        pid = server.process.pid
        print(line("bench RLIMIT_NOFILE", f"soft {before} -> {soft}, hard {hard}"))
        print(line("server Max open files", open_files_limit(pid)))
        print(line("server fds before", open_fds(pid)), flush=True)
        opening = time.perf_counter()
        opened = await asyncio.gather(*(open_slow(server.port) for _ in range(SLOW_K)))
        start = time.perf_counter()
        clients = [c for c in opened if isinstance(c, SlowClient)]
        failed = Counter(c for c in opened if isinstance(c, str))
        requests = asyncio.create_task(normal_requests(server.base_url, start))
        seen: list[tuple[float, int, int, int]] = []  # (at, closed, reset, server fds)
        for at in SLOW_CHECKPOINTS_S:
            await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
            gone = [c for c in clients if c.closed_at is not None]
            seen.append((at, len(gone), sum(c.reset for c in gone), open_fds(pid)))
        answers = await requests
        answered = sum(c.received > 0 for c in clients)
        for client in clients:
            if client.transport is not None:
                client.transport.close()
    ok = [a.seconds for a in answers if a.status == "200"]
    codes = Counter(a.status for a in answers)
    print(line("slow connections opened", f"{len(clients)} in {ms(start - opening)} ms"))
    print(line("slow connections not opened", f"{sum(failed.values())} {dict(failed) or ''}"))
    print(
        line(
            f"normal GET /healthz ({NORMAL_REQUESTS})",
            f"{len(ok)} answered 200 {dict(codes) if len(ok) != NORMAL_REQUESTS else ''}".rstrip(),
        )
    )
    print(line("normal latency p50 ms", ms(percentile(ok, 50))))
    print(line("normal latency max ms", ms(max(ok, default=math.nan))))
    print(line("slow connections sent any bytes", answered))
    print(f"  {'after s':>8} {'closed':>7} {'of':>5} {'reset':>6} {'server fds':>11}")
    for at, count, reset, fds in seen:
        print(f"  {at:>8.0f} {count:>7} {len(clients):>5} {reset:>6} {fds:>11}")
    if len(ok) != NORMAL_REQUESTS:
        notes.append(f"only {len(ok)} of {NORMAL_REQUESTS} normal requests answered 200")
    if seen[-1][1] != len(clients):
        notes.append(
            f"{len(clients) - seen[-1][1]} slow connections still open after "
            f"{SLOW_CHECKPOINTS_S[-1]:.0f} s"
        )


# -- case 3: memory across batches of Platform runs ------------------------------------


async def platform_run(client: LangGraphClient, i: int) -> str | None:
    """One run on a thread of its own, to its end, through the SDK; what went wrong, or None."""
    thread = await client.threads.create()
    run = await client.runs.create(
        thread["thread_id"],
        GRAPH,
        input={"topic": f"memory test {i}"},
        stream_mode=MEMORY_MODES,
    )
    values = await client.runs.join(thread["thread_id"], run["run_id"])
    if "__error__" in values:
        return f"error: {str(values['__error__'])[:80]}"
    if not values.get("final_report"):
        return "no final_report"
    return None


async def platform_batch(client: LangGraphClient, first: int, runs: int) -> Counter[str]:
    """`runs` Platform runs, MEMORY_AT_ONCE at a time: what went wrong, by kind."""
    gate = asyncio.Semaphore(MEMORY_AT_ONCE)
    errors: Counter[str] = Counter()

    async def one(i: int) -> None:
        async with gate:
            try:
                problem = await asyncio.wait_for(platform_run(client, i), MEMORY_RUN_DEADLINE_S)
            except Exception as exc:  # a bench counts failures, it never raises
                problem = f"{type(exc).__name__}: {str(exc)[:80]}"
            if problem is not None:
                errors[problem] += 1

    await asyncio.gather(*(one(first + i) for i in range(runs)))
    return errors


async def memory(backend: str, notes: list[str]) -> None:
    print(
        f"\n== memory: {MEMORY_BATCHES} batches of {MEMORY_RUNS} Platform runs "
        f"(threads.create, runs.create with stream_mode {','.join(MEMORY_MODES)}, runs.join), "
        f"{MEMORY_AT_ONCE} at a time; "
        f"default limits, simulate_latency_ms={MEMORY_LATENCY_MS}; backend {backend}",
        flush=True,
    )
    async with serving(backend, MEMORY_LATENCY_MS, MEMORY_SETTINGS, notes) as server:
        pid = server.process.pid
        pool = httpx.AsyncClient(
            base_url=server.base_url,
            timeout=httpx.Timeout(MEMORY_RUN_DEADLINE_S),
            limits=httpx.Limits(max_connections=2 * MEMORY_AT_ONCE),
        )
        client = LangGraphClient(pool)
        try:
            print(line("server VmRSS MB at start", f"{status_mb(pid, 'VmRSS'):.1f}"))
            warm = await platform_batch(client, -MEMORY_WARM_UP, MEMORY_WARM_UP)
            if warm:
                notes.append(f"warm-up errors {dict(warm)}")
            await asyncio.sleep(MEMORY_SETTLE_S)
            previous = status_mb(pid, "VmRSS")
            print(line(f"server VmRSS MB after {MEMORY_WARM_UP} warm-up", f"{previous:.1f}"))
            print(
                f"  {'batch':>5} {'runs':>5} {'errors':>6} {'wall s':>7} {'runs/s':>7} "
                f"{'VmRSS MB':>9} {'delta MB':>9} {'KB/run':>7} {'VmHWM MB':>9} "
                f"{'srv CPU ms/run':>14}",
                flush=True,
            )
            after: list[float] = []
            for batch in range(MEMORY_BATCHES):
                cpu, wall = server_cpu_s(pid), time.perf_counter()
                errors = await platform_batch(client, batch * MEMORY_RUNS, MEMORY_RUNS)
                wall = time.perf_counter() - wall
                cpu = server_cpu_s(pid) - cpu
                await asyncio.sleep(MEMORY_SETTLE_S)
                rss = status_mb(pid, "VmRSS")
                after.append(rss)
                growth = rss - previous
                previous = rss
                print(
                    f"  {batch + 1:>5} {MEMORY_RUNS:>5} {sum(errors.values()):>6} {wall:>7.2f} "
                    f"{MEMORY_RUNS / wall:>7.1f} {rss:>9.1f} {growth:>+9.1f} "
                    f"{growth * 1024 / MEMORY_RUNS:>+7.0f} {status_mb(pid, 'VmHWM'):>9.1f} "
                    f"{cpu / MEMORY_RUNS * 1000:>14.1f}",
                    flush=True,
                )
                if errors:
                    notes.append(f"batch {batch + 1} errors {dict(errors)}")
        finally:
            await pool.aclose()
    later = MEMORY_RUNS * (MEMORY_BATCHES - 1)
    per_run = (after[-1] - after[0]) * 1024 / later
    print(
        line(
            f"growth batch 1 -> {MEMORY_BATCHES}, KB/run",
            f"{per_run:+.1f} over {later} runs (was about {LEAK_BEFORE_KB:+.0f} KB/run)",
        ),
        flush=True,
    )


# -- main ------------------------------------------------------------------------------


# -- case 4: long reports as HTML -----------------------------------------------------


def long_report(chars: int, seed: int) -> str:
    """A report of about `chars` characters, with the markup a report has."""
    paragraph = (
        f"Finding {seed}: the press made *books* cheap and **common**, and `type` was reused.[^1] "
        "- a list item\n- another with [a link](https://example.org/x)\n\n"
    )
    body = f"# A long report {seed}\n\n" + paragraph * (chars // len(paragraph))
    return body + "\n## References\n\n[^1]: [Source](https://example.org/a)\n"


async def wait_status(client: httpx.AsyncClient, thread: str, wanted: str, after: int) -> int:
    """Follow the thread until its status is `wanted` (by polling); the polls it took."""
    for polls in range(2000):
        detail = (await client.get(f"/v1/research/{thread}")).json()
        if detail["status"] == wanted and polls >= after:
            return polls
        await asyncio.sleep(0.01)
    raise TimeoutError(f"{thread} never reached {wanted}")


async def edited_report(client: httpx.AsyncClient, seed: int) -> str:
    """A run whose report is replaced by a long one at the report's approval; its id."""
    started = await client.post(
        "/v1/research",
        json={"topic": f"render test {seed}", "options": {"approval": "plan_and_report"}},
    )
    thread = str(started.json()["thread_id"])
    await wait_status(client, thread, "waiting_for_approval", 0)
    await client.post(f"/v1/research/{thread}/resume", json={"decision": "approve"})
    await wait_status(client, thread, "waiting_for_approval", 1)
    edit = {"decision": "edit", "report": long_report(RENDER_CHARS, seed)}
    answer = await client.post(f"/v1/research/{thread}/resume", json=edit)
    answer.raise_for_status()
    await wait_status(client, thread, "completed", 0)
    return thread


async def health_probes(base_url: str, until: asyncio.Future[Any] | None) -> list[Answer]:
    """GET /healthz every RENDER_PROBE_EVERY_S, RENDER_PROBES times or until `until` is done."""
    answers = []
    for _ in range(RENDER_PROBES):
        answers.append(await probe(base_url, "/healthz"))
        if until is not None and until.done():
            break
        await asyncio.sleep(RENDER_PROBE_EVERY_S)
    return answers


async def render(backend: str, notes: list[str]) -> None:
    print(
        f"\n== render: {RENDER_REQUESTS} x GET .../report as HTML at once over "
        f"{RENDER_THREADS} reports of ~{RENDER_CHARS} characters; backend {backend}",
        flush=True,
    )
    async with serving(backend, RENDER_LATENCY_MS, {}, notes) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as client:
            threads = [await edited_report(client, seed) for seed in range(RENDER_THREADS)]
            idle = await health_probes(server.base_url, None)
            html = {"Accept": "text/html"}
            waves = []
            for _ in range(2):
                start = time.perf_counter()
                requests = asyncio.gather(
                    *(
                        timed(
                            client.get(
                                f"/v1/research/{threads[i % RENDER_THREADS]}/report", headers=html
                            )
                        )
                        for i in range(RENDER_REQUESTS)
                    )
                )
                during = await health_probes(server.base_url, requests)
                answers = await requests
                waves.append((max(a.ended for a in answers) - start, answers, during))
    idle_ms = [a.seconds for a in idle]
    print(line("health idle p50 / max ms", f"{ms(percentile(idle_ms, 50))} / {ms(max(idle_ms))}"))
    for label, (wall, answers, during) in zip(("first", "again"), waves, strict=True):
        codes = Counter(a.status for a in answers)
        seconds = [a.seconds for a in during]
        print(line(f"renders {label}: wall ms", f"{ms(wall)} ({dict(codes)})"))
        print(
            line(
                f"health during, {label}: p50 / max ms",
                f"{ms(percentile(seconds, 50))} / {ms(max(seconds))} ({len(seconds)} probes)",
            )
        )
        if set(codes) != {"200"}:
            notes.append(f"{label}: answers {dict(codes)}")


async def main(cases: list[str], backend: str) -> None:
    print(f"{os.cpu_count()} CPUs shared by the bench and the server; latencies in ms")
    runners = {"burst": burst, "slow": slow, "memory": memory, "render": render}
    notes: list[str] = []
    for case in cases:
        started = time.perf_counter()
        case_notes: list[str] = []
        try:
            await runners[case](backend, case_notes)
        except Exception as exc:  # one case failing leaves the others their say
            case_notes.append(f"failed: {type(exc).__name__}: {exc}")
        print(f"  ({case} took {time.perf_counter() - started:.1f} s)", flush=True)
        notes.extend(f"{case}: {note}" for note in case_notes)
    if notes:
        print("\nnotes:")
        for note in notes:
            print(note)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", default=",".join(CASES), help="any of burst,slow,memory,render")
    parser.add_argument(
        "--backend",
        choices=["sqlite", "redis"],
        default="sqlite",
        help="redis: the server on a throwaway valkey-server (from the dev extras)",
    )
    args = parser.parse_args()
    chosen = [name.strip() for name in args.case.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in CASES]
    if unknown or not chosen:
        parser.error(f"--case: unknown {', '.join(unknown) or 'none'}; use {','.join(CASES)}")
    asyncio.run(main(chosen, args.backend))
