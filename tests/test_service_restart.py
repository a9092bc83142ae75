"""A server killed with SIGKILL mid-run finishes the run after a restart."""

import asyncio
import os
import signal
from pathlib import Path

import httpx

from .processes import server, serving, together
from .servers import free_port
from .sse import collect
from .support import TOPIC


async def test_a_run_survives_a_killed_server_and_its_event_ids_continue(
    tmp_path: Path, corpus_index: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    env |= {
        "RESEARCH_DATA_DIR": str(tmp_path / "data"),
        "RESEARCH_CONFIG": str(tmp_path / "none.toml"),
        "RESEARCH_CORPUS_INDEX": str(corpus_index),
        "RESEARCH_SEARCH_PROVIDER": "local",
    }
    port, log = free_port(), tmp_path / "server.log"
    base = f"http://127.0.0.1:{port}"
    with server(env | {"RESEARCH_SEARCH_DELAY_MS": "500"}, port, log) as first:
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            thread_id = (
                await client.post(
                    "/v1/research",
                    json={"topic": TOPIC, "options": {"min_sources": 100, "max_iterations": 4}},
                )
            ).json()["thread_id"]
            seen = await collect(client, f"/v1/research/{thread_id}/events", until="note")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    with server(env, port, log):
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            rest = await collect(
                client,
                f"/v1/research/{thread_id}/events",
                headers={"Last-Event-ID": str(seen[-1].id)},
            )
            detail = (await client.get(f"/v1/research/{thread_id}")).json()
            everything = await collect(client, f"/v1/research/{thread_id}/events")
    ids = [f.id for f in seen + rest]
    assert ids == list(range(1, len(ids) + 1)), "event ids continue without gaps or repeats"
    assert [f.id for f in everything] == ids
    assert rest[-1].event == "done" and detail["status"] == "completed" and detail["report"]
    assert [f.event for f in everything].count("plan") == 1, "the plan was not made again"
    assert any(f.event == "status" and f.data.get("recovered") for f in rest)


async def test_two_api_processes_on_redis_share_threads_and_events(
    tmp_path: Path, corpus_index: Path, redis_url: str
) -> None:
    """Runs started through API A stream through API B: every event once, ids increasing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    env |= {
        "RESEARCH_CONFIG": str(tmp_path / "none.toml"),
        "RESEARCH_CORPUS_INDEX": str(corpus_index),
        "RESEARCH_SEARCH_PROVIDER": "local",
        "RESEARCH_REDIS_URL": redis_url,
        "RESEARCH_SEARCH_DELAY_MS": "100",
    }
    port_a, port_b = free_port(), free_port()
    with together(
        serving(env | {"RESEARCH_DATA_DIR": str(tmp_path / "a")}, port_a, tmp_path / "a.log"),
        serving(env | {"RESEARCH_DATA_DIR": str(tmp_path / "b")}, port_b, tmp_path / "b.log"),
    ):
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_a}", timeout=30) as a,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_b}", timeout=30) as b,
        ):
            started = [
                (await a.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
                for _ in range(10)
            ]
            streams = await asyncio.gather(
                *(collect(b, f"/v1/research/{t}/events") for t in started)
            )
            details = [(await b.get(f"/v1/research/{t}")).json() for t in started]
            listed = (await b.get("/v1/research", params={"limit": 50})).json()["items"]
    for frames in streams:
        ids = [f.id for f in frames]
        assert ids == list(range(1, len(ids) + 1)), "every event once, in order"
        assert frames[-1].event == "done"
    assert all(d["status"] == "completed" and d["report"] for d in details)
    assert set(started) <= {item["thread_id"] for item in listed}
    assert not (tmp_path / "a" / "checkpoints.sqlite").exists(), "nothing in the SQLite file"
