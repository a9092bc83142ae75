"""Watches across real processes killed with SIGKILL: no due refresh lost, none run twice.

Embedded: the service (SQLite) is killed before a refresh is due and started again after,
then killed while a refresh runs. On Redis: one API process that only serves and two
workers, which both schedule watches; one worker is killed while a refresh runs.
"""

import signal
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from .processes import server, serving, together, working
from .redis_server import redis_server
from .servers import free_port
from .support import TOPIC
from .test_workers import environment, status, until  # noqa: F401

pytestmark = pytest.mark.slow

FAST = {"RESEARCH_WATCH_MIN_SECONDS": "0.5", "RESEARCH_WATCH_POLL_SECONDS": "0.1"}


def kill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)


async def watch(client: httpx.AsyncClient, thread_id: str) -> dict[str, Any]:
    answer = await client.get(f"/v1/research/{thread_id}/watch")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def changes(client: httpx.AsyncClient, thread_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (
        await client.get(f"/v1/research/{thread_id}/watch/changes")
    ).json()
    return found


async def finished_thread(client: httpx.AsyncClient) -> str:
    thread_id: str = (await client.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]

    async def done() -> bool:
        return await status(client, thread_id) == "completed"

    await until(done, "the watched run to complete")
    return thread_id


async def in_flight_and_running(client: httpx.AsyncClient, watched: str) -> bool:
    current = (await watch(client, watched))["in_flight"]
    if current is None:
        return False
    # Claimed a moment before its thread is made: a 404 until then, not yet running.
    answer = await client.get(f"/v1/research/{current}")
    assert answer.status_code in (200, 404), answer.text
    return answer.status_code == 200 and answer.json()["status"] == "running"


async def assert_each_refresh_once(client: httpx.AsyncClient, watched: str) -> list[str]:
    """Stop the watch; every refresh claimed is one thread, every one an entry."""
    # A day's interval: no more refreshes fall due; the one in flight is recorded.
    assert (await client.post(f"/v1/research/{watched}/watch", json={"every": "P1D"})).is_success

    async def idle() -> bool:
        return (await watch(client, watched))["in_flight"] is None

    await until(idle, "the refresh in flight to be recorded")
    last = await watch(client, watched)
    entries = await changes(client, watched)
    assert (await client.delete(f"/v1/research/{watched}/watch")).status_code == 204
    threads = [
        t["thread_id"]
        for t in (await client.get("/v1/research", params={"limit": 100})).json()["items"]
        if t["thread_id"] != watched
    ]
    seqs = sorted(e["seq"] for e in entries)
    assert seqs == list(range(1, len(seqs) + 1)), f"an entry lost or doubled: {seqs}"
    # One thread per refresh claimed: no due time started two.
    assert len(threads) == last["refreshes"], (threads, last)
    recorded = {e["thread_id"] for e in entries}
    assert len(recorded) == len(entries)
    # Every refresh has its entry: none was started and dropped.
    assert set(threads) == recorded, (threads, entries, last)
    assert all(e["status"] == "completed" for e in entries), entries
    for entry in sorted(entries, key=lambda e: e["seq"])[1:]:
        before = next(e for e in entries if e["seq"] == entry["seq"] - 1)
        assert entry["previous"] == before["thread_id"]
    return threads


async def test_a_killed_service_loses_no_due_refresh_and_runs_none_twice(
    environment: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    env = environment | FAST | {"RESEARCH_SEARCH_DELAY_MS": "300"}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        with server(env, port, tmp_path / "api0.log") as first:
            watched = await finished_thread(client)
            made = await client.post(f"/v1/research/{watched}/watch", json={"every": "PT2S"})
            assert made.status_code == 201, made.text
            kill(first)  # before the first refresh is due
        due = datetime.fromisoformat(made.json()["next_due"])

        async def past_due() -> bool:
            return datetime.now(UTC) > due

        await until(past_due, "the first refresh to fall due while the service is down")
        with server(env, port, tmp_path / "api1.log") as second:
            # Picked at start-up: ready, the service has claimed the refresh it missed.
            assert (await watch(client, watched))["refreshes"] == 1
            await until(lambda: in_flight_and_running(client, watched), "a refresh running")
            kill(second)  # in the middle of a refresh
        with server(env, port, tmp_path / "api2.log"):
            killed_during = (await watch(client, watched))["refreshes"]

            async def past_the_kill() -> bool:
                return len(await changes(client, watched)) >= killed_during + 1

            await until(past_the_kill, "the interrupted refresh and one more recorded")
            threads = await assert_each_refresh_once(client, watched)
            assert len(threads) >= 2


async def test_two_workers_schedule_a_watch_once_and_survive_a_killed_worker(
    environment: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    with redis_server() as url:
        env = environment | FAST | {"RESEARCH_REDIS_URL": url, "RESEARCH_SEARCH_DELAY_MS": "300"}
        port = free_port()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            with together(
                serving(env, port, tmp_path / "api.log", "--no-worker"),
                working(env, tmp_path / "worker0.log"),
                working(env, tmp_path / "worker1.log"),
            ) as (_, doomed, _):
                watched = await finished_thread(client)
                made = await client.post(f"/v1/research/{watched}/watch", json={"every": "PT1S"})
                assert made.status_code == 201, made.text
                await until(lambda: in_flight_and_running(client, watched), "a refresh running")
                kill(doomed)
                killed_during = (await watch(client, watched))["refreshes"]

                async def past_the_kill() -> bool:
                    return len(await changes(client, watched)) >= killed_during + 1

                await until(past_the_kill, "the interrupted refresh and one more recorded")
                # Both workers scheduled all along: still one thread per due refresh.
                await assert_each_refresh_once(client, watched)


async def test_overlapping_due_times_are_skipped(
    environment: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    """A refresh that outlasts the interval: due times passing meanwhile are skipped."""
    env = environment | FAST | {"RESEARCH_SEARCH_DELAY_MS": "1500"}
    port = free_port()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        with server(env, port, tmp_path / "api.log"):
            watched = await finished_thread(client)
            await client.post(f"/v1/research/{watched}/watch", json={"every": "PT0.5S"})

            async def skipped() -> bool:
                return bool((await watch(client, watched))["skipped"])

            await until(skipped, "a due time to pass while a refresh runs")
            running = [
                t
                for t in (await client.get("/v1/research")).json()["items"]
                if t["status"] in ("queued", "running")
            ]
            assert len(running) == 1, running
