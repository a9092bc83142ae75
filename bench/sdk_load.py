"""Our server against `langgraph dev`, both driven by the real `langgraph_sdk`, N runs at once.

Engine and search provider only sleep (RESEARCH_SIMULATE_LATENCY_MS), so a run of the
research graph has 4 nodes x LATENCY on its critical path. For each N the same
invocation measures:

- in-process: N x `graph.astream` of our graph with the sleeping deps under one
  `asyncio.gather` (bench/service_load.py's `in_process`): the limit of this machine;
- ours (sdk): a fresh `research-agent serve` (own process, own temp data dir), spoken to
  through its LangGraph Platform API;
- langgraph dev: a fresh `langgraph dev` (langgraph-cli[inmem], in-memory runtime, own
  temp dir so nothing persists between batches, `--n-jobs-per-worker` >= N) serving
  bench/sdk_graph/graph.py: 4 sequential async nodes, each sleeping LATENCY, emitting one
  custom event and a state update of a few KB. Our graph carries more per run (6 node
  steps, about 17 custom events and 125 KB of updates), so the comparison leans its way.

Each of the N clients calls `threads.create()`, then `runs.stream(thread, "research",
input={"topic": ...}, stream_mode=["updates", "custom"])` and reads the stream to its
end; one `httpx.AsyncClient` (connection pool) per 10 clients, handed to `LangGraphClient`.
A run counts as an error if a call raises, the stream carries an `error` event, or it
ends without the update of the graph's last node.

TTFE is the time from calling `runs.stream` to the first event AFTER `metadata` (the first
event that says the graph ran; `metadata` only acknowledges the run and is timed apart,
as "meta p99"); done is the time from the same start to the end of the stream. In-process
TTFE is the time to the first streamed chunk. wall covers the whole batch, thread
creation included, and runs/s is N / wall. Server CPU is utime + stime of the server's
process tree over the batch, per run; RSS is the sum of the tree's VmHWM at the end; bench CPU
is this process's CPU time over the batch, per run (in-process: the graph's whole cost).
Two warm-up runs go first on each server and are not counted. Client and servers share
this machine's CPUs.

`langgraph dev` is installed on first use into its own venv under
~/.cache/research-agent-bench/langgraph-dev-venv (`python -m venv` + `pip install
"langgraph-cli[inmem]"`); if that fails, its row is skipped with the reason.

    python bench/sdk_load.py [--runs 10,50,200] [--latency-ms 50] [--skip-dev]
"""

import argparse
import asyncio
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from langgraph_sdk.client import LangGraphClient

# `python bench/sdk_load.py` puts bench/ first on sys.path, not the repository root.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from app.heap import freeze_heap  # noqa: E402
from bench.service_load import (  # noqa: E402
    CLIENTS_PER_POOL,
    NODES_ON_PATH,
    WARM_UP_RUNS,
    Server,
    Service,
    free_port,
    in_process,
    log_problems,
    server_cpu_s,
    server_peak_rss_mb,
    verdict,
)
from bench.service_load import Batch as ServiceBatch  # noqa: E402
from bench.stats import percentile  # noqa: E402

GRAPH = "research"
STREAM_MODES = ["updates", "custom"]
RUN_DEADLINE_S = 120.0
DEV_READY_DEADLINE_S = 180.0
PIP_DEADLINE_S = 900.0
GRAPH_DIR = Path(__file__).resolve().parent / "sdk_graph"
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "research-agent-bench"
DEV_VENV = CACHE_DIR / "langgraph-dev-venv"
DEV_INSTALLED = DEV_VENV / ".installed"  # written once pip succeeded
DEV_PACKAGE = "langgraph-cli[inmem]"
# The node whose update ends a run: the research graph's, the comparison graph's.
OURS_LAST_NODE = "finalize"
DEV_LAST_NODE = "review"
TARGET_N = 200
TARGET_RUNS_RATIO = 2.0
TARGET_TTFE_RATIO = 0.25
TARGET_WALL_RATIO = 1.3
MODE_WIDTH = 13  # "langgraph dev"


@dataclass
class Batch(ServiceBatch):
    """What one batch measured, with the time to each stream's `metadata` event."""

    meta_s: list[float] = field(default_factory=list)


