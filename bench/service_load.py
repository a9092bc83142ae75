"""How close the HTTP service comes to the graph alone, with N runs at once.

Engine and search provider only sleep (RESEARCH_SIMULATE_LATENCY_MS), so each run's
critical path is 4 nodes x LATENCY. For each N the same invocation measures:

- in-process: N x `graph.astream` under one `asyncio.gather`, the SQLite saver in a
  temp dir, no HTTP and no event log: the physical limit of this machine;
- http sqlite: a fresh `research-agent serve` (own process, own temp data dir); N clients
  each POST /v1/research and stream GET /v1/research/{id}/events until `done`, one
  httpx.AsyncClient per 10 clients;
- http redis (`--backend both`): the same on a fresh throwaway valkey-server, runs as
  queue jobs executed by the API process's own worker;
- http redis+Kw (`--backend both --workers K`): the same again, but `serve --no-worker`
  only serves the API and K `research-agent worker` processes execute the runs, each up
  to ceil(N/K) at once so that together they hold all N (what a scaled-out deployment
  pays for the hop through the queue).

TTFE is the time to the first event (HTTP: from the POST going on the wire, as httpcore's
trace reports it, to the first SSE event; in-process: from the start to the first
streamed chunk); done is the time to the `done` event from the same start (in-process:
to the end of the stream). The HTTP client's own lag before its POST reaches the wire
(one Python process opening N connections at once) is printed apart. Server CPU is
utime + stime of the server process over the measured batch; peak RSS is its VmHWM at
the end. With workers, both cover the API process and the K workers: CPU is their sum,
RSS the sum of their peaks (each process's own peak, so an upper bound on the peak of the
whole). Two warm-up runs go first on each side and are not counted. The bench process
settles its heap as the service does (`app.heap`), so in-process runs pay the same
garbage collection. BENCH_PROFILE_DIR=DIR profiles each service process with cProfile
(DIR/server-*.prof; the profiler roughly doubles their CPU).

    python bench/service_load.py [--latency-ms 50] [--runs 50,200] [--backend both]
        [--workers K]
"""

import argparse
import asyncio
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from app.heap import freeze_heap
from core.options import RunOptions
from core.state import initial_state
from engines.simulated import SleepingEngine
from graph.builder import build_graph
from nodes.context import Deps
from service.execution import STREAM_MODES
from service.runner import thread_config
from stores.sqlite_saver import GroupCommitSqliteSaver
from stores.sqlite_writer import open_sqlite
from tools.simulated import SleepingSearchProvider

# `python bench/service_load.py` puts bench/ first on sys.path, not the repository root.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bench.stats import percentile  # noqa: E402
from tests.redis_server import redis_server  # noqa: E402

NODES_ON_PATH = 4
CLIENTS_PER_POOL = 10
READY_DEADLINE_S = 60.0
STOP_DEADLINE_S = 10.0
RUN_DEADLINE_S = 120.0
WARM_UP_RUNS = 2
# httpcore's trace event for the moment a request starts going on the wire.
SENT_EVENT = "http11.send_request_headers.started"
# What `research-agent worker` writes (to stderr) once it takes jobs from the queue.
WORKER_READY = b"worker: executing"
# The API process's own limits: enough for any N here, so no run is refused (429).
SERVER_MAX_RUNS = 1000
TARGET_N = 200
TARGET_WALL_RATIO = 1.3
TARGET_TTFE_P99_S = 0.5
TARGET_RSS_MB = 300.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
MODE_WIDTH = 14  # "http redis+16w"


@dataclass
class Batch:
    """What one batch of N concurrent runs measured."""

    wall_s: float
    ttfe_s: list[float] = field(default_factory=list)
    done_s: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    client_cpu_s: float = 0.0
    server_cpu_s: float | None = None
    server_rss_mb: float | None = None
    client_lag_s: list[float] = field(default_factory=list)


# -- in process ------------------------------------------------------------------------


