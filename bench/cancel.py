"""How long a cancel takes to stop a run that is searching, embedded and across processes.

For each backend a fresh service runs: SQLite (`serve`, runs in the API process), and a
throwaway valkey-server with `serve --no-worker` and one `research-agent worker` (the run
executes in another process; the cancel reaches it through saq's abort). Searches are
slowed so the run is mid-search when the cancel comes. For each of `--repeat` runs:
start it, wait for its first `node_finished`, then time `POST .../cancel` (it answers
once the run has stopped) and the `done` event on the run's stream.

    python bench/cancel.py [--repeat 8]
"""

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

# `python bench/cancel.py` puts bench/ first on sys.path, not the repository root.
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
SEARCH_DELAY_MS = 3000


async def one_cancel(client: httpx.AsyncClient) -> tuple[float, float]:
    """Cancel a fresh run mid-search; seconds until the cancel answered and until `done`."""
    thread_id = (await client.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
    asked = answered = 0.0
    async with client.stream("GET", f"/v1/research/{thread_id}/events") as response:
        async for frame in frames(response):
            if frame.event == "node_finished" and not asked:
                asked = time.monotonic()
                answer = await client.post(f"/v1/research/{thread_id}/cancel")
                answer.raise_for_status()
                answered = time.monotonic() - asked
            elif frame.event == "done":
                assert frame.data["status"] == "cancelled", frame.data
                return answered, time.monotonic() - asked
    raise RuntimeError("the stream ended without done")


@contextmanager
def service(backend: str, work: Path, corpus: Path) -> Iterator[str]:
    """The base URL of a fresh service on `backend` (sqlite, or redis with one worker)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    env |= {
        "RESEARCH_CONFIG": str(work / "none.toml"),
        "RESEARCH_CORPUS_INDEX": str(corpus),
        "RESEARCH_SEARCH_PROVIDER": "local",
        "RESEARCH_DATA_DIR": str(work / f"data-{backend}"),
        "RESEARCH_SEARCH_DELAY_MS": str(SEARCH_DELAY_MS),
    }
    port = free_port()
    with ExitStack() as stack:
        if backend == "redis":
            env["RESEARCH_REDIS_URL"] = stack.enter_context(redis_server())
            stack.enter_context(server(env, port, work / "api-redis.log", "--no-worker"))
            stack.enter_context(worker(env, work / "worker.log"))
        else:
            stack.enter_context(server(env, port, work / "api-sqlite.log"))
        yield f"http://127.0.0.1:{port}"


async def measure(backend: str, repeat: int, work: Path, corpus: Path) -> list[tuple[float, float]]:
    with service(backend, work, corpus) as url:
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            return [await one_cancel(client) for _ in range(repeat)]


async def main(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = work / "index.sqlite"
        build_index(iter_documents(ROOT / "tests" / "fixtures" / "corpus"), corpus)
        print(f"search delay {SEARCH_DELAY_MS} ms; {repeat} cancels per backend; ms")
        print(f"{'backend':>8} {'answered p50':>13} {'max':>6} {'done p50':>9} {'max':>6}")
        for backend in ("sqlite", "redis"):
            results = await measure(backend, repeat, work, corpus)
            answered = [a * 1000 for a, _ in results]
            done = [d * 1000 for _, d in results]
            print(
                f"{backend:>8} {percentile(answered, 50):>13.0f} {max(answered):>6.0f} "
                f"{percentile(done, 50):>9.0f} {max(done):>6.0f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=8)
    asyncio.run(main(parser.parse_args().repeat))