# -- processes -------------------------------------------------------------------------


def process_tree(pid: int) -> list[int]:
    """`pid` and all its living descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def tree_cpu_s(pid: int) -> float:
    """CPU time of a process tree, in seconds."""
    return sum(server_cpu_s(p) for p in process_tree(pid))


def tree_rss_mb(pid: int) -> float:
    """The sum of the peak RSS of a process tree's members, in MB."""
    return sum(server_peak_rss_mb(p) for p in process_tree(pid))


def dev_binary() -> Path | str:
    """`langgraph` of the separate venv, installed on first use; or why it is not there."""
    binary = DEV_VENV / "bin" / "langgraph"
    if DEV_INSTALLED.exists() and binary.exists():
        return binary
    print(f"installing {DEV_PACKAGE} into {DEV_VENV} (first use) ...", flush=True)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(DEV_VENV)],
        [str(DEV_VENV / "bin" / "python"), "-m", "pip", "install", "-q", DEV_PACKAGE],
    ]
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=PIP_DEADLINE_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{' '.join(step[:4])}: {exc}"
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
            return f"{' '.join(step[:4])} exited {done.returncode}:\n{tail}"
    if not binary.exists():
        return f"{binary} is missing after the install"
    DEV_INSTALLED.write_text(DEV_PACKAGE + "\n")
    return binary


class DevServer(Service):
    """`langgraph dev` serving bench/sdk_graph from a copy in `work_dir`."""

    def __init__(self, binary: Path, work_dir: Path, latency_ms: float, jobs: int) -> None:
        for name in ("graph.py", "langgraph.json"):
            shutil.copy(GRAPH_DIR / name, work_dir / name)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = work_dir / "dev.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
        env.pop("VIRTUAL_ENV", None)
        env.update(
            SDK_BENCH_LATENCY_MS=str(latency_ms),
            LANGGRAPH_NO_VERSION_CHECK="true",
            LANGGRAPH_CLI_NO_ANALYTICS="1",
            LANGSMITH_TRACING="false",
            LANGCHAIN_TRACING_V2="false",
        )
        command = [
            str(binary),
            "dev",
            "--config",
            str(work_dir / "langgraph.json"),
            "--port",
            str(self.port),
            "--no-browser",
            "--no-reload",
            "--n-jobs-per-worker",
            str(jobs),
        ]
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command,
            cwd=work_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    async def wait_ready(self) -> None:
        """Poll /ok until it answers 200; raise with the log's tail if it never does."""
        deadline = time.monotonic() + DEV_READY_DEADLINE_S
        async with httpx.AsyncClient(base_url=self.base_url, timeout=2.0) as client:
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    if (await client.get("/ok")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.2)
        raise RuntimeError(f"langgraph dev did not become ready:\n{self.log_tail()}")


# -- the clients -----------------------------------------------------------------------


@dataclass
class SdkRun:
    """One client's timings, from calling `runs.stream`."""

    meta_s: float
    ttfe_s: float
    done_s: float


async def sdk_run(client: LangGraphClient, i: int, last_node: str) -> SdkRun | str:
    """Create a thread, stream one run on it to the end; its timings or what went wrong."""
    thread = await client.threads.create()
    start = time.perf_counter()
    meta = first = math.nan
    finished = False
    async for part in client.runs.stream(
        thread["thread_id"], GRAPH, input={"topic": f"load test {i}"}, stream_mode=STREAM_MODES
    ):
        now = time.perf_counter() - start
        if part.event == "metadata":
            meta = now if math.isnan(meta) else meta
            continue
        if math.isnan(first):
            first = now
        if part.event == "error":
            return f"error event: {str(part.data)[:80]}"
        if part.event.startswith("updates") and isinstance(part.data, dict):
            finished = finished or last_node in part.data
    done = time.perf_counter() - start
    if not finished:
        return f"no '{last_node}' update"
    return SdkRun(meta, first, done)


