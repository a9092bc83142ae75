"""Redis deployments: API processes that only serve, workers that execute, all real processes.

Two API processes (`serve --no-worker`) and two `research-agent worker` processes share one
Redis server started for the test. Runs are slowed by a search delay so that a worker can
be killed, a run paused, or Redis stopped while runs are under way.
"""

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from service.runner import thread_config
from stores.redis_flat_saver import redis_saver

from .processes import serving, together, working
from .redis_server import redis_server
from .servers import free_port
from .sse import Frame, collect, timeline
from .support import TOPIC

pytestmark = pytest.mark.slow

WAIT_S = 90.0
OUTAGE_S = 4.0


@pytest.fixture
def environment(tmp_path: Path, corpus_index: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    return env | {
        "RESEARCH_CONFIG": str(tmp_path / "none.toml"),
        "RESEARCH_CORPUS_INDEX": str(corpus_index),
        "RESEARCH_SEARCH_PROVIDER": "local",
        "RESEARCH_DATA_DIR": str(tmp_path / "data"),
        "RESEARCH_SEARCH_DELAY_MS": "1000",
        "RESEARCH_WORKER_LEASE_SECONDS": "2",
        "RESEARCH_MAX_CONCURRENT_RUNS": "5",
    }


@asynccontextmanager
async def deployment(
    env: dict[str, str], logs: Path, workers: int = 2, stop_s: float = 30.0
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient, list[Any]]]:
    """Two API processes without workers (a client for each), and `workers` workers.

    `stop_s`: how long a worker may take to stop on SIGTERM at the end.
    """
    ports = [free_port(), free_port()]
    with together(
        *(serving(env, port, logs / f"api{n}.log", "--no-worker") for n, port in enumerate(ports)),
        *(working(env, logs / f"worker{n}.log", stop_s) for n in range(workers)),
    ) as processes:
        running = processes[len(ports) :]
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports[0]}", timeout=30) as a,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports[1]}", timeout=30) as b,
        ):
            yield a, b, running


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll `check` until it holds, failing after a generous deadline (not a timing)."""
    deadline = time.monotonic() + WAIT_S
    while not await check():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        await asyncio.sleep(0.1)


async def status(client: httpx.AsyncClient, thread_id: str) -> str:
    return str((await client.get(f"/v1/research/{thread_id}")).json()["status"])


def assert_once_in_order(frames: list[Frame]) -> None:
    ids = [f.id for f in frames]
    assert ids == list(range(1, len(ids) + 1)), "every event once, ids increasing"
    assert frames[-1].event == "done"


def assert_no_crash_logged(logs: Path) -> None:
    """Through an outage the workers and APIs warn, once per outage; nothing reads as a crash."""
    for log in sorted([*logs.glob("worker*.log"), *logs.glob("api*.log")]):
        text = log.read_text()
        assert "Task exception was never retrieved" not in text, log.name
        assert "Traceback" not in text, f"{log.name}: {text[text.find('Traceback') - 300 :][:1500]}"
        assert " ERROR " not in text, f"{log.name}: {text[text.find(' ERROR ') - 200 :][:800]}"


async def checkpoint_history(url: str, thread_id: str) -> list[dict[str, Any]]:
    """Each checkpoint's metadata, newest first, read straight from the Redis saver."""
    async with redis_saver(url) as saver:
        root = thread_config(thread_id)
        root["configurable"]["checkpoint_ns"] = ""  # the graph's own, not its subgraphs'
        return [dict(c.metadata) async for c in saver.alist(root)]