async def in_process(n: int, latency_s: float, tag: str) -> Batch:
    """N runs through the graph at once, streamed as the service streams them."""
    deps = Deps(engine=SleepingEngine(latency_s), search=SleepingSearchProvider(latency_s))
    ttfe: list[float] = []
    done: list[float] = []
    errors: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="bench-inproc-") as tmp:
        async with open_sqlite(Path(tmp) / "checkpoints.sqlite", GroupCommitSqliteSaver) as saver:
            graph = build_graph(saver)

            async def one(i: int) -> None:
                config = thread_config(f"{tag}-{n}-{i}")
                state = initial_state(f"load test {i}", RunOptions())
                start = time.perf_counter()
                first = None
                try:
                    async for _ in graph.astream(
                        state, config, context=deps, stream_mode=STREAM_MODES
                    ):
                        if first is None:
                            first = time.perf_counter() - start
                    final = await graph.aget_state(config)
                except Exception as exc:  # a bench counts failures, it never raises
                    errors[type(exc).__name__] += 1
                    return
                if not final.values.get("final_report"):
                    errors["no report"] += 1
                    return
                ttfe.append(first if first is not None else math.nan)
                done.append(time.perf_counter() - start)

            cpu, wall = time.process_time(), time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(n)))
            wall = time.perf_counter() - wall
            cpu = time.process_time() - cpu
    return Batch(wall, ttfe, done, errors, client_cpu_s=cpu)


# -- the server ------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_cpu_s(pid: int) -> float:
    """CPU time (utime + stime) of a process and all its threads, in seconds; NaN if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return math.nan
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "; fields[0] is state
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of proc(5)


def server_peak_rss_mb(pid: int) -> float:
    """VmHWM of a process, in MB; NaN if gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return math.nan
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return math.nan


