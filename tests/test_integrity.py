"""What a client cannot break by naming the wrong thing at the wrong moment, over real HTTP.

A checkpoint id that is not the thread's, a delete racing an approval, a filter key the
store cannot hold, a topic with no words: each answers a clear 4xx and loses nothing.
"""

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from app.settings import Settings

from .servers import KEY_A, KEY_B, two_key_clients
from .sse import collect
from .support import TOPIC

Service = Callable[..., Any]


@pytest.fixture
def service(tmp_path: Path, corpus_index: Path, stores: dict[str, Any]) -> Service:
    """A server with two keys; yields one httpx client per key and the settings."""

    @asynccontextmanager
    async def running(
        **overrides: Any,
    ) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient, Settings]]:
        settings = Settings(
            data_dir=tmp_path / "data",
            corpus_index=corpus_index,
            search_provider="local",
            api_keys=[KEY_A, KEY_B],
            **(stores | overrides),
        )
        async with two_key_clients(settings) as (a, b):
            yield a, b, settings

    return running


async def _finished(client: httpx.AsyncClient, **options: Any) -> str:
    started = await client.post("/v1/research", json={"topic": TOPIC, "options": options})
    assert started.status_code == 202, started.text
    thread = str(started.json()["thread_id"])
    await collect(client, f"/v1/research/{thread}/events")
    return thread


async def _waiting(client: httpx.AsyncClient) -> str:
    started = await client.post(
        "/v1/research", json={"topic": TOPIC, "options": {"approval": "plan"}}
    )
    thread = str(started.json()["thread_id"])
    await collect(client, f"/v1/research/{thread}/events", until="approval_required")
    for _ in range(200):  # the status follows the event by one write
        if (await client.get(f"/v1/research/{thread}")).json()["status"] == "waiting_for_approval":
            return thread
        await asyncio.sleep(0.05)
    raise AssertionError("the run never waited for approval")


# -- 1. a checkpoint id that is not the thread's ------------------------------------------


async def test_a_checkpoint_id_not_on_the_thread_is_not_found_and_changes_nothing(
    service: Service,
) -> None:
    async with service() as (a, _, _settings):
        mine = await _finished(a)
        other = await _finished(a)
        foreign = (await a.get(f"/threads/{other}/state")).json()["checkpoint"]["checkpoint_id"]
        own = (await a.get(f"/threads/{mine}/state")).json()
        assert own["values"]["final_report"] and own["next"] == []
        for made_up in (foreign, str(uuid.uuid4()), "nonsense"):
            read = await a.get(f"/threads/{mine}/state/{made_up}")
            assert read.status_code == 404, (made_up, read.text)
            assert "no checkpoint" in read.json()["detail"]
            posted = await a.post(
                f"/threads/{mine}/state/checkpoint", json={"checkpoint": {"checkpoint_id": made_up}}
            )
            assert posted.status_code == 404, (made_up, posted.text)
            for body in (
                {"values": {"topic": "overwritten"}, "checkpoint_id": made_up},
                {"values": {"topic": "overwritten"}, "checkpoint": {"checkpoint_id": made_up}},
            ):
                written = await a.post(f"/threads/{mine}/state", json=body)
                assert written.status_code == 404, (body, written.text)
        after = (await a.get(f"/threads/{mine}/state")).json()
        assert after == own, "the thread is as it was"
        assert (await a.get(f"/v1/research/{mine}")).json()["status"] == "completed"
        # The thread's own checkpoint still reads.
        at = own["checkpoint"]["checkpoint_id"]
        assert (await a.get(f"/threads/{mine}/state/{at}")).json()["values"] == own["values"]


# -- 2. a delete racing an approval ----------------------------------------------------------


def _rows_of(settings: Settings, thread: str) -> dict[str, int]:
    """Rows that still name `thread`, by table (SQLite) or key (Redis)."""
    if settings.redis_url:
        client = redis.Redis.from_url(settings.redis_url)
        try:
            keys = [k.decode() for k in client.scan_iter(match=f"*{thread}*", count=1000)]
            events = [k for k in keys if not k.startswith("saq:")]
            return {key: 1 for key in events}
        finally:
            client.close()
    found: dict[str, int] = {}
    with sqlite3.connect(settings.checkpoint_path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            if "thread_id" in columns:
                (n,) = db.execute(
                    f"SELECT count(*) FROM {table} WHERE thread_id = ?", (thread,)
                ).fetchone()
                if n:
                    found[table] = n
    return found


async def _after(seconds: float, request: Awaitable[httpx.Response]) -> httpx.Response:
    await asyncio.sleep(seconds)
    return await request


async def test_a_delete_racing_an_approval_stops_the_run_and_leaves_nothing(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    async with service() as (a, _, settings):
        for attempt in range(8):
            thread = await _waiting(a)

            approve = a.post(f"/v1/research/{thread}/resume", json={"decision": "approve"})
            delete = _after(attempt % 4 * 0.002, a.delete(f"/v1/research/{thread}"))
            if attempt % 2:  # each side first, at a few offsets
                deleted, approved = await asyncio.gather(delete, approve)
            else:
                approved, deleted = await asyncio.gather(approve, delete)
            assert deleted.status_code == 204, deleted.text
            # The approval came first (and its run was stopped), or found the thread gone.
            assert approved.status_code in (200, 404, 409), approved.text
            assert (await a.get(f"/v1/research/{thread}")).status_code == 404
            # Another run from start to end: time for a run left going to write.
            await _finished(a)
            assert _rows_of(settings, thread) == {}, "nothing of the deleted thread is left"
            assert (await a.get(f"/v1/research/{thread}")).status_code == 404
    assert not [r for r in caplog.records if r.exc_info], "no traceback in the log"


# -- 5. what the stores cannot take answers 422 ------------------------------------------


async def test_a_history_filter_key_a_store_cannot_hold_is_a_422(service: Service) -> None:
    async with service() as (a, _, _settings):
        thread = await _finished(a)
        for key in ("a b", "x'--", "é", "a/b", ""):
            answer = await a.post(f"/threads/{thread}/history", json={"metadata": {key: 1}})
            assert answer.status_code == 422, (key, answer.text)
            assert "metadata filter key" in answer.json()["detail"]
        fine = await a.post(f"/threads/{thread}/history", json={"metadata": {"source": "loop"}})
        assert fine.status_code == 200 and fine.json()


@pytest.mark.parametrize("topic", ["???", "!!! ... ---", "_", "¿?"])
async def test_a_topic_with_no_words_is_refused_at_the_edge(service: Service, topic: str) -> None:
    async with service() as (a, _, _settings):
        answer = await a.post("/v1/research", json={"topic": topic})
        assert answer.status_code == 422, answer.text
        assert "no words to research" in answer.text
        name = f"wordless-{uuid.uuid4().hex[:8]}"
        await a.post("/threads", json={"thread_id": name})
        run = await a.post(
            f"/threads/{name}/runs", json={"assistant_id": "research", "input": {"topic": topic}}
        )
        assert run.status_code == 422, run.text
        assert "no words to research" in run.text
        assert (await a.get(f"/v1/research/{name}")).json()["status"] == "new"
        listed = (await a.get("/v1/research", params={"limit": 100})).json()["items"]
        assert topic not in [t["topic"] for t in listed], "nothing was started"