async def over_sdk(base_url: str, pid: int, n: int, last_node: str) -> Batch:
    """N SDK clients at once against a server; one connection pool per 10 clients."""
    pools = [
        httpx.AsyncClient(
            base_url=base_url,
            timeout=httpx.Timeout(RUN_DEADLINE_S),
            limits=httpx.Limits(max_connections=2 * CLIENTS_PER_POOL),
        )
        for _ in range(max(1, math.ceil(n / CLIENTS_PER_POOL)))
    ]
    clients = [LangGraphClient(pool) for pool in pools]
    runs: list[SdkRun] = []
    errors: Counter[str] = Counter()

    async def one(i: int) -> None:
        try:
            result = await asyncio.wait_for(
                sdk_run(clients[i // CLIENTS_PER_POOL], i, last_node), RUN_DEADLINE_S
            )
        except Exception as exc:  # a bench counts failures, it never raises
            errors[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
            return
        if isinstance(result, str):
            errors[result] += 1
        else:
            runs.append(result)

    try:
        await asyncio.gather(*(one(i) for i in range(min(WARM_UP_RUNS, n))))
        runs.clear()
        errors.clear()
        cpu, client_cpu = tree_cpu_s(pid), time.process_time()
        wall = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        wall = time.perf_counter() - wall
        client_cpu = time.process_time() - client_cpu
        return Batch(
            wall,
            ttfe_s=[r.ttfe_s for r in runs],
            meta_s=[r.meta_s for r in runs],
            done_s=[r.done_s for r in runs],
            errors=errors,
            client_cpu_s=client_cpu,
            server_cpu_s=tree_cpu_s(pid) - cpu,
            server_rss_mb=tree_rss_mb(pid),
        )
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))


async def ours(n: int, latency_ms: float, notes: list[str]) -> Batch:
    """A fresh `research-agent serve` under N SDK clients."""
    with tempfile.TemporaryDirectory(prefix="bench-sdk-ours-") as tmp:
        server = Server(Path(tmp), latency_ms)
        try:
            await server.wait_ready()
            batch = await over_sdk(server.base_url, server.process.pid, n, OURS_LAST_NODE)
        finally:
            server.stop()
        problems = log_problems(server.log_path.read_text(errors="replace"))
    if batch.errors:
        notes.append(f"{n:>5} ours errors: {dict(batch.errors)}")
    if problems:
        notes.append(f"{n:>5} ours server log, from its first error:\n" + "\n".join(problems))
    return batch


async def dev(n: int, latency_ms: float, binary: Path, notes: list[str]) -> Batch:
    """A fresh `langgraph dev` in a fresh temp dir under N SDK clients."""
    with tempfile.TemporaryDirectory(prefix="bench-sdk-dev-") as tmp:
        server = DevServer(binary, Path(tmp), latency_ms, jobs=max(n, 10))
        try:
            await server.wait_ready()
            batch = await over_sdk(server.base_url, server.process.pid, n, DEV_LAST_NODE)
            if batch.errors:
                notes.append(f"{n:>5} langgraph dev errors: {dict(batch.errors)}")
                notes.append(f"      its log, last lines:\n{server.log_tail(15)}")
        finally:
            server.stop()
    return batch


# -- report ----------------------------------------------------------------------------


def ms(value: float) -> str:
    """Seconds as whole milliseconds; '-' for none."""
    return f"{value * 1000:.0f}" if not math.isnan(value) else "-"


def row(n: int, mode: str, batch: Batch) -> str:
    """One line of the table."""
    rss = f"{batch.server_rss_mb:.0f}" if batch.server_rss_mb is not None else "-"
    cpu = f"{batch.server_cpu_s / n * 1000:.1f}" if batch.server_cpu_s is not None else "-"
    return (
        f"{n:>5} {mode:>{MODE_WIDTH}} {batch.wall_s:>7.3f} {n / batch.wall_s:>7.1f} "
        f"{ms(percentile(batch.ttfe_s, 50)):>8} {ms(percentile(batch.ttfe_s, 99)):>8} "
        f"{ms(percentile(batch.done_s, 50)):>8} {ms(percentile(batch.done_s, 99)):>8} "
        f"{ms(percentile(batch.meta_s, 99)):>9} {sum(batch.errors.values()):>6} "
        f"{rss:>7} {cpu:>11} {batch.client_cpu_s / n * 1000:>13.1f}"
    )


def targets(n: int, sdk: Batch, local: Batch, other: Batch | None) -> list[str]:
    """Our server's targets, set for N=200, checked against this batch."""
    note = "" if n == TARGET_N else f" (targets are set for N={TARGET_N})"
    lines = [f"{n:>5} targets{note}:"]
    if other is not None:
        ratio = (n / sdk.wall_s) / (n / other.wall_s)
        lines.append(
            f"        runs/s ours / langgraph dev {ratio:.2f} >= {TARGET_RUNS_RATIO}: "
            f"{verdict(ratio >= TARGET_RUNS_RATIO)}"
        )
        ttfe = percentile(sdk.ttfe_s, 99) / percentile(other.ttfe_s, 99)
        lines.append(
            f"        TTFE p99 ours / langgraph dev {ttfe:.2f} <= {TARGET_TTFE_RATIO}: "
            f"{verdict(ttfe <= TARGET_TTFE_RATIO)}"
        )
    else:
        lines.append("        runs/s and TTFE against langgraph dev: no langgraph dev row")
    errors = sum(sdk.errors.values())
    lines.append(f"        ours errors {errors} == 0: {verdict(errors == 0)}")
    wall = sdk.wall_s / local.wall_s
    lines.append(
        f"        ours wall / in-process wall {wall:.2f} <= {TARGET_WALL_RATIO}: "
        f"{verdict(wall <= TARGET_WALL_RATIO)}"
    )
    return lines


async def main(latency_ms: float, sizes: list[int], skip_dev: bool) -> None:
    """Every N: in-process, ours, langgraph dev; the table, the targets, the notes."""
    latency = latency_ms / 1000
    binary: Path | None = None
    if skip_dev:
        print("langgraph dev: skipped (--skip-dev)")
    else:
        found = dev_binary()
        if isinstance(found, str):
            print(f"langgraph dev: skipped, its install failed: {found}")
        else:
            binary = found
    print(
        f"critical path {NODES_ON_PATH * latency_ms:.0f} ms ({NODES_ON_PATH} nodes x "
        f"{latency_ms:.0f} ms); {os.cpu_count()} CPUs shared by client and server; times in ms"
    )
    print("TTFE: runs.stream call -> first event after metadata; meta: -> metadata event")
    print(
        f"{'N':>5} {'target':>{MODE_WIDTH}} {'wall s':>7} {'runs/s':>7} {'TTFE p50':>8} "
        f"{'TTFE p99':>8} {'done p50':>8} {'done p99':>8} {'meta p99':>9} {'errors':>6} "
        f"{'RSS MB':>7} {'srv CPU/run':>11} {'bench CPU/run':>13}",
        flush=True,
    )
    await in_process(WARM_UP_RUNS, latency, "warm")  # imports and first compile
    notes: list[str] = []
    verdicts: list[str] = []
    for n in sizes:
        measured = await in_process(n, latency, "bench")
        local = Batch(**vars(measured))  # no metadata event in process
        if local.errors:
            notes.append(f"{n:>5} in-process errors: {dict(local.errors)}")
        print(row(n, "in-process", local), flush=True)
        sdk = await ours(n, latency_ms, notes)
        print(row(n, "ours (sdk)", sdk), flush=True)
        other: Batch | None = None
        if binary is not None:
            try:
                other = await dev(n, latency_ms, binary, notes)
            except RuntimeError as exc:
                notes.append(f"{n:>5} langgraph dev: {exc}")
            else:
                print(row(n, "langgraph dev", other), flush=True)
        verdicts.extend(targets(n, sdk, local, other))
    for line in verdicts + notes:
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--runs", default="10,50,200")
    parser.add_argument("--skip-dev", action="store_true", help="no langgraph dev rows")
    args = parser.parse_args()
    if args.latency_ms < 1:  # 0 would make our server use the real engine and corpus
        parser.error("--latency-ms must be at least 1")
    sizes = [int(n) for n in args.runs.split(",")]
    freeze_heap()  # as the service does after its start-up
    asyncio.run(main(args.latency_ms, sizes, args.skip_dev))