def service_env(
    data_dir: Path, latency_ms: float, redis_url: str | None, max_concurrent_runs: int
) -> dict[str, str]:
    """The environment of one service process: only the bench's RESEARCH_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    env.update(
        RESEARCH_DATA_DIR=str(data_dir),
        RESEARCH_CONFIG=str(data_dir / "none.toml"),  # does not exist: defaults
        RESEARCH_SIMULATE_LATENCY_MS=str(round(latency_ms)),
        RESEARCH_MAX_CONCURRENT_RUNS=str(max_concurrent_runs),
        RESEARCH_MAX_QUEUED_RUNS=str(SERVER_MAX_RUNS),
        RESEARCH_SEARCH_PROVIDER="local",
    )
    if redis_url is not None:  # checkpoints, events, registry and queue on Redis
        env["RESEARCH_REDIS_URL"] = redis_url
    return env


def _entry_point(name: str) -> str:
    """The service's `main()`; under cProfile when BENCH_PROFILE_DIR names a folder.

    The profile (DIR/NAME-<ns>.prof, for `python -m pstats`) is written when the process
    ends: SIGTERM becomes SystemExit, which `cProfile.run` catches before dumping.
    """
    folder = os.environ.get("BENCH_PROFILE_DIR")
    if not folder:
        return "from app.cli import main; main()"
    out = str(Path(folder) / f"{name}-{time.time_ns()}.prof")
    return (
        "import cProfile, signal, sys; "
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); "
        f"cProfile.run('from app.cli import main; main()', {out!r})"
    )


class Service:
    """One `research-agent` command in its own process, its output in a log file."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        command = [sys.executable, "-c", _entry_point(log_path.stem)]
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [*command, *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log_tail(self, lines: int = 20) -> str:
        """The last lines the process wrote."""
        self._log.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        """SIGTERM the process (kill it if it does not stop within STOP_DEADLINE_S)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


class Server(Service):
    """`research-agent serve` with its own data dir; `api_only`: `--no-worker`."""

    def __init__(
        self,
        data_dir: Path,
        latency_ms: float,
        redis_url: str | None = None,
        api_only: bool = False,
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        env = service_env(data_dir, latency_ms, redis_url, SERVER_MAX_RUNS)
        options = ["--no-worker"] if api_only else []
        super().__init__(
            ["serve", "--port", str(self.port), *options], env, data_dir / "server.log"
        )

    async def wait_ready(self) -> None:
        """Poll /readyz until it answers 200; raise with the log's tail if it never does."""
        deadline = time.monotonic() + READY_DEADLINE_S
        async with httpx.AsyncClient(base_url=self.base_url, timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break
                try:
                    if (await client.get("/readyz")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"the server did not become ready:\n{self.log_tail()}")


class Worker(Service):
    """`research-agent worker` on `redis_url`, executing up to `concurrency` runs at once."""

    def __init__(
        self, data_dir: Path, index: int, latency_ms: float, redis_url: str, concurrency: int
    ) -> None:
        self.index = index
        env = service_env(data_dir, latency_ms, redis_url, concurrency)
        super().__init__(["worker"], env, data_dir / f"worker-{index}.log")

    async def wait_ready(self) -> None:
        """Wait until the worker says it executes runs; raise with its log if it never does."""
        deadline = time.monotonic() + READY_DEADLINE_S
        while time.monotonic() < deadline and self.process.poll() is None:
            self._log.flush()
            if WORKER_READY in self.log_path.read_bytes():
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"worker {self.index} did not become ready:\n{self.log_tail()}")


# -- over HTTP -------------------------------------------------------------------------


async def first_and_done(response: httpx.Response, start: float) -> tuple[float, float, str]:
    """Read SSE frames until `done`: (time to first event, time to done, final status)."""
    first = math.nan
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "data" in fields:
                if math.isnan(first):
                    first = time.perf_counter() - start
                if fields.get("event") == "done":
                    status = json.loads(fields["data"]).get("status", "?")
                    return first, time.perf_counter() - start, str(status)
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
    raise EOFError("the stream ended before 'done'")


@dataclass
class HttpRun:
    """One client's timings, from the moment its POST went on the wire."""

    lag_s: float  # from calling `post` to the request going on the wire (client side)
    ttfe_s: float
    done_s: float


async def http_run(client: httpx.AsyncClient, i: int) -> HttpRun | str:
    """Start one run and follow its events; its timings or what went wrong."""
    called = time.perf_counter()
    on_wire: list[float] = []

    async def trace(name: str, info: object) -> None:
        if name == SENT_EVENT and not on_wire:
            on_wire.append(time.perf_counter())

    answer = await client.post(
        "/v1/research", json={"topic": f"load test {i}"}, extensions={"trace": trace}
    )
    if answer.status_code != 202:
        return f"POST {answer.status_code}"
    start = on_wire[0] if on_wire else called
    events = answer.json()["links"]["events"]
    async with client.stream("GET", events) as response:
        if response.status_code != 200:
            return f"GET {response.status_code}"
        first, done, status = await first_and_done(response, start)
    if status != "completed":
        return f"run {status}"
    return HttpRun(start - called, first, done)


async def over_http(server: Server, n: int, measured: list[Service]) -> Batch:
    """N clients at once against the server; one connection pool per 10 clients.

    Server CPU is summed over the `measured` processes and so is their peak RSS: with
    workers, the cost of a run is split between the API process and them.
    """
    pools = [
        httpx.AsyncClient(
            base_url=server.base_url,
            timeout=httpx.Timeout(RUN_DEADLINE_S),
            limits=httpx.Limits(max_connections=2 * CLIENTS_PER_POOL),
        )
        for _ in range(max(1, math.ceil(n / CLIENTS_PER_POOL)))
    ]
    lag: list[float] = []
    ttfe: list[float] = []
    done: list[float] = []
    errors: Counter[str] = Counter()

    async def one(i: int) -> None:
        try:
            result = await asyncio.wait_for(
                http_run(pools[i // CLIENTS_PER_POOL], i), RUN_DEADLINE_S
            )
        except Exception as exc:  # a bench counts failures, it never raises
            errors[type(exc).__name__] += 1
            return
        if isinstance(result, str):
            errors[result] += 1
        else:
            lag.append(result.lag_s)
            ttfe.append(result.ttfe_s)
            done.append(result.done_s)

    try:
        await asyncio.gather(*(one(i) for i in range(min(WARM_UP_RUNS, n))))
        errors.clear()
        lag.clear()
        ttfe.clear()
        done.clear()
        pids = [service.process.pid for service in measured]
        server_cpu, cpu = sum(server_cpu_s(pid) for pid in pids), time.process_time()
        wall = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        wall = time.perf_counter() - wall
        batch = Batch(wall, ttfe, done, errors, client_cpu_s=time.process_time() - cpu)
        batch.client_lag_s = lag
        batch.server_cpu_s = sum(server_cpu_s(pid) for pid in pids) - server_cpu
        batch.server_rss_mb = sum(server_peak_rss_mb(pid) for pid in pids)
        return batch
    finally:
        await asyncio.gather(*(pool.aclose() for pool in pools))


# -- report ----------------------------------------------------------------------------


def row(n: int, mode: str, batch: Batch, critical: float) -> str:
    """One line of the table."""

    def ms(value: float) -> str:
        return f"{value * 1000:.0f}" if not math.isnan(value) else "-"

    rss = f"{batch.server_rss_mb:.0f}" if batch.server_rss_mb is not None else "-"
    server_cpu = f"{batch.server_cpu_s / n * 1000:.1f}" if batch.server_cpu_s is not None else "-"
    return (
        f"{n:>5} {mode:>{MODE_WIDTH}} {batch.wall_s:>7.3f} {batch.wall_s / critical:>9.2f} "
        f"{n / batch.wall_s:>7.1f} {ms(percentile(batch.ttfe_s, 50)):>8} "
        f"{ms(percentile(batch.ttfe_s, 99)):>8} {ms(percentile(batch.done_s, 50)):>8} "
        f"{ms(percentile(batch.done_s, 99)):>8} {sum(batch.errors.values()):>6} "
        f"{rss:>7} {server_cpu:>10} {batch.client_cpu_s / n * 1000:>10.1f}"
    )


def verdict(ok: bool) -> str:
    """How a target came out."""
    return "met" if ok else "NOT MET"


def targets(n: int, http: Batch, local: Batch) -> list[str]:
    """The service's targets, set for N=200, checked against this batch."""
    ratio = http.wall_s / local.wall_s
    errors = sum(http.errors.values())
    ttfe_p99 = percentile(http.ttfe_s, 99)
    rss = http.server_rss_mb if http.server_rss_mb is not None else math.nan
    note = "" if n == TARGET_N else f" (targets are set for N={TARGET_N})"
    return [
        f"{n:>5} targets{note}:",
        f"        http sqlite wall / in-process wall {ratio:.2f} <= {TARGET_WALL_RATIO}: {verdict(ratio <= TARGET_WALL_RATIO)}",
        f"        http sqlite errors {errors} == 0: {verdict(errors == 0)}",
        f"        TTFE p99 {ttfe_p99:.3f} s <= {TARGET_TTFE_P99_S} s: {verdict(ttfe_p99 <= TARGET_TTFE_P99_S)}",
        f"        server peak RSS {rss:.0f} MB < {TARGET_RSS_MB:.0f} MB: {verdict(rss < TARGET_RSS_MB)}",
    ]


async def serve_and_load(
    n: int, latency_ms: float, redis_url: str | None, workers: int, label: str, notes: list[str]
) -> Batch:
    """A fresh `research-agent serve` (on SQLite, or on `redis_url`) under N clients.

    With `workers` > 0 (Redis only), the server only serves the API and that many
    `research-agent worker` processes, started and ready before the batch, execute the
    runs: each takes ceil(N / workers) at once, so together they hold all N.
    """
    with tempfile.TemporaryDirectory(prefix="bench-service-") as tmp:
        data_dir = Path(tmp)
        server = Server(data_dir, latency_ms, redis_url, api_only=workers > 0)
        pool: list[Worker] = []
        try:
            if workers:
                assert redis_url is not None, "workers take runs from the Redis queue"
                concurrency = math.ceil(n / workers)
                pool = [
                    Worker(data_dir, i, latency_ms, redis_url, concurrency) for i in range(workers)
                ]
            await server.wait_ready()
            await asyncio.gather(*(worker.wait_ready() for worker in pool))
            http = await over_http(server, n, [server, *pool])
            if http.errors:
                notes.append(f"{n:>5} {label} errors: {dict(http.errors)}")
                notes.append(f"      server log, last lines:\n{server.log_tail(10)}")
                for worker in pool:
                    notes.append(
                        f"      worker {worker.index} log, last lines:\n{worker.log_tail(10)}"
                    )
        finally:
            for worker in pool:
                worker.stop()
            server.stop()
    return http


def log_problems(log: str, limit: int = 80) -> list[str]:
    """The lines of a server log from its first traceback or error on, at most `limit`."""
    lines = log.splitlines()
    for index, line in enumerate(lines):
        if "Traceback" in line or " ERROR" in line or line.startswith("ERROR"):
            return lines[index : index + limit]
    return []


async def main(latency_ms: float, sizes: list[int], redis: bool, workers: int) -> None:
    latency = latency_ms / 1000
    critical = NODES_ON_PATH * latency
    print(f"critical path {critical * 1000:.0f} ms ({NODES_ON_PATH} nodes x {latency_ms:.0f} ms)")
    print(f"{os.cpu_count()} CPUs; client and server share them; times in ms unless marked")
    if workers:
        print(
            f"http redis+{workers}w: `serve --no-worker` + {workers} `research-agent worker`; "
            "srv CPU/run is their sum, RSS MB the sum of their peaks"
        )
    print(
        f"{'N':>5} {'mode':>{MODE_WIDTH}} {'wall s':>7} {'wall/crit':>9} {'runs/s':>7} "
        f"{'TTFE p50':>8} {'TTFE p99':>8} {'done p50':>8} {'done p99':>8} {'errors':>6} "
        f"{'RSS MB':>7} {'srv CPU/run':>10} {'bench CPU/run':>10}"
    )
    await in_process(WARM_UP_RUNS, latency, "warm")  # imports and first compile
    notes: list[str] = []
    for n in sizes:
        local = await in_process(n, latency, "bench")
        print(row(n, "in-process", local, critical))
        http = await serve_and_load(n, latency_ms, None, 0, "http sqlite", notes)
        if local.errors:
            notes.append(f"{n:>5} in-process errors: {dict(local.errors)}")
        print(row(n, "http sqlite", http, critical))
        if redis:
            with redis_server() as url:  # a fresh server per N
                on_redis = await serve_and_load(n, latency_ms, url, 0, "http redis", notes)
            print(row(n, "http redis", on_redis, critical))
        if workers:
            label = f"http redis+{workers}w"
            with redis_server() as url:  # a fresh one again: nothing left from the row above
                scaled = await serve_and_load(n, latency_ms, url, workers, label, notes)
            print(row(n, label, scaled, critical))
        print(
            f"{n:>5} http sqlite client lag from calling post to the POST on the wire "
            f"(not in TTFE): p50 {percentile(http.client_lag_s, 50) * 1000:.0f} ms, "
            f"p99 {percentile(http.client_lag_s, 99) * 1000:.0f} ms"
        )
        print(f"{n:>5} http sqlite/in-process wall ratio: {http.wall_s / local.wall_s:.2f}")
        for line in targets(n, http, local):
            print(line)
    for line in notes:
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--runs", default="50,200")
    parser.add_argument(
        "--backend",
        choices=["sqlite", "both"],
        default="sqlite",
        help="both: also the service on Redis (a throwaway valkey-server from the dev extras)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="K",
        help="with --backend both: one more row, `serve --no-worker` + K `research-agent worker`",
    )
    args = parser.parse_args()
    if args.latency_ms < 1:  # 0 would make the server use the real engine and corpus
        parser.error("--latency-ms must be at least 1")
    if args.workers < 0:
        parser.error("--workers must be 0 or more")
    if args.workers and args.backend != "both":  # workers take their runs from Redis
        parser.error("--workers needs --backend both: workers take runs from the Redis queue")
    sizes = [int(n) for n in args.runs.split(",")]
    freeze_heap()  # as the service does after its start-up
    asyncio.run(main(args.latency_ms, sizes, args.backend == "both", args.workers))
