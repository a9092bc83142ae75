"""How long a run waits when the worker holding it is killed (SIGKILL).

A throwaway valkey-server, one `serve --no-worker` and two `research-agent worker`
processes (one run slot each), runs slowed by a search delay. For each lease length a
run starts, the worker that holds it is killed while it runs, and the script prints the
time from the kill to the other worker's `running` (recovered) event and to `done`.

    python bench/takeover.py [--leases 2,10] [--repeat 3]
"""

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

# `python bench/takeover.py` puts bench/ first on sys.path, not the repository root.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bench.stats import percentile  # noqa: E402
from tests.processes import server, worker  # noqa: E402
from tests.redis_server import redis_server  # noqa: E402
from tests.servers import free_port  # noqa: E402
from tests.sse import frames  # noqa: E402
from tools.corpus_files import iter_documents  # noqa: E402
from tools.local_corpus import build_index  # noqa: E402

TOPIC = "history of the printing press"
SEARCH_DELAY_MS = 1500


def holder(workers: list[subprocess.Popen[bytes]], logs: list[Path], thread_id: str) -> int:
    """The index of the worker whose log says it is processing the thread's job."""
    for n, log in enumerate(logs):
        if f"key: {thread_id}".encode() in log.read_bytes():
            return n
    raise RuntimeError("no worker took the run")


async def one_takeover(
    client: httpx.AsyncClient, workers: list[subprocess.Popen[bytes]], logs: list[Path]
) -> tuple[float, float]:
    """Kill the holder of a fresh run mid-run; seconds from the kill to recovered and done."""
    thread_id = (await client.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
    killed_at = recovered_at = 0.0
    async with client.stream("GET", f"/v1/research/{thread_id}/events") as response:
        async for frame in frames(response):
            if frame.event == "node_finished" and not killed_at:
                victim = workers[holder(workers, logs, thread_id)]
                victim.send_signal(signal.SIGKILL)
                killed_at = time.monotonic()
            elif frame.event == "status" and frame.data.get("recovered"):
                recovered_at = time.monotonic()
            elif frame.event == "done":
                assert frame.data["status"] == "completed", frame.data
                return recovered_at - killed_at, time.monotonic() - killed_at
    raise RuntimeError("the stream ended without done")


async def measure(lease: int, repeat: int, work: Path, corpus: Path) -> list[tuple[float, float]]:
    results = []
    for attempt in range(repeat):
        with redis_server() as url:
            env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
            env |= {
                "RESEARCH_CONFIG": str(work / "none.toml"),
                "RESEARCH_CORPUS_INDEX": str(corpus),
                "RESEARCH_SEARCH_PROVIDER": "local",
                "RESEARCH_DATA_DIR": str(work / "data"),
                "RESEARCH_SEARCH_DELAY_MS": str(SEARCH_DELAY_MS),
                "RESEARCH_WORKER_LEASE_SECONDS": str(lease),
                "RESEARCH_MAX_CONCURRENT_RUNS": "1",
                "RESEARCH_REDIS_URL": url,
            }
            port = free_port()
            logs = [work / f"l{lease}-{attempt}-w{n}.log" for n in range(2)]
            with (
                server(env, port, work / f"l{lease}-{attempt}-api.log", "--no-worker"),
                worker(env, logs[0]) as first,
                worker(env, logs[1]) as second,
            ):
                async with httpx.AsyncClient(
                    base_url=f"http://127.0.0.1:{port}", timeout=120
                ) as client:
                    results.append(await one_takeover(client, [first, second], logs))
    return results


async def main(leases: list[int], repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = work / "index.sqlite"
        build_index(iter_documents(ROOT / "tests" / "fixtures" / "corpus"), corpus)
        print(f"search delay {SEARCH_DELAY_MS} ms; {repeat} kills per lease")
        print(f"{'lease s':>8} {'recovered p50':>14} {'max':>6} {'done p50':>9} {'max':>6}")
        for lease in leases:
            results = await measure(lease, repeat, work, corpus)
            recovered = [r for r, _ in results]
            done = [d for _, d in results]
            print(
                f"{lease:>8} {percentile(recovered, 50):>13.2f}s {max(recovered):>5.2f}s "
                f"{percentile(done, 50):>8.2f}s {max(done):>5.2f}s"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--leases", default="2,10")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main([int(x) for x in args.leases.split(",")], args.repeat))