@pytest.mark.parametrize("slots", [5, 20])
async def test_runs_through_two_apis_survive_a_killed_worker(
    environment: dict[str, str], tmp_path: Path, slots: int
) -> None:
    with redis_server() as url:
        env = environment | {
            "RESEARCH_REDIS_URL": url,
            "RESEARCH_MAX_CONCURRENT_RUNS": str(slots),
            # Runs long enough that the survivor's are still going while the orphans
            # are taken up (a sweep that waited on each orphan took seconds).
            "RESEARCH_SEARCH_DELAY_MS": str(slots * 200),
        }
        async with deployment(env, tmp_path) as (a, b, workers):
            started = [
                (await a.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
                for _ in range(2 * slots)
            ]
            streams = [asyncio.create_task(collect(b, f"/v1/research/{t}/events")) for t in started]

            async def all_running() -> bool:
                states = await asyncio.gather(*(status(b, t) for t in started))
                return all(s == "running" for s in states)

            # With every run running, each worker holds as many as it has slots.
            await until(all_running, "every run running")
            workers[0].send_signal(signal.SIGKILL)
            workers[0].wait(timeout=10)
            frames = await asyncio.wait_for(asyncio.gather(*streams), WAIT_S)
            details = [(await a.get(f"/v1/research/{t}")).json() for t in started]
        histories = [await checkpoint_history(url, t) for t in started]
    for stream in frames:
        assert_once_in_order(stream)
    assert all(d["status"] == "completed" and d["report"] for d in details)
    taken_over = [s for s in frames if any(f.data.get("recovered") for f in s)]
    # Exactly the killed worker's: none of the survivor's own runs, whose heartbeats a
    # slow sweep once read as silent, was aborted and started over.
    assert len(taken_over) == slots, f"{len(taken_over)} runs were taken up again, not {slots}"
    for history in histories:
        # Continued from its checkpoints, not started again: one input, no step twice.
        assert [m["source"] for m in history].count("input") == 1
        steps = [m["step"] for m in history]
        assert len(steps) == len(set(steps)), f"a step ran twice: {steps}"


async def test_approve_pause_resume_and_cancel_across_processes(
    environment: dict[str, str], tmp_path: Path
) -> None:
    with redis_server() as url:
        env = environment | {"RESEARCH_REDIS_URL": url}
        async with deployment(env, tmp_path) as (a, b, _):
            # Approval: asked through B's stream, answered through A.
            body = {"topic": TOPIC, "options": {"approval": "plan"}}
            waiting = (await b.post("/v1/research", json=body)).json()["thread_id"]
            asked = await collect(b, f"/v1/research/{waiting}/events", until="approval_required")
            answer = await a.post(f"/v1/research/{waiting}/resume", json={"decision": "approve"})
            assert answer.status_code == 200, answer.text

            # Pause through A while a worker runs it, resume through B.
            paused = (await a.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
            await collect(b, f"/v1/research/{paused}/events", until="node_finished")
            assert (await a.post(f"/v1/research/{paused}/pause")).status_code == 200

            async def is_paused() -> bool:
                return await status(b, paused) == "paused"

            await until(is_paused, "the pause to reach the worker")
            assert (await b.post(f"/v1/research/{paused}/resume")).status_code == 200

            # Cancel through B while a worker runs it: the worker stops it.
            doomed = (await a.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
            await collect(a, f"/v1/research/{doomed}/events", until="node_finished")
            cancelled = await b.post(f"/v1/research/{doomed}/cancel")

            approved_frames = await collect(a, f"/v1/research/{waiting}/events")
            paused_frames = await collect(a, f"/v1/research/{paused}/events")
            doomed_frames = await collect(b, f"/v1/research/{doomed}/events")
            final = {t: await status(a, t) for t in (waiting, paused, doomed)}
    assert asked[-1].event == "approval_required" and asked[-1].data["type"] == "plan"
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert final == {waiting: "completed", paused: "completed", doomed: "cancelled"}
    for frames in (approved_frames, paused_frames, doomed_frames):
        assert_once_in_order(frames)
    statuses = [f.data["status"] for f in paused_frames if f.event == "status"]
    assert statuses.index("paused") < statuses.index("completed")
    assert doomed_frames[-1].data == {"status": "cancelled"}
    assert not any(f.event == "report" for f in doomed_frames)


async def test_redis_stopped_mid_run_gives_503s_then_the_run_completes(
    environment: dict[str, str], tmp_path: Path
) -> None:
    data = tmp_path / "redis"
    data.mkdir()
    with redis_server(data_dir=data) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        env = environment | {"RESEARCH_REDIS_URL": url}
        async with deployment(env, tmp_path, workers=1) as (a, _b, _):
            thread_id = (await a.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
            await collect(a, f"/v1/research/{thread_id}/events", until="node_finished")
            with contextlib.suppress(redis.ConnectionError):
                redis.Redis.from_url(url).shutdown(save=True)  # away mid-run, data kept
            during = await a.get(f"/v1/research/{thread_id}")
            ready = await a.get("/readyz")
            # Away longer than the client's own retries and the worker's lease: the
            # worker's writes fail for real, and its hold on the run lapses.
            await asyncio.sleep(OUTAGE_S)
            with redis_server(port=port, data_dir=data):  # back: same port, same data

                async def completed() -> bool:
                    answer = await a.get(f"/v1/research/{thread_id}")
                    return answer.status_code == 200 and answer.json()["status"] in (
                        "completed",
                        "failed",
                    )

                await until(completed, "the run to finish after Redis came back")
                frames = await collect(a, f"/v1/research/{thread_id}/events")
                detail = (await a.get(f"/v1/research/{thread_id}")).json()
    assert during.status_code == 503 and ready.status_code == 503
    assert during.json()["error"]["code"] == "backend_unavailable"
    assert detail["status"] == "completed" and detail["report"], detail.get("error")
    assert_once_in_order(frames)
    assert_no_crash_logged(tmp_path)


# Longer than a command's timeout (`REDIS_TIMEOUT_S`) and the workers' lease: writes in
# flight when Redis stops fail on the client's side, whether or not Redis applies them
# once it runs again, and the runs are taken up again.
STALL_S = 6.0
STOP_AFTER_STALL_S = 120.0


async def test_a_stalled_redis_loses_and_doubles_no_event(
    environment: dict[str, str], tmp_path: Path
) -> None:
    with redis_server() as url:
        server_pid = int(redis.Redis.from_url(url).info("server")["process_id"])
        env = environment | {"RESEARCH_REDIS_URL": url, "RESEARCH_SEARCH_DELAY_MS": "300"}
        # A worker that lost its executions' leases to the stall now and then takes more than
        # 30 s to stop on SIGTERM (seen 1 in 3 full-suite runs; the cause is not found
        # yet, see the issue's note): what this test judges is the runs' events.
        async with deployment(env, tmp_path, stop_s=STOP_AFTER_STALL_S) as (a, b, _):
            first = (await a.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
            reference = await collect(b, f"/v1/research/{first}/events")
            started = [
                (await a.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
                for _ in range(10)
            ]
            # Every run past its first step, some in the middle of one.
            await asyncio.gather(
                *(collect(b, f"/v1/research/{t}/events", until="node_finished") for t in started)
            )
            # Followers watching through the stall: their streams wait for Redis.
            connected = [asyncio.Event() for _ in started]
            live = [
                asyncio.ensure_future(collect(a, f"/v1/research/{t}/events", connected=up))
                for t, up in zip(started, connected, strict=True)
            ]
            await asyncio.wait_for(asyncio.gather(*(up.wait() for up in connected)), WAIT_S)
            os.kill(server_pid, signal.SIGSTOP)
            try:
                await asyncio.sleep(STALL_S)
            finally:
                os.kill(server_pid, signal.SIGCONT)
            streams = [collect(b, f"/v1/research/{t}/events") for t in started]
            frames = await asyncio.wait_for(asyncio.gather(*streams), WAIT_S)
            watched = await asyncio.wait_for(asyncio.gather(*live), WAIT_S)
    assert_once_in_order(reference)
    for stream in [*frames, *watched]:
        assert_once_in_order(stream)
        assert timeline(stream) == timeline(reference)
    assert_no_crash_logged(tmp_path)
